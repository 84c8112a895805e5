//! The device-and-driver identity an entry belongs to, and the directory it names.
//!
//! `<vendor>-<device>-<driver>-<uuid>`: the identity directory under `<title>/host-pipelines/`.
//! The driver ABI (the process's pointer size) is part of the identity but not of the directory
//! name: it is checked in each entry's envelope and enters the state key, so a 32-bit and a
//! 64-bit build of one title keep separate entries side by side (in one directory, or in two
//! where the driver mixes the pointer size into its UUID, as RADV does: each is then another
//! identity to the other, never another driver).

/// The identity fields checked in every envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver_version: u32,
    pub cache_uuid: [u8; 16],
    /// Pointer size of the process in bytes (4 or 8).
    pub abi: u32,
}

pub use crate::key::text::{hex, hex_into, HOST_ABI};

/// NVIDIA's PCI vendor ID.
pub const NVIDIA: u32 = 0x10de;

impl Identity {
    /// A device's identity, from its properties, in this process's ABI.
    pub fn of_device(properties: &ash::vk::PhysicalDeviceProperties) -> Identity {
        Identity {
            vendor_id: properties.vendor_id,
            device_id: properties.device_id,
            driver_version: properties.driver_version,
            cache_uuid: properties.pipeline_cache_uuid,
            abi: HOST_ABI,
        }
    }

    /// The identity directory's name, exactly as the SPEC gives it.
    pub fn dir_name(&self) -> String {
        format!(
            "{:04x}-{:04x}-{:08x}-{}",
            self.vendor_id,
            self.device_id,
            self.driver_version,
            hex(&self.cache_uuid)
        )
    }
}

/// The parts of an identity directory's name; `None` for a name not of our making.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirName {
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver_version: u32,
    pub cache_uuid: [u8; 16],
}

impl DirName {
    pub fn parse(name: &str) -> Option<DirName> {
        let mut parts = name.split('-');
        let vendor = parts.next()?;
        let device = parts.next()?;
        let driver = parts.next()?;
        let uuid = parts.next()?;
        if parts.next().is_some()
            || vendor.len() < 4
            || device.len() < 4
            || driver.len() != 8
            || uuid.len() != 32
        {
            return None;
        }
        let lower_hex = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if ![vendor, device, driver, uuid].iter().all(|s| lower_hex(s)) {
            return None;
        }
        let mut cache_uuid = [0u8; 16];
        for (i, byte) in cache_uuid.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&uuid[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(DirName {
            vendor_id: u32::from_str_radix(vendor, 16).ok()?,
            device_id: u32::from_str_radix(device, 16).ok()?,
            driver_version: u32::from_str_radix(driver, 16).ok()?,
            cache_uuid,
        })
    }

    /// Same vendor and device, but another driver version or cache UUID: a driver change,
    /// unless the directory is of the other ABI. `dir_abi` is the ABI its entries' envelopes
    /// name (`None` where none was read): a directory of a 32-bit process of the title, seen
    /// from a 64-bit one or the other way round, is another identity, never another driver,
    /// even where the driver mixes the pointer size into its UUID (RADV does). Its own ABI's
    /// processes drop it at their driver change.
    pub fn is_other_driver_of(&self, id: &Identity, dir_abi: Option<u32>) -> bool {
        self.vendor_id == id.vendor_id
            && self.device_id == id.device_id
            && (self.driver_version != id.driver_version || self.cache_uuid != id.cache_uuid)
            && dir_abi.is_none_or(|abi| abi == id.abi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn radv() -> Identity {
        Identity {
            vendor_id: 0x1002,
            device_id: 0x73bf,
            driver_version: 0x6400007,
            cache_uuid: *b"0123456789abcdef",
            abi: 8,
        }
    }

    #[test]
    fn dir_name_is_vendor_device_driver_uuid_in_lower_hex() {
        assert_eq!(
            radv().dir_name(),
            "1002-73bf-06400007-30313233343536373839616263646566"
        );
        let small = Identity {
            vendor_id: 0x10,
            device_id: 0x2,
            ..radv()
        };
        assert!(small.dir_name().starts_with("0010-0002-"));
    }

    #[test]
    fn dir_name_round_trips_and_foreign_names_are_refused() {
        let id = radv();
        let parsed = DirName::parse(&id.dir_name()).unwrap();
        assert_eq!(parsed.cache_uuid, id.cache_uuid);
        assert!(!parsed.is_other_driver_of(&id, Some(8)));
        let newer = Identity {
            driver_version: 7,
            ..id
        };
        let newer = DirName::parse(&newer.dir_name()).unwrap();
        assert!(newer.is_other_driver_of(&id, None));
        assert!(newer.is_other_driver_of(&id, Some(8)));
        // The other ABI (RADV: another UUID) is another identity, never another driver.
        assert!(!newer.is_other_driver_of(&id, Some(4)));
        let other_uuid = Identity {
            cache_uuid: [3; 16],
            ..id
        };
        assert!(!DirName::parse(&other_uuid.dir_name())
            .unwrap()
            .is_other_driver_of(&id, Some(4)));
        let other_gpu = Identity {
            device_id: 1,
            driver_version: 7,
            ..id
        };
        assert!(!DirName::parse(&other_gpu.dir_name())
            .unwrap()
            .is_other_driver_of(&id, None));
        for bad in [
            "",
            "x",
            "1002-73bf-06400007",
            "1002-73BF-06400007-30313233343536373839616263646566",
            "my-stuff-here-too",
        ] {
            assert_eq!(DirName::parse(bad), None, "{bad}");
        }
    }
}
