//! The library's bound (`PIPEKEEP_LIBRARY_MAX_BYTES`) through the real loader on RADV null:
//! three titles past a bound of about two titles' size, the least recently used one shrinks
//! first, its oldest entries first and its record last; a title running now (the least recently
//! used before it started) keeps its entries while another title's process prunes the library;
//! `pipekeep prune --library` leaves what the layer's own pass leaves.

mod common;
use common::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const WORK: [&str; 6] = ["--compute", "16", "--graphics", "4", "--threads", "1"];

/// The test app as `title`, the library bound `library_max` where given.
fn app(tmp: &Path, title: &str, library_max: Option<u64>) -> App {
    let app = App::new(Driver::Radv, tmp)
        .with_layer()
        .args(&WORK)
        .env("PIPEKEEP_TITLE", title);
    match library_max {
        Some(max) => app.env("PIPEKEEP_LIBRARY_MAX_BYTES", max.to_string()),
        None => app,
    }
}

/// One launch of the test app as `title`, the library bound `library_max` where given.
fn launch(tmp: &Path, title: &str, library_max: Option<u64>) -> Run {
    let run = app(tmp, title, library_max).run();
    assert!(run.ok, "{}", run.all());
    run
}

/// Every file the library's bound counts of a title, by its path under the title, with its
/// size and stamp: entries, pieces and the record.
fn files_of(store: &Path, title: &str) -> Vec<(PathBuf, u64, SystemTime)> {
    let dir = store.join(title);
    let record = dir.join("record.foz");
    entries_and_pieces(&dir)
        .into_iter()
        .chain(record.exists().then_some(record))
        .map(|p| {
            let m = std::fs::metadata(&p).unwrap();
            let rel = p.strip_prefix(&dir).unwrap().to_path_buf();
            (rel, m.len(), m.modified().unwrap())
        })
        .collect()
}

fn bytes_of(store: &Path, title: &str) -> u64 {
    files_of(store, title).iter().map(|f| f.1).sum()
}

fn record_bytes(store: &Path, title: &str) -> u64 {
    std::fs::metadata(store.join(title).join("record.foz")).map_or(0, |m| m.len())
}

fn names(store: &Path, title: &str) -> BTreeSet<PathBuf> {
    files_of(store, title).into_iter().map(|f| f.0).collect()
}

/// Three titles made cold one after the other: "first" is the least recently used.
fn three_titles(tmp: &Path) -> PathBuf {
    for title in ["first", "second", "third"] {
        let run = launch(tmp, title, None);
        assert!(run.watch().compiled > 0, "{}", run.all());
    }
    tmp.join("store")
}

#[test]
fn past_the_library_bound_the_least_recently_used_title_shrinks_first_its_record_last() {
    let tmp = tempfile::tempdir().unwrap();
    let store = three_titles(tmp.path());
    let (second, third) = (names(&store, "second"), names(&store, "third"));
    let kept = bytes_of(&store, "second") + bytes_of(&store, "third");
    let first = files_of(&store, "first");
    let record = record_bytes(&store, "first");
    let entries: u64 = bytes_of(&store, "first") - record;
    assert!(record > 0 && entries > 0, "{first:?}");

    // About two titles and a half: "first" gives up half its entries, the oldest stamps first,
    // and keeps its record; the others lose nothing.
    let bound = kept + record + entries / 2;
    let run = launch(tmp.path(), "third", Some(bound));
    assert_eq!(names(&store, "second"), second, "{}", run.all());
    assert_eq!(names(&store, "third"), third, "{}", run.all());
    let left = names(&store, "first");
    assert!(left.contains(Path::new("record.foz")), "{}", run.all());
    assert!(bytes_of(&store, "first") <= record + entries / 2);
    assert!(left.len() > 1, "some of its entries stay: {left:?}");
    let left = &left;
    let stamp = |keep: bool| {
        first
            .iter()
            .filter(|f| f.0.extension().is_some_and(|e| e == "entry"))
            .filter(move |f| left.contains(&f.0) == keep)
            .map(|f| f.2)
    };
    let newest_dropped = stamp(false).max().expect("entries were dropped");
    assert!(
        stamp(true).all(|kept| kept >= newest_dropped),
        "the oldest entries go first"
    );

    // Two titles' size, less a byte: every entry of "first", then its record.
    let bound = kept + record - 1;
    let run = launch(tmp.path(), "third", Some(bound));
    assert!(names(&store, "first").is_empty(), "{}", run.all());
    assert_eq!(names(&store, "second"), second);
    assert_eq!(names(&store, "third"), third);
    assert!(
        run.stderr.contains("library brought within its bound"),
        "{}",
        run.all()
    );
}

#[test]
fn a_title_running_now_keeps_its_entries_when_another_title_prunes_the_library() {
    let tmp = tempfile::tempdir().unwrap();
    // "a" is the least recently used of the three before it starts again.
    for title in ["a", "oldest", "b"] {
        launch(tmp.path(), title, None);
    }
    let store = tmp.path().join("store");
    let (a, b) = (names(&store, "a"), names(&store, "b"));
    let oldest = bytes_of(&store, "oldest");
    let oldest_record = record_bytes(&store, "oldest");
    // The excess lies within half the entries of the title used least recently but for "a".
    let bound = bytes_of(&store, "a")
        + bytes_of(&store, "b")
        + oldest_record
        + (oldest - oldest_record) / 2;
    // "a" runs: it opens its store, builds, and waits to build more until told to.
    let go = tmp.path().join("go");
    let runs = store.join("a").join("runs.jsonl");
    let before = std::fs::metadata(&runs).unwrap().modified().unwrap();
    let mut a_running = app(tmp.path(), "a", Some(bound))
        .args(&["--again-when-exists", go.to_str().unwrap()])
        .spawn();
    let marked = || std::fs::metadata(&runs).unwrap().modified().unwrap() > before;
    let started = std::time::Instant::now();
    while !marked() && started.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(marked(), "a's opening marks it used");
    // Before: "b"'s pass took "a" for the least recently used title and shrank it under it.
    let b_run = launch(tmp.path(), "b", Some(bound));
    std::fs::write(&go, b"").unwrap();
    assert!(a_running.wait().unwrap().success());
    assert!(names(&store, "a").is_superset(&a), "a keeps all it kept");
    assert_eq!(
        names(&store, "b"),
        b,
        "b keeps all it kept\n{}",
        b_run.all()
    );
    let left = names(&store, "oldest");
    assert!(
        left.contains(Path::new("record.foz")) && bytes_of(&store, "oldest") < oldest,
        "the least recently used title not running gave up its entries, its record last: {left:?}"
    );
}

#[test]
fn prune_library_leaves_what_the_layers_own_pass_leaves() {
    let tmp = tempfile::tempdir().unwrap();
    let store = three_titles(tmp.path());
    let copy = tmp.path().join("copy");
    let cp = std::process::Command::new("cp")
        .arg("-a")
        .arg(&store)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(cp.success());
    let bound = bytes_of(&store, "second")
        + bytes_of(&store, "third")
        + record_bytes(&store, "first")
        + (bytes_of(&store, "first") - record_bytes(&store, "first")) / 2;

    launch(tmp.path(), "third", Some(bound));
    let max = bound.to_string();
    let dir = copy.to_str().unwrap();
    let pruned = App::tool(Driver::Radv, tmp.path())
        .args(&[
            "prune",
            "--library",
            "--library-max-bytes",
            &max,
            "--dir",
            dir,
            "--json",
        ])
        .run();
    assert!(pruned.ok, "{}", pruned.all());
    let report: serde_json::Value = serde_json::from_str(pruned.stdout.trim()).unwrap();
    assert!(
        report["library"]["bytes"].as_u64().unwrap() <= bound,
        "{report}"
    );
    assert_eq!(report["library"]["steps"][0]["title"], "first", "{report}");
    for title in ["first", "second", "third"] {
        assert_eq!(names(&copy, title), names(&store, title), "{title}");
    }
    assert!(names(&store, "first").len() < names(&store, "second").len());

    // Each title's last use and the library's total against its bound, as list shows them.
    let listed = App::tool(Driver::Radv, tmp.path())
        .env("PIPEKEEP_LIBRARY_MAX_BYTES", &max)
        .args(&["list", "--json"])
        .run();
    let listed: serde_json::Value = serde_json::from_str(listed.stdout.trim()).unwrap();
    assert_eq!(listed["library"]["max_bytes"].as_u64(), Some(bound));
    let titles = listed["titles"].as_array().unwrap();
    let used = |t: &str| {
        titles.iter().find(|x| x["title"] == t).unwrap()["last_use"]
            .as_f64()
            .unwrap()
    };
    assert!(used("first") < used("second") && used("second") < used("third"));
    let total: u64 = titles.iter().map(|t| t["bytes"].as_u64().unwrap()).sum();
    assert_eq!(listed["library"]["bytes"].as_u64(), Some(total));
}
