//! The objects a key needs, captured by content when they are created (applications destroy set
//! layouts right after making the pipeline layout, and modules right after the pipeline) and
//! forgotten when destroyed (handles are reused). `None` marks an object whose content the layer
//! could not read whole: pipelines that use it are unkeyable. The intercepts that fill these
//! tables are [`super::tracking`]'s.
//!
//! What the record needs of each object is kept by content digest. A module's code (tens of
//! kilobytes, made all session by emulators) is held only while a live module has it, or, for
//! code chained inline into a stage, while the call creating the pipeline lasts: a compiled
//! pipeline is recorded before its call returns, so nothing needs code past that. The other
//! objects' descriptions are small and stay with the device (a pipeline layout names set
//! layouts that are usually destroyed at once).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use ash::vk;
use ash::vk::Handle;

use super::abi::chain;
use crate::key::desc::*;
use crate::key::{self, Digest, PipelineKey, Unkeyable};
use crate::replay::record::Content;
use crate::sync::UnpoisonedRw;

/// Handle -> content, for one kind of object of one device. Keyed by the handle through
/// [`HandleHasher`]: every pipeline looks up its module and layout here, and SipHash over a
/// handle the driver chose cost more than the rest of the lookup.
pub struct Tracked<T> {
    table: RwLock<HashMap<u64, Live<T>, BuildHasherDefault<HandleHasher>>>,
    /// The table's length, kept beside it under its lock: read without the lock (the background
    /// rebuild's idle threads count the application's samplers, and never take a lock its
    /// threads take).
    live: AtomicUsize,
}

/// One handle's object: its content, and how many times the driver gave the handle that are not
/// yet destroyed. Non-dispatchable handles need not be unique (objects of one content may share
/// one), and such a handle stays valid until it is destroyed as often as it was made.
struct Live<T> {
    content: Option<T>,
    made: usize,
}

/// A hasher for handles: one multiply and a fold of the 64-bit product's halves (Fibonacci
/// hashing), enough to spread handles that are pointers or counters across a table. Not
/// for input an adversary picks: handles come from the driver.
#[derive(Default)]
pub struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b) ^ self.0.rotate_left(8));
        }
    }

    fn write_u64(&mut self, handle: u64) {
        let product = u128::from(handle ^ self.0) * 0x9E37_79B9_7F4A_7C15;
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }
}

impl<T: Clone> Tracked<T> {
    fn new() -> Self {
        Tracked {
            table: RwLock::new(HashMap::default()),
            live: AtomicUsize::new(0),
        }
    }

    /// The driver gave `handle` (again, where it lives already: counted, the content kept where
    /// this making's could not be read).
    pub(in crate::layer) fn insert(&self, handle: u64, content: Option<T>) {
        let mut table = self.table.writing();
        Self::made(&mut table, handle, content);
        self.live.store(table.len(), Ordering::Release);
    }

    fn made(
        table: &mut HashMap<u64, Live<T>, BuildHasherDefault<HandleHasher>>,
        handle: u64,
        content: Option<T>,
    ) {
        let live = table.entry(handle).or_insert(Live {
            content: None,
            made: 0,
        });
        live.made += 1;
        if content.is_some() {
            live.content = content;
        }
    }

    /// Test only: [`Tracked::insert`], then the background rebuild's stall
    /// ([`super::test_stall`]) while the table's lock is still held.
    pub(in crate::layer) fn insert_and_stall(&self, handle: u64, content: Option<T>) {
        let mut table = self.table.writing();
        Self::made(&mut table, handle, content);
        self.live.store(table.len(), Ordering::Release);
        super::test_stall::hold_here();
    }

    pub(in crate::layer) fn remove(&self, handle: u64) {
        self.take(handle);
    }

    /// One making of a handle destroyed: what it held given back (each making holds its own),
    /// the handle forgotten with its last.
    pub(in crate::layer) fn take(&self, handle: u64) -> Option<T> {
        let mut table = self.table.writing();
        let std::collections::hash_map::Entry::Occupied(mut live) = table.entry(handle) else {
            return None;
        };
        live.get_mut().made -= 1;
        let held = if live.get().made == 0 {
            live.remove().content
        } else {
            live.get().content.clone()
        };
        self.live.store(table.len(), Ordering::Release);
        held
    }

    /// [`Tracked::remove`] for a registry most handles asked of are not in (pipeline libraries,
    /// asked at every `vkDestroyPipeline`): a shared look first, the exclusive lock only for one
    /// it holds. A handle is never made and destroyed at once, so it cannot come in between.
    pub(in crate::layer) fn remove_if_held(&self, handle: u64) {
        if self.table.reading().contains_key(&handle) {
            self.remove(handle);
        }
    }

    /// How many live objects it holds (objects of one content may share a handle on some
    /// drivers, and count once), read without its lock.
    pub fn len(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// The content of a live object, or why there is none.
    pub fn get(&self, handle: u64, what: &'static str) -> Result<T, Unkeyable> {
        self.table
            .reading()
            .get(&handle)
            .and_then(|live| live.content.clone())
            .ok_or(Unkeyable::UnknownObject(what))
    }
}

/// A module's code, by digest, with the number of live modules holding it.
pub(in crate::layer) struct HeldCode {
    code: Arc<Content>,
    modules: usize,
}

/// Every tracked object of one device.
pub struct Objects {
    /// What the record needs of each object but modules, by content digest: objects are
    /// destroyed early, and the record is written later, off the pipeline's thread.
    pub contents: RwLock<HashMap<Digest, Arc<Content>>>,
    /// The code of live modules, by digest: gone with the last module holding it.
    pub(in crate::layer) code: RwLock<HashMap<Digest, HeldCode>>,
    pub modules: Tracked<Digest>,
    pub samplers: Tracked<Digest>,
    pub set_layouts: Tracked<Digest>,
    pub pipeline_layouts: Tracked<Digest>,
    pub render_passes: Tracked<Arc<RenderPassInfo>>,
    /// The module identifiers the driver gave, each with the code it names.
    pub identifiers: super::identifiers::Identifiers,
    /// Pipeline libraries (graphics and ray tracing) made through the layer, with their keys:
    /// the pipelines that link them are keyed by them. `None`: a library the layer made but
    /// could not key (a pipeline linking it is unkeyable).
    pub libraries: Tracked<KnownLibrary>,
    /// Shader objects made from kept binaries, each with its binary: the application's
    /// `vkGetShaderBinaryDataEXT` is answered with it (RADV 25.0 crashes asked for the binary of
    /// a shader made from one), as the driver gave it for the same create info.
    pub shader_binaries: Tracked<Arc<[u8]>>,
}

/// What a library the layer saw made keeps for the pipelines that link it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownLibrary {
    pub key: PipelineKey,
}

impl Objects {
    /// Keeps an object's content for the record, once a digest.
    fn keep_content(&self, digest: Digest, content: impl FnOnce() -> Content) {
        let known = self.contents.reading().contains_key(&digest);
        if !known {
            self.contents.writing().insert(digest, Arc::new(content()));
        }
    }

    /// The content of `digest`, if kept: an object's, a live module's code, or code chained
    /// inline into the pipeline this thread is creating.
    pub fn content(&self, digest: &Digest) -> Option<Arc<Content>> {
        if let Some(c) = self.contents.reading().get(digest) {
            return Some(c.clone());
        }
        if let Some(held) = self.code.reading().get(digest) {
            return Some(held.code.clone());
        }
        inline_code(digest)
    }

    /// A module was made with this code: held until its last module goes.
    fn hold_code(&self, digest: Digest, code: &[u8]) {
        if let Some(held) = self.code.writing().get_mut(&digest) {
            held.modules += 1;
            return;
        }
        // Copied with the lock released: every thread making modules waits on it.
        let words = Arc::new(module_words(code));
        self.code
            .writing()
            .entry(digest)
            .or_insert(HeldCode {
                code: words,
                modules: 0,
            })
            .modules += 1;
    }

    /// A module is destroyed: its handle forgotten, and its code with the last module holding it.
    pub(in crate::layer) fn forget_module(&self, handle: u64) {
        let Some(digest) = self.modules.take(handle) else {
            return;
        };
        let mut code = self.code.writing();
        if let Some(held) = code.get_mut(&digest) {
            held.modules -= 1;
            if held.modules == 0 {
                code.remove(&digest);
            }
        }
    }

    /// How many distinct codes live modules hold.
    #[cfg(test)]
    fn held_codes(&self) -> usize {
        self.code.reading().len()
    }
}

/// SPIR-V bytes as the record keeps a module's code.
pub(in crate::layer) fn module_words(code: &[u8]) -> Content {
    Content::Module(
        code.chunks_exact(4)
            .map(|w| u32::from_ne_bytes(w.try_into().expect("4 bytes")))
            .collect(),
    )
}

/// Code chained inline into a stage of the pipeline this thread is creating: the digest, and
/// where the application's create info holds the bytes (valid until its call returns).
struct InlineCode {
    digest: Digest,
    at: *const u8,
    len: usize,
}

thread_local! {
    /// The inline code of the pipeline calls this thread is inside, and how deep it is in them.
    static INLINE: RefCell<(usize, Vec<InlineCode>)> = const { RefCell::new((0, Vec::new())) };
}

/// One pipeline call on this thread: the inline code its stages chain is readable by
/// [`Objects::content`] until the scope ends, which it must before the call returns.
pub struct InlineCodeScope {
    held_before: usize,
    /// The scope is this thread's (its notes are thread-local): never sent to another.
    _this_thread: std::marker::PhantomData<*const ()>,
}

impl InlineCodeScope {
    pub fn open() -> InlineCodeScope {
        INLINE.with_borrow_mut(|(depth, held)| {
            *depth += 1;
            InlineCodeScope {
                held_before: held.len(),
                _this_thread: std::marker::PhantomData,
            }
        })
    }
}

impl Drop for InlineCodeScope {
    fn drop(&mut self) {
        INLINE.with_borrow_mut(|(depth, held)| {
            *depth -= 1;
            held.truncate(self.held_before);
        });
    }
}

/// Notes code chained inline, inside a pipeline call's scope (outside one nothing is noted: the
/// bytes would not outlive it).
fn note_inline_code(digest: Digest, code: &[u8]) {
    INLINE.with_borrow_mut(|(depth, held)| {
        if *depth > 0 && !held.iter().any(|c| c.digest == digest) {
            held.push(InlineCode {
                digest,
                at: code.as_ptr(),
                len: code.len(),
            });
        }
    });
}

fn inline_code(digest: &Digest) -> Option<Arc<Content>> {
    INLINE.with_borrow(|(_, held)| {
        held.iter().find(|c| c.digest == *digest).map(|c| {
            // SAFETY: noted inside a scope that ends before the pipeline call whose create info
            // holds these bytes returns; the scope is still open while it is listed.
            let code = unsafe { std::slice::from_raw_parts(c.at, c.len) };
            Arc::new(module_words(code))
        })
    })
}

impl Default for Objects {
    fn default() -> Self {
        Objects {
            contents: RwLock::default(),
            code: RwLock::default(),
            identifiers: Default::default(),
            modules: Tracked::new(),
            samplers: Tracked::new(),
            set_layouts: Tracked::new(),
            pipeline_layouts: Tracked::new(),
            render_passes: Tracked::new(),
            libraries: Tracked::new(),
            shader_binaries: Tracked::new(),
        }
    }
}

/// A slice from a Vulkan pointer and count; NULL or zero gives an empty slice.
///
/// # Safety
/// `ptr` must be NULL or point to `count` valid `T`.
pub unsafe fn slice<'a, T>(ptr: *const T, count: u32) -> &'a [T] {
    if ptr.is_null() || count == 0 {
        &[]
    } else {
        // SAFETY: the caller vouches for ptr and count.
        unsafe { std::slice::from_raw_parts(ptr, count as usize) }
    }
}

/// Refuses any `pNext` structure not in `allowed`.
///
/// # Safety
/// `p_next` must be a valid chain.
pub unsafe fn only_known(
    p_next: *const c_void,
    allowed: &[vk::StructureType],
    place: &'static str,
) -> Result<(), Unkeyable> {
    // SAFETY: as the caller vouches.
    for s in unsafe { chain(p_next) } {
        let stype = unsafe { (*s).s_type };
        if !allowed.contains(&stype) {
            return Err(Unkeyable::UnknownStructure {
                stype: stype.as_raw(),
                place,
            });
        }
    }
    Ok(())
}

/// The digest of a module's code, over exactly `codeSize` bytes, and the code.
///
/// # Safety
/// `ci` must be a valid create info.
unsafe fn module_code<'a>(
    ci: &'a vk::ShaderModuleCreateInfo,
) -> Result<(Digest, &'a [u8]), Unkeyable> {
    // A validation cache changes nothing compiled.
    unsafe {
        only_known(
            ci.p_next,
            &[vk::StructureType::SHADER_MODULE_VALIDATION_CACHE_CREATE_INFO_EXT],
            "a shader module",
        )?
    };
    if ci.p_code.is_null() || ci.code_size == 0 {
        return Err(Unkeyable::UnknownObject("shader module"));
    }
    // SAFETY: codeSize bytes at pCode, as the spec requires of the application.
    let code = unsafe { std::slice::from_raw_parts(ci.p_code as *const u8, ci.code_size) };
    Ok((key::module_digest(code), code))
}

/// The digest of a module's code.
///
/// # Safety
/// `ci` must be a valid create info.
pub unsafe fn module_digest(ci: &vk::ShaderModuleCreateInfo) -> Result<Digest, Unkeyable> {
    // SAFETY: as the caller vouches.
    unsafe { module_code(ci) }.map(|(digest, _)| digest)
}

/// A module made: its digest, its code held while it lives.
///
/// # Safety
/// `ci` must be a valid create info.
pub unsafe fn module_content(
    ci: &vk::ShaderModuleCreateInfo,
    objects: &Objects,
) -> Result<Digest, Unkeyable> {
    // SAFETY: as the caller vouches.
    let (digest, code) = unsafe { module_code(ci)? };
    objects.hold_code(digest, code);
    Ok(digest)
}

/// Code chained inline into a stage (maintenance5, graphics pipeline library parts): its digest,
/// its code readable for the record until the pipeline's call returns.
///
/// # Safety
/// `ci` must be a valid create info, alive until the pipeline call it was chained into returns.
pub unsafe fn inline_module_content(ci: &vk::ShaderModuleCreateInfo) -> Result<Digest, Unkeyable> {
    // SAFETY: as the caller vouches.
    let (digest, code) = unsafe { module_code(ci)? };
    note_inline_code(digest, code);
    Ok(digest)
}

pub unsafe fn sampler_content(
    ci: &vk::SamplerCreateInfo,
    objects: &Objects,
) -> Result<Digest, Unkeyable> {
    let mut reduction_mode = None;
    // SAFETY: the application's chain.
    for s in unsafe { chain(ci.p_next) } {
        match unsafe { (*s).s_type } {
            vk::StructureType::SAMPLER_REDUCTION_MODE_CREATE_INFO => {
                let r = unsafe { &*(s as *const vk::SamplerReductionModeCreateInfo) };
                reduction_mode = Some(r.reduction_mode.as_raw() as u32);
            }
            other => {
                return Err(Unkeyable::UnknownStructure {
                    stype: other.as_raw(),
                    place: "a sampler",
                })
            }
        }
    }
    let desc = SamplerDesc {
        flags: ci.flags.as_raw(),
        mag_filter: ci.mag_filter.as_raw() as u32,
        min_filter: ci.min_filter.as_raw() as u32,
        mipmap_mode: ci.mipmap_mode.as_raw() as u32,
        address_modes: [ci.address_mode_u, ci.address_mode_v, ci.address_mode_w]
            .map(|m| m.as_raw() as u32),
        mip_lod_bias: ci.mip_lod_bias,
        anisotropy_enable: ci.anisotropy_enable != 0,
        max_anisotropy: ci.max_anisotropy,
        compare_enable: ci.compare_enable != 0,
        compare_op: ci.compare_op.as_raw() as u32,
        min_lod: ci.min_lod,
        max_lod: ci.max_lod,
        border_color: ci.border_color.as_raw() as u32,
        unnormalized_coordinates: ci.unnormalized_coordinates != 0,
        reduction_mode,
    };
    let digest = key::sampler_digest(&desc);
    objects.keep_content(digest, || Content::Sampler(desc));
    Ok(digest)
}

pub unsafe fn set_layout_content(
    ci: &vk::DescriptorSetLayoutCreateInfo,
    objects: &Objects,
) -> Result<Digest, Unkeyable> {
    let mut binding_flags: &[vk::DescriptorBindingFlags] = &[];
    // SAFETY: the application's chain and arrays.
    for s in unsafe { chain(ci.p_next) } {
        match unsafe { (*s).s_type } {
            vk::StructureType::DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO => {
                let f = unsafe { &*(s as *const vk::DescriptorSetLayoutBindingFlagsCreateInfo) };
                binding_flags = unsafe { slice(f.p_binding_flags, f.binding_count) };
            }
            other => {
                return Err(Unkeyable::UnknownStructure {
                    stype: other.as_raw(),
                    place: "a set layout",
                })
            }
        }
    }
    let raw = unsafe { slice(ci.p_bindings, ci.binding_count) };
    let mut bindings = Vec::with_capacity(raw.len());
    for (i, b) in raw.iter().enumerate() {
        let takes_samplers = matches!(
            b.descriptor_type,
            vk::DescriptorType::SAMPLER | vk::DescriptorType::COMBINED_IMAGE_SAMPLER
        );
        let immutable_samplers = if takes_samplers && !b.p_immutable_samplers.is_null() {
            let handles = unsafe { slice(b.p_immutable_samplers, b.descriptor_count) };
            Some(
                handles
                    .iter()
                    .map(|h| objects.samplers.get(h.as_raw(), "sampler"))
                    .collect::<Result<Vec<_>, _>>()?,
            )
        } else {
            None
        };
        bindings.push(BindingDesc {
            binding: b.binding,
            descriptor_type: b.descriptor_type.as_raw() as u32,
            descriptor_count: b.descriptor_count,
            stage_flags: b.stage_flags.as_raw(),
            binding_flags: binding_flags.get(i).map_or(0, |f| f.as_raw()),
            immutable_samplers,
        });
    }
    let desc = SetLayoutDesc {
        flags: ci.flags.as_raw(),
        bindings,
    };
    let digest = key::set_layout_digest(&desc);
    objects.keep_content(digest, || Content::SetLayout(desc));
    Ok(digest)
}

pub unsafe fn pipeline_layout_content(
    ci: &vk::PipelineLayoutCreateInfo,
    objects: &Objects,
) -> Result<Digest, Unkeyable> {
    unsafe { only_known(ci.p_next, &[], "a pipeline layout")? };
    // SAFETY: the application's arrays.
    let sets = unsafe { slice(ci.p_set_layouts, ci.set_layout_count) };
    let ranges = unsafe { slice(ci.p_push_constant_ranges, ci.push_constant_range_count) };
    // A layout for pipeline libraries may leave the sets another library binds NULL (DXVK's
    // shader libraries each name only their own stage's set).
    let independent = ci
        .flags
        .contains(vk::PipelineLayoutCreateFlags::INDEPENDENT_SETS_EXT);
    let desc = PipelineLayoutDesc {
        flags: ci.flags.as_raw(),
        set_layouts: sets
            .iter()
            .map(|h| match *h {
                h if h == vk::DescriptorSetLayout::null() && independent => Ok(Digest::NONE),
                h => objects.set_layouts.get(h.as_raw(), "set layout"),
            })
            .collect::<Result<_, _>>()?,
        push_constant_ranges: ranges
            .iter()
            .map(|r| PushRange {
                stage_flags: r.stage_flags.as_raw(),
                offset: r.offset,
                size: r.size,
            })
            .collect(),
    };
    let digest = key::pipeline_layout_digest(&desc);
    objects.keep_content(digest, || Content::PipelineLayout(desc));
    Ok(digest)
}

/// A render pass's info for the pipelines, its content kept for the record.
fn kept_pass(objects: &Objects, desc: RenderPassDesc) -> RenderPassInfo {
    let info = key::render_pass_info(&desc);
    objects.keep_content(info.digest, || Content::RenderPass(desc));
    info
}

/// An attachment as content: `VkAttachmentDescription` and `VkAttachmentDescription2` share
/// these fields.
macro_rules! attachment_desc {
    ($a:expr) => {{
        let a = $a;
        AttachmentDesc {
            flags: a.flags.as_raw(),
            format: a.format.as_raw() as u32,
            samples: a.samples.as_raw(),
            load_op: a.load_op.as_raw() as u32,
            store_op: a.store_op.as_raw() as u32,
            stencil_load_op: a.stencil_load_op.as_raw() as u32,
            stencil_store_op: a.stencil_store_op.as_raw() as u32,
            initial_layout: a.initial_layout.as_raw() as u32,
            final_layout: a.final_layout.as_raw() as u32,
        }
    }};
}

/// A subpass dependency as content: `VkSubpassDependency` and `VkSubpassDependency2` share
/// these fields; only the second has a view offset.
macro_rules! dependency_desc {
    ($d:expr, $view_offset:expr) => {{
        let d = $d;
        DependencyDesc {
            src_subpass: d.src_subpass,
            dst_subpass: d.dst_subpass,
            src_stage_mask: d.src_stage_mask.as_raw(),
            dst_stage_mask: d.dst_stage_mask.as_raw(),
            src_access_mask: d.src_access_mask.as_raw(),
            dst_access_mask: d.dst_access_mask.as_raw(),
            flags: d.dependency_flags.as_raw(),
            view_offset: $view_offset,
        }
    }};
}

fn reference(r: &vk::AttachmentReference) -> AttachmentRef {
    AttachmentRef {
        attachment: r.attachment,
        layout: r.layout.as_raw() as u32,
        aspect_mask: 0,
    }
}

pub unsafe fn render_pass_content(
    ci: &vk::RenderPassCreateInfo,
    objects: &Objects,
) -> Result<RenderPassInfo, Unkeyable> {
    unsafe { only_known(ci.p_next, &[], "a render pass")? };
    // SAFETY: the application's arrays, each with its count.
    let subpasses = unsafe { slice(ci.p_subpasses, ci.subpass_count) }
        .iter()
        .map(|s| unsafe {
            SubpassDesc {
                flags: s.flags.as_raw(),
                bind_point: s.pipeline_bind_point.as_raw() as u32,
                view_mask: 0,
                inputs: slice(s.p_input_attachments, s.input_attachment_count)
                    .iter()
                    .map(reference)
                    .collect(),
                colors: slice(s.p_color_attachments, s.color_attachment_count)
                    .iter()
                    .map(reference)
                    .collect(),
                resolves: (!s.p_resolve_attachments.is_null()).then(|| {
                    slice(s.p_resolve_attachments, s.color_attachment_count)
                        .iter()
                        .map(reference)
                        .collect()
                }),
                depth_stencil: s.p_depth_stencil_attachment.as_ref().map(reference),
                preserve: slice(s.p_preserve_attachments, s.preserve_attachment_count).to_vec(),
            }
        })
        .collect();
    let dependencies = unsafe { slice(ci.p_dependencies, ci.dependency_count) }
        .iter()
        .map(|d| dependency_desc!(d, 0))
        .collect();
    Ok(kept_pass(
        objects,
        RenderPassDesc {
            version: 1,
            flags: ci.flags.as_raw(),
            attachments: unsafe { slice(ci.p_attachments, ci.attachment_count) }
                .iter()
                .map(|a| attachment_desc!(a))
                .collect(),
            subpasses,
            dependencies,
            correlated_view_masks: Vec::new(),
        },
    ))
}

pub unsafe fn render_pass2_content(
    objects: &Objects,
    ci: &vk::RenderPassCreateInfo2,
) -> Result<RenderPassInfo, Unkeyable> {
    unsafe { only_known(ci.p_next, &[], "a render pass")? };
    let reference2 = |r: &vk::AttachmentReference2| -> Result<AttachmentRef, Unkeyable> {
        unsafe { only_known(r.p_next, &[], "an attachment reference")? };
        Ok(AttachmentRef {
            attachment: r.attachment,
            layout: r.layout.as_raw() as u32,
            aspect_mask: r.aspect_mask.as_raw(),
        })
    };
    let refs =
        |p: *const vk::AttachmentReference2, n: u32| -> Result<Vec<AttachmentRef>, Unkeyable> {
            unsafe { slice(p, n) }.iter().map(reference2).collect()
        };
    let mut subpasses = Vec::new();
    // SAFETY: the application's arrays, each with its count.
    for s in unsafe { slice(ci.p_subpasses, ci.subpass_count) } {
        unsafe { only_known(s.p_next, &[], "a subpass")? };
        subpasses.push(SubpassDesc {
            flags: s.flags.as_raw(),
            bind_point: s.pipeline_bind_point.as_raw() as u32,
            view_mask: s.view_mask,
            inputs: refs(s.p_input_attachments, s.input_attachment_count)?,
            colors: refs(s.p_color_attachments, s.color_attachment_count)?,
            resolves: if s.p_resolve_attachments.is_null() {
                None
            } else {
                Some(refs(s.p_resolve_attachments, s.color_attachment_count)?)
            },
            depth_stencil: unsafe { s.p_depth_stencil_attachment.as_ref() }
                .map(reference2)
                .transpose()?,
            preserve: unsafe { slice(s.p_preserve_attachments, s.preserve_attachment_count) }
                .to_vec(),
        });
    }
    let mut attachments = Vec::new();
    for a in unsafe { slice(ci.p_attachments, ci.attachment_count) } {
        unsafe { only_known(a.p_next, &[], "an attachment")? };
        attachments.push(attachment_desc!(a));
    }
    let mut dependencies = Vec::new();
    for d in unsafe { slice(ci.p_dependencies, ci.dependency_count) } {
        unsafe { only_known(d.p_next, &[], "a subpass dependency")? };
        dependencies.push(dependency_desc!(d, d.view_offset));
    }
    Ok(kept_pass(
        objects,
        RenderPassDesc {
            version: 2,
            flags: ci.flags.as_raw(),
            attachments,
            subpasses,
            dependencies,
            correlated_view_masks: unsafe {
                slice(ci.p_correlated_view_masks, ci.correlated_view_mask_count)
            }
            .to_vec(),
        },
    ))
}

#[cfg(test)]
#[path = "objects_tests.rs"]
mod tests;
