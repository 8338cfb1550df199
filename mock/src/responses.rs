//! OpenAI's Responses API (`POST /v1/responses`; Azure OpenAI's v1 API at
//! `/openai/v1/responses`, with Azure's `api-key`): request rules, the
//! `response` object and the semantic event stream, shaped like the real API
//! (platform.openai.com/docs/api-reference/responses/create,
//! .../responses/object, .../responses-streaming).
//!
//! The mock keeps the ids of the responses it made, so a
//! `previous_response_id` it never made is refused as OpenAI refuses it; the
//! history of one it made is not replayed (tests send the whole history).
//! The last [`STORED`] responses made with `store` not false are kept whole,
//! for the stored-response calls (.../responses/get, /delete, /cancel,
//! /input-items): each vendor (OpenAI, Azure) finds only its own.
//!
//! Long on purpose (about 1020 lines of code, then its tests): one vendor's
//! checks, with the real API's error messages, and its answers and streams,
//! in one file as for every vendor the mock speaks.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde_json::{json, Map, Value};

use crate::answer::{fragments, Answer, Finish};
use crate::dialect::{count_words, Dialect, Failure, Meta, Prompt, Reply, SseEvent, Tool};
use crate::http::Request;
use crate::openai::{reasoning_model, OpenAi};

pub struct Responses;

const PATH: &str = "/v1/responses";
/// Azure OpenAI's v1 API (learn.microsoft.com/azure/ai-foundry/openai/reference-preview-latest).
const AZURE_PATH: &str = "/openai/v1/responses";

/// Every request body parameter of "Create a model response"
/// (platform.openai.com/docs/api-reference/responses/create); anything else
/// is refused with "Unknown parameter: 'X'." (code `unknown_parameter`).
const PARAMETERS: &[&str] = &[
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

/// `include` values the reference lists.
const INCLUDABLE: &[&str] = &[
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "message.input_image.image_url",
    "message.output_text.logprobs",
    "reasoning.encrypted_content",
    "web_search_call.action.sources",
    "web_search_call.results",
];

/// Fields of a flat function tool (`FunctionTool`).
const FUNCTION_TOOL: &[&str] = &[
    "type",
    "name",
    "description",
    "parameters",
    "strict",
    "defer_loading",
];

/// Request fields a `response` repeats (the reference's Response object).
const ECHOED: &[&str] = &[
    "instructions",
    "max_output_tokens",
    "metadata",
    "parallel_tool_calls",
    "previous_response_id",
    "reasoning",
    "service_tier",
    "store",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "truncation",
    "user",
];

/// Responses this mock made (bounded: the oldest are forgotten).
static MADE: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
const REMEMBERED: usize = 100_000;

fn remember(id: String) {
    if let Ok(mut made) = MADE.lock() {
        if made.len() >= REMEMBERED {
            made.pop_front();
        }
        made.push_back(id);
    }
}

fn made(id: &str) -> bool {
    MADE.lock().is_ok_and(|made| made.iter().any(|m| m == id))
}

/// A response kept for the stored-response calls, with its input items.
struct Stored {
    azure: bool,
    response: Value,
    input_items: Vec<Value>,
}

/// Stored responses kept (the oldest are forgotten).
const STORED: usize = 1000;
static KEPT: Mutex<VecDeque<Stored>> = Mutex::new(VecDeque::new());

fn keep(stored: Stored) {
    if let Ok(mut kept) = KEPT.lock() {
        if kept.len() >= STORED {
            kept.pop_front();
        }
        kept.push_back(stored);
    }
}

/// A stored-response path: (Azure's v1 API, the id, what follows it).
fn stored_path(path: &str) -> Option<(bool, &str, &str)> {
    let (azure, rest) = match path.strip_prefix("/openai") {
        Some(rest) => (true, rest),
        None => (false, path),
    };
    let rest = rest.strip_prefix(PATH)?.strip_prefix('/')?;
    let (id, rest) = rest.find('/').map_or((rest, ""), |at| rest.split_at(at));
    Some((azure, id, rest))
}

/// A reply with a JSON body.
fn reply(status: u16, body: &Value) -> Reply {
    Reply {
        status,
        body: crate::dialect::to_json(body),
        retry_after: None,
    }
}

/// OpenAI's 404 for a response id it does not have.
fn not_found(id: &str) -> Reply {
    reply(
        404,
        &json!({"error": {"message": format!("Response with id '{id}' not found."),
                          "type": "invalid_request_error", "param": null, "code": null}}),
    )
}

/// An input item as `input_items` lists it: a message's text content as
/// typed parts (`input_text`, the assistant's `output_text`), an id.
fn listed_item(item: &Value, id: String) -> Value {
    let mut item = item.clone();
    if item.get("type").is_none() && item.get("role").is_some() {
        item["type"] = "message".into();
    }
    if let Some(text) = item
        .get("content")
        .and_then(Value::as_str)
        .map(str::to_owned)
    {
        let part = if item.get("role").and_then(Value::as_str) == Some("assistant") {
            "output_text"
        } else {
            "input_text"
        };
        item["content"] = json!([{"type": part, "text": text}]);
    }
    if item.get("id").is_none() {
        item["id"] = id.into();
    }
    item
}

/// `GET .../input_items`: a page of the items, newest first unless
/// `order=asc`, `limit` (1-100, default 20) of them after the item `after`.
fn input_items(items: &[Value], query: &str) -> Reply {
    let limit = match crate::http::query_param(query, "limit") {
        None => 20,
        Some(n) => match n.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => {
                return OpenAi.error(&param(
                    format!(
                    "Invalid 'limit': expected an integer between 1 and 100, but got {n} instead."
                ),
                    "limit",
                    Some("invalid_value"),
                ))
            }
        },
    };
    let mut ordered: Vec<&Value> = items.iter().collect();
    match crate::http::query_param(query, "order").as_deref() {
        None | Some("desc") => ordered.reverse(),
        Some("asc") => {}
        Some(other) => {
            return OpenAi.error(&param(
                format!("Invalid value: '{other}'. Supported values are: 'asc' and 'desc'."),
                "order",
                Some("invalid_value"),
            ))
        }
    }
    if let Some(after) = crate::http::query_param(query, "after") {
        let at = ordered.iter().position(|i| i["id"] == after.as_str());
        ordered = at.map_or_else(Vec::new, |at| ordered.split_off(at + 1));
    }
    let has_more = ordered.len() > limit;
    ordered.truncate(limit);
    let (first, last) = (
        ordered.first().map(|i| &i["id"]),
        ordered.last().map(|i| &i["id"]),
    );
    reply(
        200,
        &json!({"object": "list", "data": ordered, "first_id": first, "last_id": last,
                "has_more": has_more}),
    )
}

impl Responses {
    /// A call on stored response `id` (`rest`: what follows the id).
    fn stored_call(&self, req: &Request, azure: bool, id: &str, rest: &str) -> Reply {
        let Ok(mut kept) = KEPT.lock() else {
            return OpenAi.error(&Failure::Status(500));
        };
        let found = kept
            .iter()
            .position(|s| s.azure == azure && s.response["id"] == id);
        let method = req.method();
        let allowed = match rest {
            "" => ["GET", "DELETE"].contains(&method),
            "/cancel" => method == "POST",
            "/input_items" => method == "GET",
            _ => {
                return reply(
                    404,
                    &json!({"error": {"message": "Not found", "type": "invalid_request_error", "param": null, "code": null}}),
                )
            }
        };
        if !allowed {
            return reply(
                405,
                &json!({"error": {"message": format!("Method {method} not allowed."), "type": "invalid_request_error", "param": null, "code": null}}),
            );
        }
        let Some(at) = found else {
            return not_found(id);
        };
        let Some(stored) = kept.get(at) else {
            return not_found(id);
        };
        match (method, rest) {
            ("DELETE", _) => {
                kept.remove(at);
                reply(
                    200,
                    &json!({"id": id, "object": "response", "deleted": true}),
                )
            }
            ("GET", "/input_items") => input_items(&stored.input_items, req.query()),
            // Only a background response can be cancelled (and one that
            // finished stays as it is).
            ("POST", _) if stored.response["background"] != true => OpenAi.error(
                &Failure::Invalid("Cannot cancel a synchronous response.".into()),
            ),
            _ => reply(200, &stored.response),
        }
    }
}

fn param(message: impl Into<String>, param: &str, code: Option<&'static str>) -> Failure {
    Failure::Param {
        message: message.into(),
        param: param.to_owned(),
        code,
    }
}

fn missing(name: &str) -> Failure {
    param(
        format!("Missing required parameter: '{name}'."),
        name,
        Some("missing_required_parameter"),
    )
}

fn unknown(name: &str) -> Failure {
    param(
        format!("Unknown parameter: '{name}'."),
        name,
        Some("unknown_parameter"),
    )
}

fn response_id(meta: Meta) -> String {
    format!("resp_mock{}", meta.seq)
}

/// A strict JSON Schema as Structured Outputs requires it
/// (platform.openai.com/docs/guides/structured-outputs, "Supported
/// schemas"): every object closes `additionalProperties` and requires all
/// its properties.
fn strict_schema_error(schema: &Value) -> Option<&'static str> {
    let Value::Object(map) = schema else {
        return None;
    };
    let is_object =
        map.get("type").and_then(Value::as_str) == Some("object") || map.contains_key("properties");
    if is_object {
        if map.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Some("'additionalProperties' is required to be supplied and to be false.");
        }
        let properties = map.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if properties.is_some_and(|p| p.keys().any(|k| !required.contains(&k.as_str()))) {
            return Some("'required' is required to be supplied and to be an array including every key in properties.");
        }
    }
    map.values().find_map(|v| match v {
        Value::Object(o) => o
            .values()
            .find_map(strict_schema_error)
            .or_else(|| strict_schema_error(v)),
        Value::Array(a) => a.iter().find_map(strict_schema_error),
        _ => None,
    })
}

fn check_text(text: &Value) -> Result<Option<Option<Value>>, Failure> {
    let Some(format) = text.get("format").filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(None)),
        Some("json_schema") => {
            let name = format
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| missing("text.format.name"))?;
            if name.is_empty()
                || name.len() > 64
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(param(
                    "Invalid 'text.format.name': string does not match pattern. Expected a string \
                     that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                    "text.format.name",
                    Some("invalid_value"),
                ));
            }
            let schema = format
                .get("schema")
                .filter(|s| s.is_object())
                .ok_or_else(|| missing("text.format.schema"))?;
            if format.get("strict") == Some(&Value::Bool(true)) {
                if let Some(problem) = strict_schema_error(schema) {
                    return Err(param(
                        format!("Invalid schema for response_format '{name}': In context=(), {problem}"),
                        "text.format.schema",
                        Some("invalid_json_schema"),
                    ));
                }
            }
            Ok(Some(Some(schema.clone())))
        }
        Some(other) => Err(param(
            format!("Invalid value: '{other}'. Supported values are: 'text', 'json_object', and 'json_schema'."),
            "text.format.type",
            Some("invalid_value"),
        )),
        None => Err(missing("text.format.type")),
    }
}

fn check_range(obj: &Map<String, Value>, name: &str, max: f64) -> Result<(), Failure> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(()),
        Some(v) => match v.as_f64() {
            Some(x) if (0.0..=max).contains(&x) => Ok(()),
            Some(x) if x < 0.0 => Err(param(
                format!("Invalid '{name}': decimal below minimum value. Expected a value >= 0, but got {x} instead."),
                name,
                Some("decimal_below_min_value"),
            )),
            Some(x) => Err(param(
                format!("Invalid '{name}': decimal above maximum value. Expected a value <= {max}, but got {x} instead."),
                name,
                Some("decimal_above_max_value"),
            )),
            None => Err(param(
                format!("Invalid type for '{name}': expected a decimal."),
                name,
                Some("invalid_type"),
            )),
        },
    }
}

/// The text of an input message's `content` (a string or its text parts).
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// Fields of the hosted web search tool (`WebSearchTool`; Codex sends
/// `external_web_access` too).
const WEB_SEARCH_TOOL: &[&str] = &[
    "type",
    "filters",
    "user_location",
    "search_context_size",
    "external_web_access",
];

/// Fields of a `namespace` of tools (`NamespaceToolParam`), all required.
const NAMESPACE_TOOL: &[&str] = &["type", "name", "description", "tools"];

fn check_fields(t: &Value, fields: &[&str], at: &str) -> Result<(), Failure> {
    match t
        .as_object()
        .and_then(|m| m.keys().find(|k| !fields.contains(&k.as_str())))
    {
        Some(key) => Err(unknown(&format!("{at}.{key}"))),
        None => Ok(()),
    }
}

/// A namespace: its name, description and function or custom tools. The
/// mock calls none of them (they are Codex's sub-agents).
fn check_namespace(t: &Value, at: &str) -> Result<(), Failure> {
    check_fields(t, NAMESPACE_TOOL, at)?;
    for key in ["name", "description"] {
        if t.get(key).and_then(Value::as_str).is_none() {
            return Err(missing(&format!("{at}.{key}")));
        }
    }
    let inner = t
        .get("tools")
        .and_then(Value::as_array)
        .ok_or_else(|| missing(&format!("{at}.tools")))?;
    for (j, tool) in inner.iter().enumerate() {
        let at = format!("{at}.tools[{j}]");
        match tool.get("type").and_then(Value::as_str) {
            Some("function") => check_fields(tool, FUNCTION_TOOL, &at)?,
            Some("custom") => {}
            _ => {
                return Err(param(
                    format!("Invalid value for '{at}.type': expected 'function' or 'custom'."),
                    &format!("{at}.type"),
                    Some("invalid_value"),
                ))
            }
        }
    }
    Ok(())
}

fn tools(obj: &Map<String, Value>) -> Result<Vec<Tool>, Failure> {
    let Some(list) = obj.get("tools").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let at = format!("tools[{i}]");
        let kind = t
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| missing(&format!("{at}.type")))?;
        if kind == "namespace" {
            check_namespace(t, &at)?;
            continue;
        }
        if kind.starts_with("web_search") {
            check_fields(t, WEB_SEARCH_TOOL, &at)?;
            continue;
        }
        if kind != "function" {
            // Other built-in tools (file_search, custom, local_shell...)
            // run on OpenAI's side: the mock never calls them.
            continue;
        }
        if let Some(key) = t
            .as_object()
            .and_then(|m| m.keys().find(|k| !FUNCTION_TOOL.contains(&k.as_str())))
        {
            return Err(unknown(&format!("{at}.{key}")));
        }
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| missing(&format!("{at}.name")))?;
        out.push(Tool {
            name: name.to_owned(),
            schema: t.get("parameters").cloned().unwrap_or(Value::Null),
        });
    }
    Ok(out)
}

impl Dialect for Responses {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn handles(&self, path: &str) -> bool {
        path.ends_with(PATH)
    }

    fn parse_request(&self, req: &Request, body: &Value) -> Result<Prompt, Failure> {
        let mut p = self.parse(body)?;
        p.azure = req.path().ends_with(AZURE_PATH);
        Ok(p)
    }

    fn has_call(&self, path: &str) -> bool {
        stored_path(path).is_some()
    }

    fn call(&self, req: &Request, path: &str) -> Reply {
        let Some((azure, id, rest)) = stored_path(path) else {
            return self.error(&Failure::Status(404));
        };
        let checked = if azure {
            crate::azure::Azure.check_headers(req)
        } else {
            OpenAi.check_headers(req)
        };
        match checked {
            Ok(()) => self.stored_call(req, azure, id, rest),
            Err(f) => self.error(&f),
        }
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        if req.path().ends_with(AZURE_PATH) {
            return crate::azure::Azure.check_headers(req);
        }
        OpenAi.check_headers(req)
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        let obj = body
            .as_object()
            .ok_or_else(|| Failure::Invalid("The request body must be a JSON object.".into()))?;
        if let Some(key) = obj.keys().find(|k| !PARAMETERS.contains(&k.as_str())) {
            return Err(unknown(key));
        }
        let model = obj
            .get("model")
            .and_then(Value::as_str)
            .ok_or_else(|| missing("model"))?;
        if let Some(id) = obj.get("previous_response_id").and_then(Value::as_str) {
            if !made(id) {
                return Err(param(
                    format!("Previous response with id '{id}' not found."),
                    "previous_response_id",
                    Some("previous_response_not_found"),
                ));
            }
        }
        let stateful = ["previous_response_id", "prompt", "conversation"]
            .iter()
            .any(|k| obj.get(*k).is_some_and(|v| !v.is_null()));
        let input = obj.get("input").filter(|v| !v.is_null());
        if input.is_none() && !stateful {
            return Err(missing("input"));
        }
        if let Some(n) = obj.get("max_output_tokens").filter(|v| !v.is_null()) {
            match n.as_i64() {
                Some(n) if n >= 16 => {}
                Some(n) => {
                    return Err(param(
                        format!("Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got {n} instead."),
                        "max_output_tokens",
                        Some("integer_below_min_value"),
                    ))
                }
                None => {
                    return Err(param(
                        "Invalid type for 'max_output_tokens': expected an integer.",
                        "max_output_tokens",
                        Some("invalid_type"),
                    ))
                }
            }
        }
        check_range(obj, "temperature", 2.0)?;
        check_range(obj, "top_p", 1.0)?;
        let reasoning = obj.get("reasoning").filter(|r| !r.is_null());
        if reasoning_model(model) {
            // Reasoning models: only the default sampling (as on chat).
            for name in ["temperature", "top_p"] {
                if obj
                    .get(name)
                    .is_some_and(|v| !v.is_null() && v.as_f64() != Some(1.0))
                {
                    return Err(param(
                        format!(
                            "Unsupported parameter: '{name}' is not supported with this model."
                        ),
                        name,
                        Some("unsupported_parameter"),
                    ));
                }
            }
        } else if let Some(r) = reasoning {
            for key in ["effort", "summary"] {
                if r.get(key).is_some_and(|v| !v.is_null()) {
                    let name = format!("reasoning.{key}");
                    return Err(param(
                        format!(
                            "Unsupported parameter: '{name}' is not supported with this model."
                        ),
                        &name,
                        Some("unsupported_parameter"),
                    ));
                }
            }
        }
        if let Some(metadata) = obj.get("metadata").filter(|m| !m.is_null()) {
            let m = metadata.as_object().ok_or_else(|| {
                param(
                    "Invalid type for 'metadata': expected an object.",
                    "metadata",
                    Some("invalid_type"),
                )
            })?;
            if m.len() > 16 {
                return Err(param(
                    format!("Invalid 'metadata': too many properties. Expected an object with at most 16 properties, but got an object with {} properties instead.", m.len()),
                    "metadata",
                    Some("object_above_max_properties"),
                ));
            }
            if let Some((k, _)) = m
                .iter()
                .find(|(k, v)| k.len() > 64 || v.as_str().is_none_or(|s| s.len() > 512))
            {
                return Err(param(
                    format!("Invalid 'metadata.{k}': keys are at most 64 characters, values strings of at most 512."),
                    &format!("metadata.{k}"),
                    Some("invalid_value"),
                ));
            }
        }
        let streaming = obj.get("stream").and_then(Value::as_bool) == Some(true);
        if obj.get("stream_options").is_some_and(|o| !o.is_null()) && !streaming {
            return Err(param(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                "stream_options",
                None,
            ));
        }
        if let Some(include) = obj.get("include").and_then(Value::as_array) {
            if let Some(bad) = include
                .iter()
                .find(|v| v.as_str().is_none_or(|s| !INCLUDABLE.contains(&s)))
            {
                return Err(param(
                    format!(
                        "Invalid value: {bad}. Supported values are: {}.",
                        INCLUDABLE.join(", ")
                    ),
                    "include",
                    Some("invalid_value"),
                ));
            }
        }
        // Only reasoning models have encrypted reasoning to include.
        let encrypted = obj
            .get("include")
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|v| v == "reasoning.encrypted_content"));
        if encrypted && !reasoning_model(model) {
            return Err(param(
                "Encrypted content is not supported with this model.",
                "include",
                None,
            ));
        }
        let mut p = Prompt {
            model: model.to_owned(),
            max_tokens: obj.get("max_output_tokens").and_then(Value::as_u64),
            tools: tools(obj)?,
            json: match obj.get("text").filter(|t| !t.is_null()) {
                Some(text) => check_text(text)?,
                None => None,
            },
            echo: ECHOED
                .iter()
                .filter_map(|k| Some(((*k).to_owned(), obj.get(*k)?.clone())))
                .collect(),
            ..Prompt::default()
        };
        p.tool_choice = crate::openai::tool_choice(obj.get("tool_choice"), "/name");
        if let Some(instructions) = obj.get("instructions").and_then(Value::as_str) {
            p.prompt_words += count_words(instructions);
        }
        p.input_items = match input {
            Some(Value::String(text)) => {
                vec![json!({"type": "message", "role": "user", "content": text})]
            }
            Some(Value::Array(items)) => items.clone(),
            _ => Vec::new(),
        };
        match input {
            Some(Value::String(text)) => {
                p.prompt_words += count_words(text);
                p.last_user_text = text.clone();
            }
            Some(Value::Array(items)) => read_items(items, &mut p)?,
            Some(_) => {
                return Err(param(
                    "Invalid type for 'input': expected a string or an array of input items.",
                    "input",
                    Some("invalid_type"),
                ))
            }
            None => {}
        }
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        OpenAi.error(failure)
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        let id = response_id(meta);
        remember(id.clone());
        let (status, incomplete) = status(a);
        let mut response = json!({
            "id": id,
            "object": "response",
            "created_at": meta.created,
            "status": status,
            "background": false,
            "error": null,
            "incomplete_details": incomplete,
            "instructions": null,
            "max_output_tokens": p.max_tokens,
            "model": p.model,
            "output": output(p, a, meta, status),
            "parallel_tool_calls": true,
            "previous_response_id": null,
            "reasoning": {"effort": null, "summary": null},
            "service_tier": "default",
            "store": true,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage(a),
            "user": null,
            "metadata": {},
        });
        for (key, value) in &p.echo {
            response[key] = value.clone();
        }
        if response["store"] != false {
            let input_items = p
                .input_items
                .iter()
                .enumerate()
                .map(|(i, item)| listed_item(item, format!("msg_in{}_{i}", meta.seq)))
                .collect();
            keep(Stored {
                azure: p.azure,
                response: response.clone(),
                input_items,
            });
        }
        response
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        let mut s = Events::default();
        let mut response = self.response(p, a, meta);
        let done_output = response["output"].take();
        let terminal = response["status"].clone();
        let (usage, incomplete) = (
            response["usage"].take(),
            response["incomplete_details"].take(),
        );
        response["status"] = "in_progress".into();
        response["output"] = json!([]);
        response["usage"] = Value::Null;
        s.push("response.created", json!({"response": response}), false);
        s.push("response.in_progress", json!({"response": response}), false);
        let items = done_output.as_array().cloned().unwrap_or_default();
        for (index, item) in items.iter().enumerate() {
            stream_item(&mut s, index, item, a);
        }
        response["status"] = terminal.clone();
        response["output"] = done_output;
        response["usage"] = usage;
        response["incomplete_details"] = incomplete;
        let name = if terminal == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        s.push(name, json!({"response": response}), false);
        s.events
    }

    fn stream_error(&self) -> SseEvent {
        SseEvent {
            name: Some("error"),
            data: r#"{"type":"error","code":"server_error","message":"The server had an error while processing your request.","param":null,"sequence_number":0}"#.into(),
            delta: false,
        }
    }
}

/// Reads the input items into the prompt, with the reference's rule that a
/// function call output answers a function call made before it.
fn read_items(items: &[Value], p: &mut Prompt) -> Result<(), Failure> {
    let mut call_ids: Vec<&str> = Vec::new();
    let mut results = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        results = match kind {
            "message" => {
                let role = item
                    .get("role")
                    .and_then(Value::as_str)
                    .ok_or_else(|| missing(&format!("input[{i}].role")))?;
                if !["user", "assistant", "system", "developer"].contains(&role) {
                    return Err(param(
                        format!("Invalid value: '{role}'. Supported values are: 'assistant', 'system', 'developer', and 'user'."),
                        &format!("input[{i}].role"),
                        Some("invalid_value"),
                    ));
                }
                let text = content_text(item.get("content"));
                p.prompt_words += count_words(&text);
                if role == "user" {
                    p.last_user_text = text;
                }
                Vec::new()
            }
            "function_call" => {
                let id = item
                    .get("call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| missing(&format!("input[{i}].call_id")))?;
                call_ids.push(id);
                p.prior_tool_calls += 1;
                Vec::new()
            }
            "function_call_output" => {
                let id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                if !call_ids.contains(&id) {
                    return Err(param(
                        format!("No tool call found for function call output with call_id {id}."),
                        "input",
                        None,
                    ));
                }
                let output = match item.get("output") {
                    Some(Value::String(s)) => s.clone(),
                    other => content_text(other),
                };
                p.prompt_words += count_words(&output);
                results.push(output);
                results
            }
            "reasoning" | "item_reference" => results,
            "local_shell_call"
            | "local_shell_call_output"
            | "custom_tool_call"
            | "custom_tool_call_output"
            | "web_search_call"
            | "file_search_call"
            | "computer_call"
            | "computer_call_output"
            | "code_interpreter_call"
            | "image_generation_call"
            | "mcp_call"
            | "mcp_list_tools"
            | "mcp_approval_request"
            | "mcp_approval_response"
            | "shell_call"
            | "shell_call_output"
            | "apply_patch_call"
            | "apply_patch_call_output"
            | "compaction" => Vec::new(),
            other => {
                return Err(param(
                    format!("Invalid value: '{other}'."),
                    &format!("input[{i}].type"),
                    Some("invalid_value"),
                ))
            }
        };
    }
    if !results.is_empty() {
        p.tool_results = Some(results);
    }
    Ok(())
}

fn status(a: &Answer) -> (&'static str, Value) {
    match a.finish {
        Finish::Length => ("incomplete", json!({"reason": "max_output_tokens"})),
        Finish::ContentFilter => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

fn usage(a: &Answer) -> Value {
    // Reasoning tokens are part of the output tokens; cached ones of the input.
    let output = a.completion_tokens + a.reasoning_tokens;
    json!({
        "input_tokens": a.prompt_tokens,
        "input_tokens_details": {"cached_tokens": a.cached_tokens},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": a.reasoning_tokens},
        "total_tokens": a.prompt_tokens + output,
    })
}

/// A reasoning model thinks before it answers: its summary (when the
/// request asked for reasoning), then the message, then the calls.
fn output(p: &Prompt, a: &Answer, meta: Meta, status: &str) -> Value {
    let mut items = Vec::new();
    if reasoning_model(&p.model) {
        items.push(
            json!({"id": format!("rs_mock{}", meta.seq), "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Thinking it over."}]}),
        );
    }
    if !a.text.is_empty() {
        items.push(json!({"id": format!("msg_mock{}", meta.seq), "type": "message", "status": status,
            "role": "assistant",
            "content": [{"type": "output_text", "text": a.text, "annotations": [], "logprobs": []}]}));
    }
    for (i, call) in a.tool_calls.iter().enumerate() {
        items.push(
            json!({"id": format!("fc_mock{}_{i}", meta.seq), "type": "function_call",
            "status": "completed", "call_id": format!("call_{}", call.n), "name": call.name,
            "arguments": call.arguments_json}),
        );
    }
    Value::Array(items)
}

/// Events numbered by `sequence_number` as they are pushed.
#[derive(Default)]
struct Events {
    events: Vec<SseEvent>,
}

impl Events {
    fn push(&mut self, name: &'static str, mut data: Value, delta: bool) {
        data["type"] = name.into();
        data["sequence_number"] = self.events.len().into();
        self.events.push(SseEvent {
            name: Some(name),
            data: crate::dialect::to_json(&data),
            delta,
        });
    }
}

/// One output item's events: added, its content in deltas, done.
fn stream_item(s: &mut Events, index: usize, item: &Value, a: &Answer) {
    let id = item["id"].clone();
    let mut opening = item.clone();
    match item["type"].as_str() {
        Some("message") => {
            opening["status"] = "in_progress".into();
            opening["content"] = json!([]);
            s.push(
                "response.output_item.added",
                json!({"output_index": index, "item": opening}),
                false,
            );
            let empty =
                json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
            s.push(
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": empty}),
                false,
            );
            for chunk in &a.chunks {
                s.push("response.output_text.delta",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "delta": chunk, "logprobs": []}), true);
            }
            let part = item["content"][0].clone();
            s.push("response.output_text.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "text": part["text"], "logprobs": []}), false);
            s.push(
                "response.content_part.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
                false,
            );
        }
        Some("function_call") => {
            opening["status"] = "in_progress".into();
            opening["arguments"] = "".into();
            s.push(
                "response.output_item.added",
                json!({"output_index": index, "item": opening}),
                true,
            );
            let arguments = item["arguments"].as_str().unwrap_or("");
            for fragment in fragments(arguments) {
                s.push(
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": index, "delta": fragment}),
                    true,
                );
            }
            s.push("response.function_call_arguments.done",
                json!({"item_id": id, "output_index": index, "name": item["name"], "arguments": arguments}), false);
        }
        Some("reasoning") => {
            opening["summary"] = json!([]);
            s.push(
                "response.output_item.added",
                json!({"output_index": index, "item": opening}),
                false,
            );
            let part = item["summary"][0].clone();
            s.push(
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": index, "summary_index": 0,
                       "part": {"type": "summary_text", "text": ""}}),
                false,
            );
            s.push("response.reasoning_summary_text.delta",
                json!({"item_id": id, "output_index": index, "summary_index": 0, "delta": part["text"]}), true);
            s.push("response.reasoning_summary_text.done",
                json!({"item_id": id, "output_index": index, "summary_index": 0, "text": part["text"]}), false);
            s.push(
                "response.reasoning_summary_part.done",
                json!({"item_id": id, "output_index": index, "summary_index": 0, "part": part}),
                false,
            );
        }
        _ => {}
    }
    s.push(
        "response.output_item.done",
        json!({"output_index": index, "item": item}),
        false,
    );
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::answer::plan;
    use crate::scenario::Scenario;

    fn refused(body: Value) -> (String, String) {
        match Responses.parse(&body) {
            Err(Failure::Param { param, message, .. }) => (param, message),
            other => panic!("not refused with a param: {other:?}"),
        }
    }

    #[test]
    fn refuses_what_openai_refuses() {
        let base = json!({"model": "gpt-4o", "input": "hi"});
        let with = |extra: Value| {
            let mut b = base.clone();
            b.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            b
        };
        assert_eq!(refused(with(json!({"frobnicate": 1}))).0, "frobnicate");
        assert_eq!(
            refused(with(json!({"max_output_tokens": 15}))).0,
            "max_output_tokens"
        );
        assert_eq!(refused(with(json!({"temperature": 2.5}))).0, "temperature");
        assert_eq!(
            refused(with(json!({"reasoning": {"effort": "low"}}))).0,
            "reasoning.effort"
        );
        assert_eq!(refused(json!({"model": "gpt-4o"})).0, "input");
        let loose = json!({"format": {"type": "json_schema", "name": "s", "strict": true,
            "schema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}});
        assert_eq!(
            refused(with(json!({ "text": loose }))).0,
            "text.format.schema"
        );
        let (param, message) = refused(with(json!({"previous_response_id": "resp_nobody"})));
        assert_eq!(param, "previous_response_id");
        assert!(message.contains("not found"));
        let orphan = json!([{"type": "function_call_output", "call_id": "c1", "output": "x"}]);
        assert_eq!(refused(with(json!({ "input": orphan }))).0, "input");
        for (tool, at) in [
            (
                json!({"type": "web_search", "domains": []}),
                "tools[0].domains",
            ),
            (
                json!({"type": "namespace", "name": "n", "tools": []}),
                "tools[0].description",
            ),
            (
                json!({"type": "namespace", "name": "n", "description": "d",
                       "tools": [{"type": "mcp"}]}),
                "tools[0].tools[0].type",
            ),
        ] {
            assert_eq!(refused(with(json!({"tools": [tool]}))).0, at);
        }
        let codex = json!({"tools": [{"type": "web_search", "external_web_access": true},
            {"type": "namespace", "name": "n", "description": "d",
             "tools": [{"type": "function", "name": "f", "parameters": {}, "strict": false}]}]});
        assert!(Responses.parse(&with(codex)).is_ok());
        let (param, message) = refused(with(json!({"include": ["reasoning.encrypted_content"]})));
        assert_eq!(param, "include");
        assert!(message.contains("Encrypted content is not supported"));
        // A reasoning model takes reasoning, but only the default sampling.
        let o3 = json!({"model": "o3", "input": "hi", "reasoning": {"effort": "low"},
                        "include": ["reasoning.encrypted_content"]});
        assert!(Responses.parse(&o3).is_ok());
        let hot = json!({"model": "o3", "input": "hi", "temperature": 0.5});
        assert_eq!(refused(hot).0, "temperature");
    }

    #[test]
    fn a_response_it_made_may_be_continued() {
        let p = Responses
            .parse(&json!({"model": "gpt-4o", "input": "hi"}))
            .unwrap();
        let a = plan(&p, &Scenario::default(), "openai", None);
        let id = Responses.response(
            &p,
            &a,
            Meta {
                seq: 991,
                created: 1,
            },
        )["id"]
            .clone();
        let next = json!({"model": "gpt-4o", "input": "more", "previous_response_id": id});
        assert!(Responses.parse(&next).is_ok());
    }

    #[test]
    fn stream_events_are_numbered_and_end_with_the_response() {
        let body = json!({"model": "gpt-4o", "input": "look", "stream": true, "instructions": "x",
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object",
                "properties": {"q": {"type": "string"}}}}], "tool_choice": "required"});
        let p = Responses.parse(&body).unwrap();
        let a = plan(&p, &Scenario::default(), "openai", None);
        let events = Responses.stream(&p, &a, Meta { seq: 5, created: 1 });
        let data: Vec<Value> = events
            .iter()
            .map(|e| serde_json::from_str(&e.data).unwrap())
            .collect();
        for (i, (e, d)) in events.iter().zip(&data).enumerate() {
            assert_eq!(d["sequence_number"], i);
            assert_eq!(Some(d["type"].as_str().unwrap()), e.name);
        }
        let names: Vec<&str> = events.iter().filter_map(|e| e.name).collect();
        assert_eq!(
            names[..3],
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added"
            ]
        );
        assert!(names.contains(&"response.function_call_arguments.done"));
        let last = data.last().unwrap();
        assert_eq!(last["type"], "response.completed");
        assert_eq!(last["response"]["output"][0]["type"], "function_call");
        assert_eq!(
            last["response"]["instructions"], "x",
            "the request's fields repeated"
        );
        assert!(last["response"]["usage"]["total_tokens"].as_u64().unwrap() > 0);
    }
}

#[cfg(test)]
mod stored_tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn call(method: &str, path: &str) -> (u16, Value) {
        let raw =
            format!("{method} {path} HTTP/1.1\r\nauthorization: Bearer sk-mock-openai\r\n\r\n");
        let req = crate::http::parse(&raw);
        assert!(Responses.has_call(req.path()));
        let reply = Responses.call(&req, req.path());
        (reply.status, serde_json::from_str(&reply.body).unwrap())
    }

    #[test]
    fn a_stored_response_is_retrieved_listed_and_deleted_as_openai_does() {
        let p = Responses
            .parse(&json!({"model": "m", "input": "keep this"}))
            .unwrap();
        let answer = crate::answer::plan(&p, &crate::scenario::Scenario::default(), "openai", None);
        let meta = Meta {
            seq: 987_654,
            created: 1,
        };
        let made = Responses.response(&p, &answer, meta);
        let id = made["id"].as_str().unwrap();
        let path = format!("/v1/responses/{id}");
        assert_eq!(call("GET", &path), (200, made.clone()));
        let (status, items) = call("GET", &format!("{path}/input_items"));
        assert_eq!(status, 200);
        assert_eq!(items["data"][0]["content"][0]["type"], "input_text");
        assert_eq!(items["first_id"], items["data"][0]["id"]);
        assert_eq!(call("POST", &format!("{path}/cancel")).0, 400);
        assert_eq!(call("DELETE", &path).1["deleted"], true);
        let (status, gone) = call("GET", &path);
        assert_eq!(status, 404);
        assert!(gone["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not found"));
        // A path that is no stored-response call.
        assert!(!Responses.has_call("/v1/responsesx"));
    }
}
