//! The test app's DXVK-like mode (`--gpl N`): graphics pipelines built in parts as DXVK 2.7 and
//! zink build them with `VK_EXT_graphics_pipeline_library`. Four kinds of library part (vertex
//! input interface, pre-rasterization shaders, fragment shader, fragment output interface) made
//! first, each with `RETAIN_LINK_TIME_OPTIMIZATION_INFO`; then each of N variants linked twice
//! from one part of each kind, fast (no link-time optimization) and optimized (`LINK_TIME_OPTIMIZATION`).
//! As DXVK: every call's flags in a `VkPipelineCreateFlags2CreateInfoKHR`, the SPIR-V chained
//! inline in each stage (no `vkCreateShaderModule`), a pipeline layout of independent sets, and
//! the application's pipeline cache (NULL unless `--app-cache`).

use std::time::{Duration, Instant};

use ash::vk;
use vk::PipelineCreateFlags2KHR as F2;

/// How many parts of each kind: 2 vertex input, 3 pre-rasterization, 4 fragment shader and 2
/// fragment output parts: 11 parts, 48 variants.
pub const KINDS: [usize; 4] = [2, 3, 4, 2];

/// The most variants the parts make.
pub const VARIANTS: usize = KINDS[0] * KINDS[1] * KINDS[2] * KINDS[3];

/// The extensions the mode needs (maintenance5 for flags2).
pub const EXTENSIONS: [&std::ffi::CStr; 3] = [
    ash::ext::graphics_pipeline_library::NAME,
    ash::khr::pipeline_library::NAME,
    ash::khr::maintenance5::NAME,
];

/// What the mode made, and how long each kind of call took (accumulated).
#[derive(Default, Debug)]
pub struct Made {
    pub parts: u32,
    pub fast_links: u32,
    pub optimized_links: u32,
    pub failed: u32,
    pub compile_required: u32,
    /// Parts whose creation feedback said cache hit, whole (`--feedback`).
    pub part_feedback_hits: u32,
    pub parts_time: Duration,
    pub fast_time: Duration,
    pub optimized_time: Duration,
    pub pipelines: Vec<vk::Pipeline>,
}

impl Made {
    pub fn made(&self) -> u32 {
        self.parts + self.fast_links + self.optimized_links
    }
}

/// The pieces every part and link shares.
pub struct Gpl<'a> {
    pub device: &'a ash::Device,
    pub layout: vk::PipelineLayout,
    /// The pre-rasterization parts' layout: the fragment shader's set left NULL, as DXVK leaves
    /// the sets of another library's stage.
    pub vertex_layout: vk::PipelineLayout,
    pub cache: vk::PipelineCache,
    pub vert: &'a [u32],
    pub frag: &'a [u32],
    /// Asked with `FAIL_ON_PIPELINE_COMPILE_REQUIRED` too (`--fail-on-compile`).
    pub fail_on_compile: bool,
    /// The flags in the legacy `flags` member, as zink gives them, instead of flags2 as DXVK
    /// does (`--gpl-legacy-flags`).
    pub legacy_flags: bool,
    /// Depth-clip state chained to the pre-rasterization parts' rasterization state, as DXVK
    /// chains it where depth clip is not dynamic (`--depth-clip`).
    pub depth_clip: bool,
    /// Creation feedback chained to every call (`--feedback`).
    pub feedback: bool,
}

const COLOR_FORMATS: [vk::Format; 1] = [vk::Format::R8G8B8A8_UNORM];

impl Gpl<'_> {
    fn flags(&self, own: F2) -> vk::PipelineCreateFlags2CreateInfoKHR<'static> {
        let fail = if self.fail_on_compile {
            F2::FAIL_ON_PIPELINE_COMPILE_REQUIRED
        } else {
            F2::empty()
        };
        vk::PipelineCreateFlags2CreateInfoKHR::default().flags(own | fail)
    }

    /// `ci` with `flags2`'s flags: chained, or in the legacy member.
    fn with_flags<'a>(
        &self,
        ci: vk::GraphicsPipelineCreateInfo<'a>,
        flags2: &'a mut vk::PipelineCreateFlags2CreateInfoKHR<'static>,
    ) -> vk::GraphicsPipelineCreateInfo<'a> {
        if self.legacy_flags {
            ci.flags(vk::PipelineCreateFlags::from_raw(
                flags2.flags.as_raw() as u32
            ))
        } else {
            ci.push_next(flags2)
        }
    }

    /// One part of kind `kind` (0..4), variant `v` of its kind.
    fn part(&self, kind: usize, v: usize, out: &mut Made) -> Option<vk::Pipeline> {
        let subset = [
            vk::GraphicsPipelineLibraryFlagsEXT::VERTEX_INPUT_INTERFACE,
            vk::GraphicsPipelineLibraryFlagsEXT::PRE_RASTERIZATION_SHADERS,
            vk::GraphicsPipelineLibraryFlagsEXT::FRAGMENT_SHADER,
            vk::GraphicsPipelineLibraryFlagsEXT::FRAGMENT_OUTPUT_INTERFACE,
        ][kind];
        let mut library = vk::GraphicsPipelineLibraryCreateInfoEXT::default().flags(subset);
        let mut flags2 = self.flags(F2::LIBRARY | F2::RETAIN_LINK_TIME_OPTIMIZATION_INFO_EXT);
        let mut rendering = vk::PipelineRenderingCreateInfo::default()
            .color_attachment_formats(&COLOR_FORMATS)
            .depth_attachment_format(vk::Format::D32_SFLOAT);
        // Vertex input: the stride and topology vary.
        let (bindings, attributes) = super::triangle_vertex_input(20 + 4 * v as u32);
        let vertex_input = vk::PipelineVertexInputStateCreateInfo::default()
            .vertex_binding_descriptions(&bindings)
            .vertex_attribute_descriptions(&attributes);
        let topology = [
            vk::PrimitiveTopology::TRIANGLE_LIST,
            vk::PrimitiveTopology::TRIANGLE_STRIP,
        ][v % 2];
        let assembly = vk::PipelineInputAssemblyStateCreateInfo::default().topology(topology);
        // Pre-rasterization: the vertex shader inline; the cull mode varies; viewport and
        // scissor dynamic, as DXVK has them.
        let mut vert_code = vk::ShaderModuleCreateInfo::default().code(self.vert);
        let mut frag_code = vk::ShaderModuleCreateInfo::default().code(self.frag);
        let scale = (1.0f32 + v as f32 / 8.0).to_le_bytes();
        let scale_entry = [vk::SpecializationMapEntry::default()
            .constant_id(0)
            .offset(0)
            .size(4)];
        let spec = vk::SpecializationInfo::default()
            .map_entries(&scale_entry)
            .data(&scale);
        let vertex_stage = [vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::VERTEX)
            .name(c"main")
            .push_next(&mut vert_code)];
        let fragment_stage = [vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::FRAGMENT)
            .name(c"main")
            .specialization_info(&spec)
            .push_next(&mut frag_code)];
        // Viewports, scissors and depth bias dynamic, as DXVK has them.
        let viewport = vk::PipelineViewportStateCreateInfo::default();
        let cull = [
            vk::CullModeFlags::NONE,
            vk::CullModeFlags::BACK,
            vk::CullModeFlags::FRONT,
        ][v % 3];
        let mut clip =
            vk::PipelineRasterizationDepthClipStateCreateInfoEXT::default().depth_clip_enable(true);
        let mut raster = vk::PipelineRasterizationStateCreateInfo::default();
        if self.depth_clip {
            raster = raster.push_next(&mut clip);
        }
        let raster = raster
            .polygon_mode(vk::PolygonMode::FILL)
            .cull_mode(cull)
            .front_face(vk::FrontFace::COUNTER_CLOCKWISE)
            .line_width(1.0);
        let dynamic: &[vk::DynamicState] = match kind {
            1 => &[
                vk::DynamicState::VIEWPORT_WITH_COUNT,
                vk::DynamicState::SCISSOR_WITH_COUNT,
                vk::DynamicState::DEPTH_BIAS,
                vk::DynamicState::DEPTH_BIAS_ENABLE,
            ],
            2 => &[
                vk::DynamicState::DEPTH_TEST_ENABLE,
                vk::DynamicState::DEPTH_WRITE_ENABLE,
                vk::DynamicState::DEPTH_COMPARE_OP,
                vk::DynamicState::STENCIL_TEST_ENABLE,
                vk::DynamicState::STENCIL_OP,
                vk::DynamicState::STENCIL_COMPARE_MASK,
                vk::DynamicState::STENCIL_WRITE_MASK,
                vk::DynamicState::STENCIL_REFERENCE,
            ],
            3 => &[vk::DynamicState::BLEND_CONSTANTS],
            _ => &[],
        };
        let dynamic_state = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(dynamic);
        // Fragment shader: the scale varies; depth test on.
        let depth = vk::PipelineDepthStencilStateCreateInfo::default()
            .depth_test_enable(true)
            .depth_write_enable(true)
            .depth_compare_op(vk::CompareOp::LESS_OR_EQUAL);
        let multisample = vk::PipelineMultisampleStateCreateInfo::default()
            .rasterization_samples(vk::SampleCountFlags::TYPE_1);
        // Fragment output: blending varies.
        let blend = [vk::PipelineColorBlendAttachmentState::default()
            .blend_enable(v % 2 == 1)
            .src_color_blend_factor(vk::BlendFactor::SRC_ALPHA)
            .dst_color_blend_factor(vk::BlendFactor::ONE_MINUS_SRC_ALPHA)
            .color_blend_op(vk::BlendOp::ADD)
            .src_alpha_blend_factor(vk::BlendFactor::ONE)
            .dst_alpha_blend_factor(vk::BlendFactor::ZERO)
            .alpha_blend_op(vk::BlendOp::ADD)
            .color_write_mask(vk::ColorComponentFlags::RGBA)];
        let color_blend = vk::PipelineColorBlendStateCreateInfo::default().attachments(&blend);

        let mut ci = vk::GraphicsPipelineCreateInfo::default().push_next(&mut library);
        ci = self.with_flags(ci, &mut flags2);
        match kind {
            0 => {
                ci = ci
                    .vertex_input_state(&vertex_input)
                    .input_assembly_state(&assembly)
            }
            1 => {
                ci = ci
                    .stages(&vertex_stage)
                    .viewport_state(&viewport)
                    .rasterization_state(&raster)
                    .dynamic_state(&dynamic_state)
                    .layout(self.vertex_layout)
                    .push_next(&mut rendering)
            }
            2 => {
                // No multisample state: DXVK gives one only for sample-rate shading.
                ci = ci
                    .stages(&fragment_stage)
                    .depth_stencil_state(&depth)
                    .dynamic_state(&dynamic_state)
                    .layout(self.layout)
                    .push_next(&mut rendering)
            }
            _ => {
                ci = ci
                    .color_blend_state(&color_blend)
                    .multisample_state(&multisample)
                    .dynamic_state(&dynamic_state)
                    .push_next(&mut rendering)
            }
        }
        let started = Instant::now();
        let (made, hit) = self.create(&ci, out);
        out.parts_time += started.elapsed();
        if made.is_some() {
            out.parts += 1;
            out.part_feedback_hits += u32::from(hit);
        }
        made
    }

    /// Links one part of each kind, fast or optimized.
    fn link(&self, parts: &[vk::Pipeline; 4], optimized: bool, out: &mut Made) {
        let mut libraries = vk::PipelineLibraryCreateInfoKHR::default().libraries(parts);
        let own = if optimized {
            F2::LINK_TIME_OPTIMIZATION_EXT
        } else {
            F2::empty()
        };
        let mut flags2 = self.flags(own);
        let ci = vk::GraphicsPipelineCreateInfo::default()
            .layout(self.layout)
            .push_next(&mut libraries);
        let ci = self.with_flags(ci, &mut flags2);
        let started = Instant::now();
        let (made, _) = self.create(&ci, out);
        let took = started.elapsed();
        if made.is_some() {
            if optimized {
                out.optimized_links += 1;
                out.optimized_time += took;
            } else {
                out.fast_links += 1;
                out.fast_time += took;
            }
        }
    }

    /// The pipeline made, and whether its creation feedback (where asked) said cache hit.
    fn create(
        &self,
        ci: &vk::GraphicsPipelineCreateInfo,
        out: &mut Made,
    ) -> (Option<vk::Pipeline>, bool) {
        let mut pipeline = vk::Pipeline::null();
        let mut feedback = super::OneRecord::default();
        let mut with = *ci;
        if self.feedback {
            with.p_next = feedback.in_front(ci.p_next);
        }
        // SAFETY: a valid create info whose chain and arrays outlive the call; the raw entry
        // point, so that VK_PIPELINE_COMPILE_REQUIRED is seen as it is returned.
        let r = unsafe {
            (self.device.fp_v1_0().create_graphics_pipelines)(
                self.device.handle(),
                self.cache,
                1,
                &with,
                std::ptr::null(),
                &mut pipeline,
            )
        };
        let hit = self.feedback && feedback.whole_hit();
        let made = match r {
            vk::Result::SUCCESS if pipeline != vk::Pipeline::null() => {
                out.pipelines.push(pipeline);
                Some(pipeline)
            }
            vk::Result::PIPELINE_COMPILE_REQUIRED => {
                out.compile_required += 1;
                None
            }
            r => {
                eprintln!("testapp: a graphics pipeline library call failed: {r}");
                out.failed += 1;
                None
            }
        };
        (made, hit)
    }
}

/// Every part, then `variants` variants linked fast and optimized, from `threads` threads (the
/// links spread over them, as DXVK's workers take them).
pub fn make(gpl: &Gpl, variants: usize, threads: usize) -> Made {
    let mut made = Made::default();
    let parts: Vec<Vec<Option<vk::Pipeline>>> = KINDS
        .iter()
        .enumerate()
        .map(|(kind, n)| (0..*n).map(|v| gpl.part(kind, v, &mut made)).collect())
        .collect();
    let combos: Vec<[usize; 4]> = (0..variants.min(VARIANTS))
        .map(|i| {
            let mut rest = i;
            let mut pick = [0; 4];
            for (k, n) in KINDS.iter().enumerate() {
                pick[k] = rest % n;
                rest /= n;
            }
            pick
        })
        .collect();
    let per_thread = combos.len().div_ceil(threads.max(1)).max(1);
    let linked: Vec<Made> = std::thread::scope(|s| {
        let handles: Vec<_> = combos
            .chunks(per_thread)
            .map(|chunk| {
                let parts = &parts;
                s.spawn(move || {
                    let mut out = Made::default();
                    for pick in chunk {
                        let chosen: Option<Vec<vk::Pipeline>> =
                            (0..4).map(|k| parts[k][pick[k]]).collect();
                        let Some(chosen) = chosen else { continue };
                        let chosen: [vk::Pipeline; 4] = chosen.try_into().expect("four parts");
                        gpl.link(&chosen, false, &mut out);
                        gpl.link(&chosen, true, &mut out);
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a linking thread panicked"))
            .collect()
    });
    for l in linked {
        made.fast_links += l.fast_links;
        made.optimized_links += l.optimized_links;
        made.failed += l.failed;
        made.compile_required += l.compile_required;
        made.fast_time += l.fast_time;
        made.optimized_time += l.optimized_time;
        made.pipelines.extend(l.pipelines);
    }
    made
}

/// The layouts of the parts and links: the fragment shader's sampled image and the vertex
/// shader's push constant, its sets independent (as DXVK makes it for libraries).
pub fn layout(
    device: &ash::Device,
    sampler: vk::Sampler,
) -> Result<
    (
        vk::PipelineLayout,
        vk::PipelineLayout,
        vk::DescriptorSetLayout,
    ),
    String,
> {
    let samplers = [sampler];
    let binding = [vk::DescriptorSetLayoutBinding::default()
        .binding(0)
        .descriptor_type(vk::DescriptorType::COMBINED_IMAGE_SAMPLER)
        .descriptor_count(1)
        .stage_flags(vk::ShaderStageFlags::FRAGMENT)
        .immutable_samplers(&samplers)];
    let push = [vk::PushConstantRange::default()
        .stage_flags(vk::ShaderStageFlags::VERTEX)
        .size(8)];
    // SAFETY: valid create infos whose arrays outlive each call.
    unsafe {
        let set = device
            .create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&binding),
                None,
            )
            .map_err(|e| format!("vkCreateDescriptorSetLayout: {e}"))?;
        let sets = [set];
        let layout = device
            .create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default()
                    .flags(vk::PipelineLayoutCreateFlags::INDEPENDENT_SETS_EXT)
                    .set_layouts(&sets)
                    .push_constant_ranges(&push),
                None,
            )
            .map_err(|e| format!("vkCreatePipelineLayout: {e}"))?;
        // The pre-rasterization parts': set 0 is the fragment shader's, left NULL (DXVK's).
        let none = [vk::DescriptorSetLayout::null()];
        let vertex_layout = device
            .create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default()
                    .flags(vk::PipelineLayoutCreateFlags::INDEPENDENT_SETS_EXT)
                    .set_layouts(&none)
                    .push_constant_ranges(&push),
                None,
            )
            .map_err(|e| format!("vkCreatePipelineLayout: {e}"))?;
        Ok((layout, vertex_layout, set))
    }
}
