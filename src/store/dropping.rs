//! Dropping files beside live processes: a directory of another driver's (or one `pipekeep
//! clear` empties) and the partial writes a stopped process left. A file a live process holds
//! locked stays; the one rule the opening, the bound and the command share.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::files::{is_entry_name, lock_path, names_in, remove_if_present, Locked};
use super::{log_drop, pieces};

/// Drops every file of ours in an identity directory (another driver's, or one `pipekeep clear`
/// empties), then the directory if nothing else is in it. A temporary file or marker that a live
/// process holds locked stays (a second driver of the same GPU, or the application beside the
/// command, may be writing or loading there now), and so does the entry a live marker names; the
/// directory then stays until a later opening finds them let go. The one rule for removing a
/// directory's files beside a live process, the layer's and the command's.
pub fn drop_directory(dir: &Path, reason: &str, stop: &AtomicBool) -> u64 {
    let names = names_in(dir).unwrap_or_default();
    let mut held_by_the_living = std::collections::HashSet::new();
    for name in names.iter().filter(|n| is_write_or_load(n)) {
        let path = dir.join(name);
        match lock_path(&path, false) {
            Ok(Locked::Held(_) | Locked::NotAFile) => {
                let _ = remove_if_present(&path);
            }
            Ok(Locked::Busy) => {
                if let Some(entry) = name
                    .strip_suffix(".tmp")
                    .or_else(|| name.strip_suffix(".loading"))
                {
                    held_by_the_living.insert(entry.to_owned());
                }
                if let Ok(bytes) = fs::read(&path) {
                    if let Ok(named) = std::str::from_utf8(&bytes) {
                        held_by_the_living.insert(named.trim_end_matches('\0').to_owned());
                    }
                }
            }
            Ok(Locked::Gone) | Err(_) => {}
        }
    }
    // Entries left waiting for a later process of this driver, which will not come.
    for name in names.iter().filter(|n| n.ends_with(super::waiting::SUFFIX)) {
        let _ = remove_if_present(&dir.join(name));
    }
    let mut dropped = 0;
    for name in names.iter().filter(|n| is_entry_name(n)) {
        if stop.load(Ordering::Acquire) {
            // The device went: the rest is the next opening's.
            return dropped;
        }
        if held_by_the_living.contains(name.as_str()) {
            continue;
        }
        let path = dir.join(name);
        if remove_if_present(&path).unwrap_or(false) {
            dropped += 1;
            log_drop(&path, reason);
        }
    }
    let pieces_dir = dir.join(pieces::DIR);
    drop_partial_writes(&pieces_dir);
    for (_, path) in pieces::listed(dir) {
        if stop.load(Ordering::Acquire) {
            return dropped;
        }
        let _ = remove_if_present(&path);
    }
    let _ = fs::remove_dir(&pieces_dir);
    for note in super::NOTES {
        let _ = remove_if_present(&dir.join(note));
    }
    let _ = fs::remove_dir(dir);
    dropped
}

/// A write in progress or a loading marker: a file a live process holds locked while it works.
pub fn is_write_or_load(name: &str) -> bool {
    name.ends_with(".tmp") || name.ends_with(".loading")
}

/// Drops every `*.tmp` in `dir` whose lock can be taken (a stopped write). Returns how many.
pub fn drop_partial_writes(dir: &Path) -> u64 {
    drop_partial_writes_among(dir, &names_in(dir).unwrap_or_default())
}

/// As [`drop_partial_writes`], among `names`: `dir`'s listing, taken already.
pub fn drop_partial_writes_among(dir: &Path, names: &[String]) -> u64 {
    let mut dropped = 0;
    for name in names {
        if !name.ends_with(".tmp") {
            continue;
        }
        let path = dir.join(name);
        if let Ok(Locked::Held(_) | Locked::NotAFile) = lock_path(&path, false) {
            if remove_if_present(&path).unwrap_or(false) {
                dropped += 1;
                tracing::debug!(path = %path.display(), "dropped a partial write");
            }
        }
    }
    dropped
}
