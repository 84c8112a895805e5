//! A ray-tracing pipeline's create info as its key reads it: stages, groups, the library
//! interface and the libraries it links. Capture and replay of group handles is the
//! application's own: such a pipeline is built as asked.

use ash::vk;
use ash::vk::Handle;

use super::{check_flags, dynamic_states_of, library, pipeline_chain, stage, Flags};
use crate::key::{Digest, Unkeyable};
use crate::layer::objects::{only_known, slice, Objects};

/// `VK_PIPELINE_CREATE_RAY_TRACING_SHADER_GROUP_HANDLE_CAPTURE_REPLAY_BIT_KHR`: the groups'
/// handles are the application's own to replay; such a pipeline is built as asked.
const CAPTURE_REPLAY: u64 =
    vk::PipelineCreateFlags::RAY_TRACING_SHADER_GROUP_HANDLE_CAPTURE_REPLAY_KHR.as_raw() as u64;

/// A ray-tracing pipeline as its key sees it (and the record writes it). Its groups' capture and
/// replay handles make it unkeyable: it is built as asked (the driver skips its cache for them).
///
/// # Safety
/// `ci` must be a valid create info.
pub unsafe fn ray_tracing_desc(
    ci: &vk::RayTracingPipelineCreateInfoKHR,
    objects: &Objects,
    device: &Digest,
    flags: Flags,
) -> Result<crate::key::desc::RayTracingDesc, Unkeyable> {
    if flags.bits & CAPTURE_REPLAY != 0 {
        return Err(Unkeyable::CaptureReplay);
    }
    let flags = check_flags(flags.bits, true)?;
    let chain = pipeline_chain(ci.p_next, false)?;
    // SAFETY (whole body): the application's create info, per the spec.
    let stages = unsafe { slice(ci.p_stages, ci.stage_count) }
        .iter()
        .map(|s| unsafe { stage(s, objects) })
        .collect::<Result<Vec<_>, _>>()?;
    let groups = unsafe { slice(ci.p_groups, ci.group_count) }
        .iter()
        .map(|g| {
            unsafe { only_known(g.p_next, &[], "a ray-tracing shader group")? };
            if !g.p_shader_group_capture_replay_handle.is_null() {
                return Err(Unkeyable::CaptureReplay);
            }
            Ok(crate::key::desc::RayTracingGroup {
                group_type: g.ty.as_raw() as u32,
                general: g.general_shader,
                closest_hit: g.closest_hit_shader,
                any_hit: g.any_hit_shader,
                intersection: g.intersection_shader,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let library_interface = unsafe { ci.p_library_interface.as_ref() }
        .map(|i| {
            unsafe { only_known(i.p_next, &[], "a ray-tracing library interface")? };
            Ok([
                i.max_pipeline_ray_payload_size,
                i.max_pipeline_ray_hit_attribute_size,
            ])
        })
        .transpose()?;
    let dynamic_states = unsafe { dynamic_states_of(ci.p_dynamic_state.as_ref())? };
    let libraries = match unsafe { ci.p_library_info.as_ref() } {
        Some(info) => {
            unsafe { only_known(info.p_next, &[], "a ray-tracing library info")? };
            unsafe { library::linked_keys(info, objects)? }
        }
        None => Vec::new(),
    };
    Ok(crate::key::desc::RayTracingDesc {
        device: *device,
        flags,
        stages,
        groups,
        max_recursion_depth: ci.max_pipeline_ray_recursion_depth,
        library_interface,
        dynamic_states,
        layout: objects
            .pipeline_layouts
            .get(ci.layout.as_raw(), "pipeline layout")?,
        libraries,
        robustness: chain.robustness,
    })
}
