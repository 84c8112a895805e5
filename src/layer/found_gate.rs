//! At most a few found pipelines inside the driver at once (`PIPEKEEP_FOUND_CALLS`). NVIDIA's
//! driver builds a found pipeline in ~0.1 ms alone, but many threads building found pipelines
//! at once contend inside it until each takes ten times that: on the H200 (driver 580.159.04, 16
//! cores), warm at 16 threads, ncnn's 3,115 found pipelines took 808-1,009 ms of wall time with
//! every thread let in, 170-176 ms with two at a time, 214-238 ms with four, and 565-1,066 ms
//! through the monolithic cache without the layer. Three is what `auto` takes (c8a8e73,
//! docs/bench/2026-12-01.md, five interleaved rounds against four): ncnn 0.82x four's
//! accumulated time at 16 threads and 0.77x at 8, the test app 0.6-0.7x at 4 and 16, ncnn at 4
//! threads level, pygfx (mostly graphics, each longer in the driver) 1.02x at 4 threads and
//! 1.05-1.16x at 8 and 16; two at a time cost pygfx 1.2x at 4 threads (8540d66,
//! docs/bench/2026-11-30.md).
//! A compile is never held back: only a build from a found entry passes the gate, and a thread
//! that has waited [`WAIT_MOST`] goes in anyway, so an entry the driver compiles after all
//! (refused) delays the others by no more than that.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::settings::FoundCallsSetting;
use crate::store::identity::NVIDIA;
use crate::sync::{Unpoisoned, UnpoisonedWait};

/// How many found pipelines `auto` lets into NVIDIA's driver at once.
pub const NVIDIA_AT_ONCE: usize = 3;

/// The longest a thread waits for its turn before it goes in anyway.
pub const WAIT_MOST: Duration = Duration::from_millis(5);

/// How many found pipelines are in the driver, and how many may be.
#[derive(Debug)]
pub struct FoundGate {
    most: usize,
    state: Mutex<State>,
    turn: Condvar,
}

#[derive(Debug, Default)]
struct State {
    inside: usize,
    /// Threads waiting for a place: only then does leaving wake one (a wake is a system call,
    /// and with no more threads than places nobody ever waits).
    waiting: usize,
}

/// A build's place in the driver; given back when dropped.
pub struct Inside<'a> {
    gate: &'a FoundGate,
    /// It went in over the bound, having waited its longest.
    over: bool,
}

impl Inside<'_> {
    pub fn went_in_over(&self) -> bool {
        self.over
    }
}

impl FoundGate {
    /// The gate a device's settings and driver ask for: none where every thread goes in.
    pub fn for_device(setting: FoundCallsSetting, vendor_id: u32) -> Option<FoundGate> {
        match setting {
            FoundCallsSetting::AtMost(most) => Some(FoundGate::new(most)),
            FoundCallsSetting::Auto if vendor_id == NVIDIA => Some(FoundGate::new(NVIDIA_AT_ONCE)),
            FoundCallsSetting::Auto | FoundCallsSetting::Off => None,
        }
    }

    pub fn new(most: usize) -> FoundGate {
        FoundGate {
            most: most.max(1),
            state: Mutex::default(),
            turn: Condvar::new(),
        }
    }

    /// How many found pipelines may be inside the driver at once.
    pub fn most(&self) -> usize {
        self.most
    }

    /// Waits for a place (at most [`WAIT_MOST`]), and takes it.
    pub fn enter(&self) -> Inside<'_> {
        let mut state = self.state.locked();
        let mut over = false;
        if state.inside >= self.most {
            let deadline = Instant::now() + WAIT_MOST;
            state.waiting += 1;
            while state.inside >= self.most {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    over = true;
                    break;
                }
                state = self.turn.wait_on_at_most(state, left).0;
            }
            state.waiting -= 1;
        }
        state.inside += 1;
        Inside { gate: self, over }
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        let mut state = self.gate.state.locked();
        state.inside -= 1;
        let someone_waits = state.waiting > 0;
        drop(state);
        if someone_waits {
            self.gate.turn.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn no_more_than_the_bound_are_inside_at_once() {
        let gate = Arc::new(FoundGate::new(2));
        let [now, most, overs] = [(); 3].map(|_| Arc::new(AtomicUsize::new(0)));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (gate, now, most, overs) =
                    (gate.clone(), now.clone(), most.clone(), overs.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let inside = gate.enter();
                        overs.fetch_add(usize::from(inside.went_in_over()), Ordering::SeqCst);
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(n, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(100));
                        now.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        // Only a thread kept out past WAIT_MOST (a loaded machine) goes in over the bound.
        let (most, overs) = (most.load(Ordering::SeqCst), overs.load(Ordering::SeqCst));
        assert!(most <= 2 + overs, "{most} inside at once, {overs} over");
        assert_eq!(
            gate.state.lock().unwrap().inside,
            0,
            "every place given back"
        );
    }

    #[test]
    fn a_thread_kept_out_too_long_goes_in_anyway() {
        let gate = FoundGate::new(1);
        let _held = gate.enter(); // as a build the driver compiles after all
        let started = Instant::now();
        let second = gate.enter();
        assert!(started.elapsed() >= WAIT_MOST);
        assert!(second.went_in_over());
        assert_eq!(gate.state.lock().unwrap().inside, 2);
        drop(second);
        assert_eq!(gate.state.lock().unwrap().inside, 1);
    }
}
