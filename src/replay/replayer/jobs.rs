//! The pipelines to make as jobs, taken in turn by the replay's threads, each creation timed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ash::vk;
use serde_json::Value;

use super::memory_cache::RunCaches;
use super::objects::Kind;
use super::options::percentiles;
use super::{AppCache, Options, Order, Progress, Replay, Summary};
use crate::replay::objects::Catalog;
use crate::sync::Unpoisoned;

/// A job's index, how long its creation took or why it was skipped, and its kind.
type JobResult = (usize, Result<Duration, String>, Kind);

/// One pipeline to make.
pub(super) struct Job<'a> {
    hash: u64,
    info: Option<&'a Value>,
    kind: Kind,
    /// Where its objects are (each pipeline makes its own on someone else's device).
    catalog: &'a Catalog,
}

impl<'a> Job<'a> {
    /// Every pipeline of a catalog: its compute pipelines, then its graphics pipelines, then
    /// its ray-tracing pipelines, then its calls of shader objects.
    pub(super) fn all_of(catalog: &'a Catalog) -> impl Iterator<Item = Job<'a>> {
        let job = |kind| {
            move |(hash, info): &'a (u64, Option<Value>)| Job {
                hash: *hash,
                info: info.as_ref(),
                kind,
                catalog,
            }
        };
        (catalog.compute.iter().map(job(Kind::Compute)))
            .chain(catalog.graphics.iter().map(job(Kind::Graphics)))
            .chain(catalog.ray_tracing.iter().map(job(Kind::RayTracing)))
            .chain(catalog.shader_objects.iter().map(job(Kind::ShaderObjects)))
    }
}

/// Every pipeline of `catalogs` in `order` ([`Order`]), pipeline libraries before the pipelines
/// linking them (the deepest first, as Valve's replayer takes them).
pub(super) fn in_order(catalogs: &[Catalog], order: Order) -> Vec<Job<'_>> {
    let mut jobs: Vec<Job> = catalogs.iter().flat_map(Job::all_of).collect();
    if order == Order::Hash {
        // Graphics, compute, then ray tracing, each by hash (a stable sort keeps equal hashes in
        // file order).
        jobs.sort_by_key(|j| (j.kind, j.hash));
    }
    let depths = link_depths(&jobs);
    let mut numbered: Vec<(usize, Job)> = depths.into_iter().zip(jobs).collect();
    numbered.sort_by_key(|(depth, _)| *depth);
    numbered.into_iter().map(|(_, j)| j).collect()
}

/// What a pipeline's JSON says it links: a graphics pipeline's `VkPipelineLibraryCreateInfoKHR`
/// in `pNext`, a ray-tracing pipeline's `libraryInfo` (a member of its create info), each
/// naming its libraries by their pipelines' hashes (none for compute).
pub(super) fn library_info(info: &Value, kind: Kind) -> Option<&Value> {
    match kind {
        Kind::Graphics => {
            super::fields::find_next(info, crate::replay::record::stype::PIPELINE_LIBRARY)
        }
        Kind::RayTracing => info.get("libraryInfo"),
        Kind::Compute | Kind::ShaderObjects => None,
    }
}

/// The hashes of the libraries a pipeline's JSON links.
fn linked_hashes(info: Option<&Value>, kind: Kind) -> Vec<u64> {
    info.and_then(|i| library_info(i, kind))
        .map(|l| {
            super::fields::arr(l, "libraries")
                .iter()
                .filter_map(crate::replay::objects::parse_ref)
                .collect()
        })
        .unwrap_or_default()
}

/// Each job's depth in the links between pipelines (a graphics pipeline links graphics
/// libraries, a ray-tracing pipeline ray-tracing ones): 0 for one that links nothing, else one
/// more than the deepest library it links (a library the database lacks, or a cycle, counts as
/// 0: that pipeline is skipped when made).
fn link_depths(jobs: &[Job]) -> Vec<usize> {
    let index: std::collections::HashMap<(Kind, u64), usize> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.kind != Kind::Compute)
        .map(|(n, j)| ((j.kind, j.hash), n))
        .collect();
    let mut depth: Vec<Option<usize>> = vec![None; jobs.len()];
    fn visit(
        n: usize,
        jobs: &[Job],
        index: &std::collections::HashMap<(Kind, u64), usize>,
        depth: &mut Vec<Option<usize>>,
        on_path: &mut Vec<usize>,
    ) -> usize {
        if let Some(d) = depth[n] {
            return d;
        }
        let kind = jobs[n].kind;
        if on_path.contains(&n) || kind == Kind::Compute {
            return 0;
        }
        on_path.push(n);
        let d = linked_hashes(jobs[n].info, kind)
            .iter()
            .filter_map(|h| index.get(&(kind, *h)))
            .map(|&l| 1 + visit(l, jobs, index, depth, on_path))
            .max()
            .unwrap_or(0);
        on_path.pop();
        depth[n] = Some(d);
        d
    }
    (0..jobs.len())
        .map(|n| visit(n, jobs, &index, &mut depth, &mut Vec::new()))
        .collect()
}

impl Replay {
    /// Makes every job from `options.threads` threads, each taking the next job as it finishes.
    pub(super) unsafe fn run_jobs(&self, jobs: &[Job], options: &Options, summary: &mut Summary) {
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let results: Mutex<Vec<JobResult>> = Mutex::new(Vec::with_capacity(jobs.len()));
        let started = Instant::now();
        let progress = |step| {
            if let Some(on) = &options.progress {
                (on.0)(step);
            }
        };
        progress(Progress::Started(jobs.len()));
        *self.linked.locked() = jobs
            .iter()
            .flat_map(|j| {
                linked_hashes(j.info, j.kind)
                    .into_iter()
                    .map(move |h| (j.kind.tag(), h))
            })
            .collect();
        // One pass a depth of links: every library of a pass was made by an earlier one.
        let depths = link_depths(jobs);
        // Only on the replay's own device: on an application's, the layer's rebuild passes none.
        let runs = (options.app_cache == AppCache::Memory && self.own.is_none())
            .then(|| RunCaches::new(jobs.iter().map(|j| j.kind).zip(depths.iter().copied())));
        let mut phases: Vec<usize> = (1..jobs.len())
            .filter(|&n| depths[n] != depths[n - 1])
            .collect();
        phases.push(jobs.len());
        let mut start = 0;
        for end in phases {
            // Between two passes no thread runs: the next pass starts where this one ended.
            next.store(start, Ordering::Relaxed);
            start = end;
            std::thread::scope(|s| {
                for _ in 0..options.threads.max(1) {
                    s.spawn(crate::sync::logging_as_here(|| {
                        if let Some(start) = &options.worker_start {
                            (start.0)();
                        }
                        loop {
                            if options
                                .stop
                                .as_ref()
                                .is_some_and(|stop| stop.load(Ordering::Acquire))
                            {
                                break;
                            }
                            if options
                                .before_each
                                .as_ref()
                                .is_some_and(|go_on| !(go_on.0)())
                            {
                                break;
                            }
                            let n = next.fetch_add(1, Ordering::Relaxed);
                            let Some(job) = jobs[..end].get(n) else {
                                next.fetch_min(end, Ordering::Relaxed);
                                break;
                            };
                            // SAFETY: objects made above live until every thread has joined;
                            // a job is begun and ended once, its cache used between.
                            let outcome = unsafe {
                                match &runs {
                                    None => self.make_pipeline(job, self.app_cache),
                                    Some(runs) => {
                                        let cache = runs.begin(&self.device, n);
                                        let made = self.make_pipeline(job, cache);
                                        runs.end(&self.device, n);
                                        made
                                    }
                                }
                            };
                            results.locked().push((n, outcome, job.kind));
                            progress(Progress::Made(done.fetch_add(1, Ordering::Relaxed) + 1));
                        }
                    }));
                }
            });
        }
        progress(Progress::Finished);
        if let Some(runs) = runs {
            // SAFETY: every thread has joined.
            summary.app_cache_bytes = Some(unsafe { runs.finish(&self.device) });
        }
        summary.wall_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut times = Vec::new();
        for (n, outcome, kind) in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
            match outcome {
                Ok(took) => {
                    let ms = took.as_secs_f64() * 1e3;
                    summary.made += 1;
                    *match kind {
                        Kind::Graphics => &mut summary.made_graphics,
                        Kind::Compute => &mut summary.made_compute,
                        Kind::RayTracing => &mut summary.made_ray_tracing,
                        Kind::ShaderObjects => &mut summary.made_shader_objects,
                    } += 1;
                    if ms > summary.slowest_ms {
                        summary.slowest_ms = ms;
                        summary.slowest = format!("{:016x}", jobs[n].hash);
                    }
                    times.push(ms);
                }
                Err(why) => *summary.skipped.entry(why).or_default() += 1,
            }
        }
        summary.creation_ms = times.iter().sum();
        (summary.p50_ms, summary.p99_ms) = percentiles(&times);
        summary.times_ms = times;
    }

    /// One pipeline: its create info from JSON (untimed), the creation (timed), then destroyed;
    /// on someone else's device, between the objects it names, made for it and destroyed after.
    unsafe fn make_pipeline(
        &self,
        job: &Job,
        cache: vk::PipelineCache,
    ) -> Result<Duration, String> {
        let info = job.info.ok_or("malformed entry")?;
        // SAFETY (each arm): `made`'s objects live through the call, on the replay's device.
        let build = |made: &super::objects::Made| match job.kind {
            Kind::Graphics => unsafe { self.graphics(made, job.hash, cache, info) },
            Kind::Compute => unsafe { self.compute(made, job.hash, cache, info) },
            Kind::RayTracing => unsafe { self.ray_tracing(made, job.hash, cache, info) },
            Kind::ShaderObjects => unsafe { self.shader_objects(made, job.catalog, info) },
        };
        match self.own.as_ref() {
            None => build(&self.made),
            Some(own) => {
                let wanted = super::objects::Wanted::of(job.catalog, info, job.kind);
                // SAFETY: the replay's device, as its caller vouches.
                unsafe { self.around(own, job.catalog, &wanted, build) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn named(h: u64) -> Value {
        json!(format!("{h:016x}"))
    }

    /// Under `--order hash`: graphics, compute, then ray tracing, each by hash; a link after
    /// the libraries of its own kind it links, and a hash of the other kind's is no library of
    /// it (a graphics link naming a ray-tracing pipeline's hash is not deferred for it).
    #[test]
    fn links_follow_their_own_kinds_libraries_and_kinds_go_in_valves_order() {
        let mut c = Catalog::default();
        c.ray_tracing.push((
            0x10,
            Some(json!({"libraryInfo": {"libraries": [named(0x30)]}})),
        ));
        c.ray_tracing.push((0x30, Some(json!({"flags": 0x800}))));
        c.graphics.push((
            0x20,
            Some(json!({"pNext": [{"sType": 1_000_290_000, "libraries": [named(0x30)]}]})),
        ));
        c.compute.push((0x05, Some(json!({}))));
        let catalogs = [c];
        let order: Vec<(Kind, u64)> = in_order(&catalogs, Order::Hash)
            .iter()
            .map(|j| (j.kind, j.hash))
            .collect();
        assert_eq!(
            order,
            [
                (Kind::Graphics, 0x20),
                (Kind::Compute, 0x05),
                (Kind::RayTracing, 0x30),
                (Kind::RayTracing, 0x10),
            ]
        );
        let jobs = in_order(&catalogs, Order::File);
        assert_eq!(link_depths(&jobs), [0, 0, 0, 1]);
    }
}
