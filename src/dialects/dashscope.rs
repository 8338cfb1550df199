//! Alibaba DashScope native text generation
//! (`POST /api/v1/services/aigc/text-generation/generation`, and
//! `multimodal-generation` when the request carries images).
//!
//! Always `result_format: "message"` (OpenAI-like choices); streams are SSE
//! with `X-DashScope-SSE: enable` and `incremental_output: true`, one
//! `event:result` per delta with cumulative usage, `event:error` on failure.
//!
//! Over 600 lines only with its tests (about 540 lines of code).

use std::borrow::Cow;

use serde_json::json;

use super::transport::{self, Operation};
use super::{
    encode_json, fallback_message, unparseable, DecodedResponse, Dialect, Events, SseStream,
    StreamDecoder, Target, UpstreamRequest,
};
use crate::error::{ErrorCode, GatewayError};
use crate::formats::sse::SseParser;
use crate::model::request::{
    ChatRequest, Content, ContentPart, Effort, Message, ResponseFormat, Thinking, ToolChoice,
};
use crate::model::response::{Completion, FinishReason, Origin, ToolCallOut};
use crate::model::stream::{EventWriter, Reasoning};
use crate::wire::dashscope::*;
use crate::wire::openai_chat::{OutResponseFormat, OutToolCalls, OutTools};

pub struct DashScope;

pub const TEXT_PATH: &str = "/api/v1/services/aigc/text-generation/generation";
pub const MULTIMODAL_PATH: &str = "/api/v1/services/aigc/multimodal-generation/generation";
/// Its embeddings API (the native one, as for generations).
pub const EMBEDDINGS_PATH: &str = "/api/v1/services/embeddings/text-embedding/text-embedding";

/// Qwen's thinking switch (alibabacloud.com/help/en/model-studio/deep-thinking):
/// `enable_thinking` (effort `none`: false; any other effort, or a budget:
/// true) and the budget as `thinking_budget`. Qwen has no effort levels,
/// so an effort only turns thinking on; which models think, and that most
/// think only in streams, is the vendor's to refuse.
fn thinking(req: &ChatRequest) -> (Option<bool>, Option<u32>) {
    match req.reasoning {
        None => (None, None),
        Some(r) if r.effort == Some(Effort::None) && r.budget_tokens.is_none() => {
            (Some(false), None)
        }
        Some(r) => (Some(true), r.budget_tokens),
    }
}

static NO_CONTENT: Content = Content::Text(String::new());

fn content(content: &Content, multimodal: bool) -> OutContent<'_> {
    match content {
        Content::Text(t) if multimodal => OutContent::Parts(vec![OutPart::Text { text: t }]),
        Content::Text(t) => OutContent::Text(Cow::Borrowed(t)),
        Content::Parts(_) if !multimodal => OutContent::Text(Cow::Owned(content.text())),
        Content::Parts(parts) => OutContent::Parts(
            parts
                .iter()
                .map(|p| match p {
                    ContentPart::Text { text, .. } => OutPart::Text { text },
                    ContentPart::ImageUrl { image_url, .. } => OutPart::Image {
                        image: &image_url.url,
                    },
                    // Refused before encoding (`refuse_documents`).
                    ContentPart::Document(_) => OutPart::Text { text: "" },
                })
                .collect(),
        ),
    }
}

/// Models DashScope serves on its multimodal endpoint.
fn is_vision_model(model: &str) -> bool {
    ["-vl", "qvq", "omni", "-audio"]
        .iter()
        .any(|m| model.contains(m))
}

impl Dialect for DashScope {
    fn web_search(&self, req: &ChatRequest, _model: &str) -> bool {
        req.web_search
            .as_ref()
            .is_some_and(|s| s.allowed_domains.is_empty())
    }

    fn encode_request(
        &self,
        req: &ChatRequest,
        target: &Target,
    ) -> Result<UpstreamRequest, GatewayError> {
        super::single_choice(req)?;
        super::refuse_documents(req)?;
        let multimodal = req.has_images();
        // Images go to the multimodal endpoint, which takes vision models only.
        if multimodal && !is_vision_model(target.model) {
            return Err(GatewayError::invalid(
                "messages",
                format!(
                    "the DashScope model {} takes no images: map a vision model (qwen-vl-*, qvq-*, qwen-omni-*) in the provider's models for requests with images",
                    target.model
                ),
            ));
        }
        let messages = req
            .messages
            .iter()
            .map(|m| {
                let (role, c) = match m {
                    Message::System { content, .. } | Message::Developer { content, .. } => {
                        ("system", Some(content))
                    }
                    Message::User { content, .. } => ("user", Some(content)),
                    Message::Assistant { content, .. } => ("assistant", content.as_ref()),
                    Message::Tool { content, .. } => ("tool", Some(content)),
                };
                OutMessage {
                    role,
                    // An assistant turn with only tool calls has empty content.
                    content: content(c.unwrap_or(&NO_CONTENT), multimodal),
                    tool_calls: OutToolCalls(match m {
                        Message::Assistant { tool_calls, .. } => tool_calls,
                        _ => &[],
                    }),
                    tool_call_id: match m {
                        Message::Tool { tool_call_id, .. } => Some(tool_call_id),
                        _ => None,
                    },
                }
            })
            .collect();
        let tool_choice = match &req.tool_choice {
            _ if req.tools.is_empty() => None,
            None => None,
            Some(ToolChoice::Auto) => Some(json!("auto")),
            Some(ToolChoice::None) => Some(json!("none")),
            // DashScope has no "required": naming the only tool forces it; otherwise auto.
            Some(ToolChoice::Required) => match req.tools.as_slice() {
                [only] => {
                    Some(json!({"type": "function", "function": {"name": only.function.name}}))
                }
                _ => Some(json!("auto")),
            },
            Some(ToolChoice::Function(name)) => {
                Some(json!({"type": "function", "function": {"name": name}}))
            }
        };
        let (enable_thinking, thinking_budget) = thinking(req);
        let request = Request {
            model: target.model,
            input: Input { messages },
            parameters: Parameters {
                result_format: "message",
                temperature: req.temperature,
                top_p: req.top_p,
                top_k: req.top_k,
                max_tokens: req.max_output_tokens(),
                stop: &req.stop,
                seed: req.seed,
                // Qwen has a presence penalty; its `repetition_penalty` is
                // another scale, not OpenAI's frequency penalty.
                presence_penalty: req
                    .extra
                    .get("presence_penalty")
                    .and_then(serde_json::Value::as_f64),
                tools: OutTools(&req.tools),
                tool_choice,
                parallel_tool_calls: req.parallel_tool_calls.filter(|_| !req.tools.is_empty()),
                response_format: req
                    .response_format
                    .as_ref()
                    .filter(|f| !matches!(f, ResponseFormat::Text))
                    .map(OutResponseFormat),
                incremental_output: req.stream,
                enable_thinking,
                thinking_budget,
                enable_search: self.web_search(req, target.model),
            },
        };
        let body = encode_json(req, &request)?;
        let stream = req.stream;
        let op = if multimodal {
            Operation::GenerateMultimodal { stream }
        } else {
            Operation::Generate { stream }
        };
        transport::request(op, target, body)
    }

    fn decode_response(
        &self,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        let response: Response =
            serde_json::from_slice(body).map_err(|e| unparseable("response", e))?;
        // A 200 may still carry an error code (DataInspectionFailed, ...).
        if let Some(code) = response.code.as_deref().filter(|c| !c.is_empty()) {
            let message = response.message.as_deref().unwrap_or(code);
            return Err(GatewayError::new(error_code(code, 400, message), message));
        }
        let output = response
            .output
            .ok_or_else(|| unparseable("response", "no output"))?;
        let choice = output
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| unparseable("response", "no choices"))?;
        if let Some(id) = response.request_id {
            origin.id = id;
        }
        let tool_calls = choice
            .message
            .tool_calls
            .into_iter()
            .map(|c| {
                ToolCallOut::new(
                    c.id.unwrap_or_default(),
                    c.function.name.unwrap_or_default(),
                    c.function.arguments,
                )
            })
            .collect();
        let usage = response.usage.map(DashScopeUsage::unified);
        let reasoning = choice
            .message
            .reasoning_content
            .filter(|t| !t.is_empty())
            .map(|text| Thinking {
                text,
                ..Thinking::default()
            });
        let completion = Completion {
            reasoning: reasoning.into_iter().collect(),
            content: choice.message.content.map(MessageContent::into_text),
            tool_calls,
            finish_reason: choice.finish_reason.as_deref().and_then(finish_reason),
            usage,
            more: Vec::new(),
        };
        Ok(DecodedResponse::decoded(completion))
    }

    fn embedder(&self) -> Option<&dyn crate::dialects::embed::Embedder> {
        Some(&crate::dialects::embed::dashscope::DashScope)
    }

    fn stream_decoder(&self, writer: EventWriter) -> Box<dyn StreamDecoder> {
        Box::new(SseStream::new(writer, DashScopeEvents))
    }

    fn decode_error(&self, status: u16, body: &[u8]) -> GatewayError {
        match serde_json::from_slice::<VendorError>(body) {
            Ok(e) if !e.code.is_empty() => {
                let message = e.message.unwrap_or_else(|| e.code.clone());
                GatewayError::new(error_code(&e.code, status, &message), message)
            }
            _ => GatewayError::new(
                ErrorCode::from_status(status),
                fallback_message(status, body),
            ),
        }
    }
}

/// `None` for DashScope's "null" (a stream event that does not finish).
pub fn finish_reason(reason: &str) -> Option<FinishReason> {
    match reason {
        "" | "null" => None,
        "length" => Some(FinishReason::Length),
        "tool_calls" => Some(FinishReason::ToolCalls),
        "content_filter" => Some(FinishReason::ContentFilter),
        _ => Some(FinishReason::Stop),
    }
}

/// The unified code for a DashScope error `code`.
pub fn error_code(code: &str, status: u16, message: &str) -> ErrorCode {
    let lower = message.to_ascii_lowercase();
    match code {
        "DataInspectionFailed" | "data_inspection_failed" => ErrorCode::ContentFiltered,
        "InvalidApiKey" | "invalid_api_key" => ErrorCode::AuthFailed,
        "InvalidParameter" | "invalid_parameter_error"
            if lower.contains("input length") || lower.contains("too long") =>
        {
            ErrorCode::ContextLengthExceeded
        }
        "InvalidParameter" | "invalid_parameter_error" => ErrorCode::InvalidRequest,
        "ModelNotFound" | "model_not_found" => ErrorCode::ModelNotFound,
        "RequestTimeOut" => ErrorCode::UpstreamTimeout,
        c if c.starts_with("Throttling") => ErrorCode::UpstreamRateLimit,
        c if c.starts_with("AccessDenied") => ErrorCode::PermissionDenied,
        _ => ErrorCode::from_status(status),
    }
}

// --- stream -----------------------------------------------------------------

struct DashScopeEvents;

impl Events<SseParser> for DashScopeEvents {
    fn on_event(
        &mut self,
        (event, data): (&str, &str),
        w: &mut EventWriter,
        out: &mut Vec<u8>,
    ) -> Result<(), GatewayError> {
        if event == "error" {
            let e: VendorError =
                serde_json::from_str(data).map_err(|e| unparseable("stream error", e))?;
            let message = e.message.unwrap_or_else(|| e.code.clone());
            let code = error_code(&e.code, 500, &message);
            // The output filter after content started ends the answer as
            // every dialect's does: finish_reason content_filter, [DONE].
            if code == ErrorCode::ContentFiltered && w.content_started() {
                w.finish(out, FinishReason::ContentFilter);
                w.done(out);
                return Ok(());
            }
            return Err(GatewayError::new(code, message));
        }
        let response: Response =
            serde_json::from_str(data).map_err(|e| unparseable("stream event", e))?;
        if let Some(code) = response.code.as_deref().filter(|c| !c.is_empty()) {
            let message = response.message.as_deref().unwrap_or(code);
            return Err(GatewayError::new(error_code(code, 500, message), message));
        }
        if let Some(id) = response.request_id.filter(|_| !w.finished()) {
            w.set_id(&id);
        }
        if let Some(usage) = response.usage {
            w.set_usage(Some(usage.unified()));
        }
        let Some(choice) = response.output.and_then(|o| o.choices.into_iter().next()) else {
            return Ok(());
        };
        if let Some(thought) = &choice.message.reasoning_content {
            w.reasoning(out, Reasoning::Text(thought));
        }
        if let Some(text) = choice.message.content.map(MessageContent::into_text) {
            w.content(out, &text);
        }
        for call in choice.message.tool_calls {
            let next = w.tool_calls();
            let key = call
                .index
                .unwrap_or(u64::try_from(next).unwrap_or(u64::MAX));
            if !w.has_tool_call(key) {
                let id = call
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{next}"));
                let name = call.function.name.as_deref().unwrap_or_default();
                w.tool_call_start(out, key, &id, name);
            }
            w.tool_call_arguments(out, key, &call.function.arguments);
        }
        if let Some(reason) = choice.finish_reason.as_deref().and_then(finish_reason) {
            w.finish(out, reason);
            w.done(out);
        }
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::Value;

    fn encode(body: &str) -> (UpstreamRequest, Value) {
        let model = if body.contains("image_url") {
            "qwen-vl-plus"
        } else {
            "qwen-plus"
        };
        encode_for(body, model).unwrap()
    }

    fn encode_for(body: &str, model: &str) -> Result<(UpstreamRequest, Value), GatewayError> {
        let provider = r#"{"dialect":"dashscope","api_key":"sk-ds"}"#;
        let (up, v) = crate::dialects::encode_for(&DashScope, provider, model, body)?;
        assert!(up
            .headers
            .contains(&("authorization", "Bearer sk-ds".into())));
        Ok((up, v))
    }

    #[test]
    fn encodes_text_request() {
        let (up, v) = encode(
            r#"{"model":"g","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},
                {"role":"assistant","content":"hello"},{"role":"user","content":[{"type":"text","text":"more"}]}],
                "temperature":1.5,"top_p":0.5,"stop":["X"],"max_completion_tokens":20,"seed":3,"user":"u",
                "response_format":{"type":"json_object"}}"#,
        );
        assert_eq!(up.path, TEXT_PATH);
        assert!(!up.headers.iter().any(|(n, _)| *n == "x-dashscope-sse"));
        assert_eq!(
            v,
            json!({"model":"qwen-plus",
                "input":{"messages":[
                    {"role":"system","content":"be brief"},{"role":"user","content":"hi"},
                    {"role":"assistant","content":"hello"},{"role":"user","content":"more"}]},
                "parameters":{"result_format":"message","temperature":1.5,"top_p":0.5,"max_tokens":20,
                    "stop":["X"],"seed":3,"response_format":{"type":"json_object"}}})
        );
    }

    #[test]
    fn encodes_stream_tools_and_results() {
        let (up, v) = encode(
            r#"{"model":"g","stream":true,"messages":[{"role":"user","content":"weather?"},
                {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
                {"role":"tool","tool_call_id":"call_1","content":"sunny"}],
              "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],
              "tool_choice":"required","parallel_tool_calls":true}"#,
        );
        assert!(up.headers.contains(&("x-dashscope-sse", "enable".into())));
        assert_eq!(v["parameters"]["incremental_output"], true);
        assert_eq!(
            v["parameters"]["tool_choice"],
            json!({"type":"function","function":{"name":"get_weather"}})
        );
        assert_eq!(v["parameters"]["parallel_tool_calls"], true);
        assert_eq!(
            v["parameters"]["tools"][0]["function"]["name"],
            "get_weather"
        );
        assert_eq!(
            v["input"]["messages"][1],
            json!({"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]})
        );
        assert_eq!(
            v["input"]["messages"][2],
            json!({"role":"tool","content":"sunny","tool_call_id":"call_1"})
        );
    }

    #[test]
    fn images_go_to_the_multimodal_endpoint() {
        let (up, v) = encode(
            r#"{"model":"g","messages":[{"role":"system","content":"look"},{"role":"user","content":[{"type":"text","text":"what is it?"},
                {"type":"image_url","image_url":{"url":"https://x/y.png"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD"}}]}]}"#,
        );
        assert_eq!(up.path, MULTIMODAL_PATH);
        let e = encode_for(
            r#"{"model":"g","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}"#,
            "qwen-plus",
        )
        .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages"));
        assert!(e.message.contains("takes no images"), "{}", e.message);
        assert_eq!(
            v["input"]["messages"],
            json!([{"role":"system","content":[{"text":"look"}]},
                   {"role":"user","content":[{"text":"what is it?"},{"image":"https://x/y.png"},{"image":"data:image/png;base64,QUJD"}]}])
        );
    }

    fn origin() -> Origin {
        Origin {
            id: "chatcmpl-r".into(),
            provider: "ds".into(),
            model: "qwen-plus".into(),
            ..Origin::default()
        }
    }

    #[test]
    fn decodes_responses() {
        let body = br#"{"output":{"choices":[{"finish_reason":"tool_calls","message":{"role":"assistant","content":"",
            "tool_calls":[{"function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"},"index":0,"id":"call_a","type":"function"},
                          {"function":{"name":"get_time","arguments":"{}"},"index":1,"id":"call_b","type":"function"}]}}]},
            "usage":{"total_tokens":30,"output_tokens":10,"input_tokens":20,"prompt_tokens_details":{"cached_tokens":8}},
            "request_id":"b1a2"}"#;
        let mut origin = origin();
        let d = DashScope.decode_response(body, &mut origin).unwrap();
        let v: Value = d.chat_json(&origin);
        assert_eq!(v["id"], "b1a2");
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        let calls = &v["choices"][0]["message"]["tool_calls"];
        assert_eq!(calls[0]["id"], "call_a");
        assert_eq!(calls[1]["function"]["name"], "get_time");
        assert_eq!(
            v["usage"],
            json!({"prompt_tokens":20,"completion_tokens":10,"total_tokens":30,"prompt_tokens_details":{"cached_tokens":8}})
        );
        let vl = br#"{"output":{"choices":[{"finish_reason":"length","message":{"role":"assistant","content":[{"text":"A cat"}]}}]},"usage":{"input_tokens":5,"output_tokens":2},"request_id":"x"}"#;
        let v: Value = DashScope
            .decode_response(vl, &mut origin)
            .unwrap()
            .chat_json(&origin);
        assert_eq!(v["choices"][0]["message"]["content"], "A cat");
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        assert!(DashScope.decode_response(b"{}", &mut origin).is_err());
    }

    #[test]
    fn maps_errors() {
        let cases = [
            (
                400,
                "InvalidParameter",
                "Role must be user or assistant",
                ErrorCode::InvalidRequest,
            ),
            (
                400,
                "InvalidParameter",
                "Range of input length should be [1, 30720]",
                ErrorCode::ContextLengthExceeded,
            ),
            (
                400,
                "DataInspectionFailed",
                "Input data may contain inappropriate content.",
                ErrorCode::ContentFiltered,
            ),
            (
                401,
                "InvalidApiKey",
                "Invalid API-key provided.",
                ErrorCode::AuthFailed,
            ),
            (
                403,
                "AccessDenied.Unpurchased",
                "Access to model denied.",
                ErrorCode::PermissionDenied,
            ),
            (
                404,
                "ModelNotFound",
                "Model not exist.",
                ErrorCode::ModelNotFound,
            ),
            (
                429,
                "Throttling.RateQuota",
                "Requests rate limit exceeded, please try again later.",
                ErrorCode::UpstreamRateLimit,
            ),
            (
                429,
                "Throttling.AllocationQuota",
                "Allocated quota exceeded",
                ErrorCode::UpstreamRateLimit,
            ),
            (
                500,
                "InternalError",
                "An internal error has occured",
                ErrorCode::UpstreamError,
            ),
            (503, "ServiceUnavailable", "busy", ErrorCode::UpstreamBusy),
        ];
        for (status, code, message, want) in cases {
            let body = format!(r#"{{"code":"{code}","message":"{message}","request_id":"r"}}"#);
            let e = DashScope.decode_error(status, body.as_bytes());
            assert_eq!((e.code, e.message.as_str()), (want, message), "{code}");
        }
    }

    pub(crate) const TOOL_STREAM: &str = concat!(
        "id:1\nevent:result\n:HTTP_STATUS/200\ndata:{\"output\":{\"choices\":[{\"message\":{\"content\":\"Let me \u{e9}\u{1f30d}\",\"role\":\"assistant\"},\"finish_reason\":\"null\"}]},\"usage\":{\"total_tokens\":13,\"input_tokens\":12,\"output_tokens\":1},\"request_id\":\"req-1\"}\n\n",
        "id:2\nevent:result\n:HTTP_STATUS/200\ndata:{\"output\":{\"choices\":[{\"message\":{\"content\":\"\",\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \"}}]},\"finish_reason\":\"null\"}]},\"usage\":{\"total_tokens\":20,\"input_tokens\":12,\"output_tokens\":8},\"request_id\":\"req-1\"}\n\n",
        "id:3\nevent:result\n:HTTP_STATUS/200\ndata:{\"output\":{\"choices\":[{\"message\":{\"content\":\"\",\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"\",\"type\":\"function\",\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]},\"finish_reason\":\"null\"}]},\"usage\":{\"total_tokens\":25,\"input_tokens\":12,\"output_tokens\":13},\"request_id\":\"req-1\"}\n\n",
        "id:4\nevent:result\n:HTTP_STATUS/200\ndata:{\"output\":{\"choices\":[{\"message\":{\"content\":\"\",\"role\":\"assistant\",\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"null\"}]},\"usage\":{\"total_tokens\":28,\"input_tokens\":12,\"output_tokens\":16},\"request_id\":\"req-1\"}\n\n",
        "id:5\nevent:result\n:HTTP_STATUS/200\ndata:{\"output\":{\"choices\":[{\"message\":{\"content\":\"\",\"role\":\"assistant\"},\"finish_reason\":\"tool_calls\"}]},\"usage\":{\"total_tokens\":30,\"input_tokens\":12,\"output_tokens\":18},\"request_id\":\"req-1\"}\n\n",
    );

    fn run(chunks: &[&[u8]], include_usage: bool) -> (Vec<Value>, String) {
        crate::dialects::run_stream(&DashScope, origin(), chunks, include_usage)
    }

    #[test]
    fn stream_translates_to_unified_chunks() {
        let (ev, text) = run(&[TOOL_STREAM.as_bytes()], true);
        assert!(text.ends_with("data: [DONE]\n\n"));
        assert!(ev.iter().all(|e| e["id"] == "req-1"));
        assert_eq!(
            ev[1]["choices"][0]["delta"],
            json!({"content":"Let me \u{e9}\u{1f30d}"})
        );
        let tc = |i: usize| ev[i]["choices"][0]["delta"]["tool_calls"][0].clone();
        assert_eq!(
            tc(2),
            json!({"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}})
        );
        assert_eq!(
            tc(3),
            json!({"index":0,"function":{"arguments":"{\"city\": "}})
        );
        assert_eq!(
            tc(4),
            json!({"index":0,"function":{"arguments":"\"Paris\"}"}})
        );
        assert_eq!(
            (tc(5)["index"].clone(), tc(5)["id"].clone()),
            (json!(1), json!("call_b"))
        );
        assert_eq!(tc(6)["function"]["arguments"], "{}");
        assert_eq!(ev[7]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            ev[8]["usage"],
            json!({"prompt_tokens":12,"completion_tokens":18,"total_tokens":30})
        );
        assert_eq!(ev.len(), 9);
    }

    #[test]
    fn stream_content_filter() {
        let first = TOOL_STREAM.split_inclusive("\n\n").next().unwrap();
        let filtered = format!("{first}id:2\nevent:error\n:HTTP_STATUS/400\ndata:{{\"code\":\"DataInspectionFailed\",\"message\":\"Output data may contain inappropriate content.\",\"request_id\":\"req-1\"}}\n\n");
        let (ev, text) = run(&[filtered.as_bytes()], false);
        assert_eq!(
            ev.last().unwrap()["choices"][0]["finish_reason"],
            "content_filter"
        );
        assert!(ev.iter().all(|e| e.get("error").is_none()));
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        // Before any content, the filter is an error (gating makes it a 400).
        let blocked = "id:1\nevent:error\n:HTTP_STATUS/400\ndata:{\"code\":\"DataInspectionFailed\",\"message\":\"Input data may contain inappropriate content.\"}\n\n";
        let (ev, text) = run(&[blocked.as_bytes()], false);
        assert_eq!(ev[0]["error"]["code"], "CONTENT_FILTERED");
        assert!(!text.contains("[DONE]"));
    }
}
