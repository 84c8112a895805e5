//! A device's end, at `vkDestroyDevice` or at the process's exit: its threads stopped and
//! joined, the entries still queued written, then the run's order of use and its final line.

use super::*;

/// How long the exit handler gives the opening thread to see the stop, and the writer thread
/// to end what it is writing. One left after it never
/// calls into the driver again: the handler shuts the device's driver gate.
const EXIT_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

impl DeviceData {
    /// Stops this device's own threads: the flag every wait of theirs sees, then a wake for the
    /// readers already waiting, and the rebuild's threads put back at normal priority where
    /// Linux allows it, so that the pipeline each is finishing (which `vkDestroyDevice` waits
    /// for) does not wait for an idle core on a machine busy on every core. Returns at once; the
    /// threads end soon after.
    fn stop_threads(&self) {
        self.stop.store(true, Ordering::Release);
        self.rebuild_stop.store(true, Ordering::Release);
        if let Some(rebuild) = self.rebuilder.locked().as_ref() {
            rebuild.thread().unpark();
        }
        // Out of its wait for the application's pause at once, and out of its sleep until the
        // first pipeline, which nothing else ends: the end joins it.
        if let Some(opener) = self.opener.locked().as_ref() {
            opener.thread().unpark();
        }
        crate::layer::idle::raise_threads(&self.rebuild_threads);
        if let Some(store) = self.opened_store() {
            store.wake_readers_to_stop();
        }
    }

    /// The background rebuild's thread: `None` where none was started (or it was joined), else
    /// whether it has ended.
    fn rebuild_ended(&self) -> Option<bool> {
        self.rebuilder.locked().as_ref().map(|r| r.is_finished())
    }

    /// Joins the opening thread if it ends within `limit` (it sees the stop flag at its next
    /// step); else leaves it.
    fn join_the_opener_within(&self, limit: std::time::Duration) {
        let started = std::time::Instant::now();
        while started.elapsed() < limit {
            let finished = self
                .opener
                .locked()
                .as_ref()
                .is_none_or(|o| o.is_finished());
            if finished {
                if let Some(opener) = self.opener.locked().take() {
                    let _ = opener.join();
                }
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        tracing::debug!(
            "the store's opening thread is still at work at exit; left to end with the process"
        );
    }

    /// Joins the background rebuild, if one was started. True when one was.
    fn join_the_rebuild(&self) -> bool {
        let rebuild = self.rebuilder.locked().take();
        rebuild.map(|r| r.join()).is_some()
    }

    /// Test only: waits for a background rebuild to be started by the opening thread and to
    /// finish (at most a minute), instead of stopping it; at normal priority where Linux allows
    /// it, since a machine busy on every core gives an idle-priority rebuild no time.
    pub(super) fn let_the_rebuild_finish(&self) {
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(60) {
            match self.rebuild_ended() {
                Some(true) => {
                    self.join_the_rebuild();
                    return;
                }
                // Again each time: the rebuild's workers lower themselves as they start.
                Some(false) => {
                    crate::layer::idle::raise_threads(&self.rebuild_threads);
                }
                None => {
                    let opener_done = self
                        .opener
                        .locked()
                        .as_ref()
                        .is_none_or(|o| o.is_finished());
                    if opener_done {
                        return;
                    }
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// The waiting files this process took and wrote fewer than half of stay as they are: the
    /// writer passes over their entries
    /// ([`crate::store::Store::keep_waiting_files_mostly_unwritten`]).
    fn keep_waiting_files_mostly_unwritten(&self) {
        if let Some(store) = self.opened_store() {
            store.keep_waiting_files_mostly_unwritten();
        }
    }

    /// The waiting files this process took whose entries are written (or left waiting again)
    /// are removed.
    fn drop_settled_waiting(&self) {
        if let Some(store) = self.opened_store() {
            store.drop_settled_waiting();
        }
    }

    /// The run's order of use, for the next run's reading ahead, once its stamps are written.
    fn remember_use_order(&self) {
        if let Some(store) = self.opened_store() {
            if let Err(e) = store.remember_use_order() {
                tracing::debug!(error = %e, "the run's order of use is not kept");
            }
            store.note_bytes_at_end();
        }
    }

    /// The run's end: the entries still queued, then the final compile-watch line and the run's
    /// line in `runs.jsonl`.
    pub(super) fn finish(&self, at_exit: bool) {
        if !self.works_here() {
            return;
        }
        if self.finished.swap(true, Ordering::AcqRel) {
            return; // the exit handler and vkDestroyDevice on another thread: once
        }
        let started = std::time::Instant::now();
        self.stop_threads();
        // The opening thread first: it may start the background rebuild until it sees the stop.
        if at_exit {
            // The opening thread and the readers ahead see the stop; each is given a moment to
            // end before the process's destructors run under them, never waited on for longer.
            self.join_the_opener_within(EXIT_WAIT);
        } else if let Some(opener) = self.opener.locked().take() {
            let _ = opener.join();
        }
        // The rebuild ends after the pipeline it is building, before its commands can go: it
        // calls the driver through this device.
        self.join_the_rebuild();
        self.objects.identifiers.keep_the_rest();
        if at_exit {
            // The application may destroy its device in a static destructor once this handler
            // returns: an opening thread left to end with the process (reading an entry for
            // NVIDIA's dictionary, say) never calls into the driver from now on, and one inside
            // it is waited for (its call ends).
            self.driver_gate.shut();
            if let Some(store) = self.opened_store() {
                store.stop_reading_ahead();
            }
            self.keep_waiting_files_mostly_unwritten();
            // As long as the opening thread is given: an entry cut short costs a compile.
            self.writer.drain_here(EXIT_WAIT);
            self.drop_settled_waiting();
            self.remember_use_order();
        } else {
            let last = self
                .store
                .as_ref()
                .is_some_and(|s| s.devices.fetch_sub(1, Ordering::AcqRel) == 1);
            if last {
                self.keep_waiting_files_mostly_unwritten();
            }
            self.writer.finish(last);
            self.drop_settled_waiting();
            if let (true, Some(store)) = (last, self.opened_store()) {
                store.stop_reading_ahead();
                self.remember_use_order();
                if self.watch.tally().found > 0 {
                    store.forget_blamed_pieces();
                }
            }
        }
        self.watch.ended(started.elapsed());
        let runs = self
            .root
            .as_ref()
            .map(|r| r.join(&self.title).join("runs.jsonl"));
        let runs = runs.filter(|p| p.parent().is_some_and(|d| d.is_dir()));
        let identity = self.identity.dir_name();
        if let Some(line) = self.watch.finish(
            runs.as_deref(),
            &self.device_name,
            &identity,
            self.backend().name(),
        ) {
            if at_exit {
                crate::layer::guard::write_at_exit(&line);
            } else {
                tracing::info!("{line}");
                if let Some(longest) = self.watch.longest_line() {
                    tracing::info!("{longest}");
                }
            }
        }
    }
}
