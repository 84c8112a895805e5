//! The Fossilize container reader, the payload parser, and the record's compaction on any bytes:
//! never a panic, and what a compaction keeps reads back whole.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::replay::{foz, objects::Catalog, record};

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = foz::read_entries(data) {
        let kept = record::live_part(entries.clone(), &|hash| hash % 2 == 0);
        let again = foz::read_entries(&foz::write_entries(&kept)).expect("a written database");
        assert_eq!(again.len(), kept.len());
        assert!(again.iter().all(|e| e.payload.is_ok()));
        let _ = Catalog::from_entries(entries);
    }
});
