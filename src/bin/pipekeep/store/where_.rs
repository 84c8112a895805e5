//! `pipekeep where`: the library root and its total against its bound, the settings and where
//! each comes from, the manifests the loader would find, and whether the layer is on in this
//! environment.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use super::human_bytes;
use pipekeep::settings::sources::{Origin, Sources, FILE_NAME, TABLE};
use pipekeep::settings::Settings;

/// The library root, the settings and the manifests in force, and whether the layer is on.
#[derive(clap::Args)]
pub struct WhereArgs {
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

/// Where the loader looks for layer manifests, implicit or explicit, in its order.
fn manifest_dirs(kind: &str) -> Vec<PathBuf> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let home = env("HOME").unwrap_or_default();
    let mut dirs = Vec::new();
    if kind == "explicit" {
        for var in ["VK_LAYER_PATH", "VK_ADD_LAYER_PATH"] {
            dirs.extend(
                env(var)
                    .into_iter()
                    .flat_map(|v| v.split(':').map(PathBuf::from).collect::<Vec<_>>()),
            );
        }
    }
    let config = env("XDG_CONFIG_HOME").unwrap_or_else(|| format!("{home}/.config"));
    let data = env("XDG_DATA_HOME").unwrap_or_else(|| format!("{home}/.local/share"));
    for base in [
        config,
        "/etc/xdg".into(),
        "/etc".into(),
        data,
        "/usr/local/share".into(),
        "/usr/share".into(),
    ] {
        dirs.push(PathBuf::from(base).join(format!("vulkan/{kind}_layer.d")));
    }
    dirs
}

pub fn where_(args: WhereArgs) -> Result<ExitCode, String> {
    let env_var = |k: &str| std::env::var(k).ok();
    let cwd = std::env::current_dir().ok();
    // A command has no application's layer settings: the environment, the file, the defaults.
    let sources = Sources::gather(&env_var, cwd.as_deref(), &[]);
    let settings = Settings::from_sources(&env_var, &sources);
    let origins: Vec<(&str, String, Origin)> = TABLE
        .iter()
        .map(|s| {
            let (value, origin) = sources.lookup(&env_var, &s.env());
            (
                s.name,
                value.unwrap_or_else(|| s.default.to_string()),
                origin,
            )
        })
        .collect();
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut manifests = Vec::new();
    for kind in ["implicit", "explicit"] {
        for dir in manifest_dirs(kind) {
            for name in pipekeep::store::files::names_in(&dir).unwrap_or_default() {
                let path = dir.join(&name);
                let Ok(text) = std::fs::read_to_string(&path) else {
                    continue;
                };
                let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
                    continue;
                };
                if doc["layer"]["name"] != pipekeep::LAYER_NAME.to_str().unwrap_or_default() {
                    continue;
                }
                let lib = doc["layer"]["library_path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let lib_path = if Path::new(&lib).is_absolute() {
                    PathBuf::from(&lib)
                } else {
                    dir.join(&lib)
                };
                let enable = doc["layer"]["enable_environment"].as_object().cloned();
                let on = match kind {
                    "implicit" => {
                        enable
                            .as_ref()
                            .is_none_or(|m| m.iter().all(|(k, v)| env(k).as_deref() == v.as_str()))
                            && env("PIPEKEEP_DISABLE").is_none()
                    }
                    _ => [env("VK_INSTANCE_LAYERS"), env("VK_LOADER_LAYERS_ENABLE")]
                        .iter()
                        .flatten()
                        .any(|v| {
                            v.split([':', ','])
                                .any(|l| l == pipekeep::LAYER_NAME.to_str().unwrap_or_default())
                        }),
                };
                manifests.push(json!({ "kind": kind, "manifest": path, "library": lib_path, "library_exists": lib_path.exists(), "enable_environment": enable, "on_here": on }));
            }
        }
    }
    let enabled = manifests.iter().any(|m| m["on_here"] == true) && !settings.disabled;
    // A library not made yet holds nothing.
    let usage = settings
        .root
        .as_deref()
        .and_then(|r| pipekeep::store::library::usage(r, None).ok())
        .unwrap_or_default();
    let library_bytes: u64 = usage.iter().map(|t| t.bytes()).sum();
    let titles: Vec<_> = usage
        .iter()
        .map(|t| json!({ "title": t.title, "bytes": t.bytes(), "last_use": pipekeep::watch::unix_secs(t.last_use) }))
        .collect();
    let out = json!({
        "root": settings.root, "title_override": settings.title, "max_bytes": settings.max_bytes,
        "library_max_bytes": settings.library_max_bytes, "library_bytes": library_bytes, "titles": titles, "log": settings.log_filter,
        "log_file": settings.log_file, "disabled": settings.disabled, "problems": settings.problems,
        "manifests": manifests, "enabled_here": enabled, "settings_file": sources.file,
        "settings": origins.iter().map(|(name, value, origin)| json!({ "name": name, "value": value, "from": origin.to_string() })).collect::<Vec<_>>(),
    });
    if args.json {
        println!("{out}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "library root: {}",
        settings
            .root
            .as_ref()
            .map_or("(none: set PIPEKEEP_DIR or HOME)".into(), |r| r
                .display()
                .to_string())
    );
    println!(
        "size bound:   {} ({}) a title",
        settings.max_bytes,
        human_bytes(settings.max_bytes)
    );
    println!(
        "library:      {} of its bound of {} ({})",
        human_bytes(library_bytes),
        settings.library_max_bytes,
        human_bytes(settings.library_max_bytes)
    );
    for t in &titles {
        println!(
            "title used:   {} {}, last used {}",
            t["title"].as_str().unwrap_or_default(),
            human_bytes(t["bytes"].as_u64().unwrap_or(0)),
            super::human_time(t["last_use"].as_f64().unwrap_or(0.0))
        );
    }
    println!(
        "title:        {}",
        settings
            .title
            .as_deref()
            .unwrap_or("(the application's name)")
    );
    println!(
        "log:          {} to {}",
        settings.log_filter,
        settings
            .log_file
            .as_ref()
            .map_or("stderr".into(), |p| p.display().to_string())
    );
    for p in &settings.problems {
        println!("problem:      {p}");
    }
    println!(
        "settings file: {}",
        sources.file.as_ref().map_or(
            format!("none (Vulkan Configurator's $XDG_DATA_HOME/vulkan/settings.d/{FILE_NAME}, VK_LAYER_SETTINGS_PATH, or {FILE_NAME} in the working directory)"),
            |p| p.display().to_string()
        )
    );
    for (name, value, origin) in &origins {
        println!("setting:      {name} = {value:?} ({origin})");
    }
    if manifests.is_empty() {
        println!("manifests:    none found: pipekeep is not installed (scripts/install.sh) nor on VK_ADD_LAYER_PATH");
    }
    for m in &manifests {
        println!(
            "manifest:     {} {} -> {}{}{}",
            m["kind"].as_str().unwrap_or_default(),
            m["manifest"].as_str().unwrap_or_default(),
            m["library"].as_str().unwrap_or_default(),
            if m["library_exists"] == true {
                ""
            } else {
                " (library missing!)"
            },
            if m["on_here"] == true {
                ", on in this environment"
            } else {
                ", off in this environment"
            }
        );
    }
    println!("enabled here: {}", if enabled { "yes" } else { "no" });
    Ok(ExitCode::SUCCESS)
}
