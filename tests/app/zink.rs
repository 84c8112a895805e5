//! `--zink-dynamic`: graphics pipelines made as Mesa's zink makes them, with nearly all their
//! state dynamic (extended dynamic state 1-3, dynamic vertex input, line stipple, colour write
//! enables, feedback loops) and the structures chained whose every field those states make
//! ignored. Each state is named only where the device (made with `--every-extension`) enables
//! the feature it needs.

use ash::vk;
use pipekeep::replay::every_extension::EveryExtension;

use vk::DynamicState as D;
use vk::StructureType as S;

/// A state and the feature it needs (a structure and its `VkBool32`'s index), `None` for core 1.3.
const CANDIDATES: &[(D, Option<(S, usize)>)] = &[
    (D::LINE_WIDTH, None),
    (D::DEPTH_BIAS, None),
    (D::BLEND_CONSTANTS, None),
    (D::DEPTH_BOUNDS, None),
    (D::STENCIL_COMPARE_MASK, None),
    (D::STENCIL_WRITE_MASK, None),
    (D::STENCIL_REFERENCE, None),
    (D::CULL_MODE, None),
    (D::FRONT_FACE, None),
    (D::PRIMITIVE_TOPOLOGY, None),
    (D::VIEWPORT_WITH_COUNT, None),
    (D::SCISSOR_WITH_COUNT, None),
    (D::VERTEX_INPUT_BINDING_STRIDE, None),
    (D::DEPTH_TEST_ENABLE, None),
    (D::DEPTH_WRITE_ENABLE, None),
    (D::DEPTH_COMPARE_OP, None),
    (D::DEPTH_BOUNDS_TEST_ENABLE, None),
    (D::STENCIL_TEST_ENABLE, None),
    (D::STENCIL_OP, None),
    (D::RASTERIZER_DISCARD_ENABLE, None),
    (D::DEPTH_BIAS_ENABLE, None),
    (D::PRIMITIVE_RESTART_ENABLE, None),
    (D::LOGIC_OP_EXT, Some((EDS2, 1))),
    (D::VERTEX_INPUT_EXT, Some((VERTEX_INPUT, 0))),
    (D::DEPTH_CLAMP_ENABLE_EXT, Some((EDS3, 1))),
    (D::POLYGON_MODE_EXT, Some((EDS3, 2))),
    (D::RASTERIZATION_SAMPLES_EXT, Some((EDS3, 3))),
    (D::SAMPLE_MASK_EXT, Some((EDS3, 4))),
    (D::ALPHA_TO_COVERAGE_ENABLE_EXT, Some((EDS3, 5))),
    (D::ALPHA_TO_ONE_ENABLE_EXT, Some((EDS3, 6))),
    (D::LOGIC_OP_ENABLE_EXT, Some((EDS3, 7))),
    (D::COLOR_BLEND_ENABLE_EXT, Some((EDS3, 8))),
    (D::COLOR_BLEND_EQUATION_EXT, Some((EDS3, 9))),
    (D::COLOR_WRITE_MASK_EXT, Some((EDS3, 10))),
    (D::DEPTH_CLIP_ENABLE_EXT, Some((EDS3, 14))),
    (D::PROVOKING_VERTEX_MODE_EXT, Some((EDS3, 17))),
    (D::LINE_RASTERIZATION_MODE_EXT, Some((EDS3, 18))),
    (D::LINE_STIPPLE_ENABLE_EXT, Some((EDS3, 19))),
    (D::DEPTH_CLIP_NEGATIVE_ONE_TO_ONE_EXT, Some((EDS3, 20))),
    // Any of the line rasterization features means the extension is enabled.
    (D::LINE_STIPPLE_KHR, Some((LINES, 0))),
    (D::COLOR_WRITE_ENABLE_EXT, Some((COLOR_WRITE, 0))),
    (
        D::ATTACHMENT_FEEDBACK_LOOP_ENABLE_EXT,
        Some((FEEDBACK_LOOP, 0)),
    ),
];

const EDS2: S = S::PHYSICAL_DEVICE_EXTENDED_DYNAMIC_STATE_2_FEATURES_EXT;
const EDS3: S = S::PHYSICAL_DEVICE_EXTENDED_DYNAMIC_STATE_3_FEATURES_EXT;
const VERTEX_INPUT: S = S::PHYSICAL_DEVICE_VERTEX_INPUT_DYNAMIC_STATE_FEATURES_EXT;
const LINES: S = S::PHYSICAL_DEVICE_LINE_RASTERIZATION_FEATURES_KHR;
const COLOR_WRITE: S = S::PHYSICAL_DEVICE_COLOR_WRITE_ENABLE_FEATURES_EXT;
const FEEDBACK_LOOP: S = S::PHYSICAL_DEVICE_ATTACHMENT_FEEDBACK_LOOP_DYNAMIC_STATE_FEATURES_EXT;

/// The states of `CANDIDATES` this device enables.
pub fn states(every: &EveryExtension) -> Vec<D> {
    CANDIDATES
        .iter()
        .filter(|(_, needs)| needs.is_none_or(|(s, i)| every.enables_feature(s, i)))
        .map(|(d, _)| *d)
        .collect()
}

/// The structures zink chains whose every field is dynamic, one set per pipeline.
#[derive(Default)]
pub struct Ignored {
    pub provoking_vertex: vk::PipelineRasterizationProvokingVertexStateCreateInfoEXT<'static>,
    pub line: vk::PipelineRasterizationLineStateCreateInfoKHR<'static>,
    pub depth_clip_control: vk::PipelineViewportDepthClipControlCreateInfoEXT<'static>,
    pub color_write: vk::PipelineColorWriteCreateInfoEXT<'static>,
}

/// One colour write enable: the pipelines' one attachment.
pub const COLOR_WRITE_ENABLES: [vk::Bool32; 1] = [vk::TRUE];

impl Ignored {
    /// Chains onto each block the structures `states` make wholly ignored.
    pub fn chain<'a>(
        &'a mut self,
        states: &[D],
        raster: vk::PipelineRasterizationStateCreateInfo<'a>,
        viewport: vk::PipelineViewportStateCreateInfo<'a>,
        blend: vk::PipelineColorBlendStateCreateInfo<'a>,
    ) -> (
        vk::PipelineRasterizationStateCreateInfo<'a>,
        vk::PipelineViewportStateCreateInfo<'a>,
        vk::PipelineColorBlendStateCreateInfo<'a>,
    ) {
        let has = |d: D| states.contains(&d);
        let (mut raster, mut viewport, mut blend) = (raster, viewport, blend);
        if has(D::PROVOKING_VERTEX_MODE_EXT) {
            raster = raster.push_next(&mut self.provoking_vertex);
        }
        if has(D::LINE_RASTERIZATION_MODE_EXT)
            && has(D::LINE_STIPPLE_ENABLE_EXT)
            && has(D::LINE_STIPPLE_KHR)
        {
            raster = raster.push_next(&mut self.line);
        }
        if has(D::DEPTH_CLIP_NEGATIVE_ONE_TO_ONE_EXT) {
            viewport = viewport.push_next(&mut self.depth_clip_control);
        }
        if has(D::COLOR_WRITE_ENABLE_EXT) {
            self.color_write = self.color_write.color_write_enables(&COLOR_WRITE_ENABLES);
            blend = blend.push_next(&mut self.color_write);
        }
        (raster, viewport, blend)
    }
}
