//! A piece file of any bytes, read as a piece of a given length (as it is, or framed: the magic,
//! its length, one zstd frame) and through the store's own read of a piece (open, type and size
//! checks, the frame decompressed into exactly the length the entry gives, the name checked):
//! never a panic, nothing longer than stated, and only the piece's own bytes are ever served.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pipekeep::store::pieces::{self, Pieces};

/// The piece every input is tried as: a header and "pipeline" 32 times, 288 bytes.
fn content() -> &'static [u8] {
    static CONTENT: OnceLock<Vec<u8>> = OnceLock::new();
    CONTENT.get_or_init(|| {
        let mut c = vec![32, 0, 0, 0, 1, 0, 0, 0, 2, 0x10, 0, 0, 0xbf, 0x73, 0, 0];
        c.extend(0xa0u8..=0xaf);
        c.extend(b"pipeline".repeat(32));
        c
    })
}

fn dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(pieces::DIR)).unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    // Any length, as an entry might state it (the first 2 bytes), on the rest.
    if let [a, b, rest @ ..] = data {
        let len = u64::from(u16::from_le_bytes([*a, *b]));
        if let Ok(read) = pieces::unframe(rest.to_vec(), len) {
            assert_eq!(read.len() as u64, len);
        }
    }
    let name = *blake3::hash(content()).as_bytes();
    let got = pieces::content_of(data.to_vec(), &name);
    assert!(got.is_none_or(|b| b == content()));
    // The store's own read of the piece, a fresh process's (nothing held in memory).
    let store = Pieces::new(dir().path());
    std::fs::write(store.path(&name), data).unwrap();
    if let Ok(found) = store.get_all(&[(name, Some(content().len() as u64))]) {
        assert_eq!(&found[0][..], content());
    }
});
