//! `pipekeep prune`: a title brought within a bound by the layer's own pass, its record compacted
//! to its share first; with `--library`, the whole library within its bound by the layer's own
//! library pass (`store::library`).

use std::path::Path;
use std::process::ExitCode;

use serde_json::{json, Value};

use super::record::{compact_record, compacted_size};
use super::{human_bytes, Scope};
use pipekeep::settings::Settings;
use pipekeep::store::bound::{
    entries_of_title, keep_within_past_share, plan_eviction_past_share, record_bytes,
    record_counted, record_share,
};
use pipekeep::store::library::{self, Step, Wait};

/// Bring a title's store within N bytes, in the layer's order: pieces no kept entry names first,
/// then the oldest stamps, an entry's own pieces right after it; the title's record takes at most
/// its share (a quarter), and is compacted to it in the same order. With --library, then the
/// whole library within its bound, as the layer's opening keeps it: other drivers' directories
/// first, then the least recently used titles, each one's entries before its record.
#[derive(clap::Args)]
pub struct PruneArgs {
    #[command(flatten)]
    scope: Scope,
    /// Each title's bound, in bytes.
    #[arg(long, required_unless_present = "library")]
    max_bytes: Option<u64>,
    /// Bring the whole library within its bound (every title: no --title).
    #[arg(long, conflicts_with = "title")]
    library: bool,
    /// The library's bound, in bytes (default: PIPEKEEP_LIBRARY_MAX_BYTES, else 4 GiB).
    #[arg(long, requires = "library")]
    library_max_bytes: Option<u64>,
    /// Say what would be dropped, drop nothing.
    #[arg(long)]
    dry_run: bool,
}

pub fn prune(args: PruneArgs) -> Result<ExitCode, String> {
    let (root, titles) = args.scope.titles()?;
    let reports = match args.max_bytes {
        Some(max_bytes) => prune_titles(&args, &root, &titles, max_bytes)?,
        None => Vec::new(),
    };
    let library = if args.library {
        Some(prune_library(&args, &root)?)
    } else {
        None
    };
    if args.scope.json {
        let out = json!({ "max_bytes": args.max_bytes, "titles": reports, "library": library });
        println!("{out}");
        return Ok(ExitCode::SUCCESS);
    }
    for r in &reports {
        print_title(r, args.dry_run);
    }
    if let Some(l) = &library {
        print_library(l, args.dry_run);
    }
    Ok(ExitCode::SUCCESS)
}

/// Each title in scope within `max_bytes`, by the layer's own bound pass.
fn prune_titles(
    args: &PruneArgs,
    root: &Path,
    titles: &[String],
    max_bytes: u64,
) -> Result<Vec<Value>, String> {
    let mut reports = Vec::new();
    for t in titles {
        let host_dir = root.join(t).join("host-pipelines");
        let entries = entries_of_title(&host_dir).map_err(|e| e.to_string())?;
        let record = record_bytes(&host_dir);
        let before: u64 = entries.iter().map(|e| e.bytes).sum::<u64>() + record;
        let count = entries.len();
        // The record past its share is compacted to it first, as the layer's opening does (a
        // dry run says what it would come to). One compacted as far as it goes and still past
        // its share takes the rest from the entries' room, as in the layer.
        let share = record_share(max_bytes);
        let compacted = if args.dry_run {
            None
        } else {
            compact_record(&root.join(t), max_bytes, false)?
        };
        let record_after = match compacted {
            Some(c) => c.bytes_after,
            None if args.dry_run && record > share => {
                compacted_size(&root.join(t), max_bytes).unwrap_or(record)
            }
            None => record,
        };
        let floor = if record_after > share {
            record_after
        } else {
            0
        };
        let plan = if args.dry_run {
            plan_eviction_past_share(entries, record_after, max_bytes, floor)
        } else {
            // The layer's own pass: the same order, a piece an entry is being written or found
            // with kept, and what a running application's pass removes at once counted, so that
            // the two remove together no more than the excess. A record compacted as far as it
            // goes and still past its share takes the rest from the entries' room, as in the
            // layer.
            let listed = entries;
            let bounded = keep_within_past_share(&host_dir, max_bytes, floor, &|_| false)
                .map_err(|e| e.to_string())?;
            let kept: std::collections::HashSet<&Path> =
                bounded.kept.iter().map(|e| e.path.as_path()).collect();
            // A waiting file's entries dropped are named one by one, the file not again.
            let rewritten: std::collections::HashSet<&Path> = bounded
                .waiting_dropped
                .iter()
                .map(|e| e.path.as_path())
                .collect();
            let mut gone: Vec<_> = listed
                .iter()
                .filter(|e| !kept.contains(e.path.as_path()) && !e.path.exists())
                .filter(|e| !rewritten.contains(e.path.as_path()))
                .cloned()
                .chain(bounded.waiting_dropped.iter().cloned())
                .collect();
            gone.sort_by(|a, b| a.stamp.cmp(&b.stamp).then_with(|| a.path.cmp(&b.path)));
            gone
        };
        let dropped_bytes: u64 = plan.iter().map(|e| e.bytes).sum();
        let entries_bytes = before.saturating_sub(record + dropped_bytes);
        reports.push(json!({
            "title": t, "entries": count, "bytes": before, "dropped": plan.len(), "dropped_bytes": dropped_bytes,
            "kept_bytes": entries_bytes + record_after, "entries_bytes": entries_bytes,
            "record_bytes": record_after, "record_share": record_share(max_bytes),
            "record_counted": record_counted(record_after, max_bytes),
            "record_pipelines_dropped": compacted.map_or(0, |c| c.pipelines_before - c.pipelines_kept),
            "dry_run": args.dry_run,
            "dropped_entries": plan.iter().map(dropped_name).collect::<Vec<_>>(),
        }));
    }
    Ok(reports)
}

/// A dropped file's name; an entry dropped from a waiting file, the name its own file takes.
fn dropped_name(e: &pipekeep::store::bound::StampedEntry) -> String {
    match e.waiting_record {
        Some(key) => key.file_name().to_string(),
        None => e
            .path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
    }
}

fn print_title(r: &Value, dry_run: bool) {
    let bytes = |k: &str| human_bytes(r[k].as_u64().unwrap_or(0));
    println!(
        "{}: {} {} of {} entries ({}), keeping {}: entries and pieces {}, record {} (its share {}{})",
        r["title"].as_str().unwrap_or_default(),
        if dry_run { "would drop" } else { "dropped" },
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

/// The library within its bound by the layer's own library pass (a dry run: what it would do).
fn prune_library(args: &PruneArgs, root: &Path) -> Result<Value, String> {
    let max_bytes = args
        .library_max_bytes
        .unwrap_or_else(|| Settings::from_env().library_max_bytes);
    let (before, steps, after) = if args.dry_run {
        let usage = library::usage(root, None).map_err(|e| e.to_string())?;
        let before: u64 = usage.iter().map(library::TitleUsage::bytes).sum();
        let steps = library::plan(&usage, max_bytes, None, None);
        let freed: u64 = steps.iter().map(Step::bytes).sum();
        (before, steps, before.saturating_sub(freed))
    } else {
        let r = library::keep_within(root, max_bytes, None, Wait::Yes, &|_| false)
            .map_err(|e| e.to_string())?;
        (r.bytes_before, r.steps, r.bytes)
    };
    Ok(json!({
        "max_bytes": max_bytes, "bytes_before": before, "bytes": after, "dry_run": args.dry_run,
        "steps": steps.iter().map(step_json).collect::<Vec<_>>(),
    }))
}

fn step_json(step: &Step) -> Value {
    let (title, what, path) = match step {
        Step::DropDir { title, path, .. } => (title, "directory", Some(path)),
        Step::Shrink { title, .. } => (title, "entries", None),
        Step::DropRecord { title, .. } => (title, "record", None),
    };
    json!({ "title": title, "drop": what, "path": path, "bytes": step.bytes() })
}

fn print_library(l: &Value, dry_run: bool) {
    let bytes = |v: &Value| human_bytes(v.as_u64().unwrap_or(0));
    println!(
        "library: {} in a bound of {}, {} {}",
        bytes(&l["bytes_before"]),
        bytes(&l["max_bytes"]),
        if dry_run { "would keep" } else { "keeping" },
        bytes(&l["bytes"])
    );
    for s in l["steps"].as_array().into_iter().flatten() {
        let what = match s["drop"].as_str() {
            Some("directory") => format!(
                "a directory of a driver no longer used, {}",
                s["path"].as_str().unwrap_or_default()
            ),
            Some("record") => "its record".to_owned(),
            _ => "entries and pieces, the oldest first".to_owned(),
        };
        let done = if dry_run { "would drop" } else { "dropped" };
        let title = s["title"].as_str().unwrap_or_default();
        println!("  {title}: {done} {what} ({})", bytes(&s["bytes"]));
    }
}
