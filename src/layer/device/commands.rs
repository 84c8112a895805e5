//! The next layer's device commands the layer calls (the device's dispatch table), loaded
//! through the next layer's `vkGetDeviceProcAddr` once the device is made.

use std::ffi::CStr;

use ash::vk;

use crate::store::identity::NVIDIA;

/// The next layer's device commands the layer calls.
pub struct DeviceFns {
    pub get_device_proc_addr: vk::PFN_vkGetDeviceProcAddr,
    pub destroy_device: vk::PFN_vkDestroyDevice,
    pub create_pipeline_cache: vk::PFN_vkCreatePipelineCache,
    pub destroy_pipeline_cache: vk::PFN_vkDestroyPipelineCache,
    pub get_pipeline_cache_data: vk::PFN_vkGetPipelineCacheData,
    pub create_compute_pipelines: vk::PFN_vkCreateComputePipelines,
    pub create_graphics_pipelines: vk::PFN_vkCreateGraphicsPipelines,
    pub destroy_pipeline: vk::PFN_vkDestroyPipeline,
    pub create_shader_module: vk::PFN_vkCreateShaderModule,
    pub destroy_shader_module: vk::PFN_vkDestroyShaderModule,
    pub create_sampler: vk::PFN_vkCreateSampler,
    pub destroy_sampler: vk::PFN_vkDestroySampler,
    pub create_descriptor_set_layout: vk::PFN_vkCreateDescriptorSetLayout,
    pub destroy_descriptor_set_layout: vk::PFN_vkDestroyDescriptorSetLayout,
    pub create_pipeline_layout: vk::PFN_vkCreatePipelineLayout,
    pub destroy_pipeline_layout: vk::PFN_vkDestroyPipelineLayout,
    pub create_render_pass: vk::PFN_vkCreateRenderPass,
    pub destroy_render_pass: vk::PFN_vkDestroyRenderPass,
    pub create_render_pass2: Option<vk::PFN_vkCreateRenderPass2>,
    pub create_render_pass2_khr: Option<vk::PFN_vkCreateRenderPass2>,
    /// Where `VK_KHR_ray_tracing_pipeline` is enabled.
    pub create_ray_tracing_pipelines: Option<vk::PFN_vkCreateRayTracingPipelinesKHR>,
    /// Where `VK_EXT_shader_module_identifier` is enabled.
    pub get_shader_module_identifier: Option<vk::PFN_vkGetShaderModuleIdentifierEXT>,
    pub get_shader_module_create_info_identifier:
        Option<vk::PFN_vkGetShaderModuleCreateInfoIdentifierEXT>,
    /// Where `VK_EXT_shader_object` is enabled.
    pub create_shaders: Option<vk::PFN_vkCreateShadersEXT>,
    pub destroy_shader: Option<vk::PFN_vkDestroyShaderEXT>,
    pub get_shader_binary_data: Option<vk::PFN_vkGetShaderBinaryDataEXT>,
}

/// Loads a device command through the next layer.
pub unsafe fn load_device<F: Copy>(
    gdpa: vk::PFN_vkGetDeviceProcAddr,
    device: vk::Device,
    name: &CStr,
) -> Option<F> {
    // SAFETY: the next layer's own entry point; F is the command's type.
    let f = unsafe { gdpa(device, name.as_ptr()) }?;
    Some(unsafe { std::mem::transmute_copy(&f) })
}

impl DeviceFns {
    pub unsafe fn load(gdpa: vk::PFN_vkGetDeviceProcAddr, d: vk::Device) -> Option<DeviceFns> {
        // SAFETY: each name loaded with its own function type.
        unsafe {
            Some(DeviceFns {
                get_device_proc_addr: gdpa,
                destroy_device: load_device(gdpa, d, c"vkDestroyDevice")?,
                create_pipeline_cache: load_device(gdpa, d, c"vkCreatePipelineCache")?,
                destroy_pipeline_cache: load_device(gdpa, d, c"vkDestroyPipelineCache")?,
                get_pipeline_cache_data: load_device(gdpa, d, c"vkGetPipelineCacheData")?,
                create_compute_pipelines: load_device(gdpa, d, c"vkCreateComputePipelines")?,
                create_graphics_pipelines: load_device(gdpa, d, c"vkCreateGraphicsPipelines")?,
                destroy_pipeline: load_device(gdpa, d, c"vkDestroyPipeline")?,
                create_shader_module: load_device(gdpa, d, c"vkCreateShaderModule")?,
                destroy_shader_module: load_device(gdpa, d, c"vkDestroyShaderModule")?,
                create_sampler: load_device(gdpa, d, c"vkCreateSampler")?,
                destroy_sampler: load_device(gdpa, d, c"vkDestroySampler")?,
                create_descriptor_set_layout: load_device(gdpa, d, c"vkCreateDescriptorSetLayout")?,
                destroy_descriptor_set_layout: load_device(
                    gdpa,
                    d,
                    c"vkDestroyDescriptorSetLayout",
                )?,
                create_pipeline_layout: load_device(gdpa, d, c"vkCreatePipelineLayout")?,
                destroy_pipeline_layout: load_device(gdpa, d, c"vkDestroyPipelineLayout")?,
                create_render_pass: load_device(gdpa, d, c"vkCreateRenderPass")?,
                destroy_render_pass: load_device(gdpa, d, c"vkDestroyRenderPass")?,
                create_render_pass2: load_device(gdpa, d, c"vkCreateRenderPass2"),
                create_render_pass2_khr: load_device(gdpa, d, c"vkCreateRenderPass2KHR"),
                create_ray_tracing_pipelines: load_device(
                    gdpa,
                    d,
                    c"vkCreateRayTracingPipelinesKHR",
                ),
                get_shader_module_identifier: load_device(
                    gdpa,
                    d,
                    c"vkGetShaderModuleIdentifierEXT",
                ),
                get_shader_module_create_info_identifier: load_device(
                    gdpa,
                    d,
                    c"vkGetShaderModuleCreateInfoIdentifierEXT",
                ),
                create_shaders: load_device(gdpa, d, c"vkCreateShadersEXT"),
                destroy_shader: load_device(gdpa, d, c"vkDestroyShaderEXT"),
                get_shader_binary_data: load_device(gdpa, d, c"vkGetShaderBinaryDataEXT"),
            })
        }
    }
}

/// The next layer's `VK_KHR_pipeline_binary` commands the `binary` backend calls.
pub struct BinaryFns {
    pub create_pipeline_binaries: crate::layer::binary_abi::PfnCreatePipelineBinaries,
    pub destroy_pipeline_binary: crate::layer::binary_abi::PfnDestroyPipelineBinary,
    pub get_pipeline_binary_data: crate::layer::binary_abi::PfnGetPipelineBinaryData,
    pub release_captured_pipeline_data: crate::layer::binary_abi::PfnReleaseCapturedPipelineData,
    /// `vkGetPipelineKeyKHR`, never loaded on NVIDIA's driver (see `binary_abi`).
    pub get_pipeline_key: Option<crate::layer::binary_abi::PfnGetPipelineKey>,
}

impl BinaryFns {
    pub unsafe fn load(
        gdpa: vk::PFN_vkGetDeviceProcAddr,
        d: vk::Device,
        vendor_id: u32,
    ) -> Option<BinaryFns> {
        // SAFETY: each name loaded with its own function type.
        unsafe {
            Some(BinaryFns {
                get_pipeline_key: (vendor_id != NVIDIA)
                    .then(|| load_device(gdpa, d, c"vkGetPipelineKeyKHR"))
                    .flatten(),
                create_pipeline_binaries: load_device(gdpa, d, c"vkCreatePipelineBinariesKHR")?,
                destroy_pipeline_binary: load_device(gdpa, d, c"vkDestroyPipelineBinaryKHR")?,
                get_pipeline_binary_data: load_device(gdpa, d, c"vkGetPipelineBinaryDataKHR")?,
                release_captured_pipeline_data: load_device(
                    gdpa,
                    d,
                    c"vkReleaseCapturedPipelineDataKHR",
                )?,
            })
        }
    }
}
