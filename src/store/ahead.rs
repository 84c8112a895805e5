//! Reading ahead: once the store is open, a thread of the layer's own reads the entries the last
//! run used, in the order it used them (newest stamp first), checks each whole as a lookup would,
//! and holds it, so that the lookup on the application's thread finds it checked in memory
//! instead of opening, reading and hashing a file. A window bounds the bytes held. A lookup
//! claims its key whether or not the entry has been read yet: a claimed key is never read ahead
//! after, so no entry is held that nobody will take.
//!
//! The readers run at idle priority and share one lock with the lookups: a reader preempted
//! while it holds the lock would stall the application's threads behind it. So a lookup only
//! tries the lock; when it is taken, the lookup leaves its claim in a channel (a send takes no
//! lock) and reads its entry itself, and the readers take the claims in at their next turn.
//! Every reader's wait sees the caller's stop flag, set from the device's creation on.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Condvar, Mutex, TryLockError};

use super::{bound, FoundEntry, Lookup, Store};
use crate::key::PipelineKey;
use crate::sync::{Unpoisoned, UnpoisonedWait};

/// What reading ahead holds for a key, until a lookup takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// The entry's payload, checked whole (with the pieces it names).
    Bytes(super::Checked),
}

impl Ready {
    fn held_bytes(&self) -> u64 {
        match self {
            Ready::Bytes(b) => b.payload.file_len() as u64,
        }
    }
}

struct Held {
    ready: HashMap<PipelineKey, Ready>,
    claimed: HashSet<PipelineKey>,
    /// Claims a lookup left while the lock was taken.
    late_claims: Receiver<PipelineKey>,
    /// The bytes held, and those reserved by readers for the entry each is reading.
    bytes: u64,
    /// Readers waiting for room in the window: only then is there anyone to wake (a wake is a
    /// system call, and a lookup takes an entry for every pipeline).
    waiting: usize,
    /// Reading ahead has read all it will.
    ended: bool,
    stopped: bool,
}

impl Held {
    /// Takes in the claims lookups left in the channel, letting go of what they claimed.
    fn take_late_claims(&mut self) {
        while let Ok(key) = self.late_claims.try_recv() {
            if let Some(ready) = self.ready.remove(&key) {
                self.bytes -= ready.held_bytes();
            }
            self.claimed.insert(key);
        }
    }
}

/// The entries read ahead, and the keys lookups have claimed.
pub struct ReadAhead {
    held: Mutex<Held>,
    room: Condvar,
    /// Where a lookup that found the lock taken leaves its claim.
    claims: Sender<PipelineKey>,
    /// Set once reading ahead has ended and all it held was taken: lookups then skip the lock.
    over: AtomicBool,
    /// Set once reading ahead has read all it will, or was stopped: no reader (at idle priority,
    /// perhaps preempted) takes the lock again, so a lookup may wait for it.
    readers_gone: AtomicBool,
}

impl Default for ReadAhead {
    fn default() -> Self {
        let (claims, late_claims) = channel();
        ReadAhead {
            held: Mutex::new(Held {
                ready: HashMap::new(),
                claimed: HashSet::new(),
                late_claims,
                bytes: 0,
                waiting: 0,
                ended: false,
                stopped: false,
            }),
            room: Condvar::new(),
            claims,
            over: AtomicBool::new(false),
            readers_gone: AtomicBool::new(false),
        }
    }
}

impl std::fmt::Debug for ReadAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadAhead")
            .field("over", &self.over)
            .finish()
    }
}

/// What a reader is to do with its next entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserve {
    /// Read it: its room in the window is reserved.
    Read,
    /// A lookup took the key first: skip it.
    Claimed,
    /// Reading ahead is over.
    Stopped,
}

/// What reading ahead did, for its log line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AheadReport {
    /// Entries read, checked and held.
    pub held: u64,
    pub held_bytes: u64,
    /// Entries a lookup claimed first.
    pub claimed_first: u64,
}

impl ReadAhead {
    /// A lookup's claim on `key`: the entry's bytes if they were read ahead (already checked);
    /// either way the key is not read ahead after this. A lookup on a thread of the layer's own
    /// at idle priority (the rebuild's) claims nothing: it would hold the lock while an
    /// application thread might wait on it (the readers may then read that key too). Never waits: with the lock taken (by a
    /// reader, perhaps preempted at idle priority) the claim is left for the readers, and the
    /// lookup reads the entry itself. Once the readers are gone only lookups take the lock, each
    /// briefly: a lookup then waits its turn rather than miss what is held.
    pub fn claim(&self, key: &PipelineKey) -> Option<Ready> {
        if self.over.load(Ordering::Acquire) {
            return None;
        }
        // A thread of the layer's own at idle priority (the rebuild's) takes nothing read ahead:
        // it would hold the lock while an application thread might wait on it.
        if crate::sync::at_idle_priority() {
            return None;
        }
        let mut held = if self.readers_gone.load(Ordering::Acquire) {
            self.held.locked()
        } else {
            match self.held.try_lock() {
                Ok(held) => held,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    let _ = self.claims.send(*key);
                    return None;
                }
            }
        };
        held.claimed.insert(*key);
        let ready = held.ready.remove(key)?;
        held.bytes -= ready.held_bytes();
        self.wake_a_waiting_reader(&held);
        self.skip_lock_once_taken(&held);
        Some(ready)
    }

    fn wake_a_waiting_reader(&self, held: &Held) {
        if held.waiting > 0 {
            self.room.notify_one();
        }
    }

    /// Waits until `len` more bytes fit the window (or nothing is held or reserved: one entry
    /// larger than the window is still read), and reserves them for `key`'s entry, about to be
    /// read; unless a lookup has claimed `key`, or reading ahead has been stopped (`stop` set, or
    /// [`ReadAhead::stop`]). One lock for both questions: the reader shares it with every lookup.
    pub fn reserve(&self, key: &PipelineKey, len: u64, window: u64, stop: &AtomicBool) -> Reserve {
        let mut held = self.held.locked();
        loop {
            held.take_late_claims();
            if held.stopped || stop.load(Ordering::Acquire) {
                return Reserve::Stopped;
            }
            if held.claimed.contains(key) {
                return Reserve::Claimed;
            }
            if held.bytes == 0 || held.bytes + len <= window {
                held.bytes += len;
                return Reserve::Read;
            }
            held.waiting += 1;
            held = self.room.wait_on(held);
            held.waiting -= 1;
        }
    }

    /// Wakes every waiting reader, to see a stop flag just set (taken under the lock, so that a
    /// reader between its check and its wait is not missed).
    pub fn wake_readers(&self) {
        let _held = self.held.locked();
        self.room.notify_all();
    }

    /// Holds a checked entry in the room reserved for it, unless a lookup claimed it meanwhile
    /// (or `bytes` is `None`: the entry could not be read). True when held.
    pub fn offer(&self, key: PipelineKey, reserved: u64, bytes: Option<Vec<u8>>) -> bool {
        self.offer_ready(key, reserved, bytes.map(|b| Ready::Bytes(b.into())))
    }

    /// As [`ReadAhead::offer`], for what a reader holds.
    pub fn offer_ready(&self, key: PipelineKey, reserved: u64, ready: Option<Ready>) -> bool {
        let mut held = self.held.locked();
        if held.stopped {
            return false;
        }
        held.take_late_claims();
        held.bytes -= reserved;
        self.wake_a_waiting_reader(&held);
        match ready {
            Some(ready) if !held.claimed.contains(&key) => {
                held.bytes += ready.held_bytes();
                held.ready.insert(key, ready);
                true
            }
            _ => false,
        }
    }

    /// Reading ahead has read what it will: once lookups have taken what it holds, they skip
    /// the lock.
    pub fn end(&self) {
        let mut held = self.held.locked();
        held.take_late_claims();
        held.ended = true;
        self.readers_gone.store(true, Ordering::Release);
        self.skip_lock_once_taken(&held);
    }

    fn skip_lock_once_taken(&self, held: &Held) {
        if held.ended && held.ready.is_empty() {
            self.over.store(true, Ordering::Release);
        }
    }

    /// Whether reading ahead has read all it will, or was stopped.
    pub fn has_ended(&self) -> bool {
        self.readers_gone.load(Ordering::Acquire)
    }

    /// Stops reading ahead (at the device's end) and lets go of what is held.
    pub fn stop(&self) {
        let mut held = self.held.locked();
        held.stopped = true;
        held.ready.clear();
        held.bytes = 0;
        self.readers_gone.store(true, Ordering::Release);
        self.over.store(true, Ordering::Release);
        self.room.notify_all();
    }
}

/// What reading one entry ahead gave.
enum ReadOne {
    /// Checked whole, its room reserved.
    Read(FoundEntry, u64),
    /// Claimed first, or damaged: nothing to hold.
    Skipped,
    Stopped,
}

/// The order in which [`Store::read_ahead`] reads entries.
pub enum AheadOrder<'a> {
    /// The last run's order of use (newest stamp first), from the bound's listing where it has
    /// just listed the title (else the directory listed and every entry stat'ed here).
    LastUse(Option<Vec<bound::StampedEntry>>),
    /// The order the last run left in its `use-order` file ([`Store::remembered_use_order`]):
    /// reading starts at opening, before any listing or stat.
    Remembered(&'a [PipelineKey]),
}

impl Store {
    /// Reads ahead the entries the last run used, first used first, holding at most `window`
    /// bytes not yet taken, until every one is read, `stop` is set (then
    /// [`Store::wake_readers_to_stop`]), or [`Store::stop_reading_ahead`] is called.
    /// Run on a thread of the caller's own, after the opening; `readers` threads read (one per
    /// four cores suits a store of large entries, whose hashing one thread cannot keep ahead of
    /// several application threads).
    ///
    /// `order`: the last run's use order where it left one (entries the opening did not list
    /// are skipped unread), else the title's entries as the bound just listed them, if it did
    /// (this store's are read from it instead of listing and stat-ing the directory again).
    pub fn read_ahead(
        &self,
        order: AheadOrder<'_>,
        window: u64,
        readers: usize,
        stop: &AtomicBool,
    ) -> AheadReport {
        // What to read, in order: each entry's key, and its size where the listing gave it.
        let entries: Vec<(PipelineKey, u64)> = match order {
            AheadOrder::LastUse(listed) => {
                let mut entries = match listed {
                    // (An entry still waiting is in memory: nothing to read.)
                    Some(mut all) => {
                        all.retain(|e| self.holds(e) && e.waiting_record.is_none());
                        all
                    }
                    None => bound::entries_in(&self.dir),
                };
                entries.sort_by_key(|e| std::cmp::Reverse(e.stamp));
                entries
                    .iter()
                    .filter_map(|e| Some((e.key()?, e.bytes)))
                    .collect()
            }
            // Sizes unknown until read: each reader's entry is counted once it is read, so the
            // window is exceeded by at most the entries the readers are reading.
            // (On the opening's thread, at idle priority: by the listing alone, without the known
            // entries' lock. One written since waits in the queue, or is read by its lookup.)
            AheadOrder::Remembered(keys) => keys
                .iter()
                .filter(|k| self.known.listed_at_opening(k))
                .map(|k| (*k, 0))
                .collect(),
        };
        let next = AtomicU64::new(0);
        let read_some = || {
            let mut report = AheadReport::default();
            while let Some(&(key, bytes)) =
                entries.get(next.fetch_add(1, Ordering::Relaxed) as usize)
            {
                match self.read_one_ahead(key, bytes, window, stop, &mut report) {
                    ReadOne::Stopped => break,
                    ReadOne::Skipped => {}
                    ReadOne::Read(found, reserved) => {
                        self.hold(key, found, reserved, &mut report);
                    }
                }
            }
            report
        };
        let report = std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..readers.max(1))
                .map(|_| scope.spawn(crate::sync::logging_as_here(read_some)))
                .collect();
            let mut report = read_some();
            for helper in helpers {
                if let Ok(r) = helper.join() {
                    report.held += r.held;
                    report.held_bytes += r.held_bytes;
                    report.claimed_first += r.claimed_first;
                }
            }
            report
        });
        self.ahead.end();
        report
    }

    /// Reads and checks one entry ahead, its room in the window reserved, unless a lookup claimed
    /// it or reading ahead is stopped.
    fn read_one_ahead(
        &self,
        key: PipelineKey,
        bytes: u64,
        window: u64,
        stop: &AtomicBool,
        report: &mut AheadReport,
    ) -> ReadOne {
        match self.ahead.reserve(&key, bytes, window, stop) {
            Reserve::Read => {}
            Reserve::Claimed => {
                report.claimed_first += 1;
                return ReadOne::Skipped;
            }
            Reserve::Stopped => return ReadOne::Stopped,
        }
        // A damaged entry is dropped and logged here as its lookup would have done.
        match self.read_entry(&key) {
            Ok(Lookup::Found(found)) => ReadOne::Read(found, bytes),
            _ => {
                self.ahead.offer(key, bytes, None);
                ReadOne::Skipped
            }
        }
    }

    /// Holds an entry read ahead, as its bytes.
    fn hold(&self, key: PipelineKey, found: FoundEntry, reserved: u64, report: &mut AheadReport) {
        let len = found.checked.payload.file_len() as u64;
        if self
            .ahead
            .offer_ready(key, reserved, Some(Ready::Bytes(found.checked)))
        {
            report.held += 1;
            report.held_bytes += len;
        } else {
            report.claimed_first += 1;
        }
    }

    /// Ends reading ahead and lets go of what it holds (the last device of the store is gone).
    pub fn stop_reading_ahead(&self) {
        self.ahead.stop();
    }

    /// Wakes the readers waiting for room, to see the stop flag their caller just set. What they
    /// hold still serves lookups (another device may share the store).
    pub fn wake_readers_to_stop(&self) {
        self.ahead.wake_readers();
    }

    /// Whether reading ahead has read all it will (or was stopped).
    pub fn reading_ahead_ended(&self) -> bool {
        self.ahead.has_ended()
    }

    /// Nothing is read ahead for this store: lookups take no lock for it.
    pub fn read_nothing_ahead(&self) {
        self.ahead.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static GO: AtomicBool = AtomicBool::new(false);

    fn key(n: u8) -> PipelineKey {
        PipelineKey {
            spirv: [n; 16],
            state: [0; 16],
        }
    }

    #[test]
    fn a_held_entry_is_taken_once_and_a_claimed_key_is_never_held() {
        let ahead = ReadAhead::default();
        assert_eq!(ahead.reserve(&key(1), 10, 100, &GO), Reserve::Read);
        assert!(ahead.offer(key(1), 10, Some(vec![1; 10])));
        assert_eq!(ahead.claim(&key(1)), Some(Ready::Bytes(vec![1; 10].into())));
        assert_eq!(ahead.claim(&key(1)), None);
        assert_eq!(ahead.reserve(&key(1), 10, 100, &GO), Reserve::Claimed);
        assert_eq!(ahead.reserve(&key(2), 10, 100, &GO), Reserve::Read);
        assert_eq!(ahead.claim(&key(2)), None);
        let held = ahead.offer(key(2), 10, Some(vec![2; 10]));
        assert!(!held, "claimed before it was read");
    }

    #[test]
    fn the_window_waits_for_a_lookup_and_stop_releases_the_wait() {
        let ahead = std::sync::Arc::new(ReadAhead::default());
        assert_eq!(
            ahead.reserve(&key(9), 100, 10, &GO),
            Reserve::Read,
            "an empty window takes any one entry"
        );
        assert!(
            !ahead.offer(key(9), 100, None),
            "unreadable: its room is given back"
        );
        assert_eq!(ahead.reserve(&key(1), 8, 10, &GO), Reserve::Read);
        assert!(ahead.offer(key(1), 8, Some(vec![0; 8])));
        let reader = {
            let ahead = ahead.clone();
            std::thread::spawn(move || ahead.reserve(&key(3), 8, 10, &GO))
        };
        // The reader waits until the held entry is taken.
        assert_eq!(ahead.claim(&key(1)).map(|r| r.held_bytes()), Some(8));
        assert_eq!(reader.join().unwrap(), Reserve::Read);
        assert!(ahead.offer(key(3), 8, Some(vec![0; 8])));
        let stopped = {
            let ahead = ahead.clone();
            std::thread::spawn(move || ahead.reserve(&key(4), 8, 10, &GO))
        };
        ahead.stop();
        assert_eq!(stopped.join().unwrap(), Reserve::Stopped);
        assert_eq!(ahead.claim(&key(3)), None, "stop lets go of what is held");
    }

    #[test]
    fn a_stop_flag_set_before_or_during_a_wait_ends_it() {
        let ahead = std::sync::Arc::new(ReadAhead::default());
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        assert_eq!(ahead.reserve(&key(1), 8, 10, &stop), Reserve::Read);
        assert!(ahead.offer(key(1), 8, Some(vec![0; 8])));
        // The window is full and no lookup will come: only the stop flag ends this wait.
        let waiting = {
            let (ahead, stop) = (ahead.clone(), stop.clone());
            std::thread::spawn(move || ahead.reserve(&key(2), 8, 10, &stop))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        stop.store(true, Ordering::Release);
        ahead.wake_readers();
        assert_eq!(waiting.join().unwrap(), Reserve::Stopped);
        assert_eq!(
            ahead.reserve(&key(3), 1, 10, &stop),
            Reserve::Stopped,
            "set before the wait"
        );
        assert_eq!(
            ahead.claim(&key(1)).map(|r| r.held_bytes()),
            Some(8),
            "a stopped reader's entries still serve the other devices' lookups"
        );
    }

    #[test]
    fn a_claim_made_while_a_reader_holds_the_lock_is_taken_in_later() {
        let ahead = ReadAhead::default();
        assert_eq!(ahead.reserve(&key(1), 8, 100, &GO), Reserve::Read);
        assert!(ahead.offer(key(1), 8, Some(vec![0; 8])));
        {
            let _reader = ahead.held.locked();
            assert_eq!(ahead.claim(&key(1)), None, "never waits for the lock");
            assert_eq!(ahead.claim(&key(2)), None);
        }
        assert_eq!(ahead.reserve(&key(2), 8, 100, &GO), Reserve::Claimed);
        assert_eq!(
            ahead.held.locked().bytes,
            0,
            "the entry read ahead for a late claim is let go"
        );
        assert_eq!(ahead.claim(&key(1)), None);
    }
}
