//! The objects pipelines name (samplers, set layouts, pipeline layouts, shader modules, render
//! passes), made from their JSON before the pipelines and destroyed after: every one first on a
//! device of the replay's own; on someone else's device (pipekeep's background rebuild, on the
//! application's), only those one pipeline names, around it ([`Wanted`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ash::vk;

use crate::sync::Unpoisoned;
use ash::vk::Handle;
use serde_json::Value;

use super::fields::{arr, f, find_next, i, only, u};
use super::Replay;
use crate::replay::objects::{parse_ref, Catalog};
use crate::replay::record::stype;

/// Makes each of `chosen` (one kind's objects); a malformed one is an error with that reason.
fn made_all<'a, V: 'a, T>(
    chosen: impl Iterator<Item = (u64, &'a Option<V>)>,
    create: impl Fn(&V) -> Result<T, String>,
) -> Vec<(u64, Result<T, String>)> {
    chosen
        .map(|(h, v)| {
            (
                h,
                v.as_ref()
                    .ok_or_else(|| "malformed entry".to_string())
                    .and_then(&create),
            )
        })
        .collect()
}

/// The set layouts a pipeline layout's or a shader object's JSON names (`setLayouts`), as made:
/// `"0000000000000000"` is NULL.
pub(super) fn set_layouts_named(
    made: &Made,
    v: &Value,
) -> Result<Vec<vk::DescriptorSetLayout>, String> {
    arr(v, "setLayouts")
        .iter()
        .map(|s| match parse_ref(s) {
            Some(0) => Ok(vk::DescriptorSetLayout::null()),
            h => h
                .and_then(|h| made.set_layouts.get(&h).copied())
                .ok_or_else(|| made.missing("set layout", h)),
        })
        .collect()
}

/// The push-constant ranges of a pipeline layout's or a shader object's JSON.
pub(super) fn push_constant_ranges(v: &Value) -> Vec<vk::PushConstantRange> {
    arr(v, "pushConstantRanges")
        .iter()
        .map(|r| {
            vk::PushConstantRange::default()
                .stage_flags(vk::ShaderStageFlags::from_raw(u(r, "stageFlags")))
                .offset(u(r, "offset"))
                .size(u(r, "size"))
        })
        .collect()
}

/// One kind's objects of `all` to make: every one, or those `wanted` names that `all` holds.
fn chosen<'a, V>(
    all: &'a BTreeMap<u64, Option<V>>,
    wanted: Option<&'a BTreeSet<u64>>,
) -> Box<dyn Iterator<Item = (u64, &'a Option<V>)> + 'a> {
    match wanted {
        None => Box::new(all.iter().map(|(h, v)| (*h, v))),
        Some(w) => Box::new(w.iter().filter_map(|h| all.get(h).map(|v| (*h, v)))),
    }
}

/// Files a made object by hash, or why it could not be made.
fn keep<T>(
    made_objects: &mut HashMap<u64, T>,
    failed: &mut HashMap<u64, String>,
    hash: u64,
    made: Result<T, String>,
) {
    match made {
        Ok(x) => {
            made_objects.insert(hash, x);
        }
        Err(why) => {
            failed.insert(hash, why);
        }
    }
}

/// A pipeline's kind, in the order Valve's replayer takes them (graphics, compute, then ray
/// tracing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Kind {
    Graphics,
    Compute,
    RayTracing,
    /// A `vkCreateShadersEXT` call (pipekeep's record only).
    ShaderObjects,
}

impl Kind {
    /// Its database tag: a library is kept under it, so that a link of one kind never takes a
    /// library of the other.
    pub(super) fn tag(self) -> u32 {
        use crate::replay::objects::{
            TAG_COMPUTE, TAG_GRAPHICS, TAG_RAY_TRACING, TAG_SHADER_OBJECTS,
        };
        match self {
            Kind::Graphics => TAG_GRAPHICS,
            Kind::Compute => TAG_COMPUTE,
            Kind::RayTracing => TAG_RAY_TRACING,
            Kind::ShaderObjects => TAG_SHADER_OBJECTS,
        }
    }
}

/// The objects made for the pipelines, by hash, and why those that could not be made were not.
#[derive(Debug, Default)]
pub(super) struct Made {
    pub samplers: HashMap<u64, vk::Sampler>,
    pub set_layouts: HashMap<u64, vk::DescriptorSetLayout>,
    pub pipeline_layouts: HashMap<u64, vk::PipelineLayout>,
    pub modules: HashMap<u64, vk::ShaderModule>,
    pub render_passes: HashMap<u64, vk::RenderPass>,
    /// Why an object could not be made, by hash.
    pub failed: HashMap<u64, String>,
}

impl Made {
    pub(super) fn missing(&self, kind: &str, hash: Option<u64>) -> String {
        match hash.and_then(|h| self.failed.get(&h)) {
            Some(why) => format!("its {kind} could not be made ({why})"),
            None => format!("missing {kind}"),
        }
    }
}

/// The objects one pipeline names, by hash, through its layout down to the immutable samplers
/// of its set layouts.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Wanted {
    pub samplers: BTreeSet<u64>,
    pub set_layouts: BTreeSet<u64>,
    pub pipeline_layouts: BTreeSet<u64>,
    pub modules: BTreeSet<u64>,
    pub render_passes: BTreeSet<u64>,
}

impl Wanted {
    /// What the pipeline `info` (of `kind`) names in the catalog `c`. (Shader objects name their
    /// set layouts each, and take their code from the catalog, never from a module.)
    pub(super) fn of(c: &Catalog, info: &Value, kind: Kind) -> Wanted {
        let mut w = Wanted::default();
        let named = |v: &Value| parse_ref(v).filter(|h| *h != 0);
        let mut sets: Vec<u64> = Vec::new();
        if let Some(layout) = info.get("layout").and_then(named) {
            w.pipeline_layouts.insert(layout);
            let layout = c.pipeline_layouts.get(&layout).and_then(Option::as_ref);
            sets.extend(
                layout
                    .map_or(&[][..], |l| arr(l, "setLayouts"))
                    .iter()
                    .filter_map(named),
            );
        }
        for shader in arr(info, "createInfos") {
            sets.extend(arr(shader, "setLayouts").iter().filter_map(named));
        }
        for set in sets {
            w.set_layouts.insert(set);
            let bindings = c.set_layouts.get(&set).and_then(Option::as_ref);
            for b in bindings.map_or(&[][..], |s| arr(s, "bindings")) {
                w.samplers
                    .extend(arr(b, "immutableSamplers").iter().filter_map(named));
            }
        }
        let stages: Vec<&Value> = match kind {
            Kind::Graphics | Kind::RayTracing => arr(info, "stages").iter().collect(),
            Kind::Compute => info.get("stage").into_iter().collect(),
            Kind::ShaderObjects => Vec::new(),
        };
        w.modules.extend(
            stages
                .iter()
                .filter_map(|s| s.get("module").and_then(named)),
        );
        if kind == Kind::Graphics {
            w.render_passes
                .extend(info.get("renderPass").and_then(named));
        }
        w
    }

    /// How many samplers making these objects creates (those the catalog holds whole).
    pub(super) fn samplers_made(&self, c: &Catalog) -> usize {
        self.samplers
            .iter()
            .filter(|h| matches!(c.samplers.get(h), Some(Some(_))))
            .count()
    }
}

impl Replay {
    /// Makes the catalog's objects into `made`: every one, or only those `wanted` names.
    pub(super) unsafe fn make_objects(
        &self,
        c: &Catalog,
        made: &mut Made,
        wanted: Option<&Wanted>,
    ) {
        // In dependency order: set layouts need samplers, pipeline layouts need set layouts.
        let samplers = made_all(
            chosen(&c.samplers, wanted.map(|w| &w.samplers)),
            |v| unsafe { self.sampler(v) },
        );
        for (h, r) in samplers {
            keep(&mut made.samplers, &mut made.failed, h, r);
        }
        let set_layouts = made_all(
            chosen(&c.set_layouts, wanted.map(|w| &w.set_layouts)),
            |v| unsafe { self.set_layout(made, v) },
        );
        for (h, r) in set_layouts {
            keep(&mut made.set_layouts, &mut made.failed, h, r);
        }
        let pipeline_layouts = made_all(
            chosen(&c.pipeline_layouts, wanted.map(|w| &w.pipeline_layouts)),
            |v| unsafe { self.pipeline_layout(made, v) },
        );
        for (h, r) in pipeline_layouts {
            keep(&mut made.pipeline_layouts, &mut made.failed, h, r);
        }
        let module = |code: &Vec<u32>| unsafe {
            self.device
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(code), None)
                .map_err(|e| format!("driver error {e}"))
        };
        for (h, r) in made_all(
            chosen(&c.shader_modules, wanted.map(|w| &w.modules)),
            module,
        ) {
            keep(&mut made.modules, &mut made.failed, h, r);
        }
        let render_passes = made_all(
            chosen(&c.render_passes, wanted.map(|w| &w.render_passes)),
            |(version, v)| unsafe { self.render_pass(*version, v) },
        );
        for (h, r) in render_passes {
            keep(&mut made.render_passes, &mut made.failed, h, r);
        }
    }

    unsafe fn sampler(&self, v: &Value) -> Result<vk::Sampler, String> {
        only(v, &[stype::REDUCTION_MODE], "a sampler")?;
        let mut reduction = find_next(v, stype::REDUCTION_MODE).map(|n| {
            vk::SamplerReductionModeCreateInfo::default()
                .reduction_mode(vk::SamplerReductionMode::from_raw(i(n, "reductionMode")))
        });
        let mut ci = vk::SamplerCreateInfo::default()
            .flags(vk::SamplerCreateFlags::from_raw(u(v, "flags")))
            .mag_filter(vk::Filter::from_raw(i(v, "magFilter")))
            .min_filter(vk::Filter::from_raw(i(v, "minFilter")))
            .mipmap_mode(vk::SamplerMipmapMode::from_raw(i(v, "mipmapMode")))
            .address_mode_u(vk::SamplerAddressMode::from_raw(i(v, "addressModeU")))
            .address_mode_v(vk::SamplerAddressMode::from_raw(i(v, "addressModeV")))
            .address_mode_w(vk::SamplerAddressMode::from_raw(i(v, "addressModeW")))
            .mip_lod_bias(f(v, "mipLodBias"))
            .anisotropy_enable(u(v, "anisotropyEnable") != 0)
            .max_anisotropy(f(v, "maxAnisotropy"))
            .compare_enable(u(v, "compareEnable") != 0)
            .compare_op(vk::CompareOp::from_raw(i(v, "compareOp")))
            .min_lod(f(v, "minLod"))
            .max_lod(f(v, "maxLod"))
            .border_color(vk::BorderColor::from_raw(i(v, "borderColor")))
            .unnormalized_coordinates(u(v, "unnormalizedCoordinates") != 0);
        if let Some(reduction) = reduction.as_mut() {
            ci = ci.push_next(reduction);
        }
        // SAFETY: a valid create info.
        unsafe { self.device.create_sampler(&ci, None) }.map_err(|e| format!("driver error {e}"))
    }

    unsafe fn set_layout(&self, made: &Made, v: &Value) -> Result<vk::DescriptorSetLayout, String> {
        only(v, &[stype::BINDING_FLAGS], "a set layout")?;
        let mut sampler_lists: Vec<Vec<vk::Sampler>> = Vec::new();
        for b in arr(v, "bindings") {
            let list = arr(b, "immutableSamplers")
                .iter()
                .map(|s| {
                    parse_ref(s)
                        .and_then(|h| made.samplers.get(&h).copied())
                        .ok_or_else(|| made.missing("immutable sampler", parse_ref(s)))
                })
                .collect::<Result<Vec<_>, _>>()?;
            sampler_lists.push(list);
        }
        let bindings: Vec<vk::DescriptorSetLayoutBinding> = arr(v, "bindings")
            .iter()
            .zip(&sampler_lists)
            .map(|(b, samplers)| {
                let mut binding = vk::DescriptorSetLayoutBinding::default()
                    .binding(u(b, "binding"))
                    .descriptor_type(vk::DescriptorType::from_raw(i(b, "descriptorType")))
                    .descriptor_count(u(b, "descriptorCount"))
                    .stage_flags(vk::ShaderStageFlags::from_raw(u(b, "stageFlags")));
                if !samplers.is_empty() {
                    binding = binding.immutable_samplers(samplers);
                }
                binding
            })
            .collect();
        let flags: Vec<vk::DescriptorBindingFlags> = find_next(v, stype::BINDING_FLAGS)
            .map(|n| {
                arr(n, "bindingFlags")
                    .iter()
                    .map(|x| vk::DescriptorBindingFlags::from_raw(x.as_u64().unwrap_or(0) as u32))
                    .collect()
            })
            .unwrap_or_default();
        let mut binding_flags =
            vk::DescriptorSetLayoutBindingFlagsCreateInfo::default().binding_flags(&flags);
        let mut ci = vk::DescriptorSetLayoutCreateInfo::default()
            .flags(vk::DescriptorSetLayoutCreateFlags::from_raw(u(v, "flags")))
            .bindings(&bindings);
        if find_next(v, stype::BINDING_FLAGS).is_some() {
            ci = ci.push_next(&mut binding_flags);
        }
        // SAFETY: a valid create info.
        unsafe { self.device.create_descriptor_set_layout(&ci, None) }
            .map_err(|e| format!("driver error {e}"))
    }

    unsafe fn pipeline_layout(&self, made: &Made, v: &Value) -> Result<vk::PipelineLayout, String> {
        only(v, &[], "a pipeline layout")?;
        let sets = set_layouts_named(made, v)?;
        let ranges = push_constant_ranges(v);
        let ci = vk::PipelineLayoutCreateInfo::default()
            .flags(vk::PipelineLayoutCreateFlags::from_raw(u(v, "flags")))
            .set_layouts(&sets)
            .push_constant_ranges(&ranges);
        // SAFETY: a valid create info.
        unsafe { self.device.create_pipeline_layout(&ci, None) }
            .map_err(|e| format!("driver error {e}"))
    }

    unsafe fn render_pass(&self, version: u32, v: &Value) -> Result<vk::RenderPass, String> {
        only(v, &[], "a render pass")?;
        let attachment = |a: &Value| {
            vk::AttachmentDescription2::default()
                .flags(vk::AttachmentDescriptionFlags::from_raw(u(a, "flags")))
                .format(vk::Format::from_raw(i(a, "format")))
                .samples(vk::SampleCountFlags::from_raw(u(a, "samples")))
                .load_op(vk::AttachmentLoadOp::from_raw(i(a, "loadOp")))
                .store_op(vk::AttachmentStoreOp::from_raw(i(a, "storeOp")))
                .stencil_load_op(vk::AttachmentLoadOp::from_raw(i(a, "stencilLoadOp")))
                .stencil_store_op(vk::AttachmentStoreOp::from_raw(i(a, "stencilStoreOp")))
                .initial_layout(vk::ImageLayout::from_raw(i(a, "initialLayout")))
                .final_layout(vk::ImageLayout::from_raw(i(a, "finalLayout")))
        };
        let reference = |r: &Value| {
            vk::AttachmentReference2::default()
                .attachment(u(r, "attachment"))
                .layout(vk::ImageLayout::from_raw(i(r, "layout")))
                .aspect_mask(vk::ImageAspectFlags::from_raw(u(r, "aspectMask")))
        };
        for a in arr(v, "attachments")
            .iter()
            .chain(arr(v, "subpasses"))
            .chain(arr(v, "dependencies"))
        {
            only(a, &[], "a render pass")?;
        }
        let attachments: Vec<vk::AttachmentDescription2> =
            arr(v, "attachments").iter().map(attachment).collect();
        struct Refs {
            inputs: Vec<vk::AttachmentReference2<'static>>,
            colors: Vec<vk::AttachmentReference2<'static>>,
            resolves: Vec<vk::AttachmentReference2<'static>>,
            depth: Option<vk::AttachmentReference2<'static>>,
            preserve: Vec<u32>,
        }
        let refs: Vec<Refs> = arr(v, "subpasses")
            .iter()
            .map(|s| Refs {
                inputs: arr(s, "inputAttachments").iter().map(reference).collect(),
                colors: arr(s, "colorAttachments").iter().map(reference).collect(),
                resolves: arr(s, "resolveAttachments").iter().map(reference).collect(),
                depth: s.get("depthStencilAttachment").map(reference),
                preserve: arr(s, "preserveAttachments")
                    .iter()
                    .map(|x| x.as_u64().unwrap_or(0) as u32)
                    .collect(),
            })
            .collect();
        let subpasses: Vec<vk::SubpassDescription2> = arr(v, "subpasses")
            .iter()
            .zip(&refs)
            .map(|(s, r)| {
                let mut d = vk::SubpassDescription2::default()
                    .flags(vk::SubpassDescriptionFlags::from_raw(u(s, "flags")))
                    .pipeline_bind_point(vk::PipelineBindPoint::from_raw(i(s, "pipelineBindPoint")))
                    .view_mask(u(s, "viewMask"))
                    .input_attachments(&r.inputs)
                    .color_attachments(&r.colors)
                    .preserve_attachments(&r.preserve);
                if !r.resolves.is_empty() {
                    d = d.resolve_attachments(&r.resolves);
                }
                if let Some(depth) = r.depth.as_ref() {
                    d = d.depth_stencil_attachment(depth);
                }
                d
            })
            .collect();
        let dependencies: Vec<vk::SubpassDependency2> = arr(v, "dependencies")
            .iter()
            .map(|d| {
                vk::SubpassDependency2::default()
                    .src_subpass(u(d, "srcSubpass"))
                    .dst_subpass(u(d, "dstSubpass"))
                    .src_stage_mask(vk::PipelineStageFlags::from_raw(u(d, "srcStageMask")))
                    .dst_stage_mask(vk::PipelineStageFlags::from_raw(u(d, "dstStageMask")))
                    .src_access_mask(vk::AccessFlags::from_raw(u(d, "srcAccessMask")))
                    .dst_access_mask(vk::AccessFlags::from_raw(u(d, "dstAccessMask")))
                    .dependency_flags(vk::DependencyFlags::from_raw(u(d, "dependencyFlags")))
                    .view_offset(i(d, "viewOffset"))
            })
            .collect();
        if version == 2 {
            let masks: Vec<u32> = arr(v, "correlatedViewMasks")
                .iter()
                .map(|x| x.as_u64().unwrap_or(0) as u32)
                .collect();
            let ci = vk::RenderPassCreateInfo2::default()
                .flags(vk::RenderPassCreateFlags::from_raw(u(v, "flags")))
                .attachments(&attachments)
                .subpasses(&subpasses)
                .dependencies(&dependencies)
                .correlated_view_masks(&masks);
            // SAFETY: a valid create info.
            return unsafe { self.device.create_render_pass2(&ci, None) }
                .map_err(|e| format!("driver error {e}"));
        }
        // Version one: the same content through the version-one structures.
        type Refs1 = (
            Vec<vk::AttachmentReference>,
            Vec<vk::AttachmentReference>,
            Vec<vk::AttachmentReference>,
            Option<vk::AttachmentReference>,
        );
        let attachments1: Vec<vk::AttachmentDescription> = attachments
            .iter()
            .map(|a| vk::AttachmentDescription {
                flags: a.flags,
                format: a.format,
                samples: a.samples,
                load_op: a.load_op,
                store_op: a.store_op,
                stencil_load_op: a.stencil_load_op,
                stencil_store_op: a.stencil_store_op,
                initial_layout: a.initial_layout,
                final_layout: a.final_layout,
            })
            .collect();
        let one = |r: &vk::AttachmentReference2| vk::AttachmentReference {
            attachment: r.attachment,
            layout: r.layout,
        };
        let refs1: Vec<Refs1> = refs
            .iter()
            .map(|r| {
                (
                    r.inputs.iter().map(one).collect(),
                    r.colors.iter().map(one).collect(),
                    r.resolves.iter().map(one).collect(),
                    r.depth.as_ref().map(one),
                )
            })
            .collect();
        let subpasses1: Vec<vk::SubpassDescription> = subpasses
            .iter()
            .zip(&refs1)
            .zip(&refs)
            .map(|((s, (inputs, colors, resolves, depth)), r)| {
                let mut d = vk::SubpassDescription::default()
                    .flags(s.flags)
                    .pipeline_bind_point(s.pipeline_bind_point)
                    .input_attachments(inputs)
                    .color_attachments(colors)
                    .preserve_attachments(&r.preserve);
                if !resolves.is_empty() {
                    d = d.resolve_attachments(resolves);
                }
                if let Some(depth) = depth.as_ref() {
                    d = d.depth_stencil_attachment(depth);
                }
                d
            })
            .collect();
        let dependencies1: Vec<vk::SubpassDependency> = dependencies
            .iter()
            .map(|d| vk::SubpassDependency {
                src_subpass: d.src_subpass,
                dst_subpass: d.dst_subpass,
                src_stage_mask: d.src_stage_mask,
                dst_stage_mask: d.dst_stage_mask,
                src_access_mask: d.src_access_mask,
                dst_access_mask: d.dst_access_mask,
                dependency_flags: d.dependency_flags,
            })
            .collect();
        let ci = vk::RenderPassCreateInfo::default()
            .flags(vk::RenderPassCreateFlags::from_raw(u(v, "flags")))
            .attachments(&attachments1)
            .subpasses(&subpasses1)
            .dependencies(&dependencies1);
        // SAFETY: a valid create info.
        unsafe { self.device.create_render_pass(&ci, None) }
            .map_err(|e| format!("driver error {e}"))
    }

    /// Destroys the objects in `made`: each after every object made from it (immutable samplers
    /// last, after the set layouts and pipeline layouts naming them).
    pub(super) unsafe fn destroy_made(&self, made: &Made) {
        // SAFETY: nothing uses these objects any more (the pipelines made with them are built
        // and destroyed).
        unsafe {
            let d = &self.device;
            made.modules
                .values()
                .for_each(|x| d.destroy_shader_module(*x, None));
            made.render_passes
                .values()
                .for_each(|x| d.destroy_render_pass(*x, None));
            made.pipeline_layouts
                .values()
                .for_each(|x| d.destroy_pipeline_layout(*x, None));
            made.set_layouts
                .values()
                .for_each(|x| d.destroy_descriptor_set_layout(*x, None));
            made.samplers
                .values()
                .for_each(|x| d.destroy_sampler(*x, None));
        }
    }

    /// Destroys every object the replay made first, and its cache (not the device).
    pub(super) unsafe fn destroy(&self) {
        // SAFETY: every thread has joined; nothing uses these objects any more.
        unsafe {
            for (_, library) in self.libraries.locked().drain() {
                self.device.destroy_pipeline(library, None);
            }
            self.destroy_made(&self.made);
            if !self.app_cache.is_null() {
                self.device.destroy_pipeline_cache(self.app_cache, None);
            }
        }
    }
}
