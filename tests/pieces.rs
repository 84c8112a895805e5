//! Shared pieces through the real loader on RADV (null hardware): bytes entries share are kept
//! once, a warm run finds every pipeline from them, a missing or damaged piece costs its entries a
//! compile (and is written again), the bound counts pieces, entries of the previous formats (and
//! pieces stored before compression) are still found, four processes share one store, and processes killed while writing leave only
//! whole entries. The `binary` backend makes a stage binary a piece once two entries carry it:
//! the test app's pipelines share no stage, so these tests make every binary a piece
//! (`PIPEKEEP_TEST_PIECES_ALWAYS`), and one test replays a database whose pipelines do share
//! stages. The `cache` backend cuts its payloads into chunks (from a few KiB here: RADV's
//! one-pipeline caches are smaller than the threshold NVIDIA's data set).

mod common;
use common::*;
use std::path::Path;

const MIX: [&str; 8] = [
    "--compute",
    "24",
    "--graphics",
    "12",
    "--threads",
    "2",
    "--batch",
    "4",
];
const PIPELINES: u64 = 36;

fn app(tmp: &Path, backend: &str, extra_env: &[(&str, &str)]) -> App {
    let mut app = App::new(Driver::Radv, tmp)
        .with_layer()
        .env("PIPEKEEP_BACKEND", backend)
        .env("PIPEKEEP_TEST_CHUNKED_FROM", "1024")
        .env("PIPEKEEP_TEST_PIECES_ALWAYS", "1")
        .args(&MIX);
    for (k, v) in extra_env {
        app = app.env(k, v);
    }
    app
}

fn run(tmp: &Path, backend: &str, extra_env: &[(&str, &str)]) -> Run {
    let run = app(tmp, backend, extra_env).run();
    assert!(run.ok, "{}", run.all());
    run
}

fn store(tmp: &Path) -> std::path::PathBuf {
    tmp.join("store")
}

fn tool_json(tmp: &Path, args: &[&str]) -> serde_json::Value {
    let run = App::tool(Driver::Radv, tmp).args(args).run();
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}\n{}", run.all()))
}

#[test]
fn both_backends_keep_shared_bytes_once_and_a_warm_run_finds_every_pipeline() {
    for backend in ["binary", "cache"] {
        let tmp = tempfile::tempdir().unwrap();
        let cold = run(tmp.path(), backend, &[]);
        let w = cold.watch();
        assert_eq!(
            (w.built, w.written),
            (PIPELINES, PIPELINES),
            "{}",
            cold.all()
        );
        let pieces = pieces(&store(tmp.path()));
        assert!(!pieces.is_empty(), "{backend}: no pieces written");
        let warm = run(tmp.path(), backend, &[]);
        let w = warm.watch();
        assert_eq!(
            (w.built, w.found, w.compiled),
            (PIPELINES, PIPELINES, 0),
            "{backend}\n{}",
            warm.all()
        );
        let verified = tool_json(tmp.path(), &["verify", "--json"]);
        assert_eq!(verified["good"], PIPELINES, "{verified}");
        assert_eq!(verified["pieces_checked"], pieces.len(), "{verified}");
        let stats = tool_json(tmp.path(), &["stats", "--json"]);
        let kept = &stats["titles"][0]["store"];
        assert_eq!(kept["pieces"], pieces.len(), "{stats}");
        assert!(
            kept["named_bytes"].as_u64() > Some(0),
            "the entries name their payloads: {stats}"
        );
    }
}

/// Something done to a piece file between runs.
type Harm = fn(&Path);

#[test]
fn a_missing_or_damaged_piece_costs_its_entries_a_compile_and_is_written_again() {
    let tmp = tempfile::tempdir().unwrap();
    run(tmp.path(), "binary", &[]);
    // One harm at a time: an entry naming both a missing and a damaged piece is dropped for the
    // first it meets, and would hide the other's reason.
    let harms: [(&str, Harm); 2] = [
        ("missing-piece", |piece| {
            std::fs::remove_file(piece).unwrap()
        }),
        ("corrupt-piece", |piece| {
            let mut bytes = std::fs::read(piece).unwrap();
            bytes[0] ^= 0x40;
            std::fs::write(piece, bytes).unwrap();
        }),
    ];
    for (reason, harm) in harms {
        let pieces = pieces(&store(tmp.path()));
        assert!(!pieces.is_empty());
        harm(&pieces[0]);

        let harmed = run(tmp.path(), "binary", &[]);
        let w = harmed.watch();
        assert_eq!(w.built, PIPELINES, "{}", harmed.all());
        assert!(w.found < PIPELINES, "{reason}: an entry was served");
        assert!(
            harmed.stderr.contains(&format!("reason={reason}")),
            "{}",
            harmed.all()
        );
        assert_eq!(w.found + w.compiled, PIPELINES);
        let next = run(tmp.path(), "binary", &[]);
        let w = next.watch();
        assert_eq!(
            (w.found, w.compiled),
            (PIPELINES, 0),
            "{reason}: written again with its pieces\n{}",
            next.all()
        );
    }
}

#[test]
fn the_bound_counts_every_piece_once_and_what_it_keeps_is_whole() {
    let tmp = tempfile::tempdir().unwrap();
    run(tmp.path(), "cache", &[]);
    let all = entries_and_pieces(&store(tmp.path()));
    let total: u64 = all
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    // The title's record counts within the bound too, at most its share (a quarter).
    let record = std::fs::metadata(tmp.path().join("store/pipekeep-testapp/record.foz"))
        .map_or(0, |m| m.len());
    let max = record + total / 2;
    let bound = max.to_string();
    let bounded = run(tmp.path(), "cache", &[("PIPEKEEP_MAX_BYTES", &bound)]);
    assert!(bounded.watch().found > 0, "{}", bounded.all());
    // Brought within the bound at opening, pieces counted once (the run then writes again what
    // it misses, and the bound is checked again at every quarter of it written). A piece the run
    // stamps while the bound is checked on the opening thread stays: the bound may end above by
    // those.
    let opened = bounded
        .stderr
        .lines()
        .find(|l| l.contains("store brought within its bound"))
        .unwrap_or_else(|| panic!("no bound line\n{}", bounded.all()));
    let kept_at_opening: u64 = opened
        .split_whitespace()
        .find_map(|f| f.strip_prefix("kept_bytes="))
        .and_then(|v| v.parse().ok())
        .unwrap();
    let entries_room = max - record.min(max / 4);
    assert!(
        kept_at_opening - record <= entries_room + total / 8,
        "{opened}"
    );
    let verified = tool_json(tmp.path(), &["verify", "--json"]);
    assert_eq!(verified["bad"], serde_json::json!([]), "{verified}");
    let next = run(tmp.path(), "cache", &[("PIPEKEEP_MAX_BYTES", &bound)]);
    assert!(
        !next.stderr.contains("reason=missing-piece"),
        "the bound dropped a piece before the entries using it\n{}",
        next.all()
    );
}

#[test]
fn entries_of_the_previous_formats_are_still_found() {
    use pipekeep::store::envelope::{self, Body};
    use pipekeep::store::recipe::Part;

    let tmp = tempfile::tempdir().unwrap();
    // The cache backend below the chunking threshold: every payload stands whole in its entry.
    let cold = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .cache_backend()
        .args(&MIX)
        .run();
    assert!(cold.ok, "{}", cold.all());
    let files = entries(&store(tmp.path()));
    assert_eq!(files.len() as u64, PIPELINES);
    let mut packed = 0;
    for (i, path) in files.iter().enumerate() {
        let (identity, key) = identity_and_key_of(path);
        let bytes = std::fs::read(path).unwrap();
        let decoded = envelope::decode(&bytes, &identity, &key).unwrap();
        packed += usize::from(decoded.is_expanded());
        let Body::Whole(payload) = decoded.body() else {
            panic!("a small payload stands whole")
        };
        // Half as format 1 (the payload whole), half as format 2 (its parts, none packed).
        let old = match i % 2 {
            0 => envelope::encode_format_one(&identity, &key, decoded.kind, payload),
            _ => {
                envelope::encode_format_two(&identity, &key, decoded.kind, &[Part::Inline(payload)])
            }
        };
        assert!(old.len() >= bytes.len());
        std::fs::write(path, old).unwrap();
    }
    assert!(
        packed > 0,
        "no entry was packed: nothing read as it was before"
    );
    let warm = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .cache_backend()
        .args(&MIX)
        .run();
    let w = warm.watch();
    assert_eq!((w.found, w.compiled), (PIPELINES, 0), "{}", warm.all());
}

#[test]
fn pieces_stored_as_they_were_before_compression_are_still_found() {
    use pipekeep::store::envelope::{self, Body};

    let tmp = tempfile::tempdir().unwrap();
    run(tmp.path(), "binary", &[]);
    let kept = bytes_kept(&store(tmp.path()));
    // Each piece's file as it was written before compression: its bytes as they are.
    let mut framed = 0;
    for path in pieces(&store(tmp.path())) {
        let file = std::fs::read(&path).unwrap();
        let name =
            pipekeep::store::pieces::name_of_file(path.file_name().unwrap().to_str().unwrap())
                .unwrap();
        let bytes = pipekeep::store::pieces::content_of(file.clone(), &name).unwrap();
        framed += usize::from(bytes.len() > file.len());
        std::fs::write(&path, bytes).unwrap();
    }
    assert!(framed > 0, "no piece was compressed");
    // And each entry as format 2 wrote it: its parts, none packed.
    for path in entries(&store(tmp.path())) {
        let (identity, key) = identity_and_key_of(&path);
        let bytes = std::fs::read(&path).unwrap();
        let decoded = envelope::decode(&bytes, &identity, &key).unwrap();
        let old = match decoded.body() {
            Body::Whole(payload) => envelope::encode_format_two(
                &identity,
                &key,
                decoded.kind,
                &[pipekeep::store::recipe::Part::Inline(payload)],
            ),
            Body::Parts { parts, .. } => {
                envelope::encode_format_two(&identity, &key, decoded.kind, &parts)
            }
        };
        std::fs::write(&path, old).unwrap();
    }
    assert!(
        bytes_kept(&store(tmp.path())) > kept,
        "the store was smaller compressed"
    );
    let warm = run(tmp.path(), "binary", &[]);
    let w = warm.watch();
    assert_eq!((w.found, w.compiled), (PIPELINES, 0), "{}", warm.all());
    assert_every_entry_and_piece_verifies(tmp.path());
}

fn assert_every_entry_and_piece_verifies(tmp: &Path) {
    let verified = tool_json(tmp, &["verify", "--json"]);
    assert_eq!(verified["bad"], serde_json::json!([]), "{verified}");
}

#[test]
fn four_processes_share_one_store_with_pieces_and_the_next_run_finds_everything() {
    let tmp = tempfile::tempdir().unwrap();
    // Two of each backend at once: the same pipelines, written by both kinds, over each other.
    let children: Vec<_> = ["binary", "cache", "binary", "cache"]
        .iter()
        .map(|backend| app(tmp.path(), backend, &[]).spawn())
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a process failed");
    }
    assert_every_entry_and_piece_verifies(tmp.path());
    let next = run(tmp.path(), "binary", &[]);
    let w = next.watch();
    assert_eq!((w.built, w.found), (PIPELINES, PIPELINES), "{}", next.all());
}

#[test]
fn processes_killed_while_writing_pieces_leave_only_whole_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = 0x2545_f491u64;
    for round in 0..8u64 {
        // A fresh store every other round: kills land early (the first pieces) and late.
        if round % 2 == 0 {
            let _ = std::fs::remove_dir_all(store(tmp.path()));
        }
        let backend = if round % 4 < 2 { "cache" } else { "binary" };
        let mut child = app(tmp.path(), backend, &[]).spawn();
        rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        std::thread::sleep(std::time::Duration::from_millis(20 + (rng >> 33) % 60));
        let _ = child.kill(); // SIGKILL
        child.wait().unwrap();
        // Killed before it wrote anything (a loaded machine): nothing to check yet.
        if store(tmp.path()).is_dir() {
            assert_every_entry_and_piece_verifies(tmp.path());
        }
    }
    let after = run(tmp.path(), "cache", &[]);
    assert_eq!(after.watch().built, PIPELINES, "{}", after.all());
    assert_every_entry_and_piece_verifies(tmp.path());
    let warm = run(tmp.path(), "cache", &[]);
    let w = warm.watch();
    assert_eq!((w.found, w.compiled), (PIPELINES, 0), "{}", warm.all());
}

fn bytes_kept(store: &Path) -> u64 {
    entries(store)
        .iter()
        .chain(pieces(store).iter())
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

#[test]
fn a_stage_binary_is_a_piece_only_where_several_pipelines_carry_it() {
    // The test app's pipelines share no stage: every binary stands inline.
    let tmp = tempfile::tempdir().unwrap();
    let cold = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_BACKEND", "binary")
        .args(&MIX)
        .run();
    assert!(cold.ok, "{}", cold.all());
    assert_eq!(cold.watch().written, PIPELINES, "{}", cold.all());
    assert!(
        pieces(&store(tmp.path())).is_empty(),
        "a piece no entry shares"
    );

    // The synthetic database's graphics pipelines share stages: against every binary a piece,
    // fewer pieces (those no other pipeline carries stand inline) for about the same bytes (a
    // shared stage is kept once; two entries written at the same moment may each keep one
    // inline), and a warm replay finds every pipeline.
    let db = corpus("saschawillems-glsl-synth.foz");
    let replay = |tmp: &Path, always: bool| {
        let mut app = App::tool(Driver::Radv, tmp)
            .env("VK_INSTANCE_LAYERS", LAYER)
            .env("PIPEKEEP_BACKEND", "binary")
            .args(&["replay", "--json", "--threads", "2", db.to_str().unwrap()]);
        if always {
            app = app.env("PIPEKEEP_TEST_PIECES_ALWAYS", "1");
        }
        let run = app.run();
        assert!(run.ok, "{}", run.all());
        run
    };
    let (shared_only, every) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    replay(shared_only.path(), false);
    replay(every.path(), true);
    let (few, all) = (
        pieces(&store(shared_only.path())).len(),
        pieces(&store(every.path())).len(),
    );
    assert!(few > 0 && few < all, "{few} pieces against {all}");
    let (bytes, bytes_every) = (
        bytes_kept(&store(shared_only.path())),
        bytes_kept(&store(every.path())),
    );
    assert!(
        bytes * 10 <= bytes_every * 11,
        "{bytes} bytes against {bytes_every} with every binary a piece"
    );
    assert_every_entry_and_piece_verifies(shared_only.path());
    let warm = replay(shared_only.path(), false);
    let w = warm.watch();
    assert_eq!(
        (w.built, w.found, w.compiled),
        (141, 141, 0),
        "{}",
        warm.all()
    );
}

/// Replays the synthetic database (its graphics pipelines share stages) through the layer's
/// `binary` backend, with `extra_env`.
fn replay_shared(tmp: &Path, extra_env: &[(&str, &str)]) -> Run {
    let db = corpus("saschawillems-glsl-synth.foz");
    let mut app = App::tool(Driver::Radv, tmp)
        .env("VK_INSTANCE_LAYERS", LAYER)
        .env("PIPEKEEP_BACKEND", "binary")
        .args(&["replay", "--json", "--threads", "1", db.to_str().unwrap()]);
    for (k, v) in extra_env {
        app = app.env(k, v);
    }
    app.run()
}

/// Each entry of the store with the pieces it names.
fn entries_naming(store: &Path) -> Vec<(std::path::PathBuf, Vec<[u8; 32]>)> {
    entries(store)
        .into_iter()
        .map(|e| {
            let bytes = std::fs::read(&e).unwrap();
            let named = pipekeep::store::envelope::listed_parts(&bytes).map_or(Vec::new(), |p| p.1);
            (e, named)
        })
        .collect()
}

/// A piece named by the most entries, with those entries.
fn most_shared_piece(store: &Path) -> ([u8; 32], Vec<std::path::PathBuf>) {
    let all = entries_naming(store);
    let mut best: Option<([u8; 32], Vec<std::path::PathBuf>)> = None;
    for (_, named) in &all {
        for piece in named {
            let sharers: Vec<_> = all
                .iter()
                .filter(|(_, n)| n.contains(piece))
                .map(|(e, _)| e.clone())
                .collect();
            if best.as_ref().is_none_or(|b| sharers.len() > b.1.len()) {
                best = Some((*piece, sharers));
            }
        }
    }
    best.expect("no entry names a piece")
}

#[test]
fn a_stale_marker_beside_an_entry_whose_pieces_others_share_costs_one_compile() {
    let tmp = tempfile::tempdir().unwrap();
    let cold = replay_shared(tmp.path(), &[]);
    assert!(cold.ok, "{}", cold.all());
    let built = cold.watch().built;
    let (_, sharers) = most_shared_piece(&store(tmp.path()));
    assert!(
        sharers.len() >= 3,
        "{} entries share a piece",
        sharers.len()
    );
    let victim = &sharers[0];
    std::fs::write(
        victim.parent().unwrap().join("4000000-4000001.loading"),
        victim.file_name().unwrap().to_str().unwrap(),
    )
    .unwrap();
    let warm = replay_shared(tmp.path(), &[]);
    assert!(warm.ok, "{}", warm.all());
    let w = warm.watch();
    assert_eq!(
        (w.built, w.found, w.compiled),
        (built, built - 1, 1),
        "one stale marker, one compile\n{}",
        warm.all()
    );
    assert_eq!(
        warm.stderr.matches("dropped entry=").count(),
        1,
        "{}",
        warm.all()
    );
    assert!(!warm.stderr.contains("missing-piece"), "{}", warm.all());
}

#[test]
fn a_piece_that_stops_the_driver_is_gone_within_two_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let cold = replay_shared(tmp.path(), &[]);
    assert!(cold.ok, "{}", cold.all());
    let built = cold.watch().built;
    let (piece, sharers) = most_shared_piece(&store(tmp.path()));
    assert!(
        sharers.len() >= 3,
        "{} entries share a piece",
        sharers.len()
    );
    let piece_hex: String = piece.iter().map(|b| format!("{b:02x}")).collect();
    let piece_file = sharers[0]
        .parent()
        .unwrap()
        .join("pieces")
        .join(format!("{piece_hex}.piece"));
    assert!(piece_file.is_file());
    // This very file stops the driver (a link to it keeps its inode): one written anew does not.
    let bad = tmp.path().join("the-bad-piece");
    std::fs::hard_link(&piece_file, &bad).unwrap();
    let crashing = [("PIPEKEEP_TEST_ABORT_IN_LOAD", bad.to_str().unwrap())];
    // The first run stops on it; the second blames the first's entry alone, and stops on the
    // piece again through another entry; the third blames the piece too: it runs through.
    for n in 1..=2 {
        let dying = replay_shared(tmp.path(), &crashing);
        assert!(
            !dying.ok,
            "run {n} was to stop inside the driver\n{}",
            dying.all()
        );
    }
    let through = replay_shared(tmp.path(), &crashing);
    assert!(through.ok, "the piece is gone\n{}", through.all());
    use std::os::unix::fs::MetadataExt;
    let ino = |p: &Path| std::fs::metadata(p).map(|m| m.ino()).ok();
    assert_ne!(ino(&piece_file), ino(&bad), "the stopping file is dropped");
    let w = through.watch();
    assert_eq!(w.built, built, "{}", through.all());
    assert!(
        w.compiled < sharers.len() as u64 + 2,
        "{} compiled for {} sharers\n{}",
        w.compiled,
        sharers.len(),
        through.all()
    );
}
