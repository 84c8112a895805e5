//! The list of an entry's parts (the body of a format-2 entry) on any bytes: never a panic, and
//! only a whole list parses (its bytes are exactly what encoding its parts gives).
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::store::recipe;

fuzz_target!(|data: &[u8]| {
    if let Ok((len, parts)) = recipe::parse(data) {
        assert_eq!(recipe::encode(&parts), data);
        assert_eq!(parts.iter().map(|p| p.len()).sum::<u64>(), len);
    }
});
