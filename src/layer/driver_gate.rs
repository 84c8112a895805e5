//! Whether a thread of the layer's own (the opening thread handing NVIDIA's dictionary over, the
//! background rebuild) may still call into a device's driver. The device's end shuts the gate:
//! from then on no such thread enters, and the end waits for those already inside, each in one
//! call into the driver, which ends. A thread that is not inside (the opening thread reading an
//! entry, which may outlast the exit handler's wait for it) is never waited for: it finds the
//! gate shut when it comes to the driver, and so never calls into a device the application
//! destroys after the exit handler (a static destructor) or after `vkDestroyDevice`.
//!
//! Entering never waits (a thread inside may enter again, as the rebuild does through the layer's
//! own pipeline intercept): only the end waits, and only on the threads inside.

use std::sync::{Arc, Condvar, Mutex};

use crate::sync::{Unpoisoned, UnpoisonedWait};

/// One device's gate into its driver, for the layer's own threads.
#[derive(Debug, Default)]
pub struct DriverGate {
    state: Mutex<State>,
    left: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The device ended (`vkDestroyDevice`, or the exit handler): nobody enters again.
    shut: bool,
    /// Threads of the layer's inside the driver.
    inside: usize,
    /// Ends waiting for them (test only: to see that an end waits).
    ending: usize,
}

/// A thread's stay inside the driver; it leaves when this is dropped.
#[derive(Debug)]
pub struct Inside {
    gate: Arc<DriverGate>,
}

impl DriverGate {
    /// Lets the calling thread into the driver, unless the device ended (`None`: make no call).
    /// Never waits.
    pub fn enter(self: &Arc<Self>) -> Option<Inside> {
        let mut state = self.state.locked();
        if state.shut {
            return None;
        }
        state.inside += 1;
        Some(Inside { gate: self.clone() })
    }

    /// The device ends: no thread of the layer's enters its driver from now on, and this returns
    /// once those inside have left (each is in one call, which ends). Again later: at once.
    pub fn shut(&self) {
        let mut state = self.state.locked();
        state.shut = true;
        state.ending += 1;
        while state.inside > 0 {
            state = self.left.wait_on(state);
        }
        state.ending -= 1;
    }

    /// Test only: how many ends wait for threads inside.
    #[cfg(test)]
    pub fn ends_waiting(&self) -> usize {
        self.state.locked().ending
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let mut state = self.gate.state.locked();
        state.inside -= 1;
        if state.inside == 0 && state.ending > 0 {
            self.gate.left.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_shut_nobody_enters_and_the_end_waits_for_those_inside() {
        let gate = Arc::new(DriverGate::default());
        let first = gate.enter().expect("open");
        let again = gate.enter().expect("a thread inside may enter again");
        drop(again);
        let ending = {
            let gate = gate.clone();
            std::thread::spawn(move || gate.shut())
        };
        while gate.ends_waiting() == 0 {
            assert!(
                !ending.is_finished(),
                "the end returned with a thread inside"
            );
            std::thread::yield_now();
        }
        assert!(gate.enter().is_none(), "shut: nobody enters");
        assert!(!ending.is_finished());
        drop(first);
        ending.join().unwrap();
        assert!(gate.enter().is_none());
        gate.shut(); // again: at once
    }
}
