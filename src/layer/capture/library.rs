//! Graphics pipeline libraries (`VK_EXT_graphics_pipeline_library`) as the key reads them: which
//! subsets of a graphics pipeline a create info defines itself, and the keys of the libraries it
//! links (`VkPipelineLibraryCreateInfoKHR`), which the layer remembered as each was made.
//!
//! The spec (VkGraphicsPipelineLibraryCreateInfoEXT): with that structure, the create info
//! defines the subsets its `flags` name; without it, a library (`LIBRARY_BIT`) or a create info
//! linking libraries defines none of its own; anything else defines all four (a complete
//! pipeline). Each subset consumes its own state and ignores the rest ("any state not explicitly
//! listed for a particular library part will be ignored"), so the key reads a block only where a
//! subset it defines consumes it: what is ignored may be garbage and is never followed.

use ash::vk;

use super::super::objects::{slice, Objects};
use crate::key::desc::LibraryDesc;
use crate::key::{PipelineKey, Unkeyable};

use vk::GraphicsPipelineLibraryFlagsEXT as L;

/// All four subsets: a complete pipeline.
pub const COMPLETE: u32 = L::VERTEX_INPUT_INTERFACE.as_raw()
    | L::PRE_RASTERIZATION_SHADERS.as_raw()
    | L::FRAGMENT_SHADER.as_raw()
    | L::FRAGMENT_OUTPUT_INTERFACE.as_raw();

/// The subsets a graphics create info defines itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subsets(pub u32);

impl Subsets {
    /// From the create info's `VkGraphicsPipelineLibraryCreateInfoEXT` flags (where chained),
    /// whether it is a library, and how many libraries it links.
    pub fn of(gpl_flags: Option<u32>, library: bool, links: usize) -> Subsets {
        match gpl_flags {
            Some(flags) => Subsets(flags & COMPLETE),
            None if library || links > 0 => Subsets(0),
            None => Subsets(COMPLETE),
        }
    }

    pub fn vertex_input(self) -> bool {
        self.0 & L::VERTEX_INPUT_INTERFACE.as_raw() != 0
    }

    pub fn pre_rasterization(self) -> bool {
        self.0 & L::PRE_RASTERIZATION_SHADERS.as_raw() != 0
    }

    pub fn fragment_shader(self) -> bool {
        self.0 & L::FRAGMENT_SHADER.as_raw() != 0
    }

    pub fn fragment_output(self) -> bool {
        self.0 & L::FRAGMENT_OUTPUT_INTERFACE.as_raw() != 0
    }

    /// Its stages and layout are read (pre-rasterization or fragment shader state).
    pub fn shaders(self) -> bool {
        self.pre_rasterization() || self.fragment_shader()
    }

    /// Its render pass and subpass are read (every subset but vertex input).
    pub fn render_target(self) -> bool {
        self.shaders() || self.fragment_output()
    }
}

/// The keys of the libraries `info` names, in its order; a library the layer did not see made
/// (or could not key) makes the pipeline unkeyable.
///
/// # Safety
/// `info` must be the application's valid `VkPipelineLibraryCreateInfoKHR`.
pub unsafe fn linked_keys(
    info: &vk::PipelineLibraryCreateInfoKHR,
    objects: &Objects,
) -> Result<Vec<PipelineKey>, Unkeyable> {
    use ash::vk::Handle;
    // SAFETY: as the caller vouches.
    unsafe { slice(info.p_libraries, info.library_count) }
        .iter()
        .map(|l| {
            objects
                .libraries
                .get(l.as_raw(), "pipeline library")
                .map(|k| k.key)
        })
        .collect()
}

/// What the key adds for a create info that is not a complete pipeline made whole.
pub fn desc(subsets: Subsets, libraries: Vec<PipelineKey>) -> Option<LibraryDesc> {
    (subsets.0 != COMPLETE || !libraries.is_empty()).then_some(LibraryDesc {
        subsets: subsets.0,
        libraries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_info_defines_what_its_library_structure_says_else_none_or_all() {
        let fs = L::FRAGMENT_SHADER.as_raw();
        assert_eq!(Subsets::of(Some(fs), true, 0), Subsets(fs));
        assert_eq!(
            Subsets::of(None, true, 0),
            Subsets(0),
            "a library without the structure"
        );
        assert_eq!(
            Subsets::of(None, false, 4),
            Subsets(0),
            "a link without the structure"
        );
        assert_eq!(
            Subsets::of(None, false, 0),
            Subsets(COMPLETE),
            "a complete pipeline"
        );
        assert!(desc(Subsets(COMPLETE), Vec::new()).is_none());
        assert!(desc(Subsets(0), Vec::new()).is_some());
        let s = Subsets(L::VERTEX_INPUT_INTERFACE.as_raw());
        assert!(s.vertex_input() && !s.shaders() && !s.render_target());
    }
}
