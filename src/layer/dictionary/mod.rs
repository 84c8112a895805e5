//! NVIDIA's dictionary made once a device (issues 16 and 17). A found entry whose data carries
//! the driver's dictionary ([`crate::store::nvidia_cache`]) goes to the driver without it where
//! the device already holds that dictionary: the driver then makes a cache of a few kilobytes
//! instead of 1.78 MB. A device learns a dictionary when a pipeline is found through a cache
//! made of whole data carrying it; a pipeline that was handed data without it and not found
//! makes the device forget it, so the next ones go whole again (that pipeline is compiled and
//! its entry written again, as for any entry the driver refuses).
//!
//! With its disk cache on, the driver refuses every entry compressed with a dictionary its disk
//! cache does not hold (H200, 580.159.04: the disk cache cleared, or another one, as beside a
//! `pipekeep rebuild`), and what it compiles through such an entry's cache it compresses with
//! the same dictionary: written again so, the same entries were refused at every launch. So a
//! dictionary the driver refuses more often than it serves through is not handed over again in
//! the process ([`Seed::Refused`]: those entries are built as misses), and a pipeline the driver
//! compiled through a cache seeded with a dictionary (carried, or cut out where it was handed over
//! first) is built once more through an empty cache and that data kept ([`BuildAgain`]; where the
//! driver made its answer known, not where the application asked to fail rather than compile,
//! where nothing is kept, or for a ray-tracing pipeline replaying its group handles): the next
//! launch finds them.
//!
//! A driver that has compiled anything in a process refuses every entry carrying a dictionary it
//! does not hold (H200, driver 580.159.04: a warm ncnn run with a tenth of its entries damaged
//! found 1,583 of 3,115, the 1,220 carrying the dictionary refused and compiled, at 2.4 GB of
//! memory). So the identity directory names one entry carrying the dictionary
//! ([`crate::store::DICTIONARY_ENTRY`]), and before a device's first pipeline the dictionary is
//! handed to the driver through a cache of that entry ([`DeviceDictionaries::prime`]), on the
//! opening thread once the store is open, or by the first compile if it comes first; found
//! pipelines never wait for it.

use std::sync::{Arc, Mutex, Once, RwLock};

mod tally;
pub use tally::Tally;
#[cfg(doc)]
use tally::REFUSALS_OF_A_DICTIONARY;

use super::writer::Writer;
use crate::key::EntryName;
use crate::store::nvidia_cache::DictionaryId;
use crate::store::{FoundEntry, Lookup, Store};
use crate::sync::{Unpoisoned, UnpoisonedRw};

/// The dictionaries a cache (or a device) holds.
#[derive(Debug, Default)]
pub struct Known(Vec<DictionaryId>);

/// How many entries priming looks at for one carrying the dictionary when the noted one cannot
/// serve. They are taken in the reverse of the last run's order of use: the driver trains its
/// dictionary after a process has compiled about 1,730 pipelines, so the entries carrying it are
/// those its run reached late (in ncnn's store 1,382 of 3,115, the last-used ones).
const STAND_INS: usize = 512;

/// A pipeline compiled through data carrying a dictionary, to be built once more through an
/// empty cache and that data written instead.
#[derive(Debug, PartialEq, Eq)]
pub struct BuildAgain {
    /// The dictionary, where the driver refuses it more often than it serves through it in this
    /// process: data the second build gives still carrying it is not written.
    pub doubted: Option<DictionaryId>,
}

/// What a found entry's data goes to the driver as.
pub enum Seed {
    /// Its data as it is kept: it carries no dictionary, or one not held yet.
    Whole { teaches: Option<DictionaryId> },
    /// Its data without the dictionary, which is held already.
    Without {
        dictionary: DictionaryId,
        data: Vec<u8>,
    },
    /// Not at all: it carries a dictionary the driver refuses in this process
    /// ([`REFUSALS_OF_A_DICTIONARY`]). The pipeline is built as a miss and its entry written
    /// again from what the driver compiles through an empty cache.
    Refused { dictionary: DictionaryId },
}

impl Known {
    pub fn holds(&self, id: &DictionaryId) -> bool {
        self.0.contains(id)
    }

    /// Handed to the driver before any pipeline (priming).
    pub fn hold(&mut self, id: DictionaryId) {
        if !self.0.contains(&id) {
            self.0.push(id);
        }
    }

    /// After a build from `seed`: `served` when the driver took it (found).
    pub fn after(&mut self, seed: &Seed, served: bool) {
        match seed {
            Seed::Whole {
                teaches: Some(id), ..
            } if served => self.hold(*id),
            Seed::Without { dictionary, .. } if !served => self.0.retain(|d| d != dictionary),
            _ => {}
        }
    }
}

/// What the driver holds, shared by the application threads of every device of one identity in
/// the process (the driver's dictionary is the process's, not a device's): what it holds read by
/// every found pipeline, written once a dictionary; what it did with each counted apart
/// ([`Tally`]). Whether it cuts NVIDIA's dictionary at all
/// (`PIPEKEEP_DICTIONARY_ONCE`, NVIDIA only) is each device's.
#[derive(Debug)]
pub struct DeviceDictionaries {
    cuts: bool,
    held: Arc<Held>,
    /// The identity whose [`HELD_IN_PROCESS`] entry this device counts in, if any.
    identity: Option<crate::store::Identity>,
}

#[derive(Debug)]
struct Held {
    known: RwLock<Known>,
    /// What the driver did with each dictionary's entries in this process.
    tally: Tally,
    /// Set once the dictionary the identity names was handed over, or found not to be there.
    primed: Once,
    /// The dictionary the identity's note names, as far as this process has read or written it:
    /// the note is written again only for another one.
    noted: Mutex<Option<DictionaryId>>,
}

impl Default for Held {
    fn default() -> Held {
        Held {
            known: Default::default(),
            tally: Tally::default(),
            primed: Once::new(),
            noted: Mutex::new(None),
        }
    }
}

/// Each identity's [`Held`] and how many live devices share it: let go with the last of them
/// (the loader may unload the driver with its instance, and a driver loaded again holds nothing).
static HELD_IN_PROCESS: std::sync::LazyLock<Mutex<HeldByIdentity>> =
    std::sync::LazyLock::new(Default::default);

/// An identity's [`Held`], with the count of live devices sharing it.
type HeldByIdentity = std::collections::HashMap<crate::store::Identity, (Arc<Held>, usize)>;

impl DeviceDictionaries {
    /// A device's view of its own: nothing held yet (a device alone, as the tests make).
    #[cfg(test)]
    pub fn new(cuts: bool) -> DeviceDictionaries {
        DeviceDictionaries {
            cuts,
            held: Arc::default(),
            identity: None,
        }
    }

    /// A device's view of what the driver holds in this process for `identity`: a second device
    /// of the same driver finds the dictionary the first handed over, and hands it over again
    /// never.
    pub fn in_process(cuts: bool, identity: crate::store::Identity) -> DeviceDictionaries {
        let mut all = HELD_IN_PROCESS.locked();
        let (held, devices) = all.entry(identity).or_default();
        *devices += 1;
        DeviceDictionaries {
            cuts,
            held: held.clone(),
            identity: Some(identity),
        }
    }

    /// Whether this device cuts NVIDIA's dictionary (and so hands it over first).
    pub fn cuts(&self) -> bool {
        self.cuts
    }

    /// Once a device, before its first compile (a caller that comes while it runs waits for
    /// it): the entry the identity's note names, found whole and carrying a dictionary, goes to
    /// `hand_over` (which makes the driver a cache of it and says whether it did), and the device
    /// then holds that dictionary. Where that entry is no longer whole or no longer carries one
    /// (damaged, dropped by the bound, compiled again since), another of the store's entries
    /// carrying it takes its place: one damaged entry must not cost every entry carrying the
    /// dictionary. Returns the stand-in, which the caller notes. Where none is found the note is
    /// removed, so later runs do not look again.
    pub fn prime(
        &self,
        store: &Store,
        hand_over: impl FnOnce(&FoundEntry, &Seed) -> bool,
    ) -> Option<(EntryName, DictionaryId)> {
        if !self.cuts {
            return None;
        }
        let mut stand_in = None;
        // A panic inside is caught by the caller's guard: the next device tries again.
        self.held.primed.call_once_force(|_| {
            let Some(noted) = store.dictionary_entry() else {
                return;
            };
            // An entry whose dictionary the driver refuses already carries it all the same: the
            // note stays for later runs, and nothing is handed over in this one.
            let carrying = |key| match store.lookup(&key) {
                Ok(Lookup::Found(entry)) => match self.seed(&entry) {
                    Seed::Whole { teaches: Some(id) } | Seed::Refused { dictionary: id } => {
                        Some((entry, id))
                    }
                    _ => None,
                },
                _ => None,
            };
            let found = carrying(noted).or_else(|| {
                tracing::info!(entry = %noted.file_name(), "the entry naming NVIDIA's dictionary is not there whole, or carries none; looking for another");
                let other = store
                    .entries_oldest_first(STAND_INS)
                    .into_iter()
                    .filter(|key| *key != noted)
                    .find_map(carrying)?;
                stand_in = Some((other.0.name(), other.1));
                Some(other)
            });
            let Some((entry, id)) = found else {
                tracing::info!("no entry carries NVIDIA's dictionary whole; nothing handed over first");
                store.forget_dictionary_entry();
                return;
            };
            if stand_in.is_none() {
                // The note names it already; a stand-in is noted by the caller.
                *self.held.noted.locked() = Some(id);
            }
            if self.refuses(&id) {
                return;
            }
            let seed = Seed::Whole { teaches: Some(id) };
            if hand_over(&entry, &seed) {
                // Held, not served: a driver may make a cache of data it then refuses.
                self.held.known.writing().hold(id);
                tracing::info!(entry = %entry.name(), bytes = id.len, "NVIDIA's dictionary handed to the driver before the device's first compile");
            }
        });
        stand_in
    }

    /// `name` carries the dictionary `id` (the device learned it from that entry, or is
    /// writing it): the identity's note names it for later runs, unless it names `id` already.
    /// Written by the writer thread, as entries are: never on a pipeline's path.
    pub fn note(&self, writer: &Writer, store: &Arc<Store>, name: EntryName, id: DictionaryId) {
        {
            let mut noted = self.held.noted.locked();
            if *noted == Some(id) {
                return;
            }
            *noted = Some(id); // tried once a dictionary, written or not
        }
        let store = store.clone();
        writer.later(Box::new(move || match store.remember_dictionary_entry(&name) {
            Ok(()) => {
                tracing::debug!(entry = %name, "the identity now names this entry for NVIDIA's dictionary")
            }
            Err(e) => {
                tracing::debug!(error = %e, "could not name the entry carrying NVIDIA's dictionary")
            }
        }));
    }

    /// Cache data the driver just gave for `name`, about to be kept, carries `dictionary`: where
    /// it carries one, the identity's note names it ([`DeviceDictionaries::note`]).
    pub fn note_written(
        &self,
        writer: &Writer,
        store: &Arc<Store>,
        name: EntryName,
        dictionary: Option<DictionaryId>,
    ) {
        if let Some(id) = dictionary.filter(|_| self.cuts) {
            self.note(writer, store, name, id);
        }
    }

    /// How `entry` goes to the device's driver, given what the device holds.
    pub fn seed(&self, entry: &FoundEntry) -> Seed {
        self.seed_within(entry, |id| self.holds(id))
    }

    /// How `entry` goes into a cache that `holds` what it holds.
    pub fn seed_within(
        &self,
        entry: &FoundEntry,
        holds: impl FnOnce(&DictionaryId) -> bool,
    ) -> Seed {
        let framing = self.cuts.then(|| entry.nvidia_dictionary()).flatten();
        let Some(framing) = framing else {
            return Seed::Whole { teaches: None };
        };
        if self.refuses(&framing.dictionary) {
            Seed::Refused {
                dictionary: framing.dictionary,
            }
        } else if holds(&framing.dictionary) {
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
    /// The dictionary it learned, if it did.
    pub fn after(&self, seed: &Seed, served: bool) -> Option<DictionaryId> {
        let (learns, forgets) = match seed {
            Seed::Whole { teaches } => (teaches.filter(|id| served && !self.holds(id)), false),
            Seed::Without { .. } => (None, !served),
            Seed::Refused { .. } => (None, false),
        };
        if learns.is_some() || forgets {
            self.held.known.writing().after(seed, served);
        }
        learns
    }

    /// Counts a build from `seed` whose outcome the driver made known ([`Tally::count`]; a seed
    /// handing over no dictionary says nothing). Where the driver compiled through a cache
    /// seeded with a dictionary, what it compiled went into that cache compressed with that
    /// dictionary, which a driver whose disk cache lacks it refuses again at every launch (H200,
    /// 580.159.04: 6-10 of ncnn's entries beside a new disk cache, launch after launch, while the
    /// driver served other entries carrying it that do not need it, so the dictionary was not
    /// doubted): the pipeline is to be built once more through an empty cache ([`BuildAgain`]).
    pub fn count(&self, seed: &Seed, served: bool) -> Option<BuildAgain> {
        let dictionary = seed.handed_dictionary()?;
        let doubts = self.held.tally.count(dictionary, served);
        (!served).then_some(BuildAgain {
            doubted: doubts.then_some(dictionary),
        })
    }

    pub fn holds(&self, id: &DictionaryId) -> bool {
        self.held.known.reading().holds(id)
    }

    /// As [`Tally::refuses`].
    pub fn refuses(&self, id: &DictionaryId) -> bool {
        self.held.tally.refuses(id)
    }

    /// What the driver made of each dictionary in this process.
    pub fn tally(&self) -> &Tally {
        &self.held.tally
    }
}

impl Drop for DeviceDictionaries {
    fn drop(&mut self) {
        let Some(identity) = self.identity else {
            return;
        };
        let mut all = HELD_IN_PROCESS.locked();
        if let Some((_, devices)) = all.get_mut(&identity) {
            *devices -= 1;
            if *devices == 0 {
                all.remove(&identity);
            }
        }
    }
}

impl Seed {
    /// The dictionary whose data goes to the driver: carried whole, or held and cut out.
    pub fn handed_dictionary(&self) -> Option<DictionaryId> {
        match self {
            Seed::Whole { teaches } => *teaches,
            Seed::Without { dictionary, .. } => Some(*dictionary),
            Seed::Refused { .. } => None,
        }
    }

    /// The dictionary this seed handed the driver, where the build's count was not asked
    /// (`count_asked`: the answer made known, or a success asked to fail). A seed handing over
    /// none is never counted: the dictionary in its build's data is the one the driver compiles
    /// with now.
    pub fn went_uncounted(&self, count_asked: bool) -> Option<DictionaryId> {
        self.handed_dictionary().filter(|_| !count_asked)
    }

    /// Calls `f` with the bytes to hand the driver.
    pub fn with_data<R>(&self, entry: &FoundEntry, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            // Refused is never handed over; were it asked for, the entry as it is kept.
            Seed::Whole { .. } | Seed::Refused { .. } => entry.with_data(f),
            Seed::Without { data, .. } => f(data),
        }
    }
}

#[cfg(test)]
mod tests;
