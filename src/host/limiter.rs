//! The edge role's glue to `limits`: counters in proxy-wasm shared data,
//! a request's admission and its headers, the charge at its end, metrics,
//! and the descriptor values Envoy's rate limit filter reads.

use super::abi::{self, Map};
use super::metrics;
use crate::config::Config;
use crate::error::{ErrorCode, GatewayError};
use crate::limits::headers::RateHeaders;
use crate::limits::store::{self, SetResult, SharedStore};
use crate::limits::{self, Counter, Estimate, Scope, Usage};

/// Shared data of this `vm_id`: one store for every worker of the proxy.
struct HostStore;

impl SharedStore for HostStore {
    fn get(&self, key: &[u8]) -> Option<(Vec<u8>, u32)> {
        abi::shared_data(key)
    }

    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> SetResult {
        abi::set_shared_data(key, value, cas)
    }
}

fn now_ms() -> u64 {
    abi::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// Creates every counter a configuration uses, as it loads (see `store::ensure`).
pub fn prepare(config: &Config) {
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
        store::ensure(&HostStore, &id);
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
}

impl RequestLimits {
    /// Admits the request of `key` (`None`: auth is off) on `group`, or
    /// returns the 429 to answer.
    pub fn admit(
        config: &Config,
        key: Option<&str>,
        group: &str,
        estimate: Estimate,
    ) -> (Self, Option<GatewayError>) {
        let counters = limits::counters(&config.limits.rate, key, group);
        let estimate = config.limits.refuse_on_estimate.then_some(estimate);
        let verdict = limits::admit(&HostStore, &counters, now_ms(), estimate);
        let mut this = Self {
            headers: verdict.headers,
            key: key.unwrap_or_default().to_owned(),
            group: group.to_owned(),
            refused: None,
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
            metrics::count(
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
                this.gauge(counter, *remaining);
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
    fn gauge(&self, counter: &Counter, remaining: u64) {
        let key = match counter.scope {
            Scope::Key | Scope::KeyGroup => self.key.as_str(),
            Scope::Group | Scope::All => "",
        };
        let group = match counter.scope {
            Scope::Group | Scope::KeyGroup => self.group.as_str(),
            Scope::Key | Scope::All => "",
        };
        let [scope, limit] = self.labels(counter);
        metrics::gauge(
            "llm_gateway.rate_limit_remaining",
            &[("key", key), ("group", group), scope, limit],
            remaining,
        );
    }

    /// OpenAI's `x-ratelimit-*` headers, for every response of a limited key.
    pub fn header_pairs(&self) -> Vec<(&'static str, String)> {
        self.headers.pairs()
    }

    pub fn set_response_headers(&self) {
        for (name, value) in self.headers.pairs() {
            abi::set_header(Map::Response, name, Some(value.as_bytes()));
        }
    }

    /// Charges what the request used, when it ends (not for a refused one).
    pub fn charge(&self, usage: Usage) {
        if self.refused.is_some() {
            return;
        }
        for (i, remaining) in limits::charge(&HostStore, &self.counters, now_ms(), usage) {
            if let Some(counter) = self.counters.get(i) {
                self.gauge(counter, remaining);
            }
        }
    }
}

/// Answers with a unified error carrying the request's rate-limit headers
/// (and `retry-after`, `retry-after-ms` when a limit refused it).
pub fn send_error(error: &GatewayError, request_id: &str, limits: &RequestLimits) {
    let body = error.to_json(Some(request_id));
    let mut owned: Vec<(&str, String)> = limits.header_pairs();
    if let Some((_, reset_ms)) = &limits.refused {
        owned.push((
            "retry-after",
            limits::headers::retry_after_seconds(*reset_ms).to_string(),
        ));
        owned.push(("retry-after-ms", reset_ms.max(&1).to_string()));
    }
    let mut headers: Vec<(&str, &[u8])> = vec![
        ("content-type", b"application/json"),
        ("x-request-id", request_id.as_bytes()),
    ];
    headers.extend(owned.iter().map(|(n, v)| (*n, v.as_bytes())));
    abi::send_response(error.status(), &headers, &body, "");
}

/// Filter state Envoy's rate limit filter turns into descriptors (CEL
/// `filter_state['wasm.llm_key']` in envoy/ratelimit.yaml): clients cannot
/// set it, and unlike request headers it lasts until the stream is done
/// (the upstream role withholds `x-llm-*` headers from the vendors in the
/// one header map both share).
pub fn expose_descriptors(key: &str, group: &str, model: &str) {
    for (name, value) in [
        ("llm_key", key),
        ("llm_group", group),
        ("llm_request_model", model),
    ] {
        abi::set_property(&[name], Some(value.as_bytes()));
    }
}

/// Filter state for `hits_addend` (`%FILTER_STATE(wasm.llm_tokens:PLAIN)%`...),
/// charged by the rate limit filter when the stream is done.
pub fn expose_usage(usage: Usage) {
    for (name, value) in [
        ("llm_tokens", usage.input.saturating_add(usage.output)),
        ("llm_input_tokens", usage.input),
        ("llm_output_tokens", usage.output),
        ("llm_cost_micro_usd", usage.micro_usd),
    ] {
        abi::set_property(&[name], Some(value.to_string().as_bytes()));
    }
}

/// A 429 from Envoy's rate limit filter (the global limit service refused
/// the request) is the gateway's own limit, not a vendor's: its code, and
/// `retry-after` from the filter's `x-ratelimit-reset` (seconds).
pub fn global_refusal() -> Option<ErrorCode> {
    let details = abi::property(&["response", "code_details"])?;
    if details != b"request_rate_limited" {
        return None;
    }
    if let Some(reset) = abi::header(Map::Response, "x-ratelimit-reset") {
        abi::set_header(Map::Response, "retry-after", Some(&reset));
    }
    Some(ErrorCode::RateLimited)
}
