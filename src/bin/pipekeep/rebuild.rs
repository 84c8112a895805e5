//! `pipekeep rebuild`: every title's record (`<title>/record.foz`, the pipelines the application
//! compiled) replayed through pipekeep, so that the driver present has its store before the
//! application's next launch (as a package hook after a driver update would run it). What the
//! store already holds is found, not compiled again.

use std::process::ExitCode;

use serde_json::json;

use pipekeep::replay::objects::Catalog;
use pipekeep::replay::record::FILE_NAME;
use pipekeep::replay::replayer::{self, Options};
use pipekeep::watch::read_runs;

use crate::store::Scope;

/// Rebuild titles' stores from their records, for the driver present.
///
/// pipekeep must be active for the replay: installed (scripts/install.sh), or named with
/// VK_INSTANCE_LAYERS; where neither, the layer beside this program's build tree is used.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    scope: Scope,
    /// Threads creating pipelines (default: half the cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Show progress on stderr: a bar on a terminal, else a line every 100 pipelines.
    #[arg(long)]
    progress: bool,
}

const LAYER: &str = "VK_LAYER_PIPEKEEP_pipeline_store";

pub fn run(args: Args) -> Result<ExitCode, String> {
    let (root, titles) = args.scope.titles()?;
    let with_record: Vec<String> = titles
        .into_iter()
        .filter(|t| root.join(t).join(FILE_NAME).is_file())
        .collect();
    if with_record.is_empty() {
        return Err(format!("no title in {} has a record", root.display()));
    }
    enable_the_layer(&root);
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
    });
    let mut out = Vec::new();
    let mut clean = true;
    for title in &with_record {
        let path = root.join(title).join(FILE_NAME);
        let (entries, read_len) = pipekeep::replay::record::read(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let catalog = Catalog::from_entries(entries);
        let runs_path = root.join(title).join("runs.jsonl");
        // The history keeps its last lines only: this run's are told by their time, not count.
        let started = pipekeep::watch::unix_secs(std::time::SystemTime::now());
        // The layer files what this process builds under the title being rebuilt, whatever the
        // application named itself: it reads PIPEKEEP_TITLE at each vkCreateInstance. (No
        // thread of the layer's lives between two titles: each device's are joined as it goes.)
        std::env::set_var("PIPEKEEP_TITLE", title);
        let options = Options {
            threads,
            progress: crate::progress::replay_progress(args.progress),
            ..Options::default()
        };
        let summary = replayer::replay(&[catalog], &options)?;
        // The replay's device never paused for the layer to drop the old driver's entries it set
        // aside: dropped here, so the application's next launch has none of them to list.
        let old_entries_dropped = pipekeep::store::drop_set_aside(&root, title);
        let record = pipekeep::replay::record::RecordFile::new(&root.join(title));
        if summary.configurations_skipped.is_empty() {
            // Every pipeline of the record went through the layer: none is owed to a background
            // rebuild any more (unless the record grew meanwhile).
            let _ = record.clear_pending_unless_grown(read_len);
        } else if let Err(e) = record.mark_pending() {
            // A configuration this device cannot make is left to the application's own
            // background rebuild, which the mark starts.
            eprintln!(
                "{title}: cannot mark {} as owed a rebuild: {e}",
                path.display()
            );
            clean = false;
        }
        // The layer's lines for this run in the title's history (one a configuration's device)
        // say what it found and wrote.
        let runs = read_runs(&runs_path).unwrap_or_default();
        let ours: Vec<_> = runs.into_iter().filter(|r| r.when >= started).collect();
        // (A device that made no pipeline writes no line: the record's configurations all
        // damaged or left to the application leave nothing to say about the layer.)
        if summary.made > 0 && ours.len() < summary.configurations {
            return Err(format!(
                "{title}: pipekeep was not active during the rebuild (install it with \
                 scripts/install.sh, or name it with VK_INSTANCE_LAYERS={LAYER})"
            ));
        }
        let sum =
            |f: fn(&pipekeep::watch::Tally) -> u64| ours.iter().map(|r| f(&r.tally)).sum::<u64>();
        clean &= summary.skipped_total() == 0 && summary.malformed.is_empty();
        out.push(json!({
            "title": title, "record": path, "pipelines": summary.made,
            "made_shader_objects": summary.made_shader_objects,
            "found": sum(|t| t.found), "compiled": sum(|t| t.compiled),
            "written": sum(|t| t.written),
            "skipped": summary.skipped_total(), "creation_ms": summary.creation_ms,
            "damaged_skipped": summary.malformed.len(),
            "old_entries_dropped": old_entries_dropped,
            "configurations": summary.configurations + summary.configurations_skipped.len(),
            "configurations_skipped": summary.configurations_skipped.len(),
            "pipelines_left": summary.pipelines_left,
            "skipped_configurations": summary.configurations_skipped,
        }));
    }
    if args.scope.json {
        println!("{}", json!({ "titles": out }));
    } else {
        for o in &out {
            println!(
                "{}: rebuilt {} pipelines ({} of them calls of shader objects) from its record under {} configuration(s) ({} already in the store, {} compiled, {} written; {} entries of an earlier driver dropped)",
                o["title"].as_str().unwrap_or_default(),
                o["pipelines"],
                o["made_shader_objects"],
                o["configurations"],
                o["found"],
                o["compiled"],
                o["written"],
                o["old_entries_dropped"]
            );
            if let Some(n) = o["damaged_skipped"].as_u64().filter(|n| *n > 0) {
                println!(
                    "  {n} damaged entries of the record skipped (with the pipelines they held or named; the rest rebuilt)"
                );
            }
            let skipped = o["skipped_configurations"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !skipped.is_empty() {
                println!(
                    "  {} configuration(s) (or their calls of shader objects) this process cannot rebuild, {} pipelines left to the application's own background rebuild:",
                    skipped.len(),
                    o["pipelines_left"]
                );
                for why in skipped {
                    println!("    {}", why.as_str().unwrap_or_default());
                }
            }
        }
    }
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Makes sure the loader inserts pipekeep into this process's instance, with the library root
/// the rebuild was asked for: the implicit layer where installed, else the layer named
/// explicitly, from a build tree's manifest when no layer path says where it is.
fn enable_the_layer(root: &std::path::Path) {
    // Single-threaded still: nothing else reads the environment yet.
    std::env::set_var("PIPEKEEP_DIR", root);
    // Each title's own is set as it is rebuilt (see `run`).
    std::env::remove_var("PIPEKEEP_TITLE");
    std::env::remove_var("PIPEKEEP_DISABLE");
    // This command is the rebuild: the layer in this process starts none of its own.
    std::env::set_var("PIPEKEEP_REBUILD", "off");
    if std::env::var_os("VK_INSTANCE_LAYERS").is_none() {
        std::env::set_var("VK_INSTANCE_LAYERS", LAYER);
        let manifest = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent()?.parent()?.parent().map(|d| d.join("manifest")))
            .filter(|d| d.join(format!("{LAYER}.json")).is_file());
        let told = std::env::var_os("VK_ADD_LAYER_PATH").is_some()
            || std::env::var_os("VK_LAYER_PATH").is_some();
        if let Some(dir) = manifest.filter(|_| !told) {
            std::env::set_var("VK_ADD_LAYER_PATH", dir);
        }
    }
}
