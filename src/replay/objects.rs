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
/// pipekeep's own: one `vkCreateShadersEXT` call, its shaders' create infos in Fossilize's
/// manner. Fossilize has no tag for shader objects, and its readers skip every tag past its own
/// (`tag < RESOURCE_COUNT`, 11 at de951cf1), so Valve's replayer reads the rest of the record
/// as ever.
pub const TAG_SHADER_OBJECTS: u32 = 0x7000;

/// Whether entries of `tag` are pipelines (compute, graphics or ray tracing) or a call of shader
/// objects: what a title builds, each kept as entries.
pub fn is_pipeline_tag(tag: u32) -> bool {
    matches!(
        tag,
        TAG_COMPUTE | TAG_GRAPHICS | TAG_RAY_TRACING | TAG_SHADER_OBJECTS
    )
}

/// Pipelines by `(tag, hash)`.
type PipelineSet = std::collections::HashSet<(u32, u64)>;

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
    pub engine_version: u32,
    pub api_version: u32,
    pub features: Value,
    /// The device's state whole, where pipekeep's record wrote it.
    pub device: Option<crate::key::desc::DeviceState>,
    /// The driver ABI (pointer size) of the process that recorded it; 0 where the database does
    /// not say (records before it did, other databases): taken as the replaying process's.
    pub abi: u32,
    /// What else of the recording process decides the driver's keys (pipekeep's record).
    pub launch: super::record::configuration::Launch,
}

/// One device configuration of a database and its pipelines (with every object).
#[derive(Debug, Clone)]
pub struct Configuration {
    /// Its application entry's hash (none where the database has no application entry).
    pub hash: Option<u64>,
    pub app: Option<AppInfo>,
    pub catalog: Catalog,
}

/// Every object of a database by kind and hash. A `None` object was malformed.
#[derive(Debug, Default, Clone)]
pub struct Catalog {
    /// The first application entry (a database of one configuration has one).
    pub app: Option<AppInfo>,
    /// Every application entry (each a device configuration), in file order, by hash.
    pub applications: Vec<(u64, AppInfo)>,
    /// Every application-blob link: `(application, tag, hash)`.
    pub links: Vec<(u64, u32, u64)>,
    pub samplers: BTreeMap<u64, Option<Value>>,
    pub set_layouts: BTreeMap<u64, Option<Value>>,
    pub pipeline_layouts: BTreeMap<u64, Option<Value>>,
    pub shader_modules: BTreeMap<u64, Option<Vec<u32>>>,
    /// Render passes with their version (1 or 2).
    pub render_passes: BTreeMap<u64, Option<(u32, Value)>>,
    pub compute: Vec<(u64, Option<Value>)>,
    pub graphics: Vec<(u64, Option<Value>)>,
    pub ray_tracing: Vec<(u64, Option<Value>)>,
    /// `vkCreateShadersEXT` calls, each one job as a pipeline is.
    pub shader_objects: Vec<(u64, Option<Value>)>,
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
                let app = AppInfo {
                    name: text("applicationName"),
                    version: num("applicationVersion"),
                    engine: text("engineName"),
                    engine_version: num("engineVersion"),
                    api_version: num("apiVersion"),
                    features: doc
                        .get("physicalDeviceFeatures")
                        .cloned()
                        .unwrap_or(Value::Null),
                    device: doc
                        .get(super::record::configuration::DEVICE_KEY)
                        .and_then(super::record::configuration::device_from_json),
                    abi: doc
                        .get(super::record::configuration::ABI_KEY)
                        .and_then(Value::as_u64)
                        .map_or(0, |a| a as u32),
                    launch: super::record::configuration::Launch::from_json(
                        doc.get(super::record::configuration::LAUNCH_KEY),
                    ),
                };
                if self.app.is_none() {
                    self.app = Some(app.clone());
                }
                self.applications.push((hash, app));
            }
            TAG_LINK => {
                let link = doc.get("link").ok_or("a link entry without its link")?;
                let hex = |k: &str| parse_ref(&link[k]).ok_or(format!("link without its {k}"));
                let tag = link["tag"].as_u64().ok_or("link without its tag")? as u32;
                self.links.push((hex("application")?, tag, hex("hash")?));
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
            TAG_RAY_TRACING => self.ray_tracing.push((
                hash,
                Some(object(&doc, &["raytracingPipelines"])?.1.clone()),
            )),
            TAG_SHADER_OBJECTS => {
                let call = object(&doc, &["shaderObjects"])?.1;
                // Its configuration is named in its own document, not by a Fossilize link.
                let app = call.get("application").and_then(parse_ref);
                let app = app.ok_or("a call of shader objects without its configuration")?;
                self.links.push((app, TAG_SHADER_OBJECTS, hash));
                self.shader_objects.push((hash, Some(call.clone())));
            }
            _ => {} // kinds that make no pipeline
        }
        Ok(())
    }

    /// How many pipelines it holds, of every kind (malformed ones too), a call of shader objects
    /// counted as one.
    pub fn pipelines(&self) -> usize {
        self.compute.len()
            + self.graphics.len()
            + self.ray_tracing.len()
            + self.shader_objects.len()
    }

    /// Every pipeline as `(tag, hash)`.
    fn pipeline_names(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let of = |tag: u32| move |(h, _): &(u64, Option<Value>)| (tag, *h);
        (self.compute.iter().map(of(TAG_COMPUTE)))
            .chain(self.graphics.iter().map(of(TAG_GRAPHICS)))
            .chain(self.ray_tracing.iter().map(of(TAG_RAY_TRACING)))
            .chain(self.shader_objects.iter().map(of(TAG_SHADER_OBJECTS)))
    }

    /// The pipelines `keep` takes (`(tag, hash)`), of every kind.
    fn retain_pipelines(&mut self, mut keep: impl FnMut(u32, u64) -> bool) {
        self.compute.retain(|(h, _)| keep(TAG_COMPUTE, *h));
        self.graphics.retain(|(h, _)| keep(TAG_GRAPHICS, *h));
        self.ray_tracing.retain(|(h, _)| keep(TAG_RAY_TRACING, *h));
        self.shader_objects
            .retain(|(h, _)| keep(TAG_SHADER_OBJECTS, *h));
    }

    /// The catalog with only the pipelines `keep` takes (`(tag, hash)`), every object kept.
    pub fn with_pipelines(&self, keep: impl Fn(u32, u64) -> bool) -> Catalog {
        let mut c = self.clone();
        c.retain_pipelines(keep);
        c
    }

    /// The catalog's device configurations, each with its pipelines: one a linked application
    /// entry. A database without links (Fossilize's own of one application, an older pipekeep
    /// record) is one configuration, its first application; a pipeline linked to no application
    /// entry of the database goes with the first (with none whole: every pipeline goes under an
    /// unknown configuration, as in a database of none). A configuration with no pipeline is left
    /// out; malformed entries are counted in the first one given.
    /// Pipelines linked only to application entries the database does not hold whole (damaged):
    /// their device configuration is not known, so no configuration of [`Catalog::configurations`]
    /// takes them (the application's own background rebuild, which knows its device, does).
    pub fn orphans(&self) -> usize {
        let (linked, under_known) = self.linked_pipelines();
        self.pipeline_names()
            .filter(|p| linked.contains(p) && !under_known.contains(p))
            .count()
    }

    /// Every linked pipeline `(tag, hash)`, and those linked to an application entry held whole.
    fn linked_pipelines(&self) -> (PipelineSet, PipelineSet) {
        let known: std::collections::HashSet<u64> =
            self.applications.iter().map(|(h, _)| *h).collect();
        let linked = self.links.iter().map(|(_, t, h)| (*t, *h)).collect();
        let under_known = self
            .links
            .iter()
            .filter(|(a, _, _)| known.contains(a))
            .map(|(_, t, h)| (*t, *h))
            .collect();
        (linked, under_known)
    }

    pub fn configurations(&self) -> Vec<Configuration> {
        // No links: one configuration (Fossilize's own database, an older record).
        if self.links.is_empty() {
            return vec![Configuration {
                hash: self.applications.first().map(|(h, _)| *h),
                app: self.app.clone(),
                catalog: self.clone(),
            }];
        }
        // A pipeline linked only to damaged application entries goes under none ([`orphans`]).
        let (linked, _) = self.linked_pipelines();
        if self.applications.is_empty() {
            // No application entry left whole: what is linked to none goes under an unknown one.
            return vec![Configuration {
                hash: None,
                app: self.app.clone(),
                catalog: self.with_pipelines(|tag, hash| !linked.contains(&(tag, hash))),
            }];
        }
        let known: std::collections::HashSet<u64> =
            self.applications.iter().map(|(h, _)| *h).collect();
        let mut under: std::collections::HashMap<(u32, u64), Vec<u64>> = Default::default();
        for (app, tag, hash) in &self.links {
            if known.contains(app) {
                under.entry((*tag, *hash)).or_default().push(*app);
            }
        }
        let first = self.applications.first().map(|(h, _)| *h);
        let mut out: Vec<Configuration> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (app_hash, app) in &self.applications {
            if !seen.insert(*app_hash) {
                continue;
            }
            let is_first = Some(*app_hash) == first;
            let mut catalog = self.with_pipelines(|tag, hash| match under.get(&(tag, hash)) {
                Some(apps) => apps.contains(app_hash),
                None => is_first && !linked.contains(&(tag, hash)),
            });
            catalog.problems.clear();
            // A configuration whose pipelines all went (compacted away) is not made for nothing.
            if catalog.pipelines() == 0 {
                continue;
            }
            out.push(Configuration {
                hash: Some(*app_hash),
                app: Some(app.clone()),
                catalog,
            });
        }
        if out.is_empty() {
            // No pipeline at all: one configuration, to say what is malformed.
            out.push(Configuration {
                hash: first,
                app: self.app.clone(),
                catalog: self.with_pipelines(|_, _| false),
            });
        }
        out[0].catalog.problems = self.problems.clone();
        out
    }

    /// The catalog with the pipelines of the configuration `hashes` name only (and those linked to
    /// no configuration; all where it has no links), and the hashes of the pipelines it left out
    /// (other configurations'; their calls of shader objects not among them).
    pub fn into_configuration(mut self, hashes: &[u64]) -> (Catalog, Vec<u64>) {
        if self.links.is_empty() {
            return (self, Vec::new());
        }
        let mut under: std::collections::HashMap<(u32, u64), bool> = Default::default();
        for (app, tag, h) in &self.links {
            *under.entry((*tag, *h)).or_default() |= hashes.contains(app);
        }
        let mut left_out = Vec::new();
        let keep = |tag: u32, h: u64| {
            let mine = under.get(&(tag, h)).copied().unwrap_or(true);
            // A call of shader objects is named apart from its entries' keys: whether another
            // configuration's are kept here cannot be told from the entries' names, so they
            // do not keep the record owed (each costs its application one compile, at most).
            if !mine && tag != TAG_SHADER_OBJECTS {
                left_out.push(h);
            }
            mine
        };
        self.retain_pipelines(keep);
        (self, left_out)
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
            TAG_RAY_TRACING => self.ray_tracing.push((hash, None)),
            TAG_SHADER_OBJECTS => self.shader_objects.push((hash, None)),
            _ => {}
        }
    }
}
