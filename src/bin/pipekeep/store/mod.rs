//! The store subcommands: list, verify, prune, clear, stats and where. They only ever remove
//! `*.entry`, `*.piece`, `*.loading` and `*.tmp` files, identity directories of our naming and
//! (`clear`) a title's `record.foz`, and remove them by the layer's own rules beside a running
//! application: what a live process holds locked stays (`clear`), a file replaced since it was
//! checked stays (`verify --fix`), and `prune` is the layer's own bound pass.

mod clear;
mod list;
mod prune;
mod record;
mod stats;
mod verify;
mod where_;

pub use clear::{clear, ClearArgs};
pub use list::{list, ListArgs};
pub use prune::{prune, PruneArgs};
pub use stats::{stats, StatsArgs};
pub use verify::{verify, VerifyArgs};
pub use where_::{where_, WhereArgs};

use std::path::{Path, PathBuf};

use pipekeep::settings::Settings;
use pipekeep::store::inspect::titles;

/// Where to look: the library root and, optionally, one title.
#[derive(clap::Args, Clone)]
pub struct Scope {
    /// The library root (default: PIPEKEEP_DIR, else $XDG_CACHE_HOME/pipekeep, else ~/.cache/pipekeep).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Only this title.
    #[arg(long)]
    title: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

impl Scope {
    fn root(&self) -> Result<PathBuf, String> {
        self.dir
            .clone()
            .or_else(|| Settings::from_env().root)
            .ok_or_else(|| "no library root: set PIPEKEEP_DIR or HOME, or pass --dir".into())
    }

    /// The titles in scope; a title or root that does not exist is an error with a clear message.
    pub fn titles(&self) -> Result<(PathBuf, Vec<String>), String> {
        let root = self.root()?;
        if !root.is_dir() {
            return Err(format!("no pipeline library at {}", root.display()));
        }
        let all = titles(&root).map_err(|e| format!("cannot read {}: {e}", root.display()))?;
        match &self.title {
            Some(t) if all.contains(t) => Ok((root, vec![t.clone()])),
            Some(t) => Err(format!(
                "no title {t:?} in {} (titles: {})",
                root.display(),
                all.join(", ")
            )),
            None => Ok((root, all)),
        }
    }
}

/// A listing of a directory, or, if it cannot be read, a clear message and nothing: the rest of
/// the work goes on.
fn readable<T>(path: &Path, listing: std::io::Result<Vec<T>>) -> Vec<T> {
    listing.unwrap_or_else(|e| {
        eprintln!("pipekeep: cannot read {}: {e}; skipped", path.display());
        Vec::new()
    })
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS` UTC.
fn human_time(secs: f64) -> String {
    let s = secs.max(0.0) as i64;
    let (days, rem) = (s.div_euclid(86_400), s.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
