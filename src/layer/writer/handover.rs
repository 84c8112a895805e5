//! What an application thread hands the writer's queue where the queue's lock is held at that
//! moment (by the writer thread, which a busy machine preempts while it holds the lock, or by
//! another application thread): a channel, whose sending takes no lock, emptied into the queue
//! by the writer thread at its next look and by the device's end. Done on the application's
//! thread instead, the work took locks the idle-priority writer takes too (an entry's pieces,
//! the record's file lock) and a file's I/O: 17-23 of a cold pygfx launch's 1,282 queueings at 16
//! threads on two cores (RADV), 0.35-1.95 s of its threads' summed time.

use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::SeqCst};
use std::sync::mpsc;

use super::records::RecordJob;
use super::{Chore, Job, Stamp};

/// One thing handed over, as it goes in the queue.
pub(super) enum Handed {
    Job(Job),
    Stamp(Stamp),
    Record(RecordJob),
    Chore(Chore),
}

/// The most things handed over and not yet taken, and the most bytes of entries among them
/// (about: threads handing at once may each pass the look): past either, the work is done on
/// the application's thread, as where the queue is full. The queue's memory is bounded by its own
/// limit and these.
const HANDED_AT_MOST: isize = 1 << 12;
pub(super) const HANDED_BYTES_AT_MOST: isize = super::PAUSE_LIMIT as isize;

/// Tries at most this many times, at the process's exit, for threads midway through handing
/// over (the device's end waits for them however long).
const EXIT_TRIES: usize = 1 << 16;

/// The sending side, and what is on its way.
pub(super) struct Handover {
    sender: mpsc::Sender<Handed>,
    /// Sent and not yet taken into the queue: counted after the send, so that it is never more
    /// than the channel holds (a take between a send and its count makes it less a moment).
    items: AtomicIsize,
    /// The bytes of the entries among them, counted so too.
    bytes: AtomicIsize,
    /// The writer thread runs: without it, what is handed over would wait for the end.
    runs: AtomicBool,
    /// The queue closes (the device's end, the exit): nothing more is handed over.
    closed: AtomicBool,
    /// Threads between their look at `closed` and their count.
    sending: AtomicIsize,
}

impl Handover {
    /// A handover, and its receiving side, for the queue.
    pub(super) fn new() -> (Handover, mpsc::Receiver<Handed>) {
        let (sender, receiver) = mpsc::channel();
        let handover = Handover {
            sender,
            items: AtomicIsize::new(0),
            bytes: AtomicIsize::new(0),
            runs: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            sending: AtomicIsize::new(0),
        };
        (handover, receiver)
    }

    /// The writer thread started (under the queue's lock).
    pub(super) fn thread_runs(&self) {
        self.runs.store(true, SeqCst);
    }

    /// Hands `item` (`bytes` of entries) over as `wrap` makes it; gives it back, to be done on
    /// this thread, where the queue closes, no writer thread runs, as much waits handed over
    /// already, or this is a thread of the layer's own at idle priority (the rebuild's: an
    /// application thread sending behind it might wait on it).
    pub(super) fn hand<T>(&self, item: T, bytes: usize, wrap: fn(T) -> Handed) -> Option<T> {
        // Before the count the device's end waits on: it never waits on an idle thread.
        if crate::sync::at_idle_priority() {
            return Some(item);
        }
        let bytes = isize::try_from(bytes).unwrap_or(isize::MAX);
        self.sending.fetch_add(1, SeqCst);
        let room = self.items.load(SeqCst) < HANDED_AT_MOST
            && self.bytes.load(SeqCst).saturating_add(bytes) <= HANDED_BYTES_AT_MOST;
        let open = !self.closed.load(SeqCst) && self.runs.load(SeqCst);
        let back = if !open || !room {
            Some(item)
        } else {
            // The receiver lives in the queue, as long as this: a send never fails.
            let _ = self.sender.send(wrap(item));
            self.bytes.fetch_add(bytes, SeqCst);
            self.items.fetch_add(1, SeqCst);
            None
        };
        self.sending.fetch_sub(1, SeqCst);
        back
    }

    /// Whether anything handed over waits to be taken.
    pub(super) fn waits(&self) -> bool {
        self.items.load(SeqCst) > 0
    }

    /// Closes it, once no thread is midway through handing over (a few instructions each). At
    /// the process's `exit` a thread stopped there is waited for a moment, then left: what it
    /// hands over then is lost with the process, as its entry would be.
    pub(super) fn close(&self, exit: bool) {
        self.closed.store(true, SeqCst);
        let mut tries = 0;
        while self.sending.load(SeqCst) > 0 && (!exit || tries < EXIT_TRIES) {
            std::thread::yield_now();
            tries += 1;
        }
    }

    /// What was handed over, taken through `receiver` (the queue's, by a holder of its lock).
    pub(super) fn take(&self, receiver: &mpsc::Receiver<Handed>) -> Vec<Handed> {
        let taken: Vec<Handed> = receiver.try_iter().collect();
        for item in &taken {
            self.items.fetch_sub(1, SeqCst);
            if let Handed::Job(job) = item {
                let bytes = isize::try_from(job.data.len()).unwrap_or(isize::MAX);
                self.bytes.fetch_sub(bytes, SeqCst);
            }
        }
        taken
    }
}
