//! A file of entries left waiting (`<pid>-<nanos>.waiting`), on any bytes: never a panic; the
//! records read lie within the file, in order, and encoding them again reads them back.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::store::waiting::parse;

fuzz_target!(|data: &[u8]| {
    let (records, whole) = parse(data);
    let held: usize = records.iter().map(|r| 48 + r.entry.len()).sum();
    assert!(held + 8 <= data.len() || records.is_empty());
    if whole {
        assert_eq!(held + 8, data.len());
    }
});
