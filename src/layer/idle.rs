//! The idle scheduling class for the layer's own threads (the writer, and reading ahead once the
//! store is open and within its bound): they take only time no application thread wants, as
//! Mesa's disk-cache queue does, so a run that keeps every core busy building pipelines is not
//! slowed by the layer's bookkeeping.
//!
//! Measured on RADV (2 cores, ncnn at 2 threads, nine interleaved rounds): a reader at normal
//! priority made a third runnable thread beside the application's two, and every phase of
//! every pipeline stretched; at idle priority the warm run's wall time went from 1.74x to 1.53x
//! the monolithic cache's, and at 1 thread it did not change.

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
        }
    }
}
