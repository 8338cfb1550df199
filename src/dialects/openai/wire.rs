//! OpenAI's wire types shared by its answers and its stream: errors,
//! usage, and Azure's content filter annotations.

use serde::Deserialize;
use serde_json::Value;

use crate::dialects::fallback_message;
use crate::error::{ErrorCode, GatewayError};
use crate::model::response::{FinishReason, Usage};

/// Whether Azure's `content_filter_results` says a category was filtered.
pub(in crate::dialects) fn content_filtered(results: &Value) -> bool {
    results.as_object().is_some_and(|results| {
        results
            .values()
            .any(|r| r.get("filtered") == Some(&Value::Bool(true)))
    })
}

/// Azure reports its output filter per choice in `content_filter_results`:
/// a category with `filtered: true` means the answer was cut by the filter,
/// whatever `finish_reason` says.
pub(in crate::dialects) fn fold_content_filter(choice: &mut Value) {
    let filtered = choice
        .get("content_filter_results")
        .is_some_and(content_filtered);
    if filtered {
        if let Some(choice) = choice.as_object_mut() {
            choice.insert(
                "finish_reason".into(),
                Value::String(FinishReason::ContentFilter.as_str().into()),
            );
        }
    }
}

pub(in crate::dialects) fn decode_error(status: u16, body: &[u8]) -> GatewayError {
    match serde_json::from_slice::<ErrorEnvelope>(body) {
        Ok(envelope) => envelope.error.into_gateway_error(status),
        Err(_) => GatewayError::new(
            ErrorCode::from_status(status),
            fallback_message(status, body),
        ),
    }
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: VendorError,
}

#[derive(Deserialize)]
pub(in crate::dialects) struct VendorError {
    #[serde(default)]
    message: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    param: Option<String>,
    /// Azure: `{"code": "ResponsibleAIPolicyViolation", "content_filter_result": ...}`.
    #[serde(default)]
    innererror: Option<InnerError>,
}

#[derive(Deserialize)]
struct InnerError {
    #[serde(default)]
    code: Option<String>,
}

impl VendorError {
    pub(in crate::dialects) fn into_gateway_error(self, status: u16) -> GatewayError {
        let code = self
            .code
            .as_ref()
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = self.kind.as_deref().unwrap_or_default();
        let policy_violation = self
            .innererror
            .as_ref()
            .and_then(|e| e.code.as_deref())
            .is_some_and(|c| c == "ResponsibleAIPolicyViolation");
        let unified = match code {
            _ if policy_violation => ErrorCode::ContentFiltered,
            "context_length_exceeded" | "string_above_max_length" => {
                ErrorCode::ContextLengthExceeded
            }
            "content_filter" | "content_policy_violation" => ErrorCode::ContentFiltered,
            _ if kind == "server_error" && status < 400 => ErrorCode::UpstreamError,
            _ => ErrorCode::from_status(status),
        };
        let mut e = GatewayError::new(unified, self.message);
        e.param = self.param;
        e
    }
}

#[derive(Deserialize)]
struct OpenAiUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<Details>,
    #[serde(default)]
    completion_tokens_details: Option<Details>,
}

#[derive(Deserialize)]
struct Details {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

pub(in crate::dialects) fn parse_usage(v: &Value) -> Option<Usage> {
    let u = OpenAiUsage::deserialize(v).ok()?;
    Some(Usage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        cached_tokens: u.prompt_tokens_details.and_then(|d| d.cached_tokens),
        reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
    })
}

/// A `chat.completion` as a client of another API needs it (typed; the
/// chat surface gets the vendor's object edited instead).
#[derive(Deserialize)]
pub(in crate::dialects) struct WireCompletion {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub choices: Vec<WireChoice>,
    #[serde(default)]
    pub usage: Option<Value>,
}

#[derive(Deserialize)]
pub(in crate::dialects) struct WireChoice {
    #[serde(default, alias = "delta")]
    pub message: Option<WireMessage>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub content_filter_results: Option<Value>,
}

impl WireChoice {
    /// The finish, with Azure's filter annotations folded in.
    pub fn finish(&self) -> Option<FinishReason> {
        if self
            .content_filter_results
            .as_ref()
            .is_some_and(content_filtered)
        {
            return Some(FinishReason::ContentFilter);
        }
        self.finish_reason.as_deref().and_then(FinishReason::parse)
    }
}

/// A message, or a stream chunk's delta (the same fields, in pieces).
#[derive(Deserialize, Default)]
pub(in crate::dialects) struct WireMessage {
    #[serde(default)]
    pub content: Option<String>,
    /// DeepSeek's, vLLM's and others' reasoning text (`reasoning` on some).
    #[serde(default, alias = "reasoning")]
    pub reasoning_content: Option<String>,
    #[serde(default)]
    pub refusal: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
pub(in crate::dialects) struct WireToolCall {
    /// Stream deltas name their call by index.
    #[serde(default)]
    pub index: u64,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<WireFunction>,
}

#[derive(Deserialize)]
pub(in crate::dialects) struct WireFunction {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
}
