//! A derivative pipeline whose base stands earlier in the same call (`basePipelineIndex`): the
//! layer splits every call into one call a pipeline, so the base goes as its handle. A base that
//! the driver did not make (it failed, or answered `VK_PIPELINE_COMPILE_REQUIRED`) has no
//! handle, and a create info naming neither a handle nor an index is invalid
//! (VUID-VkComputePipelineCreateInfo-flags-07984/-07985, VUID-VkGraphicsPipelineCreateInfo-flags-07984/-07985),
//! though the application's call was valid. Then the derivative goes without the hint where its
//! flags are the legacy ones (the `DERIVATIVE` bit changes nothing a pipeline does, and the key
//! leaves it out), and, where its flags are in the application's own
//! `VkPipelineCreateFlags2CreateInfoKHR` (which the layer does not rewrite), together with its
//! bases in one call, as the application asked.

use ash::vk;

use super::{CreateFn, DeviceData, PipelineInfo};
use crate::layer::capture::Flags;
use crate::watch::{Lap, Outcome, Phase};

/// What became of a pipeline's base.
pub(super) enum Base {
    /// Not a derivative of a pipeline of this call, or its base was made and named by handle, or
    /// the derivative goes without the hint.
    Resolved,
    /// A derivative (through flags2) of a pipeline of this call that the driver did not make.
    FailedInThisCall,
}

/// Names the base of pipeline `i` of a call by its handle where it was made (`made`: the call's
/// pipelines so far); where it was not, clears the legacy `DERIVATIVE` bit, or says the
/// pipeline goes with its bases ([`build_with_its_bases`]).
pub(super) fn resolve_base<T: PipelineInfo>(
    info: &mut T,
    flags: &mut Flags,
    i: usize,
    made: &[vk::Pipeline],
) -> Base {
    if !flags.has(vk::PipelineCreateFlags::DERIVATIVE) || info.base_index() < 0 {
        return Base::Resolved;
    }
    let j = info.base_index() as usize;
    match made.get(j).filter(|b| j < i && **b != vk::Pipeline::null()) {
        Some(base) => info.set_base(*base),
        None if flags.chained => return Base::FailedInThisCall,
        None => {
            let without = info.legacy_flags() & !vk::PipelineCreateFlags::DERIVATIVE;
            info.set_legacy_flags(without);
            info.set_base(vk::Pipeline::null());
            flags.bits = u64::from(without.as_raw());
        }
    }
    Base::Resolved
}

/// Pipeline `sent.len()` of the call, a derivative whose base (by index) the driver did not make,
/// asked of the driver with its bases as the application asked: every create info it names by
/// index, as each went to the driver, in one call. The bases it makes again are destroyed; the
/// derivative goes into `slot` and is counted as built as asked.
///
/// # Safety
/// `sent` and `info` must be the call's valid create infos; as for `vkCreate*Pipelines`.
pub(super) unsafe fn build_with_its_bases<T: PipelineInfo>(
    dev: &DeviceData,
    app_cache: vk::PipelineCache,
    sent: &[T],
    info: T,
    allocator: *const vk::AllocationCallbacks<'_>,
    next: CreateFn<T>,
    slot: &mut vk::Pipeline,
) -> vk::Result {
    let mut lap = Lap::start();
    let infos = with_bases(sent, info);
    let mut made = vec![vk::Pipeline::null(); infos.len()];
    // SAFETY: valid create infos (each base's as it went to the driver), as the caller vouches.
    let r = unsafe {
        next(
            dev.handle,
            app_cache,
            infos.len() as u32,
            infos.as_ptr(),
            allocator,
            made.as_mut_ptr(),
        )
    };
    lap.to(Phase::Driver);
    let derivative = made.pop().unwrap_or_default();
    for base in made.into_iter().filter(|p| *p != vk::Pipeline::null()) {
        // SAFETY: a pipeline this call made again and nobody has seen.
        unsafe { (dev.fns.destroy_pipeline)(dev.handle, base, allocator) };
    }
    *slot = derivative;
    if derivative == vk::Pipeline::null() {
        // The call's answer is the derivative's, or a base's failing again before it.
        return r;
    }
    dev.watch.record(Outcome::PassedThrough, &lap);
    vk::Result::SUCCESS
}

/// `info` (naming a base of `sent` by index) with every create info it needs by index before
/// it, the indices renumbered into the new array: the derivative last.
fn with_bases<T: PipelineInfo>(sent: &[T], info: T) -> Vec<T> {
    let mut order = vec![sent.len()];
    let at = |i: usize| if i == sent.len() { info } else { sent[i] };
    while let Some(j) = named_base(
        &at(*order.last().expect("one at least")),
        order.last().copied(),
    ) {
        order.push(j);
    }
    order.reverse();
    order
        .iter()
        .map(|&i| {
            let mut one = at(i);
            if let Some(j) = named_base(&one, Some(i)) {
                let position = order.iter().position(|&k| k == j).expect("collected above");
                one.set_base_index(position as i32);
            }
            one
        })
        .collect()
}

/// The index of the pipeline `info` (pipeline `i` of the call) names as its base, where it names
/// one before it by index.
fn named_base<T: PipelineInfo>(info: &T, i: Option<usize>) -> Option<usize> {
    let j = usize::try_from(info.base_index()).ok()?;
    // SAFETY: the application's valid chain.
    let flags = unsafe { Flags::of(info.legacy_flags(), info.p_next()) };
    (flags.has(vk::PipelineCreateFlags::DERIVATIVE) && i.is_some_and(|i| j < i)).then_some(j)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derivative_of(
        base: i32,
        flags2: &vk::PipelineCreateFlags2CreateInfoKHR,
    ) -> vk::ComputePipelineCreateInfo<'static> {
        let mut ci = vk::ComputePipelineCreateInfo::default().base_pipeline_index(base);
        ci.p_next = (flags2 as *const vk::PipelineCreateFlags2CreateInfoKHR).cast();
        ci
    }

    #[test]
    fn a_derivative_goes_with_every_base_it_names_by_index_renumbered() {
        let derive = vk::PipelineCreateFlags2CreateInfoKHR::default()
            .flags(vk::PipelineCreateFlags2KHR::DERIVATIVE);
        let plain = vk::PipelineCreateFlags2CreateInfoKHR::default()
            .flags(vk::PipelineCreateFlags2KHR::ALLOW_DERIVATIVES);
        // 0 a base; 1 made from a handle (index -1); 2 a derivative of 0 (its base failed); 3 of 2.
        let sent = [
            derivative_of(-1, &plain),
            derivative_of(-1, &derive),
            derivative_of(0, &derive),
        ];
        let infos = with_bases(&sent, derivative_of(2, &derive));
        let indices: Vec<i32> = infos.iter().map(|i| i.base_pipeline_index).collect();
        assert_eq!(indices, [-1, 0, 1]);
        // One whose base is not a derivative by index goes with that base alone.
        let infos = with_bases(&sent[..2], derivative_of(0, &derive));
        let indices: Vec<i32> = infos.iter().map(|i| i.base_pipeline_index).collect();
        assert_eq!(indices, [-1, 0]);
    }
}
