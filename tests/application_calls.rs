//! Every call as without the layer, through the real loader on RADV: a profiler's capture flags
//! (a pipeline made with them is built as asked, so the driver has what it is asked for after);
//! a pipeline asked again by its module identifier alone (made, in the same process and in a
//! later one, both backends); shader modules made and destroyed all session (the layer keeps none
//! of their code); a title's first run says nothing at the default level; a pipeline made from
//! the binaries of its twin reports valid feedback.

mod common;
use common::*;
use std::path::Path;
use std::time::Duration;

/// Long enough for any of these runs on a loaded 2-core machine; a hang runs into it.
const LIMIT: Duration = Duration::from_secs(180);

fn app(tmp: &Path, args: &[&str]) -> Run {
    let run = App::new(Driver::Radv, tmp)
        .with_layer()
        .args(args)
        .run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    run
}

#[test]
fn a_pipeline_made_with_capture_flags_has_what_a_profiler_asks_of_it_on_every_run() {
    let tmp = tempfile::tempdir().unwrap();
    let args = ["--compute", "4", "--graphics", "0", "--capture-internal"];
    let without = App::new(Driver::Radv, tmp.path())
        .args(&args)
        .run_within(LIMIT);
    assert!(without.ok, "{}", without.all());
    let expected = &without.summary["capture"];
    assert!(
        expected["representations"].as_u64().unwrap() > 0,
        "{}",
        without.all()
    );
    // Before: the second run's pipeline came from kept binaries, which hold no internal
    // representations, and RADV crashed when asked for them (SIGSEGV).
    for run in ["cold", "warm"] {
        let r = app(tmp.path(), &args);
        assert_eq!(&r.summary["capture"], expected, "{run}: {}", r.all());
        let w = r.watch();
        assert_eq!(w.unkeyed, 1, "{run}: {}", r.all());
    }
}

/// `--identifier`, with the identifier kept in `file` (written by the first process, read by a
/// later one that asks by it alone), and `extra`.
fn by_identifier(tmp: &Path, file: &Path, extra: &[&str]) -> Run {
    by_identifier_in(App::new(Driver::Radv, tmp), file, extra)
}

/// [`by_identifier`] through `app` (its settings), the layer on.
fn by_identifier_in(app: App, file: &Path, extra: &[&str]) -> Run {
    let args = [
        "--compute",
        "4",
        "--graphics",
        "0",
        "--identifier",
        "--identifier-file",
        file.to_str().unwrap(),
    ];
    let run = app
        .with_layer()
        .args(&[&args[..], extra].concat())
        .run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    run
}

#[test]
fn a_pipeline_asked_by_its_module_identifier_is_made_in_this_process_and_a_later_one() {
    asked_by_identifier_in_this_process_and_a_later_one(&[]);
}

/// Later processes ask as DXVK does: `FAIL_ON_PIPELINE_COMPILE_REQUIRED` in the application's own
/// `VkPipelineCreateFlags2CreateInfoKHR`, which a build from binaries may not carry (before: an
/// entry of binaries was never used for it, so `VK_PIPELINE_COMPILE_REQUIRED`). The first
/// process's legacy flags let the `binary` backend keep binaries.
#[test]
fn a_pipeline_asked_by_identifier_with_flags2_is_made_from_kept_binaries() {
    asked_by_identifier_in_this_process_and_a_later_one(&["--flags2"]);
}

/// The first process asks with legacy flags, the later ones with `later`.
fn asked_by_identifier_in_this_process_and_a_later_one(later: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("identifier");
    // The module made, its identifier read, the pipeline asked again by it with
    // FAIL_ON_PIPELINE_COMPILE_REQUIRED: made (before, VK_PIPELINE_COMPILE_REQUIRED every run,
    // both backends).
    let first = by_identifier(tmp.path(), &file, &[]);
    let asked = &first.summary["identifier"];
    assert_eq!(asked["again"], "SUCCESS", "{}", first.all());
    assert_eq!(asked["module_and_create_info_agree"], true);
    assert_eq!(first.watch().unkeyed, 0, "{}", first.all());
    // A later process that asks by the identifier alone, never making the module.
    for run in ["second", "third"] {
        let later = by_identifier(tmp.path(), &file, later);
        let asked = &later.summary["identifier"];
        assert_eq!(asked["first"], serde_json::Value::Null, "{}", later.all());
        assert_eq!(asked["again"], "SUCCESS", "{run}: {}", later.all());
        let w = later.watch();
        assert_eq!((w.found, w.compiled), (5, 0), "{run}: {}", later.all());
    }
}

/// A device that keeps nothing (`PIPEKEEP_MAX_BYTES=0`) writes nothing, identifiers included.
#[test]
fn a_device_that_keeps_nothing_keeps_no_identifiers() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("identifier");
    let run = by_identifier_in(
        App::new(Driver::Radv, tmp.path()).env("PIPEKEEP_MAX_BYTES", "0"),
        &file,
        &[],
    );
    assert_eq!(
        run.summary["identifier"]["again"],
        "SUCCESS",
        "{}",
        run.all()
    );
    let kept = tmp
        .path()
        .join("store/pipekeep-testapp")
        .join(pipekeep::store::identifiers::FILE_NAME);
    assert!(!kept.exists(), "{}", run.all());
}

#[test]
fn an_identifier_the_layer_never_saw_goes_to_the_driver_as_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("identifier");
    // Not an identifier of any module this store saw made.
    std::fs::write(&file, [0x5a; 32]).unwrap();
    let run = by_identifier(tmp.path(), &file, &[]);
    assert_eq!(
        run.summary["identifier"]["again"],
        "PIPELINE_COMPILE_REQUIRED",
        "{}",
        run.all()
    );
    // Unkeyed, asked of the driver as the application asked: nothing made, nothing counted.
    assert_eq!(run.watch().built, 4, "{}", run.all());
}

/// How much the process grew making and destroying 2,000 distinct 66 KB modules.
fn churn_growth_kib(tmp: &Path, layer: bool) -> u64 {
    let app = App::new(Driver::Radv, tmp);
    let app = if layer { app.with_layer() } else { app };
    let run = app
        .args(&[
            "--compute",
            "1",
            "--graphics",
            "0",
            "--module-churn",
            "2000",
        ])
        .run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.summary["churn"]["failed"], 0, "{}", run.all());
    run.summary["churn"]["growth_kib"].as_u64().unwrap()
}

#[test]
fn modules_made_and_destroyed_leave_no_code_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let without = churn_growth_kib(tmp.path(), false);
    let through = churn_growth_kib(tmp.path(), true);
    // Before: 125.6 MB more (every module's SPIR-V kept until vkDestroyDevice).
    assert!(
        through < without + 16 * 1024,
        "through pipekeep {through} KiB, without {without} KiB"
    );
}

#[test]
fn a_titles_first_run_says_nothing_at_the_default_level() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("identifier");
    // Pipelines asked again at once (found still queued, before their directory is written),
    // and by identifier.
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_LOG", "warn")
        .args(&[
            "--compute",
            "20",
            "--graphics",
            "10",
            "--again-fail-on-compile",
            "--identifier",
            "--identifier-file",
            file.to_str().unwrap(),
        ])
        .run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    assert!(
        run.summary["again_made"].as_u64().unwrap() > 0,
        "{}",
        run.all()
    );
    // Before: "no loading marker can be kept ... entries are loaded unguarded".
    let said: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(said.is_empty(), "{}", run.all());
}

#[test]
fn a_pipeline_made_from_its_twins_binaries_reports_valid_feedback() {
    let tmp = tempfile::tempdir().unwrap();
    let run = app(
        tmp.path(),
        &[
            "--compute",
            "0",
            "--graphics",
            "20",
            "--threads",
            "1",
            "--feedback",
            "--cull-twins",
        ],
    );
    if backend_is_binary(&run) {
        assert!(run.watch().shared > 0, "{}", run.all());
    }
    // Before: the twins' records came back with no flags and no duration.
    assert_eq!(run.summary["feedback_valid"], 20, "{}", run.all());
}

fn backend_is_binary(run: &Run) -> bool {
    run.stderr.contains("backend=\"binary\"")
}

/// The probes with Debian 12's validation layer above and below pipekeep: it reports nothing,
/// cold or warm.
#[test]
fn the_validation_layer_reports_nothing_of_capture_flags_or_identifiers() {
    for order in [[VALIDATION, LAYER], [LAYER, VALIDATION]] {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("identifier");
        for run in ["cold", "warm"] {
            let r = App::new(Driver::Radv, tmp.path())
                .env("VK_LOADER_DEBUG", "layer")
                .args(&[
                    "--compute",
                    "4",
                    "--graphics",
                    "0",
                    "--capture-internal",
                    "--identifier",
                    "--identifier-file",
                    file.to_str().unwrap(),
                    "--layers",
                    &order.join(","),
                ])
                .run_within(LIMIT);
            assert!(r.ok, "{order:?} {run}: {}", r.all());
            assert_eq!(r.device_layer_stack(), order.to_vec(), "{}", r.all());
            assert_eq!(r.summary["identifier"]["again"], "SUCCESS", "{}", r.all());
            assert_eq!(
                r.validation_messages(),
                Vec::<String>::new(),
                "{order:?} {run}: {}",
                r.all()
            );
        }
    }
}
