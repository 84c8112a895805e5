//! `pipekeep replay`: every pipeline of one or more Fossilize databases, built through the Vulkan
//! loader (and so through pipekeep, when it is enabled), with a summary of what was made.

use std::path::PathBuf;
use std::process::ExitCode;

use pipekeep::replay::foz;
use pipekeep::replay::objects::Catalog;
use pipekeep::replay::replayer::{self, AppCache, Options, Order};

/// Replay every pipeline of Fossilize databases (.foz) through the Vulkan loader.
///
/// With pipekeep enabled (installed, or VK_INSTANCE_LAYERS=VK_LAYER_PIPEKEEP_pipeline_store),
/// this fills the title's store before the application's first launch. The title is the
/// recorded application's name unless --title says otherwise. Exit status 1 when anything was
/// skipped or malformed.
#[derive(clap::Args)]
pub struct Args {
    /// The databases.
    #[arg(required = true)]
    databases: Vec<PathBuf>,
    /// Threads creating pipelines.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// The application's own cache: none, memory (in-memory caches shared by every thread, a
    /// fresh one each 1,024 pipelines, as Valve's replayer keeps them), file=PATH (one
    /// monolithic cache loaded whole at start and saved at exit), each (a fresh cache a
    /// pipeline, its data read after: what keeping per pipeline costs the driver alone), or
    /// each=DIR (the same, each pipeline's data kept in DIR, and a pipeline whose data is there
    /// built through a cache made of it: the driver's own found path, a cache a pipeline).
    #[arg(long, default_value = "none")]
    app_cache: AppCache,
    /// Which physical device, in the loader's order.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// pApplicationName (and so pipekeep's title) instead of the recorded one.
    #[arg(long)]
    title: Option<String>,
    /// Show progress on stderr: a bar on a terminal, else a line every 100 pipelines.
    #[arg(long)]
    progress: bool,
    /// Print the summary as JSON (with every pipeline's creation time with --times).
    #[arg(long)]
    json: bool,
    /// With --json: include each pipeline's creation time.
    #[arg(long)]
    times: bool,
    /// Keep the device this many milliseconds after the last pipeline, as an application that
    /// goes on after its loading would (pipekeep's background work goes on meanwhile).
    #[arg(long, default_value_t = 0)]
    linger_ms: u64,
    /// Make the device as translation layers, emulators and replay tools do: every extension
    /// offered, every feature structure the device reports chained with what it reports.
    #[arg(long)]
    every_extension: bool,
    /// The order pipelines are taken in: hash (as Valve's replayer: graphics, compute, then ray
    /// tracing, each sorted by hash) or file (as the application made them).
    #[arg(long, value_enum, default_value_t = ReplayOrder::Hash)]
    order: ReplayOrder,
}

/// `--order`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ReplayOrder {
    Hash,
    File,
}

impl From<ReplayOrder> for Order {
    fn from(o: ReplayOrder) -> Order {
        match o {
            ReplayOrder::Hash => Order::Hash,
            ReplayOrder::File => Order::File,
        }
    }
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let mut catalogs = Vec::new();
    for path in &args.databases {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let entries = foz::read_entries(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        catalogs.push(Catalog::from_entries(entries));
    }
    let options = Options {
        threads: args.threads,
        app_cache: args.app_cache,
        device_index: args.device,
        title: args.title,
        progress: crate::progress::replay_progress(args.progress),
        linger: std::time::Duration::from_millis(args.linger_ms),
        every_extension: args.every_extension,
        order: args.order.into(),
        ..Options::default()
    };
    let mut summary = replayer::replay(&catalogs, &options)?;
    let clean = summary.skipped_total() == 0 && summary.malformed.is_empty();
    if args.json {
        if !args.times {
            summary.times_ms.clear();
        }
        let mut out = serde_json::to_value(&summary).map_err(|e| e.to_string())?;
        out["process"] = process_figures();
        println!("{out}");
    } else {
        print_summary(&summary);
    }
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_summary(s: &replayer::Summary) {
    println!(
        "replayed on {} as {:?} with {} thread(s)",
        s.device, s.application, s.threads
    );
    println!(
        "  made {} of {} pipelines ({} compute, {} graphics, {} ray tracing)",
        s.made, s.pipelines, s.made_compute, s.made_graphics, s.made_ray_tracing
    );
    if let Some(ms) = s.app_cache_load_ms {
        println!("  the monolithic cache loaded in {ms:.1} ms, before the first pipeline");
    }
    println!("  creation {:.1} ms accumulated, wall {:.1} ms; per pipeline p50 {:.3} ms, p99 {:.3} ms; slowest {:.1} ms ({})", s.creation_ms, s.wall_ms, s.p50_ms, s.p99_ms, s.slowest_ms, s.slowest);
    for (why, n) in &s.skipped {
        println!("  skipped {n}: {why}");
    }
    for m in &s.malformed {
        println!("  malformed entry {m}");
    }
}

/// This process's peak memory and I/O, from /proc (for the benchmark's tables).
fn process_figures() -> serde_json::Value {
    let field = |text: &str, name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    serde_json::json!({
        "peak_rss_kib": field(&status, "VmHWM:"),
        "read_bytes": field(&io, "rchar:"),
        "written_bytes": field(&io, "wchar:"),
    })
}
