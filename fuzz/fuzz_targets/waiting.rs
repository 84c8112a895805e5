//! A file of entries left waiting (`<pid>-<nanos>.waiting`), on any bytes: never a panic; the
//! records read lie within the file, after its head, in order; a seal that holds is of these
//! bytes alone.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::store::waiting::{head_len, parse, sealed};

fuzz_target!(|data: &[u8]| {
    let (records, whole) = parse(data);
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
