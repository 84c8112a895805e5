//! A recorded `vkCreateShadersEXT` call (pipekeep's own tag) made again: every shader's
//! `VkShaderCreateInfoEXT` from its JSON, its SPIR-V from the catalog's module of that hash, its
//! set layouts as made for it; the call alone timed, every shader destroyed after.

use std::ffi::{CStr, CString};
use std::time::{Duration, Instant};

use ash::vk;
use serde_json::Value;

use super::fields::{arr, only, u};
use super::objects::{push_constant_ranges, set_layouts_named, Made};
use super::pipelines::{entry_point, required_subgroup_size, Specialization};
use super::{Replay, NO_SHADER_OBJECTS};
use crate::replay::objects::{parse_ref, Catalog};
use crate::replay::record::stype;

/// The device's shader-object commands, where it has `VK_EXT_shader_object` on.
#[derive(Clone, Copy)]
pub struct ShaderCommands {
    pub create: vk::PFN_vkCreateShadersEXT,
    pub destroy: vk::PFN_vkDestroyShaderEXT,
}

impl ShaderCommands {
    /// `vkCreateShadersEXT` and `vkDestroyShaderEXT` as `command` gives them by name (a device's
    /// `vkGetDeviceProcAddr`, or a layer's own table), where it gives both.
    ///
    /// # Safety
    /// `command` must give, for each name, that command of one live device, or none.
    pub unsafe fn load(
        mut command: impl FnMut(&CStr) -> vk::PFN_vkVoidFunction,
    ) -> Option<ShaderCommands> {
        let create = command(c"vkCreateShadersEXT")?;
        let destroy = command(c"vkDestroyShaderEXT")?;
        // SAFETY: the commands of those names have those signatures (vkGetDeviceProcAddr's
        // contract).
        unsafe {
            Some(ShaderCommands {
                create: std::mem::transmute::<
                    unsafe extern "system" fn(),
                    vk::PFN_vkCreateShadersEXT,
                >(create),
                destroy: std::mem::transmute::<
                    unsafe extern "system" fn(),
                    vk::PFN_vkDestroyShaderEXT,
                >(destroy),
            })
        }
    }
}

/// One shader's data (its code the catalog's), from which its create info is built.
struct ShaderData<'a> {
    stage: vk::ShaderStageFlags,
    next_stage: vk::ShaderStageFlags,
    flags: vk::ShaderCreateFlagsEXT,
    /// SPIR-V words: `pCode` aligned to 4 bytes, as SPIR-V is passed.
    code: &'a [u32],
    name: CString,
    set_layouts: Vec<vk::DescriptorSetLayout>,
    push_constant_ranges: Vec<vk::PushConstantRange>,
    spec: Specialization,
    required_subgroup_size: Option<u32>,
}

impl<'a> ShaderData<'a> {
    fn read(
        r: &Replay,
        made: &Made,
        catalog: &'a Catalog,
        s: &Value,
    ) -> Result<ShaderData<'a>, String> {
        only(s, &[stype::REQUIRED_SUBGROUP_SIZE], "a shader object")?;
        if u(s, "codeType") != vk::ShaderCodeTypeEXT::SPIRV.as_raw() as u32 {
            return Err("a shader object whose code is not SPIR-V".into());
        }
        let h = s.get("module").and_then(parse_ref);
        let words = h
            .and_then(|h| catalog.shader_modules.get(&h))
            .and_then(Option::as_ref)
            .ok_or_else(|| made.missing("shader module", h))?;
        let set_layouts = set_layouts_named(made, s)?;
        let push_constant_ranges = push_constant_ranges(s);
        let stage = vk::ShaderStageFlags::from_raw(u(s, "stage"));
        Ok(ShaderData {
            stage,
            next_stage: vk::ShaderStageFlags::from_raw(u(s, "nextStage")),
            flags: vk::ShaderCreateFlagsEXT::from_raw(u(s, "flags")),
            code: words,
            name: entry_point(s)?,
            set_layouts,
            push_constant_ranges,
            spec: Specialization::read(s)?,
            required_subgroup_size: required_subgroup_size(r, s, stage)?,
        })
    }

    fn info<'b>(
        &'b self,
        subgroup: &'b mut vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo<'static>,
    ) -> vk::ShaderCreateInfoEXT<'b> {
        let mut info = vk::ShaderCreateInfoEXT::default()
            .flags(self.flags)
            .stage(self.stage)
            .next_stage(self.next_stage)
            .code_type(vk::ShaderCodeTypeEXT::SPIRV)
            .name(&self.name)
            .set_layouts(&self.set_layouts)
            .push_constant_ranges(&self.push_constant_ranges);
        info.code_size = self.code.len() * 4;
        info.p_code = self.code.as_ptr().cast();
        if let Some(spec) = self.spec.info() {
            info = info.specialization_info(spec);
        }
        if let Some(size) = self.required_subgroup_size {
            subgroup.required_subgroup_size = size;
            info = info.push_next(subgroup);
        }
        info
    }
}

impl Replay {
    /// A call of shader objects, of the objects in `made` and the code in `catalog`: the call
    /// timed, its shaders destroyed after.
    pub(super) unsafe fn shader_objects(
        &self,
        made: &Made,
        catalog: &Catalog,
        v: &Value,
    ) -> Result<Duration, String> {
        let commands = self.shader_objects.ok_or(NO_SHADER_OBJECTS)?;
        let shaders = arr(v, "createInfos")
            .iter()
            .map(|s| ShaderData::read(self, made, catalog, s))
            .collect::<Result<Vec<_>, String>>()?;
        if shaders.is_empty() {
            return Err("a call of no shader".into());
        }
        let mut subgroups =
            vec![vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo::default(); shaders.len()];
        let infos: Vec<vk::ShaderCreateInfoEXT> = shaders
            .iter()
            .zip(subgroups.iter_mut())
            .map(|(s, g)| s.info(g))
            .collect();
        let mut out = vec![vk::ShaderEXT::null(); infos.len()];
        let started = Instant::now();
        // SAFETY: valid create infos whose data lives to the end of this function, one handle
        // out for each.
        let r = unsafe {
            (commands.create)(
                self.device.handle(),
                infos.len() as u32,
                infos.as_ptr(),
                std::ptr::null(),
                out.as_mut_ptr(),
            )
        };
        let took = started.elapsed();
        for shader in out.into_iter().filter(|s| *s != vk::ShaderEXT::null()) {
            // SAFETY: a shader this replay made, used by nothing.
            unsafe { (commands.destroy)(self.device.handle(), shader, std::ptr::null()) };
        }
        match r {
            vk::Result::SUCCESS => Ok(took),
            e => Err(format!("driver error {e:?}")),
        }
    }
}
