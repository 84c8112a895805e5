//! Module identifiers (`VK_EXT_shader_module_identifier`) as the driver hands them out: each one
//! the application asks for (`vkGetShaderModuleIdentifierEXT`,
//! `vkGetShaderModuleCreateInfoIdentifierEXT`) is kept with the digest of the SPIR-V it names, in
//! memory and in the title's identifier file ([`crate::store::identifiers`]), so that a stage given
//! by identifier alone is keyed by that SPIR-V, in this process and in later ones. An identifier
//! the layer never saw leaves its pipeline unkeyed: it goes to the driver as asked.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{OnceLock, RwLock};

use ash::vk;
use ash::vk::Handle;

use super::device::{device_data, unrecorded_next};
use super::guard::guarded;
use super::objects::module_digest;
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
    fn learn(&self, identifier: &[u8], module: Digest) {
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

/// The identifier the driver wrote, as bytes (at most the array's size, whatever it says).
fn written<'a>(out: &'a vk::ShaderModuleIdentifierEXT<'_>) -> &'a [u8] {
    let len = (out.identifier_size as usize).min(out.identifier.len());
    &out.identifier[..len]
}

pub unsafe extern "system" fn get_shader_module_identifier(
    device: vk::Device,
    module: vk::ShaderModule,
    out: *mut vk::ShaderModuleIdentifierEXT<'_>,
) {
    // SAFETY: a device the loader handed us, created through this layer.
    let Some(dev) = (unsafe { device_data(device) }) else {
        if let Some(next) = unsafe {
            unrecorded_next::<vk::PFN_vkGetShaderModuleIdentifierEXT>(
                device,
                c"vkGetShaderModuleIdentifierEXT",
            )
        } {
            unsafe { next(device, module, out) };
        }
        return;
    };
    // Handed out only where the next layer has it.
    let Some(next) = dev.fns.get_shader_module_identifier else {
        return;
    };
    // SAFETY: the application's arguments, passed on unchanged.
    unsafe { next(device, module, out) };
    if !dev.works_here() {
        return;
    }
    guarded(
        "vkGetShaderModuleIdentifierEXT",
        || {
            // SAFETY: the application's output, written by the driver.
            let Some(out) = (unsafe { out.as_ref() }) else {
                return;
            };
            if let Ok(digest) = dev.objects.modules.get(module.as_raw(), "shader module") {
                dev.objects.identifiers.learn(written(out), digest);
            }
        },
        || (),
    );
}

pub unsafe extern "system" fn get_shader_module_create_info_identifier(
    device: vk::Device,
    create_info: *const vk::ShaderModuleCreateInfo<'_>,
    out: *mut vk::ShaderModuleIdentifierEXT<'_>,
) {
    // SAFETY: a device the loader handed us, created through this layer.
    let Some(dev) = (unsafe { device_data(device) }) else {
        if let Some(next) = unsafe {
            unrecorded_next::<vk::PFN_vkGetShaderModuleCreateInfoIdentifierEXT>(
                device,
                c"vkGetShaderModuleCreateInfoIdentifierEXT",
            )
        } {
            unsafe { next(device, create_info, out) };
        }
        return;
    };
    let Some(next) = dev.fns.get_shader_module_create_info_identifier else {
        return;
    };
    // SAFETY: the application's arguments, passed on unchanged.
    unsafe { next(device, create_info, out) };
    if !dev.works_here() {
        return;
    }
    guarded(
        "vkGetShaderModuleCreateInfoIdentifierEXT",
        || {
            // SAFETY: the application's create info and output, valid for the call.
            let (Some(ci), Some(out)) = (unsafe { create_info.as_ref() }, unsafe { out.as_ref() })
            else {
                return;
            };
            if let Ok(digest) = unsafe { module_digest(ci) } {
                dev.objects.identifiers.learn(written(out), digest);
            }
        },
        || (),
    );
}
