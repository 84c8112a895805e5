//! A file of entries left waiting (`<pid>-<nanos>.waiting`), on any bytes: never a panic; a
//! packed file unpacks to no more than a waiting file may be, or to its bytes as they are; the
//! records read (entries' and pieces') lie within the file, after its head, in order; the entries'
//! are among them; a seal that holds is of these bytes alone.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::store::waiting::{head_len, parse, parse_all, sealed, unpack, MOST_BYTES};

fuzz_target!(|data: &[u8]| {
    if let Some(file) = unpack(data.to_vec()) {
        assert!(file == data || file.len() as u64 <= MOST_BYTES);
        let _ = parse_all(&file);
    }
    let (records, whole) = parse_all(data);
    let (entries, entries_whole) = parse(data);
    assert_eq!(whole, entries_whole);
    assert_eq!(entries.len(), records.iter().filter(|r| !r.piece).count());
    let held: usize = records.iter().map(|r| 48 + r.entry.len()).sum();
    let sealed = sealed(data);
    match head_len(data) {
        Some(head) => {
            assert!(held + head <= data.len());
            // A seal holds only after the magic that names it.
            assert!(!sealed || head == pipekeep::store::waiting::HEAD_LEN as usize);
            if whole {
                assert_eq!(held + head, data.len());
            }
        }
        None => assert!(records.is_empty() && !whole && !sealed),
    }
});
