//! The title's module-identifier file (`module-identifiers.bin`), on any bytes: never a panic;
//! every record it reads is one that encodes to the bytes it was read from.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::store::identifiers::{encode, parse, HEADER_LEN, RECORD_LEN};

fuzz_target!(|data: &[u8]| {
    if let Some(parsed) = parse(data) {
        let records = data.len().saturating_sub(HEADER_LEN) / RECORD_LEN;
        assert!(parsed.known.len() <= records);
        for k in &parsed.known {
            let bytes = encode(k).expect("a record read encodes");
            assert!(data[HEADER_LEN..].chunks_exact(RECORD_LEN).any(|r| r == bytes));
        }
    }
});
