//! NVIDIA's cache data held in the writer's queue with its dictionary's record set apart: the
//! record once for every entry waiting that carries it, each entry's own bytes beside it, and the
//! data put back together, byte for byte, when it is written.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use crate::store::nvidia_cache::{DictionaryId, Framing, RECORD_HEAD};
use crate::store::recipe::{piece_name, NamedRange, PieceName};
use crate::store::Payload;
use crate::sync::Unpoisoned;

/// A dictionary's whole record, held once for the entries that carry it, and its name as a piece,
/// hashed once (on the first thread to write one of them) for all of them: hashed for each, its
/// 1.78 MB were most of such an entry's write (this machine: 1.0 ms an entry, against 0.2 ms for
/// the entry's own bytes alone).
pub(super) struct DictionaryRecord {
    bytes: Box<[u8]>,
    name: OnceLock<PieceName>,
}

impl DictionaryRecord {
    fn new(bytes: &[u8]) -> DictionaryRecord {
        DictionaryRecord {
            bytes: bytes.into(),
            name: OnceLock::new(),
        }
    }

    /// Its name as a piece: the BLAKE3 of its bytes.
    pub(super) fn name(&self) -> PieceName {
        *self.name.get_or_init(|| piece_name(&self.bytes))
    }
}

impl std::ops::Deref for DictionaryRecord {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

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
        record: Arc<DictionaryRecord>,
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

    /// [`Waiting::whole`], and where the dictionary's record stands in it, named: the held
    /// record's very bytes are what [`Framing::put_back`] puts there, so the name holds, and the
    /// record is not hashed again for each entry it is written with.
    pub(super) fn whole_named(&self) -> (std::borrow::Cow<'_, [u8]>, Option<NamedRange>) {
        let named = match self {
            Waiting::Apart {
                framing, record, ..
            } => Some(NamedRange {
                range: framing.dictionary_range(),
                name: record.name(),
            }),
            Waiting::Whole(_) | Waiting::Taken(_) => None,
        };
        (self.whole(), named)
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
pub(super) struct Dictionaries(Mutex<VecDeque<(DictionaryId, Arc<DictionaryRecord>)>>);

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
        let held = |all: &VecDeque<(DictionaryId, Arc<DictionaryRecord>)>| {
            all.iter()
                .find(|(id, record)| {
                    *id == framing.dictionary && record[..RECORD_HEAD] == fresh[..RECORD_HEAD]
                })
                .map(|(_, record)| record.clone())
        };
        let found = held(&self.0.locked());
        let record = found.unwrap_or_else(|| {
            // Copied outside the lock: the other application threads never wait on 1.78 MB.
            let record = Arc::new(DictionaryRecord::new(fresh));
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
