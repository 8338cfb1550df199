//! Bedrock's Converse API (`/model/{modelId}/converse`, `converse-stream`):
//! the request the bedrock dialect sends, the answer, the stream's events
//! and AWS's error body, in Bedrock's member names.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    pub messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<Block<'a>>,
    #[serde(skip_serializing_if = "InferenceConfig::is_empty")]
    pub inference_config: InferenceConfig<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_model_request_fields: Option<Value>,
    /// `["/stop_sequence"]` for Claude with stop sequences: which one
    /// matched comes back in `additionalModelResponseFields`.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub additional_model_response_field_paths: &'a [&'a str],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InferenceConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub stop_sequences: &'a [String],
}

impl InferenceConfig<'_> {
    pub fn is_empty(&self) -> bool {
        self.max_tokens.is_none()
            && self.temperature.is_none()
            && self.top_p.is_none()
            && self.stop_sequences.is_empty()
    }
}

/// One conversation turn of content blocks.
pub type Turn<'a> = crate::wire::Turn<Block<'a>>;

/// A Converse content block: exactly one of its members is set.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Block<'a> {
    Text(#[serde(serialize_with = "crate::formats::json_text::serialize")] Cow<'a, str>),
    Image {
        format: &'static str,
        source: ImageSource<'a>,
    },
    #[serde(rename_all = "camelCase")]
    ToolUse {
        tool_use_id: &'a str,
        name: &'a str,
        input: Value,
    },
    #[serde(rename_all = "camelCase")]
    ToolResult {
        tool_use_id: &'a str,
        /// ToolResultContentBlocks: the result's text and image blocks.
        content: Vec<Block<'a>>,
        /// `error` for a failed tool (ToolResultBlock `status`).
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<&'static str>,
    },
    ReasoningContent(ReasoningBlock<'a>),
    CachePoint(CachePoint<'a>),
}

/// A reasoning block of the history, as Claude on Bedrock wants it back:
/// the text with its signature, unmodified, or the redacted bytes.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ReasoningBlock<'a> {
    ReasoningText {
        #[serde(serialize_with = "crate::formats::json_text::serialize")]
        text: &'a str,
        signature: &'a str,
    },
    RedactedContent(&'a str),
}

/// `{"cachePoint": {"type": "default", "ttl"?}}`: the prefix up to here may
/// be cached (ttl `5m` or `1h`, the values Bedrock takes).
#[derive(Serialize)]
pub struct CachePoint<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<&'a str>,
}

#[derive(Serialize)]
pub struct ImageSource<'a> {
    pub bytes: &'a str,
}

#[derive(Deserialize)]
pub struct AwsError {
    #[serde(default, alias = "Message")]
    pub message: Option<String>,
    #[serde(default, rename = "__type")]
    pub kind: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConverseResponse {
    pub output: Output,
    #[serde(default)]
    pub stop_reason: String,
    #[serde(default)]
    pub usage: Option<BedrockUsage>,
    #[serde(default)]
    pub trace: Value,
    #[serde(default)]
    pub additional_model_response_fields: ResponseFields,
}

/// The model's own answer fields asked for by
/// `additionalModelResponseFieldPaths`: Claude's matched stop sequence.
#[derive(Deserialize, Default)]
pub struct ResponseFields {
    #[serde(default)]
    pub stop_sequence: Option<String>,
}

#[derive(Deserialize)]
pub struct Output {
    pub message: OutputMessage,
}

#[derive(Deserialize)]
pub struct OutputMessage {
    #[serde(default)]
    pub content: Vec<OutputBlock>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputBlock {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_use: Option<ToolUse>,
    #[serde(default)]
    pub reasoning_content: Option<ReasoningOut>,
}

/// An answer's `reasoningContent`: `reasoningText {text, signature}` or
/// `redactedContent` (base64).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningOut {
    #[serde(default)]
    pub reasoning_text: Option<ReasoningText>,
    #[serde(default)]
    pub redacted_content: Option<String>,
}

#[derive(Deserialize)]
pub struct ReasoningText {
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub signature: Option<String>,
}

/// A stream's `delta.reasoningContent`: one of `text`, `signature`,
/// `redactedContent`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeltaReasoning {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub signature: Option<String>,
    #[serde(default)]
    pub redacted_content: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUse {
    pub tool_use_id: String,
    pub name: String,
    #[serde(default)]
    pub input: Value,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "camelCase")]
pub struct BedrockUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_write_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStart {
    #[serde(default)]
    pub content_block_index: u64,
    #[serde(default)]
    pub start: Option<StartBody>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartBody {
    #[serde(default)]
    pub tool_use: Option<StartToolUse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartToolUse {
    pub tool_use_id: String,
    pub name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDelta {
    #[serde(default)]
    pub content_block_index: u64,
    pub delta: DeltaBody,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeltaBody {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_use: Option<DeltaToolUse>,
    #[serde(default)]
    pub reasoning_content: Option<DeltaReasoning>,
}

#[derive(Deserialize)]
pub struct DeltaToolUse {
    #[serde(default)]
    pub input: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageStop {
    #[serde(default)]
    pub stop_reason: String,
    #[serde(default)]
    pub additional_model_response_fields: ResponseFields,
}

#[derive(Deserialize)]
pub struct Metadata {
    #[serde(default)]
    pub usage: Option<BedrockUsage>,
}

#[derive(Deserialize)]
pub struct ExceptionBody {
    #[serde(default, alias = "Message")]
    pub message: String,
}

// --- the control plane's model lists (bedrock.{region}.amazonaws.com) -----------

/// One foundation model of `GET /foundation-models` (ListFoundationModels)
/// and of `GET /foundation-models/{id}` (GetFoundationModel's `modelDetails`).
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct FoundationModel<'a> {
    #[serde(borrow)]
    pub model_id: Cow<'a, str>,
    #[serde(default)]
    pub model_name: Option<Cow<'a, str>>,
    #[serde(default)]
    pub provider_name: Option<Cow<'a, str>>,
    /// `TEXT`, `IMAGE`, `EMBEDDING`.
    #[serde(default)]
    pub input_modalities: Vec<Cow<'a, str>>,
    #[serde(default)]
    pub output_modalities: Vec<Cow<'a, str>>,
    #[serde(default)]
    pub model_lifecycle: Option<Lifecycle<'a>>,
}

/// `ACTIVE` or `LEGACY` (still served, to those who used it).
#[derive(Deserialize, Debug)]
pub struct Lifecycle<'a> {
    #[serde(borrow, default)]
    pub status: Cow<'a, str>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct FoundationModels<'a> {
    #[serde(borrow, default)]
    pub model_summaries: Vec<FoundationModel<'a>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct FoundationModelDetails<'a> {
    #[serde(borrow)]
    pub model_details: FoundationModel<'a>,
}

/// One inference profile of `GET /inference-profiles` (ListInferenceProfiles)
/// and of `GET /inference-profiles/{id}` (GetInferenceProfile): a model id
/// requests use (`us.anthropic.claude-...`) across regions.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct InferenceProfile<'a> {
    #[serde(borrow)]
    pub inference_profile_id: Cow<'a, str>,
    #[serde(default)]
    pub inference_profile_name: Option<Cow<'a, str>>,
    /// `ACTIVE`.
    #[serde(default)]
    pub status: Option<Cow<'a, str>>,
    /// RFC 3339.
    #[serde(default)]
    pub created_at: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct InferenceProfiles<'a> {
    #[serde(borrow, default)]
    pub inference_profile_summaries: Vec<InferenceProfile<'a>>,
    #[serde(default)]
    pub next_token: Option<Cow<'a, str>>,
}
