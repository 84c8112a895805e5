//! The layer's notes in an identity directory, beside its entries: the driver refuses binaries,
//! the entry whose cache data carries NVIDIA's dictionary, the pieces a stopped load blamed.

use std::fs;
use std::path::Path;
use std::time::SystemTime;

use super::{files, host_pipelines_dir, order, Identity, Store, StoreError};
use crate::key::{EntryName, PipelineKey};

/// A file in an identity directory saying that its driver refused pipeline binaries another
/// process wrote: the layer's `auto` backend then takes `cache` for that identity.
pub const REFUSES_BINARIES: &str = "binaries-refused";

/// A file in an identity directory naming one entry (its file name and a newline) whose cache
/// data carries NVIDIA's dictionary: the layer hands that dictionary to the driver before a
/// device's first pipeline, since a driver that has compiled anything first refuses every entry
/// carrying a dictionary it does not hold.
pub const DICTIONARY_ENTRY: &str = "dictionary-entry";

/// A file in an identity directory naming the pieces that an entry blamed by a stale loading
/// marker named (`open.rs`): a piece blamed a second time is dropped.
pub const BLAMED_PIECES: &str = "blamed-pieces";

/// The layer's own files in an identity directory, beside entries, pieces and markers: dropped
/// with the directory.
pub const NOTES: [&str; 4] = [
    REFUSES_BINARIES,
    DICTIONARY_ENTRY,
    order::USE_ORDER,
    BLAMED_PIECES,
];

/// The most bytes of [`DICTIONARY_ENTRY`] read: an entry's file name and a newline fit.
const DICTIONARY_ENTRY_LIMIT: u64 = 128;

/// The entry a [`DICTIONARY_ENTRY`] note's bytes name: an entry's file name, then white space
/// at most; anything else names none.
pub fn entry_in_note(bytes: &[u8]) -> Option<PipelineKey> {
    let text = std::str::from_utf8(bytes).ok()?;
    PipelineKey::from_file_name(text.trim_end())
}

/// Whether the identity directory of `identity` says its driver refuses binaries.
pub fn refuses_binaries(root: &Path, title: &str, identity: &Identity) -> bool {
    host_pipelines_dir(root, title)
        .join(identity.dir_name())
        .join(REFUSES_BINARIES)
        .is_file()
}

impl Store {
    /// Remembers, for later runs, that this driver refuses binaries another process wrote.
    pub fn remember_refused_binaries(&self) -> Result<(), StoreError> {
        self.make_dir()?;
        let path = self.dir.join(REFUSES_BINARIES);
        fs::write(
            &path,
            "this driver refused pipeline binaries another process wrote: the auto backend takes cache\n",
        )
        .map_err(StoreError::io("write", &path))
    }

    /// The entry [`DICTIONARY_ENTRY`] names, if the file is there and names one. Never follows a
    /// link; reads at most a few bytes.
    pub fn dictionary_entry(&self) -> Option<PipelineKey> {
        let path = self.dir.join(DICTIONARY_ENTRY);
        let bytes = files::read_at_most(&path, DICTIONARY_ENTRY_LIMIT).ok()?;
        let key = entry_in_note(&bytes);
        if key.is_none() {
            tracing::debug!(path = %path.display(), "the dictionary's note names no entry; ignored");
        }
        key
    }

    /// Names `name` in [`DICTIONARY_ENTRY`] for later runs (a whole file or none: through a
    /// temporary file and a rename, as an entry).
    pub fn remember_dictionary_entry(&self, name: &EntryName) -> Result<(), StoreError> {
        self.make_dir()?;
        let path = self.dir.join(DICTIONARY_ENTRY);
        files::write_atomically(&path, format!("{name}\n").as_bytes(), SystemTime::now())
            .map(|_| ())
    }

    /// Removes [`DICTIONARY_ENTRY`]: no entry carries the dictionary it named any longer.
    pub fn forget_dictionary_entry(&self) {
        let path = self.dir.join(DICTIONARY_ENTRY);
        if let Err(e) = fs::remove_file(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::debug!(path = %path.display(), error = %e, "the dictionary's note was not removed");
            }
        }
    }

    /// A run that loaded entries and ended whole clears the blames of earlier stopped loads: the
    /// second blame that drops a shared piece is for a crash loop (two stopped loads in a row),
    /// never for two kills on a loading screen months apart.
    pub fn forget_blamed_pieces(&self) {
        if let Err(e) = files::remove_if_present(&self.dir.join(BLAMED_PIECES)) {
            tracing::debug!(dir = %self.dir.display(), error = %e, "the note of blamed pieces stays");
        }
    }
}
