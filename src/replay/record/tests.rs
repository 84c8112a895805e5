//! The record's tests: entries written and read back, appends after a cut or damage, the pending
//! mark, compaction to a share, configurations and their links.

use std::collections::HashSet;
use std::path::Path;
use std::time::SystemTime;

use serde_json::json;

use super::configuration::{application, device_json, payload_hash};
use super::*;
use crate::key::desc::{
    BindingDesc, PushRange, RayTracingDesc, Robustness, ShaderDesc, SpecConstant, StageDesc,
};
use crate::replay::objects::{Catalog, TAG_APPLICATION, TAG_COMPUTE, TAG_LINK};

/// The database entries of one pipeline and its objects, as a batch of its own writes them.
fn pipeline_entries(record: &PipelineRecord, app: &AppState) -> Result<Vec<DbEntry>, NotRecorded> {
    Batch::default().entries(record, &AppEntry::of(app))
}

fn record() -> PipelineRecord {
    let (module, set, layout) = (Digest([1; 32]), Digest([2; 32]), Digest([3; 32]));
    PipelineRecord {
        key: PipelineKey {
            spirv: [4; 16],
            state: [5; 16],
        },
        desc: Recorded::Compute(ComputeDesc {
            device: Digest([9; 32]),
            flags: 0,
            stage: StageDesc {
                stage: 0x20,
                flags: 0,
                module,
                entry_point: b"main".to_vec(),
                specialization: vec![SpecConstant {
                    constant_id: 3,
                    value: vec![1, 0, 0, 0],
                }],
                required_subgroup_size: None,
                robustness: None,
            },
            layout,
            robustness: None,
        }),
        contents: vec![
            (
                module,
                Arc::new(Content::Module(vec![0x0723_0203, 0x10000, 7, 8, 9])),
            ),
            (
                set,
                Arc::new(Content::SetLayout(SetLayoutDesc {
                    flags: 0,
                    bindings: vec![BindingDesc {
                        binding: 0,
                        descriptor_type: 7,
                        descriptor_count: 1,
                        stage_flags: 0x20,
                        binding_flags: 0,
                        immutable_samplers: None,
                    }],
                })),
            ),
            (
                layout,
                Arc::new(Content::PipelineLayout(PipelineLayoutDesc {
                    flags: 0,
                    set_layouts: vec![set],
                    push_constant_ranges: vec![PushRange {
                        stage_flags: 0x20,
                        offset: 0,
                        size: 16,
                    }],
                })),
            ),
        ],
    }
}

#[test]
fn a_recorded_pipeline_reads_back_with_every_object_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = RecordFile::new(dir.path());
    let app = AppState::default();
    let entries = pipeline_entries(&record(), &app).unwrap();
    assert_eq!(file.append(entries.clone(), 1).unwrap(), entries.len());
    assert_eq!(file.append(entries, 1).unwrap(), 0, "each object once");
    let catalog = catalog_of(file.path());
    assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
    assert_eq!(catalog.compute.len(), 1);
    assert_eq!(catalog.set_layouts.len(), 1);
    assert_eq!(catalog.pipeline_layouts.len(), 1);
    assert_eq!(
        catalog.shader_modules.values().next().unwrap().as_deref(),
        Some(&[0x0723_0203, 0x10000, 7, 8, 9][..])
    );
    let pipeline = catalog.compute[0].1.as_ref().unwrap();
    assert_eq!(
        pipeline["stage"]["specializationInfo"]["mapEntries"][0]["size"],
        4
    );
}

#[test]
fn a_record_cut_inside_its_last_entry_keeps_what_is_whole_and_appends_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = RecordFile::new(dir.path());
    let entries = pipeline_entries(&record(), &AppState::default()).unwrap();
    file.append(entries.clone(), 1).unwrap();
    let whole = std::fs::read(file.path()).unwrap();
    let last_len = whole.len()
        - crate::replay::foz::read_database(&whole[..whole.len() - 1])
            .unwrap()
            .1;
    for cut in 1..last_len {
        let bytes = &whole[..whole.len() - cut];
        let read = crate::replay::foz::read_entries(bytes).unwrap();
        assert_eq!(read.len(), entries.len() - 1, "cut {cut} bytes off");
    }
    std::fs::write(file.path(), &whole[..whole.len() - 7]).unwrap();
    let again = RecordFile::new(dir.path());
    assert_eq!(
        again.append(entries.clone(), 1).unwrap(),
        1,
        "the cut one again"
    );
    let read = crate::replay::foz::read_entries(&std::fs::read(file.path()).unwrap()).unwrap();
    assert_eq!(read.len(), entries.len());
}

#[test]
fn a_record_made_but_not_yet_written_reads_as_empty_and_the_next_append_fills_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = RecordFile::new(dir.path());
    // What a pending mark leaves before the first append lands, and a header cut short.
    file.mark_pending().unwrap();
    assert_eq!(read(file.path()).unwrap().1, 0);
    assert!(read(file.path()).unwrap().0.is_empty());
    std::fs::write(file.path(), &crate::replay::foz::MAGIC[..5]).unwrap();
    assert!(read(file.path()).unwrap().0.is_empty());
    let entries = pipeline_entries(&record(), &AppState::default()).unwrap();
    assert_eq!(file.append(entries.clone(), 1).unwrap(), entries.len());
    assert_eq!(read(file.path()).unwrap().0.len(), entries.len());
}

/// Issue 31, item 4: the record is at most a Fossilize database of the same pipelines, whose
/// payloads Fossilize deflates (flag 2): so are the record's, where that makes them smaller.
#[test]
fn payloads_are_stored_deflated_as_fossilize_stores_them_and_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let file = RecordFile::new(dir.path());
    let mut r = record();
    // A module of the size and repetition of real SPIR-V.
    let code: Vec<u32> = (0..4000u32).map(|i| 0x0723_0203 ^ (i % 17)).collect();
    r.contents[0].1 = Arc::new(Content::Module(code.clone()));
    let entries = pipeline_entries(&r, &AppState::default()).unwrap();
    let stored = crate::replay::foz::write_entries(&entries).len() as u64;
    file.append(entries.clone(), 1).unwrap();
    let bytes = std::fs::read(file.path()).unwrap();
    assert!(
        (bytes.len() as u64) * 4 < stored,
        "{} bytes written where stored payloads take {stored}",
        bytes.len()
    );
    let read = crate::replay::foz::read_entries(&bytes).unwrap();
    let payloads: Vec<_> = read.into_iter().map(|e| e.payload.unwrap()).collect();
    let expected: Vec<_> = entries.into_iter().map(|e| e.2).collect();
    assert_eq!(payloads, expected);
    let catalog = catalog_of(file.path());
    assert_eq!(
        catalog.shader_modules.values().next().unwrap().as_deref(),
        Some(&code[..])
    );
}

/// Issue 31, item 3: an append after damage in the middle of the record keeps every whole
/// entry after the damage (it cut the file at the damage: a 16-byte record), and writes again
/// what the damage cost.
#[test]
fn an_append_after_damage_inside_the_record_keeps_what_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = RecordFile::new(dir.path());
    let hashes = recorded(&file, 40);
    let mut bytes = std::fs::read(file.path()).unwrap();
    let len = bytes.len();
    bytes[16..216].fill(0x5a);
    std::fs::write(file.path(), &bytes).unwrap();
    let again = RecordFile::new(dir.path());
    again
        .append(
            pipeline_entries(&nth_record(0), &AppState::default()).unwrap(),
            1,
        )
        .unwrap();
    assert!(std::fs::metadata(file.path()).unwrap().len() as usize >= len);
    let catalog = catalog_of(file.path());
    let kept: HashSet<u64> = catalog.compute.iter().map(|(h, _)| *h).collect();
    assert!(
        hashes.iter().filter(|h| kept.contains(h)).count() >= 36,
        "{} of 40 pipelines left",
        kept.len()
    );
    assert!(kept.contains(&hashes[39]) && kept.contains(&hashes[0]));
}

/// The test pipeline with its own module and key (`n`, below 156), sharing the layout and set
/// layout.
pub(crate) fn nth_record(n: u8) -> PipelineRecord {
    let mut r = record();
    r.key.spirv = [n; 16];
    let module = Digest([100 + n; 32]);
    if let Recorded::Compute(d) = &mut r.desc {
        d.stage.module = module;
    }
    r.contents[0] = (
        module,
        Arc::new(Content::Module(vec![0x0723_0203, u32::from(n)])),
    );
    r
}

fn recorded(file: &RecordFile, pipelines: u8) -> Vec<u64> {
    (0..pipelines)
        .map(|n| {
            let r = nth_record(n);
            file.append(pipeline_entries(&r, &AppState::default()).unwrap(), 1)
                .unwrap();
            pipeline_hash(&r.key)
        })
        .collect()
}

fn catalog_of(path: &Path) -> Catalog {
    Catalog::from_entries(crate::replay::foz::read_entries(&std::fs::read(path).unwrap()).unwrap())
}

/// Stamps of the order of use: `hashes[i]` used `i`-th (newest stamp first), for the first
/// `with_entries` of them; the rest have no entry.
fn used_in_order(hashes: &[u64], with_entries: usize) -> impl Fn(u64) -> Option<SystemTime> {
    let stamps: std::collections::HashMap<u64, SystemTime> = hashes[..with_entries]
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let secs = 1_700_000_000 - i as u64;
            (
                *h,
                SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs),
            )
        })
        .collect();
    move |h| stamps.get(&h).copied()
}

/// Issue 31, item 2: a record past its share is compacted to it in the entries' order of
/// use: the pipelines without an entry first, then the last used; the first used (a boot's)
/// stay, with every object they name.
#[test]
fn a_record_past_its_share_keeps_the_first_used_pipelines_with_every_object_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut hashes = recorded(&RecordFile::new(dir.path()), 8);
    // Used in another order than recorded: the last recorded was used first.
    hashes.reverse();
    let len = std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len();
    let share = len * 6 / 10;
    let opening = RecordFile::new(dir.path());
    let done = opening
        .compact_to_share(share, false, &used_in_order(&hashes, 6))
        .unwrap()
        .expect("past its share: compacted");
    assert!(done.bytes_after <= share, "{done:?} share {share}");
    assert_eq!(
        std::fs::metadata(opening.path()).unwrap().len(),
        done.bytes_after
    );
    let catalog = catalog_of(opening.path());
    assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
    let kept: HashSet<u64> = catalog.compute.iter().map(|(h, _)| *h).collect();
    assert!(kept.len() >= 2 && kept.len() < 6, "{} kept", kept.len());
    assert_eq!(done.pipelines_kept, kept.len());
    let first: HashSet<u64> = hashes[..kept.len()].iter().copied().collect();
    assert_eq!(kept, first, "the first used kept, in order");
    assert_eq!(
        catalog.shader_modules.len(),
        kept.len(),
        "the dropped' modules went"
    );
    assert_eq!(
        catalog.pipeline_layouts.len(),
        1,
        "the shared layout stayed"
    );
    assert_eq!(catalog.set_layouts.len(), 1, "and the set layout it names");
    assert!(!dir.path().join("record.foz.tmp").exists());
}

/// Issue 31, item 3: a record within its share is never compacted, whatever became of its
/// entries (removed by hand, `pipekeep clear`, a driver change): it was compacted once most of
/// its pipelines had no entry. Nor while a rebuild is owed, nor once this process appended.
#[test]
fn a_record_within_its_share_waiting_for_a_rebuild_or_appended_to_is_not_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let hashes = recorded(&RecordFile::new(dir.path()), 4);
    let len = std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len();
    let file = RecordFile::new(dir.path());
    let none = used_in_order(&hashes, 0);
    assert_eq!(
        file.compact_to_share(len, false, &none).unwrap(),
        None,
        "within its share, no entry left"
    );
    file.mark_pending().unwrap();
    assert_eq!(
        file.compact_to_share(len / 2, false, &none).unwrap(),
        None,
        "a rebuild is owed"
    );
    assert!(file
        .clear_pending_unless_grown(std::fs::metadata(file.path()).unwrap().len())
        .unwrap());
    let appender = RecordFile::new(dir.path());
    appender
        .append(
            pipeline_entries(&nth_record(9), &AppState::default()).unwrap(),
            1,
        )
        .unwrap();
    assert_eq!(
        appender.compact_to_share(len / 2, false, &none).unwrap(),
        None,
        "this process appended"
    );
    assert!(appender.appended_here());
    assert!(!file.appended_here());
    assert!(RecordFile::new(dir.path())
        .compact_to_share(len / 2, false, &none)
        .unwrap()
        .is_some());
}

/// `pipekeep verify --fix`: a record within its share holding damaged entries is rewritten
/// without them (and without what only they named).
#[test]
fn a_damaged_record_is_rewritten_whole_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let hashes = recorded(&RecordFile::new(dir.path()), 4);
    let path = dir.path().join(FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let file = RecordFile::new(dir.path());
    let used = used_in_order(&hashes, 4);
    assert_eq!(file.compact_to_share(1 << 20, false, &used).unwrap(), None);
    let done = file
        .compact_to_share(1 << 20, true, &used)
        .unwrap()
        .expect("damaged: rewritten");
    assert_eq!(done.pipelines_kept, done.pipelines_before);
    assert!(done.bytes_after < done.bytes_before);
    let (entries, _) = read(&path).unwrap();
    assert!(entries.iter().all(|e| e.payload.is_ok()));
}

#[test]
fn the_pending_mark_stays_when_the_record_grew_after_the_rebuild_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = RecordFile::new(dir.path());
    recorded(&file, 1);
    let read_len = std::fs::metadata(file.path()).unwrap().len();
    file.mark_pending().unwrap();
    assert!(file.is_pending());
    file.append(
        pipeline_entries(&nth_record(7), &AppState::default()).unwrap(),
        1,
    )
    .unwrap();
    assert!(file.is_pending());
    assert!(!file.clear_pending_unless_grown(read_len).unwrap());
    assert!(file.is_pending());
    let now = std::fs::metadata(file.path()).unwrap().len();
    assert!(file.clear_pending_unless_grown(now).unwrap());
    assert!(!file.is_pending());
}

/// `r` as the record writes it, read back as the replay reads it (with no problem).
fn written_and_read_back(r: &PipelineRecord) -> Catalog {
    let entries = pipeline_entries(r, &AppState::default()).unwrap();
    let bytes = crate::replay::foz::write_entries(&entries);
    let catalog = Catalog::from_entries(crate::replay::foz::read_entries(&bytes).unwrap());
    assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
    catalog
}

#[test]
fn a_sampler_with_a_reduction_mode_is_recorded_as_fossilize_writes_it() {
    let sampler = Digest([7; 32]);
    let mut r = record();
    for (_, content) in r.contents.iter_mut() {
        if let Content::SetLayout(l) = &**content {
            let mut l = l.clone();
            l.bindings[0].descriptor_type = 1; // combined image sampler
            l.bindings[0].immutable_samplers = Some(vec![sampler]);
            *content = Arc::new(Content::SetLayout(l));
        }
    }
    let desc = SamplerDesc {
        reduction_mode: Some(1),
        ..SamplerDesc::default()
    };
    r.contents.push((sampler, Arc::new(Content::Sampler(desc))));
    let catalog = written_and_read_back(&r);
    let written = catalog.samplers.values().next().unwrap().as_ref().unwrap();
    assert_eq!(
        written["pNext"],
        json!([{ "sType": 1_000_130_001, "reductionMode": 1 }])
    );
}

#[test]
fn pipeline_robustness_is_recorded_on_the_pipeline_and_on_its_stage() {
    let mut r = record();
    let Recorded::Compute(d) = &mut r.desc else {
        unreachable!()
    };
    let on_pipeline = Robustness {
        storage_buffers: 1,
        uniform_buffers: 2,
        vertex_inputs: 3,
        images: 1,
    };
    d.robustness = Some(on_pipeline);
    d.stage.robustness = Some(Robustness {
        storage_buffers: 2,
        ..Robustness::default()
    });
    d.stage.required_subgroup_size = Some(32);
    let catalog = written_and_read_back(&r);
    let written = catalog.compute[0].1.as_ref().unwrap();
    assert_eq!(
        written["pNext"],
        json!([{ "sType": 1_000_068_000, "storageBuffers": 1, "uniformBuffers": 2,
                 "vertexInputs": 3, "images": 1 }])
    );
    assert_eq!(
        written["stage"]["pNext"],
        json!([
            { "sType": 1_000_225_001, "requiredSubgroupSize": 32 },
            { "sType": 1_000_068_000, "storageBuffers": 2, "uniformBuffers": 0,
              "vertexInputs": 0, "images": 0 },
        ])
    );
}

#[test]
fn a_writer_that_knew_the_record_before_a_compaction_writes_again_what_it_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let other_process = RecordFile::new(dir.path());
    let hashes = recorded(&other_process, 4);
    let len = std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len();
    RecordFile::new(dir.path())
        .compact_to_share(len / 2, false, &used_in_order(&hashes, 1))
        .unwrap()
        .expect("compacted");
    // The other process knew pipeline 3's module; the compaction dropped it.
    let again = nth_record(3);
    assert!(
        other_process
            .append(pipeline_entries(&again, &AppState::default()).unwrap(), 1)
            .unwrap()
            > 0
    );
    let catalog = catalog_of(other_process.path());
    assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
    let kept: HashSet<u64> = catalog.compute.iter().map(|(h, _)| *h).collect();
    assert!(kept.contains(&hashes[0]) && kept.contains(&pipeline_hash(&again.key)));
    assert_eq!(catalog.shader_modules.len(), kept.len());
}

/// A configuration of its own: the application `name`, robust buffer access as `robust`.
fn configuration(name: &str, robust: bool) -> AppState {
    let device = crate::key::desc::DeviceState {
        extensions: vec![b"VK_KHR_maintenance5".to_vec()],
        features: vec![(1_000_470_000, vec![1])],
        core_features: Some(std::iter::once(u32::from(robust)).chain([0; 54]).collect()),
        unknown: Vec::new(),
    };
    let mut app = AppState::from_device(Some(name.into()), &device);
    app.application.engine_name = Some("engine".into());
    app.application.engine_version = 3;
    app.application.version = 2;
    app.application.api_version = (1 << 22) | (1 << 12);
    app
}

// If this golden test fails, the record's bytes changed: Fossilize's tools and older
// pipekeeps read them (docs/FORMAT.md, "The record").
#[test]
fn golden_configuration_and_link_bytes_if_these_fail_the_record_format_changed() {
    let app = configuration("a game", true);
    let entries = pipeline_entries(&record(), &app).unwrap();
    let (tag, hash, payload) = &entries[0];
    assert_eq!(*tag, TAG_APPLICATION);
    assert_eq!(
        String::from_utf8(payload.clone()).unwrap(),
        [
            r#"{"applicationInfo":{"apiVersion":4198400,"applicationName":"a game","#,
            r#""applicationVersion":2,"engineName":"engine","engineVersion":3},"#,
            r#""physicalDeviceFeatures":{"pNext":[],"robustBufferAccess":1},"#,
            &format!(r#""pipekeepAbi":{},"#, crate::store::identity::HOST_ABI),
            r#""pipekeepDevice":{"coreFeatures":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"#,
            r#"0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"#,
            r#""extensions":["VK_KHR_maintenance5"],"#,
            r#""features":[{"sType":1000470000,"values":[1]}]},"version":6}"#
        ]
        .concat()
    );
    assert_eq!(*hash, configuration_hash(&app));
    let pipeline = pipeline_hash(&record().key);
    let (tag, link, payload) = entries.last().unwrap();
    assert_eq!(
        (*tag, *link),
        (TAG_LINK, link_hash(*hash, TAG_COMPUTE, pipeline))
    );
    assert_eq!(
        String::from_utf8(payload.clone()).unwrap(),
        format!(
            r#"{{"link":{{"application":"{hash:016x}","hash":"{pipeline:016x}","tag":7}},"version":6}}"#
        )
    );
    // Fossilize's own hash of a link (its Hasher, FNV-1a over 32-bit words), worked out
    // apart from this code.
    assert_eq!(
        link_hash(0x0123_4567_89ab_cdef, 7, 0xfedc_ba98_7654_3210),
        0xd966_33e5_e15c_9cca
    );
}

#[test]
fn each_configuration_is_one_entry_and_a_pipeline_is_linked_once_to_each() {
    let dir = tempfile::tempdir().unwrap();
    let file = RecordFile::new(dir.path());
    let (first, second) = (
        configuration("a game", false),
        configuration("a game", true),
    );
    assert_ne!(configuration_hash(&first), configuration_hash(&second));
    let under_first = pipeline_entries(&record(), &first).unwrap();
    assert_eq!(
        file.append(under_first.clone(), 1).unwrap(),
        under_first.len()
    );
    assert_eq!(
        file.append(under_first, 1).unwrap(),
        0,
        "once a configuration"
    );
    let other = nth_record(1);
    file.append(pipeline_entries(&other, &first).unwrap(), 1)
        .unwrap();
    // The same pipeline (its key) under another configuration: only the configuration and
    // the link are new.
    assert_eq!(
        file.append(pipeline_entries(&record(), &second).unwrap(), 1)
            .unwrap(),
        2
    );
    let catalog = catalog_of(file.path());
    assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
    assert_eq!((catalog.applications.len(), catalog.links.len()), (2, 3));
    let configs = catalog.configurations();
    let pipelines = |c: &crate::replay::objects::Configuration| {
        let mut p: Vec<u64> = c.catalog.compute.iter().map(|(h, _)| *h).collect();
        p.sort_unstable();
        p
    };
    assert_eq!(configs.len(), 2);
    assert_eq!(configs[0].hash, Some(configuration_hash(&first)));
    let mut both = vec![pipeline_hash(&record().key), pipeline_hash(&other.key)];
    both.sort_unstable();
    assert_eq!(pipelines(&configs[0]), both);
    assert_eq!(pipelines(&configs[1]), vec![pipeline_hash(&record().key)]);
    let app = configs[1].app.as_ref().unwrap();
    assert_eq!(
        (
            app.name.as_deref(),
            app.engine.as_deref(),
            app.engine_version,
            app.version
        ),
        (Some("a game"), Some("engine"), 3, 2)
    );
    assert_eq!(app.api_version, (1 << 22) | (1 << 12));
    assert_eq!(app.device, second.device);
    // The background rebuild of a device takes its own configuration's pipelines only.
    let (mine, others) = catalog
        .clone()
        .into_configuration(&[configuration_hash(&second)]);
    assert_eq!(
        (mine.compute.len(), others),
        (1, vec![pipeline_hash(&other.key)])
    );
    // Compaction keeps a live pipeline's links, and drops a dead one's.
    let live = pipeline_hash(&record().key);
    let kept = live_part(read(file.path()).unwrap().0, &|h| h == live);
    let compacted = crate::replay::objects::Catalog::from_entries(
        crate::replay::foz::read_entries(&crate::replay::foz::write_entries(&kept)).unwrap(),
    );
    assert_eq!((compacted.compute.len(), compacted.links.len()), (1, 2));
    // A configuration left with no pipeline is not made for nothing.
    let only_first = pipeline_hash(&other.key);
    let kept = live_part(read(file.path()).unwrap().0, &|h| h == only_first);
    let compacted = crate::replay::objects::Catalog::from_entries(
        crate::replay::foz::read_entries(&crate::replay::foz::write_entries(&kept)).unwrap(),
    );
    assert_eq!(compacted.applications.len(), 2);
    let configs = compacted.configurations();
    assert_eq!(configs.len(), 1);
    assert_eq!(configs[0].hash, Some(configuration_hash(&first)));
}

/// Issue 31, item 3: a damaged configuration entry costs its own pipelines in `pipekeep
/// rebuild` (they wait for the application's background rebuild, which knows its device),
/// never a rebuild of them under another configuration's device (wrong keys, found by no
/// run, and recorded again under that configuration).
#[test]
fn pipelines_of_a_damaged_configuration_go_under_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let file = RecordFile::new(dir.path());
    let (first, second) = (
        configuration("a game", false),
        configuration("a game", true),
    );
    file.append(pipeline_entries(&record(), &first).unwrap(), 1)
        .unwrap();
    let other = nth_record(1);
    file.append(pipeline_entries(&other, &second).unwrap(), 1)
        .unwrap();
    let mut entries = read(file.path()).unwrap().0;
    let damaged = configuration_hash(&second);
    for e in &mut entries {
        if e.tag == TAG_APPLICATION && e.hash == damaged {
            e.payload = Err(crate::replay::foz::EntryError::BadName);
        }
    }
    let catalog = crate::replay::objects::Catalog::from_entries(entries);
    let configs = catalog.configurations();
    assert_eq!(configs.len(), 1);
    let under: Vec<u64> = configs[0].catalog.compute.iter().map(|(h, _)| *h).collect();
    assert_eq!(under, vec![pipeline_hash(&record().key)]);
    assert_eq!(catalog.orphans(), 1);
}

#[test]
fn an_older_record_of_one_application_and_no_links_still_reads_as_one_configuration() {
    // As pipekeep wrote it before configurations: the application entry under hash 1, its
    // name the title, API 1.3, no link.
    let old_app = br#"{"version":6,"applicationInfo":{"applicationName":"old-title","apiVersion":4206592},"physicalDeviceFeatures":{"robustBufferAccess":0,"pNext":[]},"pipekeepDevice":{"extensions":[],"features":[{"sType":53,"values":[0,0,0,0,0,0,0,0,0,0,0,0,1,0,0]}],"coreFeatures":null}}"#;
    let mut entries: Vec<DbEntry> = pipeline_entries(&nth_record(1), &AppState::default())
        .unwrap()
        .into_iter()
        .filter(|(tag, _, _)| *tag != TAG_LINK && *tag != TAG_APPLICATION)
        .collect();
    entries.insert(0, (TAG_APPLICATION, 1, old_app.to_vec()));
    entries.extend(
        pipeline_entries(&nth_record(2), &AppState::default())
            .unwrap()
            .into_iter()
            .filter(|(tag, _, _)| *tag != TAG_LINK && *tag != TAG_APPLICATION),
    );
    let bytes = crate::replay::foz::write_entries(&entries);
    let catalog = Catalog::from_entries(crate::replay::foz::read_entries(&bytes).unwrap());
    assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
    let configs = catalog.configurations();
    assert_eq!(configs.len(), 1);
    assert_eq!(configs[0].hash, Some(1));
    assert_eq!(configs[0].catalog.compute.len(), 2);
    let app = configs[0].app.as_ref().unwrap();
    assert_eq!(app.name.as_deref(), Some("old-title"));
    assert_eq!(app.api_version, 4206592);
    let device = app.device.as_ref().unwrap();
    assert!(device.unknown.is_empty());
    assert_eq!(device.features[0].0, 53);
    let (all, others) = catalog.clone().into_configuration(&[12345]);
    assert_eq!((all.compute.len(), others), (2, vec![]));
    // A new run appends under its configuration: the older pipelines stay under the first.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(FILE_NAME), &bytes).unwrap();
    let file = RecordFile::new(dir.path());
    let new = configuration("old-title", false);
    file.append(pipeline_entries(&nth_record(3), &new).unwrap(), 1)
        .unwrap();
    let configs = catalog_of(file.path()).configurations();
    assert_eq!(configs.len(), 2);
    assert_eq!(
        (
            configs[0].catalog.compute.len(),
            configs[1].catalog.compute.len()
        ),
        (2, 1)
    );
}

#[test]
fn a_device_state_with_structures_the_layer_does_not_know_is_kept_with_their_stypes() {
    let state = crate::key::desc::DeviceState {
        extensions: vec![b"VK_B".to_vec(), b"VK_A".to_vec()],
        // maintenance5's (one VkBool32), robustness2's (three)
        features: vec![(1_000_470_000, vec![1]), (1_000_286_000, vec![0, 1, 0])],
        core_features: None,
        unknown: vec![1_000_295_002],
    };
    let app = AppState::from_device(None, &state);
    let device = app.device.as_ref().unwrap();
    assert_eq!(device.extensions, vec![b"VK_A".to_vec(), b"VK_B".to_vec()]);
    assert_eq!(device.features[0].0, 1_000_286_000);
    let back = device_from_json(&device_json(device)).unwrap();
    assert_eq!(&back, device);
    assert_eq!(back.unknown, vec![1_000_295_002]);
}

#[test]
fn a_device_whose_feature_structure_is_cut_short_is_refused() {
    let robustness2 = 1_000_286_000;
    let whole = serde_json::json!({
        "extensions": [], "coreFeatures": null,
        "features": [{ "sType": robustness2, "values": [1, 1, 0] }],
    });
    assert!(device_from_json(&whole).is_some());
    let short = serde_json::json!({
        "extensions": [], "coreFeatures": null,
        "features": [{ "sType": robustness2, "values": [1] }],
    });
    assert!(
        device_from_json(&short).is_none(),
        "the driver would read past it"
    );
    let unknown = serde_json::json!({
        "extensions": [], "coreFeatures": null,
        "features": [{ "sType": 1_999_999_000, "values": [1] }],
    });
    assert!(device_from_json(&unknown).is_none());
    let core = serde_json::json!({ "extensions": [], "features": [], "coreFeatures": [1, 0] });
    assert!(device_from_json(&core).is_none());
}

#[test]
fn a_configuration_says_the_abi_that_recorded_it() {
    let catalog = written_and_read_back(&record());
    let app = catalog.app.expect("an application entry");
    assert_eq!(app.abi, crate::store::identity::HOST_ABI);
    // A configuration of the other ABI is another configuration.
    let mut doc: serde_json::Value =
        serde_json::from_slice(&application(&AppState::default())).unwrap();
    assert_eq!(doc[ABI_KEY], crate::store::identity::HOST_ABI);
    doc[ABI_KEY] = serde_json::json!(12 - crate::store::identity::HOST_ABI);
    assert_ne!(
        payload_hash(&serde_json::to_vec(&doc).unwrap()),
        configuration_hash(&AppState::default())
    );
}

/// A ray-tracing pipeline of the test record's module and layout: a ray-generation stage
/// (specialized) and a miss stage, their two general groups, a library interface and the stack
/// size dynamic; linking `libraries` (a library, with `library`, instead: the LIBRARY flag, its
/// one closest-hit stage and hit group).
fn ray_tracing_desc(library: bool, libraries: Vec<PipelineKey>) -> RayTracingDesc {
    let module = Digest([1; 32]);
    let stage = |stage: u32, specialization: Vec<SpecConstant>| StageDesc {
        stage,
        flags: 0,
        module,
        entry_point: b"main".to_vec(),
        specialization,
        required_subgroup_size: None,
        robustness: None,
    };
    let unused = ash::vk::SHADER_UNUSED_KHR;
    let general = |index: u32| crate::key::desc::RayTracingGroup {
        group_type: 0,
        general: index,
        closest_hit: unused,
        any_hit: unused,
        intersection: unused,
    };
    let (flags, stages, groups) = if library {
        let hit = crate::key::desc::RayTracingGroup {
            group_type: 1,
            general: unused,
            closest_hit: 0,
            any_hit: unused,
            intersection: unused,
        };
        (0x800, vec![stage(0x400, Vec::new())], vec![hit])
    } else {
        let spec = vec![SpecConstant {
            constant_id: 0,
            value: 1.5f32.to_le_bytes().to_vec(),
        }];
        (
            0,
            vec![stage(0x100, spec), stage(0x800, Vec::new())],
            vec![general(0), general(1)],
        )
    };
    RayTracingDesc {
        device: Digest([9; 32]),
        flags,
        stages,
        groups,
        max_recursion_depth: 1,
        library_interface: Some([12, 8]),
        dynamic_states: vec![1_000_347_000],
        layout: Digest([3; 32]),
        libraries,
        robustness: None,
    }
}

/// [`ray_tracing_desc`] as a record with the test record's objects, under `key`.
fn ray_tracing_record(key: PipelineKey, desc: RayTracingDesc) -> PipelineRecord {
    PipelineRecord {
        key,
        desc: Recorded::RayTracing(Box::new(desc)),
        contents: record().contents,
    }
}

const LIBRARY_KEY: PipelineKey = PipelineKey {
    spirv: [0x11; 16],
    state: [0x22; 16],
};

/// Issue 39: a ray-tracing pipeline is written as Fossilize writes one (`json_value(const
/// VkRayTracingPipelineCreateInfoKHR&)`, whose replayer reads the members by these names): the
/// document of tag 9, its libraries named by their pipelines' hashes in `libraryInfo` (a
/// member, no sType). If this fails, the record's format changed.
#[test]
fn golden_ray_tracing_document_in_fossilizes_field_names() {
    let d = ray_tracing_desc(false, vec![LIBRARY_KEY]);
    let doc = super::documents::ray_tracing_doc(0x0123_4567_89ab_cdef, &d).unwrap();
    let library = format!("{:016x}", pipeline_hash(&LIBRARY_KEY));
    let module = format!("{:016x}", object_hash(&Digest([1; 32])));
    let layout = format!("{:016x}", object_hash(&Digest([3; 32])));
    // serde_json writes members sorted by name (Fossilize's reader takes them in any order).
    let expected = format!(
        concat!(
            r#"{{"raytracingPipelines":{{"0123456789abcdef":{{"#,
            r#""basePipelineHandle":"0000000000000000","basePipelineIndex":-1,"#,
            r#""dynamicState":{{"dynamicState":[1000347000],"flags":0}},"flags":0,"#,
            r#""groups":[{{"anyHitShader":4294967295,"closestHitShader":4294967295,"#,
            r#""generalShader":0,"intersectionShader":4294967295,"type":0}},"#,
            r#"{{"anyHitShader":4294967295,"closestHitShader":4294967295,"#,
            r#""generalShader":1,"intersectionShader":4294967295,"type":0}}],"#,
            r#""layout":"{layout}","libraryInfo":{{"libraries":["{library}"]}},"#,
            r#""libraryInterface":{{"maxPipelineRayHitAttributeSize":8,"#,
            r#""maxPipelineRayPayloadSize":12}},"maxPipelineRayRecursionDepth":1,"#,
            r#""stages":[{{"flags":0,"module":"{module}","name":"main","#,
            r#""specializationInfo":{{"data":"AADAPw==","dataSize":4,"#,
            r#""mapEntries":[{{"constantID":0,"offset":0,"size":4}}]}},"stage":256}},"#,
            r#"{{"flags":0,"module":"{module}","name":"main","stage":2048}}]}}}},"#,
            r#""version":6}}"#
        ),
        layout = layout,
        library = library,
        module = module,
    );
    assert_eq!(std::str::from_utf8(&doc).unwrap(), expected);

    // A library links none: no libraryInfo; no dynamic state where it has none.
    let mut lib = ray_tracing_desc(true, Vec::new());
    lib.dynamic_states.clear();
    let doc: serde_json::Value =
        serde_json::from_slice(&super::documents::ray_tracing_doc(1, &lib).unwrap()).unwrap();
    let v = &doc["raytracingPipelines"]["0000000000000001"];
    assert_eq!(v["flags"], 0x800);
    assert!(v.get("libraryInfo").is_none() && v.get("dynamicState").is_none());
    assert_eq!(v["groups"][0]["closestHitShader"], 0);
}

/// A ray-tracing pipeline's entries: its objects, its tag-9 document and its link to its
/// configuration under tag 9; read back, the catalog holds it with its objects.
#[test]
fn a_recorded_ray_tracing_pipeline_reads_back_with_its_objects_and_its_link() {
    let key = PipelineKey {
        spirv: [0x33; 16],
        state: [0x44; 16],
    };
    let r = ray_tracing_record(key, ray_tracing_desc(false, vec![LIBRARY_KEY]));
    let entries = pipeline_entries(&r, &AppState::default()).unwrap();
    let hash = pipeline_hash(&key);
    let app = configuration_hash(&AppState::default());
    assert!(entries.iter().any(|(t, h, _)| (*t, *h) == (9, hash)));
    let link = link_hash(app, 9, hash);
    assert!(entries.iter().any(|(t, h, _)| (*t, *h) == (TAG_LINK, link)));
    let catalog = written_and_read_back(&r);
    assert_eq!(catalog.ray_tracing.len(), 1);
    assert_eq!(catalog.links, vec![(app, 9, hash)]);
    assert_eq!(
        (catalog.shader_modules.len(), catalog.pipeline_layouts.len()),
        (1, 1)
    );
    let v = catalog.ray_tracing[0].1.as_ref().unwrap();
    assert_eq!(
        v["libraryInfo"]["libraries"][0],
        format!("{:016x}", pipeline_hash(&LIBRARY_KEY))
    );
    assert_eq!(catalog.pipelines(), 1);
    let configs = catalog.configurations();
    assert_eq!(configs.len(), 1);
    assert_eq!(configs[0].catalog.ray_tracing.len(), 1);
}

/// A damaged ray-tracing entry is reported and filed as malformed, as the other kinds' are.
#[test]
fn a_ray_tracing_entry_without_its_pipeline_is_reported_and_filed_as_malformed() {
    let entries = vec![(9, 5, br#"{"version":6}"#.to_vec())];
    let bytes = crate::replay::foz::write_entries(&entries);
    let catalog = Catalog::from_entries(crate::replay::foz::read_entries(&bytes).unwrap());
    assert_eq!(catalog.problems.len(), 1, "{:?}", catalog.problems);
    assert!(catalog.problems[0].reason.contains("raytracingPipelines"));
    assert_eq!(catalog.ray_tracing.len(), 1);
    assert!(catalog.ray_tracing[0].1.is_none());
}

/// A compaction that keeps a link keeps the libraries it links, with their links: without them
/// it could not be made again.
#[test]
fn a_compaction_keeping_a_link_keeps_its_libraries() {
    let dir = tempfile::tempdir().unwrap();
    let file = RecordFile::new(dir.path());
    let link_key = PipelineKey {
        spirv: [0x55; 16],
        state: [0x66; 16],
    };
    let library = ray_tracing_record(LIBRARY_KEY, ray_tracing_desc(true, Vec::new()));
    let link = ray_tracing_record(link_key, ray_tracing_desc(false, vec![LIBRARY_KEY]));
    for r in [&library, &link] {
        file.append(pipeline_entries(r, &AppState::default()).unwrap(), 1)
            .unwrap();
    }
    let entries = crate::replay::foz::read_entries(&std::fs::read(file.path()).unwrap()).unwrap();
    let (link_hash_, library_hash) = (pipeline_hash(&link_key), pipeline_hash(&LIBRARY_KEY));
    let kept = live_part(entries.clone(), &|h| h == link_hash_);
    let pipelines: HashSet<u64> = kept
        .iter()
        .filter(|(t, _, _)| *t == 9)
        .map(|(_, h, _)| *h)
        .collect();
    assert_eq!(pipelines, HashSet::from([link_hash_, library_hash]));
    let links = kept.iter().filter(|(t, _, _)| *t == TAG_LINK).count();
    assert_eq!(links, 2, "each kept pipeline with its link");
    // The library alone keeps no link of it.
    let kept = live_part(entries, &|h| h == library_hash);
    assert_eq!(kept.iter().filter(|(t, _, _)| *t == 9).count(), 1);
}

/// A record written before the launch entered the configuration's hash links its pipelines under
/// the hash of the entry with no launch: the background rebuild of the same device, launched
/// from an executable, still takes them as its own (found pipelines are never linked again).
#[test]
fn pipelines_linked_under_the_hash_before_the_launch_entered_it_are_this_configuration_s() {
    let mut app = configuration("a game", false);
    app.launch.executable = Some("game".into());
    let legacy = AppState {
        launch: Launch::default(),
        ..app.clone()
    };
    let entries = pipeline_entries(&record(), &legacy).unwrap();
    let catalog = crate::replay::objects::Catalog::from_entries(
        crate::replay::foz::read_entries(&crate::replay::foz::write_entries(&entries)).unwrap(),
    );
    let (mine, others) = catalog
        .clone()
        .into_configuration(&[configuration_hash(&app)]);
    assert_eq!(
        (mine.compute.len(), others.len()),
        (0, 1),
        "the new hash alone"
    );
    let (mine, others) = catalog.into_configuration(&configuration_hashes(&app));
    assert_eq!((mine.compute.len(), others.len()), (1, 0));
}

/// A call of shader objects, a linked vertex and fragment pair: each its own code, the vertex
/// shader with a set layout and a NULL set, specialization and a required subgroup size.
fn shader_objects_record() -> PipelineRecord {
    let (vertex, fragment, set) = (Digest([0x51; 32]), Digest([0x52; 32]), Digest([0x53; 32]));
    let shader = |stage: u32, next_stage: u32, module: Digest, sets: Vec<Digest>| ShaderDesc {
        stage: StageDesc {
            stage,
            flags: 1, // LINK_STAGE
            module,
            entry_point: b"main".to_vec(),
            specialization: vec![SpecConstant {
                constant_id: 0,
                value: vec![2, 0, 0, 0],
            }],
            required_subgroup_size: (stage == 1).then_some(32),
            robustness: None,
        },
        next_stage,
        layout: PipelineLayoutDesc {
            flags: 0,
            set_layouts: sets,
            push_constant_ranges: vec![PushRange {
                stage_flags: 0x11,
                offset: 0,
                size: 8,
            }],
        },
    };
    let layout = Content::SetLayout(SetLayoutDesc {
        flags: 0,
        bindings: vec![],
    });
    PipelineRecord {
        key: PipelineKey {
            spirv: [0x55; 16],
            state: [0x56; 16],
        },
        desc: Recorded::ShaderObjects(vec![
            shader(1, 0x10, vertex, vec![set, Digest::NONE]),
            shader(0x10, 0, fragment, vec![]),
        ]),
        contents: vec![
            (vertex, Arc::new(Content::Module(vec![0x0723_0203, 1]))),
            (fragment, Arc::new(Content::Module(vec![0x0723_0203, 2]))),
            (set, Arc::new(layout)),
        ],
    }
}

/// A call of shader objects is recorded under pipekeep's own tag (which Fossilize's readers
/// skip), its configuration named in its own document (no Fossilize link: a link of a tag past
/// Fossilize's own indexes its tools' tables out of bounds), with each shader's code as a module
/// and its set layouts; its document names every member of `VkShaderCreateInfoEXT` a replay
/// needs. If the golden document fails, the record's format changed.
#[test]
fn a_call_of_shader_objects_is_recorded_whole_under_pipekeeps_own_tag() {
    use crate::replay::objects::TAG_SHADER_OBJECTS;
    let r = shader_objects_record();
    let entries = pipeline_entries(&r, &AppState::default()).unwrap();
    let app = configuration_hash(&AppState::default());
    // Named under its configuration: another configuration's is another document.
    let hash = link_hash(app, TAG_SHADER_OBJECTS, pipeline_hash(&r.key));
    let tags: Vec<u32> = entries.iter().map(|(t, _, _)| *t).collect();
    assert_eq!(tags, [TAG_APPLICATION, 2, 4, 4, TAG_SHADER_OBJECTS]);
    const {
        assert!(
            TAG_SHADER_OBJECTS >= 11,
            "past every tag of Fossilize's, which its readers skip"
        )
    };
    let (_, _, doc) = entries
        .iter()
        .find(|(t, _, _)| *t == TAG_SHADER_OBJECTS)
        .unwrap();
    let module = |n: u8| format!("{:016x}", object_hash(&Digest([n; 32])));
    let set = module(0x53);
    let expected = format!(
        concat!(
            r#"{{"shaderObjects":{{"{hash:016x}":{{"application":"{app:016x}","createInfos":["#,
            r#"{{"codeType":1,"flags":1,"module":"{vertex}","name":"main","nextStage":16,"#,
            r#""pNext":[{{"requiredSubgroupSize":32,"sType":1000225001}}],"#,
            r#""pushConstantRanges":[{{"offset":0,"size":8,"stageFlags":17}}],"#,
            r#""setLayouts":["{set}","0000000000000000"],"#,
            r#""specializationInfo":{{"data":"AgAAAA==","dataSize":4,"#,
            r#""mapEntries":[{{"constantID":0,"offset":0,"size":4}}]}},"stage":1}},"#,
            r#"{{"codeType":1,"flags":1,"module":"{fragment}","name":"main","nextStage":0,"#,
            r#""pushConstantRanges":[{{"offset":0,"size":8,"stageFlags":17}}],"#,
            r#""setLayouts":[],"#,
            r#""specializationInfo":{{"data":"AgAAAA==","dataSize":4,"#,
            r#""mapEntries":[{{"constantID":0,"offset":0,"size":4}}]}},"stage":16}}]}}}},"#,
            r#""version":6}}"#
        ),
        hash = hash,
        app = app,
        vertex = module(0x51),
        fragment = module(0x52),
        set = set,
    );
    assert_eq!(std::str::from_utf8(doc).unwrap(), expected);

    let catalog = written_and_read_back(&r);
    assert_eq!(catalog.shader_objects.len(), 1);
    assert_eq!(catalog.links, vec![(app, TAG_SHADER_OBJECTS, hash)]);
    assert_eq!(
        (catalog.shader_modules.len(), catalog.set_layouts.len()),
        (2, 1)
    );
    assert_eq!(catalog.pipelines(), 1);
    assert_eq!(catalog.configurations()[0].catalog.shader_objects.len(), 1);
    let robust = AppState {
        robust_buffer_access: true,
        ..AppState::default()
    };
    let other = pipeline_entries(&r, &robust).unwrap();
    let named = |e: &[DbEntry]| {
        e.iter()
            .find(|(t, _, _)| *t == TAG_SHADER_OBJECTS)
            .unwrap()
            .1
    };
    assert_ne!(named(&other), hash, "one document a configuration");

    // A document without its configuration is malformed, and said.
    let mut bare = entries.clone();
    for (tag, _, payload) in bare.iter_mut() {
        if *tag == TAG_SHADER_OBJECTS {
            let mut doc: serde_json::Value = serde_json::from_slice(payload).unwrap();
            doc["shaderObjects"][format!("{hash:016x}")]
                .as_object_mut()
                .unwrap()
                .remove("application");
            *payload = serde_json::to_vec(&doc).unwrap();
        }
    }
    let read = crate::replay::foz::read_entries(&crate::replay::foz::write_entries(&bare)).unwrap();
    let catalog = Catalog::from_entries(read);
    assert_eq!(catalog.shader_objects, vec![(hash, None)]);
    assert_eq!(catalog.problems.len(), 1, "{:?}", catalog.problems);

    // A compaction keeps the call with its modules and set layout, or drops them with it.
    let read = |entries: &[DbEntry]| {
        crate::replay::foz::read_entries(&crate::replay::foz::write_entries(entries)).unwrap()
    };
    let kept = live_part(read(&entries), &|h| h == hash);
    assert_eq!(kept.len(), entries.len());
    let dropped = live_part(read(&entries), &|_| false);
    assert_eq!(
        dropped.iter().map(|(t, _, _)| *t).collect::<Vec<_>>(),
        [TAG_APPLICATION]
    );
}

/// Pipelines recorded together make each object's document once (the configuration, a module
/// two of them name); a pipeline that cannot be recorded leaves the batch as it was, so the next
/// one naming its objects still writes them.
#[test]
fn a_batch_makes_each_object_once_and_a_pipeline_not_recorded_takes_nothing_from_it() {
    let app = AppEntry::of(&AppState::default());
    let mut batch = Batch::default();
    let first = batch.entries(&nth_record(1), &app).unwrap();
    let mut second = nth_record(2);
    second.contents[0] = nth_record(1).contents[0].clone();
    if let Recorded::Compute(d) = &mut second.desc {
        d.stage.module = second.contents[0].0;
    }
    let tags = |entries: &[DbEntry]| entries.iter().map(|(t, _, _)| *t).collect::<Vec<u32>>();
    assert_eq!(
        tags(&first),
        [TAG_APPLICATION, 2, 3, 4, TAG_COMPUTE, TAG_LINK]
    );
    assert_eq!(
        tags(&batch.entries(&second, &app).unwrap()),
        [TAG_COMPUTE, TAG_LINK],
        "the configuration, set layout, layout and module made once"
    );

    let mut batch = Batch::default();
    let mut broken = nth_record(3);
    broken
        .contents
        .retain(|(_, c)| !matches!(**c, Content::PipelineLayout(_)));
    assert_eq!(
        batch.entries(&broken, &app).err(),
        Some(NotRecorded::MissingContent)
    );
    let whole = batch.entries(&nth_record(3), &app).unwrap();
    assert_eq!(
        tags(&whole),
        [TAG_APPLICATION, 2, 3, 4, TAG_COMPUTE, TAG_LINK]
    );
    // As one pipeline alone writes them.
    assert_eq!(
        whole,
        pipeline_entries(&nth_record(3), &AppState::default()).unwrap()
    );
}
