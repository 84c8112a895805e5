//! The merged cache (`PIPEKEEP_MERGE`, the `cache` backend) through the real loader on RADV
//! (null hardware), where `auto` leaves it off (it is on by default on NVIDIA only): a warm run
//! served through the merged cache, damaged entries never merged, a process killed inside a
//! merge, and a device destroyed while merges run. `PIPEKEEP_TEST_READ_AHEAD_FIRST` makes lookups
//! wait for reading ahead, so that a warm run meets what was merged.

mod common;
use common::*;
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);
const MIX: [&str; 6] = ["--compute", "40", "--graphics", "20", "--threads", "2"];

fn merging(tmp: &Path) -> App {
    App::new(Driver::Radv, tmp)
        .with_layer()
        .env("PIPEKEEP_BACKEND", "cache")
        .env("PIPEKEEP_MERGE", "on")
        .env("PIPEKEEP_TEST_READ_AHEAD_FIRST", "1")
        .args(&MIX)
}

fn merged(run: &Run) -> u64 {
    run.watch().merged
}

fn fill(tmp: &Path) {
    let run = merging(tmp).run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.watch().written, 60, "{}", run.all());
}

#[test]
fn a_warm_run_is_served_through_the_merged_cache_and_auto_does_not_merge_on_radv() {
    let tmp = tempfile::tempdir().unwrap();
    fill(tmp.path());
    let warm = merging(tmp.path()).run_within(LIMIT);
    assert!(warm.ok, "{}", warm.all());
    let w = warm.watch();
    assert_eq!(
        (w.built, w.found, w.compiled),
        (60, 60, 0),
        "{}",
        warm.all()
    );
    assert_eq!(merged(&warm), 60, "{}", warm.all());
    let auto = merging(tmp.path())
        .env("PIPEKEEP_MERGE", "auto")
        .run_within(LIMIT);
    assert!(auto.ok, "{}", auto.all());
    assert_eq!(
        (auto.watch().found, merged(&auto)),
        (60, 0),
        "{}",
        auto.all()
    );
}

#[test]
fn damaged_entries_are_never_merged_and_compile_afresh() {
    let tmp = tempfile::tempdir().unwrap();
    fill(tmp.path());
    let all = entries(&tmp.path().join("store"));
    for victim in [&all[2], &all[9], &all[30]] {
        let mut bytes = std::fs::read(victim).unwrap();
        *bytes.last_mut().unwrap() ^= 0x10;
        std::fs::write(victim, &bytes).unwrap();
    }
    let run = merging(tmp.path()).run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    let w = run.watch();
    assert_eq!(
        (w.found, w.compiled, w.written),
        (57, 3, 3),
        "{}",
        run.all()
    );
    assert_eq!(merged(&run), 57, "{}", run.all());
    assert_eq!(
        run.stderr.matches("reason=corrupt").count(),
        3,
        "{}",
        run.all()
    );
}

#[test]
fn a_process_killed_inside_a_merge_costs_that_entry_once() {
    let tmp = tempfile::tempdir().unwrap();
    fill(tmp.path());
    let dying = merging(tmp.path())
        .env("PIPEKEEP_TEST_ABORT_IN_MERGE", "1")
        .run_within(LIMIT);
    assert!(!dying.ok, "the process was to abort\n{}", dying.all());
    let next = merging(tmp.path()).run_within(LIMIT);
    assert!(next.ok, "{}", next.all());
    let w = next.watch();
    assert_eq!(
        (w.found, w.compiled, w.written),
        (59, 1, 1),
        "{}",
        next.all()
    );
    assert_eq!(
        next.stderr.matches("reason=stale-marker").count(),
        1,
        "{}",
        next.all()
    );
    assert_eq!(merged(&merging(tmp.path()).run_within(LIMIT)), 60);
}

#[test]
fn a_device_destroyed_while_merges_run_returns_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let big = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_BACKEND", "cache")
        .args(&["--compute", "240", "--graphics", "60", "--threads", "2"])
        .run_within(LIMIT);
    assert!(big.ok, "{}", big.all());
    for _ in 0..8 {
        let run = App::new(Driver::Radv, tmp.path())
            .with_layer()
            .env("PIPEKEEP_BACKEND", "cache")
            .env("PIPEKEEP_MERGE", "on")
            .env("PIPEKEEP_READ_AHEAD", "4096")
            .args(&["--compute", "0", "--graphics", "0"])
            .run_within(LIMIT);
        assert!(run.ok, "{}", run.all());
    }
}

/// An entry that passes every check but that the driver compiles anyway through the merged cache
/// (here: another pipeline's data under this pipeline's key, as NVIDIA may refuse an entry a
/// rebuild wrote) is removed, not refused again every run: the next run compiles and keeps it,
/// and the run after finds everything.
#[test]
fn an_entry_the_driver_compiles_anyway_when_merged_is_kept_afresh_next_run() {
    use pipekeep::store::envelope::{self, Body};

    let tmp = tempfile::tempdir().unwrap();
    fill(tmp.path());
    let all = entries(&tmp.path().join("store"));
    let payload_of = |path: &Path| {
        let (identity, key) = identity_and_key_of(path);
        let bytes = std::fs::read(path).unwrap();
        match envelope::decode(&bytes, &identity, &key).unwrap().body {
            Body::Whole(payload) => payload.to_vec(),
            _ => panic!("the test app's cache payloads stand whole"),
        }
    };
    let victims = [&all[4], &all[17], &all[41]];
    for (victim, donor) in victims.iter().zip([&all[5], &all[18], &all[42]]) {
        let (identity, key) = identity_and_key_of(victim);
        std::fs::write(
            victim,
            envelope::encode(&identity, &key, &payload_of(donor)),
        )
        .unwrap();
    }
    let refused = merging(tmp.path()).run_within(LIMIT);
    assert!(refused.ok, "{}", refused.all());
    let w = refused.watch();
    assert_eq!((w.found, w.compiled), (57, 3), "{}", refused.all());
    assert!(refused.stderr.contains(" refused=3 "), "{}", refused.all());
    for victim in victims {
        assert!(
            !victim.exists(),
            "{} stayed\n{}",
            victim.display(),
            refused.all()
        );
    }
    let kept = merging(tmp.path()).run_within(LIMIT);
    let w = kept.watch();
    assert_eq!(
        (w.found, w.compiled, w.written),
        (57, 3, 3),
        "{}",
        kept.all()
    );
    let warm = merging(tmp.path()).run_within(LIMIT);
    let w = warm.watch();
    assert_eq!((w.found, w.compiled), (60, 0), "{}", warm.all());
}
