//! Context fitting: a request fitted to the window of the vendor model of
//! the attempt that carries it, by a model group's ordered strategies
//! (`fitting` in the group's configuration):
//! - `route`: the edge's candidate filter (a candidate whose window the
//!   request does not fit is skipped; with a strategy after it that can
//!   shrink the request, a group none of whose candidates fits still
//!   routes, and its attempt fits);
//! - `trim`: the oldest turns dropped ([`trim`]);
//! - `reject`: the gateway's `context_length_exceeded`, in the client
//!   API's own error shape, no vendor called.
//!
//! Per attempt (the upstream role, on the neutral request before it is
//! encoded): the same request may go whole to a 200K model and trimmed to
//! a 32K fallback after a failover. A request fits when its estimate
//! (`model::estimate`, about 4 bytes of ASCII per token) plus the policy's
//! safety margin plus its output limit is within the window.

use serde::Deserialize;

use crate::error::{ErrorCode, GatewayError};
use crate::model::estimate;
use crate::model::request::ChatRequest;

#[cfg(test)]
mod tests;
pub mod trim;

/// What the answer says of the fitting (`trimmed=4; tokens=31020/32768`).
pub const HEADER: &str = "x-llm-context";

/// One step of a fitting policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Route,
    Trim,
    Reject,
}

/// A model group's fitting policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub strategies: Vec<Strategy>,
    /// Percent added to the prompt estimate before it is compared with the
    /// window (the estimate is not the vendor's tokenizer).
    pub safety_margin_percent: u32,
}

pub const DEFAULT_MARGIN_PERCENT: u32 = 10;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    strategies: Vec<String>,
    #[serde(default = "default_margin")]
    safety_margin_percent: u32,
}

fn default_margin() -> u32 {
    DEFAULT_MARGIN_PERCENT
}

impl Policy {
    fn from_raw(raw: RawPolicy) -> Result<Self, String> {
        if raw.strategies.is_empty() {
            return Err("fitting.strategies: name at least one of route, trim, reject".into());
        }
        if raw.safety_margin_percent > 100 {
            return Err("fitting.safety_margin_percent: at most 100".into());
        }
        let mut strategies = Vec::with_capacity(raw.strategies.len());
        for (i, name) in raw.strategies.iter().enumerate() {
            let strategy = match name.as_str() {
                "route" => Strategy::Route,
                "trim" => Strategy::Trim,
                "reject" => Strategy::Reject,
                "compress" => {
                    return Err(format!(
                        "fitting.strategies[{i}]: compress (summaries through a group of the gateway's own) is not available yet"
                    ))
                }
                other => {
                    return Err(format!(
                        "fitting.strategies[{i}]: unknown strategy '{}' (route, trim, reject)",
                        other.escape_debug()
                    ))
                }
            };
            if strategies.contains(&strategy) {
                return Err(format!("fitting.strategies[{i}]: '{name}' is named twice"));
            }
            if strategies.contains(&Strategy::Reject) {
                return Err(format!(
                    "fitting.strategies[{i}]: nothing comes after reject"
                ));
            }
            strategies.push(strategy);
        }
        Ok(Policy {
            strategies,
            safety_margin_percent: raw.safety_margin_percent,
        })
    }

    fn has(&self, strategy: Strategy) -> bool {
        self.strategies.contains(&strategy)
    }

    /// The estimate with the safety margin (rounded up).
    pub fn with_margin(&self, tokens: u64) -> u64 {
        tokens + (tokens * u64::from(self.safety_margin_percent)).div_ceil(100)
    }
}

impl<'de> Deserialize<'de> for Policy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Policy::from_raw(RawPolicy::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// The edge skips candidates whose window the request does not fit
/// (`route`).
pub fn routes(policy: Option<&Policy>) -> bool {
    policy.is_none_or(|p| p.has(Strategy::Route))
}

/// When no candidate's window fits, the group still routes: a later
/// strategy shrinks the request (`trim`).
pub fn shrinks(policy: Option<&Policy>) -> bool {
    policy.is_some_and(|p| p.has(Strategy::Trim))
}

/// What fitting did to one attempt's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It fit as it came.
    Whole,
    /// Turns were dropped until it fit.
    Trimmed,
    /// It does not fit and the policy has no `reject`: sent as fitted as
    /// it could be (the vendor answers).
    Unfit,
    /// Refused, no vendor called.
    Rejected,
    /// The model's window is not known: sent as it came.
    Unknown,
}

impl Outcome {
    /// Its name in the metric's label and the access log.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Whole => "whole",
            Outcome::Trimmed => "trimmed",
            Outcome::Unfit => "unfit",
            Outcome::Rejected => "rejected",
            Outcome::Unknown => "unknown",
        }
    }
}

/// The fitting of one attempt, as the answer reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    pub outcome: Outcome,
    /// Messages dropped.
    pub trimmed: usize,
    /// The prompt estimate of what was sent (without the margin).
    pub tokens: u64,
    pub window: Option<u64>,
}

impl Report {
    /// The `x-llm-context` value: `trimmed=4; tokens=31020/32768`.
    pub fn header(&self) -> String {
        let mut out = String::with_capacity(40);
        if self.trimmed > 0 {
            out.push_str(&format!("trimmed={}; ", self.trimmed));
        }
        match self.window {
            Some(window) => out.push_str(&format!("tokens={}/{window}", self.tokens)),
            None => out.push_str(&format!("tokens={}", self.tokens)),
        }
        if matches!(self.outcome, Outcome::Unfit) {
            out.push_str("; unfit");
        }
        out
    }
}

/// A request fitted for one attempt.
#[derive(Debug)]
pub struct Fitted {
    /// The request to send instead, when fitting changed it.
    pub request: Option<ChatRequest>,
    pub report: Report,
}

/// Fits `request` to vendor model `model`'s `window` by `policy`: the
/// request to send, or (`reject`) the client's error with the report.
pub fn fit(
    policy: &Policy,
    request: &ChatRequest,
    model: &str,
    window: Option<u64>,
) -> Result<Fitted, Box<(GatewayError, Report)>> {
    let estimate = estimate::prompt_tokens(request);
    let mut report = Report {
        outcome: Outcome::Whole,
        trimmed: 0,
        tokens: estimate,
        window,
    };
    let Some(window) = window else {
        report.outcome = Outcome::Unknown;
        return Ok(Fitted {
            request: None,
            report,
        });
    };
    let output = request.max_output_tokens().map_or(0, u64::from);
    let fits = |tokens: u64| policy.with_margin(tokens) + output <= window;
    if fits(estimate) {
        return Ok(Fitted {
            request: None,
            report,
        });
    }
    let mut fitted = None;
    for strategy in &policy.strategies {
        match strategy {
            // The edge's.
            Strategy::Route => {}
            // A request the neutral model cannot carry whole (what only the
            // client API's own vendors take) is not re-encoded: not trimmed.
            Strategy::Trim if request.native_only.is_some() => {}
            Strategy::Trim => {
                if let Some(trimmed) = trim::trim(&request.messages, estimate, fits) {
                    report.trimmed = trimmed.dropped;
                    report.tokens = trimmed.tokens;
                    let mut copy = request.clone();
                    copy.messages = trimmed.messages.into();
                    fitted = Some(copy);
                }
                if fits(report.tokens) {
                    report.outcome = Outcome::Trimmed;
                    return Ok(Fitted {
                        request: fitted,
                        report,
                    });
                }
            }
            Strategy::Reject => {
                report.outcome = Outcome::Rejected;
                let trimmed = match report.trimmed {
                    0 => String::new(),
                    n => format!(" after dropping its {n} oldest messages"),
                };
                let error = GatewayError::new(
                    ErrorCode::ContextLengthExceeded,
                    format!(
                        "the request needs about {} tokens{trimmed} (prompt estimate with a {}% margin, plus {output} output tokens), more than model '{}' accepts ({window})",
                        policy.with_margin(report.tokens) + output,
                        policy.safety_margin_percent,
                        model.escape_debug()
                    ),
                );
                return Err(Box::new((error, report)));
            }
        }
    }
    report.outcome = Outcome::Unfit;
    Ok(Fitted {
        request: fitted,
        report,
    })
}
