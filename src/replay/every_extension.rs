//! A device as translation layers (DXVK, vkd3d-proton), emulators and replay tools make it (the
//! test app's and `pipekeep replay`'s `--every-extension`). Every instance extension the loader offers and every device extension
//! the device offers are enabled (but for the few that may not stand beside others), and every
//! feature structure the device reports anything on is chained with the features it reports on,
//! through `VkPhysicalDeviceFeatures2`. The structures are those of pipekeep's generated table
//! (the Vulkan registry's), each promoted one named alone: the `VkPhysicalDeviceVulkan1xFeatures`
//! aggregates may not stand beside them.

use std::ffi::{c_char, CStr, CString};

use super::feature_chain::FeatureChain;
use crate::key::features::{KNOWN_FEATURES, VULKAN_1_4};
use ash::vk;

/// Extensions left out: each may not be enabled beside another this mode enables.
const LEFT_OUT: &[&CStr] = &[
    // Not beside VK_KHR_buffer_device_address (VUID-VkDeviceCreateInfo-ppEnabledExtensionNames-03328).
    c"VK_EXT_buffer_device_address",
    // Not at API 1.1 or later, nor beside VK_KHR_maintenance1.
    c"VK_AMD_negative_viewport_height",
    // Asks the instance to enumerate portability devices with a flag of its own.
    c"VK_KHR_portability_enumeration",
    // Not beside descriptorBuffer (VUID-VkDeviceCreateInfo-None-08095).
    c"VK_AMD_shader_fragment_mask",
];

/// Structures left out: the aggregates of each core version (their members are chained one
/// structure each), VK_EXT_buffer_device_address's (left out above), and those whose features
/// may not be enabled beside others.
const LEFT_OUT_STRUCTURES: &[vk::StructureType] = &[
    vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
    vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
    vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
    // Vulkan 1.4's, which ash predates.
    vk::StructureType::from_raw(VULKAN_1_4.s_type),
    vk::StructureType::PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES_EXT,
    // Their features may not stand beside fragment shading rate's
    // (VUID-VkDeviceCreateInfo-shadingRateImage-04478 to fragmentDensityMap-04483).
    vk::StructureType::PHYSICAL_DEVICE_SHADING_RATE_IMAGE_FEATURES_NV,
    vk::StructureType::PHYSICAL_DEVICE_FRAGMENT_DENSITY_MAP_FEATURES_EXT,
    vk::StructureType::PHYSICAL_DEVICE_FRAGMENT_DENSITY_MAP_2_FEATURES_EXT,
];

/// The engine this mode names, as real applications do (Mesa sets options by engine name).
pub const ENGINE_NAME: &CStr = c"pipekeep-every-extension";

fn names_of(props: &[vk::ExtensionProperties]) -> Vec<CString> {
    props
        .iter()
        .filter_map(|p| p.extension_name_as_c_str().ok())
        .filter(|n| !LEFT_OUT.contains(n))
        .map(CStr::to_owned)
        .collect()
}

/// Every instance extension the loader offers (but those left out).
pub fn instance_extensions(entry: &ash::Entry) -> Vec<CString> {
    // SAFETY: a plain query of the loader.
    let props = unsafe { entry.enumerate_instance_extension_properties(None) }.unwrap_or_default();
    names_of(&props)
}

/// What this mode enables on a device: the names, and the feature structures with what the
/// driver reported of each.
pub struct EveryExtension {
    names: Vec<CString>,
    pointers: Vec<*const c_char>,
    /// Each structure the driver reported anything on: its `sType` and `VkBool32`s.
    features: Vec<(i32, Vec<u32>)>,
    chain: FeatureChain,
    features2: Box<vk::PhysicalDeviceFeatures2<'static>>,
}

impl EveryExtension {
    /// Reads what `physical` offers and reports.
    ///
    /// # Safety
    /// `physical` must be a physical device of `instance`.
    pub unsafe fn of(instance: &ash::Instance, physical: vk::PhysicalDevice) -> EveryExtension {
        // SAFETY: as the caller vouches.
        let props =
            unsafe { instance.enumerate_device_extension_properties(physical) }.unwrap_or_default();
        let names = names_of(&props);
        let zeroed: Vec<(i32, Vec<u32>)> = KNOWN_FEATURES
            .iter()
            .filter(|f| !LEFT_OUT_STRUCTURES.contains(&vk::StructureType::from_raw(f.s_type)))
            .map(|f| (f.s_type, vec![0; f.bools]))
            .collect();
        let asked = FeatureChain::new(&zeroed);
        let mut features2 = Box::new(vk::PhysicalDeviceFeatures2 {
            p_next: asked.head(),
            ..Default::default()
        });
        // SAFETY: a chain of zeroed feature structures, each with its sType, for the driver to
        // fill; a driver that does not know one leaves it zero.
        unsafe { instance.get_physical_device_features2(physical, &mut features2) };
        let features: Vec<(i32, Vec<u32>)> = zeroed
            .iter()
            .enumerate()
            .map(|(n, (stype, values))| (*stype, asked.values(n, values.len())))
            .filter(|(_, values)| values.iter().any(|v| *v != 0))
            .collect();
        let pointers = names.iter().map(|n| n.as_ptr()).collect();
        let mut every = EveryExtension {
            names,
            pointers,
            chain: FeatureChain::new(&[]),
            features,
            features2,
        };
        every.chain_again();
        every
    }

    /// The chain behind `features2` made again from `features`.
    fn chain_again(&mut self) {
        self.chain = FeatureChain::new(&self.features);
        self.features2.p_next = self.chain.head();
    }

    /// The create info with every extension and every reported feature (the application's own
    /// `pEnabledFeatures` and chain give way to them).
    pub fn apply<'a>(&'a self, ci: vk::DeviceCreateInfo<'a>) -> vk::DeviceCreateInfo<'a> {
        let mut ci = ci.enabled_extension_names(&self.pointers);
        ci.p_enabled_features = std::ptr::null();
        ci.p_next = &*self.features2 as *const vk::PhysicalDeviceFeatures2 as *const _;
        ci
    }

    /// Turns `robustBufferAccess` (the first core feature) on or off; off, `robustBufferAccess2`
    /// goes with it (VUID-VkPhysicalDeviceRobustness2FeaturesEXT-robustBufferAccess2-04000).
    pub fn set_robust_buffer_access(&mut self, on: bool) {
        self.features2.features.robust_buffer_access = on.into();
        if !on {
            self.turn_off(
                vk::StructureType::PHYSICAL_DEVICE_ROBUSTNESS_2_FEATURES_EXT,
                0,
            );
        }
    }

    /// Turns `feature` (its index among the structure's `VkBool32`s) of the structure `s_type`
    /// off, where it was on.
    pub fn turn_off(&mut self, s_type: vk::StructureType, feature: usize) {
        for (stype, values) in &mut self.features {
            if *stype == s_type.as_raw() {
                if let Some(v) = values.get_mut(feature) {
                    *v = vk::FALSE;
                }
            }
        }
        self.chain_again();
    }

    /// Whether the driver reported `feature` (its index among the structure's `VkBool32`s) of the
    /// structure `s_type`, and so this device enables it.
    pub fn enables_feature(&self, s_type: vk::StructureType, feature: usize) -> bool {
        self.features.iter().any(|(t, values)| {
            *t == s_type.as_raw() && values.get(feature).is_some_and(|v| *v != 0)
        })
    }

    /// How many extensions and feature structures this mode enables.
    pub fn counts(&self) -> (usize, usize) {
        (self.names.len(), self.features.len())
    }
}
