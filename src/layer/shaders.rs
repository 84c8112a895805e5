//! Shader objects (`VK_EXT_shader_object`), kept as pipelines are: no Mesa driver caches them
//! (RADV compiles each with no cache, as Mesa's common runtime does), and zink makes its
//! separable GL programs this way, so without the layer every such shader is compiled at every
//! launch.
//!
//! A call's shaders are keyed in groups: the shaders it links (`VK_SHADER_CREATE_LINK_STAGE_BIT_EXT`,
//! which every graphics stage of the call then carries: VUID-vkCreateShadersEXT-pCreateInfos-08402)
//! are one entry, all or none; each other shader is one of its own; every key holds the stages of
//! the whole call, since a driver builds a call's shaders as the call holds them (RADV links a
//! pair only where nothing else stands beside it). Where every group is found, each is made from
//! its binaries (`VK_SHADER_CODE_TYPE_BINARY_EXT`, the rest of each create info as the application
//! gave it). Otherwise (a group missing, or one the driver will not make so:
//! `VK_INCOMPATIBLE_SHADER_BINARY_EXT` after a driver update, any error) whatever was made is
//! destroyed and the application's call is made as it asked, so it sees the driver's own answer,
//! array and binaries; each group's binaries (`vkGetShaderBinaryDataEXT`) are then kept as an
//! entry of kind `binary` under the driver's `shaderBinaryUUID` and `shaderBinaryVersion`, and
//! the call is recorded whole (`record.foz`, under pipekeep's own tag), so that a rebuild after
//! a driver change makes it again through the layer. On the background rebuild's threads a
//! compiled call's entries are written at once and counted as the rebuild's.

use std::ffi::CStr;
use std::sync::Arc;
use std::time::Instant;

use ash::vk;
use ash::vk::Handle;

use super::capture::shader_desc;
use super::device::{device_data, unrecorded_next, DeviceData};
use super::guard::guarded;
use super::idle::on_rebuild_thread;
use super::objects::module_words;
use super::pipelines::{found_entry, hold_marker_for_load, record};
use crate::key::desc::ShaderDesc;
use crate::key::{shader_objects_key, Digest, PipelineKey};
use crate::replay::record::Recorded;
use crate::store::binaries;
use crate::store::envelope::PayloadKind;
use crate::store::{FoundEntry, Store};
use crate::watch::Outcome;

const COMMAND: &CStr = c"vkCreateShadersEXT";

pub unsafe extern "system" fn create_shaders(
    device: vk::Device,
    count: u32,
    infos: *const vk::ShaderCreateInfoEXT<'_>,
    allocator: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::ShaderEXT,
) -> vk::Result {
    // SAFETY: a device created through this layer.
    let dev = unsafe { device_data(device) };
    let next = dev.as_ref().and_then(|d| d.fns.create_shaders);
    let (Some(dev), Some(next)) = (dev, next) else {
        // Its data could not be recorded: straight to the next layer, as asked.
        return match unsafe { unrecorded_next::<vk::PFN_vkCreateShadersEXT>(device, COMMAND) } {
            Some(next) => unsafe { next(device, count, infos, allocator, out) },
            None => {
                // Every element of pShaders is overwritten, whether or not the call succeeds.
                if !out.is_null() {
                    // SAFETY: count handles out, per the spec.
                    unsafe { std::slice::from_raw_parts_mut(out, count as usize) }
                        .fill(vk::ShaderEXT::null());
                }
                vk::Result::ERROR_OUT_OF_HOST_MEMORY
            }
        };
    };
    // SAFETY: the application's arguments, forwarded as received.
    let as_asked = || unsafe { next(device, count, infos, allocator, out) };
    if count == 0 || infos.is_null() || out.is_null() || !dev.works_here() {
        return as_asked();
    }
    // SAFETY: count create infos in, count handles out, per the spec.
    let infos = unsafe { std::slice::from_raw_parts(infos, count as usize) };
    let call = Call {
        dev: &dev,
        next,
        infos,
        stages: infos.iter().map(|ci| ci.stage.as_raw()).collect(),
        allocator,
    };
    guarded(
        "vkCreateShadersEXT",
        // SAFETY: count handles out.
        || unsafe { call.create(std::slice::from_raw_parts_mut(out, infos.len())) },
        || {
            // A panic midway: what the layer made so far (each shader is in `out` from the moment
            // it is made) is destroyed, and the call made as asked.
            let made = unsafe { std::slice::from_raw_parts_mut(out, infos.len()) };
            call.destroy(made);
            as_asked()
        },
    )
}

pub unsafe extern "system" fn destroy_shader(
    device: vk::Device,
    shader: vk::ShaderEXT,
    allocator: *const vk::AllocationCallbacks<'_>,
) {
    // SAFETY: a device created through this layer.
    let dev = unsafe { device_data(device) };
    if let Some(dev) = &dev {
        // Forgotten before the driver frees it: the handle may come again at once.
        let forget = || {
            dev.objects()
                .shader_binaries
                .remove_if_held(shader.as_raw())
        };
        guarded("vkDestroyShaderEXT", forget, || ());
    }
    let next = match dev.and_then(|d| d.fns.destroy_shader) {
        Some(next) => Some(next),
        None => unsafe {
            unrecorded_next::<vk::PFN_vkDestroyShaderEXT>(device, c"vkDestroyShaderEXT")
        },
    };
    if let Some(next) = next {
        // SAFETY: the application's arguments, as received.
        unsafe { next(device, shader, allocator) }
    }
}

/// `vkGetShaderBinaryDataEXT`: a shader the layer made from kept binaries answers with its
/// binary (the driver's own answer for the same create info when it compiled it); any other
/// goes to the driver.
pub unsafe extern "system" fn get_shader_binary_data(
    device: vk::Device,
    shader: vk::ShaderEXT,
    size: *mut usize,
    data: *mut std::ffi::c_void,
) -> vk::Result {
    // SAFETY: a device created through this layer.
    let dev = unsafe { device_data(device) };
    let held = |d: &Arc<DeviceData>| {
        let binary = || {
            d.objects()
                .shader_binaries
                .get(shader.as_raw(), "shader")
                .ok()
        };
        guarded("vkGetShaderBinaryDataEXT", binary, || None)
    };
    let kept = dev.as_ref().and_then(held);
    if let (Some(binary), false) = (kept, size.is_null()) {
        // SAFETY: the application's size and buffer, per the spec.
        return unsafe { answer_binary(&binary, size, data) };
    }
    let next = match dev.and_then(|d| d.fns.get_shader_binary_data) {
        Some(next) => Some(next),
        None => unsafe {
            unrecorded_next::<vk::PFN_vkGetShaderBinaryDataEXT>(device, c"vkGetShaderBinaryDataEXT")
        },
    };
    match next {
        // SAFETY: the application's arguments, as received.
        Some(next) => unsafe { next(device, shader, size, data) },
        None => vk::Result::ERROR_OUT_OF_HOST_MEMORY,
    }
}

/// The two-call answer of `vkGetShaderBinaryDataEXT` with `binary`: its size where `data` is
/// NULL; nothing written, a size of 0 and `VK_INCOMPLETE` where the buffer is too small (the
/// whole binary or nothing, as the spec says); else the binary and its size.
///
/// # Safety
/// `size` must be valid; `data` NULL or `*size` writable bytes.
unsafe fn answer_binary(
    binary: &[u8],
    size: *mut usize,
    data: *mut std::ffi::c_void,
) -> vk::Result {
    // SAFETY (whole body): as the caller vouches.
    unsafe {
        if data.is_null() {
            *size = binary.len();
            return vk::Result::SUCCESS;
        }
        if *size < binary.len() {
            *size = 0;
            return vk::Result::INCOMPLETE;
        }
        std::ptr::copy_nonoverlapping(binary.as_ptr(), data.cast::<u8>(), binary.len());
        *size = binary.len();
    }
    vk::Result::SUCCESS
}

/// One `vkCreateShadersEXT` call of the application's.
struct Call<'a> {
    dev: &'a DeviceData,
    next: vk::PFN_vkCreateShadersEXT,
    infos: &'a [vk::ShaderCreateInfoEXT<'a>],
    /// Each shader's stage, in the call's order: the call's shape, which every key holds.
    stages: Vec<u32>,
    allocator: *const vk::AllocationCallbacks<'a>,
}

/// Shaders kept together: their places in the call, and their key.
struct Group {
    members: Vec<usize>,
    key: PipelineKey,
}

impl Call<'_> {
    /// The call through the store: `out` holds every shader made, or the driver's answer to the
    /// call as asked.
    unsafe fn create(&self, out: &mut [vk::ShaderEXT]) -> vk::Result {
        out.fill(vk::ShaderEXT::null());
        let started = Instant::now();
        let (dev, n) = (self.dev, self.infos.len() as u64);
        let rebuilding = on_rebuild_thread();
        // The application compiles: the background rebuild waits for a pause, as for pipelines
        // (counted as building until this returns).
        let _building = (!rebuilding).then(|| dev.app_activity.begin());
        let counted = |outcome, r: vk::Result| {
            if !rebuilding {
                dev.watch.shaders(outcome, n, nanos(started));
            } else if r == vk::Result::SUCCESS {
                dev.watch.rebuilt();
            }
        };
        let as_asked = |outcome, out: &mut [vk::ShaderEXT]| {
            // SAFETY: the application's arguments, as it asked.
            let r = unsafe { self.make(self.infos, out) };
            counted(outcome, r);
            r
        };
        let (Some(keying), Some(store)) = (dev.shader_objects, dev.store()) else {
            return as_asked(Outcome::PassedThrough, out);
        };
        let format = keying.binary_format;
        let descs = self
            .infos
            .iter()
            // SAFETY: the application's create infos.
            .map(|ci| unsafe { shader_desc(ci, dev.objects()) })
            .collect::<Result<Vec<ShaderDesc>, _>>();
        let descs = match descs {
            Ok(d) => d,
            Err(why) => {
                tracing::debug!(%why, "shader objects not keyed; made as asked and not kept");
                return as_asked(Outcome::Unkeyed, out);
            }
        };
        let Some(groups) = self.groups(&descs, &keying.device, &format) else {
            return as_asked(Outcome::PassedThrough, out);
        };
        // SAFETY: the application's create infos; `out` has a place for each.
        if unsafe { self.made_from_entries(store, &groups, &format, out) } {
            counted(Outcome::Found, vk::Result::SUCCESS);
            return vk::Result::SUCCESS;
        }
        // A driver builds a call's shaders as the call holds them: compiled whole, as asked.
        let r = as_asked(Outcome::Compiled, out);
        if r == vk::Result::SUCCESS && !dev.keeps_no_misses(store) {
            for group in &groups {
                // SAFETY: shaders this call made.
                unsafe { self.keep(store, group, &format, out) };
            }
            self.record(&keying.device, descs);
        }
        r
    }

    /// Queues the call for the title's record, whole (a replay makes it as the application
    /// did, so that each group keys as it did), with each shader's SPIR-V as a module's content.
    /// Named by the key of the whole call with no binary format: another call never shares it
    /// (a group's key holds only its own shaders), and a driver update, which changes every
    /// group's key, does not record the call again.
    fn record(&self, device: &Digest, descs: Vec<ShaderDesc>) {
        let whole: Vec<&ShaderDesc> = descs.iter().collect();
        let key = shader_objects_key(device, &[], &self.stages, &whole);
        let mut codes = Vec::with_capacity(descs.len());
        for (ci, desc) in self.infos.iter().zip(&descs) {
            // SAFETY: codeSize bytes at pCode (SPIR-V, a multiple of 4: checked by the key).
            let code = unsafe { std::slice::from_raw_parts(ci.p_code.cast::<u8>(), ci.code_size) };
            codes.push((desc.stage.module, Arc::new(module_words(code))));
        }
        record(self.dev, key, Recorded::ShaderObjects(descs), codes);
    }

    /// The call's shaders in the groups they are kept in, keyed: those it links together, and
    /// each other one alone. None where a single shader is flagged to link beside others (valid
    /// beside a compute shader): made alone from its binary it would reach the driver with the
    /// flag in a call of one, which VUID-vkCreateShadersEXT-pCreateInfos-08401 forbade.
    fn groups(&self, descs: &[ShaderDesc], device: &Digest, format: &[u8]) -> Option<Vec<Group>> {
        let links = |i: &usize| {
            self.infos[*i]
                .flags
                .contains(vk::ShaderCreateFlagsEXT::LINK_STAGE)
        };
        let (linked, alone): (Vec<usize>, Vec<usize>) = (0..self.infos.len()).partition(links);
        if linked.len() == 1 && !alone.is_empty() {
            return None;
        }
        let key = |members: &[usize]| {
            let of: Vec<&ShaderDesc> = members.iter().map(|i| &descs[*i]).collect();
            shader_objects_key(device, format, &self.stages, &of)
        };
        let mut groups: Vec<Group> = alone
            .into_iter()
            .map(|i| Group {
                key: key(&[i]),
                members: vec![i],
            })
            .collect();
        if !linked.is_empty() {
            groups.push(Group {
                key: key(&linked),
                members: linked,
            });
        }
        Some(groups)
    }

    /// Every group made from its entry's binaries, put in `out`, where every group has one
    /// (looked up first: none is made for a call that compiles whole); where the driver will not
    /// make one so, what was made of the others is destroyed, and false. The entries used are
    /// stamped only where the whole call was made from them.
    unsafe fn made_from_entries(
        &self,
        store: &Arc<Store>,
        groups: &[Group],
        format: &[u8],
        out: &mut [vk::ShaderEXT],
    ) -> bool {
        let found: Option<Vec<FoundEntry>> =
            groups.iter().map(|g| found_entry(store, &g.key)).collect();
        let Some(found) = found else {
            return false;
        };
        for (group, entry) in groups.iter().zip(&found) {
            // SAFETY: as the caller vouches.
            if let Err(why) = unsafe { self.made_from_entry(store, group, entry, format, out) } {
                tracing::debug!(entry = %group.key.file_name(), why, "shader objects not made from their entry; the call compiles");
                self.destroy(out);
                return false;
            }
        }
        for entry in found {
            self.dev.writer.stamp(store.clone(), entry.into_stamp());
        }
        true
    }

    /// A group made from its entry's binaries, each shader put in `out` the moment it is made.
    unsafe fn made_from_entry(
        &self,
        store: &Arc<Store>,
        group: &Group,
        entry: &FoundEntry,
        format: &[u8],
        out: &mut [vk::ShaderEXT],
    ) -> Result<(), &'static str> {
        // A crash inside the driver while it loads these binaries blames this entry.
        let marker = hold_marker_for_load(store, entry);
        // SAFETY: the group's places in the application's call.
        let made = unsafe { self.make_from(entry, group, format, out) };
        drop(marker);
        made
    }

    /// The driver's shaders of `group`, made from `entry`'s binaries (each create info as the
    /// application gave it but its code), put in `out` at once, each with its binary held.
    unsafe fn make_from(
        &self,
        entry: &FoundEntry,
        group: &Group,
        format: &[u8],
        out: &mut [vk::ShaderEXT],
    ) -> Result<(), &'static str> {
        entry.with_data(|data| {
            // Checked whole at lookup.
            let parsed = binaries::parse(data).map_err(|_| "not binaries")?;
            if parsed.driver_key != format {
                return Err("another shaderBinaryUUID or shaderBinaryVersion");
            }
            if parsed.binaries.len() != group.members.len() {
                return Err("another number of shaders");
            }
            // pCode of a binary is aligned to 16 bytes (VUID-VkShaderCreateInfoEXT-pCode-08492).
            let codes: Vec<Vec<Aligned>> =
                parsed.binaries.iter().map(|b| aligned(b.data)).collect();
            let mut copies = Vec::with_capacity(codes.len());
            for ((i, binary), code) in group.members.iter().zip(&parsed.binaries).zip(&codes) {
                let info = self.infos[*i];
                if binary.key != stage_key(&info) {
                    return Err("another stage");
                }
                copies.push(vk::ShaderCreateInfoEXT {
                    code_type: vk::ShaderCodeTypeEXT::BINARY,
                    code_size: binary.data.len(),
                    p_code: code.as_ptr().cast(),
                    ..info
                });
            }
            let mut made = vec![vk::ShaderEXT::null(); copies.len()];
            // SAFETY: the application's create infos with the kept code, alive for the call.
            let r = unsafe { self.make(&copies, &mut made) };
            if r != vk::Result::SUCCESS {
                self.destroy(&mut made);
                return Err("the driver would not make them from their binaries");
            }
            for (i, shader) in group.members.iter().zip(&made) {
                out[*i] = *shader;
            }
            let held = &self.dev.objects().shader_binaries;
            for (shader, binary) in made.iter().zip(&parsed.binaries) {
                held.insert(shader.as_raw(), Some(Arc::from(binary.data)));
            }
            Ok(())
        })
    }

    /// Keeps a compiled group's binaries as one entry (none where the driver gives no binary of
    /// one of them).
    unsafe fn keep(&self, store: &Arc<Store>, group: &Group, format: &[u8], out: &[vk::ShaderEXT]) {
        let Some(get) = self.dev.fns.get_shader_binary_data else {
            return;
        };
        let mut codes = Vec::with_capacity(group.members.len());
        for i in &group.members {
            // SAFETY: a shader this call made.
            match unsafe { binary_data(self.dev.handle, get, out[*i]) } {
                Some(code) => codes.push((stage_key(&self.infos[*i]), code)),
                None => {
                    tracing::debug!(entry = %group.key.file_name(), "the driver gave no binary of a shader object; not kept");
                    return;
                }
            }
        }
        let payload = binaries::encode(format, codes.iter().map(|(k, c)| (&k[..], &c[..])));
        let kind = PayloadKind::Binaries;
        self.dev
            .writer
            .write(store.clone(), group.key, kind, payload, None);
    }

    /// The driver's `vkCreateShadersEXT`.
    unsafe fn make(
        &self,
        infos: &[vk::ShaderCreateInfoEXT<'_>],
        out: &mut [vk::ShaderEXT],
    ) -> vk::Result {
        // SAFETY: as the caller vouches; one handle out for each create info.
        unsafe {
            (self.next)(
                self.dev.handle,
                infos.len() as u32,
                infos.as_ptr(),
                self.allocator,
                out.as_mut_ptr(),
            )
        }
    }

    /// Destroys every shader in `made` and leaves NULL in its place, the binary the layer holds
    /// for one it made from an entry forgotten first (the handle may come again at once).
    fn destroy(&self, made: &mut [vk::ShaderEXT]) {
        let Some(destroy) = self.dev.fns.destroy_shader else {
            return;
        };
        let held = &self.dev.objects().shader_binaries;
        for shader in made.iter_mut().filter(|s| **s != vk::ShaderEXT::null()) {
            held.remove_if_held(shader.as_raw());
            // SAFETY: a shader the layer made in this call, which the application never saw.
            unsafe { destroy(self.dev.handle, *shader, self.allocator) };
            *shader = vk::ShaderEXT::null();
        }
    }
}

/// A shader's binary as the driver gives it (`vkGetShaderBinaryDataEXT`, size first).
///
/// # Safety
/// `shader` must be a live shader of `device`.
unsafe fn binary_data(
    device: vk::Device,
    get: vk::PFN_vkGetShaderBinaryDataEXT,
    shader: vk::ShaderEXT,
) -> Option<Vec<u8>> {
    let mut size = 0usize;
    // SAFETY: the two-call idiom on the next layer's command.
    let r = unsafe { get(device, shader, &mut size, std::ptr::null_mut()) };
    if r != vk::Result::SUCCESS || size == 0 {
        return None;
    }
    // pData is aligned to 16 bytes (VUID-vkGetShaderBinaryDataEXT-None-08499).
    let mut buffer = vec![Aligned([0; 16]); size.div_ceil(16)];
    let r = unsafe { get(device, shader, &mut size, buffer.as_mut_ptr().cast()) };
    (r == vk::Result::SUCCESS && size > 0).then(|| bytes_of(&buffer)[..size].to_vec())
}

/// The key a shader's binary carries in its entry: its stage, so an entry is made only into the
/// stages it was kept from.
fn stage_key(info: &vk::ShaderCreateInfoEXT<'_>) -> [u8; 4] {
    info.stage.as_raw().to_le_bytes()
}

/// Sixteen bytes aligned to 16, as shader binaries are passed (`pCode`, `pData`).
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Aligned([u8; 16]);

/// `bytes` in memory aligned to 16 bytes.
fn aligned(bytes: &[u8]) -> Vec<Aligned> {
    let mut blocks = vec![Aligned([0; 16]); bytes.len().div_ceil(16)];
    for (block, chunk) in blocks.iter_mut().zip(bytes.chunks(16)) {
        block.0[..chunk.len()].copy_from_slice(chunk);
    }
    blocks
}

/// The bytes of aligned blocks.
fn bytes_of(blocks: &[Aligned]) -> &[u8] {
    // SAFETY: plain bytes, as many as the blocks hold.
    unsafe { std::slice::from_raw_parts(blocks.as_ptr().cast::<u8>(), blocks.len() * 16) }
}

fn nanos(since: Instant) -> u64 {
    since.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_copies_hold_the_bytes_at_a_16_byte_boundary() {
        let bytes: Vec<u8> = (0..37).collect();
        let blocks = aligned(&bytes);
        assert_eq!(blocks.as_ptr() as usize % 16, 0);
        assert_eq!(&bytes_of(&blocks)[..bytes.len()], &bytes[..]);
    }
}
