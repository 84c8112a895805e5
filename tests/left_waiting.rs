//! Entries left waiting at a process's end (docs/FORMAT.md, "Entries left waiting") through the
//! real loader on RADV null: where the application kept the writer from writing while it built
//! (`PIPEKEEP_TEST_HOLD_WRITES`, as a busy application does), its end keeps them in one file, not
//! an entry file each; the next launch finds every pipeline from it and writes them in its
//! pauses, or, with no pause to write them in, leaves the file as it found it; the exit path
//! does the same; `pipekeep clear` takes the file too.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);
const PIPELINES: u64 = 300;
const ARGS: [&str; 6] = ["--compute", "300", "--graphics", "0", "--threads", "2"];

fn run(tmp: &Path, hold: bool, extra: &[&str]) -> Run {
    let app = App::new(Driver::Radv, tmp)
        .with_layer()
        .args(&ARGS)
        .args(extra);
    let app = if hold {
        app.env("PIPEKEEP_TEST_HOLD_WRITES", "1")
    } else {
        app
    };
    let run = app.run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    run
}

fn waiting_files(store: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![store.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".waiting") {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_busy_first_launch_leaves_its_entries_in_one_file_and_the_next_finds_every_pipeline() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let cold = run(tmp.path(), true, &[]);
    let w = cold.watch();
    assert_eq!(
        (w.compiled, w.written),
        (PIPELINES, PIPELINES),
        "{}",
        cold.all()
    );
    assert_eq!(waiting_files(&store).len(), 1, "{}", cold.all());
    // (An application thread that finds the queue's lock held a moment writes its own inline.)
    let files = entries(&store).len() as u64;
    assert!(files < PIPELINES / 4, "few entry files yet: {files}");
    // `pipekeep list` counts them where they wait.
    let list = App::tool(Driver::Radv, tmp.path())
        .args(&["list", "--json"])
        .run();
    assert!(list.ok, "{}", list.all());
    let listed: serde_json::Value = serde_json::from_str(list.stdout.trim()).unwrap();
    let waiting: u64 = listed["titles"][0]["identities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["waiting"].as_u64().unwrap())
        .sum();
    assert_eq!(waiting + files, PIPELINES, "{}", list.stdout);
    // A launch with no pause to write them in finds every pipeline and leaves the file as it
    // found it: before, it wrote the same entries into a file of its own at its end.
    // It carries their use as its stamp, for the bound.
    let left = waiting_files(&store);
    let before = std::fs::metadata(&left[0]).unwrap();
    let short = run(tmp.path(), true, &[]);
    let w = short.watch();
    assert_eq!((w.found, w.compiled), (PIPELINES, 0), "{}", short.all());
    assert_eq!(waiting_files(&store), left, "{}", short.all());
    let now = std::fs::metadata(&left[0]).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (now.ino(), now.len()),
        (before.ino(), before.len()),
        "not written again"
    );
    assert!(
        now.modified().unwrap() > before.modified().unwrap(),
        "stamped as used"
    );
    // Before: 300 entry files written at the device's end, one at a time.
    let warm = run(tmp.path(), false, &["--linger-ms", "1500"]);
    let w = warm.watch();
    assert_eq!((w.found, w.compiled), (PIPELINES, 0), "{}", warm.all());
    assert_eq!(
        entries(&store).len() as u64,
        PIPELINES,
        "written in its pauses"
    );
    assert!(waiting_files(&store).is_empty());
    let again = run(tmp.path(), false, &[]);
    assert_eq!(again.watch().found, PIPELINES, "{}", again.all());
}

#[test]
fn the_exit_path_leaves_them_too_and_clear_takes_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    run(tmp.path(), true, &["--no-destroy"]);
    let left = waiting_files(&store);
    assert_eq!(left.len(), 1);
    // A second such launch finds them all and, writing none, leaves the same file.
    let again = run(tmp.path(), true, &["--no-destroy"]);
    assert_eq!(again.watch().found, PIPELINES, "{}", again.all());
    assert_eq!(waiting_files(&store), left, "{}", again.all());
    let clear = App::tool(Driver::Radv, tmp.path()).args(&["clear"]).run();
    assert!(clear.ok, "{}", clear.all());
    assert!(waiting_files(&store).is_empty());
    let after = run(tmp.path(), false, &[]);
    assert_eq!(after.watch().compiled, PIPELINES, "{}", after.all());
}

/// Two launches that each die inside the driver loading an entry left waiting (the second
/// before its end could write the file anew) cost exactly those two entries: the opening after
/// the first takes the entry out of its file at once. Before, it was only passed over in that
/// launch, and the launch after the second, with no marker naming it any more, loaded it again
/// (found 299, compiled 1).
#[test]
fn two_launches_dying_in_loads_of_entries_left_waiting_cost_those_two_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    // One thread: no entry is written inline, and the first load is of an entry waiting.
    let one_thread = ["--compute", "300", "--graphics", "0", "--threads", "1"];
    let launch = |dies: bool| {
        let app = App::new(Driver::Radv, tmp.path())
            .with_layer()
            .args(&one_thread)
            .env("PIPEKEEP_TEST_HOLD_WRITES", "1");
        let app = if dies {
            app.env("PIPEKEEP_TEST_ABORT_IN_LOAD", "1")
        } else {
            app
        };
        let run = app.run_within(LIMIT);
        assert_eq!(run.ok, !dies, "{}", run.all());
        run
    };
    launch(false);
    assert_eq!(waiting_files(&store).len(), 1);
    assert!(entries(&store).is_empty(), "every entry waits");
    launch(true);
    launch(true);
    let after = launch(false);
    let w = after.watch();
    assert_eq!((w.found, w.compiled), (PIPELINES - 2, 2), "{}", after.all());
    assert_eq!(launch(false).watch().found, PIPELINES);
}

/// The bytes the bound counts under a store root: entries, pieces and waiting files.
fn counted_bytes(store: &Path) -> u64 {
    entries_and_pieces(store)
        .into_iter()
        .chain(waiting_files(store))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

/// The entries of a store root as `pipekeep list` counts them: files, and those left waiting.
fn listed_entries(tmp: &Path) -> u64 {
    let list = App::tool(Driver::Radv, tmp).args(&["list", "--json"]).run();
    assert!(list.ok, "{}", list.all());
    let listed: serde_json::Value = serde_json::from_str(list.stdout.trim()).unwrap();
    listed["titles"][0]["identities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["waiting"].as_u64().unwrap() + d["entries"].as_u64().unwrap())
        .sum()
}

/// The file of entries left waiting counts within the title's bound: the layer's pass (here as
/// `pipekeep prune` runs it) drops its entries one at a time, writing the file again, and the
/// next launch finds every entry the pass kept (under the default bound: one as tight would drop
/// more for the entries this launch writes). Before, the file stood outside the bound (pygfx on
/// RADV: 5.1 MB kept under a bound of 3.3 MB).
#[test]
fn the_waiting_file_counts_within_the_bound_and_the_next_launch_finds_what_it_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    run(tmp.path(), true, &[]);
    assert_eq!(waiting_files(&store).len(), 1);
    let record = store.join("pipekeep-testapp/record.foz");
    let bound = bound_leaving(counted_bytes(&store) / 2, &record);
    let prune = App::tool(Driver::Radv, tmp.path())
        .args(&["prune", "--max-bytes", &bound.to_string(), "--json"])
        .run();
    assert!(prune.ok, "{}", prune.all());
    let record_bytes = std::fs::metadata(&record).map_or(0, |m| m.len());
    let kept_bytes = counted_bytes(&store) + record_bytes.min(bound / 4);
    assert!(
        kept_bytes <= bound,
        "{kept_bytes} kept in a bound of {bound}"
    );
    assert_eq!(
        waiting_files(&store).len(),
        1,
        "written again without its oldest entries, not dropped whole\n{}",
        prune.stdout
    );
    let kept = listed_entries(tmp.path());
    assert!(kept > 0 && kept < PIPELINES, "{kept} kept");
    let next = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .args(&ARGS)
        .env("PIPEKEEP_TEST_HOLD_WRITES", "1")
        .run_within(LIMIT);
    assert!(next.ok, "{}", next.all());
    let w = next.watch();
    assert_eq!(
        (w.found, w.compiled),
        (kept, PIPELINES - kept),
        "{}",
        next.all()
    );
}

/// `pipekeep verify` checks each record of a waiting file as the next opening would, and
/// `--fix` writes the file again without its damage, sealed: the next launch finds every sound
/// entry with no line of damage. Before, verify read no waiting file (a file damaged in two
/// places: "0 bad", exit 0).
#[test]
fn verify_checks_the_entries_left_waiting_and_fix_writes_the_file_again_without_its_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    run(tmp.path(), true, &[]);
    let mut waiting_now = waiting_files(&store);
    assert_eq!(waiting_now.len(), 1);
    let file = waiting_now.pop().unwrap();
    let verify = |args: &[&str]| {
        let run = App::tool(Driver::Radv, tmp.path())
            .args(&[&["verify", "--json"], args].concat())
            .run();
        let j: serde_json::Value = serde_json::from_str(run.stdout.trim())
            .unwrap_or_else(|e| panic!("{e}\n{}", run.all()));
        (run.code, j["waiting"].clone())
    };
    let (code, sound) = verify(&[]);
    let waiting = sound["entries"].as_u64().unwrap();
    assert_eq!(code, Some(0), "{sound}");
    assert_eq!(waiting + entries(&store).len() as u64, PIPELINES, "{sound}");
    assert_eq!(sound["files"][0]["seal"], "held", "{sound}");

    // Packed on disk (the test app's RADV data compresses): the file it stands for is damaged
    // and written back as it is (a file of either form is read). The last byte of the second
    // record's entry flipped (docs/FORMAT.md: magic and seal, then each record's stamp, key and
    // length before its entry), and the file cut short in its last.
    let on_disk = std::fs::read(&file).unwrap();
    let mut bytes = pipekeep::store::waiting::unpack(on_disk.clone()).unwrap();
    assert!(
        on_disk.starts_with(b"PKWAIT04") && on_disk.len() * 2 < bytes.len(),
        "packed: {} bytes for {}",
        on_disk.len(),
        bytes.len()
    );
    let len_at = |at: usize| u64::from_le_bytes(bytes[at + 40..at + 48].try_into().unwrap());
    let second = 40 + 48 + len_at(40) as usize;
    let flip = second + 48 + len_at(second) as usize - 1;
    bytes[flip] ^= 0x40;
    bytes.truncate(bytes.len() - 10);
    std::fs::write(&file, &bytes).unwrap();
    let (code, damaged) = verify(&[]);
    assert_eq!(code, Some(1), "{damaged}");
    let f = &damaged["files"][0];
    assert_eq!(
        (f["seal"].as_str(), f["whole"].as_bool()),
        (Some("failed"), Some(false)),
        "{damaged}"
    );
    assert_eq!(f["bad_entries"].as_array().unwrap().len(), 1, "{damaged}");
    assert_eq!(damaged["entries"].as_u64(), Some(waiting - 2), "{damaged}");

    // Named as no opening takes it (an ABI neither 4 nor 8), a link, and a packed file whose
    // frame states more than a waiting file may hold (a zstd frame head with an 8-byte content
    // size, 80 MiB + 1; 37 bytes on disk): each reported, the last with what it states, and
    // removed by the fix.
    let dir = file.parent().unwrap();
    std::fs::copy(&file, dir.join("zz-1.waiting")).unwrap();
    std::os::unix::fs::symlink(&file, dir.join("zz-2-8.waiting")).unwrap();
    let stating = (80u64 << 20) + 1;
    let head = [&[0x28, 0xb5, 0x2f, 0xfd, 0xe0][..], &stating.to_le_bytes()].concat();
    std::fs::write(
        dir.join("zz-3-8.waiting"),
        [&b"PKWAIT04"[..], &head, &[0; 16]].concat(),
    )
    .unwrap();
    let (code, odd) = verify(&[]);
    assert_eq!(code, Some(1), "{odd}");
    let reasons: Vec<&str> = odd["files"].as_array().unwrap()[1..]
        .iter()
        .map(|f| f["error"]["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["not-ours", "not-a-file", "too-large"], "{odd}");
    assert_eq!(
        odd["files"][3]["error"]["detail"],
        "37 bytes on disk, stating 83886081 unpacked, more than a waiting file may hold",
        "{odd}"
    );

    let (code, fixed) = verify(&["--fix"]);
    assert_eq!(code, Some(1), "what it found is still reported: {fixed}");
    for f in fixed["files"].as_array().unwrap() {
        assert_eq!(f["fixed"], true, "{fixed}");
    }
    assert_eq!(waiting_files(&store), std::slice::from_ref(&file));
    let (code, after) = verify(&[]);
    assert_eq!(code, Some(0), "{after}");
    assert_eq!(after["files"][0]["seal"], "held", "{after}");
    assert_eq!(after["entries"].as_u64(), Some(waiting - 2), "{after}");

    let next = run(tmp.path(), true, &[]);
    let w = next.watch();
    assert_eq!((w.found, w.compiled), (PIPELINES - 2, 2), "{}", next.all());
    assert!(!next.stderr.contains("WARN"), "{}", next.all());
}
