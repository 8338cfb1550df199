//! Context fitting: a request fitted to the window of the vendor model of
//! the attempt that carries it, by a model group's ordered strategies
//! (`fitting` in the group's configuration):
//! - `route`: the edge's candidate filter (a candidate whose window the
//!   request does not fit is skipped; with a strategy after it that can
//!   shrink the request, a group none of whose candidates fits still
//!   routes, and its attempt fits);
//! - `compress`: old blocks replaced by their summaries ([`compress`]),
//!   made once per request by the edge through a summariser group of the
//!   gateway's own ([`Summariser`]);
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

pub mod compress;
#[cfg(test)]
mod tests;
pub mod trim;

use compress::Summary;

/// What the answer says of the fitting (`trimmed=4; tokens=31020/32768`).
pub const HEADER: &str = "x-llm-context";

/// One step of a fitting policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Route,
    Compress,
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
    /// Who summarises old blocks (`compress`).
    pub summariser: Option<Summariser>,
}

pub const DEFAULT_MARGIN_PERCENT: u32 = 10;

/// The summariser of a policy with `compress`: a model group of the
/// gateway's own, called by the edge through `self_calls` with the
/// caller's credential, and what it is given.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summariser {
    /// The model group that summarises (not the group itself).
    pub group: String,
    /// The `model` its request names (default: the group's name).
    #[serde(default)]
    pub model: Option<String>,
    /// A text shorter than this (bytes) is not summarised.
    #[serde(default = "default_min_block_bytes")]
    pub min_block_bytes: usize,
    /// What of a block is sent to the summariser (bytes; the rest is cut).
    #[serde(default = "default_max_block_bytes")]
    pub max_block_bytes: usize,
    /// Blocks summarised per request, at most (oldest first).
    #[serde(default = "default_max_blocks")]
    pub max_blocks: usize,
    /// The summary's output limit (`max_tokens`).
    #[serde(default = "default_max_summary_tokens")]
    pub max_summary_tokens: u32,
    /// How long the request waits for its summaries, in milliseconds.
    #[serde(default = "default_summary_timeout")]
    pub timeout_ms: u32,
}

fn default_min_block_bytes() -> usize {
    2048
}
fn default_max_block_bytes() -> usize {
    32 << 10
}
fn default_max_blocks() -> usize {
    4
}
fn default_max_summary_tokens() -> u32 {
    256
}
fn default_summary_timeout() -> u32 {
    2000
}

/// Blocks one request may have summarised, at most.
pub const MAX_BLOCKS: usize = 16;

impl Summariser {
    /// The `model` the summariser's request names.
    pub fn model(&self) -> &str {
        self.model.as_deref().unwrap_or(&self.group)
    }

    fn validate(&self) -> Result<(), String> {
        let field = "fitting.summariser";
        if self.group.is_empty() {
            return Err(format!("{field}.group: name a model group"));
        }
        if !(1..=MAX_BLOCKS).contains(&self.max_blocks) {
            return Err(format!("{field}.max_blocks: 1 to {MAX_BLOCKS}"));
        }
        if self.max_block_bytes == 0 || self.max_block_bytes > 1 << 20 {
            return Err(format!("{field}.max_block_bytes: 1 to 1048576"));
        }
        if self.min_block_bytes == 0 {
            return Err(format!("{field}.min_block_bytes: at least 1"));
        }
        if self.max_summary_tokens == 0 || self.max_summary_tokens > 4096 {
            return Err(format!("{field}.max_summary_tokens: 1 to 4096"));
        }
        if self.timeout_ms == 0 {
            return Err(format!("{field}.timeout_ms: at least 1"));
        }
        Ok(())
    }

    /// Checked against the configuration: the summariser is another group,
    /// and reached through the gateway's own listener (`self_calls`).
    pub fn check_in(
        &self,
        group_field: &str,
        groups: impl Fn(&str) -> bool,
        self_calls: bool,
    ) -> Result<(), String> {
        let field = format!("{group_field}.fitting.summariser.group");
        let name = &self.group;
        if !groups(name) {
            return Err(format!("{field}: no model group is named '{name}'"));
        }
        if group_field.strip_prefix("model_groups.") == Some(name.as_str()) {
            return Err(format!(
                "{field}: must be another group, one that summarises"
            ));
        }
        if !self_calls {
            return Err(format!(
                "{field}: the summariser call goes through the gateway's own listener: \
                 set self_calls"
            ));
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    strategies: Vec<String>,
    #[serde(default = "default_margin")]
    safety_margin_percent: u32,
    #[serde(default)]
    summariser: Option<Summariser>,
}

fn default_margin() -> u32 {
    DEFAULT_MARGIN_PERCENT
}

impl Policy {
    fn from_raw(raw: RawPolicy) -> Result<Self, String> {
        if raw.strategies.is_empty() {
            return Err(
                "fitting.strategies: name at least one of route, compress, trim, reject".into(),
            );
        }
        if raw.safety_margin_percent > 100 {
            return Err("fitting.safety_margin_percent: at most 100".into());
        }
        let mut strategies = Vec::with_capacity(raw.strategies.len());
        for (i, name) in raw.strategies.iter().enumerate() {
            let strategy = match name.as_str() {
                "route" => Strategy::Route,
                "compress" => Strategy::Compress,
                "trim" => Strategy::Trim,
                "reject" => Strategy::Reject,
                other => {
                    return Err(format!(
                        "fitting.strategies[{i}]: unknown strategy '{}' (route, compress, trim, reject)",
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
            // Summaries name their block by its place in the request as
            // it came: nothing may have moved it.
            if strategy == Strategy::Compress && strategies.contains(&Strategy::Trim) {
                return Err(format!(
                    "fitting.strategies[{i}]: compress comes before trim"
                ));
            }
            strategies.push(strategy);
        }
        match (&raw.summariser, strategies.contains(&Strategy::Compress)) {
            (None, true) => {
                return Err(
                    "fitting.summariser: compress needs a summariser ({\"group\": ...})".into(),
                )
            }
            (Some(_), false) => {
                return Err("fitting.summariser: only with the compress strategy".into())
            }
            (Some(summariser), true) => summariser.validate()?,
            (None, false) => {}
        }
        Ok(Policy {
            strategies,
            safety_margin_percent: raw.safety_margin_percent,
            summariser: raw.summariser,
        })
    }

    pub fn has(&self, strategy: Strategy) -> bool {
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
/// strategy shrinks the request (`compress`, `trim`).
pub fn shrinks(policy: Option<&Policy>) -> bool {
    policy.is_some_and(|p| p.has(Strategy::Trim) || p.has(Strategy::Compress))
}

/// Whether a request estimated at `estimate` tokens, with `output` tokens
/// of output, fits `window` by `policy`'s margin.
pub fn fits_window(policy: &Policy, estimate: u64, output: u64, window: u64) -> bool {
    policy.with_margin(estimate) + output <= window
}

/// What fitting did to one attempt's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It fit as it came.
    Whole,
    /// Old blocks were replaced by their summaries until it fit.
    Compressed,
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
            Outcome::Compressed => "compressed",
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
    /// Blocks replaced by their summaries.
    pub compressed: usize,
    /// Messages dropped.
    pub trimmed: usize,
    /// The prompt estimate of what was sent (without the margin).
    pub tokens: u64,
    pub window: Option<u64>,
}

impl Report {
    /// The `x-llm-context` value: `trimmed=4; compressed=1; tokens=31020/32768`.
    pub fn header(&self) -> String {
        let mut out = String::with_capacity(40);
        if self.trimmed > 0 {
            out.push_str(&format!("trimmed={}; ", self.trimmed));
        }
        if self.compressed > 0 {
            out.push_str(&format!("compressed={}; ", self.compressed));
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

/// Fits `request` to vendor model `model`'s `window` by `policy`, with
/// the `summaries` the edge made of its old blocks (`compress`): the
/// request to send, or (`reject`) the client's error with the report.
pub fn fit(
    policy: &Policy,
    request: &ChatRequest,
    model: &str,
    window: Option<u64>,
    summaries: &[Summary],
) -> Result<Fitted, Box<(GatewayError, Report)>> {
    let estimate = estimate::prompt_tokens(request);
    let mut report = Report {
        outcome: Outcome::Whole,
        compressed: 0,
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
    let fits = |tokens: u64| fits_window(policy, tokens, output, window);
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
            // client API's own vendors take) is not re-encoded: not
            // compressed, not trimmed.
            Strategy::Compress | Strategy::Trim if request.native_only.is_some() => {}
            Strategy::Compress => {
                // Compress comes before trim: the request as it came.
                if let Some(compressed) =
                    compress::apply(&request.messages, summaries, estimate, fits)
                {
                    report.compressed = compressed.replaced;
                    report.tokens = compressed.tokens;
                    let mut copy = request.clone();
                    copy.messages = compressed.messages.into();
                    fitted = Some(copy);
                }
                if fits(report.tokens) {
                    report.outcome = Outcome::Compressed;
                    return Ok(Fitted {
                        request: fitted,
                        report,
                    });
                }
            }
            Strategy::Trim => {
                let current = fitted.as_ref().unwrap_or(request);
                if let Some(trimmed) = trim::trim(&current.messages, report.tokens, fits) {
                    report.trimmed = trimmed.dropped;
                    report.tokens = trimmed.tokens;
                    let mut copy = current.clone();
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
