//! `pipekeep stats`: the history of recent runs from each title's `runs.jsonl`, what the store
//! keeps, and (`--plot`) an SVG of pipeline-creation time per run.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::{human_bytes, human_time, readable, Scope};
use pipekeep::store::inspect::{identity_dirs, sharing, Sharing};
use pipekeep::watch::read_runs;

/// The history of recent runs, from each title's runs.jsonl.
#[derive(clap::Args)]
pub struct StatsArgs {
    #[command(flatten)]
    scope: Scope,
    /// Write an SVG plot of pipeline-creation time per run.
    #[arg(long)]
    plot: Option<PathBuf>,
}

pub fn stats(args: StatsArgs) -> Result<ExitCode, String> {
    let (root, titles) = args.scope.titles()?;
    let mut all = Vec::new();
    let mut kept = Vec::new();
    for t in &titles {
        let runs = read_runs(&root.join(t).join("runs.jsonl")).unwrap_or_default();
        all.push((t.clone(), runs));
        let mut title_sharing = Sharing::default();
        for d in readable(&root.join(t), identity_dirs(&root.join(t))) {
            title_sharing.add(&sharing(&d.path));
        }
        kept.push(title_sharing);
    }
    if let Some(path) = &args.plot {
        let store = kept.iter().fold(Sharing::default(), |mut a, s| {
            a.add(s);
            a
        });
        std::fs::write(path, plot_svg(&all, &store))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if args.scope.json {
        let out: Vec<_> = all
            .iter()
            .zip(&kept)
            .map(|((t, runs), store)| json!({ "title": t, "runs": runs, "store": store }))
            .collect();
        println!("{}", json!({ "titles": out }));
        return Ok(ExitCode::SUCCESS);
    }
    for ((t, runs), store) in all.iter().zip(&kept) {
        println!("{t}: {} runs", runs.len());
        println!(
            "  store: {} kept ({} entries: {}; {} pieces: {}) for {} the entries name{}",
            human_bytes(store.kept_bytes()),
            store.entries,
            human_bytes(store.entry_bytes),
            store.pieces,
            human_bytes(store.piece_bytes),
            human_bytes(store.named_bytes),
            if store.kept_bytes() > 0 {
                format!(
                    " ({:.2}x saved)",
                    store.named_bytes as f64 / store.kept_bytes() as f64
                )
            } else {
                String::new()
            }
        );
        println!(
            "  {:<19} {:<7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>12} {:>11}",
            "when (UTC)",
            "backend",
            "built",
            "found",
            "compiled",
            "written",
            "unkeyed",
            "total_ms",
            "longest_ms"
        );
        for r in runs {
            let c = &r.tally;
            println!(
                "  {:<19} {:<7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>12.3} {:>11.3}",
                human_time(r.when),
                if r.backend.is_empty() {
                    "-"
                } else {
                    &r.backend
                },
                c.built,
                c.found,
                c.compiled,
                c.written,
                c.unkeyed,
                c.total_ms,
                c.longest_ms
            );
        }
    }
    if let Some(p) = &args.plot {
        println!("plot written to {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// A bar a run: pipeline-creation time, the found share in green, the rest in orange.
fn plot_svg(all: &[(String, Vec<pipekeep::watch::RunRecord>)], store: &Sharing) -> String {
    let runs: Vec<&pipekeep::watch::RunRecord> = all.iter().flat_map(|(_, r)| r.iter()).collect();
    let (w, h, left, bottom) = (800.0, 400.0, 70.0, 40.0);
    let max = runs.iter().map(|r| r.tally.total_ms).fold(1e-9, f64::max);
    let bar = (w - left - 20.0) / runs.len().max(1) as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{left}\" y=\"18\">pipeline creation per run (ms): found share green, compiled orange; max {max:.1} ms</text>\n"
    );
    for (i, r) in runs.iter().enumerate() {
        let t = &r.tally;
        let total = (h - bottom - 30.0) * t.total_ms / max;
        let found_share = if t.built > 0 {
            t.found as f64 / t.built as f64
        } else {
            0.0
        };
        let x = left + i as f64 * bar;
        let y = h - bottom - total;
        svg += &format!("<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{total:.1}\" fill=\"#e8913a\"><title>{} built, {} found, {:.1} ms</title></rect>\n", bar * 0.8, t.built, t.found, t.total_ms);
        svg += &format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#3aa655\"/>\n",
            h - bottom - total * found_share,
            bar * 0.8,
            total * found_share
        );
        svg += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            x,
            h - bottom + 15.0,
            i + 1
        );
    }
    // The store's split: what its entries name, against what entries and pieces keep.
    let named = store.named_bytes.max(store.kept_bytes()).max(1) as f64;
    let span = w - left - 20.0;
    let y = h - 4.0;
    for (x, width, fill, what) in [
        (
            left,
            span,
            "#dddddd",
            format!("named by the entries: {}", human_bytes(store.named_bytes)),
        ),
        (
            left,
            span * store.entry_bytes as f64 / named,
            "#4a78c2",
            format!("entries: {}", human_bytes(store.entry_bytes)),
        ),
        (
            left + span * store.entry_bytes as f64 / named,
            span * store.piece_bytes as f64 / named,
            "#9b59b6",
            format!("pieces: {}", human_bytes(store.piece_bytes)),
        ),
    ] {
        svg += &format!("<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{width:.1}\" height=\"8\" fill=\"{fill}\"><title>{what}</title></rect>\n", y - 8.0);
    }
    svg += &format!("<text x=\"5\" y=\"{y:.1}\">store</text>\n");
    svg += &format!(
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n</svg>\n",
        h - bottom,
        w - 10.0,
        h - bottom
    );
    svg
}
