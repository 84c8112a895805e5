//! Device-level plumbing: creating the device (walking the link chain, adding
//! `VK_EXT_pipeline_creation_feedback` where the device offers it and the API needs it),
//! `vkGetDeviceProcAddr`, destroying the device (the compile watch's end), the exit handler for
//! applications that never destroy theirs, and the store opened once per identity per process.

use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Once, OnceLock};
use std::time::SystemTime;

use ash::vk;
use ash::vk::Handle;

use super::abi::{find_link_info, LayerDeviceCreateInfo, LOADER_DEVICE_CREATE_INFO};
use super::guard::{guarded, SETTINGS};
use super::instance::{instance_data, instance_link, load};
use super::intercepted_device_command;
use super::objects::Objects;
use super::registry::{dispatch_key, Link, Registry};
use super::writer::{OnWritten, Writer};
use crate::key::Digest;
use crate::settings::{BackendSetting, MergeSetting, OpeningLate};
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
    pub merge_pipeline_caches: vk::PFN_vkMergePipelineCaches,
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
                merge_pipeline_caches: load_device(gdpa, d, c"vkMergePipelineCaches")?,
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
    /// Reading ahead merges found entries into caches of this device's own (`cache` backend).
    pub merges: bool,
    /// Misses are built as the application asked and recorded; their entries are left to the
    /// background rebuild (`PIPEKEEP_WRITE_BEHIND`).
    pub write_behind: bool,
    pub merged_caches: super::merge::MergedCaches,
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
            // The readers are gone: what they merged goes with this device's caches.
            if let Some(store) = self.opened_store() {
                store.forget_merged(self.handle.as_raw());
            }
            self.merged_caches.destroy_all(self);
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

/// Opens the device's store on a thread of the layer's own while the application loads its
/// shaders, so the opening (a sweep, and a stat of every entry for the bound) is not paid inside
/// the first pipeline's creation. A pipeline that comes first waits for the same opening. The
/// thread then reads ahead the entries the last run used, at idle priority (a lookup that comes
/// first reads its entry itself), until they are read or the device ends: at once in the order
/// the last run left (`use-order`), the bound after, in the application's first pause; else
/// after the bound, in its stamps' order.
fn open_ahead(data: &Arc<DeviceData>) {
    if !data.active || data.store.as_ref().is_none_or(|s| s.cell.get().is_some()) {
        return;
    }
    let ahead = data.clone();
    // Before the thread can open the store itself: its opening leaves the bound to it.
    data.opening_thread.store(true, Ordering::Release);
    let spawned = std::thread::Builder::new()
        .name("pipekeep-open".into())
        .spawn(move || guarded("store opening", || open_then_tidy(&ahead), || ()));
    match spawned {
        Ok(handle) => *data.opener.locked() = Some(handle),
        Err(e) => {
            data.opening_thread.store(false, Ordering::Release);
            tracing::debug!(error = %e, "no opening thread; the first pipeline opens the store")
        }
    }
}

/// The opening thread's work: the store opened (or taken as the first pipeline opened it), then
/// published; then the bound, the rebuild and the reading ahead, in the order the last run's use
/// order allows; last, other drivers' entries dropped in a pause.
fn open_then_tidy(dev: &Arc<DeviceData>) {
    let stopped = || dev.stop.load(Ordering::Acquire);
    match SETTINGS.test_opening_late {
        Some(OpeningLate::UntilOpened) => {
            test_wait_until(&|| dev.opened_store().is_some() || stopped())
        }
        Some(OpeningLate::UntilDestroyed) => test_wait_until(&stopped),
        None => {}
    }
    // A device destroyed before anyone opened its store owes it nothing.
    if stopped() && dev.opened_store().is_none() {
        return;
    }
    // The first pipeline may have opened the store before this thread did: what follows the
    // opening is this thread's either way.
    let Some(store) = dev.open_store() else {
        return;
    };
    if !stopped() {
        super::pipelines::prime_dictionary(dev);
    }
    let remembered = (SETTINGS.read_ahead > 0 && !stopped())
        .then(|| store.remembered_use_order())
        .filter(|order| !order.is_empty());
    if let Some(order) = remembered {
        // Read ahead at once, in the order the last run used; the bound's listing waits for the
        // application's first pause.
        start_rebuild(dev, store);
        read_ahead(dev, store, AheadOrder::Remembered(order));
        // The time before the first pipeline (the application loading its shaders) is no pause:
        // with the bound listed then, beside the first pipelines, pygfx warm at one thread on
        // the H200 took 1.21x the build before the use order (5 rounds); waiting for a pause
        // after them, 0.97x.
        dev.app_activity
            .wait_until_quiet_after_building(REBUILD_AFTER_QUIET, &dev.stop);
        tidy_after_opening(dev, store);
    } else {
        // The bound is owed once the store is open, even to a device destroyed meanwhile (its
        // destruction joins this thread): a run that writes nothing checks it nowhere else, and
        // a lowered bound must hold after it.
        let listed = tidy_after_opening(dev, store);
        // A device destroyed by now leaves the reading ahead to the next run.
        if stopped() {
            return;
        }
        start_rebuild(dev, store);
        if SETTINGS.read_ahead > 0 && !stopped() {
            read_ahead(dev, store, AheadOrder::LastUse(listed));
        }
    }
    drop_other_drivers_in_a_pause(dev, store);
}

/// What the opening thread does once the store is published: the title brought within its
/// bound; the record compacted where the bound left little of it. Returns what the bound listed,
/// for reading ahead.
fn tidy_after_opening(
    dev: &DeviceData,
    store: &Store,
) -> Option<Vec<crate::store::bound::StampedEntry>> {
    let listed = store.keep_within_bound().map(|b| b.kept);
    if let (Some(kept), Some(record)) = (&listed, &dev.record) {
        if !store.driver_changed() {
            compact_record(record, kept, store.max_bytes());
            // Compacted as far as it goes and still past its share (its configurations alone, in
            // a bound of a few KiB): the entries make room for the rest.
            let bytes = std::fs::metadata(record.path()).map_or(0, |m| m.len());
            // (A record owed a rebuild is not compacted yet: it does not take the entries' room.)
            if bytes > crate::store::bound::record_share(store.max_bytes()) && !record.is_pending()
            {
                store.record_past_its_share(bytes);
                return store.keep_within_bound().map(|b| b.kept).or(listed);
            }
        }
    }
    listed
}

/// Another driver's files (thousands after a driver change), set aside at opening, dropped by
/// the opening thread last, once the application has paused and at idle priority: beside its
/// compiles the drop slowed them, as the writer's entries did (the test app's first launch after
/// a driver change on RADV, 2 cores: 1.00-1.23x a cold launch, 0.89-1.02x so). What the device's
/// end cuts short, the next opening's thread finishes, after its own reading ahead.
fn drop_other_drivers_in_a_pause(dev: &DeviceData, store: &Store) {
    if store.has_other_drivers_to_drop() && wait_for_a_quiet_application(dev) {
        super::idle::lower_this_threads_priority_but_not_its_reads("store opening");
        store.drop_other_drivers(&dev.stop);
    }
}

/// Reads ahead, at idle priority, the entries the last run used (merging them where the device
/// merges), until they are read or the device ends.
fn read_ahead(dev: &DeviceData, store: &Store, order: AheadOrder<'_>) {
    super::idle::lower_this_threads_priority_but_not_its_reads("read ahead");
    let started = std::time::Instant::now();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let merger = dev
        .merges
        .then_some(super::merge::DeviceMerger { dev, store });
    let merger = merger.as_ref().map(|m| m as &dyn crate::store::Merger);
    let r = store.read_ahead(
        order,
        SETTINGS.read_ahead,
        (cores / 4).clamp(1, 4),
        &dev.stop,
        merger,
    );
    tracing::debug!(held = r.held, held_bytes = r.held_bytes, merged = r.merged, claimed_first = r.claimed_first, took_ms = %format_args!("{:.3}", started.elapsed().as_secs_f64() * 1e3), "read ahead");
}

/// Brings the title's record within its share of the bound (a quarter), where it has grown past
/// it, dropping pipelines in the entries' order of use: those the bound evicted first, then the
/// last used, so a boot's pipelines are kept longest in the record as in the store. A record
/// within its share stays whole whatever became of its entries. `kept`: every entry and piece of
/// the title, as the bound just listed them (their stamps are the order of use).
fn compact_record(
    record: &crate::replay::record::RecordFile,
    kept: &[crate::store::bound::StampedEntry],
    max_bytes: u64,
) {
    let used = crate::replay::record::stamps_of(kept);
    let share = crate::store::bound::record_share(max_bytes);
    match record.compact_to_share(share, false, &|hash| used.get(&hash).copied()) {
        Ok(Some(c)) => tracing::info!(
            record = %record.path().display(),
            pipelines_before = c.pipelines_before,
            pipelines_kept = c.pipelines_kept,
            bytes_before = c.bytes_before,
            bytes_after = c.bytes_after,
            share,
            "record compacted to its share of the bound, the last used pipelines dropped first"
        ),
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(record = %record.path().display(), error = %e, "the record was not compacted")
        }
    }
}

/// After a driver change (opening dropped another driver's directory of this device), or where
/// the record owes a rebuild (`record.pending`: write-behind, or a rebuild a device cut short),
/// rebuilds the title's record into the driver's store on threads of the layer's own at idle
/// priority (at most half the cores), through this layer's own commands on the application's
/// device: what the application builds meanwhile is found or written as ever, and what the
/// rebuild reaches first is found by it. Under write-behind the thread also keeps, pass after
/// pass, what this run leaves to it ([`rebuild_what_is_owed`]). Stops after the current pipeline
/// at `vkDestroyDevice`; what is left is for the next run (the record stays marked) or
/// `pipekeep rebuild`.
fn start_rebuild(dev: &Arc<DeviceData>, store: &crate::store::Store) {
    if SETTINGS.rebuild == crate::settings::RebuildSetting::Off {
        return;
    }
    let Some(record) = dev.record.clone() else {
        return;
    };
    let owed = dev.rebuild_owed_at_opening.load(Ordering::Acquire);
    // Under write-behind one rebuild thread lives as long as the device, for what this run owes
    // too (a record it writes as it goes).
    let owed_from_before = owed && record.path().is_file();
    if dev.stop.load(Ordering::Acquire)
        || !(owed_from_before || dev.write_behind)
        || !store.take_the_rebuild()
    {
        return;
    }
    let rebuilding = dev.clone();
    let spawned = std::thread::Builder::new()
        .name(super::idle::REBUILD_THREAD.into())
        .spawn(move || {
            guarded(
                "background rebuild",
                || {
                    rebuild_worker_start(&rebuilding);
                    if rebuilding.write_behind {
                        rebuild_what_is_owed(&rebuilding, &record, owed_from_before)
                    } else {
                        rebuild(&rebuilding, &record);
                    }
                },
                || (),
            )
        });
    match spawned {
        Ok(handle) => *dev.rebuilder.locked() = Some(handle),
        Err(e) => tracing::debug!(error = %e, "no rebuild thread"),
    }
}

/// Write-behind: the rebuild of what earlier runs owed (`owed_from_before`), then a pass each
/// time this run has left more pipelines to it and the application has paused its builds, until
/// the device goes. So a run that goes on after its pipelines (a game past its loading) keeps
/// them in the same run, on otherwise idle cores; what is not done is the next run's.
fn rebuild_what_is_owed(
    dev: &Arc<DeviceData>,
    file: &crate::replay::record::RecordFile,
    owed_from_before: bool,
) {
    let mut owed = owed_from_before;
    loop {
        while !owed {
            if dev.rebuild_stop.load(Ordering::Acquire) {
                return;
            }
            owed = dev.owed_this_run.load(Ordering::Acquire)
                > dev.owed_covered.load(Ordering::Acquire);
            if !owed {
                if dev.rebuild_wind_down.load(Ordering::Acquire) {
                    return;
                }
                // Woken at once by `vkDestroyDevice` (`stop_threads`).
                std::thread::park_timeout(std::time::Duration::from_millis(50));
            }
        }
        if rebuild(dev, file) == Pass::Impossible || dev.rebuild_stop.load(Ordering::Acquire) {
            return;
        }
        owed = false;
    }
}

/// Whether every one of `pipelines` (other configurations' of the record, which this device's
/// rebuild leaves to theirs) has an entry in this device's identity directory: then the record
/// owes nothing more here.
fn kept_here(dev: &DeviceData, pipelines: &[u64]) -> bool {
    let Some(dir) = dev.opened_store().map(|s| s.dir().to_path_buf()) else {
        return false;
    };
    let Ok(files) = std::fs::read_dir(dir) else {
        return false;
    };
    let kept: std::collections::HashSet<u64> = files
        .flatten()
        .filter_map(|e| {
            crate::key::PipelineKey::from_file_name(e.file_name().to_str()?)
                .map(|k| crate::replay::record::pipeline_hash(&k))
        })
        .collect();
    pipelines.iter().all(|h| kept.contains(h))
}

/// How a rebuild pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// It went through the record, or the device went first.
    Done,
    /// The record cannot be read, or the device lacks a command the replay needs: no later pass
    /// of this run would do better.
    Impossible,
}

/// One pass over the record: once the application pauses, every recorded pipeline through this
/// layer (found, or compiled and written).
fn rebuild(dev: &Arc<DeviceData>, file: &crate::replay::record::RecordFile) -> Pass {
    if !wait_for_a_quiet_application(dev) {
        tracing::info!("background rebuild ended: the device went before it began");
        return Pass::Done;
    }
    // What this run owes lands in the record first (the writer thread runs at idle priority):
    // the pass covers what was owed before it read the record.
    wait_for_owed_appends(dev, file);
    dev.owed_covered
        .store(owed_and_landed(dev, file), Ordering::Release);
    let record = file.path();
    // A record made but not yet written (its writer at idle priority, starved on a loaded
    // machine) reads as empty: what is still in flight is left to the next pass.
    let (catalog, read_len) = match crate::replay::record::read(record) {
        Ok((entries, len)) => (crate::replay::objects::Catalog::from_entries(entries), len),
        Err(e) => {
            tracing::warn!(record = %record.display(), error = %e, "the record cannot be read; no rebuild");
            return Pass::Impossible;
        }
    };
    // Only this device's configuration: another's pipelines replayed here would key as this
    // device's (entries no run looks up, and recorded again under this configuration).
    let (catalog, others) =
        catalog.into_configuration(crate::replay::record::configuration_hash(&dev.app_state));
    let pipelines = catalog.compute.len() + catalog.graphics.len();
    tracing::info!(record = %record.display(), pipelines, "the driver changed (or a rebuild is owed): rebuilding the title's record in the background");
    // SAFETY: this layer's own commands for the application's device (taken from its data, not
    // from the device map, which `vkDestroyDevice` empties before it joins this thread), and the
    // next layer's for the rest; the device lives until that join.
    let mut missing = Vec::new();
    let device = unsafe {
        ash::Device::load_with(
            |name| match command_of(dev, name) {
                Some(f) => f as *const std::ffi::c_void,
                None => {
                    missing.push(name.to_string_lossy().into_owned());
                    std::ptr::null()
                }
            },
            dev.handle,
        )
    };
    // What the replay calls must be there (the rest of a 1.3 table may be absent).
    const NEEDED: [&str; 12] = [
        "vkCreateShaderModule",
        "vkDestroyShaderModule",
        "vkCreateSampler",
        "vkDestroySampler",
        "vkCreateDescriptorSetLayout",
        "vkDestroyDescriptorSetLayout",
        "vkCreatePipelineLayout",
        "vkDestroyPipelineLayout",
        "vkCreateRenderPass",
        "vkCreateComputePipelines",
        "vkCreateGraphicsPipelines",
        "vkDestroyPipeline",
    ];
    let version_two = catalog
        .render_passes
        .values()
        .any(|p| matches!(p, Some((2, _))));
    let needed = NEEDED
        .iter()
        .copied()
        .chain(version_two.then_some("vkCreateRenderPass2"));
    if let Some(absent) = needed.clone().find(|n| missing.iter().any(|m| m == n)) {
        tracing::warn!(
            command = absent,
            "the device lacks a command the rebuild needs; no rebuild"
        );
        return Pass::Impossible;
    }
    if dev.rebuild_stop.load(Ordering::Acquire) {
        tracing::info!(
            made = 0,
            of = pipelines,
            "background rebuild ended: the device went before it began"
        );
        return Pass::Done;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let options = crate::replay::replayer::Options {
        threads: (cores / 2).max(1),
        stop: Some(dev.rebuild_stop.clone()),
        worker_start: Some({
            let dev = Arc::clone(dev);
            crate::replay::replayer::WorkerStart(Arc::new(move || rebuild_worker_start(&dev)))
        }),
        before_each: Some({
            let dev = Arc::clone(dev);
            crate::replay::replayer::BeforeEach(Arc::new(move || {
                wait_for_a_quiet_application(&dev)
            }))
        }),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    // SAFETY: as above.
    let summary = unsafe { crate::replay::replayer::replay_on_device(device, &catalog, &options) };
    // The application's owed pipelines queued for the record land first: a mark removed
    // before them would be written again.
    wait_for_owed_appends(dev, file);
    // Other configurations' pipelines are their own devices' to rebuild: the mark stays until
    // they have entries here too.
    let others_kept = others.is_empty() || kept_here(dev, &others);
    if others_kept && !dev.rebuild_stop.load(Ordering::Acquire) {
        // Every pipeline of the record as read went through the layer (found, or compiled and
        // written; one the driver fails stays failed): nothing is left for the next run, unless
        // the record grew meanwhile.
        if let Err(e) = file.clear_pending_unless_grown(read_len) {
            tracing::debug!(record = %record.display(), error = %e, "the record's pending mark stays");
        }
    }
    tracing::info!(made = summary.made, of = pipelines, skipped = summary.skipped_total(), took_ms = %format_args!("{:.1}", started.elapsed().as_secs_f64() * 1e3), "background rebuild ended");
    Pass::Done
}

/// How many of this run's owed pipelines have landed in the record: the ones a pass that reads
/// it now covers. The wait for their appends is bounded (a loaded machine may starve the idle
/// writer), so what is still queued is left to a later pass, not counted as covered. A pipeline
/// is put in flight before it is counted as owed, and the count is read first here: one owed
/// meanwhile is never taken as landed.
fn owed_and_landed(dev: &DeviceData, file: &crate::replay::record::RecordFile) -> u64 {
    let owed = dev.owed_this_run.load(Ordering::SeqCst);
    owed.saturating_sub(file.owed_in_flight())
}

/// Waits (two seconds at most) until the owed pipelines queued for the record have landed in it.
fn wait_for_owed_appends(dev: &DeviceData, file: &crate::replay::record::RecordFile) {
    if file.owed_in_flight() > 0 {
        dev.writer.wake();
    }
    let waiting_since = std::time::Instant::now();
    while file.owed_in_flight() > 0
        && !dev.rebuild_stop.load(Ordering::Acquire)
        && waiting_since.elapsed() < std::time::Duration::from_secs(2)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Each rebuild thread: idle priority, its pipelines counted apart, and its id kept so that
/// `vkDestroyDevice` can raise it back.
fn rebuild_worker_start(dev: &DeviceData) {
    super::idle::lower_this_threads_priority("rebuild");
    super::pipelines::mark_rebuild_thread();
    dev.rebuild_threads.add_this_thread();
}

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

const FEEDBACK_EXTENSION: &CStr = c"VK_EXT_pipeline_creation_feedback";

/// The names of the extensions a physical device offers.
unsafe fn offered_extensions(
    inst: &super::instance::InstanceData,
    physical_device: vk::PhysicalDevice,
) -> Vec<Vec<u8>> {
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
            return Vec::new();
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
            .map(|p| bounded_c_string(&p.extension_name).into_bytes())
            .collect()
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

/// Whether `vkCreateDevice`'s answer may be the driver refusing what the layer added (an
/// extension or a feature), so that the device is asked again as the application asked; never
/// out of memory or a lost device.
fn refused_for_what_was_added(result: vk::Result) -> bool {
    matches!(
        result,
        vk::Result::ERROR_EXTENSION_NOT_PRESENT
            | vk::Result::ERROR_FEATURE_NOT_PRESENT
            | vk::Result::ERROR_INITIALIZATION_FAILED
    )
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

/// What the layer decides of a device before it is made: its identity, its own state for the
/// key, the backend, and what it adds to the create info (`VK_EXT_pipeline_creation_feedback`
/// where feedback needs it; pipeline binaries and maintenance5 for the `binary` backend).
struct DevicePlan {
    properties: vk::PhysicalDeviceProperties,
    active: bool,
    core_feedback: bool,
    app_enabled_feedback: bool,
    add_feedback: bool,
    extensions: Vec<*const c_char>,
    /// The device's own state, for the key.
    device_state: Digest,
    /// What the record says of the device (the features a replay must enable alike).
    app_features: crate::replay::record::AppState,
    backend: Backend,
    /// Why that backend, for the device's log line.
    backend_why: &'static str,
    /// `VK_KHR_pipeline_binary` is enabled on the device (by the application or the layer).
    binaries_enabled: bool,
    /// The application enabled `VK_KHR_pipeline_binary` itself.
    app_enabled_binaries: bool,
    /// ... and with it, itself, everything the `binary` backend uses: maintenance5 and both
    /// features.
    app_enabled_all_binaries_need: bool,
    /// The application chained feature structures the layer reads by `sType` alone.
    unknown_structures: bool,
    /// The commands of the extensions the layer added: `vkGetDeviceProcAddr` hides them from the
    /// application, which did not enable them.
    hidden_commands: Vec<&'static CStr>,
    /// Feature structures the layer chains in front of the application's, boxed so that their
    /// addresses hold while the create info points at them (through `chain_head`).
    _added_features: Box<AddedFeatures>,
    chain_head: *const std::ffi::c_void,
}

/// The feature structures the `binary` backend may need the layer to enable.
struct AddedFeatures {
    binaries: super::binary_abi::PhysicalDevicePipelineBinaryFeatures,
    maintenance5: vk::PhysicalDeviceMaintenance5FeaturesKHR<'static>,
}

impl DevicePlan {
    fn patch<'a>(&'a self, ci: &vk::DeviceCreateInfo<'a>) -> vk::DeviceCreateInfo<'a> {
        let mut patched = *ci;
        if self.extensions.len() != ci.enabled_extension_count as usize {
            patched.enabled_extension_count = self.extensions.len() as u32;
            patched.pp_enabled_extension_names = self.extensions.as_ptr();
        }
        if !self.chain_head.is_null() {
            patched.p_next = self.chain_head;
        }
        patched
    }

    fn feedback_valid(&self) -> bool {
        self.core_feedback || self.app_enabled_feedback || self.add_feedback
    }

    /// Whether the create info the driver sees differs from the application's.
    fn adds_anything(&self) -> bool {
        self.add_feedback || !self.chain_head.is_null() || !self.hidden_commands.is_empty()
    }

    /// The plan for the device made as the application asked: nothing added, so `cache` unless
    /// the application enabled pipeline binaries itself.
    fn adding_nothing(mut self) -> DevicePlan {
        self.add_feedback = false;
        self.chain_head = std::ptr::null();
        self.hidden_commands.clear();
        self.binaries_enabled = self.app_enabled_binaries;
        if !self.app_enabled_all_binaries_need && self.backend == Backend::Binary {
            self.backend = Backend::Cache;
            self.backend_why = "the driver refused the device with pipeline binaries added";
        }
        self
    }
}

/// `VK_KHR_dynamic_rendering`, which maintenance5 needs below Vulkan 1.3.
const DYNAMIC_RENDERING: &CStr = c"VK_KHR_dynamic_rendering";

/// The commands of an extension the layer may add, which the application must not be given.
fn commands_of(extension: &CStr) -> &'static [&'static CStr] {
    match extension.to_bytes() {
        b"VK_KHR_pipeline_binary" => &[
            c"vkCreatePipelineBinariesKHR",
            c"vkDestroyPipelineBinaryKHR",
            c"vkGetPipelineKeyKHR",
            c"vkGetPipelineBinaryDataKHR",
            c"vkReleaseCapturedPipelineDataKHR",
        ],
        b"VK_KHR_maintenance5" => &[
            c"vkCmdBindIndexBuffer2KHR",
            c"vkGetRenderingAreaGranularityKHR",
            c"vkGetDeviceImageSubresourceLayoutKHR",
            c"vkGetImageSubresourceLayout2KHR",
        ],
        b"VK_KHR_dynamic_rendering" => &[c"vkCmdBeginRenderingKHR", c"vkCmdEndRenderingKHR"],
        _ => &[],
    }
}

/// The extensions the `binary` backend needs that the application did not enable, each with
/// what it depends on at the application's API version (`device_api`: the lesser of the
/// application's and the device's), or why the device cannot have them.
fn binary_extensions(
    device_api: u32,
    app_enabled: &dyn Fn(&CStr) -> bool,
    offers: &dyn Fn(&CStr) -> bool,
    layers_below: bool,
) -> Result<Vec<&'static CStr>, &'static str> {
    use super::binary_abi as bin;
    let at_least = |minor: u32| {
        vk::api_version_major(device_api) > 1 || vk::api_version_minor(device_api) >= minor
    };
    // maintenance5 needs Vulkan 1.1 and dynamic rendering (core from 1.3); dynamic rendering
    // needs depth/stencil resolve (core from 1.2) where the layer would add it.
    if !at_least(1) {
        return Err("the application's API version (1.0) is below what pipeline binaries need");
    }
    let mut needed = vec![bin::EXTENSION];
    if !at_least(4) {
        needed.push(bin::MAINTENANCE5);
    }
    if !at_least(3) {
        if !at_least(2) && !app_enabled(DYNAMIC_RENDERING) {
            return Err("the application's API version (1.1) is below what pipeline binaries need");
        }
        needed.push(DYNAMIC_RENDERING);
    }
    let added: Vec<&'static CStr> = needed.into_iter().filter(|e| !app_enabled(e)).collect();
    if added.iter().any(|e| !offers(e)) {
        return Err("no pipeline binaries here");
    }
    // Even where the application enabled them itself, a layer below that does not know them
    // crashes the application at pipekeep's first call of them, not the application's.
    if layers_below {
        return Err("a layer below pipekeep may not know pipeline binaries, so pipekeep uses none");
    }
    Ok(added)
}

unsafe fn plan_device(
    inst: &super::instance::InstanceData,
    physical_device: vk::PhysicalDevice,
    ci: &vk::DeviceCreateInfo,
    layers_below: bool,
) -> DevicePlan {
    use super::binary_abi as bin;
    let mut properties = vk::PhysicalDeviceProperties::default();
    // SAFETY: the next layer's command on a physical device of this instance.
    unsafe { (inst.get_physical_device_properties)(physical_device, &mut properties) };
    let device_api = inst.api_version.min(properties.api_version);
    let at_least = |minor: u32| {
        vk::api_version_major(device_api) > 1 || vk::api_version_minor(device_api) >= minor
    };
    let core_feedback = at_least(3);
    // SAFETY: the application's create info.
    let chain = unsafe { super::device_state::read(ci) };
    let app_enabled = |name: &CStr| chain.extensions.iter().any(|e| e == name.to_bytes());
    let offered = unsafe { offered_extensions(inst, physical_device) };
    let offers = |name: &CStr| offered.iter().any(|e| e == name.to_bytes());
    let mut extensions: Vec<*const c_char> =
        unsafe { super::objects::slice(ci.pp_enabled_extension_names, ci.enabled_extension_count) }
            .to_vec();
    let app_enabled_feedback = app_enabled(FEEDBACK_EXTENSION);
    let active = !SETTINGS.disabled;
    let add_feedback =
        active && !core_feedback && !app_enabled_feedback && offers(FEEDBACK_EXTENSION);
    if add_feedback {
        extensions.push(FEEDBACK_EXTENSION.as_ptr());
    }

    let maintenance5_core = at_least(4);
    let binary_plan = if !active {
        Err("pipekeep is disabled")
    } else if chain.maintenance5 == Some(false) || chain.pipeline_binaries == Some(false) {
        Err("the application turned maintenance5 or pipeline binaries off")
    } else {
        binary_extensions(device_api, &app_enabled, &offers, layers_below)
    };
    let binaries_possible = binary_plan.is_ok();
    let refused_before = SETTINGS.root.as_ref().is_some_and(|root| {
        let identity = identity_of(&properties);
        crate::store::refuses_binaries(root, &inst.title, &identity)
    });
    let (backend, backend_why) = match SETTINGS.backend {
        BackendSetting::Cache => (Backend::Cache, "PIPEKEEP_BACKEND=cache"),
        BackendSetting::Binary if binaries_possible => (Backend::Binary, "PIPEKEEP_BACKEND=binary"),
        BackendSetting::Binary => {
            let why = binary_plan.as_ref().err().copied().unwrap_or_default();
            tracing::warn!(why, "PIPEKEEP_BACKEND=binary, but this device cannot take pipeline binaries here; using cache");
            (Backend::Cache, "binary asked, not available")
        }
        BackendSetting::Auto if !binaries_possible => (
            Backend::Cache,
            binary_plan.as_ref().err().copied().unwrap_or_default(),
        ),
        // NVIDIA's binaries do not load in another process once the driver has trained its
        // per-process dictionary (measured on 580.159.04).
        BackendSetting::Auto if properties.vendor_id == NVIDIA => (
            Backend::Cache,
            "NVIDIA's binaries do not load in another process",
        ),
        BackendSetting::Auto if refused_before => (
            Backend::Cache,
            "this driver refused binaries another process wrote",
        ),
        BackendSetting::Auto => (Backend::Binary, "pipeline binaries offered"),
    };
    let mut added_features = Box::new(AddedFeatures {
        binaries: bin::PhysicalDevicePipelineBinaryFeatures {
            s_type: bin::PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES,
            p_next: std::ptr::null_mut(),
            pipeline_binaries: vk::TRUE,
        },
        maintenance5: vk::PhysicalDeviceMaintenance5FeaturesKHR::default().maintenance5(true),
    });
    let mut chain_head = std::ptr::null();
    let mut hidden_commands = Vec::new();
    // Where the device can take them, pipeline binaries are enabled whichever backend builds:
    // the driver's global key, read through them, enters every key, so that the entries of
    // either backend are the other's to serve. Never on NVIDIA's driver unless asked for (its
    // binaries do not travel, and its global key is never read).
    let enable_binaries = backend == Backend::Binary || properties.vendor_id != NVIDIA;
    let added_binaries = binary_plan.as_ref().ok().filter(|_| enable_binaries);
    if let Some(added) = added_binaries {
        for extension in added {
            extensions.push(extension.as_ptr());
            hidden_commands.extend_from_slice(commands_of(extension));
        }
        // Chained in front of the application's structures, each only where it has none.
        let mut next = ci.p_next as *mut std::ffi::c_void;
        if chain.maintenance5.is_none() {
            added_features.maintenance5.p_next = next;
            next = (&mut added_features.maintenance5
                as *mut vk::PhysicalDeviceMaintenance5FeaturesKHR)
                .cast();
        }
        if chain.pipeline_binaries.is_none() {
            added_features.binaries.p_next = next;
            next = (&mut added_features.binaries as *mut bin::PhysicalDevicePipelineBinaryFeatures)
                .cast();
        }
        if !std::ptr::eq(next, ci.p_next) {
            chain_head = next as *const std::ffi::c_void;
        }
    }
    DevicePlan {
        properties,
        active,
        core_feedback,
        app_enabled_feedback,
        add_feedback,
        extensions,
        device_state: crate::key::device_digest(&chain.state),
        app_features: crate::replay::record::AppState::from_device(None, &chain.state),
        backend,
        backend_why,
        binaries_enabled: added_binaries.is_some() || app_enabled(bin::EXTENSION),
        app_enabled_binaries: app_enabled(bin::EXTENSION),
        app_enabled_all_binaries_need: app_enabled(bin::EXTENSION)
            && chain.pipeline_binaries == Some(true)
            && chain.maintenance5 == Some(true)
            && (maintenance5_core || app_enabled(bin::MAINTENANCE5)),
        unknown_structures: !chain.state.unknown.is_empty(),
        hidden_commands,
        _added_features: added_features,
        chain_head,
    }
}

/// A device's identity, from its properties.
fn identity_of(properties: &vk::PhysicalDeviceProperties) -> Identity {
    Identity {
        vendor_id: properties.vendor_id,
        device_id: properties.device_id,
        driver_version: properties.driver_version,
        cache_uuid: properties.pipeline_cache_uuid,
        abi: HOST_ABI,
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
        merges: active
            && backend == Backend::Cache
            && plan.feedback_valid()
            && match SETTINGS.merge {
                MergeSetting::On => true,
                MergeSetting::Off => false,
                // Merging paid where every entry carrying NVIDIA's dictionary cost the driver
                // 1.78 MB to make a cache of (H200, ncnn warm, merge on / off: 0.44-0.52x at one
                // thread). With the dictionary handed over once a device, merging costs more than
                // it saves (H200, three rounds, geometric means, off / on: ncnn 0.87x at 4 threads,
                // 1.05x at 1, 0.93x at 16; pygfx 1.05x, 0.89x, 1.09x; all 0.976x). On RADV the
                // issue's probe found nothing worth having.
                MergeSetting::Auto => identity.vendor_id == NVIDIA && !cuts_dictionary,
            },
        merged_caches: Default::default(),
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
