//! Replays a catalog on a Vulkan device through the loader (so pipekeep, when enabled, sees an
//! ordinary application): samplers, set layouts, pipeline layouts, shader modules and render
//! passes first, then every compute and graphics pipeline from N threads, each creation timed on
//! its own. What cannot be made (a missing object, a malformed entry, a feature or limit the
//! device lacks) is skipped with its reason, never turned into an invalid Vulkan call.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ash::vk;
use ash::vk::Handle;
use base64::Engine as _;
use serde_json::Value;

use super::objects::{parse_ref, AppInfo, Catalog};
use super::record::stype;
use crate::sync::Unpoisoned;

/// The application's own pipeline cache during a replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AppCache {
    /// No cache: every pipeline is built as an application without one would.
    #[default]
    None,
    /// One in-memory cache shared by every thread.
    Memory,
    /// One monolithic cache loaded whole from a file at start and saved at exit (D744's way).
    File(PathBuf),
    /// A fresh cache for each pipeline, its data read after the build and the cache destroyed,
    /// all inside the timed call: what keeping per pipeline costs the driver itself, with no
    /// layer (the `cache` backend builds a miss this way).
    Each,
}

impl std::str::FromStr for AppCache {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(AppCache::None),
            "memory" => Ok(AppCache::Memory),
            "each" => Ok(AppCache::Each),
            _ => s
                .strip_prefix("file=")
                .map(|p| AppCache::File(p.into()))
                .ok_or_else(|| format!("{s:?}: expected none, memory, each or file=PATH")),
        }
    }
}

/// How a replay runs. The default: one thread, no application cache, the first device, the
/// recorded title, nothing asked before each pipeline, the device destroyed at once.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub threads: usize,
    pub app_cache: AppCache,
    pub device_index: usize,
    /// pApplicationName; the recorded application's name when `None`.
    pub title: Option<String>,
    pub progress: bool,
    /// Asked before each pipeline: `true` ends the replay there (pipekeep's background rebuild
    /// stops at `vkDestroyDevice`).
    pub stop: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Run first on each thread that creates pipelines.
    pub worker_start: Option<WorkerStart>,
    /// Asked before each pipeline (it may wait): `false` ends the replay there (pipekeep's
    /// background rebuild waits while the application builds pipelines of its own).
    pub before_each: Option<BeforeEach>,
    /// How long the device lives after the last pipeline, before it is destroyed: an
    /// application that goes on after its loading (pipekeep's threads work meanwhile).
    pub linger: std::time::Duration,
    /// Make the instance and device as translation layers and emulators do: every extension
    /// offered, every feature structure reported ([`super::every_extension`]).
    pub every_extension: bool,
}

/// What [`Options::worker_start`] runs.
#[derive(Clone)]
pub struct WorkerStart(pub Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for WorkerStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerStart")
    }
}

/// What [`Options::before_each`] runs.
#[derive(Clone)]
pub struct BeforeEach(pub Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for BeforeEach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeEach")
    }
}

/// What a replay did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Summary {
    pub device: String,
    pub driver_version: u32,
    pub application: String,
    pub threads: usize,
    /// Device configurations replayed (each its own instance and device, as recorded).
    pub configurations: usize,
    /// Configurations this device cannot make, each with why: their pipelines are not replayed
    /// (`pipelines_left`).
    pub configurations_skipped: Vec<String>,
    pub pipelines_left: usize,
    pub pipelines: usize,
    pub made: usize,
    pub made_compute: usize,
    pub made_graphics: usize,
    /// Skipped pipelines by reason.
    pub skipped: BTreeMap<String, usize>,
    /// Malformed entries, each with its name and why.
    pub malformed: Vec<String>,
    pub creation_ms: f64,
    pub wall_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub slowest_ms: f64,
    pub slowest: String,
    /// With a monolithic cache file: the time to read it and make the driver's cache from it,
    /// spent before the first pipeline and so in neither `creation_ms` nor `wall_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_cache_load_ms: Option<f64>,
    /// With an application cache: the size of the data it would save after the run (how whole
    /// a layer below it left it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_cache_bytes: Option<usize>,
    /// Each made pipeline's creation time in ms, in the order they finished.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub times_ms: Vec<f64>,
}

impl Summary {
    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }

    /// Adds another configuration's replay to this one.
    fn add(&mut self, o: Summary) {
        if self.configurations == 0 {
            self.device = o.device;
            self.driver_version = o.driver_version;
            self.application = o.application;
        }
        self.threads = self.threads.max(o.threads);
        self.configurations += o.configurations;
        self.pipelines += o.pipelines;
        self.made += o.made;
        self.made_compute += o.made_compute;
        self.made_graphics += o.made_graphics;
        for (why, n) in o.skipped {
            *self.skipped.entry(why).or_default() += n;
        }
        self.malformed.extend(o.malformed);
        self.creation_ms += o.creation_ms;
        self.wall_ms += o.wall_ms;
        if o.slowest_ms > self.slowest_ms {
            self.slowest_ms = o.slowest_ms;
            self.slowest = o.slowest;
        }
        if let Some(ms) = o.app_cache_load_ms {
            *self.app_cache_load_ms.get_or_insert(0.0) += ms;
        }
        self.app_cache_bytes = o.app_cache_bytes.or(self.app_cache_bytes);
        self.times_ms.extend(o.times_ms);
        let (p50, p99) = percentiles(&self.times_ms);
        (self.p50_ms, self.p99_ms) = (p50, p99);
    }
}

/// The median and 99th percentile of creation times.
fn percentiles(times: &[f64]) -> (f64, f64) {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        sorted
            .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    (pct(0.5), pct(0.99))
}

fn u(v: &Value, k: &str) -> u32 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0) as u32
}

fn i(v: &Value, k: &str) -> i32 {
    v.get(k).and_then(Value::as_i64).unwrap_or(0) as i32
}

fn f(v: &Value, k: &str) -> f32 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0) as f32
}

fn arr<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The `VkPipelineRobustnessCreateInfoEXT` a pipeline's or a stage's `pNext` holds, if any.
fn robustness(v: &Value) -> Option<vk::PipelineRobustnessCreateInfoEXT<'static>> {
    find_next(v, stype::PIPELINE_ROBUSTNESS).map(|r| vk::PipelineRobustnessCreateInfoEXT {
        storage_buffers: vk::PipelineRobustnessBufferBehaviorEXT::from_raw(
            u(r, "storageBuffers") as i32
        ),
        uniform_buffers: vk::PipelineRobustnessBufferBehaviorEXT::from_raw(
            u(r, "uniformBuffers") as i32
        ),
        vertex_inputs: vk::PipelineRobustnessBufferBehaviorEXT::from_raw(
            u(r, "vertexInputs") as i32
        ),
        images: vk::PipelineRobustnessImageBehaviorEXT::from_raw(u(r, "images") as i32),
        ..Default::default()
    })
}

/// Refuses a `pNext` array holding anything but `known` sTypes.
fn only(v: &Value, known: &[i32], place: &str) -> Result<(), String> {
    match arr(v, "pNext")
        .iter()
        .map(|s| i(s, "sType"))
        .find(|s| !known.contains(s))
    {
        Some(s) => Err(format!("unsupported structure sType {s} in {place}")),
        None => Ok(()),
    }
}

fn find_next(v: &Value, stype: i32) -> Option<&Value> {
    arr(v, "pNext").iter().find(|s| i(s, "sType") == stype)
}

/// Everything the pipelines need: the device, the objects by hash, and what the device can do.
struct Replay {
    device: ash::Device,
    samplers: HashMap<u64, vk::Sampler>,
    set_layouts: HashMap<u64, vk::DescriptorSetLayout>,
    pipeline_layouts: HashMap<u64, vk::PipelineLayout>,
    modules: HashMap<u64, vk::ShaderModule>,
    render_passes: HashMap<u64, vk::RenderPass>,
    /// Why an object could not be made, by hash.
    failed: HashMap<u64, String>,
    subgroup: vk::PhysicalDeviceSubgroupSizeControlProperties<'static>,
    subgroup_size_control: bool,
    mesh_shaders: bool,
    app_cache: vk::PipelineCache,
    /// [`AppCache::Each`]: every pipeline through a fresh cache of its own.
    cache_each: bool,
}

// SAFETY: the handles are plain identifiers, and ash::Device's function table is immutable.
unsafe impl Sync for Replay {}

/// The features the recorded application enabled, where this device has them.
struct Features {
    core: vk::PhysicalDeviceFeatures,
    v11: vk::PhysicalDeviceVulkan11Features<'static>,
    v12: vk::PhysicalDeviceVulkan12Features<'static>,
    v13: vk::PhysicalDeviceVulkan13Features<'static>,
    robustness2: Option<vk::PhysicalDeviceRobustness2FeaturesEXT<'static>>,
    mesh: Option<vk::PhysicalDeviceMeshShaderFeaturesEXT<'static>>,
    extensions: Vec<&'static CStr>,
}

fn device_extensions(instance: &ash::Instance, physical: vk::PhysicalDevice) -> Vec<CString> {
    // SAFETY: a physical device of this instance.
    unsafe { instance.enumerate_device_extension_properties(physical) }
        .unwrap_or_default()
        .iter()
        .map(|p| {
            p.extension_name_as_c_str()
                .map(CStr::to_owned)
                .unwrap_or_default()
        })
        .collect()
}

/// Enables every core feature the device has, but follows the recording for those that change
/// how code is compiled (robustness) and for extension features.
fn choose_features(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    recorded: &Value,
) -> Features {
    let available = device_extensions(instance, physical);
    let has = |name: &CStr| available.iter().any(|e| e.as_c_str() == name);
    let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
    let mut v13 = vk::PhysicalDeviceVulkan13Features::default();
    let mut rob2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
    let mut mesh = vk::PhysicalDeviceMeshShaderFeaturesEXT::default();
    let mut f2 = vk::PhysicalDeviceFeatures2::default()
        .push_next(&mut v11)
        .push_next(&mut v12)
        .push_next(&mut v13);
    if has(ash::ext::robustness2::NAME) {
        f2 = f2.push_next(&mut rob2);
    }
    if has(ash::ext::mesh_shader::NAME) {
        f2 = f2.push_next(&mut mesh);
    }
    // SAFETY: a valid chain of feature structs.
    unsafe { instance.get_physical_device_features2(physical, &mut f2) };
    let mut core = f2.features;
    core.robust_buffer_access &= u(recorded, "robustBufferAccess");
    v13.robust_image_access &=
        find_next(recorded, 1000335000).map_or(0, |r| u(r, "robustImageAccess"));
    let (v11, v12, v13) = (strip(v11), strip(v12), strip(v13));
    let mut extensions = Vec::new();
    if has(ash::khr::push_descriptor::NAME) {
        extensions.push(ash::khr::push_descriptor::NAME);
    }
    let robustness2 = find_next(recorded, 1000286000)
        .filter(|_| has(ash::ext::robustness2::NAME))
        .map(|r| {
            extensions.push(ash::ext::robustness2::NAME);
            vk::PhysicalDeviceRobustness2FeaturesEXT::default()
                .robust_buffer_access2(
                    rob2.robust_buffer_access2 != 0
                        && u(r, "robustBufferAccess2") != 0
                        && core.robust_buffer_access != 0,
                )
                .robust_image_access2(
                    rob2.robust_image_access2 != 0 && u(r, "robustImageAccess2") != 0,
                )
                .null_descriptor(rob2.null_descriptor != 0 && u(r, "nullDescriptor") != 0)
        });
    let mesh = find_next(recorded, 1000328000)
        .filter(|_| has(ash::ext::mesh_shader::NAME) && mesh.mesh_shader != 0)
        .map(|r| {
            extensions.push(ash::ext::mesh_shader::NAME);
            vk::PhysicalDeviceMeshShaderFeaturesEXT::default()
                .mesh_shader(true)
                .task_shader(mesh.task_shader != 0 && u(r, "taskShader") != 0)
        });
    Features {
        core,
        v11,
        v12,
        v13,
        robustness2,
        mesh,
        extensions,
    }
}

/// A device with every core feature the physical device has, and the recorded robustness and
/// extension features. Returns it with whether subgroup size control and mesh shaders are on.
unsafe fn chosen_device(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    recorded: &Value,
) -> Result<(ash::Device, bool, bool), String> {
    let mut features = choose_features(instance, physical, recorded);
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&priorities)];
    let extension_ptrs: Vec<*const std::ffi::c_char> =
        features.extensions.iter().map(|e| e.as_ptr()).collect();
    let mut device_ci = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&extension_ptrs)
        .enabled_features(&features.core)
        .push_next(&mut features.v11)
        .push_next(&mut features.v12)
        .push_next(&mut features.v13);
    if let Some(r) = features.robustness2.as_mut() {
        device_ci = device_ci.push_next(r);
    }
    if let Some(m) = features.mesh.as_mut() {
        device_ci = device_ci.push_next(m);
    }
    // SAFETY: a valid create info whose chain outlives the call.
    let device = unsafe { instance.create_device(physical, &device_ci, None) }
        .map_err(|e| format!("vkCreateDevice: {e}"))?;
    Ok((
        device,
        features.v13.subgroup_size_control != 0,
        features.mesh.is_some(),
    ))
}

/// A device with every extension offered and every feature structure reported on. Returns it
/// with whether subgroup size control and mesh shaders are on.
unsafe fn every_extension_device(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
) -> Result<(ash::Device, bool, bool), String> {
    // SAFETY: a physical device of this instance.
    let every = unsafe { super::every_extension::EveryExtension::of(instance, physical) };
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&priorities)];
    let ci = every.apply(vk::DeviceCreateInfo::default().queue_create_infos(&queues));
    // SAFETY: a valid create info whose chain lives in `every`, past the call.
    let device = unsafe { instance.create_device(physical, &ci, None) }
        .map_err(|e| format!("vkCreateDevice with every extension: {e}"))?;
    let subgroup_size_control = every.enables_feature(
        vk::StructureType::PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES,
        0,
    );
    let mesh_shaders = every.enables_feature(
        vk::StructureType::PHYSICAL_DEVICE_MESH_SHADER_FEATURES_EXT,
        1,
    );
    Ok((device, subgroup_size_control, mesh_shaders))
}

/// Why this physical device does not offer a feature the record enables: the first such, by
/// structure and index (the core features where `stype` is 0).
fn feature_not_offered(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    state: &crate::key::desc::DeviceState,
    instance_11: bool,
) -> Option<String> {
    let enabled_but_not_offered = |wanted: &[u32], offered: &[u32]| {
        wanted
            .iter()
            .enumerate()
            .find(|(i, w)| **w != 0 && offered.get(*i).is_none_or(|o| *o == 0))
            .map(|(i, _)| i)
    };
    if let Some(core) = &state.core_features {
        // SAFETY: a physical device of this instance.
        let offered = unsafe { instance.get_physical_device_features(physical) };
        let n = size_of::<vk::PhysicalDeviceFeatures>() / 4;
        // SAFETY: VkPhysicalDeviceFeatures is exactly its VkBool32s, in order.
        let offered = unsafe {
            std::slice::from_raw_parts(
                &offered as *const vk::PhysicalDeviceFeatures as *const u32,
                n,
            )
        };
        if let Some(i) = enabled_but_not_offered(core, offered) {
            return Some(format!("the device does not offer core feature {i}"));
        }
    }
    // Structures can only be asked of an instance of Vulkan 1.1 (the application's was; a 1.0
    // one chained none the driver reads): vkCreateDevice says the rest.
    if !instance_11 || state.features.is_empty() {
        return None;
    }
    let zeroed: Vec<(i32, Vec<u32>)> = state
        .features
        .iter()
        .map(|(stype, values)| (*stype, vec![0; values.len()]))
        .collect();
    let chain = super::feature_chain::FeatureChain::new(&zeroed);
    let mut f2 = vk::PhysicalDeviceFeatures2 {
        p_next: chain.head(),
        ..Default::default()
    };
    // SAFETY: a chain of feature structures, each as long as its sType's (the record read them
    // so), living in `chain` through the call.
    unsafe { instance.get_physical_device_features2(physical, &mut f2) };
    for (n, (stype, wanted)) in state.features.iter().enumerate() {
        if let Some(i) = enabled_but_not_offered(wanted, &chain.values(n, wanted.len())) {
            return Some(format!(
                "the device does not offer feature {i} of structure sType {stype}"
            ));
        }
    }
    None
}

/// A device made with exactly the extensions and feature structures a record names (each
/// feature structure rebuilt from its `sType` and `VkBool32`s), where this physical device
/// offers them all. Returns it with whether subgroup size control and mesh shaders are on.
unsafe fn exact_device(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    state: &crate::key::desc::DeviceState,
    instance_11: bool,
) -> Result<(ash::Device, bool, bool), String> {
    let offered = device_extensions(instance, physical);
    let mut extensions = Vec::new();
    for e in &state.extensions {
        let name = CString::new(e.clone()).map_err(|e| e.to_string())?;
        if !offered.contains(&name) {
            return Err(format!(
                "the device does not offer {}, which the recorded pipelines were made with",
                name.to_string_lossy()
            ));
        }
        extensions.push(name);
    }
    if let Some(why) = feature_not_offered(instance, physical, state, instance_11) {
        return Err(why);
    }
    let extension_ptrs: Vec<*const std::ffi::c_char> =
        extensions.iter().map(|e| e.as_ptr()).collect();
    let chain = super::feature_chain::FeatureChain::new(&state.features);
    let next = chain.head();
    let mut core = vk::PhysicalDeviceFeatures::default();
    if let Some(values) = &state.core_features {
        let n = values
            .len()
            .min(size_of::<vk::PhysicalDeviceFeatures>() / 4);
        // SAFETY: VkPhysicalDeviceFeatures is exactly its VkBool32s, in order.
        unsafe {
            std::ptr::copy_nonoverlapping(
                values.as_ptr(),
                &mut core as *mut vk::PhysicalDeviceFeatures as *mut u32,
                n,
            )
        };
    }
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&priorities)];
    let mut device_ci = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&extension_ptrs);
    if state.core_features.is_some() {
        device_ci = device_ci.enabled_features(&core);
    }
    device_ci.p_next = next;
    // SAFETY: a create info whose chain (in `buffers`) outlives the call.
    let device = unsafe { instance.create_device(physical, &device_ci, None) }
        .map_err(|e| format!("vkCreateDevice as recorded: {e}"))?;
    drop(chain);
    let feature = |stype: i32, index: usize| {
        state
            .features
            .iter()
            .find(|(s, _)| *s == stype)
            .and_then(|(_, v)| v.get(index))
            .is_some_and(|b| *b != 0)
    };
    // Vulkan 1.3's subgroupSizeControl (its eighth), or the structure of its own (its first).
    let subgroup_size_control = feature(53, 7)
        || feature(
            vk::StructureType::PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES.as_raw(),
            0,
        );
    let mesh_shaders = feature(1_000_328_000, 1);
    Ok((device, subgroup_size_control, mesh_shaders))
}

/// A features struct with its chain pointer cleared, ready to be chained again.
fn strip<T: vk::TaggedStructure>(mut s: T) -> T {
    // SAFETY: every Vulkan struct starts with sType and pNext, as BaseOutStructure.
    unsafe { (*(&mut s as *mut T as *mut vk::BaseOutStructure)).p_next = std::ptr::null_mut() };
    s
}

/// The pipelines to replay under one instance and device.
struct Group {
    /// The application entry's hash, for a pipekeep record's configuration.
    hash: Option<u64>,
    app: AppInfo,
    catalogs: Vec<Catalog>,
}

/// The catalogs as groups to replay: each configuration of a pipekeep record (its application
/// entries linked to their pipelines) on its own instance and device, equal ones together; every
/// database without links together, under the first application among them (a Fossilize
/// database of one application).
fn groups_of(catalogs: &[Catalog]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut unlinked: Option<usize> = None;
    for c in catalogs {
        if c.links.is_empty() {
            match unlinked {
                Some(i) => {
                    if groups[i].hash.is_none() && c.app.is_some() {
                        groups[i].app = c.app.clone().unwrap_or_default();
                    }
                    groups[i].catalogs.push(c.clone());
                }
                None => {
                    unlinked = Some(groups.len());
                    groups.push(Group {
                        hash: None,
                        app: c.app.clone().unwrap_or_default(),
                        catalogs: vec![c.clone()],
                    });
                }
            }
            continue;
        }
        for config in c.configurations() {
            match groups
                .iter_mut()
                .find(|g| g.hash.is_some() && g.hash == config.hash)
            {
                Some(g) => g.catalogs.push(config.catalog),
                None => groups.push(Group {
                    hash: config.hash,
                    app: config.app.unwrap_or_default(),
                    catalogs: vec![config.catalog],
                }),
            }
        }
    }
    groups
}

/// Replays `catalogs` and reports: each device configuration they hold on an instance and a
/// device of its own, made as the application made them (its `VkApplicationInfo`, its device
/// extensions and feature structures), so that pipekeep keys every pipeline as the application's
/// next run looks it up. A configuration this device cannot make is skipped and said
/// ([`Summary::configurations_skipped`]); a database that is not pipekeep's record fails then.
pub fn replay(catalogs: &[Catalog], options: &Options) -> Result<Summary, String> {
    // SAFETY: loads the system's Vulkan loader; nothing else of ours runs meanwhile.
    let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("no Vulkan loader: {e}"))?;
    let mut total = Summary {
        threads: options.threads.max(1),
        ..Summary::default()
    };
    // Pipelines whose configuration's entry is damaged: their device is not known here (one
    // made otherwise keys them as no run looks them up). Left to the application's own
    // background rebuild, as a configuration this device cannot make.
    let orphans: usize = catalogs.iter().map(Catalog::orphans).sum();
    if orphans > 0 {
        total.pipelines += orphans;
        total.pipelines_left += orphans;
        total.configurations_skipped.push(format!(
            "a configuration whose application entry is damaged ({orphans} pipelines): its device is not known"
        ));
    }
    for group in groups_of(catalogs) {
        // Another ABI's configuration (a 32-bit build's, replayed by a 64-bit tool): its pipelines
        // keyed here would be this ABI's, looked up by no run. Left to that build's own rebuild.
        let other_abi = group.app.abi != 0 && group.app.abi != crate::store::identity::HOST_ABI;
        let made = if other_abi {
            Err(format!(
                "recorded by a {}-bit build: left to its own background rebuild",
                group.app.abi * 8
            ))
        } else {
            // SAFETY: the loader just loaded; each replay destroys everything it made.
            unsafe { replay_group(&entry, &group, options) }
        };
        match made {
            Ok(summary) => total.add(summary),
            Err(why) if group.app.device.is_some() || other_abi => {
                let left: usize = group
                    .catalogs
                    .iter()
                    .map(|c| c.compute.len() + c.graphics.len() + c.ray_tracing)
                    .sum();
                total.pipelines += left;
                total.pipelines_left += left;
                total.configurations_skipped.push(format!(
                    "{} ({left} pipelines): {why}",
                    describe(&group.app)
                ));
            }
            Err(why) => return Err(why),
        }
    }
    Ok(total)
}

/// A configuration in words, for the skipped ones.
fn describe(app: &AppInfo) -> String {
    let api = app.api_version;
    format!(
        "application {:?} engine {:?} API {}.{}",
        app.name.as_deref().unwrap_or(""),
        app.engine.as_deref().unwrap_or(""),
        vk::api_version_major(api),
        vk::api_version_minor(api)
    )
}

/// One group on an instance and a device of its own.
///
/// # Safety
/// `entry` must be a loaded Vulkan loader.
unsafe fn replay_group(
    entry: &ash::Entry,
    group: &Group,
    options: &Options,
) -> Result<Summary, String> {
    let recorded = &group.app;
    if let Some(state) = recorded.device.as_ref().filter(|d| !d.unknown.is_empty()) {
        return Err(format!(
            "the application chained structures pipekeep cannot make again (sType {:?})",
            state.unknown
        ));
    }
    let exact = recorded.device.is_some();
    // pipekeep's record: the application's own VkApplicationInfo, names and versions as they
    // were (none where it gave none). Another database: its name, at API 1.3.
    let name = options.title.clone().or(recorded.name.clone());
    let name = if exact {
        name
    } else {
        Some(name.unwrap_or_else(|| "pipekeep-replay".into()))
    };
    let app_name = name
        .clone()
        .map(CString::new)
        .transpose()
        .map_err(|e| e.to_string())?;
    let engine = recorded
        .engine
        .clone()
        .map(CString::new)
        .transpose()
        .map_err(|e| e.to_string())?;
    let api_version = if exact {
        recorded.api_version.max(vk::API_VERSION_1_0)
    } else {
        vk::API_VERSION_1_3
    };
    let mut app = vk::ApplicationInfo::default()
        .application_version(recorded.version)
        .engine_version(recorded.engine_version)
        .api_version(api_version);
    if let Some(n) = &app_name {
        app = app.application_name(n);
    }
    if let Some(e) = &engine {
        app = app.engine_name(e);
    }
    let instance_extensions = if options.every_extension {
        super::every_extension::instance_extensions(entry)
    } else {
        Vec::new()
    };
    let instance_extension_ptrs: Vec<*const std::ffi::c_char> =
        instance_extensions.iter().map(|e| e.as_ptr()).collect();
    // SAFETY (whole function): valid Vulkan usage; every object is destroyed before returning.
    let instance = unsafe {
        entry.create_instance(
            &vk::InstanceCreateInfo::default()
                .application_info(&app)
                .enabled_extension_names(&instance_extension_ptrs),
            None,
        )
    }
    .map_err(|e| format!("vkCreateInstance: {e}"))?;
    let result = unsafe {
        replay_on(
            &instance,
            &group.catalogs,
            options,
            (&recorded.features, recorded.device.as_ref()),
            (name.unwrap_or_default(), api_version),
        )
    };
    unsafe { instance.destroy_instance(None) };
    result
}

unsafe fn replay_on(
    instance: &ash::Instance,
    catalogs: &[Catalog],
    options: &Options,
    (recorded, exact): (&Value, Option<&crate::key::desc::DeviceState>),
    (name, api_version): (String, u32),
) -> Result<Summary, String> {
    let physicals = unsafe { instance.enumerate_physical_devices() }
        .map_err(|e| format!("vkEnumeratePhysicalDevices: {e}"))?;
    let physical = *physicals.get(options.device_index).ok_or_else(|| {
        format!(
            "no device {} ({} found)",
            options.device_index,
            physicals.len()
        )
    })?;
    // An instance of Vulkan 1.0 (as its application made it) has no Properties2.
    let instance_11 = api_version >= vk::API_VERSION_1_1;
    let mut subgroup = vk::PhysicalDeviceSubgroupSizeControlProperties::default();
    let props = if instance_11 {
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup);
        unsafe { instance.get_physical_device_properties2(physical, &mut props2) };
        props2.properties
    } else {
        unsafe { instance.get_physical_device_properties(physical) }
    };
    let subgroup = strip(subgroup);
    let device_name = props
        .device_name_as_c_str()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();

    let (device, subgroup_size_control, mesh_shaders) = match exact {
        _ if options.every_extension => unsafe { every_extension_device(instance, physical) }?,
        // pipekeep's record: the device exactly as the application made it, so that every
        // pipeline keys as it did.
        Some(state) => unsafe { exact_device(instance, physical, state, instance_11) }?,
        None => unsafe { chosen_device(instance, physical, recorded) }?,
    };
    let loading = Instant::now();
    let app_cache = make_app_cache(&device, &options.app_cache)?;
    let app_cache_load_ms = matches!(options.app_cache, AppCache::File(_))
        .then(|| loading.elapsed().as_secs_f64() * 1e3);
    let mut r = Replay::new(
        device,
        subgroup,
        (subgroup_size_control, mesh_shaders),
        app_cache,
    );
    r.cache_each = options.app_cache == AppCache::Each;
    let mut summary = Summary {
        device: device_name,
        driver_version: props.driver_version,
        application: name,
        threads: options.threads.max(1),
        configurations: 1,
        app_cache_load_ms,
        ..Default::default()
    };
    for c in catalogs {
        summary.malformed.extend(
            c.problems
                .iter()
                .map(|p| format!("{}: {}", p.entry, p.reason)),
        );
        unsafe { r.make_objects(c) };
    }
    let jobs: Vec<Job> = catalogs.iter().flat_map(Job::all_of).collect();
    summary.pipelines = jobs.len() + catalogs.iter().map(|c| c.ray_tracing).sum::<usize>();
    for c in catalogs.iter().filter(|c| c.ray_tracing > 0) {
        *summary
            .skipped
            .entry("ray-tracing pipelines are not replayed".into())
            .or_default() += c.ray_tracing;
    }
    unsafe { r.run_jobs(&jobs, options, &mut summary) };
    std::thread::sleep(options.linger);
    if r.app_cache != vk::PipelineCache::null() {
        // SAFETY: the replay's own live cache; the size query of the two-call idiom.
        summary.app_cache_bytes = unsafe { r.device.get_pipeline_cache_data(r.app_cache) }
            .ok()
            .map(|d| d.len());
    }
    let saved = unsafe { save_app_cache(&r.device, r.app_cache, &options.app_cache) };
    unsafe { r.destroy() };
    // SAFETY: the replay's own device; nothing uses it any more.
    unsafe { r.device.destroy_device(None) };
    saved?;
    Ok(summary)
}

/// Replays a catalog's pipelines on a device someone else made and keeps (pipekeep's background
/// rebuild, on the application's device, through pipekeep's own commands): the objects it makes
/// are destroyed after, the device is left as it was. Subgroup sizes are passed as recorded (the
/// driver checks them).
///
/// # Safety
/// `device` must be a live device that outlives the call, its commands loaded.
pub unsafe fn replay_on_device(
    device: ash::Device,
    catalog: &Catalog,
    options: &Options,
) -> Summary {
    let subgroup = vk::PhysicalDeviceSubgroupSizeControlProperties {
        min_subgroup_size: 1,
        max_subgroup_size: 1 << 16,
        required_subgroup_size_stages: vk::ShaderStageFlags::ALL,
        ..Default::default()
    };
    let mut r = Replay::new(device, subgroup, (true, true), vk::PipelineCache::null());
    let mut summary = Summary {
        threads: options.threads.max(1),
        ..Default::default()
    };
    // SAFETY: as the caller vouches; every object is destroyed below.
    unsafe { r.make_objects(catalog) };
    let jobs: Vec<Job> = Job::all_of(catalog).collect();
    summary.pipelines = jobs.len();
    unsafe { r.run_jobs(&jobs, options, &mut summary) };
    unsafe { r.destroy() };
    summary
}

fn make_app_cache(device: &ash::Device, mode: &AppCache) -> Result<vk::PipelineCache, String> {
    let data = match mode {
        AppCache::None | AppCache::Each => return Ok(vk::PipelineCache::null()),
        AppCache::Memory => Vec::new(),
        AppCache::File(p) => std::fs::read(p).unwrap_or_default(),
    };
    // SAFETY: a valid create info; a driver refusing the data gets an empty cache instead.
    unsafe {
        device
            .create_pipeline_cache(
                &vk::PipelineCacheCreateInfo::default().initial_data(&data),
                None,
            )
            .or_else(|_| {
                device.create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None)
            })
            .map_err(|e| format!("vkCreatePipelineCache: {e}"))
    }
}

unsafe fn save_app_cache(
    device: &ash::Device,
    cache: vk::PipelineCache,
    mode: &AppCache,
) -> Result<(), String> {
    if let AppCache::File(path) = mode {
        let data = unsafe { device.get_pipeline_cache_data(cache) }
            .map_err(|e| format!("vkGetPipelineCacheData: {e}"))?;
        let tmp = PathBuf::from(format!("{}.tmp", path.display()));
        std::fs::write(&tmp, data)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| format!("cannot save {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Makes every object of one kind; a malformed one is an error with that reason.
fn made_all<V, T>(
    objects: &BTreeMap<u64, Option<V>>,
    create: impl Fn(&V) -> Result<T, String>,
) -> Vec<(u64, Result<T, String>)> {
    objects
        .iter()
        .map(|(h, v)| {
            (
                *h,
                v.as_ref()
                    .ok_or_else(|| "malformed entry".to_string())
                    .and_then(&create),
            )
        })
        .collect()
}

/// Files a made object by hash, or why it could not be made.
fn keep<T>(
    made_objects: &mut HashMap<u64, T>,
    failed: &mut HashMap<u64, String>,
    hash: u64,
    made: Result<T, String>,
) {
    match made {
        Ok(x) => {
            made_objects.insert(hash, x);
        }
        Err(why) => {
            failed.insert(hash, why);
        }
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

/// A job's index, how long its creation took or why it was skipped, and whether it is graphics.
type JobResult = (usize, Result<Duration, String>, bool);

/// One pipeline to make.
struct Job<'a> {
    hash: u64,
    info: Option<&'a Value>,
    graphics: bool,
}

impl<'a> Job<'a> {
    /// Every pipeline of a catalog: its compute pipelines, then its graphics pipelines.
    fn all_of(catalog: &'a Catalog) -> impl Iterator<Item = Job<'a>> {
        let job = |graphics| {
            move |(hash, info): &'a (u64, Option<Value>)| Job {
                hash: *hash,
                info: info.as_ref(),
                graphics,
            }
        };
        (catalog.compute.iter().map(job(false))).chain(catalog.graphics.iter().map(job(true)))
    }
}

impl Replay {
    /// A replay on `device`, no object made yet; `(subgroup size control, mesh shaders)` on.
    fn new(
        device: ash::Device,
        subgroup: vk::PhysicalDeviceSubgroupSizeControlProperties<'static>,
        (subgroup_size_control, mesh_shaders): (bool, bool),
        app_cache: vk::PipelineCache,
    ) -> Replay {
        Replay {
            device,
            samplers: HashMap::new(),
            set_layouts: HashMap::new(),
            pipeline_layouts: HashMap::new(),
            modules: HashMap::new(),
            render_passes: HashMap::new(),
            failed: HashMap::new(),
            subgroup,
            subgroup_size_control,
            mesh_shaders,
            app_cache,
            cache_each: false,
        }
    }
}

impl Replay {
    fn missing(&self, kind: &str, hash: Option<u64>) -> String {
        match hash.and_then(|h| self.failed.get(&h)) {
            Some(why) => format!("its {kind} could not be made ({why})"),
            None => format!("missing {kind}"),
        }
    }

    unsafe fn make_objects(&mut self, c: &Catalog) {
        // In dependency order: set layouts need samplers, pipeline layouts need set layouts.
        for (h, r) in made_all(&c.samplers, |v| unsafe { self.sampler(v) }) {
            keep(&mut self.samplers, &mut self.failed, h, r);
        }
        for (h, r) in made_all(&c.set_layouts, |v| unsafe { self.set_layout(v) }) {
            keep(&mut self.set_layouts, &mut self.failed, h, r);
        }
        for (h, r) in made_all(&c.pipeline_layouts, |v| unsafe { self.pipeline_layout(v) }) {
            keep(&mut self.pipeline_layouts, &mut self.failed, h, r);
        }
        let module = |code: &Vec<u32>| unsafe {
            self.device
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(code), None)
                .map_err(|e| format!("driver error {e}"))
        };
        for (h, r) in made_all(&c.shader_modules, module) {
            keep(&mut self.modules, &mut self.failed, h, r);
        }
        for (h, r) in made_all(&c.render_passes, |(version, v)| unsafe {
            self.render_pass(*version, v)
        }) {
            keep(&mut self.render_passes, &mut self.failed, h, r);
        }
    }

    unsafe fn sampler(&self, v: &Value) -> Result<vk::Sampler, String> {
        only(v, &[stype::REDUCTION_MODE], "a sampler")?;
        let mut reduction = find_next(v, stype::REDUCTION_MODE).map(|n| {
            vk::SamplerReductionModeCreateInfo::default()
                .reduction_mode(vk::SamplerReductionMode::from_raw(i(n, "reductionMode")))
        });
        let mut ci = vk::SamplerCreateInfo::default()
            .flags(vk::SamplerCreateFlags::from_raw(u(v, "flags")))
            .mag_filter(vk::Filter::from_raw(i(v, "magFilter")))
            .min_filter(vk::Filter::from_raw(i(v, "minFilter")))
            .mipmap_mode(vk::SamplerMipmapMode::from_raw(i(v, "mipmapMode")))
            .address_mode_u(vk::SamplerAddressMode::from_raw(i(v, "addressModeU")))
            .address_mode_v(vk::SamplerAddressMode::from_raw(i(v, "addressModeV")))
            .address_mode_w(vk::SamplerAddressMode::from_raw(i(v, "addressModeW")))
            .mip_lod_bias(f(v, "mipLodBias"))
            .anisotropy_enable(u(v, "anisotropyEnable") != 0)
            .max_anisotropy(f(v, "maxAnisotropy"))
            .compare_enable(u(v, "compareEnable") != 0)
            .compare_op(vk::CompareOp::from_raw(i(v, "compareOp")))
            .min_lod(f(v, "minLod"))
            .max_lod(f(v, "maxLod"))
            .border_color(vk::BorderColor::from_raw(i(v, "borderColor")))
            .unnormalized_coordinates(u(v, "unnormalizedCoordinates") != 0);
        if let Some(reduction) = reduction.as_mut() {
            ci = ci.push_next(reduction);
        }
        // SAFETY: a valid create info.
        unsafe { self.device.create_sampler(&ci, None) }.map_err(|e| format!("driver error {e}"))
    }

    unsafe fn set_layout(&self, v: &Value) -> Result<vk::DescriptorSetLayout, String> {
        only(v, &[stype::BINDING_FLAGS], "a set layout")?;
        let mut sampler_lists: Vec<Vec<vk::Sampler>> = Vec::new();
        for b in arr(v, "bindings") {
            let list = arr(b, "immutableSamplers")
                .iter()
                .map(|s| {
                    parse_ref(s)
                        .and_then(|h| self.samplers.get(&h).copied())
                        .ok_or_else(|| self.missing("immutable sampler", parse_ref(s)))
                })
                .collect::<Result<Vec<_>, _>>()?;
            sampler_lists.push(list);
        }
        let bindings: Vec<vk::DescriptorSetLayoutBinding> = arr(v, "bindings")
            .iter()
            .zip(&sampler_lists)
            .map(|(b, samplers)| {
                let mut binding = vk::DescriptorSetLayoutBinding::default()
                    .binding(u(b, "binding"))
                    .descriptor_type(vk::DescriptorType::from_raw(i(b, "descriptorType")))
                    .descriptor_count(u(b, "descriptorCount"))
                    .stage_flags(vk::ShaderStageFlags::from_raw(u(b, "stageFlags")));
                if !samplers.is_empty() {
                    binding = binding.immutable_samplers(samplers);
                }
                binding
            })
            .collect();
        let flags: Vec<vk::DescriptorBindingFlags> = find_next(v, stype::BINDING_FLAGS)
            .map(|n| {
                arr(n, "bindingFlags")
                    .iter()
                    .map(|x| vk::DescriptorBindingFlags::from_raw(x.as_u64().unwrap_or(0) as u32))
                    .collect()
            })
            .unwrap_or_default();
        let mut binding_flags =
            vk::DescriptorSetLayoutBindingFlagsCreateInfo::default().binding_flags(&flags);
        let mut ci = vk::DescriptorSetLayoutCreateInfo::default()
            .flags(vk::DescriptorSetLayoutCreateFlags::from_raw(u(v, "flags")))
            .bindings(&bindings);
        if find_next(v, stype::BINDING_FLAGS).is_some() {
            ci = ci.push_next(&mut binding_flags);
        }
        // SAFETY: a valid create info.
        unsafe { self.device.create_descriptor_set_layout(&ci, None) }
            .map_err(|e| format!("driver error {e}"))
    }

    unsafe fn pipeline_layout(&self, v: &Value) -> Result<vk::PipelineLayout, String> {
        only(v, &[], "a pipeline layout")?;
        let sets = arr(v, "setLayouts")
            .iter()
            .map(|s| match parse_ref(s) {
                Some(0) => Ok(vk::DescriptorSetLayout::null()),
                h => h
                    .and_then(|h| self.set_layouts.get(&h).copied())
                    .ok_or_else(|| self.missing("set layout", h)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ranges: Vec<vk::PushConstantRange> = arr(v, "pushConstantRanges")
            .iter()
            .map(|r| {
                vk::PushConstantRange::default()
                    .stage_flags(vk::ShaderStageFlags::from_raw(u(r, "stageFlags")))
                    .offset(u(r, "offset"))
                    .size(u(r, "size"))
            })
            .collect();
        let ci = vk::PipelineLayoutCreateInfo::default()
            .flags(vk::PipelineLayoutCreateFlags::from_raw(u(v, "flags")))
            .set_layouts(&sets)
            .push_constant_ranges(&ranges);
        // SAFETY: a valid create info.
        unsafe { self.device.create_pipeline_layout(&ci, None) }
            .map_err(|e| format!("driver error {e}"))
    }

    unsafe fn render_pass(&self, version: u32, v: &Value) -> Result<vk::RenderPass, String> {
        only(v, &[], "a render pass")?;
        let attachment = |a: &Value| {
            vk::AttachmentDescription2::default()
                .flags(vk::AttachmentDescriptionFlags::from_raw(u(a, "flags")))
                .format(vk::Format::from_raw(i(a, "format")))
                .samples(vk::SampleCountFlags::from_raw(u(a, "samples")))
                .load_op(vk::AttachmentLoadOp::from_raw(i(a, "loadOp")))
                .store_op(vk::AttachmentStoreOp::from_raw(i(a, "storeOp")))
                .stencil_load_op(vk::AttachmentLoadOp::from_raw(i(a, "stencilLoadOp")))
                .stencil_store_op(vk::AttachmentStoreOp::from_raw(i(a, "stencilStoreOp")))
                .initial_layout(vk::ImageLayout::from_raw(i(a, "initialLayout")))
                .final_layout(vk::ImageLayout::from_raw(i(a, "finalLayout")))
        };
        let reference = |r: &Value| {
            vk::AttachmentReference2::default()
                .attachment(u(r, "attachment"))
                .layout(vk::ImageLayout::from_raw(i(r, "layout")))
                .aspect_mask(vk::ImageAspectFlags::from_raw(u(r, "aspectMask")))
        };
        for a in arr(v, "attachments")
            .iter()
            .chain(arr(v, "subpasses"))
            .chain(arr(v, "dependencies"))
        {
            only(a, &[], "a render pass")?;
        }
        let attachments: Vec<vk::AttachmentDescription2> =
            arr(v, "attachments").iter().map(attachment).collect();
        struct Refs {
            inputs: Vec<vk::AttachmentReference2<'static>>,
            colors: Vec<vk::AttachmentReference2<'static>>,
            resolves: Vec<vk::AttachmentReference2<'static>>,
            depth: Option<vk::AttachmentReference2<'static>>,
            preserve: Vec<u32>,
        }
        let refs: Vec<Refs> = arr(v, "subpasses")
            .iter()
            .map(|s| Refs {
                inputs: arr(s, "inputAttachments").iter().map(reference).collect(),
                colors: arr(s, "colorAttachments").iter().map(reference).collect(),
                resolves: arr(s, "resolveAttachments").iter().map(reference).collect(),
                depth: s.get("depthStencilAttachment").map(reference),
                preserve: arr(s, "preserveAttachments")
                    .iter()
                    .map(|x| x.as_u64().unwrap_or(0) as u32)
                    .collect(),
            })
            .collect();
        let subpasses: Vec<vk::SubpassDescription2> = arr(v, "subpasses")
            .iter()
            .zip(&refs)
            .map(|(s, r)| {
                let mut d = vk::SubpassDescription2::default()
                    .flags(vk::SubpassDescriptionFlags::from_raw(u(s, "flags")))
                    .pipeline_bind_point(vk::PipelineBindPoint::from_raw(i(s, "pipelineBindPoint")))
                    .view_mask(u(s, "viewMask"))
                    .input_attachments(&r.inputs)
                    .color_attachments(&r.colors)
                    .preserve_attachments(&r.preserve);
                if !r.resolves.is_empty() {
                    d = d.resolve_attachments(&r.resolves);
                }
                if let Some(depth) = r.depth.as_ref() {
                    d = d.depth_stencil_attachment(depth);
                }
                d
            })
            .collect();
        let dependencies: Vec<vk::SubpassDependency2> = arr(v, "dependencies")
            .iter()
            .map(|d| {
                vk::SubpassDependency2::default()
                    .src_subpass(u(d, "srcSubpass"))
                    .dst_subpass(u(d, "dstSubpass"))
                    .src_stage_mask(vk::PipelineStageFlags::from_raw(u(d, "srcStageMask")))
                    .dst_stage_mask(vk::PipelineStageFlags::from_raw(u(d, "dstStageMask")))
                    .src_access_mask(vk::AccessFlags::from_raw(u(d, "srcAccessMask")))
                    .dst_access_mask(vk::AccessFlags::from_raw(u(d, "dstAccessMask")))
                    .dependency_flags(vk::DependencyFlags::from_raw(u(d, "dependencyFlags")))
                    .view_offset(i(d, "viewOffset"))
            })
            .collect();
        if version == 2 {
            let masks: Vec<u32> = arr(v, "correlatedViewMasks")
                .iter()
                .map(|x| x.as_u64().unwrap_or(0) as u32)
                .collect();
            let ci = vk::RenderPassCreateInfo2::default()
                .flags(vk::RenderPassCreateFlags::from_raw(u(v, "flags")))
                .attachments(&attachments)
                .subpasses(&subpasses)
                .dependencies(&dependencies)
                .correlated_view_masks(&masks);
            // SAFETY: a valid create info.
            return unsafe { self.device.create_render_pass2(&ci, None) }
                .map_err(|e| format!("driver error {e}"));
        }
        // Version one: the same content through the version-one structures.
        type Refs1 = (
            Vec<vk::AttachmentReference>,
            Vec<vk::AttachmentReference>,
            Vec<vk::AttachmentReference>,
            Option<vk::AttachmentReference>,
        );
        let attachments1: Vec<vk::AttachmentDescription> = attachments
            .iter()
            .map(|a| vk::AttachmentDescription {
                flags: a.flags,
                format: a.format,
                samples: a.samples,
                load_op: a.load_op,
                store_op: a.store_op,
                stencil_load_op: a.stencil_load_op,
                stencil_store_op: a.stencil_store_op,
                initial_layout: a.initial_layout,
                final_layout: a.final_layout,
            })
            .collect();
        let one = |r: &vk::AttachmentReference2| vk::AttachmentReference {
            attachment: r.attachment,
            layout: r.layout,
        };
        let refs1: Vec<Refs1> = refs
            .iter()
            .map(|r| {
                (
                    r.inputs.iter().map(one).collect(),
                    r.colors.iter().map(one).collect(),
                    r.resolves.iter().map(one).collect(),
                    r.depth.as_ref().map(one),
                )
            })
            .collect();
        let subpasses1: Vec<vk::SubpassDescription> = subpasses
            .iter()
            .zip(&refs1)
            .zip(&refs)
            .map(|((s, (inputs, colors, resolves, depth)), r)| {
                let mut d = vk::SubpassDescription::default()
                    .flags(s.flags)
                    .pipeline_bind_point(s.pipeline_bind_point)
                    .input_attachments(inputs)
                    .color_attachments(colors)
                    .preserve_attachments(&r.preserve);
                if !resolves.is_empty() {
                    d = d.resolve_attachments(resolves);
                }
                if let Some(depth) = depth.as_ref() {
                    d = d.depth_stencil_attachment(depth);
                }
                d
            })
            .collect();
        let dependencies1: Vec<vk::SubpassDependency> = dependencies
            .iter()
            .map(|d| vk::SubpassDependency {
                src_subpass: d.src_subpass,
                dst_subpass: d.dst_subpass,
                src_stage_mask: d.src_stage_mask,
                dst_stage_mask: d.dst_stage_mask,
                src_access_mask: d.src_access_mask,
                dst_access_mask: d.dst_access_mask,
                dependency_flags: d.dependency_flags,
            })
            .collect();
        let ci = vk::RenderPassCreateInfo::default()
            .flags(vk::RenderPassCreateFlags::from_raw(u(v, "flags")))
            .attachments(&attachments1)
            .subpasses(&subpasses1)
            .dependencies(&dependencies1);
        // SAFETY: a valid create info.
        unsafe { self.device.create_render_pass(&ci, None) }
            .map_err(|e| format!("driver error {e}"))
    }

    /// Makes every job from `options.threads` threads, each taking the next job as it finishes.
    unsafe fn run_jobs(&self, jobs: &[Job], options: &Options, summary: &mut Summary) {
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let results: Mutex<Vec<JobResult>> = Mutex::new(Vec::with_capacity(jobs.len()));
        let started = Instant::now();
        let progress = super::progress::Progress::new(options.progress, jobs.len());
        std::thread::scope(|s| {
            for _ in 0..options.threads.max(1) {
                s.spawn(crate::sync::logging_as_here(|| {
                    if let Some(start) = &options.worker_start {
                        (start.0)();
                    }
                    loop {
                        if options
                            .stop
                            .as_ref()
                            .is_some_and(|stop| stop.load(Ordering::Acquire))
                        {
                            break;
                        }
                        if options
                            .before_each
                            .as_ref()
                            .is_some_and(|go_on| !(go_on.0)())
                        {
                            break;
                        }
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        let Some(job) = jobs.get(n) else { break };
                        // SAFETY: objects made above live until every thread has joined.
                        let outcome = unsafe { self.make_pipeline(job) };
                        results.locked().push((n, outcome, job.graphics));
                        progress.made(done.fetch_add(1, Ordering::Relaxed) + 1);
                    }
                }));
            }
        });
        progress.finish();
        summary.wall_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut times = Vec::new();
        for (n, outcome, graphics) in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
            match outcome {
                Ok(took) => {
                    let ms = took.as_secs_f64() * 1e3;
                    summary.made += 1;
                    if graphics {
                        summary.made_graphics += 1
                    } else {
                        summary.made_compute += 1
                    }
                    if ms > summary.slowest_ms {
                        summary.slowest_ms = ms;
                        summary.slowest = format!("{:016x}", jobs[n].hash);
                    }
                    times.push(ms);
                }
                Err(why) => *summary.skipped.entry(why).or_default() += 1,
            }
        }
        summary.creation_ms = times.iter().sum();
        (summary.p50_ms, summary.p99_ms) = percentiles(&times);
        summary.times_ms = times;
    }

    /// One pipeline: its create info from JSON (untimed), the creation (timed), then destroyed.
    unsafe fn make_pipeline(&self, job: &Job) -> Result<Duration, String> {
        let info = job.info.ok_or("malformed entry")?;
        if job.graphics {
            unsafe { self.graphics(info) }
        } else {
            unsafe { self.compute(info) }
        }
    }

    fn layout(&self, v: &Value) -> Result<vk::PipelineLayout, String> {
        let h = v.get("layout").and_then(parse_ref);
        h.and_then(|h| self.pipeline_layouts.get(&h).copied())
            .ok_or_else(|| self.missing("pipeline layout", h))
    }

    /// Creates one pipeline through `create`, timing only the call, and destroys what it made.
    /// The raw entry point, so that every result is seen as the driver returns it.
    fn timed<T>(&self, create: CreatePipelines<T>, info: &T) -> Result<Duration, String> {
        let mut pipeline = vk::Pipeline::null();
        let started = Instant::now();
        let own_cache = self.cache_each.then(|| {
            // SAFETY: an empty cache of this replay's, destroyed below.
            unsafe {
                self.device
                    .create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None)
            }
        });
        let cache = match own_cache {
            Some(Ok(c)) => c,
            Some(Err(e)) => return Err(format!("vkCreatePipelineCache: {e}")),
            None => self.app_cache,
        };
        // SAFETY: a valid create info whose data lives to the end of the caller.
        let r = unsafe {
            create(
                self.device.handle(),
                cache,
                1,
                info,
                std::ptr::null(),
                &mut pipeline,
            )
        };
        if own_cache.is_some() {
            // SAFETY: this replay's own cache, read once (as a layer keeping it would) and
            // destroyed; nothing else uses it.
            unsafe {
                let _ = self.device.get_pipeline_cache_data(cache);
                self.device.destroy_pipeline_cache(cache, None);
            }
        }
        let took = started.elapsed();
        if pipeline != vk::Pipeline::null() {
            // SAFETY: a pipeline this replay made and nothing uses.
            unsafe { self.device.destroy_pipeline(pipeline, None) };
        }
        match r {
            vk::Result::SUCCESS => Ok(took),
            e => Err(format!("driver error {e:?}")),
        }
    }

    unsafe fn compute(&self, v: &Value) -> Result<Duration, String> {
        only(v, &[stype::PIPELINE_ROBUSTNESS], "a compute pipeline")?;
        let stage_json = v.get("stage").ok_or("no stage")?;
        let stage = StageData::read(self, stage_json)?;
        let mut stage_next = stage.next();
        let mut ci = vk::ComputePipelineCreateInfo::default()
            .flags(
                vk::PipelineCreateFlags::from_raw(u(v, "flags"))
                    & !vk::PipelineCreateFlags::DERIVATIVE,
            )
            .stage(stage.info(&mut stage_next))
            .layout(self.layout(v)?)
            .base_pipeline_index(-1);
        let mut robustness = robustness(v);
        if let Some(r) = robustness.as_mut() {
            ci = ci.push_next(r);
        }
        self.timed(self.device.fp_v1_0().create_compute_pipelines, &ci)
    }

    unsafe fn graphics(&self, v: &Value) -> Result<Duration, String> {
        only(
            v,
            &[stype::RENDERING, stype::PIPELINE_ROBUSTNESS],
            "a graphics pipeline",
        )?;
        let stages_json = arr(v, "stages");
        let stages = stages_json
            .iter()
            .map(|s| StageData::read(self, s))
            .collect::<Result<Vec<_>, _>>()?;
        let mut stage_nexts: Vec<_> = stages.iter().map(StageData::next).collect();
        let stage_infos: Vec<_> = stages
            .iter()
            .zip(stage_nexts.iter_mut())
            .map(|(s, n)| s.info(n))
            .collect();
        let g = GraphicsData::read(v)?;
        let mut rendering = vk::PipelineRenderingCreateInfo::default()
            .view_mask(g.view_mask)
            .color_attachment_formats(&g.color_formats)
            .depth_attachment_format(g.depth_format)
            .stencil_attachment_format(g.stencil_format);
        let vertex_input = vk::PipelineVertexInputStateCreateInfo::default()
            .vertex_binding_descriptions(&g.bindings)
            .vertex_attribute_descriptions(&g.attributes);
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
            .logic_op_enable(g.logic_op_enable)
            .logic_op(g.logic_op)
            .attachments(&g.blend_attachments)
            .blend_constants(g.blend_constants);
        let dynamic =
            vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&g.dynamic_states);
        let render_pass = match v.get("renderPass").and_then(parse_ref) {
            None | Some(0) => vk::RenderPass::null(),
            h => h
                .and_then(|h| self.render_passes.get(&h).copied())
                .ok_or_else(|| self.missing("render pass", h))?,
        };
        let mesh = stages.iter().any(|s| {
            s.stage
                .intersects(vk::ShaderStageFlags::MESH_EXT | vk::ShaderStageFlags::TASK_EXT)
        });
        if mesh && !self.mesh_shaders {
            return Err("mesh shaders: the device lacks the feature".into());
        }
        let mut ci = vk::GraphicsPipelineCreateInfo::default()
            .flags(
                vk::PipelineCreateFlags::from_raw(u(v, "flags"))
                    & !vk::PipelineCreateFlags::DERIVATIVE,
            )
            .stages(&stage_infos)
            .rasterization_state(&g.rasterization)
            .viewport_state(&viewport)
            .multisample_state(&multisample)
            .color_blend_state(&blend)
            .dynamic_state(&dynamic)
            .layout(self.layout(v)?)
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
        self.timed(self.device.fp_v1_0().create_graphics_pipelines, &ci)
    }

    /// Destroys every object the replay made (not the device).
    unsafe fn destroy(&self) {
        // SAFETY: every thread has joined; nothing uses these objects any more.
        unsafe {
            let d = &self.device;
            self.modules
                .values()
                .for_each(|x| d.destroy_shader_module(*x, None));
            self.render_passes
                .values()
                .for_each(|x| d.destroy_render_pass(*x, None));
            self.pipeline_layouts
                .values()
                .for_each(|x| d.destroy_pipeline_layout(*x, None));
            self.set_layouts
                .values()
                .for_each(|x| d.destroy_descriptor_set_layout(*x, None));
            self.samplers
                .values()
                .for_each(|x| d.destroy_sampler(*x, None));
            if !self.app_cache.is_null() {
                d.destroy_pipeline_cache(self.app_cache, None);
            }
        }
    }
}

/// A stage's owned data, from which its create info is built.
struct StageData {
    stage: vk::ShaderStageFlags,
    flags: vk::PipelineShaderStageCreateFlags,
    module: vk::ShaderModule,
    name: CString,
    /// Points into `map` and `data`, whose heap buffers stay put when the struct moves.
    spec: Option<vk::SpecializationInfo<'static>>,
    _map: Vec<vk::SpecializationMapEntry>,
    _data: Vec<u8>,
    required_subgroup_size: Option<u32>,
    robustness: Option<vk::PipelineRobustnessCreateInfoEXT<'static>>,
}

/// The structures a stage's create info chains, owned by the caller while the info lives.
struct StageNext {
    subgroup: vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo<'static>,
    robustness: Option<vk::PipelineRobustnessCreateInfoEXT<'static>>,
}

// SAFETY: the raw pointers in `spec` point into this struct's own immutable buffers.
unsafe impl Send for StageData {}

impl StageData {
    fn read(r: &Replay, s: &Value) -> Result<StageData, String> {
        only(
            s,
            &[stype::REQUIRED_SUBGROUP_SIZE, stype::PIPELINE_ROBUSTNESS],
            "a shader stage",
        )?;
        let h = s.get("module").and_then(parse_ref);
        let module = h
            .and_then(|h| r.modules.get(&h).copied())
            .ok_or_else(|| r.missing("shader module", h))?;
        let stage = vk::ShaderStageFlags::from_raw(u(s, "stage"));
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
        let required_subgroup_size =
            find_next(s, stype::REQUIRED_SUBGROUP_SIZE).map(|n| u(n, "requiredSubgroupSize"));
        if let Some(size) = required_subgroup_size {
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
        }
        let spec = spec.map(|_| vk::SpecializationInfo {
            map_entry_count: map.len() as u32,
            p_map_entries: map.as_ptr(),
            data_size: data.len(),
            p_data: data.as_ptr().cast(),
            ..Default::default()
        });
        Ok(StageData {
            stage,
            flags: vk::PipelineShaderStageCreateFlags::from_raw(u(s, "flags")),
            module,
            name: CString::new(s.get("name").and_then(Value::as_str).unwrap_or("main"))
                .map_err(|e| e.to_string())?,
            spec,
            _map: map,
            _data: data,
            required_subgroup_size,
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

    fn info<'a>(&'a self, next: &'a mut StageNext) -> vk::PipelineShaderStageCreateInfo<'a> {
        let mut info = vk::PipelineShaderStageCreateInfo::default()
            .stage(self.stage)
            .flags(self.flags)
            .module(self.module)
            .name(&self.name);
        if let Some(spec) = self.spec.as_ref() {
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

/// A graphics pipeline's state blocks, owned.
struct GraphicsData {
    bindings: Vec<vk::VertexInputBindingDescription>,
    attributes: Vec<vk::VertexInputAttributeDescription>,
    input_assembly: vk::PipelineInputAssemblyStateCreateInfo<'static>,
    tessellation: Option<vk::PipelineTessellationStateCreateInfo<'static>>,
    viewport_count: u32,
    scissor_count: u32,
    viewports: Vec<vk::Viewport>,
    scissors: Vec<vk::Rect2D>,
    rasterization: vk::PipelineRasterizationStateCreateInfo<'static>,
    multisample: vk::PipelineMultisampleStateCreateInfo<'static>,
    sample_mask: Vec<u32>,
    depth_stencil: Option<vk::PipelineDepthStencilStateCreateInfo<'static>>,
    logic_op_enable: bool,
    logic_op: vk::LogicOp,
    blend_attachments: Vec<vk::PipelineColorBlendAttachmentState>,
    blend_constants: [f32; 4],
    dynamic_states: Vec<vk::DynamicState>,
    view_mask: u32,
    color_formats: Vec<vk::Format>,
    depth_format: vk::Format,
    stencil_format: vk::Format,
}

impl GraphicsData {
    fn read(v: &Value) -> Result<GraphicsData, String> {
        let null = Value::Null;
        let block = |k: &str| -> Result<&Value, String> {
            let b = v.get(k).unwrap_or(&null);
            only(b, &[], k)?;
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
        Ok(GraphicsData {
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
