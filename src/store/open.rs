//! Opening a store, once per device identity per process: drop what an earlier run left that
//! must not be loaded, then bring the title within its bound.
//!
//! Dropped at opening: every entry a stale loading marker names (and the marker; the pieces it
//! names are blamed, `blamed.rs`, and go at a second blame), from its file and from any file of
//! entries left waiting; every other
//! driver's directory of the same vendor and device (another device's directory is a second GPU
//! and stays); every `*.tmp` whose lock can be taken (a stopped write), the title's own
//! `record.foz.tmp` and `runs.jsonl.tmp` too; D744's `host-pipelines.bin`, unread.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::blamed::BlamedPieces;
use super::bound::BoundReport;
use super::dropping::{
    drop_directory, drop_partial_writes, drop_partial_writes_among, is_write_or_load,
};
use super::files::{
    is_entry_name, lock_path, names_in, remove_if_present, Locked, SET_ASIDE_SUFFIX,
};
use super::identity::DirName;
use super::marker::{inspect, MarkerState};
use super::pieces;
use super::recipe::PieceName;
use super::waiting;
use super::{log_drop, Store, StoreError};
use crate::key::PipelineKey;
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
    let mut blamed = None;
    let mut stopped = HashMap::new();
    for name in &own {
        if let Some(entry) = name.strip_suffix(".loading") {
            report.stale_marker_drops +=
                sweep_marker(&store.dir, name, entry, &mut blamed, &mut stopped);
        }
    }
    if !stopped.is_empty() {
        let blamed = blamed.get_or_insert_with(|| BlamedPieces::read(&store.dir));
        without_stopped_loads_waiting(&store.dir, &stopped, blamed);
    }
    let _ = store.stopped_loads.set(stopped.into_keys().collect());
    if let Some(blamed) = blamed {
        blamed.save();
    }
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

/// Takes the entries stale markers named (`stopped`: whether each one's pieces were blamed from
/// its entry file) out of the files of entries left waiting, blaming the pieces of those whose
/// entry file was not there from their copy waiting.
fn without_stopped_loads_waiting(
    dir: &Path,
    stopped: &HashMap<PipelineKey, bool>,
    blamed: &mut BlamedPieces,
) {
    let mut unblamed: HashSet<PipelineKey> = stopped
        .iter()
        .filter(|(_, b)| !**b)
        .map(|(k, _)| *k)
        .collect();
    let keys = stopped.keys().copied().collect();
    waiting::without_stopped_loads(dir, &keys, &mut |key, named, own| {
        if unblamed.remove(key) {
            blame_pieces_named(dir, named, own, blamed)
        } else {
            HashSet::new()
        }
    });
}

/// A marker `<entry>.loading` (the seed's form) or `<pid>-<tid>.loading` (one per thread).
/// Returns how many entries it cost: the one it names, alone (its pieces are blamed, below),
/// whose key goes in `stopped` (a copy left waiting in a file goes too), with whether its pieces
/// were blamed from its entry file (else from that copy).
fn sweep_marker(
    dir: &Path,
    marker_name: &str,
    stem: &str,
    blamed: &mut Option<BlamedPieces>,
    stopped: &mut HashMap<PipelineKey, bool>,
) -> u64 {
    let marker = dir.join(marker_name);
    let named = if is_entry_name(stem) {
        Some(stem.to_owned())
    } else {
        match inspect(&marker) {
            Ok((MarkerState::Live, _)) | Err(_) => return 0,
            // The lock is held while the marker is removed, so no thread can adopt it meanwhile.
            Ok((MarkerState::Stale(named), _lock)) => {
                let _ = remove_if_present(&marker);
                named
            }
        }
    };
    let _ = remove_if_present(&marker);
    match named.filter(|n| is_entry_name(n)) {
        Some(entry) => {
            let path = dir.join(&entry);
            let blamed = blamed.get_or_insert_with(|| BlamedPieces::read(dir));
            if let Some(key) = PipelineKey::from_file_name(&entry) {
                let from_file = blame_pieces_of(dir, &path, blamed);
                *stopped.entry(key).or_insert(false) |= from_file;
            }
            let existed = remove_if_present(&path).unwrap_or(false);
            log_drop(&path, "stale-marker");
            u64::from(existed)
        }
        None => 0,
    }
}

/// Blames the pieces an entry names (and the pieces of the lists it names): the driver stopped
/// while loading it, maybe on one of them, but other entries share them and the entry alone
/// goes. Each is checked against its name now (a damaged one goes at once); one blamed before
/// (by an earlier stopped load) goes, and every entry naming it is a miss (`missing-piece`)
/// instead of stopping the driver again.
/// `false` where there is no entry file to read (its copy waiting in a file is read instead).
fn blame_pieces_of(dir: &Path, entry: &Path, blamed: &mut BlamedPieces) -> bool {
    let Ok((Ok(bytes), _)) =
        super::files::read_entry_file(super::files::open_entry_file(None, entry, false))
    else {
        return false;
    };
    let named = super::envelope::listed_parts(&bytes).map_or(Vec::new(), |(_, p)| p);
    blame_pieces_named(dir, named, &HashMap::new(), blamed);
    true
}

/// Blames `named` (the pieces and lists an entry names), as [`blame_pieces_of`] does; `own`: the
/// pieces the waiting file that holds the entry carries, by name, and whether each holds what
/// its name says. Returns the pieces that go (damaged or blamed twice): a waiting file's
/// entries naming one go with it.
fn blame_pieces_named(
    dir: &Path,
    mut named: Vec<PieceName>,
    own: &HashMap<PieceName, bool>,
    blamed: &mut BlamedPieces,
) -> HashSet<PieceName> {
    let pieces = pieces::Pieces::for_looking(dir);
    let listed: Vec<_> = named.iter().flat_map(|n| pieces.listed_by(n)).collect();
    named.extend(listed);
    named.sort_unstable();
    named.dedup();
    let mut gone = HashSet::new();
    for name in named {
        let path = pieces.path(&name);
        let sound = own
            .get(&name)
            .copied()
            .unwrap_or_else(|| piece_matches_its_name(&path, &name));
        let why = if !sound {
            "dropped a damaged piece the stopped load named"
        } else if blamed.blame(&name) {
            "dropped a piece a second stopped load named"
        } else {
            continue;
        };
        gone.insert(name);
        if remove_if_present(&path).unwrap_or(false) || own.contains_key(&name) {
            tracing::warn!(path = %path.display(), "{why}");
        }
    }
    gone
}

/// Whether the piece file at `path` holds bytes (as they are, or compressed) whose BLAKE3 is
/// `name` (a missing one does not).
fn piece_matches_its_name(path: &Path, name: &PieceName) -> bool {
    super::files::read_at_most(path, super::files::ENTRY_FILE_LIMIT + 1)
        .is_ok_and(|bytes| pieces::content_of(bytes, name).is_some())
}
