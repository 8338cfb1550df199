//! The attempt session's state, grouped by what it is for: what the client
//! asked for ([`Asked`]), where this attempt landed ([`Upstream`]), what
//! translating its request did ([`Sent`]), what the vendor's answer headers
//! said ([`VendorHeaders`]) and how its stream went ([`Progress`]).

use std::cell::Cell;
use std::time::SystemTime;

use super::request::Shape;
use crate::fitting::Report;
use crate::model::call::Call;
use crate::model::Api;

/// What the client asked for: the edge role's handoff, and what its request
/// says of the answer it wants.
pub(super) struct Asked {
    /// The API the client speaks.
    pub(super) api: Api,
    /// The native call, for a request that is not a generation.
    pub(super) call: Option<Call>,
    pub(super) request_id: String,
    /// The id of an answer the gateway stores (the edge role's), which its
    /// surface state gives the answer (`SurfaceState::set_answer_id`).
    pub(super) response_id: Option<String>,
    pub(super) group: String,
    pub(super) candidate: Option<usize>,
    /// The vendor model of a request routed to a discovered model (the
    /// edge role's), for attempts on the provider that lists it.
    pub(super) discovered_model: Option<String>,
    pub(super) stream: bool,
    /// The answer's shape the client asked for (usage, how many choices).
    pub(super) shape: Shape,
}

impl Default for Asked {
    fn default() -> Self {
        Self {
            api: Api::OpenAiChat,
            call: None,
            request_id: String::new(),
            response_id: None,
            group: String::new(),
            candidate: None,
            discovered_model: None,
            stream: false,
            shape: Shape::default(),
        }
    }
}

/// Where this attempt landed: the endpoint's provider and ladder rung, the
/// vendor model it asked for, and which attempt of the request it is.
pub(super) struct Upstream {
    pub(super) provider_name: String,
    /// Vendor model this attempt asked for.
    pub(super) model: String,
    pub(super) attempt: u64,
    /// The ladder rung this attempt landed on (a group of the ladder's
    /// fallback), when its endpoint names one.
    pub(super) rung: Option<String>,
}

impl Default for Upstream {
    fn default() -> Self {
        Self {
            provider_name: String::new(),
            model: String::new(),
            attempt: 1,
            rung: None,
        }
    }
}

/// What translating the request did for this vendor, which the answer
/// reports or acts on.
#[derive(Default)]
pub(super) struct Sent {
    /// The request's web search was left out for this vendor (it has no
    /// search tool for it): the answer's `x-llm-dropped-tools` says so.
    pub(super) dropped_web_search: bool,
    /// The generation of the Google access token sent (Vertex AI with
    /// managed credentials): a 401 refreshes that token.
    pub(super) google_token: Cell<Option<u64>>,
    /// The vendor's batch limit, when the request's embeddings exceed it.
    pub(super) batch_limit: Cell<Option<usize>>,
    /// What context fitting did to this attempt's request (`attempt/fit.rs`).
    pub(super) context: Cell<Option<Report>>,
    /// Context fitting changed the request: it was translated, not passed.
    pub(super) refitted: bool,
}

/// What the vendor's answer headers said.
#[derive(Default)]
pub(super) struct VendorHeaders {
    /// The vendor answered with a JSON content type (kept as it is).
    pub(super) json: bool,
    /// The vendor sent `retry-after` itself (it passes to the client as is).
    pub(super) retry_after: bool,
    /// Its `retry-after-ms`, in whole seconds, for a `retry-after` of ours.
    pub(super) retry_after_ms: Option<u64>,
    /// It sent `retry-after` or `retry-after-ms`.
    pub(super) wait_headers: bool,
}

/// How the answer's stream went, for time to first token and the
/// attempt's record.
pub(super) struct Progress {
    /// When this attempt started, for time to first token (streams only).
    pub(super) started: SystemTime,
    pub(super) first_content: Option<SystemTime>,
    pub(super) chunks: u64,
    pub(super) stream_ended: bool,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            started: SystemTime::UNIX_EPOCH,
            first_content: None,
            chunks: 0,
            stream_ended: false,
        }
    }
}
