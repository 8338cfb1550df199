//! Limits and budgets (`limits.rate`) per key and group, in their current
//! windows: the limit, what settled requests used, what requests in flight
//! reserve (`diagnostics::inflight`), and what is left. The counters are
//! this proxy's (local limits); the global rate limit service's are its own.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use super::{Section, View};
use crate::diagnostics::inflight;
use crate::limits::{self, store, Metric, TokenKind};

pub const SECTION: Section = Section {
    name: "limits",
    title: "Limits and budgets",
    data,
    script: include_str!("limits.js"),
};

/// Rows shown at most (a configuration may have 10,000 counters).
const MAX_ROWS: usize = 1000;

#[derive(Serialize)]
struct Limits {
    rows: Vec<Row>,
    /// Rows left out past `MAX_ROWS`.
    truncated: usize,
}

#[derive(Serialize)]
struct Row {
    /// `all`, `key`, `group`, `key_group`: whom the counter counts.
    scope: &'static str,
    /// The key and group it counts for ("" when it counts them all together).
    key: String,
    group: String,
    /// The configuration field (`requests_per_minute`, `usd_per_day`...).
    limit_field: &'static str,
    /// `requests`, `in_flight`, `tokens`, `input_tokens`, `output_tokens`, `usd`.
    unit: &'static str,
    window: String,
    limit: f64,
    /// Used by requests that ended, reserved by requests in flight, left.
    used: f64,
    reserved: f64,
    left: f64,
    resets_in_ms: u64,
}

fn unit(metric: Metric) -> &'static str {
    match metric {
        Metric::Requests => "requests",
        Metric::InFlight => "in_flight",
        Metric::Tokens(TokenKind::Total) => "tokens",
        Metric::Tokens(TokenKind::Input) => "input_tokens",
        Metric::Tokens(TokenKind::Output) => "output_tokens",
        Metric::MicroUsd => "usd",
    }
}

fn data(view: &View<'_>) -> Value {
    let config = view.config;
    let rules = &config.limits.rate;
    if rules.is_empty() {
        return serde_json::to_value(Limits {
            rows: Vec::new(),
            truncated: 0,
        })
        .unwrap_or_default();
    }
    let keys: Vec<Option<&str>> = if config.auth.enabled {
        config
            .auth
            .keys
            .iter()
            .map(|k| Some(k.name.as_str()))
            .collect()
    } else {
        vec![None]
    };
    let store = view.store();
    let held = inflight::totals(&store);
    let mut seen = BTreeSet::new();
    let mut rows = Vec::new();
    let mut truncated = 0;
    for key in keys {
        for group in config.model_groups.keys() {
            for counter in limits::counters(rules, key, group) {
                if !seen.insert(counter.id.clone()) {
                    continue;
                }
                let (scope, budget) = (counter.scope, counter.budget);
                let (key, group) = match scope {
                    limits::Scope::All => ("", ""),
                    limits::Scope::Key => (key.unwrap_or_default(), ""),
                    limits::Scope::Group => ("", group.as_str()),
                    limits::Scope::KeyGroup => (key.unwrap_or_default(), group.as_str()),
                };
                let wanted = |filter: &Option<String>, value: &str| {
                    filter
                        .as_deref()
                        .is_none_or(|f| value.is_empty() || f == value)
                };
                if !wanted(&view.filter.key, key) || !wanted(&view.filter.group, group) {
                    continue;
                }
                if rows.len() == MAX_ROWS {
                    truncated += 1;
                    continue;
                }
                let (start, end) = budget.window.bounds(view.now_ms);
                let counted = store::used(&store, &counter.id, start);
                let reserved = held.get(&(counter.id.clone(), start)).copied().unwrap_or(0);
                let scale = |n: u64| match budget.metric {
                    Metric::MicroUsd => n as f64 / 1e6,
                    _ => n as f64,
                };
                rows.push(Row {
                    scope: scope.name(),
                    key: key.to_owned(),
                    group: group.to_owned(),
                    limit_field: budget.field,
                    unit: unit(budget.metric),
                    window: budget.window.name().into_owned(),
                    limit: scale(budget.limit),
                    used: scale(counted.saturating_sub(reserved)),
                    reserved: scale(reserved.min(counted)),
                    left: scale(budget.limit.saturating_sub(counted)),
                    resets_in_ms: end.saturating_sub(view.now_ms),
                });
            }
        }
    }
    serde_json::to_value(Limits { rows, truncated }).unwrap_or_default()
}
