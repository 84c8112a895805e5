//! The test app's ray-tracing mode (`--rt N`): N ray-tracing pipelines as native ray-traced
//! renderers and vkd3d-proton make them (`VK_KHR_ray_tracing_pipeline`): a ray-generation, a
//! miss and a closest-hit group, each variant specialized; the odd ones linked from a pipeline
//! library holding the hit group (`VK_KHR_pipeline_library`), one library a variant. Each
//! pipeline's shader group handles are read after it is made; with `--deferred` every call goes
//! through a deferred operation, joined as the spec has it.

use std::time::{Duration, Instant};

use ash::vk;

const RAYGEN_SPV: &[u8] = include_bytes!("shaders/raygen.rgen.spv");
const MISS_SPV: &[u8] = include_bytes!("shaders/miss.rmiss.spv");
const HIT_SPV: &[u8] = include_bytes!("shaders/hit.rchit.spv");

/// The extensions the mode needs.
pub const EXTENSIONS: [&std::ffi::CStr; 4] = [
    ash::khr::ray_tracing_pipeline::NAME,
    ash::khr::acceleration_structure::NAME,
    ash::khr::deferred_host_operations::NAME,
    ash::khr::pipeline_library::NAME,
];

/// What the mode made.
#[derive(Default, Debug)]
pub struct Made {
    pub pipelines: u32,
    pub libraries: u32,
    pub failed: u32,
    pub compile_required: u32,
    /// Pipelines whose shader group handles were read whole and not all zero.
    pub handles_ok: u32,
    /// Pipelines and libraries whose creation feedback said cache hit, whole (`--feedback`).
    pub feedback_hits: u32,
    pub time: Duration,
    pub made: Vec<vk::Pipeline>,
}

/// The objects every ray-tracing pipeline shares.
pub struct Rt {
    device: ash::Device,
    rt: ash::khr::ray_tracing_pipeline::Device,
    deferred: Option<ash::khr::deferred_host_operations::Device>,
    modules: [vk::ShaderModule; 3],
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    cache: vk::PipelineCache,
    handle_size: u32,
    fail_on_compile: bool,
    feedback: bool,
}

fn words(spv: &[u8]) -> Vec<u32> {
    spv.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

impl Rt {
    /// # Safety
    /// `device` must have been made on `physical` with [`EXTENSIONS`] and their features.
    pub unsafe fn new(
        instance: &ash::Instance,
        physical: vk::PhysicalDevice,
        device: &ash::Device,
        cache: vk::PipelineCache,
        deferred: bool,
        fail_on_compile: bool,
        feedback: bool,
    ) -> Result<Rt, String> {
        let err = |what: &'static str| move |e: vk::Result| format!("{what}: {e}");
        let mut props = vk::PhysicalDeviceRayTracingPipelinePropertiesKHR::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut props);
        // SAFETY (whole function): valid create infos on a live device with the extensions.
        unsafe {
            instance.get_physical_device_properties2(physical, &mut props2);
            let module = |spv: &[u8]| {
                let code = words(spv);
                device
                    .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None)
                    .map_err(err("vkCreateShaderModule"))
            };
            let modules = [module(RAYGEN_SPV)?, module(MISS_SPV)?, module(HIT_SPV)?];
            let bindings = [
                vk::DescriptorSetLayoutBinding::default()
                    .binding(0)
                    .descriptor_type(vk::DescriptorType::ACCELERATION_STRUCTURE_KHR)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::RAYGEN_KHR),
                vk::DescriptorSetLayoutBinding::default()
                    .binding(1)
                    .descriptor_type(vk::DescriptorType::STORAGE_IMAGE)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::RAYGEN_KHR),
            ];
            let set_layout = device
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                    None,
                )
                .map_err(err("vkCreateDescriptorSetLayout"))?;
            let sets = [set_layout];
            let layout = device
                .create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default().set_layouts(&sets),
                    None,
                )
                .map_err(err("vkCreatePipelineLayout"))?;
            Ok(Rt {
                device: device.clone(),
                rt: ash::khr::ray_tracing_pipeline::Device::new(instance, device),
                deferred: deferred
                    .then(|| ash::khr::deferred_host_operations::Device::new(instance, device)),
                modules,
                set_layout,
                layout,
                cache,
                handle_size: props.shader_group_handle_size,
                fail_on_compile,
                feedback,
            })
        }
    }

    fn flags(&self, own: vk::PipelineCreateFlags) -> vk::PipelineCreateFlags {
        if self.fail_on_compile {
            own | vk::PipelineCreateFlags::FAIL_ON_PIPELINE_COMPILE_REQUIRED
        } else {
            own
        }
    }

    /// One call of `vkCreateRayTracingPipelinesKHR`, through a deferred operation where asked
    /// (joined until it is done, its result read after, as the spec has it).
    fn create(
        &self,
        ci: &vk::RayTracingPipelineCreateInfoKHR,
        out: &mut Made,
    ) -> Option<vk::Pipeline> {
        let started = Instant::now();
        let mut pipeline = vk::Pipeline::null();
        let mut feedback = super::OneRecord::default();
        let mut with = *ci;
        if self.feedback {
            with.p_next = feedback.in_front(ci.p_next);
        }
        // SAFETY: valid create infos whose arrays outlive the call; the raw entry points, so
        // that every success code is seen as it is returned.
        let r = unsafe {
            let operation = match &self.deferred {
                Some(d) => {
                    let mut op = vk::DeferredOperationKHR::null();
                    let r = (d.fp().create_deferred_operation_khr)(
                        self.device.handle(),
                        std::ptr::null(),
                        &mut op,
                    );
                    if r != vk::Result::SUCCESS {
                        eprintln!("testapp: vkCreateDeferredOperationKHR: {r}");
                        out.failed += 1;
                        return None;
                    }
                    op
                }
                None => vk::DeferredOperationKHR::null(),
            };
            let mut r = (self.rt.fp().create_ray_tracing_pipelines_khr)(
                self.device.handle(),
                operation,
                self.cache,
                1,
                &with,
                std::ptr::null(),
                &mut pipeline,
            );
            if let Some(d) = &self.deferred {
                if r == vk::Result::OPERATION_DEFERRED_KHR {
                    let join = d.fp().deferred_operation_join_khr;
                    // THREAD_IDLE: others work on it still; THREAD_DONE: no work left for this
                    // thread, but not yet complete; SUCCESS: complete. Its outputs (the pipeline,
                    // the feedback) are read, and it is destroyed, only once it is complete.
                    while join(self.device.handle(), operation) == vk::Result::THREAD_IDLE_KHR {
                        std::thread::yield_now();
                    }
                    let result = d.fp().get_deferred_operation_result_khr;
                    r = result(self.device.handle(), operation);
                    while r == vk::Result::NOT_READY {
                        std::thread::yield_now();
                        r = result(self.device.handle(), operation);
                    }
                } else if r == vk::Result::OPERATION_NOT_DEFERRED_KHR {
                    r = vk::Result::SUCCESS;
                }
                (d.fp().destroy_deferred_operation_khr)(
                    self.device.handle(),
                    operation,
                    std::ptr::null(),
                );
            }
            r
        };
        out.time += started.elapsed();
        match r {
            vk::Result::SUCCESS if pipeline != vk::Pipeline::null() => {
                out.feedback_hits += u32::from(self.feedback && feedback.whole_hit());
                out.made.push(pipeline);
                Some(pipeline)
            }
            vk::Result::PIPELINE_COMPILE_REQUIRED => {
                out.compile_required += 1;
                None
            }
            r => {
                eprintln!("testapp: a ray-tracing pipeline call failed: {r}");
                out.failed += 1;
                None
            }
        }
    }

    /// Whether `pipeline`'s `groups` shader group handles read whole and not all zero.
    fn handles_ok(&self, pipeline: vk::Pipeline, groups: u32) -> bool {
        let mut data = vec![0u8; (self.handle_size * groups) as usize];
        // SAFETY: a live ray-tracing pipeline of this device with that many groups.
        let r = unsafe {
            (self.rt.fp().get_ray_tracing_shader_group_handles_khr)(
                self.device.handle(),
                pipeline,
                0,
                groups,
                data.len(),
                data.as_mut_ptr().cast(),
            )
        };
        r == vk::Result::SUCCESS && data.iter().any(|b| *b != 0)
    }
}

/// The specialization of variant `v`: one float, for the ray-generation and the hit shader.
fn spec_value(v: u32) -> [u8; 4] {
    (1.0f32 + v as f32 / 16.0).to_le_bytes()
}

const ENTRY: [vk::SpecializationMapEntry; 1] = [vk::SpecializationMapEntry {
    constant_id: 0,
    offset: 0,
    size: 4,
}];

fn general(index: u32) -> vk::RayTracingShaderGroupCreateInfoKHR<'static> {
    vk::RayTracingShaderGroupCreateInfoKHR::default()
        .ty(vk::RayTracingShaderGroupTypeKHR::GENERAL)
        .general_shader(index)
        .closest_hit_shader(vk::SHADER_UNUSED_KHR)
        .any_hit_shader(vk::SHADER_UNUSED_KHR)
        .intersection_shader(vk::SHADER_UNUSED_KHR)
}

fn hit_group(closest: u32) -> vk::RayTracingShaderGroupCreateInfoKHR<'static> {
    vk::RayTracingShaderGroupCreateInfoKHR::default()
        .ty(vk::RayTracingShaderGroupTypeKHR::TRIANGLES_HIT_GROUP)
        .general_shader(vk::SHADER_UNUSED_KHR)
        .closest_hit_shader(closest)
        .any_hit_shader(vk::SHADER_UNUSED_KHR)
        .intersection_shader(vk::SHADER_UNUSED_KHR)
}

/// What the pipelines' interface holds: a vec3 payload and two barycentrics.
const INTERFACE: vk::RayTracingPipelineInterfaceCreateInfoKHR<'static> =
    vk::RayTracingPipelineInterfaceCreateInfoKHR {
        s_type: vk::StructureType::RAY_TRACING_PIPELINE_INTERFACE_CREATE_INFO_KHR,
        p_next: std::ptr::null(),
        max_pipeline_ray_payload_size: 12,
        max_pipeline_ray_hit_attribute_size: 8,
        _marker: std::marker::PhantomData,
    };

impl Rt {
    /// Variant `v`: whole (even `v`), or its hit group from a library of its own (odd `v`).
    fn variant(&self, v: u32, out: &mut Made) {
        let value = spec_value(v);
        let spec = vk::SpecializationInfo::default()
            .map_entries(&ENTRY)
            .data(&value);
        let stage = |s: vk::ShaderStageFlags, m: vk::ShaderModule| {
            vk::PipelineShaderStageCreateInfo::default()
                .stage(s)
                .module(m)
                .name(c"main")
                .specialization_info(&spec)
        };
        let raygen = stage(vk::ShaderStageFlags::RAYGEN_KHR, self.modules[0]);
        let miss = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::MISS_KHR)
            .module(self.modules[1])
            .name(c"main");
        let hit = stage(vk::ShaderStageFlags::CLOSEST_HIT_KHR, self.modules[2]);
        if v.is_multiple_of(2) {
            let stages = [raygen, miss, hit];
            let groups = [general(0), general(1), hit_group(2)];
            let ci = vk::RayTracingPipelineCreateInfoKHR::default()
                .flags(self.flags(vk::PipelineCreateFlags::empty()))
                .stages(&stages)
                .groups(&groups)
                .max_pipeline_ray_recursion_depth(1)
                .layout(self.layout);
            if let Some(p) = self.create(&ci, out) {
                out.pipelines += 1;
                out.handles_ok += u32::from(self.handles_ok(p, 3));
            }
            return;
        }
        let lib_stages = [hit];
        let lib_groups = [hit_group(0)];
        let lib_ci = vk::RayTracingPipelineCreateInfoKHR::default()
            .flags(self.flags(vk::PipelineCreateFlags::LIBRARY_KHR))
            .stages(&lib_stages)
            .groups(&lib_groups)
            .max_pipeline_ray_recursion_depth(1)
            .library_interface(&INTERFACE)
            .layout(self.layout);
        let Some(library) = self.create(&lib_ci, out) else {
            return;
        };
        out.libraries += 1;
        let libraries = [library];
        let library_info = vk::PipelineLibraryCreateInfoKHR::default().libraries(&libraries);
        let stages = [raygen, miss];
        let groups = [general(0), general(1)];
        let ci = vk::RayTracingPipelineCreateInfoKHR::default()
            .flags(self.flags(vk::PipelineCreateFlags::empty()))
            .stages(&stages)
            .groups(&groups)
            .max_pipeline_ray_recursion_depth(1)
            .library_info(&library_info)
            .library_interface(&INTERFACE)
            .layout(self.layout);
        if let Some(p) = self.create(&ci, out) {
            out.pipelines += 1;
            // The library's group follows the pipeline's own: three in all.
            out.handles_ok += u32::from(self.handles_ok(p, 3));
        }
    }

    /// Destroys what [`Rt::new`] made.
    ///
    /// # Safety
    /// Nothing may use these objects any more.
    pub unsafe fn destroy(self) {
        // SAFETY: as the caller vouches.
        unsafe {
            for m in self.modules {
                self.device.destroy_shader_module(m, None);
            }
            self.device.destroy_pipeline_layout(self.layout, None);
            self.device
                .destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

/// `n` variants from `threads` threads.
pub fn make(rt: &Rt, n: u32, threads: usize) -> Made {
    let per_thread = (n as usize).div_ceil(threads.max(1)).max(1);
    let variants: Vec<u32> = (0..n).collect();
    let all: Vec<Made> = std::thread::scope(|s| {
        variants
            .chunks(per_thread)
            .map(|chunk| {
                s.spawn(move || {
                    let mut out = Made::default();
                    for v in chunk {
                        rt.variant(*v, &mut out);
                    }
                    out
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().expect("a ray-tracing thread panicked"))
            .collect()
    });
    let mut made = Made::default();
    for m in all {
        made.pipelines += m.pipelines;
        made.libraries += m.libraries;
        made.failed += m.failed;
        made.compile_required += m.compile_required;
        made.handles_ok += m.handles_ok;
        made.feedback_hits += m.feedback_hits;
        made.time += m.time;
        made.made.extend(m.made);
    }
    made
}
