//! OpenAI Responses requests (`POST /v1/responses`), parsed strictly into
//! the neutral [`ChatRequest`]: unknown fields are refused by name as
//! OpenAI refuses them, duplicate keys at every depth, and each error names
//! its field path (`input[2].content[0].text`).
//!
//! What only OpenAI's own Responses API can do (server-side state:
//! `previous_response_id`, `conversation`, `prompt`, `background`; built-in
//! tools; input items of those tools) is kept as [`NativeOnly`]: a
//! pass-through to OpenAI or Azure sends the client's body as it came, a
//! translated request is refused with a 400 naming the field. Two built-in
//! tools translate: a `namespace` of function tools (flat function tools
//! named `<namespace>__<name>`) and `web_search` (the vendor's own search,
//! [`WebSearch`]; its `web_search_call` items in history are dropped).
//!
//! The top level and the shared checks are here; input items in
//! [`items`], tools and output formats in [`tools`].

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::GatewayError;
use crate::model::json::Strict;
use crate::model::request::*;

mod items;
mod tools;

use items::input_item;
use tools::{any_tool, text_format, tool_choice};

/// Top-level fields of `POST /v1/responses` (the OpenAI reference's
/// `ResponseCreateParams`), plus our `request_id`.
const FIELDS: &[&str] = &[
    "background",
    "client_metadata",
    "context_management",
    "conversation",
    "include",
    "input",
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "model",
    "moderation",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt",
    "prompt_cache_key",
    "prompt_cache_options",
    "prompt_cache_retention",
    "reasoning",
    "request_id",
    "safety_identifier",
    "service_tier",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
];

/// Fields that need OpenAI's server-side state or features: sent on by a
/// pass-through, refused when translated.
const STATEFUL: &[(&str, &str)] = &[
    ("previous_response_id", "previous_response_id"),
    ("conversation", "conversation"),
    ("prompt", "a stored prompt (prompt)"),
    ("context_management", "context_management"),
    ("moderation", "moderation"),
];

/// The hosted web search tool's versions: the vendor's own search where it
/// has one (`ChatRequest::web_search`).
const WEB_SEARCH_TOOLS: &[&str] = &[
    "web_search",
    "web_search_preview",
    "web_search_2025_08_26",
    "web_search_preview_2025_03_11",
];

/// OpenAI's built-in tools: only its own Responses API runs them.
const BUILT_IN_TOOLS: &[&str] = &[
    "file_search",
    "computer_use_preview",
    "computer",
    "code_interpreter",
    "image_generation",
    "local_shell",
    "shell",
    "apply_patch",
    "custom",
    "mcp",
    "tool_search",
];

/// Input item types of the built-in tools (their calls and outputs in a
/// conversation's history), and references to stored items.
const BUILT_IN_ITEMS: &[&str] = &[
    "item_reference",
    "file_search_call",
    "computer_call",
    "computer_call_output",
    "image_generation_call",
    "code_interpreter_call",
    "local_shell_call",
    "local_shell_call_output",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "mcp_call",
    "custom_tool_call",
    "custom_tool_call_output",
    "compaction",
    "tool_search_call",
    "tool_search_output",
    "additional_tools",
];

const STATELESS: &str = "the gateway is stateless: this model group's provider does not keep \
     responses or conversations, so send the whole history in `input`";

/// A response id the gateway did not give (its own start `resp_gw` and
/// are resolved before parsing: `crate::responses_store`).
const NOT_STORED_HERE: &str = "the gateway stores the responses of this model group's provider \
     under ids starting `resp_gw`, and this one is not among them; a vendor's own response id \
     resolves only on a group that passes through to that vendor";

type Result<T> = std::result::Result<T, GatewayError>;

fn invalid(param: &str, message: impl Into<String>) -> GatewayError {
    GatewayError::invalid(param, message.into())
}

fn wrong_type(param: &str, expected: &str) -> GatewayError {
    invalid(
        param,
        format!("Invalid type for '{param}': expected {expected}."),
    )
}

fn unknown_field(param: &str) -> GatewayError {
    invalid(
        param,
        format!("Unknown parameter: '{param}'. Unrecognized request argument supplied."),
    )
}

/// An object's fields, each checked against the ones its type allows.
fn object<'a>(value: &'a Value, param: &str, allowed: &[&str]) -> Result<&'a Map<String, Value>> {
    let map = value
        .as_object()
        .ok_or_else(|| wrong_type(param, "an object"))?;
    if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(unknown_field(&format!("{param}.{key}")));
    }
    Ok(map)
}

/// A field's path: `key` of the object at `param` (`""`: the body).
fn field(param: &str, key: &str) -> String {
    if param.is_empty() {
        key.to_owned()
    } else {
        format!("{param}.{key}")
    }
}

fn string<'a>(map: &'a Map<String, Value>, key: &str, param: &str) -> Result<Option<&'a str>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(wrong_type(&field(param, key), "a string")),
    }
}

fn required_string<'a>(map: &'a Map<String, Value>, key: &str, param: &str) -> Result<&'a str> {
    string(map, key, param)?.ok_or_else(|| {
        let path = field(param, key);
        invalid(&path, format!("Missing required parameter: '{path}'."))
    })
}

fn boolean(map: &Map<String, Value>, key: &str) -> Result<Option<bool>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(wrong_type(key, "a boolean")),
    }
}

fn number(
    map: &Map<String, Value>,
    key: &str,
    range: std::ops::RangeInclusive<f64>,
) -> Result<Option<f64>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            let v = n.as_f64().unwrap_or(f64::NAN);
            if range.contains(&v) {
                Ok(Some(v))
            } else {
                Err(invalid(
                    key,
                    format!(
                        "'{key}' must be between {} and {}",
                        range.start(),
                        range.end()
                    ),
                ))
            }
        }
        Some(_) => Err(wrong_type(key, "a number")),
    }
}

/// The request being built, with the first field only a vendor of the
/// Responses API itself can serve.
struct Builder {
    request: ChatRequest,
    /// Reasoning items waiting for the assistant turn they precede.
    reasoning: Vec<Thinking>,
}

impl Builder {
    fn native_only(&mut self, param: impl Into<String>, message: impl Into<String>) {
        self.request.native_only.get_or_insert(NativeOnly {
            param: param.into(),
            message: message.into(),
        });
    }

    /// The assistant turn to add a call or an answer to: the last one when
    /// it is still open (consecutive items of one turn merge), else a new one.
    fn assistant(&mut self, merge: bool) -> Option<&mut Message> {
        let open = merge
            && matches!(
                self.request.messages.last(),
                Some(Message::Assistant { .. })
            );
        if !open {
            self.request.messages.push(Message::Assistant {
                content: None,
                reasoning: Vec::new(),
                tool_calls: Vec::new(),
                refusal: None,
                name: None,
            });
        }
        let pending = std::mem::take(&mut self.reasoning);
        let last = self.request.messages.last_mut();
        if let Some(Message::Assistant { reasoning, .. }) = last {
            reasoning.extend(pending);
            return self.request.messages.last_mut();
        }
        None
    }
}

/// Parses and validates a Responses request body.
pub fn parse(body: &[u8]) -> Result<ChatRequest> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(invalid("body", "request body is empty"));
    }
    let Strict(value) = serde_json::from_slice::<Strict>(body).map_err(|e| {
        let msg = e.to_string();
        let param = msg
            .split_once(": ")
            .map(|(p, _)| p)
            .filter(|p| !p.contains(' '))
            .unwrap_or("body");
        invalid(param, format!("invalid request body: {msg}"))
    })?;
    let map = object(&value, "body", FIELDS).map_err(|e| match e.param.as_deref() {
        // Top-level fields are named without the `body.` prefix.
        Some(p) if p.starts_with("body.") => unknown_field(p.trim_start_matches("body.")),
        _ => e,
    })?;
    let mut b = Builder {
        request: ChatRequest {
            source_len: body.len(),
            // Usage comes in `response.completed` whatever the client asks.
            include_usage: true,
            ..ChatRequest::default()
        },
        reasoning: Vec::new(),
    };
    b.request.model = match map.get("model") {
        Some(Value::String(m)) => m.clone(),
        Some(_) => return Err(wrong_type("model", "a string")),
        None => return Err(invalid("model", "Missing required parameter: 'model'.")),
    };
    if b.request.model.is_empty()
        || b.request.model.len() > MAX_MODEL_NAME
        || b.request.model.chars().any(char::is_control)
    {
        return Err(invalid(
            "model",
            "model must be 1-256 characters without control characters",
        ));
    }
    for (field, what) in STATEFUL {
        if map.get(*field).is_some_and(|v| !v.is_null()) {
            let why = if *field == "previous_response_id" {
                NOT_STORED_HERE
            } else {
                STATELESS
            };
            b.native_only(*field, format!("{what}: {why}"));
        }
    }
    if boolean(map, "background")? == Some(true) {
        b.native_only("background", format!("background responses: {STATELESS}"));
    }
    if let Some(instructions) = string(map, "instructions", "")? {
        b.request.messages.push(Message::System {
            content: Content::Text(instructions.to_owned()),
            name: None,
        });
    }
    match map.get("input") {
        Some(Value::String(text)) => b.request.messages.push(Message::User {
            content: Content::Text(text.clone()),
            name: None,
        }),
        Some(Value::Array(items)) => {
            if items.len() > MAX_MESSAGES {
                return Err(invalid(
                    "input",
                    format!("at most {MAX_MESSAGES} input items are accepted"),
                ));
            }
            for (i, item) in items.iter().enumerate() {
                input_item(&mut b, item, &format!("input[{i}]"))?;
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => return Err(wrong_type("input", "a string or an array of input items")),
    }
    // Reasoning with nothing after it still goes back to the vendor.
    if !b.reasoning.is_empty() {
        b.assistant(false);
    }
    if b.request.messages.is_empty() && b.request.native_only.is_none() {
        return Err(invalid("input", "Missing required parameter: 'input'."));
    }
    if let Some(tools) = map.get("tools").filter(|v| !v.is_null()) {
        let list = tools
            .as_array()
            .ok_or_else(|| wrong_type("tools", "an array"))?;
        for (i, tool) in list.iter().enumerate() {
            any_tool(&mut b, tool, &format!("tools[{i}]"))?;
        }
    }
    if let Some(choice) = map.get("tool_choice").filter(|v| !v.is_null()) {
        b.request.tool_choice = Some(tool_choice(&mut b, choice)?);
    }
    b.request.parallel_tool_calls = boolean(map, "parallel_tool_calls")?;
    b.request.temperature = number(map, "temperature", 0.0..=2.0)?;
    b.request.top_p = number(map, "top_p", 0.0..=1.0)?;
    b.request.max_completion_tokens = match map.get("max_output_tokens") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    invalid(
                        "max_output_tokens",
                        "max_output_tokens must be a positive integer",
                    )
                })?,
        ),
    };
    if let Some(reasoning) = map.get("reasoning").filter(|v| !v.is_null()) {
        let r = object(
            reasoning,
            "reasoning",
            &["effort", "summary", "generate_summary"],
        )?;
        let effort = match string(r, "effort", "reasoning")? {
            // OpenAI's highest effort, where a model has it; others get their highest.
            Some("xhigh") => Some(Effort::High),
            Some(name) => Some(Effort::parse(name).ok_or_else(|| {
                invalid(
                    "reasoning.effort",
                    format!("Invalid value: '{name}'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high' and 'xhigh'."),
                )
            })?),
            None => None,
        };
        for key in ["summary", "generate_summary"] {
            if let Some(s) = string(r, key, "reasoning")? {
                if !["auto", "concise", "detailed"].contains(&s) {
                    return Err(invalid(
                        &format!("reasoning.{key}"),
                        format!("Invalid value: '{s}'. Supported values are: 'auto', 'concise' and 'detailed'."),
                    ));
                }
            }
        }
        if effort.is_some() {
            b.request.reasoning = Some(Reasoning {
                effort,
                budget_tokens: None,
            });
        }
    }
    if let Some(text) = map.get("text").filter(|v| !v.is_null()) {
        let t = object(text, "text", &["format", "verbosity"])?;
        if let Some(format) = t.get("format").filter(|v| !v.is_null()) {
            b.request.response_format = Some(text_format(format)?);
        }
        if let Some(v) = string(t, "verbosity", "text")? {
            if !["low", "medium", "high"].contains(&v) {
                return Err(invalid("text.verbosity", format!("Invalid value: '{v}'.")));
            }
        }
    }
    if let Some(metadata) = map.get("metadata").filter(|v| !v.is_null()) {
        let m = metadata
            .as_object()
            .ok_or_else(|| wrong_type("metadata", "an object"))?;
        if let Some((k, _)) = m.iter().find(|(_, v)| !v.is_string()) {
            return Err(wrong_type(&format!("metadata.{k}"), "a string"));
        }
        // Routing rules read `metadata.task_type`; OpenAI-API vendors get it back.
        b.request.extra.insert("metadata".into(), metadata.clone());
    }
    b.request.user = string(map, "user", "")?.map(str::to_owned);
    b.request.stream = boolean(map, "stream")?.unwrap_or(false);
    b.request.request_id = string(map, "request_id", "")?.map(str::to_owned);
    // Kept by OpenAI, or by the gateway for the vendors that keep nothing
    // (`crate::responses_store`), unless the client says not to.
    let store = boolean(map, "store")?;
    for key in [
        "service_tier",
        "truncation",
        "prompt_cache_key",
        "safety_identifier",
        "prompt_cache_retention",
    ] {
        string(map, key, "")?;
    }
    if let Some(include) = map.get("include").filter(|v| !v.is_null()) {
        if !include
            .as_array()
            .is_some_and(|l| l.iter().all(Value::is_string))
        {
            return Err(wrong_type("include", "an array of strings"));
        }
    }
    let mut echo = echo(map);
    if store == Some(false) {
        echo.insert("store".into(), Value::Bool(false));
    }
    b.request.echo = echo.into();
    Ok(b.request)
}

/// What a `response` object repeats of its request, OpenAI's defaults where
/// the client sent nothing.
fn echo(map: &Map<String, Value>) -> Map<String, Value> {
    let defaults = [
        ("instructions", Value::Null),
        ("max_output_tokens", Value::Null),
        ("metadata", Value::Object(Map::new())),
        ("parallel_tool_calls", Value::Bool(true)),
        ("previous_response_id", Value::Null),
        (
            "reasoning",
            serde_json::json!({"effort": null, "summary": null}),
        ),
        ("temperature", 1.0.into()),
        ("text", serde_json::json!({"format": {"type": "text"}})),
        ("tool_choice", "auto".into()),
        ("tools", Value::Array(Vec::new())),
        ("top_p", 1.0.into()),
        ("truncation", "disabled".into()),
        ("user", Value::Null),
    ];
    defaults
        .into_iter()
        .map(|(key, default)| {
            let value = map.get(key).filter(|v| !v.is_null()).cloned();
            (key.to_owned(), value.unwrap_or(default))
        })
        .collect()
}
