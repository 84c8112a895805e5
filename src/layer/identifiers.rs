//! Module identifiers (`VK_EXT_shader_module_identifier`) as the driver hands them out: each one
//! the application asks for (the intercepts are [`super::tracking`]'s) is kept with the digest of
//! the SPIR-V it names, in memory and in the title's identifier file
//! ([`crate::store::identifiers`]), so that a stage given by identifier alone is keyed by that
//! SPIR-V, in this process and in later ones. An identifier the layer never saw leaves its
//! pipeline unkeyed: it goes to the driver as asked.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{OnceLock, RwLock};

use crate::key::Digest;
use crate::store::identifiers::{self as file, KnownIdentifier, MOST_IDENTIFIER_LEN};
use crate::sync::UnpoisonedRw;

/// Where a device keeps its identifiers on disk: the title's file, and the driver's
/// `shaderModuleIdentifierAlgorithmUUID` they are valid for.
struct KeptIn {
    path: PathBuf,
    algorithm: [u8; 16],
}

/// Identifier -> SPIR-V digest, for one device.
#[derive(Default)]
pub struct Identifiers {
    known: RwLock<HashMap<Vec<u8>, Digest>>,
    kept: Option<KeptIn>,
    loaded: OnceLock<()>,
}

impl Identifiers {
    /// Kept in `path` too, for the identifier algorithm `algorithm`.
    pub fn kept_in(path: PathBuf, algorithm: [u8; 16]) -> Identifiers {
        Identifiers {
            kept: Some(KeptIn { path, algorithm }),
            ..Identifiers::default()
        }
    }

    /// Reads what earlier processes kept, once, at the first identifier this device meets.
    fn load_once(&self) {
        self.loaded.get_or_init(|| {
            let Some(kept) = &self.kept else {
                return;
            };
            match file::read(&kept.path) {
                Ok(parsed) => {
                    if parsed.damaged > 0 {
                        tracing::warn!(file = %kept.path.display(), damaged = parsed.damaged, "damaged module-identifier records skipped; the next identifier written cuts a torn tail");
                    }
                    let mut known = self.known.writing();
                    for k in parsed
                        .known
                        .into_iter()
                        .filter(|k| k.algorithm == kept.algorithm)
                    {
                        known.insert(k.identifier, k.module);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the module identifiers of earlier runs cannot be read; they are kept anew")
                }
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
        if let Some(kept) = &self.kept {
            let known = KnownIdentifier {
                algorithm: kept.algorithm,
                identifier: identifier.to_vec(),
                module,
            };
            if let Err(e) = file::append(&kept.path, &known) {
                tracing::debug!(error = %e, "a module identifier is not kept for later runs");
            }
        }
    }
}
