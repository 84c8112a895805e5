//! The intercepts of the objects a key needs (shader modules, samplers, set and pipeline
//! layouts, render passes, and `vkDestroyPipeline` for libraries): each passes the call on, then
//! keeps the object's content in the device's [`crate::layer::objects`] tables, or forgets it.
//! And the module identifiers the driver gives ([`crate::layer::identifiers`]).

use std::ffi::CStr;
use std::sync::Arc;

use ash::vk;
use ash::vk::Handle;

use super::device::{device_data, unrecorded_next, DeviceData};
use super::guard::{guarded, SETTINGS};
use super::objects::{
    module_content, module_digest, pipeline_layout_content, render_pass2_content,
    render_pass_content, sampler_content, set_layout_content, Tracked,
};
use crate::key::Unkeyable;

/// Records an object's content after the driver made it. A panic while reading leaves the
/// object unknown (its pipelines are built unkept), never an error to the application.
fn remember<T: Clone>(
    what: &str,
    table: &Tracked<T>,
    handle: u64,
    read: impl FnOnce() -> Result<T, Unkeyable>,
) {
    remember_then(what, table, handle, read, false)
}

/// [`remember`]; `stall`: test only, the rebuild's stall inside the table's lock
/// (`PIPEKEEP_TEST_STALL_REBUILD`, at a module: the table every pipeline reads).
fn remember_then<T: Clone>(
    what: &str,
    table: &Tracked<T>,
    handle: u64,
    read: impl FnOnce() -> Result<T, Unkeyable>,
    stall: bool,
) {
    let content = guarded(
        what,
        || {
            read()
                .map_err(|why| tracing::debug!(what, %why, "content not kept"))
                .ok()
        },
        || None,
    );
    if stall {
        table.insert_and_stall(handle, content);
    } else {
        table.insert(handle, content);
    }
}

macro_rules! tracked_object {
    ($create:ident, $destroy:ident, $create_fn:ident, $destroy_fn:ident, $vk_create:literal, $vk_destroy:literal,
     $info:ty, $handle:ty, $table:ident, |$ci:ident, $dev:ident| $content:expr,
     forget: |$objects:ident, $forgotten:ident| $forget:expr) => {
        pub unsafe extern "system" fn $create(
            device: vk::Device,
            create_info: *const $info,
            allocator: *const vk::AllocationCallbacks<'_>,
            out: *mut $handle,
        ) -> vk::Result {
            // SAFETY: a device the loader handed us, created through this layer.
            let Some($dev) = (unsafe { device_data(device) }) else {
                // Its data could not be recorded: straight to the next layer.
                type Create = unsafe extern "system" fn(
                    vk::Device,
                    *const $info,
                    *const vk::AllocationCallbacks<'_>,
                    *mut $handle,
                ) -> vk::Result;
                return match unsafe { unrecorded_next::<Create>(device, $vk_create) } {
                    Some(next) => unsafe { next(device, create_info, allocator, out) },
                    // A result every vkCreate* command may return.
                    None => vk::Result::ERROR_OUT_OF_HOST_MEMORY,
                };
            };
            // SAFETY: the application's arguments, passed on unchanged.
            let result = unsafe { ($dev.fns.$create_fn)(device, create_info, allocator, out) };
            if result == vk::Result::SUCCESS && $dev.active {
                let $ci = unsafe { &*create_info };
                let handle = unsafe { *out }.as_raw();
                remember_then(
                    stringify!($create),
                    &$dev.objects().$table,
                    handle,
                    || unsafe { $content },
                    SETTINGS.test_stall_rebuild.is_some() && stringify!($table) == "modules",
                );
            }
            result
        }

        pub unsafe extern "system" fn $destroy(
            device: vk::Device,
            handle: $handle,
            allocator: *const vk::AllocationCallbacks<'_>,
        ) {
            // SAFETY: a device the loader handed us, created through this layer.
            let Some(dev) = (unsafe { device_data(device) }) else {
                type Destroy = unsafe extern "system" fn(
                    vk::Device,
                    $handle,
                    *const vk::AllocationCallbacks<'_>,
                );
                if let Some(next) = unsafe { unrecorded_next::<Destroy>(device, $vk_destroy) } {
                    unsafe { next(device, handle, allocator) };
                }
                return;
            };
            // Forget before the driver frees it: the handle may be reused at once by another thread.
            let ($objects, $forgotten) = (dev.objects(), handle.as_raw());
            $forget;
            // SAFETY: the application's arguments, passed on unchanged.
            unsafe { (dev.fns.$destroy_fn)(device, handle, allocator) }
        }
    };
}

tracked_object!(
    create_shader_module,
    destroy_shader_module,
    create_shader_module,
    destroy_shader_module,
    c"vkCreateShaderModule",
    c"vkDestroyShaderModule",
    vk::ShaderModuleCreateInfo<'_>,
    vk::ShaderModule,
    modules,
    |ci, dev| module_content(ci, dev.objects()),
    forget: |objects, handle| objects.forget_module(handle)
);
tracked_object!(
    create_sampler,
    destroy_sampler,
    create_sampler,
    destroy_sampler,
    c"vkCreateSampler",
    c"vkDestroySampler",
    vk::SamplerCreateInfo<'_>,
    vk::Sampler,
    samplers,
    |ci, dev| sampler_content(ci, dev.objects()),
    forget: |objects, handle| objects.samplers.remove(handle)
);
tracked_object!(
    create_descriptor_set_layout,
    destroy_descriptor_set_layout,
    create_descriptor_set_layout,
    destroy_descriptor_set_layout,
    c"vkCreateDescriptorSetLayout",
    c"vkDestroyDescriptorSetLayout",
    vk::DescriptorSetLayoutCreateInfo<'_>,
    vk::DescriptorSetLayout,
    set_layouts,
    |ci, dev| set_layout_content(ci, dev.objects()),
    forget: |objects, handle| objects.set_layouts.remove(handle)
);
tracked_object!(
    create_pipeline_layout,
    destroy_pipeline_layout,
    create_pipeline_layout,
    destroy_pipeline_layout,
    c"vkCreatePipelineLayout",
    c"vkDestroyPipelineLayout",
    vk::PipelineLayoutCreateInfo<'_>,
    vk::PipelineLayout,
    pipeline_layouts,
    |ci, dev| pipeline_layout_content(ci, dev.objects()),
    forget: |objects, handle| objects.pipeline_layouts.remove(handle)
);
tracked_object!(
    create_render_pass,
    destroy_render_pass,
    create_render_pass,
    destroy_render_pass,
    c"vkCreateRenderPass",
    c"vkDestroyRenderPass",
    vk::RenderPassCreateInfo<'_>,
    vk::RenderPass,
    render_passes,
    |ci, dev| render_pass_content(ci, dev.objects()).map(Arc::new),
    forget: |objects, handle| objects.render_passes.remove(handle)
);

/// `vkCreateRenderPass2` and `vkCreateRenderPass2KHR` share this; each calls its own next.
unsafe fn create_render_pass2_with(
    next: impl FnOnce(&DeviceData) -> Option<vk::PFN_vkCreateRenderPass2>,
    name: &CStr,
    device: vk::Device,
    create_info: *const vk::RenderPassCreateInfo2<'_>,
    allocator: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::RenderPass,
) -> vk::Result {
    // SAFETY: a device the loader handed us, created through this layer.
    let Some(dev) = (unsafe { device_data(device) }) else {
        return match unsafe { unrecorded_next::<vk::PFN_vkCreateRenderPass2>(device, name) } {
            Some(next) => unsafe { next(device, create_info, allocator, out) },
            None => vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        };
    };
    // Not reached: the layer hands out this command only where the next layer has it. Should it
    // be, the answer is one vkCreateRenderPass2 may give.
    let Some(next) = next(&dev) else {
        return vk::Result::ERROR_OUT_OF_HOST_MEMORY;
    };
    // SAFETY: the application's arguments, passed on unchanged.
    let result = unsafe { next(device, create_info, allocator, out) };
    if result == vk::Result::SUCCESS && dev.active {
        let (ci, handle) = unsafe { (&*create_info, (*out).as_raw()) };
        remember(
            "vkCreateRenderPass2",
            &dev.objects().render_passes,
            handle,
            || unsafe { render_pass2_content(dev.objects(), ci) }.map(Arc::new),
        );
    }
    result
}

/// `vkCreateRenderPass2` and `vkCreateRenderPass2KHR`: the same intercept, each calling its own
/// next command.
macro_rules! render_pass2_entry {
    ($name:ident, $next:ident, $vk:literal) => {
        pub unsafe extern "system" fn $name(
            device: vk::Device,
            create_info: *const vk::RenderPassCreateInfo2<'_>,
            allocator: *const vk::AllocationCallbacks<'_>,
            out: *mut vk::RenderPass,
        ) -> vk::Result {
            // SAFETY: forwarded as received.
            unsafe {
                create_render_pass2_with(|d| d.fns.$next, $vk, device, create_info, allocator, out)
            }
        }
    };
}

render_pass2_entry!(
    create_render_pass2,
    create_render_pass2,
    c"vkCreateRenderPass2"
);
render_pass2_entry!(
    create_render_pass2_khr,
    create_render_pass2_khr,
    c"vkCreateRenderPass2KHR"
);

/// `vkDestroyPipeline`: a library is forgotten before the driver frees it (its handle may be
/// reused at once by another thread), then the call goes on as asked.
pub unsafe extern "system" fn destroy_pipeline(
    device: vk::Device,
    pipeline: vk::Pipeline,
    allocator: *const vk::AllocationCallbacks<'_>,
) {
    // SAFETY: a device the loader handed us, created through this layer.
    let Some(dev) = (unsafe { device_data(device) }) else {
        if let Some(next) =
            unsafe { unrecorded_next::<vk::PFN_vkDestroyPipeline>(device, c"vkDestroyPipeline") }
        {
            unsafe { next(device, pipeline, allocator) };
        }
        return;
    };
    if pipeline != vk::Pipeline::null() {
        dev.objects().libraries.remove_if_held(pipeline.as_raw());
    }
    // SAFETY: the application's arguments, passed on unchanged.
    unsafe { (dev.fns.destroy_pipeline)(device, pipeline, allocator) }
}

/// The identifier the driver wrote, as bytes (at most the array's size, whatever it says).
fn written<'a>(out: &'a vk::ShaderModuleIdentifierEXT<'_>) -> &'a [u8] {
    let len = (out.identifier_size as usize).min(out.identifier.len());
    &out.identifier[..len]
}

/// What the driver wrote into `out` for a module of the code `digest` names, learned where the
/// layer works on the device (`identifiers`).
fn learn_written(
    dev: &DeviceData,
    command: &'static str,
    out: *mut vk::ShaderModuleIdentifierEXT<'_>,
    digest: impl FnOnce() -> Option<crate::key::Digest>,
) {
    if !dev.works_here() {
        return;
    }
    guarded(
        command,
        || {
            // SAFETY: the application's output, written by the driver.
            if let (Some(out), Some(digest)) = (unsafe { out.as_ref() }, digest()) {
                dev.objects.identifiers.learn(written(out), digest);
            }
        },
        || (),
    );
}

pub unsafe extern "system" fn get_shader_module_identifier(
    device: vk::Device,
    module: vk::ShaderModule,
    out: *mut vk::ShaderModuleIdentifierEXT<'_>,
) {
    const COMMAND: &std::ffi::CStr = c"vkGetShaderModuleIdentifierEXT";
    // SAFETY: a device the loader handed us, created through this layer.
    let Some(dev) = (unsafe { device_data(device) }) else {
        type Next = vk::PFN_vkGetShaderModuleIdentifierEXT;
        if let Some(next) = unsafe { unrecorded_next::<Next>(device, COMMAND) } {
            unsafe { next(device, module, out) };
        }
        return;
    };
    // Handed out only where the next layer has it.
    let Some(next) = dev.fns.get_shader_module_identifier else {
        return;
    };
    // SAFETY: the application's arguments, passed on unchanged.
    unsafe { next(device, module, out) };
    learn_written(&dev, "vkGetShaderModuleIdentifierEXT", out, || {
        dev.objects
            .modules
            .get(module.as_raw(), "shader module")
            .ok()
    });
}

pub unsafe extern "system" fn get_shader_module_create_info_identifier(
    device: vk::Device,
    create_info: *const vk::ShaderModuleCreateInfo<'_>,
    out: *mut vk::ShaderModuleIdentifierEXT<'_>,
) {
    const COMMAND: &std::ffi::CStr = c"vkGetShaderModuleCreateInfoIdentifierEXT";
    // SAFETY: a device the loader handed us, created through this layer.
    let Some(dev) = (unsafe { device_data(device) }) else {
        type Next = vk::PFN_vkGetShaderModuleCreateInfoIdentifierEXT;
        if let Some(next) = unsafe { unrecorded_next::<Next>(device, COMMAND) } {
            unsafe { next(device, create_info, out) };
        }
        return;
    };
    let Some(next) = dev.fns.get_shader_module_create_info_identifier else {
        return;
    };
    // SAFETY: the application's arguments, passed on unchanged.
    unsafe { next(device, create_info, out) };
    learn_written(
        &dev,
        "vkGetShaderModuleCreateInfoIdentifierEXT",
        out,
        || {
            // SAFETY: the application's create info, valid for the call.
            let ci = unsafe { create_info.as_ref() }?;
            unsafe { module_digest(ci) }.ok()
        },
    );
}
