//! The compile watch: counts every pipeline made through the layer this run, logs a line every
//! fifty and one at the end, and appends the run's line to `<title>/runs.jsonl`.
//!
//! The line's fields are read by tools: ` built=<n> total_ms=<ms> longest_ms=<ms> found=<n>`,
//! then `compiled=`, `written=`, `unkeyed=`, `passed=`, `refused=`, and where each pipeline's
//! time went ([`Phase`]): `key_ms=`, `lookup_ms=`, `cache_ms=`, `driver_ms=`, `keep_ms=`, then
//! `rebuild_made=` and `shared=`.
//! `built` counts every pipeline made, found, compiled or unkeyed; `found` those the driver
//! served from a kept entry.

use crate::sync::Unpoisoned;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

/// How one pipeline was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Served from a kept entry.
    Found,
    /// Compiled by the driver through a kept cache (its entry is counted by [`Watch::written`]
    /// once written).
    Compiled,
    /// Not in the store, and made from the binaries the driver compiled for another pipeline of
    /// this run that it builds alike (counted in `compiled` too, and as `shared`); its entry is
    /// written.
    Shared,
    /// Compiled although its entry was there and whole: the driver did not find the pipeline
    /// in it (counted in `compiled` too, and as `refused`).
    Refused,
    /// Could not be keyed: built as the application asked.
    Unkeyed,
    /// Keyed, but built as the application asked (no store, or the store failed).
    PassedThrough,
}

/// Where a pipeline's creation time goes, so that the layer's own share can be told from the
/// driver's: everything between the intercept's start and its end falls in exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Hashing the SPIR-V digests and the state into the key.
    Key,
    /// Opening, reading and checking the entry (a miss is an open that fails).
    Lookup,
    /// The loading marker, and the driver making the layer's own cache (and destroying one it
    /// would not build through); for a found entry of binaries, the driver's key for the create
    /// info (`vkGetPipelineKeyKHR`: most of it on RADV) and the binaries made from the entry.
    Cache,
    /// The driver's pipeline call itself (and an as-asked call for an unkept pipeline).
    Driver,
    /// After the build: the stamp, or the cache's data taken and queued for the writer; the
    /// layer's cache destroyed.
    Keep,
}

const PHASES: usize = 5;

/// Splits one pipeline's time among the phases: each [`Lap::to`] charges the time since the
/// last to a phase.
#[derive(Debug)]
pub struct Lap {
    last: Instant,
    ns: [u64; PHASES],
}

impl Lap {
    pub fn start() -> Lap {
        Lap {
            last: Instant::now(),
            ns: [0; PHASES],
        }
    }

    /// Charges the time since the last call (or the start) to `phase`.
    pub fn to(&mut self, phase: Phase) {
        let now = Instant::now();
        self.ns[phase as usize] += nanos(now - self.last);
        self.last = now;
    }

    /// A lap that charged `took` to `phase`.
    #[cfg(test)]
    pub(crate) fn charged(phase: Phase, took: Duration) -> Lap {
        let mut lap = Lap::start();
        lap.ns[phase as usize] = nanos(took);
        lap
    }

    /// The time charged so far, every phase together.
    fn total_ns(&self) -> u64 {
        self.ns.iter().sum()
    }

    /// The time since the start, the phase under way included.
    pub fn so_far_ns(&self) -> u64 {
        self.total_ns().saturating_add(nanos(self.last.elapsed()))
    }
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

/// Milliseconds spent in each [`Phase`], over every pipeline of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PhaseTimes {
    pub key_ms: f64,
    pub lookup_ms: f64,
    pub cache_ms: f64,
    pub driver_ms: f64,
    pub keep_ms: f64,
}

/// How many run lines `runs.jsonl` keeps.
pub const RUNS_KEPT: usize = 1000;
const LINE_EVERY: u64 = 50;

#[derive(Debug, Default)]
pub struct Watch {
    built: AtomicU64,
    found: AtomicU64,
    compiled: AtomicU64,
    written: AtomicU64,
    unkeyed: AtomicU64,
    passed: AtomicU64,
    refused: AtomicU64,
    shared: AtomicU64,
    rebuilt: AtomicU64,
    rebuild_written: AtomicU64,
    earlier_written: AtomicU64,
    shaders_from_entries: AtomicU64,
    shaders_compiled: AtomicU64,
    shaders_unkeyed: AtomicU64,
    shaders_passed: AtomicU64,
    shaders_ns: AtomicU64,
    /// The device's end: its threads stopped, the entries still queued written or left waiting.
    end_ns: AtomicU64,
    longest_ns: AtomicU64,
    /// The longest pipeline's ordinal (its `built` count), outcome and split.
    longest: std::sync::Mutex<Option<(u64, Outcome, [u64; PHASES])>>,
    phase_ns: [AtomicU64; PHASES],
    finished: AtomicBool,
}

/// The counts at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    pub built: u64,
    pub found: u64,
    pub compiled: u64,
    pub written: u64,
    pub unkeyed: u64,
    pub passed: u64,
    #[serde(default)]
    pub refused: u64,
    /// Pipelines the background rebuild made from the record (counted in nothing else; the name
    /// does not end in `built`, which tools read as the application's count).
    #[serde(default)]
    pub rebuild_made: u64,
    /// Entries the background rebuild wrote (counted apart from `written`, the application's).
    #[serde(default)]
    pub rebuild_written: u64,
    /// Of `compiled`, those made from binaries another pipeline of the run compiled.
    #[serde(default)]
    pub shared: u64,
    /// Entries an earlier process left waiting at its end, written by this one (apart from
    /// `written`, this run's).
    #[serde(default)]
    pub earlier_written: u64,
    pub total_ms: f64,
    pub longest_ms: f64,
    #[serde(default, flatten)]
    pub phases: PhaseTimes,
    /// Shader objects (`VK_EXT_shader_object`), counted apart from pipelines.
    #[serde(default, flatten)]
    pub shaders: ShaderTally,
    /// How long the device's end took the application (`vkDestroyDevice`, or the exit handler):
    /// the layer's threads stopped, the entries still queued written or left waiting.
    #[serde(default)]
    pub end_ms: f64,
}

/// Shader objects made through the layer: each of a kept entry, compiled (and kept), unkeyed
/// (made as asked), or passed through; and their creation time together. No name ends in
/// `built`, `found`, `total_ms` or `longest_ms`, which the pipeline counts own.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ShaderTally {
    pub shaders_from_entries: u64,
    pub shaders_compiled: u64,
    pub shaders_unkeyed: u64,
    pub shaders_passed: u64,
    pub shaders_ms: f64,
}

impl ShaderTally {
    /// Every shader object made through the layer.
    pub fn made(&self) -> u64 {
        self.shaders_from_entries
            + self.shaders_compiled
            + self.shaders_unkeyed
            + self.shaders_passed
    }
}

impl Tally {
    /// The watch's log line, fields in the order tools expect.
    pub fn line(&self) -> String {
        format!(
            "compile watch: built={} total_ms={:.3} longest_ms={:.3} found={} compiled={} written={} unkeyed={} passed={} refused={} key_ms={:.3} lookup_ms={:.3} cache_ms={:.3} driver_ms={:.3} keep_ms={:.3} rebuild_made={} shared={} rebuild_written={} earlier_written={} shaders={} shaders_from_entries={} shaders_compiled={} shaders_unkeyed={} shaders_passed={} shaders_ms={:.3} end_ms={:.1}",
            self.built, self.total_ms, self.longest_ms, self.found, self.compiled, self.written, self.unkeyed, self.passed, self.refused,
            self.phases.key_ms, self.phases.lookup_ms, self.phases.cache_ms, self.phases.driver_ms, self.phases.keep_ms, self.rebuild_made, self.shared, self.rebuild_written, self.earlier_written,
            self.shaders.made(), self.shaders.shaders_from_entries, self.shaders.shaders_compiled, self.shaders.shaders_unkeyed, self.shaders.shaders_passed, self.shaders.shaders_ms, self.end_ms
        )
    }
}

impl Watch {
    /// Counts one pipeline made in the time `lap` charged, split among its phases; logs the
    /// line when fifty more have been made.
    pub fn record(&self, outcome: Outcome, lap: &Lap) {
        let ns = lap.total_ns();
        for (sum, part) in self.phase_ns.iter().zip(lap.ns) {
            sum.fetch_add(part, Relaxed);
        }
        let longest_before = self.longest_ns.fetch_max(ns, Relaxed);
        let counter = match outcome {
            Outcome::Found => &self.found,
            Outcome::Compiled => &self.compiled,
            Outcome::Refused => {
                self.refused.fetch_add(1, Relaxed);
                &self.compiled
            }
            Outcome::Shared => {
                self.shared.fetch_add(1, Relaxed);
                &self.compiled
            }
            Outcome::Unkeyed => &self.unkeyed,
            Outcome::PassedThrough => &self.passed,
        };
        counter.fetch_add(1, Relaxed);
        let built = self.built.fetch_add(1, Relaxed) + 1;
        if ns > longest_before {
            // Rare (a new longest): where its time went, for the run's last line.
            let mut longest = self.longest.locked();
            if longest.is_none_or(|(_, _, split)| split.iter().sum::<u64>() < ns) {
                *longest = Some((built, outcome, lap.ns));
            }
        }
        if built.is_multiple_of(LINE_EVERY) {
            tracing::info!("{}", self.tally().line());
        }
    }

    /// Counts shader objects made together, each with `outcome` (found, compiled, unkeyed or
    /// passed through), in `ns` together.
    pub fn shaders(&self, outcome: Outcome, count: u64, ns: u64) {
        let counter = match outcome {
            Outcome::Found => &self.shaders_from_entries,
            Outcome::Compiled | Outcome::Refused | Outcome::Shared => &self.shaders_compiled,
            Outcome::Unkeyed => &self.shaders_unkeyed,
            Outcome::PassedThrough => &self.shaders_passed,
        };
        counter.fetch_add(count, Relaxed);
        self.shaders_ns.fetch_add(ns, Relaxed);
    }

    /// Counts one pipeline the background rebuild made (apart from the application's).
    pub fn rebuilt(&self) {
        self.rebuilt.fetch_add(1, Relaxed);
    }

    /// Counts one entry written (the writer thread calls it when the file is in place): the
    /// application's pipeline's, or the background rebuild's.
    pub fn written(&self, by_rebuild: bool) {
        let counter = if by_rebuild {
            &self.rebuild_written
        } else {
            &self.written
        };
        counter.fetch_add(1, Relaxed);
    }

    /// How long the device's end took, for its final line.
    pub fn ended(&self, took: Duration) {
        self.end_ns.store(nanos(took), Relaxed);
    }

    /// Counts one entry an earlier process left waiting, written by this one.
    pub fn earlier_written(&self) {
        self.earlier_written.fetch_add(1, Relaxed);
    }

    /// The longest pipeline of the run: which it was (its ordinal among those built), how it was
    /// made, and where its time went, as a log line's fields.
    pub fn longest_line(&self) -> Option<String> {
        let (ordinal, outcome, ns) = (*self.longest.locked())?;
        let ms = |p: Phase| ns[p as usize] as f64 / 1e6;
        Some(format!(
            "longest pipeline: ordinal={ordinal} outcome={outcome:?} key_ms={:.3} lookup_ms={:.3} cache_ms={:.3} driver_ms={:.3} keep_ms={:.3}",
            ms(Phase::Key), ms(Phase::Lookup), ms(Phase::Cache), ms(Phase::Driver), ms(Phase::Keep)
        ))
    }

    pub fn tally(&self) -> Tally {
        Tally {
            built: self.built.load(Relaxed),
            found: self.found.load(Relaxed),
            compiled: self.compiled.load(Relaxed),
            written: self.written.load(Relaxed),
            unkeyed: self.unkeyed.load(Relaxed),
            passed: self.passed.load(Relaxed),
            refused: self.refused.load(Relaxed),
            rebuild_made: self.rebuilt.load(Relaxed),
            rebuild_written: self.rebuild_written.load(Relaxed),
            shared: self.shared.load(Relaxed),
            earlier_written: self.earlier_written.load(Relaxed),
            // The phases partition each pipeline's time: their sums are the total.
            total_ms: self.phase_ns.iter().map(|p| p.load(Relaxed)).sum::<u64>() as f64 / 1e6,
            longest_ms: self.longest_ns.load(Relaxed) as f64 / 1e6,
            phases: self.phase_times(),
            shaders: ShaderTally {
                shaders_from_entries: self.shaders_from_entries.load(Relaxed),
                shaders_compiled: self.shaders_compiled.load(Relaxed),
                shaders_unkeyed: self.shaders_unkeyed.load(Relaxed),
                shaders_passed: self.shaders_passed.load(Relaxed),
                shaders_ms: self.shaders_ns.load(Relaxed) as f64 / 1e6,
            },
            end_ms: self.end_ns.load(Relaxed) as f64 / 1e6,
        }
    }

    fn phase_times(&self) -> PhaseTimes {
        let ms = |p: Phase| self.phase_ns[p as usize].load(Relaxed) as f64 / 1e6;
        PhaseTimes {
            key_ms: ms(Phase::Key),
            lookup_ms: ms(Phase::Lookup),
            cache_ms: ms(Phase::Cache),
            driver_ms: ms(Phase::Driver),
            keep_ms: ms(Phase::Keep),
        }
    }

    /// The end of the run: returns the final line (for the caller to log: at process exit the
    /// logger's thread-local state is gone) and appends the run to `runs` (if given). Only the
    /// first call does anything.
    pub fn finish(
        &self,
        runs: Option<&Path>,
        device: &str,
        identity: &str,
        backend: &str,
    ) -> Option<String> {
        if self.finished.swap(true, Relaxed) {
            return None;
        }
        let tally = self.tally();
        // A run that built nothing (vulkaninfo, a compositor) leaves no line.
        if let Some(path) = runs.filter(|_| tally.built + tally.shaders.made() > 0) {
            let run = RunRecord {
                when: unix_secs(SystemTime::now()),
                device: device.into(),
                identity: identity.into(),
                backend: backend.into(),
                tally,
            };
            if let Err(e) = append_run(path, &run) {
                tracing::warn!(path = %path.display(), error = %e, "could not write the run history");
            }
        }
        Some(tally.line())
    }
}

/// One line of `runs.jsonl`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunRecord {
    /// Seconds since the epoch at the run's end.
    pub when: f64,
    pub device: String,
    /// The identity directory's name.
    pub identity: String,
    /// The backend the run ended with (`binary` or `cache`; empty in lines of earlier versions).
    #[serde(default)]
    pub backend: String,
    #[serde(flatten)]
    pub tally: Tally,
}

/// Seconds since the epoch (0 for a time before it).
pub fn unix_secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Appends a run, keeping the last [`RUNS_KEPT`]: past that the file is rewritten through a
/// temporary file (locked, as an entry's, so that an opening sweeps one a stopped process left)
/// and a rename. Runs of several processes may end at once: each holds an exclusive `flock` on
/// the history while it reads and writes it, and checks after taking it that the path still
/// names the file it locked (a rewrite may have renamed a new one in). The history is read as
/// bytes: a line that is not UTF-8 (or not a run) is skipped by readers and never makes an
/// append fail, and a last line cut short by a stopped process is ended before this one.
pub fn append_run(path: &Path, run: &RunRecord) -> std::io::Result<()> {
    use std::io::{Read, Seek};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let line = serde_json::to_string(run).map_err(std::io::Error::other)?;
    for _ in 0..8 {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)?;
        let ours = f.metadata()?;
        if !ours.is_file() {
            return Err(std::io::Error::other(
                "the run history is not a regular file",
            ));
        }
        f.lock()?;
        match std::fs::symlink_metadata(path) {
            Ok(now) if now.ino() == ours.ino() && now.dev() == ours.dev() => {}
            _ => continue, // replaced while we waited: lock the new one
        }
        let mut existing = Vec::new();
        f.rewind()?;
        f.read_to_end(&mut existing)?;
        let lines: Vec<&[u8]> = existing
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        if lines.len() < RUNS_KEPT {
            let torn = existing.last().is_some_and(|b| *b != b'\n');
            return writeln!(f, "{}{line}", if torn { "\n" } else { "" });
        }
        let mut text = Vec::with_capacity(existing.len());
        for kept in &lines[lines.len() + 1 - RUNS_KEPT..] {
            text.extend_from_slice(kept);
            text.push(b'\n');
        }
        text.extend_from_slice(line.as_bytes());
        text.push(b'\n');
        let written = crate::store::files::write_atomically(path, &text, SystemTime::now())
            .map_err(std::io::Error::other)?;
        if written == crate::store::files::Written::Whole(text.len() as u64) {
            return Ok(());
        }
        // Skipped: an opening is sweeping a temporary file a stopped rewrite left (we hold the
        // history's lock, so no other writer has it): try again.
    }
    Err(std::io::Error::other("the run history kept being replaced"))
}

/// Reads a run history; lines that are not UTF-8 or do not parse are skipped.
pub fn read_runs(path: &Path) -> std::io::Result<Vec<RunRecord>> {
    Ok(std::fs::read(path)?
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn so_far_counts_the_charged_phases_and_the_one_under_way() {
        let mut lap = Lap::charged(Phase::Key, Duration::from_millis(5));
        assert!(lap.so_far_ns() >= 5_000_000, "what was charged");
        std::thread::sleep(Duration::from_millis(2));
        let under_way = lap.so_far_ns();
        assert!(
            under_way >= 7_000_000,
            "and the phase under way: {under_way}"
        );
        lap.to(Phase::Driver);
        assert!(lap.so_far_ns() >= under_way, "charging moves nothing back");
    }

    #[test]
    fn the_line_carries_the_fields_tools_read_in_order() {
        let w = Watch::default();
        let lap = |took| Lap::charged(Phase::Driver, took);
        w.record(Outcome::Found, &lap(Duration::from_micros(10)));
        w.record(Outcome::Compiled, &lap(Duration::from_millis(3)));
        w.written(false);
        w.record(Outcome::Unkeyed, &lap(Duration::from_millis(1)));
        let line = w.tally().line();
        assert!(
            line.contains(" built=3 total_ms=4.010 longest_ms=3.000 found=1 "),
            "{line}"
        );
        assert!(
            line.contains(" compiled=1 written=1 unkeyed=1 passed=0 refused=0 key_ms="),
            "{line}"
        );
        // No other field name ends in built, found, total_ms or longest_ms.
        let names: Vec<&str> = line
            .split_whitespace()
            .filter_map(|f| f.split_once('='))
            .map(|(k, _)| k)
            .collect();
        for suffix in ["built", "found", "total_ms", "longest_ms"] {
            assert_eq!(
                names.iter().filter(|n| n.ends_with(suffix)).count(),
                1,
                "{suffix}"
            );
        }
    }

    #[test]
    fn the_run_history_keeps_the_last_thousand_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        for i in 0..(RUNS_KEPT + 5) {
            let run = RunRecord {
                when: i as f64,
                device: "d".into(),
                identity: "i".into(),
                backend: "cache".into(),
                tally: Tally::default(),
            };
            append_run(&path, &run).unwrap();
        }
        let runs = read_runs(&path).unwrap();
        assert_eq!(runs.len(), RUNS_KEPT);
        assert_eq!(runs[0].when, 5.0);
        assert_eq!(runs.last().unwrap().when, (RUNS_KEPT + 4) as f64);
    }

    #[test]
    fn the_longest_pipeline_is_named_with_its_split() {
        let w = Watch::default();
        assert_eq!(w.longest_line(), None);
        w.record(
            Outcome::Compiled,
            &Lap::charged(Phase::Driver, Duration::from_millis(1)),
        );
        w.record(
            Outcome::Found,
            &Lap::charged(Phase::Lookup, Duration::from_millis(7)),
        );
        w.record(
            Outcome::Found,
            &Lap::charged(Phase::Cache, Duration::from_millis(2)),
        );
        let line = w.longest_line().unwrap();
        assert!(
            line.starts_with("longest pipeline: ordinal=2 outcome=Found key_ms=0.000 lookup_ms=7.000 cache_ms=0.000"),
            "{line}"
        );
    }

    #[test]
    fn finish_writes_once_and_a_run_that_built_nothing_leaves_no_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let idle = Watch::default();
        assert!(idle
            .finish(Some(&path), "dev", "id", "cache")
            .unwrap()
            .contains(" built=0 "));
        assert!(!path.exists(), "nothing built, nothing written");
        let w = Watch::default();
        w.record(
            Outcome::Compiled,
            &Lap::charged(Phase::Driver, Duration::from_millis(1)),
        );
        assert!(w.finish(Some(&path), "dev", "id", "cache").is_some());
        assert_eq!(w.finish(Some(&path), "dev", "id", "cache"), None);
        assert_eq!(read_runs(&path).unwrap().len(), 1);
    }

    /// The history's line of a run at second `n`.
    fn a_run(n: u64) -> RunRecord {
        RunRecord {
            when: n as f64,
            device: "dev".into(),
            identity: "id".into(),
            backend: "cache".into(),
            tally: Tally::default(),
        }
    }

    #[test]
    fn a_history_that_is_not_utf8_or_ends_torn_still_takes_every_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let run = a_run;
        append_run(&path, &run(1)).unwrap();
        // A line of bytes that are not UTF-8, then a line cut short by a stopped process.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"\xff\xfe not text\n{\"when\": 2").unwrap();
        drop(f);
        append_run(&path, &run(3)).unwrap();
        append_run(&path, &run(4)).unwrap();
        let read: Vec<f64> = read_runs(&path).unwrap().iter().map(|r| r.when).collect();
        assert_eq!(read, [1.0, 3.0, 4.0]);
        // And across a rewrite.
        for n in 5..(RUNS_KEPT as u64 + 10) {
            append_run(&path, &run(n)).unwrap();
        }
        let read = read_runs(&path).unwrap();
        assert_eq!(read.len(), RUNS_KEPT);
        assert_eq!(read.last().unwrap().when, (RUNS_KEPT + 9) as f64);
        assert!(!dir.path().join("runs.jsonl.tmp").exists());
    }

    #[test]
    fn runs_ending_at_once_in_many_processes_lose_no_line_across_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let run = a_run;
        // Just short of the limit: the writers below cross it, so some of them rewrite.
        for n in 0..(RUNS_KEPT as u64 - 4) {
            append_run(&path, &run(n)).unwrap();
        }
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let (path, run) = (&path, &run);
                s.spawn(move || append_run(path, &run(100_000 + t)).unwrap());
            }
        });
        let runs = read_runs(&path).unwrap();
        assert_eq!(runs.len(), RUNS_KEPT);
        let newest = runs.iter().filter(|r| r.when >= 100_000.0).count();
        assert_eq!(newest, 8, "every concurrent run kept its line");
    }
}
