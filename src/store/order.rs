//! The last run's order of use: `use-order` in an identity directory, the keys of the entries a
//! run found or wrote, first used first. The next run reads ahead in that order from the moment
//! its store opens, with no listing and no stat of every entry (the bound's listing, which the
//! stamps' order needs, took 1-11 ms for 600-3,115 entries on the project's machine, and reading
//! ahead waited for it). A hint only: a missing or damaged file costs the earlier start and
//! nothing else (reading ahead then follows the bound's listing, as it did before the file).
//!
//! | offset | bytes | field |
//! | --- | --- | --- |
//! | 0 | 8 | magic `PKUSEORD` |
//! | 8 | 4 | version, 1 (u32 little-endian) |
//! | 12 | 4 | count of keys (u32 little-endian), at most [`MOST_KEYS`] |
//! | 16 | 32 x count | keys: SPIR-V digest (16 bytes), then state digest (16) |
//! | 16 + 32 x count | 32 | BLAKE3 of every byte before it |
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use crate::key::PipelineKey;

/// The file's name in an identity directory.
pub const USE_ORDER: &str = "use-order";

/// The most keys a use order holds (a file of 32 MiB): past it, the last used are left out.
pub const MOST_KEYS: usize = 1 << 20;

/// The most bytes of a use order read: one holding [`MOST_KEYS`].
pub const fn most_bytes() -> u64 {
    (HEADER_LEN + KEY_LEN * MOST_KEYS + HASH_LEN) as u64
}

const MAGIC: [u8; 8] = *b"PKUSEORD";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 16;
const KEY_LEN: usize = 32;
const HASH_LEN: usize = 32;

/// Why bytes are not a use order.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UseOrderError {
    #[error("{len} bytes, fewer than a use order's header and hash")]
    TooShort { len: usize },
    #[error("the magic is not PKUSEORD")]
    NotAUseOrder,
    #[error("version {found}, where this build reads {VERSION}")]
    Version { found: u32 },
    #[error("{count} keys, more than {MOST_KEYS}")]
    TooManyKeys { count: usize },
    #[error("{count} keys make {expected} bytes, the file has {len}")]
    Length {
        count: usize,
        expected: usize,
        len: usize,
    },
    #[error("its BLAKE3 hash does not match its bytes")]
    Hash,
}

/// Why a use order on disk cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{source}")]
    Damaged {
        path: PathBuf,
        source: UseOrderError,
    },
}

/// The keys of the use order at `path`, checked whole (at most [`most_bytes`] read, never
/// through a link); `Ok(None)` where there is none.
pub fn read(path: &Path) -> Result<Option<Vec<PipelineKey>>, ReadError> {
    let bytes = match super::files::read_at_most(path, most_bytes()) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ReadError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    decode(&bytes)
        .map(Some)
        .map_err(|source| ReadError::Damaged {
            path: path.to_path_buf(),
            source,
        })
}

/// The file's bytes for `keys` (the first [`MOST_KEYS`] of them).
pub fn encode(keys: &[PipelineKey]) -> Vec<u8> {
    let keys = &keys[..keys.len().min(MOST_KEYS)];
    let mut out = Vec::with_capacity(HEADER_LEN + KEY_LEN * keys.len() + HASH_LEN);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(keys.len() as u32).to_le_bytes());
    for key in keys {
        out.extend_from_slice(&key.spirv);
        out.extend_from_slice(&key.state);
    }
    let hash = blake3::hash(&out);
    out.extend_from_slice(hash.as_bytes());
    out
}

/// The keys a use order's bytes hold, checked whole.
pub fn decode(bytes: &[u8]) -> Result<Vec<PipelineKey>, UseOrderError> {
    let len = bytes.len();
    if len < HEADER_LEN + HASH_LEN {
        return Err(UseOrderError::TooShort { len });
    }
    if bytes[..8] != MAGIC {
        return Err(UseOrderError::NotAUseOrder);
    }
    let found = u32_at(bytes, 8);
    if found != VERSION {
        return Err(UseOrderError::Version { found });
    }
    let count = u32_at(bytes, 12) as usize;
    if count > MOST_KEYS {
        return Err(UseOrderError::TooManyKeys { count });
    }
    let expected = HEADER_LEN + KEY_LEN * count + HASH_LEN;
    if len != expected {
        return Err(UseOrderError::Length {
            count,
            expected,
            len,
        });
    }
    let (body, hash) = bytes.split_at(len - HASH_LEN);
    if blake3::hash(body).as_bytes()[..] != hash[..] {
        return Err(UseOrderError::Hash);
    }
    Ok(body[HEADER_LEN..]
        .chunks_exact(KEY_LEN)
        .map(|k| {
            let (spirv, state) = k.split_at(16);
            PipelineKey {
                spirv: spirv.try_into().expect("16 bytes"),
                state: state.try_into().expect("16 bytes"),
            }
        })
        .collect())
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// The order to remember after a run: the keys it used, first used first, then those of the
/// earlier order it did not use (a short run keeps the rest of a long one's order), leaving
/// out those the bound has shown gone (`live`, where this run's bound listed the directory;
/// what this run used it keeps, even where written after that listing).
pub fn merged(
    used: &[PipelineKey],
    earlier: &[PipelineKey],
    live: Option<&std::collections::HashSet<PipelineKey>>,
) -> Vec<PipelineKey> {
    let mut seen = std::collections::HashSet::with_capacity(used.len() + earlier.len());
    let earlier_live = earlier
        .iter()
        .filter(|k| live.is_none_or(|l| l.contains(k)));
    used.iter()
        .chain(earlier_live)
        .filter(|k| seen.insert(**k))
        .take(MOST_KEYS)
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> PipelineKey {
        PipelineKey {
            spirv: [n; 16],
            state: [n.wrapping_add(1); 16],
        }
    }

    /// If this test fails, the file's layout changed: bump [`VERSION`] (an older file is then
    /// refused, and costs only the earlier start of one run's reading ahead).
    #[test]
    fn the_layout_is_stable() {
        let bytes = encode(&[key(1)]);
        let mut expected = Vec::new();
        expected.extend_from_slice(b"PKUSEORD");
        expected.extend_from_slice(&[1, 0, 0, 0]);
        expected.extend_from_slice(&[1, 0, 0, 0]);
        expected.extend_from_slice(&[1; 16]);
        expected.extend_from_slice(&[2; 16]);
        assert_eq!(bytes[..bytes.len() - 32], expected[..]);
        assert_eq!(
            &bytes[bytes.len() - 32..],
            blake3::hash(&expected).as_bytes()
        );
        assert_eq!(bytes.len(), 16 + 32 + 32);
    }

    #[test]
    fn keys_come_back_in_their_order() {
        let keys = [key(3), key(1), key(2)];
        assert_eq!(decode(&encode(&keys)).unwrap(), keys);
        assert_eq!(decode(&encode(&[])).unwrap(), []);
    }

    #[test]
    fn damage_of_any_byte_or_length_is_refused() {
        let bytes = encode(&[key(1), key(2)]);
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(decode(&damaged).is_err(), "a flip at byte {at} was read");
        }
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "a cut at {len} was read");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }

    #[test]
    fn named_errors() {
        assert_eq!(decode(b"short"), Err(UseOrderError::TooShort { len: 5 }));
        let mut bytes = encode(&[]);
        bytes[0] = b'X';
        assert_eq!(decode(&bytes), Err(UseOrderError::NotAUseOrder));
        let mut bytes = encode(&[]);
        bytes[8] = 2;
        assert_eq!(decode(&bytes), Err(UseOrderError::Version { found: 2 }));
        let mut bytes = encode(&[]);
        bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode(&bytes),
            Err(UseOrderError::TooManyKeys { .. })
        ));
    }

    #[test]
    fn a_short_run_keeps_the_rest_of_the_earlier_order_and_the_bound_drops_the_gone() {
        let earlier = [key(1), key(2), key(3), key(4)];
        let used = [key(3), key(5)];
        assert_eq!(
            merged(&used, &earlier, None),
            [key(3), key(5), key(1), key(2), key(4)]
        );
        let live: std::collections::HashSet<_> = [key(2), key(3)].into();
        assert_eq!(
            merged(&used, &earlier, Some(&live)),
            [key(3), key(5), key(2)]
        );
    }
}
