//! Model discovery over the host (`crate::discovery` has the decisions):
//! - [`Fetcher`] (`fetch.rs`): the upstream role's root contexts read
//!   each provider's list on their tick, one read per proxy (a lease in
//!   shared data), with HTTP callouts through the provider's cluster;
//! - [`view`]: what was discovered, as a worker keeps it: rebuilt from the
//!   shared records when they change, and read by the edge (listings,
//!   routing, retired candidates, known limits) without a host call
//!   otherwise;
//! - [`facts`]: what is known of a vendor model (configuration, the
//!   vendor's list, the shipped table): the lookup context fitting reads;
//! - [`snapshot`]: discovery's state, for the diagnostics view.
//!
//! A change is seen at once in the worker that made it (and, natively,
//! by every worker: one process), and by the other VMs of a proxy-wasm
//! host at their next tick ([`sync`]).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::host::{log_once, status, unix_millis, Host, HostError};
use crate::catalog::{self, ModelFacts};
use crate::config::Config;
use crate::discovery::known::Snapshot;
use crate::discovery::store::{self, ListRecord, Matched, Schedule, GENERATION_KEY};
use crate::discovery::{Discovered, Settings};
use crate::model::listing::Listed;

mod fetch;
#[cfg(test)]
mod tests;

pub use crate::discovery::store::MAX_ANSWER_BYTES;
pub use fetch::Fetcher;

/// Moved whenever this VM (or process) may see other records: by its own
/// writes, and by [`sync`] when another's moved the shared generation.
/// 0: this VM has seen no discovery yet (nothing to look at). Its tests'
/// are their thread's (they run side by side in one process).
#[cfg(not(test))]
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// The shared generation [`sync`] saw last.
#[cfg(not(test))]
static SEEN: AtomicU64 = AtomicU64::new(0);
#[cfg(test)]
thread_local! {
    static EPOCH: AtomicU64 = const { AtomicU64::new(0) };
    static SEEN: AtomicU64 = const { AtomicU64::new(0) };
}

#[cfg(not(test))]
fn with<T>(cell: &'static AtomicU64, f: impl FnOnce(&AtomicU64) -> T) -> T {
    f(cell)
}

#[cfg(test)]
fn with<T>(cell: &'static std::thread::LocalKey<AtomicU64>, f: impl FnOnce(&AtomicU64) -> T) -> T {
    cell.with(f)
}

/// This thread as if no discovery had run on it (a test that runs after
/// others on the same thread: the core's tests under wasm run on one).
#[cfg(test)]
pub fn forget_on_this_thread() {
    with(&EPOCH, |e| e.store(0, Ordering::Relaxed));
    with(&SEEN, |s| s.store(0, Ordering::Relaxed));
    VIEW.with(|cell| cell.borrow_mut().take());
}

/// A worker's view, and what it was built from.
struct Cached {
    epoch: u64,
    generation: u64,
    /// The configuration it is for (its address and load time).
    config: (usize, u64),
    view: Rc<Discovered>,
}

thread_local! {
    static VIEW: RefCell<Option<Cached>> = const { RefCell::new(None) };
}

/// The shared records' generation.
fn generation(host: &impl Host) -> u64 {
    match host.shared_data(GENERATION_KEY) {
        Ok(Some((bytes, _))) => bytes
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes),
        Ok(None) => 0,
        Err(e) => {
            log_once(&e, "no discovered models read");
            0
        }
    }
}

/// Moves the shared generation after a write (CAS, a few tries), so every
/// worker reads the records again.
fn bump(host: &impl Host) {
    for _ in 0..4 {
        let (current, cas) = match host.shared_data(GENERATION_KEY) {
            Ok(Some((bytes, cas))) => (
                bytes
                    .get(..8)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_le_bytes),
                cas,
            ),
            _ => (0, 0),
        };
        let next = current.wrapping_add(1).max(1);
        if host
            .set_shared_data(GENERATION_KEY, &next.to_le_bytes(), cas)
            .is_ok()
        {
            with(&SEEN, |s| s.store(next, Ordering::Relaxed));
            break;
        }
    }
    with(&EPOCH, |e| e.fetch_add(1, Ordering::Relaxed));
}

/// A root context's tick: whether another VM moved the shared records.
pub fn sync(host: &impl Host) {
    let shared = generation(host);
    if shared != 0 && with(&SEEN, |s| s.swap(shared, Ordering::Relaxed)) != shared {
        with(&EPOCH, |e| e.fetch_add(1, Ordering::Relaxed));
    }
}

fn config_id(config: &Config) -> (usize, u64) {
    (std::ptr::from_ref(config) as usize, config.loaded_at)
}

/// What was discovered, for `config`; `None` when it discovers nothing or
/// nothing has been read yet. No host call while nothing changed; a change
/// reads the records again (and sets the discovery gauges).
pub fn view(host: &impl Host, config: &Config) -> Option<Rc<Discovered>> {
    let settings = config.discovery.as_ref()?;
    let epoch = with(&EPOCH, |e| e.load(Ordering::Relaxed));
    if epoch == 0 {
        return None;
    }
    let id = config_id(config);
    VIEW.with(|cell| {
        let mut cached = cell.borrow_mut();
        if let Some(c) = cached.as_mut().filter(|c| c.config == id) {
            if c.epoch == epoch {
                return Some(c.view.clone());
            }
            let shared = generation(host);
            if shared == c.generation {
                c.epoch = epoch;
                return Some(c.view.clone());
            }
        }
        let shared = generation(host);
        let view = Rc::new(build(host, config, settings, shared));
        gauges(host, settings, &view);
        *cached = Some(Cached {
            epoch,
            generation: shared,
            config: id,
            view: view.clone(),
        });
        Some(view)
    })
}

/// The records of `config`'s providers, as they are now.
fn build(host: &impl Host, config: &Config, settings: &Settings, generation: u64) -> Discovered {
    Discovered::build(
        settings,
        generation,
        |name| {
            let provider = config.providers.get(name)?;
            Some(store::identity(provider, settings.providers.get(name)?))
        },
        |name| {
            let list = read(host, &store::list_key(name)).and_then(|(b, _)| ListRecord::decode(&b));
            let schedule =
                read(host, &store::schedule_key(name)).and_then(|(b, _)| Schedule::decode(&b));
            (list, schedule)
        },
    )
}

fn read(host: &impl Host, key: &[u8]) -> Option<(Vec<u8>, u32)> {
    host.shared_data(key)
        .map_err(|e| log_once(&e, "no discovered models read"))
        .ok()
        .flatten()
}

/// A discovery gauge: where the host keeps no stats here (a native root
/// context), left out without a word.
fn gauge(host: &impl Host, base: &str, labels: &[(&str, &str)], value: u64) {
    match host.gauge(base, labels, value) {
        Err(HostError {
            status: status::UNIMPLEMENTED,
            ..
        })
        | Ok(()) => {}
        Err(e) => log_once(&e, "ignored"),
    }
}

/// Each provider's models and failed reads in a row, and each configured
/// vendor model: 1 while its vendor no longer lists it.
fn gauges(host: &impl Host, settings: &Settings, view: &Discovered) {
    for (name, known) in &view.providers {
        let provider = [("provider", name.as_str())];
        if let Some(list) = &known.list {
            gauge(
                host,
                "llm_gateway.discovery_models",
                &provider,
                list.models.len() as u64,
            );
            for model in settings
                .configured
                .get(name)
                .into_iter()
                .flatten()
                .map(|(m, _)| m)
            {
                let retired = u64::from(known.retired.contains(model));
                let labels = [("provider", name.as_str()), ("model", model.as_str())];
                gauge(host, "llm_gateway.discovery_retired", &labels, retired);
            }
        }
        let failures = known.schedule.as_ref().map_or(0, |s| u64::from(s.failures));
        gauge(host, "llm_gateway.discovery_failures", &provider, failures);
    }
}

/// What is known of vendor model `model` at provider `provider`: the
/// configuration's facts, else its vendor's list's, else the shipped
/// table's (`catalog::facts`). One lookup per source; a host call only
/// when the discovered records changed since this worker last looked.
pub fn facts(host: &impl Host, config: &Config, provider: &str, model: &str) -> ModelFacts {
    let view = view(host, config);
    let listed = view.as_deref().and_then(|v| v.lists(provider, model));
    catalog::facts(
        &config.model_facts,
        provider,
        config.providers.get(provider),
        model,
        listed,
    )
}

/// Discovery's state for the diagnostics view (`None`: not configured).
pub fn snapshot(host: &impl Host, config: &Config) -> Option<Snapshot> {
    config.discovery.as_ref()?;
    let view = view(host, config).unwrap_or_default();
    Some(view.snapshot())
}

/// The discovered models a caller may reach (`allows` its groups), for the
/// model list beside its groups: each id once (the first provider by name
/// that lists it), none a group's name, with what is known of it; then
/// the aliases, each as the model it names now. Empty unless discovery
/// routes to the models it lists (`discovery.route`).
pub fn reachable(host: &impl Host, config: &Config, allows: impl Fn(&str) -> bool) -> Vec<Listed> {
    let Some(settings) = config.discovery.as_ref().filter(|s| s.route) else {
        return Vec::new();
    };
    let Some(view) = view(host, config) else {
        return Vec::new();
    };
    let mut providers: Vec<&str> = config
        .model_groups
        .iter()
        .filter(|(name, _)| allows(name))
        .flat_map(|(_, g)| g.candidates.iter().filter_map(|c| settings.provider_of(c)))
        .collect();
    providers.sort_unstable();
    providers.dedup();
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let mut add = |id: &str, provider: &str, listed: &Listed, out: &mut Vec<Listed>| {
        if config.model_groups.contains_key(id) || !seen.insert(id.to_owned()) {
            return;
        }
        let known = catalog::facts(
            &config.model_facts,
            provider,
            config.providers.get(provider),
            &listed.id,
            Some(listed),
        );
        out.push(Listed {
            id: id.to_owned(),
            owned_by: Some(provider.to_owned()),
            context_window: known.context_window,
            max_output_tokens: known.max_output_tokens,
            ..listed.clone()
        });
    };
    for provider in &providers {
        let models = view
            .providers
            .get(*provider)
            .and_then(|k| k.list.as_ref())
            .map_or(&[][..], |l| &l.models);
        for listed in models {
            add(&listed.id, provider, listed, &mut out);
        }
    }
    for (alias, pattern) in &settings.aliases {
        let reachable = |p: &str| providers.contains(&p);
        if let Some(listed) = view.newest(pattern, reachable) {
            let provider = providers
                .iter()
                .find(|p| view.lists(p, &listed.id).is_some())
                .copied()
                .unwrap_or_default();
            add(alias, provider, listed, &mut out);
        }
    }
    out
}

/// When requests were last routed to each configured route, in this VM
/// (or process), not yet shared; and when it was last shared.
static MATCHED: Mutex<(Matched, u64)> = Mutex::new((Matched::new(), 0));

/// A request was routed to vendor model `model` at discovered provider
/// `provider` (only when targeted re-checks are on, and for configured
/// routes: the map stays as small as the configuration).
pub fn note_routed(settings: &Settings, provider: &str, model: &str, now_ms: u64) {
    if settings.recheck_after_seconds == 0
        || !settings
            .configured
            .get(provider)
            .is_some_and(|m| m.contains_key(model))
    {
        return;
    }
    let mut matched = MATCHED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let key = store::route_key(provider, model);
    let at = matched.0.entry(key).or_default();
    *at = (*at).max(now_ms);
}

/// Shares this VM's route uses (merged, latest wins), at most every few
/// seconds and only when there is something new.
fn publish_matched(host: &impl Host) {
    let now = unix_millis(host);
    let mut local = MATCHED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (routes, shared_at) = &mut *local;
    if routes.is_empty() || now < shared_at.saturating_add(2_000) {
        return;
    }
    let (mut merged, cas) = read(host, store::MATCHED_KEY)
        .map(|(b, cas)| {
            (
                serde_json::from_slice::<Matched>(&b).unwrap_or_default(),
                cas,
            )
        })
        .unwrap_or_default();
    for (route, at) in routes.iter() {
        let entry = merged.entry(route.clone()).or_default();
        *entry = (*entry).max(*at);
    }
    let bytes = serde_json::to_vec(&merged).unwrap_or_default();
    if host
        .set_shared_data(store::MATCHED_KEY, &bytes, cas)
        .is_ok()
    {
        routes.clear();
        *shared_at = now;
    }
}

/// Every route's last use, as shared.
fn matched(host: &impl Host) -> Matched {
    read(host, store::MATCHED_KEY)
        .and_then(|(b, _)| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}
