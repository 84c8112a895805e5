//! Entries still waiting to be written when a process ends, kept together in one file of the
//! identity directory (`<pid>-<nanos>-<abi>.waiting`) instead of as an entry file each while the
//! user waits for the process to end. The next process that opens the store takes the file: its
//! lookups find those entries from memory from its first pipeline, and its writer writes them as
//! entry files in the application's pauses (or leaves them waiting again at its own end). ncnn on
//! RADV at 2 threads, before: 2,926 entries waited at the device's end and took 1.29 s of a
//! 6.7 s process to write one file each.
//!
//! ```text
//! "PKWAIT03" | 32 bytes: the seal, BLAKE3 of every byte after it
//! then to the end, one record an entry or a piece:
//!   u64 stamp (nanoseconds since the Unix epoch) | 16 + 16 bytes of key | u64 length n
//!   n bytes: the entry as it would stand on disk, uncompressed (envelope and payload)
//! a piece: stamp 2^64 - 1 | its name, BLAKE3 of its bytes (32) | u64 length n | n bytes
//! ```
//! On disk the file is packed where that saves an eighth of its bytes or more ([`pack`]):
//! `"PKWAIT04"`, then one zstd frame of all of the above (or of a file of `"PKWAIT01"`, the
//! bound's rewrite of one whose seal failed), stating its length; every reader takes the file it
//! stands for ([`unpack`]), and the bound counts the bytes on disk. Left uncompressed, what
//! waits took the bytes compression saves in entry files: ncnn on RADV at 2 threads, whose later
//! launches barely pause, left 2,953-3,027 entries waiting, and the store was 9.75-9.92 MB against
//! Mesa's whole disk cache of 7.23 MB (this machine's bench at cd2c0f5); packed, about 2.7 MB.
//! Little-endian. Each record is checked as an entry file is (identity, key, the payload's hash),
//! less the payload's hash where the file's seal holds ([`sealed`]): one that fails is dropped;
//! reading stops at a record cut short. An entry names the pieces it shares with other entries of
//! the file (a stage binary, one of NVIDIA's records: [`crate::store::recipe`]'s cut, where two
//! entries of the file carry it), as an entry file names piece files, and the file holds each
//! once; a piece the store keeps already as a file this run (shared with entries written as
//! files) it names and does not hold, and the bound keeps that file while the entry waits; an
//! entry file this run wrote holding inline a piece an entry of the file carries moves into the
//! file ([`holders`]), so that the piece stands once.
//! Whole, NVIDIA's entries seeded by their twins and stages carried the same records many times
//! (pygfx at 16 threads on the H200: 157-321 entries made the title 18-25 MB against 11 MB as
//! files). A piece is checked against its name (where the seal does not vouch for it), before
//! an entry naming it is; one that fails makes those entries fail. A file of `"PKWAIT02"` (sealed,
//! no pieces of its own, written before them) or `"PKWAIT01"` (no seal, written before it, or by
//! the bound's rewrite of a file whose seal failed) reads the same, each record's hash checked in
//! the last. Only the last device of a
//! store in a process leaves entries waiting (an earlier one's end writes them: the store is not
//! opened again in that process), and a process takes only files of its own ABI. A file is read
//! but not removed: a process that writes none of a file's entries (a short launch, with no
//! pause to write them in), or fewer than half, leaves the file as it found it at its end,
//! rather than writing the same entries into a file of its own (those it wrote stand in both;
//! a later process's writer passes over them); one that wrote half or more removes the file once
//! the rest are written or left waiting in its own. Two processes at once may both take a file's entries, and
//! write the same bytes; a process that dies leaves the file for the next.
//!
//! The file counts within the title's bound. Its stamp is the newest use of its entries (a
//! process that keeps it as it is, having found some of them, stamps it forward), and the bound
//! drops its entries one at a time at that stamp, the oldest own stamp first and any whose entry
//! is a file already before them ([`as_records`]), writing it again without them
//! ([`WaitingDrops`]); the process whose pass dropped them from a file it took forgets them.
//! Before, it stood outside the bound (pygfx's title on RADV: 4.3 MB under a bound of 3.3 MB).

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::compress;
use super::envelope::{self, DataHash, EntryError, PayloadKind};
use super::eviction::StampedEntry;
use super::identity::Identity;
use super::payload::{self, OwnPieces, Payload};
use super::pieces::Pieces;
use super::recipe::{self, Chunking, Cut, Part, PieceName};
use super::{files, Store, StoreError};
use crate::key::PipelineKey;
use crate::sync::Unpoisoned;
use std::collections::{HashMap, HashSet};

/// The waiting file's name ends so.
pub const SUFFIX: &str = files::WAITING_SUFFIX;
/// A file whose records one hash of them all vouches for (its seal), its entries naming pieces it
/// holds, as every process writes them.
const MAGIC: &[u8; 8] = b"PKWAIT03";
/// A sealed file written before the file held pieces of its own.
const MAGIC_BEFORE_PIECES: &[u8; 8] = b"PKWAIT02";
/// The stamp that marks a piece's record (no entry's: nanoseconds past the year 2500).
const PIECE_STAMP: u64 = u64::MAX;
/// A file packed whole ([`pack`]): this magic, then one zstd frame, stating its length, of the
/// file it stands for (of [`MAGIC`], sealed).
const MAGIC_PACKED: &[u8; 8] = b"PKWAIT04";
/// A file whose records each stand on their own entry's data hash: written before the seal, and
/// by the bound's rewrite of a file whose seal did not hold (sealed again, it would vouch for
/// damage).
const MAGIC_UNSEALED: &[u8; 8] = b"PKWAIT01";
/// The seal's length: BLAKE3 (key derivation, [`SEAL_CONTEXT`]) of every byte after it.
const SEAL_LEN: usize = 32;
/// BLAKE3's context for a waiting file's seal (fixed strings, never changed).
const SEAL_CONTEXT: &str = "pipekeep 2026-12-06 waiting file records and pieces, PKWAIT03";
/// The same, for a file of [`MAGIC_BEFORE_PIECES`].
const SEAL_CONTEXT_BEFORE_PIECES: &str = "pipekeep 2026-12-06 waiting file records, PKWAIT02";
/// A record's bytes before its entry: stamp, key, length.
const RECORD_HEAD: usize = 8 + 32 + 8;

mod holders;
pub use holders::MovedOut;
mod records;
mod taken;
#[cfg(test)]
use records::without;
pub use records::{
    as_records, named_by_entries, stopped_copies, without_damage, without_stopped, Applied,
    StoppedCopies, WaitingDrops,
};
/// A waiting file larger than this is not read (the writer's queue holds at most 64 MiB of
/// entries; NVIDIA's that carry the dictionary apart are never left waiting).
pub const MOST_BYTES: u64 = 80 << 20;
/// The bytes of waiting files past which an opening takes no more: the rest wait for a later one
/// (the writer's queue then has room for the run's own entries; near its limit the writer writes
/// earlier entries while the application builds).
const TAKEN_AT_MOST: u64 = 32 << 20;

/// A waiting file a process took: its path and the keys of the entries it held (those that
/// passed their check).
#[derive(Debug)]
pub(super) struct TakenFile {
    path: std::path::PathBuf,
    keys: Vec<PipelineKey>,
    /// It read whole, every record passed its check, and it held one at least: only such a file
    /// may stay as it is (a damaged one is written anew without its damage).
    clean: bool,
    /// Fewer than half of its entries were written at the process's end: the file stays as it
    /// is.
    kept: bool,
}

/// What this process took of its identity's waiting files.
#[derive(Debug, Default)]
pub(super) struct Taken {
    files: Vec<TakenFile>,
    /// The stamps of taken entries found before they were written, by key.
    used: HashMap<PipelineKey, SystemTime>,
    /// Every key taken from earlier processes' files, whatever became of those since (this
    /// process's bound pass drops records from them, a device's end settles them): the entries
    /// written from them are never moved back ([`super::holders`]); nor is one the application
    /// compiled again after the bound dropped its record (its bytes then stand twice until a
    /// later process writes the waiting file's entries).
    every_key: HashSet<PipelineKey>,
}

/// An entry taken from a waiting file.
#[derive(Debug, Clone)]
pub struct WaitingEntry {
    pub key: PipelineKey,
    pub kind: PayloadKind,
    /// The payload, as the driver gave it, where it stands in the file's bytes (copied out
    /// entry by entry, a later ncnn launch on RADV spent 3 ms of its taking on the copies).
    pub data: Payload,
    /// The stamp its pipeline took when it was built.
    pub stamp: SystemTime,
}

/// One entry to be left waiting: key, kind, payload, stamp.
pub type ToWait<'a> = (PipelineKey, PayloadKind, &'a [u8], SystemTime);

/// The file's bytes for `entries` of `identity`.
/// `chunking`: how the store cuts payloads into pieces ([`crate::store::recipe::cut`]); what two
/// entries of the file carry stands in it once, as a piece, and what the store keeps already as
/// a piece file (`kept`: written or stamped this run) is named, not carried.
pub fn encode(
    identity: &Identity,
    chunking: Chunking,
    entries: &[ToWait<'_>],
    kept: &dyn Fn(&PieceName) -> bool,
) -> Vec<u8> {
    encode_cut(identity, entries, &cut_all(entries, chunking), kept).0
}

/// Each entry's payload cut as the store cuts it ([`crate::store::recipe::cut`]).
fn cut_all<'a>(entries: &[ToWait<'a>], chunking: Chunking) -> Vec<Vec<Cut<'a>>> {
    entries
        .iter()
        .map(|(_, kind, data, _)| recipe::cut(*kind, data, chunking))
        .collect()
}

/// The names of the pieces `cuts` hold, each once.
fn piece_names(cuts: &[Vec<Cut<'_>>]) -> HashSet<PieceName> {
    cuts.iter()
        .flatten()
        .filter_map(|cut| match cut {
            Cut::Piece { name, .. } => Some(*name),
            Cut::Inline(_) => None,
        })
        .collect()
}

/// [`encode`] of entries already cut (`cuts`, in `entries`' order); with the bytes of each
/// entry's record.
fn encode_cut(
    identity: &Identity,
    entries: &[ToWait<'_>],
    cuts: &[Vec<Cut<'_>>],
    kept: &dyn Fn(&PieceName) -> bool,
) -> (Vec<u8>, Vec<usize>) {
    let mut carried: HashMap<PieceName, u32> = HashMap::new();
    for cut in cuts.iter().flatten() {
        if let Cut::Piece { name, .. } = cut {
            *carried.entry(*name).or_default() += 1;
        }
    }
    // Asked once a piece: the store's answer takes a lock.
    let in_store: HashSet<PieceName> = carried.keys().filter(|n| kept(n)).copied().collect();
    let shared = |name: &PieceName| carried.get(name).is_some_and(|n| *n > 1);
    let named = |name: &PieceName| in_store.contains(name) || shared(name);
    let mut out = begin(true);
    let mut written: HashSet<PieceName> = HashSet::new();
    for cut in cuts.iter().flatten() {
        if let Cut::Piece { name, bytes } = cut {
            if shared(name) && !in_store.contains(name) && written.insert(*name) {
                encode_piece_record(&mut out, name, bytes);
            }
        }
    }
    let mut records = Vec::with_capacity(entries.len());
    for ((key, kind, data, stamp), cuts) in entries.iter().zip(cuts) {
        let parts = parts_naming(data, cuts, &named);
        let entry = envelope::encode_parts_as_is(identity, key, *kind, &parts);
        let before = out.len();
        encode_record(&mut out, *stamp, key, &entry);
        records.push(out.len() - before);
    }
    seal(&mut out);
    (out, records)
}

/// An entry's parts in a waiting file: each piece `shared` names by its name, every other byte
/// inline (`data` whole where it names none).
fn parts_naming<'a>(
    data: &'a [u8],
    cuts: &[Cut<'a>],
    shared: &dyn Fn(&PieceName) -> bool,
) -> Vec<Part<'a>> {
    let mut parts = Vec::new();
    let mut inline_from = 0;
    let mut at = 0;
    for cut in cuts {
        match cut {
            Cut::Piece { name, bytes } if shared(name) => {
                if inline_from < at {
                    parts.push(Part::Inline(&data[inline_from..at]));
                }
                parts.push(Part::Piece {
                    name: *name,
                    len: bytes.len() as u64,
                });
                at += bytes.len();
                inline_from = at;
            }
            Cut::Piece { bytes, .. } | Cut::Inline(bytes) => at += bytes.len(),
        }
    }
    if inline_from < data.len() || parts.is_empty() {
        parts.push(Part::Inline(&data[inline_from..]));
    }
    parts
}

/// A file's bytes begun: its magic, and room for the seal where `sealed`; records follow, then
/// [`seal`]. (Unsealed, the magic of the format before the seal, whose files this build reads
/// with pieces too: a build before pieces takes a piece's record for an entry that fails its
/// check, and the entries naming it for ones whose piece is missing, each compiled again.)
fn begin(sealed: bool) -> Vec<u8> {
    match sealed {
        true => [&MAGIC[..], &[0; SEAL_LEN]].concat(),
        false => MAGIC_UNSEALED.to_vec(),
    }
}

/// Writes the seal of a file [`begin`] began sealed, its records all in.
fn seal(file: &mut [u8]) {
    if has_sealed_magic(file) {
        let (head, records) = file.split_at_mut(MAGIC.len() + SEAL_LEN);
        let seal = seal_of(&head[..MAGIC.len()], records);
        head[MAGIC.len()..].copy_from_slice(seal.as_bytes());
    }
}

/// The seal of `records` under a file's `magic`: each format its own context, so that a file of
/// one never passes for the other's.
fn seal_of(magic: &[u8], records: &[u8]) -> blake3::Hash {
    let context = match magic == MAGIC {
        true => SEAL_CONTEXT,
        false => SEAL_CONTEXT_BEFORE_PIECES,
    };
    blake3::Hasher::new_derive_key(context)
        .update(records)
        .finalize()
}

/// Whether `bytes` begin with the magic of a sealed file (of either format).
fn has_sealed_magic(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC) || bytes.starts_with(MAGIC_BEFORE_PIECES)
}

/// A file's records' bytes, and its seal where it has one; `None` for no waiting file's magic.
fn split(bytes: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    if has_sealed_magic(bytes) {
        let rest = &bytes[MAGIC.len()..];
        return Some((rest.get(SEAL_LEN..)?, Some(rest.get(..SEAL_LEN)?)));
    }
    Some((bytes.strip_prefix(MAGIC_UNSEALED.as_slice())?, None))
}

/// Whether the file's seal holds: every record is as the process that sealed it wrote it, each
/// entry's own data hash then checked already (one hash of all the file's bytes: 1.2 ms for
/// ncnn's 8.7 MB against 4.5 ms for its 3,115 entries one by one).
pub fn sealed(bytes: &[u8]) -> bool {
    matches!(split(bytes), Some((records, Some(seal))) if seal_of(&bytes[..MAGIC.len()], records).as_bytes()[..] == *seal)
}

/// The bytes before the first record of a file written now: its magic and seal.
pub const HEAD_LEN: u64 = (MAGIC.len() + SEAL_LEN) as u64;

/// The bytes before a file's first record (magic, and seal where sealed).
pub fn head_len(bytes: &[u8]) -> Option<usize> {
    split(bytes).map(|(records, _)| bytes.len() - records.len())
}

/// Appends one record: stamp, key, length, the entry as it stands on disk.
fn encode_record(out: &mut Vec<u8>, stamp: SystemTime, key: &PipelineKey, entry: &[u8]) {
    // Never a piece's stamp.
    let nanos = stamp
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u128::from(PIECE_STAMP - 1)) as u64);
    encode_raw_record(out, nanos, [&key.spirv, &key.state], entry);
}

/// Appends a piece's record: the piece's stamp, its name, length, bytes.
fn encode_piece_record(out: &mut Vec<u8>, name: &PieceName, bytes: &[u8]) {
    let (first, second) = name.split_at(16);
    encode_raw_record(out, PIECE_STAMP, [first, second], bytes);
}

/// Appends a record: stamp, the two halves of its key (or a piece's name), length, bytes.
fn encode_raw_record(out: &mut Vec<u8>, stamp: u64, key: [&[u8]; 2], bytes: &[u8]) {
    out.extend_from_slice(&stamp.to_le_bytes());
    out.extend_from_slice(key[0]);
    out.extend_from_slice(key[1]);
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Appends `record` as it was read (an entry's or a piece's).
fn encode_as_read(out: &mut Vec<u8>, record: &Record<'_>) {
    match record.piece {
        true => encode_piece_record(out, &record.name(), record.entry),
        false => encode_record(out, record.stamp, &record.key, record.entry),
    }
}

/// The stamp a waiting file carries: the newest of its entries' (each the later of its build
/// and its last use). The bound counts every entry of the file as used then.
fn newest_stamp(entries: &[ToWait<'_>]) -> SystemTime {
    let newest = entries.iter().map(|e| e.3).max().unwrap_or(UNIX_EPOCH);
    newest.min(SystemTime::now())
}

/// A record as read, before its entry (or piece) is checked.
#[derive(Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub stamp: SystemTime,
    pub key: PipelineKey,
    /// The entry's bytes, or the piece's.
    pub entry: &'a [u8],
    /// A piece the file's entries name, its name in `key`'s place.
    pub piece: bool,
}

impl Record<'_> {
    /// A piece's name, as its record gives it.
    fn name(&self) -> PieceName {
        let mut name = [0; 32];
        name[..16].copy_from_slice(&self.key.spirv);
        name[16..].copy_from_slice(&self.key.state);
        name
    }

    /// A piece whose bytes are what its name says.
    fn holds_its_name(&self) -> bool {
        recipe::piece_name(self.entry) == self.name()
    }
}

/// The entries' records of a waiting file, up to the first cut short; `false` where the file did
/// not read whole (no magic, or a record cut).
pub fn parse(bytes: &[u8]) -> (Vec<Record<'_>>, bool) {
    let (mut records, whole) = parse_all(bytes);
    records.retain(|r| !r.piece);
    (records, whole)
}

/// Every record of a waiting file, its pieces' among its entries', in the file's order, up to the
/// first cut short; `false` where the file did not read whole.
pub fn parse_all(bytes: &[u8]) -> (Vec<Record<'_>>, bool) {
    let Some((mut rest, _)) = split(bytes) else {
        return (Vec::new(), false);
    };
    let mut records = Vec::new();
    while !rest.is_empty() {
        let Some(record) = next_record(rest) else {
            return (records, false);
        };
        rest = &rest[RECORD_HEAD + record.entry.len()..];
        records.push(record);
    }
    (records, true)
}

fn next_record(rest: &[u8]) -> Option<Record<'_>> {
    let head = rest.get(..RECORD_HEAD)?;
    let u64_at = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().expect("8 bytes"));
    let len = usize::try_from(u64_at(40)).ok()?;
    let entry = rest.get(RECORD_HEAD..RECORD_HEAD.checked_add(len)?)?;
    let nanos = u64_at(0);
    Some(Record {
        piece: nanos == PIECE_STAMP,
        stamp: UNIX_EPOCH + Duration::from_nanos(nanos),
        key: PipelineKey {
            spirv: head[8..24].try_into().expect("16 bytes"),
            state: head[24..40].try_into().expect("16 bytes"),
        },
        entry,
    })
}

/// The waiting files of an identity directory, of either ABI, in name order.
pub fn files_in(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut out: Vec<std::path::PathBuf> = files::names_in(dir)?
        .into_iter()
        .filter(|n| n.ends_with(SUFFIX))
        .map(|n| dir.join(n))
        .collect();
    out.sort();
    Ok(out)
}

/// [`files_in`] oldest written first, by the wall-clock time in their names (a name without one
/// first, equal times in name order): the order an opening takes them in. Pids neither sort nor
/// grow with time, so a file left again goes behind those an opening left untaken, and none
/// waits on the directory's own order.
pub fn files_oldest_first(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut files = files_in(dir)?;
    files.sort_by_cached_key(|path| {
        let name = path.file_name().and_then(|n| n.to_str());
        name.and_then(written_at).unwrap_or(0)
    });
    Ok(files)
}

/// The ABI a waiting file's name ends with (`<pid>-<nanos>-<abi>.waiting`, as
/// [`Store::waiting_suffix`] names it), where it is one an opening takes: 4 or 8.
pub fn abi_in_name(name: &str) -> Option<u32> {
    let abi = name
        .strip_suffix(SUFFIX)?
        .rsplit('-')
        .next()?
        .parse()
        .ok()?;
    matches!(abi, 4 | 8).then_some(abi)
}

/// When a waiting file's name says it was written (`<pid>-<nanos>-<abi>.waiting`, read from the
/// right as [`abi_in_name`] reads it), in nanoseconds since the epoch; `None` where it says
/// nothing readable.
pub fn written_at(name: &str) -> Option<u128> {
    let mut fields = name.strip_suffix(SUFFIX)?.rsplitn(3, '-');
    let (_abi, nanos, _pid) = (fields.next()?, fields.next()?, fields.next()?);
    nanos.parse().ok()
}

/// The entries left waiting in an identity directory and the bytes of their files, as the files
/// read (records counted, not checked; for `pipekeep list`).
pub fn waiting_in(dir: &std::path::Path) -> (u64, u64) {
    let (mut entries, mut bytes) = (0, 0);
    for path in files_in(dir).unwrap_or_default() {
        match read_bounded_sized(&path) {
            Ok(Some((read, on_disk))) => {
                bytes += on_disk;
                entries += parse(&read).0.len() as u64; // entries, not pieces
            }
            // Past the size, an opening removes it unused: its bytes, no entries.
            Ok(None) => bytes += fs::symlink_metadata(&path).map_or(0, |m| m.len()),
            Err(_) => {}
        }
    }
    (entries, bytes)
}

/// A waiting file's seal, as read ([`Seal::word`]: as `pipekeep verify` reports it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seal {
    /// It holds: every record is as the process that sealed it wrote it.
    Held,
    /// A sealed file's records are not as they were sealed.
    Failed,
    /// A file written before the seal (`PKWAIT01`), or by the bound's rewrite of one whose seal
    /// failed (or no waiting file's magic: it reads no record).
    None,
}

impl Seal {
    pub fn word(self) -> &'static str {
        match self {
            Seal::Held => "held",
            Seal::Failed => "failed",
            Seal::None => "none",
        }
    }
}

/// A record of a waiting file that fails its check.
#[derive(Debug)]
pub struct BadRecord {
    /// Its place among the file's records.
    pub at: usize,
    pub key: PipelineKey,
    pub why: EntryError,
}

/// A waiting file's records checked as an opening takes them.
#[derive(Debug)]
pub struct CheckedFile {
    /// The entries that pass their check, in the file's order.
    pub entries: Vec<WaitingEntry>,
    /// The records that fail it (each is dropped and compiled again).
    pub bad: Vec<BadRecord>,
    /// The places, among the file's pieces, of those that fail their name.
    pub bad_pieces: Vec<usize>,
    /// It read to its end: no record cut short.
    pub whole: bool,
    pub seal: Seal,
}

impl CheckedFile {
    /// Read whole, sealed, every record passing: the only file an opening may keep as it is.
    pub fn is_clean(&self) -> bool {
        self.whole && self.seal == Seal::Held && self.bad.is_empty() && self.bad_pieces.is_empty()
    }

    /// Damaged: what an opening would log at `warn` (a file of the format before the seal,
    /// sound, is not).
    pub fn is_damaged(&self) -> bool {
        !self.whole
            || self.seal == Seal::Failed
            || !self.bad.is_empty()
            || !self.bad_pieces.is_empty()
    }
}

/// Each record of a waiting file's `bytes` checked as an entry file is (identity, key, the
/// payload's hash unless the file's seal holds), where it stands in the bytes; reading stops at
/// a record cut short. For the opening that takes the file, and `pipekeep verify`.
pub fn check_file(bytes: Arc<Vec<u8>>, identity: &Identity, pieces: &Pieces) -> CheckedFile {
    let (all, whole) = parse_all(&bytes);
    // A packed file is sealed inside its frame: one that does not decompress fails its seal.
    let seal = match (sealed(&bytes), has_sealed_magic(&bytes)) {
        (true, _) => Seal::Held,
        (false, true) => Seal::Failed,
        // (Still packed as read: its frame did not decompress.)
        (false, false) if bytes.starts_with(MAGIC_PACKED) => Seal::Failed,
        (false, false) => Seal::None,
    };
    let hash = match seal {
        Seal::Held => DataHash::Vouched,
        _ => DataHash::Check,
    };
    let (own, bad_pieces) = own_pieces(&all, seal == Seal::Held);
    let records = all.into_iter().filter(|r| !r.piece);
    let (mut entries, mut bad) = (Vec::new(), Vec::new());
    for (at, r) in records.enumerate() {
        // Checked where it stands in the file's bytes (a record's entry is a slice of them).
        let start = r.entry.as_ptr() as usize - bytes.as_ptr() as usize;
        let within = start..start + r.entry.len();
        let with = (pieces, Some(&own));
        match payload::check_within_holding(bytes.clone(), within, identity, &r.key, with, hash) {
            Ok(checked) => entries.push(WaitingEntry {
                key: r.key,
                kind: checked.kind,
                data: checked.payload,
                // A stamp from the future (a clock set back, a damaged record) would keep the
                // entry ahead of every other in the bound.
                stamp: r.stamp.min(SystemTime::now()),
            }),
            Err(why) => bad.push(BadRecord {
                at,
                key: r.key,
                why,
            }),
        }
    }
    CheckedFile {
        entries,
        bad,
        bad_pieces,
        whole,
        seal,
    }
}

/// The pieces a file holds (of its records, `all`), by name: each checked against its name
/// unless the file's seal `vouches` for it. One that fails fails every entry naming it; their
/// places among the file's pieces are returned too.
fn own_pieces(all: &[Record<'_>], vouches: bool) -> (OwnPieces, Vec<usize>) {
    let (mut own, mut bad) = (OwnPieces::default(), Vec::new());
    for (at, r) in all.iter().filter(|r| r.piece).enumerate() {
        if vouches || r.holds_its_name() {
            own.held.insert(r.name(), Arc::from(r.entry));
        } else {
            own.failed.insert(r.name());
            bad.push(at);
        }
    }
    (own, bad)
}

/// Whether an entry file modified at `modified` was written from a waiting record stamped
/// `stamp` (stamped with it, or with a later use), so that the record is a copy: not an older
/// file of the key it was compiled again to replace, nor an entry file moved into the waiting
/// file (stamped a nanosecond before its record, [`holders`]), which its process removes. The
/// bound's order and the writer's pass-over ask it alike.
pub(crate) fn written_from_record(modified: SystemTime, stamp: SystemTime) -> bool {
    modified >= stamp
}

/// A waiting file shorter than this is written as it is ([`pack`]): what it could save is a few
/// KiB, and the bound, which counts a packed file's records at their shares of its bytes, drops
/// the records of a file of a few entries exactly.
const PACKED_FROM: usize = 64 << 10;

/// The bytes written for the waiting file `file`: packed ([`MAGIC_PACKED`], then one zstd frame
/// of it) where that saves an eighth of them or more ([`compress::compress`]'s rule), else as it
/// is (NVIDIA's data, its own zstd frames, does not shrink; nor is a file under [`PACKED_FROM`]
/// tried). Compressed once, where the file is
/// written: a later process that wrote fewer than half of its entries keeps it as it is.
pub fn pack(file: Vec<u8>) -> Vec<u8> {
    pack_again(file, false)
}

/// [`pack`] for a file written again (the bound's, `pipekeep verify --fix`'s): one read `packed`
/// is packed where that pays however short it is now, or it would take more on disk than its
/// records' shares of it the bound counted.
fn pack_again(file: Vec<u8>, packed: bool) -> Vec<u8> {
    if file.len() < PACKED_FROM && !packed {
        return file;
    }
    match compress::compress(&file, MAGIC_PACKED.len()) {
        Some(frame) => [&MAGIC_PACKED[..], &frame].concat(),
        None => file,
    }
}

/// The file a waiting file's bytes on disk stand for: a packed one's frame decompressed
/// ([`pack`]), any other as it is. `None` where it stands for more than a waiting file may be
/// ([`MOST_BYTES`]: no room is set aside for it). A packed file whose frame does not decompress
/// whole, exactly to the length it states, reads as its bytes on disk: no record (damaged; its
/// entries are compiled again, as a file cut short before its first record).
pub fn unpack(on_disk: Vec<u8>) -> Option<Vec<u8>> {
    let Some(frame) = on_disk.strip_prefix(MAGIC_PACKED.as_slice()) else {
        return Some(on_disk);
    };
    match compress::stated_len(frame) {
        Some(len) if len > MOST_BYTES => None,
        Some(len) => {
            let read = compress::decompress(frame, len as usize);
            Some(read.unwrap_or(on_disk))
        }
        None => Some(on_disk),
    }
}

/// `part` of a file's `logical` bytes (as it stands unpacked) as a share of its `on_disk` bytes.
fn share_on_disk(on_disk: usize, part: usize, logical: usize) -> u64 {
    match logical {
        0 => 0,
        _ => (on_disk as u128 * part as u128 / logical as u128) as u64,
    }
}

/// The file's bytes. Never through a link, never waiting on a FIFO (`files::read_within`); one
/// larger than [`MOST_BYTES`] is removed unread.
fn read_whole(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    match read_bounded(path)? {
        Some(bytes) => Ok(bytes),
        None => {
            fs::remove_file(path)?;
            Err(std::io::Error::other("larger than a waiting file may be"))
        }
    }
}

/// The file's bytes (the file a packed one stands for: [`unpack`]), or `None` where it is larger
/// than a waiting file may be ([`MOST_BYTES`], on disk or unpacked). Never through a link, never
/// waiting on a FIFO (`files::read_within`).
pub fn read_bounded(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    Ok(read_bounded_sized(path)?.map(|(bytes, _)| bytes))
}

/// The length a packed file's frame states it holds unpacked, read from its head alone (`None`
/// for a file not packed, or one whose frame states none): how `pipekeep verify` tells a packed
/// file stating too much from one too large on disk.
pub fn stated_unpacked_len(path: &Path) -> Option<u64> {
    let head = files::read_at_most(path, (MAGIC_PACKED.len() + compress::FRAME_HEAD_MAX) as u64);
    compress::stated_len(head.ok()?.strip_prefix(MAGIC_PACKED.as_slice())?)
}

/// [`read_bounded`], with the file's length on disk (what the bound counts).
pub fn read_bounded_sized(path: &Path) -> std::io::Result<Option<(Vec<u8>, u64)>> {
    let Some(on_disk) = files::read_within(path, MOST_BYTES)? else {
        return Ok(None);
    };
    let len = on_disk.len() as u64;
    Ok(unpack(on_disk).map(|bytes| (bytes, len)))
}

#[cfg(test)]
pub(crate) mod tests;
