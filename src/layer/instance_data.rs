//! What the layer holds of each instance made through it ([`InstanceData`]), the link to the next
//! layer, and loading a command through that link: the bottom floor a device's making reads.

use std::ffi::CStr;
use std::sync::Arc;

use ash::vk;

use super::registry::{dispatch_key, Link, Registry};

/// What the layer holds of an instance: the next layer's commands it calls, and what a device's
/// key and record take from the application's instance.
pub struct InstanceData {
    pub handle: vk::Instance,
    pub next_get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    pub destroy_instance: vk::PFN_vkDestroyInstance,
    pub get_physical_device_properties: vk::PFN_vkGetPhysicalDeviceProperties,
    pub enumerate_device_extension_properties: vk::PFN_vkEnumerateDeviceExtensionProperties,
    /// The application's `apiVersion` (1.0 if it gave none).
    pub api_version: u32,
    /// The title the store files this application's pipelines under.
    pub title: String,
    /// The application's `VkApplicationInfo`, as the record keeps it for a rebuild.
    pub application: crate::replay::record::ApplicationInfo,
    /// The instance extensions the application enabled, sorted (the record keeps them).
    pub extensions: Vec<String>,
}

pub static INSTANCES: Registry<InstanceData> = Registry::new();

/// Every instance made through the layer, whether or not its data could be recorded.
pub static INSTANCE_LINKS: Registry<Link<vk::Instance, vk::PFN_vkGetInstanceProcAddr>> =
    Registry::new();

/// The instance a physical device belongs to, and the next layer's `vkGetInstanceProcAddr`.
///
/// # Safety
/// `handle` must be a live dispatchable handle of an instance created through this layer.
pub unsafe fn instance_link<H: vk::Handle>(
    handle: H,
) -> Option<Arc<Link<vk::Instance, vk::PFN_vkGetInstanceProcAddr>>> {
    // SAFETY: as the caller vouches.
    INSTANCE_LINKS.get(unsafe { dispatch_key(handle) })
}

/// The instance a dispatchable instance-level handle (instance or physical device) belongs to.
///
/// # Safety
/// `handle` must be a live dispatchable handle of an instance created through this layer.
pub unsafe fn instance_data<H: vk::Handle>(handle: H) -> Option<Arc<InstanceData>> {
    // SAFETY: as the caller vouches.
    INSTANCES.get(unsafe { dispatch_key(handle) })
}

/// Loads one command through the next layer's `vkGetInstanceProcAddr`.
///
/// # Safety
/// `F` must be the function-pointer type of `name`.
pub unsafe fn load<F: Copy>(
    gipa: vk::PFN_vkGetInstanceProcAddr,
    instance: vk::Instance,
    name: &CStr,
) -> Option<F> {
    // SAFETY: the next layer's own entry point.
    let f = unsafe { gipa(instance, name.as_ptr()) }?;
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of_val(&f));
    // SAFETY: the caller names the matching function type.
    Some(unsafe { std::mem::transmute_copy(&f) })
}
