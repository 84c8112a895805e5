//! A pipeline and every object it names as database entries: each create info as Fossilize
//! writes it in JSON, under the hash it is named by.

use std::collections::HashSet;
use std::sync::Arc;

use base64::Engine;
use serde_json::{json, Map, Value};

use super::configuration::application;
use super::links::{link_doc, link_hash};
use super::{object_hash, pipeline_hash, stype, AppState, Content, DbEntry, NotRecorded};
use super::{PipelineRecord, Recorded};
use crate::key::desc::{
    ComputeDesc, GraphicsDesc, PipelineLayoutDesc, RayTracingDesc, RenderPassDesc, RenderTarget,
    Robustness, SamplerDesc, SetLayoutDesc, ShaderDesc, StageDesc,
};
use crate::key::Digest;
use crate::replay::objects::{
    TAG_APPLICATION, TAG_LINK, TAG_PIPELINE_LAYOUT, TAG_RENDER_PASS, TAG_SAMPLER, TAG_SET_LAYOUT,
    TAG_SHADER_MODULE,
};

fn hash_ref(d: &Digest) -> String {
    format!("{:016x}", object_hash(d))
}

fn document(kind: &str, hash: u64, value: Value) -> Vec<u8> {
    let mut objects = Map::new();
    objects.insert(format!("{hash:016x}"), value);
    serde_json::to_vec(&json!({ "version": 6, kind: objects })).expect("JSON of plain values")
}

/// A configuration's application entry (tag 0), made once a device: serializing the device's
/// whole state for every pipeline took most of a record's append (641 pipelines: 189 ms of JSON
/// against 85 ms of deflating and writing, RADV, this project's machine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppEntry {
    hash: u64,
    payload: Vec<u8>,
}

impl AppEntry {
    pub fn of(app: &AppState) -> AppEntry {
        AppEntry {
            hash: super::configuration::configuration_hash(app),
            payload: application(app),
        }
    }
}

/// A device's configuration as its record names it: its state, and its application entry,
/// made by the first append that needs it (on the writer's thread, never on a pipeline's path).
#[derive(Debug, Default)]
pub struct RecordApp {
    state: AppState,
    entry: std::sync::OnceLock<AppEntry>,
}

impl RecordApp {
    pub fn new(state: AppState) -> RecordApp {
        RecordApp {
            state,
            entry: Default::default(),
        }
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    pub fn entry(&self) -> &AppEntry {
        self.entry.get_or_init(|| AppEntry::of(&self.state))
    }
}

/// The entries of pipelines recorded together: each object's document is made once, for the
/// first pipeline naming it (a record's file drops what it holds already).
#[derive(Debug, Default)]
pub struct Batch {
    made: HashSet<(u32, u64)>,
}

/// One pipeline's entries as they are made, each once in its batch.
struct Entries<'a> {
    made: &'a HashSet<(u32, u64)>,
    out: Vec<DbEntry>,
}

impl Entries<'_> {
    /// Adds the entry `(tag, hash)`, its payload made by `make`, unless the batch has it.
    fn add(
        &mut self,
        tag: u32,
        hash: u64,
        make: impl FnOnce() -> Result<Vec<u8>, NotRecorded>,
    ) -> Result<(), NotRecorded> {
        let fresh = !self.made.contains(&(tag, hash))
            && !self.out.iter().any(|(t, h, _)| (*t, *h) == (tag, hash));
        if fresh {
            self.out.push((tag, hash, make()?));
        }
        Ok(())
    }
}

impl Batch {
    /// The entries of one pipeline and the objects it names that the batch has not made yet;
    /// none where it cannot be recorded.
    pub fn entries(
        &mut self,
        record: &PipelineRecord,
        app: &AppEntry,
    ) -> Result<Vec<DbEntry>, NotRecorded> {
        let mut entries = Entries {
            made: &self.made,
            out: Vec::new(),
        };
        record_entries(record, app, &mut entries)?;
        let out = entries.out;
        self.made.extend(out.iter().map(|(t, h, _)| (*t, *h)));
        Ok(out)
    }
}

fn record_entries(
    record: &PipelineRecord,
    app: &AppEntry,
    out: &mut Entries<'_>,
) -> Result<(), NotRecorded> {
    let content = |digest: &Digest| {
        record
            .contents
            .iter()
            .find(|(d, _)| d == digest)
            .map(|(_, c)| Arc::clone(c))
            .ok_or(NotRecorded::MissingContent)
    };
    let app_hash = app.hash;
    out.add(TAG_APPLICATION, app_hash, || Ok(app.payload.clone()))?;
    // A library part of vertex input or fragment output state, or a link naming none, has no
    // layout of its own: it is written as NULL. Shader objects name their set layouts each.
    let layout_digest = record
        .desc
        .layout()
        .copied()
        .filter(|l| *l != Digest([0; 32]));
    let layout_content = layout_digest.as_ref().map(&content).transpose()?;
    let mut set_layouts = match layout_content.as_deref() {
        Some(Content::PipelineLayout(layout)) => layout.set_layouts.clone(),
        Some(_) => return Err(NotRecorded::MissingContent),
        None => Vec::new(),
    };
    set_layouts.extend(record.desc.own_set_layouts());
    // A set left NULL (`INDEPENDENT_SETS`) is written as Fossilize writes it: hash 0.
    for set in set_layouts.iter().filter(|s| **s != Digest::NONE) {
        let Content::SetLayout(set_layout) = &*content(set)? else {
            return Err(NotRecorded::MissingContent);
        };
        for binding in &set_layout.bindings {
            for sampler in binding.immutable_samplers.iter().flatten() {
                let Content::Sampler(s) = &*content(sampler)? else {
                    return Err(NotRecorded::MissingContent);
                };
                out.add(TAG_SAMPLER, object_hash(sampler), || {
                    sampler_doc(sampler, s)
                })?;
            }
        }
        out.add(TAG_SET_LAYOUT, object_hash(set), || {
            Ok(set_layout_doc(set, set_layout))
        })?;
    }
    if let (Some(digest), Some(Content::PipelineLayout(layout))) =
        (&layout_digest, layout_content.as_deref())
    {
        out.add(TAG_PIPELINE_LAYOUT, object_hash(digest), || {
            Ok(pipeline_layout_doc(digest, layout))
        })?;
    }
    for stage in record.desc.stages() {
        let Content::Module(code) = &*content(&stage.module)? else {
            return Err(NotRecorded::MissingContent);
        };
        out.add(TAG_SHADER_MODULE, object_hash(&stage.module), || {
            Ok(module_doc(&stage.module, code))
        })?;
    }
    let hash = pipeline_hash(&record.key);
    let tag = record.desc.tag();
    match &record.desc {
        Recorded::Compute(d) => out.add(tag, hash, || compute_doc(hash, d))?,
        Recorded::Graphics(d) => {
            if let Some(RenderTarget::Pass { pass, .. }) = d.target.clone().filter_pass() {
                let Content::RenderPass(rp) = &*content(&pass)? else {
                    return Err(NotRecorded::MissingContent);
                };
                out.add(TAG_RENDER_PASS, object_hash(&pass), || {
                    Ok(render_pass_doc(&pass, rp))
                })?;
            }
            out.add(tag, hash, || graphics_doc(hash, d))?;
        }
        Recorded::RayTracing(d) => out.add(tag, hash, || ray_tracing_doc(hash, d))?,
        // Its configuration named in its own document: a Fossilize link of a tag past
        // Fossilize's own would index its tools' tables out of bounds (fossilize-prune's
        // `filtered_blob_hashes[tag]`).
        // One document a configuration, as a pipeline is linked once to each: its name holds
        // the configuration's hash (two configurations may share a device's state).
        Recorded::ShaderObjects(shaders) => {
            let named = link_hash(app_hash, tag, hash);
            return out.add(tag, named, || shader_objects_doc(named, app_hash, shaders));
        }
    }
    // The pipeline under its configuration, as Fossilize links a blob to its application.
    out.add(TAG_LINK, link_hash(app_hash, tag, hash), || {
        Ok(link_doc(app_hash, tag, hash))
    })
}

fn sampler_doc(digest: &Digest, s: &SamplerDesc) -> Result<Vec<u8>, NotRecorded> {
    let [u, v, w] = s.address_modes;
    let mut value = json!({
        "flags": s.flags, "magFilter": s.mag_filter, "minFilter": s.min_filter,
        "mipmapMode": s.mipmap_mode, "addressModeU": u, "addressModeV": v, "addressModeW": w,
        "mipLodBias": s.mip_lod_bias, "anisotropyEnable": u32::from(s.anisotropy_enable),
        "maxAnisotropy": s.max_anisotropy, "compareEnable": u32::from(s.compare_enable),
        "compareOp": s.compare_op, "minLod": s.min_lod, "maxLod": s.max_lod,
        "borderColor": s.border_color,
        "unnormalizedCoordinates": u32::from(s.unnormalized_coordinates),
    });
    if let Some(mode) = s.reduction_mode {
        value["pNext"] = json!([{ "sType": stype::REDUCTION_MODE, "reductionMode": mode }]);
    }
    Ok(document("samplers", object_hash(digest), value))
}

fn set_layout_doc(digest: &Digest, l: &SetLayoutDesc) -> Vec<u8> {
    let bindings: Vec<Value> = l
        .bindings
        .iter()
        .map(|b| {
            let samplers: Vec<String> = b
                .immutable_samplers
                .iter()
                .flatten()
                .map(hash_ref)
                .collect();
            json!({
                "binding": b.binding, "descriptorType": b.descriptor_type,
                "descriptorCount": b.descriptor_count, "stageFlags": b.stage_flags,
                "immutableSamplers": samplers,
            })
        })
        .collect();
    let mut value = json!({ "flags": l.flags, "bindings": bindings });
    if l.bindings.iter().any(|b| b.binding_flags != 0) {
        let flags: Vec<u32> = l.bindings.iter().map(|b| b.binding_flags).collect();
        value["pNext"] = json!([{ "sType": stype::BINDING_FLAGS, "bindingFlags": flags }]);
    }
    document("setLayouts", object_hash(digest), value)
}

fn pipeline_layout_doc(digest: &Digest, l: &PipelineLayoutDesc) -> Vec<u8> {
    let mut v = json!({ "flags": l.flags });
    layout_json(l, &mut v);
    document("pipelineLayouts", object_hash(digest), v)
}

/// A layout's `setLayouts` (by hash) and `pushConstantRanges`, as a pipeline layout and a shader
/// object write them.
fn layout_json(l: &PipelineLayoutDesc, into: &mut Value) {
    let sets: Vec<String> = l.set_layouts.iter().map(hash_ref).collect();
    let ranges: Vec<Value> = l
        .push_constant_ranges
        .iter()
        .map(|r| json!({ "stageFlags": r.stage_flags, "offset": r.offset, "size": r.size }))
        .collect();
    into["setLayouts"] = json!(sets);
    into["pushConstantRanges"] = json!(ranges);
}

fn module_doc(digest: &Digest, code: &[u32]) -> Vec<u8> {
    let varints = crate::replay::varint::encode(code);
    let mut payload = document(
        "shaderModules",
        object_hash(digest),
        json!({
            "flags": 0, "codeSize": code.len() * 4, "varintOffset": 0,
            "varintSize": varints.len(),
        }),
    );
    payload.push(0);
    payload.extend_from_slice(&varints);
    payload
}

fn stage_json(s: &StageDesc) -> Result<Value, NotRecorded> {
    let name = String::from_utf8(s.entry_point.clone())
        .map_err(|_| NotRecorded::Unwritable("an entry point name that is not UTF-8"))?;
    let mut stage = json!({
        "flags": s.flags, "stage": s.stage, "module": hash_ref(&s.module), "name": name,
    });
    if !s.specialization.is_empty() {
        let mut data = Vec::new();
        let mut entries = Vec::new();
        for c in &s.specialization {
            entries.push(
                json!({ "constantID": c.constant_id, "offset": data.len(), "size": c.value.len() }),
            );
            data.extend_from_slice(&c.value);
        }
        stage["specializationInfo"] = json!({
            "dataSize": data.len(),
            "data": base64::engine::general_purpose::STANDARD.encode(&data),
            "mapEntries": entries,
        });
    }
    let mut next = Vec::new();
    if let Some(size) = s.required_subgroup_size {
        next.push(json!({ "sType": stype::REQUIRED_SUBGROUP_SIZE, "requiredSubgroupSize": size }));
    }
    next.extend(s.robustness.as_ref().map(robustness_json));
    if !next.is_empty() {
        stage["pNext"] = Value::Array(next);
    }
    Ok(stage)
}

/// `VkPipelineRobustnessCreateInfoEXT` as a `pNext` member (a pipeline's or a stage's), its fields
/// under their Vulkan names, as Fossilize writes every structure.
fn robustness_json(r: &Robustness) -> Value {
    json!({
        "sType": stype::PIPELINE_ROBUSTNESS, "storageBuffers": r.storage_buffers,
        "uniformBuffers": r.uniform_buffers, "vertexInputs": r.vertex_inputs, "images": r.images,
    })
}

fn compute_doc(hash: u64, d: &ComputeDesc) -> Result<Vec<u8>, NotRecorded> {
    let mut v = json!({
        "flags": d.flags, "stage": stage_json(&d.stage)?, "layout": hash_ref(&d.layout),
        "basePipelineHandle": "0000000000000000", "basePipelineIndex": -1,
    });
    if let Some(r) = &d.robustness {
        v["pNext"] = json!([robustness_json(r)]);
    }
    Ok(document("computePipelines", hash, v))
}

/// A graphics pipeline's state blocks, as Fossilize writes them. A field the key left out (the
/// spec says it is ignored: dynamic, or its block not read) is written as 0: a replay ignores it
/// alike.
fn graphics_doc(hash: u64, d: &GraphicsDesc) -> Result<Vec<u8>, NotRecorded> {
    let b = |v: bool| u32::from(v);
    let stages = d
        .stages
        .iter()
        .map(stage_json)
        .collect::<Result<Vec<_>, _>>()?;
    let null = "0000000000000000";
    let layout = if d.layout == Digest([0; 32]) {
        null.to_owned()
    } else {
        hash_ref(&d.layout)
    };
    let mut v = json!({
        "flags": d.flags, "stages": stages, "layout": layout,
        "basePipelineHandle": "0000000000000000", "basePipelineIndex": -1,
        "dynamicState": { "flags": 0, "dynamicState": d.dynamic_states },
    });
    if let Some(vi) = &d.vertex_input {
        v["vertexInputState"] = json!({
            "flags": vi.flags,
            "bindings": vi.bindings.iter().map(|x| json!({
                "binding": x.binding, "stride": x.stride.unwrap_or(0), "inputRate": x.input_rate,
            })).collect::<Vec<_>>(),
            "attributes": vi.attributes.iter().map(|a| json!({
                "location": a.location, "binding": a.binding, "format": a.format, "offset": a.offset,
            })).collect::<Vec<_>>(),
        });
    }
    if let (Some(divisors), Some(vi)) = (&d.extensions.divisors, v.get_mut("vertexInputState")) {
        vi["pNext"] = json!([{
            "sType": stype::VERTEX_INPUT_DIVISOR, "vertexBindingDivisorCount": divisors.len(),
            "vertexBindingDivisors": divisors.iter().map(|(binding, divisor)| json!({
                "binding": binding, "divisor": divisor,
            })).collect::<Vec<_>>(),
        }]);
    }
    if let Some(ia) = &d.input_assembly {
        v["inputAssemblyState"] = json!({
            "flags": ia.flags, "topology": ia.topology,
            "primitiveRestartEnable": b(ia.primitive_restart.unwrap_or(false)),
        });
    }
    if let Some(points) = d.tessellation_patch_control_points {
        v["tessellationState"] = json!({ "flags": 0, "patchControlPoints": points });
    }
    if let Some(vp) = &d.viewport {
        let viewports: Vec<Value> = vp.viewports.iter().flatten().map(|x| json!({
            "x": x[0], "y": x[1], "width": x[2], "height": x[3], "minDepth": x[4], "maxDepth": x[5],
        })).collect();
        let scissors: Vec<Value> = vp
            .scissors
            .iter()
            .flatten()
            .map(|x| {
                json!({
                    "x": x[0] as i32, "y": x[1] as i32, "width": x[2], "height": x[3],
                })
            })
            .collect();
        v["viewportState"] = json!({
            "flags": vp.flags, "viewportCount": vp.viewport_count.unwrap_or(0),
            "scissorCount": vp.scissor_count.unwrap_or(0), "viewports": viewports,
            "scissors": scissors,
        });
    }
    let r = &d.rasterization;
    let [bias_constant, bias_clamp, bias_slope] = r.depth_bias.unwrap_or_default();
    // Pre-rasterization state's (a complete pipeline has it).
    let subsets = d.library.as_ref().map_or(u32::MAX, |l| l.subsets);
    let pre_rasterization =
        subsets & ash::vk::GraphicsPipelineLibraryFlagsEXT::PRE_RASTERIZATION_SHADERS.as_raw() != 0;
    v["rasterizationState"] = json!({
        "flags": r.flags, "depthClampEnable": b(r.depth_clamp_enable),
        "rasterizerDiscardEnable": b(r.rasterizer_discard_enable.unwrap_or(false)),
        "polygonMode": r.polygon_mode, "cullMode": r.cull_mode.unwrap_or(0),
        "frontFace": r.front_face.unwrap_or(0),
        "depthBiasEnable": b(r.depth_bias_enable.unwrap_or(false)),
        "depthBiasConstantFactor": bias_constant, "depthBiasClamp": bias_clamp,
        "depthBiasSlopeFactor": bias_slope, "lineWidth": r.line_width.unwrap_or(1.0),
    });
    if let Some((flags, enable)) = d.extensions.depth_clip {
        v["rasterizationState"]["pNext"] = json!([{
            "sType": stype::DEPTH_CLIP, "flags": flags,
            "depthClipEnable": b(enable.unwrap_or(true)),
        }]);
    }
    if !pre_rasterization {
        v.as_object_mut().map(|o| o.remove("rasterizationState"));
    }
    if let Some(m) = &d.multisample {
        v["multisampleState"] = json!({
            "flags": m.flags, "rasterizationSamples": m.rasterization_samples,
            "sampleShadingEnable": b(m.sample_shading_enable),
            "minSampleShading": m.min_sample_shading,
            "sampleMask": m.sample_mask.clone().unwrap_or_default(),
            "alphaToCoverageEnable": b(m.alpha_to_coverage_enable),
            "alphaToOneEnable": b(m.alpha_to_one_enable),
        });
    }
    if let Some(ds) = &d.depth_stencil {
        let stencil = |s: &crate::key::desc::StencilDesc| {
            let [fail, pass, depth_fail, compare] = s.ops.unwrap_or_default();
            json!({
                "failOp": fail, "passOp": pass, "depthFailOp": depth_fail, "compareOp": compare,
                "compareMask": s.compare_mask.unwrap_or(0), "writeMask": s.write_mask.unwrap_or(0),
                "reference": s.reference.unwrap_or(0),
            })
        };
        let [min_bounds, max_bounds] = ds.depth_bounds.unwrap_or_default();
        v["depthStencilState"] = json!({
            "flags": ds.flags, "depthTestEnable": b(ds.depth_test_enable.unwrap_or(false)),
            "depthWriteEnable": b(ds.depth_write_enable.unwrap_or(false)),
            "depthCompareOp": ds.depth_compare_op.unwrap_or(0),
            "depthBoundsTestEnable": b(ds.depth_bounds_test_enable.unwrap_or(false)),
            "stencilTestEnable": b(ds.stencil_test_enable.unwrap_or(false)),
            "front": stencil(&ds.front), "back": stencil(&ds.back),
            "minDepthBounds": min_bounds, "maxDepthBounds": max_bounds,
        });
    }
    if let Some(cb) = &d.color_blend {
        v["colorBlendState"] = json!({
            "flags": cb.flags, "logicOpEnable": b(cb.logic_op_enable),
            "logicOp": cb.logic_op.unwrap_or(0),
            "attachments": cb.attachments.iter().map(|a| json!({
                "blendEnable": b(a.blend_enable), "srcColorBlendFactor": a.src_color_factor,
                "dstColorBlendFactor": a.dst_color_factor, "colorBlendOp": a.color_op,
                "srcAlphaBlendFactor": a.src_alpha_factor, "dstAlphaBlendFactor": a.dst_alpha_factor,
                "alphaBlendOp": a.alpha_op, "colorWriteMask": a.color_write_mask,
            })).collect::<Vec<_>>(),
            "blendConstants": cb.blend_constants.unwrap_or_default(),
        });
    }
    let mut next = Vec::new();
    match &d.target {
        RenderTarget::Pass { pass, subpass } => {
            let none = *pass == Digest([0; 32]);
            v["renderPass"] = json!(if none {
                null.to_owned()
            } else {
                hash_ref(pass)
            });
            v["subpass"] = json!(subpass);
        }
        RenderTarget::Dynamic {
            view_mask,
            color_formats,
            depth_format,
            stencil_format,
        } => {
            v["renderPass"] = json!("0000000000000000");
            next.push(json!({
                "sType": stype::RENDERING, "viewMask": view_mask,
                "colorAttachmentFormats": color_formats,
                "depthAttachmentFormat": depth_format, "stencilAttachmentFormat": stencil_format,
            }));
        }
    }
    next.extend(d.robustness.as_ref().map(robustness_json));
    // A library part says its subsets; a link names its libraries by their pipelines' hashes,
    // as Fossilize writes both (the flags, LIBRARY_BIT among them, stand in `flags`).
    if let Some(library) = &d.library {
        next.push(json!({ "sType": stype::GRAPHICS_PIPELINE_LIBRARY, "flags": library.subsets }));
        if !library.libraries.is_empty() {
            let names = library_names(&library.libraries);
            next.push(json!({ "libraries": names, "sType": stype::PIPELINE_LIBRARY }));
        }
    }
    if !next.is_empty() {
        v["pNext"] = Value::Array(next);
    }
    Ok(document("graphicsPipelines", hash, v))
}

/// The database name of each library a link names (by its key, as graphics links name theirs).
fn library_names(libraries: &[crate::key::PipelineKey]) -> Vec<String> {
    libraries
        .iter()
        .map(|k| format!("{:016x}", pipeline_hash(k)))
        .collect()
}

/// A ray-tracing pipeline under Fossilize's field names (`json_value(const
/// VkRayTracingPipelineCreateInfoKHR&)`), which its replayer reads by name. What the key did not
/// read is not written: no dynamic state where there is none, no library interface where none
/// was given, no library info where it links none (the key takes a NULL `pLibraryInfo` and one of
/// no libraries alike, so a replay of either keys the same).
pub(super) fn ray_tracing_doc(hash: u64, d: &RayTracingDesc) -> Result<Vec<u8>, NotRecorded> {
    let stages = d
        .stages
        .iter()
        .map(stage_json)
        .collect::<Result<Vec<_>, _>>()?;
    let groups: Vec<Value> = d
        .groups
        .iter()
        .map(|g| {
            json!({
                "anyHitShader": g.any_hit, "intersectionShader": g.intersection,
                "generalShader": g.general, "closestHitShader": g.closest_hit,
                "type": g.group_type,
            })
        })
        .collect();
    let mut v = json!({
        "flags": d.flags, "layout": hash_ref(&d.layout),
        "basePipelineHandle": "0000000000000000", "basePipelineIndex": -1,
        "maxPipelineRayRecursionDepth": d.max_recursion_depth, "stages": stages,
        "groups": groups,
    });
    if !d.dynamic_states.is_empty() {
        v["dynamicState"] = json!({ "flags": 0, "dynamicState": d.dynamic_states });
    }
    if let Some([payload, hit_attribute]) = d.library_interface {
        v["libraryInterface"] = json!({
            "maxPipelineRayPayloadSize": payload, "maxPipelineRayHitAttributeSize": hit_attribute,
        });
    }
    // A member of the create info, not a pNext structure: no sType, as Fossilize writes it.
    if !d.libraries.is_empty() {
        v["libraryInfo"] = json!({ "libraries": library_names(&d.libraries) });
    }
    if let Some(r) = &d.robustness {
        v["pNext"] = json!([robustness_json(r)]);
    }
    Ok(document("raytracingPipelines", hash, v))
}

/// A `vkCreateShadersEXT` call under the configuration `application`: each shader's `VkShaderCreateInfoEXT` under its Vulkan field
/// names, as Fossilize writes a structure (`codeType` SPIR-V, the code named as a shader module
/// entry by its hash, `pName` as `name`, and the stage's own members as a pipeline stage writes
/// them), in the call's order.
fn shader_objects_doc(
    hash: u64,
    application: u64,
    shaders: &[ShaderDesc],
) -> Result<Vec<u8>, NotRecorded> {
    let infos = shaders
        .iter()
        .map(|s| {
            let mut info = stage_json(&s.stage)?;
            info["nextStage"] = json!(s.next_stage);
            info["codeType"] = json!(ash::vk::ShaderCodeTypeEXT::SPIRV.as_raw());
            layout_json(&s.layout, &mut info);
            Ok(info)
        })
        .collect::<Result<Vec<Value>, NotRecorded>>()?;
    Ok(document(
        "shaderObjects",
        hash,
        json!({ "application": format!("{application:016x}"), "createInfos": infos }),
    ))
}

fn render_pass_doc(digest: &Digest, rp: &RenderPassDesc) -> Vec<u8> {
    let reference = |r: &crate::key::desc::AttachmentRef| json!({ "attachment": r.attachment, "layout": r.layout, "aspectMask": r.aspect_mask });
    let attachments: Vec<Value> = rp
        .attachments
        .iter()
        .map(|a| {
            json!({
                "flags": a.flags, "format": a.format, "samples": a.samples, "loadOp": a.load_op,
                "storeOp": a.store_op, "stencilLoadOp": a.stencil_load_op,
                "stencilStoreOp": a.stencil_store_op, "initialLayout": a.initial_layout,
                "finalLayout": a.final_layout,
            })
        })
        .collect();
    let subpasses: Vec<Value> = rp.subpasses.iter().map(|s| {
        let mut v = json!({
            "flags": s.flags, "pipelineBindPoint": s.bind_point, "viewMask": s.view_mask,
            "inputAttachments": s.inputs.iter().map(reference).collect::<Vec<_>>(),
            "colorAttachments": s.colors.iter().map(reference).collect::<Vec<_>>(),
            "resolveAttachments": s.resolves.iter().flatten().map(reference).collect::<Vec<_>>(),
            "preserveAttachments": s.preserve,
        });
        if let Some(depth) = &s.depth_stencil {
            v["depthStencilAttachment"] = reference(depth);
        }
        v
    }).collect();
    let dependencies: Vec<Value> = rp
        .dependencies
        .iter()
        .map(|d| {
            json!({
                "srcSubpass": d.src_subpass, "dstSubpass": d.dst_subpass,
                "srcStageMask": d.src_stage_mask, "dstStageMask": d.dst_stage_mask,
                "srcAccessMask": d.src_access_mask, "dstAccessMask": d.dst_access_mask,
                "dependencyFlags": d.flags, "viewOffset": d.view_offset,
            })
        })
        .collect();
    let mut v = json!({
        "flags": rp.flags, "attachments": attachments, "subpasses": subpasses,
        "dependencies": dependencies,
    });
    let kind = if rp.version == 2 {
        v["correlatedViewMasks"] = json!(rp.correlated_view_masks);
        "renderPasses2"
    } else {
        "renderPasses"
    };
    document(kind, object_hash(digest), v)
}
