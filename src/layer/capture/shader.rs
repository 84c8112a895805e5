//! Reading a shader object's create info (`VkShaderCreateInfoEXT`) into the key's description:
//! its SPIR-V and entry point, stage and next stage, flags, specialization, the set layouts and
//! push-constant ranges it names, and the structures of its chain the key understands (the
//! required subgroup size; validation features, which change nothing compiled, unhashed). Code the
//! application gives as a binary of its own, or a structure the key does not know, leaves the
//! shader unkeyed.

use std::ffi::CStr;

use ash::vk;
use ash::vk::Handle;

use super::{specialization, unique_chain};
use crate::key::desc::{PipelineLayoutDesc, PushRange, ShaderDesc, StageDesc};
use crate::key::{module_digest, Digest, Unkeyable};
use crate::layer::objects::{slice, Objects};

use vk::StructureType as S;

/// A shader object as its key sees it.
///
/// # Safety
/// `ci` must be a valid create info.
pub unsafe fn shader_desc(
    ci: &vk::ShaderCreateInfoEXT,
    objects: &Objects,
) -> Result<ShaderDesc, Unkeyable> {
    let mut required_subgroup_size = None;
    // SAFETY: the application's chain.
    for p in unsafe { unique_chain(ci.p_next, "a shader object, twice")? } {
        match unsafe { (*p).s_type } {
            S::PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO => {
                required_subgroup_size = Some(unsafe {
                    (*(p as *const vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo))
                        .required_subgroup_size
                })
            }
            // For the validation layer: nothing the driver compiles.
            S::VALIDATION_FEATURES_EXT => {}
            other => {
                return Err(Unkeyable::UnknownStructure {
                    stype: other.as_raw(),
                    place: "a shader object",
                })
            }
        }
    }
    if ci.code_type != vk::ShaderCodeTypeEXT::SPIRV {
        return Err(Unkeyable::OwnBinaries);
    }
    // SPIR-V is whole words (VUID-VkShaderCreateInfoEXT-codeSize-08735): the record writes it so.
    if ci.p_code.is_null() || ci.code_size == 0 || !ci.code_size.is_multiple_of(4) {
        return Err(Unkeyable::MissingState("shader code of whole SPIR-V words"));
    }
    if ci.p_name.is_null() {
        return Err(Unkeyable::MissingState("entry point name"));
    }
    // SAFETY: codeSize bytes at pCode, per the spec.
    let code = unsafe { std::slice::from_raw_parts(ci.p_code.cast::<u8>(), ci.code_size) };
    let set_layouts = unsafe { slice(ci.p_set_layouts, ci.set_layout_count) }
        .iter()
        .map(|l| match l.as_raw() {
            0 => Ok(Digest::NONE),
            handle => objects.set_layouts.get(handle, "descriptor set layout"),
        })
        .collect::<Result<Vec<Digest>, Unkeyable>>()?;
    let push_constant_ranges =
        unsafe { slice(ci.p_push_constant_ranges, ci.push_constant_range_count) }
            .iter()
            .map(|r| PushRange {
                stage_flags: r.stage_flags.as_raw(),
                offset: r.offset,
                size: r.size,
            })
            .collect();
    Ok(ShaderDesc {
        stage: StageDesc {
            stage: ci.stage.as_raw(),
            flags: ci.flags.as_raw(),
            module: module_digest(code),
            entry_point: unsafe { CStr::from_ptr(ci.p_name) }.to_bytes().to_vec(),
            specialization: unsafe { specialization(ci.p_specialization_info)? },
            required_subgroup_size,
            robustness: None,
        },
        next_stage: ci.next_stage.as_raw(),
        layout: PipelineLayoutDesc {
            flags: 0,
            set_layouts,
            push_constant_ranges,
        },
    })
}
