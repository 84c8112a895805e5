//! The list of an entry's parts (the body of formats 2 and 3, packed parts among them), its
//! expansion, and a list piece, on any bytes: never a panic, only a whole one parses (its bytes
//! are exactly what encoding it gives), and a body expands only to the length its parts state.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::store::recipe;

fuzz_target!(|data: &[u8]| {
    if let Ok((len, parts)) = recipe::parse(data) {
        assert_eq!(recipe::encode(&parts), data);
        assert_eq!(parts.iter().map(|p| p.len()).sum::<u64>(), len);
    }
    if let Ok((len, parts)) = recipe::parse_as(data, recipe::Parts::Packed) {
        assert_eq!(recipe::encode(&parts), data);
        assert_eq!(parts.iter().map(|p| p.len()).sum::<u64>(), len);
        if let Ok(expanded) = recipe::expand(&parts) {
            let (again, read) = recipe::parse(&expanded).expect("an expanded body parses");
            assert_eq!((again, read.len()), (len, parts.len()));
        }
    }
    if let Ok((refs, total)) = recipe::parse_list(data) {
        assert_eq!(recipe::encode_list(&refs), data);
        assert_eq!(refs.iter().map(|(_, l)| *l).sum::<u64>(), total);
    }
});
