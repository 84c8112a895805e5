//! The unsafe FFI boundary: loader negotiation, dispatch tables, the intercepts. Nothing outside
//! this module touches a raw Vulkan pointer. The files stand in floors, as the data flows; each
//! takes only from its own floor and those below (`scripts/import-circles.py` shows no circle):
//!
//! 1. The loader's dispatch and what the layer tracks: `abi` (the loader's structs), `binary_abi`
//!    (`VK_KHR_pipeline_binary`), `guard` (panics and logging), `registry` (per-handle data),
//!    `instance_data`, `objects` (what keys need, by content), `activity`, `idle` (the priority
//!    of the layer's own threads), `driver_gate`, `found_gate`, `marker_map`, `process_name`.
//! 2. The device's data: `device` (what every intercept reads, the next layer's commands, the
//!    backend, the store shared per identity), with what it holds: `writer` (the writer thread),
//!    `sharing` and `twins` (one compile for pipelines built alike, within a run), `dictionary`
//!    (NVIDIA's dictionary handed over once a process).
//! 3. The creation path: `capture` (create infos into keys), `device_state`, `binaries`,
//!    `pipelines` (the kept-pipeline flow; each backend a file of its own), `tracking` (the
//!    objects' intercepts), `intercepts` (the table of intercepted commands).
//! 4. The top: `lifetime` (a device made, its own threads, its end) and `instance` (the
//!    instance's commands), which the loader calls first.

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
mod identifiers;
mod idle;
mod instance;
mod instance_data;
mod intercepts;
mod lifetime;
mod marker_map;
mod objects;
mod pipelines;
mod process_name;
mod registry;
mod shaders;
mod sharing;
mod test_stall;
mod tracking;
mod twins;
mod writer;

use ash::vk;

pub use abi::NegotiateLayerInterface;
pub use instance::get_instance_proc_addr;
pub use lifetime::get_device_proc_addr;

pub use crate::settings::LAYER_NAME;

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
