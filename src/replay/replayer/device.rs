//! The device a replay makes: exactly as a record names it, every core feature with the
//! recorded robustness (another database), or every extension offered.

use std::ffi::{CStr, CString};

use ash::vk;
use serde_json::Value;

use super::fields::{find_next, u};

/// What a replay's device has on, of what some pipelines need.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Enabled {
    pub subgroup_size_control: bool,
    pub mesh_shaders: bool,
    /// `VK_KHR_ray_tracing_pipeline` with its `rayTracingPipeline` feature.
    pub ray_tracing: bool,
    /// `VK_EXT_shader_object` with its `shaderObject` feature.
    pub shader_objects: bool,
}

/// The features the recorded application enabled, where this device has them.
struct Features {
    core: vk::PhysicalDeviceFeatures,
    v11: vk::PhysicalDeviceVulkan11Features<'static>,
    v12: vk::PhysicalDeviceVulkan12Features<'static>,
    v13: vk::PhysicalDeviceVulkan13Features<'static>,
    robustness2: Option<vk::PhysicalDeviceRobustness2FeaturesEXT<'static>>,
    mesh: Option<vk::PhysicalDeviceMeshShaderFeaturesEXT<'static>>,
    extensions: Vec<&'static CStr>,
}

fn device_extensions(instance: &ash::Instance, physical: vk::PhysicalDevice) -> Vec<CString> {
    // SAFETY: a physical device of this instance.
    unsafe { instance.enumerate_device_extension_properties(physical) }
        .unwrap_or_default()
        .iter()
        .map(|p| {
            p.extension_name_as_c_str()
                .map(CStr::to_owned)
                .unwrap_or_default()
        })
        .collect()
}

/// Enables every core feature the device has, but follows the recording for those that change
/// how code is compiled (robustness) and for extension features.
fn choose_features(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    recorded: &Value,
) -> Features {
    let available = device_extensions(instance, physical);
    let has = |name: &CStr| available.iter().any(|e| e.as_c_str() == name);
    let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
    let mut v13 = vk::PhysicalDeviceVulkan13Features::default();
    let mut rob2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
    let mut mesh = vk::PhysicalDeviceMeshShaderFeaturesEXT::default();
    let mut f2 = vk::PhysicalDeviceFeatures2::default()
        .push_next(&mut v11)
        .push_next(&mut v12)
        .push_next(&mut v13);
    if has(ash::ext::robustness2::NAME) {
        f2 = f2.push_next(&mut rob2);
    }
    if has(ash::ext::mesh_shader::NAME) {
        f2 = f2.push_next(&mut mesh);
    }
    // SAFETY: a valid chain of feature structs.
    unsafe { instance.get_physical_device_features2(physical, &mut f2) };
    let mut core = f2.features;
    core.robust_buffer_access &= u(recorded, "robustBufferAccess");
    v13.robust_image_access &=
        find_next(recorded, 1000335000).map_or(0, |r| u(r, "robustImageAccess"));
    let (v11, v12, v13) = (strip(v11), strip(v12), strip(v13));
    let mut extensions = Vec::new();
    if has(ash::khr::push_descriptor::NAME) {
        extensions.push(ash::khr::push_descriptor::NAME);
    }
    let robustness2 = find_next(recorded, 1000286000)
        .filter(|_| has(ash::ext::robustness2::NAME))
        .map(|r| {
            extensions.push(ash::ext::robustness2::NAME);
            vk::PhysicalDeviceRobustness2FeaturesEXT::default()
                .robust_buffer_access2(
                    rob2.robust_buffer_access2 != 0
                        && u(r, "robustBufferAccess2") != 0
                        && core.robust_buffer_access != 0,
                )
                .robust_image_access2(
                    rob2.robust_image_access2 != 0 && u(r, "robustImageAccess2") != 0,
                )
                .null_descriptor(rob2.null_descriptor != 0 && u(r, "nullDescriptor") != 0)
        });
    let mesh = find_next(recorded, 1000328000)
        .filter(|_| has(ash::ext::mesh_shader::NAME) && mesh.mesh_shader != 0)
        .map(|r| {
            extensions.push(ash::ext::mesh_shader::NAME);
            vk::PhysicalDeviceMeshShaderFeaturesEXT::default()
                .mesh_shader(true)
                .task_shader(mesh.task_shader != 0 && u(r, "taskShader") != 0)
        });
    Features {
        core,
        v11,
        v12,
        v13,
        robustness2,
        mesh,
        extensions,
    }
}

/// A device with every core feature the physical device has, and the recorded robustness and
/// extension features. Returns it with what it has on (never ray tracing: Fossilize's
/// application entry does not say it was on).
pub(super) unsafe fn chosen_device(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    recorded: &Value,
) -> Result<(ash::Device, Enabled), String> {
    let mut features = choose_features(instance, physical, recorded);
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&priorities)];
    let extension_ptrs: Vec<*const std::ffi::c_char> =
        features.extensions.iter().map(|e| e.as_ptr()).collect();
    let mut device_ci = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&extension_ptrs)
        .enabled_features(&features.core)
        .push_next(&mut features.v11)
        .push_next(&mut features.v12)
        .push_next(&mut features.v13);
    if let Some(r) = features.robustness2.as_mut() {
        device_ci = device_ci.push_next(r);
    }
    if let Some(m) = features.mesh.as_mut() {
        device_ci = device_ci.push_next(m);
    }
    // SAFETY: a valid create info whose chain outlives the call.
    let device = unsafe { instance.create_device(physical, &device_ci, None) }
        .map_err(|e| format!("vkCreateDevice: {e}"))?;
    let enabled = Enabled {
        subgroup_size_control: features.v13.subgroup_size_control != 0,
        mesh_shaders: features.mesh.is_some(),
        ray_tracing: false,
        shader_objects: false,
    };
    Ok((device, enabled))
}

/// A device with every extension offered and every feature structure reported on. Returns it
/// with what it has on.
pub(super) unsafe fn every_extension_device(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
) -> Result<(ash::Device, Enabled), String> {
    // SAFETY: a physical device of this instance.
    let every = unsafe { crate::replay::every_extension::EveryExtension::of(instance, physical) };
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&priorities)];
    let ci = every.apply(vk::DeviceCreateInfo::default().queue_create_infos(&queues));
    // SAFETY: a valid create info whose chain lives in `every`, past the call.
    let device = unsafe { instance.create_device(physical, &ci, None) }
        .map_err(|e| format!("vkCreateDevice with every extension: {e}"))?;
    let subgroup_size_control = every.enables_feature(
        vk::StructureType::PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES,
        0,
    );
    let mesh_shaders = every.enables_feature(
        vk::StructureType::PHYSICAL_DEVICE_MESH_SHADER_FEATURES_EXT,
        1,
    );
    let ray_tracing = every.enables_feature(
        vk::StructureType::PHYSICAL_DEVICE_RAY_TRACING_PIPELINE_FEATURES_KHR,
        0,
    );
    let shader_objects = every.enables_feature(
        vk::StructureType::PHYSICAL_DEVICE_SHADER_OBJECT_FEATURES_EXT,
        0,
    );
    let enabled = Enabled {
        subgroup_size_control,
        mesh_shaders,
        ray_tracing,
        shader_objects,
    };
    Ok((device, enabled))
}

/// Why this physical device does not offer a feature the record enables: the first such, by
/// structure and index (the core features where `stype` is 0).
fn feature_not_offered(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    state: &crate::key::desc::DeviceState,
    instance_11: bool,
) -> Option<String> {
    let enabled_but_not_offered = |wanted: &[u32], offered: &[u32]| {
        wanted
            .iter()
            .enumerate()
            .find(|(i, w)| **w != 0 && offered.get(*i).is_none_or(|o| *o == 0))
            .map(|(i, _)| i)
    };
    if let Some(core) = &state.core_features {
        // SAFETY: a physical device of this instance.
        let offered = unsafe { instance.get_physical_device_features(physical) };
        let n = size_of::<vk::PhysicalDeviceFeatures>() / 4;
        // SAFETY: VkPhysicalDeviceFeatures is exactly its VkBool32s, in order.
        let offered = unsafe {
            std::slice::from_raw_parts(
                &offered as *const vk::PhysicalDeviceFeatures as *const u32,
                n,
            )
        };
        if let Some(i) = enabled_but_not_offered(core, offered) {
            return Some(format!("the device does not offer core feature {i}"));
        }
    }
    // Structures can only be asked of an instance of Vulkan 1.1 (the application's was; a 1.0
    // one chained none the driver reads): vkCreateDevice says the rest.
    if !instance_11 || state.features.is_empty() {
        return None;
    }
    let zeroed: Vec<(i32, Vec<u32>)> = state
        .features
        .iter()
        .map(|(stype, values)| (*stype, vec![0; values.len()]))
        .collect();
    let chain = crate::replay::feature_chain::FeatureChain::new(&zeroed);
    let mut f2 = vk::PhysicalDeviceFeatures2 {
        p_next: chain.head(),
        ..Default::default()
    };
    // SAFETY: a chain of feature structures, each as long as its sType's (the record read them
    // so), living in `chain` through the call.
    unsafe { instance.get_physical_device_features2(physical, &mut f2) };
    for (n, (stype, wanted)) in state.features.iter().enumerate() {
        if let Some(i) = enabled_but_not_offered(wanted, &chain.values(n, wanted.len())) {
            return Some(format!(
                "the device does not offer feature {i} of structure sType {stype}"
            ));
        }
    }
    None
}

/// A device made with exactly the extensions and feature structures a record names (each
/// feature structure rebuilt from its `sType` and `VkBool32`s), where this physical device
/// offers them all. Returns it with what it has on: what the application's device had (its
/// ray-tracing pipelines' extension and features among them, as it chained them).
pub(super) unsafe fn exact_device(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    state: &crate::key::desc::DeviceState,
    instance_11: bool,
) -> Result<(ash::Device, Enabled), String> {
    let offered = device_extensions(instance, physical);
    let mut extensions = Vec::new();
    for e in &state.extensions {
        let name = CString::new(e.clone()).map_err(|e| e.to_string())?;
        if !offered.contains(&name) {
            return Err(format!(
                "the device does not offer {}, which the recorded pipelines were made with",
                name.to_string_lossy()
            ));
        }
        extensions.push(name);
    }
    if let Some(why) = feature_not_offered(instance, physical, state, instance_11) {
        return Err(why);
    }
    let extension_ptrs: Vec<*const std::ffi::c_char> =
        extensions.iter().map(|e| e.as_ptr()).collect();
    let chain = crate::replay::feature_chain::FeatureChain::new(&state.features);
    let next = chain.head();
    let mut core = vk::PhysicalDeviceFeatures::default();
    if let Some(values) = &state.core_features {
        let n = values
            .len()
            .min(size_of::<vk::PhysicalDeviceFeatures>() / 4);
        // SAFETY: VkPhysicalDeviceFeatures is exactly its VkBool32s, in order.
        unsafe {
            std::ptr::copy_nonoverlapping(
                values.as_ptr(),
                &mut core as *mut vk::PhysicalDeviceFeatures as *mut u32,
                n,
            )
        };
    }
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&priorities)];
    let mut device_ci = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&extension_ptrs);
    if state.core_features.is_some() {
        device_ci = device_ci.enabled_features(&core);
    }
    device_ci.p_next = next;
    // SAFETY: a create info whose chain (in `buffers`) outlives the call.
    let device = unsafe { instance.create_device(physical, &device_ci, None) }
        .map_err(|e| format!("vkCreateDevice as recorded: {e}"))?;
    drop(chain);
    let feature = |stype: i32, index: usize| {
        state
            .features
            .iter()
            .find(|(s, _)| *s == stype)
            .and_then(|(_, v)| v.get(index))
            .is_some_and(|b| *b != 0)
    };
    // Vulkan 1.3's subgroupSizeControl (its eighth), or the structure of its own (its first).
    let subgroup_size_control = feature(53, 7)
        || feature(
            vk::StructureType::PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES.as_raw(),
            0,
        );
    let mesh_shaders = feature(1_000_328_000, 1);
    // An extension with its first feature (rayTracingPipeline, shaderObject).
    let enabled_with = |name: &CStr, stype: vk::StructureType| {
        state
            .extensions
            .iter()
            .any(|e| e.as_slice() == name.to_bytes())
            && feature(stype.as_raw(), 0)
    };
    let ray_tracing = enabled_with(
        ash::khr::ray_tracing_pipeline::NAME,
        vk::StructureType::PHYSICAL_DEVICE_RAY_TRACING_PIPELINE_FEATURES_KHR,
    );
    let shader_objects = enabled_with(
        ash::ext::shader_object::NAME,
        vk::StructureType::PHYSICAL_DEVICE_SHADER_OBJECT_FEATURES_EXT,
    );
    let enabled = Enabled {
        subgroup_size_control,
        mesh_shaders,
        ray_tracing,
        shader_objects,
    };
    Ok((device, enabled))
}

/// A features struct with its chain pointer cleared, ready to be chained again.
pub(super) fn strip<T: vk::TaggedStructure>(mut s: T) -> T {
    // SAFETY: every Vulkan struct starts with sType and pNext, as BaseOutStructure.
    unsafe { (*(&mut s as *mut T as *mut vk::BaseOutStructure)).p_next = std::ptr::null_mut() };
    s
}
