//! The title's module identifiers (`<title>/module-identifiers.bin`): each identifier the
//! driver gave for a module (`VK_EXT_shader_module_identifier`), with the digest of the SPIR-V it
//! names and the driver's `shaderModuleIdentifierAlgorithmUUID` it is valid for. A later process
//! that asks for a pipeline by identifier alone (vkd3d-proton keeps identifiers in its own
//! pipeline libraries; DXVK asks by identifier before it compiles) is keyed by the SPIR-V the
//! identifier names, as Fossilize's layer keeps the same map beside its database.
//!
//! A 16-byte header (`PKMODID` and a NUL, the format version, 4 zero bytes), then records of
//! [`RECORD_LEN`] bytes appended under `flock`: the algorithm UUID (16), the identifier's length
//! (u32), the identifier zero-padded to 32 bytes, the module's digest (32), and the first 8 bytes of
//! the BLAKE3 hash of the 84 bytes before them. A record that fails its hash (a torn write) is
//! skipped; a torn tail is cut at the next append. The file holds at most [`MOST_RECORDS`]; an
//! append past that starts it anew: a lost identifier costs the application's own fallback (it
//! compiles with its SPIR-V, which is keyed and found as ever).

use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::key::Digest;

/// The file's name in a title's directory.
pub const FILE_NAME: &str = "module-identifiers.bin";
const MAGIC: [u8; 8] = *b"PKMODID\0";
const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 16;
/// `VK_MAX_SHADER_MODULE_IDENTIFIER_SIZE_EXT`.
pub const MOST_IDENTIFIER_LEN: usize = 32;
pub const RECORD_LEN: usize = 16 + 4 + MOST_IDENTIFIER_LEN + 32 + 8;
/// About 6 MB: tens of thousands of modules, more than a title keeps entries for.
pub const MOST_RECORDS: usize = 65_536;

/// One identifier and the SPIR-V digest it names, for one identifier algorithm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownIdentifier {
    pub algorithm: [u8; 16],
    pub identifier: Vec<u8>,
    pub module: Digest,
}

/// What a file's bytes hold.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    pub known: Vec<KnownIdentifier>,
    /// Whole records that failed their hash.
    pub damaged: usize,
    /// A tail shorter than a record: an append cut short (a process killed in its write), cut
    /// at the next append.
    pub torn_tail: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum IdentifierFileError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{path} is not a module-identifier file of this format (its header)")]
    Header { path: PathBuf },
    #[error("{path} is {len} bytes, more than the file ever holds")]
    TooLarge { path: PathBuf, len: u64 },
    #[error("{path} is locked by another process's append")]
    Busy { path: PathBuf },
}

fn io_error<'a>(
    op: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> IdentifierFileError + 'a {
    move |source| IdentifierFileError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// The bytes of one record.
pub fn encode(k: &KnownIdentifier) -> Option<[u8; RECORD_LEN]> {
    if k.identifier.is_empty() || k.identifier.len() > MOST_IDENTIFIER_LEN {
        return None;
    }
    let mut r = [0u8; RECORD_LEN];
    r[..16].copy_from_slice(&k.algorithm);
    r[16..20].copy_from_slice(&(k.identifier.len() as u32).to_le_bytes());
    r[20..20 + k.identifier.len()].copy_from_slice(&k.identifier);
    r[52..84].copy_from_slice(&k.module.0);
    let check = blake3::hash(&r[..84]);
    r[84..].copy_from_slice(&check.as_bytes()[..8]);
    Some(r)
}

fn decode(r: &[u8]) -> Option<KnownIdentifier> {
    if r.len() != RECORD_LEN || blake3::hash(&r[..84]).as_bytes()[..8] != r[84..] {
        return None;
    }
    let len = u32::from_le_bytes(r[16..20].try_into().ok()?) as usize;
    if len == 0 || len > MOST_IDENTIFIER_LEN || r[20 + len..52].iter().any(|b| *b != 0) {
        return None;
    }
    Some(KnownIdentifier {
        algorithm: r[..16].try_into().ok()?,
        identifier: r[20..20 + len].to_vec(),
        module: Digest(r[52..84].try_into().ok()?),
    })
}

/// What `bytes` (a whole file) hold; `None` where the header is not this format's. A file
/// shorter than the header holds nothing yet (its first append was cut short, or is under way).
pub fn parse(bytes: &[u8]) -> Option<Parsed> {
    if bytes.len() < HEADER_LEN {
        return Some(Parsed::default());
    }
    if bytes[..HEADER_LEN] != header() {
        return None;
    }
    let body = &bytes[HEADER_LEN..];
    let mut parsed = Parsed {
        torn_tail: !body.len().is_multiple_of(RECORD_LEN),
        ..Parsed::default()
    };
    for r in body.chunks_exact(RECORD_LEN) {
        match decode(r) {
            Some(k) => parsed.known.push(k),
            None => parsed.damaged += 1,
        }
    }
    Some(parsed)
}

fn most_file_len() -> u64 {
    (HEADER_LEN + MOST_RECORDS * RECORD_LEN) as u64
}

/// Reads the file at `path` under a shared `flock` (an append is never read half-written); a
/// missing file holds nothing.
pub fn read(path: &Path) -> Result<Parsed, IdentifierFileError> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Parsed::default()),
        Err(e) => return Err(io_error("open", path)(e)),
    };
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockShared)
        .map_err(|e| io_error("lock", path)(e.into()))?;
    let len = file.metadata().map_err(io_error("stat", path))?.len();
    if len > most_file_len() + RECORD_LEN as u64 {
        return Err(IdentifierFileError::TooLarge {
            path: path.to_path_buf(),
            len,
        });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.read_to_end(&mut bytes)
        .map_err(io_error("read", path))?;
    parse(&bytes).ok_or_else(|| IdentifierFileError::Header {
        path: path.to_path_buf(),
    })
}

/// How an append waits for another process's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Not at all: `Busy` (an application thread, which never waits on another process).
    Never,
    /// Until it ends (a device's end).
    Blocking,
}

/// Appends records under an exclusive `flock`: a file that is missing, of another format or full
/// starts anew; a torn tail is cut first. The title's directory is made where it is missing.
pub fn append(
    path: &Path,
    records: &[KnownIdentifier],
    wait: Wait,
) -> Result<(), IdentifierFileError> {
    let bytes: Vec<u8> = records.iter().filter_map(encode).flatten().collect();
    if bytes.is_empty() {
        return Ok(());
    }
    // The title's directory, where its store's opening has not made it yet.
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_error("create", dir))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io_error("open", path))?;
    let lock = match wait {
        Wait::Never => rustix::fs::FlockOperation::NonBlockingLockExclusive,
        Wait::Blocking => rustix::fs::FlockOperation::LockExclusive,
    };
    match rustix::fs::flock(&file, lock) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => {
            return Err(IdentifierFileError::Busy {
                path: path.to_path_buf(),
            })
        }
        Err(e) => return Err(io_error("lock", path)(e.into())),
    }
    let len = file.metadata().map_err(io_error("stat", path))?.len();
    let mut head = [0u8; HEADER_LEN];
    let ours = len >= HEADER_LEN as u64
        && file.read_exact(&mut head).is_ok()
        && head == header()
        && len < most_file_len();
    // A batch that would take the file past its most starts it anew (a reader refuses a longer one).
    let ours = ours && len + bytes.len() as u64 <= most_file_len();
    let whole = if ours {
        HEADER_LEN as u64 + (len - HEADER_LEN as u64) / RECORD_LEN as u64 * RECORD_LEN as u64
    } else {
        0
    };
    if whole != len {
        file.set_len(whole).map_err(io_error("truncate", path))?;
    }
    file.seek(io::SeekFrom::Start(whole))
        .map_err(io_error("seek", path))?;
    if whole == 0 {
        file.write_all(&header()).map_err(io_error("write", path))?;
    }
    file.write_all(&bytes).map_err(io_error("write", path))
    // The lock goes with the file.
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(n: u8) -> KnownIdentifier {
        KnownIdentifier {
            algorithm: [7; 16],
            identifier: vec![n; 20 + (n as usize % 13)],
            module: Digest([n; 32]),
        }
    }

    #[test]
    fn a_record_is_these_bytes() {
        // If this fails, the format changed: bump VERSION.
        let r = encode(&KnownIdentifier {
            algorithm: [1; 16],
            identifier: vec![0xaa, 0xbb],
            module: Digest([2; 32]),
        })
        .unwrap();
        assert_eq!(&r[..16], &[1; 16]);
        assert_eq!(&r[16..20], &[2, 0, 0, 0]);
        assert_eq!(&r[20..22], &[0xaa, 0xbb]);
        assert!(r[22..52].iter().all(|b| *b == 0));
        assert_eq!(&r[52..84], &[2; 32]);
        assert_eq!(&r[84..], &blake3::hash(&r[..84]).as_bytes()[..8]);
        assert_eq!(&header(), b"PKMODID\0\x01\0\0\0\0\0\0\0");
    }

    #[test]
    fn what_is_appended_is_read_back_and_damage_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        assert_eq!(read(&path).unwrap(), Parsed::default());
        append(&path, &[known(1)], Wait::Never).unwrap();
        append(&path, &[known(2), known(3)], Wait::Blocking).unwrap();
        assert_eq!(
            read(&path).unwrap().known,
            vec![known(1), known(2), known(3)]
        );
        // A byte of the second record changed, and a torn tail: both skipped, counted.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER_LEN + RECORD_LEN + 30] ^= 1;
        bytes.extend_from_slice(&[9; 17]);
        std::fs::write(&path, &bytes).unwrap();
        let parsed = read(&path).unwrap();
        assert_eq!(
            (parsed.known, parsed.damaged, parsed.torn_tail),
            (vec![known(1), known(3)], 1, true)
        );
        // The next append cuts the torn tail, so every record after it is whole.
        append(&path, &[known(4)], Wait::Never).unwrap();
        let parsed = read(&path).unwrap();
        assert_eq!(
            (parsed.known, parsed.damaged, parsed.torn_tail),
            (vec![known(1), known(3), known(4)], 1, false)
        );
    }

    #[test]
    fn a_file_shorter_than_its_header_holds_nothing_and_a_locked_one_is_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, &header()[..5]).unwrap();
        assert_eq!(read(&path).unwrap(), Parsed::default());
        // Another process's append under way: an application thread does not wait for it.
        let other = std::fs::File::open(&path).unwrap();
        rustix::fs::flock(&other, rustix::fs::FlockOperation::LockExclusive).unwrap();
        assert!(matches!(
            append(&path, &[known(1)], Wait::Never),
            Err(IdentifierFileError::Busy { .. })
        ));
        drop(other);
        append(&path, &[known(1)], Wait::Never).unwrap();
        assert_eq!(read(&path).unwrap().known, vec![known(1)]);
    }

    #[test]
    fn a_file_of_another_format_starts_anew_and_an_identifier_too_long_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, b"not ours at all, not ours").unwrap();
        assert!(matches!(
            read(&path),
            Err(IdentifierFileError::Header { .. })
        ));
        append(&path, &[known(5)], Wait::Never).unwrap();
        assert_eq!(read(&path).unwrap().known, vec![known(5)]);
        let mut long = known(6);
        long.identifier = vec![1; MOST_IDENTIFIER_LEN + 1];
        append(&path, &[long], Wait::Never).unwrap();
        assert_eq!(read(&path).unwrap().known.len(), 1);
    }
}
