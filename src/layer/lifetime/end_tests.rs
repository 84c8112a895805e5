//! The device's end against the layer's own threads, on a fake driver that counts the calls made
//! into it: no thread of the layer's calls into a device after the exit handler returned or after
//! `vkDestroyDevice`, and none is inside the driver when the device is destroyed. The thread is
//! the opening thread handing NVIDIA's dictionary over (the entry it reads is file I/O, which may
//! outlast the exit handler's wait for it).

use super::*;
use crate::layer::device::StoreCell;
use std::sync::atomic::AtomicUsize;
use std::sync::Condvar;
use std::time::SystemTime;

/// A device handle of the fake driver: what its commands see.
#[repr(C)]
struct FakeDevice {
    /// The dispatch key (a dispatchable handle's first pointer-sized word).
    key: u64,
    calls: AtomicU32,
    calls_after_destroyed: AtomicU32,
    destroyed: AtomicBool,
    /// A call is inside the fake driver now.
    inside: AtomicBool,
    destroyed_with_a_call_inside: AtomicBool,
    /// `vkCreatePipelineCache` waits while this holds `true`.
    hold: Mutex<bool>,
    released: Condvar,
    /// The size of the last cache made, for the size query.
    cache_size: AtomicUsize,
}

impl FakeDevice {
    fn new(holding: bool) -> &'static FakeDevice {
        let fake: &'static mut FakeDevice = Box::leak(Box::new(FakeDevice {
            key: 0,
            calls: AtomicU32::new(0),
            calls_after_destroyed: AtomicU32::new(0),
            destroyed: AtomicBool::new(false),
            inside: AtomicBool::new(false),
            destroyed_with_a_call_inside: AtomicBool::new(false),
            hold: Mutex::new(holding),
            released: Condvar::new(),
            cache_size: AtomicUsize::new(0),
        }));
        fake.key = fake as *const FakeDevice as u64;
        fake
    }

    fn handle(&'static self) -> vk::Device {
        use ash::vk::Handle;
        vk::Device::from_raw(self as *const FakeDevice as u64)
    }

    /// The fake device behind a handle of it.
    ///
    /// # Safety
    /// `device` must be a handle [`FakeDevice::handle`] gave.
    unsafe fn of(device: vk::Device) -> &'static FakeDevice {
        use ash::vk::Handle;
        // SAFETY: as the caller vouches: a leaked FakeDevice.
        unsafe { &*(device.as_raw() as *const FakeDevice) }
    }

    fn call(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.destroyed.load(Ordering::SeqCst) {
            self.calls_after_destroyed.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn release(&self) {
        *self.hold.lock().unwrap() = false;
        self.released.notify_all();
    }
}

unsafe extern "system" fn fake_create_cache(
    device: vk::Device,
    ci: *const vk::PipelineCacheCreateInfo<'_>,
    _: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::PipelineCache,
) -> vk::Result {
    use ash::vk::Handle;
    // SAFETY: the layer calls it with a fake handle and a valid create info.
    let (fake, ci) = unsafe { (FakeDevice::of(device), &*ci) };
    fake.call();
    fake.inside.store(true, Ordering::SeqCst);
    let mut hold = fake.hold.lock().unwrap();
    while *hold {
        hold = fake.released.wait(hold).unwrap();
    }
    drop(hold);
    fake.cache_size
        .store(ci.initial_data_size, Ordering::SeqCst);
    // SAFETY: the caller's out pointer.
    unsafe { *out = vk::PipelineCache::from_raw(1) };
    fake.inside.store(false, Ordering::SeqCst);
    vk::Result::SUCCESS
}

unsafe extern "system" fn fake_cache_data(
    device: vk::Device,
    _: vk::PipelineCache,
    size: *mut usize,
    _: *mut std::ffi::c_void,
) -> vk::Result {
    // SAFETY: as above; the caller's size pointer.
    let fake = unsafe { FakeDevice::of(device) };
    fake.call();
    unsafe { *size = fake.cache_size.load(Ordering::SeqCst) };
    vk::Result::SUCCESS
}

unsafe extern "system" fn fake_destroy_cache(
    device: vk::Device,
    _: vk::PipelineCache,
    _: *const vk::AllocationCallbacks<'_>,
) {
    // SAFETY: as above.
    unsafe { FakeDevice::of(device) }.call();
}

unsafe extern "system" fn fake_destroy_device(
    device: vk::Device,
    _: *const vk::AllocationCallbacks<'_>,
) {
    // SAFETY: as above.
    let fake = unsafe { FakeDevice::of(device) };
    if fake.inside.load(Ordering::SeqCst) {
        fake.destroyed_with_a_call_inside
            .store(true, Ordering::SeqCst);
    }
    fake.destroyed.store(true, Ordering::SeqCst);
}

/// Every other command: never called here.
unsafe extern "system" fn not_called() {
    std::process::abort()
}

unsafe extern "system" fn fake_gdpa(_: vk::Device, name: *const c_char) -> vk::PFN_vkVoidFunction {
    // SAFETY: a NUL-terminated name; each command cast from its own type.
    unsafe {
        match CStr::from_ptr(name).to_bytes() {
            b"vkCreatePipelineCache" => Some(std::mem::transmute::<
                vk::PFN_vkCreatePipelineCache,
                unsafe extern "system" fn(),
            >(fake_create_cache)),
            b"vkGetPipelineCacheData" => Some(std::mem::transmute::<
                vk::PFN_vkGetPipelineCacheData,
                unsafe extern "system" fn(),
            >(fake_cache_data)),
            b"vkDestroyPipelineCache" => Some(std::mem::transmute::<
                vk::PFN_vkDestroyPipelineCache,
                unsafe extern "system" fn(),
            >(fake_destroy_cache)),
            b"vkDestroyDevice" => Some(std::mem::transmute::<
                vk::PFN_vkDestroyDevice,
                unsafe extern "system" fn(),
            >(fake_destroy_device)),
            _ => Some(not_called),
        }
    }
}

/// An NVIDIA device of the fake driver whose store names an entry carrying the driver's
/// dictionary (the next run's opening thread hands it over before the first compile), known to
/// the layer as a device made through it.
fn nvidia_device_with_a_noted_dictionary(
    fake: &'static FakeDevice,
    root: &std::path::Path,
) -> Arc<DeviceData> {
    use crate::key::PipelineKey;
    use crate::store::envelope::tests::{cache_data, identity};
    use crate::store::nvidia_cache::tests::{dictionary_key, record};
    let nvidia = Identity {
        vendor_id: NVIDIA,
        ..identity()
    };
    let (store, _) = Store::open(root, "title", nvidia, 1 << 30, SystemTime::now()).unwrap();
    let key = PipelineKey {
        spirv: [1; 16],
        state: [1; 16],
    };
    let body = [
        &2u32.to_le_bytes()[..],
        &record([1; 16], 1, &[1; 100]),
        &record(dictionary_key(), 0xd1c7, &[5; 3000]),
    ]
    .concat();
    store.write(&key, &cache_data(&nvidia, &body)).unwrap();
    store.remember_dictionary_entry(&key.file_name()).unwrap();
    let shared = StoreCell::default();
    let _ = shared.cell.set(Some(Arc::new(store)));
    // SAFETY: the fake driver's own commands.
    let fns = unsafe { DeviceFns::load(fake_gdpa, fake.handle()) }.expect("every command");
    let watch = Arc::new(Watch::default());
    let data = Arc::new(DeviceData {
        handle: fake.handle(),
        fns,
        active: true,
        feedback_valid: false,
        identity: nvidia,
        device_name: "fake".into(),
        objects: Objects::default(),
        rebuild_objects: Objects::default(),
        writer: Writer::new(Arc::new(|_, _| {}), None),
        watch,
        root: Some(root.to_path_buf()),
        title: "title".into(),
        store: Some(shared),
        opener: Default::default(),
        opening_thread: AtomicBool::new(true),
        stop: AtomicBool::new(false),
        finished: AtomicBool::new(false),
        fork_generation: FORK_GENERATION.load(Ordering::Relaxed),
        device_state: Digest([0; 32]),
        shader_objects: None,
        rebuild_stop: Arc::default(),
        rebuilder: Mutex::default(),
        rebuild_owed_at_opening: AtomicBool::new(false),
        writes_failing: Arc::default(),
        rebuild_threads: Default::default(),
        record: None,
        record_app: Default::default(),
        backend: AtomicU8::new(Backend::Cache as u8),
        binary_fns: None,
        binary_refusals: Default::default(),
        shared_builds: Default::default(),
        twins: Default::default(),
        dictionaries: super::super::dictionary::DeviceDictionaries::new(true),
        app_activity: Arc::default(),
        found_gate: None,
        driver_gate: Arc::default(),
        max_samplers: 4000,
    });
    // SAFETY: the fake handle's first word is its dispatch key.
    DEVICES.insert(unsafe { dispatch_key(fake.handle()) }, data.clone());
    data
}

/// Waits until `done` (ten seconds at most: a hang fails the test instead).
fn until(what: &str, done: impl Fn() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "never: {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The opening thread, past its check of the stop, is still reading the entry that carries
/// NVIDIA's dictionary when the process exits; the exit handler gives up on it, and the
/// application destroys its device in a static destructor. The opening thread then hands the
/// dictionary over no more: it made a cache on the destroyed device before.
#[test]
fn an_opening_thread_the_exit_handler_gave_up_on_never_calls_into_the_device_after() {
    let root = tempfile::tempdir().unwrap();
    // Beside it, the same handing over on a device that lives: it does call the driver.
    let living = FakeDevice::new(false);
    let dev = nvidia_device_with_a_noted_dictionary(living, root.path());
    crate::layer::pipelines::prime_dictionary(&dev);
    assert!(
        living.calls.load(Ordering::SeqCst) > 0,
        "the dictionary is handed over"
    );
    // SAFETY: a device of the fake driver, made through the layer.
    unsafe { destroy_device(living.handle(), std::ptr::null()) };

    let fake = FakeDevice::new(false);
    let dev = nvidia_device_with_a_noted_dictionary(fake, root.path());
    let reading = Arc::new((Mutex::new(true), Condvar::new()));
    let opener = {
        let (dev, reading) = (dev.clone(), reading.clone());
        std::thread::spawn(move || {
            let mut still = reading.0.lock().unwrap();
            while *still {
                still = reading.1.wait(still).unwrap();
            }
            drop(still);
            crate::layer::pipelines::prime_dictionary(&dev);
        })
    };
    *dev.opener.locked() = Some(opener);
    // The exit handler, then the application's static destructor.
    dev.finish(true);
    // SAFETY: as above.
    unsafe { destroy_device(fake.handle(), std::ptr::null()) };
    assert!(fake.destroyed.load(Ordering::SeqCst));
    *reading.0.lock().unwrap() = false;
    reading.1.notify_all();
    let opener = dev
        .opener
        .locked()
        .take()
        .expect("left to end with the process");
    opener.join().unwrap();
    assert_eq!(
        fake.calls_after_destroyed.load(Ordering::SeqCst),
        0,
        "a thread of the layer's called into the device after it was destroyed"
    );
    assert_eq!(fake.calls.load(Ordering::SeqCst), 0);
}

/// The opening thread is inside the driver, handing NVIDIA's dictionary over, when the process
/// exits (the exit handler gives up on it after its wait), and another thread of the application
/// destroys the device meanwhile: the device is destroyed only once that call has ended.
#[test]
fn the_device_is_destroyed_only_once_a_thread_of_the_layers_inside_the_driver_left() {
    let root = tempfile::tempdir().unwrap();
    let fake = FakeDevice::new(true);
    let dev = nvidia_device_with_a_noted_dictionary(fake, root.path());
    let opener = {
        let dev = dev.clone();
        std::thread::spawn(move || crate::layer::pipelines::prime_dictionary(&dev))
    };
    *dev.opener.locked() = Some(opener);
    until("the opening thread is inside the driver", || {
        fake.inside.load(Ordering::SeqCst)
    });
    let exiting = {
        let dev = dev.clone();
        std::thread::spawn(move || dev.finish(true))
    };
    until("the exit handler returned or waits", || {
        exiting.is_finished() || dev.driver_gate.ends_waiting() >= 1
    });
    // SAFETY: a device of the fake driver, made through the layer.
    let destroying =
        std::thread::spawn(move || unsafe { destroy_device(fake.handle(), std::ptr::null()) });
    until("vkDestroyDevice returned or waits", || {
        destroying.is_finished() || dev.driver_gate.ends_waiting() >= 2
    });
    fake.release();
    exiting.join().unwrap();
    destroying.join().unwrap();
    let opener = dev.opener.locked().take();
    if let Some(opener) = opener {
        opener.join().unwrap();
    }
    assert!(fake.destroyed.load(Ordering::SeqCst));
    assert!(
        !fake.destroyed_with_a_call_inside.load(Ordering::SeqCst),
        "the device was destroyed while a thread of the layer's was inside its driver"
    );
}
