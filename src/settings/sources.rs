//! Where a setting comes from besides the environment: the Khronos layer-settings conventions, so
//! that the tools users configure layers with (Vulkan Configurator, `vk_layer_settings.txt`,
//! `VK_EXT_layer_settings`) configure pipekeep too.
//!
//! - `vk_layer_settings.txt`: `pipekeep_pipeline_store.<name> = <value>` lines, found where the
//!   Khronos layer-settings library looks (Vulkan-Utility-Libraries, which the Khronos layers
//!   use): Vulkan Configurator's `$XDG_DATA_HOME/vulkan/settings.d/` (default
//!   `~/.local/share/...`), else the file `VK_LAYER_SETTINGS_PATH` names (the file itself, or a
//!   directory holding it), else the working directory's. Other layers' lines are theirs.
//! - `VK_EXT_layer_settings`: `VkLayerSettingsCreateInfoEXT` chained on the application's
//!   `VkInstanceCreateInfo`, settings whose `pLayerName` is `VK_LAYER_PIPEKEEP_pipeline_store`.
//!
//! The environment wins, then the application's, then the file. [`TABLE`] names every setting;
//! the manifests describe the same settings in the form Vulkan Configurator reads (a test holds
//! them equal to [`manifest_settings`]).

use std::collections::BTreeMap;
use std::ffi::{c_void, CStr};
use std::path::{Path, PathBuf};

use ash::vk;
use serde_json::{json, Value};

/// The namespace of pipekeep's lines in `vk_layer_settings.txt`: the layer's name in lower case
/// without its `VK_LAYER_` prefix, as the Khronos layers name theirs.
pub const FILE_PREFIX: &str = "pipekeep_pipeline_store";
/// The settings file's name, in a directory `VK_LAYER_SETTINGS_PATH` names or the working one.
pub const FILE_NAME: &str = "vk_layer_settings.txt";
/// A settings file larger than this is not read: it is a few lines, and this runs in every
/// Vulkan process of the machine.
const FILE_LIMIT: u64 = 1 << 20;

/// What a setting holds, which decides its manifest type and how a file's or an application's
/// value is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `on` or `off` (the manifest's `BOOL`: Vulkan Configurator writes `true` or `false`).
    Switch,
    /// `PIPEKEEP_DISABLE`: true sets it, false leaves it unset (the environment's rule is "any
    /// non-empty value").
    Disable,
    /// An integer that fits Vulkan Configurator's 32-bit `INT`.
    Int,
    /// An integer that may not fit 32 bits: a `STRING` in the manifest.
    BigInt,
    /// One of these values (value, label).
    Enum(&'static [(&'static str, &'static str)]),
    /// Free text.
    Text,
    /// A directory.
    Folder,
    /// A file written to.
    File,
}

/// One setting: its environment variable is `PIPEKEEP_` and the name in upper case.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    pub name: &'static str,
    pub label: &'static str,
    pub kind: Kind,
    /// What Vulkan Configurator shows and writes when left alone; pipekeep reads it as the
    /// default (an empty text is unset).
    pub default: &'static str,
    pub description: &'static str,
}

impl Setting {
    /// The environment variable.
    pub fn env(&self) -> String {
        format!("PIPEKEEP_{}", self.name.to_ascii_uppercase())
    }
}

/// Every setting a user may give, in the README's order.
pub const TABLE: &[Setting] = &[
    Setting { name: "disable", label: "Disable", kind: Kind::Disable, default: "false",
        description: "Pass everything through, even where the layer is named explicitly." },
    Setting { name: "dir", label: "Library root", kind: Kind::Folder, default: "",
        description: "Where titles keep their pipelines; empty: $XDG_CACHE_HOME/pipekeep, else ~/.cache/pipekeep." },
    Setting { name: "title", label: "Title", kind: Kind::Text, default: "",
        description: "The title pipelines are filed under; empty: the application's name, else the executable's." },
    Setting { name: "max_bytes", label: "Size bound", kind: Kind::BigInt, default: "4294967296",
        description: "The most bytes of entries and pieces one title keeps (an integer >= 0; 0 keeps nothing)." },
    Setting { name: "library_max_bytes", label: "Library size bound", kind: Kind::BigInt, default: "4294967296",
        description: "The most bytes every title keeps together; past it the least recently used titles give up their entries first, each one's record last." },
    Setting { name: "backend", label: "Backend", kind: Kind::Enum(&[
            ("auto", "Binaries where the driver's load in another process, else caches"),
            ("binary", "Pipeline binaries (VK_KHR_pipeline_binary)"),
            ("cache", "One pipeline cache a pipeline"),
        ]), default: "auto",
        description: "How kept pipelines are built." },
    Setting { name: "dictionary_once", label: "NVIDIA dictionary once", kind: Kind::Switch, default: "true",
        description: "On NVIDIA, hand the driver's zstd dictionary over once a device instead of with every entry." },
    Setting { name: "share_builds", label: "Share builds", kind: Kind::Switch, default: "true",
        description: "Build a miss from what this run compiled: with the binary backend, from the binaries of a pipeline the driver builds alike; with the cache backend, through the data of pipelines with its SPIR-V or its stages." },
    Setting { name: "rebuild", label: "Rebuild", kind: Kind::Enum(&[
            ("background", "In the background after a driver change"),
            ("off", "Never (pipekeep rebuild does it)"),
        ]), default: "background",
        description: "Rebuild the title's record into the store when the driver changed." },
    Setting { name: "found_calls", label: "Found pipelines in the driver at once", kind: Kind::Text, default: "auto",
        description: "How many found pipelines may be inside the driver at once: auto, off or an integer >= 1." },
    Setting { name: "piece_memory", label: "Piece memory", kind: Kind::Int, default: "268435456",
        description: "The most bytes of checked pieces a store holds in memory for reuse." },
    Setting { name: "read_ahead", label: "Read ahead", kind: Kind::Int, default: "67108864",
        description: "The most bytes of entries read ahead and not yet taken; 0 reads nothing ahead." },
    Setting { name: "log", label: "Log filter", kind: Kind::Text, default: "warn",
        description: "A tracing filter: warn is quiet, info shows the compile watch." },
    Setting { name: "log_file", label: "Log file", kind: Kind::File, default: "",
        description: "Where the log goes; empty: stderr." },
];

/// The setting named `name` (lower case, no prefix).
pub fn setting(name: &str) -> Option<&'static Setting> {
    TABLE.iter().find(|s| s.name == name)
}

/// Where a setting's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    Environment,
    /// `VK_EXT_layer_settings`, at the process's first `vkCreateInstance`.
    Application,
    /// `vk_layer_settings.txt`, at this path.
    File(PathBuf),
    Default,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Environment => f.write_str("environment"),
            Origin::Application => f.write_str("application (VK_EXT_layer_settings)"),
            Origin::File(p) => write!(f, "file {}", p.display()),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// Why a settings file gave nothing, or why one of its lines was not taken.
#[derive(Debug, thiserror::Error)]
pub enum SettingsFileError {
    #[error("{path}: cannot be read: {source}", path = path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: larger than {FILE_LIMIT} bytes: not read", path = path.display())]
    TooLarge { path: PathBuf },
    #[error("{path}:{line}: {reason}", path = path.display())]
    Line {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// The settings given outside the environment, each already read as its kind wants.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sources {
    /// The application's (`VK_EXT_layer_settings`), by name.
    pub application: BTreeMap<String, String>,
    /// The settings file that was read, if one was found.
    pub file: Option<PathBuf>,
    /// The file's, by name.
    pub from_file: BTreeMap<String, String>,
    /// What was not taken, one line each.
    pub problems: Vec<String>,
}

impl Sources {
    /// The file found through `env` (`VK_LAYER_SETTINGS_PATH`) or in `cwd`, and the
    /// application's settings (name, value) as [`application_settings`] read them.
    pub fn gather(
        env: &dyn Fn(&str) -> Option<String>,
        cwd: Option<&Path>,
        application: &[(String, String)],
    ) -> Sources {
        let mut sources = Sources::default();
        for (name, value) in application {
            match setting(name) {
                None => sources.problems.push(format!(
                    "VK_EXT_layer_settings: {LAYER}.{name} is not a pipekeep setting; ignored",
                    LAYER = crate::settings::LAYER_NAME.to_string_lossy()
                )),
                Some(s) => {
                    if let Some(v) = read_as(s.kind, value) {
                        sources.application.insert(name.clone(), v);
                    }
                }
            }
        }
        if let Some(path) = settings_file(env, cwd) {
            match read_file(&path) {
                Ok((values, problems)) => {
                    sources.from_file = values;
                    sources
                        .problems
                        .extend(problems.iter().map(|p| p.to_string()));
                    sources.file = Some(path);
                }
                Err(e) => sources.problems.push(e.to_string()),
            }
        }
        sources
    }

    /// The value of the variable `var` and where it came from: the environment (non-empty),
    /// else for a pipekeep setting the application's, else the file's.
    pub fn lookup(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        var: &str,
    ) -> (Option<String>, Origin) {
        if let Some(v) = env(var).filter(|v| !v.is_empty()) {
            return (Some(v), Origin::Environment);
        }
        let Some(name) = var.strip_prefix("PIPEKEEP_").map(str::to_ascii_lowercase) else {
            return (None, Origin::Default);
        };
        if setting(&name).is_none() {
            return (None, Origin::Default);
        }
        if let Some(v) = self.application.get(&name) {
            return (Some(v.clone()), Origin::Application);
        }
        match (self.from_file.get(&name), &self.file) {
            (Some(v), Some(path)) => (Some(v.clone()), Origin::File(path.clone())),
            _ => (None, Origin::Default),
        }
    }
}

/// A value from the file or the application, as the setting's kind reads it: an empty one is
/// unset (Vulkan Configurator writes empty texts for defaults it cannot name); a switch's
/// `true`/`1`/`on` is `on` and `false`/`0`/`off` is `off`; `disable` false is unset.
fn read_as(kind: Kind, raw: &str) -> Option<String> {
    let v = raw.trim();
    if v.is_empty() {
        return None;
    }
    let truth = match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Some(true),
        "false" | "0" | "off" | "no" => Some(false),
        _ => None,
    };
    match (kind, truth) {
        (Kind::Switch, Some(true)) => Some("on".into()),
        (Kind::Switch, Some(false)) => Some("off".into()),
        (Kind::Disable, Some(false)) => None,
        (Kind::Disable, _) => Some("1".into()),
        _ => Some(v.to_string()),
    }
}

/// The settings file: Vulkan Configurator's (`$XDG_DATA_HOME/vulkan/settings.d/`, default
/// `~/.local/share/vulkan/settings.d/`), else `VK_LAYER_SETTINGS_PATH` (a file, or a directory
/// holding `vk_layer_settings.txt`), else `vk_layer_settings.txt` in `cwd`, in the order the
/// Khronos layers look; `None` where there is none.
pub fn settings_file(env: &dyn Fn(&str) -> Option<String>, cwd: Option<&Path>) -> Option<PathBuf> {
    let non_empty = |k: &str| env(k).filter(|v| !v.is_empty());
    let data = non_empty("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|h| PathBuf::from(h).join(".local/share")));
    if let Some(configurator) = data.map(|d| d.join("vulkan/settings.d").join(FILE_NAME)) {
        if configurator.is_file() {
            return Some(configurator);
        }
    }
    let path = match env("VK_LAYER_SETTINGS_PATH").filter(|v| !v.is_empty()) {
        Some(p) => {
            let p = PathBuf::from(p);
            if p.is_dir() {
                p.join(FILE_NAME)
            } else {
                p
            }
        }
        None => cwd?.join(FILE_NAME),
    };
    path.is_file().then_some(path)
}

/// pipekeep's settings in the file at `path` (by name, read as their kinds want), and the lines
/// not taken.
pub fn read_file(
    path: &Path,
) -> Result<(BTreeMap<String, String>, Vec<SettingsFileError>), SettingsFileError> {
    let read = |source| SettingsFileError::Read {
        path: path.to_owned(),
        source,
    };
    let len = std::fs::metadata(path).map_err(read)?.len();
    if len > FILE_LIMIT {
        return Err(SettingsFileError::TooLarge {
            path: path.to_owned(),
        });
    }
    let bytes = std::fs::read(path).map_err(read)?;
    Ok(parse_file(path, &String::from_utf8_lossy(&bytes)))
}

/// [`read_file`] of text already read.
pub fn parse_file(path: &Path, text: &str) -> (BTreeMap<String, String>, Vec<SettingsFileError>) {
    let mut values = BTreeMap::new();
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        // A comment runs from `#` to the end of the line, wherever it starts (as the Khronos
        // layers read the file).
        let line = line
            .split_once('#')
            .map_or(line, |(before, _)| before)
            .trim();
        if line.is_empty() {
            continue;
        }
        let problem = |reason: String| SettingsFileError::Line {
            path: path.to_owned(),
            line: i + 1,
            reason,
        };
        let Some((key, value)) = line.split_once('=') else {
            // Another layer's line it may read differently: only ours are ours to judge.
            if line.starts_with(FILE_PREFIX) {
                problems.push(problem(format!("{line:?} is not `key = value`")));
            }
            continue;
        };
        let Some(name) = key
            .trim()
            .strip_prefix(FILE_PREFIX)
            .and_then(|k| k.strip_prefix('.'))
        else {
            continue;
        };
        match setting(name) {
            None => problems.push(problem(format!(
                "{FILE_PREFIX}.{name} is not a pipekeep setting; ignored"
            ))),
            Some(s) => match read_as(s.kind, value) {
                Some(v) => {
                    values.insert(name.to_string(), v);
                }
                None => {
                    values.remove(name);
                }
            },
        }
    }
    (values, problems)
}

/// The settings chained on an application's `VkInstanceCreateInfo` for this layer, as (name,
/// value) text: a `VkBool32` is `true` or `false`, numbers in decimal, several values joined
/// with commas (as the settings file writes a list).
///
/// # Safety
/// `p_next` must be a valid `pNext` chain of a `VkInstanceCreateInfo`, as the application passed
/// it to `vkCreateInstance`.
pub unsafe fn application_settings(p_next: *const c_void) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut p = p_next as *const vk::BaseInStructure<'_>;
    // SAFETY (the loop): every structure of the chain begins with sType and pNext, and one whose
    // sType says VkLayerSettingsCreateInfoEXT is one, with pSettingCount settings, as the caller
    // vouches.
    while let Some(base) = unsafe { p.as_ref() } {
        if base.s_type == vk::StructureType::LAYER_SETTINGS_CREATE_INFO_EXT {
            let info = unsafe { &*(p as *const vk::LayerSettingsCreateInfoEXT<'_>) };
            let settings: &[vk::LayerSettingEXT<'_>] = if info.p_settings.is_null()
                || info.setting_count == 0
            {
                &[]
            } else {
                unsafe { std::slice::from_raw_parts(info.p_settings, info.setting_count as usize) }
            };
            for s in settings {
                if s.p_layer_name.is_null() || s.p_setting_name.is_null() {
                    continue;
                }
                if unsafe { CStr::from_ptr(s.p_layer_name) } != crate::settings::LAYER_NAME {
                    continue;
                }
                let name = unsafe { CStr::from_ptr(s.p_setting_name) }
                    .to_string_lossy()
                    .into_owned();
                if let Some(value) = unsafe { setting_values(s) } {
                    out.push((name, value));
                }
            }
        }
        p = base.p_next;
    }
    out
}

/// One setting's values as text; `None` where it has none (or of a type this version of
/// Vulkan does not define).
///
/// # Safety
/// `s.p_values` must hold `s.value_count` values of `s.ty`.
unsafe fn setting_values(s: &vk::LayerSettingEXT<'_>) -> Option<String> {
    if s.value_count == 0 || s.p_values.is_null() {
        return None;
    }
    let n = s.value_count as usize;
    /// The values as `T`, each made text.
    unsafe fn each<T: Copy>(p: *const c_void, n: usize, text: impl Fn(T) -> String) -> Vec<String> {
        // SAFETY: as the caller vouches.
        unsafe { std::slice::from_raw_parts(p as *const T, n) }
            .iter()
            .map(|v| text(*v))
            .collect()
    }
    let p = s.p_values;
    use vk::LayerSettingTypeEXT as T;
    // SAFETY: the type says what the values are, as the caller vouches.
    let values = unsafe {
        match s.ty {
            T::BOOL32 => each(p, n, |v: vk::Bool32| (v != 0).to_string()),
            T::INT32 => each(p, n, |v: i32| v.to_string()),
            T::INT64 => each(p, n, |v: i64| v.to_string()),
            T::UINT32 => each(p, n, |v: u32| v.to_string()),
            T::UINT64 => each(p, n, |v: u64| v.to_string()),
            T::FLOAT32 => each(p, n, |v: f32| v.to_string()),
            T::FLOAT64 => each(p, n, |v: f64| v.to_string()),
            T::STRING => each(p, n, |v: *const std::ffi::c_char| {
                if v.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(v).to_string_lossy().into_owned()
                }
            }),
            _ => return None,
        }
    };
    Some(values.join(","))
}

/// The settings as the manifest's `"features": {"settings": [...]}` lists them, in the form
/// Vulkan Configurator reads (the Khronos validation layer's manifest, file format 1.2.0).
pub fn manifest_settings() -> Value {
    let settings: Vec<Value> = TABLE
        .iter()
        .map(|s| {
            let mut v = json!({
                "key": s.name,
                "env": s.env(),
                "label": s.label,
                "description": s.description,
            });
            let (ty, default) = match s.kind {
                Kind::Switch | Kind::Disable => ("BOOL", json!(s.default == "true")),
                Kind::Int => (
                    "INT",
                    json!(s.default.parse::<i64>().expect("an integer default")),
                ),
                Kind::BigInt | Kind::Text => ("STRING", json!(s.default)),
                Kind::Enum(_) => ("ENUM", json!(s.default)),
                Kind::Folder => ("SAVE_FOLDER", json!(s.default)),
                Kind::File => ("SAVE_FILE", json!(s.default)),
            };
            v["type"] = json!(ty);
            v["default"] = default;
            if let Kind::Enum(options) = s.kind {
                v["flags"] = options
                    .iter()
                    .map(|(key, label)| json!({ "key": key, "label": label, "description": label }))
                    .collect();
            }
            if s.kind == Kind::Int {
                v["range"] = json!({ "min": 0 });
            }
            v
        })
        .collect();
    Value::Array(settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_file_takes_our_lines_reads_them_as_their_kinds_and_names_what_it_refuses() {
        let text = "# a comment\n\
            khronos_validation.report_flags = error\n\
            pipekeep_pipeline_store.max_bytes = 1000000 # a megabyte\n\
            pipekeep_pipeline_store.share_builds = false\n\
            pipekeep_pipeline_store.disable = false\n\
            pipekeep_pipeline_store.title =\n\
            pipekeep_pipeline_store.nonsense = 3\n\
            pipekeep_pipeline_store.backend\n";
        let (values, problems) = parse_file(Path::new("/x/vk_layer_settings.txt"), text);
        assert_eq!(values.get("max_bytes").map(String::as_str), Some("1000000"));
        assert_eq!(values.get("share_builds").map(String::as_str), Some("off"));
        assert!(!values.contains_key("disable") && !values.contains_key("title"));
        assert_eq!(values.len(), 2);
        let problems: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("/x/vk_layer_settings.txt:7: pipekeep_pipeline_store.nonsense")
        );
        assert!(problems[1].starts_with("/x/vk_layer_settings.txt:8:"));
    }

    #[test]
    fn the_environment_wins_then_the_application_then_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(FILE_NAME),
            "pipekeep_pipeline_store.title = file\npipekeep_pipeline_store.log = debug\n\
             pipekeep_pipeline_store.max_bytes = 5\n",
        )
        .unwrap();
        let app = vec![
            ("title".to_string(), "app".to_string()),
            ("max_bytes".to_string(), "7".to_string()),
        ];
        let env = env_of(&[("PIPEKEEP_TITLE", "env"), ("PIPEKEEP_LOG", "")]);
        let s = Sources::gather(&env, Some(dir.path()), &app);
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        let file = Origin::File(dir.path().join(FILE_NAME));
        assert_eq!(
            s.lookup(&env, "PIPEKEEP_TITLE"),
            (Some("env".into()), Origin::Environment)
        );
        assert_eq!(
            s.lookup(&env, "PIPEKEEP_MAX_BYTES"),
            (Some("7".into()), Origin::Application)
        );
        // An empty variable is unset, as the environment alone reads it.
        assert_eq!(s.lookup(&env, "PIPEKEEP_LOG"), (Some("debug".into()), file));
        assert_eq!(s.lookup(&env, "PIPEKEEP_BACKEND"), (None, Origin::Default));
        // Only pipekeep's own settings come from elsewhere.
        assert_eq!(
            s.lookup(&env, "PIPEKEEP_TEST_PANIC"),
            (None, Origin::Default)
        );
    }

    #[test]
    fn a_refused_value_from_the_file_or_the_application_says_where_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(FILE_NAME),
            "pipekeep_pipeline_store.backend = fast\n",
        )
        .unwrap();
        let app = vec![("max_bytes".to_string(), "lots".to_string())];
        let env = env_of(&[("PIPEKEEP_FOUND_CALLS", "sometimes")]);
        let s = crate::settings::Settings::from_sources(
            &env,
            &Sources::gather(&env, Some(dir.path()), &app),
        );
        assert_eq!(s.problems.len(), 3, "{:?}", s.problems);
        let about = |var: &str| s.problems.iter().find(|p| p.starts_with(var)).unwrap();
        assert!(about("PIPEKEEP_BACKEND").ends_with(&format!(
            "(given by the file {})",
            dir.path().join(FILE_NAME).display()
        )));
        assert!(about("PIPEKEEP_MAX_BYTES")
            .ends_with("(given by the application (VK_EXT_layer_settings))"));
        assert!(about("PIPEKEEP_FOUND_CALLS").ends_with("using auto"));
    }

    #[test]
    fn vk_layer_settings_path_names_the_file_or_its_directory_before_the_working_one() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join(FILE_NAME), "").unwrap();
        std::fs::write(b.join("custom.txt"), "").unwrap();
        let none = env_of(&[]);
        assert_eq!(settings_file(&none, Some(&a)), Some(a.join(FILE_NAME)));
        // Vulkan Configurator's file comes first, as the Khronos layers read it.
        let data = dir.path().join("data");
        let configurator = data.join("vulkan/settings.d").join(FILE_NAME);
        std::fs::create_dir_all(configurator.parent().unwrap()).unwrap();
        std::fs::write(&configurator, "").unwrap();
        let vkconfig = env_of(&[
            ("XDG_DATA_HOME", data.to_str().unwrap()),
            ("VK_LAYER_SETTINGS_PATH", a.to_str().unwrap()),
        ]);
        assert_eq!(settings_file(&vkconfig, Some(&b)), Some(configurator));
        let home = env_of(&[("HOME", dir.path().to_str().unwrap())]);
        assert_eq!(settings_file(&home, Some(&b)), None);
        assert_eq!(settings_file(&none, Some(&b)), None);
        let to_dir = env_of(&[("VK_LAYER_SETTINGS_PATH", a.to_str().unwrap())]);
        assert_eq!(settings_file(&to_dir, Some(&b)), Some(a.join(FILE_NAME)));
        let custom = b.join("custom.txt");
        let to_file = env_of(&[("VK_LAYER_SETTINGS_PATH", custom.to_str().unwrap())]);
        assert_eq!(settings_file(&to_file, Some(&a)), Some(custom));
    }

    #[test]
    fn the_applications_settings_for_this_layer_are_read_by_type() {
        let other = c"VK_LAYER_KHRONOS_validation";
        let bound = [1_000_000u64];
        let off = [vk::FALSE];
        let title = [c"from-app".as_ptr()];
        let settings = [
            vk::LayerSettingEXT::default()
                .layer_name(crate::settings::LAYER_NAME)
                .setting_name(c"max_bytes")
                .ty(vk::LayerSettingTypeEXT::UINT64)
                .values(unsafe { std::slice::from_raw_parts(bound.as_ptr() as *const u8, 8) }),
            vk::LayerSettingEXT::default()
                .layer_name(other)
                .setting_name(c"title")
                .ty(vk::LayerSettingTypeEXT::STRING)
                .values(unsafe { std::slice::from_raw_parts(title.as_ptr() as *const u8, 8) }),
            vk::LayerSettingEXT::default()
                .layer_name(crate::settings::LAYER_NAME)
                .setting_name(c"share_builds")
                .ty(vk::LayerSettingTypeEXT::BOOL32)
                .values(unsafe { std::slice::from_raw_parts(off.as_ptr() as *const u8, 4) }),
            vk::LayerSettingEXT::default()
                .layer_name(crate::settings::LAYER_NAME)
                .setting_name(c"title")
                .ty(vk::LayerSettingTypeEXT::STRING)
                .values(unsafe { std::slice::from_raw_parts(title.as_ptr() as *const u8, 8) }),
        ];
        let mut fixed = settings;
        // ash's builder counts bytes; the spec counts values.
        for s in &mut fixed {
            s.value_count = 1;
        }
        let info = vk::LayerSettingsCreateInfoEXT::default().settings(&fixed);
        let got = unsafe { application_settings(&info as *const _ as *const c_void) };
        let got: Vec<(&str, &str)> = got.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(
            got,
            [
                ("max_bytes", "1000000"),
                ("share_builds", "false"),
                ("title", "from-app")
            ]
        );
        let s = Sources::gather(&env_of(&[]), None, &application_settings_owned(&got));
        assert_eq!(
            s.application.get("share_builds").map(String::as_str),
            Some("off")
        );
    }

    fn application_settings_owned(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// The manifests describe every setting as the table does. To rewrite them after a change
    /// of the table: `PIPEKEEP_UPDATE_MANIFESTS=1 cargo test --lib manifests_describe`.
    #[test]
    fn manifests_describe_every_setting() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let expected = manifest_settings();
        for m in [
            "manifest/VK_LAYER_PIPEKEEP_pipeline_store.json",
            "manifest/package/VK_LAYER_PIPEKEEP_pipeline_store.x86_64.json",
            "manifest/package/VK_LAYER_PIPEKEEP_pipeline_store.i686.json",
        ] {
            let path = root.join(m);
            let doc: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            if std::env::var_os("PIPEKEEP_UPDATE_MANIFESTS").is_some() {
                // Spliced as text, the block last in the layer's object, so the hand-written
                // fields above it keep their order.
                let text = std::fs::read_to_string(&path).unwrap();
                let head = match text.find(",\n        \"features\": ") {
                    Some(i) => text[..i].to_string(),
                    None => {
                        let t = text.trim_end().strip_suffix('}').unwrap().trim_end();
                        t.strip_suffix('}').unwrap().trim_end().to_string()
                    }
                };
                let mut block = Vec::new();
                let style = serde_json::ser::PrettyFormatter::with_indent(b"    ");
                serde::Serialize::serialize(
                    &json!({ "settings": expected.clone() }),
                    &mut serde_json::Serializer::with_formatter(&mut block, style),
                )
                .unwrap();
                let block = String::from_utf8(block)
                    .unwrap()
                    .replace('\n', "\n        ");
                let out = format!("{head},\n        \"features\": {block}\n    }}\n}}\n");
                std::fs::write(&path, out).unwrap();
                continue;
            }
            assert_eq!(
                doc["layer"]["features"]["settings"], expected,
                "{m} does not describe the settings as src/settings/sources.rs does: \
                 PIPEKEEP_UPDATE_MANIFESTS=1 cargo test --lib manifests_describe"
            );
        }
    }

    #[test]
    fn every_defaults_is_the_settings_own() {
        let d = crate::settings::Settings::from_lookup(|_| None);
        let default = |n: &str| setting(n).unwrap().default;
        assert_eq!(default("max_bytes"), d.max_bytes.to_string());
        assert_eq!(
            default("library_max_bytes"),
            d.library_max_bytes.to_string()
        );
        assert_eq!(default("read_ahead"), d.read_ahead.to_string());
        assert_eq!(default("piece_memory"), d.piece_memory.to_string());
        assert_eq!(default("log"), d.log_filter);
        assert!(d.share_builds && d.dictionary_once && !d.disabled);
        assert_eq!(TABLE.len(), 14);
    }
}
