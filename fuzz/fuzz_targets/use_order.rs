//! The use order (`use-order` in an identity directory), on any bytes: never a panic; what it
//! reads, encoded again, is the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::store::order::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok(keys) = decode(data) {
        assert_eq!(encode(&keys), data);
    }
});
