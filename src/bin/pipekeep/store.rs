//! The store subcommands: list, verify, prune, clear, stats and where. They only ever remove
//! `*.entry`, `*.piece`, `*.loading` and `*.tmp` files, identity directories of our naming and
//! (`clear`) a title's `record.foz`, and remove them by the layer's own rules beside a running
//! application: what a live process holds locked stays (`clear`), a file replaced since it was
//! checked stays (`verify --fix`), and `prune` is the layer's own bound pass.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use pipekeep::settings::sources::{Origin, Sources, FILE_NAME, TABLE};
use pipekeep::settings::Settings;
use pipekeep::store::bound::{
    entries_of_title, keep_within_past_share, plan_eviction_past_share, record_bytes,
    record_counted, record_share,
};
use pipekeep::store::files::remove_if_present;
use pipekeep::store::inspect::{
    check_entry_with, check_piece, entry_files, identity_dirs, sharing, titles, Sharing,
};
use pipekeep::store::pieces::Pieces;
use pipekeep::watch::read_runs;

/// Where to look: the library root and, optionally, one title.
#[derive(clap::Args, Clone)]
pub struct Scope {
    /// The library root (default: PIPEKEEP_DIR, else $XDG_CACHE_HOME/pipekeep, else ~/.cache/pipekeep).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Only this title.
    #[arg(long)]
    title: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

impl Scope {
    fn root(&self) -> Result<PathBuf, String> {
        self.dir
            .clone()
            .or_else(|| Settings::from_env().root)
            .ok_or_else(|| "no library root: set PIPEKEEP_DIR or HOME, or pass --dir".into())
    }

    /// The titles in scope; a title or root that does not exist is an error with a clear message.
    pub fn titles(&self) -> Result<(PathBuf, Vec<String>), String> {
        let root = self.root()?;
        if !root.is_dir() {
            return Err(format!("no pipeline library at {}", root.display()));
        }
        let all = titles(&root).map_err(|e| format!("cannot read {}: {e}", root.display()))?;
        match &self.title {
            Some(t) if all.contains(t) => Ok((root, vec![t.clone()])),
            Some(t) => Err(format!(
                "no title {t:?} in {} (titles: {})",
                root.display(),
                all.join(", ")
            )),
            None => Ok((root, all)),
        }
    }
}

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

/// Check every entry as the layer would (envelope, length, hash, cache header).
#[derive(clap::Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    scope: Scope,
    /// Drop the bad entries.
    #[arg(long)]
    fix: bool,
}

/// Bring a title's store within N bytes, dropping the oldest stamps first (the layer's order); the
/// title's record takes at most its share (a quarter), and is compacted to it in the same order.
#[derive(clap::Args)]
pub struct PruneArgs {
    #[command(flatten)]
    scope: Scope,
    /// The bound, in bytes.
    #[arg(long)]
    max_bytes: u64,
    /// Say what would be dropped, drop nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Remove every entry (and marker and partial write) of a title, or of every title.
#[derive(clap::Args)]
pub struct ClearArgs {
    #[command(flatten)]
    scope: Scope,
}

/// The history of recent runs, from each title's runs.jsonl.
#[derive(clap::Args)]
pub struct StatsArgs {
    #[command(flatten)]
    scope: Scope,
    /// Write an SVG plot of pipeline-creation time per run.
    #[arg(long)]
    plot: Option<PathBuf>,
}

/// The library root, the settings and the manifests in force, and whether the layer is on.
#[derive(clap::Args)]
pub struct WhereArgs {
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

/// A listing of a directory, or, if it cannot be read, a clear message and nothing: the rest of
/// the work goes on.
fn readable<T>(path: &Path, listing: std::io::Result<Vec<T>>) -> Vec<T> {
    listing.unwrap_or_else(|e| {
        eprintln!("pipekeep: cannot read {}: {e}; skipped", path.display());
        Vec::new()
    })
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS` UTC.
fn human_time(secs: f64) -> String {
    let s = secs.max(0.0) as i64;
    let (days, rem) = (s.div_euclid(86_400), s.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
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
                pipekeep::store::Identity {
                    vendor_id: props.vendor_id,
                    device_id: props.device_id,
                    driver_version: props.driver_version,
                    cache_uuid: props.pipeline_cache_uuid,
                    abi: pipekeep::store::identity::HOST_ABI,
                }
                .dir_name()
            })
            .collect();
        instance.destroy_instance(None);
        Some(names)
    }
}

pub fn list(args: ListArgs) -> Result<ExitCode, String> {
    let (root, titles) = args.scope.titles()?;
    let local = args.devices.then(local_identities).flatten();
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
                "pieces": shared.pieces, "piece_bytes": shared.piece_bytes, "named_bytes": shared.named_bytes,
                "oldest": stamps.iter().copied().reduce(f64::min), "newest": stamps.iter().copied().reduce(f64::max),
                "this_machine": local.as_ref().map(|l| l.contains(&name)),
            }));
        }
        let entries_bytes: u64 = dirs.iter().filter_map(|d| d["bytes"].as_u64()).sum();
        out.push(json!({ "title": title, "identities": dirs, "entries_bytes": entries_bytes, "record": record_of(&title_dir) }));
    }
    if args.scope.json {
        println!("{}", json!({ "root": root, "titles": out }));
        return Ok(ExitCode::SUCCESS);
    }
    println!("library {}", root.display());
    for t in &out {
        println!("{}", t["title"].as_str().unwrap_or_default());
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
            println!(
                "  {} {} {:#06x} driver {}: {} entries, {} pieces, {}, stamps {} .. {}{here}",
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

pub fn verify(args: VerifyArgs) -> Result<ExitCode, String> {
    let (root, titles) = args.scope.titles()?;
    let dirs: Vec<PathBuf> = titles
        .iter()
        .flat_map(|t| readable(&root.join(t), identity_dirs(&root.join(t))))
        .map(|d| d.path)
        .collect();
    let files: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|d| readable(d, entry_files(d)))
        .collect();
    let piece_files: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|d| {
            pipekeep::store::pieces::listed(d)
                .into_iter()
                .map(|(_, p)| p)
        })
        .collect();
    let (mut good, mut bad) = (0u64, Vec::new());
    let show_progress = files.len() >= 1000
        && !args.scope.json
        && std::io::IsTerminal::is_terminal(&std::io::stderr());
    // Each file is opened before its check, and `--fix` removes it only while its path still
    // names that file: a writer (the application beside the command) may place it again, whole,
    // after the check, and that one stays.
    let opened = |f: &Path| {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(pipekeep::store::files::NO_FOLLOW_NO_BLOCK)
            .open(f)
            .ok()
    };
    // Pieces first: an entry is then checked against the pieces that are whole.
    for f in &piece_files {
        let file = opened(f);
        if let Err(e) = check_piece(f) {
            bad.push((f.clone(), e.reason(), e.to_string(), file));
        }
    }
    let bad_pieces = bad.len();
    let mut pieces_of_dir: Option<(PathBuf, Pieces)> = None;
    for (n, f) in files.iter().enumerate() {
        let dir = f.parent().unwrap_or(Path::new(".")).to_path_buf();
        if pieces_of_dir.as_ref().is_none_or(|(d, _)| *d != dir) {
            pieces_of_dir = Some((dir.clone(), Pieces::for_looking(&dir)));
        }
        let pieces = &pieces_of_dir.as_ref().expect("set above").1;
        let file = opened(f);
        match check_entry_with(f, pieces) {
            Ok(_) => good += 1,
            Err(e) => bad.push((f.clone(), e.reason(), e.to_string(), file)),
        }
        if show_progress && (n % 500 == 0 || n + 1 == files.len()) {
            eprint!("\rverify: {}/{} entries", n + 1, files.len());
        }
    }
    if show_progress {
        eprintln!();
    }
    // Each title's record: every entry whole (a cut last one is ignored by readers, not damage).
    // And within its share of the bound.
    let mut bad_records: Vec<(String, serde_json::Value)> = titles
        .iter()
        .map(|t| (t.clone(), record_of(&root.join(t))))
        .filter(|(_, r)| r["damaged"].as_u64().is_some_and(|n| n > 0) || r["over_share"] == true)
        .collect();
    // Each identity directory's order of use: a hint, but one the layer would drop with a line.
    let bad_orders: Vec<(PathBuf, String)> = dirs.iter().filter_map(|d| bad_use_order(d)).collect();
    let mut dropped = 0;
    if args.fix {
        for (f, _, _, file) in &bad {
            // Replaced since its check: it stays. Not opened: a link or another thing that is
            // not a file goes by its path (no writer places one); a file gone, nothing to do.
            let removed = match file {
                Some(file) => pipekeep::store::files::remove_if_still(f, Some(file)),
                None if std::fs::symlink_metadata(f).is_ok_and(|m| !m.is_file()) => {
                    remove_if_present(f)
                }
                None => Ok(false),
            };
            if removed.unwrap_or(false) {
                dropped += 1;
            }
        }
        for (f, _) in &bad_orders {
            let _ = remove_if_present(f);
        }
        // A record past its share, or holding damaged entries, compacted as the layer does.
        let max_bytes = Settings::from_env().max_bytes;
        for (t, r) in &mut bad_records {
            match compact_record(&root.join(&*t), max_bytes, true) {
                Ok(c) => r["compacted"] = json!(c.map(|c| json!({ "pipelines_before": c.pipelines_before, "pipelines_kept": c.pipelines_kept, "bytes_before": c.bytes_before, "bytes_after": c.bytes_after }))),
                Err(e) => eprintln!("pipekeep: the record of {t} was not compacted: {e}"),
            }
        }
    }
    let bad_records: Vec<serde_json::Value> = bad_records.into_iter().map(|(_, r)| r).collect();
    if args.scope.json {
        let list: Vec<_> = bad
            .iter()
            .map(|(f, r, why, _)| json!({ "path": f, "reason": r, "detail": why }))
            .collect();
        println!(
            "{}",
            json!({ "checked": files.len(), "pieces_checked": piece_files.len(), "bad_pieces": bad_pieces, "good": good, "bad": list, "dropped": dropped, "bad_records": bad_records, "bad_use_orders": bad_orders.iter().map(|(f, why)| json!({ "path": f, "detail": why })).collect::<Vec<_>>() })
        );
    } else {
        for (i, (f, reason, why, _)) in bad.iter().enumerate() {
            println!(
                "bad {}={} reason={reason} ({why}) path={}",
                if i < bad_pieces { "piece" } else { "entry" },
                f.file_name().unwrap_or_default().to_string_lossy(),
                f.display()
            );
        }
        for r in &bad_records {
            println!(
                "bad record={} damaged_entries={} bytes={} share={}{}",
                r["path"].as_str().unwrap_or_default(),
                r["damaged"],
                r["bytes"],
                r["share"],
                match r.get("compacted") {
                    Some(c) if c.is_object() => format!(
                        " compacted: {} of {} pipelines kept, {} bytes",
                        c["pipelines_kept"], c["pipelines_before"], c["bytes_after"]
                    ),
                    _ => String::new(),
                }
            );
        }
        for (f, why) in &bad_orders {
            println!("bad use-order ({why}) path={}", f.display());
        }
        println!(
            "checked {} entries and {} pieces: {good} good, {} bad; {bad_pieces} bad pieces{}",
            files.len(),
            piece_files.len(),
            bad.len() - bad_pieces,
            if args.fix {
                format!(", {dropped} dropped")
            } else {
                String::new()
            }
        );
    }
    Ok(
        if bad.is_empty() && bad_records.is_empty() && bad_orders.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        },
    )
}

/// Brings a title's record within its share of `max_bytes` as the layer's opening does (the
/// pipelines in the entries' order of use, their stamps from a listing of the title's entries),
/// and (`rewrite_damaged`) rewrites it without its damaged entries.
fn compact_record(
    title_dir: &Path,
    max_bytes: u64,
    rewrite_damaged: bool,
) -> Result<Option<pipekeep::replay::record::Compacted>, String> {
    let listed = entries_of_title(&title_dir.join("host-pipelines")).unwrap_or_default();
    let used = pipekeep::replay::record::stamps_of(&listed);
    pipekeep::replay::record::RecordFile::new(title_dir)
        .compact_to_share(record_share(max_bytes), rewrite_damaged, &|h| {
            used.get(&h).copied()
        })
        .map_err(|e| e.to_string())
}

/// The bytes a title's record would come to compacted to its share of `max_bytes` (a dry run's
/// plan; nothing is written).
fn compacted_size(title_dir: &Path, max_bytes: u64) -> Option<u64> {
    let (entries, _) =
        pipekeep::replay::record::read(&title_dir.join(pipekeep::replay::record::FILE_NAME))
            .ok()?;
    let listed = entries_of_title(&title_dir.join("host-pipelines")).unwrap_or_default();
    let used = pipekeep::replay::record::stamps_of(&listed);
    let kept = pipekeep::replay::record::within_share(entries, record_share(max_bytes), &|h| {
        used.get(&h).copied()
    });
    Some(pipekeep::replay::foz::write_entries_deflated(&kept).len() as u64)
}

/// The identity directory's `use-order` and why it cannot be read, where it is there and damaged.
fn bad_use_order(dir: &Path) -> Option<(PathBuf, String)> {
    let path = dir.join(pipekeep::store::order::USE_ORDER);
    pipekeep::store::order::read(&path)
        .err()
        .map(|e| (path, e.to_string()))
}

pub fn prune(args: PruneArgs) -> Result<ExitCode, String> {
    let (root, titles) = args.scope.titles()?;
    let mut reports = Vec::new();
    for t in &titles {
        let host_dir = root.join(t).join("host-pipelines");
        let entries = entries_of_title(&host_dir).map_err(|e| e.to_string())?;
        let record = record_bytes(&host_dir);
        let before: u64 = entries.iter().map(|e| e.bytes).sum::<u64>() + record;
        let count = entries.len();
        // The record past its share is compacted to it first, as the layer's opening does (a
        // dry run says what it would come to). One compacted as far as it goes and still past
        // its share takes the rest from the entries' room, as in the layer.
        let share = record_share(args.max_bytes);
        let compacted = if args.dry_run {
            None
        } else {
            compact_record(&root.join(t), args.max_bytes, false)?
        };
        let record_after = match compacted {
            Some(c) => c.bytes_after,
            None if args.dry_run && record > share => {
                compacted_size(&root.join(t), args.max_bytes).unwrap_or(record)
            }
            None => record,
        };
        let floor = if record_after > share {
            record_after
        } else {
            0
        };
        let plan = if args.dry_run {
            plan_eviction_past_share(entries, record_after, args.max_bytes, floor)
        } else {
            // The layer's own pass: the same order, a piece an entry is being written or found
            // with kept, and what a running application's pass removes at once counted, so that
            // the two remove together no more than the excess. A record compacted as far as it
            // goes and still past its share takes the rest from the entries' room, as in the
            // layer.
            let listed = entries;
            let bounded = keep_within_past_share(&host_dir, args.max_bytes, floor, &|_| false)
                .map_err(|e| e.to_string())?;
            let kept: std::collections::HashSet<&Path> =
                bounded.kept.iter().map(|e| e.path.as_path()).collect();
            let mut gone: Vec<_> = listed
                .iter()
                .filter(|e| !kept.contains(e.path.as_path()) && !e.path.exists())
                .cloned()
                .collect();
            gone.sort_by(|a, b| a.stamp.cmp(&b.stamp).then_with(|| a.path.cmp(&b.path)));
            gone
        };
        let dropped_bytes: u64 = plan.iter().map(|e| e.bytes).sum();
        let entries_bytes = before - record - dropped_bytes;
        reports.push(json!({
            "title": t, "entries": count, "bytes": before, "dropped": plan.len(), "dropped_bytes": dropped_bytes,
            "kept_bytes": entries_bytes + record_after, "entries_bytes": entries_bytes,
            "record_bytes": record_after, "record_share": record_share(args.max_bytes),
            "record_counted": record_counted(record_after, args.max_bytes),
            "record_pipelines_dropped": compacted.map_or(0, |c| c.pipelines_before - c.pipelines_kept),
            "dry_run": args.dry_run,
            "dropped_entries": plan.iter().map(|e| e.path.file_name().unwrap_or_default().to_string_lossy().into_owned()).collect::<Vec<_>>(),
        }));
    }
    if args.scope.json {
        println!(
            "{}",
            json!({ "max_bytes": args.max_bytes, "titles": reports })
        );
    } else {
        for r in &reports {
            let bytes = |k: &str| human_bytes(r[k].as_u64().unwrap_or(0));
            println!(
                "{}: {} {} of {} entries ({}), keeping {}: entries and pieces {}, record {} (its share {}{})",
                r["title"].as_str().unwrap_or_default(),
                if args.dry_run {
                    "would drop"
                } else {
                    "dropped"
                },
                r["dropped"],
                r["entries"],
                bytes("dropped_bytes"),
                bytes("kept_bytes"),
                bytes("entries_bytes"),
                bytes("record_bytes"),
                bytes("record_share"),
                match r["record_pipelines_dropped"].as_u64() {
                    Some(n) if n > 0 => format!("; {n} pipelines compacted out of it"),
                    _ => String::new(),
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A title's record: its bytes, the pipelines it holds and the entries that fail their check
/// (`null` where the title has none).
fn record_of(title_dir: &Path) -> serde_json::Value {
    use pipekeep::replay::objects::{TAG_COMPUTE, TAG_GRAPHICS};
    let path = title_dir.join(pipekeep::replay::record::FILE_NAME);
    let Ok(bytes) = std::fs::metadata(&path).map(|m| m.len()) else {
        return serde_json::Value::Null;
    };
    // Its share of the bound in force (PIPEKEEP_MAX_BYTES, as the layer reads it).
    let share = record_share(Settings::from_env().max_bytes);
    match pipekeep::replay::record::read(&path) {
        Ok((entries, bytes)) => json!({
            "path": path, "bytes": bytes, "share": share, "over_share": bytes > share,
            "pipelines": entries.iter().filter(|e| e.payload.is_ok() && (e.tag == TAG_COMPUTE || e.tag == TAG_GRAPHICS)).count(),
            "damaged": entries.iter().filter(|e| e.payload.is_err()).count(),
        }),
        Err(e) => {
            json!({ "path": path, "bytes": bytes, "share": share, "over_share": bytes > share, "pipelines": 0, "damaged": 1, "error": e.to_string() })
        }
    }
}

/// Removes our files in an identity directory, then the directory if nothing else is left, by
/// the layer's own rule (`store::drop_directory`): a loading marker or a write in progress that a
/// live process holds locked stays, with the entry the marker names (the application beside the
/// command is loading it), and so does the directory holding them. Returns the entries removed.
fn clear_dir(dir: &Path) -> u64 {
    pipekeep::store::drop_directory(dir, "cleared", &std::sync::atomic::AtomicBool::new(false))
}

pub fn clear(args: ClearArgs) -> Result<ExitCode, String> {
    let (root, titles) = args.scope.titles()?;
    let mut out = Vec::new();
    for t in &titles {
        let removed: u64 = readable(&root.join(t), identity_dirs(&root.join(t)))
            .iter()
            .map(|d| clear_dir(&d.path))
            .sum();
        // Other drivers' directories an opening set aside and has not finished dropping.
        let host = root.join(t).join("host-pipelines");
        for name in readable(&host, pipekeep::store::files::names_in(&host)) {
            if name.ends_with(pipekeep::store::SET_ASIDE_SUFFIX) {
                clear_dir(&host.join(name));
            }
        }
        let _ = std::fs::remove_dir(&host);
        let record = root.join(t).join(pipekeep::replay::record::FILE_NAME);
        let record_removed = remove_if_present(&record).unwrap_or(false);
        let _ = remove_if_present(
            &root
                .join(t)
                .join(pipekeep::replay::record::PENDING_FILE_NAME),
        );
        out.push(json!({ "title": t, "removed": removed, "record_removed": record_removed }));
    }
    if args.scope.json {
        println!("{}", json!({ "titles": out }));
    } else {
        for o in &out {
            println!(
                "{}: removed {} entries{}",
                o["title"].as_str().unwrap_or_default(),
                o["removed"],
                if o["record_removed"] == true {
                    " and its record"
                } else {
                    ""
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn stats(args: StatsArgs) -> Result<ExitCode, String> {
    let (root, titles) = args.scope.titles()?;
    let mut all = Vec::new();
    let mut kept = Vec::new();
    for t in &titles {
        let runs = read_runs(&root.join(t).join("runs.jsonl")).unwrap_or_default();
        all.push((t.clone(), runs));
        let mut title_sharing = Sharing::default();
        for d in readable(&root.join(t), identity_dirs(&root.join(t))) {
            title_sharing.add(&sharing(&d.path));
        }
        kept.push(title_sharing);
    }
    if let Some(path) = &args.plot {
        let store = kept.iter().fold(Sharing::default(), |mut a, s| {
            a.add(s);
            a
        });
        std::fs::write(path, plot_svg(&all, &store))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if args.scope.json {
        let out: Vec<_> = all
            .iter()
            .zip(&kept)
            .map(|((t, runs), store)| json!({ "title": t, "runs": runs, "store": store }))
            .collect();
        println!("{}", json!({ "titles": out }));
        return Ok(ExitCode::SUCCESS);
    }
    for ((t, runs), store) in all.iter().zip(&kept) {
        println!("{t}: {} runs", runs.len());
        println!(
            "  store: {} kept ({} entries: {}; {} pieces: {}) for {} the entries name{}",
            human_bytes(store.kept_bytes()),
            store.entries,
            human_bytes(store.entry_bytes),
            store.pieces,
            human_bytes(store.piece_bytes),
            human_bytes(store.named_bytes),
            if store.kept_bytes() > 0 {
                format!(
                    " ({:.2}x saved)",
                    store.named_bytes as f64 / store.kept_bytes() as f64
                )
            } else {
                String::new()
            }
        );
        println!(
            "  {:<19} {:<7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>12} {:>11}",
            "when (UTC)",
            "backend",
            "built",
            "found",
            "compiled",
            "written",
            "unkeyed",
            "total_ms",
            "longest_ms"
        );
        for r in runs {
            let c = &r.tally;
            println!(
                "  {:<19} {:<7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>12.3} {:>11.3}",
                human_time(r.when),
                if r.backend.is_empty() {
                    "-"
                } else {
                    &r.backend
                },
                c.built,
                c.found,
                c.compiled,
                c.written,
                c.unkeyed,
                c.total_ms,
                c.longest_ms
            );
        }
    }
    if let Some(p) = &args.plot {
        println!("plot written to {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// A bar a run: pipeline-creation time, the found share in green, the rest in orange.
fn plot_svg(all: &[(String, Vec<pipekeep::watch::RunRecord>)], store: &Sharing) -> String {
    let runs: Vec<&pipekeep::watch::RunRecord> = all.iter().flat_map(|(_, r)| r.iter()).collect();
    let (w, h, left, bottom) = (800.0, 400.0, 70.0, 40.0);
    let max = runs.iter().map(|r| r.tally.total_ms).fold(1e-9, f64::max);
    let bar = (w - left - 20.0) / runs.len().max(1) as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{left}\" y=\"18\">pipeline creation per run (ms): found share green, compiled orange; max {max:.1} ms</text>\n"
    );
    for (i, r) in runs.iter().enumerate() {
        let t = &r.tally;
        let total = (h - bottom - 30.0) * t.total_ms / max;
        let found_share = if t.built > 0 {
            t.found as f64 / t.built as f64
        } else {
            0.0
        };
        let x = left + i as f64 * bar;
        let y = h - bottom - total;
        svg += &format!("<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{total:.1}\" fill=\"#e8913a\"><title>{} built, {} found, {:.1} ms</title></rect>\n", bar * 0.8, t.built, t.found, t.total_ms);
        svg += &format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#3aa655\"/>\n",
            h - bottom - total * found_share,
            bar * 0.8,
            total * found_share
        );
        svg += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            x,
            h - bottom + 15.0,
            i + 1
        );
    }
    // The store's split: what its entries name, against what entries and pieces keep.
    let named = store.named_bytes.max(store.kept_bytes()).max(1) as f64;
    let span = w - left - 20.0;
    let y = h - 4.0;
    for (x, width, fill, what) in [
        (
            left,
            span,
            "#dddddd",
            format!("named by the entries: {}", human_bytes(store.named_bytes)),
        ),
        (
            left,
            span * store.entry_bytes as f64 / named,
            "#4a78c2",
            format!("entries: {}", human_bytes(store.entry_bytes)),
        ),
        (
            left + span * store.entry_bytes as f64 / named,
            span * store.piece_bytes as f64 / named,
            "#9b59b6",
            format!("pieces: {}", human_bytes(store.piece_bytes)),
        ),
    ] {
        svg += &format!("<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{width:.1}\" height=\"8\" fill=\"{fill}\"><title>{what}</title></rect>\n", y - 8.0);
    }
    svg += &format!("<text x=\"5\" y=\"{y:.1}\">store</text>\n");
    svg += &format!(
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n</svg>\n",
        h - bottom,
        w - 10.0,
        h - bottom
    );
    svg
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
    let out = json!({
        "root": settings.root, "title_override": settings.title, "max_bytes": settings.max_bytes, "log": settings.log_filter,
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
        "size bound:   {} ({})",
        settings.max_bytes,
        human_bytes(settings.max_bytes)
    );
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
