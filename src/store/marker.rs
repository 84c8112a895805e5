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
use crate::sync::Unpoisoned;

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
    path: PathBuf,
    file: File,
    slot: Option<Box<dyn MarkerSlot>>,
}

/// This thread's marker in one identity directory, or `None` where none could be made (an
/// unwritable directory): remembered, so that no load tries again, and logged once a process.
struct DirMarker {
    dir: PathBuf,
    marker: Option<ThreadMarker>,
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
    static MARKERS: RefCell<Vec<DirMarker>> = const { RefCell::new(Vec::new()) };
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
                return Some(ThreadMarker { path, file, slot });
            }
            Ok(Locked::Gone) => continue,
            Ok(Locked::NotAFile) => {
                // A link or FIFO under our own marker's name: removed, never followed.
                let _ = remove_if_present(&path);
                continue;
            }
            Ok(Locked::Busy) | Err(_) => return None,
        }
    }
    None
}

/// Logs, once a process for each directory, that no marker can be kept there.
fn log_no_marker(dir: &Path) {
    static LOGGED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut logged = LOGGED.locked();
    if !logged.iter().any(|d| d == dir) {
        logged.push(dir.to_path_buf());
        tracing::warn!(dir = %dir.display(), "no loading marker can be kept in this directory; entries are loaded unguarded");
    }
}

/// Names an entry in this thread's marker until dropped. Not `Send`: it empties the marker of
/// the thread that made it.
pub struct LoadingMarker {
    /// The marker's place among this thread's (they are only added to while the thread lives).
    index: Option<usize>,
    _this_thread: std::marker::PhantomData<*const ()>,
}

impl LoadingMarker {
    /// Writes `entry_name` into this thread's marker in `dir`. If no marker can be kept (an
    /// unwritable directory), the load goes on unguarded, and no later load tries again.
    pub fn hold(dir: &Path, entry_name: &EntryName) -> LoadingMarker {
        let index = MARKERS.with(|cell| {
            let mut markers = cell.borrow_mut();
            let index = match markers.iter().position(|m| m.dir == dir) {
                Some(i) => i,
                None => {
                    let marker = create_marker(dir);
                    if marker.is_none() {
                        log_no_marker(dir);
                    }
                    markers.push(DirMarker {
                        dir: dir.to_path_buf(),
                        marker,
                    });
                    markers.len() - 1
                }
            };
            markers[index].marker.as_mut()?.name(entry_name).ok()?;
            Some(index)
        });
        LoadingMarker {
            index,
            _this_thread: std::marker::PhantomData,
        }
    }

    /// Whether this thread tried to make a marker in `dir` and could not (for tests).
    pub fn unavailable_in(dir: &Path) -> bool {
        MARKERS.with(|cell| {
            cell.borrow()
                .iter()
                .any(|m| m.dir == dir && m.marker.is_none())
        })
    }
}

impl Drop for LoadingMarker {
    fn drop(&mut self) {
        let Some(index) = self.index else { return };
        let _ = MARKERS.try_with(|cell| {
            if let Some(m) = cell
                .borrow_mut()
                .get_mut(index)
                .and_then(|m| m.marker.as_mut())
            {
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
        Locked::Gone | Locked::NotAFile => Ok((MarkerState::Stale(None), None)),
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
