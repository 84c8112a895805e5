//! Per-instance and per-device data, keyed by the dispatch key (the first pointer-sized word of a
//! dispatchable handle). One short-held lock a map, never held across a call down the chain.

use crate::sync::UnpoisonedRw;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// A map from dispatch keys (or handles) to shared data.
pub struct Registry<T>(RwLock<BTreeMap<u64, Arc<T>>>);

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Registry::new()
    }
}

impl<T> Registry<T> {
    pub const fn new() -> Registry<T> {
        Registry(RwLock::new(BTreeMap::new()))
    }

    pub fn insert(&self, key: u64, value: Arc<T>) {
        self.0.writing().insert(key, value);
    }

    pub fn get(&self, key: u64) -> Option<Arc<T>> {
        self.0.reading().get(&key).cloned()
    }

    pub fn remove(&self, key: u64) -> Option<Arc<T>> {
        self.0.writing().remove(&key)
    }

    pub fn values(&self) -> Vec<Arc<T>> {
        self.0.reading().values().cloned().collect()
    }
}

/// The dispatch key of a dispatchable handle.
///
/// # Safety
/// `handle` must be a live dispatchable Vulkan handle (it points at the loader's dispatch pointer).
pub unsafe fn dispatch_key<H: ash::vk::Handle>(handle: H) -> u64 {
    // SAFETY: dispatchable handles point to an object whose first word is the dispatch table.
    unsafe { *(handle.as_raw() as *const usize) as u64 }
}

/// The least the layer keeps of an instance or a device, recorded right after the next layer
/// made it and before anything that can fail: its handle and the next layer's
/// `vkGet*ProcAddr`, enough to pass every call through and to destroy it.
pub struct Link<H, F> {
    pub handle: H,
    pub next_proc_addr: F,
}
