//! The note of blamed pieces: which pieces the entries blamed by stale loading markers named.
//!
//! A stale marker blames its entry alone (one crash during a load costs one compile): the pieces
//! that entry names are shared by other entries, and dropping them with it made every sharer a
//! miss (measured: 5 damaged entries cost 44 compiles). But the driver may have stopped on a
//! shared piece, so each piece a blamed entry names is noted here, in the identity directory; a
//! piece noted already is blamed a second time and goes, with every entry naming it a miss: a
//! crash loop on a piece still ends within two runs. A run that loaded entries and ended whole
//! removes the note ([`super::Store::forget_blamed_pieces`]): two stopped loads count together
//! only in a row.
//!
//! `blamed-pieces`: the line `pipekeep blamed pieces 1`, then one piece's name a line (64
//! lower-case hex digits), oldest first, at most [`MOST`]. Written whole through a temporary
//! file and a rename, as an entry; read only by an opening that found a stale marker naming an
//! entry. A note that does not read so is ignored with one log line (it blames nothing) and
//! written anew.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::files;
use super::recipe::PieceName;

/// The note's first line: its format.
const HEADER: &str = "pipekeep blamed pieces 1\n";
/// The most names the note keeps: the oldest go first past it. A load of NVIDIA's data cut into
/// chunks named about 470 pieces and lists (cut by records, a few); 8,192 names are a few such
/// crashes.
pub const MOST: usize = 8192;
/// The most bytes read of the note.
const LIMIT: u64 = (HEADER.len() + MOST * 65) as u64;

/// The note of one identity directory, as read at an opening.
#[derive(Debug)]
pub struct BlamedPieces {
    path: PathBuf,
    /// Oldest first.
    names: Vec<PieceName>,
    changed: bool,
}

impl BlamedPieces {
    /// Reads the note in `dir`; one missing is empty, one damaged is ignored with a log line.
    pub fn read(dir: &Path) -> BlamedPieces {
        let path = dir.join(super::BLAMED_PIECES);
        // A file longer than the largest note is damaged, never a cut one read whole.
        let (names, changed) = match files::read_within(&path, LIMIT) {
            Ok(bytes) => match bytes.and_then(|bytes| parse(&bytes)) {
                Some(names) => (names, false),
                None => {
                    tracing::warn!(path = %path.display(), "the note of blamed pieces is damaged; ignored (it blames no piece)");
                    (Vec::new(), true)
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), false),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "the note of blamed pieces cannot be read; ignored (it blames no piece)");
                (Vec::new(), true)
            }
        };
        BlamedPieces {
            path,
            names,
            changed,
        }
    }

    /// Blames `name`: `true` where it was blamed before (it is then forgotten: the caller drops
    /// the piece), `false` where it is noted now.
    pub fn blame(&mut self, name: &PieceName) -> bool {
        self.changed = true;
        if let Some(at) = self.names.iter().position(|n| n == name) {
            self.names.remove(at);
            return true;
        }
        if self.names.len() >= MOST {
            self.names.remove(0);
        }
        self.names.push(*name);
        false
    }

    /// Whether `name` is noted.
    #[cfg(test)]
    pub fn holds(&self, name: &PieceName) -> bool {
        self.names.contains(name)
    }

    /// Writes the note where it changed (removes it where it blames nothing).
    pub fn save(&self) {
        if !self.changed {
            return;
        }
        if self.names.is_empty() {
            let _ = files::remove_if_present(&self.path);
            return;
        }
        let mut text = String::with_capacity(HEADER.len() + self.names.len() * 65);
        text.push_str(HEADER);
        for name in &self.names {
            text.push_str(&super::identity::hex(name));
            text.push('\n');
        }
        if let Err(e) = files::write_atomically(&self.path, text.as_bytes(), SystemTime::now()) {
            tracing::warn!(error = %e, "the note of blamed pieces was not written");
        }
    }
}

/// The names a note's bytes hold, or `None` where they do not read as a note.
fn parse(bytes: &[u8]) -> Option<Vec<PieceName>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let body = text.strip_prefix(HEADER)?;
    let mut names = Vec::new();
    for line in body.split_terminator('\n') {
        if line.len() != 64 || names.len() >= MOST {
            return None;
        }
        names.push(crate::key::text::from_hex::<32>(line)?);
    }
    (body.is_empty() || body.ends_with('\n')).then_some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_round_trips_and_a_second_blame_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let mut note = BlamedPieces::read(dir.path());
        assert!(!note.blame(&[1; 32]));
        assert!(!note.blame(&[2; 32]));
        note.save();
        let bytes = std::fs::read(dir.path().join(super::super::BLAMED_PIECES)).unwrap();
        assert!(bytes.starts_with(HEADER.as_bytes()));
        assert_eq!(bytes.len(), HEADER.len() + 2 * 65);
        let mut again = BlamedPieces::read(dir.path());
        assert!(again.holds(&[1; 32]) && again.holds(&[2; 32]));
        assert!(again.blame(&[1; 32]), "blamed a second time");
        assert!(!again.holds(&[1; 32]));
    }

    #[test]
    fn damaged_notes_read_as_none() {
        let good = format!("{HEADER}{}\n", "ab".repeat(32));
        assert_eq!(parse(good.as_bytes()).unwrap(), vec![[0xab; 32]]);
        for bad in [
            &b""[..],
            b"pipekeep blamed pieces 2\n",
            &good.as_bytes()[..good.len() - 1],
            format!("{HEADER}{}\n", "AB".repeat(32)).as_bytes(),
            format!("{HEADER}xyz\n").as_bytes(),
            &[0xff, 0xfe, 0],
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
        assert_eq!(parse(HEADER.as_bytes()).unwrap(), Vec::<PieceName>::new());
    }

    #[test]
    fn a_note_longer_than_the_most_is_damaged_and_the_oldest_go_past_the_most() {
        let dir = tempfile::tempdir().unwrap();
        let mut note = BlamedPieces::read(dir.path());
        for n in 0..=MOST as u32 {
            let mut name = [0u8; 32];
            name[..4].copy_from_slice(&n.to_le_bytes());
            assert!(!note.blame(&name));
        }
        assert!(!note.holds(&[0; 32]), "the oldest went");
        note.save();
        let path = dir.path().join(super::super::BLAMED_PIECES);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), LIMIT);
        assert_eq!(BlamedPieces::read(dir.path()).names.len(), MOST);
        let mut longer = std::fs::read(&path).unwrap();
        longer.extend_from_slice(format!("{}\n", "cd".repeat(32)).as_bytes());
        std::fs::write(&path, longer).unwrap();
        let damaged = BlamedPieces::read(dir.path());
        assert!(damaged.names.is_empty() && damaged.changed);
    }
}
