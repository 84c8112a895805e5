//! NVIDIA's pipeline-cache data, read only as far as handing the driver a found pipeline without
//! the dictionary it already holds.
//!
//! Once a process has compiled some 1,730 pipelines, NVIDIA's driver trains a zstd dictionary
//! (1.78 MB), compresses every later pipeline with it, and puts it, as a record of its own, into
//! the cache data of each of them (1,382 of ncnn's 3,115 entries carry it). Making a cache of such
//! an entry costs the driver ~200 us for the dictionary alone. Measured on the H200 (driver
//! 580.159.04): a cache made of the same data without the dictionary's record is served as a hit
//! once the device has made one cache that held that dictionary, merged or not. So the layer
//! frames the data, and where the device already holds the dictionary hands the driver the other
//! records alone, re-counted: every byte of them as the driver wrote it.
//!
//! The layout, as measured (little-endian):
//!
//! | offset | bytes | field |
//! | --- | --- | --- |
//! | 0 | 32 | `VkPipelineCacheHeaderVersionOne`: header length 32, version 1, vendor `0x10de`, device, UUID |
//! | 32 | 4 | the number of records |
//! | 36 | | the records, back to back, to the last byte |
//!
//! A record:
//!
//! | offset | bytes | field |
//! | --- | --- | --- |
//! | 0 | 16 | key (the dictionary's: 8 bytes of the driver's build, then `_NVDICT_`) |
//! | 16 | 4 | n, the data's length |
//! | 20 | 4 | `CPKV` |
//! | 24 | 4 | zero |
//! | 28 | 16 | the key again |
//! | 44 | 8 | the data's hash (a dictionary is known by it and n) |
//! | 52 | 4 | n again |
//! | 56 | 4 | zero |
//! | 60 | n | the data |
//!
//! Data that does not frame exactly so is never cut: it goes to the driver whole, as before.

use std::ops::Range;

use super::identity::NVIDIA;

const VULKAN_HEADER: usize = 32;
const RECORDS_AT: usize = VULKAN_HEADER + 4;
/// The bytes of a record's head, before its data.
pub const RECORD_HEAD: usize = 60;
const DICTIONARY_NAME: &[u8; 8] = b"_NVDICT_";
const RECORD_MAGIC: &[u8; 4] = b"CPKV";

/// A dictionary, known by its record's hash and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DictionaryId {
    pub hash: u64,
    pub len: u32,
}

/// Cache data framed, with the one dictionary record it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Framing {
    pub dictionary: DictionaryId,
    /// The dictionary's whole record (head and data).
    dictionary_record: Range<usize>,
    records: u32,
    len: usize,
}

/// Why data was not framed (it then goes to the driver whole).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("not NVIDIA's pipeline-cache header")]
    NotNvidia,
    #[error("record {index} at byte {at} runs past the data's end")]
    CutShort { index: u32, at: usize },
    #[error("record {index} at byte {at} is not framed as NVIDIA frames one")]
    Malformed { index: u32, at: usize },
    #[error("the data holds {records} records in less room than that many take")]
    TooManyRecords { records: u32 },
    #[error("{extra} bytes after the last record")]
    TrailingBytes { extra: usize },
    #[error("more than one dictionary")]
    TwoDictionaries,
    #[error("no dictionary")]
    NoDictionary,
    #[error("nothing but the dictionary")]
    OnlyTheDictionary,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

/// Frames NVIDIA cache data that carries a dictionary, `len` bytes that `copy` appends a range
/// of (cut at their end) to a buffer: reading only its headers, so that a payload held in parts
/// is not put together for it.
pub fn frame_parts(
    len: usize,
    copy: impl Fn(Range<usize>, &mut Vec<u8>),
) -> Result<Framing, FramingError> {
    let mut dictionary = None;
    let records = walk(len, copy, |at, record, head| {
        if &head[8..16] == DICTIONARY_NAME {
            if dictionary.is_some() {
                return Err(FramingError::TwoDictionaries);
            }
            let hash = u64::from_le_bytes(head[44..52].try_into().expect("eight bytes"));
            let n = u32_at(head, 16);
            dictionary = Some((DictionaryId { hash, len: n }, at..record.end));
        }
        Ok(())
    })?;
    let (dictionary, dictionary_record) = dictionary.ok_or(FramingError::NoDictionary)?;
    if records < 2 {
        return Err(FramingError::OnlyTheDictionary);
    }
    Ok(Framing {
        dictionary,
        dictionary_record,
        records,
        len,
    })
}

/// Walks the records of `len` bytes that `copy` appends a range of to a buffer, checking each
/// head as the driver frames it; `each` is given where a record starts, its whole range and its
/// head. The number of records.
fn walk(
    len: usize,
    copy: impl Fn(Range<usize>, &mut Vec<u8>),
    mut each: impl FnMut(usize, Range<usize>, &[u8]) -> Result<(), FramingError>,
) -> Result<u32, FramingError> {
    let read = |range: Range<usize>, out: &mut Vec<u8>| {
        out.clear();
        copy(range, out);
    };
    let mut head = Vec::with_capacity(RECORD_HEAD);
    read(0..RECORDS_AT, &mut head);
    if head.len() < RECORDS_AT
        || u32_at(&head, 0) as usize != VULKAN_HEADER
        || u32_at(&head, 4) != 1
        || u32_at(&head, 8) != NVIDIA
    {
        return Err(FramingError::NotNvidia);
    }
    let records = u32_at(&head, VULKAN_HEADER);
    if records as usize > (len - RECORDS_AT) / RECORD_HEAD {
        return Err(FramingError::TooManyRecords { records });
    }
    let mut at = RECORDS_AT;
    for index in 0..records {
        read(at..at + RECORD_HEAD, &mut head);
        if head.len() < RECORD_HEAD {
            return Err(FramingError::CutShort { index, at });
        }
        let n = u32_at(&head, 16);
        let framed = &head[20..24] == RECORD_MAGIC
            && u32_at(&head, 24) == 0
            && head[28..44] == head[0..16]
            && u32_at(&head, 52) == n
            && u32_at(&head, 56) == 0;
        if !framed {
            return Err(FramingError::Malformed { index, at });
        }
        // Checked: on a 32-bit build a record's length near 4 GiB would wrap past `len`.
        let end = (at + RECORD_HEAD)
            .checked_add(n as usize)
            .filter(|&end| end <= len)
            .ok_or(FramingError::CutShort { index, at })?;
        each(at, at..end, &head)?;
        at = end;
    }
    if at != len {
        return Err(FramingError::TrailingBytes { extra: len - at });
    }
    Ok(records)
}

/// Every record's range in whole data (fresh from the driver, or an entry's read back), the
/// dictionary's too.
pub(in crate::store) fn record_ranges(data: &[u8]) -> Result<Vec<Range<usize>>, FramingError> {
    let mut ranges = Vec::new();
    walk(data.len(), copy_of(data), |_, range, _| {
        ranges.push(range);
        Ok(())
    })?;
    Ok(ranges)
}

/// Whether `data` frames as NVIDIA's records.
pub fn frames(data: &[u8]) -> bool {
    record_ranges(data).is_ok()
}

/// One cache's data holding every record of `datas` once (the first's header): what a shared
/// cache the driver had filled with them would hand it. `None` where one does not frame.
pub fn merged(datas: &[&[u8]]) -> Option<Vec<u8>> {
    let first = datas.first()?;
    // A record is known by its head: its key, its data's hash and length.
    let mut seen = std::collections::HashSet::new();
    let mut records: Vec<&[u8]> = Vec::new();
    for data in datas {
        for range in record_ranges(data).ok()? {
            let record = &data[range];
            if seen.insert(&record[..RECORD_HEAD]) {
                records.push(record);
            }
        }
    }
    u32::try_from(records.len()).ok()?;
    Some(with_records(first, &records))
}

/// `header`'s Vulkan header, then `records` counted and back to back.
fn with_records(header: &[u8], records: &[&[u8]]) -> Vec<u8> {
    let len = records.iter().map(|r| r.len()).sum::<usize>();
    let mut out = Vec::with_capacity(RECORDS_AT + len);
    out.extend_from_slice(&header[..VULKAN_HEADER]);
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    records.iter().for_each(|r| out.extend_from_slice(r));
    out
}

/// Frames cache data fresh from the driver (see [`frame_parts`]).
pub fn frame_bytes(data: &[u8]) -> Result<Framing, FramingError> {
    frame_parts(data.len(), copy_of(data))
}

/// What appends a range of whole `data` (cut at its end) to a buffer.
fn copy_of(data: &[u8]) -> impl Fn(Range<usize>, &mut Vec<u8>) + '_ {
    let within = |range: Range<usize>| range.start.min(data.len())..range.end.min(data.len());
    move |range, out| out.extend_from_slice(&data[within(range)])
}

impl Framing {
    /// [`Framing::without_dictionary_parts`] of the data this framing was made of, held whole.
    pub fn without_dictionary_in(&self, data: &[u8]) -> Vec<u8> {
        self.without_dictionary_parts(|range, out| out.extend_from_slice(&data[range]))
    }

    /// The data without the dictionary's record: the Vulkan header, one record fewer, and every
    /// other record's bytes in their order; `copy` appends a range of the data this framing was
    /// made of ([`frame_parts`]) to a buffer.
    pub fn without_dictionary_parts(&self, copy: impl Fn(Range<usize>, &mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len - self.dictionary_record.len());
        copy(0..VULKAN_HEADER, &mut out);
        out.extend_from_slice(&(self.records - 1).to_le_bytes());
        copy(RECORDS_AT..self.dictionary_record.start, &mut out);
        copy(self.dictionary_record.end..self.len, &mut out);
        out
    }

    /// The dictionary's whole record in the data this framing was made of.
    pub fn dictionary_record<'a>(&self, data: &'a [u8]) -> &'a [u8] {
        &data[self.dictionary_record.clone()]
    }

    /// The data as the driver wrote it, from [`Framing::without_dictionary_in`]'s bytes and the
    /// dictionary's record put back where it was.
    pub fn put_back(&self, without: &[u8], record: &[u8]) -> Vec<u8> {
        debug_assert_eq!(record.len(), self.dictionary_record.len());
        debug_assert_eq!(without.len() + record.len(), self.len);
        let before = self.dictionary_record.start - RECORDS_AT;
        let mut out = Vec::with_capacity(without.len() + record.len());
        out.extend_from_slice(&without[..VULKAN_HEADER]);
        out.extend_from_slice(&self.records.to_le_bytes());
        out.extend_from_slice(&without[RECORDS_AT..RECORDS_AT + before]);
        out.extend_from_slice(record);
        out.extend_from_slice(&without[RECORDS_AT + before..]);
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::payload::Payload;
    use std::sync::Arc;

    fn frame(data: &Payload) -> Result<Framing, FramingError> {
        frame_parts(data.len(), |range, out| data.copy_range(range, out))
    }

    fn without(framing: &Framing, data: &Payload) -> Vec<u8> {
        framing.without_dictionary_parts(|range, out| data.copy_range(range, out))
    }

    /// Bytes standing whole, as a payload.
    fn whole(bytes: &[u8]) -> Payload {
        Payload::whole(Arc::new(bytes.to_vec()), 0..bytes.len())
    }

    /// One record as the driver frames it.
    pub fn record(key: [u8; 16], hash: u64, data: &[u8]) -> Vec<u8> {
        let n = (data.len() as u32).to_le_bytes();
        [
            &key[..],
            &n,
            RECORD_MAGIC,
            &[0; 4],
            &key,
            &hash.to_le_bytes(),
            &n,
            &[0; 4],
            data,
        ]
        .concat()
    }

    pub fn dictionary_key() -> [u8; 16] {
        let mut key = [0xdd; 16];
        key[8..].copy_from_slice(DICTIONARY_NAME);
        key
    }

    /// The device [`nvidia_cache`]'s header names (its vendor, device and UUID).
    pub fn identity() -> crate::store::Identity {
        crate::store::Identity {
            vendor_id: NVIDIA,
            device_id: 0x2335,
            cache_uuid: [0x5a; 16],
            ..crate::store::envelope::tests::identity()
        }
    }

    /// NVIDIA's cache data of `records`.
    pub fn nvidia_cache(records: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![
            0x20, 0, 0, 0, 1, 0, 0, 0, 0xde, 0x10, 0, 0, 0x35, 0x23, 0, 0,
        ];
        out.extend_from_slice(&[0x5a; 16]);
        out.extend_from_slice(&(records.len() as u32).to_le_bytes());
        records.iter().for_each(|r| out.extend_from_slice(r));
        out
    }

    /// The bytes of one real record head (ncnn, the H200, driver 580.159.04): if this test
    /// fails, the parser no longer reads what the driver writes.
    #[test]
    fn a_record_head_as_the_driver_wrote_it_frames() {
        let dictionary_head: [u8; 60] = [
            0xdd, 0x41, 0x7e, 0x4b, 0x11, 0xb1, 0xab, 0xa9, b'_', b'N', b'V', b'D', b'I', b'C',
            b'T', b'_', 0x9f, 0x1c, 0x1b, 0x00, b'C', b'P', b'K', b'V', 0, 0, 0, 0, 0xdd, 0x41,
            0x7e, 0x4b, 0x11, 0xb1, 0xab, 0xa9, b'_', b'N', b'V', b'D', b'I', b'C', b'T', b'_',
            0xd7, 0x89, 0x6a, 0x7c, 0x3b, 0xba, 0xce, 0xec, 0x9f, 0x1c, 0x1b, 0x00, 0, 0, 0, 0,
        ];
        let mut dictionary = dictionary_head.to_vec();
        dictionary.resize(60 + 0x1b1c9f, 7);
        let pipeline = record([3; 16], 11, &[1; 40]);
        let data = nvidia_cache(&[pipeline.clone(), dictionary]);
        let framing = frame(&whole(&data)).unwrap();
        assert_eq!(
            framing.dictionary,
            DictionaryId {
                hash: 0xecceba3b7c6a89d7,
                len: 1_776_799
            }
        );
        assert_eq!(without(&framing, &whole(&data)), nvidia_cache(&[pipeline]));
    }

    #[test]
    fn the_dictionary_is_cut_wherever_it_stands_and_the_rest_keeps_its_order() {
        let dict = record(dictionary_key(), 42, &[9; 500]);
        let (a, b) = (record([1; 16], 1, &[1; 30]), record([2; 16], 2, &[2; 7]));
        for (records, rest) in [
            (vec![dict.clone(), a.clone()], vec![a.clone()]),
            (vec![a.clone(), dict.clone()], vec![a.clone()]),
            (
                vec![a.clone(), dict.clone(), b.clone()],
                vec![a.clone(), b.clone()],
            ),
        ] {
            let data = nvidia_cache(&records);
            let framing = frame(&whole(&data)).unwrap();
            assert_eq!(framing.dictionary, DictionaryId { hash: 42, len: 500 });
            let cut = without(&framing, &whole(&data));
            assert_eq!(cut, nvidia_cache(&rest));
            assert_eq!(frame(&whole(&cut)), Err(FramingError::NoDictionary));
            // Held apart and put back: the data as the driver wrote it, byte for byte.
            let fresh = frame_bytes(&data).unwrap();
            assert_eq!(fresh, framing);
            assert_eq!(fresh.without_dictionary_in(&data), cut);
            assert_eq!(fresh.dictionary_record(&data), &dict[..]);
            assert_eq!(fresh.put_back(&cut, &dict), data);
        }
    }

    #[test]
    fn fresh_data_says_its_dictionary() {
        let dictionary_in = |d: &[u8]| frame_bytes(d).ok().map(|f| f.dictionary);
        let dict = record(dictionary_key(), 42, &[9; 500]);
        let data = nvidia_cache(&[record([1; 16], 1, &[1; 30]), dict]);
        assert_eq!(
            dictionary_in(&data),
            Some(DictionaryId { hash: 42, len: 500 })
        );
        let plain = nvidia_cache(&[record([1; 16], 1, &[1; 30])]);
        assert_eq!(dictionary_in(&plain), None);
        assert_eq!(dictionary_in(&[1, 2, 3]), None);
    }

    #[test]
    fn a_payload_in_parts_is_framed_without_being_put_together() {
        let dict = record(dictionary_key(), 5, &[9; 300]);
        let a = record([1; 16], 1, &[1; 30]);
        let bytes = nvidia_cache(&[a.clone(), dict]);
        let (head, tail) = bytes.split_at(100);
        let file = Arc::new(head.to_vec());
        let payload = Payload::from_parts(
            Arc::clone(&file),
            vec![
                super::super::payload::Source::Inline(0..100),
                super::super::payload::Source::Piece(Arc::from(tail)),
            ],
        );
        let framing = frame(&payload).unwrap();
        assert_eq!(framing, frame(&whole(&bytes)).unwrap());
        assert_eq!(without(&framing, &payload), nvidia_cache(&[a]));
    }

    #[test]
    fn data_not_framed_exactly_is_never_cut() {
        let dict = record(dictionary_key(), 42, &[9; 50]);
        let a = record([1; 16], 1, &[1; 30]);
        let good = nvidia_cache(&[a.clone(), dict.clone()]);
        assert!(frame(&whole(&good)).is_ok());
        let mut radv = good.clone();
        radv[8] = 0x02;
        assert_eq!(frame(&whole(&radv)), Err(FramingError::NotNvidia));
        assert_eq!(frame(&whole(&good[..20])), Err(FramingError::NotNvidia));
        assert_eq!(
            frame(&whole(&good[..good.len() - 1])),
            Err(FramingError::CutShort {
                index: 1,
                at: 36 + a.len()
            })
        );
        let mut extra = good.clone();
        extra.push(0);
        assert_eq!(
            frame(&whole(&extra)),
            Err(FramingError::TrailingBytes { extra: 1 })
        );
        let mut bad_magic = good.clone();
        bad_magic[36 + 20] = b'X';
        assert_eq!(
            frame(&whole(&bad_magic)),
            Err(FramingError::Malformed { index: 0, at: 36 })
        );
        let mut other_length = good.clone();
        other_length[36 + 52] ^= 1;
        assert!(matches!(
            frame(&whole(&other_length)),
            Err(FramingError::Malformed { .. })
        ));
        let mut many = good.clone();
        many[32] = 0xff;
        assert!(matches!(
            frame(&whole(&many)),
            Err(FramingError::TooManyRecords { .. })
        ));
        let two = nvidia_cache(&[dict.clone(), a.clone(), dict.clone()]);
        assert_eq!(frame(&whole(&two)), Err(FramingError::TwoDictionaries));
        assert_eq!(
            frame(&whole(&nvidia_cache(&[a]))),
            Err(FramingError::NoDictionary)
        );
        assert_eq!(
            frame(&whole(&nvidia_cache(&[dict]))),
            Err(FramingError::OnlyTheDictionary)
        );
    }

    #[test]
    fn caches_put_together_hold_each_record_once_after_the_first_header() {
        let (a, b, c) = (
            record([1; 16], 1, b"a"),
            record([2; 16], 2, b"bb"),
            record([3; 16], 3, b"ccc"),
        );
        let mut second = nvidia_cache(&[b.clone(), c.clone()]);
        second[16] ^= 0xff; // another UUID: the first's header stands
        let together = merged(&[&nvidia_cache(&[a.clone(), b.clone()]), &second]).unwrap();
        assert_eq!(together, nvidia_cache(&[a.clone(), b, c]));
        assert_eq!(frame_bytes(&together), Err(FramingError::NoDictionary));
        assert!(merged(&[&nvidia_cache(&[a]), &[7; 40]]).is_none());
        assert!(merged(&[]).is_none());
    }
}
