//! The loader's `vk_layer.h` structures the layer needs: the link chains handed down at instance
//! and device creation, and the interface negotiation. Sizes and offsets are asserted below
//! against the C layout on 64-bit targets.

use ash::vk;
use std::ffi::{c_char, c_void};

/// `VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO`.
pub const LOADER_INSTANCE_CREATE_INFO: vk::StructureType = vk::StructureType::from_raw(47);
/// `VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO`.
pub const LOADER_DEVICE_CREATE_INFO: vk::StructureType = vk::StructureType::from_raw(48);
/// `VK_LAYER_LINK_INFO`, the `VkLayerFunction` whose union holds the link.
pub const LAYER_LINK_INFO: u32 = 0;
/// `LAYER_NEGOTIATE_INTERFACE_STRUCT`.
pub const LAYER_NEGOTIATE_INTERFACE_STRUCT: u32 = 1;
/// The loader-layer interface version this layer speaks.
pub const INTERFACE_VERSION: u32 = 2;

pub type GetPhysicalDeviceProcAddr =
    Option<unsafe extern "system" fn(vk::Instance, *const c_char) -> vk::PFN_vkVoidFunction>;

/// `VkLayerInstanceLink`.
#[repr(C)]
pub struct LayerInstanceLink {
    pub next: *mut LayerInstanceLink,
    pub next_get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    pub next_get_physical_device_proc_addr: GetPhysicalDeviceProcAddr,
}

/// `VkLayerDeviceLink`.
#[repr(C)]
pub struct LayerDeviceLink {
    pub next: *mut LayerDeviceLink,
    pub next_get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    pub next_get_device_proc_addr: vk::PFN_vkGetDeviceProcAddr,
}

/// `VkLayerInstanceCreateInfo`: the union's first member is the link pointer; its largest is
/// two function pointers.
#[repr(C)]
pub struct LayerInstanceCreateInfo {
    pub s_type: vk::StructureType,
    pub p_next: *const c_void,
    pub function: u32,
    pub layer_info: *mut LayerInstanceLink,
    _union_rest: *mut c_void,
}

/// `VkLayerDeviceCreateInfo`.
#[repr(C)]
pub struct LayerDeviceCreateInfo {
    pub s_type: vk::StructureType,
    pub p_next: *const c_void,
    pub function: u32,
    pub layer_info: *mut LayerDeviceLink,
}

/// `VkNegotiateLayerInterface`.
#[repr(C)]
pub struct NegotiateLayerInterface {
    pub s_type: u32,
    pub p_next: *mut c_void,
    pub loader_layer_interface_version: u32,
    pub get_instance_proc_addr: Option<vk::PFN_vkGetInstanceProcAddr>,
    pub get_device_proc_addr: Option<vk::PFN_vkGetDeviceProcAddr>,
    pub get_physical_device_proc_addr: GetPhysicalDeviceProcAddr,
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<LayerInstanceLink>() == 24);
    assert!(size_of::<LayerDeviceLink>() == 24);
    assert!(size_of::<LayerInstanceCreateInfo>() == 40);
    assert!(offset_of!(LayerInstanceCreateInfo, function) == 16);
    assert!(offset_of!(LayerInstanceCreateInfo, layer_info) == 24);
    assert!(size_of::<LayerDeviceCreateInfo>() == 32);
    assert!(offset_of!(LayerDeviceCreateInfo, layer_info) == 24);
    assert!(size_of::<NegotiateLayerInterface>() == 48);
    assert!(offset_of!(NegotiateLayerInterface, loader_layer_interface_version) == 16);
    assert!(offset_of!(NegotiateLayerInterface, get_instance_proc_addr) == 24);
};

/// Walks a `pNext` chain.
///
/// # Safety
/// `p_next` must be NULL or a valid Vulkan structure chain.
pub unsafe fn chain(
    p_next: *const c_void,
) -> impl Iterator<Item = *const vk::BaseInStructure<'static>> {
    let mut at = p_next as *const vk::BaseInStructure<'static>;
    std::iter::from_fn(move || {
        if at.is_null() {
            return None;
        }
        let here = at;
        // SAFETY: the caller vouches for the chain; each node starts with sType and pNext.
        at = unsafe { (*here).p_next };
        Some(here)
    })
}

/// Finds the first structure of `s_type` in a chain.
///
/// # Safety
/// As [`chain`].
pub unsafe fn find_in_chain(
    p_next: *const c_void,
    s_type: vk::StructureType,
) -> *const vk::BaseInStructure<'static> {
    // SAFETY: as the caller vouches.
    unsafe { chain(p_next) }
        .find(|s| unsafe { (**s).s_type } == s_type)
        .unwrap_or(std::ptr::null())
}

/// The loader's link-info struct of `s_type` (`LOADER_INSTANCE_CREATE_INFO` or
/// `LOADER_DEVICE_CREATE_INFO`) in a create info's chain: the one whose function is
/// `VK_LAYER_LINK_INFO` (the loader chains others of the same sType, such as its data callback).
/// Both link structs share this head.
///
/// # Safety
/// As [`chain`].
pub unsafe fn find_link_info(p_next: *const c_void, s_type: vk::StructureType) -> *mut c_void {
    #[repr(C)]
    struct Head {
        s_type: vk::StructureType,
        p_next: *const c_void,
        function: u32,
    }
    // SAFETY: as the caller vouches; the loader's structs begin with this head.
    unsafe { chain(p_next) }
        .find(|s| unsafe {
            let head = &*(*s as *const Head);
            head.s_type == s_type && head.function == LAYER_LINK_INFO
        })
        .map_or(std::ptr::null_mut(), |s| s as *mut c_void)
}
