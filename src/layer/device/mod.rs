//! Device-level plumbing: creating the device (walking the link chain; what the layer adds is
//! [`plan`]'s), `vkGetDeviceProcAddr`, the device's data, destroying the device (the compile
//! watch's end), the exit handler for applications that never destroy theirs, and the store
//! opened once per identity per process (the opening thread's work is [`opening`]'s; the
//! background rebuild [`rebuild`]'s).

mod opening;
mod plan;
mod rebuild;

use opening::*;
use plan::*;
use rebuild::*;

use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
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
use crate::key::Digest;
use crate::settings::{BackendSetting, OpeningLate};
use crate::store::files::Written;
use crate::store::identity::{HOST_ABI, NVIDIA};
use crate::store::{AheadOrder, Identity, Store};
use crate::sync::Unpoisoned;
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

/// The next layer's `VK_KHR_pipeline_binary` commands the `binary` backend calls.
pub struct BinaryFns {
    pub create_pipeline_binaries: super::binary_abi::PfnCreatePipelineBinaries,
    pub destroy_pipeline_binary: super::binary_abi::PfnDestroyPipelineBinary,
    pub get_pipeline_binary_data: super::binary_abi::PfnGetPipelineBinaryData,
    pub release_captured_pipeline_data: super::binary_abi::PfnReleaseCapturedPipelineData,
    /// `vkGetPipelineKeyKHR`, never loaded on NVIDIA's driver (see `binary_abi`).
    pub get_pipeline_key: Option<super::binary_abi::PfnGetPipelineKey>,
}

impl BinaryFns {
    unsafe fn load(
        gdpa: vk::PFN_vkGetDeviceProcAddr,
        d: vk::Device,
        vendor_id: u32,
    ) -> Option<BinaryFns> {
        // SAFETY: each name loaded with its own function type.
        unsafe {
            Some(BinaryFns {
                get_pipeline_key: (vendor_id != NVIDIA)
                    .then(|| load_device(gdpa, d, c"vkGetPipelineKeyKHR"))
                    .flatten(),
                create_pipeline_binaries: load_device(gdpa, d, c"vkCreatePipelineBinariesKHR")?,
                destroy_pipeline_binary: load_device(gdpa, d, c"vkDestroyPipelineBinaryKHR")?,
                get_pipeline_binary_data: load_device(gdpa, d, c"vkGetPipelineBinaryDataKHR")?,
                release_captured_pipeline_data: load_device(
                    gdpa,
                    d,
                    c"vkReleaseCapturedPipelineDataKHR",
                )?,
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
    /// The opening thread was started (before `vkCreateDevice` returned): whoever opens the
    /// store, that thread brings it within its bound and drops other drivers' entries after.
    opening_thread: AtomicBool,
    /// Set at `vkDestroyDevice` (or exit): every wait of this device's own threads sees it.
    stop: AtomicBool,
    /// The run's end was written (`finish`): once, whichever of `vkDestroyDevice` and the exit
    /// handler comes first.
    finished: AtomicBool,
    /// The [`FORK_GENERATION`] the device was made in: a child made by `fork` passes everything
    /// through.
    fork_generation: u32,
    /// The device's own state, entering every key (with the driver's global pipeline key,
    /// where it gives one).
    pub device_state: Digest,
    /// Set at the device's end: the background rebuild stops after its current pipeline.
    pub rebuild_stop: Arc<AtomicBool>,
    /// The background rebuild's thread, joined at the device's end.
    pub rebuilder: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Whether a rebuild was owed when the store opened (a driver change, or `record.pending`
    /// left by an earlier run): decided before the store is published, so that this run's own
    /// write-behind, which marks the record pending as it goes, does not start one beside the
    /// application's first compiles.
    pub rebuild_owed_at_opening: AtomicBool,
    /// Write-behind: pipelines this run built as the application asked and left to the rebuild
    /// (counted as they are recorded), and how many of them the last rebuild pass began after.
    pub owed_this_run: AtomicU64,
    /// Write-behind: the pipelines the record held at the store's opening, where it owed entries.
    owed_before: OnceLock<std::collections::HashSet<u64>>,
    owed_covered: AtomicU64,
    /// Test only (`PIPEKEEP_TEST_REBUILD_FIRST`): the write-behind rebuild ends once nothing is
    /// owed, instead of waiting for more until the device goes.
    rebuild_wind_down: AtomicBool,
    /// Entry writes keep failing (`count_writes`): misses are built as the application asked.
    writes_failing: Arc<AtomicBool>,
    /// The rebuild's threads, as each started.
    rebuild_threads: super::idle::ThreadIds,
    /// The title's record (`<title>/record.foz`), where a library root is known.
    pub record: Option<Arc<crate::replay::record::RecordFile>>,
    /// What the record says of the application and device.
    pub app_state: crate::replay::record::AppState,
    /// The backend (`Backend as u8`): `Binary` may switch to `Cache` for the rest of the run.
    backend: AtomicU8,
    /// The pipeline-binary commands, where the extension is enabled on the device.
    pub binary_fns: Option<BinaryFns>,
    /// Entries of binaries the driver refused this run.
    binary_refusals: AtomicU32,
    /// This run's compiled binaries, by the driver's key: pipelines it builds alike share them.
    pub shared_builds: super::sharing::SharedBuilds,
    /// Misses are built as the application asked and recorded; their entries are left to the
    /// background rebuild (`PIPEKEEP_WRITE_BEHIND`).
    pub write_behind: bool,
    /// Found entries carrying NVIDIA's dictionary go to the driver without it once the device
    /// holds it (`PIPEKEEP_DICTIONARY_ONCE`, NVIDIA only).
    pub dictionaries: super::dictionary::DeviceDictionaries,
    /// When the application last began or ended a pipeline: the background rebuild waits while
    /// it builds.
    pub app_activity: Arc<super::activity::AppActivity>,
    /// How many found pipelines may be inside the driver at once (`PIPEKEEP_FOUND_CALLS`); none:
    /// no bound.
    pub found_gate: Option<super::found_gate::FoundGate>,
}

/// How long the application must have built no pipeline before the background rebuild goes on:
/// what the application builds meanwhile it builds anyway, and the rebuild takes the cores it
/// leaves. (Beside the application's own builds the rebuild cost its first launch after a
/// driver change 1.01-1.05x against 1.03-1.09x on 2 cores, pygfx: BENCHMARKS.md.) Under
/// write-behind the same wait lets a run keep what it built, once its builds pause.
const REBUILD_AFTER_QUIET: std::time::Duration = std::time::Duration::from_millis(100);

/// Waits until the application has built no pipeline for [`REBUILD_AFTER_QUIET`]; `false` when
/// the device goes first.
fn wait_for_a_quiet_application(dev: &DeviceData) -> bool {
    dev.app_activity
        .wait_until_quiet(REBUILD_AFTER_QUIET, &dev.rebuild_stop)
}

/// Test settings only: waits until `done`, polling each millisecond, at most ten seconds.
fn test_wait_until(done: &dyn Fn() -> bool) {
    let started = std::time::Instant::now();
    while !done() && started.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

impl DeviceData {
    /// The store, opened at the first call (threads that need it first wait for that opening).
    /// `None` makes the layer a pass-through for this device.
    pub fn store(&self) -> Option<&Arc<Store>> {
        if SETTINGS.test_read_ahead_first {
            // Test only: the opening thread opens the store and reads ahead all it will before
            // the first lookup.
            test_wait_until(&|| self.opened_store().is_some());
            test_wait_until(&|| self.opened_store().is_none_or(|s| s.reading_ahead_ended()));
        }
        self.open_store()
    }

    /// The store, opened at the first call, by the opening thread or by the first pipeline that
    /// comes before it: published at once either way, its bound checked and other drivers'
    /// entries dropped by the opening thread after. Only a device whose opening thread could not
    /// start has its first pipeline do all of it. (The first pipeline used to do all of it
    /// whenever it came first: one launch in ten to twenty at two threads on RADV, each dropping
    /// the 600 entries an earlier driver change had set aside in 50 ms inside the application's
    /// first pipeline.)
    fn open_store(&self) -> Option<&Arc<Store>> {
        let cell = self.store.as_ref()?;
        let store = cell.cell.get_or_init(|| {
            let bound_now = !self.opening_thread.load(Ordering::Acquire);
            let root = self.root.as_ref()?;
            let opened_at = SETTINGS.test_open_time.unwrap_or_else(SystemTime::now);
            crate::store::marker::use_slots(super::marker_map::map);
            match Store::open_then_bound(root, &self.title, self.identity, SETTINGS.max_bytes, opened_at, bound_now) {
                Ok((store, _report)) => {
                    if store.driver_changed() {
                        self.owe_a_rebuild();
                    }
                    let owed = self.record.as_ref().is_some_and(|r| r.is_pending());
                    self.rebuild_owed_at_opening.store(owed, Ordering::Release);
                    if owed && self.write_behind {
                        self.remember_what_was_owed();
                    }
                    store.set_piece_memory(SETTINGS.piece_memory);
                    if SETTINGS.test_pieces_always {
                        store.keep_every_binary_as_a_piece();
                    }
                    if let Some(bytes) = SETTINGS.test_chunked_from {
                        store.set_chunking(crate::store::recipe::Chunking::fine_from(bytes));
                    }
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
        store.as_ref()
    }

    /// Write-behind, where earlier runs owe entries: the pipelines the record holds, so that a
    /// miss among them is kept the keeping way this time instead of owed again. A process that
    /// exits before it pauses (the rebuild waits for a pause) is then found whole by its third
    /// launch: the first records, the second keeps what it asks again, the third finds it.
    fn remember_what_was_owed(&self) {
        let Some(record) = self.record.as_ref() else {
            return;
        };
        let recorded = match crate::replay::record::read(record.path()) {
            Ok((entries, _)) => entries
                .iter()
                .filter(|e| {
                    e.tag == crate::replay::objects::TAG_COMPUTE
                        || e.tag == crate::replay::objects::TAG_GRAPHICS
                })
                .map(|e| e.hash)
                .collect(),
            Err(e) => {
                tracing::debug!(record = %record.path().display(), error = %e, "the record cannot be read; what it owes stays owed");
                Default::default()
            }
        };
        let _ = self.owed_before.set(recorded);
    }

    /// Whether an earlier run recorded this pipeline and left its entry owed (write-behind): it
    /// is kept the keeping way now.
    pub fn was_owed_before(&self, key: &crate::key::PipelineKey) -> bool {
        self.owed_before
            .get()
            .is_some_and(|owed| owed.contains(&crate::replay::record::pipeline_hash(key)))
    }

    /// After a driver change, marks the title's record as owing a rebuild at once (before any
    /// thread can be stopped): a device gone before its rebuild began or ended leaves it to the
    /// next run.
    fn owe_a_rebuild(&self) {
        let Some(record) = self.record.as_ref() else {
            return;
        };
        if SETTINGS.rebuild == crate::settings::RebuildSetting::Off || !record.path().is_file() {
            return;
        }
        if let Err(e) = record.mark_pending() {
            tracing::debug!(record = %record.path().display(), error = %e, "the record is not marked as owing a rebuild");
        }
    }

    /// The backend kept pipelines are built by now.
    pub fn backend(&self) -> Backend {
        if self.backend.load(Ordering::Relaxed) == Backend::Binary as u8 {
            Backend::Binary
        } else {
            Backend::Cache
        }
    }

    /// A build from kept binaries failed with `result`: counted as a refusal only where the
    /// driver says it will not take the data (out of memory, a lost device and the like say
    /// nothing of the binaries).
    pub fn binaries_failed(&self, result: vk::Result) {
        if refuses_the_data(result) {
            self.binaries_refused();
        }
    }

    /// Counts an entry of binaries the driver refused. A driver that refuses a few is not given
    /// more: the device switches to `cache` for the rest of the run, and the store remembers it
    /// for this identity, so that `auto` starts later runs with `cache`. (NVIDIA takes the
    /// binaries written before its per-process dictionary existed and refuses every one after:
    /// measured on the H200, 867 of ncnn's 3,115 taken and 2,246 refused in the second run, so
    /// taken ones must not hold the switch back.)
    pub fn binaries_refused(&self) {
        let refused = self.binary_refusals.fetch_add(1, Ordering::Relaxed) + 1;
        if refused < REFUSALS_BEFORE_SWITCH {
            return;
        }
        let was = self.backend.swap(Backend::Cache as u8, Ordering::Relaxed);
        if was == Backend::Binary as u8 {
            let taken = self.watch.tally().found;
            tracing::warn!(refused, taken, "the driver refuses pipeline binaries another process wrote; pipekeep builds through caches for the rest of this run and from now on for this driver");
            if let Some(store) = self.store() {
                if let Err(e) = store.remember_refused_binaries() {
                    tracing::debug!(error = %e, "could not remember the refusal");
                }
            }
        }
    }

    /// Whether the layer works on this device in this process: not when disabled, and not in
    /// a child made by `fork` (which has none of the parent's threads, and whose markers and
    /// queues would be the parent's).
    pub fn works_here(&self) -> bool {
        self.active && self.fork_generation == FORK_GENERATION.load(Ordering::Relaxed)
    }

    /// The device's store, if it was opened.
    pub(super) fn opened_store(&self) -> Option<&Arc<Store>> {
        self.store.as_ref()?.cell.get()?.as_ref()
    }

    /// Stops this device's own threads: the flag every wait of theirs sees, then a wake for the
    /// readers already waiting, and the rebuild's threads put back at normal priority where
    /// Linux allows it, so that the pipeline each is finishing (which `vkDestroyDevice` waits
    /// for) does not wait for an idle core on a machine busy on every core. Returns at once; the
    /// threads end soon after.
    fn stop_threads(&self) {
        self.stop.store(true, Ordering::Release);
        self.rebuild_stop.store(true, Ordering::Release);
        if let Some(rebuild) = self.rebuilder.locked().as_ref() {
            rebuild.thread().unpark();
        }
        super::idle::raise_threads(&self.rebuild_threads);
        if let Some(store) = self.opened_store() {
            store.wake_readers_to_stop();
        }
    }

    /// Whether a miss has nowhere to be kept: the store keeps nothing (a bound of 0), or its
    /// entries cannot be written. It is then built as the application asked (no capture, its
    /// own cache), as without the layer; found entries are still served.
    pub fn keeps_no_misses(&self, store: &Store) -> bool {
        store.keeps_nothing() || self.writes_failing.load(Ordering::Acquire)
    }

    /// The background rebuild's thread: `None` where none was started (or it was joined), else
    /// whether it has ended.
    fn rebuild_ended(&self) -> Option<bool> {
        self.rebuilder.locked().as_ref().map(|r| r.is_finished())
    }

    /// Joins the opening thread if it ends within `limit` (it sees the stop flag at its next
    /// step); else leaves it.
    fn join_the_opener_within(&self, limit: std::time::Duration) {
        let started = std::time::Instant::now();
        while started.elapsed() < limit {
            let finished = self
                .opener
                .locked()
                .as_ref()
                .is_none_or(|o| o.is_finished());
            if finished {
                if let Some(opener) = self.opener.locked().take() {
                    let _ = opener.join();
                }
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        tracing::debug!(
            "the store's opening thread is still at work at exit; left to end with the process"
        );
    }

    /// Joins the background rebuild, if one was started. True when one was.
    fn join_the_rebuild(&self) -> bool {
        let rebuild = self.rebuilder.locked().take();
        rebuild.map(|r| r.join()).is_some()
    }

    /// Test only: waits for a background rebuild to be started by the opening thread and to
    /// finish (at most a minute), instead of stopping it; at normal priority where Linux allows
    /// it, since a machine busy on every core gives an idle-priority rebuild no time.
    fn let_the_rebuild_finish(&self) {
        self.rebuild_wind_down.store(true, Ordering::Release);
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(60) {
            match self.rebuild_ended() {
                Some(true) => {
                    self.join_the_rebuild();
                    return;
                }
                // Again each time: the rebuild's workers lower themselves as they start.
                Some(false) => {
                    super::idle::raise_threads(&self.rebuild_threads);
                }
                None => {
                    let opener_done = self
                        .opener
                        .locked()
                        .as_ref()
                        .is_none_or(|o| o.is_finished());
                    if opener_done {
                        return;
                    }
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// The run's order of use, for the next run's reading ahead, once its stamps are written.
    fn remember_use_order(&self) {
        if let Some(store) = self.opened_store() {
            if let Err(e) = store.remember_use_order() {
                tracing::debug!(error = %e, "the run's order of use is not kept");
            }
        }
    }

    /// The run's end: the entries still queued, then the final compile-watch line and the run's
    /// line in `runs.jsonl`.
    fn finish(&self, at_exit: bool) {
        if !self.works_here() {
            return;
        }
        if self.finished.swap(true, Ordering::AcqRel) {
            return; // the exit handler and vkDestroyDevice on another thread: once
        }
        self.stop_threads();
        // The opening thread first: it may start the background rebuild until it sees the stop.
        if at_exit {
            // The opening thread and the readers ahead see the stop; each is given a moment to
            // end before the process's destructors run under them, never waited on for longer.
            self.join_the_opener_within(EXIT_WAIT);
        } else if let Some(opener) = self.opener.locked().take() {
            let _ = opener.join();
        }
        // The rebuild ends after the pipeline it is building, before its commands can go: it
        // calls the driver through this device.
        self.join_the_rebuild();
        if at_exit {
            if let Some(store) = self.opened_store() {
                store.stop_reading_ahead();
            }
            self.writer.drain_here();
            self.remember_use_order();
        } else {
            self.writer.finish();
            let last = self
                .store
                .as_ref()
                .is_some_and(|s| s.devices.fetch_sub(1, Ordering::AcqRel) == 1);
            if let (true, Some(store)) = (last, self.opened_store()) {
                store.stop_reading_ahead();
                self.remember_use_order();
                if self.watch.tally().found > 0 {
                    store.forget_blamed_pieces();
                }
            }
        }
        let runs = self
            .root
            .as_ref()
            .map(|r| r.join(&self.title).join("runs.jsonl"));
        let runs = runs.filter(|p| p.parent().is_some_and(|d| d.is_dir()));
        let identity = self.identity.dir_name();
        if let Some(line) = self.watch.finish(
            runs.as_deref(),
            &self.device_name,
            &identity,
            self.backend().name(),
        ) {
            if at_exit {
                super::guard::write_at_exit(&line);
            } else {
                tracing::info!("{line}");
                if let Some(longest) = self.watch.longest_line() {
                    tracing::info!("{longest}");
                }
            }
        }
    }
}

/// A driver's answer that it will not take kept binaries: a pipeline it would have to compile
/// (NVIDIA's answer to binaries of another process), data it cannot make binaries of, or a
/// binary it says is missing.
fn refuses_the_data(result: vk::Result) -> bool {
    matches!(
        result,
        vk::Result::PIPELINE_COMPILE_REQUIRED | vk::Result::ERROR_INITIALIZATION_FAILED
    ) || result == super::binary_abi::PIPELINE_BINARY_MISSING
}

/// How long the exit handler gives the opening thread to see the stop.
const EXIT_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Entries of binaries refused before a device gives up on binaries.
const REFUSALS_BEFORE_SWITCH: u32 = 3;

pub static DEVICES: Registry<DeviceData> = Registry::new();

/// The commands of the extensions the layer added to each device, which `vkGetDeviceProcAddr`
/// does not give the application.
static HIDDEN_COMMANDS: Registry<Vec<&'static CStr>> = Registry::new();

/// Every device made through the layer, whether or not its data could be recorded.
static DEVICE_LINKS: Registry<Link<vk::Device, vk::PFN_vkGetDeviceProcAddr>> = Registry::new();

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
    Arc::new(move |result| match result {
        Ok(written) => {
            failed_in_a_row.store(0, Ordering::Relaxed);
            if let Written::Whole(_) = written {
                watch.written();
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
    let layers_below = !link_info.layer_info.is_null();
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

/// How a device's kept pipelines are built (SPEC "Building a pipeline: two backends").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// From the entry's pipeline binaries; misses built through the application's own cache.
    Binary,
    /// Through a pipeline cache of the layer's own made from the entry.
    Cache,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Binary => "binary",
            Backend::Cache => "cache",
        }
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
    register_process_handlers();
    let properties = &plan.properties;
    let active = plan.active;
    let identity = identity_of(properties);
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
    // A binary is used as it is: a device state the key reads by `sType` alone is covered only
    // where the driver's global key says what state its binaries fit.
    let backend = if backend == Backend::Binary && plan.unknown_structures && global_key.is_none() {
        tracing::info!("the device chains structures pipekeep reads by sType alone, and the driver gives no global key: cache backend");
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
        objects: Objects::default(),
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
        owed_this_run: AtomicU64::new(0),
        owed_before: OnceLock::new(),
        owed_covered: AtomicU64::new(0),
        rebuild_wind_down: AtomicBool::new(false),
        rebuild_threads: Default::default(),
        record: SETTINGS
            .root
            .as_ref()
            .map(|r| Arc::new(crate::replay::record::RecordFile::new(&r.join(&inst.title)))),
        app_state: crate::replay::record::AppState {
            application: inst.application.clone(),
            ..plan.app_features.clone()
        },
        store,
        opener: Default::default(),
        opening_thread: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        finished: AtomicBool::new(false),
        fork_generation: FORK_GENERATION.load(Ordering::Relaxed),
        device_state,
        backend: AtomicU8::new(backend as u8),
        binary_fns,
        binary_refusals: Default::default(),
        shared_builds: Default::default(),
        dictionaries: super::dictionary::DeviceDictionaries::in_process(cuts_dictionary, identity),
        app_activity,
        found_gate,
        write_behind: active
            && SETTINGS.root.is_some()
            && SETTINGS.rebuild == crate::settings::RebuildSetting::Background
            && matches!(
                SETTINGS.write_behind,
                crate::settings::WriteBehindSetting::On
            ),
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

/// How many `fork`s this process is from the one the layer was loaded in; each device records
/// its own. Kept by a handler rather than asked of the kernel (`getpid` is a system call) in
/// every pipeline intercept.
static FORK_GENERATION: AtomicU32 = AtomicU32::new(0);

extern "C" fn in_forked_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
    super::marker_map::let_go_in_forked_child();
}

/// The exit handler and the fork handler, registered once, before the first device's data.
fn register_process_handlers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: plain functions of this library, which is never unloaded (-z nodelete).
        if unsafe { libc::atexit(at_exit) } != 0 {
            tracing::debug!(
                "no exit handler: a run that never destroys its device writes no final line"
            );
        }
        // SAFETY: as above; the child handler bumps an atomic and points the inherited markers'
        // descriptors at /dev/null (async-signal-safe calls only).
        if unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) } != 0 {
            tracing::debug!("no fork handler: a child made by fork would not know it");
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
    fn only_the_driver_refusing_the_data_counts_as_a_refusal_of_the_binaries() {
        assert!(refuses_the_data(vk::Result::PIPELINE_COMPILE_REQUIRED));
        assert!(refuses_the_data(vk::Result::ERROR_INITIALIZATION_FAILED));
        assert!(refuses_the_data(
            super::super::binary_abi::PIPELINE_BINARY_MISSING
        ));
        for other in [
            vk::Result::ERROR_OUT_OF_HOST_MEMORY,
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY,
            vk::Result::ERROR_DEVICE_LOST,
            vk::Result::ERROR_UNKNOWN,
        ] {
            assert!(!refuses_the_data(other), "{other:?}");
        }
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
            written(failure());
        }
        written(Ok(Written::Whole(10)));
        for _ in 1..FAILED_WRITES_TO_STOP {
            written(failure());
        }
        assert!(!failing.load(Ordering::Acquire));
        written(failure());
        assert!(failing.load(Ordering::Acquire));
        assert_eq!(watch.tally().written, 1);
    }
}
