//! File primitives of the store: a lock that is confirmed to still name its path, the atomic
//! write (temporary file, `flock(LOCK_EX|LOCK_NB)`, whole write, rename), and listing by suffix.
//! The sequence follows Mesa's `disk_cache_os.c`.

use std::cell::RefCell;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::layout::EntryError;
use super::StoreError;

/// What became of a try at an exclusive lock on a path.
/// The suffix of another driver's directory set aside at opening, its files still to drop.
pub const SET_ASIDE_SUFFIX: &str = ".dropped";

pub enum Locked {
    /// Held, and the path still names the locked file.
    Held(File),
    /// Another process or thread holds it.
    Busy,
    /// The path went away, or now names another file, while we took the lock.
    Gone,
    /// The path names a link, a FIFO, a directory or a device: never ours to lock or read.
    NotAFile,
}

/// Opens `path` (creating it when asked), takes `flock(LOCK_EX|LOCK_NB)`, then checks that the
/// path still names the same inode: a sweeper or writer may have removed or renamed it between
/// our open and our lock, and a lock on an unlinked inode guards nothing. The path is opened
/// without following a link and without blocking (a FIFO named as ours would hang the open);
/// anything that is not a regular file is [`Locked::NotAFile`].
pub fn lock_path(path: &Path, create: bool) -> io::Result<Locked> {
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .custom_flags(NO_FOLLOW_NO_BLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Locked::Gone),
        Err(e) if is_not_a_file(&e) => return Ok(Locked::NotAFile),
        Err(e) => return Err(e),
    };
    let ours = file.metadata()?;
    if !ours.is_file() {
        return Ok(Locked::NotAFile);
    }
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Ok(Locked::Busy),
        Err(TryLockError::Error(e)) => return Err(e),
    }
    match fs::symlink_metadata(path) {
        Ok(now) if now.ino() == ours.ino() && now.dev() == ours.dev() => Ok(Locked::Held(file)),
        Ok(_) => Ok(Locked::Gone),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Locked::Gone),
        Err(e) => Err(e),
    }
}

/// The flags every open of a store file carries: a link is never followed (`ELOOP`), and a FIFO
/// or device opens at once instead of waiting for a writer (`O_NONBLOCK` changes nothing for a
/// regular file).
pub const NO_FOLLOW_NO_BLOCK: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK;

/// Whether an open failed because the path names no regular file: a link (`ELOOP` under
/// `O_NOFOLLOW`), a directory, or a device we may not open.
pub fn is_not_a_file(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ELOOP | libc::EISDIR | libc::ENXIO | libc::ENODEV)
    )
}

/// The most an entry file may hold: a larger one is dropped past its first read (`too-large`).
/// One pipeline's kept data runs to a few MB (NVIDIA's largest measured: 1.8 MB); a damaged or
/// hostile file of some GiB must never be read into memory at every start.
pub const ENTRY_FILE_LIMIT: u64 = 256 << 20;

/// The size of each thread's first read of an entry: most entries fit it whole.
const FIRST_READ: usize = 64 << 10;

thread_local! {
    static FIRST_READ_BUF: RefCell<Box<[u8]>> = RefCell::new(vec![0; FIRST_READ].into_boxed_slice());
}

/// Why an entry's file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadRefused {
    /// A link, a FIFO, a directory or a device named as an entry.
    #[error("not a regular file")]
    NotAFile,
    #[error("{len} bytes, more than an entry may hold ({ENTRY_FILE_LIMIT})")]
    TooLarge { len: u64 },
    /// The envelope declares another length than the file's (`Short` or `Long` when decoded).
    #[error("{len} bytes where its envelope says {expected}")]
    WrongLength { len: u64, expected: u64 },
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// At most `limit` bytes of a small file of the store's own (a list of pieces, a note), opened as
/// an entry is: never through a link, never blocking.
pub fn read_at_most(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let (file, len) = open_with_length(path)?;
    read_up_to(file, len, limit)
}

/// The whole of a file of the store's own no longer than `limit` bytes, opened as [`read_at_most`]
/// opens it; `None` where it is longer: by its length, unread (an 80 MiB waiting file read to be
/// refused held an opening 200 ms on RADV's machine), or by what the read found (it grew since).
pub fn read_within(path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let (file, len) = open_with_length(path)?;
    if len > limit {
        return Ok(None);
    }
    let bytes = read_up_to(file, len, limit.saturating_add(1))?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// A file of the store's own, opened as an entry is (never through a link, never blocking), and
/// its length as it stands (0 where it says none).
fn open_with_length(path: &Path) -> io::Result<(File, u64)> {
    let file = open_entry_file(None, path, false)?;
    let len = file.metadata().map_or(0, |m| m.len());
    Ok((file, len))
}

/// At most `limit` bytes of `file`, `len` long as it stood. The buffer is sized from the length up
/// front: through `take` it grew by doubling, copied and faulted in at each step (a 4.9 MB
/// waiting file: 3-9 ms of a later ncnn launch's opening on RADV).
fn read_up_to(file: File, len: u64, limit: u64) -> io::Result<Vec<u8>> {
    let room = usize::try_from(len.min(limit))
        .unwrap_or(0)
        .saturating_add(1);
    let mut bytes = Vec::with_capacity(room);
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// A directory held open once it exists, so that its files are opened (and stamped) relative to
/// it: one path walk of a name instead of one of the whole path for every file. A directory
/// removed while the process goes on is let go when the store makes it again
/// ([`HeldDir::forget`]); until then its files read as missing, and their entries compile afresh.
#[derive(Debug, Default)]
pub struct HeldDir(std::sync::RwLock<Option<std::sync::Arc<std::os::fd::OwnedFd>>>);

impl HeldDir {
    /// The directory at `path`, opened at the first call that finds it (a thread that loses the
    /// race drops its own descriptor); `None` while it cannot be opened.
    pub fn get(&self, path: &Path) -> Option<std::sync::Arc<std::os::fd::OwnedFd>> {
        if let Some(fd) = self.0.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            return Some(fd.clone());
        }
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = std::sync::Arc::new(rustix::fs::open(path, flags, Mode::empty()).ok()?);
        let mut held = self.0.write().unwrap_or_else(|p| p.into_inner());
        Some(held.get_or_insert(fd).clone())
    }

    /// Lets go of the directory held: it was removed and made again (a descriptor of the removed
    /// one would stamp and read nothing).
    pub fn forget(&self) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// Sets the modification time of the file at `path` (relative to `dir`, the directory holding
/// it, where it is held open), never through a link.
fn stamp(dir: Option<&std::os::fd::OwnedFd>, path: &Path, stamp: SystemTime) -> io::Result<()> {
    use rustix::fs::{utimensat, AtFlags, CWD};
    let times = stamp_times(stamp);
    match dir {
        Some(dir) => utimensat(
            dir,
            path.file_name().unwrap_or_default(),
            &times,
            AtFlags::SYMLINK_NOFOLLOW,
        ),
        None => utimensat(CWD, path, &times, AtFlags::SYMLINK_NOFOLLOW),
    }
    .map_err(io::Error::from)
}

/// Sets the modification time as [`stamp`] does, unless the file's is at `stamp` or later: a
/// stamp only moves forward, so a process that opened the store earlier never sets back the
/// stamp a later one gave (a shared piece, an entry both found). Returns whether it was set.
/// (Two processes stamping the same file in the same microseconds may still both write; the
/// later opening's stamp is then lost for that file alone, until its next use.)
pub fn stamp_forward(
    dir: Option<&std::os::fd::OwnedFd>,
    path: &Path,
    stamp: SystemTime,
) -> io::Result<bool> {
    use rustix::fs::{statat, AtFlags, CWD};
    let st = match dir {
        Some(dir) => statat(
            dir,
            path.file_name().unwrap_or_default(),
            AtFlags::SYMLINK_NOFOLLOW,
        ),
        None => statat(CWD, path, AtFlags::SYMLINK_NOFOLLOW),
    }
    .map_err(io::Error::from)?;
    let now = u64::try_from(st.st_mtime)
        .ok()
        .map(|secs| {
            SystemTime::UNIX_EPOCH
                + std::time::Duration::new(secs, u32::try_from(st.st_mtime_nsec).unwrap_or(0))
        })
        .unwrap_or(SystemTime::UNIX_EPOCH);
    if now >= stamp && !from_the_future(now, stamp) {
        return Ok(false);
    }
    self::stamp(dir, path, stamp)?;
    Ok(true)
}

/// How far past a stamp being given a file's own may stand and still be another process's
/// (stamps are a run's opening time, less a microsecond a file).
const STAMP_SLACK: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// A file's stamp a day or more past the one being given: written while the clock was wrong (a
/// restored snapshot, a machine booted before its clock was set), it would otherwise outrank
/// every later run for ever and have the bound evict the files in use first.
fn from_the_future(theirs: SystemTime, ours: SystemTime) -> bool {
    theirs
        .duration_since(ours)
        .is_ok_and(|ahead| ahead > STAMP_SLACK)
}

/// A modification time of `stamp`, the access time left alone.
fn stamp_times(stamp: SystemTime) -> rustix::fs::Timestamps {
    use rustix::fs::{Timespec, Timestamps, UTIME_OMIT};
    let since_epoch = stamp
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        last_modification: Timespec {
            tv_sec: since_epoch.as_secs() as i64,
            tv_nsec: since_epoch.subsec_nanos().into(),
        },
    }
}

/// Opens an entry file for reading without following a link or blocking, relative to `dir`
/// where one is held, without an access-time update where `no_atime`.
pub fn open_entry_file(
    dir: Option<&std::os::fd::OwnedFd>,
    path: &Path,
    no_atime: bool,
) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let mut flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    if no_atime {
        flags |= OFlags::NOATIME;
    }
    let fd = match dir {
        Some(dir) => rustix::fs::openat(
            dir,
            path.file_name().unwrap_or_default(),
            flags,
            Mode::empty(),
        ),
        None => rustix::fs::open(path, flags, Mode::empty()),
    };
    fd.map(File::from).map_err(io::Error::from)
}

/// Opens a file of the store for reading as [`open_entry_file`] does, without an access-time
/// update (whose write would dirty the inode at every warm read) while `no_atime` holds: the
/// kernel grants `O_NOATIME` only to the file's owner (or a privileged process), and the first
/// `EPERM` clears `no_atime`, so that every later open goes without it at once.
pub fn open_for_reading(
    dir: Option<&std::os::fd::OwnedFd>,
    path: &Path,
    no_atime: &std::sync::atomic::AtomicBool,
) -> io::Result<File> {
    use std::sync::atomic::Ordering;
    if no_atime.load(Ordering::Relaxed) {
        match open_entry_file(dir, path, true) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                no_atime.store(false, Ordering::Relaxed)
            }
            other => return other,
        }
    }
    open_entry_file(dir, path, false)
}

/// Reads an entry file whole. One read into a buffer this thread keeps: a read of a regular file
/// that comes back short has met the file's end, so an entry that fits is taken without asking
/// what the file is (the envelope's check then compares the length read with the length it
/// declares, and refuses anything but an entry). The file is asked (`fstat`) only where that read
/// fails, gives nothing, or fills the buffer: a FIFO, a directory or a device is then refused as
/// not a file (opened without blocking, a FIFO gives nothing), and a larger entry's declared
/// length is checked against its size before anything past the first read is taken into memory,
/// then read in one call, never through a buffer that doubles. (An `fstat` before every read was
/// one system call in four on every lookup and every entry read ahead.)
pub fn read_whole(file: &mut File) -> Result<Vec<u8>, ReadRefused> {
    FIRST_READ_BUF.with_borrow_mut(|first| {
        let n = match read_retrying(file, first) {
            Ok(n) if n > 0 && n < first.len() => return Ok(first[..n].to_vec()),
            Ok(n) => n,
            Err(e) => {
                regular_file_len(file)?;
                return Err(e.into());
            }
        };
        let len = regular_file_len(file)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        if let Some(expected) = super::layout::declared_file_len(&first[..n]) {
            if expected != len {
                return Err(ReadRefused::WrongLength { len, expected });
            }
        }
        let mut bytes = Vec::with_capacity(len as usize + 1);
        bytes.extend_from_slice(&first[..n]);
        file.take(ENTRY_FILE_LIMIT + 1 - n as u64)
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > ENTRY_FILE_LIMIT {
            return Err(ReadRefused::TooLarge {
                len: bytes.len() as u64,
            });
        }
        Ok(bytes)
    })
}

/// The size of a regular file no larger than an entry may be, or why it is refused.
fn regular_file_len(file: &File) -> Result<u64, ReadRefused> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(ReadRefused::NotAFile);
    }
    if meta.len() > ENTRY_FILE_LIMIT {
        return Err(ReadRefused::TooLarge { len: meta.len() });
    }
    Ok(meta.len())
}

/// An entry file's bytes, or why it was refused before its envelope was decoded.
pub type EntryRead = Result<Vec<u8>, EntryError>;

/// An entry file's bytes, or why it is refused before its envelope is decoded (`Ok((Err(_), _))`:
/// not a regular file, too large, or a length other than its envelope declares), with the file
/// read (`None` where it could not be opened), for [`remove_if_still`]. `Err` is an I/O
/// failure, `NotFound` included.
pub fn read_entry_file(file: io::Result<File>) -> io::Result<(EntryRead, Option<File>)> {
    let mut file = match file {
        Ok(f) => f,
        Err(e) if is_not_a_file(&e) => return Ok((Err(EntryError::NotAFile), None)),
        Err(e) => return Err(e),
    };
    let read = read_checked(&mut file)?;
    Ok((read, Some(file)))
}

fn read_checked(file: &mut File) -> io::Result<EntryRead> {
    match read_whole(file) {
        Ok(bytes) => Ok(Ok(bytes)),
        Err(ReadRefused::NotAFile) => Ok(Err(EntryError::NotAFile)),
        Err(ReadRefused::TooLarge { len }) => Ok(Err(EntryError::TooLarge { len })),
        Err(ReadRefused::WrongLength { len, expected }) if len < expected => {
            Ok(Err(EntryError::Short { len, expected }))
        }
        Err(ReadRefused::WrongLength { len, expected }) => {
            Ok(Err(EntryError::Long { len, expected }))
        }
        Err(ReadRefused::Io(e)) => Err(e),
    }
}

fn read_retrying(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// What became of an atomic write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The entry now holds these bytes.
    Whole(u64),
    /// Another writer holds the temporary file: this write was skipped.
    Skipped,
}

/// Writes `bytes` to `target` through `<target>.tmp`: never a torn file under the target's name.
/// The file is stamped with `stamp` before the rename, or with the stamp of the file it replaces
/// where that one is newer. No `fsync`: a torn file after power loss
/// fails its hash at the next lookup and costs one compile.
pub fn write_atomically(
    target: &Path,
    bytes: &[u8],
    stamp: SystemTime,
) -> Result<Written, StoreError> {
    let tmp = with_suffix(target, ".tmp");
    let mut attempts = 0;
    let mut file = loop {
        match lock_path(&tmp, true).map_err(StoreError::io("lock", &tmp))? {
            Locked::Held(f) => break f,
            Locked::Busy => return Ok(Written::Skipped),
            // Our temporary file was removed (an opening in another process swept it between our
            // create and our lock, taking it for a stopped write) or renamed in place by another
            // writer: nobody is writing it now, so it is made again. Skipping here would leave a
            // piece that an entry is about to name unwritten.
            Locked::Gone if attempts < 3 => attempts += 1,
            Locked::Gone => return Ok(Written::Skipped),
            Locked::NotAFile => {
                // A link or FIFO in the way of our temporary file: removed (never followed).
                let _ = remove_if_present(&tmp);
                return Ok(Written::Skipped);
            }
        }
    };
    // A stamp only moves forward: the file this one replaces (the same entry written by a
    // process that opened the store later) keeps its newer stamp.
    let stamp = fs::symlink_metadata(target)
        .ok()
        .filter(|m| m.is_file())
        .and_then(|m| m.modified().ok())
        .filter(|newer| *newer > stamp && !from_the_future(*newer, stamp))
        .unwrap_or(stamp);
    let whole = (|| {
        file.set_len(0).map_err(StoreError::io("truncate", &tmp))?;
        file.write_all(bytes)
            .map_err(StoreError::io("write", &tmp))?;
        file.set_modified(stamp)
            .map_err(StoreError::io("stamp", &tmp))?;
        fs::rename(&tmp, target).map_err(StoreError::io("rename", target))
    })();
    if whole.is_err() {
        // A full disk leaves a partial file: unlinked while our lock still guards it.
        let _ = remove_if_present(&tmp);
    }
    whole.map(|()| Written::Whole(bytes.len() as u64))
}

/// `path` with `suffix` appended to its file name.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Removes `path` where it still names `read`, the file found damaged: a writer may have renamed
/// a new, whole entry over it since it was read (a lookup and a reader of the same entry), and
/// that one is kept. Without `read` (the path could not be opened as a file: a FIFO, a link) it
/// is removed unless it is a regular file now: a whole entry another thread wrote since.
///
/// The file is first moved aside (one atomic rename), then looked at: a look and then a removal
/// by name would remove a whole entry renamed over the path between the two (a reader at idle
/// priority can be held off the CPU for milliseconds between any two system calls). One that is
/// not `read` is put back, unless a newer one took the path meanwhile. A file moved aside by a
/// process that stopped at once is a `*.tmp` nobody holds: the next opening drops it.
pub fn remove_if_still(path: &Path, read: Option<&File>) -> io::Result<bool> {
    let ours = read.map(File::metadata).transpose()?;
    remove_if_still_the(path, ours.as_ref().map(FileId::of))
}

/// A file as the file system knows it, whatever its name: its device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    pub fn of(meta: &fs::Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

/// [`remove_if_still`] of the file `read` names (none: not a regular file).
pub fn remove_if_still_the(path: &Path, read: Option<FileId>) -> io::Result<bool> {
    static MOVED_ASIDE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = MOVED_ASIDE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let aside = with_suffix(path, &format!(".{}-{n}.dropping.tmp", std::process::id()));
    match fs::rename(path, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    }
    let moved = fs::symlink_metadata(&aside)?;
    let still = match read {
        Some(read) => FileId::of(&moved) == read,
        None => !moved.file_type().is_file(),
    };
    if still {
        return remove_if_present(&aside);
    }
    put_back(&aside, path)?;
    Ok(false)
}

/// Renames `aside` back to `path` unless a file stands there now (then that newer one stays and
/// `aside` goes).
fn put_back(aside: &Path, path: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, aside, CWD, path, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::EXIST) => remove_if_present(aside).map(|_| ()),
        // A file system without RENAME_NOREPLACE: both files are whole, the one moved aside wins.
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => fs::rename(aside, path),
        Err(e) => Err(e.into()),
    }
}

/// Removes a file; a file already gone is not an error.
pub fn remove_if_present(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The names in `dir` (files and directories alike); an absent directory lists nothing.
pub fn names_in(dir: &Path) -> io::Result<Vec<String>> {
    let iter = match fs::read_dir(dir) {
        Ok(it) => it,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in iter {
        if let Ok(name) = entry?.file_name().into_string() {
            names.push(name);
        }
    }
    Ok(names)
}

/// A valid entry file name: `<32 hex>-<32 hex>.entry` (the key's own parser decides).
pub fn is_entry_name(name: &str) -> bool {
    crate::key::PipelineKey::from_file_name(name).is_some()
}

/// How the name of a file of entries left waiting ends (`super::waiting`).
pub const WAITING_SUFFIX: &str = ".waiting";

/// Whether `path` names a file of entries left waiting.
pub fn is_waiting_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(WAITING_SUFFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_within_a_limit_whole_or_not_at_all() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("note");
        fs::write(&path, [7u8; 10]).unwrap();
        assert_eq!(read_within(&path, 10).unwrap(), Some(vec![7u8; 10]));
        assert_eq!(read_within(&path, 9).unwrap(), None, "one byte over");
        // Sparse, far past the limit: refused by its length (not seen here but in the time it
        // takes: its bytes are never read).
        let huge = tmp.path().join("huge");
        fs::File::create(&huge).unwrap().set_len(1 << 30).unwrap();
        assert_eq!(read_within(&huge, 10).unwrap(), None);
        // A length that says nothing (a device that never ends): refused by what the read found.
        assert_eq!(read_within(Path::new("/dev/zero"), 10).unwrap(), None);
        let missing = read_within(&tmp.path().join("missing"), 10).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn entry_names_are_exactly_two_hex_keys() {
        let good = format!("{}-{}.entry", "a".repeat(32), "0".repeat(32));
        assert!(is_entry_name(&good));
        assert!(!is_entry_name(&good.replace(".entry", ".entr")));
        assert!(!is_entry_name(&format!(
            "{}-{}.entry",
            "A".repeat(32),
            "0".repeat(32)
        )));
        assert!(!is_entry_name(&format!(
            "{}_{}.entry",
            "a".repeat(32),
            "0".repeat(32)
        )));
        assert!(!is_entry_name("x.entry"));
    }

    #[test]
    fn read_whole_reads_small_and_large_files_exactly() {
        let dir = tempfile::tempdir().unwrap();
        for len in [0, 1, FIRST_READ - 1, FIRST_READ, FIRST_READ + 1, 3 << 20] {
            let path = dir.path().join(format!("f{len}"));
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
            fs::write(&path, &bytes).unwrap();
            let read = read_whole(&mut File::open(&path).unwrap()).unwrap();
            assert_eq!(read.len(), len);
            assert!(read == bytes, "{len} bytes read back differently");
        }
    }

    #[test]
    fn a_held_temporary_file_makes_a_second_writer_skip() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("e.entry");
        let Locked::Held(_held) = lock_path(&with_suffix(&target, ".tmp"), true).unwrap() else {
            panic!("first lock not taken")
        };
        let out = write_atomically(&target, b"abc", SystemTime::now()).unwrap();
        assert_eq!(out, Written::Skipped);
        assert!(!target.exists());
    }

    #[test]
    fn a_write_replaces_the_entry_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("e.entry");
        fs::write(&target, b"old").unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(3600);
        assert_eq!(
            write_atomically(&target, b"new bytes", later).unwrap(),
            Written::Whole(9)
        );
        assert_eq!(fs::read(&target).unwrap(), b"new bytes");
        assert!(!with_suffix(&target, ".tmp").exists());
        let stamp = || fs::metadata(&target).unwrap().modified().unwrap();
        assert_eq!(stamp(), later);
        // An older stamp never sets back the one of the file replaced...
        let earlier = later - std::time::Duration::from_secs(7200);
        write_atomically(&target, b"newer bytes", earlier).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"newer bytes");
        assert_eq!(stamp(), later);
        // ... unless that one stands a day or more ahead: written under a wrong clock.
        write_atomically(&target, b"newest bytes", SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(stamp(), SystemTime::UNIX_EPOCH);
    }

    #[test]
    fn a_lock_on_a_path_that_was_renamed_away_is_reported_gone() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        fs::write(&a, b"").unwrap();
        let file = File::open(&a).unwrap();
        fs::rename(&a, dir.path().join("b")).unwrap();
        fs::write(&a, b"").unwrap();
        drop(file);
        // A fresh open sees the new file and confirms it.
        assert!(matches!(lock_path(&a, false).unwrap(), Locked::Held(_)));
        assert!(matches!(
            lock_path(&dir.path().join("none"), false).unwrap(),
            Locked::Gone
        ));
    }

    #[test]
    fn a_damaged_entry_is_removed_only_while_its_path_still_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let entry = dir.path().join("e.entry");
        fs::write(&entry, b"damaged").unwrap();
        let (_, damaged) = read_entry_file(File::open(&entry)).unwrap();
        // A lookup compiled the pipeline and its entry was written whole meanwhile.
        write_atomically(&entry, b"whole", SystemTime::now()).unwrap();
        assert!(!remove_if_still(&entry, damaged.as_ref()).unwrap());
        assert_eq!(fs::read(&entry).unwrap(), b"whole");
        assert_eq!(
            names_in(dir.path()).unwrap(),
            ["e.entry"],
            "nothing left aside"
        );
        let (_, now) = read_entry_file(File::open(&entry)).unwrap();
        assert!(remove_if_still(&entry, now.as_ref()).unwrap());
        assert!(!entry.exists());
        assert!(names_in(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn what_was_not_a_file_is_removed_unless_a_whole_entry_took_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let entry = dir.path().join("e.entry");
        std::os::unix::fs::symlink("/dev/zero", &entry).unwrap();
        // Another thread dropped the link, compiled the pipeline and wrote its entry whole.
        fs::remove_file(&entry).unwrap();
        write_atomically(&entry, b"whole", SystemTime::now()).unwrap();
        assert!(!remove_if_still(&entry, None).unwrap());
        assert_eq!(fs::read(&entry).unwrap(), b"whole");
        assert_eq!(
            names_in(dir.path()).unwrap(),
            ["e.entry"],
            "nothing left aside"
        );
        fs::remove_file(&entry).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &entry).unwrap();
        assert!(
            remove_if_still(&entry, None).unwrap(),
            "still a link: removed"
        );
        assert!(names_in(dir.path()).unwrap().is_empty());
        assert!(!remove_if_still(&entry, None).unwrap(), "gone already");
    }

    #[test]
    fn a_file_moved_aside_goes_back_unless_a_newer_one_took_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let (entry, aside) = (dir.path().join("e.entry"), dir.path().join("e.aside.tmp"));
        fs::write(&aside, b"whole").unwrap();
        put_back(&aside, &entry).unwrap();
        assert_eq!(fs::read(&entry).unwrap(), b"whole");
        fs::write(&aside, b"older").unwrap();
        put_back(&aside, &entry).unwrap();
        assert_eq!(fs::read(&entry).unwrap(), b"whole");
        assert!(!aside.exists());
    }

    #[test]
    fn a_stamp_from_the_future_is_given_up() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        assert!(!from_the_future(t, t));
        assert!(!from_the_future(t + std::time::Duration::from_secs(60), t));
        assert!(from_the_future(t + STAMP_SLACK * 2, t));
        assert!(!from_the_future(t, t + STAMP_SLACK * 2));
    }
}
