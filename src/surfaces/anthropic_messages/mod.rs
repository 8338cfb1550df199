//! Anthropic Messages, `POST /v1/messages`: requests ([`request`]), the
//! `message` object, the event stream (`message_start` … `message_stop`)
//! and Anthropic's error envelope, for clients such as the `anthropic`
//! SDKs and Claude Code.
//!
//! Errors are `{"type":"error","error":{"type","message","code"},"request_id"}`:
//! `type` is Anthropic's for the condition, `code` the gateway's own
//! (`UPSTREAM_BUSY`...), and a vendor's failure or overload answers 500 or
//! 529 as Anthropic does ([`AnthropicMessages::status`]).
//!
//! Over 600 lines only with its tests (about 470 lines of code); the wire
//! types are [`crate::wire::anthropic`]'s, shared with the Anthropic dialect.

use std::borrow::Cow;

use super::route::{only, Operation, PathFacts, Route};
use super::{Surface, SurfaceState};
use crate::error::{ErrorCode, GatewayError, Wording};
use crate::model::call::{Call, CallAnswer, CallOp};
use crate::model::listing::Listed;
use crate::model::response::{Answer, Completion, FinishReason, Origin, Usage};
use crate::model::stream::{Passed, Reasoning, StreamEncoder};
use crate::model::{Api, Generation, Request};
use crate::wire::anthropic::{
    BlockDelta, BlockStart, BlockStop, ContentBlock, Delta, ErrorBody, ErrorEnvelope, Event,
    Message, MessageDelta, MessageStart, StopDelta, ToolInput, Usage as MessageUsage,
};

pub mod models;
pub mod request;

pub struct AnthropicMessages;

/// Where clients send generations; the API's other paths are below it.
const PATH: &str = "/v1/messages";
const PREFIX: &str = "/v1/messages/";
const COUNT_TOKENS: &str = "/v1/messages/count_tokens";

impl Surface for AnthropicMessages {
    /// `POST /v1/messages`, `POST /v1/messages/count_tokens`; any other
    /// path below `/v1/messages/` (`/v1/messages/batches`, a trailing
    /// slash) is refused in Anthropic's envelope.
    fn route(&self, method: &str, path: &str, _query: &str) -> Option<Route> {
        let api = Api::AnthropicMessages;
        match path {
            PATH => Some(Route::generation(api, method, path)),
            COUNT_TOKENS => Some(Route {
                api,
                operation: only(method, COUNT_TOKENS, "POST", || {
                    // Passed on without the client's query (the SDKs' `beta=true`).
                    Operation::Call(Call::new(CallOp::CountTokens, api, COUNT_TOKENS))
                }),
                metered: true,
            }),
            p if p.starts_with(PREFIX) => Some(Route::unknown(api, p)),
            _ => None,
        }
    }

    fn render_models(&self, models: &[Listed], loaded_at: u64) -> Vec<u8> {
        models::render_list(models, loaded_at)
    }

    fn render_model(&self, model: &Listed, loaded_at: u64) -> Vec<u8> {
        models::render_one(model, loaded_at)
    }

    /// count_tokens: a Messages request, `max_tokens` optional.
    fn parse_call(&self, call: &Call, body: &[u8]) -> Result<Option<Request>, GatewayError> {
        match call.op {
            CallOp::CountTokens => {
                request::parse_count(body).map(|r| Some(Request::Chat(Box::new(r.into()))))
            }
            CallOp::Embeddings | CallOp::Stored { .. } => Err(super::foreign_call()),
        }
    }

    /// Anthropic's SDKs and Claude Code send it on every request.
    fn client_header(&self) -> Option<&'static str> {
        Some("anthropic-version")
    }

    fn parse_generation(&self, facts: &PathFacts, body: &[u8]) -> Result<Generation, GatewayError> {
        Ok(facts.generation(request::parse(body)?))
    }

    /// count_tokens: `{"input_tokens": N}`.
    fn render_call(&self, _call: &Call, answer: CallAnswer) -> Vec<u8> {
        match answer {
            CallAnswer::Count(tokens) => format!("{{\"input_tokens\":{tokens}}}").into_bytes(),
            CallAnswer::Embeddings(_) => self.render_error(&super::foreign_call(), None),
        }
    }

    fn render_answer(&self, answer: Answer, origin: &Origin, _state: &SurfaceState) -> Vec<u8> {
        match answer {
            Answer::Decoded(completion) => render_message(&completion, origin),
            Answer::Native(body) => body,
        }
    }

    fn stream_encoder(
        &self,
        _include_usage: bool,
        _state: &SurfaceState,
    ) -> Box<dyn StreamEncoder> {
        Box::new(MessageEvents::default())
    }

    fn render_error(&self, error: &GatewayError, request_id: Option<&str>) -> Vec<u8> {
        error_json(error, request_id)
    }

    /// Anthropic's statuses where they differ from the gateway's: a vendor
    /// failure is its 500 `api_error`, a busy or unavailable vendor its 529
    /// `overloaded_error` (which the SDKs retry and raise as
    /// `InternalServerError` / `OverloadedError`).
    fn status(&self, code: ErrorCode) -> u16 {
        match code {
            ErrorCode::UpstreamError => 500,
            ErrorCode::UpstreamBusy => 529,
            _ => code.status(),
        }
    }
}

/// Anthropic's error `type` for each of our codes.
pub fn error_type(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::InvalidRequest
        | ErrorCode::ContextLengthExceeded
        | ErrorCode::ContentFiltered
        | ErrorCode::MethodNotAllowed => "invalid_request_error",
        ErrorCode::AuthFailed => "authentication_error",
        ErrorCode::PermissionDenied => "permission_error",
        ErrorCode::ModelNotFound => "not_found_error",
        ErrorCode::PayloadTooLarge => "request_too_large",
        ErrorCode::UpstreamRateLimit | ErrorCode::RateLimited => "rate_limit_error",
        ErrorCode::UpstreamError => "api_error",
        ErrorCode::UpstreamBusy => "overloaded_error",
        ErrorCode::UpstreamTimeout => "timeout_error",
    }
}

/// The error envelope (also the stream's `error` event's data).
fn error_json(error: &GatewayError, request_id: Option<&str>) -> Vec<u8> {
    let envelope = ErrorEnvelope {
        kind: "error",
        error: ErrorBody {
            kind: error_type(error.code).into(),
            message: error.worded(Wording::Anthropic),
            code: Some(error.code.as_str().into()),
            param: error.param.as_deref().map(Cow::Borrowed),
            provider: error.provider.as_deref().map(Cow::Borrowed),
        },
        request_id: request_id.map(Cow::Borrowed),
    };
    serde_json::to_vec(&envelope).unwrap_or_else(|_| {
        br#"{"type":"error","error":{"type":"api_error","message":""}}"#.to_vec()
    })
}

/// Anthropic's `stop_reason` for a neutral finish.
pub fn stop_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::ContentFilter => "refusal",
        FinishReason::Paused => "pause_turn",
    }
}

/// Anthropic's `stop_reason` for how an answer ended: `stop_sequence` when
/// the vendor said which stop sequence matched ([`Origin::stop_sequence`]),
/// `end_turn` when nothing was said.
fn stop_reason_of(reason: Option<FinishReason>, origin: &Origin) -> &'static str {
    match reason {
        None | Some(FinishReason::Stop) if origin.stop_sequence.is_some() => "stop_sequence",
        reason => reason.map_or("end_turn", stop_reason),
    }
}

/// A response id in Anthropic's form (`msg_…`): the vendor's, prefixed
/// when it has another form.
fn message_id(id: &str) -> String {
    if id.starts_with("msg_") {
        id.to_owned()
    } else {
        format!("msg_{id}")
    }
}

/// Usage as Anthropic counts it, every count written: `input_tokens`
/// without the tokens read from or written to the cache (the neutral
/// `prompt_tokens` includes both).
fn message_usage(usage: Option<&Usage>) -> MessageUsage {
    let usage = usage.copied().unwrap_or_default();
    let cached = usage.cached_tokens.unwrap_or(0);
    let written = usage.cache_write_tokens.unwrap_or(0);
    MessageUsage {
        input_tokens: Some(usage.prompt_tokens.saturating_sub(cached + written)),
        output_tokens: Some(usage.completion_tokens),
        cache_creation_input_tokens: Some(written),
        cache_read_input_tokens: Some(cached),
    }
}

/// The `message` object.
fn render_message(completion: &Completion, origin: &Origin) -> Vec<u8> {
    let mut content =
        Vec::with_capacity(completion.reasoning.len() + 1 + completion.tool_calls.len());
    for thinking in &completion.reasoning {
        content.push(match &thinking.redacted {
            Some(data) => ContentBlock::RedactedThinking { data: data.into() },
            None => ContentBlock::Thinking {
                thinking: thinking.text.as_str().into(),
                signature: thinking.signature.as_deref().unwrap_or("").into(),
            },
        });
    }
    if let Some(text) = completion.content.as_deref().filter(|t| !t.is_empty()) {
        content.push(ContentBlock::Text {
            text: text.into(),
            cache_control: None,
        });
    }
    for call in &completion.tool_calls {
        content.push(ContentBlock::ToolUse {
            id: call.id.as_str().into(),
            name: call.function.name.as_str().into(),
            input: ToolInput::of(&call.function.arguments),
        });
    }
    let id = message_id(&origin.id);
    let body = Message {
        id: id.into(),
        kind: "message",
        role: "assistant",
        model: origin.model.as_str().into(),
        content: content.as_slice(),
        stop_reason: Some(stop_reason_of(completion.finish_reason, origin).into()),
        stop_sequence: origin.stop_sequence.as_deref().map(Cow::Borrowed),
        usage: Some(message_usage(completion.usage.as_ref())),
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The content block a stream has open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    /// A thinking block; `signed` once its signature came.
    Thinking {
        signed: bool,
    },
    /// Tool call number `call`'s block.
    Tool {
        call: u32,
    },
}

/// The Messages event stream for one response: blocks numbered in order,
/// one open at a time, closed before the next opens and at the end.
#[derive(Default)]
struct MessageEvents {
    /// The next block's index.
    next_index: u32,
    open: Option<Open>,
    /// Each tool call's block index, by call number.
    tool_blocks: Vec<u32>,
    stop_reason: Option<FinishReason>,
    /// The vendor's own events went through (a pass-through pair): its
    /// `message_delta` and `message_stop` too.
    passed_through: bool,
}

fn event(out: &mut Vec<u8>, data: &Event) {
    let start = out.len();
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(data.name().as_bytes());
    out.extend_from_slice(b"\ndata: ");
    match serde_json::to_writer(&mut *out, data) {
        Ok(()) => out.extend_from_slice(b"\n\n"),
        Err(_) => out.truncate(start),
    }
}

impl MessageEvents {
    fn close(&mut self, out: &mut Vec<u8>) {
        if self.open.take().is_some() {
            let index = self.next_index.saturating_sub(1);
            event(
                out,
                &Event::ContentBlockStop(BlockStop {
                    index: index.into(),
                }),
            );
        }
    }

    /// Closes the open block and opens `block` as `kind`; its index.
    fn open(&mut self, out: &mut Vec<u8>, kind: Open, block: ContentBlock) -> u32 {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        event(
            out,
            &Event::ContentBlockStart(BlockStart {
                index: index.into(),
                content_block: block,
            }),
        );
        self.open = Some(kind);
        index
    }

    fn delta(out: &mut Vec<u8>, index: u32, delta: Delta) {
        event(
            out,
            &Event::ContentBlockDelta(BlockDelta {
                index: index.into(),
                delta,
            }),
        );
    }

    /// The index of the open block.
    fn current(&self) -> u32 {
        self.next_index.saturating_sub(1)
    }
}

const UNSIGNED_THINKING: ContentBlock<'static> = ContentBlock::Thinking {
    thinking: Cow::Borrowed(""),
    signature: Cow::Borrowed(""),
};

impl StreamEncoder for MessageEvents {
    /// `message_start` (usage comes with `message_delta`), then a `ping`.
    fn start(&mut self, origin: &Origin, out: &mut Vec<u8>) {
        let id = message_id(&origin.id);
        event(
            out,
            &Event::MessageStart(MessageStart {
                message: Message {
                    id: id.into(),
                    kind: "message",
                    role: "assistant",
                    model: origin.model.as_str().into(),
                    content: &[],
                    stop_reason: None,
                    stop_sequence: None,
                    usage: Some(MessageUsage {
                        input_tokens: Some(0),
                        output_tokens: Some(0),
                        ..MessageUsage::default()
                    }),
                },
            }),
        );
        event(out, &Event::Ping);
    }

    fn text(&mut self, _origin: &Origin, out: &mut Vec<u8>, text: &str) {
        if self.open != Some(Open::Text) {
            let block = ContentBlock::Text {
                text: Cow::Borrowed(""),
                cache_control: None,
            };
            self.open(out, Open::Text, block);
        }
        let text = text.into();
        Self::delta(out, self.current(), Delta::TextDelta { text });
    }

    fn reasoning(&mut self, _origin: &Origin, out: &mut Vec<u8>, delta: Reasoning<'_>) {
        match delta {
            Reasoning::Text(thinking) => {
                if self.open != Some(Open::Thinking { signed: false }) {
                    self.open(out, Open::Thinking { signed: false }, UNSIGNED_THINKING);
                }
                let thinking = thinking.into();
                Self::delta(out, self.current(), Delta::ThinkingDelta { thinking });
            }
            Reasoning::Signature(signature) => {
                if self.open != Some(Open::Thinking { signed: false }) {
                    self.open(out, Open::Thinking { signed: false }, UNSIGNED_THINKING);
                }
                let signature = signature.into();
                Self::delta(out, self.current(), Delta::SignatureDelta { signature });
                self.open = Some(Open::Thinking { signed: true });
            }
            Reasoning::Redacted(data) => {
                self.open(
                    out,
                    Open::Thinking { signed: true },
                    ContentBlock::RedactedThinking { data: data.into() },
                );
                self.close(out);
            }
        }
    }

    fn tool_call_start(
        &mut self,
        _origin: &Origin,
        out: &mut Vec<u8>,
        index: u32,
        id: &str,
        name: &str,
    ) {
        let block = self.open(
            out,
            Open::Tool { call: index },
            ContentBlock::ToolUse {
                id: id.into(),
                name: name.into(),
                input: ToolInput::Empty,
            },
        );
        self.tool_blocks.push(block);
    }

    fn tool_call_arguments(
        &mut self,
        _origin: &Origin,
        out: &mut Vec<u8>,
        index: u32,
        fragment: &str,
    ) {
        // A call whose block was closed (vendors interleaving calls) still
        // names its own block: the SDKs accumulate by index.
        let block = match self.open {
            Some(Open::Tool { call }) if call == index => self.current(),
            _ => match self.tool_blocks.get(index as usize) {
                Some(&block) => block,
                None => return,
            },
        };
        Self::delta(
            out,
            block,
            Delta::InputJsonDelta {
                partial_json: fragment.into(),
            },
        );
    }

    fn finish(&mut self, _origin: &Origin, out: &mut Vec<u8>, reason: FinishReason) {
        self.close(out);
        self.stop_reason = Some(reason);
    }

    /// Messages clients never ask for several choices: only
    /// choice 0 is ever written here.
    fn choice(&mut self, _origin: &Origin, _out: &mut Vec<u8>, _index: u32) {}

    /// `message_delta` with the stop reason and the usage, then `message_stop`.
    fn done(&mut self, origin: &Origin, out: &mut Vec<u8>, usage: Option<&Usage>) {
        if self.passed_through {
            return;
        }
        self.close(out);
        event(
            out,
            &Event::MessageDelta(MessageDelta {
                delta: StopDelta {
                    stop_reason: Some(stop_reason_of(self.stop_reason, origin).into()),
                    stop_sequence: origin.stop_sequence.as_deref().map(Cow::Borrowed),
                },
                usage: Some(message_usage(usage)),
            }),
        );
        event(out, &Event::MessageStop);
    }

    /// `event: error` with the envelope.
    fn error(&mut self, out: &mut Vec<u8>, error: &GatewayError, request_id: &str) {
        out.extend_from_slice(b"event: error\ndata: ");
        out.extend_from_slice(&error_json(error, Some(request_id)));
        out.extend_from_slice(b"\n\n");
    }

    /// A vendor event already framed (`event: …\ndata: …\n\n`).
    fn passthrough(&mut self, out: &mut Vec<u8>, event: &Passed) {
        self.passed_through = true;
        out.extend_from_slice(event.data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::request::Thinking;
    use crate::model::response::ToolCallOut;
    use serde_json::Value;

    fn origin() -> Origin {
        Origin {
            id: "chatcmpl-1".into(),
            created: 1,
            model: "m".into(),
            provider: "p".into(),
            stop_sequence: None,
        }
    }

    /// (event name, data) of each event.
    fn events(out: &[u8]) -> Vec<(String, Value)> {
        std::str::from_utf8(out)
            .unwrap()
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                let name = name.strip_prefix("event: ").unwrap().to_owned();
                let data: Value =
                    serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                assert_eq!(data["type"], name.as_str());
                (name, data)
            })
            .collect()
    }

    #[test]
    fn renders_a_message() {
        let completion = Completion {
            more: Vec::new(),
            reasoning: vec![
                Thinking {
                    text: "hmm".into(),
                    signature: Some("sig".into()),
                    redacted: None,
                },
                Thinking {
                    redacted: Some("enc".into()),
                    ..Thinking::default()
                },
            ],
            content: Some("hi".into()),
            tool_calls: vec![ToolCallOut::new(
                "call_1".into(),
                "f".into(),
                r#"{"a":1}"#.into(),
            )],
            finish_reason: Some(FinishReason::ToolCalls),
            usage: Some(Usage {
                prompt_tokens: 10,
                completion_tokens: 3,
                cached_tokens: Some(4),
                reasoning_tokens: None,
                cache_write_tokens: None,
            }),
        };
        let v: Value = serde_json::from_slice(&AnthropicMessages.render_answer(
            Answer::Decoded(completion),
            &origin(),
            &SurfaceState::default(),
        ))
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"id":"msg_chatcmpl-1","type":"message","role":"assistant","model":"m",
                "content":[{"type":"thinking","thinking":"hmm","signature":"sig"},
                           {"type":"redacted_thinking","data":"enc"},
                           {"type":"text","text":"hi"},
                           {"type":"tool_use","id":"call_1","name":"f","input":{"a":1}}],
                "stop_reason":"tool_use","stop_sequence":null,
                "usage":{"input_tokens":6,"output_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":4}})
        );
    }

    #[test]
    fn a_paused_turn_is_pause_turn_translated_too() {
        let completion = Completion {
            content: Some("searching".into()),
            finish_reason: Some(FinishReason::Paused),
            ..Completion::default()
        };
        let v: Value = serde_json::from_slice(&AnthropicMessages.render_answer(
            Answer::Decoded(completion),
            &origin(),
            &SurfaceState::default(),
        ))
        .unwrap();
        assert_eq!(v["stop_reason"], "pause_turn");
        let mut e = MessageEvents::default();
        let mut out = Vec::new();
        e.start(&origin(), &mut out);
        e.text(&origin(), &mut out, "searching");
        e.finish(&origin(), &mut out, FinishReason::Paused);
        e.done(&origin(), &mut out, None);
        let delta = events(&out)
            .into_iter()
            .find(|(name, _)| name == "message_delta")
            .unwrap();
        assert_eq!(delta.1["delta"]["stop_reason"], "pause_turn");
    }

    #[test]
    fn stream_numbers_blocks_and_closes_them() {
        let mut e = MessageEvents::default();
        let o = origin();
        let mut out = Vec::new();
        e.start(&o, &mut out);
        e.reasoning(&o, &mut out, Reasoning::Text("a"));
        e.reasoning(&o, &mut out, Reasoning::Text("b"));
        e.reasoning(&o, &mut out, Reasoning::Signature("s1"));
        e.reasoning(&o, &mut out, Reasoning::Text("c"));
        e.reasoning(&o, &mut out, Reasoning::Redacted("r"));
        e.text(&o, &mut out, "hi");
        e.text(&o, &mut out, " there");
        e.tool_call_start(&o, &mut out, 0, "t1", "f");
        e.tool_call_arguments(&o, &mut out, 0, "{\"a\"");
        e.tool_call_start(&o, &mut out, 1, "t2", "g");
        e.tool_call_arguments(&o, &mut out, 0, ":1}");
        e.tool_call_arguments(&o, &mut out, 1, "{}");
        e.finish(&o, &mut out, FinishReason::ToolCalls);
        let usage = Usage {
            prompt_tokens: 5,
            completion_tokens: 7,
            cached_tokens: None,
            reasoning_tokens: None,
            cache_write_tokens: None,
        };
        e.done(&o, &mut out, Some(&usage));
        let ev = events(&out);
        let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(ev[0].1["message"]["id"], "msg_chatcmpl-1");
        assert_eq!(
            ev[5].1["delta"],
            serde_json::json!({"type":"signature_delta","signature":"s1"})
        );
        assert_eq!(
            ev[7].1["index"], 1,
            "thinking after a signature is a new block"
        );
        assert_eq!(
            ev[10].1["content_block"],
            serde_json::json!({"type":"redacted_thinking","data":"r"})
        );
        assert_eq!(ev[12].1["content_block"]["type"], "text");
        assert_eq!(ev[12].1["index"], 3);
        assert_eq!(ev[16].1["content_block"]["id"], "t1");
        assert_eq!(ev[17].1["delta"]["partial_json"], "{\"a\"");
        assert_eq!(ev[19].1["index"], 5);
        assert_eq!(
            ev[20].1["index"], 4,
            "a closed call's fragment names its own block"
        );
        assert_eq!(ev[21].1["index"], 5);
        assert_eq!(
            ev[23].1,
            serde_json::json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},
                "usage":{"input_tokens":5,"output_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}})
        );
    }

    #[test]
    fn errors_in_anthropics_envelope_and_statuses() {
        let mut e = GatewayError::new(ErrorCode::UpstreamBusy, "busy");
        e.provider = Some("p".into());
        let v: Value =
            serde_json::from_slice(&AnthropicMessages.render_error(&e, Some("rid"))).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded: busy","code":"UPSTREAM_BUSY","provider":"p"},"request_id":"rid"})
        );
        for (code, status, kind) in [
            (ErrorCode::InvalidRequest, 400, "invalid_request_error"),
            (ErrorCode::AuthFailed, 401, "authentication_error"),
            (ErrorCode::PermissionDenied, 403, "permission_error"),
            (ErrorCode::ModelNotFound, 404, "not_found_error"),
            (ErrorCode::PayloadTooLarge, 413, "request_too_large"),
            (ErrorCode::RateLimited, 429, "rate_limit_error"),
            (ErrorCode::UpstreamError, 500, "api_error"),
            (ErrorCode::UpstreamTimeout, 504, "timeout_error"),
            (ErrorCode::UpstreamBusy, 529, "overloaded_error"),
        ] {
            assert_eq!(AnthropicMessages.status(code), status);
            assert_eq!(error_type(code), kind);
        }
        let mut out = Vec::new();
        MessageEvents::default().error(&mut out, &e, "rid");
        let ev = events(&out);
        assert_eq!(ev[0].0, "error");
        assert_eq!(ev[0].1["error"]["type"], "overloaded_error");
    }
}
