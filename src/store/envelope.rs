//! The envelope: the fixed 120-byte header in front of a pipeline's kept data (its payload), and
//! every check made before the driver sees a byte of it. `docs/FORMAT.md` gives the byte table.
//!
//! Decoding checks, in this order: the length of the envelope itself, the magic, the format, the
//! payload's kind, the identity fields (ABI, vendor, device, driver version, UUID), the key, the
//! file's exact length, the list of parts (format 3: its packed parts decompressed, each to
//! exactly its length), the data hash (of the body uncompressed), and the payload whole: for
//! [`PayloadKind::Cache`] a version-one pipeline-cache header naming this vendor, device and
//! UUID; for [`PayloadKind::Binaries`] every binary's count, key and length
//! ([`super::binaries`]). Each failure is its own [`EntryError`].

use std::borrow::Cow;
use std::ops::Range;

use super::identity::Identity;
use super::recipe::{self, Part};
use crate::key::PipelineKey;

pub use super::layout::{
    abi_of, declared_file_len, format_and_body_len, EntryError, PayloadKind, CACHE_HEADER_LEN,
    ENVELOPE_LEN, FORMAT_PARTS, FORMAT_VERSION, FORMAT_WHOLE, MAGIC,
};
use super::layout::{offset, u32_at, u64_at, CACHE_HEADER_VERSION_ONE};

/// Envelope and pipeline-cache data standing whole in the entry, as written to disk.
pub fn encode(identity: &Identity, key: &PipelineKey, data: &[u8]) -> Vec<u8> {
    encode_payload(identity, key, PayloadKind::Cache, data)
}

/// Envelope and a payload of `kind` standing whole in the entry, as written to disk.
pub fn encode_payload(
    identity: &Identity,
    key: &PipelineKey,
    kind: PayloadKind,
    data: &[u8],
) -> Vec<u8> {
    encode_parts(identity, key, kind, &[Part::Inline(data)])
}

/// Envelope and a payload of `kind` given as parts (inline bytes and pieces), each inline part
/// packed where compressing it pays. The data hash is of the body as it reads uncompressed.
pub fn encode_parts(
    identity: &Identity,
    key: &PipelineKey,
    kind: PayloadKind,
    parts: &[Part<'_>],
) -> Vec<u8> {
    let as_is = recipe::encode(parts);
    let hash = body_hash(FORMAT_VERSION, &as_is);
    let stored = recipe::encode_packed(parts);
    encode_body(
        identity,
        key,
        kind,
        FORMAT_VERSION,
        stored.as_deref().unwrap_or(&as_is),
        &hash,
    )
}

/// [`encode_parts`] with no part packed (format 3 as written where nothing pays): for the tests
/// and the fuzz targets, which re-encode what they decoded.
pub fn encode_parts_as_is(
    identity: &Identity,
    key: &PipelineKey,
    kind: PayloadKind,
    parts: &[Part<'_>],
) -> Vec<u8> {
    let body = recipe::encode(parts);
    let hash = body_hash(FORMAT_VERSION, &body);
    encode_body(identity, key, kind, FORMAT_VERSION, &body, &hash)
}

/// An entry of format 2 (parts, none packed), as entries were written before compression; still
/// read. For the tests of that migration.
pub fn encode_format_two(
    identity: &Identity,
    key: &PipelineKey,
    kind: PayloadKind,
    parts: &[Part<'_>],
) -> Vec<u8> {
    let body = recipe::encode(parts);
    encode_body(
        identity,
        key,
        kind,
        FORMAT_PARTS,
        &body,
        &blake3::hash(&body),
    )
}

/// An entry of format 1 (the payload whole after the envelope), as entries were written before
/// pieces; still read. For the tests of that migration.
pub fn encode_format_one(
    identity: &Identity,
    key: &PipelineKey,
    kind: PayloadKind,
    data: &[u8],
) -> Vec<u8> {
    encode_body(identity, key, kind, FORMAT_WHOLE, data, &blake3::hash(data))
}

fn encode_body(
    identity: &Identity,
    key: &PipelineKey,
    kind: PayloadKind,
    format: u32,
    body: &[u8],
    hash: &blake3::Hash,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(ENVELOPE_LEN + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&format.to_le_bytes());
    out.extend_from_slice(&identity.abi.to_le_bytes());
    out.extend_from_slice(&identity.vendor_id.to_le_bytes());
    out.extend_from_slice(&identity.device_id.to_le_bytes());
    out.extend_from_slice(&identity.driver_version.to_le_bytes());
    out.extend_from_slice(&(kind as u32).to_le_bytes());
    out.extend_from_slice(&identity.cache_uuid);
    out.extend_from_slice(&key.spirv);
    out.extend_from_slice(&key.state);
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(hash.as_bytes());
    debug_assert_eq!(out.len(), ENVELOPE_LEN);
    out.extend_from_slice(body);
    out
}

/// What an entry lists, read without knowing its identity or key: its payload's length and the
/// pieces and lists it names. `None` for a file that is not a whole entry. For the entry a
/// stale loading marker names (the driver stopped while loading it, maybe on a piece other
/// entries share) and for the tools' counts.
pub fn listed_parts(file: &[u8]) -> Option<(u64, Vec<recipe::PieceName>)> {
    // Every field is read only once the length is known to hold the envelope: a stale marker
    // may name an entry of a few bytes, and the tools list empty files.
    if declared_file_len(file) != Some(file.len() as u64) {
        return None;
    }
    let format = u32_at(file, offset::FORMAT);
    let image = checked_image(file, format, DataHash::Check).ok()?;
    match format {
        FORMAT_WHOLE => Some((image.len() as u64, Vec::new())),
        _ => {
            let (len, parts) = recipe::parse(&image).ok()?;
            let pieces = parts
                .iter()
                .filter_map(|p| match p {
                    Part::Piece { name, .. } | Part::List { name, .. } => Some(*name),
                    Part::Inline(_) | Part::Packed { .. } => None,
                })
                .collect();
            Some((len, pieces))
        }
    }
}

/// The body of a file of `format` whose envelope's length is its own, as the data hash is of
/// (format 3: each packed part decompressed, [`recipe::expand`]; the body itself where none is
/// packed, and for the formats before), checked against that hash.
fn checked_image(file: &[u8], format: u32, hash: DataHash) -> Result<Cow<'_, [u8]>, EntryError> {
    let body = &file[ENVELOPE_LEN..];
    let image = match format {
        FORMAT_WHOLE | FORMAT_PARTS => Cow::Borrowed(body),
        FORMAT_VERSION => {
            let (_, parts) = recipe::parse_as(body, recipe::Parts::Packed)?;
            match parts.iter().any(|p| matches!(p, Part::Packed { .. })) {
                true => Cow::Owned(recipe::expand(&parts)?),
                false => Cow::Borrowed(body),
            }
        }
        _ => return Err(EntryError::Foreign { field: "format" }),
    };
    let data_hash = &file[offset::DATA_HASH..offset::DATA_HASH + 32];
    if hash == DataHash::Check && body_hash(format, &image).as_bytes()[..] != *data_hash {
        return Err(EntryError::Corrupt { what: "data hash" });
    }
    Ok(image)
}

/// The data hash of a body of `format` as it reads uncompressed: BLAKE3 of its bytes, and from
/// format 3 on in BLAKE3's key-derivation mode under a context of that format's own, so that no
/// entry of one format reads as another's (a format-3 entry with nothing packed holds the very
/// body format 2 did: relabelled, it would pass format 2's hash).
fn body_hash(format: u32, image: &[u8]) -> blake3::Hash {
    match format {
        FORMAT_WHOLE | FORMAT_PARTS => blake3::hash(image),
        _ => blake3::Hasher::new_derive_key(FORMAT_3_CONTEXT)
            .update(image)
            .finalize(),
    }
}

/// BLAKE3's context for the data hash of format 3 (a fixed string, never changed: another
/// format gets another).
const FORMAT_3_CONTEXT: &str = "pipekeep 2026-12-02 entry body, format 3";

/// Where a checked entry's payload is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body<'a> {
    /// Whole in the entry, already checked whole.
    Whole(&'a [u8]),
    /// In parts, some of them pieces: the payload is checked ([`check_payload_start`], and for
    /// binaries [`check_payload`]) once the pieces are read. No part is packed: a packed part
    /// stands here as the inline bytes it was decompressed to.
    Parts { len: u64, parts: Vec<Part<'a>> },
}

/// A part of a checked body, by where its bytes lie in the body's image.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PartAt {
    Inline(Range<usize>),
    Piece { name: recipe::PieceName, len: u64 },
    List { name: recipe::PieceName, len: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum BodyAt {
    Whole(Range<usize>),
    Parts { len: u64, parts: Vec<PartAt> },
}

/// An entry checked for this identity and key: its payload's kind and where its bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded<'a> {
    pub kind: PayloadKind,
    /// The body as it was checked: the entry's own bytes after the envelope, or (format 3 with
    /// packed parts) those parts decompressed into a body of their own.
    image: Cow<'a, [u8]>,
    body: BodyAt,
}

impl<'a> Decoded<'a> {
    /// The payload where it stands whole in the entry (decompressed, where it was packed).
    pub fn whole(&self) -> Option<&[u8]> {
        match &self.body {
            BodyAt::Whole(r) => Some(&self.image[r.clone()]),
            BodyAt::Parts { .. } => None,
        }
    }

    /// Where the payload is: whole, or its parts.
    pub fn body(&self) -> Body<'_> {
        match &self.body {
            BodyAt::Whole(r) => Body::Whole(&self.image[r.clone()]),
            BodyAt::Parts { len, parts } => Body::Parts {
                len: *len,
                parts: parts
                    .iter()
                    .map(|p| match p {
                        PartAt::Inline(r) => Part::Inline(&self.image[r.clone()]),
                        PartAt::Piece { name, len } => Part::Piece {
                            name: *name,
                            len: *len,
                        },
                        PartAt::List { name, len } => Part::List {
                            name: *name,
                            len: *len,
                        },
                    })
                    .collect(),
            },
        }
    }

    /// Whether the body was decompressed into bytes of its own, apart from the file's.
    pub fn is_expanded(&self) -> bool {
        matches!(self.image, Cow::Owned(_))
    }

    /// The checked body's bytes, which [`Decoded::body`]'s inline parts lie in.
    pub fn image(&self) -> &[u8] {
        &self.image
    }

    /// The checked body's bytes: the file's own after the envelope ([`Cow::Borrowed`]), or the
    /// body decompressed ([`Cow::Owned`]).
    pub fn into_image(self) -> Cow<'a, [u8]> {
        self.image
    }
}

/// Checks a whole entry file for this identity and key: the envelope, the hash of the entry's
/// bytes, the list of its parts, and a payload standing whole in it.
pub fn decode<'a>(
    file: &'a [u8],
    identity: &Identity,
    key: &PipelineKey,
) -> Result<Decoded<'a>, EntryError> {
    decode_as(file, identity, key, DataHash::Check)
}

/// Whether an entry's data hash is computed and compared, or was vouched for already by a hash
/// over bytes holding the whole entry (a sealed waiting file's, `super::waiting`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataHash {
    Check,
    Vouched,
}

/// [`decode`], the data hash compared or not as `hash` says; every other check the same.
pub fn decode_as<'a>(
    file: &'a [u8],
    identity: &Identity,
    key: &PipelineKey,
    hash: DataHash,
) -> Result<Decoded<'a>, EntryError> {
    let len = file.len() as u64;
    if file.len() < ENVELOPE_LEN {
        return Err(EntryError::Short {
            len,
            expected: ENVELOPE_LEN as u64,
        });
    }
    if file[offset::MAGIC..offset::MAGIC + 8] != MAGIC {
        return Err(EntryError::Corrupt { what: "magic" });
    }
    let format = u32_at(file, offset::FORMAT);
    if ![FORMAT_VERSION, FORMAT_PARTS, FORMAT_WHOLE].contains(&format) {
        return Err(EntryError::Foreign { field: "format" });
    }
    let kind = PayloadKind::from_raw(u32_at(file, offset::KIND)).ok_or(EntryError::Corrupt {
        what: "payload kind",
    })?;
    let fields: [(&'static str, u32, u32); 4] = [
        ("ABI", offset::ABI, identity.abi),
        ("vendor", offset::VENDOR, identity.vendor_id),
        ("device", offset::DEVICE, identity.device_id),
        ("driver version", offset::DRIVER, identity.driver_version),
    ]
    .map(|(f, at, want)| (f, u32_at(file, at), want));
    if let Some((field, _, _)) = fields.iter().find(|(_, got, want)| got != want) {
        return Err(EntryError::Foreign { field });
    }
    if file[offset::UUID..offset::UUID + 16] != identity.cache_uuid {
        return Err(EntryError::Foreign {
            field: "pipeline-cache UUID",
        });
    }
    if file[offset::SPIRV_KEY..offset::SPIRV_KEY + 16] != key.spirv
        || file[offset::STATE_KEY..offset::STATE_KEY + 16] != key.state
    {
        return Err(EntryError::OtherKey);
    }
    let data_len = u64_at(file, offset::DATA_LEN);
    let expected = (ENVELOPE_LEN as u64).saturating_add(data_len);
    if len < expected {
        return Err(EntryError::Short { len, expected });
    }
    if len > expected {
        return Err(EntryError::Long { len, expected });
    }
    let image = checked_image(file, format, hash)?;
    let at = |b: &[u8]| {
        let start = b.as_ptr() as usize - image.as_ptr() as usize;
        start..start + b.len()
    };
    let body = match format {
        FORMAT_WHOLE => BodyAt::Whole(0..image.len()),
        _ => match recipe::parse(&image)? {
            (_, parts) if matches!(parts[..], [Part::Inline(_)]) => {
                let [Part::Inline(bytes)] = parts[..] else {
                    unreachable!("matched above")
                };
                BodyAt::Whole(at(bytes))
            }
            (len, parts) => BodyAt::Parts {
                len,
                parts: parts
                    .iter()
                    .map(|p| match *p {
                        Part::Inline(b) => PartAt::Inline(at(b)),
                        Part::Piece { name, len } => PartAt::Piece { name, len },
                        Part::List { name, len } => PartAt::List { name, len },
                        Part::Packed { .. } => unreachable!("an expanded body holds none"),
                    })
                    .collect(),
            },
        },
    };
    let decoded = Decoded { kind, image, body };
    if let Some(bytes) = decoded.whole() {
        check_payload(kind, bytes, identity)?;
    }
    Ok(decoded)
}

/// The checks of a whole payload: for `cache` a version-one pipeline-cache header for this device;
/// for `binary` every binary's count, key and length.
pub fn check_payload(
    kind: PayloadKind,
    data: &[u8],
    identity: &Identity,
) -> Result<(), EntryError> {
    match kind {
        PayloadKind::Cache => check_cache_header(data, identity),
        PayloadKind::Binaries => super::binaries::parse(data).map(|_| ()),
    }
}

/// The check of a payload's start, given its first [`CACHE_HEADER_LEN`] bytes and its length:
/// all a `cache` payload needs.
pub fn check_payload_start(
    kind: PayloadKind,
    start: &[u8],
    len: usize,
    identity: &Identity,
) -> Result<(), EntryError> {
    match kind {
        PayloadKind::Cache => check_cache_header_of(start, len, identity),
        PayloadKind::Binaries => Ok(()),
    }
}

/// The data must begin with `VkPipelineCacheHeaderVersionOne` naming this vendor, device and UUID.
/// The header alone (no pipeline after it) is refused too: it is never worth handing on.
pub fn check_cache_header(data: &[u8], identity: &Identity) -> Result<(), EntryError> {
    check_cache_header_of(data, data.len(), identity)
}

/// [`check_cache_header`] given the data's start (at least the header) and its whole length.
fn check_cache_header_of(data: &[u8], len: usize, identity: &Identity) -> Result<(), EntryError> {
    if data.len() < CACHE_HEADER_LEN || len < CACHE_HEADER_LEN {
        return Err(EntryError::BadHeader {
            what: "shorter than a header",
        });
    }
    let header_len = u32_at(data, 0) as usize;
    if header_len < CACHE_HEADER_LEN || header_len > len {
        return Err(EntryError::BadHeader {
            what: "header size",
        });
    }
    if u32_at(data, 4) != CACHE_HEADER_VERSION_ONE {
        return Err(EntryError::BadHeader {
            what: "header version",
        });
    }
    if u32_at(data, 8) != identity.vendor_id || u32_at(data, 12) != identity.device_id {
        return Err(EntryError::BadHeader {
            what: "vendor or device",
        });
    }
    if data[16..32] != identity.cache_uuid {
        return Err(EntryError::BadHeader { what: "UUID" });
    }
    Ok(())
}

/// The `VkPipelineCacheHeaderVersionOne` a driver of this identity puts in front of its data.
pub fn cache_header(identity: &Identity) -> [u8; CACHE_HEADER_LEN] {
    let mut h = [0u8; CACHE_HEADER_LEN];
    h[0..4].copy_from_slice(&(CACHE_HEADER_LEN as u32).to_le_bytes());
    h[4..8].copy_from_slice(&CACHE_HEADER_VERSION_ONE.to_le_bytes());
    h[8..12].copy_from_slice(&identity.vendor_id.to_le_bytes());
    h[12..16].copy_from_slice(&identity.device_id.to_le_bytes());
    h[16..32].copy_from_slice(&identity.cache_uuid);
    h
}

/// True when pipeline-cache data holds more than its header: something worth keeping.
pub fn holds_more_than_header(data: &[u8]) -> bool {
    data.len() >= CACHE_HEADER_LEN && data.len() > u32_at(data, 0) as usize
}

#[cfg(test)]
#[path = "envelope_tests.rs"]
pub(crate) mod tests;
