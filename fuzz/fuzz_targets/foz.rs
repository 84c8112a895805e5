//! The Fossilize container reader and the payload parser on any bytes: never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::replay::{foz, objects::Catalog};

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = foz::read_entries(data) {
        let _ = Catalog::from_entries(entries);
    }
});
