//! The whole flow through the real loader: two runs into one store from several threads, the
//! compile watch, the application's own feedback, the loading marker, the size bound, lavapipe,
//! the validation layer below and above, an unwritable store, the fail-on-compile flag and an
//! application that never destroys its device.

mod common;
use common::*;
use std::path::Path;

const MIX: [&str; 8] = [
    "--compute",
    "40",
    "--graphics",
    "20",
    "--threads",
    "4",
    "--batch",
    "5",
];

fn app(driver: Driver, tmp: &Path, args: &[&str]) -> Run {
    app_with(driver, tmp, &[], args)
}

/// [`app`] with settings of its own.
fn app_with(driver: Driver, tmp: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let run = env
        .iter()
        .fold(App::new(driver, tmp).with_layer(), |app, (k, v)| {
            app.env(k, v)
        })
        .args(args)
        .run();
    assert!(run.ok, "{}", run.all());
    run
}

#[test]
fn a_second_run_from_four_threads_finds_every_pipeline() {
    let tmp = tempfile::tempdir().unwrap();
    let cold = app(Driver::Radv, tmp.path(), &MIX);
    assert_eq!(cold.made(), 60);
    let w = cold.watch();
    assert_eq!(
        (w.built, w.found, w.compiled, w.written, w.unkeyed),
        (60, 0, 60, 60, 0),
        "{}",
        cold.all()
    );
    assert_eq!(entries(&tmp.path().join("store")).len(), 60);
    // Every fifty, a line; and the final one. The fiftieth pipeline logs the tally as it stands
    // when its line is written: four threads may have made a few more by then.
    let periodic: Vec<u64> = cold
        .stderr
        .lines()
        .filter(|l| l.contains("compile watch:"))
        .filter_map(|l| l.split(" built=").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert!(
        periodic.len() == 2 && (50..=60).contains(&periodic[0]) && periodic[1] == 60,
        "{periodic:?}\n{}",
        cold.all()
    );

    let warm = app(
        Driver::Radv,
        tmp.path(),
        &[&MIX[..], &["--feedback", "--app-cache"]].concat(),
    );
    let w = warm.watch();
    assert_eq!(
        (w.built, w.found, w.compiled, w.written),
        (60, 60, 0, 0),
        "{}",
        warm.all()
    );
    // The application's own feedback says cache hit, though its cache was empty.
    assert_eq!(warm.summary["feedback_hits"], 60, "{}", warm.all());

    let runs =
        std::fs::read_to_string(tmp.path().join("store/pipekeep-testapp/runs.jsonl")).unwrap();
    let runs: Vec<serde_json::Value> = runs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0]["compiled"].as_u64(), runs[1]["found"].as_u64()),
        (Some(60), Some(60))
    );
}

#[test]
fn the_same_pipelines_at_api_1_0_are_found_through_the_feedback_extension() {
    let tmp = tempfile::tempdir().unwrap();
    app(Driver::Radv, tmp.path(), &["--api", "1.0"]);
    let warm = app(Driver::Radv, tmp.path(), &["--api", "1.0"]);
    assert!(
        warm.stderr.contains("feedback=true"),
        "the layer adds VK_EXT_pipeline_creation_feedback\n{}",
        warm.all()
    );
    assert_eq!(warm.watch().found, warm.made());
}

/// Of 60 pipelines, 59 found and the one a stale marker named dropped, compiled and written.
fn assert_only_this_entry_was_dropped(run: &Run, victim: &str) {
    let w = run.watch();
    assert_eq!(
        (w.found, w.compiled, w.written),
        (59, 1, 1),
        "{}",
        run.all()
    );
    let dropped = format!("dropped entry={victim} reason=stale-marker");
    assert!(run.stderr.contains(&dropped), "{}", run.all());
}

#[test]
fn a_stale_loading_marker_costs_exactly_one_entry() {
    let tmp = tempfile::tempdir().unwrap();
    app(Driver::Radv, tmp.path(), &MIX);
    let all = entries(&tmp.path().join("store"));
    let victim = &all[7];
    // A thread of a process that died inside the driver left its marker naming one entry.
    std::fs::write(
        victim.parent().unwrap().join("4000000-4000001.loading"),
        victim.file_name().unwrap().to_str().unwrap(),
    )
    .unwrap();
    let run = app(Driver::Radv, tmp.path(), &MIX);
    assert_only_this_entry_was_dropped(&run, victim.file_name().unwrap().to_str().unwrap());
    assert!(!victim
        .parent()
        .unwrap()
        .join("4000000-4000001.loading")
        .exists());
}

#[test]
fn a_process_that_dies_while_the_driver_loads_an_entry_costs_exactly_that_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let one_thread = ["--compute", "40", "--graphics", "20", "--threads", "1"];
    app(Driver::Radv, tmp.path(), &one_thread);
    let dying = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_TEST_ABORT_IN_LOAD", "1")
        .args(&one_thread)
        .run();
    assert!(!dying.ok, "the process was to abort\n{}", dying.all());
    // The marker the dead thread held (written through its mapping) still names the entry.
    let dir = entries(&tmp.path().join("store"))[0]
        .parent()
        .unwrap()
        .to_path_buf();
    let markers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "loading"))
        .collect();
    assert_eq!(markers.len(), 1, "{markers:?}");
    let victim = std::fs::read_to_string(&markers[0]).unwrap();
    assert!(dir.join(&victim).is_file(), "the marker names {victim:?}");

    let run = app(Driver::Radv, tmp.path(), &one_thread);
    assert_only_this_entry_was_dropped(&run, &victim);
    assert!(!markers[0].exists());
}

#[test]
fn a_small_bound_holds_after_opening_and_the_first_used_pipelines_survive() {
    a_small_bound_holds_after_a_run(None);
}

/// The run's only pipeline opens the store and the device is destroyed before the opening
/// thread has run: the bound still holds once `vkDestroyDevice` returns. (A run that writes
/// nothing checks the bound nowhere but after opening; it was skipped here once.)
#[test]
fn a_small_bound_holds_after_a_run_that_ends_before_the_opening_thread_runs() {
    a_small_bound_holds_after_a_run(Some("until-destroyed"));
}

fn a_small_bound_holds_after_a_run(opening_late: Option<&str>) {
    let tmp = tempfile::tempdir().unwrap();
    app(Driver::Radv, tmp.path(), &IN_ORDER);
    let by_use = entries_by_use(&tmp.path().join("store"));
    let first_five: Vec<_> = by_use.iter().take(5).map(|e| e.0.clone()).collect();
    // The title's record counts within the bound too, at most its share (a quarter): the bound
    // leaves the entries the five first used's bytes.
    let record = tmp.path().join("store/pipekeep-testapp/record.foz");
    let bound = bound_leaving(bytes_with_pieces(&first_five) + 10, &record);
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_MAX_BYTES", bound.to_string())
        .env("PIPEKEEP_TEST_OPENING_LATE", opening_late.unwrap_or(""))
        .args(&["--compute", "1", "--graphics", "0", "--threads", "1"])
        .run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(
        run.watch().found,
        1,
        "the first-used pipeline survived\n{}",
        run.all()
    );
    let kept = entries(&tmp.path().join("store"));
    let total: u64 = entries_and_pieces(&tmp.path().join("store"))
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum::<u64>()
        + std::fs::metadata(&record).map_or(0, |m| m.len());
    assert!(total <= bound, "{total} > {bound}\n{}", run.all());
    let expected: Vec<_> = by_use.iter().take(5).map(|e| e.0.clone()).collect();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    assert_eq!(kept, expected_sorted, "the five first used survive");
}

#[test]
fn on_lavapipe_nothing_is_written_and_the_dispatch_is_right_with_and_without_the_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let with = app(
        Driver::Lavapipe,
        tmp.path(),
        &[&MIX[..], &["--dispatch"]].concat(),
    );
    assert_eq!(with.summary["dispatch"], "ok", "{}", with.all());
    assert_eq!(with.made(), 60);
    assert!(
        entries(&tmp.path().join("store")).is_empty(),
        "lavapipe's header-only cache is never written"
    );
    assert_eq!(with.watch().written, 0);
    let without = App::new(Driver::Lavapipe, tmp.path())
        .args(&[&MIX[..], &["--dispatch"]].concat())
        .run();
    assert!(
        without.ok && without.summary["dispatch"] == "ok",
        "{}",
        without.all()
    );
}

/// A run with the validation layer and pipekeep in `order`, through the default backend: with the
/// validation layer below, pipekeep uses no pipeline binaries (Debian 12's validation layer does
/// not know them: it crashed the application at the first kept pipeline).
fn validated(tmp: &Path, order: [&str; 2], api: &str) -> Run {
    let run = App::new(Driver::Radv, tmp)
        .env("VK_LOADER_DEBUG", "layer")
        .args(&[&MIX[..], &["--layers", &order.join(","), "--api", api]].concat())
        .run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(
        run.device_layer_stack(),
        order.to_vec(),
        "both layers inserted, in this order\n{}",
        run.all()
    );
    assert_eq!(
        run.validation_messages(),
        Vec::<String>::new(),
        "{}",
        run.all()
    );
    run
}

#[test]
fn the_validation_layer_below_pipekeep_reports_nothing_cold_or_warm() {
    let tmp = tempfile::tempdir().unwrap();
    for api in ["1.3", "1.0"] {
        validated(tmp.path(), [LAYER, VALIDATION], api);
        let warm = validated(tmp.path(), [LAYER, VALIDATION], api);
        assert_eq!(warm.watch().found, 60, "{}", warm.all());
    }
}

#[test]
fn the_validation_layer_above_pipekeep_reports_nothing_cold_or_warm() {
    let tmp = tempfile::tempdir().unwrap();
    validated(tmp.path(), [VALIDATION, LAYER], "1.3");
    let warm = validated(tmp.path(), [VALIDATION, LAYER], "1.3");
    assert_eq!(warm.watch().found, 60, "{}", warm.all());
}

#[test]
fn an_unwritable_store_makes_the_layer_a_pass_through_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_DIR", file.join("store"))
        .args(&MIX)
        .run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.made(), 60);
    assert_eq!(
        run.stderr.matches("cannot be opened").count(),
        1,
        "{}",
        run.all()
    );
    assert_eq!(run.watch().built, 60);
}

/// A store that cannot be written once it is open (here a root under `/proc`, where no directory
/// can be made): one line, every pipeline made, and, once writes have failed in a row, the rest
/// built as the application asked, with no capture to pay for (how many before that depends on
/// when the writer thread ran).
#[test]
fn a_store_whose_writes_fail_keeps_nothing_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let run = app_with(
        Driver::Radv,
        tmp.path(),
        &[("PIPEKEEP_DIR", "/proc/pipekeep-cannot-be-made")],
        &MIX,
    );
    assert_eq!(run.made(), 60);
    assert_eq!(
        run.stderr.matches("cannot be written").count(),
        1,
        "{}",
        run.all()
    );
    let w = run.watch();
    assert_eq!((w.built, w.found, w.written), (60, 0, 0), "{}", run.all());
    assert_eq!(w.compiled + w.passed, 60, "{}", run.all());
}

/// A bound of 0 keeps nothing: every miss is built as the application asked (nothing captured,
/// nothing written), and the store holds no entry.
#[test]
fn a_bound_of_zero_builds_every_pipeline_as_asked_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let run = app_with(
        Driver::Radv,
        tmp.path(),
        &[("PIPEKEEP_MAX_BYTES", "0")],
        &MIX,
    );
    let w = run.watch();
    assert_eq!(
        (w.built, w.passed, w.compiled, w.written),
        (60, 60, 0, 0),
        "{}",
        run.all()
    );
    assert!(entries_and_pieces(&tmp.path().join("store")).is_empty());
}

#[test]
fn fail_on_compile_required_is_made_only_when_the_store_has_it() {
    let tmp = tempfile::tempdir().unwrap();
    let args = ["--compute", "6", "--graphics", "4", "--fail-on-compile"];
    let empty = app(Driver::Radv, tmp.path(), &args);
    assert_eq!(empty.summary["compile_required"], 10, "{}", empty.all());
    assert_eq!(empty.made(), 0);
    app(
        Driver::Radv,
        tmp.path(),
        &["--compute", "6", "--graphics", "4"],
    );
    let kept = app(Driver::Radv, tmp.path(), &args);
    assert_eq!(kept.made(), 10, "{}", kept.all());
    assert_eq!(kept.summary["compile_required"], 0);
    assert_eq!(kept.watch().found, 10);
}

/// An application that builds a pipeline and at once asks for it again with the fail-on-compile
/// flag (asynchronous pre-compilers, vkd3d-proton) gets it made, as without the layer: the
/// entry still waiting in the writer's queue is found.
#[test]
fn a_pipeline_asked_again_with_fail_on_compile_right_after_its_build_is_made() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--compute",
        "6",
        "--graphics",
        "4",
        "--threads",
        "1",
        "--app-cache",
        "--again-fail-on-compile",
    ];
    let without = App::new(Driver::Radv, tmp.path()).args(&args).run();
    assert_eq!(
        (
            &without.summary["again_made"],
            &without.summary["again_compile_required"]
        ),
        (&serde_json::json!(10), &serde_json::json!(0)),
        "without the layer: {}",
        without.all()
    );
    let run = app(Driver::Radv, tmp.path(), &args);
    assert_eq!(run.summary["again_compile_required"], 0, "{}", run.all());
    assert_eq!(run.summary["again_made"], 10, "{}", run.all());
    let w = run.watch();
    assert_eq!(
        (w.built, w.compiled, w.found),
        (20, 10, 10),
        "{}",
        run.all()
    );
}

#[test]
fn an_application_that_never_destroys_its_device_still_gets_the_final_line_and_its_run() {
    let tmp = tempfile::tempdir().unwrap();
    let run = app(
        Driver::Radv,
        tmp.path(),
        &[&MIX[..], &["--no-destroy"]].concat(),
    );
    assert_eq!(run.watch().built, 60, "{}", run.all());
    let runs =
        std::fs::read_to_string(tmp.path().join("store/pipekeep-testapp/runs.jsonl")).unwrap();
    assert_eq!(runs.lines().count(), 1);
}

/// Whether `line` begins with the log's time stamp, RFC 3339 in UTC to the microsecond as
/// tracing-subscriber writes it (`2026-12-02T02:30:00.123456Z`), then two spaces.
fn stamped_rfc3339(line: &str) -> bool {
    let b = line.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        r.into_iter()
            .all(|i| b.get(i).is_some_and(u8::is_ascii_digit))
    };
    b.len() > 29
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..26)
        && &b[26..29] == b"Z  "
}

#[test]
fn the_final_line_at_exit_is_stamped_as_every_other_line_is() {
    let tmp = tempfile::tempdir().unwrap();
    let run = app(
        Driver::Radv,
        tmp.path(),
        &[&MIX[..], &["--no-destroy"]].concat(),
    );
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("compile watch:"))
        .collect();
    // A line every fifty pipelines through tracing, then the exit handler's own.
    assert!(lines.len() >= 2, "{}", run.all());
    let last = lines.last().unwrap();
    assert!(last.ends_with("(at exit)"), "{}", run.all());
    for line in &lines {
        assert!(
            stamped_rfc3339(line),
            "not stamped as RFC 3339: {line}\n{}",
            run.all()
        );
    }
    assert!(last[29..].starts_with("INFO compile watch:"), "{last}");
}

#[test]
fn the_title_comes_from_pipekeep_title_or_the_application_name() {
    let tmp = tempfile::tempdir().unwrap();
    app(
        Driver::Radv,
        tmp.path(),
        &[
            "--compute",
            "1",
            "--graphics",
            "0",
            "--app-name",
            "My Game: 2",
        ],
    );
    assert!(tmp.path().join("store/My_Game__2/host-pipelines").is_dir());
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_TITLE", "../x")
        .args(&["--compute", "1", "--graphics", "0"])
        .run();
    assert!(run.ok);
    assert!(tmp.path().join("store/.._x/host-pipelines").is_dir());
}

#[test]
fn two_instances_with_a_device_each_keep_their_own_data_and_share_one_opening() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--instances",
        "2",
        "--compute",
        "10",
        "--graphics",
        "6",
        "--threads",
        "2",
    ];
    let cold = app(Driver::Radv, tmp.path(), &args);
    // Each device's own final line counts its own 16 pipelines.
    let finals: Vec<&str> = cold
        .stderr
        .lines()
        .filter(|l| l.contains(" built=16 "))
        .collect();
    assert_eq!(finals.len(), 2, "{}", cold.all());
    assert_eq!(
        cold.stderr
            .matches("pipekeep is active on a device")
            .count(),
        2
    );
    assert_eq!(
        cold.stderr.matches("store opened").count(),
        1,
        "one opening per identity per process\n{}",
        cold.all()
    );
    assert_eq!(entries(&tmp.path().join("store")).len(), 16);
    let warm = app(Driver::Radv, tmp.path(), &args);
    let found: Vec<&str> = warm
        .stderr
        .lines()
        .filter(|l| l.contains(" built=16 ") && l.contains(" found=16 "))
        .collect();
    assert_eq!(found.len(), 2, "{}", warm.all());
}

#[test]
fn a_structure_the_key_does_not_understand_is_built_as_asked_and_not_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let args = ["--compute", "4", "--graphics", "6", "--line-state"];
    for _ in 0..2 {
        let run = app(Driver::Radv, tmp.path(), &args);
        assert_eq!(run.made(), 10, "{}", run.all());
        let w = run.watch();
        assert_eq!(
            w.unkeyed,
            6,
            "the graphics pipelines chain line rasterization state\n{}",
            run.all()
        );
        assert_eq!(w.built, 10);
    }
    assert_eq!(
        entries(&tmp.path().join("store")).len(),
        4,
        "only the compute pipelines are kept"
    );
}

/// Depth-clip state (`VkPipelineRasterizationDepthClipStateCreateInfoEXT`, which DXVK chains) is
/// keyed: the graphics pipelines are kept and found.
#[test]
fn depth_clip_state_is_keyed_and_found() {
    let tmp = tempfile::tempdir().unwrap();
    let args = ["--compute", "0", "--graphics", "6", "--depth-clip"];
    let cold = app(Driver::Radv, tmp.path(), &args).watch();
    assert_eq!((cold.unkeyed, cold.compiled), (0, 6));
    let warm = app(Driver::Radv, tmp.path(), &args).watch();
    assert_eq!((warm.found, warm.compiled), (6, 0));
}

/// A run leaves its order of use beside its entries (`use-order`), and the next run reads ahead
/// in it from its opening, before the bound lists the store; a damaged order costs one line and
/// is written again whole.
#[test]
fn the_order_of_use_is_remembered_and_read_ahead_from_and_a_damaged_one_is_written_again() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let cold = app(Driver::Radv, tmp.path(), &IN_ORDER);
    assert_eq!(cold.watch().written, 12, "{}", cold.all());
    let by_use: Vec<String> = entries_by_use(&store)
        .into_iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let dir = entries(&store)[0].parent().unwrap().to_path_buf();
    let order = dir.join("use-order");
    let names = |bytes: &[u8]| -> Vec<String> {
        pipekeep::store::order::decode(bytes)
            .unwrap()
            .iter()
            .map(|k| k.file_name().to_string())
            .collect()
    };
    assert_eq!(
        names(&std::fs::read(&order).unwrap()),
        by_use,
        "every entry, in the order the run used them"
    );

    // Every lookup waits for reading ahead: all 12 are read ahead, from the order.
    let warm = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_LOG", "debug")
        .env("PIPEKEEP_TEST_READ_AHEAD_FIRST", "1")
        .args(&IN_ORDER)
        .run();
    assert_eq!(warm.watch().found, 12, "{}", warm.all());
    assert!(
        warm.stderr.contains("read ahead held=12 "),
        "{}",
        warm.all()
    );
    let read = warm.stderr.find("read ahead held=").unwrap();
    let bound = warm.stderr.find("bound checked entries=").unwrap();
    assert!(
        read < bound,
        "read ahead before the bound listed the store\n{}",
        warm.all()
    );

    let mut bytes = std::fs::read(&order).unwrap();
    bytes[20] ^= 0x01;
    std::fs::write(&order, &bytes).unwrap();
    let damaged = app(Driver::Radv, tmp.path(), &IN_ORDER);
    assert_eq!(damaged.watch().found, 12, "{}", damaged.all());
    assert_eq!(
        damaged.stderr.matches("the use order is damaged").count(),
        1,
        "{}",
        damaged.all()
    );
    assert_eq!(names(&std::fs::read(&order).unwrap()), by_use);
}
