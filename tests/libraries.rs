//! What translation layers and ray-traced renderers build, through the real loader on RADV (null
//! hardware), which offers graphics pipeline libraries and ray-tracing pipelines: the test app's
//! DXVK-like mode (library parts, fast and optimized links) and its ray-tracing mode (pipelines
//! and libraries, with and without deferred operations). Cold then warm through the default
//! backend (and the `cache` backend in scripts/test.sh's second matrix), and with the Khronos
//! validation layer above and below pipekeep adding nothing to what the application alone gives.

mod common;
use common::*;
use std::collections::BTreeSet;
use std::path::Path;

const GPL: [&str; 8] = [
    "--compute",
    "0",
    "--graphics",
    "0",
    "--gpl",
    "24",
    "--threads",
    "2",
];
const RT: [&str; 8] = [
    "--compute",
    "0",
    "--graphics",
    "0",
    "--rt",
    "8",
    "--threads",
    "2",
];

/// Graphics pipelines as zink makes them (nearly all state dynamic; tests/zink.rs runs zink
/// itself on lavapipe, which keeps nothing).
const ZINK: [&str; 8] = [
    "--compute",
    "0",
    "--graphics",
    "12",
    "--threads",
    "2",
    "--every-extension",
    "--zink-dynamic",
];

fn run(tmp: &Path, args: &[&str], layers: Option<[&str; 2]>) -> Run {
    let app = App::new(Driver::Radv, tmp).env("VK_LOADER_DEBUG", "layer");
    let app = match layers {
        Some(order) => app.args(&["--layers", &order.join(",")]),
        None => app.with_layer(),
    };
    let run = app.args(args).run();
    assert!(run.ok, "{}", run.all());
    run
}

/// The kinds of validation message a run printed, each once.
fn kinds(run: &Run) -> BTreeSet<String> {
    run.validation_messages()
        .iter()
        .filter_map(|m| m.split("[ ").nth(1)?.split(' ').next().map(str::to_owned))
        .collect()
}

#[test]
fn library_parts_are_found_warm_and_links_built_as_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let gpl = [&GPL[..], &["--feedback"]].concat();
    let cold = run(tmp.path(), &gpl, None);
    let w = cold.watch();
    // The 11 parts kept; the 24 fast and 24 optimized links built as asked.
    assert_eq!(
        (w.built, w.compiled, w.written, w.passed, w.unkeyed),
        (59, 11, 11, 48, 0),
        "{}",
        cold.all()
    );
    let warm = run(tmp.path(), &gpl, None);
    let w = warm.watch();
    assert_eq!(
        (w.found, w.compiled, w.passed, w.unkeyed),
        (11, 0, 48, 0),
        "{}",
        warm.all()
    );
    assert_eq!(warm.summary["gpl"]["optimized_links"], 24);
    assert_eq!(
        warm.summary["gpl"]["part_feedback_hits"],
        11,
        "a found part reports a cache hit: {}",
        warm.all()
    );
}

#[test]
fn pipelines_with_zink_s_dynamic_states_are_kept_and_found_warm() {
    let tmp = tempfile::tempdir().unwrap();
    let cold = run(tmp.path(), &ZINK, None);
    // In the summary on stdout: the layer's threads write to stderr in between a line's pieces.
    assert_eq!(
        cold.summary["zink_dynamic_states"],
        42,
        "RADV enables every state zink names: {}",
        cold.all()
    );
    let w = cold.watch();
    assert_eq!(
        (w.built, w.compiled, w.written, w.unkeyed),
        (12, 12, 12, 0),
        "{}",
        cold.all()
    );
    let w = run(tmp.path(), &ZINK, None).watch();
    assert_eq!((w.found, w.compiled, w.unkeyed), (12, 0, 0));
}

#[test]
fn ray_tracing_pipelines_and_libraries_are_found_warm_with_valid_group_handles() {
    for deferred in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let args = [
            &RT[..],
            &["--feedback"],
            if deferred { &["--deferred"] } else { &[] },
        ]
        .concat();
        let cold = run(tmp.path(), &args, None);
        let w = cold.watch();
        assert_eq!(
            (w.built, w.compiled, w.unkeyed),
            (12, 12, 0),
            "{}",
            cold.all()
        );
        assert_eq!(cold.summary["rt"]["feedback_hits"], 0, "{}", cold.all());
        let warm = run(tmp.path(), &args, None);
        let w = warm.watch();
        assert_eq!((w.found, w.compiled), (12, 0), "{}", warm.all());
        assert_eq!(warm.summary["rt"]["handles_ok"], 8, "{}", warm.all());
        assert_eq!(
            warm.summary["rt"]["feedback_hits"],
            12,
            "a found pipeline or library reports a cache hit: {}",
            warm.all()
        );
    }
}

/// The validation layer above and below pipekeep, cold and warm, reports no kind of message the
/// application does not give alone (Debian 12's validation layer, 1.3.239, calls structures
/// newer than it unknown: the application's own maintenance5 among them; it takes a library
/// whose flags are in flags2, as DXVK gives them, for a complete pipeline and crashes, so the
/// parts give theirs as zink does, in the legacy member). With creation feedback, and ray tracing
/// through deferred operations.
#[test]
fn the_validation_layer_above_and_below_reports_nothing_pipekeep_adds() {
    // Creation feedback chained throughout, the layer writing into the application's records.
    let zink = [&GPL[..], &["--gpl-legacy-flags", "--feedback"]].concat();
    let rt = [&RT[..], &["--deferred", "--feedback"]].concat();
    let dynamic = [&ZINK[..], &["--feedback"]].concat();
    for mode in [&zink[..], &rt[..], &dynamic[..]] {
        let tmp = tempfile::tempdir().unwrap();
        let alone = App::new(Driver::Radv, tmp.path())
            .args(&["--layers", VALIDATION])
            .args(mode)
            .run();
        assert!(alone.ok, "{}", alone.all());
        let baseline = kinds(&alone);
        for order in [[LAYER, VALIDATION], [VALIDATION, LAYER]] {
            for launch in ["cold", "warm"] {
                let with = run(tmp.path(), mode, Some(order));
                assert_eq!(with.device_layer_stack(), order, "{}", with.all());
                assert_eq!(kinds(&with), baseline, "{order:?} {launch}: {}", with.all());
            }
        }
    }
}
