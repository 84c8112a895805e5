//! The waiting file's format, seal, pieces and checks, on bytes and in temporary directories.

use super::*;

/// Cache data of `identity` for each head (a byte, so many times), then `block`: payloads that
/// share most of their bytes, each at another offset.
pub(crate) fn sharing_a_block(
    identity: &Identity,
    heads: &[(u8, usize)],
    block: &[u8],
) -> Vec<Vec<u8>> {
    let with = |&(byte, len): &(u8, usize)| {
        let body: Vec<u8> = std::iter::repeat_n(byte, len)
            .chain(block.iter().copied())
            .collect();
        crate::store::envelope::tests::cache_data(identity, &body)
    };
    heads.iter().map(with).collect()
}

fn identity() -> Identity {
    Identity {
        vendor_id: 0x1002,
        device_id: 0x73a0,
        driver_version: 7,
        cache_uuid: [3; 16],
        abi: 8,
    }
}

fn key(n: u8) -> PipelineKey {
    PipelineKey {
        spirv: [n; 16],
        state: [n + 1; 16],
    }
}

/// A file of two entries, keys 1 and 5, both stamped `stamp`.
fn two_entries(stamp: SystemTime) -> Vec<u8> {
    let entries: Vec<ToWait<'_>> = vec![
        (key(1), PayloadKind::Cache, &[1, 2, 3][..], stamp),
        (key(5), PayloadKind::Cache, &[9; 40][..], stamp),
    ];
    encode(&identity(), Chunking::CHOSEN, &entries, &|_| false)
}

#[test]
fn a_waiting_file_reads_back_every_record_and_stops_at_a_cut() {
    let stamp = UNIX_EPOCH + Duration::from_nanos(1_234_567_890);
    let bytes = two_entries(stamp);
    let (records, whole) = parse(&bytes);
    assert!(whole);
    assert_eq!(records.len(), 2);
    assert_eq!((records[1].key, records[1].stamp), (key(5), stamp));
    for cut in MAGIC.len()..bytes.len() {
        assert!(parse(&bytes[..cut]).0.len() < 2, "cut at {cut}");
    }
    assert_eq!(parse(b"PKWAIT00").0.len(), 0);
}

/// A file is sealed as it is written, and its seal holds for those bytes alone: any byte
/// changed after the magic breaks it (its records are then each checked on their own).
/// A file written before the seal reads as it did.
#[test]
fn a_waiting_files_seal_holds_only_for_the_bytes_it_was_written_with() {
    let bytes = two_entries(UNIX_EPOCH + Duration::from_nanos(7));
    assert!(sealed(&bytes));
    assert_eq!(head_len(&bytes), Some(HEAD_LEN as usize));
    for at in MAGIC.len()..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        assert!(!sealed(&damaged), "byte {at} changed");
    }
    let unsealed = [&MAGIC_UNSEALED[..], &bytes[HEAD_LEN as usize..]].concat();
    assert!(!sealed(&unsealed));
    assert_eq!(parse(&unsealed), parse(&bytes));
    assert!(!sealed(&bytes[..HEAD_LEN as usize - 1]));
}

/// Two entries sharing most of their bytes (a block at another offset in each): the file holds
/// the block's pieces once, each entry names them, and both read back byte for byte; a piece
/// that fails its name (the seal broken) fails the entries naming it, and the fix drops them
/// with it; the bound's rewrite without one entry keeps the pieces the other names.
#[test]
fn pieces_two_entries_share_stand_in_the_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let pieces = Pieces::for_looking(dir.path());
    let block = crate::store::recipe::tests::noise(256 << 10);
    let [one, five]: [Vec<u8>; 2] = sharing_a_block(&identity(), &[(1, 3000), (5, 7000)], &block)
        .try_into()
        .unwrap();
    let stamp = UNIX_EPOCH + Duration::from_nanos(7);
    let entries: Vec<ToWait<'_>> = vec![
        (key(1), PayloadKind::Cache, &one, stamp),
        (key(5), PayloadKind::Cache, &five, stamp),
    ];
    let bytes = encode(&identity(), Chunking::CHOSEN, &entries, &|_| false);
    assert!(bytes.starts_with(MAGIC) && sealed(&bytes));
    assert!(
        bytes.len() < one.len() + five.len() / 2,
        "the block once: {} bytes for {} + {}",
        bytes.len(),
        one.len(),
        five.len()
    );
    let (all, whole) = parse_all(&bytes);
    assert!(whole && all.iter().filter(|r| r.piece).count() > 10);
    assert_eq!(parse(&bytes).0.len(), 2, "entries only");
    let check = |bytes: &[u8]| check_file(Arc::new(bytes.to_vec()), &identity(), &pieces);
    let read = check(&bytes);
    assert!(read.is_clean(), "{read:?}");
    let read_back: Vec<Vec<u8>> = read
        .entries
        .iter()
        .map(|e| e.data.with_bytes(|b| b.to_vec()))
        .collect();
    assert_eq!(read_back, [one.clone(), five.clone()]);
    // Unsealed (no seal to vouch), each piece is checked against its name: all hold.
    let unsealed = [&MAGIC_UNSEALED[..], &bytes[HEAD_LEN as usize..]].concat();
    assert_eq!(check(&unsealed).entries.len(), 2);

    // The bound drops the first entry: the second still reads whole.
    let path = dir.path().join("1-2-8.waiting");
    fs::write(&path, &bytes).unwrap();
    let dropped: HashSet<PipelineKey> = [key(1)].into();
    assert!(without(&path, &dropped).unwrap());
    let left = check(&fs::read(&path).unwrap());
    assert!(left.is_clean(), "{left:?}");
    assert_eq!(left.entries.len(), 1);
    assert_eq!(left.entries[0].data.with_bytes(|b| b.to_vec()), five);

    // A byte of the first piece flipped: both entries name it and fail; the fix leaves
    // nothing sound, and the file goes.
    let first_piece = all.iter().find(|r| r.piece).unwrap();
    let at = first_piece.entry.as_ptr() as usize - bytes.as_ptr() as usize;
    let mut damaged = bytes.clone();
    damaged[at] ^= 1;
    let found = check(&damaged);
    assert_eq!((found.seal, found.bad_pieces.len()), (Seal::Failed, 1));
    assert!(found.entries.is_empty() && found.is_damaged());
    fs::write(&path, &damaged).unwrap();
    assert!(without_damage(&path, &identity(), &pieces).unwrap());
    assert!(!path.exists());
}

/// A file holding pieces, cut anywhere or with any byte flipped, reads without a panic: each
/// entry found is one of its records, every bad one a place among them.
#[test]
fn a_file_with_pieces_cut_or_flipped_anywhere_reads_safely() {
    let dir = tempfile::tempdir().unwrap();
    let pieces = Pieces::for_looking(dir.path());
    let block = crate::store::recipe::tests::noise(64 << 10);
    let data = sharing_a_block(&identity(), &[(1, 500), (2, 500), (3, 500)], &block);
    let entries: Vec<ToWait<'_>> = (1..=3u8)
        .map(|k| {
            (
                key(k),
                PayloadKind::Cache,
                &data[usize::from(k) - 1][..],
                UNIX_EPOCH,
            )
        })
        .collect();
    let bytes = encode(&identity(), Chunking::CHOSEN, &entries, &|_| false);
    let check = |bytes: Vec<u8>| {
        let read = check_file(Arc::new(bytes.clone()), &identity(), &pieces);
        let (records, whole) = parse(&bytes);
        assert_eq!(read.whole, whole);
        assert_eq!(read.entries.len() + read.bad.len(), records.len());
        for e in &read.entries {
            let at = usize::from(e.key.spirv[0]) - 1;
            assert_eq!(
                e.data.with_bytes(|b| b.to_vec()),
                data[at],
                "never a wrong byte"
            );
        }
    };
    for cut in (0..bytes.len()).step_by(97) {
        check(bytes[..cut].to_vec());
    }
    for at in (MAGIC.len()..bytes.len()).step_by(101) {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x40;
        check(flipped);
    }
}

/// A piece's record, byte for byte:    /// A piece's record, byte for byte: if this fails, the file's format changed (bump its magic).
#[test]
fn a_pieces_record_is_its_stamp_name_length_and_bytes() {
    let mut out = Vec::new();
    encode_piece_record(&mut out, &[0xab; 32], &[1, 2, 3]);
    let mut expected = vec![0xff; 8];
    expected.extend_from_slice(&[0xab; 32]);
    expected.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]);
    expected.extend_from_slice(&[1, 2, 3]);
    assert_eq!(out, expected);
    assert_eq!(&MAGIC[..], b"PKWAIT03");
}

/// A sealed file of the format before pieces (`PKWAIT02`) reads as it did: sealed, clean.
#[test]
fn a_file_sealed_before_pieces_reads_clean() {
    use crate::store::envelope::tests::cache_data;
    let dir = tempfile::tempdir().unwrap();
    let pieces = Pieces::for_looking(dir.path());
    let data = cache_data(&identity(), &[4; 64]);
    let entries: Vec<ToWait<'_>> = vec![(key(4), PayloadKind::Cache, &data, UNIX_EPOCH)];
    let mut bytes = encode(&identity(), Chunking::CHOSEN, &entries, &|_| false);
    bytes[..MAGIC.len()].copy_from_slice(MAGIC_BEFORE_PIECES);
    assert!(!sealed(&bytes), "each format its own seal");
    seal(&mut bytes);
    assert!(sealed(&bytes));
    let read = check_file(Arc::new(bytes), &identity(), &pieces);
    assert!(read.is_clean() && read.entries.len() == 1, "{read:?}");
}

/// The bound's rewrite keeps the pieces its kept entries name, no others; and it counts a
/// piece with the last record to go that names it.
#[test]
fn the_bound_drops_a_piece_with_the_last_entry_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let noise = crate::store::recipe::tests::noise(128 << 10);
    let (a, b): (Vec<u8>, Vec<u8>) = (noise.iter().map(|x| x ^ 1).collect(), noise.clone());
    let mut data = sharing_a_block(&identity(), &[(1, 2000), (2, 2000)], &a);
    data.extend(sharing_a_block(&identity(), &[(3, 2000), (4, 2000)], &b));
    let entry = |k: u8, stamp: u64| {
        let d = &data[usize::from(k) - 1][..];
        (
            key(k),
            PayloadKind::Cache,
            d,
            UNIX_EPOCH + Duration::from_secs(stamp),
        )
    };
    let all = [entry(1, 10), entry(2, 20), entry(3, 30), entry(4, 40)];
    let bytes = encode(&identity(), Chunking::CHOSEN, &all, &|_| false);
    let path = dir.path().join("1-2-8.waiting");
    fs::write(&path, &bytes).unwrap();
    let listed = StampedEntry {
        path: path.clone(),
        bytes: bytes.len() as u64,
        stamp: UNIX_EPOCH + Duration::from_secs(50),
        waiting_record: None,
    };
    let (records, unread) = as_records(vec![listed]);
    assert_eq!(unread, 0);
    let order: Vec<PipelineKey> = records.iter().filter_map(|r| r.waiting_record).collect();
    assert_eq!(
        order,
        [key(1), key(2), key(3), key(4)],
        "oldest own stamp first"
    );
    let sum: u64 = records.iter().map(|r| r.bytes).sum();
    assert_eq!(sum, bytes.len() as u64);
    assert!(
        records[1].bytes > records[0].bytes * 10 && records[3].bytes > records[2].bytes * 10,
        "each block with the second entry naming it: {:?}",
        records.iter().map(|r| r.bytes).collect::<Vec<_>>()
    );

    // Dropping the last two leaves the file as the first two alone make it.
    let dropped: HashSet<PipelineKey> = [key(3), key(4)].into();
    assert!(without(&path, &dropped).unwrap());
    let first_two = encode(&identity(), Chunking::CHOSEN, &all[..2], &|_| false);
    assert_eq!(fs::read(&path).unwrap(), first_two);
}

/// The opening's check of a file and `pipekeep verify --fix` agree: a sound file is left as
/// it is; a record that fails its check is named by its place, and the file is written again
/// with the sound ones alone, sealed; a file with none sound goes.
#[test]
fn a_damaged_file_is_written_again_with_its_sound_records_sealed() {
    use crate::store::envelope::tests::cache_data;
    let dir = tempfile::tempdir().unwrap();
    let pieces = Pieces::for_looking(dir.path());
    let path = dir.path().join("1-2-8.waiting");
    let stamp = UNIX_EPOCH + Duration::from_nanos(7);
    let (one, five) = (
        cache_data(&identity(), &[1; 90]),
        cache_data(&identity(), &[5; 40]),
    );
    let entries: Vec<ToWait<'_>> = vec![
        (key(1), PayloadKind::Cache, &one, stamp),
        (key(5), PayloadKind::Cache, &five, stamp),
    ];
    let bytes = encode(&identity(), Chunking::CHOSEN, &entries, &|_| false);
    let check = |bytes: &[u8]| check_file(Arc::new(bytes.to_vec()), &identity(), &pieces);
    assert!(check(&bytes).is_clean());
    fs::write(&path, &bytes).unwrap();
    assert!(without_damage(&path, &identity(), &pieces).unwrap());
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "a sound file is not written again"
    );

    // The last byte of the first record's entry flipped.
    let first = HEAD_LEN as usize;
    let len = u64::from_le_bytes(bytes[first + 40..first + 48].try_into().unwrap());
    let mut damaged = bytes.clone();
    damaged[first + RECORD_HEAD + len as usize - 1] ^= 1;
    let found = check(&damaged);
    assert_eq!((found.seal, found.whole), (Seal::Failed, true));
    assert_eq!(
        found.bad.iter().map(|b| (b.at, b.key)).collect::<Vec<_>>(),
        [(0, key(1))]
    );
    assert!(found.is_damaged() && !found.is_clean());
    fs::write(&path, &damaged).unwrap();
    assert!(without_damage(&path, &identity(), &pieces).unwrap());
    let fixed = check(&read_bounded(&path).unwrap().unwrap());
    assert!(fixed.is_clean(), "{fixed:?}");
    let keys: Vec<PipelineKey> = fixed.entries.iter().map(|e| e.key).collect();
    assert_eq!(keys, [key(5)]);

    // Cut inside its only record: nothing sound, the file goes.
    let only = read_bounded(&path).unwrap().unwrap();
    fs::write(&path, &only[..only.len() - 1]).unwrap();
    assert!(without_damage(&path, &identity(), &pieces).unwrap());
    assert!(!path.exists());
}

#[test]
fn a_waiting_files_time_is_read_from_its_name_as_the_store_writes_it() {
    assert_eq!(written_at(&format!("12-345-8{SUFFIX}")), Some(345));
    assert_eq!(
        written_at(&format!("1-2-345-4{SUFFIX}")),
        Some(345),
        "read from the right"
    );
    for name in ["5-8", "x-y-8", "12-345-8.entry"] {
        let name = if name.ends_with(".entry") {
            name.to_string()
        } else {
            format!("{name}{SUFFIX}")
        };
        assert_eq!(written_at(&name), None, "{name}");
    }
}

/// A file of `n` entries of compressible data, 4,000 bytes each.
fn compressible_file(n: u8) -> Vec<u8> {
    let data: Vec<Vec<u8>> = (1..=n)
        .map(|k| {
            let body = crate::store::compress::tests::code_like(k, 4000);
            crate::store::envelope::tests::cache_data(&identity(), &body)
        })
        .collect();
    let stamp = UNIX_EPOCH + Duration::from_nanos(7);
    let entries: Vec<ToWait<'_>> = data
        .iter()
        .enumerate()
        .map(|(i, d)| (key(i as u8 * 2 + 1), PayloadKind::Cache, &d[..], stamp))
        .collect();
    encode(&identity(), Chunking::CHOSEN, &entries, &|_| false)
}

/// A file that compresses is packed (its magic, one frame) and unpacks to the file it stands
/// for, byte for byte; one that does not (noise, as NVIDIA's frames), or shorter than
/// [`PACKED_FROM`], is written as it is, and reads as it is.
#[test]
fn a_file_that_compresses_is_packed_and_unpacks_to_what_it_stands_for() {
    let file = compressible_file(40);
    assert!(file.len() >= PACKED_FROM, "{} bytes", file.len());
    let packed = pack(file.clone());
    assert!(packed.starts_with(MAGIC_PACKED), "packed");
    assert!(
        packed.len() * 3 < file.len(),
        "{} of {}",
        packed.len(),
        file.len()
    );
    assert_eq!(unpack(packed).as_deref(), Some(&file[..]));

    let small = two_entries(UNIX_EPOCH);
    assert_eq!(pack(small.clone()), small, "under PACKED_FROM");
    assert_eq!(unpack(small.clone()), Some(small));
    let noise = [
        &MAGIC[..],
        &[0; SEAL_LEN],
        &crate::store::recipe::tests::noise(PACKED_FROM),
    ]
    .concat();
    assert_eq!(pack(noise.clone()), noise, "does not shrink");
}

/// A packed file damaged never gives a wrong byte: cut short, its frame does not decompress and
/// it reads as no record (whole no longer, its seal failed); a byte changed inside the frame may
/// still decompress, to bytes its seal and the records' hashes refuse (only the records damaged
/// are dropped), or, in a bit the decoder never reads, to the same bytes. Damaged, its sound
/// entries are written anew. A frame stating
/// more than a waiting file may be is not decompressed: the file is too large, as one that large
/// on disk.
#[test]
fn a_packed_file_damaged_gives_no_wrong_byte_and_one_stating_too_much_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let pieces = Pieces::for_looking(dir.path());
    let file = compressible_file(40);
    let packed = pack(file.clone());
    let check = |bytes: Vec<u8>| check_file(Arc::new(bytes), &identity(), &pieces);
    let sound_bytes = file.clone();
    let sound = check(file);
    assert!(sound.is_clean() && sound.entries.len() == 40);
    let cut = check(unpack(packed[..packed.len() - 1].to_vec()).unwrap());
    assert!(cut.entries.is_empty() && cut.is_damaged(), "{cut:?}");
    assert_eq!((cut.whole, cut.seal), (false, Seal::Failed));
    for at in (MAGIC_PACKED.len()..packed.len()).step_by(97) {
        let mut flipped = packed.clone();
        flipped[at] ^= 0x40;
        let unpacked = unpack(flipped).unwrap();
        // A bit the decoder never reads (in a header's unused room) changes nothing.
        let unchanged = unpacked == sound_bytes;
        let read = check(unpacked);
        assert!(unchanged || read.is_damaged(), "byte {at}: {read:?}");
        for entry in &read.entries {
            let as_written = sound.entries.iter().find(|e| e.key == entry.key).unwrap();
            assert_eq!(entry.data.as_one(), as_written.data.as_one(), "byte {at}");
        }
    }

    // A frame's head stating MOST_BYTES + 1 (magic, a single-segment descriptor with an 8-byte
    // content size): nothing is set aside for it, and the file is larger than may be read.
    let too_much = MOST_BYTES + 1;
    let head = [&[0x28, 0xb5, 0x2f, 0xfd, 0xe0][..], &too_much.to_le_bytes()].concat();
    assert_eq!(compress::stated_len(&head), Some(too_much));
    let stating = [&MAGIC_PACKED[..], &head, &[0; 16]].concat();
    assert_eq!(unpack(stating.clone()), None);
    let path = dir.path().join("1-2-8.waiting");
    fs::write(&path, &stating).unwrap();
    assert!(read_bounded(&path).unwrap().is_none());
    assert_eq!(
        stated_unpacked_len(&path),
        Some(too_much),
        "as verify reports it"
    );
    // The longest head a frame may have (a window byte, a 4-byte dictionary ID, an 8-byte
    // content size: 18 bytes), and nothing after it, is read whole.
    let longest = [
        &[0x28, 0xb5, 0x2f, 0xfd, 0xc3, 0x50, 1, 2, 3, 4][..],
        &too_much.to_le_bytes(),
    ]
    .concat();
    assert_eq!(longest.len(), compress::FRAME_HEAD_MAX);
    let stating_longest = dir.path().join("1-4-8.waiting");
    fs::write(&stating_longest, [&MAGIC_PACKED[..], &longest].concat()).unwrap();
    assert_eq!(
        stated_unpacked_len(&stating_longest),
        Some(too_much),
        "its head read whole"
    );
    let unpacked = dir.path().join("1-3-8.waiting");
    fs::write(&unpacked, &sound_bytes).unwrap();
    assert_eq!(stated_unpacked_len(&unpacked), None, "not packed");
    assert!(
        read_whole(&path).is_err() && !path.exists(),
        "removed unread"
    );
}
