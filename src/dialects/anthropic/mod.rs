//! Anthropic Messages API (`POST /v1/messages`, `anthropic-version: 2023-06-01`).
//!
//! A Messages client is a pass-through pair ([`Dialect::speaks`]): its body
//! goes on as it came with only `model` replaced, its `anthropic-beta`
//! header with it, and the vendor's answer and events come back as they are
//! (read only for metering).
//!
//! For clients of other APIs the neutral request is encoded, and Anthropic
//! rejects unknown fields, so only what it understands is sent: system
//! messages move to the top-level `system`, tool results become
//! `tool_result` blocks in one user turn, tool calls become `tool_use`
//! blocks with the vendor's ids kept, reasoning becomes `thinking` (an
//! effort as a budget, `Effort::claude_budget`) and signed thinking blocks of
//! the history go back first in their assistant turn.
//!
//! The wire types are [`crate::wire::anthropic`]'s, shared with the Messages
//! surface. The encoding is in [`encode`], the pass-through's edits in
//! [`passthrough`], the stream decoder in [`stream`].

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::transport::{self, Operation};
use super::{
    edit_members, encode_json, fallback_message, json_instruction, tool_arguments, unparseable,
    DecodedResponse, Dialect, Events, Member, SseStream, StreamDecoder, Target, UpstreamRequest,
};
use crate::error::{ErrorCode, GatewayError};
use crate::formats::sse::SseParser;
use crate::model::call::Call;
use crate::model::request::{
    CacheControl, ChatRequest, Content, ContentPart, DocumentSource, Effort, Image, Message,
    Thinking, ToolChoice, WebSearch, MIN_THINKING_BUDGET,
};
use crate::model::response::{Answer, Completion, FinishReason, Origin, ToolCallOut, Usage};
use crate::model::stream::{EventWriter, Passed, Reasoning};
use crate::model::Api;
use crate::wire::anthropic::{
    self as wire, BlockDelta, BlockStart, Cache, ContentBlock as Block, Delta, DocSource,
    ErrorBody, ErrorEnvelope, ImageSource, MessageDelta, MessageStart, Metadata, ResultContent,
    SearchLocation, ThinkingConfig, ToolDef, ToolInput, WebSearchTool,
};

mod encode;
mod passthrough;
mod stream;

use encode::*;
pub use encode::{
    claude_max_tokens, claude_sampling, claude_thinking, history_allows_thinking, ClaudeThinking,
    Sampling,
};
pub use passthrough::Unverifiable;
use passthrough::*;
pub(super) use stream::AnthropicEvents;

pub struct Anthropic;

pub const API_VERSION: &str = "2023-06-01";

impl Dialect for Anthropic {
    fn speaks(&self, api: Api) -> bool {
        api == Api::AnthropicMessages
    }

    /// Its server tool is named `web_search`: not beside a client tool of
    /// that name (Anthropic refuses two tools of one name).
    fn web_search(&self, req: &ChatRequest, _model: &str) -> bool {
        req.web_search.is_some() && !req.tools.iter().any(|t| t.function.name == "web_search")
    }

    /// The client's body, only `model` replaced (its `anthropic-beta`
    /// header goes with it, [`Self::takes_client_header`]), and what Claude
    /// cannot verify left out ([`Unverifiable`]).
    fn encode_native(
        &self,
        _api: Api,
        client: &super::ClientRequest,
        req: &ChatRequest,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        let body = (client.body)();
        Some(
            Unverifiable::of(req, &body)
                .and_then(|unverifiable| with_model(&body, target.model, &unverifiable))
                .and_then(|body| {
                    transport::request(Operation::Generate { stream: req.stream }, target, body)
                }),
        )
    }

    /// `POST /v1/messages/count_tokens`: the client's body, `model` replaced.
    fn encode_call(
        &self,
        call: &Call,
        raw: &dyn Fn() -> Vec<u8>,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        // Its own API's count only: a body of another API is not Anthropic's.
        (call.is_count() && call.api == Api::AnthropicMessages).then(|| {
            with_model(&raw(), target.model, &Unverifiable::default())
                .and_then(|body| transport::request(Operation::CountTokens, target, body))
        })
    }

    fn takes_client_header(&self, api: Api, name: &[u8]) -> bool {
        api == Api::AnthropicMessages && name == b"anthropic-beta"
    }

    fn encode_request(
        &self,
        req: &ChatRequest,
        target: &Target,
    ) -> Result<UpstreamRequest, GatewayError> {
        super::single_choice(req)?;
        let mut system = Vec::new();
        let mut turns: Vec<Turn> = Vec::with_capacity(req.messages.len());
        for (i, message) in req.messages.iter().enumerate() {
            let at = format!("messages[{i}]");
            match message {
                Message::System { content, .. } | Message::Developer { content, .. } => {
                    system.extend(blocks(content, &at, false)?);
                }
                Message::User { content, .. } => {
                    crate::wire::push_turn(&mut turns, "user", blocks(content, &at, true)?)
                }
                Message::Tool {
                    content,
                    tool_call_id,
                    is_error,
                    cache_control,
                } => {
                    let result = Block::ToolResult {
                        tool_use_id: tool_call_id,
                        content: result_content(content, &at)?,
                        is_error: *is_error,
                        cache_control: cache(cache_control.as_ref()),
                    };
                    crate::wire::push_turn(&mut turns, "user", vec![result]);
                }
                Message::Assistant {
                    content,
                    reasoning,
                    tool_calls,
                    ..
                } => {
                    // Signed thinking first: Anthropic wants the turn to
                    // start with it when thinking is on.
                    let mut out: Vec<Block> = thinking_blocks(reasoning).collect();
                    if let Some(content) = content {
                        out.extend(blocks(content, &at, false)?);
                    }
                    for (j, call) in tool_calls.iter().enumerate() {
                        let input = tool_arguments(call, i, j)?;
                        out.push(Block::ToolUse {
                            id: call.id.as_str().into(),
                            name: call.function.name.as_str().into(),
                            input: ToolInput::Value(input),
                        });
                    }
                    crate::wire::push_turn(&mut turns, "assistant", out);
                }
            }
        }
        // Anthropic has no JSON mode: ask for JSON in the system prompt.
        if let Some(instruction) = json_instruction(req.response_format.as_ref()) {
            system.push(Block::Text {
                text: Cow::Owned(instruction),
                cache_control: None,
            });
        }
        // Anthropic refuses tool_use / tool_result blocks without tool
        // definitions ("Requests which include `tool_use` or `tool_result`
        // blocks must define tools."): with none from the client, the tools
        // the history called are declared again (permissive schema) and
        // tool_choice "none" keeps the model from calling them.
        let history_names: Vec<&str> = if req.tools.is_empty() {
            let mut names: Vec<&str> = Vec::new();
            let mut results = false;
            for m in &req.messages {
                match m {
                    Message::Assistant { tool_calls, .. } => {
                        for c in tool_calls {
                            if !names.contains(&c.function.name.as_str()) {
                                names.push(&c.function.name);
                            }
                        }
                    }
                    Message::Tool { .. } => results = true,
                    _ => {}
                }
            }
            if names.is_empty() && results {
                names.push("tool");
            }
            names
        } else {
            Vec::new()
        };
        let history_tools = history_names.iter().map(|name| ToolDef {
            name,
            description: None,
            input_schema: Cow::Owned(serde_json::from_str(EMPTY_SCHEMA).unwrap_or_default()),
            cache_control: None,
        });
        let tools = req
            .tools
            .iter()
            .map(|t| ToolDef {
                name: &t.function.name,
                description: t.function.description.as_deref(),
                input_schema: match &t.function.parameters {
                    Some(p) => Cow::Borrowed(p),
                    None => Cow::Owned(serde_json::from_str(EMPTY_SCHEMA).unwrap_or_default()),
                },
                cache_control: cache(t.cache_control.as_ref()),
            })
            .chain(history_tools)
            .map(wire::Tool::Function)
            .chain(
                req.web_search
                    .as_ref()
                    .filter(|_| self.web_search(req, target.model))
                    .map(|s| wire::Tool::WebSearch(web_search_tool(s))),
            )
            .collect::<Vec<_>>();
        let disable_parallel = (req.parallel_tool_calls == Some(false)).then_some(true);
        let tool_choice = if tools.is_empty() {
            None
        } else if !history_names.is_empty() {
            Some(wire::ToolChoice {
                kind: "none",
                name: None,
                disable_parallel_tool_use: None,
            })
        } else {
            match &req.tool_choice {
                Some(ToolChoice::None) => Some(wire::ToolChoice {
                    kind: "none",
                    name: None,
                    disable_parallel_tool_use: None,
                }),
                Some(ToolChoice::Auto) => Some(wire::ToolChoice {
                    kind: "auto",
                    name: None,
                    disable_parallel_tool_use: disable_parallel,
                }),
                None => disable_parallel.map(|d| wire::ToolChoice {
                    kind: "auto",
                    name: None,
                    disable_parallel_tool_use: Some(d),
                }),
                Some(ToolChoice::Required) => Some(wire::ToolChoice {
                    kind: "any",
                    name: None,
                    disable_parallel_tool_use: disable_parallel,
                }),
                Some(ToolChoice::Function(name)) => Some(wire::ToolChoice {
                    kind: "tool",
                    name: Some(name),
                    disable_parallel_tool_use: disable_parallel,
                }),
            }
        };
        let client_max = req.max_output_tokens();
        let thinking = claude_thinking(req, target.model, client_max)?;
        let max_tokens = claude_max_tokens(client_max, thinking, target);
        let sampling = claude_sampling(req, thinking.is_some());
        let request = wire::Request {
            model: target.model,
            max_tokens,
            system,
            messages: turns,
            stop_sequences: &req.stop,
            temperature: sampling.temperature,
            top_p: sampling.top_p,
            top_k: sampling.top_k,
            tools,
            tool_choice,
            thinking: thinking.map(ClaudeThinking::config),
            output_config: thinking
                .and_then(ClaudeThinking::effort)
                .map(|effort| wire::OutputConfig { effort }),
            metadata: req.user.as_deref().map(|user_id| Metadata { user_id }),
            stream: req.stream,
        };
        let body = encode_json(req, &request)?;
        transport::request(Operation::Generate { stream: req.stream }, target, body)
    }

    fn decode_response(
        &self,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        let message: wire::Answer<Vec<Block>> =
            serde_json::from_slice(body).map_err(|e| unparseable("response", e))?;
        origin.id = message.id.into_owned();
        origin.model = message.model.into_owned();
        let mut text: Option<String> = None;
        let mut tool_calls = Vec::new();
        let mut reasoning = Vec::new();
        for block in message.content {
            match block {
                Block::Text { text: t, .. } => text.get_or_insert_with(String::new).push_str(&t),
                Block::ToolUse { id, name, input } => tool_calls.push(ToolCallOut::new(
                    id.into_owned(),
                    name.into_owned(),
                    input.arguments(),
                )),
                Block::Thinking {
                    thinking,
                    signature,
                } => reasoning.push(Thinking {
                    text: thinking.into_owned(),
                    signature: Some(signature.into_owned()).filter(|s| !s.is_empty()),
                    redacted: None,
                }),
                Block::RedactedThinking { data } => reasoning.push(Thinking {
                    redacted: Some(data.into_owned()),
                    ..Thinking::default()
                }),
                // Kinds the gateway does not read; the request-only kinds
                // are never read.
                _ => {}
            }
        }
        let usage = Some(unified(message.usage));
        origin.stop_sequence = message.stop_sequence.map(Cow::into_owned);
        let completion = Completion {
            reasoning,
            content: text,
            tool_calls,
            finish_reason: message.stop_reason.as_deref().map(finish_reason),
            usage,
            more: Vec::new(),
        };
        Ok(DecodedResponse::decoded(completion))
    }

    /// The vendor's message as it came, read for its usage and stop reason.
    fn decode_native(
        &self,
        _api: Api,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        // Its content is left as it came, unread.
        let facts: wire::Answer<Vec<IgnoredAny>> =
            serde_json::from_slice(body).map_err(|e| unparseable("response", e))?;
        origin.id = facts.id.into_owned();
        origin.model = facts.model.into_owned();
        Ok(DecodedResponse {
            answer: Answer::Native(body.to_vec()),
            usage: Some(unified(facts.usage)),
            finish_reason: facts.stop_reason.as_deref().map(finish_reason),
        })
    }

    fn stream_decoder(&self, writer: EventWriter) -> Box<dyn StreamDecoder> {
        Box::new(SseStream::new(writer, AnthropicEvents::default()))
    }

    /// Anthropic counts a client of another API's request too (Gemini's
    /// countTokens).
    fn counter(&self) -> Option<&dyn super::count::Counter> {
        Some(self)
    }

    fn decode_error(&self, status: u16, body: &[u8]) -> GatewayError {
        match serde_json::from_slice::<ErrorEnvelope>(body) {
            Ok(envelope) => vendor_error(envelope.error, status),
            // Vertex AI's own refusals (auth, quota, permissions) are
            // Google's, read as the Gemini dialect reads them.
            Err(_) if transport::vertex::is_google_error(body) => {
                super::gemini::Gemini.decode_error(status, body)
            }
            Err(_) => GatewayError::new(
                ErrorCode::from_status(status),
                fallback_message(status, body),
            ),
        }
    }
}

impl super::count::Counter for Anthropic {
    /// `POST /v1/messages/count_tokens` with the generation's body as
    /// [`Dialect::encode_request`] makes it, less the members count_tokens
    /// does not take (sampling, `max_tokens`, `stream`, `metadata`).
    fn encode_count(
        &self,
        req: &ChatRequest,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        Some(self.encode_request(req, target).and_then(|generation| {
            let body = super::edit_members(&generation.body, "", |key| match key {
                "max_tokens" | "stop_sequences" | "temperature" | "top_p" | "top_k"
                | "metadata" | "stream" => super::Member::Drop,
                _ => super::Member::Keep,
            })?;
            transport::request(Operation::CountTokens, target, body)
        }))
    }

    /// `{"input_tokens": N}`.
    fn decode_count(&self, body: &[u8]) -> Result<u64, GatewayError> {
        #[derive(Deserialize)]
        struct Count {
            input_tokens: u64,
        }
        serde_json::from_slice::<Count>(body)
            .map(|c| c.input_tokens)
            .map_err(|e| unparseable("token count", e))
    }
}

pub fn finish_reason(stop_reason: &str) -> FinishReason {
    match stop_reason {
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        "pause_turn" => FinishReason::Paused,
        // end_turn, stop_sequence and anything new.
        _ => FinishReason::Stop,
    }
}

/// Anthropic counts cached input apart; OpenAI's prompt_tokens includes it.
fn unified(usage: wire::Usage) -> Usage {
    let cached = usage.cache_read_input_tokens.unwrap_or(0);
    Usage {
        prompt_tokens: usage.input_tokens.unwrap_or(0)
            + cached
            + usage.cache_creation_input_tokens.unwrap_or(0),
        completion_tokens: usage.output_tokens.unwrap_or(0),
        cached_tokens: Some(cached),
        reasoning_tokens: None,
        cache_write_tokens: usage.cache_creation_input_tokens,
    }
}

/// The vendor's error as the gateway's: its code by Anthropic's type.
fn vendor_error(error: ErrorBody, status: u16) -> GatewayError {
    let code = match &*error.kind {
        "invalid_request_error" if error.message.contains("prompt is too long") => {
            ErrorCode::ContextLengthExceeded
        }
        "invalid_request_error" => ErrorCode::InvalidRequest,
        "authentication_error" => ErrorCode::AuthFailed,
        "permission_error" => ErrorCode::PermissionDenied,
        "not_found_error" => ErrorCode::ModelNotFound,
        "request_too_large" => ErrorCode::PayloadTooLarge,
        "rate_limit_error" => ErrorCode::UpstreamRateLimit,
        "overloaded_error" => ErrorCode::UpstreamBusy,
        "timeout_error" => ErrorCode::UpstreamTimeout,
        // api_error and anything new: the HTTP status says more (500 vs 503).
        _ => ErrorCode::from_status(status),
    };
    GatewayError::new(code, error.message.into_owned())
}

#[cfg(test)]
mod messages_tests;
#[cfg(test)]
pub(super) mod tests;
