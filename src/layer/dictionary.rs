//! NVIDIA's dictionary made once a device (issues 16 and 17). A found entry whose data carries
//! the driver's dictionary ([`crate::store::nvidia_cache`]) goes to the driver without it where
//! the device already holds that dictionary: the driver then makes a cache of a few kilobytes
//! instead of 1.78 MB. A device learns a dictionary when a pipeline is found through a cache
//! made of whole data carrying it; a pipeline that was handed data without it and not found
//! makes the device forget it, so the next ones go whole again (that pipeline is compiled and
//! its entry written again, as for any entry the driver refuses).

use std::sync::RwLock;

use crate::store::nvidia_cache::DictionaryId;
use crate::store::FoundEntry;

/// The dictionaries a cache (or a device) holds.
#[derive(Debug, Default)]
pub struct Known(Vec<DictionaryId>);

/// What a found entry's data goes to the driver as.
pub enum Seed {
    /// Its data as it is kept: it carries no dictionary, or one not held yet.
    Whole { teaches: Option<DictionaryId> },
    /// Its data without the dictionary, which is held already.
    Without {
        dictionary: DictionaryId,
        data: Vec<u8>,
    },
}

impl Known {
    pub fn holds(&self, id: &DictionaryId) -> bool {
        self.0.contains(id)
    }

    /// After a build (or a merge) from `seed`: `served` when the driver took it (found, merged).
    pub fn after(&mut self, seed: &Seed, served: bool) {
        match seed {
            Seed::Whole {
                teaches: Some(id), ..
            } if served && !self.0.contains(id) => self.0.push(*id),
            Seed::Without { dictionary, .. } if !served => self.0.retain(|d| d != dictionary),
            _ => {}
        }
    }
}

/// What a device holds, shared by its application threads (read by every found pipeline,
/// written once a dictionary), and whether it cuts NVIDIA's dictionary at all
/// (`PIPEKEEP_DICTIONARY_ONCE`, NVIDIA only).
#[derive(Debug)]
pub struct DeviceDictionaries {
    cuts: bool,
    known: RwLock<Known>,
}

impl DeviceDictionaries {
    pub fn new(cuts: bool) -> DeviceDictionaries {
        DeviceDictionaries {
            cuts,
            known: Default::default(),
        }
    }

    /// How `entry` goes to the device's driver, given what the device holds.
    pub fn seed(&self, entry: &FoundEntry) -> Seed {
        self.seed_within(entry, |id| self.holds(id))
    }

    /// How `entry` goes into a cache that `holds` what it holds (a merged batch).
    pub fn seed_within(
        &self,
        entry: &FoundEntry,
        holds: impl FnOnce(&DictionaryId) -> bool,
    ) -> Seed {
        let framing = self.cuts.then(|| entry.nvidia_dictionary()).flatten();
        let Some(framing) = framing else {
            return Seed::Whole { teaches: None };
        };
        if holds(&framing.dictionary) {
            Seed::Without {
                dictionary: framing.dictionary,
                data: entry.without_dictionary(&framing),
            }
        } else {
            Seed::Whole {
                teaches: Some(framing.dictionary),
            }
        }
    }

    /// As [`Known::after`], for the device: the lock is written only when it learns or forgets.
    pub fn after(&self, seed: &Seed, served: bool) {
        let learns_or_forgets = match seed {
            Seed::Whole { teaches } => served && teaches.is_some_and(|id| !self.holds(&id)),
            Seed::Without { .. } => !served,
        };
        if learns_or_forgets {
            self.known
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .after(seed, served);
        }
    }

    pub fn holds(&self, id: &DictionaryId) -> bool {
        self.known
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .holds(id)
    }
}

impl Seed {
    /// Calls `f` with the bytes to hand the driver.
    pub fn with_data<R>(&self, entry: &FoundEntry, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Seed::Whole { .. } => entry.with_data(f),
            Seed::Without { data, .. } => f(data),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: DictionaryId = DictionaryId { hash: 1, len: 10 };
    const D2: DictionaryId = DictionaryId { hash: 2, len: 10 };

    fn whole(id: DictionaryId) -> Seed {
        Seed::Whole { teaches: Some(id) }
    }

    fn without(id: DictionaryId) -> Seed {
        Seed::Without {
            dictionary: id,
            data: Vec::new(),
        }
    }

    #[test]
    fn a_dictionary_is_learned_when_served_whole_and_forgotten_when_its_absence_is_not_served() {
        let mut known = Known::default();
        known.after(&whole(D1), false);
        assert!(!known.holds(&D1), "not served: not learned");
        known.after(&Seed::Whole { teaches: None }, true);
        known.after(&whole(D1), true);
        known.after(&whole(D1), true);
        assert!(known.holds(&D1) && !known.holds(&D2));
        assert_eq!(known.0.len(), 1, "learned once");
        known.after(&without(D1), true);
        assert!(known.holds(&D1), "served without it: still held");
        known.after(&whole(D2), true);
        known.after(&without(D1), false);
        assert!(
            !known.holds(&D1),
            "not served without it: the next ones go whole"
        );
        assert!(known.holds(&D2));
    }

    #[test]
    fn a_device_learns_and_forgets_as_one_cache_does() {
        let device = DeviceDictionaries::new(true);
        device.after(&whole(D1), true);
        assert!(device.holds(&D1));
        device.after(&without(D1), false);
        assert!(!device.holds(&D1));
    }
}
