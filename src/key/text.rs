//! The few plain facts both the keys and the store name things by: lower-case hex, and the
//! process's driver ABI. Here, under the keys, so that the store depends on the keys and never
//! the other way.

/// The ABI of this process: its pointer size in bytes (4 or 8).
pub const HOST_ABI: u32 = std::mem::size_of::<usize>() as u32;

/// `bytes` as lower-case hex digits.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = vec![0; bytes.len() * 2];
    hex_into(bytes, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Writes `bytes` as lower-case hex digits over the start of `out` (twice as long at least).
pub fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (b, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0xf)];
    }
}

/// `N` bytes from exactly `2 * N` lower-case hex digits; `None` for anything else.
pub fn from_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}
