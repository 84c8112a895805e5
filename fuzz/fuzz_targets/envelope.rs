//! The envelope decoder on any bytes: never a panic, and only a whole entry decodes: its bytes are
//! exactly what encoding its payload (or the parts it lists) gives, in any format still read, or
//! (format 3, whose packed parts another compressor may have written otherwise) an entry of the
//! same envelope and the same data hash, so the bytes decoded are the very bytes that hash
//! covers. What an entry lists (read for a stale marker's entry and by the tools, with no identity
//! or key) never panics either, however short the file.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::key::PipelineKey;
use pipekeep::store::recipe::Part;
use pipekeep::store::{envelope, Identity};

fuzz_target!(|data: &[u8]| {
    let id = Identity { vendor_id: 0x1002, device_id: 0x73bf, driver_version: 7, cache_uuid: [1; 16], abi: 8 };
    let key = PipelineKey { spirv: [2; 16], state: [3; 16] };
    let listed = envelope::listed_parts(data);
    let _ = envelope::declared_file_len(data);
    let _ = envelope::abi_of(data);
    if let Ok(decoded) = envelope::decode(data, &id, &key) {
        assert!(listed.is_some(), "a decoded entry lists its parts");
        let kind = decoded.kind;
        let again = match decoded.body() {
            envelope::Body::Whole(bytes) => vec![
                envelope::encode_payload(&id, &key, kind, bytes),
                envelope::encode_format_one(&id, &key, kind, bytes),
                envelope::encode_format_two(&id, &key, kind, &[Part::Inline(bytes)]),
                envelope::encode_parts_as_is(&id, &key, kind, &[Part::Inline(bytes)]),
            ],
            envelope::Body::Parts { parts, .. } => vec![
                envelope::encode_parts(&id, &key, kind, &parts),
                envelope::encode_format_two(&id, &key, kind, &parts),
                envelope::encode_parts_as_is(&id, &key, kind, &parts),
            ],
        };
        assert!(
            again.iter().any(|a| a == data)
                || again.iter().any(|a| a[..80] == data[..80] && a[88..120] == data[88..120]),
            "decoded bytes other than those the data hash covers"
        );
    }
});
