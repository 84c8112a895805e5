//! The unsafe FFI boundary: loader negotiation, dispatch tables, the intercepts. Nothing outside
//! this module touches a raw Vulkan pointer. Each file is one level of dispatch or one job:
//! `abi` (the loader's structs), `guard` (panics and logging), `registry` (per-handle data),
//! `instance`, `device` (its plan, the store's opening, the background rebuild), `objects` (what
//! keys need, captured at creation), `capture` (create infos into keys), `pipelines` (the
//! kept-pipeline flow; each backend a file of its own), `dictionary` (NVIDIA's dictionary handed
//! over once a process), `found_gate` (how many found pipelines enter the driver at once),
//! `sharing` (one compile for pipelines the driver builds alike, within a run), `writer` (the
//! writer thread), `idle` (the priority of the layer's own threads) and `marker_map` (the loading
//! marker as mapped memory).

/// A function of the layer as the loader's opaque `PFN_vkVoidFunction`.
macro_rules! void_fn {
    ($f:path, $pfn:ty) => {
        // SAFETY: a function pointer cast to the loader's opaque function type; the caller
        // casts it back to `$pfn` before calling it.
        Some(unsafe { std::mem::transmute::<$pfn, unsafe extern "system" fn()>($f) })
    };
}

mod abi;
mod activity;
mod binaries;
mod binary_abi;
mod capture;
mod device;
mod device_state;
mod dictionary;
mod driver_gate;
mod found_gate;
mod guard;
mod idle;
mod instance;
mod marker_map;
mod objects;
mod pipelines;
mod process_name;
mod registry;
mod sharing;
mod twins;
mod writer;

use std::ffi::CStr;

use ash::vk;

pub use abi::NegotiateLayerInterface;
pub use device::get_device_proc_addr;
pub use instance::get_instance_proc_addr;

/// The layer's name, as in its manifests.
pub const LAYER_NAME: &CStr = c"VK_LAYER_PIPEKEEP_pipeline_store";

/// `vkNegotiateLoaderLayerInterfaceVersion`: interface 2.
///
/// # Safety
/// `negotiate` must be NULL or point to the loader's negotiation struct.
pub unsafe fn negotiate(negotiate: *mut NegotiateLayerInterface) -> vk::Result {
    // SAFETY: as the caller vouches.
    let Some(n) = (unsafe { negotiate.as_mut() }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if n.s_type != abi::LAYER_NEGOTIATE_INTERFACE_STRUCT
        || n.loader_layer_interface_version < abi::INTERFACE_VERSION
    {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    n.loader_layer_interface_version = abi::INTERFACE_VERSION;
    n.get_instance_proc_addr = Some(get_instance_proc_addr);
    n.get_device_proc_addr = Some(get_device_proc_addr);
    n.get_physical_device_proc_addr = None;
    vk::Result::SUCCESS
}

/// The layer's wrapper of a device command it intercepts, if it intercepts it.
fn intercepted_device_command(name: &CStr) -> vk::PFN_vkVoidFunction {
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
        b"vkCreateShaderModule" => {
            void_fn!(objects::create_shader_module, vk::PFN_vkCreateShaderModule)
        }
        b"vkDestroyShaderModule" => void_fn!(
            objects::destroy_shader_module,
            vk::PFN_vkDestroyShaderModule
        ),
        b"vkCreateSampler" => void_fn!(objects::create_sampler, vk::PFN_vkCreateSampler),
        b"vkDestroySampler" => void_fn!(objects::destroy_sampler, vk::PFN_vkDestroySampler),
        b"vkCreateDescriptorSetLayout" => void_fn!(
            objects::create_descriptor_set_layout,
            vk::PFN_vkCreateDescriptorSetLayout
        ),
        b"vkDestroyDescriptorSetLayout" => void_fn!(
            objects::destroy_descriptor_set_layout,
            vk::PFN_vkDestroyDescriptorSetLayout
        ),
        b"vkCreatePipelineLayout" => void_fn!(
            objects::create_pipeline_layout,
            vk::PFN_vkCreatePipelineLayout
        ),
        b"vkDestroyPipelineLayout" => void_fn!(
            objects::destroy_pipeline_layout,
            vk::PFN_vkDestroyPipelineLayout
        ),
        b"vkCreateRenderPass" => void_fn!(objects::create_render_pass, vk::PFN_vkCreateRenderPass),
        b"vkCreateRenderPass2" => {
            void_fn!(objects::create_render_pass2, vk::PFN_vkCreateRenderPass2)
        }
        b"vkCreateRenderPass2KHR" => void_fn!(
            objects::create_render_pass2_khr,
            vk::PFN_vkCreateRenderPass2
        ),
        b"vkDestroyRenderPass" => {
            void_fn!(objects::destroy_render_pass, vk::PFN_vkDestroyRenderPass)
        }
        b"vkDestroyPipeline" => void_fn!(objects::destroy_pipeline, vk::PFN_vkDestroyPipeline),
        _ => None,
    }
}
