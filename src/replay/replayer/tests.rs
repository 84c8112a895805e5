//! A replay on someone else's device ([`replay_on_device`], pipekeep's background rebuild) on a
//! fake driver that tracks every object alive: each pipeline's objects are made around it alone,
//! the samplers held at once stay within the budget, and no object goes before those made from
//! it (a sampler after the set layouts and pipeline layouts naming it, each after the pipeline).

use std::collections::{HashMap, HashSet};
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ash::vk;
use ash::vk::Handle;
use serde_json::json;

use super::*;

/// The fake driver's state, behind its device handle.
#[derive(Default)]
struct Fake {
    next: AtomicU64,
    samplers: Mutex<HashSet<u64>>,
    most_samplers: AtomicUsize,
    /// Set layout -> the samplers it names.
    set_layouts: Mutex<HashMap<u64, Vec<u64>>>,
    /// Pipeline layout -> the samplers its set layouts name.
    pipeline_layouts: Mutex<HashMap<u64, Vec<u64>>>,
    modules: Mutex<HashSet<u64>>,
    pipelines: AtomicUsize,
    /// Pipelines alive, each with whether it is a library.
    live_pipelines: Mutex<HashMap<u64, bool>>,
    /// Ray-tracing pipelines made, in order: their handle and the libraries they linked.
    ray_tracing: Mutex<Vec<(u64, Vec<u64>)>>,
    /// Shader objects alive.
    shaders: Mutex<HashSet<u64>>,
    /// Each `vkCreateShadersEXT` call: every shader's stage, next stage, code and set layouts.
    shader_calls: Mutex<Vec<Vec<ShaderMade>>>,
    /// What an application could not have done.
    wrong: Mutex<Vec<String>>,
}

impl Fake {
    fn new() -> &'static Fake {
        Box::leak(Box::default())
    }

    fn handle(&'static self) -> vk::Device {
        vk::Device::from_raw(self as *const Fake as u64)
    }

    /// # Safety
    /// `d` must be a handle [`Fake::handle`] gave.
    unsafe fn of(d: vk::Device) -> &'static Fake {
        // SAFETY: as the caller vouches.
        unsafe { &*(d.as_raw() as *const Fake) }
    }

    fn wrong(&self, what: String) {
        self.wrong.lock().unwrap().push(what);
    }

    fn handle_out(&self) -> u64 {
        self.next.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn alive(&self) -> usize {
        self.samplers.lock().unwrap().len()
            + self.set_layouts.lock().unwrap().len()
            + self.pipeline_layouts.lock().unwrap().len()
            + self.modules.lock().unwrap().len()
    }
}

type Alloc<'a> = *const vk::AllocationCallbacks<'a>;

/// A shader object as the fake driver was asked for it: its stage, next stage, code and set
/// layouts.
type ShaderMade = (u32, u32, Vec<u32>, Vec<u64>);

unsafe extern "system" fn create_sampler(
    d: vk::Device,
    _: *const vk::SamplerCreateInfo<'_>,
    _: Alloc<'_>,
    out: *mut vk::Sampler,
) -> vk::Result {
    // SAFETY: the replay's calls: a fake handle, valid pointers.
    let f = unsafe { Fake::of(d) };
    let h = f.handle_out();
    let mut live = f.samplers.lock().unwrap();
    live.insert(h);
    f.most_samplers.fetch_max(live.len(), Ordering::SeqCst);
    unsafe { *out = vk::Sampler::from_raw(h) };
    vk::Result::SUCCESS
}

unsafe extern "system" fn destroy_sampler(d: vk::Device, s: vk::Sampler, _: Alloc<'_>) {
    // SAFETY: as above.
    let f = unsafe { Fake::of(d) };
    let h = s.as_raw();
    let named = f
        .set_layouts
        .lock()
        .unwrap()
        .values()
        .any(|v| v.contains(&h))
        || f.pipeline_layouts
            .lock()
            .unwrap()
            .values()
            .any(|v| v.contains(&h));
    if named {
        f.wrong(format!("sampler {h} destroyed before a layout naming it"));
    }
    f.samplers.lock().unwrap().remove(&h);
}

unsafe extern "system" fn create_set_layout(
    d: vk::Device,
    ci: *const vk::DescriptorSetLayoutCreateInfo<'_>,
    _: Alloc<'_>,
    out: *mut vk::DescriptorSetLayout,
) -> vk::Result {
    // SAFETY: as above.
    let (f, ci) = unsafe { (Fake::of(d), &*ci) };
    let bindings = unsafe { std::slice::from_raw_parts(ci.p_bindings, ci.binding_count as usize) };
    let mut named = Vec::new();
    for b in bindings
        .iter()
        .filter(|b| !b.p_immutable_samplers.is_null())
    {
        let samplers = unsafe {
            std::slice::from_raw_parts(b.p_immutable_samplers, b.descriptor_count as usize)
        };
        named.extend(samplers.iter().map(|s| s.as_raw()));
    }
    let live = f.samplers.lock().unwrap();
    if let Some(gone) = named.iter().find(|s| !live.contains(s)) {
        f.wrong(format!("set layout names sampler {gone}, not alive"));
    }
    drop(live);
    let h = f.handle_out();
    f.set_layouts.lock().unwrap().insert(h, named);
    unsafe { *out = vk::DescriptorSetLayout::from_raw(h) };
    vk::Result::SUCCESS
}

unsafe extern "system" fn destroy_set_layout(
    d: vk::Device,
    l: vk::DescriptorSetLayout,
    _: Alloc<'_>,
) {
    // SAFETY: as above.
    let f = unsafe { Fake::of(d) };
    f.set_layouts.lock().unwrap().remove(&l.as_raw());
}

unsafe extern "system" fn create_pipeline_layout(
    d: vk::Device,
    ci: *const vk::PipelineLayoutCreateInfo<'_>,
    _: Alloc<'_>,
    out: *mut vk::PipelineLayout,
) -> vk::Result {
    // SAFETY: as above.
    let (f, ci) = unsafe { (Fake::of(d), &*ci) };
    let sets =
        unsafe { std::slice::from_raw_parts(ci.p_set_layouts, ci.set_layout_count as usize) };
    let layouts = f.set_layouts.lock().unwrap();
    let mut samplers = Vec::new();
    for s in sets {
        match layouts.get(&s.as_raw()) {
            Some(named) => samplers.extend(named),
            None => f.wrong(format!(
                "pipeline layout names set layout {}, not alive",
                s.as_raw()
            )),
        }
    }
    drop(layouts);
    let h = f.handle_out();
    f.pipeline_layouts.lock().unwrap().insert(h, samplers);
    unsafe { *out = vk::PipelineLayout::from_raw(h) };
    vk::Result::SUCCESS
}

unsafe extern "system" fn destroy_pipeline_layout(
    d: vk::Device,
    l: vk::PipelineLayout,
    _: Alloc<'_>,
) {
    // SAFETY: as above.
    let f = unsafe { Fake::of(d) };
    f.pipeline_layouts.lock().unwrap().remove(&l.as_raw());
}

unsafe extern "system" fn create_module(
    d: vk::Device,
    _: *const vk::ShaderModuleCreateInfo<'_>,
    _: Alloc<'_>,
    out: *mut vk::ShaderModule,
) -> vk::Result {
    // SAFETY: as above.
    let f = unsafe { Fake::of(d) };
    let h = f.handle_out();
    f.modules.lock().unwrap().insert(h);
    unsafe { *out = vk::ShaderModule::from_raw(h) };
    vk::Result::SUCCESS
}

unsafe extern "system" fn destroy_module(d: vk::Device, m: vk::ShaderModule, _: Alloc<'_>) {
    // SAFETY: as above.
    let f = unsafe { Fake::of(d) };
    f.modules.lock().unwrap().remove(&m.as_raw());
}

unsafe extern "system" fn create_compute(
    d: vk::Device,
    _: vk::PipelineCache,
    count: u32,
    infos: *const vk::ComputePipelineCreateInfo<'_>,
    _: Alloc<'_>,
    out: *mut vk::Pipeline,
) -> vk::Result {
    // SAFETY: as above.
    let f = unsafe { Fake::of(d) };
    let infos = unsafe { std::slice::from_raw_parts(infos, count as usize) };
    for (n, info) in infos.iter().enumerate() {
        match f
            .pipeline_layouts
            .lock()
            .unwrap()
            .get(&info.layout.as_raw())
        {
            Some(samplers) => {
                let live = f.samplers.lock().unwrap();
                if let Some(gone) = samplers.iter().find(|s| !live.contains(s)) {
                    f.wrong(format!("pipeline built with sampler {gone} gone"));
                }
            }
            None => f.wrong("pipeline built with a layout not alive".into()),
        }
        if !f
            .modules
            .lock()
            .unwrap()
            .contains(&info.stage.module.as_raw())
        {
            f.wrong("pipeline built with a module not alive".into());
        }
        f.pipelines.fetch_add(1, Ordering::SeqCst);
        let h = f.handle_out();
        f.live_pipelines.lock().unwrap().insert(h, false);
        unsafe { *out.add(n) = vk::Pipeline::from_raw(h) };
    }
    vk::Result::SUCCESS
}

unsafe extern "system" fn create_ray_tracing(
    d: vk::Device,
    deferred: vk::DeferredOperationKHR,
    _: vk::PipelineCache,
    count: u32,
    infos: *const vk::RayTracingPipelineCreateInfoKHR<'_>,
    _: Alloc<'_>,
    out: *mut vk::Pipeline,
) -> vk::Result {
    // SAFETY: as above.
    let f = unsafe { Fake::of(d) };
    if deferred != vk::DeferredOperationKHR::null() {
        f.wrong("a deferred operation".into());
    }
    let infos = unsafe { std::slice::from_raw_parts(infos, count as usize) };
    for (n, info) in infos.iter().enumerate() {
        if !f
            .pipeline_layouts
            .lock()
            .unwrap()
            .contains_key(&info.layout.as_raw())
        {
            f.wrong("ray-tracing pipeline built with a layout not alive".into());
        }
        let stages =
            unsafe { std::slice::from_raw_parts(info.p_stages, info.stage_count as usize) };
        if stages
            .iter()
            .any(|s| !f.modules.lock().unwrap().contains(&s.module.as_raw()))
        {
            f.wrong("ray-tracing pipeline built with a module not alive".into());
        }
        let libraries: Vec<u64> = match unsafe { info.p_library_info.as_ref() } {
            Some(l) => {
                unsafe { std::slice::from_raw_parts(l.p_libraries, l.library_count as usize) }
                    .iter()
                    .map(|p| p.as_raw())
                    .collect()
            }
            None => Vec::new(),
        };
        let live = f.live_pipelines.lock().unwrap().clone();
        if libraries.iter().any(|l| live.get(l) != Some(&true)) {
            f.wrong("linked a pipeline that is not a live library".into());
        }
        f.pipelines.fetch_add(1, Ordering::SeqCst);
        let h = f.handle_out();
        let library = info.flags.contains(vk::PipelineCreateFlags::LIBRARY_KHR);
        f.live_pipelines.lock().unwrap().insert(h, library);
        f.ray_tracing.lock().unwrap().push((h, libraries));
        unsafe { *out.add(n) = vk::Pipeline::from_raw(h) };
    }
    vk::Result::SUCCESS
}

unsafe extern "system" fn destroy_pipeline(d: vk::Device, p: vk::Pipeline, _: Alloc<'_>) {
    // SAFETY: as above.
    let f = unsafe { Fake::of(d) };
    if f.live_pipelines
        .lock()
        .unwrap()
        .remove(&p.as_raw())
        .is_none()
    {
        f.wrong(format!("pipeline {} destroyed but not alive", p.as_raw()));
    }
}

unsafe extern "system" fn create_shaders(
    d: vk::Device,
    count: u32,
    infos: *const vk::ShaderCreateInfoEXT<'_>,
    _: Alloc<'_>,
    out: *mut vk::ShaderEXT,
) -> vk::Result {
    // SAFETY: as above.
    let f = unsafe { Fake::of(d) };
    let infos = unsafe { std::slice::from_raw_parts(infos, count as usize) };
    let mut call = Vec::new();
    for (n, info) in infos.iter().enumerate() {
        let sets: Vec<u64> = unsafe {
            std::slice::from_raw_parts(info.p_set_layouts, info.set_layout_count as usize)
        }
        .iter()
        .map(|l| l.as_raw())
        .collect();
        let live = |l: &u64| *l == 0 || f.set_layouts.lock().unwrap().contains_key(l);
        if !sets.iter().all(live) {
            f.wrong("a shader object made with a set layout not alive".into());
        }
        if !(info.p_code as usize).is_multiple_of(4) || !info.code_size.is_multiple_of(4) {
            f.wrong("SPIR-V not in whole aligned words".into());
        }
        let code =
            unsafe { std::slice::from_raw_parts(info.p_code.cast::<u32>(), info.code_size / 4) };
        call.push((
            info.stage.as_raw(),
            info.next_stage.as_raw(),
            code.to_vec(),
            sets,
        ));
        let h = f.handle_out();
        f.shaders.lock().unwrap().insert(h);
        unsafe { *out.add(n) = vk::ShaderEXT::from_raw(h) };
    }
    f.shader_calls.lock().unwrap().push(call);
    vk::Result::SUCCESS
}

unsafe extern "system" fn destroy_shader(d: vk::Device, s: vk::ShaderEXT, _: Alloc<'_>) {
    // SAFETY: as above.
    let f = unsafe { Fake::of(d) };
    if !f.shaders.lock().unwrap().remove(&s.as_raw()) {
        f.wrong(format!("shader {} destroyed but not alive", s.as_raw()));
    }
}

/// The fake driver's commands, as `vkGetDeviceProcAddr` would give them.
fn command(name: &CStr) -> *const c_void {
    match name.to_bytes() {
        b"vkCreateSampler" => create_sampler as *const c_void,
        b"vkDestroySampler" => destroy_sampler as *const c_void,
        b"vkCreateDescriptorSetLayout" => create_set_layout as *const c_void,
        b"vkDestroyDescriptorSetLayout" => destroy_set_layout as *const c_void,
        b"vkCreatePipelineLayout" => create_pipeline_layout as *const c_void,
        b"vkDestroyPipelineLayout" => destroy_pipeline_layout as *const c_void,
        b"vkCreateShaderModule" => create_module as *const c_void,
        b"vkDestroyShaderModule" => destroy_module as *const c_void,
        b"vkCreateComputePipelines" => create_compute as *const c_void,
        b"vkDestroyPipeline" => destroy_pipeline as *const c_void,
        _ => std::ptr::null(),
    }
}

fn device(fake: &'static Fake) -> ash::Device {
    // SAFETY: the fake driver's commands, each of its own type.
    unsafe { ash::Device::load_with(|name: &CStr| command(name), fake.handle()) }
}

/// The one shader module every pipeline of [`catalog`] names.
const MODULE: u64 = 0xd0d;

fn reference(h: u64) -> serde_json::Value {
    json!(format!("{h:016x}"))
}

/// `pipelines` compute pipelines, each with a layout of its own whose one set layout names
/// `samplers` immutable samplers of its own; one shader module for all.
fn catalog(pipelines: u64, samplers: u64) -> Catalog {
    let mut c = Catalog::default();
    let module = MODULE;
    c.shader_modules
        .insert(module, Some(vec![0x0723_0203, 0, 0, 0, 0]));
    for p in 0..pipelines {
        let sampler_hashes: Vec<u64> = (0..samplers).map(|s| 0x1000 + p * 100 + s).collect();
        for s in &sampler_hashes {
            c.samplers
                .insert(*s, Some(json!({"magFilter": 1, "minFilter": 1})));
        }
        let (set, layout) = (0x2000 + p, 0x3000 + p);
        c.set_layouts.insert(
            set,
            Some(json!({"bindings": [{
                "binding": 0, "descriptorType": 1, "descriptorCount": samplers,
                "stageFlags": 32,
                "immutableSamplers": sampler_hashes.iter().map(|h| reference(*h)).collect::<Vec<_>>(),
            }]})),
        );
        c.pipeline_layouts
            .insert(layout, Some(json!({"setLayouts": [reference(set)]})));
        c.compute.push((
            0x4000 + p,
            Some(json!({
                "flags": 0, "layout": reference(layout),
                "stage": {"stage": 32, "module": reference(module), "name": "main"},
            })),
        ));
    }
    c
}

/// The background rebuild on the application's device holds only the samplers of the pipeline
/// it is building: it made every recorded sampler first, and held them all until the end.
#[test]
fn a_replay_on_someone_elses_device_makes_each_pipelines_objects_around_it_alone() {
    let fake = Fake::new();
    let c = catalog(40, 1);
    let options = Options {
        threads: 1,
        ..Default::default()
    };
    // SAFETY: the fake device lives for the process.
    let summary = unsafe { replay_on_device(device(fake), None, None, &c, &options) };
    assert_eq!(summary.made, 40, "{:?}", summary.skipped);
    assert_eq!(fake.pipelines.load(Ordering::SeqCst), 40);
    assert_eq!(fake.wrong.lock().unwrap().as_slice(), &[] as &[String]);
    assert_eq!(
        fake.most_samplers.load(Ordering::SeqCst),
        1,
        "one pipeline's sampler at a time"
    );
    assert_eq!(fake.alive(), 0, "every object destroyed");
}

/// With several threads, the samplers held at once stay within the budget (each thread waits for
/// room), a pipeline naming more than the budget is skipped, and so is every pipeline once the
/// device has no room for its samplers.
#[test]
fn the_samplers_a_replay_holds_at_once_stay_within_its_budget_and_the_devices_room() {
    let fake = Fake::new();
    let mut c = catalog(24, 2);
    let wide = catalog(1, 5);
    // One pipeline naming five samplers, beside the others.
    for (h, v) in wide.samplers {
        c.samplers.insert(h + 0x10_0000, v.map(|_| json!({})));
    }
    let set = json!({"bindings": [{
        "binding": 0, "descriptorType": 1, "descriptorCount": 5, "stageFlags": 32,
        "immutableSamplers": (0..5).map(|s| reference(0x10_0000 + 0x1000 + s)).collect::<Vec<_>>(),
    }]});
    c.set_layouts.insert(0x9000, Some(set));
    c.pipeline_layouts
        .insert(0x9001, Some(json!({"setLayouts": [reference(0x9000)]})));
    c.compute.push((
        0x9002,
        Some(json!({
            "flags": 0, "layout": reference(0x9001),
            "stage": {"stage": 32, "module": reference(MODULE), "name": "main"},
        })),
    ));
    let room = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let budget = |room: Arc<std::sync::atomic::AtomicBool>| SamplerBudget {
        most: 3,
        room: Arc::new(move |_| room.load(Ordering::SeqCst)),
    };
    let options = Options {
        threads: 4,
        samplers: Some(budget(room.clone())),
        ..Default::default()
    };
    // SAFETY: as above.
    let summary = unsafe { replay_on_device(device(fake), None, None, &c, &options) };
    assert_eq!(summary.made, 24, "{:?}", summary.skipped);
    assert_eq!(summary.skipped.get(MORE_SAMPLERS_THAN_ALLOWED), Some(&1));
    assert!(
        fake.most_samplers.load(Ordering::SeqCst) <= 3,
        "{} samplers at once",
        fake.most_samplers.load(Ordering::SeqCst)
    );
    assert_eq!(fake.wrong.lock().unwrap().as_slice(), &[] as &[String]);
    assert_eq!(fake.alive(), 0);

    room.store(false, Ordering::SeqCst);
    let fake = Fake::new();
    let c = catalog(5, 1);
    // SAFETY: as above.
    let summary = unsafe { replay_on_device(device(fake), None, None, &c, &options) };
    assert_eq!(summary.made, 0);
    assert_eq!(summary.skipped.get(NO_ROOM_FOR_SAMPLERS), Some(&5));
    assert_eq!(fake.next.load(Ordering::SeqCst), 0, "nothing made");
}

/// Once the device lets the replay in no more (its end), no pipeline makes a call into it.
#[test]
fn a_replay_makes_no_call_into_a_device_that_ended() {
    let fake = Fake::new();
    let c = catalog(6, 1);
    let options = Options {
        threads: 2,
        enter_device: Some(EnterDevice(Arc::new(|| None))),
        ..Default::default()
    };
    // SAFETY: as above.
    let summary = unsafe { replay_on_device(device(fake), None, None, &c, &options) };
    assert_eq!(summary.skipped.get(DEVICE_ENDED), Some(&6));
    assert_eq!(fake.next.load(Ordering::SeqCst), 0, "no call");
}

#[test]
fn a_pipeline_wants_what_its_layout_and_stages_name() {
    let c = catalog(2, 2);
    let (_, info) = &c.compute[1];
    let w = objects::Wanted::of(&c, info.as_ref().unwrap(), objects::Kind::Compute);
    assert_eq!(
        w.pipeline_layouts.iter().copied().collect::<Vec<_>>(),
        [0x3001]
    );
    assert_eq!(w.set_layouts.iter().copied().collect::<Vec<_>>(), [0x2001]);
    assert_eq!(
        w.samplers.iter().copied().collect::<Vec<_>>(),
        [0x1064, 0x1065]
    );
    assert_eq!(w.modules.iter().copied().collect::<Vec<_>>(), [MODULE]);
    assert!(w.render_passes.is_empty());
    assert_eq!(w.samplers_made(&c), 2);
}

/// The background rebuild's ray-tracing pipelines on the application's device: a library made
/// before the pipeline linking it (the link first in the record), linked by the handle made, and
/// destroyed at the end; each pipeline's objects around it. Without the device's command they
/// are skipped, and said why.
#[test]
fn a_ray_tracing_library_is_made_before_its_link_and_destroyed_after() {
    let mut c = catalog(1, 0);
    let layout = reference(0x3000);
    let stage = |stage: u32| json!({"stage": stage, "module": reference(MODULE), "name": "main"});
    let unused = vk::SHADER_UNUSED_KHR;
    let interface = json!({"maxPipelineRayPayloadSize": 12, "maxPipelineRayHitAttributeSize": 8});
    c.compute.clear();
    c.ray_tracing.push((
        0x9002,
        Some(json!({
            "flags": 0, "layout": layout, "maxPipelineRayRecursionDepth": 1,
            "stages": [stage(0x100), stage(0x800)],
            "groups": [
                {"type": 0, "generalShader": 0, "closestHitShader": unused,
                 "anyHitShader": unused, "intersectionShader": unused},
                {"type": 0, "generalShader": 1, "closestHitShader": unused,
                 "anyHitShader": unused, "intersectionShader": unused},
            ],
            "libraryInterface": interface,
            "libraryInfo": {"libraries": [reference(0x9001)]},
        })),
    ));
    c.ray_tracing.push((
        0x9001,
        Some(json!({
            "flags": 0x800, "layout": layout, "maxPipelineRayRecursionDepth": 1,
            "stages": [stage(0x400)],
            "groups": [{"type": 1, "generalShader": unused, "closestHitShader": 0,
                        "anyHitShader": unused, "intersectionShader": unused}],
            "libraryInterface": interface,
        })),
    ));
    let fake = Fake::new();
    let options = Options {
        threads: 2,
        ..Default::default()
    };
    let rt: vk::PFN_vkCreateRayTracingPipelinesKHR = create_ray_tracing;
    // SAFETY: the fake device lives for the process; its own command.
    let summary = unsafe { replay_on_device(device(fake), Some(rt), None, &c, &options) };
    assert_eq!(
        (summary.made, summary.made_ray_tracing),
        (2, 2),
        "{:?}",
        summary.skipped
    );
    assert_eq!(fake.wrong.lock().unwrap().as_slice(), &[] as &[String]);
    let made = fake.ray_tracing.lock().unwrap().clone();
    assert_eq!(made.len(), 2);
    assert_eq!(
        made[1].1,
        vec![made[0].0],
        "the link takes the library made first"
    );
    assert!(
        fake.live_pipelines.lock().unwrap().is_empty(),
        "every pipeline destroyed"
    );
    assert_eq!(fake.alive(), 0);

    let fake = Fake::new();
    // SAFETY: as above.
    let summary = unsafe { replay_on_device(device(fake), None, None, &c, &options) };
    assert_eq!(summary.made, 0);
    assert_eq!(summary.skipped.get(NO_RAY_TRACING), Some(&2));
}

/// What a ray-tracing pipeline names: its layout (and down from it) and its stages' modules.
#[test]
fn a_ray_tracing_pipeline_wants_its_layout_and_its_stages_modules() {
    let c = catalog(1, 1);
    let info = json!({
        "layout": reference(0x3000),
        "stages": [{"module": reference(MODULE)}, {"module": reference(0x7777)}],
    });
    let w = objects::Wanted::of(&c, &info, objects::Kind::RayTracing);
    assert_eq!(w.pipeline_layouts, [0x3000].into());
    assert_eq!(w.set_layouts, [0x2000].into());
    assert_eq!(w.samplers, [0x1000].into());
    assert_eq!(w.modules, [MODULE, 0x7777].into());
    assert!(w.render_passes.is_empty());
}

/// The background rebuild's calls of shader objects on the application's device: each call made
/// whole, in its order, its code from the catalog's module (no module made), its set layouts made
/// around it; every shader destroyed. Without the device's commands
/// they are skipped, and said why.
#[test]
fn a_call_of_shader_objects_is_made_whole_with_its_set_layouts_around_it() {
    let mut c = catalog(1, 1);
    c.compute.clear();
    let shader = |stage: u32, next: u32, sets: serde_json::Value| {
        json!({
            "flags": 0, "stage": stage, "nextStage": next, "codeType": 1,
            "module": reference(MODULE), "name": "main", "setLayouts": sets,
            "pushConstantRanges": [{"stageFlags": stage, "offset": 0, "size": 16}],
        })
    };
    c.shader_objects.push((
        0x5000,
        Some(json!({"createInfos": [
            shader(1, 0x10, json!([reference(0x2000)])),
            shader(0x10, 0, json!([])),
        ]})),
    ));
    let wanted = objects::Wanted::of(
        &c,
        c.shader_objects[0].1.as_ref().unwrap(),
        objects::Kind::ShaderObjects,
    );
    assert_eq!(wanted.set_layouts, [0x2000].into());
    assert_eq!(wanted.samplers, [0x1000].into());
    assert!(wanted.modules.is_empty() && wanted.pipeline_layouts.is_empty());

    let fake = Fake::new();
    let options = Options {
        threads: 2,
        ..Default::default()
    };
    let commands = ShaderCommands {
        create: create_shaders,
        destroy: destroy_shader,
    };
    // SAFETY: the fake device lives for the process; its own commands.
    let summary = unsafe { replay_on_device(device(fake), None, Some(commands), &c, &options) };
    assert_eq!(
        (summary.made, summary.made_shader_objects),
        (1, 1),
        "{:?}",
        summary.skipped
    );
    assert_eq!(fake.wrong.lock().unwrap().as_slice(), &[] as &[String]);
    let calls = fake.shader_calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "one call, whole");
    let code = c.shader_modules[&MODULE].clone().unwrap();
    let shape: Vec<(u32, u32, &Vec<u32>, usize)> = calls[0]
        .iter()
        .map(|(s, n, c, l)| (*s, *n, c, l.len()))
        .collect();
    assert_eq!(shape, [(1, 0x10, &code, 1), (0x10, 0, &code, 0)]);
    assert!(
        fake.shaders.lock().unwrap().is_empty(),
        "every shader destroyed"
    );
    assert!(fake.modules.lock().unwrap().is_empty() && fake.alive() == 0);

    let fake = Fake::new();
    // SAFETY: as above.
    let summary = unsafe { replay_on_device(device(fake), None, None, &c, &options) };
    assert_eq!(summary.made, 0);
    assert_eq!(summary.skipped.get(NO_SHADER_OBJECTS), Some(&1));
}
