//! The store's side of the files of entries left waiting: what a process takes at its opening,
//! what it leaves at its end, and which files its end keeps as they were or removes (the
//! file's format and its checks are in the module above).

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::*;

impl Store {
    /// Keeps `entries` waiting in one new file (the device's end, where writing each would hold
    /// the process; the writer then drops their jobs, and lookups in this process no longer find
    /// them from the queue). Entry files this process wrote holding inline what those carry move
    /// into the file ([`super::holders`]; [`Store::moved_removed`] waits for their removal).
    /// Returns the file's bytes on disk less the records of those moved in: the entries' own (a
    /// packed file's in proportion to what each stands for unpacked). (A device
    /// of the process made after the end finds neither: the store is not opened again in it.)
    pub fn keep_waiting(&self, entries: &[ToWait<'_>]) -> Result<u64, StoreError> {
        self.keep_waiting_moving(entries, true)
    }

    /// [`Store::keep_waiting`] for an earlier process's few entries, none of them this process's
    /// (the device's end, where too few entries wait to leave them all): no entry file moves in, or a
    /// file of three such entries could take in up to [`super::holders`]' 8 MiB of entry files
    /// this process wrote in its pauses, each written again by the next.
    pub fn keep_few_waiting(&self, entries: &[ToWait<'_>]) -> Result<u64, StoreError> {
        self.keep_waiting_moving(entries, false)
    }

    fn keep_waiting_moving(&self, entries: &[ToWait<'_>], moving: bool) -> Result<u64, StoreError> {
        if self.max_bytes == 0 || entries.is_empty() {
            return Ok(0);
        }
        self.make_dir()?;
        let chunking = *self.chunking.locked();
        // Kept this run and there now (a piece this process's bound or another's removed since
        // is carried: named, it would cost its entries a compile).
        let kept = |name: &PieceName| {
            self.pieces.touched_this_run(name) && self.pieces.path(name).is_file()
        };
        let cuts = cut_all(entries, chunking);
        let asked = piece_names(&cuts);
        let in_store: HashSet<PieceName> = asked.iter().copied().filter(kept).collect();
        let waiting: HashSet<PipelineKey> = entries.iter().map(|e| e.0).collect();
        let not_kept = asked.iter().copied().filter(|n| !in_store.contains(n));
        let moved = if moving {
            self.inline_holders(not_kept, &waiting)
        } else {
            Vec::new()
        };
        let moved_in = moved.iter().map(|m| (m.key, m.kind, &m.data[..], m.stamp));
        // An entry found while it waited (from an earlier process's file) keeps that use.
        let entries: Vec<ToWait<'_>> = self.with_last_uses(|last_use| {
            entries
                .iter()
                .copied()
                .chain(moved_in)
                .map(|(key, kind, data, stamp)| (key, kind, data, stamp.max(last_use(&key))))
                .collect()
        });
        let mut cuts = cuts;
        cuts.extend(cut_all(&entries[cuts.len()..], chunking));
        // The moved entries' other pieces asked too (each piece asked once: a file's metadata).
        let kept =
            |name: &PieceName| in_store.contains(name) || (!asked.contains(name) && kept(name));
        let (mut bytes, mut records) = encode_cut(&self.identity, &entries, &cuts, &kept);
        let mut moved = &moved[..];
        if bytes.len() as u64 > MOST_BYTES && !moved.is_empty() {
            // Too long for an opening to read: the moved entries stay files.
            let own = entries.len() - moved.len();
            (bytes, records) = encode_cut(&self.identity, &entries[..own], &cuts[..own], &kept);
            moved = &[];
        }
        let entries = &entries[..records.len()];
        let logical = bytes.len();
        let bytes = pack(bytes);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!("{}-{nanos}{}", std::process::id(), self.waiting_suffix());
        let path = self.dir.join(name);
        match files::write_atomically(&path, &bytes, newest_stamp(entries))? {
            files::Written::Whole(_) => {}
            files::Written::Skipped => {
                return Err(StoreError::io("write", &path)(std::io::Error::other(
                    "another writer holds its temporary file",
                )))
            }
        }
        self.remove_moved(moved);
        // Counted within the title's bound from now on (noted at the run's end).
        self.written_since_noted
            .fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
        // The entries' own share of the bytes on disk (a packed file's, in proportion).
        let moved_bytes: usize = records[records.len() - moved.len()..].iter().sum();
        Ok(share_on_disk(bytes.len(), logical - moved_bytes, logical))
    }

    /// Whether this process's opening left a waiting file for a later one (past
    /// [`TAKEN_AT_MOST`]): a file this process leaves goes behind it.
    pub fn left_waiting_untaken(&self) -> bool {
        self.waiting_left_untaken
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Notes the stamp of an entry found whose file is not there: found while it still waits
    /// (its file not yet written, or kept in a waiting file), the file that keeps it carries
    /// that use, so the bound counts it as used now, not when it was built. (Asked on the
    /// writer's thread: not whether it is queued, whose lock lookups wait on; a use noted for
    /// an entry gone since only ever dates a later write of it as used.)
    pub(in crate::store) fn used_while_waiting(&self, key: PipelineKey, stamp: SystemTime) {
        let mut taken = self.taken.locked();
        let at = taken.used.entry(key).or_insert(stamp);
        *at = (*at).max(stamp);
    }

    /// `stamp`, or the later stamp the entry was given while it waited to be written (a stamp
    /// still owed by the writer reaches its file once written: [`Store::give_owed_stamp`]).
    pub(in crate::store) fn stamp_with_use(
        &self,
        key: &PipelineKey,
        stamp: SystemTime,
    ) -> SystemTime {
        let given = self.taken.locked().used.get(key).copied();
        given.map_or(stamp, |given| stamp.max(given))
    }

    /// Runs `f` with each entry's last use while it waited, given or still owed by the writer
    /// (`UNIX_EPOCH` where none): for entries that stay waiting, whose owed stamps find no file.
    fn with_last_uses<R>(&self, f: impl FnOnce(&dyn Fn(&PipelineKey) -> SystemTime) -> R) -> R {
        let taken = self.taken.locked();
        let owed = self.owed_stamps.locked();
        let last_use = |key: &PipelineKey| {
            let given = taken.used.get(key).copied();
            let owed = owed.get(key).map(|o| o.1);
            given.max(owed).unwrap_or(UNIX_EPOCH)
        };
        f(&last_use)
    }

    /// The entries this process's bound pass dropped from waiting files (each file written
    /// again without them): of the files this process took, it no longer writes them, nor finds
    /// them from memory, as if their files had gone (marked on each entry's data: the pass may
    /// run at idle priority, and takes no lock lookups take: `queued.rs`).
    pub(in crate::store) fn forget_dropped_waiting(&self, records: &[StampedEntry]) {
        if records.is_empty() {
            return;
        }
        let mut forgotten = Vec::new();
        let mut taken = self.taken.locked();
        for r in records {
            let Some(key) = r.waiting_record else {
                continue;
            };
            if let Some(file) = taken.files.iter_mut().find(|f| f.path == r.path) {
                file.keys.retain(|k| *k != key);
                forgotten.push(key);
            }
        }
        // One still held by another file it took waits on in this process.
        forgotten.retain(|key| !taken.files.iter().any(|f| f.keys.contains(key)));
        drop(taken);
        for key in &forgotten {
            self.queued.earlier_passed_over(key);
        }
    }

    /// Takes the entries earlier processes left waiting in this identity's directory (at the
    /// opening, before the store is published), each checked as an entry file is; the files
    /// stay until the process's end settles them ([`Store::keep_waiting_files_mostly_unwritten`],
    /// [`Store::drop_settled_waiting`]).
    pub fn take_waiting(&self) -> Vec<WaitingEntry> {
        if self.max_bytes == 0 {
            return Vec::new();
        }
        let started = std::time::Instant::now();
        // Oldest written first ([`files_oldest_first`]): a file left again goes behind those an
        // opening left untaken past [`TAKEN_AT_MOST`].
        let ours = self.waiting_suffix();
        let mut paths = files_oldest_first(&self.dir).unwrap_or_default();
        paths.retain(|p| p.to_string_lossy().ends_with(&ours));
        let mut taken = Vec::new();
        let mut bytes_taken = 0u64;
        let mut held = self.taken.locked();
        for path in paths {
            if held.files.iter().any(|t| t.path == path) {
                continue; // taken once a process
            }
            if bytes_taken >= TAKEN_AT_MOST {
                self.waiting_left_untaken
                    .store(true, std::sync::atomic::Ordering::Release);
                break;
            }
            match read_whole(&path) {
                Ok(bytes) => {
                    bytes_taken += bytes.len() as u64;
                    let (mut entries, clean) = self.checked(Arc::new(bytes), &path);
                    // The opening wrote the file anew without an entry a stopped load names;
                    // where it could not, the entry is left here and the file not kept as it is.
                    let read = entries.len();
                    if let Some(stopped) = self.stopped_loads.get() {
                        entries.retain(|e| !stopped.contains(&e.key));
                    }
                    let clean = clean && entries.len() == read;
                    let keys: Vec<PipelineKey> = entries.iter().map(|e| e.key).collect();
                    held.every_key.extend(keys.iter().copied());
                    held.files.push(TakenFile {
                        path,
                        clean: clean && !keys.is_empty(),
                        keys,
                        kept: false,
                    });
                    taken.extend(entries);
                }
                Err(e) => {
                    tracing::debug!(file = %path.display(), error = %e, "a file of entries left waiting was not read")
                }
            }
        }
        if !taken.is_empty() {
            tracing::debug!(
                entries = taken.len(),
                bytes = bytes_taken,
                took_ms = %format_args!("{:.3}", started.elapsed().as_secs_f64() * 1e3),
                "entries an earlier process left waiting taken"
            );
        }
        taken
    }

    /// At the process's end (its store's last device), before what is still queued is written or
    /// left waiting: the keys of the entries of each taken file of whose entries this process
    /// wrote fewer than half, a file still there; those files stay as they are, and their
    /// entries need no writing. (Where another process removes such a file meanwhile, it wrote
    /// every entry of it first.) Those it wrote stand in both until a later process, passing
    /// over each ([`Store::waiting_entry_is_a_file`]), has written the rest: leaving the rest
    /// again in a file of its own took a later launch that wrote a few in its pauses 25-66 ms of
    /// its end (ncnn's ~3,000 on RADV at 2 threads). (Where the file is not kept,
    /// those of its entries an earlier process wrote that the writer did not reach are left
    /// waiting again beside their files: the bound drops such copies first.)
    /// Each device of the store may ask (at the process's exit every device ends so, in any
    /// order): the files kept by an earlier one are named again. A damaged file, or any where a
    /// file was left for a later opening, is not kept. The writer passes over their entries
    /// ([`crate::store::Queued::passed_over`]).
    pub fn keep_waiting_files_mostly_unwritten(&self) -> std::collections::HashSet<PipelineKey> {
        let mut kept = std::collections::HashSet::new();
        let mut taken = self.taken.locked();
        let may_keep = !self.left_waiting_untaken();
        let mut newly_kept = Vec::new();
        for file in taken.files.iter_mut() {
            let mostly_waiting = || {
                let written = file.keys.iter().filter(|k| !self.queued.holds(k)).count();
                written * 2 < file.keys.len()
            };
            if !file.kept && may_keep && file.clean && mostly_waiting() && file.path.is_file() {
                file.kept = true;
                newly_kept.push((file.path.clone(), file.keys.clone()));
            }
            if file.kept {
                kept.extend(file.keys.iter().copied());
            }
        }
        drop(taken);
        for (path, keys) in newly_kept {
            self.stamp_with_last_use(&path, &keys);
        }
        for key in &kept {
            self.queued.earlier_passed_over(key);
        }
        kept
    }

    /// Whether an earlier process's entry taken from a waiting file stands as a file already,
    /// written no earlier than its record's `stamp`: a process that kept the file as it was
    /// wrote it there ([`Store::keep_waiting_files_mostly_unwritten`]). The writer passes it over, and its
    /// file takes the entry's use in this process, where later.
    pub fn waiting_entry_is_a_file(&self, key: &PipelineKey, stamp: SystemTime) -> bool {
        let path = self.entry_path(key);
        let written = fs::symlink_metadata(&path)
            .ok()
            .filter(|m| m.is_file())
            .and_then(|m| m.modified().ok());
        let Some(written) = written.filter(|w| super::written_from_record(*w, stamp)) else {
            return false;
        };
        let used = self.stamp_with_use(key, stamp);
        if used > written {
            if let Err(e) = files::stamp_forward(None, &path, used) {
                tracing::debug!(file = %path.display(), error = %e, "an entry written already from a waiting file was not stamped with its use");
            }
        }
        true
    }

    /// A waiting file kept as it is carries the newest use of its entries (`keys`) in this
    /// process: the bound drops its entries as used then.
    fn stamp_with_last_use(&self, path: &Path, keys: &[PipelineKey]) {
        let newest = self.with_last_uses(|last_use| keys.iter().map(last_use).max());
        let Some(newest) = newest.filter(|t| *t > UNIX_EPOCH) else {
            return;
        };
        if let Err(e) = files::stamp_forward(None, path, newest) {
            tracing::debug!(file = %path.display(), error = %e, "a waiting file kept as it is was not stamped with its entries' use");
        }
    }

    /// Removes each taken file not kept none of whose entries waits any more in this process
    /// (each written, or left waiting in a file of this process's): at a device's end, after
    /// the writer has written or left waiting what was queued.
    pub fn drop_settled_waiting(&self) {
        self.taken.locked().files.retain(|file| {
            let settled = !file.kept && !file.keys.iter().any(|k| self.queued.holds(k));
            if settled {
                if let Err(e) = fs::remove_file(&file.path) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        tracing::debug!(file = %file.path.display(), error = %e, "a waiting file whose entries are written was not removed");
                    }
                }
            }
            !settled
        });
    }

    /// A waiting file's name ends with the process's ABI: processes of both pointer sizes share
    /// an identity directory where the driver's UUID does not tell them apart (NVIDIA's).
    fn waiting_suffix(&self) -> String {
        format!("-{}{SUFFIX}", self.identity.abi)
    }

    /// The entries of a waiting file's `bytes` that pass their check (one that fails is
    /// dropped and logged; each record says its own length), and whether the file was clean:
    /// read whole, every record passing.
    fn checked(&self, bytes: Arc<Vec<u8>>, path: &std::path::Path) -> (Vec<WaitingEntry>, bool) {
        let file = check_file(bytes, &self.identity, &self.pieces);
        if file.seal == Seal::Failed {
            tracing::warn!(file = %path.display(), "a file of entries left waiting failed its seal; each entry is checked on its own");
        }
        if !file.bad_pieces.is_empty() {
            tracing::warn!(file = %path.display(), pieces = file.bad_pieces.len(), "pieces of a file of entries left waiting failed their names; the entries naming them are compiled again");
        }
        for bad in &file.bad {
            tracing::warn!(file = %path.display(), entry = %bad.key.file_name(), reason = bad.why.reason(), "dropped an entry left waiting that failed its check; it is compiled again");
        }
        if !file.whole {
            tracing::warn!(file = %path.display(), "a file of entries left waiting is cut short; those past the cut are compiled again");
        }
        // One not sealed (damaged, or written before the seal) is not kept as it is: its entries
        // are written anew, sealed, and every later opening checks them by the seal alone.
        let clean = file.is_clean();
        (file.entries, clean)
    }
}
