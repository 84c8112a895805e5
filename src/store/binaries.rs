//! The payload of a `binary` entry: a pipeline's binaries in the driver's order, each with its
//! key (`VK_KHR_pipeline_binary`), checked whole before the driver sees a byte.
//!
//! ```text
//! u32 count (1 ..= MAX_BINARIES)
//! count times: u32 key size (1 ..= 32) | 32 bytes of key, zero past its size | u64 data length n (>= 1) | n bytes of data
//! ```
//! Little-endian; the payload ends exactly where the last binary's data does.

use super::layout::EntryError;

/// The most binaries one pipeline may carry (NVIDIA gives two, RADV one a pipeline).
pub const MAX_BINARIES: usize = 64;
/// `VK_MAX_PIPELINE_BINARY_KEY_SIZE_KHR`.
pub const KEY_BYTES: usize = 32;

/// One binary of a pipeline: the driver's key and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary<'a> {
    pub key: &'a [u8],
    pub data: &'a [u8],
}

/// The payload for `binaries` (each key 1 to 32 bytes, each data non-empty).
pub fn encode<'a>(binaries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut out = vec![0; 4];
    let mut count = 0u32;
    for (key, data) in binaries {
        count += 1;
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        let mut padded = [0u8; KEY_BYTES];
        padded[..key.len().min(KEY_BYTES)].copy_from_slice(&key[..key.len().min(KEY_BYTES)]);
        out.extend_from_slice(&padded);
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(data);
    }
    out[..4].copy_from_slice(&count.to_le_bytes());
    out
}

const BAD: fn(&'static str) -> EntryError = |what| EntryError::Corrupt { what };

/// Reads a payload whole: every count, size and length in range, nothing left over.
pub fn parse(payload: &[u8]) -> Result<Vec<Binary<'_>>, EntryError> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], EntryError> {
        let end = at.checked_add(n).filter(|e| *e <= payload.len());
        let end = end.ok_or(BAD("binaries cut short"))?;
        let bytes = &payload[at..end];
        at = end;
        Ok(bytes)
    };
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    let count = u32_of(take(4)?) as usize;
    if count == 0 || count > MAX_BINARIES {
        return Err(BAD("binary count"));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let key_size = u32_of(take(4)?) as usize;
        if key_size == 0 || key_size > KEY_BYTES {
            return Err(BAD("binary key size"));
        }
        let key = &take(KEY_BYTES)?[..key_size];
        let len = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
        let len = usize::try_from(len).map_err(|_| BAD("binary length"))?;
        if len == 0 {
            return Err(BAD("binary length"));
        }
        out.push(Binary {
            key,
            data: take(len)?,
        });
    }
    if at != payload.len() {
        return Err(BAD("bytes after the last binary"));
    }
    Ok(out)
}

/// Where each binary's data stands in a payload that parses whole.
pub fn data_ranges(payload: &[u8]) -> Result<Vec<std::ops::Range<usize>>, EntryError> {
    let base = payload.as_ptr() as usize;
    Ok(parse(payload)?
        .iter()
        .map(|b| {
            let start = b.data.as_ptr() as usize - base;
            start..start + b.data.len()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    // If this golden test fails, the bytes on disk changed: bump the envelope's FORMAT_VERSION.
    #[test]
    fn golden_binaries_bytes_if_this_fails_bump_the_format() {
        let bytes = encode([(&[0xab, 0xcd][..], &[1, 2, 3][..])]);
        let mut want = vec![1, 0, 0, 0, 2, 0, 0, 0, 0xab, 0xcd];
        want.extend_from_slice(&[0; 30]);
        want.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3]);
        assert_eq!(bytes, want);
        assert_eq!(
            parse(&bytes).unwrap(),
            vec![Binary {
                key: &[0xab, 0xcd],
                data: &[1, 2, 3]
            }]
        );
    }

    #[test]
    fn every_cut_and_every_bad_field_is_refused() {
        let key = [7u8; 32];
        let bytes = encode([(&key[..], &[9u8; 40][..]), (&key[..4], &[8u8; 5][..])]);
        assert_eq!(parse(&bytes).unwrap().len(), 2);
        for cut in 0..bytes.len() {
            assert!(parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(parse(&long).is_err());
        for (at, value) in [(0, 0u8), (0, 65), (4, 0), (4, 33)] {
            let mut bad = bytes.clone();
            bad[at..at + 4].copy_from_slice(&u32::from(value).to_le_bytes());
            assert!(parse(&bad).is_err(), "field at {at} = {value}");
        }
        let mut zero_len = encode([(&key[..], &[1u8][..])]);
        zero_len[40..48].copy_from_slice(&0u64.to_le_bytes());
        assert!(parse(&zero_len[..48]).is_err());
    }
}
