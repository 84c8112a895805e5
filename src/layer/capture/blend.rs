//! The colour blend state as the key reads it: what its dynamic states (extended dynamic state 3,
//! colour write enable, logic op) leave to the draw is never read, and stands as 0 or false.

use ash::vk;

use super::bool32;
use crate::key::desc::{BlendAttachment, ColorBlendDesc};
use crate::key::{Dynamic, Unkeyable};
use crate::layer::objects::{only_known, slice};

use vk::DynamicState as D;
use vk::StructureType as S;

/// More colour attachments than any device has (`maxColorAttachments` is 8 on every driver known).
const MAX_COLOR_ATTACHMENTS: u32 = 32;

/// # Safety
/// `b` must be the colour blend state of a valid create info whose dynamic states are `dy`.
pub(super) unsafe fn color_blend_desc(
    b: &vk::PipelineColorBlendStateCreateInfo,
    dy: Dynamic,
) -> Result<ColorBlendDesc, Unkeyable> {
    // Colour write enables dynamic: their array is ignored.
    let ignored: &[S] = if dy.has(D::COLOR_WRITE_ENABLE_EXT) {
        &[S::PIPELINE_COLOR_WRITE_CREATE_INFO_EXT]
    } else {
        &[]
    };
    // SAFETY: the state's chain, valid as the caller vouches.
    unsafe { only_known(b.p_next, ignored, "the colour blend state")? };
    let logic_op_enable = dy
        .unless(D::LOGIC_OP_ENABLE_EXT, bool32(b.logic_op_enable))
        .unwrap_or(false);
    // Enable, equation and write mask all dynamic, every field of `pAttachments` is ignored
    // (each is one of the three states'): the attachments are counted, not read, and the record
    // writes as many zeroed ones, which a rebuild passes. The count itself is ignored too unless
    // coherent advanced blending is on without its dynamic state; then it may not pass
    // `maxColorAttachments`, so a count past any device's is one the spec ignores, and none are
    // counted.
    let attachments_ignored = dy.has(D::COLOR_BLEND_ENABLE_EXT)
        && dy.has(D::COLOR_BLEND_EQUATION_EXT)
        && dy.has(D::COLOR_WRITE_MASK_EXT);
    let attachments = if attachments_ignored {
        let count = match b.attachment_count {
            n @ 0..=MAX_COLOR_ATTACHMENTS => n,
            _ => 0,
        };
        vec![BlendAttachment::default(); count as usize]
    } else {
        // SAFETY: read unless ignored, so valid as the caller vouches.
        unsafe { slice(b.p_attachments, b.attachment_count) }
            .iter()
            .map(|a| attachment(a, dy))
            .collect()
    };
    Ok(ColorBlendDesc {
        flags: b.flags.as_raw(),
        logic_op_enable,
        // The static logic op is read wherever the enable may be true at draw time.
        logic_op: ((logic_op_enable || dy.has(D::LOGIC_OP_ENABLE_EXT)) && !dy.has(D::LOGIC_OP_EXT))
            .then_some(b.logic_op.as_raw() as u32),
        attachments,
        blend_constants: dy.unless(D::BLEND_CONSTANTS, b.blend_constants),
    })
}

/// One attachment's blend state, each field a dynamic state covers as 0 or false.
fn attachment(a: &vk::PipelineColorBlendAttachmentState, dy: Dynamic) -> BlendAttachment {
    let [src_color_factor, dst_color_factor, color_op, src_alpha_factor, dst_alpha_factor, alpha_op] =
        dy.unless(
            D::COLOR_BLEND_EQUATION_EXT,
            [
                a.src_color_blend_factor.as_raw(),
                a.dst_color_blend_factor.as_raw(),
                a.color_blend_op.as_raw(),
                a.src_alpha_blend_factor.as_raw(),
                a.dst_alpha_blend_factor.as_raw(),
                a.alpha_blend_op.as_raw(),
            ]
            .map(|x| x as u32),
        )
        .unwrap_or_default();
    BlendAttachment {
        blend_enable: dy
            .unless(D::COLOR_BLEND_ENABLE_EXT, bool32(a.blend_enable))
            .unwrap_or(false),
        src_color_factor,
        dst_color_factor,
        color_op,
        src_alpha_factor,
        dst_alpha_factor,
        alpha_op,
        color_write_mask: dy
            .unless(D::COLOR_WRITE_MASK_EXT, a.color_write_mask.as_raw())
            .unwrap_or(0),
    }
}
