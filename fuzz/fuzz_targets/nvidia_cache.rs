//! NVIDIA's pipeline-cache framing on any bytes: never a panic; where it frames, the data without
//! the dictionary frames as one record fewer, carries no dictionary, and is as long as the data
//! less the dictionary's record.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipekeep::store::nvidia_cache::{frame, FramingError};

fuzz_target!(|data: &[u8]| {
    if let Ok(framing) = frame(data) {
        let without = framing.without_dictionary(data);
        assert!(without.len() < data.len());
        assert_eq!(
            data.len() - without.len(),
            60 + framing.dictionary.len as usize
        );
        assert_eq!(frame(&without[..]), Err(FramingError::NoDictionary));
        assert_eq!(without[..32], data[..32]);
    }
});
