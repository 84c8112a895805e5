//! What the driver made of each dictionary in this process: the pipelines it served and the
//! entries it refused through data carrying it, and what follows from the counts (a dictionary
//! doubted, refused, or withheld from the store).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

use crate::store::nvidia_cache::DictionaryId;
use crate::sync::UnpoisonedRw;

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

    /// Whether cache data carrying `dictionary` is withheld: neither written, nor noted, nor a
    /// twin's seed. Withheld where it carries the dictionary this build's count doubted
    /// (`doubted_here`), or the dictionary a seed handed over where the build's answer went
    /// uncounted (`seeded_uncounted`, [`super::Seed::went_uncounted`]) and other builds have made the
    /// driver doubt it ([`Tally::doubts`]). A build through an empty cache or a twin's data, or
    /// one whose data carries another dictionary than its seed's, is never withheld for what
    /// others counted: the dictionary in its data is the one the driver compiles with now.
    pub fn withholds(
        &self,
        dictionary: Option<DictionaryId>,
        doubted_here: Option<DictionaryId>,
        seeded_uncounted: Option<DictionaryId>,
    ) -> bool {
        dictionary.is_some_and(|d| {
            doubted_here == Some(d) || (seeded_uncounted == Some(d) && self.doubts(&d))
        })
    }
}
