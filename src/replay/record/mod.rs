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
//! hashes, as Fossilize does), and each `vkCreateShadersEXT` call whole, under a tag of
//! pipekeep's own that Fossilize's readers skip ([`crate::replay::objects::TAG_SHADER_OBJECTS`]).
//!
//! Appending is crash-safe as the database format makes it: an entry cut short by a stopped
//! process is ignored by readers (and the next append goes after it, as Fossilize's own writer
//! does); a torn middle fails its CRC. Writers of several processes take `flock` on the file.

use std::sync::Arc;

use crate::key::desc::{
    ComputeDesc, GraphicsDesc, PipelineLayoutDesc, RayTracingDesc, RenderPassDesc, RenderTarget,
    SamplerDesc, SetLayoutDesc, ShaderDesc,
};
use crate::key::{Digest, PipelineKey};

mod compaction;
pub mod configuration;
mod documents;
mod file;
mod links;
pub mod stype;
#[cfg(test)]
pub(crate) mod tests;

pub use compaction::{live_part, stamps_of, within_share};
pub use configuration::{
    configuration_hash, configuration_hashes, device_from_json, AppState, ApplicationInfo, Launch,
    ABI_KEY, DEVICE_KEY, LAUNCH_KEY,
};
pub use documents::{AppEntry, Batch, RecordApp};
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

/// A pipeline, or a call of shader objects, as its key captured it.
#[derive(Debug, Clone)]
pub enum Recorded {
    Compute(ComputeDesc),
    Graphics(Box<GraphicsDesc>),
    RayTracing(Box<RayTracingDesc>),
    /// Every shader of one `vkCreateShadersEXT` call, in the call's order: a replay makes the
    /// call whole, since each group's key holds the call's shape.
    ShaderObjects(Vec<ShaderDesc>),
}

impl Recorded {
    /// Every stage it compiles.
    fn stages(&self) -> Vec<&crate::key::desc::StageDesc> {
        match self {
            Recorded::Compute(d) => vec![&d.stage],
            Recorded::Graphics(d) => d.stages.iter().collect(),
            Recorded::RayTracing(d) => d.stages.iter().collect(),
            Recorded::ShaderObjects(shaders) => shaders.iter().map(|s| &s.stage).collect(),
        }
    }

    /// Each stage's code digest ([`crate::key::stage_code_key`]), each once.
    pub fn stage_codes(&self) -> Vec<[u8; 16]> {
        let mut codes: Vec<[u8; 16]> = self
            .stages()
            .into_iter()
            .map(crate::key::stage_code_key)
            .collect();
        codes.sort_unstable();
        codes.dedup();
        codes
    }

    /// The pipeline layout's digest (none for shader objects, which name their set layouts
    /// each: [`Recorded::own_set_layouts`]).
    pub fn layout(&self) -> Option<&Digest> {
        match self {
            Recorded::Compute(d) => Some(&d.layout),
            Recorded::Graphics(d) => Some(&d.layout),
            Recorded::RayTracing(d) => Some(&d.layout),
            Recorded::ShaderObjects(_) => None,
        }
    }

    /// The set layouts shader objects name (each once, NULL left out); none for a pipeline,
    /// whose layout names its own.
    pub fn own_set_layouts(&self) -> Vec<Digest> {
        let Recorded::ShaderObjects(shaders) = self else {
            return Vec::new();
        };
        let mut sets: Vec<Digest> = Vec::new();
        for set in shaders.iter().flat_map(|s| &s.layout.set_layouts) {
            if *set != Digest::NONE && !sets.contains(set) {
                sets.push(*set);
            }
        }
        sets
    }

    /// The digests of every object it names directly (modules, layout, render pass; a shader
    /// object's set layouts).
    pub fn names(&self) -> Vec<Digest> {
        let mut out: Vec<Digest> = self.stages().iter().map(|s| s.module).collect();
        out.extend(self.layout().copied());
        out.extend(self.own_set_layouts());
        if let Recorded::Graphics(d) = self {
            if let RenderTarget::Pass { pass, .. } = &d.target {
                out.push(*pass);
            }
        }
        out
    }

    /// The database tag it is written under (Fossilize's: 7 compute, 6 graphics, 9 ray tracing;
    /// pipekeep's own for shader objects).
    pub fn tag(&self) -> u32 {
        use crate::replay::objects::{
            TAG_COMPUTE, TAG_GRAPHICS, TAG_RAY_TRACING, TAG_SHADER_OBJECTS,
        };
        match self {
            Recorded::Compute(_) => TAG_COMPUTE,
            Recorded::Graphics(_) => TAG_GRAPHICS,
            Recorded::RayTracing(_) => TAG_RAY_TRACING,
            Recorded::ShaderObjects(_) => TAG_SHADER_OBJECTS,
        }
    }
}

/// A compiled pipeline (or call of shader objects: the key of the whole call with no binary
/// format) to record, with the content of every object it names.
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
