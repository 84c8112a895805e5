//! What a compiled pipeline leaves for the title: its create info in the record (`record.foz`).

use super::*;

/// Queues a compiled pipeline for the title's record (`<title>/record.foz`), with the content
/// of every object it names, as its key captured them.
pub(super) fn record_compiled<T: PipelineInfo>(b: &Build<'_, T>) {
    let dev = b.dev;
    let Some(file) = dev.record.as_ref() else {
        return;
    };
    // Taken once: a pipeline is recorded once.
    let Some(desc) = b.desc.take() else {
        return;
    };
    let mut contents = Vec::new();
    let mut keep = |digest: &Digest| {
        if let Some(c) = dev.objects().content(digest) {
            contents.push((*digest, c));
        }
    };
    for digest in desc.names() {
        keep(&digest);
    }
    if let Some(layout) = dev.objects().content(desc.layout()) {
        if let crate::replay::record::Content::PipelineLayout(l) = &*layout {
            for set in l.set_layouts.iter().filter(|s| **s != Digest::NONE) {
                keep(set);
                if let Some(set_layout) = dev.objects().content(set) {
                    if let crate::replay::record::Content::SetLayout(sl) = &*set_layout {
                        sl.bindings
                            .iter()
                            .flat_map(|b| b.immutable_samplers.iter().flatten())
                            .for_each(&mut keep);
                    }
                }
            }
        }
    }
    let record = crate::replay::record::PipelineRecord {
        key: *b.key,
        desc,
        contents,
    };
    dev.writer
        .record(file.clone(), record, dev.app_state.clone());
}
