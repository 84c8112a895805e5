//! Mesa's zink (OpenGL on Vulkan) through the real loader, as OpenGL applications reach pipekeep:
//! a GL ES program (tests/zink/triangles.c, built here with the system's C compiler) draws 40
//! triangles with 40 programs on lavapipe. Through pipekeep every pipeline zink makes is keyed
//! (its state nearly all dynamic, its vertex input among it), and the pixels are the ones drawn
//! without it. lavapipe keeps nothing in its cache, so nothing is written; zink cannot run on
//! RADV's null device (no timeline semaphores), and the test app's `--zink-dynamic` mode makes
//! its pipelines there, kept and found (tests/libraries.rs, tests/record.rs).

mod common;
use common::*;
use std::path::{Path, PathBuf};

const PROGRAMS: &str = "40";

/// The GL ES program, built into `tmp`.
fn triangles(tmp: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zink/triangles.c");
    let exe = tmp.join("triangles");
    let out = std::process::Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&source)
        .args(["-lEGL", "-lGLESv2"])
        .output()
        .expect("a C compiler (scripts/setup.sh installs one)");
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn draw(exe: &Path, tmp: &Path, with_layer: bool) -> Run {
    let app = App::program(exe, Driver::Lavapipe, tmp)
        .env("GALLIUM_DRIVER", "zink")
        .env("LIBGL_ALWAYS_SOFTWARE", "1")
        .env("EGL_PLATFORM", "surfaceless")
        .args(&[PROGRAMS]);
    let run = if with_layer { app.with_layer() } else { app }.run();
    assert!(run.ok, "{}", run.all());
    assert!(
        run.stdout.contains("renderer: zink"),
        "zink draws: {}",
        run.all()
    );
    run
}

fn pixels(run: &Run) -> &str {
    run.stdout
        .lines()
        .find_map(|l| l.strip_prefix("pixels: "))
        .unwrap_or_else(|| panic!("no checksum\n{}", run.all()))
}

#[test]
fn every_pipeline_zink_makes_is_keyed_and_draws_as_without_the_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = triangles(tmp.path());
    let alone = draw(&exe, tmp.path(), false);
    assert!(!alone.layer_inserted(), "{}", alone.all());
    for launch in ["cold", "warm"] {
        let with = draw(&exe, tmp.path(), true);
        assert!(with.layer_active(), "{launch}: {}", with.all());
        let w = with.watch();
        assert!(w.built >= 40, "{launch}: {}", with.all());
        assert_eq!((w.unkeyed, w.passed), (0, 0), "{launch}: {}", with.all());
        assert_eq!(pixels(&with), pixels(&alone), "{launch}: {}", with.all());
    }
}
