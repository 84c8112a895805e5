//! `pipekeep prune`: a title brought within a bound by the layer's own pass, its record compacted
//! to its share first.

use std::path::Path;
use std::process::ExitCode;

use serde_json::json;

use super::record::{compact_record, compacted_size};
use super::{human_bytes, Scope};
use pipekeep::store::bound::{
    entries_of_title, keep_within_past_share, plan_eviction_past_share, record_bytes,
    record_counted, record_share,
};

/// Bring a title's store within N bytes, in the layer's order: pieces no kept entry names first,
/// then the oldest stamps, an entry's own pieces right after it; the title's record takes at most
/// its share (a quarter), and is compacted to it in the same order.
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
