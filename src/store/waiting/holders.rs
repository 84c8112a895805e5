//! Entry files moved into the waiting file a process's end leaves: those this process wrote
//! holding inline a piece that an entry left waiting carries too.
//!
//! A stage binary (or one of NVIDIA's records) stands inline in the first entry written that
//! carries it, and becomes a piece file when a second entry is written as a file, the first then
//! written again naming it ([`Store::write_announced`]). Where the second entry is left waiting
//! instead, the file and the waiting file each held the bytes (NVIDIA, pygfx at 16 threads:
//! 167-272 entries left waiting made entries and pieces 1.23-1.28x the driver's disk cache,
//! against 1.03x where none waited). Writing the first again as the second is left would cost
//! two files at the device's end; moving it into the waiting file costs the read of a file just
//! written and its removal, and the waiting file then holds the bytes once, as a piece its
//! entries name.

use std::fs;
use std::time::SystemTime;

use super::*;
use crate::store::Lookup;

/// The most bytes of entry files moved into one waiting file: with the queue's 64 MiB the file
/// stays within what an opening reads ([`MOST_BYTES`]).
const MOVED_AT_MOST: usize = 8 << 20;

/// An entry file read to be moved into the waiting file, with what its file was then.
#[derive(Debug)]
pub(super) struct Moved {
    pub key: PipelineKey,
    pub kind: PayloadKind,
    pub data: Vec<u8>,
    /// Its file's modification time: its stamp.
    pub stamp: SystemTime,
    len: u64,
}

impl Store {
    /// The entry files this process wrote holding inline a piece in `names` (one each, the first
    /// written carrying it: [`Store::write_announced`]), not among `waiting`, read whole; up to
    /// [`MOVED_AT_MOST`] bytes.
    pub(super) fn inline_holders(
        &self,
        names: impl Iterator<Item = PieceName>,
        waiting: &HashSet<PipelineKey>,
    ) -> Vec<Moved> {
        let keys: Vec<PipelineKey> = {
            let once = self.inline_once.locked();
            let mut seen = HashSet::new();
            names
                .filter_map(|name| once.get(&name).copied())
                .filter(|key| !waiting.contains(key) && seen.insert(*key))
                .collect()
        };
        let mut bytes = 0;
        let mut moved = Vec::new();
        for key in keys {
            let Some(read) = self.read_to_move(&key) else {
                continue;
            };
            bytes += read.data.len();
            if bytes > MOVED_AT_MOST {
                break;
            }
            moved.push(read);
        }
        moved
    }

    /// `key`'s entry file, checked, with its length and modification time; `None` where it is
    /// gone, damaged or no regular file.
    fn read_to_move(&self, key: &PipelineKey) -> Option<Moved> {
        let meta = fs::symlink_metadata(self.entry_path(key)).ok()?;
        let stamp = meta.modified().ok()?;
        if !meta.is_file() {
            return None;
        }
        let Ok(Lookup::Found(entry)) = self.read_entry(key) else {
            return None;
        };
        Some(Moved {
            key: *key,
            kind: entry.kind(),
            data: entry.with_data(|data| data.to_vec()),
            stamp,
            len: meta.len(),
        })
    }

    /// Removes the entry files of `moved`, now in a waiting file, on a thread of its own beside
    /// the rest of the device's end (on this project's machine an entry file written during the
    /// launch took 0.25-0.35 ms to remove: 60-90 of them 19-24 ms of pygfx's end), each where its
    /// file is still the one read (same length and modification time: one written again
    /// meanwhile stays, its entry then in both, which the bound passes over first). The end
    /// waits for it ([`Store::moved_removed`]).
    pub(super) fn remove_moved(&self, moved: &[Moved]) {
        if moved.is_empty() {
            return;
        }
        let files: Vec<(std::path::PathBuf, u64, SystemTime)> = moved
            .iter()
            .map(|m| (self.entry_path(&m.key), m.len, m.stamp))
            .collect();
        let here = files.clone();
        let remove = crate::sync::logging_as_here(move || remove_if_unchanged(&files));
        let mut removing = self.removing_moved.locked();
        let earlier = removing.take();
        match std::thread::Builder::new()
            .name("pipekeep-moved".into())
            .spawn(remove)
        {
            Ok(handle) => *removing = Some(handle),
            Err(_) => {
                drop(removing);
                remove_if_unchanged(&here);
            }
        }
        if let Some(earlier) = earlier {
            let _ = earlier.join();
        }
    }

    /// Waits for the removal of the entry files moved into a waiting file ([`Store::keep_waiting`]),
    /// where one is under way: at the device's end, once its other work is done.
    pub fn moved_removed(&self) {
        let handle = self.removing_moved.locked().take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

/// Removes each file of `files` whose length and modification time are still those given.
fn remove_if_unchanged(files: &[(std::path::PathBuf, u64, SystemTime)]) {
    let mut removed = 0;
    for (path, len, stamp) in files {
        let same = fs::symlink_metadata(path).is_ok_and(|meta| {
            meta.is_file() && meta.len() == *len && meta.modified().ok() == Some(*stamp)
        });
        match same.then(|| fs::remove_file(path)) {
            Some(Ok(())) => removed += 1,
            Some(Err(e)) => {
                tracing::debug!(entry = %path.display(), error = %e, "an entry file moved into a waiting file was not removed")
            }
            None => {}
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

    /// A moved entry's file written again between its read and its removal (another thread
    /// naming a piece in it) stays: its entry is then in both, never in neither.
    #[test]
    fn a_moved_entrys_file_written_again_since_its_read_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.entry");
        fs::write(&path, [1; 10]).unwrap();
        let read = fs::metadata(&path).unwrap();
        let (len, stamp) = (read.len(), read.modified().unwrap());
        fs::write(&path, [2; 12]).unwrap();
        remove_if_unchanged(&[(path.clone(), len, stamp)]);
        assert!(path.exists());
        let now = fs::metadata(&path).unwrap();
        remove_if_unchanged(&[(path.clone(), now.len(), now.modified().unwrap())]);
        assert!(!path.exists());
    }
}
