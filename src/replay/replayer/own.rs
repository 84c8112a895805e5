//! A replay on someone else's device (pipekeep's background rebuild, on the application's):
//! each pipeline makes the objects it names just before it and destroys them just after, so the
//! replay holds only the objects of the pipelines being built, never the record's. Its immutable
//! samplers are counted against a budget ([`SamplerBudget`]), since
//! `maxSamplerAllocationCount` counts the application's samplers and the replay's together, and
//! each pipeline's calls into the device are made only while the device lets the replay in
//! ([`EnterDevice`]).
//!
//! When each object may go (the Vulkan specification; Valve's replayer does the same):
//! - A sampler named as immutable: "Only the sampler handles are copied; the sampler objects
//!   must not be destroyed before the final use of the set layout and any descriptor pools and
//!   sets created using it" (`VkDescriptorSetLayoutBinding::pImmutableSamplers`). The replay
//!   makes no pool or set, and takes the pipeline built with a layout made from the set layout as
//!   its last use: a pipeline's samplers go after it, its pipeline layout and its set layouts.
//!   `vkDestroySampler` asks nothing more of a replay that submits no work
//!   (VUID-vkDestroySampler-sampler-01082: "All submitted commands that refer to sampler must
//!   have completed execution").
//! - Set layouts, pipeline layouts, render passes: "a VkDescriptorSetLayout object passed as a
//!   parameter to create another object is not further accessed by that object after the
//!   duration of the command it is passed into", and "A VkRenderPass or VkPipelineLayout object
//!   passed as a parameter to create another object is not further accessed by that object after
//!   the duration of the command it is passed into" (Object Lifetime). (Without `maintenance4` a
//!   pipeline layout must outlive the command buffers recording with it; the replay records
//!   none, and destroys each pipeline as soon as it is made.)
//! - Shader modules: "A shader module can be destroyed while pipelines created using its shaders
//!   are still in use" (`vkDestroyShaderModule`).
//! - Valve's replayer (`fossilize_replay.cpp`, `PipelineResolver`), where the device has
//!   `maintenance4` or API 1.3: each pipeline's samplers, set layouts, pipeline layouts and
//!   render passes are made for it alone and destroyed after it (`flush`).
//!
//! The samplers' bound: "There must be less than VkPhysicalDeviceLimits::
//! maxSamplerAllocationCount VkSampler objects currently created on the device"
//! (VUID-vkCreateSampler-maxSamplerAllocationCount-04110), the application's and the replay's
//! together.

use std::sync::{Condvar, Mutex};

use super::objects::{Made, Wanted};
use super::options::{EnterDevice, SamplerBudget};
use super::options::{DEVICE_ENDED, MORE_SAMPLERS_THAN_ALLOWED, NO_ROOM_FOR_SAMPLERS};
use super::Replay;
use crate::replay::objects::Catalog;
use crate::sync::{Unpoisoned, UnpoisonedWait};

/// How a replay on someone else's device makes each pipeline's objects.
pub(super) struct OwnObjects {
    enter: Option<EnterDevice>,
    budget: Option<SamplerBudget>,
    /// The immutable samplers the replay's threads hold, or are about to make.
    held: Mutex<usize>,
    released: Condvar,
}

/// Samplers counted as the replay's until dropped.
struct Held<'a> {
    own: &'a OwnObjects,
    samplers: usize,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.samplers > 0 {
            *self.own.held.locked() -= self.samplers;
            self.own.released.notify_all();
        }
    }
}

impl OwnObjects {
    pub(super) fn new(enter: Option<EnterDevice>, budget: Option<SamplerBudget>) -> OwnObjects {
        OwnObjects {
            enter,
            budget,
            held: Mutex::new(0),
            released: Condvar::new(),
        }
    }

    /// Counts `samplers` more as the replay's: once the other threads' pipelines leave room in
    /// the budget (each gives its samplers back after its pipeline), if the device has room for
    /// them. Why not, else.
    fn hold(&self, samplers: usize) -> Result<Held<'_>, &'static str> {
        let none = Held {
            own: self,
            samplers: 0,
        };
        let Some(budget) = self.budget.as_ref().filter(|_| samplers > 0) else {
            return Ok(none);
        };
        if samplers > budget.most {
            return Err(MORE_SAMPLERS_THAN_ALLOWED);
        }
        let mut held = self.held.locked();
        while *held + samplers > budget.most {
            held = self.released.wait_on(held);
        }
        // Those held may be made already, and so counted by the device too: asking for them
        // again errs on the side of the application.
        if !(budget.room)(*held + samplers) {
            return Err(NO_ROOM_FOR_SAMPLERS);
        }
        *held += samplers;
        Ok(Held {
            own: self,
            samplers,
        })
    }
}

impl Replay {
    /// One pipeline on someone else's device: the objects it names made, the pipeline built
    /// (`build`), the objects destroyed, all while the device lets the replay in.
    pub(super) unsafe fn around<R>(
        &self,
        own: &OwnObjects,
        catalog: &Catalog,
        wanted: &Wanted,
        build: impl FnOnce(&Made) -> Result<R, String>,
    ) -> Result<R, String> {
        let _samplers = own.hold(wanted.samplers_made(catalog))?;
        let _inside = match own.enter.as_ref() {
            Some(enter) => Some((enter.0)().ok_or(DEVICE_ENDED)?),
            None => None,
        };
        let mut made = Made::default();
        // SAFETY: the caller's device; what is made here is destroyed below, after the one
        // pipeline made with it.
        unsafe { self.make_objects(catalog, &mut made, Some(wanted)) };
        let built = build(&made);
        unsafe { self.destroy_made(&made) };
        built
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn budget(most: usize, device_room: Arc<AtomicUsize>) -> SamplerBudget {
        SamplerBudget {
            most,
            room: Arc::new(move |n| n <= device_room.load(Ordering::SeqCst)),
        }
    }

    #[test]
    fn samplers_are_held_within_the_budget_and_the_devices_room() {
        let room = Arc::new(AtomicUsize::new(100));
        let own = OwnObjects::new(None, Some(budget(4, room.clone())));
        assert_eq!(own.hold(5).err(), Some(MORE_SAMPLERS_THAN_ALLOWED));
        let first = own.hold(3).unwrap();
        assert_eq!(*own.held.locked(), 3);
        // A second pipeline's two go once the first gives its three back.
        std::thread::scope(|s| {
            let second = s.spawn(|| own.hold(2).map(|h| h.samplers));
            drop(first);
            assert_eq!(second.join().unwrap(), Ok(2));
        });
        assert_eq!(*own.held.locked(), 0, "given back when dropped");
        room.store(1, Ordering::SeqCst);
        assert_eq!(own.hold(2).err(), Some(NO_ROOM_FOR_SAMPLERS));
        assert_eq!(*own.held.locked(), 0);
        assert!(own.hold(0).is_ok(), "no sampler: never refused");
        assert!(
            OwnObjects::new(None, None).hold(10_000).is_ok(),
            "no budget"
        );
    }
}
