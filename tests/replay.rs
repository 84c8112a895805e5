//! `pipekeep replay` on RADV null through the real loader: every corpus database replays whole,
//! twice through pipekeep into one store (the second run finds every pipeline), with the Khronos
//! validation layer below pipekeep reporting nothing; damaged databases name the damaged entry
//! and skip only what depends on it.

mod common;
use common::*;
use pipekeep::replay::foz;
use std::path::Path;

fn replay(tmp: &Path, db: &Path, extra: &[&str]) -> Run {
    App::tool(Driver::Radv, tmp)
        .cache_backend()
        .env("VK_INSTANCE_LAYERS", format!("{LAYER}:{VALIDATION}"))
        .args(&["replay", "--json", "--threads", "2"])
        .args(extra)
        .args(&[db.to_str().unwrap()])
        .run()
}

/// The kinds of validation message a run printed (VUIDs and the like), each once.
fn message_kinds(run: &Run) -> std::collections::BTreeSet<String> {
    run.validation_messages()
        .iter()
        .filter_map(|m| {
            m.split("[ ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .map(str::to_owned)
        })
        .collect()
}

/// Replays `db` twice through pipekeep with the validation layer below it. pipekeep must add no
/// message: none at all, or, for a database whose recorded state is itself invalid, exactly the
/// kinds the database gives without pipekeep.
fn twice(db: &str, expected: u64, database_is_valid: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let path = corpus(db);
    if !path.exists() {
        panic!("the corpus database {} is missing", path.display());
    }
    let baseline = if database_is_valid {
        Default::default()
    } else {
        let run = App::tool(Driver::Radv, tmp.path())
            .env("VK_INSTANCE_LAYERS", VALIDATION)
            .args(&["replay", "--json", path.to_str().unwrap()])
            .run();
        let kinds = message_kinds(&run);
        assert!(
            !kinds.is_empty(),
            "the database was expected to be invalid on its own"
        );
        kinds
    };
    for run_no in 0..2 {
        let run = replay(tmp.path(), &path, &[]);
        assert!(run.ok, "{}", run.all());
        assert_eq!(
            run.summary["made"].as_u64(),
            Some(expected),
            "{}",
            run.all()
        );
        assert_eq!(message_kinds(&run), baseline, "{}", run.all());
        let w = run.watch();
        assert_eq!(w.built, expected);
        if run_no == 1 {
            assert_eq!(
                (w.found, w.compiled),
                (expected, 0),
                "the second run finds every pipeline\n{}",
                run.all()
            );
        }
    }
}

#[test]
fn the_synthetic_set_replays_all_141_and_is_found_the_second_time() {
    // Its pipeline state was made up around each shader, and some of it is invalid on its own.
    twice("saschawillems-glsl-synth.foz", 141, false);
}

#[test]
fn pygfx_replays_all_641_and_is_found_the_second_time() {
    twice("pygfx-1008variants.foz", 641, true);
}

#[test]
fn ncnn_replays_all_3115_and_is_found_the_second_time() {
    twice("ncnn-35nets-radv-sg64.foz", 3115, true);
}

/// The test app's pipelines as Fossilize's own recording layer saw them (`VK_LAYER_fossilize`,
/// Fossilize de951cf1 built by `shared/tools/fossilize/build.sh`, `FOSSILIZE_DUMP_PATH` set, on
/// RADV null, Mesa 25.0.7): `pipekeep-testapp` with these arguments, no pipekeep. A game's
/// database is such a recording; Steam pre-compiles by replaying it. If the test app's pipelines
/// change, record it again the same way.
const RECORDED_BY_FOSSILIZE: [&str; 8] = [
    "--compute",
    "12",
    "--graphics",
    "8",
    "--threads",
    "1",
    "--gpl",
    "2",
];

fn recorded_app(tmp: &Path, extra: &[&str]) -> Run {
    let run = App::program(env!("CARGO_BIN_EXE_pipekeep-testapp"), Driver::Radv, tmp)
        .with_layer()
        .args(&RECORDED_BY_FOSSILIZE)
        .args(extra)
        .run();
    assert!(run.ok, "{}", run.all());
    run
}

/// A database recorded by another recorder (Fossilize's layer), replayed through pipekeep as Steam
/// pre-compiles (every core feature on, the recorded robustness), fills the entries the program
/// itself looks up: every pipeline found, none compiled (before: 0 found, every one compiled
/// again, the replay's device digest holding the features it turned on). A device asking other
/// robustness keys apart: the driver compiles otherwise.
#[test]
fn a_database_recorded_by_fossilize_fills_what_the_program_finds() {
    let tmp = tempfile::tempdir().unwrap();
    let replayed = App::tool(Driver::Radv, tmp.path())
        .with_layer()
        .args(&[
            "replay",
            corpus("testapp-fossilize-layer.foz").to_str().unwrap(),
        ])
        .run();
    assert!(replayed.ok, "{}", replayed.all());
    let w = replayed.watch();
    assert_eq!(
        (w.built, w.written, w.passed),
        (35, 31, 4),
        "{}",
        replayed.all()
    );
    let app = recorded_app(tmp.path(), &[]);
    let w = app.watch();
    // The links are built as asked (passed), as ever.
    assert_eq!(
        (w.built, w.found, w.compiled, w.passed),
        (35, 31, 0, 4),
        "{}",
        app.all()
    );
    let robust = recorded_app(tmp.path(), &["--robust-buffer-access"]);
    assert_eq!(robust.watch().found, 0, "{}", robust.all());
}

#[test]
fn the_title_is_the_recorded_application_unless_told() {
    let tmp = tempfile::tempdir().unwrap();
    let db = corpus("saschawillems-glsl-synth.foz");
    let run = App::tool(Driver::Radv, tmp.path())
        .with_layer()
        .args(&["replay", "--json", db.to_str().unwrap()])
        .run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.summary["application"], "fossilize-synth");
    assert!(tmp
        .path()
        .join("store/fossilize-synth/host-pipelines")
        .is_dir());
    let run = App::tool(Driver::Radv, tmp.path())
        .with_layer()
        .args(&["replay", "--title", "my-game", db.to_str().unwrap()])
        .run();
    assert!(run.ok, "{}", run.all());
    assert!(tmp.path().join("store/my-game/host-pipelines").is_dir());
}

#[test]
fn a_monolithic_app_cache_is_saved_and_serves_the_next_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let db = corpus("saschawillems-glsl-synth.foz");
    let cache = tmp.path().join("mono.bin");
    let arg = format!("file={}", cache.display());
    for _ in 0..2 {
        let run = App::tool(Driver::Radv, tmp.path())
            .args(&[
                "replay",
                "--json",
                "--app-cache",
                &arg,
                db.to_str().unwrap(),
            ])
            .run();
        assert!(run.ok, "{}", run.all());
        assert_eq!(run.summary["made"], 141);
        // Its loading is timed apart from the pipelines' creation.
        assert!(
            run.summary["app_cache_load_ms"].as_f64().is_some(),
            "{}",
            run.all()
        );
    }
    assert!(std::fs::metadata(&cache).unwrap().len() > 100_000);
}

/// The synthetic database's entries, stored plainly so they can be changed.
fn synth_entries() -> Vec<(u32, u64, Vec<u8>)> {
    let bytes = std::fs::read(corpus("saschawillems-glsl-synth.foz")).unwrap();
    foz::read_entries(&bytes)
        .unwrap()
        .into_iter()
        .map(|e| (e.tag, e.hash, e.payload.unwrap()))
        .collect()
}

fn replay_bytes(tmp: &Path, name: &str, bytes: &[u8]) -> Run {
    let db = tmp.join(name);
    std::fs::write(&db, bytes).unwrap();
    App::tool(Driver::Radv, tmp)
        .args(&["replay", "--json", db.to_str().unwrap()])
        .run()
}

/// The first entry of `tag`, and the pipelines that use its hash.
fn first_of(entries: &[(u32, u64, Vec<u8>)], tag: u32) -> usize {
    entries.iter().position(|e| e.0 == tag).unwrap()
}

fn users(entries: &[(u32, u64, Vec<u8>)], hash: u64) -> usize {
    let needle = format!("\"{hash:016x}\"");
    entries
        .iter()
        .filter(|e| (e.0 == 6 || e.0 == 7) && String::from_utf8_lossy(&e.2).contains(&needle))
        .count()
}

#[test]
fn damaged_databases_name_the_entry_and_skip_only_what_depends_on_it() {
    let tmp = tempfile::tempdir().unwrap();
    let good = synth_entries();

    // Bad magic, future version: the whole database is refused with a clear message.
    let mut bytes = foz::write_entries(&good);
    bytes[3] = b'X';
    let run = replay_bytes(tmp.path(), "magic.foz", &bytes);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("bad magic"), "{}", run.all());
    let mut bytes = foz::write_entries(&good);
    bytes[15] = 9;
    let run = replay_bytes(tmp.path(), "future.foz", &bytes);
    assert!(
        run.stderr.contains("format version 9 is newer"),
        "{}",
        run.all()
    );

    // Bad JSON in a shader module: that module's pipelines are skipped, the rest replay.
    let mut entries = good.clone();
    let m = first_of(&entries, 4);
    let module_hash = entries[m].1;
    entries[m].2[0] = b'[';
    let run = replay_bytes(tmp.path(), "json.foz", &foz::write_entries(&entries));
    assert_eq!(run.code, Some(1), "{}", run.all());
    let lost = users(&good, module_hash) as u64;
    assert!(lost > 0);
    assert_eq!(
        run.summary["made"].as_u64(),
        Some(141 - lost),
        "{}",
        run.all()
    );
    let malformed = run.summary["malformed"].to_string();
    assert!(
        malformed.contains(&format!("{module_hash:016x}")) && malformed.contains("bad JSON"),
        "{malformed}"
    );

    // A varint running past its buffer.
    let mut entries = good.clone();
    let text =
        String::from_utf8_lossy(&entries[m].2).replace("\"varintSize\":", "\"varintSize\":9");
    entries[m].2 = text.into_bytes();
    let run = replay_bytes(tmp.path(), "varint.foz", &foz::write_entries(&entries));
    assert_eq!(run.code, Some(1));
    assert!(
        run.summary["malformed"]
            .to_string()
            .contains("past the payload"),
        "{}",
        run.all()
    );
    assert_eq!(run.summary["made"].as_u64(), Some(141 - lost));

    // A bad CRC.
    let mut bytes = foz::write_entries(&good);
    let at = bytes
        .windows(20)
        .position(|w| {
            w == format!("{:016x}\"", module_hash)
                .as_bytes()
                .get(..20)
                .unwrap_or(&[])
        })
        .unwrap_or(200);
    bytes[at] ^= 0x01;
    let run = replay_bytes(tmp.path(), "crc.foz", &bytes);
    assert_eq!(run.code, Some(1), "{}", run.all());
    assert!(
        run.summary["malformed"].to_string().contains("CRC-32"),
        "{}",
        run.all()
    );

    // A reference to an object that is not there.
    let mut entries = good.clone();
    let l = first_of(&entries, 3);
    let layout_hash = entries.remove(l).1;
    let run = replay_bytes(tmp.path(), "missing.foz", &foz::write_entries(&entries));
    assert_eq!(run.code, Some(1));
    let lost = users(&good, layout_hash) as u64;
    assert_eq!(
        run.summary["skipped"]["missing pipeline layout"].as_u64(),
        Some(lost),
        "{}",
        run.all()
    );
    assert_eq!(run.summary["made"].as_u64(), Some(141 - lost));

    // A truncated last entry is ignored; everything before it replays.
    let bytes = foz::write_entries(&good);
    let run = replay_bytes(tmp.path(), "cut.foz", &bytes[..bytes.len() - 7]);
    assert!(
        run.summary["made"].as_u64().unwrap() >= 140,
        "{}",
        run.all()
    );
}

/// A sampler with a reduction mode (`VkSamplerReductionModeCreateInfo`, as Fossilize writes it and
/// as pipekeep's record does) is made on RADV, and the pipelines whose layout names it replay.
#[test]
fn a_sampler_with_a_reduction_mode_replays() {
    let tmp = tempfile::tempdir().unwrap();
    let mut entries = synth_entries();
    let sampler_hash = 0x5a3_51e_u64;
    let sampler = serde_json::json!({ "version": 6, "samplers": { format!("{sampler_hash:016x}"): {
        "flags": 0, "magFilter": 1, "minFilter": 1, "mipmapMode": 0, "addressModeU": 2,
        "addressModeV": 2, "addressModeW": 2, "mipLodBias": 0.0, "anisotropyEnable": 0,
        "maxAnisotropy": 1.0, "compareEnable": 0, "compareOp": 0, "minLod": 0.0, "maxLod": 0.0,
        "borderColor": 0, "unnormalizedCoordinates": 0,
        "pNext": [{ "sType": 1_000_130_001, "reductionMode": 1 }],
    }}});
    entries.insert(0, (1, sampler_hash, serde_json::to_vec(&sampler).unwrap()));
    // The first set layout gains a binding the shaders do not use, naming the sampler.
    let s = first_of(&entries, 2);
    let set_hash = entries[s].1;
    let mut doc: serde_json::Value = serde_json::from_slice(&entries[s].2).unwrap();
    let layout = &mut doc["setLayouts"][format!("{set_hash:016x}")];
    layout["bindings"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "binding": 31, "descriptorType": 0, "descriptorCount": 1, "stageFlags": 0x3f,
            "immutableSamplers": [format!("{sampler_hash:016x}")],
        }));
    entries[s].2 = serde_json::to_vec(&doc).unwrap();
    let needle = format!("\"{set_hash:016x}\"");
    assert!(
        entries
            .iter()
            .any(|e| e.0 == 3 && String::from_utf8_lossy(&e.2).contains(&needle)),
        "a pipeline layout names the set layout"
    );
    let run = replay_bytes(tmp.path(), "reduction.foz", &foz::write_entries(&entries));
    assert_eq!(run.code, Some(0), "{}", run.all());
    assert_eq!(run.summary["made"].as_u64(), Some(141), "{}", run.all());
    assert!(
        !run.stderr.contains("unsupported structure"),
        "{}",
        run.all()
    );
}

/// The driver's own floor (`--app-cache each`, the test app's `--cache-each`: a fresh cache a
/// pipeline, read after, no layer): every pipeline is made, and the validation layer finds
/// nothing wrong with how it is done.
#[test]
fn the_drivers_own_floor_makes_every_pipeline_through_a_cache_of_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let db = corpus("pygfx-1008variants.foz");
    let run = App::tool(Driver::Radv, tmp.path())
        .env("VK_INSTANCE_LAYERS", VALIDATION)
        .args(&["replay", "--json", "--threads", "2", "--app-cache", "each"])
        .args(&[db.to_str().unwrap()])
        .run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.summary["made"], 641, "{}", run.all());
    assert!(run.validation_messages().is_empty(), "{}", run.all());

    let run = App::new(Driver::Radv, tmp.path())
        .env("VK_INSTANCE_LAYERS", VALIDATION)
        .args(&["--cache-each", "--batch", "10"])
        .run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(
        run.summary["made"],
        run.summary["expected"],
        "{}",
        run.all()
    );
    assert_eq!(run.summary["failed"], 0, "{}", run.all());
    assert!(run.validation_messages().is_empty(), "{}", run.all());
}

/// The driver's own found path (`--app-cache each=DIR`): the first run keeps each pipeline's
/// data in a file of its own; the next builds each pipeline through a cache made of it, keeping
/// nothing new, and the validation layer finds nothing wrong with either.
#[test]
fn the_drivers_own_found_path_builds_each_pipeline_from_the_data_kept_for_it() {
    let tmp = tempfile::tempdir().unwrap();
    let db = corpus("pygfx-1008variants.foz");
    let kept = tmp.path().join("each");
    let each = format!("each={}", kept.display());
    let run = || {
        let run = App::tool(Driver::Radv, tmp.path())
            .env("VK_INSTANCE_LAYERS", VALIDATION)
            .args(&["replay", "--json", "--threads", "2", "--app-cache", &each])
            .args(&[db.to_str().unwrap()])
            .run();
        assert!(run.ok, "{}", run.all());
        assert_eq!(run.summary["made"], 641, "{}", run.all());
        assert!(run.validation_messages().is_empty(), "{}", run.all());
    };
    let files = || {
        let mut files: Vec<_> = std::fs::read_dir(&kept)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), e.metadata().unwrap().modified().unwrap())
            })
            .collect();
        files.sort();
        files
    };
    run();
    let first = files();
    // pygfx's 641 pipelines: 639 graphics and 2 compute, each hash once.
    assert_eq!(first.len(), 641);
    // Data of no device (a damaged or foreign file) is built through an empty cache and kept
    // again; the rest is taken as kept.
    let foreign = kept.join(&first[0].0);
    let whole = std::fs::read(&foreign).unwrap();
    std::fs::write(&foreign, vec![0xa5; whole.len()]).unwrap();
    let mut expected = files();
    run();
    let second = files();
    assert_eq!(second.len(), 641);
    assert_eq!(
        std::fs::read(&foreign).unwrap()[..32],
        whole[..32],
        "kept again, of this device"
    );
    expected.remove(0);
    assert_eq!(
        second[1..],
        expected[..],
        "the second run kept nothing else"
    );
}

/// What a shared cache would serve, the `cache` backend serves too: pygfx's near-twins (256
/// pipelines right after one that differs only in `cullMode`) are built through a cache seeded
/// with their twin's data, and RADV serves them from it; the next run finds every one.
#[test]
fn through_the_cache_backend_near_twins_are_served_from_their_twins_data() {
    let tmp = tempfile::tempdir().unwrap();
    let db = corpus("pygfx-1008variants.foz");
    let run = || {
        App::tool(Driver::Radv, tmp.path())
            .cache_backend()
            .with_layer()
            .args(&[
                "replay",
                "--json",
                "--threads",
                "1",
                "--app-cache",
                "memory",
            ])
            .args(&[db.to_str().unwrap()])
            .run()
    };
    let cold = run();
    assert!(cold.ok, "{}", cold.all());
    let w = cold.watch();
    assert_eq!((w.built, w.compiled), (641, 641), "{}", cold.all());
    assert!(w.shared >= 200, "{}", cold.all());
    let warm = run().watch();
    assert_eq!((warm.found, warm.compiled), (641, 0));
}

/// `--app-cache memory` keeps caches as Valve's replayer does with no cache file: a fresh one
/// each 1,024 pipelines, so ncnn's 3,115 compute pipelines go through four, the largest holding
/// about a third of what one cache for all of them saves.
#[test]
fn the_memory_cache_is_fresh_each_1024_pipelines() {
    let tmp = tempfile::tempdir().unwrap();
    let db = corpus("ncnn-35nets-radv-sg64.foz");
    let whole = tmp.path().join("whole.bin");
    let file = format!("file={}", whole.display());
    let replay = |cache: &str| {
        let run = App::tool(Driver::Radv, tmp.path())
            .args(&["replay", "--json", "--threads", "2", "--app-cache", cache])
            .args(&[db.to_str().unwrap()])
            .run();
        assert!(run.ok, "{}", run.all());
        assert_eq!(run.summary["made"], 3115, "{}", run.all());
        run
    };
    let memory = replay("memory");
    let largest = memory.summary["app_cache_bytes"].as_u64().unwrap();
    replay(&file);
    let all = std::fs::metadata(&whole).unwrap().len();
    assert!(
        largest > 0 && largest * 2 < all,
        "the largest run's cache {largest} bytes, one for all {all}"
    );
}
