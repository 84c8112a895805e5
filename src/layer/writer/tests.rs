//! The writer's queue, thread and end, with real stores in temporary directories.

use super::end::*;
use super::*;
use crate::store::envelope::tests::{cache_data, identity};
use crate::store::waiting::ToWait;
use std::time::Duration;

fn open_store(dir: &std::path::Path) -> Arc<Store> {
    Arc::new(
        Store::open(dir, "t", identity(), 1 << 30, SystemTime::now())
            .unwrap()
            .0,
    )
}

#[test]
fn the_thread_waits_for_a_pause_only_while_the_queue_has_room_and_is_open() {
    let building = Some(Duration::from_millis(5));
    let mut q = Queue::default();
    assert_eq!(
        q.waits_for_a_pause(building, false),
        Some(NAP),
        "building: it waits"
    );
    assert_eq!(
        q.waits_for_a_pause(Some(QUIET - Duration::from_millis(2)), false),
        Some(Duration::from_millis(2)),
        "no longer than the pause it needs"
    );
    assert_eq!(
        q.waits_for_a_pause(Some(QUIET), false),
        None,
        "a pause: it works"
    );
    assert_eq!(
        q.waits_for_a_pause(None, false),
        None,
        "not watched: it works"
    );
    q.bytes = PAUSE_LIMIT;
    assert_eq!(
        q.waits_for_a_pause(building, false),
        None,
        "past its limit: it works"
    );
    q.bytes = 0;
    let dir = tempfile::tempdir().unwrap();
    let queued_ago = |ago: Duration| Job {
        queued: Instant::now().checked_sub(ago).unwrap(),
        ..Job::announced(
            open_store(dir.path()),
            PipelineKey {
                spirv: [5; 16],
                state: [6; 16],
            },
            PayloadKind::Cache,
            Waiting::Whole(Vec::new()),
        )
    };
    q.jobs.push_back(queued_ago(LONGEST_WAIT));
    assert_eq!(
        q.waits_for_a_pause(building, false),
        None,
        "an entry waited its longest: it works"
    );
    q.jobs[0] = queued_ago(LONGEST_WAIT - Duration::from_millis(500));
    let nap = q
        .waits_for_a_pause(building, false)
        .expect("waited half a second");
    assert!(nap <= NAP, "{nap:?}");
    assert_eq!(
        q.waits_for_a_pause(building, true),
        None,
        "cores free beside the builds: it works"
    );
    q.jobs.clear();
    q.closing = true;
    assert_eq!(
        q.waits_for_a_pause(building, false),
        None,
        "closing: it works"
    );
}

/// The thread's own look at the application: where its threads building leave half the cores free
/// (a machine of four), an entry of the process's own is written at once; where they take more,
/// or on a machine of two, it waits for a pause; stamps alone wait however free the cores.
#[test]
fn the_thread_writes_beside_builds_that_leave_half_the_cores_free() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let mut q = Queue::default();
    q.push(Job::announced(
        store.clone(),
        key_of(7),
        PayloadKind::Cache,
        Waiting::Whole(Vec::new()),
    ));
    let four = AppActivity::on_cores(4);
    let two = AppActivity::on_cores(2);
    let (_a, _b, _c) = (four.begin(), four.begin(), two.begin());
    assert_eq!(q.nap_while(Some(&four)), None, "two of four building");
    assert_eq!(q.nap_while(Some(&two)), Some(NAP), "one of two building");
    let _third = four.begin();
    assert_eq!(
        q.nap_while(Some(&four)),
        Some(NAP),
        "three of four building"
    );
    assert_eq!(q.nap_while(None), None, "not watched");
    assert!(q.pop_own().is_some());
    q.stamps.push(Stamp {
        store,
        of: StampOf::Owed(key_of(7).file_name()),
        stamp: SystemTime::now(),
    });
    drop(_third);
    assert_eq!(q.nap_while(Some(&four)), Some(NAP), "stamps alone");
}

/// Earlier processes' entries, safe in their waiting file, wait for the application's pause
/// however many bytes they hold and however long they have waited; the process's own past the
/// same bytes do not, and once they are written the earlier ones wait again.
#[test]
fn earlier_processes_entries_wait_for_a_pause_however_many() {
    let building = Some(Duration::from_millis(5));
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let job = |n: u8, whom| Job {
        queued: Instant::now().checked_sub(LONGEST_WAIT * 2).unwrap(),
        ..Job::announced_for(
            store.clone(),
            PipelineKey {
                spirv: [n; 16],
                state: [n; 16],
            },
            PayloadKind::Cache,
            Waiting::Whole(vec![n; PAUSE_LIMIT]),
            (SystemTime::now(), whom),
        )
    };
    let mut q = Queue::default();
    q.push(job(1, WrittenFor::Earlier));
    assert_eq!(
        q.waits_for_a_pause(building, false),
        Some(NAP),
        "earlier: it waits"
    );
    q.push(job(2, WrittenFor::Application));
    assert_eq!(
        q.waits_for_a_pause(building, false),
        None,
        "its own: it works"
    );
    assert!(q.pop_own().is_some() && q.pop_own().is_none());
    assert!(!q.has_own_work() && q.has_work());
    assert_eq!(
        q.waits_for_a_pause(building, false),
        Some(NAP),
        "earlier again"
    );
    assert_eq!(
        q.waits_for_a_pause(building, true),
        Some(NAP),
        "earlier, however free the cores"
    );
    assert_eq!(
        q.waits_for_a_pause(Some(QUIET), false),
        None,
        "a pause: it works"
    );
    assert!(q.pop_earlier().is_some() && q.pop_earlier().is_none());
    assert_eq!((q.bytes, q.earlier_bytes), (0, 0));
    // So many that the application's own entries would soon find no room: it works.
    (q.bytes, q.earlier_bytes) = (QUEUE_LIMIT - PAUSE_LIMIT, QUEUE_LIMIT - PAUSE_LIMIT);
    assert_eq!(
        q.waits_for_a_pause(building, false),
        Some(NAP),
        "room for its own"
    );
    (q.bytes, q.earlier_bytes) = (q.bytes + 1, q.earlier_bytes + 1);
    assert_eq!(
        q.waits_for_a_pause(building, false),
        None,
        "near the queue's limit"
    );
}

/// At the end, the entries of a waiting file kept as it was leave the queue before the rule that
/// leaves entries waiting counts, whatever it decides: the end neither writes them nor tells their
/// pieces to the store (they stayed queued where few entries of the process's own waited).
#[test]
fn kept_entries_leave_the_queue_at_the_end_whatever_the_rule_decides() {
    let dir = tempfile::tempdir().unwrap();
    let earlier: Vec<u8> = (100..110).collect();
    let (store, _building, writer) = taking_earlier_entries(dir.path(), &earlier, 512);
    for n in 0..3 {
        let data = cache_data(&identity(), &[n; 512]);
        writer.write(store.clone(), key_of(n), PayloadKind::Cache, data, None);
    }
    assert_eq!(store.keep_waiting_files_mostly_unwritten().len(), 10);
    assert_eq!(
        writer.leave_waiting().0,
        0,
        "three of its own: written as files"
    );
    {
        let q = writer.shared.queue.locked();
        assert_eq!((q.jobs.len(), q.earlier.len()), (3, 0));
        assert_eq!(q.earlier_bytes, 0);
    }
    writer.finish(true);
    assert!((0..3).all(|n| store.entry_path(&key_of(n)).exists()));
    assert!((100..110).all(|n| !store.entry_path(&key_of(n)).exists()));
}

/// Entries an earlier process left waiting, still queued at the end of a process that wrote
/// half or more of them in a pause, are left waiting again in one file however few; the
/// process's own few are written as files. Safe in their file, the earlier ones were written one
/// by one at the end under [`LEAVE_WAITING_FROM`], holding it.
#[test]
fn earlier_entries_at_the_end_are_left_waiting_again_however_few() {
    let dir = tempfile::tempdir().unwrap();
    let earlier: Vec<u8> = (100..140).collect();
    let (store, building, writer) = taking_earlier_entries(dir.path(), &earlier, 64);
    assert!(!worth_leaving_waiting(earlier.len() + 3, 64 * 43));
    for _ in 0..20 {
        let job = writer.shared.queue.locked().pop_earlier().unwrap();
        assert!(
            matches!(run(&job), Ok(Written::Whole(_))),
            "written in a pause"
        );
    }
    for n in 0..3 {
        let data = cache_data(&identity(), &[n; 64]);
        writer.write(store.clone(), key_of(n), PayloadKind::Cache, data, None);
    }
    assert!(
        store.keep_waiting_files_mostly_unwritten().is_empty(),
        "twenty written"
    );
    let taken_file = waiting_files(dir.path());
    drop(building);
    writer.finish(true);
    store.drop_settled_waiting();
    let files = |keys: &mut dyn Iterator<Item = u8>| {
        keys.filter(|&n| store.entry_path(&key_of(n)).exists())
            .count()
    };
    assert_eq!(files(&mut (100..140)), 20, "the rest not written");
    assert_eq!(files(&mut (0..3)), 3, "its own few written");
    let left = waiting_files(dir.path());
    assert_eq!(left.len(), 1);
    assert_ne!(
        left, taken_file,
        "the taken file settled, one of its own left"
    );
    drop(store);
    let next = open_store(dir.path());
    assert_eq!(next.take_waiting().len(), 20);
}

/// A process that wrote fewer than half of an earlier process's entries in its pauses keeps
/// their waiting file as it was (rewriting the rest into a file of its own held a later ncnn
/// launch's end 26-42 ms on RADV); the next process's writer passes over those written (files as
/// new as their records) and writes the rest, and the file goes. Before, a kept file's written
/// entries were written again by each later process, which never reached the rest.
#[test]
fn a_file_whose_few_entries_were_written_stays_and_the_next_writer_passes_over_them() {
    let dir = tempfile::tempdir().unwrap();
    let earlier: Vec<u8> = (100..140).collect();
    let (store, building, writer) = taking_earlier_entries(dir.path(), &earlier, 64);
    for _ in 0..5 {
        let job = writer.shared.queue.locked().pop_earlier().unwrap();
        assert!(matches!(run(&job), Ok(Written::Whole(_))));
    }
    let taken_file = waiting_files(dir.path());
    assert_eq!(
        store.keep_waiting_files_mostly_unwritten().len(),
        40,
        "five written"
    );
    drop(building);
    writer.finish(true);
    store.drop_settled_waiting();
    assert_eq!(waiting_files(dir.path()), taken_file, "as it was");
    drop(store);

    // Beside a build, so that the writer thread takes none of the jobs this thread runs.
    let next = open_store(dir.path());
    let (building, writer) = writer_beside_building();
    writer.write_waiting(next.clone(), next.take_waiting());
    let mut outcomes = Vec::new();
    while let Some(job) = writer.shared.queue.locked().pop_earlier() {
        outcomes.push(matches!(run(&job), Ok(Written::Skipped)));
    }
    assert_eq!(outcomes, [[true; 5].as_slice(), &[false; 35]].concat());
    drop(building);
    writer.finish(true);
    next.drop_settled_waiting();
    assert!(waiting_files(dir.path()).is_empty(), "every entry a file");
    assert!(earlier
        .iter()
        .all(|&n| next.entry_path(&key_of(n)).exists()));
}

/// An entry file this process wrote in a pause holding inline a stage binary that an earlier
/// process's entry left waiting again at the end carries stays a file: the few are left without
/// moving entry files in (found by a review: one leftover took the file in, and the next launch
/// wrote it again).
#[test]
fn few_earlier_entries_left_again_take_no_entry_file_in() {
    let dir = tempfile::tempdir().unwrap();
    let noise = crate::store::recipe::tests::noise(3 * 8000);
    let (own_a, own_b, shared) = (&noise[..8000], &noise[8000..16000], &noise[16000..]);
    let mine = crate::store::binaries::encode(&[], [(&[1u8][..], own_a), (&[9u8][..], shared)]);
    let left = crate::store::binaries::encode(&[], [(&[2u8][..], own_b), (&[9u8][..], shared)]);
    let store = open_store(dir.path());
    let at = SystemTime::now();
    store
        .keep_waiting(&[(key_of(99), PayloadKind::Binaries, &left[..], at)])
        .unwrap();
    drop(store);
    let store = open_store(dir.path());
    let (building, writer) = writer_beside_building();
    writer.write_waiting(store.clone(), store.take_waiting());
    // Its own pipeline, written in a pause: the first file carrying the stage, inline.
    writer.write(store.clone(), key_of(0), PayloadKind::Binaries, mine, None);
    let job = writer.shared.queue.locked().pop_own().unwrap();
    assert!(matches!(run(&job), Ok(Written::Whole(_))));
    drop(job);
    let taken_file = waiting_files(dir.path());
    drop(building);
    writer.finish(true);
    store.drop_settled_waiting();
    assert!(store.entry_path(&key_of(0)).exists(), "its own file stays");
    let left = waiting_files(dir.path());
    assert!(
        left.len() == 1 && left != taken_file,
        "the leftover left again"
    );
    drop(store);
    let next = open_store(dir.path());
    let taken: Vec<PipelineKey> = next.take_waiting().into_iter().map(|e| e.key).collect();
    assert_eq!(taken, [key_of(99)]);
    assert!(matches!(
        next.lookup(&key_of(0)),
        Ok(crate::store::Lookup::Found(_))
    ));
}

/// Where the opening left a waiting file for a later one (it took [`crate::store::waiting`]'s
/// 32 MiB), the few entries still queued at the end are written as files, the earlier
/// process's too: a file left now would go behind the untaken one, and the next opening, taking
/// that one's 32 MiB first, would not reach it (found by a review: 8 entries compiled again).
#[test]
fn few_entries_at_the_end_are_written_where_the_opening_left_a_file_untaken() {
    let dir = tempfile::tempdir().unwrap();
    let random = |n: u8| {
        let mut bytes = vec![0; 1 << 20];
        blake3::Hasher::new()
            .update(&[n])
            .finalize_xof()
            .fill(&mut bytes);
        bytes
    };
    for first in [100u8, 150] {
        let store = open_store(dir.path());
        let data: Vec<Vec<u8>> = (first..first + 33)
            .map(|n| cache_data(&identity(), &random(n)))
            .collect();
        let at = SystemTime::now();
        let entries: Vec<ToWait<'_>> = (first..)
            .zip(&data)
            .map(|(n, d)| (key_of(n), PayloadKind::Cache, &d[..], at))
            .collect();
        store.keep_waiting(&entries).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let store = open_store(dir.path());
    let (building, writer) = writer_beside_building();
    let taken = store.take_waiting();
    assert_eq!(
        taken.len(),
        33,
        "the first file alone: the second left for a later opening"
    );
    assert!(store.left_waiting_untaken());
    writer.write_waiting(store.clone(), taken);
    for _ in 0..28 {
        let job = writer.shared.queue.locked().pop_earlier().unwrap();
        assert!(matches!(run(&job), Ok(Written::Whole(_))));
    }
    for n in 0..3 {
        let data = cache_data(&identity(), &[n; 64]);
        writer.write(store.clone(), key_of(n), PayloadKind::Cache, data, None);
    }
    assert!(store.keep_waiting_files_mostly_unwritten().is_empty());
    drop(building);
    writer.finish(true);
    store.drop_settled_waiting();
    drop((writer, store));
    let next = open_store(dir.path());
    let taken: std::collections::HashSet<PipelineKey> =
        next.take_waiting().into_iter().map(|e| e.key).collect();
    let found = |n: u8| next.entry_path(&key_of(n)).exists() || taken.contains(&key_of(n));
    let lost: Vec<u8> = (0..3).chain(100..133).filter(|&n| !found(n)).collect();
    assert!(lost.is_empty(), "not found by the next launch: {lost:?}");
}

/// A process that builds all along and has taken the entries `earlier` (each `bytes` of `n`)
/// an earlier process left waiting in a store at `dir`: its store, its building and its writer.
fn taking_earlier_entries(
    dir: &std::path::Path,
    earlier: &[u8],
    bytes: usize,
) -> (Arc<Store>, Building, Writer) {
    let store = open_store(dir);
    let data: Vec<Vec<u8>> = earlier
        .iter()
        .map(|&n| cache_data(&identity(), &vec![n; bytes]))
        .collect();
    let entries: Vec<ToWait<'_>> = earlier
        .iter()
        .zip(&data)
        .map(|(&n, d)| (key_of(n), PayloadKind::Cache, &d[..], SystemTime::now()))
        .collect();
    store.keep_waiting(&entries).unwrap();
    drop(store);
    let store = open_store(dir);
    let (building, writer) = writer_beside_building();
    writer.write_waiting(store.clone(), store.take_waiting());
    (store, building, writer)
}

/// A writer beside an application that builds all along (two cores): the building, until
/// dropped, and the writer.
fn writer_beside_building() -> (Building, Writer) {
    let activity = Arc::new(AppActivity::on_cores(2));
    let building = Building::start(activity.clone());
    let writer = Writer::new(Arc::new(|r, _| assert!(r.is_ok())), Some(activity));
    (building, writer)
}

fn key_of(n: u8) -> PipelineKey {
    PipelineKey {
        spirv: [n; 16],
        state: [n; 16],
    }
}

/// Whether `holds` comes to hold within 30 s, looked at every 5 ms.
fn within_30_s(holds: impl Fn() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(30);
    while !holds() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    holds()
}

/// Touches `activity` every millisecond until dropped: an application building all along.
struct Building(Arc<std::sync::atomic::AtomicBool>);

impl Building {
    fn start(activity: Arc<AppActivity>) -> Building {
        activity.touch();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                activity.touch();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Building(stop)
    }
}

impl Drop for Building {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Through the writer thread: while the application builds, the thread writes the process's own
/// entries past [`PAUSE_LIMIT`] and then leaves earlier processes' entries waiting for a pause,
/// none written on the way (it once took one after its own work, and all of them while records or
/// stamps of its own were queued); the pause writes them.
#[test]
fn the_thread_writes_no_earlier_entry_while_the_application_builds() {
    let dir = tempfile::tempdir().unwrap();
    // An earlier process's entries, left waiting.
    let earlier: Vec<u8> = (100..140).collect();
    let (store, building, writer) = taking_earlier_entries(dir.path(), &earlier, 4096);
    // Its own entries past the pause's limit: the thread takes them while it builds.
    let own = (PAUSE_LIMIT / (1 << 20) + 2) as u8;
    for n in 0..own {
        let data = cache_data(&identity(), &vec![n; 1 << 20]);
        writer.write(store.clone(), key_of(n), PayloadKind::Cache, data, None);
        writer.stamp(store.clone(), ToStamp::of(key_of(n).file_name()));
    }
    let written = |keys: &mut dyn Iterator<Item = u8>| {
        keys.filter(|&n| store.entry_path(&key_of(n)).exists())
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while written(&mut (0..own)) < usize::from(own) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(written(&mut (0..own)), usize::from(own), "its own");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        written(&mut earlier.iter().copied()),
        0,
        "none while it builds"
    );
    drop(building);
    let deadline = Instant::now() + Duration::from_secs(120);
    while written(&mut earlier.iter().copied()) < earlier.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        written(&mut earlier.iter().copied()),
        earlier.len(),
        "in the pause"
    );
    writer.finish(true);
}

/// While the application builds without a pause, an entry is still written once it has
/// waited its longest, not at the device's end only (a process that dies while it builds
/// loses at most that long of compiles).
#[test]
fn an_entry_waits_for_a_pause_no_longer_than_its_longest() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let building = Arc::new(AppActivity::on_cores(2));
    let writer = Writer::new(Arc::new(|r, _| assert!(r.is_ok())), Some(building.clone()));
    let key = PipelineKey {
        spirv: [3; 16],
        state: [4; 16],
    };
    building.touch();
    let queued = Instant::now();
    writer.write(
        store.clone(),
        key,
        PayloadKind::Cache,
        cache_data(&identity(), &[3; 64]),
        None,
    );
    // The application keeps building; the entry is on disk well before the device's end.
    let deadline = queued + LONGEST_WAIT * 20;
    while !store.entry_path(&key).exists() && Instant::now() < deadline {
        building.touch();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        store.entry_path(&key).exists(),
        "still waiting after {:?} of building",
        queued.elapsed()
    );
    writer.finish(true);
}

/// While the application builds, the device's end still writes everything queued.
#[test]
fn the_end_writes_what_waited_for_a_pause() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let building = Arc::new(AppActivity::on_cores(2));
    let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = written.clone();
    let writer = Writer::new(
        Arc::new(move |r, _| {
            assert!(r.is_ok());
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }),
        Some(building.clone()),
    );
    for n in 0..3u8 {
        building.touch();
        writer.write(
            store.clone(),
            key_of(n),
            PayloadKind::Cache,
            cache_data(&identity(), &[n; 64]),
            None,
        );
    }
    writer.finish(true);
    assert_eq!(written.load(std::sync::atomic::Ordering::SeqCst), 3);
    for n in 0..3u8 {
        let found = store.lookup(&key_of(n));
        assert!(matches!(found, Ok(crate::store::Lookup::Found(_))));
    }
}

/// Many entries waiting at the device's end (helpers beside the finishing thread) are all
/// written.
#[test]
fn the_end_writes_many_waiting_entries_on_several_threads() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let building = Arc::new(AppActivity::on_cores(2));
    let writer = Writer::new(Arc::new(|r, _| assert!(r.is_ok())), Some(building.clone()));
    let key_of = |n: u16| PipelineKey {
        spirv: [(n >> 8) as u8; 16],
        state: [n as u8; 16],
    };
    let count = (ENTRIES_A_HELPER * 3) as u16;
    for n in 0..count {
        building.touch();
        writer.write(
            store.clone(),
            key_of(n),
            PayloadKind::Cache,
            cache_data(&identity(), &[n as u8; 64]),
            None,
        );
    }
    assert!(finishing_helpers(count.into()) >= 1);
    writer.finish(true);
    for n in 0..count {
        let found = store.lookup(&key_of(n));
        assert!(matches!(found, Ok(crate::store::Lookup::Found(_))), "{n}");
    }
}

/// Files of entries left waiting anywhere under `dir`.
fn waiting_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p
                .to_string_lossy()
                .ends_with(crate::store::files::WAITING_SUFFIX)
            {
                found.push(p);
            }
        }
    }
    found
}

/// Fewer entries than [`LEAVE_WAITING_FROM`] still queued at the end are left waiting in one
/// file where they hold [`LEAVE_WAITING_BYTES`] (each a file would hold the process's end), and
/// written as files where they are small or fewer than [`LEAVE_WAITING_BYTES_FROM_ENTRIES`]; the
/// next process finds them either way, and leaves those it took waiting again by the same rule.
#[test]
fn fewer_entries_at_the_end_are_left_waiting_where_they_hold_many_bytes() {
    let most = LEAVE_WAITING_BYTES_FROM_ENTRIES;
    let large = LEAVE_WAITING_BYTES / most + 16 * 1024;
    for (entries, entry_bytes, left) in [
        (most + 8, large, true),
        (most + 8, 64, false),
        (
            most - 1,
            LEAVE_WAITING_BYTES / (most - 1) + 16 * 1024,
            false,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(dir.path());
        let (_building, writer) = writer_beside_building();
        let key_of = |n: usize| PipelineKey {
            spirv: [n as u8; 16],
            state: [n as u8; 16],
        };
        for n in 0..entries {
            let payload = vec![n as u8; entry_bytes];
            let data = cache_data(&identity(), &payload);
            writer.write(store.clone(), key_of(n), PayloadKind::Cache, data, None);
        }
        writer.finish(true);
        let files = |store: &Store| {
            (0..entries)
                .filter(|&n| store.entry_path(&key_of(n)).exists())
                .count()
        };
        let case = format!("{entries} entries of {entry_bytes} bytes");
        assert_eq!(files(&store), if left { 0 } else { entries }, "{case}");
        assert_eq!(waiting_files(dir.path()).len(), usize::from(left), "{case}");
        drop(store);
        // The next process, as the layer opens its store: what waits goes to its writer.
        // It builds all along, and its end comes before any pause.
        let next = open_store(dir.path());
        let (_building, writer) = writer_beside_building();
        writer.write_waiting(next.clone(), next.take_waiting());
        for n in 0..entries {
            let found = next.lookup(&key_of(n));
            assert!(
                matches!(found, Ok(crate::store::Lookup::Found(_))),
                "{case}: {n}"
            );
        }
        // Its end, none of them written: they are left waiting again, in a file of its own.
        writer.finish(true);
        assert_eq!(files(&next), if left { 0 } else { entries }, "{case}");
        assert_eq!(
            waiting_files(dir.path()).len(),
            2 * usize::from(left),
            "{case}"
        );
    }
}

/// Where the writer holds the queue's lock (preempted, as an idle-priority thread is on a busy
/// machine), an application thread's entry, stamp and chore are handed over: it neither waits
/// for the lock nor does the work itself (an entry's files, which take locks the writer takes
/// too), and the entry is found from memory meanwhile. Before, each was done on its thread.
#[test]
fn an_application_thread_hands_its_work_over_where_the_writer_holds_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let writer = Arc::new(Writer::new(Arc::new(|_, _| {}), None));
    let key = PipelineKey {
        spirv: [1; 16],
        state: [2; 16],
    };
    let chore_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let data = cache_data(&identity(), &[9; 64]);
    // The thread started, as the idle-priority writer would hold the queue's lock, preempted.
    writer.write(store.clone(), key_of(9), PayloadKind::Cache, data, None);
    let held = writer.shared.queue.lock().unwrap();
    {
        let (writer, store, chore_done) = (writer.clone(), store.clone(), chore_done.clone());
        crate::sync::done_elsewhere("queueing while the writer holds the queue", move || {
            let data = cache_data(&identity(), &[7; 64]);
            writer.write(store.clone(), key, PayloadKind::Cache, data, None);
            writer.stamp(store, ToStamp::of(key.file_name()));
            let done = move || chore_done.store(true, std::sync::atomic::Ordering::SeqCst);
            writer.later(Box::new(done));
        });
    }
    assert!(
        !store.entry_path(&key).exists(),
        "written on the application's thread"
    );
    assert!(!chore_done.load(std::sync::atomic::Ordering::SeqCst));
    let found = store.lookup(&key);
    assert!(matches!(found, Ok(crate::store::Lookup::Found(_))));
    drop(held);
    writer.finish(false);
    assert!(
        store.entry_path(&key).exists(),
        "written by the queue's drain"
    );
    assert!(chore_done.load(std::sync::atomic::Ordering::SeqCst));
}

/// What is handed over while the writer thread waits is written by it, with no end to drain it
/// (before, it was written on the caller's thread).
#[test]
fn the_writer_thread_writes_what_was_handed_over_while_it_waited() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let writer = Arc::new(Writer::new(Arc::new(|_, _| {}), None));
    let write = |n: u8| {
        let data = cache_data(&identity(), &[n; 64]);
        writer.write(store.clone(), key_of(n), PayloadKind::Cache, data, None);
    };
    write(1); // starts the thread
    let held = writer.shared.queue.lock().unwrap();
    write(2);
    assert!(!store.entry_path(&key_of(2)).exists(), "handed over");
    drop(held);
    let until = Instant::now() + Duration::from_secs(30);
    while !store.entry_path(&key_of(2)).exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(store.entry_path(&key_of(2)).exists());
    writer.finish(false);
}

/// A writer thread whose queue stayed empty for the second it waited sleeps until something is
/// queued: an idle application's writer is not woken once a second for ever (before, it was).
/// A stamp, which wakes no thread while its batch is short, queued into the queue or handed
/// over, then wakes it, and it is taken with no end to drain it.
#[test]
fn an_idle_writer_sleeps_until_something_is_queued() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let writer = Arc::new(Writer::new(Arc::new(|_, _| {}), None));
    let data = cache_data(&identity(), &[1; 64]);
    writer.write(store.clone(), key_of(1), PayloadKind::Cache, data, None);
    let wakes = || {
        writer
            .shared
            .wakes
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    let taken = || {
        let q = writer.shared.queue.locked();
        q.stamps.is_empty() && !writer.shared.handover.waits() && q.in_flight == 0
    };
    let stamp = || writer.stamp(store.clone(), ToStamp::of(key_of(1).file_name()));
    let asleep = || {
        writer
            .shared
            .asleep
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    for handed in [false, true] {
        // A second's wait with nothing queued, then asleep.
        assert!(within_30_s(asleep), "never asleep with its queue empty");
        let before = wakes();
        std::thread::sleep(Duration::from_millis(1200));
        assert_eq!(wakes(), before, "woken while nothing was queued");
        assert!(asleep());
        if handed {
            let held = writer.shared.queue.lock().unwrap();
            stamp();
            assert!(writer.shared.handover.waits(), "handed over");
            drop(held);
        } else {
            stamp();
        }
        assert!(
            within_30_s(taken),
            "a stamp queued while the writer slept waits for the end"
        );
    }
    writer.finish(false);
}

/// Where the queue is held, work is still done on the caller's thread where handing it over
/// would leave it waiting or let an application thread wait: no writer thread runs yet (it would
/// wait for the end), the queue closed (nothing takes it any more), the handover holds its most,
/// or the caller is a thread of the layer's own at idle priority (the rebuild's).
#[test]
fn held_work_is_done_here_where_handing_it_over_would_leave_it_or_hold_others() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let writer = Arc::new(Writer::new(Arc::new(|_, _| {}), None));
    let write = |n: u8, bytes: usize| {
        let data = cache_data(&identity(), &vec![n; bytes]);
        writer.write(store.clone(), key_of(n), PayloadKind::Cache, data, None);
        store.entry_path(&key_of(n)).exists()
    };
    {
        let _held = writer.shared.queue.lock().unwrap();
        assert!(write(1, 64), "no writer thread yet");
    }
    write(2, 64); // starts the thread
    {
        let _held = writer.shared.queue.lock().unwrap();
        assert!(
            write(3, handover::HANDED_BYTES_AT_MOST as usize + 1),
            "past the handover's bytes"
        );
        let (writer, store) = (writer.clone(), store.clone());
        let idle = crate::sync::done_elsewhere("an idle thread's write", move || {
            crate::sync::mark_at_idle_priority();
            let data = cache_data(&identity(), &[4; 64]);
            writer.write(store.clone(), key_of(4), PayloadKind::Cache, data, None);
            store.entry_path(&key_of(4)).exists()
        });
        assert!(idle, "an idle-priority thread's");
        assert!(!write(5, 64), "handed over");
    }
    writer.finish(false);
    let _held = writer.shared.queue.lock().unwrap();
    assert!(write(6, 64), "the queue closed");
    assert!(store.entry_path(&key_of(5)).exists());
}

/// NVIDIA's cache data waits with its dictionary's record set apart, held once for every
/// entry carrying it, and is written as the driver gave it, byte for byte.
#[test]
fn a_dictionary_waits_once_and_every_entry_is_written_whole() {
    use crate::store::nvidia_cache::frame_bytes;
    use crate::store::nvidia_cache::tests::{dictionary_key, nvidia_cache, record};
    let dictionaries = Dictionaries::default();
    let apart = |d: &[u8]| dictionaries.set_apart(d, frame_bytes(d).unwrap());
    let dictionary = record(dictionary_key(), 42, &[9; 50_000]);
    let data = |n: u8| nvidia_cache(&[record([n; 16], n.into(), &[n; 300]), dictionary.clone()]);
    let waiting: Vec<Waiting> = (1..=3).map(|n| apart(&data(n))).collect();
    for (n, w) in (1..=3).zip(&waiting) {
        assert!(w.len() < 1_000, "only its own bytes wait: {}", w.len());
        assert_eq!(&*w.whole(), &data(n)[..]);
    }
    let records: Vec<_> = waiting
        .iter()
        .map(|w| match w {
            Waiting::Apart { record, .. } => record,
            Waiting::Whole(_) | Waiting::Taken(_) => unreachable!(),
        })
        .collect();
    assert!(
        Arc::ptr_eq(records[0], records[2]),
        "the record is held once"
    );
    assert_eq!(dictionaries.held(), 1);
    // Another dictionary of the same name and length but another head is its own.
    let mut other = dictionary.clone();
    other[0] ^= 1; // the driver's build, in both copies of the key
    other[28] ^= 1;
    let other_data = nvidia_cache(&[record([5; 16], 5, &[5; 300]), other]);
    let w = apart(&other_data);
    assert_eq!(&*w.whole(), &other_data[..]);
    for new in 6..=9u64 {
        let d = record(dictionary_key(), new, &[1; 100]);
        apart(&nvidia_cache(&[record([1; 16], 1, &[1; 30]), d]));
    }
    assert_eq!(
        dictionaries.held(),
        Dictionaries::KEPT,
        "the last few new ones"
    );
    // Another driver's cache data is not framed, so it waits whole.
    assert!(frame_bytes(&cache_data(&identity(), &[7; 100])).is_err());
}

/// At the device's end, entries holding NVIDIA's dictionary apart are told to the store by their
/// own bytes and the dictionary's record, not put together: the first written names as pieces
/// both the dictionary and a record of its own the second carries too (neither stands inline, to
/// be written again once the second comes). The two hold the dictionary in records of their own
/// (two queues' `Dictionaries`): counted by name, together.
#[test]
fn entries_holding_a_dictionary_apart_at_the_end_name_what_they_share_as_pieces_from_the_first() {
    use crate::store::envelope::{listed_parts, PayloadKind::Cache};
    use crate::store::nvidia_cache::frame_bytes;
    use crate::store::nvidia_cache::tests::{dictionary_key, nvidia_cache, record};
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let dictionary = record(dictionary_key(), 42, &[9; 50_000]);
    let shared = record([7; 16], 7, &[7; 3000]);
    let data = |n: u8| {
        nvidia_cache(&[
            record([n; 16], n.into(), &[n; 3000]),
            shared.clone(),
            dictionary.clone(),
        ])
    };
    let waiting: Vec<Arc<Queued<Waiting>>> = (1..=2)
        .map(|n| {
            let d = data(n);
            Queued::new(Dictionaries::default().set_apart(&d, frame_bytes(&d).unwrap()))
        })
        .collect();
    assert!(waiting
        .iter()
        .all(|w| matches!(***w, Waiting::Apart { .. })));
    expect_together(
        waiting
            .iter()
            .map(|w| (store.clone(), Cache, w.clone()))
            .collect(),
    );
    let key = |n: u8| PipelineKey {
        spirv: [n; 16],
        state: [n; 16],
    };
    store
        .write_announced(&key(1), Cache, &waiting[0].whole(), SystemTime::now())
        .unwrap();
    let mut named = listed_parts(&std::fs::read(store.entry_path(&key(1))).unwrap())
        .unwrap()
        .1;
    named.sort_unstable();
    let mut expected = [&shared, &dictionary].map(|r| *blake3::hash(r).as_bytes());
    expected.sort_unstable();
    assert_eq!(
        named, expected,
        "the shared record and the dictionary are pieces from the first entry"
    );
}

/// An entry holding NVIDIA's dictionary apart is written knowing the dictionary's name (hashed
/// once for every entry that carries it: `recipe::cut`'s test shows a record holding a known
/// piece's bytes takes its name), and its file is byte for byte the one its data whole writes
/// (the dictionary a piece both ways, the entry's own record inline).
#[test]
fn an_entry_holding_a_dictionary_apart_is_written_by_its_name_as_from_the_whole() {
    use crate::store::nvidia_cache::frame_bytes;
    use crate::store::nvidia_cache::tests::{dictionary_key, identity, nvidia_cache, record};
    let dictionary = record(dictionary_key(), 42, &[9; 50_000]);
    let data = |n: u8| nvidia_cache(&[record([n; 16], n.into(), &[n; 3000]), dictionary.clone()]);
    let (by_name, from_whole) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The identity the data's header names (read back, the first entry is written again naming
    // the dictionary once the second carries it).
    let open = |dir: &std::path::Path| {
        let when = SystemTime::now();
        Arc::new(Store::open(dir, "t", identity(), 1 << 30, when).unwrap().0)
    };
    let stores = [by_name.path(), from_whole.path()].map(open);
    let dictionaries = Dictionaries::default();
    for n in 1..=3 {
        let d = data(n);
        let waiting = dictionaries.set_apart(&d, frame_bytes(&d).unwrap());
        let known = waiting
            .known_piece()
            .expect("the dictionary's record, named");
        assert_eq!(&known[..], &dictionary[..]);
        let job = Job::announced(stores[0].clone(), key_of(n), PayloadKind::Cache, waiting);
        run(&job).unwrap();
        stores[1]
            .write_announced(&key_of(n), PayloadKind::Cache, &d, job.stamp)
            .unwrap();
    }
    for n in 1..=3 {
        let file = |store: &Store| std::fs::read(store.entry_path(&key_of(n))).unwrap();
        assert_eq!(file(&stores[0]), file(&stores[1]), "entry {n}");
    }
    let pieces = |store: &Store| {
        let mut names: Vec<_> = crate::store::pieces::listed(store.dir())
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        names.sort_unstable();
        names
    };
    let kept = pieces(&stores[0]);
    assert_eq!(kept.len(), 1, "the dictionary, once: {kept:?}");
    assert_eq!(kept, pieces(&stores[1]));
}

/// The writer hands the store the dictionary's record it holds apart, named: a record under a
/// name of the test's own (which no hash gives) is what the entry it writes lists.
#[test]
fn the_writer_names_the_dictionary_it_holds_apart_by_the_name_it_holds() {
    use crate::store::envelope::listed_parts;
    use crate::store::nvidia_cache::frame_bytes;
    use crate::store::nvidia_cache::tests::{dictionary_key, nvidia_cache, record};
    use crate::store::recipe::KnownPiece;
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let dictionary = record(dictionary_key(), 42, &[9; 50_000]);
    let data = nvidia_cache(&[record([1; 16], 1, &[1; 3000]), dictionary.clone()]);
    let framing = frame_bytes(&data).unwrap();
    let known = KnownPiece::named(&dictionary, [0xee; 32]);
    // Told it is shared, the first entry carrying it names it (not inline, to be written again).
    store.expect_together(&[], &[(&known, 2)]);
    let waiting = Waiting::Apart {
        without: framing.without_dictionary_in(&data),
        framing,
        record: Arc::new(known),
    };
    let key = key_of(1);
    run(&Job::announced(
        store.clone(),
        key,
        PayloadKind::Cache,
        waiting,
    ))
    .unwrap();
    let listed = listed_parts(&std::fs::read(store.entry_path(&key)).unwrap())
        .unwrap()
        .1;
    assert_eq!(listed, [[0xee; 32]]);
}

/// While the application builds, the thread takes the record's pipelines a few at a time, so that
/// the job the device's end may find under way is short; where the cores are free, all of them.
#[test]
fn the_records_pipelines_are_taken_a_few_at_a_time_while_the_application_builds() {
    use crate::replay::record::{AppState, RecordApp, RecordFile};
    let dir = tempfile::tempdir().unwrap();
    let file = Arc::new(RecordFile::new(dir.path()));
    let app = Arc::new(RecordApp::new(AppState::default()));
    let mut q = Queue {
        records: (0..150)
            .map(|n| RecordJob {
                file: file.clone(),
                record: crate::replay::record::tests::nth_record(n),
                app: app.clone(),
            })
            .collect(),
        ..Queue::default()
    };
    let nth = |n: usize| crate::replay::record::tests::nth_record(n as u8).key;
    let first = q.take_records(false);
    assert_eq!(first.len(), RECORDS_A_JOB);
    assert_eq!(first[0].record.key, nth(0));
    let second = q.take_records(false);
    assert_eq!(second.len(), RECORDS_A_JOB);
    assert_eq!(second[0].record.key, nth(RECORDS_A_JOB), "in order");
    assert_eq!(q.records.len(), 150 - 2 * RECORDS_A_JOB);
    q.records.extend(first);
    assert_eq!(
        q.take_records(true).len(),
        150 - RECORDS_A_JOB,
        "all where the cores are free"
    );
    assert!(q.records.is_empty() && q.take_records(false).is_empty());
}

/// The cores are free for the record's documents at the end, and where the application has built
/// nothing for [`QUIET`]; not while it builds.
#[test]
fn the_records_documents_are_spread_only_where_the_application_leaves_the_cores() {
    let activity = AppActivity::on_cores(2);
    activity.touch();
    assert!(
        !Drain::Thread(Some(&activity)).cores_are_free(),
        "it builds"
    );
    assert!(Drain::Here.cores_are_free(), "the end");
    std::thread::sleep(QUIET + Duration::from_millis(10));
    assert!(Drain::Thread(Some(&activity)).cores_are_free(), "its pause");
}

/// The store's last device's end appends every pipeline queued for the record once (the end
/// takes them all: the writer thread none), beside the entries it leaves waiting (300 of them
/// here), and what its line counts in flight is the writer thread's own job alone.
#[test]
fn the_end_appends_every_records_pipeline_once_beside_the_entries_left_waiting() {
    use crate::replay::objects::TAG_COMPUTE;
    use crate::replay::record::tests::nth_record;
    use crate::replay::record::{AppState, RecordApp, RecordFile};
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let building = Arc::new(AppActivity::on_cores(2));
    // Building all along: the writer thread waits for a pause, so everything waits for the end.
    let _building = Building::start(building.clone());
    let writer = Writer::new(Arc::new(|r, _| assert!(r.is_ok())), Some(building.clone()));
    let many = |n: u16| PipelineKey {
        spirv: [(n >> 8) as u8; 16],
        state: [n as u8; 16],
    };
    for n in 0..300u16 {
        building.touch();
        let data = cache_data(&identity(), &[n as u8; 64]);
        writer.write(store.clone(), many(n), PayloadKind::Cache, data, None);
    }
    let record = tempfile::tempdir().unwrap();
    let file = Arc::new(RecordFile::new(record.path()));
    let app = Arc::new(RecordApp::new(AppState::default()));
    for n in 0..150u8 {
        building.touch();
        writer.record(file.clone(), nth_record(n), app.clone());
    }
    let log = crate::sync::CapturedLog::default();
    log.during(tracing::Level::DEBUG, || writer.finish(true));
    assert_eq!(
        waiting_files(dir.path()).len(),
        1,
        "the entries left waiting"
    );
    let read = crate::replay::foz::read_entries(&std::fs::read(file.path()).unwrap()).unwrap();
    assert_eq!(read.iter().filter(|e| e.tag == TAG_COMPUTE).count(), 150);
    // Appended once, all of them by the end (the file itself drops what it holds already).
    let q = writer.shared.queue.locked();
    assert_eq!((q.records_at_end.pipelines, q.in_flight), (150, 0));
    let text = log.text();
    let line = text.lines().find(|l| l.contains("device's end written"));
    let line = line.expect("the end's line");
    assert!(
        line.contains(" in_flight=0 ") && line.contains(" records=150 "),
        "{line}"
    );
}
