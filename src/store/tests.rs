//! Store tests: lookups and writes, what opening drops and what it keeps, and the bound's
//! stamp order across runs.

use std::fs;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, SystemTime};

use super::envelope::tests::{cache_data, identity};
use super::files::{lock_path, Locked, Written};
use super::*;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn key(n: u8) -> PipelineKey {
    PipelineKey {
        spirv: [n; 16],
        state: [n.wrapping_mul(3); 16],
    }
}

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn open(root: &Path, max: u64, when: SystemTime) -> Store {
    Store::open(root, "title", identity(), max, when).unwrap().0
}

fn found(store: &Store, k: &PipelineKey) -> bool {
    matches!(store.lookup(k).unwrap(), Lookup::Found(_))
}

/// A store at `root` holding entries of keys 1 to `n`, written at 100 s, and their data.
fn written(root: &Path, n: u8) -> (Store, Vec<u8>) {
    let data = cache_data(&identity(), &[9; 200]);
    let store = open(root, 1 << 30, at(100));
    for k in 1..=n {
        store.write(&key(k), &data).unwrap();
    }
    (store, data)
}

/// Damages a file in place: its last byte flipped.
fn flip_last_byte(path: &Path) {
    let mut bytes = fs::read(path).unwrap();
    *bytes.last_mut().unwrap() ^= 0x01;
    fs::write(path, &bytes).unwrap();
}

#[test]
fn entries_dropped_by_helper_readers_are_logged_where_their_caller_logs() {
    let root = tempfile::tempdir().unwrap();
    let (run1, _) = written(root.path(), 8);
    for n in 1..=8 {
        flip_last_byte(&run1.entry_path(&key(n)));
    }
    let run2 = open(root.path(), 1 << 30, at(200));
    let captured = crate::sync::CapturedLog::default();
    // Four readers: most entries are read by the three helpers, threads of the store's own.
    captured.during(tracing::Level::INFO, || {
        run2.read_ahead(
            AheadOrder::LastUse(None),
            1 << 20,
            4,
            &AtomicBool::new(false),
        )
    });
    let text = captured.text();
    assert_eq!(text.matches("dropped entry=").count(), 8, "{text}");
}

/// A child process holding `flock` on `path` until killed.
fn hold_lock_in_child(path: &Path) -> Child {
    let mut child = Command::new("flock")
        .arg("--no-fork")
        .arg("-x")
        .arg(path)
        .arg("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    for _ in 0..500 {
        if matches!(lock_path(path, false), Ok(Locked::Busy)) {
            return child;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the child never took the lock on {}", path.display());
}

#[test]
fn a_written_entry_is_found_whole_and_a_missing_one_is_missing() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 20, at(0));
    let data = cache_data(&identity(), &[5; 300]);
    assert!(matches!(store.lookup(&key(1)).unwrap(), Lookup::Missing));
    // 120 + 32 + 332 bytes as they are; packed, the 332 bytes of data take a few dozen.
    let Written::Whole(n) = store.write(&key(1), &data).unwrap() else {
        panic!("skipped")
    };
    assert!(n < 250, "{n} bytes");
    assert_eq!(fs::metadata(store.entry_path(&key(1))).unwrap().len(), n);
    match store.lookup(&key(1)).unwrap() {
        Lookup::Found(e) => assert_eq!(e.with_data(<[u8]>::to_vec), data),
        _ => panic!("not found"),
    }
    assert!(store
        .dir()
        .ends_with(format!("title/host-pipelines/{}", identity().dir_name())));
}

#[test]
fn a_damaged_entry_is_dropped_at_lookup_with_its_reason() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 20, at(0));
    store
        .write(&key(1), &cache_data(&identity(), &[5; 30]))
        .unwrap();
    let path = store.entry_path(&key(1));
    flip_last_byte(&path);
    match store.lookup(&key(1)).unwrap() {
        Lookup::Dropped(e) => assert_eq!(e.reason(), "corrupt"),
        _ => panic!("damage not seen"),
    }
    assert!(!path.exists(), "a dropped entry is removed");
    // An entry copied under another key's name is another pipeline's (seen by the next run).
    store
        .write(&key(2), &cache_data(&identity(), &[5; 30]))
        .unwrap();
    fs::copy(store.entry_path(&key(2)), store.entry_path(&key(3))).unwrap();
    let next_run = open(root.path(), 1 << 20, at(1));
    assert!(matches!(
        next_run.lookup(&key(3)).unwrap(),
        Lookup::Dropped(EntryError::OtherKey)
    ));
}

#[test]
fn a_key_neither_listed_at_opening_nor_written_since_is_missing_without_an_open() {
    let root = tempfile::tempdir().unwrap();
    let writer = open(root.path(), 1 << 20, at(0));
    let data = cache_data(&identity(), &[5; 30]);
    writer.write(&key(1), &data).unwrap();
    let store = open(root.path(), 1 << 20, at(1));
    // Another process writes key 2 after this store listed its directory: found from the next
    // run, not this one.
    writer.write(&key(2), &data).unwrap();
    assert!(found(&store, &key(1)), "listed at opening");
    assert!(matches!(store.lookup(&key(2)).unwrap(), Lookup::Missing));
    // What this store writes itself it finds again in the same run.
    store.write(&key(3), &data).unwrap();
    assert!(found(&store, &key(3)));
    let next_run = open(root.path(), 1 << 20, at(2));
    assert!([1, 2, 3].iter().all(|&n| found(&next_run, &key(n))));
}

#[test]
fn a_bound_of_zero_keeps_nothing() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 0, at(0));
    assert_eq!(
        store
            .write(&key(1), &cache_data(&identity(), &[1; 10]))
            .unwrap(),
        Written::Skipped
    );
    assert!(!found(&store, &key(1)));
}

#[test]
fn an_entry_is_read_without_an_access_time_update() {
    let root = tempfile::tempdir().unwrap();
    let (store, _) = written(root.path(), 1);
    let path = store.entry_path(&key(1));
    let old = SystemTime::now() - Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_times(fs::FileTimes::new().set_accessed(old))
        .unwrap();
    let again = open(root.path(), 1 << 30, at(200));
    assert!(found(&again, &key(1)));
    assert_eq!(fs::metadata(&path).unwrap().accessed().unwrap(), old);
}

#[test]
fn opening_drops_the_entry_a_stale_per_thread_marker_names() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 20, at(0));
    for n in 1..=2 {
        store
            .write(&key(n), &cache_data(&identity(), &[n; 30]))
            .unwrap();
    }
    // A thread of a process that is gone left its marker naming key 1.
    fs::write(
        store.dir().join("999999-999999.loading"),
        key(1).file_name(),
    )
    .unwrap();
    let (again, report) = Store::open(root.path(), "title", identity(), 1 << 20, at(1)).unwrap();
    assert_eq!(report.stale_marker_drops, 1);
    assert!(!found(&again, &key(1)));
    assert!(found(&again, &key(2)));
    assert!(!again.dir().join("999999-999999.loading").exists());
}

#[test]
fn a_stale_marker_naming_a_short_entry_drops_it_without_a_panic() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 20, at(0));
    for n in 1..=3 {
        store
            .write(&key(n), &cache_data(&identity(), &[n; 30]))
            .unwrap();
    }
    fs::write(store.entry_path(&key(1)), b"").unwrap();
    fs::write(store.entry_path(&key(2)), b"PIPEKEEP\x02").unwrap();
    stale_marker_naming(&store, &key(1), 1);
    stale_marker_naming(&store, &key(2), 2);
    let (again, report) = Store::open(root.path(), "title", identity(), 1 << 20, at(1)).unwrap();
    assert_eq!(report.stale_marker_drops, 2);
    assert!(found(&again, &key(3)));
    let sharing = inspect::sharing(again.dir());
    assert_eq!(sharing.entries, 1);
}

#[test]
fn opening_drops_the_entry_a_seed_form_marker_names() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 20, at(0));
    store
        .write(&key(1), &cache_data(&identity(), &[1; 30]))
        .unwrap();
    store
        .write(&key(2), &cache_data(&identity(), &[2; 30]))
        .unwrap();
    fs::write(
        store.dir().join(format!("{}.loading", key(2).file_name())),
        b"",
    )
    .unwrap();
    let again = open(root.path(), 1 << 20, at(1));
    assert!(found(&again, &key(1)));
    assert!(!found(&again, &key(2)));
    assert!(names(again.dir()).iter().all(|n| !n.ends_with(".loading")));
}

#[test]
fn opening_keeps_the_entry_whose_marker_a_live_process_holds() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 20, at(0));
    store
        .write(&key(1), &cache_data(&identity(), &[1; 30]))
        .unwrap();
    let marker = store.dir().join("1-1.loading");
    fs::write(&marker, key(1).file_name()).unwrap();
    let mut child = hold_lock_in_child(&marker);
    let (again, report) = Store::open(root.path(), "title", identity(), 1 << 20, at(1)).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(report.stale_marker_drops, 0);
    assert!(found(&again, &key(1)));
    assert!(marker.exists());
}

#[test]
fn a_thread_whose_marker_name_is_taken_keeps_a_marker_of_another_name() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 20, at(0));
    store
        .write(&key(1), &cache_data(&identity(), &[1; 30]))
        .unwrap();
    let dir = store.dir().to_path_buf();
    // A thread of a process in another pid namespace, with the same pid and thread id, holds
    // this name (checked on a fresh thread: this one may hold a marker here already).
    let named = std::thread::scope(|s| {
        s.spawn(|| {
            let ours = dir.join(marker::marker_name());
            fs::write(&ours, [0u8; 71]).unwrap();
            let mut holder = hold_lock_in_child(&ours);
            let Lookup::Found(found) = store.lookup(&key(1)).unwrap() else {
                panic!("not found")
            };
            let held = store.hold_marker(&found);
            let unavailable = LoadingMarker::unavailable_in(&dir);
            let naming: Vec<String> = names(&dir)
                .into_iter()
                .filter(|n| n.ends_with(".loading"))
                .filter(|n| fs::read(dir.join(n)).unwrap() == key(1).file_name().as_bytes())
                .collect();
            drop(held);
            holder.kill().unwrap();
            holder.wait().unwrap();
            (unavailable, naming)
        })
        .join()
        .unwrap()
    });
    assert!(!named.0, "the thread loaded unguarded");
    assert_eq!(named.1.len(), 1, "{:?}", named.1);
}

#[test]
fn a_stale_marker_under_a_threads_own_name_is_left_for_the_opening() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 20, at(0));
    for n in 1..=2 {
        store
            .write(&key(n), &cache_data(&identity(), &[n; 30]))
            .unwrap();
    }
    let dir = store.dir().to_path_buf();
    std::thread::scope(|s| {
        s.spawn(|| {
            // A dead thread of another namespace with this pid and id named key 1 since this
            // store's opening swept.
            let ours = dir.join(marker::marker_name());
            fs::write(&ours, key(1).file_name()).unwrap();
            let Lookup::Found(found) = store.lookup(&key(2)).unwrap() else {
                panic!("not found")
            };
            drop(store.hold_marker(&found));
            assert_eq!(fs::read(&ours).unwrap(), key(1).file_name().as_bytes());
        });
    });
    let (again, report) = Store::open(root.path(), "title", identity(), 1 << 20, at(1)).unwrap();
    assert_eq!(report.stale_marker_drops, 1);
    assert!(!found(&again, &key(1)));
    assert!(found(&again, &key(2)));
}

#[test]
fn a_thread_marker_names_the_entry_while_held_and_names_none_after() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 20, at(0));
    let marker_path = store.dir().join(marker::marker_name());
    store
        .write(&key(4), &cache_data(&identity(), &[4; 30]))
        .unwrap();
    let Lookup::Found(entry) = store.lookup(&key(4)).unwrap() else {
        panic!("entry 4 not found")
    };
    {
        let _held = store.hold_marker(&entry);
        assert_eq!(
            fs::read_to_string(&marker_path).unwrap(),
            key(4).file_name().as_str()
        );
        assert!(
            matches!(lock_path(&marker_path, false).unwrap(), Locked::Busy),
            "the lock is held elsewhere than this fd"
        );
    }
    let after = fs::read(&marker_path).unwrap();
    assert!(
        !files::is_entry_name(std::str::from_utf8(&after).unwrap_or("")),
        "emptied: names no entry"
    );
    assert_eq!(after[0], 0);
}

#[test]
fn a_directory_of_the_other_abi_is_another_identity_never_another_driver() {
    // RADV mixes the pointer size into its UUID: a 32-bit process of the title has its own.
    let root = tempfile::tempdir().unwrap();
    let other_abi = Identity {
        abi: if identity().abi == 8 { 4 } else { 8 },
        cache_uuid: [7; 16],
        ..identity()
    };
    let theirs = open_as(root.path(), other_abi, at(0));
    theirs
        .write(&key(1), &cache_data(&other_abi, &[1; 30]))
        .unwrap();
    let ours = open(root.path(), 1 << 20, at(1));
    ours.write(&key(2), &cache_data(&identity(), &[2; 30]))
        .unwrap();
    assert!(!ours.driver_changed());
    assert!(theirs.entry_path(&key(1)).is_file(), "ours kept theirs");
    let (again, report) = Store::open(root.path(), "title", other_abi, 1 << 20, at(2)).unwrap();
    assert_eq!(report.other_driver_drops, 0);
    assert!(!again.driver_changed());
    assert!(ours.entry_path(&key(2)).is_file(), "theirs kept ours");
    assert!(found(&again, &key(1)));
    // Another driver of the same ABI still goes.
    let newer = Identity {
        driver_version: 9,
        ..other_abi
    };
    let (_, report) = Store::open(root.path(), "title", newer, 1 << 20, at(3)).unwrap();
    assert_eq!(report.other_driver_drops, 1);
    assert!(!theirs.entry_path(&key(1)).exists());
    assert!(ours.entry_path(&key(2)).is_file());
}

fn open_as(root: &Path, id: Identity, when: SystemTime) -> Store {
    Store::open(root, "title", id, 1 << 20, when).unwrap().0
}

#[test]
fn opening_drops_the_titles_stopped_temporary_files_but_not_a_held_one() {
    let root = tempfile::tempdir().unwrap();
    let title = root.path().join("title");
    fs::create_dir_all(&title).unwrap();
    // A compaction and a history rewrite killed midway; a history rewrite going on now.
    fs::write(title.join("record.foz.tmp"), b"half a record").unwrap();
    fs::write(title.join("runs.jsonl.tmp"), b"half a history").unwrap();
    let (_store, report) = Store::open(root.path(), "title", identity(), 1 << 20, at(0)).unwrap();
    assert_eq!(report.partial_writes_dropped, 2, "{report:?}");
    assert!(!title.join("record.foz.tmp").exists());
    assert!(!title.join("runs.jsonl.tmp").exists());

    fs::write(title.join("runs.jsonl.tmp"), b"being written").unwrap();
    fs::write(title.join("notes.tmp"), b"not ours").unwrap();
    let mut child = hold_lock_in_child(&title.join("runs.jsonl.tmp"));
    let (_store, report) = Store::open(root.path(), "title", identity(), 1 << 20, at(1)).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(report.partial_writes_dropped, 0, "{report:?}");
    assert!(title.join("runs.jsonl.tmp").exists());
    assert!(title.join("notes.tmp").exists(), "only our own names");
}

#[test]
fn opening_drops_another_drivers_directory_but_not_another_devices() {
    let root = tempfile::tempdir().unwrap();
    let old = Identity {
        driver_version: 1,
        ..identity()
    };
    let other_uuid = Identity {
        cache_uuid: [9; 16],
        ..identity()
    };
    let second_gpu = Identity {
        device_id: 0x1234,
        driver_version: 1,
        ..identity()
    };
    for id in [old, other_uuid, second_gpu] {
        let dir = root.path().join("title/host-pipelines").join(id.dir_name());
        fs::create_dir_all(&dir).unwrap();
        let bytes = envelope::encode(&id, &key(1), &cache_data(&id, &[1; 30]));
        files::write_atomically(&dir.join(key(1).file_name()), &bytes, at(0)).unwrap();
    }
    let stray = root
        .path()
        .join("title/host-pipelines")
        .join(other_uuid.dir_name())
        .join("notes.txt");
    fs::write(&stray, b"not ours").unwrap();
    let (_store, report) = Store::open(root.path(), "title", identity(), 1 << 20, at(1)).unwrap();
    assert_eq!(report.other_driver_drops, 2);
    let host = root.path().join("title/host-pipelines");
    assert!(!host.join(old.dir_name()).exists());
    assert!(!host
        .join(other_uuid.dir_name())
        .join(key(1).file_name())
        .exists());
    assert!(host
        .join(second_gpu.dir_name())
        .join(key(1).file_name())
        .exists());
    assert!(stray.exists(), "a file not of our naming is never removed");
}

#[test]
fn opening_drops_a_stopped_write_but_not_one_a_live_writer_holds() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 20, at(0));
    fs::create_dir_all(store.dir()).unwrap();
    let stopped = store.dir().join(format!("{}.tmp", key(1).file_name()));
    let live = store.dir().join(format!("{}.tmp", key(2).file_name()));
    fs::write(&stopped, b"half").unwrap();
    fs::write(&live, b"half").unwrap();
    let mut child = hold_lock_in_child(&live);
    let (_again, report) = Store::open(root.path(), "title", identity(), 1 << 20, at(1)).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(report.partial_writes_dropped, 1);
    assert!(!stopped.exists());
    assert!(live.exists());
}

#[test]
fn opening_drops_the_monolithic_cache_unread() {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir_all(root.path().join("title")).unwrap();
    fs::write(
        root.path().join("title/host-pipelines.bin"),
        vec![0u8; 4096],
    )
    .unwrap();
    let (_s, report) = Store::open(root.path(), "title", identity(), 1 << 20, at(0)).unwrap();
    assert!(report.dropped_monolithic_cache);
    assert!(!root.path().join("title/host-pipelines.bin").exists());
}

/// Three runs, each using some entries; a small bound then keeps exactly what the seed says:
/// every earlier run's entries go before this run's, and among a run's the last used go first.
#[test]
fn the_bound_keeps_the_last_runs_first_used_entries() {
    let root = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[0; 56]); // 120 + 32 + 88 = 240 bytes an entry
    let entry_bytes = 240u64;
    let run1 = open(root.path(), 1 << 30, at(100));
    for n in [1, 2, 3] {
        run1.write(&key(n), &data).unwrap();
    }
    let run2 = open(root.path(), 1 << 30, at(200));
    for n in [4, 5] {
        run2.write(&key(n), &data).unwrap();
    }
    // Run 3 finds 2 (from run 1) first, then writes 6, then finds 4.
    let run3 = open(root.path(), 1 << 30, at(300));
    for n in [2, 6, 4] {
        match run3.lookup(&key(n)).unwrap() {
            Lookup::Found(e) => run3.stamp(e),
            _ => {
                run3.write(&key(n), &data).unwrap();
            }
        }
    }
    // Room for three entries: run 3's three survive, its first-used first.
    let after = open(root.path(), 3 * entry_bytes, at(400));
    let kept: Vec<u8> = (1..=6).filter(|n| found(&after, &key(*n))).collect();
    assert_eq!(kept, vec![2, 4, 6]);
    // Room for two: the last used of run 3 (key 4) goes first.
    let after = open(root.path(), 2 * entry_bytes, at(500));
    let kept: Vec<u8> = (1..=6).filter(|n| found(&after, &key(*n))).collect();
    assert_eq!(kept, vec![2, 6]);
}

/// Issue 31, item 2: the record counts within the bound but never crowds out the entries it
/// backs: it takes at most its share, a quarter of the bound (the rest of a record over its
/// share is the record's compaction's to drop, never the entries'). A 500-byte record in a bound
/// of 960 took all but one entry's room.
#[test]
fn the_record_takes_at_most_its_share_of_the_bound_and_is_never_dropped_by_it() {
    let root = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[0; 56]); // 240 bytes an entry
    let run1 = open(root.path(), 1 << 30, at(100));
    for n in 1..=4 {
        run1.write(&key(n), &data).unwrap();
    }
    let record = root.path().join("title").join(super::RECORD_FILE);
    fs::write(&record, [7u8; 500]).unwrap();
    // A bound of four entries: the record's share is a quarter (240), three entries stay.
    let (run2, report) = Store::open(root.path(), "title", identity(), 4 * 240, at(200)).unwrap();
    assert_eq!(report.bound.evicted, 1, "{:?}", report.bound);
    assert_eq!(report.bound.record_bytes, 500);
    assert_eq!(report.bound.record_share, 240);
    assert_eq!(report.bound.bytes, 3 * 240 + 500);
    assert_eq!((1..=4).filter(|n| found(&run2, &key(*n))).count(), 3);
    assert_eq!(fs::read(&record).unwrap(), [7u8; 500]);
    let host = root.path().join("title/host-pipelines");
    let plan = bound::plan_eviction(bound::entries_of_title(&host).unwrap(), 500, 4 * 240 - 5);
    assert_eq!(plan.len(), 1, "the tool's plan counts the record alike");
    // A record compacted as far as it goes (its configurations alone) and still past its share
    // takes the rest from the entries' room: the title stays within its bound.
    let plan = bound::plan_eviction_past_share(
        bound::entries_of_title(&host).unwrap(),
        500,
        4 * 240 - 5,
        500,
    );
    assert_eq!(plan.len(), 2);
    // A record within its share counts whole.
    fs::write(&record, [7u8; 100]).unwrap();
    let plan = bound::plan_eviction(bound::entries_of_title(&host).unwrap(), 100, 3 * 240 + 99);
    assert_eq!(plan.len(), 1);
}

#[test]
fn the_bound_is_kept_again_while_a_run_writes() {
    let root = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[0; 88]);
    let store = open(root.path(), 1000, at(0));
    for n in 0..40 {
        store.write(&key(n), &data).unwrap();
    }
    let total: u64 = bound::entries_of_title(&root.path().join("title/host-pipelines"))
        .unwrap()
        .iter()
        .map(|e| e.bytes)
        .sum();
    // Checked every quarter of the bound written: at most one step over.
    assert!(total <= 1000 + 250 + 240, "{total}");
    assert!(found(&store, &key(0)), "the first written is kept longest");
}

fn names(dir: &Path) -> Vec<String> {
    files::names_in(dir).unwrap()
}

#[test]
fn read_ahead_holds_the_last_runs_entries_checked_and_drops_a_damaged_one() {
    let root = tempfile::tempdir().unwrap();
    let (run1, data) = written(root.path(), 5);
    let damaged = run1.entry_path(&key(3));
    flip_last_byte(&damaged);

    let run2 = open(root.path(), 1 << 30, at(200));
    // A lookup before reading ahead claims its key: it is never read ahead after.
    assert!(found(&run2, &key(5)));
    // Read in the order the bound's listing gives, as the layer does after its opening.
    let listed = run2.keep_within_bound().map(|b| b.kept);
    assert_eq!(listed.as_ref().map(Vec::len), Some(5));
    let report = run2.read_ahead(
        AheadOrder::LastUse(listed),
        1 << 20,
        1,
        &AtomicBool::new(false),
    );
    assert_eq!((report.held, report.claimed_first), (3, 1), "{report:?}");
    assert!(
        !damaged.exists(),
        "read ahead drops a damaged entry as a lookup would"
    );
    // Damaged on disk after it was read ahead: found whole all the same, from memory.
    flip_last_byte(&run2.entry_path(&key(2)));
    for n in [1, 2, 4] {
        match run2.lookup(&key(n)).unwrap() {
            Lookup::Found(e) => {
                assert_eq!(
                    e.with_data(<[u8]>::to_vec),
                    data,
                    "entry {n} taken from what was read ahead"
                );
                run2.stamp(e);
            }
            _ => panic!("entry {n} not found"),
        }
    }
    assert!(matches!(run2.lookup(&key(3)).unwrap(), Lookup::Missing));
    // An entry taken from memory is stamped by its name, in this run's order.
    let stamp = fs::metadata(run2.entry_path(&key(1)))
        .unwrap()
        .modified()
        .unwrap();
    assert!(stamp < at(200) && stamp > at(199), "{stamp:?}");
}

#[test]
fn read_ahead_waits_within_its_window_and_a_stop_ends_it() {
    let root = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[1; 200]); // 352 bytes an entry
    let run1 = open(root.path(), 1 << 30, at(100));
    for n in 1..=4 {
        run1.write(&key(n), &data).unwrap();
    }
    let run2 = std::sync::Arc::new(open(root.path(), 1 << 30, at(200)));
    let reader = {
        let run2 = run2.clone();
        std::thread::spawn(move || {
            run2.read_ahead(AheadOrder::LastUse(None), 400, 2, &AtomicBool::new(false))
        })
    };
    // The window holds one entry: the reader waits until it is taken, or stopped (however far
    // it got by then, it never holds more than the window).
    std::thread::sleep(Duration::from_millis(50));
    run2.stop_reading_ahead();
    let report = reader.join().unwrap();
    assert!(report.held <= 1, "{report:?}");
    assert!(found(&run2, &key(1)) && found(&run2, &key(4)));
}

#[test]
fn a_found_entry_holds_no_file_open_until_its_stamp() {
    // Files held open until their stamps grew the process's file table while lookups ran, and
    // Linux waits for an RCU grace period at each growth of a table threads share.
    let open_files = || {
        fs::read_dir("/proc/self/fd")
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let root = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[5; 64]);
    let run1 = open(root.path(), 1 << 30, at(100));
    for n in 0..200 {
        run1.write(&key(n), &data).unwrap();
    }
    let run2 = open(root.path(), 1 << 30, at(200));
    let before = open_files();
    let found: Vec<FoundEntry> = (0..200)
        .map(|n| match run2.lookup(&key(n)).unwrap() {
            Lookup::Found(e) => e,
            _ => panic!("entry {n} not found"),
        })
        .collect();
    let held = open_files().saturating_sub(before);
    assert!(held < 50, "{held} more files open with 200 entries found");
    for e in found {
        run2.stamp(e);
    }
    let stamp = fs::metadata(run2.entry_path(&key(0)))
        .unwrap()
        .modified()
        .unwrap();
    assert!(
        stamp < at(200) && stamp > at(199),
        "stamped by name: {stamp:?}"
    );
}

#[test]
fn opening_creates_nothing_and_the_first_write_makes_the_directory() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 20, at(0));
    assert!(matches!(store.lookup(&key(1)).unwrap(), Lookup::Missing));
    assert!(
        fs::read_dir(root.path()).unwrap().next().is_none(),
        "a store that keeps nothing leaves nothing on disk"
    );
    store
        .write(&key(1), &cache_data(&identity(), &[1; 10]))
        .unwrap();
    assert!(found(&store, &key(1)));
}

/// A store with one good entry written, for the damage tests below (which open it again once
/// the damage is done: an entry neither listed at opening nor written since is not opened).
fn store_with_a_dir(root: &Path) -> Store {
    let store = open(root, 1 << 30, at(0));
    store
        .write(&key(9), &cache_data(&identity(), &[9; 10]))
        .unwrap();
    store
}

/// A FIFO at `path`: an open that waited for its writer would never return.
fn make_fifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

fn reopened(root: &Path) -> Store {
    open(root, 1 << 30, at(1))
}

fn dropped_as(store: &Store, k: &PipelineKey, reason: &str) {
    match store.lookup(k).unwrap() {
        Lookup::Dropped(why) => assert_eq!(why.reason(), reason, "{why}"),
        Lookup::Found(_) => panic!("found"),
        Lookup::Missing => panic!("missing"),
    }
}

#[test]
fn a_fifo_or_link_named_as_an_entry_is_dropped_without_waiting_and_never_followed() {
    let root = tempfile::tempdir().unwrap();
    let store = store_with_a_dir(root.path());
    // A FIFO: an open that waited for a writer would hang the application for good.
    let fifo = store.entry_path(&key(1));
    make_fifo(&fifo);
    // Links to an endless device and to a file outside the store.
    let outside = root.path().join("outside");
    fs::write(&outside, cache_data(&identity(), &[7; 10])).unwrap();
    std::os::unix::fs::symlink("/dev/zero", store.entry_path(&key(2))).unwrap();
    std::os::unix::fs::symlink(&outside, store.entry_path(&key(3))).unwrap();
    // A directory under an entry's name.
    fs::create_dir(store.entry_path(&key(4))).unwrap();
    let store = reopened(root.path());
    let started = std::time::Instant::now();
    for n in 1..=4 {
        dropped_as(&store, &key(n), "not-a-file");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "no open waited"
    );
    for n in 1..=3 {
        assert!(
            fs::symlink_metadata(store.entry_path(&key(n))).is_err(),
            "entry {n} removed"
        );
    }
    assert!(outside.exists(), "a link's target is never touched");
    assert!(found(&store, &key(9)));
}

#[test]
fn a_file_larger_than_an_entry_may_be_is_dropped_past_its_first_read() {
    let root = tempfile::tempdir().unwrap();
    let store = store_with_a_dir(root.path());
    // Sparse: past the limit, within the bound (a file past the bound is evicted at opening).
    let huge = fs::File::create(store.entry_path(&key(1))).unwrap();
    huge.set_len(files::ENTRY_FILE_LIMIT + 1).unwrap();
    drop(huge);
    // Within the limit but longer than its envelope declares: refused before the rest is read.
    let mut long = envelope::encode(&identity(), &key(2), &cache_data(&identity(), &[2; 100]));
    long.resize(1 << 20, 0);
    fs::write(store.entry_path(&key(2)), &long).unwrap();
    let store = reopened(root.path());
    dropped_as(&store, &key(1), "too-large");
    assert!(!store.entry_path(&key(1)).exists());
    dropped_as(&store, &key(2), "long");
}

#[test]
fn the_tool_check_refuses_a_fifo_or_link_without_waiting() {
    let root = tempfile::tempdir().unwrap();
    let store = store_with_a_dir(root.path());
    let fifo = store.entry_path(&key(1));
    make_fifo(&fifo);
    std::os::unix::fs::symlink("/dev/zero", store.entry_path(&key(2))).unwrap();
    for n in [1, 2] {
        let err = inspect::check_entry(&store.entry_path(&key(n))).unwrap_err();
        assert_eq!(err.reason(), "not-a-file");
    }
}

/// Entries 1 to 3 written by driver version 1 of this device; returns its directory.
fn an_older_drivers_store_of_three(root: &Path) -> std::path::PathBuf {
    let old = Identity {
        driver_version: 1,
        ..identity()
    };
    let (old_store, _) = Store::open(root, "title", old, 1 << 30, at(0)).unwrap();
    let data = cache_data(&old, &[1; 10]);
    for n in 1..=3 {
        old_store.write(&key(n), &data).unwrap();
    }
    old_store.dir().to_path_buf()
}

#[test]
fn set_aside_directories_count_in_the_bound_and_go_first_when_over_it() {
    let root = tempfile::tempdir().unwrap();
    let old = an_older_drivers_store_of_three(root.path());
    let old_bytes: u64 = bound::entries_in(&old).iter().map(|e| e.bytes).sum();
    let aside = files::with_suffix(&old, SET_ASIDE_SUFFIX);
    // An application that never idles: the directory is set aside and never dropped.
    let (store, _) =
        Store::open_then_bound(root.path(), "title", identity(), 1 << 30, at(1), false).unwrap();
    assert!(aside.join(key(1).file_name()).exists());
    for n in 4..=6 {
        store
            .write(&key(n), &cache_data(&identity(), &[n; 30]))
            .unwrap();
    }
    let own: u64 = bound::entries_in(store.dir()).iter().map(|e| e.bytes).sum();

    // Within the bound with it: it stays, counted.
    let (roomy, _) = Store::open_then_bound(
        root.path(),
        "title",
        identity(),
        own + old_bytes,
        at(2),
        false,
    )
    .unwrap();
    let report = roomy.keep_within_bound().unwrap().report;
    assert_eq!(report.bytes, own + old_bytes, "{report:?}");
    assert!(aside.join(key(1).file_name()).exists());

    // Over the bound only with it: it goes, and every entry of this driver stays.
    let (tight, _) =
        Store::open_then_bound(root.path(), "title", identity(), own + 1, at(3), false).unwrap();
    let report = tight.keep_within_bound().unwrap().report;
    assert_eq!(report.bytes, own, "{report:?}");
    assert!(!aside.join(key(1).file_name()).exists());
    for n in 4..=6 {
        assert!(found(&tight, &key(n)));
    }
}

#[test]
fn another_drivers_opening_keeps_what_a_live_process_holds() {
    let root = tempfile::tempdir().unwrap();
    let dir = an_older_drivers_store_of_three(root.path());
    // A live process of the old driver: writing key 4, and loading key 2 under its marker.
    let tmp = dir.join(format!("{}.tmp", key(4).file_name()));
    fs::write(&tmp, b"half").unwrap();
    let marker = dir.join("4000000-4000001.loading");
    fs::write(&marker, key(2).file_name()).unwrap();
    let mut writer = hold_lock_in_child(&tmp);
    let mut loader = hold_lock_in_child(&marker);
    let (_new, report) = Store::open(root.path(), "title", identity(), 1 << 30, at(1)).unwrap();
    for child in [&mut writer, &mut loader] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    assert_eq!(report.other_driver_drops, 2, "{report:?}");
    assert!(tmp.exists() && marker.exists(), "held files stay");
    assert!(
        dir.join(key(2).file_name()).exists(),
        "the entry a live marker names stays"
    );
    assert!(!dir.join(key(1).file_name()).exists());
    // Once they are let go, the next opening drops the rest.
    let (_again, report) = Store::open(root.path(), "title", identity(), 1 << 30, at(2)).unwrap();
    assert_eq!(report.other_driver_drops, 1, "{report:?}");
    assert!(!dir.exists());
}

/// The layer's opening thread: another driver's directory is set aside by one rename before the
/// store is published, and its files dropped after; a drop the device stops is finished by the
/// next opening, which is no driver change again.
#[test]
fn another_drivers_directory_is_set_aside_then_dropped_and_a_stopped_drop_is_finished_later() {
    let root = tempfile::tempdir().unwrap();
    let dir = an_older_drivers_store_of_three(root.path());
    let aside = files::with_suffix(&dir, SET_ASIDE_SUFFIX);
    let published = |when| {
        Store::open_then_bound(root.path(), "title", identity(), 1 << 30, at(when), false).unwrap()
    };
    let (store, report) = published(1);
    assert!(store.driver_changed());
    assert_eq!(
        (report.other_drivers_found, report.other_driver_drops),
        (1, 0)
    );
    assert!(!dir.exists() && aside.join(key(1).file_name()).exists());
    assert_eq!(
        store.drop_other_drivers(&AtomicBool::new(true)),
        0,
        "stopped"
    );
    assert!(aside.exists());

    let (again, report) = published(2);
    assert!(!again.driver_changed(), "{report:?}");
    assert_eq!(again.drop_other_drivers(&AtomicBool::new(false)), 3);
    assert!(!aside.exists());
}

/// `pipekeep rebuild`: what its device's end left set aside is dropped after the replay, and the
/// store of the driver present is left whole.
#[test]
fn the_directories_an_opening_set_aside_are_dropped_whole_on_request() {
    let root = tempfile::tempdir().unwrap();
    let dir = an_older_drivers_store_of_three(root.path());
    let aside = files::with_suffix(&dir, SET_ASIDE_SUFFIX);
    let (store, _) =
        Store::open_then_bound(root.path(), "title", identity(), 1 << 30, at(1), false).unwrap();
    store
        .write(&key(9), &cache_data(&identity(), &[9; 10]))
        .unwrap();
    assert!(aside.join(key(1).file_name()).exists());
    assert_eq!(crate::store::drop_set_aside(root.path(), "title"), 3);
    assert!(!aside.exists());
    assert!(found(&store, &key(9)));
    assert_eq!(crate::store::drop_set_aside(root.path(), "title"), 0);
}

#[test]
fn a_directory_that_cannot_hold_a_marker_is_tried_again_after_a_pause() {
    let root = tempfile::tempdir().unwrap();
    let not_a_dir = root.path().join("file");
    fs::write(&not_a_dir, b"").unwrap();
    let name = key(1).file_name();
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(!LoadingMarker::unavailable_in(&not_a_dir));
            drop(LoadingMarker::hold(&not_a_dir, &name));
            assert!(LoadingMarker::unavailable_in(&not_a_dir), "remembered");
            drop(LoadingMarker::hold(&not_a_dir, &name));
            // The directory mended: after the pause the thread's loads are guarded again.
            fs::remove_file(&not_a_dir).unwrap();
            fs::create_dir(&not_a_dir).unwrap();
            std::thread::sleep(super::marker::RETRY_MARKER_AFTER);
            let held = LoadingMarker::hold(&not_a_dir, &name);
            assert!(!LoadingMarker::unavailable_in(&not_a_dir));
            drop(held);
        });
    });
}

#[test]
fn a_marker_asked_before_its_identity_directory_exists_makes_it_and_guards_the_load() {
    // An entry found still queued on a title's first run: its directory is not written yet.
    let root = tempfile::tempdir().unwrap();
    let dir = root
        .path()
        .join("title/host-pipelines/1002-73bf-00000007-abab");
    let name = key(1).file_name();
    std::thread::scope(|s| {
        s.spawn(|| {
            let held = LoadingMarker::hold(&dir, &name);
            assert!(!LoadingMarker::unavailable_in(&dir));
            let naming: Vec<String> = names(&dir)
                .into_iter()
                .filter(|n| n.ends_with(".loading"))
                .filter(|n| fs::read(dir.join(n)).unwrap() == name.as_bytes())
                .collect();
            assert_eq!(naming.len(), 1);
            drop(held);
        });
    });
}

/// Pipeline-cache data of `len` bytes whose tail is a block shared with every other call's (as
/// NVIDIA's dictionary is), after a head of its own.
fn data_sharing_a_block(head: u8, len: usize) -> Vec<u8> {
    let block: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    let own: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(head)).collect();
    cache_data(&identity(), &[&own[..], &block[..]].concat())
}

fn piece_files(store: &Store) -> Vec<std::path::PathBuf> {
    pieces::listed(store.dir())
        .into_iter()
        .map(|(_, p)| p)
        .collect()
}

#[test]
fn a_large_payload_is_kept_in_pieces_shared_between_entries_and_found_whole() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(0));
    let (one, two) = (
        data_sharing_a_block(3, 5_000),
        data_sharing_a_block(7, 21_000),
    );
    store.write(&key(1), &one).unwrap();
    let after_one = piece_files(&store).len();
    assert!(after_one > 5, "{after_one} pieces");
    store.write(&key(2), &two).unwrap();
    let after_two = piece_files(&store).len();
    assert!(
        after_two <= after_one + 3,
        "{after_one} then {after_two} pieces"
    );
    let kept = bound::entries_of_title(&root.path().join("title/host-pipelines")).unwrap();
    let kept_bytes: u64 = kept.iter().map(|e| e.bytes).sum();
    assert!(
        kept_bytes < (one.len() + two.len()) as u64 * 6 / 10,
        "{kept_bytes} bytes kept for {} named",
        one.len() + two.len()
    );
    let again = open(root.path(), 1 << 30, at(1));
    for (n, data) in [(1, &one), (2, &two)] {
        match again.lookup(&key(n)).unwrap() {
            Lookup::Found(e) => assert_eq!(&e.with_data(<[u8]>::to_vec), data),
            _ => panic!("entry {n} not found"),
        }
    }
    let shared = inspect::sharing(again.dir());
    assert_eq!(shared.named_bytes, (one.len() + two.len()) as u64);
    assert_eq!(shared.kept_bytes(), kept_bytes);
}

#[test]
fn a_missing_or_damaged_piece_makes_its_entries_misses_and_a_write_restores_them() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(0));
    let data = data_sharing_a_block(3, 5_000);
    store.write(&key(1), &data).unwrap();
    let pieces = piece_files(&store);
    fs::remove_file(&pieces[0]).unwrap();
    let mut damaged = fs::read(&pieces[1]).unwrap();
    damaged[0] ^= 1;
    fs::write(&pieces[1], &damaged).unwrap();
    let run2 = open(root.path(), 1 << 30, at(1));
    match run2.lookup(&key(1)).unwrap() {
        Lookup::Dropped(e) => assert!(
            ["missing-piece", "corrupt-piece"].contains(&e.reason()),
            "{e}"
        ),
        _ => panic!("an entry missing a piece was served"),
    }
    assert!(!run2.entry_path(&key(1)).exists(), "the entry is dropped");
    run2.write(&key(1), &data).unwrap();
    let run3 = open(root.path(), 1 << 30, at(2));
    match run3.lookup(&key(1)).unwrap() {
        Lookup::Found(e) => assert_eq!(e.with_data(<[u8]>::to_vec), data),
        _ => panic!("not found after it was written again"),
    }
    // A piece that fails its name is found by the tool's check too.
    let piece = &piece_files(&run3)[2];
    fs::write(piece, b"not that piece").unwrap();
    assert_eq!(
        inspect::check_piece(piece).unwrap_err().reason(),
        "corrupt-piece"
    );
    assert_eq!(
        inspect::check_entry(&run3.entry_path(&key(1)))
            .unwrap_err()
            .reason(),
        "corrupt-piece"
    );
}

#[test]
fn an_entry_of_the_previous_format_is_still_found() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(0));
    let data = cache_data(&identity(), &[9; 70]);
    store.write(&key(1), &[1]).ok(); // makes the directory
    fs::write(
        store.entry_path(&key(1)),
        envelope::encode_format_one(&identity(), &key(1), envelope::PayloadKind::Cache, &data),
    )
    .unwrap();
    let again = open(root.path(), 1 << 30, at(1));
    match again.lookup(&key(1)).unwrap() {
        Lookup::Found(e) => assert_eq!(e.with_data(<[u8]>::to_vec), data),
        _ => panic!("a format-1 entry was not found"),
    }
}

/// Leaves a stale per-thread marker naming `k` in `store`'s directory.
fn stale_marker_naming(store: &Store, k: &PipelineKey, tid: u32) {
    fs::write(
        store.dir().join(format!("999999-{tid}.loading")),
        k.file_name(),
    )
    .unwrap();
}

#[test]
fn a_stale_marker_costs_its_entry_alone_and_a_second_blame_drops_the_shared_pieces() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(0));
    for (n, len) in [(1, 5_000), (2, 9_000), (3, 13_000)] {
        store
            .write(&key(n), &data_sharing_a_block(n + 2, len))
            .unwrap();
    }
    let pieces_before = piece_files(&store).len();
    stale_marker_naming(&store, &key(1), 1);
    let (again, report) = Store::open(root.path(), "title", identity(), 1 << 30, at(1)).unwrap();
    assert_eq!(report.stale_marker_drops, 1);
    assert!(!found(&again, &key(1)), "the blamed entry is dropped");
    // Entries 2 and 3 share its pieces: still found, one crash cost one compile.
    assert!(found(&again, &key(2)));
    assert!(found(&again, &key(3)));
    assert_eq!(piece_files(&again).len(), pieces_before);
    assert!(again.dir().join(BLAMED_PIECES).is_file());

    // A second entry naming the same pieces is blamed: they go (a crash loop ends).
    stale_marker_naming(&again, &key(2), 2);
    let (third, report) = Store::open(root.path(), "title", identity(), 1 << 30, at(2)).unwrap();
    assert_eq!(report.stale_marker_drops, 1);
    assert!(!found(&third, &key(2)));
    assert!(matches!(
        third.lookup(&key(3)).unwrap(),
        Lookup::Dropped(EntryError::MissingPiece)
    ));
}

/// The same where the entries wait in a file (as most of a first launch's do on two cores): the
/// stopped entry's pieces, carried by the file, are blamed from its record there, and at a
/// second blame every waiting entry naming one goes too (before, no piece of a waiting entry was
/// blamed, and each launch could stop on the next entry sharing it).
#[test]
fn a_second_stopped_load_drops_the_waiting_entries_naming_the_pieces_it_blamed() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(0));
    let data: Vec<Vec<u8>> = [(1, 5_000), (2, 9_000), (3, 13_000)]
        .iter()
        .map(|&(n, len)| data_sharing_a_block(n + 2, len))
        .collect();
    store
        .keep_waiting(&waiting_entries(&data, 1..=3, at(0)))
        .unwrap();
    let taken_keys = |store: &Store| -> Vec<PipelineKey> {
        store.take_waiting().iter().map(|e| e.key).collect()
    };
    stale_marker_naming(&store, &key(1), 1);
    let (again, _) = Store::open(root.path(), "title", identity(), 1 << 30, at(1)).unwrap();
    assert_eq!(
        taken_keys(&again),
        vec![key(2), key(3)],
        "one crash, one compile"
    );
    assert!(again.dir().join(BLAMED_PIECES).is_file());

    stale_marker_naming(&again, &key(2), 2);
    let (third, _) = Store::open(root.path(), "title", identity(), 1 << 30, at(2)).unwrap();
    assert!(taken_keys(&third).is_empty(), "a crash loop ends");
}

/// Entries `keys` to leave waiting: key `n` with `data[n - 1]`, stamped `stamp`.
fn waiting_entries(
    data: &[Vec<u8>],
    keys: std::ops::RangeInclusive<u8>,
    stamp: SystemTime,
) -> Vec<waiting::ToWait<'_>> {
    keys.map(|n| {
        (
            key(n),
            envelope::PayloadKind::Cache,
            &data[n as usize - 1][..],
            stamp,
        )
    })
    .collect()
}

/// A store at `root` whose entries `files` (sharing a block) one process wrote as files, and
/// `waiting` a later one (which never touched their pieces) left waiting: the later one's.
fn files_then_waiting(
    root: &Path,
    files: std::ops::RangeInclusive<u8>,
    waiting: std::ops::RangeInclusive<u8>,
) -> Store {
    let last = *files.end().max(waiting.end());
    let data: Vec<Vec<u8>> = (1..=last)
        .map(|n| data_sharing_a_block(n + 2, 5_000 + 4_000 * n as usize))
        .collect();
    let first = open(root, 1 << 30, at(0));
    for n in files {
        first.write(&key(n), &data[n as usize - 1]).unwrap();
    }
    let later = open(root, 1 << 30, at(1));
    later
        .keep_waiting(&waiting_entries(&data, waiting, at(1)))
        .unwrap();
    later
}

/// Entries 1 and 2 are files sharing a block; a later process, which never touched their
/// pieces, left 3 and 4 waiting in a file that carries the block itself. Two stops in a row on
/// the files blame the block twice: the waiting entries carrying it go too, or the next launches
/// would stop on them (their file's copy is taken before the store's).
#[test]
fn a_second_blame_from_entry_files_takes_the_waiting_entries_carrying_the_piece() {
    let root = tempfile::tempdir().unwrap();
    let later = files_then_waiting(root.path(), 1..=2, 3..=4);
    stale_marker_naming(&later, &key(1), 1);
    let (again, _) = Store::open(root.path(), "title", identity(), 1 << 30, at(2)).unwrap();
    stale_marker_naming(&again, &key(2), 2);
    let (third, _) = Store::open(root.path(), "title", identity(), 1 << 30, at(3)).unwrap();
    assert!(third.take_waiting().is_empty(), "a crash loop ends");
}

/// A stopped entry waiting in one file names a piece the store no longer keeps (another bound
/// dropped it) that another waiting file carries: the piece is blamed all the same, so a second
/// stop, on an entry of that other file, takes its entries naming it (before, only the pieces of
/// files holding a stopped copy counted, and the second stop was the first blame).
#[test]
fn a_piece_only_another_waiting_file_carries_is_blamed() {
    let root = tempfile::tempdir().unwrap();
    let data: Vec<Vec<u8>> = (1..=6u8)
        .map(|n| data_sharing_a_block(n + 2, 5_000 + 4_000 * n as usize))
        .collect();
    open(root.path(), 1 << 30, at(0))
        .write(&key(1), &data[0])
        .unwrap();
    // Touching the block's pieces, it names them; the next process carries them.
    let naming = open(root.path(), 1 << 30, at(1));
    naming.write(&key(2), &data[1]).unwrap();
    naming
        .keep_waiting(&waiting_entries(&data, 3..=4, at(1)))
        .unwrap();
    let carrying = open(root.path(), 1 << 30, at(2));
    carrying
        .keep_waiting(&waiting_entries(&data, 5..=6, at(2)))
        .unwrap();
    for piece in piece_files(&carrying) {
        fs::remove_file(piece).unwrap();
    }
    stale_marker_naming(&carrying, &key(3), 1);
    let (again, _) = Store::open(root.path(), "title", identity(), 1 << 30, at(3)).unwrap();
    stale_marker_naming(&again, &key(5), 2);
    let (third, _) = Store::open(root.path(), "title", identity(), 1 << 30, at(4)).unwrap();
    let taken: Vec<PipelineKey> = third.take_waiting().iter().map(|e| e.key).collect();
    assert!(!taken.contains(&key(6)), "a crash loop ends: {taken:?}");
}

/// One stop of a process whose threads were loading two entries at once (two markers) blames
/// their shared pieces once: the entries it named go, the others sharing the pieces stay.
#[test]
fn one_stop_of_two_threads_blames_the_pieces_they_share_once() {
    let root = tempfile::tempdir().unwrap();
    let later = files_then_waiting(root.path(), 1..=3, 4..=6);
    stale_marker_naming(&later, &key(1), 1);
    stale_marker_naming(&later, &key(2), 2);
    stale_marker_naming(&later, &key(4), 3);
    let (again, _) = Store::open(root.path(), "title", identity(), 1 << 30, at(2)).unwrap();
    let taken: Vec<PipelineKey> = again.take_waiting().iter().map(|e| e.key).collect();
    assert_eq!(taken, vec![key(5), key(6)]);
    assert!(
        found(&again, &key(3)),
        "one stop costs the entries it named alone"
    );
    assert!(!found(&again, &key(1)) && !found(&again, &key(2)));
}

/// A waiting file's damaged copy of a piece the store keeps sound: a stop on an entry naming it
/// leaves the store's piece (the entry files naming it are still found).
#[test]
fn a_damaged_copy_in_a_waiting_file_leaves_the_stores_sound_piece() {
    let root = tempfile::tempdir().unwrap();
    let later = files_then_waiting(root.path(), 1..=1, 2..=3);
    let file = waiting::files_in(later.dir()).unwrap().pop().unwrap();
    let mut bytes = read_waiting(&file);
    // A byte flipped in a piece the file carries that the store keeps too.
    let flip = {
        let all = waiting::parse_all(&bytes).0;
        let kept = all.iter().find(|r| {
            let name = [r.key.spirv, r.key.state].concat();
            r.piece && later.pieces.path(&name.try_into().unwrap()).is_file()
        });
        kept.unwrap().entry.as_ptr() as usize - bytes.as_ptr() as usize
    };
    bytes[flip + 10] ^= 0x40;
    fs::write(&file, &bytes).unwrap();
    stale_marker_naming(&later, &key(2), 1);
    let (again, _) = Store::open(root.path(), "title", identity(), 1 << 30, at(2)).unwrap();
    assert!(found(&again, &key(1)), "the store's piece stays");
    // Written anew without entry 2 and the damaged copy: entry 3 takes the store's piece.
    let taken: Vec<PipelineKey> = again.take_waiting().iter().map(|e| e.key).collect();
    assert_eq!(taken, vec![key(3)]);
}

#[test]
fn a_damaged_note_of_blamed_pieces_is_ignored_with_a_line() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(0));
    for n in 1..=2 {
        store
            .write(&key(n), &data_sharing_a_block(n + 2, 5_000))
            .unwrap();
    }
    fs::write(
        store.dir().join(BLAMED_PIECES),
        b"\xff\x00 not a note at all\n",
    )
    .unwrap();
    stale_marker_naming(&store, &key(1), 1);
    let captured = crate::sync::CapturedLog::default();
    let (again, report) = captured.during(tracing::Level::INFO, || {
        Store::open(root.path(), "title", identity(), 1 << 30, at(1)).unwrap()
    });
    assert_eq!(report.stale_marker_drops, 1);
    assert!(found(&again, &key(2)), "a damaged note blames nothing");
    let text = captured.text();
    assert!(text.contains("blamed pieces"), "{text}");
}

fn modified(path: &Path) -> SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

#[test]
fn a_process_that_opened_earlier_never_sets_a_stamp_back() {
    let root = tempfile::tempdir().unwrap();
    let first = open(root.path(), 1 << 30, at(0));
    first
        .write(&key(1), &data_sharing_a_block(3, 5_000))
        .unwrap();
    // Two processes of one title: the older opened at 100 s, the newer at 200 s.
    let older = open(root.path(), 1 << 30, at(100));
    let newer = open(root.path(), 1 << 30, at(200));
    newer
        .write(&key(2), &data_sharing_a_block(5, 9_000))
        .unwrap();
    let Lookup::Found(entry) = newer.lookup(&key(1)).unwrap() else {
        panic!("entry 1 not found")
    };
    newer.stamp(entry);
    let pieces: Vec<_> = piece_files(&newer)
        .into_iter()
        .map(|p| {
            let t = modified(&p);
            (p, t)
        })
        .collect();
    let entry_one = modified(&newer.entry_path(&key(1)));
    assert!(entry_one > at(199));

    // The older process writes an entry naming the same pieces, and finds entry 1.
    older
        .write(&key(3), &data_sharing_a_block(7, 13_000))
        .unwrap();
    let Lookup::Found(entry) = older.lookup(&key(1)).unwrap() else {
        panic!("entry 1 not found")
    };
    older.stamp(entry);
    assert_eq!(modified(&older.entry_path(&key(1))), entry_one);
    // Both compiled one pipeline: the older process's write of its entry keeps the newer stamp.
    let data = cache_data(&identity(), &[8; 40]);
    newer.write(&key(8), &data).unwrap();
    let newer_stamp = modified(&newer.entry_path(&key(8)));
    older.write(&key(8), &data).unwrap();
    assert_eq!(modified(&older.entry_path(&key(8))), newer_stamp);
    for (piece, stamp) in &pieces {
        assert!(modified(piece) >= *stamp, "{} set back", piece.display());
    }
}

#[test]
fn the_bound_drops_pieces_last() {
    // The bound: a later run's entry keeps its pieces; the earlier run's entry goes first.
    let root = tempfile::tempdir().unwrap();
    let run1 = open(root.path(), 1 << 30, at(0));
    run1.write(&key(1), &data_sharing_a_block(3, 5_000))
        .unwrap();
    let run2 = open(root.path(), 1 << 30, at(10));
    run2.write(&key(2), &data_sharing_a_block(5, 70_000))
        .unwrap();
    let all = bound::entries_of_title(&root.path().join("title/host-pipelines")).unwrap();
    let total: u64 = all.iter().map(|e| e.bytes).sum();
    let entry_one = fs::metadata(run1.entry_path(&key(1))).unwrap().len();
    let after = open(root.path(), total - entry_one, at(20));
    assert!(!found(&after, &key(1)), "the older run's entry went first");
    assert!(
        found(&after, &key(2)),
        "the newer entry kept every piece it names"
    );
}

/// Pipeline-cache data of a head of its own (`head`) and an 8 KB block of `block`'s, for a store
/// chunking finely ([`finely`]): entries of one block share its pieces.
fn data_with_block(block: u8, head: u8) -> Vec<u8> {
    let shared: Vec<u8> = (0..8_000u32)
        .map(|i| ((i ^ u32::from(block) << 16).wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    let own: Vec<u8> = (0..1_500u32)
        .map(|i| (i.wrapping_mul(u32::from(head) * 2 + 1) >> 3) as u8)
        .collect();
    cache_data(&identity(), &[&own[..], &shared[..]].concat())
}

/// A store chunking as the tests of pieces on RADV do: pieces of a few hundred bytes.
fn finely(store: Store) -> Store {
    store.set_chunking(recipe::Chunking::fine_from(1024));
    store
}

fn bytes_of(paths: &[std::path::PathBuf]) -> u64 {
    paths.iter().map(|p| fs::metadata(p).unwrap().len()).sum()
}

fn title_bytes(root: &Path) -> u64 {
    bound::entries_of_title(&root.join("title/host-pipelines"))
        .unwrap()
        .iter()
        .map(|e| e.bytes)
        .sum()
}

/// Issue 38, item 7: a piece no kept entry names goes before any entry. A piece carries the
/// newest stamp of the entries naming it: once they are gone it outlived older entries, which
/// the bound dropped in its place.
#[test]
fn an_unnamed_piece_goes_before_the_oldest_entry() {
    let root = tempfile::tempdir().unwrap();
    let run1 = open(root.path(), 1 << 30, at(0));
    run1.write(&key(1), &cache_data(&identity(), &[1; 200]))
        .unwrap();
    let run2 = finely(open(root.path(), 1 << 30, at(10)));
    run2.write(&key(2), &data_with_block(2, 2)).unwrap();
    // Entry 2 gone (as another run's bound, between its entry and its pieces, leaves it): its
    // pieces, stamped after entry 1, are named by no entry.
    fs::remove_file(run2.entry_path(&key(2))).unwrap();
    let orphans = piece_files(&run2);
    assert!(orphans.len() > 5, "{} pieces", orphans.len());
    let bound = title_bytes(root.path()) - bytes_of(&orphans);
    let after = open(root.path(), bound, at(20));
    assert!(
        found(&after, &key(1)),
        "the oldest entry went before pieces no entry names"
    );
    assert_eq!(piece_files(&after), Vec::<std::path::PathBuf>::new());
}

/// Issue 38, item 7: once the bound drops an entry, the pieces only it named go before the next
/// entry, even where a later run stamped them newer; a piece another kept entry names stays,
/// and an entry that cannot be read names nothing (it keeps no piece, and drops none).
#[test]
fn the_pieces_only_a_dropped_entry_named_go_before_the_next_entry() {
    let root = tempfile::tempdir().unwrap();
    let run1 = finely(open(root.path(), 1 << 30, at(0)));
    run1.write(&key(1), &data_with_block(1, 1)).unwrap();
    let run2 = finely(open(root.path(), 1 << 30, at(10)));
    // Entry 5 shares entry 1's block: its pieces carry run 2's newest stamp. Then it goes
    // (by hand), and entry 1 alone names them.
    run2.write(&key(5), &data_with_block(1, 5)).unwrap();
    run2.write(&key(2), &cache_data(&identity(), &[2; 200]))
        .unwrap();
    run2.write(&key(3), &data_with_block(3, 3)).unwrap();
    run2.write(&key(4), &cache_data(&identity(), &[4; 200]))
        .unwrap();
    fs::remove_file(run2.entry_path(&key(5))).unwrap();
    let entry = fs::read(run2.entry_path(&key(3))).unwrap();
    let named: Vec<recipe::PieceName> = envelope::listed_parts(&entry)
        .unwrap()
        .1
        .into_iter()
        .flat_map(|n| run2.pieces.listed_by(&n).into_iter().chain([n]))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let named_by_three: Vec<_> = named.iter().map(|n| run2.pieces.path(n)).collect();
    assert!(!named_by_three.is_empty());
    // An entry cut short, stamped newest: it names nothing.
    let cut = run2.entry_path(&key(6));
    let three = fs::read(run2.entry_path(&key(3))).unwrap();
    fs::write(&cut, &three[..three.len() - 40]).unwrap();
    set_stamp(&cut, at(11));
    let kept = bytes_of(&named_by_three)
        + [2, 3, 4, 6]
            .map(|n| fs::metadata(run2.entry_path(&key(n))).unwrap().len())
            .iter()
            .sum::<u64>();
    let after = open(root.path(), kept, at(20));
    assert!(!found(&after, &key(1)), "the oldest entry went");
    for n in [2, 3, 4] {
        assert!(
            found(&after, &key(n)),
            "entry {n} went before pieces no kept entry names"
        );
    }
    assert_eq!(title_bytes(root.path()), kept);
}

/// Three runs of 12 entries naming pieces (each run's entries sharing three blocks), and pieces
/// no entry names (entries removed by hand): the same files and stamps at every call.
fn three_runs_naming_pieces(root: &Path) -> std::path::PathBuf {
    for run in 0..3u8 {
        let store = finely(open(root, 1 << 30, at(u64::from(run) * 10)));
        for n in 0..12u8 {
            store
                .write(&key(run * 12 + n + 1), &data_with_block(run * 3 + n % 3, n))
                .unwrap();
        }
    }
    let host = root.join("title/host-pipelines");
    let dir = open(root, 1 << 30, at(40)).dir().to_path_buf();
    for n in [5u8, 18, 31] {
        fs::remove_file(dir.join(key(n).file_name().as_str())).unwrap();
    }
    host
}

fn entries_kept(host: &Path) -> std::collections::BTreeSet<std::path::PathBuf> {
    bound::entries_of_title(host)
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .filter(|p| p.extension().is_some_and(|x| x == "entry"))
        .map(|p| p.strip_prefix(host).unwrap().to_path_buf())
        .collect()
}

/// Two passes at once (two processes, or the command beside a running application) remove
/// together no more than the excess where entries name pieces: they keep every entry one pass
/// alone keeps, but at most one, and the title within its bound.
#[test]
fn two_passes_at_once_over_entries_naming_pieces_drop_no_more_entries_than_one() {
    for round in 0..3 {
        let alone = tempfile::tempdir().unwrap();
        let host = three_runs_naming_pieces(alone.path());
        let bound = title_bytes(alone.path()) / 2;
        bound::keep_within(&host, bound, &|_| false).unwrap();
        let one_keeps = entries_kept(&host);

        let both = tempfile::tempdir().unwrap();
        let host = three_runs_naming_pieces(both.path());
        assert_eq!(title_bytes(both.path()) / 2, bound);
        two_passes_at_once(&host, bound);
        let two_keep = entries_kept(&host);
        assert!(title_bytes(both.path()) <= bound, "round {round}");
        let lost = one_keeps.difference(&two_keep).count();
        assert!(
            lost <= 1,
            "round {round}: {lost} entries lost more than one pass loses"
        );
    }
}

#[test]
fn a_block_of_many_chunks_is_named_through_lists_and_a_lost_list_is_a_miss() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let block: Vec<u8> = (0..1_500_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    let data = |head: u8| cache_data(&identity(), &[&vec![head; 3_000][..], &block[..]].concat());
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(0));
    store.write(&key(1), &data(1)).unwrap();
    let after_one = piece_files(&store).len();
    store.write(&key(2), &data(2)).unwrap();
    let after_two = piece_files(&store).len();
    assert!(
        after_two <= after_one + 6,
        "{after_one} then {after_two} pieces"
    );
    let entry = fs::read(store.entry_path(&key(2))).unwrap();
    let (_, named) = envelope::listed_parts(&entry).unwrap();
    // About 180 chunks, named through lists of about 16.
    assert!(named.len() < 60, "{} parts name the block", named.len());
    let pieces = pieces::Pieces::for_looking(store.dir());
    let list = named
        .iter()
        .find(|n| !pieces.listed_by(n).is_empty())
        .expect("a list among the parts");
    let again = open(root.path(), 1 << 30, at(1));
    match again.lookup(&key(2)).unwrap() {
        Lookup::Found(e) => assert_eq!(e.with_data(<[u8]>::to_vec), data(2)),
        _ => panic!("not found"),
    }
    fs::remove_file(pieces.path(list)).unwrap();
    let third = open(root.path(), 1 << 30, at(2));
    assert!(matches!(
        third.lookup(&key(1)).unwrap(),
        Lookup::Dropped(EntryError::MissingPiece)
    ));
}

/// NVIDIA cache data carrying the driver's dictionary, kept with its dictionary's record a shared
/// piece: a lookup frames it from the pieces and hands the rest without it.
#[test]
fn an_entry_carrying_nvidias_dictionary_is_found_and_handed_over_without_it() {
    use super::nvidia_cache::tests::{dictionary_key, record};
    let root = tempfile::tempdir().unwrap();
    let nvidia = Identity {
        vendor_id: super::identity::NVIDIA,
        ..identity()
    };
    let dictionary = record(
        dictionary_key(),
        0xd1c7,
        &super::recipe::tests::noise(600_000),
    );
    let data_of = |n: u8, dictionary_first: bool| {
        let own = record([n; 16], n as u64, &vec![n; 900 + n as usize]);
        let records = if dictionary_first {
            [dictionary.clone(), own.clone()].concat()
        } else {
            [own.clone(), dictionary.clone()].concat()
        };
        let body = [&2u32.to_le_bytes()[..], &records].concat();
        let without = [&1u32.to_le_bytes()[..], &own].concat();
        (cache_data(&nvidia, &body), cache_data(&nvidia, &without))
    };
    let run1 = Store::open(root.path(), "title", nvidia, 1 << 30, at(100))
        .unwrap()
        .0;
    let entries = [data_of(1, true), data_of(2, false)];
    for (n, (data, _)) in entries.iter().enumerate() {
        run1.write(&key(n as u8), data).unwrap();
    }
    let run2 = Store::open(root.path(), "title", nvidia, 1 << 30, at(200))
        .unwrap()
        .0;
    for (n, (data, without)) in entries.iter().enumerate() {
        let Lookup::Found(found) = run2.lookup(&key(n as u8)).unwrap() else {
            panic!("entry {n} is found");
        };
        assert_eq!(found.with_data(|d| d.to_vec()), *data);
        let framing = found
            .nvidia_dictionary()
            .expect("it carries the dictionary");
        assert_eq!(framing.dictionary.hash, 0xd1c7);
        assert_eq!(found.without_dictionary(&framing), *without);
    }
    // Cut record by record, the dictionary's record is one piece both entries name.
    let pieces: Vec<_> = fs::read_dir(run2.dir().join("pieces"))
        .unwrap()
        .map(|p| p.unwrap().metadata().unwrap().len())
        .collect();
    assert_eq!(pieces.len(), 1, "the dictionary is kept once, as one piece");
    assert!(pieces[0] >= dictionary.len() as u64 / 2);
    for n in 0..entries.len() {
        let entry = fs::metadata(run2.entry_path(&key(n as u8))).unwrap().len();
        assert!(
            entry < 16 << 10,
            "entry {n} names the dictionary ({entry} bytes)"
        );
    }
}

/// The note naming the entry that carries NVIDIA's dictionary: written whole, read back, naming
/// nothing when it is not an entry's name or not a file, and dropped with its driver's directory.
#[test]
fn the_note_naming_the_dictionarys_entry_is_read_back_and_dropped_with_its_directory() {
    let root = tempfile::tempdir().unwrap();
    let dir = an_older_drivers_store_of_three(root.path());
    let old = Store::open(
        root.path(),
        "title",
        Identity {
            driver_version: 1,
            ..identity()
        },
        1 << 30,
        at(1),
    )
    .unwrap()
    .0;
    assert_eq!(old.dictionary_entry(), None, "no note yet");
    old.remember_dictionary_entry(&key(2).file_name()).unwrap();
    assert_eq!(old.dictionary_entry(), Some(key(2)));
    let note = dir.join(DICTIONARY_ENTRY);
    let no_tmp = names(&dir).iter().all(|n| !n.ends_with(".tmp"));
    assert!(no_tmp, "written through a renamed temporary file");
    for bad in [&b"not an entry\n"[..], &[b'a'; 4096][..], b""] {
        fs::write(&note, bad).unwrap();
        assert_eq!(old.dictionary_entry(), None);
    }
    fs::remove_file(&note).unwrap();
    std::os::unix::fs::symlink(dir.join(key(1).file_name()), &note).unwrap();
    assert_eq!(old.dictionary_entry(), None, "a link is never followed");
    fs::remove_file(&note).unwrap();
    old.remember_dictionary_entry(&key(3).file_name()).unwrap();
    drop(old);
    let (_new, report) = Store::open(root.path(), "title", identity(), 1 << 30, at(2)).unwrap();
    assert_eq!(report.other_driver_drops, 3, "{report:?}");
    assert!(!dir.exists(), "the note goes with its directory");
}

/// A `binary` payload of one binary a stage, each under a key of its own.
fn stages(datas: &[&[u8]]) -> Vec<u8> {
    let keys: Vec<[u8; 1]> = (0..datas.len()).map(|i| [i as u8]).collect();
    binaries::encode(&[], keys.iter().zip(datas).map(|(k, d)| (&k[..], *d)))
}

/// The pieces `k`'s entry names (a piece named twice counted twice).
fn pieces_named(store: &Store, k: &PipelineKey) -> usize {
    let file = fs::read(store.entry_path(k)).unwrap();
    envelope::listed_parts(&file).unwrap().1.len()
}

#[test]
fn a_stage_binary_becomes_a_piece_once_a_second_entry_carries_it() {
    use envelope::PayloadKind::Binaries;
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(100));
    let [a, b, c, d] = [1u8, 2, 3, 4].map(|n| vec![n; 600]);
    let payloads = [
        stages(&[&a, &b]),
        stages(&[&a, &c]),
        stages(&[&a, &d, &d]),
        stages(&[&b, &[5; 100]]),
    ];
    let stamps = [at(99), at(98), at(97), at(96)];
    let write = |n: usize| {
        store
            .write_announced(&key(n as _), Binaries, &payloads[n - 1], stamps[n - 1])
            .unwrap()
    };
    write(1);
    assert_eq!(
        (pieces_named(&store, &key(1)), piece_files(&store).len()),
        (0, 0),
        "no other entry carries its stages: they stand inline"
    );
    write(2);
    assert_eq!(
        pieces_named(&store, &key(2)),
        1,
        "the stage two entries carry"
    );
    assert_eq!(
        pieces_named(&store, &key(1)),
        1,
        "the first carrier is written again, naming the piece"
    );
    let first_stamp = fs::metadata(store.entry_path(&key(1)))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(first_stamp, stamps[0], "with its own stamp");
    write(3);
    assert_eq!(
        pieces_named(&store, &key(3)),
        3,
        "a piece kept already, and a stage the entry carries twice"
    );
    write(4);
    assert_eq!(
        (pieces_named(&store, &key(4)), pieces_named(&store, &key(1))),
        (1, 2),
        "b shared now too; a stage under the piece size stands inline"
    );
    assert_eq!(piece_files(&store).len(), 3, "a, d and b, each once");
    let next_run = open(root.path(), 1 << 30, at(200));
    for (n, payload) in (1..=4).zip(&payloads) {
        match next_run.lookup(&key(n)).unwrap() {
            Lookup::Found(e) => assert_eq!(&e.with_data(<[u8]>::to_vec), payload),
            _ => panic!("entry {n} not found whole"),
        }
    }
}

#[test]
fn entries_written_together_name_their_shared_stages_from_the_first() {
    use envelope::PayloadKind::Binaries;
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(100));
    let [a, b, c] = [1u8, 2, 3].map(|n| vec![n; 600]);
    let payloads = [stages(&[&a, &b]), stages(&[&a, &c])];
    // The writer's queue at the device's end, told to the store before it is written.
    store.expect_together(
        &[(Binaries, &payloads[0][..]), (Binaries, &payloads[1][..])],
        &[],
    );
    both_naming_one_piece(
        &store,
        Binaries,
        [&payloads[0], &payloads[1]],
        "the first carrier names the stage the second carries: never written inline, then again",
        "a, once; b and c inline",
    );
    let next_run = open(root.path(), 1 << 30, at(200));
    for (n, payload) in (1..=2).zip(&payloads) {
        match next_run.lookup(&key(n)).unwrap() {
            Lookup::Found(e) => assert_eq!(&e.with_data(<[u8]>::to_vec), payload),
            _ => panic!("entry {n} not found whole"),
        }
    }
}

/// Writes keys 1 and 2 of `payloads`, told together: each names one piece, the first written
/// naming it already (`first`), and one piece file is kept (`once`).
fn both_naming_one_piece(
    store: &Store,
    kind: envelope::PayloadKind,
    payloads: [&[u8]; 2],
    first: &str,
    once: &str,
) {
    store
        .write_announced(&key(1), kind, payloads[0], at(99))
        .unwrap();
    assert_eq!(
        (pieces_named(store, &key(1)), piece_files(store).len()),
        (1, 1),
        "{first}"
    );
    store
        .write_announced(&key(2), kind, payloads[1], at(98))
        .unwrap();
    assert_eq!(pieces_named(store, &key(2)), 1);
    assert_eq!(piece_files(store).len(), 1, "{once}");
}

/// The writer's entries holding NVIDIA's dictionary apart at the device's end are told to the
/// store by the dictionary's record alone (not each put together and cut): the first written
/// names it as a piece, never standing it inline to be written again.
#[test]
fn a_record_entries_carry_apart_is_a_piece_from_the_first_written() {
    use super::nvidia_cache::tests::{dictionary_key, nvidia_cache, record};
    use super::recipe::KnownPiece;
    use envelope::PayloadKind::Cache;
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(100));
    let dictionary = record(dictionary_key(), 7, &vec![0x4d; 4096]);
    let own = |n: u8| record([n; 16], u64::from(n), &vec![n; 2048]);
    let payloads = [1, 2].map(|n| nvidia_cache(&[own(n), dictionary.clone()]));
    store.expect_together(&[], &[(&KnownPiece::new(&dictionary), 2)]);
    both_naming_one_piece(
        &store,
        Cache,
        [&payloads[0], &payloads[1]],
        "the dictionary a second entry carries is a piece from the first",
        "the dictionary, once",
    );
    // A record under the piece size is no piece, whoever carries it.
    let short = record(dictionary_key(), 8, &[0x4e; 100]);
    store.expect_together(&[], &[(&KnownPiece::new(&short), 2)]);
    store
        .write_announced(
            &key(3),
            Cache,
            &nvidia_cache(&[own(3), short.clone()]),
            at(97),
        )
        .unwrap();
    assert_eq!(pieces_named(&store, &key(3)), 0, "it stands inline");
}

#[test]
fn every_stage_binary_is_a_piece_where_the_test_setting_asks() {
    use envelope::PayloadKind::Binaries;
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(100));
    store.keep_every_binary_as_a_piece();
    let [a, b] = [1u8, 2].map(|n| vec![n; 600]);
    store
        .write_announced(&key(1), Binaries, &stages(&[&a, &b]), at(99))
        .unwrap();
    assert_eq!(pieces_named(&store, &key(1)), 2);
}

/// Finds `n`'s entry and stamps it, as the layer does for a found pipeline.
fn use_found(store: &Store, n: u8) {
    match store.lookup(&key(n)).unwrap() {
        Lookup::Found(e) => store.stamp(e),
        _ => panic!("entry {n} not found"),
    }
}

#[test]
fn a_runs_order_of_use_is_remembered_for_the_next_and_a_damaged_one_is_dropped() {
    let root = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[7; 100]);
    let run1 = open(root.path(), 1 << 30, at(100));
    for n in [3, 1, 2] {
        run1.write(&key(n), &data).unwrap();
    }
    run1.remember_use_order().unwrap();
    let path = run1.dir.join(order::USE_ORDER);

    let run2 = open(root.path(), 1 << 30, at(200));
    assert_eq!(run2.remembered_use_order(), [key(3), key(1), key(2)]);
    // A shorter run in another order: its order first, then the rest of the last one.
    for n in [2, 3] {
        use_found(&run2, n);
    }
    run2.remember_use_order().unwrap();

    let run3 = open(root.path(), 1 << 30, at(300));
    assert_eq!(run3.remembered_use_order(), [key(2), key(3), key(1)]);
    // The same order again: the file is not written again (a directory in its place would make
    // any write fail).
    fs::remove_file(&path).unwrap();
    fs::create_dir(&path).unwrap();
    for n in [2, 3, 1] {
        use_found(&run3, n);
    }
    run3.remember_use_order().unwrap();
    fs::remove_dir(&path).unwrap();
    run3.remember_use_order().unwrap();
    assert!(!path.exists(), "a run that used nothing writes nothing");

    // Damaged: dropped at its reading, and the run reads nothing from it.
    fs::write(&path, order::encode(&[key(1), key(2)])).unwrap();
    let mut bytes = fs::read(&path).unwrap();
    bytes[20] ^= 0x01;
    fs::write(&path, &bytes).unwrap();
    let run4 = open(root.path(), 1 << 30, at(400));
    assert!(run4.remembered_use_order().is_empty());
    assert!(!path.exists(), "a damaged use order is dropped");
    use_found(&run4, 1);
    run4.remember_use_order().unwrap();
    let run5 = open(root.path(), 1 << 30, at(500));
    assert_eq!(run5.remembered_use_order(), [key(1)]);
}

#[test]
fn the_use_order_leaves_out_what_the_bound_has_dropped() {
    let root = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[7; 100]);
    let run1 = open(root.path(), 1 << 30, at(100));
    for n in 1..=4 {
        run1.write(&key(n), &data).unwrap();
    }
    run1.remember_use_order().unwrap();
    let entry_bytes = fs::metadata(run1.entry_path(&key(1))).unwrap().len();
    // Room for two: the bound keeps the first two used in run 1 (the newest stamps).
    let run2 = Store::open_then_bound(
        root.path(),
        "title",
        identity(),
        2 * entry_bytes,
        at(200),
        false,
    )
    .unwrap()
    .0;
    run2.keep_within_bound().unwrap();
    use_found(&run2, 2);
    run2.remember_use_order().unwrap();
    let run3 = open(root.path(), 1 << 30, at(300));
    assert_eq!(run3.remembered_use_order(), [key(2), key(1)]);
}

/// Issue 31, item 9: an identity directory removed while the process runs (`pipekeep clear`
/// beside it, a user's `rm -r`) is made again by the next write: it was made once a run, and
/// every write after its removal was skipped.
#[test]
fn a_directory_removed_while_the_store_is_open_is_made_again_by_the_next_write() {
    let root = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[9; 200]);
    let store = open(root.path(), 1 << 30, at(100));
    store.write(&key(1), &data).unwrap();
    let dir = root.path().join("title/host-pipelines");
    fs::remove_dir_all(&dir).unwrap();
    assert!(matches!(
        store.write(&key(2), &data).unwrap(),
        files::Written::Whole(_)
    ));
    assert!(found(&store, &key(2)));
    // Stamps go to the directory made again, not the one removed.
    let again = open(root.path(), 1 << 30, at(200));
    assert!(found(&again, &key(2)));
    assert_eq!(bound::entries_of_title(&dir).unwrap().len(), 1);
}

#[test]
fn entries_left_waiting_are_taken_whole_by_the_next_opening_and_a_damaged_one_alone_is_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[9; 200]);
    let store = open(tmp.path(), 1 << 30, at(100));
    let entries: Vec<waiting::ToWait<'_>> = (1..=3)
        .map(|k| {
            (
                key(k),
                envelope::PayloadKind::Cache,
                &data[..],
                at(50 + u64::from(k)),
            )
        })
        .collect();
    store.keep_waiting(&entries).unwrap();
    let files: Vec<String> = names(store.dir())
        .into_iter()
        .filter(|n| n.ends_with(waiting::SUFFIX))
        .collect();
    assert_eq!(files.len(), 1, "one file, no entry file");
    assert!(!store.dir().join(key(1).file_name()).exists());
    // The middle record damaged: the other two are still taken.
    let path = store.dir().join(&files[0]);
    let mut bytes = read_waiting(&path);
    let head = waiting::head_len(&bytes).unwrap();
    let second = head + (48 + (bytes.len() - head) / 3) + 48 + 60;
    bytes[second] ^= 0x40;
    fs::write(&path, &bytes).unwrap();
    let again = open(tmp.path(), 1 << 30, at(200));
    let taken = again.take_waiting();
    let keys: Vec<PipelineKey> = taken.iter().map(|e| e.key).collect();
    assert_eq!(keys, vec![key(1), key(3)]);
    assert_eq!(&taken[0].data.as_one()[..], &data[..]);
    assert_eq!(taken[1].stamp, at(53));
    assert!(
        path.exists(),
        "the file stays until the process's end settles it"
    );
    assert!(again.take_waiting().is_empty(), "taken once a process");
}

#[test]
fn a_waiting_file_larger_than_one_may_be_is_removed_unused_and_the_rest_are_taken() {
    let tmp = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[9; 200]);
    let store = open(tmp.path(), 1 << 30, at(100));
    store
        .keep_waiting(&[(key(1), envelope::PayloadKind::Cache, &data[..], at(51))])
        .unwrap();
    // Named as a process of this ABI names its file, and taken first (its time, 1, the oldest):
    // a file past the size is no reason to take no more. Sparse where the file system allows.
    let huge = store
        .dir()
        .join(format!("1-1-{}{}", identity().abi, waiting::SUFFIX));
    fs::File::create(&huge)
        .unwrap()
        .set_len(waiting::MOST_BYTES + 1)
        .unwrap();
    let again = open(tmp.path(), 1 << 30, at(200));
    let keys: Vec<PipelineKey> = again.take_waiting().iter().map(|e| e.key).collect();
    assert_eq!(keys, vec![key(1)]);
    assert!(!huge.exists(), "removed unread");
}

/// Takes the waiting files and announces their entries as the layer's writer does, to be
/// written later.
fn take_and_queue(store: &Store) -> TakenAndQueued {
    let entries = store.take_waiting();
    let held = entries
        .iter()
        .map(|e| {
            let data: Arc<Queued<dyn QueuedData>> = Queued::new(e.data.as_one().into_owned());
            store.will_write_earlier(&e.key, e.kind, &data);
            Some(data)
        })
        .collect();
    TakenAndQueued { entries, held }
}

/// Entries taken from waiting files and queued, their data held as the layer's writer holds it:
/// each waits (found from memory) until written here, or until this is dropped.
#[must_use]
struct TakenAndQueued {
    entries: Vec<waiting::WaitingEntry>,
    held: Vec<Option<Arc<Queued<dyn QueuedData>>>>,
}

impl std::ops::Deref for TakenAndQueued {
    type Target = [waiting::WaitingEntry];
    fn deref(&self) -> &Self::Target {
        &self.entries
    }
}

impl TakenAndQueued {
    /// Writes the `i`th entry with `stamp`, as the writer does, and lets go of its data.
    fn write(&mut self, store: &Store, i: usize, stamp: SystemTime) {
        let e = &self.entries[i];
        store
            .write_announced(&e.key, e.kind, &e.data.as_one(), stamp)
            .unwrap();
        self.held[i] = None;
    }

    /// The entries from `first` on left waiting at `store`'s end (moving in what the end moves),
    /// the removal of what moved waited for.
    fn leave_waiting_from(&self, store: &Store, first: usize) {
        let rest: Vec<(PipelineKey, envelope::PayloadKind, Vec<u8>, SystemTime)> = self.entries
            [first..]
            .iter()
            .map(|e| (e.key, e.kind, e.data.as_one().into_owned(), e.stamp))
            .collect();
        let rest: Vec<waiting::ToWait<'_>> = rest
            .iter()
            .map(|(k, kind, d, s)| (*k, *kind, &d[..], *s))
            .collect();
        store.keep_waiting(&rest).unwrap();
        store.moved_removed();
    }
}

/// A process that wrote none of the entries of a waiting file it took, or fewer than half,
/// leaves the file as it found it (nothing to write at its end; a later process passes over
/// those written); one that wrote half or more removes it once the rest are written or left
/// waiting again; one that died leaves it for the next. Before, every later launch rewrote the
/// same entries into a file of its own at its end (RADV pygfx: 15-25 ms of a 90 ms process), and
/// until this one, every later launch that wrote a few (ncnn on RADV at 2 threads: 25-66 ms).
#[test]
fn a_waiting_file_none_of_whose_entries_were_written_stays_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[9; 200]);
    let store = open(tmp.path(), 1 << 30, at(100));
    let entries: Vec<waiting::ToWait<'_>> = (1..=3)
        .map(|k| (key(k), envelope::PayloadKind::Cache, &data[..], at(50)))
        .collect();
    store.keep_waiting(&entries).unwrap();
    let file = |s: &Store| {
        names(s.dir())
            .into_iter()
            .filter(|n| n.ends_with(waiting::SUFFIX))
            .collect::<Vec<_>>()
    };
    let first = file(&store);
    let before = fs::metadata(store.dir().join(&first[0])).unwrap();

    // A launch that writes none of them: the file stays, untouched, and they need no writing.
    let short = open(tmp.path(), 1 << 30, at(200));
    let _held = take_and_queue(&short);
    let kept = short.keep_waiting_files_mostly_unwritten();
    assert_eq!(kept.len(), 3);
    assert!(
        short.queued.get(&key(1)).is_none(),
        "no longer waiting to be written"
    );
    assert_eq!(
        short.keep_waiting_files_mostly_unwritten(),
        kept,
        "a second device of the store (at exit, in any order) drops them from its queue too"
    );
    short.drop_settled_waiting();
    assert_eq!(file(&short), first);
    let after = fs::metadata(short.dir().join(&first[0])).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), before.modified().unwrap())
    );

    // A process that dies after taking them leaves the file for the next one.
    let dying = open(tmp.path(), 1 << 30, at(300));
    assert_eq!(dying.take_waiting().len(), 3);
    drop(dying);

    // A launch that writes one, fewer than half: the file stays as it was, the one written in
    // both; the next launch's writer passes over that one (its file as new as its record).
    let few = open(tmp.path(), 1 << 30, at(350));
    let mut taken = take_and_queue(&few);
    taken.write(&few, 0, at(50));
    assert_eq!(few.keep_waiting_files_mostly_unwritten().len(), 3);
    few.drop_settled_waiting();
    assert_eq!(file(&few), first);
    assert!(few.dir().join(key(1).file_name()).exists());
    drop(taken);
    let next = open(tmp.path(), 1 << 30, at(360));
    let taken = next.take_waiting();
    let passed: Vec<bool> = taken
        .iter()
        .map(|e| next.waiting_entry_is_a_file(&e.key, e.stamp))
        .collect();
    assert_eq!(passed, [true, false, false]);
    drop(next);

    // A launch that writes two: the file goes once the third is written too.
    let longer = open(tmp.path(), 1 << 30, at(400));
    let mut taken = take_and_queue(&longer);
    assert_eq!(taken.len(), 3);
    for i in 0..2 {
        taken.write(&longer, i, at(50));
    }
    assert!(longer.keep_waiting_files_mostly_unwritten().is_empty());
    longer.drop_settled_waiting();
    assert_eq!(
        file(&longer),
        first,
        "one still waits in this process alone"
    );
    taken.write(&longer, 2, at(50));
    longer.drop_settled_waiting();
    assert!(
        file(&longer).is_empty(),
        "every entry written: the file goes"
    );
    for k in 1..=3 {
        assert!(longer.dir().join(key(k).file_name()).exists());
    }

    // A damaged file is never kept as it is: its whole entries are written anew, without it.
    let entries: Vec<waiting::ToWait<'_>> = (4..=5)
        .map(|k| (key(k), envelope::PayloadKind::Cache, &data[..], at(50)))
        .collect();
    longer.keep_waiting(&entries).unwrap();
    let path = longer.dir().join(&file(&longer)[0]);
    let mut bytes = read_waiting(&path);
    bytes.truncate(bytes.len() - 1);
    fs::write(&path, &bytes).unwrap();
    let after_damage = open(tmp.path(), 1 << 30, at(500));
    let taken = take_and_queue(&after_damage);
    assert_eq!(taken.len(), 1, "the record cut short dropped");
    assert!(after_damage
        .keep_waiting_files_mostly_unwritten()
        .is_empty());
}

/// Entries sharing a block, left waiting (the file holds the block's pieces once): the next
/// opening takes them, its lookups find each byte for byte from memory, its writes make entry
/// files that a third opening finds, and the file goes once every entry is written.
#[test]
fn entries_left_waiting_with_shared_pieces_are_found_and_written_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let block = crate::store::recipe::tests::noise(200 << 10);
    let heads = [(1, 1000), (2, 1000), (3, 1000)];
    let data = waiting::tests::sharing_a_block(&identity(), &heads, &block);
    let store = open(tmp.path(), 1 << 30, at(100));
    let entries: Vec<waiting::ToWait<'_>> = (1..=3u8)
        .map(|k| {
            let d = &data[usize::from(k) - 1][..];
            (key(k), envelope::PayloadKind::Cache, d, at(50))
        })
        .collect();
    let file_bytes = store.keep_waiting(&entries).unwrap();
    assert!(file_bytes < (data[0].len() * 2) as u64, "{file_bytes}");
    drop(store);

    let later = open(tmp.path(), 1 << 30, at(200));
    let mut taken = take_and_queue(&later);
    assert_eq!(taken.len(), 3);
    for k in 1..=3u8 {
        match later.lookup(&key(k)).unwrap() {
            Lookup::Found(e) => assert_eq!(e.with_data(<[u8]>::to_vec), data[usize::from(k) - 1]),
            _ => panic!("key {k} not found"),
        }
    }
    for i in 0..3 {
        let stamp = taken[i].stamp;
        taken.write(&later, i, stamp);
    }
    later.drop_settled_waiting();
    assert!(waiting_files(&later).is_empty(), "every entry written");
    let third = open(tmp.path(), 1 << 30, at(300));
    for k in 1..=3u8 {
        match third.lookup(&key(k)).unwrap() {
            Lookup::Found(e) => assert_eq!(e.with_data(<[u8]>::to_vec), data[usize::from(k) - 1]),
            _ => panic!("key {k} not found"),
        }
    }
}

/// Two pipelines of two stages each, sharing one (as RADV's binaries of graphics pipelines).
fn two_sharing_a_stage() -> [Vec<u8>; 2] {
    let noise = crate::store::recipe::tests::noise(3 * 8000);
    let (own_a, own_b, shared) = (&noise[..8000], &noise[8000..16000], &noise[16000..]);
    [
        binaries::encode(&[], [(&[1u8][..], own_a), (&[9u8][..], shared)]),
        binaries::encode(&[], [(&[2u8][..], own_b), (&[9u8][..], shared)]),
    ]
}

/// A run at 100 s writes key 1's entry (`data[0]`, the first carrying the shared stage: inline),
/// then leaves key 2 waiting (`data[1]`) at its end.
fn one_written_one_left_waiting(root: &Path, data: &[Vec<u8>; 2]) -> Store {
    let store = one_written(root, data);
    leave_second_waiting(&store, data);
    store
}

/// A run at 100 s that wrote key 1's entry (`data[0]`).
fn one_written(root: &Path, data: &[Vec<u8>; 2]) -> Store {
    let store = open(root, 1 << 30, at(100));
    store.will_write(&key(1));
    store
        .write_announced(&key(1), envelope::PayloadKind::Binaries, &data[0], at(40))
        .unwrap();
    store
}

/// `store`'s end leaving key 2 (`data[1]`) waiting, the removal of what moved waited for.
fn leave_second_waiting(store: &Store, data: &[Vec<u8>; 2]) {
    leave_key_2_waiting(store, envelope::PayloadKind::Binaries, &data[1]);
}

/// `store`'s end leaving key 2 (`data` of `kind`, stamped at 50 s) waiting, the removal of what
/// moved waited for.
fn leave_key_2_waiting(store: &Store, kind: envelope::PayloadKind, data: &[u8]) {
    store.keep_waiting(&[(key(2), kind, data, at(50))]).unwrap();
    store.moved_removed();
}

fn finds(store: &Store, k: u8, data: &[u8]) -> bool {
    matches!(store.lookup(&key(k)).unwrap(), Lookup::Found(e) if e.with_data(<[u8]>::to_vec) == data)
}

/// An entry file this run wrote holding inline what an entry left waiting carries too (the
/// first written of two sharing a stage) moves into the waiting file at the end: the stage then
/// stands once in the identity directory, not in the entry file and again in the waiting file
/// (NVIDIA's pygfx at 16 threads: the store 1.23-1.28x the driver's disk cache with 167-272
/// entries left waiting, 1.03x with none). The next opening finds both byte for byte, the moved
/// one stamped just after its file.
#[test]
fn an_entry_file_holding_what_an_entry_left_waiting_carries_moves_into_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let data = two_sharing_a_stage();
    let store = one_written_one_left_waiting(tmp.path(), &data);
    assert!(
        !store.entry_path(&key(1)).exists(),
        "moved into the waiting file"
    );
    let kept = title_bytes(tmp.path());
    assert!(
        kept < 3 * 8000 + 1000,
        "{kept} bytes kept for two entries sharing 8,000 bytes of 24,000"
    );
    drop(store);

    let later = open(tmp.path(), 1 << 30, at(200));
    let taken = take_and_queue(&later);
    let moved = taken.iter().find(|e| e.key == key(1)).expect("taken");
    assert_eq!(moved.stamp, at(40) + Duration::from_nanos(1));
    assert!(finds(&later, 1, &data[0]) && finds(&later, 2, &data[1]));
}

/// Between the waiting file's rename and the removal of a moved entry's file both stand; a bound
/// pass then drops the file before the record (the record stamped after it), never the record
/// as a copy of a file that the removal then takes too: the entry is found after.
#[test]
fn a_bound_pass_while_a_moved_entry_stands_twice_keeps_the_record() {
    let tmp = tempfile::tempdir().unwrap();
    let data = two_sharing_a_stage();
    drop(one_written_one_left_waiting(tmp.path(), &data));
    // The state inside the gap: the file as it was (same bytes and stamp) beside the record.
    let again = open(tmp.path(), 1 << 30, at(150));
    again.will_write(&key(1));
    again
        .write_announced(&key(1), envelope::PayloadKind::Binaries, &data[0], at(40))
        .unwrap();
    let file = again.entry_path(&key(1));
    drop(again);
    let bound = title_bytes(tmp.path()) - 100;
    drop(open(tmp.path(), bound, at(200)));
    // The removal, had the file survived the pass.
    let _ = fs::remove_file(&file);
    let after = open(tmp.path(), 1 << 30, at(300));
    let _taken = take_and_queue(&after);
    assert!(
        finds(&after, 1, &data[0]),
        "in neither the file nor the waiting file"
    );
}

/// An entry still queued (written again by this process: its data waits in the writer's queue)
/// is not moved: its file stays.
#[test]
fn an_entry_still_queued_is_not_moved() {
    let tmp = tempfile::tempdir().unwrap();
    let data = two_sharing_a_stage();
    let store = one_written(tmp.path(), &data);
    let queued: Arc<Queued<dyn QueuedData>> = Queued::new(data[0].clone());
    store.will_write_queued(&key(1), envelope::PayloadKind::Binaries, &queued);
    leave_second_waiting(&store, &data);
    assert!(store.entry_path(&key(1)).exists());
}

/// NVIDIA's data, cut at its records: an entry file holding inline a record that an entry left
/// waiting carries moves, unless it carries the driver's dictionary (never left waiting: 1.78 MB
/// in the next process's queue each), which stays a file.
#[test]
fn an_nvidia_entry_moves_unless_it_carries_the_drivers_dictionary() {
    use crate::store::nvidia_cache::tests::{dictionary_key, nvidia_cache, record};
    let noise = crate::store::recipe::tests::noise(12_000);
    let shared = record([2; 16], 2, &noise[..4000]);
    let waiting_data = nvidia_cache(&[shared.clone(), record([4; 16], 4, &noise[4000..7000])]);
    let own = record([3; 16], 3, &noise[7000..10_000]);
    let dictionary = record(dictionary_key(), 5, &noise[10_000..]);
    let nvidia = crate::store::nvidia_cache::tests::identity();
    let open = |root: &Path, when| Store::open(root, "title", nvidia, 1 << 30, when).unwrap().0;
    for (with_dictionary, moved) in [(false, true), (true, false)] {
        let tmp = tempfile::tempdir().unwrap();
        let mut records = vec![shared.clone(), own.clone()];
        if with_dictionary {
            records.insert(0, dictionary.clone());
        }
        let data = nvidia_cache(&records);
        let store = open(tmp.path(), at(100));
        store.write_stamped(&key(1), &data, at(40)).unwrap();
        leave_key_2_waiting(&store, envelope::PayloadKind::Cache, &waiting_data);
        assert_eq!(
            !store.entry_path(&key(1)).exists(),
            moved,
            "with the dictionary: {with_dictionary}"
        );
        let later = open(tmp.path(), at(200));
        let _taken = take_and_queue(&later);
        assert!(
            finds(&later, 1, &data),
            "key 1, with the dictionary: {with_dictionary}"
        );
        assert!(
            finds(&later, 2, &waiting_data),
            "key 2, with the dictionary: {with_dictionary}"
        );
    }
}

/// An entry moved once is not moved again by a second end of the same store (the exit handler
/// after a device's end): where its file stood again meanwhile, it stays.
#[test]
fn an_entry_moved_once_is_not_moved_again() {
    let tmp = tempfile::tempdir().unwrap();
    let data = two_sharing_a_stage();
    let store = one_written_one_left_waiting(tmp.path(), &data);
    store
        .write_announced(&key(1), envelope::PayloadKind::Binaries, &data[0], at(40))
        .unwrap();
    leave_second_waiting(&store, &data);
    assert!(store.entry_path(&key(1)).exists());
}

/// An entry a process wrote from an earlier process's waiting file is never moved back into
/// the file its end leaves: each launch that writes some of a file's entries leaves them as files
/// (here one a launch), so the entries become files, not the same pair swapped at every end.
#[test]
fn entries_written_from_a_waiting_file_are_not_moved_back_at_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let data = two_sharing_a_stage();
    drop(one_written_one_left_waiting(tmp.path(), &data));
    for launch in 0..2u64 {
        let run = open(tmp.path(), 1 << 30, at(200 + launch * 100));
        let mut taken = take_and_queue(&run);
        let stamp = taken[0].stamp;
        taken.write(&run, 0, stamp);
        taken.leave_waiting_from(&run, 1);
        drop(taken);
        run.drop_settled_waiting();
    }
    let last = open(tmp.path(), 1 << 30, at(500));
    assert!(waiting_files(&last).is_empty(), "every entry written");
    for k in 1..=2u8 {
        assert!(last.entry_path(&key(k)).exists(), "key {k} a file");
        assert!(finds(&last, k, &data[usize::from(k) - 1]));
    }
}

/// Nor where this process's own bound pass has dropped such an entry's record from the file it
/// took since writing it (the file is the entry now, the record its copy): what a process took is
/// kept apart from what the bound changes. (Derived from the taken files' keys, one was moved
/// back once: a launch under a 2.68 MB bound moved 50.)
#[test]
fn an_entry_written_from_a_waiting_file_is_not_moved_back_once_the_bound_dropped_its_record() {
    let tmp = tempfile::tempdir().unwrap();
    let data = two_sharing_a_stage();
    drop(one_written_one_left_waiting(tmp.path(), &data));
    let run = open(tmp.path(), 1 << 30, at(200));
    let mut taken = take_and_queue(&run);
    let (written, stamp) = (taken[0].key, taken[0].stamp);
    taken.write(&run, 0, stamp);
    let file = waiting_files(&run).pop().expect("the file taken");
    run.forget_dropped_waiting(&[eviction::StampedEntry {
        path: file,
        bytes: 0,
        stamp,
        waiting_record: Some(written),
    }]);
    taken.leave_waiting_from(&run, 1);
    assert!(run.entry_path(&written).exists(), "not moved back");
}

/// Where an opening leaves waiting files for a later one (past what it takes at most), none it
/// took stays as it is: else each opening would take the same ones and never the rest.
#[test]
fn no_waiting_file_stays_as_it_was_where_an_opening_left_some_untaken() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), 1 << 30, at(100));
    three_waiting_files_of_20_mib(&store);
    let later = open(tmp.path(), 1 << 30, at(200));
    let taken = take_and_queue(&later);
    assert_eq!(taken.len(), 4, "two files taken, one left");
    assert!(later.keep_waiting_files_mostly_unwritten().is_empty());
}

/// Openings take waiting files oldest written first (the time in their names), so a file left
/// again goes behind those it left untaken: none waits for ever. Name order is not age: a pid of
/// more digits, or wrapped, sorts anywhere.
#[test]
fn waiting_files_are_taken_oldest_first_and_none_is_left_for_ever() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), 1 << 30, at(100));
    three_waiting_files_of_20_mib(&store);
    // The oldest (keys 2 and 3) as a process whose pid sorts after any other names it.
    let mut files = waiting_files(&store);
    files.sort_by_key(|f| waiting::written_at(&f.file_name().unwrap().to_string_lossy()));
    let renamed = format!("99999999-1-{}{}", identity().abi, waiting::SUFFIX);
    fs::rename(&files[0], store.dir().join(renamed)).unwrap();
    let mut taken_in = Vec::new();
    for round in 0..2 {
        let later = open(tmp.path(), 1 << 30, at(200 + round));
        let taken = take_and_queue(&later);
        let mut keys: Vec<PipelineKey> = taken.iter().map(|e| e.key).collect();
        keys.sort();
        later.keep_waiting_files_mostly_unwritten();
        // A short launch: nothing written, every entry left waiting again at its end.
        taken.leave_waiting_from(&later, 0);
        drop(taken);
        later.drop_settled_waiting();
        taken_in.push(keys);
    }
    assert_eq!(taken_in[0], vec![key(2), key(3), key(4), key(5)]);
    assert!(
        taken_in[1].contains(&key(6)) && taken_in[1].contains(&key(7)),
        "the file left untaken is taken next: {:?}",
        taken_in[1]
    );
}

/// Three waiting files of 20 MiB each (keys 2 and 3, 4 and 5, 6 and 7), written in that order:
/// an opening takes files until it holds 32 MiB, so one waits. (Each entry's bytes its own: what
/// two entries of a file share, it holds once.)
fn three_waiting_files_of_20_mib(store: &Store) {
    let noise = crate::store::recipe::tests::noise(10 << 20);
    let big: Vec<Vec<u8>> = (1..=6u8)
        .map(|n| {
            cache_data(
                &identity(),
                &noise.iter().map(|b| b ^ n).collect::<Vec<u8>>(),
            )
        })
        .collect();
    for k in 1..=3u8 {
        let entries: Vec<waiting::ToWait<'_>> = [2 * k, 2 * k + 1]
            .into_iter()
            .map(|n| {
                let data = &big[usize::from(n) - 2][..];
                (key(n), envelope::PayloadKind::Cache, data, at(50))
            })
            .collect();
        store.keep_waiting(&entries).unwrap();
    }
}

/// The file a waiting file on disk stands for (a packed one unpacked): written back, it is read
/// as it stands, so a test may damage one record of it.
fn read_waiting(path: &Path) -> Vec<u8> {
    waiting::read_bounded(path).unwrap().unwrap()
}

fn waiting_files(store: &Store) -> Vec<std::path::PathBuf> {
    names(store.dir())
        .into_iter()
        .filter(|n| n.ends_with(waiting::SUFFIX))
        .map(|n| store.dir().join(n))
        .collect()
}

/// Two entry files written at 100 s, and keys 3 to 6 left waiting in one file stamped at
/// 150 s; returns the waiting file's bytes a record.
fn two_written_four_waiting(root: &Path) -> u64 {
    let data = cache_data(&identity(), &[0; 56]);
    let run = open(root, 1 << 30, at(100));
    for k in 1..=2 {
        run.write(&key(k), &data).unwrap();
    }
    let entries: Vec<waiting::ToWait<'_>> = (3..=6)
        .map(|k| (key(k), envelope::PayloadKind::Cache, &data[..], at(150)))
        .collect();
    let file_bytes = run.keep_waiting(&entries).unwrap();
    (file_bytes - waiting::HEAD_LEN) / 4
}

/// A file of entries left waiting counts within the title's bound, and the bound drops its
/// entries one at a time, by the file's stamp (its entries' newest use), writing it again
/// without them. Before, such a file stood outside the bound: pygfx's title on RADV kept 5.1 MB
/// under a bound of 3.3 MB, and counting the file whole dropped it whole, every other launch
/// compiling all 641 pipelines again.
#[test]
fn entries_left_waiting_count_within_the_bound_and_go_one_at_a_time() {
    let root = tempfile::tempdir().unwrap();
    let record = two_written_four_waiting(root.path());
    let before = title_bytes(root.path());
    // Room for all but the two entry files and two of the waiting entries: the entry files,
    // stamped before the waiting file, go first, then the file's first two entries.
    let bound = before - 2 * 240 - 2 * record;
    let after = open(root.path(), bound, at(200));
    assert!(
        title_bytes(root.path()) <= bound,
        "{} kept in a bound of {bound}",
        title_bytes(root.path())
    );
    assert!(!found(&after, &key(1)) && !found(&after, &key(2)));
    let taken: Vec<PipelineKey> = after.take_waiting().iter().map(|e| e.key).collect();
    assert_eq!(taken, vec![key(5), key(6)], "the file's last two kept");
    let file = &waiting_files(&after)[0];
    assert_eq!(
        fs::metadata(file).unwrap().modified().unwrap(),
        at(150),
        "written again with its stamp"
    );

    // A bound below one entry: the file goes.
    let none = open(root.path(), record / 2, at(300));
    assert!(waiting_files(&none).is_empty());
    assert_eq!(title_bytes(root.path()), 0);
}

/// Entries the bound drops from a waiting file this process took (the layer's opening takes
/// them before its thread checks the bound) are no longer found from memory nor written: the
/// bound's choice holds in the process that made it.
#[test]
fn entries_the_bound_drops_from_a_taken_waiting_file_are_forgotten_by_the_process() {
    let root = tempfile::tempdir().unwrap();
    let record = two_written_four_waiting(root.path());
    let bound = title_bytes(root.path()) - 2 * 240 - 3 * record;
    let (run, _) =
        Store::open_then_bound(root.path(), "title", identity(), bound, at(200), false).unwrap();
    let run = run;
    let taken = take_and_queue(&run);
    assert_eq!(taken.len(), 4);
    run.keep_within_bound().unwrap();
    let kept: Vec<u8> = (3..=6).filter(|k| found(&run, &key(*k))).collect();
    assert_eq!(kept, vec![6]);
    let untouched = run.keep_waiting_files_mostly_unwritten();
    assert_eq!(untouched.into_iter().collect::<Vec<_>>(), vec![key(6)]);
    assert!(!run.queued.holds(&key(3)), "dropped: nothing to write");
}

/// A waiting file kept as it is by a launch that found its entries carries that use as its
/// stamp, so the bound drops it as used then, not when its entries were built.
#[test]
fn a_waiting_file_kept_as_it_is_is_stamped_with_its_entries_use() {
    let root = tempfile::tempdir().unwrap();
    two_written_four_waiting(root.path());
    let run = open(root.path(), 1 << 30, at(400));
    let _held = take_and_queue(&run);
    match run.lookup(&key(4)).unwrap() {
        Lookup::Found(e) => run.stamp(e),
        _ => panic!("not found"),
    }
    assert_eq!(run.keep_waiting_files_mostly_unwritten().len(), 4);
    let file = &waiting_files(&run)[0];
    let stamp = fs::metadata(file).unwrap().modified().unwrap();
    assert!(
        stamp > at(399) && stamp < at(400),
        "stamped as found: {stamp:?}"
    );

    // One left waiting again by a later process carries that use too.
    let later = open(root.path(), 1 << 30, at(500));
    let taken = take_and_queue(&later);
    match later.lookup(&key(5)).unwrap() {
        Lookup::Found(e) => later.stamp(e),
        _ => panic!("not found"),
    }
    let bytes: Vec<_> = taken.iter().map(|e| e.data.as_one()).collect();
    let again: Vec<waiting::ToWait<'_>> = taken
        .iter()
        .zip(&bytes)
        .map(|(e, data)| (e.key, e.kind, &data[..], e.stamp))
        .collect();
    later.keep_waiting(&again).unwrap();
    let newest = waiting_files(&later)
        .iter()
        .map(|f| fs::metadata(f).unwrap().modified().unwrap())
        .max()
        .unwrap();
    assert!(newest > at(499) && newest < at(500), "{newest:?}");
}

/// Two passes of the bound over `host` at once.
fn two_passes_at_once(host: &Path, bound: u64) {
    let start = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                start.wait();
                bound::keep_within(host, bound, &|_| false).unwrap();
            });
        }
    });
}

/// The waiting file of `bytes` bytes, stamped at 60 s: older than any other, the bound drops
/// it first.
fn stamped_older(store: &Store, bytes: u64) -> std::path::PathBuf {
    let older = waiting_files(store)
        .into_iter()
        .find(|f| fs::metadata(f).unwrap().len() == bytes)
        .unwrap();
    set_stamp(&older, at(60));
    older
}

/// Sets a file's modification time, as a stamp.
fn set_stamp(path: &Path, stamp: SystemTime) {
    let file = fs::File::options().write(true).open(path).unwrap();
    file.set_modified(stamp).unwrap();
}

/// The bytes of `key`'s entry file under `host`.
fn entry_bytes(host: &Path, key: &PipelineKey) -> u64 {
    bound::entries_of_title(host)
        .unwrap()
        .iter()
        .find(|e| e.waiting_record.is_none() && e.key() == Some(*key))
        .map(|e| e.bytes)
        .unwrap()
}

/// Keys `keys` left waiting in one file of a store at `root`, each with its stamp; returns the
/// file's bytes.
fn left_waiting(root: &Path, keys: &[(u8, u64)]) -> u64 {
    let data = cache_data(&identity(), &[0; 56]);
    let run = open(root, 1 << 30, at(100));
    let entries: Vec<waiting::ToWait<'_>> = keys
        .iter()
        .map(|&(k, secs)| (key(k), envelope::PayloadKind::Cache, &data[..], at(secs)))
        .collect();
    run.keep_waiting(&entries).unwrap()
}

/// The only waiting file of the title at `root` (written by [`left_waiting`]).
fn the_waiting_file(root: &Path) -> std::path::PathBuf {
    let run = open(root, 1 << 30, at(100));
    let files = waiting_files(&run);
    assert_eq!(files.len(), 1);
    files[0].clone()
}

/// A file written before the seal (`PKWAIT01`) is still taken, each record on its own check. A
/// file whose seal does not hold (a record damaged) gives its sound records and drops the
/// damaged one; the bound's rewrite of it is not sealed again, so the damage stays found.
#[test]
fn a_waiting_file_unsealed_or_damaged_is_taken_record_by_record_and_never_sealed_again() {
    let root = tempfile::tempdir().unwrap();
    left_waiting(root.path(), &[(3, 150), (4, 140), (5, 160)]);
    let path = the_waiting_file(root.path());
    let bytes = read_waiting(&path);
    let head = waiting::HEAD_LEN as usize;
    let old = [&b"PKWAIT01"[..], &bytes[head..]].concat();
    fs::write(&path, &old).unwrap();
    let taken = open(root.path(), 1 << 30, at(200)).take_waiting();
    assert_eq!(
        taken.len(),
        3,
        "written before the seal: every record taken"
    );
    // Key 3's payload damaged (records of one length, in the order written).
    let record = (bytes.len() - head) / 3;
    let mut damaged = bytes.clone();
    damaged[head + record - 1] ^= 0x40;
    fs::write(&path, &damaged).unwrap();
    assert!(!waiting::sealed(&damaged));
    let mut keys: Vec<PipelineKey> = open(root.path(), 1 << 30, at(200))
        .take_waiting()
        .iter()
        .map(|e| e.key)
        .collect();
    keys.sort();
    assert_eq!(keys, vec![key(4), key(5)]);
    // The bound drops key 4's record (the oldest stamp); what it writes again is not sealed.
    let host = root.path().join("title/host-pipelines");
    let bound = title_bytes(root.path()) - record as u64 + 1;
    let bounded = bound::keep_within(&host, bound, &|_| false).unwrap();
    assert_eq!(bounded.waiting_dropped.len(), 1);
    let rewritten = read_waiting(&path);
    assert!(rewritten.starts_with(b"PKWAIT01") && !waiting::sealed(&rewritten));
    let keys: Vec<PipelineKey> = open(root.path(), 1 << 30, at(300))
        .take_waiting()
        .iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(keys, vec![key(5)], "the damaged record still dropped");
}

/// Two bound passes at once over a waiting file drop its records by key, each once: together
/// no more than the excess (a record more at most). Dropping by place in the file, a second
/// pass dropped the next records of the file the first had already written again.
#[test]
fn two_passes_at_once_drop_a_waiting_files_records_no_more_than_the_excess() {
    for round in 0..30 {
        let root = tempfile::tempdir().unwrap();
        let keys: Vec<(u8, u64)> = (1..=20).map(|k| (k, 100 + u64::from(k))).collect();
        let file = left_waiting(root.path(), &keys);
        let record = (file - waiting::HEAD_LEN) / 20;
        let bound = file - 5 * record - record / 2;
        let host = root.path().join("title/host-pipelines");
        two_passes_at_once(&host, bound);
        let kept = title_bytes(root.path());
        assert!(kept <= bound, "round {round}: {kept} over {bound}");
        assert!(
            kept + 2 * record > bound,
            "round {round}: {kept} kept in a bound of {bound}: more than the excess dropped"
        );
    }
}

/// Four entries (keys 3 to 6) left waiting in one file at `root`, listed by record as the bound
/// lists them.
fn four_records_listed(root: &Path) -> Vec<crate::store::eviction::StampedEntry> {
    left_waiting(root, &[(3, 150), (4, 150), (5, 150), (6, 150)]);
    let host = root.join("title/host-pipelines");
    waiting::as_records(bound::entries_of_title(&host).unwrap()).0
}

/// Two passes dropping the same records of one listing drop them once: a pass that finds the
/// file written again by the other drops no other records of it (they are chosen by key, not
/// by their place in the file).
#[test]
fn records_dropped_twice_from_one_listing_go_once() {
    let root = tempfile::tempdir().unwrap();
    let listed = four_records_listed(root.path());
    for _ in 0..2 {
        let mut drops = waiting::WaitingDrops::default();
        drops.drop_record(&listed[0]);
        drops.drop_record(&listed[1]);
        let applied = drops.apply();
        assert_eq!((applied.gone.len(), applied.still_there.len()), (2, 0));
    }
    let run = open(root.path(), 1 << 30, at(300));
    let taken: Vec<PipelineKey> = run.take_waiting().iter().map(|e| e.key).collect();
    assert_eq!(taken, vec![key(5), key(6)]);
}

/// A waiting record whose entry is a file already (the process that took the file wrote it,
/// and removes the file at its end) goes first: it holds nothing the title would miss. Before,
/// the entry files went first (stamped no newer than the file), and the end then removed the
/// file: entries a bound had room for were lost.
#[test]
fn a_waiting_record_whose_entry_is_a_file_already_goes_first() {
    let root = tempfile::tempdir().unwrap();
    let file = left_waiting(root.path(), &[(3, 150), (4, 150), (5, 150), (6, 150)]);
    let record = (file - waiting::HEAD_LEN) / 4;
    let data = cache_data(&identity(), &[0; 56]);
    let run = open(root.path(), 1 << 30, at(200));
    for k in [3, 4] {
        // As the process that took the file writes them: with the record's stamp.
        run.write_stamped(&key(k), &data, at(150)).unwrap();
    }
    let bound = title_bytes(root.path()) - 2 * record;
    let after = open(root.path(), bound, at(300));
    assert!(title_bytes(root.path()) <= bound);
    let taken: Vec<PipelineKey> = after.take_waiting().iter().map(|e| e.key).collect();
    assert_eq!(taken, vec![key(5), key(6)]);
    assert!(
        found(&after, &key(3)) && found(&after, &key(4)),
        "kept as files"
    );
}

/// A waiting record is no copy of an older file of its key (one it was compiled again to
/// replace): the bound drops the older file first, and the record stays to be found.
#[test]
fn a_waiting_record_newer_than_the_file_of_its_key_is_no_copy() {
    let root = tempfile::tempdir().unwrap();
    let stale = cache_data(&identity(), &[1; 56]);
    let run = open(root.path(), 1 << 30, at(100));
    run.write_stamped(&key(4), &stale, at(90)).unwrap();
    left_waiting(root.path(), &[(4, 150), (5, 150)]);
    let file = entry_bytes(&root.path().join("title/host-pipelines"), &key(4));
    let bound = title_bytes(root.path()) - file;
    let after = open(root.path(), bound, at(300));
    let taken: Vec<PipelineKey> = after.take_waiting().iter().map(|e| e.key).collect();
    assert_eq!(taken, vec![key(4), key(5)], "both records kept");
    assert!(!after.entry_path(&key(4)).exists(), "the older file went");
}

/// Within a waiting file, the bound drops the records of the oldest own stamps first: a boot's
/// first pipelines, stamped newest, go last.
#[test]
fn a_waiting_files_records_go_oldest_stamp_first() {
    let root = tempfile::tempdir().unwrap();
    let file = left_waiting(root.path(), &[(3, 150), (4, 140), (5, 160), (6, 130)]);
    let record = (file - waiting::HEAD_LEN) / 4;
    let after = open(root.path(), file - 2 * record, at(300));
    let mut taken: Vec<PipelineKey> = after.take_waiting().iter().map(|e| e.key).collect();
    taken.sort();
    assert_eq!(taken, vec![key(3), key(5)]);
}

/// A process forgets only the entries its pass drops from files it took: the same entry left
/// waiting in another process's file, dropped from that one, is still found and kept here.
#[test]
fn a_process_forgets_only_what_its_pass_drops_from_the_files_it_took() {
    let root = tempfile::tempdir().unwrap();
    left_waiting(root.path(), &[(3, 150), (4, 150)]);
    let (run, _) =
        Store::open_then_bound(root.path(), "title", identity(), 1 << 30, at(200), false).unwrap();
    let taken = take_and_queue(&run);
    assert_eq!(taken.len(), 2);
    // Another process leaves key 3 waiting too, in an older file the bound drops first.
    let other = left_waiting(root.path(), &[(3, 50)]);
    let older = stamped_older(&run, other);
    let bound = title_bytes(root.path()) - other + 1;
    let host = root.path().join("title/host-pipelines");
    let bounded = bound::keep_within(&host, bound, &|_| false).unwrap();
    assert!(!older.exists(), "the older file went");
    run.forget_dropped_waiting(&bounded.waiting_dropped);
    assert!(
        found(&run, &key(3)),
        "still waiting in the file this process took"
    );
    assert_eq!(run.keep_waiting_files_mostly_unwritten().len(), 2);
}

/// An entry two taken files hold, dropped by the process's pass from one of them, still waits
/// in the other: the process finds it, and its end keeps it there.
#[test]
fn an_entry_dropped_from_one_taken_file_still_waits_in_another() {
    let root = tempfile::tempdir().unwrap();
    left_waiting(root.path(), &[(3, 150), (4, 150)]);
    let older_bytes = left_waiting(root.path(), &[(3, 50)]);
    let (run, _) =
        Store::open_then_bound(root.path(), "title", identity(), 1 << 30, at(200), false).unwrap();
    let older = stamped_older(&run, older_bytes);
    let _held = take_and_queue(&run);
    let bound = title_bytes(root.path()) - older_bytes + 1;
    let host = root.path().join("title/host-pipelines");
    let bounded = bound::keep_within(&host, bound, &|_| false).unwrap();
    assert!(!older.exists());
    run.forget_dropped_waiting(&bounded.waiting_dropped);
    assert!(found(&run, &key(3)));
    assert!(run.keep_waiting_files_mostly_unwritten().contains(&key(3)));
}

/// An entry left waiting while an older file of the same key stands (compiled again after its
/// file was refused, as when the backend changes) is the one found, even where the older file
/// was read ahead: the newer one was once found only in the run that wrote it as a file (the
/// every-extension cache matrix of `binary_backend`, its end leaving 44 entries waiting).
#[test]
fn an_entry_left_waiting_is_found_before_an_older_file_read_ahead() {
    let root = tempfile::tempdir().unwrap();
    let (_, old) = written(root.path(), 1);
    let newer = cache_data(&identity(), &[7; 200]);
    let run = open(root.path(), 1 << 30, at(150));
    run.keep_waiting(&[(key(1), envelope::PayloadKind::Cache, &newer[..], at(150))])
        .unwrap();
    let next = open(root.path(), 1 << 30, at(200));
    let _held = take_and_queue(&next);
    let listed = next.keep_within_bound().map(|b| b.kept);
    let report = next.read_ahead(
        AheadOrder::LastUse(listed),
        1 << 20,
        1,
        &AtomicBool::new(false),
    );
    assert_eq!(report.held, 1, "the older file read ahead");
    match next.lookup(&key(1)).unwrap() {
        Lookup::Found(e) => {
            let data = e.with_data(<[u8]>::to_vec);
            assert_ne!(data, old);
            assert_eq!(data, newer);
        }
        _ => panic!("not found"),
    }
}

#[test]
fn a_waiting_file_of_the_other_abi_is_left_and_a_link_or_fifo_is_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let data = cache_data(&identity(), &[9; 64]);
    let store = open(tmp.path(), 1 << 30, at(100));
    let entries = [(key(1), envelope::PayloadKind::Cache, &data[..], at(1))];
    store.keep_waiting(&entries).unwrap();
    let ours = names(store.dir())
        .into_iter()
        .find(|n| n.ends_with(waiting::SUFFIX))
        .unwrap();
    let other_abi = ours.replace(&format!("-{}.", identity().abi), "-4.");
    fs::rename(store.dir().join(&ours), store.dir().join(&other_abi)).unwrap();
    std::os::unix::fs::symlink(
        "/dev/zero",
        store
            .dir()
            .join(format!("1-1-{}{}", identity().abi, waiting::SUFFIX)),
    )
    .unwrap();
    let fifo = store
        .dir()
        .join(format!("2-2-{}{}", identity().abi, waiting::SUFFIX));
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let again = open(tmp.path(), 1 << 30, at(200));
    assert!(again.take_waiting().is_empty());
    assert!(
        store.dir().join(&other_abi).exists(),
        "the other ABI's file stays"
    );
}

/// The idle-priority writer writes an entry, and lets go of its data, without the queued
/// entries' lock that every lookup of a cold run takes (SPEC: no application thread waits on a
/// lock an idle-priority thread may hold). Before, each write took it to end the entry's wait.
#[test]
fn writing_a_queued_entry_takes_no_lock_a_lookup_takes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(open(tmp.path(), 1 << 30, at(100)));
    let payload = cache_data(&identity(), &[5; 300]);
    let data: Arc<Queued<dyn QueuedData>> = Queued::new(payload.clone());
    store.will_write_queued(&key(1), envelope::PayloadKind::Cache, &data);
    let held = store.queued.waiting.locked();
    let writer = store.clone();
    crate::sync::done_elsewhere(
        "written while a lookup held the queued entries' lock",
        move || {
            writer
                .write_announced(&key(1), envelope::PayloadKind::Cache, &payload, at(100))
                .unwrap();
            drop(data);
        },
    );
    drop(held);
    assert!(store.queued.get(&key(1)).is_none(), "no longer waiting");
    assert!(found(&store, &key(1)), "found from its file");
}

/// An entry naming pieces is found whole, and its stamp owed, without waiting on the owed
/// stamps the idle-priority writer takes (SPEC: a lookup never waits on such a lock): where
/// the writer holds them, the stamp is not noted as owed and carries the entry's pieces itself.
/// Either way its stamp stamps the pieces the entry names.
#[test]
fn a_found_entrys_stamp_is_owed_only_where_the_writer_does_not_hold_the_owed_stamps() {
    let root = tempfile::tempdir().unwrap();
    let data = data_with_block(1, 1);
    finely(open(root.path(), 1 << 30, at(0)))
        .write(&key(1), &data)
        .unwrap();
    let run = Arc::new(finely(open(root.path(), 1 << 30, at(10))));
    let owed = run.owed_stamps.locked();
    let looking = Arc::clone(&run);
    let (got, given_back) =
        crate::sync::done_elsewhere("found without the writer's lock", move || {
            let found = match looking.lookup(&key(1)).unwrap() {
                Lookup::Found(e) => e,
                _ => panic!("not found"),
            };
            let given_back = looking.owe_stamp(found.to_stamp(), at(11));
            (found.with_data(<[u8]>::to_vec), given_back)
        });
    assert_eq!(got, data);
    let carried = given_back.expect("not noted: the caller's stamp carries it");
    assert!(!carried.pieces.is_empty(), "the pieces it names");
    drop(owed);
    run.stamp_found(&carried, at(15));
    let piece = |s: &ToStamp| run.pieces.path(&s.pieces[0].0);
    let stamp_of = |p: std::path::PathBuf| fs::metadata(p).unwrap().modified().unwrap();
    assert_eq!(stamp_of(piece(&carried)), at(15));
    let found = match run.lookup(&key(1)).unwrap() {
        Lookup::Found(e) => e.into_stamp(),
        _ => panic!("not found"),
    };
    assert!(run.owe_stamp(found.clone(), at(20)).is_none(), "noted");
    run.give_owed_stamp(&found.name(), at(20));
    assert_eq!(stamp_of(piece(&found)), at(20));
    assert_eq!(stamp_of(run.entry_path(&key(1))), at(20));
}

/// The writer stamps an entry found while it still waits to be written (its file not there)
/// without the queued entries' lock every lookup of the run takes.
#[test]
fn stamping_an_entry_found_while_it_waits_takes_no_lock_a_lookup_takes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(open(tmp.path(), 1 << 30, at(100)));
    let payload = cache_data(&identity(), &[6; 300]);
    let data: Arc<Queued<dyn QueuedData>> = Queued::new(payload);
    store.will_write_queued(&key(1), envelope::PayloadKind::Cache, &data);
    let entry = match store.lookup(&key(1)).unwrap() {
        Lookup::Found(e) => e.into_stamp(),
        _ => panic!("found from the queue"),
    };
    let held = store.queued.waiting.locked();
    let writer = store.clone();
    crate::sync::done_elsewhere(
        "stamped while a lookup held the queued entries' lock",
        move || {
            writer.stamp_found(&entry, at(150));
        },
    );
    drop(held);
    assert_eq!(
        store.stamp_with_use(&key(1), at(120)),
        at(150),
        "its use noted"
    );
    drop(data);
}

/// A run that wrote entries 1 and 2 sharing block 1 (kept as pieces), then leaves entries 3 and
/// 4, sharing it too, waiting at its end (after `between`): their data, the file's bytes and
/// the files of entries 1 and 2.
fn waiting_beside_pieces(
    root: &Path,
    between: impl FnOnce(&Store),
) -> (Vec<Vec<u8>>, u64, Vec<std::path::PathBuf>) {
    let run = finely(open(root, 1 << 30, at(100)));
    for k in 1..=2 {
        run.write(&key(k), &data_with_block(1, k)).unwrap();
    }
    assert!(!piece_files(&run).is_empty(), "the block kept as pieces");
    between(&run);
    let data: Vec<Vec<u8>> = (3..=4).map(|k| data_with_block(1, k)).collect();
    let entries: Vec<waiting::ToWait<'_>> = (3..=4u8)
        .zip(&data)
        .map(|(k, d)| (key(k), envelope::PayloadKind::Cache, &d[..], at(150)))
        .collect();
    let file_bytes = run.keep_waiting(&entries).unwrap();
    let files = (1..=2).map(|k| run.entry_path(&key(k))).collect();
    (data, file_bytes, files)
}

/// The next opening under `bound` takes entries 3 and 4 ([`waiting_beside_pieces`]) and finds
/// each whole.
fn finds_the_waiting_pair(root: &Path, bound: u64, data: &[Vec<u8>]) {
    let later = open(root, bound, at(200));
    let _held = take_and_queue(&later);
    for (k, d) in (3..=4u8).zip(data) {
        match later.lookup(&key(k)).unwrap() {
            Lookup::Found(e) => assert_eq!(&e.with_data(<[u8]>::to_vec), d),
            _ => panic!("key {k} not found"),
        }
    }
}

/// Entries left waiting name the pieces this run keeps as files already (a stage binary, one of
/// NVIDIA's records, shared with entries written before the end) rather than carry them: the
/// waiting file holds their own bytes alone (NVIDIA, pygfx at 16 threads: 59-221 entries left
/// waiting made the store 1.9-3.9 MB larger than as files), the next opening finds them whole,
/// and the bound keeps such a piece while a waiting entry names it.
#[test]
fn entries_left_waiting_name_the_pieces_the_store_keeps() {
    let root = tempfile::tempdir().unwrap();
    let (data, file_bytes, files) = waiting_beside_pieces(root.path(), |_| {});
    assert!(
        file_bytes < 8_000,
        "the shared block not carried: {file_bytes}"
    );
    // The entry files go, older, under a bound that has room for the rest (past both: the
    // pieces only entry 2 named go with it); the pieces the waiting entries name stay.
    let bound = title_bytes(root.path()) - bytes_of(&files) - 1_000;
    finds_the_waiting_pair(root.path(), bound, &data);
    assert!(files.iter().all(|f| !f.exists()), "the entry files went");
}

/// A piece this run kept but that is gone by the end (a bound pass's, this process's or
/// another's) is carried by the entries left waiting, not named: named, it would cost them a
/// compile at the next launch.
#[test]
fn entries_left_waiting_carry_a_piece_gone_since_this_run_kept_it() {
    let root = tempfile::tempdir().unwrap();
    let (data, file_bytes, _) = waiting_beside_pieces(root.path(), |run| {
        for piece in piece_files(run) {
            fs::remove_file(piece).unwrap();
        }
    });
    assert!(file_bytes > 8_000, "the block carried: {file_bytes}");
    finds_the_waiting_pair(root.path(), 1 << 30, &data);
}

/// The rebuild's threads (at idle priority) write entries without the known entries' lock
/// every lookup takes: each key is told, and the next lookup of it opens its file.
#[test]
fn an_entry_the_rebuild_writes_is_found_without_its_thread_taking_the_lookups_lock() {
    let root = tempfile::tempdir().unwrap();
    let store = Arc::new(open(root.path(), 1 << 30, at(100)));
    assert!(!found(&store, &key(1)));
    let held = store.known.written.locked();
    let rebuild = Arc::clone(&store);
    let found_there = crate::sync::done_elsewhere("written and looked up", move || {
        crate::sync::mark_at_idle_priority();
        let data = cache_data(&identity(), &[8; 100]);
        rebuild.will_write(&key(1));
        rebuild
            .write_announced(&key(1), envelope::PayloadKind::Cache, &data, at(100))
            .unwrap();
        found(&rebuild, &key(1))
    });
    assert!(found_there, "the rebuild's own lookup opens the file");
    drop(held);
    assert!(found(&store, &key(1)));
}

/// Reading ahead in the last run's order, on the opening's thread at idle priority, filters by
/// what the opening listed (a remembered entry gone since is passed over), without the known
/// entries' lock lookups take.
#[test]
fn reading_ahead_in_the_remembered_order_reads_only_what_the_opening_listed() {
    let root = tempfile::tempdir().unwrap();
    let (run1, _) = written(root.path(), 3);
    fs::remove_file(run1.entry_path(&key(2))).unwrap();
    let run2 = Arc::new(open(root.path(), 1 << 30, at(200)));
    let held = run2.known.written.locked();
    let reading = Arc::clone(&run2);
    let report = crate::sync::done_elsewhere("read ahead", move || {
        crate::sync::mark_at_idle_priority();
        let order = [key(1), key(2), key(3)];
        reading.read_ahead(
            AheadOrder::Remembered(&order),
            1 << 20,
            1,
            &AtomicBool::new(false),
        )
    });
    drop(held);
    assert_eq!(report.held, 2, "{report:?}");
}

/// Keys written since the opening are known by a bit each: a lookup whose bit is clear finds
/// the entry missing without the known entries' lock; the rebuild's (at idle priority) opens
/// the file only where the bit is set.
#[test]
fn an_entry_not_written_since_the_opening_is_missing_without_the_known_entries_lock() {
    let root = tempfile::tempdir().unwrap();
    let store = Arc::new(open(root.path(), 1 << 30, at(100)));
    store
        .write(&key(1), &cache_data(&identity(), &[1; 50]))
        .unwrap();
    let held = store.known.written.locked();
    let looking = Arc::clone(&store);
    let (missing, idle_missing) = crate::sync::done_elsewhere("looked up", move || {
        let missing = !looking.known.may_hold(&key(2));
        crate::sync::mark_at_idle_priority();
        (
            missing,
            !looking.known.may_hold(&key(2)) && looking.known.may_hold(&key(1)),
        )
    });
    drop(held);
    assert!(missing && idle_missing);
    assert!(found(&store, &key(1)));
}

/// An entry whose load a stopped process's marker names is not taken from the file it waits in
/// either: it costs one compile, never a second stop (before, the opening dropped its entry file
/// and the next lookup found the copy waiting, and loaded it again). The opening writes the file
/// anew without it at once, so a process that dies before its end (no marker is left then) does
/// not leave it for the next opening to load again.
#[test]
fn an_entry_a_stopped_load_names_is_not_taken_from_its_waiting_file() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path(), 1 << 30, at(100));
    let data = cache_data(&identity(), &[4; 200]);
    let entries: Vec<waiting::ToWait<'_>> = (1..=2)
        .map(|k| (key(k), envelope::PayloadKind::Cache, &data[..], at(50)))
        .collect();
    store.keep_waiting(&entries).unwrap();
    stale_marker_naming(&store, &key(1), 1);
    let keys = |taken: &TakenAndQueued| taken.iter().map(|e| e.key).collect::<Vec<_>>();
    let (again, report) = Store::open(root.path(), "title", identity(), 1 << 30, at(200)).unwrap();
    assert_eq!(report.stale_marker_drops, 0, "no entry file to drop");
    let taken = take_and_queue(&again);
    assert_eq!(keys(&taken), vec![key(2)]);
    assert!(!found(&again, &key(1)), "compiled once");
    // This process dies before its end: the next opening has no marker.
    let (third, _) = Store::open(root.path(), "title", identity(), 1 << 30, at(300)).unwrap();
    let taken = take_and_queue(&third);
    assert_eq!(keys(&taken), vec![key(2)], "never loaded again");
    assert_eq!(
        third.keep_waiting_files_mostly_unwritten(),
        [key(2)].into_iter().collect(),
        "the file written anew is kept as it is"
    );
}

/// Entries left waiting that compress are packed on disk (docs/FORMAT.md, "Entries left
/// waiting"): the file takes less than a third of what it stands for, the next opening takes
/// every entry byte for byte, `pipekeep list` counts the bytes on disk, and under a bound the
/// title ends within it, its oldest records gone first. Before, what waited stood uncompressed:
/// ncnn on RADV at 2 threads, whose later launches barely pause, kept 9.9 MB waiting against
/// Mesa's whole disk cache of 7.2 MB.
#[test]
fn entries_left_waiting_that_compress_are_packed_taken_whole_and_bounded_on_disk() {
    let root = tempfile::tempdir().unwrap();
    let data = compressible_entries(40);
    let kept = leave_waiting_stamped_in_turn(root.path(), &data);
    let file = the_waiting_file(root.path());
    let on_disk = fs::metadata(&file).unwrap().len();
    let stands_for = read_waiting(&file);
    assert!(fs::read(&file).unwrap().starts_with(b"PKWAIT04"));
    assert!(
        on_disk * 3 < stands_for.len() as u64,
        "{on_disk} of {}",
        stands_for.len()
    );
    assert_eq!(kept, on_disk, "the entries' own bytes, on disk");
    assert_eq!(waiting::waiting_in(file.parent().unwrap()), (40, on_disk));
    assert_eq!(title_bytes(root.path()), on_disk);
    let taken = open(root.path(), 1 << 30, at(200)).take_waiting();
    let read: Vec<Vec<u8>> = taken.iter().map(|e| e.data.as_one().to_vec()).collect();
    assert_eq!(read, data);

    // Room for about half: within the bound after, however the frame shrinks; the oldest gone.
    let bound = on_disk / 2;
    let host = root.path().join("title/host-pipelines");
    bound::keep_within(&host, bound, &|_| false).unwrap();
    assert!(
        title_bytes(root.path()) <= bound,
        "{} in {bound}",
        title_bytes(root.path())
    );
    let left: Vec<PipelineKey> = open(root.path(), 1 << 30, at(300))
        .take_waiting()
        .iter()
        .map(|e| e.key)
        .collect();
    assert!(left.len() > 5 && left.len() < 40, "{}", left.len());
    assert_eq!(
        left,
        (41 - left.len() as u8..=40).map(key).collect::<Vec<_>>()
    );
}

/// Two passes at once dropping the same records of a waiting file: the second finds them gone
/// and counts nothing past their shares (before, it took the first's drop for the file's
/// growth and went on down its order: together the two dropped twice the excess).
#[test]
fn a_second_pass_dropping_the_same_records_counts_no_growth() {
    let root = tempfile::tempdir().unwrap();
    let listed = four_records_listed(root.path());
    let past: Vec<i64> = (0..2)
        .map(|_| {
            let mut drops = waiting::WaitingDrops::default();
            drops.drop_record(&listed[0]);
            drops.drop_record(&listed[1]);
            drops.apply().past_shares
        })
        .collect();
    assert_eq!(past, [0, 0]);
}

/// A packed file a little past 64 KiB (below it a file is written as it is), its title a byte
/// over its bound: a record or two go, not the file. Before, written again without one it was
/// short enough to be written unpacked, eight times its shares, and the pass dropped every
/// record to make up for it.
#[test]
fn a_packed_file_near_the_size_it_is_packed_from_loses_a_record_not_all() {
    let root = tempfile::tempdir().unwrap();
    leave_waiting_stamped_in_turn(root.path(), &compressible_entries(16));
    let file = the_waiting_file(root.path());
    assert!(fs::read(&file).unwrap().starts_with(b"PKWAIT04"));
    let unpacked = read_waiting(&file).len();
    // Less than a record past it: without one, it is shorter.
    assert!((64 << 10..68 << 10).contains(&unpacked), "{unpacked}");
    let bound = title_bytes(root.path()) - 1;
    let host = root.path().join("title/host-pipelines");
    bound::keep_within(&host, bound, &|_| false).unwrap();
    assert!(title_bytes(root.path()) <= bound);
    assert!(
        fs::read(&file).unwrap().starts_with(b"PKWAIT04"),
        "still packed"
    );
    let left = open(root.path(), 1 << 30, at(300)).take_waiting().len();
    assert!((13..=15).contains(&left), "{left} of 16 left");
}

/// Cache data for `n` entries, code-like (it compresses as RADV's does), 4,000 bytes each.
fn compressible_entries(n: u8) -> Vec<Vec<u8>> {
    (1..=n)
        .map(|k| {
            cache_data(
                &identity(),
                &crate::store::compress::tests::code_like(k, 4000),
            )
        })
        .collect()
}

/// Leaves `data` waiting at `root`, keys 1 on, key k stamped at 100 + k s; the bytes kept.
fn leave_waiting_stamped_in_turn(root: &Path, data: &[Vec<u8>]) -> u64 {
    let run = open(root, 1 << 30, at(100));
    let entries: Vec<waiting::ToWait<'_>> = data
        .iter()
        .zip(1..)
        .map(|(d, k)| {
            let stamp = at(100 + u64::from(k));
            (key(k), envelope::PayloadKind::Cache, &d[..], stamp)
        })
        .collect();
    run.keep_waiting(&entries).unwrap()
}
