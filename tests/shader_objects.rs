//! Shader objects (`VK_EXT_shader_object`) through the real loader on RADV, which caches none
//! of them itself: kept at the first run and made from their binaries at the next (single
//! shaders, a linked vertex and fragment pair, compute with specialization, a call of both kinds),
//! each binary the application asks after the same as without the layer; a damaged entry costs
//! its call one compile; a process that dies while the driver loads an entry costs that entry's
//! call one compile, never a crash loop.

mod common;
use common::*;
use std::path::Path;
use std::time::Duration;

/// Long enough for any of these runs on a loaded 2-core machine; a hang runs into it.
const LIMIT: Duration = Duration::from_secs(180);

/// Variants of the test app's shaders: 8 shaders each, in 5 calls; 6 entries (a shader each, the
/// linked pairs one each: the last call's, beside a compute shader, is another than the fourth's).
const VARIANTS: &str = "6";
const SHADERS: u64 = 48;
const ENTRIES: u64 = 36;

fn app(tmp: &Path) -> App {
    App::new(Driver::Radv, tmp).args(&[
        "--compute",
        "0",
        "--graphics",
        "0",
        "--shader-objects",
        VARIANTS,
    ])
}

fn through_the_layer(tmp: &Path) -> Run {
    let run = app(tmp).with_layer().run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    let made = &run.summary["shader_objects"];
    assert_eq!(made["made"].as_u64(), Some(SHADERS), "{}", run.all());
    assert_eq!(made["failed"].as_u64(), Some(0), "{}", run.all());
    run
}

#[test]
fn shader_objects_are_kept_then_made_from_their_binaries_and_answer_as_without_the_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let without = app(tmp.path()).run_within(LIMIT);
    assert!(without.ok, "{}", without.all());
    let binaries = &without.summary["shader_objects"]["binary_digest"];

    let cold = through_the_layer(tmp.path());
    let w = cold.watch();
    assert_eq!(
        (w.shaders_compiled, w.shaders_from_entries, w.written),
        (SHADERS, 0, ENTRIES),
        "{}",
        cold.all()
    );
    assert_eq!(&cold.summary["shader_objects"]["binary_digest"], binaries);
    assert_eq!(entries(&tmp.path().join("store")).len() as u64, ENTRIES);
    // Before: the warm run created every shader from its SPIR-V again (pipekeep never saw them),
    // and once made from binaries, RADV crashed when the application asked a shader's binary.
    for run in ["warm", "warm again"] {
        let warm = through_the_layer(tmp.path());
        let w = warm.watch();
        assert_eq!(
            (w.shaders_from_entries, w.shaders_compiled, w.written),
            (SHADERS, 0, 0),
            "{run}: {}",
            warm.all()
        );
        let asked = &warm.summary["shader_objects"];
        assert_eq!(asked["binary_ok"].as_u64(), Some(SHADERS), "{run}");
        assert_eq!(&asked["binary_digest"], binaries, "{run}: {}", warm.all());
    }
}

#[test]
fn a_damaged_shader_entry_costs_one_compile() {
    let tmp = tempfile::tempdir().unwrap();
    through_the_layer(tmp.path());
    let kept = entries(&tmp.path().join("store"));
    assert_eq!(kept.len() as u64, ENTRIES);
    for entry in kept.iter().step_by(3) {
        let mut bytes = std::fs::read(entry).unwrap();
        *bytes.last_mut().unwrap() ^= 0x5a;
        std::fs::write(entry, bytes).unwrap();
    }
    let damaged = kept.iter().step_by(3).count() as u64;
    let after = through_the_layer(tmp.path());
    let w = after.watch();
    assert!(w.shaders_from_entries > 0, "{}", after.all());
    assert!(
        w.shaders_compiled >= damaged && w.shaders_compiled < SHADERS,
        "{}",
        after.all()
    );
    // A call with a damaged entry is made whole, as asked, and each of its entries kept again.
    assert!(w.written >= damaged, "{}", after.all());
    assert_eq!(
        w.shaders_from_entries + w.shaders_compiled,
        SHADERS,
        "{}",
        after.all()
    );
    let next = through_the_layer(tmp.path());
    assert_eq!(next.watch().shaders_from_entries, SHADERS, "{}", next.all());
}

#[test]
fn a_process_that_dies_while_the_driver_loads_a_shader_entry_costs_that_call_one_compile() {
    let tmp = tempfile::tempdir().unwrap();
    through_the_layer(tmp.path());
    let dying = app(tmp.path())
        .with_layer()
        .env("PIPEKEEP_TEST_ABORT_IN_LOAD", "1")
        .run_within(LIMIT);
    assert!(!dying.ok, "the process was to abort\n{}", dying.all());
    let kept = entries(&tmp.path().join("store"));
    let dir = kept[0].parent().unwrap().to_path_buf();
    let marker = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "loading"))
        .expect("the dead thread's marker");
    let victim = std::fs::read_to_string(&marker).unwrap();
    let victim = victim.trim_end_matches('\0');
    assert!(dir.join(victim).is_file(), "the marker names {victim:?}");
    // The next run drops that entry at its opening: its call (at most three shaders) compiles
    // once, every other call is made from its entries; the run after finds them all.
    let after = through_the_layer(tmp.path());
    let w = after.watch();
    assert!(
        (1..=3).contains(&w.shaders_compiled)
            && w.shaders_from_entries == SHADERS - w.shaders_compiled,
        "{}",
        after.all()
    );
    assert!(
        after.stderr.contains(victim),
        "the drop is logged\n{}",
        after.all()
    );
    let next = through_the_layer(tmp.path());
    assert_eq!(next.watch().shaders_from_entries, SHADERS, "{}", next.all());
}

/// A run through the layer that makes every shader from its entry, compiling none.
fn finds_every_shader(tmp: &Path) {
    let run = through_the_layer(tmp);
    let w = run.watch();
    assert_eq!(
        (w.shaders_from_entries, w.shaders_compiled),
        (SHADERS, 0),
        "{}",
        run.all()
    );
}

/// Calls of shader objects the test app makes (5 a variant), each recorded whole.
const CALLS: u64 = 30;

/// The record keeps every call whole: after the store is gone (a driver change, `pipekeep
/// clear`), `pipekeep rebuild` makes each call again through the layer, and the next run makes
/// every shader from its binaries. Before: shader objects were not recorded, and the rebuild
/// found no call to make.
#[test]
fn pipekeep_rebuild_makes_every_recorded_call_again_and_the_next_run_finds_every_shader() {
    let tmp = tempfile::tempdir().unwrap();
    through_the_layer(tmp.path());
    let title = tmp.path().join("store/pipekeep-testapp");
    std::fs::remove_dir_all(title.join("host-pipelines")).unwrap();
    let rebuilt = App::tool(Driver::Radv, tmp.path())
        .with_layer()
        .args(&["rebuild", "--json"])
        .run_within(LIMIT);
    assert!(rebuilt.ok, "{}", rebuilt.all());
    let summary: serde_json::Value = serde_json::from_str(rebuilt.stdout.trim()).unwrap();
    let t = &summary["titles"][0];
    assert_eq!(
        (t["made_shader_objects"].as_u64(), t["written"].as_u64()),
        (Some(CALLS), Some(ENTRIES)),
        "{}",
        rebuilt.all()
    );
    finds_every_shader(tmp.path());
}

/// After a driver change the background rebuild, on the application's own device through the
/// layer's own `vkCreateShadersEXT`, makes every recorded call again, counted as the rebuild's;
/// the next run makes every shader from its binaries.
#[test]
fn after_a_driver_change_shader_objects_are_rebuilt_in_the_background() {
    let tmp = tempfile::tempdir().unwrap();
    through_the_layer(tmp.path());
    let title = tmp.path().join("store/pipekeep-testapp");
    simulate_a_driver_change(&title);
    // A short run of the same device (its configuration's calls are the rebuild's).
    let short = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .args(&["--compute", "0", "--graphics", "0", "--shader-objects", "1"])
        .args(&["--linger-ms", "200"])
        .env("PIPEKEEP_TEST_REBUILD_FIRST", "1")
        .run_within(LIMIT);
    assert!(short.ok, "{}", short.all());
    assert!(
        short.stderr.contains(&format!(
            "background rebuild ended made={CALLS} of={CALLS} skipped=0"
        )),
        "{}",
        short.all()
    );
    assert!(!title.join("record.pending").exists(), "{}", short.all());
    finds_every_shader(tmp.path());
}
