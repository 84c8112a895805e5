//! A pipeline's create info as the driver may take it with binaries: what Vulkan requires of a
//! build from binaries and forbids beside it, changed on copies, never on the application's
//! structures.
//!
//! A pipeline is built from binaries without `FAIL_ON_PIPELINE_COMPILE_REQUIRED`
//! (VUID-vkCreateGraphicsPipelines-binaryCount-09622), so an application's own
//! `VkPipelineCreateFlags2CreateInfoKHR` carrying it (DXVK's way) is copied without it. A stage
//! given by module identifier must come with that flag (VUID-VkPipelineShaderStageModuleIdentifierCreateInfoEXT-pNext-06851); with binaries the identifier is ignored and may be left out
//! (VUID-VkPipelineShaderStageCreateInfo-stage-06845, and stage-08771 on a device without
//! `maintenance5` or `graphicsPipelineLibrary`, allow a stage with no code when `binaryCount` is
//! above 0), so it is. Only structures whose size the layer knows are copied:
//! a keyed pipeline carries no other (its key refuses them); a chain that needs a change and
//! holds one is [`NotCopied`], and its pipeline is compiled as asked, never built from binaries
//! with what Vulkan forbids beside them.

use std::ffi::c_void;

use ash::vk;
use vk::StructureType as S;

use super::super::abi::{chain, find_in_chain};

/// The size of each structure a keyed pipeline's or stage's chain may carry.
fn known_size(s_type: vk::StructureType) -> Option<usize> {
    use std::mem::size_of;
    Some(match s_type {
        S::PIPELINE_CREATION_FEEDBACK_CREATE_INFO => {
            size_of::<vk::PipelineCreationFeedbackCreateInfo>()
        }
        S::PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR => {
            size_of::<vk::PipelineCreateFlags2CreateInfoKHR>()
        }
        S::PIPELINE_ROBUSTNESS_CREATE_INFO_EXT => size_of::<vk::PipelineRobustnessCreateInfoEXT>(),
        S::PIPELINE_RENDERING_CREATE_INFO => size_of::<vk::PipelineRenderingCreateInfo>(),
        S::GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT => {
            size_of::<vk::GraphicsPipelineLibraryCreateInfoEXT>()
        }
        S::PIPELINE_LIBRARY_CREATE_INFO_KHR => size_of::<vk::PipelineLibraryCreateInfoKHR>(),
        S::SHADER_MODULE_CREATE_INFO => size_of::<vk::ShaderModuleCreateInfo>(),
        S::PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO => {
            size_of::<vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo>()
        }
        S::PIPELINE_SHADER_STAGE_MODULE_IDENTIFIER_CREATE_INFO_EXT => {
            size_of::<vk::PipelineShaderStageModuleIdentifierCreateInfoEXT>()
        }
        _ => return None,
    })
}

/// A chain that needed a change carries a structure of a size the layer does not know.
#[derive(Debug)]
pub(super) struct NotCopied;

/// What a copy does with one structure of the chain.
enum Edit {
    Keep,
    Drop,
}

/// Copies of a chain's structures, linked in the application's order; alive as long as the
/// build that reads them.
#[derive(Default)]
pub(super) struct ChainCopy {
    /// Each structure's bytes, in `u64`s for the alignment of any Vulkan structure.
    nodes: Vec<Box<[u64]>>,
}

impl ChainCopy {
    /// A copy of `p_next` with each structure passed through `edit` (which may change the copy or
    /// leave it out), and its head; `None` where the chain carries a structure of unknown size.
    ///
    /// # Safety
    /// `p_next` must be a valid chain; the head lives as long as `self`.
    unsafe fn copy(
        &mut self,
        p_next: *const c_void,
        mut edit: impl FnMut(*mut vk::BaseOutStructure<'static>) -> Edit,
    ) -> Option<*const c_void> {
        let first = self.nodes.len();
        // SAFETY: as the caller vouches.
        for s in unsafe { chain(p_next) } {
            let size = known_size(unsafe { (*s).s_type })?;
            let mut node = vec![0u64; size.div_ceil(8)].into_boxed_slice();
            // SAFETY: `s` is a structure of `size` bytes (its sType says which); the copy holds
            // at least as many.
            unsafe {
                std::ptr::copy_nonoverlapping(s.cast::<u8>(), node.as_mut_ptr().cast(), size)
            };
            if let Edit::Keep = edit(node.as_mut_ptr().cast()) {
                self.nodes.push(node);
            }
        }
        let ours = &mut self.nodes[first..];
        let mut next: *mut vk::BaseOutStructure<'static> = std::ptr::null_mut();
        for node in ours.iter_mut().rev() {
            let here: *mut vk::BaseOutStructure<'static> = node.as_mut_ptr().cast();
            // SAFETY: a copy of a structure, which starts with sType and pNext.
            unsafe { (*here).p_next = next };
            next = here;
        }
        Some(next as *const c_void)
    }
}

/// `p_next` with an application's `VkPipelineCreateFlags2CreateInfoKHR` copied without
/// `FAIL_ON_PIPELINE_COMPILE_REQUIRED` (which a build from binaries may not carry); `p_next`
/// itself where nothing needs changing.
///
/// # Safety
/// `p_next` must be a valid pipeline chain; the result lives as long as `copies`.
pub(super) unsafe fn without_fail_on_compile(
    p_next: *const c_void,
    copies: &mut ChainCopy,
) -> Result<*const c_void, NotCopied> {
    let fail_on = vk::PipelineCreateFlags2KHR::from_raw(
        vk::PipelineCreateFlags::FAIL_ON_PIPELINE_COMPILE_REQUIRED.as_raw() as u64,
    );
    // SAFETY: the application's chain.
    let flags2 = unsafe { find_in_chain(p_next, S::PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR) }
        as *const vk::PipelineCreateFlags2CreateInfoKHR;
    if unsafe { flags2.as_ref() }.is_none_or(|f| !f.flags.contains(fail_on)) {
        return Ok(p_next);
    }
    // SAFETY: as the caller vouches; a flags2 node's copy is that structure.
    let copied = unsafe {
        copies.copy(p_next, |s| {
            if (*s).s_type == S::PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR {
                let f = s.cast::<vk::PipelineCreateFlags2CreateInfoKHR>();
                (*f).flags &= !fail_on;
            }
            Edit::Keep
        })
    };
    copied.ok_or(NotCopied)
}

/// `stage` without its module identifier (a stage built from binaries needs none), or `None`
/// where it names none.
///
/// # Safety
/// `stage` must be a valid stage create info; the result lives as long as `copies`.
pub(super) unsafe fn stage_without_identifier(
    stage: &vk::PipelineShaderStageCreateInfo<'static>,
    copies: &mut ChainCopy,
) -> Result<Option<vk::PipelineShaderStageCreateInfo<'static>>, NotCopied> {
    let by_identifier = S::PIPELINE_SHADER_STAGE_MODULE_IDENTIFIER_CREATE_INFO_EXT;
    // SAFETY: the application's chain.
    if unsafe { find_in_chain(stage.p_next, by_identifier) }.is_null() {
        return Ok(None);
    }
    // SAFETY: as the caller vouches.
    let p_next = unsafe {
        copies.copy(stage.p_next, |s| match (*s).s_type == by_identifier {
            true => Edit::Drop,
            false => Edit::Keep,
        })
    }
    .ok_or(NotCopied)?;
    Ok(Some(vk::PipelineShaderStageCreateInfo { p_next, ..*stage }))
}

/// `stages` with each one given by identifier replaced by its copy without it (see
/// [`stage_without_identifier`]); `None` where none is.
///
/// # Safety
/// `stages` must be valid stage create infos; the result lives as long as `copies`.
pub(super) unsafe fn stages_without_identifiers(
    stages: &[vk::PipelineShaderStageCreateInfo<'static>],
    copies: &mut ChainCopy,
) -> Result<Option<Vec<vk::PipelineShaderStageCreateInfo<'static>>>, NotCopied> {
    let by_identifier = S::PIPELINE_SHADER_STAGE_MODULE_IDENTIFIER_CREATE_INFO_EXT;
    // SAFETY: as the caller vouches. Most builds name no identifier: nothing is copied for them.
    if stages
        .iter()
        .all(|s| unsafe { find_in_chain(s.p_next, by_identifier) }.is_null())
    {
        return Ok(None);
    }
    let copy = |s: &vk::PipelineShaderStageCreateInfo<'static>| {
        // SAFETY: as the caller vouches.
        Ok(unsafe { stage_without_identifier(s, copies) }?.unwrap_or(*s))
    };
    stages.iter().map(copy).collect::<Result<_, _>>().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flags2_with_fail_on_compile_is_copied_without_it_and_the_rest_of_the_chain_kept() {
        let robustness = vk::PipelineRobustnessCreateInfoEXT {
            storage_buffers: vk::PipelineRobustnessBufferBehaviorEXT::ROBUST_BUFFER_ACCESS,
            ..Default::default()
        };
        let flags2 = vk::PipelineCreateFlags2CreateInfoKHR {
            p_next: (&robustness as *const vk::PipelineRobustnessCreateInfoEXT).cast(),
            flags: vk::PipelineCreateFlags2KHR::from_raw(0x100 | 0x1),
            ..Default::default()
        };
        let head = (&flags2 as *const vk::PipelineCreateFlags2CreateInfoKHR).cast();
        let mut copies = ChainCopy::default();
        let copied = unsafe { without_fail_on_compile(head, &mut copies) }.unwrap();
        assert_ne!(copied, head);
        let f = unsafe { &*(copied as *const vk::PipelineCreateFlags2CreateInfoKHR) };
        assert_eq!(f.flags.as_raw(), 0x1);
        let r = unsafe { &*(f.p_next as *const vk::PipelineRobustnessCreateInfoEXT) };
        assert_eq!(r.s_type, S::PIPELINE_ROBUSTNESS_CREATE_INFO_EXT);
        assert_eq!(r.storage_buffers, robustness.storage_buffers);
        assert!(r.p_next.is_null());
        // The application's own structure is as it was.
        assert_eq!(flags2.flags.as_raw(), 0x101);
        // Without the flag, nothing is copied.
        let plain = vk::PipelineCreateFlags2CreateInfoKHR::default();
        let head = (&plain as *const vk::PipelineCreateFlags2CreateInfoKHR).cast();
        assert_eq!(
            unsafe { without_fail_on_compile(head, &mut copies) }.unwrap(),
            head
        );
    }

    #[test]
    fn an_identifier_stage_is_copied_without_its_identifier_and_an_unknown_chain_is_not() {
        let subgroup = vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo {
            required_subgroup_size: 32,
            ..Default::default()
        };
        let id = [7u8; 32];
        let identifier = vk::PipelineShaderStageModuleIdentifierCreateInfoEXT {
            p_next: (&subgroup as *const vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo)
                .cast(),
            identifier_size: 32,
            p_identifier: id.as_ptr(),
            ..Default::default()
        };
        let stage = vk::PipelineShaderStageCreateInfo {
            p_next: (&identifier as *const vk::PipelineShaderStageModuleIdentifierCreateInfoEXT)
                .cast(),
            stage: vk::ShaderStageFlags::COMPUTE,
            ..Default::default()
        };
        let mut copies = ChainCopy::default();
        let copied = unsafe { stage_without_identifier(&stage, &mut copies) }
            .unwrap()
            .unwrap();
        let s = unsafe {
            &*(copied.p_next as *const vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo)
        };
        assert_eq!(
            s.s_type,
            S::PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO
        );
        assert_eq!(s.required_subgroup_size, 32);
        assert!(s.p_next.is_null());
        assert_eq!(copied.stage, vk::ShaderStageFlags::COMPUTE);
        // A stage with no identifier needs no copy.
        let plain = vk::PipelineShaderStageCreateInfo::default();
        assert!(unsafe { stage_without_identifier(&plain, &mut copies) }
            .unwrap()
            .is_none());
        // A structure of unknown size: no copy, so no build from binaries.
        let unknown = vk::BaseInStructure {
            s_type: vk::StructureType::from_raw(1_000_999_000),
            p_next: (&identifier as *const vk::PipelineShaderStageModuleIdentifierCreateInfoEXT)
                .cast(),
            ..Default::default()
        };
        let stage = vk::PipelineShaderStageCreateInfo {
            p_next: (&unknown as *const vk::BaseInStructure).cast(),
            ..Default::default()
        };
        assert!(unsafe { stage_without_identifier(&stage, &mut copies) }.is_err());
        assert!(unsafe { stages_without_identifiers(&[plain, stage], &mut copies) }.is_err());
    }
}
