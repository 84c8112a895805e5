//! The payload of a `binary` entry: a pipeline's binaries in the driver's order, each with its
//! key (`VK_KHR_pipeline_binary`), and the driver's key for the create info they were built from
//! (`vkGetPipelineKeyKHR`), checked whole before the driver sees a byte.
//!
//! ```text
//! [u32 0 | u32 driver key size (1 ..= 32) | 32 bytes of driver key, zero past its size]   where the driver gave one
//! u32 count (1 ..= MAX_BINARIES)
//! count times: u32 key size (1 ..= 32) | 32 bytes of key, zero past its size | u64 data length n (>= 1) | n bytes of data
//! ```
//! Little-endian; the payload ends exactly where the last binary's data does. A count is never 0,
//! so a leading 0 says the driver's key comes first; a payload without it (NVIDIA's driver is
//! never asked for keys) is read as ever.

use super::layout::EntryError;

/// The most binaries one pipeline may carry (NVIDIA gives two, RADV one a pipeline).
pub const MAX_BINARIES: usize = 64;
/// `VK_MAX_PIPELINE_BINARY_KEY_SIZE_KHR`, for binaries' keys and the driver's key alike.
pub const KEY_BYTES: usize = 32;

/// One binary of a pipeline: the driver's key and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary<'a> {
    pub key: &'a [u8],
    pub data: &'a [u8],
}

/// A payload as read: the driver's key for the pipeline's create info (empty where it gave
/// none) and the binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries<'a> {
    pub driver_key: &'a [u8],
    pub binaries: Vec<Binary<'a>>,
}

/// A key's size and its bytes, zero past its size.
fn put_key(out: &mut Vec<u8>, key: &[u8]) {
    let size = key.len().min(KEY_BYTES);
    out.extend_from_slice(&(size as u32).to_le_bytes());
    let mut padded = [0u8; KEY_BYTES];
    padded[..size].copy_from_slice(&key[..size]);
    out.extend_from_slice(&padded);
}

/// The payload for `binaries` (each key 1 to 32 bytes, each data non-empty) built from a create
/// info whose driver key is `driver_key` (empty where the driver gave none).
pub fn encode<'a>(
    driver_key: &[u8],
    binaries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Vec<u8> {
    let mut out = Vec::new();
    if !driver_key.is_empty() {
        out.extend_from_slice(&0u32.to_le_bytes());
        put_key(&mut out, driver_key);
    }
    let count_at = out.len();
    out.extend_from_slice(&[0; 4]);
    let mut count = 0u32;
    for (key, data) in binaries {
        count += 1;
        put_key(&mut out, key);
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(data);
    }
    out[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
    out
}

const BAD: fn(&'static str) -> EntryError = |what| EntryError::Corrupt { what };

/// A cursor over a payload: each read within it, or the payload is cut short.
struct Reader<'a> {
    payload: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], EntryError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.payload.len());
        let end = end.ok_or(BAD("binaries cut short"))?;
        let bytes = &self.payload[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn u32(&mut self) -> Result<u32, EntryError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// A key's size (1 to 32) and its bytes.
    fn key(&mut self, what: &'static str) -> Result<&'a [u8], EntryError> {
        let size = self.u32()? as usize;
        if size == 0 || size > KEY_BYTES {
            return Err(BAD(what));
        }
        Ok(&self.take(KEY_BYTES)?[..size])
    }
}

/// Reads a payload whole: every count, size and length in range, nothing left over.
pub fn parse(payload: &[u8]) -> Result<Binaries<'_>, EntryError> {
    let mut r = Reader { payload, at: 0 };
    let mut count = r.u32()? as usize;
    let mut driver_key: &[u8] = &[];
    if count == 0 {
        driver_key = r.key("driver key size")?;
        count = r.u32()? as usize;
    }
    if count == 0 || count > MAX_BINARIES {
        return Err(BAD("binary count"));
    }
    let mut binaries = Vec::with_capacity(count);
    for _ in 0..count {
        let key = r.key("binary key size")?;
        let len = u64::from_le_bytes(r.take(8)?.try_into().expect("8 bytes"));
        let len = usize::try_from(len).map_err(|_| BAD("binary length"))?;
        if len == 0 {
            return Err(BAD("binary length"));
        }
        binaries.push(Binary {
            key,
            data: r.take(len)?,
        });
    }
    if r.at != payload.len() {
        return Err(BAD("bytes after the last binary"));
    }
    Ok(Binaries {
        driver_key,
        binaries,
    })
}

/// Where each binary's data stands in a payload that parses whole.
pub fn data_ranges(payload: &[u8]) -> Result<Vec<std::ops::Range<usize>>, EntryError> {
    let base = payload.as_ptr() as usize;
    Ok(parse(payload)?
        .binaries
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
        let bytes = encode(&[], [(&[0xab, 0xcd][..], &[1, 2, 3][..])]);
        let mut want = vec![1, 0, 0, 0, 2, 0, 0, 0, 0xab, 0xcd];
        want.extend_from_slice(&[0; 30]);
        want.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3]);
        assert_eq!(bytes, want);
        let binaries = vec![Binary {
            key: &[0xab, 0xcd],
            data: &[1, 2, 3],
        }];
        assert_eq!(
            parse(&bytes).unwrap(),
            Binaries {
                driver_key: &[],
                binaries: binaries.clone()
            }
        );
        // With the driver's key: a 0 where the count stood, the key, then as without.
        let with_key = encode(&[0x5a; 3], [(&[0xab, 0xcd][..], &[1, 2, 3][..])]);
        let mut want_with = vec![0, 0, 0, 0, 3, 0, 0, 0, 0x5a, 0x5a, 0x5a];
        want_with.extend_from_slice(&[0; 29]);
        want_with.extend_from_slice(&want);
        assert_eq!(with_key, want_with);
        assert_eq!(
            parse(&with_key).unwrap(),
            Binaries {
                driver_key: &[0x5a; 3],
                binaries
            }
        );
    }

    #[test]
    fn every_cut_and_every_bad_field_is_refused() {
        let key = [7u8; 32];
        let bytes = encode(
            &[],
            [(&key[..], &[9u8; 40][..]), (&key[..4], &[8u8; 5][..])],
        );
        assert_eq!(parse(&bytes).unwrap().binaries.len(), 2);
        for cut in 0..bytes.len() {
            assert!(parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(parse(&long).is_err());
        for (at, value) in [(0, 65u32), (4, 0), (4, 33)] {
            let mut bad = bytes.clone();
            bad[at..at + 4].copy_from_slice(&value.to_le_bytes());
            assert!(parse(&bad).is_err(), "field at {at} = {value}");
        }
        let mut zero_len = encode(&[], [(&key[..], &[1u8][..])]);
        zero_len[40..48].copy_from_slice(&0u64.to_le_bytes());
        assert!(parse(&zero_len[..48]).is_err());
        // The driver's key: cut anywhere, of size 0 or over 32, or followed by a count of 0.
        let keyed = encode(&key[..20], [(&key[..], &[9u8; 40][..])]);
        assert_eq!(parse(&keyed).unwrap().driver_key, &key[..20]);
        for cut in 0..keyed.len() {
            assert!(parse(&keyed[..cut]).is_err(), "cut at {cut}");
        }
        for (at, value) in [(4, 0u32), (4, 33), (40, 0), (40, 65)] {
            let mut bad = keyed.clone();
            bad[at..at + 4].copy_from_slice(&value.to_le_bytes());
            assert!(parse(&bad).is_err(), "field at {at} = {value}");
        }
    }
}
