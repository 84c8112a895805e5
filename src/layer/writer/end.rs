//! The device's end: what is still queued is written by the destroying thread and helpers (the
//! writer thread, at idle priority, may wait behind a busy machine), the record's pipelines
//! appended on a thread beside them, or entries left waiting in one file for the next process
//! where that holds the process's end less; and the writer thread joined.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::apart::Waiting;
use super::records::RecordJob;
use super::{do_work, drain, grouped, Drain, Job, Work, Writer, WrittenFor};
use crate::store::envelope::PayloadKind;
use crate::store::files::Written;
use crate::store::recipe::KnownPiece;
use crate::store::waiting::ToWait;
use crate::store::{Queued, Store};
use crate::sync::Unpoisoned;

impl Writer {
    /// Writes what is queued on this thread (and helpers), not the writer's (whose idle priority
    /// may keep it waiting behind a busy machine), the record's pipelines on a thread beside
    /// them where this is the store's last device, and joins the writer thread (at
    /// `vkDestroyDevice`). `leave`: the store's last device, whose end may leave entries waiting
    /// for the next process ([`Writer::leave_waiting`]); another device of the process writes
    /// them, since the store is not opened again in it.
    pub fn finish(&self, leave: bool) {
        let started = Instant::now();
        self.close_handover(false);
        let end = self.with_records_beside(leave, || self.end_here(leave, started));
        let records_at = started.elapsed();
        let records = self.shared.queue.locked().records_at_end;
        if let Some(handle) = self.thread.locked().take() {
            let _ = handle.join();
        }
        let joined_at = started.elapsed();
        for store in end.moving {
            store.moved_removed();
        }
        let ended = started.elapsed();
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e3);
        // Where the end's time goes: leaving entries waiting, telling the stores what comes
        // together, writing (this thread and helpers), then what was left of the record's
        // pipelines once that was done (`records_left_ms`; at the store's last device they are
        // appended on their own thread from the start, else in the writing; their documents and
        // their append are each the wall time of the appends, added up), then what was left of the
        // writer thread's last job (`in_flight`: it had one as the queue closed; `under_way`:
        // what, how many, and how long it had been under way then), then what was left of
        // removing the entry files moved into the waiting file.
        tracing::debug!(
            entries = end.waiting,
            left_waiting = end.left,
            in_flight = usize::from(end.under_way.0 != "none"),
            under_way = %end.under_way.0,
            under_way_items = end.under_way.1,
            under_way_ms = %ms(end.under_way.2),
            helpers = end.helpers,
            leave_ms = %ms(end.left_at),
            together_ms = %ms(end.told_at.saturating_sub(end.left_at)),
            write_ms = %ms(end.written_at.saturating_sub(end.told_at)),
            records = records.pipelines,
            records_documents_ms = %ms(records.documents),
            records_appended_ms = %ms(records.appended),
            records_left_ms = %ms(records_at.saturating_sub(end.written_at)),
            join_ms = %ms(joined_at.saturating_sub(records_at)),
            moved_ms = %ms(ended.saturating_sub(joined_at)),
            took_ms = %ms(ended),
            "the entries still queued at the device's end written"
        );
    }

    /// `rest` (the rest of the end), with the record's pipelines (their documents and
    /// deflating: on a cold launch the end's longest work, pygfx's at 16 threads on the H100
    /// 23-42 ms, after leaving entries waiting 10-28 ms) appended on a thread beside it where
    /// `leave` (the store's last device), the cores being free; taken first, so that the writer
    /// thread takes none of them meanwhile. (Another device's end leaves them to the writing,
    /// after the entries' writes.)
    fn with_records_beside<R>(&self, leave: bool, rest: impl FnOnce() -> R) -> R {
        let taken = leave.then(|| self.take_records_at_end()).flatten();
        let any = taken.is_some();
        let records = std::sync::Mutex::new(taken);
        let append = || {
            let jobs = records.locked().take();
            if let Some(jobs) = jobs {
                let work = Work::Records(jobs, true);
                do_work(&self.shared, &self.on_written, Drain::Here, work);
            }
        };
        std::thread::scope(|s| {
            let beside = any.then(|| {
                std::thread::Builder::new()
                    .name("pipekeep-end-records".into())
                    .spawn_scoped(s, || crate::layer::guard::guarded("records", append, || ()))
            });
            let done = rest();
            match beside {
                Some(Ok(thread)) => drop(thread.join()),
                Some(Err(_)) => append(), // no thread: this one appends them
                None => {}
            }
            done
        })
    }

    /// Every pipeline queued for the record, taken and counted in flight (as any work taken
    /// from the queue: [`do_work`] counts it out); `None` where none is queued.
    fn take_records_at_end(&self) -> Option<Vec<RecordJob>> {
        let mut q = self.shared.queue.locked();
        let jobs = q.take_records(true);
        q.in_flight += usize::from(!jobs.is_empty());
        (!jobs.is_empty()).then_some(jobs)
    }

    /// The end on this thread: entries left waiting (`leave`), what is queued written here and
    /// by helpers; the times since `started` each part ended.
    fn end_here(&self, leave: bool, started: Instant) -> EndHere {
        let (left, moving) = match leave {
            true => self.leave_waiting(),
            false => (0, Vec::new()),
        };
        let left_at = started.elapsed();
        let (waiting, under_way, together) = {
            let (lock, ready) = (&self.shared.queue, &self.shared.ready);
            let mut q = lock.locked();
            q.closing = true;
            ready.notify_all();
            let together: Vec<(Arc<Store>, PayloadKind, Arc<Queued<Waiting>>)> = q
                .all_jobs()
                .map(|j| (j.store.clone(), j.kind, j.data.clone()))
                .collect();
            // What the writer thread had under way as the queue closed, and how long it had run.
            let under_way = q.under_way.map_or(("none", 0, Duration::ZERO), |u| {
                (u.what, u.items, u.since.elapsed())
            });
            (together.len(), under_way, together)
        };
        self.wake();
        expect_together(together);
        let told_at = started.elapsed();
        // The device's builds are over, so its cores are free: many entries waiting (NVIDIA's,
        // held apart while every core built) are written by a few threads, not by this one alone
        // (ncnn at 16 threads on the H200: 3,115 entries, 3.3-3.8 s on one thread).
        let helpers = finishing_helpers(waiting);
        std::thread::scope(|s| {
            for _ in 0..helpers {
                let helper = std::thread::Builder::new()
                    .name("pipekeep-finish".into())
                    .spawn_scoped(s, || {
                        let write = || drain(&self.shared, &self.on_written, Drain::Here);
                        crate::layer::guard::guarded("writer", write, || ())
                    });
                if helper.is_err() {
                    break; // this thread writes the rest
                }
            }
            drain(&self.shared, &self.on_written, Drain::Here);
        });
        EndHere {
            left,
            moving,
            waiting,
            under_way,
            helpers,
            left_at,
            told_at,
            written_at: started.elapsed(),
        }
    }

    /// Closes the handing over ([`super::Handover`]; at the process's `exit`, waiting for a
    /// thread midway a moment only) and takes what it holds into the queue: from here on what an
    /// application thread cannot queue at once is done on its thread.
    fn close_handover(&self, exit: bool) {
        self.shared.handover.close(exit);
        self.shared
            .queue
            .locked()
            .take_handed(&self.shared.handover);
    }

    /// Wakes the writer thread, once the queue is closing, so that it sees the close and returns:
    /// the device's end joins it. Out of its nap while it waits for the application's pause (it
    /// napped up to [`super::NAP`] of a short launch's end on RADV), and out of its sleep with an
    /// empty queue, which nothing else ends: without this wake the join would never return.
    fn wake(&self) {
        if let Some(handle) = self.thread.locked().as_ref() {
            handle.thread().unpark();
        }
    }

    /// Writes what is queued on this thread, without waiting for the writer thread (at exit,
    /// where the writer thread may be stopped at any moment).
    /// Then waits, at most `limit`, for what the writer thread took from the queue, and for the
    /// removal of the entry files moved into a waiting file (a few hundred at most).
    pub fn drain_here(&self, limit: Duration) {
        self.close_handover(true);
        let (_, moving) = self.leave_waiting();
        self.shared.queue.locked().closing = true;
        drain(&self.shared, &self.on_written, Drain::Here);
        self.wait_for_work_in_flight(limit);
        for store in moving {
            store.moved_removed();
        }
    }

    /// Waits, at most `limit`, for what the writer thread took from the queue (an entry it is
    /// writing, records it appends): the process's exit would cut it short (an entry's file
    /// left half written, one compile at the next launch).
    fn wait_for_work_in_flight(&self, limit: Duration) {
        let (lock, done) = (&self.shared.queue, &self.shared.ready);
        let until = Instant::now() + limit;
        let mut q = lock.locked();
        while q.in_flight > 0 {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::debug!("the writer thread's work was still under way at exit");
                return;
            }
            q = match done.wait_timeout(q, left) {
                Ok((q, _)) => q,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// At the end: the entries queued whole that [`choose_left`] chooses are kept in one waiting
    /// file a store ([`crate::store::waiting`]) for the next process to write, instead of a file
    /// each while the user waits for this one to end; each of its own counts as written. NVIDIA's
    /// that hold their dictionary apart are written as ever. Returns how many were left waiting,
    /// and the stores that left some (each may be removing entry files it moved into its waiting
    /// file: [`Store::moved_removed`]).
    pub(super) fn leave_waiting(&self) -> (usize, Vec<Arc<Store>>) {
        let (jobs, leaving) = {
            let mut q = self.shared.queue.locked();
            // Those kept where they wait (their file stays as it was) leave the queue first: the
            // end neither writes them nor tells their pieces to the store.
            let (whole, apart): (Vec<Job>, Vec<Job>) = q
                .take_all()
                .filter(|j| !j.kept_where_it_waits())
                .partition(|j| j.data.is_whole());
            let (left, written, leaving) = choose_left(whole);
            for job in written.into_iter().chain(apart) {
                q.push(job);
            }
            if left.is_empty() {
                return (0, Vec::new());
            }
            (left, leaving)
        };
        let mut left = 0;
        let mut moving = Vec::new();
        for (store, jobs) in grouped(jobs, |j| &j.store) {
            let whole: Vec<std::borrow::Cow<'_, [u8]>> =
                jobs.iter().map(|j| j.data.whole()).collect();
            let entries: Vec<ToWait<'_>> = jobs
                .iter()
                .zip(&whole)
                .map(|(j, data)| (j.key, j.kind, data.as_ref(), j.stamp))
                .collect();
            let kept = match leaving {
                Leaving::All => store.keep_waiting(&entries),
                Leaving::EarlierFew => store.keep_few_waiting(&entries),
            };
            match kept {
                Ok(bytes) => {
                    left += jobs.len();
                    moving.push(store.clone());
                    let each = bytes / jobs.len() as u64;
                    // An earlier process's left waiting again was counted where it was built.
                    for job in jobs
                        .iter()
                        .filter(|j| j.for_whom == WrittenFor::Application)
                    {
                        (self.on_written)(Ok(Written::Whole(each)), job.for_whom);
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, entries = jobs.len(), "entries could not be left waiting; written one by one");
                    let mut q = self.shared.queue.locked();
                    for job in jobs {
                        q.push(job);
                    }
                }
            }
        }
        (left, moving)
    }
}

/// The entries waiting at the device's end, told to their stores together: a piece two of them
/// carry is written as a piece from the first ([`Store::expect_together`]). Those holding NVIDIA's
/// dictionary apart are told by their own bytes and the dictionary's record, named once a
/// dictionary: each put together and cut on this thread, 394 of them took 1.1 s of ncnn's end
/// at 16 threads on the H100 (700 MB made and hashed before a helper began).
pub(super) fn expect_together(jobs: Vec<(Arc<Store>, PayloadKind, Arc<Queued<Waiting>>)>) {
    for (store, jobs) in grouped(jobs, |(s, _, _)| s) {
        let mut dictionaries: Vec<(&Arc<KnownPiece>, u32)> = Vec::new();
        let own: Vec<std::borrow::Cow<'_, [u8]>> = jobs
            .iter()
            .map(|(_, _, data)| match &***data {
                Waiting::Apart {
                    without, record, ..
                } => {
                    // NVIDIA's data less the dictionary's record: its other records byte for
                    // byte, named as they are cut from the whole.
                    match dictionaries
                        .iter_mut()
                        .find(|(r, _)| Arc::ptr_eq(r, record))
                    {
                        Some((_, entries)) => *entries += 1,
                        None => dictionaries.push((record, 1)),
                    }
                    without[..].into()
                }
                whole => whole.whole(),
            })
            .collect();
        let payloads: Vec<(PayloadKind, &[u8])> = jobs
            .iter()
            .zip(&own)
            .map(|((_, kind, _), bytes)| (*kind, &bytes[..]))
            .collect();
        let records: Vec<(&KnownPiece, u32)> =
            dictionaries.iter().map(|(r, n)| (&***r, *n)).collect();
        store.expect_together(&payloads, &records);
    }
}

/// What the ending thread did ([`Writer::end_here`]), for the end's debug line.
struct EndHere {
    left: usize,
    /// The stores removing the entry files they moved into their waiting files.
    moving: Vec<Arc<Store>>,
    waiting: usize,
    /// What the writer thread had under way as the queue closed: what ("none": it had no job), how
    /// many, how long.
    under_way: (&'static str, usize, Duration),
    helpers: usize,
    left_at: Duration,
    told_at: Duration,
    written_at: Duration,
}

/// Threads beside the finishing one that write what waits at the device's end: one for every
/// [`ENTRIES_A_HELPER`] entries, at most half the cores.
pub(super) fn finishing_helpers(waiting: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (waiting / ENTRIES_A_HELPER).min((cores / 2).max(1))
}

/// Entries waiting at the device's end that are worth a thread more to write.
pub(super) const ENTRIES_A_HELPER: usize = 64;

/// Entries waiting at the end from which they are left waiting in one file for the next process
/// ([`Writer::leave_waiting`]): fewer take little to write (RADV, 2 threads: about 0.44 ms an
/// entry, so 256 hold the process's end some 60-110 ms).
pub(super) const LEAVE_WAITING_FROM: usize = 256;

/// Bytes waiting at the end from which fewer than [`LEAVE_WAITING_FROM`] entries are left
/// waiting too, where there are at least [`LEAVE_WAITING_BYTES_FROM_ENTRIES`] of them: an entry's
/// write grows with its bytes (pieces cut, named and compressed). NVIDIA's pygfx entries of 13-17
/// KB at 16 threads on the H200: 158-237 of them held the process's end 256-290 ms as files,
/// 311 left in one file 77 ms.
pub(super) const LEAVE_WAITING_BYTES: usize = 2 << 20;

/// The fewest entries left waiting for their bytes alone: a few large ones take little more to
/// write as files than as one, and the next process takes a waiting file whole at its opening.
pub(super) const LEAVE_WAITING_BYTES_FROM_ENTRIES: usize = 32;

/// Whether `entries` holding `bytes`, all that could be left waiting at the device's end, are
/// left waiting in one file for the next process ([`Writer::leave_waiting`]): many entries, or
/// fewer that hold many bytes.
pub(super) fn worth_leaving_waiting(entries: usize, bytes: usize) -> bool {
    entries >= LEAVE_WAITING_FROM
        || (entries >= LEAVE_WAITING_BYTES_FROM_ENTRIES && bytes >= LEAVE_WAITING_BYTES)
}

/// What the end leaves waiting of the entries queued whole ([`choose_left`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leaving {
    /// Enough of them ([`worth_leaving_waiting`]): all, entry files that hold inline what they
    /// carry moving in with them ([`Store::keep_waiting`]).
    All,
    /// Fewer: those an earlier process left waiting alone, however few, no entry file moving in
    /// ([`Store::keep_few_waiting`]).
    EarlierFew,
}

/// Splits the entries queued whole at the end into those left waiting and those written as files.
/// Where enough wait ([`worth_leaving_waiting`]), all are left. Where fewer wait, those an earlier
/// process left waiting are left again however few: safe in their file, written one by one they
/// held a later launch's end (the test app on RADV null, 400 pipelines, 70 ms pauses: the launch
/// whose end wrote them took 138-225 ms, median 166, against 117-138 ms for every later launch
/// now, six interleaved rounds); unless the store's opening left a file for a later one (a file
/// left now would go behind it, and the next opening might not reach it). The process's own few
/// are written as files.
fn choose_left(whole: Vec<Job>) -> (Vec<Job>, Vec<Job>, Leaving) {
    let bytes = whole.iter().map(|j| j.data.len()).sum();
    if worth_leaving_waiting(whole.len(), bytes) {
        return (whole, Vec::new(), Leaving::All);
    }
    let (left, written) = whole
        .into_iter()
        .partition(|j| j.for_whom == WrittenFor::Earlier && !j.store.left_waiting_untaken());
    (left, written, Leaving::EarlierFew)
}
