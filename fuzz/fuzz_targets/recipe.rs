//! The list of an entry's parts (the body of a format-2 entry), and a list piece, on any bytes:
//! never a panic, and only a whole one parses (its bytes are exactly what encoding it gives).
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::store::recipe;

fuzz_target!(|data: &[u8]| {
    if let Ok((len, parts)) = recipe::parse(data) {
        assert_eq!(recipe::encode(&parts), data);
        assert_eq!(parts.iter().map(|p| p.len()).sum::<u64>(), len);
    }
    if let Ok((refs, total)) = recipe::parse_list(data) {
        assert_eq!(recipe::encode_list(&refs), data);
        assert_eq!(refs.iter().map(|(_, l)| *l).sum::<u64>(), total);
    }
});
