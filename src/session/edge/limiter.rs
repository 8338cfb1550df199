//! The edge session's part of `limits`: counters in the proxy's shared data,
//! a request's admission and its headers, the charge at its end, metrics,
//! and the descriptor values Envoy's rate limit filter reads.

use crate::config::Config;
use crate::error::GatewayError;
use crate::limits::headers::RateHeaders;
use crate::limits::store::{self, SetResult, SharedStore};
use crate::limits::{self, Counter, Estimate, Scope, Usage};
use crate::model::Api;
use crate::session::host::{unix_millis, Host, Map};
use crate::session::send_error_with;

/// Shared data of this `vm_id`: one store for every worker of the proxy.
struct HostStore<'h, H>(&'h H);

impl<H: Host> SharedStore for HostStore<'_, H> {
    fn get(&self, key: &[u8]) -> Option<(Vec<u8>, u32)> {
        self.0.shared_data(key)
    }

    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> SetResult {
        self.0.set_shared_data(key, value, cas)
    }
}

/// Creates every counter a configuration uses, as it loads (see `store::ensure`).
pub fn prepare(host: &impl Host, config: &Config) {
    if config.limits.rate.is_empty() {
        return;
    }
    let keys: Vec<&str> = if config.auth.enabled {
        config.auth.keys.iter().map(|k| k.name.as_str()).collect()
    } else {
        Vec::new()
    };
    let groups: Vec<&str> = config.model_groups.keys().map(String::as_str).collect();
    for id in limits::every_counter(&config.limits.rate, &keys, &groups) {
        store::ensure(&HostStore(host), &id);
    }
}

/// One request's limits, from its admission to its end.
pub struct RequestLimits {
    counters: Vec<Counter>,
    headers: RateHeaders,
    key: String,
    group: String,
    /// The limit that refused the request (`<scope>.<field>`), and its window's reset.
    pub refused: Option<(String, u64)>,
    /// When the request was admitted (its request counters' windows).
    admitted_ms: u64,
}

impl RequestLimits {
    /// Admits the request of `key` (`None`: auth is off) on `group`, or
    /// returns the 429 to answer.
    pub fn admit(
        host: &impl Host,
        config: &Config,
        key: Option<&str>,
        group: &str,
        estimate: Estimate,
    ) -> (Self, Option<GatewayError>) {
        let counters = limits::counters(&config.limits.rate, key, group);
        let estimate = config.limits.refuse_on_estimate.then_some(estimate);
        let admitted_ms = unix_millis(host);
        let verdict = limits::admit(&HostStore(host), &counters, admitted_ms, estimate);
        let mut this = Self {
            headers: verdict.headers,
            key: key.unwrap_or_default().to_owned(),
            group: group.to_owned(),
            refused: None,
            admitted_ms,
            counters,
        };
        let refused_counter = verdict.refused.map(|r| r.counter);
        for (i, counter) in this.counters.iter().enumerate() {
            let decision = match refused_counter {
                Some(r) if r == i => "limited",
                Some(_) => continue,
                None => "admitted",
            };
            let [(_, scope), (_, limit)] = this.labels(counter);
            host.count(
                "llm_gateway.rate_limit",
                &[
                    ("key", &this.key),
                    ("group", &this.group),
                    ("scope", scope),
                    ("limit", limit),
                    ("decision", decision),
                ],
                1,
            );
        }
        for (i, remaining) in verdict.remaining.iter().enumerate() {
            if let (Some(counter), Some(remaining)) = (this.counters.get(i), remaining) {
                this.gauge(host, counter, *remaining);
            }
        }
        let error = verdict.refused.and_then(|refusal| {
            let counter = this.counters.get(refusal.counter)?;
            let name = format!("{}.{}", counter.scope.name(), counter.budget.field);
            this.refused = Some((name, refusal.reset_ms));
            Some(limits::refusal_error(counter, &refusal, group))
        });
        (this, error)
    }

    fn labels<'c>(&self, counter: &'c Counter) -> [(&'static str, &'c str); 2] {
        [
            ("scope", counter.scope.name()),
            ("limit", counter.budget.field),
        ]
    }

    /// What remains of a counter's budget, labelled as the counter is
    /// shared: a group's limit has no key, a key's limit no group.
    fn gauge(&self, host: &impl Host, counter: &Counter, remaining: u64) {
        let key = match counter.scope {
            Scope::Key | Scope::KeyGroup => self.key.as_str(),
            Scope::Group | Scope::All => "",
        };
        let group = match counter.scope {
            Scope::Group | Scope::KeyGroup => self.group.as_str(),
            Scope::Key | Scope::All => "",
        };
        let [scope, limit] = self.labels(counter);
        host.gauge(
            "llm_gateway.rate_limit_remaining",
            &[("key", key), ("group", group), scope, limit],
            remaining,
        );
    }

    /// OpenAI's `x-ratelimit-*` headers, for every response of a limited key.
    pub fn header_pairs(&self) -> Vec<(&'static str, String)> {
        self.headers.pairs()
    }

    pub fn set_response_headers(&self, host: &impl Host) {
        for (name, value) in self.headers.pairs() {
            host.set_header(Map::Response, name.as_bytes(), Some(value.as_bytes()));
        }
    }

    /// Takes the request back out of its request limits: the global rate
    /// limit service refused it after they admitted it.
    pub fn refund(&self, host: &impl Host) {
        if self.refused.is_none() {
            limits::refund(&HostStore(host), &self.counters, self.admitted_ms);
        }
    }

    /// Charges what the request used, when it ends (not for a refused one).
    pub fn charge(&self, host: &impl Host, usage: Usage) {
        if self.refused.is_some() {
            return;
        }
        for (i, remaining) in
            limits::charge(&HostStore(host), &self.counters, unix_millis(host), usage)
        {
            if let Some(counter) = self.counters.get(i) {
                self.gauge(host, counter, remaining);
            }
        }
    }
}

/// Answers with a unified error carrying the request's rate-limit headers
/// (and `retry-after`, `retry-after-ms` when a limit refused it).
pub fn send_error(
    host: &impl Host,
    api: Api,
    error: &GatewayError,
    request_id: &str,
    limits: &RequestLimits,
) {
    let mut owned: Vec<(&str, String)> = limits.header_pairs();
    if let Some((_, reset_ms)) = &limits.refused {
        owned.push((
            "retry-after",
            limits::headers::retry_after_seconds(*reset_ms).to_string(),
        ));
        owned.push(("retry-after-ms", reset_ms.max(&1).to_string()));
    }
    send_error_with(host, api, error, request_id, &owned);
}

/// Filter state Envoy's rate limit filter turns into descriptors (CEL
/// `filter_state['wasm.llm_key']` in envoy/ratelimit.yaml): clients cannot
/// set it, and unlike request headers it lasts until the stream is done
/// (the upstream role withholds `x-llm-*` headers from the vendors in the
/// one header map both share).
pub fn expose_descriptors(host: &impl Host, key: &str, group: &str, model: &str) {
    for (name, value) in [
        ("llm_key", key),
        ("llm_group", group),
        ("llm_request_model", model),
    ] {
        host.set_property(&[name], Some(value.as_bytes()));
    }
}

/// Filter state for `hits_addend` (`%FILTER_STATE(wasm.llm_tokens:PLAIN)%`...),
/// charged by the rate limit filter when the stream is done.
pub fn expose_usage(host: &impl Host, usage: Usage) {
    for (name, value) in [
        ("llm_tokens", usage.input.saturating_add(usage.output)),
        ("llm_input_tokens", usage.input),
        ("llm_output_tokens", usage.output),
        ("llm_cost_micro_usd", usage.micro_usd),
    ] {
        host.set_property(&[name], Some(value.to_string().as_bytes()));
    }
}
