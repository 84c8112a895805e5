//! Reading a pipeline's create info into the key's descriptions. Only what the Vulkan spec says
//! is read is read: a pointer the spec ignores (a state block under rasterizer discard, the
//! viewports when they are dynamic, ...) may be garbage and is never followed. Anything the key
//! does not understand makes the pipeline unkeyable; unknown never means "hash what we understood".

use std::ffi::CStr;

use ash::vk;
use ash::vk::Handle;

mod blend;
mod fixed;
mod graphics;
mod library;
mod ray_tracing;
mod shader;

pub use graphics::graphics_desc;
pub use ray_tracing::ray_tracing_desc;
pub use shader::shader_desc;

pub use super::objects::KnownLibrary;

use super::abi::chain;
use super::objects::{inline_module_content, only_known, slice, Objects};
use crate::key::desc::*;
use crate::key::{Digest, Unkeyable};

use vk::StructureType as S;

/// The structures of a chain, each at most once (the spec's rule): a chain naming one twice is
/// never keyed by whichever came last.
///
/// # Safety
/// `p_next` must be a valid chain.
unsafe fn unique_chain(
    p_next: *const std::ffi::c_void,
    place: &'static str,
) -> Result<Vec<*const vk::BaseInStructure<'static>>, Unkeyable> {
    let mut seen: Vec<*const vk::BaseInStructure<'static>> = Vec::new();
    // SAFETY: as the caller vouches.
    for s in unsafe { chain(p_next) } {
        let s_type = unsafe { (*s).s_type };
        if seen.iter().any(|t| unsafe { (**t).s_type } == s_type) {
            return Err(Unkeyable::UnknownStructure {
                stype: s_type.as_raw(),
                place,
            });
        }
        seen.push(s);
    }
    Ok(seen)
}

/// What a pipeline's own chain carries that the key reads.
#[derive(Default)]
struct PipelineChain {
    robustness: Option<Robustness>,
    rendering: Option<*const vk::PipelineRenderingCreateInfo<'static>>,
    /// `VkGraphicsPipelineLibraryCreateInfoEXT::flags`, where chained.
    library_subsets: Option<u32>,
    libraries: Option<*const vk::PipelineLibraryCreateInfoKHR<'static>>,
}

/// Structures a pipeline's own chain may carry: feedback (an output, not hashed), robustness, and
/// for graphics the dynamic-rendering formats and what makes it a library part or a link.
fn pipeline_chain(
    p_next: *const std::ffi::c_void,
    graphics: bool,
) -> Result<PipelineChain, Unkeyable> {
    let mut out = PipelineChain::default();
    // SAFETY: the application's chain.
    for s in unsafe { unique_chain(p_next, "a pipeline, twice")? } {
        match unsafe { (*s).s_type } {
            // Feedback is an output; flags2 is read as the effective flags.
            S::PIPELINE_CREATION_FEEDBACK_CREATE_INFO
            | S::PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR => {}
            super::binary_abi::PIPELINE_BINARY_INFO => return Err(Unkeyable::OwnBinaries),
            S::PIPELINE_ROBUSTNESS_CREATE_INFO_EXT => {
                out.robustness = Some(unsafe { read_robustness(s) })
            }
            S::PIPELINE_RENDERING_CREATE_INFO if graphics => {
                out.rendering = Some(s as *const vk::PipelineRenderingCreateInfo)
            }
            S::GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT if graphics => {
                let info = unsafe { &*(s as *const vk::GraphicsPipelineLibraryCreateInfoEXT) };
                out.library_subsets = Some(info.flags.as_raw());
            }
            S::PIPELINE_LIBRARY_CREATE_INFO_KHR if graphics => {
                out.libraries = Some(s as *const vk::PipelineLibraryCreateInfoKHR)
            }
            S::PIPELINE_LIBRARY_CREATE_INFO_KHR | S::GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT => {
                return Err(Unkeyable::Library)
            }
            other => {
                return Err(Unkeyable::UnknownStructure {
                    stype: other.as_raw(),
                    place: "a pipeline",
                })
            }
        }
    }
    Ok(out)
}

unsafe fn read_robustness(s: *const vk::BaseInStructure) -> Robustness {
    // SAFETY: the caller matched the sType.
    let r = unsafe { &*(s as *const vk::PipelineRobustnessCreateInfoEXT) };
    Robustness {
        storage_buffers: r.storage_buffers.as_raw() as u32,
        uniform_buffers: r.uniform_buffers.as_raw() as u32,
        vertex_inputs: r.vertex_inputs.as_raw() as u32,
        images: r.images.as_raw() as u32,
    }
}

use super::binary_abi::CAPTURE_DATA;

/// `VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR | VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR`
/// (the same bits in the legacy flags and in flags2).
const EXECUTABLE_CAPTURE: u64 = (vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR.as_raw()
    | vk::PipelineCreateFlags::CAPTURE_INTERNAL_REPRESENTATIONS_KHR.as_raw())
    as u64;

/// A pipeline's effective create flags, read once a pipeline: those of a chained
/// `VkPipelineCreateFlags2CreateInfoKHR` where there is one (the legacy `flags` are then ignored,
/// per the spec), else the legacy ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags {
    pub bits: u64,
    /// They came from the application's own `VkPipelineCreateFlags2CreateInfoKHR`.
    pub chained: bool,
}

impl Flags {
    /// # Safety
    /// `p_next` must be a valid chain.
    pub unsafe fn of(legacy: vk::PipelineCreateFlags, p_next: *const std::ffi::c_void) -> Flags {
        // SAFETY: as the caller vouches; the sType matched.
        let flags2 = unsafe {
            super::abi::find_in_chain(p_next, S::PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR)
        } as *const vk::PipelineCreateFlags2CreateInfoKHR;
        match unsafe { flags2.as_ref() } {
            Some(f) => Flags {
                bits: f.flags.as_raw(),
                chained: true,
            },
            None => Flags {
                bits: u64::from(legacy.as_raw()),
                chained: false,
            },
        }
    }

    pub fn has(self, flag: vk::PipelineCreateFlags) -> bool {
        self.bits & u64::from(flag.as_raw()) != 0
    }
}

/// The effective flags as the key hashes them (by the same rule, legacy or flags2): a library
/// where the kind of pipeline has none (`libraries`: it has), the application's own binary
/// capture, or a bit past the 32 the legacy flags hold is unkeyable.
fn check_flags(flags: u64, libraries: bool) -> Result<u32, Unkeyable> {
    if !libraries && flags & u64::from(vk::PipelineCreateFlags::LIBRARY_KHR.as_raw()) != 0 {
        return Err(Unkeyable::Library);
    }
    if flags & CAPTURE_DATA != 0 {
        return Err(Unkeyable::OwnBinaries);
    }
    // A profiler's or a replayer's (Fossilize's --pipeline-stats) request for what the driver
    // learnt compiling: a pipeline from a kept entry has none of it (RADV crashes when asked for
    // the internal representations of one made from binaries), and the spec lets these flags
    // disable caching. Built as asked.
    if flags & EXECUTABLE_CAPTURE != 0 {
        return Err(Unkeyable::ExecutableCapture);
    }
    u32::try_from(flags).map_err(|_| Unkeyable::UnknownFlags(flags))
}

unsafe fn stage(
    s: &vk::PipelineShaderStageCreateInfo,
    objects: &Objects,
) -> Result<StageDesc, Unkeyable> {
    let (mut inline_module, mut identified, mut required_subgroup_size, mut robustness) =
        (None, None, None, None);
    // SAFETY: the application's chain and arrays.
    for p in unsafe { unique_chain(s.p_next, "a shader stage, twice")? } {
        match unsafe { (*p).s_type } {
            S::SHADER_MODULE_CREATE_INFO => {
                inline_module = Some(unsafe {
                    inline_module_content(&*(p as *const vk::ShaderModuleCreateInfo))?
                })
            }
            S::PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO => {
                required_subgroup_size = Some(unsafe {
                    (*(p as *const vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo))
                        .required_subgroup_size
                })
            }
            S::PIPELINE_ROBUSTNESS_CREATE_INFO_EXT => {
                robustness = Some(unsafe { read_robustness(p) })
            }
            // Keyed by the SPIR-V the identifier names, where the layer saw the driver give it.
            S::PIPELINE_SHADER_STAGE_MODULE_IDENTIFIER_CREATE_INFO_EXT => {
                let by =
                    unsafe { &*(p as *const vk::PipelineShaderStageModuleIdentifierCreateInfoEXT) };
                // An identifier of size 0 is none: the code is given otherwise.
                if by.identifier_size > 0 {
                    let identifier = unsafe { slice(by.p_identifier, by.identifier_size) };
                    identified = Some(
                        objects
                            .identifiers
                            .module_of(identifier)
                            .ok_or(Unkeyable::ModuleIdentifier)?,
                    );
                }
            }
            other => {
                return Err(Unkeyable::UnknownStructure {
                    stype: other.as_raw(),
                    place: "a shader stage",
                })
            }
        }
    }
    let module = if s.module != vk::ShaderModule::null() {
        objects.modules.get(s.module.as_raw(), "shader module")?
    } else {
        inline_module
            .or(identified)
            .ok_or(Unkeyable::UnknownObject("shader module"))?
    };
    if s.p_name.is_null() {
        return Err(Unkeyable::MissingState("entry point name"));
    }
    Ok(StageDesc {
        stage: s.stage.as_raw(),
        flags: s.flags.as_raw(),
        module,
        entry_point: unsafe { CStr::from_ptr(s.p_name) }.to_bytes().to_vec(),
        specialization: unsafe { specialization(s.p_specialization_info)? },
        required_subgroup_size,
        robustness,
    })
}

/// A stage's specialization constants, each with its bytes (none where `info` is NULL).
///
/// # Safety
/// `info` must be NULL or a valid `VkSpecializationInfo`.
unsafe fn specialization(
    info: *const vk::SpecializationInfo,
) -> Result<Vec<SpecConstant>, Unkeyable> {
    let mut specialization = Vec::new();
    // SAFETY: as the caller vouches.
    if let Some(info) = unsafe { info.as_ref() } {
        specialization.reserve_exact((info.map_entry_count as usize).min(256));
        let data = unsafe { slice(info.p_data as *const u8, info.data_size as u32) };
        if data.len() != info.data_size {
            return Err(Unkeyable::InvalidSpecialization);
        }
        for e in unsafe { slice(info.p_map_entries, info.map_entry_count) } {
            let start = e.offset as usize;
            let value = data
                .get(
                    start
                        ..start
                            .checked_add(e.size)
                            .ok_or(Unkeyable::InvalidSpecialization)?,
                )
                .ok_or(Unkeyable::InvalidSpecialization)?;
            specialization.push(SpecConstant {
                constant_id: e.constant_id,
                value: value.to_vec(),
            });
        }
    }
    Ok(specialization)
}

/// A compute pipeline as its key sees it (and the record writes it).
///
/// # Safety
/// `ci` must be a valid create info.
pub unsafe fn compute_desc(
    ci: &vk::ComputePipelineCreateInfo,
    objects: &Objects,
    device: &Digest,
    flags: Flags,
) -> Result<ComputeDesc, Unkeyable> {
    let flags = check_flags(flags.bits, false)?;
    let robustness = pipeline_chain(ci.p_next, false)?.robustness;
    Ok(ComputeDesc {
        device: *device,
        flags,
        // SAFETY: the application's stage.
        stage: unsafe { stage(&ci.stage, objects)? },
        layout: objects
            .pipeline_layouts
            .get(ci.layout.as_raw(), "pipeline layout")?,
        robustness,
    })
}

pub(super) fn bool32(b: vk::Bool32) -> bool {
    b != 0
}

/// The dynamic states a create info names, as raw values in its order (none without the block).
///
/// # Safety
/// `info` must be the application's valid `VkPipelineDynamicStateCreateInfo`, if any.
unsafe fn dynamic_states_of(
    info: Option<&vk::PipelineDynamicStateCreateInfo>,
) -> Result<Vec<u32>, Unkeyable> {
    let Some(d) = info else {
        return Ok(Vec::new());
    };
    // SAFETY: as the caller vouches.
    unsafe { only_known(d.p_next, &[], "the dynamic state")? };
    Ok(unsafe { slice(d.p_dynamic_states, d.dynamic_state_count) }
        .iter()
        .map(|s| s.as_raw() as u32)
        .collect())
}

#[cfg(test)]
mod tests;
