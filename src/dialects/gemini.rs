//! Google Gemini API, native (`POST /v1beta/models/{model}:generateContent`
//! and `:streamGenerateContent?alt=sse`, header `x-goog-api-key`).
//!
//! Gemini rejects unknown fields, so only what it understands is sent:
//! system messages become `systemInstruction`, turns are `contents` with roles
//! `user`/`model`, sampling goes into `generationConfig`, tools into
//! `functionDeclarations` (JSON Schema as `parametersJsonSchema`), JSON mode
//! into `responseMimeType` + `responseJsonSchema`.
//!
//! Tool call ids: Gemini gives none, so we make them, deterministic and in
//! the charset every vendor accepts (`[A-Za-z0-9_-]`):
//! `call_<16 hex digits hashing the response id>_<n>`. When Gemini signs a
//! call (`thoughtSignature`, which must come back on the next turn or
//! multi-turn tool use fails), the signature rides in the id, base64url
//! without padding: `call_<hash>_<n>_ts_<signature>`. A client that echoes
//! the assistant message back (every OpenAI client does) thus returns it, and
//! we put it back on the `functionCall` part. Tool results name no function
//! in OpenAI's format: the name comes from the assistant tool call with the
//! same id earlier in the request.
//!
//! Reasoning: the request's effort or budget becomes
//! `generationConfig.thinkingConfig` (see `thinking_config`) with
//! `includeThoughts`, and `thought: true` parts come back as reasoning (a
//! signature on one closes its block). Reasoning in the history is not sent
//! back: the signatures Gemini checks are the function calls' (in the ids).
//!
//! Content filtering: a prompt blocked (`promptFeedback.blockReason`, HTTP 200
//! without candidates) is a 400 `CONTENT_FILTERED`, or, once a stream has
//! started, a unified stream error; SAFETY-family finish reasons are
//! `finish_reason: content_filter`. To a Gemini client (the pass-through) the
//! verdict is Gemini's answer, passed on as it came and metered as filtered.
//!
//! The wire types are [`crate::wire::gemini`]'s, shared with the Gemini
//! surface; here are the encoder, the decoders and the error mapping.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::transport::{self, Operation};
use super::{
    encode_json, fallback_message, tool_arguments, unparseable, DecodedResponse, Dialect, Events,
    SseStream, StreamDecoder, Target, UpstreamRequest,
};
use crate::error::{ErrorCode, GatewayError};
use crate::model::call::Call;
use crate::model::request::{
    ChatRequest, Content, ContentPart, Effort, Image, Message, Reasoning as ReasoningAsk,
    ResponseFormat, ToolChoice,
};
use crate::model::response::Answer;
use crate::model::response::{Completion, FinishReason, Origin, ToolCallOut, Usage};
use crate::model::stream::{EventWriter, Reasoning};
use crate::model::Api;
use crate::sse::SseParser;
use crate::wire::gemini::{
    Blob, Content as Turn, CountTokensResponse, ErrorBody, FunctionCall, FunctionCallingConfig,
    FunctionDeclaration, FunctionResponse, GenerateContentRequest as Request,
    GenerateContentResponse as GenerateResponse, GenerationConfig, Part, Status, Text,
    ThinkingConfig, Tool as Tools, ToolConfig, UsageMetadata,
};

pub struct Gemini;

/// Google's documented stand-in for a function call Gemini did not sign
/// (history from another vendor, or an id we did not make).
const UNSIGNED: &str = "skip_thought_signature_validator";
const SIGNATURE_MARK: &str = "_ts_";

// --- request ----------------------------------------------------------------

/// Whether the model takes built-in tools (Google Search) beside function
/// declarations: Gemini 3 only (ai.google.dev/gemini-api/docs/tool-combination,
/// "supported for Gemini 3 models only"; Gemini 2.x refuses the mix with or
/// without the flag), so the flag is sent only there, only when mixing.
fn combines_tools(model: &str) -> bool {
    model.contains("gemini-3")
}

/// The request's reasoning as Gemini's `thinkingConfig`
/// (ai.google.dev/gemini-api/docs/thinking). Gemini 3 takes a
/// `thinkingLevel` (Pro: low, high; Flash: minimal, low, medium, high; it
/// cannot stop thinking, so effort `none` is its lowest level, and an effort
/// a model lacks is the next one up); a token budget is sent as
/// `thinkingBudget`, which Gemini 3 still takes. Gemini 2.5 takes a
/// `thinkingBudget`: an effort becomes 0 (none; 2.5 Pro cannot stop, so its
/// minimum 128), 512 (minimal), 1024 (low), 8192 (medium), 24576 (high).
/// `includeThoughts` is set whenever the model is to think, so the thought
/// summaries come back as reasoning.
fn thinking_config(ask: ReasoningAsk, model: &str) -> ThinkingConfig<'static> {
    let gemini3 = model.contains("gemini-3");
    let pro = model.contains("-pro");
    let off = ask.effort == Some(Effort::None) && ask.budget_tokens.is_none();
    let (thinking_budget, thinking_level) = match (ask.budget_tokens, ask.effort) {
        (Some(budget), _) => (Some(budget), None),
        (None, None) => (None, None),
        (None, Some(effort)) if gemini3 => (None, Some(thinking_level(effort, pro))),
        (None, Some(effort)) => (Some(thinking_budget(effort, pro)), None),
    };
    ThinkingConfig {
        include_thoughts: (!off || (gemini3 || pro)).then_some(true),
        thinking_budget: thinking_budget.map(i64::from),
        thinking_level: thinking_level.map(Text::from),
    }
}

fn thinking_level(effort: Effort, pro: bool) -> &'static str {
    match (effort, pro) {
        (Effort::None | Effort::Minimal | Effort::Low, true) => "low",
        (Effort::Medium | Effort::High, true) | (Effort::High, false) => "high",
        (Effort::None | Effort::Minimal, false) => "minimal",
        (Effort::Low, false) => "low",
        (Effort::Medium, false) => "medium",
    }
}

fn thinking_budget(effort: Effort, pro: bool) -> u32 {
    match effort {
        Effort::None if pro => 128,
        Effort::None => 0,
        Effort::Minimal => 512,
        Effort::Low => 1024,
        Effort::Medium => 8192,
        Effort::High => 24576,
    }
}

fn text_part(text: &str) -> Option<Part<'_>> {
    (!text.is_empty()).then_some(Part {
        text: Some(text.into()),
        ..Part::default()
    })
}

fn text_parts(content: &Content) -> Vec<Part<'_>> {
    match content {
        Content::Text(t) => text_part(t).into_iter().collect(),
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text, .. } => text_part(text),
                ContentPart::ImageUrl { .. } | ContentPart::Document(_) => None,
            })
            .collect(),
    }
}

fn user_parts(content: &Content, i: usize) -> Result<Vec<Part<'_>>, GatewayError> {
    let Content::Parts(parts) = content else {
        return Ok(text_parts(content));
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        match part {
            ContentPart::Text { text, .. } => out.extend(text_part(text)),
            ContentPart::ImageUrl { image_url, .. } => match image_url.parse() {
                Ok(Image::Base64 { media_type, data }) => out.push(Part {
                    inline_data: Some(Blob {
                        mime_type: media_type.into(),
                        data: data.into(),
                    }),
                    ..Part::default()
                }),
                Ok(Image::Url(_)) => {
                    return Err(GatewayError::invalid(
                        format!("messages[{i}].content[{j}].image_url.url"),
                        "this provider takes images only as base64 data URLs",
                    ))
                }
                Err(e) => {
                    return Err(GatewayError::invalid(
                        format!("messages[{i}].content[{j}].image_url.url"),
                        e,
                    ))
                }
            },
            ContentPart::Document(_) => return Err(crate::dialects::no_documents(i, j)),
        }
    }
    Ok(out)
}

/// Appends parts, merging consecutive turns of one role (Gemini wants all
/// function responses to one model turn in one user turn).
fn push_turn<'a>(turns: &mut Vec<Turn<'a>>, role: &'static str, parts: Vec<Part<'a>>) {
    if parts.is_empty() {
        return;
    }
    match turns.last_mut() {
        Some(last) if last.role.as_deref() == Some(role) => last.parts.extend(parts),
        _ => turns.push(Turn {
            role: Some(role.into()),
            parts,
        }),
    }
}

/// `functionResponse.response` must be an object: a JSON object result as
/// is, anything else under `result`; a failed tool's output under `error`
/// (Gemini's key for "error details", FunctionResponse in the API reference).
fn function_response(content: &Content, is_error: bool) -> Value {
    let text = content.text();
    let key = match serde_json::from_str::<Value>(&text) {
        Ok(v @ Value::Object(_)) if !is_error => return v,
        _ if is_error => "error",
        _ => "result",
    };
    let mut wrapped = Map::new();
    wrapped.insert(key.into(), Value::String(text));
    Value::Object(wrapped)
}

impl Dialect for Gemini {
    fn speaks(&self, api: Api) -> bool {
        api == Api::Gemini
    }

    /// The client's body as it came: the model is the path's, which the
    /// transport writes (the vendor model), and the gateway key was a
    /// header or the query, which the transport replaces.
    fn encode_native(
        &self,
        _api: Api,
        client: &super::ClientRequest,
        req: &ChatRequest,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        let body = (client.body)();
        Some(transport::request(
            Operation::Generate { stream: req.stream },
            target,
            body,
        ))
    }

    /// `:countTokens`: the client's body, a `generateContentRequest`'s
    /// `model` (which countTokens requires) replaced by the vendor model.
    fn encode_call(
        &self,
        call: &Call,
        raw: &dyn Fn() -> Vec<u8>,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        let Call::GeminiCountTokens { .. } = call else {
            return None;
        };
        Some(
            count_body(raw(), target.model)
                .and_then(|body| transport::request(Operation::CountTokens, target, body)),
        )
    }

    /// The vendor's answer as it came, read for its usage and finish.
    fn decode_native(
        &self,
        _api: Api,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        let response: GenerateResponse =
            serde_json::from_slice(body).map_err(|e| unparseable("response", e))?;
        stamp(&response, origin);
        let candidate = response.candidates.first();
        let calls = candidate
            .and_then(|c| c.content.as_ref())
            .is_some_and(|c| c.parts.iter().any(|p| p.function_call.is_some()));
        // A blocked prompt (`promptFeedback.blockReason`, no candidates) is
        // Gemini's own answer to a Gemini client: passed on as it came,
        // metered as filtered.
        let blocked = candidate.is_none()
            && response
                .prompt_feedback
                .as_ref()
                .is_some_and(|f| f.block_reason.is_some());
        let finish_reason = match candidate.and_then(|c| c.finish_reason.as_deref()) {
            _ if blocked => Some(FinishReason::ContentFilter),
            reason => reason.map(|r| finish_reason(r, calls)),
        };
        Ok(DecodedResponse {
            answer: Answer::Native(body.to_vec()),
            usage: response.usage_metadata.map(unified_usage),
            finish_reason,
        })
    }

    /// Google Search grounding, when the request has no domain filter
    /// (Gemini has none) and no function tools, or the model combines both
    /// (see [`Tools::google_search`]).
    fn web_search(&self, req: &ChatRequest, model: &str) -> bool {
        (req.tools.is_empty() || combines_tools(model))
            && req
                .web_search
                .as_ref()
                .is_some_and(|s| s.allowed_domains.is_empty())
    }

    fn encode_request(
        &self,
        req: &ChatRequest,
        target: &Target,
    ) -> Result<UpstreamRequest, GatewayError> {
        super::single_choice(req)?;
        let mut system = Vec::new();
        let mut turns: Vec<Turn> = Vec::with_capacity(req.messages.len());
        // Tool call id → function name, from the assistant turns seen so far.
        let mut call_names: Vec<(&str, &str)> = Vec::new();
        for (i, message) in req.messages.iter().enumerate() {
            match message {
                Message::System { content, .. } | Message::Developer { content, .. } => {
                    system.extend(text_parts(content));
                }
                Message::User { content, .. } => {
                    push_turn(&mut turns, "user", user_parts(content, i)?)
                }
                Message::Tool {
                    content,
                    tool_call_id,
                    is_error,
                    ..
                } => {
                    let name = call_names
                        .iter()
                        .find(|(id, _)| id == tool_call_id)
                        .map(|(_, name)| *name)
                        .ok_or_else(|| {
                            GatewayError::invalid(
                                format!("messages[{i}].tool_call_id"),
                                "no earlier assistant tool call has this id",
                            )
                        })?;
                    let part = Part {
                        function_response: Some(FunctionResponse {
                            id: None,
                            name: name.into(),
                            response: function_response(content, *is_error),
                        }),
                        ..Part::default()
                    };
                    push_turn(&mut turns, "user", vec![part]);
                }
                Message::Assistant {
                    content,
                    tool_calls,
                    ..
                } => {
                    let mut parts = content.as_ref().map(text_parts).unwrap_or_default();
                    let signed = tool_calls
                        .iter()
                        .any(|c| split_tool_call_id(&c.id).is_some());
                    for (j, call) in tool_calls.iter().enumerate() {
                        call_names.push((&call.id, &call.function.name));
                        let signature = match split_tool_call_id(&call.id) {
                            Some(signature) => Some(Text(Cow::Owned(signature))),
                            None if j == 0 && !signed => Some(Text::from(UNSIGNED)),
                            None => None,
                        };
                        parts.push(Part {
                            function_call: Some(FunctionCall {
                                id: None,
                                name: call.function.name.as_str().into(),
                                args: Some(tool_arguments(call, i, j)?),
                            }),
                            thought_signature: signature,
                            ..Part::default()
                        });
                    }
                    push_turn(&mut turns, "model", parts);
                }
            }
        }
        let mut tools = if req.tools.is_empty() {
            Vec::new()
        } else {
            vec![Tools {
                function_declarations: req
                    .tools
                    .iter()
                    .map(|t| FunctionDeclaration {
                        name: t.function.name.as_str().into(),
                        description: t.function.description.as_deref().map(Text::from),
                        parameters_json_schema: t.function.parameters.as_ref().map(Cow::Borrowed),
                        ..FunctionDeclaration::default()
                    })
                    .collect(),
                ..Tools::default()
            }]
        };
        let search = self.web_search(req, target.model);
        if search {
            tools.push(Tools {
                google_search: Some(Value::Object(Map::new())),
                ..Tools::default()
            });
        }
        let function_calling_config = if req.tools.is_empty() {
            None
        } else {
            req.tool_choice.as_ref().map(|choice| {
                let (mode, name) = match choice {
                    ToolChoice::None => ("NONE", None),
                    ToolChoice::Auto => ("AUTO", None),
                    ToolChoice::Required => ("ANY", None),
                    ToolChoice::Function(name) => ("ANY", Some(vec![Text::from(name.as_str())])),
                };
                FunctionCallingConfig {
                    mode: Some(mode.into()),
                    allowed_function_names: name,
                }
            })
        };
        let mixed = search && !req.tools.is_empty();
        let tool_config = (function_calling_config.is_some() || mixed).then_some(ToolConfig {
            function_calling_config,
            include_server_side_tool_invocations: mixed,
            retrieval_config: None,
        });
        let (response_mime_type, response_json_schema) = match &req.response_format {
            Some(ResponseFormat::JsonObject) => (Some("application/json".into()), None),
            Some(ResponseFormat::JsonSchema { json_schema }) => (
                Some("application/json".into()),
                json_schema.schema.as_ref().map(Cow::Borrowed),
            ),
            Some(ResponseFormat::Text) | None => (None, None),
        };
        let request = Request {
            contents: turns,
            system_instruction: (!system.is_empty()).then_some(Turn {
                role: None,
                parts: system,
            }),
            tools,
            tool_config,
            generation_config: GenerationConfig {
                stop_sequences: Cow::Borrowed(&req.stop),
                temperature: req.temperature,
                top_p: req.top_p,
                max_output_tokens: req.max_output_tokens(),
                seed: req.seed,
                response_mime_type,
                response_json_schema,
                thinking_config: req.reasoning.map(|r| thinking_config(r, target.model)),
                ..GenerationConfig::default()
            },
            ..Request::default()
        };
        let body = encode_json(req, &request)?;
        transport::request(Operation::Generate { stream: req.stream }, target, body)
    }

    fn decode_response(
        &self,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        let response: GenerateResponse =
            serde_json::from_slice(body).map_err(|e| unparseable("response", e))?;
        stamp(&response, origin);
        let usage = response.usage_metadata.map(unified_usage);
        let Some(candidate) = response.candidates.into_iter().next() else {
            return Err(
                match response.prompt_feedback.and_then(|f| f.block_reason) {
                    Some(reason) => prompt_blocked(&reason),
                    None => unparseable("response", "no candidates"),
                },
            );
        };
        let mut text: Option<String> = None;
        let mut tool_calls = Vec::new();
        let mut reasoning = Vec::new();
        for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
            if part.is_thought() {
                for piece in thought_pieces(&part) {
                    piece.push_to(&mut reasoning);
                }
                continue;
            }
            if let Some(call) = part.function_call {
                let id = tool_call_id(
                    &origin.id,
                    tool_calls.len(),
                    part.thought_signature.as_deref(),
                );
                let args = call.args.unwrap_or_else(|| Value::Object(Map::new()));
                tool_calls.push(ToolCallOut::new(
                    id,
                    call.name.0.into_owned(),
                    args.to_string(),
                ));
            } else if let Some(t) = part.text {
                text.get_or_insert_with(String::new).push_str(&t);
            }
        }
        let finish_reason = candidate
            .finish_reason
            .as_deref()
            .map(|r| finish_reason(r, !tool_calls.is_empty()));
        let completion = Completion {
            reasoning,
            content: text,
            tool_calls,
            finish_reason,
            usage,
        };
        Ok(DecodedResponse::decoded(completion))
    }

    fn embedder(&self) -> Option<&dyn crate::dialects::embed::Embedder> {
        Some(&crate::dialects::embed::gemini::Gemini)
    }

    fn stream_decoder(&self, writer: EventWriter) -> Box<dyn StreamDecoder> {
        Box::new(SseStream::new(writer, GeminiEvents))
    }

    fn counts_tokens(&self) -> bool {
        true
    }

    /// `models/{model}:countTokens` with `{"generateContentRequest": ...}`:
    /// the generation's body (so system instruction, tools and images
    /// count) with the `model` countTokens requires in it.
    fn encode_count(
        &self,
        req: &ChatRequest,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        Some(self.encode_request(req, target).and_then(|generate| {
            let model = target.model.strip_prefix("models/").unwrap_or(target.model);
            let name = serde_json::to_string(&format!("models/{model}")).unwrap_or_default();
            let members = generate.body.get(1..).unwrap_or_default();
            let comma = if members.first() == Some(&b'}') {
                ""
            } else {
                ","
            };
            let mut body = Vec::with_capacity(generate.body.len() + name.len() + 48);
            body.extend_from_slice(b"{\"generateContentRequest\":{\"model\":");
            body.extend_from_slice(name.as_bytes());
            body.extend_from_slice(comma.as_bytes());
            body.extend_from_slice(members);
            body.push(b'}');
            transport::request(Operation::CountTokens, target, body)
        }))
    }

    /// `{"totalTokens": N, ...}`.
    fn decode_count(&self, body: &[u8]) -> Result<u64, GatewayError> {
        serde_json::from_slice::<CountTokensResponse>(body)
            .map(|r| r.total_tokens)
            .map_err(|e| unparseable("token count", e))
    }

    fn decode_error(&self, status: u16, body: &[u8]) -> GatewayError {
        match serde_json::from_slice::<ErrorBody>(body) {
            Ok(ErrorBody::One(envelope)) => unified_error(envelope.error, status),
            Ok(ErrorBody::Many(mut list)) if !list.is_empty() => {
                unified_error(list.swap_remove(0).error, status)
            }
            _ => GatewayError::new(
                ErrorCode::from_status(status),
                fallback_message(status, body),
            ),
        }
    }
}

fn prompt_blocked(reason: &str) -> GatewayError {
    GatewayError::new(
        ErrorCode::ContentFiltered,
        format!("the provider blocked the prompt ({reason})"),
    )
}

pub fn finish_reason(reason: &str, has_tool_calls: bool) -> FinishReason {
    match reason {
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => FinishReason::ContentFilter,
        // Gemini says STOP after function calls.
        _ if has_tool_calls => FinishReason::ToolCalls,
        // STOP, LANGUAGE, OTHER, MALFORMED_FUNCTION_CALL and anything new.
        _ => FinishReason::Stop,
    }
}

/// A countTokens body with its `generateContentRequest.model` (when it has
/// one) naming `model`; other bytes as the client sent them.
fn count_body(body: Vec<u8>, model: &str) -> Result<Vec<u8>, GatewayError> {
    let mut value: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(_) => return Ok(body),
    };
    let Some(named) = value
        .get_mut("generateContentRequest")
        .and_then(|r| r.get_mut("model"))
    else {
        return Ok(body);
    };
    let model = model.strip_prefix("models/").unwrap_or(model);
    *named = Value::String(format!("models/{model}"));
    serde_json::to_vec(&value).map_err(|e| unparseable("request", e))
}

// --- tool call ids ------------------------------------------------------------

/// FNV-1a: a short, stable digest of the response id for tool call ids.
fn digest(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Our id for tool call `n` of a response, carrying Gemini's signature.
fn tool_call_id(response_id: &str, n: usize, signature: Option<&str>) -> String {
    let mut id = format!("call_{:016x}_{n}", digest(response_id));
    if let Some(signature) = signature {
        id.push_str(SIGNATURE_MARK);
        // base64 → base64url without padding: ids stay in [A-Za-z0-9_-].
        id.extend(signature.chars().filter_map(|c| match c {
            '+' => Some('-'),
            '/' => Some('_'),
            '=' => None,
            c => Some(c),
        }));
    }
    id
}

/// The thought signature inside one of our ids, back in standard base64;
/// `None` for ids we did not make or made without a signature.
fn split_tool_call_id(id: &str) -> Option<String> {
    let rest = id.strip_prefix("call_")?;
    let (hash, rest) = rest.split_at_checked(16)?;
    let (n, signature) = rest.strip_prefix('_')?.split_once(SIGNATURE_MARK)?;
    let ours = hash.bytes().all(|b| b.is_ascii_hexdigit())
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
        && !signature.is_empty()
        && signature
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ours {
        return None;
    }
    let mut standard: String = signature
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while !standard.len().is_multiple_of(4) {
        standard.push('=');
    }
    Some(standard)
}

// --- response -----------------------------------------------------------------

/// Takes the vendor's response id and model version when given.
fn stamp(response: &GenerateResponse, origin: &mut Origin) {
    if let Some(id) = response.response_id.as_deref().filter(|id| !id.is_empty()) {
        if origin.id != id {
            origin.id = id.to_owned();
        }
    }
    if let Some(model) = response.model_version.as_deref().filter(|m| !m.is_empty()) {
        if origin.model != model {
            origin.model = model.to_owned();
        }
    }
}

/// A thought part as reasoning: its summary text, then the signature
/// Gemini may put on it (which closes the block).
pub fn thought_pieces<'p>(part: &'p Part) -> impl Iterator<Item = Reasoning<'p>> {
    let text = part.text.as_deref().filter(|t| !t.is_empty());
    text.map(Reasoning::Text)
        .into_iter()
        .chain(part.thought_signature.as_deref().map(Reasoning::Signature))
}

/// Usage as the neutral model counts it: thoughts count as completion
/// tokens, as OpenAI counts reasoning; cached content is already inside
/// the prompt count.
pub fn unified_usage(u: UsageMetadata) -> Usage {
    Usage {
        prompt_tokens: u.prompt_token_count.unwrap_or(0)
            + u.tool_use_prompt_token_count.unwrap_or(0),
        completion_tokens: u.candidates_token_count.unwrap_or(0)
            + u.thoughts_token_count.unwrap_or(0),
        cached_tokens: u.cached_content_token_count,
        reasoning_tokens: u.thoughts_token_count,
    }
}

// --- errors ---------------------------------------------------------------------

/// A `google.rpc.Status` as the unified error.
fn unified_error(error: Status, status: u16) -> GatewayError {
    {
        let reason = error
            .details
            .iter()
            .find_map(|d| d.get("reason").and_then(Value::as_str));
        let code = match error.status.as_str() {
            // Google answers a bad key with 400 INVALID_ARGUMENT.
            _ if reason == Some("API_KEY_INVALID") => ErrorCode::AuthFailed,
            "UNAUTHENTICATED" => ErrorCode::AuthFailed,
            "INVALID_ARGUMENT"
                if error
                    .message
                    .contains("exceeds the maximum number of tokens") =>
            {
                ErrorCode::ContextLengthExceeded
            }
            "INVALID_ARGUMENT" if error.message.contains("payload size exceeds") => {
                ErrorCode::PayloadTooLarge
            }
            "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => {
                ErrorCode::InvalidRequest
            }
            "PERMISSION_DENIED" => ErrorCode::PermissionDenied,
            "NOT_FOUND" => ErrorCode::ModelNotFound,
            "RESOURCE_EXHAUSTED" => ErrorCode::UpstreamRateLimit,
            "UNAVAILABLE" => ErrorCode::UpstreamBusy,
            "DEADLINE_EXCEEDED" => ErrorCode::UpstreamTimeout,
            // INTERNAL, UNKNOWN and anything new: the HTTP status says more.
            _ => ErrorCode::from_status(status),
        };
        // google.rpc.RetryInfo: how long to wait, e.g. "7s" or "0.5s".
        let retry_after = error
            .details
            .iter()
            .filter(|d| {
                d.get("@type").and_then(Value::as_str)
                    == Some("type.googleapis.com/google.rpc.RetryInfo")
            })
            .find_map(|d| d.get("retryDelay").and_then(Value::as_str))
            .and_then(retry_seconds);
        GatewayError {
            retry_after,
            ..GatewayError::new(code, error.message)
        }
    }
}

/// A protobuf Duration in JSON ("7s", "1.5s") as whole seconds, rounded up
/// (retry-after takes whole seconds; waiting less is retrying too early).
fn retry_seconds(duration: &str) -> Option<u64> {
    let secs: f64 = duration.strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| secs.ceil() as u64)
}

// --- stream -----------------------------------------------------------------------

/// Each event is a whole `GenerateContentResponse` carrying the next piece;
/// function calls arrive whole. The stream has no end marker: the body ends.
struct GeminiEvents;

impl Events<SseParser> for GeminiEvents {
    fn on_event(
        &mut self,
        (_event, data): (&str, &str),
        w: &mut EventWriter,
        out: &mut Vec<u8>,
    ) -> Result<(), GatewayError> {
        let response: GenerateResponse =
            serde_json::from_str(data).map_err(|e| unparseable("stream event", e))?;
        if let Some(error) = response.error {
            return Err(unified_error(error, 500));
        }
        if w.native() {
            return native_event(&response, data, w, out);
        }
        if let Some(id) = response.response_id.as_deref() {
            w.set_id(id);
        }
        if let Some(model) = response.model_version.as_deref() {
            w.set_model(model);
        }
        if let Some(u) = response.usage_metadata {
            w.set_usage(Some(unified_usage(u)));
        }
        let Some(candidate) = response.candidates.into_iter().next() else {
            return match response.prompt_feedback.and_then(|f| f.block_reason) {
                Some(reason) => Err(prompt_blocked(&reason)),
                // A usage-only event.
                None => Ok(()),
            };
        };
        for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
            if part.is_thought() {
                for piece in thought_pieces(&part) {
                    w.reasoning(out, piece);
                }
                continue;
            }
            if let Some(call) = part.function_call {
                // Calls arrive whole: each is a new one, keyed by its number.
                let number = w.tool_calls();
                let id = tool_call_id(&w.origin().id, number, part.thought_signature.as_deref());
                let args = call.args.unwrap_or_else(|| Value::Object(Map::new()));
                let key = u64::try_from(number).unwrap_or(u64::MAX);
                w.tool_call_start(out, key, &id, &call.name);
                w.tool_call_arguments(out, key, &args.to_string());
            } else if let Some(text) = part.text {
                w.content(out, &text);
            }
        }
        if let Some(reason) = candidate.finish_reason.as_deref() {
            w.finish(out, finish_reason(reason, w.tool_calls() > 0));
        }
        Ok(())
    }

    fn on_end(&mut self, w: &mut EventWriter, out: &mut Vec<u8>) {
        if w.finished() {
            w.done(out);
        }
    }
}

/// A Gemini client's stream event: passed through as it came, read for
/// what the session meters (ids, usage, text delivered, the finish).
fn native_event(
    response: &GenerateResponse,
    data: &str,
    w: &mut EventWriter,
    out: &mut Vec<u8>,
) -> Result<(), GatewayError> {
    if let Some(id) = response.response_id.as_deref() {
        w.set_id(id);
    }
    if let Some(model) = response.model_version.as_deref() {
        w.set_model(model);
    }
    if let Some(u) = response.usage_metadata {
        w.set_usage(Some(unified_usage(u)));
    }
    let Some(candidate) = response.candidates.first() else {
        // A blocked prompt: Gemini's verdict, the stream's one event, as it came.
        let blocked = response
            .prompt_feedback
            .as_ref()
            .is_some_and(|f| f.block_reason.is_some());
        passthrough(w, out, data, blocked);
        if blocked {
            w.mark_finished_as(FinishReason::ContentFilter);
        }
        return Ok(());
    };
    let mut has_content = candidate.finish_reason.is_some();
    for part in candidate.content.iter().flat_map(|c| &c.parts) {
        if let Some(text) = part.text.as_deref() {
            w.count_delivered(text);
            has_content = true;
        }
        if let Some(call) = &part.function_call {
            w.count_delivered(&call.name);
            let number = w.tool_calls();
            w.note_tool_call(u64::try_from(number).unwrap_or(u64::MAX));
            has_content = true;
        }
    }
    passthrough(w, out, data, has_content);
    if candidate.finish_reason.is_some() {
        w.mark_finished();
    }
    Ok(())
}

/// One vendor event, framed again as Gemini frames it.
fn passthrough(w: &mut EventWriter, out: &mut Vec<u8>, data: &str, content: bool) {
    let mut frame = Vec::with_capacity(data.len() + 10);
    for line in data.split('\n') {
        frame.extend_from_slice(b"data: ");
        frame.extend_from_slice(line.as_bytes());
        frame.extend_from_slice(b"\r\n");
    }
    frame.extend_from_slice(b"\r\n");
    w.passthrough(out, &frame, content);
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn encode_request(body: &str) -> Result<UpstreamRequest, GatewayError> {
        let provider = r#"{"dialect":"gemini","api_key":"g-key"}"#;
        crate::dialects::encode_for(&Gemini, provider, "gemini-2.5-flash", body).map(|(up, _)| up)
    }

    fn encode(body: &str) -> Value {
        let up = encode_request(body).unwrap();
        assert!(up.headers.contains(&("x-goog-api-key", "g-key".into())));
        serde_json::from_slice(&up.body).unwrap()
    }

    const COUNT: &str = r#"{"model":"any","system":"be brief","messages":[{"role":"user","content":"count me"}],
        "tools":[{"name":"lookup","input_schema":{"type":"object"}}]}"#;

    #[test]
    fn count_tokens_is_the_generation_inside_count_tokens() {
        let config = crate::config::Config::parse(
            br#"{"providers":{"p":{"dialect":"gemini","api_key":"g-key"}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap();
        let req =
            crate::surfaces::anthropic_messages::request::parse_count(COUNT.as_bytes()).unwrap();
        let target = Target {
            provider: &config.providers["p"],
            model: "gemini-2.5-flash",
        };
        assert!(Gemini.counts_tokens());
        let up = Gemini.encode_count(&req, &target).unwrap().unwrap();
        assert_eq!(up.path, "/v1beta/models/gemini-2.5-flash:countTokens");
        assert!(up.headers.contains(&("x-goog-api-key", "g-key".into())));
        let v: Value = serde_json::from_slice(&up.body).unwrap();
        let generation = Gemini.encode_request(&req, &target).unwrap();
        let mut expected: Value = serde_json::from_slice(&generation.body).unwrap();
        expected["model"] = "models/gemini-2.5-flash".into();
        assert_eq!(v, serde_json::json!({ "generateContentRequest": expected }));
        assert_eq!(
            v["generateContentRequest"]["systemInstruction"]["parts"][0]["text"],
            "be brief"
        );
        assert!(v["generateContentRequest"]["tools"][0]["functionDeclarations"].is_array());
        assert_eq!(
            Gemini
                .decode_count(br#"{"totalTokens": 7, "promptTokensDetails": []}"#)
                .unwrap(),
            7
        );
        assert_eq!(Gemini.decode_count(b"{}").unwrap(), 0);
        assert!(Gemini.decode_count(b"\"7\"").is_err());
    }

    /// Every key Gemini's GenerateContentRequest knows, at every level we write.
    fn assert_only_gemini_fields(v: &Value) {
        const KNOWN: &[&str] = &[
            "contents",
            "systemInstruction",
            "tools",
            "toolConfig",
            "generationConfig",
            "role",
            "parts",
            "text",
            "inlineData",
            "mimeType",
            "data",
            "functionCall",
            "functionResponse",
            "thoughtSignature",
            "name",
            "args",
            "response",
            "functionDeclarations",
            "description",
            "parametersJsonSchema",
            "functionCallingConfig",
            "mode",
            "allowedFunctionNames",
            "stopSequences",
            "temperature",
            "topP",
            "maxOutputTokens",
            "seed",
            "responseMimeType",
            "responseJsonSchema",
        ];
        // Inside these, the content is the client's own (schemas, arguments).
        const OPAQUE: &[&str] = &[
            "args",
            "response",
            "parametersJsonSchema",
            "responseJsonSchema",
        ];
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    assert!(
                        KNOWN.contains(&k.as_str()),
                        "{k} would be rejected by Gemini"
                    );
                    if !OPAQUE.contains(&k.as_str()) {
                        assert_only_gemini_fields(v);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(assert_only_gemini_fields),
            _ => {}
        }
    }

    #[test]
    fn encodes_text_system_sampling_without_openai_fields() {
        let up = encode_request(
            r#"{"model":"g","messages":[{"role":"system","content":"be brief"},{"role":"developer","content":"really"},
                {"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"again"}],
                "temperature":0.5,"top_p":0.9,"max_tokens":20,"stop":["X"],"seed":3,"user":"u1",
                "logprobs":true,"presence_penalty":0.1,"request_id":"r","parallel_tool_calls":true,
                "stream":true,"stream_options":{"include_usage":true}}"#,
        )
        .unwrap();
        assert_eq!(
            up.path,
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        let v: Value = serde_json::from_slice(&up.body).unwrap();
        assert_only_gemini_fields(&v);
        assert_eq!(
            v,
            serde_json::json!({
                "contents":[
                    {"role":"user","parts":[{"text":"hi"}]},
                    {"role":"model","parts":[{"text":"hello"}]},
                    {"role":"user","parts":[{"text":"again"}]}],
                "systemInstruction":{"parts":[{"text":"be brief"},{"text":"really"}]},
                "generationConfig":{"stopSequences":["X"],"temperature":0.5,"topP":0.9,
                                    "maxOutputTokens":20,"seed":3}
            })
        );
        let up =
            encode_request(r#"{"model":"g","messages":[{"role":"user","content":"hi"}]}"#).unwrap();
        assert_eq!(up.path, "/v1beta/models/gemini-2.5-flash:generateContent");
    }

    #[test]
    fn encodes_tools_images_json_mode_and_the_round_trip() {
        let signed = tool_call_id("resp-1", 0, Some("CiQB+/x="));
        let unsigned = tool_call_id("resp-1", 1, None);
        let body = format!(
            r#"{{"model":"g","messages":[
                {{"role":"user","content":[{{"type":"text","text":"weather?"}},{{"type":"image_url","image_url":{{"url":"data:image/png;base64,QUJD"}}}}]}},
                {{"role":"assistant","content":null,"tool_calls":[
                    {{"id":"{signed}","type":"function","function":{{"name":"get_weather","arguments":"{{\"city\":\"Paris\"}}"}}}},
                    {{"id":"{unsigned}","type":"function","function":{{"name":"get_time","arguments":""}}}}]}},
                {{"role":"tool","tool_call_id":"{unsigned}","content":"noon"}},
                {{"role":"tool","tool_call_id":"{signed}","content":"{{\"temp\":21}}"}},
                {{"role":"assistant","tool_calls":[{{"id":"call_abc","type":"function","function":{{"name":"get_time","arguments":"{{}}"}}}}]}},
                {{"role":"tool","tool_call_id":"call_abc","content":"1pm"}}],
              "tools":[{{"type":"function","function":{{"name":"get_weather","description":"w","parameters":{{"type":"object","properties":{{"city":{{"type":"string"}}}},"additionalProperties":false}}}}}},
                       {{"type":"function","function":{{"name":"get_time"}}}}],
              "tool_choice":{{"type":"function","function":{{"name":"get_weather"}}}},
              "response_format":{{"type":"json_schema","json_schema":{{"name":"w","schema":{{"type":"object"}}}}}}}}"#
        );
        let v = encode(&body);
        assert_only_gemini_fields(&v);
        let contents = v["contents"].as_array().unwrap();
        assert_eq!(contents.len(), 5);
        assert_eq!(
            contents[0]["parts"][1],
            serde_json::json!({"inlineData":{"mimeType":"image/png","data":"QUJD"}})
        );
        assert_eq!(
            contents[1],
            serde_json::json!({"role":"model","parts":[
                {"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CiQB+/x="},
                {"functionCall":{"name":"get_time","args":{}}}]})
        );
        assert_eq!(
            contents[2],
            serde_json::json!({"role":"user","parts":[
                {"functionResponse":{"name":"get_time","response":{"result":"noon"}}},
                {"functionResponse":{"name":"get_weather","response":{"temp":21}}}]}),
            "tool results are named by the earlier call and share one turn"
        );
        assert_eq!(
            contents[3]["parts"][0]["thoughtSignature"], UNSIGNED,
            "a call Gemini did not sign gets Google's documented stand-in"
        );
        assert_eq!(
            v["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]
                ["additionalProperties"],
            false
        );
        assert!(v["tools"][0]["functionDeclarations"][1]
            .get("parametersJsonSchema")
            .is_none());
        assert_eq!(
            v["toolConfig"],
            serde_json::json!({"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_weather"]}})
        );
        assert_eq!(
            v["generationConfig"],
            serde_json::json!({"responseMimeType":"application/json","responseJsonSchema":{"type":"object"}})
        );
    }

    #[test]
    fn tool_choice_modes() {
        let base = r#"{"model":"g","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":TC}"#;
        for (tc, mode) in [
            (r#""auto""#, "AUTO"),
            (r#""none""#, "NONE"),
            (r#""required""#, "ANY"),
        ] {
            let v = encode(&base.replace("TC", tc));
            assert_eq!(
                v["toolConfig"],
                serde_json::json!({"functionCallingConfig":{"mode":mode}})
            );
        }
        let v = encode(
            r#"{"model":"g","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}"#,
        );
        assert_eq!(
            v["generationConfig"],
            serde_json::json!({"responseMimeType":"application/json"})
        );
    }

    #[test]
    fn search_beside_function_tools_on_gemini_3_only() {
        let config = crate::config::Config::parse(
            br#"{"providers":{"p":{"dialect":"gemini","api_key":"g-key"}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap();
        let body = r#"{"model":"g","messages":[{"role":"user","content":"news?"}],
            "tools":[{"type":"function","function":{"name":"f"}}]}"#;
        let req = ChatRequest {
            web_search: Some(crate::model::request::WebSearch {
                allowed_domains: Vec::new(),
                user_location: None,
            }),
            ..ChatRequest::parse(body.as_bytes()).unwrap()
        };
        let sent = |model: &str| -> Value {
            let target = Target {
                provider: &config.providers["p"],
                model,
            };
            let up = Gemini.encode_request(&req, &target).unwrap();
            serde_json::from_slice(&up.body).unwrap()
        };
        let v = sent("gemini-3-pro-preview");
        assert_eq!(
            v["tools"],
            serde_json::json!([{"functionDeclarations":[{"name":"f"}]},{"googleSearch":{}}])
        );
        assert_eq!(
            v["toolConfig"],
            serde_json::json!({"includeServerSideToolInvocations": true})
        );
        // Gemini 2.x refuses the mix, flag or not: the search is left out.
        let v = sent("gemini-2.5-flash");
        assert_eq!(
            v["tools"],
            serde_json::json!([{"functionDeclarations":[{"name":"f"}]}])
        );
        assert!(v.get("toolConfig").is_none());
        // Search alone needs no flag.
        let alone = ChatRequest {
            tools: Vec::new().into(),
            ..req.clone()
        };
        let target = Target {
            provider: &config.providers["p"],
            model: "gemini-3-pro-preview",
        };
        let v: Value =
            serde_json::from_slice(&Gemini.encode_request(&alone, &target).unwrap().body).unwrap();
        assert_eq!(v["tools"], serde_json::json!([{"googleSearch":{}}]));
        assert!(v.get("toolConfig").is_none());
    }

    #[test]
    fn thinking_config_by_model_family() {
        let ask = |effort: Option<Effort>, budget_tokens: Option<u32>| ReasoningAsk {
            effort,
            budget_tokens,
        };
        let config =
            |include: bool, budget: Option<i64>, level: Option<&'static str>| ThinkingConfig {
                include_thoughts: include.then_some(true),
                thinking_budget: budget,
                thinking_level: level.map(Text::from),
            };
        for (model, asked, expected) in [
            (
                "gemini-2.5-flash",
                ask(Some(Effort::Low), None),
                config(true, Some(1024), None),
            ),
            (
                "gemini-2.5-flash",
                ask(Some(Effort::High), None),
                config(true, Some(24576), None),
            ),
            (
                "gemini-2.5-flash",
                ask(Some(Effort::None), None),
                config(false, Some(0), None),
            ),
            (
                "gemini-2.5-pro",
                ask(Some(Effort::None), None),
                config(true, Some(128), None),
            ),
            (
                "gemini-2.5-flash-lite",
                ask(Some(Effort::Minimal), None),
                config(true, Some(512), None),
            ),
            (
                "gemini-2.5-flash",
                ask(None, Some(300)),
                config(true, Some(300), None),
            ),
            (
                "gemini-2.5-flash",
                ask(None, None),
                config(true, None, None),
            ),
            (
                "gemini-3-pro-preview",
                ask(Some(Effort::Medium), None),
                config(true, None, Some("high")),
            ),
            (
                "gemini-3-pro-preview",
                ask(Some(Effort::Minimal), None),
                config(true, None, Some("low")),
            ),
            (
                "gemini-3-flash-preview",
                ask(Some(Effort::Medium), None),
                config(true, None, Some("medium")),
            ),
            (
                "gemini-3-flash-preview",
                ask(Some(Effort::None), None),
                config(true, None, Some("minimal")),
            ),
            (
                "gemini-3-flash-preview",
                ask(Some(Effort::Low), Some(900)),
                config(true, Some(900), None),
            ),
        ] {
            assert_eq!(thinking_config(asked, model), expected, "{model} {asked:?}");
        }
    }

    #[test]
    fn thought_parts_are_reasoning() {
        let v = decode(
            r#"{"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"text":"b","thought":true,"thoughtSignature":"s+/="},{"text":"c","thought":true},{"text":"ok"}],"role":"model"},"finishReason":"STOP"}],"responseId":"r"}"#,
        )
        .unwrap();
        let message = &v["choices"][0]["message"];
        assert_eq!(message["reasoning_content"], "abc");
        assert_eq!(
            message["reasoning_details"],
            serde_json::json!([{"type":"reasoning.text","text":"ab","signature":"s+/=","index":0},
                   {"type":"reasoning.text","text":"c","index":1}])
        );
        assert_eq!(message["content"], "ok");
    }

    #[test]
    fn rejects_what_gemini_cannot_take() {
        for (body, param) in [
            (
                r#"{"model":"g","n":2,"messages":[{"role":"user","content":"x"}]}"#,
                "n",
            ),
            (
                r#"{"model":"g","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}"#,
                "messages[0].content[0].image_url.url",
            ),
            (
                r#"{"model":"g","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"r"}]}"#,
                "messages[1].tool_call_id",
            ),
            (
                r#"{"model":"g","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}"#,
                "messages[0].tool_calls[0].function.arguments",
            ),
        ] {
            let e = encode_request(body).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}");
        }
    }

    #[test]
    fn a_failed_tool_result_is_an_error_response() {
        let text = |t: &str| Content::Text(t.into());
        assert_eq!(
            function_response(&text("timeout"), true),
            serde_json::json!({"error": "timeout"})
        );
        assert_eq!(
            function_response(&text(r#"{"code":7}"#), true),
            serde_json::json!({"error": r#"{"code":7}"#}),
            "an error's details are never taken for output"
        );
        assert_eq!(
            function_response(&text("ok"), false),
            serde_json::json!({"result": "ok"})
        );
    }

    #[test]
    fn tool_call_ids_carry_the_signature() {
        let id = tool_call_id("resp-1", 2, Some("CiQB+/abcd=="));
        assert!(id.starts_with("call_"));
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
        assert_eq!(split_tool_call_id(&id).as_deref(), Some("CiQB+/abcd=="));
        assert_eq!(
            tool_call_id("resp-1", 2, Some("CiQB+/abcd==")),
            id,
            "stable"
        );
        assert_ne!(
            tool_call_id("resp-2", 2, None),
            tool_call_id("resp-1", 2, None)
        );
        assert_eq!(split_tool_call_id(&tool_call_id("r", 0, None)), None);
        for foreign in ["call_abc", "toolu_ts_x", "call_zzzzzzzzzzzzzzzz_1_ts_x", ""] {
            assert_eq!(split_tool_call_id(foreign), None, "{foreign}");
        }
    }

    fn origin() -> Origin {
        Origin {
            id: "chatcmpl-r".into(),
            provider: "gm".into(),
            model: "gemini-2.5-flash".into(),
            ..Origin::default()
        }
    }

    fn decode(body: &str) -> Result<Value, GatewayError> {
        let mut origin = origin();
        let d = Gemini.decode_response(body.as_bytes(), &mut origin)?;
        Ok(d.chat_json(&origin))
    }

    #[test]
    fn decodes_text_and_usage() {
        let v = decode(
            r#"{"candidates":[{"content":{"parts":[{"text":"thinking...","thought":true},{"text":"Hello"},{"text":" there"}],"role":"model"},
                "finishReason":"STOP","index":0}],
              "usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":4,"totalTokenCount":20,"thoughtsTokenCount":6,"cachedContentTokenCount":3},
              "modelVersion":"gemini-2.5-flash-001","responseId":"abc123"}"#,
        )
        .unwrap();
        assert_eq!(v["id"], "abc123");
        assert_eq!(v["model"], "gemini-2.5-flash-001");
        assert_eq!(v["choices"][0]["message"]["content"], "Hello there");
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(
            v["usage"],
            serde_json::json!({"prompt_tokens":10,"completion_tokens":10,"total_tokens":20,
                "prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":6}})
        );
    }

    #[test]
    fn decodes_parallel_tool_calls_with_signature() {
        let v = decode(
            r#"{"candidates":[{"content":{"parts":[
                {"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CiQB+/x="},
                {"functionCall":{"name":"get_time"}}],"role":"model"},"finishReason":"STOP"}],
              "usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":7},"responseId":"r9"}"#,
        )
        .unwrap();
        let calls = &v["choices"][0]["message"]["tool_calls"];
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        assert!(v["choices"][0]["message"]["content"].is_null());
        assert_eq!(calls[0]["function"]["name"], "get_weather");
        assert_eq!(calls[0]["function"]["arguments"], "{\"city\":\"Paris\"}");
        assert_eq!(calls[1]["function"]["arguments"], "{}");
        assert_eq!(calls[0]["id"], tool_call_id("r9", 0, Some("CiQB+/x=")));
        assert_eq!(calls[1]["id"], tool_call_id("r9", 1, None));
    }

    /// Gemini 3's server-side invocations (its own search) are not the
    /// client's: not tool calls, not text, and they do not shift call ids.
    const INVOCATIONS: &str = r#"{"toolCall":{"toolType":"GOOGLE_SEARCH_WEB","id":"s1","args":{"queries":["q"]}},"thoughtSignature":"U2lnMQ=="},
        {"toolResponse":{"toolType":"GOOGLE_SEARCH_WEB","id":"s1","response":{"results":[]}}}"#;

    #[test]
    fn server_side_invocations_are_not_surfaced() {
        let v = decode(&format!(
            r#"{{"candidates":[{{"content":{{"parts":[{INVOCATIONS},
                {{"text":"Found it."}},
                {{"functionCall":{{"name":"get_weather","args":{{}}}},"thoughtSignature":"CiQB+/x="}}],"role":"model"}},"finishReason":"STOP"}}],
              "responseId":"r9"}}"#
        ))
        .unwrap();
        let message = &v["choices"][0]["message"];
        assert_eq!(message["content"], "Found it.");
        let calls = message["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["id"], tool_call_id("r9", 0, Some("CiQB+/x=")));
        let stream = format!(
            "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{}],\"role\":\"model\"}}}}],\"responseId\":\"rs3\"}}\r\n\r\n\
             data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"Found it.\"}}],\"role\":\"model\"}},\"finishReason\":\"STOP\"}}],\"responseId\":\"rs3\"}}\r\n\r\n",
            INVOCATIONS.replace('\n', "")
        );
        let (ev, _) = run(&[stream.as_bytes()], false);
        let deltas: Vec<&Value> = ev.iter().map(|e| &e["choices"][0]["delta"]).collect();
        assert!(
            deltas.iter().all(|d| d.get("tool_calls").is_none()),
            "{ev:?}"
        );
        assert_eq!(deltas[1]["content"], "Found it.");
        assert_eq!(ev.last().unwrap()["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn finish_reasons_and_content_filter() {
        for (reason, tools, want) in [
            ("STOP", false, "stop"),
            ("STOP", true, "tool_calls"),
            ("MAX_TOKENS", false, "length"),
            ("SAFETY", false, "content_filter"),
            ("RECITATION", false, "content_filter"),
            ("BLOCKLIST", false, "content_filter"),
            ("PROHIBITED_CONTENT", false, "content_filter"),
            ("SPII", false, "content_filter"),
            ("IMAGE_SAFETY", false, "content_filter"),
            ("MALFORMED_FUNCTION_CALL", false, "stop"),
            ("OTHER", false, "stop"),
        ] {
            assert_eq!(finish_reason(reason, tools).as_str(), want, "{reason}");
        }
        let v = decode(
            r#"{"candidates":[{"finishReason":"SAFETY","safetyRatings":[{"category":"HARM_CATEGORY_HARASSMENT","probability":"HIGH","blocked":true}]}],"responseId":"x"}"#,
        )
        .unwrap();
        assert_eq!(v["choices"][0]["finish_reason"], "content_filter");
        assert!(v["choices"][0]["message"]["content"].is_null());
        let e = decode(
            r#"{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":12,"totalTokenCount":12},"modelVersion":"gemini-2.5-flash"}"#,
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::ContentFiltered);
        assert_eq!(e.status(), 400);
        assert!(e.message.contains("PROHIBITED_CONTENT"));
        assert_eq!(decode("{}").unwrap_err().code, ErrorCode::UpstreamError);
    }

    #[test]
    fn maps_errors() {
        let err = |code: u16, status: &str, msg: &str, details: &str| {
            format!(
                r#"{{"error":{{"code":{code},"message":"{msg}","status":"{status}","details":[{details}]}}}}"#
            )
        };
        let key_invalid = r#"{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}"#;
        let cases = [
            (400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", key_invalid, ErrorCode::AuthFailed),
            (400, "INVALID_ARGUMENT", "Invalid JSON payload received.", "", ErrorCode::InvalidRequest),
            (400, "INVALID_ARGUMENT", "The input token count (250000) exceeds the maximum number of tokens allowed (1048576).", "", ErrorCode::ContextLengthExceeded),
            (400, "INVALID_ARGUMENT", "Request payload size exceeds the limit: 20971520 bytes.", "", ErrorCode::PayloadTooLarge),
            (400, "FAILED_PRECONDITION", "User location is not supported for the API use.", "", ErrorCode::InvalidRequest),
            (403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers.", "", ErrorCode::PermissionDenied),
            (404, "NOT_FOUND", "models/x is not found for API version v1beta.", "", ErrorCode::ModelNotFound),
            (429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.", "", ErrorCode::UpstreamRateLimit),
            (500, "INTERNAL", "An internal error has occurred.", "", ErrorCode::UpstreamError),
            (503, "UNAVAILABLE", "The model is overloaded. Please try again later.", "", ErrorCode::UpstreamBusy),
            (504, "DEADLINE_EXCEEDED", "Deadline expired.", "", ErrorCode::UpstreamTimeout),
        ];
        for (status, name, msg, details, code) in cases {
            let e = Gemini.decode_error(status, err(status, name, msg, details).as_bytes());
            assert_eq!(e.code, code, "{name}: {msg}");
            assert_eq!(e.message, msg);
        }
        let retry = r#"{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"6.2s"}"#;
        let e = Gemini.decode_error(
            429,
            err(429, "RESOURCE_EXHAUSTED", "quota", retry).as_bytes(),
        );
        assert_eq!(e.retry_after, Some(7), "RetryInfo, rounded up");
        assert_eq!(retry_seconds("0s"), Some(0));
        assert_eq!(retry_seconds("7"), None);
        assert_eq!(retry_seconds("-1s"), None);
        let array = format!("[{}]", err(429, "RESOURCE_EXHAUSTED", "quota", ""));
        assert_eq!(
            Gemini.decode_error(429, array.as_bytes()).code,
            ErrorCode::UpstreamRateLimit
        );
    }

    const TEXT_STREAM: &str = concat!(
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"H\u{e9}llo \u{1f30d}\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 4,\"totalTokenCount\": 4},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"rs1\"}\r\n\r\n",
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" there\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 4,\"candidatesTokenCount\": 3,\"totalTokenCount\": 9,\"thoughtsTokenCount\": 2},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"rs1\"}\r\n\r\n",
    );

    pub(crate) const TOOL_STREAM: &str = concat!(
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Checking.\"}],\"role\": \"model\"}}],\"responseId\": \"rs2\",\"modelVersion\": \"gemini-2.5-pro\"}\r\n\r\n",
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"get_weather\",\"args\": {\"city\": \"Paris\"}},\"thoughtSignature\": \"CiQB+/x=\"},{\"functionCall\": {\"name\": \"get_time\",\"args\": {}}}],\"role\": \"model\"},\"finishReason\": \"STOP\"}],\"usageMetadata\": {\"promptTokenCount\": 8,\"candidatesTokenCount\": 5,\"totalTokenCount\": 13},\"responseId\": \"rs2\",\"modelVersion\": \"gemini-2.5-pro\"}\r\n\r\n",
    );

    fn run(chunks: &[&[u8]], include_usage: bool) -> (Vec<Value>, String) {
        crate::dialects::run_stream(&Gemini, origin(), chunks, include_usage)
    }

    #[test]
    fn stream_text_with_crlf_and_usage() {
        let (ev, text) = run(&[TEXT_STREAM.as_bytes()], true);
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        assert!(ev
            .iter()
            .all(|e| e["id"] == "rs1" && e["model"] == "gemini-2.5-flash"));
        assert_eq!(
            ev[1]["choices"][0]["delta"],
            serde_json::json!({"content":"H\u{e9}llo \u{1f30d}"})
        );
        assert_eq!(ev[2]["choices"][0]["delta"]["content"], " there");
        assert_eq!(ev[3]["choices"][0]["finish_reason"], "stop");
        assert_eq!(
            ev[4]["usage"],
            serde_json::json!({"prompt_tokens":4,"completion_tokens":5,"total_tokens":9,
                "completion_tokens_details":{"reasoning_tokens":2}})
        );
        assert_eq!(ev.len(), 5);
    }

    #[test]
    fn stream_events_are_read_borrowed_unless_escaped() {
        let event = r#"{"candidates":[{"content":{"parts":[{"text":"plain"},{"text":"esc\u00e9"},{"functionCall":{"name":"f"},"thoughtSignature":"c2ln"}]},"finishReason":"STOP"}],"modelVersion":"g","responseId":"r"}"#;
        let response: GenerateResponse = serde_json::from_str(event).unwrap();
        let borrowed = |t: &Option<Text>| matches!(t, Some(Text(Cow::Borrowed(_))));
        let candidate = &response.candidates[0];
        let parts = &candidate.content.as_ref().unwrap().parts;
        assert!(borrowed(&parts[0].text));
        assert!(!borrowed(&parts[1].text), "an escape forces a copy");
        assert_eq!(parts[1].text.as_deref(), Some("esc\u{e9}"));
        assert!(matches!(
            parts[2].function_call.as_ref().unwrap().name,
            Text(Cow::Borrowed("f"))
        ));
        assert!(borrowed(&parts[2].thought_signature));
        assert!(borrowed(&candidate.finish_reason));
        assert!(borrowed(&response.model_version) && borrowed(&response.response_id));
    }

    #[test]
    fn stream_tool_calls() {
        let (ev, text) = run(&[TOOL_STREAM.as_bytes()], false);
        assert!(text.ends_with("data: [DONE]\n\n"));
        assert_eq!(ev[1]["choices"][0]["delta"]["content"], "Checking.");
        let tc = |i: usize| ev[i]["choices"][0]["delta"]["tool_calls"][0].clone();
        assert_eq!(
            tc(2),
            serde_json::json!({"index":0,"id":tool_call_id("rs2", 0, Some("CiQB+/x=")),"type":"function",
                "function":{"name":"get_weather","arguments":""}})
        );
        assert_eq!(
            tc(3),
            serde_json::json!({"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}})
        );
        assert_eq!(tc(4)["index"], 1);
        assert_eq!(tc(4)["id"], tool_call_id("rs2", 1, None));
        assert_eq!(tc(5)["function"]["arguments"], "{}");
        assert_eq!(ev[6]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(ev.len(), 7);
    }

    #[test]
    fn a_gemini_clients_blocked_prompt_is_geminis_verdict() {
        let verdict = br#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3}}"#;
        let decoded = Gemini
            .decode_native(Api::Gemini, verdict, &mut origin())
            .unwrap();
        assert_eq!(decoded.finish_reason, Some(FinishReason::ContentFilter));
        assert!(matches!(decoded.answer, Answer::Native(ref b) if b == verdict));
        // An answer's own finish is read as before.
        let answer =
            br#"{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}]}"#;
        let decoded = Gemini
            .decode_native(Api::Gemini, answer, &mut origin())
            .unwrap();
        assert_eq!(decoded.finish_reason, Some(FinishReason::Stop));
    }

    #[test]
    fn stream_content_filter() {
        // A prompt blocked once the stream started: a unified stream error.
        let blocked = "data: {\"promptFeedback\": {\"blockReason\": \"SAFETY\"},\"usageMetadata\": {\"promptTokenCount\": 3},\"responseId\": \"b\"}\r\n\r\n";
        let (ev, text) = run(&[blocked.as_bytes()], false);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0]["error"]["code"], "CONTENT_FILTERED");
        assert_eq!(ev[0]["error"]["request_id"], "rid");
        assert!(!text.contains("[DONE]"));
        // The answer filtered mid-stream: finish_reason content_filter.
        let filtered = TEXT_STREAM.replace("\"STOP\"", "\"SAFETY\"");
        let (ev, text) = run(&[filtered.as_bytes()], false);
        assert_eq!(ev[3]["choices"][0]["finish_reason"], "content_filter");
        assert!(text.ends_with("data: [DONE]\n\n"));
    }
}
