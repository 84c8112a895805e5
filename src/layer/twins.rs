//! What a shared cache would serve, the `cache` backend serves too. An application passes one
//! pipeline cache to every call, and its drivers serve a pipeline from the data of an earlier one
//! with the same shaders: pygfx's database holds 256 pipelines right after a near-twin that
//! differs only in `cullMode`, which RADV (255 of 639 in Valve's replayer) and NVIDIA (266 at one
//! thread, 248 at 16) serve as hits from a shared cache. The `cache` backend builds each
//! pipeline through a cache of its own: empty on a miss, it loses every such hit, most of the
//! cost of NVIDIA's first launch through pipekeep. So a miss is built through a fresh cache
//! seeded with the data of the pipeline this run compiled last with the same SPIR-V (the key's
//! `spirv` half: every stage's code, entry point and specialization): the driver's own key
//! decides what of it fits (a hit, or a compile that adds its own records).
//!
//! The seed is what this run's driver wrote, so it is whole and of this device; NVIDIA's data is
//! held without the dictionary its driver already holds (it makes a cache of the rest, as for a
//! found entry without it). Held within [`MOST_BYTES`], the oldest let go first: twins follow one
//! another in the order applications make them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::sync::Unpoisoned;

/// The most bytes of seeds held at once.
const MOST_BYTES: usize = 16 << 20;

/// The last compiled data of each SPIR-V this run, oldest first.
#[derive(Default)]
pub struct Twins {
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    by_spirv: HashMap<[u8; 16], Arc<Vec<u8>>>,
    order: VecDeque<[u8; 16]>,
    bytes: usize,
}

impl Twins {
    /// The data of the pipeline this run compiled last with this SPIR-V, if one is held.
    pub fn seed_for(&self, spirv: &[u8; 16]) -> Option<Arc<Vec<u8>>> {
        self.held.locked().by_spirv.get(spirv).cloned()
    }

    /// Holds `data` (a pipeline this run compiled) as the seed for pipelines with this SPIR-V.
    pub fn keep(&self, spirv: [u8; 16], data: Vec<u8>) {
        if data.len() > MOST_BYTES / 4 {
            return;
        }
        let mut held = self.held.locked();
        let len = data.len();
        if let Some(old) = held.by_spirv.insert(spirv, Arc::new(data)) {
            held.bytes -= old.len();
            held.order.retain(|s| *s != spirv);
        }
        held.order.push_back(spirv);
        held.bytes += len;
        while held.bytes > MOST_BYTES {
            let Some(oldest) = held.order.pop_front() else {
                break;
            };
            if let Some(old) = held.by_spirv.remove(&oldest) {
                held.bytes -= old.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_compile_of_each_spirv_is_held_within_the_bound() {
        let twins = Twins::default();
        twins.keep([1; 16], vec![1; 10]);
        twins.keep([1; 16], vec![2; 10]);
        assert_eq!(twins.seed_for(&[1; 16]).unwrap()[0], 2);
        assert!(twins.seed_for(&[2; 16]).is_none());
        for n in 0..8u8 {
            twins.keep([n + 10; 16], vec![n; MOST_BYTES / 4]);
        }
        assert!(twins.seed_for(&[1; 16]).is_none(), "the oldest went first");
        assert!(twins.seed_for(&[17; 16]).is_some());
        assert!(twins.held.locked().bytes <= MOST_BYTES);
    }
}
