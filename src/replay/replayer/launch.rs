//! A recorded configuration's process as the application had it, besides its create infos: the
//! instance extensions it enabled, the executable name Mesa's driconf matched it by, and whether
//! a layer sat below pipekeep. Each changes the keys the driver gives, so the entries the rebuild
//! writes are the ones the application's next run looks up only where the rebuild reproduces
//! them (the record's `pipekeepLaunch`, docs/FORMAT.md).

use std::ffi::{CStr, CString};

use ash::vk;

use crate::replay::objects::AppInfo;
use crate::replay::record::Launch;

/// `VK_KHR_get_physical_device_properties2`: an API 1.0 application chains feature structures
/// through it.
const PROPERTIES2: &CStr = c"VK_KHR_get_physical_device_properties2";

/// The variable pipekeep reads at each `vkCreateDevice` (`settings::as_if_layers_below_now`): set, it plans the device as where a
/// layer sits below it (it adds no extension, so its keys hold no global key of the driver).
pub const AS_IF_LAYERS_BELOW: &str = "PIPEKEEP_AS_IF_LAYERS_BELOW";

/// The variable Mesa's driconf reads for the executable's name, at each `vkCreateInstance`.
const DRICONF_EXECUTABLE: &str = "MESA_DRICONF_EXECUTABLE_OVERRIDE";

/// The instance extensions the recorded application enabled that the loader offers (a surface
/// extension with no display is still offered), and `VK_KHR_get_physical_device_properties2`
/// for an API 1.0 configuration with feature structures that a record made before the list
/// lacks.
pub(super) fn instance_extensions(entry: &ash::Entry, recorded: &AppInfo) -> Vec<CString> {
    let offered = crate::replay::every_extension::instance_extensions(entry);
    let mut wanted: Vec<CString> = recorded
        .launch
        .instance_extensions
        .iter()
        .filter_map(|e| CString::new(e.as_str()).ok())
        .collect();
    let chains_features = recorded
        .device
        .as_ref()
        .is_some_and(|d| !d.features.is_empty());
    if recorded.api_version < vk::API_VERSION_1_1 && chains_features {
        wanted.push(PROPERTIES2.to_owned());
    }
    wanted.sort();
    wanted.dedup();
    wanted.retain(|e| offered.contains(e));
    wanted
}

/// The process's environment as the configuration's application had it, while this lives: the
/// driconf executable name and pipekeep's plan for a layer below. Put back as it was after.
///
/// The replay makes its instance and device on one thread while no other thread of the process
/// reads the environment (pipekeep's threads of an earlier configuration's device are joined
/// at its `vkDestroyDevice`), as `pipekeep rebuild` sets `PIPEKEEP_TITLE` each title.
pub(super) struct AsLaunched {
    before: Vec<(&'static str, Option<std::ffi::OsString>)>,
}

impl AsLaunched {
    pub(super) fn enter(launch: &Launch) -> AsLaunched {
        let mut as_launched = AsLaunched { before: Vec::new() };
        if let Some(exe) = &launch.executable {
            as_launched.set(DRICONF_EXECUTABLE, Some(exe.as_str()));
        }
        as_launched.set(AS_IF_LAYERS_BELOW, launch.layers_below.then_some("1"));
        as_launched
    }

    fn set(&mut self, name: &'static str, value: Option<&str>) {
        self.before.push((name, std::env::var_os(name)));
        match value {
            Some(v) => std::env::set_var(name, v),
            None => std::env::remove_var(name),
        }
    }
}

impl Drop for AsLaunched {
    fn drop(&mut self) {
        for (name, value) in self.before.drain(..).rev() {
            match value {
                Some(v) => std::env::set_var(name, v),
                None => std::env::remove_var(name),
            }
        }
    }
}
