//! The layer must never be unloaded while a thread-local marker or the exit handler refers to it:
//! the loader `dlclose`s layers at `vkDestroyInstance`.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
