//! Entries announced for writing whose files are not written yet: the layer's writer queue holds
//! them until the application pauses. A lookup in the same process finds them from memory, so
//! that a call right after the build that queued an entry means what it meant without the layer
//! (an application asking again with `FAIL_ON_PIPELINE_COMPILE_REQUIRED`, as asynchronous
//! pre-compilers and vkd3d-proton do, gets its pipeline, not `VK_PIPELINE_COMPILE_REQUIRED`).
//!
//! The bytes stay where the queue keeps them (NVIDIA's with their dictionary held apart): this
//! map holds a weak way to them, not a copy, and not the data's life. The queue's job holds the
//! data until its file is renamed in place (or its write failed), then drops it: from then on
//! the map's way leads nowhere, and a lookup opens the file. So the writer, at idle priority,
//! never takes this map's lock (SPEC: no application thread waits on a lock an idle-priority
//! thread may hold; a writer preempted holding it while every core builds would keep every
//! lookup waiting), nor does any thread of the layer's own at idle priority (the rebuild's
//! lookups do without it). Ways that lead nowhere are cleared by the application's threads as
//! they queue more.
//!
//! An entry an earlier process left waiting may need no writing after all: its file stays as it
//! was, the bound dropped it, or this process queued the key again. The data then says so
//! ([`Queued::passed_over`]): the writer reads it there, and lookups no longer find it. A bound
//! pass (at idle priority) reaches an earlier process's entry through ways of its own, which no
//! application thread takes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use super::envelope::PayloadKind;
use super::payload::{Checked, Payload};
use crate::key::PipelineKey;
use crate::sync::Unpoisoned;

/// An entry's data while it waits to be written.
pub trait QueuedData: Send + Sync {
    /// The data as the driver gave it, for a lookup: held as it stands where it can be (an
    /// entry taken from a waiting file, in that file's bytes), else put together.
    fn payload(&self) -> Payload;
}

impl QueuedData for Vec<u8> {
    fn payload(&self) -> Payload {
        Payload::whole(Arc::new(self.clone()), 0..self.len())
    }
}

/// An entry's data as the queue holds it (the one strong hold on it, until its file is in
/// place), with whether it still needs writing.
pub struct Queued<T: ?Sized> {
    passed_over: AtomicBool,
    /// The live count of the map holding a way to it, told at its drop.
    counted: OnceLock<Arc<AtomicUsize>>,
    data: T,
}

impl<T> Queued<T> {
    pub fn new(data: T) -> Arc<Queued<T>> {
        Arc::new(Queued {
            passed_over: AtomicBool::new(false),
            counted: OnceLock::new(),
            data,
        })
    }
}

impl<T: ?Sized> Drop for Queued<T> {
    fn drop(&mut self) {
        if let Some(live) = self.counted.get() {
            live.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl<T: ?Sized> Queued<T> {
    /// Whether it no longer needs writing (for an earlier process's entry: kept in its waiting
    /// file, dropped by the bound, or queued again since).
    pub fn passed_over(&self) -> bool {
        self.passed_over.load(Ordering::Acquire)
    }

    fn pass_over(&self) {
        self.passed_over.store(true, Ordering::Release);
    }
}

impl<T: ?Sized> std::ops::Deref for Queued<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.data
    }
}

/// One entry waiting: its kind and a way to its data.
type Waiting = (PayloadKind, Weak<Queued<dyn QueuedData>>);

/// The entries waiting to be written, by key. Only the application's threads (and the device's
/// end) take its lock; see the module doc.
#[derive(Default)]
pub(super) struct QueuedEntries {
    pub(super) waiting: Mutex<Ways>,
    /// How many entries held here are still alive (counted at their hold, counted out at their
    /// data's drop, with no lock): a run whose queue is empty, a warm one, takes no lock.
    live: Arc<AtomicUsize>,
    /// The entries earlier processes left waiting, queued at the opening: a bound pass (on the
    /// writer's thread, or the opening's, at idle priority) passes over those it drops from
    /// their file through these ways, never through the lookups' map. Taken by the opening
    /// (before the store is published) and by bound passes, which run one at a time: never by
    /// a lookup.
    earlier: Mutex<HashMap<PipelineKey, Weak<Queued<dyn QueuedData>>>>,
}

#[derive(Default)]
pub(super) struct Ways {
    by_key: HashMap<PipelineKey, Waiting>,
    /// How many there were after the last clearing: cleared again at twice as many (each clearing
    /// costs what the ways added since, and a cold run's map stays near what its queue holds).
    after_clearing: usize,
}

/// Ways held before the first clearing.
const CLEARED_FROM: usize = 256;

impl std::fmt::Debug for QueuedEntries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuedEntries")
            .field("live", &self.live.load(Ordering::Relaxed))
            .finish()
    }
}

impl QueuedEntries {
    /// Holds a way to `data` until its holder drops it. An earlier entry of the key, still
    /// held, needs no writing: this one is the newer.
    pub(super) fn hold(
        &self,
        key: PipelineKey,
        kind: PayloadKind,
        data: &Arc<Queued<dyn QueuedData>>,
    ) {
        let replaced = {
            let mut ways = self.waiting.locked();
            if data.counted.set(Arc::clone(&self.live)).is_ok() {
                self.live.fetch_add(1, Ordering::AcqRel);
            }
            let replaced = ways.by_key.insert(key, (kind, Arc::downgrade(data)));
            ways.clear_if_due();
            replaced.and_then(|(_, way)| way.upgrade())
        };
        // Past the lock: where the holder dropped it meanwhile, its data is freed here.
        if let Some(older) = replaced {
            older.pass_over();
        }
    }

    /// Holds a way to an entry an earlier process left waiting, besides [`QueuedEntries::hold`]:
    /// at the opening, before the store is published.
    pub(super) fn hold_earlier(&self, key: PipelineKey, data: &Arc<Queued<dyn QueuedData>>) {
        self.earlier.locked().insert(key, Arc::downgrade(data));
    }

    /// An entry an earlier process left waiting needs no writing, and is no longer found (its
    /// file stays as it was, or a bound pass dropped it from there): marked on its data, so the
    /// lookups' map is not taken (a bound pass runs at idle priority).
    pub(super) fn earlier_passed_over(&self, key: &PipelineKey) {
        let way = self.earlier.locked().remove(key);
        if let Some(data) = way.and_then(|way| way.upgrade()) {
            data.pass_over();
        }
    }

    /// The map for a lookup or a question: never on a thread of the layer's own at idle priority
    /// (the rebuild's), which would hold it while preempted with application threads waiting;
    /// an entry the rebuild then misses, it compiles (work wasted, never a wrong pipeline).
    fn ways_unless_idle(&self) -> Option<MutexGuard<'_, Ways>> {
        (!crate::sync::at_idle_priority()).then(|| self.waiting.locked())
    }

    /// Whether `key`'s entry waits to be written.
    pub(super) fn holds(&self, key: &PipelineKey) -> bool {
        self.live.load(Ordering::Acquire) > 0
            && self.ways_unless_idle().is_some_and(|ways| {
                ways.by_key
                    .get(key)
                    .and_then(|(_, way)| way.upgrade())
                    .is_some_and(|data| !data.passed_over())
            })
    }

    /// The payload of `key`'s entry, if it waits to be written.
    pub(super) fn get(&self, key: &PipelineKey) -> Option<Checked> {
        if self.live.load(Ordering::Acquire) == 0 {
            return None;
        }
        let (kind, data) = {
            let ways = self.ways_unless_idle()?;
            let (kind, way) = ways.by_key.get(key)?;
            (*kind, way.upgrade()?)
        };
        if data.passed_over() {
            return None; // dropped by the bound (or kept where it waits)
        }
        Some(Checked {
            kind,
            payload: data.payload(),
            pieces: Vec::new(),
        })
    }
}

impl Ways {
    /// Drops the ways that lead nowhere, where due (a way holds no data: nothing is freed).
    fn clear_if_due(&mut self) {
        if self.by_key.len() < (2 * self.after_clearing).max(CLEARED_FROM) {
            return;
        }
        self.by_key.retain(|_, (_, way)| way.strong_count() > 0);
        self.after_clearing = self.by_key.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> PipelineKey {
        PipelineKey {
            spirv: [n; 16],
            state: [2; 16],
        }
    }

    fn queued(bytes: &[u8]) -> Arc<Queued<dyn QueuedData>> {
        Queued::new(bytes.to_vec())
    }

    #[test]
    fn an_entry_waits_until_its_holder_drops_it_and_no_longer() {
        let entries = QueuedEntries::default();
        assert!(entries.get(&key(1)).is_none());
        let data = queued(&[7, 8, 9]);
        entries.hold(key(1), PayloadKind::Binaries, &data);
        let found = entries.get(&key(1)).expect("waiting");
        assert_eq!(found.kind, PayloadKind::Binaries);
        found.payload.with_bytes(|b| assert_eq!(b, [7, 8, 9]));
        assert!(entries.holds(&key(1)));
        drop(data);
        assert!(entries.get(&key(1)).is_none());
        assert!(!entries.holds(&key(1)));
    }

    /// Once every entry queued is written (its data dropped), a lookup takes no lock again, as
    /// in a warm run: the ways left behind are not counted.
    #[test]
    fn a_lookup_takes_no_lock_once_every_entry_queued_is_written() {
        let entries = Arc::new(QueuedEntries::default());
        let data: Vec<_> = (1..=3).map(|n| queued(&[n])).collect();
        for (n, d) in (1..=3).zip(&data) {
            entries.hold(key(n), PayloadKind::Cache, d);
        }
        drop(data);
        let held = entries.waiting.locked();
        let looking = Arc::clone(&entries);
        let missing = crate::sync::done_elsewhere("looked up without the map's lock", move || {
            looking.get(&key(1)).is_none() && !looking.holds(&key(2))
        });
        assert!(missing);
        drop(held);
    }

    /// A bound pass on an idle-priority thread passes over an earlier process's entry it dropped
    /// without the lookups' lock: the writer skips it and lookups no longer find it.
    #[test]
    fn an_earlier_entry_the_bound_dropped_is_passed_over_without_the_maps_lock() {
        let entries = Arc::new(QueuedEntries::default());
        let data = queued(&[4]);
        entries.hold_earlier(key(1), &data);
        entries.hold(key(1), PayloadKind::Cache, &data);
        let held = entries.waiting.locked();
        let passing = Arc::clone(&entries);
        crate::sync::done_elsewhere("passed over without the map's lock", move || {
            passing.earlier_passed_over(&key(1));
        });
        drop(held);
        assert!(data.passed_over());
        assert!(entries.get(&key(1)).is_none() && !entries.holds(&key(1)));
    }

    /// A lookup on a thread of the layer's own at idle priority (the rebuild's) never takes the
    /// map, which it would hold while preempted with application threads waiting: it misses.
    #[test]
    fn an_idle_threads_lookup_never_takes_the_map() {
        let entries = Arc::new(QueuedEntries::default());
        let data = queued(&[5]);
        entries.hold(key(1), PayloadKind::Cache, &data);
        let idle_lookup = |entries: &Arc<QueuedEntries>| {
            let looking = Arc::clone(entries);
            crate::sync::done_elsewhere("looked up without the map", move || {
                crate::sync::mark_at_idle_priority();
                looking.get(&key(1)).is_some() || looking.holds(&key(1))
            })
        };
        let held = entries.waiting.locked();
        assert!(!idle_lookup(&entries), "held: missed");
        drop(held);
        assert!(!idle_lookup(&entries), "free: missed all the same");
        assert!(
            entries.get(&key(1)).is_some(),
            "found by an application thread"
        );
    }

    #[test]
    fn a_key_queued_again_passes_over_the_older_entry() {
        let entries = QueuedEntries::default();
        let older = queued(&[1]);
        let newer = queued(&[2]);
        entries.hold(key(1), PayloadKind::Cache, &older);
        entries.hold(key(1), PayloadKind::Cache, &newer);
        assert!(older.passed_over());
        assert!(!newer.passed_over());
        let found = entries.get(&key(1)).expect("the newer waits");
        found.payload.with_bytes(|b| assert_eq!(b, [2]));
    }

    #[test]
    fn an_entry_passed_over_is_no_longer_found_and_its_data_says_so() {
        let entries = QueuedEntries::default();
        let data = queued(&[3]);
        entries.hold_earlier(key(1), &data);
        entries.hold(key(1), PayloadKind::Cache, &data);
        entries.earlier_passed_over(&key(1));
        assert!(data.passed_over());
        assert!(entries.get(&key(1)).is_none());
        assert!(!entries.holds(&key(1)));
    }

    /// A cold run queues every pipeline it builds: the ways its written entries leave are
    /// cleared as more are queued, so the map stays near what waits.
    #[test]
    fn ways_that_lead_nowhere_are_cleared_as_more_are_queued() {
        let entries = QueuedEntries::default();
        let still = queued(&[9]);
        entries.hold(key(0), PayloadKind::Cache, &still);
        for n in 1..=250u8 {
            for m in 0..4u8 {
                let written = queued(&[m]);
                let key = PipelineKey {
                    spirv: [n; 16],
                    state: [m; 16],
                };
                entries.hold(key, PayloadKind::Cache, &written);
            }
        }
        let held = entries.waiting.locked().by_key.len();
        assert!(held < 2 * CLEARED_FROM, "{held} ways held");
        assert!(entries.get(&key(0)).is_some(), "one still waiting stays");
    }
}
