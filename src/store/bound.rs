//! The size bound: the sizes (`st_size`) of all `*.entry` and `*.piece` files under one title's
//! `host-pipelines/` (each piece once, however many entries name it) and of the title's record
//! (`record.foz`) are kept within `PIPEKEEP_MAX_BYTES`, dropping the oldest stamp first. The
//! stamp is the file's modification time (see `Store::next_stamp`; a piece carries its run's
//! newest stamp, so it goes after the entries using it). The record is never dropped by the
//! bound: it shrinks when the layer compacts it at opening, once most of its pipelines have lost
//! their entries (`replay::record::RecordFile::compact`).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::files::{is_entry_name, names_in};
use super::identity::DirName;
use super::StoreError;
use crate::key::PipelineKey;

/// One entry or piece as the bound sees it.
#[derive(Debug, Clone)]
pub struct StampedEntry {
    pub path: PathBuf,
    pub bytes: u64,
    pub stamp: SystemTime,
}

impl StampedEntry {
    /// The key an entry's file name says (`None` for a piece or any other file).
    pub fn key(&self) -> Option<PipelineKey> {
        PipelineKey::from_file_name(self.path.file_name()?.to_str()?)
    }
}

/// What bringing a title within its bound did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BoundReport {
    pub entries: u64,
    /// Bytes kept: entries, pieces and the record.
    pub bytes: u64,
    /// Of which the record's.
    pub record_bytes: u64,
    pub evicted: u64,
    pub evicted_bytes: u64,
}

/// Every entry and piece under `host_dir`, in identity directories of our naming only.
pub fn entries_of_title(host_dir: &Path) -> Result<Vec<StampedEntry>, StoreError> {
    let mut out = Vec::new();
    for dir_name in names_in(host_dir).map_err(StoreError::io("list", host_dir))? {
        if DirName::parse(&dir_name).is_some() {
            // Pieces before entries: a piece written after its listing is seen stamped anew at
            // its removal, and an entry renamed after the entries' listing was in flight then.
            let dir = host_dir.join(&dir_name);
            out.extend(pieces_in(&dir));
            out.extend(entries_in(&dir));
        }
    }
    Ok(out)
}

fn is_piece(path: &Path) -> bool {
    path.parent()
        .and_then(|p| p.file_name())
        .is_some_and(|d| d == super::pieces::DIR)
}

/// Every piece of one identity directory, with its size and stamp.
pub fn pieces_in(dir: &Path) -> Vec<StampedEntry> {
    super::pieces::listed(dir)
        .into_iter()
        .filter_map(|(_, path)| {
            let meta = fs::symlink_metadata(&path).ok().filter(|m| m.is_file())?;
            Some(StampedEntry {
                bytes: meta.len(),
                stamp: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                path,
            })
        })
        .collect()
}

/// Every entry of one identity directory, with its size and stamp. Each is stat-ed relative to
/// the open directory (no walk of the whole path per entry). An entry removed by another
/// process since the listing is simply not counted.
pub fn entries_in(dir: &Path) -> Vec<StampedEntry> {
    let Ok(listing) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(is_entry_name) {
            continue;
        }
        if let Ok(meta) = entry.metadata() {
            if meta.is_file() {
                out.push(StampedEntry {
                    path: dir.join(name),
                    bytes: meta.len(),
                    stamp: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                });
            }
        }
    }
    out
}

/// The bytes of the record of the title whose `host-pipelines/` is `host_dir` (0 where it has
/// none): counted within the bound, never dropped by it.
pub fn record_bytes(host_dir: &Path) -> u64 {
    host_dir
        .parent()
        .map(|title| title.join(crate::replay::record::FILE_NAME))
        .and_then(|p| fs::symlink_metadata(p).ok())
        .filter(|m| m.is_file())
        .map_or(0, |m| m.len())
}

/// The entries to drop to bring `entries` and `record_bytes` within `max_bytes`, oldest stamp
/// first. Ties are broken by path so that every tool agrees on the order.
pub fn plan_eviction(
    entries: Vec<StampedEntry>,
    record_bytes: u64,
    max_bytes: u64,
) -> Vec<StampedEntry> {
    split_at_bound(entries, max_bytes.saturating_sub(record_bytes)).0
}

/// `entries` split into those to drop (oldest stamp first) and those kept.
fn split_at_bound(
    mut entries: Vec<StampedEntry>,
    max_bytes: u64,
) -> (Vec<StampedEntry>, Vec<StampedEntry>) {
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    if total <= max_bytes {
        return (Vec::new(), entries);
    }
    sort_oldest_first(&mut entries);
    let mut dropped = 0;
    for e in &entries {
        if total <= max_bytes {
            break;
        }
        total -= e.bytes;
        dropped += 1;
    }
    let kept = entries.split_off(dropped);
    (entries, kept)
}

/// Oldest stamp first; at an equal stamp by path (an entry before the pieces beside it), so that
/// every tool agrees on the order.
fn sort_oldest_first(entries: &mut [StampedEntry]) {
    entries.sort_by(|a, b| a.stamp.cmp(&b.stamp).then_with(|| a.path.cmp(&b.path)));
}

/// A title brought within its bound: what was done, and the entries kept (each with its
/// stamp, so that reading ahead needs no listing of its own).
#[derive(Debug, Default)]
pub struct Bounded {
    pub report: BoundReport,
    pub kept: Vec<StampedEntry>,
}

/// Brings the title whose `host-pipelines/` is `host_dir` within `max_bytes`.
/// `in_use` says whether a piece is named by an entry the caller has written since the bound
/// began (the listing may hold the piece but miss the entry): such a piece stays, and the next
/// oldest goes instead.
pub fn keep_within(
    host_dir: &Path,
    max_bytes: u64,
    in_use: &dyn Fn(&Path) -> bool,
) -> Result<Bounded, StoreError> {
    let mut entries = entries_of_title(host_dir)?;
    let record_bytes = record_bytes(host_dir);
    let mut report = BoundReport {
        entries: entries.len() as u64,
        bytes: entries.iter().map(|e| e.bytes).sum::<u64>() + record_bytes,
        record_bytes,
        ..Default::default()
    };
    if report.bytes <= max_bytes {
        return Ok(Bounded {
            report,
            kept: entries,
        });
    }
    sort_oldest_first(&mut entries);
    let mut kept = Vec::new();
    for e in entries {
        let piece_in_use = is_piece(&e.path) && (in_use(&e.path) || stamped_since(&e));
        if report.bytes <= max_bytes || piece_in_use {
            kept.push(e);
            continue;
        }
        if super::files::remove_if_present(&e.path).unwrap_or(false) {
            report.evicted += 1;
            report.evicted_bytes += e.bytes;
            report.entries -= 1;
            report.bytes -= e.bytes;
            tracing::debug!(
                stamp = ?e.stamp,
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
            record_bytes,
            max_bytes,
            "store brought within its bound"
        );
    }
    Ok(Bounded { report, kept })
}

/// A piece stamped again since it was listed is named by an entry a run (of any process) is
/// writing or has found now, perhaps one the listing does not hold: it stays. (An entry stamped
/// again goes as listed: its run has read it already; the next run misses it.)
fn stamped_since(e: &StampedEntry) -> bool {
    fs::symlink_metadata(&e.path)
        .and_then(|m| m.modified())
        .is_ok_and(|now| now != e.stamp)
}
