//! The device's own state, read from its `VkDeviceCreateInfo` for the key (SPEC "The key"): the
//! extensions the application enabled, its `pEnabledFeatures`, and every feature structure it
//! chained that the generated table (`key::features`) knows, read as the `VkBool32`s it holds (up
//! to its last field, never its padding). A structure the table does not know is named by its
//! `sType` only (the record keeps it; the key does not: the driver's keys decide what it changes,
//! docs/FORMAT.md). Also what
//! the `binary` backend needs to know of the chain: whether the application itself chained the
//! maintenance5 or pipeline-binary features.

use std::ffi::CStr;
use std::mem::size_of;

use ash::vk;

use super::abi::{chain, LOADER_DEVICE_CREATE_INFO};
use super::binary_abi;
use super::objects::slice;
use crate::key::desc::DeviceState;

use crate::key::features::{self, CORE_FEATURES, HEAD};

/// What the layer read of a device's create info.
pub struct DeviceChain {
    pub state: DeviceState,
    /// The application chained `VkPhysicalDeviceMaintenance5FeaturesKHR` (or a structure that
    /// holds its feature, such as Vulkan 1.4's): `Some(enabled)`.
    pub maintenance5: Option<bool>,
    /// The application chained the pipeline-binary features itself: `Some(enabled)`.
    pub pipeline_binaries: Option<bool>,
    /// The extensions the application enabled, as names.
    pub extensions: Vec<Vec<u8>>,
}

/// Reads a device's create info.
///
/// # Safety
/// `ci` must be a valid `VkDeviceCreateInfo`.
pub unsafe fn read(ci: &vk::DeviceCreateInfo) -> DeviceChain {
    // SAFETY (whole body): the application's arrays and chain, per the spec.
    let extensions: Vec<Vec<u8>> =
        unsafe { slice(ci.pp_enabled_extension_names, ci.enabled_extension_count) }
            .iter()
            .map(|n| unsafe { CStr::from_ptr(*n) }.to_bytes().to_vec())
            .collect();
    let core_features =
        unsafe { ci.p_enabled_features.as_ref() }.map(|f| bools(f, 0, CORE_FEATURES));
    let mut out = DeviceChain {
        state: DeviceState {
            extensions: extensions.clone(),
            core_features,
            ..Default::default()
        },
        maintenance5: None,
        pipeline_binaries: None,
        extensions,
    };
    for s in unsafe { chain(ci.p_next) } {
        let s_type = unsafe { (*s).s_type };
        if s_type == LOADER_DEVICE_CREATE_INFO {
            continue;
        }
        if s_type == vk::StructureType::PHYSICAL_DEVICE_FEATURES_2 {
            let f2 = unsafe { &*(s as *const vk::PhysicalDeviceFeatures2) };
            out.state.core_features = Some(bools(&f2.features, 0, CORE_FEATURES));
            continue;
        }
        if s_type == binary_abi::PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES {
            let f = unsafe { &*(s as *const binary_abi::PhysicalDevicePipelineBinaryFeatures) };
            out.pipeline_binaries = Some(f.pipeline_binaries != 0);
            out.state
                .features
                .push((s_type.as_raw(), vec![f.pipeline_binaries]));
            continue;
        }
        match features::known(s_type.as_raw()) {
            Some(known) => {
                let values = unsafe { bools_after_head(s, known.bools) };
                if s_type == vk::StructureType::PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR {
                    out.maintenance5 = Some(values[0] != 0);
                }
                if s_type.as_raw() == features::VULKAN_1_4.s_type {
                    out.maintenance5 = Some(values[features::VULKAN_1_4_MAINTENANCE5] != 0);
                }
                out.state.features.push((s_type.as_raw(), values));
            }
            None => out.state.unknown.push(s_type.as_raw()),
        }
    }
    out
}

/// `count` `VkBool32`s of a plain struct of them, from word `first`.
fn bools<T>(s: &T, first: usize, count: usize) -> Vec<u32> {
    debug_assert!((first + count) * 4 <= size_of::<T>());
    let base = s as *const T as *const u32;
    // SAFETY: `T` is a struct of `VkBool32`s at least `first + count` long (asserted above).
    (first..first + count)
        .map(|i| unsafe { *base.add(i) })
        .collect()
}

/// The `VkBool32`s after a feature structure's head.
///
/// # Safety
/// `s` must be a feature structure holding at least `count` of them after its head.
unsafe fn bools_after_head(s: *const vk::BaseInStructure, count: usize) -> Vec<u32> {
    let base = s as *const u8;
    // SAFETY: as the caller vouches.
    (0..count)
        .map(|i| unsafe { (base.add(HEAD + 4 * i) as *const u32).read_unaligned() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robust_buffer_access_and_the_order_of_the_chain_are_read_as_they_matter() {
        let digest = |ci: &vk::DeviceCreateInfo| {
            // SAFETY: create infos built here.
            crate::key::device_digest(&unsafe { read(ci) }.state)
        };
        let plain = vk::PhysicalDeviceFeatures::default();
        let robust = vk::PhysicalDeviceFeatures::default().robust_buffer_access(true);
        let a = vk::DeviceCreateInfo::default().enabled_features(&plain);
        let b = vk::DeviceCreateInfo::default().enabled_features(&robust);
        assert_ne!(digest(&a), digest(&b));
        let mut r2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default().null_descriptor(true);
        let mut v13 = vk::PhysicalDeviceVulkan13Features::default().dynamic_rendering(true);
        let one = vk::DeviceCreateInfo::default()
            .push_next(&mut r2)
            .push_next(&mut v13);
        let first = digest(&one);
        let mut r2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default().null_descriptor(true);
        let mut v13 = vk::PhysicalDeviceVulkan13Features::default().dynamic_rendering(true);
        let other = vk::DeviceCreateInfo::default()
            .push_next(&mut v13)
            .push_next(&mut r2);
        assert_eq!(first, digest(&other));
        let mut r2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
        let none = vk::DeviceCreateInfo::default().push_next(&mut r2);
        assert_ne!(first, digest(&none));
        // A structure the table lacks is named by its sType, and still read.
        let mut unknown = vk::DevicePrivateDataCreateInfo::default();
        let ci = vk::DeviceCreateInfo::default().push_next(&mut unknown);
        // SAFETY: a create info built here.
        let state = unsafe { read(&ci) }.state;
        assert_eq!(
            state.unknown,
            vec![vk::StructureType::DEVICE_PRIVATE_DATA_CREATE_INFO.as_raw()]
        );
        // ... but it does not enter the digest: the rebuild could never make a device whose key
        // held it, and the driver's keys say what it changes.
        let bare = vk::DeviceCreateInfo::default();
        assert_eq!(digest(&ci), digest(&bare));
        // A feature that only lets pipelines use something (ray tracing, as DXVK and vkd3d-proton
        // chain it) is read by content (the record keeps it) but keys alike: a replay that turns
        // every feature on fills what the application finds.
        let mut rt = vk::PhysicalDeviceRayTracingPipelineFeaturesKHR::default();
        let off = vk::DeviceCreateInfo::default().push_next(&mut rt);
        // SAFETY: a create info built here.
        assert_eq!(unsafe { read(&off) }.state.features.len(), 1);
        let off = digest(&off);
        let mut rt =
            vk::PhysicalDeviceRayTracingPipelineFeaturesKHR::default().ray_tracing_pipeline(true);
        let on = vk::DeviceCreateInfo::default().push_next(&mut rt);
        assert_eq!(off, digest(&on));
        // Robustness, however it is asked, keys apart.
        let mut v13 = vk::PhysicalDeviceVulkan13Features::default().robust_image_access(true);
        let image_13 = digest(&vk::DeviceCreateInfo::default().push_next(&mut v13));
        let mut image =
            vk::PhysicalDeviceImageRobustnessFeatures::default().robust_image_access(true);
        let image_ext = digest(&vk::DeviceCreateInfo::default().push_next(&mut image));
        assert_eq!(image_13, image_ext);
        assert_ne!(image_13, off);
        let mut r2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default().robust_image_access2(true);
        assert_ne!(
            digest(&vk::DeviceCreateInfo::default().push_next(&mut r2)),
            off
        );
    }
}
