//! The rule that cuts a payload into the parts of a body ([`super`]) when it is written, and
//! names its pieces, grouping long runs of them into lists.
//!
//! What becomes a piece (chosen by measurement; FORMAT.md says why):
//! - `binary`: where a pipeline has more than one binary (RADV gives one a stage of a graphics
//!   pipeline), each binary's data of at least [`BINARY_PIECE_MIN`] bytes that another entry
//!   carries too (a stage shared by pipelines is kept once; the store says which, as it writes:
//!   [`plan_with`]); the binaries' counts, keys and lengths stand inline, and so does a stage no
//!   other entry carries. A pipeline's only binary stands inline.
//! - `cache`, NVIDIA's data: cut at its records ([`super::nvidia_cache`]), each of at least
//!   [`RECORD_PIECE_MIN`] bytes a piece by the rule of a stage binary (where another entry
//!   carries it too: the driver's zstd dictionary, the data of a twin or of stages that seeded a
//!   build); what pipelines share, NVIDIA's data shares as whole records.
//! - `cache`, any other driver's: a payload of at least [`CHUNKED_FROM`] bytes is cut by FastCDC;
//!   its first chunk (the pipeline's own head, which nothing else shares) stands inline and every
//!   later chunk is a piece, so a block repeated at any offset is kept once. A smaller payload
//!   stands inline whole.

use super::{encode_list, piece_name, Part, PieceName, LIST_MAX};
use crate::store::layout::PayloadKind;

/// A `cache` payload this long or longer is cut into chunks.
pub const CHUNKED_FROM: usize = 16 << 10;
/// FastCDC's smallest, average and largest chunk.
pub const CHUNK_MIN: usize = 1 << 10;
pub const CHUNK_AVG: usize = 4 << 10;
pub const CHUNK_MAX: usize = 32 << 10;
/// A binary's data this long or longer is a piece.
pub const BINARY_PIECE_MIN: usize = 256;
/// One of NVIDIA's cache records this long or longer (its head included) may be a piece.
pub const RECORD_PIECE_MIN: usize = 1 << 10;

/// When and how finely `cache` payloads are chunked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunking {
    /// NVIDIA's data cut record by record, a record this long or longer (its head included) a
    /// piece where another entry carries it too; `None`: chunked as any other driver's.
    pub records_from: Option<usize>,
    /// A payload this long or longer is chunked.
    pub from: usize,
    pub min: usize,
    pub avg: usize,
    pub max: usize,
}

impl Chunking {
    /// NVIDIA's data cut by records; any other driver's by the FastCDC sizes chosen on NVIDIA's
    /// data before it was (FORMAT.md says why).
    pub const CHOSEN: Chunking = Chunking {
        records_from: Some(RECORD_PIECE_MIN),
        from: CHUNKED_FROM,
        min: CHUNK_MIN,
        avg: CHUNK_AVG,
        max: CHUNK_MAX,
    };

    /// FastCDC's smallest sizes, from `from` bytes: for the tests of pieces on a driver whose
    /// payloads are a few KiB (RADV).
    pub fn fine_from(from: usize) -> Chunking {
        Chunking {
            from,
            min: fastcdc::v2020::MINIMUM_MIN,
            avg: fastcdc::v2020::AVERAGE_MIN,
            max: fastcdc::v2020::MAXIMUM_MIN,
            ..Chunking::CHOSEN
        }
    }
}

impl Default for Chunking {
    fn default() -> Chunking {
        Chunking::CHOSEN
    }
}

/// A payload cut for writing: bytes that stand inline, or bytes that become a piece, named (the
/// BLAKE3 of its bytes) where it is cut, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut<'a> {
    Inline(&'a [u8]),
    Piece { name: PieceName, bytes: &'a [u8] },
}

impl<'a> Cut<'a> {
    fn piece(bytes: &'a [u8]) -> Cut<'a> {
        Cut::Piece {
            name: piece_name(bytes),
            bytes,
        }
    }
}

/// Bytes and their name as a piece, hashed once where they are made (NVIDIA's 1.78 MB dictionary
/// record, held once for every entry the writer queues that carries it: hashed again as each
/// such entry was cut, it was most of the entry's write), so that cutting a payload that carries
/// them names them without hashing them again. The name is always the BLAKE3 of the bytes (they
/// are made together), and a payload's range takes it only where it holds these very bytes.
pub struct KnownPiece {
    bytes: Box<[u8]>,
    name: PieceName,
}

impl KnownPiece {
    pub fn new(bytes: &[u8]) -> KnownPiece {
        KnownPiece {
            bytes: bytes.into(),
            name: piece_name(bytes),
        }
    }

    pub fn name(&self) -> PieceName {
        self.name
    }

    /// Test only: bytes under another name, to see which ranges take it.
    #[cfg(test)]
    pub(crate) fn named(bytes: &[u8], name: PieceName) -> KnownPiece {
        KnownPiece {
            bytes: bytes.into(),
            name,
        }
    }
}

impl std::ops::Deref for KnownPiece {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::fmt::Debug for KnownPiece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KnownPiece({} bytes)", self.bytes.len())
    }
}

/// How a payload is written: its parts, with the bytes of every piece and list to keep first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned<'a> {
    Inline(&'a [u8]),
    Piece(PieceName, &'a [u8]),
    /// A list: its name and bytes, the length its pieces hold, and the pieces (kept before it).
    List {
        name: PieceName,
        bytes: Vec<u8>,
        len: u64,
        pieces: Vec<(PieceName, &'a [u8])>,
    },
}

impl Planned<'_> {
    /// The part the entry lists for it.
    pub fn part(&self) -> Part<'_> {
        match self {
            Planned::Inline(b) => Part::Inline(b),
            Planned::Piece(name, b) => Part::Piece {
                name: *name,
                len: b.len() as u64,
            },
            Planned::List { name, len, .. } => Part::List {
                name: *name,
                len: *len,
            },
        }
    }
}

/// Whether a list ends after the piece of this name: content-defined, 1 in 16.
fn ends_a_list(name: &PieceName) -> bool {
    name[31] & 0x0f == 0
}

/// Cuts a payload of `kind` ([`cut`]) and names its pieces; each run of pieces is grouped into
/// lists from its first list end on (the pieces before it, where an entry's own bytes meet a
/// shared block, are named one by one).
pub fn plan(kind: PayloadKind, payload: &[u8], chunking: Chunking) -> Vec<Planned<'_>> {
    plan_with(kind, payload, chunking, &|_| true, None)
}

/// [`plan`], a `binary` payload's binary (or a record of NVIDIA's cache data) a piece only where
/// `shared` says so of its name, or where the payload carries it twice (a stage no other
/// pipeline has stands inline: a piece of its own would cost a lookup a file); a range holding
/// `known`'s bytes is named by it.
pub fn plan_with<'a>(
    kind: PayloadKind,
    payload: &'a [u8],
    chunking: Chunking,
    shared: &dyn Fn(&PieceName) -> bool,
    known: Option<&KnownPiece>,
) -> Vec<Planned<'a>> {
    let mut out = Vec::new();
    let mut run: Vec<(PieceName, &[u8])> = Vec::new();
    for c in cut_with(kind, payload, chunking, shared, known) {
        match c {
            Cut::Piece { name, bytes } => run.push((name, bytes)),
            Cut::Inline(b) => {
                group_run(std::mem::take(&mut run), &mut out);
                out.push(Planned::Inline(b));
            }
        }
    }
    group_run(run, &mut out);
    out
}

fn group_run<'a>(run: Vec<(PieceName, &'a [u8])>, out: &mut Vec<Planned<'a>>) {
    let mut group: Vec<(PieceName, &'a [u8])> = Vec::new();
    let mut listing = false;
    for (name, bytes) in run {
        group.push((name, bytes));
        if ends_a_list(&name) || group.len() == LIST_MAX {
            flush_group(std::mem::take(&mut group), listing, out);
            listing = true;
        }
    }
    flush_group(group, listing, out);
}

fn flush_group<'a>(group: Vec<(PieceName, &'a [u8])>, as_list: bool, out: &mut Vec<Planned<'a>>) {
    if !as_list || group.len() < 2 {
        out.extend(group.into_iter().map(|(n, b)| Planned::Piece(n, b)));
        return;
    }
    let refs: Vec<(PieceName, u64)> = group.iter().map(|(n, b)| (*n, b.len() as u64)).collect();
    let bytes = encode_list(&refs);
    out.push(Planned::List {
        name: piece_name(&bytes),
        len: refs.iter().map(|(_, l)| l).sum(),
        bytes,
        pieces: group,
    });
}

/// Cuts a payload of `kind` for writing (see the module's doc for the rule), a `cache` payload
/// as `chunking` says ([`Chunking::CHOSEN`] but in tests). Adjacent inline bytes are one cut. A
/// `binary` payload that does not parse stands inline whole.
pub fn cut(kind: PayloadKind, payload: &[u8], chunking: Chunking) -> Vec<Cut<'_>> {
    cut_with(kind, payload, chunking, &|_| true, None)
}

/// [`cut`], a `binary` payload's binary (or a record of NVIDIA's data) a piece only where
/// `shared` says so of its name, or where the payload carries it twice; a range holding
/// `known`'s bytes by its name.
fn cut_with<'a>(
    kind: PayloadKind,
    payload: &'a [u8],
    chunking: Chunking,
    shared: &dyn Fn(&PieceName) -> bool,
    known: Option<&KnownPiece>,
) -> Vec<Cut<'a>> {
    let mut cuts = Vec::new();
    match kind {
        PayloadKind::Cache => match chunking
            .records_from
            .map(|min| (min, crate::store::nvidia_cache::record_ranges(payload)))
        {
            // NVIDIA's data is cut where its driver cuts it, record by record: pipelines that
            // share a stage, or hold a twin's data they were seeded with, carry the very record.
            Some((min, Ok(ranges))) => cut_shared(&mut cuts, payload, ranges, min, shared, known),
            _ if payload.len() >= chunking.from => {
                let Chunking { min, avg, max, .. } = chunking;
                let chunks = fastcdc::v2020::FastCDC::new(payload, min, avg, max);
                for (i, chunk) in chunks.enumerate() {
                    let bytes = &payload[chunk.offset..chunk.offset + chunk.length];
                    cuts.push(if i == 0 {
                        Cut::Inline(bytes)
                    } else {
                        Cut::piece(bytes)
                    });
                }
            }
            _ => push_inline(&mut cuts, payload),
        },
        PayloadKind::Binaries => match crate::store::binaries::data_ranges(payload) {
            // A pipeline's only binary is the whole pipeline (RADV's compute pipelines): no other
            // pipeline shares it, and a piece of its own would cost every lookup a second file.
            Ok(ranges) if ranges.len() == 1 => push_inline(&mut cuts, payload),
            Ok(ranges) => cut_shared(&mut cuts, payload, ranges, BINARY_PIECE_MIN, shared, known),
            Err(_) => push_inline(&mut cuts, payload),
        },
    }
    cuts
}

/// Whether one of NVIDIA's records `len` bytes long (its head included) may be a piece where
/// `chunking` cuts a payload carrying it ([`cut_shared`]'s rule for a range); one that may not
/// stands inline whoever carries it.
pub fn record_may_be_a_piece(len: usize, chunking: Chunking) -> bool {
    chunking.records_from.is_some_and(|min| len >= min)
}

/// Cuts `payload` at `ranges` (a binary each, or a record each): each range of at least `min`
/// bytes is named once; one the payload carries twice is a piece whatever `shared` says (it is
/// kept once), any other as `shared` says; every other byte stands inline. A range holding
/// `known`'s bytes is named by it, compared (a fifth of hashing them), not hashed.
fn cut_shared<'a>(
    cuts: &mut Vec<Cut<'a>>,
    payload: &'a [u8],
    ranges: Vec<std::ops::Range<usize>>,
    min: usize,
    shared: &dyn Fn(&PieceName) -> bool,
    known: Option<&KnownPiece>,
) {
    let named: Vec<(std::ops::Range<usize>, PieceName)> = ranges
        .into_iter()
        .filter(|r| r.len() >= min)
        .map(|r| {
            let bytes = &payload[r.clone()];
            let name = match known {
                Some(known) if **known == *bytes => known.name,
                _ => piece_name(bytes),
            };
            (r, name)
        })
        .collect();
    let carried_twice = |name: &PieceName| named.iter().filter(|(_, n)| n == name).count() > 1;
    let mut at = 0;
    for (r, name) in &named {
        if carried_twice(name) || shared(name) {
            push_inline(cuts, &payload[at..r.start]);
            cuts.push(Cut::Piece {
                name: *name,
                bytes: &payload[r.clone()],
            });
            at = r.end;
        }
    }
    push_inline(cuts, &payload[at..]);
}

fn push_inline<'a>(cuts: &mut Vec<Cut<'a>>, bytes: &'a [u8]) {
    if !bytes.is_empty() {
        cuts.push(Cut::Inline(bytes));
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse_list;
    use super::super::tests::noise;
    use super::*;

    #[test]
    fn chunking_is_deterministic_and_finds_a_block_at_any_offset() {
        let block: Vec<u8> = (0..400_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let payload = |head: usize| {
            let mut p: Vec<u8> = (0..head).map(|i| (i * 7) as u8).collect();
            p.extend_from_slice(&block);
            p
        };
        let (a, b) = (payload(1_000), payload(17_003));
        assert_eq!(
            cut(PayloadKind::Cache, &a, Chunking::CHOSEN),
            cut(PayloadKind::Cache, &a, Chunking::CHOSEN)
        );
        let names = |p: &[u8]| -> std::collections::HashSet<[u8; 32]> {
            cut(PayloadKind::Cache, p, Chunking::CHOSEN)
                .into_iter()
                .filter_map(|c| match c {
                    Cut::Piece { name, .. } => Some(name),
                    Cut::Inline(_) => None,
                })
                .collect()
        };
        let (na, nb) = (names(&a), names(&b));
        let shared: usize = nb.intersection(&na).count();
        assert!(
            shared * 10 >= nb.len() * 9,
            "{shared} of {} pieces shared",
            nb.len()
        );
        let pieces = cut(PayloadKind::Cache, &a, Chunking::CHOSEN);
        assert!(matches!(pieces[0], Cut::Inline(_)));
        let whole: Vec<u8> = pieces
            .iter()
            .flat_map(|c| match c {
                Cut::Inline(b) | Cut::Piece { bytes: b, .. } => b.to_vec(),
            })
            .collect();
        assert_eq!(whole, a);
    }

    #[test]
    fn a_long_run_of_pieces_is_listed_the_same_way_after_any_head() {
        let block = noise(900_000);
        let payload = |head: usize| -> Vec<u8> {
            let own: Vec<u8> = (0..head).map(|i| (i * 13) as u8).collect();
            [&own[..], &block[..]].concat()
        };
        let lists = |p: &[u8]| -> Vec<PieceName> {
            plan(PayloadKind::Cache, p, Chunking::CHOSEN)
                .into_iter()
                .filter_map(|x| match x {
                    Planned::List { name, .. } => Some(name),
                    _ => None,
                })
                .collect()
        };
        let (a, b) = (payload(3_000), payload(40_000));
        let (la, lb) = (lists(&a), lists(&b));
        assert!(la.len() >= 3, "{} lists", la.len());
        let shared = lb.iter().filter(|n| la.contains(n)).count();
        assert!(
            shared + 1 >= lb.len(),
            "{shared} of {} lists shared",
            lb.len()
        );
        // The plan's parts put together are the payload.
        let planned = plan(PayloadKind::Cache, &a, Chunking::CHOSEN);
        let mut whole = Vec::new();
        for p in &planned {
            match p {
                Planned::Inline(x) | Planned::Piece(_, x) => whole.extend_from_slice(x),
                Planned::List {
                    pieces, bytes, len, ..
                } => {
                    let (refs, total) = parse_list(bytes).unwrap();
                    assert_eq!(total, *len);
                    assert_eq!(refs.len(), pieces.len());
                    pieces.iter().for_each(|(_, x)| whole.extend_from_slice(x));
                }
            }
        }
        assert_eq!(whole, a);
    }

    #[test]
    fn a_small_cache_payload_stands_inline_and_binaries_become_pieces() {
        let small = vec![5u8; CHUNKED_FROM - 1];
        assert_eq!(
            cut(PayloadKind::Cache, &small, Chunking::CHOSEN),
            vec![Cut::Inline(&small[..])]
        );
        let only = crate::store::binaries::encode(&[], [(&[9u8][..], &[1u8; 4000][..])]);
        assert_eq!(
            cut(PayloadKind::Binaries, &only, Chunking::CHOSEN),
            vec![Cut::Inline(&only[..])]
        );
        let (big, tiny) = (vec![1u8; 4000], vec![2u8; 10]);
        let payload =
            crate::store::binaries::encode(&[], [(&[9u8][..], &big[..]), (&[8][..], &tiny[..])]);
        let cuts = cut(PayloadKind::Binaries, &payload, Chunking::CHOSEN);
        assert_eq!(cuts.len(), 3);
        assert_eq!(cuts[1], Cut::piece(&big[..]));
        assert!(matches!(cuts[2], Cut::Inline(b) if b.ends_with(&tiny)));
    }

    /// A record holding a known piece's bytes is named by it, not hashed (here under a name
    /// of the test's, to see it taken); a record of other bytes, as long, is hashed.
    #[test]
    fn a_record_holding_a_known_pieces_bytes_takes_its_name() {
        use crate::store::nvidia_cache::tests::{nvidia_cache, record};
        let (one, other) = (
            record([1; 16], 1, &[7; 3000]),
            record([2; 16], 2, &[8; 3000]),
        );
        let data = nvidia_cache(&[one.clone(), other.clone()]);
        let known = KnownPiece::named(&one, [0xee; 32]);
        let all = |_: &PieceName| true;
        let names: Vec<PieceName> = cut_with(
            PayloadKind::Cache,
            &data,
            Chunking::CHOSEN,
            &all,
            Some(&known),
        )
        .into_iter()
        .filter_map(|c| match c {
            Cut::Piece { name, .. } => Some(name),
            Cut::Inline(_) => None,
        })
        .collect();
        assert_eq!(names, [[0xee; 32], piece_name(&other)]);
        assert_eq!(KnownPiece::new(&one).name(), piece_name(&one));
    }

    #[test]
    fn nvidia_data_is_cut_record_by_record_a_record_a_piece_where_another_entry_carries_it() {
        use crate::store::nvidia_cache::tests::{nvidia_cache, record};
        let (big, other, small) = (vec![7u8; 4000], vec![8u8; 3000], vec![9u8; 100]);
        let records = [
            record([1; 16], 1, &small),
            record([2; 16], 2, &big),
            record([3; 16], 3, &other),
        ];
        let data = nvidia_cache(&records);
        let big_name = *blake3::hash(&records[1]).as_bytes();
        // Only the record another entry carries is a piece, cut exactly at its frame; the small
        // record, the one no other entry carries and the header stand inline.
        let shared = |n: &PieceName| *n == big_name;
        let plan = plan_with(PayloadKind::Cache, &data, Chunking::CHOSEN, &shared, None);
        let start = data.len() - records[2].len() - records[1].len();
        assert_eq!(
            plan,
            vec![
                Planned::Inline(&data[..start]),
                Planned::Piece(big_name, &data[start..start + records[1].len()]),
                Planned::Inline(&data[start + records[1].len()..]),
            ]
        );
        // Shared by none: the data stands inline whole, however long.
        let long = nvidia_cache(&[record([4; 16], 4, &vec![3u8; 64 << 10])]);
        assert_eq!(
            cut_with(
                PayloadKind::Cache,
                &long,
                Chunking::CHOSEN,
                &|_| false,
                None
            ),
            vec![Cut::Inline(&long[..])]
        );
        // Cut as any other driver's data where records are not asked for, or do not frame.
        let by_content = Chunking {
            records_from: None,
            ..Chunking::CHOSEN
        };
        assert!(cut(PayloadKind::Cache, &long, by_content).len() > 1);
        let mut unframed = long.clone();
        unframed.push(0);
        assert!(cut(PayloadKind::Cache, &unframed, Chunking::CHOSEN).len() > 1);
    }
}
