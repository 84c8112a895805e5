//! A graphics pipeline's create info as its key reads it: the subsets it defines (a complete
//! pipeline, a library part, or a link), each block read only where one of them consumes it, and
//! the render target, the layout and the libraries it links.

use ash::vk;
use ash::vk::Handle;

use super::library::{self, Subsets};
use super::{check_flags, dynamic_states_of, fixed, pipeline_chain, stage, Flags};
use crate::key::desc::*;
use crate::key::{Digest, Dynamic, Unkeyable};
use crate::layer::objects::{slice, Objects};

/// A graphics pipeline as its key sees it (and the record writes it).
///
/// # Safety
/// `ci` must be a valid create info.
pub unsafe fn graphics_desc(
    ci: &vk::GraphicsPipelineCreateInfo,
    objects: &Objects,
    device: &Digest,
    flags: Flags,
) -> Result<GraphicsDesc, Unkeyable> {
    let is_library = flags.has(vk::PipelineCreateFlags::LIBRARY_KHR);
    let flags = check_flags(flags.bits, true)?;
    let chain = pipeline_chain(ci.p_next, true)?;
    // SAFETY (whole body): the application's create info, read only where the spec says a
    // subset it defines reads it.
    let libraries = match chain.libraries.and_then(|l| unsafe { l.as_ref() }) {
        Some(info) => unsafe { library::linked_keys(info, objects)? },
        None => Vec::new(),
    };
    let own = Subsets::of(chain.library_subsets, is_library, libraries.len());
    let raw_stages = if own.shaders() {
        unsafe { slice(ci.p_stages, ci.stage_count) }
    } else {
        &[]
    };
    let stages = raw_stages
        .iter()
        .map(|s| unsafe { stage(s, objects) })
        .collect::<Result<Vec<_>, _>>()?;
    let all_stages = raw_stages
        .iter()
        .fold(vk::ShaderStageFlags::empty(), |a, s| a | s.stage);
    let mesh =
        all_stages.intersects(vk::ShaderStageFlags::MESH_EXT | vk::ShaderStageFlags::TASK_EXT);
    let tessellated = all_stages.contains(
        vk::ShaderStageFlags::TESSELLATION_CONTROL | vk::ShaderStageFlags::TESSELLATION_EVALUATION,
    );

    // A pure link defines no state of its own: its dynamic state is ignored.
    let dynamic_states =
        unsafe { dynamic_states_of(ci.p_dynamic_state.as_ref().filter(|_| own.0 != 0))? };
    let dy = Dynamic::from_states(&dynamic_states)?;

    let (target, color_count, uses_depth_stencil) =
        unsafe { render_target(ci, chain.rendering, own, objects)? };

    // Rasterization is pre-rasterization state: a part without it reads its own blocks as a
    // pipeline that rasterizes would (its discard is the pre-rasterization part's to say).
    let raster = if own.pre_rasterization() {
        Some(
            unsafe { ci.p_rasterization_state.as_ref() }
                .ok_or(Unkeyable::MissingState("rasterization state"))?,
        )
    } else {
        None
    };
    let mut extensions = StateExtensions::default();
    if let Some(raster) = raster {
        extensions.depth_clip = unsafe { fixed::rasterization_chain(raster, dy)? };
    }
    let discard = raster.is_some_and(|r| {
        super::bool32(r.rasterizer_discard_enable)
            && !dy.has(vk::DynamicState::RASTERIZER_DISCARD_ENABLE)
    });
    let rasterization =
        raster.map_or_else(RasterizationDesc::default, |r| fixed::rasterization(r, dy));

    // Dynamic vertex input: `pVertexInputState` is ignored (it may be NULL, or garbage).
    let vertex_input = if mesh || !own.vertex_input() || dy.has(vk::DynamicState::VERTEX_INPUT_EXT)
    {
        None
    } else {
        let v = unsafe { ci.p_vertex_input_state.as_ref() }
            .ok_or(Unkeyable::MissingState("vertex input state"))?;
        let (desc, divisors) = unsafe { fixed::vertex_input(v, dy)? };
        extensions.divisors = divisors;
        Some(desc)
    };
    let input_assembly = if mesh || !own.vertex_input() {
        None
    } else {
        let ia = unsafe { ci.p_input_assembly_state.as_ref() }
            .ok_or(Unkeyable::MissingState("input assembly state"))?;
        Some(unsafe { fixed::input_assembly(ia, dy)? })
    };
    let tessellation_patch_control_points = if tessellated && own.pre_rasterization() {
        let t = unsafe { ci.p_tessellation_state.as_ref() }
            .ok_or(Unkeyable::MissingState("tessellation state"))?;
        unsafe { fixed::patch_control_points(t, dy)? }
    } else {
        None
    };

    let viewport = if discard || !own.pre_rasterization() {
        None
    } else {
        let v = unsafe { ci.p_viewport_state.as_ref() }
            .ok_or(Unkeyable::MissingState("viewport state"))?;
        Some(unsafe { fixed::viewport(v, dy)? })
    };

    // Multisample state: fragment output state always reads it; fragment shader state where
    // it is given (the spec: with sample shading or a render pass; where both subsets read it,
    // it must be identical).
    let multisample_state = unsafe { ci.p_multisample_state.as_ref() };
    // Fragment shader state alone reads it "if sample shading is enabled or renderpass is not
    // VK_NULL_HANDLE", and a shader using SampleId, SamplePosition or Sample inputs enables sample
    // shading of its own: where it is given (a non-NULL pointer must be valid, VUID-09027) it is
    // keyed. DXVK passes none but for sample-rate shading; the record keeps it where the key read
    // it, and a rebuild passes none where none was recorded, so both key alike.
    let fragment_shader_reads = own.fragment_shader() && multisample_state.is_some();
    let reads_multisample = own.fragment_output() || fragment_shader_reads;
    let multisample = if discard || !reads_multisample {
        None
    } else {
        let m = multisample_state.ok_or(Unkeyable::MissingState("multisample state"))?;
        Some(unsafe { fixed::multisample(m, dy)? })
    };

    // Depth-stencil state is fragment shader state: read where the render target uses depth or
    // stencil, and, where the subsets defined do not say (a fragment shader part of dynamic
    // rendering, whose formats are the output part's), wherever it is given.
    let depth_stencil_state = unsafe { ci.p_depth_stencil_state.as_ref() };
    let reads_depth_stencil = match uses_depth_stencil {
        Some(uses) => uses,
        None => depth_stencil_state.is_some(),
    };
    let depth_stencil = if discard || !own.fragment_shader() || !reads_depth_stencil {
        None
    } else {
        let d = depth_stencil_state.ok_or(Unkeyable::MissingState("depth-stencil state"))?;
        Some(unsafe { fixed::depth_stencil(d, dy)? })
    };

    let color_blend = if discard || !own.fragment_output() || color_count == Some(0) {
        None
    } else {
        let b = unsafe { ci.p_color_blend_state.as_ref() }
            .ok_or(Unkeyable::MissingState("colour blend state"))?;
        // SAFETY: a colour blend state of a valid create info.
        Some(unsafe { super::blend::color_blend_desc(b, dy) }?)
    };

    // The layout: read by pre-rasterization and fragment shader state, and by a link (whose
    // layout may override its libraries'). NULL where a link gives none.
    let layout = if own.shaders() || !libraries.is_empty() {
        if ci.layout == vk::PipelineLayout::null() && !own.shaders() {
            Digest([0; 32])
        } else {
            objects
                .pipeline_layouts
                .get(ci.layout.as_raw(), "pipeline layout")?
        }
    } else {
        Digest([0; 32])
    };

    Ok(GraphicsDesc {
        device: *device,
        flags,
        stages,
        vertex_input,
        input_assembly,
        tessellation_patch_control_points,
        viewport,
        rasterization,
        multisample,
        depth_stencil,
        color_blend,
        dynamic_states,
        layout,
        target,
        robustness: chain.robustness,
        library: library::desc(own, libraries),
        extensions,
    })
}

/// The render target: the render pass and subpass, or dynamic rendering's view mask (read by
/// pre-rasterization and fragment shader state) and formats (by fragment output state). With it
/// the colour attachments' count and whether depth or stencil is used: `None` where the subsets
/// defined do not say.
///
/// # Safety
/// `ci` must be a valid create info, and `rendering` the `VkPipelineRenderingCreateInfo` it
/// chains, if any.
unsafe fn render_target(
    ci: &vk::GraphicsPipelineCreateInfo,
    rendering: Option<*const vk::PipelineRenderingCreateInfo<'static>>,
    own: Subsets,
    objects: &Objects,
) -> Result<(RenderTarget, Option<u32>, Option<bool>), Unkeyable> {
    if !own.render_target() {
        return Ok((
            RenderTarget::Pass {
                pass: Digest([0; 32]),
                subpass: 0,
            },
            Some(0),
            Some(false),
        ));
    }
    if ci.render_pass != vk::RenderPass::null() {
        let pass = objects
            .render_passes
            .get(ci.render_pass.as_raw(), "render pass")?;
        let &(colors, depth) = pass
            .subpasses
            .get(ci.subpass as usize)
            .ok_or(Unkeyable::MissingState("subpass"))?;
        return Ok((
            RenderTarget::Pass {
                pass: pass.digest,
                subpass: ci.subpass,
            },
            Some(colors),
            Some(depth),
        ));
    }
    // SAFETY: the chained structure, valid as the caller vouches; read only without a render pass.
    let rendering = rendering.and_then(|r| unsafe { r.as_ref() });
    let output = rendering.filter(|_| own.fragment_output());
    // SAFETY: the formats array of a valid `VkPipelineRenderingCreateInfo`.
    let formats: Vec<u32> = match output {
        Some(r) => unsafe { slice(r.p_color_attachment_formats, r.color_attachment_count) }
            .iter()
            .map(|f| f.as_raw() as u32)
            .collect(),
        None => Vec::new(),
    };
    let (depth, stencil) = match output {
        Some(r) => (
            r.depth_attachment_format.as_raw() as u32,
            r.stencil_attachment_format.as_raw() as u32,
        ),
        None => (0, 0),
    };
    // An attachment of format UNDEFINED is unused: with none used, blending is ignored.
    let count = formats.iter().filter(|f| **f != 0).count() as u32;
    let view_mask = rendering
        .filter(|_| own.shaders())
        .map_or(0, |r| r.view_mask);
    let known = own.fragment_output();
    Ok((
        RenderTarget::Dynamic {
            view_mask,
            color_formats: formats,
            depth_format: depth,
            stencil_format: stencil,
        },
        known.then_some(count),
        known.then_some(depth != 0 || stencil != 0),
    ))
}
