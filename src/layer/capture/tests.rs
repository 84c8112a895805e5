//! Reading create infos into keys: the effective flags, the chains, and what makes a pipeline unkeyable.

use super::*;
use crate::key::{compute_key, graphics_key, PipelineKey};
use crate::layer::objects::Objects;

const NO_DEVICE: Digest = Digest([0; 32]);

/// The key as the layer takes it: the effective flags read from the create info.
unsafe fn compute_of(
    ci: &vk::ComputePipelineCreateInfo,
    objects: &Objects,
) -> Result<PipelineKey, Unkeyable> {
    // SAFETY: create infos built by the tests.
    unsafe { compute_desc(ci, objects, &NO_DEVICE, Flags::of(ci.flags, ci.p_next)) }
        .map(|d| compute_key(&d))
}

unsafe fn graphics_of(
    ci: &vk::GraphicsPipelineCreateInfo,
    objects: &Objects,
) -> Result<PipelineKey, Unkeyable> {
    // SAFETY: create infos built by the tests.
    unsafe { graphics_desc(ci, objects, &NO_DEVICE, Flags::of(ci.flags, ci.p_next)) }
        .map(|d| graphics_key(&d))
}

fn stage() -> vk::PipelineShaderStageCreateInfo<'static> {
    vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .name(c"main")
}

#[test]
fn a_module_the_layer_never_saw_is_unkeyable() {
    let ci = vk::ComputePipelineCreateInfo::default().stage(stage());
    // SAFETY: a valid create info built here.
    let r = unsafe { compute_of(&ci, &Objects::default()) };
    assert_eq!(r, Err(Unkeyable::UnknownObject("shader module")));
}

#[test]
fn a_module_identifier_is_unkeyable() {
    let id = [1u8; 16];
    let mut ident = vk::PipelineShaderStageModuleIdentifierCreateInfoEXT::default().identifier(&id);
    let ci = vk::ComputePipelineCreateInfo::default().stage(stage().push_next(&mut ident));
    // SAFETY: a valid create info built here.
    assert_eq!(
        unsafe { compute_of(&ci, &Objects::default()) },
        Err(Unkeyable::ModuleIdentifier)
    );
}

#[test]
fn a_library_own_binaries_unknown_flags_and_unknown_structures_are_unkeyable() {
    let ci = vk::ComputePipelineCreateInfo::default()
        .stage(stage())
        .flags(vk::PipelineCreateFlags::LIBRARY_KHR);
    // SAFETY: valid create infos built here.
    assert_eq!(
        unsafe { compute_of(&ci, &Objects::default()) },
        Err(Unkeyable::Library)
    );
    // flags2's flags are the effective flags: a library there is a library, whatever the
    // legacy flags say.
    let mut flags2 = vk::PipelineCreateFlags2CreateInfoKHR::default()
        .flags(vk::PipelineCreateFlags2KHR::LIBRARY);
    let ci = vk::ComputePipelineCreateInfo::default()
        .stage(stage())
        .push_next(&mut flags2);
    assert_eq!(
        unsafe { compute_of(&ci, &Objects::default()) },
        Err(Unkeyable::Library)
    );
    let mut capture = vk::PipelineCreateFlags2CreateInfoKHR::default()
        .flags(vk::PipelineCreateFlags2KHR::from_raw(CAPTURE_DATA));
    let ci = vk::ComputePipelineCreateInfo::default()
        .stage(stage())
        .push_next(&mut capture);
    assert_eq!(
        unsafe { compute_of(&ci, &Objects::default()) },
        Err(Unkeyable::OwnBinaries)
    );
    let mut high = vk::PipelineCreateFlags2CreateInfoKHR::default()
        .flags(vk::PipelineCreateFlags2KHR::from_raw(1 << 34));
    let ci = vk::ComputePipelineCreateInfo::default()
        .stage(stage())
        .push_next(&mut high);
    assert_eq!(
        unsafe { compute_of(&ci, &Objects::default()) },
        Err(Unkeyable::UnknownFlags(1 << 34))
    );
    let mut unknown = vk::PipelineCacheCreateInfo::default();
    let mut ci = vk::ComputePipelineCreateInfo::default().stage(stage());
    ci.p_next = (&mut unknown as *mut vk::PipelineCacheCreateInfo).cast();
    assert!(matches!(
        unsafe { compute_of(&ci, &Objects::default()) },
        Err(Unkeyable::UnknownStructure {
            place: "a pipeline",
            ..
        })
    ));
    // A link naming a library the layer never saw made is unkeyable.
    let unseen = [vk::Pipeline::from_raw(77)];
    let mut libs = vk::PipelineLibraryCreateInfoKHR::default().libraries(&unseen);
    let g = vk::GraphicsPipelineCreateInfo::default().push_next(&mut libs);
    assert_eq!(
        unsafe { graphics_of(&g, &Objects::default()) },
        Err(Unkeyable::UnknownObject("pipeline library"))
    );
}

/// A pointer the spec says a subset ignores, garbage here: never followed.
fn garbage<T>() -> *const T {
    8 as *const T
}

#[test]
fn a_library_part_reads_only_what_its_subsets_consume() {
    let objects = known_objects();
    let bindings = [vk::VertexInputBindingDescription::default().stride(16)];
    let vertex_input =
        vk::PipelineVertexInputStateCreateInfo::default().vertex_binding_descriptions(&bindings);
    let assembly = vk::PipelineInputAssemblyStateCreateInfo::default()
        .topology(vk::PrimitiveTopology::TRIANGLE_LIST);
    let vi = |stride: u32| {
        let mut part = vk::GraphicsPipelineLibraryCreateInfoEXT::default()
            .flags(vk::GraphicsPipelineLibraryFlagsEXT::VERTEX_INPUT_INTERFACE);
        let bindings = [vk::VertexInputBindingDescription::default().stride(stride)];
        let vertex_input = vk::PipelineVertexInputStateCreateInfo::default()
            .vertex_binding_descriptions(&bindings);
        let mut ci = vk::GraphicsPipelineCreateInfo::default()
            .flags(vk::PipelineCreateFlags::LIBRARY_KHR)
            .vertex_input_state(&vertex_input)
            .input_assembly_state(&assembly)
            .push_next(&mut part);
        // Everything a vertex input part ignores: garbage.
        ci.p_stages = garbage();
        ci.stage_count = 3;
        ci.p_rasterization_state = garbage();
        ci.p_color_blend_state = garbage();
        ci.p_multisample_state = garbage();
        ci.p_viewport_state = garbage();
        ci.layout = vk::PipelineLayout::from_raw(99);
        ci.render_pass = vk::RenderPass::from_raw(98);
        // SAFETY: every pointer the part reads is valid.
        unsafe { graphics_of(&ci, &objects) }
    };
    let a = vi(16).expect("keyed without reading what it ignores");
    assert_ne!(a, vi(20).unwrap(), "its own state is keyed");
    let _ = vertex_input;
    // The same state as a complete pipeline's is another key: the subsets enter it.
    assert_eq!(a, vi(16).unwrap());
}

#[test]
fn a_link_is_keyed_by_its_libraries_in_their_order() {
    let objects = known_objects();
    let key = |n: u8| crate::key::PipelineKey {
        spirv: [n; 16],
        state: [n; 16],
    };
    objects
        .libraries
        .insert(10, Some(super::KnownLibrary { key: key(1) }));
    objects
        .libraries
        .insert(11, Some(super::KnownLibrary { key: key(2) }));
    let link = |handles: &[u64], flags: vk::PipelineCreateFlags| {
        let handles: Vec<vk::Pipeline> =
            handles.iter().map(|h| vk::Pipeline::from_raw(*h)).collect();
        let mut libs = vk::PipelineLibraryCreateInfoKHR::default().libraries(&handles);
        let mut ci = vk::GraphicsPipelineCreateInfo::default()
            .flags(flags)
            .layout(vk::PipelineLayout::from_raw(2))
            .push_next(&mut libs);
        // A pure link's own state and dynamic state are ignored.
        ci.p_rasterization_state = garbage();
        ci.p_dynamic_state = garbage();
        // SAFETY: every pointer a link reads is valid.
        unsafe { graphics_of(&ci, &objects) }.unwrap()
    };
    let fast = link(&[10, 11], vk::PipelineCreateFlags::empty());
    assert_ne!(fast, link(&[11, 10], vk::PipelineCreateFlags::empty()));
    assert_ne!(
        fast,
        link(
            &[10, 11],
            vk::PipelineCreateFlags::LINK_TIME_OPTIMIZATION_EXT
        ),
        "an optimized link is another pipeline"
    );
    assert_eq!(fast, link(&[10, 11], vk::PipelineCreateFlags::empty()));
}

/// Objects holding module 1 and pipeline layout 2, so that a create info naming them keys.
fn known_objects() -> Objects {
    let objects = Objects::default();
    objects.modules.insert(1, Some(crate::key::Digest([1; 32])));
    objects
        .pipeline_layouts
        .insert(2, Some(crate::key::Digest([2; 32])));
    objects
}

/// A vertex and a fragment stage of module 1 (of [`known_objects`]).
fn vertex_and_fragment_stages() -> [vk::PipelineShaderStageCreateInfo<'static>; 2] {
    let module = vk::ShaderModule::from_raw(1);
    [vk::ShaderStageFlags::VERTEX, vk::ShaderStageFlags::FRAGMENT].map(|stage| {
        vk::PipelineShaderStageCreateInfo::default()
            .stage(stage)
            .module(module)
            .name(c"main")
    })
}

#[test]
fn a_blend_state_the_spec_ignores_is_never_read() {
    let objects = known_objects();
    let stages = vertex_and_fragment_stages();
    let vertex_input = vk::PipelineVertexInputStateCreateInfo::default();
    let assembly = vk::PipelineInputAssemblyStateCreateInfo::default()
        .topology(vk::PrimitiveTopology::TRIANGLE_LIST);
    let viewport = vk::PipelineViewportStateCreateInfo::default()
        .viewport_count(1)
        .scissor_count(1);
    let dynamic = [vk::DynamicState::VIEWPORT, vk::DynamicState::SCISSOR];
    let dynamic = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&dynamic);
    let raster = vk::PipelineRasterizationStateCreateInfo::default().line_width(1.0);
    let multisample = vk::PipelineMultisampleStateCreateInfo::default()
        .rasterization_samples(vk::SampleCountFlags::TYPE_1);
    // The only colour attachment is unused: the blend state is ignored, and may be garbage.
    let formats = [vk::Format::UNDEFINED];
    let mut rendering =
        vk::PipelineRenderingCreateInfo::default().color_attachment_formats(&formats);
    let mut ci = vk::GraphicsPipelineCreateInfo::default()
        .stages(&stages)
        .vertex_input_state(&vertex_input)
        .input_assembly_state(&assembly)
        .viewport_state(&viewport)
        .rasterization_state(&raster)
        .multisample_state(&multisample)
        .dynamic_state(&dynamic)
        .layout(vk::PipelineLayout::from_raw(2))
        .push_next(&mut rendering);
    // SAFETY: a valid create info; the blend state it names must not be read.
    let without = unsafe { graphics_of(&ci, &objects) }.expect("keyable");
    ci.p_color_blend_state = std::ptr::dangling();
    let with_garbage = unsafe { graphics_of(&ci, &objects) }.expect("keyable");
    assert_eq!(without, with_garbage);
}

/// zink's pipelines: what its dynamic states cover is ignored (never read, never keyed), the
/// structures every field of which they cover are ignored, and what they do not cover is keyed.
#[test]
fn what_extended_dynamic_state_3_covers_is_never_read_and_what_it_does_not_is_keyed() {
    use vk::DynamicState as D;
    let objects = known_objects();
    let stages = vertex_and_fragment_stages();
    let assembly = vk::PipelineInputAssemblyStateCreateInfo::default()
        .topology(vk::PrimitiveTopology::TRIANGLE_LIST);
    let viewport = vk::PipelineViewportStateCreateInfo::default();
    let zink = [
        D::VIEWPORT_WITH_COUNT,
        D::SCISSOR_WITH_COUNT,
        D::VERTEX_INPUT_EXT,
        D::DEPTH_CLAMP_ENABLE_EXT,
        D::POLYGON_MODE_EXT,
        D::ALPHA_TO_ONE_ENABLE_EXT,
        D::LOGIC_OP_ENABLE_EXT,
        D::COLOR_BLEND_ENABLE_EXT,
        D::COLOR_BLEND_EQUATION_EXT,
        D::COLOR_WRITE_MASK_EXT,
        D::PROVOKING_VERTEX_MODE_EXT,
        D::LINE_RASTERIZATION_MODE_EXT,
        D::LINE_STIPPLE_ENABLE_EXT,
        D::LINE_STIPPLE_KHR,
        D::DEPTH_CLIP_NEGATIVE_ONE_TO_ONE_EXT,
        D::COLOR_WRITE_ENABLE_EXT,
        D::ATTACHMENT_FEEDBACK_LOOP_ENABLE_EXT,
    ];
    let dynamic = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&zink);
    let raster = vk::PipelineRasterizationStateCreateInfo::default().line_width(1.0);
    let multisample = vk::PipelineMultisampleStateCreateInfo::default()
        .rasterization_samples(vk::SampleCountFlags::TYPE_1);
    let attachment = [vk::PipelineColorBlendAttachmentState::default()];
    let blend = vk::PipelineColorBlendStateCreateInfo::default().attachments(&attachment);
    let formats = [vk::Format::R8G8B8A8_UNORM];
    let mut rendering =
        vk::PipelineRenderingCreateInfo::default().color_attachment_formats(&formats);
    let mut ci = vk::GraphicsPipelineCreateInfo::default()
        .stages(&stages)
        .input_assembly_state(&assembly)
        .viewport_state(&viewport)
        .rasterization_state(&raster)
        .multisample_state(&multisample)
        .color_blend_state(&blend)
        .dynamic_state(&dynamic)
        .layout(vk::PipelineLayout::from_raw(2))
        .push_next(&mut rendering);
    // SAFETY (whole test): valid create infos; what the dynamic states cover must not be read.
    let plain = unsafe { graphics_of(&ci, &objects) }.expect("keyable");
    ci.p_vertex_input_state = garbage();
    let mut blend_garbage = blend;
    blend_garbage.p_attachments = garbage();
    ci.p_color_blend_state = &blend_garbage;
    let mut provoking = vk::PipelineRasterizationProvokingVertexStateCreateInfoEXT::default()
        .provoking_vertex_mode(vk::ProvokingVertexModeEXT::LAST_VERTEX);
    let mut line = vk::PipelineRasterizationLineStateCreateInfoKHR::default()
        .stippled_line_enable(true)
        .line_stipple_factor(3);
    let covered = vk::PipelineRasterizationStateCreateInfo::default()
        .line_width(1.0)
        .polygon_mode(vk::PolygonMode::LINE)
        .depth_clamp_enable(true)
        .push_next(&mut provoking)
        .push_next(&mut line);
    ci.p_rasterization_state = &covered;
    let mut clip_control =
        vk::PipelineViewportDepthClipControlCreateInfoEXT::default().negative_one_to_one(true);
    let viewport_chained = viewport.push_next(&mut clip_control);
    ci.p_viewport_state = &viewport_chained;
    let covered_multisample = multisample.alpha_to_one_enable(true);
    ci.p_multisample_state = &covered_multisample;
    assert_eq!(unsafe { graphics_of(&ci, &objects) }, Ok(plain));

    // Not covered: the blend attachments read, and their write mask keyed.
    let fewer = [D::COLOR_WRITE_MASK_EXT, D::VERTEX_INPUT_EXT];
    let dynamic = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&fewer);
    let (raster, viewport) = (
        vk::PipelineRasterizationStateCreateInfo::default().line_width(1.0),
        vk::PipelineViewportStateCreateInfo::default()
            .viewport_count(1)
            .scissor_count(1),
    );
    ci = ci
        .dynamic_state(&dynamic)
        .rasterization_state(&raster)
        .viewport_state(&viewport)
        .multisample_state(&multisample)
        .color_blend_state(&blend);
    let read = unsafe { graphics_of(&ci, &objects) }.expect("keyable");
    let enabled = [attachment[0].blend_enable(true)];
    let blend_enabled = blend.attachments(&enabled);
    ci.p_color_blend_state = &blend_enabled;
    assert_ne!(unsafe { graphics_of(&ci, &objects) }, Ok(read));
    let masked = [attachment[0].color_write_mask(vk::ColorComponentFlags::R)];
    let blend_masked = blend.attachments(&masked);
    ci.p_color_blend_state = &blend_masked;
    assert_eq!(unsafe { graphics_of(&ci, &objects) }, Ok(read));
    // A structure whose fields are not all dynamic: unkeyable (its meaning is not read).
    let mut provoking = vk::PipelineRasterizationProvokingVertexStateCreateInfoEXT::default();
    let chained = raster.push_next(&mut provoking);
    ci.p_rasterization_state = &chained;
    assert!(matches!(
        unsafe { graphics_of(&ci, &objects) },
        Err(Unkeyable::UnknownStructure { .. })
    ));
}

#[test]
fn legacy_flags_and_the_same_flags2_key_alike_and_a_stage_chain_in_any_order_keys_alike() {
    let objects = known_objects();
    let stage = || {
        vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(vk::ShaderModule::from_raw(1))
            .name(c"main")
    };
    let layout = vk::PipelineLayout::from_raw(2);
    let flags = vk::PipelineCreateFlags::DISABLE_OPTIMIZATION;
    let legacy = vk::ComputePipelineCreateInfo::default()
        .stage(stage())
        .layout(layout)
        .flags(flags);
    let mut flags2 = vk::PipelineCreateFlags2CreateInfoKHR::default()
        .flags(vk::PipelineCreateFlags2KHR::DISABLE_OPTIMIZATION);
    // The legacy flags are ignored where flags2 is chained.
    let modern = vk::ComputePipelineCreateInfo::default()
        .stage(stage())
        .layout(layout)
        .flags(vk::PipelineCreateFlags::DERIVATIVE | vk::PipelineCreateFlags::LIBRARY_KHR)
        .push_next(&mut flags2);
    // SAFETY: valid create infos built here.
    let (a, b) = unsafe { (compute_of(&legacy, &objects), compute_of(&modern, &objects)) };
    assert_eq!(a.unwrap(), b.unwrap());

    let mut size =
        vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo::default().required_subgroup_size(32);
    let mut robust = vk::PipelineRobustnessCreateInfoEXT::default();
    let one = stage().push_next(&mut size).push_next(&mut robust);
    let one = vk::ComputePipelineCreateInfo::default()
        .stage(one)
        .layout(layout);
    let first = unsafe { compute_of(&one, &objects) }.unwrap();
    let mut size =
        vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo::default().required_subgroup_size(32);
    let mut robust = vk::PipelineRobustnessCreateInfoEXT::default();
    let other = stage().push_next(&mut robust).push_next(&mut size);
    let other = vk::ComputePipelineCreateInfo::default()
        .stage(other)
        .layout(layout);
    assert_eq!(first, unsafe { compute_of(&other, &objects) }.unwrap());
    // A structure twice is not valid Vulkan, and never keyed by whichever came last.
    let mut size2 =
        vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo::default().required_subgroup_size(64);
    let mut size =
        vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo::default().required_subgroup_size(32);
    let twice = stage().push_next(&mut size).push_next(&mut size2);
    let twice = vk::ComputePipelineCreateInfo::default()
        .stage(twice)
        .layout(layout);
    assert!(unsafe { compute_of(&twice, &objects) }.is_err());
}
