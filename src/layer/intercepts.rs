//! The device commands the layer intercepts, each named to its wrapper: the one table
//! `vkGetInstanceProcAddr` and `vkGetDeviceProcAddr` answer from.

use std::ffi::CStr;

use ash::vk;

use super::{pipelines, shaders, tracking};

/// The layer's wrapper of a device command it intercepts, if it intercepts it.
pub fn intercepted_device_command(name: &CStr) -> vk::PFN_vkVoidFunction {
    match name.to_bytes() {
        b"vkCreateComputePipelines" => void_fn!(
            pipelines::create_compute_pipelines,
            vk::PFN_vkCreateComputePipelines
        ),
        b"vkCreateGraphicsPipelines" => void_fn!(
            pipelines::create_graphics_pipelines,
            vk::PFN_vkCreateGraphicsPipelines
        ),
        b"vkCreateRayTracingPipelinesKHR" => void_fn!(
            pipelines::create_ray_tracing_pipelines,
            vk::PFN_vkCreateRayTracingPipelinesKHR
        ),
        b"vkCreateShadersEXT" => void_fn!(shaders::create_shaders, vk::PFN_vkCreateShadersEXT),
        b"vkDestroyShaderEXT" => void_fn!(shaders::destroy_shader, vk::PFN_vkDestroyShaderEXT),
        b"vkGetShaderBinaryDataEXT" => void_fn!(
            shaders::get_shader_binary_data,
            vk::PFN_vkGetShaderBinaryDataEXT
        ),
        b"vkCreateShaderModule" => {
            void_fn!(tracking::create_shader_module, vk::PFN_vkCreateShaderModule)
        }
        b"vkDestroyShaderModule" => void_fn!(
            tracking::destroy_shader_module,
            vk::PFN_vkDestroyShaderModule
        ),
        b"vkCreateSampler" => void_fn!(tracking::create_sampler, vk::PFN_vkCreateSampler),
        b"vkDestroySampler" => void_fn!(tracking::destroy_sampler, vk::PFN_vkDestroySampler),
        b"vkCreateDescriptorSetLayout" => void_fn!(
            tracking::create_descriptor_set_layout,
            vk::PFN_vkCreateDescriptorSetLayout
        ),
        b"vkDestroyDescriptorSetLayout" => void_fn!(
            tracking::destroy_descriptor_set_layout,
            vk::PFN_vkDestroyDescriptorSetLayout
        ),
        b"vkCreatePipelineLayout" => void_fn!(
            tracking::create_pipeline_layout,
            vk::PFN_vkCreatePipelineLayout
        ),
        b"vkDestroyPipelineLayout" => void_fn!(
            tracking::destroy_pipeline_layout,
            vk::PFN_vkDestroyPipelineLayout
        ),
        b"vkCreateRenderPass" => void_fn!(tracking::create_render_pass, vk::PFN_vkCreateRenderPass),
        b"vkCreateRenderPass2" => {
            void_fn!(tracking::create_render_pass2, vk::PFN_vkCreateRenderPass2)
        }
        b"vkCreateRenderPass2KHR" => void_fn!(
            tracking::create_render_pass2_khr,
            vk::PFN_vkCreateRenderPass2
        ),
        b"vkDestroyRenderPass" => {
            void_fn!(tracking::destroy_render_pass, vk::PFN_vkDestroyRenderPass)
        }
        b"vkDestroyPipeline" => void_fn!(tracking::destroy_pipeline, vk::PFN_vkDestroyPipeline),
        b"vkGetShaderModuleIdentifierEXT" => void_fn!(
            tracking::get_shader_module_identifier,
            vk::PFN_vkGetShaderModuleIdentifierEXT
        ),
        b"vkGetShaderModuleCreateInfoIdentifierEXT" => void_fn!(
            tracking::get_shader_module_create_info_identifier,
            vk::PFN_vkGetShaderModuleCreateInfoIdentifierEXT
        ),
        _ => None,
    }
}
