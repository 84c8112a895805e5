//! The Fossilize container reader (damaged parts skipped to the next whole entry), the payload
//! parser, the record's compactions and the rebuild's configurations on any bytes: never a
//! panic, and what a compaction keeps reads back whole.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::replay::{foz, objects::Catalog, record};

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = foz::read_entries(data) {
        let kept = record::live_part(entries.clone(), &|hash| hash % 2 == 0);
        let again = foz::read_entries(&foz::write_entries(&kept)).expect("a written database");
        assert_eq!(again.len(), kept.len());
        assert!(again.iter().all(|e| e.payload.is_ok()));
        // What a record past its share keeps (a share from the input's length), read back
        // whole, and the configurations a rebuild makes of a record with damaged parts.
        let share = 16 + data.len() as u64 / 2;
        let within = record::within_share(entries.clone(), share, &|hash| {
            (hash % 3 == 0).then(|| std::time::UNIX_EPOCH + std::time::Duration::from_secs(hash % 1000))
        });
        let written = foz::write_entries_deflated(&within);
        assert!(foz::read_entries(&written).expect("a written database").iter().all(|e| e.payload.is_ok()));
        let _ = Catalog::from_entries(entries).configurations();
    }
});
