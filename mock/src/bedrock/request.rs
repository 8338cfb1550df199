//! Bedrock Converse request checks: content blocks, the inference
//! configuration, Claude's thinking and its signed reasoning, cache points,
//! tools and `additionalModelResponseFieldPaths`.

use serde_json::{Map, Value};

use crate::answer::claude_signature;
use crate::dialect::{Failure, Tool, ToolChoice};

const BLOCK_TYPES: [&str; 8] = [
    "text",
    "image",
    "document",
    "toolUse",
    "toolResult",
    "guardContent",
    "reasoningContent",
    "cachePoint",
];

/// Bedrock answers Claude's own validation errors with this prefix.
pub(super) const MODEL_ERRORS: &str = "The model returned the following errors: ";

pub(super) fn invalid(msg: impl Into<String>) -> Failure {
    Failure::Invalid(msg.into())
}

/// InferenceConfiguration's members
/// (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InferenceConfiguration.html):
/// anything else (seed, topK...) goes in additionalModelRequestFields.
const INFERENCE_KEYS: [&str; 4] = ["maxTokens", "temperature", "topP", "stopSequences"];

/// The model id of a `/model/{modelId}/converse[-stream]` path, decoded once.
pub(crate) fn path_model(path: &str) -> String {
    let id = path
        .strip_prefix("/model/")
        .and_then(|rest| rest.rsplit_once('/'))
        .map_or("", |(id, _)| id);
    let mut out = Vec::with_capacity(id.len());
    let bytes = id.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Claude models after the 3.x generation refuse temperature and topP
/// together, on Bedrock too ("The model returned the following errors:
/// `temperature` and `top_p` cannot both be specified for this model.").
fn claude_refuses_both(model: &str) -> bool {
    model.contains("claude")
        && !["claude-3", "claude-v2", "claude-instant"]
            .iter()
            .any(|old| model.contains(old))
}

pub(super) fn check_inference(inference: &Map<String, Value>, model: &str) -> Result<(), Failure> {
    if let Some(extra) = inference
        .keys()
        .find(|k| !INFERENCE_KEYS.contains(&k.as_str()))
    {
        return Err(invalid(format!(
            "Malformed input request: #/inferenceConfig: extraneous key [{extra}] is not permitted, please reformat your input and try again."
        )));
    }
    for name in ["temperature", "topP"] {
        if let Some(v) = inference.get(name) {
            match v.as_f64() {
                Some(x) if (0.0..=1.0).contains(&x) => {}
                Some(x) => {
                    let bound = if x > 1.0 {
                        "less than or equal to 1"
                    } else {
                        "greater than or equal to 0"
                    };
                    return Err(invalid(format!(
                        "1 validation error detected: Value '{x}' at 'inferenceConfig.{name}' failed to satisfy constraint: Member must have value {bound}"
                    )));
                }
                None => {
                    return Err(invalid(format!(
                        "Malformed input request: #/inferenceConfig/{name}: expected type: Number, found: {}",
                        if v.is_string() { "String" } else { "Other" }
                    )))
                }
            }
        }
    }
    if let Some(v) = inference.get("maxTokens") {
        if v.as_u64().is_none_or(|n| n < 1) {
            return Err(invalid(format!(
                "1 validation error detected: Value '{v}' at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value greater than or equal to 1"
            )));
        }
    }
    if inference.contains_key("temperature")
        && inference.contains_key("topP")
        && claude_refuses_both(model)
    {
        return Err(invalid(
            "The model returned the following errors: `temperature` and `top_p` cannot both be specified for this model. Please use only one.",
        ));
    }
    Ok(())
}

/// Claude models with extended thinking: 3.7 Sonnet and the 4 family
/// (docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-extended-thinking.html).
pub(crate) fn claude_thinks(model: &str) -> bool {
    model.contains("claude")
        && [
            "claude-3-7",
            "claude-4",
            "claude-sonnet-4",
            "claude-opus-4",
            "claude-haiku-4",
        ]
        .iter()
        .any(|m| model.contains(m))
}

/// A `cachePoint` block: `type` `default`, `ttl` `5m` or `1h`
/// (API_runtime_CachePointBlock).
pub(super) fn check_cache_point(v: &Value, at: &str) -> Result<(), Failure> {
    let ok = v.as_object().is_some_and(|o| {
        o.keys().all(|k| k == "type" || k == "ttl")
            && o.get("type").and_then(Value::as_str) == Some("default")
            && o.get("ttl")
                .is_none_or(|t| t.as_str().is_some_and(|t| t == "5m" || t == "1h"))
    });
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "Malformed input request: {at}.cachePoint must be {{\"type\": \"default\"}} with an optional ttl of 5m or 1h"
        )))
    }
}

/// Claude's extended thinking (`additionalModelRequestFields.thinking`), with
/// the rules Claude applies to it (docs.claude.com/en/docs/build-with-claude/extended-thinking):
/// a model that thinks, a budget of at least 1024 below `maxTokens`, no
/// temperature, `top_p` unset or at least 0.95, no `top_k`, no forced tool.
/// True when thinking is enabled.
pub(super) fn check_thinking(
    body: &Value,
    model: &str,
    choice: &ToolChoice,
) -> Result<bool, Failure> {
    let Some(thinking) = body.pointer("/additionalModelRequestFields/thinking") else {
        return Ok(false);
    };
    if !claude_thinks(model) {
        return Err(invalid(format!(
            "{MODEL_ERRORS}thinking: Extra inputs are not permitted"
        )));
    }
    let kind = thinking.get("type").and_then(Value::as_str);
    match kind {
        Some("disabled") => return Ok(false),
        Some("enabled" | "adaptive") => {}
        _ => {
            return Err(invalid(format!(
                "{MODEL_ERRORS}thinking.type: Input tag does not match the expected tags: 'adaptive', 'enabled', 'disabled'"
            )))
        }
    }
    crate::claude_modes::check_mode(kind.unwrap_or(""), model)
        .map_err(|e| invalid(format!("{MODEL_ERRORS}{e}")))?;
    let effort = body.pointer("/additionalModelRequestFields/output_config/effort");
    if effort.is_some_and(|e| {
        !e.as_str()
            .is_some_and(|e| crate::claude_modes::EFFORTS.contains(&e))
    }) {
        return Err(invalid(format!(
            "{MODEL_ERRORS}output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"
        )));
    }
    let inference = body.get("inferenceConfig");
    if kind == Some("enabled") {
        let budget = thinking.get("budget_tokens").and_then(Value::as_u64);
        let budget = match budget {
            Some(b) if b >= 1024 => b,
            _ => {
                return Err(invalid(format!(
                    "{MODEL_ERRORS}thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
                )))
            }
        };
        // Without maxTokens, Bedrock's default for Claude (4096).
        let max_tokens = inference
            .and_then(|i| i.get("maxTokens"))
            .and_then(Value::as_u64)
            .unwrap_or(4096);
        if budget >= max_tokens {
            return Err(invalid(format!(
                "{MODEL_ERRORS}`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"
            )));
        }
    }
    if inference
        .and_then(|i| i.get("temperature"))
        .is_some_and(|t| t.as_f64() != Some(1.0))
    {
        return Err(invalid(format!(
            "{MODEL_ERRORS}`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility"
        )));
    }
    if inference
        .and_then(|i| i.get("topP"))
        .and_then(Value::as_f64)
        .is_some_and(|p| p < 0.95)
    {
        return Err(invalid(format!(
            "{MODEL_ERRORS}`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility"
        )));
    }
    if body
        .pointer("/additionalModelRequestFields/top_k")
        .is_some()
    {
        return Err(invalid(format!(
            "{MODEL_ERRORS}`top_k` must be unset when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility"
        )));
    }
    if matches!(choice, ToolChoice::Any | ToolChoice::Named(_)) {
        return Err(invalid(format!(
            "{MODEL_ERRORS}Thinking may not be enabled when tool_choice forces tool use."
        )));
    }
    Ok(true)
}

/// With thinking on, a conversation that continues a tool call must give
/// that assistant turn back with its signed reasoning first ("a final
/// `assistant` message must start with a thinking block").
pub(super) fn check_thinking_history(messages: &[Value]) -> Result<(), Failure> {
    let last_assistant = messages
        .iter()
        .enumerate()
        .rev()
        .find(|(_, m)| m.get("role").and_then(Value::as_str) == Some("assistant"));
    let Some((i, m)) = last_assistant else {
        return Ok(());
    };
    let blocks = m.get("content").and_then(Value::as_array);
    let uses_tools = blocks.is_some_and(|b| b.iter().any(|x| x.get("toolUse").is_some()));
    let first = blocks
        .and_then(|b| b.first())
        .and_then(Value::as_object)
        .and_then(|o| o.keys().next())
        .map_or("", String::as_str);
    if uses_tools && i + 1 < messages.len() && first != "reasoningContent" {
        let found = match first {
            "toolUse" => "tool_use",
            _ => "text",
        };
        return Err(invalid(format!(
            "{MODEL_ERRORS}messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
        )));
    }
    Ok(())
}

/// A history `reasoningContent` block: signed text whose signature is the
/// one issued for it, or redacted content.
pub(super) fn check_reasoning_block(v: &Value, at: &str) -> Result<(), Failure> {
    if let Some(text) = v.get("reasoningText") {
        let said = text.get("text").and_then(Value::as_str).unwrap_or("");
        let signed = text
            .get("signature")
            .and_then(Value::as_str)
            .is_some_and(|s| s == claude_signature(said));
        if !signed {
            return Err(invalid(format!(
                "{MODEL_ERRORS}{at}: Invalid `signature` in `thinking` block"
            )));
        }
        return Ok(());
    }
    if v.get("redactedContent").is_some_and(Value::is_string) {
        return Ok(());
    }
    Err(invalid(format!(
        "Malformed input request: {at}.reasoningContent must set one of reasoningText, redactedContent"
    )))
}

/// The one member of a content block, e.g. `{"text": ...}` → ("text", value).
pub(super) fn block_member(block: &Value, at: &str) -> Result<(String, Value), Failure> {
    let obj = block
        .as_object()
        .ok_or_else(|| invalid(format!("Malformed input request: {at} must be an object")))?;
    let mut members = obj.iter();
    match (members.next(), members.next()) {
        (Some((k, v)), None) if BLOCK_TYPES.contains(&k.as_str()) => Ok((k.clone(), v.clone())),
        _ => Err(invalid(format!(
            "Malformed input request: {at} must set exactly one of {}",
            BLOCK_TYPES.join(", ")
        ))),
    }
}

pub(super) fn parse_tools(config: Option<&Value>) -> Result<(Vec<Tool>, ToolChoice), Failure> {
    let Some(config) = config else {
        return Ok((Vec::new(), ToolChoice::Auto));
    };
    let tools = config
        .get("tools")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| invalid("Malformed input request: toolConfig.tools must not be empty"))?;
    let tools = tools
        .iter()
        .enumerate()
        .filter(|(_, t)| t.get("cachePoint").is_none())
        .map(|(i, t)| {
            let spec = t.get("toolSpec").ok_or_else(|| {
                invalid(format!("Malformed input request: toolConfig.tools.{i}.toolSpec is required"))
            })?;
            let name = spec.get("name").and_then(Value::as_str).ok_or_else(|| {
                invalid(format!("Malformed input request: toolConfig.tools.{i}.toolSpec.name is required"))
            })?;
            let schema = spec
                .get("inputSchema")
                .and_then(|s| s.get("json"))
                .ok_or_else(|| {
                    invalid(format!(
                        "Malformed input request: toolConfig.tools.{i}.toolSpec.inputSchema.json is required"
                    ))
                })?;
            Ok(Tool {
                name: name.to_owned(),
                schema: schema.clone(),
            })
        })
        .collect::<Result<Vec<_>, Failure>>()?;
    let choice = match config.get("toolChoice") {
        None => ToolChoice::Auto,
        Some(c) if c.get("auto").is_some() => ToolChoice::Auto,
        Some(c) if c.get("any").is_some() => ToolChoice::Any,
        Some(c) => match c
            .get("tool")
            .and_then(|t| t.get("name"))
            .and_then(Value::as_str)
        {
            Some(name) => ToolChoice::Named(name.to_owned()),
            None => {
                return Err(invalid(
                    "Malformed input request: toolChoice must set one of auto, any, tool",
                ))
            }
        },
    };
    Ok((tools, choice))
}

/// `additionalModelResponseFieldPaths`: JSON Pointers (RFC 6901) into the
/// model's own answer. Bedrock refuses an empty or malformed pointer (400)
/// and ignores a valid one the answer does not have ("Converse": request
/// syntax); Claude's answer has `stop_sequence`. True when it is asked of
/// a Claude model.
pub(super) fn check_response_paths(body: &Value, model: &str) -> Result<bool, Failure> {
    let Some(paths) = body.get("additionalModelResponseFieldPaths") else {
        return Ok(false);
    };
    let paths = paths.as_array().ok_or_else(|| {
        invalid(
            "Malformed input request: additionalModelResponseFieldPaths must be a list of strings",
        )
    })?;
    let mut stop_sequence = false;
    for path in paths {
        let pointer = path.as_str().unwrap_or_default();
        let escapes_ok = pointer
            .split('~')
            .skip(1)
            .all(|rest| rest.starts_with(['0', '1']));
        if !pointer.starts_with('/') || !escapes_ok {
            return Err(invalid(format!(
                "The provided additionalModelResponseFieldPaths entry {path} is not a valid JSON Pointer"
            )));
        }
        stop_sequence |= pointer == "/stop_sequence";
    }
    Ok(stop_sequence && model.contains("anthropic.claude"))
}

/// A ToolResultContentBlock (API_runtime_ToolResultContentBlock.html): one
/// of text, image, json, document, video; an image in a format Converse
/// reads.
pub(super) fn check_result_block(block: &Value, at: &str) -> Result<(), Failure> {
    const KINDS: [&str; 5] = ["text", "image", "json", "document", "video"];
    let keys: Vec<&String> = block
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    let [kind] = keys.as_slice() else {
        return Err(invalid(format!(
            "Malformed input request: {at} must have exactly one of text, image, json, document, video"
        )));
    };
    if !KINDS.contains(&kind.as_str()) {
        return Err(invalid(format!(
            "Malformed input request: {at}: extraneous key [{kind}] is not permitted"
        )));
    }
    let format = block.pointer("/image/format").and_then(Value::as_str);
    if kind.as_str() == "image" && !format.is_some_and(|f| super::IMAGE_FORMATS.contains(&f)) {
        return Err(invalid(format!(
            "Malformed input request: {at}.image.format must be one of png, jpeg, gif, webp"
        )));
    }
    Ok(())
}
