//! Rate limits, token limits and spend budgets per gateway key and model
//! group (`limits.rate` in the configuration), enforced on one proxy with
//! counters every worker shares ([`store`]), in fixed windows ([`window`]).
//!
//! Requests are counted when they are admitted, before routing. Token and
//! cost budgets are reserved then (the request's worst case: its prompt
//! estimate and output limit, at the dearest price it may be served at) and
//! settled to what it used when it ends, however it ends; requests in
//! flight are counted until then. A request is refused when a request or
//! in-flight limit would go over, or a token or cost budget has nothing
//! left (or, with `refuse_on_estimate`, has less left than the reservation).

pub mod headers;
pub mod store;
pub mod window;

use serde::Deserialize;

use crate::error::{ErrorCode, ErrorType, GatewayError};
use headers::{RateHeaders, Snapshot};
use store::{Added, Cap, SharedStore};
pub use window::Window;

/// Counters one configuration may have (each rule's limits times the keys
/// and groups its `"*"` stands for); a configuration with more is refused.
pub const MAX_COUNTERS: usize = 10_000;

/// Which tokens a token limit counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenKind {
    #[default]
    Total,
    Input,
    Output,
}

/// One rule of `limits.rate`: who it holds for, and its limits.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// A gateway key's name; `"*"`: every key, each on its own; absent: all together.
    #[serde(default)]
    pub key: Option<String>,
    /// A model group; `"*"`: every group, each on its own; absent: all together.
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub requests_per_second: Option<u64>,
    #[serde(default)]
    pub requests_per_minute: Option<u64>,
    #[serde(default)]
    pub requests_per_hour: Option<u64>,
    #[serde(default)]
    pub tokens_per_minute: Option<u64>,
    #[serde(default)]
    pub tokens_per_hour: Option<u64>,
    #[serde(default)]
    pub tokens_per_day: Option<u64>,
    /// What the token limits count (default `total`).
    #[serde(default)]
    pub tokens: Option<TokenKind>,
    #[serde(default)]
    pub usd_per_day: Option<f64>,
    #[serde(default)]
    pub usd_per_month: Option<f64>,
    /// Requests admitted and not yet ended, at once.
    #[serde(default)]
    pub max_in_flight: Option<u64>,
    /// Limits over a period of any length (`{"amount": 5000, "period": "12h"}`).
    #[serde(default)]
    pub requests_per: Option<PeriodLimit>,
    #[serde(default)]
    pub tokens_per: Option<PeriodLimit>,
    #[serde(default)]
    pub usd_per: Option<PeriodLimit>,
    /// The share of a token or spend budget (0 to 1) past which each request
    /// is flagged (`llm_gateway.budget_alert`, the access log's `budget_alerts`).
    #[serde(default)]
    pub alert_at: Option<f64>,
    /// The limits above, checked, in this order.
    #[serde(skip)]
    pub budgets: Vec<Budget>,
}

/// A limit over a period of any length.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeriodLimit {
    pub amount: f64,
    /// `"90s"`, `"12h"`, `"7d"`, `"2w"`: see [`Window::parse_period`].
    pub period: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Requests,
    /// Requests admitted and not yet ended.
    InFlight,
    Tokens(TokenKind),
    /// Cost in millionths of a USD, at the providers' `prices`.
    MicroUsd,
}

impl Metric {
    fn id(self) -> &'static str {
        match self {
            Self::Requests => "requests",
            Self::InFlight => "in_flight",
            Self::Tokens(TokenKind::Total) => "tokens.total",
            Self::Tokens(TokenKind::Input) => "tokens.input",
            Self::Tokens(TokenKind::Output) => "tokens.output",
            Self::MicroUsd => "usd",
        }
    }

    /// OpenAI's error `type` for this limit, when not `requests` (the code's own).
    fn error_type(self) -> Option<ErrorType> {
        match self {
            Self::Requests | Self::InFlight => None,
            Self::Tokens(_) => Some(ErrorType::Tokens),
            Self::MicroUsd => Some(ErrorType::InsufficientQuota),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Requests => "requests",
            Self::InFlight => "requests in flight",
            Self::Tokens(TokenKind::Total) => "tokens",
            Self::Tokens(TokenKind::Input) => "input tokens",
            Self::Tokens(TokenKind::Output) => "output tokens",
            Self::MicroUsd => "USD",
        }
    }
}

/// One limit of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub metric: Metric,
    pub window: Window,
    pub limit: u64,
    /// The configuration field, e.g. `requests_per_minute` (metrics, logs).
    pub field: &'static str,
    /// Used at or above this, a request is flagged (`alert_at` × `limit`).
    pub alert_at: Option<u64>,
}

/// Whom a counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    All,
    Key,
    Group,
    KeyGroup,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Key => "key",
            Self::Group => "group",
            Self::KeyGroup => "key_group",
        }
    }

    fn describe(self, group: &str) -> String {
        match self {
            Self::All => "all keys and model groups together".into(),
            Self::Key => "this key".into(),
            Self::Group => format!("model group {group}, all keys together"),
            Self::KeyGroup => format!("this key on model group {group}"),
        }
    }
}

impl RateLimit {
    fn scope(&self) -> Scope {
        match (&self.key, &self.group) {
            (None, None) => Scope::All,
            (Some(_), None) => Scope::Key,
            (None, Some(_)) => Scope::Group,
            (Some(_), Some(_)) => Scope::KeyGroup,
        }
    }

    fn applies(&self, key: Option<&str>, group: &str) -> bool {
        let key_ok = match self.key.as_deref() {
            None => true,
            Some("*") => key.is_some(),
            Some(name) => key == Some(name),
        };
        key_ok && self.group.as_deref().is_none_or(|g| g == "*" || g == group)
    }

    /// Checks the rule and fills in `budgets`; `keys` is `None` when auth is off.
    fn prepare(
        &mut self,
        field: &str,
        keys: Option<&[&str]>,
        groups: &[&str],
    ) -> Result<(), String> {
        match (self.key.as_deref(), keys) {
            (Some(_), None) => {
                return Err(format!("{field}.key: auth is off, so no request has a key"));
            }
            (Some(k), Some(keys)) if k != "*" && !keys.contains(&k) => {
                return Err(format!("{field}.key: no gateway key named '{k}'"));
            }
            _ => {}
        }
        if let Some(g) = self.group.as_deref() {
            if g != "*" && !groups.contains(&g) {
                return Err(format!("{field}.group: no model group named '{g}'"));
            }
        }
        let kind = self.tokens.unwrap_or_default();
        let counts = [
            (
                "requests_per_second",
                self.requests_per_second,
                Metric::Requests,
                Window::Second,
            ),
            (
                "requests_per_minute",
                self.requests_per_minute,
                Metric::Requests,
                Window::Minute,
            ),
            (
                "requests_per_hour",
                self.requests_per_hour,
                Metric::Requests,
                Window::Hour,
            ),
            (
                "tokens_per_minute",
                self.tokens_per_minute,
                Metric::Tokens(kind),
                Window::Minute,
            ),
            (
                "tokens_per_hour",
                self.tokens_per_hour,
                Metric::Tokens(kind),
                Window::Hour,
            ),
            (
                "tokens_per_day",
                self.tokens_per_day,
                Metric::Tokens(kind),
                Window::Day,
            ),
        ];
        // In flight: counted in hours, so that a count a crashed VM never
        // released is forgotten when the hour ends.
        let in_flight = [(
            "max_in_flight",
            self.max_in_flight,
            Metric::InFlight,
            Window::Hour,
        )];
        let mut periods = Vec::new();
        for (name, spec, metric) in [
            ("requests_per", &self.requests_per, Metric::Requests),
            ("tokens_per", &self.tokens_per, Metric::Tokens(kind)),
        ] {
            if let Some(spec) = spec {
                let window = Window::parse_period(&spec.period)
                    .map_err(|e| format!("{field}.{name}.period: {e}"))?;
                if spec.amount.fract() != 0.0 || !(1.0..=1e15).contains(&spec.amount) {
                    return Err(format!("{field}.{name}.amount: a whole number, at least 1"));
                }
                periods.push((name, Some(spec.amount as u64), metric, window));
            }
        }
        let mut budgets = Vec::new();
        for (name, value, metric, window) in counts.into_iter().chain(in_flight).chain(periods) {
            match value {
                Some(0) => return Err(format!("{field}.{name}: must be at least 1")),
                Some(limit) => budgets.push(Budget {
                    metric,
                    window,
                    limit,
                    field: name,
                    alert_at: None,
                }),
                None => {}
            }
        }
        let usd_per = match &self.usd_per {
            Some(spec) => Some((
                Window::parse_period(&spec.period)
                    .map_err(|e| format!("{field}.usd_per.period: {e}"))?,
                spec.amount,
            )),
            None => None,
        };
        for (name, value, window) in [
            ("usd_per_day", self.usd_per_day, Window::Day),
            ("usd_per_month", self.usd_per_month, Window::Month),
        ]
        .into_iter()
        .chain(usd_per.map(|(window, usd)| ("usd_per", Some(usd), window)))
        {
            if let Some(usd) = value {
                if !usd.is_finite() || !(0.000_001..=1e9).contains(&usd) {
                    return Err(format!(
                        "{field}.{name}: must be between 0.000001 and 1e9 USD"
                    ));
                }
                let limit = (usd * 1e6).round() as u64;
                budgets.push(Budget {
                    metric: Metric::MicroUsd,
                    window,
                    limit,
                    field: name,
                    alert_at: None,
                });
            }
        }
        if self.tokens.is_some()
            && !budgets
                .iter()
                .any(|b| matches!(b.metric, Metric::Tokens(_)))
        {
            return Err(format!(
                "{field}.tokens: only token limits use it (tokens_per_minute, _hour, _day)"
            ));
        }
        if let Some(share) = self.alert_at {
            if !(share > 0.0 && share <= 1.0) {
                return Err(format!(
                    "{field}.alert_at: a share of the budget, above 0 and at most 1 (e.g. 0.8)"
                ));
            }
            if !budgets
                .iter()
                .any(|b| matches!(b.metric, Metric::Tokens(_) | Metric::MicroUsd))
            {
                return Err(format!(
                    "{field}.alert_at: only token and spend budgets have alerts"
                ));
            }
            for budget in &mut budgets {
                if matches!(budget.metric, Metric::Tokens(_) | Metric::MicroUsd) {
                    budget.alert_at = Some((budget.limit as f64 * share).ceil() as u64);
                }
            }
        }
        if budgets.is_empty() {
            return Err(format!(
                "{field}: no limit (set requests_per_minute, tokens_per_hour, usd_per_day, ...)"
            ));
        }
        self.budgets = budgets;
        Ok(())
    }

    fn multiplicity(&self, keys: usize, groups: usize) -> usize {
        let stands_for =
            |spec: &Option<String>, n: usize| if spec.as_deref() == Some("*") { n } else { 1 };
        stands_for(&self.key, keys) * stands_for(&self.group, groups) * self.budgets.len()
    }
}

/// Checks `limits.rate` against the gateway keys (`None`: auth is off) and
/// model groups, and fills in each rule's budgets.
pub fn validate(
    rules: &mut [RateLimit],
    keys: Option<&[&str]>,
    groups: &[&str],
) -> Result<(), String> {
    let mut seen: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut total = 0usize;
    for (i, rule) in rules.iter_mut().enumerate() {
        let field = format!("limits.rate[{i}]");
        rule.prepare(&field, keys, groups)?;
        for budget in &rule.budgets {
            let id = counter_id(budget, rule, "", "");
            if let Some((j, _)) = seen.iter().find(|(_, other)| *other == id) {
                return Err(format!(
                    "{field}.{}: limits.rate[{j}] already limits the same keys and groups",
                    budget.field
                ));
            }
            seen.push((i, id));
        }
        total =
            total.saturating_add(rule.multiplicity(keys.map_or(0, <[&str]>::len), groups.len()));
    }
    if total > MAX_COUNTERS {
        return Err(format!(
            "limits.rate: {total} counters (limits times the keys and groups \"*\" stands for); at most {MAX_COUNTERS}"
        ));
    }
    Ok(())
}

/// The shared-data key of a counter: what it counts and for whom, not the
/// limit's value, so a reload that keeps a limit (or changes its value)
/// keeps counting in the same counter. Names are length-prefixed.
fn counter_id(budget: &Budget, rule: &RateLimit, key: &str, group: &str) -> Vec<u8> {
    let spec = |tag: char, spec: &Option<String>, concrete: &str| match spec.as_deref() {
        None => format!("{tag}-"),
        Some("*") => format!("{tag}*{}:{concrete}", concrete.len()),
        Some(name) => format!("{tag}{}:{name}", name.len()),
    };
    format!(
        "llm.limit|{}|{}|{}|{}",
        budget.metric.id(),
        budget.window.name(),
        spec('k', &rule.key, key),
        spec('g', &rule.group, group)
    )
    .into_bytes()
}

/// One limit that holds for a request, with its counter.
#[derive(Debug, Clone, PartialEq)]
pub struct Counter {
    pub id: Vec<u8>,
    pub budget: Budget,
    pub scope: Scope,
}

/// The counters of the limits that hold for `key` (`None`: auth is off) on `group`.
pub fn counters(rules: &[RateLimit], key: Option<&str>, group: &str) -> Vec<Counter> {
    let mut out = Vec::new();
    for rule in rules.iter().filter(|r| r.applies(key, group)) {
        for budget in &rule.budgets {
            out.push(Counter {
                id: counter_id(budget, rule, key.unwrap_or_default(), group),
                budget: *budget,
                scope: rule.scope(),
            });
        }
    }
    out
}

/// Every counter a configuration can use, to create them when it loads.
pub fn every_counter(rules: &[RateLimit], keys: &[&str], groups: &[&str]) -> Vec<Vec<u8>> {
    let any_key: Vec<Option<&str>> = if keys.is_empty() {
        vec![None]
    } else {
        keys.iter().copied().map(Some).collect()
    };
    let mut ids = Vec::new();
    for &key in &any_key {
        for group in groups {
            for counter in counters(rules, key, group) {
                if !ids.contains(&counter.id) {
                    ids.push(counter.id);
                }
            }
        }
    }
    ids
}

/// What admission reserves against a request's token and spend budgets:
/// its worst case, settled to what it used when it ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reservation {
    pub input: u64,
    pub output: u64,
    pub micro_usd: u64,
}

/// What a request used, charged when it ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub micro_usd: u64,
}

fn tokens_of(kind: TokenKind, input: u64, output: u64) -> u64 {
    match kind {
        TokenKind::Total => input.saturating_add(output),
        TokenKind::Input => input,
        TokenKind::Output => output,
    }
}

/// The limit that refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// Index into the request's counters.
    pub counter: usize,
    pub used: u64,
    /// What the request asked for (1 request, or its reservation), when the message says it.
    pub requested: Option<u64>,
    pub reset_ms: u64,
}

/// What an admitted request holds in one counter until it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// Index into the request's counters.
    pub counter: usize,
    pub window_start: u64,
    pub amount: u64,
}

/// The admission decision for one request.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    pub refused: Option<Refusal>,
    pub headers: RateHeaders,
    /// Per counter: what remains in its window, once it was checked.
    pub remaining: Vec<Option<u64>>,
    /// What the request holds (reservations, its place in flight), to settle at its end.
    pub held: Vec<Held>,
}

/// How long a client refused for requests in flight is told to wait.
const IN_FLIGHT_RETRY_MS: u64 = 1000;

/// Admits a request or refuses it. Token and cost budgets get the
/// request's reservation (with `strict`, only if it fits; otherwise while
/// anything is left, so concurrent requests overshoot by at most one
/// reservation) and in-flight limits one place; then each request limit
/// counts the request in. A refusal takes back everything counted for it.
pub fn admit(
    store: &impl SharedStore,
    counters: &[Counter],
    now_ms: u64,
    reservation: Reservation,
    strict: bool,
) -> Verdict {
    let mut verdict = Verdict {
        remaining: vec![None; counters.len()],
        ..Verdict::default()
    };
    for (i, counter) in counters.iter().enumerate() {
        let budget = counter.budget;
        let (amount, cap) = match budget.metric {
            Metric::Requests => continue,
            Metric::InFlight => (1, Cap::Within(budget.limit)),
            Metric::Tokens(kind) => (
                tokens_of(kind, reservation.input, reservation.output),
                budget_cap(strict, budget.limit),
            ),
            Metric::MicroUsd => (reservation.micro_usd, budget_cap(strict, budget.limit)),
        };
        let (start, end) = budget.window.bounds(now_ms);
        let mut reset_ms = end - now_ms;
        if budget.metric == Metric::InFlight {
            reset_ms = IN_FLIGHT_RETRY_MS;
        }
        let outcome = if amount == 0 {
            // Nothing to reserve (an unpriced model): refused once spent.
            match store::used(store, &counter.id, start) {
                used if used >= budget.limit => Added::OverLimit(used),
                used => Added::Counted(used),
            }
        } else {
            store::add(store, &counter.id, start, amount, cap)
        };
        let remaining = match outcome {
            Added::Counted(used) => {
                if amount > 0 {
                    verdict.held.push(Held {
                        counter: i,
                        window_start: start,
                        amount,
                    });
                }
                Some(budget.limit.saturating_sub(used))
            }
            Added::OverLimit(used) => {
                let requested = match budget.metric {
                    Metric::InFlight => Some(1),
                    _ => strict.then_some(amount).filter(|&n| n > 0),
                };
                verdict.refused = Some(Refusal {
                    counter: i,
                    used,
                    requested,
                    reset_ms,
                });
                Some(budget.limit.saturating_sub(used))
            }
            // Not counted: the store failed or stayed contended. The request
            // is let through rather than refused for the gateway's own trouble.
            Added::Unavailable => None,
        };
        set(&mut verdict.remaining, i, remaining);
        if verdict.refused.is_some() {
            release(store, counters, &mut verdict);
            budget_headers(counters, now_ms, &mut verdict);
            return verdict;
        }
    }
    for (i, counter) in counters.iter().enumerate() {
        let budget = counter.budget;
        if budget.metric != Metric::Requests {
            continue;
        }
        let (start, end) = budget.window.bounds(now_ms);
        let reset_ms = end - now_ms;
        match store::add(store, &counter.id, start, 1, Cap::Within(budget.limit)) {
            Added::Counted(used) => {
                let remaining = budget.limit.saturating_sub(used);
                set(&mut verdict.remaining, i, Some(remaining));
                let snapshot = Snapshot {
                    limit: budget.limit,
                    remaining,
                    reset_ms,
                };
                verdict.headers.requests = RateHeaders::tighter(verdict.headers.requests, snapshot);
                verdict.held.push(Held {
                    counter: i,
                    window_start: start,
                    amount: 1,
                });
            }
            Added::OverLimit(used) => {
                set(&mut verdict.remaining, i, Some(0));
                let snapshot = Snapshot {
                    limit: budget.limit,
                    remaining: 0,
                    reset_ms,
                };
                verdict.headers.requests = RateHeaders::tighter(verdict.headers.requests, snapshot);
                verdict.refused = Some(Refusal {
                    counter: i,
                    used,
                    requested: Some(1),
                    reset_ms,
                });
                release(store, counters, &mut verdict);
                budget_headers(counters, now_ms, &mut verdict);
                return verdict;
            }
            // Not counted: the store failed or stayed contended. The request
            // is let through rather than refused for the gateway's own trouble.
            Added::Unavailable => {}
        }
    }
    budget_headers(counters, now_ms, &mut verdict);
    // Request counts are not settled: they stay counted.
    verdict.held.retain(|h| {
        counters
            .get(h.counter)
            .is_some_and(|c| c.budget.metric != Metric::Requests)
    });
    verdict
}

/// The token and spend headers: the tightest of each, as admission left them.
fn budget_headers(counters: &[Counter], now_ms: u64, verdict: &mut Verdict) {
    for (counter, remaining) in counters.iter().zip(&verdict.remaining) {
        let Some(remaining) = *remaining else {
            continue;
        };
        let budget = counter.budget;
        let snapshot = Snapshot {
            limit: budget.limit,
            remaining,
            reset_ms: budget.window.bounds(now_ms).1 - now_ms,
        };
        let slot = match budget.metric {
            Metric::Tokens(_) => &mut verdict.headers.tokens,
            Metric::MicroUsd => &mut verdict.headers.usd,
            Metric::Requests | Metric::InFlight => continue,
        };
        *slot = RateHeaders::tighter(*slot, snapshot);
    }
}

fn budget_cap(strict: bool, limit: u64) -> Cap {
    if strict {
        Cap::Within(limit)
    } else {
        Cap::WhileLeft(limit)
    }
}

/// Takes back what a refused request held (its reservations and counts).
fn release(store: &impl SharedStore, counters: &[Counter], verdict: &mut Verdict) {
    for held in std::mem::take(&mut verdict.held) {
        let Some(c) = counters.get(held.counter) else {
            continue;
        };
        store::undo(store, &c.id, held.window_start, held.amount);
        if let Some(r) = verdict.remaining.get_mut(held.counter) {
            *r = r.map(|n| n.saturating_add(held.amount).min(c.budget.limit));
        }
    }
}

fn set(remaining: &mut [Option<u64>], i: usize, value: Option<u64>) {
    if let Some(slot) = remaining.get_mut(i) {
        *slot = value;
    }
}

/// Settles a request that ended (answered, failed, cancelled or left):
/// each reservation is replaced by what was used, in the windows current
/// now, and its place in flight released; a budget it reserved nothing in
/// is charged. Returns (counter index, remaining) for the counters that moved.
pub fn settle(
    store: &impl SharedStore,
    counters: &[Counter],
    held: &[Held],
    now_ms: u64,
    usage: Usage,
) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    for (i, counter) in counters.iter().enumerate() {
        let budget = counter.budget;
        let held = held.iter().find(|h| h.counter == i);
        let amount = match budget.metric {
            Metric::Requests => continue,
            Metric::InFlight => {
                if let Some(h) = held {
                    store::undo(store, &counter.id, h.window_start, h.amount);
                }
                continue;
            }
            Metric::Tokens(kind) => tokens_of(kind, usage.input, usage.output),
            Metric::MicroUsd => usage.micro_usd,
        };
        let (start, _) = budget.window.bounds(now_ms);
        let added = match held {
            Some(h) => store::settle(store, &counter.id, h.window_start, h.amount, start, amount),
            None if amount > 0 => store::add(store, &counter.id, start, amount, Cap::None),
            None => continue,
        };
        if let Added::Counted(used) = added {
            out.push((i, budget.limit.saturating_sub(used)));
        }
    }
    out
}

/// Takes back the request that [`admit`] counted at `admitted_ms`, from
/// its request counters: another limit (the global rate limit service)
/// refused it after all.
pub fn refund(store: &impl SharedStore, counters: &[Counter], admitted_ms: u64) {
    for counter in counters {
        if counter.budget.metric == Metric::Requests {
            let (start, _) = counter.budget.window.bounds(admitted_ms);
            store::undo(store, &counter.id, start, 1);
        }
    }
}

/// The 429 for a refusal: OpenAI's wording and `type`, the limit named
/// (never another key: a key's limits are its own), `retry-after` from the window.
pub fn refusal_error(counter: &Counter, refusal: &Refusal, group: &str) -> GatewayError {
    let budget = counter.budget;
    let amount = |n: u64| match budget.metric {
        Metric::MicroUsd => format!("{:.2}", n as f64 / 1e6),
        _ => n.to_string(),
    };
    let requested = refusal
        .requested
        .map(|n| format!(", Requested {}", amount(n)))
        .unwrap_or_default();
    let wait = headers::go_duration(refusal.reset_ms);
    let per = match budget.metric {
        Metric::InFlight => String::new(),
        _ => format!(" per {}", budget.window.name()),
    };
    let message = format!(
        "Rate limit reached for {}{per} ({}): Limit {}, Used {}{requested}. Please try again in {wait}.",
        budget.metric.describe(),
        counter.scope.describe(group),
        amount(budget.limit),
        amount(refusal.used),
    );
    GatewayError {
        retry_after: Some(headers::retry_after_seconds(refusal.reset_ms)),
        error_type: budget.metric.error_type(),
        ..GatewayError::new(ErrorCode::RateLimited, message)
    }
}

#[cfg(test)]
mod tests;
