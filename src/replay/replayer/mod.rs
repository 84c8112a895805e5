//! Replays a catalog on a Vulkan device through the loader (so pipekeep, when enabled, sees an
//! ordinary application): samplers, set layouts, pipeline layouts, shader modules and render
//! passes first, then every compute, graphics and ray-tracing pipeline from N threads, each
//! creation timed on its own, pipeline libraries before the pipelines linking them. On someone
//! else's device (pipekeep's background rebuild) each pipeline makes only the objects it names,
//! around it ([`own`]). What cannot be made (a missing object, a malformed entry, a feature or
//! limit the device lacks) is skipped with its reason, never turned into an invalid Vulkan
//! call.

use std::ffi::CString;
use std::path::PathBuf;
use std::time::Instant;

use ash::vk;
use serde_json::Value;

use crate::replay::objects::{AppInfo, Catalog};
use crate::sync::Unpoisoned;

mod device;
mod fields;
mod graphics_data;
mod jobs;
mod launch;
mod memory_cache;
mod objects;
mod options;
mod own;
mod pipelines;
mod shader_objects;
#[cfg(test)]
mod tests;

pub use options::{
    AppCache, BeforeEach, EnterDevice, OnProgress, Options, Order, Progress, SamplerBudget,
    Summary, WorkerStart, DEVICE_ENDED, MORE_SAMPLERS_THAN_ALLOWED, NO_RAY_TRACING,
    NO_ROOM_FOR_SAMPLERS, NO_SHADER_OBJECTS,
};
pub use shader_objects::ShaderCommands;

use device::{chosen_device, every_extension_device, exact_device, strip, Enabled};

/// Everything the pipelines need: the device, the objects by hash, and what the device can do.
struct Replay {
    device: ash::Device,
    /// The objects made before the pipelines (on a device of the replay's own).
    made: objects::Made,
    /// On someone else's device: each pipeline makes its own objects instead.
    own: Option<own::OwnObjects>,
    subgroup: vk::PhysicalDeviceSubgroupSizeControlProperties<'static>,
    subgroup_size_control: bool,
    mesh_shaders: bool,
    /// The device's `vkCreateRayTracingPipelinesKHR`, where it makes ray-tracing pipelines.
    ray_tracing: Option<vk::PFN_vkCreateRayTracingPipelinesKHR>,
    /// The device's shader-object commands, where it makes shader objects.
    shader_objects: Option<ShaderCommands>,
    app_cache: vk::PipelineCache,
    /// [`AppCache::Each`]: every pipeline through a fresh cache of its own.
    cache_each: Option<pipelines::EachCache>,
    /// Pipeline libraries made so far, by their kind's tag and hash (a graphics link takes only
    /// graphics libraries, a ray-tracing one only ray-tracing ones): kept for the pipelines
    /// linking them, destroyed with the replay.
    libraries: std::sync::Mutex<std::collections::HashMap<(u32, u64), vk::Pipeline>>,
    /// The libraries, by their kind's tag and hash, that some pipeline of the replay links.
    linked: std::sync::Mutex<std::collections::HashSet<(u32, u64)>>,
}

// SAFETY: the handles are plain identifiers, and ash::Device's function table is immutable.
unsafe impl Sync for Replay {}

impl Replay {
    /// A replay on `device`, no object made yet, with what `enabled` says is on (ray tracing
    /// through `ray_tracing`).
    fn new(
        device: ash::Device,
        subgroup: vk::PhysicalDeviceSubgroupSizeControlProperties<'static>,
        enabled: Enabled,
        (ray_tracing, shader_objects): (
            Option<vk::PFN_vkCreateRayTracingPipelinesKHR>,
            Option<ShaderCommands>,
        ),
        app_cache: vk::PipelineCache,
    ) -> Replay {
        Replay {
            device,
            made: Default::default(),
            own: None,
            subgroup,
            subgroup_size_control: enabled.subgroup_size_control,
            mesh_shaders: enabled.mesh_shaders,
            ray_tracing: ray_tracing.filter(|_| enabled.ray_tracing),
            shader_objects: shader_objects.filter(|_| enabled.shader_objects),
            app_cache,
            cache_each: None,
            libraries: Default::default(),
            linked: Default::default(),
        }
    }
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
        total.leave(orphans, format!(
            "a configuration whose application entry is damaged ({orphans} pipelines): its device is not known"
        ));
    }
    for mut group in groups_of(catalogs) {
        let left = left_to_the_application(&mut group);
        if left > 0 {
            total.leave(left, format!(
                "the calls of shader objects of {} ({left}): its device holds structures pipekeep \
                 does not know, which their keys hold and a device made from the record leaves out: \
                 left to the application's own background rebuild",
                describe(&group.app)
            ));
        }
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
                let left: usize = group.catalogs.iter().map(Catalog::pipelines).sum();
                total.leave(
                    left,
                    format!("{} ({left} pipelines): {why}", describe(&group.app)),
                );
            }
            Err(why) => return Err(why),
        }
    }
    Ok(total)
}

/// Takes out of `group` the calls of shader objects a device made from the record would key as
/// no run looks them up, and returns how many: a shader's key holds the device's whole state,
/// the structures pipekeep does not know among them, which the replay's device leaves out (a
/// pipeline's key holds only the device's robustness). Their application's own background
/// rebuild, on its own device, makes them.
fn left_to_the_application(group: &mut Group) -> usize {
    let unknown = group
        .app
        .device
        .as_ref()
        .is_some_and(|d| !d.unknown.is_empty());
    if !unknown {
        return 0;
    }
    group
        .catalogs
        .iter_mut()
        .map(|c| std::mem::take(&mut c.shader_objects).len())
        .sum()
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
        crate::replay::every_extension::instance_extensions(entry)
    } else {
        launch::instance_extensions(entry, recorded)
    };
    let instance_extension_ptrs: Vec<*const std::ffi::c_char> =
        instance_extensions.iter().map(|e| e.as_ptr()).collect();
    // What else decides the driver's keys, as the application's process had it, for this
    // instance and device only.
    let _as_launched = exact.then(|| launch::AsLaunched::enter(&recorded.launch));
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

    // Before the device: a folder that cannot be made ends the replay with nothing to destroy.
    let cache_each = match &options.app_cache {
        AppCache::Each { dir } => Some(pipelines::EachCache::new(dir.clone(), &props)?),
        _ => None,
    };
    let (device, enabled) = match exact {
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
    // SAFETY: this instance's device, asked for a command by its name.
    let ray_tracing =
        unsafe {
            instance
                .get_device_proc_addr(device.handle(), c"vkCreateRayTracingPipelinesKHR".as_ptr())
        }
        .map(|f| {
            // SAFETY: the command of that name has that signature (vkGetDeviceProcAddr's contract).
            unsafe {
                std::mem::transmute::<
                    unsafe extern "system" fn(),
                    vk::PFN_vkCreateRayTracingPipelinesKHR,
                >(f)
            }
        });
    // SAFETY: this instance's device, asked for commands by name.
    let shader_objects = unsafe {
        ShaderCommands::load(|name| instance.get_device_proc_addr(device.handle(), name.as_ptr()))
    };
    let mut r = Replay::new(
        device,
        subgroup,
        enabled,
        (ray_tracing, shader_objects),
        app_cache,
    );
    r.cache_each = cache_each;
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
        let mut made = std::mem::take(&mut r.made);
        unsafe { r.make_objects(c, &mut made, None) };
        r.made = made;
    }
    let jobs = jobs::in_order(catalogs, options.order);
    summary.pipelines = jobs.len();
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
/// rebuild, on the application's device, through pipekeep's own commands): each pipeline makes
/// the objects it names just before it and destroys them just after ([`own`]), within
/// `options.samplers` and while `options.enter_device` lets it in; the device is left as it was.
/// Subgroup sizes are passed as recorded (the driver checks them). Ray-tracing pipelines are
/// made through `ray_tracing`, the device's `vkCreateRayTracingPipelinesKHR`, and calls of
/// shader objects through `shader_objects` (`None`: it has none, and they are skipped).
///
/// # Safety
/// `device` must be a live device that outlives the call, its commands loaded; `ray_tracing`
/// and `shader_objects` that device's commands.
pub unsafe fn replay_on_device(
    device: ash::Device,
    ray_tracing: Option<vk::PFN_vkCreateRayTracingPipelinesKHR>,
    shader_objects: Option<ShaderCommands>,
    catalog: &Catalog,
    options: &Options,
) -> Summary {
    let subgroup = vk::PhysicalDeviceSubgroupSizeControlProperties {
        min_subgroup_size: 1,
        max_subgroup_size: 1 << 16,
        required_subgroup_size_stages: vk::ShaderStageFlags::ALL,
        ..Default::default()
    };
    // What the application's device has on is its own: the driver checks each pipeline.
    let enabled = Enabled {
        subgroup_size_control: true,
        mesh_shaders: true,
        ray_tracing: true,
        shader_objects: true,
    };
    let mut r = Replay::new(
        device,
        subgroup,
        enabled,
        (ray_tracing, shader_objects),
        vk::PipelineCache::null(),
    );
    r.own = Some(own::OwnObjects::new(
        options.enter_device.clone(),
        options.samplers.clone(),
    ));
    let mut summary = Summary {
        threads: options.threads.max(1),
        ..Default::default()
    };
    let jobs = jobs::in_order(std::slice::from_ref(catalog), options.order);
    summary.pipelines = jobs.len();
    // SAFETY: as the caller vouches; each pipeline destroys what it made.
    unsafe { r.run_jobs(&jobs, options, &mut summary) };
    // The libraries kept for their links go with the replay, while the device lets it in (the
    // layer joins its rebuild before it shuts the way in, so they go before the device does).
    let libraries: Vec<vk::Pipeline> = r.libraries.locked().drain().map(|(_, p)| p).collect();
    let inside = match options.enter_device.as_ref() {
        Some(enter) => (enter.0)().map(Some),
        None => Some(None),
    };
    if inside.is_some() {
        for library in libraries {
            // SAFETY: a library this replay made on the caller's device; every pipeline linking
            // it is made and destroyed.
            unsafe { r.device.destroy_pipeline(library, None) };
        }
    }
    summary
}

fn make_app_cache(device: &ash::Device, mode: &AppCache) -> Result<vk::PipelineCache, String> {
    let data = match mode {
        // A memory cache is made for each run of pipelines ([`memory_cache`]).
        AppCache::None | AppCache::Memory | AppCache::Each { .. } => {
            return Ok(vk::PipelineCache::null())
        }
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
