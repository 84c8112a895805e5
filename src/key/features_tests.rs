//! The generator of `features_table.rs` from the Vulkan registry (vk.xml, through the
//! `vulkan-registry` crate), and the checks of the table against the registry, against ash's
//! structures where ash has them, and against the C layout on 32- and 64-bit targets.

use super::*;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use vulkan_registry::{
    EnumsContent, ExtensionContent, ExtensionsContent, FeatureContent, MemberContent, Registry,
    RegistryContent, Require, RequireContent, TypeContent, TypesContent,
};

/// Where an `api` attribute is absent or names `vulkan` (not Vulkan SC alone).
fn for_vulkan(api: Option<&str>) -> bool {
    api.is_none_or(|a| a.split(',').any(|a| a == "vulkan"))
}

/// A feature structure as the registry defines it.
#[derive(Debug)]
struct Defined {
    name: String,
    s_type: i32,
    /// Its members after `sType` and `pNext`, every one a `VkBool32`.
    members: Vec<String>,
}

/// The `require` blocks of a core version or an extension that the `vulkan` API takes.
fn vulkan_requires<'a>(requires: impl Iterator<Item = &'a Require>) -> Vec<&'a Require> {
    requires.filter(|r| for_vulkan(r.api.as_deref())).collect()
}

/// Names `value`; a name given twice must be given one value.
fn define(values: &mut HashMap<String, i64>, name: &str, value: i64) {
    let before = values.insert(name.to_owned(), value);
    assert!(
        before.is_none_or(|b| b == value),
        "{name}: {before:?} and {value}"
    );
}

/// The enums `requires` add to `VkStructureType`: by value, or as aliases to resolve once every
/// value is known. `extension` numbers an extension's own offsets (a core version names theirs
/// with `extnumber`).
fn added_structure_types(
    requires: &[&Require],
    extension: Option<i64>,
    values: &mut HashMap<String, i64>,
    aliases: &mut Vec<(String, String)>,
) {
    for content in requires.iter().flat_map(|r| &r.contents) {
        let RequireContent::Enum(e) = content else {
            continue;
        };
        if e.extends.as_deref() != Some("VkStructureType") || !for_vulkan(e.api.as_deref()) {
            continue;
        }
        let name = e.name.as_deref().expect("a named enum");
        if let Some(offset) = &e.offset {
            let number = e
                .extnumber
                .as_ref()
                .map(|n| n.parse::<i64>().unwrap())
                .or(extension)
                .unwrap_or_else(|| panic!("{name}: an offset of no extension"));
            let value = 1_000_000_000 + (number - 1) * 1000 + offset.parse::<i64>().unwrap();
            let value = if e.dir.as_deref() == Some("-") {
                -value
            } else {
                value
            };
            define(values, name, value);
        } else if let Some(value) = &e.value {
            define(values, name, value.parse().unwrap());
        } else if let Some(alias) = &e.alias {
            aliases.push((name.to_owned(), alias.clone()));
        }
    }
}

/// Every `VkStructureType` value by name: the core ones of `<enums name="VkStructureType">`, the
/// ones the core versions and extensions add (`1000000000 + (extnumber - 1) * 1000 + offset`,
/// negative where `dir="-"`), and aliases of either.
fn structure_types(registry: &Registry) -> HashMap<String, i64> {
    let mut values: HashMap<String, i64> = HashMap::new();
    let mut aliases: Vec<(String, String)> = Vec::new();
    for content in &registry.contents {
        match content {
            RegistryContent::Enums(enums) if enums.name.as_deref() == Some("VkStructureType") => {
                for content in &enums.contents {
                    let EnumsContent::Enum(e) = content else {
                        continue;
                    };
                    if !for_vulkan(e.api.as_deref()) {
                        continue;
                    }
                    let name = e.name.as_deref().expect("a named enum");
                    match (&e.value, &e.alias) {
                        (Some(value), _) => define(&mut values, name, value.parse().unwrap()),
                        (None, Some(alias)) => aliases.push((name.to_owned(), alias.clone())),
                        (None, None) => panic!("{name}: neither a value nor an alias"),
                    }
                }
            }
            RegistryContent::Feature(feature) => {
                let requires = vulkan_requires(feature.contents.iter().filter_map(|c| match c {
                    FeatureContent::Require(r) => Some(r),
                    _ => None,
                }));
                added_structure_types(&requires, None, &mut values, &mut aliases);
            }
            RegistryContent::Extensions(extensions) => {
                for ExtensionsContent::Extension(extension) in &extensions.contents {
                    let number = extension.number.as_ref().map(|n| n.parse().unwrap());
                    let requires =
                        vulkan_requires(extension.contents.iter().filter_map(|c| match c {
                            ExtensionContent::Require(r) => Some(r),
                            _ => None,
                        }));
                    added_structure_types(&requires, number, &mut values, &mut aliases);
                }
            }
            _ => {}
        }
    }
    // Aliases of aliases: resolved until none is left.
    while !aliases.is_empty() {
        let before = aliases.len();
        aliases.retain(|(name, alias)| match values.get(alias) {
            Some(&value) => {
                values.insert(name.clone(), value);
                false
            }
            None => true,
        });
        assert!(aliases.len() < before, "aliases of nothing: {aliases:?}");
    }
    values
}

/// The types the `vulkan` API defines: those a core version of it or one of its extensions
/// requires, provisional extensions' left out (the module says why).
fn vulkan_types(registry: &Registry) -> HashSet<String> {
    let mut types = HashSet::new();
    let mut take = |requires: Vec<&Require>| {
        for require in requires {
            for content in &require.contents {
                if let RequireContent::Type(t) = content {
                    types.insert(t.name.clone().expect("a named type"));
                }
            }
        }
    };
    for content in &registry.contents {
        match content {
            RegistryContent::Feature(feature) if for_vulkan(feature.api.as_deref()) => {
                take(vulkan_requires(feature.contents.iter().filter_map(
                    |c| match c {
                        FeatureContent::Require(r) => Some(r),
                        _ => None,
                    },
                )));
            }
            RegistryContent::Extensions(extensions) => {
                for ExtensionsContent::Extension(extension) in &extensions.contents {
                    let supported = extension
                        .supported
                        .as_deref()
                        .is_some_and(|s| s.split(',').any(|s| s == "vulkan"));
                    let provisional = extension.provisional.as_deref() == Some("true")
                        || extension.platform.as_deref() == Some("provisional");
                    if supported && !provisional {
                        take(vulkan_requires(extension.contents.iter().filter_map(
                            |c| match c {
                                ExtensionContent::Require(r) => Some(r),
                                _ => None,
                            },
                        )));
                    }
                }
            }
            _ => {}
        }
    }
    types
}

/// A member's type and name where it is a plain one (no array, pointer or bit field); `pNext`,
/// `void*`, is the one plain pointer taken.
fn plain_member(contents: &[MemberContent]) -> Option<(String, String)> {
    let (mut ty, mut name) = (None, None);
    for content in contents {
        match content {
            MemberContent::Type(t) => ty = Some(t.clone()),
            MemberContent::Name(n) => name = Some(n.clone()),
            MemberContent::Comment(_) => {}
            MemberContent::Text(text) if text.trim().is_empty() => {}
            MemberContent::Text(text) if text.trim() == "*" && name.is_none() => {
                ty = ty.map(|t| t + "*");
            }
            _ => return None,
        }
    }
    Some((ty?, name?))
}

/// Every all-`VkBool32` feature structure of the `vulkan` API, in the registry's order.
fn generated_from(registry: &Registry) -> Vec<Defined> {
    let values = structure_types(registry);
    let vulkan = vulkan_types(registry);
    let mut candidates = Vec::new();
    for content in &registry.contents {
        let RegistryContent::Types(types) = content else {
            continue;
        };
        for content in &types.contents {
            let TypesContent::Type(t) = content else {
                continue;
            };
            let Some(name) = t.name.as_deref() else {
                continue;
            };
            let extends: Vec<&str> = t
                .structextends
                .as_deref()
                .map_or(Vec::new(), |e| e.split(',').collect());
            if t.category.as_deref() != Some("struct")
                || t.alias.is_some()
                || !for_vulkan(t.api.as_deref())
                || !(name.starts_with("VkPhysicalDevice") && name.contains("Features"))
                || extends.is_empty()
                || !vulkan.contains(name)
            {
                continue;
            }
            let members: Vec<_> = t
                .contents
                .iter()
                .filter_map(|c| match c {
                    TypeContent::Member(m) if for_vulkan(m.api.as_deref()) => Some(m),
                    _ => None,
                })
                .collect();
            let [s_type, next, rest @ ..] = members.as_slice() else {
                continue;
            };
            let head = plain_member(&s_type.contents)
                == Some(("VkStructureType".into(), "sType".into()))
                && plain_member(&next.contents) == Some(("void*".into(), "pNext".into()));
            let bools: Option<Vec<String>> = rest
                .iter()
                .map(|m| match plain_member(&m.contents)? {
                    (ty, name) if ty == "VkBool32" => Some(name),
                    _ => None,
                })
                .collect();
            let (true, Some(bools), Some(value)) = (head, bools, s_type.values.as_deref()) else {
                continue;
            };
            if bools.is_empty() {
                continue;
            }
            let s_type = *values
                .get(value)
                .unwrap_or_else(|| panic!("{name}: its sType {value} has no value"));
            let defined = Defined {
                name: name.to_owned(),
                s_type: i32::try_from(s_type).expect("an sType in range"),
                members: bools,
            };
            candidates.push((defined, extends));
        }
    }
    // What extends VkPhysicalDeviceFeatures2 or VkDeviceCreateInfo, or a structure that does
    // (VkPhysicalDeviceClusterCullingShaderVrsFeaturesHUAWEI extends the cluster culling
    // features, and stands in the device's chain beside them): until nothing more is reached.
    let mut reached: HashSet<String> = [
        "VkPhysicalDeviceFeatures2".into(),
        "VkDeviceCreateInfo".into(),
    ]
    .into();
    loop {
        let before = reached.len();
        for (defined, extends) in &candidates {
            if extends.iter().any(|e| reached.contains(*e)) {
                reached.insert(defined.name.clone());
            }
        }
        if reached.len() == before {
            break;
        }
    }
    candidates
        .into_iter()
        .filter(|(defined, _)| reached.contains(&defined.name))
        .map(|(defined, _)| defined)
        .collect()
}

/// The version of `crate` in the crate's lock file.
fn locked_version(krate: &str) -> String {
    let lock = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"))
        .expect("Cargo.lock");
    let head = format!("name = \"{krate}\"\nversion = \"");
    let at = lock
        .find(&head)
        .unwrap_or_else(|| panic!("{krate} in Cargo.lock"));
    let rest = &lock[at + head.len()..];
    rest[..rest.find('"').expect("a quoted version")].to_owned()
}

/// The registry's feature structures, parsed once for every test here.
fn defined() -> &'static [Defined] {
    static DEFINED: std::sync::OnceLock<Vec<Defined>> = std::sync::OnceLock::new();
    DEFINED.get_or_init(|| generated_from(&Registry::vk()))
}

#[test]
fn the_table_is_every_bool_feature_structure_of_the_registry_the_crate_builds_with() {
    let table = defined();
    let body: String = table
        .iter()
        .map(|d| {
            format!(
                "    row({}, {}, \"{}\"),\n",
                d.s_type,
                d.members.len(),
                d.name
            )
        })
        .collect();
    let generated = format!(
        "// Generated from vk.xml of vulkan-registry {} by the test\n\
         // `the_table_is_every_bool_feature_structure_of_the_registry_the_crate_builds_with`\n\
         // (src/key/features_tests.rs): PIPEKEEP_REGENERATE_FEATURES=1 cargo test --lib features\n\
         // writes it again. Not by hand.\n\
         \n\
         /// Every feature structure the layer reads by content: `row(sType, VkBool32s, name)`.\n\
         pub const KNOWN_FEATURES: &[FeatureStruct] = &[\n{body}];\n",
        locked_version("vulkan-registry")
    );
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/key/features_table.rs");
    let before = std::fs::read_to_string(&committed).unwrap();
    if std::env::var_os("PIPEKEEP_REGENERATE_FEATURES").is_some() && before != generated {
        std::fs::write(&committed, &generated).unwrap();
        // This build holds the table as it was: the next one checks what was written.
        panic!("features_table.rs written again: run the tests once more to check it");
    }
    assert_eq!(
        before, generated,
        "the table is not the registry's: PIPEKEEP_REGENERATE_FEATURES=1 cargo test --lib features"
    );
    assert_eq!(table.len(), KNOWN_FEATURES.len());
    for (row, d) in KNOWN_FEATURES.iter().zip(table) {
        assert_eq!(
            (row.s_type, row.bools, row.name),
            (d.s_type, d.members.len(), &*d.name)
        );
    }
}

#[test]
fn vulkan_1_4_and_its_maintenance5_are_the_registrys() {
    let v14 = defined()
        .iter()
        .find(|d| d.name == "VkPhysicalDeviceVulkan14Features")
        .unwrap();
    assert_eq!(VULKAN_1_4.s_type, v14.s_type);
    assert_eq!(VULKAN_1_4.name, v14.name);
    assert_eq!(VULKAN_1_4.bools, 21);
    assert_eq!(v14.members[VULKAN_1_4_MAINTENANCE5], "maintenance5");
    // Maintenance5's own structure, promoted to 1.4 under the KHR sType.
    assert_eq!(
        known(vk::StructureType::PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR.as_raw())
            .unwrap()
            .name,
        "VkPhysicalDeviceMaintenance5Features"
    );
}

#[test]
fn what_applications_built_with_newer_headers_chain_on_radv_and_nvidia_is_read() {
    // Fossilize's replayer (Vulkan 1.4.303 headers): on RADV 25.0.7 the first four, on NVIDIA
    // 580 the last three too.
    let chained = [
        (1_000_562_000, 1, "VkPhysicalDeviceMaintenance7FeaturesKHR"),
        (
            1_000_564_000,
            1,
            "VkPhysicalDeviceShaderReplicatedCompositesFeaturesEXT",
        ),
        (
            1_000_572_000,
            2,
            "VkPhysicalDeviceDeviceGeneratedCommandsFeaturesEXT",
        ),
        (
            1_000_582_000,
            1,
            "VkPhysicalDeviceDepthClampControlFeaturesEXT",
        ),
        (
            1_000_141_000,
            3,
            "VkPhysicalDeviceShaderBfloat16FeaturesKHR",
        ),
        (
            1_000_491_000,
            2,
            "VkPhysicalDeviceCooperativeVectorFeaturesNV",
        ),
        (
            1_000_593_000,
            7,
            "VkPhysicalDeviceCooperativeMatrix2FeaturesNV",
        ),
    ];
    for (s_type, bools, name) in chained {
        let row = known(s_type).unwrap_or_else(|| panic!("{name} ({s_type}) is not in the table"));
        assert_eq!((row.bools, row.name), (bools, name));
        let d = defined().iter().find(|d| d.s_type == s_type).unwrap();
        assert_eq!(d.members.len(), bools, "{name}: {:?}", d.members);
    }
}

#[test]
fn the_table_holds_every_bool_feature_structure_and_counts_to_the_last_member() {
    // ash 0.38 (Vulkan 1.3.281) defined 188 such structures, and 1.4's was declared beside them.
    assert!(KNOWN_FEATURES.len() >= 189, "{}", KNOWN_FEATURES.len());
    let count = |t: vk::StructureType| known(t.as_raw()).unwrap().bools;
    assert_eq!(
        count(vk::StructureType::PHYSICAL_DEVICE_ROBUSTNESS_2_FEATURES_EXT),
        3
    );
    assert_eq!(
        count(vk::StructureType::PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR),
        1
    );
    assert_eq!(
        count(vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_3_FEATURES),
        15
    );
    // Ray tracing's structures, as DXVK and vkd3d-proton chain them.
    assert!(
        known(vk::StructureType::PHYSICAL_DEVICE_ACCELERATION_STRUCTURE_FEATURES_KHR.as_raw())
            .is_some()
    );
    assert!(
        known(vk::StructureType::PHYSICAL_DEVICE_RAY_TRACING_PIPELINE_FEATURES_KHR.as_raw())
            .is_some()
    );
    // Not all VkBool32s: the core features' wrapper.
    assert!(known(vk::StructureType::PHYSICAL_DEVICE_FEATURES_2.as_raw()).is_none());
    // The pipeline-binary features, which ash predates.
    assert_eq!(known(1_000_483_000).unwrap().bools, 1);
    assert_eq!(CORE_FEATURES, 55);
    let mut types: Vec<i32> = KNOWN_FEATURES.iter().map(|f| f.s_type).collect();
    types.sort_unstable();
    types.dedup();
    assert_eq!(types.len(), KNOWN_FEATURES.len(), "one row a structure");
}

#[test]
fn provisional_structures_are_left_to_their_stype() {
    for s_type in [
        vk::StructureType::PHYSICAL_DEVICE_SHADER_ENQUEUE_FEATURES_AMDX,
        vk::StructureType::PHYSICAL_DEVICE_PORTABILITY_SUBSET_FEATURES_KHR,
        vk::StructureType::PHYSICAL_DEVICE_DISPLACEMENT_MICROMAP_FEATURES_NV,
        vk::StructureType::PHYSICAL_DEVICE_CUDA_KERNEL_LAUNCH_FEATURES_NV,
    ] {
        assert!(known(s_type.as_raw()).is_none(), "{s_type:?}");
    }
}

/// Every all-`VkBool32` feature structure ash 0.38 defines, with its last member (the table ash's
/// source generated before the registry did, provisional structures left out): each must be in
/// the table with ash's count and ash's size.
macro_rules! check_against_ash {
    ($($ty:ident: $last:ident,)*) => {{
        let mut checked = 0;
        $(
            let s_type = <vk::$ty<'static> as vk::TaggedStructure>::STRUCTURE_TYPE;
            let row = known(s_type.as_raw())
                .unwrap_or_else(|| panic!("{} is not in the table", stringify!($ty)));
            let bools = (std::mem::offset_of!(vk::$ty<'static>, $last) + 4 - HEAD) / 4;
            assert_eq!(row.bools, bools, "{}", stringify!($ty));
            assert_eq!(row.size(), size_of::<vk::$ty<'static>>(), "{}", stringify!($ty));
            checked += 1;
        )*
        checked
    }};
}

#[test]
fn every_structure_ash_has_is_in_the_table_with_ashs_count_and_size() {
    let checked = check_against_ash! {
        PhysicalDeviceDeviceGeneratedCommandsFeaturesNV: device_generated_commands,
        PhysicalDeviceDeviceGeneratedCommandsComputeFeaturesNV: device_generated_compute_capture_replay,
        PhysicalDevicePrivateDataFeatures: private_data,
        PhysicalDeviceVariablePointersFeatures: variable_pointers,
        PhysicalDeviceMultiviewFeatures: multiview_tessellation_shader,
        PhysicalDevicePresentIdFeaturesKHR: present_id,
        PhysicalDevicePresentWaitFeaturesKHR: present_wait,
        PhysicalDevice16BitStorageFeatures: storage_input_output16,
        PhysicalDeviceShaderSubgroupExtendedTypesFeatures: shader_subgroup_extended_types,
        PhysicalDeviceSamplerYcbcrConversionFeatures: sampler_ycbcr_conversion,
        PhysicalDeviceProtectedMemoryFeatures: protected_memory,
        PhysicalDeviceBlendOperationAdvancedFeaturesEXT: advanced_blend_coherent_operations,
        PhysicalDeviceMultiDrawFeaturesEXT: multi_draw,
        PhysicalDeviceInlineUniformBlockFeatures: descriptor_binding_inline_uniform_block_update_after_bind,
        PhysicalDeviceMaintenance4Features: maintenance4,
        PhysicalDeviceMaintenance5FeaturesKHR: maintenance5,
        PhysicalDeviceMaintenance6FeaturesKHR: maintenance6,
        PhysicalDeviceShaderDrawParametersFeatures: shader_draw_parameters,
        PhysicalDeviceShaderFloat16Int8Features: shader_int8,
        PhysicalDeviceHostQueryResetFeatures: host_query_reset,
        PhysicalDeviceGlobalPriorityQueryFeaturesKHR: global_priority_query,
        PhysicalDeviceDeviceMemoryReportFeaturesEXT: device_memory_report,
        PhysicalDeviceDescriptorIndexingFeatures: runtime_descriptor_array,
        PhysicalDeviceTimelineSemaphoreFeatures: timeline_semaphore,
        PhysicalDevice8BitStorageFeatures: storage_push_constant8,
        PhysicalDeviceConditionalRenderingFeaturesEXT: inherited_conditional_rendering,
        PhysicalDeviceVulkanMemoryModelFeatures: vulkan_memory_model_availability_visibility_chains,
        PhysicalDeviceShaderAtomicInt64Features: shader_shared_int64_atomics,
        PhysicalDeviceShaderAtomicFloatFeaturesEXT: sparse_image_float32_atomic_add,
        PhysicalDeviceShaderAtomicFloat2FeaturesEXT: sparse_image_float32_atomic_min_max,
        PhysicalDeviceVertexAttributeDivisorFeaturesKHR: vertex_attribute_instance_rate_zero_divisor,
        PhysicalDeviceASTCDecodeFeaturesEXT: decode_mode_shared_exponent,
        PhysicalDeviceTransformFeedbackFeaturesEXT: geometry_streams,
        PhysicalDeviceRepresentativeFragmentTestFeaturesNV: representative_fragment_test,
        PhysicalDeviceExclusiveScissorFeaturesNV: exclusive_scissor,
        PhysicalDeviceCornerSampledImageFeaturesNV: corner_sampled_image,
        PhysicalDeviceComputeShaderDerivativesFeaturesNV: compute_derivative_group_linear,
        PhysicalDeviceShaderImageFootprintFeaturesNV: image_footprint,
        PhysicalDeviceDedicatedAllocationImageAliasingFeaturesNV: dedicated_allocation_image_aliasing,
        PhysicalDeviceCopyMemoryIndirectFeaturesNV: indirect_copy,
        PhysicalDeviceMemoryDecompressionFeaturesNV: memory_decompression,
        PhysicalDeviceShadingRateImageFeaturesNV: shading_rate_coarse_sample_order,
        PhysicalDeviceInvocationMaskFeaturesHUAWEI: invocation_mask,
        PhysicalDeviceMeshShaderFeaturesNV: mesh_shader,
        PhysicalDeviceMeshShaderFeaturesEXT: mesh_shader_queries,
        PhysicalDeviceAccelerationStructureFeaturesKHR: descriptor_binding_acceleration_structure_update_after_bind,
        PhysicalDeviceRayTracingPipelineFeaturesKHR: ray_traversal_primitive_culling,
        PhysicalDeviceRayQueryFeaturesKHR: ray_query,
        PhysicalDeviceRayTracingMaintenance1FeaturesKHR: ray_tracing_pipeline_trace_rays_indirect2,
        PhysicalDeviceFragmentDensityMapFeaturesEXT: fragment_density_map_non_subsampled_images,
        PhysicalDeviceFragmentDensityMap2FeaturesEXT: fragment_density_map_deferred,
        PhysicalDeviceFragmentDensityMapOffsetFeaturesQCOM: fragment_density_map_offset,
        PhysicalDeviceScalarBlockLayoutFeatures: scalar_block_layout,
        PhysicalDeviceUniformBufferStandardLayoutFeatures: uniform_buffer_standard_layout,
        PhysicalDeviceDepthClipEnableFeaturesEXT: depth_clip_enable,
        PhysicalDeviceMemoryPriorityFeaturesEXT: memory_priority,
        PhysicalDevicePageableDeviceLocalMemoryFeaturesEXT: pageable_device_local_memory,
        PhysicalDeviceBufferDeviceAddressFeatures: buffer_device_address_multi_device,
        PhysicalDeviceBufferDeviceAddressFeaturesEXT: buffer_device_address_multi_device,
        PhysicalDeviceImagelessFramebufferFeatures: imageless_framebuffer,
        PhysicalDeviceTextureCompressionASTCHDRFeatures: texture_compression_astc_hdr,
        PhysicalDeviceCooperativeMatrixFeaturesNV: cooperative_matrix_robust_buffer_access,
        PhysicalDeviceYcbcrImageArraysFeaturesEXT: ycbcr_image_arrays,
        PhysicalDevicePresentBarrierFeaturesNV: present_barrier,
        PhysicalDevicePerformanceQueryFeaturesKHR: performance_counter_multiple_query_pools,
        PhysicalDeviceCoverageReductionModeFeaturesNV: coverage_reduction_mode,
        PhysicalDeviceShaderIntegerFunctions2FeaturesINTEL: shader_integer_functions2,
        PhysicalDeviceShaderClockFeaturesKHR: shader_device_clock,
        PhysicalDeviceIndexTypeUint8FeaturesKHR: index_type_uint8,
        PhysicalDeviceShaderSMBuiltinsFeaturesNV: shader_sm_builtins,
        PhysicalDeviceFragmentShaderInterlockFeaturesEXT: fragment_shader_shading_rate_interlock,
        PhysicalDeviceSeparateDepthStencilLayoutsFeatures: separate_depth_stencil_layouts,
        PhysicalDevicePrimitiveTopologyListRestartFeaturesEXT: primitive_topology_patch_list_restart,
        PhysicalDevicePipelineExecutablePropertiesFeaturesKHR: pipeline_executable_info,
        PhysicalDeviceShaderDemoteToHelperInvocationFeatures: shader_demote_to_helper_invocation,
        PhysicalDeviceTexelBufferAlignmentFeaturesEXT: texel_buffer_alignment,
        PhysicalDeviceSubgroupSizeControlFeatures: compute_full_subgroups,
        PhysicalDeviceLineRasterizationFeaturesKHR: stippled_smooth_lines,
        PhysicalDevicePipelineCreationCacheControlFeatures: pipeline_creation_cache_control,
        PhysicalDeviceVulkan11Features: shader_draw_parameters,
        PhysicalDeviceVulkan12Features: subgroup_broadcast_dynamic_id,
        PhysicalDeviceVulkan13Features: maintenance4,
        PhysicalDeviceCoherentMemoryFeaturesAMD: device_coherent_memory,
        PhysicalDeviceCustomBorderColorFeaturesEXT: custom_border_color_without_format,
        PhysicalDeviceBorderColorSwizzleFeaturesEXT: border_color_swizzle_from_image,
        PhysicalDeviceExtendedDynamicStateFeaturesEXT: extended_dynamic_state,
        PhysicalDeviceExtendedDynamicState2FeaturesEXT: extended_dynamic_state2_patch_control_points,
        PhysicalDeviceExtendedDynamicState3FeaturesEXT: extended_dynamic_state3_shading_rate_image_enable,
        PhysicalDeviceDiagnosticsConfigFeaturesNV: diagnostics_config,
        PhysicalDeviceZeroInitializeWorkgroupMemoryFeatures: shader_zero_initialize_workgroup_memory,
        PhysicalDeviceShaderSubgroupUniformControlFlowFeaturesKHR: shader_subgroup_uniform_control_flow,
        PhysicalDeviceRobustness2FeaturesEXT: null_descriptor,
        PhysicalDeviceImageRobustnessFeatures: robust_image_access,
        PhysicalDeviceWorkgroupMemoryExplicitLayoutFeaturesKHR: workgroup_memory_explicit_layout16_bit_access,
        PhysicalDevice4444FormatsFeaturesEXT: format_a4b4g4r4,
        PhysicalDeviceSubpassShadingFeaturesHUAWEI: subpass_shading,
        PhysicalDeviceClusterCullingShaderFeaturesHUAWEI: multiview_cluster_culling_shader,
        PhysicalDeviceClusterCullingShaderVrsFeaturesHUAWEI: cluster_shading_rate,
        PhysicalDeviceShaderImageAtomicInt64FeaturesEXT: sparse_image_int64_atomics,
        PhysicalDeviceFragmentShadingRateFeaturesKHR: attachment_fragment_shading_rate,
        PhysicalDeviceShaderTerminateInvocationFeatures: shader_terminate_invocation,
        PhysicalDeviceFragmentShadingRateEnumsFeaturesNV: no_invocation_fragment_shading_rates,
        PhysicalDeviceImage2DViewOf3DFeaturesEXT: sampler2_d_view_of3_d,
        PhysicalDeviceImageSlicedViewOf3DFeaturesEXT: image_sliced_view_of3_d,
        PhysicalDeviceAttachmentFeedbackLoopDynamicStateFeaturesEXT: attachment_feedback_loop_dynamic_state,
        PhysicalDeviceMutableDescriptorTypeFeaturesEXT: mutable_descriptor_type,
        PhysicalDeviceDepthClipControlFeaturesEXT: depth_clip_control,
        PhysicalDeviceVertexInputDynamicStateFeaturesEXT: vertex_input_dynamic_state,
        PhysicalDeviceExternalMemoryRDMAFeaturesNV: external_memory_rdma,
        PhysicalDeviceColorWriteEnableFeaturesEXT: color_write_enable,
        PhysicalDeviceSynchronization2Features: synchronization2,
        PhysicalDeviceHostImageCopyFeaturesEXT: host_image_copy,
        PhysicalDevicePrimitivesGeneratedQueryFeaturesEXT: primitives_generated_query_with_non_zero_streams,
        PhysicalDeviceLegacyDitheringFeaturesEXT: legacy_dithering,
        PhysicalDeviceMultisampledRenderToSingleSampledFeaturesEXT: multisampled_render_to_single_sampled,
        PhysicalDevicePipelineProtectedAccessFeaturesEXT: pipeline_protected_access,
        PhysicalDeviceVideoMaintenance1FeaturesKHR: video_maintenance1,
        PhysicalDeviceInheritedViewportScissorFeaturesNV: inherited_viewport_scissor2_d,
        PhysicalDeviceYcbcr2Plane444FormatsFeaturesEXT: ycbcr2plane444_formats,
        PhysicalDeviceProvokingVertexFeaturesEXT: transform_feedback_preserves_provoking_vertex,
        PhysicalDeviceDescriptorBufferFeaturesEXT: descriptor_buffer_push_descriptors,
        PhysicalDeviceShaderIntegerDotProductFeatures: shader_integer_dot_product,
        PhysicalDeviceFragmentShaderBarycentricFeaturesKHR: fragment_shader_barycentric,
        PhysicalDeviceRayTracingMotionBlurFeaturesNV: ray_tracing_motion_blur_pipeline_trace_rays_indirect,
        PhysicalDeviceRayTracingValidationFeaturesNV: ray_tracing_validation,
        PhysicalDeviceRGBA10X6FormatsFeaturesEXT: format_rgba10x6_without_y_cb_cr_sampler,
        PhysicalDeviceDynamicRenderingFeatures: dynamic_rendering,
        PhysicalDeviceImageViewMinLodFeaturesEXT: min_lod,
        PhysicalDeviceRasterizationOrderAttachmentAccessFeaturesEXT: rasterization_order_stencil_attachment_access,
        PhysicalDeviceLinearColorAttachmentFeaturesNV: linear_color_attachment,
        PhysicalDeviceGraphicsPipelineLibraryFeaturesEXT: graphics_pipeline_library,
        PhysicalDeviceDescriptorSetHostMappingFeaturesVALVE: descriptor_set_host_mapping,
        PhysicalDeviceNestedCommandBufferFeaturesEXT: nested_command_buffer_simultaneous_use,
        PhysicalDeviceShaderModuleIdentifierFeaturesEXT: shader_module_identifier,
        PhysicalDeviceImageCompressionControlFeaturesEXT: image_compression_control,
        PhysicalDeviceImageCompressionControlSwapchainFeaturesEXT: image_compression_control_swapchain,
        PhysicalDeviceSubpassMergeFeedbackFeaturesEXT: subpass_merge_feedback,
        PhysicalDeviceOpacityMicromapFeaturesEXT: micromap_host_commands,
        PhysicalDevicePipelinePropertiesFeaturesEXT: pipeline_properties_identifier,
        PhysicalDeviceShaderEarlyAndLateFragmentTestsFeaturesAMD: shader_early_and_late_fragment_tests,
        PhysicalDeviceNonSeamlessCubeMapFeaturesEXT: non_seamless_cube_map,
        PhysicalDevicePipelineRobustnessFeaturesEXT: pipeline_robustness,
        PhysicalDeviceImageProcessingFeaturesQCOM: texture_block_match,
        PhysicalDeviceTilePropertiesFeaturesQCOM: tile_properties,
        PhysicalDeviceAmigoProfilingFeaturesSEC: amigo_profiling,
        PhysicalDeviceAttachmentFeedbackLoopLayoutFeaturesEXT: attachment_feedback_loop_layout,
        PhysicalDeviceDepthClampZeroOneFeaturesEXT: depth_clamp_zero_one,
        PhysicalDeviceAddressBindingReportFeaturesEXT: report_address_binding,
        PhysicalDeviceOpticalFlowFeaturesNV: optical_flow,
        PhysicalDeviceFaultFeaturesEXT: device_fault_vendor_binary,
        PhysicalDevicePipelineLibraryGroupHandlesFeaturesEXT: pipeline_library_group_handles,
        PhysicalDeviceShaderCoreBuiltinsFeaturesARM: shader_core_builtins,
        PhysicalDeviceFrameBoundaryFeaturesEXT: frame_boundary,
        PhysicalDeviceDynamicRenderingUnusedAttachmentsFeaturesEXT: dynamic_rendering_unused_attachments,
        PhysicalDeviceSwapchainMaintenance1FeaturesEXT: swapchain_maintenance1,
        PhysicalDeviceDepthBiasControlFeaturesEXT: depth_bias_exact,
        PhysicalDeviceRayTracingInvocationReorderFeaturesNV: ray_tracing_invocation_reorder,
        PhysicalDeviceExtendedSparseAddressSpaceFeaturesNV: extended_sparse_address_space,
        PhysicalDeviceMultiviewPerViewViewportsFeaturesQCOM: multiview_per_view_viewports,
        PhysicalDeviceRayTracingPositionFetchFeaturesKHR: ray_tracing_position_fetch,
        PhysicalDeviceMultiviewPerViewRenderAreasFeaturesQCOM: multiview_per_view_render_areas,
        PhysicalDeviceShaderObjectFeaturesEXT: shader_object,
        PhysicalDeviceShaderTileImageFeaturesEXT: shader_tile_image_stencil_read_access,
        PhysicalDeviceExternalMemoryScreenBufferFeaturesQNX: screen_buffer_import,
        PhysicalDeviceCooperativeMatrixFeaturesKHR: cooperative_matrix_robust_buffer_access,
        PhysicalDeviceCubicClampFeaturesQCOM: cubic_range_clamp,
        PhysicalDeviceYcbcrDegammaFeaturesQCOM: ycbcr_degamma,
        PhysicalDeviceCubicWeightsFeaturesQCOM: selectable_cubic_weights,
        PhysicalDeviceImageProcessing2FeaturesQCOM: texture_block_match2,
        PhysicalDeviceDescriptorPoolOverallocationFeaturesNV: descriptor_pool_overallocation,
        PhysicalDevicePerStageDescriptorSetFeaturesNV: dynamic_pipeline_layout,
        PhysicalDeviceExternalFormatResolveFeaturesANDROID: external_format_resolve,
        PhysicalDeviceSchedulingControlsFeaturesARM: scheduling_controls,
        PhysicalDeviceRelaxedLineRasterizationFeaturesIMG: relaxed_line_rasterization,
        PhysicalDeviceRenderPassStripedFeaturesARM: render_pass_striped,
        PhysicalDeviceShaderMaximalReconvergenceFeaturesKHR: shader_maximal_reconvergence,
        PhysicalDeviceShaderSubgroupRotateFeaturesKHR: shader_subgroup_rotate_clustered,
        PhysicalDeviceShaderExpectAssumeFeaturesKHR: shader_expect_assume,
        PhysicalDeviceShaderFloatControls2FeaturesKHR: shader_float_controls2,
        PhysicalDeviceDynamicRenderingLocalReadFeaturesKHR: dynamic_rendering_local_read,
        PhysicalDeviceShaderQuadControlFeaturesKHR: shader_quad_control,
        PhysicalDeviceShaderAtomicFloat16VectorFeaturesNV: shader_float16_vector_atomics,
        PhysicalDeviceMapMemoryPlacedFeaturesEXT: memory_unmap_reserve,
        PhysicalDeviceRawAccessChainsFeaturesNV: shader_raw_access_chains,
    };
    assert_eq!(checked, 184);
}

/// A feature structure's C layout on a target whose pointers are `P`.
#[repr(C)]
struct Laid<P, const N: usize> {
    s_type: i32,
    p_next: P,
    bools: [u32; N],
}

/// A 64-bit pointer, 8-byte aligned on any target (a bare `u64` is 4-byte aligned on i686).
#[repr(C, align(8))]
struct Pointer64(#[allow(dead_code)] u64);

macro_rules! check_layouts {
    ($($n:literal)*) => {$(
        assert_eq!(laid_out(8, 4, $n), size_of::<Laid<u32, $n>>(), "32-bit, {}", $n);
        assert_eq!(laid_out(16, 8, $n), size_of::<Laid<Pointer64, $n>>(), "64-bit, {}", $n);
        assert_eq!(
            row(0, $n, "").size(),
            size_of::<Laid<*const std::ffi::c_void, $n>>(),
            "this target, {}",
            $n
        );
    )*};
}

#[test]
fn a_structures_size_follows_from_its_count_on_32_and_64_bit_targets() {
    check_layouts!(1 2 3 4 5 7 15 21 47 55);
    assert_eq!(HEAD, size_of::<Laid<*const std::ffi::c_void, 0>>());
    assert_eq!(
        POINTER_ALIGN,
        std::mem::align_of::<Laid<*const std::ffi::c_void, 1>>()
    );
}
