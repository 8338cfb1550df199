//! What the edge role reads of an answer it rewrites: Envoy's retry
//! overflow, an error's message, whether it is already in the unified
//! envelope.

use super::Host;

/// The edge role's `response.code_details` stand-in for a retry overflow
/// (Envoy's own details say `via_upstream`): a marker `GatewayError::envoy_reply` knows.
pub(super) const RETRY_OVERFLOW: &[u8] = b"upstream_rq_retry_overflow";
/// Envoy's `UpstreamOverflow` response flag (`UO`), in `response.flags`.
const UPSTREAM_OVERFLOW: u64 = 0x80;

/// Envoy would have retried the answer but for the circuit breaker's
/// `max_retries` (the router then flags the response `UO`).
pub(super) fn retry_overflowed(host: &impl Host) -> bool {
    host.property(&["response", "flags"])
        .ok()
        .flatten()
        .and_then(|b| b.get(..8).and_then(|b| b.try_into().ok()))
        .is_some_and(|b| u64::from_le_bytes(b) & UPSTREAM_OVERFLOW != 0)
}

/// An error answer's message (`error.message` in every client API's
/// envelope, else a top-level `message`), or nothing.
pub(super) fn error_message(body: &[u8]) -> String {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return String::new();
    };
    let message = value
        .pointer("/error/message")
        .or_else(|| value.get("message"))
        .and_then(serde_json::Value::as_str);
    message.unwrap_or_default().to_owned()
}

/// A body that is already `{"error": {...}}`.
pub(super) fn is_unified_error(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .is_ok_and(|v| v.get("error").is_some_and(serde_json::Value::is_object))
}
