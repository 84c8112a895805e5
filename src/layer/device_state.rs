//! The device's own state, read from its `VkDeviceCreateInfo` for the key (SPEC "The key"): the
//! extensions the application enabled, its `pEnabledFeatures`, and every feature structure it
//! chained, read as the `VkBool32`s it holds (up to its last field, never its padding). A
//! structure the layer does not know is named by its `sType` only; such a device uses the `cache`
//! backend (a binary is used as it is, so a state the key misses would build the wrong pipeline).
//! Also what the `binary` backend needs to know of the chain: whether the application itself
//! chained the maintenance5 or pipeline-binary features.

use std::ffi::CStr;
use std::mem::{offset_of, size_of};

use ash::vk;
use ash::vk::TaggedStructure;

use super::abi::{chain, LOADER_DEVICE_CREATE_INFO};
use super::binary_abi;
use super::objects::slice;
use crate::key::desc::DeviceState;

/// How many `VkBool32`s a feature structure holds after its `sType` and `pNext`.
macro_rules! feature_table {
    ($($ty:ident: $last:ident,)*) => {
        /// (sType, number of VkBool32s) of every feature structure the layer reads.
        const KNOWN_FEATURES: &[(vk::StructureType, usize)] = &[
            $((
                <vk::$ty<'static> as TaggedStructure>::STRUCTURE_TYPE,
                (offset_of!(vk::$ty<'static>, $last) + size_of::<vk::Bool32>() - HEAD) / 4,
            ),)*
        ];
    };
}

/// sType and pNext.
const HEAD: usize = 16;
/// `VkPhysicalDeviceFeatures`: 55 `VkBool32`s.
const CORE_FEATURES: usize = size_of::<vk::PhysicalDeviceFeatures>() / 4;

feature_table! {
    PhysicalDeviceVulkan11Features: shader_draw_parameters,
    PhysicalDeviceVulkan12Features: subgroup_broadcast_dynamic_id,
    PhysicalDeviceVulkan13Features: maintenance4,
    PhysicalDeviceRobustness2FeaturesEXT: null_descriptor,
    PhysicalDeviceMeshShaderFeaturesEXT: mesh_shader_queries,
    PhysicalDeviceDepthClipEnableFeaturesEXT: depth_clip_enable,
    PhysicalDeviceMaintenance5FeaturesKHR: maintenance5,
    PhysicalDevicePipelineRobustnessFeaturesEXT: pipeline_robustness,
    PhysicalDeviceBufferDeviceAddressFeatures: buffer_device_address_multi_device,
    PhysicalDeviceDescriptorIndexingFeatures: runtime_descriptor_array,
    PhysicalDevice8BitStorageFeatures: storage_push_constant8,
    PhysicalDevice16BitStorageFeatures: storage_input_output16,
    PhysicalDeviceShaderFloat16Int8Features: shader_int8,
    PhysicalDeviceTimelineSemaphoreFeatures: timeline_semaphore,
    PhysicalDeviceSynchronization2Features: synchronization2,
    PhysicalDeviceDynamicRenderingFeatures: dynamic_rendering,
    PhysicalDeviceMaintenance4Features: maintenance4,
    PhysicalDeviceExtendedDynamicStateFeaturesEXT: extended_dynamic_state,
    PhysicalDeviceExtendedDynamicState2FeaturesEXT: extended_dynamic_state2_patch_control_points,
    PhysicalDeviceExtendedDynamicState3FeaturesEXT: extended_dynamic_state3_shading_rate_image_enable,
    PhysicalDeviceImageRobustnessFeatures: robust_image_access,
    PhysicalDeviceSubgroupSizeControlFeatures: compute_full_subgroups,
    PhysicalDevicePipelineCreationCacheControlFeatures: pipeline_creation_cache_control,
    PhysicalDeviceShaderDrawParametersFeatures: shader_draw_parameters,
    PhysicalDeviceMultiviewFeatures: multiview_tessellation_shader,
    PhysicalDeviceVariablePointersFeatures: variable_pointers,
    PhysicalDeviceScalarBlockLayoutFeatures: scalar_block_layout,
    PhysicalDeviceVulkanMemoryModelFeatures: vulkan_memory_model_availability_visibility_chains,
    PhysicalDeviceShaderAtomicInt64Features: shader_shared_int64_atomics,
    PhysicalDeviceHostQueryResetFeatures: host_query_reset,
    PhysicalDeviceUniformBufferStandardLayoutFeatures: uniform_buffer_standard_layout,
    PhysicalDeviceShaderDemoteToHelperInvocationFeatures: shader_demote_to_helper_invocation,
    PhysicalDeviceInlineUniformBlockFeatures: descriptor_binding_inline_uniform_block_update_after_bind,
    PhysicalDeviceZeroInitializeWorkgroupMemoryFeatures: shader_zero_initialize_workgroup_memory,
    PhysicalDeviceShaderTerminateInvocationFeatures: shader_terminate_invocation,
    PhysicalDeviceShaderIntegerDotProductFeatures: shader_integer_dot_product,
    PhysicalDeviceCustomBorderColorFeaturesEXT: custom_border_color_without_format,
    PhysicalDeviceIndexTypeUint8FeaturesKHR: index_type_uint8,
    PhysicalDeviceLineRasterizationFeaturesKHR: stippled_smooth_lines,
    PhysicalDeviceTransformFeedbackFeaturesEXT: geometry_streams,
    PhysicalDeviceShaderAtomicFloatFeaturesEXT: sparse_image_float32_atomic_add,
    PhysicalDeviceFragmentShadingRateFeaturesKHR: attachment_fragment_shading_rate,
    PhysicalDeviceSamplerYcbcrConversionFeatures: sampler_ycbcr_conversion,
    PhysicalDeviceShaderSubgroupExtendedTypesFeatures: shader_subgroup_extended_types,
    PhysicalDeviceSeparateDepthStencilLayoutsFeatures: separate_depth_stencil_layouts,
    PhysicalDeviceImagelessFramebufferFeatures: imageless_framebuffer,
    PhysicalDeviceTexelBufferAlignmentFeaturesEXT: texel_buffer_alignment,
    PhysicalDevicePrivateDataFeatures: private_data,
    PhysicalDeviceProvokingVertexFeaturesEXT: transform_feedback_preserves_provoking_vertex,
    PhysicalDevicePrimitiveTopologyListRestartFeaturesEXT: primitive_topology_patch_list_restart,
    PhysicalDeviceColorWriteEnableFeaturesEXT: color_write_enable,
    PhysicalDeviceVertexAttributeDivisorFeaturesKHR: vertex_attribute_instance_rate_zero_divisor,
    PhysicalDeviceConditionalRenderingFeaturesEXT: inherited_conditional_rendering,
    PhysicalDeviceShaderClockFeaturesKHR: shader_device_clock,
    PhysicalDeviceComputeShaderDerivativesFeaturesNV: compute_derivative_group_linear,
    PhysicalDeviceFragmentShaderInterlockFeaturesEXT: fragment_shader_shading_rate_interlock,
    PhysicalDeviceDescriptorBufferFeaturesEXT: descriptor_buffer_push_descriptors,
    PhysicalDeviceMutableDescriptorTypeFeaturesEXT: mutable_descriptor_type,
    PhysicalDeviceProtectedMemoryFeatures: protected_memory,
}

/// What the layer read of a device's create info.
pub struct DeviceChain {
    pub state: DeviceState,
    /// Every structure of the chain is one the layer knows (the loader's own aside).
    pub all_known: bool,
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
        all_known: true,
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
        match KNOWN_FEATURES.iter().find(|(t, _)| *t == s_type) {
            Some((_, count)) => {
                let values = unsafe { bools_after_head(s, *count) };
                if s_type == vk::StructureType::PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR {
                    out.maintenance5 = Some(values[0] != 0);
                }
                out.state.features.push((s_type.as_raw(), values));
            }
            None => {
                out.all_known = false;
                out.state.unknown.push(s_type.as_raw());
            }
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
    fn feature_counts_stop_at_the_last_field() {
        let count = |t| KNOWN_FEATURES.iter().find(|(s, _)| *s == t).unwrap().1;
        assert_eq!(
            count(vk::StructureType::PHYSICAL_DEVICE_ROBUSTNESS_2_FEATURES_EXT),
            3
        );
        assert_eq!(
            count(vk::StructureType::PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR),
            1
        );
        assert_eq!(
            count(vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_3_FEATURES),
            15
        );
        assert_eq!(CORE_FEATURES, 55);
    }

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
        let mut unknown = vk::DevicePrivateDataCreateInfo::default();
        let ci = vk::DeviceCreateInfo::default().push_next(&mut unknown);
        // SAFETY: a create info built here.
        assert!(!unsafe { read(&ci) }.all_known);
    }
}
