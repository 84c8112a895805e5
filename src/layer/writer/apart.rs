//! NVIDIA's cache data held in the writer's queue with its dictionary's record set apart: the
//! record once for every entry waiting that carries it, each entry's own bytes beside it, and the
//! data put back together, byte for byte, when it is written.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::store::nvidia_cache::{DictionaryId, Framing, RECORD_HEAD};
use crate::store::recipe::KnownPiece;
use crate::store::Payload;
use crate::sync::Unpoisoned;

/// An entry's bytes while it waits. NVIDIA's cache data carries the driver's 1.78 MB dictionary
/// in every pipeline it compiles after its first ~1,730: queued whole, 36 of them filled the
/// queue, and while the application's threads held every core (ncnn at 16 threads on the H200)
/// they then wrote each entry themselves, 8-11% of their creation time. Set apart, the record
/// is held once for all the entries that carry it, and each entry queues only its own bytes.
pub(super) enum Waiting {
    Whole(Vec<u8>),
    /// An entry an earlier process left waiting, where it stands in that file's bytes.
    Taken(Payload),
    Apart {
        without: Vec<u8>,
        framing: Framing,
        /// The dictionary's whole record, named once (a [`KnownPiece`]) for the entries that
        /// carry it: hashed again for each, its 1.78 MB were most of such an entry's write.
        record: Arc<KnownPiece>,
    },
}

impl Waiting {
    /// The bytes the queue's bound counts: what this entry holds of its own.
    pub(super) fn len(&self) -> usize {
        match self {
            Waiting::Whole(data) => data.len(),
            Waiting::Taken(payload) => payload.len(),
            Waiting::Apart { without, .. } => without.len(),
        }
    }

    /// Whether it is held whole, not with a dictionary apart.
    pub(super) fn is_whole(&self) -> bool {
        !matches!(self, Waiting::Apart { .. })
    }

    /// The data as the driver wrote it.
    pub(super) fn whole(&self) -> std::borrow::Cow<'_, [u8]> {
        match self {
            Waiting::Whole(data) => data.into(),
            Waiting::Taken(payload) => payload.as_one(),
            Waiting::Apart {
                without,
                framing,
                record,
            } => framing.put_back(without, record).into(),
        }
    }

    /// The dictionary's record it holds apart, named: what [`Waiting::whole`] puts back, so that
    /// the write names it without hashing it again.
    pub(super) fn known_piece(&self) -> Option<&KnownPiece> {
        match self {
            Waiting::Apart { record, .. } => Some(record),
            Waiting::Whole(_) | Waiting::Taken(_) => None,
        }
    }
}

impl crate::store::QueuedData for Waiting {
    fn payload(&self) -> Payload {
        match self {
            // Checked already, where it stands in its file: no copy at each lookup.
            Waiting::Taken(payload) => payload.clone(),
            waiting => {
                let bytes = waiting.whole().into_owned();
                let len = bytes.len();
                Payload::whole(Arc::new(bytes), 0..len)
            }
        }
    }
}

/// The dictionaries' records entries waiting hold apart, each once: NVIDIA's driver holds one at
/// a time, so a run sees one or two; the last [`Dictionaries::KEPT`] new ones are kept, for the
/// writer's life. A dictionary is known by its record's hash and length, as the driver names it
/// (and as the layer hands it over: `dictionary.rs`); its record's head is compared too.
#[derive(Default)]
pub(super) struct Dictionaries(Mutex<VecDeque<(DictionaryId, Arc<KnownPiece>)>>);

impl Dictionaries {
    pub(super) const KEPT: usize = 4;

    /// How many records are held.
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.0.locked().len()
    }

    /// `data`, which `framing` frames, to wait in the queue with its dictionary's record set apart.
    pub(super) fn set_apart(&self, data: &[u8], framing: Framing) -> Waiting {
        let fresh = framing.dictionary_record(data);
        let held = |all: &VecDeque<(DictionaryId, Arc<KnownPiece>)>| {
            all.iter()
                .find(|(id, record)| {
                    *id == framing.dictionary && record[..RECORD_HEAD] == fresh[..RECORD_HEAD]
                })
                .map(|(_, record)| record.clone())
        };
        let found = held(&self.0.locked());
        let record = found.unwrap_or_else(|| {
            // Copied and named outside the lock (once a dictionary, 0.5 ms): the other
            // application threads never wait on 1.78 MB.
            let record = Arc::new(KnownPiece::new(fresh));
            let mut all = self.0.locked();
            held(&all).unwrap_or_else(|| {
                if all.len() == Self::KEPT {
                    all.pop_front();
                }
                all.push_back((framing.dictionary, record.clone()));
                record
            })
        });
        Waiting::Apart {
            without: framing.without_dictionary_in(data),
            framing,
            record,
        }
    }
}
