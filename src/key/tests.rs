//! Key tests: pinned keys of fixed inputs, what must not move a key, and a walk over every
//! hashed field showing that changing it moves the key.

use super::desc::*;
use super::*;

fn digest(n: u8) -> Digest {
    Digest([n; 32])
}

fn stage(stage: u32, module: u8) -> StageDesc {
    StageDesc {
        stage,
        flags: 0,
        module: digest(module),
        entry_point: b"main".to_vec(),
        specialization: vec![SpecConstant {
            constant_id: 0,
            value: 64u32.to_le_bytes().to_vec(),
        }],
        required_subgroup_size: None,
        robustness: None,
    }
}

fn compute() -> ComputeDesc {
    ComputeDesc {
        device: digest(9),
        flags: 0,
        stage: stage(0x20, 1),
        layout: digest(2),
        robustness: None,
    }
}

fn graphics() -> GraphicsDesc {
    GraphicsDesc {
        device: digest(9),
        flags: 0,
        stages: vec![stage(0x1, 3), stage(0x10, 4)],
        vertex_input: Some(VertexInputDesc {
            flags: 0,
            bindings: vec![VertexBinding {
                binding: 0,
                stride: Some(32),
                input_rate: 0,
            }],
            attributes: vec![VertexAttribute {
                location: 0,
                binding: 0,
                format: 109,
                offset: 0,
            }],
        }),
        input_assembly: Some(InputAssemblyDesc {
            flags: 0,
            topology: 3,
            primitive_restart: Some(false),
        }),
        tessellation_patch_control_points: None,
        viewport: Some(ViewportDesc {
            flags: 0,
            viewport_count: Some(1),
            viewports: None,
            scissor_count: Some(1),
            scissors: None,
        }),
        rasterization: RasterizationDesc {
            flags: 0,
            depth_clamp_enable: false,
            rasterizer_discard_enable: Some(false),
            polygon_mode: 0,
            cull_mode: Some(0),
            front_face: Some(0),
            depth_bias_enable: Some(false),
            depth_bias: Some([0.0; 3]),
            line_width: Some(1.0),
        },
        multisample: Some(MultisampleDesc {
            rasterization_samples: 1,
            sample_mask: Some(vec![!0]),
            ..Default::default()
        }),
        depth_stencil: Some(DepthStencilDesc {
            depth_test_enable: Some(true),
            depth_write_enable: Some(true),
            depth_compare_op: Some(1),
            depth_bounds_test_enable: Some(false),
            stencil_test_enable: Some(false),
            front: StencilDesc {
                ops: Some([0, 0, 0, 7]),
                compare_mask: Some(0),
                write_mask: Some(0),
                reference: Some(0),
            },
            back: StencilDesc {
                ops: Some([0, 0, 0, 7]),
                compare_mask: Some(0),
                write_mask: Some(0),
                reference: Some(0),
            },
            depth_bounds: Some([0.0, 1.0]),
            flags: 0,
        }),
        color_blend: Some(ColorBlendDesc {
            flags: 0,
            logic_op_enable: false,
            logic_op: Some(0),
            attachments: vec![BlendAttachment {
                color_write_mask: 0xf,
                ..Default::default()
            }],
            blend_constants: Some([0.0; 4]),
        }),
        dynamic_states: vec![0, 1],
        layout: digest(5),
        target: RenderTarget::Pass {
            pass: digest(6),
            subpass: 0,
        },
        robustness: None,
        library: None,
        extensions: Default::default(),
    }
}

/// [`shader_objects_key`] of shaders held by value.
fn shader_key(device: &Digest, format: &[u8], call: &[u32], shaders: &[ShaderDesc]) -> PipelineKey {
    let refs: Vec<&ShaderDesc> = shaders.iter().collect();
    shader_objects_key(device, format, call, &refs)
}

/// The call of [`shaders`]: a vertex and a fragment shader.
const CALL: [u32; 2] = [0x1, 0x10];

/// A linked vertex and fragment pair of shader objects.
fn shaders() -> Vec<ShaderDesc> {
    let layout = PipelineLayoutDesc {
        flags: 0,
        set_layouts: vec![digest(5)],
        push_constant_ranges: vec![PushRange {
            stage_flags: 1,
            offset: 0,
            size: 8,
        }],
    };
    vec![
        ShaderDesc {
            stage: stage(0x1, 3),
            next_stage: 0x10,
            layout: layout.clone(),
        },
        ShaderDesc {
            stage: stage(0x10, 4),
            next_stage: 0,
            layout,
        },
    ]
}

#[test]
fn every_part_of_a_shader_object_moves_its_key() {
    let base = shader_key(&digest(9), &[7; 20], &CALL, &shaders());
    assert_ne!(
        shader_key(&digest(8), &[7; 20], &CALL, &shaders()),
        base,
        "device"
    );
    assert_ne!(
        shader_key(&digest(9), &[6; 20], &CALL, &shaders()),
        base,
        "binary format"
    );
    let changes: [fn(&mut ShaderDesc); 6] = [
        |s| s.next_stage = 0,
        |s| s.stage.flags = 1,
        |s| s.stage.module = digest(77),
        |s| s.layout.set_layouts.push(Digest::NONE),
        |s| s.layout.push_constant_ranges[0].size = 4,
        |s| s.stage.required_subgroup_size = Some(32),
    ];
    for (i, change) in changes.iter().enumerate() {
        let mut changed = shaders();
        change(&mut changed[0]);
        assert_ne!(
            shader_key(&digest(9), &[7; 20], &CALL, &changed),
            base,
            "change {i}"
        );
    }
    let (mut one, mut other) = (shaders(), shaders());
    one.truncate(1);
    other.reverse();
    assert_ne!(
        shader_key(&digest(9), &[7; 20], &CALL, &one),
        base,
        "a shader fewer"
    );
    assert_ne!(
        shader_key(&digest(9), &[7; 20], &CALL, &other),
        base,
        "another order"
    );
    let with_compute = [0x20, 0x1, 0x10];
    assert_ne!(
        shader_key(&digest(9), &[7; 20], &with_compute, &shaders()),
        base,
        "a call with another shader beside them"
    );
}

#[test]
fn the_whole_device_state_takes_any_order_and_every_feature() {
    let state = DeviceState {
        extensions: vec![
            b"VK_EXT_shader_object".to_vec(),
            b"VK_KHR_maintenance5".to_vec(),
        ],
        features: vec![(1000482000, vec![1]), (53, vec![0, 1])],
        core_features: Some(vec![0; 55]),
        unknown: vec![],
    };
    let mut reordered = state.clone();
    reordered.extensions.reverse();
    reordered.features.reverse();
    assert_eq!(whole_device_digest(&reordered), whole_device_digest(&state));
    let mut other = state.clone();
    other.features[1].1[0] = 1;
    assert_ne!(whole_device_digest(&other), whole_device_digest(&state));
}

fn hexkey(k: PipelineKey) -> String {
    k.file_name().to_string()
}

// If these golden tests fail, keys moved: bump KEY_VERSION so old entries stop matching, then
// pin the new keys here. (Pinned for a 64-bit process: the ABI enters the state key.)
#[test]
#[cfg(target_pointer_width = "64")]
fn golden_keys_if_these_fail_bump_the_key_version() {
    assert_eq!(KEY_VERSION, 3);
    assert_eq!(
        hexkey(compute_key(&compute())),
        "7b1139fe9063b4c2039b095662f7c12a-b020ef117fe3f129acee0030ed107eb4.entry"
    );
    assert_eq!(
        hexkey(graphics_key(&graphics())),
        "d792db6fd7a38c9b24f9262011eeb9ed-ddd9b320fa5d4da1e3a83c2abd9d5bdd.entry"
    );
    assert_eq!(
        hexkey(shader_key(&digest(9), &[7; 20], &CALL, &shaders())),
        "d792db6fd7a38c9b24f9262011eeb9ed-d6e54b66ea6efe3259a9b3c2df75f5a2.entry"
    );
    assert_eq!(
        module_digest(&[0x03, 0x02, 0x23, 0x07]).half(),
        [78, 148, 252, 205, 223, 198, 178, 21, 128, 223, 92, 95, 173, 218, 74, 58],
        "the module digest"
    );
}

#[test]
fn flags_that_build_nothing_different_do_not_move_the_key() {
    let base = compute_key(&compute());
    for flag in [0x100u32, 0x200, 0x4, 0x2] {
        let mut c = compute();
        c.flags = flag;
        assert_eq!(compute_key(&c), base, "flag {flag:#x}");
    }
    let mut c = compute();
    c.flags = 0x1; // DISABLE_OPTIMIZATION builds something else
    assert_ne!(compute_key(&c), base);
}

#[test]
fn order_of_stages_bindings_spec_constants_and_dynamic_states_does_not_matter() {
    let base = graphics_key(&graphics());
    let mut g = graphics();
    g.stages.reverse();
    g.dynamic_states = vec![1, 0, 1];
    assert_eq!(graphics_key(&g), base);
    let mut s1 = stage(0x20, 1);
    s1.specialization = vec![
        SpecConstant {
            constant_id: 1,
            value: vec![1, 0, 0, 0],
        },
        SpecConstant {
            constant_id: 0,
            value: vec![2, 0, 0, 0],
        },
    ];
    let mut s2 = s1.clone();
    s2.specialization.reverse();
    let (mut a, mut b) = (compute(), compute());
    a.stage = s1;
    b.stage = s2;
    assert_eq!(compute_key(&a), compute_key(&b));
    let l1 = SetLayoutDesc {
        flags: 0,
        bindings: vec![
            BindingDesc {
                binding: 0,
                ..Default::default()
            },
            BindingDesc {
                binding: 1,
                descriptor_type: 7,
                ..Default::default()
            },
        ],
    };
    let mut l2 = l1.clone();
    l2.bindings.reverse();
    assert_eq!(set_layout_digest(&l1), set_layout_digest(&l2));
}

/// A named change to a description.
type Edit<T> = (&'static str, Box<dyn Fn(&mut T)>);

/// Applies each mutation to a fresh description and checks that every one gives a key of its
/// own: no hashed field is left out, and no two changes collide.
fn all_distinct<T: Clone>(base: T, key: impl Fn(&T) -> PipelineKey, edits: Vec<Edit<T>>) {
    let mut seen = vec![("base".to_string(), key(&base))];
    for (name, edit) in edits {
        let mut d = base.clone();
        edit(&mut d);
        let k = key(&d);
        if let Some((other, _)) = seen.iter().find(|(_, s)| *s == k) {
            panic!("changing {name} gave the same key as {other}");
        }
        seen.push((name.to_string(), k));
    }
}

macro_rules! edits {
    ($ty:ty; $($name:literal => |$d:ident| $body:expr),* $(,)?) => {
        vec![$(($name, Box::new(|$d: &mut $ty| { $body; }) as Box<dyn Fn(&mut $ty)>)),*]
    };
}

#[test]
fn changing_any_compute_field_moves_the_key() {
    all_distinct(
        compute(),
        compute_key,
        edits![ComputeDesc;
            "flags" => |d| d.flags = 1,
            "stage" => |d| d.stage.stage = 0x40,
            "stage flags" => |d| d.stage.flags = 1,
            "module" => |d| d.stage.module = digest(9),
            "entry point" => |d| d.stage.entry_point = b"main2".to_vec(),
            "entry point length" => |d| d.stage.entry_point = b"mai".to_vec(),
            "spec value" => |d| d.stage.specialization[0].value = 65u32.to_le_bytes().to_vec(),
            "spec value size" => |d| d.stage.specialization[0].value = vec![64],
            "spec id" => |d| d.stage.specialization[0].constant_id = 1,
            "spec gone" => |d| d.stage.specialization.clear(),
            "subgroup size" => |d| d.stage.required_subgroup_size = Some(64),
            "subgroup size 32" => |d| d.stage.required_subgroup_size = Some(32),
            "stage robustness" => |d| d.stage.robustness = Some(Robustness::default()),
            "layout" => |d| d.layout = digest(8),
            "robustness" => |d| d.robustness = Some(Robustness { images: 2, ..Default::default() }),
        ],
    );
}

#[test]
fn changing_any_graphics_field_moves_the_key() {
    all_distinct(
        graphics(),
        graphics_key,
        edits![GraphicsDesc;
            "flags" => |d| d.flags = 1,
            "a stage's module" => |d| d.stages[1].module = digest(7),
            "one stage fewer" => |d| { d.stages.pop(); },
            "vertex binding stride" => |d| d.vertex_input.as_mut().unwrap().bindings[0].stride = Some(16),
            "vertex stride dynamic" => |d| d.vertex_input.as_mut().unwrap().bindings[0].stride = None,
            "vertex input rate" => |d| d.vertex_input.as_mut().unwrap().bindings[0].input_rate = 1,
            "attribute format" => |d| d.vertex_input.as_mut().unwrap().attributes[0].format = 106,
            "attribute offset" => |d| d.vertex_input.as_mut().unwrap().attributes[0].offset = 4,
            "attribute location" => |d| d.vertex_input.as_mut().unwrap().attributes[0].location = 1,
            "vertex input absent" => |d| d.vertex_input = None,
            "topology" => |d| d.input_assembly.as_mut().unwrap().topology = 4,
            "restart" => |d| d.input_assembly.as_mut().unwrap().primitive_restart = Some(true),
            "tessellation" => |d| d.tessellation_patch_control_points = Some(3),
            "viewport count" => |d| d.viewport.as_mut().unwrap().viewport_count = Some(2),
            "viewports" => |d| d.viewport.as_mut().unwrap().viewports = Some(vec![[0.0, 0.0, 64.0, 64.0, 0.0, 1.0]]),
            "scissors" => |d| d.viewport.as_mut().unwrap().scissors = Some(vec![[0, 0, 64, 64]]),
            "depth clamp" => |d| d.rasterization.depth_clamp_enable = true,
            "discard" => |d| d.rasterization.rasterizer_discard_enable = Some(true),
            "polygon mode" => |d| d.rasterization.polygon_mode = 1,
            "cull mode" => |d| d.rasterization.cull_mode = Some(2),
            "front face" => |d| d.rasterization.front_face = Some(1),
            "depth bias enable" => |d| d.rasterization.depth_bias_enable = Some(true),
            "depth bias" => |d| d.rasterization.depth_bias = Some([1.0, 0.0, 0.0]),
            "line width" => |d| d.rasterization.line_width = Some(2.0),
            "samples" => |d| d.multisample.as_mut().unwrap().rasterization_samples = 4,
            "sample shading" => |d| d.multisample.as_mut().unwrap().sample_shading_enable = true,
            "min sample shading" => |d| d.multisample.as_mut().unwrap().min_sample_shading = 0.5,
            "sample mask" => |d| d.multisample.as_mut().unwrap().sample_mask = Some(vec![1]),
            "alpha to coverage" => |d| d.multisample.as_mut().unwrap().alpha_to_coverage_enable = true,
            "alpha to one" => |d| d.multisample.as_mut().unwrap().alpha_to_one_enable = true,
            "depth test" => |d| d.depth_stencil.as_mut().unwrap().depth_test_enable = Some(false),
            "depth write" => |d| d.depth_stencil.as_mut().unwrap().depth_write_enable = Some(false),
            "depth compare" => |d| d.depth_stencil.as_mut().unwrap().depth_compare_op = Some(3),
            "depth bounds test" => |d| d.depth_stencil.as_mut().unwrap().depth_bounds_test_enable = Some(true),
            "stencil test" => |d| d.depth_stencil.as_mut().unwrap().stencil_test_enable = Some(true),
            "front stencil ops" => |d| d.depth_stencil.as_mut().unwrap().front.ops = Some([1, 0, 0, 7]),
            "back stencil compare" => |d| d.depth_stencil.as_mut().unwrap().back.ops = Some([0, 0, 0, 6]),
            "front compare mask" => |d| d.depth_stencil.as_mut().unwrap().front.compare_mask = Some(1),
            "back write mask" => |d| d.depth_stencil.as_mut().unwrap().back.write_mask = Some(1),
            "front reference" => |d| d.depth_stencil.as_mut().unwrap().front.reference = Some(1),
            "depth bounds" => |d| d.depth_stencil.as_mut().unwrap().depth_bounds = Some([0.5, 1.0]),
            "logic op enable" => |d| d.color_blend.as_mut().unwrap().logic_op_enable = true,
            "logic op" => |d| d.color_blend.as_mut().unwrap().logic_op = Some(3),
            "blend enable" => |d| d.color_blend.as_mut().unwrap().attachments[0].blend_enable = true,
            "src color factor" => |d| d.color_blend.as_mut().unwrap().attachments[0].src_color_factor = 1,
            "dst alpha factor" => |d| d.color_blend.as_mut().unwrap().attachments[0].dst_alpha_factor = 1,
            "alpha op" => |d| d.color_blend.as_mut().unwrap().attachments[0].alpha_op = 1,
            "write mask" => |d| d.color_blend.as_mut().unwrap().attachments[0].color_write_mask = 1,
            "blend constants" => |d| d.color_blend.as_mut().unwrap().blend_constants = Some([1.0, 0.0, 0.0, 0.0]),
            "a second attachment" => |d| d.color_blend.as_mut().unwrap().attachments.push(BlendAttachment::default()),
            "dynamic states" => |d| d.dynamic_states.push(2),
            "layout" => |d| d.layout = digest(1),
            "render pass" => |d| d.target = RenderTarget::Pass { pass: digest(7), subpass: 0 },
            "subpass" => |d| d.target = RenderTarget::Pass { pass: digest(6), subpass: 1 },
            "dynamic rendering" => |d| d.target = RenderTarget::Dynamic { view_mask: 0, color_formats: vec![37], depth_format: 0, stencil_format: 0 },
            "robustness" => |d| d.robustness = Some(Robustness::default()),
        ],
    );
}

#[test]
fn a_compute_and_a_graphics_pipeline_never_share_a_state_key() {
    let mut g = graphics();
    g.stages = vec![stage(0x20, 1)];
    assert_ne!(compute_key(&compute()).state, graphics_key(&g).state);
}

#[test]
fn dynamic_states_outside_the_known_set_are_unkeyable() {
    assert!(Dynamic::from_states(&[0, 1, 1000267000]).is_ok());
    assert_eq!(
        Dynamic::from_states(&[1000455013]),
        Err(Unkeyable::UnknownDynamicState(1000455013))
    );
    let d = Dynamic::from_states(&[0]).unwrap();
    assert_eq!(d.unless(ash::vk::DynamicState::VIEWPORT, 1), None);
    assert_eq!(d.unless(ash::vk::DynamicState::SCISSOR, 1), Some(1));
}

#[test]
fn an_entry_name_is_two_128_bit_hex_keys() {
    let name = compute_key(&compute()).file_name();
    assert_eq!(name.len(), ENTRY_NAME_LEN);
    assert!(PipelineKey::from_file_name(&name).is_some());
}
