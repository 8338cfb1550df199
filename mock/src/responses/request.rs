//! Responses API request rules: its parameters, `text` (structured
//! outputs), sampling ranges, tools (functions, web search, namespaces) and
//! input items, refused with OpenAI's messages, params and codes.

use serde_json::{Map, Value};

use crate::dialect::{count_words, Failure, Prompt, Tool};

/// Every request body parameter of "Create a model response"
/// (platform.openai.com/docs/api-reference/responses/create); anything else
/// is refused with "Unknown parameter: 'X'." (code `unknown_parameter`).
pub(super) const PARAMETERS: &[&str] = &[
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
pub(super) const INCLUDABLE: &[&str] = &[
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

pub(super) fn param(
    message: impl Into<String>,
    param: &str,
    code: Option<&'static str>,
) -> Failure {
    Failure::Param {
        message: message.into(),
        param: param.to_owned(),
        code,
    }
}

pub(super) fn missing(name: &str) -> Failure {
    param(
        format!("Missing required parameter: '{name}'."),
        name,
        Some("missing_required_parameter"),
    )
}

pub(super) fn unknown(name: &str) -> Failure {
    param(
        format!("Unknown parameter: '{name}'."),
        name,
        Some("unknown_parameter"),
    )
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

pub(super) fn check_text(text: &Value) -> Result<Option<Option<Value>>, Failure> {
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

pub(super) fn check_range(obj: &Map<String, Value>, name: &str, max: f64) -> Result<(), Failure> {
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

pub(super) fn tools(obj: &Map<String, Value>) -> Result<Vec<Tool>, Failure> {
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

/// Reads the input items into the prompt, with the reference's rule that a
/// function call output answers a function call made before it.
pub(super) fn read_items(items: &[Value], p: &mut Prompt) -> Result<(), Failure> {
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
