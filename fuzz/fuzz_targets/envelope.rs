//! The envelope decoder on any bytes: never a panic, and only a whole entry decodes (its bytes
//! are exactly what encoding its payload, or the parts it lists, gives). What an entry lists
//! (read for a stale marker's entry and by the tools, with no identity or key) never panics
//! either, however short the file.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::key::PipelineKey;
use pipekeep::store::{envelope, Identity};

fuzz_target!(|data: &[u8]| {
    let id = Identity { vendor_id: 0x1002, device_id: 0x73bf, driver_version: 7, cache_uuid: [1; 16], abi: 8 };
    let key = PipelineKey { spirv: [2; 16], state: [3; 16] };
    let listed = envelope::listed_parts(data);
    let _ = envelope::declared_file_len(data);
    let _ = envelope::abi_of(data);
    if let Ok(decoded) = envelope::decode(data, &id, &key) {
        assert!(listed.is_some(), "a decoded entry lists its parts");
        let again = match &decoded.body {
            envelope::Body::Whole(bytes) => [
                envelope::encode_payload(&id, &key, decoded.kind, bytes),
                envelope::encode_format_one(&id, &key, decoded.kind, bytes),
            ],
            envelope::Body::Parts { parts, .. } => {
                let parts = envelope::encode_parts(&id, &key, decoded.kind, parts);
                [parts.clone(), parts]
            }
        };
        assert!(again.iter().any(|a| a == data));
    }
});
