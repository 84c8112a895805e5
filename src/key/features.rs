//! The feature structures the device key reads by content: every `VkPhysicalDevice*Features*`
//! structure of the Vulkan definitions the crate builds with (ash's) whose members after `sType`
//! and `pNext` are all `VkBool32`s. The table (`features_table.rs`) is generated from ash's own
//! source by a test here, which fails when the ash the crate builds with defines another set,
//! never written by hand. A structure not in it (newer than ash) enters the device key by its
//! `sType` alone; which driver state a kept pipeline fits is then the driver's keys' to say
//! (docs/FORMAT.md).

use std::mem::{offset_of, size_of};

use ash::vk;
use ash::vk::TaggedStructure;

/// One feature structure the key reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureStruct {
    pub s_type: vk::StructureType,
    /// How many `VkBool32`s follow its head, up to its last member (never its padding).
    pub bools: usize,
    /// Its size in bytes (what a caller allocates to have the driver fill it).
    pub size: usize,
}

/// `sType` and `pNext`: 16 bytes on a 64-bit target, 8 on a 32-bit one.
pub const HEAD: usize = size_of::<vk::BaseInStructure<'static>>();

/// `VkPhysicalDeviceFeatures`: 55 `VkBool32`s.
pub const CORE_FEATURES: usize = size_of::<vk::PhysicalDeviceFeatures>() / 4;

macro_rules! feature_table {
    ($($ty:ident: $last:ident,)*) => {
        /// Every feature structure the layer reads by content.
        pub const KNOWN_FEATURES: &[FeatureStruct] = &[
            $(FeatureStruct {
                s_type: <vk::$ty<'static> as TaggedStructure>::STRUCTURE_TYPE,
                bools: (offset_of!(vk::$ty<'static>, $last) + size_of::<vk::Bool32>() - HEAD) / 4,
                size: size_of::<vk::$ty<'static>>(),
            },)*
        ];
    };
}

include!("features_table.rs");

/// `VkPhysicalDeviceVulkan14Features` (sType 55), which ash 0.38 (Vulkan 1.3.281) predates:
/// declared from the Vulkan registry, 21 `VkBool32`s, `maintenance5` the sixteenth.
pub const VULKAN_1_4: FeatureStruct = FeatureStruct {
    s_type: vk::StructureType::from_raw(55),
    bools: 21,
    size: (HEAD + 21 * 4).next_multiple_of(HEAD / 2),
};

/// Where `maintenance5` stands in [`VULKAN_1_4`].
pub const VULKAN_1_4_MAINTENANCE5: usize = 15;

/// The table's row for `s_type`, if the key reads that structure.
pub fn known(s_type: vk::StructureType) -> Option<&'static FeatureStruct> {
    KNOWN_FEATURES
        .iter()
        .chain(std::iter::once(&VULKAN_1_4))
        .find(|f| f.s_type == s_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// `(structure, its last member)` of every all-`VkBool32` feature structure in ash's
    /// definitions, in their order.
    fn generated_from(definitions: &str) -> Vec<(String, String)> {
        let mut table = Vec::new();
        let mut lines = definitions.lines();
        while let Some(line) = lines.next() {
            let Some(name) = line
                .strip_prefix("pub struct ")
                .and_then(|rest| rest.strip_suffix("<'a> {"))
            else {
                continue;
            };
            if !(name.starts_with("PhysicalDevice") && name.contains("Features")) {
                continue;
            }
            let members: Vec<String> = lines
                .by_ref()
                .map(str::trim)
                .take_while(|m| *m != "}")
                .map(str::to_owned)
                .collect();
            let headed = members.iter().any(|m| m.starts_with("pub s_type:"));
            let fields: Vec<&String> = members
                .iter()
                .filter(|m| {
                    !["pub s_type:", "pub p_next:", "pub _marker:"]
                        .iter()
                        .any(|head| m.starts_with(head))
                })
                .collect();
            let all_bools = !fields.is_empty() && fields.iter().all(|m| m.ends_with(": Bool32,"));
            if let (true, true, Some(last)) = (headed, all_bools, fields.last()) {
                let last = last["pub ".len()..last.len() - ": Bool32,".len()].to_owned();
                table.push((name.to_owned(), last));
            }
        }
        table
    }

    /// The version of ash in the crate's lock file.
    fn locked_ash_version() -> String {
        let lock =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"))
                .expect("Cargo.lock");
        let at = lock
            .find("name = \"ash\"\nversion = \"")
            .expect("ash in Cargo.lock");
        let rest = &lock[at + "name = \"ash\"\nversion = \"".len()..];
        rest[..rest.find('"').expect("a quoted version")].to_owned()
    }

    /// ash's `src/vk/definitions.rs`, of the locked version, from the registry's sources.
    fn ash_definitions() -> PathBuf {
        let version = locked_ash_version();
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
            .expect("CARGO_HOME or HOME");
        let sources = home.join("registry").join("src");
        std::fs::read_dir(&sources)
            .into_iter()
            .flatten()
            .flatten()
            .map(|index| {
                index
                    .path()
                    .join(format!("ash-{version}/src/vk/definitions.rs"))
            })
            .find(|p| p.is_file())
            .unwrap_or_else(|| {
                panic!(
                    "ash {version}'s sources are not under {}",
                    sources.display()
                )
            })
    }

    #[test]
    fn the_table_is_every_bool_feature_structure_of_the_ash_the_crate_builds_with() {
        let definitions = ash_definitions();
        let source = std::fs::read_to_string(&definitions).unwrap();
        let table = generated_from(&source);
        let body: String = table
            .iter()
            .map(|(name, last)| format!("    {name}: {last},\n"))
            .collect();
        let generated = format!(
            "// Generated from ash {}'s src/vk/definitions.rs by the test\n\
             // `the_table_is_every_bool_feature_structure_of_the_ash_the_crate_builds_with` (src/key/features.rs):\n\
             // PIPEKEEP_REGENERATE_FEATURES=1 cargo test --lib features writes it again. Not by hand.\n\
             feature_table! {{\n{body}}}\n",
            locked_ash_version()
        );
        let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/key/features_table.rs");
        if std::env::var_os("PIPEKEEP_REGENERATE_FEATURES").is_some() {
            std::fs::write(&committed, &generated).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(&committed).unwrap(),
            generated,
            "the table is not ash's: PIPEKEEP_REGENERATE_FEATURES=1 cargo test --lib features"
        );
        assert_eq!(table.len(), KNOWN_FEATURES.len());
    }

    #[test]
    fn the_table_holds_every_bool_feature_structure_and_counts_to_the_last_member() {
        // ash 0.38 (Vulkan 1.3.281) defines 188 such structures.
        assert!(KNOWN_FEATURES.len() >= 188, "{}", KNOWN_FEATURES.len());
        let count = |t| known(t).unwrap().bools;
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
        // Structures the hand-written table lacked: ray tracing's, as DXVK and vkd3d-proton
        // chain them.
        assert!(
            known(vk::StructureType::PHYSICAL_DEVICE_ACCELERATION_STRUCTURE_FEATURES_KHR).is_some()
        );
        assert!(
            known(vk::StructureType::PHYSICAL_DEVICE_RAY_TRACING_PIPELINE_FEATURES_KHR).is_some()
        );
        assert!(known(vk::StructureType::PHYSICAL_DEVICE_FEATURES_2).is_none());
        assert_eq!(CORE_FEATURES, 55);
        let mut types: Vec<i32> = KNOWN_FEATURES.iter().map(|f| f.s_type.as_raw()).collect();
        types.sort_unstable();
        types.dedup();
        assert_eq!(types.len(), KNOWN_FEATURES.len(), "one row a structure");
    }
}
