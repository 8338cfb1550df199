//! The one error vocabulary every client sees, whatever went wrong and wherever.
//!
//! Vendor errors, Envoy local replies and our own validation failures all end
//! up as a [`GatewayError`], rendered as
//! `{"error": {"message", "type", "code", "param", "provider", "request_id"}}`
//! with the HTTP status from the table in DESIGN.md (the OpenAI surfaces;
//! the Messages surface has Anthropic's envelope), its message in the words
//! of the surface's vendor ([`GatewayError::worded`]).

use std::borrow::Cow;

/// Unified error codes (DESIGN.md "Errors").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidRequest,
    ContextLengthExceeded,
    ContentFiltered,
    AuthFailed,
    PermissionDenied,
    ModelNotFound,
    MethodNotAllowed,
    PayloadTooLarge,
    UpstreamRateLimit,
    /// A limit of the gateway's own (`limits.rate`), not a vendor's.
    RateLimited,
    UpstreamError,
    UpstreamBusy,
    UpstreamTimeout,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::ContextLengthExceeded => "CONTEXT_LENGTH_EXCEEDED",
            Self::ContentFiltered => "CONTENT_FILTERED",
            Self::AuthFailed => "AUTH_FAILED",
            Self::PermissionDenied => "PERMISSION_DENIED",
            Self::ModelNotFound => "MODEL_NOT_FOUND",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            Self::UpstreamRateLimit => "UPSTREAM_RATE_LIMIT",
            Self::RateLimited => "RATE_LIMITED",
            Self::UpstreamError => "UPSTREAM_ERROR",
            Self::UpstreamBusy => "UPSTREAM_BUSY",
            Self::UpstreamTimeout => "UPSTREAM_TIMEOUT",
        }
    }

    pub fn status(self) -> u16 {
        match self {
            Self::InvalidRequest | Self::ContextLengthExceeded | Self::ContentFiltered => 400,
            Self::AuthFailed => 401,
            Self::PermissionDenied => 403,
            Self::ModelNotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::PayloadTooLarge => 413,
            Self::UpstreamRateLimit | Self::RateLimited => 429,
            Self::UpstreamError => 502,
            Self::UpstreamBusy => 503,
            Self::UpstreamTimeout => 504,
        }
    }

    /// OpenAI's `type` for the same condition, so code written against
    /// api.openai.com classifies it the same (docs/src/apis/errors.md): OpenAI
    /// answers `invalid_request_error` for every 4xx but a refusal
    /// (`request_forbidden`, its 403) and rate limits (`requests`), and
    /// `server_error` for 5xx.
    pub fn error_type(self) -> &'static str {
        match self {
            Self::InvalidRequest
            | Self::ContextLengthExceeded
            | Self::ContentFiltered
            | Self::PayloadTooLarge
            | Self::AuthFailed
            | Self::ModelNotFound
            | Self::MethodNotAllowed => "invalid_request_error",
            Self::PermissionDenied => "request_forbidden",
            Self::UpstreamRateLimit | Self::RateLimited => "requests",
            Self::UpstreamError | Self::UpstreamBusy | Self::UpstreamTimeout => "server_error",
        }
    }

    /// The code for a vendor or Envoy HTTP status when nothing more specific is known.
    pub fn from_status(status: u16) -> Self {
        match status {
            401 => Self::AuthFailed,
            403 => Self::PermissionDenied,
            404 => Self::ModelNotFound,
            405 => Self::MethodNotAllowed,
            413 => Self::PayloadTooLarge,
            408 | 504 => Self::UpstreamTimeout,
            429 => Self::UpstreamRateLimit,
            400..=499 => Self::InvalidRequest,
            // 503 and Anthropic's 529 "overloaded" mean: try again elsewhere.
            503 | 529 => Self::UpstreamBusy,
            _ => Self::UpstreamError,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GatewayError {
    pub code: ErrorCode,
    pub message: String,
    pub param: Option<String>,
    pub provider: Option<String>,
    /// Seconds the vendor asked to wait (sent as `retry-after`).
    pub retry_after: Option<u64>,
    /// The methods a path accepts (sent as `allow` with a 405).
    pub allow: Option<&'static str>,
    /// OpenAI's `type` when it is not the code's own.
    pub error_type: Option<ErrorType>,
    /// The vendor's own error details, for a client whose API's envelope
    /// carries them as they came: Google's `google.rpc.Status` details,
    /// from Gemini to a Gemini client (a pass-through pair). Boxed: errors
    /// stay small.
    pub details: Option<Box<VendorDetails>>,
}

/// A vendor's error details as it sent them (see [`GatewayError::details`]).
#[derive(Debug, Clone, PartialEq)]
pub struct VendorDetails(pub Vec<serde_json::Value>);

/// OpenAI `type`s other than a code's own (one byte, so errors stay small).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// A token limit (OpenAI's TPM).
    Tokens,
    /// A spend budget (OpenAI's quota).
    InsufficientQuota,
}

impl ErrorType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tokens => "tokens",
            Self::InsufficientQuota => "insufficient_quota",
        }
    }
}

impl GatewayError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            param: None,
            provider: None,
            retry_after: None,
            allow: None,
            error_type: None,
            details: None,
        }
    }

    /// A 400 naming the offending request field.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            param: Some(param.into()),
            ..Self::new(ErrorCode::InvalidRequest, message)
        }
    }

    /// 405 for a method `path` does not accept.
    pub fn method_not_allowed(path: &str, method: &str, allow: &'static str) -> Self {
        Self {
            param: Some("method".into()),
            allow: Some(allow),
            ..Self::new(
                ErrorCode::MethodNotAllowed,
                format!("{path} accepts {allow}, not {}", method.escape_debug()),
            )
        }
    }

    /// The error for one of Envoy's own replies (no healthy upstream, a
    /// circuit breaker, a timeout...): what happened, named from Envoy's
    /// response code details, then Envoy's own text. Both may hold any
    /// byte: they are read as text lossily.
    pub fn envoy_reply(code: ErrorCode, details: &[u8], envoy_body: &[u8]) -> Self {
        let details = String::from_utf8_lossy(details);
        let cause = ENVOY_CAUSES
            .iter()
            .find(|(marker, _)| details.contains(marker))
            .map(|(_, cause)| *cause);
        let message = cause.unwrap_or(match code {
            ErrorCode::UpstreamBusy => "no provider is available right now",
            ErrorCode::UpstreamTimeout => "the provider did not answer in time",
            ErrorCode::PayloadTooLarge => "the request body is larger than the gateway accepts",
            _ => "the gateway could not complete the request",
        });
        let body = String::from_utf8_lossy(envoy_body);
        let said: Vec<&str> = [body.trim(), details.trim()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        let message = match said.as_slice() {
            [] => message.to_owned(),
            said => format!("{message} ({})", said.join("; ")),
        };
        Self::new(code, message)
    }

    pub fn with_provider(mut self, provider: &str) -> Self {
        self.provider = Some(provider.to_owned());
        self
    }

    pub fn status(&self) -> u16 {
        self.code.status()
    }
}

/// Envoy's response code details (a marker they contain) → what the client
/// is told happened; the first that matches wins.
const ENVOY_CAUSES: &[(&str, &str)] = &[
    (
        "request_rate_limited",
        "Rate limit reached: the gateway's rate limit service refused the request",
    ),
    // Before "overflow": the edge role's marker for a failed answer that
    // Envoy could not retry (`upstream_rq_retry_overflow` in its stats).
    (
        "upstream_rq_retry_overflow",
        "the provider failed, and the gateway's circuit breaker allows no more retries right now (max_retries), so no other provider was asked",
    ),
    (
        "overflow",
        "the gateway's circuit breaker for this provider is open: too many concurrent requests or retries",
    ),
    (
        "no_healthy_upstream",
        "no provider endpoint is healthy (all failing health checks or ejected after errors)",
    ),
    (
        "per_try_timeout",
        "the provider did not start answering within the per-try timeout",
    ),
    (
        "response_timeout",
        "the provider did not answer within the route's timeout",
    ),
    (
        "connection_failure",
        "the provider could not be reached: connect failed",
    ),
    (
        "connection_termination",
        "the provider closed the connection before answering",
    ),
    (
        "request_payload_too_large",
        "the request body is larger than the gateway accepts",
    ),
];

/// The wait a vendor's message asks for, in whole seconds rounded up:
/// "Please try again in 20s" / "in 1.5s" / "in 350ms" (OpenAI), "Please
/// retry after 6 seconds" (Azure), "retry in 7.2s" (Gemini's text).
pub fn retry_delay_in(message: &str) -> Option<u64> {
    let lower = message.to_ascii_lowercase();
    ["try again in ", "retry after ", "retry in "]
        .iter()
        .find_map(|lead| {
            let rest = lower.get(lower.find(lead)? + lead.len()..)?;
            let number_end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            let value: f64 = rest.get(..number_end)?.parse().ok()?;
            let unit = rest.get(number_end..)?.trim_start();
            let seconds = if unit.starts_with("ms") || unit.starts_with("millisecond") {
                value / 1000.0
            } else if unit.starts_with('s') {
                value
            } else if unit.starts_with("min") || unit.starts_with('m') {
                value * 60.0
            } else {
                return None;
            };
            (seconds.is_finite() && seconds >= 0.0).then(|| seconds.ceil() as u64)
        })
}

/// Whose words a client surface's errors are in: its own vendor's, whatever
/// vendor answered, so that vendor's SDKs and the frameworks on them
/// classify the error as they would the vendor's own (docs/src/apis/errors.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wording {
    /// OpenAI's: the Chat Completions and Responses surfaces.
    OpenAi,
    /// Anthropic's: the Messages surface.
    Anthropic,
    /// Google's: the Gemini surface.
    Gemini,
}

/// How `wording`'s vendor words an error of `code` where clients look at
/// the words, not only at the status and `type`: (what they search the
/// message for, lowercase; the vendor's opening that carries it).
///
/// - Context window: LiteLLM's "this model's maximum context length is",
///   pydantic-ai's "maximum context length", LangChain's
///   `context_length_exceeded` (OpenAI's code, which ours replaces, so
///   [`GatewayError::worded`] appends it); Anthropic's "prompt is too long"
///   (langchain-anthropic, LiteLLM, pydantic-ai, Claude Code's compaction);
///   Gemini's "exceeds the maximum number of tokens" (LiteLLM's Gemini and
///   Vertex mapping).
/// - Content filter: OpenAI's own refusal of a flagged prompt ("Invalid
///   prompt: ... violating our usage policy"), which LiteLLM classifies by
///   its text alone since the openai 3 SDK's errors carry only the
///   message, plus `content_policy_violation` (OpenAI's code for it);
///   Anthropic's "content filtering policy"; Gemini's "The response was
///   blocked." (LiteLLM's Gemini mapping).
/// - Overloaded: pydantic-ai and LiteLLM look for "overloaded" (a 503 that
///   says it is an overload, Anthropic's "Overloaded"; LiteLLM's Gemini
///   mapping looks for "The model is overloaded.").
///
/// Every other class is classified by status (and `type`) alone, which each
/// surface sets as its vendor does: the vendor's text is kept as it is.
fn vendor_words(code: ErrorCode, wording: Wording) -> Option<(&'static str, &'static str)> {
    match (wording, code) {
        (Wording::OpenAi, ErrorCode::ContextLengthExceeded) => Some((
            "maximum context length is",
            "This model's maximum context length is exceeded: ",
        )),
        (Wording::OpenAi, ErrorCode::ContentFiltered) => Some((
            "violating our usage policy",
            "Invalid prompt: your prompt was flagged as potentially violating our usage policy (content_policy_violation): ",
        )),
        (Wording::OpenAi, ErrorCode::UpstreamBusy) => {
            Some(("overloaded", "The server is overloaded or not ready yet: "))
        }
        (Wording::Anthropic, ErrorCode::ContextLengthExceeded) => {
            Some(("prompt is too long", "prompt is too long: "))
        }
        (Wording::Anthropic, ErrorCode::ContentFiltered) => Some((
            "content filtering policy",
            "Output blocked by content filtering policy: ",
        )),
        (Wording::Anthropic, ErrorCode::UpstreamBusy) => Some(("overloaded", "Overloaded: ")),
        (Wording::Gemini, ErrorCode::ContextLengthExceeded) => Some((
            "exceeds the maximum number of tokens",
            "The input token count exceeds the maximum number of tokens allowed: ",
        )),
        (Wording::Gemini, ErrorCode::ContentFiltered) => {
            Some(("response was blocked", "The response was blocked. "))
        }
        (Wording::Gemini, ErrorCode::UpstreamBusy) => {
            Some(("the model is overloaded", "The model is overloaded. "))
        }
        _ => None,
    }
}

impl GatewayError {
    /// The message in `wording`'s words ([`vendor_words`]): the vendor's own
    /// opening, then what the answering vendor (or the gateway) said; a
    /// message already in those words (that vendor's own, passed on) is
    /// kept as it is.
    pub fn worded(&self, wording: Wording) -> Cow<'_, str> {
        let message = self.message.as_str();
        let mut worded = match vendor_words(self.code, wording) {
            Some((marker, _)) if message.to_ascii_lowercase().contains(marker) => {
                Cow::Borrowed(message)
            }
            Some((_, opening)) => Cow::Owned(format!("{opening}{message}")),
            None => Cow::Borrowed(message),
        };
        if wording == Wording::OpenAi
            && self.code == ErrorCode::ContextLengthExceeded
            && !worded.contains("context_length_exceeded")
        {
            worded.to_mut().push_str(" (context_length_exceeded)");
        }
        worded
    }
}

impl std::fmt::Display for GatewayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

/// A vendor answer (or part of one) that is not what its API says.
pub fn unparseable(what: &str, e: impl std::fmt::Display) -> GatewayError {
    GatewayError::new(
        ErrorCode::UpstreamError,
        format!("the provider's {what} could not be parsed: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_design_table() {
        assert_eq!(ErrorCode::UpstreamBusy.status(), 503);
        assert_eq!(ErrorCode::from_status(529), ErrorCode::UpstreamBusy);
        assert_eq!(ErrorCode::from_status(429), ErrorCode::UpstreamRateLimit);
        assert_eq!(ErrorCode::from_status(500), ErrorCode::UpstreamError);
        assert_eq!(ErrorCode::from_status(504), ErrorCode::UpstreamTimeout);
        assert_eq!(ErrorCode::from_status(422), ErrorCode::InvalidRequest);
        assert_eq!(ErrorCode::UpstreamError.status(), 502);
    }

    #[test]
    fn envoys_replies_say_why() {
        let e = GatewayError::envoy_reply(
            ErrorCode::UpstreamBusy,
            b"upstream_reset_before_response_started{overflow}",
            b"upstream connect error or disconnect/reset before headers. reset reason: overflow",
        );
        assert!(
            e.message
                .starts_with("the gateway's circuit breaker for this provider is open"),
            "{}",
            e.message
        );
        assert!(e.message.ends_with(
            "reset reason: overflow; upstream_reset_before_response_started{overflow})"
        ));
        for (details, starts) in [
            (&b"no_healthy_upstream"[..], "no provider endpoint is healthy"),
            (b"upstream_per_try_timeout", "the provider did not start answering within the per-try"),
            (b"response_timeout", "the provider did not answer within the route's timeout"),
            (
                b"upstream_reset_before_response_started{remote_connection_failure,delayed_connect_error:_111}",
                "the provider could not be reached: connect failed",
            ),
            (b"", "no provider is available right now"),
            (b"\xff", "no provider is available right now"),
        ] {
            let e = GatewayError::envoy_reply(ErrorCode::UpstreamBusy, details, b"");
            assert!(e.message.starts_with(starts), "{}", e.message);
        }
        let e = GatewayError::envoy_reply(ErrorCode::UpstreamBusy, b"", b"");
        assert_eq!(e.message, "no provider is available right now");
    }

    #[test]
    fn retry_delays_in_vendor_messages() {
        for (message, seconds) in [
            (
                "Rate limit reached for gpt-4o. Please try again in 20s. Visit ...",
                Some(20),
            ),
            ("Please try again in 1.5s.", Some(2)),
            ("Please try again in 350ms.", Some(1)),
            (
                "Requests have exceeded the call rate limit. Please retry after 6 seconds.",
                Some(6),
            ),
            ("Please retry in 7.2s.", Some(8)),
            ("Please try again in 6m0s", Some(360)),
            ("Please try again later.", None),
            ("Overloaded", None),
        ] {
            assert_eq!(retry_delay_in(message), seconds, "{message}");
        }
    }

    #[test]
    fn types_and_wording_are_openais() {
        let types: Vec<_> = [400, 401, 403, 404, 413, 429, 500, 503, 504]
            .map(|s| ErrorCode::from_status(s).error_type())
            .into();
        assert_eq!(
            types,
            [
                "invalid_request_error",
                "invalid_request_error",
                "request_forbidden",
                "invalid_request_error",
                "invalid_request_error",
                "requests",
                "server_error",
                "server_error",
                "server_error"
            ]
        );
        let e = GatewayError::new(ErrorCode::ContextLengthExceeded, "prompt is too long");
        let v: serde_json::Value =
            serde_json::from_slice(&crate::wire::openai_chat::render_error(&e, None)).unwrap();
        assert_eq!(
            v["error"]["message"],
            "This model's maximum context length is exceeded: prompt is too long (context_length_exceeded)"
        );
        let e = GatewayError::new(
            ErrorCode::ContextLengthExceeded,
            "This model's maximum context length is 8192 tokens",
        );
        let v: serde_json::Value =
            serde_json::from_slice(&crate::wire::openai_chat::render_error(&e, None)).unwrap();
        assert_eq!(
            v["error"]["message"],
            "This model's maximum context length is 8192 tokens (context_length_exceeded)"
        );
    }

    #[test]
    fn each_surface_words_each_class_as_its_vendor() {
        let worded = |code, message: &str, wording| {
            GatewayError::new(code, message)
                .worded(wording)
                .into_owned()
        };
        let bedrock = "Input is too long for requested model.";
        for (code, message, wording, expected) in [
            (
                ErrorCode::ContextLengthExceeded,
                bedrock,
                Wording::Anthropic,
                "prompt is too long: Input is too long for requested model.",
            ),
            (
                ErrorCode::ContextLengthExceeded,
                bedrock,
                Wording::OpenAi,
                "This model's maximum context length is exceeded: Input is too long for requested model. (context_length_exceeded)",
            ),
            // The vendor's own words pass as they came.
            (
                ErrorCode::ContextLengthExceeded,
                "prompt is too long: 210000 tokens > 200000 maximum",
                Wording::Anthropic,
                "prompt is too long: 210000 tokens > 200000 maximum",
            ),
            (ErrorCode::UpstreamBusy, "Overloaded", Wording::Anthropic, "Overloaded"),
            (
                ErrorCode::ContextLengthExceeded,
                bedrock,
                Wording::Gemini,
                "The input token count exceeds the maximum number of tokens allowed: Input is too long for requested model.",
            ),
            (
                ErrorCode::ContextLengthExceeded,
                "The input token count (250000) exceeds the maximum number of tokens allowed (1048576).",
                Wording::Gemini,
                "The input token count (250000) exceeds the maximum number of tokens allowed (1048576).",
            ),
            (
                ErrorCode::UpstreamBusy,
                "Service Unavailable",
                Wording::Gemini,
                "The model is overloaded. Service Unavailable",
            ),
            (
                ErrorCode::UpstreamBusy,
                "Overloaded",
                Wording::Gemini,
                "The model is overloaded. Overloaded",
            ),
            (
                ErrorCode::UpstreamBusy,
                "Overloaded",
                Wording::OpenAi,
                "Overloaded",
            ),
            (
                ErrorCode::UpstreamBusy,
                "The service is unavailable.",
                Wording::OpenAi,
                "The server is overloaded or not ready yet: The service is unavailable.",
            ),
            (
                ErrorCode::UpstreamBusy,
                "The service is unavailable.",
                Wording::Anthropic,
                "Overloaded: The service is unavailable.",
            ),
            (
                ErrorCode::ContentFiltered,
                "blocked by guardrail",
                Wording::Anthropic,
                "Output blocked by content filtering policy: blocked by guardrail",
            ),
            (
                ErrorCode::ContentFiltered,
                "blocked by guardrail",
                Wording::OpenAi,
                "Invalid prompt: your prompt was flagged as potentially violating our usage policy (content_policy_violation): blocked by guardrail",
            ),
            // OpenAI's own refusal, passed on, is kept as it came.
            (
                ErrorCode::ContentFiltered,
                "Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt",
                Wording::OpenAi,
                "Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt",
            ),
            // Classified by status and type: the text is the vendor's.
            (ErrorCode::UpstreamRateLimit, "Too many requests", Wording::Anthropic, "Too many requests"),
            (ErrorCode::AuthFailed, "invalid x-api-key", Wording::OpenAi, "invalid x-api-key"),
        ] {
            assert_eq!(worded(code, message, wording), expected, "{code:?} {wording:?}");
        }
    }

    #[test]
    fn envelope_has_every_field() {
        let e = GatewayError::invalid("messages", "messages must not be empty").with_provider("x");
        let v: serde_json::Value =
            serde_json::from_slice(&crate::wire::openai_chat::render_error(&e, Some("r1")))
                .unwrap();
        assert_eq!(v["error"]["code"], "INVALID_REQUEST");
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["param"], "messages");
        assert_eq!(v["error"]["provider"], "x");
        assert_eq!(v["error"]["request_id"], "r1");
        assert_eq!(v["error"]["message"], "messages must not be empty");
    }
}
