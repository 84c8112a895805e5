//! The store under real processes: children killed with SIGKILL at many points during writes and
//! evictions never leave an entry under its final name that fails verification, and several
//! processes writing, reading and evicting one store at once see only verified data or misses.
//!
//! The children are this test binary again, told what to do by `PIPEKEEP_TEST_CHILD`.

mod common;
use common::{cache_data, identity, numbered_key as key};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use pipekeep::store::{bound, files, pieces, EntryError, Lookup, Store};

/// The data of key `n`'s entry, always the same for one key, as a driver's would be: every third
/// entry is large and ends in a block all of them share (kept once, as pieces).
fn data(n: u32) -> Vec<u8> {
    let own = cache_data(n, 2000 + n as usize * 500);
    if !n.is_multiple_of(3) {
        return own;
    }
    let shared = cache_data(999, 90_000);
    [&own[..], &shared[32..]].concat()
}

/// The child's work: write, read and evict for `secs` seconds; on an error a caller would see,
/// exit 3 after saying which in `<root>/child-<seed>.error` (the parent shows it).
fn child_loop(root: &Path, seed: u32, secs: f64, max_bytes: u64) {
    let fail = |what: String| -> ! {
        let _ = std::fs::write(root.join(format!("child-{seed}.error")), what);
        std::process::exit(3)
    };
    let started = Instant::now();
    let mut n = seed;
    while started.elapsed().as_secs_f64() < secs {
        let store = match Store::open(root, "t", identity(), max_bytes, SystemTime::now()) {
            Ok((store, _)) => store,
            Err(e) => fail(format!("open: {e}")),
        };
        for _ in 0..50 {
            n = n.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let k = key(n % 64);
            match store.lookup(&k) {
                Ok(Lookup::Found(e)) => store.stamp(e),
                Ok(Lookup::Missing) | Ok(Lookup::Dropped(_)) => {
                    // Entries of one key always hold the same data, as a driver's would.
                    if let Err(e) = store.write(&k, &data(n % 64)) {
                        fail(format!("write {}: {e}", k.file_name()))
                    }
                }
                Err(e) => fail(format!("lookup {}: {e}", k.file_name())),
            }
        }
        store.keep_within_bound();
    }
}

/// What the children said of their errors.
fn child_errors(root: &Path) -> String {
    files::names_in(root)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.ends_with(".error"))
        .map(|n| std::fs::read_to_string(root.join(&n)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("; ")
}

/// RLIMIT_FSIZE stands in for a full disk: a write past it fails midway (`EFBIG`, as `ENOSPC`
/// would). Exits 0 when the write failed and was reported.
fn write_past_a_file_size_limit(root: &Path) {
    let limit = libc::rlimit {
        rlim_cur: 4096,
        rlim_max: 4096,
    };
    // SAFETY: plain system calls on this child process alone; SIGXFSZ ignored so that the write
    // fails instead of killing the process.
    unsafe {
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let (store, _) = Store::open(root, "t", identity(), u64::MAX, SystemTime::now()).unwrap();
    // Bytes that do not compress: the entry's pieces pass the limit as they are.
    let mut data = cache_data(1, 0);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    data.extend((0..100_000).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 32) as u8
    }));
    let written = store.write(&key(1), &data);
    std::process::exit(if written.is_err() { 0 } else { 4 });
}

/// Room for a few large entries and their shared pieces, not for all 64 entries.
const BOUND: u64 = 600_000;

fn run_child_mode() -> bool {
    let Ok(mode) = std::env::var("PIPEKEEP_TEST_CHILD") else {
        return false;
    };
    let root = std::env::var("PIPEKEEP_TEST_ROOT").unwrap();
    let seed: u32 = std::env::var("PIPEKEEP_TEST_SEED")
        .unwrap()
        .parse()
        .unwrap();
    match mode.as_str() {
        "churn" => child_loop(Path::new(&root), seed, 3.0, BOUND),
        "forever" => child_loop(Path::new(&root), seed, 1e9, BOUND * 2 / 3),
        "full-disk" => write_past_a_file_size_limit(Path::new(&root)),
        _ => unreachable!(),
    }
    true
}

fn spawn(mode: &str, root: &Path, seed: u32) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture"])
        .env("PIPEKEEP_TEST_CHILD", mode)
        .env("PIPEKEEP_TEST_ROOT", root)
        .env("PIPEKEEP_TEST_SEED", seed.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Not a test of its own: the entry point the children run.
#[test]
fn child_entry() {
    run_child_mode();
}

/// Every entry under its final name verifies, its pieces with it; one whose piece another
/// process's bound dropped meanwhile is a miss (`missing-piece`), never a wrong byte.
fn assert_every_entry_verifies(root: &Path) -> usize {
    let (store, _) = Store::open(root, "t", identity(), u64::MAX, SystemTime::now()).unwrap();
    let mut checked = 0;
    for name in files::names_in(store.dir()).unwrap() {
        if let Some(n) = (0..64).find(|n| *key(*n).file_name() == *name) {
            match store.lookup(&key(n)).unwrap() {
                Lookup::Found(e) => assert!(e.with_data(|d| d == data(n)), "{name}: other bytes"),
                Lookup::Dropped(EntryError::MissingPiece) => {}
                Lookup::Dropped(why) => panic!("{name} failed verification: {why}"),
                Lookup::Missing => {}
            }
            checked += 1;
        }
    }
    checked
}

/// No temporary file stays in the identity directory or among its pieces.
fn assert_no_temporary_file_left(dir: &Path) {
    for d in [dir.to_path_buf(), dir.join(pieces::DIR)] {
        let left: Vec<String> = files::names_in(&d)
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?} in {}", d.display());
    }
}

#[test]
fn a_child_killed_at_many_points_never_leaves_a_torn_entry() {
    let root = tempfile::tempdir().unwrap();
    let mut rng = 7u64;
    for round in 0..25u32 {
        let mut child = spawn("forever", root.path(), round);
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_millis(20 + (rng >> 33) % 80));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        assert_every_entry_verifies(root.path());
    }
    // The next opening cleaned what the kills left: no temporary file stays unlocked.
    let (store, _) =
        Store::open(root.path(), "t", identity(), u64::MAX, SystemTime::now()).unwrap();
    assert_no_temporary_file_left(store.dir());
    assert!(
        !pieces::listed(store.dir()).is_empty(),
        "no pieces were written"
    );
}

#[test]
fn four_processes_share_one_store_and_see_only_verified_data_or_misses() {
    let root = tempfile::tempdir().unwrap();
    let children: Vec<_> = (0..4)
        .map(|i| spawn("churn", root.path(), 1000 + i))
        .collect();
    for mut c in children {
        assert!(
            c.wait().unwrap().success(),
            "a process saw an error: {}",
            child_errors(root.path())
        );
    }
    assert!(assert_every_entry_verifies(root.path()) > 0);
    let host = root.path().join("t/host-pipelines");
    let total: u64 = bound::entries_of_title(&host)
        .unwrap()
        .iter()
        .map(|e| e.bytes)
        .sum();
    let (store, _) = Store::open(root.path(), "t", identity(), BOUND, SystemTime::now()).unwrap();
    let names = files::names_in(store.dir()).unwrap();
    assert!(
        names
            .iter()
            .all(|n| n.ends_with(".entry") || n == pieces::DIR),
        "left behind: {names:?}"
    );
    assert_no_temporary_file_left(store.dir());
    let after: u64 = bound::entries_of_title(&host)
        .unwrap()
        .iter()
        .map(|e| e.bytes)
        .sum();
    assert!(after <= BOUND, "{total} -> {after}");
}

#[test]
fn a_full_disk_leaves_no_partial_temporary_file() {
    let root = tempfile::tempdir().unwrap();
    let status = spawn("full-disk", root.path(), 0).wait().unwrap();
    assert!(
        status.success(),
        "the write did not fail as the disk filled: {status:?}"
    );
    let dir = root
        .path()
        .join("t/host-pipelines")
        .join(identity().dir_name());
    // Pieces written whole before the failing one may stay (the bound counts them); no partial
    // file does, and no entry.
    let left = files::names_in(&dir).unwrap();
    assert!(
        left.iter().all(|n| n == pieces::DIR),
        "left behind: {left:?}"
    );
    assert_no_temporary_file_left(&dir);
    for (name, path) in pieces::listed(&dir) {
        assert!(pieces::content_of(std::fs::read(path).unwrap(), &name).is_some());
    }
}
