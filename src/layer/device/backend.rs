//! The backend a device builds kept pipelines by (SPEC "Building a pipeline: two backends"), and
//! its switch from binaries to caches for the rest of the run once the driver refuses them.

use std::sync::atomic::Ordering;

use ash::vk;

use super::DeviceData;

/// How a device's kept pipelines are built (SPEC "Building a pipeline: two backends").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// From the entry's pipeline binaries; misses built through the application's own cache.
    Binary,
    /// Through a pipeline cache of the layer's own made from the entry.
    Cache,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Binary => "binary",
            Backend::Cache => "cache",
        }
    }
}

/// Entries of binaries refused before a device gives up on binaries.
const REFUSALS_BEFORE_SWITCH: u32 = 3;

/// A driver's answer that it will not take kept binaries: a pipeline it would have to compile
/// (NVIDIA's answer to binaries of another process), data it cannot make binaries of, or a
/// binary it says is missing.
fn refuses_the_data(result: vk::Result) -> bool {
    matches!(
        result,
        vk::Result::PIPELINE_COMPILE_REQUIRED | vk::Result::ERROR_INITIALIZATION_FAILED
    ) || result == crate::layer::binary_abi::PIPELINE_BINARY_MISSING
}

impl DeviceData {
    /// The backend kept pipelines are built by now.
    pub fn backend(&self) -> Backend {
        if self.backend.load(Ordering::Relaxed) == Backend::Binary as u8 {
            Backend::Binary
        } else {
            Backend::Cache
        }
    }

    /// A build from kept binaries failed with `result`: counted as a refusal only where the
    /// driver says it will not take the data (out of memory, a lost device and the like say
    /// nothing of the binaries).
    pub fn binaries_failed(&self, result: vk::Result) {
        if refuses_the_data(result) {
            self.binaries_refused();
        }
    }

    /// Counts an entry of binaries the driver refused. A driver that refuses a few is not given
    /// more: the device switches to `cache` for the rest of the run, and the store remembers it
    /// for this identity, so that `auto` starts later runs with `cache`. (NVIDIA takes the
    /// binaries written before its per-process dictionary existed and refuses every one after:
    /// measured on the H200, 867 of ncnn's 3,115 taken and 2,246 refused in the second run, so
    /// taken ones must not hold the switch back.)
    pub fn binaries_refused(&self) {
        let refused = self.binary_refusals.fetch_add(1, Ordering::Relaxed) + 1;
        if refused < REFUSALS_BEFORE_SWITCH {
            return;
        }
        let was = self.backend.swap(Backend::Cache as u8, Ordering::Relaxed);
        if was == Backend::Binary as u8 {
            let taken = self.watch.tally().found;
            tracing::warn!(refused, taken, "the driver refuses pipeline binaries another process wrote; pipekeep builds through caches for the rest of this run and from now on for this driver");
            if let Some(store) = self.store() {
                if let Err(e) = store.remember_refused_binaries() {
                    tracing::debug!(error = %e, "could not remember the refusal");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_driver_refusing_the_data_counts_as_a_refusal_of_the_binaries() {
        assert!(refuses_the_data(vk::Result::PIPELINE_COMPILE_REQUIRED));
        assert!(refuses_the_data(vk::Result::ERROR_INITIALIZATION_FAILED));
        assert!(refuses_the_data(
            crate::layer::binary_abi::PIPELINE_BINARY_MISSING
        ));
        for other in [
            vk::Result::ERROR_OUT_OF_HOST_MEMORY,
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY,
            vk::Result::ERROR_DEVICE_LOST,
            vk::Result::ERROR_UNKNOWN,
        ] {
            assert!(!refuses_the_data(other), "{other:?}");
        }
    }
}
