//! The edge session's part of `limits`: counters in the proxy's shared data,
//! a request's admission and its headers, the charge at its end, metrics,
//! and the descriptor values Envoy's rate limit filter reads.

use crate::config::Config;
use crate::diagnostics::inflight;
use crate::error::GatewayError;
use crate::limits::headers::RateHeaders;
use crate::limits::store;
use crate::limits::{self, Counter, Held, Reservation, Scope, Usage};
use crate::metering::{price_for, Price};
use crate::model::Api;
use crate::session::host::{ignore, unix_millis, Host, Map};
use crate::session::send_error_with;
use crate::session::shared_data::HostStore;

/// Shared data of this `vm_id`: one set of counters for every worker of the proxy.
fn counter_store<H: Host>(host: &H) -> HostStore<'_, H> {
    HostStore::new(
        host,
        "the counter is skipped (the request is admitted uncounted)",
    )
}

/// Shared data for the diagnostics view's account of what requests in flight hold.
fn inflight_store<H: Host>(host: &H) -> HostStore<'_, H> {
    HostStore::new(host, "the diagnostics view misses what this request holds")
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
        store::ensure(&counter_store(host), &id);
    }
}

/// What a request reserves at admission: its prompt estimate, its output
/// limit (or `limits.reserve_output_tokens` when it names none), and their
/// cost at the dearest price any provider lists for the model (an attempt
/// may fail over to any of them).
pub fn reservation(
    config: &Config,
    group: &str,
    request_model: &str,
    prompt_tokens: u64,
    output_tokens: Option<u32>,
) -> Reservation {
    let output = output_tokens.map_or(config.limits.reserve_output_tokens, u64::from);
    let usage = crate::model::response::Usage {
        prompt_tokens,
        completion_tokens: output,
        ..Default::default()
    };
    let cost = dearest_price(config, group, request_model).map_or(0.0, |p| p.cost(&usage));
    Reservation {
        input: prompt_tokens,
        output,
        micro_usd: (cost * 1e6).ceil() as u64,
    }
}

/// The dearest price any provider lists for what `request_model` on
/// `group` is at that provider (by output, then input price).
pub fn dearest_price<'c>(
    config: &'c Config,
    group: &str,
    request_model: &str,
) -> Option<&'c Price> {
    config
        .providers
        .values()
        .filter_map(|p| price_for(&p.prices, p.vendor_model(group, request_model)))
        .max_by(|a, b| {
            a.output
                .total_cmp(&b.output)
                .then(a.input.total_cmp(&b.input))
        })
}

/// One request's limits, from its admission to its end.
pub struct RequestLimits {
    counters: Vec<Counter>,
    /// Reservations and places in flight, settled when the request ends.
    held: Vec<Held>,
    headers: RateHeaders,
    key: String,
    group: String,
    /// The limit that refused the request (`<scope>.<field>`), and its window's reset.
    pub refused: Option<(String, u64)>,
    /// When the request was admitted (its request counters' windows).
    admitted_ms: u64,
    /// What it holds is shown in the diagnostics view (`diagnostics::inflight`).
    shown: bool,
}

impl RequestLimits {
    /// Admits the request of `key` (`None`: auth is off) on `group`,
    /// reserving its worst case, or returns the 429 to answer.
    pub fn admit(
        host: &impl Host,
        config: &Config,
        key: Option<&str>,
        group: &str,
        reservation: Reservation,
    ) -> (Self, Option<GatewayError>) {
        let counters = limits::counters(&config.limits.rate, key, group);
        let strict = config.limits.refuse_on_estimate;
        let admitted_ms = unix_millis(host);
        let verdict = limits::admit(
            &counter_store(host),
            &counters,
            admitted_ms,
            reservation,
            strict,
        );
        let mut this = Self {
            held: verdict.held,
            headers: verdict.headers,
            key: key.unwrap_or_default().to_owned(),
            group: group.to_owned(),
            refused: None,
            admitted_ms,
            counters,
            shown: config.diagnostics.is_some(),
        };
        let refused_counter = verdict.refused.map(|r| r.counter);
        for (i, counter) in this.counters.iter().enumerate() {
            let decision = match refused_counter {
                Some(r) if r == i => "limited",
                Some(_) => continue,
                None => "admitted",
            };
            this.count(host, "llm_gateway.rate_limit", counter, Some(decision));
        }
        for (i, remaining) in verdict.remaining.iter().enumerate() {
            if let (Some(counter), Some(remaining)) = (this.counters.get(i), remaining) {
                this.gauge(host, counter, *remaining);
            }
        }
        if this.shown && verdict.refused.is_none() {
            inflight::hold(&inflight_store(host), &this.holdings());
        }
        let error = verdict.refused.and_then(|refusal| {
            let counter = this.counters.get(refusal.counter)?;
            let name = format!("{}.{}", counter.scope.name(), counter.budget.field);
            this.refused = Some((name, refusal.reset_ms));
            Some(limits::refusal_error(counter, &refusal, group))
        });
        (this, error)
    }

    /// What the request holds, by counter.
    fn holdings(&self) -> Vec<inflight::Holding<'_>> {
        self.held
            .iter()
            .filter_map(|h| {
                Some(inflight::Holding {
                    counter: &self.counters.get(h.counter)?.id,
                    window_start: h.window_start,
                    amount: h.amount,
                })
            })
            .collect()
    }

    /// Counts one request in `name`, labelled with the request's key and
    /// group and the counter's scope and limit (and the `decision`).
    fn count(&self, host: &impl Host, name: &str, counter: &Counter, decision: Option<&str>) {
        let [scope, limit] = self.labels(counter);
        let mut labels = vec![
            ("key", self.key.as_str()),
            ("group", &self.group),
            scope,
            limit,
        ];
        labels.extend(decision.map(|d| ("decision", d)));
        ignore(host.count(name, &labels, 1));
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
        ignore(host.gauge(
            "llm_gateway.rate_limit_remaining",
            &[("key", key), ("group", group), scope, limit],
            remaining,
        ));
    }

    /// OpenAI's `x-ratelimit-*` headers, for every response of a limited key.
    pub fn header_pairs(&self) -> Vec<(&'static str, String)> {
        self.headers.pairs()
    }

    /// The gateway's own headers on an answer (a failed one is logged and
    /// left out: it carries nothing of the vendor's).
    pub fn set_response_headers(&self, host: &impl Host) {
        for (name, value) in self.headers.pairs() {
            ignore(host.set_header(Map::Response, name.as_bytes(), Some(value.as_bytes())));
        }
    }

    /// Takes the request back out of its request limits: the global rate
    /// limit service refused it after they admitted it (its reservations
    /// and place in flight are released when it ends, as for any request).
    pub fn refund(&self, host: &impl Host) {
        if self.refused.is_none() {
            limits::refund(&counter_store(host), &self.counters, self.admitted_ms);
        }
    }

    /// Settles what the request used against what it reserved, when it
    /// ends, however it ended (nothing for a refused one: it holds nothing).
    /// Returns the budgets past their `alert_at` (`<scope>.<field>`).
    pub fn settle(&self, host: &impl Host, usage: Usage) -> Vec<String> {
        let mut alerts = Vec::new();
        if self.refused.is_some() {
            return alerts;
        }
        let now = unix_millis(host);
        let store = counter_store(host);
        if self.shown {
            inflight::release(&inflight_store(host), &self.holdings());
        }
        for (i, remaining) in limits::settle(&store, &self.counters, &self.held, now, usage) {
            let Some(counter) = self.counters.get(i) else {
                continue;
            };
            self.gauge(host, counter, remaining);
            let budget = counter.budget;
            let used = budget.limit.saturating_sub(remaining);
            if budget.alert_at.is_some_and(|at| used >= at) {
                self.count(host, "llm_gateway.budget_alert", counter, None);
                let [(_, scope), (_, limit)] = self.labels(counter);
                alerts.push(format!("{scope}.{limit}"));
            }
        }
        alerts
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
        ignore(host.set_property(&[name], Some(value.as_bytes())));
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
        ignore(host.set_property(&[name], Some(value.to_string().as_bytes())));
    }
}
