//! Module identifiers (`VK_EXT_shader_module_identifier`) as the driver hands them out: each one
//! the application asks for (the intercepts are [`super::tracking`]'s) is kept with the digest of
//! the SPIR-V it names, in memory and in the title's identifier file
//! ([`crate::store::identifiers`]), so that a stage given by identifier alone is keyed by that
//! SPIR-V, in this process and in later ones. An identifier the layer never saw leaves its
//! pipeline unkeyed: it goes to the driver as asked.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, RwLock};
use std::thread::JoinHandle;

use crate::key::Digest;
use crate::store::identifiers::{self as file, KnownIdentifier, Wait, MOST_IDENTIFIER_LEN};
use crate::sync::{Unpoisoned, UnpoisonedRw};

/// Identifiers learned and not yet in the file, past which an application thread tries to append
/// them (never waiting on another process's append; the device's end appends what is left).
const APPEND_FROM: usize = 16;

/// Where a device keeps its identifiers on disk: the title's file, and the driver's
/// `shaderModuleIdentifierAlgorithmUUID` they are valid for.
struct KeptIn {
    path: PathBuf,
    algorithm: [u8; 16],
    /// Learned in this process, not yet appended.
    pending: Mutex<Vec<KnownIdentifier>>,
}

/// Identifier -> SPIR-V digest, for one device.
#[derive(Default)]
pub struct Identifiers {
    known: RwLock<HashMap<Vec<u8>, Digest>>,
    kept: Option<KeptIn>,
    /// The file's reading, started with the device on a thread of its own so that no pipeline
    /// waits for it (it has long ended by the first identifier a pipeline names).
    reading: Mutex<Option<JoinHandle<Vec<KnownIdentifier>>>>,
    loaded: OnceLock<()>,
}

impl Identifiers {
    /// Kept in `path` too, for the identifier algorithm `algorithm`: what earlier processes
    /// kept read at once, off the application's threads.
    pub fn kept_in(path: PathBuf, algorithm: [u8; 16]) -> Identifiers {
        let read_from = path.clone();
        let reading = std::thread::Builder::new()
            .name("pipekeep-ids".into())
            .spawn(move || read(&read_from, algorithm))
            .map_err(|e| tracing::debug!(error = %e, "no thread to read the module identifiers on; read at the first one asked"))
            .ok();
        Identifiers {
            kept: Some(KeptIn {
                path,
                algorithm,
                pending: Mutex::default(),
            }),
            reading: Mutex::new(reading),
            ..Identifiers::default()
        }
    }

    /// What earlier processes kept, merged once, at the first identifier this device meets.
    fn load_once(&self) {
        self.loaded.get_or_init(|| {
            let Some(kept) = &self.kept else {
                return;
            };
            let reading = self.reading.locked().take();
            let earlier = match reading.map(JoinHandle::join) {
                Some(Ok(earlier)) => earlier,
                _ => read(&kept.path, kept.algorithm),
            };
            let mut known = self.known.writing();
            for k in earlier {
                known.entry(k.identifier).or_insert(k.module);
            }
        });
    }

    /// The SPIR-V digest `identifier` names, where this process or an earlier one saw it made.
    pub fn module_of(&self, identifier: &[u8]) -> Option<Digest> {
        self.load_once();
        self.known.reading().get(identifier).copied()
    }

    /// The driver gave `identifier` for a module of code `module`.
    pub(in crate::layer) fn learn(&self, identifier: &[u8], module: Digest) {
        if identifier.is_empty() || identifier.len() > MOST_IDENTIFIER_LEN {
            return;
        }
        if self.module_of(identifier) == Some(module) {
            return;
        }
        self.known.writing().insert(identifier.to_vec(), module);
        let Some(kept) = &self.kept else {
            return;
        };
        let mut pending = kept.pending.locked();
        pending.push(KnownIdentifier {
            algorithm: kept.algorithm,
            identifier: identifier.to_vec(),
            module,
        });
        if pending.len() >= APPEND_FROM {
            append(kept, &mut pending, Wait::Never);
        }
    }

    /// Appends what this process learned and has not appended (the device's end), waiting for
    /// another process's append where one is under way.
    pub(in crate::layer) fn keep_the_rest(&self) {
        if let Some(kept) = &self.kept {
            append(kept, &mut kept.pending.locked(), Wait::Blocking);
        }
    }
}

/// The file's identifiers of `algorithm`; a file that cannot be read holds none (it is started
/// anew at the next append).
fn read(path: &std::path::Path, algorithm: [u8; 16]) -> Vec<KnownIdentifier> {
    match file::read(path) {
        Ok(parsed) => {
            if parsed.damaged > 0 {
                tracing::warn!(file = %path.display(), damaged = parsed.damaged, "damaged module-identifier records skipped");
            }
            if parsed.torn_tail {
                tracing::debug!(file = %path.display(), "a module-identifier record cut short (a process ended in its append); cut at the next append");
            }
            parsed
                .known
                .into_iter()
                .filter(|k| k.algorithm == algorithm)
                .collect()
        }
        Err(e) => {
            tracing::warn!(error = %e, "the module identifiers of earlier runs cannot be read; the file is started anew at the next append");
            Vec::new()
        }
    }
}

/// Appends `pending` to the file, emptied where it was written (or can never be); left for a
/// later try where another process's append holds the file.
fn append(kept: &KeptIn, pending: &mut Vec<KnownIdentifier>, wait: Wait) {
    match file::append(&kept.path, pending, wait) {
        Ok(()) => pending.clear(),
        Err(file::IdentifierFileError::Busy { .. }) => {}
        Err(e) => {
            tracing::debug!(error = %e, count = pending.len(), "module identifiers not kept for later runs");
            pending.clear();
        }
    }
}
