//! Temporary: the hand-written visitors the chat surface parsed with
//! before its wire types, kept for the differential test.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::error::GatewayError;
use crate::model::json::{at, body_error, missing, once, Index, Listed, Stop, Strict};
use crate::model::request::*;

pub(super) fn parse(body: &[u8]) -> Result<ChatRequest, GatewayError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(GatewayError::invalid("body", "request body is empty"));
    }
    let request = serde_json::from_slice::<ChatRequest>(body).map_err(body_error)?;
    request.validate()?;
    Ok(ChatRequest {
        source_len: body.len(),
        ..request
    })
}

impl<'de> Deserialize<'de> for ChatRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RequestVisitor)
    }
}

struct RequestVisitor;

impl<'de> Visitor<'de> for RequestVisitor {
    type Value = ChatRequest;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ChatRequest, A::Error> {
        let mut r = ChatRequest::default();
        let mut seen: Vec<String> = Vec::new();
        let mut has_model = false;
        let mut has_messages = false;
        // Which of the two reasoning fields set something.
        let mut reasoning_fields = (false, false);
        while let Some(key) = map.next_key::<String>()? {
            // Duplicate keys are ambiguous (parsers disagree on which wins): refuse them.
            if seen.iter().any(|k| k == &key) || r.extra.contains_key(&key) {
                return Err(de::Error::custom(format!("{key}: duplicate field")));
            }
            match key.as_str() {
                "model" => {
                    r.model = at("model", map.next_value())?;
                    has_model = true;
                }
                "messages" => {
                    r.messages = at("messages", map.next_value::<Messages>())?.0.into();
                    has_messages = true;
                }
                "tools" => {
                    r.tools = at("tools", map.next_value::<Option<Listed<ChatTool>>>())?
                        .map(|t| t.0.into_iter().map(ChatTool::into_tool).collect())
                        .unwrap_or_default()
                }
                "tool_choice" => r.tool_choice = at("tool_choice", map.next_value())?,
                "parallel_tool_calls" => {
                    r.parallel_tool_calls = at("parallel_tool_calls", map.next_value())?
                }
                "response_format" => r.response_format = at("response_format", map.next_value())?,
                "temperature" => r.temperature = at("temperature", map.next_value())?,
                "top_p" => r.top_p = at("top_p", map.next_value())?,
                "max_tokens" => r.max_tokens = at("max_tokens", map.next_value())?,
                "max_completion_tokens" => {
                    r.max_completion_tokens = at("max_completion_tokens", map.next_value())?
                }
                "stop" => {
                    r.stop = at("stop", map.next_value::<Option<Stop>>())?
                        .map(|s| s.0)
                        .unwrap_or_default()
                }
                "seed" => r.seed = at("seed", map.next_value())?,
                "user" => r.user = at("user", map.next_value())?,
                "n" => r.n = at("n", map.next_value())?,
                "stream" => {
                    r.stream = at("stream", map.next_value::<Option<bool>>())?.unwrap_or(false)
                }
                "stream_options" => {
                    let opts: Option<StreamOptions> = at("stream_options", map.next_value())?;
                    r.include_usage = opts.and_then(|o| o.include_usage).unwrap_or(false);
                }
                "request_id" => r.request_id = at("request_id", map.next_value())?,
                "reasoning_effort" => {
                    let effort: Option<EffortName> = at("reasoning_effort", map.next_value())?;
                    if let Some(EffortName(effort)) = effort {
                        let reasoning = r.reasoning.get_or_insert_with(Reasoning::default);
                        reasoning.effort = Some(effort);
                        reasoning_fields.0 = true;
                    }
                }
                "reasoning" => {
                    let options: Option<ReasoningOptions> = at("reasoning", map.next_value())?;
                    if let Some(options) = options {
                        r.reasoning = Some(options.into_reasoning());
                        reasoning_fields.1 = true;
                    }
                }
                // Typed for the vendors with a search of their own, and
                // kept as written for OpenAI's (see [`web_search`]).
                "web_search_options" => {
                    let Strict(value) = at("web_search_options", map.next_value())?;
                    r.web_search = web_search(&value).map_err(de::Error::custom)?;
                    r.extra.insert(key, value);
                    continue;
                }
                _ => {
                    let Strict(value) = at(&key, map.next_value())?;
                    r.extra.insert(key, value);
                    continue;
                }
            }
            seen.push(key);
        }
        if !has_model {
            return Err(de::Error::custom("model: missing field"));
        }
        if !has_messages {
            return Err(de::Error::custom("messages: missing field"));
        }
        if reasoning_fields == (true, true) {
            return Err(de::Error::custom(
                "reasoning: give reasoning_effort or reasoning, not both",
            ));
        }
        Ok(r)
    }
}

/// `web_search_options`: `{search_context_size, user_location: {type:
/// "approximate", approximate: {city, region, country, timezone}}}`, the
/// web search OpenAI's search models run. The other vendors' own search
/// gets the user's location (`search_context_size` has no counterpart
/// there: checked, not carried); the OpenAI dialects send the field as
/// written (it stays in `extra`). Errors are `path: message`, the path of
/// the offending member.
fn web_search(value: &Value) -> Result<Option<WebSearch>, String> {
    const AT: &str = "web_search_options";
    if value.is_null() {
        return Ok(None);
    }
    let m = members(value, AT, &["search_context_size", "user_location"])?;
    if let Some(size) = text(m, "search_context_size", AT)? {
        if !["low", "medium", "high"].contains(&size) {
            return Err(format!(
                "{AT}.search_context_size: unknown value '{size}', expected low, medium or high"
            ));
        }
    }
    let mut search = WebSearch::default();
    if let Some(location) = m.get("user_location").filter(|v| !v.is_null()) {
        let at = format!("{AT}.user_location");
        let l = members(location, &at, &["type", "approximate"])?;
        match text(l, "type", &at)? {
            None | Some("approximate") => {}
            Some(kind) => {
                return Err(format!(
                    "{at}.type: unknown value '{kind}', expected approximate"
                ))
            }
        }
        if let Some(approximate) = l.get("approximate").filter(|v| !v.is_null()) {
            let at = format!("{at}.approximate");
            let a = members(approximate, &at, &["city", "region", "country", "timezone"])?;
            let owned = |key| text(a, key, &at).map(|s| s.map(str::to_owned));
            search.user_location = Some(UserLocation {
                city: owned("city")?,
                region: owned("region")?,
                country: owned("country")?,
                timezone: owned("timezone")?,
            });
        }
    }
    Ok(Some(search))
}

/// The members of the object at `path`, refusing any not `allowed`.
fn members<'a>(
    value: &'a Value,
    path: &str,
    allowed: &[&str],
) -> Result<&'a serde_json::Map<String, Value>, String> {
    let map = value
        .as_object()
        .ok_or_else(|| format!("{path}: invalid type, expected an object"))?;
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(format!(
            "{path}.{key}: unknown field `{key}`, expected one of {}",
            allowed
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        None => Ok(map),
    }
}

/// Member `key` of the object at `path`: a string, or absent (or null).
fn text<'a>(
    map: &'a serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<&'a str>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("{path}.{key}: invalid type, expected a string")),
    }
}

/// Deserialisers that put a field's name in front of its errors, as the
/// hand-written visitors here do (derived structs do not).
macro_rules! named_fields {
    ($($f:ident => $name:literal),* $(,)?) => {$(
        fn $f<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
            at($name, T::deserialize(d))
        }
    )*};
}

named_fields!(
    type_field => "type",
    effort_field => "effort",
    max_tokens_field => "max_tokens",
    enabled_field => "enabled",
    ttl_field => "ttl",
    cache_control_field => "cache_control",
);

/// A tool definition, with the prompt-cache breakpoint Anthropic-format
/// clients put on it (`cache_control`, as LiteLLM and OpenRouter take it).
#[derive(Deserialize)]
struct ChatTool {
    #[serde(rename = "type")]
    kind: ToolKind,
    #[serde(deserialize_with = "crate::model::json::function_def")]
    function: FunctionDef,
    #[serde(default, deserialize_with = "cache_control_field")]
    cache_control: Option<CacheControlIn>,
}

impl ChatTool {
    fn into_tool(self) -> Tool {
        Tool {
            kind: self.kind,
            function: self.function,
            cache_control: self.cache_control.map(CacheControlIn::into_model),
        }
    }
}

/// `{"type": "ephemeral", "ttl": "5m" | "1h"}`, Anthropic's breakpoint.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheControlIn {
    #[serde(rename = "type", deserialize_with = "type_field")]
    _kind: Ephemeral,
    #[serde(default, deserialize_with = "ttl_field")]
    ttl: Option<CacheTtl>,
}

#[derive(Deserialize)]
enum Ephemeral {
    #[serde(rename = "ephemeral")]
    Ephemeral,
}

#[derive(Deserialize, Clone, Copy)]
enum CacheTtl {
    #[serde(rename = "5m")]
    FiveMinutes,
    #[serde(rename = "1h")]
    OneHour,
}

impl CacheControlIn {
    fn into_model(self) -> CacheControl {
        let ttl = self.ttl.map(|t| match t {
            CacheTtl::FiveMinutes => "5m",
            CacheTtl::OneHour => "1h",
        });
        CacheControl {
            ttl: ttl.map(str::to_owned),
        }
    }
}

/// `reasoning_effort` (OpenAI's field): one of the effort names.
struct EffortName(Effort);

impl<'de> Deserialize<'de> for EffortName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Effort::parse(&name).map(EffortName).ok_or_else(|| {
            de::Error::custom(format!(
                "unknown value '{name}', expected none, minimal, low, medium or high"
            ))
        })
    }
}

/// OpenRouter's `reasoning` object: an effort, a token budget
/// (`max_tokens`), or `enabled` alone (`false`: effort none; `true`: the
/// vendor's default amount).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasoningOptions {
    #[serde(default, deserialize_with = "effort_field")]
    effort: Option<EffortName>,
    #[serde(default, deserialize_with = "max_tokens_field")]
    max_tokens: Option<u32>,
    #[serde(default, deserialize_with = "enabled_field")]
    enabled: Option<bool>,
}

impl ReasoningOptions {
    fn into_reasoning(self) -> Reasoning {
        let effort = match (self.effort, self.enabled) {
            (Some(EffortName(effort)), _) => Some(effort),
            (None, Some(false)) => Some(Effort::None),
            (None, _) => None,
        };
        Reasoning {
            effort,
            budget_tokens: self.max_tokens,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

mod messages;
use messages::Messages;
