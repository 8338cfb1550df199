//! OpenAI Chat Completions (`POST /v1/chat/completions`): request parsing,
//! `chat.completion` objects, `chat.completion.chunk` streams and error
//! bodies, shaped like the real API.
//!
//! Long on purpose (about 620 lines; its tests are in `wire_tests.rs`): one
//! vendor's checks, with the real API's error messages, and its answers and
//! streams, in one file as for every vendor the mock speaks.

use serde_json::{json, Value};

use crate::answer::{fragments, Answer, Finish};
use crate::dialect::{
    count_words, to_json, Dialect, Failure, Meta, Prompt, Reply, SseEvent, Tool, ToolChoice,
};
use crate::http::Request;
use crate::keys;

/// `response_format` as the answer planner needs it: `json_object` (no
/// schema) or `json_schema` (its schema).
pub fn response_format(format: Option<&Value>) -> Option<Option<Value>> {
    match format?.get("type")?.as_str()? {
        "json_object" => Some(None),
        "json_schema" => Some(format?.pointer("/json_schema/schema").cloned()),
        _ => None,
    }
}

pub struct OpenAi;

/// OpenAI's refusal of body members its endpoint does not take
/// (`arguments`: the ones it does), `None` when there are none.
pub(crate) fn unrecognized(
    obj: &serde_json::Map<String, Value>,
    arguments: &[&str],
) -> Option<String> {
    let unknown: Vec<&str> = obj
        .keys()
        .map(String::as_str)
        .filter(|k| !arguments.contains(k))
        .collect();
    match unknown.as_slice() {
        [] => None,
        [one] => Some(format!("Unrecognized request argument supplied: {one}")),
        many => Some(format!(
            "Unrecognized request arguments supplied: {}",
            many.join(", ")
        )),
    }
}

const FINGERPRINT: &str = "fp_mock";

fn invalid(msg: impl Into<String>) -> Failure {
    Failure::Invalid(msg.into())
}

fn param(message: impl Into<String>, param: &str, code: Option<&'static str>) -> Failure {
    Failure::Param {
        message: message.into(),
        param: param.to_owned(),
        code,
    }
}

/// Every request body argument of Chat Completions "Create chat completion"
/// (platform.openai.com/docs/api-reference/chat/create); anything else is
/// refused with "Unrecognized request argument supplied: X".
const ARGUMENTS: &[&str] = &[
    "messages",
    "model",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_options",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
];

/// OpenAI's reasoning and GPT-5 families (o1, o3, o4-mini, gpt-5...): they
/// take `max_completion_tokens` only and the default sampling only
/// (platform.openai.com/docs/guides/reasoning, "Unsupported parameters").
pub fn reasoning_model(model: &str) -> bool {
    model.starts_with("gpt-5")
        || ["o1", "o3", "o4"]
            .iter()
            .any(|p| model == *p || model.starts_with(&format!("{p}-")))
}

/// The request rules of the Chat Completions reference, checked before
/// anything is answered. `messages` is already known to be a non-empty array.
fn check_rules(
    obj: &serde_json::Map<String, Value>,
    model: &str,
    messages: &[Value],
) -> Result<(), Failure> {
    // Unknown top-level arguments (the reference's request body list).
    if let Some(message) = unrecognized(obj, ARGUMENTS) {
        return Err(invalid(message));
    }
    // stream_options: "Options for streaming response. Only set this when you set stream: true."
    let streaming = obj.get("stream").and_then(Value::as_bool) == Some(true);
    if obj.get("stream_options").is_some_and(|o| !o.is_null()) && !streaming {
        return Err(param(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
            None,
        ));
    }
    // metadata: stored completions only ("'metadata' is only allowed when 'store' is enabled.").
    let stored = obj.get("store").and_then(Value::as_bool) == Some(true);
    if obj.get("metadata").is_some_and(|m| !m.is_null()) && !stored {
        return Err(param(
            "'metadata' is only allowed when 'store' is enabled.",
            "metadata",
            None,
        ));
    }
    // Reasoning models: max_completion_tokens instead of max_tokens; only
    // the default temperature / top_p (1).
    if reasoning_model(model) {
        if obj.get("max_tokens").is_some_and(|m| !m.is_null()) {
            return Err(param(
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use \
                 'max_completion_tokens' instead.",
                "max_tokens",
                Some("unsupported_parameter"),
            ));
        }
        for name in ["temperature", "top_p"] {
            match obj.get(name) {
                None | Some(Value::Null) => {}
                Some(v) if v.as_f64() == Some(1.0) => {}
                Some(v) => {
                    return Err(param(
                        format!(
                            "Unsupported value: '{name}' does not support {v} with this model. \
                             Only the default (1) value is supported."
                        ),
                        name,
                        Some("unsupported_value"),
                    ))
                }
            }
        }
    } else if obj.get("reasoning_effort").is_some_and(|e| !e.is_null()) {
        // Only reasoning models think (platform.openai.com/docs/guides/reasoning).
        return Err(param(
            "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
            "reasoning_effort",
            Some("unsupported_parameter"),
        ));
    }
    // reasoning_effort's values (Create chat completion: none, minimal, low, medium, high, xhigh, max).
    if let Some(effort) = obj.get("reasoning_effort").filter(|e| !e.is_null()) {
        let known = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];
        if !effort.as_str().is_some_and(|e| known.contains(&e)) {
            return Err(param(
                format!("Invalid value: {effort}. Supported values are: 'none', 'minimal', 'low', 'medium', 'high', 'xhigh', and 'max'."),
                "reasoning_effort",
                Some("invalid_value"),
            ));
        }
    }
    crate::openai_parts::check_chat_parts(messages, model)?;
    crate::openai_parts::check_reasoning_with_tools(obj, model)?;
    // A tool message answers a tool call of a preceding assistant message.
    let mut call_ids: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match m.get("role").and_then(Value::as_str) {
            Some("assistant") => {
                call_ids = m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map(|calls| {
                        calls
                            .iter()
                            .filter_map(|c| c.get("id").and_then(Value::as_str))
                            .collect()
                    })
                    .unwrap_or_default();
            }
            Some("tool") => {
                let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
                if !call_ids.contains(&id) {
                    return Err(param(
                        "Invalid parameter: messages with role 'tool' must be a response to a \
                         preceeding message with 'tool_calls'.",
                        &format!("messages.[{i}].role"),
                        None,
                    ));
                }
            }
            _ => call_ids.clear(),
        }
    }
    Ok(())
}

/// Text of a message `content`: a string, or the text parts of an array.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

pub fn finish_reason(f: &Finish) -> &'static str {
    match f {
        Finish::Stop | Finish::StopSequence(_) | Finish::PauseTurn => "stop",
        Finish::Length => "length",
        Finish::ToolCalls => "tool_calls",
        Finish::ContentFilter => "content_filter",
    }
}

/// The most choices OpenAI answers (`n`: "Expected a value <= 128").
const MAX_CHOICES: u64 = 128;

/// `n`, within OpenAI's range, as OpenAI refuses one outside it.
fn choices(obj: &serde_json::Map<String, Value>) -> Result<u32, Failure> {
    let Some(n) = obj.get("n").filter(|n| !n.is_null()) else {
        return Ok(1);
    };
    let Some(n) = n.as_i64() else {
        return Err(param(
            format!("Invalid type for 'n': expected an integer, but got {n} instead."),
            "n",
            Some("invalid_type"),
        ));
    };
    if n < 1 {
        return Err(param(
            format!("Invalid 'n': integer below minimum value. Expected a value >= 1, but got {n} instead."),
            "n",
            Some("integer_below_min_value"),
        ));
    }
    if n as u64 > MAX_CHOICES {
        return Err(param(
            format!("Invalid 'n': integer above maximum value. Expected a value <= {MAX_CHOICES}, but got {n} instead."),
            "n",
            Some("integer_above_max_value"),
        ));
    }
    Ok(n as u32)
}

/// The usage of the whole answer: every choice's completion tokens.
fn usage(p: &Prompt, a: &Answer) -> Value {
    // Reasoning tokens are part of completion_tokens; cached ones of prompt_tokens.
    let n = u64::from(p.choices());
    let completion = (a.completion_tokens + a.reasoning_tokens) * n;
    json!({
        "prompt_tokens": a.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": a.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": a.cached_tokens,
                                  "cache_write_tokens": a.cache_write_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": a.reasoning_tokens * n, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0
        }
    })
}

impl OpenAi {
    fn chunk(&self, p: &Prompt, meta: Meta, choices: Value, usage: Option<Value>) -> SseEvent {
        let mut c = json!({
            "id": format!("chatcmpl-mock{}", meta.seq),
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": p.model,
            "service_tier": "default",
            "system_fingerprint": FINGERPRINT,
            "choices": choices,
        });
        // Real OpenAI: with include_usage every chunk has "usage", null
        // until the final usage-only chunk.
        if p.include_usage {
            c["usage"] = usage.unwrap_or(Value::Null);
        }
        SseEvent {
            name: None,
            data: to_json(&c),
            delta: false,
        }
    }

    /// A chunk of choice `index`.
    fn delta_of(
        &self,
        p: &Prompt,
        meta: Meta,
        index: u32,
        delta: Value,
        finish: Option<&str>,
    ) -> SseEvent {
        let choice =
            json!([{"index": index, "delta": delta, "logprobs": null, "finish_reason": finish}]);
        self.chunk(p, meta, choice, None)
    }
}

impl Dialect for OpenAi {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn handles(&self, path: &str) -> bool {
        path.ends_with("/chat/completions")
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        let auth = req.header("authorization").unwrap_or("").trim();
        let key = match auth.get(..7) {
            Some(scheme) if scheme.eq_ignore_ascii_case("bearer ") => auth.get(7..).unwrap_or(""),
            _ => "",
        };
        if key.trim().is_empty() {
            return Err(Failure::Auth(
                "You didn't provide an API key. You need to provide your API key in an \
                 Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
                    .into(),
            ));
        }
        // Exactly the account's key (other vendors' auth headers, such as
        // x-api-key, are ignored by OpenAI: it reads Authorization only).
        if !keys::matches("openai", key) {
            return Err(Failure::Auth(format!(
                "Incorrect API key provided: {}. You can find your API key at \
                 https://platform.openai.com/account/api-keys.",
                keys::masked(key)
            )));
        }
        Ok(())
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        let obj = body
            .as_object()
            .ok_or_else(|| invalid("The request body must be a JSON object."))?;
        let model = obj
            .get("model")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("you must provide a model parameter"))?;
        let messages = obj
            .get("messages")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("Missing required parameter: 'messages'."))?;
        if messages.is_empty() {
            return Err(invalid(
                "Invalid 'messages': empty array. Expected an array with minimum length 1, \
                 but got an empty array instead.",
            ));
        }

        check_rules(obj, model, messages)?;
        let mut p = Prompt {
            model: model.to_owned(),
            choices: choices(obj)?,
            json: response_format(obj.get("response_format")),
            ..Prompt::default()
        };
        for (i, m) in messages.iter().enumerate() {
            let role = m.get("role").and_then(Value::as_str).ok_or_else(|| {
                invalid(format!("Missing required parameter: 'messages[{i}].role'."))
            })?;
            if ![
                "system",
                "developer",
                "user",
                "assistant",
                "tool",
                "function",
            ]
            .contains(&role)
            {
                return Err(invalid(format!(
                    "Invalid value: '{role}'. Supported values are: 'system', 'assistant', \
                     'user', 'function', 'tool', and 'developer'."
                )));
            }
            if role == "tool" && m.get("tool_call_id").and_then(Value::as_str).is_none() {
                return Err(invalid(format!(
                    "Missing required parameter: 'messages[{i}].tool_call_id'."
                )));
            }
            let text = content_text(m.get("content"));
            p.prompt_words += count_words(&text);
            if role == "user" {
                p.last_user_text = text;
            }
            if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
                p.prior_tool_calls += calls.len() as u64;
            }
        }
        // Trailing tool messages: the model is being told the results.
        let results: Vec<String> = messages
            .iter()
            .rev()
            .take_while(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
            .map(|m| content_text(m.get("content")))
            .collect();
        if !results.is_empty() {
            p.tool_results = Some(results.into_iter().rev().collect());
        }

        p.stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
        p.include_usage = obj
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        p.max_tokens = obj
            .get("max_completion_tokens")
            .or_else(|| obj.get("max_tokens"))
            .and_then(Value::as_u64);
        p.stop = match obj.get("stop") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        p.tools = obj
            .get("tools")
            .and_then(Value::as_array)
            .map(|ts| {
                ts.iter()
                    .filter_map(|t| t.get("function"))
                    .filter_map(|f| {
                        Some(Tool {
                            name: f.get("name")?.as_str()?.to_owned(),
                            schema: f.get("parameters").cloned().unwrap_or(Value::Null),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        p.tool_choice = tool_choice(obj.get("tool_choice"), "/function/name");
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        // (status, message, type, code) as the real API sends them.
        if let Failure::Param {
            message,
            param,
            code,
        } = failure
        {
            let body = json!({"error": {"message": message, "type": "invalid_request_error",
                                        "param": param, "code": code}});
            return Reply {
                status: 400,
                body: to_json(&body),
                retry_after: None,
            };
        }
        let (status, message, kind, code): (u16, String, &str, Option<&str>) = match failure {
            Failure::Auth(m) => (
                401,
                m.clone(),
                "invalid_request_error",
                Some("invalid_api_key"),
            ),
            Failure::Invalid(m) | Failure::Param { message: m, .. } => {
                (400, m.clone(), "invalid_request_error", None)
            }
            Failure::ContextLength => (
                400,
                "This model's maximum context length is 128000 tokens. However, your messages \
                 resulted in 250000 tokens. Please reduce the length of the messages."
                    .into(),
                "invalid_request_error",
                Some("context_length_exceeded"),
            ),
            Failure::Status(s) => match s {
                400 => (
                    400,
                    "Invalid request.".into(),
                    "invalid_request_error",
                    None,
                ),
                401 => (
                    401,
                    "Incorrect API key provided: sk-mock. You can find your API key at \
                     https://platform.openai.com/account/api-keys."
                        .into(),
                    "invalid_request_error",
                    Some("invalid_api_key"),
                ),
                403 => (
                    403,
                    "Country, region, or territory not supported".into(),
                    "request_forbidden",
                    Some("unsupported_country_region_territory"),
                ),
                404 => (
                    404,
                    "The model does not exist or you do not have access to it.".into(),
                    "invalid_request_error",
                    Some("model_not_found"),
                ),
                413 => (
                    413,
                    "Request too large.".into(),
                    "invalid_request_error",
                    None,
                ),
                429 => (
                    429,
                    "Rate limit reached for requests. Please try again in 7s.".into(),
                    "requests",
                    Some("rate_limit_exceeded"),
                ),
                500 => (
                    500,
                    "The server had an error while processing your request. Sorry about that!"
                        .into(),
                    "server_error",
                    None,
                ),
                // OpenAI has no 529: overload is a 503.
                _ => (
                    503,
                    "The server is overloaded or not ready yet.".into(),
                    "server_error",
                    None,
                ),
            },
        };
        let body =
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
        Reply {
            status,
            body: to_json(&body),
            retry_after: (status == 429).then_some("7"),
        }
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        let mut message = json!({"role": "assistant", "content": a.text, "refusal": null});
        if !a.tool_calls.is_empty() {
            // With tool calls (and no text) OpenAI sends content null.
            if a.text.is_empty() {
                message["content"] = Value::Null;
            }
            message["tool_calls"] = a
                .tool_calls
                .iter()
                .map(|c| {
                    json!({"id": format!("call_{}", c.n), "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments_json}})
                })
                .collect();
        }
        json!({
            "id": format!("chatcmpl-mock{}", meta.seq),
            "object": "chat.completion",
            "created": meta.created,
            "model": p.model,
            // Each choice the same planned answer, under its index.
            "choices": (0..p.choices()).map(|i| json!({
                "index": i,
                "message": message,
                "logprobs": null,
                "finish_reason": finish_reason(&a.finish),
            })).collect::<Vec<_>>(),
            "usage": usage(p, a),
            "service_tier": "default",
            "system_fingerprint": FINGERPRINT,
        })
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        let mut events = Vec::with_capacity(a.chunks.len() + 8);
        let first_content = if a.tool_calls.is_empty() || !a.text.is_empty() {
            json!("")
        } else {
            Value::Null
        };
        // Several choices (`n`) interleave, each chunk naming its choice.
        let choices = 0..p.choices();
        for choice in choices.clone() {
            events.push(self.delta_of(
                p,
                meta,
                choice,
                json!({"role": "assistant", "content": first_content}),
                None,
            ));
        }
        for c in &a.chunks {
            for choice in choices.clone() {
                let mut e = self.delta_of(p, meta, choice, json!({"content": c}), None);
                e.delta = true;
                events.push(e);
            }
        }
        for (i, call) in a.tool_calls.iter().enumerate() {
            for choice in choices.clone() {
                let start = json!({"tool_calls": [{
                    "index": i, "id": format!("call_{}", call.n), "type": "function",
                    "function": {"name": call.name, "arguments": ""}}]});
                let mut e = self.delta_of(p, meta, choice, start, None);
                e.delta = true;
                events.push(e);
            }
            for frag in fragments(&call.arguments_json) {
                for choice in choices.clone() {
                    let d = json!({"tool_calls": [{"index": i, "function": {"arguments": frag}}]});
                    let mut e = self.delta_of(p, meta, choice, d, None);
                    e.delta = true;
                    events.push(e);
                }
            }
        }
        for choice in choices {
            let finish = Some(finish_reason(&a.finish));
            events.push(self.delta_of(p, meta, choice, json!({}), finish));
        }
        if p.include_usage {
            events.push(self.chunk(p, meta, json!([]), Some(usage(p, a))));
        }
        events.push(SseEvent {
            name: None,
            data: "[DONE]".into(),
            delta: false,
        });
        events
    }

    fn stream_error(&self) -> SseEvent {
        SseEvent {
            name: None,
            data: r#"{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}"#.into(),
            delta: false,
        }
    }
}

/// OpenAI's `tool_choice`: `none`, `required`, a named tool (its name at
/// `name_at`: chat nests it under `function`, the Responses API does not),
/// else `auto`.
pub fn tool_choice(v: Option<&Value>, name_at: &str) -> ToolChoice {
    match v {
        Some(Value::String(s)) if s == "none" => ToolChoice::None,
        Some(Value::String(s)) if s == "required" => ToolChoice::Any,
        Some(v @ Value::Object(_)) => v
            .pointer(name_at)
            .and_then(Value::as_str)
            .map_or(ToolChoice::Any, |n| ToolChoice::Named(n.to_owned())),
        _ => ToolChoice::Auto,
    }
}
