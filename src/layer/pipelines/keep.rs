//! What a compiled pipeline leaves for the title: its create info in the record (`record.foz`).

use super::*;
use crate::replay::record::Content;

/// Queues a compiled pipeline for the title's record (`<title>/record.foz`), with the content
/// of every object it names, as its key captured them.
pub(super) fn record_compiled<T: PipelineInfo>(b: &Build<'_, T>) {
    // Taken once: a pipeline is recorded once.
    if let Some(desc) = b.desc.take() {
        record(b.dev, *b.key, desc, Vec::new());
    }
}

/// Queues what was compiled under `key` for the title's record, with the content of every
/// object it names: those in `contents` (code given inline, which no module holds), the rest as
/// the layer tracks them.
pub(crate) fn record(
    dev: &DeviceData,
    key: PipelineKey,
    desc: Recorded,
    mut contents: Vec<(Digest, Arc<Content>)>,
) {
    let Some(file) = dev.record.as_ref() else {
        return;
    };
    let objects = dev.objects();
    let mut keep = |digest: &Digest| {
        if contents.iter().any(|(d, _)| d == digest) {
            return;
        }
        if let Some(c) = objects.content(digest) {
            contents.push((*digest, c));
        }
    };
    for digest in desc.names() {
        keep(&digest);
    }
    let mut sets = desc.own_set_layouts();
    if let Some(layout) = desc.layout().and_then(|l| objects.content(l)) {
        if let Content::PipelineLayout(l) = &*layout {
            sets.extend(l.set_layouts.iter().filter(|s| **s != Digest::NONE));
        }
    }
    for set in &sets {
        keep(set);
        if let Some(set_layout) = objects.content(set) {
            if let Content::SetLayout(sl) = &*set_layout {
                sl.bindings
                    .iter()
                    .flat_map(|b| b.immutable_samplers.iter().flatten())
                    .for_each(&mut keep);
            }
        }
    }
    let record = crate::replay::record::PipelineRecord {
        key,
        desc,
        contents,
    };
    dev.writer
        .record(file.clone(), record, dev.record_app.clone());
}
