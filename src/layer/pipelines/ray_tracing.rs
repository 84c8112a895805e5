//! `vkCreateRayTracingPipelinesKHR` through the one creation path: each pipeline of the call keyed
//! (stages, groups, recursion depth, library interface, dynamic states, layout and the libraries
//! it links, in their order), looked up, built the cache way and kept, as graphics and compute
//! pipelines are.
//!
//! A deferred operation (`VK_KHR_deferred_host_operations`) keeps its meaning by being complete
//! when the call returns: the pipelines are made before it returns, through the layer's own
//! caches (which then live no longer than the call), with no deferral asked of the driver, so the
//! operation stays complete and the application's join and its result read `VK_SUCCESS`. The call
//! answers `VK_OPERATION_DEFERRED_KHR` where every pipeline was made, as RADV answers whenever an
//! operation is given (its work-around for Portal RTX, which mishandles
//! `VK_OPERATION_NOT_DEFERRED_KHR`), so an application sees what it sees without the layer; an
//! error or `VK_PIPELINE_COMPILE_REQUIRED` is answered as it is. Where the layer does not work on
//! the device, the call goes to the driver as asked, deferral and all.

use ash::vk;

use super::create_pipelines;
use crate::layer::device::{device_data, unrecorded_next};

const COMMAND: &std::ffi::CStr = c"vkCreateRayTracingPipelinesKHR";

pub unsafe extern "system" fn create_ray_tracing_pipelines(
    device: vk::Device,
    deferred: vk::DeferredOperationKHR,
    cache: vk::PipelineCache,
    count: u32,
    infos: *const vk::RayTracingPipelineCreateInfoKHR<'_>,
    allocator: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Pipeline,
) -> vk::Result {
    // SAFETY: a device created through this layer.
    let dev = unsafe { device_data(device) };
    let next = dev
        .as_ref()
        .and_then(|d| d.fns.create_ray_tracing_pipelines);
    let (Some(dev), Some(next)) = (dev, next) else {
        // Its data could not be recorded: straight to the next layer, as asked.
        return match unsafe {
            unrecorded_next::<vk::PFN_vkCreateRayTracingPipelinesKHR>(device, COMMAND)
        } {
            Some(next) => unsafe { next(device, deferred, cache, count, infos, allocator, out) },
            None => vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        };
    };
    if !dev.works_here() {
        // SAFETY: the application's arguments, forwarded as received.
        return unsafe { next(device, deferred, cache, count, infos, allocator, out) };
    }
    drop(dev);
    // SAFETY: the application's arguments; every driver call below is made without deferral.
    let r = unsafe {
        create_pipelines(device, cache, count, infos.cast(), allocator, out, |_| {
            without_deferral
        })
    };
    if deferred != vk::DeferredOperationKHR::null() && r == vk::Result::SUCCESS {
        vk::Result::OPERATION_DEFERRED_KHR
    } else {
        r
    }
}

/// The driver's `vkCreateRayTracingPipelinesKHR` with no deferred operation, in the shape of the
/// other pipeline commands (the creation path calls it so).
unsafe extern "system" fn without_deferral(
    device: vk::Device,
    cache: vk::PipelineCache,
    count: u32,
    infos: *const vk::RayTracingPipelineCreateInfoKHR<'_>,
    allocator: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Pipeline,
) -> vk::Result {
    // SAFETY: a device created through this layer, whose command was loaded (the intercept
    // checked both before the creation path calls this).
    match unsafe { device_data(device) }.and_then(|d| d.fns.create_ray_tracing_pipelines) {
        Some(next) => unsafe {
            next(
                device,
                vk::DeferredOperationKHR::null(),
                cache,
                count,
                infos,
                allocator,
                out,
            )
        },
        None => vk::Result::ERROR_OUT_OF_HOST_MEMORY,
    }
}
