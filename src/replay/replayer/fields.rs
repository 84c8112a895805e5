//! Reading Fossilize's JSON: a field as its Vulkan type (0 where absent), and the `pNext`
//! structures a create info holds.

use ash::vk;
use serde_json::Value;

use crate::replay::record::stype;

pub(super) fn u(v: &Value, k: &str) -> u32 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0) as u32
}

pub(super) fn i(v: &Value, k: &str) -> i32 {
    v.get(k).and_then(Value::as_i64).unwrap_or(0) as i32
}

pub(super) fn f(v: &Value, k: &str) -> f32 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0) as f32
}

pub(super) fn arr<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The `VkPipelineRobustnessCreateInfoEXT` a pipeline's or a stage's `pNext` holds, if any.
pub(super) fn robustness(v: &Value) -> Option<vk::PipelineRobustnessCreateInfoEXT<'static>> {
    find_next(v, stype::PIPELINE_ROBUSTNESS).map(|r| vk::PipelineRobustnessCreateInfoEXT {
        storage_buffers: vk::PipelineRobustnessBufferBehaviorEXT::from_raw(
            u(r, "storageBuffers") as i32
        ),
        uniform_buffers: vk::PipelineRobustnessBufferBehaviorEXT::from_raw(
            u(r, "uniformBuffers") as i32
        ),
        vertex_inputs: vk::PipelineRobustnessBufferBehaviorEXT::from_raw(
            u(r, "vertexInputs") as i32
        ),
        images: vk::PipelineRobustnessImageBehaviorEXT::from_raw(u(r, "images") as i32),
        ..Default::default()
    })
}

/// Refuses a `pNext` array holding anything but `known` sTypes.
pub(super) fn only(v: &Value, known: &[i32], place: &str) -> Result<(), String> {
    match arr(v, "pNext")
        .iter()
        .map(|s| i(s, "sType"))
        .find(|s| !known.contains(s))
    {
        Some(s) => Err(format!("unsupported structure sType {s} in {place}")),
        None => Ok(()),
    }
}

pub(super) fn find_next(v: &Value, stype: i32) -> Option<&Value> {
    arr(v, "pNext").iter().find(|s| i(s, "sType") == stype)
}
