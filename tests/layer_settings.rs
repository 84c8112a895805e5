//! Settings through the Khronos layer-settings conventions, through the real loader:
//! `vk_layer_settings.txt` and `VK_EXT_layer_settings` each take effect, the environment wins over
//! both and the application's over the file; the manifests, settings and all, pass the loader's
//! own parsing without a complaint.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// A settings directory holding `vk_layer_settings.txt` with these lines.
fn settings_dir(tmp: &Path, lines: &str) -> PathBuf {
    let dir = tmp.join("settings");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("vk_layer_settings.txt"),
        format!(
            "# another layer's line is its own\nkhronos_validation.report_flags = error\n{lines}"
        ),
    )
    .unwrap();
    dir
}

/// The titles a store holds pipelines under.
fn titles(tmp: &Path) -> Vec<String> {
    let mut t: Vec<String> = std::fs::read_dir(tmp.join("store"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| !entries(&e.path()).is_empty())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    t.sort();
    t
}

#[test]
fn a_title_in_vk_layer_settings_txt_takes_effect() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = settings_dir(tmp.path(), "pipekeep_pipeline_store.title = from-file\n");
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("VK_LAYER_SETTINGS_PATH", &dir)
        .run();
    assert!(run.ok && run.layer_active(), "{}", run.all());
    assert_eq!(titles(tmp.path()), ["from-file"], "{}", run.all());
}

#[test]
fn the_applications_layer_settings_take_effect_and_win_over_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = settings_dir(
        tmp.path(),
        "pipekeep_pipeline_store.title = from-file\npipekeep_pipeline_store.log = warn\n",
    );
    // The file's log filter would hide the compile watch; the application's says info.
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env_remove("PIPEKEEP_LOG")
        .env("VK_LAYER_SETTINGS_PATH", dir.join("vk_layer_settings.txt"))
        .args(&[
            "--layer-setting",
            "title=from-app",
            "--layer-setting",
            "log=info",
        ])
        .run();
    assert!(run.ok && run.layer_active(), "{}", run.all());
    assert_eq!(titles(tmp.path()), ["from-app"], "{}", run.all());
    assert_eq!(run.watch().built, run.made(), "{}", run.all());
}

#[test]
fn the_environment_wins_over_the_application_and_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = settings_dir(tmp.path(), "pipekeep_pipeline_store.title = from-file\n");
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .env("VK_LAYER_SETTINGS_PATH", &dir)
        .env("PIPEKEEP_TITLE", "from-env")
        .args(&["--layer-setting", "title=from-app"])
        .run();
    assert!(run.ok && run.layer_active(), "{}", run.all());
    assert_eq!(titles(tmp.path()), ["from-env"], "{}", run.all());
}

#[test]
fn a_switch_from_the_application_turns_the_layer_off() {
    let tmp = tempfile::tempdir().unwrap();
    let run = App::new(Driver::Radv, tmp.path())
        .with_layer()
        .args(&["--layer-setting", "disable=true"])
        .run();
    assert!(run.ok, "{}", run.all());
    assert_eq!(run.made(), run.expected());
    assert!(titles(tmp.path()).is_empty(), "{}", run.all());
}

/// `pipekeep where` names where each value came from.
#[test]
fn where_says_where_each_value_came_from() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = settings_dir(tmp.path(), "pipekeep_pipeline_store.max_bytes = 1000000\n");
    // (The backend left to its default, whichever backend the test matrix names.)
    let run = App::tool(Driver::Radv, tmp.path())
        .env("VK_LAYER_SETTINGS_PATH", &dir)
        .env("PIPEKEEP_TITLE", "t")
        .env_remove("PIPEKEEP_BACKEND")
        .args(&["where", "--json"])
        .run();
    assert!(run.ok, "{}", run.all());
    let from = |name: &str| {
        run.summary["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| (s["value"].clone(), s["from"].as_str().unwrap().to_string()))
            .unwrap()
    };
    let file = dir.join("vk_layer_settings.txt");
    assert_eq!(
        from("max_bytes"),
        ("1000000".into(), format!("file {}", file.display()))
    );
    assert_eq!(from("title"), ("t".into(), "environment".into()));
    assert_eq!(from("backend"), ("auto".into(), "default".into()));
    assert_eq!(run.summary["max_bytes"], 1000000);
}

/// Each manifest the project ships, its library the build's, through `VK_LOADER_DEBUG=all`: the
/// layer is loaded and the loader warns of nothing (the settings block is the
/// Vulkan Configurator's, which the loader does not read).
#[test]
fn the_loader_parses_the_manifests_without_a_complaint() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (manifest, implicit) in [
        ("manifest/VK_LAYER_PIPEKEEP_pipeline_store.json", false),
        (
            "manifest/package/VK_LAYER_PIPEKEEP_pipeline_store.x86_64.json",
            true,
        ),
        // The 32-bit layer's, its library made this build's so that the loader loads it.
        (
            "manifest/package/VK_LAYER_PIPEKEEP_pipeline_store.i686.json",
            true,
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(root.join(manifest)).unwrap()).unwrap();
        assert!(doc["layer"]["features"]["settings"].is_array());
        doc["layer"]["library_path"] = serde_json::json!(layer_library());
        let dir = if implicit {
            tmp.path().join("data/vulkan/implicit_layer.d")
        } else {
            tmp.path().join("layers")
        };
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(tmp.path().join("layers")).unwrap();
        std::fs::write(dir.join("pipekeep.json"), doc.to_string()).unwrap();
        let mut app = App::new(Driver::Radv, tmp.path())
            .env("VK_LOADER_DEBUG", "all")
            .env("VK_ADD_LAYER_PATH", tmp.path().join("layers"));
        if !implicit {
            // Named by the application: VK_INSTANCE_LAYERS has the loader warn, of itself.
            app = app.args(&["--layers", LAYER]);
        }
        let run = app.run();
        assert!(
            run.ok && run.layer_inserted() && run.layer_active(),
            "{manifest}\n{}",
            run.all()
        );
        let complaints: Vec<&str> = run
            .stderr
            .lines()
            .chain(run.stdout.lines())
            // The loader's own lines begin with their level, and many of its complaints about
            // a manifest do not name it ("Didn't find required layer value api_version ..."):
            // none at all, here, where pipekeep's manifest is the only one added.
            .filter(|l| l.starts_with("WARNING") || l.starts_with("ERROR"))
            .collect();
        assert!(complaints.is_empty(), "{manifest}: {complaints:#?}");
    }
}
