//! The neutral model between client surfaces and vendor dialects: the
//! request every surface decodes into ([`request`]), the answer every
//! dialect decodes into ([`response`]) and the stream events dialects push
//! ([`stream`]).

pub mod call;
pub mod estimate;
pub mod json;
pub mod request;
pub mod response;
pub mod shared;
pub mod stream;

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
}

impl Api {
    pub const ALL: [Api; 3] = [
        Api::OpenAiChat,
        Api::AnthropicMessages,
        Api::OpenAiResponses,
    ];

    /// Its name in metrics labels and the access log.
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAiChat => "openai_chat",
            Api::AnthropicMessages => "anthropic_messages",
            Api::OpenAiResponses => "openai_responses",
        }
    }

    pub fn for_name(name: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|api| api.name() == name)
    }
}
