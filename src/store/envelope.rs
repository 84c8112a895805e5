//! The envelope: the fixed 120-byte header in front of a pipeline's kept data (its payload), and
//! every check made before the driver sees a byte of it. `docs/FORMAT.md` gives the byte table.
//!
//! Decoding checks, in this order: the length of the envelope itself, the magic, the format, the
//! payload's kind, the identity fields (ABI, vendor, device, driver version, UUID), the key, the
//! file's exact length, the data hash, and the payload whole: for [`PayloadKind::Cache`] a
//! version-one pipeline-cache header naming this vendor, device and UUID; for
//! [`PayloadKind::Binaries`] every binary's count, key and length ([`super::binaries`]). Each
//! failure is its own [`EntryError`].

use super::identity::Identity;
use super::recipe::{self, Part};
use crate::key::PipelineKey;

pub const MAGIC: [u8; 8] = *b"PIPEKEEP";
/// Bump when the byte layout below changes; the golden tests pin it. Format 2: the body after
/// the envelope lists the payload's parts ([`super::recipe`]); format 1 held the payload itself.
pub const FORMAT_VERSION: u32 = 2;
/// Format 1, before pieces: the payload stands whole after the envelope. Still read.
pub const FORMAT_WHOLE: u32 = 1;
pub const ENVELOPE_LEN: usize = 120;
/// `VkPipelineCacheHeaderVersionOne`: headerSize, headerVersion, vendorID, deviceID, UUID.
pub const CACHE_HEADER_LEN: usize = 32;
const CACHE_HEADER_VERSION_ONE: u32 = 1;

mod offset {
    pub const MAGIC: usize = 0;
    pub const FORMAT: usize = 8;
    pub const ABI: usize = 12;
    pub const VENDOR: usize = 16;
    pub const DEVICE: usize = 20;
    pub const DRIVER: usize = 24;
    /// Reserved (0) in the first entries of format 1, which all held a cache: 0 is `Cache`.
    pub const KIND: usize = 28;
    pub const UUID: usize = 32;
    pub const SPIRV_KEY: usize = 48;
    pub const STATE_KEY: usize = 64;
    pub const DATA_LEN: usize = 80;
    pub const DATA_HASH: usize = 88;
}

/// What an entry's payload is, by the backend that wrote it; either backend serves both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadKind {
    /// One pipeline cache's data (`vkGetPipelineCacheData`): the `cache` backend's.
    Cache = 0,
    /// The pipeline's binaries with their keys: the `binary` backend's.
    Binaries = 1,
}

impl PayloadKind {
    fn from_raw(raw: u32) -> Option<PayloadKind> {
        match raw {
            0 => Some(PayloadKind::Cache),
            1 => Some(PayloadKind::Binaries),
            _ => None,
        }
    }

    /// The word `pipekeep stats`, the log and `runs.jsonl` use.
    pub fn name(self) -> &'static str {
        match self {
            PayloadKind::Cache => "cache",
            PayloadKind::Binaries => "binary",
        }
    }
}

/// A decoded entry's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload<'a> {
    pub kind: PayloadKind,
    pub bytes: &'a [u8],
}

/// Why an entry was refused. [`EntryError::reason`] is the word logged after `reason=`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("shorter than its envelope says: {len} bytes, {expected} expected")]
    Short { len: u64, expected: u64 },
    #[error("longer than its envelope says: {len} bytes, {expected} expected")]
    Long { len: u64, expected: u64 },
    #[error("corrupt: {what}")]
    Corrupt { what: &'static str },
    #[error("made for another {field}")]
    Foreign { field: &'static str },
    #[error("holds another pipeline's key")]
    OtherKey,
    #[error("the data is not a version-one pipeline-cache header for this device: {what}")]
    BadHeader { what: &'static str },
    #[error("not a regular file")]
    NotAFile,
    #[error("{len} bytes, more than an entry may hold")]
    TooLarge { len: u64 },
    #[error("a piece it names is missing")]
    MissingPiece,
    #[error("a piece it names does not match its name")]
    CorruptPiece,
}

impl EntryError {
    pub fn reason(&self) -> &'static str {
        match self {
            EntryError::Short { .. } => "short",
            EntryError::Long { .. } => "long",
            EntryError::Corrupt { .. } => "corrupt",
            EntryError::Foreign { .. } => "foreign",
            EntryError::OtherKey => "other-key",
            EntryError::BadHeader { .. } => "bad-header",
            EntryError::NotAFile => "not-a-file",
            EntryError::TooLarge { .. } => "too-large",
            EntryError::MissingPiece => "missing-piece",
            EntryError::CorruptPiece => "corrupt-piece",
        }
    }
}

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

/// Envelope and a payload of `kind` given as parts (inline bytes and pieces).
pub fn encode_parts(
    identity: &Identity,
    key: &PipelineKey,
    kind: PayloadKind,
    parts: &[Part<'_>],
) -> Vec<u8> {
    encode_body(identity, key, kind, FORMAT_VERSION, &recipe::encode(parts))
}

/// An entry of format 1 (the payload whole after the envelope), as entries were written before
/// pieces; still read. For the tests of that migration.
pub fn encode_format_one(
    identity: &Identity,
    key: &PipelineKey,
    kind: PayloadKind,
    data: &[u8],
) -> Vec<u8> {
    encode_body(identity, key, kind, FORMAT_WHOLE, data)
}

fn encode_body(
    identity: &Identity,
    key: &PipelineKey,
    kind: PayloadKind,
    format: u32,
    body: &[u8],
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
    out.extend_from_slice(blake3::hash(body).as_bytes());
    debug_assert_eq!(out.len(), ENVELOPE_LEN);
    out.extend_from_slice(body);
    out
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The driver ABI an entry's envelope names, if the file is long enough to hold it.
pub fn abi_of(file: &[u8]) -> Option<u32> {
    (file.len() >= offset::ABI + 4).then(|| u32_at(file, offset::ABI))
}

/// The length a file must have for the envelope at its start (`None` when too short to say),
/// read before the rest of a large file is.
pub fn declared_file_len(start: &[u8]) -> Option<u64> {
    (start.len() >= ENVELOPE_LEN && start[offset::MAGIC..offset::MAGIC + 8] == MAGIC)
        .then(|| (ENVELOPE_LEN as u64).saturating_add(u64_at(start, offset::DATA_LEN)))
}

/// The format and the body's length an envelope at the start of a file gives (`None` where it
/// is too short or not an envelope), for readers that take the body's parts without the rest.
pub fn format_and_body_len(start: &[u8]) -> Option<(u32, u64)> {
    (start.len() >= ENVELOPE_LEN && start[offset::MAGIC..offset::MAGIC + 8] == MAGIC).then(|| {
        (
            u32_at(start, offset::FORMAT),
            u64_at(start, offset::DATA_LEN),
        )
    })
}

/// What an entry lists, read without knowing its identity or key: its payload's length and the
/// pieces and lists it names. `None` for a file that is not a whole entry. For the entry a
/// stale loading marker names (the driver stopped while loading it, maybe on a piece other
/// entries share) and for the tools' counts.
pub fn listed_parts(file: &[u8]) -> Option<(u64, Vec<recipe::PieceName>)> {
    // Every field is read only once the length is known to hold the envelope: a stale marker
    // may name an entry of a few bytes, and the tools list empty files.
    let whole = declared_file_len(file) == Some(file.len() as u64)
        && blake3::hash(&file[ENVELOPE_LEN..]).as_bytes()[..]
            == file[offset::DATA_HASH..offset::DATA_HASH + 32];
    if !whole {
        return None;
    }
    match u32_at(file, offset::FORMAT) {
        FORMAT_WHOLE => Some(((file.len() - ENVELOPE_LEN) as u64, Vec::new())),
        FORMAT_VERSION => {
            let (len, parts) = recipe::parse(&file[ENVELOPE_LEN..]).ok()?;
            let pieces = parts
                .iter()
                .filter_map(|p| match p {
                    Part::Piece { name, .. } | Part::List { name, .. } => Some(*name),
                    Part::Inline(_) => None,
                })
                .collect();
            Some((len, pieces))
        }
        _ => None,
    }
}

/// Where a checked entry's payload is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body<'a> {
    /// Whole in the entry, already checked whole.
    Whole(&'a [u8]),
    /// In parts, some of them pieces: the payload is checked ([`check_payload_start`], and for
    /// binaries [`check_payload`]) once the pieces are read.
    Parts { len: u64, parts: Vec<Part<'a>> },
}

/// An entry checked for this identity and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded<'a> {
    pub kind: PayloadKind,
    pub body: Body<'a>,
}

impl<'a> Decoded<'a> {
    /// The payload where it stands whole in the entry.
    pub fn whole(&self) -> Option<&'a [u8]> {
        match self.body {
            Body::Whole(b) => Some(b),
            Body::Parts { .. } => None,
        }
    }
}

/// Checks a whole entry file for this identity and key: the envelope, the hash of the entry's
/// bytes, the list of its parts, and a payload standing whole in it.
pub fn decode<'a>(
    file: &'a [u8],
    identity: &Identity,
    key: &PipelineKey,
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
    if format != FORMAT_VERSION && format != FORMAT_WHOLE {
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
    let body = &file[ENVELOPE_LEN..];
    if blake3::hash(body).as_bytes()[..] != file[offset::DATA_HASH..offset::DATA_HASH + 32] {
        return Err(EntryError::Corrupt { what: "data hash" });
    }
    let body = match format {
        FORMAT_WHOLE => Body::Whole(body),
        _ => match recipe::parse(body)? {
            (_, parts) if matches!(parts[..], [Part::Inline(_)]) => {
                let [Part::Inline(bytes)] = parts[..] else {
                    unreachable!("matched above")
                };
                Body::Whole(bytes)
            }
            (len, parts) => Body::Parts { len, parts },
        },
    };
    if let Body::Whole(bytes) = body {
        check_payload(kind, bytes, identity)?;
    }
    Ok(Decoded { kind, body })
}

/// [`decode`] for an entry whose payload stands whole in it (`None` for one made of pieces).
pub fn decode_whole<'a>(
    file: &'a [u8],
    identity: &Identity,
    key: &PipelineKey,
) -> Result<Option<Payload<'a>>, EntryError> {
    let decoded = decode(file, identity, key)?;
    Ok(decoded.whole().map(|bytes| Payload {
        kind: decoded.kind,
        bytes,
    }))
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
        want.extend_from_slice(&[2, 0, 0, 0]); // format
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
            "484d6429633d21f4e862661d442f067d516354093a2fd4b9420b03a781436914",
            "BLAKE3 of the body, pinned"
        );
        // The body: the payload's length, one part, standing inline.
        assert_eq!(&bytes[120..128], &[40, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&bytes[128..136], &[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            &bytes[136..152],
            &[0, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(&bytes[152..], &data[..]);
        assert_eq!(ENVELOPE_LEN, 120);
        assert_eq!(FORMAT_VERSION, 2);
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
            decoded.body,
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
        flipped[8] = 3;
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
