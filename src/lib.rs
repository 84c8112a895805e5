//! pipekeep: a Vulkan layer that keeps every compiled pipeline on disk as one checked entry, so
//! the second run of an application finds its pipelines instead of compiling them again.
//!
//! The crate root holds the three exported layer entry points and nothing else; the modules are
//! public so that the `pipekeep` tool and the tests can use the store and the keys.

use std::ffi::c_char;

use ash::vk;

pub mod key;
mod layer;
pub mod replay;
pub mod settings;
pub mod store;
mod sync;
pub mod watch;

pub use settings::LAYER_NAME;

/// Loader-layer interface negotiation (interface version 2).
///
/// # Safety
/// Called by the Vulkan loader with its negotiation struct.
#[no_mangle]
pub unsafe extern "system" fn vkNegotiateLoaderLayerInterfaceVersion(
    negotiate: *mut layer::NegotiateLayerInterface,
) -> vk::Result {
    // SAFETY: forwarded as received from the loader.
    unsafe { layer::negotiate(negotiate) }
}

/// The layer's `vkGetInstanceProcAddr`.
///
/// # Safety
/// Called by the Vulkan loader or an application with a valid instance (or NULL) and name.
#[no_mangle]
pub unsafe extern "system" fn vkGetInstanceProcAddr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    // SAFETY: forwarded as received.
    unsafe { layer::get_instance_proc_addr(instance, name) }
}

/// The layer's `vkGetDeviceProcAddr`.
///
/// # Safety
/// Called by the Vulkan loader or an application with a valid device and name.
#[no_mangle]
pub unsafe extern "system" fn vkGetDeviceProcAddr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    // SAFETY: forwarded as received.
    unsafe { layer::get_device_proc_addr(device, name) }
}
