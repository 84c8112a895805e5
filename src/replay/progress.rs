//! The replay's progress on stderr (`--progress`): a bar on a terminal; elsewhere the plain
//! `replay: N/M pipelines` lines, which a log or a script reading them keeps as they were.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// Pipelines made, told as they are made, from every thread that makes them.
pub struct Progress {
    total: usize,
    view: View,
}

enum View {
    Off,
    Bar(ProgressBar),
    Lines,
}

impl Progress {
    /// Shows nothing unless `on`.
    pub fn new(on: bool, total: usize) -> Progress {
        let view = if !on {
            View::Off
        } else if std::io::stderr().is_terminal() {
            View::Bar(bar(total as u64, "replay", "pipelines"))
        } else {
            View::Lines
        };
        Progress { total, view }
    }

    /// One more pipeline made: `done` so far.
    pub fn made(&self, done: usize) {
        match &self.view {
            View::Off => {}
            View::Bar(bar) => bar.inc(1),
            View::Lines if done.is_multiple_of(100) || done == self.total => {
                eprint!("\rreplay: {done}/{} pipelines", self.total);
            }
            View::Lines => {}
        }
    }

    /// Every pipeline made: the last count stays on its line.
    pub fn finish(&self) {
        match &self.view {
            View::Off => {}
            View::Bar(bar) => bar.finish(),
            View::Lines => eprintln!(),
        }
    }
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
