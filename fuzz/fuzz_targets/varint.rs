//! The SPIR-V varint decoder on any bytes and word count: never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&n, rest)) = data.split_first() {
        let _ = pipekeep::replay::varint::decode(rest, n as usize);
    }
});
