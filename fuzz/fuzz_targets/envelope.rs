//! The envelope decoder on any bytes: never a panic, and only a whole entry decodes (its bytes
//! are exactly what encoding its payload gives).
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::key::PipelineKey;
use pipekeep::store::{envelope, Identity};

fuzz_target!(|data: &[u8]| {
    let id = Identity { vendor_id: 0x1002, device_id: 0x73bf, driver_version: 7, cache_uuid: [1; 16], abi: 8 };
    let key = PipelineKey { spirv: [2; 16], state: [3; 16] };
    if let Ok(payload) = envelope::decode_payload(data, &id, &key) {
        assert_eq!(envelope::encode_payload(&id, &key, payload.kind, payload.bytes), data);
    }
});
