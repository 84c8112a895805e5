//! Plain descriptions of what a pipeline's create info means: values only, no pointers, no
//! handles. The layer fills them from the application's structs (reading only what the Vulkan
//! spec says is not ignored); [`super::hash`] hashes them. Tracked objects (modules, samplers,
//! set layouts, pipeline layouts, render passes) enter as the [`Digest`] of their content, taken
//! when they were created, since applications destroy them early.

use super::feed::{feed_fields, Digest, Feed, KeyWriter};

/// Why a pipeline cannot be keyed. It is then built as the application asked and not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unkeyable {
    #[error("a structure the key does not understand (sType {stype}) in {place}")]
    UnknownStructure { stype: i32, place: &'static str },
    #[error("a pipeline library, or a pipeline linked from libraries")]
    Library,
    #[error("a stage given by a module identifier the layer never saw the driver give")]
    ModuleIdentifier,
    #[error("a {0} the layer never saw created, or whose content it could not read")]
    UnknownObject(&'static str),
    #[error("dynamic state {0} is not one the key knows")]
    UnknownDynamicState(i32),
    #[error("specialization data that does not hold its map entries")]
    InvalidSpecialization,
    #[error("required state is missing: {0}")]
    MissingState(&'static str),
    #[error("create flags the key does not know (0x{0:x})")]
    UnknownFlags(u64),
    #[error("a pipeline that uses pipeline binaries itself")]
    OwnBinaries,
    #[error("ray-tracing shader groups with capture and replay handles")]
    CaptureReplay,
    #[error("it asks for the driver's statistics or internal representations (capture flags)")]
    ExecutableCapture,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SamplerDesc {
    pub flags: u32,
    pub mag_filter: u32,
    pub min_filter: u32,
    pub mipmap_mode: u32,
    pub address_modes: [u32; 3],
    pub mip_lod_bias: f32,
    pub anisotropy_enable: bool,
    pub max_anisotropy: f32,
    pub compare_enable: bool,
    pub compare_op: u32,
    pub min_lod: f32,
    pub max_lod: f32,
    pub border_color: u32,
    pub unnormalized_coordinates: bool,
    pub reduction_mode: Option<u32>,
}
feed_fields!(SamplerDesc {
    flags,
    mag_filter,
    min_filter,
    mipmap_mode,
    address_modes,
    mip_lod_bias,
    anisotropy_enable,
    max_anisotropy,
    compare_enable,
    compare_op,
    min_lod,
    max_lod,
    border_color,
    unnormalized_coordinates,
    reduction_mode
});

#[derive(Clone, Debug, Default, PartialEq)]
pub struct BindingDesc {
    pub binding: u32,
    pub descriptor_type: u32,
    pub descriptor_count: u32,
    pub stage_flags: u32,
    /// From `VkDescriptorSetLayoutBindingFlagsCreateInfo`; 0 where none is chained.
    pub binding_flags: u32,
    pub immutable_samplers: Option<Vec<Digest>>,
}
feed_fields!(BindingDesc {
    binding,
    descriptor_type,
    descriptor_count,
    stage_flags,
    binding_flags,
    immutable_samplers
});

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SetLayoutDesc {
    pub flags: u32,
    /// In any order: the digest sorts them by binding number.
    pub bindings: Vec<BindingDesc>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PushRange {
    pub stage_flags: u32,
    pub offset: u32,
    pub size: u32,
}
feed_fields!(PushRange {
    stage_flags,
    offset,
    size
});

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PipelineLayoutDesc {
    pub flags: u32,
    pub set_layouts: Vec<Digest>,
    pub push_constant_ranges: Vec<PushRange>,
}
feed_fields!(PipelineLayoutDesc {
    flags,
    set_layouts,
    push_constant_ranges
});

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AttachmentDesc {
    pub flags: u32,
    pub format: u32,
    pub samples: u32,
    pub load_op: u32,
    pub store_op: u32,
    pub stencil_load_op: u32,
    pub stencil_store_op: u32,
    pub initial_layout: u32,
    pub final_layout: u32,
}
feed_fields!(AttachmentDesc {
    flags,
    format,
    samples,
    load_op,
    store_op,
    stencil_load_op,
    stencil_store_op,
    initial_layout,
    final_layout
});

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AttachmentRef {
    pub attachment: u32,
    pub layout: u32,
    /// `VkAttachmentReference2::aspectMask`; 0 for a version-one render pass.
    pub aspect_mask: u32,
}
feed_fields!(AttachmentRef {
    attachment,
    layout,
    aspect_mask
});

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SubpassDesc {
    pub flags: u32,
    pub bind_point: u32,
    pub view_mask: u32,
    pub inputs: Vec<AttachmentRef>,
    pub colors: Vec<AttachmentRef>,
    pub resolves: Option<Vec<AttachmentRef>>,
    pub depth_stencil: Option<AttachmentRef>,
    pub preserve: Vec<u32>,
}
feed_fields!(SubpassDesc {
    flags,
    bind_point,
    view_mask,
    inputs,
    colors,
    resolves,
    depth_stencil,
    preserve
});

impl SubpassDesc {
    /// Whether the subpass writes a depth/stencil attachment (the depth-stencil state matters).
    pub fn uses_depth_stencil(&self) -> bool {
        self.depth_stencil.is_some_and(|r| r.attachment != u32::MAX)
    }

    /// The colour attachments the subpass uses (`VK_ATTACHMENT_UNUSED` ones are not): with none,
    /// the spec says a pipeline's colour blend state is ignored.
    pub fn used_colors(&self) -> u32 {
        self.colors
            .iter()
            .filter(|r| r.attachment != u32::MAX)
            .count() as u32
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DependencyDesc {
    pub src_subpass: u32,
    pub dst_subpass: u32,
    pub src_stage_mask: u32,
    pub dst_stage_mask: u32,
    pub src_access_mask: u32,
    pub dst_access_mask: u32,
    pub flags: u32,
    pub view_offset: i32,
}
feed_fields!(DependencyDesc {
    src_subpass,
    dst_subpass,
    src_stage_mask,
    dst_stage_mask,
    src_access_mask,
    dst_access_mask,
    flags,
    view_offset
});

#[derive(Clone, Debug, Default, PartialEq)]
pub struct RenderPassDesc {
    /// 1 for `vkCreateRenderPass`, 2 for `vkCreateRenderPass2`.
    pub version: u32,
    pub flags: u32,
    pub attachments: Vec<AttachmentDesc>,
    pub subpasses: Vec<SubpassDesc>,
    pub dependencies: Vec<DependencyDesc>,
    pub correlated_view_masks: Vec<u32>,
}
feed_fields!(RenderPassDesc {
    version,
    flags,
    attachments,
    subpasses,
    dependencies,
    correlated_view_masks
});

/// What the pipeline-building path needs of a render pass: its digest, and per subpass whether
/// the depth-stencil and colour-blend states are read at all.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderPassInfo {
    pub digest: Digest,
    /// (colour attachments used, uses depth/stencil) per subpass.
    pub subpasses: Vec<(u32, bool)>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpecConstant {
    pub constant_id: u32,
    pub value: Vec<u8>,
}
feed_fields!(SpecConstant { constant_id, value });

impl Feed for u8 {
    fn feed(&self, w: &mut KeyWriter) {
        w.u32(u32::from(*self));
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Robustness {
    pub storage_buffers: u32,
    pub uniform_buffers: u32,
    pub vertex_inputs: u32,
    pub images: u32,
}
feed_fields!(Robustness {
    storage_buffers,
    uniform_buffers,
    vertex_inputs,
    images
});

/// One shader stage. What the driver compiles enters the SPIR-V key (stage, module, entry
/// point, specialization); the rest enters the state key.
#[derive(Clone, Debug, PartialEq)]
pub struct StageDesc {
    pub stage: u32,
    pub flags: u32,
    pub module: Digest,
    pub entry_point: Vec<u8>,
    /// In any order: the key sorts them by constant id.
    pub specialization: Vec<SpecConstant>,
    pub required_subgroup_size: Option<u32>,
    pub robustness: Option<Robustness>,
}

/// One shader object (`VkShaderCreateInfoEXT`, `VK_EXT_shader_object`): its stage as a
/// pipeline's stage is described (its flags the shader's create flags), the stage that may follow
/// it, and the layout it names inline (set layouts and push-constant ranges; flags 0).
#[derive(Clone, Debug, PartialEq)]
pub struct ShaderDesc {
    pub stage: StageDesc,
    pub next_stage: u32,
    pub layout: PipelineLayoutDesc,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ComputeDesc {
    /// The device's own state ([`super::device_digest`]).
    pub device: Digest,
    pub flags: u32,
    pub stage: StageDesc,
    pub layout: Digest,
    pub robustness: Option<Robustness>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VertexBinding {
    pub binding: u32,
    /// `None` where the stride is dynamic.
    pub stride: Option<u32>,
    pub input_rate: u32,
}
feed_fields!(VertexBinding {
    binding,
    stride,
    input_rate
});

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VertexAttribute {
    pub location: u32,
    pub binding: u32,
    pub format: u32,
    pub offset: u32,
}
feed_fields!(VertexAttribute {
    location,
    binding,
    format,
    offset
});

#[derive(Clone, Debug, Default, PartialEq)]
pub struct VertexInputDesc {
    pub flags: u32,
    pub bindings: Vec<VertexBinding>,
    pub attributes: Vec<VertexAttribute>,
}
feed_fields!(VertexInputDesc {
    flags,
    bindings,
    attributes
});

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InputAssemblyDesc {
    pub flags: u32,
    pub topology: u32,
    pub primitive_restart: Option<bool>,
}
feed_fields!(InputAssemblyDesc {
    flags,
    topology,
    primitive_restart
});

/// A viewport as x, y, width, height, min depth, max depth.
pub type Viewport = [f32; 6];
/// A scissor as offset x, offset y, extent width, extent height.
pub type Scissor = [u32; 4];

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ViewportDesc {
    pub flags: u32,
    pub viewport_count: Option<u32>,
    pub viewports: Option<Vec<Viewport>>,
    pub scissor_count: Option<u32>,
    pub scissors: Option<Vec<Scissor>>,
}
feed_fields!(ViewportDesc {
    flags,
    viewport_count,
    viewports,
    scissor_count,
    scissors
});

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RasterizationDesc {
    pub flags: u32,
    pub depth_clamp_enable: bool,
    pub rasterizer_discard_enable: Option<bool>,
    pub polygon_mode: u32,
    pub cull_mode: Option<u32>,
    pub front_face: Option<u32>,
    pub depth_bias_enable: Option<bool>,
    /// Constant factor, clamp, slope factor.
    pub depth_bias: Option<[f32; 3]>,
    pub line_width: Option<f32>,
}
feed_fields!(RasterizationDesc {
    flags,
    depth_clamp_enable,
    rasterizer_discard_enable,
    polygon_mode,
    cull_mode,
    front_face,
    depth_bias_enable,
    depth_bias,
    line_width
});

#[derive(Clone, Debug, Default, PartialEq)]
pub struct MultisampleDesc {
    pub flags: u32,
    pub rasterization_samples: u32,
    pub sample_shading_enable: bool,
    pub min_sample_shading: f32,
    pub sample_mask: Option<Vec<u32>>,
    pub alpha_to_coverage_enable: bool,
    pub alpha_to_one_enable: bool,
}
feed_fields!(MultisampleDesc {
    flags,
    rasterization_samples,
    sample_shading_enable,
    min_sample_shading,
    sample_mask,
    alpha_to_coverage_enable,
    alpha_to_one_enable
});

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StencilDesc {
    /// fail, pass, depth-fail, compare op; `None` where the stencil op is dynamic.
    pub ops: Option<[u32; 4]>,
    pub compare_mask: Option<u32>,
    pub write_mask: Option<u32>,
    pub reference: Option<u32>,
}
feed_fields!(StencilDesc {
    ops,
    compare_mask,
    write_mask,
    reference
});

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DepthStencilDesc {
    pub flags: u32,
    pub depth_test_enable: Option<bool>,
    pub depth_write_enable: Option<bool>,
    pub depth_compare_op: Option<u32>,
    pub depth_bounds_test_enable: Option<bool>,
    pub stencil_test_enable: Option<bool>,
    pub front: StencilDesc,
    pub back: StencilDesc,
    pub depth_bounds: Option<[f32; 2]>,
}
feed_fields!(DepthStencilDesc {
    flags,
    depth_test_enable,
    depth_write_enable,
    depth_compare_op,
    depth_bounds_test_enable,
    stencil_test_enable,
    front,
    back,
    depth_bounds
});

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlendAttachment {
    pub blend_enable: bool,
    pub src_color_factor: u32,
    pub dst_color_factor: u32,
    pub color_op: u32,
    pub src_alpha_factor: u32,
    pub dst_alpha_factor: u32,
    pub alpha_op: u32,
    pub color_write_mask: u32,
}
feed_fields!(BlendAttachment {
    blend_enable,
    src_color_factor,
    dst_color_factor,
    color_op,
    src_alpha_factor,
    dst_alpha_factor,
    alpha_op,
    color_write_mask
});

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ColorBlendDesc {
    pub flags: u32,
    pub logic_op_enable: bool,
    pub logic_op: Option<u32>,
    pub attachments: Vec<BlendAttachment>,
    pub blend_constants: Option<[f32; 4]>,
}
feed_fields!(ColorBlendDesc {
    flags,
    logic_op_enable,
    logic_op,
    attachments,
    blend_constants
});

/// What the pipeline renders into: a render pass's subpass, or dynamic rendering's formats.
#[derive(Clone, Debug, PartialEq)]
pub enum RenderTarget {
    Pass {
        pass: Digest,
        subpass: u32,
    },
    Dynamic {
        view_mask: u32,
        color_formats: Vec<u32>,
        depth_format: u32,
        stencil_format: u32,
    },
}

impl RenderTarget {
    /// The render pass it names, where it names one (a vertex input part names none: its
    /// digest is zero).
    pub fn filter_pass(self) -> Option<RenderTarget> {
        match self {
            RenderTarget::Pass { pass, .. } if pass == Digest([0; 32]) => None,
            RenderTarget::Pass { .. } => Some(self),
            RenderTarget::Dynamic { .. } => None,
        }
    }
}

impl Feed for RenderTarget {
    fn feed(&self, w: &mut KeyWriter) {
        match self {
            RenderTarget::Pass { pass, subpass } => {
                w.u32(1);
                pass.feed(w);
                subpass.feed(w);
            }
            RenderTarget::Dynamic {
                view_mask,
                color_formats,
                depth_format,
                stencil_format,
            } => {
                w.u32(2);
                view_mask.feed(w);
                color_formats.feed(w);
                depth_format.feed(w);
                stencil_format.feed(w);
            }
        }
    }
}

/// A graphics pipeline's shape: every state block the create info supplies, with the fields the
/// Vulkan spec says are ignored (dynamic, or the block not read at all) left as `None`.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphicsDesc {
    /// The device's own state ([`super::device_digest`]).
    pub device: Digest,
    pub flags: u32,
    pub stages: Vec<StageDesc>,
    pub vertex_input: Option<VertexInputDesc>,
    pub input_assembly: Option<InputAssemblyDesc>,
    pub tessellation_patch_control_points: Option<u32>,
    pub viewport: Option<ViewportDesc>,
    pub rasterization: RasterizationDesc,
    pub multisample: Option<MultisampleDesc>,
    pub depth_stencil: Option<DepthStencilDesc>,
    pub color_blend: Option<ColorBlendDesc>,
    /// In any order: the key sorts them.
    pub dynamic_states: Vec<u32>,
    pub layout: Digest,
    pub target: RenderTarget,
    pub robustness: Option<Robustness>,
    /// A graphics pipeline library part, or a pipeline linked from libraries: what it defines
    /// itself and what it links. `None` for a complete pipeline made whole (its key is as it was
    /// before libraries were keyed).
    pub library: Option<LibraryDesc>,
    /// State structures chained to the state blocks (empty: the key is as it was before they
    /// were read).
    pub extensions: StateExtensions,
}

/// The structures chained to a graphics pipeline's state blocks that the key reads, as DXVK
/// chains them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateExtensions {
    /// `VkPipelineRasterizationDepthClipStateCreateInfoEXT`: its flags, and `depthClipEnable`
    /// unless dynamic.
    pub depth_clip: Option<(u32, Option<bool>)>,
    /// `VkPipelineVertexInputDivisorStateCreateInfo`: `(binding, divisor)`, sorted.
    pub divisors: Option<Vec<(u32, u32)>>,
}

impl Feed for StateExtensions {
    fn feed(&self, w: &mut KeyWriter) {
        w.u32(0x4558_5431); // "EXT1"
        match self.depth_clip {
            None => w.u32(0),
            Some((flags, enable)) => {
                w.u32(1);
                flags.feed(w);
                enable.feed(w);
            }
        }
        match &self.divisors {
            None => w.u32(0),
            Some(d) => {
                w.u32(1);
                w.u64(d.len() as u64);
                for (binding, divisor) in d {
                    binding.feed(w);
                    divisor.feed(w);
                }
            }
        }
    }
}

/// A ray-tracing pipeline (`VkRayTracingPipelineCreateInfoKHR`) as its key sees it: its stages,
/// groups, recursion depth, library interface, dynamic states, layout and the libraries it links
/// in order (their shaders and groups are appended in that order: the order is meaning).
#[derive(Clone, Debug, PartialEq)]
pub struct RayTracingDesc {
    pub device: Digest,
    pub flags: u32,
    pub stages: Vec<StageDesc>,
    pub groups: Vec<RayTracingGroup>,
    pub max_recursion_depth: u32,
    /// `maxPipelineRayPayloadSize`, `maxPipelineRayHitAttributeSize`, where given.
    pub library_interface: Option<[u32; 2]>,
    pub dynamic_states: Vec<u32>,
    pub layout: Digest,
    pub libraries: Vec<super::PipelineKey>,
    pub robustness: Option<Robustness>,
}

/// One shader group of a ray-tracing pipeline: its type and its four shader indices
/// (`VK_SHADER_UNUSED_KHR` where unused).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RayTracingGroup {
    pub group_type: u32,
    pub general: u32,
    pub closest_hit: u32,
    pub any_hit: u32,
    pub intersection: u32,
}
feed_fields!(RayTracingGroup {
    group_type,
    general,
    closest_hit,
    any_hit,
    intersection
});

/// What a graphics pipeline library part, or a pipeline linked from libraries, adds to its key.
/// The state blocks of [`GraphicsDesc`] then hold only what its own subsets consume (the spec:
/// "any state not explicitly listed for a particular library part will be ignored").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LibraryDesc {
    /// The `VkGraphicsPipelineLibraryFlagsEXT` it defines itself (0 for a pure link).
    pub subsets: u32,
    /// The keys of the libraries it links, in `pLibraries` order (each key holds its library's
    /// own subsets, state and libraries).
    pub libraries: Vec<super::PipelineKey>,
}

impl Feed for LibraryDesc {
    fn feed(&self, w: &mut KeyWriter) {
        w.u32(0x4c49_4231); // "LIB1": never the start of what a complete pipeline feeds here
        self.subsets.feed(w);
        self.libraries.feed(w);
    }
}

/// What a device was made with that changes what its driver compiles: the extensions the
/// application enabled, the content of every feature structure it chained (each by its
/// `sType`, as the `VkBool32`s it holds), its `pEnabledFeatures`, and the `sType` of any
/// structure the layer does not know (whose content it cannot read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceState {
    pub extensions: Vec<Vec<u8>>,
    pub features: Vec<(i32, Vec<u32>)>,
    pub core_features: Option<Vec<u32>>,
    pub unknown: Vec<i32>,
}
