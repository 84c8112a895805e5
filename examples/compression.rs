//! What compressing a store's parts keeps and what it costs the found path: the measurement
//! behind `store::compress::LEVEL` and its rule (docs/FORMAT.md, "Choosing the level"). Reads
//! every entry of an identity directory and every piece it names, as the store holds them, then
//!
//! - counts the bytes the same entries and pieces take as they are (format 2) and compressed
//!   at each zstd level, under two rules: any saving kept, or only a saving of an eighth or more
//!   (the store's), each part at least 128 bytes long (parts shorter are never tried);
//! - writes the directory twice into temporary stores, once as format 2 wrote it (nothing
//!   compressed) and once as the store writes now, and times a lookup of every entry through
//!   `Store::lookup` (open, read, decompress, every check), rounds of each interleaved: the first
//!   round of a fresh store reads every piece from its file, later rounds take them from memory;
//! - and times decode and check alone (`payload::check` on the entry's bytes in memory, its
//!   pieces held), both ways.
//!
//!   cargo run --release --example compression -- <identity dir> [rounds, default 7]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use pipekeep::key::PipelineKey;
use pipekeep::store::envelope::{self, Body, PayloadKind, ENVELOPE_LEN};
use pipekeep::store::identity::{DirName, Identity};
use pipekeep::store::inspect::entry_files;
use pipekeep::store::pieces::{self, Pieces};
use pipekeep::store::recipe::{Part, PieceName};
use pipekeep::store::{Lookup, Store};

/// One entry as the store holds it: its parts, the inline ones' bytes owned.
struct Entry {
    key: PipelineKey,
    kind: PayloadKind,
    parts: Vec<Held>,
}

enum Held {
    Inline(Vec<u8>),
    Piece(PieceName, u64),
    List(PieceName, u64),
}

impl Held {
    fn part(&self) -> Part<'_> {
        match self {
            Held::Inline(b) => Part::Inline(b),
            Held::Piece(name, len) => Part::Piece {
                name: *name,
                len: *len,
            },
            Held::List(name, len) => Part::List {
                name: *name,
                len: *len,
            },
        }
    }
}

/// A piece's name, its bytes uncompressed, and whether it is a list.
type PieceRead = (PieceName, Vec<u8>, bool);

fn identity_of(dir: &Path) -> Identity {
    let name = DirName::parse(dir.file_name().unwrap().to_str().unwrap()).expect("an identity dir");
    Identity {
        vendor_id: name.vendor_id,
        device_id: name.device_id,
        driver_version: name.driver_version,
        cache_uuid: name.cache_uuid,
        abi: 8,
    }
}

/// Every entry of `dir`, and every piece file's bytes uncompressed, by name (lists among them).
fn read_store(dir: &Path) -> (Vec<Entry>, Vec<PieceRead>) {
    let identity = identity_of(dir);
    let mut entries = Vec::new();
    for path in entry_files(dir).unwrap() {
        let key = PipelineKey::from_file_name(path.file_name().unwrap().to_str().unwrap()).unwrap();
        let file = std::fs::read(&path).unwrap();
        let decoded = match envelope::decode(&file, &identity, &key) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                continue;
            }
        };
        let parts = match decoded.body() {
            Body::Whole(b) => vec![Held::Inline(b.to_vec())],
            Body::Parts { parts, .. } => parts
                .iter()
                .map(|p| match p {
                    Part::Inline(b) => Held::Inline(b.to_vec()),
                    Part::Piece { name, len } => Held::Piece(*name, *len),
                    Part::List { name, len } => Held::List(*name, *len),
                    Part::Packed { .. } => unreachable!("decoded bodies hold none"),
                })
                .collect(),
        };
        entries.push(Entry {
            key,
            kind: decoded.kind,
            parts,
        });
    }
    let lists: std::collections::HashSet<PieceName> = entries
        .iter()
        .flat_map(|e| e.parts.iter())
        .filter_map(|p| match p {
            Held::List(name, _) => Some(*name),
            _ => None,
        })
        .collect();
    let mut pieces_read = Vec::new();
    for (name, path) in pieces::listed(dir) {
        let file = std::fs::read(&path).unwrap();
        match pieces::content_of(file, &name) {
            Some(bytes) => pieces_read.push((name, bytes, lists.contains(&name))),
            None => eprintln!("{}: does not match its name", path.display()),
        }
    }
    (entries, pieces_read)
}

/// The bytes a part of `len` bytes takes stored at `level` under the rule (`eighth`: only a
/// saving of an eighth or more), a head of `head` bytes counted against the saving.
fn stored_len(bytes: &[u8], head: usize, level: i32, eighth: bool) -> usize {
    if bytes.len() < 128 {
        return bytes.len();
    }
    let frame = zstd::bulk::compress(bytes, level).unwrap();
    let saving = bytes.len() as i64 - (frame.len() + head) as i64;
    let pays = match eighth {
        true => saving >= (bytes.len() / 8) as i64,
        false => saving > 0,
    };
    match pays {
        true => frame.len() + head,
        false => bytes.len(),
    }
}

/// The bytes of entries and of pieces, as they are (`level` `None`) or compressed.
fn kept(entries: &[Entry], pieces: &[PieceRead], level: Option<i32>, eighth: bool) -> (u64, u64) {
    let mut entry_bytes = 0u64;
    for e in entries {
        entry_bytes += (ENVELOPE_LEN + 16) as u64;
        for p in &e.parts {
            entry_bytes += 16;
            entry_bytes += match (p, level) {
                (Held::Inline(b), Some(l)) => stored_len(b, 0, l, eighth) as u64,
                (Held::Inline(b), None) => b.len() as u64,
                _ => 32,
            };
        }
    }
    let piece_bytes = pieces
        .iter()
        .map(|(_, b, is_list)| match (level, is_list) {
            (Some(l), false) => stored_len(b, pieces::FRAMED_HEAD_LEN, l, eighth) as u64,
            _ => b.len() as u64,
        })
        .sum();
    (entry_bytes, piece_bytes)
}

/// Writes the entries and pieces into a store of its own under `root`, as format 2 wrote them
/// (`packed` false) or as the store writes now.
fn write_store(
    root: &Path,
    identity: &Identity,
    entries: &[Entry],
    pieces_read: &[PieceRead],
    packed: bool,
) -> PathBuf {
    let dir = pipekeep::store::host_pipelines_dir(root, "t").join(identity.dir_name());
    std::fs::create_dir_all(dir.join(pieces::DIR)).unwrap();
    for e in entries {
        let parts: Vec<Part<'_>> = e.parts.iter().map(Held::part).collect();
        let bytes = match packed {
            true => envelope::encode_parts(identity, &e.key, e.kind, &parts),
            false => envelope::encode_format_two(identity, &e.key, e.kind, &parts),
        };
        std::fs::write(dir.join(e.key.file_name()), bytes).unwrap();
    }
    let piece_files = Pieces::new(&dir);
    for (name, bytes, is_list) in pieces_read {
        let file = match (packed, is_list) {
            (true, false) => pieces::frame(bytes),
            _ => None,
        };
        std::fs::write(
            piece_files.path(name),
            file.as_deref().unwrap_or(bytes.as_slice()),
        )
        .unwrap();
    }
    dir
}

/// One round of lookups of every entry through a fresh store: the whole round, and the second
/// pass over the same store (its pieces then held in memory).
fn lookups(root: &Path, identity: Identity, entries: &[Entry]) -> (Duration, Duration) {
    let (store, _) = Store::open(root, "t", identity, u64::MAX, SystemTime::now()).unwrap();
    let pass = || {
        let t = Instant::now();
        for e in entries {
            match store.lookup(&e.key).unwrap() {
                Lookup::Found(found) => drop(std::hint::black_box(found)),
                Lookup::Dropped(why) => panic!("{}: dropped, {why}", e.key.file_name()),
                _ => panic!("{}: not found", e.key.file_name()),
            }
        }
        t.elapsed()
    };
    let first = pass();
    (first, pass())
}

/// Decode and check of every entry from memory, its pieces held: the CPU the found path spends.
fn checks(dir: &Path, identity: &Identity, entries: &[Entry]) -> Duration {
    let held = Pieces::for_looking(dir);
    held.set_memory_limit(1 << 30);
    let files: Vec<(PipelineKey, Arc<Vec<u8>>)> = entries
        .iter()
        .map(|e| {
            let file = std::fs::read(dir.join(e.key.file_name())).unwrap();
            (e.key, Arc::new(file))
        })
        .collect();
    let pass = || {
        let t = Instant::now();
        for (key, file) in &files {
            let checked =
                pipekeep::store::payload::check(Arc::clone(file), identity, key, &held).unwrap();
            std::hint::black_box(checked);
        }
        t.elapsed()
    };
    pass(); // every piece read once, then held
    pass()
}

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(
        args.first()
            .expect("usage: compression <identity dir> [rounds]"),
    );
    let rounds: usize = args.get(1).map_or(7, |r| r.parse().unwrap());
    let identity = identity_of(&dir);
    let (entries, pieces_read) = read_store(&dir);
    let named: u64 = entries
        .iter()
        .flat_map(|e| e.parts.iter())
        .map(|p| p.part().len())
        .sum();
    println!(
        "{} entries ({} payload bytes named), {} pieces",
        entries.len(),
        named,
        pieces_read.len()
    );
    let (e0, p0) = kept(&entries, &pieces_read, None, false);
    println!("| level | rule | entries' bytes | pieces' bytes | kept | kept / as they are |");
    println!("| --- | --- | --- | --- | --- | --- |");
    println!(
        "| as they are (format 2) | | {e0} | {p0} | {} | 1.000 |",
        e0 + p0
    );
    for level in [-5, -1, 1, 2, 3, 6, 9, 19] {
        for eighth in [false, true] {
            let t = Instant::now();
            let (e, p) = kept(&entries, &pieces_read, Some(level), eighth);
            println!(
                "| {level} | {} | {e} | {p} | {} | {:.3} ({:.1} s to compress) |",
                if eighth { "an eighth" } else { "any saving" },
                e + p,
                (e + p) as f64 / (e0 + p0) as f64,
                t.elapsed().as_secs_f64()
            );
        }
    }
    let root = tempfile::tempdir().unwrap();
    let (as_is, packed) = (root.path().join("as-is"), root.path().join("packed"));
    let dir_as_is = write_store(&as_is, &identity, &entries, &pieces_read, false);
    let dir_packed = write_store(&packed, &identity, &entries, &pieces_read, true);
    let mut times: [Vec<(Duration, Duration)>; 2] = [Vec::new(), Vec::new()];
    let mut check_times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (i, (root, dir)) in [(&as_is, &dir_as_is), (&packed, &dir_packed)]
            .into_iter()
            .enumerate()
        {
            times[i].push(lookups(root, identity, &entries));
            check_times[i].push(checks(dir, &identity, &entries));
        }
    }
    println!();
    println!(
        "medians of {rounds} interleaved rounds, {} entries each",
        entries.len()
    );
    println!("| stored | lookups, a fresh store (pieces read) | lookups again (pieces held) | decode and check from memory |");
    println!("| --- | --- | --- | --- |");
    for (i, label) in ["as they are (format 2)", "compressed (format 3)"]
        .into_iter()
        .enumerate()
    {
        println!(
            "| {label} | {} | {} | {} |",
            ms(median(times[i].iter().map(|t| t.0).collect())),
            ms(median(times[i].iter().map(|t| t.1).collect())),
            ms(median(check_times[i].clone()))
        );
    }
}
