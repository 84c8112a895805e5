//! Writing a piece before the entries naming it: stamped where its file stands and this run knows
//! it whole, else checked first; written (compressed where that pays) through a temporary file, the
//! lock and a rename, over a file found not whole; waited on where another writer is placing it.

use super::*;

impl Pieces {
    /// Makes sure a piece is kept, before an entry naming it, stamped `stamp`, is written: one on
    /// disk is stamped `stamp`, or the newer stamp this run gave it (the stamp is also the check
    /// that it is still there: another process bringing the store within its bound may have
    /// dropped it), and read and checked unless this run wrote it, read it whole or checked it
    /// already; a missing or damaged one is written. Returns its name and the bytes written.
    pub fn put(&self, bytes: &[u8], stamp: SystemTime) -> Result<(PieceName, u64), StoreError> {
        let name = piece_name(bytes);
        self.put_named(&name, bytes, stamp).map(|n| (name, n))
    }

    /// [`Pieces::put`] for bytes already named (`name` is their BLAKE3), written compressed
    /// where that pays ([`frame`]). Returns the bytes written.
    pub fn put_named(
        &self,
        name: &PieceName,
        bytes: &[u8],
        stamp: SystemTime,
    ) -> Result<u64, StoreError> {
        self.put_stored(name, bytes, stamp, Stored::Framed)
    }

    /// [`Pieces::put_named`] for a list: stored as it is (its entry gives no length, and piece
    /// names do not compress).
    pub fn put_list(
        &self,
        name: &PieceName,
        bytes: &[u8],
        stamp: SystemTime,
    ) -> Result<u64, StoreError> {
        self.put_stored(name, bytes, stamp, Stored::AsIs)
    }

    pub(super) fn put_stored(
        &self,
        name: &PieceName,
        bytes: &[u8],
        stamp: SystemTime,
        stored: Stored,
    ) -> Result<u64, StoreError> {
        let name = *name;
        let path = self.path(&name);
        // Kept again (or given up): gone later, it is missing, not damaged.
        self.removed_as_damaged.locked().remove(&name);
        // Stamped with the newest stamp this run gave it: another thread that recorded a newer
        // one may not have set it yet, and the entry written next must never outlive its piece.
        let (newer, whole) = self.touch(&name, stamp);
        let whole = whole || self.held(&name);
        // The file at the path is not to be trusted: only one that replaces it is.
        let mut stale = false;
        match self.stamp_file(&path, newer.unwrap_or(stamp)) {
            Ok(()) if whole => return Ok(0),
            // A file this run has neither written nor read whole is checked before entries name
            // it: a damaged piece no lookup met would be named by every entry written.
            Ok(()) if self.reads_whole(&name, bytes.len(), stored) => {
                self.know_whole(&name);
                return Ok(0);
            }
            // Damaged, gone or unreadable: written anew over it (never removed first, so that
            // the path never stands empty while another writer's entry names the piece).
            Ok(()) => stale = true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                self.forget(&name);
                return Err(StoreError::io("stamp", &path)(e));
            }
        }
        self.make_dir().inspect_err(|_| self.forget(&name))?;
        // Written with the newest stamp this run gave it: never older than an entry naming it.
        let stamp = newer.unwrap_or(stamp);
        // Compressed once, when the piece is first written: a piece on disk was stamped above.
        let framed = match stored {
            Stored::Framed => frame(bytes),
            Stored::AsIs => None,
        };
        let file = framed.as_deref().unwrap_or(bytes);
        for _ in 0..PLACE_ATTEMPTS {
            match files::write_atomically(&path, file, stamp) {
                Ok(Written::Whole(n)) => {
                    tracing::trace!(piece = %file_name(&name), ?stamp, "piece written");
                    self.know_whole(&name);
                    return Ok(n);
                }
                // Another writer (a thread of this run, or another process) is writing it now,
                // with its own stamp: once it is in place, it gets ours where ours is newer. One
                // that does not place it in time (a process stopped or slowed, or its bound
                // dropping the piece as soon as it was placed) leaves it to this writer again.
                Ok(Written::Skipped) => {
                    let placed = (0..200).any(|_| {
                        std::thread::sleep(std::time::Duration::from_micros(100));
                        self.stamp_file(&path, stamp).is_ok()
                            && (!stale || self.reads_whole(&name, bytes.len(), stored))
                    });
                    if placed {
                        return Ok(0);
                    }
                }
                Err(e) => {
                    self.forget(&name);
                    return Err(e);
                }
            }
        }
        // Never an entry naming a piece that is not there: this write fails instead (the
        // pipeline is written again when it is next compiled).
        self.forget(&name);
        Err(StoreError::io("place", &path)(std::io::Error::other(
            "another writer of this piece did not place it",
        )))
    }

    /// Whether the piece file of `name` (of `len` bytes, `stored` so) reads back whole, checked as
    /// a lookup checks it. Nothing is removed (the writer writes over it) nor held in memory (a
    /// writer needs no bytes of it, and lookups' pieces stay held).
    fn reads_whole(&self, name: &PieceName, len: usize, stored: Stored) -> bool {
        let len = match stored {
            Stored::Framed => Some(len as u64),
            Stored::AsIs => None,
        };
        matches!(self.read_file(&self.path(name), name, len), Ok((Ok(_), _)))
    }

    /// Whether this run holds the piece checked in memory (where the writer holds the memory,
    /// not known: false).
    fn held(&self, name: &PieceName) -> bool {
        let memory = self.memory.locked_at_once();
        memory.is_some_and(|m| m.get(name).is_some())
    }

    /// Makes the pieces' directory before a piece is placed: once a run, and again where it was
    /// removed since (see `Store::make_dir`).
    fn make_dir(&self) -> Result<(), StoreError> {
        let made = self.dir_made.load(Ordering::Acquire);
        if made && self.dir.is_dir() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir).map_err(StoreError::io("create", &self.dir))?;
        if made {
            self.dir_fd.forget();
        }
        self.dir_made.store(true, Ordering::Release);
        Ok(())
    }
}

/// How a piece's bytes go into its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stored {
    /// Compressed where that pays.
    Framed,
    AsIs,
}

/// How often a piece is tried before the entry naming it is given up: each try that finds another
/// writer at it waits 20 ms for that writer to place it.
const PLACE_ATTEMPTS: usize = 4;
