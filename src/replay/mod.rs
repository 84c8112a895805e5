//! Fossilize databases: reading the container ([`foz`]), decoding SPIR-V ([`varint`]), and
//! replaying every pipeline through the Vulkan loader ([`replayer`]), so pipekeep's store can be
//! filled before an application's first launch, and workloads no one here wrote can be measured.

pub mod every_extension;
pub mod feature_chain;
pub mod foz;
pub mod objects;
pub mod record;
pub mod replayer;
pub mod varint;
