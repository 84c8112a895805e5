//! Pipeline keys: a content hash of a pipeline's SPIR-V and one of its state (D113: content, never
//! address). The layer reads the application's create infos into the plain descriptions of
//! [`desc`]; this module hashes those in a defined order. Nothing here touches a pointer.
#![forbid(unsafe_code)]

pub mod desc;
pub mod features;
mod feed;
mod hash;
pub mod text;

pub use desc::Unkeyable;
pub use feed::Digest;
pub use hash::{
    compute_key, device_digest, device_digest_under_global_key, graphics_key, module_digest,
    pipeline_layout_digest, ray_tracing_key, render_pass_info, sampler_digest, set_layout_digest,
    shader_objects_key, stage_code_key, whole_device_digest, Dynamic, KEY_VERSION,
};

#[cfg(test)]
mod tests;

use text::hex_into;

/// The key of one pipeline: 128 bits of SPIR-V hash and 128 bits of state hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PipelineKey {
    pub spirv: [u8; 16],
    pub state: [u8; 16],
}

/// Length of an entry's file name: 32 + 1 + 32 hex digits and `.entry`.
pub const ENTRY_NAME_LEN: usize = 32 + 1 + 32 + ".entry".len();

/// An entry's file name, `<spirv>-<state>.entry`, held on the stack: a lookup and the loading
/// marker name an entry for every pipeline, and never allocate for it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct EntryName([u8; ENTRY_NAME_LEN]);

impl EntryName {
    pub fn bytes(&self) -> &[u8; ENTRY_NAME_LEN] {
        &self.0
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits, '-' and ".entry" are ever written into it.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::ops::Deref for EntryName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<std::path::Path> for EntryName {
    fn as_ref(&self) -> &std::path::Path {
        self.as_str().as_ref()
    }
}

impl AsRef<[u8]> for EntryName {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Display for EntryName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for EntryName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PipelineKey {
    /// The entry's file name, `<spirv>-<state>.entry`.
    pub fn file_name(&self) -> EntryName {
        let mut name = [0u8; ENTRY_NAME_LEN];
        hex_into(&self.spirv, &mut name[..32]);
        name[32] = b'-';
        hex_into(&self.state, &mut name[33..65]);
        name[65..].copy_from_slice(b".entry");
        EntryName(name)
    }
}

impl PipelineKey {
    /// The key an entry's file name names, if it is one of ours.
    pub fn from_file_name(name: &str) -> Option<PipelineKey> {
        let stem = name.strip_suffix(".entry")?;
        let (spirv, state) = stem.split_once('-')?;
        let half = text::from_hex::<16>;
        Some(PipelineKey {
            spirv: half(spirv)?,
            state: half(state)?,
        })
    }
}
