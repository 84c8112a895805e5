//! Copies of what waits, should the process die: while the application's threads hold every
//! core, the idle-priority writer thread gets no time and the process's own entries wait in
//! memory, so a process killed then (a user quitting during loading: SIGTERM and SIGINT run no
//! exit handler; a crash) lost every compile since its last pause (RADV at 2 threads, killed
//! after ~1,550 of 1,800 pipelines: 1 written, 1,549 compiled again). Once an entry has waited
//! [`LONGEST_WAIT`] the entries queued since the last copy are copied into one waiting file
//! ([`crate::store::waiting`]) on a thread at the application's priority, at most once every
//! [`LONGEST_WAIT`]: one file's write, not an entry file each. The next process takes such a file
//! as any a dead process left. Here the entries stay queued (lookups find them from memory, the
//! writer writes them as ever), and the device's end removes its copies once they are written or
//! left waiting in its own file.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Instant, SystemTime};

use super::apart::Waiting;
use super::{grouped, Queue, Writer, LONGEST_WAIT};
use crate::key::PipelineKey;
use crate::store::envelope::PayloadKind;
use crate::store::waiting::ToWait;
use crate::store::Store;
use crate::sync::Unpoisoned;

/// The copies a writer made.
#[derive(Default)]
pub(super) struct Copies {
    /// A thread is making one.
    making: bool,
    /// When the last was made.
    last: Option<Instant>,
    /// Each copy's store and file, to remove once its entries are written.
    files: Vec<(Arc<Store>, PathBuf)>,
}

/// One entry of a copy: its store, key, kind, data and stamp.
type Copied = (
    Arc<Store>,
    PipelineKey,
    PayloadKind,
    Arc<Waiting>,
    SystemTime,
);

impl Queue {
    /// Whether a copy is to be made now (and then counted as under way): an entry of the
    /// process's own has waited [`LONGEST_WAIT`], none was made in that long, none is being made,
    /// and one queued since holds its data whole (NVIDIA's that hold their dictionary apart are
    /// written as ever, as at the end).
    pub(super) fn copy_due(&mut self) -> bool {
        let waited = self.jobs.front().map(|j| j.queued.elapsed());
        let due = !self.closing
            && !self.copies.making
            && waited.is_some_and(|w| w >= LONGEST_WAIT)
            && self.copies.last.is_none_or(|t| t.elapsed() >= LONGEST_WAIT)
            && self
                .jobs
                .range(self.first_not_copied()..)
                .any(|j| j.data.is_whole());
        self.copies.making |= due;
        due
    }

    /// Where the jobs queued since the last copy begin: those after the last one copied (jobs
    /// leave from the front and come at the back, so the copied are at the front).
    fn first_not_copied(&self) -> usize {
        self.jobs
            .iter()
            .rposition(|j| j.copied)
            .map_or(0, |last| last + 1)
    }

    /// The entries queued since the last copy, each marked as copied now.
    fn take_for_a_copy(&mut self) -> Vec<Copied> {
        let first = self.first_not_copied();
        self.jobs
            .range_mut(first..)
            .filter(|j| j.data.is_whole())
            .map(|j| {
                j.copied = true;
                (j.store.clone(), j.key, j.kind, j.data.clone(), j.stamp)
            })
            .collect()
    }
}

impl Writer {
    /// Starts a thread making a copy (where [`Queue::copy_due`] said so); without one, none is
    /// made this time.
    pub(super) fn start_a_copy(&self) {
        let shared = self.shared.clone();
        let started = std::thread::Builder::new()
            .name("pipekeep-copy".into())
            .spawn(move || {
                crate::layer::guard::guarded("writer", || make_a_copy(&shared), || ());
                // Counted as made even where it panicked: the next waits its turn.
                let mut q = shared.0.locked();
                q.copies.making = false;
                q.copies.last = Some(Instant::now());
            });
        let mut copier = self.copier.locked();
        match started {
            // The one before has ended: none starts while one is being made.
            Ok(handle) => {
                if let Some(before) = copier.replace(handle) {
                    let _ = before.join();
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "no thread to copy the entries waiting");
                self.shared.0.locked().copies.making = false;
            }
        }
    }

    /// At the end, once what the queue held is written or left waiting: the copies are removed
    /// (where `settled`; else, as after a kill, the next process takes them).
    pub(super) fn remove_copies(&self, settled: bool) {
        if let Some(copier) = self.copier.locked().take() {
            let _ = copier.join();
        }
        let files = std::mem::take(&mut self.shared.0.locked().copies.files);
        if !settled {
            return;
        }
        for (store, path) in files {
            store.remove_waiting_copy(&path);
        }
    }
}

/// Copies the entries queued since the last copy into a waiting file a store.
fn make_a_copy(shared: &(Mutex<Queue>, Condvar)) {
    let started = Instant::now();
    let taken = shared.0.locked().take_for_a_copy();
    let count = taken.len();
    let mut files = Vec::new();
    for (store, copied) in grouped(taken, |(store, ..)| store) {
        let whole: Vec<std::borrow::Cow<'_, [u8]>> = copied
            .iter()
            .map(|(_, _, _, data, _)| data.whole())
            .collect();
        let entries: Vec<ToWait<'_>> = copied
            .iter()
            .zip(&whole)
            .map(|((_, key, kind, _, stamp), data)| (*key, *kind, data.as_ref(), *stamp))
            .collect();
        match store.keep_waiting_copy(&entries) {
            Ok(Some(path)) => files.push((store, path)),
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(error = %e, entries = entries.len(), "the entries waiting were not copied")
            }
        }
    }
    tracing::debug!(
        entries = count,
        took_ms = %format!("{:.1}", started.elapsed().as_secs_f64() * 1e3),
        "the entries waiting copied for the next process"
    );
    shared.0.locked().copies.files.extend(files);
}
