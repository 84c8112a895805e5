//! A title's record as the store subcommands see it: its state against its share of the bound,
//! and its compaction to that share as the layer's opening does it.

use std::path::Path;

use serde_json::json;

use pipekeep::settings::Settings;
use pipekeep::store::bound::{entries_of_title, record_share};

/// A title's record: its bytes, the pipelines it holds and the entries that fail their check
/// (`null` where the title has none).
pub(super) fn record_of(title_dir: &Path) -> serde_json::Value {
    use pipekeep::replay::objects::is_pipeline_tag;
    let path = title_dir.join(pipekeep::replay::record::FILE_NAME);
    let Ok(bytes) = std::fs::metadata(&path).map(|m| m.len()) else {
        return serde_json::Value::Null;
    };
    // Its share of the bound in force (PIPEKEEP_MAX_BYTES, as the layer reads it).
    let share = record_share(Settings::from_env().max_bytes);
    match pipekeep::replay::record::read(&path) {
        Ok((entries, bytes)) => json!({
            "path": path, "bytes": bytes, "share": share, "over_share": bytes > share,
            "pipelines": entries.iter().filter(|e| e.payload.is_ok() && is_pipeline_tag(e.tag)).count(),
            "damaged": entries.iter().filter(|e| e.payload.is_err()).count(),
        }),
        Err(e) => {
            json!({ "path": path, "bytes": bytes, "share": share, "over_share": bytes > share, "pipelines": 0, "damaged": 1, "error": e.to_string() })
        }
    }
}

/// Brings a title's record within its share of `max_bytes` as the layer's opening does (the
/// pipelines in the entries' order of use, their stamps from a listing of the title's entries),
/// and (`rewrite_damaged`) rewrites it without its damaged entries.
pub(super) fn compact_record(
    title_dir: &Path,
    max_bytes: u64,
    rewrite_damaged: bool,
) -> Result<Option<pipekeep::replay::record::Compacted>, String> {
    let listed = entries_of_title(&title_dir.join("host-pipelines")).unwrap_or_default();
    let used = pipekeep::replay::record::stamps_of(&listed);
    pipekeep::replay::record::RecordFile::new(title_dir)
        .compact_to_share(record_share(max_bytes), rewrite_damaged, &|h| {
            used.get(&h).copied()
        })
        .map_err(|e| e.to_string())
}

/// The bytes a title's record would come to compacted to its share of `max_bytes` (a dry run's
/// plan; nothing is written).
pub(super) fn compacted_size(title_dir: &Path, max_bytes: u64) -> Option<u64> {
    let (entries, _) =
        pipekeep::replay::record::read(&title_dir.join(pipekeep::replay::record::FILE_NAME))
            .ok()?;
    let listed = entries_of_title(&title_dir.join("host-pipelines")).unwrap_or_default();
    let used = pipekeep::replay::record::stamps_of(&listed);
    let kept = pipekeep::replay::record::within_share(entries, record_share(max_bytes), &|h| {
        used.get(&h).copied()
    });
    Some(pipekeep::replay::foz::write_entries_deflated(&kept).len() as u64)
}
