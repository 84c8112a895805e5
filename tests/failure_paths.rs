//! Every failure path of the layer, through the real loader on RADV: a device destroyed the
//! moment it was made never hangs; files that are not entries never stop the application; a
//! failed setup still passes every call through; a panic leaves nothing behind; a failed build is
//! asked once more, no more; a forked child passes through; flags2 pipelines are keyed; an
//! implicit layer's quiet default and a device that keeps nothing leave no trace.

mod common;
use common::*;
use std::path::Path;
use std::time::Duration;

/// Long enough for any of these runs on a loaded 2-core machine; a hang runs into it.
const LIMIT: Duration = Duration::from_secs(120);

fn app(tmp: &Path, args: &[&str]) -> Run {
    let run = App::new(Driver::Radv, tmp)
        .with_layer()
        .args(args)
        .run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    run
}

const NOTHING: [&str; 4] = ["--compute", "0", "--graphics", "0"];

#[test]
fn a_device_destroyed_at_once_after_a_filling_run_never_hangs() {
    let tmp = tempfile::tempdir().unwrap();
    let fill = app(
        tmp.path(),
        &["--compute", "240", "--graphics", "60", "--threads", "2"],
    );
    assert_eq!(fill.watch().written, 300, "{}", fill.all());
    // A window of one entry: the readers fill it at once and wait for lookups that never come.
    for _ in 0..12 {
        let run = App::new(Driver::Radv, tmp.path())
            .with_layer()
            .env("PIPEKEEP_READ_AHEAD", "4096")
            .args(&NOTHING)
            .run_within(LIMIT);
        assert!(run.ok, "{}", run.all());
    }
    // And with the default window, several devices made and destroyed at once in one process.
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .args(&[&NOTHING[..], &["--instances", "4"]].concat())
        .run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
}

#[test]
fn a_fifo_or_a_link_named_as_an_entry_is_dropped_and_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let args = ["--compute", "40", "--graphics", "20", "--threads", "2"];
    app(tmp.path(), &args);
    let all = entries(&tmp.path().join("store"));
    let outside = tmp.path().join("outside");
    std::fs::write(&outside, b"a file outside the store").unwrap();
    std::fs::remove_file(&all[3]).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &all[3],
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    for (victim, target) in [(&all[5], Path::new("/dev/zero")), (&all[7], &outside)] {
        std::fs::remove_file(victim).unwrap();
        std::os::unix::fs::symlink(target, victim).unwrap();
    }
    let run = app(tmp.path(), &args);
    let w = run.watch();
    assert_eq!((w.found, w.compiled), (57, 3), "{}", run.all());
    assert_eq!(
        run.stderr.matches("reason=not-a-file").count(),
        3,
        "{}",
        run.all()
    );
    assert_eq!(
        std::fs::read(&outside).unwrap(),
        b"a file outside the store"
    );
    // Compiled afresh and written again, as regular files.
    for victim in [&all[3], &all[5], &all[7]] {
        assert!(std::fs::symlink_metadata(victim).unwrap().is_file());
    }
}

#[test]
fn a_failed_setup_of_the_instance_or_the_device_still_passes_every_call_through() {
    for level in ["instance", "device"] {
        let tmp = tempfile::tempdir().unwrap();
        // The validation layer below pipekeep sees every call pipekeep passes down, destroys
        // included: a call lost on the way shows as a leak or an invalid handle.
        let run = App::new(Driver::Radv, tmp.path())
            .cache_backend()
            .env("PIPEKEEP_TEST_FAIL_SETUP", level)
            .env("VK_LOADER_DEBUG", "layer")
            .args(&["--layers", &[LAYER, VALIDATION].join(",")])
            .run_within(LIMIT);
        assert!(run.ok, "{level}: {}", run.all());
        assert_eq!(run.made(), run.expected(), "{level}: {}", run.all());
        assert_eq!(run.device_layer_stack(), vec![LAYER, VALIDATION]);
        assert!(
            run.stderr.contains("a forced failure while recording"),
            "{level}: {}",
            run.all()
        );
        assert_eq!(
            run.validation_messages(),
            Vec::<String>::new(),
            "{level}: {}",
            run.all()
        );
    }
}

#[test]
fn a_panic_after_the_driver_built_destroys_what_the_call_made() {
    let tmp = tempfile::tempdir().unwrap();
    let run = App::new(Driver::Radv, tmp.path())
        .cache_backend()
        .env("PIPEKEEP_TEST_PANIC_AFTER_BUILD", "1")
        .env("VK_LOADER_DEBUG", "layer")
        .args(&[
            "--compute",
            "8",
            "--graphics",
            "4",
            "--batch",
            "4",
            "--layers",
            &[LAYER, VALIDATION].join(","),
        ])
        .run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.made(), 12, "{}", run.all());
    assert!(run.stderr.contains("pipekeep panicked"), "{}", run.all());
    assert_eq!(run.device_layer_stack(), vec![LAYER, VALIDATION]);
    // A pipeline the fallback left behind is still alive at vkDestroyDevice.
    assert_eq!(
        run.validation_messages(),
        Vec::<String>::new(),
        "{}",
        run.all()
    );
}

/// How often the driver asked the application's allocator for memory, every allocation
/// failing: each ask of the driver to build costs the same count.
fn alloc_calls(tmp: &Path, with_layer: bool) -> u64 {
    let args = [
        "--compute",
        "4",
        "--graphics",
        "2",
        "--batch",
        "1",
        "--threads",
        "1",
        "--failing-allocator",
    ];
    let app = App::new(Driver::Radv, tmp).args(&args);
    let app = if with_layer { app.with_layer() } else { app };
    let run = app.run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.made(), 0, "every allocation fails\n{}", run.all());
    run.summary["alloc_calls"].as_u64().unwrap()
}

#[test]
fn a_pipeline_the_driver_cannot_build_is_asked_at_most_once_more() {
    let tmp = tempfile::tempdir().unwrap();
    let alone = alloc_calls(tmp.path(), false);
    assert!(alone > 0, "the driver uses the application's allocator");
    // Not in the store: through an empty cache, then once as asked.
    assert!(alloc_calls(tmp.path(), true) <= 2 * alone);
    // In the store: through the entry, then once as asked (never a third time).
    app(
        tmp.path(),
        &["--compute", "4", "--graphics", "2", "--threads", "1"],
    );
    let found = alloc_calls(tmp.path(), true);
    assert!(found <= 2 * alone, "{found} asks against {alone} alone");
}

#[test]
fn a_forked_child_passes_through_and_leaves_no_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let run = app(
        tmp.path(),
        &[
            "--compute",
            "6",
            "--graphics",
            "2",
            "--threads",
            "1",
            "--fork",
        ],
    );
    assert_eq!(run.summary["fork_child"], "ok", "{}", run.all());
    assert_eq!(run.watch().built, 8, "{}", run.all());
    assert_eq!(
        entries(&tmp.path().join("store")).len(),
        8,
        "only the parent's pipelines are kept"
    );
    let runs =
        std::fs::read_to_string(tmp.path().join("store/pipekeep-testapp/runs.jsonl")).unwrap();
    assert_eq!(runs.lines().count(), 1, "the child wrote no run\n{runs}");
}

#[test]
fn pipelines_given_their_flags_through_flags2_are_keyed_and_found() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--compute",
        "12",
        "--graphics",
        "0",
        "--batch",
        "4",
        "--flags2",
    ];
    let cold = app(tmp.path(), &args);
    assert_eq!(cold.made(), 12, "{}", cold.all());
    assert_eq!(cold.watch().unkeyed, 0, "{}", cold.all());
    let warm = app(tmp.path(), &args);
    let w = warm.watch();
    assert_eq!((w.built, w.found), (12, 12), "{}", warm.all());
}

/// A derivative whose base, earlier in the same call, the driver did not make (here every one
/// answers `VK_PIPELINE_COMPILE_REQUIRED`) reaches the driver as a valid create info: the
/// validation layer below pipekeep sees no base named by neither handle nor index.
#[test]
fn a_derivative_whose_base_failed_in_its_call_reaches_the_driver_valid() {
    let tmp = tempfile::tempdir().unwrap();
    let run = App::new(Driver::Radv, tmp.path())
        .cache_backend()
        .env("VK_LOADER_DEBUG", "layer")
        .args(&[
            "--compute",
            "8",
            "--graphics",
            "0",
            "--batch",
            "4",
            "--derivatives",
            "--fail-on-compile",
            "--layers",
            &[LAYER, VALIDATION].join(","),
        ])
        .run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    assert_eq!(
        run.device_layer_stack(),
        [LAYER, VALIDATION],
        "{}",
        run.all()
    );
    assert_eq!(run.summary["compile_required"], 8, "{}", run.all());
    assert_eq!(
        run.validation_messages(),
        Vec::<String>::new(),
        "{}",
        run.all()
    );
}

#[test]
fn by_default_the_layer_is_quiet_and_a_device_that_keeps_nothing_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env_remove("PIPEKEEP_LOG")
        .args(&NOTHING)
        .run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    assert!(!run.stderr.contains("INFO"), "{}", run.all());
    let store = tmp.path().join("store");
    assert!(
        !store.exists() || std::fs::read_dir(&store).unwrap().next().is_none(),
        "nothing created for a device that keeps no pipeline"
    );
    // On lavapipe (whose cache keeps nothing) pipelines are made, and still nothing is written.
    let run = App::new(Driver::Lavapipe, tmp.path())
        .with_layer()
        .args(&["--compute", "4", "--graphics", "0"])
        .run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    assert!(!store.exists() || std::fs::read_dir(&store).unwrap().next().is_none());
}
