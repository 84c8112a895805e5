//! The command's progress on stderr (`--progress`, and `verify` of many entries): a bar on a
//! terminal; elsewhere the plain `replay: N/M pipelines` lines, which a log or a script reading
//! them keeps as they were. Only the command draws: the library (and so the layer) is told
//! nothing but counts.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressStyle};
use pipekeep::replay::replayer::{OnProgress, Progress};

/// The view of a replay's pipelines (`--progress`), one device's pipelines after another.
pub fn replay_progress(on: bool) -> Option<OnProgress> {
    if !on {
        return None;
    }
    let terminal = std::io::stderr().is_terminal();
    let shown: Mutex<Option<View>> = Mutex::new(None);
    Some(OnProgress(Arc::new(move |step| {
        let mut shown = shown.lock().unwrap_or_else(|e| e.into_inner());
        match step {
            Progress::Started(total) if terminal => {
                *shown = Some(View::Bar(bar(total as u64, "replay", "pipelines")))
            }
            Progress::Started(total) => *shown = Some(View::Lines(total)),
            Progress::Made(done) => match shown.as_ref() {
                Some(View::Bar(bar)) => bar.inc(1),
                Some(View::Lines(total)) if done.is_multiple_of(100) || done == *total => {
                    eprint!("\rreplay: {done}/{total} pipelines");
                }
                _ => {}
            },
            // The last count stays as it was: a replay stopped early shows where it stopped.
            Progress::Finished => match shown.take() {
                Some(View::Bar(bar)) => bar.abandon(),
                Some(View::Lines(_)) => eprintln!(),
                None => {}
            },
        }
    })))
}

enum View {
    Bar(ProgressBar),
    /// Plain lines, of this many pipelines.
    Lines(usize),
}

/// A bar on stderr counting `total` things, named `what` after the count; `prefix` first.
pub fn bar(total: u64, prefix: &str, what: &str) -> ProgressBar {
    let template =
        format!("{{prefix}} {{bar:40}} {{pos}}/{{len}} {what} ({{elapsed}}, {{eta}} left)");
    let style =
        ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(total)
        .with_style(style)
        .with_prefix(prefix.to_owned())
}
