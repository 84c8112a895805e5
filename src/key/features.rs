//! The feature structures the device key reads by content: every `VkPhysicalDevice*Features*`
//! structure of the Vulkan registry that extends `VkPhysicalDeviceFeatures2` or
//! `VkDeviceCreateInfo` (or another such structure, as the cluster culling shader's VRS features
//! do, chained beside it), belongs to the `vulkan` API (a core version or a supported extension
//! requires it, not Vulkan SC alone) and holds nothing but `VkBool32`s after `sType` and `pNext`.
//! The table (`features_table.rs`) is generated from the newest registry published as a crate
//! (`vulkan-registry`, a dev-dependency: the layer parses no XML at run time), newer than the
//! headers real applications and the drivers here are built with, so that what they chain is
//! read, recorded and made again by its content. A test (`features_tests.rs`) generates it, and
//! fails when the registry the crate builds with defines another set; it is never written by
//! hand. A structure not in it (newer than that registry) enters the device key by its `sType`
//! alone; which driver state a kept pipeline fits is then the driver's keys' to say
//! (docs/FORMAT.md).
//!
//! Provisional structures (beta extensions, `provisional="true"`) are left out. Their layouts
//! change between registry revisions under one `sType` (`VkPhysicalDeviceShaderEnqueueFeaturesAMDX`
//! held one `VkBool32` in Vulkan 1.3.281 and holds two in 1.4.342), so a count from the newest
//! registry could read past the end of a structure an application built with older headers; the
//! headers declare them only under `VK_ENABLE_BETA_EXTENSIONS`, and a Linux driver does not offer
//! them normally. They enter the key by their `sType`, as any structure the table does not know.
//!
//! The table holds raw `sType`s and counts, no ash types: ash (Vulkan 1.3.281) predates most of
//! what is new. A structure's size follows from its count and the pointer size (the crate is
//! built for 32-bit targets too).

use std::mem::{align_of, size_of};

use ash::vk;

/// One feature structure the key reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureStruct {
    /// Its `VkStructureType`, raw: most of the table is newer than ash's enum.
    pub s_type: i32,
    /// How many `VkBool32`s follow its head, up to its last member (never its padding).
    pub bools: usize,
    /// Its name in the registry, for reading logs and tests.
    pub name: &'static str,
}

impl FeatureStruct {
    /// Its size in bytes on this target (what a caller allocates to have the driver fill it).
    pub const fn size(&self) -> usize {
        laid_out(HEAD, POINTER_ALIGN, self.bools)
    }
}

/// `sType` and `pNext`: 16 bytes on a 64-bit target, 8 on a 32-bit one.
pub const HEAD: usize = size_of::<vk::BaseInStructure<'static>>();

/// The structure's alignment: its strictest member is `pNext`.
const POINTER_ALIGN: usize = align_of::<*const std::ffi::c_void>();

/// The C layout of a head of `head` bytes and `bools` `VkBool32`s, in a structure aligned to
/// `align`: the members follow one another unpadded (each 4-byte aligned, the head a multiple of
/// 4), the whole is padded to its alignment.
const fn laid_out(head: usize, align: usize, bools: usize) -> usize {
    (head + 4 * bools).next_multiple_of(align)
}

/// `VkPhysicalDeviceFeatures`: 55 `VkBool32`s.
pub const CORE_FEATURES: usize = size_of::<vk::PhysicalDeviceFeatures>() / 4;

/// A row of the generated table.
const fn row(s_type: i32, bools: usize, name: &'static str) -> FeatureStruct {
    FeatureStruct {
        s_type,
        bools,
        name,
    }
}

include!("features_table.rs");

/// The row of `s_type`, at compile time: a row the layer names must be in the table.
const fn row_of(s_type: i32) -> FeatureStruct {
    let mut i = 0;
    while i < KNOWN_FEATURES.len() {
        if KNOWN_FEATURES[i].s_type == s_type {
            return KNOWN_FEATURES[i];
        }
        i += 1;
    }
    panic!("a structure the layer names is not in the generated table")
}

/// `VkPhysicalDeviceVulkan14Features` (sType 55, `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_4_FEATURES`).
pub const VULKAN_1_4: FeatureStruct = row_of(55);

/// Where `maintenance5` stands in [`VULKAN_1_4`] (the test checks it against the registry).
pub const VULKAN_1_4_MAINTENANCE5: usize = 15;

/// The table's row for `s_type`, if the key reads that structure.
pub fn known(s_type: i32) -> Option<&'static FeatureStruct> {
    KNOWN_FEATURES.iter().find(|f| f.s_type == s_type)
}

#[cfg(test)]
#[path = "features_tests.rs"]
mod tests;
