//! Test only (`PIPEKEEP_TEST_STALL_REBUILD`): the background rebuild's first object made stalls
//! its thread inside its object table's write lock, as an idle-priority thread that no core is
//! given, until the application has made five pipelines beside it (at most a minute, or until
//! the device ends). The application must go on meanwhile (SPEC: no application thread waits on
//! a lock that a thread of the layer's own at idle priority may hold); the log says which.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::guard::SETTINGS;
use super::idle::on_rebuild_thread;

static BEGUN: AtomicBool = AtomicBool::new(false);
static STALLED: AtomicBool = AtomicBool::new(false);
static MADE_BESIDE: AtomicU64 = AtomicU64::new(0);
static ENDING: AtomicBool = AtomicBool::new(false);

/// Pipelines the application must make beside the stalled thread.
const BESIDE: u64 = 5;

/// Called by a table's writer while it holds the lock: the rebuild's first one stalls here.
pub(super) fn hold_here() {
    let Some(path) = SETTINGS.test_stall_rebuild.as_ref() else {
        return;
    };
    if !on_rebuild_thread() || BEGUN.swap(true, Ordering::AcqRel) {
        return;
    }
    STALLED.store(true, Ordering::Release);
    let _ = std::fs::File::create(path);
    tracing::info!("a rebuild thread stalls inside its object table's lock");
    let started = Instant::now();
    while MADE_BESIDE.load(Ordering::Acquire) < BESIDE
        && !ENDING.load(Ordering::Acquire)
        && started.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    STALLED.store(false, Ordering::Release);
    let made = MADE_BESIDE.load(Ordering::Acquire);
    if made >= BESIDE {
        tracing::info!(
            made,
            "the stalled rebuild thread goes on: the application went on beside it"
        );
    } else {
        tracing::warn!(
            made,
            "the stalled rebuild thread goes on: the application did not go on beside it"
        );
    }
}

/// The application made a pipeline.
pub(super) fn app_made_one() {
    if STALLED.load(Ordering::Acquire) {
        MADE_BESIDE.fetch_add(1, Ordering::AcqRel);
    }
}

/// A device ends: a stalled thread goes on.
pub(super) fn device_ends() {
    ENDING.store(true, Ordering::Release);
}
