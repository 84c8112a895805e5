//! A graphics pipeline's state blocks read from its JSON (as Fossilize writes them) into owned
//! Vulkan structures, for [`super::pipelines`] to chain into a create info.

use ash::vk;
use serde_json::Value;

use super::fields::{arr, f, find_next, i, only, u};
use crate::replay::record::stype;

/// A graphics pipeline's state blocks, owned.
pub(super) struct GraphicsData {
    pub(super) bindings: Vec<vk::VertexInputBindingDescription>,
    pub(super) attributes: Vec<vk::VertexInputAttributeDescription>,
    pub(super) input_assembly: vk::PipelineInputAssemblyStateCreateInfo<'static>,
    pub(super) tessellation: Option<vk::PipelineTessellationStateCreateInfo<'static>>,
    pub(super) viewport_count: u32,
    pub(super) scissor_count: u32,
    pub(super) viewports: Vec<vk::Viewport>,
    pub(super) scissors: Vec<vk::Rect2D>,
    pub(super) rasterization: vk::PipelineRasterizationStateCreateInfo<'static>,
    pub(super) multisample: vk::PipelineMultisampleStateCreateInfo<'static>,
    pub(super) sample_mask: Vec<u32>,
    pub(super) depth_stencil: Option<vk::PipelineDepthStencilStateCreateInfo<'static>>,
    /// The colour blend state's flags (rasterization-order attachment access).
    pub(super) blend_flags: vk::PipelineColorBlendStateCreateFlags,
    pub(super) logic_op_enable: bool,
    pub(super) logic_op: vk::LogicOp,
    pub(super) blend_attachments: Vec<vk::PipelineColorBlendAttachmentState>,
    pub(super) blend_constants: [f32; 4],
    pub(super) dynamic_states: Vec<vk::DynamicState>,
    pub(super) view_mask: u32,
    pub(super) color_formats: Vec<vk::Format>,
    pub(super) depth_format: vk::Format,
    pub(super) stencil_format: vk::Format,
    /// The rasterization state's `VkPipelineRasterizationDepthClipStateCreateInfoEXT`.
    pub(super) depth_clip: Option<vk::PipelineRasterizationDepthClipStateCreateInfoEXT<'static>>,
    /// The vertex input state's divisors (`VkPipelineVertexInputDivisorStateCreateInfo`).
    pub(super) divisors: Option<Vec<vk::VertexInputBindingDivisorDescriptionKHR>>,
}

impl GraphicsData {
    pub(super) fn read(v: &Value) -> Result<GraphicsData, String> {
        let null = Value::Null;
        let block = |k: &str| -> Result<&Value, String> {
            let b = v.get(k).unwrap_or(&null);
            let allowed: &[i32] = match k {
                "rasterizationState" => &[stype::DEPTH_CLIP],
                "vertexInputState" => &[stype::VERTEX_INPUT_DIVISOR],
                _ => &[],
            };
            only(b, allowed, k)?;
            Ok(b)
        };
        let (vi, ia, ts, vp, rs, ms, ds, cb, dy) = (
            block("vertexInputState")?,
            block("inputAssemblyState")?,
            block("tessellationState")?,
            block("viewportState")?,
            block("rasterizationState")?,
            block("multisampleState")?,
            block("depthStencilState")?,
            block("colorBlendState")?,
            block("dynamicState")?,
        );
        let stencil = |s: &Value| vk::StencilOpState {
            fail_op: vk::StencilOp::from_raw(i(s, "failOp")),
            pass_op: vk::StencilOp::from_raw(i(s, "passOp")),
            depth_fail_op: vk::StencilOp::from_raw(i(s, "depthFailOp")),
            compare_op: vk::CompareOp::from_raw(i(s, "compareOp")),
            compare_mask: u(s, "compareMask"),
            write_mask: u(s, "writeMask"),
            reference: u(s, "reference"),
        };
        let rendering = find_next(v, stype::RENDERING);
        let samples = u(ms, "rasterizationSamples").max(1);
        let blend_constants: Vec<f32> = arr(cb, "blendConstants")
            .iter()
            .map(|x| x.as_f64().unwrap_or(0.0) as f32)
            .collect();
        let depth_clip = find_next(rs, stype::DEPTH_CLIP).map(|c| {
            vk::PipelineRasterizationDepthClipStateCreateInfoEXT::default()
                .flags(
                    vk::PipelineRasterizationDepthClipStateCreateFlagsEXT::from_raw(u(c, "flags")),
                )
                .depth_clip_enable(u(c, "depthClipEnable") != 0)
        });
        let divisors = find_next(vi, stype::VERTEX_INPUT_DIVISOR).map(|d| {
            arr(d, "vertexBindingDivisors")
                .iter()
                .map(|x| vk::VertexInputBindingDivisorDescriptionKHR {
                    binding: u(x, "binding"),
                    divisor: u(x, "divisor"),
                })
                .collect()
        });
        Ok(GraphicsData {
            depth_clip,
            divisors,
            bindings: arr(vi, "bindings")
                .iter()
                .map(|b| vk::VertexInputBindingDescription {
                    binding: u(b, "binding"),
                    stride: u(b, "stride"),
                    input_rate: vk::VertexInputRate::from_raw(i(b, "inputRate")),
                })
                .collect(),
            attributes: arr(vi, "attributes")
                .iter()
                .map(|a| vk::VertexInputAttributeDescription {
                    location: u(a, "location"),
                    binding: u(a, "binding"),
                    format: vk::Format::from_raw(i(a, "format")),
                    offset: u(a, "offset"),
                })
                .collect(),
            input_assembly: vk::PipelineInputAssemblyStateCreateInfo::default()
                .topology(vk::PrimitiveTopology::from_raw(i(ia, "topology")))
                .primitive_restart_enable(u(ia, "primitiveRestartEnable") != 0),
            tessellation: v.get("tessellationState").map(|_| {
                vk::PipelineTessellationStateCreateInfo::default()
                    .patch_control_points(u(ts, "patchControlPoints"))
            }),
            viewport_count: u(vp, "viewportCount"),
            scissor_count: u(vp, "scissorCount"),
            viewports: arr(vp, "viewports")
                .iter()
                .map(|x| vk::Viewport {
                    x: f(x, "x"),
                    y: f(x, "y"),
                    width: f(x, "width"),
                    height: f(x, "height"),
                    min_depth: f(x, "minDepth"),
                    max_depth: f(x, "maxDepth"),
                })
                .collect(),
            scissors: arr(vp, "scissors")
                .iter()
                .map(|x| vk::Rect2D {
                    offset: vk::Offset2D {
                        x: i(x, "x"),
                        y: i(x, "y"),
                    },
                    extent: vk::Extent2D {
                        width: u(x, "width"),
                        height: u(x, "height"),
                    },
                })
                .collect(),
            rasterization: vk::PipelineRasterizationStateCreateInfo::default()
                .depth_clamp_enable(u(rs, "depthClampEnable") != 0)
                .rasterizer_discard_enable(u(rs, "rasterizerDiscardEnable") != 0)
                .polygon_mode(vk::PolygonMode::from_raw(i(rs, "polygonMode")))
                .cull_mode(vk::CullModeFlags::from_raw(u(rs, "cullMode")))
                .front_face(vk::FrontFace::from_raw(i(rs, "frontFace")))
                .depth_bias_enable(u(rs, "depthBiasEnable") != 0)
                .depth_bias_constant_factor(f(rs, "depthBiasConstantFactor"))
                .depth_bias_clamp(f(rs, "depthBiasClamp"))
                .depth_bias_slope_factor(f(rs, "depthBiasSlopeFactor"))
                .line_width(f(rs, "lineWidth")),
            multisample: vk::PipelineMultisampleStateCreateInfo::default()
                .rasterization_samples(vk::SampleCountFlags::from_raw(samples))
                .sample_shading_enable(u(ms, "sampleShadingEnable") != 0)
                .min_sample_shading(f(ms, "minSampleShading"))
                .alpha_to_coverage_enable(u(ms, "alphaToCoverageEnable") != 0)
                .alpha_to_one_enable(u(ms, "alphaToOneEnable") != 0),
            sample_mask: {
                let mask: Vec<u32> = arr(ms, "sampleMask")
                    .iter()
                    .map(|x| x.as_u64().unwrap_or(0) as u32)
                    .collect();
                if !mask.is_empty() && mask.len() < samples.div_ceil(32) as usize {
                    return Err("sample mask shorter than its sample count".into());
                }
                mask
            },
            depth_stencil: v.get("depthStencilState").map(|_| {
                vk::PipelineDepthStencilStateCreateInfo::default()
                    .flags(vk::PipelineDepthStencilStateCreateFlags::from_raw(u(
                        ds, "flags",
                    )))
                    .depth_test_enable(u(ds, "depthTestEnable") != 0)
                    .depth_write_enable(u(ds, "depthWriteEnable") != 0)
                    .depth_compare_op(vk::CompareOp::from_raw(i(ds, "depthCompareOp")))
                    .depth_bounds_test_enable(u(ds, "depthBoundsTestEnable") != 0)
                    .stencil_test_enable(u(ds, "stencilTestEnable") != 0)
                    .front(stencil(ds.get("front").unwrap_or(&Value::Null)))
                    .back(stencil(ds.get("back").unwrap_or(&Value::Null)))
                    .min_depth_bounds(f(ds, "minDepthBounds"))
                    .max_depth_bounds(f(ds, "maxDepthBounds"))
            }),
            blend_flags: vk::PipelineColorBlendStateCreateFlags::from_raw(u(cb, "flags")),
            logic_op_enable: u(cb, "logicOpEnable") != 0,
            logic_op: vk::LogicOp::from_raw(i(cb, "logicOp")),
            blend_attachments: arr(cb, "attachments")
                .iter()
                .map(|a| vk::PipelineColorBlendAttachmentState {
                    blend_enable: u(a, "blendEnable"),
                    src_color_blend_factor: vk::BlendFactor::from_raw(i(a, "srcColorBlendFactor")),
                    dst_color_blend_factor: vk::BlendFactor::from_raw(i(a, "dstColorBlendFactor")),
                    color_blend_op: vk::BlendOp::from_raw(i(a, "colorBlendOp")),
                    src_alpha_blend_factor: vk::BlendFactor::from_raw(i(a, "srcAlphaBlendFactor")),
                    dst_alpha_blend_factor: vk::BlendFactor::from_raw(i(a, "dstAlphaBlendFactor")),
                    alpha_blend_op: vk::BlendOp::from_raw(i(a, "alphaBlendOp")),
                    color_write_mask: vk::ColorComponentFlags::from_raw(u(a, "colorWriteMask")),
                })
                .collect(),
            blend_constants: [0, 1, 2, 3].map(|k| blend_constants.get(k).copied().unwrap_or(0.0)),
            dynamic_states: arr(dy, "dynamicState")
                .iter()
                .map(|x| vk::DynamicState::from_raw(x.as_i64().unwrap_or(0) as i32))
                .collect(),
            view_mask: rendering.map_or(0, |r| u(r, "viewMask")),
            color_formats: rendering.map_or(Vec::new(), |r| {
                arr(r, "colorAttachmentFormats")
                    .iter()
                    .map(|x| vk::Format::from_raw(x.as_i64().unwrap_or(0) as i32))
                    .collect()
            }),
            depth_format: vk::Format::from_raw(
                rendering.map_or(0, |r| i(r, "depthAttachmentFormat")),
            ),
            stencil_format: vk::Format::from_raw(
                rendering.map_or(0, |r| i(r, "stencilAttachmentFormat")),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::GraphicsData;

    /// Every state block's flags the key reads are passed again: the colour blend state's
    /// (rasterization-order attachment access) were dropped, and the rebuild keyed another
    /// pipeline.
    #[test]
    fn the_colour_blend_state_s_flags_are_read_back() {
        let v = serde_json::json!({
            "colorBlendState": {"flags": 1, "logicOpEnable": 0, "logicOp": 0, "attachments": []},
            "depthStencilState": {"flags": 2},
        });
        let g = GraphicsData::read(&v).unwrap();
        assert_eq!(g.blend_flags.as_raw(), 1);
        assert_eq!(g.depth_stencil.unwrap().flags.as_raw(), 2);
    }
}
