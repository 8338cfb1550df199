//! Backend health (`diagnostics::health`), as a section: with a group
//! filter, only the clusters that group routes to.

use serde_json::Value;

use super::{Section, View};
use crate::diagnostics::health;

pub const SECTION: Section = Section {
    name: "health",
    title: "Backend health",
    data,
    script: include_str!("health.js"),
};

fn data(view: &View<'_>) -> Value {
    let mut health = health::compute(view.traces(), view.now_ms, view.settings.health_window_s);
    if let Some(group) = &view.filter.group {
        let clusters: Vec<&str> = view
            .config
            .model_groups
            .get(group)
            .map(|g| g.candidates.iter().map(|c| c.cluster.as_str()).collect())
            .unwrap_or_default();
        health
            .backends
            .retain(|b| clusters.contains(&b.cluster.as_str()));
        health
            .clusters
            .retain(|c| clusters.contains(&c.cluster.as_str()));
    }
    serde_json::to_value(health).unwrap_or_default()
}
