//! The `binary` backend's calls into `VK_KHR_pipeline_binary`: a compiled pipeline's binaries
//! captured as keys and data, and kept binaries made back into binary objects for one pipeline
//! build. No binary object outlives the call that made it (NVIDIA's binaries held in numbers
//! raised a game's memory enough to make it unstable), and captured data is always released.

use ash::vk;

use super::binary_abi as bin;
use super::device::{BinaryFns, DeviceData};
use crate::store::binaries::Binary;

pub use super::binary_abi::Captured;

/// Binary objects of one build, destroyed when dropped.
pub struct Objects<'a> {
    dev: &'a DeviceData,
    fns: &'a BinaryFns,
    pub handles: Vec<bin::PipelineBinary>,
}

impl Drop for Objects<'_> {
    fn drop(&mut self) {
        for h in self.handles.drain(..) {
            // SAFETY: a binary this layer made and no longer uses.
            unsafe { (self.fns.destroy_pipeline_binary)(self.dev.handle, h, std::ptr::null()) };
        }
    }
}

/// The binaries of `pipeline`, made with the capture flag; its captured data is released
/// whatever becomes of the capture. `Err` where the driver gave none.
///
/// # Safety
/// `pipeline` must be a live pipeline of `dev` made with `VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR`.
pub unsafe fn capture(
    dev: &DeviceData,
    fns: &BinaryFns,
    pipeline: vk::Pipeline,
) -> Result<Captured, vk::Result> {
    let ci = bin::PipelineBinaryCreateInfo {
        s_type: bin::PIPELINE_BINARY_CREATE_INFO,
        p_next: std::ptr::null(),
        p_keys_and_data_info: std::ptr::null(),
        pipeline,
        p_pipeline_create_info: std::ptr::null(),
    };
    // SAFETY: as the caller vouches.
    let captured = unsafe { keys_and_data(dev, fns, &ci) };
    let release = bin::ReleaseCapturedPipelineDataInfo {
        s_type: bin::RELEASE_CAPTURED_PIPELINE_DATA_INFO,
        p_next: std::ptr::null_mut(),
        pipeline,
    };
    // SAFETY: the same pipeline; its captured data is not needed after this.
    let _ = unsafe { (fns.release_captured_pipeline_data)(dev.handle, &release, std::ptr::null()) };
    captured
}

/// A driver's answer that gave nothing (success with no binaries or no data) as an error.
fn nothing_given(r: vk::Result) -> vk::Result {
    if r == vk::Result::SUCCESS {
        vk::Result::INCOMPLETE
    } else {
        r
    }
}

/// Binary objects made by `ci` (from a pipeline made with the capture flag), read as keys and
/// data, and destroyed.
unsafe fn keys_and_data(
    dev: &DeviceData,
    fns: &BinaryFns,
    ci: &bin::PipelineBinaryCreateInfo,
) -> Result<Captured, vk::Result> {
    let mut handles = bin::PipelineBinaryHandlesInfo {
        s_type: bin::PIPELINE_BINARY_HANDLES_INFO,
        p_next: std::ptr::null(),
        pipeline_binary_count: 0,
        p_pipeline_binaries: std::ptr::null_mut(),
    };
    // SAFETY (whole body): the two-call idiom on the layer's own structures.
    let r =
        unsafe { (fns.create_pipeline_binaries)(dev.handle, ci, std::ptr::null(), &mut handles) };
    if r != vk::Result::SUCCESS || handles.pipeline_binary_count == 0 {
        return Err(nothing_given(r));
    }
    let mut objects = Objects {
        dev,
        fns,
        handles: vec![0; handles.pipeline_binary_count as usize],
    };
    handles.p_pipeline_binaries = objects.handles.as_mut_ptr();
    let r =
        unsafe { (fns.create_pipeline_binaries)(dev.handle, ci, std::ptr::null(), &mut handles) };
    objects
        .handles
        .truncate(handles.pipeline_binary_count as usize);
    if r != vk::Result::SUCCESS {
        objects.handles.retain(|h| *h != 0);
        return Err(r);
    }
    objects
        .handles
        .iter()
        .map(|h| unsafe { binary_key_and_data(dev, fns, *h) })
        .collect()
}

unsafe fn binary_key_and_data(
    dev: &DeviceData,
    fns: &BinaryFns,
    binary: bin::PipelineBinary,
) -> Result<(Vec<u8>, Vec<u8>), vk::Result> {
    let info = bin::PipelineBinaryDataInfo {
        s_type: bin::PIPELINE_BINARY_DATA_INFO,
        p_next: std::ptr::null_mut(),
        pipeline_binary: binary,
    };
    let mut key = bin::PipelineBinaryKey::default();
    let mut size = 0usize;
    // SAFETY (whole body): the two-call idiom on a binary this layer holds.
    let r = unsafe {
        (fns.get_pipeline_binary_data)(dev.handle, &info, &mut key, &mut size, std::ptr::null_mut())
    };
    if r != vk::Result::SUCCESS || size == 0 {
        return Err(nothing_given(r));
    }
    let mut data = vec![0u8; size];
    let r = unsafe {
        (fns.get_pipeline_binary_data)(
            dev.handle,
            &info,
            &mut key,
            &mut size,
            data.as_mut_ptr().cast(),
        )
    };
    let key_size = key.key_size as usize;
    if r != vk::Result::SUCCESS || key_size == 0 || key_size > bin::MAX_KEY_SIZE {
        return Err(nothing_given(r));
    }
    data.truncate(size);
    Ok((key.key[..key_size].to_vec(), data))
}

/// Binary objects made from kept keys and data (already checked whole), for one build.
///
/// # Safety
/// `dev` must have `VK_KHR_pipeline_binary` enabled (`fns` loaded for it).
pub unsafe fn load<'a>(
    dev: &'a DeviceData,
    fns: &'a BinaryFns,
    binaries: &[Binary<'_>],
) -> Result<Objects<'a>, vk::Result> {
    let keys: Vec<bin::PipelineBinaryKey> = binaries
        .iter()
        .map(|b| {
            let mut key = bin::PipelineBinaryKey {
                key_size: b.key.len() as u32,
                ..Default::default()
            };
            key.key[..b.key.len()].copy_from_slice(b.key);
            key
        })
        .collect();
    // The driver only reads the data: the pointer is `void*` in the registry's declaration.
    let data: Vec<bin::PipelineBinaryData> = binaries
        .iter()
        .map(|b| bin::PipelineBinaryData {
            data_size: b.data.len(),
            p_data: b.data.as_ptr() as *mut std::ffi::c_void,
        })
        .collect();
    let keys_and_data = bin::PipelineBinaryKeysAndData {
        binary_count: binaries.len() as u32,
        p_pipeline_binary_keys: keys.as_ptr(),
        p_pipeline_binary_data: data.as_ptr(),
    };
    let ci = bin::PipelineBinaryCreateInfo {
        s_type: bin::PIPELINE_BINARY_CREATE_INFO,
        p_next: std::ptr::null(),
        p_keys_and_data_info: &keys_and_data,
        pipeline: vk::Pipeline::null(),
        p_pipeline_create_info: std::ptr::null(),
    };
    let mut objects = Objects {
        dev,
        fns,
        handles: vec![0; binaries.len()],
    };
    let mut handles = bin::PipelineBinaryHandlesInfo {
        s_type: bin::PIPELINE_BINARY_HANDLES_INFO,
        p_next: std::ptr::null(),
        pipeline_binary_count: binaries.len() as u32,
        p_pipeline_binaries: objects.handles.as_mut_ptr(),
    };
    // SAFETY: the layer's own structures, whose arrays outlive the call.
    let r =
        unsafe { (fns.create_pipeline_binaries)(dev.handle, &ci, std::ptr::null(), &mut handles) };
    if r != vk::Result::SUCCESS {
        objects.handles.retain(|h| *h != 0);
        return Err(r);
    }
    Ok(objects)
}

/// The `VkPipelineBinaryInfoKHR` naming `objects`, to chain in front of a create info.
pub fn info_for(objects: &Objects<'_>, next: *const std::ffi::c_void) -> bin::PipelineBinaryInfo {
    bin::PipelineBinaryInfo {
        s_type: bin::PIPELINE_BINARY_INFO,
        p_next: next,
        binary_count: objects.handles.len() as u32,
        p_pipeline_binaries: objects.handles.as_ptr(),
    }
}
