//! Which candidate serves a request: the model group (header, rules, name,
//! default), then the group's candidates that can serve this request, then
//! one of them by weight, sticky per user when the request names one.
//!
//! Failover between vendors is Envoy's (aggregate clusters and retry
//! priorities); here we only pick where the first attempt goes.
//!
//! Over 600 lines only with its tests (about 420 lines of code).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::{ErrorCode, GatewayError};
use crate::model::estimate;
use crate::model::request::{ChatRequest, ResponseFormat};

/// A model group: the candidates that can answer for it.
#[derive(Debug)]
pub struct ModelGroup {
    pub candidates: Vec<Candidate>,
    /// The degradation ladder: groups tried in order after this one's
    /// candidate fails (Envoy's retries over the aggregate cluster
    /// [`ladder_cluster`] of this group; `scripts/ladder_config.py` writes it).
    pub fallback: Vec<String>,
    /// The group's response cache, when it has one (`crate::cache`).
    pub cache: Option<crate::cache::Settings>,
    /// How a request is fitted to each attempt's context window
    /// (`crate::fitting`); none: the window only filters candidates.
    pub fitting: Option<crate::fitting::Policy>,
}

/// As written in the configuration: a list of candidates, or one cluster.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    #[serde(default)]
    cluster: Option<String>,
    #[serde(default)]
    candidates: Option<Vec<Candidate>>,
    #[serde(default)]
    fallback: Vec<String>,
    #[serde(default)]
    cache: Option<crate::cache::Settings>,
    #[serde(default)]
    fitting: Option<crate::fitting::Policy>,
}

/// The Envoy cluster a group with a fallback routes to: an aggregate whose
/// priorities are the group's candidate cluster and then one cluster per
/// rung, whose endpoints name the rung in `filter_metadata.llm.model_group`.
pub fn ladder_cluster(group: &str) -> String {
    format!("ladder_{group}")
}

/// Rungs a ladder may have below its top (each is one more Envoy retry).
pub const MAX_FALLBACK: usize = 8;

impl<'de> Deserialize<'de> for ModelGroup {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let raw = RawGroup::deserialize(d)?;
        let candidates = match (raw.cluster, raw.candidates) {
            (Some(cluster), None) => vec![Candidate::on_cluster(cluster)],
            (None, Some(candidates)) => candidates,
            _ => {
                return Err(D::Error::custom(
                    "a model group has either \"cluster\" or \"candidates\"",
                ))
            }
        };
        Ok(ModelGroup {
            candidates,
            fallback: raw.fallback,
            cache: raw.cache,
            fitting: raw.fitting,
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Candidate {
    /// Envoy cluster that reaches it (may be an aggregate cluster for failover).
    pub cluster: String,
    /// The provider the cluster's primary endpoints name; needed for `model`.
    #[serde(default)]
    pub provider: Option<String>,
    /// Vendor model at that provider; other providers an attempt may fail
    /// over to use their own `models` mapping.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default = "default_weight")]
    pub weight: u32,
    #[serde(default)]
    pub capabilities: Capabilities,
}

fn default_weight() -> u32 {
    1
}

impl Candidate {
    fn on_cluster(cluster: String) -> Self {
        Self {
            cluster,
            provider: None,
            model: None,
            weight: 1,
            capabilities: Capabilities::default(),
        }
    }
}

/// What a candidate can do. Unset means capable / unlimited.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Capabilities {
    pub tools: bool,
    pub vision: bool,
    pub json: bool,
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u32>,
}

impl Default for Capabilities {
    fn default() -> Self {
        Self {
            tools: true,
            vision: true,
            json: true,
            context_window: None,
            max_output_tokens: None,
        }
    }
}

/// A routing rule: requests matching every given condition go to `group`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(rename = "match", default)]
    pub when: RuleMatch,
    pub group: String,
    /// Higher first; equal priorities keep their order.
    #[serde(default)]
    pub priority: i32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleMatch {
    /// Glob on the body's `model` (`*` any run, `?` one character).
    #[serde(default)]
    pub model: Option<String>,
    /// Request headers that must have exactly these values (names lowercase).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body's `metadata.task_type`.
    #[serde(default)]
    pub task_type: Option<String>,
}

/// What the request asks of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    pub tools: bool,
    pub vision: bool,
    pub json: bool,
    pub prompt_tokens: u64,
    pub output_tokens: Option<u32>,
}

impl Needs {
    pub fn of(request: &ChatRequest) -> Self {
        Self {
            tools: !request.tools.is_empty(),
            vision: request.has_images(),
            json: matches!(
                request.response_format,
                Some(ResponseFormat::JsonObject | ResponseFormat::JsonSchema { .. })
            ),
            prompt_tokens: estimate::prompt_tokens(request),
            output_tokens: request.max_output_tokens(),
        }
    }
}

impl Needs {
    /// What a group with fitting `policy` routes by (`crate::fitting`):
    /// these needs, then, when no candidate's window fits and the policy
    /// shrinks the request, the needs without the prompt (the attempt fits).
    pub fn fitted_by(&self, policy: Option<&crate::fitting::Policy>) -> (Needs, Option<Needs>) {
        let windowless = Needs {
            prompt_tokens: 0,
            ..*self
        };
        match (
            crate::fitting::routes(policy),
            crate::fitting::shrinks(policy),
        ) {
            (false, _) => (windowless, None),
            (true, true) => (*self, Some(windowless)),
            (true, false) => (*self, None),
        }
    }
}

/// Why a candidate cannot serve a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Unfit {
    Tools,
    Vision,
    Json,
    OutputTokens,
    ContextWindow,
}

/// What is known of a candidate's vendor model beyond its `capabilities`
/// (`catalog`): used where the candidate sets no limit of its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Known {
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u64>,
}

impl Capabilities {
    fn unfit_knowing(&self, needs: &Needs, known: Known) -> Option<Unfit> {
        if needs.tools && !self.tools {
            return Some(Unfit::Tools);
        }
        if needs.vision && !self.vision {
            return Some(Unfit::Vision);
        }
        if needs.json && !self.json {
            return Some(Unfit::Json);
        }
        let max_output = self
            .max_output_tokens
            .map(u64::from)
            .or(known.max_output_tokens);
        if let (Some(want), Some(max)) = (needs.output_tokens, max_output) {
            if u64::from(want) > max {
                return Some(Unfit::OutputTokens);
            }
        }
        if let Some(window) = self.context_window.or(known.context_window) {
            let output = u64::from(needs.output_tokens.unwrap_or(0));
            if needs.prompt_tokens + output > window {
                return Some(Unfit::ContextWindow);
            }
        }
        None
    }
}

fn unfit_error(group: &str, reason: Unfit, needs: &Needs) -> GatewayError {
    let (param, what) = match reason {
        Unfit::Tools => ("tools", "tools"),
        Unfit::Vision => ("messages", "image input"),
        Unfit::Json => ("response_format", "JSON output"),
        Unfit::OutputTokens => ("max_tokens", "this many output tokens"),
        Unfit::ContextWindow => {
            return GatewayError::new(
                ErrorCode::ContextLengthExceeded,
                format!(
                    "the request needs about {} tokens (prompt estimate plus max tokens), more than any model in group '{group}' accepts",
                    needs.prompt_tokens + u64::from(needs.output_tokens.unwrap_or(0))
                ),
            );
        }
    };
    GatewayError::invalid(
        param,
        format!("no model in group '{group}' supports {what}"),
    )
}

/// Users are spread over this many buckets; weights carve the range in
/// candidate order, so a 5% canary appended to a group moves 5% of users.
const BUCKETS: u64 = 10_000;

/// FNV-1a: tiny, stable across builds and platforms, good spread for ids.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    stable_hash_more(0xcbf2_9ce4_8422_2325, bytes)
}

/// Continues [`stable_hash`] over more bytes (a key made of several parts).
pub fn stable_hash_more(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl ModelGroup {
    /// The model groups' degradation ladders, checked (errors name the
    /// field), and every group with a fallback routed to its ladder's
    /// aggregate cluster instead of its candidate's cluster (the ladder's
    /// first priority).
    pub fn build_ladders(groups: &mut BTreeMap<String, ModelGroup>) -> Result<(), String> {
        for (name, group) in groups.iter() {
            if group.fallback.is_empty() {
                continue;
            }
            let field = format!("model_groups.{name}.fallback");
            if !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(format!(
                    "{field}: the group's ladder is the Envoy cluster {}, so its name may hold only letters, digits, '-' and '_'",
                    ladder_cluster(name).escape_debug()
                ));
            }
            if group.candidates.len() != 1 {
                return Err(format!(
                    "{field}: a group with a fallback has exactly one candidate (the ladder's first rung)"
                ));
            }
            if group.fallback.len() > MAX_FALLBACK {
                return Err(format!("{field}: at most {MAX_FALLBACK} rungs"));
            }
            for (i, rung) in group.fallback.iter().enumerate() {
                let field = format!("{field}[{i}]");
                let Some(target) = groups.get(rung) else {
                    return Err(format!("{field}: no model group named '{rung}'"));
                };
                if rung == name || group.fallback.iter().take(i).any(|r| r == rung) {
                    return Err(format!(
                        "{field}: '{rung}' is in the ladder already (a rung is tried once)"
                    ));
                }
                if target.candidates.len() != 1 {
                    return Err(format!(
                        "{field}: a rung is one cluster, and group '{rung}' has {} candidates",
                        target.candidates.len()
                    ));
                }
            }
        }
        for (name, group) in groups.iter_mut() {
            if !group.fallback.is_empty() {
                for candidate in &mut group.candidates {
                    candidate.cluster = ladder_cluster(name);
                }
            }
        }
        Ok(())
    }

    /// Picks the candidate for a request. `bucket_key` is the user id when
    /// the request names one (sticky), else any per-request value.
    /// `pin` names a provider (debug pin, only when the config allows it).
    pub fn choose(
        &self,
        name: &str,
        needs: &Needs,
        bucket_key: &[u8],
        pin: Option<&str>,
    ) -> Result<usize, GatewayError> {
        self.choose_among(name, needs, bucket_key, pin, |_| true)
    }

    /// [`Self::choose`] among the candidates `has_it` accepts (those whose
    /// provider has the operation asked for, e.g. embeddings).
    pub fn choose_among(
        &self,
        name: &str,
        needs: &Needs,
        bucket_key: &[u8],
        pin: Option<&str>,
        has_it: impl Fn(&Candidate) -> bool,
    ) -> Result<usize, GatewayError> {
        self.choose_knowing(name, needs, bucket_key, pin, has_it, |_| Known::default())
    }

    /// [`Self::choose_among`], with what `known` knows of each candidate's
    /// limits where it sets none of its own.
    pub fn choose_knowing(
        &self,
        name: &str,
        needs: &Needs,
        bucket_key: &[u8],
        pin: Option<&str>,
        has_it: impl Fn(&Candidate) -> bool,
        known: impl Fn(&Candidate) -> Known,
    ) -> Result<usize, GatewayError> {
        let mut eligible: Vec<(usize, u64)> = Vec::with_capacity(self.candidates.len());
        let mut first_reason: Option<Unfit> = None;
        for (i, c) in self.candidates.iter().enumerate() {
            if (pin.is_some() && c.provider.as_deref() != pin) || !has_it(c) {
                continue;
            }
            match c.capabilities.unfit_knowing(needs, known(c)) {
                None if c.weight > 0 || pin.is_some() => {
                    eligible.push((i, u64::from(c.weight.max(1))))
                }
                None => {}
                // The most telling reason: context window beats a missing feature.
                Some(reason) => first_reason = first_reason.max(Some(reason)),
            }
        }
        if eligible.is_empty() {
            return Err(match (first_reason, pin) {
                (Some(reason), _) => unfit_error(name, reason, needs),
                (None, Some(p)) => GatewayError::invalid(
                    "x-llm-provider",
                    format!(
                        "no candidate of group '{name}' is on provider '{}'",
                        p.escape_debug()
                    ),
                ),
                (None, None) => GatewayError::new(
                    ErrorCode::UpstreamBusy,
                    format!("every candidate of group '{name}' has weight 0"),
                ),
            });
        }
        let total: u64 = eligible.iter().map(|(_, w)| w).sum();
        let point = (stable_hash(bucket_key) % BUCKETS) * total / BUCKETS;
        let mut acc = 0;
        for &(i, w) in &eligible {
            acc += w;
            if point < acc {
                return Ok(i);
            }
        }
        Ok(eligible.last().map_or(0, |&(i, _)| i))
    }
}

/// Glob match with `*` (any run) and `?` (one character). Runs per request
/// (routing rules, request policies): ASCII, the usual case, is matched on
/// the bytes, anything else on its characters.
pub fn glob(pattern: &str, text: &str) -> bool {
    if pattern.is_ascii() && text.is_ascii() {
        return glob_in(pattern.as_bytes(), text.as_bytes(), b'*', b'?');
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    glob_in(&p, &t, '*', '?')
}

fn glob_in<T: PartialEq + Copy>(p: &[T], t: &[T], many: T, one: T) -> bool {
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some(&c) if c == many => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == one || Some(&c) == t.get(ti) => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|&c| c == many))
}

impl Rule {
    pub fn matches(
        &self,
        model: &str,
        header: &dyn Fn(&str) -> Option<String>,
        task_type: Option<&str>,
    ) -> bool {
        self.when.model.as_deref().is_none_or(|g| glob(g, model))
            && self
                .when
                .task_type
                .as_deref()
                .is_none_or(|t| Some(t) == task_type)
            && self
                .when
                .headers
                .iter()
                .all(|(name, value)| header(name).as_deref() == Some(value.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(json: &str) -> ModelGroup {
        serde_json::from_str(json).unwrap()
    }

    fn needs() -> Needs {
        Needs {
            tools: false,
            vision: false,
            json: false,
            prompt_tokens: 100,
            output_tokens: None,
        }
    }

    #[test]
    fn cluster_shorthand_and_errors() {
        let g = group(r#"{"cluster":"c"}"#);
        assert_eq!(g.candidates[0].cluster, "c");
        assert!(serde_json::from_str::<ModelGroup>(r#"{"cluster":"c","candidates":[]}"#).is_err());
        assert!(serde_json::from_str::<ModelGroup>(r#"{}"#).is_err());
    }

    fn groups(json: &str) -> Result<BTreeMap<String, ModelGroup>, String> {
        let mut groups: BTreeMap<String, ModelGroup> = serde_json::from_str(json).unwrap();
        ModelGroup::build_ladders(&mut groups).map(|()| groups)
    }

    #[test]
    fn a_ladder_routes_to_its_aggregate_cluster() {
        let g = groups(
            r#"{"chat-pro": {"candidates": [{"cluster": "openai", "provider": "oa", "model": "big"}],
                             "fallback": ["chat-fast", "chat-base"]},
                "chat-fast": {"cluster": "anthropic"},
                "chat-base": {"candidates": [{"cluster": "openai", "provider": "oa", "model": "small"}]}}"#,
        )
        .unwrap();
        assert_eq!(g["chat-pro"].candidates[0].cluster, "ladder_chat-pro");
        assert_eq!(g["chat-pro"].fallback, ["chat-fast", "chat-base"]);
        assert_eq!(
            g["chat-fast"].candidates[0].cluster, "anthropic",
            "rungs keep their own"
        );
        assert_eq!(g["chat-base"].candidates[0].cluster, "openai");
    }

    #[test]
    fn ladders_are_checked() {
        for (json, expected) in [
            (
                r#"{"a": {"cluster": "c", "fallback": ["b"]}}"#,
                "model_groups.a.fallback[0]: no model group named 'b'",
            ),
            (
                r#"{"a": {"cluster": "c", "fallback": ["a"]}}"#,
                "model_groups.a.fallback[0]: 'a' is in the ladder already",
            ),
            (
                r#"{"a": {"cluster": "c", "fallback": ["b", "b"]}, "b": {"cluster": "d"}}"#,
                "model_groups.a.fallback[1]: 'b' is in",
            ),
            (
                r#"{"a": {"cluster": "c", "fallback": ["b"]}, "b": {"candidates": [{"cluster": "d"}, {"cluster": "e"}]}}"#,
                "model_groups.a.fallback[0]: a rung is one cluster, and group 'b' has 2 candidates",
            ),
            (
                r#"{"a": {"candidates": [{"cluster": "d"}, {"cluster": "e"}], "fallback": ["b"]}, "b": {"cluster": "d"}}"#,
                "model_groups.a.fallback: a group with a fallback has exactly one candidate",
            ),
            (
                r#"{"a b": {"cluster": "c", "fallback": ["b"]}, "b": {"cluster": "d"}}"#,
                "model_groups.a b.fallback: the group's ladder is the Envoy cluster ladder_a b",
            ),
            (
                r#"{"a": {"cluster": "c", "fallback": ["b","b","b","b","b","b","b","b","b"]}, "b": {"cluster": "d"}}"#,
                "model_groups.a.fallback: at most 8 rungs",
            ),
        ] {
            let e = groups(json).unwrap_err();
            assert!(e.starts_with(expected), "{e}");
        }
    }

    #[test]
    fn weights_split_traffic() {
        let g =
            group(r#"{"candidates":[{"cluster":"a","weight":70},{"cluster":"b","weight":30}]}"#);
        let mut counts = [0u32; 2];
        for i in 0..10_000u32 {
            counts[g.choose("g", &needs(), &i.to_le_bytes(), None).unwrap()] += 1;
        }
        assert!((6700..7300).contains(&counts[0]), "{counts:?}");
    }

    #[test]
    fn sticky_users_and_small_canaries() {
        let before = group(r#"{"candidates":[{"cluster":"a","weight":100}]}"#);
        let after =
            group(r#"{"candidates":[{"cluster":"a","weight":95},{"cluster":"b","weight":5}]}"#);
        let mut moved = 0;
        for u in 0..10_000 {
            let key = format!("user-{u}");
            let a = after.choose("g", &needs(), key.as_bytes(), None).unwrap();
            assert_eq!(
                a,
                after.choose("g", &needs(), key.as_bytes(), None).unwrap(),
                "sticky"
            );
            if a != before.choose("g", &needs(), key.as_bytes(), None).unwrap() {
                moved += 1;
            }
        }
        assert!(
            (350..650).contains(&moved),
            "about 5% of users move, not {moved}"
        );
    }

    #[test]
    fn capabilities_filter_candidates() {
        let g = group(
            r#"{"candidates":[
                {"cluster":"small","capabilities":{"tools":false,"context_window":1000}},
                {"cluster":"big","capabilities":{"context_window":100000,"vision":false}}]}"#,
        );
        let tools = Needs {
            tools: true,
            ..needs()
        };
        for k in 0..50u8 {
            assert_eq!(g.choose("g", &tools, &[k], None).unwrap(), 1);
        }
        let long = Needs {
            prompt_tokens: 5000,
            ..needs()
        };
        assert_eq!(g.choose("g", &long, b"x", None).unwrap(), 1);
        let huge = Needs {
            prompt_tokens: 500_000,
            ..needs()
        };
        assert_eq!(
            g.choose("g", &huge, b"x", None).unwrap_err().code,
            ErrorCode::ContextLengthExceeded
        );
        let vision_tools = Needs {
            vision: true,
            tools: true,
            ..needs()
        };
        let e = g.choose("g", &vision_tools, b"x", None).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert!(e.param.is_some());
    }

    #[test]
    fn pins() {
        let g = group(
            r#"{"candidates":[{"cluster":"a","provider":"pa"},{"cluster":"b","provider":"pb","weight":0}]}"#,
        );
        assert_eq!(g.choose("g", &needs(), b"x", Some("pb")).unwrap(), 1);
        assert_eq!(
            g.choose("g", &needs(), b"x", Some("pz"))
                .unwrap_err()
                .param
                .as_deref(),
            Some("x-llm-provider")
        );
    }

    #[test]
    fn globs() {
        assert!(glob("gpt-4*", "gpt-4o-mini"));
        assert!(glob("*", ""));
        assert!(glob("claude-?-*", "claude-3-opus"));
        assert!(!glob("gpt-4*", "gpt-3.5"));
        assert!(glob("*mini", "gpt-4o-mini"));
        assert!(!glob("a*b", "acbd"));
        assert!(glob("a*b*c", "axxbyyc"));
        // Beyond ASCII, `?` is one character, not one byte.
        assert!(glob("qwen-?-*", "qwen-é-max"));
        assert!(!glob("qwen-??-*", "qwen-é-max"));
    }

    #[test]
    fn rules_match_all_conditions() {
        let rule: Rule = serde_json::from_str(
            r#"{"match":{"model":"gpt-*","headers":{"x-route-key":"beta"},"task_type":"summarize"},"group":"g"}"#,
        )
        .unwrap();
        let beta = |h: &str| (h == "x-route-key").then(|| "beta".to_string());
        let none = |_: &str| None;
        assert!(rule.matches("gpt-4o", &beta, Some("summarize")));
        assert!(!rule.matches("gpt-4o", &none, Some("summarize")));
        assert!(!rule.matches("claude", &beta, Some("summarize")));
        assert!(!rule.matches("gpt-4o", &beta, None));
    }
}
