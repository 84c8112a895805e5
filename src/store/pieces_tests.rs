//! Tests of `pieces.rs`.

use super::write::Stored;
use super::*;

fn pieces() -> (tempfile::TempDir, Pieces) {
    let root = tempfile::tempdir().unwrap();
    let pieces = Pieces::new(root.path());
    (root, pieces)
}

/// A piece of 5000 bytes kept, its bytes, and the same with one bit flipped.
fn a_piece_and_its_bytes_damaged(pieces: &Pieces) -> (PieceName, Vec<u8>, Vec<u8>) {
    let bytes = crate::store::recipe::tests::noise(5000);
    let (name, _) = pieces.put(&bytes, SystemTime::now()).unwrap();
    let mut damaged = bytes.clone();
    damaged[0] ^= 0x40;
    (name, bytes, damaged)
}

#[test]
fn a_piece_is_written_once_and_read_back_checked() {
    let (_root, pieces) = pieces();
    // Bytes that do not compress: stored as they are.
    let bytes = crate::store::recipe::tests::noise(5000);
    let (name, written) = pieces.put(&bytes, SystemTime::now()).unwrap();
    assert_eq!(written, 5000);
    assert_eq!(std::fs::read(pieces.path(&name)).unwrap(), bytes);
    assert_eq!(
        pieces.put(&bytes, SystemTime::now()).unwrap(),
        (name, 0),
        "on disk: stamped"
    );
    std::fs::remove_file(pieces.path(&name)).unwrap();
    assert_eq!(
        pieces.put(&bytes, SystemTime::now()).unwrap(),
        (name, 5000),
        "gone: written again"
    );
    assert_eq!(name_of_file(&file_name(&name)), Some(name));
    let again = Pieces::new(pieces.dir().parent().unwrap());
    assert_eq!(
        again.put(&bytes, SystemTime::now()).unwrap(),
        (name, 0),
        "on disk: stamped"
    );
    let got = again.get_all(&[(name, Some(5000))]).unwrap();
    assert_eq!(&got[0][..], &bytes[..]);
}

/// Two threads meeting one damaged piece (a reader ahead and a lookup) both call it damaged:
/// the one that removes it names it first, so the other, finding the file gone, finds it
/// named. (Removed first, a thread opening it between the two called it missing.)
#[test]
fn a_damaged_piece_met_by_two_threads_at_once_is_damaged_to_both() {
    let (_root, pieces) = pieces();
    let (name, _, damaged) = a_piece_and_its_bytes_damaged(&pieces);
    let path = pieces.path(&name);
    let pieces = Arc::new(pieces);
    for round in 0..2000 {
        pieces.removed_as_damaged.locked().clear();
        std::fs::write(&path, &damaged).unwrap();
        let start = Arc::new(std::sync::Barrier::new(2));
        let other = {
            let (pieces, start) = (Arc::clone(&pieces), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                pieces.read(&name, Some(5000)).map(|_| ()).unwrap_err()
            })
        };
        start.wait();
        let here = pieces.read(&name, Some(5000)).map(|_| ()).unwrap_err();
        let there = other.join().unwrap();
        for e in [here, there] {
            assert_eq!(e.reason(), "corrupt-piece", "round {round}: {e}");
        }
    }
}

/// A lookup never waits on the pieces' memory, which the idle-priority writer takes (SPEC):
/// where another thread holds it, the pieces are read from their files, checked as ever.
/// A list read whole (its bytes match its name) but named at another length: the entry naming it
/// so fails, the file stays for the entries naming it rightly, and it is not taken for one removed
/// as damaged (once gone, it is missing). Before, the file was moved aside and back, and named.
#[test]
fn a_list_named_at_another_length_fails_that_entry_only_and_stays() {
    let (_root, pieces) = pieces();
    let now = SystemTime::now();
    let (a, _) = pieces
        .put(&crate::store::recipe::tests::noise(5000), now)
        .unwrap();
    let (b, _) = pieces
        .put(&crate::store::recipe::tests::noise(6000), now)
        .unwrap();
    let list = crate::store::recipe::encode_list(&[(a, 5000), (b, 6000)]);
    let (name, _) = pieces.put(&list, now).unwrap();
    let e = pieces.resolve_list(&name, 9999).unwrap_err();
    assert_eq!(e.reason(), "corrupt-piece", "{e}");
    assert!(pieces.path(&name).exists(), "the list's file stays");
    assert_eq!(pieces.resolve_list(&name, 11000).unwrap().len, 11000);
    pieces.forget(&name);
    std::fs::remove_file(pieces.path(&name)).unwrap();
    let e = pieces.resolve_list(&name, 11000).unwrap_err();
    assert_eq!(e.reason(), "missing-piece", "{e}");
}

/// A damaged piece whose path a whole file took after the read is not removed, and so not named
/// as removed: once gone, it is missing.
#[test]
fn a_damaged_piece_replaced_whole_after_the_read_stays_and_is_not_named() {
    let (_root, pieces) = pieces();
    let (name, bytes, damaged) = a_piece_and_its_bytes_damaged(&pieces);
    let path = pieces.path(&name);
    std::fs::write(&path, &damaged).unwrap();
    let read = std::fs::File::open(&path).unwrap();
    let whole = path.with_extension("whole");
    std::fs::write(&whole, &bytes).unwrap();
    std::fs::rename(&whole, &path).unwrap();
    pieces.remove_damaged(&name, Some(&read));
    let wanted = [(name, Some(5000))];
    assert_eq!(&pieces.get_all(&wanted).unwrap()[0][..], &bytes[..]);
    pieces.forget(&name);
    std::fs::remove_file(&path).unwrap();
    let e = pieces.get_all(&wanted).unwrap_err();
    assert_eq!(e.reason(), "missing-piece", "{e}");
}

/// A piece file damaged on disk that no entry has read this run is checked before an entry
/// written now names it: removed and written anew, where stamping it would have had every entry
/// written name the damaged file (each then a compile at a later launch). Once written or checked
/// it is only stamped. As it is, framed, and a list alike.
#[test]
fn a_damaged_piece_on_disk_is_written_anew_before_an_entry_names_it() {
    let (root, pieces) = pieces();
    let raw = crate::store::recipe::tests::noise(5000);
    let framed = packable();
    let (a, _) = pieces.put(&raw, SystemTime::now()).unwrap();
    let (b, _) = pieces.put(&framed, SystemTime::now()).unwrap();
    let list = crate::store::recipe::encode_list(&[(a, 5000), (b, framed.len() as u64)]);
    let list_name = crate::store::recipe::piece_name(&list);
    pieces
        .put_list(&list_name, &list, SystemTime::now())
        .unwrap();
    let put: [(&[u8], PieceName, Stored); 3] = [
        (&raw, a, Stored::Framed),
        (&framed, b, Stored::Framed),
        (&list, list_name, Stored::AsIs),
    ];
    for (bytes, name, stored) in put {
        let path = pieces.path(&name);
        let mut damaged = std::fs::read(&path).unwrap();
        let at = damaged.len() - 1;
        damaged[at] ^= 0x40;
        std::fs::write(&path, &damaged).unwrap();
        let later = Pieces::new(root.path());
        let written = later
            .put_stored(&name, bytes, SystemTime::now(), stored)
            .unwrap();
        assert!(written > 0, "written anew");
        assert!(
            later.touched.locked()[&name].whole,
            "known whole once written"
        );
        assert!(
            !later.was_removed_as_damaged(&name),
            "written: not named as removed"
        );
        let len = (stored == Stored::Framed).then_some(bytes.len() as u64);
        let again = Pieces::new(root.path());
        assert_eq!(&again.get_all(&[(name, len)]).unwrap()[0][..], bytes);
        // Damaged again behind the run's back: what it knows whole it only stamps, unread.
        std::fs::write(&path, &damaged).unwrap();
        let stamped = later.put_stored(&name, bytes, SystemTime::now(), stored);
        assert_eq!(stamped.unwrap(), 0, "written this run: stamped");
        let read_whole = again.put_stored(&name, bytes, SystemTime::now(), stored);
        assert_eq!(read_whole.unwrap(), 0, "read whole this run: stamped");
    }
}

/// Two threads writing one damaged piece at once: neither returns before the file is whole
/// (each checks it until one has written or checked it), and it ends whole.
#[test]
fn two_threads_writing_one_damaged_piece_return_only_once_it_is_whole() {
    let (root, pieces) = pieces();
    let (name, bytes, damaged) = a_piece_and_its_bytes_damaged(&pieces);
    let path = pieces.path(&name);
    for round in 0..300 {
        std::fs::write(&path, &damaged).unwrap();
        let run = Arc::new(Pieces::new(root.path()));
        let start = Arc::new(std::sync::Barrier::new(2));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (run, start, bytes, path) = (
                    Arc::clone(&run),
                    Arc::clone(&start),
                    bytes.clone(),
                    path.clone(),
                );
                std::thread::spawn(move || {
                    start.wait();
                    run.put(&bytes, SystemTime::now()).unwrap();
                    // Stored as it is (noise): the file holds the bytes themselves.
                    std::fs::read(&path).ok() == Some(bytes)
                })
            })
            .collect();
        for w in writers {
            assert!(
                w.join().unwrap(),
                "round {round}: returned before the file was whole"
            );
        }
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "round {round}");
    }
}

#[test]
fn pieces_are_read_from_their_files_while_another_thread_holds_the_memory() {
    let (_root, pieces) = pieces();
    let bytes = crate::store::recipe::tests::noise(5000);
    let (name, _) = pieces.put(&bytes, SystemTime::now()).unwrap();
    let wanted = [(name, Some(5000))];
    pieces.get_all(&wanted).unwrap();
    let pieces = Arc::new(pieces);
    let held = pieces.memory.locked();
    assert!(held.get(&name).is_some(), "held after its first read");
    let looking = Arc::clone(&pieces);
    let got = crate::sync::done_elsewhere("read without the memory's lock", move || {
        looking.get_all(&wanted).unwrap()
    });
    assert_eq!(&got[0][..], &bytes[..]);
    drop(held);
}

/// One zstd frame (libzstd 1.5.7, level 1) of [`packable`].
const FRAME: [u8; 58] = crate::store::envelope::tests::PACKED_FRAME;

/// The bytes of the golden frame: a pipeline-cache header, then "pipeline" 32 times.
fn packable() -> Vec<u8> {
    let id = crate::store::envelope::tests::identity();
    crate::store::envelope::tests::cache_data(&id, &b"pipeline".repeat(32))
}

// If this golden test fails, the bytes on disk changed: old pieces would be misread. The
// frame's own bytes are the compressor's: pinned where they are read, not where written.
#[test]
fn golden_framed_piece_bytes_if_these_fail_bump_the_format() {
    let (_root, pieces) = pieces();
    let bytes = packable();
    let (name, written) = pieces.put(&bytes, SystemTime::now()).unwrap();
    assert_eq!(
        crate::store::identity::hex(&name),
        "5cbbba2231a82fdae78a5c50e68b016d2998269e9f65e7dd8ee694633631e8c1",
        "the name is the BLAKE3 of the bytes uncompressed"
    );
    let file = std::fs::read(pieces.path(&name)).unwrap();
    assert_eq!(written, file.len() as u64);
    assert!(file.len() < 100, "{} bytes", file.len());
    assert_eq!(&file[..8], b"PKZPIECE");
    assert_eq!(&file[8..16], &[32, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(unframe(file.clone(), 288).unwrap(), bytes);
    // A file of these bytes, written by hand, reads as the piece.
    let literal = [&b"PKZPIECE"[..], &288u64.to_le_bytes(), &FRAME].concat();
    std::fs::write(pieces.path(&name), &literal).unwrap();
    let fresh = Pieces::new(pieces.dir().parent().unwrap());
    assert_eq!(
        &fresh.get_all(&[(name, Some(288))]).unwrap()[0][..],
        &bytes[..]
    );
    assert_eq!(content_of(literal.clone(), &name), Some(bytes.clone()));
    // And so does one of the bytes as they are (written before compression).
    std::fs::write(pieces.path(&name), &bytes).unwrap();
    let fresh = Pieces::new(pieces.dir().parent().unwrap());
    assert_eq!(
        &fresh.get_all(&[(name, Some(288))]).unwrap()[0][..],
        &bytes[..]
    );
}

#[test]
fn a_framed_piece_that_does_not_read_back_whole_is_corrupt() {
    let (_root, pieces) = pieces();
    let bytes = packable();
    let (name, _) = pieces.put(&bytes, SystemTime::now()).unwrap();
    let good = std::fs::read(pieces.path(&name)).unwrap();
    let mut damaged: Vec<Vec<u8>> = Vec::new();
    for i in 0..good.len() {
        let mut d = good.clone();
        d[i] ^= 0x01;
        damaged.push(d);
    }
    damaged.push(good[..good.len() - 1].to_vec());
    damaged.push([&good[..], &[0]].concat());
    for (i, file) in damaged.into_iter().enumerate() {
        std::fs::write(pieces.path(&name), &file).unwrap();
        let fresh = Pieces::new(pieces.dir().parent().unwrap());
        match fresh.get_all(&[(name, Some(288))]) {
            Err(e) => {
                assert_eq!(e.reason(), "corrupt-piece", "damage {i}");
                assert!(!pieces.path(&name).exists(), "damage {i}: removed");
            }
            // A bit of the frame that zstd does not read: the very bytes, by their name.
            Ok(got) => assert_eq!(&got[0][..], &bytes[..], "damage {i}"),
        }
        assert!(
            content_of(file, &name).is_none_or(|b| b == bytes),
            "damage {i}"
        );
    }
    // A frame of a piece is read only for a piece longer than its file.
    assert!(unframe(good.clone(), good.len() as u64 - 1).is_err());
    assert!(unframe(good.clone(), 289).is_err(), "another length");
    assert!(unframe(good, files::ENTRY_FILE_LIMIT + 1).is_err());
    // A piece stored as it is whose bytes begin as a frame's head reads as it is.
    let mut odd = b"PKZPIECE".to_vec();
    odd.extend_from_slice(&1000u64.to_le_bytes());
    odd.extend_from_slice(&crate::store::recipe::tests::noise(200));
    let (odd_name, _) = pieces.put(&odd, SystemTime::now()).unwrap();
    assert_eq!(std::fs::read(pieces.path(&odd_name)).unwrap(), odd);
    assert_eq!(
        &pieces.get_all(&[(odd_name, Some(216))]).unwrap()[0][..],
        &odd[..]
    );
    assert_eq!(content_of(odd.clone(), &odd_name), Some(odd));
}

#[test]
fn a_piece_that_fails_its_name_is_dropped_and_written_again() {
    let (_root, pieces) = pieces();
    let (name, _) = pieces
        .put(b"the pipeline's code", SystemTime::now())
        .unwrap();
    let path = pieces.path(&name);
    std::fs::write(&path, b"the pipeline's cod3").unwrap();
    let fresh = Pieces::new(pieces.dir().parent().unwrap());
    let err = fresh.get_all(&[(name, Some(19))]).unwrap_err();
    assert_eq!(err.reason(), "corrupt-piece");
    assert!(!path.exists(), "the damaged piece is removed");
    assert_eq!(
        fresh.get_all(&[(name, Some(19))]).unwrap_err().reason(),
        "corrupt-piece",
        "the next entry naming it is dropped for the damage too"
    );
    assert_eq!(
        fresh
            .put(b"the pipeline's code", SystemTime::now())
            .unwrap()
            .1,
        19
    );
    assert_eq!(
        &fresh.get_all(&[(name, Some(19))]).unwrap()[0][..],
        b"the pipeline's code"
    );
    fresh.forget(&name);
    std::fs::remove_file(&path).unwrap(); // as another process's bound does
    assert_eq!(
        fresh.get_all(&[(name, Some(19))]).unwrap_err().reason(),
        "missing-piece",
        "written again, then gone: missing"
    );
}

#[test]
fn a_piece_is_read_without_an_access_time_update() {
    let (_root, pieces) = pieces();
    let (name, _) = pieces.put(&[3u8; 300], SystemTime::now()).unwrap();
    let path = pieces.path(&name);
    // An access time before the modification time: under `relatime` a read updates it.
    let old = SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_times(std::fs::FileTimes::new().set_accessed(old))
        .unwrap();
    let accessed = || std::fs::metadata(&path).unwrap().accessed().unwrap();
    assert_eq!(accessed(), old);
    let fresh = Pieces::new(pieces.dir().parent().unwrap());
    fresh.get_all(&[(name, Some(300))]).unwrap();
    assert_eq!(accessed(), old, "the read updated the access time");
}

#[test]
fn a_wrong_length_or_a_link_is_corrupt_and_memory_stays_within_its_bound() {
    let (_root, pieces) = pieces();
    let (name, _) = pieces.put(&[1u8; 100], SystemTime::now()).unwrap();
    assert_eq!(
        pieces.get_all(&[(name, Some(99))]).unwrap_err().reason(),
        "corrupt-piece"
    );
    let (name, _) = pieces.put(&[2u8; 100], SystemTime::now()).unwrap();
    let path = pieces.path(&name);
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", &path).unwrap();
    assert_eq!(
        pieces.get_all(&[(name, Some(100))]).unwrap_err().reason(),
        "corrupt-piece"
    );
    pieces.set_memory_limit(250);
    let names: Vec<_> = (0..5u8)
        .map(|i| pieces.put(&[i + 10; 100], SystemTime::now()).unwrap().0)
        .collect();
    for n in &names {
        pieces.get_all(&[(*n, Some(100))]).unwrap();
    }
    assert!(pieces.memory.lock().unwrap().bytes() <= 250);
}
