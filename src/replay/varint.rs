//! Fossilize's SPIR-V encoding: each 32-bit word as groups of 7 bits, lowest first, the high bit
//! set on every byte but a word's last (one to five bytes a word).

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VarintError {
    #[error("a word runs past the end of its buffer")]
    PastEnd,
    #[error("a word is longer than five bytes or overflows 32 bits")]
    Overlong,
    #[error("{decoded} words decoded, {expected} expected")]
    WrongCount { decoded: usize, expected: usize },
}

/// Decodes exactly `words` words from `bytes`, which must hold nothing more.
pub fn decode(bytes: &[u8], words: usize) -> Result<Vec<u32>, VarintError> {
    let mut out = Vec::with_capacity(words.min(bytes.len()));
    let mut at = 0;
    while at < bytes.len() {
        let mut value: u64 = 0;
        let mut shift = 0;
        loop {
            let b = *bytes.get(at).ok_or(VarintError::PastEnd)?;
            at += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 28 {
                return Err(VarintError::Overlong);
            }
        }
        out.push(u32::try_from(value).map_err(|_| VarintError::Overlong)?);
        if out.len() > words {
            break;
        }
    }
    if out.len() != words {
        return Err(VarintError::WrongCount {
            decoded: out.len(),
            expected: words,
        });
    }
    Ok(out)
}

/// The inverse of [`decode`] (for tests).
pub fn encode(words: &[u32]) -> Vec<u8> {
    let mut out = Vec::new();
    for &w in words {
        let mut v = w;
        while v >= 0x80 {
            out.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        let words = [0, 1, 127, 128, 0x0723_0203, u32::MAX, 16384];
        assert_eq!(decode(&encode(&words), words.len()), Ok(words.to_vec()));
    }

    #[test]
    fn a_word_running_past_its_buffer_is_refused() {
        assert_eq!(decode(&[0x80], 1), Err(VarintError::PastEnd));
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], 1),
            Err(VarintError::Overlong)
        );
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff, 0x7f], 1),
            Err(VarintError::Overlong)
        );
        assert_eq!(
            decode(&[1, 2], 1),
            Err(VarintError::WrongCount {
                decoded: 2,
                expected: 1
            })
        );
        assert_eq!(
            decode(&[1], 2),
            Err(VarintError::WrongCount {
                decoded: 1,
                expected: 2
            })
        );
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64), n in 0usize..20) {
            let _ = decode(&bytes, n);
        }

        #[test]
        fn any_words_round_trip(words in proptest::collection::vec(proptest::num::u32::ANY, 0..64)) {
            proptest::prop_assert_eq!(decode(&encode(&words), words.len()), Ok(words));
        }
    }
}
