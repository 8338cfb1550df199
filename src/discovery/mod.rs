//! Model discovery: every configured provider's model list, read through
//! its own API (`dialects::list`) at start and then on an interval, one
//! read per proxy (`session::discovery` fetches, over the host's tick and
//! HTTP callouts, and shares the lists in shared data). What it feeds:
//! - listings: `GET /v1/models` (each surface's) shows the discovered
//!   models a caller's groups reach, by their vendor ids, beside the groups
//!   (with [`Settings::route`]);
//! - routing: a request naming a vendor model no group is named for goes
//!   to a group whose provider lists it ([`Settings::route`]; aliases such
//!   as `sonnet-latest` name the newest listed match);
//! - retired models: a configured vendor model its vendor no longer lists
//!   is flagged (log, metric) and, with [`Settings::avoid_retired`], is no
//!   candidate while another is;
//! - facts: the windows and limits a vendor's list says (`catalog`).
//!
//! This module holds the configuration section and the decisions over
//! what was discovered ([`known::Discovered`]); the records shared between
//! workers are in [`store`].

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::provider::Provider;
use crate::routing::{glob, Candidate, ModelGroup};

pub mod known;
pub mod store;

pub use known::Discovered;

/// The configuration's `discovery` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Providers whose lists are read, by name: where the calls go.
    pub providers: BTreeMap<String, Source>,
    /// Seconds between two reads of a provider's list.
    #[serde(default = "hourly")]
    pub interval_seconds: u64,
    /// Seconds before the first retry of a failed read; each failure in a
    /// row doubles it, up to `interval_seconds`.
    #[serde(default = "ten")]
    pub retry_seconds: u64,
    /// How long a list call may take (milliseconds).
    #[serde(default = "ten_thousand")]
    pub timeout_ms: u32,
    /// A configured model no request was routed to, and no list or check
    /// confirmed, for this long (seconds) is checked on its own (a
    /// targeted re-check: one call for one model). 0: never.
    #[serde(default)]
    pub recheck_after_seconds: u64,
    /// List the discovered models a caller's groups reach, and route a
    /// request naming one (that no group is named for) to such a group.
    #[serde(default)]
    pub route: bool,
    /// A configured vendor model its vendor no longer lists is no
    /// candidate while the group has another (flagged either way).
    #[serde(default)]
    pub avoid_retired: bool,
    /// A model name → a glob over vendor model ids: the newest discovered
    /// match (by creation time, then id) serves it (with `route`).
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    /// The vendor models the configuration names, by provider, each with
    /// the groups that name it: what is flagged when its vendor no longer
    /// lists it. Filled by [`Settings::validate`].
    #[serde(skip)]
    pub configured: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

/// Where one provider's list calls go.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The Envoy cluster the calls go to: one that reaches this provider
    /// alone (an aggregate would list another vendor's models), with no
    /// upstream filter of the gateway's (Bedrock's control plane: a cluster
    /// of its own, signed by Envoy).
    pub cluster: String,
    /// `:authority` of the calls (default: the provider's `host`, else the
    /// cluster's name). Bedrock's control plane is
    /// `bedrock.{region}.amazonaws.com`.
    #[serde(default)]
    pub host: Option<String>,
    /// The Envoy clusters requests reach this provider through, when they
    /// are not the list cluster (Bedrock's runtime): a group's candidate on
    /// one that names no provider counts as on this one.
    #[serde(default)]
    pub clusters: Vec<String>,
}

fn hourly() -> u64 {
    3600
}

fn ten() -> u64 {
    10
}

fn ten_thousand() -> u32 {
    10_000
}

/// The most providers one configuration discovers.
pub const MAX_PROVIDERS: usize = 64;

impl Settings {
    /// Checks the section against the providers and groups, and notes the
    /// vendor models the configuration names (errors name the field).
    pub fn validate(
        &mut self,
        providers: &BTreeMap<String, Provider>,
        groups: &BTreeMap<String, ModelGroup>,
    ) -> Result<(), String> {
        if self.providers.is_empty() || self.providers.len() > MAX_PROVIDERS {
            return Err(format!(
                "discovery.providers: 1 to {MAX_PROVIDERS} providers"
            ));
        }
        for (name, source) in &self.providers {
            let field = format!("discovery.providers.{name}");
            let Some(provider) = providers.get(name) else {
                return Err(format!("{field}: no provider named '{name}'"));
            };
            if crate::dialects::list::of(provider.dialect).is_none() {
                return Err(format!("{field}: this provider's API has no model list"));
            }
            if source.cluster.is_empty() || source.clusters.iter().any(String::is_empty) {
                return Err(format!("{field}.cluster: must not be empty"));
            }
            if source.host.as_deref().is_some_and(|h| {
                h.is_empty()
                    || h.chars()
                        .any(|c| c.is_whitespace() || c.is_control() || c == '/')
            }) {
                return Err(format!("{field}.host: must be a bare host[:port]"));
            }
        }
        let mut clusters = BTreeMap::new();
        for (name, source) in &self.providers {
            for cluster in std::iter::once(&source.cluster).chain(&source.clusters) {
                if let Some(other) = clusters.insert(cluster.as_str(), name) {
                    if other != name {
                        return Err(format!(
                            "discovery.providers.{name}: cluster '{cluster}' is provider {other}'s already (a cluster reaches one provider)"
                        ));
                    }
                }
            }
        }
        if self.interval_seconds == 0 || self.interval_seconds > 7 * 86_400 {
            return Err("discovery.interval_seconds: 1 to 604800".into());
        }
        if self.retry_seconds == 0 {
            return Err("discovery.retry_seconds: at least 1".into());
        }
        if !(100..=60_000).contains(&self.timeout_ms) {
            return Err("discovery.timeout_ms: 100 to 60000".into());
        }
        for (alias, pattern) in &self.aliases {
            if !crate::model::listing::keepable(alias) || pattern.is_empty() {
                return Err(format!(
                    "discovery.aliases: '{}' names a glob over model ids",
                    alias.escape_debug()
                ));
            }
            if groups.contains_key(alias) {
                return Err(format!(
                    "discovery.aliases.{alias}: a model group has this name"
                ));
            }
        }
        self.configured = self.configured_models(providers, groups);
        Ok(())
    }

    /// The vendor models the configuration names at each discovered
    /// provider: candidates' models, and the provider's `models` mapping.
    fn configured_models(
        &self,
        providers: &BTreeMap<String, Provider>,
        groups: &BTreeMap<String, ModelGroup>,
    ) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
        let mut configured: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (group, g) in groups {
            for c in &g.candidates {
                let Some(provider) = self.provider_of(c) else {
                    continue;
                };
                let model = match &c.model {
                    Some(model) => Some(model.as_str()),
                    None => providers.get(provider).and_then(|p| {
                        p.models
                            .get(group.as_str())
                            .or_else(|| p.models.get("*"))
                            .map(String::as_str)
                    }),
                };
                if let Some(model) = model {
                    configured
                        .entry(provider.to_owned())
                        .or_default()
                        .entry(model.to_owned())
                        .or_default()
                        .insert(group.clone());
                }
            }
        }
        for name in self.providers.keys() {
            if let Some(p) = providers.get(name) {
                for model in p.models.values() {
                    configured
                        .entry(name.clone())
                        .or_default()
                        .entry(model.clone())
                        .or_default();
                }
            }
        }
        configured
    }

    /// The discovered provider a candidate is on: the one it names, else
    /// the one whose list cluster (or one of its `clusters`) it routes to.
    pub fn provider_of<'a>(&'a self, candidate: &'a Candidate) -> Option<&'a str> {
        match &candidate.provider {
            Some(p) => self.providers.contains_key(p).then_some(p.as_str()),
            None => self
                .providers
                .iter()
                .find(|(_, s)| {
                    s.cluster == candidate.cluster || s.clusters.contains(&candidate.cluster)
                })
                .map(|(name, _)| name.as_str()),
        }
    }

    /// Where a request naming `model` goes when no group is named for it
    /// and no rule matched: the first group the caller may use (`allows`)
    /// with a candidate on a provider that lists the vendor model (`model`,
    /// or what its alias names now), the default group (`default`) before
    /// the others by name; `None` when routing to discovered models is off
    /// or nothing lists it.
    pub fn route<'a>(
        &'a self,
        groups: &'a BTreeMap<String, ModelGroup>,
        default: Option<&str>,
        discovered: &Discovered,
        allows: impl Fn(&str) -> bool,
        model: &str,
    ) -> Option<Routed<'a>> {
        if !self.route || model.is_empty() {
            return None;
        }
        let reachable = |provider: &str| {
            groups.iter().any(|(name, g)| {
                allows(name)
                    && g.candidates
                        .iter()
                        .any(|c| self.provider_of(c) == Some(provider))
            })
        };
        let vendor_model = match self.aliases.get(model) {
            Some(pattern) => discovered.newest(pattern, reachable)?.id.clone(),
            None => model.to_owned(),
        };
        let first = default.and_then(|d| groups.get_key_value(d));
        let rest = groups
            .iter()
            .filter(|(name, _)| Some(name.as_str()) != default);
        for (name, group) in first.into_iter().chain(rest) {
            if !allows(name) {
                continue;
            }
            let on = group.candidates.iter().find_map(|c| {
                let provider = self.provider_of(c)?;
                discovered.lists(provider, &vendor_model).map(|_| provider)
            });
            if let Some(provider) = on {
                return Some(Routed {
                    group: name,
                    provider,
                    model: vendor_model,
                });
            }
        }
        None
    }

    /// Whether `pattern` (an alias's glob) matches `id`.
    pub fn alias_matches(pattern: &str, id: &str) -> bool {
        glob(pattern, id)
    }
}

/// A request routed to a discovered model.
#[derive(Debug, PartialEq, Eq)]
pub struct Routed<'a> {
    pub group: &'a str,
    /// The provider that lists it: the group's candidates on it serve it.
    pub provider: &'a str,
    /// The vendor model the attempts ask for.
    pub model: String,
}

#[cfg(test)]
mod tests;
