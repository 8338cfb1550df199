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

mod admit;
pub mod headers;
pub mod store;
pub mod window;

pub use admit::*;

use serde::Deserialize;

use crate::error::{ErrorCode, ErrorType, GatewayError};
use crate::shared_state::cas::SharedStore;
use headers::{RateHeaders, Snapshot};
use store::{Added, Cap};
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

#[cfg(test)]
mod tests;
