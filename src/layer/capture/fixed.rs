//! The fixed-function blocks of a graphics create info as the key reads them: rasterization (and
//! what its chain adds), vertex input, input assembly, tessellation, viewports, multisampling and
//! depth-stencil. Where a field's dynamic state is set, the field is ignored (never keyed: the
//! key's type holds `None`, or false or 0 where it holds a plain value, and the dynamic state
//! itself enters the key), and an array it covers is never followed. Which blocks are read at
//! all is the graphics create info's to say (`graphics.rs`).

use ash::vk;

use super::{bool32, unique_chain};
use crate::key::desc::*;
use crate::key::{Dynamic, Unkeyable};
use crate::layer::objects::{only_known, slice};

use vk::DynamicState as D;
use vk::StructureType as S;

/// What the rasterization state's chain adds to the key: depth clip state, where chained.
///
/// # Safety
/// `raster` must be the rasterization state of a valid create info whose dynamic states are `dy`.
pub(super) unsafe fn rasterization_chain(
    raster: &vk::PipelineRasterizationStateCreateInfo,
    dy: Dynamic,
) -> Result<Option<(u32, Option<bool>)>, Unkeyable> {
    let mut depth_clip = None;
    // SAFETY (whole body): the state's chain, valid as the caller vouches; each sType matched.
    for p in unsafe { unique_chain(raster.p_next, "the rasterization state, twice")? } {
        match unsafe { (*p).s_type } {
            S::PIPELINE_RASTERIZATION_DEPTH_CLIP_STATE_CREATE_INFO_EXT => {
                let c =
                    unsafe { &*(p as *const vk::PipelineRasterizationDepthClipStateCreateInfoEXT) };
                depth_clip = Some((
                    c.flags.as_raw(),
                    dy.unless(D::DEPTH_CLIP_ENABLE_EXT, bool32(c.depth_clip_enable)),
                ));
            }
            // Structures every field of which is dynamic are ignored (zink chains them so).
            S::PIPELINE_RASTERIZATION_PROVOKING_VERTEX_STATE_CREATE_INFO_EXT
                if dy.has(D::PROVOKING_VERTEX_MODE_EXT) => {}
            S::PIPELINE_RASTERIZATION_LINE_STATE_CREATE_INFO_KHR
                if dy.has(D::LINE_RASTERIZATION_MODE_EXT)
                    && dy.has(D::LINE_STIPPLE_ENABLE_EXT)
                    && dy.has(D::LINE_STIPPLE_KHR) => {}
            other => {
                return Err(Unkeyable::UnknownStructure {
                    stype: other.as_raw(),
                    place: "the rasterization state",
                })
            }
        }
    }
    Ok(depth_clip)
}

/// The rasterization state's own fields.
pub(super) fn rasterization(
    raster: &vk::PipelineRasterizationStateCreateInfo,
    dy: Dynamic,
) -> RasterizationDesc {
    RasterizationDesc {
        flags: raster.flags.as_raw(),
        depth_clamp_enable: dy
            .unless(D::DEPTH_CLAMP_ENABLE_EXT, bool32(raster.depth_clamp_enable))
            .unwrap_or(false),
        rasterizer_discard_enable: dy.unless(
            D::RASTERIZER_DISCARD_ENABLE,
            bool32(raster.rasterizer_discard_enable),
        ),
        polygon_mode: dy
            .unless(D::POLYGON_MODE_EXT, raster.polygon_mode.as_raw() as u32)
            .unwrap_or(0),
        cull_mode: dy.unless(D::CULL_MODE, raster.cull_mode.as_raw()),
        front_face: dy.unless(D::FRONT_FACE, raster.front_face.as_raw() as u32),
        depth_bias_enable: dy.unless(D::DEPTH_BIAS_ENABLE, bool32(raster.depth_bias_enable)),
        depth_bias: dy.unless(
            D::DEPTH_BIAS,
            [
                raster.depth_bias_constant_factor,
                raster.depth_bias_clamp,
                raster.depth_bias_slope_factor,
            ],
        ),
        line_width: dy.unless(D::LINE_WIDTH, raster.line_width),
    }
}

/// Vertex binding divisors, `(binding, divisor)` sorted.
type Divisors = Vec<(u32, u32)>;

/// The vertex input state, bindings sorted by binding and attributes by location, with the
/// divisors its chain gives (sorted), where chained.
///
/// # Safety
/// `v` must be the vertex input state of a valid create info whose dynamic states are `dy`.
pub(super) unsafe fn vertex_input(
    v: &vk::PipelineVertexInputStateCreateInfo,
    dy: Dynamic,
) -> Result<(VertexInputDesc, Option<Divisors>), Unkeyable> {
    let mut divisors = None;
    // SAFETY (whole body): the state's chain and arrays, valid as the caller vouches; each sType
    // matched.
    for p in unsafe { unique_chain(v.p_next, "the vertex input state, twice")? } {
        match unsafe { (*p).s_type } {
            S::PIPELINE_VERTEX_INPUT_DIVISOR_STATE_CREATE_INFO_KHR => {
                let d = unsafe { &*(p as *const vk::PipelineVertexInputDivisorStateCreateInfoKHR) };
                let mut each: Divisors =
                    unsafe { slice(d.p_vertex_binding_divisors, d.vertex_binding_divisor_count) }
                        .iter()
                        .map(|x| (x.binding, x.divisor))
                        .collect();
                each.sort_unstable();
                divisors = Some(each);
            }
            other => {
                return Err(Unkeyable::UnknownStructure {
                    stype: other.as_raw(),
                    place: "the vertex input state",
                })
            }
        }
    }
    let mut bindings: Vec<VertexBinding> = unsafe {
        slice(
            v.p_vertex_binding_descriptions,
            v.vertex_binding_description_count,
        )
    }
    .iter()
    .map(|b| VertexBinding {
        binding: b.binding,
        stride: dy.unless(D::VERTEX_INPUT_BINDING_STRIDE, b.stride),
        input_rate: b.input_rate.as_raw() as u32,
    })
    .collect();
    bindings.sort_by_key(|b| b.binding);
    let mut attributes: Vec<VertexAttribute> = unsafe {
        slice(
            v.p_vertex_attribute_descriptions,
            v.vertex_attribute_description_count,
        )
    }
    .iter()
    .map(|a| VertexAttribute {
        location: a.location,
        binding: a.binding,
        format: a.format.as_raw() as u32,
        offset: a.offset,
    })
    .collect();
    attributes.sort_by_key(|a| a.location);
    let desc = VertexInputDesc {
        flags: v.flags.as_raw(),
        bindings,
        attributes,
    };
    Ok((desc, divisors))
}

/// The input assembly state (no primitive restart where it is dynamic).
///
/// # Safety
/// `ia` must be the input assembly state of a valid create info whose dynamic states are `dy`.
pub(super) unsafe fn input_assembly(
    ia: &vk::PipelineInputAssemblyStateCreateInfo,
    dy: Dynamic,
) -> Result<InputAssemblyDesc, Unkeyable> {
    // SAFETY: the state's chain, valid as the caller vouches.
    unsafe { only_known(ia.p_next, &[], "the input assembly state")? };
    Ok(InputAssemblyDesc {
        flags: ia.flags.as_raw(),
        topology: ia.topology.as_raw() as u32,
        primitive_restart: dy.unless(
            D::PRIMITIVE_RESTART_ENABLE,
            bool32(ia.primitive_restart_enable),
        ),
    })
}

/// The tessellation state's patch control points (`None` where dynamic).
///
/// # Safety
/// `t` must be the tessellation state of a valid create info whose dynamic states are `dy`.
pub(super) unsafe fn patch_control_points(
    t: &vk::PipelineTessellationStateCreateInfo,
    dy: Dynamic,
) -> Result<Option<u32>, Unkeyable> {
    // SAFETY: the state's chain, valid as the caller vouches.
    unsafe { only_known(t.p_next, &[], "the tessellation state")? };
    Ok(dy.unless(D::PATCH_CONTROL_POINTS_EXT, t.patch_control_points))
}

/// The viewport state: its arrays are read only where neither they nor their counts are dynamic.
///
/// # Safety
/// `v` must be the viewport state of a valid create info whose dynamic states are `dy`.
pub(super) unsafe fn viewport(
    v: &vk::PipelineViewportStateCreateInfo,
    dy: Dynamic,
) -> Result<ViewportDesc, Unkeyable> {
    // Depth clip control's one field is dynamic where zink chains it.
    let ignored: &[S] = if dy.has(D::DEPTH_CLIP_NEGATIVE_ONE_TO_ONE_EXT) {
        &[S::PIPELINE_VIEWPORT_DEPTH_CLIP_CONTROL_CREATE_INFO_EXT]
    } else {
        &[]
    };
    // SAFETY (whole body): the state's chain and arrays, valid as the caller vouches.
    unsafe { only_known(v.p_next, ignored, "the viewport state")? };
    let with_count_v = dy.has(D::VIEWPORT_WITH_COUNT);
    let with_count_s = dy.has(D::SCISSOR_WITH_COUNT);
    let viewports =
        (!dy.has(D::VIEWPORT) && !with_count_v && !v.p_viewports.is_null()).then(|| {
            unsafe { slice(v.p_viewports, v.viewport_count) }
                .iter()
                .map(|p| [p.x, p.y, p.width, p.height, p.min_depth, p.max_depth])
                .collect()
        });
    let scissors = (!dy.has(D::SCISSOR) && !with_count_s && !v.p_scissors.is_null()).then(|| {
        unsafe { slice(v.p_scissors, v.scissor_count) }
            .iter()
            .map(|s| {
                [
                    s.offset.x as u32,
                    s.offset.y as u32,
                    s.extent.width,
                    s.extent.height,
                ]
            })
            .collect()
    });
    Ok(ViewportDesc {
        flags: v.flags.as_raw(),
        viewport_count: (!with_count_v).then_some(v.viewport_count),
        viewports,
        scissor_count: (!with_count_s).then_some(v.scissor_count),
        scissors,
    })
}

/// The multisample state. A dynamic sample count stands as 0 (never a static one); a dynamic
/// sample mask's array is never read, nor one whose length a dynamic sample count leaves unsaid
/// (unkeyable).
///
/// # Safety
/// `m` must be the multisample state of a valid create info whose dynamic states are `dy`.
pub(super) unsafe fn multisample(
    m: &vk::PipelineMultisampleStateCreateInfo,
    dy: Dynamic,
) -> Result<MultisampleDesc, Unkeyable> {
    // SAFETY (whole body): the state's chain and mask, valid as the caller vouches.
    unsafe { only_known(m.p_next, &[], "the multisample state")? };
    let words = m.rasterization_samples.as_raw().div_ceil(32);
    let samples = dy
        .unless(
            D::RASTERIZATION_SAMPLES_EXT,
            m.rasterization_samples.as_raw(),
        )
        .unwrap_or(0);
    let mask_read = !m.p_sample_mask.is_null() && !dy.has(D::SAMPLE_MASK_EXT);
    if mask_read && dy.has(D::RASTERIZATION_SAMPLES_EXT) {
        return Err(Unkeyable::MissingState("the sample mask's length"));
    }
    Ok(MultisampleDesc {
        flags: m.flags.as_raw(),
        rasterization_samples: samples,
        sample_shading_enable: bool32(m.sample_shading_enable),
        min_sample_shading: m.min_sample_shading,
        sample_mask: mask_read.then(|| unsafe { slice(m.p_sample_mask, words) }.to_vec()),
        alpha_to_coverage_enable: dy
            .unless(
                D::ALPHA_TO_COVERAGE_ENABLE_EXT,
                bool32(m.alpha_to_coverage_enable),
            )
            .unwrap_or(false),
        alpha_to_one_enable: dy
            .unless(D::ALPHA_TO_ONE_ENABLE_EXT, bool32(m.alpha_to_one_enable))
            .unwrap_or(false),
    })
}

/// The depth-stencil state, both stencil faces with it.
///
/// # Safety
/// `d` must be the depth-stencil state of a valid create info whose dynamic states are `dy`.
pub(super) unsafe fn depth_stencil(
    d: &vk::PipelineDepthStencilStateCreateInfo,
    dy: Dynamic,
) -> Result<DepthStencilDesc, Unkeyable> {
    // SAFETY: the state's chain, valid as the caller vouches.
    unsafe { only_known(d.p_next, &[], "the depth-stencil state")? };
    let stencil = |s: &vk::StencilOpState| StencilDesc {
        ops: dy
            .unless(
                D::STENCIL_OP,
                [s.fail_op, s.pass_op, s.depth_fail_op].map(|o| o.as_raw() as u32),
            )
            .map(|[a, b, c]| [a, b, c, s.compare_op.as_raw() as u32]),
        compare_mask: dy.unless(D::STENCIL_COMPARE_MASK, s.compare_mask),
        write_mask: dy.unless(D::STENCIL_WRITE_MASK, s.write_mask),
        reference: dy.unless(D::STENCIL_REFERENCE, s.reference),
    };
    Ok(DepthStencilDesc {
        flags: d.flags.as_raw(),
        depth_test_enable: dy.unless(D::DEPTH_TEST_ENABLE, bool32(d.depth_test_enable)),
        depth_write_enable: dy.unless(D::DEPTH_WRITE_ENABLE, bool32(d.depth_write_enable)),
        depth_compare_op: dy.unless(D::DEPTH_COMPARE_OP, d.depth_compare_op.as_raw() as u32),
        depth_bounds_test_enable: dy.unless(
            D::DEPTH_BOUNDS_TEST_ENABLE,
            bool32(d.depth_bounds_test_enable),
        ),
        stencil_test_enable: dy.unless(D::STENCIL_TEST_ENABLE, bool32(d.stencil_test_enable)),
        front: stencil(&d.front),
        back: stencil(&d.back),
        depth_bounds: dy.unless(D::DEPTH_BOUNDS, [d.min_depth_bounds, d.max_depth_bounds]),
    })
}
