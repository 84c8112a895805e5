//! A device's life: made (walking the link chain; what the layer adds is [`plan`]'s), its
//! commands given out (`vkGetDeviceProcAddr`), its own threads (the store's opening and reading
//! ahead [`opening`]'s, the background rebuild [`rebuild`]'s), its end ([`ending`]'s), and the exit
//! and fork handlers ([`process`]'s). The top floor of the layer: it calls down into the device's
//! data ([`crate::layer::device`]) and the creation path, and nothing below calls up into it.

mod ending;
mod opening;
mod plan;
mod process;
mod rebuild;

use opening::*;
use plan::*;
use process::*;
use rebuild::*;

use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Once};

use ash::vk;

use super::abi::{find_link_info, LayerDeviceCreateInfo, LOADER_DEVICE_CREATE_INFO};
use super::device::{
    load_device, test_wait_until, Backend, BinaryFns, DeviceData, DeviceFns, DEVICES, DEVICE_LINKS,
    FORK_GENERATION, STORES,
};
use super::guard::{guarded, SETTINGS};
use super::identifiers::Identifiers;
use super::instance_data::{instance_data, instance_link, load};
use super::intercepts::intercepted_device_command;
use super::objects::Objects;
use super::registry::{dispatch_key, Link, Registry};
use super::writer::{OnWritten, Writer, WrittenFor};
use crate::key::Digest;
use crate::settings::{BackendSetting, OpeningLate};
use crate::store::files::Written;
use crate::store::identity::NVIDIA;
use crate::store::{AheadOrder, Identity, Store};
use crate::sync::Unpoisoned;
use crate::watch::Watch;

/// The commands of the extensions the layer added to each device, which `vkGetDeviceProcAddr`
/// does not give the application.
static HIDDEN_COMMANDS: Registry<Vec<&'static CStr>> = Registry::new();

/// How many entry writes in a row must fail before the device stops keeping: a store that cannot
/// be written (read-only, full, no permission) fails every write, while a race with another
/// process fails one now and then.
const FAILED_WRITES_TO_STOP: u32 = 8;

/// Counts each entry written in the watch, and logs the first write that failed, once. After
/// [`FAILED_WRITES_TO_STOP`] failures in a row, sets `failing`: the store cannot be written, and
/// the device's misses are built as the application asked for the rest of the run.
fn count_writes(watch: Arc<Watch>, failing: Arc<AtomicBool>) -> OnWritten {
    let failure_logged = AtomicBool::new(false);
    let failed_in_a_row = AtomicU32::new(0);
    Arc::new(move |result, written_for| match result {
        Ok(written) => {
            failed_in_a_row.store(0, Ordering::Relaxed);
            if let Written::Whole(_) = written {
                match written_for {
                    WrittenFor::Application => watch.written(false),
                    WrittenFor::Rebuild => watch.written(true),
                    WrittenFor::Earlier => watch.earlier_written(),
                }
            }
        }
        Err(e) => {
            if !failure_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(error = %e, "an entry cannot be written; pipelines are still built, but not kept");
            }
            if failed_in_a_row.fetch_add(1, Ordering::Relaxed) + 1 == FAILED_WRITES_TO_STOP {
                failing.store(true, Ordering::Release);
                tracing::info!(
                    failed = FAILED_WRITES_TO_STOP,
                    "the store takes no entries: pipelines not in it are built as the application asks for the rest of the run"
                );
            }
        }
    })
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
    // The loader links the layers bottom-up: the lowest layer's link has no next. A layer below
    // pipekeep may not know an extension pipekeep adds (Debian 12's validation layer wraps
    // handles and passes unknown commands straight to the driver: a crash at the first kept
    // pipeline), so where one is there pipekeep adds no command-bearing extension.
    let layers_below = !link_info.layer_info.is_null() || crate::settings::as_if_layers_below_now();
    // The next vkCreateDevice, asked with the real instance handle.
    let Some(next_create) =
        (unsafe { load::<vk::PFN_vkCreateDevice>(gipa, instance, c"vkCreateDevice") })
    else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let ci = unsafe { &*create_info };
    // What the layer adds to the device, decided where the instance's data was recorded.
    let mut plan = inst.as_ref().and_then(|inst| {
        guarded(
            "vkCreateDevice",
            || Some(unsafe { plan_device(inst, physical_device, ci, layers_below) }),
            || None,
        )
    });
    let patched = plan.as_ref().map_or(*ci, |p| p.patch(ci));
    // Each layer below moves this same link forward as it calls down: a second call starts it
    // where it stood for the first.
    let link_below = link_info.layer_info;
    // SAFETY: the application's create info, with what the plan adds.
    let mut result = unsafe { next_create(physical_device, &patched, allocator, out) };
    if refused_for_what_was_added(result) && plan.as_ref().is_some_and(DevicePlan::adds_anything) {
        // The driver refuses the device with what the layer adds: made again as the
        // application asked, the layer adding nothing.
        tracing::warn!(result = ?result, "the device with pipekeep's additions was refused; made again as the application asked");
        plan = plan.map(DevicePlan::adding_nothing);
        link_info.layer_info = link_below;
        // SAFETY: the application's own create info, unchanged.
        result = unsafe { next_create(physical_device, ci, allocator, out) };
    }
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
    // Hidden whether or not the device's data can be recorded below.
    if let Some(hidden) = plan.as_ref().filter(|p| !p.hidden_commands.is_empty()) {
        HIDDEN_COMMANDS.insert(
            unsafe { dispatch_key(device) },
            Arc::new(hidden.hidden_commands.clone()),
        );
    }
    if let (Some(inst), Some(plan)) = (inst, plan) {
        guarded(
            "vkCreateDevice",
            || unsafe { register_device(&inst, device, gdpa, plan) },
            || (),
        );
    }
    result
}

/// Records a device's data. Anything that fails here leaves the device to its link: every call
/// passes through.
unsafe fn register_device(
    inst: &super::instance_data::InstanceData,
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
    register_process_handlers();
    let properties = &plan.properties;
    let active = plan.active;
    let identity = Identity::of_device(properties);
    // SAFETY: the device just made; loaded only where the extension is enabled on it.
    let binary_fns = plan
        .binaries_enabled
        .then(|| unsafe { BinaryFns::load(gdpa, device, identity.vendor_id) })
        .flatten();
    let backend = match (plan.backend, &binary_fns) {
        (Backend::Binary, None) => Backend::Cache,
        (b, _) => b,
    };
    // SAFETY: the device just made, with the extension enabled where `binary_fns` is loaded.
    let global_key = binary_fns
        .as_ref()
        .and_then(|fns| unsafe { super::sharing::global_key(device, fns) });
    let device_state = match &global_key {
        Some(key) => crate::key::device_digest_under_global_key(&plan.device_state, key),
        None => plan.device_state,
    };
    // A binary is used as it is, and the key holds of the device only its robustness: the
    // device state binaries fit is the driver's keys' to say (its global key in every key, its
    // key for each create info kept with the binaries), so without them (NVIDIA's, never asked)
    // entries are kept as caches, which the driver checks itself.
    let backend = if backend == Backend::Binary && global_key.is_none() {
        tracing::info!("the driver gives no global pipeline key: cache backend");
        Backend::Cache
    } else {
        backend
    };
    let root = SETTINGS.root.clone();
    if root.is_none() && active {
        tracing::warn!("no library root (set PIPEKEEP_DIR, XDG_CACHE_HOME or HOME); pipekeep passes pipelines through");
    }
    let store = root.as_ref().filter(|_| active).map(|r| {
        let mut stores = STORES.locked();
        let shared = stores
            .entry((r.clone(), inst.title.clone(), identity))
            .or_default()
            .clone();
        shared.devices.fetch_add(1, Ordering::AcqRel);
        shared
    });
    let device_name = bounded_c_string(&properties.device_name);
    let found_gate =
        super::found_gate::FoundGate::for_device(SETTINGS.found_calls, identity.vendor_id);
    let found_calls = found_gate.as_ref().map(|g| g.most());
    tracing::info!(device = %device_name, title = %inst.title, identity = %identity.dir_name(), feedback = plan.feedback_valid(), global_key = global_key.is_some(), backend = backend.name(), why = plan.backend_why, found_calls = %found_calls.map_or_else(|| "off".to_string(), |n| n.to_string()), active, "pipekeep is active on a device");
    let watch = Arc::new(Watch::default());
    let writes_failing = Arc::new(AtomicBool::new(false));
    let cuts_dictionary = SETTINGS.dictionary_once && identity.vendor_id == NVIDIA;
    let app_activity = Arc::new(super::activity::AppActivity::default());
    let data = DeviceData {
        handle: device,
        fns,
        active,
        feedback_valid: plan.feedback_valid(),
        identity,
        device_name,
        objects: Objects {
            identifiers: match (&plan.identifier_algorithm, &root) {
                // Where the device keeps entries: one that keeps nothing writes nothing.
                (Some(algorithm), Some(root)) if active && SETTINGS.max_bytes > 0 => {
                    Identifiers::kept_in(
                        root.join(&inst.title)
                            .join(crate::store::identifiers::FILE_NAME),
                        *algorithm,
                    )
                }
                _ => Identifiers::default(),
            },
            ..Objects::default()
        },
        rebuild_objects: Objects::default(),
        writer: Writer::new(
            count_writes(watch.clone(), writes_failing.clone()),
            Some(app_activity.clone()),
        ),
        writes_failing,
        watch,
        root,
        title: inst.title.clone(),
        rebuild_stop: Arc::default(),
        rebuilder: Mutex::default(),
        rebuild_owed_at_opening: AtomicBool::new(false),
        rebuild_threads: Default::default(),
        record: SETTINGS
            .root
            .as_ref()
            .map(|r| Arc::new(crate::replay::record::RecordFile::new(&r.join(&inst.title)))),
        record_app: Arc::new(crate::replay::record::RecordApp::new(
            crate::replay::record::AppState {
                application: inst.application.clone(),
                launch: crate::replay::record::Launch {
                    instance_extensions: inst.extensions.clone(),
                    executable: crate::layer::process_name::driconf_executable(),
                    layers_below: plan.layers_below,
                },
                ..plan.app_features.clone()
            },
        )),
        store,
        opener: Default::default(),
        opening_thread: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        finished: AtomicBool::new(false),
        fork_generation: FORK_GENERATION.load(Ordering::Relaxed),
        device_state,
        shader_objects: plan.shader_objects,
        backend: AtomicU8::new(backend as u8),
        binary_fns,
        binary_refusals: Default::default(),
        shared_builds: Default::default(),
        twins: Default::default(),
        dictionaries: super::dictionary::DeviceDictionaries::in_process(cuts_dictionary, identity),
        app_activity,
        found_gate,
        driver_gate: Arc::default(),
        max_samplers: properties.limits.max_sampler_allocation_count,
    };
    let data = Arc::new(data);
    // SAFETY: a live device.
    DEVICES.insert(unsafe { dispatch_key(device) }, data.clone());
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
    if SETTINGS.test_stall_rebuild.is_some() {
        super::test_stall::device_ends();
    }
    if SETTINGS.test_rebuild_first {
        // While the device is still known: the rebuild builds through this layer's commands.
        if let Some(data) = DEVICES.get(key) {
            data.let_the_rebuild_finish();
        }
    }
    // The device's threads are stopped and joined while it is still known: the background
    // rebuild destroys its shader modules, layouts, samplers and render passes through this
    // layer's commands, which find the device in these maps (VUID-vkDestroyDevice-device-05137).
    let data = DEVICES.get(key);
    if let Some(data) = &data {
        guarded("vkDestroyDevice", || data.finish(false), || ());
        // Whatever `finish` did (nothing, where the exit handler came first, even on another
        // thread still at it): no thread of the layer's is inside the driver when the device
        // goes, and none enters after.
        data.driver_gate.shut();
    }
    let link = DEVICE_LINKS.remove(key);
    DEVICES.remove(key);
    HIDDEN_COMMANDS.remove(key);
    let destroy = match data {
        Some(data) => Some(data.fns.destroy_device),
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
    if HIDDEN_COMMANDS.get(key).is_some_and(|h| h.contains(&name)) {
        return None;
    }
    match &dev {
        // SAFETY: as above.
        Some(dev) => unsafe { command_of(dev, name) },
        None => unsafe { next_gdpa(device, name.as_ptr()) },
    }
}

/// The command `name` of a device of this layer: this layer's own where it intercepts it (and
/// the next layer has it), else the next layer's.
///
/// # Safety
/// `dev` must be a live device's data.
unsafe fn command_of(dev: &DeviceData, name: &CStr) -> vk::PFN_vkVoidFunction {
    // SAFETY: the next layer's command, asked of its own device.
    let next = unsafe { (dev.fns.get_device_proc_addr)(dev.handle, name.as_ptr()) };
    match (next, intercepted_device_command(name)) {
        (Some(_), Some(ours)) if dev.active => Some(ours),
        _ => next,
    }
}

#[cfg(test)]
mod end_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreError;

    fn failure() -> Result<Written, StoreError> {
        Err(StoreError::Io {
            op: "create",
            path: "/nowhere".into(),
            source: std::io::Error::from(std::io::ErrorKind::ReadOnlyFilesystem),
        })
    }

    #[test]
    fn a_device_is_asked_again_only_where_the_driver_may_refuse_what_was_added() {
        assert!(refused_for_what_was_added(
            vk::Result::ERROR_EXTENSION_NOT_PRESENT
        ));
        assert!(refused_for_what_was_added(
            vk::Result::ERROR_FEATURE_NOT_PRESENT
        ));
        assert!(!refused_for_what_was_added(
            vk::Result::ERROR_OUT_OF_HOST_MEMORY
        ));
        assert!(!refused_for_what_was_added(vk::Result::ERROR_DEVICE_LOST));
    }

    #[test]
    fn binaries_are_added_with_what_they_need_at_the_applications_api_and_never_above_a_layer() {
        let none = |_: &CStr| false;
        let all = |_: &CStr| true;
        let v = |minor| vk::make_api_version(0, 1, minor, 0);
        fn names(r: Result<Vec<&CStr>, &'static str>) -> Result<Vec<String>, &'static str> {
            r.map(|v| v.iter().map(|c| c.to_str().unwrap().to_owned()).collect())
        }
        assert_eq!(
            names(binary_extensions(v(3), &none, &all, false)).unwrap(),
            ["VK_KHR_pipeline_binary", "VK_KHR_maintenance5"]
        );
        assert_eq!(
            names(binary_extensions(v(4), &none, &all, false)).unwrap(),
            ["VK_KHR_pipeline_binary"]
        );
        // Below 1.3, maintenance5 needs dynamic rendering (VUID-vkCreateDevice-ppEnabledExtensionNames-01387).
        assert_eq!(
            names(binary_extensions(v(2), &none, &all, false)).unwrap(),
            [
                "VK_KHR_pipeline_binary",
                "VK_KHR_maintenance5",
                "VK_KHR_dynamic_rendering"
            ]
        );
        assert!(binary_extensions(v(1), &none, &all, false).is_err());
        assert!(binary_extensions(v(0), &none, &all, false).is_err());
        let dynamic_rendering = |e: &CStr| e == DYNAMIC_RENDERING;
        assert_eq!(
            names(binary_extensions(v(1), &dynamic_rendering, &all, false)).unwrap(),
            ["VK_KHR_pipeline_binary", "VK_KHR_maintenance5"]
        );
        // A layer below: none used, even where the application enabled them itself.
        assert!(binary_extensions(v(3), &none, &all, true).is_err());
        assert!(binary_extensions(v(3), &all, &all, true).is_err());
        assert!(binary_extensions(v(3), &all, &none, false)
            .unwrap()
            .is_empty());
        // Not offered.
        assert!(binary_extensions(v(3), &none, &none, false).is_err());
    }

    #[test]
    fn a_store_stops_keeping_after_writes_fail_in_a_row_not_after_a_failure_now_and_then() {
        let watch = Arc::new(Watch::default());
        let failing = Arc::new(AtomicBool::new(false));
        let written = count_writes(watch.clone(), failing.clone());
        for _ in 1..FAILED_WRITES_TO_STOP {
            written(failure(), WrittenFor::Application);
        }
        written(Ok(Written::Whole(10)), WrittenFor::Application);
        for _ in 1..FAILED_WRITES_TO_STOP {
            written(failure(), WrittenFor::Application);
        }
        assert!(!failing.load(Ordering::Acquire));
        written(failure(), WrittenFor::Application);
        assert!(failing.load(Ordering::Acquire));
        assert_eq!(watch.tally().written, 1);
    }

    #[test]
    fn the_background_rebuilds_writes_are_counted_apart_from_the_applications() {
        let watch = Arc::new(Watch::default());
        let written = count_writes(watch.clone(), Arc::new(AtomicBool::new(false)));
        written(Ok(Written::Whole(10)), WrittenFor::Application);
        written(Ok(Written::Whole(10)), WrittenFor::Rebuild);
        written(Ok(Written::Whole(10)), WrittenFor::Rebuild);
        let tally = watch.tally();
        assert_eq!((tally.written, tally.rebuild_written), (1, 2));
        assert!(tally.line().contains(" written=1 "), "{}", tally.line());
    }
}
