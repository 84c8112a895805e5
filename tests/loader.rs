//! The layer through the real Vulkan loader: listed and active when named, when installed as an
//! implicit layer (on for every application, or opt-in), turned off by PIPEKEEP_DISABLE, and a
//! panic inside an intercept never reaches the application.

mod common;
use common::*;
use std::process::Command;

#[test]
fn the_layer_is_inserted_and_active_when_named() {
    let tmp = tempfile::tempdir().unwrap();
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("VK_LOADER_DEBUG", "layer")
        .run();
    assert!(run.ok, "{}", run.all());
    assert!(run.layer_inserted(), "{}", run.all());
    assert!(run.layer_active(), "{}", run.all());
    assert_eq!(run.made(), run.expected());
    assert_eq!(run.watch().built, run.made());
}

#[test]
fn without_the_layer_the_app_makes_every_pipeline_too() {
    let tmp = tempfile::tempdir().unwrap();
    let run = App::new(Driver::Radv, tmp.path()).run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.made(), run.expected());
    assert!(!run.stderr.contains("pipekeep"), "{}", run.all());
}

fn install(tmp: &std::path::Path, extra: &[&str]) {
    let status = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/install.sh"))
        .args(["--library", layer_library().to_str().unwrap()])
        .args(extra)
        .env("XDG_DATA_HOME", tmp.join("data"))
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn installed_as_an_implicit_layer_it_is_on_with_no_variable_and_disable_turns_it_off() {
    let tmp = tempfile::tempdir().unwrap();
    install(tmp.path(), &[]);
    let manifest = tmp
        .path()
        .join("data/vulkan/implicit_layer.d/VK_LAYER_PIPEKEEP_pipeline_store.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    assert!(std::path::Path::new(json["layer"]["library_path"].as_str().unwrap()).is_absolute());
    assert_eq!(
        json["layer"]["disable_environment"]["PIPEKEEP_DISABLE"],
        "1"
    );

    let on = App::new(Driver::Radv, tmp.path())
        .env("VK_LOADER_DEBUG", "layer")
        .run();
    assert!(on.ok, "{}", on.all());
    assert!(on.layer_inserted(), "{}", on.all());
    assert!(on.layer_active(), "{}", on.all());
    assert!(!entries(&tmp.path().join("store")).is_empty());

    let off = App::new(Driver::Radv, tmp.path())
        .env("VK_LOADER_DEBUG", "layer")
        .env("PIPEKEEP_DISABLE", "1")
        .run();
    assert!(off.ok, "{}", off.all());
    assert!(!off.layer_inserted(), "{}", off.all());
    assert!(!off.stderr.contains("pipekeep is active"), "{}", off.all());

    let status = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/uninstall.sh"))
        .env("XDG_DATA_HOME", tmp.path().join("data"))
        .status()
        .unwrap();
    assert!(status.success());
    assert!(!manifest.exists());
    assert!(!tmp.path().join("data/pipekeep").exists());
}

#[test]
fn installed_opt_in_it_is_on_only_where_pipekeep_is_1() {
    let tmp = tempfile::tempdir().unwrap();
    install(tmp.path(), &["--opt-in"]);
    let off = App::new(Driver::Radv, tmp.path()).run();
    assert!(
        off.ok && !off.stderr.contains("pipekeep is active"),
        "{}",
        off.all()
    );
    let on = App::new(Driver::Radv, tmp.path())
        .env("PIPEKEEP", "1")
        .run();
    assert!(
        on.ok && on.stderr.contains("pipekeep is active"),
        "{}",
        on.all()
    );
}

#[test]
fn pipekeep_disable_makes_an_explicitly_named_layer_a_pass_through() {
    let tmp = tempfile::tempdir().unwrap();
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_DISABLE", "yes")
        .run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.made(), run.expected());
    assert!(!run.stderr.contains("compile watch"), "{}", run.all());
    assert!(entries(&tmp.path().join("store")).is_empty());
}

#[test]
fn a_panic_inside_an_intercept_falls_back_to_the_driver() {
    let tmp = tempfile::tempdir().unwrap();
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_TEST_PANIC", "1")
        .run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.made(), run.expected(), "{}", run.all());
    assert!(
        run.stderr
            .contains("pipekeep panicked; falling back to the driver"),
        "{}",
        run.all()
    );
}

#[test]
fn a_bad_setting_gets_one_clear_line_and_the_default() {
    let tmp = tempfile::tempdir().unwrap();
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_MAX_BYTES", "lots")
        .run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(
        run.stderr
            .matches("PIPEKEEP_MAX_BYTES=\"lots\" is not an integer")
            .count(),
        1,
        "{}",
        run.all()
    );
    assert_eq!(entries(&tmp.path().join("store")).len() as u64, run.made());
}

#[test]
fn the_log_goes_to_pipekeep_log_file_without_ansi_escapes() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("pipekeep.log");
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("PIPEKEEP_LOG_FILE", &log)
        .run();
    assert!(run.ok, "{}", run.all());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(" built="), "{text}");
    assert!(!text.contains('\u{1b}'), "ANSI escapes in the log file");
    assert!(!run.stderr.contains("compile watch"));
}
