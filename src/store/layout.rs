//! The envelope's layout: its constants and field offsets, the payload's kind, the named reasons
//! an entry is refused, and what the first bytes of a file say (its driver ABI, its length, its
//! format). The floor the envelope's codec ([`super::envelope`]), the payload's parts
//! ([`super::recipe`], [`super::binaries`]) and the files ([`super::files`]) stand on.

pub const MAGIC: [u8; 8] = *b"PIPEKEEP";
/// Bump when the byte layout below changes; the golden tests pin it. Format 3: the body lists
/// the payload's parts ([`super::recipe`]), an inline part packed (zstd) where that pays, and the
/// data hash is of the body as it reads uncompressed (the body format 2 held).
pub const FORMAT_VERSION: u32 = 3;
/// Format 2, before compression: the body lists the payload's parts, none packed. Still read.
pub const FORMAT_PARTS: u32 = 2;
/// Format 1, before pieces: the payload stands whole after the envelope. Still read.
pub const FORMAT_WHOLE: u32 = 1;
pub const ENVELOPE_LEN: usize = 120;
/// `VkPipelineCacheHeaderVersionOne`: headerSize, headerVersion, vendorID, deviceID, UUID.
pub const CACHE_HEADER_LEN: usize = 32;
pub const CACHE_HEADER_VERSION_ONE: u32 = 1;

pub mod offset {
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
    pub fn from_raw(raw: u32) -> Option<PayloadKind> {
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

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub fn u64_at(b: &[u8], at: usize) -> u64 {
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
