//! Device-level plumbing: creating the device (walking the link chain, adding
//! `VK_EXT_pipeline_creation_feedback` where the device offers it and the API needs it),
//! `vkGetDeviceProcAddr`, destroying the device (the compile watch's end), the exit handler for
//! applications that never destroy theirs, and the store opened once per identity per process.

use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Once, OnceLock};
use std::time::SystemTime;

use ash::vk;

use super::abi::{find_link_info, LayerDeviceCreateInfo, LOADER_DEVICE_CREATE_INFO};
use super::guard::{guarded, SETTINGS};
use super::instance::{instance_data, instance_link, load};
use super::intercepted_device_command;
use super::objects::Objects;
use super::registry::{dispatch_key, Link, Registry};
use super::writer::{OnWritten, Writer};
use crate::store::files::Written;
use crate::store::identity::HOST_ABI;
use crate::store::{Identity, Store};
use crate::watch::Watch;

/// The next layer's device commands the layer calls.
pub struct DeviceFns {
    pub get_device_proc_addr: vk::PFN_vkGetDeviceProcAddr,
    pub destroy_device: vk::PFN_vkDestroyDevice,
    pub create_pipeline_cache: vk::PFN_vkCreatePipelineCache,
    pub destroy_pipeline_cache: vk::PFN_vkDestroyPipelineCache,
    pub get_pipeline_cache_data: vk::PFN_vkGetPipelineCacheData,
    pub create_compute_pipelines: vk::PFN_vkCreateComputePipelines,
    pub create_graphics_pipelines: vk::PFN_vkCreateGraphicsPipelines,
    pub destroy_pipeline: vk::PFN_vkDestroyPipeline,
    pub create_shader_module: vk::PFN_vkCreateShaderModule,
    pub destroy_shader_module: vk::PFN_vkDestroyShaderModule,
    pub create_sampler: vk::PFN_vkCreateSampler,
    pub destroy_sampler: vk::PFN_vkDestroySampler,
    pub create_descriptor_set_layout: vk::PFN_vkCreateDescriptorSetLayout,
    pub destroy_descriptor_set_layout: vk::PFN_vkDestroyDescriptorSetLayout,
    pub create_pipeline_layout: vk::PFN_vkCreatePipelineLayout,
    pub destroy_pipeline_layout: vk::PFN_vkDestroyPipelineLayout,
    pub create_render_pass: vk::PFN_vkCreateRenderPass,
    pub destroy_render_pass: vk::PFN_vkDestroyRenderPass,
    pub create_render_pass2: Option<vk::PFN_vkCreateRenderPass2>,
    pub create_render_pass2_khr: Option<vk::PFN_vkCreateRenderPass2>,
}

/// Loads a device command through the next layer.
unsafe fn load_device<F: Copy>(
    gdpa: vk::PFN_vkGetDeviceProcAddr,
    device: vk::Device,
    name: &CStr,
) -> Option<F> {
    // SAFETY: the next layer's own entry point; F is the command's type.
    let f = unsafe { gdpa(device, name.as_ptr()) }?;
    Some(unsafe { std::mem::transmute_copy(&f) })
}

impl DeviceFns {
    unsafe fn load(gdpa: vk::PFN_vkGetDeviceProcAddr, d: vk::Device) -> Option<DeviceFns> {
        // SAFETY: each name loaded with its own function type.
        unsafe {
            Some(DeviceFns {
                get_device_proc_addr: gdpa,
                destroy_device: load_device(gdpa, d, c"vkDestroyDevice")?,
                create_pipeline_cache: load_device(gdpa, d, c"vkCreatePipelineCache")?,
                destroy_pipeline_cache: load_device(gdpa, d, c"vkDestroyPipelineCache")?,
                get_pipeline_cache_data: load_device(gdpa, d, c"vkGetPipelineCacheData")?,
                create_compute_pipelines: load_device(gdpa, d, c"vkCreateComputePipelines")?,
                create_graphics_pipelines: load_device(gdpa, d, c"vkCreateGraphicsPipelines")?,
                destroy_pipeline: load_device(gdpa, d, c"vkDestroyPipeline")?,
                create_shader_module: load_device(gdpa, d, c"vkCreateShaderModule")?,
                destroy_shader_module: load_device(gdpa, d, c"vkDestroyShaderModule")?,
                create_sampler: load_device(gdpa, d, c"vkCreateSampler")?,
                destroy_sampler: load_device(gdpa, d, c"vkDestroySampler")?,
                create_descriptor_set_layout: load_device(gdpa, d, c"vkCreateDescriptorSetLayout")?,
                destroy_descriptor_set_layout: load_device(
                    gdpa,
                    d,
                    c"vkDestroyDescriptorSetLayout",
                )?,
                create_pipeline_layout: load_device(gdpa, d, c"vkCreatePipelineLayout")?,
                destroy_pipeline_layout: load_device(gdpa, d, c"vkDestroyPipelineLayout")?,
                create_render_pass: load_device(gdpa, d, c"vkCreateRenderPass")?,
                destroy_render_pass: load_device(gdpa, d, c"vkDestroyRenderPass")?,
                create_render_pass2: load_device(gdpa, d, c"vkCreateRenderPass2"),
                create_render_pass2_khr: load_device(gdpa, d, c"vkCreateRenderPass2KHR"),
            })
        }
    }
}

/// Where a device's store is, shared by every device of one identity in the process, and how
/// many live devices use it: what is read ahead is let go when the last of them ends.
#[derive(Default)]
pub struct SharedStore {
    cell: OnceLock<Option<Arc<Store>>>,
    devices: std::sync::atomic::AtomicUsize,
}
type StoreCell = Arc<SharedStore>;
/// Library root, title and identity: what makes two devices share one store.
type StoreId = (PathBuf, String, Identity);

static STORES: LazyLock<Mutex<HashMap<StoreId, StoreCell>>> = LazyLock::new(Default::default);

pub struct DeviceData {
    pub handle: vk::Device,
    pub fns: DeviceFns,
    /// False when the layer is disabled: everything passes through.
    pub active: bool,
    /// Creation feedback may be chained (API 1.3, or the extension enabled).
    pub feedback_valid: bool,
    pub identity: Identity,
    pub device_name: String,
    pub objects: Objects,
    pub watch: Arc<Watch>,
    /// Writes entries off the application's threads.
    pub writer: Writer,
    root: Option<PathBuf>,
    title: String,
    store: Option<StoreCell>,
    /// Opens the store ahead of the first pipeline; joined at `vkDestroyDevice`.
    opener: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Set at `vkDestroyDevice` (or exit): every wait of this device's own threads sees it.
    stop: AtomicBool,
    /// The process that made the device: a child made by `fork` passes everything through.
    pid: u32,
}

impl DeviceData {
    /// The store, opened at the first call (threads that need it first wait for that opening).
    /// `None` makes the layer a pass-through for this device.
    pub fn store(&self) -> Option<&Arc<Store>> {
        self.open_store(true).0
    }

    /// The store, opened at the first call, and whether this call opened it. With `bound_now`
    /// false (the opening thread) the caller brings the title within its bound right after the
    /// store is published.
    fn open_store(&self, bound_now: bool) -> (Option<&Arc<Store>>, bool) {
        let Some(cell) = self.store.as_ref() else {
            return (None, false);
        };
        let mut opened_here = false;
        let store = cell.cell.get_or_init(|| {
            opened_here = true;
            let root = self.root.as_ref()?;
            let opened_at = SETTINGS.test_open_time.unwrap_or_else(SystemTime::now);
            crate::store::marker::use_slots(super::marker_map::map);
            match Store::open_then_bound(root, &self.title, self.identity, SETTINGS.max_bytes, opened_at, bound_now) {
                Ok((store, _report)) => {
                    if SETTINGS.read_ahead == 0 {
                        store.read_nothing_ahead();
                    }
                    Some(Arc::new(store))
                }
                Err(e) => {
                    tracing::warn!(title = %self.title, error = %e, "the pipeline store cannot be opened; pipekeep passes pipelines through");
                    None
                }
            }
        });
        (store.as_ref(), opened_here)
    }

    /// Whether the layer works on this device in this process: not when disabled, and not in
    /// a child made by `fork` (which has none of the parent's threads, and whose markers and
    /// queues would be the parent's).
    pub fn works_here(&self) -> bool {
        self.active && self.pid == std::process::id()
    }

    /// The device's store, if it was opened.
    fn opened_store(&self) -> Option<&Arc<Store>> {
        self.store.as_ref()?.cell.get()?.as_ref()
    }

    /// Stops this device's own threads: the flag every wait of theirs sees, then a wake for the
    /// readers already waiting. Returns at once; the threads end soon after.
    fn stop_threads(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(store) = self.opened_store() {
            store.wake_readers_to_stop();
        }
    }

    /// The run's end: the entries still queued, then the final compile-watch line and the run's
    /// line in `runs.jsonl`.
    fn finish(&self, at_exit: bool) {
        if !self.works_here() {
            return;
        }
        self.stop_threads();
        if at_exit {
            self.writer.drain_here();
        } else {
            if let Some(opener) = self.opener.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = opener.join();
            }
            self.writer.finish();
            let last = self
                .store
                .as_ref()
                .is_some_and(|s| s.devices.fetch_sub(1, Ordering::AcqRel) == 1);
            if let (true, Some(store)) = (last, self.opened_store()) {
                store.stop_reading_ahead();
            }
        }
        let runs = self
            .root
            .as_ref()
            .map(|r| r.join(&self.title).join("runs.jsonl"));
        let runs = runs.filter(|p| p.parent().is_some_and(|d| d.is_dir()));
        let identity = self.identity.dir_name();
        if let Some(line) = self
            .watch
            .finish(runs.as_deref(), &self.device_name, &identity)
        {
            if at_exit {
                super::guard::write_at_exit(&line);
            } else {
                tracing::info!("{line}");
            }
        }
    }
}

pub static DEVICES: Registry<DeviceData> = Registry::new();

/// Every device made through the layer, whether or not its data could be recorded.
static DEVICE_LINKS: Registry<Link<vk::Device, vk::PFN_vkGetDeviceProcAddr>> = Registry::new();

/// Opens the device's store on a thread of the layer's own while the application loads its
/// shaders, so the opening (a sweep, and a stat of every entry for the bound) is not paid inside
/// the first pipeline's creation. A pipeline that comes first waits for the same opening. The
/// thread then reads ahead the entries the last run used, at idle priority (a lookup that comes
/// first reads its entry itself), until they are read or the device ends.
fn open_ahead(data: &Arc<DeviceData>) {
    if !data.active || data.store.as_ref().is_none_or(|s| s.cell.get().is_some()) {
        return;
    }
    let ahead = data.clone();
    let spawned = std::thread::Builder::new()
        .name("pipekeep-open".into())
        .spawn(move || {
            guarded(
                "store opening",
                || {
                    // The opening publishes the store first; the bound follows here, on this thread.
                    let stopped = || ahead.stop.load(Ordering::Acquire);
                    if stopped() {
                        return;
                    }
                    if let (Some(store), true) = ahead.open_store(false) {
                        // A device destroyed while its store opened leaves the bound and the
                        // reading ahead to the next run.
                        if stopped() {
                            return;
                        }
                        let listed = store.keep_within_bound().map(|b| b.kept);
                        if SETTINGS.read_ahead > 0 && !stopped() {
                            super::idle::lower_this_threads_priority_but_not_its_reads("read ahead");
                            let started = std::time::Instant::now();
                            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                            let r = store.read_ahead(listed, SETTINGS.read_ahead, (cores / 4).clamp(1, 4), &ahead.stop);
                            tracing::debug!(held = r.held, held_bytes = r.held_bytes, claimed_first = r.claimed_first, took_ms = %format_args!("{:.3}", started.elapsed().as_secs_f64() * 1e3), "read ahead");
                        }
                    }
                },
                || (),
            )
        });
    match spawned {
        Ok(handle) => *data.opener.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle),
        Err(e) => {
            tracing::debug!(error = %e, "no opening thread; the first pipeline opens the store")
        }
    }
}

/// Counts each entry written in the watch, and logs the first write that failed, once.
fn count_writes(watch: Arc<Watch>) -> OnWritten {
    let failure_logged = std::sync::atomic::AtomicBool::new(false);
    Arc::new(move |result| match result {
        Ok(Written::Whole(_)) => watch.written(),
        Ok(Written::Skipped) => {}
        Err(e) => {
            if !failure_logged.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(error = %e, "an entry cannot be written; pipelines are still built, but not kept");
            }
        }
    })
}

/// The data of a device created through this layer.
///
/// # Safety
/// `device` must be a live device handle.
pub unsafe fn device_data(device: vk::Device) -> Option<Arc<DeviceData>> {
    // SAFETY: as the caller vouches.
    DEVICES.get(unsafe { dispatch_key(device) })
}

/// The next layer's command `name` for a device the layer holds no data for (recording it
/// failed): the intercepts pass such a device's calls straight down.
///
/// # Safety
/// `device` must be a live device handle; `F` the command's function type.
pub unsafe fn unrecorded_next<F: Copy>(device: vk::Device, name: &CStr) -> Option<F> {
    // SAFETY: as the caller vouches.
    let link = DEVICE_LINKS.get(unsafe { dispatch_key(device) })?;
    unsafe { load_device(link.next_proc_addr, device, name) }
}

const FEEDBACK_EXTENSION: &CStr = c"VK_EXT_pipeline_creation_feedback";

unsafe fn device_offers(
    inst: &super::instance::InstanceData,
    physical_device: vk::PhysicalDevice,
    wanted: &CStr,
) -> bool {
    let mut count = 0u32;
    // SAFETY: the two-call idiom on the next layer's command.
    unsafe {
        if (inst.enumerate_device_extension_properties)(
            physical_device,
            std::ptr::null(),
            &mut count,
            std::ptr::null_mut(),
        ) != vk::Result::SUCCESS
        {
            return false;
        }
        let mut props = vec![vk::ExtensionProperties::default(); count as usize];
        let _ = (inst.enumerate_device_extension_properties)(
            physical_device,
            std::ptr::null(),
            &mut count,
            props.as_mut_ptr(),
        );
        props.truncate(count as usize);
        props
            .iter()
            .any(|p| bounded_c_string(&p.extension_name).as_bytes() == wanted.to_bytes())
    }
}

pub unsafe extern "system" fn create_device(
    physical_device: vk::PhysicalDevice,
    create_info: *const vk::DeviceCreateInfo<'_>,
    allocator: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Device,
) -> vk::Result {
    // SAFETY: a physical device of an instance made through this layer; the loader's chain info.
    let inst = unsafe { instance_data(physical_device) };
    let Some(instance) = inst
        .as_ref()
        .map(|i| i.handle)
        .or_else(|| unsafe { instance_link(physical_device) }.map(|l| l.handle))
    else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let link_info = unsafe {
        (find_link_info((*create_info).p_next, LOADER_DEVICE_CREATE_INFO)
            as *mut LayerDeviceCreateInfo)
            .as_mut()
    };
    let Some(link_info) = link_info.filter(|l| !l.layer_info.is_null()) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let (gipa, gdpa) = unsafe {
        (
            (*link_info.layer_info).next_get_instance_proc_addr,
            (*link_info.layer_info).next_get_device_proc_addr,
        )
    };
    link_info.layer_info = unsafe { (*link_info.layer_info).next };
    // The next vkCreateDevice, asked with the real instance handle.
    let Some(next_create) =
        (unsafe { load::<vk::PFN_vkCreateDevice>(gipa, instance, c"vkCreateDevice") })
    else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let ci = unsafe { &*create_info };
    // What the layer adds to the device, decided where the instance's data was recorded.
    let plan = inst.as_ref().and_then(|inst| {
        guarded(
            "vkCreateDevice",
            || Some(unsafe { plan_device(inst, physical_device, ci) }),
            || None,
        )
    });
    let patched = plan.as_ref().map_or(*ci, |p| p.patch(ci));
    // SAFETY: the application's create info, with at most one extension added.
    let result = unsafe { next_create(physical_device, &patched, allocator, out) };
    if result != vk::Result::SUCCESS {
        return result;
    }
    let device = unsafe { *out };
    DEVICE_LINKS.insert(
        unsafe { dispatch_key(device) },
        Arc::new(Link {
            handle: device,
            next_proc_addr: gdpa,
        }),
    );
    if let (Some(inst), Some(plan)) = (inst, plan) {
        guarded(
            "vkCreateDevice",
            || unsafe { register_device(&inst, device, gdpa, plan) },
            || (),
        );
    }
    result
}

/// What the layer decides of a device before it is made: its identity, and whether creation
/// feedback may be chained (adding `VK_EXT_pipeline_creation_feedback` where it must).
struct DevicePlan {
    properties: vk::PhysicalDeviceProperties,
    active: bool,
    core_feedback: bool,
    app_enabled_feedback: bool,
    add_feedback: bool,
    extensions: Vec<*const c_char>,
}

impl DevicePlan {
    fn patch<'a>(&'a self, ci: &vk::DeviceCreateInfo<'a>) -> vk::DeviceCreateInfo<'a> {
        let mut patched = *ci;
        if self.add_feedback {
            patched.enabled_extension_count = self.extensions.len() as u32;
            patched.pp_enabled_extension_names = self.extensions.as_ptr();
        }
        patched
    }

    fn feedback_valid(&self) -> bool {
        self.core_feedback || self.app_enabled_feedback || self.add_feedback
    }
}

unsafe fn plan_device(
    inst: &super::instance::InstanceData,
    physical_device: vk::PhysicalDevice,
    ci: &vk::DeviceCreateInfo,
) -> DevicePlan {
    let mut properties = vk::PhysicalDeviceProperties::default();
    // SAFETY: the next layer's command on a physical device of this instance.
    unsafe { (inst.get_physical_device_properties)(physical_device, &mut properties) };
    let device_api = inst.api_version.min(properties.api_version);
    let core_feedback =
        vk::api_version_major(device_api) > 1 || vk::api_version_minor(device_api) >= 3;
    // SAFETY: the application's extension names, NUL-terminated, per the spec.
    let mut extensions: Vec<*const c_char> =
        unsafe { super::objects::slice(ci.pp_enabled_extension_names, ci.enabled_extension_count) }
            .to_vec();
    let app_enabled_feedback = extensions
        .iter()
        .any(|n| unsafe { CStr::from_ptr(*n) } == FEEDBACK_EXTENSION);
    let active = !SETTINGS.disabled;
    let add_feedback = active
        && !core_feedback
        && !app_enabled_feedback
        && unsafe { device_offers(inst, physical_device, FEEDBACK_EXTENSION) };
    if add_feedback {
        extensions.push(FEEDBACK_EXTENSION.as_ptr());
    }
    DevicePlan {
        properties,
        active,
        core_feedback,
        app_enabled_feedback,
        add_feedback,
        extensions,
    }
}

/// Records a device's data. Anything that fails here leaves the device to its link: every call
/// passes through.
unsafe fn register_device(
    inst: &super::instance::InstanceData,
    device: vk::Device,
    gdpa: vk::PFN_vkGetDeviceProcAddr,
    plan: DevicePlan,
) {
    super::guard::fail_setup_for_tests("device");
    // SAFETY: the device just made, and the next layer's own gdpa for it.
    let Some(fns) = (unsafe { DeviceFns::load(gdpa, device) }) else {
        tracing::error!(
            "the next layer lacks a core device command; pipekeep stays out of this device"
        );
        return;
    };
    let properties = &plan.properties;
    let active = plan.active;
    let identity = Identity {
        vendor_id: properties.vendor_id,
        device_id: properties.device_id,
        driver_version: properties.driver_version,
        cache_uuid: properties.pipeline_cache_uuid,
        abi: HOST_ABI,
    };
    let root = SETTINGS.root.clone();
    if root.is_none() && active {
        tracing::warn!("no library root (set PIPEKEEP_DIR, XDG_CACHE_HOME or HOME); pipekeep passes pipelines through");
    }
    let store = root.as_ref().filter(|_| active).map(|r| {
        let mut stores = STORES.lock().unwrap_or_else(|e| e.into_inner());
        let shared = stores
            .entry((r.clone(), inst.title.clone(), identity))
            .or_default()
            .clone();
        shared.devices.fetch_add(1, Ordering::AcqRel);
        shared
    });
    let device_name = bounded_c_string(&properties.device_name);
    tracing::info!(device = %device_name, title = %inst.title, identity = %identity.dir_name(), feedback = plan.feedback_valid(), active, "pipekeep is active on a device");
    let watch = Arc::new(Watch::default());
    let data = DeviceData {
        handle: device,
        fns,
        active,
        feedback_valid: plan.feedback_valid(),
        identity,
        device_name,
        objects: Objects::default(),
        writer: Writer::new(count_writes(watch.clone())),
        watch,
        root,
        title: inst.title.clone(),
        store,
        opener: Default::default(),
        stop: AtomicBool::new(false),
        pid: std::process::id(),
    };
    let data = Arc::new(data);
    // SAFETY: a live device.
    DEVICES.insert(unsafe { dispatch_key(device) }, data.clone());
    register_exit_handler();
    open_ahead(&data);
}

/// A fixed-size C string from the driver, read no further than its array even when it lacks
/// its NUL.
fn bounded_c_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub unsafe extern "system" fn destroy_device(
    device: vk::Device,
    allocator: *const vk::AllocationCallbacks<'_>,
) {
    if device == vk::Device::null() {
        return;
    }
    // SAFETY: a device created through this layer.
    let key = unsafe { dispatch_key(device) };
    let link = DEVICE_LINKS.remove(key);
    let destroy = match DEVICES.remove(key) {
        Some(data) => {
            guarded("vkDestroyDevice", || data.finish(false), || ());
            Some(data.fns.destroy_device)
        }
        // SAFETY: the next layer's command for this device, named with its own type.
        None => link.and_then(|l| unsafe {
            load_device::<vk::PFN_vkDestroyDevice>(l.next_proc_addr, device, c"vkDestroyDevice")
        }),
    };
    if let Some(destroy) = destroy {
        // SAFETY: the application's arguments, passed on unchanged.
        unsafe { destroy(device, allocator) }
    }
}

extern "C" fn at_exit() {
    guarded(
        "exit",
        || {
            for device in DEVICES.values() {
                device.finish(true);
            }
        },
        || (),
    );
}

fn register_exit_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: at_exit is a plain function of this library, which is never unloaded (-z nodelete).
        if unsafe { libc::atexit(at_exit) } != 0 {
            tracing::debug!(
                "no exit handler: a run that never destroys its device writes no final line"
            );
        }
    });
}

/// `vkGetDeviceProcAddr`: ours for what the layer intercepts, where the next layer has it.
pub unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    if name.is_null() || device == vk::Device::null() {
        return None;
    }
    // SAFETY: a NUL-terminated name; a device created through this layer.
    let name = unsafe { CStr::from_ptr(name) };
    let key = unsafe { dispatch_key(device) };
    let dev = DEVICES.get(key);
    let next_gdpa = match &dev {
        Some(dev) => dev.fns.get_device_proc_addr,
        None => DEVICE_LINKS.get(key)?.next_proc_addr,
    };
    match name.to_bytes() {
        b"vkGetDeviceProcAddr" => {
            return void_fn!(get_device_proc_addr, vk::PFN_vkGetDeviceProcAddr)
        }
        b"vkDestroyDevice" => return void_fn!(destroy_device, vk::PFN_vkDestroyDevice),
        _ => {}
    }
    let next = unsafe { next_gdpa(device, name.as_ptr()) };
    match (next, intercepted_device_command(name)) {
        (Some(_), Some(ours)) if dev.is_some_and(|d| d.active) => Some(ours),
        _ => next,
    }
}
