//! Usage, cost and the per-request record behind metrics and access logs.
//!
//! The upstream role writes an [`AttemptRecord`] for the attempt in flight
//! (into Envoy filter state: it must survive a client that disconnects before
//! the end); the edge role turns the last one into metrics and one access-log
//! line ([`RequestLog`]) when the request ends.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::response::Usage;
use crate::routing::{stable_hash, stable_hash_more};

/// USD per million tokens.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Cached input tokens; `input` when the vendor has no discount.
    #[serde(default)]
    pub cached_input: Option<f64>,
}

impl Price {
    pub fn validate(&self, field: &str) -> Result<(), String> {
        let all = [Some(self.input), Some(self.output), self.cached_input];
        if all.iter().flatten().any(|p| !p.is_finite() || *p < 0.0) {
            return Err(format!("{field}: prices must be finite and not negative"));
        }
        Ok(())
    }

    /// Cost of `usage` in USD. Cached tokens are part of prompt tokens.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_tokens.unwrap_or(0).min(usage.prompt_tokens);
        let uncached = usage.prompt_tokens - cached;
        (uncached as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + usage.completion_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// A provider's prices by vendor model; "*" for the rest.
pub fn price_for<'a>(prices: &'a BTreeMap<String, Price>, model: &str) -> Option<&'a Price> {
    prices.get(model).or_else(|| prices.get("*"))
}

/// What one attempt did, as far as it got.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AttemptRecord {
    pub provider: String,
    pub model: String,
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub stream: bool,
    /// Usage as the vendor reported it (None: not reported, or not yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Completion tokens sent to the client (estimated from the text).
    pub delivered_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Envoy ended the attempt before its answer did (a per-try timeout, a
    /// refused or broken connection, the client leaving); `status` is what
    /// the vendor had answered by then (0: nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
    /// When the attempt started (Unix ms) and how long it took to its
    /// answer's end or its reset: recorded only for the diagnostics view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// What context fitting did to its request (`x-llm-context`'s value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

impl AttemptRecord {
    /// How the attempt ended, as the route and the attempts metric name it:
    /// its status, or `reset`.
    pub fn outcome(&self) -> String {
        if self.reset {
            "reset".to_owned()
        } else {
            self.status.to_string()
        }
    }

    pub fn set_usage(&mut self, usage: &Usage) {
        self.prompt_tokens = Some(usage.prompt_tokens);
        self.completion_tokens = Some(usage.completion_tokens);
        self.cached_tokens = usage.cached_tokens;
        self.reasoning_tokens = usage.reasoning_tokens;
        self.cache_write_tokens = usage.cache_write_tokens;
    }

    /// The vendor's usage, or an estimate (`true`) from the prompt estimate
    /// and what was delivered when the vendor reported none.
    pub fn usage_or_estimate(&self, estimated_prompt_tokens: u64) -> (Usage, bool) {
        match (self.prompt_tokens, self.completion_tokens) {
            (Some(prompt_tokens), Some(completion_tokens)) => (
                Usage {
                    prompt_tokens,
                    // An answer cut short (a vendor error mid-stream) may
                    // report less than it had delivered.
                    completion_tokens: if self.code.is_some() {
                        completion_tokens.max(self.delivered_tokens)
                    } else {
                        completion_tokens
                    },
                    cached_tokens: self.cached_tokens,
                    reasoning_tokens: self.reasoning_tokens,
                    cache_write_tokens: self.cache_write_tokens,
                },
                false,
            ),
            _ => (
                Usage {
                    prompt_tokens: estimated_prompt_tokens,
                    completion_tokens: self.delivered_tokens,
                    ..Usage::default()
                },
                true,
            ),
        }
    }

    pub fn content_filtered(&self) -> bool {
        self.code.as_deref() == Some("CONTENT_FILTERED")
            || self.finish_reason.as_deref() == Some("content_filter")
    }
}

/// One attempt's part of a request's bill: what the vendor it reached
/// reported (or what we estimate), and its cost at that vendor's prices.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AttemptBill {
    pub provider: String,
    pub model: String,
    pub status: u16,
    #[serde(flatten)]
    pub counts: TokenCounts,
}

/// Tokens and cost as the access log shows them (a request's and each attempt's).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TokenCounts {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub reasoning_tokens: u64,
    pub usage_estimated: bool,
    pub cost_usd: Option<f64>,
}

impl TokenCounts {
    pub fn new(usage: &Usage, usage_estimated: bool, cost_usd: Option<f64>) -> Self {
        Self {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage.cached_tokens.unwrap_or(0),
            reasoning_tokens: usage.reasoning_tokens.unwrap_or(0),
            usage_estimated,
            cost_usd,
        }
    }
}

/// The attempts a vendor would bill, and the request's totals.
#[derive(Debug, Default, PartialEq)]
pub struct Bill {
    pub attempts: Vec<AttemptBill>,
    pub usage: Usage,
    /// Some attempt's usage is an estimate.
    pub usage_estimated: bool,
    /// The sum over priced attempts (`None` when none is priced).
    pub cost_usd: Option<f64>,
}

impl Bill {
    /// Every attempt that got an answer from a vendor counts: the last one
    /// (usage as reported, else estimated), and an earlier one that the
    /// vendor reported usage for or had started streaming (a stream that
    /// failed after content; estimated from what it delivered). Errors
    /// without usage (429, 5xx) are not billed by vendors, nor here.
    pub fn of<'p>(
        records: &[AttemptRecord],
        estimated_prompt_tokens: u64,
        price: impl Fn(&AttemptRecord) -> Option<&'p Price>,
    ) -> Bill {
        let mut bill = Bill::default();
        let last = records.len().saturating_sub(1);
        for (i, record) in records.iter().enumerate() {
            let reported = record.prompt_tokens.is_some() && record.completion_tokens.is_some();
            // An attempt no vendor answered (reset before its headers) is not billed.
            let billed = !record.provider.is_empty()
                && record.status != 0
                && (i == last || reported || record.delivered_tokens > 0);
            if !billed {
                continue;
            }
            let (usage, estimated) = record.usage_or_estimate(estimated_prompt_tokens);
            let cost = price(record).map(|p| p.cost(&usage));
            bill.usage = bill.usage.plus(&usage);
            bill.usage_estimated |= estimated;
            if let Some(cost) = cost {
                *bill.cost_usd.get_or_insert(0.0) += cost;
            }
            bill.attempts.push(AttemptBill {
                provider: record.provider.clone(),
                model: record.model.clone(),
                status: record.status,
                counts: TokenCounts::new(&usage, estimated, cost),
            });
        }
        bill
    }

    /// A request handed to a vendor that left no answer (the client gave up
    /// first, and Envoy reset the attempt): the vendor read the prompt, so
    /// it is billed, estimated, to the provider the request was sent to.
    pub fn charge_unanswered(
        &mut self,
        provider: &str,
        model: &str,
        estimated_prompt_tokens: u64,
        price: Option<&Price>,
    ) {
        let usage = Usage {
            prompt_tokens: estimated_prompt_tokens,
            ..Usage::default()
        };
        let cost = price.map(|p| p.cost(&usage));
        self.usage = self.usage.plus(&usage);
        self.usage_estimated = true;
        if let Some(cost) = cost {
            *self.cost_usd.get_or_insert(0.0) += cost;
        }
        self.attempts.push(AttemptBill {
            provider: provider.to_owned(),
            model: model.to_owned(),
            status: 0,
            counts: TokenCounts::new(&usage, true, cost),
        });
    }
}

/// The access-log line for one request.
#[derive(Debug, Serialize)]
pub struct RequestLog<'a> {
    pub request_id: &'a str,
    /// The client's API (`model::Api::name`).
    pub surface: &'a str,
    /// What it asked for (`chat`, `embeddings`, `count_tokens`...).
    pub operation: &'a str,
    pub key: &'a str,
    pub group: &'a str,
    pub status: u16,
    pub code: Option<&'a str>,
    pub attempts: u64,
    /// Provider/model of every attempt, in order.
    pub route: Vec<&'a str>,
    pub provider: &'a str,
    pub model: &'a str,
    pub stream: bool,
    /// The request's totals.
    #[serde(flatten)]
    pub counts: TokenCounts,
    /// Every billed attempt's usage and cost (the totals above sum them).
    pub attempt_usage: &'a [AttemptBill],
    pub ttft_ms: Option<u64>,
    pub duration_ms: u64,
    /// Completion tokens the client was sent; below `completion_tokens` when
    /// the client left before the end.
    pub delivered_tokens: u64,
    pub client_disconnected: bool,
    /// The gateway limit that refused the request (`limits.rate`), as
    /// `<scope>.<field>`, e.g. `key_group.requests_per_minute`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<&'a str>,
    /// The budgets past their `alert_at` once this request was settled.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub budget_alerts: &'a [String],
    /// What the response cache did, on a cached group: `hit`,
    /// `semantic-hit`, `miss` or `bypass` (`crate::cache::Status`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<&'a str>,
    /// A hit: what its answer cost when a vendor made it (USD, its stored
    /// usage at today's price), which this request did not spend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_saved_usd: Option<f64>,
    /// What context fitting did to the answered attempt's request
    /// (`x-llm-context`'s value), on a group with a fitting policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<&'a str>,
}

/// A metric name carrying its labels, for Envoy `stats_tags` to extract:
/// `base;name=value;name=value`. Values lose `;` and `=` (the separators)
/// and are cut at 64 bytes, so no label can break the name apart.
pub fn metric_name(base: &str, labels: &[(&str, &str)]) -> String {
    let mut name = String::with_capacity(base.len() + labels.len() * 24);
    name.push_str(base);
    for (label, value) in labels {
        name.push(';');
        name.push_str(label);
        name.push('=');
        let value = if value.is_empty() { "none" } else { value };
        for c in value.chars().take(64) {
            name.push(
                if c == ';' || c == '=' || c.is_whitespace() || c.is_control() {
                    '_'
                } else {
                    c
                },
            );
        }
    }
    name
}

/// What a metric is made of: a kind tag, the base name and the raw labels.
/// Hashed to find a cached metric id without building the metric's name on
/// every request; kept flattened (length-prefixed, so no two lists of parts
/// flatten alike) to tell a hash collision from a hit.
pub struct MetricParts<'a> {
    kind: [u8; 1],
    base: &'a str,
    labels: &'a [(&'a str, &'a str)],
}

impl<'a> MetricParts<'a> {
    pub fn new(kind: u8, base: &'a str, labels: &'a [(&'a str, &'a str)]) -> Self {
        Self {
            kind: [kind],
            base,
            labels,
        }
    }

    fn parts(&self) -> impl Iterator<Item = &[u8]> {
        [&self.kind[..], self.base.as_bytes()].into_iter().chain(
            self.labels
                .iter()
                .flat_map(|(l, v)| [l.as_bytes(), v.as_bytes()]),
        )
    }

    /// The routing's FNV-1a over the length-prefixed parts.
    pub fn hash(&self) -> u64 {
        self.parts().fold(stable_hash(&[]), |h, part| {
            let h = stable_hash_more(h, &(part.len() as u32).to_le_bytes());
            stable_hash_more(h, part)
        })
    }

    pub fn flatten(&self) -> Vec<u8> {
        let mut flat = Vec::new();
        for part in self.parts() {
            flat.extend_from_slice(&(part.len() as u32).to_le_bytes());
            flat.extend_from_slice(part);
        }
        flat
    }

    /// Whether `flat` is what [`Self::flatten`] returns, without building it.
    pub fn matches(&self, flat: &[u8]) -> bool {
        let mut rest = flat;
        for part in self.parts() {
            let len = (part.len() as u32).to_le_bytes();
            match rest
                .strip_prefix(&len[..])
                .and_then(|r| r.strip_prefix(part))
            {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_attempt_a_vendor_answered_is_billed() {
        let price = Price {
            input: 1.0,
            output: 2.0,
            cached_input: None,
        };
        let attempt = |provider: &str, status: u16| AttemptRecord {
            provider: provider.into(),
            model: "m".into(),
            status,
            ..AttemptRecord::default()
        };
        // A 529 with nothing billed, a stream that failed after content
        // (estimated from what it delivered), and the answer (reported).
        let refused = attempt("a", 503);
        let cut = AttemptRecord {
            delivered_tokens: 7,
            ..attempt("b", 200)
        };
        let mut answered = attempt("c", 200);
        answered.set_usage(&Usage {
            prompt_tokens: 10,
            completion_tokens: 20,
            cached_tokens: Some(4),
            reasoning_tokens: None,
            cache_write_tokens: None,
        });
        let records = [refused, cut, answered];
        let bill = Bill::of(&records, 5, |r| (r.provider != "b").then_some(&price));
        let billed: Vec<(&str, u64, u64, bool)> = bill
            .attempts
            .iter()
            .map(|a| {
                (
                    a.provider.as_str(),
                    a.counts.prompt_tokens,
                    a.counts.completion_tokens,
                    a.counts.usage_estimated,
                )
            })
            .collect();
        assert_eq!(billed, [("b", 5, 7, true), ("c", 10, 20, false)]);
        assert_eq!(
            (bill.usage.prompt_tokens, bill.usage.completion_tokens),
            (15, 27)
        );
        assert_eq!(bill.usage.cached_tokens, Some(4));
        assert!(bill.usage_estimated);
        assert_eq!(bill.attempts[0].counts.cost_usd, None, "b has no price");
        let c = (6.0 * 1.0 + 4.0 * 1.0 + 20.0 * 2.0) / 1e6;
        assert_eq!(bill.cost_usd, Some(c));
        // Nothing reached a vendor: nothing billed.
        let none = Bill::of(&[AttemptRecord::default()], 5, |_| Some(&price));
        assert_eq!(none, Bill::default());
    }

    #[test]
    fn metric_parts_tell_metrics_apart() {
        let a = [("provider", "ab"), ("model", "c")];
        let b = [("provider", "a"), ("model", "bc")];
        let (pa, pb) = (
            MetricParts::new(b'c', "x", &a),
            MetricParts::new(b'c', "x", &b),
        );
        assert!(pa.matches(&pa.flatten()));
        assert!(!pa.matches(&pb.flatten()) && !pb.matches(&pa.flatten()));
        assert_ne!(pa.hash(), pb.hash());
        let histogram = MetricParts::new(b'h', "x", &a);
        assert!(!histogram.matches(&pa.flatten()));
        assert_ne!(histogram.hash(), pa.hash());
        assert!(!pa.matches(&MetricParts::new(b'c', "x", &a[..1]).flatten()));
        assert_eq!(pa.hash(), MetricParts::new(b'c', "x", &a).hash());
    }

    #[test]
    fn cost_arithmetic() {
        let price = Price {
            input: 3.0,
            output: 15.0,
            cached_input: Some(0.3),
        };
        let usage = Usage {
            prompt_tokens: 1_000_000,
            completion_tokens: 100_000,
            cached_tokens: Some(400_000),
            reasoning_tokens: None,
            cache_write_tokens: None,
        };
        // 600k * 3 + 400k * 0.3 + 100k * 15, per million
        let cost = price.cost(&usage);
        assert!((cost - (1.8 + 0.12 + 1.5)).abs() < 1e-9, "{cost}");
        let no_discount = Price {
            cached_input: None,
            ..price
        };
        assert!((no_discount.cost(&usage) - (3.0 + 1.5)).abs() < 1e-9);
        assert!(Price {
            input: -1.0,
            output: 1.0,
            cached_input: None
        }
        .validate("p")
        .is_err());
    }

    #[test]
    fn prices_by_model_with_fallback() {
        let mut prices = BTreeMap::new();
        prices.insert(
            "a".to_string(),
            Price {
                input: 1.0,
                output: 2.0,
                cached_input: None,
            },
        );
        prices.insert(
            "*".to_string(),
            Price {
                input: 5.0,
                output: 6.0,
                cached_input: None,
            },
        );
        assert_eq!(price_for(&prices, "a").map(|p| p.input), Some(1.0));
        assert_eq!(price_for(&prices, "b").map(|p| p.input), Some(5.0));
        assert!(price_for(&BTreeMap::new(), "a").is_none());
    }

    #[test]
    fn estimates_when_the_vendor_reports_nothing() {
        let mut r = AttemptRecord {
            delivered_tokens: 7,
            ..AttemptRecord::default()
        };
        assert_eq!(
            r.usage_or_estimate(40),
            (
                Usage {
                    prompt_tokens: 40,
                    completion_tokens: 7,
                    ..Usage::default()
                },
                true
            )
        );
        r.set_usage(&Usage {
            prompt_tokens: 10,
            completion_tokens: 20,
            cached_tokens: Some(2),
            reasoning_tokens: None,
            cache_write_tokens: None,
        });
        assert_eq!(r.usage_or_estimate(40).0.completion_tokens, 20);
        assert!(!r.usage_or_estimate(40).1);
    }

    #[test]
    fn records_round_trip() {
        let r = AttemptRecord {
            provider: "p".into(),
            status: 200,
            ttft_ms: Some(5),
            ..AttemptRecord::default()
        };
        let back: AttemptRecord = serde_json::from_slice(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn metric_names_keep_labels_apart() {
        assert_eq!(
            metric_name(
                "llm.requests",
                &[
                    ("provider", "open;ai"),
                    ("model", "gpt-4.1 = x"),
                    ("code", "")
                ]
            ),
            "llm.requests;provider=open_ai;model=gpt-4.1___x;code=none"
        );
        assert_eq!(
            metric_name("m", &[("k", &"x".repeat(100))]).len(),
            "m;k=".len() + 64
        );
    }
}
