//! Writing an entry: the stage binaries it shares kept once, as pieces, then the entry itself,
//! whole or not at all, with a check of the bound every so many bytes written.

use std::sync::atomic::Ordering;
use std::time::SystemTime;

use super::{envelope, files, recipe, Store, StoreError};
use crate::key::PipelineKey;
use crate::sync::Unpoisoned;

/// The bytes written between two checks of the bound: a quarter of it, at most 1 GiB.
fn bound_step(max_bytes: u64) -> u64 {
    (max_bytes / 4).clamp(1, 1 << 30)
}

/// The most stage binaries (and NVIDIA records) [`Store`] remembers as written inline once
/// (~100 bytes each); past it the oldest are let go, and a later sharer of one stands inline too.
const INLINE_ONCE_HELD: usize = 1 << 16;

impl Store {
    /// Writes an entry of pipeline-cache data whole, stamped now; skipped when another writer
    /// holds it or the bound is 0.
    pub fn write(&self, key: &PipelineKey, data: &[u8]) -> Result<files::Written, StoreError> {
        self.write_stamped(key, data, self.next_stamp())
    }

    /// Writes an entry whole with a stamp taken earlier (when the pipeline was built), so that a
    /// write done later, off the application's thread, keeps the run's order of use.
    pub fn write_stamped(
        &self,
        key: &PipelineKey,
        data: &[u8],
        stamp: SystemTime,
    ) -> Result<files::Written, StoreError> {
        self.will_write(key);
        self.write_announced(key, envelope::PayloadKind::Cache, data, stamp)
    }

    /// Tells the store that `key`'s entry is about to be written (by a queue, later), so that
    /// lookups open it from now on. Called on the thread that queues the write: the writer
    /// thread, at idle priority, never takes the known entries' lock that lookups take.
    pub fn will_write(&self, key: &PipelineKey) {
        if self.max_bytes > 0 {
            self.known.wrote(key);
        }
    }

    /// [`Store::will_write`] for an entry whose data waits in a queue meanwhile: until the queue
    /// drops `data` (once its file is in place, or its write failed), a lookup in this process
    /// finds it from there.
    pub fn will_write_queued(
        &self,
        key: &PipelineKey,
        kind: envelope::PayloadKind,
        data: &std::sync::Arc<super::Queued<dyn super::QueuedData>>,
    ) {
        if self.max_bytes > 0 {
            self.queued.hold(*key, kind, data);
            self.known.wrote(key);
        }
    }

    /// [`Store::will_write_queued`] for an entry an earlier process left waiting (at the
    /// opening, before the store is published): a bound pass that drops it from its file passes
    /// over it without the lookups' lock.
    pub fn will_write_earlier(
        &self,
        key: &PipelineKey,
        kind: envelope::PayloadKind,
        data: &std::sync::Arc<super::Queued<dyn super::QueuedData>>,
    ) {
        if self.max_bytes > 0 {
            self.queued.hold_earlier(*key, data);
        }
        self.will_write_queued(key, kind, data);
    }

    /// Entries about to be written together (what the layer's writer holds at the device's end,
    /// when the application waits for the process to end): every stage binary (or NVIDIA record)
    /// two of them carry is written as a piece from the first that carries it. Otherwise the first
    /// stands it inline, and is written a second time naming the piece when the next one comes
    /// (pygfx's 641 entries on RADV: 1,262 renames at the device's end, against 641 entries).
    /// `records_apart`: NVIDIA cache records (head included) that entries not among `payloads`
    /// carry whole, each with how many do (the writer's entries holding the driver's dictionary
    /// apart): each named once, not cut from every entry put together.
    pub fn expect_together(
        &self,
        payloads: &[(envelope::PayloadKind, &[u8])],
        records_apart: &[(&recipe::KnownPiece, u32)],
    ) {
        let chunking = *self.chunking.locked();
        let mut carried: std::collections::HashMap<recipe::PieceName, u32> =
            std::collections::HashMap::new();
        for (kind, data) in payloads {
            for cut in recipe::cut(*kind, data, chunking) {
                if let recipe::Cut::Piece { name, .. } = cut {
                    *carried.entry(name).or_default() += 1;
                }
            }
        }
        // Cut from their entries, such records are pieces by the same rule.
        for (record, entries) in records_apart {
            if recipe::record_may_be_a_piece(record.len(), chunking) {
                *carried.entry(record.name()).or_default() += entries;
            }
        }
        let twice = carried
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(name, _)| name);
        self.shared_ahead.locked().extend(twice);
    }

    /// [`Store::write_stamped`] for a key already given to [`Store::will_write`].
    pub fn write_announced(
        &self,
        key: &PipelineKey,
        kind: envelope::PayloadKind,
        data: &[u8],
        stamp: SystemTime,
    ) -> Result<files::Written, StoreError> {
        self.write_announced_knowing(key, kind, data, None, stamp)
    }

    /// [`Store::write_announced`] of data that may carry `known`'s bytes: a range holding them
    /// is named by it where the rule cuts a piece there, not hashed again.
    pub fn write_announced_knowing(
        &self,
        key: &PipelineKey,
        kind: envelope::PayloadKind,
        data: &[u8],
        known: Option<&recipe::KnownPiece>,
        stamp: SystemTime,
    ) -> Result<files::Written, StoreError> {
        // Found while it waited: its file carries that use. In place or failed, the queue drops
        // its data: either way no longer waiting (a failed one is compiled again). The lookups'
        // map is not touched here (`queued.rs`).
        let stamp = self.stamp_with_use(key, stamp);
        if self.max_bytes == 0 {
            return Ok(files::Written::Skipped);
        }
        self.make_dir()?;
        let chunking = *self.chunking.locked();
        // A stage binary (or a record of NVIDIA's data) is a piece once a second entry carries
        // it (or it is kept already; one the entry carries twice the recipe makes a piece
        // itself); the first entry to carry it, remembered as it is planned (one lock for the
        // question and the answer), is then written again naming the piece, by whichever of the
        // two writers finds the other's file done. A stage shared with an entry of an earlier
        // run or another process stands inline once more: bytes twice, never wrong ones.
        let first_holders = std::cell::RefCell::new(Vec::new());
        let kept_inline = std::cell::RefCell::new(Vec::new());
        let shared = |name: &recipe::PieceName| {
            if self.pieces_always.load(Ordering::Relaxed)
                || self.shared_ahead.locked().contains(name)
                || self.pieces.is_kept(name)
            {
                return true;
            }
            let mut once = self.inline_once.locked();
            match once.get(name) {
                Some(holder) if holder != key => {
                    first_holders.borrow_mut().push(*holder);
                    true
                }
                _ => {
                    once.hold(*name, *key, 1, INLINE_ONCE_HELD);
                    kept_inline.borrow_mut().push(*name);
                    false
                }
            }
        };
        let planned = recipe::plan_with(kind, data, chunking, &shared, known);
        let names: Vec<recipe::PieceName> = planned
            .iter()
            .flat_map(|p| match p {
                recipe::Planned::Inline(_) => Vec::new(),
                recipe::Planned::Piece(name, _) => vec![*name],
                recipe::Planned::List { name, pieces, .. } => pieces
                    .iter()
                    .map(|(n, _)| *n)
                    .chain(std::iter::once(*name))
                    .collect(),
            })
            .collect();
        self.pieces.writing(&names);
        let written = self.write_planned(key, kind, &planned, stamp);
        self.pieces.written(&names);
        // Checked once the entry's pieces are no longer in flight: the entry is on disk, so the
        // bound reads what it names, and its pieces go right after it if it goes (kept as in
        // flight, they outlived it and crowded out newer entries).
        let written = written.map(|(written, bound_due)| {
            if bound_due {
                self.keep_within_bound();
            }
            written
        });
        if written.is_ok() {
            let mut first_holders = first_holders.into_inner();
            // Another thread may have made a stage this entry keeps inline a piece while this
            // entry was being written (its writing this entry again found no file yet): this
            // thread writes it again instead.
            let now_a_piece = |name: &recipe::PieceName| self.pieces.touched_this_run(name);
            if kept_inline.into_inner().iter().any(now_a_piece) {
                first_holders.push(*key);
            }
            // Once each: a twin's seeded build names every record of its twin's entry.
            first_holders.sort_unstable();
            first_holders.dedup();
            for holder in first_holders {
                self.write_again_naming_pieces(&holder);
            }
        }
        written
    }

    /// Writes `key`'s entry again (read back whole, with the stamp its file has), now that a
    /// stage binary (or NVIDIA record) it holds inline is a piece, so that it is kept once. An
    /// entry gone or damaged meanwhile is left.
    fn write_again_naming_pieces(&self, key: &PipelineKey) {
        let Some((entry, Ok(stamp))) = self.read_back(key).map(|(e, meta)| (e, meta.modified()))
        else {
            return;
        };
        let payload = entry.with_data(|data| data.to_vec());
        if let Err(e) = self.write_announced(key, entry.kind(), &payload, stamp) {
            tracing::debug!(entry = %key.file_name(), error = %e, "could not write an entry again naming its shared binary");
        }
    }

    /// Keeps a planned payload's pieces and lists, then its entry. Says too whether the bytes
    /// written make a check of the bound due.
    fn write_planned(
        &self,
        key: &PipelineKey,
        kind: envelope::PayloadKind,
        planned: &[recipe::Planned<'_>],
        stamp: SystemTime,
    ) -> Result<(files::Written, bool), StoreError> {
        // Every piece and list is kept before the entry naming it is; a list's pieces before it.
        let mut pieces_written = 0;
        for p in planned {
            match p {
                recipe::Planned::Inline(_) => {}
                recipe::Planned::Piece(name, bytes) => {
                    pieces_written += self.pieces.put_named(name, bytes, stamp)?;
                }
                recipe::Planned::List {
                    name,
                    bytes,
                    pieces,
                    ..
                } => {
                    for (piece, piece_bytes) in pieces {
                        pieces_written += self.pieces.put_named(piece, piece_bytes, stamp)?;
                    }
                    pieces_written += self.pieces.put_list(name, bytes, stamp)?;
                }
            }
        }
        let parts: Vec<recipe::Part<'_>> = planned.iter().map(recipe::Planned::part).collect();
        let bytes = envelope::encode_parts(&self.identity, key, kind, &parts);
        // Skipped means another writer holds it, and renames it in place soon.
        let written = files::write_atomically(&self.entry_path(key), &bytes, stamp)?;
        self.used(*key, stamp);
        let mut bound_due = false;
        if let files::Written::Whole(n) = written {
            let n = n + pieces_written;
            self.written_since_noted.fetch_add(n, Ordering::Relaxed);
            let before = self.written_bytes.fetch_add(n, Ordering::Relaxed);
            let step = bound_step(self.max_bytes);
            bound_due = before / step != (before + n) / step;
        }
        Ok((written, bound_due))
    }
}
