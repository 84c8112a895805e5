//! Entry files moved into the waiting file a process's end leaves: those this process wrote for
//! its own pipelines holding inline a piece that an entry left waiting carries too.
//!
//! A stage binary (or one of NVIDIA's records) stands inline in the first entry written that
//! carries it, and becomes a piece file when a second entry is written as a file, the first then
//! written again naming it ([`Store::write_announced`]). Where the second is left waiting
//! instead, the file and the waiting file each held the bytes (NVIDIA, pygfx at 16 threads:
//! 167-272 entries left waiting made entries and pieces 1.23-1.28x the driver's disk cache,
//! against 1.03x where none waited). Writing the first again as the second is left would cost
//! two files at the device's end; moving it into the waiting file costs the read of a file just
//! written and its removal (beside the rest of the end), and the waiting file then holds the
//! bytes once, as a piece its entries name.
//!
//! Not moved: an entry this process wrote from an earlier process's waiting file (the rest of
//! that file, left waiting again, would take it back at every end, and the two halves of a pair
//! would never both be files), one still queued, one moved already, and NVIDIA's carrying the
//! driver's dictionary (never left waiting: 1.78 MB each in the next process's queue).

use std::time::SystemTime;

use super::*;
use crate::store::files::FileId;
use crate::store::nvidia_cache;
use crate::sync::AtOnce;
use std::sync::Arc;

/// The most payload bytes of entry files moved into one waiting file.
const MOVED_AT_MOST: usize = 8 << 20;

/// An entry file read to be moved into the waiting file: its payload, and the file read.
#[derive(Debug)]
pub(super) struct Moved {
    pub key: PipelineKey,
    pub kind: PayloadKind,
    pub data: Vec<u8>,
    /// Its record's stamp: a nanosecond after its file's modification time, so that a bound
    /// pass while both stand drops the file first (stamped alike, it drops such a record first,
    /// as a copy of the file). The entry's last use in this process, where later, is taken after.
    pub stamp: SystemTime,
    file: FileId,
}

/// What a store has moved into its waiting files: the keys (never moved twice), and the removal
/// of their files under way.
#[derive(Debug, Default)]
pub struct MovedOut {
    keys: HashSet<PipelineKey>,
    removing: Vec<std::thread::JoinHandle<()>>,
}

impl Store {
    /// The entry files this process wrote holding inline a piece in `names` (each the first
    /// written carrying it: [`Store::write_announced`]), read whole and checked, up to
    /// [`MOVED_AT_MOST`] bytes; those not to be moved (the module's doc) are left. `waiting`: the
    /// keys being left waiting. Nothing where the writer thread holds the lock it plans with
    /// (the device's end is on an application's thread; the writer runs at idle priority).
    pub(super) fn inline_holders(
        &self,
        names: impl Iterator<Item = PieceName>,
        waiting: &HashSet<PipelineKey>,
    ) -> Vec<Moved> {
        let holders: Vec<PipelineKey> = {
            // The lock the writer plans with, and the one it takes as it stamps an entry found
            // from a taken file: where either is held, nothing is moved.
            let (Some(once), Some(taken)) = (
                self.inline_once.locked_at_once(),
                self.taken.locked_at_once(),
            ) else {
                return Vec::new();
            };
            names
                .filter_map(|name| once.get(&name).copied())
                .filter(|key| !waiting.contains(key) && !taken.every_key.contains(key))
                .collect()
        };
        let candidates: Vec<PipelineKey> = {
            // Reserved as chosen: two ends at once (the exit handler and a device's end on
            // another thread) never move one entry into both their files (each once).
            let mut out = self.moved_out.locked();
            holders
                .into_iter()
                .filter(|key| !self.queued.holds(key))
                .filter(|key| out.keys.insert(*key))
                .collect()
        };
        let mut bytes = 0;
        let mut moved = Vec::new();
        for key in &candidates {
            if MOVED_AT_MOST - bytes < MOVED_AT_MOST / 64 {
                break; // about full: the rest are not read
            }
            let Some(read) = self.read_to_move(key) else {
                continue;
            };
            if bytes + read.data.len() <= MOVED_AT_MOST {
                bytes += read.data.len();
                moved.push(read);
            }
        }
        moved
    }

    /// `key`'s entry file, checked, with its file; `None` where it is gone, damaged, or carries
    /// NVIDIA's dictionary.
    fn read_to_move(&self, key: &PipelineKey) -> Option<Moved> {
        let (entry, meta) = self.read_back(key)?;
        let data = entry.with_data(<[u8]>::to_vec);
        let kind = entry.kind();
        if kind == PayloadKind::Cache && nvidia_cache::frame_bytes(&data).is_ok() {
            return None;
        }
        Some(Moved {
            key: *key,
            kind,
            data,
            stamp: meta.modified().ok()? + std::time::Duration::from_nanos(1),
            file: FileId::of(&meta),
        })
    }

    /// Removes the entry files of `moved`, now in a waiting file, on a thread of its own beside
    /// the rest of the device's end (on this project's machine an entry file written during the
    /// launch took 0.25-0.35 ms to remove: 60-90 of them 19-24 ms of pygfx's end). Each goes only
    /// where its name still names the file read ([`files::remove_if_still_the`]): one written
    /// again meanwhile (by this process naming a piece, or by another taking the waiting file
    /// already) is a new file and stays, its entry then in both. The end waits for it
    /// ([`Store::moved_removed`]).
    pub(super) fn remove_moved(&self, moved: &[Moved]) {
        if moved.is_empty() {
            return;
        }
        let files: Arc<Vec<(std::path::PathBuf, FileId)>> = Arc::new(
            moved
                .iter()
                .map(|m| (self.entry_path(&m.key), m.file))
                .collect(),
        );
        let for_thread = files.clone();
        let remove = crate::sync::logging_as_here(move || {
            let _ = std::panic::catch_unwind(|| remove_moved_files(&for_thread));
        });
        match std::thread::Builder::new()
            .name("pipekeep-moved".into())
            .spawn(remove)
        {
            Ok(handle) => self.moved_out.locked().removing.push(handle),
            Err(_) => remove_moved_files(&files),
        }
    }

    /// Waits for the removal of the entry files moved into a waiting file ([`Store::keep_waiting`]),
    /// where one is under way: at the device's end, once its other work is done.
    pub fn moved_removed(&self) {
        let removing = std::mem::take(&mut self.moved_out.locked().removing);
        for handle in removing {
            let _ = handle.join();
        }
    }
}

/// Removes each file of `files` where its path still names that file.
fn remove_moved_files(files: &[(std::path::PathBuf, FileId)]) {
    let mut removed = 0;
    for (path, file) in files {
        match files::remove_if_still_the(path, Some(*file)) {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(e) => {
                tracing::debug!(entry = %path.display(), error = %e, "an entry file moved into a waiting file was not removed")
            }
        }
    }
    tracing::debug!(
        moved = files.len(),
        removed,
        "entry files holding pieces that entries left waiting carry, moved into their file"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A moved entry's file written again between its read and its removal (renamed in place
    /// with the same length and stamp, as a write naming a piece or another process's write of
    /// the same entry may be) stays: its entry is then in both, never in neither.
    #[test]
    fn a_moved_entrys_file_written_again_since_its_read_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.entry");
        let stamp = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        files::write_atomically(&path, &[1; 10], stamp).unwrap();
        let read = FileId::of(&fs::metadata(&path).unwrap());
        files::write_atomically(&path, &[2; 10], stamp).unwrap();
        remove_moved_files(&[(path.clone(), read)]);
        assert_eq!(fs::read(&path).unwrap(), [2; 10]);
        let now = FileId::of(&fs::metadata(&path).unwrap());
        remove_moved_files(&[(path.clone(), now)]);
        assert!(!path.exists());
    }
}
