//! Entries announced for writing whose files are not written yet: the layer's writer queue holds
//! them until the application pauses. A lookup in the same process finds them from memory, so
//! that a call right after the build that queued an entry means what it meant without the layer
//! (an application asking again with `FAIL_ON_PIPELINE_COMPILE_REQUIRED`, as asynchronous
//! pre-compilers and vkd3d-proton do, gets its pipeline, not `VK_PIPELINE_COMPILE_REQUIRED`).
//!
//! The bytes stay where the queue keeps them (NVIDIA's with their dictionary held apart): this
//! map holds a way to them, not a copy. An entry leaves it only after its file is renamed in
//! place, and a lookup asks here before it opens the file, so between the two one of them always
//! has it. (The idle-priority writer takes the map's lock after each file, for a removal: a
//! lookup that gave up on it instead would open a file not yet written, and compile once more.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
#[derive(Default)]
pub(super) struct QueuedEntries {
    waiting: Mutex<HashMap<PipelineKey, Waiting>>,
    /// How many wait: a warm run, which writes nothing, never takes the lock.
    count: AtomicUsize,
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
        let mut waiting = self.waiting.locked();
        waiting.insert(key, (kind, data));
        self.count.store(waiting.len(), Ordering::Release);
    }

    /// After the entry's file is in place (or its write failed).
    pub(super) fn written(&self, key: &PipelineKey) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut waiting = self.waiting.locked();
        waiting.remove(key);
        self.count.store(waiting.len(), Ordering::Release);
    }

    /// Whether `key`'s entry waits to be written.
    pub(super) fn holds(&self, key: &PipelineKey) -> bool {
        self.count.load(Ordering::Acquire) > 0 && self.waiting.locked().contains_key(key)
    }

    /// The payload of `key`'s entry, if it waits to be written.
    pub(super) fn get(&self, key: &PipelineKey) -> Option<Checked> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let (kind, data) = self.waiting.locked().get(key).cloned()?;
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
}
