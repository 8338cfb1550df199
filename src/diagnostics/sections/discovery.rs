//! Model discovery: per provider, the models in its last good list, when
//! it was last read successfully (`last_verified`), how its reads go, and
//! the configured vendor models its vendor no longer lists (retired). Read
//! from the records discovery shares between workers (`discovery::store`);
//! an error is the vendor's or the transport's message, never a key.

use serde::Serialize;
use serde_json::Value;

use super::{Section, View};
use crate::discovery::store::{self, ListRecord, Schedule, GENERATION_KEY};
use crate::discovery::Discovered;
use crate::shared_state::cas::SharedStore;

pub const SECTION: Section = Section {
    name: "discovery",
    title: "Model discovery",
    data,
    script: include_str!("discovery.js"),
};

#[derive(Serialize)]
struct Discovery {
    /// The configuration discovers models (`discovery`).
    enabled: bool,
    interval_seconds: Option<u64>,
    route: bool,
    avoid_retired: bool,
    providers: Vec<Row>,
}

#[derive(Serialize)]
struct Row {
    provider: String,
    /// Models in its last good list (`None`: none read yet).
    models: Option<usize>,
    /// When its last good list was read (Unix ms).
    last_verified: Option<u64>,
    next_at_ms: u64,
    /// Failed reads in a row, and the last one's error.
    failures: u32,
    last_error: Option<String>,
    /// List calls made so far (pages and targeted checks).
    calls: u64,
    /// Configured vendor models its list lacks.
    retired: Vec<String>,
}

/// The shared records of the configuration's discovered providers.
pub(super) fn read(view: &View<'_>) -> Option<Discovered> {
    let settings = view.config.discovery.as_ref()?;
    let store = view.store();
    let get = |key: &[u8]| store.get(key).ok().flatten().map(|(bytes, _)| bytes);
    let generation = get(GENERATION_KEY)
        .and_then(|b| b.get(..8).and_then(|b| b.try_into().ok()))
        .map_or(0, u64::from_le_bytes);
    Some(Discovered::build(
        settings,
        generation,
        |name| {
            let provider = view.config.providers.get(name)?;
            Some(store::identity(provider, settings.providers.get(name)?))
        },
        |name| {
            let list = get(&store::list_key(name)).and_then(|b| ListRecord::decode(&b));
            let schedule = get(&store::schedule_key(name)).and_then(|b| Schedule::decode(&b));
            (list, schedule)
        },
    ))
}

fn data(view: &View<'_>) -> Value {
    let settings = view.config.discovery.as_ref();
    let providers = view
        .discovered()
        .map(|d| d.snapshot().providers)
        .unwrap_or_default()
        .into_iter()
        .map(|(provider, p)| Row {
            provider,
            models: p.models,
            last_verified: p.fetched_at_ms,
            next_at_ms: p.next_at_ms,
            failures: p.failures,
            last_error: p.last_error,
            calls: p.calls,
            retired: p.retired,
        })
        .collect();
    serde_json::to_value(Discovery {
        enabled: settings.is_some(),
        interval_seconds: settings.map(|s| s.interval_seconds),
        route: settings.is_some_and(|s| s.route),
        avoid_retired: settings.is_some_and(|s| s.avoid_retired),
        providers,
    })
    .unwrap_or_default()
}
