//! Rate limits, token limits and spend budgets per gateway key and model
//! group (`limits.rate` in the configuration), enforced on one proxy with
//! counters every worker shares ([`store`]), in fixed windows ([`window`]).
//!
//! Requests are counted when they are admitted, before routing; tokens and
//! cost when the response ends. A request is refused when a request limit
//! would go over, or a token or cost budget is spent (or, with
//! `refuse_on_estimate`, would be by the request's own estimate).

pub mod headers;
pub mod store;
pub mod window;

use serde::Deserialize;

use crate::error::{ErrorCode, ErrorType, GatewayError};
use headers::{RateHeaders, Snapshot};
use store::{Added, SharedStore};
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
    /// The limits above, checked, in this order.
    #[serde(skip)]
    pub budgets: Vec<Budget>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Requests,
    Tokens(TokenKind),
    /// Cost in millionths of a USD, at the providers' `prices`.
    MicroUsd,
}

impl Metric {
    fn id(self) -> &'static str {
        match self {
            Self::Requests => "requests",
            Self::Tokens(TokenKind::Total) => "tokens.total",
            Self::Tokens(TokenKind::Input) => "tokens.input",
            Self::Tokens(TokenKind::Output) => "tokens.output",
            Self::MicroUsd => "usd",
        }
    }

    /// OpenAI's error `type` for this limit, when not `requests` (the code's own).
    fn error_type(self) -> Option<ErrorType> {
        match self {
            Self::Requests => None,
            Self::Tokens(_) => Some(ErrorType::Tokens),
            Self::MicroUsd => Some(ErrorType::InsufficientQuota),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Requests => "requests",
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
        let mut budgets = Vec::new();
        for (name, value, metric, window) in counts {
            match value {
                Some(0) => return Err(format!("{field}.{name}: must be at least 1")),
                Some(limit) => budgets.push(Budget {
                    metric,
                    window,
                    limit,
                    field: name,
                }),
                None => {}
            }
        }
        for (name, value, window) in [
            ("usd_per_day", self.usd_per_day, Window::Day),
            ("usd_per_month", self.usd_per_month, Window::Month),
        ] {
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

/// What a request is expected to use, for `refuse_on_estimate`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Estimate {
    pub input: u64,
    pub output: u64,
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
    /// What the request asked for (1 request, or its token estimate).
    pub requested: Option<u64>,
    pub reset_ms: u64,
}

/// The admission decision for one request.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    pub refused: Option<Refusal>,
    pub headers: RateHeaders,
    /// Per counter: what remains in its window, once it was checked.
    pub remaining: Vec<Option<u64>>,
}

/// Admits a request or refuses it. Token and cost budgets are read first
/// (one read each; nothing is counted for a refused request); then each
/// request limit counts the request in, and a refusal by a later one takes
/// back what the earlier ones counted.
pub fn admit(
    store: &impl SharedStore,
    counters: &[Counter],
    now_ms: u64,
    estimate: Option<Estimate>,
) -> Verdict {
    let mut verdict = Verdict {
        remaining: vec![None; counters.len()],
        ..Verdict::default()
    };
    for (i, counter) in counters.iter().enumerate() {
        let budget = counter.budget;
        if budget.metric == Metric::Requests {
            continue;
        }
        let (start, end) = budget.window.bounds(now_ms);
        let used = store::used(store, &counter.id, start);
        let expected = match (budget.metric, estimate) {
            (Metric::Tokens(kind), Some(e)) => tokens_of(kind, e.input, e.output),
            _ => 0,
        };
        let remaining = budget.limit.saturating_sub(used);
        set(&mut verdict.remaining, i, Some(remaining));
        let snapshot = Snapshot {
            limit: budget.limit,
            remaining,
            reset_ms: end - now_ms,
        };
        if matches!(budget.metric, Metric::Tokens(_)) {
            verdict.headers.tokens = RateHeaders::tighter(verdict.headers.tokens, snapshot);
        }
        let over =
            used >= budget.limit || (expected > 0 && used.saturating_add(expected) > budget.limit);
        if over && verdict.refused.is_none() {
            verdict.refused = Some(Refusal {
                counter: i,
                used,
                requested: (expected > 0).then_some(expected),
                reset_ms: end - now_ms,
            });
        }
    }
    if verdict.refused.is_some() {
        return verdict;
    }
    let mut counted: Vec<(usize, u64)> = Vec::new();
    for (i, counter) in counters.iter().enumerate() {
        let budget = counter.budget;
        if budget.metric != Metric::Requests {
            continue;
        }
        let (start, end) = budget.window.bounds(now_ms);
        let reset_ms = end - now_ms;
        match store::add(store, &counter.id, start, 1, Some(budget.limit)) {
            Added::Counted(used) => {
                let remaining = budget.limit.saturating_sub(used);
                set(&mut verdict.remaining, i, Some(remaining));
                let snapshot = Snapshot {
                    limit: budget.limit,
                    remaining,
                    reset_ms,
                };
                verdict.headers.requests = RateHeaders::tighter(verdict.headers.requests, snapshot);
                counted.push((i, start));
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
                for &(j, start) in &counted {
                    if let Some(c) = counters.get(j) {
                        store::undo(store, &c.id, start, 1);
                    }
                    if let Some(r) = verdict.remaining.get_mut(j) {
                        *r = r.map(|n| n.saturating_add(1));
                    }
                }
                return verdict;
            }
            // Not counted: the store failed or stayed contended. The request
            // is let through rather than refused for the gateway's own trouble.
            Added::Unavailable => {}
        }
    }
    verdict
}

fn set(remaining: &mut [Option<u64>], i: usize, value: Option<u64>) {
    if let Some(slot) = remaining.get_mut(i) {
        *slot = value;
    }
}

/// Charges a finished request's tokens and cost to its token and cost
/// counters, in the windows current now; returns (counter index, remaining).
pub fn charge(
    store: &impl SharedStore,
    counters: &[Counter],
    now_ms: u64,
    usage: Usage,
) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    for (i, counter) in counters.iter().enumerate() {
        let budget = counter.budget;
        let amount = match budget.metric {
            Metric::Requests => continue,
            Metric::Tokens(kind) => tokens_of(kind, usage.input, usage.output),
            Metric::MicroUsd => usage.micro_usd,
        };
        if amount == 0 {
            continue;
        }
        let (start, _) = budget.window.bounds(now_ms);
        if let Added::Counted(used) = store::add(store, &counter.id, start, amount, None) {
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
    let message = format!(
        "Rate limit reached for {} per {} ({}): Limit {}, Used {}{requested}. Please try again in {wait}.",
        budget.metric.describe(),
        budget.window.name(),
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
