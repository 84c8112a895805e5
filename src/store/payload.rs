//! A found entry's payload as it is held: the entry file's bytes and the pieces it names, put
//! together into one buffer only when the driver is handed it.
//!
//! A payload that stands whole in its entry is handed on in place. One made of parts is copied,
//! part by part, into a buffer each thread keeps, its last pieces at the buffer's end: NVIDIA's
//! shared 1.78 MB dictionary runs to the end of the data of every pipeline that carries it, so the
//! next such pipeline on that thread finds the pieces it shares in place and only its own head is
//! copied.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use super::envelope::{self, Body, DataHash, EntryError, PayloadKind};
use super::identity::Identity;
use super::pieces::{ListedPieces, Pieces};
use super::recipe::{Part, PieceName};
use crate::key::PipelineKey;

/// A payload checked whole, with its kind. Shared: what reading ahead holds and what it hands
/// to a lookup are one buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub kind: PayloadKind,
    pub payload: Payload,
    /// The store's pieces it names (each a list or not), for its stamp to stamp them first: an
    /// entry carries them to its stamp, so no map of them stands between a lookup and the writer.
    pub pieces: Vec<(PieceName, bool)>,
}

impl From<Vec<u8>> for Checked {
    /// Pipeline-cache data standing whole.
    fn from(bytes: Vec<u8>) -> Checked {
        let len = bytes.len();
        Checked {
            kind: PayloadKind::Cache,
            payload: Payload::whole(Arc::new(bytes), 0..len),
            pieces: Vec::new(),
        }
    }
}

/// Checks an entry's bytes whole for this identity and key, reading the pieces it names from
/// `pieces`; the payload they make is checked as one standing whole would be. Returns it with
/// the pieces and lists the entry names (`true`: a list), for their stamps.
pub fn check(
    file: Arc<Vec<u8>>,
    identity: &Identity,
    key: &PipelineKey,
    pieces: &Pieces,
) -> Result<Checked, EntryError> {
    let whole = 0..file.len();
    check_within(file, whole, identity, key, pieces, DataHash::Check)
}

/// [`check`] of the entry standing at `within` in `file` (a waiting file holds many, each
/// checked in place: copied out one by one, they were a quarter of its taking). The payload then
/// holds all of `file` (reading ahead counts what a payload holds by [`Payload::file_len`]; the
/// writer holds a waiting file's entries so until each is written).
pub fn check_within(
    file: Arc<Vec<u8>>,
    within: Range<usize>,
    identity: &Identity,
    key: &PipelineKey,
    pieces: &Pieces,
    hash: DataHash,
) -> Result<Checked, EntryError> {
    check_within_holding(file, within, identity, key, (pieces, None), hash)
}

/// The pieces a file holds of its own (a waiting file's): those that hold their names, and the
/// names of those that do not.
#[derive(Debug, Default)]
pub struct OwnPieces {
    pub held: std::collections::HashMap<PieceName, Arc<[u8]>>,
    pub failed: std::collections::HashSet<PieceName>,
}

impl OwnPieces {
    /// The pieces `wanted` names ([`Pieces::get_all`]'s order): each from here where it is here
    /// at the length wanted, else from `pieces`; one of the file's that failed its name fails the
    /// entry (`corrupt-piece`), wherever else it stands.
    fn get_all(
        &self,
        wanted: &[(PieceName, Option<u64>)],
        pieces: &Pieces,
    ) -> Result<Vec<Arc<[u8]>>, EntryError> {
        if wanted.iter().any(|(name, _)| self.failed.contains(name)) {
            return Err(EntryError::CorruptPiece);
        }
        let here: Vec<Option<Arc<[u8]>>> = wanted
            .iter()
            .map(|(name, len)| {
                let held = self.held.get(name);
                held.filter(|b| len.is_none_or(|l| b.len() as u64 == l))
                    .cloned()
            })
            .collect();
        let elsewhere: Vec<(PieceName, Option<u64>)> = wanted
            .iter()
            .zip(&here)
            .filter_map(|(w, h)| h.is_none().then_some(*w))
            .collect();
        let mut elsewhere = pieces.get_all(&elsewhere).map_err(unusable)?.into_iter();
        let all = here.into_iter().map(|h| h.or_else(|| elsewhere.next()));
        Ok(all.collect::<Option<_>>().expect("one a named piece"))
    }
}

/// A piece an entry names that cannot be used: logged, and the entry's reason.
fn unusable(e: super::pieces::PieceError) -> EntryError {
    tracing::debug!(error = %e, "an entry's piece cannot be used");
    e.for_the_entry()
}

/// [`check_within`] where `file` may hold pieces of its own (`own`: [`OwnPieces::get_all`]).
pub fn check_within_holding(
    file: Arc<Vec<u8>>,
    within: Range<usize>,
    identity: &Identity,
    key: &PipelineKey,
    (pieces, own): (&Pieces, Option<&OwnPieces>),
    hash: DataHash,
) -> Result<Checked, EntryError> {
    let entry = file.get(within.clone()).ok_or(EntryError::Short {
        len: file.len() as u64,
        expected: within.end as u64,
    })?;
    let decoded = envelope::decode_as(entry, identity, key, hash)?;
    let kind = decoded.kind;
    // The payload holds the bytes its inline parts lie in: the entry's file where they stand in
    // it as they are, else (packed parts) the body they were decompressed into, alone.
    let base = match decoded.is_expanded() {
        true => 0,
        false => within.start + envelope::ENVELOPE_LEN,
    };
    let image_start = decoded.image().as_ptr() as usize;
    let at = |b: &[u8]| {
        let start = base + (b.as_ptr() as usize - image_start);
        start..start + b.len()
    };
    let listed = match decoded.body() {
        Body::Whole(bytes) => Err(at(bytes)),
        Body::Parts { parts, .. } => Ok(parts
            .into_iter()
            .map(|p| match p {
                Part::Inline(bytes) => Listed::Inline(at(bytes)),
                Part::Piece { name, len } => Listed::Piece(name, len),
                Part::List { name, len } => Listed::List(name, len),
                Part::Packed { .. } => unreachable!("a checked body holds no packed part"),
            })
            .collect::<Vec<Listed>>()),
    };
    let file = held_bytes(decoded, &file);
    let parts = match listed {
        Err(range) => {
            return Ok(Checked {
                kind,
                payload: Payload::whole(file, range),
                pieces: Vec::new(),
            });
        }
        Ok(parts) => parts,
    };
    // The pieces the entry names itself, then each list (resolved once a process).
    let direct: Vec<(PieceName, Option<u64>)> = parts
        .iter()
        .filter_map(|p| match p {
            Listed::Piece(name, len) => Some((*name, Some(*len))),
            _ => None,
        })
        .collect();
    let found = match own {
        Some(own) => own.get_all(&direct, pieces)?,
        None => pieces.get_all(&direct).map_err(unusable)?,
    };
    let mut found = found.into_iter();
    let mut sources = Vec::with_capacity(parts.len());
    let mut names = Vec::new();
    for part in parts {
        match part {
            Listed::Inline(range) => sources.push(Source::Inline(range)),
            Listed::Piece(name, _) => {
                sources.push(Source::Piece(found.next().expect("one a named piece")));
                names.push((name, false));
            }
            Listed::List(name, len) => {
                sources.push(Source::List(
                    pieces.resolve_list(&name, len).map_err(unusable)?,
                ));
                names.push((name, true));
            }
        }
    }
    let payload = Payload::from_parts(file, sources);
    let start = payload.prefix(envelope::CACHE_HEADER_LEN);
    envelope::check_payload_start(kind, &start, payload.len(), identity)?;
    if kind == PayloadKind::Binaries {
        payload.with_bytes(|b| envelope::check_payload(kind, b, identity))?;
    }
    Ok(Checked {
        kind,
        payload,
        pieces: names,
    })
}

/// A part of a checked entry: inline bytes, by their range in the bytes the payload holds.
enum Listed {
    Inline(Range<usize>),
    Piece(PieceName, u64),
    List(PieceName, u64),
}

/// The bytes a payload of `decoded` holds its inline parts in: the entry's file, or the body its
/// packed parts were decompressed into.
fn held_bytes(decoded: envelope::Decoded<'_>, file: &Arc<Vec<u8>>) -> Arc<Vec<u8>> {
    match decoded.into_image() {
        std::borrow::Cow::Owned(image) => Arc::new(image),
        std::borrow::Cow::Borrowed(_) => Arc::clone(file),
    }
}

/// A payload larger than this is put together in a buffer of its own, not kept by the thread.
const KEPT_BUFFER_MAX: usize = 16 << 20;

#[derive(Clone)]
enum Held {
    /// A range of the entry file's bytes.
    Inline(Range<usize>),
    Piece(Arc<[u8]>),
    /// A list's pieces, held once for every payload naming the list (a block chunked into 440
    /// pieces is some 28 lists of 16: a payload holds 28 shared handles, not 440).
    List(Arc<ListedPieces>),
}

impl Held {
    /// The same shared bytes (for what stands in place at a buffer's end).
    fn same_as(&self, other: &Held) -> bool {
        match (self, other) {
            (Held::Piece(a), Held::Piece(b)) => Arc::ptr_eq(a, b),
            (Held::List(a), Held::List(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// A checked payload: the entry's bytes and the pieces it names.
#[derive(Clone)]
pub struct Payload {
    file: Arc<Vec<u8>>,
    parts: Arc<[Held]>,
    len: usize,
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payload")
            .field("len", &self.len)
            .field("parts", &self.parts.len())
            .finish()
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Payload) -> bool {
        self.with_bytes(|a| other.with_bytes(|b| a == b))
    }
}

impl Eq for Payload {}

/// One part of a payload being put together from an entry's file.
pub enum Source {
    Inline(Range<usize>),
    Piece(Arc<[u8]>),
    List(Arc<ListedPieces>),
}

impl Payload {
    /// A payload standing whole in `file` at `range`.
    pub fn whole(file: Arc<Vec<u8>>, range: Range<usize>) -> Payload {
        let len = range.len();
        Payload {
            file,
            parts: Arc::new([Held::Inline(range)]),
            len,
        }
    }

    /// A payload of ranges of `file` and pieces, in order.
    pub fn from_parts(file: Arc<Vec<u8>>, parts: Vec<Source>) -> Payload {
        let parts: Arc<[Held]> = parts
            .into_iter()
            .map(|p| match p {
                Source::Inline(r) => Held::Inline(r),
                Source::Piece(b) => Held::Piece(b),
                Source::List(l) => Held::List(l),
            })
            .collect();
        let len = parts.iter().map(held_len).sum();
        Payload { file, parts, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes held of the entry: its file's, or its body decompressed (what reading ahead
    /// counts in its window).
    pub fn file_len(&self) -> usize {
        self.file.len()
    }

    /// The first `n` bytes (fewer where the payload is shorter).
    pub fn prefix(&self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        self.copy_range(0..n, &mut out);
        out
    }

    /// Appends the bytes of `range` to `out` (those within the payload: fewer where it is
    /// shorter), without putting the rest together.
    pub fn copy_range(&self, range: Range<usize>, out: &mut Vec<u8>) {
        let mut at = 0;
        for part in self.parts.iter() {
            let len = held_len(part);
            if at + len > range.start && at < range.end {
                self.each_slice(part, &mut |bytes| {
                    let (from, to) = (at.max(range.start), (at + bytes.len()).min(range.end));
                    if from < to {
                        out.extend_from_slice(&bytes[from - at..to - at]);
                    }
                    at += bytes.len();
                });
            } else {
                at += len;
            }
            if at >= range.end {
                break;
            }
        }
    }

    /// Calls `f` with each slice of one part's bytes, in order.
    fn each_slice(&self, part: &Held, f: &mut dyn FnMut(&[u8])) {
        match part {
            Held::Inline(r) => f(&self.file[r.clone()]),
            Held::Piece(b) => f(b),
            Held::List(l) => l.pieces.iter().for_each(|b| f(b)),
        }
    }

    /// Calls `f` with the payload as one slice.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match &self.parts[..] {
            [Held::Inline(r)] => return f(&self.file[r.clone()]),
            [Held::Piece(b)] => return f(b),
            _ => {}
        }
        if self.len > KEPT_BUFFER_MAX {
            return f(&self.concatenated());
        }
        ASSEMBLY.with(|cell| match cell.try_borrow_mut() {
            Ok(mut assembly) => f(assembly.put_together(self)),
            // Called again from inside `f` on this thread: a buffer of its own.
            Err(_) => f(&self.concatenated()),
        })
    }

    /// The payload's bytes as one slice of what it holds, without copying; a payload of several
    /// parts is put together into bytes of its own at each call.
    pub fn as_one(&self) -> std::borrow::Cow<'_, [u8]> {
        match &self.parts[..] {
            [Held::Inline(r)] => self.file[r.clone()].into(),
            [Held::Piece(b)] => b[..].into(),
            _ => self.concatenated().into(),
        }
    }

    fn concatenated(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for part in self.parts.iter() {
            self.each_slice(part, &mut |b| out.extend_from_slice(b));
        }
        out
    }
}

fn held_len(part: &Held) -> usize {
    match part {
        Held::Inline(r) => r.len(),
        Held::Piece(b) => b.len(),
        Held::List(l) => l.len,
    }
}

thread_local! {
    static ASSEMBLY: RefCell<Assembly> = RefCell::new(Assembly::default());
}

/// A thread's buffer, filled from its end; `tail` is the run of pieces and lists that stands at
/// the end now, in order (held, so that their memory cannot be reused for other bytes while they
/// are compared by address).
#[derive(Default)]
struct Assembly {
    buf: Vec<u8>,
    tail: Vec<Held>,
}

impl Assembly {
    fn put_together(&mut self, payload: &Payload) -> &[u8] {
        let total = payload.len;
        if self.buf.len() < total {
            self.buf = vec![0; total.next_power_of_two().min(KEPT_BUFFER_MAX).max(total)];
            self.tail.clear();
        }
        let end = self.buf.len();
        let parts = &payload.parts[..];
        // The payload's own run of shared parts at its end, and how much of it stands in place.
        let run_starts = parts
            .iter()
            .rposition(|p| matches!(p, Held::Inline(_)))
            .map_or(0, |i| i + 1);
        let in_place = parts[run_starts..]
            .iter()
            .rev()
            .zip(self.tail.iter().rev())
            .take_while(|(part, kept)| part.same_as(kept))
            .count();
        let mut at = end
            - parts[parts.len() - in_place..]
                .iter()
                .map(held_len)
                .sum::<usize>();
        let buf = &mut self.buf;
        for part in parts[..parts.len() - in_place].iter().rev() {
            let start = at - held_len(part);
            let mut cursor = start;
            payload.each_slice(part, &mut |bytes| {
                buf[cursor..cursor + bytes.len()].copy_from_slice(bytes);
                cursor += bytes.len();
            });
            at = start;
        }
        self.tail = parts[run_starts..].to_vec();
        &self.buf[end - total..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry checked where it stands behind other bytes (a waiting file's record) gives the
    /// payload it gives alone: inline parts beside a piece, stored as they are and packed; a range
    /// past the buffer is refused.
    #[test]
    fn an_entry_checked_within_a_larger_buffer_is_the_entry_checked_alone() {
        use crate::store::envelope::tests::{cache_data, identity};
        use crate::store::recipe::tests::noise;
        let root = tempfile::tempdir().unwrap();
        let pieces = Pieces::new(root.path());
        let id = identity();
        let key = PipelineKey {
            spirv: [3; 16],
            state: [4; 16],
        };
        let piece = noise(3000);
        let (name, _) = pieces.put(&piece, std::time::SystemTime::now()).unwrap();
        let head = cache_data(&id, &[7; 2000]);
        let tail = vec![8u8; 1500];
        let parts = [
            Part::Inline(&head),
            Part::Piece {
                name,
                len: piece.len() as u64,
            },
            Part::Inline(&tail),
        ];
        let as_is = envelope::encode_parts_as_is(&id, &key, PayloadKind::Cache, &parts);
        let packed = envelope::encode_parts(&id, &key, PayloadKind::Cache, &parts);
        assert!(packed.len() < as_is.len(), "the packed one is packed");
        for entry in [as_is, packed] {
            let bytes = |c: &Checked| c.payload.with_bytes(<[u8]>::to_vec);
            let alone = check(Arc::new(entry.clone()), &id, &key, &pieces).unwrap();
            let junk = vec![0x5a; 97];
            let file = Arc::new([&junk[..], &entry, &junk].concat());
            let within = junk.len()..junk.len() + entry.len();
            let checked =
                check_within(file.clone(), within, &id, &key, &pieces, DataHash::Check).unwrap();
            assert_eq!(bytes(&checked), bytes(&alone));
            assert_eq!(bytes(&checked), [&head[..], &piece, &tail].concat());
            assert_eq!(checked.pieces, vec![(name, false)]);
            let past = file.len() - 10..file.len() + 10;
            assert!(check_within(file, past, &id, &key, &pieces, DataHash::Check).is_err());
        }
    }

    #[test]
    fn parts_put_together_in_order_and_a_shared_tail_stays_in_place() {
        let file = Arc::new(b"0123456789".to_vec());
        let dictionary: Arc<[u8]> = vec![9u8; 1000].into();
        let one = Payload::from_parts(
            Arc::clone(&file),
            vec![
                Source::Inline(0..3),
                Source::Piece(Arc::from(&b"ab"[..])),
                Source::Piece(Arc::clone(&dictionary)),
            ],
        );
        let two = Payload::from_parts(
            Arc::clone(&file),
            vec![
                Source::Inline(5..10),
                Source::Piece(Arc::clone(&dictionary)),
            ],
        );
        let expect = |head: &[u8]| [head, &[9u8; 1000][..]].concat();
        assert_eq!(one.with_bytes(|b| b.to_vec()), expect(b"012ab"));
        assert_eq!(two.with_bytes(|b| b.to_vec()), expect(b"56789"));
        assert_eq!(one.with_bytes(|b| b.to_vec()), expect(b"012ab"));
        assert_eq!(one.prefix(4), b"012a");
        assert_eq!(one.len(), 1005);
        // A payload whose head is longer than the last one's tail overwrites where it stood.
        let short_tail = Payload::from_parts(
            Arc::clone(&file),
            vec![Source::Inline(0..10), Source::Piece(Arc::from(&b"z"[..]))],
        );
        assert_eq!(short_tail.with_bytes(|b| b.to_vec()), b"0123456789z");
        assert_eq!(one.with_bytes(|b| b.to_vec()), expect(b"012ab"));
        let whole = Payload::whole(Arc::clone(&file), 2..4);
        assert_eq!(whole.with_bytes(|b| b.to_vec()), b"23");
        // A run of pieces at the end, of which only a suffix is shared.
        let piece = |byte: u8, len: usize| -> Arc<[u8]> { vec![byte; len].into() };
        let (p1, p2, p3) = (piece(1, 7), piece(2, 9), piece(3, 11));
        let a = Payload::from_parts(
            Arc::clone(&file),
            vec![
                Source::Inline(0..2),
                Source::Piece(Arc::clone(&p1)),
                Source::Piece(Arc::clone(&p2)),
                Source::Piece(Arc::clone(&p3)),
            ],
        );
        let b = Payload::from_parts(
            Arc::clone(&file),
            vec![
                Source::Inline(4..9),
                Source::Piece(Arc::clone(&p2)),
                Source::Piece(Arc::clone(&p3)),
            ],
        );
        let concat = |parts: &[&[u8]]| parts.concat();
        for _ in 0..2 {
            assert_eq!(
                a.with_bytes(|x| x.to_vec()),
                concat(&[b"01", &p1, &p2, &p3])
            );
            assert_eq!(b.with_bytes(|x| x.to_vec()), concat(&[b"45678", &p2, &p3]));
        }
        // Lists at the end: the shared one stays in place between payloads.
        let list = Arc::new(ListedPieces {
            pieces: vec![Arc::clone(&p2), Arc::clone(&p3)],
            len: 20,
        });
        let with_list = |head: std::ops::Range<usize>| {
            Payload::from_parts(
                Arc::clone(&file),
                vec![Source::Inline(head), Source::List(Arc::clone(&list))],
            )
        };
        let (c, d) = (with_list(0..4), with_list(6..7));
        for _ in 0..2 {
            assert_eq!(c.with_bytes(|x| x.to_vec()), concat(&[b"0123", &p2, &p3]));
            assert_eq!(d.with_bytes(|x| x.to_vec()), concat(&[b"6", &p2, &p3]));
        }
        assert_eq!(c.prefix(6), concat(&[b"0123", &p2[..2]]));
        let mut middle = Vec::new();
        c.copy_range(3..14, &mut middle);
        assert_eq!(middle, concat(&[b"3", &p2[..9], &p3[..1]]));
        let mut past_the_end = Vec::new();
        c.copy_range(20..40, &mut past_the_end);
        assert_eq!(past_the_end, &p3[7..]);
        // Nested on one thread: each gets its own bytes.
        let nested = one.with_bytes(|a| two.with_bytes(|b| (a.to_vec(), b.to_vec())));
        assert_eq!(nested, (expect(b"012ab"), expect(b"56789")));
    }
}
