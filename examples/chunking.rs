//! How a store's entries would be kept under other chunk sizes: the measurement behind
//! `recipe::Chunking::CHOSEN` (docs/FORMAT.md). Reads every entry of an identity directory,
//! puts its payload together, cuts it again under each choice, and counts what would be kept:
//! the entries' own bytes (envelope, list of parts, inline bytes) and each distinct piece and
//! list once. NVIDIA's data cut record by record is counted as the store keeps it once every
//! entry is written: a record a piece where another entry carries it too.
//!
//!   cargo run --release --example chunking -- <identity dir> [monolithic cache file]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use pipekeep::key::PipelineKey;
use pipekeep::store::envelope::{PayloadKind, ENVELOPE_LEN};
use pipekeep::store::identity::{DirName, Identity};
use pipekeep::store::inspect::entry_files;
use pipekeep::store::pieces::Pieces;
use pipekeep::store::recipe::{plan, plan_with, Chunking, Planned};

/// One payload, as the store holds it now.
struct Payload {
    kind: PayloadKind,
    bytes: Vec<u8>,
}

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

fn payloads(dir: &Path) -> Vec<Payload> {
    let identity = identity_of(dir);
    let pieces = Pieces::for_looking(dir);
    pieces.set_memory_limit(1 << 30);
    let mut out = Vec::new();
    for path in entry_files(dir).unwrap() {
        let key = PipelineKey::from_file_name(path.file_name().unwrap().to_str().unwrap()).unwrap();
        let file = std::sync::Arc::new(std::fs::read(&path).unwrap());
        match pipekeep::store::payload::check(file, &identity, &key, &pieces) {
            Ok(checked) => out.push(Payload {
                kind: checked.kind,
                bytes: checked.payload.with_bytes(<[u8]>::to_vec),
            }),
            Err(e) => eprintln!("{}: {e}", path.display()),
        }
    }
    out
}

#[derive(Default)]
struct Kept {
    entry_bytes: u64,
    pieces: HashMap<[u8; 32], u64>,
    parts: u64,
    most_parts: u64,
}

/// How many payloads name each piece when every candidate is a piece.
fn carriers(payloads: &[Payload], chunking: Chunking) -> HashMap<[u8; 32], u32> {
    let mut count = HashMap::new();
    for p in payloads {
        let mut names: Vec<[u8; 32]> = plan(p.kind, &p.bytes, chunking)
            .iter()
            .flat_map(|c| match c {
                Planned::Piece(name, _) => vec![*name],
                Planned::List { pieces, .. } => pieces.iter().map(|(n, _)| *n).collect(),
                Planned::Inline(_) => Vec::new(),
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .for_each(|n| *count.entry(n).or_insert(0) += 1);
    }
    count
}

fn keep(payloads: &[Payload], chunking: Chunking) -> Kept {
    let carried = chunking.records_from.map(|_| carriers(payloads, chunking));
    let shared = |name: &[u8; 32]| {
        carried
            .as_ref()
            .is_none_or(|c| c.get(name).is_some_and(|&n| n > 1))
    };
    let kept = Mutex::new(Kept::default());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..std::thread::available_parallelism().map_or(4, |n| n.get()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(p) = payloads.get(i) else { break };
                let planned = plan_with(p.kind, &p.bytes, chunking, &shared, None);
                let mut entry = (ENVELOPE_LEN + 16) as u64;
                let mut named = Vec::new();
                for c in &planned {
                    entry += 16;
                    match c {
                        Planned::Inline(b) => entry += b.len() as u64,
                        Planned::Piece(name, b) => {
                            entry += 32;
                            named.push((*name, b.len() as u64));
                        }
                        Planned::List {
                            name,
                            bytes,
                            pieces,
                            ..
                        } => {
                            entry += 32;
                            named.push((*name, bytes.len() as u64));
                            named.extend(pieces.iter().map(|(n, b)| (*n, b.len() as u64)));
                        }
                    }
                }
                let mut k = kept.lock().unwrap();
                k.entry_bytes += entry;
                k.parts += planned.len() as u64;
                k.most_parts = k.most_parts.max(planned.len() as u64);
                k.pieces.extend(named);
            });
        }
    });
    kept.into_inner().unwrap()
}

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let dir = args
        .first()
        .expect("usage: chunking <identity dir> [monolithic cache]");
    let monolithic = args
        .get(1)
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|m| m.len());
    let payloads = payloads(dir);
    let named: u64 = payloads.iter().map(|p| p.bytes.len() as u64).sum();
    println!(
        "{} entries, {} payload bytes named{}",
        payloads.len(),
        named,
        monolithic.map_or(String::new(), |m| format!(", monolithic cache {m} bytes"))
    );
    println!("| records from | chunked from | min | avg | max | entries' bytes | pieces | pieces' bytes | kept bytes | kept / named | kept / monolithic | parts an entry (mean, most) |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let kib = |n: usize| n >> 10;
    let mut choices = vec![Chunking {
        records_from: None,
        from: usize::MAX,
        ..Chunking::CHOSEN
    }];
    for records_from in [256, 1 << 10, 4 << 10, 16 << 10] {
        choices.push(Chunking {
            records_from: Some(records_from),
            ..Chunking::CHOSEN
        });
    }
    for from in [8 << 10, 16 << 10, 64 << 10] {
        for (min, avg, max) in [
            (256, 1 << 10, 8 << 10),
            (512, 2 << 10, 16 << 10),
            (1 << 10, 4 << 10, 32 << 10),
            (2 << 10, 8 << 10, 64 << 10),
            (4 << 10, 16 << 10, 128 << 10),
        ] {
            choices.push(Chunking {
                records_from: None,
                from,
                min,
                avg,
                max,
            });
        }
    }
    for c in choices {
        let k = keep(&payloads, c);
        let piece_bytes: u64 = k.pieces.values().sum();
        let kept = k.entry_bytes + piece_bytes;
        println!(
            "| {} | {} | {} KiB | {} KiB | {} KiB | {} | {} | {} | {} | {:.3} | {} | {:.1}, {} |",
            c.records_from
                .map_or("never".to_string(), |r| format!("{r} B")),
            if c.from == usize::MAX {
                "never".to_string()
            } else {
                format!("{} KiB", kib(c.from))
            },
            kib(c.min),
            kib(c.avg),
            kib(c.max),
            k.entry_bytes,
            k.pieces.len(),
            piece_bytes,
            kept,
            kept as f64 / named.max(1) as f64,
            monolithic.map_or("-".into(), |m| format!("{:.2}", kept as f64 / m as f64)),
            k.parts as f64 / payloads.len().max(1) as f64,
            k.most_parts
        );
    }
}
