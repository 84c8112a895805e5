//! The order in which the bound drops a title's entries and pieces: a piece that no kept entry
//! names first, then the oldest stamp first (at an equal stamp by path: an entry before the
//! pieces beside it), and once an entry goes, the pieces that only it named, before the next
//! entry. A piece carries the newest stamp of the entries naming it, so in the stamps' order
//! alone a piece whose entries the bound had dropped stayed while the newer entries of a boot
//! went instead (issue 38: the boot's 20 entries fitting the bound, 15-17 found). What an entry
//! names is read from its file ([`super::named`]), pieces through lists included (an entry left
//! waiting, from its record in its waiting file: the piece files it names beside the file's own
//! pieces); one that cannot be read names nothing, and never makes a piece another entry names go. A piece named
//! by a kept entry is dropped only once every entry naming it has gone.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

use super::files::HeldDir;
use super::pieces::{self, LIST_FILE_MAX};
use super::recipe::{self, PieceName};
use crate::key::PipelineKey;

/// One entry, piece or file of entries left waiting as the bound sees it.
#[derive(Debug, Clone)]
pub struct StampedEntry {
    pub path: PathBuf,
    pub bytes: u64,
    pub stamp: SystemTime,
    /// Where this is one record of a file of entries left waiting (`path`): its entry's key.
    /// The bound drops such a record by writing the file again without it
    /// (`super::waiting::WaitingDrops`).
    pub waiting_record: Option<PipelineKey>,
}

impl StampedEntry {
    /// The key of an entry: its file's name says it, or its record in a waiting file (`None`
    /// for a piece or any other file).
    pub fn key(&self) -> Option<PipelineKey> {
        self.waiting_record
            .or_else(|| PipelineKey::from_file_name(self.path.file_name()?.to_str()?))
    }
}

/// A title's entries and pieces in the order the bound drops them.
pub struct Eviction {
    /// Oldest stamp first.
    files: Vec<StampedEntry>,
    /// For each entry, the pieces (by index in `files`) it names, each once; empty for a piece.
    names: Vec<Vec<usize>>,
    /// For each piece, how many entries not yet gone name it.
    namers: Vec<u32>,
    is_piece: Vec<bool>,
    /// Pieces no entry left names, not yet taken: the oldest is taken first.
    unnamed: BinaryHeap<Reverse<usize>>,
    taken: Vec<bool>,
    /// The next file in the stamps' order.
    cursor: usize,
}

impl Eviction {
    /// The order of `files` (every entry and piece of a title, as the bound lists them), each
    /// entry's names read from its file; a waiting file's entries' names by `waiting_names`
    /// (what each entry of the waiting file at a path names, by key).
    pub fn new(mut files: Vec<StampedEntry>, waiting_names: &WaitingNames) -> Eviction {
        files.sort_by(|a, b| a.stamp.cmp(&b.stamp).then_with(|| a.path.cmp(&b.path)));
        let is_piece: Vec<bool> = files.iter().map(|f| piece_of(&f.path).is_some()).collect();
        let names = Names::of(&files, waiting_names).read();
        let mut namers = vec![0u32; files.len()];
        for piece in names.iter().flatten() {
            namers[*piece] += 1;
        }
        let unnamed = (0..files.len())
            .filter(|i| is_piece[*i] && namers[*i] == 0)
            .map(Reverse)
            .collect();
        Eviction {
            taken: vec![false; files.len()],
            files,
            names,
            namers,
            is_piece,
            unnamed,
            cursor: 0,
        }
    }

    /// How many files the order holds.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn file(&self, i: usize) -> &StampedEntry {
        &self.files[i]
    }

    /// How many pieces no entry names.
    pub fn unnamed_now(&self) -> usize {
        self.unnamed.len()
    }

    /// The next file to drop (its index), taken from the order whether the caller drops it or
    /// keeps it: a piece no entry left names, oldest first, else the oldest entry. A piece
    /// named by an entry not yet gone is passed over, and comes once its last entry is gone
    /// ([`Eviction::gone`]).
    pub fn next(&mut self) -> Option<usize> {
        if let Some(i) = self.next_unnamed() {
            return Some(i);
        }
        while self.cursor < self.files.len() {
            let i = self.cursor;
            self.cursor += 1;
            if !self.taken[i] && !self.is_piece[i] {
                self.taken[i] = true;
                return Some(i);
            }
        }
        None
    }

    /// The next piece no entry left names, oldest first (its index), taken from the order.
    pub fn next_unnamed(&mut self) -> Option<usize> {
        while let Some(Reverse(i)) = self.unnamed.pop() {
            if !self.taken[i] {
                self.taken[i] = true;
                return Some(i);
            }
        }
        None
    }

    /// The file taken at `i` is gone (dropped, or found gone): the pieces no entry left names
    /// come next.
    pub fn gone(&mut self, i: usize) {
        for piece in std::mem::take(&mut self.names[i]) {
            self.namers[piece] -= 1;
            if self.namers[piece] == 0 {
                self.unnamed.push(Reverse(piece));
            }
        }
    }

    /// The files, oldest stamp first, less those `dropped` says.
    pub fn kept(self, dropped: &[bool]) -> Vec<StampedEntry> {
        self.files
            .into_iter()
            .zip(dropped)
            .filter_map(|(f, dropped)| (!dropped).then_some(f))
            .collect()
    }
}

/// The identity directory and name of a piece's path (`<identity>/pieces/<name>.piece`).
fn piece_of(path: &Path) -> Option<(&Path, PieceName)> {
    let dir = path.parent()?;
    if dir.file_name()? != pieces::DIR {
        return None;
    }
    let name = pieces::name_of_file(path.file_name()?.to_str()?)?;
    Some((dir.parent()?, name))
}

/// What each entry of the waiting file at a path names (pieces and lists, `true`), by key.
pub type WaitingNames = dyn Fn(&Path) -> HashMap<PipelineKey, Vec<(PieceName, bool)>>;

/// What the entries of a listing name, by the index of each piece in it.
struct Names<'a> {
    files: &'a [StampedEntry],
    waiting_names: &'a WaitingNames,
    /// Each piece's index, by its identity directory (numbered) and name.
    pieces: HashMap<(usize, PieceName), usize>,
    dirs: HashMap<PathBuf, usize>,
    /// Each identity directory, held open: its entries are opened by name.
    held: Vec<HeldDir>,
    /// Each list read, by its index: the pieces it names.
    lists: HashMap<usize, Vec<usize>>,
    /// Each waiting file read: what each of its entries names.
    waiting: HashMap<PathBuf, HashMap<PipelineKey, Vec<(PieceName, bool)>>>,
    no_atime: AtomicBool,
}

impl<'a> Names<'a> {
    fn of(files: &'a [StampedEntry], waiting_names: &'a WaitingNames) -> Names<'a> {
        let mut names = Names {
            files,
            waiting_names,
            pieces: HashMap::new(),
            dirs: HashMap::new(),
            held: Vec::new(),
            lists: HashMap::new(),
            waiting: HashMap::new(),
            no_atime: AtomicBool::new(true),
        };
        for (i, f) in files.iter().enumerate() {
            if let Some((dir, name)) = piece_of(&f.path) {
                let d = names.dir_number(dir);
                names.pieces.insert((d, name), i);
            }
        }
        names
    }

    fn dir_number(&mut self, dir: &Path) -> usize {
        let next = self.dirs.len();
        let d = *self.dirs.entry(dir.to_path_buf()).or_insert(next);
        if d == next {
            self.held.push(HeldDir::default());
        }
        d
    }

    /// Each file's names: an entry's pieces (through its lists too), each once; a piece's none.
    /// Only the entries of a directory holding pieces are read.
    fn read(mut self) -> Vec<Vec<usize>> {
        (0..self.files.len()).map(|i| self.of_entry(i)).collect()
    }

    fn of_entry(&mut self, i: usize) -> Vec<usize> {
        let path = &self.files[i].path;
        let Some(d) = path.parent().and_then(|dir| self.dirs.get(dir)).copied() else {
            return Vec::new(); // a piece, or an entry of a directory with no pieces
        };
        let listed = if super::files::is_waiting_file(path) {
            // A record names the store's pieces it shares with entry files (the file's own
            // pieces are no piece files: not among them); a file listed whole names none.
            let Some(key) = self.files[i].waiting_record else {
                return Vec::new();
            };
            let read = self.waiting_names;
            let file = self
                .waiting
                .entry(path.clone())
                .or_insert_with(|| read(path));
            file.get(&key).cloned().unwrap_or_default()
        } else {
            let dir = path.parent().expect("an entry's directory");
            let held = self.held[d].get(dir);
            super::named::by_entry(held.as_deref(), path, &self.no_atime)
        };
        let mut named = Vec::new();
        for (name, is_list) in listed {
            let Some(&piece) = self.pieces.get(&(d, name)) else {
                continue; // missing: the entry is a miss at its next lookup
            };
            named.push(piece);
            if is_list {
                named.extend(self.list(d, piece));
            }
        }
        named.sort_unstable();
        named.dedup();
        named
    }

    /// The pieces of directory `d` the list at `list` names (read once a pass; nothing where it
    /// does not read as a list).
    fn list(&mut self, d: usize, list: usize) -> Vec<usize> {
        if let Some(members) = self.lists.get(&list) {
            return members.clone();
        }
        let path = &self.files[list].path;
        let members: Vec<usize> = super::files::read_at_most(path, LIST_FILE_MAX)
            .ok()
            .and_then(|bytes| recipe::parse_list(&bytes).ok())
            .map(|(refs, _)| refs)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(name, _)| self.pieces.get(&(d, name)).copied())
            .collect();
        self.lists.insert(list, members.clone());
        members
    }
}
