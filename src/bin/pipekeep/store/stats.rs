//! `pipekeep stats`: the history of recent runs from each title's `runs.jsonl`, what the store
//! keeps, and (`--plot`) an SVG of pipeline-creation time per run.

use std::path::PathBuf;
use std::process::ExitCode;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
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
        std::fs::write(path, plot_svg(&all, &store)?)
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

/// The plot's colours: a run's compiled share, its found share, and the store's split.
const COMPILED: RGBColor = RGBColor(0xe8, 0x91, 0x3a);
const FOUND: RGBColor = RGBColor(0x3a, 0xa6, 0x55);
const NAMED: RGBColor = RGBColor(0xdd, 0xdd, 0xdd);
const ENTRIES: RGBColor = RGBColor(0x4a, 0x78, 0xc2);
const PIECES: RGBColor = RGBColor(0x9b, 0x59, 0xb6);
/// Up to this many runs each is numbered, and up to [`LABELLED`] its bar says what it found.
const NUMBERED: usize = 25;
const LABELLED: usize = 10;

/// A bar a run: pipeline-creation time, the found share in green, the rest in orange; under it
/// the store's split: what its entries name, against what entries and pieces keep. Drawn by
/// plotters' SVG backend (the command's dependency only: the layer links none of it).
fn plot_svg(
    all: &[(String, Vec<pipekeep::watch::RunRecord>)],
    store: &Sharing,
) -> Result<String, String> {
    let runs: Vec<&pipekeep::watch::RunRecord> = all.iter().flat_map(|(_, r)| r.iter()).collect();
    let mut svg = String::new();
    draw(&mut svg, &runs, store).map_err(|e| format!("cannot draw the plot: {e}"))?;
    Ok(svg)
}

fn draw(
    svg: &mut String,
    runs: &[&pipekeep::watch::RunRecord],
    store: &Sharing,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(svg, (800, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(360);
    let max = runs.iter().map(|r| r.tally.total_ms).fold(1e-9, f64::max);
    let n = runs.len().max(1) as u32;
    let mut chart = ChartBuilder::on(&upper)
        .caption(
            format!(
                "pipeline creation per run (ms): found share green, compiled orange; max {max:.1} ms"
            ),
            ("sans-serif", 14),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        // Segments 0 to n-1 hold the runs (`0..n - 1` has n values; a range of one value has no
        // width, so one run takes the first of two).
        .build_cartesian_2d((0..(n.max(2) - 1)).into_segmented(), 0.0..max * 1.1)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .max_light_lines(1)
        .x_desc("run")
        .y_desc("ms")
        .x_labels(n.min(NUMBERED as u32) as usize)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) if *i < n => (i + 1).to_string(),
            _ => String::new(),
        })
        .draw()?;
    // A run's bar spans its segment, a margin either side.
    let bar = |i: usize, top: f64, colour: RGBColor| {
        let i = i as u32;
        let mut r = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), top),
            ],
            colour.filled(),
        );
        r.set_margin(0, 0, 2, 2);
        r
    };
    chart.draw_series(
        runs.iter()
            .enumerate()
            .map(|(i, r)| bar(i, r.tally.total_ms, COMPILED)),
    )?;
    chart.draw_series(runs.iter().enumerate().filter_map(|(i, r)| {
        let t = &r.tally;
        (t.found > 0 && t.built > 0)
            .then(|| bar(i, t.total_ms * t.found as f64 / t.built as f64, FOUND))
    }))?;
    // Where each bar has room: how many of its pipelines were found, of those built.
    if runs.len() <= LABELLED {
        chart.draw_series(runs.iter().enumerate().map(|(i, r)| {
            let t = &r.tally;
            Text::new(
                format!("{}/{} found", t.found, t.built),
                (SegmentValue::CenterOf(i as u32), t.total_ms),
                ("sans-serif", 11)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )
        }))?;
    }

    // The store's split: what its entries name, against what entries and pieces keep.
    let named = store.named_bytes.max(store.kept_bytes()).max(1) as f64;
    let (label, strip) = lower.split_horizontally(70);
    label.draw(&Text::new("store", (5, 27), ("sans-serif", 12)))?;
    let (text, strip) = strip.split_vertically(22);
    text.draw(&Text::new(
        format!(
            "named by the entries: {}; entries: {}; pieces: {}",
            human_bytes(store.named_bytes),
            human_bytes(store.entry_bytes),
            human_bytes(store.piece_bytes)
        ),
        (0, 4),
        ("sans-serif", 12),
    ))?;
    let mut split = ChartBuilder::on(&strip)
        .margin_right(20)
        .build_cartesian_2d(0.0..named, 0.0..1.0)?;
    let entries = store.entry_bytes as f64;
    let pieces = store.piece_bytes as f64;
    split.draw_series([
        Rectangle::new([(0.0, 0.0), (named, 0.6)], NAMED.filled()),
        Rectangle::new([(0.0, 0.0), (entries, 0.6)], ENTRIES.filled()),
        Rectangle::new([(entries, 0.0), (entries + pieces, 0.6)], PIECES.filled()),
    ])?;
    root.present()?;
    Ok(())
}
