//! What the crate's threads share. Locks that stay usable after a panic: the layer catches every
//! panic at its FFI boundary and carries on, so a lock held by a thread that panicked must not
//! poison what every other thread shares: each holder keeps its data whole between statements,
//! and the next one takes it as it was left. One place for that rule instead of one idiom at
//! every lock. And the log: a thread started for the crate's work logs where its starter does.

use std::sync::{
    Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    WaitTimeoutResult,
};
use std::time::Duration;

/// `work`, to run on a thread about to be started, with the log the calling thread has. The
/// layer's log is its threads' own, never a process-wide default, and a new thread has none: a
/// reader ahead or a rebuild worker would log nothing.
pub(crate) fn logging_as_here<R>(work: impl FnOnce() -> R) -> impl FnOnce() -> R {
    let log = tracing::dispatcher::get_default(tracing::Dispatch::clone);
    move || tracing::dispatcher::with_default(&log, work)
}

/// Threads the crate's work in shares takes at most: the cores, up to 8.
pub(crate) fn share_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// `items` worked in shares, in order, on up to `threads` threads: this one (the last share) and
/// others named `name`, each logging as this one does. Each share with its result, `None` where
/// its work panicked. A share whose thread cannot be started is worked on this one.
pub(crate) fn in_shares<'a, T: Sync, R: Send>(
    items: &'a [T],
    threads: usize,
    name: &str,
    work: impl Fn(&'a [T]) -> R + Sync,
) -> Vec<(&'a [T], Option<R>)> {
    let share = items.len().div_ceil(threads.max(1)).max(1);
    let here =
        |part: &'a [T]| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(part))).ok();
    let mut parts: Vec<&'a [T]> = items.chunks(share).collect();
    let Some(last) = parts.pop() else {
        return Vec::new();
    };
    let here = &here;
    std::thread::scope(|s| {
        let started: Vec<_> = parts
            .into_iter()
            .map(|part| {
                let thread = std::thread::Builder::new()
                    .name(name.into())
                    .spawn_scoped(s, logging_as_here(move || here(part)));
                (part, thread)
            })
            .collect();
        let last = (last, here(last));
        let mut done: Vec<(&'a [T], Option<R>)> = started
            .into_iter()
            .map(|(part, thread)| match thread {
                Ok(thread) => (part, thread.join().ok().flatten()),
                Err(_) => (part, here(part)),
            })
            .collect();
        done.push(last);
        done
    })
}

/// Log lines written to memory, for a test's own dispatcher (the layer's log is its threads'
/// own: [`logging_as_here`]).
#[cfg(test)]
#[derive(Clone, Default)]
pub(crate) struct CapturedLog(std::sync::Arc<Mutex<Vec<u8>>>);

#[cfg(test)]
impl CapturedLog {
    /// `f`, with what is logged at `level` and above on this thread (and the threads it starts
    /// for the crate's work) written here.
    pub(crate) fn during<R>(&self, level: tracing::Level, f: impl FnOnce() -> R) -> R {
        let log = tracing_subscriber::fmt()
            .with_writer(self.clone())
            .with_ansi(false)
            .with_max_level(level)
            .finish();
        tracing::subscriber::with_default(log, f)
    }

    /// What was logged.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.locked()).into_owned()
    }
}

#[cfg(test)]
impl std::io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.locked().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLog {
    type Writer = CapturedLog;
    fn make_writer(&'a self) -> CapturedLog {
        self.clone()
    }
}

/// A mutex taken whether or not a holder panicked.
pub(crate) trait Unpoisoned<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Unpoisoned<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A mutex an application thread takes only where it can at once, because a thread of the
/// layer's own at idle priority also takes it (SPEC: no application thread waits on such a
/// lock; one preempted while it holds it keeps it until a core falls idle). The other holders
/// hold it for a few statements, so a short spin covers the application's own threads; past
/// it, `None`, and the caller does without (its fallback says how).
pub(crate) trait AtOnce<T: ?Sized> {
    fn locked_at_once(&self) -> Option<MutexGuard<'_, T>>;
}

thread_local! {
    static AT_IDLE_PRIORITY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as one of the layer's own at idle priority (as it lowers itself).
pub(crate) fn mark_at_idle_priority() {
    AT_IDLE_PRIORITY.set(true);
}

/// Whether the calling thread is one of the layer's own at idle priority: where application
/// threads wait on a lock, such a thread does without it or tells what it did (held by it while
/// it is preempted, the lock would keep them waiting until a core falls idle).
pub(crate) fn at_idle_priority() -> bool {
    AT_IDLE_PRIORITY.get()
}

/// Test only: `work`'s result, run on another thread that must end while the caller holds what it
/// holds (a lock the work must not wait on); `what` names the wait where it does not end.
#[cfg(test)]
pub(crate) fn done_elsewhere<R: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> R + Send + 'static,
) -> R {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    match result.recv_timeout(Duration::from_secs(30)) {
        Ok(r) => r,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what}: it waited"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: it panicked"),
    }
}

/// Tries at such a lock before its caller does without.
const AT_ONCE_SPINS: usize = 256;

impl<T: ?Sized> AtOnce<T> for Mutex<T> {
    fn locked_at_once(&self) -> Option<MutexGuard<'_, T>> {
        for _ in 0..AT_ONCE_SPINS {
            match self.try_lock() {
                Ok(held) => return Some(held),
                Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => std::hint::spin_loop(),
            }
        }
        None
    }
}

/// A read-write lock taken whether or not a holder panicked.
pub(crate) trait UnpoisonedRw<T: ?Sized> {
    fn reading(&self) -> RwLockReadGuard<'_, T>;
    fn writing(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> UnpoisonedRw<T> for RwLock<T> {
    fn reading(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn writing(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A condition variable's waits, their mutex taken back whether or not a holder panicked.
pub(crate) trait UnpoisonedWait {
    fn wait_on<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T>;
    fn wait_on_at_most<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        at_most: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult);
}

impl UnpoisonedWait for Condvar {
    fn wait_on<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    fn wait_on_at_most<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        at_most: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        self.wait_timeout(guard, at_most)
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_lock_held_elsewhere_is_not_waited_on_and_a_free_or_poisoned_one_is_taken() {
        let lock = Arc::new(Mutex::new(1));
        assert_eq!(lock.locked_at_once().map(|v| *v), Some(1));
        let held = lock.locked();
        let other = Arc::clone(&lock);
        let tried = std::thread::spawn(move || other.locked_at_once().is_none());
        assert!(tried.join().unwrap(), "held: done without");
        drop(held);
        let poisoner = Arc::clone(&lock);
        let _ = std::thread::spawn(move || {
            let _held = poisoner.lock().unwrap();
            panic!("poisons the lock");
        })
        .join();
        assert_eq!(lock.locked_at_once().map(|v| *v), Some(1));
    }

    #[test]
    fn shares_come_back_in_order_and_a_panicked_one_as_none() {
        let items: Vec<u32> = (0..10).collect();
        let sums = in_shares(&items, 3, "test-shares", |part| {
            assert!(!part.contains(&5), "a share fails");
            part.iter().sum::<u32>()
        });
        let parts: Vec<&[u32]> = sums.iter().map(|(part, _)| *part).collect();
        assert_eq!(parts, [&items[0..4], &items[4..8], &items[8..10]]);
        let sums: Vec<Option<u32>> = sums.into_iter().map(|(_, sum)| sum).collect();
        assert_eq!(sums, [Some(6), None, Some(17)]);
        // The last share, worked on this thread, panics: the others stand.
        let last = in_shares(&items, 3, "test-shares", |part| {
            assert!(!part.contains(&9), "the last share fails");
            part.iter().sum::<u32>()
        });
        let last: Vec<Option<u32>> = last.into_iter().map(|(_, sum)| sum).collect();
        assert_eq!(last, [Some(6), Some(22), None]);
        // More threads than items: a share an item.
        assert_eq!(
            in_shares(&items[..2], 8, "test-shares", |p| p.len()).len(),
            2
        );
    }

    #[test]
    fn a_lock_a_panicking_thread_held_is_taken_as_it_was_left() {
        let shared = Arc::new((Mutex::new(1), RwLock::new(2)));
        let held = shared.clone();
        let panicked = std::thread::spawn(move || {
            let mut a = held.0.lock().unwrap();
            let mut b = held.1.write().unwrap();
            *a = 10;
            *b = 20;
            panic!("a holder panics");
        })
        .join();
        assert!(panicked.is_err());
        assert!(shared.0.is_poisoned() && shared.1.is_poisoned());
        assert_eq!(*shared.0.locked(), 10);
        assert_eq!(*shared.1.reading(), 20);
        *shared.1.writing() = 21;
        assert_eq!(*shared.1.reading(), 21);
        let (guard, waited) = Condvar::new().wait_on_at_most(shared.0.locked(), Duration::ZERO);
        assert!(waited.timed_out());
        assert_eq!(*guard, 10);
    }
}
