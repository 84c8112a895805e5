//! `pipekeep list`: every title, its last use, each identity directory under it, its entries,
//! bytes and stamps, and (`--devices`) which identities are this machine's; the library's total
//! against its bound.

use std::process::ExitCode;

use serde_json::json;

use super::record::record_of;
use super::{human_bytes, human_time, readable, Scope};
use pipekeep::settings::Settings;
use pipekeep::store::inspect::{entry_files, identity_dirs, sharing};
use pipekeep::store::library;

/// Every title, each identity directory under it, its entries, bytes and stamps.
#[derive(clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    scope: Scope,
    /// Also ask Vulkan which devices this machine has, and say which identities are theirs
    /// (creates a Vulkan instance; a listing without it touches nothing but the files).
    #[arg(long)]
    devices: bool,
}

pub fn list(args: ListArgs) -> Result<ExitCode, String> {
    let (root, titles) = args.scope.titles()?;
    let local = args.devices.then(local_identities).flatten();
    let usage = library::usage(&root, None).map_err(|e| e.to_string())?;
    let library_bytes: u64 = usage.iter().map(library::TitleUsage::bytes).sum();
    let max_bytes = Settings::from_env().library_max_bytes;
    let mut out = Vec::new();
    for title in &titles {
        let mut dirs = Vec::new();
        let title_dir = root.join(title);
        for d in readable(&title_dir, identity_dirs(&title_dir)) {
            let files = readable(&d.path, entry_files(&d.path));
            let shared = sharing(&d.path);
            let metas: Vec<_> = files
                .iter()
                .filter_map(|f| std::fs::symlink_metadata(f).ok())
                .collect();
            let stamps: Vec<f64> = metas
                .iter()
                .filter_map(|m| m.modified().ok())
                .map(pipekeep::watch::unix_secs)
                .collect();
            let (waiting, waiting_bytes) = pipekeep::store::waiting::waiting_in(&d.path);
            let name = d
                .path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            dirs.push(json!({
                "identity": name,
                "vendor": vendor_name(d.name.vendor_id), "vendor_id": d.name.vendor_id, "device_id": d.name.device_id,
                "driver_version": driver_version(d.name.vendor_id, d.name.driver_version),
                "entries": files.len(), "bytes": shared.kept_bytes(),
                "waiting": waiting, "waiting_bytes": waiting_bytes,
                "pieces": shared.pieces, "piece_bytes": shared.piece_bytes, "named_bytes": shared.named_bytes,
                "oldest": stamps.iter().copied().reduce(f64::min), "newest": stamps.iter().copied().reduce(f64::max),
                "this_machine": local.as_ref().map(|l| l.contains(&name)),
            }));
        }
        let entries_bytes: u64 = dirs.iter().filter_map(|d| d["bytes"].as_u64()).sum();
        let used = usage.iter().find(|u| &u.title == title);
        let last_use = used.map(|u| pipekeep::watch::unix_secs(u.last_use));
        let bytes = used.map_or(0, library::TitleUsage::bytes);
        out.push(json!({ "title": title, "identities": dirs, "entries_bytes": entries_bytes, "record": record_of(&title_dir),
            "bytes": bytes, "last_use": last_use }));
    }
    let library = json!({ "bytes": library_bytes, "max_bytes": max_bytes });
    if args.scope.json {
        println!(
            "{}",
            json!({ "root": root, "library": library, "titles": out })
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "library {}: {} of its bound of {} (PIPEKEEP_LIBRARY_MAX_BYTES)",
        root.display(),
        human_bytes(library_bytes),
        human_bytes(max_bytes)
    );
    for t in &out {
        println!(
            "{}: {}, last used {}",
            t["title"].as_str().unwrap_or_default(),
            human_bytes(t["bytes"].as_u64().unwrap_or(0)),
            t["last_use"].as_f64().map_or("-".into(), human_time)
        );
        println!(
            "  entries and pieces: {}",
            human_bytes(t["entries_bytes"].as_u64().unwrap_or(0))
        );
        if let Some(r) = t["record"].as_object() {
            println!(
                "  record: {} pipelines, {} of its share of {}{} ({} damaged entries)",
                r["pipelines"],
                human_bytes(r["bytes"].as_u64().unwrap_or(0)),
                human_bytes(r["share"].as_u64().unwrap_or(0)),
                if r["over_share"] == true {
                    ", past it: compacted at the next opening or by verify --fix"
                } else {
                    ""
                },
                r["damaged"]
            );
        }
        for d in t["identities"].as_array().into_iter().flatten() {
            let when = |k: &str| d[k].as_f64().map_or("-".into(), human_time);
            let here = match d["this_machine"].as_bool() {
                Some(true) => " (a device of this machine)",
                Some(false) => " (not a device of this machine)",
                None if args.devices => " (devices of this machine unknown)",
                None => "",
            };
            let waiting = match d["waiting"].as_u64() {
                Some(n) if n > 0 => format!(
                    "; {n} entries left waiting by a process's end, {}, for the next run to write",
                    human_bytes(d["waiting_bytes"].as_u64().unwrap_or(0))
                ),
                _ => String::new(),
            };
            println!(
                "  {} {} {:#06x} driver {}: {} entries, {} pieces, {}, stamps {} .. {}{waiting}{here}",
                d["identity"].as_str().unwrap_or_default(),
                d["vendor"].as_str().unwrap_or_default(),
                d["device_id"].as_u64().unwrap_or(0),
                d["driver_version"].as_str().unwrap_or_default(),
                d["entries"],
                d["pieces"],
                human_bytes(d["bytes"].as_u64().unwrap_or(0)),
                when("oldest"),
                when("newest")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn vendor_name(id: u32) -> &'static str {
    match id {
        0x1002 => "AMD",
        0x10de => "NVIDIA",
        0x8086 => "Intel",
        0x13b5 => "ARM",
        0x5143 => "Qualcomm",
        0x10005 => "Mesa (software)",
        _ => "vendor",
    }
}

/// A driver version in the vendor's own packing.
fn driver_version(vendor: u32, v: u32) -> String {
    if vendor == 0x10de {
        format!(
            "{}.{}.{}.{}",
            v >> 22,
            (v >> 14) & 0xff,
            (v >> 6) & 0xff,
            v & 0x3f
        )
    } else {
        format!("{}.{}.{}", v >> 22, (v >> 12) & 0x3ff, v & 0xfff)
    }
}

/// The identity directory names of this machine's devices, where Vulkan can be asked.
fn local_identities() -> Option<Vec<String>> {
    // SAFETY: loads the system's loader; the calls below are valid on the instance they use.
    unsafe {
        let entry = ash::Entry::load().ok()?;
        let instance = entry
            .create_instance(&ash::vk::InstanceCreateInfo::default(), None)
            .ok()?;
        let names = instance
            .enumerate_physical_devices()
            .unwrap_or_default()
            .into_iter()
            .map(|p| {
                let props = instance.get_physical_device_properties(p);
                pipekeep::store::Identity::of_device(&props).dir_name()
            })
            .collect();
        instance.destroy_instance(None);
        Some(names)
    }
}
