//! What an application thread hands the writer's queue where the queue's lock is held at that
//! moment (by the writer thread, which a busy machine preempts while it holds the lock, or by
//! another application thread): a channel, whose sending takes no lock, emptied into the queue
//! by the lock's next holder. Done on the application's thread instead, the work took locks the
//! idle-priority writer takes too (an entry's pieces, the record's file lock) and a file's I/O:
//! 17-23 of a cold pygfx launch's 1,282 queueings at 16 threads on two cores (RADV).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
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

/// The most things handed over and not yet taken, and the most bytes of entries among them:
/// past either the work is done on the application's thread, as where the queue is full.
const HANDED_AT_MOST: usize = 1 << 12;
const HANDED_BYTES_AT_MOST: usize = super::PAUSE_LIMIT;

/// Tries at most this many times, at the queue's close, for threads midway through handing over.
const CLOSE_TRIES: usize = 1 << 16;

/// The sending side, and what is on its way.
pub(super) struct Handover {
    sender: mpsc::Sender<Handed>,
    /// Sent and not yet taken into the queue.
    items: AtomicUsize,
    /// The bytes of the entries among them.
    bytes: AtomicUsize,
    /// The queue closes (the device's end, the exit): nothing more is handed over.
    closed: AtomicBool,
    /// Threads between their look at `closed` and their send.
    sending: AtomicUsize,
}

impl Handover {
    /// A handover, and its receiving side, for the queue.
    pub(super) fn new() -> (Handover, mpsc::Receiver<Handed>) {
        let (sender, receiver) = mpsc::channel();
        let handover = Handover {
            sender,
            items: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            sending: AtomicUsize::new(0),
        };
        (handover, receiver)
    }

    /// Hands `item` (`bytes` of entries) over as `wrap` makes it; gives it back where the queue
    /// closes or as much waits handed over already.
    pub(super) fn hand<T>(&self, item: T, bytes: usize, wrap: fn(T) -> Handed) -> Option<T> {
        self.sending.fetch_add(1, SeqCst);
        let room = self.items.load(SeqCst) < HANDED_AT_MOST
            && self.bytes.load(SeqCst) + bytes <= HANDED_BYTES_AT_MOST;
        let back = if self.closed.load(SeqCst) || !room {
            Some(item)
        } else {
            self.items.fetch_add(1, SeqCst);
            self.bytes.fetch_add(bytes, SeqCst);
            // The receiver lives in the queue, as long as this: a send never fails.
            let _ = self.sender.send(wrap(item));
            None
        };
        self.sending.fetch_sub(1, SeqCst);
        back
    }

    /// Whether anything handed over waits to be taken.
    pub(super) fn waits(&self) -> bool {
        self.items.load(SeqCst) > 0
    }

    /// Closes it, once no thread is midway through handing over (a few instructions each; at
    /// the process's exit a thread stopped there is waited for a moment, then left).
    pub(super) fn close(&self) {
        self.closed.store(true, SeqCst);
        for _ in 0..CLOSE_TRIES {
            if self.sending.load(SeqCst) == 0 {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// What was handed over, taken through `receiver` (the queue's, by its lock's holder).
    pub(super) fn take(&self, receiver: &mpsc::Receiver<Handed>) -> Vec<Handed> {
        let taken: Vec<Handed> = receiver.try_iter().collect();
        for item in &taken {
            self.items.fetch_sub(1, SeqCst);
            if let Handed::Job(job) = item {
                self.bytes.fetch_sub(job.data.len(), SeqCst);
            }
        }
        taken
    }
}
