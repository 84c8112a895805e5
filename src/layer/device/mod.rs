//! The device's data, which every intercept reads: [`DeviceData`] and the registry of devices,
//! the next layer's commands ([`commands`]), the backend ([`backend`]), and the store opened once
//! per identity per process ([`shared_store`]). How a device is made, its own threads and its end
//! are [`crate::layer::lifetime`]'s, a floor above: nothing here calls up into it.

mod backend;
pub(in crate::layer) mod commands;
mod shared_store;

pub use backend::Backend;
pub use commands::{load_device, BinaryFns, DeviceFns};
pub use shared_store::{StoreCell, STORES};

use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use ash::vk;

pub(in crate::layer) use super::idle::on_rebuild_thread;
use super::objects::Objects;
use super::registry::{dispatch_key, Link, Registry};
use super::writer::Writer;
use crate::key::Digest;
use crate::store::{Identity, Store};
use crate::watch::Watch;

pub struct DeviceData {
    pub handle: vk::Device,
    pub fns: DeviceFns,
    /// False when the layer is disabled: everything passes through.
    pub active: bool,
    /// Creation feedback may be chained (API 1.3, or the extension enabled).
    pub feedback_valid: bool,
    pub identity: Identity,
    pub device_name: String,
    /// The application's objects. Read through [`DeviceData::objects`].
    pub objects: Objects,
    /// The background rebuild's objects, apart: its threads run at idle priority and must hold
    /// no lock the application's pipelines take.
    pub rebuild_objects: Objects,
    pub watch: Arc<Watch>,
    /// Writes entries off the application's threads.
    pub writer: Writer,
    pub root: Option<PathBuf>,
    pub title: String,
    pub store: Option<StoreCell>,
    /// Opens the store ahead of the first pipeline; joined at `vkDestroyDevice`.
    pub opener: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The opening thread was started (before `vkCreateDevice` returned): whoever opens the
    /// store, that thread brings it within its bound and drops other drivers' entries after.
    pub opening_thread: AtomicBool,
    /// Set at `vkDestroyDevice` (or exit): every wait of this device's own threads sees it.
    pub stop: AtomicBool,
    /// The run's end was written (`finish`): once, whichever of `vkDestroyDevice` and the exit
    /// handler comes first.
    pub finished: AtomicBool,
    /// The [`FORK_GENERATION`] the device was made in: a child made by `fork` passes everything
    /// through.
    pub fork_generation: u32,
    /// The device's own state, entering every key (with the driver's global pipeline key,
    /// where it gives one).
    pub device_state: Digest,
    /// Set at the device's end: the background rebuild stops after its current pipeline.
    pub rebuild_stop: Arc<AtomicBool>,
    /// The background rebuild's thread, joined at the device's end.
    pub rebuilder: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Whether a rebuild was owed when the store opened (a driver change, or `record.pending`
    /// left by an earlier run): decided before the store is published.
    pub rebuild_owed_at_opening: AtomicBool,
    /// Entry writes keep failing (`count_writes`): misses are built as the application asked.
    pub writes_failing: Arc<AtomicBool>,
    /// The rebuild's threads, as each started.
    pub rebuild_threads: super::idle::ThreadIds,
    /// The title's record (`<title>/record.foz`), where a library root is known.
    pub record: Option<Arc<crate::replay::record::RecordFile>>,
    /// What the record says of the application and device.
    pub record_app: Arc<crate::replay::record::RecordApp>,
    /// The backend (`Backend as u8`): `Binary` may switch to `Cache` for the rest of the run.
    pub backend: AtomicU8,
    /// The pipeline-binary commands, where the extension is enabled on the device.
    pub binary_fns: Option<BinaryFns>,
    /// Entries of binaries the driver refused this run.
    pub binary_refusals: AtomicU32,
    /// This run's compiled binaries, by the driver's key: pipelines it builds alike share them.
    pub shared_builds: super::sharing::SharedBuilds,
    /// This run's compiled cache data, by SPIR-V: a `cache` miss is built through a cache seeded
    /// with its twin's (`PIPEKEEP_SHARE_BUILDS`).
    pub twins: super::twins::Twins,
    /// Found entries carrying NVIDIA's dictionary go to the driver without it once the device
    /// holds it (`PIPEKEEP_DICTIONARY_ONCE`, NVIDIA only).
    pub dictionaries: super::dictionary::DeviceDictionaries,
    /// When the application last began or ended a pipeline: the background rebuild waits while
    /// it builds.
    pub app_activity: Arc<super::activity::AppActivity>,
    /// How many found pipelines may be inside the driver at once (`PIPEKEEP_FOUND_CALLS`); none:
    /// no bound.
    pub found_gate: Option<super::found_gate::FoundGate>,
    /// Whether the layer's own threads may still call into the driver: shut at the device's end
    /// (`vkDestroyDevice`, or the exit handler), which waits for those inside.
    pub driver_gate: Arc<super::driver_gate::DriverGate>,
    /// Where the application enabled `VK_EXT_shader_object`: its shader objects are kept
    /// ([`crate::layer::shaders`]), keyed so.
    pub shader_objects: Option<ShaderObjectsKeying>,
    /// The device's `maxSamplerAllocationCount`: the background rebuild's immutable samplers
    /// count against it beside the application's.
    pub max_samplers: u32,
}

/// Test settings only: waits until `done`, polling each millisecond, at most ten seconds.
pub(in crate::layer) fn test_wait_until(done: &dyn Fn() -> bool) {
    let started = std::time::Instant::now();
    while !done() && started.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

impl DeviceData {
    /// The objects of the calling thread's side: the background rebuild's, or the
    /// application's.
    pub fn objects(&self) -> &Objects {
        if on_rebuild_thread() {
            &self.rebuild_objects
        } else {
            &self.objects
        }
    }

    /// Whether the layer works on this device in this process: not when disabled, and not in
    /// a child made by `fork` (which has none of the parent's threads, and whose markers and
    /// queues would be the parent's).
    pub fn works_here(&self) -> bool {
        self.active && self.fork_generation == FORK_GENERATION.load(Ordering::Relaxed)
    }

    /// Whether a miss has nowhere to be kept: the store keeps nothing (a bound of 0), or its
    /// entries cannot be written. It is then built as the application asked (no capture, its
    /// own cache), as without the layer; found entries are still served.
    pub fn keeps_no_misses(&self, store: &Store) -> bool {
        store.keeps_nothing() || self.writes_failing.load(Ordering::Acquire)
    }
}

/// What a device's shader objects are keyed by besides their own create infos.
#[derive(Clone, Copy, Debug)]
pub struct ShaderObjectsKeying {
    /// `shaderBinaryUUID` and `shaderBinaryVersion` (little-endian): a binary is valid for these.
    pub binary_format: [u8; 20],
    /// The device's whole state ([`crate::key::whole_device_digest`]).
    pub device: Digest,
}

pub static DEVICES: Registry<DeviceData> = Registry::new();

/// Every device made through the layer, whether or not its data could be recorded.
pub static DEVICE_LINKS: Registry<Link<vk::Device, vk::PFN_vkGetDeviceProcAddr>> = Registry::new();

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

/// How many `fork`s this process is from the one the layer was loaded in; each device records
/// its own. Kept by a handler ([`crate::layer::lifetime`]'s) rather than asked of the kernel
/// (`getpid` is a system call) in every pipeline intercept.
pub static FORK_GENERATION: AtomicU32 = AtomicU32::new(0);
