//! The titles' records: compiled pipelines appended to each title's `record.foz`, their
//! documents made on several threads where many wait (a cold launch's end appends its whole
//! record at once, while the user waits for the process to end).

use std::sync::Arc;

use crate::replay::record::{Batch, DbEntry, PipelineRecord, RecordApp, RecordFile};

/// A compiled pipeline for the title's record.
pub(super) struct RecordJob {
    pub(super) file: Arc<RecordFile>,
    pub(super) record: PipelineRecord,
    pub(super) app: Arc<RecordApp>,
}

impl RecordJob {
    pub(super) fn append(self) {
        append_records(vec![self]);
    }
}

/// Pipelines past which their documents are made on several threads, a share each: pygfx's 641
/// at a cold launch's end took 39-49 ms of JSON on one thread on the H100, which the process's
/// end waited for (the writer's last job, or the ending thread's).
const DOCUMENTS_APART_FROM: usize = 128;

/// Appends compiled pipelines to their titles' records, one file operation a title.
pub(super) fn append_records(jobs: Vec<RecordJob>) {
    for (file, entries) in documents(&jobs) {
        if let Err(e) = file.append(entries) {
            tracing::debug!(record = %file.path().display(), error = %e, "pipelines were not recorded");
        }
    }
}

/// Each title's record with the entries of `jobs` for it, in their order: on up to 8 threads
/// where there are many, each a share of the jobs in order. An object two shares name is made
/// by each and kept once (the file's append drops what it holds or was given before).
fn documents(jobs: &[RecordJob]) -> Vec<(Arc<RecordFile>, Vec<DbEntry>)> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let threads = cores.min(jobs.len() / (DOCUMENTS_APART_FROM / 2)).max(1);
    if threads < 2 || jobs.len() < DOCUMENTS_APART_FROM {
        return documents_of(jobs);
    }
    let share = jobs.len().div_ceil(threads);
    let shares: Vec<Vec<(Arc<RecordFile>, Vec<DbEntry>)>> = std::thread::scope(|s| {
        let spawned: Vec<_> = jobs
            .chunks(share)
            .map(|part| {
                let thread = std::thread::Builder::new()
                    .name("pipekeep-records".into())
                    .spawn_scoped(s, move || documents_of(part));
                (part, thread.ok())
            })
            .collect();
        spawned
            .into_iter()
            // A share whose thread failed (or panicked) is made here.
            .map(|(part, thread)| {
                thread
                    .and_then(|t| t.join().ok())
                    .unwrap_or_else(|| documents_of(part))
            })
            .collect()
    });
    let mut by_file: Vec<(Arc<RecordFile>, Vec<DbEntry>)> = Vec::new();
    for (file, entries) in shares.into_iter().flatten() {
        match by_file.iter_mut().find(|(f, _)| Arc::ptr_eq(f, &file)) {
            Some((_, all)) => all.extend(entries),
            None => by_file.push((file, entries)),
        }
    }
    by_file
}

/// Each title's record with the entries of `jobs` for it, made on this thread: each object's
/// document once for all of them.
fn documents_of(jobs: &[RecordJob]) -> Vec<(Arc<RecordFile>, Vec<DbEntry>)> {
    let mut by_file: Vec<(Arc<RecordFile>, Vec<DbEntry>, Batch)> = Vec::new();
    for job in jobs {
        let at = match by_file
            .iter()
            .position(|(f, _, _)| Arc::ptr_eq(f, &job.file))
        {
            Some(at) => at,
            None => {
                by_file.push((job.file.clone(), Vec::new(), Batch::default()));
                by_file.len() - 1
            }
        };
        let (_, all, batch) = &mut by_file[at];
        match batch.entries(&job.record, job.app.entry()) {
            Ok(entries) => all.extend(entries),
            Err(e) => {
                tracing::debug!(pipeline = %job.record.key.file_name(), error = %e, "a pipeline is not recorded");
            }
        }
    }
    by_file.into_iter().map(|(f, e, _)| (f, e)).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::replay::record::tests::nth_record;
    use crate::replay::record::AppState;

    fn jobs(file: &Arc<RecordFile>, pipelines: u8) -> Vec<RecordJob> {
        let app = Arc::new(RecordApp::new(AppState::default()));
        (0..pipelines)
            .map(|n| RecordJob {
                file: file.clone(),
                record: nth_record(n),
                app: app.clone(),
            })
            .collect()
    }

    fn names(entries: &[DbEntry]) -> Vec<(u32, u64)> {
        entries.iter().map(|(tag, hash, _)| (*tag, *hash)).collect()
    }

    #[test]
    fn many_pipelines_documents_made_in_shares_are_one_threads_and_written_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let file = Arc::new(RecordFile::new(dir.path()));
        // Every pipeline names the same layout and set layout: each share makes them again.
        let jobs = jobs(&file, 150);
        let alone = documents_of(&jobs);
        let shared = documents(&jobs);
        assert_eq!((alone.len(), shared.len()), (1, 1));
        let (alone, shared) = (&alone[0].1, &shared[0].1);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        if threads > 1 {
            assert!(
                shared.len() > alone.len(),
                "the shares each make the shared objects"
            );
        }
        let unique: HashSet<(u32, u64)> = names(shared).into_iter().collect();
        assert_eq!(unique, names(alone).into_iter().collect::<HashSet<_>>());
        append_records(jobs);
        let read = crate::replay::foz::read_entries(&std::fs::read(file.path()).unwrap()).unwrap();
        let written: Vec<(u32, u64)> = read.iter().map(|e| (e.tag, e.hash)).collect();
        assert_eq!(written.len(), unique.len(), "each entry once");
        assert_eq!(written.iter().collect::<HashSet<_>>().len(), unique.len());
        let catalog = crate::replay::objects::Catalog::from_entries(read);
        assert_eq!(catalog.pipelines(), 150);
    }
}
