//! Values held in memory within a byte bound, the oldest let go first: the checked pieces a store
//! keeps for the next entries naming them (`pieces.rs`), and the binaries a device keeps for
//! pipelines the driver builds alike (`layer/sharing.rs`).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// The values held, their lengths, and the order they came in.
#[derive(Debug)]
pub struct OldestFirst<K, V> {
    held: HashMap<K, (V, usize)>,
    order: VecDeque<K>,
    bytes: usize,
}

impl<K, V> Default for OldestFirst<K, V> {
    fn default() -> Self {
        OldestFirst {
            held: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<K: Eq + Hash + Clone, V> OldestFirst<K, V> {
    pub fn get(&self, key: &K) -> Option<&V> {
        self.held.get(key).map(|(value, _)| value)
    }

    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Holds `value`, of `len` bytes, under `key`, letting the oldest go until it fits within
    /// `limit`; nothing where `key` is held already (the first stays) or `len` alone is over
    /// `limit` (nothing is let go for it).
    pub fn hold(&mut self, key: K, value: V, len: usize, limit: usize) {
        if len > limit || self.held.contains_key(&key) {
            return;
        }
        while self.bytes + len > limit {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some((_, gone)) = self.held.remove(&oldest) {
                self.bytes -= gone;
            }
        }
        self.bytes += len;
        self.order.push_back(key.clone());
        self.held.insert(key, (value, len));
    }

    /// Lets go of `key`'s value.
    pub fn forget(&mut self, key: &K) {
        if let Some((_, gone)) = self.held.remove(key) {
            self.bytes -= gone;
            self.order.retain(|k| k != key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_value_of_a_key_stays_and_the_oldest_go_past_the_bound() {
        let mut held = OldestFirst::default();
        for key in 1..=3 {
            held.hold(key, key * 10, 30, 100);
        }
        held.hold(1, 99, 1, 100);
        assert_eq!((held.get(&1), held.bytes()), (Some(&10), 90));
        held.hold(4, 40, 30, 100);
        assert_eq!(held.get(&1), None, "the oldest went");
        assert_eq!((held.get(&4), held.bytes()), (Some(&40), 90));
        held.hold(5, 50, 101, 100);
        assert_eq!(
            (held.get(&5), held.bytes()),
            (None, 90),
            "too large: nothing let go"
        );
        held.forget(&2);
        held.forget(&2);
        assert_eq!((held.get(&2), held.bytes()), (None, 60));
        held.hold(2, 20, 30, 100);
        assert_eq!(held.get(&2), Some(&20));
    }
}
