//! Fossilize's application-blob links (tag 8): which configuration a pipeline was made under.

use serde_json::{json, Value};

/// The hash Fossilize names an application-blob link by (`compute_hash_application_info_link`:
/// its FNV-1a-style `Hasher` over the application's hash, the blob's tag and hash), so that its
/// tools find the link where they compute it.
pub fn link_hash(application: u64, tag: u32, hash: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut word = |v: u32| h = h.wrapping_mul(0x0000_0100_0000_01b3) ^ u64::from(v);
    word(application as u32);
    word((application >> 32) as u32);
    word(tag);
    word(hash as u32);
    word((hash >> 32) as u32);
    h
}

/// An application-blob link as Fossilize writes it: the blob `tag`/`hash` was made under the
/// application entry `application`.
pub(super) fn link_doc(application: u64, tag: u32, hash: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "version": 6,
        "link": {
            "application": format!("{application:016x}"), "tag": tag,
            "hash": format!("{hash:016x}"),
        },
    }))
    .expect("JSON of plain values")
}

/// What a link entry's payload says: `(application, tag, pipeline hash)`.
pub fn linked_pipeline(payload: &[u8]) -> Option<(u64, u32, u64)> {
    let doc: Value = serde_json::from_slice(payload).ok()?;
    let link = doc.get("link")?;
    let hex = |k: &str| u64::from_str_radix(link.get(k)?.as_str()?, 16).ok();
    Some((
        hex("application")?,
        u32::try_from(link.get("tag")?.as_u64()?).ok()?,
        hex("hash")?,
    ))
}
