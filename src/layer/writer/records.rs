//! The titles' records: compiled pipelines appended to each title's `record.foz`, their
//! documents made on several threads where many wait and the cores are free (a cold launch's
//! end appends its whole record at once, while the user waits for the process to end).

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
        append_records(vec![self], false);
    }
}

/// Pipelines a thread is given at least when their documents are made on several: on the H100 a
/// cold pygfx launch's end waited for 641 pipelines' documents made on one thread (38.6 ms of
/// JSON), or 229 on the ending thread (62.4 ms with their append).
const JOBS_A_SHARE: usize = 64;

/// Appends compiled pipelines to their titles' records, one file operation a title. `spread`:
/// the cores are free (the application's pause, or its device's end), and many pipelines'
/// documents are made, and their payloads deflated, on several threads; else on this one alone.
pub(super) fn append_records(jobs: Vec<RecordJob>, spread: bool) -> RecordsDone {
    let cores = if spread {
        crate::sync::share_threads()
    } else {
        1
    };
    let started = std::time::Instant::now();
    let made = documents_on(&jobs, document_threads(jobs.len(), cores));
    let documents = started.elapsed();
    for (file, entries) in made {
        if let Err(e) = file.append(entries, cores) {
            tracing::debug!(record = %file.path().display(), error = %e, "pipelines were not recorded");
        }
    }
    RecordsDone {
        pipelines: jobs.len(),
        documents,
        appended: started.elapsed() - documents,
    }
}

/// What an append of the record's pipelines did, and where its time went (the device's end
/// says, for what it appended).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RecordsDone {
    pub(super) pipelines: usize,
    /// Making their documents (JSON).
    pub(super) documents: std::time::Duration,
    /// Deflating them and appending them to the file.
    pub(super) appended: std::time::Duration,
}

impl std::ops::AddAssign for RecordsDone {
    fn add_assign(&mut self, other: RecordsDone) {
        self.pipelines += other.pipelines;
        self.documents += other.documents;
        self.appended += other.appended;
    }
}

/// The threads `jobs` pipelines' documents are made on, of `cores`: one a share of at least
/// [`JOBS_A_SHARE`] (fewer than two: this thread alone).
fn document_threads(jobs: usize, cores: usize) -> usize {
    cores.min(jobs / JOBS_A_SHARE)
}

/// Each title's record with the entries of `jobs` for it, in their order, made on up to
/// `threads` threads, each a share of the jobs in order. An object two shares name is made by
/// each; the file's append keeps the first (that of the first pipeline naming it, as on one
/// thread) and drops the rest. A share whose thread panicked is not recorded (each share makes
/// every object its pipelines name: the others stand without it).
fn documents_on(jobs: &[RecordJob], threads: usize) -> Vec<(Arc<RecordFile>, Vec<DbEntry>)> {
    if threads < 2 {
        return documents_of(jobs);
    }
    let shares = crate::sync::in_shares(jobs, threads, "pipekeep-records", documents_of);
    let made = shares.into_iter().filter_map(|(part, made)| {
        if made.is_none() {
            tracing::debug!(
                pipelines = part.len(),
                "pipelines are not recorded: making their documents failed"
            );
        }
        made
    });
    let by_file = super::grouped(made.flatten(), |(file, _)| file);
    by_file
        .into_iter()
        .map(|(file, shares)| (file, shares.into_iter().flat_map(|(_, e)| e).collect()))
        .collect()
}

/// Each title's record with the entries of `jobs` for it, made on this thread: each object's
/// document once for all of them.
fn documents_of(jobs: &[RecordJob]) -> Vec<(Arc<RecordFile>, Vec<DbEntry>)> {
    let by_file = super::grouped(jobs, |job: &&RecordJob| &job.file);
    by_file
        .into_iter()
        .map(|(file, jobs)| {
            let mut batch = Batch::default();
            let entries = jobs.iter().flat_map(|job| {
                batch
                    .entries(&job.record, job.app.entry())
                    .inspect_err(|e| tracing::debug!(pipeline = %job.record.key.file_name(), error = %e, "a pipeline is not recorded"))
                    .unwrap_or_default()
            });
            (file, entries.collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn a_share_holds_at_least_64_pipelines_on_at_most_the_cores_given() {
        assert!(document_threads(127, 8) < 2, "made on this thread");
        assert_eq!(document_threads(128, 8), 2);
        assert_eq!(document_threads(641, 8), 8);
        assert_eq!(document_threads(641, 1), 1);
    }

    #[test]
    fn documents_made_in_shares_are_written_as_one_thread_writes_them() {
        let dir = tempfile::tempdir().unwrap();
        let file = Arc::new(RecordFile::new(dir.path()));
        // Every pipeline names the same layout and set layout: each share makes them again.
        let jobs = jobs(&file, 150);
        let alone = documents_on(&jobs, 1);
        let shared = documents_on(&jobs, 4);
        assert_eq!((alone.len(), shared.len()), (1, 1));
        let (alone, shared) = (&alone[0].1, &shared[0].1);
        assert!(
            shared.len() > alone.len(),
            "each share makes the objects all name"
        );
        // Kept once, the first of each: the one thread's entries, in its order.
        let mut seen = std::collections::HashSet::new();
        let firsts: Vec<&DbEntry> = shared
            .iter()
            .filter(|(tag, hash, _)| seen.insert((*tag, *hash)))
            .collect();
        assert_eq!(firsts, alone.iter().collect::<Vec<_>>());

        file.append(shared.clone(), 1).unwrap();
        let read = crate::replay::foz::read_entries(&std::fs::read(file.path()).unwrap()).unwrap();
        let written: Vec<(u32, u64, Vec<u8>)> = read
            .into_iter()
            .map(|e| (e.tag, e.hash, e.payload.unwrap()))
            .collect();
        assert_eq!(
            &written, alone,
            "the file holds each entry once, in one thread's order"
        );
    }
}
