//! Calls real applications make that the pipeline flow must answer as the driver would without
//! the layer: a profiler's capture flags (`--capture-internal`), a pipeline asked again by its
//! module identifier only (`--identifier`, as DXVK and vkd3d-proton do), and shader modules made
//! and destroyed all session long (`--module-churn`, as emulators do). Each reports one JSON value.

use std::ffi::CStr;

use ash::vk;

use super::{compute_spec, words, Shared, COMPUTE_SPV};

/// The device extensions (and features, chained by the caller) the probes asked for need.
pub fn extensions(args: &super::Args) -> Vec<&'static CStr> {
    let mut out = Vec::new();
    if args.capture_internal {
        out.push(ash::khr::pipeline_executable_properties::NAME);
    }
    if args.identifier {
        out.push(ash::ext::shader_module_identifier::NAME);
    }
    out
}

/// One compute pipeline of the test app's own shader and layout, variant 0, with `stage` as its
/// stage (a module, or an identifier chained) and `flags`.
fn compute_pipeline(
    s: &Shared,
    stage: vk::PipelineShaderStageCreateInfo<'_>,
    flags: vk::PipelineCreateFlags,
    cache: vk::PipelineCache,
) -> (vk::Result, vk::Pipeline) {
    let spec = compute_spec(0);
    let entries = [
        vk::SpecializationMapEntry::default()
            .constant_id(0)
            .offset(0)
            .size(4),
        vk::SpecializationMapEntry::default()
            .constant_id(1)
            .offset(4)
            .size(4),
    ];
    let data: Vec<u8> = spec.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let specialization = vk::SpecializationInfo::default()
        .map_entries(&entries)
        .data(&data);
    // Under --flags2, the flags in a VkPipelineCreateFlags2CreateInfoKHR (DXVK's way), the legacy
    // ones then ignored.
    let mut flags2 = vk::PipelineCreateFlags2CreateInfoKHR::default().flags(
        vk::PipelineCreateFlags2KHR::from_raw(u64::from(flags.as_raw())),
    );
    let mut ci = vk::ComputePipelineCreateInfo::default()
        .flags(flags)
        .stage(stage.specialization_info(&specialization))
        .layout(s.compute_layout);
    if s.flags2 {
        ci = ci
            .flags(vk::PipelineCreateFlags::empty())
            .push_next(&mut flags2);
    }
    let mut out = [vk::Pipeline::null()];
    // SAFETY: a valid create info; the raw command, so that VK_PIPELINE_COMPILE_REQUIRED comes
    // back as the success code it is.
    let r = unsafe {
        (s.device.fp_v1_0().create_compute_pipelines)(
            s.device.handle(),
            cache,
            1,
            &ci,
            std::ptr::null(),
            out.as_mut_ptr(),
        )
    };
    (r, out[0])
}

/// `--capture-internal`: a pipeline made with the capture flags for statistics and internal
/// representations, then asked for both, as a profiler asks.
pub fn capture_internal(instance: &ash::Instance, s: &Shared) -> serde_json::Value {
    let flags = vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR
        | vk::PipelineCreateFlags::CAPTURE_INTERNAL_REPRESENTATIONS_KHR;
    let stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(s.compute_module)
        .name(c"main");
    let (r, pipeline) = compute_pipeline(s, stage, flags, s.app_cache);
    if r != vk::Result::SUCCESS {
        return serde_json::json!({ "result": format!("{r:?}") });
    }
    let fns = ash::khr::pipeline_executable_properties::Device::new(instance, &s.device);
    let (mut statistics, mut representations, mut bytes) = (0usize, 0usize, 0usize);
    // SAFETY: a pipeline of this device made with both capture flags; each query asks for counts
    // and sizes only.
    let executables = unsafe {
        fns.get_pipeline_executable_properties(&vk::PipelineInfoKHR::default().pipeline(pipeline))
    }
    .map(|e| e.len())
    .unwrap_or(0);
    for index in 0..executables as u32 {
        let info = vk::PipelineExecutableInfoKHR::default()
            .pipeline(pipeline)
            .executable_index(index);
        // SAFETY: as above.
        unsafe {
            statistics += fns
                .get_pipeline_executable_statistics(&info)
                .map_or(0, |v| v.len());
            let reps = fns
                .get_pipeline_executable_internal_representations(&info)
                .unwrap_or_default();
            representations += reps.len();
            bytes += reps.iter().map(|r| r.data_size).sum::<usize>();
        }
    }
    // SAFETY: made above, used by nothing.
    unsafe { s.device.destroy_pipeline(pipeline, None) };
    serde_json::json!({
        "result": "SUCCESS", "executables": executables, "statistics": statistics,
        "representations": representations, "representation_bytes": bytes,
    })
}

/// `--identifier [--identifier-file F]`: the compute pipeline made from its module (through the
/// application's cache, where it has one), its module's identifier read (from the module and from
/// its create info, as DXVK reads it), then the pipeline asked again by the identifier alone with
/// `FAIL_ON_PIPELINE_COMPILE_REQUIRED`, as DXVK asks for its recompiles. With `file`: where it
/// holds an identifier, a later process asks by it alone, as vkd3d-proton does with identifiers
/// kept in its own pipeline library; where it holds none, the identifier is written there.
pub fn identifier(
    instance: &ash::Instance,
    s: &Shared,
    file: Option<&std::path::Path>,
) -> serde_json::Value {
    let fns = ash::ext::shader_module_identifier::Device::new(instance, &s.device);
    let kept = file.and_then(|f| std::fs::read(f).ok());
    let mut from_module = vk::ShaderModuleIdentifierEXT::default();
    let mut from_create_info = vk::ShaderModuleIdentifierEXT::default();
    let first = if kept.is_none() {
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(s.compute_module)
            .name(c"main");
        let (r, pipeline) =
            compute_pipeline(s, stage, vk::PipelineCreateFlags::empty(), s.app_cache);
        let code = words(COMPUTE_SPV);
        // SAFETY: a live module and a valid create info of this device.
        unsafe {
            (fns.fp().get_shader_module_identifier_ext)(
                s.device.handle(),
                s.compute_module,
                &mut from_module,
            );
            (fns.fp().get_shader_module_create_info_identifier_ext)(
                s.device.handle(),
                &vk::ShaderModuleCreateInfo::default().code(&code),
                &mut from_create_info,
            );
            s.device.destroy_pipeline(pipeline, None);
        }
        Some(r)
    } else {
        None
    };
    let identifier: Vec<u8> = match &kept {
        Some(bytes) => bytes.clone(),
        None => from_module.identifier[..from_module.identifier_size as usize].to_vec(),
    };
    if let (Some(f), None) = (file, &kept) {
        std::fs::write(f, &identifier).expect("the identifier file is written");
    }
    let mut by_identifier =
        vk::PipelineShaderStageModuleIdentifierCreateInfoEXT::default().identifier(&identifier);
    let stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .name(c"main")
        .push_next(&mut by_identifier);
    let (again, pipeline) = compute_pipeline(
        s,
        stage,
        vk::PipelineCreateFlags::FAIL_ON_PIPELINE_COMPILE_REQUIRED,
        s.app_cache,
    );
    if pipeline != vk::Pipeline::null() {
        // SAFETY: made above, used by nothing.
        unsafe { s.device.destroy_pipeline(pipeline, None) };
    }
    let same = kept.is_some()
        || from_module.identifier[..from_module.identifier_size as usize]
            == from_create_info.identifier[..from_create_info.identifier_size as usize];
    serde_json::json!({
        "first": first.map(|r| format!("{r:?}")),
        "size": identifier.len(),
        "module_and_create_info_agree": same,
        "again": format!("{again:?}"),
        "made": pipeline != vk::Pipeline::null(),
    })
}

/// The resident set of this process, in KiB.
fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The test app's compute shader with a debug string of `pad_words` words making it distinct by
/// `n`: a valid module of its own content (an `OpString` in the debug section).
fn distinct_module_code(n: u32, pad_words: usize) -> Vec<u32> {
    let code = words(COMPUTE_SPV);
    let (header, body) = code.split_at(5);
    // The debug section starts after the capabilities, extensions, imports, memory model, entry
    // points and execution modes.
    let mut at = 0;
    while at < body.len() {
        let (count, opcode) = ((body[at] >> 16) as usize, body[at] & 0xffff);
        if !matches!(opcode, 17 | 10 | 11 | 14 | 15 | 16 | 331) || count == 0 {
            break;
        }
        at += count;
    }
    let bound = header[3];
    let mut text: Vec<u8> = format!("pipekeep churn module {n} ").into_bytes();
    text.resize((pad_words - 3) * 4 - 1, b'x');
    text.push(0);
    let mut string = vec![((2 + text.len() / 4) as u32) << 16 | 7, bound];
    string.extend(
        text.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    let mut out = header.to_vec();
    out[3] = bound + 1;
    out.extend_from_slice(&body[..at]);
    out.extend(string);
    out.extend_from_slice(&body[at..]);
    out
}

/// `--module-churn N`: N distinct shader modules of about 66 KB, each made and destroyed at
/// once, as an emulator makes them all session; how much the process grew meanwhile.
pub fn module_churn(s: &Shared, modules: u32) -> serde_json::Value {
    const WORDS: usize = 66 * 1024 / 4;
    let before = resident_kib();
    let mut failed = 0;
    for n in 0..modules {
        let code = distinct_module_code(n, WORDS);
        // SAFETY: valid SPIR-V words on a live device; destroyed at once.
        match unsafe {
            s.device
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None)
        } {
            Ok(m) => unsafe { s.device.destroy_shader_module(m, None) },
            Err(_) => failed += 1,
        }
    }
    serde_json::json!({
        "modules": modules, "failed": failed,
        "growth_kib": resident_kib().saturating_sub(before),
    })
}
