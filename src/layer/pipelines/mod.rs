//! The two pipeline intercepts and the flow of one pipeline (SPEC "Building a pipeline"), in the
//! order the data goes: key it; look its entry up; the backend builds it, found or missed
//! (`binary`: [`binary`], `cache`: [`cache`], each its own file); keep what was compiled and
//! record it ([`keep`]); count it in the compile watch. Feedback, which tells found from compiled
//! and reports to the application, is [`feedback`]'s. Any failure along the way ends in the call
//! the application made, with the answer the driver gives it.

mod binary;
mod cache;
mod chain_copy;
mod derivatives;
mod ray_tracing;

pub use ray_tracing::create_ray_tracing_pipelines;
mod feedback;
mod keep;

use binary::*;
use cache::*;
pub(super) use cache::{hold_marker_for_load, prime_dictionary};
use feedback::*;
pub(super) use keep::record;
use keep::*;

use std::ffi::c_void;

use ash::vk::Handle;
use std::sync::Arc;

use ash::vk;

use crate::replay::record::Recorded;

use super::abi::find_in_chain;
use super::binaries;
use super::binary_abi as bin;
use super::capture::{self, Flags, KnownLibrary};
use super::device::{
    device_data, on_rebuild_thread, unrecorded_next, Backend, BinaryFns, DeviceData,
};
use super::dictionary::Seed;
use super::found_gate::FoundGate;
use super::guard::{guarded, SETTINGS};
use super::objects::{InlineCodeScope, Objects};
use super::sharing;
use crate::key::{Digest, PipelineKey, Unkeyable};
use crate::store::envelope::{holds_more_than_header, PayloadKind};
use crate::store::nvidia_cache::{self, Framing};
use crate::store::{FoundEntry, Lookup, Store};
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
    /// Ray-tracing pipelines (kept the cache way).
    const RAY_TRACING: bool;
    fn legacy_flags(&self) -> vk::PipelineCreateFlags;
    fn set_legacy_flags(&mut self, flags: vk::PipelineCreateFlags);
    fn p_next(&self) -> *const c_void;
    fn set_p_next(&mut self, p: *const c_void);
    fn base_index(&self) -> i32;
    fn set_base(&mut self, base: vk::Pipeline);
    fn set_base_index(&mut self, index: i32);
    fn stage_count(&self) -> u32;
    /// Whether it links pipeline libraries.
    /// # Safety
    /// `self` must be a valid create info.
    unsafe fn links_libraries(&self) -> bool;
    /// Its stages given by module identifier replaced by copies without it, for a build from
    /// binaries (`chain_copy`); `stages` holds a graphics pipeline's array of them.
    /// # Safety
    /// `self` must be a valid create info; it then lives no longer than `copies` and `stages`.
    unsafe fn drop_identifiers(
        &mut self,
        copies: &mut chain_copy::ChainCopy,
        stages: &mut Vec<vk::PipelineShaderStageCreateInfo<'static>>,
    ) -> Result<(), chain_copy::NotCopied>;

    /// The pipeline as its key sees it and the record writes it, read once a pipeline.
    /// # Safety
    /// `self` must be a valid create info; `flags` its effective flags.
    unsafe fn describe(
        &self,
        objects: &Objects,
        device: &Digest,
        flags: Flags,
    ) -> Result<(PipelineKey, Recorded), Unkeyable>;
}

macro_rules! pipeline_info {
    ($ty:ty, $command:literal, $ray_tracing:literal, $stages:expr, $links:expr, $drop_identifiers:expr, $describe:expr) => {
        impl PipelineInfo for $ty {
            const COMMAND: &'static std::ffi::CStr = $command;
            const RAY_TRACING: bool = $ray_tracing;
            fn legacy_flags(&self) -> vk::PipelineCreateFlags {
                self.flags
            }
            fn set_legacy_flags(&mut self, flags: vk::PipelineCreateFlags) {
                self.flags = flags;
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
            fn set_base_index(&mut self, index: i32) {
                self.base_pipeline_handle = vk::Pipeline::null();
                self.base_pipeline_index = index;
            }
            fn stage_count(&self) -> u32 {
                let count: fn(&Self) -> u32 = $stages;
                count(self)
            }
            unsafe fn links_libraries(&self) -> bool {
                let links: unsafe fn(&Self) -> bool = $links;
                // SAFETY: as the caller vouches.
                unsafe { links(self) }
            }
            unsafe fn drop_identifiers(
                &mut self,
                copies: &mut chain_copy::ChainCopy,
                stages: &mut Vec<vk::PipelineShaderStageCreateInfo<'static>>,
            ) -> Result<(), chain_copy::NotCopied> {
                let drop: unsafe fn(
                    &mut Self,
                    &mut chain_copy::ChainCopy,
                    &mut Vec<vk::PipelineShaderStageCreateInfo<'static>>,
                ) -> Result<(), chain_copy::NotCopied> = $drop_identifiers;
                // SAFETY: as the caller vouches.
                unsafe { drop(self, copies, stages) }
            }
            unsafe fn describe(
                &self,
                objects: &Objects,
                device: &Digest,
                flags: Flags,
            ) -> Result<(PipelineKey, Recorded), Unkeyable> {
                let describe: unsafe fn(
                    &Self,
                    &Objects,
                    &Digest,
                    Flags,
                ) -> Result<(PipelineKey, Recorded), Unkeyable> = $describe;
                // SAFETY: as the caller vouches.
                unsafe { describe(self, objects, device, flags) }
            }
        }
    };
}

/// Whether a graphics create info's chain links libraries (`VkPipelineLibraryCreateInfoKHR`).
///
/// # Safety
/// `p_next` must be a valid chain.
unsafe fn chain_links_libraries(p_next: *const c_void) -> bool {
    // SAFETY: as the caller vouches; the sType matched.
    let libraries =
        unsafe { find_in_chain(p_next, vk::StructureType::PIPELINE_LIBRARY_CREATE_INFO_KHR) }
            as *const vk::PipelineLibraryCreateInfoKHR;
    unsafe { libraries.as_ref() }.is_some_and(|l| l.library_count > 0)
}

pipeline_info!(
    vk::ComputePipelineCreateInfo<'static>,
    c"vkCreateComputePipelines",
    false,
    |_| 1,
    |_| false,
    |c, copies, _| {
        // SAFETY: the application's stage, as the caller vouches.
        if let Some(s) = unsafe { chain_copy::stage_without_identifier(&c.stage, copies) }? {
            c.stage = s;
        }
        Ok(())
    },
    |ci, objects, device, flags| unsafe { capture::compute_desc(ci, objects, device, flags) }
        .map(|d| (crate::key::compute_key(&d), Recorded::Compute(d)))
);
pipeline_info!(
    vk::GraphicsPipelineCreateInfo<'static>,
    c"vkCreateGraphicsPipelines",
    false,
    |g| g.stage_count,
    |g| unsafe { chain_links_libraries(g.p_next) },
    |g, copies, stages| {
        // SAFETY: the application's stages, as the caller vouches.
        let all = unsafe { super::objects::slice(g.p_stages, g.stage_count) };
        if let Some(without) = unsafe { chain_copy::stages_without_identifiers(all, copies) }? {
            *stages = without;
            g.p_stages = stages.as_ptr();
        }
        Ok(())
    },
    |ci, objects, device, flags| unsafe { capture::graphics_desc(ci, objects, device, flags) }.map(
        |d| (
            crate::key::graphics_key(&d),
            Recorded::Graphics(Box::new(d))
        )
    )
);

pipeline_info!(
    vk::RayTracingPipelineCreateInfoKHR<'static>,
    c"vkCreateRayTracingPipelinesKHR",
    true,
    |r| r.stage_count,
    // SAFETY: pLibraryInfo is NULL or valid, per the spec.
    |r| unsafe { r.p_library_info.as_ref() }.is_some_and(|l| l.library_count > 0),
    // Never built from binaries.
    |_, _, _| Ok(()),
    // SAFETY: the application's create info, valid for the call, as the flow vouches.
    |ci, objects, device, flags| unsafe { capture::ray_tracing_desc(ci, objects, device, flags) }
        .map(|d| (
            crate::key::ray_tracing_key(&d),
            Recorded::RayTracing(Box::new(d))
        ))
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
            // Each pipeline's create info as it went to the driver.
            let mut sent: Vec<T> = Vec::with_capacity(infos.len());
            for (i, original) in infos.iter().enumerate() {
                let mut info = *original;
                // SAFETY: the application's valid chain. Read once a pipeline, for all below.
                let mut flags = unsafe { Flags::of(info.legacy_flags(), info.p_next()) };
                let base = derivatives::resolve_base(&mut info, &mut flags, i, out);
                let r = match base {
                    derivatives::Base::Resolved => unsafe {
                        build_one(dev, app_cache, &info, flags, allocator, next, &mut out[i])
                    },
                    derivatives::Base::FailedInThisCall => unsafe {
                        derivatives::build_with_its_bases(
                            dev,
                            app_cache,
                            &sent,
                            info,
                            allocator,
                            next,
                            &mut out[i],
                        )
                    },
                };
                sent.push(info);
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
                // A library remembered already is forgotten first: its handle may come again.
                dev.objects().libraries.remove_if_held(pipeline.as_raw());
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
    // Code chained inline into its stages stays readable (for the record) until it returns.
    let _inline_code = InlineCodeScope::open();
    let rebuilding = on_rebuild_thread();
    // Counted as the application's build until this returns (or unwinds).
    let _building = (!rebuilding).then(|| dev.app_activity.begin());
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
    // A graphics pipeline linked from libraries into one that is not itself a library is built
    // as asked, decided before any key or lookup: a fast link copies its libraries' code, cheaper
    // than a lookup (RADV: about 3 us; its cache keeps none of it), and an optimized one built
    // through a cache of the layer's own took 2-5x as long as without (48 links at 16 threads on
    // the H200, its disk cache on and fresh: 642-764 ms against 141-151 ms, and 424-511 ms seeded
    // with its libraries' data; RADV null, 2 threads: 188-225 ms against 52-95 ms), more than a
    // kept one saves where the driver's own disk cache serves it after. Its libraries are kept.
    // SAFETY: the application's create info.
    let link = T::COMMAND == c"vkCreateGraphicsPipelines"
        && !flags.has(vk::PipelineCreateFlags::LIBRARY_KHR)
        && unsafe { info.links_libraries() };
    // SAFETY: the application's create info.
    let described =
        (!link).then(|| unsafe { info.describe(dev.objects(), &dev.device_state, flags) });
    lap.to(Phase::Key);
    let library_key = described
        .as_ref()
        .and_then(|d| d.as_ref().ok())
        .map(|(key, _)| *key);
    let (r, outcome) = match described {
        None => as_asked(Outcome::PassedThrough, &mut lap, slot),
        Some(Err(why)) => {
            tracing::debug!(%why, "pipeline not keyed; built as asked and not kept");
            as_asked(Outcome::Unkeyed, &mut lap, slot)
        }
        Some(Ok((key, desc))) => match dev.store() {
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
                    desc: std::cell::Cell::new(Some(desc)),
                };
                match unsafe { build_kept(&b, &mut lap, slot) } {
                    Kept::Made(r, outcome) => (r, outcome),
                    Kept::AskAsAsked => as_asked(Outcome::PassedThrough, &mut lap, slot),
                }
            }
        },
    };
    if flags.has(vk::PipelineCreateFlags::LIBRARY_KHR) && *slot != vk::Pipeline::null() {
        // Remembered until destroyed: the pipelines linking it are keyed by it.
        let known = library_key.map(|key| KnownLibrary { key });
        dev.objects().libraries.insert(slot.as_raw(), known);
    }
    if SETTINGS.test_panic_after_build && *slot != vk::Pipeline::null() {
        panic!("PIPEKEEP_TEST_PANIC_AFTER_BUILD is set: a forced panic after the driver built");
    }
    lap.to(Phase::Keep);
    if *slot != vk::Pipeline::null() {
        if SETTINGS.test_stall_rebuild.is_some() && !rebuilding {
            super::test_stall::app_made_one();
        }
        if rebuilding {
            dev.watch.rebuilt();
        } else {
            dev.watch.record(outcome, &lap);
        }
    }
    r
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
    /// Built by the background rebuild.
    rebuilding: bool,
    /// The pipeline as it was keyed, until the record takes it (a compiled pipeline's).
    desc: std::cell::Cell<Option<Recorded>>,
}

impl<T> Build<'_, T> {
    /// The compiled pipeline's entry: queued for the writer thread on the application's threads
    /// (never written on a pipeline's path), written here on the rebuild's ([`Writer::write`]).
    /// `framing`: NVIDIA's framing of cache data that carries its dictionary.
    fn write_entry(&self, kind: PayloadKind, data: Vec<u8>, framing: Option<Framing>) {
        let store = self.store.clone();
        self.dev.writer.write(store, *self.key, kind, data, framing);
    }

    /// Each stage's code digest, from the pipeline as it was keyed (none once the record took it).
    fn stage_codes(&self) -> Vec<[u8; 16]> {
        let desc = self.desc.take();
        let codes = desc.as_ref().map(Recorded::stage_codes).unwrap_or_default();
        self.desc.set(desc);
        codes
    }

    /// The application asked with `FAIL_ON_PIPELINE_COMPILE_REQUIRED`.
    fn must_be_found(&self) -> bool {
        self.flags
            .has(vk::PipelineCreateFlags::FAIL_ON_PIPELINE_COMPILE_REQUIRED)
    }
}

/// `key`'s entry, where the store holds one that reads whole: a missing or unreadable one is
/// logged at `debug` (a damaged one the store drops and logs at `warn`), and compiled.
pub(in crate::layer) fn found_entry(store: &Store, key: &PipelineKey) -> Option<FoundEntry> {
    match store.lookup(key) {
        Ok(Lookup::Found(entry)) => Some(entry),
        Ok(Lookup::Missing) => {
            tracing::debug!(entry = %key.file_name(), "no entry; compiling");
            None
        }
        Ok(Lookup::Dropped(_)) => None,
        Err(e) => {
            tracing::debug!(error = %e, "entry unreadable; compiling afresh");
            None
        }
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
    let found = found_entry(store, key);
    lap.to(Phase::Lookup);
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
                    Ok(made) => return made,
                    Err(NotFromBinaries::Refused) => refused = true,
                    Err(NotFromBinaries::OtherDriverKey | NotFromBinaries::NotCopied) => {}
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
    // Binaries the driver refused are not written again as binaries: it is kept as a cache.
    match (dev.backend(), dev.binary_fns.as_ref()) {
        // The capture flag goes in a flags2 structure of the layer's, so not where the application
        // chained its own (its flags would then be ignored).
        // Library parts and links are kept the cache way (the spec allows binaries for them; the
        // layer keeps to what it has measured).
        (Backend::Binary, Some(fns))
            if found.is_none()
                && !refused
                && !b.flags.chained
                && !b.flags.has(vk::PipelineCreateFlags::LIBRARY_KHR)
                && !T::RAY_TRACING =>
        unsafe { build_capturing(b, fns, lap, slot) },
        _ => unsafe { build_cached(b, found, refused, lap, slot) },
    }
}

/// A found pipeline's place inside the driver (`PIPEKEEP_FOUND_CALLS`), whichever way it is
/// built from its entry; `None` where the device has no bound. Held until the driver's call
/// returns.
fn enter_found_gate(dev: &DeviceData) -> Option<super::found_gate::Inside<'_>> {
    // The rebuild's threads, at idle priority, never hold a place the application waits for:
    // they build only while it is quiet, and the bound is for its bursts.
    if on_rebuild_thread() {
        return None;
    }
    let inside = dev.found_gate.as_ref().map(FoundGate::enter);
    if inside.as_ref().is_some_and(|i| i.went_in_over()) {
        tracing::debug!(
            "went into the driver over the bound on found pipelines, having waited its longest"
        );
    }
    inside
}
