//! File primitives of the store: a lock that is confirmed to still name its path, the atomic
//! write (temporary file, `flock(LOCK_EX|LOCK_NB)`, whole write, rename), and listing by suffix.
//! The sequence follows Mesa's `disk_cache_os.c`.

use std::cell::RefCell;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::StoreError;

/// What became of a try at an exclusive lock on a path.
pub enum Locked {
    /// Held, and the path still names the locked file.
    Held(File),
    /// Another process or thread holds it.
    Busy,
    /// The path went away, or now names another file, while we took the lock.
    Gone,
}

/// Opens `path` (creating it when asked), takes `flock(LOCK_EX|LOCK_NB)`, then checks that the
/// path still names the same inode: a sweeper or writer may have removed or renamed it between
/// our open and our lock, and a lock on an unlinked inode guards nothing.
pub fn lock_path(path: &Path, create: bool) -> io::Result<Locked> {
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Locked::Gone),
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Ok(Locked::Busy),
        Err(TryLockError::Error(e)) => return Err(e),
    }
    let ours = file.metadata()?;
    match fs::symlink_metadata(path) {
        Ok(now) if now.ino() == ours.ino() && now.dev() == ours.dev() => Ok(Locked::Held(file)),
        Ok(_) => Ok(Locked::Gone),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Locked::Gone),
        Err(e) => Err(e),
    }
}

/// The most an entry file may hold: a larger one is refused unread.
pub const ENTRY_FILE_LIMIT: u64 = 1 << 34;

/// The size of each thread's first read of an entry: most entries fit it whole.
const FIRST_READ: usize = 64 << 10;

thread_local! {
    static FIRST_READ_BUF: RefCell<Box<[u8]>> = RefCell::new(vec![0; FIRST_READ].into_boxed_slice());
}

/// Reads an entry file whole in as few system calls as a regular file allows. One read into a
/// buffer this thread keeps: a read of a regular file that comes back short has met the file's
/// end, so an entry that fits needs no second read (the envelope's check still compares the length
/// read with the length it declares). A larger entry is sized once and read in one call, never
/// through a buffer that doubles.
pub fn read_whole(file: &mut File) -> io::Result<Vec<u8>> {
    FIRST_READ_BUF.with_borrow_mut(|first| {
        let n = read_retrying(file, first)?;
        if n < first.len() {
            return Ok(first[..n].to_vec());
        }
        let len = file.metadata()?.len();
        if len > ENTRY_FILE_LIMIT {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!("{len} bytes, more than an entry may hold"),
            ));
        }
        let mut bytes = Vec::with_capacity(len as usize + 1);
        bytes.extend_from_slice(&first[..n]);
        file.read_to_end(&mut bytes)?;
        Ok(bytes)
    })
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
/// The file is stamped with `stamp` before the rename. No `fsync`: a torn file after power loss
/// fails its hash at the next lookup and costs one compile.
pub fn write_atomically(
    target: &Path,
    bytes: &[u8],
    stamp: SystemTime,
) -> Result<Written, StoreError> {
    let tmp = with_suffix(target, ".tmp");
    let mut file = match lock_path(&tmp, true).map_err(StoreError::io("lock", &tmp))? {
        Locked::Held(f) => f,
        Locked::Busy | Locked::Gone => return Ok(Written::Skipped),
    };
    file.set_len(0).map_err(StoreError::io("truncate", &tmp))?;
    file.write_all(bytes)
        .map_err(StoreError::io("write", &tmp))?;
    file.set_modified(stamp)
        .map_err(StoreError::io("stamp", &tmp))?;
    fs::rename(&tmp, target).map_err(StoreError::io("rename", target))?;
    Ok(Written::Whole(bytes.len() as u64))
}

/// `path` with `suffix` appended to its file name.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            write_atomically(&target, b"new bytes", SystemTime::UNIX_EPOCH).unwrap(),
            Written::Whole(9)
        );
        assert_eq!(fs::read(&target).unwrap(), b"new bytes");
        assert!(!with_suffix(&target, ".tmp").exists());
        assert_eq!(
            fs::metadata(&target).unwrap().modified().unwrap(),
            SystemTime::UNIX_EPOCH
        );
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
}
