//! What was discovered, as one configuration sees it: each provider's last
//! good list and how its reads go, and which of the vendor models the
//! configuration names its vendor no longer lists. A worker builds it
//! from the shared records when their generation moves
//! (`session::discovery::view`) and keeps it until it moves again.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::store::{ListRecord, Schedule};
use super::Settings;
use crate::model::listing::Listed;

/// Every discovered provider of one configuration.
#[derive(Debug, Default)]
pub struct Discovered {
    /// The shared records' generation it was built from.
    pub generation: u64,
    pub providers: BTreeMap<String, Known>,
}

/// One provider's.
#[derive(Debug, Default)]
pub struct Known {
    /// Its last good list (none read yet: `None`).
    pub list: Option<ListRecord>,
    pub schedule: Option<Schedule>,
    /// The configured vendor models its list lacks.
    pub retired: BTreeSet<String>,
}

/// The ids a configured or requested vendor model may be listed under:
/// itself, without Gemini's `models/`, without a Vertex AI Claude model's
/// `@version`.
pub fn names(model: &str) -> impl Iterator<Item = &str> {
    let bare = model.strip_prefix("models/").unwrap_or(model);
    let unversioned = bare.split_once('@').map(|(m, _)| m);
    [Some(model), Some(bare), unversioned].into_iter().flatten()
}

impl Known {
    /// The entry of `model` in the list, under any of its [`names`].
    pub fn lists(&self, model: &str) -> Option<&Listed> {
        let list = self.list.as_ref()?;
        names(model).find_map(|name| list.find(name).and_then(|i| list.models.get(i)))
    }
}

impl Discovered {
    /// Built from the shared records `read` gives for a provider's name
    /// (its list, its schedule); a record of another identity (`identity`
    /// of the name) is not this configuration's and is left out.
    pub fn build(
        settings: &Settings,
        generation: u64,
        identity: impl Fn(&str) -> Option<u64>,
        read: impl Fn(&str) -> (Option<ListRecord>, Option<Schedule>),
    ) -> Self {
        let mut providers = BTreeMap::new();
        for name in settings.providers.keys() {
            let Some(id) = identity(name) else {
                continue;
            };
            let (list, schedule) = read(name);
            let mut known = Known {
                list: list.filter(|l| l.identity == id),
                schedule: schedule.filter(|s| s.identity == id),
                retired: BTreeSet::new(),
            };
            if known.list.is_some() {
                let configured = settings.configured.get(name).into_iter().flatten();
                known.retired = configured
                    .filter(|(model, _)| known.lists(model).is_none())
                    .map(|(model, _)| model.clone())
                    .collect();
            }
            providers.insert(name.clone(), known);
        }
        Self {
            generation,
            providers,
        }
    }

    /// `model`'s entry in `provider`'s list.
    pub fn lists(&self, provider: &str, model: &str) -> Option<&Listed> {
        self.providers.get(provider)?.lists(model)
    }

    /// Whether `model` is a configured vendor model `provider` no longer lists.
    pub fn retired(&self, provider: &str, model: &str) -> bool {
        self.providers
            .get(provider)
            .is_some_and(|k| k.retired.contains(model))
    }

    /// The newest model matching glob `pattern` among the providers
    /// `reachable` accepts: the latest `created`, then the greatest id.
    pub fn newest(&self, pattern: &str, reachable: impl Fn(&str) -> bool) -> Option<&Listed> {
        self.providers
            .iter()
            .filter(|(name, _)| reachable(name))
            .filter_map(|(_, k)| k.list.as_ref())
            .flat_map(|l| &l.models)
            .filter(|m| Settings::alias_matches(pattern, &m.id))
            .max_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)))
    }

    /// A summary for the diagnostics view and logs: per provider, its
    /// models' count, how its reads go, the configured models it lacks.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            generation: self.generation,
            providers: self
                .providers
                .iter()
                .map(|(name, k)| {
                    let schedule = k.schedule.clone().unwrap_or_default();
                    (
                        name.clone(),
                        ProviderSnapshot {
                            models: k.list.as_ref().map(|l| l.models.len()),
                            fetched_at_ms: k.list.as_ref().map(|l| l.fetched_at),
                            next_at_ms: schedule.next_at,
                            failures: schedule.failures,
                            last_error: schedule.last_error,
                            calls: schedule.calls,
                            retired: k.retired.iter().cloned().collect(),
                        },
                    )
                })
                .collect(),
        }
    }
}

/// What the diagnostics view shows of discovery.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Snapshot {
    pub generation: u64,
    pub providers: BTreeMap<String, ProviderSnapshot>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ProviderSnapshot {
    /// Models in its last good list (`None`: none read yet).
    pub models: Option<usize>,
    pub fetched_at_ms: Option<u64>,
    pub next_at_ms: u64,
    pub failures: u32,
    pub last_error: Option<String>,
    pub calls: u64,
    /// Configured vendor models its list lacks.
    pub retired: Vec<String>,
}
