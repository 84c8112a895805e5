//! The application's in-memory pipeline cache ([`AppCache::Memory`](super::AppCache::Memory)) as
//! Valve's replayer keeps one when it is given no cache file: a fresh cache for each run of at
//! most [`PIPELINES_PER_CACHE`] pipelines of one kind and one pass of links, in the replay's
//! order, destroyed once the last of them is made. One cache for every pipeline would grow with
//! the replay (ncnn's 3,115 pipelines to 40 MB on NVIDIA), and a real replay tool's figures are
//! made with the bounded one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ash::vk;

use super::objects::Kind;
use crate::sync::Unpoisoned;

/// How many pipelines share one cache (Valve's `NUM_PIPELINES_PER_CONTEXT`).
pub(super) const PIPELINES_PER_CACHE: usize = 1024;

/// Each job's run of pipelines, and each run's cache while some of its pipelines are unmade.
pub(super) struct RunCaches {
    /// The run each job (by its index) is in.
    run_of: Vec<usize>,
    runs: Mutex<Vec<Run>>,
    /// The most data one run's cache held (read before it was destroyed).
    largest: AtomicUsize,
}

#[derive(Default)]
struct Run {
    cache: vk::PipelineCache,
    /// The driver would not make its cache: its pipelines go without one.
    refused: bool,
    /// Its pipelines not yet made.
    left: usize,
}

impl RunCaches {
    /// The runs of jobs whose kinds and link depths are `jobs`, in the replay's order: a run ends
    /// where the kind or the depth changes, or at [`PIPELINES_PER_CACHE`] jobs.
    pub(super) fn new(jobs: impl IntoIterator<Item = (Kind, usize)>) -> RunCaches {
        let mut run_of = Vec::new();
        let mut runs: Vec<Run> = Vec::new();
        let mut last = None;
        for job in jobs {
            match runs.last_mut() {
                Some(run) if last == Some(job) && run.left < PIPELINES_PER_CACHE => run.left += 1,
                _ => runs.push(Run {
                    left: 1,
                    ..Run::default()
                }),
            }
            last = Some(job);
            run_of.push(runs.len() - 1);
        }
        RunCaches {
            run_of,
            runs: Mutex::new(runs),
            largest: AtomicUsize::new(0),
        }
    }

    /// The cache job `n` is built through, made empty when the first of its run begins (null,
    /// as Valve's replayer goes on, where the driver would not make one).
    ///
    /// # Safety
    /// `device` is the replay's live device; `n` is a job of [`RunCaches::new`]'s, begun once.
    pub(super) unsafe fn begin(&self, device: &ash::Device, n: usize) -> vk::PipelineCache {
        let mut runs = self.runs.locked();
        let run = &mut runs[self.run_of[n]];
        if run.cache == vk::PipelineCache::null() && !run.refused {
            // SAFETY: a valid create info on the caller's live device.
            match unsafe {
                device.create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None)
            } {
                Ok(cache) => run.cache = cache,
                Err(e) => {
                    tracing::warn!(result = ?e, "vkCreatePipelineCache failed; this run's pipelines go without a cache");
                    run.refused = true;
                }
            }
        }
        run.cache
    }

    /// Job `n` is made (or skipped): its run's cache is destroyed once none of its jobs is left.
    ///
    /// # Safety
    /// As [`RunCaches::begin`]; `n` ended once, no call using its cache still running.
    pub(super) unsafe fn end(&self, device: &ash::Device, n: usize) {
        let done = {
            let mut runs = self.runs.locked();
            let run = &mut runs[self.run_of[n]];
            run.left -= 1;
            if run.left > 0 {
                return;
            }
            std::mem::take(&mut run.cache)
        };
        // SAFETY: the run's last pipeline is made: nothing uses its cache any more (and the
        // other threads need not wait on the lock while the driver sizes and frees it).
        unsafe { self.destroy(device, done) };
    }

    /// Destroys the caches of runs a stopped replay left unfinished; the largest size reported.
    ///
    /// # Safety
    /// As [`RunCaches::begin`]; every thread has joined.
    pub(super) unsafe fn finish(&self, device: &ash::Device) -> usize {
        for run in self.runs.locked().iter_mut() {
            // SAFETY: as the caller vouches, nothing uses any cache any more.
            unsafe { self.destroy(device, std::mem::take(&mut run.cache)) };
        }
        self.largest.load(Ordering::Relaxed)
    }

    /// Destroys `cache` (if made), noting the size of its data (read as a file cache's is).
    ///
    /// # Safety
    /// As [`RunCaches::begin`]; nothing uses `cache` any more.
    unsafe fn destroy(&self, device: &ash::Device, cache: vk::PipelineCache) {
        if cache == vk::PipelineCache::null() {
            return;
        }
        // SAFETY: a live cache of this device, used by nothing else now.
        if let Ok(data) = unsafe { device.get_pipeline_cache_data(cache) } {
            self.largest.fetch_max(data.len(), Ordering::Relaxed);
        }
        // SAFETY: as the callers vouch, nothing uses the cache any more.
        unsafe { device.destroy_pipeline_cache(cache, None) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(jobs: &[(Kind, usize)]) -> Vec<usize> {
        RunCaches::new(jobs.iter().copied()).run_of
    }

    /// A run ends at a change of kind or of link depth, and after 1,024 pipelines (ncnn's 3,115
    /// compute pipelines are four runs, as in Valve's replayer).
    #[test]
    fn runs_end_at_a_kind_a_depth_or_1024_pipelines() {
        let g0 = (Kind::Graphics, 0);
        assert_eq!(
            runs(&[g0, g0, (Kind::Compute, 0), (Kind::Graphics, 1), g0]),
            [0, 0, 1, 2, 3]
        );
        let ncnn = runs(&vec![(Kind::Compute, 0); 3115]);
        assert_eq!(ncnn[1023], 0);
        assert_eq!(ncnn[1024], 1);
        assert_eq!(ncnn[3114], 3);
        let r = RunCaches::new(vec![(Kind::Compute, 0); 3115]);
        let left: Vec<usize> = r.runs.locked().iter().map(|r| r.left).collect();
        assert_eq!(left, [1024, 1024, 1024, 43]);
    }
}
