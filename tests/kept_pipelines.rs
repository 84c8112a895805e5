//! D994's tests, through the real loader on RADV null: a pipeline is kept under this driver's
//! directory; the second build is found; a damaged or foreign entry compiles afresh and is
//! written whole again; D744's monolithic file is dropped.

mod common;
use common::*;
use std::path::{Path, PathBuf};

fn one_compute(tmp: &Path) -> Run {
    let run = App::new(Driver::Radv, tmp)
        .with_layer()
        .args(&["--compute", "1", "--graphics", "0", "--threads", "1"])
        .run();
    assert!(run.ok, "{}", run.all());
    run
}

fn the_entry(tmp: &Path) -> PathBuf {
    let e = entries(&tmp.join("store"));
    assert_eq!(e.len(), 1, "{e:?}");
    e[0].clone()
}

#[test]
fn kept_pipelines() {
    let tmp = tempfile::tempdir().unwrap();
    let title_dir = tmp.path().join("store/pipekeep-testapp");
    std::fs::create_dir_all(&title_dir).unwrap();
    std::fs::write(title_dir.join("host-pipelines.bin"), vec![0x5a; 1 << 16]).unwrap();
    let run = one_compute(tmp.path());
    let identity = run
        .stderr
        .split("identity=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("identity logged")
        .to_owned();
    let entry = the_entry(tmp.path());
    assert_eq!(
        entry.parent().unwrap(),
        title_dir.join("host-pipelines").join(&identity)
    );
    assert!(
        identity.starts_with("1002-73a0-"),
        "RADV navi21: {identity}"
    );
    assert!(
        !title_dir.join("host-pipelines.bin").exists(),
        "D744's file is dropped"
    );
    assert!(
        run.stderr.contains("dropped entry=host-pipelines.bin"),
        "{}",
        run.all()
    );
}

#[test]
fn a_kept_pipeline_is_found_and_a_damaged_or_foreign_entry_compiles_afresh() {
    let tmp = tempfile::tempdir().unwrap();
    let cold = one_compute(tmp.path()).watch();
    assert_eq!(
        (cold.built, cold.compiled, cold.written, cold.found),
        (1, 1, 1, 0)
    );
    let entry = the_entry(tmp.path());
    let good = std::fs::read(&entry).unwrap();
    let warm = one_compute(tmp.path()).watch();
    assert_eq!((warm.built, warm.found, warm.compiled), (1, 1, 0));

    // A byte of the driver's data changed: dropped, compiled afresh, written whole again.
    let mut damaged = good.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0x40;
    std::fs::write(&entry, &damaged).unwrap();
    let run = one_compute(tmp.path());
    assert!(run.stderr.contains("reason=corrupt"), "{}", run.all());
    assert_eq!(run.watch().compiled, 1);
    assert_eq!(run.watch().written, 1);
    assert_eq!(std::fs::read(&entry).unwrap().len(), good.len());
    assert_eq!(one_compute(tmp.path()).watch().found, 1);

    // Enveloped for another driver version: foreign, compiled afresh, written again.
    let mut foreign = good.clone();
    foreign[24] ^= 0x01;
    std::fs::write(&entry, &foreign).unwrap();
    let run = one_compute(tmp.path());
    assert!(run.stderr.contains("reason=foreign"), "{}", run.all());
    assert_eq!((run.watch().compiled, run.watch().written), (1, 1));
    assert_eq!(one_compute(tmp.path()).watch().found, 1);

    // Cut short: short.
    std::fs::write(&entry, &good[..good.len() / 2]).unwrap();
    let run = one_compute(tmp.path());
    assert!(run.stderr.contains("reason=short"), "{}", run.all());
    assert_eq!(one_compute(tmp.path()).watch().found, 1);
}

/// Found pipelines let into the driver one at a time (`PIPEKEEP_FOUND_CALLS=1`, as `auto` lets
/// three into NVIDIA's) by four threads, through each backend (made from a cache of the entry,
/// or from its binaries): every one is found and made, and none waits for ever.
#[test]
fn found_pipelines_let_into_the_driver_one_at_a_time_are_all_made() {
    for backend in ["cache", "binary"] {
        let tmp = tempfile::tempdir().unwrap();
        let app = || {
            App::new(Driver::Radv, tmp.path())
                .with_layer()
                .env("PIPEKEEP_BACKEND", backend)
                .env("PIPEKEEP_FOUND_CALLS", "1")
                .args(&["--compute", "60", "--graphics", "20", "--threads", "4"])
        };
        let limit = std::time::Duration::from_secs(120);
        let cold = app().run_within(limit);
        assert!(cold.ok, "{backend}: {}", cold.all());
        assert!(
            cold.stderr.contains("found_calls=1 "),
            "{backend}: the opening line names the bound: {}",
            cold.all()
        );
        let warm = app().run_within(limit);
        assert!(warm.ok, "{backend}: {}", warm.all());
        let w = warm.watch();
        assert_eq!(
            (w.built, w.found, w.compiled),
            (80, 80, 0),
            "{backend}: {}",
            warm.all()
        );
        assert_eq!(warm.made(), warm.expected(), "{backend}: {}", warm.all());
        let unbounded = app().env("PIPEKEEP_FOUND_CALLS", "auto").run_within(limit);
        assert!(
            unbounded.stderr.contains("found_calls=off "),
            "{backend}: auto bounds no driver but NVIDIA's: {}",
            unbounded.all()
        );
    }
}
