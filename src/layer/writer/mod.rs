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
//! stamps waiting); fewer wait until the next write, the thread's look a second after its last
//! (in a pause), or the end; where that look finds the queue still empty, the thread sleeps until
//! the next thing queued, whatever it is, wakes it (an application that builds nothing more is
//! not woken once a second for ever, as Mesa's queue is not).
//!
//! The thread runs at the lowest priority (`SCHED_IDLE`, as Mesa's disk-cache queue does): it
//! takes only time no application thread wants, so a run that keeps every core busy building
//! pipelines is not slowed by its own bookkeeping. Whatever is still queued at `vkDestroyDevice`
//! is done by the thread destroying the device (and helpers), at that thread's priority; the
//! writer thread leaves the queue to them once it closes.
//! An application thread never waits on the queue's lock, which the idle thread also takes: it
//! tries it briefly, and otherwise hands its work over (`handover.rs`), taken into the queue by
//! the thread at its next look (a handed entry or chore wakes it, and anything handed wakes it
//! from its sleep) or by the device's end.
//!
//! Even at idle priority the thread's writes slow the application's compiles where it runs
//! beside them (the test app's 600 pipelines at one thread on this project's 2-core VM, RADV:
//! 5-10% more time in the driver), so while the application builds pipelines (one began or ended
//! within [`QUIET`]) the thread leaves the queue until it holds [`PAUSE_LIMIT`] bytes of the
//! process's own entries or the oldest of them has waited [`LONGEST_WAIT`]: entries are written in
//! the application's pauses, and at `vkDestroyDevice` or exit at the latest. The second bound is
//! for a process that dies while it builds (a crash inside a loading screen, a kill): it loses at
//! most that long of compiles, as with Mesa's own queue, not every entry of a stretch without a
//! pause, wherever a core is free for the thread. Where the application leaves half the cores
//! with no build of its own ([`AppActivity::leaves_cores_free`], on a machine of four cores or
//! more), the thread writes the process's own entries as they come, and with them whatever else
//! of its own waits: on the H200 the device's end of ncnn at 4 threads took 1-2 ms against 9-57
//! in the same calls (5-59 entries written there; up to 120 ms in others), and pygfx's at 4 left
//! none waiting (0-149 before). Not for stamps and the record alone (a later launch's found
//! entries): stamped beside ncnn's found pipelines at 4 threads, its later launches were ready at
//! 0.45-0.57x no layer's (median 0.55x) against 0.44-0.52x (0.47x). Earlier processes' entries
//! (taken from their waiting file) wait for a pause whatever their bytes or age: they are safe in
//! their file, and written while the application builds they only took its cores (unless they
//! fill the queue near [`QUEUE_LIMIT`], where the application's own would be written inline).
//! While the application's threads hold every core, the idle-priority thread gets no time:
//! entries then wait up to [`QUEUE_LIMIT`] (the application's threads write past it), and a
//! process that dies then loses what waits.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant, SystemTime};

use super::activity::AppActivity;
use crate::key::{EntryName, PipelineKey};
mod apart;
mod end;
mod handover;
mod queue;
mod records;

use crate::replay::record::{PipelineRecord, RecordApp, RecordFile};
use crate::store::envelope::PayloadKind;
use crate::store::files::Written;
use crate::store::nvidia_cache::Framing;
use crate::store::waiting::WaitingEntry;
use crate::store::{Queued, QueuedData, Store, StoreError, ToStamp};
use crate::sync::{AtOnce, Unpoisoned, UnpoisonedWait};
use apart::{Dictionaries, Waiting};
use handover::{Handed, Handover};
use queue::Queue;
use records::{append_records, RecordJob, RecordsDone};

/// Bytes waiting past which writes are done on the caller's thread: the most memory the queue
/// holds while every core is busy and the idle-priority thread waits, besides the records of
/// NVIDIA's dictionaries its entries hold apart ([`Dictionaries`]: one a dictionary, 1.78 MB,
/// the last four) and the files of entries earlier processes left waiting: their entries are
/// counted by their own bytes, but each holds its whole file until the last of them leaves the
/// queue (at most [`crate::store::waiting::MOST_BYTES`] past the bytes an opening takes), and
/// what application threads hand over while another holds the queue's lock
/// ([`handover::HANDED_BYTES_AT_MOST`] of entries, taken in whatever the queue holds).
const QUEUE_LIMIT: usize = 64 << 20;
/// Stamps whose queueing wakes the thread.
const STAMP_BATCH: usize = 64;
/// Stamps (a name and a time each) waiting past which one is given on the caller's thread: while
/// every core is busy the idle-priority thread waits, and a warm run of a few thousand pipelines
/// then queues them all rather than stamp on its own threads.
const STAMPS_LIMIT: usize = 1 << 16;
/// The record's pipelines the thread takes as one job while the application builds.
const RECORDS_A_JOB: usize = 64;
/// How long the application has built no pipeline before the thread takes its queue.
const QUIET: Duration = Duration::from_millis(50);
/// Bytes of the process's own entries waiting past which the thread no longer waits for a pause:
/// the entries of a few hundred pipelines (NVIDIA's counted without their dictionary, which they
/// hold apart). With a 32 MiB wait, and NVIDIA's entries counted whole, ncnn cold at 16 threads
/// on the H200 spent twice the time keeping entries.
const PAUSE_LIMIT: usize = 8 << 20;
/// The longest an entry of the process's own waits for a pause: past it the thread takes the queue
/// (and works its own work empty) while the application builds, so a process that dies while it
/// builds loses at most this long of compiles.
const LONGEST_WAIT: Duration = Duration::from_secs(1);
/// The longest the thread sleeps at once while it waits for a pause (a device being destroyed
/// joins it).
const NAP: Duration = Duration::from_millis(10);

struct Job {
    store: Arc<Store>,
    key: PipelineKey,
    kind: PayloadKind,
    /// The one strong hold on the entry's data, which a lookup finds through the store until
    /// this job is dropped (once written, or found needing no writing).
    data: Arc<Queued<Waiting>>,
    stamp: SystemTime,
    /// When it was made: the queue's first job says how long an entry has waited for a pause.
    queued: Instant,
    /// This process's pipeline, or one an earlier process left waiting.
    for_whom: WrittenFor,
}

impl Job {
    /// An entry stamped now and announced to the store (lookups find it from now on).
    fn announced(store: Arc<Store>, key: PipelineKey, kind: PayloadKind, data: Waiting) -> Job {
        let stamp = store.next_stamp();
        Job::announced_for(store, key, kind, data, (stamp, WrittenFor::Application))
    }

    /// [`Job::announced`] with the stamp its pipeline took (earlier), for whom it is written.
    fn announced_for(
        store: Arc<Store>,
        key: PipelineKey,
        kind: PayloadKind,
        data: Waiting,
        (stamp, for_whom): (SystemTime, WrittenFor),
    ) -> Job {
        let data = Queued::new(data);
        let shared: Arc<Queued<dyn QueuedData>> = data.clone();
        match for_whom {
            WrittenFor::Earlier => store.will_write_earlier(&key, kind, &shared),
            _ => store.will_write_queued(&key, kind, &shared),
        }
        Job {
            store,
            key,
            kind,
            data,
            stamp,
            queued: Instant::now(),
            for_whom,
        }
    }

    /// An earlier process's entry whose waiting file stays as it was
    /// ([`Store::keep_waiting_files_mostly_unwritten`]), which the bound dropped, or whose key this process
    /// queued again: nothing to write. Read from the data, with no lock a lookup takes.
    fn kept_where_it_waits(&self) -> bool {
        self.for_whom == WrittenFor::Earlier && self.data.passed_over()
    }
}

/// A found entry, to be stamped.
struct Stamp {
    store: Arc<Store>,
    of: StampOf,
    stamp: SystemTime,
}

/// Whose stamp: one the store notes as owed, or one this job carries (the writer held the
/// store's owed stamps when it was taken).
enum StampOf {
    Owed(EntryName),
    Carried(ToStamp),
}

impl Stamp {
    fn give(self) {
        match self.of {
            StampOf::Owed(name) => self.store.give_owed_stamp(&name, self.stamp),
            StampOf::Carried(entry) => self.store.stamp_found(&entry, self.stamp),
        }
    }
}

/// The queue, its thread's wake, and what is handed over to it.
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    handover: Handover,
    /// The writer thread, told by itself before its first look.
    thread: OnceLock<Thread>,
    /// The writer thread sleeps until something is queued ([`Shared::sleep_until_queued`]).
    asleep: AtomicBool,
    /// The writer thread's returns from its waits for work (the tests' count of its wakes).
    #[cfg(test)]
    wakes: std::sync::atomic::AtomicUsize,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            queue: Mutex::default(),
            ready: Condvar::new(),
            handover: Handover::new(),
            thread: OnceLock::new(),
            asleep: AtomicBool::new(false),
            #[cfg(test)]
            wakes: Default::default(),
        }
    }

    /// Wakes the writer thread where it sleeps until something is queued: called once something
    /// is, in the queue (its lock held or just let go) or handed over. Both sides of the flag are
    /// sequentially consistent: a thread handing over sees it set, or the writer sees what was
    /// handed over before it sleeps.
    fn wake_if_asleep(&self) {
        // The swap once the flag is seen: the threads queueing while the idle-priority writer
        // has not run yet unpark it once, not each.
        if self.asleep.load(SeqCst) && self.asleep.swap(false, SeqCst) {
            if let Some(thread) = self.thread.get() {
                thread.unpark();
            }
        }
    }

    /// The writer thread, its queue empty and nothing queued for the second it last waited,
    /// sleeps until something is queued ([`Shared::wake_if_asleep`]) or the queue closes (the
    /// device's end unparks it): an idle application's writer is not woken once a second.
    fn sleep_until_queued<'a>(&'a self, q: MutexGuard<'a, Queue>) -> MutexGuard<'a, Queue> {
        // Set under the queue's lock: whoever queues next, under it, sees the flag.
        self.asleep.store(true, SeqCst);
        // Handed over between the look and the flag: its hander may not have seen the flag.
        if !self.handover.waits() {
            drop(q);
            std::thread::park();
            self.asleep.store(false, SeqCst);
            self.count_wake();
            return self.queue.locked();
        }
        self.asleep.store(false, SeqCst);
        q
    }

    fn count_wake(&self) {
        #[cfg(test)]
        self.wakes.fetch_add(1, SeqCst);
    }
}

/// The writer thread's work under way, as the device's end finds it (its debug line).
#[derive(Clone, Copy, Debug)]
struct UnderWay {
    what: &'static str,
    /// Entries, stamps, the record's pipelines or chores taken.
    items: usize,
    since: Instant,
}

/// What the thread takes from the queue at once.
enum Work {
    Write(Job),
    Stamps(Vec<Stamp>),
    /// The record's pipelines, and whether the cores are free to make their documents.
    Records(Vec<RecordJob>, bool),
    Chores(Vec<Chore>),
}

impl Work {
    /// What it is, and how many items, for the device's end's debug line.
    fn under_way(&self) -> UnderWay {
        let (what, items) = match self {
            Work::Write(_) => ("entry", 1),
            Work::Stamps(stamps) => ("stamps", stamps.len()),
            Work::Records(records, _) => ("records", records.len()),
            Work::Chores(chores) => ("chores", chores.len()),
        };
        UnderWay {
            what,
            items,
            since: Instant::now(),
        }
    }
}

/// A small write of the layer's own besides entries (the note naming NVIDIA's dictionary), kept
/// off the pipeline's path as they are.
pub type Chore = Box<dyn FnOnce() + Send>;

/// What becomes of each write: counted by the caller (the compile watch's `written`, or
/// `rebuild_written` for the background rebuild's).
pub type OnWritten = Arc<dyn Fn(Result<Written, StoreError>, WrittenFor) + Send + Sync>;

/// Whose pipeline an entry written keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrittenFor {
    /// The application's: queued from its threads.
    Application,
    /// The background rebuild's, written on its own threads ([`Writer::write_here`]).
    Rebuild,
    /// An earlier process's, which its end left waiting ([`Writer::write_waiting`]).
    Earlier,
}

pub struct Writer {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    on_written: OnWritten,
    /// The application's pipeline building, which the thread waits out (none: it never waits).
    building: Option<Arc<AppActivity>>,
    dictionaries: Dictionaries,
}

impl Writer {
    pub fn new(on_written: OnWritten, building: Option<Arc<AppActivity>>) -> Writer {
        Writer {
            shared: Arc::new(Shared::new()),
            thread: Mutex::new(None),
            on_written,
            building,
            dictionaries: Dictionaries::default(),
        }
    }

    /// Queues an entry, stamped now and announced to the store (lookups open it from now on);
    /// written on the caller's thread when the queue is full or no thread can be started (or
    /// past the handover's limits, where another thread holds the queue).
    /// `framing`: NVIDIA's framing of cache data that carries its dictionary, which then waits
    /// apart ([`Dictionaries`]).
    pub fn write(
        &self,
        store: Arc<Store>,
        key: PipelineKey,
        kind: PayloadKind,
        data: Vec<u8>,
        framing: Option<Framing>,
    ) {
        // The background rebuild's threads are background threads already: a rebuild pass's
        // entries are in the store when it ends, and the next pass finds them instead of
        // compiling them again behind a writer a busy machine keeps waiting.
        if crate::layer::idle::on_rebuild_thread() {
            return self.write_here(store, key, kind, data);
        }
        // The data stays whole until the queue takes the job: one written here is written as it is.
        let (waiting, whole) = match framing {
            Some(framing) => (self.dictionaries.set_apart(&data, framing), Some(data)),
            None => (Waiting::Whole(data), None),
        };
        let job = Job::announced(store, key, kind, waiting);
        if let Some(job) = self.queue_job(job, true) {
            // Written from the data whole where the job holds it apart (its dictionary named
            // where the data carries the very bytes held); the job, whose data lookups find
            // meanwhile, goes once it is written.
            let known = job.data.known_piece();
            let written = match &whole {
                Some(whole) => job
                    .store
                    .write_announced_knowing(&job.key, job.kind, whole, known, job.stamp),
                None => run(&job),
            };
            (self.on_written)(written, WrittenFor::Application);
        }
    }

    /// Writes an entry on the caller's thread (the background rebuild's, a thread of the layer's
    /// own), stamped now, counted as the rebuild's.
    pub fn write_here(
        &self,
        store: Arc<Store>,
        key: PipelineKey,
        kind: PayloadKind,
        data: Vec<u8>,
    ) {
        // Written at once on this (idle-priority) thread: announced to the known entries alone,
        // not to the queued ones, whose lock lookups wait on.
        store.will_write(&key);
        let stamp = store.next_stamp();
        let written = store.write_announced(&key, kind, &data, stamp);
        (self.on_written)(written, WrittenFor::Rebuild);
    }

    /// Queues the entries earlier processes left waiting ([`crate::store::waiting`]), each with
    /// the stamp its pipeline took; lookups find them from now on. All go in under one hold of
    /// the queue's lock, which the store's opening waits for: taken before the writer thread
    /// starts, no idle-priority thread holds it then (one entry written here past a short spin
    /// made its file no longer one a short launch leaves as it was). Those the queue cannot take
    /// (full, or closing) are written here.
    pub fn write_waiting(&self, store: Arc<Store>, entries: Vec<WaitingEntry>) {
        if entries.is_empty() {
            return;
        }
        let jobs: Vec<Job> = entries
            .into_iter()
            .map(|entry| {
                let waiting = Waiting::Taken(entry.data);
                let whom = (entry.stamp, WrittenFor::Earlier);
                Job::announced_for(store.clone(), entry.key, entry.kind, waiting, whom)
            })
            .collect();
        let mut here = Vec::new();
        {
            let mut q = self.shared.queue.locked();
            let open = !q.closing && self.ensure_thread(&mut q);
            for job in jobs {
                if open && q.has_room_for(job.data.len()) {
                    q.push(job);
                } else {
                    here.push(job);
                }
            }
            self.shared.wake_if_asleep();
        }
        for job in here {
            (self.on_written)(run(&job), WrittenFor::Earlier);
        }
    }

    /// Puts an entry's job in the queue, within [`QUEUE_LIMIT`] (waking the thread where `wake`);
    /// gives it back where it is to be written here.
    fn queue_job(&self, job: Job, wake: bool) -> Option<Job> {
        let len = job.data.len();
        self.enqueue(
            job,
            (len, Handed::Job, wake),
            |q| q.has_room_for(len),
            |q, job| {
                q.push(job);
                wake
            },
        )
    }

    /// Queues the stamp of a found entry, taken now (the writer gives it later, keeping this
    /// moment's place in the run's order); given on the caller's thread when too many wait or
    /// no thread can be started (or past the handover's limits).
    pub fn stamp(&self, store: Arc<Store>, entry: ToStamp) {
        let stamp = store.next_stamp();
        let name = entry.name();
        let of = match store.owe_stamp(entry, stamp) {
            None => StampOf::Owed(name),
            Some(entry) => StampOf::Carried(entry),
        };
        let stamp = Stamp { store, of, stamp };
        let queued = self.enqueue(
            stamp,
            (0, Handed::Stamp, false),
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
    /// no thread can take it (never on a pipeline's path otherwise).
    pub fn record(&self, file: Arc<RecordFile>, record: PipelineRecord, app: Arc<RecordApp>) {
        let job = RecordJob { file, record, app };
        let queued = self.enqueue(
            job,
            (0, Handed::Record, false),
            |q| q.records.len() < STAMPS_LIMIT,
            |q, job| {
                q.records.push_back(job);
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
            (0, Handed::Chore, true),
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
    /// queue is open, `fits` and a thread runs; otherwise gives it back, to be done here. Where
    /// another thread holds the queue's lock it is handed over instead, within the handover's
    /// own limits (`handed`: its bytes of entries, what it is handed over as, and whether that
    /// wakes the thread, as `push` would), never waited for.
    fn enqueue<T>(
        &self,
        item: T,
        handed: (usize, fn(T) -> Handed, bool),
        fits: impl FnOnce(&Queue) -> bool,
        push: impl FnOnce(&mut Queue, T) -> bool,
    ) -> Option<T> {
        let Shared {
            queue: lock,
            ready,
            handover,
            ..
        } = &*self.shared;
        let Some(mut q) = lock.locked_at_once() else {
            let (bytes, wrap, wakes) = handed;
            let back = handover.hand(item, bytes, wrap);
            if back.is_none() {
                if wakes {
                    ready.notify_one();
                }
                self.shared.wake_if_asleep();
            }
            return back;
        };
        if q.closing || !fits(&q) || !self.ensure_thread(&mut q) {
            return Some(item);
        }
        if push(&mut q, item) {
            ready.notify_one();
        }
        self.shared.wake_if_asleep();
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
        // Told before the start, which other threads' queueings wait out by handing over.
        self.shared.handover.thread_runs(true);
        match std::thread::Builder::new()
            .name("pipekeep-writer".into())
            .spawn(move || {
                // Before its first look: whoever queues after it may wake it.
                let _ = shared.thread.set(std::thread::current());
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
                // What was handed over meanwhile waits for the end.
                self.shared.handover.thread_runs(false);
                tracing::debug!(error = %e, "no writer thread; entries are written inline");
                false
            }
        }
    }
}

/// Writes a queued entry; its key was given to `Store::will_write` when it was queued (on the
/// application's thread), and its wait ends as the job is dropped: this thread takes neither
/// lock a lookup of it takes (the known entries', the queued entries').
fn run(job: &Job) -> Result<Written, StoreError> {
    // Written already by a process that kept its waiting file as it was: passed over.
    if job.for_whom == WrittenFor::Earlier && job.store.waiting_entry_is_a_file(&job.key, job.stamp)
    {
        return Ok(Written::Skipped);
    }
    let known = job.data.known_piece();
    job.store
        .write_announced_knowing(&job.key, job.kind, &job.data.whole(), known, job.stamp)
}

/// `items` grouped by the store, record or other shared object each is for (by pointer), in the
/// order each first comes.
fn grouped<K, T>(
    items: impl IntoIterator<Item = T>,
    of: impl Fn(&T) -> &Arc<K>,
) -> Vec<(Arc<K>, Vec<T>)> {
    let mut groups: Vec<(Arc<K>, Vec<T>)> = Vec::new();
    for item in items {
        match groups.iter_mut().find(|(k, _)| Arc::ptr_eq(k, of(&item))) {
            Some((_, all)) => all.push(item),
            None => groups.push((of(&item).clone(), vec![item])),
        }
    }
    groups
}

/// Who drains the queue.
#[derive(Clone, Copy)]
enum Drain<'a> {
    /// The writer thread: until the queue closes, leaving it while the application builds (where
    /// it is given that activity), as [`Queue::waits_for_a_pause`] says.
    Thread(Option<&'a AppActivity>),
    /// Another thread, at the end: until the queue is empty.
    Here,
}

impl Drain<'_> {
    /// Whether the application leaves the cores free: at the end, and where it pauses (or is not
    /// watched: tests).
    fn cores_are_free(self) -> bool {
        match self {
            Drain::Here => true,
            Drain::Thread(building) => building.is_none_or(|b| b.quiet_for() >= QUIET),
        }
    }
}

/// Takes jobs and stamps until the queue closes (the writer thread) or is empty (for
/// [`Drain::Here`]).
fn drain(shared: &Shared, on_written: &OnWritten, who: Drain<'_>) {
    let Shared {
        queue: lock,
        ready,
        handover,
        ..
    } = shared;
    // Once the thread takes the queue it works until the process's own work is done: waiting
    // again at every job would leave it a job per nap while a busy application fills the queue
    // past its bound. Earlier processes' entries then wait for a pause again.
    let mut working = false;
    loop {
        let work = {
            let mut q = lock.locked();
            // The last wait ran its whole second and this look found nothing either.
            let mut idle_for_a_second = false;
            let work = loop {
                q.take_handed(handover);
                // Earlier processes' entries only right after the pause was checked (or at the
                // end): never on the way through the process's own work.
                let mut may_take_earlier = matches!(who, Drain::Here);
                if let (Drain::Thread(building), false) = (who, working) {
                    if let Some(nap) = q.nap_while(building) {
                        drop(q);
                        // Parked, not asleep: the device's end unparks it ([`Writer::wake`]).
                        std::thread::park_timeout(nap);
                        q = lock.locked();
                        continue;
                    }
                    may_take_earlier = true;
                }
                // Closing, the thread leaves what is left to the ending thread and its helpers,
                // at the application's priority: a job this idle-priority thread took then would
                // be waited for on a machine busy on every core.
                if matches!(who, Drain::Thread(_)) && q.closing {
                    break None;
                }
                working = q.has_own_work();
                if let Some(job) = q.pop_own() {
                    break Some(Work::Write(job));
                }
                if !q.stamps.is_empty() {
                    break Some(Work::Stamps(std::mem::take(&mut q.stamps)));
                }
                if !q.records.is_empty() {
                    let spread = who.cores_are_free();
                    break Some(Work::Records(q.take_records(spread), spread));
                }
                if !q.chores.is_empty() {
                    break Some(Work::Chores(std::mem::take(&mut q.chores)));
                }
                if !q.earlier.is_empty() {
                    if !may_take_earlier {
                        continue; // to the pause's check first
                    }
                    working = false; // each of them after its own check of the pause
                    let job = q.pop_earlier().expect("not empty");
                    if job.kept_where_it_waits() {
                        continue;
                    }
                    break Some(Work::Write(job));
                }
                if q.closing || matches!(who, Drain::Here) {
                    break None;
                }
                if handover.waits() {
                    continue;
                }
                if idle_for_a_second {
                    q = shared.sleep_until_queued(q);
                    idle_for_a_second = false;
                    continue;
                }
                // Woken by what is queued; a handing over between the look above and this wait
                // is taken within a second (the longest an entry waits while the cores are free),
                // as are stamps under a batch and the record's pipelines, which wake no thread.
                let waited;
                (q, waited) = ready.wait_on_at_most(q, LONGEST_WAIT);
                shared.count_wake();
                idle_for_a_second = waited.timed_out();
            };
            // Counted under the lock it was taken under: the exit waits for it.
            q.in_flight += usize::from(work.is_some());
            if matches!(who, Drain::Thread(_)) {
                q.under_way = work.as_ref().map(Work::under_way);
            }
            work
        };
        let Some(work) = work else {
            return;
        };
        do_work(shared, on_written, who, work);
    }
}

/// Does `work`, taken from the queue and counted in flight under its lock, and counts it out
/// (the record's pipelines appended at the end counted for the end's debug line).
fn do_work(shared: &Shared, on_written: &OnWritten, who: Drain<'_>, work: Work) {
    let (lock, ready) = (&shared.queue, &shared.ready);
    // Counted out even where the work panicked (the thread's guard then ends it): the exit
    // would wait for it to its limit.
    let mut records = RecordsDone::default();
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match work {
        Work::Write(job) => match std::panic::catch_unwind(|| run(&job)) {
            Ok(written) => on_written(written, job.for_whom),
            Err(panic) => {
                // Its file never came: it stays found from memory, and its waiting file
                // stays (as before the queue held only a weak way to it).
                std::mem::forget(Arc::clone(&job.data));
                std::panic::resume_unwind(panic)
            }
        },
        Work::Stamps(stamps) => stamps.into_iter().for_each(Stamp::give),
        Work::Records(jobs, spread) => records = append_records(jobs, spread),
        Work::Chores(chores) => chores.into_iter().for_each(|chore| chore()),
    }));
    {
        let mut q = lock.locked();
        q.in_flight -= 1;
        match who {
            Drain::Thread(_) => q.under_way = None,
            Drain::Here => q.records_at_end += records,
        }
    }
    ready.notify_all();
    if let Err(panic) = done {
        std::panic::resume_unwind(panic);
    }
}

#[cfg(test)]
mod tests;
