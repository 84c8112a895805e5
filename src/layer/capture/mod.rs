//! Reading a pipeline's create info into the key's descriptions. Only what the Vulkan spec says
//! is read is read: a pointer the spec ignores (a state block under rasterizer discard, the
//! viewports when they are dynamic, ...) may be garbage and is never followed. Anything the key
//! does not understand makes the pipeline unkeyable; unknown never means "hash what we understood".

use std::ffi::CStr;

use ash::vk;
use ash::vk::Handle;

mod blend;
mod library;
mod shader;

pub use shader::shader_desc;

pub use super::objects::KnownLibrary;
use library::Subsets;

use super::abi::chain;
use super::objects::{inline_module_content, only_known, slice, Objects};
use crate::key::desc::*;
use crate::key::{Digest, Dynamic, Unkeyable};

use vk::DynamicState as D;
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

    // The render target: the render pass and subpass, or dynamic rendering's view mask (read by
    // pre-rasterization and fragment shader state) and formats (by fragment output state).
    // `color_count` and `uses_depth_stencil`: `None` where the subsets defined do not say.
    let (target, color_count, uses_depth_stencil) = if !own.render_target() {
        (
            RenderTarget::Pass {
                pass: Digest([0; 32]),
                subpass: 0,
            },
            Some(0),
            Some(false),
        )
    } else if ci.render_pass != vk::RenderPass::null() {
        let pass = objects
            .render_passes
            .get(ci.render_pass.as_raw(), "render pass")?;
        let &(colors, depth) = pass
            .subpasses
            .get(ci.subpass as usize)
            .ok_or(Unkeyable::MissingState("subpass"))?;
        (
            RenderTarget::Pass {
                pass: pass.digest,
                subpass: ci.subpass,
            },
            Some(colors),
            Some(depth),
        )
    } else {
        let r = chain.rendering.and_then(|r| unsafe { r.as_ref() });
        let formats: Vec<u32> = match r.filter(|_| own.fragment_output()) {
            Some(r) => unsafe { slice(r.p_color_attachment_formats, r.color_attachment_count) }
                .iter()
                .map(|f| f.as_raw() as u32)
                .collect(),
            None => Vec::new(),
        };
        let (depth, stencil) = match r.filter(|_| own.fragment_output()) {
            Some(r) => (
                r.depth_attachment_format.as_raw() as u32,
                r.stencil_attachment_format.as_raw() as u32,
            ),
            None => (0, 0),
        };
        // An attachment of format UNDEFINED is unused: with none used, blending is ignored.
        let count = formats.iter().filter(|f| **f != 0).count() as u32;
        let view_mask = r.filter(|_| own.shaders()).map_or(0, |r| r.view_mask);
        let known = own.fragment_output();
        (
            RenderTarget::Dynamic {
                view_mask,
                color_formats: formats,
                depth_format: depth,
                stencil_format: stencil,
            },
            known.then_some(count),
            known.then_some(depth != 0 || stencil != 0),
        )
    };

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
        for p in unsafe { unique_chain(raster.p_next, "the rasterization state, twice")? } {
            match unsafe { (*p).s_type } {
                S::PIPELINE_RASTERIZATION_DEPTH_CLIP_STATE_CREATE_INFO_EXT => {
                    let c = unsafe {
                        &*(p as *const vk::PipelineRasterizationDepthClipStateCreateInfoEXT)
                    };
                    extensions.depth_clip = Some((
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
    }
    let discard = raster.is_some_and(|r| {
        bool32(r.rasterizer_discard_enable) && !dy.has(D::RASTERIZER_DISCARD_ENABLE)
    });
    let rasterization =
        raster.map_or_else(RasterizationDesc::default, |raster| RasterizationDesc {
            flags: raster.flags.as_raw(),
            // Dynamic, a field the key's type holds as a plain value is ignored: false or 0
            // stands in its place (the dynamic state itself enters the key).
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
        });

    // Dynamic vertex input: `pVertexInputState` is ignored (it may be NULL, or garbage).
    let vertex_input = if mesh || !own.vertex_input() || dy.has(D::VERTEX_INPUT_EXT) {
        None
    } else {
        let v = unsafe { ci.p_vertex_input_state.as_ref() }
            .ok_or(Unkeyable::MissingState("vertex input state"))?;
        for p in unsafe { unique_chain(v.p_next, "the vertex input state, twice")? } {
            match unsafe { (*p).s_type } {
                S::PIPELINE_VERTEX_INPUT_DIVISOR_STATE_CREATE_INFO_KHR => {
                    let d =
                        unsafe { &*(p as *const vk::PipelineVertexInputDivisorStateCreateInfoKHR) };
                    let mut divisors: Vec<(u32, u32)> = unsafe {
                        slice(d.p_vertex_binding_divisors, d.vertex_binding_divisor_count)
                    }
                    .iter()
                    .map(|x| (x.binding, x.divisor))
                    .collect();
                    divisors.sort_unstable();
                    extensions.divisors = Some(divisors);
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
        Some(VertexInputDesc {
            flags: v.flags.as_raw(),
            bindings,
            attributes,
        })
    };
    let input_assembly = if mesh || !own.vertex_input() {
        None
    } else {
        let ia = unsafe { ci.p_input_assembly_state.as_ref() }
            .ok_or(Unkeyable::MissingState("input assembly state"))?;
        unsafe { only_known(ia.p_next, &[], "the input assembly state")? };
        Some(InputAssemblyDesc {
            flags: ia.flags.as_raw(),
            topology: ia.topology.as_raw() as u32,
            primitive_restart: dy.unless(
                D::PRIMITIVE_RESTART_ENABLE,
                bool32(ia.primitive_restart_enable),
            ),
        })
    };
    let tessellation_patch_control_points = if tessellated && own.pre_rasterization() {
        let t = unsafe { ci.p_tessellation_state.as_ref() }
            .ok_or(Unkeyable::MissingState("tessellation state"))?;
        unsafe { only_known(t.p_next, &[], "the tessellation state")? };
        dy.unless(D::PATCH_CONTROL_POINTS_EXT, t.patch_control_points)
    } else {
        None
    };

    let viewport = if discard || !own.pre_rasterization() {
        None
    } else {
        let v = unsafe { ci.p_viewport_state.as_ref() }
            .ok_or(Unkeyable::MissingState("viewport state"))?;
        // Depth clip control's one field is dynamic where zink chains it.
        let ignored: &[S] = if dy.has(D::DEPTH_CLIP_NEGATIVE_ONE_TO_ONE_EXT) {
            &[S::PIPELINE_VIEWPORT_DEPTH_CLIP_CONTROL_CREATE_INFO_EXT]
        } else {
            &[]
        };
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
        let scissors =
            (!dy.has(D::SCISSOR) && !with_count_s && !v.p_scissors.is_null()).then(|| {
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
        Some(ViewportDesc {
            flags: v.flags.as_raw(),
            viewport_count: (!with_count_v).then_some(v.viewport_count),
            viewports,
            scissor_count: (!with_count_s).then_some(v.scissor_count),
            scissors,
        })
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
        unsafe { only_known(m.p_next, &[], "the multisample state")? };
        let words = m.rasterization_samples.as_raw().div_ceil(32);
        // Dynamic, a field is ignored: 0 (never a static sample count) or false stands in its
        // place, and the dynamic state itself enters the key. A dynamic sample mask's array is
        // never read.
        let samples = dy
            .unless(
                D::RASTERIZATION_SAMPLES_EXT,
                m.rasterization_samples.as_raw(),
            )
            .unwrap_or(0);
        let mask_read = !m.p_sample_mask.is_null() && !dy.has(D::SAMPLE_MASK_EXT);
        // The mask's length comes from the sample count, which a dynamic one leaves unsaid.
        if mask_read && dy.has(D::RASTERIZATION_SAMPLES_EXT) {
            return Err(Unkeyable::MissingState("the sample mask's length"));
        }
        Some(MultisampleDesc {
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
        Some(DepthStencilDesc {
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
    };

    let color_blend = if discard || !own.fragment_output() || color_count == Some(0) {
        None
    } else {
        let b = unsafe { ci.p_color_blend_state.as_ref() }
            .ok_or(Unkeyable::MissingState("colour blend state"))?;
        // SAFETY: a colour blend state of a valid create info.
        Some(unsafe { blend::color_blend_desc(b, dy) }?)
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
