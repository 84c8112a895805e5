//! Sharing within a run (the `binary` backend): pipelines the driver would build alike share one
//! compile, as they would through an application's own pipeline cache, which a build with the
//! capture flag may not use (VUID-vkCreateComputePipelines-pNext-09617).
//!
//! The layer's keys tell pipelines apart by everything in their create info; a driver ignores
//! some of it (state that does not reach its code), so an application's cache serves many of a
//! title's pipelines from one compile: RADV compiled pygfx's 641 in 2.2 s through one shared
//! cache against 3.6 s without. `vkGetPipelineKeyKHR` names what the driver's binaries depend
//! on ("a method to compare two pipeline creation info structures"): a miss whose driver key
//! matches a pipeline compiled earlier in this run is built from that pipeline's binaries, held
//! here, and written as its own entry. Never asked of NVIDIA's driver (see `binary_abi`).

use std::sync::{Arc, Mutex};

use ash::vk;

use super::binary_abi::{self as bin, Captured};
// From the file that defines it: the device's own module holds this one's `SharedBuilds`.
use super::device::commands::BinaryFns;
use crate::store::held::OldestFirst;
use crate::sync::Unpoisoned;

/// The most bytes of binaries a device holds for sharing; past it, the oldest go first (alike
/// pipelines come close together: a title's variants of one pipeline). pygfx's binaries are
/// 4.9 MB in all, ncnn's 14 MB.
const HELD_BYTES_LIMIT: usize = 32 << 20;

/// A driver's key for a pipeline's create info (`VkPipelineBinaryKeyKHR`'s bytes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DriverKey(Vec<u8>);

impl DriverKey {
    /// The key's bytes, as kept with a `binary` entry.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The binaries of this run's compiled pipelines, by driver key. Only the application's threads
/// take its lock (the rebuild's idle-priority threads never do), for a lookup or an insert.
#[derive(Default)]
pub struct SharedBuilds {
    held: Mutex<OldestFirst<DriverKey, Arc<Captured>>>,
}

impl SharedBuilds {
    /// The binaries held for `key`, if a pipeline of this run compiled them.
    pub fn get(&self, key: &DriverKey) -> Option<Arc<Captured>> {
        self.held.locked().get(key).cloned()
    }

    /// Lets go of `key`'s binaries (the driver would not build from them): the next compile of
    /// that key is held instead.
    pub fn forget(&self, key: &DriverKey) {
        self.held.locked().forget(key);
    }

    /// Holds a compiled pipeline's binaries for later pipelines of the same driver key, within
    /// [`HELD_BYTES_LIMIT`] (the oldest let go first).
    pub fn hold(&self, key: DriverKey, captured: Arc<Captured>) {
        let bytes = captured.iter().map(|(k, d)| k.len() + d.len()).sum();
        self.held
            .locked()
            .hold(key, captured, bytes, HELD_BYTES_LIMIT);
    }
}

/// The driver's key for `info` (a graphics or compute create info), or `None` where the driver
/// gives none (not asked of NVIDIA's: `get_pipeline_key` is not loaded there).
///
/// # Safety
/// `info` must point at a valid `VkGraphicsPipelineCreateInfo` or `VkComputePipelineCreateInfo`
/// of `device`, whose chain is valid.
pub unsafe fn driver_key(
    device: vk::Device,
    fns: &BinaryFns,
    info: *const std::ffi::c_void,
) -> Option<DriverKey> {
    let get = fns.get_pipeline_key?;
    let create_info = bin::PipelineCreateInfo {
        s_type: bin::PIPELINE_CREATE_INFO,
        // The driver only reads the create info: the registry declares the pointer `void*`.
        p_next: info as *mut std::ffi::c_void,
    };
    let mut key = bin::PipelineBinaryKey::default();
    // SAFETY: as the caller vouches; the layer's own structures otherwise.
    let r = unsafe { get(device, &create_info, &mut key) };
    let size = key.key_size as usize;
    (r == vk::Result::SUCCESS && size > 0 && size <= bin::MAX_KEY_SIZE)
        .then(|| DriverKey(key.key[..size].to_vec()))
}

/// The driver's global pipeline key (`vkGetPipelineKeyKHR` with no create info): what of the
/// device's state the driver compiles under, read once a device. `None` where the driver gives
/// none (never asked of NVIDIA's).
///
/// # Safety
/// `device` must be a live device with `VK_KHR_pipeline_binary` enabled, `fns` its commands.
pub unsafe fn global_key(device: vk::Device, fns: &BinaryFns) -> Option<Vec<u8>> {
    let get = fns.get_pipeline_key?;
    let mut key = bin::PipelineBinaryKey::default();
    // SAFETY: as the caller vouches; a NULL create info asks for the global key.
    let r = unsafe { get(device, std::ptr::null(), &mut key) };
    let size = key.key_size as usize;
    (r == vk::Result::SUCCESS && size > 0 && size <= bin::MAX_KEY_SIZE)
        .then(|| key.key[..size].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binaries(bytes: usize) -> Arc<Captured> {
        Arc::new(vec![(vec![1; 20], vec![7; bytes])])
    }

    #[test]
    fn holds_binaries_by_driver_key_and_gives_them_back() {
        let shared = SharedBuilds::default();
        let key = DriverKey(vec![3; 20]);
        assert!(shared.get(&key).is_none());
        shared.hold(key.clone(), binaries(100));
        assert_eq!(shared.get(&key).unwrap()[0].1.len(), 100);
        assert!(shared.get(&DriverKey(vec![4; 20])).is_none());
    }

    #[test]
    fn keeps_the_first_binaries_of_a_key_and_lets_the_oldest_go_past_its_bound() {
        let shared = SharedBuilds::default();
        let quarter = HELD_BYTES_LIMIT / 4 - 100;
        for n in 1..=3 {
            shared.hold(DriverKey(vec![n]), binaries(quarter));
        }
        shared.hold(DriverKey(vec![1]), binaries(10));
        assert_eq!(shared.get(&DriverKey(vec![1])).unwrap()[0].1.len(), quarter);
        // Two more quarters: the oldest goes, the rest stay.
        shared.hold(DriverKey(vec![4]), binaries(quarter));
        shared.hold(DriverKey(vec![5]), binaries(quarter));
        assert!(shared.get(&DriverKey(vec![1])).is_none());
        for n in 2..=5 {
            assert!(shared.get(&DriverKey(vec![n])).is_some(), "{n}");
        }
        shared.forget(&DriverKey(vec![2]));
        assert!(shared.get(&DriverKey(vec![2])).is_none());
        shared.hold(DriverKey(vec![2]), binaries(10));
        assert_eq!(shared.get(&DriverKey(vec![2])).unwrap()[0].1.len(), 10);
        // Larger than the bound: never held, nothing let go for it.
        shared.hold(DriverKey(vec![6]), binaries(HELD_BYTES_LIMIT + 1));
        assert!(shared.get(&DriverKey(vec![6])).is_none());
        assert!(shared.get(&DriverKey(vec![2])).is_some());
    }
}
