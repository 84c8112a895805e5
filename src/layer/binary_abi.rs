//! `VK_KHR_pipeline_binary`, declared here because ash 0.38 predates it: the structures, handle,
//! constants and command types the `binary` backend uses, laid out as the Vulkan registry gives
//! them (`vk.xml`, extension 484), each struct's size and field offsets asserted for 64-bit
//! targets. `vkGetPipelineKeyKHR` is declared for one use, never on NVIDIA's driver (a defect
//! there clobbers a register its caller relies on): telling, within one run, pipelines the
//! driver would build alike (`sharing.rs`). The store's keys are the layer's own.

use std::ffi::c_void;

use ash::vk;

/// `VK_KHR_pipeline_binary`.
pub const EXTENSION: &std::ffi::CStr = c"VK_KHR_pipeline_binary";
/// `VK_KHR_maintenance5`, which it needs (core from Vulkan 1.4).
pub const MAINTENANCE5: &std::ffi::CStr = c"VK_KHR_maintenance5";

/// A pipeline's binaries as the driver gives them: (key, data) each, in the driver's order.
pub type Captured = Vec<(Vec<u8>, Vec<u8>)>;

/// `VK_MAX_PIPELINE_BINARY_KEY_SIZE_KHR`.
pub const MAX_KEY_SIZE: usize = 32;

/// `VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR`.
pub const CAPTURE_DATA: u64 = 0x8000_0000;

const fn stype(n: i32) -> vk::StructureType {
    vk::StructureType::from_raw(1_000_483_000 + n)
}
pub const PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES: vk::StructureType = stype(0);
pub const PIPELINE_BINARY_CREATE_INFO: vk::StructureType = stype(1);
pub const PIPELINE_BINARY_INFO: vk::StructureType = stype(2);
pub const PIPELINE_BINARY_KEY: vk::StructureType = stype(3);
pub const RELEASE_CAPTURED_PIPELINE_DATA_INFO: vk::StructureType = stype(5);
pub const PIPELINE_BINARY_DATA_INFO: vk::StructureType = stype(6);
pub const PIPELINE_CREATE_INFO: vk::StructureType = stype(7);
pub const PIPELINE_BINARY_HANDLES_INFO: vk::StructureType = stype(9);

/// `VK_PIPELINE_BINARY_MISSING_KHR`: a binary the driver says it does not have.
pub const PIPELINE_BINARY_MISSING: vk::Result = vk::Result::from_raw(1_000_483_000);

/// `VkPipelineBinaryKHR`: a non-dispatchable handle.
pub type PipelineBinary = u64;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct PhysicalDevicePipelineBinaryFeatures {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub pipeline_binaries: vk::Bool32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct PipelineBinaryKey {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub key_size: u32,
    pub key: [u8; MAX_KEY_SIZE],
}

impl Default for PipelineBinaryKey {
    fn default() -> Self {
        PipelineBinaryKey {
            s_type: PIPELINE_BINARY_KEY,
            p_next: std::ptr::null_mut(),
            key_size: 0,
            key: [0; MAX_KEY_SIZE],
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct PipelineBinaryData {
    pub data_size: usize,
    pub p_data: *mut c_void,
}

#[repr(C)]
pub struct PipelineBinaryKeysAndData {
    pub binary_count: u32,
    pub p_pipeline_binary_keys: *const PipelineBinaryKey,
    pub p_pipeline_binary_data: *const PipelineBinaryData,
}

#[repr(C)]
pub struct PipelineBinaryCreateInfo {
    pub s_type: vk::StructureType,
    pub p_next: *const c_void,
    pub p_keys_and_data_info: *const PipelineBinaryKeysAndData,
    pub pipeline: vk::Pipeline,
    pub p_pipeline_create_info: *const c_void,
}

#[repr(C)]
pub struct PipelineBinaryInfo {
    pub s_type: vk::StructureType,
    pub p_next: *const c_void,
    pub binary_count: u32,
    pub p_pipeline_binaries: *const PipelineBinary,
}

#[repr(C)]
pub struct ReleaseCapturedPipelineDataInfo {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub pipeline: vk::Pipeline,
}

#[repr(C)]
pub struct PipelineBinaryDataInfo {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub pipeline_binary: PipelineBinary,
}

/// `VkPipelineCreateInfoKHR`: a pipeline's create info named by its `pNext`.
#[repr(C)]
pub struct PipelineCreateInfo {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
}

#[repr(C)]
pub struct PipelineBinaryHandlesInfo {
    pub s_type: vk::StructureType,
    pub p_next: *const c_void,
    pub pipeline_binary_count: u32,
    pub p_pipeline_binaries: *mut PipelineBinary,
}

pub type PfnCreatePipelineBinaries = unsafe extern "system" fn(
    vk::Device,
    *const PipelineBinaryCreateInfo,
    *const vk::AllocationCallbacks<'_>,
    *mut PipelineBinaryHandlesInfo,
) -> vk::Result;
pub type PfnDestroyPipelineBinary =
    unsafe extern "system" fn(vk::Device, PipelineBinary, *const vk::AllocationCallbacks<'_>);
pub type PfnGetPipelineBinaryData = unsafe extern "system" fn(
    vk::Device,
    *const PipelineBinaryDataInfo,
    *mut PipelineBinaryKey,
    *mut usize,
    *mut c_void,
) -> vk::Result;
pub type PfnGetPipelineKey = unsafe extern "system" fn(
    vk::Device,
    *const PipelineCreateInfo,
    *mut PipelineBinaryKey,
) -> vk::Result;
pub type PfnReleaseCapturedPipelineData = unsafe extern "system" fn(
    vk::Device,
    *const ReleaseCapturedPipelineDataInfo,
    *const vk::AllocationCallbacks<'_>,
) -> vk::Result;

// Sizes and offsets from the registry's C declarations on a 64-bit target.
#[cfg(target_pointer_width = "64")]
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<PhysicalDevicePipelineBinaryFeatures>() == 24);
    assert!(offset_of!(PhysicalDevicePipelineBinaryFeatures, pipeline_binaries) == 16);
    assert!(size_of::<PipelineBinaryKey>() == 56);
    assert!(offset_of!(PipelineBinaryKey, key_size) == 16);
    assert!(offset_of!(PipelineBinaryKey, key) == 20);
    assert!(size_of::<PipelineBinaryData>() == 16);
    assert!(offset_of!(PipelineBinaryData, p_data) == 8);
    assert!(size_of::<PipelineBinaryKeysAndData>() == 24);
    assert!(offset_of!(PipelineBinaryKeysAndData, p_pipeline_binary_keys) == 8);
    assert!(offset_of!(PipelineBinaryKeysAndData, p_pipeline_binary_data) == 16);
    assert!(size_of::<PipelineBinaryCreateInfo>() == 40);
    assert!(offset_of!(PipelineBinaryCreateInfo, p_keys_and_data_info) == 16);
    assert!(offset_of!(PipelineBinaryCreateInfo, pipeline) == 24);
    assert!(offset_of!(PipelineBinaryCreateInfo, p_pipeline_create_info) == 32);
    assert!(size_of::<PipelineBinaryInfo>() == 32);
    assert!(offset_of!(PipelineBinaryInfo, binary_count) == 16);
    assert!(offset_of!(PipelineBinaryInfo, p_pipeline_binaries) == 24);
    assert!(size_of::<ReleaseCapturedPipelineDataInfo>() == 24);
    assert!(offset_of!(ReleaseCapturedPipelineDataInfo, pipeline) == 16);
    assert!(size_of::<PipelineBinaryDataInfo>() == 24);
    assert!(offset_of!(PipelineBinaryDataInfo, pipeline_binary) == 16);
    assert!(size_of::<PipelineCreateInfo>() == 16);
    assert!(offset_of!(PipelineCreateInfo, p_next) == 8);
    assert!(size_of::<PipelineBinaryHandlesInfo>() == 32);
    assert!(offset_of!(PipelineBinaryHandlesInfo, pipeline_binary_count) == 16);
    assert!(offset_of!(PipelineBinaryHandlesInfo, p_pipeline_binaries) == 24);
};
