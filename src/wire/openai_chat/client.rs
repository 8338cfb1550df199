//! Chat Completions, the request as a client sends it (`POST
//! /v1/chat/completions`), read by the chat surface
//! (`surfaces::openai_chat::request`), which maps it onto the neutral
//! request. Strings borrow the body unless they hold escapes; what the
//! neutral request keeps as JSON (tool `parameters`, a schema, the members
//! it does not model) is read as a [`Strict`] `Value`.
//!
//! Strict, as serde reads: duplicate keys are refused at every depth,
//! wrong types with serde's words, each error named by its path
//! (`messages[2].role: ...`) where it is found. The messages are in
//! `client/messages.rs`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::{text, Text};
use crate::model::json::{at, Index, Stop, Strict};
use crate::model::request::{Effort, MAX_MESSAGES};
use crate::wire::syntax::Key;

mod messages;
pub use messages::{Content, ContentPart, ImageUrl, Message, ReasoningBlock};

/// The request body, plus our `request_id`.
pub struct Request<'a> {
    pub model: Cow<'a, str>,
    pub messages: Vec<Message<'a>>,
    pub tools: Vec<ChatTool<'a>>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    pub response_format: Option<ResponseFormat>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub max_completion_tokens: Option<u32>,
    pub stop: Vec<String>,
    pub seed: Option<i64>,
    pub user: Option<Cow<'a, str>>,
    pub n: Option<u32>,
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    pub request_id: Option<Cow<'a, str>>,
    pub reasoning_effort: Option<Effort>,
    pub reasoning: Option<ReasoningOptions>,
    /// Given (even as null): kept as written besides what it asks for.
    pub web_search_options: Option<WebSearchOptions>,
    /// The members no field above models, as written.
    pub extra: BTreeMap<Cow<'a, str>, Value>,
}

/// The members [`Request`] has a field for; each a bit of the mask of
/// those seen.
#[derive(Clone, Copy)]
enum Member {
    Model,
    Messages,
    Tools,
    ToolChoice,
    ParallelToolCalls,
    ResponseFormat,
    Temperature,
    TopP,
    MaxTokens,
    MaxCompletionTokens,
    Stop,
    Seed,
    User,
    N,
    Stream,
    StreamOptions,
    RequestId,
    ReasoningEffort,
    Reasoning,
    WebSearchOptions,
    /// One kept as written (`extra`).
    Other,
}

impl Member {
    fn of(key: &str) -> Member {
        match key {
            "model" => Member::Model,
            "messages" => Member::Messages,
            "tools" => Member::Tools,
            "tool_choice" => Member::ToolChoice,
            "parallel_tool_calls" => Member::ParallelToolCalls,
            "response_format" => Member::ResponseFormat,
            "temperature" => Member::Temperature,
            "top_p" => Member::TopP,
            "max_tokens" => Member::MaxTokens,
            "max_completion_tokens" => Member::MaxCompletionTokens,
            "stop" => Member::Stop,
            "seed" => Member::Seed,
            "user" => Member::User,
            "n" => Member::N,
            "stream" => Member::Stream,
            "stream_options" => Member::StreamOptions,
            "request_id" => Member::RequestId,
            "reasoning_effort" => Member::ReasoningEffort,
            "reasoning" => Member::Reasoning,
            "web_search_options" => Member::WebSearchOptions,
            _ => Member::Other,
        }
    }
}

impl<'de> Deserialize<'de> for Request<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RequestVisitor)
    }
}

struct RequestVisitor;

impl<'de> Visitor<'de> for RequestVisitor {
    type Value = Request<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Request<'de>, A::Error> {
        let mut r = Request {
            model: Cow::Borrowed(""),
            messages: Vec::new(),
            tools: Vec::new(),
            tool_choice: None,
            parallel_tool_calls: None,
            response_format: None,
            temperature: None,
            top_p: None,
            max_tokens: None,
            max_completion_tokens: None,
            stop: Vec::new(),
            seed: None,
            user: None,
            n: None,
            stream: false,
            stream_options: None,
            request_id: None,
            reasoning_effort: None,
            reasoning: None,
            web_search_options: None,
            extra: BTreeMap::new(),
        };
        // The modelled members seen, a bit each.
        let mut seen = 0u32;
        let mut has_model = false;
        let mut has_messages = false;
        while let Some(Key(key)) = map.next_key()? {
            // Duplicate keys are ambiguous (parsers disagree on which wins): refuse them.
            let member = Member::of(&key);
            let bit = 1u32 << member as u32;
            let given = match member {
                Member::Other => r.extra.contains_key(&key),
                _ => seen & bit != 0,
            };
            if given {
                return Err(de::Error::custom(format!("{key}: duplicate field")));
            }
            seen |= bit;
            match member {
                Member::Model => {
                    r.model = at("model", map.next_value::<Text>())?.0;
                    has_model = true;
                }
                Member::Messages => {
                    r.messages = at("messages", map.next_value::<Messages>())?.0;
                    has_messages = true;
                }
                Member::Tools => {
                    r.tools = at("tools", map.next_value::<Option<Listed<ChatTool>>>())?
                        .map(|t| t.0)
                        .unwrap_or_default()
                }
                Member::ToolChoice => r.tool_choice = at("tool_choice", map.next_value())?,
                Member::ParallelToolCalls => {
                    r.parallel_tool_calls = at("parallel_tool_calls", map.next_value())?
                }
                Member::ResponseFormat => {
                    r.response_format = at("response_format", map.next_value())?
                }
                Member::Temperature => r.temperature = at("temperature", map.next_value())?,
                Member::TopP => r.top_p = at("top_p", map.next_value())?,
                Member::MaxTokens => r.max_tokens = at("max_tokens", map.next_value())?,
                Member::MaxCompletionTokens => {
                    r.max_completion_tokens = at("max_completion_tokens", map.next_value())?
                }
                Member::Stop => {
                    r.stop = at("stop", map.next_value::<Option<Stop>>())?
                        .map(|s| s.0)
                        .unwrap_or_default()
                }
                Member::Seed => r.seed = at("seed", map.next_value())?,
                Member::User => r.user = at("user", map.next_value::<Option<Text>>())?.map(|t| t.0),
                Member::N => r.n = at("n", map.next_value())?,
                Member::Stream => {
                    r.stream = at("stream", map.next_value::<Option<bool>>())?.unwrap_or(false)
                }
                Member::StreamOptions => r.stream_options = at("stream_options", map.next_value())?,
                Member::RequestId => {
                    r.request_id = at("request_id", map.next_value::<Option<Text>>())?.map(|t| t.0)
                }
                Member::ReasoningEffort => {
                    let effort: Option<EffortName> = at("reasoning_effort", map.next_value())?;
                    r.reasoning_effort = effort.map(|EffortName(e)| e);
                }
                Member::Reasoning => r.reasoning = at("reasoning", map.next_value())?,
                Member::WebSearchOptions => {
                    let Strict(json) = at("web_search_options", map.next_value())?;
                    let user_location = web_search(&json).map_err(de::Error::custom)?;
                    r.web_search_options = Some(WebSearchOptions {
                        json,
                        user_location,
                    });
                }
                Member::Other => {
                    let Strict(value) = at(&key, map.next_value())?;
                    r.extra.insert(key, value);
                }
            }
        }
        if !has_model {
            return Err(de::Error::custom("model: missing field"));
        }
        if !has_messages {
            return Err(de::Error::custom("messages: missing field"));
        }
        if r.reasoning_effort.is_some() && r.reasoning.is_some() {
            return Err(de::Error::custom(
                "reasoning: give reasoning_effort or reasoning, not both",
            ));
        }
        Ok(r)
    }
}

/// `messages`, with the index of a bad element in the error.
struct Messages<'a>(Vec<Message<'a>>);

impl<'de> Deserialize<'de> for Messages<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Messages<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of messages")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Messages<'de>, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                loop {
                    if out.len() >= MAX_MESSAGES {
                        return Err(de::Error::custom(format!(
                            "at most {MAX_MESSAGES} messages are accepted"
                        )));
                    }
                    let i = out.len();
                    match at(Index(i), seq.next_element::<Message>())? {
                        Some(m) => out.push(m),
                        None => return Ok(Messages(out)),
                    }
                }
            }
        }
        d.deserialize_seq(V)
    }
}

/// `web_search_options`: `{search_context_size, user_location: {type:
/// "approximate", approximate: {city, region, country, timezone}}}`, the
/// web search OpenAI's search models run. The other vendors' own search
/// gets the user's location (`search_context_size` has no counterpart
/// there: checked, not carried); the OpenAI dialects send the field as
/// written (`json`).
pub struct WebSearchOptions {
    pub json: Value,
    pub user_location: Option<Location>,
}

/// `web_search_options.user_location.approximate`.
pub struct Location {
    pub city: Option<String>,
    pub region: Option<String>,
    pub country: Option<String>,
    pub timezone: Option<String>,
}

/// The location `web_search_options` gives, checked. Errors are `path:
/// message`, the path of the offending member.
fn web_search(value: &Value) -> Result<Option<Location>, String> {
    const AT: &str = "web_search_options";
    if value.is_null() {
        return Ok(None);
    }
    let m = members(value, AT, &["search_context_size", "user_location"])?;
    if let Some(size) = member_text(m, "search_context_size", AT)? {
        if !["low", "medium", "high"].contains(&size) {
            return Err(format!(
                "{AT}.search_context_size: unknown value '{size}', expected low, medium or high"
            ));
        }
    }
    let Some(location) = m.get("user_location").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let at = format!("{AT}.user_location");
    let l = members(location, &at, &["type", "approximate"])?;
    match member_text(l, "type", &at)? {
        None | Some("approximate") => {}
        Some(kind) => {
            return Err(format!(
                "{at}.type: unknown value '{kind}', expected approximate"
            ))
        }
    }
    let Some(approximate) = l.get("approximate").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let at = format!("{at}.approximate");
    let a = members(approximate, &at, &["city", "region", "country", "timezone"])?;
    let owned = |key| member_text(a, key, &at).map(|s| s.map(str::to_owned));
    Ok(Some(Location {
        city: owned("city")?,
        region: owned("region")?,
        country: owned("country")?,
        timezone: owned("timezone")?,
    }))
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
fn member_text<'a>(
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

/// An array whose element errors name the index (`[2].function...`).
struct Listed<T>(Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Listed<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Listed<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Listed<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = at(Index(out.len()), seq.next_element())? {
                    out.push(item);
                }
                Ok(Listed(out))
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
    }
}

/// Stores a field's value, refusing a second one (parsers disagree on which wins).
fn once<T, E: de::Error>(slot: &mut Option<T>, name: &str, value: Result<T, E>) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::custom(format!("{name}: duplicate field")));
    }
    *slot = Some(at(name, value)?);
    Ok(())
}

fn missing<E: de::Error>(name: &str) -> E {
    E::custom(format!("{name}: missing field"))
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
    mode_field => "mode",
    cache_control_field => "cache_control",
    function_field => "function",
    json_schema_field => "json_schema",
);

/// A JSON Schema member (`parameters`, `schema`): an object, without
/// duplicate keys.
fn schema_object<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    match Option::<Strict>::deserialize(d)? {
        None => Ok(None),
        Some(Strict(v @ Value::Object(_))) => Ok(Some(v)),
        Some(_) => Err(de::Error::custom("must be a JSON Schema object")),
    }
}

fn parameters_field<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    at("parameters", schema_object(d))
}

fn schema_field<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    at("schema", schema_object(d))
}

/// `type` where only `"function"` is taken. (Serde's errors name the
/// type, "expected struct ChatTool": names are kept as they were.)
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    Function,
}

/// A tool definition, with the prompt-cache breakpoint Anthropic-format
/// clients put on it (`cache_control`, as LiteLLM and OpenRouter take it).
#[derive(Deserialize)]
pub struct ChatTool<'a> {
    #[serde(rename = "type")]
    pub kind: ToolKind,
    #[serde(borrow, deserialize_with = "function_field")]
    pub function: FunctionDef<'a>,
    #[serde(default, deserialize_with = "cache_control_field")]
    pub cache_control: Option<CacheControlIn>,
}

#[derive(Deserialize)]
pub struct FunctionDef<'a> {
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, deserialize_with = "parameters_field")]
    pub parameters: Option<Value>,
    #[serde(default)]
    pub strict: Option<bool>,
}

/// `tool_choice`: a mode, or `{"type": "function", "function": {"name"}}`.
pub enum ToolChoice {
    None,
    Auto,
    Required,
    Function(String),
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Named {
            #[serde(rename = "type")]
            _kind: ToolKind,
            function: NamedFunction,
        }
        #[derive(Deserialize)]
        struct NamedFunction {
            name: String,
        }
        let Strict(value) = Strict::deserialize(d)?;
        match value {
            Value::String(s) => match s.as_str() {
                "none" => Ok(ToolChoice::None),
                "auto" => Ok(ToolChoice::Auto),
                "required" => Ok(ToolChoice::Required),
                other => Err(de::Error::custom(format!(
                    "unknown value '{other}', expected none, auto, required or a function object"
                ))),
            },
            obj @ Value::Object(_) => {
                let named: Named = serde_json::from_value(obj).map_err(de::Error::custom)?;
                Ok(ToolChoice::Function(named.function.name))
            }
            _ => Err(de::Error::custom("expected a string or an object")),
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema {
        #[serde(deserialize_with = "json_schema_field")]
        json_schema: JsonSchema,
    },
}

#[derive(Deserialize)]
pub struct JsonSchema {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, deserialize_with = "schema_field")]
    pub schema: Option<Value>,
    #[serde(default)]
    pub strict: Option<bool>,
}

/// `{"type": "ephemeral", "ttl": "5m" | "1h"}`, Anthropic's breakpoint.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheControlIn {
    #[serde(rename = "type", deserialize_with = "type_field")]
    _kind: Ephemeral,
    #[serde(default, deserialize_with = "ttl_field")]
    pub ttl: Option<CacheTtl>,
}

#[derive(Deserialize)]
enum Ephemeral {
    #[serde(rename = "ephemeral")]
    Ephemeral,
}

#[derive(Deserialize, Clone, Copy)]
pub enum CacheTtl {
    #[serde(rename = "5m")]
    FiveMinutes,
    #[serde(rename = "1h")]
    OneHour,
    /// OpenAI's breakpoint lifetimes ([`Breakpoint`]), not `cache_control`'s.
    #[serde(skip)]
    ThirtyMinutes,
    #[serde(skip)]
    TwelveHours,
}

impl CacheTtl {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheTtl::FiveMinutes => "5m",
            CacheTtl::OneHour => "1h",
            CacheTtl::ThirtyMinutes => "30m",
            CacheTtl::TwelveHours => "12h",
        }
    }
}

/// OpenAI's `prompt_cache_breakpoint` on a content part (GPT-5.6 and
/// later): `{"mode": "explicit", "ttl"?: "30m" | "12h"}`, the prefix up to
/// the part's end reusable; read as the breakpoint `cache_control` is.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Breakpoint {
    #[serde(deserialize_with = "mode_field")]
    mode: Explicit,
    #[serde(default, deserialize_with = "ttl_field")]
    ttl: Option<BreakpointTtl>,
}

#[derive(Deserialize)]
enum Explicit {
    #[serde(rename = "explicit")]
    Explicit,
}

#[derive(Deserialize)]
enum BreakpointTtl {
    #[serde(rename = "30m")]
    ThirtyMinutes,
    #[serde(rename = "12h")]
    TwelveHours,
}

impl From<Breakpoint> for CacheControlIn {
    fn from(b: Breakpoint) -> Self {
        let Explicit::Explicit = b.mode;
        CacheControlIn {
            _kind: Ephemeral::Ephemeral,
            ttl: b.ttl.map(|ttl| match ttl {
                BreakpointTtl::ThirtyMinutes => CacheTtl::ThirtyMinutes,
                BreakpointTtl::TwelveHours => CacheTtl::TwelveHours,
            }),
        }
    }
}

/// `reasoning_effort` (OpenAI's field): one of the effort names.
struct EffortName(Effort);

impl<'de> Deserialize<'de> for EffortName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Text(name) = Text::deserialize(d)?;
        Effort::parse(&name).map(EffortName).ok_or_else(|| {
            de::Error::custom(format!(
                "unknown value '{name}', expected none, minimal, low, medium, high, xhigh or max"
            ))
        })
    }
}

/// OpenRouter's `reasoning` object: an effort, a token budget
/// (`max_tokens`), or `enabled` alone (`false`: effort none; `true`: the
/// vendor's default amount).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasoningOptions {
    #[serde(default, deserialize_with = "effort_field")]
    effort: Option<EffortName>,
    #[serde(default, deserialize_with = "max_tokens_field")]
    pub max_tokens: Option<u32>,
    #[serde(default, deserialize_with = "enabled_field")]
    pub enabled: Option<bool>,
}

impl ReasoningOptions {
    pub fn effort(&self) -> Option<Effort> {
        self.effort.as_ref().map(|EffortName(e)| *e)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}
