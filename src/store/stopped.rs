//! What an opening does about the loads a process stopped in (stale loading markers;
//! docs/FORMAT.md, "A stopped load"): each entry a marker names goes, alone, from its file and
//! from the files of entries left waiting; the pieces those entries name are blamed once for the
//! stop (`blamed.rs`), and one an earlier stop blamed goes, with every entry naming it. The
//! markers go last, once nothing they name is left to load.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};

use super::blamed::BlamedPieces;
use super::files::{is_entry_name, remove_if_present};
use super::marker::{inspect, MarkerState};
use super::pieces::{self, Pieces};
use super::recipe::PieceName;
use super::{log_drop, waiting};
use crate::key::PipelineKey;

/// The stale markers an opening found, and the entries they name.
#[derive(Default)]
pub(super) struct StoppedLoads {
    /// Each stale marker, with its lock where it has one: held until the marker is removed, so
    /// that no thread adopts it meanwhile.
    markers: Vec<(PathBuf, Option<File>)>,
    /// The entries' file names.
    entries: Vec<String>,
}

/// What settling the stopped loads did.
pub(super) struct Settled {
    /// Entry files dropped.
    pub dropped: u64,
    /// The keys that go from the files of entries left waiting (where a file could not be
    /// written anew, the opening's take leaves them).
    pub going: HashSet<PipelineKey>,
}

impl StoppedLoads {
    /// Notes the marker `marker_name` of `dir` (`<entry>.loading`, the seed's form, or
    /// `<pid>-<tid>.loading`, one a thread) where it is stale; a live one is left alone.
    pub(super) fn note(&mut self, dir: &Path, marker_name: &str) {
        let Some(stem) = marker_name.strip_suffix(".loading") else {
            return;
        };
        let marker = dir.join(marker_name);
        let (named, lock) = if is_entry_name(stem) {
            (Some(stem.to_owned()), None)
        } else {
            match inspect(&marker) {
                Ok((MarkerState::Live, _)) | Err(_) => return,
                Ok((MarkerState::Stale(named), lock)) => (named, lock),
            }
        };
        self.markers.push((marker, lock));
        self.entries
            .extend(named.filter(|n| is_entry_name(n) && !self.entries.contains(n)));
    }

    /// Drops what the stale markers name, blames its pieces, then removes the markers.
    pub(super) fn settle(self, dir: &Path) -> Settled {
        let mut settled = Settled {
            dropped: 0,
            going: HashSet::new(),
        };
        if self.markers.is_empty() {
            return settled;
        }
        let keys: HashSet<PipelineKey> = self
            .entries
            .iter()
            .filter_map(|e| PipelineKey::from_file_name(e))
            .collect();
        // One stop blames each piece once, whichever of its threads' entries (files, or copies
        // waiting in files of either ABI: a marker does not say which process's) names it.
        let mut copies = waiting::stopped_copies(dir, &keys);
        let mut named = std::mem::take(&mut copies.named);
        for entry in &self.entries {
            named.extend(named_by_entry_file(&dir.join(entry)));
        }
        let mut blamed = BlamedPieces::read(dir);
        let gone = blame_once(dir, named, &copies.own, &mut blamed);
        settled.going = waiting::without_stopped(&copies, &keys, &gone);
        settled.going.extend(keys);
        for entry in &self.entries {
            let path = dir.join(entry);
            settled.dropped += u64::from(remove_if_present(&path).unwrap_or(false));
            log_drop(&path, "stale-marker");
        }
        // Noted before the markers go: a stop whose blame was lost would take a crash loop on a
        // shared piece a run more (one killed in between is blamed twice: a compile, no loop).
        blamed.save();
        for (marker, _lock) in &self.markers {
            let _ = remove_if_present(marker);
        }
        settled
    }
}

/// The pieces and lists the entry file at `path` names (none where it is not there).
fn named_by_entry_file(path: &Path) -> Vec<PieceName> {
    let file = super::files::open_entry_file(None, path, false);
    match super::files::read_entry_file(file) {
        Ok((Ok(bytes), _)) => super::envelope::listed_parts(&bytes).map_or(Vec::new(), |(_, p)| p),
        _ => Vec::new(),
    }
}

/// Blames `named` (pieces and lists, those of the lists too), each once: the driver stopped
/// while loading an entry naming them, maybe on one of them, but other entries share them. A
/// store's piece file that fails its name goes at once; one blamed at an earlier stop goes, and
/// every entry naming it is a miss (`missing-piece`) instead of stopping the driver again. `own`:
/// the pieces the waiting files carry, by name, with whether a copy holds what its name says (one
/// only there whose every copy fails is not blamed: the entries naming it fail their check).
/// Returns the pieces blamed twice.
fn blame_once(
    dir: &Path,
    mut named: Vec<PieceName>,
    own: &HashMap<PieceName, bool>,
    blamed: &mut BlamedPieces,
) -> HashSet<PieceName> {
    let pieces = Pieces::for_looking(dir);
    let listed: Vec<_> = named.iter().flat_map(|n| pieces.listed_by(n)).collect();
    named.extend(listed);
    named.sort_unstable();
    named.dedup();
    let mut gone = HashSet::new();
    for name in named {
        let path = pieces.path(&name);
        let in_store = std::fs::symlink_metadata(&path).is_ok();
        if in_store && !piece_matches_its_name(&pieces, &name) {
            if remove_if_present(&path).unwrap_or(false) {
                tracing::warn!(path = %path.display(), "dropped a damaged piece the stopped load named");
            }
            if !own.get(&name).copied().unwrap_or(false) {
                continue;
            }
        } else if !in_store && !own.get(&name).copied().unwrap_or(false) {
            continue;
        }
        if blamed.blame(&name) {
            let _ = remove_if_present(&path);
            tracing::warn!(path = %path.display(), "dropped a piece a second stopped load named");
            gone.insert(name);
        }
    }
    gone
}

/// Whether the store's piece file of `name` holds bytes (as they are, or compressed) whose
/// BLAKE3 is `name` (a missing one does not).
fn piece_matches_its_name(pieces: &Pieces, name: &PieceName) -> bool {
    super::files::read_within(&pieces.path(name), super::files::ENTRY_FILE_LIMIT)
        .is_ok_and(|bytes| bytes.is_some_and(|b| pieces::content_of(b, name).is_some()))
}
