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
    draw_in(exe, tmp, with_layer, &[], &[])
}

/// [`draw`], the program given `extra` after its count of programs, in zink's `environment`.
fn draw_in(
    exe: &Path,
    tmp: &Path,
    with_layer: bool,
    extra: &[&str],
    environment: &[(&str, &str)],
) -> Run {
    let mut app = App::program(exe, Driver::Lavapipe, tmp)
        .env("GALLIUM_DRIVER", "zink")
        .env("LIBGL_ALWAYS_SOFTWARE", "1")
        .env("EGL_PLATFORM", "surfaceless")
        .args(&[&[PROGRAMS][..], extra].concat());
    for (k, v) in environment {
        app = app.env(k, v);
    }
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

/// zink makes the stages of separable programs (GL ES 3.1 program pipelines, as desktop GL games
/// and emulators make theirs) as shader objects where it runs with optimal keys, which lavapipe
/// 25.0 gives it only under `ZINK_DEBUG=optimal_keys` (RADV gives them; zink cannot run on RADV's
/// null device). Before: every one passed through pipekeep unseen and was compiled again at
/// every launch; now each is kept at the first and made from its binary at the next, and the
/// pixels are the ones drawn without the layer.
#[test]
fn separable_programs_zink_makes_as_shader_objects_are_kept_and_draw_as_without_the_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = triangles(tmp.path());
    let optimal = [("ZINK_DEBUG", "optimal_keys")];
    let alone = draw_in(&exe, tmp.path(), false, &["separable"], &optimal);
    let shaders = |run: &Run| {
        let w = run.watch();
        (
            w.shaders_compiled,
            w.shaders_from_entries,
            w.shaders_unkeyed,
        )
    };
    let cold = draw_in(&exe, tmp.path(), true, &["separable"], &optimal);
    let (compiled, found, unkeyed) = shaders(&cold);
    assert!(
        compiled >= 40 && found == 0 && unkeyed == 0,
        "{}",
        cold.all()
    );
    // Shaders of one content share an entry: a second write of it may be skipped.
    let written = cold.watch().written;
    assert!(written > 0 && written <= compiled, "{}", cold.all());
    assert_eq!(pixels(&cold), pixels(&alone), "{}", cold.all());
    let warm = draw_in(&exe, tmp.path(), true, &["separable"], &optimal);
    assert_eq!(shaders(&warm), (0, compiled, 0), "{}", warm.all());
    assert_eq!(pixels(&warm), pixels(&alone), "{}", warm.all());
}
