//! The store shared by every device of one identity in the process: opened once, by the
//! opening thread or by the first pipeline that comes before it, and what its opening finds
//! owed (a driver change, or a rebuild an earlier run cut short).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::SystemTime;

use super::{test_wait_until, DeviceData};
use crate::layer::guard::SETTINGS;
use crate::store::{Identity, Store};

/// Where a device's store is, shared by every device of one identity in the process, and how
/// many live devices use it: what is read ahead is let go when the last of them ends.
#[derive(Default)]
pub struct SharedStore {
    pub cell: OnceLock<Option<Arc<Store>>>,
    pub devices: std::sync::atomic::AtomicUsize,
}
pub type StoreCell = Arc<SharedStore>;
/// Library root, title and identity: what makes two devices share one store.
type StoreId = (PathBuf, String, Identity);

pub static STORES: LazyLock<Mutex<HashMap<StoreId, StoreCell>>> = LazyLock::new(Default::default);

impl DeviceData {
    /// The store, opened at the first call (threads that need it first wait for that opening).
    /// `None` makes the layer a pass-through for this device.
    pub fn store(&self) -> Option<&Arc<Store>> {
        if SETTINGS.test_read_ahead_first {
            // Test only: the opening thread opens the store and reads ahead all it will before
            // the first lookup.
            test_wait_until(&|| self.opened_store().is_some());
            test_wait_until(&|| self.opened_store().is_none_or(|s| s.reading_ahead_ended()));
        }
        self.open_store()
    }

    /// The store, opened at the first call, by the opening thread or by the first pipeline that
    /// comes before it: published at once either way, its bound checked and other drivers'
    /// entries dropped by the opening thread after. Only a device whose opening thread could not
    /// start has its first pipeline do all of it. (The first pipeline used to do all of it
    /// whenever it came first: one launch in ten to twenty at two threads on RADV, each dropping
    /// the 600 entries an earlier driver change had set aside in 50 ms inside the application's
    /// first pipeline.)
    pub fn open_store(&self) -> Option<&Arc<Store>> {
        let cell = self.store.as_ref()?;
        let store = cell.cell.get_or_init(|| {
            let bound_now = !self.opening_thread.load(Ordering::Acquire);
            let root = self.root.as_ref()?;
            let opened_at = SETTINGS.test_open_time.unwrap_or_else(SystemTime::now);
            crate::store::marker::use_slots(crate::layer::marker_map::map);
            match Store::open_then_bound(root, &self.title, self.identity, SETTINGS.max_bytes, opened_at, bound_now) {
                Ok((store, _report)) => {
                    if store.driver_changed() {
                        self.owe_a_rebuild();
                    }
                    let owed = self.record.as_ref().is_some_and(|r| r.is_pending());
                    self.rebuild_owed_at_opening.store(owed, Ordering::Release);
                    store.set_piece_memory(SETTINGS.piece_memory);
                    if SETTINGS.test_pieces_always {
                        store.keep_every_binary_as_a_piece();
                    }
                    if let Some(bytes) = SETTINGS.test_chunked_from {
                        store.set_chunking(crate::store::recipe::Chunking::fine_from(bytes));
                    }
                    if SETTINGS.read_ahead == 0 {
                        store.read_nothing_ahead();
                    }
                    let store = Arc::new(store);
                    // Announced before the store is published: the first lookup finds them.
                    self.writer.write_waiting(store.clone(), store.take_waiting());
                    Some(store)
                }
                Err(e) => {
                    tracing::warn!(title = %self.title, error = %e, "the pipeline store cannot be opened; pipekeep passes pipelines through");
                    None
                }
            }
        });
        store.as_ref()
    }

    /// The device's store, if it was opened.
    pub fn opened_store(&self) -> Option<&Arc<Store>> {
        self.store.as_ref()?.cell.get()?.as_ref()
    }
}

impl DeviceData {
    /// After a driver change, marks the title's record as owing a rebuild at once (before any
    /// thread can be stopped): a device gone before its rebuild began or ended leaves it to the
    /// next run.
    pub fn owe_a_rebuild(&self) {
        let Some(record) = self.record.as_ref() else {
            return;
        };
        if SETTINGS.rebuild == crate::settings::RebuildSetting::Off || !record.path().is_file() {
            return;
        }
        if let Err(e) = record.mark_pending() {
            tracing::debug!(record = %record.path().display(), error = %e, "the record is not marked as owing a rebuild");
        }
    }
}
