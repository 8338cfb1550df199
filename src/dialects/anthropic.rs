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
//! surface. Long on purpose (about 900 lines of code, then its tests): one
//! vendor's encoder, decoders and error mapping are read against each other
//! and against the vendor's reference, so they stay in one file, as for
//! every dialect.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::transport::{self, Operation};
use super::{
    edit_members, encode_json, fallback_message, json_instruction, tool_arguments, unparseable,
    DecodedResponse, Dialect, Events, Member, SseStream, StreamDecoder, Target, UpstreamRequest,
};
use crate::error::{ErrorCode, GatewayError};
use crate::model::call::Call;
use crate::model::request::{
    CacheControl, ChatRequest, Content, ContentPart, DocumentSource, Effort, Image, Message,
    Thinking, ToolChoice, WebSearch, MIN_THINKING_BUDGET,
};
use crate::model::response::{Answer, Completion, FinishReason, Origin, ToolCallOut, Usage};
use crate::model::stream::{EventWriter, Reasoning};
use crate::model::Api;
use crate::sse::SseParser;
use crate::wire::anthropic::{
    self as wire, BlockDelta, BlockStart, Cache, ContentBlock as Block, Delta, DocSource,
    ErrorBody, ErrorEnvelope, ImageSource, MessageDelta, MessageStart, Metadata, ResultContent,
    SearchLocation, ThinkingConfig, ToolDef, ToolInput, WebSearchTool,
};

pub struct Anthropic;

pub const API_VERSION: &str = "2023-06-01";

/// One conversation turn of content blocks.
type Turn<'a> = crate::wire::Turn<Block<'a>>;

fn cache(cc: Option<&CacheControl>) -> Option<Cache<'_>> {
    cc.map(|cc| Cache {
        kind: "ephemeral",
        ttl: cc.ttl.as_deref(),
    })
}

/// Anthropic's server-side web search: the answer's `server_tool_use` and
/// `web_search_tool_result` blocks are not carried back (the text that
/// cites them is).
fn web_search_tool(search: &WebSearch) -> WebSearchTool<'_> {
    WebSearchTool {
        kind: "web_search_20250305",
        name: "web_search",
        allowed_domains: &search.allowed_domains,
        user_location: search.user_location.as_ref().map(|l| SearchLocation {
            kind: "approximate",
            city: l.city.as_deref(),
            region: l.region.as_deref(),
            country: l.country.as_deref(),
            timezone: l.timezone.as_deref(),
        }),
    }
}

/// The blocks of a message's content: text (with its cache breakpoints)
/// and, where `rich`, images and documents; `at` locates the message for
/// errors (`messages[i]`).
fn blocks<'a>(content: &'a Content, at: &str, rich: bool) -> Result<Vec<Block<'a>>, GatewayError> {
    let parts = match content {
        Content::Text(t) if t.is_empty() => return Ok(Vec::new()),
        Content::Text(t) => {
            return Ok(vec![Block::Text {
                text: Cow::Borrowed(t),
                cache_control: None,
            }])
        }
        Content::Parts(parts) => parts,
    };
    let mut blocks = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        match part {
            ContentPart::Text { text, .. } if text.is_empty() => {}
            ContentPart::Text {
                text,
                cache_control,
            } => blocks.push(Block::Text {
                text: Cow::Borrowed(text),
                cache_control: cache(cache_control.as_ref()),
            }),
            ContentPart::ImageUrl { .. } | ContentPart::Document(_) if !rich => {}
            ContentPart::ImageUrl {
                image_url,
                cache_control,
            } => {
                let source = match image_url.parse() {
                    Ok(Image::Base64 { media_type, data }) => {
                        ImageSource::Base64 { media_type, data }
                    }
                    Ok(Image::Url(url)) => ImageSource::Url { url },
                    Err(e) => {
                        return Err(GatewayError::invalid(
                            format!("{at}.content[{j}].image_url.url"),
                            e,
                        ))
                    }
                };
                blocks.push(Block::Image {
                    source,
                    cache_control: cache(cache_control.as_ref()),
                });
            }
            ContentPart::Document(doc) => {
                let source = match &doc.source {
                    DocumentSource::Base64 { media_type, data } => {
                        DocSource::Base64 { media_type, data }
                    }
                    DocumentSource::Url(url) => DocSource::Url { url },
                    DocumentSource::Text(data) => DocSource::Text {
                        media_type: "text/plain",
                        data,
                    },
                };
                blocks.push(Block::Document {
                    source,
                    title: doc.title.as_deref(),
                    cache_control: cache(doc.cache_control.as_ref()),
                });
            }
        }
    }
    Ok(blocks)
}

/// A tool result's content: a string unless it holds images or documents.
fn result_content<'a>(content: &'a Content, at: &str) -> Result<ResultContent<'a>, GatewayError> {
    let rich = matches!(content, Content::Parts(parts)
        if parts.iter().any(|p| !matches!(p, ContentPart::Text { cache_control: None, .. })));
    if rich {
        blocks(content, at, true).map(ResultContent::Blocks)
    } else {
        Ok(ResultContent::Text(content.text()))
    }
}

/// The history's reasoning as Anthropic takes it back: signed thinking and
/// redacted blocks; unsigned text (another vendor's) cannot be verified by
/// Anthropic and is left out.
fn thinking_blocks(reasoning: &[Thinking]) -> impl Iterator<Item = Block<'_>> {
    reasoning
        .iter()
        .filter_map(|t| match (&t.redacted, &t.signature) {
            (Some(data), _) => Some(Block::RedactedThinking { data: data.into() }),
            (None, Some(signature)) if !signature.is_empty() => Some(Block::Thinking {
                thinking: t.text.as_str().into(),
                signature: signature.into(),
            }),
            (None, _) => None,
        })
}

/// Whether the history lets Claude think: a tool-use turn last among the
/// assistant turns must start with its signed thinking (Anthropic refuses
/// it otherwise, 400 "Expected `thinking` or `redacted_thinking`"), which a
/// turn another vendor answered never has. An empty signature is none (the
/// Messages surface gives unsigned reasoning one).
pub fn history_allows_thinking(req: &ChatRequest) -> bool {
    let last_assistant = req.messages.iter().rev().find_map(|m| match m {
        Message::Assistant {
            reasoning,
            tool_calls,
            ..
        } => Some((reasoning, tool_calls)),
        _ => None,
    });
    last_assistant.is_none_or(|(reasoning, calls)| {
        calls.is_empty()
            || reasoning.first().is_some_and(|t| {
                t.redacted.is_some() || t.signature.as_deref().is_some_and(|s| !s.is_empty())
            })
    })
}

/// Claude's extended thinking budget for the request's reasoning controls,
/// one rule wherever Claude runs (Anthropic, Bedrock's Converse and
/// InvokeModel). The budget stays below the output limit `max_tokens` as
/// Claude requires (an effort's budget is lowered to fit; a budget the
/// client named that does not fit, or a limit too small for any thinking,
/// is refused; no limit: the caller makes room on top of the budget).
/// Claude refuses thinking with a forced tool call (400 naming
/// `tool_choice`), and with a history it cannot verify
/// ([`history_allows_thinking`]): that one is answered without thinking,
/// as is a model from before extended thinking (`claude_thinks`). What
/// thinking refuses among the sampling controls is dropped
/// ([`claude_sampling`]).
pub fn claude_thinking(
    req: &ChatRequest,
    model: &str,
    max_tokens: Option<u32>,
) -> Result<Option<u32>, GatewayError> {
    let Some(reasoning) = req.reasoning.filter(|_| super::claude_thinks(model)) else {
        return Ok(None);
    };
    if !history_allows_thinking(req) {
        return Ok(None);
    }
    let on =
        reasoning.budget_tokens.is_some() || reasoning.effort.is_some_and(|e| e != Effort::None);
    if on
        && matches!(
            req.tool_choice,
            Some(ToolChoice::Required | ToolChoice::Function(_))
        )
    {
        return Err(GatewayError::invalid(
            "tool_choice",
            "this provider cannot think and be forced to call a tool: use tool_choice auto, or no reasoning",
        ));
    }
    let Some(budget) = reasoning.claude_budget() else {
        return Ok(None);
    };
    let limit_field = if req.max_completion_tokens.is_some() {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    if reasoning.budget_tokens.is_some() && budget < MIN_THINKING_BUDGET {
        return Err(GatewayError::invalid(
            "reasoning.max_tokens",
            format!("this provider thinks with at least {MIN_THINKING_BUDGET} tokens"),
        ));
    }
    // A budget the client named must fit; an effort's is lowered to fit.
    let budget = match (reasoning.budget_tokens, max_tokens) {
        (Some(_), Some(max)) if budget >= max => {
            return Err(GatewayError::invalid(
                limit_field,
                format!("{limit_field} must be greater than the thinking budget"),
            ))
        }
        (None, Some(max)) => budget.min(max.saturating_sub(1)),
        _ => budget,
    };
    if budget < MIN_THINKING_BUDGET {
        return Err(GatewayError::invalid(
            limit_field,
            format!(
                "this provider thinks with at least {MIN_THINKING_BUDGET} tokens: {limit_field} must be above that"
            ),
        ));
    }
    Ok(Some(budget))
}

/// Claude's sampling controls as it takes them, thinking or not. With
/// thinking on Claude refuses `temperature` and `top_k`, and `top_p` below
/// 0.95 ("Extended thinking": feature compatibility): they are dropped
/// then. Current Claude models refuse `temperature` and `top_p` together
/// ("cannot both be specified for this model"): temperature wins. OpenAI's
/// temperature goes up to 2, Claude's up to 1.
pub struct Sampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
}

pub fn claude_sampling(req: &ChatRequest, thinking: bool) -> Sampling {
    let sampling = !thinking;
    Sampling {
        temperature: req.temperature.map(|t| t.min(1.0)).filter(|_| sampling),
        top_p: req
            .top_p
            .filter(|_| req.temperature.is_none() || !sampling)
            .filter(|&p| sampling || p >= 0.95),
        top_k: req.top_k.filter(|_| sampling),
    }
}

const EMPTY_SCHEMA: &str = r#"{"type":"object","properties":{}}"#;

/// What a Messages client's body holds that Claude cannot verify, to be
/// left out of a pass-through (its only edits but `model`; the translated
/// path leaves the same out, [`claude_thinking`], [`thinking_blocks`]):
/// thinking blocks without a signature (the Messages surface's rendering
/// of another vendor's reasoning; Claude refuses them, "Invalid
/// `signature` in `thinking` block"), and `thinking` itself when the
/// history does not let Claude think ([`history_allows_thinking`]), e.g. a
/// tool call another vendor answered before a failover.
#[derive(Default)]
pub struct Unverifiable {
    thinking: bool,
    /// `messages` without the unsigned thinking blocks, when it had some.
    messages: Option<String>,
}

impl Unverifiable {
    pub fn of(req: &ChatRequest, body: &[u8]) -> Result<Self, GatewayError> {
        let unsigned = req.messages.iter().any(|m| {
            matches!(m, Message::Assistant { reasoning, .. }
                if reasoning.iter().any(|t| t.redacted.is_none() && t.signature.as_deref() == Some("")))
        });
        Ok(Self {
            thinking: req.reasoning.is_some() && !history_allows_thinking(req),
            messages: unsigned
                .then(|| without_unsigned_thinking(body))
                .transpose()?,
        })
    }

    /// The edit of one top-level member of the body, if it needs one.
    pub fn edit(&self, key: &str) -> Option<Member<'_>> {
        match key {
            "thinking" if self.thinking => Some(Member::Drop),
            "messages" => self.messages.as_deref().map(Member::Replace),
            _ => None,
        }
    }
}

/// A body's `messages` with every thinking block that has an empty
/// signature left out; the other messages and blocks as they came.
fn without_unsigned_thinking(body: &[u8]) -> Result<String, GatewayError> {
    use serde_json::value::RawValue;
    #[derive(Deserialize)]
    struct Body<'a> {
        #[serde(borrow)]
        messages: &'a RawValue,
    }
    #[derive(Deserialize)]
    struct Turn<'a> {
        #[serde(borrow, default)]
        content: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Cow<'a, str>,
        #[serde(borrow, default)]
        signature: Option<Cow<'a, str>>,
    }
    let invalid =
        |e: String| GatewayError::invalid("messages", format!("invalid request body: {e}"));
    let unsigned = |block: &RawValue| {
        serde_json::from_str::<Kind>(block.get())
            .is_ok_and(|k| k.kind == "thinking" && k.signature.as_deref() == Some(""))
    };
    let text = std::str::from_utf8(body).map_err(|e| invalid(e.to_string()))?;
    let list = serde_json::from_str::<Body>(text)
        .map_err(|e| invalid(e.to_string()))?
        .messages
        .get();
    let messages: Vec<&RawValue> =
        serde_json::from_str(list).map_err(|e| invalid(e.to_string()))?;
    let mut out = String::with_capacity(list.len());
    // Where the previous message ended in `list`: the bytes between
    // messages are kept as they came.
    let mut prev = 0;
    for message in messages {
        let start = (message.get().as_ptr() as usize).saturating_sub(list.as_ptr() as usize);
        out.push_str(list.get(prev..start).unwrap_or_default());
        prev = start + message.get().len();
        let blocks = serde_json::from_str::<Turn>(message.get())
            .ok()
            .and_then(|t| t.content)
            .and_then(|c| serde_json::from_str::<Vec<&RawValue>>(c.get()).ok())
            .filter(|blocks| blocks.iter().any(|b| unsigned(b)));
        let Some(blocks) = blocks else {
            out.push_str(message.get());
            continue;
        };
        let kept: Vec<&str> = blocks
            .iter()
            .filter(|b| !unsigned(b))
            .map(|b| b.get())
            .collect();
        let content = format!("[{}]", kept.join(","));
        let edited = edit_members(message.get().as_bytes(), "", |key| match key {
            "content" => Member::Replace(&content),
            _ => Member::Keep,
        })?;
        out.push_str(&String::from_utf8(edited).map_err(|e| invalid(e.to_string()))?);
    }
    out.push_str(list.get(prev..).unwrap_or_default());
    Ok(out)
}

/// The client's body with its top-level `model` replaced by `model` and
/// what Claude cannot verify left out ([`Unverifiable`]), every other byte
/// kept.
fn with_model(
    body: &[u8],
    model: &str,
    unverifiable: &Unverifiable,
) -> Result<Vec<u8>, GatewayError> {
    let replacement = serde_json::to_string(model)
        .map_err(|e| GatewayError::invalid("body", format!("invalid request body: {e}")))?;
    let mut found = false;
    let out = edit_members(body, "", |key| match key {
        "model" => {
            found = true;
            Member::Replace(&replacement)
        }
        _ => unverifiable.edit(key).unwrap_or(Member::Keep),
    })?;
    if !found {
        return Err(GatewayError::invalid(
            "body",
            "invalid request body: model: Field required",
        ));
    }
    Ok(out)
}

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

    /// Anthropic counts a client of another API's request too (Gemini's
    /// countTokens): [`Self::encode_count`].
    fn counts_tokens(&self) -> bool {
        true
    }

    /// `POST /v1/messages/count_tokens` with the generation's body as
    /// [`Self::encode_request`] makes it, less the members count_tokens
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
            transport::request(Operation::Call(&Call::CountTokens), target, body)
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

    /// `POST /v1/messages/count_tokens`: the client's body, `model` replaced.
    fn encode_call(
        &self,
        call: &Call,
        raw: &dyn Fn() -> Vec<u8>,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        (*call == Call::CountTokens).then(|| {
            with_model(&raw(), target.model, &Unverifiable::default())
                .and_then(|body| transport::request(Operation::Call(call), target, body))
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
        // A thinking budget the client named without an output limit (a
        // Gemini client's `thinkingBudget`): the answer's tokens come on top
        // of it, as on Bedrock; otherwise the limit holds the budget.
        let client_max = req.max_output_tokens();
        let named_budget =
            client_max.is_none() && req.reasoning.is_some_and(|r| r.budget_tokens.is_some());
        let default_max = target.provider.default_max_tokens;
        let limit = (!named_budget).then_some(client_max.unwrap_or(default_max));
        let thinking = claude_thinking(req, target.model, limit)?;
        let max_tokens = match (limit, thinking) {
            (Some(max), _) => max,
            (None, Some(budget)) => budget.saturating_add(default_max),
            (None, None) => default_max,
        };
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
            thinking: thinking.map(|budget_tokens| ThinkingConfig {
                kind: "enabled",
                budget_tokens,
            }),
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

// --- stream -----------------------------------------------------------------

/// Anthropic's stream events (also Bedrock InvokeModel's, unwrapped).
#[derive(Default)]
pub(super) struct AnthropicEvents {
    usage: wire::Usage,
    stop_reason: Option<FinishReason>,
}

fn parse<'a, T: Deserialize<'a>>(data: &'a str) -> Result<T, GatewayError> {
    serde_json::from_str(data).map_err(|e| unparseable("stream event", e))
}

impl Events<SseParser> for AnthropicEvents {
    /// For a Messages client (`w.native()`) every event passes through as
    /// it came, read only for what the session meters; for others each is
    /// translated into the neutral events.
    fn on_event(
        &mut self,
        (event, data): (&str, &str),
        w: &mut EventWriter,
        out: &mut Vec<u8>,
    ) -> Result<(), GatewayError> {
        let native = w.native();
        let mut has_content = false;
        match event {
            "message_start" => {
                let start: MessageStart<IgnoredAny> = parse(data)?;
                w.set_id(&start.message.id);
                w.set_model(&start.message.model);
                if let Some(u) = start.message.usage {
                    self.usage = u;
                }
                if !native {
                    w.start(out);
                }
            }
            "content_block_start" => {
                let start: BlockStart = parse(data)?;
                // An empty text or thinking block says nothing yet: the
                // stream is still held (first-event gating) until it does.
                has_content = match &start.content_block {
                    Block::Text { text, .. } => !text.is_empty(),
                    Block::Thinking { thinking, .. } => !thinking.is_empty(),
                    _ => true,
                };
                match start.content_block {
                    _ if native => {}
                    Block::Text { text, .. } => w.content(out, &text),
                    Block::ToolUse { id, name, .. } => {
                        w.tool_call_start(out, start.index, &id, &name);
                    }
                    Block::Thinking { thinking, .. } => {
                        w.reasoning(out, Reasoning::Text(&thinking));
                    }
                    Block::RedactedThinking { data } => {
                        w.reasoning(out, Reasoning::Redacted(&data));
                    }
                    // Kinds the gateway does not read.
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta: BlockDelta = parse(data)?;
                has_content = true;
                match delta.delta {
                    Delta::TextDelta { text } if native => w.count_delivered(&text),
                    Delta::InputJsonDelta { partial_json } if native => {
                        w.count_delivered(&partial_json)
                    }
                    Delta::ThinkingDelta { thinking } if native => w.count_delivered(&thinking),
                    _ if native => {}
                    Delta::TextDelta { text } => w.content(out, &text),
                    Delta::InputJsonDelta { partial_json } => {
                        w.tool_call_arguments(out, delta.index, &partial_json);
                    }
                    Delta::ThinkingDelta { thinking } => {
                        w.reasoning(out, Reasoning::Text(&thinking));
                    }
                    Delta::SignatureDelta { signature } => {
                        w.reasoning(out, Reasoning::Signature(&signature));
                    }
                    Delta::Other => {}
                }
            }
            "message_delta" => {
                let delta: MessageDelta = parse(data)?;
                if let Some(sequence) = delta.delta.stop_sequence.as_deref() {
                    w.set_stop_sequence(sequence);
                }
                if let Some(reason) = delta.delta.stop_reason.as_deref() {
                    self.stop_reason = Some(finish_reason(reason));
                    has_content = true;
                    if native {
                        w.mark_finished();
                    }
                }
                if let Some(u) = delta.usage {
                    // message_delta usage is cumulative; keep input counts from message_start if absent here.
                    self.usage.output_tokens = u.output_tokens.or(self.usage.output_tokens);
                    self.usage.input_tokens = u.input_tokens.or(self.usage.input_tokens);
                    self.usage.cache_read_input_tokens = u
                        .cache_read_input_tokens
                        .or(self.usage.cache_read_input_tokens);
                    self.usage.cache_creation_input_tokens = u
                        .cache_creation_input_tokens
                        .or(self.usage.cache_creation_input_tokens);
                }
            }
            "message_stop" => {
                if native {
                    passthrough(w, out, event, data, false);
                } else {
                    w.finish(out, self.stop_reason.unwrap_or(FinishReason::Stop));
                }
                w.set_usage(Some(unified(self.usage)));
                w.done(out);
                return Ok(());
            }
            "error" => {
                let envelope: ErrorEnvelope = parse(data)?;
                // What the vendor reported before it failed (message_start) is billed.
                if self.usage.input_tokens.is_some() {
                    w.set_usage(Some(unified(self.usage)));
                }
                return Err(vendor_error(envelope.error, 500));
            }
            // ping, content_block_stop, and event types added later.
            _ => {}
        }
        if native {
            passthrough(w, out, event, data, has_content);
        }
        Ok(())
    }
}

/// One vendor event, framed again as it came (`event:` and its data lines).
fn passthrough(w: &mut EventWriter, out: &mut Vec<u8>, event: &str, data: &str, content: bool) {
    let mut frame = Vec::with_capacity(event.len() + data.len() + 16);
    if !event.is_empty() {
        frame.extend_from_slice(b"event: ");
        frame.extend_from_slice(event.as_bytes());
        frame.push(b'\n');
    }
    for line in data.split('\n') {
        frame.extend_from_slice(b"data: ");
        frame.extend_from_slice(line.as_bytes());
        frame.push(b'\n');
    }
    frame.push(b'\n');
    w.passthrough(out, &frame, content);
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn another_apis_count_is_the_generation_less_what_count_tokens_refuses() {
        let config = crate::config::Config::parse(
            br#"{"providers":{"an":{"dialect":"anthropic","api_key":"k"}},
                 "model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap();
        let target = Target {
            provider: &config.providers["an"],
            model: "claude-x",
        };
        let req = ChatRequest::parse(
            br#"{"model":"g","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],
                "temperature":0.5,"max_tokens":10,"stop":["X"],"stream":true}"#,
        )
        .unwrap();
        let up = Anthropic.encode_count(&req, &target).unwrap().unwrap();
        assert_eq!(up.path, "/v1/messages/count_tokens");
        let body: Value = serde_json::from_slice(&up.body).unwrap();
        assert_eq!(body["model"], "claude-x");
        assert!(body["system"].is_array() && body["messages"].is_array());
        for gone in ["max_tokens", "temperature", "stop_sequences", "stream"] {
            assert!(body.get(gone).is_none(), "{gone}: {body}");
        }
        assert_eq!(Anthropic.decode_count(br#"{"input_tokens":7}"#).unwrap(), 7);
        assert!(Anthropic.decode_count(b"{}").is_err());
    }

    #[test]
    fn count_tokens_is_the_clients_body_with_the_vendor_model() {
        let config = crate::config::Config::parse(
            br#"{"providers":{"an":{"dialect":"anthropic","api_key":"k","base_path":"/anthropic"}},
                 "model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap();
        let target = Target {
            provider: &config.providers["an"],
            model: "claude-x",
        };
        let body = br#"{"model":"g","messages":[{"role":"user","content":"hi"}]}"#;
        let raw = || body.to_vec();
        let up = Anthropic
            .encode_call(&Call::CountTokens, &raw, &target)
            .unwrap()
            .unwrap();
        assert_eq!(up.path, "/anthropic/v1/messages/count_tokens");
        assert!(up.headers.contains(&("x-api-key", "k".into())));
        assert_eq!(
            up.body,
            br#"{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}"#
        );
        let stored = Call::Stored {
            op: crate::model::call::StoredOp::Retrieve,
            id: "resp_1".into(),
            query: String::new(),
        };
        assert!(Anthropic.encode_call(&stored, &raw, &target).is_none());
    }

    const PROVIDER: &str =
        r#"{"dialect":"anthropic","api_key":"sk-ant","default_max_tokens":1000}"#;

    fn encode(body: &str) -> Value {
        let (up, v) = crate::dialects::encode_for(&Anthropic, PROVIDER, "claude-x", body).unwrap();
        assert_eq!(up.path, "/v1/messages");
        assert!(up.headers.contains(&("x-api-key", "sk-ant".into())));
        assert!(up
            .headers
            .contains(&("anthropic-version", API_VERSION.into())));
        v
    }

    #[test]
    fn a_named_budget_without_an_output_limit_gets_room_for_the_answer() {
        let ask = |limit: &str| {
            format!(
                r#"{{"model":"g","messages":[{{"role":"user","content":"hi"}}],"reasoning":{{"max_tokens":8192}}{limit}}}"#
            )
        };
        // No limit named: the answer's default tokens come on top of the budget.
        let v = encode(&ask(""));
        assert_eq!(v["thinking"]["budget_tokens"], 8192);
        assert_eq!(v["max_tokens"], 8192 + 1000);
        // A limit named must hold the budget, as Claude requires.
        let e = crate::dialects::encode_for(
            &Anthropic,
            PROVIDER,
            "claude-x",
            &ask(r#","max_tokens":4096"#),
        )
        .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("max_tokens"));
    }

    #[test]
    fn encodes_system_defaults_and_sampling() {
        let v = encode(
            r#"{"model":"g","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],
                "temperature":1.5,"top_p":0.5,"stop":["X"],"user":"u1","seed":3,"logprobs":true,"stream":true,
                "stream_options":{"include_usage":true}}"#,
        );
        assert_eq!(
            v,
            serde_json::json!({
                "model":"claude-x","max_tokens":1000,
                "system":[{"type":"text","text":"be brief"}],
                "messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],
                "stop_sequences":["X"],"temperature":1.0,
                "metadata":{"user_id":"u1"},"stream":true
            })
        );
    }

    #[test]
    fn encodes_tools_round_trip() {
        let v = encode(
            r#"{"model":"g","max_completion_tokens":50,"messages":[
                {"role":"user","content":[{"type":"text","text":"weather?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD"}},{"type":"image_url","image_url":{"url":"https://x/y.jpg"}}]},
                {"role":"assistant","content":"checking","tool_calls":[
                    {"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
                    {"id":"toolu_2","type":"function","function":{"name":"get_time","arguments":""}}]},
                {"role":"tool","tool_call_id":"toolu_1","content":"sunny"},
                {"role":"tool","tool_call_id":"toolu_2","content":[{"type":"text","text":"noon"}]},
                {"role":"user","content":"thanks"}],
              "tools":[{"type":"function","function":{"name":"get_weather","description":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
                       {"type":"function","function":{"name":"get_time"}}],
              "tool_choice":"required","parallel_tool_calls":false}"#,
        );
        assert_eq!(v["max_tokens"], 50);
        let msgs = v["messages"].as_array().unwrap();
        assert_eq!(
            msgs.len(),
            3,
            "tool results and the next user text merge into one user turn"
        );
        assert_eq!(
            msgs[0]["content"][1],
            serde_json::json!({"type":"image","source":{"type":"base64","media_type":"image/png","data":"QUJD"}})
        );
        assert_eq!(
            msgs[0]["content"][2],
            serde_json::json!({"type":"image","source":{"type":"url","url":"https://x/y.jpg"}})
        );
        assert_eq!(
            msgs[1]["content"][0],
            serde_json::json!({"type":"text","text":"checking"})
        );
        assert_eq!(
            msgs[1]["content"][1],
            serde_json::json!({"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}})
        );
        assert_eq!(msgs[1]["content"][2]["input"], serde_json::json!({}));
        assert_eq!(msgs[2]["role"], "user");
        assert_eq!(
            msgs[2]["content"][0],
            serde_json::json!({"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"})
        );
        assert_eq!(msgs[2]["content"][1]["content"], "noon");
        assert_eq!(
            msgs[2]["content"][2],
            serde_json::json!({"type":"text","text":"thanks"})
        );
        assert_eq!(
            v["tools"][0]["input_schema"]["properties"]["city"]["type"],
            "string"
        );
        assert_eq!(
            v["tools"][1]["input_schema"],
            serde_json::json!({"type":"object","properties":{}})
        );
        assert_eq!(
            v["tool_choice"],
            serde_json::json!({"type":"any","disable_parallel_tool_use":true})
        );
    }

    #[test]
    fn top_p_only_without_temperature() {
        let v = encode(r#"{"model":"g","messages":[{"role":"user","content":"hi"}],"top_p":0.5}"#);
        assert_eq!(
            (v["top_p"].clone(), v.get("temperature")),
            (serde_json::json!(0.5), None)
        );
    }

    #[test]
    fn tool_history_without_tools_declares_them_with_choice_none() {
        let v = encode(
            r#"{"model":"g","messages":[{"role":"user","content":"weather?"},
                {"role":"assistant","content":null,"tool_calls":[
                    {"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"toolu_1","content":"sunny"},
                {"role":"user","content":"thanks"}]}"#,
        );
        assert_eq!(
            v["tools"],
            serde_json::json!([{"name":"get_weather","input_schema":{"type":"object","properties":{}}}])
        );
        assert_eq!(v["tool_choice"], serde_json::json!({"type":"none"}));
        let v = encode(r#"{"model":"g","messages":[{"role":"user","content":"hi"}]}"#);
        assert!(v.get("tools").is_none() && v.get("tool_choice").is_none());
    }

    #[test]
    fn tool_choice_variants() {
        let base = r#"{"model":"g","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":TC}"#;
        for (tc, want) in [
            (r#""auto""#, serde_json::json!({"type":"auto"})),
            (r#""none""#, serde_json::json!({"type":"none"})),
            (
                r#"{"type":"function","function":{"name":"f"}}"#,
                serde_json::json!({"type":"tool","name":"f"}),
            ),
        ] {
            assert_eq!(encode(&base.replace("TC", tc))["tool_choice"], want);
        }
    }

    #[test]
    fn json_mode_goes_into_the_system_prompt() {
        let v = encode(
            r#"{"model":"g","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}"#,
        );
        assert!(v["system"][0]["text"].as_str().unwrap().contains("JSON"));
        assert!(v.get("response_format").is_none());
    }

    #[test]
    fn rejects_n_and_non_object_arguments() {
        let param = |body: &str| {
            crate::dialects::encode_for(&Anthropic, PROVIDER, "m", body)
                .unwrap_err()
                .param
        };
        assert_eq!(
            param(r#"{"model":"g","n":2,"messages":[{"role":"user","content":"x"}]}"#).as_deref(),
            Some("n")
        );
        assert_eq!(
            param(r#"{"model":"g","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}"#).as_deref(),
            Some("messages[0].tool_calls[0].function.arguments")
        );
    }

    #[test]
    fn decodes_response() {
        let body = br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x-1","content":[
            {"type":"thinking","thinking":"hmm","signature":"s"},
            {"type":"text","text":"Let me check."},
            {"type":"tool_use","id":"toolu_9","name":"get_weather","input":{"city":"Paris"}}],
            "stop_reason":"tool_use","stop_sequence":null,
            "usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":4,"cache_creation_input_tokens":1}}"#;
        let mut origin = Origin {
            provider: "an".into(),
            ..Origin::default()
        };
        let d = Anthropic.decode_response(body, &mut origin).unwrap();
        let v: Value = d.chat_json(&origin);
        assert_eq!(v["id"], "msg_1");
        assert_eq!(v["model"], "claude-x-1");
        assert_eq!(v["choices"][0]["message"]["content"], "Let me check.");
        assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["id"], "toolu_9");
        assert_eq!(
            v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            "{\"city\":\"Paris\"}"
        );
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(v["usage"]["prompt_tokens"], 15);
        assert_eq!(v["usage"]["completion_tokens"], 5);
        assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
    }

    #[test]
    fn an_answer_without_a_messages_members_is_unparseable_not_empty() {
        let full = r#""type":"message","id":"msg_1","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}"#;
        // A paused or still-running answer has a null stop_reason.
        let body = format!("{{{full}}}");
        let d = Anthropic
            .decode_response(body.as_bytes(), &mut Origin::default())
            .unwrap();
        assert_eq!(d.finish_reason, None);
        let native = Anthropic
            .decode_native(
                Api::AnthropicMessages,
                body.as_bytes(),
                &mut Origin::default(),
            )
            .unwrap();
        assert_eq!(native.finish_reason, None);
        let mut broken = vec![
            "{}".to_owned(),
            r#"{"type":"error","error":{"type":"api_error","message":"m"}}"#.to_owned(),
            format!(
                "{{{}}}",
                full.replace(r#""type":"message""#, r#""type":"completion""#)
            ),
            format!(
                "{{{}}}",
                full.replace(r#""role":"assistant""#, r#""role":"user""#)
            ),
            format!(
                "{{{}}}",
                full.replace(r#""content":[]"#, r#""content":"hi""#)
            ),
        ];
        for member in [
            r#""type":"message","#,
            r#""id":"msg_1","#,
            r#""role":"assistant","#,
            r#""model":"claude-x","#,
            r#""content":[],"#,
            r#""stop_reason":null,"#,
            r#","usage":{"input_tokens":1,"output_tokens":0}"#,
        ] {
            assert!(full.contains(member), "{member}");
            broken.push(format!("{{{}}}", full.replace(member, "")));
        }
        for body in &broken {
            let e = Anthropic
                .decode_response(body.as_bytes(), &mut Origin::default())
                .unwrap_err();
            assert_eq!(e.code, ErrorCode::UpstreamError, "{body}");
            assert!(
                e.message.contains("could not be parsed"),
                "{body}: {}",
                e.message
            );
            let e = Anthropic
                .decode_native(
                    Api::AnthropicMessages,
                    body.as_bytes(),
                    &mut Origin::default(),
                )
                .unwrap_err();
            assert_eq!(e.code, ErrorCode::UpstreamError, "{body}");
        }
    }

    #[test]
    fn finish_reasons() {
        for (a, o) in [
            ("end_turn", "stop"),
            ("stop_sequence", "stop"),
            ("max_tokens", "length"),
            ("tool_use", "tool_calls"),
            ("refusal", "content_filter"),
            ("pause_turn", "pause_turn"),
        ] {
            assert_eq!(finish_reason(a).as_str(), o);
        }
        // A paused turn is `length` to chat clients (OpenAI's values only).
        let paused = serde_json::to_value(finish_reason("pause_turn")).unwrap();
        assert_eq!(paused, "length");
    }

    #[test]
    fn maps_errors() {
        let cases = [
            (
                400,
                "invalid_request_error",
                "bad",
                ErrorCode::InvalidRequest,
            ),
            (
                400,
                "invalid_request_error",
                "prompt is too long: 250000 tokens > 200000 maximum",
                ErrorCode::ContextLengthExceeded,
            ),
            (401, "authentication_error", "x", ErrorCode::AuthFailed),
            (403, "permission_error", "x", ErrorCode::PermissionDenied),
            (404, "not_found_error", "x", ErrorCode::ModelNotFound),
            (413, "request_too_large", "x", ErrorCode::PayloadTooLarge),
            (429, "rate_limit_error", "x", ErrorCode::UpstreamRateLimit),
            (500, "api_error", "x", ErrorCode::UpstreamError),
            (
                529,
                "overloaded_error",
                "Overloaded",
                ErrorCode::UpstreamBusy,
            ),
        ];
        for (status, kind, msg, code) in cases {
            let body =
                format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"{msg}"}}}}"#);
            let e = Anthropic.decode_error(status, body.as_bytes());
            assert_eq!(e.code, code, "{kind}");
            assert_eq!(e.message, msg);
        }
    }

    pub(crate) const TOOL_STREAM: &str = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1,\"cache_read_input_tokens\":2}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me \u{e9}\u{1f30d}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"get_time\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":30}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    fn run(chunks: &[&[u8]], include_usage: bool) -> (Vec<Value>, String) {
        let origin = Origin {
            provider: "an".into(),
            model: "req-model".into(),
            ..Origin::default()
        };
        crate::dialects::run_stream(&Anthropic, origin, chunks, include_usage)
    }

    #[test]
    fn stream_translates_to_unified_chunks() {
        let (ev, text) = run(&[TOOL_STREAM.as_bytes()], true);
        assert!(text.ends_with("data: [DONE]\n\n"));
        assert!(ev.iter().all(|e| e["id"] == "msg_1"
            && e["model"] == "claude-x"
            && e["object"] == "chat.completion.chunk"));
        assert_eq!(
            ev[0]["choices"][0]["delta"],
            serde_json::json!({"role":"assistant","content":"","refusal":null})
        );
        assert_eq!(
            ev[1]["choices"][0]["delta"]["content"],
            "Let me \u{e9}\u{1f30d}"
        );
        let tc = |i: usize| ev[i]["choices"][0]["delta"]["tool_calls"][0].clone();
        assert_eq!(
            tc(2),
            serde_json::json!({"index":0,"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":""}})
        );
        assert_eq!(
            tc(3),
            serde_json::json!({"index":0,"function":{"arguments":"{\"city\": "}})
        );
        assert_eq!(tc(4)["function"]["arguments"], "\"Paris\"}");
        assert_eq!(tc(5)["index"], 1);
        assert_eq!(tc(5)["id"], "toolu_2");
        assert_eq!(
            tc(6),
            serde_json::json!({"index":1,"function":{"arguments":"{}"}})
        );
        assert_eq!(ev[7]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            ev[8]["usage"],
            serde_json::json!({"prompt_tokens":14,"completion_tokens":30,"total_tokens":44,"prompt_tokens_details":{"cached_tokens":2}})
        );
        assert_eq!(ev.len(), 9);
    }
}

/// The dialect with clients of the Messages API (a pass-through pair) and
/// the neutral request's thinking and caching controls.
#[cfg(test)]
mod messages_tests {
    use super::*;
    use crate::model::request::{Reasoning as ReasoningControl, Thinking};
    use crate::surfaces::anthropic_messages::request::parse;
    use serde_json::Value;

    const PROVIDER: &str =
        r#"{"dialect":"anthropic","api_key":"sk-ant","default_max_tokens":1000}"#;

    fn config() -> crate::config::Config {
        crate::config::Config::parse(
            format!(
                r#"{{"providers":{{"p":{PROVIDER}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#
            )
            .as_bytes(),
            |_| None,
        )
        .unwrap()
    }

    /// The neutral encoding of a request (as for a client of another API).
    fn encode(req: &ChatRequest) -> Result<Value, GatewayError> {
        let config = config();
        let target = Target {
            provider: &config.providers["p"],
            model: "claude-x",
        };
        let up = Anthropic.encode_request(req, &target)?;
        Ok(serde_json::from_slice(&up.body).unwrap())
    }

    fn messages(body: &str) -> ChatRequest {
        parse(body.as_bytes()).unwrap()
    }

    #[test]
    fn native_body_keeps_every_byte_but_the_model() {
        let body = "{ \"max_tokens\" :5,\n  \"model\"\t:  \"g\\u0020x\", \"messages\":[{\"role\":\"user\",\"content\":\"h\u{e9}  \\n\"}],\"service_tier\":\"auto\"}";
        let config = config();
        let target = Target {
            provider: &config.providers["p"],
            model: "claude-\"x\"",
        };
        let req = messages(body);
        let raw = crate::dialects::ClientRequest {
            body: &|| body.as_bytes().to_vec(),
            header: &|_| None,
        };
        let up = Anthropic
            .encode_native(Api::AnthropicMessages, &raw, &req, &target)
            .unwrap()
            .unwrap();
        assert_eq!(
            String::from_utf8(up.body).unwrap(),
            body.replace("\"g\\u0020x\"", "\"claude-\\\"x\\\"\"")
        );
        assert_eq!(up.path, "/v1/messages");
        assert!(up.headers.contains(&("x-api-key", "sk-ant".into())));
        assert!(up
            .headers
            .contains(&("anthropic-version", API_VERSION.into())));
        assert!(Anthropic.takes_client_header(Api::AnthropicMessages, b"anthropic-beta"));
        assert!(!Anthropic.takes_client_header(Api::OpenAiChat, b"anthropic-beta"));
        assert!(!Anthropic.takes_client_header(Api::AnthropicMessages, b"anthropic-version"));
        let raw = crate::dialects::ClientRequest {
            body: &|| b"{\"max_tokens\":1}".to_vec(),
            header: &|_| None,
        };
        let e = Anthropic
            .encode_native(Api::AnthropicMessages, &raw, &req, &target)
            .unwrap()
            .unwrap_err();
        assert!(e.message.contains("model: Field required"));
    }

    #[test]
    fn native_body_loses_thinking_only_for_a_history_claude_cannot_verify() {
        let history = r#"{"model":"g", "max_tokens":4096, "thinking":{"type":"enabled","budget_tokens":2048},
            "tools":[{"name":"f","input_schema":{"type":"object"}}],
            "messages":[{"role":"user","content":"q"},
              {"role":"assistant","content":[CONTENT{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
              {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}]}"#;
        let config = config();
        let target = Target {
            provider: &config.providers["p"],
            model: "g",
        };
        let native = |body: &str| {
            let req = messages(body);
            let raw = crate::dialects::ClientRequest {
                body: &|| body.as_bytes().to_vec(),
                header: &|_| None,
            };
            let up = Anthropic
                .encode_native(Api::AnthropicMessages, &raw, &req, &target)
                .unwrap()
                .unwrap();
            String::from_utf8(up.body).unwrap()
        };
        // Another vendor's tool turn (no thinking, or unsigned): without
        // thinking, and without the unsigned block.
        let thinking = r#" "thinking":{"type":"enabled","budget_tokens":2048},"#;
        let bare = history.replace("CONTENT", "");
        assert_eq!(native(&bare), bare.replace(thinking, ""));
        let unsigned = history.replace(
            "CONTENT",
            r#"{"type":"thinking","thinking":"t","signature":""}, "#,
        );
        assert_eq!(native(&unsigned), bare.replace(thinking, ""));
        // Claude's own signed turn: every byte kept.
        let signed = history.replace(
            "CONTENT",
            r#"{"type":"thinking","thinking":"t","signature":"s"},"#,
        );
        assert_eq!(native(&signed), signed);
        // Another vendor's unsigned thinking in an earlier turn: the block
        // left out (Claude refuses it), thinking kept; other turns as sent.
        let earlier = r#"{"model":"g","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"q"},
            {"role":"assistant", "content":[{"type":"thinking","thinking":"t","signature":""}, {"type":"text","text":"a"}]},  {"role":"user","content":"again"}]}"#;
        assert_eq!(
            native(earlier),
            earlier.replace(
                r#"{"role":"assistant", "content":[{"type":"thinking","thinking":"t","signature":""}, {"type":"text","text":"a"}]},  "#,
                r#"{"role":"assistant", "content":[{"type":"text","text":"a"}]},  "#
            )
        );
    }

    #[test]
    fn native_answer_is_the_vendors_read_for_metering() {
        let body = br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x-1","content":[{"type":"text","text":"hi","citations":[{"type":"char_location"}]}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2,"cache_read_input_tokens":4}}"#;
        let mut origin = Origin::default();
        let d = Anthropic
            .decode_native(Api::AnthropicMessages, body, &mut origin)
            .unwrap();
        assert!(matches!(&d.answer, Answer::Native(b) if b == body));
        assert_eq!(d.finish_reason, Some(FinishReason::Length));
        assert_eq!(d.usage.map(|u| u.prompt_tokens), Some(7));
        assert_eq!(
            (origin.id.as_str(), origin.model.as_str()),
            ("msg_1", "claude-x-1")
        );
    }

    const THINKING_STREAM: &str = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n",
        "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm \u{e9}\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"sig\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"enc\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    fn run(api: Api, chunks: &[&[u8]]) -> (String, EventWriterFacts) {
        let origin = Origin {
            provider: "an".into(),
            ..Origin::default()
        };
        let writer =
            crate::surfaces::stream_writer(api, Anthropic.speaks(api), origin, "rid".into(), false);
        let mut d = Anthropic.stream_decoder(writer);
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out);
        }
        d.finish(&mut out);
        let w = d.writer();
        let facts = EventWriterFacts {
            usage: w.usage(),
            content_started: w.content_started(),
            finished: w.finished(),
            failed: w.failure().is_some(),
            delivered: w.delivered_tokens(),
        };
        (String::from_utf8(out).unwrap(), facts)
    }

    #[derive(Debug, PartialEq)]
    struct EventWriterFacts {
        usage: Option<Usage>,
        content_started: bool,
        finished: bool,
        failed: bool,
        delivered: u64,
    }

    #[test]
    fn native_stream_passes_every_event_through_and_meters_it() {
        let (out, facts) = run(Api::AnthropicMessages, &[THINKING_STREAM.as_bytes()]);
        assert_eq!(out, THINKING_STREAM);
        assert_eq!(
            facts.usage,
            Some(Usage {
                prompt_tokens: 12,
                completion_tokens: 9,
                cached_tokens: Some(0),
                reasoning_tokens: None,
            })
        );
        assert!(facts.content_started && facts.finished && !facts.failed);
        assert!(facts.delivered > 0);
        // However the network cuts it.
        let bytes = THINKING_STREAM.as_bytes();
        for i in (0..bytes.len()).step_by(7) {
            let (a, b) = bytes.split_at(i);
            assert_eq!(run(Api::AnthropicMessages, &[a, b]).0, THINKING_STREAM);
        }
        // A cut stream ends with the surface's error event.
        let (out, facts) = run(Api::AnthropicMessages, &[&bytes[..400]]);
        assert!(out.ends_with("\n\n") && out.contains("event: error\ndata: {\"type\":\"error\""));
        assert!(facts.failed);
    }

    #[test]
    fn thinking_decodes_into_neutral_reasoning() {
        let (out, _) = run(Api::OpenAiChat, &[THINKING_STREAM.as_bytes()]);
        assert!(out.contains(r#""reasoning_content":"hmm é""#), "{out}");
        let body = br#"{"type":"message","id":"m","role":"assistant","model":"c","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"r"},{"type":"text","text":"x"}],"stop_reason":"end_turn","usage":{}}"#;
        let d = Anthropic
            .decode_response(body, &mut Origin::default())
            .unwrap();
        let Answer::Decoded(c) = d.answer else {
            panic!()
        };
        assert_eq!(
            c.reasoning,
            [
                Thinking {
                    text: "t".into(),
                    signature: Some("s".into()),
                    redacted: None
                },
                Thinking {
                    redacted: Some("r".into()),
                    ..Thinking::default()
                }
            ]
        );
    }

    #[test]
    fn encodes_caching_documents_tool_errors_and_thinking_history() {
        let req = messages(
            r#"{"model":"g","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},
            "system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral","ttl":"1h"}}],
            "messages":[
              {"role":"user","content":[{"type":"text","text":"q","cache_control":{"type":"ephemeral"}},
                {"type":"image","source":{"type":"url","url":"https://x/y.png"},"cache_control":{"type":"ephemeral"}},
                {"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"},"title":"T","cache_control":{"type":"ephemeral"}}]},
              {"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"r"},
                {"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}]},
              {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"cache_control":{"type":"ephemeral"},
                "content":[{"type":"text","text":"bad"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QQ=="}}]}]}],
            "tools":[{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
            "top_k":5,"temperature":0.5}"#,
        );
        let v = encode(&req).unwrap();
        assert_eq!(
            v["system"],
            serde_json::json!([{"type":"text","text":"sys","cache_control":{"type":"ephemeral","ttl":"1h"}}])
        );
        assert_eq!(
            v["messages"][0]["content"],
            serde_json::json!([
                {"type":"text","text":"q","cache_control":{"type":"ephemeral"}},
                {"type":"image","source":{"type":"url","url":"https://x/y.png"},"cache_control":{"type":"ephemeral"}},
                {"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"},"title":"T","cache_control":{"type":"ephemeral"}}])
        );
        assert_eq!(
            v["messages"][1]["content"],
            serde_json::json!([
                {"type":"thinking","thinking":"t","signature":"s"},
                {"type":"redacted_thinking","data":"r"},
                {"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}])
        );
        assert_eq!(
            v["messages"][2]["content"],
            serde_json::json!([{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"cache_control":{"type":"ephemeral"},
                "content":[{"type":"text","text":"bad"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QQ=="}}]}])
        );
        assert_eq!(
            v["tools"][0]["cache_control"],
            serde_json::json!({"type":"ephemeral"})
        );
        assert_eq!(
            v["thinking"],
            serde_json::json!({"type":"enabled","budget_tokens":2048})
        );
        // Anthropic refuses temperature and top_k with thinking on.
        assert!(v.get("temperature").is_none() && v.get("top_k").is_none());
        let plain = messages(
            r#"{"model":"g","max_tokens":100,"top_k":5,"messages":[{"role":"user","content":"x"}]}"#,
        );
        let v = encode(&plain).unwrap();
        assert_eq!(
            (v["top_k"].clone(), v.get("thinking")),
            (serde_json::json!(5), None)
        );
    }

    #[test]
    fn efforts_become_budgets_below_max_tokens() {
        let with = |effort: Option<Effort>, budget: Option<u32>, max: u32| {
            let mut req = messages(
                r#"{"model":"g","max_tokens":1,"messages":[{"role":"user","content":"x"}]}"#,
            );
            req.max_tokens = Some(max);
            req.reasoning = Some(ReasoningControl {
                effort,
                budget_tokens: budget,
            });
            encode(&req).map(|v| v["thinking"].clone())
        };
        let budget = |n: u32| Ok(serde_json::json!({"type":"enabled","budget_tokens":n}));
        assert_eq!(with(Some(Effort::Minimal), None, 20_000), budget(1024));
        assert_eq!(with(Some(Effort::Low), None, 20_000), budget(2048));
        assert_eq!(with(Some(Effort::Medium), None, 20_000), budget(8192));
        assert_eq!(with(Some(Effort::High), None, 20_000), budget(16384));
        assert_eq!(with(Some(Effort::High), None, 4000), budget(3999));
        assert_eq!(with(Some(Effort::None), None, 4000), Ok(Value::Null));
        assert_eq!(with(None, Some(3000), 4000), budget(3000));
        for (effort, budget, max) in [(Some(Effort::Low), None, 1000), (None, Some(4000), 4000)] {
            assert_eq!(
                with(effort, budget, max).unwrap_err().param.as_deref(),
                Some("max_tokens")
            );
        }
    }

    #[test]
    fn thinking_is_off_for_a_tool_turn_without_signed_thinking_and_refused_with_forced_tools() {
        let history = r#"{"model":"g","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},
            "tools":[{"name":"f","input_schema":{"type":"object"}}],
            "messages":[{"role":"user","content":"q"},
              {"role":"assistant","content":[CONTENT{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
              {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}]}"#;
        let unsigned = messages(&history.replace("CONTENT", ""));
        assert_eq!(encode(&unsigned).unwrap().get("thinking"), None);
        let signed = messages(&history.replace(
            "CONTENT",
            r#"{"type":"thinking","thinking":"t","signature":"s"},"#,
        ));
        assert!(encode(&signed).unwrap()["thinking"].is_object());
        let forced = messages(
            r#"{"model":"g","max_tokens":4096,"thinking":{"type":"adaptive"},"tool_choice":{"type":"any"},
            "tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"q"}]}"#,
        );
        assert_eq!(
            encode(&forced).unwrap_err().param.as_deref(),
            Some("tool_choice")
        );
    }

    #[test]
    fn unsigned_reasoning_of_another_vendor_is_left_out() {
        let mut req = messages(
            r#"{"model":"g","max_tokens":100,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}"#,
        );
        if let Some(Message::Assistant { reasoning, .. }) = req.messages.get_mut(1) {
            reasoning.push(Thinking {
                text: "unsigned".into(),
                ..Thinking::default()
            });
        }
        let v = encode(&req).unwrap();
        assert_eq!(
            v["messages"][1]["content"],
            serde_json::json!([{"type":"text","text":"y"}])
        );
    }
}
