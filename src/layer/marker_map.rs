//! The loading marker's bytes mapped into memory: the store's [`MarkerSlot`] for the layer.
//! Naming the entry before the driver loads it and emptying the marker after are then two stores
//! into the page cache instead of two system calls a pipeline, and a process that dies inside
//! the driver leaves the name there for the next opening to read, as a write would have. (The
//! store itself holds no unsafe code, so the mapping lives here, and so does what a child made
//! by `fork` does with the markers it inherits.)

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

/// In a child made by `fork` (its fork handler): puts `/dev/null` in place of every marker
/// descriptor inherited from the parent, so that the child shares no marker's open file, and
/// with it no `flock`: a parent that dies inside the driver leaves a marker the next opening
/// finds stale, however long the child lives. The numbers stay open (on `/dev/null`) until the
/// markers holding them are dropped, so no other file of the child's is ever closed in their
/// name. Async-signal-safe calls only (`open`, `dup3`, `close`).
pub fn let_go_in_forked_child() {
    // SAFETY: a NUL-terminated path; `open` is async-signal-safe.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if null < 0 {
        return;
    }
    crate::store::marker::for_each_descriptor(|fd| {
        // SAFETY: `fd` is a marker's descriptor this process holds; `dup3` makes it refer to
        // `/dev/null` instead, in one step.
        unsafe { libc::dup3(null, fd, libc::O_CLOEXEC) };
    });
    // SAFETY: the descriptor opened above.
    unsafe { libc::close(null) };
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

#[cfg(test)]
mod tests {
    use crate::key::PipelineKey;
    use crate::store::files::{lock_path, Locked};
    use crate::store::marker::{marker_name, LoadingMarker};

    #[test]
    fn a_forked_child_lets_go_of_its_parents_markers() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("the-marker");
        let (path, link_for_thread) = (dir.path().to_path_buf(), link.clone());
        let mut told = [0i32; 2];
        // SAFETY: a pipe of two descriptors.
        assert_eq!(unsafe { libc::pipe(told.as_mut_ptr()) }, 0);
        // A thread that holds a marker forks, then ends (its marker dropped): only the child
        // could still hold the marker's lock.
        let child = std::thread::spawn(move || {
            let name = PipelineKey {
                spirv: [1; 16],
                state: [2; 16],
            }
            .file_name();
            drop(LoadingMarker::hold(&path, &name));
            std::fs::hard_link(path.join(marker_name()), &link_for_thread).unwrap();
            // SAFETY: the child calls async-signal-safe functions only, then `_exit`.
            match unsafe { libc::fork() } {
                0 => {
                    super::let_go_in_forked_child();
                    // SAFETY: as above: it tells the parent it let go, and waits to be killed.
                    unsafe {
                        libc::write(told[1], [1u8].as_ptr().cast(), 1);
                        libc::sleep(10);
                        libc::_exit(0)
                    }
                }
                pid => pid,
            }
        })
        .join()
        .unwrap();
        assert!(child > 0);
        let mut byte = 0u8;
        // SAFETY: one byte from the pipe made above.
        let read = unsafe { libc::read(told[0], (&mut byte as *mut u8).cast(), 1) };
        assert_eq!(read, 1);
        // Another test's process being spawned (between its fork and its exec) may hold every
        // descriptor of this one for a moment: a few tries.
        let held = (0..50).any(|_| {
            let held = matches!(lock_path(&link, false), Ok(Locked::Held(_)));
            if !held {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            held
        });
        // SAFETY: our own child, and the pipe made above.
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::waitpid(child, std::ptr::null_mut(), 0);
            libc::close(told[0]);
            libc::close(told[1]);
        }
        assert!(held, "the child kept its parent's marker locked");
    }
}
