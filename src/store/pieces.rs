//! Pieces: payload bytes that entries share, one file each, named by their content.
//!
//! ```text
//! <identity dir>/pieces/<BLAKE3 of the piece, 64 hex>.piece
//! ```
//! A piece file holds its bytes as they are, or compressed where that pays ([`frame`]): a head of
//! 16 bytes (the magic `PKZPIECE`, the piece's length) and one zstd frame of its bytes, always
//! shorter than the bytes themselves, so that the length the entry gives says which a file holds
//! (as long: as they are; shorter: framed) and pieces written before compression read as ever.
//! Its name is the BLAKE3 of its bytes uncompressed: the same content is one piece however it is
//! stored. A list ([`super::recipe`]) is stored as it is (piece names do not compress, and its
//! entry gives no length to tell a frame by). It is written before any entry that names it
//! (temporary file, lock, rename, as an entry; one already present is stamped, not written
//! again, once this run has written it, read it whole or checked it: a damaged one is written
//! anew over it), checked against its name and the length the entry gives once per process, then held in
//! memory, within a bound, for every later entry that names it. A piece that is missing or fails
//! its name makes the entry a miss; a damaged one is removed. Each piece is stamped once a run,
//! with the stamp of the first entry that names it and is found or written: never older than the
//! entries using it (the bound drops it after them; at an equal stamp an entry's path sorts
//! first), and a piece no entry names any more ages out in the same order. A stamp only moves
//! forward: a process that opened earlier never sets back one a later process gave.
//! Lookups take the memory (and the lists held) only where they can at once: the writer, at
//! idle priority, takes it too, and a piece is then read from its file.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::files::{self, Written};
use super::recipe::{piece_name, PieceName};
use super::StoreError;
use crate::sync::{AtOnce, Unpoisoned};

/// The directory of an identity directory's pieces.
pub const DIR: &str = "pieces";
const SUFFIX: &str = ".piece";
/// The most a list's file may hold.
pub const LIST_FILE_MAX: u64 = 8 + 40 * super::recipe::LIST_MAX as u64;
/// The bytes of checked pieces held in memory by default (`PIPEKEEP_PIECE_MEMORY`).
pub const DEFAULT_MEMORY: u64 = 256 << 20;
/// The head of a piece file holding its bytes compressed: the magic, then the piece's length.
pub const FRAMED_MAGIC: [u8; 8] = *b"PKZPIECE";
pub const FRAMED_HEAD_LEN: usize = 16;

/// A piece's file bytes compressed ([`FRAMED_MAGIC`], its length, one zstd frame of its
/// bytes), where that pays; `None` where the file holds the bytes as they are.
pub fn frame(bytes: &[u8]) -> Option<Vec<u8>> {
    let compressed = super::compress::compress(bytes, FRAMED_HEAD_LEN)?;
    let mut file = Vec::with_capacity(FRAMED_HEAD_LEN + compressed.len());
    file.extend_from_slice(&FRAMED_MAGIC);
    file.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    file.extend_from_slice(&compressed);
    Some(file)
}

/// A piece's bytes from its file's, for a piece of `len` bytes: the file's as they are where it
/// holds that many (a frame is always shorter than its bytes), else its frame decompressed into
/// exactly `len` bytes. Nothing is checked against the name here.
pub fn unframe(file: Vec<u8>, len: u64) -> Result<Vec<u8>, &'static str> {
    if file.len() as u64 == len {
        return Ok(file);
    }
    if file.len() as u64 > len || len > files::ENTRY_FILE_LIMIT {
        return Err("length");
    }
    let head = file.get(..FRAMED_HEAD_LEN).ok_or("length")?;
    if head[..8] != FRAMED_MAGIC || head[8..] != len.to_le_bytes() {
        return Err("frame head");
    }
    // Memory for the bytes is taken only once the frame's own head states exactly `len`.
    super::compress::decompress(&file[FRAMED_HEAD_LEN..], len as usize).map_err(|_| "frame")
}

/// The bytes of a piece file whose length no entry gives (the tools, a stopped load's pieces):
/// its frame decompressed where its head reads as one and they are `name`'s, else the file's
/// own bytes where they are; `None` where neither is `name`'s.
pub fn content_of(file: Vec<u8>, name: &PieceName) -> Option<Vec<u8>> {
    let stated = file
        .get(..FRAMED_HEAD_LEN)
        .filter(|head| head[..8] == FRAMED_MAGIC)
        .map(|head| u64::from_le_bytes(head[8..].try_into().expect("8 bytes")));
    if let Some(len) = stated.filter(|len| *len > file.len() as u64) {
        if let Ok(bytes) = unframe(file.clone(), len) {
            if piece_name(&bytes) == *name {
                return Some(bytes);
            }
        }
    }
    // A piece stored as it is whose bytes happen to begin with the magic reads so.
    (piece_name(&file) == *name).then_some(file)
}

/// A piece's file name.
pub fn file_name(name: &PieceName) -> String {
    format!("{}{SUFFIX}", super::identity::hex(name))
}

/// The name a piece file's name gives, if it is one of ours.
pub fn name_of_file(file_name: &str) -> Option<PieceName> {
    crate::key::text::from_hex::<32>(file_name.strip_suffix(SUFFIX)?)
}

/// Why a piece could not be used. [`PieceError::reason`] is the entry's `reason=`.
#[derive(Debug, thiserror::Error)]
pub enum PieceError {
    #[error("piece {path} is missing")]
    Missing { path: PathBuf },
    #[error("piece {path} does not match its name: {what}")]
    Corrupt { path: PathBuf, what: &'static str },
    #[error("cannot read piece {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl PieceError {
    pub fn reason(&self) -> &'static str {
        self.for_the_entry().reason()
    }

    /// What it makes of an entry naming the piece.
    pub fn for_the_entry(&self) -> super::EntryError {
        match self {
            PieceError::Missing { .. } => super::EntryError::MissingPiece,
            PieceError::Corrupt { .. } | PieceError::Io { .. } => super::EntryError::CorruptPiece,
        }
    }
}

/// Checked pieces held in memory, the oldest let go first once over the bound.
type Memory = super::held::OldestFirst<PieceName, Arc<[u8]>>;

/// A list's pieces, checked and put in order: shared by every payload that names the list.
#[derive(Debug)]
pub struct ListedPieces {
    pub pieces: Vec<Arc<[u8]>>,
    /// Their bytes together.
    pub len: usize,
}

/// Lists resolved and held at most (each holds its pieces alive).
const LISTS_HELD: usize = 4096;

/// The pieces named by the entries this process is writing.
#[derive(Default)]
struct Writes {
    /// Named by entries being written now, with how many.
    in_flight: HashMap<PieceName, usize>,
    /// While a bound runs: every piece named by an entry written since it began.
    while_bounding: Option<std::collections::HashSet<PieceName>>,
}

/// The pieces of one identity directory, as one process uses them.
pub struct Pieces {
    dir: PathBuf,
    /// False for a tool that only looks: nothing is stamped or removed.
    keeps: bool,
    memory: Mutex<Memory>,
    memory_limit: AtomicU64,
    /// Pieces stamped or written this run: the newest stamp given, and whether the file is known
    /// whole (recorded before a write's stamp and check; known whole once written or checked).
    touched: Mutex<HashMap<PieceName, Touched>>,
    writes: Mutex<Writes>,
    /// Lists resolved this process (cleared whole past [`LISTS_HELD`]).
    lists: Mutex<HashMap<PieceName, Arc<ListedPieces>>>,
    /// Pieces this process removed as damaged and has not written since (each named here before
    /// its file goes). An entry naming one then finds it gone, and is dropped for the damage
    /// (`corrupt-piece`), not as missing one: a reader ahead and a lookup may meet the piece in
    /// either order. (Where another thread holds this past the short spin, the reason given may
    /// be `missing-piece`: the entry goes either way.)
    removed_as_damaged: Mutex<HashSet<PieceName>>,
    dir_made: AtomicBool,
    /// Pieces are read without updating their access time until the kernel refuses it (only
    /// the files' owner may ask), as entries are.
    no_atime: AtomicBool,
    /// The pieces' directory, held open once it exists: pieces are opened and stamped by name.
    dir_fd: files::HeldDir,
}

impl std::fmt::Debug for Pieces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pieces").field("dir", &self.dir).finish()
    }
}

impl Pieces {
    /// The pieces of `identity_dir`.
    pub fn new(identity_dir: &Path) -> Pieces {
        Pieces {
            dir: identity_dir.join(DIR),
            keeps: true,
            memory: Mutex::default(),
            memory_limit: AtomicU64::new(DEFAULT_MEMORY),
            touched: Mutex::default(),
            writes: Mutex::default(),
            lists: Mutex::default(),
            removed_as_damaged: Mutex::default(),
            dir_made: AtomicBool::new(false),
            no_atime: AtomicBool::new(true),
            dir_fd: files::HeldDir::default(),
        }
    }

    /// The pieces of `identity_dir` for a tool that checks them: nothing stamped or removed,
    /// nothing held in memory past a few entries' worth.
    pub fn for_looking(identity_dir: &Path) -> Pieces {
        let pieces = Pieces {
            keeps: false,
            ..Pieces::new(identity_dir)
        };
        pieces.set_memory_limit(64 << 20);
        pieces
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, name: &PieceName) -> PathBuf {
        self.dir.join(file_name(name))
    }

    /// The bytes of checked pieces to hold in memory.
    pub fn set_memory_limit(&self, bytes: u64) {
        self.memory_limit.store(bytes, Ordering::Relaxed);
    }

    /// The pieces `wanted` names (each with its length, or `None` for a list, whose length the
    /// entry does not give: at most [`LIST_FILE_MAX`]), each checked against its name once per
    /// process.
    pub fn get_all(
        &self,
        wanted: &[(PieceName, Option<u64>)],
    ) -> Result<Vec<Arc<[u8]>>, PieceError> {
        // Where the writer holds the memory, every piece is read from its file.
        let mut found: Vec<Option<Arc<[u8]>>> = match self.memory.locked_at_once() {
            Some(memory) => wanted
                .iter()
                .map(|(name, len)| {
                    memory
                        .get(name)
                        .filter(|b| len.is_none_or(|l| b.len() as u64 == l))
                        .cloned()
                })
                .collect(),
            None => vec![None; wanted.len()],
        };
        // A piece named again in the same payload is read once: its bytes are shared.
        let mut read_here: HashMap<PieceName, Arc<[u8]>> = HashMap::new();
        for (slot, (name, len)) in found.iter_mut().zip(wanted) {
            if slot.is_some() {
                continue;
            }
            let bytes = match read_here
                .get(name)
                .filter(|b| len.is_none_or(|l| b.len() as u64 == l))
            {
                Some(bytes) => bytes.clone(),
                None => {
                    let bytes = self.read(name, *len)?;
                    read_here.insert(*name, bytes.clone());
                    bytes
                }
            };
            *slot = Some(bytes);
        }
        Ok(found.into_iter().flatten().collect())
    }

    /// The pieces a list names, checked, for a part of `len` payload bytes; resolved once a
    /// process. A list that does not read as one, or names another length, is damaged.
    pub fn resolve_list(
        &self,
        name: &PieceName,
        len: u64,
    ) -> Result<Arc<ListedPieces>, PieceError> {
        let held = self
            .lists
            .locked_at_once()
            .and_then(|l| l.get(name).cloned());
        if let Some(listed) = held.filter(|l| l.len as u64 == len) {
            return Ok(listed);
        }
        let bytes = self.get_all(&[(*name, None)])?.remove(0);
        // The file matched its name, so it is whole: the entry naming it as a list of this
        // length is what is damaged, and goes; the file stays for the entries naming it rightly.
        let damaged = || PieceError::Corrupt {
            path: self.path(name),
            what: "not a list of this length",
        };
        let (refs, total) = super::recipe::parse_list(&bytes).map_err(|_| damaged())?;
        if total != len {
            return Err(damaged());
        }
        let wanted: Vec<(PieceName, Option<u64>)> =
            refs.into_iter().map(|(n, l)| (n, Some(l))).collect();
        let listed = Arc::new(ListedPieces {
            pieces: self.get_all(&wanted)?,
            len: total as usize,
        });
        if let Some(mut lists) = self.lists.locked_at_once() {
            if lists.len() >= LISTS_HELD {
                lists.clear();
            }
            lists.insert(*name, Arc::clone(&listed));
        }
        Ok(listed)
    }

    /// Reads, checks, stamps and holds one piece.
    fn read(&self, name: &PieceName, len: Option<u64>) -> Result<Arc<[u8]>, PieceError> {
        let path = self.path(name);
        let (bytes, file) = match self.read_file(&path, name, len) {
            Ok(read) => read,
            Err(PieceError::Missing { path }) if self.was_removed_as_damaged(name) => {
                self.forget(name);
                return Err(PieceError::Corrupt {
                    path,
                    what: "removed as damaged earlier in this run",
                });
            }
            Err(e) => {
                if let PieceError::Corrupt { .. } = e {
                    self.remove_damaged(name, None);
                }
                self.forget(name);
                return Err(e);
            }
        };
        let bytes = match bytes {
            Ok(bytes) => bytes,
            Err(what) => {
                self.remove_damaged(name, Some(&file));
                self.forget(name);
                return Err(PieceError::Corrupt { path, what });
            }
        };
        drop(file);
        self.hold(*name, Arc::clone(&bytes));
        Ok(bytes)
    }

    /// Opens and reads a piece file of `len` bytes: `Err` where it cannot be used at all, else
    /// the open file and its bytes or why they fail the piece's name.
    #[allow(clippy::type_complexity)]
    fn read_file(
        &self,
        path: &Path,
        name: &PieceName,
        len: Option<u64>,
    ) -> Result<(Result<Arc<[u8]>, &'static str>, std::fs::File), PieceError> {
        let corrupt = |what| PieceError::Corrupt {
            path: path.to_path_buf(),
            what,
        };
        let io = |source: io::Error| PieceError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = match files::open_for_reading(
            self.dir_fd.get(&self.dir).as_deref(),
            path,
            &self.no_atime,
        ) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(PieceError::Missing {
                    path: path.to_path_buf(),
                })
            }
            Err(e) if files::is_not_a_file(&e) => return Err(corrupt("not a regular file")),
            Err(e) => return Err(io(e)),
        };
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(corrupt("not a regular file"));
        }
        // As long as the entry says (the bytes as they are), or shorter and framed: nothing
        // longer than the piece is read, nor a piece past an entry's limit.
        let fits = match len {
            Some(len) => {
                len <= files::ENTRY_FILE_LIMIT
                    && (meta.len() == len
                        || (meta.len() > FRAMED_HEAD_LEN as u64 && meta.len() < len))
            }
            None => meta.len() <= LIST_FILE_MAX,
        };
        if !fits {
            return Ok((Err("length"), file));
        }
        let mut bytes = vec![0u8; meta.len() as usize];
        file.read_exact(&mut bytes).map_err(io)?;
        let bytes = match len {
            Some(len) => match unframe(bytes, len) {
                Ok(bytes) => bytes,
                Err(what) => return Ok((Err(what), file)),
            },
            None => bytes,
        };
        if piece_name(&bytes) != *name {
            return Ok((Err("hash"), file));
        }
        Ok((Ok(bytes.into()), file))
    }

    fn remove_damaged(&self, name: &PieceName, read: Option<&std::fs::File>) {
        if self.keeps {
            let path = self.path(name);
            // Named before the file goes: a thread that then finds it gone finds it named,
            // unless the set is held past the spin (or the piece is being written again).
            if let Some(mut removed) = self.removed_as_damaged.locked_at_once() {
                removed.insert(*name);
            }
            let removed = files::remove_if_still(&path, read);
            if matches!(removed, Ok(false)) && path.exists() {
                // A whole file took the path after the read: not removed, so not named.
                if let Some(mut named) = self.removed_as_damaged.locked_at_once() {
                    named.remove(name);
                }
                return;
            }
            tracing::debug!(path = %path.display(), "dropped a damaged piece");
        }
    }

    fn was_removed_as_damaged(&self, name: &PieceName) -> bool {
        let removed = self.removed_as_damaged.locked_at_once();
        removed.is_some_and(|removed| removed.contains(name))
    }

    fn hold(&self, name: PieceName, bytes: Arc<[u8]>) {
        let limit = self.memory_limit.load(Ordering::Relaxed);
        let len = bytes.len();
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        if let Some(mut memory) = self.memory.locked_at_once() {
            memory.hold(name, bytes, len, limit);
        }
    }

    /// Forgets a piece found missing or damaged: the next write of an entry naming it writes it.
    /// Each part only where it can be taken at once (a lookup finds a piece missing, and the
    /// writer takes them too): one left costs little, since writing a piece first stamps the
    /// file, and writes it where it is not there (a record left saying the file whole lets a
    /// write trust a damaged one a lookup could not remove: its entries cost a compile each).
    pub fn forget(&self, name: &PieceName) {
        if let Some(mut lists) = self.lists.locked_at_once() {
            lists.remove(name);
        }
        if let Some(mut touched) = self.touched.locked_at_once() {
            touched.remove(name);
        }
        if let Some(mut memory) = self.memory.locked_at_once() {
            memory.forget(name);
        }
    }

    /// Records `stamp` for a piece about to be written or stamped unless this run gave it a newer
    /// one, which it returns; and whether this run knows its file whole.
    fn touch(&self, name: &PieceName, stamp: SystemTime) -> (Option<SystemTime>, bool) {
        let mut touched = self.touched.locked();
        let newer = touch_in(&mut touched, name, stamp, false);
        (newer, touched.get(name).is_some_and(|t| t.whole))
    }

    /// Notes that this run knows the piece file of `name` whole (written, or read and checked).
    /// Only where it can at once: left out, the file is checked again at its next write.
    fn know_whole(&self, name: &PieceName) {
        if let Some(mut touched) = self.touched.locked_at_once() {
            if let Some(t) = touched.get_mut(name) {
                t.whole = true;
            }
        }
    }

    /// Stamps each of `named` (a piece, or a list: `true`) with `stamp` unless this run gave it a
    /// newer one: an entry naming them was found and stamped `stamp`. A list stamped now has its
    /// pieces stamped with it; one this run stamped newer already had. So a piece carries the
    /// newest stamp of the entries using it, never older than any of them, and an entry that
    /// names a chunked block through the lists earlier entries of the run stamped costs a
    /// few lookups, not one a chunk. A piece another process dropped since is left to that
    /// entry's next lookup (`missing-piece`).
    pub fn stamp_first(&self, named: &[(PieceName, bool)], stamp: SystemTime) {
        if !self.keeps {
            return;
        }
        let mut due: Vec<PieceName> = Vec::new();
        let mut lists = Vec::new();
        {
            let mut touched = self.touched.locked();
            for (name, is_list) in named {
                if touch_in(&mut touched, name, stamp, true).is_none() {
                    due.push(*name);
                    if *is_list {
                        lists.push(*name);
                    }
                }
            }
        }
        for list in lists {
            let held = self.memory.locked().get(&list).cloned();
            let members = match held {
                Some(bytes) => super::recipe::parse_list(&bytes)
                    .map(|(refs, _)| refs.into_iter().map(|(n, _)| n).collect())
                    .unwrap_or_default(),
                None => self.listed_by(&list),
            };
            let mut touched = self.touched.locked();
            due.extend(
                members
                    .into_iter()
                    .filter(|m| touch_in(&mut touched, m, stamp, true).is_none()),
            );
        }
        // Members first, then the lists naming them: whoever sees a list's new stamp sees its
        // pieces' too.
        for name in due.iter().rev() {
            let path = self.path(name);
            if let Err(e) = self.stamp_file(&path, stamp) {
                // Gone (another run's bound): the next write naming it writes it.
                self.forget(name);
                tracing::debug!(path = %path.display(), error = %e, "could not stamp a piece");
            }
        }
    }

    /// Marks pieces as named by an entry being written now, until [`Pieces::written`].
    pub fn writing(&self, names: &[PieceName]) {
        let mut writes = self.writes.locked();
        for name in names {
            *writes.in_flight.entry(*name).or_default() += 1;
        }
        if let Some(seen) = writes.while_bounding.as_mut() {
            seen.extend(names.iter().copied());
        }
    }

    /// The entry naming `names` is written (or given up).
    pub fn written(&self, names: &[PieceName]) {
        let mut writes = self.writes.locked();
        for name in names {
            if let Some(n) = writes.in_flight.get_mut(name) {
                *n -= 1;
                if *n == 0 {
                    writes.in_flight.remove(name);
                }
            }
        }
    }

    /// A bound begins: from now until [`Pieces::bound_ends`], every piece named by an entry
    /// this process writes is remembered. The bound's listing may miss such an entry (written
    /// after it was listed) while holding its pieces: they must stay.
    pub fn bound_begins(&self) {
        let mut writes = self.writes.locked();
        let in_flight = writes.in_flight.keys().copied().collect();
        writes.while_bounding = Some(in_flight);
    }

    pub fn bound_ends(&self) {
        self.writes.locked().while_bounding = None;
    }

    /// Whether the piece at `path` is named by an entry this process has been writing since the
    /// bound began.
    pub fn written_while_bounding(&self, path: &Path) -> bool {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(name_of_file);
        let writes = self.writes.locked();
        name.is_some_and(|n| {
            writes.in_flight.contains_key(&n)
                || writes
                    .while_bounding
                    .as_ref()
                    .is_some_and(|s| s.contains(&n))
        })
    }

    /// The pieces a list on disk names, if it can be read as one (for dropping what a stopped
    /// load named, and the tools); nothing is checked against a name here.
    pub fn listed_by(&self, list: &PieceName) -> Vec<PieceName> {
        let Ok(bytes) = files::read_at_most(&self.path(list), LIST_FILE_MAX) else {
            return Vec::new();
        };
        super::recipe::parse_list(&bytes)
            .map(|(refs, _)| refs.into_iter().map(|(n, _)| n).collect())
            .unwrap_or_default()
    }

    /// Whether a piece of this name is kept: written or stamped this run, held, or on disk.
    pub fn is_kept(&self, name: &PieceName) -> bool {
        self.touched_this_run(name)
            || self.memory.locked().get(name).is_some()
            || self.path(name).is_file()
    }

    /// Whether this run wrote or stamped a piece of this name.
    pub fn touched_this_run(&self, name: &PieceName) -> bool {
        self.touched.locked().contains_key(name)
    }

    /// Sets a piece file's modification time, never through a link, and never back: another
    /// process that opened the store later may have stamped it newer (this run's `touched`
    /// knows only its own stamps). Fails where the piece is gone.
    fn stamp_file(&self, path: &Path, stamp: SystemTime) -> io::Result<()> {
        files::stamp_forward(self.dir_fd.get(&self.dir).as_deref(), path, stamp).map(|_| ())
    }

    /// The directory was removed (with the identity directory): the one held is let go.
    pub(super) fn forget_dir(&self) {
        self.dir_fd.forget();
    }
}

/// A piece this run stamped or wrote: the newest stamp it gave, and whether this run knows its
/// file whole (written, read and checked, or named by an entry found whole).
#[derive(Debug, Clone, Copy)]
struct Touched {
    stamp: SystemTime,
    whole: bool,
}

/// Records `stamp` for a piece in `touched` unless a newer one is there, which it returns; `whole`:
/// the caller knows its file whole.
fn touch_in(
    touched: &mut HashMap<PieceName, Touched>,
    name: &PieceName,
    stamp: SystemTime,
    whole: bool,
) -> Option<SystemTime> {
    match touched.get_mut(name) {
        Some(t) => {
            t.whole |= whole;
            if t.stamp >= stamp {
                return Some(t.stamp);
            }
            t.stamp = stamp;
            None
        }
        None => {
            touched.insert(*name, Touched { stamp, whole });
            None
        }
    }
}

/// The piece files of an identity directory, by name.
pub fn listed(identity_dir: &Path) -> Vec<(PieceName, PathBuf)> {
    let dir = identity_dir.join(DIR);
    files::names_in(&dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| name_of_file(&n).map(|name| (name, dir.join(n))))
        .collect()
}

mod write;

#[cfg(test)]
#[path = "pieces_tests.rs"]
mod tests;
