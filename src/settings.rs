//! Environment -> validated settings, read once per process. A bad value gets one clear log line
//! (through [`Settings::problems`], logged once the layer's logger is up) and the default.
//! Every `PIPEKEEP_*` setting may also come from the Khronos layer-settings conventions
//! ([`sources`]: the application's `VK_EXT_layer_settings`, then `vk_layer_settings.txt`); the
//! environment wins.

pub mod sources;

use std::ffi::CStr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// The layer's name, as in its manifests: the name its settings are read under
/// (`VK_EXT_layer_settings`, `vk_layer_settings.txt`).
pub const LAYER_NAME: &CStr = c"VK_LAYER_PIPEKEEP_pipeline_store";

/// The default size bound: 4 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 4 << 30;
/// The default bound of the whole library, every title together: 4 GiB. Mesa's disk cache keeps
/// 1 GiB for every program, NVIDIA's 1 GiB by default (raised since); pipekeep's entries are the
/// driver's own size and stand beside that cache, so four times it, as much as one title's own
/// bound: a title at its default bound still fits whole, and titles of ncnn's size (44 MB) or
/// pygfx's (11 MB) fit by the hundred.
pub const DEFAULT_LIBRARY_MAX_BYTES: u64 = 4 << 30;
/// `PIPEKEEP_READ_AHEAD`'s default: the bytes of entries read ahead and not yet taken.
pub const DEFAULT_READ_AHEAD: u64 = 64 << 20;

/// `PIPEKEEP_BACKEND`: how kept pipelines are built (SPEC "Building a pipeline: two backends").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendSetting {
    /// `binary` where the device offers pipeline binaries that load in another process, else
    /// `cache`.
    Auto,
    Binary,
    Cache,
}

/// `PIPEKEEP_FOUND_CALLS`: how many found pipelines may be inside the driver at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoundCallsSetting {
    /// Where it measured faster: NVIDIA, a few at once (the layer's `found_gate`); elsewhere no
    /// bound.
    Auto,
    /// No bound.
    Off,
    /// At most this many (at least 1).
    AtMost(usize),
}

/// `PIPEKEEP_REBUILD`: whether a driver change rebuilds the title's record in the background.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RebuildSetting {
    Background,
    Off,
}

/// `PIPEKEEP_TEST_OPENING_LATE` (test only): how long the opening thread waits before its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpeningLate {
    /// Until the first pipeline has opened the store.
    UntilOpened,
    /// Until the first pipeline has opened the store and the device is destroyed.
    UntilDestroyed,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// `PIPEKEEP_DISABLE` set to anything non-empty: the layer passes everything through.
    pub disabled: bool,
    /// `PIPEKEEP_DIR`, else `$XDG_CACHE_HOME/pipekeep`, else `~/.cache/pipekeep`; `None` if none
    /// of those can be found (the layer is then a pass-through).
    pub root: Option<PathBuf>,
    /// `PIPEKEEP_TITLE`, made safe for a path, as the process started (the layer reads it again
    /// at each `vkCreateInstance`: [`title_now`]).
    pub title: Option<String>,
    /// `PIPEKEEP_MAX_BYTES`.
    pub max_bytes: u64,
    /// `PIPEKEEP_LIBRARY_MAX_BYTES`: the bound of every title together (`store::library`).
    pub library_max_bytes: u64,
    /// `PIPEKEEP_READ_AHEAD`: the most bytes of entries read ahead and not yet taken; 0 reads
    /// nothing ahead.
    pub read_ahead: u64,
    /// `PIPEKEEP_PIECE_MEMORY`: the most bytes of checked pieces (payload bytes entries share)
    /// a store holds in memory for reuse. A piece larger than this is never held: below a few
    /// MB, NVIDIA's 1.78 MB dictionary is read and checked again for every entry naming it.
    pub piece_memory: u64,
    /// `PIPEKEEP_BACKEND`.
    pub backend: BackendSetting,
    /// `PIPEKEEP_REBUILD`.
    pub rebuild: RebuildSetting,
    /// `PIPEKEEP_FOUND_CALLS`.
    pub found_calls: FoundCallsSetting,
    /// `PIPEKEEP_SHARE_BUILDS` (`on`, the default, or `off`): a `binary` miss the driver would
    /// build as it built a pipeline earlier in the run is made from that pipeline's binaries
    /// (never on NVIDIA, whose driver is not asked for its keys); a `cache` miss is built through
    /// a cache seeded with the data of earlier pipelines with its SPIR-V or its stages.
    pub share_builds: bool,
    /// `PIPEKEEP_DICTIONARY_ONCE` (`on`, the default, or `off`): a found entry whose NVIDIA cache
    /// data carries the driver's dictionary goes to the driver without it once the device holds
    /// that dictionary.
    pub dictionary_once: bool,
    /// `PIPEKEEP_LOG`: a tracing filter.
    pub log_filter: String,
    /// `PIPEKEEP_LOG_FILE`; stderr when unset.
    pub log_file: Option<PathBuf>,
    /// Test only (`PIPEKEEP_TEST_PANIC`): the pipeline intercepts panic, to show the fallback.
    pub test_panic: bool,
    /// Test only (`PIPEKEEP_TEST_PANIC_AFTER_BUILD`): the pipeline intercepts panic after the
    /// driver made a pipeline, to show that the fallback leaves nothing behind.
    pub test_panic_after_build: bool,
    /// Test only (`PIPEKEEP_TEST_ABORT_IN_LOAD`): the process aborts at its first load of an
    /// entry, after the loading marker names it: a run that dies inside the driver. Set to a
    /// path (a hard link the test made to a piece file), only at a load of an entry naming a
    /// piece whose file is that very file (directly or through a list): a piece file that stops
    /// the driver, whichever entry brings it, until it is dropped (one written anew is another
    /// file).
    pub test_abort_in_load: Option<String>,
    /// Test only (`PIPEKEEP_TEST_FAIL_SETUP`: `instance` or `device`): recording that level's
    /// data panics, to show that every call still passes through.
    pub test_fail_setup: Option<String>,
    /// Test only (`PIPEKEEP_TEST_OPENING_LATE`): the opening thread waits (at most ten seconds)
    /// until the first pipeline has opened the store, as when an application's first pipeline
    /// comes before the thread has run; with `until-destroyed`, until the device is destroyed
    /// too, as when a short run ends before the thread has run.
    pub test_opening_late: Option<OpeningLate>,
    /// Test only (`PIPEKEEP_TEST_READ_AHEAD_FIRST`): a lookup waits until reading ahead has ended,
    /// so a warm run's lookups meet what was read ahead.
    pub test_read_ahead_first: bool,
    /// Test only (`PIPEKEEP_TEST_REFUSE_BINARIES`): every kept binary counts as refused by the
    /// driver, as NVIDIA's driver refuses binaries another process wrote.
    pub test_refuse_binaries: bool,
    /// Test only (`PIPEKEEP_TEST_OPEN_TIME`, seconds since the epoch): the store's opening time.
    pub test_open_time: Option<SystemTime>,
    /// Test only (`PIPEKEEP_TEST_REBUILD_FIRST`): `vkDestroyDevice` lets a background rebuild
    /// finish instead of stopping it (a loaded machine may give an idle-priority thread no time
    /// before a short run ends).
    pub test_rebuild_first: bool,
    /// Test only (`PIPEKEEP_TEST_STALL_REBUILD`, a path): the background rebuild's first object
    /// made stalls its thread inside its object table's write lock, as an idle-priority thread
    /// no core is given, until the application has made five pipelines more; the path is made
    /// when the stall begins.
    pub test_stall_rebuild: Option<std::path::PathBuf>,
    /// Test only (`PIPEKEEP_TEST_CHUNKED_FROM`): cut `cache` payloads (but NVIDIA's, cut by
    /// records) of this many bytes or more into FastCDC's smallest chunks (RADV's are smaller
    /// than the threshold chosen).
    pub test_chunked_from: Option<usize>,
    /// Test only (`PIPEKEEP_TEST_HOLD_WRITES`): the writer thread takes no entry before the
    /// device's end, so that what waits there is what a busy application leaves.
    pub test_hold_writes: bool,
    /// Test only (`PIPEKEEP_TEST_PIECES_ALWAYS`): every stage binary large enough is a piece,
    /// shared or not.
    pub test_pieces_always: bool,
    /// Values that were refused, each with the default taken instead.
    pub problems: Vec<String>,
}

impl Settings {
    /// Reads the settings from the process environment and the settings file (what a command
    /// sees: no application's settings).
    pub fn from_env() -> Settings {
        Settings::from_process(&[])
    }

    /// Reads the settings from the process environment, the application's layer settings (name,
    /// value: [`sources::application_settings`]) and the settings file.
    pub fn from_process(application: &[(String, String)]) -> Settings {
        let env = |name: &str| std::env::var(name).ok();
        let cwd = std::env::current_dir().ok();
        Settings::from_sources(
            &env,
            &sources::Sources::gather(&env, cwd.as_deref(), application),
        )
    }

    /// Reads the settings through `env`, then what `sources` hold.
    pub fn from_sources(
        env: &dyn Fn(&str) -> Option<String>,
        sources: &sources::Sources,
    ) -> Settings {
        let mut settings = Settings::from_lookup(|name| sources.lookup(env, name).0);
        let mut problems = sources.problems.clone();
        // A refused value names its variable; one that came from elsewhere says where, so the
        // user finds the line to mend.
        problems.extend(settings.problems.drain(..).map(|p| {
            let origin = sources::TABLE
                .iter()
                .map(|s| s.env())
                .find(|var| p.starts_with(&format!("{var}=")))
                .map(|var| sources.lookup(env, &var).1);
            match origin {
                Some(o @ (sources::Origin::Application | sources::Origin::File(_))) => {
                    format!("{p} (given by the {o})")
                }
                _ => p,
            }
        }));
        settings.problems = problems;
        settings
    }

    /// Reads the settings through `var` (the environment, or a table in tests).
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Settings {
        let non_empty = |name: &str| var(name).filter(|v| !v.is_empty());
        let mut problems = Vec::new();
        let root = non_empty("PIPEKEEP_DIR").map(PathBuf::from).or_else(|| {
            non_empty("XDG_CACHE_HOME")
                .map(|c| PathBuf::from(c).join("pipekeep"))
                .or_else(|| non_empty("HOME").map(|h| PathBuf::from(h).join(".cache/pipekeep")))
        });
        let mut bytes = |name: &str, default: u64| match non_empty(name) {
            None => default,
            Some(v) => v.trim().parse::<u64>().unwrap_or_else(|_| {
                problems.push(format!(
                    "{name}={v:?} is not an integer >= 0; using the default {default}"
                ));
                default
            }),
        };
        let max_bytes = bytes("PIPEKEEP_MAX_BYTES", DEFAULT_MAX_BYTES);
        let library_max_bytes = bytes("PIPEKEEP_LIBRARY_MAX_BYTES", DEFAULT_LIBRARY_MAX_BYTES);
        let read_ahead = bytes("PIPEKEEP_READ_AHEAD", DEFAULT_READ_AHEAD);
        let piece_memory = bytes(
            "PIPEKEEP_PIECE_MEMORY",
            crate::store::pieces::DEFAULT_MEMORY,
        );
        let backend = one_of(
            &non_empty,
            "PIPEKEEP_BACKEND",
            &mut problems,
            &[
                ("auto", BackendSetting::Auto),
                ("binary", BackendSetting::Binary),
                ("cache", BackendSetting::Cache),
            ],
        );
        let rebuild = one_of(
            &non_empty,
            "PIPEKEEP_REBUILD",
            &mut problems,
            &[
                ("background", RebuildSetting::Background),
                ("off", RebuildSetting::Off),
            ],
        );
        let found_calls = match non_empty("PIPEKEEP_FOUND_CALLS").as_deref() {
            None | Some("auto") => FoundCallsSetting::Auto,
            Some("off") => FoundCallsSetting::Off,
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) if n >= 1 => FoundCallsSetting::AtMost(n),
                _ => {
                    problems.push(format!(
                        "PIPEKEEP_FOUND_CALLS={v:?} is not auto, off or an integer >= 1; using auto"
                    ));
                    FoundCallsSetting::Auto
                }
            },
        };
        let share_builds = one_of(
            &non_empty,
            "PIPEKEEP_SHARE_BUILDS",
            &mut problems,
            &[("on", true), ("off", false)],
        );
        let dictionary_once = one_of(
            &non_empty,
            "PIPEKEEP_DICTIONARY_ONCE",
            &mut problems,
            &[("on", true), ("off", false)],
        );
        // An implicit layer runs inside every Vulkan program: quiet unless asked.
        let log_filter = non_empty("PIPEKEEP_LOG").unwrap_or_else(|| "warn".into());
        let test_open_time =
            non_empty("PIPEKEEP_TEST_OPEN_TIME").and_then(|v| match v.parse::<u64>() {
                Ok(secs) => Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
                Err(_) => {
                    problems.push(format!(
                        "PIPEKEEP_TEST_OPEN_TIME={v:?} is not seconds since the epoch; ignored"
                    ));
                    None
                }
            });
        Settings {
            disabled: non_empty("PIPEKEEP_DISABLE").is_some(),
            root,
            title: non_empty("PIPEKEEP_TITLE").map(|t| safe_title(&t)),
            max_bytes,
            library_max_bytes,
            read_ahead,
            piece_memory,
            backend,
            rebuild,
            found_calls,
            share_builds,
            dictionary_once,
            log_filter,
            log_file: non_empty("PIPEKEEP_LOG_FILE").map(PathBuf::from),
            test_panic: non_empty("PIPEKEEP_TEST_PANIC").is_some(),
            test_panic_after_build: non_empty("PIPEKEEP_TEST_PANIC_AFTER_BUILD").is_some(),
            test_abort_in_load: non_empty("PIPEKEEP_TEST_ABORT_IN_LOAD"),
            test_fail_setup: non_empty("PIPEKEEP_TEST_FAIL_SETUP"),
            test_refuse_binaries: non_empty("PIPEKEEP_TEST_REFUSE_BINARIES").is_some(),
            test_read_ahead_first: non_empty("PIPEKEEP_TEST_READ_AHEAD_FIRST").is_some(),
            test_opening_late: non_empty("PIPEKEEP_TEST_OPENING_LATE").map(|v| {
                if v == "until-destroyed" {
                    OpeningLate::UntilDestroyed
                } else {
                    OpeningLate::UntilOpened
                }
            }),
            test_open_time,
            test_rebuild_first: non_empty("PIPEKEEP_TEST_REBUILD_FIRST").is_some(),
            test_stall_rebuild: non_empty("PIPEKEEP_TEST_STALL_REBUILD").map(Into::into),
            test_chunked_from: non_empty("PIPEKEEP_TEST_CHUNKED_FROM").and_then(|v| v.parse().ok()),
            test_pieces_always: non_empty("PIPEKEEP_TEST_PIECES_ALWAYS").is_some(),
            test_hold_writes: non_empty("PIPEKEEP_TEST_HOLD_WRITES").is_some(),
            problems,
        }
    }
}

/// The value of the setting `name` (read through `var`) among `options`, the first the default:
/// an unknown one gets one line in `problems`, saying what it may be, and the default.
fn one_of<T: Copy>(
    var: &dyn Fn(&str) -> Option<String>,
    name: &str,
    problems: &mut Vec<String>,
    options: &[(&str, T)],
) -> T {
    let (default_name, default) = options[0];
    let Some(value) = var(name) else {
        return default;
    };
    if let Some((_, chosen)) = options.iter().find(|(n, _)| *n == value) {
        return *chosen;
    }
    let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
    let (last, rest) = names.split_last().expect("options");
    problems.push(format!(
        "{name}={value:?} is not {} or {last}; using {default_name}",
        rest.join(", ")
    ));
    default
}

/// A title made safe for a path: only `A-Za-z0-9._-` (others become `_`), never `.` or `..`,
/// never empty, at most 64 bytes.
pub fn safe_title(raw: &str) -> String {
    let mut t: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if t.is_empty() || t.chars().all(|c| c == '.') {
        t = t.replace('.', "_");
        if t.is_empty() {
            t.push_str("unnamed");
        }
    }
    t
}

/// `PIPEKEEP_TITLE` as the environment holds it now, made safe for a path (the layer reads it at
/// each `vkCreateInstance`: a process may make instances for several titles in turn).
pub fn title_now() -> Option<String> {
    std::env::var("PIPEKEEP_TITLE")
        .ok()
        .filter(|t| !t.is_empty())
        .map(|t| safe_title(&t))
}

/// `PIPEKEEP_AS_IF_LAYERS_BELOW` as the environment holds it now (read at each `vkCreateDevice`):
/// set by `pipekeep rebuild` for a configuration recorded with a layer below pipekeep, so that
/// the device is planned as it was then (no extension added, so no global key of the driver in
/// its keys) and the entries written are the ones that application looks up.
pub fn as_if_layers_below_now() -> bool {
    std::env::var_os("PIPEKEEP_AS_IF_LAYERS_BELOW").is_some_and(|v| !v.is_empty())
}

/// The title of the running executable, for an application that names none.
pub fn executable_title() -> String {
    let exe = std::env::current_exe().ok();
    safe_title(
        exe.as_deref()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .unwrap_or("unnamed"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(vars: &[(&str, &str)]) -> Settings {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_follow_xdg_then_home() {
        let s = with(&[("HOME", "/home/u")]);
        assert_eq!(s.root, Some(PathBuf::from("/home/u/.cache/pipekeep")));
        assert_eq!(s.max_bytes, DEFAULT_MAX_BYTES);
        assert_eq!(s.log_filter, "warn");
        assert!(!s.disabled && s.problems.is_empty());
        let s = with(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/c")]);
        assert_eq!(s.root, Some(PathBuf::from("/c/pipekeep")));
        let s = with(&[("HOME", "/home/u"), ("PIPEKEEP_DIR", "/lib")]);
        assert_eq!(s.root, Some(PathBuf::from("/lib")));
        assert_eq!(with(&[]).root, None);
    }

    #[test]
    fn any_integer_at_least_zero_is_a_bound_and_anything_else_gets_the_default_and_a_line() {
        assert_eq!(with(&[("PIPEKEEP_MAX_BYTES", "0")]).max_bytes, 0);
        assert_eq!(
            with(&[("PIPEKEEP_MAX_BYTES", "18446744073709551615")]).max_bytes,
            u64::MAX
        );
        for bad in ["-1", "4G", "1.5", "lots"] {
            let s = with(&[("PIPEKEEP_MAX_BYTES", bad)]);
            assert_eq!(s.max_bytes, DEFAULT_MAX_BYTES);
            assert_eq!(s.problems.len(), 1);
            assert!(s.problems[0].contains("PIPEKEEP_MAX_BYTES"));
        }
    }

    #[test]
    fn the_library_bound_is_its_own_setting() {
        let s = with(&[]);
        assert_eq!(s.library_max_bytes, DEFAULT_LIBRARY_MAX_BYTES);
        let s = with(&[("PIPEKEEP_LIBRARY_MAX_BYTES", "1000")]);
        assert_eq!(
            (s.library_max_bytes, s.max_bytes),
            (1000, DEFAULT_MAX_BYTES)
        );
        let s = with(&[("PIPEKEEP_LIBRARY_MAX_BYTES", "4G")]);
        assert_eq!(s.library_max_bytes, DEFAULT_LIBRARY_MAX_BYTES);
        assert!(s.problems[0].contains("PIPEKEEP_LIBRARY_MAX_BYTES"));
    }

    #[test]
    fn the_backend_is_auto_binary_or_cache_and_anything_else_gets_auto_and_a_line() {
        assert_eq!(with(&[]).backend, BackendSetting::Auto);
        assert_eq!(
            with(&[("PIPEKEEP_BACKEND", "binary")]).backend,
            BackendSetting::Binary
        );
        assert_eq!(
            with(&[("PIPEKEEP_BACKEND", "cache")]).backend,
            BackendSetting::Cache
        );
        let s = with(&[("PIPEKEEP_BACKEND", "fast")]);
        assert_eq!((s.backend, s.problems.len()), (BackendSetting::Auto, 1));
    }

    #[test]
    fn found_calls_are_auto_off_or_at_least_one_and_anything_else_gets_auto_and_a_line() {
        assert_eq!(with(&[]).found_calls, FoundCallsSetting::Auto);
        assert_eq!(
            with(&[("PIPEKEEP_FOUND_CALLS", "off")]).found_calls,
            FoundCallsSetting::Off
        );
        assert_eq!(
            with(&[("PIPEKEEP_FOUND_CALLS", "3")]).found_calls,
            FoundCallsSetting::AtMost(3)
        );
        for bad in ["0", "-2", "many"] {
            let s = with(&[("PIPEKEEP_FOUND_CALLS", bad)]);
            assert_eq!(s.found_calls, FoundCallsSetting::Auto);
            assert!(
                s.problems[0].contains("PIPEKEEP_FOUND_CALLS"),
                "{:?}",
                s.problems
            );
        }
    }

    /// A setting that is on unless `off`: anything else gets on and one line naming it.
    fn on_unless_off(name: &str, bad: &str, get: fn(&Settings) -> bool) {
        assert!(get(&with(&[])));
        assert!(!get(&with(&[(name, "off")])));
        let s = with(&[(name, bad)]);
        assert!(get(&s));
        assert!(s.problems[0].contains(&format!("{name}=\"{bad}\" is not on or off")));
    }

    #[test]
    fn sharing_builds_is_on_unless_off_and_anything_else_gets_on_and_a_line() {
        on_unless_off("PIPEKEEP_SHARE_BUILDS", "no", |s| s.share_builds);
    }

    #[test]
    fn the_dictionary_goes_once_unless_off() {
        on_unless_off("PIPEKEEP_DICTIONARY_ONCE", "sometimes", |s| {
            s.dictionary_once
        });
    }

    #[test]
    fn disable_is_any_non_empty_value() {
        assert!(with(&[("PIPEKEEP_DISABLE", "1")]).disabled);
        assert!(with(&[("PIPEKEEP_DISABLE", "no")]).disabled);
        assert!(!with(&[("PIPEKEEP_DISABLE", "")]).disabled);
    }

    #[test]
    fn titles_are_made_safe_for_a_path() {
        assert_eq!(safe_title("Grand Theft Auto V"), "Grand_Theft_Auto_V");
        assert_eq!(safe_title("../../etc"), ".._.._etc");
        assert_eq!(safe_title(".."), "__");
        assert_eq!(safe_title("."), "_");
        assert_eq!(safe_title(""), "unnamed");
        assert_eq!(safe_title("ünï"), "_n_");
        assert_eq!(safe_title(&"x".repeat(100)).len(), 64);
        assert_eq!(
            with(&[("PIPEKEEP_TITLE", "a/b")]).title.as_deref(),
            Some("a_b")
        );
    }
}
