//! The loading marker's bytes mapped into memory: the store's [`MarkerSlot`] for the layer.
//! Naming the entry before the driver loads it and emptying the marker after are then two stores
//! into the page cache instead of two system calls a pipeline, and a process that dies inside
//! the driver leaves the name there for the next opening to read, as a write would have. (The
//! store itself holds no unsafe code, so the mapping lives here.)

use std::fs::File;
use std::os::fd::AsFd;
use std::ptr::NonNull;
use std::sync::atomic::{compiler_fence, Ordering};

use crate::key::ENTRY_NAME_LEN;
use crate::store::marker::MarkerSlot;

/// A shared, writable mapping of a marker file's [`ENTRY_NAME_LEN`] bytes.
struct MappedMarker {
    at: NonNull<u8>,
}

/// The [`crate::store::marker::SlotMaker`] the layer gives the store; `None` (the mapping
/// refused) leaves the marker written in place.
pub fn map(file: &File) -> Option<Box<dyn MarkerSlot>> {
    use rustix::mm::{MapFlags, ProtFlags};
    // SAFETY: a new shared mapping of a file that this thread created, sized to ENTRY_NAME_LEN
    // bytes and holds locked for its life; markers are never truncated while held.
    let at = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            ENTRY_NAME_LEN,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            file.as_fd(),
            0,
        )
    }
    .ok()?;
    Some(Box::new(MappedMarker {
        at: NonNull::new(at.cast())?,
    }))
}

impl MarkerSlot for MappedMarker {
    fn name(&mut self, name: &[u8; ENTRY_NAME_LEN]) {
        // SAFETY: the mapping's ENTRY_NAME_LEN bytes, which only this thread writes.
        unsafe { std::ptr::copy_nonoverlapping(name.as_ptr(), self.at.as_ptr(), ENTRY_NAME_LEN) };
        // The name is in the page before the driver's call that follows, never after it.
        compiler_fence(Ordering::SeqCst);
    }

    fn empty(&mut self) {
        compiler_fence(Ordering::SeqCst);
        // SAFETY: the mapping's first byte.
        unsafe { self.at.as_ptr().write_volatile(0) };
    }
}

impl Drop for MappedMarker {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, no longer used.
        let _ = unsafe { rustix::mm::munmap(self.at.as_ptr().cast(), ENTRY_NAME_LEN) };
    }
}
