//! zstd for the bytes the store writes: an entry's inline bytes ([`super::recipe`]'s packed
//! parts), each piece's bytes ([`super::pieces`]) and a file of entries left waiting whole
//! ([`super::waiting`]), compressed where that pays and stored as they are where it does not, as
//! Mesa's disk cache compresses its own (zstd, a low level).
//!
//! Every check stays on the uncompressed bytes (an entry's data hash, a piece's name), so
//! identical content is one piece whatever its compression, and a frame is only ever a way to
//! store bytes whose length the reader already knows: decompression writes into room for exactly
//! that length, never past it (a frame claiming more is refused, never a zip bomb), and
//! one that fails, or gives fewer bytes, is damage (`corrupt`, `corrupt-piece`).
//!
//! The C library (the `zstd` crate builds libzstd 1.5 with the C compiler, as `blake3` builds
//! its C for both ABIs, the i686 one included) rather than a pure-Rust port: the same format and
//! ratios as Mesa's, and a compressor at every level (`ruzstd` encodes only its fastest level,
//! larger than libzstd's level 1). Its legacy formats are left out: nothing pipekeep wrote
//! needs them, and a decoder of old formats is more of a surface for a damaged file to reach.

use std::cell::RefCell;

/// The level every part is compressed at, chosen by measurement (`examples/compression.rs`,
/// docs/FORMAT.md "Choosing the level"): Mesa's disk cache uses 1 too.
pub const LEVEL: i32 = 1;

/// Bytes shorter than this are never tried: a frame's own head and the block's (some 10 bytes)
/// leave nothing worth a decompression at every lookup (a binary's 44 bytes of count, key and
/// length between two pieces).
pub const TRIED_FROM: usize = 128;

/// How much a compressed part must save to be kept compressed: at least an eighth of its
/// bytes. Less is not worth a decompression at every lookup of the entry (NVIDIA's data, already
/// zstd frames of its own, saves a few percent at most).
fn pays(len: usize, stored: usize) -> bool {
    stored + len / 8 <= len
}

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// `bytes` as one zstd frame of [`LEVEL`], where it takes at most `room` bytes (the frame plus
/// whatever head its container adds must save what [`pays`] asks); `None` where it does not pay
/// (or the library fails: the bytes are then stored as they are).
pub fn compress(bytes: &[u8], head: usize) -> Option<Vec<u8>> {
    if bytes.len() < TRIED_FROM {
        return None;
    }
    // The most the frame may take: a larger one would not pay, so the compressor stops there
    // (it fails once the buffer is full) instead of finishing a frame that is thrown away.
    let room = (bytes.len() - bytes.len() / 8).checked_sub(head)?;
    COMPRESSOR.with_borrow_mut(|held| {
        if held.is_none() {
            *held = zstd::bulk::Compressor::new(LEVEL).ok();
        }
        let compressor = held.as_mut()?;
        let mut frame = Vec::with_capacity(room);
        let n = compressor.compress_to_buffer(bytes, &mut frame).ok()?;
        debug_assert_eq!(n, frame.len());
        pays(bytes.len(), n + head).then_some(frame)
    })
}

/// Why a frame could not be read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("not one zstd frame filling its part")]
    NotOneFrame,
    #[error("the frame does not decompress")]
    Damaged,
    #[error("the frame holds another length than its part states")]
    OtherLength,
}

/// Checks that `frame` is exactly one zstd frame (nothing after it) stating exactly `len` bytes
/// of content, from its head alone: before any memory is set aside for those bytes. The store
/// writes every frame so; a frame that states no length, or another, is refused.
pub fn check_frame(frame: &[u8], len: usize) -> Result<(), FrameError> {
    match zstd::zstd_safe::find_frame_compressed_size(frame) {
        Ok(n) if n == frame.len() => {}
        _ => return Err(FrameError::NotOneFrame),
    }
    match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(stated)) if stated == len as u64 => Ok(()),
        _ => Err(FrameError::OtherLength),
    }
}

/// The most bytes a zstd frame's head takes (`ZSTD_FRAMEHEADERSIZE_MAX`): what [`stated_len`]
/// needs of a frame.
pub const FRAME_HEAD_MAX: usize = 18;

/// The content length `frame`'s head states (`None` where it states none or is no frame's head):
/// asked before a container whose length its frame gives sets room aside for it.
pub fn stated_len(frame: &[u8]) -> Option<u64> {
    zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
}

/// Decompresses `frame` (exactly one zstd frame, nothing after it, stating `out`'s length) over
/// `out`, which it must fill exactly. Nothing is written past `out`'s end whatever the frame
/// holds: a frame holding more fails here.
pub fn decompress_into(frame: &[u8], out: &mut [u8]) -> Result<(), FrameError> {
    check_frame(frame, out.len())?;
    decompress_checked(frame, out)
}

/// [`decompress_into`] of a frame [`check_frame`] has passed for `out`'s length.
fn decompress_checked(frame: &[u8], out: &mut [u8]) -> Result<(), FrameError> {
    let len = out.len();
    with_decompressor(|d| d.decompress_to_buffer(frame, out), len)
}

/// Runs `decompress` with this thread's decompressor: it must give exactly `len` bytes.
fn with_decompressor(
    decompress: impl FnOnce(&mut zstd::bulk::Decompressor<'static>) -> std::io::Result<usize>,
    len: usize,
) -> Result<(), FrameError> {
    DECOMPRESSOR.with_borrow_mut(|held| {
        if held.is_none() {
            *held = zstd::bulk::Decompressor::new().ok();
        }
        let decompressor = held.as_mut().ok_or(FrameError::Damaged)?;
        match decompress(decompressor) {
            Ok(n) if n == len => Ok(()),
            Ok(_) => Err(FrameError::OtherLength),
            Err(_) => Err(FrameError::Damaged),
        }
    })
}

/// [`decompress_into`] appended to `out`: `len` more bytes, or `out` as it was on failure. The
/// room is made only once the frame's head states exactly `len`.
pub fn decompress_onto(frame: &[u8], len: usize, out: &mut Vec<u8>) -> Result<(), FrameError> {
    check_frame(frame, len)?;
    let start = out.len();
    out.resize(start + len, 0);
    let read = decompress_checked(frame, &mut out[start..]);
    if read.is_err() {
        out.truncate(start);
    }
    read
}

/// [`decompress_into`] into bytes of its own: room for `len` set aside, not zeroed first (a
/// waiting file's 10 MB, every later launch).
pub fn decompress(frame: &[u8], len: usize) -> Result<Vec<u8>, FrameError> {
    check_frame(frame, len)?;
    let mut out = Vec::with_capacity(len);
    with_decompressor(|d| d.decompress_to_buffer(frame, &mut out), len)?;
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `len` bytes shaped like compiled code (other for each `seed`): they compress as RADV's do.
    pub(crate) fn code_like(seed: u8, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| [0x13, seed, 0x8f, (i / 7) as u8][i % 4])
            .collect()
    }

    #[test]
    fn bytes_that_shrink_come_back_whole_and_others_are_left_as_they_are() {
        let bytes = code_like(0, 5000);
        let frame = compress(&bytes, 0).expect("shrinks");
        assert!(frame.len() < 1000, "{} bytes", frame.len());
        let mut out = vec![0u8; 5000];
        decompress_into(&frame, &mut out).unwrap();
        assert_eq!(out, bytes);
        let noise = crate::store::recipe::tests::noise(5000);
        assert_eq!(compress(&noise, 0), None, "noise does not shrink");
        assert_eq!(
            compress(&bytes[..TRIED_FROM - 1], 0),
            None,
            "too short to try"
        );
        // What the container's head costs counts against the saving.
        assert_eq!(compress(&bytes, 5000), None);
    }

    #[test]
    fn a_frame_of_another_length_or_damaged_is_refused_and_never_written_past() {
        let bytes = code_like(0, 3000);
        let frame = compress(&bytes, 0).unwrap();
        let mut short = vec![0u8; 2999];
        assert_eq!(
            decompress_into(&frame, &mut short),
            Err(FrameError::OtherLength)
        );
        let mut long = vec![0u8; 3001];
        assert_eq!(
            decompress_into(&frame, &mut long),
            Err(FrameError::OtherLength)
        );
        let mut out = vec![0u8; 3000];
        assert_eq!(
            decompress_into(&frame[..frame.len() - 1], &mut out),
            Err(FrameError::NotOneFrame)
        );
        let twice = [&frame[..], &frame[..]].concat();
        assert_eq!(
            decompress_into(&twice, &mut out),
            Err(FrameError::NotOneFrame)
        );
        // A frame stating no length (the store never writes one) is refused as well.
        let mut bare = zstd::bulk::Compressor::new(LEVEL).unwrap();
        bare.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(false))
            .unwrap();
        let unstated = bare.compress(&bytes).unwrap();
        assert_eq!(
            decompress_into(&unstated, &mut out),
            Err(FrameError::OtherLength)
        );
        assert_eq!(decompress(&frame, 3000).unwrap(), bytes);
        let mut held = vec![7u8; 10];
        assert!(decompress_onto(&frame[..5], 3000, &mut held).is_err());
        assert_eq!(held, vec![7u8; 10], "left as it was");
        decompress_onto(&frame, 3000, &mut held).unwrap();
        assert_eq!(&held[10..], &bytes[..]);
    }
}
