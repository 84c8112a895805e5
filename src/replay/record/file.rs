//! The record's file: appended to under `flock`, each entry once; read back whole or from
//! where this process left it; compacted in place through a rename.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use super::compaction::within_share;
use super::{DbEntry, FILE_NAME, PENDING_FILE_NAME};
use crate::replay::foz::HEADER_LEN;
use crate::replay::objects::is_pipeline_tag;
use crate::sync::Unpoisoned;

/// A title's record file: appended to by the layer's writer thread, each object once.
#[derive(Debug)]
pub struct RecordFile {
    path: PathBuf,
    held: Mutex<Held>,
}

/// What this process knows the file holds: every `(tag, hash)` in the first `len` bytes of the
/// file `inode` (a compaction renames another file over the record: all is read again).
#[derive(Debug, Default)]
struct Held {
    known: HashSet<(u32, u64)>,
    len: u64,
    inode: (u64, u64),
}

/// What a compaction of the record did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    pub pipelines_before: usize,
    pub pipelines_kept: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

impl RecordFile {
    pub fn new(title_dir: &Path) -> RecordFile {
        RecordFile {
            path: title_dir.join(FILE_NAME),
            held: Mutex::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn pending_path(&self) -> PathBuf {
        self.path.with_file_name(PENDING_FILE_NAME)
    }

    /// Whether this process appended to the record (it is then not compacted:
    /// [`RecordFile::compact_to_share`]).
    pub fn appended_here(&self) -> bool {
        self.held.locked().len > 0
    }

    /// Whether recorded pipelines wait for their entries (see [`PENDING_FILE_NAME`]).
    pub fn is_pending(&self) -> bool {
        self.pending_path().is_file()
    }

    /// Marks the record as holding pipelines without entries, under its lock (so that
    /// [`RecordFile::clear_pending_unless_grown`] never removes a mark it did not see).
    pub fn mark_pending(&self) -> io::Result<()> {
        let _held = self.held.locked();
        let file = self.open_locked(true)?.expect("created");
        let _lock = Flock(&file);
        let marker = self.pending_path();
        if marker.is_file() {
            return Ok(());
        }
        std::fs::write(&marker, b"recorded pipelines wait for their entries\n")
    }

    /// Removes the pending mark after a rebuild went through every pipeline of the record as it
    /// read it (`read_len` bytes): unless the record grew since (a pipeline appended after that
    /// reading may be one without an entry). Whether it was removed.
    pub fn clear_pending_unless_grown(&self, read_len: u64) -> io::Result<bool> {
        let _held = self.held.locked();
        let Some(file) = self.open_locked(false)? else {
            return Ok(false);
        };
        let _lock = Flock(&file);
        if file.metadata()?.len() != read_len {
            return Ok(false);
        }
        match std::fs::remove_file(self.pending_path()) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Appends the entries the file does not hold yet, their payloads deflated on at most
    /// `threads` threads. Returns how many were written. What another process appended since
    /// this one last looked is read first (only that part).
    pub fn append(&self, entries: Vec<DbEntry>, threads: usize) -> io::Result<usize> {
        if entries.is_empty() {
            return Ok(0);
        }
        let mut held = self.held.locked();
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = self.open_locked(true)?.expect("created");
        let _lock = Flock(&file);
        catch_up(&file, &mut held)?;
        let mut seen = std::collections::HashSet::new();
        let new: Vec<_> = entries
            .into_iter()
            .filter(|(tag, hash, _)| {
                !held.known.contains(&(*tag, *hash)) && seen.insert((*tag, *hash))
            })
            .collect();
        if new.is_empty() {
            return Ok(0);
        }
        let mut bytes = crate::replay::foz::write_entries_deflated_on(&new, threads);
        if held.len > 0 {
            bytes.drain(..HEADER_LEN); // the header is there already
        }
        let mut writing = &file;
        writing.seek(SeekFrom::Start(held.len))?;
        writing.write_all(&bytes)?;
        held.len += bytes.len() as u64;
        // Known once written: a failed write leaves them to the next append.
        held.known.extend(seen);
        Ok(new.len())
    }

    /// The record opened and locked (`flock`, exclusive; released by dropping a [`Flock`] of
    /// it), the file its path names once the lock is held: one a compaction renamed away while
    /// this waited is let go and the new one opened. `None` where there is no record and
    /// `create` is false.
    fn open_locked(&self, create: bool) -> io::Result<Option<File>> {
        loop {
            let opened = OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&self.path);
            let file = match opened {
                Ok(f) => f,
                Err(e) if !create && e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            let lock = Flock::exclusive(&file)?;
            let ours = inode_of(&file.metadata()?);
            let still_named =
                std::fs::symlink_metadata(&self.path).is_ok_and(|now| inode_of(&now) == ours);
            if still_named {
                std::mem::forget(lock); // the caller's Flock releases it
                return Ok(Some(file));
            }
        }
    }

    /// Brings the record within its share of the title's bound (`share` bytes, see
    /// `store::bound::record_share`), through a temporary file and a rename, when it has grown
    /// past it: pipelines go in the entries' order of use ([`within_share`]; `used`: the stamp of
    /// a pipeline's newest entry, `None` where it has none), with their links and the objects
    /// only they name. `rewrite_damaged`: also rewrites a record within its share that holds
    /// damaged entries, without them (`pipekeep verify --fix`); not asked to, a record within its
    /// share is not read at all. A record within its share is
    /// kept whole whatever became of its entries (removed by hand, `pipekeep clear`, a driver
    /// change): only the bound drops a recorded pipeline. For an opening of a store (and the
    /// command), before this process appends (a pipeline appended by this process and not yet
    /// written as an entry has no stamp yet): once it has appended, nothing is done. Never while
    /// recorded pipelines wait for their entries ([`PENDING_FILE_NAME`]), nor after a driver
    /// change (the caller's part).
    pub fn compact_to_share(
        &self,
        share: u64,
        rewrite_damaged: bool,
        used: &dyn Fn(u64) -> Option<SystemTime>,
    ) -> io::Result<Option<Compacted>> {
        let mut held = self.held.locked();
        if held.len > 0 {
            return Ok(None);
        }
        let Some(file) = self.open_locked(false)? else {
            return Ok(None);
        };
        let _lock = Flock(&file);
        if self.is_pending() {
            return Ok(None);
        }
        // Within its share, a record is not read (damage in it is then met by the next append or
        // rebuild, not here): every entry inflated cost each opening of a warm store its CPU
        // (pygfx's 2 MB record: a warm launch's process 0.22-0.24 s against 0.16-0.19 s not
        // reading it, RADV, 1 thread).
        if !rewrite_damaged && file.metadata()?.len() <= share {
            return Ok(None);
        }
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut &file, &mut bytes)?;
        let entries = entries_in(&bytes)?;
        let damaged = entries.iter().any(|e| e.payload.is_err());
        if bytes.len() as u64 <= share && !(rewrite_damaged && damaged) {
            return Ok(None);
        }
        let pipelines_before = entries
            .iter()
            .filter(|e| is_pipeline_tag(e.tag) && e.payload.is_ok())
            .count();
        let kept = within_share(entries, share, used);
        let pipelines_kept = kept
            .iter()
            .filter(|(tag, _, _)| is_pipeline_tag(*tag))
            .count();
        if pipelines_kept == pipelines_before && !damaged {
            // Past its share with no pipeline to drop (its configurations alone): as it is.
            return Ok(None);
        }
        let out = crate::replay::foz::write_entries_deflated(&kept);
        let written = crate::store::files::write_atomically(&self.path, &out, SystemTime::now())
            .map_err(|e| io::Error::other(e.to_string()))?;
        // Renamed over (or another process is compacting it now): what this process knew of
        // the file is stale either way.
        *held = Held::default();
        Ok(match written {
            crate::store::files::Written::Whole(n) => Some(Compacted {
                pipelines_before,
                pipelines_kept,
                bytes_before: bytes.len() as u64,
                bytes_after: n,
            }),
            crate::store::files::Written::Skipped => None,
        })
    }
}

fn inode_of(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

/// A title's record as its file holds it now: its entries (a cut last one left out, a damaged
/// one named), and the file's length.
pub fn read(path: &Path) -> io::Result<(Vec<crate::replay::foz::Entry>, u64)> {
    let bytes = std::fs::read(path)?;
    Ok((entries_in(&bytes)?, bytes.len() as u64))
}

/// The entries of a record's bytes. Bytes shorter than a header hold nothing whole yet: a first
/// append on its way (the record is made, empty, under its lock before its first append, and
/// [`RecordFile::mark_pending`] makes it so too), or one a process stopped inside, which the next
/// append starts again ([`catch_up`]).
fn entries_in(bytes: &[u8]) -> io::Result<Vec<crate::replay::foz::Entry>> {
    if bytes.len() < HEADER_LEN {
        return Ok(Vec::new());
    }
    crate::replay::foz::read_entries(bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

/// Reads what the file holds past what `held` knows (all of it where the file is shorter than
/// that: replaced), and drops a cut last entry so that the next one appends after whole ones.
fn catch_up(file: &File, held: &mut Held) -> io::Result<()> {
    let meta = file.metadata()?;
    let len = meta.len();
    if inode_of(&meta) != held.inode || len < held.len {
        *held = Held {
            inode: inode_of(&meta),
            ..Held::default()
        };
    }
    if len == held.len {
        return Ok(());
    }
    let from = held.len;
    let mut reading = file;
    reading.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::new();
    io::Read::read_to_end(&mut reading, &mut tail)?;
    let bytes = if from == 0 {
        tail
    } else {
        let mut with_header = crate::replay::foz::write_entries(&[]);
        with_header.extend_from_slice(&tail);
        with_header
    };
    if bytes.len() < HEADER_LEN {
        // A header cut short: nothing whole yet.
        file.set_len(0)?;
        held.known.clear();
        held.len = 0;
        return Ok(());
    }
    // Damage inside the file costs its own entries (the reader skips to the next whole one):
    // only what follows the last whole entry (a cut append) is cut off.
    let (entries, whole) = crate::replay::foz::read_database(&bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    // A damaged entry is not known: the next append of its object writes it whole again.
    held.known.extend(
        entries
            .iter()
            .filter(|e| e.payload.is_ok())
            .map(|e| (e.tag, e.hash)),
    );
    let end = if from == 0 {
        whole as u64
    } else {
        from + (whole - HEADER_LEN) as u64
    };
    if end < len {
        file.set_len(end)?;
    }
    held.len = end;
    Ok(())
}

/// An exclusive `flock` held until dropped.
struct Flock<'a>(&'a File);

impl<'a> Flock<'a> {
    fn exclusive(file: &'a File) -> io::Result<Flock<'a>> {
        rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(Flock(file))
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(self.0, rustix::fs::FlockOperation::Unlock);
    }
}
