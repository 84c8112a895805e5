//! The keys themselves: digests of tracked objects, the dynamic-state rules that decide which
//! fields the Vulkan spec ignores, and the SPIR-V and state keys of a pipeline.
//!
//! Every key starts with [`KEY_VERSION`] and the hash's domain; the state key also carries the
//! driver ABI (the process's pointer size). If anything here changes what a key is computed
//! from, bump `KEY_VERSION`: the golden tests in `tests.rs` fail until it is.

use super::desc::*;
use super::feed::{Digest, Feed, KeyWriter};
use super::text::HOST_ABI;
use super::PipelineKey;
use ash::vk;

/// The version of how keys are computed. Old entries stop matching when it changes.
/// 2: the device's own state ([`device_digest`]) enters the state key.
/// 3: of the device's state, only the robustness it asks of compiled code: a game and a replay of
/// its Fossilize database (every feature on, as Steam pre-compiles) key alike.
pub const KEY_VERSION: u32 = 3;

fn writer(domain: &str) -> KeyWriter {
    let mut w = KeyWriter::new(domain);
    w.u32(KEY_VERSION);
    w
}

/// A shader module's code, over its true extent (`codeSize` bytes).
pub fn module_digest(code: &[u8]) -> Digest {
    let mut w = writer("pipekeep module");
    w.bytes(code);
    w.finish()
}

pub fn sampler_digest(s: &SamplerDesc) -> Digest {
    let mut w = writer("pipekeep sampler");
    s.feed(&mut w);
    w.finish()
}

pub fn set_layout_digest(s: &SetLayoutDesc) -> Digest {
    let mut bindings: Vec<&BindingDesc> = s.bindings.iter().collect();
    bindings.sort_by_key(|b| b.binding);
    let mut w = writer("pipekeep set layout");
    s.flags.feed(&mut w);
    w.u64(bindings.len() as u64);
    for b in bindings {
        b.feed(&mut w);
    }
    w.finish()
}

pub fn pipeline_layout_digest(p: &PipelineLayoutDesc) -> Digest {
    let mut w = writer("pipekeep pipeline layout");
    p.feed(&mut w);
    w.finish()
}

pub fn render_pass_info(r: &RenderPassDesc) -> RenderPassInfo {
    let mut w = writer("pipekeep render pass");
    r.feed(&mut w);
    RenderPassInfo {
        digest: w.finish(),
        subpasses: r
            .subpasses
            .iter()
            .map(|s| (s.used_colors(), s.uses_depth_stencil()))
            .collect(),
    }
}

/// The dynamic states of a pipeline, as the rules of which fields are ignored need them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dynamic(u64);

/// The dynamic states the key knows (core 1.0, extended dynamic state 1 and 2, those of extended
/// dynamic state 3 DXVK and zink name, and the vertex input, line stipple, colour write enable and
/// feedback loop states zink makes dynamic), each with its bit. A pipeline naming any other is
/// unkeyable: the key cannot know what it makes ignored.
const KNOWN_DYNAMIC: [vk::DynamicState; 45] = [
    vk::DynamicState::VIEWPORT,
    vk::DynamicState::SCISSOR,
    vk::DynamicState::LINE_WIDTH,
    vk::DynamicState::DEPTH_BIAS,
    vk::DynamicState::BLEND_CONSTANTS,
    vk::DynamicState::DEPTH_BOUNDS,
    vk::DynamicState::STENCIL_COMPARE_MASK,
    vk::DynamicState::STENCIL_WRITE_MASK,
    vk::DynamicState::STENCIL_REFERENCE,
    vk::DynamicState::CULL_MODE,
    vk::DynamicState::FRONT_FACE,
    vk::DynamicState::PRIMITIVE_TOPOLOGY,
    vk::DynamicState::VIEWPORT_WITH_COUNT,
    vk::DynamicState::SCISSOR_WITH_COUNT,
    vk::DynamicState::VERTEX_INPUT_BINDING_STRIDE,
    vk::DynamicState::DEPTH_TEST_ENABLE,
    vk::DynamicState::DEPTH_WRITE_ENABLE,
    vk::DynamicState::DEPTH_COMPARE_OP,
    vk::DynamicState::DEPTH_BOUNDS_TEST_ENABLE,
    vk::DynamicState::STENCIL_TEST_ENABLE,
    vk::DynamicState::STENCIL_OP,
    vk::DynamicState::PATCH_CONTROL_POINTS_EXT,
    vk::DynamicState::RASTERIZER_DISCARD_ENABLE,
    vk::DynamicState::DEPTH_BIAS_ENABLE,
    vk::DynamicState::LOGIC_OP_EXT,
    vk::DynamicState::PRIMITIVE_RESTART_ENABLE,
    // Extended dynamic state 3's, as DXVK's library parts name them.
    vk::DynamicState::DEPTH_CLIP_ENABLE_EXT,
    vk::DynamicState::RASTERIZATION_SAMPLES_EXT,
    vk::DynamicState::SAMPLE_MASK_EXT,
    vk::DynamicState::ALPHA_TO_COVERAGE_ENABLE_EXT,
    // `VK_EXT_vertex_input_dynamic_state`: the vertex input state is ignored (zink's pipelines).
    vk::DynamicState::VERTEX_INPUT_EXT,
    // The rest of extended dynamic state 3 that zink names.
    vk::DynamicState::DEPTH_CLAMP_ENABLE_EXT,
    vk::DynamicState::POLYGON_MODE_EXT,
    vk::DynamicState::ALPHA_TO_ONE_ENABLE_EXT,
    vk::DynamicState::LOGIC_OP_ENABLE_EXT,
    vk::DynamicState::COLOR_BLEND_ENABLE_EXT,
    vk::DynamicState::COLOR_BLEND_EQUATION_EXT,
    vk::DynamicState::COLOR_WRITE_MASK_EXT,
    vk::DynamicState::PROVOKING_VERTEX_MODE_EXT,
    vk::DynamicState::LINE_RASTERIZATION_MODE_EXT,
    vk::DynamicState::LINE_STIPPLE_ENABLE_EXT,
    vk::DynamicState::DEPTH_CLIP_NEGATIVE_ONE_TO_ONE_EXT,
    vk::DynamicState::LINE_STIPPLE_KHR,
    vk::DynamicState::COLOR_WRITE_ENABLE_EXT,
    vk::DynamicState::ATTACHMENT_FEEDBACK_LOOP_ENABLE_EXT,
];

// Each known state has a bit of the `u64`.
const _: () = assert!(KNOWN_DYNAMIC.len() <= 64);

impl Dynamic {
    pub fn from_states(states: &[u32]) -> Result<Dynamic, Unkeyable> {
        let mut bits = 0u64;
        for &s in states {
            let i = KNOWN_DYNAMIC
                .iter()
                .position(|k| k.as_raw() as u32 == s)
                .ok_or(Unkeyable::UnknownDynamicState(s as i32))?;
            bits |= 1 << i;
        }
        Ok(Dynamic(bits))
    }

    /// Whether `state` is dynamic.
    pub fn has(&self, state: vk::DynamicState) -> bool {
        KNOWN_DYNAMIC
            .iter()
            .position(|k| *k == state)
            .is_some_and(|i| self.0 & (1 << i) != 0)
    }

    /// `Some(v)` unless `state` is dynamic (then the field is ignored and not hashed).
    pub fn unless<T>(&self, state: vk::DynamicState, v: T) -> Option<T> {
        (!self.has(state)).then_some(v)
    }
}

/// Create flags that change nothing the driver builds.
const FLAGS_NOT_KEYED: vk::PipelineCreateFlags = vk::PipelineCreateFlags::from_raw(
    vk::PipelineCreateFlags::FAIL_ON_PIPELINE_COMPILE_REQUIRED.as_raw()
        | vk::PipelineCreateFlags::EARLY_RETURN_ON_FAILURE.as_raw()
        | vk::PipelineCreateFlags::DERIVATIVE.as_raw()
        | vk::PipelineCreateFlags::ALLOW_DERIVATIVES.as_raw(),
);

fn keyed_flags(flags: u32) -> u32 {
    flags & !FLAGS_NOT_KEYED.as_raw()
}

/// What a stage gives the SPIR-V key: what the driver compiles.
fn feed_stage_code(s: &StageDesc, w: &mut KeyWriter) {
    s.stage.feed(w);
    s.module.feed(w);
    w.bytes(&s.entry_point);
    let mut spec: Vec<&SpecConstant> = s.specialization.iter().collect();
    spec.sort_by_key(|c| c.constant_id);
    w.u64(spec.len() as u64);
    for c in spec {
        c.feed(w);
    }
}

/// What a stage gives the state key: how it is compiled.
fn feed_stage_state(s: &StageDesc, w: &mut KeyWriter) {
    s.stage.feed(w);
    s.flags.feed(w);
    s.required_subgroup_size.feed(w);
    s.robustness.feed(w);
}

/// One stage's code as the SPIR-V key takes it (its stage, module, entry point and
/// specialization): what pipelines sharing that stage have in common, whatever their others.
pub fn stage_code_key(s: &StageDesc) -> [u8; 16] {
    let mut w = writer("pipekeep stage code");
    feed_stage_code(s, &mut w);
    w.finish().half()
}

fn spirv_key(stages: &[&StageDesc]) -> [u8; 16] {
    let mut w = writer("pipekeep spirv");
    w.u64(stages.len() as u64);
    for s in stages {
        feed_stage_code(s, &mut w);
    }
    w.finish().half()
}

/// What of the device's own state enters every key: the robustness it asks of compiled code
/// (`robustBufferAccess`; `robustImageAccess`, of Vulkan 1.3 or `VK_EXT_image_robustness`;
/// `VK_EXT_robustness2`'s three), which changes what a driver compiles for the same create info
/// whether or not its own keys show it.
///
/// Nothing else the device enables does: an extension or a feature that a pipeline uses is in its
/// create info (its SPIR-V, its state), and one it does not use changes nothing built for it. So a
/// game and a replay of its Fossilize database, which turns every feature on (Valve's replayer and
/// `pipekeep replay`, as Steam pre-compiles), key a pipeline alike, and the replay fills the
/// entries the game looks up. Where a driver does compile otherwise under some device state, its
/// own keys say so, and decide: a `cache` entry is checked by the driver's own cache key (a
/// mismatch is a compile and the entry written again, never a wrong pipeline), and a `binary`
/// entry is kept under the driver's global key ([`device_digest_under_global_key`]), which the
/// spec defines as covering every device state its binaries depend on (docs/FORMAT.md). The
/// `binary` backend is used only where the driver gives that key.
pub fn device_digest(d: &DeviceState) -> Digest {
    let mut w = writer("pipekeep device robustness");
    let (robust_buffer_access, robust_image_access, robustness2) = robustness(d);
    w.u32(robust_buffer_access.into());
    w.u32(robust_image_access.into());
    for on in robustness2 {
        w.u32(on.into());
    }
    w.finish()
}

/// The robustness a device asks of compiled code: `robustBufferAccess`, `robustImageAccess`,
/// and `VK_EXT_robustness2`'s `robustBufferAccess2`, `robustImageAccess2` and `nullDescriptor`.
pub fn robustness(d: &DeviceState) -> (bool, bool, [bool; 3]) {
    let features = |stype: vk::StructureType| {
        d.features
            .iter()
            .find(|(s, _)| *s == stype.as_raw())
            .map(|(_, bools)| bools.as_slice())
    };
    let on =
        |bools: Option<&[u32]>, i: usize| bools.and_then(|b| b.get(i)).is_some_and(|v| *v != 0);
    let robustness2 = features(vk::StructureType::PHYSICAL_DEVICE_ROBUSTNESS_2_FEATURES_EXT);
    (
        on(d.core_features.as_deref(), 0),
        on(
            features(vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_3_FEATURES),
            0,
        ) || on(
            features(vk::StructureType::PHYSICAL_DEVICE_IMAGE_ROBUSTNESS_FEATURES),
            0,
        ),
        [on(robustness2, 0), on(robustness2, 1), on(robustness2, 2)],
    )
}

/// The whole state a device was made with (every extension the application enabled, every
/// feature structure it chained with the `VkBool32`s each holds, its `pEnabledFeatures`, the
/// structures the layer could not read), in an order of their own: the device part of a shader
/// object's key. A shader binary is checked by its driver for its format alone
/// (`shaderBinaryUUID`, `shaderBinaryVersion`; RADV compares its cache UUID), never for the
/// device state it was compiled under, and no driver key says more; so a shader is found only on
/// a device made alike.
pub fn whole_device_digest(d: &DeviceState) -> Digest {
    let mut w = writer("pipekeep whole device state");
    let mut extensions: Vec<&Vec<u8>> = d.extensions.iter().collect();
    extensions.sort_unstable();
    extensions.dedup();
    w.u64(extensions.len() as u64);
    for e in extensions {
        w.bytes(e);
    }
    let mut features: Vec<&(i32, Vec<u32>)> = d.features.iter().collect();
    features.sort_unstable_by_key(|(stype, _)| *stype);
    w.u64(features.len() as u64);
    for (stype, bools) in features {
        w.u32(*stype as u32);
        bools.feed(&mut w);
    }
    d.core_features.feed(&mut w);
    let mut unknown = d.unknown.clone();
    unknown.sort_unstable();
    w.u64(unknown.len() as u64);
    for stype in unknown {
        w.u32(stype as u32);
    }
    w.finish()
}

/// The device's digest with the driver's global pipeline key (`vkGetPipelineKeyKHR` with no
/// create info) mixed in: the device state the driver compiles under that no create info shows
/// (on RADV, driconf options such as `radv_disable_trunc_coord`, and its robustness). Data kept
/// under another global key is another key's, so never found under this one.
pub fn device_digest_under_global_key(device: &Digest, global_key: &[u8]) -> Digest {
    let mut w = writer("pipekeep device under the driver's global key");
    device.feed(&mut w);
    w.bytes(global_key);
    w.finish()
}

fn state_writer(kind: &str, device: &Digest, flags: u32, stages: &[&StageDesc]) -> KeyWriter {
    let mut w = writer(kind);
    w.u32(HOST_ABI);
    device.feed(&mut w);
    w.u32(keyed_flags(flags));
    w.u64(stages.len() as u64);
    for s in stages {
        feed_stage_state(s, &mut w);
    }
    w
}

pub fn compute_key(d: &ComputeDesc) -> PipelineKey {
    let stages = [&d.stage];
    let mut w = state_writer("pipekeep compute state", &d.device, d.flags, &stages);
    d.layout.feed(&mut w);
    d.robustness.feed(&mut w);
    PipelineKey {
        spirv: spirv_key(&stages),
        state: w.finish().half(),
    }
}

/// The key of shader objects made together (one shader, or the stages of one call linked with
/// `VK_SHADER_CREATE_LINK_STAGE_BIT_EXT`, in the call's order): their code as a pipeline's stages
/// are keyed, and the device's whole state (`device`: [`whole_device_digest`]), the driver's
/// `shaderBinaryUUID` and `shaderBinaryVersion` (`binary_format`: a binary is valid for those
/// alone; a new version misses every entry, though the spec lets a driver take older ones), each
/// shader's flags, next stage and layout. Its own domain: no pipeline's key equals it.
///
/// `call`: the stage of every shader of the call, in its order. A driver builds a call's shaders
/// as the call holds them (RADV links a vertex and fragment pair only where no other shader
/// stands beside it: with a compute shader in the call, their binaries are those of the stages
/// made alone), so shaders are found only in a call of the same shape.
pub fn shader_objects_key(
    device: &Digest,
    binary_format: &[u8],
    call: &[u32],
    shaders: &[&ShaderDesc],
) -> PipelineKey {
    let stages: Vec<&StageDesc> = shaders.iter().map(|s| &s.stage).collect();
    let mut w = state_writer("pipekeep shader objects state", device, 0, &stages);
    w.bytes(binary_format);
    call.feed(&mut w);
    for s in shaders {
        s.next_stage.feed(&mut w);
        s.layout.feed(&mut w);
    }
    PipelineKey {
        spirv: spirv_key(&stages),
        state: w.finish().half(),
    }
}

/// A pipeline's dynamic states in an order of their own, each once: the application's order and
/// repeats change nothing the driver builds.
fn feed_dynamic_states(states: &[u32], w: &mut KeyWriter) {
    let mut dynamic = states.to_vec();
    dynamic.sort_unstable();
    dynamic.dedup();
    dynamic.feed(w);
}

/// A linked library's key, as the pipelines linking it are keyed by it.
impl Feed for PipelineKey {
    fn feed(&self, w: &mut KeyWriter) {
        w.bytes(&self.spirv);
        w.bytes(&self.state);
    }
}

pub fn ray_tracing_key(d: &RayTracingDesc) -> PipelineKey {
    // Stages in their order: group indices name them by place.
    let stages: Vec<&StageDesc> = d.stages.iter().collect();
    let mut w = state_writer("pipekeep ray-tracing state", &d.device, d.flags, &stages);
    d.groups.feed(&mut w);
    d.max_recursion_depth.feed(&mut w);
    d.library_interface.feed(&mut w);
    feed_dynamic_states(&d.dynamic_states, &mut w);
    d.layout.feed(&mut w);
    d.libraries.feed(&mut w);
    d.robustness.feed(&mut w);
    PipelineKey {
        spirv: spirv_key(&stages),
        state: w.finish().half(),
    }
}

pub fn graphics_key(d: &GraphicsDesc) -> PipelineKey {
    let mut stages: Vec<&StageDesc> = d.stages.iter().collect();
    stages.sort_by_key(|s| s.stage);
    let mut w = state_writer("pipekeep graphics state", &d.device, d.flags, &stages);
    d.vertex_input.feed(&mut w);
    d.input_assembly.feed(&mut w);
    d.tessellation_patch_control_points.feed(&mut w);
    d.viewport.feed(&mut w);
    d.rasterization.feed(&mut w);
    d.multisample.feed(&mut w);
    d.depth_stencil.feed(&mut w);
    d.color_blend.feed(&mut w);
    feed_dynamic_states(&d.dynamic_states, &mut w);
    d.layout.feed(&mut w);
    d.target.feed(&mut w);
    d.robustness.feed(&mut w);
    if let Some(library) = &d.library {
        library.feed(&mut w);
    }
    if d.extensions != StateExtensions::default() {
        d.extensions.feed(&mut w);
    }
    PipelineKey {
        spirv: spirv_key(&stages),
        state: w.finish().half(),
    }
}
