//! Usage, cost and the per-request record behind metrics and access logs.
//!
//! The upstream role writes an [`AttemptRecord`] for the attempt in flight
//! (into Envoy filter state: it must survive a client that disconnects before
//! the end); the edge role turns the last one into metrics and one access-log
//! line ([`RequestLog`]) when the request ends.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::response::Usage;
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
    /// Completion tokens sent to the client (estimated from the text).
    pub delivered_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

impl AttemptRecord {
    pub fn set_usage(&mut self, usage: &Usage) {
        self.prompt_tokens = Some(usage.prompt_tokens);
        self.completion_tokens = Some(usage.completion_tokens);
        self.cached_tokens = usage.cached_tokens;
        self.reasoning_tokens = usage.reasoning_tokens;
    }

    /// The vendor's usage, or an estimate (`true`) from the prompt estimate
    /// and what was delivered when the vendor reported none.
    pub fn usage_or_estimate(&self, estimated_prompt_tokens: u64) -> (Usage, bool) {
        match (self.prompt_tokens, self.completion_tokens) {
            (Some(prompt_tokens), Some(completion_tokens)) => (
                Usage {
                    prompt_tokens,
                    completion_tokens,
                    cached_tokens: self.cached_tokens,
                    reasoning_tokens: self.reasoning_tokens,
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

/// The access-log line for one request.
#[derive(Debug, Serialize)]
pub struct RequestLog<'a> {
    pub request_id: &'a str,
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
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub reasoning_tokens: u64,
    pub usage_estimated: bool,
    pub cost_usd: Option<f64>,
    pub ttft_ms: Option<u64>,
    pub duration_ms: u64,
    /// Completion tokens the client was sent; below `completion_tokens` when
    /// the client left before the end.
    pub delivered_tokens: u64,
    pub client_disconnected: bool,
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
