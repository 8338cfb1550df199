//! Google Gemini API (`POST /v1beta/models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse`, key in `x-goog-api-key`): strict request
//! validation (unknown fields are rejected, as the real API does), thought
//! signatures issued on function calls and required back, responses and
//! CRLF streams of `GenerateContentResponse` objects, Google error bodies,
//! and the safety verdicts (`promptFeedback.blockReason`, `SAFETY`).
//!
//! Long on purpose (about 830 lines of code, then its tests): one vendor's
//! checks, with the real API's error messages, and its answers and streams,
//! in one file as for every vendor the mock speaks.

use serde_json::{json, Map, Value};

use crate::answer::{gemini_signature, reasoning_text, word_chunks, Answer, Finish};
use crate::dialect::{
    count_words, to_json, Dialect, Failure, Filtered, Meta, Prompt, Reply, SseEvent, Tool,
    ToolChoice,
};
use crate::http::{query_param, Request};
use crate::keys;
use crate::scenario::Filter;

pub struct Gemini;

const PATH_PREFIX: &str = "/v1beta/models/";
const GENERATE: &str = ":generateContent";
const STREAM: &str = ":streamGenerateContent";
const COUNT: &str = ":countTokens";

/// Google's documented stand-in for a signature on calls Gemini did not
/// make (ai.google.dev/gemini-api/docs/thought-signatures), accepted as
/// Gemini does; any other signature must be the one issued for the call.
const UNSIGNED: &str = "skip_thought_signature_validator";

pub(crate) const OAUTH_REFUSED: &str =
    "Request had invalid authentication credentials. Expected OAuth 2 \
    access token, login cookie or other valid authentication credential. See \
    https://developers.google.com/identity/sign-in/web/devconsole-project.";

const REQUEST_FIELDS: &[&str] = &[
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
const CONTENT_FIELDS: &[&str] = &["role", "parts"];
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
const GENERATION_FIELDS: &[&str] = &[
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
const TOOL_FIELDS: &[&str] = &[
    "functionDeclarations",
    "googleSearch",
    "codeExecution",
    "urlContext",
];
const DECLARATION_FIELDS: &[&str] = &[
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
const GOOGLE_SEARCH_FIELDS: &[&str] = &["timeRangeFilter"];
const TOOL_CONFIG_FIELDS: &[&str] = &["functionCallingConfig", "includeServerSideToolInvocations"];
const CALLING_CONFIG_FIELDS: &[&str] = &["mode", "allowedFunctionNames"];

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
fn check_tool_combination(p: &Prompt) -> Result<(), Failure> {
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

/// The search a model turn runs first when Google Search is offered and
/// `includeServerSideToolInvocations` asks to see it, on a new turn (not
/// after function responses): its `toolCall` (signed, as Gemini signs the
/// first part of a step) and `toolResponse` parts, one id.
fn server_invocations(p: &Prompt) -> Vec<Value> {
    if !(p.gemini_search && p.gemini_server_invocations && p.tool_results.is_none()) {
        return Vec::new();
    }
    let args = json!({"queries": [p.last_user_text]});
    vec![
        json!({"toolCall": {"toolType": "GOOGLE_SEARCH_WEB", "id": "mocksearch1", "args": args},
               "thoughtSignature": call_signature("GOOGLE_SEARCH_WEB", &args)}),
        json!({"toolResponse": {"toolType": "GOOGLE_SEARCH_WEB", "id": "mocksearch1",
               "response": {"results": [{"title": "Mock result", "url": "https://example.com/"}]}}}),
    ]
}

/// The signature the mock puts on a function call: over its name and
/// arguments, so it is valid only on the call it came with.
fn call_signature(name: &str, args: &Value) -> String {
    gemini_signature(&format!("{name}{args}"))
}

/// The model a `/models/<model>:<method>` path names.
fn path_model(path: &str) -> Option<&str> {
    let rest = path.get(path.find(PATH_PREFIX)? + PATH_PREFIX.len()..)?;
    Some(rest.split_once(':')?.0)
}

impl Gemini {
    /// A generation's body for `model` (the path's), checked as Gemini
    /// checks it wherever it runs (Google AI, Vertex AI).
    pub(crate) fn parse_for(&self, model: &str, body: &Value) -> Result<Prompt, Failure> {
        let mut p = self.parse(body)?;
        p.model = model.to_owned();
        check_tool_combination(&p)?;
        let named = json_names(body);
        if let Some(thinking) = named.pointer("/generationConfig/thinkingConfig") {
            p.reasoning = check_thinking(thinking, &p.model)?;
        }
        Ok(p)
    }

    /// `POST /v1beta/models/{model}:countTokens` (CountTokensRequest):
    /// `contents`, or `generateContentRequest` (a generation's body with
    /// the `model` it names, `models/...`), never both; the prompt's words,
    /// as a generation's `promptTokenCount` says (`{}` for neither: proto3
    /// JSON leaves a zero out).
    fn count_tokens(&self, req: &Request, path: &str) -> Result<Value, Failure> {
        self.check_headers(req)?;
        let body: Value = serde_json::from_slice(&req.body)
            .map_err(|e| invalid(format!("Invalid JSON payload received. {e}")))?;
        let body = json_names(&body);
        check_fields(&body, &["contents", "generateContentRequest"], "")?;
        let model = path_model(path).unwrap_or_default();
        let tokens = match (body.get("contents"), body.get("generateContentRequest")) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "* CountTokensRequest: contents and generate_content_request are mutually \
                     exclusive: send one of them, not both.",
                ))
            }
            (Some(contents), None) => self
                .parse(&json!({ "contents": contents }))?
                .prompt_words
                .max(1),
            (None, Some(generate)) => {
                let Some(obj) = generate.as_object() else {
                    return Err(invalid(
                        "Invalid value at 'generate_content_request', expected an object",
                    ));
                };
                match obj.get("model").and_then(Value::as_str) {
                    None => {
                        return Err(invalid(
                            "* GenerateContentRequest.model: model is required when counting \
                             the tokens of a generate_content_request.",
                        ))
                    }
                    Some(name) if !name.starts_with("models/") => {
                        return Err(invalid(format!(
                            "* GenerateContentRequest.model: unexpected model name format \
                             '{name}' (expected models/{{model}})"
                        )))
                    }
                    Some(_) => {}
                }
                let mut generation = obj.clone();
                generation.remove("model");
                let generation = Value::Object(generation);
                let p = self.parse(&generation)?;
                if let Some(thinking) = generation.pointer("/generationConfig/thinkingConfig") {
                    check_thinking(thinking, model)?;
                }
                p.prompt_words.max(1)
            }
            (None, None) => 0,
        };
        if tokens == 0 {
            return Ok(json!({}));
        }
        Ok(json!({"totalTokens": tokens,
                  "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}]}))
    }
}

/// A function response's text as the answer planner echoes it: our
/// gateway's `{"result": ...}` wrapper unwrapped, other objects as JSON.
fn response_text(response: Option<&Value>) -> String {
    match response {
        Some(r) => match r.get("result").and_then(Value::as_str) {
            Some(s) => s.to_owned(),
            None => to_json(r),
        },
        None => String::new(),
    }
}

fn usage(a: &Answer) -> Value {
    // Thoughts are counted beside the candidates, in the total.
    let mut u = json!({
        "promptTokenCount": a.prompt_tokens,
        "candidatesTokenCount": a.completion_tokens,
        "totalTokenCount": a.prompt_tokens + a.completion_tokens + a.reasoning_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": a.prompt_tokens}],
    });
    if a.cached_tokens > 0 {
        u["cachedContentTokenCount"] = json!(a.cached_tokens);
    }
    if a.reasoning_tokens > 0 {
        u["thoughtsTokenCount"] = json!(a.reasoning_tokens);
    }
    u
}

fn finish_reason(f: &Finish) -> &'static str {
    match f {
        Finish::Stop | Finish::StopSequence(_) | Finish::ToolCalls | Finish::PauseTurn => "STOP",
        Finish::Length => "MAX_TOKENS",
        Finish::ContentFilter => "SAFETY",
    }
}

fn safety_ratings(blocked: bool) -> Value {
    json!([
        {"category": "HARM_CATEGORY_HARASSMENT", "probability": if blocked { "HIGH" } else { "NEGLIGIBLE" },
         "blocked": blocked},
        {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"},
    ])
}

/// A candidate: `parts` (omitted when empty, as Gemini does for a blocked
/// answer) and the finish reason if this is the last piece.
fn candidate(parts: Vec<Value>, finish: Option<&Finish>) -> Value {
    let mut c = Map::new();
    if !parts.is_empty() {
        c.insert("content".into(), json!({"parts": parts, "role": "model"}));
    }
    if let Some(f) = finish {
        c.insert("finishReason".into(), json!(finish_reason(f)));
        if *f == Finish::ContentFilter {
            c.insert("safetyRatings".into(), safety_ratings(true));
        }
    }
    c.insert("index".into(), json!(0));
    Value::Object(c)
}

fn call_parts(a: &Answer) -> Vec<Value> {
    a.tool_calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut part = json!({"functionCall": {"name": c.name, "args": c.arguments}});
            // Parallel calls: only the first carries the signature.
            if i == 0 {
                part["thoughtSignature"] = json!(call_signature(&c.name, &c.arguments));
            }
            part
        })
        .collect()
}

impl Gemini {
    fn envelope(&self, p: &Prompt, meta: Meta, candidates: Value, usage: Value) -> Value {
        json!({
            "candidates": candidates,
            "usageMetadata": usage,
            "modelVersion": p.model,
            "responseId": format!("mockGemini{}", meta.seq),
        })
    }

    fn event(&self, data: &Value, delta: bool) -> SseEvent {
        SseEvent {
            name: None,
            data: to_json(data),
            delta,
        }
    }

    /// Checks the model turns' function calls: the first call of each turn
    /// must carry a thought signature, and the next turn must answer every
    /// call with a function response.
    fn check_tool_turns(&self, contents: &[Value]) -> Result<(), Failure> {
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

fn check_generation_types(config: &Value) -> Result<(), Failure> {
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
fn check_thinking(config: &Value, model: &str) -> Result<bool, Failure> {
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

fn check_part(part: &Value, at: &str) -> Result<(), Failure> {
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

impl Dialect for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn handles(&self, path: &str) -> bool {
        path.contains(PATH_PREFIX) && (path.ends_with(GENERATE) || path.ends_with(STREAM))
    }

    fn has_call(&self, path: &str) -> bool {
        path.contains(PATH_PREFIX) && path.ends_with(COUNT)
    }

    fn call(&self, req: &Request, path: &str) -> Reply {
        if req.method() != "POST" {
            return self.error(&Failure::Status(404));
        }
        match self.count_tokens(req, path) {
            Ok(body) => Reply {
                status: 200,
                body: to_json(&body),
                retry_after: None,
            },
            Err(f) => self.error(&f),
        }
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        // Google reads `Authorization` as an OAuth 2 token and refuses one
        // that is not, whatever API key comes with it.
        if req.header("authorization").is_some() {
            return Err(Failure::Auth(OAUTH_REFUSED.into()));
        }
        let key = req
            .header("x-goog-api-key")
            .map(str::to_owned)
            .or_else(|| query_param(req.query(), "key"));
        let keys = key.clone();
        if key.is_none_or(|k| k.trim().is_empty()) {
            return Err(Failure::Auth(
                "Method doesn't allow unregistered callers (callers without established \
                 identity). Please use API Key or other form of API consumer identity to call \
                 this API."
                    .into(),
            ));
        }
        if !keys.is_some_and(|k| keys::matches("gemini", &k)) {
            // "API key not valid. Please pass a valid API key." (400)
            return Err(Failure::Status(401));
        }
        Ok(())
    }

    fn is_stream(&self, req: &Request, _body: &Value) -> bool {
        req.path().ends_with(STREAM)
    }

    fn crlf(&self) -> bool {
        true
    }

    fn parse_request(&self, req: &Request, body: &Value) -> Result<Prompt, Failure> {
        let p = self.parse_for(path_model(req.path()).unwrap_or_default(), body)?;
        if self.is_stream(req, body) && query_param(req.query(), "alt").as_deref() != Some("sse") {
            return Err(invalid(
                "the mock speaks only server-sent event streams: add ?alt=sse",
            ));
        }
        Ok(p)
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        let body = &json_names(body);
        check_fields(body, REQUEST_FIELDS, "")?;
        let contents = match body.get("contents") {
            Some(Value::Array(c)) if !c.is_empty() => c,
            _ => {
                return Err(invalid(
                    "* GenerateContentRequest.contents: contents is not specified",
                ))
            }
        };
        let mut p = Prompt::default();
        if let Some(system) = body.get("systemInstruction") {
            check_fields(system, CONTENT_FIELDS, "system_instruction")?;
            for (j, part) in system
                .get("parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                check_part(part, &format!("system_instruction.parts[{j}]"))?;
                p.prompt_words +=
                    count_words(part.get("text").and_then(Value::as_str).unwrap_or(""));
            }
        }
        for (i, c) in contents.iter().enumerate() {
            let at = format!("contents[{i}]");
            check_fields(c, CONTENT_FIELDS, &at)?;
            let role = c.get("role").and_then(Value::as_str).unwrap_or("user");
            if role != "user" && role != "model" {
                return Err(invalid(format!(
                    "Please use a valid role: user, model. ({at}.role is '{role}')"
                )));
            }
            // A conversation opens with the user ("Please ensure that
            // multiturn requests alternate between user and model", and the
            // first turn is the user's).
            if i == 0 && role == "model" {
                return Err(invalid(
                    "Please ensure that multiturn requests alternate between user and model. \
                     First content should be with role 'user', got model.",
                ));
            }
            let parts = match c.get("parts") {
                Some(Value::Array(parts)) if !parts.is_empty() => parts,
                _ => {
                    return Err(invalid(format!(
                        "* GenerateContentRequest.{at}.parts: contents.parts must not be empty."
                    )))
                }
            };
            let mut texts = Vec::new();
            for (j, part) in parts.iter().enumerate() {
                check_part(part, &format!("{at}.parts[{j}]"))?;
                if let Some(t) = part.get("text").and_then(Value::as_str) {
                    texts.push(t);
                }
                if part.get("functionCall").is_some() {
                    p.prior_tool_calls += 1;
                }
                if let Some(r) = part.get("functionResponse") {
                    p.prompt_words += count_words(&response_text(r.get("response")));
                }
            }
            let text = texts.join(" ");
            p.prompt_words += count_words(&text);
            if role == "user" && !text.is_empty() {
                p.last_user_text = text;
            }
        }
        self.check_tool_turns(contents)?;
        if let Some(last) = contents.last() {
            let results: Vec<String> = last
                .get("parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|part| part.get("functionResponse"))
                .map(|r| response_text(r.get("response")))
                .collect();
            if !results.is_empty() {
                p.tool_results = Some(results);
            }
        }
        if let Some(config) = body.get("generationConfig") {
            check_fields(config, GENERATION_FIELDS, "generation_config")?;
            check_generation_types(config)?;
            if config.get("responseMimeType").and_then(Value::as_str) == Some("application/json") {
                p.json = Some(
                    config
                        .get("responseJsonSchema")
                        .or_else(|| config.get("responseSchema"))
                        .cloned(),
                );
            }
            p.max_tokens = config.get("maxOutputTokens").and_then(Value::as_u64);
            p.stop = config
                .get("stopSequences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
        }
        for (i, t) in body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            check_fields(t, TOOL_FIELDS, &format!("tools[{i}]"))?;
            if let Some(search) = t.get("googleSearch") {
                check_fields(
                    search,
                    GOOGLE_SEARCH_FIELDS,
                    &format!("tools[{i}].google_search"),
                )?;
                p.gemini_search = true;
            }
            p.gemini_builtin_tools |= ["googleSearch", "codeExecution", "urlContext"]
                .iter()
                .any(|k| t.get(*k).is_some());
            for (j, f) in t
                .get("functionDeclarations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                check_fields(
                    f,
                    DECLARATION_FIELDS,
                    &format!("tools[{i}].function_declarations[{j}]"),
                )?;
                let name = f.get("name").and_then(Value::as_str).unwrap_or("");
                let schema = f
                    .get("parametersJsonSchema")
                    .or_else(|| f.get("parameters"));
                p.tools.push(Tool {
                    name: name.to_owned(),
                    schema: schema.cloned().unwrap_or(Value::Null),
                });
            }
        }
        if let Some(config) = body.get("toolConfig") {
            check_fields(config, TOOL_CONFIG_FIELDS, "tool_config")?;
            match config.get("includeServerSideToolInvocations") {
                None => {}
                Some(Value::Bool(on)) => p.gemini_server_invocations = *on,
                Some(v) => {
                    return Err(invalid(format!(
                        "Invalid value at 'tool_config.include_server_side_tool_invocations' (TYPE_BOOL), {v}"
                    )))
                }
            }
            if let Some(calling) = config.get("functionCallingConfig") {
                check_fields(
                    calling,
                    CALLING_CONFIG_FIELDS,
                    "tool_config.function_calling_config",
                )?;
                let allowed = calling
                    .pointer("/allowedFunctionNames/0")
                    .and_then(Value::as_str);
                p.tool_choice = match (calling.get("mode").and_then(Value::as_str), allowed) {
                    (Some("NONE"), _) => ToolChoice::None,
                    (Some("ANY"), Some(name)) => ToolChoice::Named(name.to_owned()),
                    (Some("ANY"), None) => ToolChoice::Any,
                    _ => ToolChoice::Auto,
                };
            }
        }
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        let key_invalid = json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID", "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"}
        }]);
        // (HTTP status, message, Google status, details) as the real API sends them.
        let (status, message, name, details): (u16, String, &str, Value) = match failure {
            Failure::Auth(m) if m == OAUTH_REFUSED => {
                (401, m.clone(), "UNAUTHENTICATED", json!([]))
            }
            Failure::Auth(m) => (403, m.clone(), "PERMISSION_DENIED", json!([])),
            Failure::Invalid(m) | Failure::Param { message: m, .. } => {
                (400, m.clone(), "INVALID_ARGUMENT", json!([]))
            }
            Failure::ContextLength => (
                400,
                "The input token count (250000) exceeds the maximum number of tokens allowed \
                 (1048576)."
                    .into(),
                "INVALID_ARGUMENT",
                json!([]),
            ),
            Failure::Status(s) => match s {
                400 => (
                    400,
                    "Request contains an invalid argument.".into(),
                    "INVALID_ARGUMENT",
                    json!([]),
                ),
                // Google answers a bad key with 400, never 401.
                401 => (
                    400,
                    "API key not valid. Please pass a valid API key.".into(),
                    "INVALID_ARGUMENT",
                    key_invalid,
                ),
                403 => (
                    403,
                    "Your API key was reported as leaked. Please use another API key.".into(),
                    "PERMISSION_DENIED",
                    json!([]),
                ),
                404 => (
                    404,
                    "models/mock is not found for API version v1beta, or is not supported for \
                     generateContent."
                        .into(),
                    "NOT_FOUND",
                    json!([]),
                ),
                413 => (
                    400,
                    "Request payload size exceeds the limit: 20971520 bytes.".into(),
                    "INVALID_ARGUMENT",
                    json!([]),
                ),
                429 => (
                    429,
                    "You exceeded your current quota, please check your plan and billing details."
                        .into(),
                    "RESOURCE_EXHAUSTED",
                    json!([{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]),
                ),
                500 => (
                    500,
                    "An internal error has occurred. Please retry or report in \
                     https://developers.generativeai.google/guide/troubleshooting"
                        .into(),
                    "INTERNAL",
                    json!([]),
                ),
                // Gemini has no 529: overload is a 503.
                _ => (
                    503,
                    "The model is overloaded. Please try again later.".into(),
                    "UNAVAILABLE",
                    json!([]),
                ),
            },
        };
        let mut error = json!({"code": status, "message": message, "status": name});
        if details.as_array().is_some_and(|d| !d.is_empty()) {
            error["details"] = details;
        }
        Reply {
            status,
            body: to_json(&json!({ "error": error })),
            retry_after: None,
        }
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        let mut parts = Vec::new();
        if p.reasoning {
            parts.push(json!({"text": reasoning_text(p), "thought": true}));
        }
        parts.extend(server_invocations(p));
        if !a.text.is_empty() {
            parts.push(json!({"text": a.text}));
        }
        parts.extend(call_parts(a));
        self.envelope(
            p,
            meta,
            json!([candidate(parts, Some(&a.finish))]),
            usage(a),
        )
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        let prompt_usage =
            json!({"promptTokenCount": a.prompt_tokens, "totalTokenCount": a.prompt_tokens});
        // Thought summaries first, then the answer's text.
        let thoughts = if p.reasoning {
            word_chunks(&reasoning_text(p))
        } else {
            Vec::new()
        };
        let pieces = thoughts
            .iter()
            .map(|t| json!({"text": t, "thought": true}))
            .chain(server_invocations(p))
            .chain(a.chunks.iter().map(|c| json!({"text": c})));
        let mut events: Vec<SseEvent> = pieces
            .map(|part| {
                let data = self.envelope(
                    p,
                    meta,
                    json!([candidate(vec![part], None)]),
                    prompt_usage.clone(),
                );
                self.event(&data, true)
            })
            .collect();
        // Function calls arrive whole, with the finish reason and the usage.
        let last = self.envelope(
            p,
            meta,
            json!([candidate(call_parts(a), Some(&a.finish))]),
            usage(a),
        );
        events.push(self.event(&last, !a.tool_calls.is_empty()));
        events
    }

    fn stream_error(&self) -> SseEvent {
        SseEvent {
            name: None,
            data: r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#.into(),
            delta: false,
        }
    }

    /// A blocked prompt is a 200 verdict (`promptFeedback`), the only event
    /// of a stream; the output filter is the usual answer's `SAFETY` finish.
    fn filtered(&self, filter: Filter, p: &Prompt, meta: Meta) -> Option<Filtered> {
        if filter != Filter::BlockedPrompt {
            return None;
        }
        let verdict = json!({
            "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": safety_ratings(true)},
            "usageMetadata": {"promptTokenCount": p.prompt_words.max(1), "totalTokenCount": p.prompt_words.max(1)},
            "modelVersion": p.model,
            "responseId": format!("mockGemini{}", meta.seq),
        });
        Some(if p.stream {
            Filtered::Stream(vec![self.event(&verdict, false)])
        } else {
            Filtered::Reply(Reply {
                status: 200,
                body: to_json(&verdict),
                retry_after: None,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(body: &str) -> Reply {
        let raw = format!(
            "POST /v1beta/models/gemini-2.5-flash:countTokens HTTP/1.1\r\n\
             x-goog-api-key: mock-gemini-key\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let req = crate::http::parse(&raw);
        Gemini.call(&req, req.path())
    }

    #[test]
    fn count_tokens_takes_contents_or_a_generation_never_both() {
        let contents = r#"[{"role":"user","parts":[{"text":"four words right here"}]}]"#;
        let by_contents = count(&format!(r#"{{"contents":{contents}}}"#));
        assert_eq!(by_contents.status, 200, "{}", by_contents.body);
        assert!(by_contents.body.contains(r#""totalTokens":4"#));
        let generation = format!(
            r#"{{"generateContentRequest":{{"model":"models/gemini-2.5-flash","contents":{contents},
                "systemInstruction":{{"parts":[{{"text":"be brief"}}]}}}}}}"#
        );
        let by_generation = count(&generation);
        assert!(
            by_generation.body.contains(r#""totalTokens":6"#),
            "{}",
            by_generation.body
        );
        let both = count(&format!(
            r#"{{"contents":{contents},"generateContentRequest":{{"model":"models/m","contents":{contents}}}}}"#
        ));
        assert_eq!(both.status, 400);
        assert!(both.body.contains("mutually exclusive"));
        let no_model = count(&format!(
            r#"{{"generateContentRequest":{{"contents":{contents}}}}}"#
        ));
        assert_eq!(no_model.status, 400);
        let bad_model = count(&format!(
            r#"{{"generateContentRequest":{{"model":"gemini","contents":{contents}}}}}"#
        ));
        assert_eq!(bad_model.status, 400);
        assert_eq!(count(r#"{"contents":[],"extra":1}"#).status, 400);
        assert_eq!(count("{}").body, "{}");
    }

    #[test]
    fn fields_are_taken_by_json_or_proto_name_and_data_keeps_its_keys() {
        let body = json!({"contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "generation_config": {"thinking_config": {"include_thoughts": true}},
            "tools": [{"function_declarations": [{"name": "f",
                "parameters_json_schema": {"type": "object", "properties": {"snake_case": {}}}}]}]});
        let named = json_names(&body);
        assert_eq!(
            named["generationConfig"]["thinkingConfig"]["includeThoughts"],
            true
        );
        let declaration = &named["tools"][0]["functionDeclarations"][0];
        assert!(declaration["parametersJsonSchema"]["properties"]["snake_case"].is_object());
        assert!(Gemini.parse(&body).is_ok());
        // An unknown name is still refused, by either name.
        let unknown = json!({"contents": [{"parts": [{"text": "x"}]}], "no_such_field": 1});
        assert!(Gemini.parse(&unknown).is_err());
    }

    #[test]
    fn thinking_config_rules_by_model() {
        let ok = |config: Value, model: &str| check_thinking(&config, model);
        assert_eq!(
            ok(
                json!({"includeThoughts": true, "thinkingBudget": 1024}),
                "gemini-2.5-flash"
            ),
            Ok(true)
        );
        assert_eq!(
            ok(
                json!({"includeThoughts": true, "thinkingBudget": 0}),
                "gemini-2.5-flash"
            ),
            Ok(false)
        );
        assert_eq!(
            ok(json!({"thinkingBudget": -1}), "gemini-2.5-pro"),
            Ok(false)
        );
        assert_eq!(
            ok(
                json!({"includeThoughts": true, "thinkingLevel": "low"}),
                "gemini-3-pro-preview"
            ),
            Ok(true)
        );
        for (config, model) in [
            (json!({"thinkingBudget": 0}), "gemini-2.5-pro"),
            (json!({"thinkingBudget": 100}), "gemini-2.5-flash-lite"),
            (json!({"thinkingBudget": 30000}), "gemini-2.5-flash"),
            (json!({"thinkingLevel": "low"}), "gemini-2.5-flash"),
            (json!({"thinkingLevel": "medium"}), "gemini-3-pro-preview"),
            (
                json!({"thinkingLevel": "low", "thinkingBudget": 10}),
                "gemini-3-flash",
            ),
            (json!({"thinkingBudget": "many"}), "gemini-2.5-flash"),
            (json!({"budget": 1}), "gemini-2.5-flash"),
        ] {
            assert!(ok(config.clone(), model).is_err(), "{config} {model}");
        }
    }

    #[test]
    fn call_signatures_are_checked() {
        let args = json!({"city": "Paris"});
        let turn = |signature: &str| {
            [
                json!({"role": "user", "parts": [{"text": "q"}]}),
                json!({"role": "model", "parts": [{"functionCall": {"name": "f", "args": args},
                                                 "thoughtSignature": signature}]}),
            ]
        };
        assert_eq!(
            Gemini.check_tool_turns(&turn(&call_signature("f", &args))),
            Ok(())
        );
        assert_eq!(Gemini.check_tool_turns(&turn(UNSIGNED)), Ok(()));
        assert_eq!(
            Gemini.check_tool_turns(&turn(&call_signature("f", &json!({"city": "Rome"})))),
            Err(invalid("Corrupted thought signature."))
        );
    }
}
