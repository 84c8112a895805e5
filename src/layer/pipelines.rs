//! The two pipeline intercepts and the flow of one pipeline (SPEC "Building a pipeline"):
//! key it; look its entry up; hold the loading marker while the driver makes a cache from the
//! entry and builds through it (the application's cache swapped out); tell found from compiled;
//! write back what was compiled; count it in the compile watch. Any failure along the way ends in
//! the call the application made, with the answer the driver gives it.

use std::ffi::c_void;
use std::sync::Arc;

use ash::vk;
use ash::vk::Handle;

use super::abi::find_in_chain;
use super::binaries;
use super::binary_abi as bin;
use super::capture::{self, Flags};
use super::device::{device_data, unrecorded_next, Backend, BinaryFns, DeviceData};
use super::dictionary::Seed;
use super::found_gate::FoundGate;
use super::guard::{guarded, SETTINGS};
use super::objects::Objects;
use super::sharing;
use crate::key::{Digest, PipelineKey, Unkeyable};
use crate::store::envelope::{holds_more_than_header, PayloadKind};
use crate::store::{FoundEntry, Lookup, MergedEntry, Store};
use crate::watch::{Lap, Outcome, Phase};

type CreateFn<T> = unsafe extern "system" fn(
    vk::Device,
    vk::PipelineCache,
    u32,
    *const T,
    *const vk::AllocationCallbacks<'_>,
    *mut vk::Pipeline,
) -> vk::Result;

/// What the flow needs of a compute or graphics create info.
trait PipelineInfo: Copy {
    /// The Vulkan command that creates this kind of pipeline.
    const COMMAND: &'static std::ffi::CStr;
    fn legacy_flags(&self) -> vk::PipelineCreateFlags;
    fn p_next(&self) -> *const c_void;
    fn set_p_next(&mut self, p: *const c_void);
    fn base_index(&self) -> i32;
    fn set_base(&mut self, base: vk::Pipeline);
    fn stage_count(&self) -> u32;
    /// # Safety
    /// `self` must be a valid create info; `flags` its effective flags.
    unsafe fn key(
        &self,
        objects: &Objects,
        device: &Digest,
        flags: Flags,
    ) -> Result<PipelineKey, Unkeyable>;
    /// The pipeline as the record writes it (`None`: not recorded).
    /// # Safety
    /// As for [`PipelineInfo::key`].
    unsafe fn recorded(
        &self,
        objects: &Objects,
        device: &Digest,
        flags: Flags,
    ) -> Option<crate::replay::record::Recorded>;
}

macro_rules! pipeline_info {
    ($ty:ty, $command:literal, $stages:expr, $capture:path, $record:expr) => {
        impl PipelineInfo for $ty {
            const COMMAND: &'static std::ffi::CStr = $command;
            fn legacy_flags(&self) -> vk::PipelineCreateFlags {
                self.flags
            }
            fn p_next(&self) -> *const c_void {
                self.p_next
            }
            fn set_p_next(&mut self, p: *const c_void) {
                self.p_next = p;
            }
            fn base_index(&self) -> i32 {
                self.base_pipeline_index
            }
            fn set_base(&mut self, base: vk::Pipeline) {
                self.base_pipeline_handle = base;
                self.base_pipeline_index = -1;
            }
            fn stage_count(&self) -> u32 {
                let count: fn(&Self) -> u32 = $stages;
                count(self)
            }
            unsafe fn key(
                &self,
                objects: &Objects,
                device: &Digest,
                flags: Flags,
            ) -> Result<PipelineKey, Unkeyable> {
                // SAFETY: as the caller vouches.
                unsafe { $capture(self, objects, device, flags) }
            }
            unsafe fn recorded(
                &self,
                objects: &Objects,
                device: &Digest,
                flags: Flags,
            ) -> Option<crate::replay::record::Recorded> {
                let record: unsafe fn(
                    &Self,
                    &Objects,
                    &Digest,
                    Flags,
                ) -> Option<crate::replay::record::Recorded> = $record;
                // SAFETY: as the caller vouches.
                unsafe { record(self, objects, device, flags) }
            }
        }
    };
}

pipeline_info!(
    vk::ComputePipelineCreateInfo<'static>,
    c"vkCreateComputePipelines",
    |_| 1,
    capture::compute,
    |ci, objects, device, flags| unsafe { capture::compute_desc(ci, objects, device, flags) }
        .ok()
        .map(crate::replay::record::Recorded::Compute)
);
pipeline_info!(
    vk::GraphicsPipelineCreateInfo<'static>,
    c"vkCreateGraphicsPipelines",
    |g| g.stage_count,
    capture::graphics,
    |ci, objects, device, flags| unsafe { capture::graphics_desc(ci, objects, device, flags) }
        .ok()
        .map(|d| crate::replay::record::Recorded::Graphics(Box::new(d)))
);

pub unsafe extern "system" fn create_compute_pipelines(
    device: vk::Device,
    cache: vk::PipelineCache,
    count: u32,
    infos: *const vk::ComputePipelineCreateInfo<'_>,
    allocator: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Pipeline,
) -> vk::Result {
    // SAFETY: the application's arguments, forwarded as received.
    unsafe {
        create_pipelines(device, cache, count, infos.cast(), allocator, out, |d| {
            d.fns.create_compute_pipelines
        })
    }
}

pub unsafe extern "system" fn create_graphics_pipelines(
    device: vk::Device,
    cache: vk::PipelineCache,
    count: u32,
    infos: *const vk::GraphicsPipelineCreateInfo<'_>,
    allocator: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Pipeline,
) -> vk::Result {
    // SAFETY: the application's arguments, forwarded as received.
    unsafe {
        create_pipelines(device, cache, count, infos.cast(), allocator, out, |d| {
            d.fns.create_graphics_pipelines
        })
    }
}

/// Splits a call into one call a pipeline, keeping the Vulkan rules for the returned array:
/// the first error is returned, else `VK_PIPELINE_COMPILE_REQUIRED` if any asked it; with
/// `EARLY_RETURN_ON_FAILURE` the pipelines after a failure are NULL. The flags that decide are
/// the effective ones (flags2's where chained).
unsafe fn create_pipelines<T: PipelineInfo>(
    device: vk::Device,
    app_cache: vk::PipelineCache,
    count: u32,
    infos: *const T,
    allocator: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Pipeline,
    next_of: fn(&DeviceData) -> CreateFn<T>,
) -> vk::Result {
    // SAFETY: a device created through this layer.
    let Some(dev) = (unsafe { device_data(device) }) else {
        // Its data could not be recorded: straight to the next layer.
        return match unsafe { unrecorded_next::<CreateFn<T>>(device, T::COMMAND) } {
            Some(next) => unsafe { next(device, app_cache, count, infos, allocator, out) },
            // A result vkCreate*Pipelines may return.
            None => vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        };
    };
    let dev: &DeviceData = &dev;
    let next = next_of(dev);
    let as_asked = || unsafe { next(dev.handle, app_cache, count, infos, allocator, out) };
    if count == 0 || infos.is_null() || out.is_null() || !dev.works_here() {
        return as_asked();
    }
    // SAFETY: count create infos in, count handles out, per the spec.
    let infos = unsafe { std::slice::from_raw_parts(infos, count as usize) };
    let out_ptr = out;
    guarded(
        "vkCreate*Pipelines",
        || {
            let out = unsafe { std::slice::from_raw_parts_mut(out_ptr, infos.len()) };
            out.fill(vk::Pipeline::null());
            let mut result = vk::Result::SUCCESS;
            for (i, original) in infos.iter().enumerate() {
                let mut info = *original;
                // SAFETY: the application's valid chain. Read once a pipeline, for all below.
                let flags = unsafe { Flags::of(info.legacy_flags(), info.p_next()) };
                if flags.has(vk::PipelineCreateFlags::DERIVATIVE) && info.base_index() >= 0 {
                    let base = out
                        .get(info.base_index() as usize)
                        .filter(|_| (info.base_index() as usize) < i);
                    info.set_base(base.copied().unwrap_or_default());
                }
                let r = unsafe {
                    build_one(dev, app_cache, &info, flags, allocator, next, &mut out[i])
                };
                if worse(r, result) {
                    result = r;
                }
                if r != vk::Result::SUCCESS
                    && flags.has(vk::PipelineCreateFlags::EARLY_RETURN_ON_FAILURE)
                {
                    break;
                }
            }
            result
        },
        || {
            // A panic midway: what this call made so far is destroyed (each pipeline is in `out`
            // from the moment the driver made it), and the call is asked again, as asked.
            let out = unsafe { std::slice::from_raw_parts_mut(out_ptr, infos.len()) };
            for pipeline in out.iter_mut().filter(|p| **p != vk::Pipeline::null()) {
                // SAFETY: a pipeline this call made and nobody has seen.
                unsafe { (dev.fns.destroy_pipeline)(dev.handle, *pipeline, allocator) };
                *pipeline = vk::Pipeline::null();
            }
            as_asked()
        },
    )
}

/// Whether `r` replaces `so_far` as the call's result: the first error wins over everything,
/// `VK_PIPELINE_COMPILE_REQUIRED` over success.
fn worse(r: vk::Result, so_far: vk::Result) -> bool {
    (r.as_raw() < 0 && so_far.as_raw() >= 0)
        || (r == vk::Result::PIPELINE_COMPILE_REQUIRED && so_far == vk::Result::SUCCESS)
}

/// One pipeline, through the store where it can be keyed, and counted. The pipeline is put in
/// `slot` the moment the driver makes it.
unsafe fn build_one<T: PipelineInfo>(
    dev: &DeviceData,
    app_cache: vk::PipelineCache,
    info: &T,
    flags: Flags,
    allocator: *const vk::AllocationCallbacks<'_>,
    next: CreateFn<T>,
    slot: &mut vk::Pipeline,
) -> vk::Result {
    let mut lap = Lap::start();
    let rebuilding = REBUILDING.get();
    if !rebuilding {
        dev.app_activity.touch();
    }
    let as_asked = |outcome, lap: &mut Lap, slot: &mut vk::Pipeline| {
        lap.to(Phase::Keep); // whatever the kept path did before it gave up
        prime_dictionary(dev);
        // SAFETY: the application's create info and cache, as it asked.
        let r = unsafe { next(dev.handle, app_cache, 1, info, allocator, slot) };
        lap.to(Phase::Driver);
        (r, outcome)
    };
    if SETTINGS.test_panic {
        panic!("PIPEKEEP_TEST_PANIC is set: a forced panic inside the pipeline intercept");
    }
    // SAFETY: the application's create info.
    let keyed = unsafe { info.key(&dev.objects, &dev.device_state, flags) };
    lap.to(Phase::Key);
    let (r, outcome) = match keyed {
        Err(why) => {
            tracing::debug!(%why, "pipeline not keyed; built as asked and not kept");
            as_asked(Outcome::Unkeyed, &mut lap, slot)
        }
        Ok(key) => match dev.store() {
            None => as_asked(Outcome::PassedThrough, &mut lap, slot),
            Some(store) => {
                let b = Build {
                    dev,
                    store,
                    key: &key,
                    info,
                    flags,
                    allocator,
                    next,
                    rebuilding,
                };
                match unsafe { build_kept(&b, &mut lap, slot) } {
                    Kept::Made(r, outcome) => (r, outcome),
                    Kept::AskAsAsked => as_asked(Outcome::PassedThrough, &mut lap, slot),
                    Kept::WriteBehind => {
                        let (r, outcome) = as_asked(Outcome::Compiled, &mut lap, slot);
                        if r == vk::Result::SUCCESS {
                            record_compiled(&b, true);
                        }
                        (r, outcome)
                    }
                }
            }
        },
    };
    if SETTINGS.test_panic_after_build && *slot != vk::Pipeline::null() {
        panic!("PIPEKEEP_TEST_PANIC_AFTER_BUILD is set: a forced panic after the driver built");
    }
    lap.to(Phase::Keep);
    if *slot != vk::Pipeline::null() {
        if rebuilding {
            dev.watch.rebuilt();
        } else {
            dev.watch.record(outcome, &lap);
        }
    }
    if !rebuilding {
        dev.app_activity.touch();
    }
    r
}

thread_local! {
    /// This thread builds the title's record in the background: its pipelines are counted apart
    /// from the application's.
    static REBUILDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as the background rebuild's (at its start).
pub(super) fn mark_rebuild_thread() {
    REBUILDING.set(true);
}

/// A pipeline cache of the layer's own, from checked entry data or empty.
pub(super) unsafe fn create_cache(
    dev: &DeviceData,
    data: Option<&[u8]>,
) -> Result<vk::PipelineCache, vk::Result> {
    let data = data.filter(|d| !d.is_empty()); // never non-NULL initial data of size 0
    let ci = vk::PipelineCacheCreateInfo {
        initial_data_size: data.map_or(0, |d| d.len()),
        p_initial_data: data.map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        ..Default::default()
    };
    let mut cache = vk::PipelineCache::null();
    // SAFETY: a valid create info whose data outlives the call.
    match unsafe { (dev.fns.create_pipeline_cache)(dev.handle, &ci, std::ptr::null(), &mut cache) }
    {
        vk::Result::SUCCESS => Ok(cache),
        e => Err(e),
    }
}

unsafe fn cache_size(dev: &DeviceData, cache: vk::PipelineCache) -> usize {
    let mut size = 0usize;
    // SAFETY: a size query on the layer's own cache.
    let _ = unsafe {
        (dev.fns.get_pipeline_cache_data)(dev.handle, cache, &mut size, std::ptr::null_mut())
    };
    size
}

unsafe fn cache_data(dev: &DeviceData, cache: vk::PipelineCache) -> Vec<u8> {
    // SAFETY: the two-call idiom on the layer's own cache.
    let mut size = unsafe { cache_size(dev, cache) };
    let mut data = vec![0u8; size];
    let r = unsafe {
        (dev.fns.get_pipeline_cache_data)(dev.handle, cache, &mut size, data.as_mut_ptr().cast())
    };
    if r != vk::Result::SUCCESS {
        return Vec::new();
    }
    data.truncate(size);
    data
}

/// Before the driver compiles for this device, and on the opening thread once the store is
/// open: the dictionary the identity names is handed over first ([`DeviceDictionaries::prime`]:
/// once a device; a compile that comes while it is being handed over waits for it, a found
/// pipeline never does).
///
/// [`DeviceDictionaries::prime`]: super::dictionary::DeviceDictionaries::prime
pub(super) fn prime_dictionary(dev: &DeviceData) {
    // A compile that comes before the store is open waits for the opening (once a process an
    // identity) rather than compile first: a driver that has compiled anything refuses every
    // entry carrying a dictionary it does not hold.
    if !dev.dictionaries.cuts() {
        return;
    }
    if let Some(store) = dev.store() {
        // SAFETY: checked entries, handed to the device's own driver.
        let stand_in = dev.dictionaries.prime(store, |entry, seed| unsafe {
            hand_over(dev, store, entry, seed)
        });
        if let Some((name, id)) = stand_in {
            dev.dictionaries.note(&dev.writer, store, name, id);
        }
    }
}

/// Makes the driver a cache of `entry` as `seed` says, under the loading marker, and destroys it
/// at once: the driver then holds what the entry carries. Whether the cache was made.
unsafe fn hand_over(dev: &DeviceData, store: &Store, entry: &FoundEntry, seed: &Seed) -> bool {
    let marker = store.hold_marker(entry);
    // SAFETY: checked data, handed to the device's own driver.
    let made = seed.with_data(entry, |data| {
        // SAFETY: checked data, handed to the device's own driver.
        unsafe { create_cache(dev, Some(data)) }.map(|cache| (cache, data.len()))
    });
    drop(marker);
    match made {
        // A driver makes a cache from data it does not take all the same (the spec has it
        // ignore incompatible data): held only where the cache holds what it was given.
        Ok((cache, given)) => {
            // SAFETY: the layer's own cache, just made.
            let holds = unsafe { cache_size(dev, cache) };
            drop(OwnCache { dev, cache });
            let taken = holds >= given / 2;
            if !taken {
                tracing::debug!(entry = %entry.name(), given, holds, "the driver made a cache without the entry naming its dictionary");
            }
            taken
        }
        Err(e) => {
            tracing::debug!(entry = %entry.name(), result = ?e, "the driver would not make a cache from the entry naming its dictionary");
            false
        }
    }
}

/// The layer's own cache, destroyed when dropped.
pub(super) struct OwnCache<'a> {
    pub dev: &'a DeviceData,
    pub cache: vk::PipelineCache,
}

impl Drop for OwnCache<'_> {
    fn drop(&mut self) {
        // SAFETY: the layer's own cache, no longer used.
        unsafe {
            (self.dev.fns.destroy_pipeline_cache)(self.dev.handle, self.cache, std::ptr::null())
        };
    }
}

/// Creation feedback for one build: the application's own struct where it chained one (it then
/// receives the driver's feedback unchanged), else records of the layer's where feedback is
/// valid. The chained `VkPipelineCreationFeedbackCreateInfo` is made by [`Feedback::chain`] and
/// lives beside this, never inside it: nothing here points into itself.
struct Feedback {
    pipeline: vk::PipelineCreationFeedback,
    stages: Vec<vk::PipelineCreationFeedback>,
    apps: *const vk::PipelineCreationFeedback,
}

impl Feedback {
    unsafe fn for_info<T: PipelineInfo>(dev: &DeviceData, info: &T) -> Option<Feedback> {
        // SAFETY: the application's chain.
        if let Some(app) = unsafe { applications_feedback(info) } {
            return Some(Feedback {
                pipeline: Default::default(),
                stages: Vec::new(),
                apps: app.p_pipeline_creation_feedback,
            });
        }
        dev.feedback_valid.then(|| Feedback {
            pipeline: Default::default(),
            stages: vec![Default::default(); info.stage_count() as usize],
            apps: std::ptr::null(),
        })
    }

    /// The layer's feedback struct for `info`, pointing at these records (`None` where the
    /// application chained its own). It must be chained in front of `info` by [`chained`] and
    /// outlive the build.
    fn layer_info<T: PipelineInfo>(
        &mut self,
        info: &T,
    ) -> Option<vk::PipelineCreationFeedbackCreateInfo<'static>> {
        if !self.apps.is_null() {
            return None;
        }
        Some(vk::PipelineCreationFeedbackCreateInfo {
            p_next: info.p_next(),
            p_pipeline_creation_feedback: &mut self.pipeline,
            pipeline_stage_creation_feedback_count: self.stages.len() as u32,
            p_pipeline_stage_creation_feedbacks: self.stages.as_mut_ptr(),
            ..Default::default()
        })
    }

    /// `Some(hit)` where the driver marked the feedback valid.
    fn cache_hit(&self) -> Option<bool> {
        // SAFETY: the application's feedback output, written by the driver during the build.
        let flags = if self.apps.is_null() {
            self.pipeline.flags
        } else {
            unsafe { (*self.apps).flags }
        };
        flags
            .contains(vk::PipelineCreationFeedbackFlags::VALID)
            .then(|| {
                flags.contains(vk::PipelineCreationFeedbackFlags::APPLICATION_PIPELINE_CACHE_HIT)
            })
    }
}

/// The `VkPipelineCreationFeedbackCreateInfo` the application chained, if any.
///
/// # Safety
/// `info`'s chain must be valid.
unsafe fn applications_feedback<T: PipelineInfo>(
    info: &T,
) -> Option<&vk::PipelineCreationFeedbackCreateInfo<'_>> {
    // SAFETY: as the caller vouches; the sType matched.
    unsafe {
        (find_in_chain(
            info.p_next(),
            vk::StructureType::PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
        ) as *const vk::PipelineCreationFeedbackCreateInfo)
            .as_ref()
    }
}

/// `info` with the layer's feedback struct (if any) chained in front.
fn chained<T: PipelineInfo>(info: &T, fb: Option<&vk::PipelineCreationFeedbackCreateInfo>) -> T {
    let mut with = *info;
    if let Some(fb) = fb {
        with.set_p_next((fb as *const vk::PipelineCreationFeedbackCreateInfo).cast());
    }
    with
}

/// One build through a cache of the layer's own.
struct Built<'a> {
    result: vk::Result,
    cache: OwnCache<'a>,
    grew: bool,
}

/// `measure_size`: read the cache's size before and after, for a driver whose feedback cannot
/// say found or compiled. The pipeline goes into `slot`.
#[allow(clippy::too_many_arguments)]
unsafe fn build_through<'a, T: PipelineInfo>(
    dev: &'a DeviceData,
    seed: Option<&[u8]>,
    info: &T,
    allocator: *const vk::AllocationCallbacks<'_>,
    next: CreateFn<T>,
    measure_size: bool,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Result<Built<'a>, vk::Result> {
    // SAFETY (whole body): the layer's own cache and the application's create info.
    let cache = OwnCache {
        dev,
        cache: unsafe { create_cache(dev, seed)? },
    };
    let before = if measure_size {
        unsafe { cache_size(dev, cache.cache) }
    } else {
        0
    };
    lap.to(Phase::Cache);
    let result = unsafe { next(dev.handle, cache.cache, 1, info, allocator, slot) };
    lap.to(Phase::Driver);
    let grew = measure_size && unsafe { cache_size(dev, cache.cache) } > before;
    Ok(Built {
        result,
        cache,
        grew,
    })
}

/// What the kept path did.
enum Kept {
    /// The driver answered: the pipeline (if any) is in the slot.
    Made(vk::Result, Outcome),
    /// Nothing was made: ask the driver once, as the application asked.
    AskAsAsked,
    /// A miss under write-behind: build it as the application asked, record it, and leave its
    /// entry to the background rebuild.
    WriteBehind,
}

/// Everything one kept build needs, so the backends' paths take one argument.
struct Build<'a, T> {
    dev: &'a DeviceData,
    store: &'a Arc<Store>,
    key: &'a PipelineKey,
    info: &'a T,
    /// `info`'s effective flags.
    flags: Flags,
    allocator: *const vk::AllocationCallbacks<'a>,
    next: CreateFn<T>,
    /// Built by the background rebuild (never left to it: no write-behind).
    rebuilding: bool,
}

impl<T> Build<'_, T> {
    /// The compiled pipeline's entry: queued for the writer thread on the application's threads
    /// (never written on a pipeline's path), written here on the rebuild's, which are background
    /// threads already. So a rebuild pass's entries are in the store when it ends, and the next
    /// pass finds them instead of compiling them again behind a writer a busy machine keeps
    /// waiting.
    fn write_entry(&self, kind: PayloadKind, data: Vec<u8>) {
        let (writer, store) = (&self.dev.writer, self.store.clone());
        if self.rebuilding {
            writer.write_here(store, *self.key, kind, data);
        } else {
            writer.write(store, *self.key, kind, data);
        }
    }

    /// The application asked with `FAIL_ON_PIPELINE_COMPILE_REQUIRED`.
    fn must_be_found(&self) -> bool {
        self.flags
            .has(vk::PipelineCreateFlags::FAIL_ON_PIPELINE_COMPILE_REQUIRED)
    }
}

/// The kept path: the entry looked up, then built by what it holds and the device's backend.
/// The driver is asked to build the pipeline at most twice: once by the kept path, and, where
/// that fails, once more as the application asked.
unsafe fn build_kept<T: PipelineInfo>(
    b: &Build<'_, T>,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Kept {
    let (dev, store, key) = (b.dev, b.store, b.key);
    let looked_up = store.lookup_for(key, dev.handle.as_raw());
    lap.to(Phase::Lookup);
    let found = match looked_up {
        Ok(Lookup::Found(entry)) => Some(entry),
        Ok(Lookup::Merged(m)) => return unsafe { build_merged(b, m, lap, slot) },
        Ok(Lookup::Missing) => {
            tracing::debug!(entry = %key.file_name(), "no entry; compiling");
            None
        }
        Ok(Lookup::Dropped(_)) => None, // logged at warn by the store
        Err(e) => {
            tracing::debug!(error = %e, "entry unreadable; compiling afresh");
            None
        }
    };
    if b.must_be_found() && found.is_none() {
        return Kept::AskAsAsked;
    }
    // An entry of binaries, on a device building from binaries (not one that switched to caches
    // because its driver refuses them: each refusal would cost a build more).
    let mut refused = false;
    let found = match found {
        Some(entry) if entry.kind() == PayloadKind::Binaries => {
            let fns = dev
                .binary_fns
                .as_ref()
                .filter(|_| dev.backend() == Backend::Binary);
            if let Some(fns) = fns {
                match unsafe { build_from_binaries(b, fns, &entry, lap, slot) } {
                    Some(made) => return made,
                    None => refused = true,
                }
            }
            if b.must_be_found() {
                return Kept::AskAsAsked;
            }
            None
        }
        other => other,
    };
    // Nowhere to keep it: built as without the layer.
    if found.is_none() && dev.keeps_no_misses(store) {
        return Kept::AskAsAsked;
    }
    // Write-behind: a miss costs what it costs without the layer, through the application's own
    // cache; the rebuild (never itself behind) keeps it later. A pipeline an earlier run already
    // left owed is kept now: a process that never pauses would otherwise owe it for ever.
    if dev.write_behind
        && found.is_none()
        && !refused
        && !b.rebuilding
        && !dev.was_owed_before(b.key)
    {
        return Kept::WriteBehind;
    }
    // Binaries the driver refused are not written again as binaries: it is kept as a cache.
    match (dev.backend(), dev.binary_fns.as_ref()) {
        // The capture flag goes in a flags2 structure of the layer's, so not where the application
        // chained its own (its flags would then be ignored).
        (Backend::Binary, Some(fns)) if found.is_none() && !refused && !b.flags.chained => unsafe {
            build_capturing(b, fns, lap, slot)
        },
        _ => unsafe { build_cached(b, found, refused, lap, slot) },
    }
}

/// `cache`, merged: the entry was checked whole and merged into one of the device's merged
/// caches by reading ahead; the pipeline is built through that cache (no cache of its own is
/// made). Found is the feedback's cache-hit bit; an entry merged but not served counts as
/// `refused` (its pipeline is the driver's compile, through the merged cache). A build that fails
/// is asked once more, as the application asked.
unsafe fn build_merged<T: PipelineInfo>(
    b: &Build<'_, T>,
    merged: MergedEntry,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Kept {
    let dev = b.dev;
    // SAFETY: the application's create info; the feedback outlives the build.
    let mut feedback = unsafe { Feedback::for_info(dev, b.info) };
    let layer_feedback = feedback.as_mut().and_then(|f| f.layer_info(b.info));
    let with_feedback = chained(b.info, layer_feedback.as_ref());
    let cache = vk::PipelineCache::from_raw(merged.within.cache);
    let inside = enter_found_gate(dev);
    lap.to(Phase::Cache);
    // SAFETY: a merged cache of this device, complete before it was published and only built
    // through since; it lives until the device ends.
    let r = unsafe { (b.next)(dev.handle, cache, 1, &with_feedback, b.allocator, slot) };
    drop(inside);
    lap.to(Phase::Driver);
    if r != vk::Result::SUCCESS || *slot == vk::Pipeline::null() {
        *slot = vk::Pipeline::null();
        return Kept::AskAsAsked;
    }
    let hit = feedback
        .as_ref()
        .and_then(Feedback::cache_hit)
        .unwrap_or(false);
    if !hit {
        b.store.remove_refused(b.key);
        return Kept::Made(r, Outcome::Refused);
    }
    dev.writer.stamp(b.store.clone(), merged.name);
    Kept::Made(r, Outcome::FoundMerged)
}

/// A found pipeline's place inside the driver (`PIPEKEEP_FOUND_CALLS`), whichever way it is
/// built from its entry; `None` where the device has no bound. Held until the driver's call
/// returns.
fn enter_found_gate(dev: &DeviceData) -> Option<super::found_gate::Inside<'_>> {
    let inside = dev.found_gate.as_ref().map(FoundGate::enter);
    if inside.as_ref().is_some_and(|i| i.went_in_over()) {
        tracing::debug!(
            "went into the driver over the bound on found pipelines, having waited its longest"
        );
    }
    inside
}

/// `binary`, found: the entry's binaries made into objects, the pipeline built from them, the
/// objects destroyed. `None` where the driver refused the binaries or the build (counted: a
/// driver that refuses them all switches the device to `cache`); the caller then compiles.
unsafe fn build_from_binaries<T: PipelineInfo>(
    b: &Build<'_, T>,
    fns: &BinaryFns,
    entry: &FoundEntry,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Option<Kept> {
    if SETTINGS.test_refuse_binaries {
        // As NVIDIA's driver does with binaries another process wrote.
        b.dev.binaries_refused();
        return None;
    }
    let marker = b.store.hold_marker(entry);
    if aborts_in_this_load(b.store, entry) {
        std::process::abort();
    }
    let inside = enter_found_gate(b.dev);
    let loaded = entry.with_data(|data| {
        // Checked at lookup.
        let parsed = crate::store::binaries::parse(data).ok()?;
        // SAFETY: the device takes binaries (`fns` were loaded for it).
        Some(unsafe { binaries::load(b.dev, fns, &parsed) })
    })?;
    let objects = match loaded {
        Ok(o) => o,
        Err(e) => {
            tracing::debug!(entry = %b.key.file_name(), result = ?e, "the driver refused the kept binaries");
            b.dev.binaries_failed(e);
            return None;
        }
    };
    lap.to(Phase::Cache);
    // SAFETY: binaries made for this build.
    let built = unsafe { build_from_objects(b, objects, lap, slot) };
    drop(inside);
    drop(marker);
    let Ok(r) = built else {
        tracing::debug!(entry = %b.key.file_name(), result = ?built, "the driver would not build from the kept binaries");
        b.dev
            .binaries_failed(built.err().unwrap_or(vk::Result::ERROR_UNKNOWN));
        return None;
    };
    // SAFETY: the application's chain.
    unsafe { report_found_to_the_application(b.info) };
    b.dev.writer.stamp(b.store.clone(), entry.name());
    Some(Kept::Made(r, Outcome::Found))
}

/// Builds the pipeline from binary objects made for it (chained in front, no cache: the binaries
/// are the pipeline), destroyed after. `Err` with the driver's answer where it made none.
///
/// # Safety
/// `objects` must be binaries of `b`'s device.
unsafe fn build_from_objects<T: PipelineInfo>(
    b: &Build<'_, T>,
    objects: binaries::Objects<'_>,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Result<vk::Result, vk::Result> {
    let binary_info = binaries::info_for(&objects, b.info.p_next());
    // SAFETY: the layer's binaries, alive until after the build.
    let r = unsafe { build_with_in_front(b, &binary_info, lap, slot) };
    drop(objects);
    if r != vk::Result::SUCCESS || *slot == vk::Pipeline::null() {
        *slot = vk::Pipeline::null();
        return Err(r);
    }
    Ok(r)
}

/// `binary`, a miss the driver builds as it built a pipeline compiled earlier in this run (the
/// same driver key, `sharing`): made from that pipeline's binaries and written as this one's
/// entry, as an application's own cache would have served it. `None` where the driver would
/// not; the caller then compiles.
unsafe fn build_from_shared<T: PipelineInfo>(
    b: &Build<'_, T>,
    fns: &BinaryFns,
    captured: &binaries::Captured,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Option<Kept> {
    let parts: Vec<crate::store::binaries::Binary<'_>> = captured
        .iter()
        .map(|(key, data)| crate::store::binaries::Binary { key, data })
        .collect();
    // SAFETY: the device takes binaries (`fns` were loaded for it); these are its own.
    let built = unsafe { binaries::load(b.dev, fns, &parts) }.and_then(|objects| {
        lap.to(Phase::Cache);
        // SAFETY: binaries made for this build.
        unsafe { build_from_objects(b, objects, lap, slot) }
    });
    let Ok(r) = built else {
        tracing::debug!(entry = %b.key.file_name(), result = ?built, "the driver would not build from a pipeline's binaries of the same driver key; compiling");
        return None;
    };
    keep_binaries(b, captured);
    Some(Kept::Made(r, Outcome::Shared))
}

/// A pipeline made from a kept entry reports a cache hit to the application's own creation
/// feedback, as a cache of its own would have (SPEC, step 4).
///
/// # Safety
/// `info`'s chain must be valid; a feedback structure in it points at writable records.
unsafe fn report_found_to_the_application<T: PipelineInfo>(info: &T) {
    // SAFETY: as the caller vouches.
    let app = unsafe { applications_feedback(info) };
    if let Some(record) = app.and_then(|a| unsafe { a.p_pipeline_creation_feedback.as_mut() }) {
        record.flags |= vk::PipelineCreationFeedbackFlags::VALID
            | vk::PipelineCreationFeedbackFlags::APPLICATION_PIPELINE_CACHE_HIT;
    }
}

/// `binary`, a miss: built with the capture flag added (through a
/// `VkPipelineCreateFlags2CreateInfoKHR` of the layer's carrying the application's flags) and
/// no cache: Vulkan allows the capture flag only with `pipelineCache` NULL
/// (VUID-vkCreateComputePipelines-pNext-09617), so an application's own cache does not receive a
/// kept pipeline's first build. The binaries are then read and written as the entry, and the
/// captured data released. A miss the driver would build as it built a pipeline compiled earlier
/// in the run (the same driver key, `sharing`) is made from that pipeline's binaries instead: the
/// sharing the application's cache would have given. (Taking the binaries from the driver's
/// internal cache after a build as asked was tried and measured: no faster on RADV, and on
/// NVIDIA it gave 311 MB of binaries for pygfx's 641 pipelines, a fifth of them refused by the
/// next process.) This build is the application's ask: a failure is its answer.
unsafe fn build_capturing<T: PipelineInfo>(
    b: &Build<'_, T>,
    fns: &BinaryFns,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Kept {
    // Not asked on the rebuild's threads, which take no lock an application thread takes.
    let driver_key = (SETTINGS.share_builds && !b.rebuilding)
        // SAFETY: the application's create info, valid for the call.
        .then(|| unsafe { sharing::driver_key(b.dev.handle, fns, (b.info as *const T).cast()) })
        .flatten();
    lap.to(Phase::Lookup);
    if let Some(key) = &driver_key {
        if let Some(captured) = b.dev.shared_builds.get(key) {
            // SAFETY: as for this function.
            if let Some(made) = unsafe { build_from_shared(b, fns, &captured, lap, slot) } {
                return made;
            }
            // Compiled below, and held in their place.
            b.dev.shared_builds.forget(key);
        }
    }
    lap.to(Phase::Cache);
    let flags2 = vk::PipelineCreateFlags2CreateInfoKHR {
        p_next: b.info.p_next(),
        flags: vk::PipelineCreateFlags2KHR::from_raw(b.flags.bits | bin::CAPTURE_DATA),
        ..Default::default()
    };
    // SAFETY: the application's flags with the capture flag added, and no cache (as the capture
    // flag requires).
    let r = unsafe { build_with_in_front(b, &flags2, lap, slot) };
    if r != vk::Result::SUCCESS || *slot == vk::Pipeline::null() {
        return Kept::Made(r, Outcome::PassedThrough);
    }
    // SAFETY: the pipeline just made with the capture flag.
    match unsafe { binaries::capture(b.dev, fns, *slot) } {
        Ok(captured) => {
            keep_binaries(b, &captured);
            if let Some(key) = driver_key {
                b.dev.shared_builds.hold(key, Arc::new(captured));
            }
        }
        Err(e) => {
            tracing::debug!(entry = %b.key.file_name(), result = ?e, "no binaries from a compiled pipeline; not kept")
        }
    }
    Kept::Made(r, Outcome::Compiled)
}

/// Builds the application's create info with `front` chained before its own structures (whose
/// `pNext` must already be the application's chain), through no pipeline cache, with the
/// application's allocator.
///
/// # Safety
/// `front` must be a valid structure extending the create info, alive for the call.
unsafe fn build_with_in_front<T: PipelineInfo, S>(
    b: &Build<'_, T>,
    front: &S,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> vk::Result {
    let mut with = *b.info;
    with.set_p_next((front as *const S).cast());
    // SAFETY: as the caller vouches; the application's create info otherwise.
    let r = unsafe {
        (b.next)(
            b.dev.handle,
            vk::PipelineCache::null(),
            1,
            &with,
            b.allocator,
            slot,
        )
    };
    lap.to(Phase::Driver);
    r
}

/// Queues a pipeline's binaries as its entry.
fn keep_binaries<T: PipelineInfo>(b: &Build<'_, T>, captured: &binaries::Captured) {
    let payload =
        crate::store::binaries::encode(captured.iter().map(|(k, d)| (k.as_slice(), d.as_slice())));
    b.write_entry(PayloadKind::Binaries, payload);
    record_compiled(b, false);
}

/// Queues a compiled pipeline for the title's record (`<title>/record.foz`), with the content
/// of every object it names, as its key captured them. `pending`: its entry is left to a later
/// rebuild (write-behind).
fn record_compiled<T: PipelineInfo>(b: &Build<'_, T>, pending: bool) {
    let dev = b.dev;
    let Some(file) = dev.record.as_ref() else {
        return;
    };
    // SAFETY: the application's create info, valid for the call.
    let Some(desc) = (unsafe { b.info.recorded(&dev.objects, &dev.device_state, b.flags) }) else {
        return;
    };
    let mut contents = Vec::new();
    let mut keep = |digest: &Digest| {
        if let Some(c) = dev.objects.content(digest) {
            contents.push((*digest, c));
        }
    };
    for digest in desc.names() {
        keep(&digest);
    }
    if let Some(layout) = dev.objects.content(desc.layout()) {
        if let crate::replay::record::Content::PipelineLayout(l) = &*layout {
            for set in &l.set_layouts {
                keep(set);
                if let Some(set_layout) = dev.objects.content(set) {
                    if let crate::replay::record::Content::SetLayout(sl) = &*set_layout {
                        sl.bindings
                            .iter()
                            .flat_map(|b| b.immutable_samplers.iter().flatten())
                            .for_each(&mut keep);
                    }
                }
            }
        }
    }
    let record = crate::replay::record::PipelineRecord {
        key: *b.key,
        desc,
        contents,
    };
    if pending {
        // In flight before counted as owed: a rebuild pass never takes this one as landed.
        if let Err(e) = file.owe() {
            tracing::debug!(record = %file.path().display(), error = %e, "the record is not marked as owing entries");
        }
        dev.owed_this_run
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    dev.writer
        .record(file.clone(), record, dev.app_state.clone(), pending);
}

/// `cache` (D994's way): the pipeline built through a cache of the layer's own, made from the
/// entry's data where found (the application's cache swapped out), else empty; what was compiled
/// is written as the entry. `already_asked`: the driver was asked once already (binaries it
/// refused), so a failure here is the answer.
unsafe fn build_cached<T: PipelineInfo>(
    b: &Build<'_, T>,
    found: Option<FoundEntry>,
    already_asked: bool,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Kept {
    let (dev, store, key, info) = (b.dev, b.store, b.key, b.info);
    // SAFETY: the application's create info; the feedback outlives every build below.
    let mut feedback = unsafe { Feedback::for_info(dev, info) };
    let layer_feedback = feedback.as_mut().and_then(|f| f.layer_info(info));
    let with_feedback = chained(info, layer_feedback.as_ref());
    let measure_size = feedback.is_none();
    let through = |seed: Option<&[u8]>, lap: &mut Lap, slot: &mut vk::Pipeline| unsafe {
        build_through(
            dev,
            seed,
            &with_feedback,
            b.allocator,
            b.next,
            measure_size,
            lap,
            slot,
        )
    };

    // Through the entry where the driver makes a cache of it; else through an empty cache.
    let mut seeded = None;
    let mut attempt = None;
    if let Some(entry) = found {
        let marker = store.hold_marker(&entry);
        if aborts_in_this_load(store, &entry) {
            std::process::abort();
        }
        let seed = dev.dictionaries.seed(&entry);
        let inside = enter_found_gate(dev);
        let tried = seed.with_data(&entry, |data| through(Some(data), lap, slot));
        drop(inside);
        if tried.is_err() {
            dev.dictionaries.after(&seed, false);
        }
        match tried {
            Ok(built) => {
                attempt = Some(built);
                seeded = Some((entry, seed));
            }
            Err(e) if b.must_be_found() => {
                tracing::debug!(result = ?e, "no cache from the kept entry; asking as the application did");
                return Kept::AskAsAsked;
            }
            Err(e) => {
                tracing::warn!(entry = %key.file_name(), result = ?e, "the driver would not make a cache from the kept entry; compiling afresh")
            }
        }
        drop(marker);
        lap.to(Phase::Cache);
    }
    if attempt.is_none() {
        prime_dictionary(dev);
    }
    let built = match attempt {
        Some(built) => built,
        None => match through(None, lap, slot) {
            Ok(built) => built,
            Err(_) => return Kept::AskAsAsked, // no cache of our own: nothing was built
        },
    };
    if built.result != vk::Result::SUCCESS {
        *slot = vk::Pipeline::null();
        if already_asked {
            return Kept::Made(built.result, Outcome::PassedThrough);
        }
        // The driver failed this build: asked once more, as asked, by the caller.
        tracing::debug!(entry = %key.file_name(), result = ?built.result, seeded = seeded.is_some(), "the driver did not build the pipeline; asking once more as the application did");
        return Kept::AskAsAsked;
    }
    // Found or compiled: the feedback's cache-hit bit where the driver marks it valid (on RADV a
    // found pipeline may change the cache's size by a few bytes), else the cache's size. Feedback
    // chained but not marked valid says nothing: counted as compiled, the entry is written again.
    let hit = match feedback.as_ref() {
        Some(f) => f.cache_hit().unwrap_or(false),
        None => !built.grew,
    };
    if let Some((entry, seed)) = &seeded {
        if let Some(learned) = dev.dictionaries.after(seed, hit) {
            dev.dictionaries
                .note(&dev.writer, store, entry.name(), learned);
        }
    }
    let outcome = match seeded.map(|(entry, _)| entry) {
        Some(entry) if hit => {
            // Stamped by the writer thread: the time update leaves the application's thread.
            dev.writer.stamp(store.clone(), entry.into_name());
            Outcome::Found
        }
        seeded => {
            let data = unsafe { cache_data(dev, built.cache.cache) };
            if holds_more_than_header(&data) {
                dev.dictionaries
                    .note_written(&dev.writer, store, key.file_name(), &data);
                b.write_entry(PayloadKind::Cache, data);
                record_compiled(b, false);
            }
            if seeded.is_some() || already_asked {
                tracing::debug!(entry = %key.file_name(), "the driver compiled a pipeline whose entry was whole; written again");
                Outcome::Refused
            } else {
                Outcome::Compiled
            }
        }
    };
    Kept::Made(built.result, outcome)
}

/// Test only: whether `PIPEKEEP_TEST_ABORT_IN_LOAD` makes this load abort the process.
fn aborts_in_this_load(store: &Store, entry: &FoundEntry) -> bool {
    match SETTINGS.test_abort_in_load.as_deref() {
        None => false,
        Some(link) if link.contains('/') => {
            store.entry_names_piece_file(&entry.name(), std::path::Path::new(link))
        }
        Some(_) => true,
    }
}
