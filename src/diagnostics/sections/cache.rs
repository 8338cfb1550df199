//! The response cache: per cached group, its lookups and hits since the
//! proxy started (every worker's), the hit ratio, what the hits saved, the
//! bytes and entries its in-process store holds, and its bounds. Read from
//! what the cache shares (`cache::store`): its tally and its store's index.

use serde::Serialize;
use serde_json::Value;

use super::{Section, View};
use crate::cache::store::{usage, Tally};
use crate::cache::{Scope, When};

pub const SECTION: Section = Section {
    name: "cache",
    title: "Response cache",
    data,
    script: include_str!("cache.js"),
};

#[derive(Serialize)]
struct Cache {
    groups: Vec<Row>,
}

#[derive(Serialize)]
struct Row {
    group: String,
    /// `key` (each gateway key its own entries) or `group` (shared).
    scope: &'static str,
    /// `always`, or `deterministic` (temperature 0 or a seed).
    when: &'static str,
    lookups: u64,
    hits: u64,
    /// Hits per lookup (`None`: no lookup yet).
    hit_ratio: Option<f64>,
    /// What the hits' answers cost when a vendor made them.
    saved_usd: f64,
    /// What its store holds now (`None`: unreadable).
    bytes: Option<u64>,
    entries: Option<u64>,
    max_bytes: u64,
    max_entries: u32,
    max_entry_bytes: u64,
    ttl_seconds: u64,
}

fn data(view: &View<'_>) -> Value {
    let store = view.store();
    let groups = view
        .config
        .model_groups
        .iter()
        .filter(|(name, _)| view.filter.group.as_deref().is_none_or(|g| g == *name))
        .filter_map(|(name, group)| Some((name, group.cache.as_ref()?)))
        .map(|(name, settings)| {
            let tally = Tally::read(&store, name).unwrap_or_default();
            let held = usage(&store, name, settings);
            Row {
                group: name.clone(),
                scope: match settings.scope {
                    Scope::Key => "key",
                    Scope::Group => "group",
                },
                when: match settings.when {
                    When::Always => "always",
                    When::Deterministic => "deterministic",
                },
                lookups: tally.lookups,
                hits: tally.hits,
                hit_ratio: (tally.lookups > 0).then(|| tally.hits as f64 / tally.lookups as f64),
                saved_usd: tally.saved_micro_usd as f64 / 1e6,
                bytes: held.map(|u| u.bytes),
                entries: held.map(|u| u.entries),
                max_bytes: settings.max_bytes,
                max_entries: settings.max_entries,
                max_entry_bytes: settings.max_entry_bytes,
                ttl_seconds: settings.ttl_seconds,
            }
        })
        .collect();
    serde_json::to_value(Cache { groups }).unwrap_or_default()
}
