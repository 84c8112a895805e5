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
pub mod envelope;
pub mod files;
pub mod held;
pub mod identity;
pub mod inspect;
pub mod marker;
pub mod nvidia_cache;
mod open;
pub mod order;
pub mod payload;
pub mod pieces;
pub mod recipe;

use std::collections::HashSet;
use std::fs::{self, File};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use crate::key::{EntryName, PipelineKey};
use crate::sync::Unpoisoned;
pub use envelope::EntryError;
pub use identity::Identity;
pub use marker::LoadingMarker;
pub use open::{drop_directory, drop_set_aside, OpenReport, SET_ASIDE_SUFFIX};
pub use payload::Checked;

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

/// A file in an identity directory saying that its driver refused pipeline binaries another
/// process wrote: the layer's `auto` backend then takes `cache` for that identity.
pub const REFUSES_BINARIES: &str = "binaries-refused";

/// A file in an identity directory naming one entry (its file name and a newline) whose cache
/// data carries NVIDIA's dictionary: the layer hands that dictionary to the driver before a
/// device's first pipeline, since a driver that has compiled anything first refuses every entry
/// carrying a dictionary it does not hold.
pub const DICTIONARY_ENTRY: &str = "dictionary-entry";

/// The title's record (`<title>/record.foz`: every kept pipeline's create info, a Fossilize
/// database): the store's bound counts it, `replay::record` writes and reads it. Named here, so
/// that the store needs nothing of the replay.
pub const RECORD_FILE: &str = "record.foz";

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

/// The bytes written between two checks of the bound: a quarter of it, at most 1 GiB.
fn bound_step(max_bytes: u64) -> u64 {
    (max_bytes / 4).clamp(1, 1 << 30)
}

/// The most stage binaries [`Store`] remembers as written inline once (~100 bytes each); past
/// it the oldest are let go, and a later sharer of one stands inline too.
const INLINE_ONCE_HELD: usize = 1 << 16;

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
    bounding: AtomicBool,
    /// The identity directory exists (made at the first write, not at opening).
    dir_made: AtomicBool,
    /// The identity directory, held open once it exists: a lookup opens its entry relative to it.
    dir_fd: files::HeldDir,
    /// Stage binaries this process wrote inline, each with the entry that holds it: the next
    /// entry to carry one makes it a piece, and that entry is written again naming the piece.
    inline_once: Mutex<held::OldestFirst<recipe::PieceName, PipelineKey>>,
    /// Test only: every stage binary large enough is a piece, shared or not.
    pieces_always: AtomicBool,
    /// Entries are opened without updating their access time (whose update would dirty the inode
    /// at every warm lookup) until the kernel refuses it: only the files' owner may ask.
    no_atime: AtomicBool,
    ahead: ahead::ReadAhead,
    known: KnownEntries,
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
    /// The pieces each entry found with pieces names, until its stamp stamps them.
    named_pieces: Mutex<std::collections::HashMap<PipelineKey, Vec<(recipe::PieceName, bool)>>>,
    /// Entries this run found whose stamps wait in the layer's writer queue ([`Store::owe_stamp`]):
    /// a bound pass gives them first, or it would take this run's first used entries for the
    /// last run's and evict them before what this run wrote after them (the boot lost).
    owed_stamps: Mutex<std::collections::HashMap<PipelineKey, (EntryName, SystemTime)>>,
    /// The bytes of the title's record where its compaction could not bring it within its share
    /// ([`Store::record_past_its_share`]): the bound takes them from the entries' room.
    record_floor: AtomicU64,
    /// The last run's order of use, and this run's (`order.rs`).
    use_order: UseOrders,
}

/// What [`Store::remember_use_order`] needs: the order the last run left, this run's uses with
/// their stamps, and the entries the bound last saw.
#[derive(Debug, Default)]
struct UseOrders {
    /// Read once, by the first who asks (the opening thread, to read ahead; or the run's end).
    earlier: OnceLock<Vec<PipelineKey>>,
    /// Every entry found or written, with its stamp (taken when it was used).
    used: Mutex<Vec<(SystemTime, PipelineKey)>>,
    /// This identity's entries as the bound last listed them.
    live: Mutex<Option<HashSet<PipelineKey>>>,
}

/// The entries this store may hold: those its directory listed at opening and those this run
/// wrote since. A key in neither is missing without an `open`: on a cold run a failing open
/// waits on the directory's lock behind the writer's creates (1 ms stalls, 150 us a pipeline
/// measured on RADV), and the listing is taken at opening anyway. An entry another process
/// writes during this run is found from the next run on.
#[derive(Debug, Default)]
struct KnownEntries {
    /// `None` until the opening has listed the directory (or when it could not): every lookup
    /// then opens.
    at_opening: OnceLock<HashSet<PipelineKey>>,
    written: Mutex<HashSet<PipelineKey>>,
}

impl KnownEntries {
    fn may_hold(&self, key: &PipelineKey) -> bool {
        match self.at_opening.get() {
            None => true,
            Some(listed) if listed.contains(key) => true,
            Some(_) => self.written.locked().contains(key),
        }
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
            self.written.locked().insert(*key);
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

    /// Its name.
    pub fn name(&self) -> EntryName {
        self.name
    }

    /// Where it is NVIDIA cache data carrying the driver's dictionary: its framing, to hand the
    /// driver the data without it ([`nvidia_cache`]). Reads only the records' heads.
    pub fn nvidia_dictionary(&self) -> Option<nvidia_cache::Framing> {
        let cache = self.kind() == envelope::PayloadKind::Cache;
        cache
            .then(|| nvidia_cache::frame(&self.checked.payload).ok())
            .flatten()
    }

    /// Its data without the dictionary `framing` found in it.
    pub fn without_dictionary(&self, framing: &nvidia_cache::Framing) -> Vec<u8> {
        framing.without_dictionary(&self.checked.payload)
    }
}

/// What reading one entry ahead gave.
enum ReadOne {
    /// Checked whole, its room reserved.
    Read(FoundEntry, u64),
    /// Claimed first, or damaged: nothing to hold.
    Skipped,
    Stopped,
}

/// The order in which [`Store::read_ahead`] reads entries.
pub enum AheadOrder<'a> {
    /// The last run's order of use (newest stamp first), from the bound's listing where it has
    /// just listed the title (else the directory listed and every entry stat'ed here).
    LastUse(Option<Vec<bound::StampedEntry>>),
    /// The order the last run left in its `use-order` file ([`Store::remembered_use_order`]):
    /// reading starts at opening, before any listing or stat.
    Remembered(&'a [PipelineKey]),
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
            bounding: AtomicBool::new(false),
            dir_made: AtomicBool::new(false),
            dir_fd: files::HeldDir::default(),
            inline_once: Mutex::default(),
            pieces_always: AtomicBool::new(false),
            no_atime: AtomicBool::new(true),
            ahead: ahead::ReadAhead::default(),
            known: KnownEntries::default(),
            chunking: Mutex::default(),
            pieces: pieces::Pieces::new(&dir),
            named_pieces: Mutex::default(),
            owed_stamps: Mutex::default(),
            record_floor: AtomicU64::new(0),
            driver_changed: AtomicBool::new(false),
            other_drivers: Mutex::default(),
            rebuild_taken: AtomicBool::new(false),
            use_order: UseOrders::default(),
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
            .map(|d| open::drop_directory(d, "foreign", stop))
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

    /// Looks an entry up: taken from what was read ahead, else by opening its file unless it is
    /// known to be missing; a damaged entry is dropped and logged.
    pub fn lookup(&self, key: &PipelineKey) -> Result<Lookup, StoreError> {
        if let Some(ahead::Ready::Bytes(checked)) = self.ahead.claim(key) {
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
        let name = key.file_name();
        let path = || self.dir.join(name);
        let (refused, file) = match files::read_entry_file(self.open_entry(&name)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Lookup::Missing),
            Err(e) => return Err(StoreError::io("read", &path())(e)),
            Ok((Ok(bytes), file)) => match self.check(Arc::new(bytes), key) {
                Ok(checked) => return Ok(Lookup::Found(FoundEntry::new(name, checked))),
                Err(why) => (why, file),
            },
            Ok((Err(why), file)) => (why, file),
        };
        self.drop_entry(&path(), file.as_ref(), refused.reason());
        Ok(Lookup::Dropped(refused))
    }

    /// Checks an entry's bytes whole for `key`, with the pieces it names (remembered until the
    /// entry's stamp, which stamps them too).
    fn check(&self, file: Arc<Vec<u8>>, key: &PipelineKey) -> Result<Checked, EntryError> {
        let (checked, pieces) = payload::check(file, &self.identity, key, &self.pieces)?;
        if !pieces.is_empty() {
            self.named_pieces.locked().insert(*key, pieces);
        }
        Ok(checked)
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

    /// The next stamp: just before the opening, one microsecond earlier for each one taken.
    pub fn next_stamp(&self) -> SystemTime {
        let n = self.stamps_taken.fetch_add(1, Ordering::Relaxed) + 1;
        self.opened_at
            .checked_sub(Duration::from_micros(n))
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    /// Stamps an entry this run found.
    pub fn stamp(&self, found: FoundEntry) {
        self.stamp_found(&found.into_name(), self.next_stamp());
    }

    /// Notes that a found entry's stamp, taken now, is queued to be given later
    /// ([`Store::give_owed_stamp`]): a bound pass meanwhile gives it first.
    pub fn owe_stamp(&self, name: &EntryName, stamp: SystemTime) {
        if let Some(key) = PipelineKey::from_file_name(name) {
            self.owed_stamps.locked().insert(key, (*name, stamp));
        }
    }

    /// Gives a stamp noted by [`Store::owe_stamp`], unless a bound pass gave it already.
    pub fn give_owed_stamp(&self, name: &EntryName, stamp: SystemTime) {
        let owed = PipelineKey::from_file_name(name)
            .is_some_and(|key| self.owed_stamps.locked().remove(&key).is_some());
        if owed {
            self.stamp_found(name, stamp);
        }
    }

    /// Gives every stamp still owed (before a bound pass lists the entries).
    fn give_owed_stamps(&self) {
        let owed = std::mem::take(&mut *self.owed_stamps.locked());
        let mut owed: Vec<_> = owed.into_values().collect();
        // The newest first, as the run took them.
        owed.sort_by_key(|(_, stamp)| std::cmp::Reverse(*stamp));
        for (name, stamp) in owed {
            self.stamp_found(&name, stamp);
        }
    }

    /// Stamps a found entry, by its name, with a stamp taken when it was used (the layer's
    /// writer thread stamps later, off the application's thread, in the run's order of use). An
    /// entry gone since is not stamped.
    pub fn stamp_found(&self, name: &EntryName, stamp: SystemTime) {
        let key = PipelineKey::from_file_name(name);
        // Its pieces first: the bound lists entries before pieces, so whoever sees the entry's
        // new stamp sees its pieces' too.
        let pieces = key.and_then(|key| self.named_pieces.locked().remove(&key));
        if let Some(pieces) = pieces {
            self.pieces.stamp_first(&pieces, stamp);
        }
        match self.stamp_by_name(name, stamp) {
            Ok(()) => key.into_iter().for_each(|key| self.used(key, stamp)),
            Err(e) => {
                tracing::debug!(dir = %self.dir.display(), error = %e, "could not stamp an entry")
            }
        }
    }

    /// Notes an entry this run found or wrote, with its stamp, for the run's use order.
    fn used(&self, key: PipelineKey, stamp: SystemTime) {
        let mut used = self.use_order.used.locked();
        if used.len() < order::MOST_KEYS {
            used.push((stamp, key));
        }
    }

    /// The order of use the last run left in [`order::USE_ORDER`] (empty where there is none).
    /// A damaged file is dropped with one line: reading ahead then follows the bound's listing.
    pub fn remembered_use_order(&self) -> &[PipelineKey] {
        self.use_order.earlier.get_or_init(|| {
            match order::read(&self.dir.join(order::USE_ORDER)) {
                Ok(keys) => keys.unwrap_or_default(),
                Err(order::ReadError::Io { path, source }) => {
                    tracing::debug!(path = %path.display(), error = %source, "the use order cannot be read");
                    Vec::new()
                }
                Err(order::ReadError::Damaged { path, source }) => {
                    tracing::warn!(path = %path.display(), error = %source, "the use order is damaged; dropped (this run reads ahead in the stamps' order)");
                    let _ = fs::remove_file(&path);
                    Vec::new()
                }
            }
        })
    }

    /// A run that loaded entries and ended whole clears the blames of earlier stopped loads: the
    /// second blame that drops a shared piece is for a crash loop (two stopped loads in a row),
    /// never for two kills on a loading screen months apart.
    pub fn forget_blamed_pieces(&self) {
        if let Err(e) = files::remove_if_present(&self.dir.join(BLAMED_PIECES)) {
            tracing::debug!(dir = %self.dir.display(), error = %e, "the note of blamed pieces stays");
        }
    }

    /// Writes this run's order of use into [`order::USE_ORDER`] (through a temporary file, its
    /// lock and a rename, as an entry): what it found or wrote, first used first, then the rest
    /// of the last run's order. Nothing is written where the order is unchanged or the run used
    /// nothing. Called at the run's end, once its stamps are written.
    pub fn remember_use_order(&self) -> Result<(), StoreError> {
        let mut used = std::mem::take(&mut *self.use_order.used.locked());
        if used.is_empty() {
            return Ok(());
        }
        // The newest stamp was taken first.
        used.sort_by_key(|u| std::cmp::Reverse(u.0));
        let used: Vec<PipelineKey> = used.into_iter().map(|u| u.1).collect();
        let earlier = self.remembered_use_order();
        let now = order::merged(&used, earlier, self.use_order.live.locked().as_ref());
        if now == earlier {
            return Ok(());
        }
        self.make_dir()?;
        let path = self.dir.join(order::USE_ORDER);
        files::write_atomically(&path, &order::encode(&now), SystemTime::now()).map(|_| ())
    }

    /// Sets an entry's modification time by its name, relative to the held directory: one
    /// system call where an open, a time update and a close would be three.
    /// Never sets back a newer stamp (a process that opened later found it too).
    fn stamp_by_name(&self, name: &str, stamp: SystemTime) -> io::Result<()> {
        files::stamp_forward(self.held_dir().as_deref(), &self.dir.join(name), stamp).map(|_| ())
    }

    /// Reads ahead the entries the last run used, first used first, holding at most `window`
    /// bytes not yet taken, until every one is read, `stop` is set (then
    /// [`Store::wake_readers_to_stop`]), or [`Store::stop_reading_ahead`] is called.
    /// Run on a thread of the caller's own, after the opening; `readers` threads read (one per
    /// four cores suits a store of large entries, whose hashing one thread cannot keep ahead of
    /// several application threads).
    ///
    /// `order`: the last run's use order where it left one (entries the opening did not list
    /// are skipped unread), else the title's entries as the bound just listed them, if it did
    /// (this store's are read from it instead of listing and stat-ing the directory again).
    pub fn read_ahead(
        &self,
        order: AheadOrder<'_>,
        window: u64,
        readers: usize,
        stop: &AtomicBool,
    ) -> ahead::AheadReport {
        // What to read, in order: each entry's key, and its size where the listing gave it.
        let entries: Vec<(PipelineKey, u64)> = match order {
            AheadOrder::LastUse(listed) => {
                let mut entries = match listed {
                    Some(mut all) => {
                        all.retain(|e| self.holds(e));
                        all
                    }
                    None => bound::entries_in(&self.dir),
                };
                entries.sort_by_key(|e| std::cmp::Reverse(e.stamp));
                entries
                    .iter()
                    .filter_map(|e| Some((e.key()?, e.bytes)))
                    .collect()
            }
            // Sizes unknown until read: each reader's entry is counted once it is read, so the
            // window is exceeded by at most the entries the readers are reading.
            AheadOrder::Remembered(keys) => keys
                .iter()
                .filter(|k| self.known.may_hold(k))
                .map(|k| (*k, 0))
                .collect(),
        };
        let next = AtomicU64::new(0);
        let read_some = || {
            let mut report = ahead::AheadReport::default();
            while let Some(&(key, bytes)) =
                entries.get(next.fetch_add(1, Ordering::Relaxed) as usize)
            {
                match self.read_one_ahead(key, bytes, window, stop, &mut report) {
                    ReadOne::Stopped => break,
                    ReadOne::Skipped => {}
                    ReadOne::Read(found, reserved) => {
                        self.hold(key, found, reserved, &mut report);
                    }
                }
            }
            report
        };
        let report = std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..readers.max(1))
                .map(|_| scope.spawn(crate::sync::logging_as_here(read_some)))
                .collect();
            let mut report = read_some();
            for helper in helpers {
                if let Ok(r) = helper.join() {
                    report.held += r.held;
                    report.held_bytes += r.held_bytes;
                    report.claimed_first += r.claimed_first;
                }
            }
            report
        });
        self.ahead.end();
        report
    }

    /// Reads and checks one entry ahead, its room in the window reserved, unless a lookup claimed
    /// it or reading ahead is stopped.
    fn read_one_ahead(
        &self,
        key: PipelineKey,
        bytes: u64,
        window: u64,
        stop: &AtomicBool,
        report: &mut ahead::AheadReport,
    ) -> ReadOne {
        match self.ahead.reserve(&key, bytes, window, stop) {
            ahead::Reserve::Read => {}
            ahead::Reserve::Claimed => {
                report.claimed_first += 1;
                return ReadOne::Skipped;
            }
            ahead::Reserve::Stopped => return ReadOne::Stopped,
        }
        // A damaged entry is dropped and logged here as its lookup would have done.
        match self.read_entry(&key) {
            Ok(Lookup::Found(found)) => ReadOne::Read(found, bytes),
            _ => {
                self.ahead.offer(key, bytes, None);
                ReadOne::Skipped
            }
        }
    }

    /// Holds an entry read ahead, as its bytes.
    fn hold(
        &self,
        key: PipelineKey,
        found: FoundEntry,
        reserved: u64,
        report: &mut ahead::AheadReport,
    ) {
        let len = found.checked.payload.file_len() as u64;
        if self
            .ahead
            .offer_ready(key, reserved, Some(ahead::Ready::Bytes(found.checked)))
        {
            report.held += 1;
            report.held_bytes += len;
        } else {
            report.claimed_first += 1;
        }
    }

    /// Ends reading ahead and lets go of what it holds (the last device of the store is gone).
    pub fn stop_reading_ahead(&self) {
        self.ahead.stop();
    }

    /// Wakes the readers waiting for room, to see the stop flag their caller just set. What they
    /// hold still serves lookups (another device may share the store).
    pub fn wake_readers_to_stop(&self) {
        self.ahead.wake_readers();
    }

    /// Whether reading ahead has read all it will (or was stopped).
    pub fn reading_ahead_ended(&self) -> bool {
        self.ahead.has_ended()
    }

    /// Nothing is read ahead for this store: lookups take no lock for it.
    pub fn read_nothing_ahead(&self) {
        self.ahead.end();
    }

    /// Writes an entry of pipeline-cache data whole, stamped now; skipped when another writer
    /// holds it or the bound is 0.
    pub fn write(&self, key: &PipelineKey, data: &[u8]) -> Result<files::Written, StoreError> {
        self.write_stamped(key, data, self.next_stamp())
    }

    /// Writes an entry whole with a stamp taken earlier (when the pipeline was built), so that a
    /// write done later, off the application's thread, keeps the run's order of use.
    pub fn write_stamped(
        &self,
        key: &PipelineKey,
        data: &[u8],
        stamp: SystemTime,
    ) -> Result<files::Written, StoreError> {
        self.will_write(key);
        self.write_announced(key, envelope::PayloadKind::Cache, data, stamp)
    }

    /// The title's record, compacted as far as it goes, still holds `bytes` past its share (its
    /// configurations alone, in a bound of a few KiB): the bound passes of this process count it
    /// whole, so that the title stays within its bound.
    pub fn record_past_its_share(&self, bytes: u64) {
        self.record_floor.store(bytes, Ordering::Release);
    }

    /// The title's bound (`PIPEKEEP_MAX_BYTES`), of which the record has its share.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Whether the store keeps nothing (a bound of 0): a miss then has nothing to keep.
    pub fn keeps_nothing(&self) -> bool {
        self.max_bytes == 0
    }

    /// Tells the store that `key`'s entry is about to be written (by a queue, later), so that
    /// lookups open it from now on. Called on the thread that queues the write: the writer
    /// thread, at idle priority, then takes no lock that lookups take.
    pub fn will_write(&self, key: &PipelineKey) {
        if self.max_bytes > 0 {
            self.known.wrote(key);
        }
    }

    /// [`Store::write_stamped`] for a key already given to [`Store::will_write`].
    pub fn write_announced(
        &self,
        key: &PipelineKey,
        kind: envelope::PayloadKind,
        data: &[u8],
        stamp: SystemTime,
    ) -> Result<files::Written, StoreError> {
        if self.max_bytes == 0 {
            return Ok(files::Written::Skipped);
        }
        self.make_dir()?;
        let chunking = *self.chunking.locked();
        // A stage binary is a piece once a second entry carries it (or it is kept already; one
        // the entry carries twice the recipe makes a piece itself); the first entry to carry it,
        // remembered as it is planned (one lock for the question and the answer), is then
        // written again naming the piece, by whichever of the two writers finds the other's
        // file done. A stage shared with an entry of an earlier run or another process stands
        // inline once more: bytes twice, never wrong ones.
        let first_holders = std::cell::RefCell::new(Vec::new());
        let kept_inline = std::cell::RefCell::new(Vec::new());
        let shared = |name: &recipe::PieceName| {
            if self.pieces_always.load(Ordering::Relaxed) || self.pieces.is_kept(name) {
                return true;
            }
            let mut once = self.inline_once.locked();
            match once.get(name) {
                Some(holder) if holder != key => {
                    first_holders.borrow_mut().push(*holder);
                    true
                }
                _ => {
                    once.hold(*name, *key, 1, INLINE_ONCE_HELD);
                    kept_inline.borrow_mut().push(*name);
                    false
                }
            }
        };
        let planned = recipe::plan_with(kind, data, chunking, &shared);
        let names: Vec<recipe::PieceName> = planned
            .iter()
            .flat_map(|p| match p {
                recipe::Planned::Inline(_) => Vec::new(),
                recipe::Planned::Piece(name, _) => vec![*name],
                recipe::Planned::List { name, pieces, .. } => pieces
                    .iter()
                    .map(|(n, _)| *n)
                    .chain(std::iter::once(*name))
                    .collect(),
            })
            .collect();
        self.pieces.writing(&names);
        let written = self.write_planned(key, kind, &planned, stamp);
        self.pieces.written(&names);
        if written.is_ok() {
            let mut first_holders = first_holders.into_inner();
            // Another thread may have made a stage this entry keeps inline a piece while this
            // entry was being written (its writing this entry again found no file yet): this
            // thread writes it again instead.
            let now_a_piece = |name: &recipe::PieceName| self.pieces.touched_this_run(name);
            if kept_inline.into_inner().iter().any(now_a_piece) {
                first_holders.push(*key);
            }
            for holder in first_holders {
                self.write_again_naming_pieces(&holder);
            }
        }
        written
    }

    /// Writes `key`'s entry again (read back whole, with the stamp its file has), now that a
    /// stage binary it holds inline is a piece, so that the binary is kept once. An entry gone or
    /// damaged meanwhile is left.
    fn write_again_naming_pieces(&self, key: &PipelineKey) {
        let Ok(stamp) = fs::metadata(self.entry_path(key)).and_then(|m| m.modified()) else {
            return;
        };
        let Ok(Lookup::Found(entry)) = self.read_entry(key) else {
            return;
        };
        let payload = entry.with_data(|data| data.to_vec());
        if let Err(e) = self.write_announced(key, entry.kind(), &payload, stamp) {
            tracing::debug!(entry = %key.file_name(), error = %e, "could not write an entry again naming its shared binary");
        }
    }

    /// Keeps a planned payload's pieces and lists, then its entry.
    fn write_planned(
        &self,
        key: &PipelineKey,
        kind: envelope::PayloadKind,
        planned: &[recipe::Planned<'_>],
        stamp: SystemTime,
    ) -> Result<files::Written, StoreError> {
        // Every piece and list is kept before the entry naming it is; a list's pieces before it.
        let mut pieces_written = 0;
        for p in planned {
            match p {
                recipe::Planned::Inline(_) => {}
                recipe::Planned::Piece(name, bytes) => {
                    pieces_written += self.pieces.put_named(name, bytes, stamp)?;
                }
                recipe::Planned::List {
                    name,
                    bytes,
                    pieces,
                    ..
                } => {
                    for (piece, piece_bytes) in pieces {
                        pieces_written += self.pieces.put_named(piece, piece_bytes, stamp)?;
                    }
                    pieces_written += self.pieces.put_named(name, bytes, stamp)?;
                }
            }
        }
        let parts: Vec<recipe::Part<'_>> = planned.iter().map(recipe::Planned::part).collect();
        let bytes = envelope::encode_parts(&self.identity, key, kind, &parts);
        // Skipped means another writer holds it, and renames it in place soon.
        let written = files::write_atomically(&self.entry_path(key), &bytes, stamp)?;
        self.used(*key, stamp);
        if let files::Written::Whole(n) = written {
            let n = n + pieces_written;
            let before = self.written_bytes.fetch_add(n, Ordering::Relaxed);
            let step = bound_step(self.max_bytes);
            if before / step != (before + n) / step {
                self.keep_within_bound();
            }
        }
        Ok(written)
    }

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

    /// The keys of the identity directory's `most` oldest entries (by stamp: the last used in
    /// the last run's order of use), oldest first.
    pub fn entries_oldest_first(&self, most: usize) -> Vec<PipelineKey> {
        let mut listed = bound::entries_in(&self.dir);
        listed.sort_by_key(|e| e.stamp);
        listed
            .iter()
            .filter_map(|e| e.path.file_name()?.to_str())
            .filter_map(PipelineKey::from_file_name)
            .take(most)
            .collect()
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

    /// Brings the title within the bound, unless another thread is doing it now.
    pub fn keep_within_bound(&self) -> Option<bound::Bounded> {
        if self.bounding.swap(true, Ordering::Acquire) {
            return None;
        }
        /// Lets the next check of the bound run, even after a panic in this one.
        struct Release<'a>(&'a AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _release = Release(&self.bounding);
        let started = std::time::Instant::now();
        let report = self.bound_pieces_aware(&self.title_dir.join("host-pipelines"));
        if let Ok(bound::Bounded { report: r, kept }) = &report {
            let live = kept
                .iter()
                .filter(|e| self.holds(e))
                .filter_map(|e| e.key());
            *self.use_order.live.locked() = Some(live.collect());
            tracing::debug!(entries = r.entries, bytes = r.bytes, evicted = r.evicted, took_ms = %format_args!("{:.3}", started.elapsed().as_secs_f64() * 1e3), "bound checked");
        }
        report.map_err(|e| tracing::warn!("{e}")).ok()
    }

    /// Brings the title whose `host-pipelines/` is `host_dir` within the bound, keeping every
    /// piece an entry this process writes meanwhile names.
    pub(super) fn bound_pieces_aware(&self, host_dir: &Path) -> Result<bound::Bounded, StoreError> {
        self.give_owed_stamps();
        self.pieces.bound_begins();
        let in_use = |p: &Path| self.pieces.written_while_bounding(p);
        let floor = self.record_floor.load(Ordering::Acquire);
        let bounded = bound::keep_within_past_share(host_dir, self.max_bytes, floor, &in_use);
        self.pieces.bound_ends();
        bounded
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
