//! The loading marker (D994): while the driver loads an entry, a marker names it, so that a run
//! that stops inside the driver costs one entry, not every boot after.
//!
//! Each thread keeps one file `<pid>-<tid>.loading` per identity directory, created at its first
//! load and locked with `flock` for the thread's life (`<pid>-<tid>-<n>.loading` where that name
//! is taken: a thread of another pid namespace with the same ids). A child made by `fork` lets
//! go of its parent's markers ([`for_each_descriptor`]), so that they do not look live while it
//! lives. Before the driver sees an entry the thread
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
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
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
    /// The process that made it: a child made by `fork` inherits this thread's markers (the
    /// thread that forked), and must never remove its parent's.
    pid: u32,
}

/// This thread's marker in one identity directory, or `None` where none could be made (an
/// unwritable directory): remembered, so that no load tries again, and logged once a process.
struct DirMarker {
    dir: PathBuf,
    marker: Option<ThreadMarker>,
    /// When this thread last tried to make its marker here.
    tried: std::time::Instant,
}

/// How long a thread that could not make its marker in a directory loads unguarded there
/// before it tries again: a directory that was unwritable a moment (a full disk, a permission
/// mended) guards loads again, and one that stays so costs a few failed opens a second, not a
/// load.
pub(crate) const RETRY_MARKER_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

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
        forget_descriptor(self.file.as_raw_fd());
        // The thread is ending with nothing loading: the file would only be swept later. A
        // child made by `fork` leaves its parent's marker where it is.
        if self.pid == std::process::id() {
            let _ = remove_if_present(&self.path);
        }
    }
}

/// The most markers whose descriptors a child made by `fork` is told of (one a thread and
/// identity directory): past it a child may keep a marker's lock while it lives.
const DESCRIPTORS_KEPT: usize = 512;

/// The descriptors of this process's markers (-1: a free slot). Read by a child made by `fork`
/// in its fork handler, where no lock may be taken: atomics only.
static DESCRIPTORS: [AtomicI32; DESCRIPTORS_KEPT] =
    [const { AtomicI32::new(-1) }; DESCRIPTORS_KEPT];

fn remember_descriptor(fd: RawFd) {
    let kept = DESCRIPTORS.iter().any(|slot| {
        slot.compare_exchange(-1, fd, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    });
    if !kept {
        tracing::debug!("more markers than a fork handler is told of; a child may keep one's lock");
    }
}

fn forget_descriptor(fd: RawFd) {
    for slot in &DESCRIPTORS {
        if slot
            .compare_exchange(fd, -1, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

/// Calls `f` with the descriptor of each marker this process holds, for a child made by
/// `fork`: it inherits them, and with them each marker's `flock` (a lock belongs to the open
/// file, which the child now shares), so a parent that dies inside the driver would leave a
/// marker that looks live for as long as the child lives, and its entry loaded again by the
/// next run. `O_CLOEXEC` lets go only at an `exec`. The child must point each descriptor
/// elsewhere (the layer's fork handler puts `/dev/null` in its place, so that the number stays
/// its file's until the marker is dropped). Reads atomics only: safe in a fork handler.
pub fn for_each_descriptor(mut f: impl FnMut(RawFd)) {
    for slot in &DESCRIPTORS {
        let fd = slot.load(Ordering::Acquire);
        if fd >= 0 {
            f(fd);
        }
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

/// Names a thread's marker may take: its own first, then a few more. A process of another pid
/// namespace sharing the store may have a thread of the same process and thread id, holding the
/// first (or having died holding it, its entry named, since this process's opening swept).
const MARKER_NAMES: u32 = 4;

fn create_marker(dir: &Path) -> Option<ThreadMarker> {
    // An entry found while still queued for writing is loaded before the first write made its
    // identity directory: the marker makes it, as that write would have.
    if !dir.exists() {
        let _ = std::fs::create_dir_all(dir);
    }
    let base = marker_name();
    let base = base.strip_suffix(".loading").unwrap_or(&base);
    (0..MARKER_NAMES).find_map(|n| {
        let name = match n {
            0 => format!("{base}.loading"),
            n => format!("{base}-{n}.loading"),
        };
        create_marker_named(dir.join(name))
    })
}

/// Makes and locks the marker at `path`, unless another thread holds it or it names an entry
/// (a dead thread's: the next opening drops that entry, so it is left as it is).
fn create_marker_named(path: PathBuf) -> Option<ThreadMarker> {
    // A sweeper may remove a marker between its creation and its lock: try again once.
    for _ in 0..2 {
        match lock_path(&path, true) {
            Ok(Locked::Held(file)) => {
                let mut was = [0u8; ENTRY_NAME_LEN];
                let n = file.read_at(&mut was, 0).ok()?;
                if std::str::from_utf8(&was[..n]).is_ok_and(super::files::is_entry_name) {
                    return None;
                }
                // Empty (a NUL first) and as long as a name, before any mapping sees it.
                file.write_all_at(&[0; ENTRY_NAME_LEN], 0).ok()?;
                let slot = SLOT_MAKER.get().and_then(|make| make(&file));
                remember_descriptor(file.as_raw_fd());
                return Some(ThreadMarker {
                    path,
                    file,
                    slot,
                    pid: std::process::id(),
                });
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
    /// unwritable directory), the load goes on unguarded, and this thread tries again there
    /// after [`RETRY_MARKER_AFTER`].
    pub fn hold(dir: &Path, entry_name: &EntryName) -> LoadingMarker {
        let index = MARKERS.with(|cell| {
            let mut markers = cell.borrow_mut();
            let index = match markers.iter().position(|m| m.dir == dir) {
                Some(i) => {
                    let m = &mut markers[i];
                    if m.marker.is_none() && m.tried.elapsed() >= RETRY_MARKER_AFTER {
                        m.marker = create_marker(dir);
                        m.tried = std::time::Instant::now();
                    }
                    i
                }
                None => {
                    let marker = create_marker(dir);
                    if marker.is_none() {
                        log_no_marker(dir);
                    }
                    markers.push(DirMarker {
                        dir: dir.to_path_buf(),
                        marker,
                        tried: std::time::Instant::now(),
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
