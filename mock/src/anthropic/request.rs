//! Anthropic request checks: the fields a request may have, sampling
//! parameters, thinking and prompt caching, and the system prompt.

use serde_json::{Map, Value};

use crate::dialect::Failure;

/// The request's fields: the `anthropic` SDK's (2.10.0)
/// `MessageCreateParams`, the sampling parameters older models take, and
/// `context_management` (beta `context-management-2025-06-27`, which Claude
/// Code sends).
pub(super) const TOP_LEVEL: [&str; 23] = [
    "context_management",
    "model",
    "messages",
    "max_tokens",
    "system",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "thinking",
    "service_tier",
    "cache_control",
    "container",
    "diagnostics",
    "inference_geo",
    "output_config",
    "speed",
    "user_profile_id",
    "workspace_id",
];

/// The fields of `POST /v1/messages/count_tokens` (the `anthropic` SDK's
/// 2.10.0 `MessageCountTokensParams`, and `context_management` of its
/// beta's, as for Messages): a Messages request's, without `max_tokens`,
/// `stream`, `metadata` and the sampling parameters, which it refuses as
/// extra inputs.
pub(super) const COUNT_FIELDS: [&str; 12] = [
    "context_management",
    "model",
    "messages",
    "cache_control",
    "output_config",
    "speed",
    "system",
    "thinking",
    "tool_choice",
    "tools",
    "user_profile_id",
    "workspace_id",
];

/// Models that still take `temperature` and `top_p` together: Claude 3.x
/// and older. Every later model (Sonnet 4.5, Haiku 4.5, Opus 4.1 and on)
/// refuses both ("You should either alter temperature or top_p, but not
/// both", docs.anthropic.com/en/api/messages#body-top-p); the mock's own
/// model names (mock-claude-sonnet) count as current.
pub(super) fn takes_temperature_and_top_p(model: &str) -> bool {
    ["claude-3", "claude-2", "claude-instant"]
        .iter()
        .any(|old| model.contains(old))
}

/// A sampling parameter's range check ("Input should be less than or equal to 1").
pub(super) fn check_unit_range(obj: &Map<String, Value>, name: &str) -> Result<(), Failure> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(()),
        Some(v) => match v.as_f64() {
            Some(x) if x > 1.0 => Err(invalid(format!(
                "{name}: Input should be less than or equal to 1"
            ))),
            Some(x) if x < 0.0 => Err(invalid(format!(
                "{name}: Input should be greater than or equal to 0"
            ))),
            Some(_) => Ok(()),
            None => Err(invalid(format!("{name}: Input should be a valid number"))),
        },
    }
}

pub(super) fn invalid(msg: impl Into<String>) -> Failure {
    Failure::Invalid(msg.into())
}

pub(super) fn str_field<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a str, Failure> {
    match v.get(key) {
        None => Err(invalid(format!("{at}.{key}: Field required"))),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(invalid(format!(
            "{at}.{key}: Input should be a valid string"
        ))),
    }
}

// --- thinking and prompt caching ---------------------------------------------

/// Prompts shorter than this are not cached, without an error
/// (docs.claude.com, "Prompt caching", cache limitations: 1024 tokens for
/// Sonnet and Opus models).
pub(super) const MIN_CACHEABLE_WORDS: u64 = 1024;

/// At most this many `cache_control` breakpoints per request ("A maximum
/// of 4 blocks with cache_control may be provided").
pub(super) const MAX_BREAKPOINTS: usize = 4;

/// Prompt prefixes cached so far (a later request with the same prefix
/// reads it).
pub(super) fn cache() -> &'static crate::scenario::SeenIds {
    static CACHE: std::sync::OnceLock<crate::scenario::SeenIds> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| crate::scenario::SeenIds::new(4096))
}

/// `thinking`: on with a budget, adaptive, or off; Anthropic's rules
/// (docs.claude.com, "Extended thinking": `budget_tokens` >= 1024 and below
/// `max_tokens`; "Feature compatibility": no `temperature` but 1, no
/// `top_k`, `top_p` >= 0.95, no forced tool use).
pub(super) fn check_thinking(
    obj: &Map<String, Value>,
    max_tokens: u64,
    model: &str,
) -> Result<bool, Failure> {
    let effort = obj.get("output_config").and_then(|c| c.get("effort"));
    if let Some(effort) = effort.and_then(Value::as_str) {
        if !crate::claude_modes::EFFORTS.contains(&effort) {
            return Err(invalid(
                "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'",
            ));
        }
    }
    let Some(t) = obj.get("thinking").filter(|t| !t.is_null()) else {
        return Ok(false);
    };
    if let Some(kind) = t.get("type").and_then(Value::as_str) {
        crate::claude_modes::check_mode(kind, model).map_err(invalid)?;
    }
    let on = match t.get("type").and_then(Value::as_str) {
        Some("enabled") => {
            let budget = match t.get("budget_tokens") {
                None => return Err(invalid("thinking.enabled.budget_tokens: Field required")),
                Some(b) => b.as_u64().ok_or_else(|| {
                    invalid("thinking.enabled.budget_tokens: Input should be a valid integer")
                })?,
            };
            if budget < 1024 {
                return Err(invalid(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
                ));
            }
            if budget >= max_tokens {
                return Err(invalid(
                    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size",
                ));
            }
            true
        }
        Some("adaptive") => true,
        Some("disabled") => false,
        _ => {
            return Err(invalid(
                "thinking: Input tag does not match any of the expected tags: 'adaptive', 'disabled', 'enabled'",
            ))
        }
    };
    if !on {
        return Ok(false);
    }
    if obj
        .get("temperature")
        .and_then(Value::as_f64)
        .is_some_and(|t| t != 1.0)
    {
        return Err(invalid(
            "`temperature` may only be set to 1 when thinking is enabled or in interleaved thinking mode. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility",
        ));
    }
    if obj.get("top_k").is_some_and(|k| !k.is_null()) {
        return Err(invalid(
            "`top_k` is not supported when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility",
        ));
    }
    if obj
        .get("top_p")
        .and_then(Value::as_f64)
        .is_some_and(|p| p < 0.95)
    {
        return Err(invalid(
            "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility",
        ));
    }
    if matches!(
        obj.get("tool_choice")
            .and_then(|c| c.get("type"))
            .and_then(Value::as_str),
        Some("any" | "tool")
    ) {
        return Err(invalid(
            "Thinking may not be enabled when tool_choice forces tool use.",
        ));
    }
    Ok(true)
}

/// The `cache_control` breakpoints of blocks in `list` (system blocks,
/// tools, a message's content).
pub(super) fn breakpoints(list: Option<&Value>) -> usize {
    list.and_then(Value::as_array).map_or(0, |blocks| {
        blocks
            .iter()
            .map(|b| {
                usize::from(b.get("cache_control").is_some_and(|c| !c.is_null()))
                    + breakpoints(b.get("content"))
            })
            .sum()
    })
}

/// The gateway asks Anthropic and Bedrock for JSON in the system prompt
/// ("Respond with a single valid JSON object ... this JSON schema: {...}"):
/// a model that reads it answers JSON. `Some(Some(schema))` when a schema
/// follows, `Some(None)` for any JSON object.
pub fn json_instruction(system: &str) -> Option<Option<Value>> {
    if !system.contains("JSON") {
        return None;
    }
    let schema = system
        .find("JSON schema: ")
        .and_then(|at| system.get(at + "JSON schema: ".len()..))
        .and_then(|rest| {
            serde_json::Deserializer::from_str(rest)
                .into_iter::<Value>()
                .next()
                .and_then(Result::ok)
        });
    Some(schema)
}

pub(super) fn system_text(system: Option<&Value>) -> Result<String, Failure> {
    match system {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .enumerate()
            .map(|(i, b)| str_field(b, "text", &format!("system.{i}")).map(str::to_owned))
            .collect::<Result<Vec<_>, _>>()
            .map(|t| t.join(" ")),
        Some(_) => Err(invalid(
            "system: Input should be a valid string or a valid list",
        )),
    }
}
