//! Google's Gemini API (`generateContent`, `streamGenerateContent`,
//! `countTokens`, the model list, `google.rpc.Status` errors) as serde
//! types, both directions: the Gemini dialect writes the request and reads
//! the answer, stream events and errors; the Gemini surface reads the
//! request and writes the rest. One type each.
//!
//! Field order is Google's (the dialect's request as it always was sent).
//! Strings of answers are [`Text`], borrowed from the bytes unless an
//! escape forces a copy. Types the dialect reads from the vendor ignore
//! members they do not know (Gemini adds them); the request's top-level
//! members and its configuration objects refuse unknown ones, as Gemini
//! does (`Invalid JSON payload received. Unknown name`). Gemini's JSON
//! takes proto field names too (`system_instruction`): the common ones are
//! aliases.

use std::borrow::Cow;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

mod functions;
mod models;
mod status;
pub use functions::{FunctionCall, FunctionResponse, FunctionResponsePart};
pub use models::{Model, ModelList, PublisherModel, PublisherModels};
pub use status::{Detail, ErrorBody, ErrorEnvelope, Status};

/// A string of the wire, borrowed from its bytes unless an escape forces a
/// copy (`Option<Cow<str>>` alone would always copy); written as
/// `crate::formats::json_text` writes long texts.
#[derive(Deserialize, Debug, Clone, PartialEq, Default)]
#[serde(transparent)]
pub struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl Serialize for Text<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::formats::json_text::serialize(self.0.as_ref(), s)
    }
}

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'a> From<&'a str> for Text<'a> {
    fn from(s: &'a str) -> Self {
        Text(Cow::Borrowed(s))
    }
}

impl From<String> for Text<'_> {
    fn from(s: String) -> Self {
        Text(Cow::Owned(s))
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

// --- request ----------------------------------------------------------------

/// `GenerateContentRequest` (also `countTokens`' `generateContentRequest`,
/// which carries `model`).
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GenerateContentRequest<'a> {
    /// Only in `countTokens`' `generateContentRequest` (`models/{model}`).
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub model: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub contents: Vec<Content<'a>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "system_instruction",
        borrow
    )]
    pub system_instruction: Option<Content<'a>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", borrow)]
    pub tools: Vec<Tool<'a>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "tool_config",
        borrow
    )]
    pub tool_config: Option<ToolConfig<'a>>,
    #[serde(
        default,
        skip_serializing_if = "GenerationConfig::is_empty",
        alias = "generation_config",
        borrow
    )]
    pub generation_config: GenerationConfig<'a>,
    /// Passed to Gemini, dropped for other vendors (they have none).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "safety_settings"
    )]
    pub safety_settings: Option<Value>,
    /// A context cache of Gemini's: Gemini only.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "cached_content",
        borrow
    )]
    pub cached_content: Option<Text<'a>>,
    /// Vertex AI's; the Gemini API refuses it, as it is sent on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Value>,
    /// Flex, standard or priority processing: a price and latency choice,
    /// dropped for other vendors as the other surfaces drop theirs.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "service_tier"
    )]
    pub service_tier: Option<Value>,
    /// Whether Google logs the request (its logging policy): dropped for
    /// other vendors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<Value>,
    /// Resumes an answer Gemini stopped with `CONTINUATION`: Gemini only.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "continuation_token"
    )]
    pub continuation_token: Option<Value>,
}

/// `countTokens`' body: `contents`, or a whole `generateContentRequest`.
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CountTokensRequest<'a> {
    #[serde(default, borrow)]
    pub contents: Option<Vec<Content<'a>>>,
    #[serde(default, alias = "generate_content_request", borrow)]
    pub generate_content_request: Option<GenerateContentRequest<'a>>,
}

/// A turn (`role` `user` or `model`) or the system instruction (no role).
#[derive(Serialize, Deserialize, Debug, Default, Clone)]
pub struct Content<'a> {
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub role: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub parts: Vec<Part<'a>>,
}

/// One part: one of the data members, with `thought` and the
/// `thoughtSignature` beside it. Parts of kinds not modelled here (Gemini
/// 3's `toolCall`/`toolResponse` of its own search) are skipped when read.
#[derive(Serialize, Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Part<'a> {
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub text: Option<Text<'a>>,
    /// A thought summary, not part of the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "inline_data",
        borrow
    )]
    pub inline_data: Option<Blob<'a>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "file_data",
        borrow
    )]
    pub file_data: Option<FileData<'a>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "function_call",
        borrow
    )]
    pub function_call: Option<FunctionCall<'a>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "function_response",
        borrow
    )]
    pub function_response: Option<FunctionResponse<'a>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "executable_code"
    )]
    pub executable_code: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "code_execution_result"
    )]
    pub code_execution_result: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "video_metadata"
    )]
    pub video_metadata: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "thought_signature",
        borrow
    )]
    pub thought_signature: Option<Text<'a>>,
}

impl Part<'_> {
    pub fn is_thought(&self) -> bool {
        self.thought == Some(true)
    }
}

/// Inline bytes, base64.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Blob<'a> {
    #[serde(alias = "mime_type", borrow)]
    pub mime_type: Text<'a>,
    #[serde(borrow)]
    pub data: Text<'a>,
}

/// A file by URI (Gemini's Files API, or a URL Gemini fetches).
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct FileData<'a> {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "mime_type",
        borrow
    )]
    pub mime_type: Option<Text<'a>>,
    #[serde(alias = "file_uri", borrow)]
    pub file_uri: Text<'a>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tool<'a> {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        alias = "function_declarations",
        borrow
    )]
    pub function_declarations: Vec<FunctionDeclaration<'a>>,
    /// Grounding with Google Search (`{"googleSearch": {}}`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "google_search"
    )]
    pub google_search: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "google_search_retrieval"
    )]
    pub google_search_retrieval: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "code_execution"
    )]
    pub code_execution: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "url_context"
    )]
    pub url_context: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "computer_use"
    )]
    pub computer_use: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "file_search"
    )]
    pub file_search: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "google_maps"
    )]
    pub google_maps: Option<Value>,
    /// Remote MCP servers Gemini calls itself.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "mcp_servers"
    )]
    pub mcp_servers: Option<Value>,
}

impl Tool<'_> {
    /// The first built-in (server-side) tool it declares, by its member name.
    pub fn built_in(&self) -> Option<&'static str> {
        [
            ("googleSearch", self.google_search.is_some()),
            (
                "googleSearchRetrieval",
                self.google_search_retrieval.is_some(),
            ),
            ("codeExecution", self.code_execution.is_some()),
            ("urlContext", self.url_context.is_some()),
            ("computerUse", self.computer_use.is_some()),
            ("fileSearch", self.file_search.is_some()),
            ("googleMaps", self.google_maps.is_some()),
            ("mcpServers", self.mcp_servers.is_some()),
        ]
        .into_iter()
        .find_map(|(name, set)| set.then_some(name))
    }
}

#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FunctionDeclaration<'a> {
    #[serde(borrow)]
    pub name: Text<'a>,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub description: Option<Text<'a>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "parameters_json_schema"
    )]
    pub parameters_json_schema: Option<Cow<'a, Value>>,
    /// The OpenAPI-subset schema (`type: OBJECT`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "response_json_schema"
    )]
    pub response_json_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<Value>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolConfig<'a> {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "function_calling_config",
        borrow
    )]
    pub function_calling_config: Option<FunctionCallingConfig<'a>>,
    /// Gemini 3 refuses built-in tools beside function declarations without
    /// it (400 "Please enable tool_config.include_server_side_tool_invocations
    /// to use Built-in tools with Function calling").
    #[serde(
        default,
        skip_serializing_if = "is_false",
        alias = "include_server_side_tool_invocations"
    )]
    pub include_server_side_tool_invocations: bool,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "retrieval_config"
    )]
    pub retrieval_config: Option<Value>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FunctionCallingConfig<'a> {
    /// `AUTO`, `ANY`, `NONE`, `VALIDATED`.
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub mode: Option<Text<'a>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "allowed_function_names"
    )]
    pub allowed_function_names: Option<Vec<Text<'a>>>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GenerationConfig<'a> {
    #[serde(
        default,
        skip_serializing_if = "<[_]>::is_empty",
        alias = "stop_sequences"
    )]
    pub stop_sequences: Cow<'a, [String]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "top_p")]
    pub top_p: Option<f64>,
    /// An int32 to Gemini: written as an integer when it is one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "whole_number",
        alias = "top_k"
    )]
    pub top_k: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "max_output_tokens"
    )]
    pub max_output_tokens: Option<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "candidate_count"
    )]
    pub candidate_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "presence_penalty"
    )]
    pub presence_penalty: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "frequency_penalty"
    )]
    pub frequency_penalty: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "response_mime_type",
        borrow
    )]
    pub response_mime_type: Option<Text<'a>>,
    /// The OpenAPI-subset schema.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "response_schema"
    )]
    pub response_schema: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "response_json_schema",
        alias = "_responseJsonSchema"
    )]
    pub response_json_schema: Option<Cow<'a, Value>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "thinking_config"
    )]
    pub thinking_config: Option<ThinkingConfig<'a>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "response_modalities"
    )]
    pub response_modalities: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "response_logprobs"
    )]
    pub response_logprobs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "media_resolution"
    )]
    pub media_resolution: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "speech_config"
    )]
    pub speech_config: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "image_config"
    )]
    pub image_config: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "enable_enhanced_civic_answers"
    )]
    pub enable_enhanced_civic_answers: Option<bool>,
    /// Transcripts of audio output (only with an audio modality).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "audio_transcription_config"
    )]
    pub audio_transcription_config: Option<Value>,
}

impl GenerationConfig<'_> {
    pub fn is_empty(&self) -> bool {
        self.stop_sequences.is_empty()
            && self.temperature.is_none()
            && self.top_p.is_none()
            && self.top_k.is_none()
            && self.max_output_tokens.is_none()
            && self.candidate_count.is_none()
            && self.seed.is_none()
            && self.presence_penalty.is_none()
            && self.frequency_penalty.is_none()
            && self.response_mime_type.is_none()
            && self.response_schema.is_none()
            && self.response_json_schema.is_none()
            && self.thinking_config.is_none()
            && self.response_modalities.is_none()
            && self.response_logprobs.is_none()
            && self.logprobs.is_none()
            && self.media_resolution.is_none()
            && self.speech_config.is_none()
            && self.image_config.is_none()
            && self.enable_enhanced_civic_answers.is_none()
            && self.audio_transcription_config.is_none()
    }
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThinkingConfig<'a> {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "include_thoughts"
    )]
    pub include_thoughts: Option<bool>,
    /// Tokens; -1 is Gemini's dynamic thinking, 0 none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "thinking_budget"
    )]
    pub thinking_budget: Option<i64>,
    /// `minimal`, `low`, `medium`, `high` (Gemini 3).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "thinking_level",
        borrow
    )]
    pub thinking_level: Option<Text<'a>>,
}

// --- response ---------------------------------------------------------------

/// `GenerateContentResponse`: an answer, or one stream event.
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentResponse<'a> {
    #[serde(default, skip_serializing_if = "Vec::is_empty", borrow)]
    pub candidates: Vec<Candidate<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub prompt_feedback: Option<PromptFeedback<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_metadata: Option<UsageMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub model_version: Option<Text<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub response_id: Option<Text<'a>>,
    /// A stream can end with an error object instead of a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Status>,
}

/// The most candidates Gemini answers (`generationConfig.candidateCount`:
/// Google documents 1 to 8).
pub const MAX_CANDIDATES: u32 = 8;

#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct Candidate<'a> {
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub content: Option<Content<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub finish_reason: Option<Text<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct PromptFeedback<'a> {
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub block_reason: Option<Text<'a>>,
}

/// Token counts; proto3 JSON leaves out zeros.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UsageMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_token_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates_token_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_token_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_content_token_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_prompt_token_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thoughts_token_count: Option<u64>,
}

/// `countTokens`' answer.
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct CountTokensResponse {
    // Proto3 JSON leaves out a zero.
    #[serde(default)]
    pub total_tokens: u64,
}

/// A number Gemini's proto decoder reads as an integer (`topK`): written
/// without a fraction when it has none.
fn whole_number<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => s.serialize_i64(*n as i64),
        Some(n) => s.serialize_f64(*n),
        None => s.serialize_none(),
    }
}
