//! The layer-enabled test app: an ordinary Vulkan program (ash over the system loader) that
//! creates compute and graphics pipelines the way real applications do: specialization
//! constants, several set layouts destroyed right after the pipeline layout, push constants, an
//! immutable sampler, render-pass and dynamic-rendering graphics pipelines, with or without a
//! cache of its own, in batches from several threads. On a driver that executes work
//! (lavapipe) it runs one compute dispatch and checks every value, so a layer that handed back a
//! wrong pipeline would show. It prints what it made and one JSON line for the tests.

use std::ffi::{CStr, CString};
use std::time::{Duration, Instant};

mod gpl;
mod probes;
mod rt;
mod shader_objects;
mod zink;

use ash::vk;
use clap::Parser;

#[derive(Parser, Debug, Clone)]
#[command(about = "Creates pipelines through whatever Vulkan layers are enabled, and reports")]
struct Args {
    /// Compute pipelines to create.
    #[arg(long, default_value_t = 40)]
    compute: u32,
    /// Graphics pipelines to create (render-pass and, at API 1.3, dynamic-rendering ones).
    #[arg(long, default_value_t = 20)]
    graphics: u32,
    /// Threads creating pipelines.
    #[arg(long, default_value_t = 4)]
    threads: u32,
    /// Pipelines per vkCreate*Pipelines call.
    #[arg(long, default_value_t = 5)]
    batch: u32,
    /// Pass a VkPipelineCache of the app's own.
    #[arg(long)]
    app_cache: bool,
    /// Build each pipeline alone through a fresh cache, its data read after, all timed: what
    /// keeping per pipeline costs the driver itself (bench.py --driver-floor).
    /// (Not with --flags2, whose derivatives name a base earlier in their own call.)
    #[arg(long, conflicts_with_all = ["app_cache", "flags2"])]
    cache_each: bool,
    /// Run one compute dispatch and check its output (needs a driver that executes work).
    #[arg(long)]
    dispatch: bool,
    /// Exit without destroying the device or the instance.
    #[arg(long)]
    no_destroy: bool,
    /// The application's apiVersion: 1.0, 1.1, 1.2, 1.3 or 1.4.
    #[arg(long, default_value = "1.3")]
    api: String,
    /// Make the device as translation layers, emulators and replay tools do: every extension
    /// offered, every feature structure reported chained with what it reports, an engine named.
    #[arg(long, overrides_with = "every_extension")]
    every_extension: bool,
    /// Ask every pipeline with VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT.
    #[arg(long)]
    fail_on_compile: bool,
    /// Chain VkPipelineCreationFeedbackCreateInfo and count the cache hits the driver reports.
    #[arg(long)]
    feedback: bool,
    /// Once every pipeline is made, ask each again at once with
    /// VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT, as asynchronous pre-compilers
    /// do (`again_made`, `again_compile_required`).
    #[arg(long, conflicts_with = "fail_on_compile")]
    again_fail_on_compile: bool,
    /// pApplicationName.
    #[arg(long, default_value = "pipekeep-testapp")]
    app_name: String,
    /// pEngineName (none if not given).
    #[arg(long)]
    engine_name: Option<String>,
    /// engineVersion.
    #[arg(long, default_value_t = 0)]
    engine_version: u32,
    /// Chain VkPipelineRasterizationDepthClipStateCreateInfoEXT into graphics pipelines (as DXVK
    /// does; the key reads it), enabling VK_EXT_depth_clip_enable.
    #[arg(long)]
    depth_clip: bool,
    /// Chain VkPipelineRasterizationLineStateCreateInfoEXT into graphics pipelines (a structure
    /// pipekeep's key does not understand), enabling VK_EXT_line_rasterization.
    #[arg(long)]
    line_state: bool,
    /// Graphics pipelines with nearly all their state dynamic and the structures chained that
    /// it makes ignored, as zink makes them (each state only where the device enables it).
    #[arg(long, requires = "every_extension")]
    zink_dynamic: bool,
    /// Layers to enable through ppEnabledLayerNames, closest to the application first.
    #[arg(long, value_delimiter = ',')]
    layers: Vec<String>,
    /// Instances, each with its own device, running at once (each makes every pipeline asked).
    #[arg(long, default_value_t = 1)]
    instances: u32,
    /// First variant number: runs with other seeds make other pipelines.
    #[arg(long, default_value_t = 0)]
    seed: u32,
    /// Give compute pipelines their flags through VkPipelineCreateFlags2CreateInfoKHR
    /// (enabling VK_KHR_maintenance5), every one after the first of a call a derivative of it.
    #[arg(long)]
    flags2: bool,
    /// Every compute pipeline after the first of a call a derivative of it, through the legacy
    /// flags.
    #[arg(long, conflicts_with_all = ["flags2", "cache_each"])]
    derivatives: bool,
    /// Pass allocation callbacks that fail every allocation to the pipeline calls, and report
    /// how often the driver asked for memory (`alloc_calls`): how often it was asked to build.
    #[arg(long)]
    failing_allocator: bool,
    /// Enable robustBufferAccess on the device (another device state: other entries).
    #[arg(long)]
    robust_buffer_access: bool,
    /// After the pipelines are made, fork: the child makes the same number of new pipelines
    /// (another seed) on the inherited device and exits without destroying anything.
    #[arg(long)]
    fork: bool,
    /// Milliseconds to wait, with the device alive, before destroying it (pipekeep's threads
    /// work meanwhile: its background rebuild).
    #[arg(long, default_value_t = 0)]
    linger_ms: u64,
    /// Enable VK_EXT_pipeline_robustness and chain VkPipelineRobustnessCreateInfoEXT: on every
    /// graphics pipeline, and on each compute pipeline or (odd variants) its stage.
    #[arg(long)]
    pipeline_robustness: bool,
    /// Build N graphics pipeline variants as DXVK does (`VK_EXT_graphics_pipeline_library`):
    /// 11 library parts first, then each variant linked fast and optimized (at most 48; needs
    /// API 1.3).
    #[arg(long, default_value_t = 0)]
    gpl: u32,
    /// With --gpl: the flags in the legacy member, as zink gives them (DXVK chains flags2).
    #[arg(long)]
    gpl_legacy_flags: bool,
    /// Build N ray-tracing pipelines (`VK_KHR_ray_tracing_pipeline`), the odd ones linked from a
    /// pipeline library holding their hit group (needs API 1.2).
    #[arg(long, default_value_t = 0)]
    rt: u32,
    /// With --rt: every call through a deferred operation (`VK_KHR_deferred_host_operations`).
    #[arg(long)]
    deferred: bool,
    /// Chain a structure into the device's create info whose sType no Vulkan registry has (as an
    /// application built with headers newer than any the layer knows; drivers skip structures
    /// they do not know).
    #[arg(long)]
    unknown_structure: bool,
    /// A layer setting for pipekeep, NAME=VALUE (a string value), chained on the instance's
    /// create info through VK_EXT_layer_settings; repeatable.
    #[arg(long)]
    layer_setting: Vec<String>,
    /// A compute pipeline made with the capture flags for statistics and internal
    /// representations, then asked for both (`capture` in the JSON line), as profilers do.
    #[arg(long)]
    capture_internal: bool,
    /// The compute pipeline asked again by its module identifier alone, with
    /// FAIL_ON_PIPELINE_COMPILE_REQUIRED, as DXVK and vkd3d-proton do (`identifier`).
    #[arg(long)]
    identifier: bool,
    /// With --identifier: where it holds an identifier, ask by it alone (a later process);
    /// where it holds none, write the identifier there.
    #[arg(long, requires = "identifier")]
    identifier_file: Option<std::path::PathBuf>,
    /// Make and destroy N distinct shader modules of about 66 KB each and report how much the
    /// process grew (`churn`).
    #[arg(long, default_value_t = 0)]
    module_churn: u32,
    /// Make N variants of shader objects (VK_EXT_shader_object, at API 1.3): a compute, a vertex
    /// and a fragment shader alone and a linked vertex and fragment pair each (`shader_objects`).
    #[arg(long, default_value_t = 0)]
    shader_objects: u32,
    /// After every pipeline is made, wait (at most a minute) until this path exists, then make
    /// as many new pipelines again (other variants), counted with the rest (`second_round`).
    #[arg(long)]
    again_when_exists: Option<std::path::PathBuf>,
    /// With --every-extension: `smoothLines` (and `stippledSmoothLines`) left off, a device
    /// state RADV compiles a pipeline with a dynamic line mode under (`--zink-dynamic`), not in
    /// its global key.
    #[arg(long, requires = "every_extension")]
    smooth_lines_off: bool,
    /// Graphics variants in pairs alike but for the cull mode (as pygfx's near-twins): each odd
    /// one takes its even neighbour's state and shaders, culling otherwise.
    #[arg(long)]
    cull_twins: bool,
    /// Compute stages give their SPIR-V inline (`VkShaderModuleCreateInfo` chained, no module),
    /// as DXVK's pipeline library parts and vkd3d-proton do.
    #[arg(long)]
    inline_spirv: bool,
}

/// A structure of a kind no Vulkan registry defines (`--unknown-structure`).
#[repr(C)]
struct UnknownStructure {
    s_type: vk::StructureType,
    p_next: *const std::ffi::c_void,
    value: vk::Bool32,
}

impl UnknownStructure {
    /// Extension numbers stand below a thousand: this one is no extension's.
    const S_TYPE: vk::StructureType = vk::StructureType::from_raw(1_999_999_000);
}

/// Allocations asked of the failing allocator.
static ALLOC_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

unsafe extern "system" fn failing_allocation(
    _: *mut std::ffi::c_void,
    _: usize,
    _: usize,
    _: vk::SystemAllocationScope,
) -> *mut std::ffi::c_void {
    ALLOC_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::ptr::null_mut()
}

unsafe extern "system" fn failing_reallocation(
    user: *mut std::ffi::c_void,
    _: *mut std::ffi::c_void,
    size: usize,
    alignment: usize,
    scope: vk::SystemAllocationScope,
) -> *mut std::ffi::c_void {
    // SAFETY: the same failing allocation, counted once.
    unsafe { failing_allocation(user, size, alignment, scope) }
}

unsafe extern "system" fn no_free(_: *mut std::ffi::c_void, _: *mut std::ffi::c_void) {}

/// Allocation callbacks whose every allocation fails.
fn failing_allocator() -> vk::AllocationCallbacks<'static> {
    vk::AllocationCallbacks::default()
        .pfn_allocation(Some(failing_allocation))
        .pfn_reallocation(Some(failing_reallocation))
        .pfn_free(Some(no_free))
}

const COMPUTE_SPV: &[u8] = include_bytes!("shaders/compute.comp.spv");
const VERT_SPV: &[u8] = include_bytes!("shaders/triangle.vert.spv");
const FRAG_SPV: &[u8] = include_bytes!("shaders/triangle.frag.spv");
const DISPATCH_ELEMENTS: u32 = 256;

fn words(spv: &[u8]) -> Vec<u32> {
    spv.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Everything the pipelines share.
struct Shared {
    device: ash::Device,
    compute_module: vk::ShaderModule,
    vert_module: vk::ShaderModule,
    frag_module: vk::ShaderModule,
    compute_layout: vk::PipelineLayout,
    graphics_layout: vk::PipelineLayout,
    render_pass: vk::RenderPass,
    sampler: vk::Sampler,
    app_cache: vk::PipelineCache,
    cache_each: bool,
    dynamic_rendering: bool,
    depth_clip: bool,
    line_state: bool,
    /// `--cull-twins`.
    cull_twins: bool,
    /// `--inline-spirv`: the compute shader's words, chained on each compute stage.
    inline_compute: Option<Vec<u32>>,
    /// `--zink-dynamic`: the dynamic states of every graphics pipeline (empty: viewport and
    /// scissor).
    zink_states: Vec<vk::DynamicState>,
    flags2: bool,
    derivatives: bool,
    pipeline_robustness: bool,
    allocator: Option<vk::AllocationCallbacks<'static>>,
}

/// What one pipeline request produced.
#[derive(Default)]
struct Tally {
    made: u32,
    compute: u32,
    graphics: u32,
    compile_required: u32,
    failed: u32,
    feedback_hits: u32,
    /// Pipeline feedback records marked valid with a duration (hit or not): whole records.
    feedback_valid: u32,
    creation: Duration,
    /// `--again-fail-on-compile`: made, and answered `VK_PIPELINE_COMPILE_REQUIRED`.
    again_made: u32,
    again_compile_required: u32,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.made += o.made;
        self.compute += o.compute;
        self.graphics += o.graphics;
        self.compile_required += o.compile_required;
        self.failed += o.failed;
        self.feedback_hits += o.feedback_hits;
        self.feedback_valid += o.feedback_valid;
        self.creation += o.creation;
        self.again_made += o.again_made;
        self.again_compile_required += o.again_compile_required;
    }
}

/// The specialization data of compute variant `v`: (MUL, VARIANT).
fn compute_spec(v: u32) -> [u32; 2] {
    [3 + v % 5, v]
}

fn main() {
    let args = Args::parse();
    let results: Vec<Result<bool, String>> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..args.instances.max(1))
            .map(|_| s.spawn(|| run(&args)))
            .collect();
        runs.into_iter()
            .map(|r| r.join().unwrap_or_else(|_| Err("a run panicked".into())))
            .collect()
    });
    for e in results.iter().filter_map(|r| r.as_ref().err()) {
        eprintln!("testapp: {e}");
    }
    let code = if results.iter().any(Result::is_err) {
        2
    } else if results.iter().all(|r| *r.as_ref().unwrap_or(&false)) {
        0
    } else {
        1
    };
    std::process::exit(code);
}

fn run(args: &Args) -> Result<bool, String> {
    let api = match args.api.as_str() {
        "1.0" => vk::API_VERSION_1_0,
        "1.1" => vk::API_VERSION_1_1,
        "1.2" => vk::API_VERSION_1_2,
        "1.4" => vk::make_api_version(0, 1, 4, 0),
        _ => vk::API_VERSION_1_3,
    };
    // SAFETY: loads the system's libvulkan.so.1; nothing else of ours runs at the same time.
    let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("no Vulkan loader: {e}"))?;
    let app_name = CString::new(args.app_name.clone()).map_err(|e| e.to_string())?;
    let engine_name = args
        .engine_name
        .clone()
        .map(CString::new)
        .transpose()
        .map_err(|e| e.to_string())?;
    let mut app_info = vk::ApplicationInfo::default()
        .application_name(&app_name)
        .engine_version(args.engine_version)
        .api_version(api);
    if let Some(engine) = &engine_name {
        app_info = app_info.engine_name(engine);
    } else if args.every_extension {
        app_info = app_info.engine_name(pipekeep::replay::every_extension::ENGINE_NAME);
    }
    let instance_extensions = if args.every_extension {
        pipekeep::replay::every_extension::instance_extensions(&entry)
    } else {
        Vec::new()
    };
    let instance_extension_ptrs: Vec<*const std::ffi::c_char> =
        instance_extensions.iter().map(|e| e.as_ptr()).collect();
    let layer_names: Vec<CString> = args
        .layers
        .iter()
        .map(|l| CString::new(l.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let layer_ptrs: Vec<*const std::ffi::c_char> = layer_names.iter().map(|l| l.as_ptr()).collect();
    let instance_ci = vk::InstanceCreateInfo::default()
        .application_info(&app_info)
        .enabled_layer_names(&layer_ptrs)
        .enabled_extension_names(&instance_extension_ptrs);
    // --layer-setting: VkLayerSettingsCreateInfoEXT naming pipekeep, each value one string.
    let layer_settings_text: Vec<(CString, CString)> = args
        .layer_setting
        .iter()
        .map(|s| {
            let (name, value) = s.split_once('=').unwrap_or((s.as_str(), ""));
            (
                CString::new(name).unwrap_or_default(),
                CString::new(value).unwrap_or_default(),
            )
        })
        .collect();
    let layer_settings_values: Vec<*const std::ffi::c_char> = layer_settings_text
        .iter()
        .map(|(_, v)| v.as_ptr())
        .collect();
    let layer_settings: Vec<vk::LayerSettingEXT> = layer_settings_text
        .iter()
        .zip(&layer_settings_values)
        .map(|((name, _), value)| vk::LayerSettingEXT {
            p_layer_name: c"VK_LAYER_PIPEKEEP_pipeline_store".as_ptr(),
            p_setting_name: name.as_ptr(),
            ty: vk::LayerSettingTypeEXT::STRING,
            value_count: 1,
            p_values: value as *const *const std::ffi::c_char as *const std::ffi::c_void,
            ..Default::default()
        })
        .collect();
    let mut layer_settings_ci = vk::LayerSettingsCreateInfoEXT::default().settings(&layer_settings);
    let instance_ci = if layer_settings.is_empty() {
        instance_ci
    } else {
        instance_ci.push_next(&mut layer_settings_ci)
    };
    // SAFETY: a valid create info.
    let instance = unsafe { entry.create_instance(&instance_ci, None) }
        .map_err(|e| format!("vkCreateInstance: {e}"))?;
    // SAFETY: a live instance.
    let physical = *unsafe { instance.enumerate_physical_devices() }
        .map_err(|e| format!("vkEnumeratePhysicalDevices: {e}"))?
        .first()
        .ok_or("no physical device")?;
    // SAFETY: a physical device of this instance.
    let props = unsafe { instance.get_physical_device_properties(physical) };
    let name = unsafe { CStr::from_ptr(props.device_name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let device_api = props.api_version.min(api);
    let dynamic_rendering = vk::api_version_minor(device_api) >= 3;

    let queue_family = unsafe { instance.get_physical_device_queue_family_properties(physical) }
        .iter()
        .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
        .ok_or("no compute queue")? as u32;
    let priorities = [1.0f32];
    let queue_ci = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(queue_family)
        .queue_priorities(&priorities)];
    let mut features13 = vk::PhysicalDeviceVulkan13Features::default()
        .dynamic_rendering(true)
        .pipeline_creation_cache_control(true);
    let mut extensions = Vec::new();
    let mut depth_clip =
        vk::PhysicalDeviceDepthClipEnableFeaturesEXT::default().depth_clip_enable(true);
    let mut device_ci = vk::DeviceCreateInfo::default().queue_create_infos(&queue_ci);
    let mut maintenance5 = vk::PhysicalDeviceMaintenance5FeaturesKHR::default().maintenance5(true);
    let mut pipeline_robustness =
        vk::PhysicalDevicePipelineRobustnessFeaturesEXT::default().pipeline_robustness(true);
    let robust = vk::PhysicalDeviceFeatures::default().robust_buffer_access(true);
    if args.robust_buffer_access {
        device_ci = device_ci.enabled_features(&robust);
    }
    if args.flags2 || args.gpl > 0 {
        extensions.push(ash::khr::maintenance5::NAME.as_ptr());
        device_ci = device_ci.push_next(&mut maintenance5);
    }
    if args.depth_clip {
        extensions.push(ash::ext::depth_clip_enable::NAME.as_ptr());
        device_ci = device_ci.push_next(&mut depth_clip);
    }
    if args.line_state {
        extensions.push(ash::ext::line_rasterization::NAME.as_ptr());
    }
    if args.pipeline_robustness {
        extensions.push(ash::ext::pipeline_robustness::NAME.as_ptr());
        device_ci = device_ci.push_next(&mut pipeline_robustness);
    }
    let mut rt_features =
        vk::PhysicalDeviceRayTracingPipelineFeaturesKHR::default().ray_tracing_pipeline(true);
    let mut as_features =
        vk::PhysicalDeviceAccelerationStructureFeaturesKHR::default().acceleration_structure(true);
    let mut features12 = vk::PhysicalDeviceVulkan12Features::default().buffer_device_address(true);
    if args.rt > 0 {
        for e in rt::EXTENSIONS {
            let named = |n: &*const std::ffi::c_char| unsafe { CStr::from_ptr(*n) } == e;
            if !extensions.iter().any(named) {
                extensions.push(e.as_ptr());
            }
        }
        device_ci = device_ci
            .push_next(&mut rt_features)
            .push_next(&mut as_features)
            .push_next(&mut features12);
    }
    let mut gpl_features = vk::PhysicalDeviceGraphicsPipelineLibraryFeaturesEXT::default()
        .graphics_pipeline_library(true);
    if args.gpl > 0 {
        for e in gpl::EXTENSIONS {
            let named = |n: &*const std::ffi::c_char| unsafe { CStr::from_ptr(*n) } == e;
            if !extensions.iter().any(named) {
                extensions.push(e.as_ptr());
            }
        }
        device_ci = device_ci.push_next(&mut gpl_features);
    }
    for e in probes::extensions(args) {
        extensions.push(e.as_ptr());
    }
    let mut shader_object =
        vk::PhysicalDeviceShaderObjectFeaturesEXT::default().shader_object(true);
    if args.shader_objects > 0 {
        extensions.push(shader_objects::EXTENSION.as_ptr());
        device_ci = device_ci.push_next(&mut shader_object);
    }
    let mut executable_properties =
        vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
            .pipeline_executable_info(true);
    if args.capture_internal {
        device_ci = device_ci.push_next(&mut executable_properties);
    }
    let mut identifiers = vk::PhysicalDeviceShaderModuleIdentifierFeaturesEXT::default()
        .shader_module_identifier(true);
    if args.identifier {
        device_ci = device_ci.push_next(&mut identifiers);
    }
    device_ci = device_ci.enabled_extension_names(&extensions);
    if dynamic_rendering {
        device_ci = device_ci.push_next(&mut features13);
    }
    // SAFETY: a physical device of this instance.
    let every = args.every_extension.then(|| {
        let mut every =
            unsafe { pipekeep::replay::every_extension::EveryExtension::of(&instance, physical) };
        // Robust buffer access stays the application's choice: it is another device state.
        every.set_robust_buffer_access(args.robust_buffer_access);
        if args.smooth_lines_off {
            // VkPhysicalDeviceLineRasterizationFeatures: smoothLines, stippledSmoothLines.
            let lines = vk::StructureType::PHYSICAL_DEVICE_LINE_RASTERIZATION_FEATURES_EXT;
            every.turn_off(lines, 2);
            every.turn_off(lines, 5);
        }
        every
    });
    if let Some(every) = &every {
        device_ci = every.apply(vk::DeviceCreateInfo::default().queue_create_infos(&queue_ci));
        let (extensions, structures) = every.counts();
        eprintln!("testapp: every extension: {extensions} device extensions, {structures} feature structures");
    }
    let mut unknown = UnknownStructure {
        s_type: UnknownStructure::S_TYPE,
        p_next: device_ci.p_next,
        value: vk::TRUE,
    };
    if args.unknown_structure {
        device_ci.p_next = (&mut unknown as *mut UnknownStructure).cast();
    }
    // SAFETY: the create info's names, alive with it.
    let enabled: Vec<CString> = unsafe {
        std::slice::from_raw_parts(
            device_ci.pp_enabled_extension_names,
            device_ci.enabled_extension_count as usize,
        )
    }
    .iter()
    .map(|n| unsafe { CStr::from_ptr(*n) }.to_owned())
    .collect();
    // SAFETY: a valid create info for this physical device.
    let device = unsafe { instance.create_device(physical, &device_ci, None) }
        .map_err(|e| format!("vkCreateDevice: {e}"))?;
    let mut shared = setup(&device, args, dynamic_rendering)?;
    shared.depth_clip = args.depth_clip;
    shared.line_state = args.line_state;
    if let Some(every) = every.as_ref().filter(|_| args.zink_dynamic) {
        shared.zink_states = zink::states(every);
    }

    let started = Instant::now();
    let jobs = jobs_of(args, dynamic_rendering);
    let per_thread = jobs.len().div_ceil(args.threads.max(1) as usize).max(1);
    let (tally, pipelines) = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .chunks(per_thread)
            .map(|chunk| s.spawn(|| make_pipelines(&shared, chunk, args)))
            .collect();
        let mut total = Tally::default();
        let mut all = Vec::new();
        for h in handles {
            let (t, p) = h.join().expect("a creating thread panicked");
            total.add(&t);
            all.extend(p);
        }
        (total, all)
    });
    let (tally, pipelines) = match &args.again_when_exists {
        Some(path) => {
            let waiting = Instant::now();
            while !path.exists() && waiting.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(5));
            }
            let again = Args {
                seed: args.seed + 10_000,
                ..args.clone()
            };
            let (more, made) = make_pipelines(&shared, &jobs_of(&again, dynamic_rendering), args);
            let mut tally = tally;
            tally.add(&more);
            (tally, pipelines.into_iter().chain(made).collect())
        }
        None => (tally, pipelines),
    };
    let gpl_made = (args.gpl > 0).then(|| {
        let (layout, vertex_layout, set) =
            gpl::layout(&device, shared.sampler).expect("the GPL layouts");
        let (vert, frag) = (words(VERT_SPV), words(FRAG_SPV));
        let g = gpl::Gpl {
            device: &device,
            layout,
            vertex_layout,
            cache: shared.app_cache,
            vert: &vert,
            frag: &frag,
            fail_on_compile: args.fail_on_compile,
            legacy_flags: args.gpl_legacy_flags,
            depth_clip: args.depth_clip,
            feedback: args.feedback,
        };
        let made = gpl::make(&g, args.gpl as usize, args.threads as usize);
        // SAFETY: objects of this device, no longer used (the pipelines keep what they need).
        unsafe {
            device.destroy_pipeline_layout(layout, None);
            device.destroy_pipeline_layout(vertex_layout, None);
            device.destroy_descriptor_set_layout(set, None);
        }
        made
    });
    let rt_made = (args.rt > 0).then(|| {
        // SAFETY: the device was made with the mode's extensions and features.
        unsafe {
            let rt = rt::Rt::new(
                &instance,
                physical,
                &device,
                shared.app_cache,
                args.deferred,
                args.fail_on_compile,
                args.feedback,
            )
            .expect("the ray-tracing objects");
            let made = rt::make(&rt, args.rt, args.threads as usize);
            rt.destroy();
            made
        }
    });
    let wall = started.elapsed();
    let capture = args
        .capture_internal
        .then(|| probes::capture_internal(&instance, &shared));
    let identifier = args
        .identifier
        .then(|| probes::identifier(&instance, &shared, args.identifier_file.as_deref()));
    let churn = (args.module_churn > 0).then(|| probes::module_churn(&shared, args.module_churn));
    let shader_objects = (args.shader_objects > 0)
        .then(|| shader_objects::make(&instance, &shared.device, args.shader_objects));
    let gpl_expected = args.gpl.min(gpl::VARIANTS as u32);
    let gpl_expected = if gpl_expected > 0 {
        gpl::KINDS.iter().sum::<usize>() as u32 + 2 * gpl_expected
    } else {
        0
    };
    // Each odd ray-tracing variant is a library and a pipeline linked from it.
    let rt_expected = args.rt + args.rt / 2;
    let rounds = if args.again_when_exists.is_some() {
        2
    } else {
        1
    };
    let expected = rounds * (args.compute + args.graphics) + gpl_expected + rt_expected;
    let mut tally = tally;
    if let Some(g) = &gpl_made {
        tally.made += g.made();
        tally.graphics += g.made();
        tally.failed += g.failed;
        tally.compile_required += g.compile_required;
        tally.creation += g.parts_time + g.fast_time + g.optimized_time;
    }
    if let Some(r) = &rt_made {
        tally.made += r.pipelines + r.libraries;
        tally.failed += r.failed;
        tally.compile_required += r.compile_required;
        tally.creation += r.time;
    }
    let fork_child = if args.fork {
        make_in_a_forked_child(&shared, args, dynamic_rendering)
    } else {
        "skipped".to_string()
    };

    let dispatch = if args.dispatch {
        match dispatch_and_check(&instance, physical, &shared, queue_family) {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("failed: {e}"),
        }
    } else {
        "skipped".to_string()
    };

    println!(
        "testapp: device {name}: made {} of {expected} pipelines ({} compute, {} graphics) from {} threads; creation {:.3} ms, wall {:.3} ms; compile-required {}, failed {}, feedback hits {}; dispatch {dispatch}",
        tally.made, tally.compute, tally.graphics, args.threads, tally.creation.as_secs_f64() * 1e3, wall.as_secs_f64() * 1e3,
        tally.compile_required, tally.failed, tally.feedback_hits
    );
    println!(
        "{}",
        serde_json::json!({
            "device": name, "made": tally.made, "expected": expected, "compute": tally.compute,
            "graphics": tally.graphics, "compile_required": tally.compile_required, "failed": tally.failed,
            "feedback_hits": tally.feedback_hits, "feedback_valid": tally.feedback_valid, "creation_ms": tally.creation.as_secs_f64() * 1e3,
            "again_made": tally.again_made, "again_compile_required": tally.again_compile_required,
            "wall_ms": wall.as_secs_f64() * 1e3, "dispatch": dispatch,
            "alloc_calls": ALLOC_CALLS.load(std::sync::atomic::Ordering::Relaxed),
            "app_cache_bytes": app_cache_bytes(&shared),
            "fork_child": fork_child,
            "zink_dynamic_states": shared.zink_states.len(),
            "capture": capture, "identifier": identifier, "churn": churn, "shader_objects": shader_objects,
            "commands_not_enabled": commands_not_enabled(&instance, &shared.device, &enabled, !dynamic_rendering),
            "rt": rt_made.as_ref().map(|r| serde_json::json!({
                "pipelines": r.pipelines, "libraries": r.libraries, "handles_ok": r.handles_ok,
                "feedback_hits": r.feedback_hits,
                "ms": r.time.as_secs_f64() * 1e3,
            })),
            "gpl": gpl_made.as_ref().map(|g| serde_json::json!({
                "parts": g.parts, "fast_links": g.fast_links, "optimized_links": g.optimized_links,
                "part_feedback_hits": g.part_feedback_hits,
                "parts_ms": g.parts_time.as_secs_f64() * 1e3, "fast_ms": g.fast_time.as_secs_f64() * 1e3,
                "optimized_ms": g.optimized_time.as_secs_f64() * 1e3,
            })),
        })
    );

    std::thread::sleep(std::time::Duration::from_millis(args.linger_ms));
    if !args.no_destroy {
        // SAFETY: every object below was made on this device and nothing uses it any more.
        unsafe {
            let gpl_pipelines = gpl_made.map(|g| g.pipelines).unwrap_or_default();
            let rt_pipelines = rt_made.map(|r| r.made).unwrap_or_default();
            // Linked pipelines before the libraries they link (each made after its libraries).
            let later: Vec<vk::Pipeline> = gpl_pipelines
                .into_iter()
                .chain(rt_pipelines)
                .rev()
                .collect();
            for p in pipelines.into_iter().chain(later) {
                device.destroy_pipeline(p, None);
            }
            teardown(&shared);
            device.destroy_device(None);
            instance.destroy_instance(None);
        }
    }
    let all_made = args.fail_on_compile || args.failing_allocator || tally.made == expected;
    let failures_expected = args.failing_allocator;
    Ok(all_made
        && (tally.failed == 0 || failures_expected)
        && (dispatch == "ok" || dispatch == "skipped")
        && (fork_child == "ok" || fork_child == "skipped"))
}

/// Forks; the child makes as many new pipelines (another seed) on the inherited device and
/// exits at once, through `exit` (its exit handlers run), destroying nothing. The parent waits
/// and says how the child ended.
fn make_in_a_forked_child(shared: &Shared, args: &Args, dynamic_rendering: bool) -> String {
    let mut child_args = args.clone();
    child_args.seed += 100_000;
    child_args.threads = 1;
    // SAFETY: the child only makes pipelines on its one thread and exits; no lock of ours is
    // held across the fork (every creating thread has been joined).
    match unsafe { libc::fork() } {
        -1 => "fork failed".to_string(),
        0 => {
            let jobs = jobs_of(&child_args, dynamic_rendering);
            let (tally, _) = make_pipelines(shared, &jobs, &child_args);
            let expected = child_args.compute + child_args.graphics;
            std::process::exit(if tally.made == expected { 0 } else { 5 });
        }
        pid => {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                "ok".to_string()
            } else {
                format!("child ended with status {status}")
            }
        }
    }
}

/// The size of the data the application's own cache would save (0 without one).
fn app_cache_bytes(s: &Shared) -> usize {
    if s.app_cache == vk::PipelineCache::null() {
        return 0;
    }
    // SAFETY: the application's own live cache.
    unsafe { s.device.get_pipeline_cache_data(s.app_cache) }.map_or(0, |d| d.len())
}

fn shader_module(device: &ash::Device, spv: &[u8]) -> Result<vk::ShaderModule, String> {
    let code = words(spv);
    // SAFETY: valid SPIR-V words.
    unsafe { device.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None) }
        .map_err(|e| format!("vkCreateShaderModule: {e}"))
}

/// One storage buffer at binding 0, for compute: the set the compute shaders write through.
fn storage_binding() -> [vk::DescriptorSetLayoutBinding<'static>; 1] {
    [vk::DescriptorSetLayoutBinding::default()
        .binding(0)
        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
        .descriptor_count(1)
        .stage_flags(vk::ShaderStageFlags::COMPUTE)]
}

/// The textured set's one binding: a combined image sampler of `samplers` (immutable).
fn textured_binding(samplers: &[vk::Sampler]) -> [vk::DescriptorSetLayoutBinding<'_>; 1] {
    [vk::DescriptorSetLayoutBinding::default()
        .binding(0)
        .descriptor_type(vk::DescriptorType::COMBINED_IMAGE_SAMPLER)
        .descriptor_count(1)
        .stage_flags(vk::ShaderStageFlags::FRAGMENT | vk::ShaderStageFlags::COMPUTE)
        .immutable_samplers(samplers)]
}

fn set_layout(
    device: &ash::Device,
    bindings: &[vk::DescriptorSetLayoutBinding],
) -> Result<vk::DescriptorSetLayout, String> {
    let ci = vk::DescriptorSetLayoutCreateInfo::default().bindings(bindings);
    // SAFETY: a valid create info whose arrays outlive the call.
    unsafe { device.create_descriptor_set_layout(&ci, None) }
        .map_err(|e| format!("vkCreateDescriptorSetLayout: {e}"))
}

fn setup(device: &ash::Device, args: &Args, dynamic_rendering: bool) -> Result<Shared, String> {
    let err = |what: &'static str| move |e: vk::Result| format!("{what}: {e}");
    // SAFETY (whole function): valid create infos on a live device.
    unsafe {
        let sampler = device
            .create_sampler(
                &vk::SamplerCreateInfo::default()
                    .mag_filter(vk::Filter::LINEAR)
                    .min_filter(vk::Filter::LINEAR)
                    .max_lod(1.0),
                None,
            )
            .map_err(err("vkCreateSampler"))?;
        let samplers = [sampler];
        let textured = textured_binding(&samplers);
        let storage_layout = set_layout(device, &storage_binding())?;
        let textured_layout = set_layout(device, &textured)?;
        let compute_push = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(4)];
        let graphics_push = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::VERTEX)
            .size(8)];
        let compute_sets = [storage_layout, textured_layout];
        let graphics_sets = [textured_layout];
        let compute_layout = device
            .create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default()
                    .set_layouts(&compute_sets)
                    .push_constant_ranges(&compute_push),
                None,
            )
            .map_err(err("vkCreatePipelineLayout"))?;
        let graphics_layout = device
            .create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default()
                    .set_layouts(&graphics_sets)
                    .push_constant_ranges(&graphics_push),
                None,
            )
            .map_err(err("vkCreatePipelineLayout"))?;
        // Real applications destroy set layouts as soon as the pipeline layout exists; the
        // dispatch makes its own copy of the storage layout.
        device.destroy_descriptor_set_layout(storage_layout, None);
        device.destroy_descriptor_set_layout(textured_layout, None);

        let attachments = [
            vk::AttachmentDescription::default()
                .format(vk::Format::R8G8B8A8_UNORM)
                .samples(vk::SampleCountFlags::TYPE_1)
                .load_op(vk::AttachmentLoadOp::CLEAR)
                .store_op(vk::AttachmentStoreOp::STORE)
                .final_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL),
            vk::AttachmentDescription::default()
                .format(vk::Format::D32_SFLOAT)
                .samples(vk::SampleCountFlags::TYPE_1)
                .load_op(vk::AttachmentLoadOp::CLEAR)
                .store_op(vk::AttachmentStoreOp::DONT_CARE)
                .final_layout(vk::ImageLayout::DEPTH_STENCIL_ATTACHMENT_OPTIMAL),
        ];
        let color_ref = [vk::AttachmentReference::default()
            .attachment(0)
            .layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)];
        let depth_ref = vk::AttachmentReference::default()
            .attachment(1)
            .layout(vk::ImageLayout::DEPTH_STENCIL_ATTACHMENT_OPTIMAL);
        let subpass = [vk::SubpassDescription::default()
            .pipeline_bind_point(vk::PipelineBindPoint::GRAPHICS)
            .color_attachments(&color_ref)
            .depth_stencil_attachment(&depth_ref)];
        let render_pass = device
            .create_render_pass(
                &vk::RenderPassCreateInfo::default()
                    .attachments(&attachments)
                    .subpasses(&subpass),
                None,
            )
            .map_err(err("vkCreateRenderPass"))?;
        let app_cache = if args.app_cache {
            device
                .create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None)
                .map_err(err("vkCreatePipelineCache"))?
        } else {
            vk::PipelineCache::null()
        };
        Ok(Shared {
            device: device.clone(),
            compute_module: shader_module(device, COMPUTE_SPV)?,
            vert_module: shader_module(device, VERT_SPV)?,
            frag_module: shader_module(device, FRAG_SPV)?,
            compute_layout,
            graphics_layout,
            render_pass,
            sampler,
            app_cache,
            cache_each: args.cache_each,
            dynamic_rendering,
            depth_clip: false,
            line_state: false,
            cull_twins: args.cull_twins,
            inline_compute: args.inline_spirv.then(|| words(COMPUTE_SPV)),
            zink_states: Vec::new(),
            flags2: args.flags2,
            derivatives: args.derivatives,
            pipeline_robustness: args.pipeline_robustness,
            allocator: args.failing_allocator.then(failing_allocator),
        })
    }
}

/// # Safety
/// Nothing may still use the shared objects.
unsafe fn teardown(s: &Shared) {
    // SAFETY: as the caller vouches.
    unsafe {
        s.device.destroy_shader_module(s.compute_module, None);
        s.device.destroy_shader_module(s.vert_module, None);
        s.device.destroy_shader_module(s.frag_module, None);
        s.device.destroy_pipeline_layout(s.compute_layout, None);
        s.device.destroy_pipeline_layout(s.graphics_layout, None);
        s.device.destroy_render_pass(s.render_pass, None);
        s.device.destroy_sampler(s.sampler, None);
        if s.app_cache != vk::PipelineCache::null() {
            s.device.destroy_pipeline_cache(s.app_cache, None);
        }
    }
}

/// One pipeline to make: a compute variant, or a graphics variant through a render pass or
/// through dynamic rendering.
#[derive(Clone, Copy, Debug)]
enum Job {
    Compute(u32),
    Graphics { variant: u32, dynamic: bool },
}

fn jobs_of(args: &Args, dynamic_rendering: bool) -> Vec<Job> {
    let mut jobs: Vec<Job> = (0..args.compute)
        .map(|i| Job::Compute(args.seed + i))
        .collect();
    jobs.extend((0..args.graphics).map(|i| Job::Graphics {
        variant: args.seed + i,
        dynamic: dynamic_rendering && i % 2 == 1,
    }));
    jobs
}

/// Makes `jobs` in batches of `args.batch`, compute and graphics each in their own calls.
fn make_pipelines(s: &Shared, jobs: &[Job], args: &Args) -> (Tally, Vec<vk::Pipeline>) {
    let mut tally = Tally::default();
    let mut made = Vec::new();
    let computes: Vec<u32> = jobs
        .iter()
        .filter_map(|j| {
            if let Job::Compute(v) = j {
                Some(*v)
            } else {
                None
            }
        })
        .collect();
    let graphics: Vec<(u32, bool)> = jobs
        .iter()
        .filter_map(|j| {
            if let Job::Graphics { variant, dynamic } = j {
                Some((*variant, *dynamic))
            } else {
                None
            }
        })
        .collect();
    let mut flags = vk::PipelineCreateFlags::empty();
    if args.fail_on_compile {
        flags |= vk::PipelineCreateFlags::FAIL_ON_PIPELINE_COMPILE_REQUIRED;
    }
    for batch in computes.chunks(args.batch.max(1) as usize) {
        let t = create_compute_batch(s, batch, flags, args.feedback, &mut made);
        tally.add(&t);
    }
    for batch in graphics.chunks(args.batch.max(1) as usize) {
        let t = create_graphics_batch(s, batch, flags, args.feedback, &mut made);
        tally.add(&t);
    }
    if args.again_fail_on_compile {
        let again = flags | vk::PipelineCreateFlags::FAIL_ON_PIPELINE_COMPILE_REQUIRED;
        let mut twice = Tally::default();
        for batch in computes.chunks(args.batch.max(1) as usize) {
            twice.add(&create_compute_batch(s, batch, again, false, &mut made));
        }
        for batch in graphics.chunks(args.batch.max(1) as usize) {
            twice.add(&create_graphics_batch(s, batch, again, false, &mut made));
        }
        tally.again_made = twice.made;
        tally.again_compile_required = twice.compile_required;
    }
    (tally, made)
}

/// Whether a creation-feedback record says cache hit, whole: marked valid, with the time the
/// creation took (Vulkan does not ask for a duration above 0, but both drivers here and the layer
/// write one: a 0 is a record nobody wrote, as RADV leaves it for a pipeline made from binaries).
pub fn whole_hit(f: &vk::PipelineCreationFeedback) -> bool {
    f.flags.contains(
        vk::PipelineCreationFeedbackFlags::VALID
            | vk::PipelineCreationFeedbackFlags::APPLICATION_PIPELINE_CACHE_HIT,
    ) && f.duration > 0
}

/// A pipeline's creation-feedback record for one call, without stage records.
#[derive(Default)]
pub struct OneRecord {
    record: vk::PipelineCreationFeedback,
    info: vk::PipelineCreationFeedbackCreateInfo<'static>,
}

impl OneRecord {
    /// The chain to give the call: this record's struct in front of `p_next`. `self` must stay
    /// where it is until the call (and any deferred operation of it) is done.
    pub fn in_front(&mut self, p_next: *const std::ffi::c_void) -> *const std::ffi::c_void {
        self.info.p_next = p_next;
        self.info.p_pipeline_creation_feedback = &mut self.record;
        (&self.info as *const vk::PipelineCreationFeedbackCreateInfo).cast()
    }

    pub fn whole_hit(&self) -> bool {
        whole_hit(&self.record)
    }
}

/// Creation-feedback outputs for a batch: one record a pipeline and `STAGES` a pipeline's stages.
struct FeedbackSlots<const STAGES: usize> {
    pipeline: Vec<vk::PipelineCreationFeedback>,
    stages: Vec<[vk::PipelineCreationFeedback; STAGES]>,
}

impl<const STAGES: usize> FeedbackSlots<STAGES> {
    fn new(pipelines: usize) -> Self {
        FeedbackSlots {
            pipeline: vec![Default::default(); pipelines],
            stages: vec![[Default::default(); STAGES]; pipelines],
        }
    }

    /// One `VkPipelineCreationFeedbackCreateInfo` a pipeline, writing into these slots.
    fn infos(&mut self) -> Vec<vk::PipelineCreationFeedbackCreateInfo<'_>> {
        self.pipeline
            .iter_mut()
            .zip(self.stages.iter_mut())
            .map(|(f, st)| {
                vk::PipelineCreationFeedbackCreateInfo::default()
                    .pipeline_creation_feedback(f)
                    .pipeline_stage_creation_feedbacks(st)
            })
            .collect()
    }
}

/// `vkCreate*Pipelines` as a raw function pointer.
type CreatePipelines<T> = unsafe extern "system" fn(
    vk::Device,
    vk::PipelineCache,
    u32,
    *const T,
    *const vk::AllocationCallbacks<'static>,
    *mut vk::Pipeline,
) -> vk::Result;

/// One call of several pipelines, timed. The raw entry point, so that
/// `VK_PIPELINE_COMPILE_REQUIRED` is seen as the driver returns it.
fn timed_call<T>(
    s: &Shared,
    create: CreatePipelines<T>,
    infos: &[T],
) -> (vk::Result, Vec<vk::Pipeline>, Duration) {
    let mut pipelines = vec![vk::Pipeline::null(); infos.len()];
    let started = Instant::now();
    let allocator = s.allocator.as_ref().map_or(std::ptr::null(), |a| {
        a as *const vk::AllocationCallbacks<'static>
    });
    if s.cache_each {
        let mut result = vk::Result::SUCCESS;
        for (info, slot) in infos.iter().zip(pipelines.iter_mut()) {
            // SAFETY: an empty cache of the app's, read once and destroyed; the create info's
            // data outlives the call.
            let r = unsafe {
                match s
                    .device
                    .create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None)
                {
                    Ok(cache) => {
                        let r = create(s.device.handle(), cache, 1, info, allocator, slot);
                        let _ = s.device.get_pipeline_cache_data(cache);
                        s.device.destroy_pipeline_cache(cache, None);
                        r
                    }
                    Err(e) => e,
                }
            };
            // As one call of them all would answer: the first error over everything, then
            // VK_PIPELINE_COMPILE_REQUIRED over success.
            if (r.as_raw() < 0 && result.as_raw() >= 0) || result == vk::Result::SUCCESS {
                result = r;
            }
        }
        return (result, pipelines, started.elapsed());
    }
    // SAFETY: valid create infos whose data outlives the call.
    let r = unsafe {
        create(
            s.device.handle(),
            s.app_cache,
            infos.len() as u32,
            infos.as_ptr(),
            allocator,
            pipelines.as_mut_ptr(),
        )
    };
    (r, pipelines, started.elapsed())
}

/// Counts a call's results into a tally.
fn count(
    result: vk::Result,
    pipelines: &[vk::Pipeline],
    feedback: &[vk::PipelineCreationFeedback],
    graphics: bool,
    took: Duration,
    made: &mut Vec<vk::Pipeline>,
) -> Tally {
    let mut t = Tally {
        creation: took,
        ..Default::default()
    };
    for p in pipelines {
        if *p == vk::Pipeline::null() {
            if result == vk::Result::PIPELINE_COMPILE_REQUIRED {
                t.compile_required += 1;
            } else {
                t.failed += 1;
            }
        } else {
            t.made += 1;
            if graphics {
                t.graphics += 1
            } else {
                t.compute += 1
            }
            made.push(*p);
        }
    }
    t.feedback_hits = feedback.iter().filter(|f| whole_hit(f)).count() as u32;
    t.feedback_valid = feedback
        .iter()
        .filter(|f| f.flags.contains(vk::PipelineCreationFeedbackFlags::VALID) && f.duration > 0)
        .count() as u32;
    if result.as_raw() < 0 {
        eprintln!("testapp: a pipeline call failed: {result}");
    }
    t
}

fn create_compute_batch(
    s: &Shared,
    variants: &[u32],
    flags: vk::PipelineCreateFlags,
    with_feedback: bool,
    made: &mut Vec<vk::Pipeline>,
) -> Tally {
    let entries = [
        vk::SpecializationMapEntry::default()
            .constant_id(0)
            .offset(0)
            .size(4),
        vk::SpecializationMapEntry::default()
            .constant_id(1)
            .offset(4)
            .size(4),
    ];
    let data: Vec<[u32; 2]> = variants.iter().map(|v| compute_spec(*v)).collect();
    let bytes: Vec<Vec<u8>> = data
        .iter()
        .map(|d| d.iter().flat_map(|w| w.to_le_bytes()).collect())
        .collect();
    let specs: Vec<vk::SpecializationInfo> = bytes
        .iter()
        .map(|b| {
            vk::SpecializationInfo::default()
                .map_entries(&entries)
                .data(b)
        })
        .collect();
    let mut feedback = FeedbackSlots::<1>::new(variants.len());
    let mut feedback_infos = feedback.infos();
    // With flags2, the first of the call may be derived from, the rest derive from it; the
    // legacy flags then say nothing.
    let mut flags2: Vec<vk::PipelineCreateFlags2CreateInfoKHR> = (0..variants.len())
        .map(|i| {
            let own = if i == 0 {
                vk::PipelineCreateFlags2KHR::ALLOW_DERIVATIVES
            } else {
                vk::PipelineCreateFlags2KHR::DERIVATIVE
            };
            vk::PipelineCreateFlags2CreateInfoKHR::default()
                .flags(vk::PipelineCreateFlags2KHR::from_raw(u64::from(flags.as_raw())) | own)
        })
        .collect();
    let mut robustness: Vec<_> = variants.iter().map(|v| robustness(*v)).collect();
    let mut stage_robustness = robustness.clone();
    let inline_code = s.inline_compute.as_deref();
    let mut inline_infos: Vec<vk::ShaderModuleCreateInfo> = (0..variants.len())
        .map(|_| vk::ShaderModuleCreateInfo::default().code(inline_code.unwrap_or(&[])))
        .collect();
    let infos: Vec<vk::ComputePipelineCreateInfo> = specs
        .iter()
        .zip(feedback_infos.iter_mut())
        .zip(flags2.iter_mut())
        .zip(robustness.iter_mut().zip(stage_robustness.iter_mut()))
        .zip(variants.iter().zip(inline_infos.iter_mut()))
        .enumerate()
        .map(
            |(i, ((((spec, fb), f2), (robust, stage_robust)), (v, inline)))| {
                let mut stage = vk::PipelineShaderStageCreateInfo::default()
                    .stage(vk::ShaderStageFlags::COMPUTE)
                    .name(c"main")
                    .specialization_info(spec);
                stage = match &inline_code {
                    Some(_) => stage.push_next(inline),
                    None => stage.module(s.compute_module),
                };
                // Odd variants ask for it on their stage, even ones on the pipeline.
                if s.pipeline_robustness && v % 2 == 1 {
                    stage = stage.push_next(stage_robust);
                }
                let mut ci = vk::ComputePipelineCreateInfo::default()
                    .stage(stage)
                    .layout(s.compute_layout)
                    .flags(flags);
                if s.pipeline_robustness && v % 2 == 0 {
                    ci = ci.push_next(robust);
                }
                if s.flags2 {
                    ci = ci
                        .flags(vk::PipelineCreateFlags::empty())
                        .base_pipeline_index(if i == 0 { -1 } else { 0 })
                        .push_next(f2);
                }
                if s.derivatives {
                    let own = if i == 0 {
                        vk::PipelineCreateFlags::ALLOW_DERIVATIVES
                    } else {
                        vk::PipelineCreateFlags::DERIVATIVE
                    };
                    ci = ci
                        .flags(flags | own)
                        .base_pipeline_index(if i == 0 { -1 } else { 0 });
                }
                if with_feedback {
                    ci.push_next(fb)
                } else {
                    ci
                }
            },
        )
        .collect();
    let (r, pipelines, took) = timed_call(s, s.device.fp_v1_0().create_compute_pipelines, &infos);
    drop(infos);
    count(
        r,
        &pipelines,
        if with_feedback {
            &feedback.pipeline
        } else {
            &[]
        },
        false,
        took,
        made,
    )
}

/// The robustness variant `v` asks for (with `--pipeline-robustness`): two behaviours that every
/// device with the feature supports, so that variants differ.
fn robustness(v: u32) -> vk::PipelineRobustnessCreateInfoEXT<'static> {
    let buffers = if v % 4 < 2 {
        vk::PipelineRobustnessBufferBehaviorEXT::DISABLED
    } else {
        vk::PipelineRobustnessBufferBehaviorEXT::DEVICE_DEFAULT
    };
    vk::PipelineRobustnessCreateInfoEXT::default()
        .storage_buffers(buffers)
        .uniform_buffers(vk::PipelineRobustnessBufferBehaviorEXT::DEVICE_DEFAULT)
        .vertex_inputs(vk::PipelineRobustnessBufferBehaviorEXT::DISABLED)
        .images(vk::PipelineRobustnessImageBehaviorEXT::DEVICE_DEFAULT)
}

/// The triangle vertex shader's inputs: a vec2 and a vec3 from binding 0, `stride` bytes apart.
fn triangle_vertex_input(
    stride: u32,
) -> (
    [vk::VertexInputBindingDescription; 1],
    [vk::VertexInputAttributeDescription; 2],
) {
    let binding = vk::VertexInputBindingDescription::default()
        .binding(0)
        .stride(stride)
        .input_rate(vk::VertexInputRate::VERTEX);
    let attribute = |location, format, offset| {
        vk::VertexInputAttributeDescription::default()
            .location(location)
            .binding(0)
            .format(format)
            .offset(offset)
    };
    (
        [binding],
        [
            attribute(0, vk::Format::R32G32_SFLOAT, 0),
            attribute(1, vk::Format::R32G32B32_SFLOAT, 8),
        ],
    )
}

fn create_graphics_batch(
    s: &Shared,
    variants: &[(u32, bool)],
    flags: vk::PipelineCreateFlags,
    with_feedback: bool,
    made: &mut Vec<vk::Pipeline>,
) -> Tally {
    // The cull mode follows each variant's own parity; under --cull-twins the rest follows its
    // even neighbour.
    let culls: Vec<bool> = variants.iter().map(|(v, _)| v % 2 == 0).collect();
    let twinned: Vec<(u32, bool)> = variants
        .iter()
        .map(|&(v, dynamic)| (if s.cull_twins { v & !1 } else { v }, dynamic))
        .collect();
    let variants = &twinned[..];
    let scale_entry = [vk::SpecializationMapEntry::default()
        .constant_id(0)
        .offset(0)
        .size(4)];
    let scales: Vec<[u8; 4]> = variants
        .iter()
        .map(|(v, _)| (1.0 + *v as f32 / 64.0).to_le_bytes())
        .collect();
    let specs: Vec<vk::SpecializationInfo> = scales
        .iter()
        .map(|b| {
            vk::SpecializationInfo::default()
                .map_entries(&scale_entry)
                .data(b)
        })
        .collect();
    let stages: Vec<[vk::PipelineShaderStageCreateInfo; 2]> = specs
        .iter()
        .map(|spec| {
            [
                vk::PipelineShaderStageCreateInfo::default()
                    .stage(vk::ShaderStageFlags::VERTEX)
                    .module(s.vert_module)
                    .name(c"main"),
                vk::PipelineShaderStageCreateInfo::default()
                    .stage(vk::ShaderStageFlags::FRAGMENT)
                    .module(s.frag_module)
                    .name(c"main")
                    .specialization_info(spec),
            ]
        })
        .collect();
    let (bindings, attributes) = triangle_vertex_input(20);
    let vertex_input = vk::PipelineVertexInputStateCreateInfo::default()
        .vertex_binding_descriptions(&bindings)
        .vertex_attribute_descriptions(&attributes);
    let topologies = [
        vk::PrimitiveTopology::TRIANGLE_LIST,
        vk::PrimitiveTopology::TRIANGLE_STRIP,
        vk::PrimitiveTopology::LINE_LIST,
    ];
    let assemblies: Vec<vk::PipelineInputAssemblyStateCreateInfo> = variants
        .iter()
        .map(|(v, _)| {
            vk::PipelineInputAssemblyStateCreateInfo::default()
                .topology(topologies[(*v % 3) as usize])
        })
        .collect();
    let viewport = vk::PipelineViewportStateCreateInfo::default()
        .viewport_count(1)
        .scissor_count(1);
    let mut clips: Vec<vk::PipelineRasterizationDepthClipStateCreateInfoEXT> = variants
        .iter()
        .map(|_| {
            vk::PipelineRasterizationDepthClipStateCreateInfoEXT::default().depth_clip_enable(true)
        })
        .collect();
    let mut lines: Vec<vk::PipelineRasterizationLineStateCreateInfoEXT> = variants
        .iter()
        .map(|_| vk::PipelineRasterizationLineStateCreateInfoEXT::default())
        .collect();
    let rasters: Vec<vk::PipelineRasterizationStateCreateInfo> = culls
        .iter()
        .zip(clips.iter_mut().zip(lines.iter_mut()))
        .map(|(cull_back, (clip, line))| {
            let mut raster = vk::PipelineRasterizationStateCreateInfo::default();
            if s.depth_clip {
                raster = raster.push_next(clip);
            }
            if s.line_state {
                raster = raster.push_next(line);
            }
            raster
                .polygon_mode(vk::PolygonMode::FILL)
                .cull_mode(if *cull_back {
                    vk::CullModeFlags::BACK
                } else {
                    vk::CullModeFlags::NONE
                })
                .front_face(vk::FrontFace::COUNTER_CLOCKWISE)
                .line_width(1.0)
        })
        .collect();
    let multisample = vk::PipelineMultisampleStateCreateInfo::default()
        .rasterization_samples(vk::SampleCountFlags::TYPE_1);
    let depth = vk::PipelineDepthStencilStateCreateInfo::default()
        .depth_test_enable(true)
        .depth_write_enable(true)
        .depth_compare_op(vk::CompareOp::LESS_OR_EQUAL);
    let blend_attachments: Vec<[vk::PipelineColorBlendAttachmentState; 1]> = variants
        .iter()
        .map(|(v, _)| {
            [vk::PipelineColorBlendAttachmentState::default()
                .blend_enable(v % 4 >= 2)
                .src_color_blend_factor(vk::BlendFactor::SRC_ALPHA)
                .dst_color_blend_factor(vk::BlendFactor::ONE_MINUS_SRC_ALPHA)
                .color_blend_op(vk::BlendOp::ADD)
                .src_alpha_blend_factor(vk::BlendFactor::ONE)
                .dst_alpha_blend_factor(vk::BlendFactor::ZERO)
                .alpha_blend_op(vk::BlendOp::ADD)
                .color_write_mask(vk::ColorComponentFlags::RGBA)]
        })
        .collect();
    let blends: Vec<vk::PipelineColorBlendStateCreateInfo> = blend_attachments
        .iter()
        .map(|a| vk::PipelineColorBlendStateCreateInfo::default().attachments(a))
        .collect();
    let plain_dynamic = [vk::DynamicState::VIEWPORT, vk::DynamicState::SCISSOR];
    let zink = !s.zink_states.is_empty();
    let dynamic_states = if zink {
        &s.zink_states[..]
    } else {
        &plain_dynamic
    };
    let dynamic = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(dynamic_states);
    // zink's: counts dynamic, the structures its dynamic states ignore chained.
    let zink_viewport = vk::PipelineViewportStateCreateInfo::default();
    let mut ignored: Vec<zink::Ignored> = variants.iter().map(|_| Default::default()).collect();
    let zink_blocks: Vec<_> = ignored
        .iter_mut()
        .zip(rasters.iter().zip(&blends))
        .map(|(ig, (r, b))| ig.chain(&s.zink_states, *r, zink_viewport, *b))
        .collect();
    let color_formats = [vk::Format::R8G8B8A8_UNORM];
    let mut renderings: Vec<vk::PipelineRenderingCreateInfo> = variants
        .iter()
        .map(|_| {
            vk::PipelineRenderingCreateInfo::default()
                .color_attachment_formats(&color_formats)
                .depth_attachment_format(vk::Format::D32_SFLOAT)
        })
        .collect();
    let mut feedback = FeedbackSlots::<2>::new(variants.len());
    let mut feedback_infos = feedback.infos();
    let mut robustness: Vec<_> = variants.iter().map(|(v, _)| robustness(*v)).collect();
    let mut infos = Vec::with_capacity(variants.len());
    for (i, (((rendering, fb), (_, dynamic_rendering)), robust)) in renderings
        .iter_mut()
        .zip(feedback_infos.iter_mut())
        .zip(variants)
        .zip(robustness.iter_mut())
        .enumerate()
    {
        let mut ci = vk::GraphicsPipelineCreateInfo::default()
            .flags(flags)
            .stages(&stages[i])
            .vertex_input_state(&vertex_input)
            .input_assembly_state(&assemblies[i])
            .viewport_state(&viewport)
            .rasterization_state(&rasters[i])
            .multisample_state(&multisample)
            .depth_stencil_state(&depth)
            .color_blend_state(&blends[i])
            .dynamic_state(&dynamic)
            .layout(s.graphics_layout);
        if zink {
            let (raster, viewport, blend) = &zink_blocks[i];
            ci = ci
                .rasterization_state(raster)
                .viewport_state(viewport)
                .color_blend_state(blend);
            if s.zink_states.contains(&vk::DynamicState::VERTEX_INPUT_EXT) {
                // Ignored, and so may be NULL.
                ci.p_vertex_input_state = std::ptr::null();
            }
        }
        if *dynamic_rendering && s.dynamic_rendering {
            ci = ci.push_next(rendering);
        } else {
            ci = ci.render_pass(s.render_pass).subpass(0);
        }
        if with_feedback {
            ci = ci.push_next(fb);
        }
        if s.pipeline_robustness {
            ci = ci.push_next(robust);
        }
        infos.push(ci);
    }
    let (r, pipelines, took) = timed_call(s, s.device.fp_v1_0().create_graphics_pipelines, &infos);
    drop(infos);
    count(
        r,
        &pipelines,
        if with_feedback {
            &feedback.pipeline
        } else {
            &[]
        },
        true,
        took,
        made,
    )
}

/// The CPU's answer for compute variant `v` at element `i` with push constant `add`.
fn expected(v: u32, i: u32, add: u32) -> u32 {
    let [mul, variant] = compute_spec(v);
    let mut x = i.wrapping_mul(mul).wrapping_add(add);
    for _ in 0..variant % 7 {
        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
    }
    x.wrapping_add(variant)
}

/// Builds compute variant 5 alone, dispatches it over a host-visible buffer, and checks every value.
fn dispatch_and_check(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    s: &Shared,
    queue_family: u32,
) -> Result<(), String> {
    const VARIANT: u32 = 5;
    const ADD: u32 = 1000;
    let d = &s.device;
    let err = |what: &'static str| move |e: vk::Result| format!("{what}: {e}");
    let size = (DISPATCH_ELEMENTS * 4) as u64;
    // SAFETY (whole function): valid Vulkan usage on a live device; every object is destroyed
    // before returning, after the fence says the GPU is done.
    unsafe {
        let buffer = d
            .create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(size)
                    .usage(vk::BufferUsageFlags::STORAGE_BUFFER),
                None,
            )
            .map_err(err("vkCreateBuffer"))?;
        let req = d.get_buffer_memory_requirements(buffer);
        let mem_props = instance.get_physical_device_memory_properties(physical);
        let wanted = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let type_index = (0..mem_props.memory_type_count)
            .find(|i| {
                req.memory_type_bits & (1 << i) != 0
                    && mem_props.memory_types[*i as usize]
                        .property_flags
                        .contains(wanted)
            })
            .ok_or("no host-visible memory")?;
        let memory = d
            .allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(type_index),
                None,
            )
            .map_err(err("vkAllocateMemory"))?;
        d.bind_buffer_memory(buffer, memory, 0)
            .map_err(err("vkBindBufferMemory"))?;
        let mapped = d
            .map_memory(memory, 0, size, vk::MemoryMapFlags::empty())
            .map_err(err("vkMapMemory"))? as *mut u32;
        std::ptr::write_bytes(mapped, 0xAB, DISPATCH_ELEMENTS as usize);

        let set_layout = set_layout(d, &storage_binding())?;
        let pool_sizes = [vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)];
        let pool = d
            .create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(1)
                    .pool_sizes(&pool_sizes),
                None,
            )
            .map_err(err("vkCreateDescriptorPool"))?;
        let layouts = [set_layout];
        let set = d
            .allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(pool)
                    .set_layouts(&layouts),
            )
            .map_err(err("vkAllocateDescriptorSets"))?[0];
        let buffer_info = [vk::DescriptorBufferInfo::default()
            .buffer(buffer)
            .range(size)];
        d.update_descriptor_sets(
            &[vk::WriteDescriptorSet::default()
                .dst_set(set)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(&buffer_info)],
            &[],
        );

        let mut made = Vec::new();
        let tally = create_compute_batch(
            s,
            &[VARIANT],
            vk::PipelineCreateFlags::empty(),
            false,
            &mut made,
        );
        let pipeline = *made.first().ok_or(format!(
            "the dispatch pipeline was not made ({} failed)",
            tally.failed
        ))?;

        let cmd_pool = d
            .create_command_pool(
                &vk::CommandPoolCreateInfo::default().queue_family_index(queue_family),
                None,
            )
            .map_err(err("vkCreateCommandPool"))?;
        let cmd = d
            .allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(cmd_pool)
                    .command_buffer_count(1),
            )
            .map_err(err("vkAllocateCommandBuffers"))?[0];
        d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())
            .map_err(err("vkBeginCommandBuffer"))?;
        d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
        d.cmd_bind_descriptor_sets(
            cmd,
            vk::PipelineBindPoint::COMPUTE,
            s.compute_layout,
            0,
            &[set],
            &[],
        );
        d.cmd_push_constants(
            cmd,
            s.compute_layout,
            vk::ShaderStageFlags::COMPUTE,
            0,
            &ADD.to_le_bytes(),
        );
        d.cmd_dispatch(cmd, DISPATCH_ELEMENTS / 64, 1, 1);
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ)];
        d.cmd_pipeline_barrier(
            cmd,
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::PipelineStageFlags::HOST,
            vk::DependencyFlags::empty(),
            &barrier,
            &[],
            &[],
        );
        d.end_command_buffer(cmd)
            .map_err(err("vkEndCommandBuffer"))?;
        let fence = d
            .create_fence(&vk::FenceCreateInfo::default(), None)
            .map_err(err("vkCreateFence"))?;
        let cmds = [cmd];
        d.queue_submit(
            d.get_device_queue(queue_family, 0),
            &[vk::SubmitInfo::default().command_buffers(&cmds)],
            fence,
        )
        .map_err(err("vkQueueSubmit"))?;
        d.wait_for_fences(&[fence], true, u64::MAX)
            .map_err(err("vkWaitForFences"))?;

        let out = std::slice::from_raw_parts(mapped, DISPATCH_ELEMENTS as usize);
        let wrong = (0..DISPATCH_ELEMENTS)
            .map(|i| (i, out[i as usize]))
            .find(|(i, got)| *got != expected(VARIANT, *i, ADD));

        d.destroy_fence(fence, None);
        d.destroy_command_pool(cmd_pool, None);
        d.destroy_pipeline(pipeline, None);
        d.destroy_descriptor_pool(pool, None);
        d.destroy_descriptor_set_layout(set_layout, None);
        d.unmap_memory(memory);
        d.destroy_buffer(buffer, None);
        d.free_memory(memory, None);
        match wrong {
            None => Ok(()),
            Some((i, got)) => Err(format!(
                "element {i} is {got:#x}, expected {:#x}",
                expected(VARIANT, i, ADD)
            )),
        }
    }
}

/// The commands `vkGetDeviceProcAddr` gave of extensions the application did not enable (a
/// layer that enables one for itself must not hand them out).
fn commands_not_enabled(
    instance: &ash::Instance,
    device: &ash::Device,
    enabled: &[CString],
    device_api_below_1_3: bool,
) -> Vec<String> {
    const COMMANDS: [(&CStr, &CStr); 4] = [
        (c"VK_KHR_pipeline_binary", c"vkCreatePipelineBinariesKHR"),
        (c"VK_KHR_pipeline_binary", c"vkGetPipelineKeyKHR"),
        (c"VK_KHR_maintenance5", c"vkCmdBindIndexBuffer2KHR"),
        // Core from Vulkan 1.3, where a driver may give its KHR name too: asked below it only.
        (c"VK_KHR_dynamic_rendering", c"vkCmdBeginRenderingKHR"),
    ];
    COMMANDS
        .iter()
        .filter(|(extension, _)| device_api_below_1_3 || *extension != c"VK_KHR_dynamic_rendering")
        .filter(|(extension, _)| !enabled.iter().any(|e| e.as_c_str() == *extension))
        // SAFETY: a live device and a NUL-terminated name.
        .filter(|(_, command)| unsafe {
            (instance.fp_v1_0().get_device_proc_addr)(device.handle(), command.as_ptr()).is_some()
        })
        .map(|(_, command)| command.to_string_lossy().into_owned())
        .collect()
}
