//! `pipekeep verify`: every entry and piece checked as the layer would, the records of every
//! file of entries left waiting, each title's record and order of use too; `--fix` drops what is
//! bad by the layer's own rules.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use super::record::{compact_record, record_of};
use super::{readable, Scope};
use crate::progress::bar;
use pipekeep::settings::Settings;
use pipekeep::store::files::remove_if_present;
use pipekeep::store::inspect::{
    check_entry_with, check_piece, check_waiting, entry_files, fix_waiting, identity_dirs,
};
use pipekeep::store::pieces::Pieces;

/// Check every entry as the layer would (envelope, length, hash, cache header), those left
/// waiting too.
#[derive(clap::Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    scope: Scope,
    /// Drop the bad entries; write each damaged file of entries left waiting again without its
    /// damage (removed where nothing in it is sound, or no opening would take it).
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
    let waiting = check_waiting_files(&dirs, args.fix);
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
            json!({ "checked": files.len(), "pieces_checked": piece_files.len(), "bad_pieces": bad_pieces, "good": good, "bad": list, "dropped": dropped, "waiting": waiting.as_json(), "bad_records": bad_records, "bad_use_orders": bad_orders.iter().map(|(f, why)| json!({ "path": f, "detail": why })).collect::<Vec<_>>() })
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
        waiting.print();
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
        if !waiting.files.is_empty() {
            println!("{}", waiting.summary(args.fix));
        }
    }
    Ok(
        if bad.is_empty() && bad_records.is_empty() && bad_orders.is_empty() && waiting.all_sound()
        {
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

/// What the check of the waiting files found: each file's sound and bad records, whether it read
/// whole and its seal held, and, with `--fix`, whether it was written again without its damage.
struct WaitingReport {
    files: Vec<WaitingFile>,
}

struct WaitingFile {
    path: PathBuf,
    checked: Result<pipekeep::store::waiting::CheckedFile, pipekeep::store::inspect::CheckError>,
    /// `--fix`: fixed (written again without its damage, removed where nothing in it is sound
    /// or no opening takes it, or found gone or sound at the fix's own read); the error where
    /// it could not be.
    fixed: Option<Result<bool, String>>,
}

impl WaitingFile {
    fn is_bad(&self) -> bool {
        self.checked.as_ref().map_or(true, |c| c.is_damaged())
    }

    fn seal(&self) -> &'static str {
        self.checked.as_ref().map_or("-", |c| c.seal.word())
    }
}

/// Checks every waiting file of `dirs` as an opening would take it; with `fix`, writes each
/// damaged one again without its damage.
fn check_waiting_files(dirs: &[PathBuf], fix: bool) -> WaitingReport {
    let mut files = Vec::new();
    for dir in dirs {
        let pieces = Pieces::for_looking(dir);
        for path in readable(dir, pipekeep::store::waiting::files_in(dir)) {
            let checked = check_waiting(&path, &pieces);
            let mut file = WaitingFile {
                path,
                checked,
                fixed: None,
            };
            if fix && file.is_bad() {
                file.fixed = Some(fix_waiting(&file.path, &pieces));
            }
            files.push(file);
        }
    }
    WaitingReport { files }
}

impl WaitingReport {
    fn bad_files(&self) -> usize {
        self.files.iter().filter(|f| f.is_bad()).count()
    }

    fn all_sound(&self) -> bool {
        self.bad_files() == 0
    }

    fn entries(&self) -> usize {
        let sound = |f: &WaitingFile| f.checked.as_ref().map_or(0, |c| c.entries.len());
        self.files.iter().map(sound).sum()
    }

    fn as_json(&self) -> serde_json::Value {
        let files: Vec<_> = self
            .files
            .iter()
            .map(|f| {
                let (entries, bad, bad_pieces, whole, error) = match &f.checked {
                    Ok(c) => {
                        let bad: Vec<_> = c
                            .bad
                            .iter()
                            .map(|b| json!({ "entry": b.key.file_name().to_string(), "reason": b.why.reason(), "detail": b.why.to_string() }))
                            .collect();
                        (c.entries.len(), bad, c.bad_pieces.len(), c.whole, None)
                    }
                    Err(e) => (0, Vec::new(), 0, false, Some(json!({ "reason": e.reason(), "detail": e.to_string() }))),
                };
                json!({ "path": f.path, "entries": entries, "bad_entries": bad, "bad_pieces": bad_pieces, "whole": whole, "seal": f.seal(), "bad": f.is_bad(), "error": error, "fixed": f.fixed.as_ref().map(|r| *r.as_ref().unwrap_or(&false)), "fix_error": f.fixed.as_ref().and_then(|r| r.as_ref().err()) })
            })
            .collect();
        json!({ "files": files, "entries": self.entries(), "bad_files": self.bad_files() })
    }

    /// A line for each damage found, as the layer would log it.
    fn print(&self) {
        for f in self.files.iter().filter(|f| f.is_bad()) {
            let fixed = match &f.fixed {
                Some(Ok(true)) => " fixed",
                Some(Ok(false)) => " not fixed (another process holds it)",
                Some(Err(_)) | None => "",
            };
            match &f.checked {
                Ok(c) => {
                    println!(
                        "bad waiting={} entries={} bad_entries={} bad_pieces={} whole={} seal={}{fixed} path={}",
                        f.path.file_name().unwrap_or_default().to_string_lossy(),
                        c.entries.len(),
                        c.bad.len(),
                        c.bad_pieces.len(),
                        c.whole,
                        f.seal(),
                        f.path.display()
                    );
                    for b in &c.bad {
                        println!(
                            "bad waiting-entry={} reason={} ({}) path={}",
                            b.key.file_name(),
                            b.why.reason(),
                            b.why,
                            f.path.display()
                        );
                    }
                }
                Err(e) => println!(
                    "bad waiting={} reason={} ({e}){fixed} path={}",
                    f.path.file_name().unwrap_or_default().to_string_lossy(),
                    e.reason(),
                    f.path.display()
                ),
            }
            if let Some(Err(e)) = &f.fixed {
                eprintln!("pipekeep: {} was not fixed: {e}", f.path.display());
            }
        }
    }

    fn summary(&self, fix: bool) -> String {
        let bad = self.bad_files();
        let fixed = self
            .files
            .iter()
            .filter(|f| matches!(f.fixed, Some(Ok(true))))
            .count();
        let files = self.files.len();
        format!(
            "checked {files} {} of entries left waiting: {} sound entries, {bad} damaged{}",
            if files == 1 { "file" } else { "files" },
            self.entries(),
            if fix {
                format!(", {fixed} fixed")
            } else {
                String::new()
            }
        )
    }
}
