//! A file of entries left waiting (`<pid>-<nanos>-<abi>.waiting`), on any bytes: never a panic;
//! read as a reader takes it (a packed file unpacked: `None` past the size a waiting file may
//! be), the records read (entries' and pieces') lie within the file, after its head, in order;
//! the entries' are among them; a seal that holds is of these bytes alone.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::store::waiting::{head_len, parse, parse_all, sealed, unpack};

fuzz_target!(|data: &[u8]| {
    let Some(file) = unpack(data.to_vec()) else {
        return;
    };
    let data = &file[..];
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
