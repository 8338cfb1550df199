//! Anthropic Messages (`POST /v1/messages`): header checks, body validation
//! with the real API's 400 messages, Messages objects, the event stream
//! (message_start ... message_stop) and error bodies.
//!
//! Long on purpose (about 1120 lines of code, then its tests): one vendor's
//! checks, with the real API's error messages, and its answers and streams,
//! in one file as for every vendor the mock speaks.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use crate::answer::{claude_signature, fragments, Answer, Finish};
use crate::dialect::{
    count_words, to_json, Dialect, Failure, Meta, Prompt, Reply, SseEvent, Tool, ToolChoice,
};
use crate::http::Request;
use crate::keys;

pub struct Anthropic;

pub const VERSION: &str = "2023-06-01";

/// The request's fields: the `anthropic` SDK's (2.10.0)
/// `MessageCreateParams`, the sampling parameters older models take, and
/// `context_management` (beta `context-management-2025-06-27`, which Claude
/// Code sends).
const TOP_LEVEL: [&str; 23] = [
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
const COUNT_FIELDS: [&str; 12] = [
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

/// Content block types we accept in messages (thinking blocks may be
/// echoed back in assistant turns when `thinking` is on).
const BLOCK_TYPES: [&str; 8] = [
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    // A server tool's call, sent back to continue a paused turn.
    "server_tool_use",
];

/// The keys of each content block type (docs.anthropic.com/en/api/messages,
/// "content" block schemas); others are refused "Extra inputs are not permitted".
fn block_keys(ty: &str) -> &'static [&'static str] {
    match ty {
        "text" => &["type", "text", "cache_control", "citations"],
        "image" => &["type", "source", "cache_control", "transformations"],
        "document" => &[
            "type",
            "source",
            "cache_control",
            "citations",
            "context",
            "title",
        ],
        "tool_use" => &[
            "type",
            "id",
            "name",
            "input",
            "cache_control",
            "caller",
            "toolset_name",
        ],
        "tool_result" => &[
            "type",
            "tool_use_id",
            "content",
            "is_error",
            "cache_control",
            "toolset_name",
        ],
        "thinking" => &["type", "thinking", "signature"],
        "redacted_thinking" => &["type", "data"],
        "server_tool_use" => &["type", "id", "name", "input", "cache_control"],
        _ => &[],
    }
}

/// The keys of a custom (client) tool (the SDK's `ToolParam`).
const TOOL_KEYS: [&str; 10] = [
    "type",
    "name",
    "description",
    "input_schema",
    "cache_control",
    "strict",
    "input_examples",
    "defer_loading",
    "allowed_callers",
    "eager_input_streaming",
];

/// Models that still take `temperature` and `top_p` together: Claude 3.x
/// and older. Every later model (Sonnet 4.5, Haiku 4.5, Opus 4.1 and on)
/// refuses both ("You should either alter temperature or top_p, but not
/// both", docs.anthropic.com/en/api/messages#body-top-p); the mock's own
/// model names (mock-claude-sonnet) count as current.
fn takes_temperature_and_top_p(model: &str) -> bool {
    ["claude-3", "claude-2", "claude-instant"]
        .iter()
        .any(|old| model.contains(old))
}

/// A sampling parameter's range check ("Input should be less than or equal to 1").
fn check_unit_range(obj: &Map<String, Value>, name: &str) -> Result<(), Failure> {
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

const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

fn invalid(msg: impl Into<String>) -> Failure {
    Failure::Invalid(msg.into())
}

fn str_field<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a str, Failure> {
    match v.get(key) {
        None => Err(invalid(format!("{at}.{key}: Field required"))),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(invalid(format!(
            "{at}.{key}: Input should be a valid string"
        ))),
    }
}

/// What one message contributes to the prompt.
#[derive(Default)]
struct MessageInfo {
    text: String,
    tool_use_ids: Vec<String>,
    tool_result_ids: Vec<String>,
    tool_result_texts: Vec<String>,
    /// The type of its first content block.
    first_block: String,
    /// Where each `cache_control` breakpoint falls: the words of the
    /// message's text before it (and after it, the whole message).
    breakpoints: usize,
}

// --- thinking and prompt caching ---------------------------------------------

/// Prompts shorter than this are not cached, without an error
/// (docs.claude.com, "Prompt caching", cache limitations: 1024 tokens for
/// Sonnet and Opus models).
const MIN_CACHEABLE_WORDS: u64 = 1024;

/// At most this many `cache_control` breakpoints per request ("A maximum
/// of 4 blocks with cache_control may be provided").
const MAX_BREAKPOINTS: usize = 4;

/// Prompt prefixes cached so far (a later request with the same prefix
/// reads it).
fn cache() -> &'static crate::scenario::SeenIds {
    static CACHE: std::sync::OnceLock<crate::scenario::SeenIds> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| crate::scenario::SeenIds::new(4096))
}

/// `thinking`: on with a budget, adaptive, or off; Anthropic's rules
/// (docs.claude.com, "Extended thinking": `budget_tokens` >= 1024 and below
/// `max_tokens`; "Feature compatibility": no `temperature` but 1, no
/// `top_k`, `top_p` >= 0.95, no forced tool use).
fn check_thinking(obj: &Map<String, Value>, max_tokens: u64) -> Result<bool, Failure> {
    let Some(t) = obj.get("thinking").filter(|t| !t.is_null()) else {
        return Ok(false);
    };
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
fn breakpoints(list: Option<&Value>) -> usize {
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

/// Text of a tool_result `content`: a string, or its text blocks.
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

fn check_image(block: &Value, at: &str) -> Result<(), Failure> {
    let source = block
        .get("source")
        .ok_or_else(|| invalid(format!("{at}.source: Field required")))?;
    let at = format!("{at}.source");
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media = str_field(source, "media_type", &at)?;
            if !IMAGE_TYPES.contains(&media) {
                return Err(invalid(format!(
                    "{at}.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
                )));
            }
            str_field(source, "data", &at).map(|_| ())
        }
        Some("url") => str_field(source, "url", &at).map(|_| ()),
        _ => Err(invalid(format!(
            "{at}: Input tag found using 'type' does not match any of the expected tags: 'base64', 'url'"
        ))),
    }
}

/// Validates one message like the API does and collects its text and ids.
fn check_message(i: usize, m: &Value, thinking: bool) -> Result<(bool, MessageInfo), Failure> {
    let at = format!("messages.{i}");
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("{at}.role: Field required")))?;
    let user = match role {
        "user" => true,
        "assistant" => false,
        _ => {
            return Err(invalid(format!(
                "{at}.role: Input should be 'user', 'assistant' or 'system'"
            )))
        }
    };
    let mut info = MessageInfo::default();
    let blocks = match m.get("content") {
        None => return Err(invalid(format!("{at}.content: Field required"))),
        Some(Value::String(s)) => {
            if s.is_empty() {
                return Err(invalid(format!(
                    "{at}: all messages must have non-empty content except for the optional \
                     final assistant message"
                )));
            }
            info.text = s.clone();
            return Ok((user, info));
        }
        Some(Value::Array(b)) => b,
        Some(_) => {
            return Err(invalid(format!(
                "{at}.content: Input should be a valid string or a valid list"
            )))
        }
    };
    let mut texts = Vec::new();
    let mut seen_other = false;
    info.breakpoints = breakpoints(Some(&Value::Array(blocks.clone())));
    for (j, b) in blocks.iter().enumerate() {
        let at = format!("{at}.content.{j}");
        let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
        if j == 0 {
            ty.clone_into(&mut info.first_block);
        }
        if !BLOCK_TYPES.contains(&ty) {
            return Err(invalid(format!(
                "{at}: Input tag '{ty}' found using 'type' does not match any of the expected tags: {}",
                BLOCK_TYPES.map(|t| format!("'{t}'")).join(", ")
            )));
        }
        if let Some(extra) = b
            .as_object()
            .and_then(|o| o.keys().find(|k| !block_keys(ty).contains(&k.as_str())))
        {
            return Err(invalid(format!(
                "{at}.{ty}.{extra}: Extra inputs are not permitted"
            )));
        }
        match ty {
            "text" => {
                let text = str_field(b, "text", &at)?;
                if text.is_empty() {
                    return Err(invalid("messages: text content blocks must be non-empty"));
                }
                texts.push(text.to_owned());
            }
            "image" => check_image(b, &at)?,
            // Only the mock can verify its own signatures (thinking is
            // checked only when on: Anthropic ignores it otherwise).
            "thinking" if thinking => {
                let text = str_field(b, "thinking", &at)?;
                if str_field(b, "signature", &at)? != claude_signature(text) {
                    return Err(invalid(format!(
                        "{at}: Invalid `signature` in `thinking` block"
                    )));
                }
            }
            "tool_use" => {
                if user {
                    return Err(invalid(format!(
                        "{at}: `tool_use` blocks can only be in `assistant` messages"
                    )));
                }
                info.tool_use_ids.push(str_field(b, "id", &at)?.to_owned());
                str_field(b, "name", &at)?;
                if !b.get("input").is_some_and(Value::is_object) {
                    return Err(invalid(format!(
                        "{at}.input: Input should be a valid dictionary"
                    )));
                }
            }
            "tool_result" => {
                if !user {
                    return Err(invalid(format!(
                        "{at}: `tool_result` blocks can only be in `user` messages"
                    )));
                }
                if seen_other {
                    return Err(invalid(format!(
                        "{at}: `tool_result` blocks must come first in the user message, \
                         before any other content"
                    )));
                }
                info.tool_result_ids
                    .push(str_field(b, "tool_use_id", &at)?.to_owned());
                match b.get("content") {
                    None | Some(Value::String(_) | Value::Array(_)) => {}
                    Some(_) => {
                        return Err(invalid(format!(
                            "{at}.content: Input should be a valid string or a valid list"
                        )))
                    }
                }
                info.tool_result_texts.push(result_text(b.get("content")));
            }
            _ => {}
        }
        if ty != "tool_result" {
            seen_other = true;
        }
    }
    info.text = texts.join(" ");
    Ok((user, info))
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

fn system_text(system: Option<&Value>) -> Result<String, Failure> {
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

/// Fields of the web search server tool, `web_search_20250305`
/// (docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool).
const WEB_SEARCH_KEYS: &[&str] = &[
    "type",
    "name",
    "max_uses",
    "allowed_domains",
    "blocked_domains",
    "user_location",
    "cache_control",
];
const LOCATION_KEYS: &[&str] = &["type", "city", "region", "country", "timezone"];

fn is_web_search(tool: &Value) -> bool {
    tool.get("type").and_then(Value::as_str) == Some("web_search_20250305")
}

/// The web search tool as Anthropic checks it: its own fields only, named
/// `web_search`, domains allowed or blocked (not both), an approximate
/// location. Anthropic runs it; the mock never searches (it is no tool the
/// model calls here).
fn check_web_search(t: &Value, at: &str) -> Result<(), Failure> {
    let at = format!("{at}.web_search_20250305");
    let extra = |v: &Value, keys: &[&str]| {
        v.as_object()
            .and_then(|o| o.keys().find(|k| !keys.contains(&k.as_str())).cloned())
    };
    if let Some(key) = extra(t, WEB_SEARCH_KEYS) {
        return Err(invalid(format!(
            "{at}.{key}: Extra inputs are not permitted"
        )));
    }
    if t.get("name").and_then(Value::as_str) != Some("web_search") {
        return Err(invalid(format!("{at}.name: Input should be 'web_search'")));
    }
    if let Some(n) = t.get("max_uses") {
        if n.as_u64().is_none_or(|n| n == 0) {
            return Err(invalid(format!(
                "{at}.max_uses: Input should be greater than 0"
            )));
        }
    }
    for key in ["allowed_domains", "blocked_domains"] {
        if let Some(list) = t.get(key) {
            if !list
                .as_array()
                .is_some_and(|l| l.iter().all(Value::is_string))
            {
                return Err(invalid(format!("{at}.{key}: Input should be a valid list")));
            }
        }
    }
    if t.get("allowed_domains").is_some() && t.get("blocked_domains").is_some() {
        return Err(invalid(
            "tools: web_search: cannot specify both allowed_domains and blocked_domains",
        ));
    }
    if let Some(location) = t.get("user_location") {
        if let Some(key) = extra(location, LOCATION_KEYS) {
            return Err(invalid(format!(
                "{at}.user_location.{key}: Extra inputs are not permitted"
            )));
        }
        if location.get("type").and_then(Value::as_str) != Some("approximate") {
            return Err(invalid(format!(
                "{at}.user_location.type: Input should be 'approximate'"
            )));
        }
    }
    Ok(())
}

fn parse_tools(obj: &Map<String, Value>) -> Result<Vec<Tool>, Failure> {
    let Some(tools) = obj.get("tools") else {
        return Ok(Vec::new());
    };
    let tools = tools
        .as_array()
        .ok_or_else(|| invalid("tools: Input should be a valid list"))?;
    for (i, t) in tools.iter().enumerate() {
        if is_web_search(t) {
            check_web_search(t, &format!("tools.{i}"))?;
        }
    }
    tools
        .iter()
        .enumerate()
        .filter(|(_, t)| !is_web_search(t))
        .map(|(i, t)| {
            let at = format!("tools.{i}");
            let custom = t
                .get("type")
                .and_then(Value::as_str)
                .is_none_or(|ty| ty == "custom");
            if let Some(extra) = t.as_object().and_then(|o| {
                o.keys()
                    .find(|k| custom && !TOOL_KEYS.contains(&k.as_str()))
            }) {
                return Err(invalid(format!(
                    "{at}.custom.{extra}: Extra inputs are not permitted"
                )));
            }
            let name = str_field(t, "name", &at)?.to_owned();
            // Server tools (web_search etc.) carry a "type" and no schema.
            let schema = match (t.get("input_schema"), t.get("type")) {
                (Some(s), _) => s.clone(),
                (None, Some(_)) => Value::Null,
                (None, None) => return Err(invalid(format!("{at}.input_schema: Field required"))),
            };
            Ok(Tool { name, schema })
        })
        .collect()
}

fn parse_tool_choice(v: Option<&Value>) -> Result<ToolChoice, Failure> {
    let Some(v) = v else {
        return Ok(ToolChoice::Auto);
    };
    match v.get("type").and_then(Value::as_str) {
        Some("auto") => Ok(ToolChoice::Auto),
        Some("any") => Ok(ToolChoice::Any),
        Some("none") => Ok(ToolChoice::None),
        Some("tool") => Ok(ToolChoice::Named(
            str_field(v, "name", "tool_choice")?.to_owned(),
        )),
        _ => Err(invalid(
            "tool_choice: Input tag found using 'type' does not match any of the expected tags: \
             'auto', 'any', 'tool', 'none'",
        )),
    }
}

fn stop_reason(f: &Finish) -> (&'static str, Value) {
    match f {
        Finish::Stop => ("end_turn", Value::Null),
        Finish::Length => ("max_tokens", Value::Null),
        Finish::StopSequence(s) => ("stop_sequence", json!(s)),
        Finish::ToolCalls => ("tool_use", Value::Null),
        Finish::ContentFilter => ("refusal", Value::Null),
        Finish::PauseTurn => ("pause_turn", Value::Null),
    }
}

/// The web search a paused turn has under way (docs.claude.com, "Server
/// tools": a `server_tool_use` block, `srvtoolu_` id, then `pause_turn`).
fn search_under_way(p: &Prompt) -> Value {
    json!({"type": "server_tool_use", "id": "srvtoolu_mock1", "name": "web_search",
           "input": {"query": p.last_user_text}})
}

/// What the model thinks, when thinking is on.
fn thinking_text(p: &Prompt) -> Option<String> {
    p.anthropic_thinking.then(|| match &p.tool_results {
        Some(_) => "The tool answered; now I can reply.".to_owned(),
        None => {
            let said: String = p.last_user_text.chars().take(80).collect();
            format!("The user said: {said}. Let me think about it.")
        }
    })
}

/// The usage object: the input not read from or written to the cache,
/// and the cache's counts (a prefix cached by an earlier request is read).
fn usage(p: &Prompt, a: &Answer, output_tokens: u64) -> Value {
    let (mut read, mut created) = (a.cached_tokens, 0);
    if let Some((key, words)) = &p.anthropic_cache {
        let words = (*words).min(a.prompt_tokens);
        if cache().first_time(key) {
            created = words;
        } else {
            read = words;
        }
    }
    json!({
        "input_tokens": a.prompt_tokens.saturating_sub(read + created),
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": read,
    })
}

fn event(name: &'static str, data: Value) -> SseEvent {
    SseEvent {
        name: Some(name),
        data: to_json(&data),
        delta: false,
    }
}

fn delta_event(index: usize, delta: Value) -> SseEvent {
    let mut e = event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": delta}),
    );
    e.delta = true;
    e
}

impl Anthropic {
    /// `POST /v1/messages/count_tokens`: the input tokens the Messages
    /// request would use (what its answer's `usage.input_tokens` says),
    /// the request checked as a Messages request is.
    fn count_tokens(&self, req: &Request) -> Result<u64, Failure> {
        self.check_headers(req)?;
        let body: Value = serde_json::from_slice(&req.body).map_err(|e| {
            invalid(format!(
                "We could not parse the JSON body of your request: {e}"
            ))
        })?;
        self.count_body(&body)
    }

    /// A count_tokens body's input tokens (also Claude's on Vertex AI).
    pub(crate) fn count_body(&self, body: &Value) -> Result<u64, Failure> {
        let obj = body
            .as_object()
            .ok_or_else(|| invalid("Input should be a valid dictionary"))?;
        if let Some(extra) = obj.keys().find(|k| !COUNT_FIELDS.contains(&k.as_str())) {
            return Err(invalid(format!("{extra}: Extra inputs are not permitted")));
        }
        // The rest is checked as a Messages request's, with room for any
        // thinking budget.
        let mut message = obj.clone();
        message.insert("max_tokens".into(), json!(u32::MAX));
        let p = self.parse(&Value::Object(message))?;
        Ok(p.prompt_words.max(1))
    }
}

impl Dialect for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn handles(&self, path: &str) -> bool {
        path.ends_with("/v1/messages")
    }

    fn has_call(&self, path: &str) -> bool {
        path.ends_with("/v1/messages/count_tokens")
    }

    fn call(&self, req: &Request, _path: &str) -> Reply {
        if req.method() != "POST" {
            let body = json!({"type": "error", "error": {"type": "invalid_request_error",
                              "message": "Method Not Allowed"}});
            return Reply {
                status: 405,
                body: to_json(&body),
                retry_after: None,
            };
        }
        match self.count_tokens(req) {
            Ok(tokens) => Reply {
                status: 200,
                body: to_json(&json!({"input_tokens": tokens})),
                retry_after: None,
            },
            Err(f) => self.error(&f),
        }
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        // Exactly the account's key; other vendors' headers are ignored.
        if req
            .header("x-api-key")
            .is_none_or(|k| !keys::matches("anthropic", k))
        {
            return Err(Failure::Auth("invalid x-api-key".into()));
        }
        match req.header("anthropic-version") {
            Some(VERSION) => Ok(()),
            None => Err(invalid("anthropic-version: header is required")),
            Some(v) => Err(invalid(format!(
                "anthropic-version: invalid version '{v}'; expected '{VERSION}'"
            ))),
        }
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        let obj = body
            .as_object()
            .ok_or_else(|| invalid("Input should be a valid dictionary"))?;
        if let Some(extra) = obj.keys().find(|k| !TOP_LEVEL.contains(&k.as_str())) {
            return Err(invalid(format!("{extra}: Extra inputs are not permitted")));
        }
        let model = match obj.get("model") {
            None => return Err(invalid("model: Field required")),
            Some(Value::String(m)) => m.clone(),
            Some(_) => return Err(invalid("model: Input should be a valid string")),
        };
        let max_tokens = match obj.get("max_tokens") {
            None => return Err(invalid("max_tokens: Field required")),
            Some(v) => match v.as_i64() {
                Some(n) if n >= 1 => n as u64,
                Some(_) => {
                    return Err(invalid(
                        "max_tokens: Input should be greater than or equal to 1",
                    ))
                }
                None => return Err(invalid("max_tokens: Input should be a valid integer")),
            },
        };
        check_unit_range(obj, "temperature")?;
        check_unit_range(obj, "top_p")?;
        let set = |k: &str| obj.get(k).is_some_and(|v| !v.is_null());
        if set("temperature") && set("top_p") && !takes_temperature_and_top_p(&model) {
            return Err(invalid(
                "`temperature` and `top_p` cannot both be specified for this model. Please use only one.",
            ));
        }
        let messages = match obj.get("messages") {
            None => return Err(invalid("messages: Field required")),
            Some(Value::Array(m)) => m,
            Some(_) => return Err(invalid("messages: Input should be a valid list")),
        };
        if messages.is_empty() {
            return Err(invalid(
                "messages: List should have at least 1 item after validation, not 0",
            ));
        }

        let thinking = check_thinking(obj, max_tokens)?;
        let found = breakpoints(obj.get("tools"))
            + breakpoints(obj.get("system"))
            + messages
                .iter()
                .map(|m| breakpoints(m.get("content")))
                .sum::<usize>();
        if found > MAX_BREAKPOINTS {
            return Err(invalid(format!(
                "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
            )));
        }

        let system = system_text(obj.get("system"))?;
        let mut p = Prompt {
            model,
            max_tokens: Some(max_tokens),
            prompt_words: count_words(&system),
            anthropic_thinking: thinking,
            ..Prompt::default()
        };
        // The cached prefix: tools, system, then messages, up to the last
        // breakpoint (at message granularity).
        let mut cached_upto = (breakpoints(obj.get("tools")) + breakpoints(obj.get("system")) > 0)
            .then_some((None, p.prompt_words));
        // The last assistant message: its position, first block and tool use.
        let mut last_assistant: Option<(usize, String, bool)> = None;
        // tool_use ids of the previous assistant message awaiting results.
        let mut pending: Vec<String> = Vec::new();
        let mut last: Option<(bool, MessageInfo)> = None;
        let mut tool_blocks = false;
        for (i, m) in messages.iter().enumerate() {
            // A system message between the turns (the SDK's
            // `SystemMessageParam`): text only, read as system text.
            if m.get("role").and_then(Value::as_str) == Some("system") {
                let text = system_text(m.get("content")).map_err(|_| {
                    invalid(format!(
                        "messages.{i}.content: Input should be a valid string or a list of text blocks"
                    ))
                })?;
                p.prompt_words += count_words(&text);
                if breakpoints(m.get("content")) > 0 {
                    cached_upto = Some((Some(i), p.prompt_words));
                }
                continue;
            }
            let (user, info) = check_message(i, m, thinking)?;
            if !user {
                last_assistant = Some((i, info.first_block.clone(), !info.tool_use_ids.is_empty()));
            }
            // Every tool_use needs its tool_result in the very next message,
            // and every tool_result needs a tool_use just before it.
            let answered: HashSet<&str> = info.tool_result_ids.iter().map(String::as_str).collect();
            let missing: Vec<&str> = pending
                .iter()
                .map(String::as_str)
                .filter(|id| !(user && answered.contains(id)))
                .collect();
            if !missing.is_empty() {
                return Err(invalid(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks \
                     immediately after: {}. Each `tool_use` block must have a corresponding \
                     `tool_result` block in the next message.",
                    missing.join(", ")
                )));
            }
            if let Some(stray) = info.tool_result_ids.iter().find(|id| !pending.contains(id)) {
                return Err(invalid(format!(
                    "messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` \
                     blocks: {stray}. Each `tool_result` block must have a corresponding \
                     `tool_use` block in the previous message."
                )));
            }
            pending.clone_from(&info.tool_use_ids);
            tool_blocks |= !info.tool_use_ids.is_empty() || !info.tool_result_ids.is_empty();
            p.prior_tool_calls += info.tool_use_ids.len() as u64;
            p.prompt_words += count_words(&info.text)
                + info
                    .tool_result_texts
                    .iter()
                    .map(|t| count_words(t))
                    .sum::<u64>();
            if user && !info.text.is_empty() {
                p.last_user_text.clone_from(&info.text);
            }
            if info.breakpoints > 0 {
                cached_upto = Some((Some(i), p.prompt_words));
            }
            last = Some((user, info));
        }
        let new_turn = matches!(last, Some((true, _)));
        if let Some((true, info)) = last {
            if !info.tool_result_ids.is_empty() {
                p.tool_results = Some(info.tool_result_texts);
            }
        }

        p.stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
        p.stop = match obj.get("stop_sequences") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(_) => return Err(invalid("stop_sequences: Input should be a valid list")),
        };
        p.tools = parse_tools(obj)?;
        p.anthropic_server_loop = new_turn
            && obj
                .get("tools")
                .and_then(Value::as_array)
                .is_some_and(|tools| tools.iter().any(is_web_search));
        // The API's answer to tool blocks without tool definitions
        // (github.com/anthropics/anthropic-sdk-python/issues/494).
        if tool_blocks && p.tools.is_empty() {
            return Err(invalid(
                "Requests which include `tool_use` or `tool_result` blocks must define tools.",
            ));
        }
        p.tool_choice = parse_tool_choice(obj.get("tool_choice"))?;
        // With thinking on, the assistant turn of the ongoing tool use must
        // start with its (signed) thinking (docs.claude.com, "Extended
        // thinking with tool use": preserving thinking blocks).
        if let Some((i, first, true)) = last_assistant.filter(|_| thinking) {
            if first != "thinking" && first != "redacted_thinking" {
                return Err(invalid(format!(
                    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. \
                     When `thinking` is enabled, a final `assistant` message must start with a thinking block \
                     (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you \
                     include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. \
                     Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
                )));
            }
        }
        if let Some((upto, words)) = cached_upto.filter(|(_, w)| *w >= MIN_CACHEABLE_WORDS) {
            let prefix = json!([
                obj.get("tools"),
                obj.get("system"),
                upto.map_or(&[][..], |i| messages.get(..=i).unwrap_or_default())
            ]);
            let key = crate::sigv4::hex(&crate::sigv4::sha256(to_json(&prefix).as_bytes()));
            p.anthropic_cache = Some((key, words));
        }
        p.json = json_instruction(&system);
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        let (status, kind, message): (u16, &str, String) = match failure {
            Failure::Auth(m) => (401, "authentication_error", m.clone()),
            Failure::Invalid(m) | Failure::Param { message: m, .. } => {
                (400, "invalid_request_error", m.clone())
            }
            Failure::ContextLength => (
                400,
                "invalid_request_error",
                "prompt is too long: 250000 tokens > 200000 maximum".into(),
            ),
            Failure::Status(s) => {
                let (kind, message) = match s {
                    400 => ("invalid_request_error", "Invalid request."),
                    401 => ("authentication_error", "invalid x-api-key"),
                    403 => (
                        "permission_error",
                        "Your API key does not have permission to use the specified resource.",
                    ),
                    404 => ("not_found_error", "Not found"),
                    413 => (
                        "request_too_large",
                        "Request exceeds the maximum allowed number of bytes.",
                    ),
                    429 => (
                        "rate_limit_error",
                        "Number of request tokens has exceeded your per-minute rate limit.",
                    ),
                    529 => ("overloaded_error", "Overloaded"),
                    503 => ("api_error", "Service unavailable"),
                    _ => ("api_error", "Internal server error"),
                };
                (*s, kind, message.to_owned())
            }
        };
        let body = json!({"type": "error", "error": {"type": kind, "message": message}});
        Reply {
            status,
            body: to_json(&body),
            retry_after: (status == 429).then_some("7"),
        }
    }

    fn tool_preface(&self) -> Option<&'static str> {
        Some("Let me check.")
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        let mut content = Vec::new();
        let thinking = thinking_text(p);
        if let Some(t) = &thinking {
            content
                .push(json!({"type": "thinking", "thinking": t, "signature": claude_signature(t)}));
        }
        let thought = thinking.as_deref().map_or(0, count_words);
        if !a.text.is_empty() || a.tool_calls.is_empty() {
            content.push(json!({"type": "text", "text": a.text}));
        }
        for c in &a.tool_calls {
            content.push(json!({"type": "tool_use", "id": format!("toolu_{}", c.n),
                                "name": c.name, "input": c.arguments}));
        }
        if a.finish == Finish::PauseTurn {
            content.push(search_under_way(p));
        }
        let (reason, sequence) = stop_reason(&a.finish);
        json!({
            "id": format!("msg_mock{}", meta.seq),
            "type": "message",
            "role": "assistant",
            "model": p.model,
            "content": content,
            "stop_reason": reason,
            "stop_sequence": sequence,
            // input_tokens counts the tokens not read from the cache.
            "usage": usage(p, a, a.completion_tokens + thought),
        })
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        let mut events = Vec::with_capacity(a.chunks.len() + 10);
        events.push(event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": format!("msg_mock{}", meta.seq), "type": "message", "role": "assistant",
                "model": p.model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": usage(p, a, 1)}}),
        ));
        let mut index = 0;
        let thinking = thinking_text(p);
        if let Some(t) = &thinking {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ));
            for c in crate::answer::word_chunks(t) {
                events.push(delta_event(
                    0,
                    json!({"type": "thinking_delta", "thinking": c}),
                ));
            }
            events.push(delta_event(
                0,
                json!({"type": "signature_delta", "signature": claude_signature(t)}),
            ));
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
            index = 1;
        }
        if !a.text.is_empty() || a.tool_calls.is_empty() {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}}),
            ));
            events.push(event("ping", json!({"type": "ping"})));
            for c in &a.chunks {
                events.push(delta_event(index, json!({"type": "text_delta", "text": c})));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        for c in &a.tool_calls {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": format!("toolu_{}", c.n), "name": c.name, "input": {}}}),
            ));
            // The real API opens every tool_use block with an empty fragment.
            let empty = std::iter::once("");
            for frag in empty.chain(fragments(&c.arguments_json)) {
                events.push(delta_event(
                    index,
                    json!({"type": "input_json_delta", "partial_json": frag}),
                ));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        if a.finish == Finish::PauseTurn {
            let mut block = search_under_way(p);
            let input = block.get("input").map(to_json).unwrap_or_default();
            block["input"] = json!({});
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": block}),
            ));
            events.push(delta_event(
                index,
                json!({"type": "input_json_delta", "partial_json": input}),
            ));
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        let (reason, sequence) = stop_reason(&a.finish);
        events.push(event(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": reason, "stop_sequence": sequence},
                   "usage": {"output_tokens": a.completion_tokens
                       + thinking.as_deref().map_or(0, count_words)}}),
        ));
        events.push(event("message_stop", json!({"type": "message_stop"})));
        events
    }

    fn stream_error(&self) -> SseEvent {
        SseEvent {
            name: Some("error"),
            data: r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
                .into(),
            delta: false,
        }
    }
}

#[cfg(test)]
mod count_tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn post(body: &str) -> Reply {
        let raw = format!(
            "POST /v1/messages/count_tokens HTTP/1.1\r\nx-api-key: sk-mock-anthropic\r\n\
             anthropic-version: {VERSION}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let req = crate::http::parse(&raw);
        Anthropic.call(&req, req.path())
    }

    #[test]
    fn counts_what_a_message_would_use_and_refuses_what_anthropic_refuses() {
        let counted = post(
            r#"{"model":"m","system":"be brief","messages":[{"role":"user","content":"four words right here"}]}"#,
        );
        assert_eq!(counted.status, 200);
        assert_eq!(
            serde_json::from_str::<Value>(&counted.body).unwrap(),
            json!({"input_tokens": 6})
        );
        for (body, message) in [
            (
                r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#,
                "max_tokens: Extra inputs are not permitted",
            ),
            (
                r#"{"messages":[{"role":"user","content":"hi"}]}"#,
                "model: Field required",
            ),
            (r#"{"model":"m"}"#, "messages: Field required"),
        ] {
            let refused = post(body);
            assert_eq!(refused.status, 400, "{body}");
            assert!(refused.body.contains(message), "{}", refused.body);
        }
    }

    #[test]
    fn thinking_signed_on_bedrock_verifies_and_a_foreign_signature_does_not() {
        let turn = |signature: String| {
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": signature},
                {"type": "text", "text": "calling"}]})
        };
        // Bedrock's mock signs Claude's thinking with the same scheme.
        let bedrock = crate::answer::claude_signature("t");
        assert!(check_message(1, &turn(bedrock), true).is_ok());
        for foreign in [crate::answer::gemini_signature("t"), "forged".to_owned()] {
            assert!(matches!(check_message(1, &turn(foreign), true),
                Err(Failure::Invalid(m)) if m.contains("Invalid `signature`")));
        }
    }
}
