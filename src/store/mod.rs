//! The checked store (D994): one verified entry per pipeline, crash-safe, bounded, and safe with
//! many processes and threads. No Vulkan types and no unsafe code: any tool can use it.
//!
//! ```text
//! <root>/<title>/host-pipelines/<vendor>-<device>-<driver>-<uuid>/<spirv>-<state>.entry
//! ```
//! The open of an entry's file is the lookup, unless the entry was read ahead ([`ahead`]) or is
//! known to be missing (not in the directory's listing at opening, nor written since); an entry
//! is checked whole ([`envelope::decode`]) before a byte is handed on; writes go through a
//! locked temporary file and a rename; a per-thread loading marker names the entry the driver is
//! loading; opening drops what a stopped run left and brings the title within its size bound,
//! oldest stamp first.
#![forbid(unsafe_code)]

pub mod ahead;
pub mod binaries;
mod blamed;
pub mod bound;
pub mod compress;
mod dropping;
pub mod envelope;
mod eviction;
pub mod files;
pub mod held;
pub mod identifiers;
pub mod identity;
pub mod inspect;
mod layout;
pub mod library;
pub mod marker;
mod named;
mod notes;
pub mod nvidia_cache;
mod open;
pub mod order;
pub mod payload;
pub mod pieces;
mod queued;
pub mod recipe;
mod stamps;
mod stopped;
pub use stamps::ToStamp;
pub mod waiting;
mod write;

use std::collections::HashSet;
use std::fs::{self, File};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use crate::key::{EntryName, PipelineKey};
use crate::sync::Unpoisoned;
pub use ahead::AheadOrder;
pub use dropping::drop_directory;
pub use envelope::EntryError;
pub use files::SET_ASIDE_SUFFIX;
pub use identity::Identity;
pub use marker::LoadingMarker;
pub use notes::{
    entry_in_note, refuses_binaries, BLAMED_PIECES, DICTIONARY_ENTRY, NOTES, REFUSES_BINARIES,
};
pub use open::{drop_set_aside, OpenReport};
pub use payload::{Checked, Payload};
pub use queued::{Queued, QueuedData};

/// An I/O failure of the store, with the path and what was being done.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl StoreError {
    /// `map_err` for an I/O step on `path`.
    pub fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
        move |source| StoreError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The title's record (`<title>/record.foz`: every kept pipeline's create info, a Fossilize
/// database): the store's bound counts it, `replay::record` writes and reads it. Named here, so
/// that the store needs nothing of the replay.
pub const RECORD_FILE: &str = "record.foz";

/// Where a title's pipelines live: `<root>/<title>/host-pipelines`.
pub fn host_pipelines_dir(root: &Path, title: &str) -> PathBuf {
    root.join(title).join("host-pipelines")
}

/// Logs one dropped entry in the one form the SPEC gives (tools and tests read it).
pub fn log_drop(path: &Path, reason: &str) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    tracing::warn!(
        "dropped entry={name} reason={reason} path={}",
        path.display()
    );
}

/// One device identity's open store.
#[derive(Debug)]
pub struct Store {
    identity: Identity,
    title_dir: PathBuf,
    dir: PathBuf,
    max_bytes: u64,
    opened_at: SystemTime,
    stamps_taken: AtomicU64,
    written_bytes: AtomicU64,
    /// Of them, those written since the bound last noted the title's bytes.
    written_since_noted: AtomicU64,
    bounding: AtomicBool,
    /// The identity directory exists (made at the first write, not at opening).
    dir_made: AtomicBool,
    /// The identity directory, held open once it exists: a lookup opens its entry relative to it.
    dir_fd: files::HeldDir,
    /// Stage binaries (and NVIDIA records) this process wrote inline, each with the entry that
    /// holds it: the next entry to carry one makes it a piece, and that entry is written again
    /// naming the piece.
    inline_once: Mutex<held::OldestFirst<recipe::PieceName, PipelineKey>>,
    /// Stage binaries (and NVIDIA records) that two entries written together carry
    /// ([`Store::expect_together`]): written as pieces from the first, no entry inline.
    shared_ahead: Mutex<HashSet<recipe::PieceName>>,
    /// The entry files moved into the waiting files the end left, and their removal under way
    /// beside the rest of the end ([`Store::moved_removed`]).
    moved_out: Mutex<waiting::MovedOut>,
    /// Test only: every stage binary large enough is a piece, shared or not.
    pieces_always: AtomicBool,
    /// Entries are opened without updating their access time (whose update would dirty the inode
    /// at every warm lookup) until the kernel refuses it: only the files' owner may ask.
    no_atime: AtomicBool,
    ahead: ahead::ReadAhead,
    known: KnownEntries,
    /// Entries announced whose files are not written yet (`queued.rs`).
    queued: queued::QueuedEntries,
    pieces: pieces::Pieces,
    /// How `cache` payloads are cut into pieces.
    chunking: Mutex<recipe::Chunking>,
    /// Opening dropped another driver's directory of this device (a driver change).
    driver_changed: AtomicBool,
    /// Other drivers' directories of this device the opening found and left to
    /// [`Store::drop_other_drivers`].
    other_drivers: Mutex<Vec<PathBuf>>,
    /// A device of this process took the rebuild the driver change calls for.
    rebuild_taken: AtomicBool,
    /// Entries this run found whose stamps wait in the layer's writer queue ([`Store::owe_stamp`]),
    /// each with the pieces it names: a bound pass gives them first, or it would take this run's
    /// first used entries for the last run's and evict them before what this run wrote after
    /// them (the boot lost).
    owed_stamps: Mutex<std::collections::HashMap<PipelineKey, stamps::Owed>>,
    /// The bytes of the title's record where its compaction could not bring it within its share
    /// ([`Store::record_past_its_share`]): the bound takes them from the entries' room.
    record_floor: AtomicU64,
    /// The last run's order of use, and this run's (`order.rs`).
    use_order: stamps::UseOrders,
    /// The waiting files this process took, until its end settles them ([`waiting`]).
    taken: Mutex<waiting::Taken>,
    /// Its opening left a waiting file of this ABI for a later one (past
    /// the 32 MiB an opening takes): no file taken stays as it is, or an opening would take the
    /// same ones every time and never the rest; and the few entries an end leaves of earlier
    /// processes' files would go behind it (so they are written as files instead).
    /// Set once, before the store is published; read without a lock at the end, where the
    /// writer's queue is held.
    waiting_left_untaken: AtomicBool,
    /// The entries whose load a stopped process's marker names (the opening dropped their
    /// files): a copy waiting in a file is not taken either, or the next load stops again.
    stopped_loads: OnceLock<HashSet<PipelineKey>>,
}

/// The entries this store may hold: those its directory listed at opening and those this run
/// wrote since. A key in neither is missing without an `open`: on a cold run a failing open
/// waits on the directory's lock behind the writer's creates (1 ms stalls, 150 us a pipeline
/// measured on RADV), and the listing is taken at opening anyway. An entry another process
/// writes during this run is found from the next run on.
#[derive(Debug)]
struct KnownEntries {
    /// `None` until the opening has listed the directory (or when it could not): every lookup
    /// then opens.
    at_opening: OnceLock<HashSet<PipelineKey>>,
    written: Mutex<WrittenSince>,
    /// Keys written by threads of the layer's own at idle priority (the rebuild's), told
    /// without the lock lookups take: taken in at the next lookup that asks.
    told: std::sync::mpsc::Sender<PipelineKey>,
    /// A bit for every key written since the opening, by a few bits of the key (two keys may
    /// share one): a lookup whose bit is clear knows the entry missing without the lock, and a
    /// thread of the layer's own at idle priority, which never takes it, opens only where set.
    written_bits: Box<[AtomicU64]>,
}

/// Words of [`KnownEntries::written_bits`]: 64 Kibit, for a few thousand keys a run.
const WRITTEN_WORDS: usize = 1024;

/// The word and bit of `key` in [`KnownEntries::written_bits`].
fn written_bit(key: &PipelineKey) -> (usize, u64) {
    let low = |b: &[u8; 16]| u64::from_le_bytes(b[..8].try_into().expect("eight bytes"));
    let h = low(&key.spirv) ^ low(&key.state).rotate_left(17);
    ((h >> 6) as usize % WRITTEN_WORDS, 1 << (h & 63))
}

#[derive(Debug)]
struct WrittenSince {
    keys: HashSet<PipelineKey>,
    told: std::sync::mpsc::Receiver<PipelineKey>,
}

impl Default for KnownEntries {
    fn default() -> KnownEntries {
        let (told, receiver) = std::sync::mpsc::channel();
        KnownEntries {
            at_opening: OnceLock::new(),
            written: Mutex::new(WrittenSince {
                keys: HashSet::new(),
                told: receiver,
            }),
            told,
            written_bits: (0..WRITTEN_WORDS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl KnownEntries {
    fn may_hold(&self, key: &PipelineKey) -> bool {
        match self.at_opening.get() {
            None => true,
            Some(listed) if listed.contains(key) => true,
            Some(_) if !self.written_since_opening(key) => false,
            // A thread of the layer's own at idle priority (the rebuild's) never holds the lock
            // lookups take: where the key's bit is set, it opens the file.
            Some(_) if crate::sync::at_idle_priority() => true,
            Some(_) => {
                let mut written = self.written.locked();
                while let Ok(told) = written.told.try_recv() {
                    written.keys.insert(told);
                }
                written.keys.contains(key)
            }
        }
    }

    /// Whether the opening listed `key` (true before it has, or where it could not).
    fn listed_at_opening(&self, key: &PipelineKey) -> bool {
        self.at_opening
            .get()
            .is_none_or(|listed| listed.contains(key))
    }

    /// Whether `key`'s bit is set: written since the opening, perhaps (another key may share it).
    fn written_since_opening(&self, key: &PipelineKey) -> bool {
        let (word, bit) = written_bit(key);
        self.written_bits[word].load(Ordering::Acquire) & bit != 0
    }

    fn listed(&self, names: &[String]) {
        let keys = names.iter().filter_map(|n| PipelineKey::from_file_name(n));
        let _ = self.at_opening.set(keys.collect());
    }

    fn wrote(&self, key: &PipelineKey) {
        if self
            .at_opening
            .get()
            .is_some_and(|listed| !listed.contains(key))
        {
            // A thread of the layer's own at idle priority (the rebuild's) never holds the lock
            // lookups take: it tells the key instead. The bit last: a lookup that sees it set
            // finds the key told or inserted.
            if crate::sync::at_idle_priority() {
                let _ = self.told.send(*key);
            } else {
                self.written.locked().keys.insert(*key);
            }
            let (word, bit) = written_bit(key);
            self.written_bits[word].fetch_or(bit, Ordering::Release);
        }
    }
}

/// An entry found whole: its name and its checked payload. Its file is closed as soon as it is
/// read: a run that held each found file open until its stamp grew the process's file table
/// while its threads looked entries up, and Linux waits for an RCU grace period at each growth
/// of a shared table (measured on RADV, ncnn at 2 threads: both application threads stalled
/// 5-28 ms a run).
#[derive(Clone)]
pub struct FoundEntry {
    name: EntryName,
    checked: Checked,
}

impl FoundEntry {
    fn new(name: EntryName, checked: Checked) -> FoundEntry {
        FoundEntry { name, checked }
    }

    /// Calls `f` with the payload, already checked (pipeline-cache data or the pipeline's
    /// binaries), as one slice.
    pub fn with_data<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        self.checked.payload.with_bytes(f)
    }

    /// Which backend's payload it holds.
    pub fn kind(&self) -> envelope::PayloadKind {
        self.checked.kind
    }

    /// Its name, for a stamp given later.
    pub fn into_name(self) -> EntryName {
        self.name
    }

    /// What its stamp, given later, needs: its name and the pieces it names.
    pub fn into_stamp(self) -> stamps::ToStamp {
        stamps::ToStamp {
            name: self.name,
            pieces: self.checked.pieces,
        }
    }

    /// [`FoundEntry::into_stamp`], keeping the entry (a found pipeline's path: its payload is
    /// not copied).
    pub fn to_stamp(&self) -> stamps::ToStamp {
        stamps::ToStamp {
            name: self.name,
            pieces: self.checked.pieces.clone(),
        }
    }

    /// Its name.
    pub fn name(&self) -> EntryName {
        self.name
    }

    /// Where it is NVIDIA cache data carrying the driver's dictionary: its framing, to hand the
    /// driver the data without it ([`nvidia_cache`]). Reads only the records' heads.
    pub fn nvidia_dictionary(&self) -> Option<nvidia_cache::Framing> {
        let cache = self.kind() == envelope::PayloadKind::Cache;
        cache
            .then(|| {
                let payload = &self.checked.payload;
                nvidia_cache::frame_parts(payload.len(), |range, out| {
                    payload.copy_range(range, out)
                })
                .ok()
            })
            .flatten()
    }

    /// Its data without the dictionary `framing` found in it.
    pub fn without_dictionary(&self, framing: &nvidia_cache::Framing) -> Vec<u8> {
        framing.without_dictionary_parts(|range, out| self.checked.payload.copy_range(range, out))
    }
}

/// The answer to a lookup.
pub enum Lookup {
    Missing,
    Found(FoundEntry),
    /// The entry failed a check: it was dropped and logged.
    Dropped(EntryError),
}

impl Store {
    /// Opens the store of one identity (see `open.rs` for what opening drops). `opened_at` is
    /// the run's opening time; entries are stamped just before it.
    pub fn open(
        root: &Path,
        title: &str,
        identity: Identity,
        max_bytes: u64,
        opened_at: SystemTime,
    ) -> Result<(Store, OpenReport), StoreError> {
        Store::open_then_bound(root, title, identity, max_bytes, opened_at, true)
    }

    /// As [`Store::open`], but with `bound_now` false the bound is left to the caller, who calls
    /// [`Store::keep_within_bound`] right after: the layer publishes the store to its pipelines
    /// once what must never be loaded is dropped, and stats every entry for the bound on its own
    /// opening thread meanwhile. Entries evicted while lookups run are simply missed.
    pub fn open_then_bound(
        root: &Path,
        title: &str,
        identity: Identity,
        max_bytes: u64,
        opened_at: SystemTime,
        bound_now: bool,
    ) -> Result<(Store, OpenReport), StoreError> {
        let title_dir = root.join(title);
        let dir = host_pipelines_dir(root, title).join(identity.dir_name());
        let store = Store {
            identity,
            title_dir,
            dir: dir.clone(),
            max_bytes,
            opened_at,
            stamps_taken: AtomicU64::new(0),
            written_bytes: AtomicU64::new(0),
            written_since_noted: AtomicU64::new(0),
            bounding: AtomicBool::new(false),
            dir_made: AtomicBool::new(false),
            dir_fd: files::HeldDir::default(),
            inline_once: Mutex::default(),
            shared_ahead: Mutex::default(),
            moved_out: Mutex::default(),
            pieces_always: AtomicBool::new(false),
            no_atime: AtomicBool::new(true),
            ahead: ahead::ReadAhead::default(),
            known: KnownEntries::default(),
            queued: queued::QueuedEntries::default(),
            chunking: Mutex::default(),
            pieces: pieces::Pieces::new(&dir),
            owed_stamps: Mutex::default(),
            record_floor: AtomicU64::new(0),
            driver_changed: AtomicBool::new(false),
            other_drivers: Mutex::default(),
            rebuild_taken: AtomicBool::new(false),
            use_order: stamps::UseOrders::default(),
            taken: Mutex::default(),
            waiting_left_untaken: AtomicBool::new(false),
            stopped_loads: OnceLock::new(),
        };
        let report = open::sweep(&store, bound_now)?;
        store.driver_changed.store(
            report.other_driver_drops > 0 || report.other_drivers_found > 0,
            Ordering::Relaxed,
        );
        Ok((store, report))
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Test only: every stage binary large enough becomes a piece, shared or not (the tests of
    /// pieces through a workload whose pipelines share no stage).
    pub fn keep_every_binary_as_a_piece(&self) {
        self.pieces_always.store(true, Ordering::Relaxed);
    }

    /// Cuts `cache` payloads into pieces as `chunking` says, instead of
    /// [`recipe::Chunking::CHOSEN`] (the tests of pieces on a driver whose payloads are small).
    pub fn set_chunking(&self, chunking: recipe::Chunking) {
        *self.chunking.locked() = chunking;
    }

    /// Whether opening dropped another driver's directory of this device: the driver changed
    /// since the last run (its entries were dropped; the title's record can rebuild them).
    pub fn driver_changed(&self) -> bool {
        self.driver_changed.load(Ordering::Relaxed)
    }

    /// Whether the opening left other drivers' directories for [`Store::drop_other_drivers`].
    pub fn has_other_drivers_to_drop(&self) -> bool {
        !self.other_drivers.locked().is_empty()
    }

    /// Drops the entries of the other drivers' directories the opening found (an opening on the
    /// opening thread leaves them, so that the application's first lookups do not wait on it).
    /// Returns how many entries were dropped. Ends early once `stop` is set (the device went):
    /// the rest stays for the next opening.
    pub fn drop_other_drivers(&self, stop: &AtomicBool) -> u64 {
        let dirs = std::mem::take(&mut *self.other_drivers.locked());
        let dropped: u64 = dirs
            .iter()
            .map(|d| dropping::drop_directory(d, "foreign", stop))
            .sum();
        if dropped > 0 {
            tracing::info!(
                other_driver_drops = dropped,
                "another driver's entries of this device dropped"
            );
        }
        dropped
    }

    /// True for the first caller only: the one device of this process (of those sharing this
    /// store) that rebuilds the title's record.
    pub fn take_the_rebuild(&self) -> bool {
        !self.rebuild_taken.swap(true, Ordering::AcqRel)
    }

    /// The bytes of checked pieces held in memory (`PIPEKEEP_PIECE_MEMORY`).
    pub fn set_piece_memory(&self, bytes: u64) {
        self.pieces.set_memory_limit(bytes);
    }

    /// The identity directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn entry_path(&self, key: &PipelineKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// Looks an entry up: taken from what was read ahead, else from the writer's queue where this
    /// process announced it and its file is not written yet, else by opening its file unless it
    /// is known to be missing; a damaged entry is dropped and logged.
    pub fn lookup(&self, key: &PipelineKey) -> Result<Lookup, StoreError> {
        let ahead = self.ahead.claim(key);
        // Asked before the file, and before what was read ahead of it: a queued entry leaves
        // the queue only once its file is in place, and one queued while an older file stands
        // (compiled again, or left waiting by an earlier process) is the newer.
        if let Some(checked) = self.queued.get(key) {
            return Ok(Lookup::Found(FoundEntry::new(key.file_name(), checked)));
        }
        if let Some(ahead::Ready::Bytes(checked)) = ahead {
            return Ok(Lookup::Found(FoundEntry::new(key.file_name(), checked)));
        }
        if !self.known.may_hold(key) {
            return Ok(Lookup::Missing);
        }
        self.read_entry(key)
    }

    /// Opens, reads and checks one entry, and the pieces it names. A file that is not a regular
    /// file, or larger than an entry may be, is dropped after at most one read of its first
    /// 64 KiB ([`files::read_whole`]), never waited on and never followed.
    fn read_entry(&self, key: &PipelineKey) -> Result<Lookup, StoreError> {
        self.read_entry_then(key, |_| ()).map(|(lookup, _)| lookup)
    }

    /// [`Store::read_entry`], asking `of_file` of the file read where the entry is found (before
    /// it is closed).
    fn read_entry_then<T>(
        &self,
        key: &PipelineKey,
        of_file: impl FnOnce(&File) -> T,
    ) -> Result<(Lookup, Option<T>), StoreError> {
        let name = key.file_name();
        let path = || self.dir.join(name);
        let (refused, file) = match files::read_entry_file(self.open_entry(&name)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Lookup::Missing, None)),
            Err(e) => return Err(StoreError::io("read", &path())(e)),
            Ok((Ok(bytes), file)) => match self.check(Arc::new(bytes), key) {
                Ok(checked) => {
                    let asked = file.as_ref().map(of_file);
                    return Ok((Lookup::Found(FoundEntry::new(name, checked)), asked));
                }
                Err(why) => (why, file),
            },
            Ok((Err(why), file)) => (why, file),
        };
        self.drop_entry(&path(), file.as_ref(), refused.reason());
        Ok((Lookup::Dropped(refused), None))
    }

    /// `key`'s entry file read back whole and checked (one found damaged is dropped, as a lookup
    /// drops it): its payload and kind, and its file's metadata (the file read, never through a
    /// link). `None` where it is gone or damaged.
    fn read_back(&self, key: &PipelineKey) -> Option<(FoundEntry, fs::Metadata)> {
        match self.read_entry_then(key, File::metadata) {
            Ok((Lookup::Found(entry), Some(Ok(meta)))) => Some((entry, meta)),
            _ => None,
        }
    }

    /// Checks an entry's bytes whole for `key`, with the pieces it names (carried to its stamp,
    /// which stamps them too).
    fn check(&self, file: Arc<Vec<u8>>, key: &PipelineKey) -> Result<Checked, EntryError> {
        payload::check(file, &self.identity, key, &self.pieces)
    }

    /// Opens an entry for reading (never through a link, never blocking), relative to the
    /// identity directory once it can be held.
    fn open_entry(&self, name: &str) -> io::Result<File> {
        files::open_for_reading(
            self.held_dir().as_deref(),
            &self.dir.join(name),
            &self.no_atime,
        )
    }

    /// Whether an entry the bound listed (over the whole title) is one of this identity's.
    fn holds(&self, listed: &bound::StampedEntry) -> bool {
        listed.path.parent() == Some(self.dir.as_path())
    }

    fn held_dir(&self) -> Option<std::sync::Arc<OwnedFd>> {
        self.dir_fd.get(&self.dir)
    }

    /// Removes an entry found damaged (where the path still names the file `read`) and logs why:
    /// one line an entry, from whoever removed it (a lookup and a reader ahead can meet the same
    /// damaged entry at once).
    fn drop_entry(&self, path: &Path, read: Option<&File>, reason: &str) {
        match files::remove_if_still(path, read) {
            Ok(true) => log_drop(path, reason),
            Ok(false) => {
                tracing::debug!(path = %path.display(), reason, "a damaged entry was dropped by another thread or replaced")
            }
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "could not remove a dropped entry");
                log_drop(path, reason);
            }
        }
    }

    /// The title's bound (`PIPEKEEP_MAX_BYTES`), of which the record has its share.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Whether the store keeps nothing (a bound of 0): a miss then has nothing to keep.
    pub fn keeps_nothing(&self) -> bool {
        self.max_bytes == 0
    }

    /// Makes the identity directory before an entry is written into it: once a run, and again
    /// where it was removed since (`pipekeep clear` beside the running application, a user's
    /// `rm -r`): one `stat` a write, against a run whose every later write was skipped.
    fn make_dir(&self) -> Result<(), StoreError> {
        let made = self.dir_made.load(Ordering::Acquire);
        if made && self.dir.is_dir() {
            return Ok(());
        }
        fs::create_dir_all(&self.dir).map_err(StoreError::io("create", &self.dir))?;
        if made {
            self.dir_fd.forget();
            self.pieces.forget_dir();
            tracing::info!(dir = %self.dir.display(), "the store's directory was removed while this process ran; made again");
        }
        self.dir_made.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether the entry `name` on disk names a piece (directly or through a list) whose file is
    /// the file `link` names (the same device and inode): for a test hook, a piece file that
    /// stops the driver.
    pub fn entry_names_piece_file(&self, name: &EntryName, link: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(target) = fs::metadata(link) else {
            return false;
        };
        let Ok(bytes) = files::read_at_most(&self.dir.join(name), files::ENTRY_FILE_LIMIT) else {
            return false;
        };
        let named = envelope::listed_parts(&bytes).map_or(Vec::new(), |(_, p)| p);
        let listed: Vec<_> = named
            .iter()
            .flat_map(|n| self.pieces.listed_by(n))
            .collect();
        named.iter().chain(&listed).any(|piece| {
            fs::symlink_metadata(self.pieces.path(piece))
                .is_ok_and(|m| m.dev() == target.dev() && m.ino() == target.ino())
        })
    }

    /// Holds this thread's loading marker on an entry while the driver loads it.
    pub fn hold_marker(&self, found: &FoundEntry) -> LoadingMarker {
        LoadingMarker::hold(&self.dir, &found.name)
    }
}

#[cfg(test)]
mod tests;
