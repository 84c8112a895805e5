//! Instance-level commands: creating and destroying the instance (walking the loader's link
//! chain), `vkGetInstanceProcAddr`, and the layer's answer for its own device extensions.

use std::ffi::{c_char, CStr};
use std::sync::Arc;

use ash::vk;

use super::abi::{find_link_info, LayerInstanceCreateInfo, LOADER_INSTANCE_CREATE_INFO};
use super::guard::{guarded, SETTINGS};
use super::instance_data::{
    instance_data, instance_link, load, InstanceData, INSTANCES, INSTANCE_LINKS,
};
use super::intercepts::intercepted_device_command;
use super::registry::{dispatch_key, Link};
use super::{lifetime, LAYER_NAME};
use crate::settings::{executable_title, safe_title};

/// The title of an instance: `PIPEKEEP_TITLE` as it is now (read at each `vkCreateInstance`,
/// not once a process: `pipekeep rebuild` names each title it rebuilds in turn), else the title
/// the layer settings give (the application's `VK_EXT_layer_settings`, `vk_layer_settings.txt`),
/// else the application's name, else the executable's.
fn title_of(info: Option<&vk::ApplicationInfo>) -> String {
    if let Some(t) = crate::settings::title_now().or_else(|| SETTINGS.title.clone()) {
        return t;
    }
    // SAFETY: pApplicationName is NULL or a NUL-terminated string, per the spec.
    info.and_then(|i| unsafe { i.p_application_name.as_ref().map(|p| CStr::from_ptr(p)) })
        .and_then(|n| n.to_str().ok())
        .filter(|n| !n.is_empty())
        .map(safe_title)
        .unwrap_or_else(executable_title)
}

/// The application's `VkApplicationInfo` as the record keeps it: none given is no names,
/// versions 0 and `apiVersion` 1.0 (as the spec reads it).
fn application_of(info: Option<&vk::ApplicationInfo>) -> crate::replay::record::ApplicationInfo {
    let text = |p: *const c_char| {
        // SAFETY: NULL or a NUL-terminated string, per the spec.
        unsafe { p.as_ref().map(|p| CStr::from_ptr(p)) }.map(|n| n.to_string_lossy().into_owned())
    };
    crate::replay::record::ApplicationInfo {
        name: info.and_then(|i| text(i.p_application_name)),
        version: info.map_or(0, |i| i.application_version),
        engine_name: info.and_then(|i| text(i.p_engine_name)),
        engine_version: info.map_or(0, |i| i.engine_version),
        api_version: info
            .map(|a| a.api_version)
            .filter(|v| *v != 0)
            .unwrap_or(vk::API_VERSION_1_0),
    }
}

pub unsafe extern "system" fn create_instance(
    create_info: *const vk::InstanceCreateInfo<'_>,
    allocator: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Instance,
) -> vk::Result {
    // Before anything reads the settings: the application's layer settings are among them.
    // SAFETY: the application's create info.
    unsafe { super::guard::offer_application_settings(create_info) };
    // SAFETY: the loader's chain info is in the create info's pNext.
    let link_info = unsafe { find_link_info((*create_info).p_next, LOADER_INSTANCE_CREATE_INFO) }
        as *mut LayerInstanceCreateInfo;
    let link_info = unsafe { link_info.as_mut() };
    let Some(link_info) = link_info.filter(|l| !l.layer_info.is_null()) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the loader's link; advanced for the next layer before the call down.
    let gipa = unsafe { (*link_info.layer_info).next_get_instance_proc_addr };
    link_info.layer_info = unsafe { (*link_info.layer_info).next };
    let Some(next_create) = (unsafe {
        load::<vk::PFN_vkCreateInstance>(gipa, vk::Instance::null(), c"vkCreateInstance")
    }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the application's arguments, passed on unchanged.
    let result = unsafe { next_create(create_info, allocator, out) };
    if result != vk::Result::SUCCESS {
        return result;
    }
    // SAFETY: the instance just made; its dispatch pointer is set by the loader.
    let handle = unsafe { *out };
    INSTANCE_LINKS.insert(
        unsafe { dispatch_key(handle) },
        Arc::new(Link {
            handle,
            next_proc_addr: gipa,
        }),
    );
    guarded(
        "vkCreateInstance",
        || unsafe { register_instance(gipa, handle, &*create_info) },
        || (),
    );
    result
}

unsafe fn register_instance(
    gipa: vk::PFN_vkGetInstanceProcAddr,
    handle: vk::Instance,
    ci: &vk::InstanceCreateInfo,
) {
    super::guard::fail_setup_for_tests("instance");
    // SAFETY: the next layer's commands for this instance, each named with its own type.
    let (
        Some(destroy_instance),
        Some(get_physical_device_properties),
        Some(enumerate_device_extension_properties),
    ) = (unsafe {
        (
            load(gipa, handle, c"vkDestroyInstance"),
            load(gipa, handle, c"vkGetPhysicalDeviceProperties"),
            load(gipa, handle, c"vkEnumerateDeviceExtensionProperties"),
        )
    })
    else {
        tracing::error!(
            "the next layer lacks a core instance command; pipekeep stays out of this instance"
        );
        return;
    };
    let app = unsafe { ci.p_application_info.as_ref() };
    let api_version = app
        .map(|a| a.api_version)
        .filter(|v| *v != 0)
        .unwrap_or(vk::API_VERSION_1_0);
    let data = InstanceData {
        handle,
        next_get_instance_proc_addr: gipa,
        destroy_instance,
        get_physical_device_properties,
        enumerate_device_extension_properties,
        api_version,
        title: title_of(app),
        application: application_of(app),
        // SAFETY: the application's array of NUL-terminated names, per the spec.
        extensions: unsafe { extension_names(ci) },
    };
    tracing::debug!(title = %data.title, api_version, disabled = SETTINGS.disabled, "instance created");
    INSTANCES.insert(unsafe { dispatch_key(handle) }, Arc::new(data));
}

/// The names of the instance extensions a create info enables, sorted.
///
/// # Safety
/// `ci` must be a valid `VkInstanceCreateInfo`.
unsafe fn extension_names(ci: &vk::InstanceCreateInfo) -> Vec<String> {
    // SAFETY: as the caller vouches.
    let names =
        unsafe { super::objects::slice(ci.pp_enabled_extension_names, ci.enabled_extension_count) };
    let mut names: Vec<String> = names
        .iter()
        .filter(|n| !n.is_null())
        .map(|n| unsafe { CStr::from_ptr(*n) }.to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.dedup();
    names
}

pub unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    allocator: *const vk::AllocationCallbacks<'_>,
) {
    if instance == vk::Instance::null() {
        return;
    }
    // SAFETY: an instance created through this layer.
    let key = unsafe { dispatch_key(instance) };
    let data = INSTANCES.remove(key);
    let link = INSTANCE_LINKS.remove(key);
    let destroy = data.map(|d| d.destroy_instance).or_else(|| {
        // SAFETY: the next layer's command for this instance, named with its own type.
        link.and_then(|l| unsafe { load(l.next_proc_addr, instance, c"vkDestroyInstance") })
    });
    if let Some(destroy) = destroy {
        // SAFETY: the application's arguments, passed on unchanged.
        unsafe { destroy(instance, allocator) }
    }
}

/// The layer has no device extensions of its own; every other query goes down the chain.
pub unsafe extern "system" fn enumerate_device_extension_properties(
    physical_device: vk::PhysicalDevice,
    layer_name: *const c_char,
    count: *mut u32,
    properties: *mut vk::ExtensionProperties,
) -> vk::Result {
    // SAFETY: pLayerName is NULL or a NUL-terminated string.
    if !layer_name.is_null() && unsafe { CStr::from_ptr(layer_name) } == LAYER_NAME {
        unsafe { *count = 0 };
        return vk::Result::SUCCESS;
    }
    // SAFETY: a physical device of an instance made through this layer.
    let next = match unsafe { instance_data(physical_device) } {
        Some(inst) => Some(inst.enumerate_device_extension_properties),
        None => unsafe { instance_link(physical_device) }.and_then(|l| unsafe {
            load::<vk::PFN_vkEnumerateDeviceExtensionProperties>(
                l.next_proc_addr,
                l.handle,
                c"vkEnumerateDeviceExtensionProperties",
            )
        }),
    };
    let Some(next) = next else {
        return vk::Result::ERROR_OUT_OF_HOST_MEMORY;
    };
    unsafe { next(physical_device, layer_name, count, properties) }
}

/// `vkGetInstanceProcAddr`: ours for what the layer intercepts, the next layer's otherwise.
pub unsafe extern "system" fn get_instance_proc_addr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    if name.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated command name.
    let name = unsafe { CStr::from_ptr(name) };
    let ours: vk::PFN_vkVoidFunction = match name.to_bytes() {
        b"vkGetInstanceProcAddr" => void_fn!(get_instance_proc_addr, vk::PFN_vkGetInstanceProcAddr),
        b"vkCreateInstance" => void_fn!(create_instance, vk::PFN_vkCreateInstance),
        b"vkDestroyInstance" => void_fn!(destroy_instance, vk::PFN_vkDestroyInstance),
        b"vkCreateDevice" => void_fn!(lifetime::create_device, vk::PFN_vkCreateDevice),
        b"vkEnumerateDeviceExtensionProperties" => {
            void_fn!(
                enumerate_device_extension_properties,
                vk::PFN_vkEnumerateDeviceExtensionProperties
            )
        }
        b"vkGetDeviceProcAddr" => {
            void_fn!(lifetime::get_device_proc_addr, vk::PFN_vkGetDeviceProcAddr)
        }
        _ => None,
    };
    if ours.is_some() {
        return ours;
    }
    if instance == vk::Instance::null() {
        return None;
    }
    // SAFETY: an instance created through this layer.
    let Some(inst) = (unsafe { instance_data(instance) }) else {
        // Its data could not be recorded: everything goes down the chain.
        let link = unsafe { instance_link(instance) }?;
        return unsafe { (link.next_proc_addr)(instance, name.as_ptr()) };
    };
    let next = unsafe { (inst.next_get_instance_proc_addr)(instance, name.as_ptr()) };
    // A device command asked through the instance: ours only where the next layer has it.
    match (next, intercepted_device_command(name)) {
        (Some(_), Some(f)) if !SETTINGS.disabled => Some(f),
        _ => next,
    }
}
