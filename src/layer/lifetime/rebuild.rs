//! The background rebuild: after a driver change, or where a rebuild a device cut short is owed,
//! the title's record replayed through this layer on the application's own device, on idle
//! threads, only the pipelines of this device's configuration; stopped at `vkDestroyDevice`.

use super::*;

/// After a driver change (opening dropped another driver's directory of this device), or where
/// the record owes a rebuild (`record.pending`: a rebuild a device cut short),
/// rebuilds the title's record into the driver's store on threads of the layer's own at idle
/// priority (at most half the cores), through this layer's own commands on the application's
/// device: what the application builds meanwhile is found or written as ever, and what the
/// rebuild reaches first is found by it. Stops after the current pipeline
/// at `vkDestroyDevice`; what is left is for the next run (the record stays marked) or
/// `pipekeep rebuild`.
pub(super) fn start_rebuild(dev: &Arc<DeviceData>, store: &crate::store::Store) {
    if SETTINGS.rebuild == crate::settings::RebuildSetting::Off {
        return;
    }
    let Some(record) = dev.record.clone() else {
        return;
    };
    let owed = dev.rebuild_owed_at_opening.load(Ordering::Acquire) && record.path().is_file();
    if dev.stop.load(Ordering::Acquire) || !owed || !store.take_the_rebuild() {
        return;
    }
    let rebuilding = dev.clone();
    let spawned = std::thread::Builder::new()
        .name(crate::layer::idle::REBUILD_THREAD.into())
        .spawn(move || {
            guarded(
                "background rebuild",
                || {
                    rebuild_worker_start(&rebuilding);
                    rebuild(&rebuilding, &record);
                },
                || (),
            )
        });
    match spawned {
        Ok(handle) => *dev.rebuilder.locked() = Some(handle),
        Err(e) => tracing::debug!(error = %e, "no rebuild thread"),
    }
}

/// Whether every one of `pipelines` (other configurations' of the record, which this device's
/// rebuild leaves to theirs) has an entry in this device's identity directory: then the record
/// owes nothing more here.
pub(super) fn kept_here(dev: &DeviceData, pipelines: &[u64]) -> bool {
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

/// One pass over the record: once the application pauses, every recorded pipeline through this
/// layer (found, or compiled and written).
pub(super) fn rebuild(dev: &Arc<DeviceData>, file: &crate::replay::record::RecordFile) {
    if !wait_for_a_quiet_application(dev) {
        tracing::info!("background rebuild ended: the device went before it began");
        return;
    }
    let record = file.path();
    // A record made but not yet written (its writer at idle priority, starved on a loaded
    // machine) reads as empty: what is still in flight is left to the next pass.
    let (catalog, read_len) = match crate::replay::record::read(record) {
        Ok((entries, len)) => (crate::replay::objects::Catalog::from_entries(entries), len),
        Err(e) => {
            tracing::warn!(record = %record.display(), error = %e, "the record cannot be read; no rebuild");
            return;
        }
    };
    // Only this device's configuration: another's pipelines replayed here would key as this
    // device's (entries no run looks up, and recorded again under this configuration).
    let (catalog, others) = catalog.into_configuration(
        &crate::replay::record::configuration_hashes(dev.record_app.state()),
    );
    let pipelines = catalog.pipelines();
    tracing::info!(record = %record.display(), pipelines, "the driver changed (or a rebuild is owed): rebuilding the title's record in the background");
    // Loading asks the driver for its commands: only while the device lets this thread in.
    let Some(inside) = dev.driver_gate.enter() else {
        tracing::info!("background rebuild ended: the device went before it began");
        return;
    };
    // SAFETY: this layer's own commands for the application's device (taken from its data, not
    // from the device map, which `vkDestroyDevice` empties before it joins this thread), and the
    // next layer's for the rest; the device lives until that join, and the rebuild calls them
    // only through its driver gate.
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
    // Ray-tracing pipelines through this layer's own intercept, where the device has the
    // command (the application enabled VK_KHR_ray_tracing_pipeline); else they are skipped.
    // SAFETY: as above; the command of that name has that signature.
    let ray_tracing = unsafe { command_of(dev, c"vkCreateRayTracingPipelinesKHR") }.map(|f| unsafe {
        std::mem::transmute::<unsafe extern "system" fn(), vk::PFN_vkCreateRayTracingPipelinesKHR>(
            f,
        )
    });
    // Calls of shader objects through this layer's own intercept, where the device has them.
    // SAFETY: as above.
    let shader_objects =
        unsafe { crate::replay::replayer::ShaderCommands::load(|name| command_of(dev, name)) };
    drop(inside);
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
        return;
    }
    if dev.rebuild_stop.load(Ordering::Acquire) {
        tracing::info!(
            made = 0,
            of = pipelines,
            "background rebuild ended: the device went before it began"
        );
        return;
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
        // Each pipeline's calls (its objects, the pipeline, their destruction) while the device
        // lets the rebuild in: none once it ended, and its end waits for the one being made.
        enter_device: Some({
            let gate = dev.driver_gate.clone();
            crate::replay::replayer::EnterDevice(Arc::new(move || {
                gate.enter()
                    .map(|inside| Box::new(inside) as Box<dyn std::any::Any + Send>)
            }))
        }),
        samplers: Some(sampler_budget(dev)),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    // SAFETY: as above.
    let summary = unsafe {
        crate::replay::replayer::replay_on_device(
            device,
            ray_tracing,
            shader_objects,
            &catalog,
            &options,
        )
    };
    let no_room = summary
        .skipped
        .get(crate::replay::replayer::NO_ROOM_FOR_SAMPLERS)
        .copied()
        .unwrap_or(0);
    let too_many = summary
        .skipped
        .get(crate::replay::replayer::MORE_SAMPLERS_THAN_ALLOWED)
        .copied()
        .unwrap_or(0);
    if no_room + too_many > 0 {
        // Once a pass, whatever the count.
        tracing::warn!(
            no_room,
            too_many,
            max_samplers = dev.max_samplers,
            "the background rebuild skipped pipelines whose immutable samplers the device has no room for beside the application's"
        );
    }
    // Other configurations' pipelines are their own devices' to rebuild: the mark stays until
    // they have entries here too.
    let others_kept = others.is_empty() || kept_here(dev, &others);
    // Pipelines left for the device's lack of samplers may find room in a later run.
    if others_kept && no_room == 0 && !dev.rebuild_stop.load(Ordering::Acquire) {
        // Every pipeline of the record as read went through the layer (found, or compiled and
        // written; one the driver fails stays failed): nothing is left for the next run, unless
        // the record grew meanwhile.
        if let Err(e) = file.clear_pending_unless_grown(read_len) {
            tracing::debug!(record = %record.display(), error = %e, "the record's pending mark stays");
        }
    }
    tracing::info!(made = summary.made, of = pipelines, skipped = summary.skipped_total(), took_ms = %format_args!("{:.1}", started.elapsed().as_secs_f64() * 1e3), "background rebuild ended");
}

/// The share of `maxSamplerAllocationCount` the rebuild may hold at once, and left free for the
/// application beyond what the device holds when the rebuild makes more: a sixteenth each (250 of
/// NVIDIA's 4,000; the spec's least is 4,000). A pipeline names a few at most, and the rebuild
/// holds only those of the pipelines it is building.
pub(super) const SAMPLER_SHARE: u32 = 16;

/// The rebuild's budget of immutable samplers on the application's device: at most
/// [`SAMPLER_SHARE`]'s part of the limit at once, and more only where the device, with every
/// sampler it holds (the application's and the rebuild's, which the layer tracks as each is made
/// and destroyed), keeps another such part free for the application.
pub(super) fn sampler_budget(dev: &Arc<DeviceData>) -> crate::replay::replayer::SamplerBudget {
    let limit = dev.max_samplers as usize;
    let share = limit / SAMPLER_SHARE as usize;
    let dev = Arc::clone(dev);
    crate::replay::replayer::SamplerBudget {
        most: share,
        room: Arc::new(move |more| {
            dev.objects.samplers.len() + dev.rebuild_objects.samplers.len() + more + share <= limit
        }),
    }
}

/// Each rebuild thread: idle priority, its pipelines counted apart, and its id kept so that
/// `vkDestroyDevice` can raise it back.
pub(super) fn rebuild_worker_start(dev: &DeviceData) {
    crate::layer::idle::lower_this_threads_priority("rebuild");
    crate::layer::idle::mark_rebuild_thread();
    dev.rebuild_threads.add_this_thread();
}

/// How long the application must have built no pipeline before the background rebuild goes on:
/// what the application builds meanwhile it builds anyway, and the rebuild takes the cores it
/// leaves. (Beside the application's own builds the rebuild cost its first launch after a
/// driver change 1.01-1.05x against 1.03-1.09x on 2 cores, pygfx: BENCHMARKS.md.)
pub(super) const REBUILD_AFTER_QUIET: std::time::Duration = std::time::Duration::from_millis(100);

/// Waits until the application has built no pipeline for [`REBUILD_AFTER_QUIET`]; `false` when
/// the device goes first.
pub(super) fn wait_for_a_quiet_application(dev: &DeviceData) -> bool {
    dev.app_activity
        .wait_until_quiet(REBUILD_AFTER_QUIET, &dev.rebuild_stop)
}
