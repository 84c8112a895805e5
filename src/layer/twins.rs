//! What a shared cache would serve, the `cache` backend serves too. An application passes one
//! pipeline cache to every call, and its drivers serve a pipeline from the data of earlier ones:
//! whole where one had the same shaders (pygfx's database holds 256 pipelines right after a
//! near-twin that differs only in `cullMode`, which RADV, 255 of 639 in Valve's replayer, and
//! NVIDIA, 266 at one thread and 248 at 16, serve as hits), and in part where one shared a stage
//! (NVIDIA 580, pygfx at 16 threads in an experiment without the layer or the disk cache: its
//! pipelines each through a fresh cache cost the driver 2.2-2.5x one shared cache; seeded with the
//! last data of their twin, 1.4-1.6x; with that and the last of each stage's, 1.0-1.2x). The `cache`
//! backend builds each pipeline through a cache of its own, so a miss is built through a fresh
//! cache seeded so: with the data of the first pipeline this run compiled with the same SPIR-V
//! (the key's `spirv` half: every stage's code, entry point and specialization), else with the
//! data of the first compiled with each of its stages ([`crate::key::stage_code_key`]). The
//! driver's own key decides what of it fits (a hit, or a compile that adds its own records).
//!
//! The seed is what this run's driver wrote, so it is whole and of this device; NVIDIA's data is
//! held without the dictionary its driver already holds (it makes a cache of the rest, as for a
//! found entry without it). Seeds of several stages are put together record by record, which
//! only NVIDIA's framing lets the layer do; another driver's data seeds its twins alone. Held
//! within [`MOST_BYTES`] (whatever the driver), the oldest let go first: a database's twins
//! follow one another in its file, but replay tools take pipelines in hash order, where a
//! pipeline's twin comes long after it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::store::nvidia_cache;
use crate::sync::Unpoisoned;

/// The most bytes of seeds held at once, whatever the driver: about a run's worth of NVIDIA's
/// data for pygfx's 641 pipelines, less in a 32-bit process.
const MOST_BYTES: usize = if cfg!(target_pointer_width = "64") {
    64 << 20
} else {
    16 << 20
};

/// The most bytes of data held as a stage's seed. A build seeded by its stages holds their data
/// too, and may seed another stage in turn: the bound ends such chains.
const MOST_STAGE_SEED_BYTES: usize = 128 << 10;

/// The most stages whose seeds one build is given: a graphics pipeline mostly has two or three
/// (at most five), and a ray-tracing pipeline's many would make each of its builds hand over a
/// run's worth of data.
const MOST_STAGE_SEEDS: usize = 4;

/// The first compiled data of each SPIR-V and of each stage this run, oldest first.
#[derive(Default)]
pub struct Twins {
    held: Mutex<Held>,
}

/// A seed and what it came from.
#[derive(Debug, Clone)]
pub struct TwinSeed {
    pub data: Arc<Vec<u8>>,
    /// The data of a pipeline with the same SPIR-V (else of pipelines sharing a stage, put
    /// together).
    pub whole: bool,
}

#[derive(Default)]
struct Held {
    /// By the SPIR-V key, or by a stage's code digest (the two come from writers of their own
    /// names, so they never meet).
    by_digest: HashMap<[u8; 16], Arc<Vec<u8>>>,
    order: VecDeque<[u8; 16]>,
    /// How many digests hold each datum, by its address: its bytes count once.
    holders: HashMap<usize, usize>,
    bytes: usize,
}

impl Twins {
    /// The seed for a pipeline with this SPIR-V key and these stage codes, if one is held.
    pub fn seed_for(&self, spirv: &[u8; 16], stages: &[[u8; 16]]) -> Option<TwinSeed> {
        let datas: Vec<Arc<Vec<u8>>> = {
            let held = self.held.locked();
            if let Some(data) = held.by_digest.get(spirv) {
                return Some(TwinSeed {
                    data: data.clone(),
                    whole: true,
                });
            }
            let mut datas: Vec<Arc<Vec<u8>>> = Vec::new();
            let stages = if stages.len() > 1 { stages } else { &[] };
            for data in stages.iter().filter_map(|s| held.by_digest.get(s)) {
                if !datas.iter().any(|d| Arc::ptr_eq(d, data)) && datas.len() < MOST_STAGE_SEEDS {
                    datas.push(Arc::clone(data));
                }
            }
            datas
        };
        // Put together outside the lock: every other miss of the device looks up or holds here.
        let data = match datas.as_slice() {
            [] => return None,
            [one] => Arc::clone(one),
            several => {
                let slices: Vec<&[u8]> = several.iter().map(|d| d.as_slice()).collect();
                Arc::new(nvidia_cache::merged(&slices)?)
            }
        };
        Some(TwinSeed { data, whole: false })
    }

    /// Holds `data` (a pipeline this run compiled) as the seed for pipelines with this SPIR-V,
    /// and, where it frames as NVIDIA's records within [`MOST_STAGE_SEED_BYTES`], for those
    /// sharing each of these stages: each only where none is held (the first compile seeds).
    pub fn keep(&self, spirv: [u8; 16], stages: &[[u8; 16]], data: Vec<u8>) {
        if data.len() > MOST_BYTES / 4 {
            return;
        }
        // One stage's code is its pipeline's SPIR-V: held by that alone.
        let by_stage =
            stages.len() > 1 && data.len() <= MOST_STAGE_SEED_BYTES && nvidia_cache::frames(&data);
        let data = Arc::new(data);
        let mut held = self.held.locked();
        held.hold(spirv, &data);
        if by_stage {
            for stage in stages {
                held.hold(*stage, &data);
            }
        }
        while held.bytes > MOST_BYTES {
            let Some(oldest) = held.order.pop_front() else {
                break;
            };
            held.let_go(&oldest);
        }
    }
}

impl Held {
    /// Holds `data` under `digest` where nothing is.
    fn hold(&mut self, digest: [u8; 16], data: &Arc<Vec<u8>>) {
        if self.by_digest.contains_key(&digest) {
            return;
        }
        self.by_digest.insert(digest, Arc::clone(data));
        self.order.push_back(digest);
        let holders = self.holders.entry(Arc::as_ptr(data) as usize).or_default();
        if *holders == 0 {
            self.bytes += data.len();
        }
        *holders += 1;
    }

    /// Lets go of what `digest` holds: its bytes with the last digest holding it.
    fn let_go(&mut self, digest: &[u8; 16]) {
        let Some(data) = self.by_digest.remove(digest) else {
            return;
        };
        let address = Arc::as_ptr(&data) as usize;
        if let Some(holders) = self.holders.get_mut(&address) {
            *holders -= 1;
            if *holders == 0 {
                self.holders.remove(&address);
                self.bytes -= data.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::nvidia_cache::tests::{nvidia_cache, record};

    #[test]
    fn the_first_compile_of_each_spirv_is_held_within_the_bound() {
        let twins = Twins::default();
        twins.keep([1; 16], &[], vec![1; 10]);
        twins.keep([1; 16], &[], vec![2; 10]);
        let seed = twins.seed_for(&[1; 16], &[]).unwrap();
        assert!(seed.whole);
        assert_eq!(seed.data[0], 1, "the first compile seeds");
        assert!(twins.seed_for(&[2; 16], &[]).is_none());
        for n in 0..8u8 {
            twins.keep([n + 10; 16], &[], vec![n; MOST_BYTES / 4]);
        }
        assert!(
            twins.seed_for(&[1; 16], &[]).is_none(),
            "the oldest went first"
        );
        assert!(twins.seed_for(&[17; 16], &[]).is_some());
        assert!(twins.held.locked().bytes <= MOST_BYTES);
    }

    #[test]
    fn data_held_by_several_digests_counts_once_until_the_last_lets_go() {
        let twins = Twins::default();
        let data = nvidia_cache(&[record([1; 16], 1, b"one")]);
        twins.keep([1; 16], &[[0xa; 16], [0xb; 16]], data.clone());
        assert_eq!(twins.held.locked().bytes, data.len());
        let mut held = twins.held.locked();
        held.let_go(&[1; 16]);
        held.let_go(&[0xa; 16]);
        assert_eq!(held.bytes, data.len());
        held.let_go(&[0xb; 16]);
        assert_eq!((held.bytes, held.holders.len()), (0, 0));
    }

    #[test]
    fn a_pipeline_sharing_stages_is_seeded_with_their_first_compiles_put_together() {
        let twins = Twins::default();
        let (vertex, fragment, other) = ([0xa; 16], [0xb; 16], [0xc; 16]);
        let first = nvidia_cache(&[record([1; 16], 1, b"one")]);
        let second = nvidia_cache(&[record([2; 16], 2, b"two")]);
        twins.keep([1; 16], &[vertex, other], first.clone());
        twins.keep([2; 16], &[fragment, other], second);
        // The SPIR-V's own seed first, whole.
        assert_eq!(*twins.seed_for(&[1; 16], &[fragment]).unwrap().data, first);
        // Else every stage's, each record once.
        let seed = twins
            .seed_for(&[3; 16], &[vertex, fragment, other])
            .unwrap();
        assert!(!seed.whole);
        let expected = nvidia_cache(&[record([1; 16], 1, b"one"), record([2; 16], 2, b"two")]);
        assert_eq!(*seed.data, expected);
        assert!(twins.seed_for(&[3; 16], &[[0xd; 16]]).is_none());
    }

    #[test]
    fn data_that_does_not_frame_is_large_or_has_one_stage_seeds_its_twins_alone() {
        let twins = Twins::default();
        let (a, b, c) = ([0xa; 16], [0xb; 16], [0xc; 16]);
        twins.keep([1; 16], &[a, c], vec![7; 64]);
        assert!(twins.seed_for(&[1; 16], &[a, c]).is_some());
        assert!(twins.seed_for(&[2; 16], &[a, b]).is_none());
        let big = nvidia_cache(&[record([1; 16], 1, &vec![1; MOST_STAGE_SEED_BYTES])]);
        twins.keep([3; 16], &[b, c], big);
        assert!(twins.seed_for(&[3; 16], &[]).is_some());
        assert!(
            twins.seed_for(&[4; 16], &[b, a]).is_none(),
            "no chain past the bound"
        );
        // One stage's code is the pipeline's SPIR-V: a compute pipeline seeds its twins alone.
        let small = nvidia_cache(&[record([2; 16], 2, b"two")]);
        twins.keep([5; 16], &[a], small);
        assert!(twins.seed_for(&[6; 16], &[a, b]).is_none());
    }
}
