//! What a replay is asked ([`Options`], the application cache it runs with) and what it reports
//! ([`Summary`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The application's own pipeline cache during a replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AppCache {
    /// No cache: every pipeline is built as an application without one would.
    #[default]
    None,
    /// In-memory caches shared by every thread, as Valve's replayer keeps them with no cache
    /// file: a fresh one for each 1,024 pipelines in the replay's order ([`super::memory_cache`]).
    Memory,
    /// One monolithic cache loaded whole from a file at start and saved at exit (D744's way).
    File(PathBuf),
    /// A fresh cache for each pipeline, its data read after the build and the cache destroyed,
    /// all inside the timed call: what keeping per pipeline costs the driver itself, with no
    /// layer (the `cache` backend builds a miss this way). With a folder (`each=DIR`), a
    /// pipeline whose data an earlier run on this device and driver kept there is built through
    /// a cache made of it (read before the timed call, as the layer reads ahead), and a new
    /// one's data is kept there after: a later run's figure is the driver's own found path, a
    /// cache a pipeline.
    Each { dir: Option<PathBuf> },
}

impl std::str::FromStr for AppCache {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(AppCache::None),
            "memory" => Ok(AppCache::Memory),
            "each" => Ok(AppCache::Each { dir: None }),
            _ => {
                if let Some(dir) = s.strip_prefix("each=").filter(|d| !d.is_empty()) {
                    return Ok(AppCache::Each {
                        dir: Some(dir.into()),
                    });
                }
                s.strip_prefix("file=")
                    .map(|p| AppCache::File(p.into()))
                    .ok_or_else(|| {
                        format!("{s:?}: expected none, memory, each, each=DIR or file=PATH")
                    })
            }
        }
    }
}

/// How a replay runs. The default: one thread, no application cache, the first device, the
/// recorded title, nothing asked before each pipeline, the device destroyed at once.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub threads: usize,
    pub app_cache: AppCache,
    pub device_index: usize,
    /// pApplicationName; the recorded application's name when `None`.
    pub title: Option<String>,
    /// Told as pipelines are made: the command's progress view (the library draws nothing).
    pub progress: Option<OnProgress>,
    /// Asked before each pipeline: `true` ends the replay there (pipekeep's background rebuild
    /// stops at `vkDestroyDevice`).
    pub stop: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Run first on each thread that creates pipelines.
    pub worker_start: Option<WorkerStart>,
    /// Asked before each pipeline (it may wait): `false` ends the replay there (pipekeep's
    /// background rebuild waits while the application builds pipelines of its own).
    pub before_each: Option<BeforeEach>,
    /// How long the device lives after the last pipeline, before it is destroyed: an
    /// application that goes on after its loading (pipekeep's threads work meanwhile).
    pub linger: std::time::Duration,
    /// Make the instance and device as translation layers and emulators do: every extension
    /// offered, every feature structure reported ([`crate::replay::every_extension`]).
    pub every_extension: bool,
    /// A replay on someone else's device ([`super::replay_on_device`]): asked before each
    /// pipeline's calls into the device, and what it gives is held until they are done (pipekeep's
    /// background rebuild, on the application's device, whose end shuts the way in).
    pub enter_device: Option<EnterDevice>,
    /// A replay on someone else's device: the immutable samplers it may hold at once (none: no
    /// bound).
    pub samplers: Option<SamplerBudget>,
    /// The order pipelines are taken in.
    pub order: Order,
}

/// The order a replay takes pipelines in. It changes what a shared cache serves: a pipeline right
/// after a near-twin (pygfx's pairs differing only in `cullMode`) is a hit when the twin went
/// first, and two threads building both halves of a pair at once both compile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Order {
    /// As the database holds them: compute, then graphics, then ray tracing, each in the order
    /// the application made them (the record's, which a rebuild follows: a boot's pipelines
    /// first).
    #[default]
    File,
    /// As Valve's replayer takes them: graphics, then compute, then ray tracing, each sorted by
    /// hash.
    Hash,
}

/// What [`Options::enter_device`] runs: `None` when the device has ended, and the pipeline is
/// then skipped without a call into it; else a guard, held across the pipeline's calls.
#[derive(Clone)]
#[allow(clippy::type_complexity)]
pub struct EnterDevice(pub Arc<dyn Fn() -> Option<Box<dyn std::any::Any + Send>> + Send + Sync>);

impl std::fmt::Debug for EnterDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnterDevice")
    }
}

/// How many immutable samplers a replay on someone else's device may hold at once
/// ([`Options::samplers`]): `VkPhysicalDeviceLimits::maxSamplerAllocationCount` counts every
/// sampler on the device, the application's too.
#[derive(Clone)]
pub struct SamplerBudget {
    /// The most the replay holds at once; a pipeline naming more is skipped
    /// ([`MORE_SAMPLERS_THAN_ALLOWED`]).
    pub most: usize,
    /// Whether the device has room for this many samplers more, beside all it holds now; a
    /// pipeline whose samplers it has no room for is skipped ([`NO_ROOM_FOR_SAMPLERS`]).
    pub room: Arc<dyn Fn(usize) -> bool + Send + Sync>,
}

impl std::fmt::Debug for SamplerBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SamplerBudget")
            .field("most", &self.most)
            .finish_non_exhaustive()
    }
}

/// Why a pipeline is skipped: it names more immutable samplers than [`SamplerBudget::most`].
pub const MORE_SAMPLERS_THAN_ALLOWED: &str =
    "it names more immutable samplers than the replay may hold at once";

/// Why a pipeline is skipped: the device had no room for its immutable samplers beside the
/// application's ([`SamplerBudget::room`]).
pub const NO_ROOM_FOR_SAMPLERS: &str =
    "the device holds too many samplers to make its immutable samplers beside the application's";

/// Why a ray-tracing pipeline is skipped: the replay's device cannot make one (it has no
/// `vkCreateRayTracingPipelinesKHR`, or the `rayTracingPipeline` feature is off).
pub const NO_RAY_TRACING: &str =
    "ray-tracing pipelines: the device lacks VK_KHR_ray_tracing_pipeline";

/// Why a call of shader objects is skipped: the replay's device cannot make one (no
/// `VK_EXT_shader_object` with its `shaderObject` feature).
pub const NO_SHADER_OBJECTS: &str = "shader objects: the device lacks VK_EXT_shader_object";

/// Why a pipeline is skipped: the device ended first ([`Options::enter_device`]).
pub const DEVICE_ENDED: &str = "the device ended";

/// What [`Options::progress`] is told, from every thread that makes pipelines.
#[derive(Clone)]
pub struct OnProgress(pub Arc<dyn Fn(Progress) + Send + Sync>);

/// One step of a replay's pipelines, for [`OnProgress`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// A device's pipelines begin: this many.
    Started(usize),
    /// One more made: this many so far.
    Made(usize),
    /// That device's pipelines are done (or the replay stopped).
    Finished,
}

impl std::fmt::Debug for OnProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnProgress")
    }
}

/// What [`Options::worker_start`] runs.
#[derive(Clone)]
pub struct WorkerStart(pub Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for WorkerStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerStart")
    }
}

/// What [`Options::before_each`] runs.
#[derive(Clone)]
pub struct BeforeEach(pub Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for BeforeEach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeEach")
    }
}

/// What a replay did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Summary {
    pub device: String,
    pub driver_version: u32,
    pub application: String,
    pub threads: usize,
    /// Device configurations replayed (each its own instance and device, as recorded).
    pub configurations: usize,
    /// Configurations this device cannot make, each with why: their pipelines are not replayed
    /// (`pipelines_left`).
    pub configurations_skipped: Vec<String>,
    pub pipelines_left: usize,
    pub pipelines: usize,
    pub made: usize,
    pub made_compute: usize,
    pub made_graphics: usize,
    pub made_ray_tracing: usize,
    /// `vkCreateShadersEXT` calls made (each counted in `made` as one).
    pub made_shader_objects: usize,
    /// Skipped pipelines by reason.
    pub skipped: BTreeMap<String, usize>,
    /// Malformed entries, each with its name and why.
    pub malformed: Vec<String>,
    pub creation_ms: f64,
    pub wall_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub slowest_ms: f64,
    pub slowest: String,
    /// With a monolithic cache file: the time to read it and make the driver's cache from it,
    /// spent before the first pipeline and so in neither `creation_ms` nor `wall_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_cache_load_ms: Option<f64>,
    /// With an application cache: the size of the data it would save after the run (how whole
    /// a layer below it left it); with [`AppCache::Memory`], the largest of any run's cache once
    /// its last pipeline was made. Over several configurations, the largest of theirs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_cache_bytes: Option<usize>,
    /// Each made pipeline's creation time in ms, in the order they finished.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub times_ms: Vec<f64>,
}

impl Summary {
    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }

    /// `n` pipelines of the database not replayed here, and why: left to the application's own
    /// background rebuild.
    pub(super) fn leave(&mut self, n: usize, why: String) {
        self.pipelines += n;
        self.pipelines_left += n;
        self.configurations_skipped.push(why);
    }

    /// Adds another configuration's replay to this one.
    pub(super) fn add(&mut self, o: Summary) {
        if self.configurations == 0 {
            self.device = o.device;
            self.driver_version = o.driver_version;
            self.application = o.application;
        }
        self.threads = self.threads.max(o.threads);
        self.configurations += o.configurations;
        self.pipelines += o.pipelines;
        self.made += o.made;
        self.made_compute += o.made_compute;
        self.made_graphics += o.made_graphics;
        self.made_ray_tracing += o.made_ray_tracing;
        self.made_shader_objects += o.made_shader_objects;
        for (why, n) in o.skipped {
            *self.skipped.entry(why).or_default() += n;
        }
        self.malformed.extend(o.malformed);
        self.creation_ms += o.creation_ms;
        self.wall_ms += o.wall_ms;
        if o.slowest_ms > self.slowest_ms {
            self.slowest_ms = o.slowest_ms;
            self.slowest = o.slowest;
        }
        if let Some(ms) = o.app_cache_load_ms {
            *self.app_cache_load_ms.get_or_insert(0.0) += ms;
        }
        self.app_cache_bytes = match (self.app_cache_bytes, o.app_cache_bytes) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.times_ms.extend(o.times_ms);
        let (p50, p99) = percentiles(&self.times_ms);
        (self.p50_ms, self.p99_ms) = (p50, p99);
    }
}

/// The median and 99th percentile of creation times.
pub(super) fn percentiles(times: &[f64]) -> (f64, f64) {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        sorted
            .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    (pct(0.5), pct(0.99))
}

#[cfg(test)]
mod tests {
    use super::AppCache;

    #[test]
    fn an_application_cache_is_read_from_its_name() {
        let parse = |s: &str| s.parse::<AppCache>();
        assert_eq!(parse("memory"), Ok(AppCache::Memory));
        assert_eq!(parse("each"), Ok(AppCache::Each { dir: None }));
        assert_eq!(
            parse("each=/tmp/kept"),
            Ok(AppCache::Each {
                dir: Some("/tmp/kept".into())
            })
        );
        assert!(parse("each=").is_err(), "no folder named");
        assert_eq!(parse("file=a.bin"), Ok(AppCache::File("a.bin".into())));
        assert!(parse("eachx").unwrap_err().contains("each=DIR"));
    }
}
