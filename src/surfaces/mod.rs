//! Client surfaces: the APIs clients call the gateway with. Each decodes
//! its requests into the neutral model (`crate::model`) and renders the
//! neutral answer, stream events and errors in its own wire format.
//!
//! Each surface also owns its routes (method and path → [`Operation`],
//! [`Surface::route`]) and renders its model list. `/v1/models` is OpenAI's
//! path and Anthropic's alike: the OpenAI Chat surface routes it (an error
//! on it is in OpenAI's envelope), and the list is rendered by the surface
//! whose clients' header the request carries ([`Surface::client_header`]:
//! Anthropic's `anthropic-version`), else by OpenAI's ([`lister`]).
//!
//! Adding a client API is adding a module here, a line in
//! [`crate::model::Api`] and a line in [`surface`].

use crate::error::{ErrorCode, GatewayError};
use crate::model::call::{Call, CallAnswer};
use crate::model::embed::{EmbedRequest, Embeddings};
use crate::model::listing::Listed;
use crate::model::response::{Answer, Origin};
use crate::model::stream::{EventWriter, StreamEncoder};
pub use crate::model::surface_state::SurfaceState;
use crate::model::{Api, Generation, Request};

pub mod anthropic_messages;
pub mod gemini;
pub mod openai_chat;
pub mod openai_responses;
pub mod route;

pub use route::{Operation, QueryKey, Route};

/// The gateway's API paths are below these; other paths are not ours.
const API_ROOTS: [&str; 2] = ["/v1/", "/v1beta/"];

/// The order surfaces are asked for a route: Gemini's first, whose
/// `/v1/models/{model}:generateContent` would otherwise be taken for
/// OpenAI's `/v1/models/{id}`.
const ROUTE_ORDER: [Api; 4] = [
    Api::Gemini,
    Api::OpenAiChat,
    Api::AnthropicMessages,
    Api::OpenAiResponses,
];

pub fn surface(api: Api) -> &'static dyn Surface {
    match api {
        Api::OpenAiChat => &openai_chat::OpenAiChat,
        Api::AnthropicMessages => &anthropic_messages::AnthropicMessages,
        Api::OpenAiResponses => &openai_responses::OpenAiResponses,
        Api::Gemini => &gemini::Gemini,
    }
}

/// The first segment of a `/v1/` path that names an API other than
/// OpenAI's: a path no surface claims is refused in that API's envelope
/// ([`unclaimed`]).
const API_SEGMENTS: [(&str, Api); 2] = [
    ("messages", Api::AnthropicMessages),
    ("responses", Api::OpenAiResponses),
];

/// What a request line asks of the gateway: `None` for a path that is
/// not the gateway's (passed through untouched); else the route of the
/// surface that claims the path (they are asked in [`ROUTE_ORDER`]),
/// or a 404 in the envelope of the API its prefix names ([`unclaimed`]).
pub fn route(method: &str, path: &str, query: &str) -> Option<Route> {
    if !API_ROOTS.iter().any(|root| path.starts_with(root)) {
        return None;
    }
    let claimed = ROUTE_ORDER
        .into_iter()
        .find_map(|api| surface(api).route(method, path, query));
    Some(claimed.unwrap_or_else(|| Route::unknown(unclaimed(path), path)))
}

/// Whose envelope a `/v1/` path no surface claims is refused in: the API
/// its first segment names however it is spelled (`/v1/Messages`,
/// `/v1/messages%2Fcount_tokens`, `/v1/messages;x`, `/v1//messages`: the
/// segment percent-decoded, ended by `/` or `;`, in any case), else
/// OpenAI's, whose clients call the gateway's other `/v1/` paths; Gemini's
/// below `/v1beta/`, its API's alone.
fn unclaimed(path: &str) -> Api {
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Api::Gemini;
    };
    let decoded = crate::formats::url::decode_segment(rest.trim_start_matches('/'));
    let segment = decoded.split(['/', ';']).next().unwrap_or_default();
    API_SEGMENTS
        .into_iter()
        .find(|(name, _)| segment.eq_ignore_ascii_case(name))
        .map_or(Api::OpenAiChat, |(_, api)| api)
}

/// The gateway key a client of `api` gave in its query, and the path
/// without it, if `api`'s clients may give it so
/// ([`Surface::key_parameter`]) and this one did.
pub fn key_in_query(api: Api, path: &str, query: &str) -> Option<QueryKey> {
    let name = surface(api).key_parameter()?;
    QueryKey::take(name, path, query)
}

/// The surface that renders the model list on `owner`'s route: the one
/// whose clients' header the request carries (`has_header`), else `owner`.
pub fn lister(owner: Api, has_header: impl Fn(&str) -> bool) -> &'static dyn Surface {
    let marked = Api::ALL
        .into_iter()
        .map(surface)
        .find(|s| s.client_header().is_some_and(&has_header));
    marked.unwrap_or_else(|| surface(owner))
}

/// A native call's body, parsed and checked by the surface whose call it
/// is (`Surface::parse_call`); `None` for a call that takes none.
pub fn parse_call_body(call: &Call, body: &[u8]) -> Result<Option<Request>, GatewayError> {
    surface(call.api).parse_call(call, body)
}

/// The call a request line routes to (tests make theirs as clients do).
#[cfg(test)]
pub fn routed_call(method: &str, path: &str, query: &str) -> Call {
    match route(method, path, query).map(|r| r.operation) {
        Some(Ok(Operation::Call(call))) => call,
        other => panic!("{method} {path}?{query} routes to no call: {other:?}"),
    }
}

/// What a surface answers for a native call that is not its own (never
/// asked: `parse_call_body` asks the call's surface).
fn foreign_call() -> GatewayError {
    GatewayError::invalid("path", "this API has no such call")
}

pub trait Surface: Sync {
    /// What a request line on this surface's paths asks (`None`: not its
    /// path). `method`, `path` and `query` are the client's, untrusted.
    fn route(&self, method: &str, path: &str, query: &str) -> Option<Route>;
    /// The model list in this API's shape: `models`, those the caller may
    /// use (its model groups, then the discovered models they reach),
    /// created, unless they say, when the configuration was loaded
    /// (`loaded_at`, Unix seconds).
    fn render_models(&self, models: &[Listed], loaded_at: u64) -> Vec<u8>;
    /// One model (which the caller may use) in this API's shape.
    fn render_model(&self, model: &Listed, loaded_at: u64) -> Vec<u8>;
    /// The body of one of this surface's native calls (`Operation::Call`),
    /// parsed and checked as its API's vendors would; `None` for a call
    /// that takes none.
    fn parse_call(&self, _call: &Call, _body: &[u8]) -> Result<Option<Request>, GatewayError> {
        Err(foreign_call())
    }
    /// A header this API's clients send on every request, which tells them
    /// apart on a path shared with another API (`/v1/models`).
    fn client_header(&self) -> Option<&'static str> {
        None
    }
    /// The query parameter this API's clients may give the gateway key in,
    /// instead of a header ([`key_in_query`]).
    fn key_parameter(&self) -> Option<&'static str> {
        None
    }
    /// A generation's body, parsed and validated into the neutral request,
    /// with what its path said ([`route::PathFacts`]: Gemini's model and
    /// stream flag) taking precedence, and what this surface keeps for its
    /// answers (its path's state, [`route::PathFacts::state`], unless its
    /// parser makes its own). The one way into a generation: the sessions,
    /// the cache's and the fitting's tests and the golden files all parse
    /// through it.
    fn parse_generation(
        &self,
        facts: &route::PathFacts,
        body: &[u8],
    ) -> Result<Generation, GatewayError>;
    /// A native call's neutral answer in this API's shape: `call` is the
    /// one this surface routed (its shape may depend on it: Gemini's one
    /// embedding or a batch). Never asked of a surface without such a call.
    fn render_call(&self, _call: &Call, _answer: CallAnswer) -> Vec<u8> {
        self.render_error(&foreign_call(), None)
    }
    /// A part of one of this surface's embeddings batches (`call`) as a
    /// request of its API, path and body: `part` is the client's request
    /// for the part's inputs. The edge sends it through the gateway's own
    /// listener (`session/edge/batch.rs`). Never asked of a surface
    /// without embeddings.
    fn embeddings_part(
        &self,
        _call: &Call,
        _part: &EmbedRequest,
    ) -> Result<(String, Vec<u8>), GatewayError> {
        Err(foreign_call())
    }
    /// A part's 2xx answer (to [`Self::embeddings_part`]'s request) read
    /// back: its vectors and usage, and the model it names, if it does.
    fn read_embeddings_part(
        &self,
        _body: &[u8],
    ) -> Result<(Embeddings, Option<String>), GatewayError> {
        Err(foreign_call())
    }
    /// A complete (non-stream) answer in this surface's format; `state`
    /// ([`Generation::state`], which this surface's parser made) holds
    /// what its answers repeat of the request, if anything.
    fn render_answer(&self, answer: Answer, origin: &Origin, state: &SurfaceState) -> Vec<u8>;
    /// This surface's stream format for one response (`state` as for
    /// [`Self::render_answer`]).
    fn stream_encoder(&self, include_usage: bool, state: &SurfaceState) -> Box<dyn StreamEncoder>;
    /// This surface's error envelope.
    fn render_error(&self, error: &GatewayError, request_id: Option<&str>) -> Vec<u8>;
    /// The HTTP status this surface answers an error with.
    fn status(&self, code: ErrorCode) -> u16 {
        code.status()
    }
}

/// The writer a dialect's stream decoder pushes events into, encoding for
/// the client's API; `native` when the vendor speaks it too (its events may
/// pass through); `state` as for [`Surface::render_answer`].
pub fn stream_writer(
    api: Api,
    native: bool,
    origin: Origin,
    request_id: String,
    include_usage: bool,
    state: &SurfaceState,
) -> EventWriter {
    let encoder = surface(api).stream_encoder(include_usage, state);
    EventWriter::new(encoder, origin, request_id, include_usage, native).for_api(api)
}
