//! A pipeline's create info built from its JSON (compute, graphics with its state blocks, or ray
//! tracing with its groups; each with its stages), then created through the raw entry point, the
//! call alone timed. A library is kept for the pipelines linking it.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ash::vk;
use base64::Engine as _;
use serde_json::Value;

use super::fields::{arr, find_next, i, only, robustness, u};
use super::graphics_data::GraphicsData;
use super::jobs::library_info;
use super::objects::Kind;
use super::objects::Made;
use super::{Replay, NO_RAY_TRACING};
use crate::replay::objects::parse_ref;
use crate::replay::record::stype;
use crate::store::envelope::check_cache_header;
use crate::store::files::write_atomically;
use crate::store::Identity;
use crate::sync::Unpoisoned;

/// `vkCreate*Pipelines` as a raw function pointer.
type CreatePipelines<T> = unsafe extern "system" fn(
    vk::Device,
    vk::PipelineCache,
    u32,
    *const T,
    *const vk::AllocationCallbacks<'static>,
    *mut vk::Pipeline,
) -> vk::Result;

impl Replay {
    fn layout(made: &Made, v: &Value) -> Result<vk::PipelineLayout, String> {
        let h = v.get("layout").and_then(parse_ref);
        h.and_then(|h| made.pipeline_layouts.get(&h).copied())
            .ok_or_else(|| made.missing("pipeline layout", h))
    }

    /// A graphics pipeline's layout, where its subsets name one (a vertex input or fragment
    /// output part, or a link, may name none: NULL).
    fn layout_or_none(made: &Made, v: &Value) -> Result<vk::PipelineLayout, String> {
        match v.get("layout").and_then(parse_ref) {
            Some(0) => Ok(vk::PipelineLayout::null()),
            _ => Self::layout(made, v),
        }
    }

    /// The libraries a create info of `kind` links (by their pipelines' hashes: a graphics
    /// pipeline's `VkPipelineLibraryCreateInfoKHR`, a ray-tracing pipeline's `libraryInfo`), as
    /// this replay made and kept them: libraries of that kind only.
    fn linked(&self, v: &Value, kind: Kind) -> Result<Vec<vk::Pipeline>, String> {
        let Some(info) = library_info(v, kind) else {
            return Ok(Vec::new());
        };
        let kept = self.libraries.locked();
        arr(info, "libraries")
            .iter()
            .map(|l| {
                parse_ref(l)
                    .and_then(|h| kept.get(&(kind.tag(), h)).copied())
                    .ok_or_else(|| "a pipeline library it links was not made".to_owned())
            })
            .collect()
    }

    /// Creates one pipeline through `create`, timing only the call (with its own cache's making,
    /// reading and destruction under [`AppCache::Each`](super::AppCache::Each)), and destroys
    /// what it made. The raw entry point, so that every result is seen as the driver returns it.
    /// `id`: its kind's tag and hash; `cache`: the application's (null: none), which
    /// [`AppCache::Each`](super::AppCache::Each) replaces.
    fn timed<T>(
        &self,
        create: CreatePipelines<T>,
        info: &T,
        id: (u32, u64),
        cache: vk::PipelineCache,
    ) -> Result<Duration, String> {
        self.timed_keeping(create, info, id, cache, false)
    }

    /// Whether some pipeline of the replay links the library `(tag, hash)`: only such a library
    /// is kept (a record holds graphics parts whose links were built as asked, and the
    /// background rebuild would hold them all, in the application's process, for nothing).
    fn is_linked(&self, library: &(u32, u64)) -> bool {
        self.linked.locked().contains(library)
    }

    /// [`Replay::timed`]; `keep`: the pipeline is a library some pipeline links, kept under `id`
    /// for them instead of destroyed.
    fn timed_keeping<T>(
        &self,
        create: CreatePipelines<T>,
        info: &T,
        id: (u32, u64),
        cache: vk::PipelineCache,
        keep: bool,
    ) -> Result<Duration, String> {
        // SAFETY: a valid create info whose data lives to the end of the caller.
        self.timed_call(
            |cache, out| unsafe {
                create(self.device.handle(), cache, 1, info, std::ptr::null(), out)
            },
            id,
            cache,
            keep,
        )
    }

    /// [`Replay::timed_keeping`] of one pipeline `create` makes into its second argument, with
    /// the cache it is given.
    fn timed_call(
        &self,
        create: impl FnOnce(vk::PipelineCache, &mut vk::Pipeline) -> vk::Result,
        id: (u32, u64),
        app_cache: vk::PipelineCache,
        keep: bool,
    ) -> Result<Duration, String> {
        let mut pipeline = vk::Pipeline::null();
        let each = self.cache_each.as_ref();
        let kept = each.and_then(|each| each.read(id));
        let started = Instant::now();
        let (cache, from_kept) = match each {
            // SAFETY: this replay's device; the kept data outlives the call.
            Some(each) => unsafe { each.make(&self.device, kept.as_deref()) }
                .map_err(|e| format!("vkCreatePipelineCache: {e}"))?,
            None => (app_cache, false),
        };
        let r = create(cache, &mut pipeline);
        // SAFETY: the cache just made on this device, used by nothing else now.
        let data = each.and_then(|each| unsafe { each.done(&self.device, cache, from_kept) });
        let took = started.elapsed();
        if let (Some(each), Some(data)) = (each, data) {
            if r == vk::Result::SUCCESS {
                each.keep(id, &data);
            }
        }
        if pipeline != vk::Pipeline::null() {
            match keep {
                true => {
                    let old = self.libraries.locked().insert(id, pipeline);
                    // SAFETY: a library this replay made before under the same hash (a
                    // database may hold it twice), no longer named.
                    if let Some(old) = old {
                        unsafe { self.device.destroy_pipeline(old, None) };
                    }
                }
                // SAFETY: a pipeline this replay made and nothing uses.
                false => unsafe { self.device.destroy_pipeline(pipeline, None) },
            }
        }
        match r {
            vk::Result::SUCCESS => Ok(took),
            e => Err(format!("driver error {e:?}")),
        }
    }

    /// A compute pipeline, of the objects in `made`.
    pub(super) unsafe fn compute(
        &self,
        made: &Made,
        hash: u64,
        cache: vk::PipelineCache,
        v: &Value,
    ) -> Result<Duration, String> {
        only(v, &[stype::PIPELINE_ROBUSTNESS], "a compute pipeline")?;
        let stage_json = v.get("stage").ok_or("no stage")?;
        let stage = StageData::read(self, made, stage_json)?;
        let mut stage_next = stage.next();
        let mut ci = vk::ComputePipelineCreateInfo::default()
            .flags(
                vk::PipelineCreateFlags::from_raw(u(v, "flags"))
                    & !vk::PipelineCreateFlags::DERIVATIVE,
            )
            .stage(stage.info(&mut stage_next))
            .layout(Self::layout(made, v)?)
            .base_pipeline_index(-1);
        let mut robustness = robustness(v);
        if let Some(r) = robustness.as_mut() {
            ci = ci.push_next(r);
        }
        self.timed(
            self.device.fp_v1_0().create_compute_pipelines,
            &ci,
            (Kind::Compute.tag(), hash),
            cache,
        )
    }

    /// A graphics pipeline, of the objects in `made`.
    pub(super) unsafe fn graphics(
        &self,
        made: &Made,
        hash: u64,
        cache: vk::PipelineCache,
        v: &Value,
    ) -> Result<Duration, String> {
        only(
            v,
            &[
                stype::RENDERING,
                stype::PIPELINE_ROBUSTNESS,
                stype::GRAPHICS_PIPELINE_LIBRARY,
                stype::PIPELINE_LIBRARY,
                stype::CREATE_FLAGS_2,
            ],
            "a graphics pipeline",
        )?;
        let libraries = self.linked(v, Kind::Graphics)?;
        let stages = StageData::read_all(self, made, v)?;
        let mut stage_nexts: Vec<_> = stages.iter().map(StageData::next).collect();
        let stage_infos = StageData::infos(&stages, &mut stage_nexts);
        let g = GraphicsData::read(v)?;
        let mut rendering = vk::PipelineRenderingCreateInfo::default()
            .view_mask(g.view_mask)
            .color_attachment_formats(&g.color_formats)
            .depth_attachment_format(g.depth_format)
            .stencil_attachment_format(g.stencil_format);
        let mut divisors = g.divisors.as_ref().map(|d| {
            vk::PipelineVertexInputDivisorStateCreateInfoKHR::default().vertex_binding_divisors(d)
        });
        let mut vertex_input = vk::PipelineVertexInputStateCreateInfo::default()
            .vertex_binding_descriptions(&g.bindings)
            .vertex_attribute_descriptions(&g.attributes);
        if let Some(d) = divisors.as_mut() {
            vertex_input = vertex_input.push_next(d);
        }
        let mut depth_clip = g.depth_clip;
        let mut rasterization = g.rasterization;
        if let Some(c) = depth_clip.as_mut() {
            rasterization = rasterization.push_next(c);
        }
        let viewport = {
            let mut vp = vk::PipelineViewportStateCreateInfo {
                viewport_count: g.viewport_count,
                scissor_count: g.scissor_count,
                ..Default::default()
            };
            if !g.viewports.is_empty() {
                vp.p_viewports = g.viewports.as_ptr();
            }
            if !g.scissors.is_empty() {
                vp.p_scissors = g.scissors.as_ptr();
            }
            vp
        };
        let mut multisample = g.multisample;
        if !g.sample_mask.is_empty() {
            multisample.p_sample_mask = g.sample_mask.as_ptr();
        }
        let blend = vk::PipelineColorBlendStateCreateInfo::default()
            .flags(g.blend_flags)
            .logic_op_enable(g.logic_op_enable)
            .logic_op(g.logic_op)
            .attachments(&g.blend_attachments)
            .blend_constants(g.blend_constants);
        let dynamic =
            vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&g.dynamic_states);
        let render_pass = match v.get("renderPass").and_then(parse_ref) {
            None | Some(0) => vk::RenderPass::null(),
            h => h
                .and_then(|h| made.render_passes.get(&h).copied())
                .ok_or_else(|| made.missing("render pass", h))?,
        };
        let mesh = stages.iter().any(|s| {
            s.stage
                .intersects(vk::ShaderStageFlags::MESH_EXT | vk::ShaderStageFlags::TASK_EXT)
        });
        if mesh && !self.mesh_shaders {
            return Err("mesh shaders: the device lacks the feature".into());
        }
        let (flags, mut flags2, is_library) = read_flags(v);
        let mut part = find_next(v, stype::GRAPHICS_PIPELINE_LIBRARY).map(|p| {
            vk::GraphicsPipelineLibraryCreateInfoEXT::default()
                .flags(vk::GraphicsPipelineLibraryFlagsEXT::from_raw(u(p, "flags")))
        });
        let mut linking = vk::PipelineLibraryCreateInfoKHR::default().libraries(&libraries);
        let mut ci = vk::GraphicsPipelineCreateInfo::default()
            .flags(flags)
            .stages(&stage_infos)
            .rasterization_state(&rasterization)
            .viewport_state(&viewport)
            .color_blend_state(&blend)
            .dynamic_state(&dynamic)
            .layout(Self::layout_or_none(made, v)?)
            .render_pass(render_pass)
            .subpass(u(v, "subpass"))
            .base_pipeline_index(-1);
        if !mesh {
            ci = ci
                .vertex_input_state(&vertex_input)
                .input_assembly_state(&g.input_assembly);
        }
        if let Some(t) = g.tessellation.as_ref() {
            ci = ci.tessellation_state(t);
        }
        // Where recorded: a fragment shader library part may have none (DXVK gives one only for
        // sample-rate shading), and a default one would key otherwise.
        if v.get("multisampleState").is_some() {
            ci = ci.multisample_state(&multisample);
        }
        if let Some(d) = g.depth_stencil.as_ref() {
            ci = ci.depth_stencil_state(d);
        }
        if render_pass == vk::RenderPass::null() {
            ci = ci.push_next(&mut rendering);
        }
        let mut robustness = robustness(v);
        if let Some(r) = robustness.as_mut() {
            ci = ci.push_next(r);
        }
        if let Some(p) = part.as_mut() {
            ci = ci.push_next(p);
        }
        if !libraries.is_empty() {
            ci = ci.push_next(&mut linking);
        }
        if let Some(f) = flags2.as_mut() {
            ci = ci.push_next(f);
        }
        let create = self.device.fp_v1_0().create_graphics_pipelines;
        self.timed_keeping(
            create,
            &ci,
            (Kind::Graphics.tag(), hash),
            cache,
            is_library && self.is_linked(&(Kind::Graphics.tag(), hash)),
        )
    }

    /// A ray-tracing pipeline, of the objects in `made` and the ray-tracing libraries it links
    /// (made before it and kept), through the device's `vkCreateRayTracingPipelinesKHR` with no
    /// deferred operation. What the JSON does not hold (a dynamic state, a library interface,
    /// library info) is not chained: the application gave none, or none its key tells apart.
    pub(super) unsafe fn ray_tracing(
        &self,
        made: &Made,
        hash: u64,
        cache: vk::PipelineCache,
        v: &Value,
    ) -> Result<Duration, String> {
        let create = self.ray_tracing.ok_or(NO_RAY_TRACING)?;
        only(
            v,
            &[stype::PIPELINE_ROBUSTNESS, stype::CREATE_FLAGS_2],
            "a ray-tracing pipeline",
        )?;
        let libraries = self.linked(v, Kind::RayTracing)?;
        let stages = StageData::read_all(self, made, v)?;
        let mut stage_nexts: Vec<_> = stages.iter().map(StageData::next).collect();
        let stage_infos = StageData::infos(&stages, &mut stage_nexts);
        let groups = arr(v, "groups")
            .iter()
            .map(|g| {
                only(g, &[], "a ray-tracing shader group")?;
                Ok(vk::RayTracingShaderGroupCreateInfoKHR::default()
                    .ty(vk::RayTracingShaderGroupTypeKHR::from_raw(i(g, "type")))
                    .general_shader(u(g, "generalShader"))
                    .closest_hit_shader(u(g, "closestHitShader"))
                    .any_hit_shader(u(g, "anyHitShader"))
                    .intersection_shader(u(g, "intersectionShader")))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let interface = v
            .get("libraryInterface")
            .map(|l| {
                only(l, &[], "a ray-tracing library interface")?;
                Ok::<_, String>(
                    vk::RayTracingPipelineInterfaceCreateInfoKHR::default()
                        .max_pipeline_ray_payload_size(u(l, "maxPipelineRayPayloadSize"))
                        .max_pipeline_ray_hit_attribute_size(u(
                            l,
                            "maxPipelineRayHitAttributeSize",
                        )),
                )
            })
            .transpose()?;
        if let Some(l) = v.get("libraryInfo") {
            only(l, &[], "a ray-tracing library info")?;
        }
        let dynamic_json = v.get("dynamicState");
        if let Some(d) = dynamic_json {
            only(d, &[], "the dynamic state")?;
        }
        let dynamic_states: Vec<vk::DynamicState> = dynamic_json
            .map_or(&[][..], |d| arr(d, "dynamicState"))
            .iter()
            .map(|x| vk::DynamicState::from_raw(x.as_i64().unwrap_or(0) as i32))
            .collect();
        let dynamic = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&dynamic_states);
        let linking = vk::PipelineLibraryCreateInfoKHR::default().libraries(&libraries);
        let (flags, mut flags2, is_library) = read_flags(v);
        let mut ci = vk::RayTracingPipelineCreateInfoKHR::default()
            .flags(flags)
            .stages(&stage_infos)
            .groups(&groups)
            .max_pipeline_ray_recursion_depth(u(v, "maxPipelineRayRecursionDepth"))
            .layout(Self::layout(made, v)?)
            .base_pipeline_index(-1);
        if let Some(interface) = interface.as_ref() {
            ci = ci.library_interface(interface);
        }
        if v.get("libraryInfo").is_some() {
            ci = ci.library_info(&linking);
        }
        if dynamic_json.is_some() {
            ci = ci.dynamic_state(&dynamic);
        }
        let mut robustness = robustness(v);
        if let Some(r) = robustness.as_mut() {
            ci = ci.push_next(r);
        }
        if let Some(f) = flags2.as_mut() {
            ci = ci.push_next(f);
        }
        let keep = is_library && self.is_linked(&(Kind::RayTracing.tag(), hash));
        // SAFETY: the device's own command; a valid create info whose data lives to the end of
        // this function; no deferred operation (the call completes before it returns).
        self.timed_call(
            |cache, out| unsafe {
                create(
                    self.device.handle(),
                    vk::DeferredOperationKHR::null(),
                    cache,
                    1,
                    &ci,
                    std::ptr::null(),
                    out,
                )
            },
            (Kind::RayTracing.tag(), hash),
            cache,
            keep,
        )
    }
}

/// [`AppCache::Each`](super::AppCache::Each)'s caches: a fresh one a pipeline, made of the data
/// kept in a folder under its kind's tag and hash, where one is named and holds data of this
/// device's driver (the store's header check: another device's or driver's, or a short file, is
/// built through an empty cache and kept again).
pub(super) struct EachCache {
    dir: Option<PathBuf>,
    identity: Identity,
}

impl EachCache {
    pub(super) fn new(
        dir: Option<PathBuf>,
        props: &vk::PhysicalDeviceProperties,
    ) -> Result<EachCache, String> {
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let identity = Identity::of_device(props);
        Ok(EachCache { dir, identity })
    }

    fn path(dir: &Path, (tag, hash): (u32, u64)) -> PathBuf {
        dir.join(format!("{tag:x}-{hash:016x}"))
    }

    /// The data an earlier run kept for this pipeline, where its header names this device.
    fn read(&self, id: (u32, u64)) -> Option<Vec<u8>> {
        let data = std::fs::read(Self::path(self.dir.as_deref()?, id)).ok()?;
        self.is_of_this_device(&data).then_some(data)
    }

    fn is_of_this_device(&self, data: &[u8]) -> bool {
        check_cache_header(data, &self.identity).is_ok()
    }

    /// A pipeline's cache: made of `kept` where the driver takes it (`true`), else empty.
    ///
    /// # Safety
    /// `device` is the replay's; `kept` is data of its driver (its header checked).
    unsafe fn make(
        &self,
        device: &ash::Device,
        kept: Option<&[u8]>,
    ) -> Result<(vk::PipelineCache, bool), vk::Result> {
        let empty = vk::PipelineCacheCreateInfo::default();
        // SAFETY: as the caller vouches; the data outlives the call.
        let from_kept = kept.and_then(|data| unsafe {
            device
                .create_pipeline_cache(&empty.initial_data(data), None)
                .ok()
        });
        match from_kept {
            Some(cache) => Ok((cache, true)),
            // SAFETY: a valid create info.
            None => unsafe { device.create_pipeline_cache(&empty, None) }.map(|c| (c, false)),
        }
    }

    /// After the build: the cache's data where it was made empty (as a layer keeping a miss
    /// reads it; kept only where a folder is named, else dropped inside the timed call), and the
    /// cache destroyed.
    ///
    /// # Safety
    /// `cache` is one [`EachCache::make`] made on `device`, used by nothing else.
    unsafe fn done(
        &self,
        device: &ash::Device,
        cache: vk::PipelineCache,
        from_kept: bool,
    ) -> Option<Vec<u8>> {
        // SAFETY: as the caller vouches.
        let data = (!from_kept)
            .then(|| unsafe { device.get_pipeline_cache_data(cache) }.ok())
            .flatten();
        unsafe { device.destroy_pipeline_cache(cache, None) };
        data.filter(|_| self.dir.is_some())
    }

    /// Keeps a new pipeline's data, whole or not at all (the store's atomic write).
    fn keep(&self, id: (u32, u64), data: &[u8]) {
        let Some(dir) = &self.dir else { return };
        if let Err(e) = write_atomically(&Self::path(dir, id), data, std::time::SystemTime::now()) {
            eprintln!("pipekeep: a pipeline's data not kept: {e}");
        }
    }
}

/// A pipeline's create flags from its JSON: the legacy `flags`, and the
/// `VkPipelineCreateFlags2CreateInfoKHR` in its `pNext` where there is one (which then stands in
/// for them), each without `DERIVATIVE` (the replay makes no base pipeline), and whether it is
/// a library (`LIBRARY_KHR` in whichever is in force).
fn read_flags(
    v: &Value,
) -> (
    vk::PipelineCreateFlags,
    Option<vk::PipelineCreateFlags2CreateInfoKHR<'static>>,
    bool,
) {
    let flags =
        vk::PipelineCreateFlags::from_raw(u(v, "flags")) & !vk::PipelineCreateFlags::DERIVATIVE;
    let flags2 = find_next(v, stype::CREATE_FLAGS_2).map(|f| {
        let bits = f.get("flags").and_then(Value::as_u64).unwrap_or(0);
        let derivative = u64::from(vk::PipelineCreateFlags::DERIVATIVE.as_raw());
        vk::PipelineCreateFlags2CreateInfoKHR::default()
            .flags(vk::PipelineCreateFlags2KHR::from_raw(bits & !derivative))
    });
    let library_bit = u64::from(vk::PipelineCreateFlags::LIBRARY_KHR.as_raw());
    let is_library = match &flags2 {
        Some(f) => f.flags.as_raw() & library_bit != 0,
        None => flags.contains(vk::PipelineCreateFlags::LIBRARY_KHR),
    };
    (flags, flags2, is_library)
}

/// A stage's owned data, from which its create info is built.
struct StageData {
    stage: vk::ShaderStageFlags,
    flags: vk::PipelineShaderStageCreateFlags,
    module: vk::ShaderModule,
    name: CString,
    spec: Specialization,
    required_subgroup_size: Option<u32>,
    robustness: Option<vk::PipelineRobustnessCreateInfoEXT<'static>>,
}

/// The structures a stage's create info chains, owned by the caller while the info lives.
struct StageNext {
    subgroup: vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo<'static>,
    robustness: Option<vk::PipelineRobustnessCreateInfoEXT<'static>>,
}

/// A stage's (or a shader object's) specialization, owned.
pub(super) struct Specialization {
    /// Points into `map` and `data`, whose heap buffers stay put when the struct moves.
    info: Option<vk::SpecializationInfo<'static>>,
    _map: Vec<vk::SpecializationMapEntry>,
    _data: Vec<u8>,
}

// SAFETY: the raw pointers in `info` point into this struct's own immutable buffers.
unsafe impl Send for Specialization {}

impl Specialization {
    /// The `specializationInfo` of a stage's JSON (none where it has none).
    pub(super) fn read(s: &Value) -> Result<Specialization, String> {
        let spec = s.get("specializationInfo");
        let data = match spec.and_then(|x| x.get("data")).and_then(Value::as_str) {
            Some(b64) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| format!("specialization data is not base64: {e}"))?,
            None => Vec::new(),
        };
        let map: Vec<vk::SpecializationMapEntry> = spec
            .map(|x| arr(x, "mapEntries"))
            .unwrap_or(&[])
            .iter()
            .map(|e| {
                vk::SpecializationMapEntry::default()
                    .constant_id(u(e, "constantID"))
                    .offset(u(e, "offset"))
                    .size(u(e, "size") as usize)
            })
            .collect();
        if map.iter().any(|e| e.offset as usize + e.size > data.len()) {
            return Err("specialization map entry outside its data".into());
        }
        let info = spec.map(|_| vk::SpecializationInfo {
            map_entry_count: map.len() as u32,
            p_map_entries: map.as_ptr(),
            data_size: data.len(),
            p_data: data.as_ptr().cast(),
            ..Default::default()
        });
        Ok(Specialization {
            info,
            _map: map,
            _data: data,
        })
    }

    pub(super) fn info(&self) -> Option<&vk::SpecializationInfo<'static>> {
        self.info.as_ref()
    }
}

/// The required subgroup size a stage's JSON chains, where the device can take it for `stage`.
pub(super) fn required_subgroup_size(
    r: &Replay,
    s: &Value,
    stage: vk::ShaderStageFlags,
) -> Result<Option<u32>, String> {
    let Some(size) =
        find_next(s, stype::REQUIRED_SUBGROUP_SIZE).map(|n| u(n, "requiredSubgroupSize"))
    else {
        return Ok(None);
    };
    let g = &r.subgroup;
    if !r.subgroup_size_control
        || !g.required_subgroup_size_stages.contains(stage)
        || size < g.min_subgroup_size
        || size > g.max_subgroup_size
        || !size.is_power_of_two()
    {
        return Err(format!(
            "required subgroup size {size}: the device supports {}-{} ",
            g.min_subgroup_size, g.max_subgroup_size
        ));
    }
    Ok(Some(size))
}

/// A stage's entry point name (`main` where its JSON names none).
pub(super) fn entry_point(s: &Value) -> Result<CString, String> {
    CString::new(s.get("name").and_then(Value::as_str).unwrap_or("main")).map_err(|e| e.to_string())
}

impl StageData {
    /// Every stage of a pipeline's `stages` array, in its order (a ray-tracing pipeline's groups
    /// name them by place).
    fn read_all(r: &Replay, made: &Made, v: &Value) -> Result<Vec<StageData>, String> {
        arr(v, "stages")
            .iter()
            .map(|s| StageData::read(r, made, s))
            .collect()
    }

    fn read(r: &Replay, made: &Made, s: &Value) -> Result<StageData, String> {
        only(
            s,
            &[stype::REQUIRED_SUBGROUP_SIZE, stype::PIPELINE_ROBUSTNESS],
            "a shader stage",
        )?;
        let h = s.get("module").and_then(parse_ref);
        let module = h
            .and_then(|h| made.modules.get(&h).copied())
            .ok_or_else(|| made.missing("shader module", h))?;
        let stage = vk::ShaderStageFlags::from_raw(u(s, "stage"));
        Ok(StageData {
            stage,
            flags: vk::PipelineShaderStageCreateFlags::from_raw(u(s, "flags")),
            module,
            name: entry_point(s)?,
            spec: Specialization::read(s)?,
            required_subgroup_size: required_subgroup_size(r, s, stage)?,
            robustness: robustness(s),
        })
    }

    fn next(&self) -> StageNext {
        StageNext {
            subgroup: vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo::default()
                .required_subgroup_size(self.required_subgroup_size.unwrap_or(0)),
            robustness: self.robustness,
        }
    }

    /// The create infos of `stages`, each with its chain in `nexts` (one a stage, in order).
    fn infos<'a>(
        stages: &'a [StageData],
        nexts: &'a mut [StageNext],
    ) -> Vec<vk::PipelineShaderStageCreateInfo<'a>> {
        stages.iter().zip(nexts).map(|(s, n)| s.info(n)).collect()
    }

    fn info<'a>(&'a self, next: &'a mut StageNext) -> vk::PipelineShaderStageCreateInfo<'a> {
        let mut info = vk::PipelineShaderStageCreateInfo::default()
            .stage(self.stage)
            .flags(self.flags)
            .module(self.module)
            .name(&self.name);
        if let Some(spec) = self.spec.info() {
            info = info.specialization_info(spec);
        }
        if self.required_subgroup_size.is_some() {
            info = info.push_next(&mut next.subgroup);
        }
        if let Some(r) = next.robustness.as_mut() {
            info = info.push_next(r);
        }
        info
    }
}

#[cfg(test)]
mod each_tests {
    use super::*;

    #[test]
    fn kept_data_is_taken_only_where_its_header_names_this_device() {
        let props = vk::PhysicalDeviceProperties {
            vendor_id: 0x10de,
            device_id: 0x2335,
            pipeline_cache_uuid: [7; 16],
            ..Default::default()
        };
        let each = EachCache::new(None, &props).unwrap();
        let mut data = Vec::new();
        for word in [32u32, 1, 0x10de, 0x2335] {
            data.extend_from_slice(&word.to_le_bytes());
        }
        data.extend_from_slice(&[7; 16]);
        data.extend_from_slice(b"records");
        assert!(each.is_of_this_device(&data));
        assert!(!each.is_of_this_device(&data[..31]), "short");
        let mut other = data.clone();
        other[16] = 8;
        assert!(!each.is_of_this_device(&other), "another driver's UUID");
        let mut other = data.clone();
        other[0] = 200;
        assert!(
            !each.is_of_this_device(&other),
            "a header longer than the file"
        );
    }
}
