//! The merged cache (issue 17): on the `cache` backend, reading ahead hands the entries the last
//! run used, each already checked whole, to the device, which makes a pipeline cache of each and
//! merges it (`vkMergePipelineCaches`) into one cache of its own a batch, while the reader's
//! loading marker names the entry being merged (a crash inside the driver costs that entry
//! once). A batch's cache is complete before any lookup sees it, and only read (built through)
//! after, so no application thread shares it with a merge. A lookup whose entry was merged builds
//! through that cache and makes no cache of its own. The caches live until `vkDestroyDevice`
//! and are never written to disk. NVIDIA's dictionary goes into each merged cache once: later
//! entries carrying it are merged without it ([`super::dictionary`]).

use std::sync::Mutex;

use ash::vk;
use ash::vk::Handle;

use super::device::DeviceData;
use super::dictionary::Known;
use super::guard::SETTINGS;
use super::pipelines::OwnCache;
use crate::store::envelope::PayloadKind;
use crate::store::{FoundEntry, MergedIn, Merger, Store};
use crate::sync::Unpoisoned;

/// The merged caches a device made, destroyed at its end.
#[derive(Default)]
pub struct MergedCaches(Mutex<Vec<vk::PipelineCache>>);

impl MergedCaches {
    /// Destroys every merged cache (the device's readers have been joined).
    pub fn destroy_all(&self, dev: &DeviceData) {
        let caches = std::mem::take(&mut *self.0.locked());
        for cache in caches {
            // SAFETY: the layer's own cache; no reader or lookup uses it any more.
            unsafe { (dev.fns.destroy_pipeline_cache)(dev.handle, cache, std::ptr::null()) };
        }
    }
}

/// Merges for one device, on its reader thread.
pub struct DeviceMerger<'a> {
    pub dev: &'a DeviceData,
    pub store: &'a Store,
}

impl Merger for DeviceMerger<'_> {
    fn merge(&self, batch: &[FoundEntry]) -> Option<(MergedIn, Vec<bool>)> {
        let dev = self.dev;
        // SAFETY: the layer's own empty cache.
        let merged = unsafe { super::pipelines::create_cache(dev, None) }.ok()?;
        // NVIDIA's dictionary goes into each merged cache once, with the first entry carrying it.
        let mut held = Known::default();
        let flags: Vec<bool> = batch
            .iter()
            .map(|entry| {
                entry.kind() == PayloadKind::Cache && self.merge_one(merged, entry, &mut held)
            })
            .collect();
        if !flags.iter().any(|f| *f) {
            // SAFETY: the layer's own cache, which nothing else saw.
            unsafe { (dev.fns.destroy_pipeline_cache)(dev.handle, merged, std::ptr::null()) };
            return None;
        }
        dev.merged_caches.0.locked().push(merged);
        let within = MergedIn {
            owner: dev.handle.as_raw(),
            cache: merged.as_raw(),
        };
        Some((within, flags))
    }
}

impl DeviceMerger<'_> {
    /// Makes a cache of one checked entry and merges it into `merged`, while the loading marker
    /// names the entry. False where the driver would not (the entry's lookup then makes a cache
    /// of its own, and compiles afresh if that fails too).
    fn merge_one(&self, merged: vk::PipelineCache, entry: &FoundEntry, held: &mut Known) -> bool {
        let dev = self.dev;
        let seed = dev.dictionaries.seed_within(entry, |id| held.holds(id));
        let _marker = self.store.hold_marker(entry);
        if SETTINGS.test_abort_in_merge {
            std::process::abort();
        }
        // SAFETY: checked entry data, and the layer's own caches.
        let made = seed.with_data(entry, |data| unsafe {
            super::pipelines::create_cache(dev, Some(data))
        });
        let Ok(one) = made else {
            held.after(&seed, false);
            return false;
        };
        let one = OwnCache { dev, cache: one };
        // SAFETY: the layer's own caches; `merged` is seen by no lookup until its batch is done.
        let r = unsafe { (dev.fns.merge_pipeline_caches)(dev.handle, merged, 1, &one.cache) };
        held.after(&seed, r == vk::Result::SUCCESS);
        r == vk::Result::SUCCESS
    }
}
