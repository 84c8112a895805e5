//! Micro-benchmarks of the store and the keys, as ratios measured in one run (never asserted):
//! keys a second for a typical compute and graphics pipeline; opening a store of 10,000 and
//! 100,000 entries; reading and verifying a 6 KB and a 3 MB entry against the raw read of the
//! same bytes, and a 6 KB entry of code-like bytes compressed against the same as format 2 held
//! it (nothing compressed); a bound pass over a store of 3,000 entries naming pieces; writing
//! NVIDIA's entries that carry its dictionary, the dictionary hashed for each against known.
//! Prints a Markdown table. `cargo bench --bench micro` (scripts/bench.sh runs it); `cargo bench
//! --bench micro -- bound` runs the bound's measure alone, `-- read` the reads', `-- write` the
//! writes'.

#[path = "../tests/common/mod.rs"]
mod common;
use common::{cache_data, identity, numbered_key as key};
use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use pipekeep::key::desc::*;
use pipekeep::key::{compute_key, graphics_key, Digest};
use pipekeep::store::{bound, envelope, nvidia_cache, recipe, recipe::Chunking, Lookup, Store};

/// The median of `rounds` timings of `f`, each over `iters` calls.
fn median_per_call(rounds: usize, iters: u32, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed() / iters
        })
        .collect();
    times.sort();
    times[rounds / 2]
}

fn stage(stage: u32, spec_constants: u32) -> StageDesc {
    StageDesc {
        stage,
        flags: 0,
        module: Digest([7; 32]),
        entry_point: b"main".to_vec(),
        specialization: (0..spec_constants)
            .map(|i| SpecConstant {
                constant_id: i,
                value: (i * 3).to_le_bytes().to_vec(),
            })
            .collect(),
        required_subgroup_size: Some(32),
        robustness: None,
    }
}

fn graphics() -> GraphicsDesc {
    GraphicsDesc {
        device: Digest([9; 32]),
        flags: 0,
        stages: vec![stage(1, 0), stage(16, 2)],
        vertex_input: Some(VertexInputDesc {
            flags: 0,
            bindings: vec![VertexBinding {
                binding: 0,
                stride: Some(32),
                input_rate: 0,
            }],
            attributes: (0..4)
                .map(|l| VertexAttribute {
                    location: l,
                    binding: 0,
                    format: 109,
                    offset: l * 8,
                })
                .collect(),
        }),
        input_assembly: Some(InputAssemblyDesc {
            flags: 0,
            topology: 3,
            primitive_restart: Some(false),
        }),
        tessellation_patch_control_points: None,
        viewport: Some(ViewportDesc {
            flags: 0,
            viewport_count: Some(1),
            viewports: None,
            scissor_count: Some(1),
            scissors: None,
        }),
        rasterization: RasterizationDesc {
            line_width: Some(1.0),
            ..Default::default()
        },
        multisample: Some(MultisampleDesc {
            rasterization_samples: 1,
            sample_mask: Some(vec![!0]),
            ..Default::default()
        }),
        depth_stencil: Some(DepthStencilDesc {
            depth_test_enable: Some(true),
            ..Default::default()
        }),
        color_blend: Some(ColorBlendDesc {
            attachments: vec![
                BlendAttachment {
                    color_write_mask: 15,
                    ..Default::default()
                };
                2
            ],
            ..Default::default()
        }),
        dynamic_states: vec![0, 1, 4, 8],
        layout: Digest([3; 32]),
        target: RenderTarget::Pass {
            pass: Digest([5; 32]),
            subpass: 0,
        },
        robustness: None,
        library: None,
        extensions: Default::default(),
    }
}

fn opening(entries: u32) -> (Duration, Duration) {
    let root = tempfile::tempdir().unwrap();
    let (store, _) =
        Store::open(root.path(), "t", identity(), u64::MAX, SystemTime::now()).unwrap();
    let data = cache_data(7, 200);
    for n in 0..entries {
        store.write(&key(n), &data).unwrap();
    }
    drop(store);
    let mut times: Vec<Duration> = (0..3)
        .map(|_| {
            let t = Instant::now();
            let opened =
                Store::open(root.path(), "t", identity(), u64::MAX, SystemTime::now()).unwrap();
            black_box(opened);
            t.elapsed()
        })
        .collect();
    times.sort();
    // The same with the bound in force (every entry stat'ed and sorted, none dropped).
    let t = Instant::now();
    black_box(
        Store::open(
            root.path(),
            "t",
            identity(),
            (entries as u64) * 1000,
            SystemTime::now(),
        )
        .unwrap(),
    );
    (times[1], t.elapsed())
}

/// Pipeline-cache data of `len` bytes that compresses to about half, as RADV's code does (16
/// bytes of noise, then 16 of a few values, over and over).
fn half_compressible(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let body = (0..len).map(|i| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        match i % 32 < 16 {
            true => (x >> 32) as u8,
            false => (i / 32 % 4) as u8,
        }
    });
    let mut data = cache_data(7, 0);
    data.extend(body);
    data
}

/// A lookup of an entry of `data`: the raw read of its file, then the lookup of it as the store
/// writes it (compressed where that pays), then of the same payload as format 2 wrote it (nothing
/// compressed), and the bytes of each file.
fn read_verify(data: &[u8]) -> ([Duration; 3], [u64; 2]) {
    let root = tempfile::tempdir().unwrap();
    let (store, _) =
        Store::open(root.path(), "t", identity(), u64::MAX, SystemTime::now()).unwrap();
    store.write(&key(1), data).unwrap();
    let (packed, as_is) = (store.entry_path(&key(1)), store.entry_path(&key(2)));
    // Format 2's entry of the same payload, its pieces (a large payload's) the ones just written.
    let bytes = std::fs::read(&packed).unwrap();
    let decoded = envelope::decode(&bytes, &identity(), &key(1)).unwrap();
    let parts = match decoded.body() {
        envelope::Body::Whole(b) => vec![recipe::Part::Inline(b)],
        envelope::Body::Parts { parts, .. } => parts,
    };
    let two = envelope::encode_format_two(&identity(), &key(2), decoded.kind, &parts);
    std::fs::write(&as_is, &two).unwrap();
    drop(store);
    let (store, _) =
        Store::open(root.path(), "t", identity(), u64::MAX, SystemTime::now()).unwrap();
    let iters = if data.len() > 1 << 20 { 200 } else { 20_000 };
    let raw = median_per_call(9, iters, || {
        drop(black_box(std::fs::read(&packed).unwrap()))
    });
    let lookup = |n| {
        median_per_call(9, iters, || match store.lookup(&key(n)).unwrap() {
            Lookup::Found(e) => drop(black_box(e)),
            _ => panic!("not found"),
        })
    };
    let sizes = [bytes.len() as u64, two.len() as u64];
    ([raw, lookup(1), lookup(2)], sizes)
}

/// A bound pass over a store of `entries` entries naming pieces (each payload a head of its own
/// and a block all of them share, chunked finely: about 30 parts an entry, as NVIDIA's are),
/// the bound a tenth below the store: the tool's plan (the listing, and in it every entry's
/// names, nothing removed); then the pass itself, the bound a byte below the store (one file
/// removed: the listing and the order, not the file system's removals). Returns both times and
/// the files listed.
fn bound_pass(entries: u32) -> (Duration, Duration, usize) {
    let root = tempfile::tempdir().unwrap();
    let (store, _) =
        Store::open(root.path(), "t", identity(), u64::MAX, SystemTime::now()).unwrap();
    store.set_chunking(Chunking::fine_from(1024));
    let block = cache_data(3, 6 << 10);
    for n in 0..entries {
        let mut data = cache_data(n | 1, 2 << 10);
        data.extend_from_slice(&block);
        store.write(&key(n), &data).unwrap();
    }
    drop(store);
    let host = root.path().join("t/host-pipelines");
    let listed = bound::entries_of_title(&host).unwrap();
    let total: u64 = listed.iter().map(|e| e.bytes).sum();
    let max = total - total / 10;
    let t = Instant::now();
    black_box(bound::plan_eviction(
        bound::entries_of_title(&host).unwrap(),
        0,
        max,
    ));
    let plan = t.elapsed();
    let t = Instant::now();
    black_box(bound::keep_within(&host, total - 1, &|_| false).unwrap());
    (plan, t.elapsed(), listed.len())
}

/// NVIDIA's cache data as its driver frames it (`src/store/nvidia_cache.rs`): a Vulkan header,
/// the count, then each record's 60-byte head (key, length, `CPKV`, key again, hash, length) and
/// its bytes.
fn nvidia_data(records: &[(&[u8; 16], &[u8])]) -> Vec<u8> {
    let mut out = vec![
        0x20, 0, 0, 0, 1, 0, 0, 0, 0xde, 0x10, 0, 0, 0x35, 0x23, 0, 0,
    ];
    out.extend_from_slice(&[0x5a; 16]);
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    for (key, data) in records {
        let n = (data.len() as u32).to_le_bytes();
        let hash = u64::from(data.len() as u32 ^ u32::from(key[0]));
        for part in [
            &key[..],
            &n,
            b"CPKV",
            &[0; 4],
            &key[..],
            &hash.to_le_bytes(),
            &n,
            &[0; 4],
        ] {
            out.extend_from_slice(part);
        }
        out.extend_from_slice(data);
    }
    out
}

/// Writing `entries` of NVIDIA's entries, each 13 KB of its own beside the driver's 1.78 MB
/// dictionary (ncnn's at its first launch's end, 16 threads on the H100: 279-477 of them), to a
/// fresh store each way: the dictionary's record hashed again as each entry is cut, against known
/// ([`recipe::KnownPiece`], named once, as the writer holds it). Each entry's data is put
/// together as it is written, as the writer puts back the record it holds apart. The medians of
/// `rounds` rounds, each way in turn.
fn dictionary_writes(entries: u32, rounds: usize) -> (Duration, Duration) {
    let noise = |seed: u32, len: usize| -> Vec<u8> {
        let mut x = seed.wrapping_mul(2_654_435_761) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    };
    let mut dictionary_key = [0xdd; 16];
    dictionary_key[8..].copy_from_slice(b"_NVDICT_");
    let dictionary = noise(1, 1_780_000);
    let data = |n: u32| {
        nvidia_data(&[
            (&[n as u8; 16], &noise(n + 2, 13_000)),
            (&dictionary_key, &dictionary),
        ])
    };
    let first = data(0);
    let framing = nvidia_cache::frame_bytes(&first).unwrap();
    let known = recipe::KnownPiece::new(framing.dictionary_record(&first));
    // The identity the data's header names: an entry read back (its first holder written again
    // naming the dictionary) is its own.
    let nvidia = pipekeep::store::Identity {
        vendor_id: 0x10de,
        device_id: 0x2335,
        cache_uuid: [0x5a; 16],
        ..identity()
    };
    let write_all = |known: Option<&recipe::KnownPiece>| {
        let root = tempfile::tempdir().unwrap();
        let (store, _) =
            Store::open(root.path(), "t", nvidia, u64::MAX, SystemTime::now()).unwrap();
        let t = Instant::now();
        for n in 0..entries {
            let (kind, stamp) = (envelope::PayloadKind::Cache, SystemTime::now());
            store
                .write_announced_knowing(&key(n), kind, &data(n), known, stamp)
                .unwrap();
        }
        t.elapsed()
    };
    let (mut hashed, mut named) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        hashed.push(write_all(None));
        named.push(write_all(Some(&known)));
    }
    hashed.sort();
    named.sort();
    (hashed[rounds / 2], named[rounds / 2])
}

fn write_lines() {
    let entries = 477;
    let (hashed, named) = dictionary_writes(entries, 3);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| writing {entries} of NVIDIA's entries, 13 KB of their own beside one 1.78 MB dictionary (medians of 3): its name known, against hashed for each | {:.1} ms against {:.1} ms: {:.2}x | |",
        ms(named), ms(hashed), named.as_secs_f64() / hashed.as_secs_f64()
    );
}

fn main() {
    if std::env::args().any(|a| a == "read") {
        read_lines();
        return;
    }
    if std::env::args().any(|a| a == "write") {
        write_lines();
        return;
    }
    if std::env::args().any(|a| a == "bound") {
        for _ in 0..5 {
            let (plan, pass, files) = bound_pass(3_000);
            println!("| a bound pass over 3000 entries naming pieces ({files} files): the plan a tenth over, the pass a byte over | plan {:.1} ms, pass {:.1} ms | |", plan.as_secs_f64() * 1e3, pass.as_secs_f64() * 1e3);
        }
        return;
    }
    let compute = ComputeDesc {
        device: Digest([9; 32]),
        flags: 0,
        stage: stage(32, 13),
        layout: Digest([1; 32]),
        robustness: None,
    };
    let g = graphics();
    let ck = median_per_call(9, 100_000, || {
        black_box(compute_key(black_box(&compute)));
    });
    let gk = median_per_call(9, 100_000, || {
        black_box(graphics_key(black_box(&g)));
    });
    println!("| measure | result | goal |");
    println!("| --- | --- | --- |");
    println!("| key of a compute pipeline (13 spec constants, subgroup size) | {:.2} us ({:.0} keys/s) | < 5 us |", ck.as_secs_f64() * 1e6, 1.0 / ck.as_secs_f64());
    println!("| key of a graphics pipeline (2 stages, every state block) | {:.2} us ({:.0} keys/s) | < 5 us |", gk.as_secs_f64() * 1e6, 1.0 / gk.as_secs_f64());
    for n in [10_000, 100_000] {
        let (open, bounded) = opening(n);
        println!("| opening a store of {n} entries (median of 3; once more with a bound to keep) | {:.1} ms ({:.1} ms bounded) | {} |", open.as_secs_f64() * 1e3, bounded.as_secs_f64() * 1e3, if n == 10_000 { "< 100 ms" } else { "< 1 s" });
    }
    let (plan, pass, files) = bound_pass(3_000);
    println!("| a bound pass over 3000 entries naming pieces ({files} files): the plan a tenth over, the pass a byte over | plan {:.1} ms, pass {:.1} ms | < 100 ms |", plan.as_secs_f64() * 1e3, pass.as_secs_f64() * 1e3);
    read_lines();
    write_lines();
}

/// The lines of reading and verifying entries (`cargo bench --bench micro -- read` alone): each
/// entry as the store writes it (compressed where that pays), against the raw read of its file
/// and the lookup of the same payload as format 2 held it (nothing compressed).
fn read_lines() {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    // A 3 MB payload is kept in pieces: the entry names them, and a lookup takes them from
    // memory (each piece decompressed once, at the first). The code-like bytes compress to about
    // half, as RADV's do; the others (a pattern of 256 bytes) to almost nothing.
    for (label, data) in [
        ("6 KB entry", cache_data(7, 6 * 1024)),
        ("3 MB entry", cache_data(7, 3 << 20)),
        ("6 KB entry of code-like bytes", half_compressible(6 * 1024)),
    ] {
        let ([raw, packed, as_is], [packed_len, as_is_len]) = read_verify(&data);
        println!(
            "| read and verify a {label} ({packed_len} bytes; format 2: {as_is_len}), against the raw read of its file; format 2's lookup | {:.1} us against {:.1} us: {:.2}x; format 2 {:.1} us | <= 1.2x |",
            us(packed), us(raw), packed.as_secs_f64() / raw.as_secs_f64(), us(as_is)
        );
    }
}
