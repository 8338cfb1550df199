//! The routing table: where each model group's requests go (candidates
//! with their cluster, provider, vendor model, weight and capabilities),
//! the rules that pick a group, and the providers. Read from the
//! configuration (and, with model discovery, whether each candidate's
//! vendor model is listed and when it was last verified); never a key (nor
//! a rule's header values, which may be shared secrets of the callers').

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{Section, View};
use crate::provider::DialectKind;
use crate::routing::{ladder_cluster, Candidate, Capabilities};

pub const SECTION: Section = Section {
    name: "routes",
    title: "Routing table",
    data,
    script: include_str!("routes.js"),
};

#[derive(Serialize)]
struct Routes<'a> {
    default_group: Option<&'a str>,
    groups: Vec<Group<'a>>,
    rules: Vec<RuleRow<'a>>,
    providers: Vec<ProviderRow<'a>>,
}

#[derive(Serialize)]
struct Group<'a> {
    name: &'a str,
    /// The degradation ladder's rungs, and the aggregate cluster it routes to.
    fallback: &'a [String],
    ladder_cluster: Option<String>,
    candidates: Vec<CandidateRow<'a>>,
}

#[derive(Serialize)]
struct CandidateRow<'a> {
    cluster: &'a str,
    provider: Option<&'a str>,
    dialect: Option<DialectKind>,
    /// The vendor model when the candidate names one; else what the
    /// provider's `models` maps the group to (`*` the client's own).
    model: Option<&'a str>,
    weight: u32,
    /// Its share of the group's traffic (before capability filtering).
    share: f64,
    capabilities: CapabilityRow,
    /// Model discovery's verdict on the vendor model and when it was last
    /// seen listed: none until the gateway discovers models.
    discovered: Option<bool>,
    last_verified: Option<u64>,
}

#[derive(Serialize)]
struct CapabilityRow {
    tools: bool,
    vision: bool,
    json: bool,
    context_window: Option<u64>,
    max_output_tokens: Option<u32>,
}

impl From<&Capabilities> for CapabilityRow {
    fn from(c: &Capabilities) -> Self {
        Self {
            tools: c.tools,
            vision: c.vision,
            json: c.json,
            context_window: c.context_window,
            max_output_tokens: c.max_output_tokens,
        }
    }
}

#[derive(Serialize)]
struct RuleRow<'a> {
    priority: i32,
    model: Option<&'a str>,
    /// The header names it matches on (their values are left out).
    headers: Vec<&'a str>,
    task_type: Option<&'a str>,
    group: &'a str,
}

#[derive(Serialize)]
struct ProviderRow<'a> {
    name: &'a str,
    dialect: DialectKind,
    host: Option<&'a str>,
    base_path: &'a str,
    models: &'a BTreeMap<String, String>,
    /// Vendor models with prices (cost is reported for these).
    priced: Vec<&'a str>,
}

/// Whether a candidate's vendor model is in its discovered provider's
/// last good list (or a targeted check since confirmed it), and when it
/// was last seen so (Unix ms): none for a provider not discovered or not
/// read yet, or a candidate that sends the client's own model.
fn verified(view: &View<'_>, c: &Candidate, model: Option<&str>) -> (Option<bool>, Option<u64>) {
    let found = || {
        let settings = view.config.discovery.as_ref()?;
        let known = view.discovered()?.providers.get(settings.provider_of(c)?)?;
        let (list, model) = (known.list.as_ref()?, model?);
        let checked = list.checked.get(model).copied();
        let listed = known.lists(model).map(|_| list.fetched_at);
        Some((listed.is_some() || checked.is_some(), listed.max(checked)))
    };
    found().map_or((None, None), |(yes, at)| (Some(yes), at))
}

fn data(view: &View<'_>) -> Value {
    let config = view.config;
    let wanted = |group: &str| view.filter.group.as_deref().is_none_or(|g| g == group);
    let groups = config
        .model_groups
        .iter()
        .filter(|(name, _)| wanted(name))
        .map(|(name, group)| {
            let total: u64 = group.candidates.iter().map(|c| u64::from(c.weight)).sum();
            let candidates = group
                .candidates
                .iter()
                .map(|c| {
                    let provider = c.provider.as_deref();
                    let settings = provider.and_then(|p| config.providers.get(p));
                    let mapped = settings.and_then(|p| {
                        p.models
                            .get(name.as_str())
                            .or_else(|| p.models.get("*"))
                            .map(String::as_str)
                    });
                    let model = c.model.as_deref().or(mapped);
                    let (discovered, last_verified) = verified(view, c, model);
                    CandidateRow {
                        cluster: &c.cluster,
                        provider,
                        dialect: settings.map(|p| p.dialect),
                        model,
                        weight: c.weight,
                        share: if total == 0 {
                            0.0
                        } else {
                            f64::from(c.weight) / total as f64
                        },
                        capabilities: (&c.capabilities).into(),
                        discovered,
                        last_verified,
                    }
                })
                .collect();
            Group {
                name,
                fallback: &group.fallback,
                ladder_cluster: (!group.fallback.is_empty()).then(|| ladder_cluster(name)),
                candidates,
            }
        })
        .collect();
    let rules = config
        .rules
        .iter()
        .filter(|r| wanted(&r.group))
        .map(|r| RuleRow {
            priority: r.priority,
            model: r.when.model.as_deref(),
            headers: r.when.headers.keys().map(String::as_str).collect(),
            task_type: r.when.task_type.as_deref(),
            group: &r.group,
        })
        .collect();
    let providers = config
        .providers
        .iter()
        .map(|(name, p)| ProviderRow {
            name,
            dialect: p.dialect,
            host: p.host.as_deref(),
            base_path: &p.base_path,
            models: &p.models,
            priced: p.prices.keys().map(String::as_str).collect(),
        })
        .collect();
    serde_json::to_value(Routes {
        default_group: config.default_model_group.as_deref(),
        groups,
        rules,
        providers,
    })
    .unwrap_or_default()
}
