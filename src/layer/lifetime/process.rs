//! The process's exit handler (the run's end for an application that never destroys its
//! device) and fork handler (a child made by `fork` passes everything through).

use super::*;

extern "C" fn at_exit() {
    guarded(
        "exit",
        || {
            for device in DEVICES.values() {
                device.finish(true);
            }
        },
        || (),
    );
}

extern "C" fn in_forked_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
    crate::layer::marker_map::let_go_in_forked_child();
}

/// The exit handler and the fork handler, registered once, before the first device's data.
pub(super) fn register_process_handlers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: plain functions of this library, which is never unloaded (-z nodelete).
        if unsafe { libc::atexit(at_exit) } != 0 {
            tracing::debug!(
                "no exit handler: a run that never destroys its device writes no final line"
            );
        }
        // SAFETY: as above; the child handler bumps an atomic and points the inherited markers'
        // descriptors at /dev/null (async-signal-safe calls only).
        if unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) } != 0 {
            tracing::debug!("no fork handler: a child made by fork would not know it");
        }
    });
}
