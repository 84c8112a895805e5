//! The pipelines to make as jobs, taken in turn by the replay's threads, each creation timed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::options::percentiles;
use super::{Options, Order, Progress, Replay, Summary};
use crate::replay::objects::Catalog;
use crate::sync::Unpoisoned;

/// A job's index, how long its creation took or why it was skipped, and whether it is graphics.
type JobResult = (usize, Result<Duration, String>, bool);

/// One pipeline to make.
pub(super) struct Job<'a> {
    hash: u64,
    info: Option<&'a Value>,
    graphics: bool,
    /// Where its objects are (each pipeline makes its own on someone else's device).
    catalog: &'a Catalog,
}

impl<'a> Job<'a> {
    /// Every pipeline of a catalog: its compute pipelines, then its graphics pipelines.
    pub(super) fn all_of(catalog: &'a Catalog) -> impl Iterator<Item = Job<'a>> {
        let job = |graphics| {
            move |(hash, info): &'a (u64, Option<Value>)| Job {
                hash: *hash,
                info: info.as_ref(),
                graphics,
                catalog,
            }
        };
        (catalog.compute.iter().map(job(false))).chain(catalog.graphics.iter().map(job(true)))
    }
}

/// Every pipeline of `catalogs` in `order` ([`Order`]), pipeline libraries before the pipelines
/// linking them (the deepest first, as Valve's replayer takes them).
pub(super) fn in_order(catalogs: &[Catalog], order: Order) -> Vec<Job<'_>> {
    let mut jobs: Vec<Job> = catalogs.iter().flat_map(Job::all_of).collect();
    if order == Order::Hash {
        // Graphics before compute, each by hash (a stable sort keeps equal hashes in file order).
        jobs.sort_by_key(|j| (!j.graphics, j.hash));
    }
    let depths = link_depths(&jobs);
    let mut numbered: Vec<(usize, Job)> = depths.into_iter().zip(jobs).collect();
    numbered.sort_by_key(|(depth, _)| *depth);
    numbered.into_iter().map(|(_, j)| j).collect()
}

/// The hashes of the libraries a graphics pipeline's JSON links.
fn linked_hashes(info: Option<&Value>) -> Vec<u64> {
    let Some(info) = info else {
        return Vec::new();
    };
    super::fields::find_next(info, crate::replay::record::stype::PIPELINE_LIBRARY)
        .map(|l| {
            super::fields::arr(l, "libraries")
                .iter()
                .filter_map(crate::replay::objects::parse_ref)
                .collect()
        })
        .unwrap_or_default()
}

/// Each job's depth in the links between graphics pipelines: 0 for one that links nothing,
/// else one more than the deepest library it links (a library the database lacks, or a cycle,
/// counts as 0: that pipeline is skipped when made).
fn link_depths(jobs: &[Job]) -> Vec<usize> {
    let index: std::collections::HashMap<u64, usize> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.graphics)
        .map(|(n, j)| (j.hash, n))
        .collect();
    let mut depth: Vec<Option<usize>> = vec![None; jobs.len()];
    fn visit(
        n: usize,
        jobs: &[Job],
        index: &std::collections::HashMap<u64, usize>,
        depth: &mut Vec<Option<usize>>,
        on_path: &mut Vec<usize>,
    ) -> usize {
        if let Some(d) = depth[n] {
            return d;
        }
        if on_path.contains(&n) || !jobs[n].graphics {
            return 0;
        }
        on_path.push(n);
        let d = linked_hashes(jobs[n].info)
            .iter()
            .filter_map(|h| index.get(h))
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
        // One pass a depth of links: every library of a pass was made by an earlier one.
        let depths = link_depths(jobs);
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
                            // SAFETY: objects made above live until every thread has joined.
                            let outcome = unsafe { self.make_pipeline(job) };
                            results.locked().push((n, outcome, job.graphics));
                            progress(Progress::Made(done.fetch_add(1, Ordering::Relaxed) + 1));
                        }
                    }));
                }
            });
        }
        progress(Progress::Finished);
        summary.wall_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut times = Vec::new();
        for (n, outcome, graphics) in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
            match outcome {
                Ok(took) => {
                    let ms = took.as_secs_f64() * 1e3;
                    summary.made += 1;
                    if graphics {
                        summary.made_graphics += 1
                    } else {
                        summary.made_compute += 1
                    }
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
    unsafe fn make_pipeline(&self, job: &Job) -> Result<Duration, String> {
        let info = job.info.ok_or("malformed entry")?;
        let build = |made: &super::objects::Made| {
            if job.graphics {
                unsafe { self.graphics(made, job.hash, info) }
            } else {
                unsafe { self.compute(made, info) }
            }
        };
        match self.own.as_ref() {
            None => build(&self.made),
            Some(own) => {
                let wanted = super::objects::Wanted::of(job.catalog, info, job.graphics);
                // SAFETY: the replay's device, as its caller vouches.
                unsafe { self.around(own, job.catalog, &wanted, build) }
            }
        }
    }
}
