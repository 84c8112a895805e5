//! The size bound: the sizes (`st_size`) of all `*.entry`, `*.piece` and `*.waiting` files under
//! one title's `host-pipelines/` (each piece once, however many entries name it; those of other
//! drivers' directories set aside, `*.dropped`, too) and of the title's record (`record.foz`) are
//! kept within `PIPEKEEP_MAX_BYTES`, dropping the set-aside directories first, then a piece that
//! no kept entry names, then the oldest stamp first, the pieces only a dropped entry named going
//! right after it ([`super::eviction`]). A file of entries left waiting is dropped one entry at
//! a time, each at its file's stamp (the newest use of its entries), its oldest own stamps first
//! and those whose entry is a file already before any, by writing it again without them
//! ([`super::waiting::as_records`]). The stamp is the file's modification time (see
//! `Store::next_stamp`; a piece carries its run's newest stamp, so it never goes before an entry
//! using it). The record is never dropped by the
//! bound, and takes at most its share of it ([`record_share`], a quarter): it never crowds out
//! the entries it backs. A record past its share is compacted to it at the layer's opening (or
//! by `pipekeep prune` and `verify --fix`), dropping pipelines in the entries' order of use
//! (`replay::record::RecordFile::compact_to_share`).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use super::eviction::Eviction;
use super::files::{is_entry_name, names_in};
use super::identity::DirName;
use super::waiting::{self, WaitingDrops};
use super::{Store, StoreError};
use crate::sync::Unpoisoned;

pub use super::eviction::StampedEntry;

/// What bringing a title within its bound did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BoundReport {
    /// Entries and pieces (and waiting files, or their records where the pass took them apart).
    pub entries: u64,
    /// Bytes kept: entries, pieces, waiting files and the record.
    pub bytes: u64,
    /// Of which the record's.
    pub record_bytes: u64,
    /// The most of the bound the record takes ([`record_share`]): entries and pieces keep the
    /// rest, however large the record has grown (its compaction brings it within its share).
    pub record_share: u64,
    pub evicted: u64,
    pub evicted_bytes: u64,
    /// Bytes of other drivers' directories set aside (`*.dropped`) dropped to make room.
    pub set_aside_dropped_bytes: u64,
}

impl BoundReport {
    /// A file (or a waiting file's record) of `bytes` dropped.
    fn evicted(&mut self, bytes: u64) {
        self.evicted += 1;
        self.evicted_bytes += bytes;
        self.entries -= 1;
        self.bytes -= bytes;
    }

    /// One counted as dropped that stays after all (its waiting file not written again).
    fn kept_after_all(&mut self, bytes: u64) {
        self.evicted -= 1;
        self.evicted_bytes -= bytes;
        self.entries += 1;
        self.bytes += bytes;
    }
}

/// The file of a title's bytes of entries, pieces and waiting files as its bound last counted
/// them (at every pass), with what its runs wrote since: the library's pass sums these (and each
/// record's length) before it lists any file, and walks the library only where they say it is
/// over its bound (`super::library`).
pub const BYTES_FILE: &str = "library-bytes";

/// The title's bytes as last noted ([`BYTES_FILE`]), where a note reads.
pub fn noted_title_bytes(title_dir: &Path) -> Option<u64> {
    let noted = fs::read_to_string(title_dir.join(BYTES_FILE)).ok()?;
    noted.trim().parse().ok()
}

/// Records `bytes` as the title's, where its directory exists.
pub fn note_title_bytes(title_dir: &Path, bytes: u64) {
    if title_dir.is_dir() {
        let path = title_dir.join(BYTES_FILE);
        let written =
            super::files::write_atomically(&path, bytes.to_string().as_bytes(), SystemTime::now());
        if let Err(e) = written {
            tracing::debug!(path = %path.display(), error = %e, "the title's bytes were not noted");
        }
    }
}

/// Every entry, piece and file of entries left waiting under `host_dir`, in identity
/// directories of our naming only.
pub fn entries_of_title(host_dir: &Path) -> Result<Vec<StampedEntry>, StoreError> {
    let mut out = Vec::new();
    for dir_name in names_in(host_dir).map_err(StoreError::io("list", host_dir))? {
        if DirName::parse(&dir_name).is_some() {
            out.extend(files_in(&host_dir.join(&dir_name)));
        }
    }
    Ok(out)
}

/// Every directory of another driver's entries set aside under `host_dir` (`*.dropped`), with
/// the bytes of its entries, pieces and waiting files.
fn set_aside_of_title(host_dir: &Path) -> Vec<(PathBuf, u64)> {
    names_in(host_dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.ends_with(super::SET_ASIDE_SUFFIX))
        .map(|n| host_dir.join(n))
        .filter(|d| fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()))
        .map(|d| {
            let bytes = files_bytes(&d);
            (d, bytes)
        })
        .collect()
}

/// The bytes of the entries, pieces and waiting files of one directory.
pub(super) fn files_bytes(dir: &Path) -> u64 {
    files_in(dir).iter().map(|e| e.bytes).sum()
}

/// Every entry, piece and file of entries left waiting of one directory.
pub(super) fn files_in(dir: &Path) -> Vec<StampedEntry> {
    // Pieces before entries: a piece written after its listing is seen stamped anew at its
    // removal, and an entry renamed after the entries' listing was in flight then.
    let mut out = pieces_in(dir);
    out.extend(listed_in(dir, true));
    out
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
                waiting_record: None,
            })
        })
        .collect()
}

/// Every entry of one identity directory, with its size and stamp. Each is stat-ed relative to
/// the open directory (no walk of the whole path per entry). An entry removed by another
/// process since the listing is simply not counted.
pub fn entries_in(dir: &Path) -> Vec<StampedEntry> {
    listed_in(dir, false)
}

/// The entries of one directory (`waiting_too`: and its files of entries left waiting, whole),
/// in one listing.
fn listed_in(dir: &Path, waiting_too: bool) -> Vec<StampedEntry> {
    let Ok(listing) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let wanted =
        |n: &str| is_entry_name(n) || (waiting_too && n.ends_with(super::files::WAITING_SUFFIX));
    let mut out = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(wanted) {
            continue;
        }
        if let Ok(meta) = entry.metadata() {
            if meta.is_file() {
                out.push(StampedEntry {
                    path: dir.join(name),
                    bytes: meta.len(),
                    stamp: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    waiting_record: None,
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
        .map(|title| title.join(super::RECORD_FILE))
        .and_then(|p| fs::symlink_metadata(p).ok())
        .filter(|m| m.is_file())
        .map_or(0, |m| m.len())
}

/// The record's share of a title's bound: a quarter of it. The record never takes more of the
/// bound than this, so it never crowds out the entries it backs; a record grown past it is
/// compacted to it (`replay::record::RecordFile::compact_to_share`), never the entries.
pub fn record_share(max_bytes: u64) -> u64 {
    max_bytes / 4
}

/// What the record takes of the bound: its bytes, at most its share.
pub fn record_counted(record_bytes: u64, max_bytes: u64) -> u64 {
    record_bytes.min(record_share(max_bytes))
}

/// The entries and pieces to drop to bring `entries` and `record_bytes` (at most the record's
/// share) within `max_bytes`, in the layer's order: a piece no kept entry names first, then the
/// oldest stamp first (ties broken by path, so that every tool agrees on the order).
pub fn plan_eviction(
    entries: Vec<StampedEntry>,
    record_bytes: u64,
    max_bytes: u64,
) -> Vec<StampedEntry> {
    plan_eviction_past_share(entries, record_bytes, max_bytes, 0)
}

/// As [`plan_eviction`], the record counted at least `record_floor` bytes where it is that large
/// (see [`keep_within_past_share`]).
pub fn plan_eviction_past_share(
    entries: Vec<StampedEntry>,
    record_bytes: u64,
    max_bytes: u64,
    record_floor: u64,
) -> Vec<StampedEntry> {
    let counted = record_counted(record_bytes, max_bytes).max(record_floor.min(record_bytes));
    dropped_to_fit(entries, max_bytes.saturating_sub(counted))
}

/// The files of `entries` to drop to bring them within `max_bytes`, in the order the pass drops
/// them ([`Eviction`]), and every piece no kept entry names after them.
fn dropped_to_fit(entries: Vec<StampedEntry>, max_bytes: u64) -> Vec<StampedEntry> {
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    if total <= max_bytes {
        return Vec::new();
    }
    let mut order = Eviction::new(waiting::as_records(entries).0, &waiting::named_by_entries);
    let mut plan = Vec::new();
    while total > max_bytes {
        let Some(i) = order.next() else { break };
        total -= order.file(i).bytes;
        order.gone(i);
        plan.push(order.file(i).clone());
    }
    // Then every piece no kept entry names, as the pass drops them.
    while let Some(i) = order.next_unnamed() {
        plan.push(order.file(i).clone());
    }
    plan
}

/// A title brought within its bound: what was done, and the entries kept (each with its
/// stamp, so that reading ahead needs no listing of its own).
#[derive(Debug, Default)]
pub struct Bounded {
    pub report: BoundReport,
    pub kept: Vec<StampedEntry>,
    /// The entries dropped from files of entries left waiting (each one record of its file).
    pub waiting_dropped: Vec<StampedEntry>,
}

/// Brings the title whose `host-pipelines/` is `host_dir` within `max_bytes`. A file found gone
/// at its removal counts as removed (another pass removing by the same order got there first):
/// two passes at once remove together the excess, at most a file more, never twice it.
/// `in_use` says whether a piece is named by an entry the caller has written since the bound
/// began (the listing may hold the piece but miss the entry): such a piece stays, and the next
/// oldest goes instead.
pub fn keep_within(
    host_dir: &Path,
    max_bytes: u64,
    in_use: &dyn Fn(&Path) -> bool,
) -> Result<Bounded, StoreError> {
    keep_within_past_share(host_dir, max_bytes, 0, in_use)
}

/// As [`keep_within`], the record counted at least `record_floor` bytes where it is that large:
/// what a record compacted as far as it goes still holds past its share (its configurations'
/// entries alone, in a bound of a few KiB) is taken from the entries' room, so that the title
/// stays within its bound.
pub fn keep_within_past_share(
    host_dir: &Path,
    max_bytes: u64,
    record_floor: u64,
    in_use: &dyn Fn(&Path) -> bool,
) -> Result<Bounded, StoreError> {
    let entries = entries_of_title(host_dir)?;
    let record_bytes = record_bytes(host_dir);
    let set_aside = set_aside_of_title(host_dir);
    let mut report = BoundReport {
        entries: entries.len() as u64,
        bytes: entries.iter().map(|e| e.bytes).sum::<u64>()
            + record_bytes
            + set_aside.iter().map(|d| d.1).sum::<u64>(),
        record_bytes,
        record_share: record_share(max_bytes),
        ..Default::default()
    };
    // The record's bytes past its share are its own compaction's to drop: the entries are
    // kept within what is left of the bound once the record has its share.
    let counted = record_counted(record_bytes, max_bytes).max(record_floor.min(record_bytes));
    let max_bytes = max_bytes.saturating_add(record_bytes - counted);
    if report.bytes <= max_bytes {
        return Ok(Bounded {
            report,
            kept: entries,
            waiting_dropped: Vec::new(),
        });
    }
    // Another driver's entries set aside at an opening (`*.dropped`) are dropped once the
    // application pauses; one that never pauses would keep them, and set aside more at each
    // driver change: over the bound, they go first, whole (what a live process holds stays).
    for (dir, bytes) in set_aside {
        if report.bytes <= max_bytes {
            break;
        }
        super::dropping::drop_directory(
            &dir,
            "foreign",
            &std::sync::atomic::AtomicBool::new(false),
        );
        let left = files_bytes(&dir);
        report.bytes -= bytes.saturating_sub(left);
        report.set_aside_dropped_bytes += bytes.saturating_sub(left);
        tracing::info!(dir = %dir.display(), dropped_bytes = bytes.saturating_sub(left), max_bytes, "another driver's entries set aside dropped to bring the store within its bound");
    }
    if report.bytes <= max_bytes {
        return Ok(Bounded {
            report,
            kept: entries,
            waiting_dropped: Vec::new(),
        });
    }
    let listed = with_waiting_records(entries, &mut report);
    if report.bytes <= max_bytes {
        // Its waiting files read shorter than listed: within after all.
        return Ok(Bounded {
            report,
            kept: listed,
            waiting_dropped: Vec::new(),
        });
    }
    let mut order = Eviction::new(listed, &waiting::named_by_entries);
    let unnamed = order.unnamed_now();
    let (dropped, in_flight, waiting_dropped) =
        drop_in_order(&mut order, max_bytes, in_use, &mut report);
    if report.evicted > 0 {
        tracing::info!(
            evicted = report.evicted,
            evicted_bytes = report.evicted_bytes,
            kept_bytes = report.bytes,
            record_bytes,
            max_bytes,
            unnamed_pieces = unnamed,
            in_flight_bytes = in_flight,
            "store brought within its bound"
        );
    }
    Ok(Bounded {
        report,
        kept: order.kept(&dropped),
        waiting_dropped,
    })
}

/// Drops `bytes` of the entries and pieces under `host_dir` (a title's `host-pipelines/`), in the
/// title's own bound's order: the library's bound taking its share of a title. The record and
/// set-aside directories are not touched (the library pass takes them itself).
pub fn shrink_by(
    host_dir: &Path,
    bytes: u64,
    in_use: &dyn Fn(&Path) -> bool,
) -> Result<BoundReport, StoreError> {
    let entries = entries_of_title(host_dir)?;
    let mut report = BoundReport {
        entries: entries.len() as u64,
        bytes: entries.iter().map(|e| e.bytes).sum(),
        ..Default::default()
    };
    if bytes == 0 {
        return Ok(report);
    }
    // The bytes to give up, from the listing: a pass at once that shrank the title since (its
    // waiting files read shorter) counts towards them.
    let max_bytes = report.bytes.saturating_sub(bytes);
    let listed = with_waiting_records(entries, &mut report);
    if report.bytes <= max_bytes {
        return Ok(report);
    }
    let mut order = Eviction::new(listed, &waiting::named_by_entries);
    drop_in_order(&mut order, max_bytes, in_use, &mut report);
    Ok(report)
}

/// `listed` with its waiting files as their records ([`waiting::as_records`]), `report`
/// counting them as they read now.
fn with_waiting_records(listed: Vec<StampedEntry>, report: &mut BoundReport) -> Vec<StampedEntry> {
    let before: u64 = listed.iter().map(|e| e.bytes).sum();
    let (records, unread) = waiting::as_records(listed);
    let now: u64 = records.iter().map(|e| e.bytes).sum::<u64>() + unread;
    report.bytes = (report.bytes + now).saturating_sub(before);
    report.entries = records.len() as u64;
    records
}

/// Drops files in `order` until the rest is within `max_bytes`, then every piece no kept entry
/// names (what they hold is no entry's: past the excess, only those go). Returns which files
/// went, the bytes of pieces left in flight, and the records dropped from waiting files (each
/// file written again without them once the drops are chosen). A packed waiting file counts
/// each record at its share of the file's bytes, and written again without some it may take
/// more than the rest's shares (compression is not shared out evenly): the pass then goes on
/// down the order, a few rounds at most.
fn drop_in_order(
    order: &mut Eviction,
    max_bytes: u64,
    in_use: &dyn Fn(&Path) -> bool,
    report: &mut BoundReport,
) -> (Vec<bool>, u64, Vec<StampedEntry>) {
    let mut dropped = vec![false; order.len()];
    let mut waiting = WaitingDrops::default();
    // Pieces of entries this process is writing now are left to a later pass, and the store may
    // end above the bound by them: their entries, built last, carry this run's oldest stamps,
    // and dropping newer files in their place dropped the boot's entries (issue 38, item 7).
    let mut in_flight = 0;
    let mut take = |order: &mut Eviction,
                    i: usize,
                    in_flight: &mut u64,
                    report: &mut BoundReport,
                    waiting: &mut WaitingDrops| {
        match drop_one(order.file(i), in_use, report, waiting) {
            Dropped::Gone => {
                dropped[i] = true;
                order.gone(i);
            }
            Dropped::InFlight => *in_flight += order.file(i).bytes,
            Dropped::Kept => {}
        }
        report.bytes.saturating_sub(*in_flight) > max_bytes
    };
    let mut gone = Vec::new();
    for _round in 0..3 {
        while let Some(i) = order.next() {
            if !take(order, i, &mut in_flight, report, &mut waiting) {
                break;
            }
        }
        // A record whose file could not be written again is still there.
        let applied = std::mem::take(&mut waiting).apply();
        for r in &applied.still_there {
            report.kept_after_all(r.bytes);
        }
        gone.extend(applied.gone);
        report.bytes = report.bytes.saturating_add_signed(applied.past_shares);
        let over = report.bytes.saturating_sub(in_flight) > max_bytes;
        if applied.past_shares <= 0 || !over {
            break;
        }
    }
    while let Some(i) = order.next_unnamed() {
        take(order, i, &mut in_flight, report, &mut waiting);
    }
    // Past the bound still, less what is in flight (a file that could not be removed or written
    // again now, the order run out, three rounds of waiting files taking more than their
    // records' shares): the next pass goes on.
    if report.bytes.saturating_sub(in_flight) > max_bytes {
        tracing::info!(
            kept_bytes = report.bytes,
            in_flight_bytes = in_flight,
            max_bytes,
            "the title stays past its bound until its next pass"
        );
    }
    (dropped, in_flight, gone)
}

/// What became of a file the order gave.
enum Dropped {
    /// Removed now, or by another pass first.
    Gone,
    /// A piece named by an entry this process is writing now: left to a later pass.
    InFlight,
    /// Stamped again since the listing, or it cannot be removed.
    Kept,
}

/// Drops one file the order gave, and counts it in `report`. A piece named by an entry this
/// process is writing (`in_use`), or stamped again since the listing, stays, and so does a file
/// that cannot be removed. A record of a waiting file goes with its file's writing again.
fn drop_one(
    e: &StampedEntry,
    in_use: &dyn Fn(&Path) -> bool,
    report: &mut BoundReport,
    waiting: &mut WaitingDrops,
) -> Dropped {
    if e.waiting_record.is_some() {
        waiting.drop_record(e);
        report.evicted(e.bytes);
        return Dropped::Gone;
    }
    if is_piece(&e.path) && in_use(&e.path) {
        return Dropped::InFlight;
    }
    if is_piece(&e.path) && stamped_since(e) {
        return Dropped::Kept;
    }
    match super::files::remove_if_present(&e.path) {
        Ok(true) => {
            report.evicted(e.bytes);
            tracing::debug!(
                stamp = ?e.stamp,
                "dropped entry={} reason=evicted",
                e.path.file_name().unwrap_or_default().to_string_lossy()
            );
            Dropped::Gone
        }
        // Gone since the listing: another pass at once (another process, or the command beside
        // a running application) removed it by the same order. It counts as removed, so that
        // the two remove together no more than the excess, not each all of it.
        Ok(false) => {
            report.entries -= 1;
            report.bytes -= e.bytes;
            Dropped::Gone
        }
        Err(_) => Dropped::Kept,
    }
}

/// A piece stamped again since it was listed is named by an entry a run (of any process) is
/// writing or has found now, perhaps one the listing does not hold: it stays. (An entry stamped
/// again goes as listed: its run has read it already; the next run misses it.)
fn stamped_since(e: &StampedEntry) -> bool {
    fs::symlink_metadata(&e.path)
        .and_then(|m| m.modified())
        .is_ok_and(|now| now != e.stamp)
}

impl Store {
    /// The title's record, compacted as far as it goes, still holds `bytes` past its share (its
    /// configurations alone, in a bound of a few KiB): the bound passes of this process count it
    /// whole, so that the title stays within its bound.
    pub fn record_past_its_share(&self, bytes: u64) {
        self.record_floor.store(bytes, Ordering::Release);
    }

    /// Brings the title within the bound, unless another thread is doing it now.
    pub fn keep_within_bound(&self) -> Option<Bounded> {
        self.one_pass_at_a_time(|| self.keep_within_bound_now())
            .flatten()
    }

    /// Runs `pass` unless another bound pass of this store runs now (`None` then): the pieces'
    /// note of what is written meanwhile ([`super::pieces::Pieces::bound_begins`]) is one a store.
    pub(super) fn one_pass_at_a_time<R>(&self, pass: impl FnOnce() -> R) -> Option<R> {
        if self.bounding.swap(true, Ordering::Acquire) {
            return None;
        }
        /// Lets the next check of the bound run, even after a panic in this one.
        struct Release<'a>(&'a AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _release = Release(&self.bounding);
        Some(pass())
    }

    fn keep_within_bound_now(&self) -> Option<Bounded> {
        let started = std::time::Instant::now();
        // What is written from now on is counted by this pass or added at the end (a write
        // under way now may count twice: a note errs high).
        self.written_since_noted.store(0, Ordering::Relaxed);
        let report = self.bound_pieces_aware(&self.title_dir.join("host-pipelines"));
        if let Ok(Bounded {
            report: r,
            kept,
            waiting_dropped,
        }) = &report
        {
            self.forget_dropped_waiting(waiting_dropped);
            note_title_bytes(&self.title_dir, r.bytes.saturating_sub(r.record_bytes));
            let live = kept
                .iter()
                .filter(|e| self.holds(e))
                .filter_map(|e| e.key());
            *self.use_order.live.locked() = Some(live.collect());
            tracing::debug!(entries = r.entries, bytes = r.bytes, evicted = r.evicted, took_ms = %format_args!("{:.3}", started.elapsed().as_secs_f64() * 1e3), "bound checked");
        }
        report.map_err(|e| tracing::warn!("{e}")).ok()
    }

    /// Brings the title whose `host-pipelines/` is `host_dir` within the bound, keeping every
    /// piece an entry this process writes meanwhile names.
    pub(super) fn bound_pieces_aware(&self, host_dir: &Path) -> Result<Bounded, StoreError> {
        let floor = self.record_floor.load(Ordering::Acquire);
        self.pieces_aware(|in_use| keep_within_past_share(host_dir, self.max_bytes, floor, in_use))
    }

    /// A pass that may drop this title's entries and pieces (the title's bound, the library's):
    /// the stamps this run owes given first (else it would take this run's first used entries
    /// for the last run's), and every piece an entry this process writes meanwhile names kept.
    pub(super) fn pieces_aware<R>(&self, pass: impl FnOnce(&dyn Fn(&Path) -> bool) -> R) -> R {
        self.give_owed_stamps();
        self.pieces.bound_begins();
        let in_use = |p: &Path| self.pieces.written_while_bounding(p);
        let done = pass(&in_use);
        self.pieces.bound_ends();
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 200 entry files of sizes from 1,000 bytes, each stamped a second after the one before,
    /// in one identity directory under `host_dir`; returns their sizes.
    fn two_hundred_entries(host_dir: &Path) -> Vec<u64> {
        let dir = host_dir.join("1002-73bf-06400007-a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
        fs::create_dir_all(&dir).unwrap();
        (0..200u64)
            .map(|n| {
                let name = format!("{:032x}-{:032x}.entry", n + 1, n + 1);
                let len = 1_000 + (n * 37) % 900;
                let path = dir.join(name);
                fs::write(&path, vec![0u8; len as usize]).unwrap();
                let stamp =
                    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000 + n);
                fs::File::options()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_modified(stamp)
                    .unwrap();
                len
            })
            .collect()
    }

    #[test]
    fn two_passes_at_once_remove_together_no_more_than_the_excess() {
        for round in 0..20 {
            let root = tempfile::tempdir().unwrap();
            let host = root.path().join("title/host-pipelines");
            let sizes = two_hundred_entries(&host);
            let bound = sizes.iter().sum::<u64>() / 2;
            let largest = *sizes.iter().max().unwrap();
            let start = std::sync::Barrier::new(2);
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        start.wait();
                        keep_within(&host, bound, &|_| false).unwrap();
                    });
                }
            });
            let kept: u64 = entries_of_title(&host)
                .unwrap()
                .iter()
                .map(|e| e.bytes)
                .sum();
            assert!(
                kept <= bound,
                "round {round}: {kept} kept over the bound {bound}"
            );
            assert!(
                kept + largest >= bound,
                "round {round}: {kept} kept under a bound of {bound}: removed more than the excess"
            );
        }
    }
}
