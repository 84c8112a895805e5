//! What every entry point runs under: the layer's own log dispatch (never a global default, never
//! the host's subscriber) and `catch_unwind`, falling back to what the driver would have done.

use std::io::IsTerminal;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{LazyLock, Mutex, OnceLock};

use tracing::Dispatch;
use tracing_subscriber::EnvFilter;

use crate::settings::Settings;

/// The settings, read once a process: the environment, then the application's layer settings,
/// then `vk_layer_settings.txt`. Nothing reads them before the first `vkCreateInstance` has
/// offered its layer settings (the loader's earlier calls are answered without them), so one
/// process-wide value stays enough; an application's layer settings exist only per instance,
/// and those of a later instance are not read (the README says so).
pub static SETTINGS: LazyLock<Settings> =
    LazyLock::new(|| Settings::from_process(APPLICATION_SETTINGS.get().map_or(&[], Vec::as_slice)));

/// The layer settings (`VK_EXT_layer_settings`) of the process's first `vkCreateInstance`.
static APPLICATION_SETTINGS: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Keeps the layer settings chained on `create_info` if it is the process's first instance. It
/// runs before anything is logged (the log's own settings may be among them), so a panic reading
/// them is caught here and leaves no settings, silently.
///
/// # Safety
/// `create_info` must be the application's valid `VkInstanceCreateInfo`.
pub unsafe fn offer_application_settings(create_info: *const ash::vk::InstanceCreateInfo<'_>) {
    APPLICATION_SETTINGS.get_or_init(|| {
        catch_unwind(|| {
            // SAFETY: as the caller vouches.
            let p_next = unsafe { create_info.as_ref() }.map_or(std::ptr::null(), |ci| ci.p_next);
            unsafe { crate::settings::sources::application_settings(p_next) }
        })
        .unwrap_or_default()
    });
}

static LOG: LazyLock<Dispatch> = LazyLock::new(make_dispatch);

fn make_dispatch() -> Dispatch {
    let settings = &*SETTINGS;
    let mut problems = settings.problems.clone();
    let filter = EnvFilter::try_new(&settings.log_filter).unwrap_or_else(|e| {
        problems.push(format!(
            "PIPEKEEP_LOG={:?} is not a filter ({e}); using info",
            settings.log_filter
        ));
        EnvFilter::new("info")
    });
    let file = settings.log_file.as_ref().and_then(|path| {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(f) => Some(f),
            Err(e) => {
                problems.push(format!(
                    "PIPEKEEP_LOG_FILE={} cannot be opened ({e}); logging to stderr",
                    path.display()
                ));
                None
            }
        }
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    let dispatch = match file {
        Some(f) => Dispatch::new(builder.with_ansi(false).with_writer(Mutex::new(f)).finish()),
        None => Dispatch::new(
            builder
                .with_ansi(std::io::stderr().is_terminal())
                .with_writer(std::io::stderr)
                .finish(),
        ),
    };
    tracing::dispatcher::with_default(&dispatch, || {
        for p in &problems {
            tracing::warn!("{p}");
        }
    });
    dispatch
}

/// Runs `body` with the layer's logger; if it panics, logs it and runs `fallback` instead.
pub fn guarded<R>(entry_point: &str, body: impl FnOnce() -> R, fallback: impl FnOnce() -> R) -> R {
    tracing::dispatcher::with_default(&LOG, || match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(payload) => {
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(entry_point, panic = %why, "pipekeep panicked; falling back to the driver for this call");
            fallback()
        }
    })
}

/// Panics where the test setting `PIPEKEEP_TEST_FAIL_SETUP` names this level (`instance` or
/// `device`): a failure while the layer records its data.
pub fn fail_setup_for_tests(level: &str) {
    if SETTINGS.test_fail_setup.as_deref() == Some(level) {
        panic!("PIPEKEEP_TEST_FAIL_SETUP={level}: a forced failure while recording the {level}");
    }
}

/// Writes one `info` line straight to the log's destination. For the exit handler only: glibc
/// runs the main thread's thread-local destructors before `atexit` handlers, so the dispatcher's
/// thread-local state is gone by then and a `tracing` event would be dropped silently. Its time
/// stamp is the other lines' (RFC 3339 in UTC, from the subscriber's own timer).
pub fn write_at_exit(line: &str) {
    use std::io::Write;
    use tracing_subscriber::fmt::{format::Writer, time::FormatTime};
    let mut stamp = String::new();
    let _ = tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(&mut stamp));
    let text = format!("{stamp}  INFO {line} (at exit)\n");
    let to_file = SETTINGS
        .log_file
        .as_ref()
        .and_then(|p| std::fs::OpenOptions::new().append(true).open(p).ok());
    let _ = match to_file {
        Some(mut f) => f.write_all(text.as_bytes()),
        None => std::io::stderr().write_all(text.as_bytes()),
    };
}
