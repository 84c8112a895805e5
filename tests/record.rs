//! The record (`<title>/record.foz`) through the real loader on RADV (null hardware): a replayed
//! corpus database and the test app are recorded as they run, `pipekeep rebuild` refills an
//! emptied store from the record alone, and the next run finds every pipeline; the tools show,
//! check and clear the record.

mod common;
use common::*;
use std::path::{Path, PathBuf};

fn tool(tmp: &Path, args: &[&str]) -> Run {
    App::tool(Driver::Radv, tmp).with_layer().args(args).run()
}

fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}\n{}", run.all()))
}

#[test]
fn a_record_alone_rebuilds_the_store_and_the_next_replay_finds_every_pipeline() {
    let tmp = tempfile::tempdir().unwrap();
    let db = corpus("ncnn-35nets-radv-sg64.foz");
    let db = db.to_str().unwrap();
    let first = tool(tmp.path(), &["replay", "--threads", "2", db]);
    assert!(first.ok, "{}", first.all());
    let title = tmp.path().join("store/ncnn");
    assert!(title.join("record.foz").is_file(), "{}", first.all());
    let listed = json(&tool(tmp.path(), &["list", "--json"]));
    assert_eq!(listed["titles"][0]["record"]["pipelines"], 3115, "{listed}");

    // As after a driver change: the store is gone, the record stays.
    std::fs::remove_dir_all(title.join("host-pipelines")).unwrap();
    let rebuilt = tool(
        tmp.path(),
        &["rebuild", "--title", "ncnn", "--threads", "2", "--json"],
    );
    assert!(rebuilt.ok, "{}", rebuilt.all());
    let r = &json(&rebuilt)["titles"][0];
    assert_eq!(
        (r["pipelines"].as_u64(), r["written"].as_u64()),
        (Some(3115), Some(3115)),
        "{r}"
    );
    let again = tool(tmp.path(), &["replay", "--threads", "2", db]);
    let w = again.watch();
    assert_eq!((w.built, w.found), (3115, 3115), "{}", again.all());

    // Replaying the record added nothing to it: each pipeline and object once.
    let after = json(&tool(tmp.path(), &["list", "--json"]));
    assert_eq!(after["titles"][0]["record"]["pipelines"], 3115, "{after}");
    assert!(tool(tmp.path(), &["verify"]).ok);
    let cleared = json(&tool(tmp.path(), &["clear", "--json"]));
    assert_eq!(cleared["titles"][0]["record_removed"], true, "{cleared}");
    assert!(!title.join("record.foz").exists());
}

#[test]
fn a_damaged_record_entry_is_reported_and_the_rest_still_rebuilds() {
    let tmp = tempfile::tempdir().unwrap();
    let db = corpus("saschawillems-glsl-synth.foz");
    let first = tool(tmp.path(), &["replay", db.to_str().unwrap()]);
    assert!(first.ok, "{}", first.all());
    let record = tmp.path().join("store/fossilize-synth/record.foz");
    let mut bytes = std::fs::read(&record).unwrap();
    let listed = json(&tool(tmp.path(), &["list", "--json"]));
    assert_eq!(listed["titles"][0]["record"]["pipelines"], 141, "{listed}");
    // A byte inside the last entry's payload: its CRC fails. (The first is the configuration's
    // entry: its pipelines are then left to the application, whose device it was.)
    let last = bytes.len() - 3;
    bytes[last] ^= 0x40;
    std::fs::write(&record, &bytes).unwrap();
    let verify = tool(tmp.path(), &["verify", "--json"]);
    assert!(!verify.ok, "{}", verify.all());
    assert_eq!(json(&verify)["bad_records"][0]["damaged"], 1);
    std::fs::remove_dir_all(tmp.path().join("store/fossilize-synth/host-pipelines")).unwrap();
    let rebuilt = tool(tmp.path(), &["rebuild", "--json"]);
    let r = &json(&rebuilt)["titles"][0];
    assert!(r["written"].as_u64() > Some(0), "{}", rebuilt.all());
}

#[test]
fn an_applications_pipelines_are_rebuilt_from_its_record_for_its_own_device() {
    record_rebuild_and_find_all(&[]);
}

/// Pipeline robustness (`VkPipelineRobustnessCreateInfoEXT`) on pipelines and on stages is keyed,
/// so it is recorded and replayed too: the rebuilt entries are the ones the application asks for.
#[test]
fn pipelines_with_pipeline_robustness_are_recorded_and_rebuilt() {
    record_rebuild_and_find_all(&["--pipeline-robustness"]);
}

/// Depth-clip state, as DXVK chains it, is recorded on the rasterization state and replayed.
#[test]
fn pipelines_with_depth_clip_state_are_recorded_and_rebuilt() {
    record_rebuild_and_find_all(&["--depth-clip"]);
}

/// Runs the test app cold (with `extra` arguments), empties its store, rebuilds it from the
/// record, and asserts that the rebuild wrote every pipeline and the next run finds them all.
fn record_rebuild_and_find_all(extra: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    record_rebuild_and_find_all_in(tmp.path(), extra, &[]);
}

/// [`record_rebuild_and_find_all`] in `tmp`, the application's runs and the rebuild with the
/// variables `env` (the user's environment, which both share).
fn record_rebuild_and_find_all_in(tmp: &Path, extra: &[&str], env: &[(&str, &str)]) {
    let mut args = vec!["--compute", "24", "--graphics", "16", "--threads", "2"];
    args.extend_from_slice(extra);
    let app = || {
        env.iter()
            .fold(App::new(Driver::Radv, tmp).with_layer(), |app, (k, v)| {
                app.env(k, v)
            })
            .args(&args)
            .run()
    };
    let cold = app();
    assert_eq!(cold.watch().written, 40, "{}", cold.all());
    let title = tmp.join("store/pipekeep-testapp");
    std::fs::remove_dir_all(title.join("host-pipelines")).unwrap();
    // The replay makes its device exactly as the test app made its own (extensions and every
    // feature structure, from the record), so the pipelines key as they did.
    let rebuilt = env
        .iter()
        .fold(App::tool(Driver::Radv, tmp).with_layer(), |app, (k, v)| {
            app.env(k, v)
        })
        .args(&["rebuild", "--json"])
        .run();
    assert!(rebuilt.ok, "{}", rebuilt.all());
    assert_eq!(
        json(&rebuilt)["titles"][0]["written"],
        40,
        "{}",
        rebuilt.all()
    );
    assert_finds_all(app(), 40);
}

/// An application built with headers newer than any registry the layer knows chains a structure
/// the rebuild cannot make again: it does not enter the key (the driver's keys decide what it
/// changes), so the rebuild's entries are the ones the application finds.
#[test]
fn a_device_chaining_a_structure_no_registry_has_is_rebuilt_and_found() {
    record_rebuild_and_find_all(&["--unknown-structure"]);
}

/// zink's pipelines (nearly all state dynamic, vertex input among it, with the structures it
/// makes ignored chained): the record holds what the key read, and the rebuild's entries are the
/// ones the application finds.
#[test]
fn pipelines_with_zink_s_dynamic_states_are_rebuilt_and_found() {
    record_rebuild_and_find_all(&["--every-extension", "--zink-dynamic"]);
}

/// Recorded with the validation layer below pipekeep (no pipeline binaries, so no global key of
/// the driver in the keys), rebuilt without it: the rebuild plans the device as it was.
#[test]
fn recorded_under_a_layer_below_the_rebuilt_entries_are_found() {
    record_rebuild_and_find_all(&["--layers", &[LAYER, VALIDATION].join(",")]);
}

/// One title launched two ways, with a layer below pipekeep and without (their keys differ: no
/// binaries, so no global key, under the layer): two configurations, each rebuilt as it was
/// launched, so both launches find everything after the rebuild.
#[test]
fn a_title_launched_with_and_without_a_layer_below_is_rebuilt_for_both() {
    let tmp = tempfile::tempdir().unwrap();
    let below = [LAYER, VALIDATION].join(",");
    let app = |layers: Option<&str>| {
        let mut args = vec!["--compute", "24", "--graphics", "16", "--threads", "2"];
        if let Some(layers) = layers {
            args.extend_from_slice(&["--layers", layers]);
        }
        App::new(Driver::Radv, tmp.path())
            .with_layer()
            .args(&args)
            .run()
    };
    assert_eq!(app(None).watch().written, 40);
    let under = app(Some(&below));
    assert_eq!(under.watch().written, 40, "{}", under.all());
    let title = tmp.path().join("store/pipekeep-testapp");
    std::fs::remove_dir_all(title.join("host-pipelines")).unwrap();
    let rebuilt = tool(tmp.path(), &["rebuild", "--json"]);
    assert!(rebuilt.ok, "{}", rebuilt.all());
    assert_eq!(
        json(&rebuilt)["titles"][0]["written"],
        80,
        "{}",
        rebuilt.all()
    );
    assert_finds_all(app(None), 40);
    assert_finds_all(app(Some(&below)), 40);
}

/// Recorded under a driconf option Mesa matches by the executable's name (`~/.drirc`), which
/// changes RADV's global key: the rebuild, another executable, compiles under the application's.
#[test]
fn recorded_under_a_driconf_option_for_the_executable_the_rebuilt_entries_are_found() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join(".drirc"),
        r#"<driconf>
  <device driver="radv">
    <application name="pipekeep test app" executable="pipekeep-testapp">
      <option name="radv_disable_trunc_coord" value="true" />
    </application>
  </device>
</driconf>
"#,
    )
    .unwrap();
    let home = home.to_str().unwrap();
    record_rebuild_and_find_all_in(tmp.path(), &[], &[("HOME", home)]);
    // ... and the option was in force: without it, the application finds nothing kept under it.
    let plain = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .args(&["--compute", "24", "--graphics", "16", "--threads", "2"])
        .run();
    assert_eq!(plain.watch().found, 0, "{}", plain.all());
}

/// SPEC "Never break the application": no application thread waits on a lock that a thread of
/// the layer's own at idle priority may hold. The background rebuild's first object stalls its
/// thread inside its object table's write lock (as an idle thread no core is given); the
/// application then makes new pipelines, which read the objects they name, and must go on.
/// Before the rebuild kept its objects apart, the application's pipelines waited on that lock
/// (the stall was let go only after a minute).
#[test]
fn the_application_goes_on_beside_a_rebuild_thread_stalled_inside_its_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let mix = ["--compute", "30", "--graphics", "10", "--threads", "2"];
    let cold = test_app(tmp.path(), &mix).run();
    assert_eq!(cold.watch().written, 40, "{}", cold.all());
    let title = tmp.path().join("store/pipekeep-testapp");
    simulate_a_driver_change(&title);
    let stalled = tmp.path().join("stalled");
    let run = test_app(
        tmp.path(),
        &[
            &mix[..],
            &["--again-when-exists", stalled.to_str().unwrap()],
        ]
        .concat(),
    )
    .env("PIPEKEEP_TEST_STALL_REBUILD", &stalled)
    .run_within(std::time::Duration::from_secs(120));
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.made(), 80, "{}", run.all());
    assert!(
        run.stderr
            .contains("a rebuild thread stalls inside its object table's lock"),
        "{}",
        run.all()
    );
    assert!(
        run.stderr
            .contains("the stalled rebuild thread goes on: the application went on beside it"),
        "{}",
        run.all()
    );
}

/// Asserts that `run` built its `n` pipelines and found every one.
fn assert_finds_all(run: Run, n: u64) {
    let w = run.watch();
    assert_eq!((w.built, w.found), (n, n), "{}", run.all());
}

fn test_app(tmp: &Path, args: &[&str]) -> App {
    App::new(Driver::Radv, tmp).with_layer().args(args)
}

#[test]
fn after_a_driver_change_the_record_is_rebuilt_in_the_background_and_the_next_run_is_warm() {
    let tmp = tempfile::tempdir().unwrap();
    let mix = ["--compute", "60", "--graphics", "40", "--threads", "2"];
    let cold = test_app(tmp.path(), &mix).run();
    assert_eq!(cold.watch().written, 100, "{}", cold.all());
    let title = tmp.path().join("store/pipekeep-testapp");
    simulate_a_driver_change(&title);

    // A short run of other pipelines: the rebuild fills the new driver's directory meanwhile, on
    // threads of its own at idle priority, counted apart (the test hook lets it finish at
    // vkDestroyDevice: a loaded machine may give it no time before the run ends).
    let short = test_app(
        tmp.path(),
        &[
            "--compute",
            "2",
            "--graphics",
            "0",
            "--seed",
            "7",
            "--linger-ms",
            "200",
        ],
    )
    .env("PIPEKEEP_TEST_REBUILD_FIRST", "1")
    .run_within(std::time::Duration::from_secs(120));
    assert!(short.ok, "{}", short.all());
    // The other driver's directory was set aside at opening (`.dropped`: its files are dropped
    // on the opening thread at idle priority, what a run leaves by the next), and the record is
    // no longer owed a rebuild.
    let dirs: Vec<_> = std::fs::read_dir(title.join("host-pipelines"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| !n.ends_with(".dropped"))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}\n{}", short.all());
    assert!(!dirs[0].contains("-0000000"), "{dirs:?}");
    assert!(!title.join("record.pending").exists(), "{}", short.all());
    assert!(
        short
            .stderr
            .contains("background rebuild ended made=100 of=100"),
        "{}",
        short.all()
    );
    let line = short.watch();
    assert_eq!(
        line.built, 2,
        "the rebuild is not counted as the application's"
    );
    let runs = std::fs::read_to_string(title.join("runs.jsonl")).unwrap();
    assert!(
        runs.lines()
            .last()
            .unwrap()
            .contains("\"rebuild_made\":100"),
        "{runs}"
    );
    // The rebuild's writes are its own, not the application's two compiles.
    let last: serde_json::Value = serde_json::from_str(runs.lines().last().unwrap()).unwrap();
    let count = |field: &str| last[field].as_u64().unwrap_or(u64::MAX);
    assert!(count("written") <= 2, "{runs}");
    assert!((1..=100).contains(&count("rebuild_written")), "{runs}");

    assert_finds_all(test_app(tmp.path(), &mix).run(), 100);
}

#[test]
fn a_device_destroyed_while_the_rebuild_runs_returns_and_rebuild_off_starts_none() {
    let tmp = tempfile::tempdir().unwrap();
    let many = ["--compute", "400", "--graphics", "200", "--threads", "2"];
    assert!(test_app(tmp.path(), &many).run().ok);
    let title = tmp.path().join("store/pipekeep-testapp");
    simulate_a_driver_change(&title);
    let off = test_app(tmp.path(), &["--compute", "1", "--graphics", "0"])
        .env("PIPEKEEP_REBUILD", "off")
        .run();
    assert!(
        off.ok && !off.stderr.contains("rebuilding"),
        "{}",
        off.all()
    );

    assert!(
        !title.join("record.pending").exists(),
        "with the rebuild off, no rebuild is owed"
    );

    simulate_a_driver_change(&title);
    // The device goes a moment after the rebuild began (600 pipelines take it some 300 ms here):
    // it returns, the rebuild stopped after its current pipeline and joined.
    let at_once = test_app(
        tmp.path(),
        &["--compute", "2", "--graphics", "0", "--linger-ms", "100"],
    )
    .run_within(std::time::Duration::from_secs(120));
    assert!(at_once.ok, "{}", at_once.all());
    // A loaded machine may destroy the device before the rebuild began: either way it ended.
    assert!(
        !at_once.stderr.contains("rebuilding the title's record")
            || at_once.stderr.contains("background rebuild ended"),
        "joined at vkDestroyDevice\n{}",
        at_once.all()
    );
    // What the rebuild did not reach is owed (record.pending): the next run takes it up, and
    // the run after that finds every pipeline.
    let finished = at_once
        .stderr
        .contains("background rebuild ended made=600 of=600");
    assert_eq!(
        title.join("record.pending").exists(),
        !finished,
        "{}",
        at_once.all()
    );
    let next = test_app(
        tmp.path(),
        &["--compute", "2", "--graphics", "0", "--linger-ms", "100"],
    )
    .env("PIPEKEEP_TEST_REBUILD_FIRST", "1")
    .run_within(std::time::Duration::from_secs(120));
    assert!(next.ok, "{}", next.all());
    assert!(!title.join("record.pending").exists(), "{}", next.all());
    assert_finds_all(test_app(tmp.path(), &many).run(), 600);
}

/// The record counts in the bound within its share (a quarter): past it, the opening compacts it
/// to it, keeping the first used pipelines, whose entries the bound keeps too.
#[test]
fn the_record_counts_in_the_bound_within_its_share_and_is_compacted_to_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mix = ["--compute", "60", "--graphics", "40", "--threads", "2"];
    assert_eq!(test_app(tmp.path(), &mix).run().watch().written, 100);
    let title = tmp.path().join("store/pipekeep-testapp");
    let record = title.join("record.foz");
    let recorded = std::fs::metadata(&record).unwrap().len();
    // A share of half the record: the opening compacts it.
    let bound = recorded * 2;
    // No pipeline of its own: the opening thread bounds and compacts while the device lives.
    let small = test_app(
        tmp.path(),
        &["--compute", "0", "--graphics", "0", "--linger-ms", "500"],
    )
    .env("PIPEKEEP_MAX_BYTES", bound.to_string())
    .run();
    assert!(small.ok, "{}", small.all());
    assert!(small.stderr.contains("record compacted"), "{}", small.all());
    assert!(std::fs::metadata(&record).unwrap().len() <= bound / 4);
    let kept: u64 = entries_and_pieces(&tmp.path().join("store"))
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(
        kept <= bound - bound / 4,
        "{kept} of entries in a bound of {bound}"
    );
    let listed = json(&tool(tmp.path(), &["list", "--json"]));
    let pipelines = listed["titles"][0]["record"]["pipelines"].as_u64().unwrap();
    assert!(pipelines > 0 && pipelines < 100, "{listed}");
    assert!(tool(tmp.path(), &["verify"]).ok);
    let left = pipelines;

    // What the record kept still rebuilds whole after a driver change.
    simulate_a_driver_change(&title);
    let rebuilt = tool(tmp.path(), &["rebuild", "--json"]);
    assert!(rebuilt.ok, "{}", rebuilt.all());
    let r = &json(&rebuilt)["titles"][0];
    assert_eq!(r["pipelines"].as_u64(), Some(left), "{r}");
    assert_eq!(r["skipped"].as_u64(), Some(0), "{r}");
    // The old driver's entries are gone with the command: none is left for the next launch.
    assert!(r["old_entries_dropped"].as_u64().unwrap() <= 100, "{r}");
    let dirs: Vec<String> = std::fs::read_dir(title.join("host-pipelines"))
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        dirs.len(),
        1,
        "only the present driver's directory: {dirs:?}"
    );
    assert_eq!(entries(&tmp.path().join("store")).len() as u64, left);
}

/// An application whose first pipeline opens the store before the layer's opening thread has
/// run: that opening publishes the store at once, and the earlier driver's entries are dropped
/// by the opening thread once the application pauses, never inside the first pipeline.
#[test]
fn a_first_pipeline_that_opens_the_store_leaves_the_old_drivers_entries_to_the_opening_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let args = ["--compute", "30", "--graphics", "10", "--threads", "2"];
    let cold = test_app(tmp.path(), &args)
        .env("PIPEKEEP_REBUILD", "off")
        .run();
    assert_eq!(cold.watch().written, 40, "{}", cold.all());
    let title = tmp.path().join("store/pipekeep-testapp");
    simulate_a_driver_change(&title);

    let mut lingering = args.to_vec();
    // Long enough for an idle-priority drop on a machine whose cores are busy (CI runs two tests
    // at once on two cores; 600 ms dropped 10-30 of 40 under load).
    lingering.extend(["--linger-ms", "3000"]);
    let run = test_app(tmp.path(), &lingering)
        .env("PIPEKEEP_REBUILD", "off")
        .env("PIPEKEEP_TEST_OPENING_LATE", "1")
        .run();
    assert!(run.ok, "{}", run.all());
    assert!(
        run.stderr.contains("store opened (other drivers' entries are dropped and its bound checked next, on the opening thread)"),
        "{}",
        run.all()
    );
    assert!(
        run.stderr
            .contains("another driver's entries of this device dropped")
            && run.stderr.contains("other_driver_drops=40"),
        "{}",
        run.all()
    );
    let dirs = std::fs::read_dir(title.join("host-pipelines"))
        .unwrap()
        .count();
    assert_eq!(dirs, 1, "only the present driver's directory is left");
}

/// What a title's record holds, read as Fossilize's tools read it: its application entries (one
/// a device configuration, as JSON), its pipelines and its application-blob links.
struct RecordHeld {
    applications: Vec<serde_json::Value>,
    pipelines: usize,
    links: usize,
}

fn record_held(title: &Path) -> RecordHeld {
    let bytes = std::fs::read(title.join("record.foz")).unwrap();
    let mut held = RecordHeld {
        applications: Vec::new(),
        pipelines: 0,
        links: 0,
    };
    for e in pipekeep::replay::foz::read_entries(&bytes).unwrap() {
        let payload = e.payload.unwrap();
        match e.tag {
            0 => {
                let json = payload.split(|b| *b == 0).next().unwrap();
                held.applications
                    .push(serde_json::from_slice(json).unwrap());
            }
            6 | 7 | 9 => held.pipelines += 1,
            8 => held.links += 1,
            _ => {}
        }
    }
    held
}

/// Removes every identity directory of a title, as a driver update leaves it (the record stays).
fn remove_identities(title: &Path) {
    std::fs::remove_dir_all(title.join("host-pipelines")).unwrap();
}

/// The test app's 24 compute and 16 graphics pipelines, from 2 threads.
const MIX: [&str; 6] = ["--compute", "24", "--graphics", "16", "--threads", "2"];

/// One run of [`MIX`], its 40 entries written and recorded, then its identity directories
/// removed: the title, and its record's path and bytes.
fn a_record_without_its_entries(tmp: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
    assert_eq!(test_app(tmp, &MIX).run().watch().written, 40);
    let title = tmp.join("store/pipekeep-testapp");
    remove_identities(&title);
    let record = title.join("record.foz");
    let bytes = std::fs::read(&record).unwrap();
    (title, record, bytes)
}

const VK_API_1_0: u64 = 1 << 22;
const VK_API_1_3: u64 = (1 << 22) | (3 << 12);

/// Issue 30: the application's cold run, its identity directory removed (a driver update), then
/// `pipekeep rebuild`: the rebuild makes the application's own instance (its VkApplicationInfo)
/// and device (its extensions and feature structures), so the next run finds every pipeline and
/// compiles none, and the record still holds one configuration and each pipeline once.
fn the_rebuild_reproduces_the_configuration(extra: &[&str], api: u64) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--compute",
        "12",
        "--graphics",
        "8",
        "--threads",
        "2",
        "--app-name",
        "Configured App",
        "--engine-name",
        "Test Engine",
        "--engine-version",
        "7",
    ];
    args.extend_from_slice(extra);
    let app = || test_app(tmp.path(), &args).run();
    let cold = app();
    assert_eq!(cold.watch().written, 20, "{}", cold.all());
    let title = tmp.path().join("store/Configured_App");
    let held = record_held(&title);
    assert_eq!(held.applications.len(), 1, "{:?}", held.applications);
    let info = &held.applications[0]["applicationInfo"];
    assert_eq!(info["applicationName"], "Configured App", "{info}");
    assert_eq!(info["engineName"], "Test Engine", "{info}");
    assert_eq!(info["engineVersion"], 7, "{info}");
    assert_eq!(info["apiVersion"], api, "{info}");
    assert_eq!((held.pipelines, held.links), (20, 20));

    remove_identities(&title);
    let rebuilt = tool(
        tmp.path(),
        &["rebuild", "--title", "Configured_App", "--json"],
    );
    assert!(rebuilt.ok, "{}", rebuilt.all());
    let r = json(&rebuilt)["titles"][0].clone();
    assert_eq!(
        (r["written"].as_u64(), r["configurations"].as_u64()),
        (Some(20), Some(1)),
        "{}",
        rebuilt.all()
    );
    assert_eq!(r["configurations_skipped"], 0, "{r}");

    let again = app();
    let w = again.watch();
    assert_eq!(
        (w.built, w.found, w.compiled),
        (20, 20, 0),
        "{}",
        again.all()
    );
    let after = record_held(&title);
    assert_eq!(
        (after.applications.len(), after.pipelines, after.links),
        (1, 20, 20),
        "the rebuild and the run after it recorded nothing again: {:?}",
        after.applications
    );
    held.applications[0].clone()
}

#[test]
fn the_rebuild_makes_the_applications_instance_and_device_and_its_next_run_finds_all() {
    the_rebuild_reproduces_the_configuration(&[], VK_API_1_3);
}

/// A device as translation layers make it: every extension, every feature structure chained
/// one by one (before: the rebuild took Vulkan 1.3's subgroup size control from the wrong
/// structure, and skipped every pipeline that requires a subgroup size: ncnn's 3,115).
#[test]
fn the_rebuild_reproduces_a_device_with_every_extension() {
    the_rebuild_reproduces_the_configuration(&["--every-extension"], VK_API_1_3);
}

#[test]
fn the_rebuild_reproduces_an_application_of_vulkan_1_0() {
    the_rebuild_reproduces_the_configuration(&["--api", "1.0"], VK_API_1_0);
}

#[test]
fn the_rebuild_reproduces_robust_buffer_access() {
    let app = the_rebuild_reproduces_the_configuration(&["--robust-buffer-access"], VK_API_1_3);
    assert_eq!(
        app["physicalDeviceFeatures"]["robustBufferAccess"], 1,
        "{app}"
    );
    assert_eq!(app["pipekeepDevice"]["coreFeatures"][0], 1, "{app}");
}

/// A configuration this device cannot make (here: an extension it does not offer) is left to the
/// background rebuild inside the application: the command says so and the record stays owed.
#[test]
fn a_configuration_the_device_cannot_make_is_skipped_and_said() {
    let tmp = tempfile::tempdir().unwrap();
    let args = ["--compute", "6", "--graphics", "0", "--app-name", "Skipped"];
    let cold = test_app(tmp.path(), &args).run();
    assert_eq!(cold.watch().written, 6, "{}", cold.all());
    let title = tmp.path().join("store/Skipped");
    let record = title.join("record.foz");
    let entries = pipekeep::replay::foz::read_entries(&std::fs::read(&record).unwrap()).unwrap();
    let rewritten: Vec<(u32, u64, Vec<u8>)> = entries
        .into_iter()
        .map(|e| {
            let mut payload = e.payload.unwrap();
            if e.tag == 0 {
                let mut doc: serde_json::Value = serde_json::from_slice(&payload).unwrap();
                doc["pipekeepDevice"]["extensions"]
                    .as_array_mut()
                    .unwrap()
                    .push("VK_PIPEKEEP_not_offered".into());
                payload = serde_json::to_vec(&doc).unwrap();
            }
            (e.tag, e.hash, payload)
        })
        .collect();
    std::fs::write(&record, pipekeep::replay::foz::write_entries(&rewritten)).unwrap();
    remove_identities(&title);
    let rebuilt = tool(tmp.path(), &["rebuild", "--json"]);
    let r = json(&rebuilt)["titles"][0].clone();
    assert_eq!(
        (
            r["configurations"].as_u64(),
            r["configurations_skipped"].as_u64(),
            r["pipelines_left"].as_u64(),
            r["written"].as_u64()
        ),
        (Some(1), Some(1), Some(6), Some(0)),
        "{}",
        rebuilt.all()
    );
    assert!(title.join("record.pending").exists(), "{}", rebuilt.all());
    let text = tool(tmp.path(), &["rebuild"]);
    assert!(
        text.stdout.contains("1 configuration") && text.stdout.contains("VK_PIPEKEEP_not_offered"),
        "{}",
        text.all()
    );
}

/// Two configurations of one title (the test app with and without robustBufferAccess): after a
/// driver change, each device's background rebuild makes only its own configuration's pipelines
/// (another's would key as this device's: entries no run looks up, recorded again), the record
/// stays owed until both are kept, and each configuration's next run finds all of its own.
#[test]
fn the_background_rebuild_makes_only_its_own_devices_configuration() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = ["--compute", "12", "--graphics", "8", "--threads", "2"];
    let robust = [&plain[..], &["--robust-buffer-access"]].concat();
    for args in [&plain[..], &robust[..]] {
        let cold = test_app(tmp.path(), args).run();
        assert_eq!(cold.watch().written, 20, "{}", cold.all());
    }
    let title = tmp.path().join("store/pipekeep-testapp");
    let held = record_held(&title);
    assert_eq!(
        (held.applications.len(), held.pipelines, held.links),
        (2, 40, 40)
    );
    simulate_a_driver_change(&title);
    let short = [
        "--compute",
        "2",
        "--graphics",
        "0",
        "--seed",
        "7",
        "--linger-ms",
        "200",
    ];
    let short_robust = [&short[..], &["--robust-buffer-access"]].concat();
    let first = test_app(tmp.path(), &short)
        .env("PIPEKEEP_TEST_REBUILD_FIRST", "1")
        .run_within(std::time::Duration::from_secs(120));
    assert!(
        first
            .stderr
            .contains("background rebuild ended made=20 of=20"),
        "{}",
        first.all()
    );
    assert!(
        title.join("record.pending").exists(),
        "the other configuration's pipelines are still owed\n{}",
        first.all()
    );
    let second = test_app(tmp.path(), &short_robust)
        .env("PIPEKEEP_TEST_REBUILD_FIRST", "1")
        .run_within(std::time::Duration::from_secs(120));
    assert!(
        second
            .stderr
            .contains("background rebuild ended made=20 of=20"),
        "{}",
        second.all()
    );
    let after = record_held(&title);
    assert_eq!(
        (after.applications.len(), after.pipelines, after.links),
        (2, 40, 40),
        "nothing recorded again under another configuration (the short runs' pipelines are \
         variants the first runs made)"
    );
    assert_finds_all(test_app(tmp.path(), &plain).run(), 20);
    assert_finds_all(test_app(tmp.path(), &robust).run(), 20);
}

/// One `pipekeep rebuild` of two titles whose application gives the same name (one named by
/// PIPEKEEP_TITLE): the layer reads the title at each vkCreateInstance, so each title's
/// configuration is rebuilt into its own store, and each next run finds all of its pipelines.
#[test]
fn one_rebuild_of_several_titles_files_each_under_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--compute",
        "6",
        "--graphics",
        "4",
        "--app-name",
        "Same Name",
    ];
    let named = || test_app(tmp.path(), &args);
    let titled = || test_app(tmp.path(), &args).env("PIPEKEEP_TITLE", "other-title");
    for app in [named(), titled()] {
        let cold = app.run();
        assert_eq!(cold.watch().written, 10, "{}", cold.all());
    }
    let store = tmp.path().join("store");
    for title in ["Same_Name", "other-title"] {
        remove_identities(&store.join(title));
    }
    let rebuilt = tool(tmp.path(), &["rebuild", "--json"]);
    assert!(rebuilt.ok, "{}", rebuilt.all());
    let titles = json(&rebuilt)["titles"].clone();
    for t in titles.as_array().unwrap() {
        assert_eq!(t["written"], 10, "{}", rebuilt.all());
    }
    for (app, title) in [(named(), "Same_Name"), (titled(), "other-title")] {
        let again = app.run();
        let w = again.watch();
        assert_eq!((w.found, w.compiled), (10, 0), "{title}\n{}", again.all());
        assert_eq!(record_held(&store.join(title)).pipelines, 10);
    }
}

/// A title run with two device configurations: `pipekeep rebuild` makes both, each on its own
/// instance and device, and each configuration's next run finds all of its pipelines.
#[test]
fn the_rebuild_makes_every_configuration_of_a_title() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = ["--compute", "6", "--graphics", "4", "--threads", "2"];
    let robust = [&plain[..], &["--robust-buffer-access", "--api", "1.0"]].concat();
    for args in [&plain[..], &robust[..]] {
        let cold = test_app(tmp.path(), args).run();
        assert_eq!(cold.watch().written, 10, "{}", cold.all());
    }
    let title = tmp.path().join("store/pipekeep-testapp");
    remove_identities(&title);
    let rebuilt = tool(tmp.path(), &["rebuild", "--json"]);
    assert!(rebuilt.ok, "{}", rebuilt.all());
    let r = json(&rebuilt)["titles"][0].clone();
    assert_eq!(
        (
            r["configurations"].as_u64(),
            r["configurations_skipped"].as_u64(),
            r["written"].as_u64()
        ),
        (Some(2), Some(0), Some(20)),
        "{}",
        rebuilt.all()
    );
    assert!(!title.join("record.pending").exists());
    for args in [&plain[..], &robust[..]] {
        let again = test_app(tmp.path(), args).run();
        let w = again.watch();
        assert_eq!((w.found, w.compiled), (10, 0), "{}", again.all());
    }
    let held = record_held(&title);
    assert_eq!(
        (held.applications.len(), held.pipelines, held.links),
        (2, 20, 20)
    );
}

/// The pipelines a title's record holds (compute and graphics entries, whole).
fn recorded_pipelines(title: &Path) -> usize {
    let bytes = std::fs::read(title.join("record.foz")).unwrap();
    pipekeep::replay::foz::read_entries(&bytes)
        .unwrap()
        .iter()
        .filter(|e| matches!(e.tag, 6 | 7 | 9) && e.payload.is_ok())
        .count()
}

/// Issue 31, item 3: entries that vanish for any reason but the bound (a user removing the
/// identity directory, `pipekeep clear` of entries, a driver change) leave the record whole: the
/// next opening compacted it to nothing ("most of its pipelines had lost their entries").
#[test]
fn entries_removed_by_hand_leave_every_pipeline_in_the_record() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(test_app(tmp.path(), &MIX).run().watch().written, 40);
    let title = tmp.path().join("store/pipekeep-testapp");
    assert_eq!(recorded_pipelines(&title), 40);
    remove_identities(&title);
    // No pipeline of its own: the opening thread bounds (and would compact) while it lingers.
    let idle = test_app(
        tmp.path(),
        &["--compute", "0", "--graphics", "0", "--linger-ms", "500"],
    )
    .run();
    assert!(idle.ok, "{}", idle.all());
    assert!(!idle.stderr.contains("record compacted"), "{}", idle.all());
    assert_eq!(recorded_pipelines(&title), 40, "{}", idle.all());
}

/// Issue 31, item 3: 200 damaged bytes of a record cost the pipelines they touch: `pipekeep
/// rebuild` rebuilds the rest and says how many it skipped (it exited 2 saying the layer was not
/// active, rebuilt nothing and left a 16-byte record).
#[test]
fn a_record_with_200_damaged_bytes_rebuilds_all_but_the_damaged_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let (title, record, mut bytes) = a_record_without_its_entries(tmp.path());
    let len = bytes.len();
    let at = len / 2;
    bytes[at..at + 200].fill(0x5a);
    std::fs::write(&record, &bytes).unwrap();
    let rebuilt = tool(tmp.path(), &["rebuild", "--json"]);
    let r = &json(&rebuilt)["titles"][0];
    let written = r["written"].as_u64().unwrap();
    let skipped = r["damaged_skipped"].as_u64().unwrap_or(0);
    assert!((30..40).contains(&written), "{}", rebuilt.all());
    assert!(skipped > 0, "{}", rebuilt.all());
    assert!(std::fs::metadata(&record).unwrap().len() as usize >= len - 200);
    let said = tool(tmp.path(), &["rebuild"]);
    assert!(said.stdout.contains("damaged"), "{}", said.all());
    // The application's next run finds what was rebuilt and records again what the damage cost.
    let next = test_app(tmp.path(), &MIX).run();
    assert_eq!(next.watch().found, written, "{}", next.all());
    assert_eq!(recorded_pipelines(&title), 40, "{}", next.all());
}

/// Issue 31, item 2: the boot survives the bound. Bound = 40% of one full run's entry and piece
/// bytes; two runs under it; then a run of the first 20 pipelines only (the boot, in the order
/// the full run made them) finds all 20 (found 0 to 5: the record, larger than the entries it
/// backs and never dropped, pushed them out). `prune` and `list` show both shares.
#[test]
fn under_a_bound_of_40_percent_of_a_run_the_boots_first_pipelines_are_all_found() {
    let tmp = tempfile::tempdir().unwrap();
    let full = ["--compute", "40", "--graphics", "96", "--threads", "1"];
    let cold = test_app(tmp.path(), &full).run();
    assert_eq!(cold.watch().written, 136, "{}", cold.all());
    let store = tmp.path().join("store");
    let kept: u64 = entries_and_pieces(&store)
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let bound = kept * 4 / 10;
    for _ in 0..2 {
        let run = test_app(tmp.path(), &full)
            .env("PIPEKEEP_MAX_BYTES", bound.to_string())
            .run();
        assert!(run.ok, "{}", run.all());
    }
    let boot = test_app(
        tmp.path(),
        &["--compute", "20", "--graphics", "0", "--threads", "1"],
    )
    .env("PIPEKEEP_MAX_BYTES", bound.to_string())
    .run();
    let w = boot.watch();
    assert_eq!(
        (w.built, w.found),
        (20, 20),
        "bound {bound}\n{}",
        boot.all()
    );
    let record = std::fs::metadata(store.join("pipekeep-testapp/record.foz"))
        .unwrap()
        .len();
    assert!(
        record <= bound / 4,
        "record {record} past its share of {bound}"
    );

    let listed = json(
        &App::tool(Driver::Radv, tmp.path())
            .env("PIPEKEEP_MAX_BYTES", bound.to_string())
            .args(&["list", "--json"])
            .run(),
    );
    let r = &listed["titles"][0]["record"];
    assert_eq!(r["share"].as_u64(), Some(bound / 4), "{listed}");
    let pruned = json(&tool(
        tmp.path(),
        &[
            "prune",
            "--max-bytes",
            &bound.to_string(),
            "--dry-run",
            "--json",
        ],
    ));
    let p = &pruned["titles"][0];
    assert_eq!(p["record_bytes"].as_u64(), Some(record), "{pruned}");
    assert_eq!(p["record_share"].as_u64(), Some(bound / 4), "{pruned}");
    assert!(
        p["entries_bytes"].as_u64().unwrap() <= bound - record,
        "{pruned}"
    );
    let text = tool(
        tmp.path(),
        &["prune", "--max-bytes", &bound.to_string(), "--dry-run"],
    );
    assert!(text.stdout.contains("record"), "{}", text.all());
}

/// Issue 31, item 3: 200 damaged bytes over the configuration's own entry (the record's first):
/// `pipekeep rebuild` cannot know the device its pipelines were made for, so it leaves them to
/// the application's background rebuild and says so (it said the layer was not active, and
/// exited 2), and the record keeps them.
#[test]
fn a_record_whose_configuration_entry_is_damaged_leaves_its_pipelines_to_the_application() {
    let tmp = tempfile::tempdir().unwrap();
    let (title, record, mut bytes) = a_record_without_its_entries(tmp.path());
    bytes[16..216].fill(0x5a);
    std::fs::write(&record, &bytes).unwrap();
    let rebuilt = tool(tmp.path(), &["rebuild"]);
    assert!(!rebuilt.stderr.contains("not active"), "{}", rebuilt.all());
    assert!(
        rebuilt.stdout.contains("application entry is damaged"),
        "{}",
        rebuilt.all()
    );
    assert!(title.join("record.pending").is_file(), "{}", rebuilt.all());
    assert!(recorded_pipelines(&title) >= 36);
}

/// The rebuild's instance enables the instance extensions the application did (a device
/// extension such as `VK_KHR_swapchain` needs `VK_KHR_surface`): the validation layer below the
/// rebuild's device reports nothing but the structures Debian 12's validation layer (1.3.239)
/// does not know, its own limit. (The application: every extension offered, at API 1.3.)
#[test]
fn validation_below_the_rebuilds_device_reports_nothing() {
    {
        let api = "1.3";
        let tmp = tempfile::tempdir().unwrap();
        let cold = App::new(Driver::Radv, tmp.path())
            .with_layer()
            .args(&[
                "--compute",
                "4",
                "--graphics",
                "4",
                "--every-extension",
                "--api",
                api,
            ])
            .run();
        assert!(cold.ok, "{}", cold.all());
        std::fs::remove_dir_all(tmp.path().join("store/pipekeep-testapp/host-pipelines")).unwrap();
        let rebuilt = App::tool(Driver::Radv, tmp.path())
            .env("VK_INSTANCE_LAYERS", format!("{LAYER}:{VALIDATION}"))
            .env("VK_LOADER_DEBUG", "layer")
            .args(&["rebuild"])
            .run();
        assert!(rebuilt.ok, "{}", rebuilt.all());
        assert_eq!(
            rebuilt.device_layer_stack(),
            [LAYER, VALIDATION],
            "{}",
            rebuilt.all()
        );
        let messages: Vec<String> = rebuilt
            .validation_messages()
            .into_iter()
            .filter(|m| !m.contains("-pNext-pNext"))
            .collect();
        assert_eq!(
            messages,
            Vec::<String>::new(),
            "API {api}: {}",
            rebuilt.all()
        );
    }
}

/// The pieces under a store root that no entry names (directly, or through a list it names).
fn pieces_no_entry_names(store: &Path) -> Vec<PathBuf> {
    use pipekeep::store::{envelope, pieces, recipe};
    let mut named = std::collections::HashSet::new();
    for entry in entries(store) {
        let bytes = std::fs::read(&entry).unwrap();
        let dir = entry.parent().unwrap();
        for name in envelope::listed_parts(&bytes).map_or(Vec::new(), |(_, n)| n) {
            let path = dir.join(pieces::DIR).join(pieces::file_name(&name));
            if let Ok((members, _)) = std::fs::read(&path)
                .map_err(|_| ())
                .and_then(|b| recipe::parse_list(&b).map_err(|_| ()))
            {
                for (member, _) in members {
                    named.insert(dir.join(pieces::DIR).join(pieces::file_name(&member)));
                }
            }
            named.insert(path);
        }
    }
    pieces(store)
        .into_iter()
        .filter(|p| !named.contains(p))
        .collect()
}

/// Issue 38, item 7: the boot loses to orphaned pieces. The test app's 40 compute and 96
/// graphics pipelines, every stage binary a piece; bound = half of one full run's entry bytes;
/// two runs under it; then a run of the first 20 compute pipelines only (the boot). Its entries
/// fit in what the record's share leaves, so all 20 are found (15-17 of 20 were, with 10-13
/// pieces no entry named still in the store after it: a piece carries the newest stamp of the
/// entries naming it, so once the bound had dropped them it stayed, and the boot's newer entries
/// went instead), and no piece that no entry names stays after the boot's pass.
#[test]
fn under_a_bound_of_half_a_run_pieces_no_entry_names_go_before_the_boots_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let app = |args: &[&str]| test_app(tmp.path(), args).env("PIPEKEEP_TEST_PIECES_ALWAYS", "1");
    let full = ["--compute", "40", "--graphics", "96", "--threads", "1"];
    let cold = app(&full).run();
    assert_eq!(cold.watch().written, 136, "{}", cold.all());
    let store = tmp.path().join("store");
    let size = |p: &PathBuf| std::fs::metadata(p).unwrap().len();
    let bound = entries(&store).iter().map(size).sum::<u64>() / 2;
    let bounded = |args: &[&str]| app(args).env("PIPEKEEP_MAX_BYTES", bound.to_string()).run();
    for _ in 0..2 {
        let run = bounded(&full);
        assert!(run.ok, "{}", run.all());
    }
    let before = pieces_no_entry_names(&store).len();
    let boot = bounded(&["--compute", "20", "--graphics", "0", "--threads", "1"]);
    let w = boot.watch();
    // The boot's entries, stamped newest by it, fit in what the record's share leaves.
    let mut newest = entries(&store);
    newest.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).unwrap().modified().unwrap()));
    let boot_bytes: u64 = newest.iter().take(20).map(size).sum();
    assert!(boot_bytes <= bound - bound / 4, "{boot_bytes} of {bound}");
    let unnamed = pieces_no_entry_names(&store);
    assert_eq!(
        (w.built, w.found),
        (20, 20),
        "bound {bound}, {before} pieces no entry named before the boot, {} after\n{}",
        unnamed.len(),
        boot.all()
    );
    assert_eq!(unnamed, Vec::<PathBuf>::new(), "{}", boot.all());
}

/// A DXVK-style workload (graphics pipeline library parts, fast and optimized links): the parts
/// are recorded (links are built as asked and not kept), `pipekeep rebuild` makes them, and the
/// next run finds every part.
#[test]
fn graphics_pipeline_libraries_are_recorded_rebuilt_and_found() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--compute",
        "0",
        "--graphics",
        "0",
        "--gpl",
        "16",
        "--threads",
        "2",
    ];
    let app = || {
        App::new(Driver::Radv, tmp.path())
            .with_layer()
            .args(&args)
            .run()
    };
    let cold = app();
    assert!(cold.ok, "{}", cold.all());
    let w = cold.watch();
    // 11 parts compiled and kept; 16 fast and 16 optimized links built as asked.
    assert_eq!(
        (w.built, w.compiled, w.written, w.passed, w.unkeyed),
        (43, 11, 11, 32, 0),
        "{}",
        cold.all()
    );
    let title = tmp.path().join("store/pipekeep-testapp");
    std::fs::remove_dir_all(title.join("host-pipelines")).unwrap();
    let rebuilt = tool(tmp.path(), &["rebuild", "--json"]);
    assert!(rebuilt.ok, "{}", rebuilt.all());
    let r = &json(&rebuilt)["titles"][0];
    assert_eq!(
        (r["pipelines"].as_u64(), r["written"].as_u64()),
        (Some(11), Some(11)),
        "{}",
        rebuilt.all()
    );
    let warm = app().watch();
    assert_eq!(
        (warm.found, warm.compiled, warm.passed, warm.unkeyed),
        (11, 0, 32, 0)
    );
}

/// Issue 39: ray-tracing pipelines, half of them linked from a library of their own: each
/// pipeline and library is recorded (tag 9, the links naming their libraries), `pipekeep
/// rebuild` makes the libraries before the pipelines linking them on the application's device as
/// it made it (ray-tracing pipeline, acceleration structure and buffer device address features
/// on), and the next run finds every one; `pipekeep replay` of the record makes them all.
#[test]
fn ray_tracing_pipelines_and_libraries_are_recorded_rebuilt_and_found() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--compute",
        "0",
        "--graphics",
        "0",
        "--rt",
        "8",
        "--threads",
        "2",
    ];
    let app = || {
        App::new(Driver::Radv, tmp.path())
            .with_layer()
            .args(&args)
            .run()
    };
    let cold = app();
    assert!(cold.ok, "{}", cold.all());
    let w = cold.watch();
    // 8 pipelines and the 4 libraries the odd ones link, compiled and kept.
    assert_eq!(
        (w.built, w.compiled, w.written, w.unkeyed),
        (12, 12, 12, 0),
        "{}",
        cold.all()
    );
    let title = tmp.path().join("store/pipekeep-testapp");
    let record = title.join("record.foz");
    let bytes = std::fs::read(&record).unwrap();
    let entries = pipekeep::replay::foz::read_entries(&bytes).unwrap();
    assert_eq!(entries.iter().filter(|e| e.tag == 9).count(), 12);
    assert_eq!(entries.iter().filter(|e| e.tag == 8).count(), 12);
    let device = &record_held(&title).applications[0]["pipekeepDevice"];
    for feature in [1_000_347_000, 1_000_150_013] {
        assert!(
            device["features"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["sType"] == feature),
            "{device}"
        );
    }

    remove_identities(&title);
    let rebuilt = tool(tmp.path(), &["rebuild", "--json"]);
    assert!(rebuilt.ok, "{}", rebuilt.all());
    let r = &json(&rebuilt)["titles"][0];
    assert_eq!(
        (r["pipelines"].as_u64(), r["written"].as_u64()),
        (Some(12), Some(12)),
        "{}",
        rebuilt.all()
    );
    let warm = app();
    let w = warm.watch();
    assert_eq!(
        (w.found, w.compiled, w.unkeyed),
        (12, 0, 0),
        "{}",
        warm.all()
    );
    assert_eq!(warm.summary["rt"]["handles_ok"], 8, "{}", warm.all());

    let replayed = tool(
        tmp.path(),
        &[
            "replay",
            "--json",
            "--order",
            "hash",
            record.to_str().unwrap(),
        ],
    );
    assert!(replayed.ok, "{}", replayed.all());
    let s = json(&replayed);
    assert_eq!(
        (s["pipelines"].as_u64(), s["made_ray_tracing"].as_u64()),
        (Some(12), Some(12)),
        "{s}"
    );
}

/// Issue 39: after a driver change the background rebuild, on the application's own device
/// (each pipeline's layout and modules made around it), makes the recorded ray-tracing libraries
/// before the pipelines linking them, and the next run finds every one.
#[test]
fn after_a_driver_change_ray_tracing_pipelines_are_rebuilt_in_the_background() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = |n: &'static str| {
        [
            "--compute",
            "0",
            "--graphics",
            "0",
            "--rt",
            n,
            "--threads",
            "2",
        ]
    };
    let cold = test_app(tmp.path(), &rt("8")).run();
    assert_eq!(cold.watch().written, 12, "{}", cold.all());
    let title = tmp.path().join("store/pipekeep-testapp");
    simulate_a_driver_change(&title);
    // A short run of the same device (its configuration's pipelines are the rebuild's).
    let short = test_app(
        tmp.path(),
        &[&rt("2")[..], &["--linger-ms", "200"]].concat(),
    )
    .env("PIPEKEEP_TEST_REBUILD_FIRST", "1")
    .run_within(std::time::Duration::from_secs(120));
    assert!(short.ok, "{}", short.all());
    assert!(
        short
            .stderr
            .contains("background rebuild ended made=12 of=12 skipped=0"),
        "{}",
        short.all()
    );
    assert!(!title.join("record.pending").exists(), "{}", short.all());
    let warm = test_app(tmp.path(), &rt("8")).run();
    let w = warm.watch();
    assert_eq!((w.found, w.compiled), (12, 0), "{}", warm.all());
}
