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

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Once, RwLock};

use super::writer::Writer;
use crate::key::EntryName;
use crate::store::nvidia_cache::DictionaryId;
use crate::store::{FoundEntry, Lookup, Store};
use crate::sync::{Unpoisoned, UnpoisonedRw};

/// The dictionaries a cache (or a device) holds.
#[derive(Debug, Default)]
pub struct Known(Vec<DictionaryId>);

/// How many entries carrying a dictionary the driver may refuse, more than it served pipelines
/// through, before the device takes it that the driver refuses that dictionary in this process.
/// With its disk cache on, NVIDIA's driver (580.159.04) refuses every entry compressed with a
/// dictionary its disk cache does not hold (a cleared or other disk cache, or a `pipekeep
/// rebuild` beside another), and compresses what it compiles through such a cache with the
/// cache's dictionary: written again so, the same entries were refused at every launch (H200,
/// ncnn: 1,373-1,381 of 3,115). An entry may carry the dictionary and not need it (its own
/// records not compressed with it): served, it says little of the others, hence the comparison.
/// Two, not one: a single entry the driver compiles all the same says nothing either.
pub const REFUSALS_OF_A_DICTIONARY: u32 = 2;

/// For each dictionary, the pipelines the driver served and the entries it refused through data
/// carrying it, in this process: counted by every seeded build of such an entry, so each count
/// is an atomic, and the list is written only the first time a dictionary is counted.
#[derive(Debug, Default)]
pub struct Tally(RwLock<Vec<(DictionaryId, Arc<Counts>)>>);

#[derive(Debug, Default)]
pub struct Counts {
    served: AtomicU32,
    refused: AtomicU32,
}

impl Counts {
    fn doubted(served: u32, refused: u32) -> bool {
        refused > served
    }
}

impl Tally {
    fn counts(&self, id: &DictionaryId) -> Option<Arc<Counts>> {
        let all = self.0.reading();
        all.iter().find(|(d, _)| d == id).map(|(_, c)| c.clone())
    }

    /// Counts a build through data carrying `id`: `served` when the driver took it. Whether the
    /// driver has now refused more entries carrying it than it served pipelines through, as
    /// this count left it.
    pub fn count(&self, id: DictionaryId, served: bool) -> bool {
        let counts = match self.counts(&id) {
            Some(c) => c,
            None => {
                let mut all = self.0.writing();
                match all.iter().find(|(d, _)| *d == id) {
                    Some((_, c)) => c.clone(),
                    None => {
                        let c = Arc::<Counts>::default();
                        all.push((id, c.clone()));
                        c
                    }
                }
            }
        };
        let (served_n, refused_n) = if served {
            let n = counts
                .served
                .fetch_add(1, Ordering::AcqRel)
                .saturating_add(1);
            (n, counts.refused.load(Ordering::Acquire))
        } else {
            let n = counts
                .refused
                .fetch_add(1, Ordering::AcqRel)
                .saturating_add(1);
            (counts.served.load(Ordering::Acquire), n)
        };
        Counts::doubted(served_n, refused_n)
    }

    /// Whether the driver has refused more entries carrying `id` than it served pipelines
    /// through in this process (once at least one was refused).
    pub fn doubts(&self, id: &DictionaryId) -> bool {
        self.counts(id).is_some_and(|c| {
            Counts::doubted(
                c.served.load(Ordering::Acquire),
                c.refused.load(Ordering::Acquire),
            )
        })
    }

    /// Whether the driver refuses `id` in this process: entries carrying it refused
    /// [`REFUSALS_OF_A_DICTIONARY`] times and more often than it served pipelines through them.
    pub fn refuses(&self, id: &DictionaryId) -> bool {
        self.counts(id).is_some_and(|c| {
            let refused = c.refused.load(Ordering::Acquire);
            refused >= REFUSALS_OF_A_DICTIONARY
                && Counts::doubted(c.served.load(Ordering::Acquire), refused)
        })
    }
}

fn withholds(
    dictionary: Option<DictionaryId>,
    doubted_here: Option<DictionaryId>,
    seeded_uncounted: Option<DictionaryId>,
    tally: &Tally,
) -> bool {
    dictionary.is_some_and(|d| {
        doubted_here == Some(d) || (seeded_uncounted == Some(d) && tally.doubts(&d))
    })
}

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

    /// Whether cache data carrying `dictionary` is withheld: neither written, nor noted, nor a
    /// twin's seed. Withheld where it carries the dictionary this build's count doubted
    /// (`doubted_here`), or the dictionary a seed handed over where the build's answer went
    /// uncounted (`seeded_uncounted`, [`Seed::went_uncounted`]) and other builds have made the
    /// driver doubt it ([`Tally::doubts`]). A build through an empty cache or a twin's data, or
    /// one whose data carries another dictionary than its seed's, is never withheld for what
    /// others counted: the dictionary in its data is the one the driver compiles with now.
    pub fn withholds(
        &self,
        dictionary: Option<DictionaryId>,
        doubted_here: Option<DictionaryId>,
        seeded_uncounted: Option<DictionaryId>,
    ) -> bool {
        withholds(dictionary, doubted_here, seeded_uncounted, &self.held.tally)
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
mod tests {
    use super::*;

    const D1: DictionaryId = DictionaryId { hash: 1, len: 10 };
    const D2: DictionaryId = DictionaryId { hash: 2, len: 10 };

    /// An NVIDIA device's identity.
    fn nvidia() -> crate::store::Identity {
        crate::store::Identity {
            vendor_id: crate::store::identity::NVIDIA,
            ..crate::store::envelope::tests::identity()
        }
    }

    /// A store under `root` for [`nvidia`].
    fn nvidia_store(root: &std::path::Path) -> Store {
        let store = Store::open(
            root,
            "title",
            nvidia(),
            1 << 30,
            std::time::SystemTime::now(),
        );
        store.unwrap().0
    }

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
    fn a_dictionary_the_driver_refuses_more_often_than_it_serves_is_refused_after_two() {
        let tally = Tally::default();
        assert!(!tally.refuses(&D1), "nothing counted");
        assert!(!tally.doubts(&D1), "nothing counted");
        assert!(tally.count(D1, false), "refused more than served");
        assert!(
            !tally.refuses(&D1),
            "one refusal says nothing of the others"
        );
        assert!(tally.doubts(&D1), "doubted from the first refusal");
        assert!(tally.count(D1, false));
        assert!(tally.refuses(&D1), "two, none served");
        assert!(!tally.refuses(&D2), "another dictionary is its own");

        // Entries carrying it but not needing it, served: the driver takes it after all.
        assert!(tally.count(D1, true), "two refused, one served");
        assert!(!tally.count(D1, true), "as many served as refused");
        assert!(!tally.refuses(&D1) && !tally.doubts(&D1));
        assert!(!tally.doubts(&D2), "another dictionary is its own");
        assert!(tally.count(D1, false), "three refused, two served");
        assert!(tally.refuses(&D1));
    }

    #[test]
    fn data_is_withheld_for_a_doubt_of_its_own_build_or_an_uncounted_seeded_one_only() {
        let tally = Tally::default();
        assert!(
            !withholds(None, Some(D1), Some(D1), &tally),
            "no dictionary"
        );
        assert!(
            withholds(Some(D1), Some(D1), None, &tally),
            "this build doubted it"
        );
        assert!(!withholds(Some(D2), Some(D1), None, &tally), "another one");
        tally.count(D1, false); // another build's entry refused
        assert!(
            withholds(Some(D1), None, Some(D1), &tally),
            "seeded with it, uncounted: others' doubt holds"
        );
        assert!(
            !withholds(Some(D1), None, None, &tally),
            "a miss through an empty cache: the dictionary the driver compiles with"
        );
        assert!(
            !withholds(Some(D2), None, Some(D1), &tally),
            "seeded with the doubted one, compiled with another"
        );
        tally.count(D2, false);
        assert!(
            !withholds(Some(D2), None, Some(D1), &tally),
            "compiled with another, doubted too: not the seed's, the one the driver uses now"
        );
        tally.count(D1, true);
        assert!(
            !withholds(Some(D1), None, Some(D1), &tally),
            "served as often as refused: no doubt left"
        );
    }

    #[test]
    fn only_a_seed_handing_over_a_dictionary_goes_uncounted() {
        assert_eq!(whole(D1).went_uncounted(false), Some(D1), "answer unknown");
        assert_eq!(
            without(D1).went_uncounted(false),
            Some(D1),
            "answer unknown"
        );
        assert_eq!(whole(D1).went_uncounted(true), None, "counted");
        assert_eq!(
            Seed::Whole { teaches: None }.went_uncounted(false),
            None,
            "no dictionary handed over: never counted, never withheld for others' doubts"
        );
        assert_eq!(Seed::Refused { dictionary: D1 }.went_uncounted(false), None);
    }

    #[test]
    fn priming_holds_a_dictionary_and_a_device_counts_only_seeds_carrying_one() {
        let mut known = Known::default();
        known.hold(D1);
        known.hold(D1);
        assert!(known.holds(&D1) && known.0.len() == 1);
        let device = DeviceDictionaries::new(true);
        assert_eq!(device.count(&Seed::Whole { teaches: None }, false), None);
        assert_eq!(device.count(&Seed::Refused { dictionary: D1 }, false), None);
        assert!(!device.refuses(&D1), "neither was counted");
        let doubted = Some(BuildAgain { doubted: Some(D1) });
        assert_eq!(device.count(&without(D1), false), doubted);
        assert_eq!(device.count(&whole(D1), false), doubted);
        assert!(device.refuses(&D1));
    }

    #[test]
    fn a_pipeline_compiled_through_data_carrying_a_dictionary_is_built_again_doubted_or_not() {
        let device = DeviceDictionaries::new(true);
        for _ in 0..3 {
            assert_eq!(
                device.count(&whole(D1), true),
                None,
                "served: nothing to build"
            );
        }
        // Served more often than refused, as beside a new disk cache where entries carrying the
        // dictionary without needing it are served: the one refused is built again all the
        // same, and its second build's data is written whatever it carries.
        assert_eq!(
            device.count(&without(D1), false),
            Some(BuildAgain { doubted: None })
        );
        assert!(!device.refuses(&D1));
        assert_eq!(
            device.count(&whole(D2), false),
            Some(BuildAgain { doubted: Some(D2) }),
            "another dictionary, refused more often than served"
        );
        assert_eq!(
            device.count(&whole(D2), true),
            None,
            "served while doubted: the pipeline found is the application's"
        );
    }

    #[test]
    fn an_entry_carrying_a_dictionary_the_driver_refuses_is_not_handed_over() {
        use crate::key::PipelineKey;
        use crate::store::envelope::tests::cache_data;
        use crate::store::nvidia_cache::tests::{dictionary_key, record};
        let root = tempfile::tempdir().unwrap();
        let (store, nvidia) = (nvidia_store(root.path()), nvidia());
        let dictionary = record(dictionary_key(), 0xd1c7, &[5; 3000]);
        let key = PipelineKey {
            spirv: [1; 16],
            state: [1; 16],
        };
        let own = record([1; 16], 1, &[1; 100]);
        let body = [&2u32.to_le_bytes()[..], &own, &dictionary].concat();
        store.write(&key, &cache_data(&nvidia, &body)).unwrap();
        let Ok(Lookup::Found(found)) = store.lookup(&key) else {
            panic!("the entry is found");
        };
        let device = DeviceDictionaries::new(true);
        let Seed::Whole { teaches: Some(id) } = device.seed(&found) else {
            panic!("whole, teaching its dictionary");
        };
        device.after(&whole(id), false);
        assert!(!device.holds(&id), "not served: not learned");
        device.count(&whole(id), false);
        assert!(
            matches!(device.seed(&found), Seed::Whole { .. }),
            "one refusal"
        );
        device.count(&whole(id), false);
        assert!(
            matches!(device.seed(&found), Seed::Refused { dictionary } if dictionary == id),
            "refused twice, none served: not handed over"
        );
        assert!(
            matches!(
                DeviceDictionaries::new(false).seed(&found),
                Seed::Whole { teaches: None }
            ),
            "a device that does not cut the dictionary hands every entry over whole"
        );
    }

    /// The note through a real store: a device of a run that wrote an entry carrying the
    /// dictionary names it; a device of the next run hands that entry over before its first
    /// pipeline, once, and then sends the other entries carrying it without it.
    #[test]
    fn a_device_hands_over_the_noted_dictionary_first_once_and_a_written_one_is_noted() {
        use crate::key::PipelineKey;
        use crate::store::envelope::tests::cache_data;
        use crate::store::nvidia_cache::frame_bytes;
        use crate::store::nvidia_cache::tests::{dictionary_key, record};
        let root = tempfile::tempdir().unwrap();
        let nvidia = nvidia();
        let open = || nvidia_store(root.path());
        let dictionary = record(dictionary_key(), 0xd1c7, &[5; 3000]);
        let entry = |n: u8| {
            let key = PipelineKey {
                spirv: [n; 16],
                state: [n; 16],
            };
            let own = record([n; 16], n.into(), &[n; 100]);
            let body = [&2u32.to_le_bytes()[..], &own, &dictionary].concat();
            (key, cache_data(&nvidia, &body))
        };
        let ((k1, d1), (k2, d2)) = (entry(1), entry(2));

        let run1 = Arc::new(open());
        let first = DeviceDictionaries::new(true);
        first.prime(&run1, |_, _| panic!("nothing is noted yet"));
        let writer = Writer::new(Arc::new(|_, _| {}), None);
        let carried = |d: &[u8]| frame_bytes(d).ok().map(|f| f.dictionary);
        first.note_written(&writer, &run1, k1.file_name(), carried(&d1));
        writer.finish(); // the note is the writer's to write
        assert_eq!(run1.dictionary_entry(), Some(k1));
        first.note_written(&writer, &run1, k2.file_name(), carried(&d2));
        assert_eq!(run1.dictionary_entry(), Some(k1), "noted once a dictionary");
        run1.write(&k1, &d1).unwrap();
        run1.write(&k2, &d2).unwrap();

        let run2 = open();
        let device = DeviceDictionaries::new(true);
        let mut handed = Vec::new();
        device.prime(&run2, |entry, seed| {
            handed.push((
                entry.name(),
                matches!(seed, Seed::Whole { teaches: Some(_) }),
            ));
            true
        });
        assert_eq!(handed, [(k1.file_name(), true)]);
        device.prime(&run2, |_, _| panic!("once a device"));
        let Ok(Lookup::Found(found)) = run2.lookup(&k2) else {
            panic!("entry 2 is found");
        };
        assert!(matches!(device.seed(&found), Seed::Without { .. }));
        DeviceDictionaries::new(false).prime(&run2, |_, _| panic!("only where it cuts"));

        // The noted entry damaged: another entry carrying the dictionary stands in, and the
        // caller notes it for later runs.
        let path = run2.entry_path(&k1);
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 0x5a;
        std::fs::write(&path, bytes).unwrap();
        let run3 = Arc::new(open());
        let device = DeviceDictionaries::new(true);
        let mut handed = Vec::new();
        let stand_in = device.prime(&run3, |entry, _| {
            handed.push(entry.name());
            true
        });
        assert_eq!(handed, [k2.file_name()]);
        let (name, id) = stand_in.expect("a stand-in");
        assert_eq!(name, k2.file_name());
        let writer = Writer::new(Arc::new(|_, _| {}), None);
        device.note(&writer, &run3, name, id);
        writer.finish();
        assert_eq!(run3.dictionary_entry(), Some(k2), "the stand-in is noted");

        // No entry left carrying it: nothing is handed over.
        std::fs::remove_file(run3.entry_path(&k2)).unwrap();
        let none =
            DeviceDictionaries::new(true).prime(&open(), |_, _| panic!("nothing carries it"));
        assert!(none.is_none());
        assert_eq!(
            run3.dictionary_entry(),
            None,
            "a note naming nothing left is removed"
        );
    }

    #[test]
    fn devices_of_one_identity_in_a_process_share_what_the_driver_holds() {
        let identity = crate::store::envelope::tests::identity();
        let first = DeviceDictionaries::in_process(true, identity);
        first.after(&whole(D1), true);
        let second = DeviceDictionaries::in_process(true, identity);
        assert!(
            second.holds(&D1),
            "the driver's dictionary is the process's"
        );
        let other = DeviceDictionaries::in_process(
            true,
            crate::store::Identity {
                driver_version: identity.driver_version + 1,
                ..identity
            },
        );
        assert!(!other.holds(&D1), "another driver's is its own");
        drop((first, second));
        let after = DeviceDictionaries::in_process(true, identity);
        assert!(
            !after.holds(&D1),
            "let go with the last device: a driver loaded again holds nothing"
        );
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
