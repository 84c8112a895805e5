//! Tests of `envelope.rs`.

use super::*;

pub fn identity() -> Identity {
    Identity {
        vendor_id: 0x1002,
        device_id: 0x73bf,
        driver_version: 0x0640_0007,
        cache_uuid: [
            0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad,
            0xae, 0xaf,
        ],
        abi: 8,
    }
}

pub fn key() -> PipelineKey {
    PipelineKey {
        spirv: [0x11; 16],
        state: [0x22; 16],
    }
}

/// Pipeline-cache data as a driver would give it: a header, then a payload.
pub fn cache_data(id: &Identity, payload: &[u8]) -> Vec<u8> {
    [&cache_header(id)[..], payload].concat()
}

// If these golden tests fail, the bytes on disk changed: bump FORMAT_VERSION (and
// docs/FORMAT.md) so that old entries are refused as `foreign`, never misread.
#[test]
fn golden_envelope_bytes_if_these_fail_bump_the_format() {
    let id = identity();
    let data = cache_data(&id, b"pipeline");
    let bytes = encode(&id, &key(), &data);
    let mut want: Vec<u8> = Vec::new();
    want.extend_from_slice(b"PIPEKEEP");
    want.extend_from_slice(&[3, 0, 0, 0]); // format
    want.extend_from_slice(&[8, 0, 0, 0]); // ABI
    want.extend_from_slice(&[0x02, 0x10, 0, 0]); // vendor
    want.extend_from_slice(&[0xbf, 0x73, 0, 0]); // device
    want.extend_from_slice(&[0x07, 0x00, 0x40, 0x06]); // driver version
    want.extend_from_slice(&[0, 0, 0, 0]); // payload kind: cache
    want.extend_from_slice(&id.cache_uuid);
    want.extend_from_slice(&[0x11; 16]);
    want.extend_from_slice(&[0x22; 16]);
    want.extend_from_slice(&[72, 0, 0, 0, 0, 0, 0, 0]); // body length
    assert_eq!(&bytes[..88], &want[..]);
    assert_eq!(
        crate::store::identity::hex(&bytes[88..120]),
        "0574b2a17cc672524027d4def0ee8a9b4959726259592cc8157f4200e712eb64",
        "BLAKE3 of the body (format 3's context), pinned"
    );
    // The body: the payload's length, one part, standing inline (40 bytes do not compress).
    assert_eq!(&bytes[120..128], &[40, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&bytes[128..136], &[1, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        &bytes[136..152],
        &[0, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(&bytes[152..], &data[..]);
    assert_eq!(ENVELOPE_LEN, 120);
    assert_eq!(FORMAT_VERSION, 3);
}

/// The payload of the packed golden tests: a header, then "pipeline" 32 times (288 bytes).
fn packable(id: &Identity) -> Vec<u8> {
    cache_data(id, &b"pipeline".repeat(32))
}

/// One zstd frame of [`packable`] (libzstd 1.5.7, level 1), as a format-3 entry holds it.
pub const PACKED_FRAME: [u8; 58] = [
    0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x20, 0x00, 0x85, 0x01, 0x00, 0x84, 0x02, 0x20, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x02, 0x10, 0x00, 0x00, 0xbf, 0x73, 0x00, 0x00, 0xa0, 0xa1, 0xa2, 0xa3,
    0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf, 0x70, 0x69, 0x70, 0x65,
    0x6c, 0x69, 0x6e, 0x65, 0x01, 0x00, 0xa8, 0x8f, 0x2a, 0x65,
];

/// The body listing `data` inline, as format 2 wrote it and format 3 reads expanded.
fn bytes_expanded(data: &[u8]) -> Vec<u8> {
    recipe::encode(&[Part::Inline(data)])
}

/// The envelope's first 80 bytes as the golden tests' identity and key give them.
fn golden_head(format: u8) -> Vec<u8> {
    let mut want: Vec<u8> = b"PIPEKEEP".to_vec();
    want.extend_from_slice(&[format, 0, 0, 0, 8, 0, 0, 0]); // format, ABI
    want.extend_from_slice(&[0x02, 0x10, 0, 0, 0xbf, 0x73, 0, 0]); // vendor, device
    want.extend_from_slice(&[0x07, 0x00, 0x40, 0x06, 0, 0, 0, 0]); // driver, kind: cache
    want.extend_from_slice(&identity().cache_uuid);
    want.extend_from_slice(&[0x11; 16]);
    want.extend_from_slice(&[0x22; 16]);
    want
}

// If this golden test fails, the bytes on disk changed: bump FORMAT_VERSION. The frame's own
// bytes are the compressor's (another libzstd may write others of the same bytes): they are
// pinned where they are read (`a_packed_entry_of_these_bytes_is_read`), not here.
#[test]
fn golden_packed_entry_bytes_if_these_fail_bump_the_format() {
    let id = identity();
    let data = packable(&id);
    let bytes = encode(&id, &key(), &data);
    assert_eq!(&bytes[..80], &golden_head(3)[..]);
    let stored = u32::from_le_bytes(bytes[140..144].try_into().unwrap()) as usize;
    assert!(stored > 0 && stored < 288, "{stored} bytes stored");
    assert_eq!(&bytes[80..88], &((32 + stored) as u64).to_le_bytes()); // body length
    assert_eq!(
        crate::store::identity::hex(&bytes[88..120]),
        "e0e2fdb79f0a61d961daea160ccef5bd66fc80a16499f652f6603469b8b0148d",
        "BLAKE3 (format 3's context) of the body as it reads uncompressed, pinned"
    );
    // The body: the payload's length, one part, packed: kind 3, its stored length, its length.
    assert_eq!(
        &bytes[120..136],
        &[32, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(&bytes[136..140], &[3, 0, 0, 0]);
    assert_eq!(&bytes[144..152], &[32, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(bytes.len(), 152 + stored);
    let mut out = vec![0u8; 288];
    crate::store::compress::decompress_into(&bytes[152..], &mut out).unwrap();
    assert_eq!(out, data);
    // Format 2 held the body expanded, under a plain BLAKE3.
    let two = encode_format_two(&id, &key(), PayloadKind::Cache, &[Part::Inline(&data)]);
    assert_eq!(&two[120..], &bytes_expanded(&data)[..]);
    assert_eq!(&two[..80], &golden_head(2)[..]);
    assert_eq!(
        crate::store::identity::hex(&two[88..120]),
        "ac75cd22f5a64e10003843c769a8ba8527b5640b6067be8cd731b59070898f10"
    );
}

#[test]
fn a_packed_entry_of_these_bytes_is_read() {
    let id = identity();
    let mut file = golden_head(3);
    file.extend_from_slice(&90u64.to_le_bytes());
    file.extend_from_slice(
        &crate::key::text::from_hex::<32>(
            "e0e2fdb79f0a61d961daea160ccef5bd66fc80a16499f652f6603469b8b0148d",
        )
        .unwrap(),
    );
    file.extend_from_slice(&[32, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
    file.extend_from_slice(&[3, 0, 0, 0, 58, 0, 0, 0, 32, 1, 0, 0, 0, 0, 0, 0]);
    file.extend_from_slice(&PACKED_FRAME);
    let decoded = decode(&file, &id, &key()).unwrap();
    assert_eq!(decoded.whole(), Some(&packable(&id)[..]));
    assert!(decoded.is_expanded());
    assert_eq!(listed_parts(&file), Some((288, Vec::new())));
    // A stored length other than the frame's, or a length other than the frame's: refused.
    let mut short = file.clone();
    short[140] = 57;
    assert_eq!(decode(&short, &id, &key()).unwrap_err().reason(), "corrupt");
    let mut other = file.clone();
    other[144] = 33;
    other[120] = 33;
    assert_eq!(decode(&other, &id, &key()).unwrap_err().reason(), "corrupt");
    // A frame's stored length as long as its bytes, or 0: refused as corrupt.
    for stored in [0u8, 32] {
        let mut bad = file.clone();
        bad[140] = stored;
        bad[141] = u8::from(stored == 32);
        assert!(decode(&bad, &id, &key()).is_err());
    }
}

#[test]
fn an_entry_of_format_two_is_still_read() {
    let id = identity();
    let data = packable(&id);
    let bytes = encode_format_two(&id, &key(), PayloadKind::Cache, &[Part::Inline(&data)]);
    assert_eq!(&bytes[8..12], &[2, 0, 0, 0]);
    assert_eq!(bytes.len(), 120 + 32 + 288);
    let decoded = decode(&bytes, &id, &key()).unwrap();
    assert_eq!(decoded.whole(), Some(&data[..]));
    assert!(!decoded.is_expanded());
    // Format 2 holds no packed part: one written there is refused.
    let packed = encode(&id, &key(), &data);
    let mut relabelled = packed.clone();
    relabelled[8] = 2;
    assert_eq!(
        decode(&relabelled, &id, &key()).unwrap_err().reason(),
        "corrupt"
    );
    assert_eq!(listed_parts(&relabelled), None);
}

#[test]
fn every_byte_of_a_packed_entry_is_checked() {
    let id = identity();
    let data = packable(&id);
    let good = encode(&id, &key(), &data);
    assert!(good.len() < 120 + 32 + 288, "packed");
    for i in 0..good.len() {
        let mut damaged = good.clone();
        damaged[i] ^= 0x01;
        match decode(&damaged, &id, &key()) {
            Err(_) => {}
            // A bit of the frame that zstd does not read leaves the bytes the hash covers.
            Ok(d) => assert!(i >= 152 && d.whole() == Some(&data[..]), "byte {i}"),
        }
    }
}

#[test]
fn an_entry_of_pieces_and_packed_parts_reads_back_as_written() {
    let id = identity();
    let head = packable(&id);
    let tail = b"own bytes, more of them".repeat(20);
    let parts = [
        Part::Inline(&head),
        Part::Piece {
            name: [4; 32],
            len: 1000,
        },
        Part::Inline(&tail),
        Part::Inline(b"short"),
    ];
    let bytes = encode_parts(&id, &key(), PayloadKind::Cache, &parts);
    let stored = recipe::parse_as(&bytes[120..], recipe::Parts::Packed)
        .unwrap()
        .1;
    let kinds: Vec<bool> = stored
        .iter()
        .map(|p| matches!(p, Part::Packed { .. }))
        .collect();
    assert_eq!(kinds, [true, false, true, false]);
    let decoded = decode(&bytes, &id, &key()).unwrap();
    assert_eq!(
        decoded.body(),
        Body::Parts {
            len: 288 + 1000 + tail.len() as u64 + 5,
            parts: parts.to_vec()
        }
    );
    assert_eq!(listed_parts(&bytes).unwrap().1, vec![[4; 32]]);
}

#[test]
fn what_a_short_file_lists_is_nothing_and_never_a_panic() {
    let whole = encode(&identity(), &key(), &cache_data(&identity(), &[5; 40]));
    for len in 0..whole.len() {
        assert_eq!(listed_parts(&whole[..len]), None, "{len} bytes");
        assert!(declared_file_len(&whole[..len]).is_none_or(|l| l != len as u64));
    }
    assert!(listed_parts(&whole).is_some());
}

#[test]
fn an_entry_of_format_one_is_still_read() {
    let id = identity();
    let data = cache_data(&id, b"pipeline");
    let bytes = encode_format_one(&id, &key(), PayloadKind::Cache, &data);
    assert_eq!(&bytes[8..12], &[1, 0, 0, 0]);
    assert_eq!(&bytes[80..88], &[40, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        crate::store::identity::hex(&bytes[88..120]),
        "022312dd2ba2eea633e8d38282f917ef540bf475a9c482808d9f427b18712685",
        "BLAKE3 of the data, as format 1 pinned it"
    );
    assert_eq!(&bytes[120..], &data[..]);
    let decoded = decode(&bytes, &id, &key()).unwrap();
    assert_eq!(decoded.whole(), Some(&data[..]));
    let mut damaged = bytes.clone();
    *damaged.last_mut().unwrap() ^= 1;
    assert_eq!(
        decode(&damaged, &id, &key()).unwrap_err().reason(),
        "corrupt"
    );
}

#[test]
fn an_entry_of_pieces_lists_them_and_its_payload_is_checked_once_put_together() {
    let id = identity();
    let head = cache_data(&id, b"own");
    let parts = [
        Part::Inline(&head),
        Part::Piece {
            name: [4; 32],
            len: 1000,
        },
    ];
    let bytes = encode_parts(&id, &key(), PayloadKind::Cache, &parts);
    let decoded = decode(&bytes, &id, &key()).unwrap();
    assert_eq!(
        decoded.body(),
        Body::Parts {
            len: 1035,
            parts: parts.to_vec()
        }
    );
    assert_eq!(
        check_payload_start(PayloadKind::Cache, &head, 1035, &id),
        Ok(())
    );
    let mut other = head.clone();
    other[9] ^= 1;
    assert_eq!(
        check_payload_start(PayloadKind::Cache, &other, 1035, &id)
            .unwrap_err()
            .reason(),
        "bad-header"
    );
}

#[test]
fn an_entry_opens_whole_only_for_its_own_identity_and_key() {
    let id = identity();
    let data = cache_data(&id, &[7u8; 100]);
    let bytes = encode(&id, &key(), &data);
    assert_eq!(
        decode(&bytes, &id, &key()).unwrap().whole(),
        Some(&data[..])
    );
}

#[test]
fn every_foreign_identity_field_is_refused_as_foreign() {
    let id = identity();
    let bytes = encode(&id, &key(), &cache_data(&id, &[1; 8]));
    let others = [
        ("ABI", Identity { abi: 4, ..id }),
        (
            "vendor",
            Identity {
                vendor_id: 0x10de,
                ..id
            },
        ),
        ("device", Identity { device_id: 1, ..id }),
        (
            "driver version",
            Identity {
                driver_version: 1,
                ..id
            },
        ),
        (
            "pipeline-cache UUID",
            Identity {
                cache_uuid: [0; 16],
                ..id
            },
        ),
    ];
    for (field, other) in others {
        assert_eq!(
            decode(&bytes, &other, &key()),
            Err(EntryError::Foreign { field })
        );
    }
}

#[test]
fn another_pipelines_entry_is_refused_as_other_key() {
    let id = identity();
    let bytes = encode(&id, &key(), &cache_data(&id, &[1; 8]));
    let mut other = key();
    other.state[15] ^= 1;
    assert_eq!(decode(&bytes, &id, &other), Err(EntryError::OtherKey));
    other = key();
    other.spirv[0] ^= 0x80;
    assert_eq!(decode(&bytes, &id, &other), Err(EntryError::OtherKey));
}

#[test]
fn each_damage_is_refused_with_its_own_reason() {
    let id = identity();
    let good = encode(&id, &key(), &cache_data(&id, &[9; 64]));
    let reason = |b: &[u8]| decode(b, &id, &key()).unwrap_err().reason();
    assert_eq!(reason(&[]), "short", "zero-length");
    assert_eq!(reason(&good[..100]), "short", "cut inside the envelope");
    assert_eq!(
        reason(&good[..good.len() - 1]),
        "short",
        "cut inside the data"
    );
    let mut longer = good.clone();
    longer.push(0);
    assert_eq!(reason(&longer), "long");
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert_eq!(reason(&flipped), "corrupt", "a byte of the data");
    flipped = good.clone();
    flipped[100] ^= 1;
    assert_eq!(reason(&flipped), "corrupt", "a byte of the stored hash");
    flipped = good.clone();
    flipped[3] ^= 1;
    assert_eq!(reason(&flipped), "corrupt", "the magic");
    flipped = good.clone();
    flipped[29] = 1;
    assert_eq!(reason(&flipped), "corrupt", "the payload kind");
    flipped = good.clone();
    flipped[8] = 4;
    assert_eq!(reason(&flipped), "foreign", "another format");
    flipped = good.clone();
    flipped[81] ^= 1;
    assert_eq!(reason(&flipped), "short", "the data length field");
}

#[test]
fn every_byte_of_a_good_entry_is_checked() {
    let id = identity();
    let good = encode(&id, &key(), &cache_data(&id, &[3; 16]));
    for i in 0..good.len() {
        let mut damaged = good.clone();
        damaged[i] ^= 0x01;
        assert!(
            decode(&damaged, &id, &key()).is_err(),
            "byte {i} changed and still accepted"
        );
    }
}

#[test]
fn a_bad_cache_header_is_refused_as_bad_header() {
    let id = identity();
    let mut wrong_vendor = cache_data(&id, &[1; 8]);
    wrong_vendor[8] ^= 1;
    let mut wrong_version = cache_data(&id, &[1; 8]);
    wrong_version[4] = 2;
    let mut wrong_uuid = cache_data(&id, &[1; 8]);
    wrong_uuid[31] ^= 1;
    let mut huge_header = cache_data(&id, &[1; 8]);
    huge_header[0..4].copy_from_slice(&1000u32.to_le_bytes());
    for data in [
        vec![],
        vec![0; 8],
        wrong_vendor,
        wrong_version,
        wrong_uuid,
        huge_header,
    ] {
        // An empty payload cannot be listed in parts: only format 1 could hold one.
        let bytes = match data.is_empty() {
            true => encode_format_one(&id, &key(), PayloadKind::Cache, &data),
            false => encode(&id, &key(), &data),
        };
        assert_eq!(
            decode(&bytes, &id, &key()).unwrap_err().reason(),
            "bad-header"
        );
    }
}

#[test]
fn a_bare_header_holds_nothing_worth_keeping() {
    let id = identity();
    assert!(!holds_more_than_header(&cache_data(&id, &[])));
    assert!(holds_more_than_header(&cache_data(&id, &[0])));
    assert!(!holds_more_than_header(&[]));
}
