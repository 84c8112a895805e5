//! `pipekeep clear`: every entry, piece, marker and partial write of a title removed, and its
//! record, except what a live process holds locked.

use std::path::Path;
use std::process::ExitCode;

use serde_json::json;

use super::{readable, Scope};
use pipekeep::store::files::remove_if_present;
use pipekeep::store::inspect::identity_dirs;

/// Remove every entry (and marker and partial write) of a title, or of every title.
#[derive(clap::Args)]
pub struct ClearArgs {
    #[command(flatten)]
    scope: Scope,
}

/// Removes our files in an identity directory, then the directory if nothing else is left, by
/// the layer's own rule (`store::drop_directory`): a loading marker or a write in progress that a
/// live process holds locked stays, with the entry the marker names (the application beside the
/// command is loading it), and so does the directory holding them. Returns the entries removed.
fn clear_dir(dir: &Path) -> u64 {
    pipekeep::store::drop_directory(dir, "cleared", &std::sync::atomic::AtomicBool::new(false))
}

pub fn clear(args: ClearArgs) -> Result<ExitCode, String> {
    let (root, titles) = args.scope.titles()?;
    let mut out = Vec::new();
    for t in &titles {
        let removed: u64 = readable(&root.join(t), identity_dirs(&root.join(t)))
            .iter()
            .map(|d| clear_dir(&d.path))
            .sum();
        // Other drivers' directories an opening set aside and has not finished dropping.
        let host = root.join(t).join("host-pipelines");
        for name in readable(&host, pipekeep::store::files::names_in(&host)) {
            if name.ends_with(pipekeep::store::SET_ASIDE_SUFFIX) {
                clear_dir(&host.join(name));
            }
        }
        let _ = std::fs::remove_dir(&host);
        let record = root.join(t).join(pipekeep::replay::record::FILE_NAME);
        let record_removed = remove_if_present(&record).unwrap_or(false);
        for beside in [
            pipekeep::replay::record::PENDING_FILE_NAME,
            pipekeep::store::identifiers::FILE_NAME,
            pipekeep::store::bound::BYTES_FILE,
        ] {
            let _ = remove_if_present(&root.join(t).join(beside));
        }
        out.push(json!({ "title": t, "removed": removed, "record_removed": record_removed }));
    }
    if args.scope.json {
        println!("{}", json!({ "titles": out }));
    } else {
        for o in &out {
            println!(
                "{}: removed {} entries{}",
                o["title"].as_str().unwrap_or_default(),
                o["removed"],
                if o["record_removed"] == true {
                    " and its record"
                } else {
                    ""
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
