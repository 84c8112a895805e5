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
pub(crate) mod tests {
    use super::*;

    pub fn identity() -> Identity {
        Identity {
            vendor_id: 0x1002,
            device_id: 0x73bf,
            driver_version: 0x0640_0007,
            cache_uuid: [
                0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad,
                0xae, 0xaf,
            ],
            abi: 8,
        }
    }

    pub fn key() -> PipelineKey {
        PipelineKey {
            spirv: [0x11; 16],
            state: [0x22; 16],
        }
    }

    /// Pipeline-cache data as a driver would give it: a header, then a payload.
    pub fn cache_data(id: &Identity, payload: &[u8]) -> Vec<u8> {
        [&cache_header(id)[..], payload].concat()
    }

    // If these golden tests fail, the bytes on disk changed: bump FORMAT_VERSION (and
    // docs/FORMAT.md) so that old entries are refused as `foreign`, never misread.
    #[test]
    fn golden_envelope_bytes_if_these_fail_bump_the_format() {
        let id = identity();
        let data = cache_data(&id, b"pipeline");
        let bytes = encode(&id, &key(), &data);
        let mut want: Vec<u8> = Vec::new();
        want.extend_from_slice(b"PIPEKEEP");
        want.extend_from_slice(&[3, 0, 0, 0]); // format
        want.extend_from_slice(&[8, 0, 0, 0]); // ABI
        want.extend_from_slice(&[0x02, 0x10, 0, 0]); // vendor
        want.extend_from_slice(&[0xbf, 0x73, 0, 0]); // device
        want.extend_from_slice(&[0x07, 0x00, 0x40, 0x06]); // driver version
        want.extend_from_slice(&[0, 0, 0, 0]); // payload kind: cache
        want.extend_from_slice(&id.cache_uuid);
        want.extend_from_slice(&[0x11; 16]);
        want.extend_from_slice(&[0x22; 16]);
        want.extend_from_slice(&[72, 0, 0, 0, 0, 0, 0, 0]); // body length
        assert_eq!(&bytes[..88], &want[..]);
        assert_eq!(
            crate::store::identity::hex(&bytes[88..120]),
            "0574b2a17cc672524027d4def0ee8a9b4959726259592cc8157f4200e712eb64",
            "BLAKE3 of the body (format 3's context), pinned"
        );
        // The body: the payload's length, one part, standing inline (40 bytes do not compress).
        assert_eq!(&bytes[120..128], &[40, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&bytes[128..136], &[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            &bytes[136..152],
            &[0, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(&bytes[152..], &data[..]);
        assert_eq!(ENVELOPE_LEN, 120);
        assert_eq!(FORMAT_VERSION, 3);
    }

    /// The payload of the packed golden tests: a header, then "pipeline" 32 times (288 bytes).
    fn packable(id: &Identity) -> Vec<u8> {
        cache_data(id, &b"pipeline".repeat(32))
    }

    /// One zstd frame of [`packable`] (libzstd 1.5.7, level 1), as a format-3 entry holds it.
    pub const PACKED_FRAME: [u8; 58] = [
        0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x20, 0x00, 0x85, 0x01, 0x00, 0x84, 0x02, 0x20, 0x00, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x10, 0x00, 0x00, 0xbf, 0x73, 0x00, 0x00, 0xa0, 0xa1,
        0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf, 0x70,
        0x69, 0x70, 0x65, 0x6c, 0x69, 0x6e, 0x65, 0x01, 0x00, 0xa8, 0x8f, 0x2a, 0x65,
    ];

    /// The body listing `data` inline, as format 2 wrote it and format 3 reads expanded.
    fn bytes_expanded(data: &[u8]) -> Vec<u8> {
        recipe::encode(&[Part::Inline(data)])
    }

    /// The envelope's first 80 bytes as the golden tests' identity and key give them.
    fn golden_head(format: u8) -> Vec<u8> {
        let mut want: Vec<u8> = b"PIPEKEEP".to_vec();
        want.extend_from_slice(&[format, 0, 0, 0, 8, 0, 0, 0]); // format, ABI
        want.extend_from_slice(&[0x02, 0x10, 0, 0, 0xbf, 0x73, 0, 0]); // vendor, device
        want.extend_from_slice(&[0x07, 0x00, 0x40, 0x06, 0, 0, 0, 0]); // driver, kind: cache
        want.extend_from_slice(&identity().cache_uuid);
        want.extend_from_slice(&[0x11; 16]);
        want.extend_from_slice(&[0x22; 16]);
        want
    }

    // If this golden test fails, the bytes on disk changed: bump FORMAT_VERSION. The frame's own
    // bytes are the compressor's (another libzstd may write others of the same bytes): they are
    // pinned where they are read (`a_packed_entry_of_these_bytes_is_read`), not here.
    #[test]
    fn golden_packed_entry_bytes_if_these_fail_bump_the_format() {
        let id = identity();
        let data = packable(&id);
        let bytes = encode(&id, &key(), &data);
        assert_eq!(&bytes[..80], &golden_head(3)[..]);
        let stored = u32::from_le_bytes(bytes[140..144].try_into().unwrap()) as usize;
        assert!(stored > 0 && stored < 288, "{stored} bytes stored");
        assert_eq!(&bytes[80..88], &((32 + stored) as u64).to_le_bytes()); // body length
        assert_eq!(
            crate::store::identity::hex(&bytes[88..120]),
            "e0e2fdb79f0a61d961daea160ccef5bd66fc80a16499f652f6603469b8b0148d",
            "BLAKE3 (format 3's context) of the body as it reads uncompressed, pinned"
        );
        // The body: the payload's length, one part, packed: kind 3, its stored length, its length.
        assert_eq!(
            &bytes[120..136],
            &[32, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(&bytes[136..140], &[3, 0, 0, 0]);
        assert_eq!(&bytes[144..152], &[32, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(bytes.len(), 152 + stored);
        let mut out = vec![0u8; 288];
        crate::store::compress::decompress_into(&bytes[152..], &mut out).unwrap();
        assert_eq!(out, data);
        // Format 2 held the body expanded, under a plain BLAKE3.
        let two = encode_format_two(&id, &key(), PayloadKind::Cache, &[Part::Inline(&data)]);
        assert_eq!(&two[120..], &bytes_expanded(&data)[..]);
        assert_eq!(&two[..80], &golden_head(2)[..]);
        assert_eq!(
            crate::store::identity::hex(&two[88..120]),
            "ac75cd22f5a64e10003843c769a8ba8527b5640b6067be8cd731b59070898f10"
        );
    }

    #[test]
    fn a_packed_entry_of_these_bytes_is_read() {
        let id = identity();
        let mut file = golden_head(3);
        file.extend_from_slice(&90u64.to_le_bytes());
        file.extend_from_slice(
            &crate::key::text::from_hex::<32>(
                "e0e2fdb79f0a61d961daea160ccef5bd66fc80a16499f652f6603469b8b0148d",
            )
            .unwrap(),
        );
        file.extend_from_slice(&[32, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        file.extend_from_slice(&[3, 0, 0, 0, 58, 0, 0, 0, 32, 1, 0, 0, 0, 0, 0, 0]);
        file.extend_from_slice(&PACKED_FRAME);
        let decoded = decode(&file, &id, &key()).unwrap();
        assert_eq!(decoded.whole(), Some(&packable(&id)[..]));
        assert!(decoded.is_expanded());
        assert_eq!(listed_parts(&file), Some((288, Vec::new())));
        // A stored length other than the frame's, or a length other than the frame's: refused.
        let mut short = file.clone();
        short[140] = 57;
        assert_eq!(decode(&short, &id, &key()).unwrap_err().reason(), "corrupt");
        let mut other = file.clone();
        other[144] = 33;
        other[120] = 33;
        assert_eq!(decode(&other, &id, &key()).unwrap_err().reason(), "corrupt");
        // A frame's stored length as long as its bytes, or 0: refused as corrupt.
        for stored in [0u8, 32] {
            let mut bad = file.clone();
            bad[140] = stored;
            bad[141] = u8::from(stored == 32);
            assert!(decode(&bad, &id, &key()).is_err());
        }
    }

    #[test]
    fn an_entry_of_format_two_is_still_read() {
        let id = identity();
        let data = packable(&id);
        let bytes = encode_format_two(&id, &key(), PayloadKind::Cache, &[Part::Inline(&data)]);
        assert_eq!(&bytes[8..12], &[2, 0, 0, 0]);
        assert_eq!(bytes.len(), 120 + 32 + 288);
        let decoded = decode(&bytes, &id, &key()).unwrap();
        assert_eq!(decoded.whole(), Some(&data[..]));
        assert!(!decoded.is_expanded());
        // Format 2 holds no packed part: one written there is refused.
        let packed = encode(&id, &key(), &data);
        let mut relabelled = packed.clone();
        relabelled[8] = 2;
        assert_eq!(
            decode(&relabelled, &id, &key()).unwrap_err().reason(),
            "corrupt"
        );
        assert_eq!(listed_parts(&relabelled), None);
    }

    #[test]
    fn every_byte_of_a_packed_entry_is_checked() {
        let id = identity();
        let data = packable(&id);
        let good = encode(&id, &key(), &data);
        assert!(good.len() < 120 + 32 + 288, "packed");
        for i in 0..good.len() {
            let mut damaged = good.clone();
            damaged[i] ^= 0x01;
            match decode(&damaged, &id, &key()) {
                Err(_) => {}
                // A bit of the frame that zstd does not read leaves the bytes the hash covers.
                Ok(d) => assert!(i >= 152 && d.whole() == Some(&data[..]), "byte {i}"),
            }
        }
    }

    #[test]
    fn an_entry_of_pieces_and_packed_parts_reads_back_as_written() {
        let id = identity();
        let head = packable(&id);
        let tail = b"own bytes, more of them".repeat(20);
        let parts = [
            Part::Inline(&head),
            Part::Piece {
                name: [4; 32],
                len: 1000,
            },
            Part::Inline(&tail),
            Part::Inline(b"short"),
        ];
        let bytes = encode_parts(&id, &key(), PayloadKind::Cache, &parts);
        let stored = recipe::parse_as(&bytes[120..], recipe::Parts::Packed)
            .unwrap()
            .1;
        let kinds: Vec<bool> = stored
            .iter()
            .map(|p| matches!(p, Part::Packed { .. }))
            .collect();
        assert_eq!(kinds, [true, false, true, false]);
        let decoded = decode(&bytes, &id, &key()).unwrap();
        assert_eq!(
            decoded.body(),
            Body::Parts {
                len: 288 + 1000 + tail.len() as u64 + 5,
                parts: parts.to_vec()
            }
        );
        assert_eq!(listed_parts(&bytes).unwrap().1, vec![[4; 32]]);
    }

    #[test]
    fn what_a_short_file_lists_is_nothing_and_never_a_panic() {
        let whole = encode(&identity(), &key(), &cache_data(&identity(), &[5; 40]));
        for len in 0..whole.len() {
            assert_eq!(listed_parts(&whole[..len]), None, "{len} bytes");
            assert!(declared_file_len(&whole[..len]).is_none_or(|l| l != len as u64));
        }
        assert!(listed_parts(&whole).is_some());
    }

    #[test]
    fn an_entry_of_format_one_is_still_read() {
        let id = identity();
        let data = cache_data(&id, b"pipeline");
        let bytes = encode_format_one(&id, &key(), PayloadKind::Cache, &data);
        assert_eq!(&bytes[8..12], &[1, 0, 0, 0]);
        assert_eq!(&bytes[80..88], &[40, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            crate::store::identity::hex(&bytes[88..120]),
            "022312dd2ba2eea633e8d38282f917ef540bf475a9c482808d9f427b18712685",
            "BLAKE3 of the data, as format 1 pinned it"
        );
        assert_eq!(&bytes[120..], &data[..]);
        let decoded = decode(&bytes, &id, &key()).unwrap();
        assert_eq!(decoded.whole(), Some(&data[..]));
        let mut damaged = bytes.clone();
        *damaged.last_mut().unwrap() ^= 1;
        assert_eq!(
            decode(&damaged, &id, &key()).unwrap_err().reason(),
            "corrupt"
        );
    }

    #[test]
    fn an_entry_of_pieces_lists_them_and_its_payload_is_checked_once_put_together() {
        let id = identity();
        let head = cache_data(&id, b"own");
        let parts = [
            Part::Inline(&head),
            Part::Piece {
                name: [4; 32],
                len: 1000,
            },
        ];
        let bytes = encode_parts(&id, &key(), PayloadKind::Cache, &parts);
        let decoded = decode(&bytes, &id, &key()).unwrap();
        assert_eq!(
            decoded.body(),
            Body::Parts {
                len: 1035,
                parts: parts.to_vec()
            }
        );
        assert_eq!(
            check_payload_start(PayloadKind::Cache, &head, 1035, &id),
            Ok(())
        );
        let mut other = head.clone();
        other[9] ^= 1;
        assert_eq!(
            check_payload_start(PayloadKind::Cache, &other, 1035, &id)
                .unwrap_err()
                .reason(),
            "bad-header"
        );
    }

    #[test]
    fn an_entry_opens_whole_only_for_its_own_identity_and_key() {
        let id = identity();
        let data = cache_data(&id, &[7u8; 100]);
        let bytes = encode(&id, &key(), &data);
        assert_eq!(
            decode(&bytes, &id, &key()).unwrap().whole(),
            Some(&data[..])
        );
    }

    #[test]
    fn every_foreign_identity_field_is_refused_as_foreign() {
        let id = identity();
        let bytes = encode(&id, &key(), &cache_data(&id, &[1; 8]));
        let others = [
            ("ABI", Identity { abi: 4, ..id }),
            (
                "vendor",
                Identity {
                    vendor_id: 0x10de,
                    ..id
                },
            ),
            ("device", Identity { device_id: 1, ..id }),
            (
                "driver version",
                Identity {
                    driver_version: 1,
                    ..id
                },
            ),
            (
                "pipeline-cache UUID",
                Identity {
                    cache_uuid: [0; 16],
                    ..id
                },
            ),
        ];
        for (field, other) in others {
            assert_eq!(
                decode(&bytes, &other, &key()),
                Err(EntryError::Foreign { field })
            );
        }
    }

    #[test]
    fn another_pipelines_entry_is_refused_as_other_key() {
        let id = identity();
        let bytes = encode(&id, &key(), &cache_data(&id, &[1; 8]));
        let mut other = key();
        other.state[15] ^= 1;
        assert_eq!(decode(&bytes, &id, &other), Err(EntryError::OtherKey));
        other = key();
        other.spirv[0] ^= 0x80;
        assert_eq!(decode(&bytes, &id, &other), Err(EntryError::OtherKey));
    }

    #[test]
    fn each_damage_is_refused_with_its_own_reason() {
        let id = identity();
        let good = encode(&id, &key(), &cache_data(&id, &[9; 64]));
        let reason = |b: &[u8]| decode(b, &id, &key()).unwrap_err().reason();
        assert_eq!(reason(&[]), "short", "zero-length");
        assert_eq!(reason(&good[..100]), "short", "cut inside the envelope");
        assert_eq!(
            reason(&good[..good.len() - 1]),
            "short",
            "cut inside the data"
        );
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(reason(&longer), "long");
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(reason(&flipped), "corrupt", "a byte of the data");
        flipped = good.clone();
        flipped[100] ^= 1;
        assert_eq!(reason(&flipped), "corrupt", "a byte of the stored hash");
        flipped = good.clone();
        flipped[3] ^= 1;
        assert_eq!(reason(&flipped), "corrupt", "the magic");
        flipped = good.clone();
        flipped[29] = 1;
        assert_eq!(reason(&flipped), "corrupt", "the payload kind");
        flipped = good.clone();
        flipped[8] = 4;
        assert_eq!(reason(&flipped), "foreign", "another format");
        flipped = good.clone();
        flipped[81] ^= 1;
        assert_eq!(reason(&flipped), "short", "the data length field");
    }

    #[test]
    fn every_byte_of_a_good_entry_is_checked() {
        let id = identity();
        let good = encode(&id, &key(), &cache_data(&id, &[3; 16]));
        for i in 0..good.len() {
            let mut damaged = good.clone();
            damaged[i] ^= 0x01;
            assert!(
                decode(&damaged, &id, &key()).is_err(),
                "byte {i} changed and still accepted"
            );
        }
    }

    #[test]
    fn a_bad_cache_header_is_refused_as_bad_header() {
        let id = identity();
        let mut wrong_vendor = cache_data(&id, &[1; 8]);
        wrong_vendor[8] ^= 1;
        let mut wrong_version = cache_data(&id, &[1; 8]);
        wrong_version[4] = 2;
        let mut wrong_uuid = cache_data(&id, &[1; 8]);
        wrong_uuid[31] ^= 1;
        let mut huge_header = cache_data(&id, &[1; 8]);
        huge_header[0..4].copy_from_slice(&1000u32.to_le_bytes());
        for data in [
            vec![],
            vec![0; 8],
            wrong_vendor,
            wrong_version,
            wrong_uuid,
            huge_header,
        ] {
            // An empty payload cannot be listed in parts: only format 1 could hold one.
            let bytes = match data.is_empty() {
                true => encode_format_one(&id, &key(), PayloadKind::Cache, &data),
                false => encode(&id, &key(), &data),
            };
            assert_eq!(
                decode(&bytes, &id, &key()).unwrap_err().reason(),
                "bad-header"
            );
        }
    }

    #[test]
    fn a_bare_header_holds_nothing_worth_keeping() {
        let id = identity();
        assert!(!holds_more_than_header(&cache_data(&id, &[])));
        assert!(holds_more_than_header(&cache_data(&id, &[0])));
        assert!(!holds_more_than_header(&[]));
    }
}
