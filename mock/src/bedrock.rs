//! AWS Bedrock Converse (`POST /model/{modelId}/converse` and
//! `/converse-stream`): SigV4 check (when the mock has credentials),
//! validation with Bedrock's ValidationException messages, Converse
//! responses, the binary event stream (`application/vnd.amazon.eventstream`,
//! CRC32s included), exceptions mid-stream, and `x-amzn-errortype` errors.
//!
//! Long on purpose (about 980 lines of code, then its tests): one vendor's
//! checks, with the real API's error messages, and its answers and streams,
//! in one file as for every vendor the mock speaks.

use serde_json::{json, Map, Value};

use crate::answer::{claude_signature, fragments, reasoning_text, Answer, Finish};
use crate::dialect::{
    count_words, to_json, Dialect, Failure, Filtered, Meta, Prompt, Reply, SseEvent, Tool,
    ToolChoice,
};
use crate::http::Request;
use crate::scenario::Filter;
use crate::sigv4::{self, Verifier};

pub struct Bedrock {
    /// When set, every request must be SigV4-signed with these credentials,
    /// for one of these regions, under every rule AWS applies.
    pub credentials: Option<Verifier>,
}

const TOP_LEVEL: [&str; 10] = [
    "messages",
    "system",
    "inferenceConfig",
    "toolConfig",
    "guardrailConfig",
    "additionalModelRequestFields",
    "additionalModelResponseFieldPaths",
    "promptVariables",
    "requestMetadata",
    "performanceConfig",
];
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
/// Anthropic's limit on cache breakpoints, on Bedrock too
/// (docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html).
const MAX_CACHE_POINTS: usize = 4;
/// Bedrock answers Claude's own validation errors with this prefix.
const MODEL_ERRORS: &str = "The model returned the following errors: ";
const IMAGE_FORMATS: [&str; 4] = ["png", "jpeg", "gif", "webp"];
const ERROR_NAMESPACE: &str = ":http://internal.amazon.com/coral/com.amazon.bedrock/";
const BLOCKED_MESSAGE: &str = "Sorry, the model cannot answer this question.";

fn invalid(msg: impl Into<String>) -> Failure {
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

fn check_inference(inference: &Map<String, Value>, model: &str) -> Result<(), Failure> {
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
fn check_cache_point(v: &Value, at: &str) -> Result<(), Failure> {
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
fn check_thinking(body: &Value, model: &str, choice: &ToolChoice) -> Result<bool, Failure> {
    let Some(thinking) = body.pointer("/additionalModelRequestFields/thinking") else {
        return Ok(false);
    };
    if !claude_thinks(model) {
        return Err(invalid(format!(
            "{MODEL_ERRORS}thinking: Extra inputs are not permitted"
        )));
    }
    match thinking.get("type").and_then(Value::as_str) {
        Some("disabled") => return Ok(false),
        Some("enabled") => {}
        _ => {
            return Err(invalid(format!(
                "{MODEL_ERRORS}thinking.type: Input tag does not match the expected tags: 'enabled', 'disabled'"
            )))
        }
    }
    let budget = thinking.get("budget_tokens").and_then(Value::as_u64);
    let budget = match budget {
        Some(b) if b >= 1024 => b,
        _ => {
            return Err(invalid(format!(
                "{MODEL_ERRORS}thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            )))
        }
    };
    let inference = body.get("inferenceConfig");
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
fn check_thinking_history(messages: &[Value]) -> Result<(), Failure> {
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
fn check_reasoning_block(v: &Value, at: &str) -> Result<(), Failure> {
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
fn block_member(block: &Value, at: &str) -> Result<(String, Value), Failure> {
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

fn parse_tools(config: Option<&Value>) -> Result<(Vec<Tool>, ToolChoice), Failure> {
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
fn check_response_paths(body: &Value, model: &str) -> Result<bool, Failure> {
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

/// `additionalModelResponseFields` of an answer: the stop sequence that
/// matched, when asked for.
fn response_fields(p: &Prompt, a: &Answer) -> Option<Value> {
    match &a.finish {
        Finish::StopSequence(s) if p.bedrock_stop_sequence_field => {
            Some(json!({"stop_sequence": s}))
        }
        _ => None,
    }
}

fn stop_reason(f: &Finish) -> &'static str {
    match f {
        Finish::Stop | Finish::PauseTurn => "end_turn",
        Finish::Length => "max_tokens",
        Finish::StopSequence(_) => "stop_sequence",
        Finish::ToolCalls => "tool_use",
        Finish::ContentFilter => "guardrail_intervened",
    }
}

fn usage(p: &Prompt, a: &Answer) -> Value {
    // inputTokens excludes what was read from the cache; the total has all.
    // Claude's thinking counts as output.
    let cached = a.cached_tokens.max(p.cached_words).min(a.prompt_tokens);
    let output = a.completion_tokens + if p.reasoning { a.reasoning_tokens } else { 0 };
    let mut u = json!({"inputTokens": a.prompt_tokens - cached,
                       "outputTokens": output,
                       "totalTokens": a.prompt_tokens + output});
    if cached > 0 {
        u["cacheReadInputTokens"] = json!(cached);
        u["cacheWriteInputTokens"] = json!(0);
    }
    u
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
        "contentBlockDelta",
        json!({"contentBlockIndex": index, "delta": delta, "p": "abcdefgh"}),
    );
    e.delta = true;
    e
}

/// One event stream message with string headers: prelude, headers, payload, CRCs.
pub fn encode_message(headers: &[(&str, &str)], payload: &[u8], out: &mut Vec<u8>) {
    let mut block = Vec::new();
    for (name, value) in headers {
        block.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
        block.extend_from_slice(name.as_bytes());
        block.push(7); // string
        block.extend_from_slice(&u16::try_from(value.len()).unwrap_or(u16::MAX).to_be_bytes());
        block.extend_from_slice(value.as_bytes());
    }
    let total = 12 + block.len() + payload.len() + 4;
    let start = out.len();
    out.extend_from_slice(&u32::try_from(total).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&u32::try_from(block.len()).unwrap_or(u32::MAX).to_be_bytes());
    let prelude_crc = crc32(out.get(start..).unwrap_or_default());
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&block);
    out.extend_from_slice(payload);
    let crc = crc32(out.get(start..).unwrap_or_default());
    out.extend_from_slice(&crc.to_be_bytes());
}

/// CRC-32 (IEEE) of `bytes`, as the event-stream frames carry it.
pub fn crc32(bytes: &[u8]) -> u32 {
    crate::gzip::crc32_update(0, bytes)
}

impl Dialect for Bedrock {
    fn name(&self) -> &'static str {
        "bedrock"
    }

    fn handles(&self, path: &str) -> bool {
        path.starts_with("/model/")
            && (path.ends_with("/converse") || path.ends_with("/converse-stream"))
    }

    fn is_stream(&self, req: &Request, _body: &Value) -> bool {
        req.path().ends_with("/converse-stream")
    }

    fn stream_content_type(&self) -> &'static str {
        "application/vnd.amazon.eventstream"
    }

    /// Events ending in "Exception" are sent as `:message-type: exception`.
    fn encode_event(&self, _index: usize, e: &SseEvent, _crlf: bool, out: &mut Vec<u8>) {
        let name = e.name.unwrap_or_default();
        let headers: [(&str, &str); 3] = if name.ends_with("Exception") {
            [
                (":exception-type", name),
                (":content-type", "application/json"),
                (":message-type", "exception"),
            ]
        } else {
            [
                (":event-type", name),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ]
        };
        encode_message(&headers, e.data.as_bytes(), out);
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        match &self.credentials {
            Some(v) => v
                .check(req, unix_now())
                .map_err(|r| Failure::Auth(r.message())),
            None if req
                .header("authorization")
                .is_some_and(|a| !a.trim().is_empty()) =>
            {
                Ok(())
            }
            None => Err(Failure::Auth(sigv4::Refusal::Missing.message())),
        }
    }

    fn parse_request(&self, req: &Request, body: &Value) -> Result<Prompt, Failure> {
        let model = path_model(req.path());
        let empty = Map::new();
        let inference = body
            .get("inferenceConfig")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        check_inference(inference, &model)?;
        let mut p = self.parse(body)?;
        p.reasoning = check_thinking(body, &model, &p.tool_choice)?;
        p.bedrock_stop_sequence_field = check_response_paths(body, &model)?;
        if p.reasoning {
            let messages = body.get("messages").and_then(Value::as_array);
            check_thinking_history(messages.map_or(&[][..], Vec::as_slice))?;
        }
        p.model = model;
        Ok(p)
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        let obj = body
            .as_object()
            .ok_or_else(|| invalid("Malformed input request: expected a JSON object"))?;
        if let Some(extra) = obj.keys().find(|k| !TOP_LEVEL.contains(&k.as_str())) {
            return Err(invalid(format!(
                "Malformed input request: extraneous key [{extra}] is not permitted, please reformat your input and try again."
            )));
        }
        let messages = obj
            .get("messages")
            .and_then(Value::as_array)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| invalid("The model returned the following errors: messages: at least one message is required"))?;
        let mut p = Prompt::default();
        let mut cache_points = 0;
        let empty = Map::new();
        let inference = obj
            .get("inferenceConfig")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        p.max_tokens = inference.get("maxTokens").and_then(Value::as_u64);
        p.stop = inference
            .get("stopSequences")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(system) = obj.get("system") {
            let blocks = system
                .as_array()
                .ok_or_else(|| invalid("Malformed input request: system must be a list"))?;
            let mut text = Vec::new();
            for (j, b) in blocks.iter().enumerate() {
                if let Some(point) = b.get("cachePoint") {
                    check_cache_point(point, &format!("system.{j}"))?;
                    cache_points += 1;
                    p.cached_words = p.prompt_words;
                }
                let t = b.get("text").and_then(Value::as_str).unwrap_or("");
                p.prompt_words += count_words(t);
                text.push(t);
            }
            p.json = crate::anthropic::json_instruction(&text.join(" "));
        }
        cache_points += obj
            .get("toolConfig")
            .and_then(|c| c.get("tools"))
            .and_then(Value::as_array)
            .map_or(0, |t| {
                t.iter().filter(|t| t.get("cachePoint").is_some()).count()
            });
        for (j, t) in obj
            .get("toolConfig")
            .and_then(|c| c.get("tools"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(point) = t.get("cachePoint") {
                check_cache_point(point, &format!("toolConfig.tools.{j}"))?;
            }
        }
        let (tools, choice) = parse_tools(obj.get("toolConfig"))?;
        p.tools = tools;
        p.tool_choice = choice;
        let mut pending: Vec<String> = Vec::new();
        let mut uses_tools = false;
        for (i, m) in messages.iter().enumerate() {
            let role = m.get("role").and_then(Value::as_str).unwrap_or("");
            let expected = if i % 2 == 0 { "user" } else { "assistant" };
            if role != "user" && role != "assistant" {
                return Err(invalid(format!(
                    "Malformed input request: messages.{i}.role must be one of [user, assistant]"
                )));
            }
            if role != expected {
                return Err(invalid(
                    "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.",
                ));
            }
            let blocks = m
                .get("content")
                .and_then(Value::as_array)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| {
                    invalid(format!(
                        "Malformed input request: messages.{i}.content must be a non-empty list"
                    ))
                })?;
            let mut texts = Vec::new();
            let mut results = Vec::new();
            let mut answered = Vec::new();
            let mut uses = Vec::new();
            for (j, b) in blocks.iter().enumerate() {
                let at = format!("messages.{i}.content.{j}");
                let (kind, v) = block_member(b, &at)?;
                match kind.as_str() {
                    "text" => {
                        let t = v.as_str().unwrap_or("");
                        if t.trim().is_empty() {
                            return Err(invalid(format!("The text field in the ContentBlock object at {at} is blank. Add text to the text field, and try again.")));
                        }
                        texts.push(t.to_owned());
                    }
                    "image" => {
                        let format = v.get("format").and_then(Value::as_str).unwrap_or("");
                        if !IMAGE_FORMATS.contains(&format) {
                            return Err(invalid(format!("Malformed input request: {at}.image.format must be one of png, jpeg, gif, webp")));
                        }
                        if !v
                            .get("source")
                            .and_then(|s| s.get("bytes"))
                            .is_some_and(Value::is_string)
                        {
                            return Err(invalid(format!(
                                "Malformed input request: {at}.image.source.bytes is required"
                            )));
                        }
                    }
                    "toolUse" if role == "assistant" => {
                        uses_tools = true;
                        let id = v.get("toolUseId").and_then(Value::as_str).unwrap_or("");
                        if id.is_empty()
                            || v.get("name").and_then(Value::as_str).is_none()
                            || !v.get("input").is_some_and(Value::is_object)
                        {
                            return Err(invalid(format!("Malformed input request: {at}.toolUse needs toolUseId, name and an input object")));
                        }
                        uses.push(id.to_owned());
                    }
                    "toolResult" if role == "user" => {
                        uses_tools = true;
                        // ToolResultBlock.status: success | error.
                        if let Some(status) = v.get("status") {
                            if !matches!(status.as_str(), Some("success" | "error")) {
                                return Err(invalid(format!("Malformed input request: {at}.toolResult.status must be success or error")));
                            }
                        }
                        let id = v.get("toolUseId").and_then(Value::as_str).unwrap_or("");
                        answered.push(id.to_owned());
                        let text: Vec<&str> = v
                            .get("content")
                            .and_then(Value::as_array)
                            .map(|c| {
                                c.iter()
                                    .filter_map(|x| x.get("text").and_then(Value::as_str))
                                    .collect()
                            })
                            .unwrap_or_default();
                        results.push(text.join(" "));
                    }
                    "reasoningContent" if role == "assistant" => check_reasoning_block(&v, &at)?,
                    "cachePoint" => {
                        check_cache_point(&v, &at)?;
                        cache_points += 1;
                        p.cached_words = p.prompt_words
                            + count_words(&texts.join(" "))
                            + results.iter().map(|r: &String| count_words(r)).sum::<u64>();
                    }
                    "toolUse" | "toolResult" | "reasoningContent" => {
                        return Err(invalid(format!("Malformed input request: {at}.{kind} is not allowed in a {role} message")));
                    }
                    _ => {}
                }
            }
            if pending.iter().any(|id| !answered.contains(id))
                || answered.iter().any(|id| !pending.contains(id))
            {
                return Err(invalid(
                    "The number of toolResult blocks at messages.".to_owned() + &i.to_string()
                        + ".content exceeds or does not match the number of toolUse blocks of previous turn.",
                ));
            }
            pending = uses;
            p.prior_tool_calls += pending.len() as u64;
            let text = texts.join(" ");
            p.prompt_words +=
                count_words(&text) + results.iter().map(|r| count_words(r)).sum::<u64>();
            if role == "user" && !text.is_empty() {
                p.last_user_text = text;
            }
            p.tool_results = (role == "user" && !results.is_empty()).then_some(results);
        }
        if !pending.is_empty() {
            return Err(invalid("Expected toolResult blocks at the last user message for the toolUse blocks of the previous turn."));
        }
        if cache_points > MAX_CACHE_POINTS {
            return Err(invalid(format!(
                "{MODEL_ERRORS}A maximum of {MAX_CACHE_POINTS} blocks with cache_control may be provided. Found {cache_points}."
            )));
        }
        if uses_tools && obj.get("toolConfig").is_none() {
            return Err(invalid(
                "The toolConfig field must be defined when using toolUse and toolResult content blocks.",
            ));
        }
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        let (status, message) = match failure {
            Failure::Auth(m) => (403, m.clone()),
            Failure::Invalid(m) | Failure::Param { message: m, .. } => (400, m.clone()),
            Failure::ContextLength => (400, "Input is too long for requested model.".into()),
            Failure::Status(s) => {
                let message = match s {
                    400 => "Malformed input request, please reformat your input and try again.",
                    401 => "The security token included in the request is invalid.",
                    403 => "You don't have access to the model with the specified model ID.",
                    404 => "The provided model identifier is invalid.",
                    429 => "Too many requests, please wait before trying again.",
                    500 => "The system encountered an unexpected error during processing. Try your request again.",
                    _ => "Bedrock is unable to process your request.",
                };
                (bedrock_status(*s), message.to_owned())
            }
        };
        // The AWS front door answers authentication failures in the Coral
        // JSON shape, `__type` and `message`; Bedrock's own errors carry
        // only `message` (the type is in x-amzn-errortype).
        let body = match failure {
            Failure::Auth(_) => json!({
                "__type": format!("com.amazon.coral.service#{}", auth_kind(failure)),
                "message": message,
            }),
            _ => json!({ "message": message }),
        };
        Reply {
            status,
            body: to_json(&body),
            retry_after: None,
        }
    }

    fn error_header(&self, failure: &Failure) -> Option<(&'static str, String)> {
        let kind = match failure {
            Failure::Auth(_) => auth_kind(failure),
            Failure::Invalid(_) | Failure::Param { .. } | Failure::ContextLength => {
                "ValidationException"
            }
            Failure::Status(s) => match s {
                400 | 413 => "ValidationException",
                401 => "UnrecognizedClientException",
                403 => "AccessDeniedException",
                404 => "ResourceNotFoundException",
                429 => "ThrottlingException",
                500 => "InternalServerException",
                _ => "ServiceUnavailableException",
            },
        };
        Some(("x-amzn-errortype", format!("{kind}{ERROR_NAMESPACE}")))
    }

    /// A guardrail that blocks the prompt answers 200 with its canned
    /// message, stop reason `guardrail_intervened`, and (trace enabled) the
    /// input assessment.
    fn filtered(&self, filter: Filter, p: &Prompt, _meta: Meta) -> Option<Filtered> {
        if filter != Filter::BlockedPrompt || p.stream {
            return None;
        }
        let body = json!({
            "output": {"message": {"role": "assistant", "content": [{"text": BLOCKED_MESSAGE}]}},
            "stopReason": "guardrail_intervened",
            "usage": {"inputTokens": p.prompt_words.max(1), "outputTokens": 0, "totalTokens": p.prompt_words.max(1)},
            "metrics": {"latencyMs": 12},
            "trace": {"guardrail": {"inputAssessment": {"mockguardrail": {"contentPolicy": {"filters": [
                {"type": "VIOLENCE", "confidence": "HIGH", "filterStrength": "HIGH", "action": "BLOCKED"}]}}}}},
        });
        Some(Filtered::Reply(Reply {
            status: 200,
            body: to_json(&body),
            retry_after: None,
        }))
    }

    fn response(&self, p: &Prompt, a: &Answer, _meta: Meta) -> Value {
        let mut content = Vec::new();
        if p.reasoning {
            let thought = reasoning_text(p);
            content.push(json!({"reasoningContent": {"reasoningText": {
                "text": thought, "signature": claude_signature(&thought)}}}));
        }
        if !a.text.is_empty() || a.tool_calls.is_empty() {
            content.push(json!({"text": a.text}));
        }
        for c in &a.tool_calls {
            content.push(json!({"toolUse": {"toolUseId": format!("tooluse_{}", c.n),
                                             "name": c.name, "input": c.arguments}}));
        }
        let mut answer = json!({
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop_reason(&a.finish),
            "usage": usage(p, a),
            "metrics": {"latencyMs": 12},
        });
        if let Some(fields) = response_fields(p, a) {
            answer["additionalModelResponseFields"] = fields;
        }
        answer
    }

    fn stream(&self, p: &Prompt, a: &Answer, _meta: Meta) -> Vec<SseEvent> {
        let mut events = vec![event(
            "messageStart",
            json!({"role": "assistant", "p": "abcd"}),
        )];
        let mut index = 0;
        if p.reasoning {
            // The thinking block: its text in pieces, then its signature.
            let thought = reasoning_text(p);
            for piece in crate::answer::word_chunks(&thought) {
                events.push(delta_event(
                    index,
                    json!({"reasoningContent": {"text": piece}}),
                ));
            }
            events.push(delta_event(
                index,
                json!({"reasoningContent": {"signature": claude_signature(&thought)}}),
            ));
            events.push(event(
                "contentBlockStop",
                json!({"contentBlockIndex": index}),
            ));
            index += 1;
        }
        if !a.text.is_empty() || a.tool_calls.is_empty() {
            for c in &a.chunks {
                events.push(delta_event(index, json!({"text": c})));
            }
            events.push(event(
                "contentBlockStop",
                json!({"contentBlockIndex": index}),
            ));
            index += 1;
        }
        for c in &a.tool_calls {
            events.push(event(
                "contentBlockStart",
                json!({"contentBlockIndex": index, "start": {"toolUse": {
                    "toolUseId": format!("tooluse_{}", c.n), "name": c.name}}}),
            ));
            for frag in fragments(&c.arguments_json) {
                events.push(delta_event(index, json!({"toolUse": {"input": frag}})));
            }
            events.push(event(
                "contentBlockStop",
                json!({"contentBlockIndex": index}),
            ));
            index += 1;
        }
        let mut stop = json!({"stopReason": stop_reason(&a.finish)});
        if let Some(fields) = response_fields(p, a) {
            stop["additionalModelResponseFields"] = fields;
        }
        events.push(event("messageStop", stop));
        events.push(event(
            "metadata",
            json!({"usage": usage(p, a), "metrics": {"latencyMs": 12}}),
        ));
        events
    }

    fn stream_error(&self) -> SseEvent {
        event(
            "serviceUnavailableException",
            json!({"message": "Bedrock is unable to process your request."}),
        )
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The exception an authentication failure is.
fn auth_kind(failure: &Failure) -> &'static str {
    match failure {
        Failure::Auth(m) if m.contains("Signature expired") => "InvalidSignatureException",
        Failure::Auth(m)
            if m.contains("signature") || m.contains("Credential should be scoped") =>
        {
            "InvalidSignatureException"
        }
        Failure::Auth(m) if m.contains("SignedHeader") => "IncompleteSignatureException",
        Failure::Auth(m) if m.contains("Missing") => "MissingAuthenticationTokenException",
        _ => "UnrecognizedClientException",
    }
}

/// Bedrock has no 401 (bad keys are 403) and no 529.
fn bedrock_status(s: u16) -> u16 {
    match s {
        401 => 403,
        529 => 503,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SONNET_4: &str = "anthropic.claude-sonnet-4-20250514-v1:0";

    fn thinking(budget: u64, extra: Value) -> Value {
        let mut body = json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}],
            "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": budget}},
            "inferenceConfig": {"maxTokens": 4000}});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                body.insert(k.clone(), v.clone());
            }
        }
        body
    }

    fn refusal(body: &Value, model: &str, choice: &ToolChoice) -> String {
        match check_thinking(body, model, choice) {
            Err(Failure::Invalid(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn response_field_paths_are_json_pointers() {
        let paths = |v: Value, model: &str| {
            check_response_paths(&json!({ "additionalModelResponseFieldPaths": v }), model)
        };
        assert_eq!(paths(json!(["/stop_sequence"]), SONNET_4), Ok(true));
        assert_eq!(
            paths(json!(["/stop_sequence"]), "amazon.nova-pro-v1:0"),
            Ok(false)
        );
        assert_eq!(paths(json!(["/other", "/a~1b"]), SONNET_4), Ok(false));
        assert_eq!(check_response_paths(&json!({}), SONNET_4), Ok(false));
        for bad in [
            json!([""]),
            json!(["stop_sequence"]),
            json!(["/a~2"]),
            json!([1]),
            json!("/x"),
        ] {
            assert!(matches!(paths(bad, SONNET_4), Err(Failure::Invalid(_))));
        }
    }

    #[test]
    fn claude_thinking_rules() {
        assert_eq!(
            check_thinking(&thinking(1024, json!({})), SONNET_4, &ToolChoice::Auto),
            Ok(true)
        );
        assert_eq!(
            check_thinking(&json!({"messages": []}), SONNET_4, &ToolChoice::Auto),
            Ok(false)
        );
        for (body, model, choice, says) in [
            (
                thinking(1024, json!({})),
                "anthropic.claude-3-haiku-20240307-v1:0",
                ToolChoice::Auto,
                "Extra inputs",
            ),
            (
                thinking(1023, json!({})),
                SONNET_4,
                ToolChoice::Auto,
                "greater than or equal to 1024",
            ),
            (
                thinking(4000, json!({})),
                SONNET_4,
                ToolChoice::Auto,
                "`max_tokens` must be greater",
            ),
            (
                thinking(5000, json!({"inferenceConfig": {}})),
                SONNET_4,
                ToolChoice::Auto,
                "`max_tokens` must be greater",
            ),
            (
                thinking(
                    1024,
                    json!({"inferenceConfig": {"maxTokens": 4000, "temperature": 0.5}}),
                ),
                SONNET_4,
                ToolChoice::Auto,
                "`temperature`",
            ),
            (
                thinking(
                    1024,
                    json!({"inferenceConfig": {"maxTokens": 4000, "topP": 0.9}}),
                ),
                SONNET_4,
                ToolChoice::Auto,
                "`top_p`",
            ),
            (
                thinking(1024, json!({})),
                SONNET_4,
                ToolChoice::Any,
                "forces tool use",
            ),
        ] {
            let message = refusal(&body, model, &choice);
            assert!(message.contains(says), "{message}");
        }
    }

    #[test]
    fn signed_reasoning_is_required_back_and_verified() {
        let signed = json!({"reasoningText": {"text": "t", "signature": claude_signature("t")}});
        assert_eq!(check_reasoning_block(&signed, "m.1.content.0"), Ok(()));
        let forged = json!({"reasoningText": {"text": "t2", "signature": claude_signature("t")}});
        assert!(check_reasoning_block(&forged, "m").is_err());
        // Claude's one scheme: Anthropic's own block verifies here; Gemini's
        // signature over the same text does not.
        let foreign = json!({"reasoningText": {"text": "t",
            "signature": crate::answer::gemini_signature("t")}});
        assert!(check_reasoning_block(&foreign, "m").is_err());
        assert_eq!(
            check_reasoning_block(&json!({"redactedContent": "QQ=="}), "m"),
            Ok(())
        );
        let turn = |first: Value| {
            [
                json!({"role": "user", "content": [{"text": "q"}]}),
                json!({"role": "assistant", "content": [first, {"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}]}),
                json!({"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": []}}]}),
            ]
        };
        assert_eq!(
            check_thinking_history(&turn(json!({"reasoningContent": signed}))),
            Ok(())
        );
        assert!(check_thinking_history(&turn(json!({"text": "calling"}))).is_err());
    }

    #[test]
    fn cache_points() {
        assert_eq!(check_cache_point(&json!({"type": "default"}), "s"), Ok(()));
        assert_eq!(
            check_cache_point(&json!({"type": "default", "ttl": "1h"}), "s"),
            Ok(())
        );
        for bad in [
            json!({"type": "ephemeral"}),
            json!({"type": "default", "ttl": "2h"}),
            json!({}),
        ] {
            assert!(check_cache_point(&bad, "s").is_err(), "{bad}");
        }
        let point = json!({"cachePoint": {"type": "default"}});
        let body = json!({"messages": [{"role": "user", "content": [
            {"text": "a b"}, point, {"text": "c"}, point, point, point, point]}]});
        assert!(matches!(Bedrock { credentials: None }.parse(&body),
            Err(Failure::Invalid(m)) if m.contains("A maximum of 4")));
        let body = json!({"system": [{"text": "s t"}, point],
            "messages": [{"role": "user", "content": [{"text": "a b"}, point, {"text": "c"}]}]});
        let p = Bedrock { credentials: None }.parse(&body).unwrap();
        assert_eq!((p.cached_words, p.prompt_words), (4, 5));
    }
}
