//! DashScope's native text-generation API (`/api/v1/services/aigc/...`):
//! the request the dashscope dialect sends (`input.messages`,
//! `parameters`), its answer and stream events, and its error body.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::openai_chat::{OutResponseFormat, OutToolCalls, OutTools};
use crate::model::response::Usage;

#[derive(Serialize)]
pub struct Request<'a> {
    pub model: &'a str,
    pub input: Input<'a>,
    pub parameters: Parameters<'a>,
}

#[derive(Serialize)]
pub struct Input<'a> {
    pub messages: Vec<OutMessage<'a>>,
}

#[derive(Serialize)]
pub struct OutMessage<'a> {
    pub role: &'static str,
    pub content: OutContent<'a>,
    #[serde(skip_serializing_if = "OutToolCalls::is_empty")]
    pub tool_calls: OutToolCalls<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<&'a str>,
}

/// Message content: a string for text models, `[{"text"}, {"image"}]` for VL models.
#[derive(Serialize)]
#[serde(untagged)]
pub enum OutContent<'a> {
    Text(#[serde(serialize_with = "crate::formats::json_text::serialize")] Cow<'a, str>),
    Parts(Vec<OutPart<'a>>),
}

#[derive(Serialize)]
#[serde(untagged)]
pub enum OutPart<'a> {
    Text {
        #[serde(serialize_with = "crate::formats::json_text::serialize")]
        text: &'a str,
    },
    // DashScope takes http(s) and base64 data URLs alike.
    Image {
        image: &'a str,
    },
}

#[derive(Serialize)]
pub struct Parameters<'a> {
    pub result_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "OutTools::is_empty")]
    pub tools: OutTools<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<OutResponseFormat<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub incremental_output: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_thinking: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Qwen's own web search (`enable_search`), for the client's web search
    /// without a domain filter (Qwen has none).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub enable_search: bool,
}

#[derive(Deserialize)]
pub struct VendorError {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Deserialize)]
pub struct Response {
    #[serde(default)]
    pub output: Option<Output>,
    #[serde(default)]
    pub usage: Option<DashScopeUsage>,
    #[serde(default)]
    pub request_id: Option<String>,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Deserialize)]
pub struct Output {
    #[serde(default)]
    pub choices: Vec<Choice>,
}

#[derive(Deserialize)]
pub struct Choice {
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub message: OutputMessage,
}

#[derive(Deserialize, Default)]
pub struct OutputMessage {
    /// Qwen's thinking, before the answer.
    #[serde(default)]
    pub reasoning_content: Option<String>,
    #[serde(default)]
    pub content: Option<MessageContent>,
    #[serde(default)]
    pub tool_calls: Vec<OutputToolCall>,
}

/// Text models answer a string, VL models `[{"text": ...}]`.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<Value>),
}

#[derive(Deserialize)]
pub struct OutputToolCall {
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: OutputFunction,
}

#[derive(Deserialize, Default)]
pub struct OutputFunction {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: String,
}

#[derive(Deserialize, Default, Clone, Copy)]
pub struct DashScopeUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub prompt_tokens_details: Option<Details>,
    #[serde(default)]
    pub output_tokens_details: Option<Details>,
}

#[derive(Deserialize, Default, Clone, Copy)]
pub struct Details {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl MessageContent {
    pub fn into_text(self) -> String {
        match self {
            Self::Text(t) => t,
            Self::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
        }
    }
}

impl DashScopeUsage {
    pub fn unified(self) -> Usage {
        Usage {
            prompt_tokens: self.input_tokens,
            completion_tokens: self.output_tokens,
            cached_tokens: self.prompt_tokens_details.and_then(|d| d.cached_tokens),
            reasoning_tokens: self.output_tokens_details.and_then(|d| d.reasoning_tokens),
            cache_write_tokens: None,
        }
    }
}
