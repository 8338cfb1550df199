//! The neutral model between client surfaces and vendor dialects, by
//! operation: for generations the request every surface decodes into
//! ([`request`]), the answer every dialect decodes into ([`response`]) and
//! the stream events dialects push ([`stream`]); for embeddings their
//! request and answer ([`embed`]); the other calls of the client APIs
//! ([`call`]). [`Request`] is any operation's parsed request; a
//! generation's carries what its client's surface keeps for its answers,
//! opaque to everyone else ([`surface_state`]).

pub mod call;
pub mod copy_on_write;
pub mod embed;
pub mod estimate;
pub mod json;
pub mod listing;
pub mod request;
pub mod response;
pub mod stream;
pub mod surface_state;

use surface_state::SurfaceState;

/// The wire APIs the gateway speaks: each client surface speaks one, and
/// each vendor dialect may speak one natively (a pass-through pair when
/// the two are the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions, `POST /v1/chat/completions`.
    OpenAiChat,
    /// Anthropic Messages, `POST /v1/messages`.
    AnthropicMessages,
    /// OpenAI Responses, `POST /v1/responses`.
    OpenAiResponses,
    /// Google's Gemini API, `POST /v1beta/models/{model}:generateContent`.
    Gemini,
}

impl Api {
    pub const ALL: [Api; 4] = [
        Api::OpenAiChat,
        Api::AnthropicMessages,
        Api::OpenAiResponses,
        Api::Gemini,
    ];

    /// Its name in metrics labels and the access log.
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAiChat => "openai_chat",
            Api::AnthropicMessages => "anthropic_messages",
            Api::OpenAiResponses => "openai_responses",
            Api::Gemini => "gemini",
        }
    }

    pub fn for_name(name: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|api| api.name() == name)
    }
}

/// A generation as its surface read it: the neutral request every dialect
/// encodes, and what only the client's own surface reads back.
#[derive(Debug, Clone, Default)]
pub struct Generation {
    pub request: request::ChatRequest,
    /// What the client's surface keeps for its answers (the Responses
    /// API repeats `tools`, `instructions`, `text`...): its own type, none
    /// for a surface that keeps nothing.
    pub state: SurfaceState,
}

impl From<request::ChatRequest> for Generation {
    fn from(request: request::ChatRequest) -> Self {
        Generation {
            request,
            state: SurfaceState::default(),
        }
    }
}

/// A parsed request, of whichever operation: what the edge role hands
/// the attempts (through the exchange).
#[derive(Debug)]
pub enum Request {
    /// A generation, or a call that takes a generation's body (count_tokens).
    Chat(Box<Generation>),
    Embed(embed::EmbedRequest),
}

impl Request {
    /// The model the client asked for.
    pub fn model(&self) -> &str {
        match self {
            Request::Chat(g) => &g.request.model,
            Request::Embed(r) => &r.model,
        }
    }

    /// The input tokens a call is limited and billed by before its answer
    /// (embeddings, estimated); none for a call that takes a generation's
    /// body (count_tokens uses no tokens).
    pub fn call_input_tokens(&self) -> u64 {
        match self {
            Request::Embed(r) => r.input.estimated_tokens(),
            Request::Chat(_) => 0,
        }
    }

    /// The end user a call names in its body (embeddings' `user`), for the
    /// per-user limits.
    pub fn call_user(&self) -> Option<&str> {
        match self {
            Request::Embed(r) => r.user.as_deref(),
            Request::Chat(_) => None,
        }
    }

    pub fn chat(&self) -> Option<&request::ChatRequest> {
        self.generation().map(|g| &g.request)
    }

    pub fn generation(&self) -> Option<&Generation> {
        match self {
            Request::Chat(g) => Some(g),
            Request::Embed(_) => None,
        }
    }

    pub fn embed(&self) -> Option<&embed::EmbedRequest> {
        match self {
            Request::Embed(r) => Some(r),
            Request::Chat(_) => None,
        }
    }
}
