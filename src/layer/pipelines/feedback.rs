//! Creation feedback through the layer: the application's own `VkPipelineCreationFeedbackCreateInfo`
//! receives the driver's feedback (a pipeline found in the store reports a cache hit, in a
//! record made whole),
//! and where the application chained none, the layer's own records tell found from compiled
//! (SPEC "Building a pipeline", step 4).

use super::*;

/// Creation feedback for one build: the application's own struct where it chained one (it then
/// receives the driver's feedback unchanged), else records of the layer's where feedback is
/// valid. The chained `VkPipelineCreationFeedbackCreateInfo` is made by [`Feedback::chain`] and
/// lives beside this, never inside it: nothing here points into itself.
pub(super) struct Feedback {
    pipeline: vk::PipelineCreationFeedback,
    stages: Vec<vk::PipelineCreationFeedback>,
    apps: *mut vk::PipelineCreationFeedback,
}

impl Feedback {
    pub(super) unsafe fn for_info<T: PipelineInfo>(dev: &DeviceData, info: &T) -> Option<Feedback> {
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
            apps: std::ptr::null_mut(),
        })
    }

    /// The layer's feedback struct for `info`, pointing at these records (`None` where the
    /// application chained its own). It must be chained in front of `info` by [`chained`] and
    /// outlive the build.
    pub(super) fn layer_info<T: PipelineInfo>(
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

    /// A found pipeline: the application's record, where it gave one, reports the hit
    /// ([`report_found`]).
    pub(super) fn report_found(&self, lap: &Lap) {
        // SAFETY: the application's output record, found in its chain by [`Feedback::for_info`]
        // and written by the driver during the build; nothing else borrows it now.
        if let Some(record) = unsafe { self.apps.as_mut() } {
            report_found(record, lap.so_far_ns());
        }
    }

    /// `Some(hit)` where the driver marked the feedback valid.
    pub(super) fn cache_hit(&self) -> Option<bool> {
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
pub(super) unsafe fn applications_feedback<T: PipelineInfo>(
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
pub(super) fn chained<T: PipelineInfo>(
    info: &T,
    fb: Option<&vk::PipelineCreationFeedbackCreateInfo>,
) -> T {
    let mut with = *info;
    if let Some(fb) = fb {
        with.set_p_next((fb as *const vk::PipelineCreationFeedbackCreateInfo).cast());
    }
    with
}

/// The application's own feedback records, where it chained a feedback struct: its pipeline
/// record and its stage records (none where it gave a count of 0 or no array). A pipeline record
/// the application placed inside its stage array is reached through the stages alone, never
/// borrowed twice.
struct ApplicationRecords<'a> {
    pipeline: Option<&'a mut vk::PipelineCreationFeedback>,
    stages: &'a mut [vk::PipelineCreationFeedback],
}

/// # Safety
/// `info`'s chain must be valid; a feedback structure in it points at writable records, none
/// of them borrowed elsewhere while the result lives.
unsafe fn application_records<T: PipelineInfo>(info: &T) -> Option<ApplicationRecords<'_>> {
    // SAFETY: as the caller vouches.
    let app = unsafe { applications_feedback(info) }?;
    let (count, at) = (
        app.pipeline_stage_creation_feedback_count as usize,
        app.p_pipeline_stage_creation_feedbacks,
    );
    let stages = if count == 0 || at.is_null() {
        &mut []
    } else {
        // SAFETY: the application's array of `count` output records.
        unsafe { std::slice::from_raw_parts_mut(at, count) }
    };
    let record = app.p_pipeline_creation_feedback;
    let among_stages = overlaps(record, stages);
    Some(ApplicationRecords {
        // SAFETY: the application's output record, where it gave one apart from its stages.
        pipeline: if among_stages {
            None
        } else {
            unsafe { record.as_mut() }
        },
        stages,
    })
}

/// Whether `record`'s bytes overlap any of `stages`'.
fn overlaps(
    record: *const vk::PipelineCreationFeedback,
    stages: &[vk::PipelineCreationFeedback],
) -> bool {
    let size = std::mem::size_of::<vk::PipelineCreationFeedback>();
    let (at, from) = (record as usize, stages.as_ptr() as usize);
    !stages.is_empty() && at < from + std::mem::size_of_val(stages) && from < at + size
}

/// A pipeline made from a kept entry reports a cache hit to the application's own creation
/// feedback, as a cache of its own would have (SPEC, step 4). Where the driver left the record
/// not valid (RADV writes none for a pipeline built from binaries), the layer makes it valid with
/// its own time for the pipeline (`lap` so far: from the key to the driver's build): a record
/// marked valid is whole.
///
/// # Safety
/// `info`'s chain must be valid; a feedback structure in it points at writable records.
pub(super) unsafe fn report_found_to_the_application<T: PipelineInfo>(info: &T, lap: &Lap) {
    // SAFETY: as the caller vouches.
    unsafe { report_to_the_application(info, lap, true) }
}

/// A miss made from the binaries of a pipeline compiled earlier in the run (`sharing`): the
/// driver writes no record for a build from binaries, so the record is made valid with the
/// layer's time, as the driver's own for a compile would be; no hit (SPEC step 4 gives that only
/// to a pipeline found in the store).
///
/// # Safety
/// As [`report_found_to_the_application`].
pub(super) unsafe fn report_made_to_the_application<T: PipelineInfo>(info: &T, lap: &Lap) {
    // SAFETY: as the caller vouches.
    unsafe { report_to_the_application(info, lap, false) }
}

/// # Safety
/// As [`report_found_to_the_application`].
unsafe fn report_to_the_application<T: PipelineInfo>(info: &T, lap: &Lap, hit: bool) {
    // SAFETY: as the caller vouches: the application's output record, where it gave one (its
    // stage records are not touched, so it is borrowed once wherever it lies).
    let record = unsafe { applications_feedback(info) }
        .and_then(|app| unsafe { app.p_pipeline_creation_feedback.as_mut() });
    if let Some(record) = record {
        report(record, lap.so_far_ns(), hit);
    }
}

/// A found pipeline's record: the hit, in a record made whole.
fn report_found(record: &mut vk::PipelineCreationFeedback, took_ns: u64) {
    report(record, took_ns, true);
}

fn report(record: &mut vk::PipelineCreationFeedback, took_ns: u64, hit: bool) {
    if !record
        .flags
        .contains(vk::PipelineCreationFeedbackFlags::VALID)
    {
        *record = vk::PipelineCreationFeedback {
            flags: vk::PipelineCreationFeedbackFlags::VALID,
            duration: took_ns,
        };
    }
    if hit {
        record.flags |= vk::PipelineCreationFeedbackFlags::APPLICATION_PIPELINE_CACHE_HIT;
    }
}

/// Clears the flags of the application's feedback records before a build from binaries: they
/// are outputs, but the spec checks them going in (a cache hit set there is invalid with
/// binaries, VUID-vkCreateGraphicsPipelines-binaryCount-09620), and the layer set one on an
/// earlier found pipeline of a record the application may pass again.
///
/// # Safety
/// `info` must be the application's valid create info.
pub(super) unsafe fn clear_application_feedback<T: PipelineInfo>(info: &T) {
    // SAFETY: as the caller vouches: the application's output records, writable.
    let Some(records) = (unsafe { application_records(info) }) else {
        return;
    };
    let empty = vk::PipelineCreationFeedbackFlags::empty();
    for record in records
        .pipeline
        .into_iter()
        .chain(records.stages.iter_mut())
    {
        record.flags = empty;
    }
}

/// The application's own feedback records as a build left them, put back where a later build of
/// the layer's (a second one, which failed) wrote over them: they then describe the pipeline the
/// application gets.
#[derive(Debug)]
pub(super) struct SavedFeedback {
    pipeline: Option<vk::PipelineCreationFeedback>,
    stages: Vec<vk::PipelineCreationFeedback>,
}

/// # Safety
/// `info` must be the application's valid create info, its feedback records written by a build.
pub(super) unsafe fn save_application_feedback<T: PipelineInfo>(info: &T) -> Option<SavedFeedback> {
    // SAFETY: as the caller vouches: the application's output records.
    let records = unsafe { application_records(info) }?;
    Some(SavedFeedback {
        pipeline: records.pipeline.map(|r| *r),
        stages: records.stages.to_vec(),
    })
}

/// # Safety
/// As [`save_application_feedback`], `saved` taken from the same `info`.
pub(super) unsafe fn restore_application_feedback<T: PipelineInfo>(
    info: &T,
    saved: &SavedFeedback,
) {
    // SAFETY: as the caller vouches: the application's output records, writable.
    let Some(records) = (unsafe { application_records(info) }) else {
        return;
    };
    if let (Some(record), Some(was)) = (records.pipeline, saved.pipeline) {
        *record = was;
    }
    for (record, was) in records.stages.iter_mut().zip(&saved.stages) {
        *record = *was;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(
        flags: vk::PipelineCreationFeedbackFlags,
        duration: u64,
    ) -> vk::PipelineCreationFeedback {
        vk::PipelineCreationFeedback { flags, duration }
    }

    #[test]
    fn a_found_pipeline_reports_a_hit_in_a_record_marked_valid() {
        let (valid, hit) = (
            vk::PipelineCreationFeedbackFlags::VALID,
            vk::PipelineCreationFeedbackFlags::APPLICATION_PIPELINE_CACHE_HIT,
        );
        // The driver wrote the record: its duration stays.
        let mut written = record(valid, 7);
        report_found(&mut written, 99);
        assert_eq!((written.flags, written.duration), (valid | hit, 7));
        // The driver wrote none (RADV from binaries): the layer's time, marked valid.
        let mut unwritten = record(Default::default(), 0);
        report_found(&mut unwritten, 99);
        assert_eq!((unwritten.flags, unwritten.duration), (valid | hit, 99));
        // A miss made from a twin's binaries: valid, the layer's time, no hit.
        let mut shared = record(Default::default(), 0);
        report(&mut shared, 42, false);
        assert_eq!((shared.flags, shared.duration), (valid, 42));
    }

    #[test]
    fn the_applications_feedback_is_put_back_as_the_first_build_left_it() {
        let valid = vk::PipelineCreationFeedbackFlags::VALID;
        let mut pipeline = record(valid, 7);
        let mut stages = [record(valid, 3)];
        let chain = vk::PipelineCreationFeedbackCreateInfo {
            p_pipeline_creation_feedback: &mut pipeline,
            pipeline_stage_creation_feedback_count: 1,
            p_pipeline_stage_creation_feedbacks: stages.as_mut_ptr(),
            ..Default::default()
        };
        let info = vk::ComputePipelineCreateInfo {
            p_next: (&chain as *const vk::PipelineCreationFeedbackCreateInfo).cast(),
            ..Default::default()
        };
        // SAFETY: the chain above, alive for the test.
        let saved = unsafe { save_application_feedback(&info) }.expect("chained");
        // SAFETY: the records the chain points at; a failed second build wrote over them.
        unsafe {
            *chain.p_pipeline_creation_feedback = record(Default::default(), 0);
            *chain.p_pipeline_stage_creation_feedbacks = record(Default::default(), 0);
            restore_application_feedback(&info, &saved);
        }
        assert_eq!((pipeline.flags, pipeline.duration), (valid, 7));
        assert_eq!((stages[0].flags, stages[0].duration), (valid, 3));

        // No stage records (a count of 0), or no feedback chained at all.
        let no_stages = vk::PipelineCreationFeedbackCreateInfo {
            p_pipeline_creation_feedback: &mut pipeline,
            ..Default::default()
        };
        let info = vk::ComputePipelineCreateInfo {
            p_next: (&no_stages as *const vk::PipelineCreationFeedbackCreateInfo).cast(),
            ..Default::default()
        };
        // SAFETY: the chain above.
        let saved = unsafe { save_application_feedback(&info) }.expect("chained");
        assert!(saved.stages.is_empty());
        // SAFETY: as above.
        unsafe { restore_application_feedback(&info, &saved) };
        let unchained = vk::ComputePipelineCreateInfo::default();
        // SAFETY: an empty chain.
        assert!(unsafe { save_application_feedback(&unchained) }.is_none());
    }

    #[test]
    fn a_found_pipeline_is_reported_through_the_chain_only_where_a_record_was_given() {
        let (valid, hit) = (
            vk::PipelineCreationFeedbackFlags::VALID,
            vk::PipelineCreationFeedbackFlags::APPLICATION_PIPELINE_CACHE_HIT,
        );
        let mut pipeline = record(Default::default(), 0);
        let given = vk::PipelineCreationFeedbackCreateInfo {
            p_pipeline_creation_feedback: &mut pipeline,
            ..Default::default()
        };
        let info = vk::ComputePipelineCreateInfo {
            p_next: (&given as *const vk::PipelineCreationFeedbackCreateInfo).cast(),
            ..Default::default()
        };
        let lap = Lap::charged(Phase::Key, std::time::Duration::from_millis(5));
        // SAFETY: the chain above, alive for the test.
        unsafe { report_found_to_the_application(&info, &lap) };
        assert_eq!(pipeline.flags, valid | hit);
        assert!(pipeline.duration >= 5_000_000, "the layer's time so far");

        // A NULL pipeline record (invalid usage, taken all the same), or no feedback chained:
        // nothing is written, nothing read (it fails by crashing).
        let none_given = vk::PipelineCreationFeedbackCreateInfo::default();
        let info = vk::ComputePipelineCreateInfo {
            p_next: (&none_given as *const vk::PipelineCreationFeedbackCreateInfo).cast(),
            ..Default::default()
        };
        // SAFETY: the chain above; its record pointer is NULL.
        unsafe { report_found_to_the_application(&info, &lap) };
        // SAFETY: an empty chain.
        unsafe { report_found_to_the_application(&vk::ComputePipelineCreateInfo::default(), &lap) };
    }

    #[test]
    fn a_pipeline_record_inside_the_stage_array_is_reached_once() {
        let valid = vk::PipelineCreationFeedbackFlags::VALID;
        let mut records = [record(valid, 1), record(valid, 2)];
        let at = records.as_mut_ptr();
        let chain = vk::PipelineCreationFeedbackCreateInfo {
            // SAFETY: the second of the two records above.
            p_pipeline_creation_feedback: unsafe { at.add(1) },
            pipeline_stage_creation_feedback_count: 2,
            p_pipeline_stage_creation_feedbacks: at,
            ..Default::default()
        };
        let info = vk::ComputePipelineCreateInfo {
            p_next: (&chain as *const vk::PipelineCreationFeedbackCreateInfo).cast(),
            ..Default::default()
        };
        {
            // SAFETY: the chain above, alive for the test.
            let parts = unsafe { application_records(&info) }.expect("chained");
            assert!(parts.pipeline.is_none(), "borrowed through the stages");
            assert_eq!(parts.stages.len(), 2);
        }
        // SAFETY: as above.
        unsafe { clear_application_feedback(&info) };
        assert!(records.iter().all(|r| r.flags.is_empty()));
    }

    #[test]
    fn a_record_overlapping_a_stage_record_by_some_bytes_counts_as_among_them() {
        let records = [record(Default::default(), 0); 3];
        let stages = &records[1..];
        let before = records[..1].as_ptr();
        assert!(!overlaps(before, stages), "the record just before");
        // SAFETY: 8 bytes into the first record: still inside `records`.
        let straddling = unsafe { before.cast::<u8>().add(8) }.cast();
        assert!(
            overlaps(straddling, stages),
            "its last 8 bytes on the first stage's"
        );
        assert!(overlaps(stages.as_ptr(), stages));
        assert!(!overlaps(before, &[]), "no stages");
    }
}
