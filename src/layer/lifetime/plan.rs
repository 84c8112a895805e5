//! What the layer decides of a device before it is made (SPEC "Building a pipeline"): its
//! identity, its own state for the key, the backend, and what it adds to the create info
//! (creation feedback; pipeline binaries with what they need at the application's API version,
//! never where a layer sits below), and the commands of what it added, hidden from the application.

use super::*;

pub(super) const FEEDBACK_EXTENSION: &CStr = c"VK_EXT_pipeline_creation_feedback";
const IDENTIFIER_EXTENSION: &CStr = c"VK_EXT_shader_module_identifier";
const SHADER_OBJECT_EXTENSION: &CStr = c"VK_EXT_shader_object";

/// At `debug`, what of the device enters every key: two runs (an application and a replay of its
/// pipelines) that key alike differently show here which extension or feature tells them apart.
fn log_device_state(state: &crate::key::desc::DeviceState) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let mut extensions: Vec<String> = state
        .extensions
        .iter()
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect();
    extensions.sort();
    extensions.dedup();
    let on = |bools: &[u32]| bools.iter().filter(|b| **b != 0).count();
    let mut features: Vec<String> = state
        .features
        .iter()
        .map(|(stype, bools)| format!("{stype}:{}of{}", on(bools), bools.len()))
        .collect();
    features.sort();
    tracing::debug!(
        digest = %crate::key::text::hex(&crate::key::device_digest(state).0),
        extensions = %extensions.join(","),
        features = %features.join(","),
        core_features = state.core_features.as_deref().map_or(0, on),
        unknown = ?state.unknown,
        "the device's own state, as every key takes it"
    );
}

/// The next layer's `vkGetPhysicalDeviceProperties2`, as the application could call it: core
/// where the application's and the device's API are 1.1 or later, else
/// `VK_KHR_get_physical_device_properties2`'s, where the application enabled it.
///
/// # Safety
/// `device_api` the lesser of the device's API and the application's.
unsafe fn properties2(
    inst: &crate::layer::instance_data::InstanceData,
    device_api: u32,
) -> Option<vk::PFN_vkGetPhysicalDeviceProperties2> {
    let core = vk::api_version_major(device_api) > 1 || vk::api_version_minor(device_api) >= 1;
    let name = if core {
        c"vkGetPhysicalDeviceProperties2"
    } else if inst
        .extensions
        .iter()
        .any(|e| e == "VK_KHR_get_physical_device_properties2")
    {
        c"vkGetPhysicalDeviceProperties2KHR"
    } else {
        return None;
    };
    // SAFETY: the name loaded with its own function type (the KHR command has the core's).
    unsafe {
        crate::layer::instance_data::load::<vk::PFN_vkGetPhysicalDeviceProperties2>(
            inst.next_get_instance_proc_addr,
            inst.handle,
            name,
        )
    }
}

/// One structure of the device's properties (`T`, chained alone), asked as the application
/// could ask it ([`properties2`]).
///
/// # Safety
/// `physical_device` must be of `inst`'s instance; `device_api` the lesser of its API and the
/// application's; `T` a structure of an extension the application enabled.
unsafe fn device_properties<T>(
    inst: &crate::layer::instance_data::InstanceData,
    physical_device: vk::PhysicalDevice,
    device_api: u32,
) -> Option<T>
where
    T: vk::ExtendsPhysicalDeviceProperties2 + Default,
{
    let properties2 = unsafe { properties2(inst, device_api) }?;
    let mut extension = T::default();
    {
        let mut properties = vk::PhysicalDeviceProperties2::default().push_next(&mut extension);
        // SAFETY: the next layer's command, with a chain of a structure it knows by the extension.
        unsafe { properties2(physical_device, &mut properties) };
    }
    Some(extension)
}

/// The device's `shaderModuleIdentifierAlgorithmUUID`.
///
/// # Safety
/// As [`device_properties`], with `VK_EXT_shader_module_identifier` enabled.
unsafe fn identifier_algorithm(
    inst: &crate::layer::instance_data::InstanceData,
    physical_device: vk::PhysicalDevice,
    device_api: u32,
) -> Option<[u8; 16]> {
    let identifier: vk::PhysicalDeviceShaderModuleIdentifierPropertiesEXT<'static> =
        unsafe { device_properties(inst, physical_device, device_api) }?;
    Some(identifier.shader_module_identifier_algorithm_uuid)
}

/// The device's `shaderBinaryUUID` and `shaderBinaryVersion` (little-endian), which a shader
/// object's binary is valid for.
///
/// # Safety
/// As [`device_properties`], with `VK_EXT_shader_object` enabled.
unsafe fn shader_binary_format(
    inst: &crate::layer::instance_data::InstanceData,
    physical_device: vk::PhysicalDevice,
    device_api: u32,
) -> Option<[u8; 20]> {
    let shader_object: vk::PhysicalDeviceShaderObjectPropertiesEXT<'static> =
        unsafe { device_properties(inst, physical_device, device_api) }?;
    let mut format = [0u8; 20];
    format[..16].copy_from_slice(&shader_object.shader_binary_uuid);
    format[16..].copy_from_slice(&shader_object.shader_binary_version.to_le_bytes());
    Some(format)
}

/// The names of the extensions a physical device offers.
pub(super) unsafe fn offered_extensions(
    inst: &crate::layer::instance_data::InstanceData,
    physical_device: vk::PhysicalDevice,
) -> Vec<Vec<u8>> {
    let mut count = 0u32;
    // SAFETY: the two-call idiom on the next layer's command.
    unsafe {
        if (inst.enumerate_device_extension_properties)(
            physical_device,
            std::ptr::null(),
            &mut count,
            std::ptr::null_mut(),
        ) != vk::Result::SUCCESS
        {
            return Vec::new();
        }
        let mut props = vec![vk::ExtensionProperties::default(); count as usize];
        let _ = (inst.enumerate_device_extension_properties)(
            physical_device,
            std::ptr::null(),
            &mut count,
            props.as_mut_ptr(),
        );
        props.truncate(count as usize);
        props
            .iter()
            .map(|p| bounded_c_string(&p.extension_name).into_bytes())
            .collect()
    }
}

/// Whether `vkCreateDevice`'s answer may be the driver refusing what the layer added (an
/// extension or a feature), so that the device is asked again as the application asked; never
/// out of memory or a lost device.
pub(super) fn refused_for_what_was_added(result: vk::Result) -> bool {
    matches!(
        result,
        vk::Result::ERROR_EXTENSION_NOT_PRESENT
            | vk::Result::ERROR_FEATURE_NOT_PRESENT
            | vk::Result::ERROR_INITIALIZATION_FAILED
    )
}

/// What the layer decides of a device before it is made: its identity, its own state for the
/// key, the backend, and what it adds to the create info (`VK_EXT_pipeline_creation_feedback`
/// where feedback needs it; pipeline binaries and maintenance5 for the `binary` backend).
pub(super) struct DevicePlan {
    pub(super) properties: vk::PhysicalDeviceProperties,
    /// `shaderModuleIdentifierAlgorithmUUID`, where the application enabled
    /// `VK_EXT_shader_module_identifier`: the identifiers it will be given are valid for it.
    pub(super) identifier_algorithm: Option<[u8; 16]>,
    /// Where the application enabled `VK_EXT_shader_object`: how its shader objects are keyed.
    pub(super) shader_objects: Option<crate::layer::device::ShaderObjectsKeying>,
    pub(super) active: bool,
    pub(super) core_feedback: bool,
    pub(super) app_enabled_feedback: bool,
    pub(super) add_feedback: bool,
    pub(super) extensions: Vec<*const c_char>,
    /// The device's own state, for the key.
    pub(super) device_state: Digest,
    /// What the record says of the device (the features a replay must enable alike).
    pub(super) app_features: crate::replay::record::AppState,
    pub(super) backend: Backend,
    /// Why that backend, for the device's log line.
    pub(super) backend_why: &'static str,
    /// `VK_KHR_pipeline_binary` is enabled on the device (by the application or the layer).
    pub(super) binaries_enabled: bool,
    /// The application enabled `VK_KHR_pipeline_binary` itself.
    pub(super) app_enabled_binaries: bool,
    /// ... and with it, itself, everything the `binary` backend uses: maintenance5 and both
    /// features.
    pub(super) app_enabled_all_binaries_need: bool,
    /// A layer sits below pipekeep: it adds no command-bearing extension.
    pub(super) layers_below: bool,
    /// The commands of the extensions the layer added: `vkGetDeviceProcAddr` hides them from the
    /// application, which did not enable them.
    pub(super) hidden_commands: Vec<&'static CStr>,
    /// Feature structures the layer chains in front of the application's, boxed so that their
    /// addresses hold while the create info points at them (through `chain_head`).
    pub(super) _added_features: Box<AddedFeatures>,
    pub(super) chain_head: *const std::ffi::c_void,
}

/// The feature structures the `binary` backend may need the layer to enable.
pub(super) struct AddedFeatures {
    pub(super) binaries: crate::layer::binary_abi::PhysicalDevicePipelineBinaryFeatures,
    pub(super) maintenance5: vk::PhysicalDeviceMaintenance5FeaturesKHR<'static>,
}

impl DevicePlan {
    pub(super) fn patch<'a>(&'a self, ci: &vk::DeviceCreateInfo<'a>) -> vk::DeviceCreateInfo<'a> {
        let mut patched = *ci;
        if self.extensions.len() != ci.enabled_extension_count as usize {
            patched.enabled_extension_count = self.extensions.len() as u32;
            patched.pp_enabled_extension_names = self.extensions.as_ptr();
        }
        if !self.chain_head.is_null() {
            patched.p_next = self.chain_head;
        }
        patched
    }

    pub(super) fn feedback_valid(&self) -> bool {
        self.core_feedback || self.app_enabled_feedback || self.add_feedback
    }

    /// Whether the create info the driver sees differs from the application's.
    pub(super) fn adds_anything(&self) -> bool {
        self.add_feedback || !self.chain_head.is_null() || !self.hidden_commands.is_empty()
    }

    /// The plan for the device made as the application asked: nothing added, so `cache` unless
    /// the application enabled pipeline binaries itself.
    pub(super) fn adding_nothing(mut self) -> DevicePlan {
        self.add_feedback = false;
        self.chain_head = std::ptr::null();
        self.hidden_commands.clear();
        self.binaries_enabled = self.app_enabled_binaries;
        if !self.app_enabled_all_binaries_need && self.backend == Backend::Binary {
            self.backend = Backend::Cache;
            self.backend_why = "the driver refused the device with pipeline binaries added";
        }
        self
    }
}

/// `VK_KHR_dynamic_rendering`, which maintenance5 needs below Vulkan 1.3.
pub(super) const DYNAMIC_RENDERING: &CStr = c"VK_KHR_dynamic_rendering";

/// The commands of an extension the layer may add, which the application must not be given.
pub(super) fn commands_of(extension: &CStr) -> &'static [&'static CStr] {
    match extension.to_bytes() {
        b"VK_KHR_pipeline_binary" => &[
            c"vkCreatePipelineBinariesKHR",
            c"vkDestroyPipelineBinaryKHR",
            c"vkGetPipelineKeyKHR",
            c"vkGetPipelineBinaryDataKHR",
            c"vkReleaseCapturedPipelineDataKHR",
        ],
        b"VK_KHR_maintenance5" => &[
            c"vkCmdBindIndexBuffer2KHR",
            c"vkGetRenderingAreaGranularityKHR",
            c"vkGetDeviceImageSubresourceLayoutKHR",
            c"vkGetImageSubresourceLayout2KHR",
        ],
        b"VK_KHR_dynamic_rendering" => &[c"vkCmdBeginRenderingKHR", c"vkCmdEndRenderingKHR"],
        _ => &[],
    }
}

/// The extensions the `binary` backend needs that the application did not enable, each with
/// what it depends on at the application's API version (`device_api`: the lesser of the
/// application's and the device's), or why the device cannot have them.
pub(super) fn binary_extensions(
    device_api: u32,
    app_enabled: &dyn Fn(&CStr) -> bool,
    offers: &dyn Fn(&CStr) -> bool,
    layers_below: bool,
) -> Result<Vec<&'static CStr>, &'static str> {
    use crate::layer::binary_abi as bin;
    let at_least = |minor: u32| {
        vk::api_version_major(device_api) > 1 || vk::api_version_minor(device_api) >= minor
    };
    // maintenance5 needs Vulkan 1.1 and dynamic rendering (core from 1.3); dynamic rendering
    // needs depth/stencil resolve (core from 1.2) where the layer would add it.
    if !at_least(1) {
        return Err("the application's API version (1.0) is below what pipeline binaries need");
    }
    let mut needed = vec![bin::EXTENSION];
    if !at_least(4) {
        needed.push(bin::MAINTENANCE5);
    }
    if !at_least(3) {
        if !at_least(2) && !app_enabled(DYNAMIC_RENDERING) {
            return Err("the application's API version (1.1) is below what pipeline binaries need");
        }
        needed.push(DYNAMIC_RENDERING);
    }
    let added: Vec<&'static CStr> = needed.into_iter().filter(|e| !app_enabled(e)).collect();
    if added.iter().any(|e| !offers(e)) {
        return Err("no pipeline binaries here");
    }
    // Even where the application enabled them itself, a layer below that does not know them
    // crashes the application at pipekeep's first call of them, not the application's.
    if layers_below {
        return Err("a layer below pipekeep may not know pipeline binaries, so pipekeep uses none");
    }
    Ok(added)
}

pub(super) unsafe fn plan_device(
    inst: &crate::layer::instance_data::InstanceData,
    physical_device: vk::PhysicalDevice,
    ci: &vk::DeviceCreateInfo,
    layers_below: bool,
) -> DevicePlan {
    use crate::layer::binary_abi as bin;
    let mut properties = vk::PhysicalDeviceProperties::default();
    // SAFETY: the next layer's command on a physical device of this instance.
    unsafe { (inst.get_physical_device_properties)(physical_device, &mut properties) };
    let device_api = inst.api_version.min(properties.api_version);
    let at_least = |minor: u32| {
        vk::api_version_major(device_api) > 1 || vk::api_version_minor(device_api) >= minor
    };
    let core_feedback = at_least(3);
    // SAFETY: the application's create info.
    let chain = unsafe { crate::layer::device_state::read(ci) };
    let app_enabled = |name: &CStr| chain.extensions.iter().any(|e| e == name.to_bytes());
    let offered = unsafe { offered_extensions(inst, physical_device) };
    let offers = |name: &CStr| offered.iter().any(|e| e == name.to_bytes());
    let mut extensions: Vec<*const c_char> = unsafe {
        crate::layer::objects::slice(ci.pp_enabled_extension_names, ci.enabled_extension_count)
    }
    .to_vec();
    let app_enabled_feedback = app_enabled(FEEDBACK_EXTENSION);
    let active = !SETTINGS.disabled;
    let add_feedback =
        active && !core_feedback && !app_enabled_feedback && offers(FEEDBACK_EXTENSION);
    if add_feedback {
        extensions.push(FEEDBACK_EXTENSION.as_ptr());
    }

    let maintenance5_core = at_least(4);
    let binary_plan = if !active {
        Err("pipekeep is disabled")
    } else if chain.maintenance5 == Some(false) || chain.pipeline_binaries == Some(false) {
        Err("the application turned maintenance5 or pipeline binaries off")
    } else {
        binary_extensions(device_api, &app_enabled, &offers, layers_below)
    };
    let binaries_possible = binary_plan.is_ok();
    let refused_before = SETTINGS.root.as_ref().is_some_and(|root| {
        let identity = Identity::of_device(&properties);
        crate::store::refuses_binaries(root, &inst.title, &identity)
    });
    let (backend, backend_why) = match SETTINGS.backend {
        BackendSetting::Cache => (Backend::Cache, "PIPEKEEP_BACKEND=cache"),
        BackendSetting::Binary if binaries_possible => (Backend::Binary, "PIPEKEEP_BACKEND=binary"),
        BackendSetting::Binary => {
            let why = binary_plan.as_ref().err().copied().unwrap_or_default();
            tracing::warn!(why, "PIPEKEEP_BACKEND=binary, but this device cannot take pipeline binaries here; using cache");
            (Backend::Cache, "binary asked, not available")
        }
        BackendSetting::Auto if !binaries_possible => (
            Backend::Cache,
            binary_plan.as_ref().err().copied().unwrap_or_default(),
        ),
        // NVIDIA's binaries do not load in another process once the driver has trained its
        // per-process dictionary (measured on 580.159.04).
        BackendSetting::Auto if properties.vendor_id == NVIDIA => (
            Backend::Cache,
            "NVIDIA's binaries do not load in another process",
        ),
        BackendSetting::Auto if refused_before => (
            Backend::Cache,
            "this driver refused binaries another process wrote",
        ),
        BackendSetting::Auto => (Backend::Binary, "pipeline binaries offered"),
    };
    let mut added_features = Box::new(AddedFeatures {
        binaries: bin::PhysicalDevicePipelineBinaryFeatures {
            s_type: bin::PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES,
            p_next: std::ptr::null_mut(),
            pipeline_binaries: vk::TRUE,
        },
        maintenance5: vk::PhysicalDeviceMaintenance5FeaturesKHR::default().maintenance5(true),
    });
    let mut chain_head = std::ptr::null();
    let mut hidden_commands = Vec::new();
    // Where the device can take them, pipeline binaries are enabled whichever backend builds:
    // the driver's global key, read through them, enters every key, so that the entries of
    // either backend are the other's to serve. Never on NVIDIA's driver unless asked for (its
    // binaries do not travel, and its global key is never read).
    let enable_binaries = backend == Backend::Binary || properties.vendor_id != NVIDIA;
    let added_binaries = binary_plan.as_ref().ok().filter(|_| enable_binaries);
    if let Some(added) = added_binaries {
        for extension in added {
            extensions.push(extension.as_ptr());
            hidden_commands.extend_from_slice(commands_of(extension));
        }
        // Chained in front of the application's structures, each only where it has none.
        let mut next = ci.p_next as *mut std::ffi::c_void;
        if chain.maintenance5.is_none() {
            added_features.maintenance5.p_next = next;
            next = (&mut added_features.maintenance5
                as *mut vk::PhysicalDeviceMaintenance5FeaturesKHR)
                .cast();
        }
        if chain.pipeline_binaries.is_none() {
            added_features.binaries.p_next = next;
            next = (&mut added_features.binaries as *mut bin::PhysicalDevicePipelineBinaryFeatures)
                .cast();
        }
        if !std::ptr::eq(next, ci.p_next) {
            chain_head = next as *const std::ffi::c_void;
        }
    }
    log_device_state(&chain.state);
    DevicePlan {
        properties,
        identifier_algorithm: (active && app_enabled(IDENTIFIER_EXTENSION))
            .then(|| unsafe { identifier_algorithm(inst, physical_device, device_api) })
            .flatten(),
        shader_objects: (active && app_enabled(SHADER_OBJECT_EXTENSION))
            .then(|| unsafe { shader_binary_format(inst, physical_device, device_api) })
            .flatten()
            .map(|binary_format| crate::layer::device::ShaderObjectsKeying {
                binary_format,
                device: crate::key::whole_device_digest(&chain.state),
            }),
        active,
        core_feedback,
        app_enabled_feedback,
        add_feedback,
        extensions,
        device_state: crate::key::device_digest(&chain.state),
        app_features: crate::replay::record::AppState::from_device(None, &chain.state),
        backend,
        backend_why,
        binaries_enabled: added_binaries.is_some() || app_enabled(bin::EXTENSION),
        app_enabled_binaries: app_enabled(bin::EXTENSION),
        app_enabled_all_binaries_need: app_enabled(bin::EXTENSION)
            && chain.pipeline_binaries == Some(true)
            && chain.maintenance5 == Some(true)
            && (maintenance5_core || app_enabled(bin::MAINTENANCE5)),
        layers_below,
        hidden_commands,
        _added_features: added_features,
        chain_head,
    }
}
