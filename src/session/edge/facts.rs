//! The edge session's state, grouped by what it is for: who is calling and
//! how ([`Client`]), what admission and routing decided ([`Admission`]), and
//! what the response came to ([`Outcome`]). The feature parts (batch, cache,
//! stored responses, capture, summaries) have files of their own.

use std::time::SystemTime;

use super::global::GlobalRefusal;
use super::limiter::RequestLimits;
use super::ChatFacts;
use crate::auth::Caller;
use crate::error::{ErrorCode, GatewayError};
use crate::headers::Headers;
use crate::metering::AttemptRecord;
use crate::model::Api;
use crate::session::self_call;

/// Request headers the gateway reads as text on its API paths: a value that
/// is not UTF-8 is refused (400 naming the header) rather than guessed at.
const TEXT_HEADERS: &[&str] = &[
    ":method",
    "x-request-id",
    "x-model-group",
    "x-user-id",
    "content-type",
    "content-length",
];

/// Who is calling and how: the client's API, its request's id and headers,
/// the caller once authenticated, and what a pin or a self-call asks for.
pub(super) struct Client {
    /// The API the client speaks (its errors are in this API's envelope).
    pub(super) api: Api,
    pub(super) request_id: String,
    pub(super) caller: Caller,
    /// `x-llm-provider` from the client, kept only when pins are allowed.
    pub(super) provider_pin: Option<String>,
    pub(super) request_headers: Headers,
    /// A self-call of the gateway's (`session::self_call`): what it says of
    /// its request.
    pub(super) part: Option<self_call::Part>,
}

impl Default for Client {
    fn default() -> Self {
        Self {
            api: Api::OpenAiChat,
            request_id: String::new(),
            caller: Caller::Anyone,
            provider_pin: None,
            request_headers: Headers::default(),
            part: None,
        }
    }
}

impl Client {
    /// The first header the gateway reads as text that is not UTF-8.
    pub(super) fn check_text_headers(&self) -> Result<(), GatewayError> {
        for name in TEXT_HEADERS {
            if self.request_headers.text(name).is_err() {
                return Err(GatewayError::invalid(
                    *name,
                    format!("the {name} header is not valid UTF-8"),
                ));
            }
        }
        Ok(())
    }

    /// A header checked by `check_text_headers` (so never `Err` by then).
    pub(super) fn text(&self, name: &str) -> Option<&str> {
        self.request_headers.text(name).ok().flatten()
    }
}

/// What admission and routing decided for the request: its facts for the
/// log, its rate limits, and where it was sent.
#[derive(Default)]
pub(super) struct Admission {
    /// What the request log needs from the request side.
    pub(super) chat: Option<ChatFacts>,
    /// The request's rate limits, once it was admitted (or refused) by them.
    pub(super) limits: Option<RequestLimits>,
    /// The candidate of `chat.group` a generation was handed to.
    pub(super) sent_to: Option<usize>,
    /// A request routed to a discovered model: the provider that lists it
    /// and the vendor model (`edge/discovered.rs`).
    pub(super) discovered: Option<(String, String)>,
    /// The global rate limit service's refusal (Envoy's 429), when it refused.
    pub(super) global_refusal: Option<GlobalRefusal>,
}

/// What the response came to, read by metering when the request ends.
pub(super) struct Outcome {
    pub(super) started: SystemTime,
    pub(super) status: u16,
    pub(super) code: Option<ErrorCode>,
    pub(super) response_complete: bool,
    /// The last attempt's record and the route, read once the response ended.
    pub(super) final_attempts: Option<(Vec<AttemptRecord>, Vec<String>)>,
}

impl Default for Outcome {
    fn default() -> Self {
        Self {
            started: SystemTime::UNIX_EPOCH,
            status: 0,
            code: None,
            response_complete: false,
            final_attempts: None,
        }
    }
}
