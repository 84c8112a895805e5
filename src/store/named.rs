//! What an entry names, read from its own file for the bound: the envelope's head and the heads
//! of its parts ([`recipe::names_in`]), never its payload. An entry is read a window at a time
//! ([`WINDOW`] bytes, relative to its directory, never through a link), and never past the
//! body its envelope declares, itself within [`files::ENTRY_FILE_LIMIT`]: most entries' heads
//! lie in their first window, and a part standing inline is passed over, not read (a packed one
//! too: its head gives its stored length). An entry that cannot be read so (gone, damaged, or of
//! the format before pieces) names nothing: the bound counts no piece as named by it, and every
//! other entry's names still count.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use super::envelope::{self, ENVELOPE_LEN, FORMAT_PARTS, FORMAT_VERSION};
use super::files;
use super::recipe::{self, PieceName};

/// The bytes read at a time: an entry's envelope and the heads of its parts, for most entries.
const WINDOW: usize = 4 << 10;

/// The pieces and lists (`true`) the entry at `path` names, each as often as it lists it;
/// nothing where it cannot be read as an entry of pieces. `dir`: its directory, held open.
pub fn by_entry(
    dir: Option<&OwnedFd>,
    path: &Path,
    no_atime: &AtomicBool,
) -> Vec<(PieceName, bool)> {
    let Ok(file) = files::open_for_reading(dir, path, no_atime) else {
        return Vec::new();
    };
    let mut window = Window::new(&file);
    match read_names(&mut |at, buf| window.read(at, buf)) {
        Ok(names) => names,
        Err(what) => {
            tracing::debug!(entry = %path.display(), what, "the bound takes this entry for naming no piece");
            Vec::new()
        }
    }
}

/// The pieces and lists (`true`) the entry standing in `bytes` names (one of a waiting file's
/// records); nothing where it does not read as an entry of pieces.
pub fn in_bytes(bytes: &[u8]) -> Vec<(PieceName, bool)> {
    let mut read = |at: u64, buf: &mut [u8]| {
        let from = usize::try_from(at).ok();
        let within = from.and_then(|f| bytes.get(f..f.checked_add(buf.len())?));
        within.map(|b| buf.copy_from_slice(b)).is_some()
    };
    read_names(&mut read).unwrap_or_default()
}

/// The names an entry lists, its bytes read through `read` (fills the buffer from an offset;
/// false where it cannot).
fn read_names(
    read: &mut dyn FnMut(u64, &mut [u8]) -> bool,
) -> Result<Vec<(PieceName, bool)>, &'static str> {
    let mut head = [0u8; ENVELOPE_LEN];
    if !read(0, &mut head) {
        return Err("shorter than an envelope");
    }
    let (format, body_len) = envelope::format_and_body_len(&head).ok_or("not an envelope")?;
    let which = match format {
        FORMAT_VERSION => recipe::Parts::Packed,
        FORMAT_PARTS => recipe::Parts::AsIs,
        // Format 1 holds its payload whole; any other is not ours to read.
        _ => return Ok(Vec::new()),
    };
    if body_len > files::ENTRY_FILE_LIMIT - ENVELOPE_LEN as u64 {
        return Err("larger than an entry may be");
    }
    recipe::names_in(body_len, which, &mut |at, buf| {
        read(ENVELOPE_LEN as u64 + at, buf)
    })
    .map_err(|_| "its parts do not read")
}

/// A file read a window at a time, at the offsets asked for.
struct Window<'a> {
    file: &'a File,
    bytes: Vec<u8>,
    /// The file offset of `bytes[0]`.
    start: u64,
}

impl<'a> Window<'a> {
    fn new(file: &'a File) -> Window<'a> {
        Window {
            file,
            bytes: Vec::new(),
            start: 0,
        }
    }

    /// Fills `buf` with the file's bytes from `at` (at most [`WINDOW`] of them); false where
    /// the file ends first or cannot be read.
    fn read(&mut self, at: u64, buf: &mut [u8]) -> bool {
        let end = at.checked_add(buf.len() as u64);
        let held = self.start + self.bytes.len() as u64;
        let outside = at < self.start || end.is_none_or(|end| end > held);
        if outside && !self.fill(at) {
            return false;
        }
        let from = (at - self.start) as usize;
        match self.bytes.get(from..from + buf.len()) {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }

    /// Reads the window from `at`: as much of [`WINDOW`] as the file holds there.
    fn fill(&mut self, at: u64) -> bool {
        self.bytes.resize(WINDOW, 0);
        self.start = at;
        let mut got = 0;
        while got < WINDOW {
            match self.file.read_at(&mut self.bytes[got..], at + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.bytes.clear();
                    return false;
                }
            }
        }
        self.bytes.truncate(got);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::envelope::tests::identity;
    use crate::store::recipe::Part;

    fn names_on_disk(bytes: &[u8]) -> Vec<(PieceName, bool)> {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("e.entry");
        std::fs::write(&path, bytes).unwrap();
        by_entry(None, &path, &AtomicBool::new(false))
    }

    #[test]
    fn an_entry_names_what_its_parts_list_past_any_inline_bytes() {
        let key = crate::key::PipelineKey {
            spirv: [1; 16],
            state: [2; 16],
        };
        // Bytes that do not compress stand as they are, past a window; the others are packed.
        let own = crate::store::recipe::tests::noise(3 * WINDOW);
        let packable = vec![7u8; 3 * WINDOW];
        let parts = [
            Part::Inline(&own),
            Part::Piece {
                name: [5; 32],
                len: 100,
            },
            Part::Inline(&packable),
            Part::List {
                name: [6; 32],
                len: 300,
            },
        ];
        let kind = envelope::PayloadKind::Cache;
        let entry = envelope::encode_parts(&identity(), &key, kind, &parts);
        assert!(entry.len() < 4 * WINDOW, "the second part packed");
        assert_eq!(
            names_on_disk(&entry),
            vec![([5; 32], false), ([6; 32], true)]
        );
        let two = envelope::encode_format_two(&identity(), &key, kind, &parts);
        assert_eq!(names_on_disk(&two), vec![([5; 32], false), ([6; 32], true)]);
        // Cut, damaged in its parts, of the format before pieces, or not an entry: nothing.
        assert_eq!(names_on_disk(&entry[..entry.len() - 1]), vec![]);
        let mut bad = entry.clone();
        bad[ENVELOPE_LEN + 8] ^= 0x40;
        assert_eq!(names_on_disk(&bad), vec![]);
        let whole = envelope::encode_format_one(&identity(), &key, kind, &own);
        assert_eq!(names_on_disk(&whole), vec![]);
        assert_eq!(names_on_disk(b"PIPEKEEP"), vec![]);
        let root = tempfile::tempdir().unwrap();
        let gone = root.path().join("gone.entry");
        assert_eq!(by_entry(None, &gone, &AtomicBool::new(false)), vec![]);
    }
}
