//! Google's Gemini API, for Gemini CLI and the Google Gen AI SDKs
//! (`google-genai`, `@google/genai`): `POST .../models/{model}:generateContent`,
//! `:streamGenerateContent` (SSE with `alt=sse`, else one JSON array),
//! `:countTokens`, `:embedContent` and `:batchEmbedContents` (the
//! embeddings operation, to any vendor that embeds), `GET .../models` and
//! `GET .../models/{model}`, under
//! `/v1beta/` and `/v1/`. The model and the stream flag are the path's
//! ([`PathFacts`]), the stream's framing its query's ([`GeminiState`]);
//! requests are read by [`request`] into the neutral model; answers,
//! stream chunks and errors (`google.rpc.Status`, with an
//! `ErrorInfo` naming the gateway's code and a `RetryInfo` on 429) are
//! [`crate::wire::gemini`]'s types, shared with the Gemini dialect.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::route::{only, Operation, PathFacts, Route};
use super::{Surface, SurfaceState};
use crate::error::{ErrorCode, GatewayError, Wording};
use crate::model::call::{Call, CallAnswer, CallOp};
use crate::model::embed::{EmbedInput, EmbedRequest, Embeddings};
use crate::model::listing::Listed;
use crate::model::response::{Answer, ChoiceRef, Completion, FinishReason, Origin, Usage};
use crate::model::stream::StreamEncoder;
use crate::model::surface_state::OwnState;
use crate::model::{Api, Generation, Request};
use crate::wire::gemini::{
    Candidate, Content, Detail, ErrorEnvelope, FunctionCall, GenerateContentResponse, Model,
    ModelList, Part, Status, Text, UsageMetadata,
};
use crate::wire::gemini_embeddings;

mod members;
pub mod request;
mod stream;

pub struct Gemini;

/// The API's roots: `v1beta` (what the SDKs and Gemini CLI call) and `v1`.
const ROOTS: [&str; 2] = ["/v1beta/", "/v1/"];

/// What this surface keeps of a generation for its answer: how its stream
/// is framed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeminiState {
    /// One JSON array rather than SSE: a stream asked for without
    /// `alt=sse` (Gemini's default framing).
    pub json_array: bool,
}

impl OwnState for GeminiState {}

/// Whether an embeddings call is `:batchEmbedContents` (an answer of
/// `embeddings`, one per request) rather than `:embedContent` (one
/// `embedding`): its path says, as this surface routed it.
fn is_batch(call: &Call) -> bool {
    call.path.ends_with(":batchEmbedContents")
}

impl Surface for Gemini {
    /// Everything below `/v1beta/`; below `/v1/` only `models/{model}:{method}`
    /// (`/v1/models` and `/v1/models/{id}` are OpenAI's route, listed in
    /// Gemini's shape for a client that sends `x-goog-api-client`).
    fn route(&self, method: &str, path: &str, query: &str) -> Option<Route> {
        let api = Api::Gemini;
        let (root, rest) = ROOTS
            .iter()
            .find_map(|root| path.strip_prefix(root).map(|rest| (*root, rest)))?;
        let beta = root == "/v1beta/";
        let Some(model_path) = rest.strip_prefix("models") else {
            return beta.then(|| Route::unknown(api, path));
        };
        if model_path.is_empty() {
            return beta.then(|| Route {
                api,
                operation: only(method, path, "GET", || Operation::ListModels),
                metered: false,
            });
        }
        let name = model_path.strip_prefix('/')?;
        let Some((model, action)) = name.rsplit_once(':') else {
            if !beta || name.is_empty() || name.contains('/') {
                return beta.then(|| Route::unknown(api, path));
            }
            let name = crate::formats::url::decode_segment(name);
            return Some(Route {
                api,
                operation: only(method, path, "GET", || Operation::Model(name)),
                metered: false,
            });
        };
        if model.is_empty() || model.contains('/') {
            return Some(Route::unknown(api, path));
        }
        let model = crate::formats::url::decode_segment(model);
        // A call of the path's model. No vendor takes it by this path (the
        // Gemini dialect and Vertex AI make their own), so the query, which
        // may hold the client's `key=`, stays here.
        let call = |op| Route {
            api,
            operation: only(method, path, "POST", || {
                let mut call = Call::new(op, api, path);
                call.model = Some(model.clone());
                Operation::Call(call)
            }),
            metered: true,
        };
        let generate = |stream: bool| {
            let json_array = stream && !query_has(query, "alt", "sse");
            Route {
                api,
                operation: only(method, path, "POST", || {
                    Operation::Generate(PathFacts {
                        model: Some(model.clone()),
                        stream: Some(stream),
                        state: SurfaceState::of(GeminiState { json_array }),
                    })
                }),
                metered: true,
            }
        };
        Some(match action {
            "generateContent" => generate(false),
            "streamGenerateContent" => generate(true),
            "embedContent" | "batchEmbedContents" => call(CallOp::Embeddings),
            "countTokens" => call(CallOp::CountTokens),
            _ => Route::unknown(api, path),
        })
    }

    fn render_models(&self, models: &[Listed], _loaded_at: u64) -> Vec<u8> {
        let list = ModelList {
            models: models.iter().map(model).collect(),
            next_page_token: None,
        };
        serde_json::to_vec(&list).unwrap_or_default()
    }

    fn render_model(&self, listed: &Listed, _loaded_at: u64) -> Vec<u8> {
        serde_json::to_vec(&model(listed)).unwrap_or_default()
    }

    /// `:countTokens`: `contents` or a `generateContentRequest`, for the
    /// path's model; `:embedContent` and `:batchEmbedContents`, embeddings
    /// of the path's model.
    fn parse_call(&self, call: &Call, body: &[u8]) -> Result<Option<Request>, GatewayError> {
        let model = call.model.as_deref().unwrap_or_default();
        match call.op {
            CallOp::CountTokens => request::parse_count(body).map(|mut r| {
                model.clone_into(&mut r.model);
                Some(Request::Chat(Box::new(r.into())))
            }),
            CallOp::Embeddings => gemini_embeddings::parse(body, model, is_batch(call))
                .map(|r| Some(Request::Embed(r))),
            CallOp::Stored { .. } => Err(super::foreign_call()),
        }
    }

    /// The Gen AI SDKs (and so Gemini CLI) send it on every request.
    fn client_header(&self) -> Option<&'static str> {
        Some("x-goog-api-client")
    }

    /// Google's API keys may be given as `?key=` (the SDKs send them in
    /// `x-goog-api-key`; curl examples and some tools in the query).
    fn key_parameter(&self) -> Option<&'static str> {
        Some("key")
    }

    /// `:batchEmbedContents` of the call's model, one request per input.
    fn embeddings_part(
        &self,
        call: &Call,
        part: &EmbedRequest,
    ) -> Result<(String, Vec<u8>), GatewayError> {
        // A Gemini client's inputs are texts (token ids are OpenAI's).
        let EmbedInput::Texts(texts) = &part.input else {
            return Err(super::foreign_call());
        };
        let model = call.model.as_deref().unwrap_or_default();
        let named = format!("models/{model}");
        let body = serde_json::to_vec(&gemini_embeddings::batch_request(part, texts, &named));
        let path = format!(
            "/v1beta/models/{}:batchEmbedContents",
            crate::formats::url::encode_segment(model)
        );
        Ok((path, body.unwrap_or_default()))
    }

    /// `batchEmbedContents`' answer, which names no model.
    fn read_embeddings_part(
        &self,
        body: &[u8],
    ) -> Result<(Embeddings, Option<String>), GatewayError> {
        Ok((gemini_embeddings::decode_batch(body)?, None))
    }

    /// `:countTokens`: `{"totalTokens": N}`; `:embedContent`: one
    /// `embedding`; `:batchEmbedContents`: `embeddings`, one per request.
    fn render_call(&self, call: &Call, answer: CallAnswer) -> Vec<u8> {
        match answer {
            CallAnswer::Count(tokens) => format!("{{\"totalTokens\":{tokens}}}").into_bytes(),
            CallAnswer::Embeddings(e) => gemini_embeddings::render(&e.embeddings, is_batch(call)),
        }
    }

    fn parse_generation(&self, facts: &PathFacts, body: &[u8]) -> Result<Generation, GatewayError> {
        Ok(facts.generation(request::parse(body)?))
    }

    fn render_answer(&self, answer: Answer, origin: &Origin, _state: &SurfaceState) -> Vec<u8> {
        match answer {
            Answer::Decoded(completion) => render_completion(&completion, origin),
            Answer::Native(body) => body,
        }
    }

    fn stream_encoder(&self, _include_usage: bool, state: &SurfaceState) -> Box<dyn StreamEncoder> {
        let json_array = state.get::<GeminiState>().is_some_and(|s| s.json_array);
        Box::new(stream::Chunks::new(json_array))
    }

    fn render_error(&self, error: &GatewayError, request_id: Option<&str>) -> Vec<u8> {
        error_json(error, request_id)
    }

    /// Google's statuses: a vendor failure is its 500 INTERNAL, a busy
    /// vendor its 503 UNAVAILABLE (the SDKs' `ServerError`).
    fn status(&self, code: ErrorCode) -> u16 {
        match code {
            ErrorCode::UpstreamError => 500,
            ErrorCode::UpstreamBusy => 503,
            _ => code.status(),
        }
    }
}

/// Whether the query string has `name=value`.
fn query_has(query: &str, name: &str, value: &str) -> bool {
    query.split('&').any(|pair| {
        pair.split_once('=')
            .is_some_and(|(n, v)| n == name && v.eq_ignore_ascii_case(value))
    })
}

/// A model as a Gemini model: a model group (nothing known of it, owned
/// by no provider) with Gemini's limits and methods; a discovered model
/// with what its vendor said (a limit nobody said is left out).
fn model(listed: &Listed) -> Model<'_> {
    let group = listed.owned_by.is_none();
    let caps = listed.capabilities;
    let mut methods: Vec<Cow<'_, str>> = Vec::new();
    if caps.generate.unwrap_or(caps.embed != Some(true)) {
        methods.extend(["generateContent".into(), "streamGenerateContent".into()]);
    }
    if caps.count_tokens.unwrap_or(true) && !methods.is_empty() {
        methods.push("countTokens".into());
    }
    if caps.embed == Some(true) {
        methods.extend(["embedContent".into(), "batchEmbedContents".into()]);
    }
    let description = match &listed.owned_by {
        None => Cow::Borrowed("a model group of the gateway"),
        Some(provider) => Cow::Owned(format!("a model of provider {provider}")),
    };
    Model {
        name: format!("models/{}", listed.id).into(),
        version: "001".into(),
        display_name: listed.display_name.as_deref().unwrap_or(&listed.id).into(),
        description,
        input_token_limit: listed
            .context_window
            .unwrap_or(if group { 1_048_576 } else { 0 }),
        output_token_limit: listed
            .max_output_tokens
            .unwrap_or(if group { 65_536 } else { 0 }),
        supported_generation_methods: methods,
        thinking: group,
    }
}

/// Google's canonical status name for each of our codes.
pub fn status_name(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::InvalidRequest
        | ErrorCode::ContextLengthExceeded
        | ErrorCode::ContentFiltered
        | ErrorCode::PayloadTooLarge => "INVALID_ARGUMENT",
        ErrorCode::MethodNotAllowed => "UNIMPLEMENTED",
        ErrorCode::AuthFailed => "UNAUTHENTICATED",
        ErrorCode::PermissionDenied => "PERMISSION_DENIED",
        ErrorCode::ModelNotFound => "NOT_FOUND",
        ErrorCode::UpstreamRateLimit | ErrorCode::RateLimited => "RESOURCE_EXHAUSTED",
        ErrorCode::UpstreamError => "INTERNAL",
        ErrorCode::UpstreamBusy => "UNAVAILABLE",
        ErrorCode::UpstreamTimeout => "DEADLINE_EXCEEDED",
    }
}

/// `google.rpc.Status`: `code` the HTTP status, `status` Google's name,
/// `details` Gemini's own as they came (an error of a Gemini vendor,
/// `GatewayError::details`), else an `ErrorInfo` (reason: the gateway's
/// code; metadata: param, provider, request id) and, with a wait, a
/// `RetryInfo`.
pub fn status_of(error: &GatewayError, request_id: Option<&str>) -> Status<Details> {
    let details = match &error.details {
        Some(vendors) => vendors.0.iter().cloned().map(Details::Vendors).collect(),
        None => gateway_details(error, request_id)
            .into_iter()
            .map(Details::Ours)
            .collect(),
    };
    Status {
        code: Some(Gemini.status(error.code)),
        message: error.worded(Wording::Gemini).into_owned(),
        status: status_name(error.code).into(),
        details,
    }
}

/// An error detail: the gateway's own, or a vendor's as it came.
#[derive(serde::Serialize, Debug)]
#[serde(untagged)]
pub enum Details {
    Ours(Detail),
    Vendors(Value),
}

/// The gateway's own details of an error: why, and when to try again.
fn gateway_details(error: &GatewayError, request_id: Option<&str>) -> Vec<Detail> {
    let mut metadata = Map::new();
    for (key, value) in [
        ("param", error.param.as_deref()),
        ("provider", error.provider.as_deref()),
        ("request_id", request_id),
    ] {
        if let Some(value) = value {
            metadata.insert(key.into(), Value::String(value.to_owned()));
        }
    }
    let mut details = vec![Detail::ErrorInfo {
        reason: error.code.as_str(),
        domain: "llm-gateway",
        metadata,
    }];
    if let Some(seconds) = error.retry_after {
        details.push(Detail::RetryInfo {
            retry_delay: format!("{seconds}s"),
        });
    }
    details
}

fn error_json(error: &GatewayError, request_id: Option<&str>) -> Vec<u8> {
    let envelope = ErrorEnvelope {
        error: status_of(error, request_id),
    };
    serde_json::to_vec(&envelope)
        .unwrap_or_else(|_| br#"{"error":{"code":500,"message":"","status":"INTERNAL"}}"#.to_vec())
}

/// Gemini's `finishReason` for a neutral finish.
pub fn finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop | FinishReason::ToolCalls | FinishReason::Paused => "STOP",
        FinishReason::Length => "MAX_TOKENS",
        FinishReason::ContentFilter => "SAFETY",
    }
}

/// Usage as Gemini counts it: thoughts apart from the candidates.
pub fn usage_metadata(usage: &Usage) -> UsageMetadata {
    let thoughts = usage.reasoning_tokens.unwrap_or(0);
    let nonzero = |n: u64| (n > 0).then_some(n);
    UsageMetadata {
        prompt_token_count: Some(usage.prompt_tokens),
        candidates_token_count: Some(usage.completion_tokens.saturating_sub(thoughts)),
        total_token_count: Some(usage.prompt_tokens + usage.completion_tokens),
        cached_content_token_count: usage.cached_tokens.and_then(nonzero),
        tool_use_prompt_token_count: None,
        thoughts_token_count: usage.reasoning_tokens.and_then(nonzero),
    }
}

/// A tool call's arguments (JSON text) as `args`: an object, `{}` when empty.
pub fn args_of(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ if arguments.trim().is_empty() => Value::Object(Map::new()),
        Ok(other) => Value::Object(Map::from_iter([("value".to_owned(), other)])),
        Err(_) => Value::Object(Map::from_iter([(
            "arguments".to_owned(),
            Value::String(arguments.to_owned()),
        )])),
    }
}

/// What marks another vendor's reasoning signature inside a
/// `thoughtSignature` (which Gemini's clients hold as base64 bytes).
const SIGNATURE_MARK: &[u8] = b"llm-gateway:signature:";
/// The same for an encrypted (redacted) reasoning block.
const REDACTED_MARK: &[u8] = b"llm-gateway:redacted:";

/// Another vendor's signature (or redacted block) as a `thoughtSignature`:
/// base64 of a mark and the signature, so the SDKs take it as the bytes
/// they expect and a later turn gives the vendor its own signature back.
pub fn carry_signature(signature: &str, redacted: bool) -> String {
    let mark = if redacted {
        REDACTED_MARK
    } else {
        SIGNATURE_MARK
    };
    let mut bytes = Vec::with_capacity(mark.len() + signature.len());
    bytes.extend_from_slice(mark);
    bytes.extend_from_slice(signature.as_bytes());
    crate::formats::base64::encode_padded(&bytes)
}

/// A signature [`carry_signature`] made, back: `(signature, redacted)`;
/// `None` for Gemini's own (which only Gemini can check).
pub fn carried_signature(text: &str) -> Option<(String, bool)> {
    let bytes = crate::formats::base64::decode(text)?;
    let (rest, redacted) = match bytes.strip_prefix(SIGNATURE_MARK) {
        Some(rest) => (rest, false),
        None => (bytes.strip_prefix(REDACTED_MARK)?, true),
    };
    String::from_utf8(rest.to_vec()).ok().map(|s| (s, redacted))
}

/// A thought part (`thought: true`), with the (carried) signature that closes it.
pub fn thought_part(text: &str, signature: Option<String>) -> Part<'_> {
    Part {
        text: Some(text.into()),
        thought: Some(true),
        thought_signature: signature.map(Text::from),
        ..Part::default()
    }
}

/// A `GenerateContentResponse`: a candidate each (`candidateCount`).
fn render_completion(completion: &Completion, origin: &Origin) -> Vec<u8> {
    let response = GenerateContentResponse {
        candidates: completion.choices().map(render_candidate).collect(),
        usage_metadata: completion.usage.as_ref().map(usage_metadata),
        model_version: Some(origin.model.as_str().into()),
        response_id: Some(Text(Cow::Borrowed(origin.id.as_str()))),
        ..GenerateContentResponse::default()
    };
    serde_json::to_vec(&response).unwrap_or_default()
}

/// One choice as a candidate.
fn render_candidate(completion: ChoiceRef<'_>) -> Candidate<'_> {
    let mut parts =
        Vec::with_capacity(completion.reasoning.len() + 1 + completion.tool_calls.len());
    for thinking in completion.reasoning {
        match &thinking.redacted {
            // Anthropic's encrypted thinking: an empty thought carrying it.
            Some(data) => parts.push(thought_part("", Some(carry_signature(data, true)))),
            None => parts.push(thought_part(
                &thinking.text,
                thinking
                    .signature
                    .as_deref()
                    .map(|s| carry_signature(s, false)),
            )),
        }
    }
    if let Some(text) = completion.content.filter(|t| !t.is_empty()) {
        parts.push(Part {
            text: Some(text.into()),
            ..Part::default()
        });
    }
    for call in completion.tool_calls {
        parts.push(Part {
            function_call: Some(FunctionCall {
                id: Some(call.id.as_str().into()),
                name: call.function.name.as_str().into(),
                args: Some(args_of(&call.function.arguments)),
            }),
            ..Part::default()
        });
    }
    Candidate {
        content: Some(Content {
            role: Some("model".into()),
            parts,
        }),
        finish_reason: Some(
            finish_reason(completion.finish_reason.unwrap_or(FinishReason::Stop)).into(),
        ),
        index: Some(completion.index),
    }
}

#[cfg(test)]
mod tests;
