//! The `binary` backend: a found entry's binaries made into objects and the pipeline built from
//! them; a miss built as the application asked with the capture flag added, its binaries read
//! and kept; a miss the driver builds alike to one compiled earlier in the run made from that
//! one's binaries. No binary object outlives the call that made it.

use super::*;

/// Why a found entry of binaries made no pipeline; the caller then compiles.
pub(super) enum NotFromBinaries {
    /// The driver refused the binaries or the build (counted: a driver that refuses them all
    /// switches the device to `cache`).
    Refused,
    /// The driver keys this create info otherwise than the one the binaries were built from
    /// (device state its global key does not hold, such as `smoothLines` on RADV): another
    /// pipeline's code, never loaded; compiled and kept again.
    OtherDriverKey,
    /// Its create info needs a change for a build from binaries and carries a structure the
    /// layer cannot copy (`chain_copy`): compiled as asked.
    NotCopied,
}

/// Why binaries made into objects made no pipeline.
#[derive(Debug)]
pub(super) enum FromObjectsFailed {
    /// The driver's answer.
    Driver(vk::Result),
    /// The create info could not be copied as a build from binaries needs.
    NotCopied,
}

/// `binary`, found: the entry's binaries made into objects, the pipeline built from them, the
/// objects destroyed, where the driver keys the create info as it keyed the one they were built
/// from.
pub(super) unsafe fn build_from_binaries<T: PipelineInfo>(
    b: &Build<'_, T>,
    fns: &BinaryFns,
    entry: &FoundEntry,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Result<Kept, NotFromBinaries> {
    if SETTINGS.test_refuse_binaries {
        // As NVIDIA's driver does with binaries another process wrote.
        b.dev.binaries_refused();
        return Err(NotFromBinaries::Refused);
    }
    // The driver's key for this create info, where it gives keys (an entry it kept carries one).
    // SAFETY: the application's create info, valid for the call.
    let now = unsafe { sharing::driver_key(b.dev.handle, fns, (b.info as *const T).cast()) };
    let marker = hold_marker_for_load(b.store, entry);
    let inside = enter_found_gate(b.dev);
    let loaded = entry
        .with_data(|data| {
            // Checked at lookup.
            let parsed = crate::store::binaries::parse(data).ok()?;
            let kept_under = parsed.driver_key;
            if (fns.get_pipeline_key.is_some() || !kept_under.is_empty())
                && now.as_ref().map(sharing::DriverKey::bytes) != Some(kept_under)
            {
                return Some(None);
            }
            // SAFETY: the device takes binaries (`fns` were loaded for it).
            Some(Some(unsafe {
                binaries::load(b.dev, fns, &parsed.binaries)
            }))
        })
        .ok_or(NotFromBinaries::Refused)?;
    let Some(loaded) = loaded else {
        tracing::debug!(entry = %b.key.file_name(), "the kept binaries were built under another driver key for this create info (device state the key does not hold); compiling");
        return Err(NotFromBinaries::OtherDriverKey);
    };
    let objects = match loaded {
        Ok(o) => o,
        Err(e) => {
            tracing::debug!(entry = %b.key.file_name(), result = ?e, "the driver refused the kept binaries");
            b.dev.binaries_failed(e);
            return Err(NotFromBinaries::Refused);
        }
    };
    lap.to(Phase::Cache);
    // SAFETY: binaries made for this build.
    let built = unsafe { build_from_objects(b, objects, lap, slot) };
    drop(inside);
    drop(marker);
    let r = match built {
        Ok(r) => r,
        Err(FromObjectsFailed::NotCopied) => {
            tracing::debug!(entry = %b.key.file_name(), "a structure the layer cannot copy stands where a build from binaries needs a change; compiling as asked");
            return Err(NotFromBinaries::NotCopied);
        }
        Err(FromObjectsFailed::Driver(e)) => {
            tracing::debug!(entry = %b.key.file_name(), result = ?e, "the driver would not build from the kept binaries");
            b.dev.binaries_failed(e);
            return Err(NotFromBinaries::Refused);
        }
    };
    // SAFETY: the application's chain.
    unsafe { report_found_to_the_application(b.info, lap) };
    b.dev.writer.stamp(b.store.clone(), entry.to_stamp());
    Ok(Kept::Made(r, Outcome::Found))
}

/// Builds the pipeline from binary objects made for it (chained in front, no cache: the binaries
/// are the pipeline), destroyed after. `Err` with the driver's answer where it made none, or
/// where the create info cannot be copied as such a build needs (nothing asked of the driver).
///
/// # Safety
/// `objects` must be binaries of `b`'s device.
pub(super) unsafe fn build_from_objects<T: PipelineInfo>(
    b: &Build<'_, T>,
    objects: binaries::Objects<'_>,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Result<vk::Result, FromObjectsFailed> {
    // What a build from binaries may not carry, left out of copies (`chain_copy`).
    let (mut copies, mut stages) = (chain_copy::ChainCopy::default(), Vec::new());
    let mut info = *b.info;
    // SAFETY: the application's create info; the copies outlive the build.
    let app_chain = unsafe { chain_copy::without_fail_on_compile(info.p_next(), &mut copies) }
        .map_err(|_| FromObjectsFailed::NotCopied)?;
    unsafe { info.drop_identifiers(&mut copies, &mut stages) }
        .map_err(|_| FromObjectsFailed::NotCopied)?;
    // SAFETY: the application's create info.
    unsafe { clear_application_feedback(b.info) };
    let binary_info = binaries::info_for(&objects, app_chain);
    // SAFETY: the layer's binaries and copies, alive until after the build.
    let r = unsafe { build_with_in_front(b, &info, &binary_info, lap, slot) };
    drop(objects);
    if r != vk::Result::SUCCESS || *slot == vk::Pipeline::null() {
        *slot = vk::Pipeline::null();
        return Err(FromObjectsFailed::Driver(r));
    }
    Ok(r)
}

/// `binary`, a miss the driver builds as it built a pipeline compiled earlier in this run (the
/// same driver key, `sharing`): made from that pipeline's binaries and written as this one's
/// entry, as an application's own cache would have served it. `None` where the driver would
/// not; the caller then compiles.
pub(super) unsafe fn build_from_shared<T: PipelineInfo>(
    b: &Build<'_, T>,
    fns: &BinaryFns,
    driver_key: &sharing::DriverKey,
    captured: &binaries::Captured,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Option<Kept> {
    let parts: Vec<crate::store::binaries::Binary<'_>> = captured
        .iter()
        .map(|(key, data)| crate::store::binaries::Binary { key, data })
        .collect();
    // SAFETY: the device takes binaries (`fns` were loaded for it); these are its own.
    let loaded = unsafe { binaries::load(b.dev, fns, &parts) }.map_err(FromObjectsFailed::Driver);
    let built = loaded.and_then(|objects| {
        lap.to(Phase::Cache);
        // SAFETY: binaries made for this build.
        unsafe { build_from_objects(b, objects, lap, slot) }
    });
    let Ok(r) = built else {
        tracing::debug!(entry = %b.key.file_name(), result = ?built, "the driver would not build from a pipeline's binaries of the same driver key; compiling");
        return None;
    };
    // SAFETY: the application's chain.
    unsafe { report_made_to_the_application(b.info, lap) };
    keep_binaries(b, Some(driver_key), captured);
    Some(Kept::Made(r, Outcome::Shared))
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
pub(super) unsafe fn build_capturing<T: PipelineInfo>(
    b: &Build<'_, T>,
    fns: &BinaryFns,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> Kept {
    // Kept with the entry, and names the builds this one may share.
    // SAFETY: the application's create info, valid for the call.
    let driver_key = unsafe { sharing::driver_key(b.dev.handle, fns, (b.info as *const T).cast()) };
    // Shared only on the application's threads: the rebuild's take no lock an application
    // thread takes.
    let shares = SETTINGS.share_builds && !b.rebuilding;
    lap.to(Phase::Lookup);
    if let Some(key) = driver_key.as_ref().filter(|_| shares) {
        if let Some(captured) = b.dev.shared_builds.get(key) {
            // SAFETY: as for this function.
            if let Some(made) = unsafe { build_from_shared(b, fns, key, &captured, lap, slot) } {
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
    let r = unsafe { build_with_in_front(b, b.info, &flags2, lap, slot) };
    if r != vk::Result::SUCCESS || *slot == vk::Pipeline::null() {
        return Kept::Made(r, Outcome::PassedThrough);
    }
    // SAFETY: the pipeline just made with the capture flag.
    match unsafe { binaries::capture(b.dev, fns, *slot) } {
        // A driver that gives keys and gave none for this create info: nothing to check a later
        // load against, so not kept.
        Ok(_) if fns.get_pipeline_key.is_some() && driver_key.is_none() => {
            tracing::debug!(entry = %b.key.file_name(), "the driver gave no key for this create info; not kept")
        }
        Ok(captured) => {
            keep_binaries(b, driver_key.as_ref(), &captured);
            if let Some(key) = driver_key.filter(|_| shares) {
                b.dev.shared_builds.hold(key, Arc::new(captured));
            }
        }
        Err(e) => {
            tracing::debug!(entry = %b.key.file_name(), result = ?e, "no binaries from a compiled pipeline; not kept")
        }
    }
    Kept::Made(r, Outcome::Compiled)
}

/// Builds `info` (the application's create info or the layer's copy of it) with `front` chained
/// before its own structures (whose `pNext` must already be `info`'s chain), through no pipeline
/// cache, with the application's allocator.
///
/// # Safety
/// `info` must be valid and `front` a valid structure extending it, both alive for the call.
pub(super) unsafe fn build_with_in_front<T: PipelineInfo, S>(
    b: &Build<'_, T>,
    info: &T,
    front: &S,
    lap: &mut Lap,
    slot: &mut vk::Pipeline,
) -> vk::Result {
    let mut with = *info;
    with.set_p_next((front as *const S).cast());
    // Made from binaries nothing is compiled, and the spec forbids asking otherwise
    // (VUID-vkCreateGraphicsPipelines-binaryCount-09622); in front of a capture the flags are
    // the layer's flags2 structure's, and the legacy ones are ignored.
    with.set_legacy_flags(
        with.legacy_flags() & !vk::PipelineCreateFlags::FAIL_ON_PIPELINE_COMPILE_REQUIRED,
    );
    // SAFETY: as the caller vouches.
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

/// Queues a pipeline's binaries as its entry, with the driver's key for its create info.
pub(super) fn keep_binaries<T: PipelineInfo>(
    b: &Build<'_, T>,
    driver_key: Option<&sharing::DriverKey>,
    captured: &binaries::Captured,
) {
    let payload = crate::store::binaries::encode(
        driver_key.map_or(&[][..], sharing::DriverKey::bytes),
        captured.iter().map(|(k, d)| (k.as_slice(), d.as_slice())),
    );
    b.write_entry(PayloadKind::Binaries, payload, None);
    record_compiled(b);
}
