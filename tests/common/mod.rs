//! Running the layer-enabled test app through the real Vulkan loader, as a child process with an
//! environment of its own (never `set_var` in a threaded harness), and reading what it says.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A device identity for tests of the store without a driver.
pub fn identity() -> pipekeep::store::Identity {
    pipekeep::store::Identity {
        vendor_id: 0x1002,
        device_id: 0x73bf,
        driver_version: 7,
        cache_uuid: [0xab; 16],
        abi: 8,
    }
}

/// The device identity and key an entry file was written for, from its directory's and its own
/// name (a 64-bit build's ABI).
pub fn identity_and_key_of(
    entry: &Path,
) -> (pipekeep::store::Identity, pipekeep::key::PipelineKey) {
    let name = |p: &Path| p.file_name().unwrap().to_str().unwrap().to_owned();
    let dir = pipekeep::store::identity::DirName::parse(&name(entry.parent().unwrap())).unwrap();
    let identity = pipekeep::store::Identity {
        vendor_id: dir.vendor_id,
        device_id: dir.device_id,
        driver_version: dir.driver_version,
        cache_uuid: dir.cache_uuid,
        abi: 8,
    };
    let key = pipekeep::key::PipelineKey::from_file_name(&name(entry)).unwrap();
    (identity, key)
}

/// The key numbered `n`, for tests of the store without a driver.
pub fn numbered_key(n: u32) -> pipekeep::key::PipelineKey {
    let mut spirv = [0u8; 16];
    spirv[..4].copy_from_slice(&n.to_le_bytes());
    pipekeep::key::PipelineKey {
        spirv,
        state: [1; 16],
    }
}

/// Pipeline-cache data for [`identity`]: its header, then `len` payload bytes varying with
/// `seed`.
pub fn cache_data(seed: u32, len: usize) -> Vec<u8> {
    let mut d = pipekeep::store::envelope::cache_header(&identity()).to_vec();
    d.extend((0..len).map(|i| (i as u32).wrapping_mul(seed | 1) as u8));
    d
}

/// Test-app arguments for a store in a known order of use: 12 compute pipelines, one a call,
/// from one thread, so pipeline i is the i-th used.
pub const IN_ORDER: [&str; 8] = [
    "--compute",
    "12",
    "--graphics",
    "0",
    "--threads",
    "1",
    "--batch",
    "1",
];

pub const LAYER: &str = "VK_LAYER_PIPEKEEP_pipeline_store";
pub const VALIDATION: &str = "VK_LAYER_KHRONOS_validation";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// RADV on null hardware: a real compiler and cache, no execution.
    Radv,
    /// lavapipe: executes work, keeps nothing in its cache.
    Lavapipe,
}

/// The directory holding the test app and the layer library of this build.
pub fn build_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pipekeep-testapp"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The layer library of this build. `cargo test` builds the crate's rlib but never relinks its
/// cdylib, so a library older than the sources is refused: run `cargo build --lib` first
/// (`scripts/test.sh` does).
pub fn layer_library() -> PathBuf {
    let lib = build_dir().join("libpipekeep.so");
    let built = std::fs::metadata(&lib)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| {
            panic!(
                "no layer library at {}: run `cargo build --lib` first",
                lib.display()
            )
        });
    let newest_source = newest_mtime(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")));
    assert!(
        built >= newest_source,
        "{} is older than the sources: run `cargo build --lib` first",
        lib.display()
    );
    lib
}

fn newest_mtime(dir: &Path) -> std::time::SystemTime {
    let mut newest = std::time::SystemTime::UNIX_EPOCH;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let t = if p.is_dir() {
            newest_mtime(&p)
        } else {
            e.metadata().and_then(|m| m.modified()).unwrap_or(newest)
        };
        newest = newest.max(t);
    }
    newest
}

/// A manifest for this build's library, in a directory for `VK_ADD_LAYER_PATH`.
/// A database of the project's corpus (`tests/corpus/`).
pub fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(name)
}

pub fn explicit_manifest_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join("explicit");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = serde_json::json!({
        "file_format_version": "1.2.0",
        "layer": {
            "name": LAYER, "type": "GLOBAL", "library_path": layer_library(),
            "api_version": "1.4.309", "implementation_version": "1", "description": "pipekeep (test build)",
            "disable_environment": { "PIPEKEEP_DISABLE": "1" }
        }
    });
    std::fs::write(dir.join(format!("{LAYER}.json")), manifest.to_string()).unwrap();
    dir
}

/// Whether the integration tests run in the every-extension matrix (scripts/test.sh).
pub fn every_extension_matrix() -> bool {
    std::env::var_os("PIPEKEEP_TEST_EVERY_EXTENSION").is_some_and(|v| !v.is_empty())
}

/// One run of the test app.
pub struct App {
    cmd: Command,
}

/// What a run said.
pub struct Run {
    pub ok: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub summary: serde_json::Value,
}

impl App {
    /// The test app on `driver`, its store in `tmp/store`. Under `PIPEKEEP_TEST_EVERY_EXTENSION`
    /// (scripts/test.sh's second matrix) it makes its device as translation layers and emulators
    /// do: every extension offered, every feature structure reported (`--every-extension`).
    pub fn new(driver: Driver, tmp: &Path) -> App {
        let app = App::program(env!("CARGO_BIN_EXE_pipekeep-testapp"), driver, tmp);
        if every_extension_matrix() {
            app.args(&["--every-extension"])
        } else {
            app
        }
    }

    /// The `pipekeep` command, with the same environment.
    pub fn tool(driver: Driver, tmp: &Path) -> App {
        App::program(env!("CARGO_BIN_EXE_pipekeep"), driver, tmp)
    }

    /// Any program, in the environment the test app runs in (a real application's).
    pub fn program(path: impl AsRef<std::ffi::OsStr>, driver: Driver, tmp: &Path) -> App {
        let mut cmd = Command::new(path);
        cmd.env_clear();
        for keep in ["PATH", "HOME", "LD_LIBRARY_PATH"] {
            if let Ok(v) = std::env::var(keep) {
                cmd.env(keep, v);
            }
        }
        let runtime = tmp.join("runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        // The test matrix: scripts/test.sh runs the integration tests once a backend.
        if let Ok(backend) = std::env::var("PIPEKEEP_TEST_BACKEND") {
            cmd.env("PIPEKEEP_BACKEND", backend);
        }
        cmd.env("XDG_RUNTIME_DIR", &runtime)
            .env("XDG_DATA_HOME", tmp.join("data"))
            .env("XDG_CONFIG_HOME", tmp.join("config"))
            .env("MESA_SHADER_CACHE_DISABLE", "true")
            .env("PIPEKEEP_DIR", tmp.join("store"))
            .env("PIPEKEEP_LOG", "info")
            .env("VK_ADD_LAYER_PATH", explicit_manifest_dir(tmp));
        match driver {
            Driver::Radv => cmd
                .env("RADV_FORCE_FAMILY", "navi21")
                .env("VK_DRIVER_FILES", "/usr/share/vulkan/icd.d/radeon_icd.json"),
            Driver::Lavapipe => cmd.env("VK_DRIVER_FILES", "/usr/share/vulkan/icd.d/lvp_icd.json"),
        };
        App { cmd }
    }

    /// The `cache` backend, for runs that stack the validation layer below pipekeep: bookworm's
    /// validation layer (1.3.239) calls the pipeline-binary structures unknown.
    pub fn cache_backend(self) -> App {
        self.env("PIPEKEEP_BACKEND", "cache")
    }

    /// Enables the layer through `VK_INSTANCE_LAYERS`.
    pub fn with_layer(mut self) -> App {
        self.cmd.env("VK_INSTANCE_LAYERS", LAYER);
        self
    }

    pub fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> App {
        self.cmd.env(k, v);
        self
    }

    pub fn env_remove(mut self, k: &str) -> App {
        self.cmd.env_remove(k);
        self
    }

    pub fn args(mut self, args: &[&str]) -> App {
        self.cmd.args(args);
        self
    }

    /// Starts it without waiting, its output discarded (for processes run side by side, or
    /// killed midway).
    pub fn spawn(mut self) -> std::process::Child {
        use std::process::Stdio;
        self.cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the program starts")
    }

    pub fn run(mut self) -> Run {
        let out = self.cmd.output().expect("the test app runs");
        Run::from_output(out)
    }

    /// Runs, and fails the test if the program has not ended within `limit` (it is killed: a
    /// hang is a failure, never a stuck test run).
    pub fn run_within(mut self, limit: std::time::Duration) -> Run {
        use std::process::Stdio;
        let mut child = self
            .cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the test app runs");
        let started = std::time::Instant::now();
        // Drain both pipes on threads of their own, so a chatty program never blocks on them.
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut stdout, &mut b).ok();
            b
        });
        let err = std::thread::spawn(move || {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut stderr, &mut b).ok();
            b
        });
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
                panic!("the program hung: killed after {limit:?}\n--- stderr\n{stderr}");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        Run::from_output(std::process::Output {
            status,
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        })
    }
}

impl Run {
    fn from_output(out: std::process::Output) -> Run {
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let summary = stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or(serde_json::Value::Null);
        Run {
            ok: out.status.success(),
            code: out.status.code(),
            stdout,
            stderr,
            summary,
        }
    }
}

/// A compile-watch line's fields.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WatchLine {
    pub built: u64,
    pub found: u64,
    pub compiled: u64,
    pub written: u64,
    pub unkeyed: u64,
    /// Keyed, but built as the application asked.
    pub passed: u64,
    /// Of `compiled`, those made from the binaries of a pipeline the driver builds alike.
    pub shared: u64,
    /// Entries the background rebuild wrote (apart from `written`).
    pub rebuild_written: u64,
    /// Shader objects made from kept entries, compiled, and made as asked unkeyed.
    pub shaders_from_entries: u64,
    pub shaders_compiled: u64,
    pub shaders_unkeyed: u64,
}

impl Run {
    pub fn made(&self) -> u64 {
        self.summary["made"].as_u64().unwrap_or(0)
    }

    pub fn expected(&self) -> u64 {
        self.summary["expected"].as_u64().unwrap_or(u64::MAX)
    }

    /// Everything the run printed, for assertion messages.
    pub fn all(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }

    /// The run's last compile-watch line (the final one).
    pub fn watch(&self) -> WatchLine {
        let line = self
            .stderr
            .lines()
            .rev()
            .find(|l| l.contains(" built="))
            .unwrap_or_else(|| panic!("no compile watch line\n{}", self.all()));
        let field = |name: &str| -> u64 {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name}= in {line}"))
        };
        WatchLine {
            built: field("built"),
            found: field("found"),
            compiled: field("compiled"),
            written: field("written"),
            unkeyed: field("unkeyed"),
            passed: field("passed"),
            shared: field("shared"),
            rebuild_written: field("rebuild_written"),
            shaders_from_entries: field("shaders_from_entries"),
            shaders_compiled: field("shaders_compiled"),
            shaders_unkeyed: field("shaders_unkeyed"),
        }
    }

    /// The loader inserted pipekeep (with `VK_LOADER_DEBUG=layer`).
    pub fn layer_inserted(&self) -> bool {
        self.stderr
            .contains(&format!("Insert instance layer \"{LAYER}\""))
    }

    /// pipekeep said it is active on a device.
    pub fn layer_active(&self) -> bool {
        self.stderr.contains("pipekeep is active on a device")
    }

    /// Lines the Khronos validation layer printed. In the every-extension matrix, those about the
    /// application's own create infos are left out: structures Debian 12's validation layer
    /// (1.3.239) does not know (`VUID-VkDeviceCreateInfo-pNext-pNext`, its own limit), and
    /// extensions that need a newer API than the test app's `--api 1.0` (`vkCreateInstance`'s,
    /// and `vkCreateDevice`'s 01387: with a layer below, pipekeep adds only creation feedback,
    /// which needs nothing).
    pub fn validation_messages(&self) -> Vec<String> {
        self.stdout
            .lines()
            .chain(self.stderr.lines())
            .filter(|l| {
                l.contains("Validation Error")
                    || l.contains("Validation Warning")
                    || l.contains("VUID-")
            })
            .filter(|l| {
                !(every_extension_matrix()
                    && (l.contains("VUID-VkDeviceCreateInfo-pNext-pNext")
                        || l.contains("ppEnabledExtensionNames-01387")
                        || l.contains("vkCreateInstance")))
                    && !shader_object_properties_unknown(l)
            })
            .map(str::to_owned)
            .collect()
    }

    /// The device call stack the loader printed (`VK_LOADER_DEBUG=layer`), closest to the
    /// application first.
    pub fn device_layer_stack(&self) -> Vec<String> {
        let text = format!("{}\n{}", self.stdout, self.stderr);
        let Some(start) = text.find("vkCreateDevice layer callstack setup to:") else {
            return Vec::new();
        };
        text[start..]
            .lines()
            .skip(1)
            .map(|l| l.split_once("LAYER:").map_or("", |(_, r)| r).trim())
            .take_while(|l| *l != "<Device>")
            .filter(|l| l.starts_with("VK_LAYER_"))
            .map(str::to_owned)
            .collect()
    }
}

/// Debian 12's validation layer (1.3.239) predates `VK_EXT_shader_object`'s properties: it calls
/// `VkPhysicalDeviceShaderObjectPropertiesEXT` (1000482001) unknown where pipekeep asks a device
/// made with the extension (every extension) for the binary UUID its shaders are kept under: the
/// validation layer's own age, in every matrix.
fn shader_object_properties_unknown(line: &str) -> bool {
    line.contains("VUID-VkPhysicalDeviceProperties2-pNext-pNext") && line.contains("(1000482001)")
}

/// Every entry file under a store root.
pub fn entries(store: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![store.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "entry") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A store's entries, the first used first (the latest stamp), with their sizes.
pub fn entries_by_use(store: &Path) -> Vec<(PathBuf, u64)> {
    let mut stamped: Vec<(std::time::SystemTime, PathBuf, u64)> = entries(store)
        .into_iter()
        .map(|p| {
            let m = std::fs::metadata(&p).unwrap();
            (m.modified().unwrap(), p, m.len())
        })
        .collect();
    stamped.sort_by_key(|e| std::cmp::Reverse(e.0));
    stamped.into_iter().map(|(_, p, n)| (p, n)).collect()
}

/// Every piece file under a store root.
pub fn pieces(store: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = entries_and_pieces(store)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "piece"))
        .collect();
    out.sort();
    out
}

/// Every file the bound counts under a store root: entries and pieces.
pub fn entries_and_pieces(store: &Path) -> Vec<PathBuf> {
    let mut out = entries(store);
    let dirs: std::collections::BTreeSet<PathBuf> = out
        .iter()
        .filter_map(|e| e.parent().map(Path::to_path_buf))
        .collect();
    for dir in dirs {
        out.extend(
            pipekeep::store::pieces::listed(&dir)
                .into_iter()
                .map(|(_, p)| p),
        );
    }
    out.sort();
    out
}

/// The bytes of `entries` with those of the pieces they name, each piece once: what keeping
/// just those entries takes.
pub fn bytes_with_pieces(entries: &[PathBuf]) -> u64 {
    let mut named = std::collections::BTreeSet::new();
    let mut total = 0;
    for e in entries {
        let bytes = std::fs::read(e).unwrap();
        total += bytes.len() as u64;
        let (_, pieces) = pipekeep::store::envelope::listed_parts(&bytes).expect("a whole entry");
        let dir = pipekeep::store::pieces::Pieces::for_looking(e.parent().unwrap());
        for name in pieces {
            named.insert(dir.path(&name));
            named.extend(dir.listed_by(&name).iter().map(|n| dir.path(n)));
        }
    }
    total
        + named
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum::<u64>()
}

/// The smallest bound that leaves `entries` bytes to entries and pieces beside the title's record
/// at `record`: the record counts at most its share (a quarter), but never less than what it holds
/// with no pipeline (its configurations, a few KiB where the device is made with every
/// extension), which a compaction cannot drop.
pub fn bound_leaving(entries: u64, record: &Path) -> u64 {
    let Ok(bytes) = std::fs::read(record) else {
        return entries;
    };
    let record_bytes = bytes.len() as u64;
    let all = pipekeep::replay::foz::read_entries(&bytes).unwrap();
    let bare = pipekeep::replay::record::within_share(all, 0, &|_| None);
    let floor =
        (pipekeep::replay::foz::write_entries_deflated(&bare).len() as u64).min(record_bytes);
    (entries..)
        .find(|b| b.saturating_sub(record_bytes.min(b / 4).max(floor)) >= entries)
        .expect("a bound")
}

/// Renames a title's identity directory to another driver version of the same device: the next
/// opening takes it for a driver change (as the damage tests make another driver's directory).
/// (A short run may leave part of an earlier change's directory: its dropping stops with the
/// device. The directory renamed is the present driver's, to a version no directory has.)
pub fn simulate_a_driver_change(title: &Path) {
    let host = title.join("host-pipelines");
    let is_simulated = |name: &str| {
        name.split('-')
            .nth(2)
            .is_some_and(|v| v.starts_with("0000000"))
    };
    let dir = std::fs::read_dir(&host)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir() && !is_simulated(p.file_name().unwrap().to_str().unwrap()))
        .expect("an identity directory");
    let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
    let mut fields: Vec<String> = name.split('-').map(str::to_owned).collect();
    let fresh = (1..10)
        .map(|n| format!("0000000{n}"))
        .find(|v| {
            fields[2] = v.clone();
            !host.join(fields.join("-")).exists()
        })
        .unwrap();
    fields[2] = fresh;
    std::fs::rename(&dir, host.join(fields.join("-"))).unwrap();
}
