//! pipekeep: a Vulkan layer that keeps every compiled pipeline on disk as one checked entry.
pub mod key;
pub mod store;
