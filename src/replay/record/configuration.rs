//! A title's device configurations: the application and device its pipelines were made for, as
//! one application entry each, and the device's state read back from one.

use serde_json::{json, Map, Value};

/// The application's `VkApplicationInfo` as it gave it at `vkCreateInstance` (no
/// `pApplicationInfo`: no names, versions 0, `apiVersion` 1.0, as the layer reads it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ApplicationInfo {
    pub name: Option<String>,
    pub version: u32,
    pub engine_name: Option<String>,
    pub engine_version: u32,
    pub api_version: u32,
}

/// One device configuration of a title: the application and device the pipelines were made for,
/// what a replay needs to make an instance and a device that key them alike. Each is one
/// application entry of the record (its hash: [`configuration_hash`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppState {
    pub application: ApplicationInfo,
    pub robust_buffer_access: bool,
    /// `VK_EXT_robustness2`'s features, where the device enabled the structure:
    /// robustBufferAccess2, robustImageAccess2, nullDescriptor.
    pub robustness2: Option<[bool; 3]>,
    pub robust_image_access: bool,
    /// `VK_EXT_mesh_shader`'s features, where enabled: whether task shaders are.
    pub mesh_task_shader: Option<bool>,
    /// Everything the device was made with that enters the key (extensions, every feature
    /// structure as its `VkBool32`s, `pEnabledFeatures`, the `sType` of each structure the layer
    /// does not know): a replay that reads it makes its device exactly so, and keys its pipelines
    /// as the application did (a structure the layer does not know it leaves out, as the key
    /// does).
    pub device: Option<crate::key::desc::DeviceState>,
    /// What else of the application's process decides the driver's keys.
    pub launch: Launch,
}

/// What of the application's process, besides its create infos, decides the keys the driver
/// gives (so the keys pipekeep files entries under): a rebuild reproduces it, or leaves the
/// configuration to the application's own background rebuild.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Launch {
    /// The instance extensions the application enabled, sorted: the device extensions it enabled
    /// may need them (`VK_KHR_swapchain` needs `VK_KHR_surface`), and an API 1.0 application's
    /// feature structures need `VK_KHR_get_physical_device_properties2`.
    pub instance_extensions: Vec<String>,
    /// The executable's name as Mesa's driconf matches it (`MESA_DRICONF_EXECUTABLE_OVERRIDE`
    /// where set, else the invoked program's file name): a `.drirc` option for it changes the
    /// driver's global key. None in records made before it.
    pub executable: Option<String>,
    /// A layer sat below pipekeep: pipekeep then enabled no pipeline binaries, so its keys hold
    /// no global key of the driver.
    pub layers_below: bool,
}

impl Launch {
    fn is_default(&self) -> bool {
        *self == Launch::default()
    }

    fn to_json(&self) -> Value {
        let mut v = json!({ "instanceExtensions": self.instance_extensions });
        if let Some(exe) = &self.executable {
            v["executable"] = json!(exe);
        }
        if self.layers_below {
            v["layersBelow"] = json!(true);
        }
        v
    }

    /// The member [`LAUNCH_KEY`] as a record holds it (absent: the default).
    pub fn from_json(v: Option<&Value>) -> Launch {
        let Some(v) = v else {
            return Launch::default();
        };
        let mut instance_extensions: Vec<String> = v["instanceExtensions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        instance_extensions.sort();
        instance_extensions.dedup();
        Launch {
            instance_extensions,
            executable: v["executable"].as_str().map(str::to_owned),
            layers_below: v["layersBelow"].as_bool().unwrap_or(false),
        }
    }
}

impl AppState {
    /// What a device's create info enabled, from the feature structures its key read (each by
    /// `sType`, as its `VkBool32`s), for the application named `name`.
    pub fn from_device(name: Option<String>, state: &crate::key::desc::DeviceState) -> AppState {
        let features = |stype: i32| {
            state
                .features
                .iter()
                .find(|(s, _)| *s == stype)
                .map(|(_, f)| f.clone())
        };
        let on = |f: &[u32], i: usize| f.get(i).is_some_and(|b| *b != 0);
        let core = state
            .core_features
            .clone()
            .or_else(|| features(1_000_059_000));
        // In an order of its own (as the key's digest reads it): a configuration is one entry
        // however the application ordered its chain.
        let mut device = state.clone();
        device.extensions.sort();
        device.extensions.dedup();
        device.features.sort_by_key(|(stype, _)| *stype);
        device.unknown.sort_unstable();
        AppState {
            application: ApplicationInfo {
                name,
                ..ApplicationInfo::default()
            },
            robust_buffer_access: core.as_deref().is_some_and(|f| on(f, 0)),
            robustness2: features(1_000_286_000).map(|f| [on(&f, 0), on(&f, 1), on(&f, 2)]),
            robust_image_access: features(1_000_335_000).is_some_and(|f| on(&f, 0))
                || features(53).is_some_and(|f| on(&f, 0)),
            mesh_task_shader: features(1_000_328_000).map(|f| on(&f, 0)),
            device: Some(device),
            launch: Launch::default(),
        }
    }
}

/// The hash of a configuration's application entry: from its content (the entry's bytes), so
/// that each configuration is one entry, whichever process writes it.
///
/// Of the [`Launch`], what decides the driver's keys enters the hash (the executable's name, which
/// driconf matches, and a layer below, which keeps binaries and the global key out): one title
/// launched two such ways is two configurations, each rebuilt as it was launched. The instance's
/// extensions stand in the entry but not in its hash: they decide nothing of a key, and the
/// first recording process's are enough to make the device again.
pub fn configuration_hash(app: &AppState) -> u64 {
    let keyed = AppState {
        launch: Launch {
            instance_extensions: Vec::new(),
            ..app.launch.clone()
        },
        ..app.clone()
    };
    payload_hash(&application(&keyed))
}

/// The hashes a record may hold this configuration's pipelines under: [`configuration_hash`], and
/// the one records written before the launch entered it gave (over the entry with no launch).
/// A pipeline found in the store is never recorded again, so its link keeps the hash it was
/// written under; read under both, the background rebuild still makes it.
pub fn configuration_hashes(app: &AppState) -> Vec<u64> {
    let legacy = payload_hash(&application(&AppState {
        launch: Launch::default(),
        ..app.clone()
    }));
    let mut hashes = vec![configuration_hash(app), legacy];
    hashes.dedup();
    hashes
}

pub(super) fn payload_hash(payload: &[u8]) -> u64 {
    let digest = blake3::hash(payload);
    u64::from_le_bytes(digest.as_bytes()[..8].try_into().expect("8 bytes"))
}

pub(super) fn application(app: &AppState) -> Vec<u8> {
    let mut info = Map::new();
    let a = &app.application;
    if let Some(name) = &a.name {
        info.insert("applicationName".into(), json!(name));
    }
    if let Some(name) = &a.engine_name {
        info.insert("engineName".into(), json!(name));
    }
    info.insert("applicationVersion".into(), json!(a.version));
    info.insert("engineVersion".into(), json!(a.engine_version));
    info.insert("apiVersion".into(), json!(a.api_version));
    let mut next = Vec::new();
    if let Some([buffer, image, null]) = app.robustness2 {
        next.push(json!({
            "sType": 1_000_286_000, "robustBufferAccess2": u32::from(buffer),
            "robustImageAccess2": u32::from(image), "nullDescriptor": u32::from(null),
        }));
    }
    if app.robust_image_access {
        next.push(json!({ "sType": 1_000_335_000, "robustImageAccess": 1 }));
    }
    if let Some(task) = app.mesh_task_shader {
        next.push(
            json!({ "sType": 1_000_328_000, "meshShader": 1, "taskShader": u32::from(task) }),
        );
    }
    let mut doc = json!({
        "version": 6,
        "applicationInfo": info,
        "physicalDeviceFeatures": {
            "robustBufferAccess": u32::from(app.robust_buffer_access), "pNext": next,
        },
    });
    if let Some(device) = &app.device {
        doc[DEVICE_KEY] = device_json(device);
    }
    if !app.launch.is_default() {
        doc[LAUNCH_KEY] = app.launch.to_json();
    }
    // The process's pointer size enters every key: a 32-bit build's configuration is its own.
    doc[ABI_KEY] = json!(crate::store::identity::HOST_ABI);
    serde_json::to_vec(&doc).expect("JSON of plain values")
}

/// The application-info member (pipekeep's own) that says the driver ABI (the pointer size, 4 or
/// 8) of the process that recorded the configuration; a record without it is a 64-bit one's.
pub const ABI_KEY: &str = "pipekeepAbi";

/// The application-info member (pipekeep's own; Fossilize's readers pass over it) that holds the
/// device's state whole.
pub const DEVICE_KEY: &str = "pipekeepDevice";

/// The application-info member (pipekeep's own) that holds the configuration's [`Launch`].
pub const LAUNCH_KEY: &str = "pipekeepLaunch";

pub(super) fn device_json(d: &crate::key::desc::DeviceState) -> Value {
    let extensions: Vec<String> = d
        .extensions
        .iter()
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect();
    let features: Vec<Value> = d
        .features
        .iter()
        .map(|(stype, values)| json!({ "sType": stype, "values": values }))
        .collect();
    let mut v =
        json!({ "extensions": extensions, "features": features, "coreFeatures": d.core_features });
    if !d.unknown.is_empty() {
        v["unknown"] = json!(d.unknown);
    }
    v
}

/// Whether `count` `VkBool32`s are exactly what a feature structure of `stype` holds: the
/// rebuild makes each structure from them for the driver to read (and to write, when it asks what
/// the device offers), so a damaged or foreign record must never size one shorter.
fn as_long_as_its_structure(stype: i32, count: usize) -> bool {
    crate::key::features::known(stype).is_some_and(|row| row.bools == count)
}

/// A device's state as a record holds it (the member [`DEVICE_KEY`]).
pub fn device_from_json(v: &Value) -> Option<crate::key::desc::DeviceState> {
    let u32s = |v: &Value| -> Option<Vec<u32>> {
        v.as_array()?
            .iter()
            .map(|x| x.as_u64().map(|n| n as u32))
            .collect()
    };
    Some(crate::key::desc::DeviceState {
        extensions: v["extensions"]
            .as_array()?
            .iter()
            .map(|e| e.as_str().map(|s| s.as_bytes().to_vec()))
            .collect::<Option<_>>()?,
        features: v["features"]
            .as_array()?
            .iter()
            .map(|f| Some((f["sType"].as_i64()? as i32, u32s(&f["values"])?)))
            .map(|f| f.filter(|(stype, values)| as_long_as_its_structure(*stype, values.len())))
            .collect::<Option<_>>()?,
        core_features: match &v["coreFeatures"] {
            Value::Null => None,
            other => Some(u32s(other).filter(|c| c.len() == crate::key::features::CORE_FEATURES)?),
        },
        unknown: match &v["unknown"] {
            Value::Null => Vec::new(),
            other => other
                .as_array()?
                .iter()
                .map(|s| s.as_i64().map(|s| s as i32))
                .collect::<Option<_>>()?,
        },
    })
}
