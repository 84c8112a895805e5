//! What an application thread hands the writer's queue where the queue's lock is held at that
//! moment (by the writer thread, which a busy machine preempts while it holds the lock, or by
//! another application thread): a stack that takes no lock and never waits on another thread,
//! emptied into the queue by the writer thread at its next look and by the device's end. Done on
//! the application's thread instead, the work took locks the idle-priority writer takes too (an
//! entry's pieces, the record's file lock) and a file's I/O: 17-23 of a cold pygfx launch's 1,282
//! queueings at 16 threads on two cores (RADV), 0.35-1.95 s of its threads' summed time. (A
//! channel of the standard library has its receiver spin on a sender preempted midway: the
//! idle-priority writer would spin while it holds the queue.)

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicPtr, Ordering::SeqCst};

use super::records::RecordJob;
use super::{Chore, Job, Stamp};

/// One thing handed over, as it goes in the queue.
pub(super) enum Handed {
    Job(Job),
    Stamp(Stamp),
    Record(RecordJob),
    Chore(Chore),
}

// Handed over between threads: the stack's raw pointers would not ask.
const _: fn() = || {
    fn sent_between_threads<T: Send>() {}
    sent_between_threads::<Handed>();
};

/// The most things handed over and not yet taken, and the most bytes of entries among them
/// (about: threads handing at once may each pass the look): past either, the work is done on
/// the application's thread, as where the queue is full. The queue's memory is bounded by its own
/// limit and these.
const HANDED_AT_MOST: isize = 1 << 12;
pub(super) const HANDED_BYTES_AT_MOST: isize = super::PAUSE_LIMIT as isize;

/// Tries at most this many times, at the process's exit, for threads midway through handing
/// over (the device's end waits for them however long).
const EXIT_TRIES: usize = 1 << 16;

/// One thing on the stack, its bytes of entries as counted, and the one handed over before it.
struct Node {
    item: Handed,
    bytes: isize,
    below: *mut Node,
}

/// The stack, and what is on it.
pub(super) struct Handover {
    /// The last thing handed over (null: none).
    top: AtomicPtr<Node>,
    /// Things on the stack, and the bytes of the entries among them: counted after the push, so
    /// a take between a push and its count makes them less than the stack holds a moment.
    items: AtomicIsize,
    bytes: AtomicIsize,
    /// The writer thread runs: without it, what is handed over would wait for the end.
    runs: AtomicBool,
    /// The queue closes (the device's end, the exit): nothing more is handed over.
    closed: AtomicBool,
    /// Threads between their look at `closed` and their push.
    sending: AtomicIsize,
}

impl Handover {
    pub(super) fn new() -> Handover {
        Handover {
            top: AtomicPtr::new(ptr::null_mut()),
            items: AtomicIsize::new(0),
            bytes: AtomicIsize::new(0),
            runs: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            sending: AtomicIsize::new(0),
        }
    }

    /// Whether the writer thread runs (told under the queue's lock, as it is started).
    pub(super) fn thread_runs(&self, runs: bool) {
        self.runs.store(runs, SeqCst);
    }

    /// Hands `item` (`bytes` of entries) over as `wrap` makes it; gives it back, to be done on
    /// this thread, where the queue closes, no writer thread runs, as much waits handed over
    /// already, or this is a thread of the layer's own at idle priority (the rebuild's: the
    /// device's end waits for threads midway here, and never waits on an idle one).
    pub(super) fn hand<T>(&self, item: T, bytes: usize, wrap: fn(T) -> Handed) -> Option<T> {
        if crate::sync::at_idle_priority() {
            return Some(item);
        }
        let bytes = isize::try_from(bytes).unwrap_or(isize::MAX);
        self.sending.fetch_add(1, SeqCst);
        let room = self.items.load(SeqCst) < HANDED_AT_MOST
            && self.bytes.load(SeqCst).saturating_add(bytes) <= HANDED_BYTES_AT_MOST;
        let open = !self.closed.load(SeqCst) && self.runs.load(SeqCst);
        let back = if open && room {
            self.push(wrap(item), bytes);
            self.bytes.fetch_add(bytes, SeqCst);
            self.items.fetch_add(1, SeqCst);
            None
        } else {
            Some(item)
        };
        self.sending.fetch_sub(1, SeqCst);
        back
    }

    /// Puts `item` on top: its node is whole before the exchange publishes it.
    fn push(&self, item: Handed, bytes: isize) {
        let node = Box::into_raw(Box::new(Node {
            item,
            bytes,
            below: ptr::null_mut(),
        }));
        let mut top = self.top.load(SeqCst);
        loop {
            // SAFETY: `node` is this thread's own until the exchange below publishes it.
            unsafe { (*node).below = top };
            match self.top.compare_exchange_weak(top, node, SeqCst, SeqCst) {
                Ok(_) => return,
                Err(now) => top = now,
            }
        }
    }

    /// Whether anything handed over waits to be taken.
    pub(super) fn waits(&self) -> bool {
        !self.top.load(SeqCst).is_null()
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

    /// Everything handed over, in the order it was: the whole stack taken at once, so a take
    /// never waits on a thread pushing.
    pub(super) fn take(&self) -> Vec<Handed> {
        let mut node = self.top.swap(ptr::null_mut(), SeqCst);
        let mut taken = Vec::new();
        while !node.is_null() {
            // SAFETY: the swap made every node below it this thread's alone, each whole (each
            // was written before the exchange that published it) and made by `Box::into_raw`.
            let Node { item, bytes, below } = *unsafe { Box::from_raw(node) };
            self.items.fetch_sub(1, SeqCst);
            self.bytes.fetch_sub(bytes, SeqCst);
            taken.push(item);
            node = below;
        }
        taken.reverse();
        taken
    }
}

impl Drop for Handover {
    /// What no drain took (a writer dropped without its end) goes with it.
    fn drop(&mut self) {
        drop(self.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// Threads handing over while another takes: every thing is taken once, and each thread's
    /// in the order it handed them over.
    #[test]
    fn every_thing_handed_over_at_once_is_taken_once_in_its_threads_order() {
        let handover = Arc::new(Handover::new());
        handover.thread_runs(true);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let handers: Vec<_> = (0..4usize)
            .map(|thread| {
                let (handover, seen) = (handover.clone(), seen.clone());
                std::thread::spawn(move || {
                    for n in 0..2_000usize {
                        let seen = seen.clone();
                        let mut chore: Chore =
                            Box::new(move || seen.lock().unwrap().push((thread, n)));
                        // Past the handover's limit while the taker is behind: again.
                        while let Some(back) = handover.hand(chore, 0, Handed::Chore) {
                            chore = back;
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let taken = AtomicUsize::new(0);
        let take = || {
            for item in handover.take() {
                let Handed::Chore(chore) = item else {
                    panic!("only chores were handed over")
                };
                chore();
                taken.fetch_add(1, SeqCst);
            }
        };
        while handers.iter().any(|h| !h.is_finished()) {
            take();
        }
        handers.into_iter().for_each(|h| h.join().unwrap());
        take();
        assert_eq!(taken.load(SeqCst), 8_000);
        assert!(!handover.waits());
        assert_eq!(
            (handover.items.load(SeqCst), handover.bytes.load(SeqCst)),
            (0, 0)
        );
        let seen = seen.lock().unwrap();
        for thread in 0..4 {
            let order: Vec<usize> = seen
                .iter()
                .filter(|(t, _)| *t == thread)
                .map(|(_, n)| *n)
                .collect();
            assert_eq!(order, (0..2_000).collect::<Vec<_>>(), "thread {thread}");
        }
    }
}
