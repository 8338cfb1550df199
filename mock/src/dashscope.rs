//! Alibaba DashScope native generation
//! (`POST /api/v1/services/aigc/text-generation/generation` and
//! `multimodal-generation`): Bearer key, `input.messages` + `parameters`
//! with `result_format: "message"`, SSE streams (`X-DashScope-SSE: enable`)
//! of `id:`/`event:result`/`:HTTP_STATUS/200`/`data:` events, errors
//! `{"code","message","request_id"}`, DataInspectionFailed for filtered content.
//!
//! Over 600 lines only with its tests (about 560 lines of code).

use serde_json::{json, Value};

use crate::answer::{fragments, reasoning_text, word_chunks, Answer, Finish};
use crate::dialect::{
    count_words, to_json, Dialect, Failure, Filtered, Meta, Prompt, Reply, SseEvent, Tool,
    ToolChoice,
};
use crate::http::Request;
use crate::keys;
use crate::scenario::Filter;

pub struct DashScope;

const TEXT_PATH: &str = "/api/v1/services/aigc/text-generation/generation";
const MULTIMODAL_PATH: &str = "/api/v1/services/aigc/multimodal-generation/generation";
const INPUT_FILTERED: &str = "Input data may contain inappropriate content.";
const OUTPUT_FILTERED: &str = "Output data may contain inappropriate content.";

fn invalid(msg: impl Into<String>) -> Failure {
    Failure::Invalid(msg.into())
}

/// The request body's members and `parameters` of the DashScope API
/// reference for Qwen (help.aliyun.com/zh/model-studio/qwen-api-reference,
/// "DashScope" request body); others are refused as InvalidParameter.
const BODY_KEYS: [&str; 3] = ["model", "input", "parameters"];
const PARAMETERS: &[&str] = &[
    "result_format",
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "max_input_tokens",
    "seed",
    "stop",
    "repetition_penalty",
    "presence_penalty",
    "enable_search",
    "search_options",
    "incremental_output",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "enable_thinking",
    "thinking_budget",
    "n",
    "logprobs",
    "top_logprobs",
    "translation_options",
    "vl_high_resolution_images",
    "enable_code_interpreter",
];

/// Qwen's multimodal models (qwen-vl-*, qwen3-vl-*, qvq-*, qwen-omni-*,
/// qwen-audio-*), the only ones the multimodal-generation endpoint serves;
/// text models answer on text-generation only.
pub fn multimodal_model(model: &str) -> bool {
    ["-vl", "qvq", "omni", "-audio"]
        .iter()
        .any(|m| model.contains(m))
}

fn request_id(meta: Meta) -> String {
    format!(
        "mock-ds-{:08x}-0000-0000-0000-{:012x}",
        meta.created, meta.seq
    )
}

fn error_body(code: &str, message: &str, request_id: &str) -> String {
    to_json(&json!({"code": code, "message": message, "request_id": request_id}))
}

/// Text of a message's content: a string, or `[{"text"}, {"image"}]` parts.
fn content_text(content: Option<&Value>, multimodal: bool, at: &str) -> Result<String, Failure> {
    match content {
        Some(Value::String(s)) if !multimodal => Ok(s.clone()),
        Some(Value::Array(parts)) if multimodal => {
            let mut texts = Vec::new();
            for part in parts {
                match (part.get("text").and_then(Value::as_str), part.get("image")) {
                    (Some(t), None) => texts.push(t),
                    (None, Some(Value::String(url)))
                        if url.starts_with("http") || url.starts_with("data:image/") => {}
                    _ => {
                        return Err(invalid(format!(
                        "{at}: each content item must be {{\"text\": ...}} or {{\"image\": url}}"
                    )))
                    }
                }
            }
            Ok(texts.join(" "))
        }
        Some(Value::Array(_)) => Err(invalid(format!(
            "{at}: content must be a string for text generation models"
        ))),
        Some(_) if multimodal => Err(invalid(format!(
            "{at}: content must be a list for multimodal models"
        ))),
        _ => Err(invalid(format!("{at}: content must be a string"))),
    }
}

fn parse_tools(params: &Value) -> Result<(Vec<Tool>, ToolChoice), Failure> {
    let tools = match params.get("tools") {
        None => Vec::new(),
        Some(Value::Array(tools)) => tools
            .iter()
            .map(|t| {
                let f = t
                    .get("function")
                    .filter(|_| t.get("type").and_then(Value::as_str) == Some("function"))
                    .ok_or_else(|| {
                        invalid("parameters.tools: each tool needs type function and a function")
                    })?;
                let name = f
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid("parameters.tools: function.name is required"))?;
                Ok(Tool {
                    name: name.to_owned(),
                    schema: f.get("parameters").cloned().unwrap_or(Value::Null),
                })
            })
            .collect::<Result<_, Failure>>()?,
        Some(_) => return Err(invalid("parameters.tools must be a list")),
    };
    let choice = match params.get("tool_choice") {
        None => ToolChoice::Auto,
        Some(Value::String(s)) if s == "auto" => ToolChoice::Auto,
        Some(Value::String(s)) if s == "none" => ToolChoice::None,
        Some(v) => match v
            .get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
        {
            Some(name) => ToolChoice::Named(name.to_owned()),
            None => {
                return Err(invalid(
                    "parameters.tool_choice must be auto, none or a function",
                ))
            }
        },
    };
    Ok((tools, choice))
}

fn finish(f: &Finish) -> &'static str {
    match f {
        Finish::Stop | Finish::StopSequence(_) | Finish::ContentFilter | Finish::PauseTurn => {
            "stop"
        }
        Finish::Length => "length",
        Finish::ToolCalls => "tool_calls",
    }
}

/// Qwen counts its thinking in the output tokens.
fn output_tokens(p: &Prompt, a: &Answer) -> u64 {
    a.completion_tokens + if p.reasoning { a.reasoning_tokens } else { 0 }
}

fn usage(a: &Answer, output_tokens: u64) -> Value {
    let mut u = json!({"input_tokens": a.prompt_tokens, "output_tokens": output_tokens,
                       "total_tokens": a.prompt_tokens + output_tokens});
    if a.cached_tokens > 0 {
        u["prompt_tokens_details"] = json!({"cached_tokens": a.cached_tokens});
    }
    if a.reasoning_tokens > 0 {
        u["output_tokens_details"] = json!({"reasoning_tokens": a.reasoning_tokens});
    }
    u
}

/// Qwen's thinking (alibabacloud.com/help/en/model-studio/deep-thinking):
/// the hybrid models (Qwen3, qwen-plus, qwen-flash, qwen-turbo) take
/// `enable_thinking`, the thinking-only ones (QwQ, `-thinking`) always
/// think; `thinking_budget` a positive count. The open-source Qwen3 models
/// think by default and only in streams: a non-stream call must turn
/// thinking off. True when the answer carries reasoning.
fn check_thinking(body: &Value, model: &str, stream: bool) -> Result<bool, Failure> {
    let params = body.get("parameters");
    let enable = params.and_then(|p| p.get("enable_thinking"));
    if enable.is_some_and(|e| !e.is_boolean()) {
        return Err(invalid("parameters.enable_thinking must be a boolean"));
    }
    let budget = params.and_then(|p| p.get("thinking_budget"));
    if budget.is_some_and(|b| b.as_u64().is_none_or(|b| b == 0)) {
        return Err(invalid(
            "parameters.thinking_budget must be a positive integer",
        ));
    }
    let thinking_only = model.starts_with("qwq") || model.contains("-thinking");
    let hybrid = ["qwen3", "qwen-plus", "qwen-flash", "qwen-turbo"]
        .iter()
        .any(|m| model.starts_with(m));
    let open_source = model.starts_with("qwen3-") && !model.starts_with("qwen3-max");
    let asked = enable.and_then(Value::as_bool);
    if asked == Some(true) && !(hybrid || thinking_only) {
        return Err(invalid(format!(
            "The model `{model}` does not support parameter enable_thinking."
        )));
    }
    let thinks = thinking_only || asked.unwrap_or(open_source);
    if thinks && !stream && (open_source || thinking_only) {
        return Err(invalid(
            "parameter.enable_thinking must be set to false for non-streaming calls",
        ));
    }
    Ok(thinks)
}

impl Dialect for DashScope {
    fn name(&self) -> &'static str {
        "dashscope"
    }

    fn handles(&self, path: &str) -> bool {
        path.ends_with(TEXT_PATH) || path.ends_with(MULTIMODAL_PATH)
    }

    fn is_stream(&self, req: &Request, _body: &Value) -> bool {
        req.header("x-dashscope-sse")
            .is_some_and(|v| v.eq_ignore_ascii_case("enable"))
    }

    /// `id:N`, `event:result` (or `error`), `:HTTP_STATUS/N`, `data:` — no spaces.
    fn encode_event(&self, index: usize, e: &SseEvent, crlf: bool, out: &mut Vec<u8>) {
        let nl = if crlf { "\r\n" } else { "\n" };
        let name = e.name.unwrap_or("result");
        let status = match name {
            "result" => 200,
            _ if e.data.contains("DataInspectionFailed") => 400,
            _ => 500,
        };
        out.extend_from_slice(
            format!(
                "id:{}{nl}event:{name}{nl}:HTTP_STATUS/{status}{nl}data:{}{nl}{nl}",
                index + 1,
                e.data
            )
            .as_bytes(),
        );
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        match req
            .header("authorization")
            .and_then(|a| a.strip_prefix("Bearer "))
        {
            Some(key) if keys::matches("dashscope", key) => Ok(()),
            _ => Err(Failure::Auth("Invalid API-key provided.".into())),
        }
    }

    fn parse_request(&self, req: &Request, body: &Value) -> Result<Prompt, Failure> {
        if let Some(obj) = body.as_object() {
            if let Some(extra) = obj.keys().find(|k| !BODY_KEYS.contains(&k.as_str())) {
                return Err(invalid(format!("Parameter {extra} is not supported.")));
            }
        }
        if let Some(params) = body.get("parameters").and_then(Value::as_object) {
            if let Some(extra) = params.keys().find(|k| !PARAMETERS.contains(&k.as_str())) {
                return Err(invalid(format!(
                    "parameters.{extra}: parameter {extra} is not supported."
                )));
            }
            // Qwen's web search switch (alibabacloud.com/help/en/model-studio/web-search).
            if params.get("enable_search").is_some_and(|v| !v.is_boolean()) {
                return Err(invalid("parameters.enable_search must be a boolean"));
            }
        }
        let model = body.get("model").and_then(Value::as_str).unwrap_or("");
        let on_multimodal = req.path().ends_with(MULTIMODAL_PATH);
        if !model.is_empty() && on_multimodal != multimodal_model(model) {
            let (api, other) = if on_multimodal {
                ("multimodal-generation", "text-generation")
            } else {
                ("text-generation", "multimodal-generation")
            };
            return Err(invalid(format!(
                "The model `{model}` is not supported by the {api} API; use {other}."
            )));
        }
        let mut p = self.parse(body)?;
        p.reasoning = check_thinking(body, model, self.is_stream(req, body))?;
        Ok(p)
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| invalid("Model not specified"))?;
        let messages = body
            .get("input")
            .and_then(|i| i.get("messages"))
            .and_then(Value::as_array)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| invalid("input.messages is required and must not be empty"))?;
        let params = body.get("parameters").cloned().unwrap_or(json!({}));
        if params.get("result_format").and_then(Value::as_str) != Some("message") {
            return Err(invalid(
                "parameters.result_format: this mock answers only result_format \"message\"",
            ));
        }
        // Multimodal requests carry content lists (`[{"text"}, {"image"}]`).
        let multimodal = messages
            .iter()
            .any(|m| m.get("content").is_some_and(Value::is_array));
        let (tools, tool_choice) = parse_tools(&params)?;
        let json = match params
            .get("response_format")
            .and_then(|f| f.get("type"))
            .and_then(Value::as_str)
        {
            Some("json_object") => Some(None),
            Some("json_schema") => Some(
                params
                    .pointer("/response_format/json_schema/schema")
                    .cloned(),
            ),
            _ => None,
        };
        let mut p = Prompt {
            json,
            model: model.to_owned(),
            max_tokens: params.get("max_tokens").and_then(Value::as_u64),
            stop: match params.get("stop") {
                Some(Value::String(s)) => vec![s.clone()],
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                _ => Vec::new(),
            },
            tools,
            tool_choice,
            ..Prompt::default()
        };
        let mut results = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let at = format!("input.messages[{i}]");
            let role = m.get("role").and_then(Value::as_str).unwrap_or("");
            let text = match role {
                "assistant" if m.get("content").is_none_or(|c| c.as_str() == Some("")) => {
                    String::new()
                }
                "system" | "user" | "assistant" | "tool" => {
                    content_text(m.get("content"), multimodal, &at)?
                }
                _ => {
                    return Err(invalid(format!(
                        "{at}.role must be one of system, user, assistant, tool"
                    )))
                }
            };
            p.prompt_words += count_words(&text);
            match role {
                "tool" => {
                    if m.get("tool_call_id")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        return Err(invalid(format!(
                            "{at}.tool_call_id is required for tool messages"
                        )));
                    }
                    results.push(text);
                }
                "user" => {
                    results.clear();
                    p.last_user_text = text;
                }
                "assistant" => {
                    results.clear();
                    p.prior_tool_calls += m
                        .get("tool_calls")
                        .and_then(Value::as_array)
                        .map_or(0, |c| c.len() as u64);
                }
                _ => {}
            }
        }
        if !results.is_empty() {
            p.tool_results = Some(results);
        }
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        let (status, code, message): (u16, &str, String) = match failure {
            Failure::Auth(m) => (401, "InvalidApiKey", m.clone()),
            Failure::Invalid(m) | Failure::Param { message: m, .. } => {
                (400, "InvalidParameter", m.clone())
            }
            Failure::ContextLength => (
                400,
                "InvalidParameter",
                "Range of input length should be [1, 30720]".into(),
            ),
            Failure::Status(s) => {
                let (code, message) = match s {
                    400 => ("InvalidParameter", "Required parameter(s) missing or invalid, please check the request parameters."),
                    401 => ("InvalidApiKey", "Invalid API-key provided."),
                    403 => ("AccessDenied", "Access denied."),
                    404 => ("ModelNotFound", "Model not exist."),
                    413 => ("RequestTooLarge", "Request entity too large."),
                    429 => ("Throttling.RateQuota", "Requests rate limit exceeded, please try again later."),
                    500 => ("InternalError", "An internal error has occured, please try again later or contact service support."),
                    _ => ("ServiceUnavailable", "The service is temporarily unavailable, please try again later."),
                };
                (if *s == 529 { 503 } else { *s }, code, message.to_owned())
            }
        };
        Reply {
            status,
            body: error_body(code, &message, "mock-ds-error"),
            retry_after: None,
        }
    }

    /// Inspection failures are 400 errors: for the prompt, and for a whole
    /// (non-stream) answer; a stream is stopped with an `event:error` instead.
    fn filtered(&self, filter: Filter, p: &Prompt, meta: Meta) -> Option<Filtered> {
        let message = match filter {
            Filter::BlockedPrompt => INPUT_FILTERED,
            Filter::FilteredAnswer if !p.stream => OUTPUT_FILTERED,
            _ => return None,
        };
        Some(Filtered::Reply(Reply {
            status: 400,
            body: error_body("DataInspectionFailed", message, &request_id(meta)),
            retry_after: None,
        }))
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        let multimodal = p.model.contains("-vl");
        let content = if multimodal {
            json!([{"text": a.text}])
        } else {
            json!(a.text)
        };
        let mut message = json!({"role": "assistant", "content": content});
        if p.reasoning {
            message["reasoning_content"] = json!(reasoning_text(p));
        }
        if !a.tool_calls.is_empty() {
            let calls: Vec<Value> = a
                .tool_calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    json!({"index": i, "id": format!("call_{}", c.n), "type": "function",
                                     "function": {"name": c.name, "arguments": c.arguments_json}})
                })
                .collect();
            message["tool_calls"] = json!(calls);
        }
        json!({
            "output": {"choices": [{"finish_reason": finish(&a.finish), "message": message}]},
            "usage": usage(a, output_tokens(p, a)),
            "request_id": request_id(meta),
        })
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        let id = request_id(meta);
        let mut produced = 0;
        let mut events = Vec::new();
        let mut push = |message: Value, finish_reason: &str, delta: bool, produced: u64| {
            events.push(SseEvent {
                name: Some("result"),
                data: to_json(&json!({
                    "output": {"choices": [{"message": message, "finish_reason": finish_reason}]},
                    "usage": usage(a, produced),
                    "request_id": id,
                })),
                delta,
            });
        };
        // The thinking first, in `reasoning_content` deltas with empty content.
        let thought = if p.reasoning {
            reasoning_text(p)
        } else {
            String::new()
        };
        for piece in word_chunks(&thought) {
            produced += count_words(&piece);
            push(
                json!({"role": "assistant", "content": "", "reasoning_content": piece}),
                "null",
                true,
                produced,
            );
        }
        for c in &a.chunks {
            produced += count_words(c);
            push(
                json!({"role": "assistant", "content": c}),
                "null",
                true,
                produced,
            );
        }
        for (i, call) in a.tool_calls.iter().enumerate() {
            for (k, frag) in fragments(&call.arguments_json).into_iter().enumerate() {
                // The first fragment names the call; later ones carry only arguments.
                let tool_call = if k == 0 {
                    json!({"index": i, "id": format!("call_{}", call.n), "type": "function",
                           "function": {"name": call.name, "arguments": frag}})
                } else {
                    json!({"index": i, "id": "", "type": "function", "function": {"arguments": frag}})
                };
                push(
                    json!({"role": "assistant", "content": "", "tool_calls": [tool_call]}),
                    "null",
                    true,
                    produced,
                );
            }
        }
        if a.finish == Finish::ContentFilter {
            events.push(SseEvent {
                name: Some("error"),
                data: error_body("DataInspectionFailed", OUTPUT_FILTERED, &id),
                delta: false,
            });
            return events;
        }
        push(
            json!({"role": "assistant", "content": ""}),
            finish(&a.finish),
            false,
            output_tokens(p, a),
        );
        events
    }

    fn stream_error(&self) -> SseEvent {
        SseEvent {
            name: Some("error"),
            data: error_body(
                "InternalError",
                "An internal error has occured, please try again later or contact service support.",
                "mock-ds-error",
            ),
            delta: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_rules() {
        let params = |p: Value| json!({"parameters": p});
        assert_eq!(
            check_thinking(
                &params(json!({"enable_thinking": true})),
                "qwen-plus",
                false
            ),
            Ok(true)
        );
        assert_eq!(
            check_thinking(&params(json!({})), "qwen-plus", false),
            Ok(false)
        );
        assert_eq!(
            check_thinking(&params(json!({})), "qwen3-32b", true),
            Ok(true),
            "open-source Qwen3 thinks by default"
        );
        assert_eq!(
            check_thinking(
                &params(json!({"enable_thinking": false})),
                "qwen3-32b",
                false
            ),
            Ok(false)
        );
        assert_eq!(
            check_thinking(&params(json!({})), "qwq-plus", true),
            Ok(true)
        );
        for (p, model, stream) in [
            (json!({}), "qwen3-32b", false),
            (json!({}), "qwq-plus", false),
            (json!({"enable_thinking": true}), "qwen-vl-plus", true),
            (json!({"enable_thinking": "yes"}), "qwen-plus", true),
            (
                json!({"enable_thinking": true, "thinking_budget": 0}),
                "qwen-plus",
                true,
            ),
        ] {
            assert!(
                check_thinking(&params(p.clone()), model, stream).is_err(),
                "{p} {model}"
            );
        }
    }
}
