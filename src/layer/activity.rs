//! When the application last built a pipeline of its own, and how many of its threads build one
//! now: the background rebuild waits while it builds (its own pipelines are built and kept anyway;
//! the rebuild's are for those it does not reach this run), and so does the writer thread, within
//! bounds, unless the application leaves cores free beside its builds (`writer`).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::Thread;

use crate::sync::Unpoisoned;
use std::time::{Duration, Instant};

/// The last moment the application began or ended a pipeline, in milliseconds since this was
/// made (with the device), counted from 1: 0 is "never".
#[derive(Debug)]
pub struct AppActivity {
    since: Instant,
    last_ms: AtomicU64,
    /// The application's threads inside a pipeline's (or shader's) creation now.
    building: AtomicUsize,
    /// The machine's cores.
    cores: usize,
    /// The one thread that waits for the application's first pipeline
    /// ([`AppActivity::wait_until_quiet_after_building`]), woken by it. Behind a lock the first
    /// touch takes once a device, after its write: a waiter told before it is woken, and one told
    /// after it sees that write.
    first_waiter: Mutex<Option<Thread>>,
}

impl Default for AppActivity {
    fn default() -> AppActivity {
        AppActivity::on_cores(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// The fewest cores of a machine on which the application may leave cores free for the layer's
/// writing beside its builds: on two, the writer thread's files beside one application thread's
/// compiles cost them 5-10% more time in RADV (`writer`).
const FREE_CORES_FROM: usize = 4;

impl AppActivity {
    /// Watching an application on a machine of `cores` cores.
    pub fn on_cores(cores: usize) -> AppActivity {
        AppActivity {
            since: Instant::now(),
            last_ms: AtomicU64::new(0),
            building: AtomicUsize::new(0),
            cores,
            first_waiter: Mutex::new(None),
        }
    }

    /// The application begins a pipeline (or shaders) on this thread: touched now and again when
    /// the guard drops, and counted as building until then (a panic inside drops it too).
    #[must_use = "the build is counted until the guard drops"]
    pub fn begin(&self) -> BuildingNow<'_> {
        self.touch();
        self.building.fetch_add(1, Ordering::Relaxed);
        BuildingNow(self)
    }

    /// Whether the application's threads building pipelines (of this device) leave half the
    /// machine's cores free now, on a machine of at least [`FREE_CORES_FROM`] (other threads and
    /// processes are not seen). Not fewer: a sandbox may run the writer thread at the
    /// application's priority whatever it asks (gVisor on the H200: pygfx at 16 threads, writing
    /// where two of 16 cores were free, was ready at 1.04-1.14x no layer's against 1.05-1.08x).
    pub fn leaves_cores_free(&self) -> bool {
        self.cores >= FREE_CORES_FROM && self.building.load(Ordering::Relaxed) * 2 <= self.cores
    }

    /// The application began or ended a pipeline now. Called twice a pipeline from every
    /// application thread: the shared word is written only when the millisecond moved on, so
    /// threads building at once mostly read it.
    pub fn touch(&self) {
        let now = self.now_ms();
        if self.last_ms.load(Ordering::Relaxed) < now
            && self.last_ms.fetch_max(now, Ordering::Relaxed) == 0
        {
            self.wake_first_waiter();
        }
    }

    /// The application's first touch wakes the thread waiting for it.
    #[cold]
    fn wake_first_waiter(&self) {
        if let Some(waiter) = self.first_waiter.locked().as_ref() {
            waiter.unpark();
        }
    }

    /// Milliseconds since this was made, from 1.
    fn now_ms(&self) -> u64 {
        self.since.elapsed().as_millis() as u64 + 1
    }

    /// How long the application has built no pipeline (since the device was made, if never).
    pub fn quiet_for(&self) -> Duration {
        let last = self.last_ms.load(Ordering::Relaxed).max(1);
        Duration::from_millis(self.now_ms().saturating_sub(last))
    }

    /// Whether the application has begun a pipeline since the device was made.
    fn began(&self) -> bool {
        self.last_ms.load(Ordering::Relaxed) > 0
    }

    /// Returns once the application has built no pipeline for `quiet` (`true`), or once `stop`
    /// is set (`false`), checking every 20 ms at most. The waiting thread parks, so that whoever
    /// sets `stop` must unpark it: the device's end does so for its opening thread, which it joins
    /// (that thread's 20 ms naps were most of a short launch's end on RADV).
    pub fn wait_until_quiet(&self, quiet: Duration, stop: &AtomicBool) -> bool {
        loop {
            if stop.load(Ordering::Acquire) {
                return false;
            }
            let so_far = self.quiet_for();
            if so_far >= quiet {
                return true;
            }
            std::thread::park_timeout((quiet - so_far).min(Duration::from_millis(20)));
        }
    }

    /// As [`AppActivity::wait_until_quiet`], but only a pause after the application's first
    /// pipeline counts: the time before it (loading its shaders) is not a pause in its loading.
    /// Until that pipeline the thread sleeps, woken by it (an application that builds none does
    /// not wake it 50 times a second for as long as it runs); a second thread waiting so at once
    /// checks every 20 ms.
    pub fn wait_until_quiet_after_building(&self, quiet: Duration, stop: &AtomicBool) -> bool {
        self.wait_for_the_first_pipeline(stop) && self.wait_until_quiet(quiet, stop)
    }

    /// Returns once the application has begun a pipeline (`true`), or once `stop` is set.
    fn wait_for_the_first_pipeline(&self, stop: &AtomicBool) -> bool {
        let woken = {
            let mut waiter = self.first_waiter.locked();
            waiter.get_or_insert_with(std::thread::current).id() == std::thread::current().id()
        };
        while !self.began() {
            if stop.load(Ordering::Acquire) {
                return false;
            }
            match woken {
                true => std::thread::park(),
                false => std::thread::park_timeout(Duration::from_millis(20)),
            }
        }
        true
    }
}

/// An application thread's build under way ([`AppActivity::begin`]).
#[must_use = "the build is counted until the guard drops"]
pub struct BuildingNow<'a>(&'a AppActivity);

impl Drop for BuildingNow<'_> {
    fn drop(&mut self) {
        self.0.building.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn cores_are_free_beside_builds_only_where_half_have_none_on_a_machine_of_four_or_more() {
        let two = AppActivity::on_cores(2);
        assert!(!two.leaves_cores_free(), "two cores: never");
        let _one = two.begin();
        assert!(!two.leaves_cores_free(), "two cores: never");
        let four = AppActivity::on_cores(4);
        let first = four.begin();
        let second = four.begin();
        assert!(four.leaves_cores_free(), "two of four building");
        let third = four.begin();
        assert!(!four.leaves_cores_free(), "three of four building");
        drop((first, third));
        assert!(four.leaves_cores_free());
        std::thread::sleep(Duration::from_millis(300));
        drop(second);
        assert_eq!(four.building.load(Ordering::Relaxed), 0);
        assert!(
            four.quiet_for() < Duration::from_millis(200),
            "touched at the end"
        );
    }

    #[test]
    fn a_build_that_panics_is_no_longer_counted() {
        let activity = AppActivity::on_cores(4);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _building = activity.begin();
            panic!("inside the build");
        }));
        assert!(unwound.is_err());
        assert_eq!(activity.building.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn the_wait_ends_only_after_the_application_stopped_building() {
        let activity = Arc::new(AppActivity::default());
        let building = Arc::new(AtomicBool::new(true));
        let app = {
            let (activity, building) = (activity.clone(), building.clone());
            std::thread::spawn(move || {
                for _ in 0..60 {
                    activity.touch();
                    std::thread::sleep(Duration::from_millis(5));
                }
                building.store(false, Ordering::Release);
            })
        };
        activity.touch();
        let never = AtomicBool::new(false);
        assert!(activity.wait_until_quiet(Duration::from_millis(500), &never));
        assert!(
            !building.load(Ordering::Acquire),
            "the wait ended while the application built"
        );
        app.join().unwrap();
    }

    #[test]
    fn only_a_pause_after_the_first_pipeline_ends_the_wait_after_building() {
        let activity = Arc::new(AppActivity::default());
        let touched = Arc::new(AtomicBool::new(false));
        let app = {
            let (activity, touched) = (activity.clone(), touched.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(80));
                touched.store(true, Ordering::Release);
                activity.touch();
            })
        };
        let never = AtomicBool::new(false);
        assert!(activity.wait_until_quiet_after_building(Duration::from_millis(10), &never));
        assert!(
            touched.load(Ordering::Acquire),
            "the wait ended before the first pipeline"
        );
        app.join().unwrap();
    }

    /// The thread waiting for the first pipeline sleeps until it comes: no wake while the
    /// application builds none (before, one each 20 ms), and the first pipeline ends its sleep.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_wait_for_the_first_pipeline_sleeps_until_it_comes() {
        let activity = Arc::new(AppActivity::default());
        let (task_tx, task_rx) = std::sync::mpsc::channel();
        let waiter = {
            let activity = activity.clone();
            std::thread::spawn(move || {
                // The thread's own status: "/proc/<pid>/task/<tid>".
                task_tx
                    .send(std::fs::read_link("/proc/thread-self").unwrap())
                    .unwrap();
                let never = AtomicBool::new(false);
                activity.wait_until_quiet_after_building(Duration::from_millis(10), &never)
            })
        };
        let status = std::path::Path::new("/proc")
            .join(task_rx.recv().unwrap())
            .join("status");
        let field = |name: &str| {
            let text = std::fs::read_to_string(&status).unwrap();
            let line = text
                .lines()
                .find(|l| l.starts_with(name))
                .map(str::to_owned);
            line.unwrap().split_whitespace().nth(1).unwrap().to_owned()
        };
        let switches = || field("voluntary_ctxt_switches:").parse::<u64>().unwrap();
        // Asleep in its wait: it has slept once and sleeps now.
        let until = Instant::now() + Duration::from_secs(30);
        while (switches() == 0 || field("State:") != "S") && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        let asleep = switches();
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            switches(),
            asleep,
            "woken while the application built nothing"
        );
        activity.touch();
        let until = Instant::now() + Duration::from_secs(30);
        while !waiter.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(waiter.is_finished(), "the first pipeline did not wake it");
        assert!(waiter.join().unwrap());
    }

    #[test]
    fn a_stop_ends_the_wait() {
        let activity = AppActivity::default();
        activity.touch();
        let stop = AtomicBool::new(true);
        assert!(!activity.wait_until_quiet(Duration::from_secs(3600), &stop));
    }
}
