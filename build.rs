//! Two jobs before the crate compiles.
//!
//! The layer must never be unloaded while a thread-local marker or the exit handler refers to it:
//! the loader `dlclose`s layers at `vkDestroyInstance`.
//!
//! The table of feature structures the device key reads by content is generated from the Vulkan
//! definitions the crate builds with: every `VkPhysicalDevice*Features*` structure ash defines
//! whose members after `sType` and `pNext` are all `VkBool32`s (`$OUT_DIR/known_features.rs`,
//! included by `src/key/features.rs`). A newer ash brings its new structures with it.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=Cargo.lock");
    let definitions = ash_definitions().unwrap_or_else(|why| panic!("{why}"));
    let source = std::fs::read_to_string(&definitions)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", definitions.display()));
    let table = feature_table(&source);
    assert!(
        table.len() > 100,
        "only {} feature structures found in {}: has ash's layout changed?",
        table.len(),
        definitions.display()
    );
    let mut out = String::from("feature_table! {\n");
    for (name, last) in &table {
        out.push_str(&format!("    {name}: {last},\n"));
    }
    out.push_str("}\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(dest.join("known_features.rs"), out).expect("OUT_DIR is writable");
}

/// `(structure, its last member)` of every all-`VkBool32` feature structure in ash's definitions.
fn feature_table(source: &str) -> Vec<(String, String)> {
    let mut table = Vec::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .strip_prefix("pub struct ")
            .and_then(|rest| rest.strip_suffix("<'a> {"))
        else {
            continue;
        };
        if !(name.starts_with("PhysicalDevice") && name.contains("Features")) {
            continue;
        }
        let mut members = Vec::new();
        for member in lines.by_ref() {
            let member = member.trim();
            if member == "}" {
                break;
            }
            members.push(member.to_owned());
        }
        let bools: Vec<&str> = members
            .iter()
            .filter(|m| {
                !(m.starts_with("pub s_type:")
                    || m.starts_with("pub p_next:")
                    || m.starts_with("pub _marker:"))
            })
            .map(String::as_str)
            .collect();
        let all_bools = !bools.is_empty() && bools.iter().all(|m| m.ends_with(": Bool32,"));
        let headed = members.iter().any(|m| m.starts_with("pub s_type:"));
        if !(all_bools && headed) {
            continue;
        }
        let last = bools[bools.len() - 1]
            .strip_prefix("pub ")
            .and_then(|m| m.strip_suffix(": Bool32,"))
            .expect("checked above");
        table.push((name.to_owned(), last.to_owned()));
    }
    table
}

/// ash's `src/vk/definitions.rs`, the one this build uses: from `cargo metadata`, else from the
/// registry's sources under `$CARGO_HOME` (or `~/.cargo`).
fn ash_definitions() -> Result<PathBuf, String> {
    let from_metadata = ash_dir_from_metadata();
    let dir = match from_metadata {
        Some(dir) => dir,
        None => ash_dir_in_registry().ok_or(
            "cannot find ash's sources (neither `cargo metadata` nor $CARGO_HOME/registry/src names them)",
        )?,
    };
    let definitions = dir.join("src").join("vk").join("definitions.rs");
    if definitions.is_file() {
        Ok(definitions)
    } else {
        Err(format!("{} is not a file", definitions.display()))
    }
}

fn ash_dir_from_metadata() -> Option<PathBuf> {
    let cargo = std::env::var_os("CARGO")?;
    let manifest = Path::new(&std::env::var_os("CARGO_MANIFEST_DIR")?).join("Cargo.toml");
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--manifest-path",
        ])
        .arg(&manifest)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let json = String::from_utf8(out.stdout).ok()?;
    // Every package's `"manifest_path":"<dir>/Cargo.toml"`; ash's directory is `ash-<version>`.
    json.split("\"manifest_path\":\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(PathBuf::from)
        .filter_map(|p| p.parent().map(Path::to_path_buf))
        .find(|dir| {
            dir.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ash-0.38"))
        })
}

fn ash_dir_in_registry() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    let src = home.join("registry").join("src");
    std::fs::read_dir(src)
        .ok()?
        .flatten()
        .flat_map(|index| {
            std::fs::read_dir(index.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ash-0.38"))
        })
        .max()
}
