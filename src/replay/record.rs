//! The record: the create info of every pipeline a title compiled, driver-independent, as a
//! Fossilize database (`<title>/record.foz`, the format [`super::foz`] reads), so that a new
//! driver's store can be rebuilt from it (`pipekeep rebuild`) without the application.
//!
//! Each pipeline is written with every object it names (shader module with its SPIR-V, pipeline
//! layout, set layouts, immutable samplers), each object once (Fossilize keys objects by hash:
//! here the first 8 bytes of the object's content digest, so equal content is one object). The
//! objects come from what the layer's keys already captured: a pipeline is recorded exactly as
//! it was keyed, and replaying it gives the same key on the same device (the record keeps the
//! device's state too: [`DEVICE_KEY`]). Compute and graphics pipelines are recorded.
//!
//! Appending is crash-safe as the database format makes it: an entry cut short by a stopped
//! process is ignored by readers (and the next append goes after it, as Fossilize's own writer
//! does); a torn middle fails its CRC. Writers of several processes take `flock` on the file.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use base64::Engine;
use serde_json::{json, Map, Value};

use super::objects::{
    TAG_APPLICATION, TAG_COMPUTE, TAG_GRAPHICS, TAG_LINK, TAG_PIPELINE_LAYOUT, TAG_RENDER_PASS,
    TAG_SAMPLER, TAG_SET_LAYOUT, TAG_SHADER_MODULE,
};
use crate::key::desc::{
    ComputeDesc, GraphicsDesc, PipelineLayoutDesc, RenderPassDesc, RenderTarget, Robustness,
    SamplerDesc, SetLayoutDesc, StageDesc,
};
use crate::key::{Digest, PipelineKey};
use crate::sync::Unpoisoned;

/// The record's file name in a title's directory.
pub const FILE_NAME: &str = crate::store::RECORD_FILE;
/// Beside the record: some recorded pipelines have no entry yet (write-behind left them to a
/// background rebuild, or a rebuild after a driver change has not reached its end). The next
/// run's background rebuild takes them; the record is not compacted meanwhile.
pub const PENDING_FILE_NAME: &str = "record.pending";

/// A database entry to write: its tag, hash and payload.
pub type DbEntry = (u32, u64, Vec<u8>);

/// What the record needs of an object, kept by its content digest.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Module(Vec<u32>),
    Sampler(SamplerDesc),
    SetLayout(SetLayoutDesc),
    PipelineLayout(PipelineLayoutDesc),
    RenderPass(RenderPassDesc),
}

/// The application's `VkApplicationInfo` as it gave it at `vkCreateInstance` (no
/// `pApplicationInfo`: no names, versions 0, `apiVersion` 1.0, as the layer reads it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ApplicationInfo {
    pub name: Option<String>,
    pub version: u32,
    pub engine_name: Option<String>,
    pub engine_version: u32,
    pub api_version: u32,
}

/// One device configuration of a title: the application and device the pipelines were made for,
/// what a replay needs to make an instance and a device that key them alike. Each is one
/// application entry of the record (its hash: [`configuration_hash`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppState {
    pub application: ApplicationInfo,
    pub robust_buffer_access: bool,
    /// `VK_EXT_robustness2`'s features, where the device enabled the structure:
    /// robustBufferAccess2, robustImageAccess2, nullDescriptor.
    pub robustness2: Option<[bool; 3]>,
    pub robust_image_access: bool,
    /// `VK_EXT_mesh_shader`'s features, where enabled: whether task shaders are.
    pub mesh_task_shader: Option<bool>,
    /// Everything the device was made with that enters the key (extensions, every feature
    /// structure as its `VkBool32`s, `pEnabledFeatures`, the `sType` of each structure the layer
    /// does not know): a replay that reads it makes its device exactly so, and keys its pipelines
    /// as the application did (one with a structure the layer does not know it cannot make).
    pub device: Option<crate::key::desc::DeviceState>,
}

impl AppState {
    /// What a device's create info enabled, from the feature structures its key read (each by
    /// `sType`, as its `VkBool32`s), for the application named `name`.
    pub fn from_device(name: Option<String>, state: &crate::key::desc::DeviceState) -> AppState {
        let features = |stype: i32| {
            state
                .features
                .iter()
                .find(|(s, _)| *s == stype)
                .map(|(_, f)| f.clone())
        };
        let on = |f: &[u32], i: usize| f.get(i).is_some_and(|b| *b != 0);
        let core = state
            .core_features
            .clone()
            .or_else(|| features(1_000_059_000));
        // In an order of its own (as the key's digest reads it): a configuration is one entry
        // however the application ordered its chain.
        let mut device = state.clone();
        device.extensions.sort();
        device.extensions.dedup();
        device.features.sort_by_key(|(stype, _)| *stype);
        device.unknown.sort_unstable();
        AppState {
            application: ApplicationInfo {
                name,
                ..ApplicationInfo::default()
            },
            robust_buffer_access: core.as_deref().is_some_and(|f| on(f, 0)),
            robustness2: features(1_000_286_000).map(|f| [on(&f, 0), on(&f, 1), on(&f, 2)]),
            robust_image_access: features(1_000_335_000).is_some_and(|f| on(&f, 0))
                || features(53).is_some_and(|f| on(&f, 0)),
            mesh_task_shader: features(1_000_328_000).map(|f| on(&f, 0)),
            device: Some(device),
        }
    }
}

/// A pipeline as its key captured it.
#[derive(Debug, Clone)]
pub enum Recorded {
    Compute(ComputeDesc),
    Graphics(Box<GraphicsDesc>),
}

impl Recorded {
    /// The pipeline layout's digest.
    pub fn layout(&self) -> &Digest {
        match self {
            Recorded::Compute(d) => &d.layout,
            Recorded::Graphics(d) => &d.layout,
        }
    }

    /// The digests of every object the pipeline names directly (modules, layout, render pass).
    pub fn names(&self) -> Vec<Digest> {
        match self {
            Recorded::Compute(d) => vec![d.stage.module, d.layout],
            Recorded::Graphics(d) => {
                let mut out: Vec<Digest> = d.stages.iter().map(|s| s.module).collect();
                out.push(d.layout);
                if let RenderTarget::Pass { pass, .. } = &d.target {
                    out.push(*pass);
                }
                out
            }
        }
    }
}

/// A compiled pipeline to record, with the content of every object it names.
#[derive(Debug, Clone)]
pub struct PipelineRecord {
    pub key: PipelineKey,
    pub desc: Recorded,
    pub contents: Vec<(Digest, Arc<Content>)>,
}

/// Why a pipeline is not recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotRecorded {
    #[error("the content of an object it names is not known")]
    MissingContent,
    #[error("it holds state the record cannot write: {0}")]
    Unwritable(&'static str),
}

/// The hash a database names an object by.
pub fn object_hash(d: &Digest) -> u64 {
    u64::from_le_bytes(d.0[..8].try_into().expect("8 bytes"))
}

fn hash_ref(d: &Digest) -> String {
    format!("{:016x}", object_hash(d))
}

fn document(kind: &str, hash: u64, value: Value) -> Vec<u8> {
    let mut objects = Map::new();
    objects.insert(format!("{hash:016x}"), value);
    serde_json::to_vec(&json!({ "version": 6, kind: objects })).expect("JSON of plain values")
}

/// The database entries of one pipeline and its objects: `(tag, hash, payload)`.
pub fn pipeline_entries(
    record: &PipelineRecord,
    app: &AppState,
) -> Result<Vec<DbEntry>, NotRecorded> {
    let content = |digest: &Digest| {
        record
            .contents
            .iter()
            .find(|(d, _)| d == digest)
            .map(|(_, c)| Arc::clone(c))
            .ok_or(NotRecorded::MissingContent)
    };
    let app_payload = application(app);
    let app_hash = payload_hash(&app_payload);
    let mut out = vec![(TAG_APPLICATION, app_hash, app_payload)];
    let (layout_digest, stages) = match &record.desc {
        Recorded::Compute(d) => (d.layout, std::slice::from_ref(&d.stage)),
        Recorded::Graphics(d) => (d.layout, &d.stages[..]),
    };
    let Content::PipelineLayout(layout) = &*content(&layout_digest)? else {
        return Err(NotRecorded::MissingContent);
    };
    for set in &layout.set_layouts {
        let Content::SetLayout(set_layout) = &*content(set)? else {
            return Err(NotRecorded::MissingContent);
        };
        for binding in &set_layout.bindings {
            for sampler in binding.immutable_samplers.iter().flatten() {
                let Content::Sampler(s) = &*content(sampler)? else {
                    return Err(NotRecorded::MissingContent);
                };
                out.push((TAG_SAMPLER, object_hash(sampler), sampler_doc(sampler, s)?));
            }
        }
        out.push((
            TAG_SET_LAYOUT,
            object_hash(set),
            set_layout_doc(set, set_layout),
        ));
    }
    out.push((
        TAG_PIPELINE_LAYOUT,
        object_hash(&layout_digest),
        pipeline_layout_doc(&layout_digest, layout),
    ));
    for stage in stages {
        let Content::Module(code) = &*content(&stage.module)? else {
            return Err(NotRecorded::MissingContent);
        };
        out.push((
            TAG_SHADER_MODULE,
            object_hash(&stage.module),
            module_doc(&stage.module, code),
        ));
    }
    let hash = pipeline_hash(&record.key);
    match &record.desc {
        Recorded::Compute(d) => out.push((TAG_COMPUTE, hash, compute_doc(hash, d)?)),
        Recorded::Graphics(d) => {
            if let RenderTarget::Pass { pass, .. } = &d.target {
                let Content::RenderPass(rp) = &*content(pass)? else {
                    return Err(NotRecorded::MissingContent);
                };
                out.push((
                    TAG_RENDER_PASS,
                    object_hash(pass),
                    render_pass_doc(pass, rp),
                ));
            }
            out.push((TAG_GRAPHICS, hash, graphics_doc(hash, d)?));
        }
    }
    // The pipeline under its configuration, as Fossilize links a blob to its application.
    let tag = match &record.desc {
        Recorded::Compute(_) => TAG_COMPUTE,
        Recorded::Graphics(_) => TAG_GRAPHICS,
    };
    out.push((
        TAG_LINK,
        link_hash(app_hash, tag, hash),
        link_doc(app_hash, tag, hash),
    ));
    Ok(out)
}

/// The hash of a configuration's application entry: from its content (the entry's bytes), so
/// that each configuration is one entry, whichever process writes it.
pub fn configuration_hash(app: &AppState) -> u64 {
    payload_hash(&application(app))
}

fn payload_hash(payload: &[u8]) -> u64 {
    let digest = blake3::hash(payload);
    u64::from_le_bytes(digest.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// The hash Fossilize names an application-blob link by (`compute_hash_application_info_link`:
/// its FNV-1a-style `Hasher` over the application's hash, the blob's tag and hash), so that its
/// tools find the link where they compute it.
pub fn link_hash(application: u64, tag: u32, hash: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut word = |v: u32| h = h.wrapping_mul(0x0000_0100_0000_01b3) ^ u64::from(v);
    word(application as u32);
    word((application >> 32) as u32);
    word(tag);
    word(hash as u32);
    word((hash >> 32) as u32);
    h
}

/// An application-blob link as Fossilize writes it: the blob `tag`/`hash` was made under the
/// application entry `application`.
fn link_doc(application: u64, tag: u32, hash: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "version": 6,
        "link": {
            "application": format!("{application:016x}"), "tag": tag,
            "hash": format!("{hash:016x}"),
        },
    }))
    .expect("JSON of plain values")
}

/// The hash a database names a pipeline by: from its key.
pub fn pipeline_hash(key: &PipelineKey) -> u64 {
    let half = |b: &[u8; 16]| u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    half(&key.spirv) ^ half(&key.state).rotate_left(1)
}

fn application(app: &AppState) -> Vec<u8> {
    let mut info = Map::new();
    let a = &app.application;
    if let Some(name) = &a.name {
        info.insert("applicationName".into(), json!(name));
    }
    if let Some(name) = &a.engine_name {
        info.insert("engineName".into(), json!(name));
    }
    info.insert("applicationVersion".into(), json!(a.version));
    info.insert("engineVersion".into(), json!(a.engine_version));
    info.insert("apiVersion".into(), json!(a.api_version));
    let mut next = Vec::new();
    if let Some([buffer, image, null]) = app.robustness2 {
        next.push(json!({
            "sType": 1_000_286_000, "robustBufferAccess2": u32::from(buffer),
            "robustImageAccess2": u32::from(image), "nullDescriptor": u32::from(null),
        }));
    }
    if app.robust_image_access {
        next.push(json!({ "sType": 1_000_335_000, "robustImageAccess": 1 }));
    }
    if let Some(task) = app.mesh_task_shader {
        next.push(
            json!({ "sType": 1_000_328_000, "meshShader": 1, "taskShader": u32::from(task) }),
        );
    }
    let mut doc = json!({
        "version": 6,
        "applicationInfo": info,
        "physicalDeviceFeatures": {
            "robustBufferAccess": u32::from(app.robust_buffer_access), "pNext": next,
        },
    });
    if let Some(device) = &app.device {
        doc[DEVICE_KEY] = device_json(device);
    }
    // The process's pointer size enters every key: a 32-bit build's configuration is its own.
    doc[ABI_KEY] = json!(crate::store::identity::HOST_ABI);
    serde_json::to_vec(&doc).expect("JSON of plain values")
}

/// The application-info member (pipekeep's own) that says the driver ABI (the pointer size, 4 or
/// 8) of the process that recorded the configuration; a record without it is a 64-bit one's.
pub const ABI_KEY: &str = "pipekeepAbi";

/// The application-info member (pipekeep's own; Fossilize's readers pass over it) that holds the
/// device's state whole.
pub const DEVICE_KEY: &str = "pipekeepDevice";

fn device_json(d: &crate::key::desc::DeviceState) -> Value {
    let extensions: Vec<String> = d
        .extensions
        .iter()
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect();
    let features: Vec<Value> = d
        .features
        .iter()
        .map(|(stype, values)| json!({ "sType": stype, "values": values }))
        .collect();
    let mut v =
        json!({ "extensions": extensions, "features": features, "coreFeatures": d.core_features });
    if !d.unknown.is_empty() {
        v["unknown"] = json!(d.unknown);
    }
    v
}

/// A device's state as a record holds it (the member [`DEVICE_KEY`]).
/// Whether `count` `VkBool32`s are exactly what a feature structure of `stype` holds: the
/// rebuild makes each structure from them for the driver to read (and to write, when it asks what
/// the device offers), so a damaged or foreign record must never size one shorter.
fn as_long_as_its_structure(stype: i32, count: usize) -> bool {
    /// `VkPhysicalDevicePipelineBinaryFeaturesKHR`, which ash predates: one `VkBool32`.
    const PIPELINE_BINARY_FEATURES: i32 = 1_000_483_000;
    match crate::key::features::known(ash::vk::StructureType::from_raw(stype)) {
        Some(row) => row.bools == count,
        None => stype == PIPELINE_BINARY_FEATURES && count == 1,
    }
}

pub fn device_from_json(v: &Value) -> Option<crate::key::desc::DeviceState> {
    let u32s = |v: &Value| -> Option<Vec<u32>> {
        v.as_array()?
            .iter()
            .map(|x| x.as_u64().map(|n| n as u32))
            .collect()
    };
    Some(crate::key::desc::DeviceState {
        extensions: v["extensions"]
            .as_array()?
            .iter()
            .map(|e| e.as_str().map(|s| s.as_bytes().to_vec()))
            .collect::<Option<_>>()?,
        features: v["features"]
            .as_array()?
            .iter()
            .map(|f| Some((f["sType"].as_i64()? as i32, u32s(&f["values"])?)))
            .map(|f| f.filter(|(stype, values)| as_long_as_its_structure(*stype, values.len())))
            .collect::<Option<_>>()?,
        core_features: match &v["coreFeatures"] {
            Value::Null => None,
            other => Some(u32s(other).filter(|c| c.len() == crate::key::features::CORE_FEATURES)?),
        },
        unknown: match &v["unknown"] {
            Value::Null => Vec::new(),
            other => other
                .as_array()?
                .iter()
                .map(|s| s.as_i64().map(|s| s as i32))
                .collect::<Option<_>>()?,
        },
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

/// The `sType`s of the structures the record writes in `pNext` arrays (as Fossilize writes
/// them) and the replay chains again, from the registry.
pub mod stype {
    use ash::vk::StructureType as S;

    pub const REDUCTION_MODE: i32 = S::SAMPLER_REDUCTION_MODE_CREATE_INFO.as_raw();
    pub const BINDING_FLAGS: i32 = S::DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO.as_raw();
    pub const REQUIRED_SUBGROUP_SIZE: i32 =
        S::PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO.as_raw();
    pub const RENDERING: i32 = S::PIPELINE_RENDERING_CREATE_INFO.as_raw();
    pub const PIPELINE_ROBUSTNESS: i32 = S::PIPELINE_ROBUSTNESS_CREATE_INFO_EXT.as_raw();
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
    let sets: Vec<String> = l.set_layouts.iter().map(hash_ref).collect();
    let ranges: Vec<Value> = l
        .push_constant_ranges
        .iter()
        .map(|r| json!({ "stageFlags": r.stage_flags, "offset": r.offset, "size": r.size }))
        .collect();
    document(
        "pipelineLayouts",
        object_hash(digest),
        json!({ "flags": l.flags, "setLayouts": sets, "pushConstantRanges": ranges }),
    )
}

fn module_doc(digest: &Digest, code: &[u32]) -> Vec<u8> {
    let varints = super::varint::encode(code);
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
    let mut v = json!({
        "flags": d.flags, "stages": stages, "layout": hash_ref(&d.layout),
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
    v["rasterizationState"] = json!({
        "flags": r.flags, "depthClampEnable": b(r.depth_clamp_enable),
        "rasterizerDiscardEnable": b(r.rasterizer_discard_enable.unwrap_or(false)),
        "polygonMode": r.polygon_mode, "cullMode": r.cull_mode.unwrap_or(0),
        "frontFace": r.front_face.unwrap_or(0),
        "depthBiasEnable": b(r.depth_bias_enable.unwrap_or(false)),
        "depthBiasConstantFactor": bias_constant, "depthBiasClamp": bias_clamp,
        "depthBiasSlopeFactor": bias_slope, "lineWidth": r.line_width.unwrap_or(1.0),
    });
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
            v["renderPass"] = json!(hash_ref(pass));
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
    if !next.is_empty() {
        v["pNext"] = Value::Array(next);
    }
    Ok(document("graphicsPipelines", hash, v))
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

/// A title's record file: appended to by the layer's writer thread, each object once.
#[derive(Debug)]
pub struct RecordFile {
    path: PathBuf,
    held: Mutex<Held>,
    /// Pipelines this process owes entries (write-behind) whose append has not landed yet.
    owed_in_flight: std::sync::atomic::AtomicU64,
}

/// What this process knows the file holds: every `(tag, hash)` in the first `len` bytes of the
/// file `inode` (a compaction renames another file over the record: all is read again).
#[derive(Debug, Default)]
struct Held {
    known: HashSet<(u32, u64)>,
    len: u64,
    inode: (u64, u64),
}

/// What a compaction of the record did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    pub pipelines_before: usize,
    pub pipelines_kept: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

impl RecordFile {
    pub fn new(title_dir: &Path) -> RecordFile {
        RecordFile {
            path: title_dir.join(FILE_NAME),
            held: Mutex::default(),
            owed_in_flight: Default::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn pending_path(&self) -> PathBuf {
        self.path.with_file_name(PENDING_FILE_NAME)
    }

    /// Whether recorded pipelines wait for their entries (see [`PENDING_FILE_NAME`]).
    pub fn is_pending(&self) -> bool {
        self.pending_path().is_file()
    }

    /// Marks the record as holding pipelines without entries, under its lock (so that
    /// [`RecordFile::clear_pending_unless_grown`] never removes a mark it did not see).
    pub fn mark_pending(&self) -> io::Result<()> {
        let _held = self.held.locked();
        // The first pipeline of a title may come before anything made its directory.
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = self.open_locked(true)?.expect("created");
        let _lock = Flock(&file);
        self.write_pending_mark()
    }

    /// A pipeline whose entry is left to a later rebuild (write-behind) is about to be queued
    /// for the record: the record is marked so now, and no rebuild removes the mark until its
    /// append (`append(.., 1)`) has landed.
    pub fn owe(&self) -> io::Result<()> {
        self.owed_in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.is_pending() {
            return Ok(());
        }
        self.mark_pending()
    }

    /// How many owed pipelines' appends have not landed yet.
    pub fn owed_in_flight(&self) -> u64 {
        self.owed_in_flight
            .load(std::sync::atomic::Ordering::Acquire)
    }

    fn write_pending_mark(&self) -> io::Result<()> {
        let marker = self.pending_path();
        if marker.is_file() {
            return Ok(());
        }
        std::fs::write(&marker, b"recorded pipelines wait for their entries\n")
    }

    /// Removes the pending mark after a rebuild went through every pipeline of the record as it
    /// read it (`read_len` bytes): unless the record grew since (a pipeline appended after that
    /// reading may be one without an entry). Whether it was removed.
    pub fn clear_pending_unless_grown(&self, read_len: u64) -> io::Result<bool> {
        let _held = self.held.locked();
        let Some(file) = self.open_locked(false)? else {
            return Ok(false);
        };
        let _lock = Flock(&file);
        let owed = || {
            self.owed_in_flight
                .load(std::sync::atomic::Ordering::SeqCst)
        };
        if owed() > 0 || file.metadata()?.len() != read_len {
            return Ok(false);
        }
        match std::fs::remove_file(self.pending_path()) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        }
        // An owe between the check and the removal saw the mark and did not write it: it is
        // written again (appends wait for the lock held here, so only owes can come between).
        if owed() > 0 {
            self.write_pending_mark()?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Appends the entries the file does not hold yet. Returns how many were written. What
    /// another process appended since this one last looked is read first (only that part).
    /// `owed`: of how many pipelines [`RecordFile::owe`] announced they are, which have landed
    /// once this returns (written or not).
    pub fn append(&self, entries: Vec<DbEntry>, owed: u64) -> io::Result<usize> {
        let appended = if entries.is_empty() {
            Ok(0)
        } else {
            self.append_new(entries)
        };
        if owed > 0 {
            self.owed_in_flight
                .fetch_sub(owed, std::sync::atomic::Ordering::SeqCst);
        }
        appended
    }

    fn append_new(&self, entries: Vec<DbEntry>) -> io::Result<usize> {
        let mut held = self.held.locked();
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = self.open_locked(true)?.expect("created");
        let _lock = Flock(&file);
        catch_up(&file, &mut held)?;
        let new: Vec<_> = entries
            .into_iter()
            .filter(|(tag, hash, _)| held.known.insert((*tag, *hash)))
            .collect();
        if new.is_empty() {
            return Ok(0);
        }
        let mut bytes = super::foz::write_entries_deflated(&new);
        if held.len > 0 {
            bytes.drain(..HEADER_LEN); // the header is there already
        }
        let mut writing = &file;
        writing.seek(SeekFrom::Start(held.len))?;
        writing.write_all(&bytes)?;
        held.len += bytes.len() as u64;
        Ok(new.len())
    }

    /// The record opened and locked (`flock`, exclusive; released by dropping a [`Flock`] of
    /// it), the file its path names once the lock is held: one a compaction renamed away while
    /// this waited is let go and the new one opened. `None` where there is no record and
    /// `create` is false.
    fn open_locked(&self, create: bool) -> io::Result<Option<File>> {
        loop {
            let opened = OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&self.path);
            let file = match opened {
                Ok(f) => f,
                Err(e) if !create && e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            let lock = Flock::exclusive(&file)?;
            let ours = inode_of(&file.metadata()?);
            let still_named =
                std::fs::symlink_metadata(&self.path).is_ok_and(|now| inode_of(&now) == ours);
            if still_named {
                std::mem::forget(lock); // the caller's Flock releases it
                return Ok(Some(file));
            }
        }
    }

    /// Brings the record within its share of the title's bound (`share` bytes, see
    /// `store::bound::record_share`), through a temporary file and a rename, when it has grown
    /// past it: pipelines go in the entries' order of use ([`within_share`]; `used`: the stamp of
    /// a pipeline's newest entry, `None` where it has none), with their links and the objects
    /// only they name. `rewrite_damaged`: also rewrites a record within its share that holds
    /// damaged entries, without them (`pipekeep verify --fix`). A record within its share is
    /// kept whole whatever became of its entries (removed by hand, `pipekeep clear`, a driver
    /// change): only the bound drops a recorded pipeline. For an opening of a store (and the
    /// command), before this process appends (a pipeline appended by this process and not yet
    /// written as an entry has no stamp yet): once it has appended, nothing is done. Never while
    /// recorded pipelines wait for their entries ([`PENDING_FILE_NAME`]), nor after a driver
    /// change (the caller's part).
    pub fn compact_to_share(
        &self,
        share: u64,
        rewrite_damaged: bool,
        used: &dyn Fn(u64) -> Option<SystemTime>,
    ) -> io::Result<Option<Compacted>> {
        let mut held = self.held.locked();
        if held.len > 0 {
            return Ok(None);
        }
        let Some(file) = self.open_locked(false)? else {
            return Ok(None);
        };
        let _lock = Flock(&file);
        if self.is_pending() {
            return Ok(None);
        }
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut &file, &mut bytes)?;
        let entries = entries_in(&bytes)?;
        let damaged = entries.iter().any(|e| e.payload.is_err());
        if bytes.len() as u64 <= share && !(rewrite_damaged && damaged) {
            return Ok(None);
        }
        let is_pipeline = |tag: u32| tag == TAG_COMPUTE || tag == TAG_GRAPHICS;
        let pipelines_before = entries
            .iter()
            .filter(|e| is_pipeline(e.tag) && e.payload.is_ok())
            .count();
        let kept = within_share(entries, share, used);
        let pipelines_kept = kept.iter().filter(|(tag, _, _)| is_pipeline(*tag)).count();
        if pipelines_kept == pipelines_before && !damaged {
            // Past its share with no pipeline to drop (its configurations alone): as it is.
            return Ok(None);
        }
        let out = super::foz::write_entries_deflated(&kept);
        let written = crate::store::files::write_atomically(&self.path, &out, SystemTime::now())
            .map_err(|e| io::Error::other(e.to_string()))?;
        // Renamed over (or another process is compacting it now): what this process knew of
        // the file is stale either way.
        *held = Held::default();
        Ok(match written {
            crate::store::files::Written::Whole(n) => Some(Compacted {
                pipelines_before,
                pipelines_kept,
                bytes_before: bytes.len() as u64,
                bytes_after: n,
            }),
            crate::store::files::Written::Skipped => None,
        })
    }
}

/// The stamp of each recorded pipeline's newest entry (by its database hash), from a listing of
/// a title's entries and pieces: the order of use a compaction keeps ([`within_share`]).
pub fn stamps_of(
    listed: &[crate::store::bound::StampedEntry],
) -> std::collections::HashMap<u64, SystemTime> {
    let mut out: std::collections::HashMap<u64, SystemTime> = Default::default();
    for e in listed {
        if let Some(key) = e.key() {
            let at = out.entry(pipeline_hash(&key)).or_insert(e.stamp);
            *at = (*at).max(e.stamp);
        }
    }
    out
}

/// What a whole entry of the record is to a compaction.
enum Part {
    /// A configuration: always kept.
    Application,
    /// A pipeline, with the names in its JSON.
    Pipeline(u64, Vec<u64>),
    /// A link to the pipeline it names (`None`: unreadable, dropped).
    Link(Option<u64>),
    /// An object, with the names in its JSON (none for a module).
    Object(Vec<u64>),
}

/// A record's whole entries, each with what it is to a compaction, read once.
struct Parts {
    whole: Vec<DbEntry>,
    parts: Vec<Part>,
    /// Entry indices from the highest tag down: names point to objects of a lower tag only,
    /// so one pass from the pipelines down finds every object a kept entry names.
    by_tag: Vec<usize>,
}

impl Parts {
    /// Damaged entries are left out.
    fn of(entries: Vec<super::foz::Entry>) -> Parts {
        let whole: Vec<DbEntry> = entries
            .into_iter()
            .filter_map(|e| Some((e.tag, e.hash, e.payload.ok()?)))
            .collect();
        let names_in = |payload: &[u8]| -> Vec<u64> {
            let mut names = HashSet::new();
            let json_part = payload.split(|b| *b == 0).next().unwrap_or_default();
            if let Ok(doc) = serde_json::from_slice::<Value>(json_part) {
                collect_names(&doc, &mut names);
            }
            names.into_iter().collect()
        };
        let parts = whole
            .iter()
            .map(|(tag, hash, payload)| match *tag {
                TAG_APPLICATION => Part::Application,
                TAG_COMPUTE | TAG_GRAPHICS => Part::Pipeline(*hash, names_in(payload)),
                TAG_LINK => Part::Link(linked_pipeline(payload).map(|(_, _, p)| p)),
                TAG_SHADER_MODULE => Part::Object(Vec::new()),
                _ => Part::Object(names_in(payload)),
            })
            .collect();
        let mut by_tag: Vec<usize> = (0..whole.len()).collect();
        by_tag.sort_by_key(|i| std::cmp::Reverse(whole[*i].0));
        Parts {
            whole,
            parts,
            by_tag,
        }
    }

    /// Which entries a record keeping the pipelines `keep` says keeps: every application entry,
    /// those pipelines, their links, and every object a kept entry names, as far down as names
    /// go (a pipeline names its modules, layout and render pass; a layout its set layouts; a set
    /// layout its samplers). A name is any 16-hex-digit string in an object's JSON: one that is
    /// not a name keeps nothing it should not (it would have to equal another object's hash).
    fn kept(&self, keep: &dyn Fn(u64) -> bool) -> Vec<bool> {
        let mut named: HashSet<u64> = HashSet::new();
        let mut kept = vec![false; self.whole.len()];
        for &i in &self.by_tag {
            let (keep_it, names): (bool, &[u64]) = match &self.parts[i] {
                Part::Application => (true, &[]),
                Part::Pipeline(h, names) => (keep(*h), names),
                // A link goes with the pipeline it links.
                Part::Link(p) => (p.is_some_and(keep), &[]),
                Part::Object(names) => (named.contains(&self.whole[i].1), names),
            };
            kept[i] = keep_it;
            if keep_it {
                named.extend(names.iter().copied());
            }
        }
        kept
    }

    /// The entries `kept` says, objects before the pipelines naming them, as the record was
    /// written.
    fn into_kept(self, kept: Vec<bool>) -> Vec<DbEntry> {
        let mut out: Vec<DbEntry> = self
            .whole
            .into_iter()
            .zip(kept)
            .filter_map(|(e, k)| k.then_some(e))
            .collect();
        out.sort_by_key(|(tag, _, _)| *tag);
        out
    }
}

/// The entries of a record of at most `share` bytes (deflated as written): the application
/// entries, the most pipelines that fit in the entries' order of use, their links, and every
/// object a kept entry names (as [`live_part`]). The order: pipelines with an entry by their
/// newest entry's stamp, newest first (a run stamps its first used newest: a boot's pipelines
/// are kept longest, as the bound keeps their entries); then those with no entry (the bound
/// evicted it first), first recorded first. Damaged entries are dropped.
pub fn within_share(
    entries: Vec<super::foz::Entry>,
    share: u64,
    used: &dyn Fn(u64) -> Option<SystemTime>,
) -> Vec<DbEntry> {
    let parts = Parts::of(entries);
    // What each entry takes in the file, as written.
    let sizes: Vec<u64> = parts
        .whole
        .iter()
        .map(|(_, _, p)| 56 + super::foz::stored_len(p) as u64)
        .collect();
    let mut order: Vec<(Option<SystemTime>, usize, u64)> = parts
        .parts
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Part::Pipeline(h, _) => Some((used(*h), i, *h)),
            _ => None,
        })
        .collect();
    order.sort_by(|a, b| match (a.0, b.0) {
        (Some(x), Some(y)) => y.cmp(&x).then(a.1.cmp(&b.1)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.1.cmp(&b.1),
    });
    let kept_with = |k: usize| -> Vec<bool> {
        let pipelines: HashSet<u64> = order[..k].iter().map(|o| o.2).collect();
        parts.kept(&|h| pipelines.contains(&h))
    };
    let bytes_of = |kept: &[bool]| -> u64 {
        HEADER_LEN as u64
            + kept
                .iter()
                .zip(&sizes)
                .filter(|(k, _)| **k)
                .map(|(_, s)| *s)
                .sum::<u64>()
    };
    // The most pipelines that fit: a record's bytes grow with the pipelines kept.
    let (mut fits, mut over) = (0, order.len() + 1);
    while over - fits > 1 {
        let k = (fits + over) / 2;
        if bytes_of(&kept_with(k)) <= share {
            fits = k;
        } else {
            over = k;
        }
    }
    let kept = kept_with(fits);
    parts.into_kept(kept)
}

fn inode_of(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

/// The entries a record keeping the pipelines `live` says keeps: every application entry, those
/// pipelines whole with their links, and every object a kept entry names, as far down as names
/// go. Damaged entries are dropped.
pub fn live_part(entries: Vec<super::foz::Entry>, live: &dyn Fn(u64) -> bool) -> Vec<DbEntry> {
    let parts = Parts::of(entries);
    let kept = parts.kept(live);
    parts.into_kept(kept)
}

/// What a link entry's payload says: `(application, tag, pipeline hash)`.
pub fn linked_pipeline(payload: &[u8]) -> Option<(u64, u32, u64)> {
    let doc: Value = serde_json::from_slice(payload).ok()?;
    let link = doc.get("link")?;
    let hex = |k: &str| u64::from_str_radix(link.get(k)?.as_str()?, 16).ok();
    Some((
        hex("application")?,
        u32::try_from(link.get("tag")?.as_u64()?).ok()?,
        hex("hash")?,
    ))
}

fn collect_names(v: &Value, into: &mut HashSet<u64>) {
    match v {
        Value::String(s) if s.len() == 16 => {
            if let Ok(h) = u64::from_str_radix(s, 16) {
                into.insert(h);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_names(i, into)),
        Value::Object(members) => members.values().for_each(|m| collect_names(m, into)),
        _ => {}
    }
}

const HEADER_LEN: usize = super::foz::MAGIC.len() + 4;

/// A title's record as its file holds it now: its entries (a cut last one left out, a damaged
/// one named), and the file's length.
pub fn read(path: &Path) -> io::Result<(Vec<super::foz::Entry>, u64)> {
    let bytes = std::fs::read(path)?;
    Ok((entries_in(&bytes)?, bytes.len() as u64))
}

/// The entries of a record's bytes. Bytes shorter than a header hold nothing whole yet: a first
/// append on its way (the record is made, empty, under its lock before its first append, and
/// [`RecordFile::mark_pending`] makes it so too), or one a process stopped inside, which the next
/// append starts again ([`catch_up`]).
fn entries_in(bytes: &[u8]) -> io::Result<Vec<super::foz::Entry>> {
    if bytes.len() < HEADER_LEN {
        return Ok(Vec::new());
    }
    super::foz::read_entries(bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

/// Reads what the file holds past what `held` knows (all of it where the file is shorter than
/// that: replaced), and drops a cut last entry so that the next one appends after whole ones.
fn catch_up(file: &File, held: &mut Held) -> io::Result<()> {
    let meta = file.metadata()?;
    let len = meta.len();
    if inode_of(&meta) != held.inode || len < held.len {
        *held = Held {
            inode: inode_of(&meta),
            ..Held::default()
        };
    }
    if len == held.len {
        return Ok(());
    }
    let from = held.len;
    let mut reading = file;
    reading.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::new();
    io::Read::read_to_end(&mut reading, &mut tail)?;
    let bytes = if from == 0 {
        tail
    } else {
        let mut with_header = super::foz::write_entries(&[]);
        with_header.extend_from_slice(&tail);
        with_header
    };
    if bytes.len() < HEADER_LEN {
        // A header cut short: nothing whole yet.
        file.set_len(0)?;
        held.known.clear();
        held.len = 0;
        return Ok(());
    }
    // Damage inside the file costs its own entries (the reader skips to the next whole one):
    // only what follows the last whole entry (a cut append) is cut off.
    let (entries, whole) = super::foz::read_database(&bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    // A damaged entry is not known: the next append of its object writes it whole again.
    held.known.extend(
        entries
            .iter()
            .filter(|e| e.payload.is_ok())
            .map(|e| (e.tag, e.hash)),
    );
    let end = if from == 0 {
        whole as u64
    } else {
        from + (whole - HEADER_LEN) as u64
    };
    if end < len {
        file.set_len(end)?;
    }
    held.len = end;
    Ok(())
}

/// An exclusive `flock` held until dropped.
struct Flock<'a>(&'a File);

impl<'a> Flock<'a> {
    fn exclusive(file: &'a File) -> io::Result<Flock<'a>> {
        rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(Flock(file))
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(self.0, rustix::fs::FlockOperation::Unlock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::desc::{BindingDesc, PushRange, SpecConstant};
    use crate::replay::objects::Catalog;

    fn record() -> PipelineRecord {
        let (module, set, layout) = (Digest([1; 32]), Digest([2; 32]), Digest([3; 32]));
        PipelineRecord {
            key: PipelineKey {
                spirv: [4; 16],
                state: [5; 16],
            },
            desc: Recorded::Compute(ComputeDesc {
                device: Digest([9; 32]),
                flags: 0,
                stage: StageDesc {
                    stage: 0x20,
                    flags: 0,
                    module,
                    entry_point: b"main".to_vec(),
                    specialization: vec![SpecConstant {
                        constant_id: 3,
                        value: vec![1, 0, 0, 0],
                    }],
                    required_subgroup_size: None,
                    robustness: None,
                },
                layout,
                robustness: None,
            }),
            contents: vec![
                (
                    module,
                    Arc::new(Content::Module(vec![0x0723_0203, 0x10000, 7, 8, 9])),
                ),
                (
                    set,
                    Arc::new(Content::SetLayout(SetLayoutDesc {
                        flags: 0,
                        bindings: vec![BindingDesc {
                            binding: 0,
                            descriptor_type: 7,
                            descriptor_count: 1,
                            stage_flags: 0x20,
                            binding_flags: 0,
                            immutable_samplers: None,
                        }],
                    })),
                ),
                (
                    layout,
                    Arc::new(Content::PipelineLayout(PipelineLayoutDesc {
                        flags: 0,
                        set_layouts: vec![set],
                        push_constant_ranges: vec![PushRange {
                            stage_flags: 0x20,
                            offset: 0,
                            size: 16,
                        }],
                    })),
                ),
            ],
        }
    }

    #[test]
    fn a_recorded_pipeline_reads_back_with_every_object_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = RecordFile::new(dir.path());
        let app = AppState::default();
        let entries = pipeline_entries(&record(), &app).unwrap();
        assert_eq!(file.append(entries.clone(), 0).unwrap(), entries.len());
        assert_eq!(file.append(entries, 0).unwrap(), 0, "each object once");
        let catalog = catalog_of(file.path());
        assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
        assert_eq!(catalog.compute.len(), 1);
        assert_eq!(catalog.set_layouts.len(), 1);
        assert_eq!(catalog.pipeline_layouts.len(), 1);
        assert_eq!(
            catalog.shader_modules.values().next().unwrap().as_deref(),
            Some(&[0x0723_0203, 0x10000, 7, 8, 9][..])
        );
        let pipeline = catalog.compute[0].1.as_ref().unwrap();
        assert_eq!(
            pipeline["stage"]["specializationInfo"]["mapEntries"][0]["size"],
            4
        );
    }

    #[test]
    fn a_record_cut_inside_its_last_entry_keeps_what_is_whole_and_appends_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = RecordFile::new(dir.path());
        let entries = pipeline_entries(&record(), &AppState::default()).unwrap();
        file.append(entries.clone(), 0).unwrap();
        let whole = std::fs::read(file.path()).unwrap();
        let last_len = whole.len()
            - crate::replay::foz::read_database(&whole[..whole.len() - 1])
                .unwrap()
                .1;
        for cut in 1..last_len {
            let bytes = &whole[..whole.len() - cut];
            let read = crate::replay::foz::read_entries(bytes).unwrap();
            assert_eq!(read.len(), entries.len() - 1, "cut {cut} bytes off");
        }
        std::fs::write(file.path(), &whole[..whole.len() - 7]).unwrap();
        let again = RecordFile::new(dir.path());
        assert_eq!(
            again.append(entries.clone(), 0).unwrap(),
            1,
            "the cut one again"
        );
        let read = crate::replay::foz::read_entries(&std::fs::read(file.path()).unwrap()).unwrap();
        assert_eq!(read.len(), entries.len());
    }

    #[test]
    fn a_record_made_but_not_yet_written_reads_as_empty_and_the_next_append_fills_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = RecordFile::new(dir.path());
        // What a pending mark leaves before the first append lands, and a header cut short.
        file.mark_pending().unwrap();
        assert_eq!(read(file.path()).unwrap().1, 0);
        assert!(read(file.path()).unwrap().0.is_empty());
        std::fs::write(file.path(), &crate::replay::foz::MAGIC[..5]).unwrap();
        assert!(read(file.path()).unwrap().0.is_empty());
        let entries = pipeline_entries(&record(), &AppState::default()).unwrap();
        assert_eq!(file.append(entries.clone(), 0).unwrap(), entries.len());
        assert_eq!(read(file.path()).unwrap().0.len(), entries.len());
    }

    /// Issue 31, item 4: the record is at most a Fossilize database of the same pipelines, whose
    /// payloads Fossilize deflates (flag 2): so are the record's, where that makes them smaller.
    #[test]
    fn payloads_are_stored_deflated_as_fossilize_stores_them_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = RecordFile::new(dir.path());
        let mut r = record();
        // A module of the size and repetition of real SPIR-V.
        let code: Vec<u32> = (0..4000u32).map(|i| 0x0723_0203 ^ (i % 17)).collect();
        r.contents[0].1 = Arc::new(Content::Module(code.clone()));
        let entries = pipeline_entries(&r, &AppState::default()).unwrap();
        let stored = crate::replay::foz::write_entries(&entries).len() as u64;
        file.append(entries.clone(), 0).unwrap();
        let bytes = std::fs::read(file.path()).unwrap();
        assert!(
            (bytes.len() as u64) * 4 < stored,
            "{} bytes written where stored payloads take {stored}",
            bytes.len()
        );
        let read = crate::replay::foz::read_entries(&bytes).unwrap();
        let payloads: Vec<_> = read.into_iter().map(|e| e.payload.unwrap()).collect();
        let expected: Vec<_> = entries.into_iter().map(|e| e.2).collect();
        assert_eq!(payloads, expected);
        let catalog = catalog_of(file.path());
        assert_eq!(
            catalog.shader_modules.values().next().unwrap().as_deref(),
            Some(&code[..])
        );
    }

    /// Issue 31, item 3: an append after damage in the middle of the record keeps every whole
    /// entry after the damage (it cut the file at the damage: a 16-byte record), and writes again
    /// what the damage cost.
    #[test]
    fn an_append_after_damage_inside_the_record_keeps_what_follows_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = RecordFile::new(dir.path());
        let hashes = recorded(&file, 40);
        let mut bytes = std::fs::read(file.path()).unwrap();
        let len = bytes.len();
        bytes[16..216].fill(0x5a);
        std::fs::write(file.path(), &bytes).unwrap();
        let again = RecordFile::new(dir.path());
        again
            .append(
                pipeline_entries(&nth_record(0), &AppState::default()).unwrap(),
                0,
            )
            .unwrap();
        assert!(std::fs::metadata(file.path()).unwrap().len() as usize >= len);
        let catalog = catalog_of(file.path());
        let kept: HashSet<u64> = catalog.compute.iter().map(|(h, _)| *h).collect();
        assert!(
            hashes.iter().filter(|h| kept.contains(h)).count() >= 36,
            "{} of 40 pipelines left",
            kept.len()
        );
        assert!(kept.contains(&hashes[39]) && kept.contains(&hashes[0]));
    }

    /// The test pipeline with its own module and key (`n`), sharing the layout and set layout.
    fn nth_record(n: u8) -> PipelineRecord {
        let mut r = record();
        r.key.spirv = [n; 16];
        let module = Digest([100 + n; 32]);
        if let Recorded::Compute(d) = &mut r.desc {
            d.stage.module = module;
        }
        r.contents[0] = (
            module,
            Arc::new(Content::Module(vec![0x0723_0203, u32::from(n)])),
        );
        r
    }

    fn recorded(file: &RecordFile, pipelines: u8) -> Vec<u64> {
        (0..pipelines)
            .map(|n| {
                let r = nth_record(n);
                file.append(pipeline_entries(&r, &AppState::default()).unwrap(), 0)
                    .unwrap();
                pipeline_hash(&r.key)
            })
            .collect()
    }

    fn catalog_of(path: &Path) -> Catalog {
        Catalog::from_entries(
            crate::replay::foz::read_entries(&std::fs::read(path).unwrap()).unwrap(),
        )
    }

    /// Stamps of the order of use: `hashes[i]` used `i`-th (newest stamp first), for the first
    /// `with_entries` of them; the rest have no entry.
    fn used_in_order(hashes: &[u64], with_entries: usize) -> impl Fn(u64) -> Option<SystemTime> {
        let stamps: std::collections::HashMap<u64, SystemTime> = hashes[..with_entries]
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let secs = 1_700_000_000 - i as u64;
                (
                    *h,
                    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs),
                )
            })
            .collect();
        move |h| stamps.get(&h).copied()
    }

    /// Issue 31, item 2: a record past its share is compacted to it in the entries' order of
    /// use: the pipelines without an entry first, then the last used; the first used (a boot's)
    /// stay, with every object they name.
    #[test]
    fn a_record_past_its_share_keeps_the_first_used_pipelines_with_every_object_they_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut hashes = recorded(&RecordFile::new(dir.path()), 8);
        // Used in another order than recorded: the last recorded was used first.
        hashes.reverse();
        let len = std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len();
        let share = len * 6 / 10;
        let opening = RecordFile::new(dir.path());
        let done = opening
            .compact_to_share(share, false, &used_in_order(&hashes, 6))
            .unwrap()
            .expect("past its share: compacted");
        assert!(done.bytes_after <= share, "{done:?} share {share}");
        assert_eq!(
            std::fs::metadata(opening.path()).unwrap().len(),
            done.bytes_after
        );
        let catalog = catalog_of(opening.path());
        assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
        let kept: HashSet<u64> = catalog.compute.iter().map(|(h, _)| *h).collect();
        assert!(kept.len() >= 2 && kept.len() < 6, "{} kept", kept.len());
        assert_eq!(done.pipelines_kept, kept.len());
        let first: HashSet<u64> = hashes[..kept.len()].iter().copied().collect();
        assert_eq!(kept, first, "the first used kept, in order");
        assert_eq!(
            catalog.shader_modules.len(),
            kept.len(),
            "the dropped' modules went"
        );
        assert_eq!(
            catalog.pipeline_layouts.len(),
            1,
            "the shared layout stayed"
        );
        assert_eq!(catalog.set_layouts.len(), 1, "and the set layout it names");
        assert!(!dir.path().join("record.foz.tmp").exists());
    }

    /// Issue 31, item 3: a record within its share is never compacted, whatever became of its
    /// entries (removed by hand, `pipekeep clear`, a driver change): it was compacted once most of
    /// its pipelines had no entry. Nor while a rebuild is owed, nor once this process appended.
    #[test]
    fn a_record_within_its_share_waiting_for_a_rebuild_or_appended_to_is_not_compacted() {
        let dir = tempfile::tempdir().unwrap();
        let hashes = recorded(&RecordFile::new(dir.path()), 4);
        let len = std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len();
        let file = RecordFile::new(dir.path());
        let none = used_in_order(&hashes, 0);
        assert_eq!(
            file.compact_to_share(len, false, &none).unwrap(),
            None,
            "within its share, no entry left"
        );
        file.mark_pending().unwrap();
        assert_eq!(
            file.compact_to_share(len / 2, false, &none).unwrap(),
            None,
            "a rebuild is owed"
        );
        assert!(file
            .clear_pending_unless_grown(std::fs::metadata(file.path()).unwrap().len())
            .unwrap());
        let appender = RecordFile::new(dir.path());
        appender
            .append(
                pipeline_entries(&nth_record(9), &AppState::default()).unwrap(),
                0,
            )
            .unwrap();
        assert_eq!(
            appender.compact_to_share(len / 2, false, &none).unwrap(),
            None,
            "this process appended"
        );
        assert!(RecordFile::new(dir.path())
            .compact_to_share(len / 2, false, &none)
            .unwrap()
            .is_some());
    }

    /// `pipekeep verify --fix`: a record within its share holding damaged entries is rewritten
    /// without them (and without what only they named).
    #[test]
    fn a_damaged_record_is_rewritten_whole_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let hashes = recorded(&RecordFile::new(dir.path()), 4);
        let path = dir.path().join(FILE_NAME);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let file = RecordFile::new(dir.path());
        let used = used_in_order(&hashes, 4);
        assert_eq!(file.compact_to_share(1 << 20, false, &used).unwrap(), None);
        let done = file
            .compact_to_share(1 << 20, true, &used)
            .unwrap()
            .expect("damaged: rewritten");
        assert_eq!(done.pipelines_kept, done.pipelines_before);
        assert!(done.bytes_after < done.bytes_before);
        let (entries, _) = read(&path).unwrap();
        assert!(entries.iter().all(|e| e.payload.is_ok()));
    }

    #[test]
    fn the_pending_mark_stays_when_the_record_grew_after_the_rebuild_read_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = RecordFile::new(dir.path());
        recorded(&file, 1);
        let read_len = std::fs::metadata(file.path()).unwrap().len();
        file.owe().unwrap();
        assert!(file.is_pending());
        assert!(
            !file.clear_pending_unless_grown(read_len).unwrap(),
            "owed, not yet appended"
        );
        file.append(
            pipeline_entries(&nth_record(7), &AppState::default()).unwrap(),
            1,
        )
        .unwrap();
        assert!(file.is_pending());
        assert!(!file.clear_pending_unless_grown(read_len).unwrap());
        assert!(file.is_pending());
        let now = std::fs::metadata(file.path()).unwrap().len();
        assert!(file.clear_pending_unless_grown(now).unwrap());
        assert!(!file.is_pending());
    }

    /// `r` as the record writes it, read back as the replay reads it (with no problem).
    fn written_and_read_back(r: &PipelineRecord) -> Catalog {
        let entries = pipeline_entries(r, &AppState::default()).unwrap();
        let bytes = crate::replay::foz::write_entries(&entries);
        let catalog = Catalog::from_entries(crate::replay::foz::read_entries(&bytes).unwrap());
        assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
        catalog
    }

    #[test]
    fn a_sampler_with_a_reduction_mode_is_recorded_as_fossilize_writes_it() {
        let sampler = Digest([7; 32]);
        let mut r = record();
        for (_, content) in r.contents.iter_mut() {
            if let Content::SetLayout(l) = &**content {
                let mut l = l.clone();
                l.bindings[0].descriptor_type = 1; // combined image sampler
                l.bindings[0].immutable_samplers = Some(vec![sampler]);
                *content = Arc::new(Content::SetLayout(l));
            }
        }
        let desc = SamplerDesc {
            reduction_mode: Some(1),
            ..SamplerDesc::default()
        };
        r.contents.push((sampler, Arc::new(Content::Sampler(desc))));
        let catalog = written_and_read_back(&r);
        let written = catalog.samplers.values().next().unwrap().as_ref().unwrap();
        assert_eq!(
            written["pNext"],
            json!([{ "sType": 1_000_130_001, "reductionMode": 1 }])
        );
    }

    #[test]
    fn pipeline_robustness_is_recorded_on_the_pipeline_and_on_its_stage() {
        let mut r = record();
        let Recorded::Compute(d) = &mut r.desc else {
            unreachable!()
        };
        let on_pipeline = Robustness {
            storage_buffers: 1,
            uniform_buffers: 2,
            vertex_inputs: 3,
            images: 1,
        };
        d.robustness = Some(on_pipeline);
        d.stage.robustness = Some(Robustness {
            storage_buffers: 2,
            ..Robustness::default()
        });
        d.stage.required_subgroup_size = Some(32);
        let catalog = written_and_read_back(&r);
        let written = catalog.compute[0].1.as_ref().unwrap();
        assert_eq!(
            written["pNext"],
            json!([{ "sType": 1_000_068_000, "storageBuffers": 1, "uniformBuffers": 2,
                     "vertexInputs": 3, "images": 1 }])
        );
        assert_eq!(
            written["stage"]["pNext"],
            json!([
                { "sType": 1_000_225_001, "requiredSubgroupSize": 32 },
                { "sType": 1_000_068_000, "storageBuffers": 2, "uniformBuffers": 0,
                  "vertexInputs": 0, "images": 0 },
            ])
        );
    }

    #[test]
    fn the_first_owed_pipeline_of_a_new_title_marks_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let file = RecordFile::new(&dir.path().join("a-title-not-made-yet"));
        file.owe().unwrap();
        assert!(file.is_pending());
        assert_eq!(file.owed_in_flight(), 1);
    }

    #[test]
    fn a_writer_that_knew_the_record_before_a_compaction_writes_again_what_it_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let other_process = RecordFile::new(dir.path());
        let hashes = recorded(&other_process, 4);
        let len = std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len();
        RecordFile::new(dir.path())
            .compact_to_share(len / 2, false, &used_in_order(&hashes, 1))
            .unwrap()
            .expect("compacted");
        // The other process knew pipeline 3's module; the compaction dropped it.
        let again = nth_record(3);
        assert!(
            other_process
                .append(pipeline_entries(&again, &AppState::default()).unwrap(), 0)
                .unwrap()
                > 0
        );
        let catalog = catalog_of(other_process.path());
        assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
        let kept: HashSet<u64> = catalog.compute.iter().map(|(h, _)| *h).collect();
        assert!(kept.contains(&hashes[0]) && kept.contains(&pipeline_hash(&again.key)));
        assert_eq!(catalog.shader_modules.len(), kept.len());
    }

    /// A configuration of its own: the application `name`, robust buffer access as `robust`.
    fn configuration(name: &str, robust: bool) -> AppState {
        let device = crate::key::desc::DeviceState {
            extensions: vec![b"VK_KHR_maintenance5".to_vec()],
            features: vec![(1_000_470_000, vec![1])],
            core_features: Some(std::iter::once(u32::from(robust)).chain([0; 54]).collect()),
            unknown: Vec::new(),
        };
        let mut app = AppState::from_device(Some(name.into()), &device);
        app.application.engine_name = Some("engine".into());
        app.application.engine_version = 3;
        app.application.version = 2;
        app.application.api_version = (1 << 22) | (1 << 12);
        app
    }

    // If this golden test fails, the record's bytes changed: Fossilize's tools and older
    // pipekeeps read them (docs/FORMAT.md, "The record").
    #[test]
    fn golden_configuration_and_link_bytes_if_these_fail_the_record_format_changed() {
        let app = configuration("a game", true);
        let entries = pipeline_entries(&record(), &app).unwrap();
        let (tag, hash, payload) = &entries[0];
        assert_eq!(*tag, TAG_APPLICATION);
        assert_eq!(
            String::from_utf8(payload.clone()).unwrap(),
            [
                r#"{"applicationInfo":{"apiVersion":4198400,"applicationName":"a game","#,
                r#""applicationVersion":2,"engineName":"engine","engineVersion":3},"#,
                r#""physicalDeviceFeatures":{"pNext":[],"robustBufferAccess":1},"#,
                &format!(r#""pipekeepAbi":{},"#, crate::store::identity::HOST_ABI),
                r#""pipekeepDevice":{"coreFeatures":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"#,
                r#"0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"#,
                r#""extensions":["VK_KHR_maintenance5"],"#,
                r#""features":[{"sType":1000470000,"values":[1]}]},"version":6}"#
            ]
            .concat()
        );
        assert_eq!(*hash, configuration_hash(&app));
        let pipeline = pipeline_hash(&record().key);
        let (tag, link, payload) = entries.last().unwrap();
        assert_eq!(
            (*tag, *link),
            (TAG_LINK, link_hash(*hash, TAG_COMPUTE, pipeline))
        );
        assert_eq!(
            String::from_utf8(payload.clone()).unwrap(),
            format!(
                r#"{{"link":{{"application":"{hash:016x}","hash":"{pipeline:016x}","tag":7}},"version":6}}"#
            )
        );
        // Fossilize's own hash of a link (its Hasher, FNV-1a over 32-bit words), worked out
        // apart from this code.
        assert_eq!(
            link_hash(0x0123_4567_89ab_cdef, 7, 0xfedc_ba98_7654_3210),
            0xd966_33e5_e15c_9cca
        );
    }

    #[test]
    fn each_configuration_is_one_entry_and_a_pipeline_is_linked_once_to_each() {
        let dir = tempfile::tempdir().unwrap();
        let file = RecordFile::new(dir.path());
        let (first, second) = (
            configuration("a game", false),
            configuration("a game", true),
        );
        assert_ne!(configuration_hash(&first), configuration_hash(&second));
        let under_first = pipeline_entries(&record(), &first).unwrap();
        assert_eq!(
            file.append(under_first.clone(), 0).unwrap(),
            under_first.len()
        );
        assert_eq!(
            file.append(under_first, 0).unwrap(),
            0,
            "once a configuration"
        );
        let other = nth_record(1);
        file.append(pipeline_entries(&other, &first).unwrap(), 0)
            .unwrap();
        // The same pipeline (its key) under another configuration: only the configuration and
        // the link are new.
        assert_eq!(
            file.append(pipeline_entries(&record(), &second).unwrap(), 0)
                .unwrap(),
            2
        );
        let catalog = catalog_of(file.path());
        assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
        assert_eq!((catalog.applications.len(), catalog.links.len()), (2, 3));
        let configs = catalog.configurations();
        let pipelines = |c: &crate::replay::objects::Configuration| {
            let mut p: Vec<u64> = c.catalog.compute.iter().map(|(h, _)| *h).collect();
            p.sort_unstable();
            p
        };
        assert_eq!(configs.len(), 2);
        assert_eq!(configs[0].hash, Some(configuration_hash(&first)));
        let mut both = vec![pipeline_hash(&record().key), pipeline_hash(&other.key)];
        both.sort_unstable();
        assert_eq!(pipelines(&configs[0]), both);
        assert_eq!(pipelines(&configs[1]), vec![pipeline_hash(&record().key)]);
        let app = configs[1].app.as_ref().unwrap();
        assert_eq!(
            (
                app.name.as_deref(),
                app.engine.as_deref(),
                app.engine_version,
                app.version
            ),
            (Some("a game"), Some("engine"), 3, 2)
        );
        assert_eq!(app.api_version, (1 << 22) | (1 << 12));
        assert_eq!(app.device, second.device);
        // The background rebuild of a device takes its own configuration's pipelines only.
        let (mine, others) = catalog
            .clone()
            .into_configuration(configuration_hash(&second));
        assert_eq!(
            (mine.compute.len(), others),
            (1, vec![pipeline_hash(&other.key)])
        );
        // Compaction keeps a live pipeline's links, and drops a dead one's.
        let live = pipeline_hash(&record().key);
        let kept = live_part(read(file.path()).unwrap().0, &|h| h == live);
        let compacted = crate::replay::objects::Catalog::from_entries(
            crate::replay::foz::read_entries(&crate::replay::foz::write_entries(&kept)).unwrap(),
        );
        assert_eq!((compacted.compute.len(), compacted.links.len()), (1, 2));
        // A configuration left with no pipeline is not made for nothing.
        let only_first = pipeline_hash(&other.key);
        let kept = live_part(read(file.path()).unwrap().0, &|h| h == only_first);
        let compacted = crate::replay::objects::Catalog::from_entries(
            crate::replay::foz::read_entries(&crate::replay::foz::write_entries(&kept)).unwrap(),
        );
        assert_eq!(compacted.applications.len(), 2);
        let configs = compacted.configurations();
        assert_eq!(configs.len(), 1);
        assert_eq!(configs[0].hash, Some(configuration_hash(&first)));
    }

    /// Issue 31, item 3: a damaged configuration entry costs its own pipelines in `pipekeep
    /// rebuild` (they wait for the application's background rebuild, which knows its device),
    /// never a rebuild of them under another configuration's device (wrong keys, found by no
    /// run, and recorded again under that configuration).
    #[test]
    fn pipelines_of_a_damaged_configuration_go_under_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let file = RecordFile::new(dir.path());
        let (first, second) = (
            configuration("a game", false),
            configuration("a game", true),
        );
        file.append(pipeline_entries(&record(), &first).unwrap(), 0)
            .unwrap();
        let other = nth_record(1);
        file.append(pipeline_entries(&other, &second).unwrap(), 0)
            .unwrap();
        let mut entries = read(file.path()).unwrap().0;
        let damaged = configuration_hash(&second);
        for e in &mut entries {
            if e.tag == TAG_APPLICATION && e.hash == damaged {
                e.payload = Err(crate::replay::foz::EntryError::BadName);
            }
        }
        let catalog = crate::replay::objects::Catalog::from_entries(entries);
        let configs = catalog.configurations();
        assert_eq!(configs.len(), 1);
        let under: Vec<u64> = configs[0].catalog.compute.iter().map(|(h, _)| *h).collect();
        assert_eq!(under, vec![pipeline_hash(&record().key)]);
        assert_eq!(catalog.orphans(), 1);
    }

    #[test]
    fn an_older_record_of_one_application_and_no_links_still_reads_as_one_configuration() {
        // As pipekeep wrote it before configurations: the application entry under hash 1, its
        // name the title, API 1.3, no link.
        let old_app = br#"{"version":6,"applicationInfo":{"applicationName":"old-title","apiVersion":4206592},"physicalDeviceFeatures":{"robustBufferAccess":0,"pNext":[]},"pipekeepDevice":{"extensions":[],"features":[{"sType":53,"values":[0,0,0,0,0,0,0,0,0,0,0,0,1,0,0]}],"coreFeatures":null}}"#;
        let mut entries: Vec<DbEntry> = pipeline_entries(&nth_record(1), &AppState::default())
            .unwrap()
            .into_iter()
            .filter(|(tag, _, _)| *tag != TAG_LINK && *tag != TAG_APPLICATION)
            .collect();
        entries.insert(0, (TAG_APPLICATION, 1, old_app.to_vec()));
        entries.extend(
            pipeline_entries(&nth_record(2), &AppState::default())
                .unwrap()
                .into_iter()
                .filter(|(tag, _, _)| *tag != TAG_LINK && *tag != TAG_APPLICATION),
        );
        let bytes = crate::replay::foz::write_entries(&entries);
        let catalog = Catalog::from_entries(crate::replay::foz::read_entries(&bytes).unwrap());
        assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
        let configs = catalog.configurations();
        assert_eq!(configs.len(), 1);
        assert_eq!(configs[0].hash, Some(1));
        assert_eq!(configs[0].catalog.compute.len(), 2);
        let app = configs[0].app.as_ref().unwrap();
        assert_eq!(app.name.as_deref(), Some("old-title"));
        assert_eq!(app.api_version, 4206592);
        let device = app.device.as_ref().unwrap();
        assert!(device.unknown.is_empty());
        assert_eq!(device.features[0].0, 53);
        let (all, others) = catalog.clone().into_configuration(12345);
        assert_eq!((all.compute.len(), others), (2, vec![]));
        // A new run appends under its configuration: the older pipelines stay under the first.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), &bytes).unwrap();
        let file = RecordFile::new(dir.path());
        let new = configuration("old-title", false);
        file.append(pipeline_entries(&nth_record(3), &new).unwrap(), 0)
            .unwrap();
        let configs = catalog_of(file.path()).configurations();
        assert_eq!(configs.len(), 2);
        assert_eq!(
            (
                configs[0].catalog.compute.len(),
                configs[1].catalog.compute.len()
            ),
            (2, 1)
        );
    }

    #[test]
    fn a_device_state_with_structures_the_layer_does_not_know_is_kept_with_their_stypes() {
        let state = crate::key::desc::DeviceState {
            extensions: vec![b"VK_B".to_vec(), b"VK_A".to_vec()],
            // maintenance5's (one VkBool32), robustness2's (three)
            features: vec![(1_000_470_000, vec![1]), (1_000_286_000, vec![0, 1, 0])],
            core_features: None,
            unknown: vec![1_000_295_002],
        };
        let app = AppState::from_device(None, &state);
        let device = app.device.as_ref().unwrap();
        assert_eq!(device.extensions, vec![b"VK_A".to_vec(), b"VK_B".to_vec()]);
        assert_eq!(device.features[0].0, 1_000_286_000);
        let back = device_from_json(&device_json(device)).unwrap();
        assert_eq!(&back, device);
        assert_eq!(back.unknown, vec![1_000_295_002]);
    }

    #[test]
    fn a_device_whose_feature_structure_is_cut_short_is_refused() {
        let robustness2 = 1_000_286_000;
        let whole = serde_json::json!({
            "extensions": [], "coreFeatures": null,
            "features": [{ "sType": robustness2, "values": [1, 1, 0] }],
        });
        assert!(device_from_json(&whole).is_some());
        let short = serde_json::json!({
            "extensions": [], "coreFeatures": null,
            "features": [{ "sType": robustness2, "values": [1] }],
        });
        assert!(
            device_from_json(&short).is_none(),
            "the driver would read past it"
        );
        let unknown = serde_json::json!({
            "extensions": [], "coreFeatures": null,
            "features": [{ "sType": 1_999_999_000, "values": [1] }],
        });
        assert!(device_from_json(&unknown).is_none());
        let core = serde_json::json!({ "extensions": [], "features": [], "coreFeatures": [1, 0] });
        assert!(device_from_json(&core).is_none());
    }

    #[test]
    fn a_configuration_says_the_abi_that_recorded_it() {
        let catalog = written_and_read_back(&record());
        let app = catalog.app.expect("an application entry");
        assert_eq!(app.abi, crate::store::identity::HOST_ABI);
        // A configuration of the other ABI is another configuration.
        let mut doc: serde_json::Value =
            serde_json::from_slice(&application(&AppState::default())).unwrap();
        assert_eq!(doc[ABI_KEY], crate::store::identity::HOST_ABI);
        doc[ABI_KEY] = serde_json::json!(12 - crate::store::identity::HOST_ABI);
        assert_ne!(
            payload_hash(&serde_json::to_vec(&doc).unwrap()),
            configuration_hash(&AppState::default())
        );
    }
}
