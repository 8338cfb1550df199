//! A whole answer's pieces: who answered, thoughts, usage, and the
//! vendor's errors (`google.rpc.Status`) in the gateway's vocabulary.

use super::*;
/// Takes the vendor's response id and model version when given.
pub(super) fn stamp(response: &GenerateResponse, origin: &mut Origin) {
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
        // Gemini caches by itself and counts no writes.
        cache_write_tokens: None,
    }
}

// --- errors ---------------------------------------------------------------------

/// A `google.rpc.Status` as the unified error.
pub(super) fn unified_error(error: Status, status: u16) -> GatewayError {
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
            details: Some(Box::new(crate::error::VendorDetails(error.details))),
            ..GatewayError::new(code, error.message)
        }
    }
}

/// A protobuf Duration in JSON ("7s", "1.5s") as whole seconds, rounded up
/// (retry-after takes whole seconds; waiting less is retrying too early).
pub(super) fn retry_seconds(duration: &str) -> Option<u64> {
    let secs: f64 = duration.strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| secs.ceil() as u64)
}
