//! A waiting file's records as the title's bound drops them: each file taken apart into its
//! records, in the order they go ([`as_records`]), and written again without those a pass drops
//! ([`WaitingDrops`]). The file and its records: the parent module.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{
    begin, check_file, encode_as_read, files_in, pack_again, parse_all, read_bounded,
    read_bounded_sized, seal, sealed, share_on_disk, written_from_record, Record, RECORD_HEAD,
};
use crate::key::PipelineKey;
use crate::store::eviction::StampedEntry;
use crate::store::identity::Identity;
use crate::store::pieces::Pieces;
use crate::store::recipe::PieceName;
use crate::store::{files, StoreError};

/// `listed` (a title's entries, pieces and waiting files, as the bound lists them) with each
/// waiting file given as its records, so that the bound drops what a file holds one entry at a
/// time. Each record is stamped as its file is (the newest use of its entries), its oldest own
/// stamp first (a boot's first pipelines, stamped newest, go last); one whose entry is a file
/// already (the process that took it wrote it, and removes the file at its end or keeps it as it
/// was: a file stamped no earlier than the record) holds nothing the title would miss, and goes
/// first. The file's own bytes (its magic and seal, anything past its
/// last whole record) go with the record that goes last; a piece it holds with the last record
/// to go that names it ([`records_of`]). A file is read as it is now, not as
/// it was listed; one holding no whole record stays one item, dropped whole; one that cannot be
/// read (out of file descriptors, say) is left out of the order, its bytes returned: still
/// counted, never dropped for a failed read.
pub fn as_records(listed: Vec<StampedEntry>) -> (Vec<StampedEntry>, u64) {
    let as_files: std::collections::HashMap<&Path, SystemTime> = listed
        .iter()
        .filter(|e| e.waiting_record.is_none() && e.key().is_some())
        .map(|e| (e.path.as_path(), e.stamp))
        .collect();
    let mut out = Vec::with_capacity(listed.len());
    let mut unread = 0;
    for file in &listed {
        if file.waiting_record.is_some() || !files::is_waiting_file(&file.path) {
            out.push(file.clone());
            continue;
        }
        let dir = file.path.parent().unwrap_or(Path::new(""));
        // A copy: its entry's file written from it.
        let is_a_file = |key: &PipelineKey, stamp: SystemTime| {
            let file = dir.join(key.file_name());
            as_files
                .get(file.as_path())
                .is_some_and(|at| written_from_record(*at, stamp))
        };
        let (bytes, on_disk) = match read_bounded_sized(&file.path) {
            Ok(Some(read)) => read,
            // Larger than a waiting file may be: no opening takes it, and it goes whole.
            Ok(None) => {
                out.push(file.clone());
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue, // gone since
            Err(_) => {
                unread += file.bytes;
                continue;
            }
        };
        match records_of(file, &bytes, on_disk, &is_a_file) {
            Some(records) => out.extend(records),
            None => out.push(file.clone()),
        }
    }
    (out, unread)
}

/// The records of a waiting file that reads `bytes` now (`on_disk` bytes on disk: a packed
/// file's records count their share of those), in the order the bound drops them. A piece the
/// file holds counts with the last of them that names it (it goes with that one: the rewrite
/// keeps only the pieces a kept entry names), one none names with the first.
fn records_of(
    file: &StampedEntry,
    bytes: &[u8],
    on_disk: u64,
    is_a_file: &dyn Fn(&PipelineKey, SystemTime) -> bool,
) -> Option<Vec<StampedEntry>> {
    let (all, _) = parse_all(bytes);
    let (pieces, records): (Vec<Record<'_>>, Vec<Record<'_>>) =
        all.into_iter().partition(|r| r.piece);
    let mut order: Vec<(bool, SystemTime, &Record<'_>)> = records
        .iter()
        .map(|r| (!is_a_file(&r.key, r.stamp), r.stamp, r))
        .collect();
    order.sort_by_key(|(not_a_file, stamp, _)| (*not_a_file, *stamp));
    let mut listed: Vec<StampedEntry> = order
        .iter()
        .map(|(not_a_file, _, r)| StampedEntry {
            path: file.path.clone(),
            bytes: (RECORD_HEAD + r.entry.len()) as u64,
            stamp: if *not_a_file { file.stamp } else { UNIX_EPOCH },
            waiting_record: Some(r.key),
        })
        .collect();
    if !pieces.is_empty() {
        let named: Vec<HashSet<PieceName>> = order
            .iter()
            .map(|(_, _, r)| pieces_named(r.entry))
            .collect();
        for piece in &pieces {
            let name = piece.name();
            let at = named.iter().rposition(|n| n.contains(&name)).unwrap_or(0);
            if let Some(record) = listed.get_mut(at) {
                record.bytes += (RECORD_HEAD + piece.entry.len()) as u64;
            }
        }
    }
    let counted: u64 = listed.iter().map(|r| r.bytes).sum();
    listed.last_mut()?.bytes += bytes.len() as u64 - counted;
    if on_disk != bytes.len() as u64 {
        for record in &mut listed {
            record.bytes = share_on_disk(on_disk as usize, record.bytes as usize, bytes.len());
        }
        let shared: u64 = listed.iter().map(|r| r.bytes).sum();
        listed.last_mut()?.bytes += on_disk - shared;
    }
    Some(listed)
}

/// What each entry of the waiting file at `path` names (pieces and lists, `true`), by key: of
/// the store's pieces too, which the bound keeps while an entry names them. Nothing where the
/// file cannot be read.
pub fn named_by_entries(
    path: &Path,
) -> std::collections::HashMap<PipelineKey, Vec<(PieceName, bool)>> {
    let Ok(Some(bytes)) = read_bounded(path) else {
        return Default::default();
    };
    let (records, _) = parse_all(&bytes);
    records
        .into_iter()
        .filter(|r| !r.piece)
        .map(|r| (r.key, crate::store::named::in_bytes(r.entry)))
        .collect()
}

/// The pieces an entry of a waiting file names.
fn pieces_named(entry: &[u8]) -> HashSet<PieceName> {
    let names = crate::store::named::in_bytes(entry).into_iter();
    names
        .filter(|(_, list)| !list)
        .map(|(name, _)| name)
        .collect()
}

/// Records of waiting files a bound pass drops, applied once it has chosen them all: each file
/// written again without them, or removed where none of its records is left.
#[derive(Debug, Default)]
pub struct WaitingDrops {
    /// By file: its records dropped, as [`as_records`] listed them.
    files: std::collections::HashMap<PathBuf, Vec<StampedEntry>>,
}

impl WaitingDrops {
    /// Drops the waiting record `listed` names (one [`as_records`] gave).
    pub fn drop_record(&mut self, listed: &StampedEntry) {
        if listed.waiting_record.is_some() {
            let file = self.files.entry(listed.path.clone()).or_default();
            file.push(listed.clone());
        }
    }

    /// Writes each file again without its dropped records: what became of them.
    pub fn apply(self) -> Applied {
        let mut applied = Applied::default();
        for (path, records) in self.files {
            let keys: HashSet<PipelineKey> =
                records.iter().filter_map(|r| r.waiting_record).collect();
            let keep = dropping(&keys);
            match written_again(&path, &keep) {
                Ok(Rewrite::Done {
                    read,
                    written,
                    dropped,
                }) => {
                    // Counted gone at their shares, as listed: only those this pass dropped (one
                    // at once may have dropped some first), against the file as this pass read it.
                    let shares: u64 = records
                        .iter()
                        .filter(|r| r.waiting_record.is_some_and(|k| dropped.contains(&k)))
                        .map(|r| r.bytes)
                        .sum();
                    applied.past_shares += written as i64 - (read as i64 - shares as i64);
                    applied.gone.extend(records);
                }
                Ok(Rewrite::Untouched) => applied.gone.extend(records),
                Ok(Rewrite::NotNow) => applied.still_there.extend(records),
                Err(e) => {
                    tracing::debug!(file = %path.display(), error = %e, "a waiting file was not written again without the entries the bound dropped");
                    applied.still_there.extend(records);
                }
            }
        }
        applied
    }
}

/// What became of the records a pass dropped from waiting files ([`WaitingDrops::apply`]).
#[derive(Debug, Default)]
pub struct Applied {
    /// Gone: dropped now, or already (another pass at once dropped them by the same order, or
    /// the file went).
    pub gone: Vec<StampedEntry>,
    /// Still there: their file could not be written again.
    pub still_there: Vec<StampedEntry>,
    /// The bytes the files this pass wrote again take past what their records' shares left
    /// (less, where negative): a packed file's compression is not shared out evenly among its
    /// records.
    pub past_shares: i64,
}

/// What the copies of stopped loads' entries waiting in files name ([`stopped_copies`]), and the
/// waiting files as read (each read once for both this and [`without_stopped`]).
#[derive(Debug, Default)]
pub struct StoppedCopies {
    files: Vec<(PathBuf, Vec<u8>)>,
    /// The pieces and lists they name.
    pub named: Vec<PieceName>,
    /// The pieces the waiting files carry, by name, with whether a copy holds what its name says.
    pub own: HashMap<PieceName, bool>,
}

/// What the copies of `keys` waiting in the files of `dir`, of either ABI, name, and what every
/// waiting file there carries.
pub fn stopped_copies(dir: &Path, keys: &HashSet<PipelineKey>) -> StoppedCopies {
    let mut copies = StoppedCopies::default();
    let files = stopped_files(dir).into_iter();
    copies.files = files
        .filter_map(|path| Some((path.clone(), read_for_stopped(&path)?)))
        .collect();
    for (_, bytes) in &copies.files {
        let (all, _) = parse_all(bytes);
        for r in all.iter().filter(|r| !r.piece && keys.contains(&r.key)) {
            let names = crate::store::named::in_bytes(r.entry).into_iter();
            copies.named.extend(names.map(|(name, _)| name));
        }
        // Every file's own, those holding no stopped copy too: a piece gone from the store that
        // another file carries is still one its entries would load.
        let (own, _) = super::own_pieces(&all, sealed(bytes));
        for name in own.held.into_keys() {
            copies.own.insert(name, true);
        }
        for name in own.failed {
            copies.own.entry(name).or_insert(false);
        }
    }
    copies
}

/// Writes each waiting file of `copies` (all of a directory's, either ABI's) anew without the entries of `keys` (those
/// stale markers named) and those naming a piece of `gone` (blamed twice), at the opening, before
/// the markers go: a process that died before its end would leave them for an opening with no
/// marker, which would load them again. Returns the keys of the entries that go, whether or not
/// their file could be written anew (the opening's take leaves those it finds still there).
pub fn without_stopped(
    copies: &StoppedCopies,
    keys: &HashSet<PipelineKey>,
    gone: &HashSet<PieceName>,
) -> HashSet<PipelineKey> {
    let mut going = HashSet::new();
    for (path, bytes) in &copies.files {
        let (all, _) = parse_all(bytes);
        let goes =
            |r: &Record<'_>| keys.contains(&r.key) || !pieces_named(r.entry).is_disjoint(gone);
        let here: HashSet<PipelineKey> = all
            .iter()
            .filter(|r| !r.piece && goes(r))
            .map(|r| r.key)
            .collect();
        if here.is_empty() {
            continue;
        }
        // Written anew from the file as it reads then (another process may have changed it).
        match without(path, &here) {
            Ok(true) => {
                tracing::warn!(file = %path.display(), entries = here.len(), "dropped entries left waiting that a stopped load named or that name a piece blamed twice; they are compiled again")
            }
            written => {
                let error = written.err().map(|e| e.to_string());
                tracing::warn!(file = %path.display(), error, "a file of entries left waiting could not be written anew without a stopped load's entries; this process leaves them, and writes the file anew at its end");
            }
        }
        going.extend(here);
    }
    going
}

/// The waiting files of `dir` (none, with a line, where it cannot be listed).
fn stopped_files(dir: &Path) -> Vec<PathBuf> {
    files_in(dir).unwrap_or_else(|e| {
        tracing::warn!(dir = %dir.display(), error = %e, "the files of entries left waiting could not be listed to leave out a stopped load's entries");
        Vec::new()
    })
}

/// A waiting file's bytes, for a stopped load's entries: none where it is gone or larger than any
/// opening takes, and none, with a line, where it cannot be read.
fn read_for_stopped(path: &Path) -> Option<Vec<u8>> {
    match read_bounded(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "a file of entries left waiting could not be read to leave out a stopped load's entries");
            None
        }
    }
}

/// Writes the waiting file at `path` again without the records of `keys` (removes it where none
/// is left), as it reads now: by key, so that two passes at once dropping the same records
/// drop them once. `false` where it cannot be written again now.
pub(super) fn without(path: &Path, keys: &HashSet<PipelineKey>) -> Result<bool, StoreError> {
    let keep = dropping(keys);
    written_again(path, &keep).map(Rewrite::done_or_untouched)
}

/// What a file keeps dropping the records of `keys`: nothing to do where it holds none of them.
fn dropping(keys: &HashSet<PipelineKey>) -> impl Fn(&Arc<Vec<u8>>, &[Record<'_>]) -> Kept + '_ {
    move |bytes, all| {
        all.iter().any(|r| keys.contains(&r.key)).then(|| {
            let kept = (0..all.len()).filter(|&i| !keys.contains(&all[i].key));
            // Sealed again only where its seal held: the records kept are then as they were sealed.
            (kept.collect(), sealed(bytes))
        })
    }
}

/// What writing a waiting file again did.
#[derive(Debug)]
enum Rewrite {
    /// Written again (removed, `written` 0, where nothing was left) without the entries of
    /// `dropped`, from `read` bytes on disk.
    Done {
        read: u64,
        written: u64,
        dropped: HashSet<PipelineKey>,
    },
    /// Nothing to do: gone (before the read, or after it), holding nothing to drop (another pass
    /// at once dropped it first), or larger than a waiting file may be (removed here, whole).
    Untouched,
    /// It could not be written again now.
    NotNow,
}

impl Rewrite {
    /// Whether it is done with (`false`: it could not be written again now).
    fn done_or_untouched(self) -> bool {
        !matches!(self, Rewrite::NotNow)
    }
}

/// Writes the waiting file at `path` again without its damage (`pipekeep verify --fix`): the
/// records that fail their check as an opening takes them, anything past a record cut short, a
/// seal that fails; removes it where no record is sound. It is sealed: every record kept passed
/// its check in this read, its data hash too where the seal did not hold. `false` where it
/// cannot be written again now.
pub fn without_damage(
    path: &Path,
    identity: &Identity,
    pieces: &Pieces,
) -> Result<bool, StoreError> {
    written_again(path, &|bytes, all| {
        let file = check_file(bytes.clone(), identity, pieces);
        file.is_damaged().then(|| {
            let bad: HashSet<usize> = file.bad.iter().map(|b| b.at).collect();
            ((0..all.len()).filter(|i| !bad.contains(i)).collect(), true)
        })
    })
    .map(Rewrite::done_or_untouched)
}

/// The records a waiting file keeps when it is written again (their places in its order), and
/// whether it is sealed; `None` where it stays as it is.
type Kept = Option<(Vec<usize>, bool)>;

/// Chooses what a waiting file keeps, given its bytes as read and their records.
type Keep<'k> = &'k dyn Fn(&Arc<Vec<u8>>, &[Record<'_>]) -> Kept;

/// Writes the waiting file at `path` again with the entries' records `keep` chooses of it as it
/// reads now, and the pieces they name that hold their names (removes it where no entry is
/// left). Its modification time stays (the newer of before and
/// after the read: a stamp given meanwhile is kept). A file written again by another pass
/// between the read and the write is read again (a few times at most), so that neither brings
/// back what the other dropped. What it did: [`Rewrite`].
fn written_again(path: &Path, keep: Keep<'_>) -> Result<Rewrite, StoreError> {
    use std::os::unix::fs::MetadataExt;
    let seen = || {
        fs::symlink_metadata(path).map(|m| (m.ino(), m.len(), m.modified().unwrap_or(UNIX_EPOCH)))
    };
    for _ in 0..3 {
        let before = match seen() {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Rewrite::Untouched),
            Err(e) => return Err(StoreError::io("stat", path)(e)),
        };
        let (bytes, read) = match read_bounded_sized(path) {
            Ok(Some((bytes, read))) => (Arc::new(bytes), read),
            // Larger than a waiting file may be: no opening takes it.
            Ok(None) => {
                files::remove_if_present(path).map_err(StoreError::io("remove", path))?;
                return Ok(Rewrite::Untouched);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Rewrite::Untouched),
            Err(e) => return Err(StoreError::io("read", path)(e)),
        };
        let (every, _) = parse_all(&bytes);
        let (pieces, all): (Vec<Record<'_>>, Vec<Record<'_>>) =
            every.into_iter().partition(|r| r.piece);
        let Some((kept, sealed)) = keep(&bytes, &all) else {
            return Ok(Rewrite::Untouched);
        };
        let kept_at: HashSet<usize> = kept.iter().copied().collect();
        let dropped: HashSet<PipelineKey> = (0..all.len())
            .filter(|i| !kept_at.contains(i))
            .map(|i| all[i].key)
            .collect();
        let kept: Vec<&Record<'_>> = kept.iter().filter_map(|&i| all.get(i)).collect();
        let named: HashSet<PieceName> = kept.iter().flat_map(|r| pieces_named(r.entry)).collect();
        // Where the seal held it vouched for every name; else each piece is checked.
        let vouched = super::sealed(&bytes);
        let sound = |r: &&Record<'_>| named.contains(&r.name()) && (vouched || r.holds_its_name());
        let mut out = begin(sealed);
        for r in pieces.iter().filter(sound).chain(kept.iter().copied()) {
            encode_as_read(&mut out, r);
        }
        seal(&mut out);
        // A packed file stays packed however short it grows: unpacked, it would take more than
        // its records' shares of it.
        let out = pack_again(out, read < bytes.len() as u64);
        let now = match seen() {
            Ok(now) => now,
            // Removed meanwhile: its process wrote every entry of it first.
            Err(_) => return Ok(Rewrite::Untouched),
        };
        if (now.0, now.1) != (before.0, before.1) {
            continue; // written again meanwhile
        }
        let done = |written| Rewrite::Done {
            read,
            written,
            dropped,
        };
        if kept.is_empty() {
            files::remove_if_present(path).map_err(StoreError::io("remove", path))?;
            return Ok(done(0));
        }
        return match files::write_atomically(path, &out, now.2.max(before.2))? {
            files::Written::Whole(_) => Ok(done(out.len() as u64)),
            files::Written::Skipped => Ok(Rewrite::NotNow),
        };
    }
    Ok(Rewrite::NotNow)
}
