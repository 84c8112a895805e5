//! Entries announced for writing whose files are not written yet: the layer's writer queue holds
//! them until the application pauses. A lookup in the same process finds them from memory, so
//! that a call right after the build that queued an entry means what it meant without the layer
//! (an application asking again with `FAIL_ON_PIPELINE_COMPILE_REQUIRED`, as asynchronous
//! pre-compilers and vkd3d-proton do, gets its pipeline, not `VK_PIPELINE_COMPILE_REQUIRED`).
//!
//! The bytes stay where the queue keeps them (NVIDIA's with their dictionary held apart): this
//! map holds a way to them, not a copy. An entry leaves it only after its file is renamed in
//! place, and a lookup asks here before it opens the file, so between the two one of them always
//! has it. The idle-priority writer never takes the map's lock, which lookups wait on (one
//! preempted while it held it would keep every lookup waiting until a core falls idle; a lookup
//! that gave up on it instead opened a file not yet written, and compiled once more): it sends
//! each key written on a channel, and whoever takes the lock next removes those keys before it
//! looks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};

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

/// One entry waiting: its kind and its data.
type Waiting = (PayloadKind, Arc<dyn QueuedData>);

/// The entries waiting to be written, by key.
pub(super) struct QueuedEntries {
    waiting: Mutex<Held>,
    /// The keys written since the map was last taken ([`QueuedEntries::written`]).
    written: Sender<PipelineKey>,
    /// How many wait, those written and not yet removed among them: a warm run, which writes
    /// nothing, never takes the lock.
    count: AtomicUsize,
}

/// The map, and the keys written that are still in it.
struct Held {
    entries: HashMap<PipelineKey, Waiting>,
    written: Receiver<PipelineKey>,
}

impl Default for QueuedEntries {
    fn default() -> QueuedEntries {
        let (written, receiver) = channel();
        QueuedEntries {
            waiting: Mutex::new(Held {
                entries: HashMap::new(),
                written: receiver,
            }),
            written,
            count: AtomicUsize::new(0),
        }
    }
}

impl std::fmt::Debug for QueuedEntries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuedEntries")
            .field("count", &self.count.load(Ordering::Relaxed))
            .finish()
    }
}

impl QueuedEntries {
    pub(super) fn hold(&self, key: PipelineKey, kind: PayloadKind, data: Arc<dyn QueuedData>) {
        let mut waiting = self.taken();
        waiting.entries.insert(key, (kind, data));
        self.count.store(waiting.entries.len(), Ordering::Release);
    }

    /// After the entry's file is in place (or its write failed): the key is sent, not removed
    /// (no lock taken), and the map's next taker removes it.
    pub(super) fn written(&self, key: &PipelineKey) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        // The receiver lives as long as the sender, in this same value.
        let _ = self.written.send(*key);
    }

    /// The map, the keys written since it was last taken removed from it.
    fn taken(&self) -> MutexGuard<'_, Held> {
        let mut held = self.waiting.locked();
        let Held { entries, written } = &mut *held;
        let mut removed = false;
        for key in written.try_iter() {
            removed |= entries.remove(&key).is_some();
        }
        if removed {
            self.count.store(entries.len(), Ordering::Release);
        }
        held
    }

    /// Whether `key`'s entry waits to be written.
    pub(super) fn holds(&self, key: &PipelineKey) -> bool {
        self.count.load(Ordering::Acquire) > 0 && self.taken().entries.contains_key(key)
    }

    /// The payload of `key`'s entry, if it waits to be written.
    pub(super) fn get(&self, key: &PipelineKey) -> Option<Checked> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let (kind, data) = self.taken().entries.get(key).cloned()?;
        Some(Checked {
            kind,
            payload: data.payload(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_waits_until_it_is_written_and_no_longer() {
        let queued = QueuedEntries::default();
        let key = PipelineKey {
            spirv: [1; 16],
            state: [2; 16],
        };
        assert!(queued.get(&key).is_none());
        queued.hold(key, PayloadKind::Binaries, Arc::new(vec![7u8, 8, 9]));
        let found = queued.get(&key).expect("waiting");
        assert_eq!(found.kind, PayloadKind::Binaries);
        found.payload.with_bytes(|b| assert_eq!(b, [7, 8, 9]));
        queued.written(&key);
        assert!(queued.get(&key).is_none());
    }

    /// The writer's word that an entry is written takes no lock a lookup waits on: it returns
    /// while another thread holds the map, and the next to take it no longer finds the entry.
    #[test]
    fn written_never_waits_on_the_map() {
        let queued = Arc::new(QueuedEntries::default());
        let key = PipelineKey {
            spirv: [3; 16],
            state: [4; 16],
        };
        queued.hold(key, PayloadKind::Cache, Arc::new(vec![1u8]));
        let held = queued.waiting.locked();
        let (done, said) = std::sync::mpsc::channel();
        let writer = {
            let queued = queued.clone();
            std::thread::spawn(move || {
                queued.written(&key);
                done.send(()).unwrap();
            })
        };
        let returned = said.recv_timeout(std::time::Duration::from_secs(10));
        drop(held);
        writer.join().unwrap();
        assert!(returned.is_ok(), "written() waited on the map's lock");
        assert!(queued.get(&key).is_none() && !queued.holds(&key));
        assert_eq!(queued.count.load(Ordering::Acquire), 0);
    }
}
