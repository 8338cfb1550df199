//! Anthropic Messages (`POST /v1/messages`): header checks, body validation
//! with the real API's 400 messages, Messages objects, the event stream
//! (message_start ... message_stop) and error bodies.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use crate::answer::{fragments, Answer, Finish};
use crate::dialect::{
    count_words, to_json, Dialect, Failure, Meta, Prompt, Reply, SseEvent, Tool, ToolChoice,
};
use crate::http::Request;
use crate::keys;

pub struct Anthropic;

pub const VERSION: &str = "2023-06-01";

const TOP_LEVEL: [&str; 14] = [
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
];

/// Content block types we accept in messages (thinking blocks may be
/// echoed back in assistant turns when `thinking` is on).
const BLOCK_TYPES: [&str; 6] = [
    "text",
    "image",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
];

/// The keys of each content block type (docs.anthropic.com/en/api/messages,
/// "content" block schemas); others are refused "Extra inputs are not permitted".
fn block_keys(ty: &str) -> &'static [&'static str] {
    match ty {
        "text" => &["type", "text", "cache_control", "citations"],
        "image" => &["type", "source", "cache_control"],
        "tool_use" => &["type", "id", "name", "input", "cache_control"],
        "tool_result" => &[
            "type",
            "tool_use_id",
            "content",
            "is_error",
            "cache_control",
        ],
        "thinking" => &["type", "thinking", "signature"],
        "redacted_thinking" => &["type", "data"],
        _ => &[],
    }
}

/// The keys of a custom (client) tool (docs.anthropic.com/en/api/messages, "tools").
const TOOL_KEYS: [&str; 5] = [
    "type",
    "name",
    "description",
    "input_schema",
    "cache_control",
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
fn check_message(i: usize, m: &Value) -> Result<(bool, MessageInfo), Failure> {
    let at = format!("messages.{i}");
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("{at}.role: Field required")))?;
    let user = match role {
        "user" => true,
        "assistant" => false,
        "system" => {
            return Err(invalid(
                "messages: Unexpected role \"system\". The Messages API accepts a top-level \
                 `system` parameter, not \"system\" as an input message role.",
            ))
        }
        _ => {
            return Err(invalid(format!(
                "{at}.role: Input should be 'user' or 'assistant'"
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
    for (j, b) in blocks.iter().enumerate() {
        let at = format!("{at}.content.{j}");
        let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
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

fn parse_tools(obj: &Map<String, Value>) -> Result<Vec<Tool>, Failure> {
    let Some(tools) = obj.get("tools") else {
        return Ok(Vec::new());
    };
    let tools = tools
        .as_array()
        .ok_or_else(|| invalid("tools: Input should be a valid list"))?;
    tools
        .iter()
        .enumerate()
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
    }
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

impl Dialect for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn handles(&self, path: &str) -> bool {
        path.ends_with("/v1/messages")
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

        let system = system_text(obj.get("system"))?;
        let mut p = Prompt {
            model,
            max_tokens: Some(max_tokens),
            prompt_words: count_words(&system),
            ..Prompt::default()
        };
        // tool_use ids of the previous assistant message awaiting results.
        let mut pending: Vec<String> = Vec::new();
        let mut last: Option<(bool, MessageInfo)> = None;
        let mut tool_blocks = false;
        for (i, m) in messages.iter().enumerate() {
            let (user, info) = check_message(i, m)?;
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
            last = Some((user, info));
        }
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
        // The API's answer to tool blocks without tool definitions
        // (github.com/anthropics/anthropic-sdk-python/issues/494).
        if tool_blocks && p.tools.is_empty() {
            return Err(invalid(
                "Requests which include `tool_use` or `tool_result` blocks must define tools.",
            ));
        }
        p.tool_choice = parse_tool_choice(obj.get("tool_choice"))?;
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
        if !a.text.is_empty() || a.tool_calls.is_empty() {
            content.push(json!({"type": "text", "text": a.text}));
        }
        for c in &a.tool_calls {
            content.push(json!({"type": "tool_use", "id": format!("toolu_{}", c.n),
                                "name": c.name, "input": c.arguments}));
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
            "usage": {
                "input_tokens": a.prompt_tokens - a.cached_tokens,
                "output_tokens": a.completion_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": a.cached_tokens,
            },
        })
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        let mut events = Vec::with_capacity(a.chunks.len() + 10);
        events.push(event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": format!("msg_mock{}", meta.seq), "type": "message", "role": "assistant",
                "model": p.model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": a.prompt_tokens - a.cached_tokens, "output_tokens": 1,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": a.cached_tokens}}}),
        ));
        let mut index = 0;
        if !a.text.is_empty() || a.tool_calls.is_empty() {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}),
            ));
            events.push(event("ping", json!({"type": "ping"})));
            for c in &a.chunks {
                events.push(delta_event(0, json!({"type": "text_delta", "text": c})));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
            index = 1;
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
        let (reason, sequence) = stop_reason(&a.finish);
        events.push(event(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": reason, "stop_sequence": sequence},
                   "usage": {"output_tokens": a.completion_tokens}}),
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
