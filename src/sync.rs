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

/// A mutex taken whether or not a holder panicked.
pub(crate) trait Unpoisoned<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Unpoisoned<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
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
