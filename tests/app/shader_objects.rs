//! Shader objects (`--shader-objects N`, `VK_EXT_shader_object`), as zink makes its separable
//! programs: N variants, each a compute shader (specialized as the compute pipelines are), a
//! vertex and a fragment shader made alone, a vertex and fragment pair linked in one call
//! (`VK_SHADER_CREATE_LINK_STAGE_BIT_EXT`), and a call of another compute shader with that pair
//! again (one call, two kinds of shader: RADV then builds the pair otherwise). Each shader's
//! binary is asked after (`vkGetShaderBinaryDataEXT`), as an application keeping its own would,
//! and summed into a digest. Reports one JSON value.

use std::ffi::CStr;
use std::time::{Duration, Instant};

use ash::vk;

use super::{compute_spec, COMPUTE_SPV, FRAG_SPV, VERT_SPV};

pub const EXTENSION: &CStr = ash::ext::shader_object::NAME;

/// Shaders a variant makes: compute, vertex, fragment, the linked pair, and another compute
/// shader with the pair.
pub const SHADERS_A_VARIANT: u32 = 8;

/// The layouts the shaders name, made and destroyed with them.
struct Layouts {
    sampler: vk::Sampler,
    storage: vk::DescriptorSetLayout,
    textured: vk::DescriptorSetLayout,
}

impl Layouts {
    unsafe fn new(device: &ash::Device) -> Layouts {
        // SAFETY (whole body): valid create infos on a live device.
        unsafe {
            let sampler = device
                .create_sampler(&vk::SamplerCreateInfo::default().max_lod(1.0), None)
                .expect("vkCreateSampler");
            let samplers = [sampler];
            let textured = super::textured_binding(&samplers);
            let set = |bindings: &[vk::DescriptorSetLayoutBinding]| {
                let ci = vk::DescriptorSetLayoutCreateInfo::default().bindings(bindings);
                device
                    .create_descriptor_set_layout(&ci, None)
                    .expect("vkCreateDescriptorSetLayout")
            };
            Layouts {
                storage: set(&super::storage_binding()),
                textured: set(&textured),
                sampler,
            }
        }
    }

    unsafe fn destroy(&self, device: &ash::Device) {
        // SAFETY: objects of this device no shader needs any more.
        unsafe {
            device.destroy_descriptor_set_layout(self.storage, None);
            device.destroy_descriptor_set_layout(self.textured, None);
            device.destroy_sampler(self.sampler, None);
        }
    }
}

/// Makes `variants` variants' shaders, asks each one's binary, destroys them.
pub fn make(instance: &ash::Instance, device: &ash::Device, variants: u32) -> serde_json::Value {
    let fns = ash::ext::shader_object::Device::new(instance, device);
    // SAFETY: a device made with the extension and its feature.
    let layouts = unsafe { Layouts::new(device) };
    let (mut made, mut failed, mut binary_ok, mut binary_bytes) = (0u32, 0u32, 0u32, 0usize);
    let mut binary_digest = 0u64;
    let mut creation = Duration::ZERO;
    let mut shaders = Vec::new();
    for v in 0..variants {
        let variant = variant(&layouts, v);
        let specializations = variant.specializations();
        for call in variant.calls(&specializations) {
            let started = Instant::now();
            // SAFETY: create infos whose arrays outlive the call.
            let result = unsafe { fns.create_shaders(&call, None) };
            creation += started.elapsed();
            let (these, ok) = match result {
                Ok(s) => (s, true),
                Err((s, e)) => {
                    eprintln!("testapp: vkCreateShadersEXT: {e}");
                    (s, false)
                }
            };
            if !ok {
                failed += call.len() as u32;
            }
            made += these
                .iter()
                .filter(|s| **s != vk::ShaderEXT::null())
                .count() as u32;
            shaders.extend(these.into_iter().filter(|s| *s != vk::ShaderEXT::null()));
        }
    }
    for shader in &shaders {
        // SAFETY: a live shader of this device.
        if let Some(data) = unsafe { binary(&fns, *shader) } {
            binary_ok += 1;
            binary_bytes += data.len();
            binary_digest = binary_digest.wrapping_add(fnv1a(&data));
        }
        // SAFETY: a shader nobody uses any more.
        unsafe { fns.destroy_shader(*shader, None) };
    }
    // SAFETY: the shaders that named them are gone.
    unsafe { layouts.destroy(device) };
    serde_json::json!({
        "made": made, "expected": variants * SHADERS_A_VARIANT, "failed": failed,
        "creation_ms": creation.as_secs_f64() * 1e3, "binary_ok": binary_ok, "binary_bytes": binary_bytes,
        "binary_digest": format!("{binary_digest:016x}"),
    })
}

/// A shader's binary, asked into a buffer aligned to 16 bytes
/// (VUID-vkGetShaderBinaryDataEXT-None-08499).
unsafe fn binary(fns: &ash::ext::shader_object::Device, shader: vk::ShaderEXT) -> Option<Vec<u8>> {
    #[derive(Clone, Copy)]
    #[repr(C, align(16))]
    struct Block([u8; 16]);
    let get = fns.fp().get_shader_binary_data_ext;
    let device = fns.device();
    let mut size = 0usize;
    // SAFETY (whole body): the two-call idiom on a live shader.
    unsafe {
        if get(device, shader, &mut size, std::ptr::null_mut()) != vk::Result::SUCCESS {
            return None;
        }
        let mut blocks = vec![Block([0; 16]); size.div_ceil(16)];
        if get(device, shader, &mut size, blocks.as_mut_ptr().cast()) != vk::Result::SUCCESS {
            return None;
        }
        let bytes = std::slice::from_raw_parts(blocks.as_ptr().cast::<u8>(), size);
        Some(bytes.to_vec())
    }
}

/// FNV-1a of `bytes`: a binary's fingerprint (the digest sums them, in any order).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What one variant's create infos point at.
struct Variant {
    compute_code: Vec<u32>,
    vert_code: Vec<u32>,
    frag_code: Vec<u32>,
    compute_sets: [vk::DescriptorSetLayout; 2],
    graphics_sets: [vk::DescriptorSetLayout; 1],
    compute_push: [vk::PushConstantRange; 1],
    graphics_push: [vk::PushConstantRange; 1],
    compute_data: Vec<u8>,
    /// The other compute shader's: made in one call with the linked pair.
    other_compute_data: Vec<u8>,
    graphics_data: Vec<u8>,
    compute_entries: [vk::SpecializationMapEntry; 2],
    graphics_entries: [vk::SpecializationMapEntry; 1],
}

fn variant(layouts: &Layouts, v: u32) -> Variant {
    let entry = |id, offset| {
        vk::SpecializationMapEntry::default()
            .constant_id(id)
            .offset(offset)
            .size(4)
    };
    Variant {
        compute_code: super::words(COMPUTE_SPV),
        vert_code: super::words(VERT_SPV),
        frag_code: super::words(FRAG_SPV),
        compute_sets: [layouts.storage, layouts.textured],
        graphics_sets: [layouts.textured],
        compute_push: [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(4)],
        graphics_push: [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::VERTEX)
            .size(8)],
        compute_data: compute_spec(v)
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect(),
        other_compute_data: compute_spec(v + 1_000_000)
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect(),
        // A constant the graphics shaders do not declare: it changes nothing compiled (the spec
        // ignores such an entry) but makes each variant its own create info.
        graphics_data: v.to_ne_bytes().to_vec(),
        compute_entries: [entry(0, 0), entry(1, 4)],
        graphics_entries: [entry(100, 0)],
    }
}

impl Variant {
    fn specializations(&self) -> [vk::SpecializationInfo<'_>; 3] {
        [
            vk::SpecializationInfo::default()
                .map_entries(&self.compute_entries)
                .data(&self.compute_data),
            vk::SpecializationInfo::default()
                .map_entries(&self.compute_entries)
                .data(&self.other_compute_data),
            vk::SpecializationInfo::default()
                .map_entries(&self.graphics_entries)
                .data(&self.graphics_data),
        ]
    }

    /// The variant's calls: compute, vertex and fragment each alone, the linked pair, then the
    /// other compute shader with the pair.
    fn calls<'a>(
        &'a self,
        [compute_spec, other_compute_spec, graphics_spec]: &'a [vk::SpecializationInfo<'a>; 3],
    ) -> Vec<Vec<vk::ShaderCreateInfoEXT<'a>>> {
        let code = |words: &[u32]| -> &[u8] {
            // SAFETY: the words' own bytes.
            unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), words.len() * 4) }
        };
        let spirv = |stage: vk::ShaderStageFlags, words, next: vk::ShaderStageFlags| {
            vk::ShaderCreateInfoEXT::default()
                .stage(stage)
                .next_stage(next)
                .code_type(vk::ShaderCodeTypeEXT::SPIRV)
                .code(code(words))
                .name(c"main")
        };
        let compute = spirv(
            vk::ShaderStageFlags::COMPUTE,
            &self.compute_code,
            vk::ShaderStageFlags::empty(),
        )
        .set_layouts(&self.compute_sets)
        .push_constant_ranges(&self.compute_push);
        let graphics = |stage, words, next| {
            spirv(stage, words, next)
                .set_layouts(&self.graphics_sets)
                .push_constant_ranges(&self.graphics_push)
                .specialization_info(graphics_spec)
        };
        let vertex = graphics(
            vk::ShaderStageFlags::VERTEX,
            &self.vert_code,
            vk::ShaderStageFlags::FRAGMENT,
        );
        let fragment = graphics(
            vk::ShaderStageFlags::FRAGMENT,
            &self.frag_code,
            vk::ShaderStageFlags::empty(),
        );
        let linked = vk::ShaderCreateFlagsEXT::LINK_STAGE;
        vec![
            vec![compute.specialization_info(compute_spec)],
            vec![vertex],
            vec![fragment],
            vec![vertex.flags(linked), fragment.flags(linked)],
            vec![
                compute.specialization_info(other_compute_spec),
                vertex.flags(linked),
                fragment.flags(linked),
            ],
        ]
    }
}
