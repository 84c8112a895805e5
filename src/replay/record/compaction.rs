//! What a record past its share keeps: its pipelines in their entries' order of use, each with
//! its links, every object it names and the pipeline libraries it links.

use std::collections::HashSet;
use std::time::SystemTime;

use serde_json::Value;

use super::links::linked_pipeline;
use super::{pipeline_hash, DbEntry};
use crate::replay::foz::HEADER_LEN;
use crate::replay::objects::{is_pipeline_tag, TAG_APPLICATION, TAG_LINK, TAG_SHADER_MODULE};

/// The stamp of each recorded pipeline's newest entry (by its database hash), from a listing of
/// a title's entries and pieces: the order of use a compaction keeps ([`within_share`]).
pub fn stamps_of(
    listed: &[crate::store::bound::StampedEntry],
) -> std::collections::HashMap<u64, SystemTime> {
    let mut out: std::collections::HashMap<u64, SystemTime> = Default::default();
    for e in listed {
        if let Some(key) = e.key() {
            let at = out.entry(pipeline_hash(&key)).or_insert(e.stamp);
            *at = (*at).max(e.stamp);
        }
    }
    out
}

/// What a whole entry of the record is to a compaction.
enum Part {
    /// A configuration: always kept.
    Application,
    /// A pipeline, with the names in its JSON (its objects, and the libraries it links).
    Pipeline(u64, Vec<u64>),
    /// A link to the pipeline it names (`None`: unreadable, dropped).
    Link(Option<u64>),
    /// An object, with the names in its JSON (none for a module).
    Object(Vec<u64>),
}

/// A record's whole entries, each with what it is to a compaction, read once.
struct Parts {
    whole: Vec<DbEntry>,
    parts: Vec<Part>,
    /// Entry indices in the order a pass decides them: the pipelines, last recorded first (a
    /// link is recorded after the libraries it names, so it is decided before them), then the
    /// links (after every pipeline they may name), then the objects from the highest tag down
    /// (an object names objects of a lower tag only). One pass finds every entry a kept one
    /// names.
    by_tag: Vec<usize>,
}

impl Parts {
    /// Damaged entries are left out.
    fn of(entries: Vec<crate::replay::foz::Entry>) -> Parts {
        let whole: Vec<DbEntry> = entries
            .into_iter()
            .filter_map(|e| Some((e.tag, e.hash, e.payload.ok()?)))
            .collect();
        let names_in = |payload: &[u8]| -> Vec<u64> {
            let mut names = HashSet::new();
            let json_part = payload.split(|b| *b == 0).next().unwrap_or_default();
            if let Ok(doc) = serde_json::from_slice::<Value>(json_part) {
                collect_names(&doc, &mut names);
            }
            names.into_iter().collect()
        };
        let parts: Vec<Part> = whole
            .iter()
            .map(|(tag, hash, payload)| match *tag {
                TAG_APPLICATION => Part::Application,
                t if is_pipeline_tag(t) => Part::Pipeline(*hash, names_in(payload)),
                TAG_LINK => Part::Link(linked_pipeline(payload).map(|(_, _, p)| p)),
                TAG_SHADER_MODULE => Part::Object(Vec::new()),
                _ => Part::Object(names_in(payload)),
            })
            .collect();
        let mut by_tag: Vec<usize> = (0..whole.len()).collect();
        by_tag.sort_by_key(|&i| {
            use std::cmp::Reverse;
            match parts[i] {
                Part::Pipeline(..) => (0, Reverse(0), Reverse(i)),
                Part::Link(_) => (1, Reverse(0), Reverse(0)),
                _ => (2, Reverse(whole[i].0), Reverse(0)),
            }
        });
        Parts {
            whole,
            parts,
            by_tag,
        }
    }

    /// Which entries a record keeping the pipelines `keep` says keeps: every application entry,
    /// those pipelines and the pipeline libraries they link (a link without them cannot be made
    /// again), their links, and every object a kept entry names, as far down as names go (a
    /// pipeline names its modules, layout and render pass; a layout its set layouts; a set
    /// layout its samplers). A name is any 16-hex-digit string in an object's JSON: one that is
    /// not a name keeps nothing it should not (it would have to equal another object's hash).
    fn kept(&self, keep: &dyn Fn(u64) -> bool) -> Vec<bool> {
        let mut named: HashSet<u64> = HashSet::new();
        let mut pipelines: HashSet<u64> = HashSet::new();
        let mut kept = vec![false; self.whole.len()];
        for &i in &self.by_tag {
            let (keep_it, names): (bool, &[u64]) = match &self.parts[i] {
                Part::Application => (true, &[]),
                Part::Pipeline(h, names) => {
                    let keep_it = keep(*h) || named.contains(h);
                    if keep_it {
                        pipelines.insert(*h);
                    }
                    (keep_it, names)
                }
                // A link goes with the pipeline it links.
                Part::Link(p) => (p.is_some_and(|p| keep(p) || pipelines.contains(&p)), &[]),
                Part::Object(names) => (named.contains(&self.whole[i].1), names),
            };
            kept[i] = keep_it;
            if keep_it {
                named.extend(names.iter().copied());
            }
        }
        kept
    }

    /// The entries `kept` says, objects before the pipelines naming them, as the record was
    /// written.
    fn into_kept(self, kept: Vec<bool>) -> Vec<DbEntry> {
        let mut out: Vec<DbEntry> = self
            .whole
            .into_iter()
            .zip(kept)
            .filter_map(|(e, k)| k.then_some(e))
            .collect();
        out.sort_by_key(|(tag, _, _)| *tag);
        out
    }
}

/// The entries of a record of at most `share` bytes (deflated as written): the application
/// entries, the most pipelines that fit in the entries' order of use, their links, and every
/// object a kept entry names (as [`live_part`]). The order: pipelines with an entry by their
/// newest entry's stamp, newest first (a run stamps its first used newest: a boot's pipelines
/// are kept longest, as the bound keeps their entries); then those with no entry (the bound
/// evicted it first), first recorded first. Damaged entries are dropped.
pub fn within_share(
    entries: Vec<crate::replay::foz::Entry>,
    share: u64,
    used: &dyn Fn(u64) -> Option<SystemTime>,
) -> Vec<DbEntry> {
    let parts = Parts::of(entries);
    // What each entry takes in the file, as written.
    let payloads = parts.whole.iter().map(|(_, _, p)| &p[..]);
    let sizes: Vec<u64> = crate::replay::foz::stored_lens(payloads)
        .into_iter()
        .map(|len| 56 + len as u64)
        .collect();
    let mut order: Vec<(Option<SystemTime>, usize, u64)> = parts
        .parts
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Part::Pipeline(h, _) => Some((used(*h), i, *h)),
            _ => None,
        })
        .collect();
    order.sort_by(|a, b| match (a.0, b.0) {
        (Some(x), Some(y)) => y.cmp(&x).then(a.1.cmp(&b.1)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.1.cmp(&b.1),
    });
    let kept_with = |k: usize| -> Vec<bool> {
        let pipelines: HashSet<u64> = order[..k].iter().map(|o| o.2).collect();
        parts.kept(&|h| pipelines.contains(&h))
    };
    let bytes_of = |kept: &[bool]| -> u64 {
        HEADER_LEN as u64
            + kept
                .iter()
                .zip(&sizes)
                .filter(|(k, _)| **k)
                .map(|(_, s)| *s)
                .sum::<u64>()
    };
    // The most pipelines that fit: a record's bytes grow with the pipelines kept.
    let (mut fits, mut over) = (0, order.len() + 1);
    while over - fits > 1 {
        let k = (fits + over) / 2;
        if bytes_of(&kept_with(k)) <= share {
            fits = k;
        } else {
            over = k;
        }
    }
    let kept = kept_with(fits);
    parts.into_kept(kept)
}

/// The entries a record keeping the pipelines `live` says keeps: every application entry, those
/// pipelines whole with their links, and every object a kept entry names, as far down as names
/// go. Damaged entries are dropped.
pub fn live_part(
    entries: Vec<crate::replay::foz::Entry>,
    live: &dyn Fn(u64) -> bool,
) -> Vec<DbEntry> {
    let parts = Parts::of(entries);
    let kept = parts.kept(live);
    parts.into_kept(kept)
}

fn collect_names(v: &Value, into: &mut HashSet<u64>) {
    match v {
        Value::String(s) if s.len() == 16 => {
            if let Ok(h) = u64::from_str_radix(s, 16) {
                into.insert(h);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_names(i, into)),
        Value::Object(members) => members.values().for_each(|m| collect_names(m, into)),
        _ => {}
    }
}
