//! The store opened on a thread of the layer's own while the application loads its shaders:
//! published at once, then brought within its bound, the record compacted to its share, the
//! entries the last run used read ahead, and another driver's entries dropped in a pause.

use super::*;

/// Opens the device's store on a thread of the layer's own while the application loads its
/// shaders, so the opening (a sweep, and a stat of every entry for the bound) is not paid inside
/// the first pipeline's creation. A pipeline that comes first waits for the same opening. The
/// thread then reads ahead the entries the last run used, at idle priority (a lookup that comes
/// first reads its entry itself), until they are read or the device ends: at once in the order
/// the last run left (`use-order`), the bound after, in the application's first pause; else
/// after the bound, in its stamps' order.
pub(super) fn open_ahead(data: &Arc<DeviceData>) {
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
pub(super) fn open_then_tidy(dev: &Arc<DeviceData>) {
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
    store.mark_title_used();
    if !stopped() {
        crate::layer::pipelines::prime_dictionary(dev);
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
        store.keep_library_within(SETTINGS.library_max_bytes);
    } else {
        // The bound is owed once the store is open, even to a device destroyed meanwhile (its
        // destruction joins this thread): a run that writes nothing checks it nowhere else, and
        // a lowered bound must hold after it.
        let listed = tidy_after_opening(dev, store);
        // A device destroyed by now leaves the reading ahead to the next run.
        if stopped() {
            // Owed too (a short process would otherwise never keep it): a sum of small notes,
            // and a walk only where they say the library is over its bound.
            store.keep_library_within(SETTINGS.library_max_bytes);
            return;
        }
        start_rebuild(dev, store);
        if SETTINGS.read_ahead > 0 && !stopped() {
            read_ahead(dev, store, AheadOrder::LastUse(listed));
        }
        // After this title's reading ahead, which it would delay.
        store.keep_library_within(SETTINGS.library_max_bytes);
    }
    drop_other_drivers_in_a_pause(dev, store);
}

/// What the opening thread does once the store is published: the title brought within its
/// bound; the record compacted where the bound left little of it. Returns what the title's bound
/// listed, for reading ahead. (The library's own bound, `PIPEKEEP_LIBRARY_MAX_BYTES`, this title
/// the last to give anything up, is kept after the reading ahead.)
pub(super) fn tidy_after_opening(
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
            // (A record owed a rebuild is not compacted yet, nor one this process appended to
            // before the opening's pass: neither takes the entries' room, or the bound would
            // count it whole and evict every entry for it.)
            let not_compacted = record.is_pending() || record.appended_here();
            if bytes > crate::store::bound::record_share(store.max_bytes()) && !not_compacted {
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
pub(super) fn drop_other_drivers_in_a_pause(dev: &DeviceData, store: &Store) {
    if store.has_other_drivers_to_drop() && wait_for_a_quiet_application(dev) {
        crate::layer::idle::lower_this_threads_priority_but_not_its_reads("store opening");
        store.drop_other_drivers(&dev.stop);
    }
}

/// Reads ahead, at idle priority, the entries the last run used, until they are read or the
/// device ends.
pub(super) fn read_ahead(dev: &DeviceData, store: &Store, order: AheadOrder<'_>) {
    crate::layer::idle::lower_this_threads_priority_but_not_its_reads("read ahead");
    let started = std::time::Instant::now();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let r = store.read_ahead(
        order,
        SETTINGS.read_ahead,
        (cores / 4).clamp(1, 4),
        &dev.stop,
    );
    tracing::debug!(held = r.held, held_bytes = r.held_bytes, claimed_first = r.claimed_first, took_ms = %format_args!("{:.3}", started.elapsed().as_secs_f64() * 1e3), "read ahead");
}

/// Brings the title's record within its share of the bound (a quarter), where it has grown past
/// it, dropping pipelines in the entries' order of use: those the bound evicted first, then the
/// last used, so a boot's pipelines are kept longest in the record as in the store. A record
/// within its share stays whole whatever became of its entries. `kept`: every entry and piece of
/// the title, as the bound just listed them (their stamps are the order of use).
pub(super) fn compact_record(
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
