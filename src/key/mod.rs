//! Pipeline keys: a content hash of a pipeline's SPIR-V and one of its state (D113: content, never
//! address). The layer reads the application's create infos into the plain descriptions of
//! [`desc`]; this module hashes those in a defined order. Nothing here touches a pointer.
#![forbid(unsafe_code)]

pub mod desc;
mod feed;
mod hash;

pub use desc::Unkeyable;
pub use feed::Digest;
pub use hash::{
    compute_key, graphics_key, module_digest, pipeline_layout_digest, render_pass_info,
    sampler_digest, set_layout_digest, Dynamic, KEY_VERSION,
};

#[cfg(test)]
mod tests;

use crate::store::identity::hex;

/// The key of one pipeline: 128 bits of SPIR-V hash and 128 bits of state hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PipelineKey {
    pub spirv: [u8; 16],
    pub state: [u8; 16],
}

/// Length of an entry's file name: 32 + 1 + 32 hex digits and `.entry`.
pub const ENTRY_NAME_LEN: usize = 32 + 1 + 32 + ".entry".len();

impl PipelineKey {
    /// The entry's file name, `<spirv>-<state>.entry`.
    pub fn file_name(&self) -> String {
        format!("{}-{}.entry", hex(&self.spirv), hex(&self.state))
    }
}

impl PipelineKey {
    /// The key an entry's file name names, if it is one of ours.
    pub fn from_file_name(name: &str) -> Option<PipelineKey> {
        let stem = name.strip_suffix(".entry")?;
        let (spirv, state) = stem.split_once('-')?;
        let half = |s: &str| -> Option<[u8; 16]> {
            if s.len() != 32
                || !s
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return None;
            }
            let mut out = [0u8; 16];
            for (i, byte) in out.iter_mut().enumerate() {
                *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
            }
            Some(out)
        };
        Some(PipelineKey {
            spirv: half(spirv)?,
            state: half(state)?,
        })
    }
}
