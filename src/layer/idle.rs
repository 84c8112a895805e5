//! The idle scheduling class for the layer's own threads (the writer, and reading ahead once the
//! store is open and within its bound): they take only time no application thread wants, as
//! Mesa's disk-cache queue does, so a run that keeps every core busy building pipelines is not
//! slowed by the layer's bookkeeping. At `vkDestroyDevice` the rebuild's threads are raised
//! back (where Linux allows it) for the pipeline each is finishing, which the application waits
//! for.
//!
//! Measured on RADV (2 cores, ncnn at 2 threads, nine interleaved rounds): a reader at normal
//! priority made a third runnable thread beside the application's two, and every phase of
//! every pipeline stretched; at idle priority the warm run's wall time went from 1.74x to 1.53x
//! the monolithic cache's, and at 1 thread it did not change.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

/// As [`lower_this_threads_priority`], but the thread's reads keep the best-effort I/O class at
/// its default level: Linux otherwise derives the idle I/O class from the idle scheduling class,
/// and a reader whose reads wait behind every other read of the machine is of no use when the
/// entries are not in memory (the first run after a boot). Measured on RADV, pygfx at 1 thread
/// after dropping the page cache: lookups took 180-670 ms with idle-class reads ahead, 33-36 ms
/// with best-effort ones.
pub fn lower_this_threads_priority_but_not_its_reads(thread: &str) {
    lower_this_threads_priority(thread);
    #[cfg(target_os = "linux")]
    {
        const IOPRIO_WHO_PROCESS: libc::c_long = 1;
        const IOPRIO_CLASS_BE: libc::c_long = 2;
        const IOPRIO_CLASS_SHIFT: u32 = 13;
        const DEFAULT_LEVEL: libc::c_long = 4;
        let best_effort = (IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | DEFAULT_LEVEL;
        // SAFETY: ioprio_set takes three integers; who 0 names the calling thread.
        let set =
            unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, best_effort) };
        if set != 0 {
            tracing::debug!(thread, error = %std::io::Error::last_os_error(), "a thread of the layer keeps the idle I/O class");
        }
    }
}

/// Puts the calling thread in the idle scheduling class. Linux lets a thread lower its own
/// priority, never raise it again; where it is refused the thread runs as it was. Threads it
/// starts after this inherit the class.
pub fn lower_this_threads_priority(thread: &str) {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 names the calling thread; `param` is a valid sched_param.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
            tracing::debug!(thread, error = %std::io::Error::last_os_error(), "a thread of the layer keeps its priority");
        } else {
            crate::sync::mark_at_idle_priority();
        }
    }
}

thread_local! {
    /// This thread builds the title's record in the background: its objects are kept apart from
    /// the application's, and its pipelines counted apart.
    static REBUILDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as the background rebuild's (at its start).
pub fn mark_rebuild_thread() {
    REBUILDING.set(true);
}

/// Whether this thread is the background rebuild's.
pub fn on_rebuild_thread() -> bool {
    REBUILDING.get()
}

/// The name the background rebuild's thread is given; its replay workers inherit it (Linux keeps
/// the first 15 bytes).
pub const REBUILD_THREAD: &str = "pipekeep-rebuild";

/// How many thread ids [`ThreadIds`] keeps: the latest, older ones overwritten (the ended ones
/// need nothing).
const THREAD_IDS: usize = 64;

/// The ids of a device's threads of one kind, kept as each starts. Lock-free: the application's
/// thread reads them at `vkDestroyDevice`, and must not wait on an idle-priority thread.
pub struct ThreadIds {
    ids: [AtomicI32; THREAD_IDS],
    added: AtomicUsize,
}

impl Default for ThreadIds {
    fn default() -> Self {
        ThreadIds {
            ids: [const { AtomicI32::new(0) }; THREAD_IDS],
            added: AtomicUsize::new(0),
        }
    }
}

impl ThreadIds {
    /// Keeps the calling thread's id.
    pub fn add_this_thread(&self) {
        #[cfg(target_os = "linux")]
        {
            let slot = self.added.fetch_add(1, Ordering::AcqRel) % THREAD_IDS;
            // SAFETY: gettid has no preconditions.
            self.ids[slot].store(unsafe { libc::gettid() }, Ordering::Release);
        }
    }

    fn each(&self) -> impl Iterator<Item = i32> + '_ {
        self.ids
            .iter()
            .map(|id| id.load(Ordering::Acquire))
            .filter(|&id| id > 0)
    }
}

/// Puts the rebuild's threads in `ids` back in the normal scheduling class, where the process
/// may (`CAP_SYS_NICE`, or an `RLIMIT_NICE` that allows it): at `vkDestroyDevice`, the pipeline
/// each is building then ends without waiting for a core no application thread wants, which a
/// machine busy on every core may not give for minutes. Where Linux refuses, they finish at idle
/// priority, as before. Only threads still of the rebuild's name and class are touched (an
/// ended thread's id may be taken by another). How many were raised.
pub fn raise_threads(ids: &ThreadIds) -> usize {
    #[cfg(target_os = "linux")]
    {
        let mut raised = 0;
        for tid in ids.each() {
            let named = std::fs::read(format!("/proc/self/task/{tid}/comm"))
                .is_ok_and(|name| name.starts_with(&REBUILD_THREAD.as_bytes()[..15]));
            // SAFETY: sched_getscheduler takes a thread id; one that ended answers -1.
            if !named || unsafe { libc::sched_getscheduler(tid) } != libc::SCHED_IDLE {
                continue;
            }
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: a thread id of this process; `param` is a valid sched_param.
            if unsafe { libc::sched_setscheduler(tid, libc::SCHED_OTHER, &param) } != 0 {
                tracing::debug!(error = %std::io::Error::last_os_error(), "the rebuild's threads finish at idle priority");
                break;
            }
            raised += 1;
        }
        raised
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = ids;
        0
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn io_class_of_this_thread() -> libc::c_long {
        const IOPRIO_WHO_PROCESS: libc::c_long = 1;
        // SAFETY: ioprio_get takes two integers; who 0 names the calling thread.
        let prio = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0) };
        prio >> 13
    }

    #[test]
    fn a_reader_runs_at_idle_priority_but_reads_as_best_effort() {
        let (policy, io_class) = std::thread::spawn(|| {
            lower_this_threads_priority_but_not_its_reads("test reader");
            // SAFETY: pid 0 names the calling thread.
            (
                unsafe { libc::sched_getscheduler(0) },
                io_class_of_this_thread(),
            )
        })
        .join()
        .unwrap();
        assert_eq!(policy, libc::SCHED_IDLE);
        assert_eq!(io_class, 2, "best-effort I/O class");
    }

    #[test]
    fn the_rebuilds_threads_are_raised_back_where_the_process_may() {
        let ids = std::sync::Arc::new(ThreadIds::default());
        let (lowered_tx, lowered_rx) = std::sync::mpsc::channel();
        let (raised_tx, raised_rx) = std::sync::mpsc::channel::<()>();
        let kept = ids.clone();
        let rebuild = std::thread::Builder::new()
            .name(REBUILD_THREAD.into())
            .spawn(move || {
                lower_this_threads_priority("test rebuild");
                // A worker it starts inherits the name and the class.
                std::thread::spawn(move || {
                    kept.add_this_thread();
                    lowered_tx.send(()).unwrap();
                    raised_rx.recv().unwrap();
                    // SAFETY: pid 0 names the calling thread.
                    unsafe { libc::sched_getscheduler(0) }
                })
                .join()
                .unwrap()
            })
            .unwrap();
        // A thread of another name in the list is never touched.
        let other = std::thread::spawn({
            let ids = ids.clone();
            move || {
                lower_this_threads_priority("test other");
                ids.add_this_thread();
                std::thread::sleep(std::time::Duration::from_millis(200));
                // SAFETY: pid 0 names the calling thread.
                unsafe { libc::sched_getscheduler(0) }
            }
        });
        lowered_rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let raised = raise_threads(&ids);
        raised_tx.send(()).unwrap();
        let policy = rebuild.join().unwrap();
        assert_eq!(other.join().unwrap(), libc::SCHED_IDLE);
        // SAFETY: geteuid has no preconditions.
        let may = unsafe { libc::geteuid() } == 0;
        assert_eq!(
            (raised, policy),
            if may {
                (1, libc::SCHED_OTHER)
            } else {
                (0, libc::SCHED_IDLE)
            }
        );
    }

    #[test]
    fn a_writer_runs_at_idle_priority() {
        let policy = std::thread::spawn(|| {
            lower_this_threads_priority("test writer");
            // SAFETY: pid 0 names the calling thread.
            unsafe { libc::sched_getscheduler(0) }
        })
        .join()
        .unwrap();
        assert_eq!(policy, libc::SCHED_IDLE);
    }
}
