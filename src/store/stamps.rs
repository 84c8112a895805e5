//! Stamps (an entry's modification time, by which the bound evicts the oldest first) and the
//! run's order of use they make, which the next run reads ahead in (`order.rs`).

use std::collections::HashSet;
use std::fs;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use super::recipe::PieceName;
use super::{bound, files, order, FoundEntry, Store, StoreError};
use crate::key::{EntryName, PipelineKey};
use crate::sync::{AtOnce, Unpoisoned};

/// What [`Store::remember_use_order`] needs: the order the last run left, this run's uses with
/// their stamps, and the entries the bound last saw.
#[derive(Debug, Default)]
pub(super) struct UseOrders {
    /// Read once, by the first who asks (the opening thread, to read ahead; or the run's end).
    earlier: OnceLock<Vec<PipelineKey>>,
    /// Every entry found or written, with its stamp (taken when it was used).
    used: Mutex<Vec<(SystemTime, PipelineKey)>>,
    /// This identity's entries as the bound last listed them.
    pub(super) live: Mutex<Option<HashSet<PipelineKey>>>,
}

/// A found entry's stamp, to be given later: its name and the store's pieces it names (each a
/// list or not), which its stamp stamps first.
#[derive(Debug, Clone)]
pub struct ToStamp {
    pub(super) name: EntryName,
    pub(super) pieces: Vec<(PieceName, bool)>,
}

impl ToStamp {
    pub fn name(&self) -> EntryName {
        self.name
    }

    /// Test only: the stamp of an entry that names no piece.
    #[cfg(test)]
    pub fn of(name: EntryName) -> ToStamp {
        ToStamp {
            name,
            pieces: Vec::new(),
        }
    }
}

/// A stamp owed: the entry's name, its stamp, the pieces it names.
pub(super) type Owed = (EntryName, SystemTime, Vec<(PieceName, bool)>);

impl Store {
    /// The next stamp: just before the opening, one microsecond earlier for each one taken.
    pub fn next_stamp(&self) -> SystemTime {
        let n = self.stamps_taken.fetch_add(1, Ordering::Relaxed) + 1;
        self.opened_at
            .checked_sub(Duration::from_micros(n))
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    /// Stamps an entry this run found.
    pub fn stamp(&self, found: FoundEntry) {
        self.stamp_found(&found.into_stamp(), self.next_stamp());
    }

    /// Notes that a found entry's stamp, taken now, is queued to be given later
    /// ([`Store::give_owed_stamp`]): a bound pass meanwhile gives it first. Gives `entry` back
    /// where it is not noted: the writer, at idle priority, holds what notes it (an application
    /// thread never waits on it), and the caller's stamp carries it ([`Store::stamp_found`]).
    pub fn owe_stamp(&self, entry: ToStamp, stamp: SystemTime) -> Option<ToStamp> {
        let Some(key) = PipelineKey::from_file_name(&entry.name) else {
            return Some(entry);
        };
        let Some(mut owed) = self.owed_stamps.locked_at_once() else {
            return Some(entry);
        };
        owed.insert(key, (entry.name, stamp, entry.pieces));
        None
    }

    /// Gives a stamp noted by [`Store::owe_stamp`], unless a bound pass gave it already.
    pub fn give_owed_stamp(&self, name: &EntryName, stamp: SystemTime) {
        let owed = PipelineKey::from_file_name(name)
            .and_then(|key| self.owed_stamps.locked().remove(&key));
        if let Some((name, _, pieces)) = owed {
            self.stamp_found(&ToStamp { name, pieces }, stamp);
        }
    }

    /// Gives every stamp still owed (before a bound pass lists the entries).
    pub(super) fn give_owed_stamps(&self) {
        let owed = std::mem::take(&mut *self.owed_stamps.locked());
        let mut owed: Vec<_> = owed.into_values().collect();
        // The newest first, as the run took them.
        owed.sort_by_key(|(_, stamp, _)| std::cmp::Reverse(*stamp));
        for (name, stamp, pieces) in owed {
            self.stamp_found(&ToStamp { name, pieces }, stamp);
        }
    }

    /// Stamps a found entry, by its name, with a stamp taken when it was used (the layer's
    /// writer thread stamps later, off the application's thread, in the run's order of use), and
    /// the pieces it names first. An entry gone since is not stamped.
    pub fn stamp_found(&self, entry: &ToStamp, stamp: SystemTime) {
        let name = &entry.name;
        let key = PipelineKey::from_file_name(name);
        // Its pieces first: the bound lists entries before pieces, so whoever sees the entry's
        // new stamp sees its pieces' too.
        if !entry.pieces.is_empty() {
            self.pieces.stamp_first(&entry.pieces, stamp);
        }
        match (self.stamp_by_name(name, stamp), key) {
            (Ok(()), Some(key)) => self.used(key, stamp),
            (Ok(()), None) => {}
            // Found while it waits to be written: the file that keeps it carries the use.
            (Err(e), Some(key)) if e.kind() == io::ErrorKind::NotFound => {
                self.used_while_waiting(key, stamp)
            }
            (Err(e), _) => {
                tracing::debug!(dir = %self.dir.display(), error = %e, "could not stamp an entry")
            }
        }
    }

    /// Notes an entry this run found or wrote, with its stamp, for the run's use order.
    pub(super) fn used(&self, key: PipelineKey, stamp: SystemTime) {
        let mut used = self.use_order.used.locked();
        if used.len() < order::MOST_KEYS {
            used.push((stamp, key));
        }
    }

    /// The order of use the last run left in [`order::USE_ORDER`] (empty where there is none).
    /// A damaged file is dropped with one line: reading ahead then follows the bound's listing.
    pub fn remembered_use_order(&self) -> &[PipelineKey] {
        self.use_order.earlier.get_or_init(|| {
            match order::read(&self.dir.join(order::USE_ORDER)) {
                Ok(keys) => keys.unwrap_or_default(),
                Err(order::ReadError::Io { path, source }) => {
                    tracing::debug!(path = %path.display(), error = %source, "the use order cannot be read");
                    Vec::new()
                }
                Err(order::ReadError::Damaged { path, source }) => {
                    tracing::warn!(path = %path.display(), error = %source, "the use order is damaged; dropped (this run reads ahead in the stamps' order)");
                    let _ = fs::remove_file(&path);
                    Vec::new()
                }
            }
        })
    }

    /// Writes this run's order of use into [`order::USE_ORDER`] (through a temporary file, its
    /// lock and a rename, as an entry): what it found or wrote, first used first, then the rest
    /// of the last run's order. Nothing is written where the order is unchanged or the run used
    /// nothing. Called at the run's end, once its stamps are written.
    pub fn remember_use_order(&self) -> Result<(), StoreError> {
        let mut used = std::mem::take(&mut *self.use_order.used.locked());
        if used.is_empty() {
            return Ok(());
        }
        // The newest stamp was taken first.
        used.sort_by_key(|u| std::cmp::Reverse(u.0));
        let used: Vec<PipelineKey> = used.into_iter().map(|u| u.1).collect();
        let earlier = self.remembered_use_order();
        let now = order::merged(&used, earlier, self.use_order.live.locked().as_ref());
        if now == earlier {
            return Ok(());
        }
        self.make_dir()?;
        let path = self.dir.join(order::USE_ORDER);
        files::write_atomically(&path, &order::encode(&now), SystemTime::now()).map(|_| ())
    }

    /// Sets an entry's modification time by its name, relative to the held directory: one
    /// system call where an open, a time update and a close would be three.
    /// Never sets back a newer stamp (a process that opened later found it too).
    fn stamp_by_name(&self, name: &str, stamp: SystemTime) -> io::Result<()> {
        files::stamp_forward(self.held_dir().as_deref(), &self.dir.join(name), stamp).map(|_| ())
    }

    /// The keys of the identity directory's `most` oldest entries (by stamp: the last used in
    /// the last run's order of use), oldest first.
    pub fn entries_oldest_first(&self, most: usize) -> Vec<PipelineKey> {
        let mut listed = bound::entries_in(&self.dir);
        listed.sort_by_key(|e| e.stamp);
        listed
            .iter()
            .filter_map(|e| e.path.file_name()?.to_str())
            .filter_map(PipelineKey::from_file_name)
            .take(most)
            .collect()
    }
}
