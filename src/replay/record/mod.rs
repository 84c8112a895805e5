//! The record: the create info of every pipeline a title compiled, driver-independent, as a
//! Fossilize database (`<title>/record.foz`, the format [`super::foz`] reads), so that a new
//! driver's store can be rebuilt from it (`pipekeep rebuild`) without the application.
//!
//! Each pipeline is written with every object it names (shader module with its SPIR-V, pipeline
//! layout, set layouts, immutable samplers), each object once (Fossilize keys objects by hash:
//! here the first 8 bytes of the object's content digest, so equal content is one object). The
//! objects come from what the layer's keys already captured: a pipeline is recorded exactly as
//! it was keyed, and replaying it gives the same key on the same device (the record keeps the
//! device's state too: [`DEVICE_KEY`]). Compute, graphics and ray-tracing pipelines are
//! recorded, pipeline libraries among them (a link names its libraries by their pipelines'
//! hashes, as Fossilize does).
//!
//! Appending is crash-safe as the database format makes it: an entry cut short by a stopped
//! process is ignored by readers (and the next append goes after it, as Fossilize's own writer
//! does); a torn middle fails its CRC. Writers of several processes take `flock` on the file.

use std::sync::Arc;

use crate::key::desc::{
    ComputeDesc, GraphicsDesc, PipelineLayoutDesc, RayTracingDesc, RenderPassDesc, RenderTarget,
    SamplerDesc, SetLayoutDesc,
};
use crate::key::{Digest, PipelineKey};

mod compaction;
pub mod configuration;
mod documents;
mod file;
mod links;
pub mod stype;
#[cfg(test)]
mod tests;

pub use compaction::{live_part, stamps_of, within_share};
pub use configuration::{
    configuration_hash, configuration_hashes, device_from_json, AppState, ApplicationInfo, Launch,
    ABI_KEY, DEVICE_KEY, LAUNCH_KEY,
};
pub use documents::pipeline_entries;
pub use file::{read, Compacted, RecordFile};
pub use links::{link_hash, linked_pipeline};

/// The record's file name in a title's directory.
pub const FILE_NAME: &str = crate::store::RECORD_FILE;
/// Beside the record: some recorded pipelines have no entry yet (a rebuild after a driver change
/// has not reached its end). The next
/// run's background rebuild takes them; the record is not compacted meanwhile.
pub const PENDING_FILE_NAME: &str = "record.pending";

/// A database entry to write: its tag, hash and payload.
pub type DbEntry = (u32, u64, Vec<u8>);

/// What the record needs of an object, kept by its content digest.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Module(Vec<u32>),
    Sampler(SamplerDesc),
    SetLayout(SetLayoutDesc),
    PipelineLayout(PipelineLayoutDesc),
    RenderPass(RenderPassDesc),
}

/// A pipeline as its key captured it.
#[derive(Debug, Clone)]
pub enum Recorded {
    Compute(ComputeDesc),
    Graphics(Box<GraphicsDesc>),
    RayTracing(Box<RayTracingDesc>),
}

impl Recorded {
    /// The pipeline's key: the one its description gives, so that what is recorded is what was
    /// keyed.
    pub fn key(&self) -> crate::key::PipelineKey {
        match self {
            Recorded::Compute(d) => crate::key::compute_key(d),
            Recorded::Graphics(d) => crate::key::graphics_key(d),
            Recorded::RayTracing(d) => crate::key::ray_tracing_key(d),
        }
    }

    /// Each stage's code digest ([`crate::key::stage_code_key`]), each once.
    pub fn stage_codes(&self) -> Vec<[u8; 16]> {
        let stages: Vec<&crate::key::desc::StageDesc> = match self {
            Recorded::Compute(d) => vec![&d.stage],
            Recorded::Graphics(d) => d.stages.iter().collect(),
            Recorded::RayTracing(d) => d.stages.iter().collect(),
        };
        let mut codes: Vec<[u8; 16]> = stages.into_iter().map(crate::key::stage_code_key).collect();
        codes.sort_unstable();
        codes.dedup();
        codes
    }

    /// The pipeline layout's digest.
    pub fn layout(&self) -> &Digest {
        match self {
            Recorded::Compute(d) => &d.layout,
            Recorded::Graphics(d) => &d.layout,
            Recorded::RayTracing(d) => &d.layout,
        }
    }

    /// The digests of every object the pipeline names directly (modules, layout, render pass).
    pub fn names(&self) -> Vec<Digest> {
        match self {
            Recorded::Compute(d) => vec![d.stage.module, d.layout],
            Recorded::Graphics(d) => {
                let mut out: Vec<Digest> = d.stages.iter().map(|s| s.module).collect();
                out.push(d.layout);
                if let RenderTarget::Pass { pass, .. } = &d.target {
                    out.push(*pass);
                }
                out
            }
            Recorded::RayTracing(d) => {
                let mut out: Vec<Digest> = d.stages.iter().map(|s| s.module).collect();
                out.push(d.layout);
                out
            }
        }
    }

    /// The database tag it is written under (Fossilize's: 7 compute, 6 graphics, 9 ray tracing).
    pub fn tag(&self) -> u32 {
        use crate::replay::objects::{TAG_COMPUTE, TAG_GRAPHICS, TAG_RAY_TRACING};
        match self {
            Recorded::Compute(_) => TAG_COMPUTE,
            Recorded::Graphics(_) => TAG_GRAPHICS,
            Recorded::RayTracing(_) => TAG_RAY_TRACING,
        }
    }
}

/// A compiled pipeline to record, with the content of every object it names.
#[derive(Debug, Clone)]
pub struct PipelineRecord {
    pub key: PipelineKey,
    pub desc: Recorded,
    pub contents: Vec<(Digest, Arc<Content>)>,
}

/// Why a pipeline is not recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotRecorded {
    #[error("the content of an object it names is not known")]
    MissingContent,
    #[error("it holds state the record cannot write: {0}")]
    Unwritable(&'static str),
}

/// The hash a database names an object by.
pub fn object_hash(d: &Digest) -> u64 {
    u64::from_le_bytes(d.0[..8].try_into().expect("8 bytes"))
}

/// The hash a database names a pipeline by: from its key.
pub fn pipeline_hash(key: &PipelineKey) -> u64 {
    let half = |b: &[u8; 16]| u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    half(&key.spirv) ^ half(&key.state).rotate_left(1)
}
