//! Looking at a store from outside a running application (the `pipekeep` tool): the titles and
//! identity directories of a library, and an entry, or a waiting file's records, checked exactly
//! as the layer checks them, with the identity read from its directory's name, the key from its
//! file name (a record's own) and the ABI from its envelope (a waiting file's from its name;
//! either ABI is this device's: the layer of that ABI would accept it).

use std::path::{Path, PathBuf};

use super::envelope::{self, EntryError};
use super::files::{is_entry_name, names_in};
use super::identity::{DirName, Identity};
use super::pieces::Pieces;
use super::waiting;
use crate::key::PipelineKey;

/// An identity directory of a title.
#[derive(Debug, Clone)]
pub struct IdentityDir {
    pub path: PathBuf,
    pub name: DirName,
}

/// The titles of a library: directories holding `host-pipelines/`, `runs.jsonl` or a record.
pub fn titles(root: &Path) -> std::io::Result<Vec<String>> {
    let mut out: Vec<String> = names_in(root)?
        .into_iter()
        .filter(|t| {
            root.join(t).join("host-pipelines").is_dir()
                || root.join(t).join("runs.jsonl").is_file()
                || root.join(t).join(super::RECORD_FILE).is_file()
        })
        .collect();
    out.sort();
    Ok(out)
}

/// The identity directories of a title, of our naming only.
pub fn identity_dirs(title_dir: &Path) -> std::io::Result<Vec<IdentityDir>> {
    let host = title_dir.join("host-pipelines");
    let mut out: Vec<IdentityDir> = names_in(&host)?
        .into_iter()
        .filter_map(|n| {
            DirName::parse(&n).map(|name| IdentityDir {
                path: host.join(&n),
                name,
            })
        })
        .filter(|d| d.path.is_dir())
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The entry files of an identity directory.
pub fn entry_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = names_in(dir)?
        .into_iter()
        .filter(|n| is_entry_name(n))
        .map(|n| dir.join(n))
        .collect();
    out.sort();
    Ok(out)
}

/// Why an entry failed an offline check.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("{0}")]
    Entry(#[from] EntryError),
    #[error("not in an identity directory or not named as an entry")]
    NotOurs,
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    /// `len` bytes on disk; `unpacked`: what a packed file's frame states it holds unpacked.
    #[error("{len} bytes{}, more than a waiting file may hold", .unpacked.map(|u| format!(" on disk, stating {u} unpacked")).unwrap_or_default())]
    WaitingTooLarge { len: u64, unpacked: Option<u64> },
}

impl CheckError {
    /// The word a report gives, as the layer's `reason=`.
    pub fn reason(&self) -> &'static str {
        match self {
            CheckError::Entry(e) => e.reason(),
            CheckError::NotOurs => "not-ours",
            CheckError::Io(_) => "unreadable",
            CheckError::WaitingTooLarge { .. } => "too-large",
        }
    }
}

/// Checks an entry file as the layer would, with the pieces of its directory; returns its
/// payload's length.
pub fn check_entry(path: &Path) -> Result<u64, CheckError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    check_entry_with(path, &Pieces::for_looking(dir))
}

/// [`check_entry`] with pieces already checked by earlier entries of the same directory.
pub fn check_entry_with(path: &Path, pieces: &Pieces) -> Result<u64, CheckError> {
    let dir = dir_name_of(path)?;
    let key = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(PipelineKey::from_file_name)
        .ok_or(CheckError::NotOurs)?;
    let (bytes, _) =
        super::files::read_entry_file(super::files::open_entry_file(None, path, false))?;
    let bytes = bytes?;
    let identity = identity_of(&dir, envelope::abi_of(&bytes));
    let checked = super::payload::check(std::sync::Arc::new(bytes), &identity, &key, pieces)?;
    Ok(checked.payload.len() as u64)
}

/// A waiting file's records checked as the opening of the layer of its ABI (the name's last
/// number) would take them, with the pieces of its directory. A file no opening takes (no ABI
/// of ours in its name, not a file, larger than a waiting file may be) is an error.
pub fn check_waiting(path: &Path, pieces: &Pieces) -> Result<waiting::CheckedFile, CheckError> {
    let identity = waiting_identity(path).ok_or(CheckError::NotOurs)?;
    let bytes = match waiting::read_bounded(path) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            let len = std::fs::metadata(path).map_or(0, |m| m.len());
            // Said only where that is why: a file too large on disk may state anything.
            let unpacked = waiting::stated_unpacked_len(path).filter(|&u| u > waiting::MOST_BYTES);
            return Err(CheckError::WaitingTooLarge { len, unpacked });
        }
        Err(e) if super::files::is_not_a_file(&e) => return Err(EntryError::NotAFile.into()),
        Err(e) => return Err(e.into()),
    };
    let bytes = std::sync::Arc::new(bytes);
    Ok(waiting::check_file(bytes, &identity, pieces))
}

/// Writes a waiting file again without its damage, checked as [`check_waiting`] does
/// ([`waiting::without_damage`]; one larger than a waiting file may be is removed); one no
/// opening takes otherwise (no ABI of ours in its name, not a file) goes by its path. `false`
/// where it could not be written now.
pub fn fix_waiting(path: &Path, pieces: &Pieces) -> Result<bool, String> {
    let is_file = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file());
    match waiting_identity(path) {
        Some(identity) if is_file => {
            waiting::without_damage(path, &identity, pieces).map_err(|e| e.to_string())
        }
        _ => super::files::remove_if_present(path)
            .map(|_| true)
            .map_err(|e| format!("{}: {e}", path.display())),
    }
}

/// The identity a waiting file's records are checked against: its directory's, of the ABI its
/// name ends with; `None` for a name an opening of neither ABI takes.
fn waiting_identity(path: &Path) -> Option<Identity> {
    let abi = waiting::abi_in_name(path.file_name()?.to_str()?)?;
    Some(identity_of(&dir_name_of(path).ok()?, Some(abi)))
}

/// The identity directory's name of the file at `path`.
fn dir_name_of(path: &Path) -> Result<DirName, CheckError> {
    path.parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .and_then(DirName::parse)
        .ok_or(CheckError::NotOurs)
}

/// The identity of a directory's files of `abi` (either ABI is this device's: the layer of that
/// ABI would accept it; another, or none, is taken as this build's).
fn identity_of(dir: &DirName, abi: Option<u32>) -> Identity {
    Identity {
        vendor_id: dir.vendor_id,
        device_id: dir.device_id,
        driver_version: dir.driver_version,
        cache_uuid: dir.cache_uuid,
        abi: match abi {
            Some(abi @ (4 | 8)) => abi,
            _ => super::identity::HOST_ABI,
        },
    }
}

/// A piece file checked against its name (stored as it is or compressed): its bytes' length, or
/// why it fails.
pub fn check_piece(path: &Path) -> Result<u64, CheckError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(super::pieces::name_of_file)
        .ok_or(CheckError::NotOurs)?;
    let mut file = super::files::open_entry_file(None, path, false).map_err(|e| {
        if super::files::is_not_a_file(&e) {
            CheckError::Entry(EntryError::NotAFile)
        } else {
            CheckError::Io(e)
        }
    })?;
    let len = file.metadata()?.len();
    if len > super::files::ENTRY_FILE_LIMIT {
        return Err(EntryError::TooLarge { len }.into());
    }
    let mut bytes = Vec::with_capacity(len as usize);
    std::io::Read::read_to_end(&mut file, &mut bytes)?;
    match super::pieces::content_of(bytes, &name) {
        Some(bytes) => Ok(bytes.len() as u64),
        None => Err(EntryError::CorruptPiece.into()),
    }
}

/// The bytes an identity directory keeps (its entries' and pieces' files) and the bytes its
/// entries name (their payloads put together): the saving the pieces make.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Sharing {
    pub entries: u64,
    pub entry_bytes: u64,
    pub pieces: u64,
    pub piece_bytes: u64,
    pub named_bytes: u64,
}

impl Sharing {
    pub fn kept_bytes(&self) -> u64 {
        self.entry_bytes + self.piece_bytes
    }

    pub fn add(&mut self, other: &Sharing) {
        self.entries += other.entries;
        self.entry_bytes += other.entry_bytes;
        self.pieces += other.pieces;
        self.piece_bytes += other.piece_bytes;
        self.named_bytes += other.named_bytes;
    }
}

/// Counts what an identity directory keeps against what its entries name.
pub fn sharing(dir: &Path) -> Sharing {
    let mut out = Sharing::default();
    for path in entry_files(dir).unwrap_or_default() {
        let Ok((Ok(bytes), _)) =
            super::files::read_entry_file(super::files::open_entry_file(None, &path, false))
        else {
            continue;
        };
        out.entries += 1;
        out.entry_bytes += bytes.len() as u64;
        out.named_bytes += envelope::listed_parts(&bytes).map_or(0, |(len, _)| len);
    }
    for (_, path) in super::pieces::listed(dir) {
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            out.pieces += 1;
            out.piece_bytes += meta.len();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::envelope::tests::{cache_data, identity, key};

    #[test]
    fn an_entry_is_checked_offline_as_the_layer_would() {
        let root = tempfile::tempdir().unwrap();
        let dir = root
            .path()
            .join("t/host-pipelines")
            .join(identity().dir_name());
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(key().file_name());
        std::fs::write(
            &path,
            envelope::encode(&identity(), &key(), &cache_data(&identity(), &[1; 10])),
        )
        .unwrap();
        assert_eq!(check_entry(&path).unwrap(), 42);
        let shared = sharing(&dir);
        assert_eq!(
            (shared.entries, shared.named_bytes, shared.pieces),
            (1, 42, 0)
        );
        assert_eq!(titles(root.path()).unwrap(), vec!["t".to_string()]);
        assert_eq!(identity_dirs(&root.path().join("t")).unwrap().len(), 1);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.push(0);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(check_entry(&path).unwrap_err().reason(), "long");
        let stray = dir.join("notes.entry");
        std::fs::write(&stray, b"x").unwrap();
        assert_eq!(check_entry(&stray).unwrap_err().reason(), "not-ours");
        assert_eq!(PipelineKey::from_file_name(&key().file_name()), Some(key()));
    }
}
