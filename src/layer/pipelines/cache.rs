//! The `cache` backend (D994's way): a pipeline cache of the layer's own made from the entry (an
//! empty one on a miss), the pipeline built through it with the application's cache swapped out,
//! found or compiled told by feedback or the cache's size; and NVIDIA's dictionary handed to the
//! driver before a device's first compile.

use super::*;

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

pub(super) unsafe fn cache_size(dev: &DeviceData, cache: vk::PipelineCache) -> usize {
    let mut size = 0usize;
    // SAFETY: a size query on the layer's own cache.
    let _ = unsafe {
        (dev.fns.get_pipeline_cache_data)(dev.handle, cache, &mut size, std::ptr::null_mut())
    };
    size
}

pub(super) unsafe fn cache_data(dev: &DeviceData, cache: vk::PipelineCache) -> Vec<u8> {
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
pub(in crate::layer) fn prime_dictionary(dev: &DeviceData) {
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
pub(super) unsafe fn hand_over(
    dev: &DeviceData,
    store: &Store,
    entry: &FoundEntry,
    seed: &Seed,
) -> bool {
    let marker = store.hold_marker(entry);
    // The opening thread may come here after the device's end gave up waiting for it (the
    // lookup and the marker before this are file I/O): then it makes no call into a device that
    // may be gone. Inside, the end waits for it until its cache is destroyed.
    let Some(inside) = dev.driver_gate.enter() else {
        tracing::debug!(entry = %entry.name(), "the device ended; NVIDIA's dictionary is not handed over");
        return false;
    };
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
            drop(inside);
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

/// `cache` (D994's way): the pipeline built through a cache of the layer's own, made from the
/// entry's data where found (the application's cache swapped out), else empty; what was compiled
/// is written as the entry. `already_asked`: the driver was asked once already (binaries it
/// refused), so a failure here is the answer.
pub(super) unsafe fn build_cached<T: PipelineInfo>(
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
    // Library parts, links and ray-tracing pipelines: NVIDIA's driver (580) serves them from the
    // layer's cache without the feedback's cache-hit bit (a warm run took 19 ms of optimized links
    // against 625 ms cold, and was counted compiled), so their cache's size says too.
    // A library part (a link is never built here) or a ray-tracing pipeline.
    let size_says_too = (b.flags.has(vk::PipelineCreateFlags::LIBRARY_KHR) || T::RAY_TRACING)
        && store.identity().vendor_id == crate::store::identity::NVIDIA;
    let measure_size = feedback.is_none() || size_says_too;
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
    // An entry carrying a dictionary the driver refuses in this process: built as a miss, its
    // entry written again.
    let mut refused_unseen = false;
    let found = match found.map(|entry| (dev.dictionaries.seed(&entry), entry)) {
        Some((Seed::Refused { dictionary }, entry)) => {
            // Not found as the driver takes it: a miss the layer keeps, or as the application
            // asked where it would keep nothing or the application asked for no compile.
            if b.must_be_found() || dev.keeps_no_misses(store) {
                return Kept::AskAsAsked;
            }
            tracing::debug!(entry = %entry.name(), dictionary = %format_args!("{:016x}", dictionary.hash), "the driver refuses this entry's dictionary in this process; compiled as a miss");
            refused_unseen = true;
            None
        }
        other => other,
    };
    if let Some((seed, entry)) = found {
        let marker = hold_marker_for_load(store, &entry);
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
    // A miss goes through its twin's data, or that of pipelines sharing its stages, where this
    // run compiled one ([`super::super::twins`]). (Not for what has no stages of its own, a link
    // or an interface part: all of them share one SPIR-V key, and none another's data.)
    // Nor on the rebuild's threads: they never take a lock the application's builds wait on.
    let twins_apply = SETTINGS.share_builds && info.stage_count() > 0 && !b.rebuilding;
    // Read only where a seed is looked up or held (never on a found pipeline's path).
    let stages = std::cell::OnceCell::new();
    let stages = || stages.get_or_init(|| b.stage_codes()).as_slice();
    // (A refused entry is built through an empty cache: a twin's data may carry its dictionary.)
    let mut twin = (attempt.is_none() && seeded.is_none() && twins_apply && !refused_unseen)
        .then(|| dev.twins.seed_for(&key.spirv, stages()))
        .flatten();
    let built = match attempt {
        Some(built) => built,
        None => match through(twin.as_ref().map(|t| t.data.as_slice()), lap, slot) {
            Ok(built) => built,
            Err(_) if twin.is_some() => match through(None, lap, slot) {
                Ok(built) => {
                    twin = None; // built without it: neither served by it nor holding it
                    built
                }
                Err(_) => return Kept::AskAsAsked,
            },
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
    // chained but not marked valid says nothing (`known` false): counted as compiled, the entry is
    // written again; but a success asked to fail where a compile was needed (only a found entry's
    // build gets here so asked) was built from the entry, never compiled: found.
    let said = feedback
        .as_ref()
        .map_or(Some(!built.grew), Feedback::cache_hit);
    let known = said.is_some() || size_says_too;
    let hit =
        said.unwrap_or(false) || (size_says_too && !built.grew) || (!known && b.must_be_found());
    let mut built = built;
    // False where the second build, whose data would replace the entry's, failed: the entry
    // stays as it is. (Data carrying the dictionary the driver doubts is checked apart.)
    let mut keep_entry = true;
    let mut doubted = None;
    let mut seeded_uncounted = None;
    if let Some((entry, seed)) = &seeded {
        if let Some(learned) = dev.dictionaries.after(seed, hit) {
            dev.dictionaries
                .note(&dev.writer, store, entry.name(), learned);
        }
        // The driver compiled through a cache seeded with a dictionary (its record carried, or
        // cut out where it was handed over first): built once more through an empty cache (the
        // driver's disk cache, where on, has it now), whose data is written instead; the first
        // pipeline stays the application's unless the second is made. Not where the application
        // asked to fail rather than compile, nor where nothing is kept, nor for ray-tracing
        // pipelines replaying their group handles (the driver may refuse the same handles while
        // the first pipeline lives). Built again or not, data still carrying a doubted dictionary
        // is not written.
        let asks_count = known || b.must_be_found();
        let counted = asks_count
            .then(|| dev.dictionaries.count(seed, hit))
            .flatten();
        doubted = counted.as_ref().and_then(|c| c.doubted);
        seeded_uncounted = seed.went_uncounted(asks_count);
        let builds_again = counted.is_some()
            && !b.must_be_found()
            && !dev.keeps_no_misses(store)
            && !b
                .flags
                .has(vk::PipelineCreateFlags::RAY_TRACING_SHADER_GROUP_HANDLE_CAPTURE_REPLAY_KHR);
        if builds_again {
            // SAFETY: the application's create info, its feedback just written by the first build.
            let feedback_of_the_first = unsafe { save_application_feedback(info) };
            let mut again = vk::Pipeline::null();
            match through(None, lap, &mut again) {
                Ok(built_again) if built_again.result == vk::Result::SUCCESS => {
                    // SAFETY: the pipeline the driver made first for this call, not yet the
                    // application's; the second takes its place.
                    unsafe { (dev.fns.destroy_pipeline)(dev.handle, *slot, b.allocator) };
                    *slot = again;
                    built = built_again;
                }
                failed => {
                    if again != vk::Pipeline::null() {
                        // SAFETY: a pipeline the driver made for this call, never handed out.
                        unsafe { (dev.fns.destroy_pipeline)(dev.handle, again, b.allocator) };
                    }
                    if let Some(saved) = &feedback_of_the_first {
                        // SAFETY: the records saved from this info before the second build.
                        unsafe { restore_application_feedback(info, saved) };
                    }
                    tracing::debug!(entry = %key.file_name(), result = ?failed.map(|f| f.result), "no second build through an empty cache; the entry stays as it is");
                    keep_entry = false;
                }
            }
        }
    }
    let outcome = match seeded.map(|(entry, _)| entry) {
        Some(entry) if hit => {
            // NVIDIA marks a library part or a ray-tracing pipeline it served valid without the
            // hit (found by the cache's size): the application's record says found all the same.
            if let Some(f) = &feedback {
                f.report_found(lap);
            }
            // Stamped by the writer thread: the time update leaves the application's thread.
            dev.writer.stamp(store.clone(), entry.into_stamp());
            Outcome::Found
        }
        seeded => {
            let data = unsafe { cache_data(dev, built.cache.cache) };
            if holds_more_than_header(&data) {
                // Framed once, for the identity's note, the twins' seed and the writer's queue.
                let framing = nvidia_cache::frame_bytes(&data).ok();
                let dictionary = framing.as_ref().map(|f| f.dictionary);
                // Data still carrying a dictionary the driver doubts (this build's, built again
                // or not, or one doubted by other builds where this one's answer went uncounted)
                // is neither written, nor noted, nor a twin's seed.
                let carries_doubted =
                    dev.dictionaries
                        .tally()
                        .withholds(dictionary, doubted, seeded_uncounted);
                if keep_entry && !carries_doubted {
                    dev.dictionaries
                        .note_written(&dev.writer, store, key.file_name(), dictionary);
                    // A build seeded with its twin's data holds it: only what another seed built
                    // seeds, or each twin's entry would carry every earlier one's. (A build seeded
                    // by its stages holds their data too, and its entry needs it: on the H200,
                    // entries cut to the records such builds added left 111-131 of pygfx's 641
                    // compiling again at the next launch.)
                    if twins_apply && !twin.as_ref().is_some_and(|t| t.whole) {
                        let seed = match &framing {
                            Some(f) => f.without_dictionary_in(&data),
                            None => data.clone(),
                        };
                        dev.twins.keep(key.spirv, stages(), seed);
                    }
                    b.write_entry(PayloadKind::Cache, data, framing);
                } else {
                    tracing::debug!(entry = %key.file_name(), "what the driver compiled still carries the dictionary it doubts; the entry stays as it is");
                }
                record_compiled(b);
            }
            if seeded.is_some() || already_asked || refused_unseen {
                tracing::debug!(entry = %key.file_name(), "the driver compiled a pipeline whose entry was whole");
                Outcome::Refused
            } else if twin.is_some() && hit {
                // Served from its twin's data (or its stages'), as a shared cache would have.
                Outcome::Shared
            } else {
                Outcome::Compiled
            }
        }
    };
    Kept::Made(built.result, outcome)
}

/// The loading marker of `entry`, held while the driver loads it: a crash inside blames this
/// entry. Test only: `PIPEKEEP_TEST_ABORT_IN_LOAD` aborts the process here, marker held.
pub(in crate::layer) fn hold_marker_for_load(
    store: &Store,
    entry: &FoundEntry,
) -> crate::store::LoadingMarker {
    let marker = store.hold_marker(entry);
    let aborts = match SETTINGS.test_abort_in_load.as_deref() {
        None => false,
        Some(link) if link.contains('/') => {
            store.entry_names_piece_file(&entry.name(), std::path::Path::new(link))
        }
        Some(_) => true,
    };
    if aborts {
        std::process::abort();
    }
    marker
}
