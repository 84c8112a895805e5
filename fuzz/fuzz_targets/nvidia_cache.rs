//! NVIDIA's pipeline-cache framing on any bytes: never a panic; where it frames, the data without
//! the dictionary frames as one record fewer, carries no dictionary, and is as long as the data
//! less the dictionary's record; the framing of bytes fresh from the driver (`frame_bytes`)
//! is the framing of a payload; data put together with itself frames, and is no longer than itself
//! (each record once).
#![no_main]
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use pipekeep::store::nvidia_cache::{
    frame_bytes, frame_parts, frames, merged, Framing, FramingError,
};
use pipekeep::store::payload::Payload;

fn whole(bytes: &[u8]) -> Payload {
    Payload::whole(Arc::new(bytes.to_vec()), 0..bytes.len())
}

/// A payload framed from its parts, as the store frames a found entry's.
fn frame(data: &Payload) -> Result<Framing, FramingError> {
    frame_parts(data.len(), |range, out| data.copy_range(range, out))
}

fuzz_target!(|data: &[u8]| {
    let payload = whole(data);
    let framed = frame(&payload);
    assert_eq!(
        frame_bytes(data).ok().map(|f| f.dictionary),
        framed.as_ref().ok().map(|f| f.dictionary)
    );
    let together = merged(&[data, data]);
    assert_eq!(together.is_some(), frames(data));
    if let Some(together) = together {
        assert!(frames(&together) && together.len() <= data.len());
    }
    if let Ok(framing) = framed {
        let without =
            framing.without_dictionary_parts(|range, out| payload.copy_range(range, out));
        assert!(without.len() < data.len());
        assert_eq!(
            data.len() - without.len(),
            60 + framing.dictionary.len as usize
        );
        assert_eq!(frame(&whole(&without)), Err(FramingError::NoDictionary));
        assert_eq!(without[..32], data[..32]);
    }
});
