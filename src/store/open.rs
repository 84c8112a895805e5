//! Opening a store, once per device identity per process: drop what an earlier run left that
//! must not be loaded, then bring the title within its bound.
//!
//! Dropped at opening: every entry a stale loading marker names, from its file and the files of
//! entries left waiting (`stopped.rs`); every other driver's directory of the same vendor and
//! device (another device's directory is a second GPU and stays); every `*.tmp` whose lock can be taken (a stopped write), the title's own
//! `record.foz.tmp` and `runs.jsonl.tmp` too; D744's `host-pipelines.bin`, unread.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::bound::BoundReport;
use super::dropping::{
    drop_directory, drop_partial_writes, drop_partial_writes_among, is_write_or_load,
};
use super::files::{
    is_entry_name, lock_path, names_in, remove_if_present, Locked, SET_ASIDE_SUFFIX,
};
use super::identity::DirName;
use super::pieces;
use super::stopped::StoppedLoads;
use super::{log_drop, Store, StoreError};
use crate::sync::Unpoisoned;

/// What an opening found and did.
#[derive(Debug, Default, Clone, Copy)]
pub struct OpenReport {
    pub stale_marker_drops: u64,
    pub other_driver_drops: u64,
    /// Other drivers' directories of this device found, left to be dropped after the opening.
    pub other_drivers_found: u64,
    pub partial_writes_dropped: u64,
    pub dropped_monolithic_cache: bool,
    pub bound: BoundReport,
    pub took_ms: f64,
}

/// With `bound_now` false the caller brings the title within its bound itself, right after.
pub(super) fn sweep(store: &Store, bound_now: bool) -> Result<OpenReport, StoreError> {
    let started = Instant::now();
    let mut report = OpenReport::default();
    // Nothing is created here: a device that keeps no pipeline leaves nothing on disk (the
    // identity directory is made at the first write).

    let monolithic = store.title_dir.join("host-pipelines.bin");
    if remove_if_present(&monolithic).unwrap_or(false) {
        report.dropped_monolithic_cache = true;
        log_drop(&monolithic, "foreign");
    }
    let host_dir = store.dir.parent().expect("identity dir has a parent");
    let mut other_drivers = Vec::new();
    let mut set_aside_before = Vec::new();
    for name in names_in(host_dir).unwrap_or_default() {
        let other_driver = DirName::parse(&name).is_some_and(|d| {
            d.is_other_driver_of(&store.identity, None)
                && d.is_other_driver_of(&store.identity, abi_of_dir(&host_dir.join(&name)))
        });
        if other_driver {
            other_drivers.push(host_dir.join(&name));
        } else if name.ends_with(SET_ASIDE_SUFFIX) {
            set_aside_before.push(host_dir.join(&name));
        }
    }
    report.other_drivers_found = other_drivers.len() as u64;
    if bound_now {
        for dir in other_drivers.iter().chain(&set_aside_before) {
            report.other_driver_drops += drop_directory(dir, "foreign", &AtomicBool::new(false));
        }
    } else {
        // Dropping thousands of files before the store is published kept the application's
        // first lookups waiting (600 entries: 73 ms on RADV): each directory is set aside by
        // one rename, and the opening thread drops what it holds right after, at idle priority
        // (`Store::drop_other_drivers`); what a run leaves is the next opening's, and is no
        // driver change again.
        let mut to_drop: Vec<PathBuf> = other_drivers
            .iter()
            .map(|dir| set_aside(dir).unwrap_or_else(|| dir.clone()))
            .collect();
        to_drop.extend(set_aside_before);
        *store.other_drivers.locked() = to_drop;
    }
    let own = names_in(&store.dir).map_err(StoreError::io("list", &store.dir))?;
    store.known.listed(&own);
    // Read only where a stale marker names an entry: most openings find none.
    let mut stopped = StoppedLoads::default();
    for name in own.iter().filter(|n| n.ends_with(".loading")) {
        stopped.note(&store.dir, name);
    }
    let settled = stopped.settle(&store.dir);
    report.stale_marker_drops += settled.dropped;
    let _ = store.stopped_loads.set(settled.going);
    // The identity directory's listing above serves here too: the first pipelines wait for
    // this opening, and a listing of thousands of entries is most of it.
    report.partial_writes_dropped += drop_partial_writes_among(&store.dir, &own);
    report.partial_writes_dropped += drop_partial_writes(&store.dir.join(pieces::DIR));
    report.partial_writes_dropped += drop_title_partial_writes(&store.title_dir);
    if bound_now {
        report.bound = store.bound_pieces_aware(host_dir)?.report;
    }
    report.took_ms = started.elapsed().as_secs_f64() * 1e3;
    if !bound_now {
        tracing::info!(
            dir = %store.dir.display(),
            stale_marker_drops = report.stale_marker_drops,
            other_drivers_found = report.other_drivers_found,
            partial_writes_dropped = report.partial_writes_dropped,
            took_ms = %format_args!("{:.3}", report.took_ms),
            "store opened (other drivers' entries are dropped and its bound checked next, on the opening thread)"
        );
        return Ok(report);
    }
    tracing::info!(
        dir = %store.dir.display(),
        entries = report.bound.entries,
        bytes = report.bound.bytes,
        stale_marker_drops = report.stale_marker_drops,
        other_driver_drops = report.other_driver_drops,
        partial_writes_dropped = report.partial_writes_dropped,
        took_ms = %format_args!("{:.3}", report.took_ms),
        "store opened"
    );
    Ok(report)
}

/// The ABI the entries of an identity directory name in their envelopes: the first of a few
/// entries that reads far enough says (`None` where none does). Read only for a directory that
/// looks like another driver's, to tell the other ABI's (another identity) from it.
pub(super) fn abi_of_dir(dir: &Path) -> Option<u32> {
    names_in(dir)
        .unwrap_or_default()
        .iter()
        .filter(|n| is_entry_name(n))
        .take(8)
        .find_map(|n| {
            let start = super::files::read_at_most(&dir.join(n), 16).ok()?;
            (start.starts_with(&super::envelope::MAGIC))
                .then(|| super::envelope::abi_of(&start))
                .flatten()
        })
}

/// Drops every directory of the title's an opening set aside and a device's end left undropped
/// (`host-pipelines/*.dropped`): for `pipekeep rebuild`, which replays a title's record through a
/// device that never pauses, so that the application's launch after the command has nothing of
/// the old driver's left to list and drop. Returns how many entries were dropped.
pub fn drop_set_aside(root: &Path, title: &str) -> u64 {
    let host_dir = super::host_pipelines_dir(root, title);
    names_in(&host_dir)
        .unwrap_or_default()
        .iter()
        .filter(|n| n.ends_with(SET_ASIDE_SUFFIX))
        .map(|n| drop_directory(&host_dir.join(n), "foreign", &AtomicBool::new(false)))
        .sum()
}

/// Renames another driver's directory out of the way (`<name>.dropped`, or
/// `<name>.<pid>.dropped` where that exists), unless a live process holds a file in it (a
/// temporary file or a loading marker whose lock is taken): its files then stay where that
/// process finds them, and are dropped in place, as the SPEC keeps them.
fn set_aside(dir: &Path) -> Option<PathBuf> {
    let held = names_in(dir)
        .unwrap_or_default()
        .iter()
        .any(|n| is_write_or_load(n) && matches!(lock_path(&dir.join(n), false), Ok(Locked::Busy)));
    if held {
        return None;
    }
    let with = |suffix: String| super::files::with_suffix(dir, &suffix);
    [
        with(SET_ASIDE_SUFFIX.to_owned()),
        with(format!(".{}{SET_ASIDE_SUFFIX}", std::process::id())),
    ]
    .into_iter()
    .find(|aside| fs::rename(dir, aside).is_ok())
}

/// The temporary files of the title's own files (`record.foz.tmp` of a compaction,
/// `runs.jsonl.tmp` of a history's rewrite) whose lock can be taken: left by a process stopped
/// midway, and never renamed over their file. Other `*.tmp` names there are not ours to drop.
const TITLE_TEMPORARY_FILES: [&str; 2] = ["record.foz.tmp", "runs.jsonl.tmp"];

/// Drops the title's stopped temporary files ([`TITLE_TEMPORARY_FILES`]). Returns how many.
fn drop_title_partial_writes(title_dir: &Path) -> u64 {
    let present: Vec<String> = TITLE_TEMPORARY_FILES
        .iter()
        .filter(|n| fs::symlink_metadata(title_dir.join(n)).is_ok())
        .map(|n| (*n).to_owned())
        .collect();
    drop_partial_writes_among(title_dir, &present)
}
