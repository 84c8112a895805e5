//! The layer's writer thread: entries the driver compiled are written off the application's
//! thread, because creating a file costs as much as compiling a small pipeline on some
//! filesystems (0.5 ms an entry on this project's VM disk against 0.23 ms a compile on RADV).
//! The thread starts at the first write, and is joined at `vkDestroyDevice`; an application that
//! exits without destroying its device has the queue written by the exit handler. Past
//! [`QUEUE_LIMIT`] bytes waiting, a write is done on the caller's thread instead, so the queue
//! never holds much memory. Each entry keeps the stamp it took when its pipeline was built.
//!
//! The thread also stamps the entries the run found: a stamp costs a metadata update, which a
//! warm run would otherwise pay on the application's thread for every pipeline. The thread is
//! woken when a batch of [`STAMP_BATCH`] stamps is full, once, not at every stamp after it (a
//! wake is a system call, and while every core is busy the idle-priority thread leaves the
//! stamps waiting); fewer wait until the next write or the end.
//!
//! The thread runs at the lowest priority (`SCHED_IDLE`, as Mesa's disk-cache queue does): it
//! takes only time no application thread wants, so a run that keeps every core busy building
//! pipelines is not slowed by its own bookkeeping. Whatever is still queued at `vkDestroyDevice`
//! is done by the thread destroying the device, at that thread's priority, beside the writer.
//! An application thread never waits on the queue's lock, which the idle thread also takes: it
//! tries it briefly, and otherwise writes or stamps inline.
//!
//! Even at idle priority the thread's writes slow the application's compiles where it runs
//! beside them (the test app's 600 pipelines at one thread on this project's 2-core VM, RADV:
//! 5-10% more time in the driver), so while the application builds pipelines (one began or ended
//! within [`QUIET`]) the thread leaves the queue until it holds [`PAUSE_LIMIT`] bytes or its
//! oldest entry has waited [`LONGEST_WAIT`]: entries are written in the application's pauses, and
//! at `vkDestroyDevice` or exit at the latest. The second bound is for a process that dies while
//! it builds (a crash inside a loading screen, a kill): it loses at most that long of compiles,
//! as with Mesa's own queue, not every entry of a stretch without a pause, wherever a core is
//! free for the thread. While the application's threads hold every core, the idle-priority
//! thread gets no time: entries then wait up to [`QUEUE_LIMIT`] (the application's threads write
//! past it), and a process that dies then loses what waits.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use super::activity::AppActivity;
use crate::key::{EntryName, PipelineKey};
use crate::replay::record::{pipeline_entries, AppState, DbEntry, PipelineRecord, RecordFile};
use crate::store::envelope::PayloadKind;
use crate::store::files::Written;
use crate::store::nvidia_cache::{self, DictionaryId, Framing, RECORD_HEAD};
use crate::store::{Store, StoreError};
use crate::sync::{Unpoisoned, UnpoisonedWait};

/// Bytes waiting past which writes are done on the caller's thread: the most memory the queue
/// holds while every core is busy and the idle-priority thread waits, besides the records of
/// NVIDIA's dictionaries its entries hold apart ([`Dictionaries`]: one a dictionary, 1.78 MB,
/// the last four).
const QUEUE_LIMIT: usize = 64 << 20;
/// Stamps whose queueing wakes the thread.
const STAMP_BATCH: usize = 64;
/// Stamps (a name and a time each) waiting past which one is given on the caller's thread: while
/// every core is busy the idle-priority thread waits, and a warm run of a few thousand pipelines
/// then queues them all rather than stamp on its own threads.
const STAMPS_LIMIT: usize = 1 << 16;
/// How long the application has built no pipeline before the thread takes its queue.
const QUIET: Duration = Duration::from_millis(50);
/// Bytes waiting past which the thread no longer waits for a pause: the entries of a few hundred
/// pipelines (NVIDIA's counted without their dictionary, which they hold apart). With a 32 MiB
/// wait, and NVIDIA's entries counted whole, ncnn cold at 16 threads on the H200 spent twice the
/// time keeping entries.
const PAUSE_LIMIT: usize = 8 << 20;
/// The longest a queued entry waits for a pause: past it the thread takes the queue (and works it
/// empty) while the application builds, so a process that dies while it builds loses at most
/// this long of compiles.
const LONGEST_WAIT: Duration = Duration::from_secs(1);
/// The longest the thread sleeps at once while it waits for a pause (a device being destroyed
/// joins it).
const NAP: Duration = Duration::from_millis(10);

struct Job {
    store: Arc<Store>,
    key: PipelineKey,
    kind: PayloadKind,
    data: Waiting,
    stamp: SystemTime,
    /// When it was made: the queue's first job says how long an entry has waited for a pause.
    queued: Instant,
}

impl Job {
    /// An entry stamped now and announced to the store (lookups open it from now on).
    fn announced(store: Arc<Store>, key: PipelineKey, kind: PayloadKind, data: Waiting) -> Job {
        let stamp = store.next_stamp();
        store.will_write(&key);
        Job {
            store,
            key,
            kind,
            data,
            stamp,
            queued: Instant::now(),
        }
    }
}

/// An entry's bytes while it waits. NVIDIA's cache data carries the driver's 1.78 MB dictionary
/// in every pipeline it compiles after its first ~1,730: queued whole, 36 of them filled the
/// queue, and while the application's threads held every core (ncnn at 16 threads on the H200)
/// they then wrote each entry themselves, 8-11% of their creation time. Set apart, the record
/// is held once for all the entries that carry it, and each entry queues only its own bytes.
enum Waiting {
    Whole(Vec<u8>),
    Apart {
        without: Vec<u8>,
        framing: Framing,
        record: Arc<[u8]>,
    },
}

impl Waiting {
    /// The bytes the queue's bound counts: what this entry holds of its own.
    fn len(&self) -> usize {
        match self {
            Waiting::Whole(data) => data.len(),
            Waiting::Apart { without, .. } => without.len(),
        }
    }

    /// The data as the driver wrote it.
    fn whole(&self) -> std::borrow::Cow<'_, [u8]> {
        match self {
            Waiting::Whole(data) => data.into(),
            Waiting::Apart {
                without,
                framing,
                record,
            } => framing.put_back(without, record).into(),
        }
    }
}

/// The dictionaries' records entries waiting hold apart, each once: NVIDIA's driver holds one at
/// a time, so a run sees one or two; the last [`Dictionaries::KEPT`] new ones are kept, for the
/// writer's life. A dictionary is known by its record's hash and length, as the driver names it
/// (and as the layer hands it over: `dictionary.rs`); its record's head is compared too.
#[derive(Default)]
struct Dictionaries(Mutex<VecDeque<(DictionaryId, Arc<[u8]>)>>);

impl Dictionaries {
    const KEPT: usize = 4;

    /// `data`, to wait in the queue with its dictionary's record set apart, where it carries one.
    fn set_apart(&self, kind: PayloadKind, data: &[u8]) -> Option<Waiting> {
        if kind != PayloadKind::Cache {
            return None;
        }
        let framing = nvidia_cache::frame_bytes(data).ok()?;
        let fresh = framing.dictionary_record(data);
        let held = |all: &VecDeque<(DictionaryId, Arc<[u8]>)>| {
            all.iter()
                .find(|(id, record)| {
                    *id == framing.dictionary && record[..RECORD_HEAD] == fresh[..RECORD_HEAD]
                })
                .map(|(_, record)| record.clone())
        };
        let found = held(&self.0.locked());
        let record = found.unwrap_or_else(|| {
            // Copied outside the lock: the other application threads never wait on 1.78 MB.
            let record: Arc<[u8]> = fresh.into();
            let mut all = self.0.locked();
            held(&all).unwrap_or_else(|| {
                if all.len() == Self::KEPT {
                    all.pop_front();
                }
                all.push_back((framing.dictionary, record.clone()));
                record
            })
        });
        Some(Waiting::Apart {
            without: framing.without_dictionary_in(data),
            framing,
            record,
        })
    }
}

/// A compiled pipeline for the title's record.
struct RecordJob {
    file: Arc<RecordFile>,
    record: PipelineRecord,
    app: AppState,
    /// Its entry is left to a later rebuild (write-behind).
    pending: bool,
}

impl RecordJob {
    fn append(self) {
        append_records(vec![self]);
    }
}

/// Appends compiled pipelines to their titles' records, one file operation a title.
fn append_records(jobs: Vec<RecordJob>) {
    // A title's record, its entries, and how many of its jobs were owed (write-behind): each
    // owed job lands here, recordable or not.
    let mut by_file: Vec<(Arc<RecordFile>, Vec<DbEntry>, u64)> = Vec::new();
    for job in jobs {
        let owed = u64::from(job.pending);
        let entries = match pipeline_entries(&job.record, &job.app) {
            Ok(entries) => entries,
            Err(e) => {
                tracing::debug!(pipeline = %job.record.key.file_name(), error = %e, "a pipeline is not recorded");
                Vec::new()
            }
        };
        match by_file
            .iter_mut()
            .find(|(f, _, _)| Arc::ptr_eq(f, &job.file))
        {
            Some((_, all, owed_here)) => {
                all.extend(entries);
                *owed_here += owed;
            }
            None => by_file.push((job.file, entries, owed)),
        }
    }
    for (file, entries, owed) in by_file {
        if let Err(e) = file.append(entries, owed) {
            tracing::debug!(record = %file.path().display(), error = %e, "pipelines were not recorded");
        }
    }
}

/// A found entry, to be stamped.
struct Stamp {
    store: Arc<Store>,
    name: EntryName,
    stamp: SystemTime,
}

impl Stamp {
    fn give(self) {
        self.store.give_owed_stamp(&self.name, self.stamp);
    }
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    bytes: usize,
    stamps: Vec<Stamp>,
    records: Vec<RecordJob>,
    chores: Vec<Chore>,
    closing: bool,
    /// The thread was started (its handle is in `Writer::thread`, for the join).
    started: bool,
}

/// What the thread takes from the queue at once.
enum Work {
    Write(Job),
    Stamps(Vec<Stamp>),
    Records(Vec<RecordJob>),
    Chores(Vec<Chore>),
}

/// A small write of the layer's own besides entries (the note naming NVIDIA's dictionary), kept
/// off the pipeline's path as they are.
pub type Chore = Box<dyn FnOnce() + Send>;

/// What becomes of each write: counted by the caller (the compile watch's `written`).
pub type OnWritten = Arc<dyn Fn(Result<Written, StoreError>) + Send + Sync>;

pub struct Writer {
    shared: Arc<(Mutex<Queue>, Condvar)>,
    thread: Mutex<Option<JoinHandle<()>>>,
    on_written: OnWritten,
    /// The application's pipeline building, which the thread waits out (none: it never waits).
    building: Option<Arc<AppActivity>>,
    dictionaries: Dictionaries,
}

impl Writer {
    pub fn new(on_written: OnWritten, building: Option<Arc<AppActivity>>) -> Writer {
        Writer {
            shared: Arc::default(),
            thread: Mutex::new(None),
            on_written,
            building,
            dictionaries: Dictionaries::default(),
        }
    }

    /// Queues an entry, stamped now and announced to the store (lookups open it from now on);
    /// written on the caller's thread when the queue is full or no thread can be started.
    pub fn write(&self, store: Arc<Store>, key: PipelineKey, kind: PayloadKind, data: Vec<u8>) {
        // The data stays whole until the queue takes the job: one written here is written as it is.
        let (waiting, whole) = match self.dictionaries.set_apart(kind, &data) {
            Some(apart) => (apart, Some(data)),
            None => (Waiting::Whole(data), None),
        };
        let job = Job::announced(store, key, kind, waiting);
        let len = job.data.len();
        let queued = self.enqueue(
            job,
            |q| q.bytes + len <= QUEUE_LIMIT,
            |q, job| {
                q.bytes += len;
                q.jobs.push_back(job);
                true
            },
        );
        if let Some(mut job) = queued {
            if let Some(whole) = whole {
                job.data = Waiting::Whole(whole);
            }
            (self.on_written)(run(&job));
        }
    }

    /// Writes an entry on the caller's thread (a background thread of the layer's own), stamped
    /// now.
    pub fn write_here(
        &self,
        store: Arc<Store>,
        key: PipelineKey,
        kind: PayloadKind,
        data: Vec<u8>,
    ) {
        (self.on_written)(run(&Job::announced(store, key, kind, Waiting::Whole(data))));
    }

    /// Queues the stamp of a found entry, taken now (the writer gives it later, keeping this
    /// moment's place in the run's order); given on the caller's thread when too many wait or
    /// no thread can be started.
    pub fn stamp(&self, store: Arc<Store>, name: EntryName) {
        let stamp = Stamp {
            stamp: store.next_stamp(),
            store,
            name,
        };
        stamp.store.owe_stamp(&stamp.name, stamp.stamp);
        let queued = self.enqueue(
            stamp,
            |q| q.stamps.len() < STAMPS_LIMIT,
            |q, stamp| {
                q.stamps.push(stamp);
                q.stamps.len() == STAMP_BATCH
            },
        );
        if let Some(stamp) = queued {
            stamp.give();
        }
    }

    /// Queues a compiled pipeline for the title's record; appended on the caller's thread when
    /// no thread can take it (never on a pipeline's path otherwise). `pending`: its entry is
    /// left to a later rebuild (write-behind), and the record is marked so.
    pub fn record(
        &self,
        file: Arc<RecordFile>,
        record: PipelineRecord,
        app: AppState,
        pending: bool,
    ) {
        let job = RecordJob {
            file,
            record,
            app,
            pending,
        };
        let queued = self.enqueue(
            job,
            |q| q.records.len() < STAMPS_LIMIT,
            |q, job| {
                q.records.push(job);
                false
            },
        );
        if let Some(job) = queued {
            job.append();
        }
    }

    /// Queues `chore` for the thread; done on the caller's thread when no thread can take it.
    pub fn later(&self, chore: Chore) {
        let queued = self.enqueue(
            chore,
            |q| q.chores.len() < STAMPS_LIMIT,
            |q, chore| {
                q.chores.push(chore);
                true
            },
        );
        if let Some(chore) = queued {
            chore();
        }
    }

    /// Puts `item` in the queue with `push` (which says whether to wake the thread) when the
    /// queue is open, `fits` and a thread runs; otherwise gives it back, to be done here.
    fn enqueue<T>(
        &self,
        item: T,
        fits: impl FnOnce(&Queue) -> bool,
        push: impl FnOnce(&mut Queue, T) -> bool,
    ) -> Option<T> {
        let (lock, ready) = &*self.shared;
        let Some(mut q) = lock_unless_held_long(lock) else {
            return Some(item);
        };
        if q.closing || !fits(&q) || !self.ensure_thread(&mut q) {
            return Some(item);
        }
        if push(&mut q, item) {
            ready.notify_one();
        }
        None
    }

    /// Starts the thread at the first queued work (called with the queue locked).
    fn ensure_thread(&self, q: &mut Queue) -> bool {
        if q.started {
            return true;
        }
        let shared = self.shared.clone();
        let on_written = self.on_written.clone();
        let building = self.building.clone();
        match std::thread::Builder::new()
            .name("pipekeep-writer".into())
            .spawn(move || {
                super::idle::lower_this_threads_priority("writer");
                let thread = Drain::Thread(building.as_deref());
                super::guard::guarded("writer", || drain(&shared, &on_written, thread), || ())
            }) {
            Ok(handle) => {
                *self.thread.locked() = Some(handle);
                q.started = true;
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, "no writer thread; entries are written inline");
                false
            }
        }
    }

    /// Wakes the thread to take what waits (records and stamps short of a batch wait for the next
    /// write otherwise). For the layer's own threads: it takes the queue's lock.
    pub fn wake(&self) {
        let (lock, ready) = &*self.shared;
        let _queue = lock.locked();
        ready.notify_one();
    }

    /// Writes what is queued, on this thread beside the writer's (whose idle priority may keep
    /// it waiting behind a busy machine), and joins the thread (at `vkDestroyDevice`).
    pub fn finish(&self) {
        let waiting = {
            let (lock, ready) = &*self.shared;
            let mut q = lock.locked();
            q.closing = true;
            ready.notify_all();
            q.jobs.len()
        };
        // The device's builds are over, so its cores are free: many entries waiting (NVIDIA's,
        // held apart while every core built) are written by a few threads, not by this one alone
        // (ncnn at 16 threads on the H200: 3,115 entries, 3.3-3.8 s on one thread).
        std::thread::scope(|s| {
            for _ in 0..finishing_helpers(waiting) {
                let helper = std::thread::Builder::new()
                    .name("pipekeep-finish".into())
                    .spawn_scoped(s, || {
                        let write = || drain(&self.shared, &self.on_written, Drain::Here);
                        super::guard::guarded("writer", write, || ())
                    });
                if helper.is_err() {
                    break; // this thread writes the rest
                }
            }
            drain(&self.shared, &self.on_written, Drain::Here);
        });
        if let Some(handle) = self.thread.locked().take() {
            let _ = handle.join();
        }
    }

    /// Writes what is queued on this thread, without waiting for the writer thread (at exit,
    /// where the writer thread may be stopped at any moment).
    pub fn drain_here(&self) {
        self.shared.0.locked().closing = true;
        drain(&self.shared, &self.on_written, Drain::Here);
    }
}

/// Threads beside the finishing one that write what waits at the device's end: one for every
/// [`ENTRIES_A_HELPER`] entries, at most half the cores.
fn finishing_helpers(waiting: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (waiting / ENTRIES_A_HELPER).min((cores / 2).max(1))
}

/// Entries waiting at the device's end that are worth a thread more to write.
const ENTRIES_A_HELPER: usize = 64;

/// The queue's lock for an application thread, which must never wait on the idle-priority writer:
/// a writer preempted while it holds the lock would keep it until a core falls idle. The lock is
/// held for a push or a pop, so a short spin covers the other application threads; past it, the
/// caller does its work inline.
fn lock_unless_held_long(lock: &Mutex<Queue>) -> Option<std::sync::MutexGuard<'_, Queue>> {
    for _ in 0..LOCK_SPINS {
        match lock.try_lock() {
            Ok(q) => return Some(q),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => std::hint::spin_loop(),
        }
    }
    None
}

/// Tries at the queue's lock before an application thread does its work inline.
const LOCK_SPINS: usize = 256;

/// Writes a queued entry; its key was given to `Store::will_write` when it was queued (on the
/// application's thread), so this thread takes no lock that lookups take.
fn run(job: &Job) -> Result<Written, StoreError> {
    job.store
        .write_announced(&job.key, job.kind, &job.data.whole(), job.stamp)
}

/// Who drains the queue.
#[derive(Clone, Copy)]
enum Drain<'a> {
    /// The writer thread: until the queue is empty and closing, leaving it while the
    /// application builds (where it is given that activity) and the queue is under [`PAUSE_LIMIT`].
    Thread(Option<&'a AppActivity>),
    /// Another thread, at the end: until the queue is empty.
    Here,
}

impl Queue {
    fn has_work(&self) -> bool {
        !(self.jobs.is_empty()
            && self.stamps.is_empty()
            && self.records.is_empty()
            && self.chores.is_empty())
    }

    /// Whether the writer thread leaves its work for now, the application having built nothing
    /// for `quiet` (none: it is not watched): it builds, the queue has room to wait, and no entry
    /// has waited its longest; how long the thread then sleeps.
    fn waits_for_a_pause(&self, quiet: Option<Duration>) -> Option<Duration> {
        let quiet = quiet?;
        let room = self.bytes < PAUSE_LIMIT && self.stamps.len() < STAMPS_LIMIT / 2;
        let waited = self
            .jobs
            .front()
            .map_or(Duration::ZERO, |j| j.queued.elapsed());
        let in_time = waited < LONGEST_WAIT;
        (!self.closing && room && in_time && quiet < QUIET).then(|| {
            (QUIET - quiet)
                .min(NAP)
                .min(LONGEST_WAIT.saturating_sub(waited))
        })
    }
}

/// Takes jobs and stamps until the queue is empty and closing (or just empty, for
/// [`Drain::Here`]).
fn drain(shared: &(Mutex<Queue>, Condvar), on_written: &OnWritten, who: Drain<'_>) {
    let (lock, ready) = shared;
    // Once the thread takes the queue it works until the queue is empty: waiting again at every
    // job would leave it a job per nap while a busy application fills the queue past its bound.
    let mut working = false;
    loop {
        let work = {
            let mut q = lock.locked();
            loop {
                if let (Drain::Thread(building), false) = (who, working) {
                    let quiet = building.map(AppActivity::quiet_for);
                    if let Some(nap) = q.has_work().then(|| q.waits_for_a_pause(quiet)).flatten() {
                        drop(q);
                        std::thread::sleep(nap);
                        q = lock.locked();
                        continue;
                    }
                }
                working = q.has_work();
                if let Some(job) = q.jobs.pop_front() {
                    q.bytes -= job.data.len();
                    break Some(Work::Write(job));
                }
                if !q.stamps.is_empty() {
                    break Some(Work::Stamps(std::mem::take(&mut q.stamps)));
                }
                if !q.records.is_empty() {
                    break Some(Work::Records(std::mem::take(&mut q.records)));
                }
                if !q.chores.is_empty() {
                    break Some(Work::Chores(std::mem::take(&mut q.chores)));
                }
                if q.closing || matches!(who, Drain::Here) {
                    break None;
                }
                q = ready.wait_on(q);
            }
        };
        match work {
            Some(Work::Write(job)) => on_written(run(&job)),
            Some(Work::Stamps(stamps)) => stamps.into_iter().for_each(Stamp::give),
            Some(Work::Records(records)) => append_records(records),
            Some(Work::Chores(chores)) => chores.into_iter().for_each(|chore| chore()),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::envelope::tests::{cache_data, identity};
    use std::sync::mpsc;
    use std::time::Duration;

    fn open_store(dir: &std::path::Path) -> Arc<Store> {
        Arc::new(
            Store::open(dir, "t", identity(), 1 << 30, SystemTime::now())
                .unwrap()
                .0,
        )
    }

    #[test]
    fn the_thread_waits_for_a_pause_only_while_the_queue_has_room_and_is_open() {
        let building = Some(Duration::from_millis(5));
        let mut q = Queue::default();
        assert_eq!(
            q.waits_for_a_pause(building),
            Some(NAP),
            "building: it waits"
        );
        assert_eq!(
            q.waits_for_a_pause(Some(QUIET - Duration::from_millis(2))),
            Some(Duration::from_millis(2)),
            "no longer than the pause it needs"
        );
        assert_eq!(q.waits_for_a_pause(Some(QUIET)), None, "a pause: it works");
        assert_eq!(q.waits_for_a_pause(None), None, "not watched: it works");
        q.bytes = PAUSE_LIMIT;
        assert_eq!(
            q.waits_for_a_pause(building),
            None,
            "past its limit: it works"
        );
        q.bytes = 0;
        let dir = tempfile::tempdir().unwrap();
        let queued_ago = |ago: Duration| Job {
            queued: Instant::now().checked_sub(ago).unwrap(),
            ..Job::announced(
                open_store(dir.path()),
                PipelineKey {
                    spirv: [5; 16],
                    state: [6; 16],
                },
                PayloadKind::Cache,
                Waiting::Whole(Vec::new()),
            )
        };
        q.jobs.push_back(queued_ago(LONGEST_WAIT));
        assert_eq!(
            q.waits_for_a_pause(building),
            None,
            "an entry waited its longest: it works"
        );
        q.jobs[0] = queued_ago(LONGEST_WAIT - Duration::from_millis(500));
        let nap = q.waits_for_a_pause(building).expect("waited half a second");
        assert!(nap <= NAP, "{nap:?}");
        q.jobs.clear();
        q.closing = true;
        assert_eq!(q.waits_for_a_pause(building), None, "closing: it works");
    }

    /// While the application builds without a pause, an entry is still written once it has
    /// waited its longest, not at the device's end only (a process that dies while it builds
    /// loses at most that long of compiles).
    #[test]
    fn an_entry_waits_for_a_pause_no_longer_than_its_longest() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(dir.path());
        let building = Arc::new(AppActivity::default());
        let writer = Writer::new(Arc::new(|r| assert!(r.is_ok())), Some(building.clone()));
        let key = PipelineKey {
            spirv: [3; 16],
            state: [4; 16],
        };
        building.touch();
        let queued = Instant::now();
        writer.write(
            store.clone(),
            key,
            PayloadKind::Cache,
            cache_data(&identity(), &[3; 64]),
        );
        // The application keeps building; the entry is on disk well before the device's end.
        let deadline = queued + LONGEST_WAIT * 20;
        while !store.entry_path(&key).exists() && Instant::now() < deadline {
            building.touch();
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            store.entry_path(&key).exists(),
            "still waiting after {:?} of building",
            queued.elapsed()
        );
        writer.finish();
    }

    /// While the application builds, the device's end still writes everything queued.
    #[test]
    fn the_end_writes_what_waited_for_a_pause() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(dir.path());
        let building = Arc::new(AppActivity::default());
        let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = written.clone();
        let writer = Writer::new(
            Arc::new(move |r| {
                assert!(r.is_ok());
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }),
            Some(building.clone()),
        );
        let key_of = |n: u8| PipelineKey {
            spirv: [n; 16],
            state: [n; 16],
        };
        for n in 0..3u8 {
            building.touch();
            writer.write(
                store.clone(),
                key_of(n),
                PayloadKind::Cache,
                cache_data(&identity(), &[n; 64]),
            );
        }
        writer.finish();
        assert_eq!(written.load(std::sync::atomic::Ordering::SeqCst), 3);
        for n in 0..3u8 {
            let found = store.lookup(&key_of(n));
            assert!(matches!(found, Ok(crate::store::Lookup::Found(_))));
        }
    }

    /// Many entries waiting at the device's end (helpers beside the finishing thread) are all
    /// written.
    #[test]
    fn the_end_writes_many_waiting_entries_on_several_threads() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(dir.path());
        let building = Arc::new(AppActivity::default());
        let writer = Writer::new(Arc::new(|r| assert!(r.is_ok())), Some(building.clone()));
        let key_of = |n: u16| PipelineKey {
            spirv: [(n >> 8) as u8; 16],
            state: [n as u8; 16],
        };
        let count = (ENTRIES_A_HELPER * 3) as u16;
        for n in 0..count {
            building.touch();
            writer.write(
                store.clone(),
                key_of(n),
                PayloadKind::Cache,
                cache_data(&identity(), &[n as u8; 64]),
            );
        }
        assert!(finishing_helpers(count.into()) >= 1);
        writer.finish();
        for n in 0..count {
            let found = store.lookup(&key_of(n));
            assert!(matches!(found, Ok(crate::store::Lookup::Found(_))), "{n}");
        }
    }

    #[test]
    fn an_application_thread_never_waits_for_a_queue_lock_the_writer_holds() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(dir.path());
        let writer = Arc::new(Writer::new(Arc::new(|_| {}), None));
        let key = PipelineKey {
            spirv: [1; 16],
            state: [2; 16],
        };
        // As the idle-priority writer would, preempted while it holds the queue's lock.
        let held = writer.shared.0.lock().unwrap();
        let (done, finished) = mpsc::channel();
        {
            let (writer, store) = (writer.clone(), store.clone());
            std::thread::spawn(move || {
                let data = cache_data(&identity(), &[7; 64]);
                writer.write(store.clone(), key, PayloadKind::Cache, data);
                writer.stamp(store, key.file_name());
                done.send(()).unwrap();
            });
        }
        let returned = finished.recv_timeout(Duration::from_secs(20));
        drop(held);
        assert!(
            returned.is_ok(),
            "the application's thread waited for the lock"
        );
        assert!(
            store.entry_path(&key).exists(),
            "written on the application's thread instead"
        );
    }

    /// NVIDIA's cache data waits with its dictionary's record set apart, held once for every
    /// entry carrying it, and is written as the driver gave it, byte for byte.
    #[test]
    fn a_dictionary_waits_once_and_every_entry_is_written_whole() {
        use crate::store::nvidia_cache::tests::{dictionary_key, nvidia_cache, record};
        let dictionary = record(dictionary_key(), 42, &[9; 50_000]);
        let data =
            |n: u8| nvidia_cache(&[record([n; 16], n.into(), &[n; 300]), dictionary.clone()]);
        let dictionaries = Dictionaries::default();
        let waiting: Vec<Waiting> = (1..=3)
            .map(|n| {
                dictionaries
                    .set_apart(PayloadKind::Cache, &data(n))
                    .unwrap()
            })
            .collect();
        for (n, w) in (1..=3).zip(&waiting) {
            assert!(w.len() < 1_000, "only its own bytes wait: {}", w.len());
            assert_eq!(&*w.whole(), &data(n)[..]);
        }
        let records: Vec<&Arc<[u8]>> = waiting
            .iter()
            .map(|w| match w {
                Waiting::Apart { record, .. } => record,
                Waiting::Whole(_) => unreachable!(),
            })
            .collect();
        assert!(
            Arc::ptr_eq(records[0], records[2]),
            "the record is held once"
        );
        assert_eq!(dictionaries.0.locked().len(), 1);
        // Another dictionary of the same name and length but another head is its own.
        let mut other = dictionary.clone();
        other[0] ^= 1; // the driver's build, in both copies of the key
        other[28] ^= 1;
        let other_data = nvidia_cache(&[record([5; 16], 5, &[5; 300]), other]);
        let w = dictionaries
            .set_apart(PayloadKind::Cache, &other_data)
            .unwrap();
        assert_eq!(&*w.whole(), &other_data[..]);
        for new in 6..=9u64 {
            let d = record(dictionary_key(), new, &[1; 100]);
            dictionaries.set_apart(
                PayloadKind::Cache,
                &nvidia_cache(&[record([1; 16], 1, &[1; 30]), d]),
            );
        }
        assert_eq!(
            dictionaries.0.locked().len(),
            Dictionaries::KEPT,
            "the last few new ones"
        );
        assert!(dictionaries
            .set_apart(PayloadKind::Binaries, &data(4))
            .is_none());
        assert!(dictionaries
            .set_apart(PayloadKind::Cache, &cache_data(&identity(), &[7; 100]))
            .is_none());
    }
}
