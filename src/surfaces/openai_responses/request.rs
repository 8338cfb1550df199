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
//! Long on purpose (about 1090 lines of code, then its tests): the strict
//! parser of the API's whole request schema, every field with the error the
//! vendor gives for it, reads best in one place.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::GatewayError;
use crate::model::json::Strict;
use crate::model::request::*;

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

fn input_item(b: &mut Builder, item: &Value, param: &str) -> Result<()> {
    let map = item
        .as_object()
        .ok_or_else(|| wrong_type(param, "an object"))?;
    let kind = string(map, "type", param)?.unwrap_or("message");
    match kind {
        "message" => message(b, item, param),
        "function_call" => {
            let m = object(
                item,
                param,
                &[
                    "type",
                    "id",
                    "call_id",
                    "name",
                    "arguments",
                    "status",
                    "namespace",
                    "caller",
                ],
            )?;
            let name = required_string(m, "name", param)?;
            let call = ToolCall {
                id: required_string(m, "call_id", param)?.to_owned(),
                kind: "function".into(),
                function: FunctionCall {
                    // A namespaced tool's call, as the vendor named it.
                    name: match string(m, "namespace", param)? {
                        Some(namespace) => super::flat_name(namespace, name),
                        None => name.to_owned(),
                    },
                    arguments: required_string(m, "arguments", param)?.to_owned(),
                },
            };
            if let Some(Message::Assistant { tool_calls, .. }) = b.assistant(true) {
                tool_calls.push(call);
            }
            Ok(())
        }
        "function_call_output" => {
            let m = object(
                item,
                param,
                &[
                    "type",
                    "id",
                    "call_id",
                    "output",
                    "status",
                    "name",
                    "namespace",
                    "caller",
                ],
            )?;
            let tool_call_id = required_string(m, "call_id", param)?.to_owned();
            let output = format!("{param}.output");
            let content = match m.get("output") {
                Some(Value::String(s)) => Content::Text(s.clone()),
                Some(Value::Array(parts)) => Content::Parts(
                    parts
                        .iter()
                        .enumerate()
                        .map(|(j, p)| input_part(b, p, &format!("{output}[{j}]")))
                        .collect::<Result<_>>()?,
                ),
                Some(_) => {
                    return Err(wrong_type(&output, "a string or an array of content parts"))
                }
                None => {
                    return Err(invalid(
                        &output,
                        format!("Missing required parameter: '{output}'."),
                    ))
                }
            };
            b.request.messages.push(Message::Tool {
                content,
                tool_call_id,
                is_error: false,
                cache_control: None,
            });
            Ok(())
        }
        "reasoning" => {
            let m = object(
                item,
                param,
                &[
                    "type",
                    "id",
                    "summary",
                    "content",
                    "encrypted_content",
                    "status",
                ],
            )?;
            let mut text = String::new();
            for key in ["summary", "content"] {
                let Some(list) = m.get(key).filter(|v| !v.is_null()) else {
                    continue;
                };
                let list = list
                    .as_array()
                    .ok_or_else(|| wrong_type(&format!("{param}.{key}"), "an array"))?;
                for (j, part) in list.iter().enumerate() {
                    let p = format!("{param}.{key}[{j}]");
                    let part = object(part, &p, &["type", "text"])?;
                    text.push_str(required_string(part, "text", &p)?);
                }
                // The summary is what the client saw; the raw content, when
                // it is there, is the same thought in full.
                if !text.is_empty() {
                    break;
                }
            }
            // The gateway's signature of translated thinking, or an
            // encrypted block (kept as redacted thinking).
            let encrypted = string(m, "encrypted_content", param)?;
            let (signature, redacted) = match encrypted {
                Some(e) => match e.strip_prefix(super::SIGNATURE_PREFIX) {
                    Some(signature) => (Some(signature.to_owned()), None),
                    None => (None, Some(e.to_owned())),
                },
                None => (None, None),
            };
            if !text.is_empty() || redacted.is_some() {
                b.reasoning.push(Thinking {
                    text,
                    signature,
                    redacted,
                });
            }
            Ok(())
        }
        // A search the vendor ran: its findings are in the answer that
        // followed, and no other vendor can take the call itself.
        "web_search_call" => {
            object(item, param, &["type", "id", "status", "action"])?;
            Ok(())
        }
        // A reference to a vendor's stored item (the gateway's own were
        // resolved before parsing).
        "item_reference" => {
            b.native_only(
                param,
                "an item_reference to an item the gateway did not store (its own item ids end \
                 in `_gw…`) needs the vendor that stored it: this model group's provider cannot \
                 take it",
            );
            Ok(())
        }
        kind if BUILT_IN_ITEMS.contains(&kind) => {
            b.native_only(
                param,
                format!("input items of type '{kind}' need OpenAI's own Responses API; this model group's provider cannot take them"),
            );
            Ok(())
        }
        other => Err(invalid(
            &format!("{param}.type"),
            format!("Invalid value: '{other}'."),
        )),
    }
}

fn message(b: &mut Builder, item: &Value, param: &str) -> Result<()> {
    let m = object(
        item,
        param,
        &["type", "id", "role", "content", "status", "phase"],
    )?;
    let role = required_string(m, "role", param)?;
    let content_param = format!("{param}.content");
    let content = m.get("content").ok_or_else(|| {
        invalid(
            &content_param,
            format!("Missing required parameter: '{content_param}'."),
        )
    })?;
    if role == "assistant" {
        let (text, refusal) = assistant_content(content, &content_param)?;
        if let Some(Message::Assistant {
            content,
            refusal: r,
            ..
        }) = b.assistant(false)
        {
            *content = text.map(Content::Text);
            *r = refusal;
        }
        return Ok(());
    }
    let content = match content {
        Value::String(s) => Content::Text(s.clone()),
        Value::Array(parts) => Content::Parts(
            parts
                .iter()
                .enumerate()
                .map(|(j, p)| input_part(b, p, &format!("{content_param}[{j}]")))
                .collect::<Result<_>>()?,
        ),
        _ => {
            return Err(wrong_type(
                &content_param,
                "a string or an array of content parts",
            ))
        }
    };
    b.request.messages.push(match role {
        "user" => Message::User { content, name: None },
        "system" => Message::System { content, name: None },
        "developer" => Message::Developer { content, name: None },
        other => {
            return Err(invalid(
                &format!("{param}.role"),
                format!("Invalid value: '{other}'. Supported values are: 'assistant', 'system', 'developer', and 'user'."),
            ))
        }
    });
    Ok(())
}

/// An assistant message's history: its text and its refusal.
fn assistant_content(content: &Value, param: &str) -> Result<(Option<String>, Option<String>)> {
    let parts = match content {
        Value::String(s) => return Ok((Some(s.clone()), None)),
        Value::Array(parts) => parts,
        _ => return Err(wrong_type(param, "a string or an array of content parts")),
    };
    let (mut text, mut refusal) = (None::<String>, None::<String>);
    for (j, part) in parts.iter().enumerate() {
        let p = format!("{param}[{j}]");
        let map = part
            .as_object()
            .ok_or_else(|| wrong_type(&p, "an object"))?;
        match required_string(map, "type", &p)? {
            "output_text" | "input_text" => {
                let m = object(part, &p, &["type", "text", "annotations", "logprobs"])?;
                text.get_or_insert_with(String::new)
                    .push_str(required_string(m, "text", &p)?);
            }
            "refusal" => {
                let m = object(part, &p, &["type", "refusal"])?;
                refusal
                    .get_or_insert_with(String::new)
                    .push_str(required_string(m, "refusal", &p)?);
            }
            other => {
                return Err(invalid(
                    &format!("{p}.type"),
                    format!(
                    "Invalid value: '{other}'. Assistant content is 'output_text' or 'refusal'."
                ),
                ))
            }
        }
    }
    Ok((text, refusal))
}

/// A user, system or developer content part (also a tool output's).
fn input_part(b: &mut Builder, part: &Value, param: &str) -> Result<ContentPart> {
    let map = part
        .as_object()
        .ok_or_else(|| wrong_type(param, "an object"))?;
    match required_string(map, "type", param)? {
        "input_text" => {
            let m = object(part, param, &["type", "text"])?;
            Ok(ContentPart::text(required_string(m, "text", param)?))
        }
        "input_image" => {
            let m = object(part, param, &["type", "image_url", "file_id", "detail"])?;
            let detail = string(m, "detail", param)?.map(str::to_owned);
            if let Some(url) = string(m, "image_url", param)? {
                let image_url = ImageUrl {
                    url: url.to_owned(),
                    detail,
                };
                image_url
                    .parse()
                    .map_err(|e| invalid(&format!("{param}.image_url"), e))?;
                return Ok(ContentPart::ImageUrl {
                    image_url,
                    cache_control: None,
                });
            }
            if string(m, "file_id", param)?.is_some() {
                b.native_only(param, "uploaded files (file_id) live on OpenAI's servers; this model group's provider cannot read them");
                return Ok(ContentPart::text(""));
            }
            Err(invalid(
                &format!("{param}.image_url"),
                format!("Missing required parameter: '{param}.image_url'."),
            ))
        }
        "input_file" => {
            let m = object(part, param, &["type", "file_data", "file_id", "file_url", "filename"])?;
            let title = string(m, "filename", param)?.map(str::to_owned);
            let source = if let Some(data) = string(m, "file_data", param)? {
                let (media_type, data) = data
                    .strip_prefix("data:")
                    .and_then(|rest| rest.split_once(','))
                    .and_then(|(meta, data)| Some((meta.strip_suffix(";base64")?, data)))
                    .ok_or_else(|| {
                        invalid(
                            &format!("{param}.file_data"),
                            "file_data must be a base64 data URL (data:<media type>;base64,...)",
                        )
                    })?;
                DocumentSource::Base64 {
                    media_type: media_type.to_owned(),
                    data: data.to_owned(),
                }
            } else if let Some(url) = string(m, "file_url", param)? {
                DocumentSource::Url(url.to_owned())
            } else if string(m, "file_id", param)?.is_some() {
                b.native_only(param, "uploaded files (file_id) live on OpenAI's servers; this model group's provider cannot read them");
                return Ok(ContentPart::text(""));
            } else {
                return Err(invalid(
                    param,
                    "input_file needs file_data, file_url or file_id",
                ));
            };
            Ok(ContentPart::Document(Document {
                source,
                title,
                cache_control: None,
            }))
        }
        other => Err(invalid(
            &format!("{param}.type"),
            format!("Invalid value: '{other}'. Supported values are: 'input_text', 'input_image' and 'input_file'."),
        )),
    }
}

/// One entry of `tools`: a function tool, a `namespace` of them (each
/// becomes a function tool named `<namespace>__<name>`, the name the answer
/// splits again), the hosted web search; another built-in tool is kept for
/// OpenAI only.
fn any_tool(b: &mut Builder, tool: &Value, param: &str) -> Result<()> {
    let map = tool
        .as_object()
        .ok_or_else(|| wrong_type(param, "an object"))?;
    match required_string(map, "type", param)? {
        "function" => function_tool(b, tool, param, None),
        "namespace" => {
            let m = object(tool, param, &["type", "name", "description", "tools"])?;
            let namespace = required_string(m, "name", param)?;
            required_string(m, "description", param)?;
            let tools = match m.get("tools") {
                Some(Value::Array(tools)) => tools,
                Some(_) => return Err(wrong_type(&format!("{param}.tools"), "an array")),
                None => {
                    let path = format!("{param}.tools");
                    return Err(invalid(
                        &path,
                        format!("Missing required parameter: '{path}'."),
                    ));
                }
            };
            for (j, inner) in tools.iter().enumerate() {
                let at = format!("{param}.tools[{j}]");
                let inner_map = inner
                    .as_object()
                    .ok_or_else(|| wrong_type(&at, "an object"))?;
                match required_string(inner_map, "type", &at)? {
                    "function" => function_tool(b, inner, &at, Some(namespace))?,
                    "custom" => b.native_only(
                        &at,
                        format!("{at}: built-in tool 'custom' runs on OpenAI's own Responses API only; this model group's provider takes function tools"),
                    ),
                    other => {
                        return Err(invalid(
                            &format!("{at}.type"),
                            format!("Invalid value: '{other}'. Supported values are: 'function' and 'custom'."),
                        ))
                    }
                }
            }
            Ok(())
        }
        kind if WEB_SEARCH_TOOLS.contains(&kind) => web_search(b, tool, param),
        kind if BUILT_IN_TOOLS.contains(&kind) => {
            b.native_only(
                param,
                format!("{param}: built-in tool '{kind}' runs on OpenAI's own Responses API only; this model group's provider takes function tools"),
            );
            Ok(())
        }
        kind => Err(invalid(
            &format!("{param}.type"),
            format!("Invalid value: '{kind}'."),
        )),
    }
}

/// The hosted web search: its domain filter and the user's location
/// (`search_context_size` and `external_web_access` have no counterpart
/// elsewhere: checked, not carried).
fn web_search(b: &mut Builder, tool: &Value, param: &str) -> Result<()> {
    let m = object(
        tool,
        param,
        &[
            "type",
            "filters",
            "user_location",
            "search_context_size",
            "external_web_access",
        ],
    )?;
    let mut search = WebSearch::default();
    if let Some(filters) = m.get("filters").filter(|v| !v.is_null()) {
        let at = format!("{param}.filters");
        let f = object(filters, &at, &["allowed_domains"])?;
        match f.get("allowed_domains") {
            None | Some(Value::Null) => {}
            Some(Value::Array(domains)) => {
                for (k, d) in domains.iter().enumerate() {
                    let domain = d.as_str().ok_or_else(|| {
                        wrong_type(&format!("{at}.allowed_domains[{k}]"), "a string")
                    })?;
                    search.allowed_domains.push(domain.to_owned());
                }
            }
            Some(_) => {
                return Err(wrong_type(
                    &format!("{at}.allowed_domains"),
                    "an array of strings",
                ))
            }
        }
    }
    if let Some(location) = m.get("user_location").filter(|v| !v.is_null()) {
        let at = format!("{param}.user_location");
        let l = object(
            location,
            &at,
            &["type", "city", "region", "country", "timezone"],
        )?;
        if let Some(kind) = string(l, "type", &at)?.filter(|k| *k != "approximate") {
            return Err(invalid(
                &format!("{at}.type"),
                format!("Invalid value: '{kind}'. Supported values are: 'approximate'."),
            ));
        }
        let text = |key| string(l, key, &at).map(|s| s.map(str::to_owned));
        search.user_location = Some(UserLocation {
            city: text("city")?,
            region: text("region")?,
            country: text("country")?,
            timezone: text("timezone")?,
        });
    }
    if let Some(size) = string(m, "search_context_size", param)? {
        if !["low", "medium", "high"].contains(&size) {
            return Err(invalid(
                &format!("{param}.search_context_size"),
                format!(
                    "Invalid value: '{size}'. Supported values are: 'low', 'medium' and 'high'."
                ),
            ));
        }
    }
    if m.get("external_web_access")
        .is_some_and(|v| !v.is_null() && !v.is_boolean())
    {
        return Err(wrong_type(
            &format!("{param}.external_web_access"),
            "a boolean",
        ));
    }
    b.request.web_search = Some(search);
    Ok(())
}

/// A flat function tool `{type, name, description, parameters, strict}`,
/// on its own or in `namespace`.
fn function_tool(
    b: &mut Builder,
    tool: &Value,
    param: &str,
    namespace: Option<&str>,
) -> Result<()> {
    let m = object(
        tool,
        param,
        &[
            "type",
            "name",
            "description",
            "parameters",
            "strict",
            "defer_loading",
        ],
    )?;
    let parameters = match m.get("parameters") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        Some(_) => {
            return Err(wrong_type(
                &format!("{param}.parameters"),
                "a JSON Schema object",
            ))
        }
    };
    let strict = match m.get("strict") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(s)) => Some(*s),
        Some(_) => return Err(wrong_type(&format!("{param}.strict"), "a boolean")),
    };
    let name = required_string(m, "name", param)?;
    let name = match namespace {
        Some(namespace) => super::flat_name(namespace, name),
        None => name.to_owned(),
    };
    // One name, one tool: a namespaced tool's flat name must stay its own.
    if b.request.tools.iter().any(|t| t.function.name == name) {
        return Err(invalid(
            &format!("{param}.name"),
            format!("Duplicate tool name: '{name}'."),
        ));
    }
    b.request.tools.push(Tool {
        kind: ToolKind::Function,
        function: FunctionDef {
            name,
            description: string(m, "description", param)?.map(str::to_owned),
            parameters,
            strict,
        },
        cache_control: None,
    });
    Ok(())
}

fn tool_choice(b: &mut Builder, choice: &Value) -> Result<ToolChoice> {
    match choice {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(invalid(
                "tool_choice",
                format!("Invalid value: '{other}'. Supported values are: 'none', 'auto', and 'required'."),
            )),
        },
        Value::Object(map) => {
            let kind = required_string(map, "type", "tool_choice")?;
            if kind == "function" {
                let m = object(choice, "tool_choice", &["type", "name"])?;
                return Ok(ToolChoice::Function(
                    required_string(m, "name", "tool_choice")?.to_owned(),
                ));
            }
            b.native_only(
                "tool_choice",
                format!("tool_choice of type '{kind}' needs OpenAI's own Responses API"),
            );
            Ok(ToolChoice::Auto)
        }
        _ => Err(wrong_type("tool_choice", "a string or an object")),
    }
}

/// `text.format`: `text`, `json_object`, or a flat `json_schema`.
fn text_format(format: &Value) -> Result<ResponseFormat> {
    let map = format
        .as_object()
        .ok_or_else(|| wrong_type("text.format", "an object"))?;
    match required_string(map, "type", "text.format")? {
        "text" => {
            object(format, "text.format", &["type"])?;
            Ok(ResponseFormat::Text)
        }
        "json_object" => {
            object(format, "text.format", &["type"])?;
            Ok(ResponseFormat::JsonObject)
        }
        "json_schema" => {
            let m = object(
                format,
                "text.format",
                &["type", "name", "schema", "strict", "description"],
            )?;
            #[derive(Deserialize)]
            struct Flat {
                name: String,
                #[serde(default)]
                description: Option<String>,
                #[serde(default)]
                schema: Option<Value>,
                #[serde(default)]
                strict: Option<bool>,
            }
            let flat = Flat::deserialize(Value::Object(m.clone()))
                .map_err(|e| invalid("text.format", format!("invalid text.format: {e}")))?;
            if !flat.schema.as_ref().is_some_and(Value::is_object) {
                return Err(invalid(
                    "text.format.schema",
                    "Missing required parameter: 'text.format.schema' (a JSON Schema object).",
                ));
            }
            Ok(ResponseFormat::JsonSchema {
                json_schema: JsonSchema {
                    name: flat.name,
                    description: flat.description,
                    schema: flat.schema,
                    strict: flat.strict,
                },
            })
        }
        other => Err(invalid(
            "text.format.type",
            format!("Invalid value: '{other}'. Supported values are: 'text', 'json_object' and 'json_schema'."),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(body: Value) -> ChatRequest {
        parse(body.to_string().as_bytes()).unwrap()
    }

    fn err(body: &str) -> GatewayError {
        parse(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn a_string_input_is_one_user_turn_after_the_instructions() {
        let r = ok(
            json!({"model": "g", "input": "hi", "instructions": "be brief",
            "max_output_tokens": 50, "temperature": 0.5, "stream": true, "user": "u"}),
        );
        assert_eq!(r.model, "g");
        assert_eq!(
            *r.messages,
            vec![
                Message::System {
                    content: Content::Text("be brief".into()),
                    name: None
                },
                Message::User {
                    content: Content::Text("hi".into()),
                    name: None
                }
            ]
        );
        assert_eq!(r.max_completion_tokens, Some(50));
        assert!(r.stream && r.include_usage);
        assert_eq!(r.user.as_deref(), Some("u"));
        assert_eq!(r.echo["instructions"], "be brief");
        assert_eq!(r.echo["tools"], json!([]));
        assert_eq!(r.echo["temperature"], 0.5);
        assert!(r.native_only.is_none());
    }

    #[test]
    fn items_become_turns_and_consecutive_calls_merge() {
        let r = ok(json!({"model": "g", "input": [
            {"role": "developer", "content": "dev"},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hmm"}],
             "encrypted_content": "enc"},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "call_2", "name": "g", "arguments": "{\"a\":1}", "status": "completed"},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "signed"}], "encrypted_content": "gw-signature:sig-1"},
            {"type": "function_call_output", "call_id": "call_1", "output": "one"},
            {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "two"}]},
            {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
             "content": [{"type": "output_text", "text": "done", "annotations": []}]}
        ]}));
        assert_eq!(r.messages.len(), 6, "{:?}", r.messages);
        assert!(matches!(&r.messages[0], Message::Developer { .. }));
        assert!(
            r.messages[1].clone()
                == Message::User {
                    content: Content::Parts(vec![
                        ContentPart::text("look"),
                        ContentPart::ImageUrl {
                            image_url: ImageUrl {
                                url: "data:image/png;base64,AAAA".into(),
                                detail: Some("low".into())
                            },
                            cache_control: None
                        }
                    ]),
                    name: None
                }
        );
        let Message::Assistant {
            reasoning,
            tool_calls,
            content,
            ..
        } = &r.messages[2]
        else {
            panic!("assistant")
        };
        assert_eq!(
            reasoning,
            &vec![Thinking {
                text: "hmm".into(),
                signature: None,
                redacted: Some("enc".into())
            }]
        );
        assert_eq!(tool_calls.len(), 2);
        assert_eq!(tool_calls[1].function.arguments, "{\"a\":1}");
        assert!(content.is_none());
        assert!(
            matches!(&r.messages[3], Message::Tool { tool_call_id, .. } if tool_call_id == "call_1")
        );
        assert!(matches!(&r.messages[4], Message::Tool { content, .. } if content.text() == "two"));
        assert!(
            matches!(&r.messages[5], Message::Assistant { content: Some(c), .. } if c.text() == "done")
        );
        let Message::Assistant { reasoning, .. } = &r.messages[5] else {
            panic!("assistant")
        };
        assert_eq!(
            reasoning[0].signature.as_deref(),
            Some("sig-1"),
            "the gateway's signature back"
        );
        assert!(reasoning[0].redacted.is_none());
    }

    #[test]
    fn tools_choice_format_and_reasoning() {
        let r = ok(json!({"model": "g", "input": "x",
            "tools": [{"type": "function", "name": "f", "description": "d",
                       "parameters": {"type": "object", "properties": {}}, "strict": true}],
            "tool_choice": {"type": "function", "name": "f"},
            "parallel_tool_calls": false,
            "reasoning": {"effort": "low", "summary": "auto"},
            "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}, "strict": true}},
            "metadata": {"task_type": "code"}, "store": false, "include": ["reasoning.encrypted_content"],
            "truncation": "disabled", "service_tier": "auto"}));
        assert_eq!(r.tools[0].function.name, "f");
        assert_eq!(r.tools[0].function.strict, Some(true));
        assert_eq!(r.tool_choice, Some(ToolChoice::Function("f".into())));
        assert_eq!(r.parallel_tool_calls, Some(false));
        assert_eq!(r.reasoning.and_then(|r| r.effort), Some(Effort::Low));
        assert!(
            matches!(&r.response_format, Some(ResponseFormat::JsonSchema { json_schema }) if json_schema.name == "s" && json_schema.strict == Some(true))
        );
        assert_eq!(r.extra["metadata"]["task_type"], "code");
        assert_eq!(r.extra.len(), 1, "nothing else reaches OpenAI-API vendors");
        assert_eq!(
            r.echo["tool_choice"],
            json!({"type": "function", "name": "f"})
        );
    }

    #[test]
    fn openai_only_features_are_kept_for_a_pass_through() {
        let r = ok(json!({"model": "g", "input": "x", "previous_response_id": "resp_1"}));
        assert_eq!(
            r.native_only.as_ref().map(|n| n.param.as_str()),
            Some("previous_response_id")
        );
        assert!(r.native_only.unwrap().message.contains("resp_gw"));
        let r = ok(json!({"model": "g", "input": "x", "tools": [
            {"type": "function", "name": "f"}, {"type": "file_search", "vector_store_ids": ["vs_1"]}]}));
        let n = r.native_only.unwrap();
        assert_eq!(n.param, "tools[1]");
        assert!(n.message.contains("file_search"), "{}", n.message);
        let r = ok(json!({"model": "g", "input": [{"type": "item_reference", "id": "msg_1"}]}));
        assert_eq!(r.native_only.unwrap().param, "input[0]");
    }

    #[test]
    fn namespaced_tools_become_function_tools_and_their_history_follows() {
        // Codex's sub-agents, as Codex 0.171 sends them.
        let r = ok(json!({"model": "g", "input": [
            {"role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c1", "namespace": "multi_agent_v1",
             "name": "wait_agent", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "done"}],
            "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
                {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
                 "tools": [{"type": "function", "name": "spawn_agent", "description": "Spawn.",
                            "parameters": {"type": "object"}, "strict": false},
                           {"type": "function", "name": "wait_agent"}]}]}));
        let names: Vec<_> = r.tools.iter().map(|t| t.function.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "exec_command",
                "multi_agent_v1__spawn_agent",
                "multi_agent_v1__wait_agent"
            ]
        );
        assert_eq!(r.tools[1].function.description.as_deref(), Some("Spawn."));
        assert!(r.native_only.is_none(), "{:?}", r.native_only);
        let Message::Assistant { tool_calls, .. } = &r.messages[1] else {
            panic!("assistant")
        };
        assert_eq!(tool_calls[0].function.name, "multi_agent_v1__wait_agent");
        assert_eq!(r.echo["tools"][1]["type"], "namespace", "echoed as sent");
        // A custom tool in a namespace has no counterpart elsewhere.
        let r = ok(
            json!({"model": "g", "input": "x", "tools": [{"type": "namespace",
            "name": "n", "description": "d", "tools": [{"type": "custom", "name": "c"}]}]}),
        );
        assert_eq!(r.native_only.unwrap().param, "tools[0].tools[0]");
        for (tools, param) in [
            (
                json!([{"type": "namespace", "name": "n", "description": "d"}]),
                "tools[0].tools",
            ),
            (
                json!([{"type": "namespace", "description": "d", "tools": []}]),
                "tools[0].name",
            ),
            (
                json!([{"type": "namespace", "name": "n", "tools": []}]),
                "tools[0].description",
            ),
            (
                json!([{"type": "namespace", "name": "n", "description": "d", "tools": [], "x": 1}]),
                "tools[0].x",
            ),
            (
                json!([{"type": "namespace", "name": "n", "description": "d", "tools": [{"type": "mcp"}]}]),
                "tools[0].tools[0].type",
            ),
            (
                json!([{"type": "function", "name": "n__f"},
                       {"type": "namespace", "name": "n", "description": "d",
                        "tools": [{"type": "function", "name": "f"}]}]),
                "tools[1].tools[0].name",
            ),
        ] {
            let body = json!({"model": "g", "input": "x", "tools": tools}).to_string();
            assert_eq!(err(&body).param.as_deref(), Some(param), "{body}");
        }
    }

    #[test]
    fn web_search_is_the_vendors_search_and_its_calls_in_history_are_dropped() {
        let r = ok(json!({"model": "g", "input": [
            {"role": "user", "content": "news?"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed",
             "action": {"type": "search", "query": "news"}},
            {"role": "assistant", "content": "Here."}],
            "tools": [{"type": "web_search", "external_web_access": true,
                "filters": {"allowed_domains": ["example.com"]}, "search_context_size": "low",
                "user_location": {"type": "approximate", "city": "Paris", "country": "FR"}}]}));
        assert!(r.native_only.is_none(), "{:?}", r.native_only);
        assert!(r.tools.is_empty());
        assert_eq!(r.messages.len(), 2, "the search call is not a turn");
        let search = r.web_search.unwrap();
        assert_eq!(search.allowed_domains, ["example.com"]);
        let location = search.user_location.unwrap();
        assert_eq!(
            (location.city.as_deref(), location.country.as_deref()),
            (Some("Paris"), Some("FR"))
        );
        assert!(
            ok(json!({"model": "g", "input": "x", "tools": [{"type": "web_search_preview"}]}))
                .web_search
                .is_some()
        );
        for (tool, param) in [
            (
                json!({"type": "web_search", "frobnicate": 1}),
                "tools[0].frobnicate",
            ),
            (
                json!({"type": "web_search", "filters": {"allowed_domains": [1]}}),
                "tools[0].filters.allowed_domains[0]",
            ),
            (
                json!({"type": "web_search", "user_location": {"type": "exact"}}),
                "tools[0].user_location.type",
            ),
            (
                json!({"type": "web_search", "search_context_size": "huge"}),
                "tools[0].search_context_size",
            ),
            (
                json!({"type": "web_search", "external_web_access": "yes"}),
                "tools[0].external_web_access",
            ),
        ] {
            let body = json!({"model": "g", "input": "x", "tools": [tool]}).to_string();
            assert_eq!(err(&body).param.as_deref(), Some(param), "{body}");
        }
    }

    #[test]
    fn refuses_what_openai_refuses() {
        for (body, param) in [
            (r#"{"model":"g","input":"x","frobnicate":1}"#, "frobnicate"),
            (r#"{"model":"g","input":"x","input":"y"}"#, "input"),
            (r#"{"input":"x"}"#, "model"),
            (r#"{"model":"g"}"#, "input"),
            (r#"{"model":"g","input":5}"#, "input"),
            (
                r#"{"model":"g","input":[{"role":"user","content":"x","extra":1}]}"#,
                "input[0].extra",
            ),
            (
                r#"{"model":"g","input":[{"role":"tool","content":"x"}]}"#,
                "input[0].role",
            ),
            (
                r#"{"model":"g","input":[{"role":"user","content":[{"type":"text","text":"x"}]}]}"#,
                "input[0].content[0].type",
            ),
            (
                r#"{"model":"g","input":[{"type":"function_call","call_id":"c","name":"f"}]}"#,
                "input[0].arguments",
            ),
            (
                r#"{"model":"g","input":[{"type":"bogus"}]}"#,
                "input[0].type",
            ),
            (
                r#"{"model":"g","input":"x","tools":[{"type":"function","function":{"name":"f"}}]}"#,
                "tools[0].function",
            ),
            (
                r#"{"model":"g","input":"x","tools":[{"type":"weird"}]}"#,
                "tools[0].type",
            ),
            (
                r#"{"model":"g","input":"x","tool_choice":"sometimes"}"#,
                "tool_choice",
            ),
            (
                r#"{"model":"g","input":"x","temperature":3}"#,
                "temperature",
            ),
            (
                r#"{"model":"g","input":"x","max_output_tokens":0}"#,
                "max_output_tokens",
            ),
            (
                r#"{"model":"g","input":"x","reasoning":{"effort":"max"}}"#,
                "reasoning.effort",
            ),
            (
                r#"{"model":"g","input":"x","text":{"format":{"type":"json_schema","name":"s"}}}"#,
                "text.format.schema",
            ),
            (
                r#"{"model":"g","input":"x","text":{"format":{"type":"json_schema","json_schema":{}}}}"#,
                "text.format.json_schema",
            ),
            (
                r#"{"model":"g","input":"x","metadata":{"a":1}}"#,
                "metadata.a",
            ),
            (
                r#"{"model":"g","input":"x","metadata":{"a":"1","a":"2"}}"#,
                "metadata.a",
            ),
        ] {
            let e = err(body);
            assert_eq!(e.param.as_deref(), Some(param), "{body}: {}", e.message);
            assert_eq!(e.status(), 400);
        }
        assert!(err(r#"{"model":"g","input":"x","x":1}"#)
            .message
            .contains("Unknown parameter: 'x'"));
        assert_eq!(err("  ").param.as_deref(), Some("body"));
    }
}
