//! The `binary` backend through the real loader on RADV (null hardware), which offers
//! `VK_KHR_pipeline_binary`: pipelines kept with and without an application cache, damage,
//! entries of the other kind, the device's state in the key, and a driver that refuses binaries
//! another process wrote.

mod common;
use common::*;
use std::path::Path;

const MIX: [&str; 8] = [
    "--compute",
    "30",
    "--graphics",
    "14",
    "--threads",
    "2",
    "--batch",
    "4",
];

fn run(tmp: &Path, backend: &str, extra: &[&str]) -> Run {
    let run = App::new(Driver::Radv, tmp)
        .with_layer()
        .env("PIPEKEEP_BACKEND", backend)
        .args(&[&MIX[..], extra].concat())
        .run();
    assert!(run.ok, "{}", run.all());
    run
}

fn backend_of(run: &Run) -> &str {
    if run.stderr.contains("backend=\"binary\"") {
        "binary"
    } else if run.stderr.contains("backend=\"cache\"") {
        "cache"
    } else {
        panic!("no backend in the log\n{}", run.all())
    }
}

#[test]
fn auto_takes_binary_on_radv_and_keeps_pipelines_with_or_without_an_application_cache() {
    for app_cache in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let extra: &[&str] = if app_cache { &["--app-cache"] } else { &[] };
        let cold = run(tmp.path(), "auto", extra);
        assert_eq!(backend_of(&cold), "binary");
        let w = cold.watch();
        assert_eq!(
            (w.built, w.compiled, w.written),
            (44, 44, 44),
            "app cache {app_cache}: {}",
            cold.all()
        );
        let warm = run(tmp.path(), "auto", &[extra, &["--feedback"]].concat());
        let w = warm.watch();
        assert_eq!(
            (w.built, w.found, w.compiled),
            (44, 44, 0),
            "{}",
            warm.all()
        );
        assert_eq!(
            warm.summary["feedback_hits"], 44,
            "a found pipeline reports a cache hit"
        );
    }
}

/// pygfx's pipelines differ in state RADV's code does not depend on: through the application's
/// shared cache the driver serves many from one compile, which a build with the capture flag may
/// not use. The layer asks the driver's key and builds such a miss from the binaries of the
/// pipeline compiled earlier in the run; each pipeline still gets its own entry, and the next
/// run finds them all.
#[test]
fn pipelines_the_driver_builds_alike_share_one_compile_and_each_keeps_its_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let db = corpus("pygfx-1008variants.foz");
    let replay = || {
        let run = App::tool(Driver::Radv, tmp.path())
            .with_layer()
            .env("PIPEKEEP_BACKEND", "binary")
            .args(&[
                "replay",
                "--json",
                "--threads",
                "1",
                "--app-cache",
                "memory",
            ])
            .args(&[db.to_str().unwrap()])
            .run();
        assert!(run.ok, "{}", run.all());
        assert_eq!(run.made(), 641, "{}", run.all());
        run
    };
    let cold = replay();
    let w = cold.watch();
    assert_eq!(
        (w.built, w.compiled, w.written),
        (641, 641, 641),
        "{}",
        cold.all()
    );
    // Mesa 25.0.7 (the SPEC's): 256 of the 641 share another's compile.
    assert!(w.shared >= 200, "{}", cold.all());
    let warm = replay();
    let w = warm.watch();
    assert_eq!(
        (w.found, w.compiled, w.shared),
        (641, 0, 0),
        "{}",
        warm.all()
    );
}

#[test]
fn inline_spirv_finds_what_modules_kept_and_what_a_rebuild_kept() {
    // DXVK's library parts and vkd3d-proton chain their SPIR-V on the stage; the rebuild,
    // `pipekeep replay` and Valve's replayer make modules of it. The driver's key must agree.
    let tmp = tempfile::tempdir().unwrap();
    let inline = ["--inline-spirv", "--gpl", "8"];
    let modules = run(tmp.path(), "binary", &["--gpl", "8"]);
    let kept = modules.watch().written;
    assert!(kept >= 44, "{}", modules.all());
    let asked_inline = run(tmp.path(), "binary", &inline);
    let w = asked_inline.watch();
    assert_eq!((w.found, w.compiled), (kept, 0), "{}", asked_inline.all());

    std::fs::remove_dir_all(tmp.path().join("store/pipekeep-testapp/host-pipelines")).unwrap();
    let rebuilt = App::tool(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_BACKEND", "binary")
        .args(&["rebuild", "--threads", "2"])
        .run();
    assert!(rebuilt.ok, "{}", rebuilt.all());
    let after = run(tmp.path(), "binary", &inline);
    let w = after.watch();
    assert_eq!((w.found, w.compiled), (kept, 0), "{}", after.all());
}

#[test]
fn lavapipe_offers_no_binaries_and_auto_takes_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let run = App::new(Driver::Lavapipe, tmp.path())
        .with_layer()
        .args(&["--compute", "4", "--graphics", "2", "--dispatch"])
        .run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(backend_of(&run), "cache");
    assert_eq!(run.summary["dispatch"], "ok");
}

#[test]
fn a_damaged_binary_payload_is_dropped_compiled_afresh_and_written_again() {
    let tmp = tempfile::tempdir().unwrap();
    run(tmp.path(), "binary", &[]);
    let all = entries(&tmp.path().join("store"));
    let victim = &all[5];
    let mut bytes = std::fs::read(victim).unwrap();
    let middle = 120 + (bytes.len() - 120) / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(victim, &bytes).unwrap();
    let name = victim.file_name().unwrap().to_str().unwrap();

    let again = run(tmp.path(), "binary", &[]);
    let w = again.watch();
    assert_eq!(
        (w.found, w.compiled, w.written),
        (43, 1, 1),
        "{}",
        again.all()
    );
    assert!(
        again
            .stderr
            .contains(&format!("dropped entry={name} reason=corrupt")),
        "{}",
        again.all()
    );
    assert_eq!(run(tmp.path(), "binary", &[]).watch().found, 44);
}

#[test]
fn the_binary_backend_serves_entries_the_cache_backend_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    run(tmp.path(), "cache", &[]);
    let warm = run(tmp.path(), "binary", &[]);
    let w = warm.watch();
    assert_eq!((w.found, w.compiled), (44, 0), "{}", warm.all());
    // The cache backend, forced, keeps the device as the application made it: entries of
    // binaries are then compiled afresh and written again as caches, and found after.
    let tmp = tempfile::tempdir().unwrap();
    run(tmp.path(), "binary", &[]);
    let forced = run(tmp.path(), "cache", &[]);
    assert_eq!(forced.watch().written, 44, "{}", forced.all());
    assert_eq!(run(tmp.path(), "cache", &[]).watch().found, 44);
}

#[test]
fn devices_with_and_without_robust_buffer_access_never_serve_each_others_entries() {
    let tmp = tempfile::tempdir().unwrap();
    run(tmp.path(), "binary", &[]);
    let robust = run(tmp.path(), "binary", &["--robust-buffer-access"]);
    let w = robust.watch();
    assert_eq!(
        (w.found, w.compiled),
        (0, 44),
        "another device state is another key\n{}",
        robust.all()
    );
    assert_eq!(entries(&tmp.path().join("store")).len(), 88);
    assert_eq!(run(tmp.path(), "binary", &[]).watch().found, 44);
    let again = run(tmp.path(), "binary", &["--robust-buffer-access"]);
    assert_eq!(again.watch().found, 44);
}

#[test]
fn a_driver_that_refuses_binaries_costs_a_few_compiles_once_and_is_remembered() {
    let tmp = tempfile::tempdir().unwrap();
    run(tmp.path(), "auto", &[]);
    // As NVIDIA refuses binaries another process wrote: three refusals, then caches.
    let refusing = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_BACKEND", "auto")
        .env("PIPEKEEP_TEST_REFUSE_BINARIES", "1")
        .args(&MIX)
        .run();
    assert!(refusing.ok, "{}", refusing.all());
    assert_eq!(refusing.made(), 44);
    assert_eq!(
        refusing
            .stderr
            .matches("the driver refuses pipeline binaries another process wrote")
            .count(),
        1,
        "{}",
        refusing.all()
    );
    let w = refusing.watch();
    assert_eq!((w.compiled, w.written), (44, 44), "{}", refusing.all());
    let remembered = std::fs::read_dir(tmp.path().join("store/pipekeep-testapp/host-pipelines"))
        .unwrap()
        .flatten()
        .any(|d| d.path().join(pipekeep::store::REFUSES_BINARIES).is_file());
    assert!(remembered);
    // The next run starts with caches, and finds everything the switch wrote.
    let next = run(tmp.path(), "auto", &[]);
    assert_eq!(backend_of(&next), "cache");
    let w = next.watch();
    assert_eq!((w.found, w.compiled), (44, 0), "{}", next.all());
}
