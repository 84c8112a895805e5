//! The writer's queue: what waits to be written, stamped, recorded or done, its bytes, and
//! when the thread leaves it for the application's pause (the rules the module above states).

use std::collections::VecDeque;
use std::time::Duration;

use super::handover::{Handed, Handover};
use super::records::{RecordJob, RecordsDone};
use super::{
    AppActivity, Chore, Job, Stamp, UnderWay, WrittenFor, LONGEST_WAIT, NAP, PAUSE_LIMIT,
    QUEUE_LIMIT, QUIET, RECORDS_A_JOB, STAMPS_LIMIT,
};

#[derive(Default)]
pub(super) struct Queue {
    /// The process's own entries (the application's, the rebuild's), written first.
    pub(super) jobs: VecDeque<Job>,
    /// Earlier processes' entries ([`Writer::write_waiting`]): safe in their waiting file
    /// already, they do not make the thread write while the application builds, unless they
    /// fill the queue near [`QUEUE_LIMIT`] ([`Queue::waits_for_a_pause`]).
    pub(super) earlier: VecDeque<Job>,
    /// The bytes of every job queued ([`QUEUE_LIMIT`]).
    pub(super) bytes: usize,
    /// Those of [`Queue::earlier`].
    pub(super) earlier_bytes: usize,
    pub(super) stamps: Vec<Stamp>,
    pub(super) records: VecDeque<RecordJob>,
    pub(super) chores: Vec<Chore>,
    pub(super) closing: bool,
    /// The thread was started (its handle is in `Writer::thread`, for the join).
    pub(super) started: bool,
    /// Work taken from the queue and not yet done (an entry being written, records appended).
    pub(super) in_flight: usize,
    /// What the writer thread has taken and not yet done: the device's end waits for it.
    pub(super) under_way: Option<UnderWay>,
    /// The record's pipelines appended by the device's end (its threads'), for its debug line.
    pub(super) records_at_end: RecordsDone,
}

impl Queue {
    /// Takes into the queue what application threads handed over while others held its lock.
    pub(super) fn take_handed(&mut self, handover: &Handover) {
        for item in handover.take() {
            match item {
                Handed::Job(job) => self.push(job),
                Handed::Stamp(stamp) => self.stamps.push(stamp),
                Handed::Record(record) => self.records.push_back(record),
                Handed::Chore(chore) => self.chores.push(chore),
            }
        }
    }

    /// Queues `job` last of its kind, counting its bytes.
    pub(super) fn push(&mut self, job: Job) {
        let len = job.data.len();
        self.bytes += len;
        if job.for_whom == WrittenFor::Earlier {
            self.earlier_bytes += len;
            self.earlier.push_back(job);
        } else {
            self.jobs.push_back(job);
        }
    }

    /// Whether a job of `bytes` fits within [`QUEUE_LIMIT`]; else it is written on the caller's
    /// thread.
    pub(super) fn has_room_for(&self, bytes: usize) -> bool {
        self.bytes + bytes <= QUEUE_LIMIT
    }

    /// Takes the process's own next job, its bytes no longer counted.
    pub(super) fn pop_own(&mut self) -> Option<Job> {
        let job = self.jobs.pop_front()?;
        self.bytes -= job.data.len();
        Some(job)
    }

    /// Takes an earlier process's next entry, its bytes no longer counted.
    pub(super) fn pop_earlier(&mut self) -> Option<Job> {
        let job = self.earlier.pop_front()?;
        self.bytes -= job.data.len();
        self.earlier_bytes -= job.data.len();
        Some(job)
    }

    /// Every job queued: the process's own, then earlier processes'.
    pub(super) fn all_jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.iter().chain(&self.earlier)
    }

    /// Takes every job queued, in [`Queue::all_jobs`]'s order.
    pub(super) fn take_all(&mut self) -> impl Iterator<Item = Job> {
        (self.bytes, self.earlier_bytes) = (0, 0);
        let own = std::mem::take(&mut self.jobs);
        own.into_iter().chain(std::mem::take(&mut self.earlier))
    }

    pub(super) fn has_work(&self) -> bool {
        self.has_own_work() || !self.earlier.is_empty()
    }

    /// Work of this process's own: all but earlier processes' entries.
    pub(super) fn has_own_work(&self) -> bool {
        !(self.jobs.is_empty()
            && self.stamps.is_empty()
            && self.records.is_empty()
            && self.chores.is_empty())
    }

    /// The record's pipelines the thread takes as one job: all of them where the cores are free
    /// (`spread`: the application's pause, or its end), their documents then made on several;
    /// else the first [`RECORDS_A_JOB`], on the thread alone, so that the job the device's end
    /// may find under way is short (on the H100 a cold pygfx launch's end waited for 641 under
    /// way on the writer, 38.6 ms of JSON, joined 55.6 ms).
    pub(super) fn take_records(&mut self, spread: bool) -> Vec<RecordJob> {
        if spread {
            return std::mem::take(&mut self.records).into();
        }
        let first = self.records.len().min(RECORDS_A_JOB);
        self.records.drain(..first).collect()
    }

    /// How long the writer thread sleeps before it looks again, where it leaves the work it has
    /// for now ([`Queue::waits_for_a_pause`]) while the application builds as `building` says
    /// (none: it is not watched).
    pub(super) fn nap_while(&self, building: Option<&AppActivity>) -> Option<Duration> {
        let quiet = building.map(AppActivity::quiet_for);
        let beside = building.is_some_and(AppActivity::leaves_cores_free);
        self.has_work()
            .then(|| self.waits_for_a_pause(quiet, beside))
            .flatten()
    }

    /// Whether the writer thread leaves its work for now, the application having built nothing
    /// for `quiet` (none: it is not watched): it builds, the queue has room to wait (the
    /// process's own entries under [`PAUSE_LIMIT`], all of them not near [`QUEUE_LIMIT`], stamps
    /// and the record's pipelines under half their limit), no entry of the process's own has
    /// waited its longest, and none waits while its threads building leave half the cores free
    /// (`beside`: [`AppActivity::leaves_cores_free`]); how long the thread then sleeps.
    pub(super) fn waits_for_a_pause(
        &self,
        quiet: Option<Duration>,
        beside: bool,
    ) -> Option<Duration> {
        if crate::layer::guard::SETTINGS.test_hold_writes && !self.closing {
            return Some(NAP);
        }
        let quiet = quiet?;
        // Earlier processes' entries wait for a pause however many: safe in their file, they
        // would only take the application's cores (ncnn's later launch on RADV at 2 threads,
        // its 9 MB of them written while it built: 110 ms to ready against 94, medians of 14
        // interleaved pairs from copies of one store).
        let own_bytes = self.bytes - self.earlier_bytes;
        // Near its limit the queue would have the application write its own entries inline.
        let room = own_bytes < PAUSE_LIMIT
            && self.bytes + PAUSE_LIMIT <= QUEUE_LIMIT
            && self.stamps.len() < STAMPS_LIMIT / 2
            && self.records.len() < STAMPS_LIMIT / 2;
        let waited = self
            .jobs
            .front()
            .map_or(Duration::ZERO, |j| j.queued.elapsed());
        // Beside the builds, the process's own entries are written as they come.
        let entries_beside = beside && !self.jobs.is_empty();
        let in_time = waited < LONGEST_WAIT && !entries_beside;
        (!self.closing && room && in_time && quiet < QUIET).then(|| {
            (QUIET - quiet)
                .min(NAP)
                .min(LONGEST_WAIT.saturating_sub(waited))
        })
    }
}
