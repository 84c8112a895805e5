//! A file of entries left waiting, of any bytes, checked as an opening takes it (unpacked where
//! packed, its records parsed, its own pieces checked against their names, each entry's envelope
//! decoded and the pieces it names found in the file or the store's, none here): never a panic;
//! every entry found is one of the file's records, and every bad record or piece is one of its
//! places.
#![no_main]
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use pipekeep::store::pieces::Pieces;
use pipekeep::store::waiting::{check_file, parse, parse_all, unpack};
use pipekeep::store::Identity;

const ID: Identity = Identity { vendor_id: 0x10de, device_id: 0x2335, driver_version: 7, cache_uuid: [1; 16], abi: 8 };

fuzz_target!(|data: &[u8]| {
    let Some(file) = unpack(data.to_vec()) else {
        return; // stands for more than a waiting file may be: not read
    };
    let data = &file[..];
    let pieces = Pieces::for_looking(std::path::Path::new("/nonexistent-pipekeep-fuzz"));
    let checked = check_file(Arc::new(data.to_vec()), &ID, &pieces);
    let (entries, whole) = parse(data);
    let (all, _) = parse_all(data);
    assert_eq!(checked.whole, whole);
    assert_eq!(checked.entries.len() + checked.bad.len(), entries.len());
    assert!(checked.bad.iter().all(|b| b.at < entries.len()));
    assert!(checked.bad_pieces.len() <= all.iter().filter(|r| r.piece).count());
    let sound = entries.iter().enumerate().filter(|(at, _)| !checked.bad.iter().any(|b| b.at == *at));
    for (found, (_, record)) in checked.entries.iter().zip(sound) {
        assert_eq!(found.key, record.key);
    }
});
