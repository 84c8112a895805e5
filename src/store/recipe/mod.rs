//! The body of an entry of formats 2 and 3: its payload as a list of parts, each either bytes that
//! stand in the entry or a piece named by its content ([`super::pieces`]). `docs/FORMAT.md` gives the byte table.
//!
//! ```text
//! u64 payload length | u32 part count (1 ..= MAX_PARTS) | u32 reserved (0)
//! count times: u32 part kind (0 inline, 1 piece, 2 list, 3 packed) | u32 stored length s (packed;
//!              else 0) | u64 length n (>= 1) | inline: n bytes | packed: s bytes (1 <= s < n),
//!              one zstd frame of the n bytes | piece or list: 32 bytes, the BLAKE3 of the piece
//! ```
//! Little-endian; the lengths add up to the payload's; the body ends where the last part does.
//! A packed part (format 3 only) is an inline part compressed ([`super::compress`]): the entry's
//! data hash is of the body as it reads with every packed part written as the inline part it
//! stands for ([`expand`]), which is the body format 2 wrote for the same payload, so every check
//! is on the uncompressed bytes.
//! A list is a piece whose bytes name other pieces, in order (a list names no list):
//!
//! ```text
//! u32 count (2 ..= LIST_MAX) | u32 reserved (0) | count times: 32 bytes name | u64 length (>= 1)
//! ```
//! and its part's length is the sum of theirs. A long run of pieces is grouped into lists
//! cut where a piece's name ends in four zero bits (content-defined on the names, as the
//! chunks are on the bytes), so the run a block repeated at any offset makes is listed the same
//! way in every entry after its first cut: an entry names a block of hundreds of chunks with a
//! few lists. The rule that cuts a payload into parts is [`cut`]'s.

mod cut;

use super::layout::EntryError;
pub use cut::*;

/// The most parts one entry may list (a 16 MiB payload of 256-byte chunks).
pub const MAX_PARTS: usize = 1 << 16;
/// The most pieces one list names.
pub const LIST_MAX: usize = 64;
const LIST_HEAD_LEN: usize = 8;
const LIST_REF_LEN: usize = 40;

const HEAD_LEN: usize = 16;
const PART_HEAD_LEN: usize = 16;
const INLINE: u32 = 0;
const PIECE: u32 = 1;
const LIST: u32 = 2;
const PACKED: u32 = 3;

/// Which parts a body may hold: format 2's (inline bytes, pieces and lists), or format 3's,
/// inline bytes packed too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parts {
    AsIs,
    Packed,
}

/// A piece's name: the BLAKE3 of its bytes.
pub type PieceName = [u8; 32];

/// The name of a piece (or a list) of `bytes`: their BLAKE3, as a piece's file is named and
/// checked by.
pub fn piece_name(bytes: &[u8]) -> PieceName {
    *blake3::hash(bytes).as_bytes()
}

/// One part of a payload as an entry lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part<'a> {
    /// Bytes standing in the entry.
    Inline(&'a [u8]),
    /// A piece, by name and length.
    Piece { name: PieceName, len: u64 },
    /// A list of pieces, by the list's name, and the length of the bytes its pieces hold.
    List { name: PieceName, len: u64 },
    /// Bytes standing in the entry compressed: one zstd frame of `len` bytes (format 3).
    Packed { frame: &'a [u8], len: u64 },
}

impl Part<'_> {
    pub fn len(&self) -> u64 {
        match self {
            Part::Inline(b) => b.len() as u64,
            Part::Piece { len, .. } | Part::List { len, .. } | Part::Packed { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The body listing `parts`, each as it is given.
pub fn encode(parts: &[Part<'_>]) -> Vec<u8> {
    let stored: usize = parts
        .iter()
        .map(|p| match p {
            Part::Inline(b) => b.len(),
            Part::Packed { frame, .. } => frame.len(),
            Part::Piece { .. } | Part::List { .. } => 32,
        })
        .sum();
    let mut out = Vec::with_capacity(HEAD_LEN + parts.len() * PART_HEAD_LEN + stored);
    encode_onto(parts, &mut out);
    out
}

fn encode_onto(parts: &[Part<'_>], out: &mut Vec<u8>) {
    encode_head(parts, out);
    for part in parts {
        encode_onto_part(part, out);
    }
}

fn encode_onto_part(part: &Part<'_>, out: &mut Vec<u8>) {
    let (kind, word, len) = match part {
        Part::Inline(b) => (INLINE, 0, b.len() as u64),
        Part::Piece { len, .. } => (PIECE, 0, *len),
        Part::List { len, .. } => (LIST, 0, *len),
        Part::Packed { frame, len } => (PACKED, frame.len() as u32, *len),
    };
    encode_part_head(kind, word, len, out);
    match part {
        Part::Inline(b) => out.extend_from_slice(b),
        Part::Packed { frame, .. } => out.extend_from_slice(frame),
        Part::Piece { name, .. } | Part::List { name, .. } => out.extend_from_slice(name),
    }
}

fn encode_head(parts: &[Part<'_>], out: &mut Vec<u8>) {
    let payload_len: u64 = parts.iter().map(Part::len).sum();
    out.extend_from_slice(&payload_len.to_le_bytes());
    out.extend_from_slice(&(parts.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
}

fn encode_part_head(kind: u32, word: u32, len: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&word.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
}

/// The body of format 3 listing `parts`: each inline part packed where compressing it pays
/// ([`super::compress`]), the others as they are. `None` where no part pays: the body is then
/// [`encode`]'s.
pub fn encode_packed(parts: &[Part<'_>]) -> Option<Vec<u8>> {
    let frames: Vec<Option<Vec<u8>>> = parts
        .iter()
        .map(|p| match p {
            Part::Inline(b) => super::compress::compress(b, 0),
            _ => None,
        })
        .collect();
    if frames.iter().all(Option::is_none) {
        return None;
    }
    let packed: Vec<Part<'_>> = parts
        .iter()
        .zip(&frames)
        .map(|(part, frame)| match (part, frame) {
            (Part::Inline(b), Some(frame)) => Part::Packed {
                frame,
                len: b.len() as u64,
            },
            (part, _) => *part,
        })
        .collect();
    Some(encode(&packed))
}

const BAD: fn(&'static str) -> EntryError = |what| EntryError::Corrupt { what };

/// Reads a body of format 2 (or one of format 3 as it reads expanded, [`expand`]) whole: every
/// count, kind and length in range, the lengths adding up to the payload's, nothing left over.
/// Returns the payload's length and its parts.
pub fn parse(body: &[u8]) -> Result<(u64, Vec<Part<'_>>), EntryError> {
    parse_as(body, Parts::AsIs)
}

/// The most bytes a payload may hold, whatever parts make it up: what an entry standing whole may
/// hold. An entry naming one piece many times (each part up to 256 MiB) could otherwise claim
/// terabytes from a few bytes on disk, and its reading exhaust memory.
pub const PAYLOAD_LIMIT: u64 = super::files::ENTRY_FILE_LIMIT;

/// [`parse`] for a body holding `which` parts: packed parts are read (their frames not yet
/// decompressed: [`expand`]) only in a body of format 3. A payload past [`PAYLOAD_LIMIT`] is
/// refused as soon as its parts' lengths pass it.
pub fn parse_as(body: &[u8], which: Parts) -> Result<(u64, Vec<Part<'_>>), EntryError> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], EntryError> {
        let end = at.checked_add(n).filter(|e| *e <= body.len());
        let bytes = &body[at..end.ok_or(BAD("parts cut short"))?];
        at += n;
        Ok(bytes)
    };
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let payload_len = u64_of(take(8)?);
    let count = u32_of(take(4)?) as usize;
    if count == 0 || count > MAX_PARTS {
        return Err(BAD("part count"));
    }
    if u32_of(take(4)?) != 0 {
        return Err(BAD("reserved word"));
    }
    let mut parts = Vec::with_capacity(count);
    let mut sum = 0u64;
    for _ in 0..count {
        let head: &[u8; PART_HEAD_LEN] = take(PART_HEAD_LEN)?.try_into().expect("16 bytes");
        let (kind, stored, len) = part_head(head, which)?;
        sum = sum.saturating_add(len);
        if sum > PAYLOAD_LIMIT {
            return Err(BAD("payload length"));
        }
        parts.push(match kind {
            INLINE => Part::Inline(take(len as usize)?),
            PACKED => Part::Packed {
                frame: take(stored as usize)?,
                len,
            },
            PIECE => Part::Piece {
                name: take(32)?.try_into().expect("32 bytes"),
                len,
            },
            LIST => Part::List {
                name: take(32)?.try_into().expect("32 bytes"),
                len,
            },
            _ => unreachable!("part_head checked the kind"),
        });
    }
    if at != body.len() {
        return Err(BAD("bytes after the last part"));
    }
    if sum != payload_len {
        return Err(BAD("parts' lengths"));
    }
    Ok((payload_len, parts))
}

/// The pieces and lists (`true`) a body of `body_len` bytes holding `which` parts names, in
/// order, read through `read(at, buf)` (fills `buf` with the body's bytes from `at`; false where
/// it cannot) without its inline bytes, packed or not: only the heads of its parts and the names
/// are read, each count, kind and length checked as [`parse_as`] checks them. For the bound,
/// which asks what every entry names and never needs a payload.
pub fn names_in(
    body_len: u64,
    which: Parts,
    read: &mut dyn FnMut(u64, &mut [u8]) -> bool,
) -> Result<Vec<(PieceName, bool)>, EntryError> {
    let mut head = [0u8; HEAD_LEN];
    if !read(0, &mut head) {
        return Err(BAD("parts cut short"));
    }
    let payload_len = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
    let count = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes")) as usize;
    if count == 0 || count > MAX_PARTS {
        return Err(BAD("part count"));
    }
    if head[12..] != [0; 4] {
        return Err(BAD("reserved word"));
    }
    let (mut at, mut sum) = (HEAD_LEN as u64, 0u64);
    let mut names = Vec::new();
    for _ in 0..count {
        let mut part = [0u8; PART_HEAD_LEN];
        if !read(at, &mut part) {
            return Err(BAD("parts cut short"));
        }
        let (kind, stored, len) = part_head(&part, which)?;
        sum = sum.saturating_add(len);
        if sum > PAYLOAD_LIMIT {
            return Err(BAD("payload length"));
        }
        at += PART_HEAD_LEN as u64;
        if kind == INLINE {
            at = at.saturating_add(len);
        } else if kind == PACKED {
            at = at.saturating_add(stored.into());
        } else {
            let mut name = [0u8; 32];
            if !read(at, &mut name) {
                return Err(BAD("parts cut short"));
            }
            names.push((name, kind == LIST));
            at += 32;
        }
        if at > body_len {
            return Err(BAD("parts cut short"));
        }
    }
    if at != body_len {
        return Err(BAD("bytes after the last part"));
    }
    if sum != payload_len {
        return Err(BAD("parts' lengths"));
    }
    Ok(names)
}

/// A part's kind, stored length (a packed part's; 0 for any other) and length from its head,
/// checked.
fn part_head(part: &[u8; PART_HEAD_LEN], which: Parts) -> Result<(u32, u32, u64), EntryError> {
    let kind = u32::from_le_bytes(part[..4].try_into().expect("4 bytes"));
    let stored = u32::from_le_bytes(part[4..8].try_into().expect("4 bytes"));
    let len = u64::from_le_bytes(part[8..].try_into().expect("8 bytes"));
    if len == 0 || len > super::files::ENTRY_FILE_LIMIT {
        return Err(BAD("part length"));
    }
    let kinds: &[u32] = match which {
        Parts::AsIs => &[INLINE, PIECE, LIST],
        Parts::Packed => &[INLINE, PIECE, LIST, PACKED],
    };
    if !kinds.contains(&kind) {
        return Err(BAD("part kind"));
    }
    // A packed part is smaller than the bytes it stands for (else it would stand as it is).
    let stored_ok = match kind {
        PACKED => stored > 0 && u64::from(stored) < len,
        _ => stored == 0,
    };
    if !stored_ok {
        return Err(BAD("stored length"));
    }
    Ok((kind, stored, len))
}

/// The body `parts` (as [`parse_as`] read them from a body of format 3) read as it is when
/// expanded: each packed part written as the inline part it stands for, its frame decompressed
/// into exactly its length. This is the body format 2 wrote for the same payload, and the bytes
/// the entry's data hash is of. Its length is known from the parts' heads before anything is
/// decompressed, and refused past [`super::files::ENTRY_FILE_LIMIT`]: a few bytes of frame never
/// make more than an entry may hold. Room for it is taken only once every frame's own head
/// states its part's length.
pub fn expand(parts: &[Part<'_>]) -> Result<Vec<u8>, EntryError> {
    let expanded = parts.iter().try_fold(HEAD_LEN as u64, |n, p| {
        let bytes = match p {
            Part::Inline(_) | Part::Packed { .. } => p.len(),
            Part::Piece { .. } | Part::List { .. } => 32,
        };
        Some(n + PART_HEAD_LEN as u64 + bytes).filter(|n| *n <= super::files::ENTRY_FILE_LIMIT)
    });
    let expanded = expanded.ok_or(BAD("expands past an entry's limit"))?;
    // Every frame's head states its part's length before any room is taken for them.
    for part in parts {
        if let Part::Packed { frame, len } = part {
            super::compress::check_frame(frame, *len as usize)
                .map_err(|_| BAD("a packed part does not decompress to its length"))?;
        }
    }
    let mut out = Vec::with_capacity(expanded as usize);
    encode_head(parts, &mut out);
    for part in parts {
        match part {
            Part::Packed { frame, len } => {
                encode_part_head(INLINE, 0, *len, &mut out);
                super::compress::decompress_onto(frame, *len as usize, &mut out)
                    .map_err(|_| BAD("a packed part does not decompress to its length"))?;
            }
            part => encode_onto_part(part, &mut out),
        }
    }
    debug_assert_eq!(out.len() as u64, expanded);
    Ok(out)
}

/// A list's bytes: the pieces it names, in order.
pub fn encode_list(refs: &[(PieceName, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(LIST_HEAD_LEN + refs.len() * LIST_REF_LEN);
    out.extend_from_slice(&(refs.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    for (name, len) in refs {
        out.extend_from_slice(name);
        out.extend_from_slice(&len.to_le_bytes());
    }
    out
}

/// Reads a list's bytes whole: the pieces it names (each at least a byte), and the length they
/// hold together.
pub fn parse_list(bytes: &[u8]) -> Result<(Vec<(PieceName, u64)>, u64), EntryError> {
    let head = bytes.get(..LIST_HEAD_LEN).ok_or(BAD("list cut short"))?;
    let count = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
    if !(2..=LIST_MAX).contains(&count) || head[4..] != [0; 4] {
        return Err(BAD("list head"));
    }
    if bytes.len() != LIST_HEAD_LEN + count * LIST_REF_LEN {
        return Err(BAD("list length"));
    }
    let mut total = 0u64;
    let refs = bytes[LIST_HEAD_LEN..]
        .chunks_exact(LIST_REF_LEN)
        .map(|r| {
            let len = u64::from_le_bytes(r[32..].try_into().expect("8 bytes"));
            total = total.saturating_add(len);
            (r[..32].try_into().expect("32 bytes"), len)
        })
        .collect::<Vec<(PieceName, u64)>>();
    if refs
        .iter()
        .any(|(_, len)| *len == 0 || *len > super::files::ENTRY_FILE_LIMIT)
    {
        return Err(BAD("listed length"));
    }
    Ok((refs, total))
}

/// How many pieces a list already read whole ([`parse_list`]) names.
pub fn list_len(bytes: &[u8]) -> usize {
    (bytes.len().saturating_sub(LIST_HEAD_LEN)) / LIST_REF_LEN
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // If this golden test fails, the bytes on disk changed: bump the envelope's FORMAT_VERSION.
    #[test]
    fn golden_body_bytes_if_this_fails_bump_the_format() {
        let body = encode(&[
            Part::Inline(&[0xaa, 0xbb]),
            Part::Piece {
                name: [0x5c; 32],
                len: 300,
            },
        ]);
        let mut want = vec![46, 1, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0];
        want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb]);
        want.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 44, 1, 0, 0, 0, 0, 0, 0]);
        want.extend_from_slice(&[0x5c; 32]);
        assert_eq!(body, want);
        let (len, parts) = parse(&body).unwrap();
        assert_eq!(len, 302);
        assert_eq!(
            parts,
            vec![
                Part::Inline(&[0xaa, 0xbb]),
                Part::Piece {
                    name: [0x5c; 32],
                    len: 300
                }
            ]
        );
    }

    #[test]
    fn every_cut_and_every_bad_field_is_refused() {
        let body = encode(&[
            Part::Inline(&[1; 20]),
            Part::Piece {
                name: [3; 32],
                len: 9,
            },
        ]);
        for (what, bad) in damaged(&body) {
            assert!(parse(&bad).is_err(), "{what}");
        }
        let mut zero_count = body.clone();
        zero_count[8] = 0;
        assert!(parse(&zero_count).is_err());
    }

    /// `body` damaged every way a parser must refuse: cut at each byte, one byte too long, and
    /// each head field flipped (payload length, count, reserved, a part's kind, its reserved
    /// word, its length).
    fn damaged(body: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut all: Vec<(String, Vec<u8>)> = (0..body.len())
            .map(|cut| (format!("cut at {cut}"), body[..cut].to_vec()))
            .collect();
        all.push(("one byte too long".into(), [body, &[0]].concat()));
        for at in [0usize, 8, 12, 16, 20, 24] {
            let mut bad = body.to_vec();
            bad[at] ^= 0x40;
            all.push((format!("field at {at}"), bad));
        }
        all
    }

    /// `names_in` over a body in memory.
    fn names_of(body: &[u8]) -> Result<Vec<(PieceName, bool)>, EntryError> {
        names_of_as(body, Parts::AsIs)
    }

    fn names_of_as(body: &[u8], which: Parts) -> Result<Vec<(PieceName, bool)>, EntryError> {
        names_in(body.len() as u64, which, &mut |at, buf| {
            let at = at as usize;
            body.get(at..at + buf.len())
                .map(|b| buf.copy_from_slice(b))
                .is_some()
        })
    }

    #[test]
    fn the_names_a_body_lists_are_read_from_its_heads_as_parse_reads_them() {
        let body = encode(&[
            Part::Inline(&[1; 20]),
            Part::Piece {
                name: [3; 32],
                len: 9,
            },
            Part::Inline(&[2; 7]),
            Part::List {
                name: [4; 32],
                len: 90,
            },
        ]);
        assert_eq!(
            names_of(&body).unwrap(),
            vec![([3; 32], false), ([4; 32], true)]
        );
        assert_eq!(
            names_of(&encode(&[Part::Inline(&[5; 300])])).unwrap(),
            vec![]
        );
        // Whatever `parse` refuses, so does the walk over the heads.
        for (what, bad) in damaged(&body) {
            assert!(names_of(&bad).is_err(), "{what}");
            assert!(parse(&bad).is_err(), "{what}");
        }
    }

    #[test]
    fn a_payload_naming_one_piece_past_the_payload_limit_is_refused_from_its_heads() {
        // Each part within its own limit; together past what an entry may hold.
        let piece = Part::Piece {
            name: [7; 32],
            len: PAYLOAD_LIMIT,
        };
        let at_the_limit = encode(&[piece]);
        assert_eq!(parse(&at_the_limit).unwrap().0, PAYLOAD_LIMIT);
        assert_eq!(names_of(&at_the_limit).unwrap(), vec![([7; 32], false)]);
        let past = encode(&[piece, piece, piece]);
        assert_eq!(parse(&past), Err(BAD("payload length")));
        assert_eq!(names_of(&past), Err(BAD("payload length")));
    }

    // If this golden test fails, the bytes on disk changed: bump the envelope's FORMAT_VERSION.
    #[test]
    fn golden_packed_body_bytes_if_this_fails_bump_the_format() {
        let frame = [0x28, 0xb5, 0x2f, 0xfd, 9, 9, 9];
        let parts = [
            Part::Packed {
                frame: &frame,
                len: 300,
            },
            Part::Piece {
                name: [0x5c; 32],
                len: 2,
            },
        ];
        let body = encode(&parts);
        let mut want = vec![46, 1, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0];
        want.extend_from_slice(&[3, 0, 0, 0, 7, 0, 0, 0, 44, 1, 0, 0, 0, 0, 0, 0]);
        want.extend_from_slice(&frame);
        want.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]);
        want.extend_from_slice(&[0x5c; 32]);
        assert_eq!(body, want);
        assert_eq!(
            parse_as(&body, Parts::Packed).unwrap(),
            (302, parts.to_vec())
        );
        assert!(parse(&body).is_err(), "format 2 holds no packed part");
        assert_eq!(
            names_of_as(&body, Parts::Packed).unwrap(),
            vec![([0x5c; 32], false)]
        );
        assert!(names_of(&body).is_err());
        // A damaged frame (these bytes are none) does not expand.
        assert!(expand(&parts).is_err());
    }

    #[test]
    fn packed_parts_expand_to_the_body_as_it_is_and_no_claim_expands_past_the_limit() {
        let code: Vec<u8> = (0..5000u32).map(|i| (i % 13) as u8).collect();
        let parts = [
            Part::Inline(&code),
            Part::List {
                name: [1; 32],
                len: 77,
            },
            Part::Inline(&[1, 2, 3]),
        ];
        let packed = encode_packed(&parts).expect("the first part shrinks");
        assert!(packed.len() < 1000, "{} bytes", packed.len());
        let (len, read) = parse_as(&packed, Parts::Packed).unwrap();
        assert_eq!(len, 5080);
        assert!(matches!(read[0], Part::Packed { len: 5000, .. }));
        assert_eq!(read[1..], parts[1..]);
        assert_eq!(expand(&read).unwrap(), encode(&parts));
        assert_eq!(
            names_of_as(&packed, Parts::Packed).unwrap(),
            vec![([1; 32], true)]
        );
        for cut in 0..packed.len() {
            assert!(
                parse_as(&packed[..cut], Parts::Packed).is_err(),
                "cut at {cut}"
            );
            assert!(names_of_as(&packed[..cut], Parts::Packed).is_err());
        }
        assert_eq!(encode_packed(&[Part::Inline(&noise(4000))]), None);
        // Parts whose lengths together pass an entry's limit are refused before any work.
        let Part::Packed { frame, .. } = read[0] else {
            unreachable!()
        };
        let claims: Vec<Part<'_>> = (0..3)
            .map(|_| Part::Packed {
                frame,
                len: super::super::files::ENTRY_FILE_LIMIT / 2,
            })
            .collect();
        assert!(expand(&claims).is_err());
    }

    /// `len` bytes with no repeat a chunker could find (xorshift).
    pub fn noise(len: usize) -> Vec<u8> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect()
    }

    #[test]
    fn a_list_is_read_whole_or_refused() {
        let bytes = encode_list(&[([1; 32], 10), ([2; 32], 20)]);
        assert_eq!(bytes.len(), 88);
        assert_eq!(
            parse_list(&bytes).unwrap(),
            (vec![([1; 32], 10), ([2; 32], 20)], 30)
        );
        for cut in 0..bytes.len() {
            assert!(parse_list(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let one = encode_list(&[([1; 32], 10)]);
        assert!(parse_list(&one).is_err(), "a list of one");
        let mut zero = bytes.clone();
        zero[40..48].copy_from_slice(&0u64.to_le_bytes());
        assert!(parse_list(&zero).is_err());
    }
}
