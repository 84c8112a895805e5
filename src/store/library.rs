//! The library's bound (`PIPEKEEP_LIBRARY_MAX_BYTES`): every title's entries, pieces and record
//! together, each title keeping its own bound within it. Past it, in this order until the
//! library fits:
//! 1. directories of another driver set aside at an opening (`*.dropped`), and identity
//!    directories no device of the machine has any more: those whose driver was last used,
//!    anywhere in the library, before another driver of the same vendor and device (another
//!    driver version or cache UUID, the same ABI) was ([`superseded`]);
//! 2. the titles, least recently used first, each whole before the next is touched: its entries
//!    and pieces in its own bound's order ([`super::eviction`]), then, last, its record
//!    (`record.foz`: what rebuilds the title after a driver update; never the record of the
//!    title opening now, which its process appends to).
//!
//! A title's last use is the newest of its entries' and pieces' stamps and of its run history
//! (`runs.jsonl`), whose time the layer moves forward at each opening ([`mark_used`]): a title a
//! process opens now is never the least recently used to another process's pass. Without Vulkan
//! no tool can tell a GPU taken out of the machine: its directories age out with their titles.
//!
//! One pass at a time over a library (`<root>/.library.lock`, `flock`): the layer skips its pass
//! where another holds the lock (that pass brings the library within the bound), the command
//! waits for it. Files are removed by the store's own rules: what a live process holds locked
//! stays, a file found gone counts as removed.

use std::collections::HashSet;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::bound::{self, BoundReport};
use super::files::{lock_path, names_in, remove_if_present, Locked, SET_ASIDE_SUFFIX};
use super::identity::{DirName, Identity};
use super::{StoreError, RECORD_FILE};

/// The lock one library pass at a time holds, at the library's root.
pub const LOCK_FILE: &str = ".library.lock";
/// The title's run history: its time is the title's last opening.
pub const RUNS_FILE: &str = "runs.jsonl";

/// One identity directory as the library pass sees it.
#[derive(Debug, Clone)]
pub struct DirUsage {
    pub path: PathBuf,
    pub name: DirName,
    /// The ABI its entries' envelopes name (`None` where none was read).
    pub abi: Option<u32>,
    /// Its newest stamp (`None` for a directory holding nothing).
    pub newest: Option<SystemTime>,
    pub bytes: u64,
}

/// One title as the library pass sees it.
#[derive(Debug, Clone)]
pub struct TitleUsage {
    pub title: String,
    pub last_use: SystemTime,
    pub dirs: Vec<DirUsage>,
    /// Directories of another driver set aside at an opening, with their bytes.
    pub set_aside: Vec<(PathBuf, u64)>,
    pub record_bytes: u64,
}

impl TitleUsage {
    /// Its bytes under the library's bound: entries, pieces, set-aside directories, the record.
    pub fn bytes(&self) -> u64 {
        self.dirs.iter().map(|d| d.bytes).sum::<u64>()
            + self.set_aside.iter().map(|d| d.1).sum::<u64>()
            + self.record_bytes
    }
}

/// One step of a library pass, in the order the pass takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A directory no device has any more, or one set aside: dropped whole.
    DropDir {
        title: String,
        path: PathBuf,
        bytes: u64,
    },
    /// The title gives up this many bytes of entries and pieces, in its own bound's order.
    Shrink { title: String, bytes: u64 },
    /// The title's record goes.
    DropRecord { title: String, bytes: u64 },
}

impl Step {
    /// The bytes it frees (at most: what a live process holds stays).
    pub fn bytes(&self) -> u64 {
        match self {
            Step::DropDir { bytes, .. } | Step::Shrink { bytes, .. } => *bytes,
            Step::DropRecord { bytes, .. } => *bytes,
        }
    }
}

/// A use later than any stamp: the identity of the device opening the store now.
fn now_and_after() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(u32::MAX) * 16)
}

/// The identity directories no device of the machine has any more: their driver (vendor,
/// device, driver version and cache UUID, with an ABI that does not tell it apart: RADV mixes the
/// pointer size into its UUID) was last used, anywhere in the library, before another driver of
/// the same vendor and device was. `current` is the device opening the store now, used after
/// every stamp. A directory holding nothing, or of a driver in use now, is never one.
pub fn superseded(titles: &[TitleUsage], current: Option<&Identity>) -> HashSet<PathBuf> {
    let mut used: Vec<(DirName, Option<u32>, SystemTime)> = titles
        .iter()
        .flat_map(|t| &t.dirs)
        .filter_map(|d| Some((d.name, d.abi, d.newest?)))
        .collect();
    if let Some(id) = current {
        let name = DirName::parse(&id.dir_name()).expect("an identity names a directory");
        used.push((name, Some(id.abi), now_and_after()));
    }
    let same_device = |n: &DirName, abi: &Option<u32>, d: &DirUsage| {
        n.vendor_id == d.name.vendor_id
            && n.device_id == d.name.device_id
            && (abi.is_none() || d.abi.is_none() || *abi == d.abi)
    };
    let same_driver = |n: &DirName, d: &DirUsage| {
        (n.driver_version, n.cache_uuid) == (d.name.driver_version, d.name.cache_uuid)
    };
    // Its driver's last use anywhere in the library, this directory's own included.
    let last_use_of_driver = |d: &DirUsage| {
        used.iter()
            .filter(|(n, abi, _)| same_device(n, abi, d) && same_driver(n, d))
            .map(|(_, _, when)| *when)
            .max()
    };
    let superseded = |d: &DirUsage| {
        let Some(mine) = d.newest.and(last_use_of_driver(d)) else {
            return false;
        };
        used.iter()
            .any(|(n, abi, when)| same_device(n, abi, d) && !same_driver(n, d) && *when > mine)
    };
    titles
        .iter()
        .flat_map(|t| &t.dirs)
        .filter(|d| superseded(d))
        .map(|d| d.path.clone())
        .collect()
}

/// The steps that bring `titles` within `max_bytes`: set-aside and superseded directories, then
/// title by title, least recently used first (ties by name), its entries and pieces, then its
/// record (never `keep_record`'s, the title a process is appending to now).
pub fn plan(
    titles: &[TitleUsage],
    max_bytes: u64,
    current: Option<&Identity>,
    keep_record: Option<&str>,
) -> Vec<Step> {
    let total: u64 = titles.iter().map(TitleUsage::bytes).sum();
    let mut excess = total.saturating_sub(max_bytes);
    if excess == 0 {
        return Vec::new();
    }
    let mut order: Vec<&TitleUsage> = titles.iter().collect();
    order.sort_by(|a, b| (a.last_use, &a.title).cmp(&(b.last_use, &b.title)));
    let gone = superseded(titles, current);
    let mut steps = Vec::new();
    let mut take = |step: Step, excess: &mut u64| {
        *excess = excess.saturating_sub(step.bytes());
        steps.push(step);
    };
    for t in &order {
        let dirs = t.set_aside.iter().cloned().chain(
            t.dirs
                .iter()
                .filter(|d| gone.contains(&d.path))
                .map(|d| (d.path.clone(), d.bytes)),
        );
        for (path, bytes) in dirs {
            if excess > 0 {
                let title = t.title.clone();
                take(Step::DropDir { title, path, bytes }, &mut excess);
            }
        }
    }
    for t in &order {
        let own: u64 = t
            .dirs
            .iter()
            .filter(|d| !gone.contains(&d.path))
            .map(|d| d.bytes)
            .sum();
        if excess > 0 && own > 0 {
            let bytes = own.min(excess);
            take(
                Step::Shrink {
                    title: t.title.clone(),
                    bytes,
                },
                &mut excess,
            );
        }
        if excess > 0 && t.record_bytes > 0 && Some(t.title.as_str()) != keep_record {
            let bytes = t.record_bytes;
            take(
                Step::DropRecord {
                    title: t.title.clone(),
                    bytes,
                },
                &mut excess,
            );
        }
    }
    steps
}

/// Every title of the library at `root`, measured. `current`: the title opening now, used now.
/// A library not made yet (nothing kept) holds no title.
pub fn usage(root: &Path, current: Option<&str>) -> Result<Vec<TitleUsage>, StoreError> {
    let titles = match super::inspect::titles(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        listed => listed.map_err(StoreError::io("list", root))?,
    };
    Ok(titles
        .into_iter()
        .map(|t| title_usage(root, t, current))
        .collect())
}

fn title_usage(root: &Path, title: String, current: Option<&str>) -> TitleUsage {
    let title_dir = root.join(&title);
    let host = super::host_pipelines_dir(root, &title);
    let mut dirs = Vec::new();
    let mut set_aside = Vec::new();
    for name in names_in(&host).unwrap_or_default() {
        let path = host.join(&name);
        if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let files = bound::files_in(&path);
        let bytes = files.iter().map(|f| f.bytes).sum();
        if name.ends_with(SET_ASIDE_SUFFIX) {
            set_aside.push((path, bytes));
        } else if let Some(dir_name) = DirName::parse(&name) {
            let newest = files.iter().map(|f| f.stamp).max();
            let abi = super::open::abi_of_dir(&path);
            dirs.push(DirUsage {
                path,
                name: dir_name,
                abi,
                newest,
                bytes,
            });
        }
    }
    let mtime = |p: &Path| fs::symlink_metadata(p).and_then(|m| m.modified()).ok();
    let stamps = dirs.iter().filter_map(|d| d.newest);
    let last_use = if current == Some(title.as_str()) {
        now_and_after()
    } else {
        stamps
            .chain(mtime(&title_dir.join(RUNS_FILE)))
            .max()
            .or_else(|| mtime(&title_dir.join(RECORD_FILE)))
            .unwrap_or(SystemTime::UNIX_EPOCH)
    };
    TitleUsage {
        record_bytes: bound::record_bytes(&host),
        title,
        last_use,
        dirs,
        set_aside,
    }
}

/// The library's bytes as its titles noted them, a title without a note measured; `None` where
/// the library cannot be listed.
pub fn noted_bytes(root: &Path) -> Option<u64> {
    let titles = super::inspect::titles(root).ok()?;
    Some(
        titles
            .into_iter()
            .map(|t| match bound::noted_title_bytes(&root.join(&t)) {
                Some(bytes) => bytes + bound::record_bytes(&super::host_pipelines_dir(root, &t)),
                None => title_usage(root, t, None).bytes(),
            })
            .sum(),
    )
}

/// Moves the title's last use forward to `when` (the run's opening), where it has a run history:
/// another process's library pass then takes it for a title in use. Nothing is created.
pub fn mark_used(title_dir: &Path, when: SystemTime) {
    let runs = title_dir.join(RUNS_FILE);
    if let Err(e) = super::files::stamp_forward(None, &runs, when) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::debug!(path = %runs.display(), error = %e, "the title's last use was not marked");
        }
    }
}

/// What a library pass found and did.
#[derive(Debug, Default, Clone)]
pub struct LibraryReport {
    pub titles: usize,
    /// The library's bytes before the pass, and after.
    pub bytes_before: u64,
    pub bytes: u64,
    pub max_bytes: u64,
    pub steps: Vec<Step>,
}

/// How a pass meets another one at the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Skip the pass (the layer: the other pass brings the library within the bound).
    No,
    /// Wait for the other pass, then measure again (the command).
    Yes,
}

/// Brings the library at `root` within `max_bytes`. `current`: the title and identity a process
/// is opening now (its title used now, its record kept, other drivers of its device superseded).
/// `in_use` as for the title's bound: a piece an entry is being written with stays.
pub fn keep_within(
    root: &Path,
    max_bytes: u64,
    current: Option<(&str, &Identity)>,
    wait: Wait,
    in_use: &dyn Fn(&Path) -> bool,
) -> Result<LibraryReport, StoreError> {
    let title = current.map(|c| c.0);
    let measured = usage(root, title)?;
    let mut report = LibraryReport {
        titles: measured.len(),
        bytes_before: measured.iter().map(TitleUsage::bytes).sum(),
        max_bytes,
        ..Default::default()
    };
    report.bytes = report.bytes_before;
    if report.bytes <= max_bytes {
        return Ok(report);
    }
    let Some(_lock) = lock(root, wait)? else {
        tracing::debug!(root = %root.display(), "another library pass runs now; this one is skipped");
        return Ok(report);
    };
    // Measured again under the lock: a pass that held it may have brought the library within.
    let measured = usage(root, title)?;
    report.bytes_before = measured.iter().map(TitleUsage::bytes).sum();
    report.steps = plan(&measured, max_bytes, current.map(|c| c.1), title);
    let freed: u64 = report.steps.iter().map(|s| take(root, s, in_use)).sum();
    report.bytes = report.bytes_before.saturating_sub(freed);
    if !report.steps.is_empty() {
        tracing::info!(
            root = %root.display(),
            bytes_before = report.bytes_before,
            kept_bytes = report.bytes,
            max_bytes,
            steps = report.steps.len(),
            "library brought within its bound, the least recently used titles first"
        );
    }
    Ok(report)
}

/// The library's lock, held (`None` where another pass holds it and `wait` says skip).
fn lock(root: &Path, wait: Wait) -> Result<Option<File>, StoreError> {
    let path = root.join(LOCK_FILE);
    if wait == Wait::No {
        return match lock_path(&path, true).map_err(StoreError::io("lock", &path))? {
            Locked::Held(file) => Ok(Some(file)),
            Locked::Busy | Locked::Gone | Locked::NotAFile => Ok(None),
        };
    }
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(StoreError::io("open", &path))?;
    file.lock().map_err(StoreError::io("lock", &path))?;
    Ok(Some(file))
}

/// Takes one step; returns the bytes it freed.
fn take(root: &Path, step: &Step, in_use: &dyn Fn(&Path) -> bool) -> u64 {
    match step {
        Step::DropDir { path, bytes, .. } => {
            let stop = std::sync::atomic::AtomicBool::new(false);
            super::dropping::drop_directory(path, "foreign", &stop);
            bytes.saturating_sub(bound::files_bytes(path))
        }
        Step::Shrink { title, bytes } => {
            let host = super::host_pipelines_dir(root, title);
            match bound::shrink_by(&host, *bytes, in_use) {
                Ok(BoundReport { evicted_bytes, .. }) => evicted_bytes,
                Err(e) => {
                    tracing::warn!(title = %title, error = %e, "a title was not shrunk to the library's bound");
                    0
                }
            }
        }
        Step::DropRecord { title, bytes } => {
            drop_record(&root.join(title).join(RECORD_FILE), *bytes)
        }
    }
}

/// Removes a title's record unless a live process holds its lock (appending to it now).
fn drop_record(path: &Path, bytes: u64) -> u64 {
    match lock_path(path, false) {
        Ok(Locked::Held(_held)) => match remove_if_present(path) {
            Ok(true) => {
                tracing::info!(record = %path.display(), bytes, "a title's record dropped to bring the library within its bound");
                bytes
            }
            _ => 0,
        },
        _ => 0,
    }
}

impl super::Store {
    /// Marks the title used now (its opening), first thing: another process's library pass
    /// then spares it while it loads.
    pub fn mark_title_used(&self) {
        mark_used(&self.title_dir, self.opened_at);
    }

    /// At the run's end: the title's noted bytes ([`bound::BYTES_FILE`], as its bound last
    /// counted them) with what this run wrote since added, so that the next pass's sum sees them
    /// (an entry written again counts twice: a note errs high, and a high one only costs a walk).
    pub fn note_bytes_at_end(&self) {
        let written = self
            .written_since_noted
            .swap(0, std::sync::atomic::Ordering::Relaxed);
        if written == 0 {
            return;
        }
        let noted = bound::noted_title_bytes(&self.title_dir).unwrap_or(0);
        bound::note_title_bytes(&self.title_dir, noted + written);
    }

    /// Brings the library within `max_bytes` (`PIPEKEEP_LIBRARY_MAX_BYTES`), this title counted
    /// as used now (its opening marked it, [`super::Store::mark_title_used`]). For the layer's
    /// opening thread, never an application's; skipped where another pass runs.
    pub fn keep_library_within(&self, max_bytes: u64) -> Option<LibraryReport> {
        let root = self.title_dir.parent()?;
        // Every title's file listed only where their noted bytes say the library is over.
        if noted_bytes(root).is_none_or(|bytes| bytes <= max_bytes) {
            return None;
        }
        let title = self.title_dir.file_name()?.to_str()?;
        let pass = || {
            self.pieces_aware(|in_use| {
                let current = Some((title, &self.identity));
                keep_within(root, max_bytes, current, Wait::No, in_use)
            })
        };
        let report = self.one_pass_at_a_time(pass)?;
        report.map_err(|e| tracing::warn!("{e}")).ok()
    }
}

#[cfg(test)]
mod tests;
