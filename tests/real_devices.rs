//! Devices as real applications make them, through the real loader: every extension offered
//! and every feature structure chained (as DXVK, vkd3d-proton, emulators and replay tools do),
//! a driver option that changes the driver's global pipeline key, older API versions, and the
//! validation layer below pipekeep. What pipekeep adds to a device stays its own.

mod common;

use common::{App, Driver, Run, LAYER};

const VALIDATION: &str = "VK_LAYER_KHRONOS_validation";
const LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// The integration tests run once a backend (scripts/test.sh): `cache` forced, or the default.
fn cache_forced() -> bool {
    std::env::var("PIPEKEEP_TEST_BACKEND").is_ok_and(|b| b == "cache")
}

/// The backend pipekeep's device line named.
fn backend(run: &Run) -> &str {
    let line = run
        .stderr
        .lines()
        .find(|l| l.contains("pipekeep is active on a device"))
        .unwrap_or_else(|| panic!("no device line\n{}", run.all()));
    let field = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("backend="))
        .unwrap_or_else(|| panic!("no backend= in {line}"));
    field.trim_matches('"')
}

fn every_extension(driver: Driver, tmp: &std::path::Path, extra: &[&str]) -> Run {
    let run = App::new(driver, tmp)
        .with_layer()
        .args(&[&["--every-extension"], extra].concat())
        .run_within(LIMIT);
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.made(), run.expected(), "{}", run.all());
    assert!(
        run.stderr.contains("testapp: every extension:"),
        "{}",
        run.all()
    );
    run
}

#[test]
fn an_application_that_enables_every_extension_gets_binaries_on_radv_and_finds_every_pipeline() {
    let tmp = tempfile::tempdir().unwrap();
    let cold = every_extension(Driver::Radv, tmp.path(), &[]);
    let expected = if cache_forced() { "cache" } else { "binary" };
    assert_eq!(backend(&cold), expected, "{}", cold.all());
    assert_eq!(cold.watch().compiled, 60, "{}", cold.all());
    assert_eq!(cold.watch().unkeyed, 0, "{}", cold.all());
    let warm = every_extension(Driver::Radv, tmp.path(), &[]);
    assert_eq!(warm.watch().found, 60, "{}", warm.all());
    assert_eq!(warm.watch().compiled, 0, "{}", warm.all());
}

/// RADV compiles a pipeline whose line mode is dynamic otherwise where `smoothLines` is on
/// (its lowering of smooth lines), and its global pipeline key does not say so: the binaries a
/// device without the feature kept are another pipeline's code on a device with it. The driver's
/// key for each create info, kept with its binaries, tells them apart.
#[test]
fn binaries_kept_without_smooth_lines_are_never_loaded_on_a_device_with_them() {
    if cache_forced() {
        return; // entries of pipeline caches: the driver's own cache key checks them
    }
    let tmp = tempfile::tempdir().unwrap();
    let lines = ["--zink-dynamic", "--graphics", "4", "--compute", "0"];
    let off = every_extension(
        Driver::Radv,
        tmp.path(),
        &[&lines[..], &["--smooth-lines-off"]].concat(),
    );
    assert!(
        !off.stdout.contains("\"zink_dynamic_states\":0"),
        "{}",
        off.all()
    );
    assert_eq!(off.watch().compiled, 4, "{}", off.all());
    let on = every_extension(Driver::Radv, tmp.path(), &lines);
    assert_eq!(on.watch().found, 0, "{}", on.all());
    assert_eq!(on.watch().compiled, 4, "{}", on.all());
    // Each kept again under its own driver key: found where the device is as it was.
    let on_again = every_extension(Driver::Radv, tmp.path(), &lines);
    assert_eq!(on_again.watch().found, 4, "{}", on_again.all());
}

#[test]
fn an_application_that_enables_every_extension_runs_and_dispatches_right_on_lavapipe() {
    let tmp = tempfile::tempdir().unwrap();
    let run = every_extension(Driver::Lavapipe, tmp.path(), &["--dispatch"]);
    assert_eq!(backend(&run), "cache", "{}", run.all());
    assert_eq!(run.summary["dispatch"], "ok", "{}", run.all());
}

#[test]
fn a_driver_option_that_changes_the_global_key_finds_nothing_kept_under_another_then_everything() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |option: Option<&str>| {
        let app = App::new(Driver::Radv, tmp.path()).with_layer();
        let app = match option {
            Some(o) => app.env(o, "true"),
            None => app,
        };
        let run = app.run_within(LIMIT);
        assert!(run.ok, "{}", run.all());
        assert_eq!(run.made(), 60, "{}", run.all());
        run.watch()
    };
    assert_eq!(run(None).compiled, 60);
    assert_eq!(run(None).found, 60);
    // A driconf option, as Mesa also sets for some engines by name: RADV's global key changes.
    let under = run(Some("radv_disable_trunc_coord"));
    assert_eq!(
        under.found, 0,
        "data kept under another global key is not used"
    );
    assert_eq!(under.compiled, 60);
    assert_eq!(run(Some("radv_disable_trunc_coord")).found, 60);
    // Both states keep their entries: back without the option, everything is found.
    assert_eq!(run(None).found, 60);
}

#[test]
fn extensions_pipekeep_adds_need_what_they_depend_on_and_stay_hidden_from_the_application() {
    for api in ["1.0", "1.1", "1.2", "1.3", "1.4"] {
        let tmp = tempfile::tempdir().unwrap();
        let run = App::new(Driver::Radv, tmp.path())
            .with_layer()
            .args(&["--api", api])
            .run_within(LIMIT);
        assert!(run.ok, "{api}: {}", run.all());
        assert_eq!(run.made(), run.expected(), "{api}: {}", run.all());
        // Today's RADV (Mesa 25.0) handed the application vkCreatePipelineBinariesKHR and
        // vkCmdBindIndexBuffer2KHR, which only pipekeep had enabled.
        assert_eq!(
            run.summary["commands_not_enabled"],
            serde_json::json!([]),
            "{api}: {}",
            run.all()
        );
        // maintenance5 needs Vulkan 1.1 and dynamic rendering: below 1.2 pipekeep adds nothing
        // (at 1.1 an application that enabled dynamic rendering itself has binaries).
        let expected = match api {
            _ if cache_forced() => "cache",
            "1.1" if common::every_extension_matrix() => "binary",
            "1.0" | "1.1" => "cache",
            _ => "binary",
        };
        assert_eq!(backend(&run), expected, "{api}: {}", run.all());
        let warm = App::new(Driver::Radv, tmp.path())
            .with_layer()
            .args(&["--api", api])
            .run_within(LIMIT);
        assert_eq!(warm.watch().found, warm.made(), "{api}: {}", warm.all());
    }
}

/// A run with Debian 12's validation layer below pipekeep, through the default backend.
fn validation_below(tmp: &std::path::Path, extra: &[&str]) -> Run {
    let run = App::new(Driver::Radv, tmp)
        .env("VK_LOADER_DEBUG", "layer")
        .args(&[&["--layers", &[LAYER, VALIDATION].join(",")], extra].concat())
        .run_within(LIMIT);
    assert!(run.ok, "the application must run\n{}", run.all());
    assert_eq!(run.made(), run.expected(), "{}", run.all());
    assert_eq!(
        run.device_layer_stack(),
        vec![LAYER, VALIDATION],
        "{}",
        run.all()
    );
    run
}

#[test]
fn the_validation_layer_below_never_crashes_the_application_cold_or_warm() {
    // Before: SIGSEGV at the first kept pipeline through `binary` (the validation layer of
    // Debian 12 wraps handles and passes vkCreatePipelineBinariesKHR straight to the driver).
    for extra in [&[][..], &["--every-extension"][..]] {
        let tmp = tempfile::tempdir().unwrap();
        let cold = validation_below(tmp.path(), extra);
        assert_eq!(backend(&cold), "cache", "{}", cold.all());
        assert!(
            cold.stderr.contains("a layer below pipekeep") || cache_forced(),
            "{}",
            cold.all()
        );
        let warm = validation_below(tmp.path(), extra);
        assert_eq!(warm.watch().found, 60, "{}", warm.all());
        if extra.is_empty() {
            // Errors about structures Debian 12's validation layer does not know are its own
            // limit; the plain device gives it none.
            assert_eq!(
                warm.validation_messages(),
                Vec::<String>::new(),
                "{}",
                warm.all()
            );
        }
    }
}
