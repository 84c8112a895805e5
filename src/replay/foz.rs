//! The Fossilize database container (`.foz`): a 16-byte header, then entries until the end of
//! the file, each a 40-hex-digit name (24 of tag, 16 of object hash), four little-endian words
//! (stored size, flags: 1 stored / 2 deflate, CRC-32 of the stored bytes or 0, inflated size),
//! then the stored payload (pipekeep's record deflates as Fossilize does:
//! [`write_entries_deflated`]). A last entry cut short is ignored, as Fossilize does.

use std::io::Read;

pub const MAGIC: [u8; 12] = *b"\x81FOSSILIZEDB";
/// The format version this reader knows.
pub const VERSION: u8 = 6;
pub const HEADER_LEN: usize = MAGIC.len() + 4;
const ENTRY_HEAD_LEN: usize = 40 + 16;
/// A payload larger than this is refused rather than allocated.
const MAX_PAYLOAD: u32 = 1 << 30;

/// Why a database cannot be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatabaseError {
    #[error("not a Fossilize database (bad magic)")]
    BadMagic,
    #[error("format version {0} is newer than this reader knows ({VERSION})")]
    FutureVersion(u8),
    #[error("shorter than a Fossilize header")]
    Short,
}

/// Why one entry is skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("entry name is not 40 hex digits")]
    BadName,
    #[error("stored payload's CRC-32 is {actual:08x}, the entry says {expected:08x}")]
    BadCrc { expected: u32, actual: u32 },
    #[error("unknown storage flags {0}")]
    BadFlags(u32),
    #[error("payload does not inflate: {0}")]
    Inflate(String),
    #[error("payload inflates to {actual} bytes, the entry says {expected}")]
    WrongSize { expected: u32, actual: usize },
    #[error("payload of {0} bytes is too large")]
    TooLarge(u32),
    #[error("{bytes} damaged bytes at offset {at}, skipped to the next whole entry")]
    Damaged { at: usize, bytes: usize },
}

/// One entry, inflated, or why it could not be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's 40-digit name, for messages.
    pub name: String,
    pub tag: u32,
    pub hash: u64,
    pub payload: Result<Vec<u8>, EntryError>,
}

/// Every entry of a database, in file order. Fails only when the header is wrong.
pub fn read_entries(bytes: &[u8]) -> Result<Vec<Entry>, DatabaseError> {
    read_database(bytes).map(|(entries, _)| entries)
}

/// Every entry of a database, in file order, and where the last of them ends (what follows is
/// a last entry cut short, or damage with no whole entry after it). Damaged bytes cost the
/// entries they touch and no other: where an entry's head is not whole (its name, flags or
/// length damaged) or its stored bytes fail their CRC with no entry right after them, the
/// reader looks for the next whole head after it, and the bytes between are one damaged entry
/// (named by its head where that still parses). Fails only when the header is wrong.
pub fn read_database(bytes: &[u8]) -> Result<(Vec<Entry>, usize), DatabaseError> {
    if bytes.len() < HEADER_LEN {
        return Err(DatabaseError::Short);
    }
    if bytes[..12] != MAGIC {
        return Err(DatabaseError::BadMagic);
    }
    if bytes[15] > VERSION {
        return Err(DatabaseError::FutureVersion(bytes[15]));
    }
    let mut entries = Vec::new();
    let mut at = HEADER_LEN;
    let mut whole_end = HEADER_LEN;
    while bytes.len() - at >= ENTRY_HEAD_LEN {
        let head = &bytes[at..at + ENTRY_HEAD_LEN];
        let name = String::from_utf8_lossy(&head[..40]).into_owned();
        let parsed = parse_name(&head[..40]);
        if let Some(end) = whole_head_end(bytes, at) {
            let (stored, flags, crc, inflated) = words(head);
            let payload = unpack(&bytes[at + ENTRY_HEAD_LEN..end], flags, crc, inflated);
            // A CRC that fails may be a length damaged too: trusted only where a whole entry
            // (or the end) follows.
            let next_is_whole = end == bytes.len()
                || bytes.len() - end < ENTRY_HEAD_LEN
                || whole_head_end(bytes, end).is_some();
            if payload.is_ok() || next_is_whole {
                let (tag, hash) = parsed.expect("a whole head's name parses");
                debug_assert_eq!(stored as usize, end - at - ENTRY_HEAD_LEN);
                entries.push(Entry {
                    name,
                    tag,
                    hash,
                    payload,
                });
                at = end;
                whole_end = end;
                continue;
            }
        }
        // A cut last entry (nothing whole after it), or damage: the next whole head.
        let Some(next) =
            (at + 1..=bytes.len() - ENTRY_HEAD_LEN).find(|&n| whole_head_end(bytes, n).is_some())
        else {
            break;
        };
        let (tag, hash) = parsed.unwrap_or((u32::MAX, 0));
        let (_, flags, crc, inflated) = words(head);
        let error = match parsed {
            None => EntryError::BadName,
            Some(_) => match unpack(&bytes[at + ENTRY_HEAD_LEN..next], flags, crc, inflated) {
                Err(e @ EntryError::BadCrc { .. }) => e,
                _ => EntryError::Damaged {
                    at,
                    bytes: next - at,
                },
            },
        };
        entries.push(Entry {
            name,
            tag,
            hash,
            payload: Err(error),
        });
        at = next;
        whole_end = next;
    }
    Ok((entries, whole_end))
}

/// The four words of an entry's head: stored size, flags, CRC-32, inflated size.
fn words(head: &[u8]) -> (u32, u32, u32, u32) {
    let word =
        |i: usize| u32::from_le_bytes(head[40 + 4 * i..44 + 4 * i].try_into().expect("4 bytes"));
    (word(0), word(1), word(2), word(3))
}

/// Where the entry whose head starts at `at` ends, if that head is whole: a name of 40 hex
/// digits, known flags, a length within the file and an inflated size this reader takes.
fn whole_head_end(bytes: &[u8], at: usize) -> Option<usize> {
    let head = bytes.get(at..at + ENTRY_HEAD_LEN)?;
    let (stored, flags, _, inflated) = words(head);
    if !(flags == 1 || flags == 2) || inflated > MAX_PAYLOAD {
        return None;
    }
    parse_name(&head[..40])?;
    (at + ENTRY_HEAD_LEN)
        .checked_add(stored as usize)
        .filter(|e| *e <= bytes.len())
}

fn parse_name(name: &[u8]) -> Option<(u32, u64)> {
    let text = std::str::from_utf8(name).ok()?;
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((
        u32::from_str_radix(&text[..24], 16).ok()?,
        u64::from_str_radix(&text[24..], 16).ok()?,
    ))
}

fn unpack(stored: &[u8], flags: u32, crc: u32, inflated: u32) -> Result<Vec<u8>, EntryError> {
    if crc != 0 {
        let actual = crc32fast::hash(stored);
        if actual != crc {
            return Err(EntryError::BadCrc {
                expected: crc,
                actual,
            });
        }
    }
    if inflated > MAX_PAYLOAD {
        return Err(EntryError::TooLarge(inflated));
    }
    let out = match flags {
        1 => stored.to_vec(),
        2 => {
            let mut out = Vec::with_capacity(inflated as usize);
            flate2::read::ZlibDecoder::new(stored)
                .take(u64::from(inflated) + 1)
                .read_to_end(&mut out)
                .map_err(|e| EntryError::Inflate(e.to_string()))?;
            out
        }
        other => return Err(EntryError::BadFlags(other)),
    };
    if out.len() != inflated as usize {
        return Err(EntryError::WrongSize {
            expected: inflated,
            actual: out.len(),
        });
    }
    Ok(out)
}

/// Writes a database with every payload stored as it is (flag 1), as pipekeep wrote its record
/// before it deflated payloads (for tests and tools that make damaged or small copies).
pub fn write_entries(entries: &[(u32, u64, Vec<u8>)]) -> Vec<u8> {
    write_with(entries, None)
}

/// Writes a database as Fossilize's own writer does: each payload deflated (zlib, flag 2) where
/// that makes it smaller, stored as it is (flag 1) where not (a link of a few dozen bytes). The
/// CRC-32 is of the stored bytes, as Fossilize's. Valve's readers and every pipekeep inflate it.
pub fn write_entries_deflated(entries: &[(u32, u64, Vec<u8>)]) -> Vec<u8> {
    write_entries_deflated_on(entries, crate::sync::share_threads())
}

/// [`write_entries_deflated`], deflating on at most `threads` threads (one: beside an
/// application's builds, whose cores they would take).
pub fn write_entries_deflated_on(entries: &[(u32, u64, Vec<u8>)], threads: usize) -> Vec<u8> {
    write_with(entries, Some(threads))
}

/// `deflate_on`: the threads payloads are deflated on; none, stored as they are.
fn write_with(entries: &[(u32, u64, Vec<u8>)], deflate_on: Option<usize>) -> Vec<u8> {
    let deflated = match deflate_on {
        Some(threads) => deflated_on(entries, threads),
        None => vec![None; entries.len()],
    };
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[0, 0, 0, VERSION]);
    for ((tag, hash, payload), deflated) in entries.iter().zip(&deflated) {
        let (flags, stored) = match deflated {
            Some(d) => (2, d.as_slice()),
            None => (1, payload.as_slice()),
        };
        out.extend_from_slice(format!("{tag:024x}{hash:016x}").as_bytes());
        for w in [
            stored.len() as u32,
            flags,
            crc32fast::hash(stored),
            payload.len() as u32,
        ] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(stored);
    }
    out
}

/// Past this many bytes of payloads, they are deflated on several threads.
const DEFLATE_APART_FROM: usize = 1 << 20;

/// Each payload deflated where that makes it smaller (`None`: stored as it is), on at most
/// `threads` threads, each a share of the entries in order, where they hold many bytes. A
/// process's end appends its whole record at once while the cores are free (pygfx: 641
/// pipelines, 3.5 MB of payloads). A share whose thread panicked is stored as it is (deflating
/// it again here would panic again).
fn deflated_on(entries: &[(u32, u64, Vec<u8>)], threads: usize) -> Vec<Option<Vec<u8>>> {
    let share_of = |part: &[(u32, u64, Vec<u8>)]| {
        let mut deflater = Deflater::new();
        part.iter()
            .map(|(_, _, payload)| deflater.smaller(payload))
            .collect::<Vec<_>>()
    };
    let bytes: usize = entries.iter().map(|(_, _, p)| p.len()).sum();
    if bytes < DEFLATE_APART_FROM || threads < 2 {
        return share_of(entries);
    }
    crate::sync::in_shares(entries, threads, "pipekeep-deflate", share_of)
        .into_iter()
        .flat_map(|(part, deflated)| deflated.unwrap_or_else(|| vec![None; part.len()]))
        .collect()
}

/// The bytes each of `payloads` takes stored by [`write_entries_deflated`] (its head not
/// counted), deflated by one deflater.
pub fn stored_lens<'a>(payloads: impl IntoIterator<Item = &'a [u8]>) -> Vec<usize> {
    let mut deflater = Deflater::new();
    payloads
        .into_iter()
        .map(|p| deflater.smaller(p).map_or(p.len(), |d| d.len()))
        .collect()
}

/// Payloads shorter than this are stored as they are: a link's 60-130 bytes deflate by 2%, and
/// each costs the deflater's setting up (pygfx's 641 links and ncnn's 3,115 cost 6 and 30 ms
/// for 1.0 and 4.5 KB).
const DEFLATED_FROM: usize = 128;

/// zlib's level for the record: 4, where the best (9) took 28-75% longer for 0.1-0.3% fewer
/// bytes (pygfx's and ncnn's records on RADV: 1.90 MB in 61 ms against 1.90 MB in 77 ms, 2.55 MB
/// in 88 ms against 2.54 MB in 157 ms). Fossilize's own layer writes at level 1.
const LEVEL: u32 = 4;

/// One zlib deflater for many payloads in turn: made once (its tables are large enough that a
/// fresh one a payload was a third of ncnn's deflating).
struct Deflater(flate2::Compress);

impl Deflater {
    fn new() -> Deflater {
        Deflater(flate2::Compress::new(flate2::Compression::new(LEVEL), true))
    }

    /// `payload` deflated (zlib) where that makes it smaller and it is not short.
    fn smaller(&mut self, payload: &[u8]) -> Option<Vec<u8>> {
        if payload.len() < DEFLATED_FROM {
            return None;
        }
        self.0.reset();
        // Room for as many bytes as the payload's: a deflate that needs more is no smaller (and
        // one call finishes whatever fits).
        let mut out = Vec::with_capacity(payload.len());
        let status = self
            .0
            .compress_vec(payload, &mut out, flate2::FlushCompress::Finish)
            .ok()?;
        (status == flate2::Status::StreamEnd && out.len() < payload.len()).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn deflated(payload: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(payload).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn entries_round_trip_and_a_cut_last_entry_is_ignored() {
        let db = write_entries(&[
            (4, 0xabc, b"{\"a\":1}\0xyz".to_vec()),
            (7, 1, b"{}".to_vec()),
        ]);
        let entries = read_entries(&db).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!((entries[0].tag, entries[0].hash), (4, 0xabc));
        assert_eq!(entries[1].payload.as_deref(), Ok(&b"{}"[..]));
        assert_eq!(read_entries(&db[..db.len() - 1]).unwrap().len(), 1);
    }

    /// Past a megabyte the payloads are deflated on several threads: the database is the same,
    /// byte for byte, as one thread writes it, in the entries' order.
    #[test]
    fn payloads_deflated_on_several_threads_write_the_same_database() {
        let entries: Vec<(u32, u64, Vec<u8>)> = (0..300u64)
            .map(|n| {
                let text = format!(
                    "{{\"n\":{n},\"code\":\"{}\"}}",
                    "ab".repeat(2_000 + n as usize)
                );
                (4, n, text.into_bytes())
            })
            .collect();
        let bytes: usize = entries.iter().map(|e| e.2.len()).sum();
        assert!(bytes > DEFLATE_APART_FROM);
        let mut one_thread = write_entries(&[]);
        for (tag, hash, payload) in &entries {
            let stored = Deflater::new().smaller(payload).unwrap();
            one_thread.extend_from_slice(format!("{tag:024x}{hash:016x}").as_bytes());
            for w in [
                stored.len() as u32,
                2,
                crc32fast::hash(&stored),
                payload.len() as u32,
            ] {
                one_thread.extend_from_slice(&w.to_le_bytes());
            }
            one_thread.extend_from_slice(&stored);
        }
        assert_eq!(write_entries_deflated(&entries), one_thread);
        // Whatever this machine's cores: four threads and one give the same payloads.
        assert_eq!(deflated_on(&entries, 4), deflated_on(&entries, 1));
        let read = read_entries(&one_thread).unwrap();
        assert_eq!(read.len(), 300);
        assert_eq!(read[299].payload.as_deref(), Ok(&entries[299].2[..]));
    }

    /// One deflater for many payloads gives each what a fresh one gives it; a short payload, or
    /// one deflate makes no smaller, is stored as it is.
    #[test]
    fn a_deflater_made_once_deflates_each_payload_as_a_fresh_one() {
        let payloads: Vec<Vec<u8>> = (0..20u32)
            .map(|n| {
                format!(
                    "{{\"n\":{n},\"code\":\"{}\"}}",
                    "xy".repeat(100 * n as usize)
                )
            })
            .map(String::into_bytes)
            .collect();
        let mut once = Deflater::new();
        for payload in &payloads {
            let fresh = Deflater::new().smaller(payload);
            assert_eq!(once.smaller(payload), fresh);
            if let Some(d) = fresh {
                let mut inflated = Vec::new();
                std::io::Read::read_to_end(
                    &mut flate2::read::ZlibDecoder::new(&d[..]),
                    &mut inflated,
                )
                .unwrap();
                assert_eq!(&inflated, payload);
            }
        }
        assert_eq!(once.smaller(&[b'a'; DEFLATED_FROM - 1]), None, "short");
        let noise: Vec<u8> = (0..128u32)
            .flat_map(|i| *blake3::hash(&i.to_le_bytes()).as_bytes())
            .collect();
        assert_eq!(once.smaller(&noise), None, "no smaller");
        assert_eq!(stored_lens([&noise[..]]), [noise.len()]);
    }

    #[test]
    fn deflated_payloads_inflate() {
        let payload = b"{\"version\":6}".repeat(10);
        let stored = deflated(&payload);
        let mut db = write_entries(&[]);
        db.extend_from_slice(format!("{:024x}{:016x}", 2, 5).as_bytes());
        for w in [stored.len() as u32, 2, 0, payload.len() as u32] {
            db.extend_from_slice(&w.to_le_bytes());
        }
        db.extend_from_slice(&stored);
        assert_eq!(
            read_entries(&db).unwrap()[0].payload.as_deref(),
            Ok(&payload[..])
        );
    }

    #[test]
    fn bad_headers_crcs_and_names_are_named() {
        assert_eq!(read_entries(b"short"), Err(DatabaseError::Short));
        let mut db = write_entries(&[(4, 1, b"abc".to_vec())]);
        db[15] = 7;
        assert_eq!(read_entries(&db), Err(DatabaseError::FutureVersion(7)));
        db[15] = 6;
        db[1] = b'X';
        assert_eq!(read_entries(&db), Err(DatabaseError::BadMagic));
        let mut db = write_entries(&[(4, 1, b"abc".to_vec()), (4, 2, b"def".to_vec())]);
        let last = db.len() - 1;
        db[last] ^= 1;
        let entries = read_entries(&db).unwrap();
        assert!(entries[0].payload.is_ok());
        assert!(matches!(entries[1].payload, Err(EntryError::BadCrc { .. })));
        db[16] = b'g';
        assert_eq!(
            read_entries(&db).unwrap()[0].payload,
            Err(EntryError::BadName)
        );
    }

    /// Issue 31, item 3: 200 bytes damaged inside a database cost the entries they touch, never
    /// the rest: the reader finds the next whole entry after the damage, and names the damage.
    #[test]
    fn damaged_bytes_cost_the_entries_they_touch_and_the_rest_reads() {
        let entries: Vec<_> = (0..60u64)
            .map(|n| {
                (
                    6,
                    n + 1,
                    format!("{{\"pipeline\":{n}}}").repeat(5).into_bytes(),
                )
            })
            .collect();
        let whole = write_entries_deflated(&entries);
        for (from, fill) in [(16, 0xffu8), (900, 0x30), (2000, 0x00), (3000, b'a')] {
            let mut db = whole.clone();
            db[from..from + 200].fill(fill);
            let read = read_entries(&db).unwrap();
            let good: Vec<u64> = read
                .iter()
                .filter(|e| e.payload.is_ok())
                .map(|e| e.hash)
                .collect();
            let per_entry = whole.len() / 60;
            assert!(
                good.len() >= 60 - 200 / per_entry - 2,
                "damage at {from}: {} of 60 read",
                good.len()
            );
            assert!(
                good.contains(&60),
                "damage at {from}: the last entry is lost"
            );
            assert!(
                read.iter().any(|e| e.payload.is_err()),
                "damage at {from} not named"
            );
        }
    }

    #[test]
    fn the_corpus_databases_read_whole() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
        let Ok(bytes) = std::fs::read(dir.join("saschawillems-glsl-synth.foz")) else {
            return;
        };
        let entries = read_entries(&bytes).unwrap();
        assert!(entries.iter().all(|e| e.payload.is_ok()));
        assert_eq!(entries.iter().filter(|e| e.tag == 6).count(), 131);
    }
}
