//! The `sType`s of the structures the record writes in `pNext` arrays (as Fossilize writes
//! them) and the replay chains again, from the registry.

use ash::vk::StructureType as S;

pub const REDUCTION_MODE: i32 = S::SAMPLER_REDUCTION_MODE_CREATE_INFO.as_raw();
pub const BINDING_FLAGS: i32 = S::DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO.as_raw();
pub const REQUIRED_SUBGROUP_SIZE: i32 =
    S::PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO.as_raw();
pub const RENDERING: i32 = S::PIPELINE_RENDERING_CREATE_INFO.as_raw();
pub const PIPELINE_ROBUSTNESS: i32 = S::PIPELINE_ROBUSTNESS_CREATE_INFO_EXT.as_raw();
pub const GRAPHICS_PIPELINE_LIBRARY: i32 = S::GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT.as_raw();
pub const PIPELINE_LIBRARY: i32 = S::PIPELINE_LIBRARY_CREATE_INFO_KHR.as_raw();
pub const CREATE_FLAGS_2: i32 = S::PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR.as_raw();
