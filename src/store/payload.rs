//! A found entry's payload as it is held: the entry file's bytes and the pieces it names, put
//! together into one buffer only when the driver is handed it.
//!
//! A payload that stands whole in its entry is handed on in place. One made of parts is copied,
//! part by part, into a buffer each thread keeps, its last piece at the buffer's end: NVIDIA's
//! shared 1.78 MB dictionary runs to the end of the data of every pipeline that carries it, so the
//! next such pipeline on that thread finds it in place and only its own head is copied.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use super::envelope::{self, Body, EntryError, PayloadKind};
use super::identity::Identity;
use super::pieces::Pieces;
use super::recipe::{Part, PieceName};
use crate::key::PipelineKey;

/// A payload checked whole, with its kind. Shared: what reading ahead holds and what it hands
/// to the merger are one buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub kind: PayloadKind,
    pub payload: Payload,
}

impl From<Vec<u8>> for Checked {
    /// Pipeline-cache data standing whole.
    fn from(bytes: Vec<u8>) -> Checked {
        let len = bytes.len();
        Checked {
            kind: PayloadKind::Cache,
            payload: Payload::whole(Arc::new(bytes), 0..len),
        }
    }
}

/// Checks an entry's bytes whole for this identity and key, reading the pieces it names from
/// `pieces`; the payload they make is checked as one standing whole would be. Returns it with
/// the names of the pieces (for their stamps).
pub fn check(
    file: Arc<Vec<u8>>,
    identity: &Identity,
    key: &PipelineKey,
    pieces: &Pieces,
) -> Result<(Checked, Vec<PieceName>), EntryError> {
    let decoded = envelope::decode(&file, identity, key)?;
    let offset_in_file = |b: &[u8]| b.as_ptr() as usize - file.as_ptr() as usize;
    let parts = match decoded.body {
        Body::Whole(bytes) => {
            let at = offset_in_file(bytes);
            let checked = Checked {
                kind: decoded.kind,
                payload: Payload::whole(Arc::clone(&file), at..at + bytes.len()),
            };
            return Ok((checked, Vec::new()));
        }
        Body::Parts { parts, .. } => parts,
    };
    let wanted: Vec<(PieceName, u64)> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Piece { name, len } => Some((*name, *len)),
            Part::Inline(_) => None,
        })
        .collect();
    let mut found = pieces
        .get_all(&wanted)
        .map_err(|e| {
            tracing::debug!(error = %e, "an entry's piece cannot be used");
            e.for_the_entry()
        })?
        .into_iter();
    let sources = parts
        .iter()
        .map(|p| match p {
            Part::Inline(bytes) => {
                let at = offset_in_file(bytes);
                Source::Inline(at..at + bytes.len())
            }
            Part::Piece { .. } => Source::Piece(found.next().expect("one piece a named part")),
        })
        .collect();
    let payload = Payload::from_parts(Arc::clone(&file), sources);
    let start = payload.prefix(envelope::CACHE_HEADER_LEN);
    envelope::check_payload_start(decoded.kind, &start, payload.len(), identity)?;
    if decoded.kind == PayloadKind::Binaries {
        payload.with_bytes(|b| envelope::check_payload(decoded.kind, b, identity))?;
    }
    let names = wanted.into_iter().map(|(name, _)| name).collect();
    let checked = Checked {
        kind: decoded.kind,
        payload,
    };
    Ok((checked, names))
}

/// A payload larger than this is put together in a buffer of its own, not kept by the thread.
const KEPT_BUFFER_MAX: usize = 16 << 20;

#[derive(Clone)]
enum Held {
    /// A range of the entry file's bytes.
    Inline(Range<usize>),
    Piece(Arc<[u8]>),
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

    /// The bytes of the entry's own file (what reading ahead counts in its window).
    pub fn file_len(&self) -> usize {
        self.file.len()
    }

    /// The first `n` bytes (fewer where the payload is shorter).
    pub fn prefix(&self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        for part in self.parts.iter() {
            let bytes = self.bytes_of(part);
            let take = (n - out.len()).min(bytes.len());
            out.extend_from_slice(&bytes[..take]);
            if out.len() == n {
                break;
            }
        }
        out
    }

    fn bytes_of<'a>(&'a self, part: &'a Held) -> &'a [u8] {
        match part {
            Held::Inline(r) => &self.file[r.clone()],
            Held::Piece(b) => b,
        }
    }

    /// Calls `f` with the payload as one slice.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        if let [only] = &self.parts[..] {
            return f(self.bytes_of(only));
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

    fn concatenated(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for part in self.parts.iter() {
            out.extend_from_slice(self.bytes_of(part));
        }
        out
    }
}

fn held_len(part: &Held) -> usize {
    match part {
        Held::Inline(r) => r.len(),
        Held::Piece(b) => b.len(),
    }
}

thread_local! {
    static ASSEMBLY: RefCell<Assembly> = RefCell::new(Assembly::default());
}

/// A thread's buffer, filled from its end; `tail` is the piece that stands at the end now (held,
/// so that its memory cannot be reused for other bytes while it is compared by address).
#[derive(Default)]
struct Assembly {
    buf: Vec<u8>,
    tail: Option<Arc<[u8]>>,
}

impl Assembly {
    fn put_together(&mut self, payload: &Payload) -> &[u8] {
        let total = payload.len;
        if self.buf.len() < total {
            self.buf = vec![0; total.next_power_of_two().min(KEPT_BUFFER_MAX).max(total)];
            self.tail = None;
        }
        let end = self.buf.len();
        let mut parts = &payload.parts[..];
        let mut at = end;
        if let Some(Held::Piece(last)) = parts.last() {
            let in_place = self.tail.as_ref().is_some_and(|t| Arc::ptr_eq(t, last));
            if !in_place {
                self.buf[end - last.len()..].copy_from_slice(last);
                self.tail = Some(Arc::clone(last));
            }
            at -= last.len();
            parts = &parts[..parts.len() - 1];
        } else {
            self.tail = None;
        }
        for part in parts.iter().rev() {
            let bytes = payload.bytes_of(part);
            self.buf[at - bytes.len()..at].copy_from_slice(bytes);
            at -= bytes.len();
        }
        &self.buf[end - total..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let whole = Payload::whole(file, 2..4);
        assert_eq!(whole.with_bytes(|b| b.to_vec()), b"23");
        // Nested on one thread: each gets its own bytes.
        let nested = one.with_bytes(|a| two.with_bytes(|b| (a.to_vec(), b.to_vec())));
        assert_eq!(nested, (expect(b"012ab"), expect(b"56789")));
    }
}
