//! What the openai and azure dialects make of OpenAI's answers beyond the
//! wire types (`crate::wire::openai_chat`): errors in the neutral
//! vocabulary, and Azure's content filter folded into a finish.

use serde_json::Value;

use crate::dialects::fallback_message;
use crate::error::{ErrorCode, GatewayError};
use crate::model::response::FinishReason;
use crate::wire::openai_chat::{content_filtered, ErrorBody, ErrorEnvelope};

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
        Ok(envelope) => gateway_error(envelope.error, Some(status)),
        Err(_) => GatewayError::new(
            ErrorCode::from_status(status),
            fallback_message(status, body),
        ),
    }
}

/// A vendor's error in the neutral vocabulary. `status` is its answer's
/// HTTP status; an error event of a stream has none (the stream began
/// with a 200): Azure then names the status it means as the code
/// (`"code": "429"` when its rate limit strikes mid-stream), which maps as
/// that status does; any other stream error is a 500's.
pub(in crate::dialects) fn gateway_error(error: ErrorBody, status: Option<u16>) -> GatewayError {
    let code = error.code.as_deref().unwrap_or_default();
    let status = status
        .or_else(|| code.parse().ok().filter(|s| (400..600).contains(s)))
        .unwrap_or(500);
    let kind = error.kind.as_deref().unwrap_or_default();
    let policy_violation = error
        .innererror
        .as_ref()
        .and_then(|e| e.code.as_deref())
        .is_some_and(|c| c == "ResponsibleAIPolicyViolation");
    let unified = match code {
        _ if policy_violation => ErrorCode::ContentFiltered,
        "context_length_exceeded" | "string_above_max_length" => ErrorCode::ContextLengthExceeded,
        // The embeddings API says so in words only (its code is null).
        _ if status == 400 && error.message.contains("maximum context length") => {
            ErrorCode::ContextLengthExceeded
        }
        "content_filter" | "content_policy_violation" => ErrorCode::ContentFiltered,
        _ if kind == "server_error" && status < 400 => ErrorCode::UpstreamError,
        _ => ErrorCode::from_status(status),
    };
    let mut e = GatewayError::new(unified, error.message);
    e.param = error.param.map(String::from);
    e
}
