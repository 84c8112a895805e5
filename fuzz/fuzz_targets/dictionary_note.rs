//! The note naming the entry that carries NVIDIA's dictionary, on any bytes: never a panic; a
//! note that names an entry is named again by that entry's own file name, with or without a
//! newline.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::store::entry_in_note;

fuzz_target!(|data: &[u8]| {
    if let Some(key) = entry_in_note(data) {
        let name = key.file_name();
        assert_eq!(entry_in_note(name.as_bytes()), Some(key));
        assert_eq!(entry_in_note(format!("{name}\n").as_bytes()), Some(key));
    }
});
