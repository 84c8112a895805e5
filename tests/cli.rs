//! The `pipekeep` command on a store the test app made through the layer: list counts, verify
//! finds each damage and --fix drops exactly those, prune keeps the stamp order, clear removes
//! only what is ours, stats shows a cold then a warm run, and --json carries the same figures.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;

fn make_store(tmp: &Path) {
    for _ in 0..2 {
        let run = App::new(Driver::Radv, tmp)
            .with_layer()
            .args(&IN_ORDER)
            .run();
        assert!(run.ok, "{}", run.all());
    }
}

fn tool(tmp: &Path, args: &[&str]) -> Run {
    App::tool(Driver::Radv, tmp).args(args).run()
}

fn json(run: &Run) -> Value {
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}\n{}", run.all()))
}

#[test]
fn list_shows_the_titles_identities_counts_and_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path());
    let files = entries_and_pieces(&tmp.path().join("store"));
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    let j = json(&tool(tmp.path(), &["list", "--json"]));
    let id = &j["titles"][0]["identities"][0];
    assert_eq!(j["titles"][0]["title"], "pipekeep-testapp");
    assert_eq!(id["entries"].as_u64(), Some(12));
    assert_eq!(id["bytes"].as_u64(), Some(bytes));
    assert_eq!(id["vendor"], "AMD");
    assert_eq!(
        id["this_machine"],
        Value::Null,
        "no Vulkan instance unless asked"
    );
    let text = tool(tmp.path(), &["list"]);
    assert!(
        text.ok && text.stdout.contains("12 entries") && text.stderr.is_empty(),
        "a listing reads files only, and says nothing of Mesa's\n{}",
        text.all()
    );
    let j = json(&tool(tmp.path(), &["list", "--json", "--devices"]));
    assert_eq!(j["titles"][0]["identities"][0]["this_machine"], true);
    let text = tool(tmp.path(), &["list", "--devices"]);
    assert!(
        text.ok && text.stdout.contains("a device of this machine"),
        "{}",
        text.all()
    );
}

#[test]
fn verify_finds_each_damage_and_fix_drops_exactly_those() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path());
    let files = entries(&tmp.path().join("store"));
    let clean = tool(tmp.path(), &["verify"]);
    assert!(
        clean.ok && clean.stdout.contains("12 good, 0 bad"),
        "{}",
        clean.all()
    );
    let mut flipped = std::fs::read(&files[0]).unwrap();
    *flipped.last_mut().unwrap() ^= 1;
    std::fs::write(&files[0], flipped).unwrap();
    let whole = std::fs::read(&files[1]).unwrap();
    std::fs::write(&files[1], &whole[..whole.len() - 10]).unwrap();
    let mut extended = std::fs::read(&files[2]).unwrap();
    extended.extend_from_slice(b"more");
    std::fs::write(&files[2], extended).unwrap();

    let bad = tool(tmp.path(), &["verify", "--json"]);
    assert_eq!(bad.code, Some(1), "{}", bad.all());
    let j = json(&bad);
    let reasons: Vec<&str> = j["bad"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["reason"].as_str().unwrap())
        .collect();
    assert_eq!(j["good"], 9);
    let mut sorted = reasons.clone();
    sorted.sort();
    assert_eq!(sorted, ["corrupt", "long", "short"]);
    let text = tool(tmp.path(), &["verify"]);
    assert!(text.stdout.contains("9 good, 3 bad"), "{}", text.all());

    // The run's order of use, damaged, is reported and dropped too.
    let order = files[0].parent().unwrap().join("use-order");
    let mut bytes = std::fs::read(&order).unwrap();
    bytes[20] ^= 1;
    std::fs::write(&order, bytes).unwrap();
    let j = json(&tool(tmp.path(), &["verify", "--json"]));
    assert_eq!(j["bad_use_orders"].as_array().unwrap().len(), 1, "{j}");
    assert!(tool(tmp.path(), &["verify"])
        .stdout
        .contains("bad use-order (its BLAKE3 hash does not match its bytes)"));

    let fixed = tool(tmp.path(), &["verify", "--fix"]);
    assert_eq!(fixed.code, Some(1));
    let left = entries(&tmp.path().join("store"));
    assert_eq!(
        left,
        files[3..].to_vec(),
        "exactly the three bad ones are gone"
    );
    assert!(!order.exists(), "the damaged use order is gone");
    assert!(tool(tmp.path(), &["verify"]).ok);
}

#[test]
fn prune_keeps_exactly_what_the_stamp_order_says() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path());
    let stamped = entries_by_use(&tmp.path().join("store"));
    let first_four: Vec<_> = stamped.iter().take(4).map(|e| e.0.clone()).collect();
    // The stamp order alone: the title's record (which counts within the bound, at most its
    // share, and is compacted to it; the record tests show that) is removed, and the bound
    // leaves the first four entries exactly their bytes.
    std::fs::remove_file(tmp.path().join("store/pipekeep-testapp/record.foz")).unwrap();
    let record = 0;
    let bound = bytes_with_pieces(&first_four);
    let dry = json(&tool(
        tmp.path(),
        &[
            "prune",
            "--max-bytes",
            &bound.to_string(),
            "--dry-run",
            "--json",
        ],
    ));
    let dropped_entries = dry["titles"][0]["dropped_entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n.as_str().unwrap().ends_with(".entry"))
        .count();
    assert_eq!(dropped_entries, 8);
    assert_eq!(dry["titles"][0]["record_bytes"].as_u64(), Some(record));
    assert_eq!(
        entries(&tmp.path().join("store")).len(),
        12,
        "a dry run drops nothing"
    );
    let run = tool(tmp.path(), &["prune", "--max-bytes", &bound.to_string()]);
    assert!(run.ok, "{}", run.all());
    let mut expected: Vec<_> = stamped.iter().take(4).map(|e| e.0.clone()).collect();
    expected.sort();
    assert_eq!(entries(&tmp.path().join("store")), expected);
}

#[test]
fn clear_removes_only_what_is_ours() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path());
    let id_dir = entries(&tmp.path().join("store"))[0]
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::write(id_dir.join("my-notes.txt"), b"keep me").unwrap();
    std::fs::write(
        tmp.path().join("store/pipekeep-testapp/readme"),
        b"keep me too",
    )
    .unwrap();
    let j = json(&tool(tmp.path(), &["clear", "--json"]));
    assert_eq!(j["titles"][0]["removed"], 12);
    assert!(entries(&tmp.path().join("store")).is_empty());
    assert!(id_dir.join("my-notes.txt").exists());
    assert!(tmp.path().join("store/pipekeep-testapp/readme").exists());
    assert!(tmp
        .path()
        .join("store/pipekeep-testapp/runs.jsonl")
        .exists());
}

#[test]
fn stats_shows_a_cold_then_a_warm_run_and_plots_it() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path());
    let plot = tmp.path().join("runs.svg");
    let j = json(&tool(tmp.path(), &["stats", "--json"]));
    let runs = j["titles"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0]["compiled"].as_u64(), runs[0]["found"].as_u64()),
        (Some(12), Some(0))
    );
    assert_eq!(
        (runs[1]["compiled"].as_u64(), runs[1]["found"].as_u64()),
        (Some(0), Some(12))
    );
    let text = tool(tmp.path(), &["stats", "--plot", plot.to_str().unwrap()]);
    assert!(text.ok && text.stdout.contains("2 runs"), "{}", text.all());
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    // A bar a run, the warm run's found share over it, and what each found.
    assert_eq!(bars(&svg, COMPILED).len(), 2, "{svg}");
    assert_eq!(bars(&svg, FOUND).len(), 1, "{svg}");
    assert!(
        svg.contains("0/12 found") && svg.contains("12/12 found"),
        "{svg}"
    );
    assert!(svg.contains("named by the entries: "), "{svg}");
}

/// The plot's colours of a run's compiled and found shares (as plotters' SVG writes them).
const COMPILED: &str = "#E8913A";
const FOUND: &str = "#3AA655";

/// The heights of the plot's rectangles filled with `colour`, in the order drawn.
fn bars(svg: &str, colour: &str) -> Vec<f64> {
    rect_attribute(svg, colour, "height")
}

/// The widths of the plot's rectangles filled with `colour`, in the order drawn.
fn bar_widths(svg: &str, colour: &str) -> Vec<f64> {
    rect_attribute(svg, colour, "width")
}

fn rect_attribute(svg: &str, colour: &str, attribute: &str) -> Vec<f64> {
    svg.lines()
        .filter(|l| l.starts_with("<rect") && l.contains(&format!("fill=\"{colour}\"")))
        .map(|l| {
            let v = l.split(&format!(" {attribute}=\"")).nth(1).unwrap();
            v[..v.find('"').unwrap()].parse().unwrap()
        })
        .collect()
}

/// A history of runs of 12 pipelines for the title `game` under `tmp`: each `(found, total_ms)`,
/// a second apart.
fn history(tmp: &Path, runs: &[(u64, f64)]) {
    use pipekeep::watch::{append_run, RunRecord, Tally};
    let title = tmp.join("store/game");
    std::fs::create_dir_all(title.join("host-pipelines")).unwrap();
    for (n, &(found, total_ms)) in runs.iter().enumerate() {
        let tally = Tally {
            built: 12,
            found,
            compiled: 12 - found,
            total_ms,
            ..Tally::default()
        };
        let run = RunRecord {
            when: 1_764_633_600.0 + n as f64,
            device: "a device".into(),
            identity: "an identity".into(),
            backend: "binary".into(),
            tally,
        };
        append_run(&title.join("runs.jsonl"), &run).unwrap();
    }
}

/// A user's first plot, after one run: its bar drawn, as wide as the plot allows.
#[test]
fn stats_plots_a_single_run_as_one_bar() {
    let tmp = tempfile::tempdir().unwrap();
    history(tmp.path(), &[(0, 40.0)]);
    let plot = tmp.path().join("runs.svg");
    let text = tool(tmp.path(), &["stats", "--plot", plot.to_str().unwrap()]);
    assert!(text.ok && text.stdout.contains("1 runs"), "{}", text.all());
    let svg = std::fs::read_to_string(&plot).unwrap();
    let widths = bar_widths(&svg, COMPILED);
    assert_eq!(widths.len(), 1, "{svg}");
    assert!(widths[0] > 100.0, "{widths:?}\n{svg}");
    assert!(svg.contains("0/12 found"), "{svg}");
}

#[test]
fn stats_plots_every_run_of_the_history_with_its_found_share() {
    let tmp = tempfile::tempdir().unwrap();
    history(tmp.path(), &[(0, 40.0), (12, 4.0), (6, 20.0)]);
    let plot = tmp.path().join("runs.svg");
    let text = tool(tmp.path(), &["stats", "--plot", plot.to_str().unwrap()]);
    assert!(text.ok && text.stdout.contains("3 runs"), "{}", text.all());
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
    assert!(svg.contains("pipeline creation per run (ms)"), "{svg}");
    assert!(svg.contains("max 40.0 ms"), "{svg}");
    // Each run's bar as tall as its time, and the found share of those that found any.
    let compiled = bars(&svg, COMPILED);
    assert_eq!(compiled.len(), 3, "{svg}");
    assert!(
        (compiled[0] / compiled[1] - 10.0).abs() < 0.5,
        "{compiled:?}"
    );
    assert!(
        (compiled[0] / compiled[2] - 2.0).abs() < 0.1,
        "{compiled:?}"
    );
    let found = bars(&svg, FOUND);
    assert_eq!(found.len(), 2, "{svg}");
    assert!(
        (found[0] - compiled[1]).abs() <= 1.0,
        "{found:?} {compiled:?}"
    );
    assert!(
        (found[1] * 2.0 - compiled[2]).abs() <= 1.0,
        "{found:?} {compiled:?}"
    );
    for label in ["0/12 found", "12/12 found", "6/12 found"] {
        assert!(svg.contains(label), "{label}: {svg}");
    }
    for run in 1..=3 {
        assert!(
            svg.contains(&format!("\n{run}\n</text>")),
            "run {run}: {svg}"
        );
    }
}

#[test]
fn bad_input_gets_a_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tool(tmp.path(), &["list", "--dir", "/nonexistent/library"]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .contains("no pipeline library at /nonexistent/library"),
        "{}",
        run.all()
    );
    make_store(tmp.path());
    let run = tool(tmp.path(), &["verify", "--title", "nope"]);
    assert!(run.stderr.contains("no title \"nope\""), "{}", run.all());
}

#[test]
fn where_reports_the_root_the_manifest_and_whether_the_layer_is_on() {
    let tmp = tempfile::tempdir().unwrap();
    let j = json(
        &App::tool(Driver::Radv, tmp.path())
            .with_layer()
            .args(&["where", "--json"])
            .run(),
    );
    assert_eq!(j["root"], tmp.path().join("store").to_str().unwrap());
    assert_eq!(j["enabled_here"], true);
    assert_eq!(j["manifests"][0]["kind"], "explicit");
    let off = json(&tool(tmp.path(), &["where", "--json"]));
    assert_eq!(off["enabled_here"], false);
}

#[test]
fn list_and_stats_take_a_short_or_empty_entry_without_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path());
    let all = entries(&tmp.path().join("store"));
    std::fs::write(&all[0], b"").unwrap();
    std::fs::write(&all[1], b"PIPEKEE").unwrap();
    for args in [
        &["list"][..],
        &["list", "--json"],
        &["stats"],
        &["stats", "--json"],
    ] {
        let run = tool(tmp.path(), args);
        assert!(
            run.ok && !run.stderr.contains("panicked"),
            "{args:?}\n{}",
            run.all()
        );
    }
}

/// Issue 31, item 9: `clear` beside a running application removes by the layer's own rule: a
/// loading marker or a write in progress that a live process holds locked stays (with the entry
/// the marker names, and the directory they stand in); every other file of ours goes. It removed
/// them all, and the directory with them.
#[test]
fn clear_leaves_what_a_live_process_holds() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path());
    let all = entries(&tmp.path().join("store"));
    let id_dir = all[0].parent().unwrap().to_path_buf();
    let loading = all[0].file_name().unwrap().to_str().unwrap().to_owned();
    // A live loader's marker naming the first entry, and a live writer's temporary file: both
    // held locked by this process, as the layer holds them.
    let marker = id_dir.join("4242-4243.loading");
    let tmp_file = id_dir.join(format!("{:032x}-{:032x}.entry.tmp", 7, 7));
    let held: Vec<_> = [&marker, &tmp_file]
        .iter()
        .map(
            |p| match pipekeep::store::files::lock_path(p, true).unwrap() {
                pipekeep::store::files::Locked::Held(f) => f,
                _ => panic!("locked"),
            },
        )
        .collect();
    std::fs::write(&marker, loading.as_bytes()).unwrap();
    let j = json(&tool(tmp.path(), &["clear", "--json"]));
    assert_eq!(j["titles"][0]["removed"], 11, "{j}");
    assert!(
        marker.exists() && tmp_file.exists(),
        "a live process's files went"
    );
    assert_eq!(entries(&tmp.path().join("store")), vec![all[0].clone()]);
    drop(held);
    // Let go: the next clear takes them.
    let j = json(&tool(tmp.path(), &["clear", "--json"]));
    assert_eq!(j["titles"][0]["removed"], 1, "{j}");
    assert!(!id_dir.exists());
}

/// Issue 31: `verify` reports a record past its share of the bound (a quarter of
/// `PIPEKEEP_MAX_BYTES`), and `--fix` compacts it to its share.
#[test]
fn verify_reports_a_record_past_its_share_and_fix_compacts_it() {
    let tmp = tempfile::tempdir().unwrap();
    make_store(tmp.path());
    let record = tmp.path().join("store/pipekeep-testapp/record.foz");
    let bytes = std::fs::metadata(&record).unwrap().len();
    // A bound whose quarter is half the record.
    let bound = (bytes * 2).to_string();
    let verify = |fix: bool| {
        let mut args = vec!["verify", "--json"];
        if fix {
            args.push("--fix");
        }
        let run = App::tool(Driver::Radv, tmp.path())
            .env("PIPEKEEP_MAX_BYTES", &bound)
            .args(&args)
            .run();
        (run.ok, json(&run))
    };
    let (ok, j) = verify(false);
    assert!(!ok, "{j}");
    assert_eq!(j["bad_records"][0]["over_share"], true, "{j}");
    let (_, j) = verify(true);
    assert!(j["bad_records"][0]["compacted"].is_object(), "{j}");
    assert!(std::fs::metadata(&record).unwrap().len() <= bytes / 2);
    let (ok, j) = verify(false);
    assert!(ok, "{j}");
}
