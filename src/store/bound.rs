//! The size bound: the sizes (`st_size`) of all `*.entry` files under one title's
//! `host-pipelines/` are kept within `PIPEKEEP_MAX_BYTES`, dropping the oldest stamp first.
//! The stamp is the file's modification time (see `Store::next_stamp`).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::files::{is_entry_name, names_in};
use super::identity::DirName;
use super::StoreError;

/// One entry as the bound sees it.
#[derive(Debug, Clone)]
pub struct StampedEntry {
    pub path: PathBuf,
    pub bytes: u64,
    pub stamp: SystemTime,
}

/// What bringing a title within its bound did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BoundReport {
    pub entries: u64,
    pub bytes: u64,
    pub evicted: u64,
    pub evicted_bytes: u64,
}

/// Every entry under `host_dir`, in identity directories of our naming only.
pub fn entries_of_title(host_dir: &Path) -> Result<Vec<StampedEntry>, StoreError> {
    let mut out = Vec::new();
    for dir_name in names_in(host_dir).map_err(StoreError::io("list", host_dir))? {
        if DirName::parse(&dir_name).is_some() {
            out.extend(entries_in(&host_dir.join(&dir_name)));
        }
    }
    Ok(out)
}

/// Every entry of one identity directory, with its size and stamp. An entry removed by another
/// process since the listing is simply not counted.
pub fn entries_in(dir: &Path) -> Vec<StampedEntry> {
    let mut out = Vec::new();
    for name in names_in(dir).unwrap_or_default() {
        if !is_entry_name(&name) {
            continue;
        }
        let path = dir.join(&name);
        if let Ok(meta) = fs::symlink_metadata(&path) {
            if meta.is_file() {
                let stamp = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                out.push(StampedEntry {
                    path,
                    bytes: meta.len(),
                    stamp,
                });
            }
        }
    }
    out
}

/// The entries to drop to bring `entries` within `max_bytes`, oldest stamp first. Ties are
/// broken by path so that every tool agrees on the order.
pub fn plan_eviction(mut entries: Vec<StampedEntry>, max_bytes: u64) -> Vec<StampedEntry> {
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    if total <= max_bytes {
        return Vec::new();
    }
    entries.sort_by(|a, b| a.stamp.cmp(&b.stamp).then_with(|| a.path.cmp(&b.path)));
    let mut out = Vec::new();
    for e in entries {
        if total <= max_bytes {
            break;
        }
        total -= e.bytes;
        out.push(e);
    }
    out
}

/// Brings the title whose `host-pipelines/` is `host_dir` within `max_bytes`.
pub fn keep_within(host_dir: &Path, max_bytes: u64) -> Result<BoundReport, StoreError> {
    let entries = entries_of_title(host_dir)?;
    let mut report = BoundReport {
        entries: entries.len() as u64,
        bytes: entries.iter().map(|e| e.bytes).sum(),
        ..Default::default()
    };
    for e in plan_eviction(entries, max_bytes) {
        if super::files::remove_if_present(&e.path).unwrap_or(false) {
            report.evicted += 1;
            report.evicted_bytes += e.bytes;
            report.entries -= 1;
            report.bytes -= e.bytes;
            tracing::debug!(
                "dropped entry={} reason=evicted",
                e.path.file_name().unwrap_or_default().to_string_lossy()
            );
        }
    }
    if report.evicted > 0 {
        tracing::info!(
            evicted = report.evicted,
            evicted_bytes = report.evicted_bytes,
            kept_bytes = report.bytes,
            max_bytes,
            "store brought within its bound"
        );
    }
    Ok(report)
}
