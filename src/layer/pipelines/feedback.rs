//! Creation feedback through the layer: the application's own `VkPipelineCreationFeedbackCreateInfo`
//! receives the driver's feedback unchanged (a pipeline found in the store reports a cache hit),
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
    apps: *const vk::PipelineCreationFeedback,
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
            apps: std::ptr::null(),
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

/// A pipeline made from a kept entry reports a cache hit to the application's own creation
/// feedback, as a cache of its own would have (SPEC, step 4).
///
/// # Safety
/// `info`'s chain must be valid; a feedback structure in it points at writable records.
pub(super) unsafe fn report_found_to_the_application<T: PipelineInfo>(info: &T) {
    // SAFETY: as the caller vouches.
    let app = unsafe { applications_feedback(info) };
    if let Some(record) = app.and_then(|a| unsafe { a.p_pipeline_creation_feedback.as_mut() }) {
        record.flags |= vk::PipelineCreationFeedbackFlags::VALID
            | vk::PipelineCreationFeedbackFlags::APPLICATION_PIPELINE_CACHE_HIT;
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
    let Some(app) = (unsafe { applications_feedback(info) }) else {
        return;
    };
    if let Some(record) = unsafe { app.p_pipeline_creation_feedback.as_mut() } {
        record.flags = vk::PipelineCreationFeedbackFlags::empty();
    }
    let stages = app.p_pipeline_stage_creation_feedbacks;
    for i in 0..app.pipeline_stage_creation_feedback_count as usize {
        // SAFETY: the application's array of that many output records.
        if let Some(record) = unsafe { stages.add(i).as_mut() } {
            record.flags = vk::PipelineCreationFeedbackFlags::empty();
        }
    }
}

/// The application's own feedback records as a build left them, put back where a later build of
/// the layer's (a second one, which failed) wrote over them: they then describe the pipeline the
/// application gets.
pub(super) struct SavedFeedback {
    pipeline: Option<vk::PipelineCreationFeedback>,
    stages: Vec<vk::PipelineCreationFeedback>,
}

/// # Safety
/// `info` must be the application's valid create info, its feedback records written by a build.
pub(super) unsafe fn save_application_feedback<T: PipelineInfo>(info: &T) -> Option<SavedFeedback> {
    // SAFETY: as the caller vouches: the application's output records, readable.
    let app = unsafe { applications_feedback(info) }?;
    let pipeline = unsafe { app.p_pipeline_creation_feedback.as_ref() }.copied();
    let stages = (0..app.pipeline_stage_creation_feedback_count as usize)
        .filter_map(|i| unsafe { app.p_pipeline_stage_creation_feedbacks.add(i).as_ref() })
        .copied()
        .collect();
    Some(SavedFeedback { pipeline, stages })
}

/// # Safety
/// As [`save_application_feedback`], `saved` taken from the same `info`.
pub(super) unsafe fn restore_application_feedback<T: PipelineInfo>(
    info: &T,
    saved: &SavedFeedback,
) {
    // SAFETY: as the caller vouches: the application's output records, writable.
    let Some(app) = (unsafe { applications_feedback(info) }) else {
        return;
    };
    if let (Some(record), Some(was)) = (
        unsafe { app.p_pipeline_creation_feedback.as_mut() },
        saved.pipeline,
    ) {
        *record = was;
    }
    for (i, was) in saved.stages.iter().enumerate() {
        // SAFETY: the application's array of at least that many output records.
        if let Some(record) = unsafe { app.p_pipeline_stage_creation_feedbacks.add(i).as_mut() } {
            *record = *was;
        }
    }
}
