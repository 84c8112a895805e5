//! The parsers of bytes from disk under arbitrary input, on stable Rust in CI (the cargo-fuzz
//! targets in fuzz/ explore the same functions further where nightly is available): the envelope
//! decoder (packed entries of format 3 among them), the list of parts (packed parts too, and
//! their expansion), a piece file's framing, the use order, the Fossilize container reader with
//! the payload parser, and damaged corpus copies.

mod common;
use common::identity;
use pipekeep::key::PipelineKey;
use pipekeep::replay::{foz, objects::Catalog};
use pipekeep::store::{envelope, order, pieces, recipe};
use proptest::prelude::*;

fn key() -> PipelineKey {
    PipelineKey {
        spirv: [2; 16],
        state: [3; 16],
    }
}

fn good_entry(payload: &[u8]) -> Vec<u8> {
    let id = identity();
    let mut data = envelope::cache_header(&id).to_vec();
    data.extend_from_slice(payload);
    envelope::encode(&id, &key(), &data)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_envelope_decoder_never_panics_and_accepts_only_whole_entries(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(decoded) = envelope::decode(&bytes, &identity(), &key()) {
            if let Some(data) = decoded.whole() {
                let kind = envelope::PayloadKind::Cache;
                prop_assert!(
                    envelope::encode(&identity(), &key(), data) == bytes
                        || envelope::encode_format_one(&identity(), &key(), kind, data) == bytes
                        || envelope::encode_format_two(&identity(), &key(), kind, &[recipe::Part::Inline(data)]) == bytes
                );
            }
        }
    }

    #[test]
    fn the_packed_parts_parser_never_panics_and_accepts_only_whole_lists(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok((len, parts)) = recipe::parse_as(&bytes, recipe::Parts::Packed) {
            prop_assert_eq!(&recipe::encode(&parts), &bytes);
            prop_assert_eq!(parts.iter().map(|p| p.len()).sum::<u64>(), len);
            // Whatever the frames hold, expanding never panics, and what expands is as long
            // as the parts say.
            if let Ok(expanded) = recipe::expand(&parts) {
                let (again, _) = recipe::parse(&expanded).unwrap();
                prop_assert_eq!(again, len);
            }
        }
    }

    #[test]
    fn any_damage_to_a_packed_entry_is_refused_or_reads_the_same_payload(seed in any::<u8>(), at in any::<usize>(), flip in 1u8..=255) {
        // Bytes that compress, as a pipeline's code does.
        let payload: Vec<u8> = (0..600u32).map(|i| [0x13, 0x00, seed, (i / 9) as u8][i as usize % 4]).collect();
        let id = identity();
        let mut data = envelope::cache_header(&id).to_vec();
        data.extend_from_slice(&payload);
        let mut bytes = envelope::encode(&id, &key(), &data);
        prop_assert!(bytes.len() < 120 + 32 + data.len(), "packed");
        let i = at % bytes.len();
        bytes[i] ^= flip;
        if let Ok(decoded) = envelope::decode(&bytes, &id, &key()) {
            prop_assert_eq!(decoded.whole(), Some(&data[..]));
        }
    }

    #[test]
    fn a_piece_file_of_any_bytes_is_refused_or_read_as_long_as_its_entry_says(bytes in proptest::collection::vec(any::<u8>(), 0..200), len in 0u64..400, framed in any::<bool>()) {
        let mut file = bytes;
        if framed {
            // A frame head of the right length in front, so the frame itself is reached.
            let mut head = pieces::FRAMED_MAGIC.to_vec();
            head.extend_from_slice(&len.to_le_bytes());
            file.splice(0..0, head);
        }
        if let Ok(read) = pieces::unframe(file.clone(), len) {
            prop_assert_eq!(read.len() as u64, len);
        }
        let name = *blake3::hash(&file).as_bytes();
        prop_assert_eq!(pieces::content_of(file.clone(), &name), Some(file));
    }

    #[test]
    fn any_damage_to_a_framed_piece_is_refused_or_reads_the_same_bytes(seed in any::<u8>(), at in any::<usize>(), flip in 1u8..=255) {
        let bytes: Vec<u8> = (0..900u32).map(|i| [seed, 0x00, 0x8f, (i / 5) as u8][i as usize % 4]).collect();
        let mut file = pieces::frame(&bytes).expect("code-like bytes compress");
        let i = at % file.len();
        file[i] ^= flip;
        let name = *blake3::hash(&bytes).as_bytes();
        if let Ok(read) = pieces::unframe(file.clone(), 900) {
            prop_assert!(read == bytes || *blake3::hash(&read).as_bytes() != name);
        }
        prop_assert!(pieces::content_of(file, &name).is_none_or(|b| b == bytes));
    }

    #[test]
    fn the_parts_parser_never_panics_and_accepts_only_whole_lists(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok((len, parts)) = recipe::parse(&bytes) {
            prop_assert_eq!(&recipe::encode(&parts), &bytes);
            prop_assert_eq!(parts.iter().map(|p| p.len()).sum::<u64>(), len);
        }
    }

    #[test]
    fn any_damage_to_a_list_of_parts_is_refused_or_read_as_other_parts(inline in proptest::collection::vec(any::<u8>(), 1..50), at in any::<usize>(), flip in 1u8..=255) {
        let parts = [recipe::Part::Inline(&inline), recipe::Part::Piece { name: [9; 32], len: 77 }];
        let mut bytes = recipe::encode(&parts);
        let i = at % bytes.len();
        bytes[i] ^= flip;
        if let Ok((_, read)) = recipe::parse(&bytes) {
            prop_assert_ne!(read, parts.to_vec());
        }
    }

    #[test]
    fn the_use_order_parser_never_panics_and_reads_only_what_it_writes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(keys) = order::decode(&bytes) {
            prop_assert_eq!(order::encode(&keys), bytes);
        }
    }

    #[test]
    fn any_damage_to_a_use_order_is_refused(n in 0usize..6, at in any::<usize>(), flip in 1u8..=255) {
        let keys: Vec<PipelineKey> = (0..n as u8).map(|i| PipelineKey { spirv: [i; 16], state: [!i; 16] }).collect();
        let mut bytes = order::encode(&keys);
        let i = at % bytes.len();
        bytes[i] ^= flip;
        prop_assert!(order::decode(&bytes).is_err());
    }

    #[test]
    fn any_damage_to_a_good_entry_is_refused(payload in proptest::collection::vec(any::<u8>(), 1..200), at in any::<usize>(), flip in 1u8..=255) {
        let mut bytes = good_entry(&payload);
        let i = at % bytes.len();
        bytes[i] ^= flip;
        prop_assert!(envelope::decode(&bytes, &identity(), &key()).is_err());
    }

    #[test]
    fn the_container_reader_and_payload_parser_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut db = foz::MAGIC.to_vec();
        db.extend_from_slice(&[0, 0, 0, 6]);
        db.extend_from_slice(&bytes);
        for input in [&bytes[..], &db[..]] {
            if let Ok(entries) = foz::read_entries(input) {
                let _ = Catalog::from_entries(entries);
            }
        }
    }

    #[test]
    fn payloads_of_any_shape_are_parsed_or_named_malformed(tag in 0u32..10, json in "\\{\"version\":6,\"(shaderModules|setLayouts|computePipelines|renderPasses)\":\\{\"[0-9a-f]{16}\":\\{[a-zA-Z\":0-9,\\[\\]{}]{0,80}\\}\\}\\}", tail in proptest::collection::vec(any::<u8>(), 0..40)) {
        let mut payload = json.into_bytes();
        payload.push(0);
        payload.extend_from_slice(&tail);
        let db = foz::write_entries(&[(tag, 1, payload)]);
        let entries = foz::read_entries(&db).unwrap();
        let _ = Catalog::from_entries(entries);
    }

    #[test]
    fn the_module_identifier_file_reads_only_whole_records(
        records in proptest::collection::vec((any::<[u8; 16]>(), proptest::collection::vec(any::<u8>(), 1..=32), any::<[u8; 32]>()), 0..6),
        damage in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        tail in proptest::collection::vec(any::<u8>(), 0..100),
    ) {
        use pipekeep::store::identifiers::{encode, parse, KnownIdentifier, HEADER_LEN, RECORD_LEN};
        let known: Vec<KnownIdentifier> = records
            .into_iter()
            .map(|(algorithm, identifier, module)| KnownIdentifier { algorithm, identifier, module: pipekeep::key::Digest(module) })
            .collect();
        let mut bytes = b"PKMODID\0\x01\0\0\0\0\0\0\0".to_vec();
        for k in &known {
            bytes.extend_from_slice(&encode(k).unwrap());
        }
        prop_assert_eq!(&parse(&bytes).unwrap().known, &known);
        for (at, xor) in damage {
            let len = bytes.len();
            bytes[at % len] ^= xor;
        }
        bytes.extend_from_slice(&tail);
        if let Some(parsed) = parse(&bytes) {
            prop_assert!(parsed.known.len() <= bytes.len().saturating_sub(HEADER_LEN) / RECORD_LEN);
            for k in &parsed.known {
                let whole = encode(k).unwrap();
                prop_assert!(bytes[HEADER_LEN..].chunks_exact(RECORD_LEN).any(|r| r == whole));
            }
        }
    }
}

/// Issue 31, item 3: 200 damaged bytes anywhere in a real database, deflated as the record is
/// written, cost the entries they touch and no other: every entry that lies wholly before or
/// after the damage reads back whole, and what the rebuild and a compaction make of the rest
/// never panics.
#[test]
fn two_hundred_damaged_bytes_cost_only_the_entries_they_touch() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/saschawillems-glsl-synth.foz");
    let bytes = std::fs::read(&path).expect("the corpus ships in tests/corpus");
    let whole: Vec<(u32, u64, Vec<u8>)> = foz::read_entries(&bytes)
        .unwrap()
        .into_iter()
        .map(|e| (e.tag, e.hash, e.payload.unwrap()))
        .collect();
    let db = foz::write_entries_deflated(&whole);
    // Where each entry lies in the file.
    let mut spans = Vec::new();
    let mut at = 16;
    while at + 56 <= db.len() {
        let stored = u32::from_le_bytes(db[at + 40..at + 44].try_into().unwrap()) as usize;
        spans.push((at, at + 56 + stored));
        at += 56 + stored;
    }
    assert_eq!(spans.len(), whole.len());
    for (n, from) in (16..db.len() - 200).step_by(7919).enumerate() {
        let mut damaged = db.clone();
        for (i, b) in damaged[from..from + 200].iter_mut().enumerate() {
            *b = [0x00, 0xff, b'a', b'0'][n % 4] ^ (i as u8 & (n as u8 >> 2));
        }
        let read = foz::read_entries(&damaged).unwrap();
        let good: std::collections::HashSet<(u32, u64)> = read
            .iter()
            .filter(|e| e.payload.is_ok())
            .map(|e| (e.tag, e.hash))
            .collect();
        for (i, (start, end)) in spans.iter().enumerate() {
            if *end <= from || *start >= from + 200 {
                assert!(
                    good.contains(&(whole[i].0, whole[i].1)),
                    "damage at {from}: entry {i} at {start}..{end} lost"
                );
            }
        }
        let catalog = Catalog::from_entries(read.clone());
        let _ = catalog.configurations();
        // A compaction deflates every payload: a few of them (debug builds are slow at it).
        if n % 16 == 0 {
            let kept = pipekeep::replay::record::within_share(read, 100_000, &|_| None);
            assert!(foz::write_entries_deflated(&kept).len() <= 100_000);
        }
    }
}

#[test]
fn every_cut_of_a_real_database_reads_without_panic() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/saschawillems-glsl-synth.foz");
    let bytes = std::fs::read(&path).expect("the corpus ships in tests/corpus");
    for cut in (0..bytes.len()).step_by(997) {
        if let Ok(entries) = foz::read_entries(&bytes[..cut]) {
            let _ = Catalog::from_entries(entries);
        }
    }
}
