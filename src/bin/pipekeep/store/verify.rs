//! `pipekeep verify`: every entry and piece checked as the layer would, each title's record and
//! order of use too; `--fix` drops what is bad by the layer's own rules.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use super::record::{compact_record, record_of};
use super::{readable, Scope};
use crate::progress::bar;
use pipekeep::settings::Settings;
use pipekeep::store::files::remove_if_present;
use pipekeep::store::inspect::{check_entry_with, check_piece, entry_files, identity_dirs};
use pipekeep::store::pieces::Pieces;

/// Check every entry as the layer would (envelope, length, hash, cache header).
#[derive(clap::Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    scope: Scope,
    /// Drop the bad entries.
    #[arg(long)]
    fix: bool,
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
    let progress = show_progress.then(|| bar(files.len() as u64, "verify", "entries"));
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
    for f in &files {
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
        if let Some(progress) = &progress {
            progress.inc(1);
        }
    }
    if let Some(progress) = progress {
        progress.finish();
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

/// The identity directory's `use-order` and why it cannot be read, where it is there and damaged.
fn bad_use_order(dir: &Path) -> Option<(PathBuf, String)> {
    let path = dir.join(pipekeep::store::order::USE_ORDER);
    pipekeep::store::order::read(&path)
        .err()
        .map(|e| (path, e.to_string()))
}
