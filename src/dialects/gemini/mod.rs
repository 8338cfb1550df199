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
//! surface; here the `Dialect` impl, with the request's pieces in [`encode`],
//! tool call ids in [`ids`], the answer's pieces and errors in [`answer`],
//! the stream decoder in [`stream`].

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::transport::{self, Operation};
use super::{
    encode_json, fallback_message, tool_arguments, unparseable, DecodedResponse, Dialect, Events,
    SseStream, StreamDecoder, Target, UpstreamRequest,
};
use crate::error::{ErrorCode, GatewayError};
use crate::formats::sse::SseParser;
use crate::model::call::Call;
use crate::model::request::{
    ChatRequest, Content, ContentPart, Effort, Image, Message, Reasoning as ReasoningAsk,
    ResponseFormat, ToolChoice,
};
use crate::model::response::Answer;
use crate::model::response::{Choice, Completion, FinishReason, Origin, ToolCallOut, Usage};
use crate::model::stream::{EventWriter, Passed, Reasoning};
use crate::model::Api;
use crate::wire::gemini::{
    Blob, Content as Turn, CountTokensResponse, ErrorBody, FunctionCall, FunctionCallingConfig,
    FunctionDeclaration, FunctionResponse, FunctionResponsePart, GenerateContentRequest as Request,
    GenerateContentResponse as GenerateResponse, GenerationConfig, Part, Status, Text,
    ThinkingConfig, Tool as Tools, ToolConfig, UsageMetadata, MAX_CANDIDATES,
};

mod answer;
mod encode;
mod ids;
mod stream;

use answer::*;
pub use answer::{thought_pieces, unified_usage};
use encode::*;
use ids::*;
use stream::*;

pub struct Gemini;

/// Google's documented stand-in for a function call Gemini did not sign
/// (history from another vendor, or an id we did not make).
const UNSIGNED: &str = "skip_thought_signature_validator";
const SIGNATURE_MARK: &str = "_ts_";

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
        // Its own API's count only: a body of another API is not Gemini's.
        if !(call.is_count() && call.api == Api::Gemini) {
            return None;
        }
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
        let candidate_count = candidate_count(req)?;
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
                    // The images it returned: inside the response on
                    // Gemini 3, beside it in the turn before.
                    let images = result_images(content, i)?;
                    let inside = combines_tools(target.model);
                    let part = Part {
                        function_response: Some(FunctionResponse {
                            id: None,
                            name: name.into(),
                            response: function_response(content, *is_error),
                            parts: if inside {
                                images
                                    .iter()
                                    .cloned()
                                    .map(|blob| FunctionResponsePart {
                                        inline_data: Some(blob),
                                    })
                                    .collect()
                            } else {
                                Vec::new()
                            },
                        }),
                        ..Part::default()
                    };
                    let mut parts = vec![part];
                    if !inside {
                        parts.extend(images.into_iter().map(|blob| Part {
                            inline_data: Some(blob),
                            ..Part::default()
                        }));
                    }
                    push_turn(&mut turns, "user", parts);
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
                top_k: req.top_k.map(f64::from),
                max_output_tokens: req.max_output_tokens(),
                seed: req.seed,
                presence_penalty: penalty(req, "presence_penalty"),
                frequency_penalty: penalty(req, "frequency_penalty"),
                response_mime_type,
                response_json_schema,
                thinking_config: req.reasoning.map(|r| thinking_config(r, target.model)),
                candidate_count,
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
        if response.candidates.is_empty() {
            return Err(
                match response.prompt_feedback.and_then(|f| f.block_reason) {
                    Some(reason) => prompt_blocked(&reason),
                    None => unparseable("response", "no candidates"),
                },
            );
        }
        // Each candidate in its place (`index`, in order when Gemini
        // leaves it out); an index out of the candidates' range, or
        // twice, is the vendor's error.
        let count = response.candidates.len();
        let numbered = response
            .candidates
            .into_iter()
            .enumerate()
            .map(|(position, candidate)| {
                let index = candidate
                    .index
                    .map_or(position, |i| usize::try_from(i).unwrap_or(usize::MAX));
                (index, decode_candidate(candidate, &origin.id, index))
            });
        let choices = super::choices_in_place(count, numbered, "candidate")?;
        Ok(DecodedResponse::decoded(Completion::of_choices(
            choices, usage,
        )))
    }

    fn embedder(&self) -> Option<&dyn crate::dialects::embed::Embedder> {
        Some(&crate::dialects::embed::gemini::Gemini)
    }

    fn stream_decoder(&self, writer: EventWriter) -> Box<dyn StreamDecoder> {
        Box::new(SseStream::new(writer, GeminiEvents))
    }

    fn counter(&self) -> Option<&dyn super::count::Counter> {
        Some(self)
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

impl super::count::Counter for Gemini {
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
}

/// Candidate `index` of a whole answer as a choice (its tool call ids made
/// from the response id and the index).
fn decode_candidate(
    candidate: crate::wire::gemini::Candidate,
    response_id: &str,
    index: usize,
) -> Choice {
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
                response_id,
                u32::try_from(index).unwrap_or(u32::MAX),
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
    Choice {
        reasoning,
        content: text,
        tool_calls,
        finish_reason,
    }
}

/// Gemini's `candidateCount` for the request's `n` (left out for one):
/// Google documents 1 to 8 candidates.
fn candidate_count(req: &ChatRequest) -> Result<Option<u32>, GatewayError> {
    match req.n {
        Some(n) if n > MAX_CANDIDATES => Err(GatewayError::invalid(
            "n",
            format!("this provider answers at most {MAX_CANDIDATES} choices (n)"),
        )),
        Some(n) if n > 1 => Ok(Some(n)),
        _ => Ok(None),
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

#[cfg(test)]
pub(super) mod tests;
