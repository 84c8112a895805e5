//! An entry file of any bytes, read through the store's whole lookup (open without following,
//! type and size checks, the envelope's length against the file's, every check of the envelope
//! and the cache header, packed parts decompressed, the pieces it names): never a panic, and only
//! bytes that decode whole are ever found.
#![no_main]
use std::sync::OnceLock;
use std::time::SystemTime;

use libfuzzer_sys::fuzz_target;
use pipekeep::key::PipelineKey;
use pipekeep::store::{envelope, Identity, Lookup, Store};

const ID: Identity = Identity { vendor_id: 0x1002, device_id: 0x73bf, driver_version: 7, cache_uuid: [1; 16], abi: 8 };
const KEY: PipelineKey = PipelineKey { spirv: [2; 16], state: [3; 16] };

/// One store for the run, opened once with the key's entry present, so that every lookup opens
/// the file (a key absent at opening is missing without an open).
fn store() -> &'static Store {
    static STORE: OnceLock<(tempfile::TempDir, Store)> = OnceLock::new();
    let (_dir, store) = STORE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = pipekeep::store::host_pipelines_dir(dir.path(), "t").join(ID.dir_name());
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join(KEY.file_name()), b"").unwrap();
        let (store, _) = Store::open(dir.path(), "t", ID, u64::MAX, SystemTime::now()).unwrap();
        (dir, store)
    });
    store
}

fuzz_target!(|data: &[u8]| {
    let store = store();
    std::fs::write(store.entry_path(&KEY), data).unwrap();
    match store.lookup(&KEY).unwrap() {
        // No pieces stand in this store: only an entry holding its payload whole (packed or
        // not) is found, and what is found is what it decodes to.
        Lookup::Found(found) => {
            let whole = envelope::decode(data, &ID, &KEY).ok().and_then(|d| d.whole().map(<[u8]>::to_vec));
            assert_eq!(Some(found.with_data(<[u8]>::to_vec)), whole);
        }
        Lookup::Dropped(_) => {
            assert!(envelope::decode(data, &ID, &KEY).map_or(true, |d| d.whole().is_none()))
        }
        Lookup::Missing => panic!("the entry was written just now"),
    }
});
