//! A database's entries, parsed: each payload's JSON document (and a shader module's SPIR-V)
//! filed by kind and object hash. A malformed entry is recorded with its name and the reason,
//! and whatever depends on it is skipped later with that reason.

use std::collections::BTreeMap;

use serde_json::Value;

use super::foz::Entry;
use super::varint;

pub const TAG_APPLICATION: u32 = 0;
pub const TAG_SAMPLER: u32 = 1;
pub const TAG_SET_LAYOUT: u32 = 2;
pub const TAG_PIPELINE_LAYOUT: u32 = 3;
pub const TAG_SHADER_MODULE: u32 = 4;
pub const TAG_RENDER_PASS: u32 = 5;
pub const TAG_GRAPHICS: u32 = 6;
pub const TAG_COMPUTE: u32 = 7;
pub const TAG_LINK: u32 = 8;
pub const TAG_RAY_TRACING: u32 = 9;

/// A malformed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub entry: String,
    pub reason: String,
}

/// The recorded application: its name, version, API and the features it enabled.
#[derive(Debug, Clone, Default)]
pub struct AppInfo {
    pub name: Option<String>,
    pub version: u32,
    pub engine: Option<String>,
    pub api_version: u32,
    pub features: Value,
    /// The device's state whole, where pipekeep's record wrote it.
    pub device: Option<crate::key::desc::DeviceState>,
}

/// Every object of a database by kind and hash. A `None` object was malformed.
#[derive(Debug, Default)]
pub struct Catalog {
    pub app: Option<AppInfo>,
    pub samplers: BTreeMap<u64, Option<Value>>,
    pub set_layouts: BTreeMap<u64, Option<Value>>,
    pub pipeline_layouts: BTreeMap<u64, Option<Value>>,
    pub shader_modules: BTreeMap<u64, Option<Vec<u32>>>,
    /// Render passes with their version (1 or 2).
    pub render_passes: BTreeMap<u64, Option<(u32, Value)>>,
    pub compute: Vec<(u64, Option<Value>)>,
    pub graphics: Vec<(u64, Option<Value>)>,
    pub ray_tracing: usize,
    pub problems: Vec<Problem>,
}

/// The object hash written as 16 hex digits in a reference.
pub fn parse_ref(v: &Value) -> Option<u64> {
    v.as_str().and_then(|s| u64::from_str_radix(s, 16).ok())
}

/// Splits a payload into its JSON document and the object's create info.
fn document(payload: &[u8]) -> Result<(Value, &[u8]), String> {
    let end = payload
        .iter()
        .position(|b| *b == 0)
        .unwrap_or(payload.len());
    let doc: Value =
        serde_json::from_slice(&payload[..end]).map_err(|e| format!("bad JSON: {e}"))?;
    let rest = payload.get(end + 1..).unwrap_or(&[]);
    Ok((doc, rest))
}

/// The one `{"<hash>": {...}}` object under `kind` in a document.
fn object<'a>(doc: &'a Value, kinds: &[&'a str]) -> Result<(&'a str, &'a Value), String> {
    let (kind, map) = kinds
        .iter()
        .find_map(|k| doc.get(*k).map(|m| (*k, m)))
        .ok_or_else(|| format!("no {} object in the document", kinds.join(" or ")))?;
    let map = map
        .as_object()
        .ok_or_else(|| format!("{kind} is not an object"))?;
    map.values()
        .next()
        .map(|v| (kind, v))
        .ok_or_else(|| format!("{kind} is empty"))
}

fn module_code(info: &Value, binary: &[u8]) -> Result<Vec<u32>, String> {
    let field = |k: &str| {
        info.get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("shader module has no {k}"))
    };
    let (code_size, offset, size) = (
        field("codeSize")?,
        field("varintOffset")?,
        field("varintSize")?,
    );
    if code_size == 0 || code_size % 4 != 0 {
        return Err(format!(
            "codeSize {code_size} is not a positive multiple of 4"
        ));
    }
    let end = offset
        .checked_add(size)
        .filter(|e| *e <= binary.len() as u64)
        .ok_or("varint data runs past the payload")?;
    varint::decode(
        &binary[offset as usize..end as usize],
        (code_size / 4) as usize,
    )
    .map_err(|e| format!("SPIR-V varints: {e}"))
}

impl Catalog {
    pub fn from_entries(entries: Vec<Entry>) -> Catalog {
        let mut c = Catalog::default();
        for e in entries {
            let parsed = e
                .payload
                .map_err(|err| err.to_string())
                .and_then(|p| c.file(e.tag, e.hash, &p));
            if let Err(reason) = parsed {
                c.mark_malformed(e.tag, e.hash);
                c.problems.push(Problem {
                    entry: e.name,
                    reason,
                });
            }
        }
        c
    }

    fn file(&mut self, tag: u32, hash: u64, payload: &[u8]) -> Result<(), String> {
        let (doc, binary) = document(payload)?;
        match tag {
            TAG_APPLICATION => {
                let info = doc.get("applicationInfo").unwrap_or(&Value::Null);
                let text = |k: &str| info.get(k).and_then(Value::as_str).map(str::to_owned);
                let num = |k: &str| info.get(k).and_then(Value::as_u64).unwrap_or(0) as u32;
                self.app = Some(AppInfo {
                    name: text("applicationName"),
                    version: num("applicationVersion"),
                    engine: text("engineName"),
                    api_version: num("apiVersion"),
                    features: doc
                        .get("physicalDeviceFeatures")
                        .cloned()
                        .unwrap_or(Value::Null),
                    device: doc
                        .get(super::record::DEVICE_KEY)
                        .and_then(super::record::device_from_json),
                });
            }
            TAG_SAMPLER => {
                self.samplers
                    .insert(hash, Some(object(&doc, &["samplers"])?.1.clone()));
            }
            TAG_SET_LAYOUT => {
                self.set_layouts
                    .insert(hash, Some(object(&doc, &["setLayouts"])?.1.clone()));
            }
            TAG_PIPELINE_LAYOUT => {
                self.pipeline_layouts
                    .insert(hash, Some(object(&doc, &["pipelineLayouts"])?.1.clone()));
            }
            TAG_SHADER_MODULE => {
                let (_, info) = object(&doc, &["shaderModules"])?;
                self.shader_modules
                    .insert(hash, Some(module_code(info, binary)?));
            }
            TAG_RENDER_PASS => {
                let (kind, info) = object(&doc, &["renderPasses", "renderPasses2"])?;
                self.render_passes.insert(
                    hash,
                    Some((if kind == "renderPasses2" { 2 } else { 1 }, info.clone())),
                );
            }
            TAG_COMPUTE => self
                .compute
                .push((hash, Some(object(&doc, &["computePipelines"])?.1.clone()))),
            TAG_GRAPHICS => self
                .graphics
                .push((hash, Some(object(&doc, &["graphicsPipelines"])?.1.clone()))),
            TAG_RAY_TRACING => self.ray_tracing += 1,
            _ => {} // links and kinds that make no pipeline
        }
        Ok(())
    }

    fn mark_malformed(&mut self, tag: u32, hash: u64) {
        match tag {
            TAG_SAMPLER => drop(self.samplers.insert(hash, None)),
            TAG_SET_LAYOUT => drop(self.set_layouts.insert(hash, None)),
            TAG_PIPELINE_LAYOUT => drop(self.pipeline_layouts.insert(hash, None)),
            TAG_SHADER_MODULE => drop(self.shader_modules.insert(hash, None)),
            TAG_RENDER_PASS => drop(self.render_passes.insert(hash, None)),
            TAG_COMPUTE => self.compute.push((hash, None)),
            TAG_GRAPHICS => self.graphics.push((hash, None)),
            _ => {}
        }
    }
}
