//! The loading marker (D994): while the driver loads an entry, a marker names it, so that a run
//! that stops inside the driver costs one entry, not every boot after.
//!
//! Each thread keeps one file `<pid>-<tid>.loading` per identity directory, created at its first
//! load and locked with `flock` for the thread's life. Before the driver sees an entry the thread
//! writes the entry's name into it; after, it empties it. A marker whose lock can be taken belongs
//! to a thread that is gone: the entry it names is dropped at the next opening. An empty marker
//! is one whose content is not an entry's name (after a load its first byte is NUL).
//!
//! The marker is written twice a load, so how it is written matters: by default a write in
//! place (two system calls a load); a process that may map files gives [`use_slots`] a maker of
//! [`MarkerSlot`]s, and the layer gives one that maps the file's bytes, so that naming and
//! emptying are plain stores into the page cache, which outlive a crash of the process as a
//! write would. Every entry name has the same length, so the file is sized once, at creation.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::files::{lock_path, remove_if_present, Locked};
use crate::key::{EntryName, ENTRY_NAME_LEN};

/// A marker file's bytes, written without a system call (see the module's doc).
pub trait MarkerSlot {
    /// Writes the name over the file's bytes.
    fn name(&mut self, name: &[u8; ENTRY_NAME_LEN]);
    /// Writes a NUL over the first byte.
    fn empty(&mut self);
}

/// Makes a slot over a marker file already [`ENTRY_NAME_LEN`] bytes long, or `None` to write it
/// in place.
pub type SlotMaker = fn(&File) -> Option<Box<dyn MarkerSlot>>;

static SLOT_MAKER: OnceLock<SlotMaker> = OnceLock::new();

/// Sets how this process's markers are written, once; later calls change nothing.
pub fn use_slots(maker: SlotMaker) {
    let _ = SLOT_MAKER.set(maker);
}

struct ThreadMarker {
    dir: PathBuf,
    path: PathBuf,
    file: File,
    slot: Option<Box<dyn MarkerSlot>>,
}

impl ThreadMarker {
    fn name(&mut self, name: &EntryName) -> io::Result<()> {
        match &mut self.slot {
            Some(slot) => slot.name(name.bytes()),
            None => self.file.write_all_at(name.bytes(), 0)?,
        }
        Ok(())
    }

    /// Emptied by a NUL over the name's first byte: the marker then names no entry. A one-byte
    /// write in place costs far less than a truncation (measured: ftruncate was the layer's
    /// largest single cost on a warm run), and the file keeps its size.
    fn empty(&mut self) {
        match &mut self.slot {
            Some(slot) => slot.empty(),
            None => {
                let _ = self.file.write_at(&[0], 0);
            }
        }
    }
}

impl Drop for ThreadMarker {
    fn drop(&mut self) {
        // The thread is ending with nothing loading: the file would only be swept later.
        let _ = remove_if_present(&self.path);
    }
}

thread_local! {
    static MARKERS: RefCell<Vec<ThreadMarker>> = const { RefCell::new(Vec::new()) };
}

/// This thread's id as the kernel knows it, or a number of our own where /proc is absent.
fn thread_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static FALLBACK: AtomicU64 = AtomicU64::new(1 << 32);
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or_else(|| FALLBACK.fetch_add(1, Ordering::Relaxed))
}

/// The name of this thread's marker file.
pub fn marker_name() -> String {
    format!("{}-{}.loading", std::process::id(), thread_id())
}

fn create_marker(dir: &Path) -> Option<ThreadMarker> {
    let path = dir.join(marker_name());
    // A sweeper may remove a marker between its creation and its lock: try again once.
    for _ in 0..2 {
        match lock_path(&path, true) {
            Ok(Locked::Held(file)) => {
                // Empty (a NUL first) and as long as a name, before any mapping sees it.
                file.write_all_at(&[0; ENTRY_NAME_LEN], 0).ok()?;
                let slot = SLOT_MAKER.get().and_then(|make| make(&file));
                return Some(ThreadMarker {
                    dir: dir.to_path_buf(),
                    path,
                    file,
                    slot,
                });
            }
            Ok(Locked::Gone) => continue,
            Ok(Locked::Busy) | Err(_) => return None,
        }
    }
    None
}

/// Names an entry in this thread's marker until dropped.
pub struct LoadingMarker {
    /// The marker's place among this thread's (they are only added to while the thread lives).
    index: Option<usize>,
}

impl LoadingMarker {
    /// Writes `entry_name` into this thread's marker in `dir`. If no marker can be kept (an
    /// unwritable directory), the load goes on unguarded.
    pub fn hold(dir: &Path, entry_name: &EntryName) -> LoadingMarker {
        let index = MARKERS.with(|cell| {
            let mut markers = cell.borrow_mut();
            let index = match markers.iter().position(|m| m.dir == dir) {
                Some(i) => i,
                None => {
                    markers.push(create_marker(dir)?);
                    markers.len() - 1
                }
            };
            markers[index].name(entry_name).ok()?;
            Some(index)
        });
        LoadingMarker { index }
    }
}

impl Drop for LoadingMarker {
    fn drop(&mut self) {
        let Some(index) = self.index else { return };
        let _ = MARKERS.try_with(|cell| {
            if let Some(m) = cell.borrow_mut().get_mut(index) {
                m.empty();
            }
        });
    }
}

/// What a marker found at opening says.
#[derive(Debug, PartialEq, Eq)]
pub enum MarkerState {
    /// A live thread holds it.
    Live,
    /// Left by a thread that is gone; it named this entry (if any).
    Stale(Option<String>),
}

/// Reads a per-thread marker: live if its lock is held elsewhere, otherwise stale with the
/// entry name it holds. The caller removes a stale marker while we still hold its lock.
pub fn inspect(path: &Path) -> std::io::Result<(MarkerState, Option<File>)> {
    match lock_path(path, false)? {
        Locked::Busy => Ok((MarkerState::Live, None)),
        Locked::Gone => Ok((MarkerState::Stale(None), None)),
        Locked::Held(file) => {
            let mut buf = [0u8; 128];
            let n = file.read_at(&mut buf, 0)?;
            let name = std::str::from_utf8(&buf[..n])
                .ok()
                .map(str::to_owned)
                .filter(|s| super::files::is_entry_name(s));
            Ok((MarkerState::Stale(name), Some(file)))
        }
    }
}
