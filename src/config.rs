//! The filter's one JSON configuration document, shared by both roles.
//!
//! Parsed and validated in `on_configure`; any error names the field, and
//! Envoy keeps the previous configuration.
//!
//! Over 600 lines only with its tests (about 350 lines of code).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::auth::Auth;
use crate::error::{ErrorCode, GatewayError};
use crate::provider::{DialectKind, Provider, Secret, Settings};
pub use crate::routing::{Candidate, ModelGroup, Rule};
pub use diagnostics::Diagnostics;

pub mod diagnostics;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// When this configuration was loaded (Unix seconds): the `created` of
    /// the model groups `/v1/models` lists.
    #[serde(skip)]
    pub loaded_at: u64,
    /// Vendors, by a name of our choosing. Endpoints name theirs in
    /// `filter_metadata.llm.provider`.
    #[serde(deserialize_with = "providers")]
    pub providers: BTreeMap<String, Provider>,
    /// Model groups: what clients ask for (header `x-model-group` or body `model`).
    pub model_groups: BTreeMap<String, ModelGroup>,
    /// Routing rules, tried (highest priority first) when neither the header
    /// `x-model-group` nor the body's `model` names a group.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Group used when nothing else names one.
    #[serde(default)]
    pub default_model_group: Option<String>,
    /// Lets a request header `x-llm-provider` pin a candidate's provider
    /// (debugging). Off by default: clients must not choose the vendor.
    #[serde(default)]
    pub allow_provider_pin: bool,
    #[serde(default)]
    pub streaming: Streaming,
    /// Gateway keys. Required, so that turning auth off is always explicit.
    pub auth: Auth,
    #[serde(default)]
    pub limits: Limits,
    /// Leave the GenAI span attributes in filter state for Envoy tracing's
    /// custom tags (`wasm.llm_provider`, `wasm.llm_group`, ...). Off by
    /// default: each is a host call on every request.
    #[serde(default)]
    pub span_attributes: bool,
    /// Record every request's series in Envoy's stats (requests, attempts,
    /// tokens, cost, latencies; docs/src/features/observability.md). On by
    /// default; off, the access log alone carries those facts, and each
    /// request saves the metric host calls (on the native host about a
    /// tenth of its CPU: Envoy interns every label value on every call).
    #[serde(default = "on_by_default")]
    pub request_metrics: bool,
    /// Record the filter's own time per phase (`llm_gateway_overhead_us`).
    /// Off by default: timing costs host calls on every request and chunk.
    #[serde(default)]
    pub overhead_histograms: bool,
    /// The Responses API's state for translated vendors
    /// (docs/src/features/responses-store.md): bounds, TTL, or off.
    #[serde(default)]
    pub response_store: crate::responses_store::Bounds,
    /// Requests the gateway sends to its own listener (`session::self_call`):
    /// off unless set. An embeddings batch larger than its vendor takes at
    /// once is split into such requests (README "Embeddings").
    #[serde(default)]
    pub self_calls: Option<SelfCalls>,
    /// Where state shared beyond one proxy lives: the state service, when
    /// a fleet shares it (docs/src/features/shared-state.md).
    #[serde(default)]
    pub shared_state: crate::shared_state::Settings,
    /// The diagnostics view (`/llm-gateway/`) and its recording; `None`
    /// when off (the default: see `config::diagnostics`).
    #[serde(default)]
    pub diagnostics: Option<Diagnostics>,
    /// Model discovery (`crate::discovery`): off when absent.
    #[serde(default)]
    pub discovery: Option<crate::discovery::Settings>,
    /// What is known of vendor models beyond the vendors' lists and the
    /// shipped table (`crate::catalog`).
    #[serde(default)]
    pub model_facts: crate::catalog::Settings,
}

/// How the gateway reaches its own listener.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelfCalls {
    /// The Envoy cluster whose endpoint is this proxy's own listener (an
    /// internal listener with the gateway's filter chain and routes).
    pub cluster: String,
    /// How long one self-call may take, in milliseconds (then Envoy's 504).
    #[serde(default = "self_call_timeout")]
    pub timeout_ms: u32,
    /// How many self-calls one request has out at once.
    #[serde(default = "self_calls_in_flight")]
    pub max_in_flight: usize,
}

fn self_call_timeout() -> u32 {
    300_000
}

fn self_calls_in_flight() -> usize {
    4
}

/// First-event gating: the client's response headers wait for the vendor's
/// first content event, so an error as the first event becomes a retryable
/// status that Envoy can send to the next vendor instead of a broken 200.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Streaming {
    pub hold_until_first_content: bool,
    /// Stop holding after this long (checked as events arrive; Envoy's
    /// per-try timeout covers a vendor that sends nothing at all).
    pub max_hold_ms: u64,
    /// Stop holding once this much translated output is waiting.
    pub max_hold_bytes: usize,
}

impl Default for Streaming {
    fn default() -> Self {
        Self {
            hold_until_first_content: true,
            max_hold_ms: 10_000,
            max_hold_bytes: 64 << 10,
        }
    }
}

/// Request limits, enforced by the edge role before any upstream is contacted.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body; larger ones get 413, decided from `content-length`
    /// before buffering. Envoy's own buffer limit (listener
    /// `per_connection_buffer_limit_bytes`) must be at least this large.
    pub max_body_bytes: u64,
    pub max_messages: usize,
    pub max_tools: usize,
    /// Rate limits, token limits and spend budgets per key and model group.
    pub rate: Vec<crate::limits::RateLimit>,
    /// Refuse a request at admission when its reservation (prompt estimate
    /// and output limit) does not fit in a token or spend budget, rather
    /// than while anything of the budget is left.
    pub refuse_on_estimate: bool,
    /// The output a request that names no limit (`max_tokens`, ...) is
    /// reserved for against token and spend budgets.
    pub reserve_output_tokens: u64,
    /// Expose the key, group and model as request headers and the tokens and
    /// cost as filter state, for Envoy's rate limit filter (envoy/ratelimit.yaml).
    pub descriptors: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 8 << 20,
            max_messages: 1000,
            max_tools: 128,
            rate: Vec::new(),
            refuse_on_estimate: false,
            reserve_output_tokens: 4096,
            descriptors: false,
        }
    }
}

/// The providers, each with its dialect's keys set apart, unread
/// (`Config::parse` has the dialect read them): users write them beside
/// the common keys.
fn providers<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, Provider>, D::Error> {
    use serde::de::Error;
    use serde_json::{Map, Value};
    let written = BTreeMap::<String, Map<String, Value>>::deserialize(d)?;
    written
        .into_iter()
        .map(|(name, mut members)| {
            let names: Vec<String> = members
                .keys()
                .filter(|key| crate::dialects::settings::is_setting(key))
                .cloned()
                .collect();
            let settings: Map<String, Value> = names
                .iter()
                .filter_map(|key| members.remove_entry(key))
                .collect();
            let mut provider = Provider::deserialize(Value::Object(members))
                .map_err(|e| D::Error::custom(format!("providers.{name}: {e}")))?;
            provider.settings = Settings::Unread(settings);
            Ok((name, provider))
        })
        .collect()
}

fn on_by_default() -> bool {
    true
}

impl Config {
    /// Parses and validates; `env` looks up the VM's environment variables.
    pub fn parse(bytes: &[u8], env: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let mut config: Config =
            serde_json::from_slice(bytes).map_err(|e| format!("invalid configuration: {e}"))?;
        config.auth.validate()?;
        for (field, value) in [
            ("limits.max_body_bytes", config.limits.max_body_bytes),
            ("limits.max_messages", config.limits.max_messages as u64),
            ("limits.max_tools", config.limits.max_tools as u64),
        ] {
            if value == 0 {
                return Err(format!("{field}: must be at least 1"));
            }
        }
        if config.limits.max_messages > crate::model::request::MAX_MESSAGES {
            return Err(format!(
                "limits.max_messages: at most {} is supported",
                crate::model::request::MAX_MESSAGES
            ));
        }
        config.response_store.validate()?;
        if let Some(calls) = &config.self_calls {
            if calls.cluster.is_empty() {
                return Err("self_calls.cluster: must not be empty".into());
            }
            for (field, value) in [
                ("self_calls.timeout_ms", u64::from(calls.timeout_ms)),
                ("self_calls.max_in_flight", calls.max_in_flight as u64),
            ] {
                if value == 0 {
                    return Err(format!("{field}: must be at least 1"));
                }
            }
        }
        config.shared_state.validate()?;
        if let Some(diagnostics) = &mut config.diagnostics {
            let digests: Vec<[u8; 32]> = config.auth.keys.iter().map(|k| *k.digest()).collect();
            diagnostics.validate(&digests)?;
        }
        if config.diagnostics.as_ref().is_some_and(|d| !d.enabled) {
            config.diagnostics = None;
        }
        let key_names: Vec<&str> = config.auth.keys.iter().map(|k| k.name.as_str()).collect();
        let group_names: Vec<&str> = config.model_groups.keys().map(String::as_str).collect();
        crate::limits::validate(
            &mut config.limits.rate,
            config.auth.enabled.then_some(key_names.as_slice()),
            &group_names,
        )?;
        for (i, key) in config.auth.keys.iter().enumerate() {
            if let Some(g) = key
                .groups
                .iter()
                .find(|g| *g != "*" && !config.model_groups.contains_key(*g))
            {
                return Err(format!("auth.keys[{i}].groups: no model group named '{g}'"));
            }
        }
        if config.providers.is_empty() {
            return Err("providers: at least one provider is required".into());
        }
        for (name, provider) in &mut config.providers {
            let field = format!("providers.{name}");
            if provider.api_key.is_some() && provider.api_key_env.is_some() {
                return Err(format!("{field}: set api_key or api_key_env, not both"));
            }
            if !provider.base_path.is_empty()
                && (!provider.base_path.starts_with('/') || provider.base_path.ends_with('/'))
            {
                return Err(format!(
                    "{field}.base_path: must start with '/' and not end with '/'"
                ));
            }
            if let Some(host) = &provider.host {
                if host.is_empty()
                    || host
                        .chars()
                        .any(|c| c.is_whitespace() || c.is_control() || c == '/')
                {
                    return Err(format!("{field}.host: must be a bare host[:port]"));
                }
            }
            provider.settings = crate::dialects::settings::read(
                provider.dialect,
                std::mem::take(&mut provider.settings),
                &field,
            )?;
            for (model, price) in &provider.prices {
                price.validate(&format!("{field}.prices.{model}"))?;
            }
            if provider.default_max_tokens == 0 {
                return Err(format!("{field}.default_max_tokens: must be at least 1"));
            }
            provider.resolved_key = match (&provider.api_key, &provider.api_key_env) {
                (Some(key), None) => Some(key.clone()),
                (None, Some(var)) => match env(var) {
                    Some(key) if !key.is_empty() => Some(Secret::new(key)),
                    _ => {
                        return Err(format!(
                            "{field}.api_key_env: environment variable {var} is not set"
                        ))
                    }
                },
                _ => None,
            };
            crate::dialects::transport::vertex::check_credentials(provider, &field)?;
            provider.redactor =
                crate::redact::Redactor::new(provider.resolved_key.as_ref().map(Secret::expose));
            for (i, rule) in provider.request_policy.iter().enumerate() {
                rule.validate(&format!("{field}.request_policy[{i}]"))?;
            }
            provider.builtin_policy = crate::policy::builtin(matches!(
                provider.dialect,
                DialectKind::Openai | DialectKind::Azure
            ));
            for (i, name) in provider.forward_headers.iter().enumerate() {
                let token = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
                if !token {
                    return Err(format!(
                        "{field}.forward_headers[{i}]: a lowercase header name (letters, digits, '-')"
                    ));
                }
                if crate::headers::CREDENTIAL_HEADERS.contains(&name.as_str())
                    || name.starts_with("x-llm-")
                {
                    return Err(format!(
                        "{field}.forward_headers[{i}]: {name} is a credential or the gateway's own header and is never forwarded"
                    ));
                }
            }
        }
        if config.model_groups.is_empty() {
            return Err("model_groups: at least one model group is required".into());
        }
        for (name, group) in &config.model_groups {
            let field = format!("model_groups.{name}");
            if group.candidates.is_empty() {
                return Err(format!(
                    "{field}.candidates: at least one candidate is required"
                ));
            }
            if let Some(cache) = &group.cache {
                cache.validate(&format!("{field}.cache"))?;
                if let Some(semantic) = &cache.semantic {
                    let groups = |g: &str| config.model_groups.contains_key(g);
                    semantic.check_in(&field, groups, config.self_calls.is_some())?;
                }
            }
            if let Some(summariser) = group.fitting.as_ref().and_then(|f| f.summariser.as_ref()) {
                let groups = |g: &str| config.model_groups.contains_key(g);
                summariser.check_in(&field, groups, config.self_calls.is_some())?;
                // Its own calls are never summarised again (no recursion).
                let compresses = (config.model_groups.get(&summariser.group))
                    .and_then(|g| g.fitting.as_ref())
                    .is_some_and(|p| p.has(crate::fitting::Strategy::Compress));
                if compresses {
                    return Err(format!(
                        "{field}.fitting.summariser.group: '{}' compresses too; a summariser's group does not",
                        summariser.group
                    ));
                }
                // A summary by meaning would be another block's: two logs
                // that differ in which test failed are close in meaning.
                let by_meaning = (config.model_groups.get(&summariser.group))
                    .and_then(|g| g.cache.as_ref())
                    .is_some_and(|c| c.semantic.is_some());
                if by_meaning {
                    return Err(format!(
                        "{field}.fitting.summariser.group: '{}' has a semantic cache, which would answer a block with another's summary; a summariser's group caches exactly or not at all",
                        summariser.group
                    ));
                }
            }
            if group.candidates.iter().all(|c| c.weight == 0) {
                return Err(format!(
                    "{field}.candidates: at least one candidate needs a weight above 0"
                ));
            }
            for (i, c) in group.candidates.iter().enumerate() {
                if c.cluster.is_empty() {
                    return Err(format!(
                        "{field}.candidates[{i}].cluster: must not be empty"
                    ));
                }
                if let Some(p) = c
                    .provider
                    .as_deref()
                    .filter(|p| !config.providers.contains_key(*p))
                {
                    return Err(format!(
                        "{field}.candidates[{i}].provider: no provider named '{p}'"
                    ));
                }
                if c.model.is_some() && c.provider.is_none() {
                    return Err(format!(
                        "{field}.candidates[{i}].model: name the provider it belongs to"
                    ));
                }
            }
        }
        ModelGroup::build_ladders(&mut config.model_groups)?;
        for (i, rule) in config.rules.iter().enumerate() {
            if !config.model_groups.contains_key(&rule.group) {
                return Err(format!(
                    "rules[{i}].group: no model group named '{}'",
                    rule.group
                ));
            }
        }
        if let Some(discovery) = config.discovery.as_mut() {
            discovery.validate(&config.providers, &config.model_groups)?;
        }
        config.model_facts.validate()?;
        for group in config.model_groups.values() {
            for c in &group.candidates {
                if let (Some(provider), Some(model)) = (&c.provider, &c.model) {
                    let said = crate::catalog::Configured {
                        context_window: c.capabilities.context_window,
                        max_output_tokens: c.capabilities.max_output_tokens.map(u64::from),
                    };
                    config.model_facts.note_candidate(provider, model, said);
                }
            }
        }
        // Highest priority first; the sort is stable, so ties keep their order.
        config.rules.sort_by_key(|r| std::cmp::Reverse(r.priority));
        if let Some(default) = &config.default_model_group {
            if !config.model_groups.contains_key(default) {
                return Err(format!(
                    "default_model_group: no model group named '{default}'"
                ));
            }
        }
        Ok(config)
    }

    /// The group a request belongs to: header `x-model-group`, else the body
    /// model when it names a group, else the first matching rule, else the
    /// default group.
    pub fn resolve_group<'a>(
        &'a self,
        header: Option<&'a str>,
        model: &'a str,
        request_header: &dyn Fn(&str) -> Option<String>,
        task_type: Option<&str>,
    ) -> Result<(&'a str, &'a ModelGroup), GatewayError> {
        self.resolve_group_or(header, model, request_header, task_type, |_| None)
    }

    /// [`Self::resolve_group`], asking `discovered` (model discovery's
    /// routing) after the rules and before the default group.
    pub fn resolve_group_or<'a>(
        &'a self,
        header: Option<&'a str>,
        model: &'a str,
        request_header: &dyn Fn(&str) -> Option<String>,
        task_type: Option<&str>,
        discovered: impl FnOnce(&str) -> Option<&'a str>,
    ) -> Result<(&'a str, &'a ModelGroup), GatewayError> {
        let name = match header {
            Some(h) => h,
            None if self.model_groups.contains_key(model) => model,
            None => self
                .rules
                .iter()
                .find(|r| r.matches(model, request_header, task_type))
                .map(|r| r.group.as_str())
                .or_else(|| discovered(model))
                .or(self.default_model_group.as_deref())
                .unwrap_or(model),
        };
        self.model_groups
            .get_key_value(name)
            .map(|(k, g)| (k.as_str(), g))
            .ok_or_else(|| {
                let mut e = GatewayError::new(
                    ErrorCode::ModelNotFound,
                    format!("unknown model group '{}'", name.escape_debug()),
                );
                e.param = Some(if header.is_some() {
                    "x-model-group".into()
                } else {
                    "model".into()
                });
                e
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{
        "providers": {
            "oa": {"dialect": "openai", "api_key_env": "OA_KEY", "models": {"fast": "gpt-4o-mini"}},
            "an": {"dialect": "anthropic", "host": "api.anthropic.com", "api_key": "k", "models": {"*": "claude"}}
        },
        "model_groups": {"fast": {"cluster": "c1"}, "smart": {"cluster": "c2"}},
        "default_model_group": "fast",
        "auth": {"enabled": false}
    }"#;

    fn env(name: &str) -> Option<String> {
        (name == "OA_KEY").then(|| "secret".to_string())
    }

    #[test]
    fn parses_and_resolves_keys() {
        let c = Config::parse(GOOD.as_bytes(), env).unwrap();
        assert_eq!(
            c.providers["oa"].resolved_key.as_ref().map(Secret::expose),
            Some("secret")
        );
        assert!(
            !format!("{c:?}").contains("secret"),
            "Debug never shows keys"
        );
        assert_eq!(c.providers["oa"].vendor_model("fast", "x"), "gpt-4o-mini");
        assert_eq!(c.providers["oa"].vendor_model("smart", "x"), "x");
        assert_eq!(c.providers["an"].vendor_model("smart", "x"), "claude");
    }

    #[test]
    fn forward_headers_are_names_and_never_credentials() {
        let with = |list: &str| {
            GOOD.replace(
                r#""api_key": "k","#,
                &format!(r#""api_key": "k", "forward_headers": {list},"#),
            )
        };
        let c = Config::parse(with(r#"["openai-organization"]"#).as_bytes(), env).unwrap();
        assert_eq!(c.providers["an"].forward_headers, ["openai-organization"]);
        for (list, expected) in [
            (r#"["Authorization"]"#, "providers.an.forward_headers[0]: a lowercase"),
            (r#"["ok", "x-api-key"]"#, "providers.an.forward_headers[1]: x-api-key is a credential"),
            (r#"["x-llm-cluster"]"#, "providers.an.forward_headers[0]: x-llm-cluster is a credential or the gateway's own"),
        ] {
            let e = Config::parse(with(list).as_bytes(), env).unwrap_err();
            assert!(e.starts_with(expected), "{e}");
        }
    }

    #[test]
    fn resolves_groups() {
        let c = Config::parse(GOOD.as_bytes(), env).unwrap();
        let none = |_: &str| None;
        assert_eq!(
            c.resolve_group(Some("smart"), "fast", &none, None)
                .unwrap()
                .0,
            "smart"
        );
        assert_eq!(
            c.resolve_group(None, "smart", &none, None).unwrap().0,
            "smart"
        );
        assert_eq!(
            c.resolve_group(None, "gpt-x", &none, None).unwrap().0,
            "fast"
        );
        let e = c
            .resolve_group(Some("nope"), "fast", &none, None)
            .unwrap_err();
        assert_eq!(e.status(), 404);
        assert_eq!(e.param.as_deref(), Some("x-model-group"));
    }

    #[test]
    fn rules_by_priority_then_default() {
        let doc = GOOD.replace(
            r#""default_model_group": "fast","#,
            r#""default_model_group": "fast",
               "rules": [
                 {"match": {"model": "claude-*"}, "group": "smart"},
                 {"match": {"headers": {"x-route-key": "beta"}}, "group": "fast", "priority": 5},
                 {"match": {"task_type": "summarize"}, "group": "smart", "priority": 5}
               ],"#,
        );
        let c = Config::parse(doc.as_bytes(), env).unwrap();
        let beta = |h: &str| (h == "x-route-key").then(|| "beta".to_string());
        let none = |_: &str| None;
        assert_eq!(
            c.resolve_group(None, "claude-3", &none, None).unwrap().0,
            "smart"
        );
        assert_eq!(
            c.resolve_group(None, "claude-3", &beta, None).unwrap().0,
            "fast",
            "priority 5 wins"
        );
        assert_eq!(
            c.resolve_group(None, "x", &none, Some("summarize"))
                .unwrap()
                .0,
            "smart"
        );
        assert_eq!(
            c.resolve_group(None, "x", &beta, Some("summarize"))
                .unwrap()
                .0,
            "fast",
            "ties keep order"
        );
        assert_eq!(
            c.resolve_group(None, "other", &none, None).unwrap().0,
            "fast",
            "default"
        );
        assert_eq!(
            c.resolve_group(None, "smart", &beta, None).unwrap().0,
            "smart",
            "a group name wins over rules"
        );
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (GOOD.replace("\"openai\"", "\"klingon\""), "unknown variant"),
            (
                GOOD.replace("\"api_key\": \"k\"", "\"api_key\": \"k\", \"colour\": 1"),
                "colour",
            ),
            (
                GOOD.replace("OA_KEY", "MISSING"),
                "providers.oa.api_key_env",
            ),
            (
                GOOD.replace("\"fast\"\n", "\"slow\"\n").replace(
                    "\"default_model_group\": \"fast\"",
                    "\"default_model_group\": \"zzz\"",
                ),
                "default_model_group",
            ),
            (
                GOOD.replace("\"cluster\": \"c1\"", "\"cluster\": \"\""),
                "model_groups.fast.candidates[0].cluster",
            ),
            (
                GOOD.replace("\"host\": \"api.anthropic.com\"", "\"host\": \"a/b\""),
                "providers.an.host",
            ),
            (
                GOOD.replace("\"dialect\": \"anthropic\"", "\"dialect\": \"azure\""),
                "providers.an.api_version: required",
            ),
            (
                GOOD.replace(
                    "\"api_key\": \"k\"",
                    "\"api_key\": \"k\", \"api_version\": \"1\"",
                ),
                "providers.an.api_version: only",
            ),
            (
                GOOD.replace(
                    "\"dialect\": \"anthropic\"",
                    "\"dialect\": \"azure\", \"api_version\": \"x&y=1\"",
                ),
                "providers.an.api_version: must",
            ),
            ("{}".to_string(), "providers"),
            (
                GOOD.replace(
                    r#"{"cluster": "c1"}"#,
                    r#"{"candidates": [{"cluster": "c1", "provider": "zz"}]}"#,
                ),
                "model_groups.fast.candidates[0].provider",
            ),
            (
                GOOD.replace(
                    r#"{"cluster": "c1"}"#,
                    r#"{"candidates": [{"cluster": "c1", "weight": 0}]}"#,
                ),
                "model_groups.fast.candidates",
            ),
            (
                GOOD.replace(
                    r#""default_model_group": "fast","#,
                    r#""default_model_group": "fast", "rules": [{"group": "nope"}],"#,
                ),
                "rules[0].group",
            ),
            (
                GOOD.replace(r#""auth": {"enabled": false}"#, r#""auth": {}"#),
                "auth.keys",
            ),
            (
                GOOD.replace(r#"        "auth": {"enabled": false}"#, "")
                    .replace(r#""fast","#, r#""fast""#),
                "auth",
            ),
            (
                GOOD.replace(
                    r#""auth": {"enabled": false}"#,
                    r#""auth": {"enabled": false}, "limits": {"max_tools": 0}"#,
                ),
                "limits.max_tools",
            ),
            (
                GOOD.replace(
                    r#"{"cluster": "c1"}"#,
                    r#"{"cluster": "c1", "fallback": ["smart", "gone"]}"#,
                ),
                "model_groups.fast.fallback[1]: no model group named 'gone'",
            ),
            ("[".to_string(), "invalid configuration"),
        ];
        for (doc, needle) in cases {
            let err = Config::parse(doc.as_bytes(), env).unwrap_err();
            assert!(err.contains(needle), "{err} should mention {needle}");
        }
    }

    #[test]
    fn a_summariser_is_another_group_reached_by_self_calls() {
        let with = |summariser: &str, self_calls: &str| {
            GOOD.replace(
                r#""smart": {"cluster": "c2"}"#,
                &format!(
                    r#""smart": {{"cluster": "c2", "fitting": {{"strategies": ["compress", "trim"], "summariser": {summariser}}}}}"#
                ),
            )
            .replace(r#""auth":"#, &format!(r#"{self_calls} "auth":"#))
        };
        let calls = r#""self_calls": {"cluster": "self"},"#;
        let c = Config::parse(with(r#"{"group": "fast"}"#, calls).as_bytes(), env).unwrap();
        let policy = c.model_groups["smart"].fitting.as_ref().unwrap();
        assert_eq!(policy.summariser.as_ref().unwrap().model(), "fast");
        for (summariser, self_calls, expected) in [
            (
                r#"{"group": "none"}"#,
                calls,
                "model_groups.smart.fitting.summariser.group: no model group is named 'none'",
            ),
            (r#"{"group": "smart"}"#, calls, "must be another group"),
            (r#"{"group": "fast"}"#, "", "set self_calls"),
        ] {
            let e = Config::parse(with(summariser, self_calls).as_bytes(), env).unwrap_err();
            assert!(e.contains(expected), "{e}");
        }
        // A summariser that compresses itself: the two groups summarise
        // each other's calls.
        let both = with(r#"{"group": "fast"}"#, calls).replace(
            r#""fast": {"cluster": "c1"}"#,
            r#""fast": {"cluster": "c1", "fitting": {"strategies": ["compress"], "summariser": {"group": "smart"}}}"#,
        );
        let e = Config::parse(both.as_bytes(), env).unwrap_err();
        assert!(e.contains("compresses too"), "{e}");
        // A summariser's group with a semantic cache: refused; an exact one is fine.
        let cached = |cache: &str| {
            with(r#"{"group": "fast"}"#, calls)
                .replace(
                    r#""fast": {"cluster": "c1"}"#,
                    &format!(r#""fast": {{"cluster": "c1", "cache": {cache}}}"#),
                )
                .replace(
                    r#""smart": {"cluster": "c2""#,
                    r#""embed": {"cluster": "c3"}, "smart": {"cluster": "c2""#,
                )
        };
        let e = Config::parse(
            cached(r#"{"semantic": {"embedding_group": "embed"}}"#).as_bytes(),
            env,
        )
        .unwrap_err();
        assert!(e.contains("has a semantic cache"), "{e}");
        Config::parse(cached("{}").as_bytes(), env).unwrap();
        let e = Config::parse(
            with(r#"{"group": "fast", "max_block_bytes": 0}"#, calls).as_bytes(),
            env,
        )
        .unwrap_err();
        assert!(e.contains("max_block_bytes: 1 to 1048576"), "{e}");
    }

    #[test]
    fn a_ladder_routes_its_group_to_the_ladder_cluster() {
        let doc = GOOD.replace(
            r#"{"cluster": "c1"}"#,
            r#"{"cluster": "c1", "fallback": ["smart"]}"#,
        );
        let c = Config::parse(doc.as_bytes(), env).unwrap();
        assert_eq!(c.model_groups["fast"].candidates[0].cluster, "ladder_fast");
        assert_eq!(c.model_groups["smart"].candidates[0].cluster, "c2");
    }

    #[test]
    fn errors_never_contain_the_key() {
        let doc = GOOD.replace(
            "\"api_key\": \"k\"",
            "\"api_key\": \"sk-verysecret\", \"api_key_env\": \"OA_KEY\"",
        );
        let err = Config::parse(doc.as_bytes(), env).unwrap_err();
        assert!(!err.contains("sk-verysecret"), "{err}");
    }
}

/// The configuration reference (the book's `docs/src/reference/configuration.md`)
/// cannot drift from the code: every field serde knows must have its row there.
#[cfg(test)]
mod reference {
    use serde::de::{self, DeserializeOwned, Visitor};
    use serde::forward_to_deserialize_any;

    use super::*;
    use crate::auth::GatewayKey;
    use crate::routing::{Capabilities, RuleMatch};

    /// A deserializer that only records the field names a struct asks for.
    struct FieldNames<'a>(&'a mut Vec<&'static str>);

    impl<'de> de::Deserializer<'de> for FieldNames<'_> {
        type Error = de::value::Error;

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            self.0.extend_from_slice(fields);
            Err(de::Error::custom("fields recorded"))
        }

        fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }

        forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }

    fn fields<T: DeserializeOwned>() -> Vec<&'static str> {
        let mut names = Vec::new();
        let _ = T::deserialize(FieldNames(&mut names));
        names
    }

    #[test]
    fn every_config_field_is_documented_in_the_reference() {
        let readme = include_str!("../docs/src/reference/configuration.md");
        let sections: Vec<(&str, Vec<&'static str>)> = vec![
            ("", fields::<Config>()),
            ("providers.*.", fields::<Provider>()),
            ("providers.*.prices.*.", fields::<crate::metering::Price>()),
            ("model_groups.*.", fields::<ModelGroup>()),
            ("model_groups.*.candidates[].", fields::<Candidate>()),
            ("model_groups.*.cache.", fields::<crate::cache::Settings>()),
            (
                "model_groups.*.cache.semantic.",
                fields::<crate::cache::semantic::Settings>(),
            ),
            (
                "model_groups.*.candidates[].capabilities.",
                fields::<Capabilities>(),
            ),
            ("rules[].", fields::<Rule>()),
            ("rules[].match.", fields::<RuleMatch>()),
            ("auth.", fields::<Auth>()),
            ("auth.keys[].", fields::<GatewayKey>()),
            ("limits.", fields::<Limits>()),
            ("limits.rate[].", fields::<crate::limits::RateLimit>()),
            ("streaming.", fields::<Streaming>()),
            (
                "response_store.",
                fields::<crate::responses_store::Bounds>(),
            ),
            ("self_calls.", fields::<SelfCalls>()),
            ("shared_state.", fields::<crate::shared_state::Settings>()),
            (
                "shared_state.service.",
                fields::<crate::shared_state::remote::Service>(),
            ),
            ("diagnostics.", fields::<Diagnostics>()),
            (
                "diagnostics.admin_keys[].",
                fields::<diagnostics::AdminKey>(),
            ),
            ("discovery.", fields::<crate::discovery::Settings>()),
            (
                "discovery.providers.*.",
                fields::<crate::discovery::Source>(),
            ),
            ("model_facts.", fields::<crate::catalog::Settings>()),
            (
                "model_facts.models.*.",
                fields::<crate::catalog::Configured>(),
            ),
        ];
        let mut missing = Vec::new();
        // The dialects' own settings, written at the provider level.
        for kind in DialectKind::ALL {
            for key in crate::dialects::settings::keys(*kind) {
                let row = format!("| `providers.*.{}` |", key.name);
                if !readme.contains(&row) {
                    missing.push(row);
                }
            }
        }
        for (prefix, names) in &sections {
            assert!(!names.is_empty(), "no fields recorded under '{prefix}'");
            for name in names {
                let row = format!("| `{prefix}{name}` |");
                if !readme.contains(&row) {
                    missing.push(row);
                }
            }
        }
        assert!(
            missing.is_empty(),
            "docs/src/reference/configuration.md lacks configuration rows:\n{}",
            missing.join("\n")
        );
    }
}
