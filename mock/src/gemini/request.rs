//! Gemini request checks: field names (JSON or proto), the generation and
//! thinking configuration, content parts, tools, and the function-call
//! turns with their thought signatures.

use serde_json::{json, Value};

use crate::answer::gemini_signature;
use crate::dialect::{to_json, Failure, Prompt};

use super::Gemini;

/// Google's documented stand-in for a signature on calls Gemini did not
/// make (ai.google.dev/gemini-api/docs/thought-signatures), accepted as
/// Gemini does; any other signature must be the one issued for the call.
pub(super) const UNSIGNED: &str = "skip_thought_signature_validator";

pub(super) const REQUEST_FIELDS: &[&str] = &[
    "contents",
    "systemInstruction",
    "tools",
    "toolConfig",
    "safetySettings",
    "generationConfig",
    "cachedContent",
    "serviceTier",
    "store",
    "continuationToken",
];
pub(super) const CONTENT_FIELDS: &[&str] = &["role", "parts"];
const PART_FIELDS: &[&str] = &[
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
    "thought",
    "thoughtSignature",
    "videoMetadata",
    "mediaResolution",
    "partMetadata",
    // Server-side tool invocations (Gemini 3's tool combination), sent back
    // in the history as they came.
    "toolCall",
    "toolResponse",
];
pub(super) const GENERATION_FIELDS: &[&str] = &[
    "stopSequences",
    "responseMimeType",
    "responseSchema",
    "responseJsonSchema",
    "responseModalities",
    "candidateCount",
    "maxOutputTokens",
    "temperature",
    "topP",
    "topK",
    "seed",
    "presencePenalty",
    "frequencyPenalty",
    "responseLogprobs",
    "logprobs",
    "thinkingConfig",
    "mediaResolution",
];
pub(super) const TOOL_FIELDS: &[&str] = &[
    "functionDeclarations",
    "googleSearch",
    "codeExecution",
    "urlContext",
];
pub(super) const DECLARATION_FIELDS: &[&str] = &[
    "name",
    "description",
    "parameters",
    "parametersJsonSchema",
    "response",
    "responseJsonSchema",
    "behavior",
];
/// `GoogleSearch` (ai.google.dev/api/caching#GoogleSearch): an empty object,
/// or one limiting the results' time.
pub(super) const GOOGLE_SEARCH_FIELDS: &[&str] = &["timeRangeFilter"];
pub(super) const TOOL_CONFIG_FIELDS: &[&str] =
    &["functionCallingConfig", "includeServerSideToolInvocations"];
pub(super) const CALLING_CONFIG_FIELDS: &[&str] = &["mode", "allowedFunctionNames"];

pub(crate) fn invalid(msg: impl Into<String>) -> Failure {
    Failure::Invalid(msg.into())
}

/// A `bytes` field as standard base64 with padding: proto3's JSON mapping
/// takes standard or URL-safe base64, with or without padding
/// (protobuf.dev/programming-guides/json), and the Gen AI SDKs send back
/// the URL-safe form of the signatures they were given.
fn standard_base64(text: &str) -> String {
    if text == UNSIGNED {
        return text.to_owned();
    }
    let mut out: String = text
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while !out.len().is_multiple_of(4) {
        out.push('=');
    }
    out
}

/// Members whose values are the caller's own JSON (function arguments and
/// results, schemas): their keys are data, not field names.
const FREE_FORM: &[&str] = &[
    "args",
    "response",
    "parameters",
    "parametersJsonSchema",
    "responseJsonSchema",
    "responseSchema",
];

/// A request with every field by its JSON name. Proto3's JSON mapping,
/// which Gemini's API parses by, takes each field by its lowerCamelCase
/// JSON name or by its proto name (`include_thoughts`, `function_declarations`):
/// "Parsers accept both" (protobuf.dev/programming-guides/json), and the
/// Gen AI SDKs send some proto names. The rules here read JSON names.
pub(crate) fn json_names(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let name = camel(k);
                    let value = if FREE_FORM.contains(&name.as_str()) {
                        v.clone()
                    } else {
                        json_names(v)
                    };
                    (name, value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(json_names).collect()),
        other => other.clone(),
    }
}

/// A proto field name (`thinking_budget`) as its JSON name (`thinkingBudget`).
fn camel(name: &str) -> String {
    if !name.contains('_') || name.starts_with('_') {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        match c {
            '_' => upper = true,
            c if upper => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

/// Google's answer to a field it does not know.
pub(crate) fn check_fields(v: &Value, known: &[&str], at: &str) -> Result<(), Failure> {
    let Some(obj) = v.as_object() else {
        return Err(invalid(format!(
            "Invalid value at '{at}', expected an object"
        )));
    };
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) if at.is_empty() => Err(invalid(format!(
            "Invalid JSON payload received. Unknown name \"{k}\": Cannot find field."
        ))),
        Some(k) => Err(invalid(format!(
            "Invalid JSON payload received. Unknown name \"{k}\" at '{at}': Cannot find field."
        ))),
    }
}

/// Built-in tools beside function declarations
/// (ai.google.dev/gemini-api/docs/tool-combination): Gemini 3 only, with
/// `toolConfig.includeServerSideToolInvocations` (its 400 without); Gemini
/// 2.x takes one kind or the other.
pub(super) fn check_tool_combination(p: &Prompt) -> Result<(), Failure> {
    if !p.gemini_builtin_tools || p.tools.is_empty() {
        return Ok(());
    }
    if !p.model.contains("gemini-3") {
        return Err(invalid(
            "Tool use with function calling is unsupported by the model.",
        ));
    }
    if !p.gemini_server_invocations {
        return Err(invalid(
            "Please enable tool_config.include_server_side_tool_invocations to use Built-in \
             tools with Function calling.",
        ));
    }
    Ok(())
}

/// The signature the mock puts on a function call: over its name and
/// arguments, so it is valid only on the call it came with.
pub(super) fn call_signature(name: &str, args: &Value) -> String {
    gemini_signature(&format!("{name}{args}"))
}

/// A function response's text as the answer planner echoes it: our
/// gateway's `{"result": ...}` wrapper unwrapped, other objects as JSON.
pub(super) fn response_text(response: Option<&Value>) -> String {
    match response {
        Some(r) => match r.get("result").and_then(Value::as_str) {
            Some(s) => s.to_owned(),
            None => to_json(r),
        },
        None => String::new(),
    }
}

impl Gemini {
    /// Checks the model turns' function calls: the first call of each turn
    /// must carry a thought signature, and the next turn must answer every
    /// call with a function response.
    pub(super) fn check_tool_turns(&self, contents: &[Value]) -> Result<(), Failure> {
        let mut pending_calls = 0;
        for (i, c) in contents.iter().enumerate() {
            let parts = c
                .get("parts")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            let responses = parts
                .iter()
                .filter(|p| p.get("functionResponse").is_some())
                .count();
            if pending_calls > 0 && responses != pending_calls {
                return Err(invalid(
                    "Please ensure that the number of function response parts is equal to the \
                     number of function call parts of the function call turn.",
                ));
            }
            let calls: Vec<&Value> = parts
                .iter()
                .filter(|p| p.get("functionCall").is_some())
                .collect();
            if let Some(first) = calls.first() {
                let name = first
                    .pointer("/functionCall/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let args = first
                    .pointer("/functionCall/args")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                let signature = first
                    .get("thoughtSignature")
                    .and_then(Value::as_str)
                    .map(standard_base64);
                let signature = signature.as_deref();
                // A signature Gemini did not issue for this call.
                if signature.is_some_and(|s| s != UNSIGNED && s != call_signature(name, &args)) {
                    return Err(invalid("Corrupted thought signature."));
                }
                if signature.is_none() {
                    return Err(invalid(format!(
                        "Function call is missing a thought_signature in functionCall parts. This \
                         is required for tools to work correctly, and missing thought_signature may \
                         lead to degraded model performance. Additional data, function call \
                         `default_api:{name}` , position {}.",
                        i + 1
                    )));
                }
            }
            pending_calls = calls.len();
        }
        Ok(())
    }
}

/// GenerationConfig's typed members
/// (ai.google.dev/api/generate-content#generationconfig): a value of the
/// wrong JSON type is refused the way the proto decoder does.
const FLOAT_FIELDS: [&str; 4] = ["temperature", "topP", "presencePenalty", "frequencyPenalty"];
const INT_FIELDS: [&str; 4] = ["topK", "maxOutputTokens", "candidateCount", "seed"];

/// The most candidates Gemini answers: `candidateCount` is 1 to 8
/// (Vertex AI's GenerationConfig reference, which Google's guides quote
/// for the Gemini API too).
const MAX_CANDIDATES: u64 = 8;

/// `candidateCount`, within Gemini's range (its type already checked).
pub(super) fn check_candidate_count(config: &Value) -> Result<u32, Failure> {
    match config.get("candidateCount").and_then(Value::as_i64) {
        None => Ok(1),
        Some(n) if (1..=MAX_CANDIDATES as i64).contains(&n) => Ok(n as u32),
        Some(n) => Err(invalid(format!(
            "Unable to submit request because candidateCount must be in the range \
             [1, {MAX_CANDIDATES}]; got {n}."
        ))),
    }
}

pub(super) fn check_generation_types(config: &Value) -> Result<(), Failure> {
    let bad = |name: &str, ty: &str, v: &Value| {
        invalid(format!(
            "Invalid value at 'generation_config.{}' ({ty}), {v}",
            snake(name)
        ))
    };
    for name in FLOAT_FIELDS {
        if let Some(v) = config.get(name) {
            if !v.is_number() {
                return Err(bad(name, "TYPE_FLOAT", v));
            }
        }
    }
    for name in INT_FIELDS {
        if let Some(v) = config.get(name) {
            if !(v.is_i64() || v.is_u64()) {
                return Err(bad(name, "TYPE_INT32", v));
            }
        }
    }
    if let Some(v) = config.get("stopSequences") {
        if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) {
            return Err(bad("stopSequences", "TYPE_STRING", v));
        }
    }
    if let Some(v) = config.get("responseMimeType") {
        if !v.is_string() {
            return Err(bad("responseMimeType", "TYPE_STRING", v));
        }
    }
    // responseSchema / responseJsonSchema: "If set, a compatible
    // responseMimeType must also be set. Compatible MIME types: application/json".
    let mime = config.get("responseMimeType").and_then(Value::as_str);
    for name in ["responseSchema", "responseJsonSchema"] {
        if config.get(name).is_some() && mime != Some("application/json") {
            return Err(invalid(format!(
                "* GenerateContentRequest.generation_config.response_mime_type: \
                 {} is only supported with response_mime_type application/json.",
                snake(name)
            )));
        }
    }
    Ok(())
}

/// `generationConfig.thinkingConfig` (ai.google.dev/gemini-api/docs/thinking):
/// a `thinkingLevel` only on Gemini 3 (Pro: low, high; Flash: minimal, low,
/// medium, high), never with a `thinkingBudget`; a budget in the model's
/// range (2.5 Pro 128-32768, it cannot stop thinking; 2.5 Flash 0-24576;
/// Flash-Lite 0 or 512-24576; -1: dynamic). True when thoughts are to come
/// back (`includeThoughts` and a model that thinks).
pub(super) fn check_thinking(config: &Value, model: &str) -> Result<bool, Failure> {
    check_fields(
        config,
        &["includeThoughts", "thinkingBudget", "thinkingLevel"],
        "generation_config.thinking_config",
    )?;
    let gemini3 = model.contains("gemini-3");
    let pro = model.contains("-pro");
    let level = config.get("thinkingLevel");
    let budget = config.get("thinkingBudget");
    if level.is_some() && budget.is_some() {
        return Err(invalid(
            "You can only set one of thinking budget and thinking level.",
        ));
    }
    if let Some(level) = level {
        let levels: &[&str] = match (gemini3, pro) {
            (false, _) => return Err(invalid("Thinking level is not supported for this model.")),
            (true, true) => &["low", "high"],
            (true, false) => &["minimal", "low", "medium", "high"],
        };
        let known = level
            .as_str()
            .is_some_and(|l| levels.contains(&l.to_ascii_lowercase().as_str()));
        if !known {
            return Err(invalid(format!(
                "Invalid value at 'generation_config.thinking_config.thinking_level', {level}"
            )));
        }
    }
    let mut thinks = true;
    if let Some(budget) = budget {
        let b = budget.as_i64().ok_or_else(|| {
            invalid(format!(
                "Invalid value at 'generation_config.thinking_config.thinking_budget' (TYPE_INT32), {budget}"
            ))
        })?;
        let (lo, hi) = match (pro, model.contains("flash-lite")) {
            (true, _) => (128, 32768),
            (false, true) if b != 0 => (512, 24576),
            _ => (0, 24576),
        };
        if b != -1 && !(lo..=hi).contains(&b) {
            return Err(invalid(format!(
                "The thinking budget {b} is invalid. Please choose a value between {lo} and {hi}."
            )));
        }
        thinks = b != 0;
    }
    Ok(thinks && config.get("includeThoughts") == Some(&Value::Bool(true)))
}

/// The image types Gemini reads (ai.google.dev/gemini-api/docs/image-understanding,
/// "Supported image formats"): another `image/` type, `image/jpg` among
/// them, is refused.
const IMAGE_TYPES: [&str; 5] = [
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/heic",
    "image/heif",
];

fn check_image_type(blob: &Value) -> Result<(), Failure> {
    match blob.get("mimeType").and_then(Value::as_str) {
        Some(t) if t.starts_with("image/") && !IMAGE_TYPES.contains(&t) => {
            Err(invalid(format!("Unsupported MIME type: {t}")))
        }
        _ => Ok(()),
    }
}

/// A function response's media (`functionResponse.parts`, inline data):
/// Gemini 3's multimodal function responses
/// (ai.google.dev/gemini-api/docs/function-calling, "Multimodal function
/// responses"), not earlier models'.
pub(super) fn check_response_media(part: &Value, model: &str, at: &str) -> Result<(), Failure> {
    let Some(media) = part
        .pointer("/functionResponse/parts")
        .and_then(Value::as_array)
    else {
        return Ok(());
    };
    if !media.is_empty() && !model.contains("gemini-3") {
        return Err(invalid(format!(
            "* GenerateContentRequest.{at}.function_response.parts: multimodal function \
             responses are not supported for this model."
        )));
    }
    for (k, m) in media.iter().enumerate() {
        check_fields(
            m,
            &["inlineData", "fileData"],
            &format!("{at}.function_response.parts[{k}]"),
        )?;
        if let Some(blob) = m.get("inlineData") {
            check_image_type(blob)?;
        }
    }
    Ok(())
}

/// camelCase to the snake_case Google's messages use.
fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) fn check_part(part: &Value, at: &str) -> Result<(), Failure> {
    check_fields(part, PART_FIELDS, at)?;
    // An empty text is no data at all to the proto decoder (proto3 drops
    // empty strings), so the part's `data` oneof is unset.
    let data = part.as_object().is_some_and(|o| {
        o.keys()
            .any(|k| k != "text" && k != "thought" && k != "thoughtSignature")
    });
    if part.get("text").and_then(Value::as_str) == Some("") && !data {
        return Err(invalid(format!(
            "* GenerateContentRequest.{at}.data: required oneof field 'data' must have one initialized field"
        )));
    }
    if let Some(blob) = part.get("inlineData") {
        check_fields(blob, &["mimeType", "data"], &format!("{at}.inline_data"))?;
        check_image_type(blob)?;
    }
    if let Some(call) = part.get("functionCall") {
        check_fields(
            call,
            &["id", "name", "args"],
            &format!("{at}.function_call"),
        )?;
        if !call.get("name").is_some_and(Value::is_string) {
            return Err(invalid(format!(
                "* {at}.function_call.name: Name cannot be empty."
            )));
        }
    }
    if let Some(resp) = part.get("functionResponse") {
        check_fields(
            resp,
            &[
                "id",
                "name",
                "response",
                "parts",
                "willContinue",
                "scheduling",
            ],
            &format!("{at}.function_response"),
        )?;
        if !resp.get("response").is_some_and(Value::is_object) {
            return Err(invalid(format!(
                "Invalid value at '{at}.function_response.response' (type.googleapis.com/google.protobuf.Struct)"
            )));
        }
    }
    Ok(())
}
