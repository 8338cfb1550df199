//! The list reads: on each tick of an upstream root context, every
//! discovered provider whose read is due (at start, then every
//! `interval_seconds`; after a failure, `retry_seconds` doubling) is read
//! by the one worker that takes its lease (a CAS write of its schedule),
//! page after page, through HTTP callouts to its list cluster. A read
//! that ends well replaces the provider's list; one that fails keeps the
//! last good list and backs off. A configured model idle and unconfirmed
//! for `recheck_after_seconds` gets a call of its own (a targeted
//! re-check). Never on a request's path: callouts from a root context.

use std::collections::BTreeMap;

use super::{bump, matched, publish_matched, read, sync, view};
use crate::config::Config;
use crate::dialects::list::{self, Page, Query};
use crate::dialects::Target;
use crate::discovery::store::{
    self, identity, route_key, ListRecord, Schedule, MAX_ANSWER_BYTES, MAX_MODELS, MAX_PAGES,
};
use crate::discovery::{Settings, Source};
use crate::model::listing::Listed;
use crate::provider::Provider;
use crate::session::google_token;
use crate::session::host::{log_once, unix_millis, Host};

/// Past its call's timeout by this much, a lease is free again (a worker
/// that died mid-read does not hold it for ever).
const LEASE_MARGIN_MS: u64 = 5_000;

/// What one pending call is for.
enum Kind {
    /// A page of a whole read, with the models of the pages before it.
    Page {
        page: Page,
        pages: u32,
        models: Vec<Listed>,
    },
    /// One configured model's check.
    Check(String),
}

struct Pending {
    provider: String,
    identity: u64,
    kind: Kind,
}

/// One root context's reads: its calls out, and when each provider is
/// worth looking at again (to read no schedule every tick).
#[derive(Default)]
pub struct Fetcher {
    pending: BTreeMap<u32, Pending>,
    not_before: BTreeMap<String, u64>,
}

/// Why a read did not happen now.
enum Wait {
    /// Until then (ms).
    Until(u64),
    /// Another worker holds it, or nothing is due.
    Skip,
}

impl Fetcher {
    /// Whether callout `token` is one of this fetcher's (its answer may be
    /// larger than other callouts': [`MAX_ANSWER_BYTES`]).
    pub fn owns(&self, token: u32) -> bool {
        self.pending.contains_key(&token)
    }

    /// Starts the reads that are due and whose lease this worker takes.
    pub fn tick(&mut self, host: &impl Host, config: &Config) {
        let Some(settings) = config.discovery.as_ref() else {
            return;
        };
        sync(host);
        // Sets the gauges where this root context can (proxy-wasm).
        let _ = view(host, config);
        if settings.recheck_after_seconds > 0 {
            publish_matched(host);
        }
        let now = unix_millis(host);
        for (name, source) in &settings.providers {
            if self.pending.values().any(|p| p.provider == *name)
                || self.not_before.get(name).is_some_and(|t| now < *t)
            {
                continue;
            }
            let Some(provider) = config.providers.get(name) else {
                continue;
            };
            match self.start(host, config, settings, name, provider, source, now) {
                Ok(()) | Err(Wait::Skip) => {}
                Err(Wait::Until(t)) => {
                    self.not_before.insert(name.clone(), t);
                }
            }
        }
    }

    /// The schedule of provider `name` of `identity`, and its CAS token; a
    /// new one when there is none of that identity (written, then read
    /// back: a CAS of 0 would let two workers take it).
    fn schedule(host: &impl Host, name: &str, identity: u64) -> Option<(Schedule, u32)> {
        let key = store::schedule_key(name);
        for _ in 0..2 {
            match read(host, &key).map(|(b, cas)| (Schedule::decode(&b), cas)) {
                Some((Some(s), cas)) if s.identity == identity => return Some((s, cas)),
                found => {
                    let fresh = Schedule {
                        identity,
                        ..Schedule::default()
                    };
                    let cas = found.map_or(0, |(_, cas)| cas);
                    let _ = host.set_shared_data(&key, &fresh.encode(), cas);
                }
            }
        }
        None
    }

    #[allow(clippy::too_many_arguments)]
    fn start(
        &mut self,
        host: &impl Host,
        config: &Config,
        settings: &Settings,
        name: &str,
        provider: &Provider,
        source: &Source,
        now: u64,
    ) -> Result<(), Wait> {
        let identity = identity(provider, source);
        let (schedule, cas) = Self::schedule(host, name, identity).ok_or(Wait::Skip)?;
        if schedule.lease_until > now {
            return Err(Wait::Until(schedule.lease_until));
        }
        let kind = if now >= schedule.next_at {
            Kind::Page {
                page: Page::default(),
                pages: 0,
                models: Vec::new(),
            }
        } else {
            match due_check(host, config, settings, name, now) {
                Ok(model) => Kind::Check(model),
                Err(at) => return Err(Wait::Until(at.min(schedule.next_at))),
            }
        };
        let held = Schedule {
            lease_until: now + u64::from(settings.timeout_ms) + LEASE_MARGIN_MS,
            ..schedule.clone()
        };
        if host
            .set_shared_data(&store::schedule_key(name), &held.encode(), cas)
            .is_err()
        {
            return Err(Wait::Skip); // another worker took it
        }
        let pending = Pending {
            provider: name.to_owned(),
            identity,
            kind,
        };
        match self.send(host, config, settings, &pending) {
            Ok(token) => {
                self.pending.insert(token, pending);
                Ok(())
            }
            Err(SendError::NoToken) => {
                // A Vertex AI token is on its way: no failure, a second later.
                let _ = host.set_shared_data(&store::schedule_key(name), &schedule.encode(), 0);
                Err(Wait::Until(now + 1_000))
            }
            Err(SendError::Failed(why)) => {
                self.failed(host, settings, name, identity, &why);
                Err(Wait::Skip)
            }
        }
    }

    /// Sends `pending`'s call; its callout token.
    fn send(
        &self,
        host: &impl Host,
        config: &Config,
        settings: &Settings,
        pending: &Pending,
    ) -> Result<u32, SendError> {
        let name = pending.provider.as_str();
        let (Some(provider), Some(source)) =
            (config.providers.get(name), settings.providers.get(name))
        else {
            return Err(SendError::Failed("no such provider".into()));
        };
        let lister = list::of(provider.dialect)
            .ok_or_else(|| SendError::Failed("this provider's API has no model list".into()))?;
        let target = Target {
            provider,
            model: "",
        };
        let query = match &pending.kind {
            Kind::Page { page, .. } => Query::Page(page),
            Kind::Check(model) => Query::One(model),
        };
        let request = list::request(lister, query, &target)
            .map_err(|e| SendError::Failed(e.message.to_string()))?;
        let authority = source
            .host
            .as_deref()
            .or(provider.host.as_deref())
            .unwrap_or(&source.cluster);
        let mut headers: Vec<(&str, &[u8])> = vec![
            (":method", b"GET"),
            (":path", request.path.as_bytes()),
            (":authority", authority.as_bytes()),
            ("accept", b"application/json"),
        ];
        headers.extend(request.headers.iter().map(|(n, v)| (*n, v.as_bytes())));
        // A Google access token the gateway obtains (Vertex AI).
        let token =
            google_token::authorization(host, name, provider).map_err(|_| SendError::NoToken)?;
        if let Some((value, _)) = &token {
            headers.push(("authorization", value.as_bytes()));
        }
        host.http_call(&source.cluster, &headers, b"", settings.timeout_ms)
            .map_err(|e| SendError::Failed(e.to_string()))
    }

    /// The answer to callout `token`: its status (`None`: no answer, e.g. a
    /// timeout or no healthy host) and body. `false` when the callout is
    /// not this fetcher's.
    pub fn on_response(
        &mut self,
        host: &impl Host,
        config: &Config,
        token: u32,
        status: Option<u16>,
        body: &[u8],
    ) -> bool {
        let Some(pending) = self.pending.remove(&token) else {
            return false;
        };
        let Some(settings) = config.discovery.as_ref() else {
            return true;
        };
        let name = pending.provider.clone();
        let Some(lister) = config
            .providers
            .get(&name)
            .and_then(|p| list::of(p.dialect))
        else {
            return true;
        };
        let now = unix_millis(host);
        let answer = match status {
            _ if body.len() > MAX_ANSWER_BYTES => Err("the answer is too large".to_owned()),
            Some(200..=299) => Ok(body),
            Some(status) => Err(format!("the list call answered HTTP {status}")),
            None => Err("the list call got no answer (a timeout, or no healthy host)".to_owned()),
        };
        match pending.kind {
            Kind::Page {
                page,
                pages,
                mut models,
            } => {
                let decoded = answer.and_then(|b| lister.decode(&page, b, now / 1000));
                match decoded {
                    Ok(listed) => {
                        models.extend(listed.models);
                        models.truncate(MAX_MODELS + 1);
                        match listed.next {
                            Some(next) if pages + 1 < MAX_PAGES => {
                                self.next_page(
                                    host,
                                    config,
                                    settings,
                                    &name,
                                    pending.identity,
                                    next,
                                    pages + 1,
                                    models,
                                );
                            }
                            _ => {
                                self.listed(host, config, settings, &name, pending.identity, models)
                            }
                        }
                    }
                    Err(why) => self.failed(host, settings, &name, pending.identity, &why),
                }
            }
            Kind::Check(model) => {
                let found = match (status, answer) {
                    (_, Ok(b)) => lister.decode_one(b, now / 1000),
                    (Some(404), _) => Ok(None),
                    (_, Err(why)) => Err(why),
                };
                self.checked(
                    host,
                    config,
                    settings,
                    &name,
                    pending.identity,
                    &model,
                    found,
                );
            }
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    fn next_page(
        &mut self,
        host: &impl Host,
        config: &Config,
        settings: &Settings,
        name: &str,
        identity: u64,
        page: Page,
        pages: u32,
        models: Vec<Listed>,
    ) {
        let pending = Pending {
            provider: name.to_owned(),
            identity,
            kind: Kind::Page {
                page,
                pages,
                models,
            },
        };
        // The lease, renewed for this page's call.
        let now = unix_millis(host);
        if let Some((mut schedule, cas)) = Self::schedule(host, name, identity) {
            schedule.lease_until = now + u64::from(settings.timeout_ms) + LEASE_MARGIN_MS;
            schedule.calls += 1;
            let _ = host.set_shared_data(&store::schedule_key(name), &schedule.encode(), cas);
        }
        match self.send(host, config, settings, &pending) {
            Ok(token) => {
                self.pending.insert(token, pending);
            }
            Err(SendError::NoToken) => self.failed(
                host,
                settings,
                name,
                identity,
                "no Google access token for the next page",
            ),
            Err(SendError::Failed(why)) => self.failed(host, settings, name, identity, &why),
        }
    }

    /// A whole read ended well: the provider's list replaced, the next
    /// read scheduled, the change logged.
    fn listed(
        &mut self,
        host: &impl Host,
        config: &Config,
        settings: &Settings,
        name: &str,
        identity: u64,
        models: Vec<Listed>,
    ) {
        let now = unix_millis(host);
        let record = ListRecord::new(identity, now, models);
        let before = view(host, config);
        if let Err(e) = host.set_shared_data(&store::list_key(name), &record.encode(), 0) {
            log_once(&e, "a discovered model list not stored");
            self.failed(
                host,
                settings,
                name,
                identity,
                "the list could not be stored",
            );
            return;
        }
        if let Some((mut schedule, _)) = Self::schedule(host, name, identity) {
            schedule.calls += 1;
            schedule.succeeded(now, settings.interval_seconds);
            let _ = host.set_shared_data(&store::schedule_key(name), &schedule.encode(), 0);
            // The next read, or a targeted check, whichever comes first.
            let check = match settings.recheck_after_seconds {
                0 => u64::MAX,
                after => now.saturating_add(after.saturating_mul(1000)),
            };
            self.not_before
                .insert(name.to_owned(), schedule.next_at.min(check));
        }
        bump(host);
        if record.left_out > 0 {
            log::warn!(
                "llm gateway: provider {name}: its model list has {} models more than the {MAX_MODELS} kept",
                record.left_out
            );
        }
        log_changes(host, config, settings, name, before.as_deref());
    }

    /// A read (or check) failed: the last good list stays, the next read waits.
    fn failed(
        &mut self,
        host: &impl Host,
        settings: &Settings,
        name: &str,
        identity: u64,
        why: &str,
    ) {
        let now = unix_millis(host);
        let Some((mut schedule, _)) = Self::schedule(host, name, identity) else {
            return;
        };
        schedule.calls += 1;
        schedule.failed(now, why, settings.retry_seconds, settings.interval_seconds);
        let _ = host.set_shared_data(&store::schedule_key(name), &schedule.encode(), 0);
        self.not_before.insert(name.to_owned(), schedule.next_at);
        bump(host);
        log::warn!(
            "llm gateway: provider {name}: model list not read: {why}; the last good list is kept, retrying in {} s",
            schedule.next_at.saturating_sub(now) / 1000
        );
    }

    /// A configured model's check: still served (kept, confirmed now), or
    /// gone (out of the list: flagged), or the call failed (tried again
    /// after `retry_seconds`; the list as it was).
    #[allow(clippy::too_many_arguments)]
    fn checked(
        &mut self,
        host: &impl Host,
        config: &Config,
        settings: &Settings,
        name: &str,
        identity: u64,
        model: &str,
        found: Result<Option<Listed>, String>,
    ) {
        let now = unix_millis(host);
        let before = view(host, config);
        if let Some((mut schedule, _)) = Self::schedule(host, name, identity) {
            schedule.calls += 1;
            schedule.lease_until = 0;
            let _ = host.set_shared_data(&store::schedule_key(name), &schedule.encode(), 0);
        }
        let found = match found {
            Ok(found) => found,
            Err(why) => {
                self.not_before
                    .insert(name.to_owned(), now + settings.retry_seconds * 1000);
                log::warn!("llm gateway: provider {name}: model {model} not checked: {why}");
                return;
            }
        };
        let record = read(host, &store::list_key(name))
            .and_then(|(b, _)| ListRecord::decode(&b))
            .filter(|r| r.identity == identity);
        let Some(mut record) = record else {
            return;
        };
        match found {
            Some(listed) => match record.find(&listed.id) {
                Some(i) => {
                    if let Some(slot) = record.models.get_mut(i) {
                        *slot = listed;
                    }
                }
                None => {
                    record.models.push(listed);
                    record.models.sort_by(|a, b| a.id.cmp(&b.id));
                }
            },
            None => {
                let gone = crate::discovery::known::names(model)
                    .filter_map(|n| record.find(n))
                    .next();
                if let Some(i) = gone {
                    record.models.remove(i);
                }
            }
        }
        record.checked.insert(model.to_owned(), now);
        if let Err(e) = host.set_shared_data(&store::list_key(name), &record.encode(), 0) {
            log_once(&e, "a model check not stored");
            return;
        }
        bump(host);
        log_changes(host, config, settings, name, before.as_deref());
    }
}

enum SendError {
    /// No Google access token yet (Vertex AI): the read waits for one.
    NoToken,
    Failed(String),
}

/// The configured model of provider `name` due for a targeted check now
/// (idle and unconfirmed for `recheck_after_seconds`), or when the next is due.
fn due_check(
    host: &impl Host,
    config: &Config,
    settings: &Settings,
    name: &str,
    now: u64,
) -> Result<String, u64> {
    let never = u64::MAX;
    if settings.recheck_after_seconds == 0 {
        return Err(never);
    }
    let Some(view) = view(host, config) else {
        return Err(never);
    };
    let Some(list) = view.providers.get(name).and_then(|k| k.list.as_ref()) else {
        return Err(never);
    };
    let after = settings.recheck_after_seconds * 1000;
    let used = matched(host);
    let mut next = never;
    let known = view.providers.get(name);
    for model in settings
        .configured
        .get(name)
        .into_iter()
        .flatten()
        .map(|(m, _)| m)
    {
        // One its vendor no longer lists is flagged; the next whole read
        // says when it is back.
        if known.is_some_and(|k| k.retired.contains(model)) {
            continue;
        }
        let confirmed = list
            .checked
            .get(model)
            .copied()
            .unwrap_or(0)
            .max(list.fetched_at);
        let routed = used.get(&route_key(name, model)).copied().unwrap_or(0);
        let due = confirmed.max(routed).saturating_add(after);
        if due <= now {
            return Ok(model.clone());
        }
        next = next.min(due);
    }
    Err(next)
}

/// Logs each configured model provider `name` stopped (or started again)
/// listing, with the groups that name it.
fn log_changes(
    host: &impl Host,
    config: &Config,
    settings: &Settings,
    name: &str,
    before: Option<&crate::discovery::Discovered>,
) {
    let Some(after) = view(host, config) else {
        return;
    };
    let Some(now) = after.providers.get(name) else {
        return;
    };
    let was = before.and_then(|b| b.providers.get(name));
    let groups = |model: &str| {
        let groups: Vec<&str> = settings
            .configured
            .get(name)
            .and_then(|m| m.get(model))
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        if groups.is_empty() {
            String::new()
        } else {
            format!(" (model groups: {})", groups.join(", "))
        }
    };
    for model in &now.retired {
        if !was.is_some_and(|w| w.retired.contains(model)) {
            log::warn!(
                "llm gateway: provider {name} no longer lists model {model}{}: requests naming it may fail{}",
                groups(model),
                if settings.avoid_retired { "; it is no candidate while another is" } else { "" }
            );
        }
    }
    for model in was.into_iter().flat_map(|w| &w.retired) {
        if !now.retired.contains(model) && now.list.is_some() {
            log::info!("llm gateway: provider {name} lists model {model} again");
        }
    }
    if let Some(list) = &now.list {
        if was.and_then(|w| w.list.as_ref()).is_none() {
            log::info!(
                "llm gateway: provider {name}: {} models discovered",
                list.models.len()
            );
        }
    }
}
