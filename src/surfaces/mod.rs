//! Client surfaces: the APIs clients call the gateway with. Each decodes
//! its requests into the neutral model (`crate::model`) and renders the
//! neutral answer, stream events and errors in its own wire format.
//!
//! Adding a client API is adding a module here, a line in
//! [`crate::model::Api`] and a line in [`surface`].

use crate::error::{ErrorCode, GatewayError};
use crate::model::request::ChatRequest;
use crate::model::response::{Answer, Origin};
use crate::model::stream::{EventWriter, StreamEncoder};
use crate::model::Api;

pub mod anthropic_messages;
pub mod openai_chat;
pub mod openai_responses;

pub fn surface(api: Api) -> &'static dyn Surface {
    match api {
        Api::OpenAiChat => &openai_chat::OpenAiChat,
        Api::AnthropicMessages => &anthropic_messages::AnthropicMessages,
        Api::OpenAiResponses => &openai_responses::OpenAiResponses,
    }
}

pub trait Surface: Sync {
    /// Parses and validates a request body into the neutral request.
    fn parse_request(&self, body: &[u8]) -> Result<ChatRequest, GatewayError>;
    /// A complete (non-stream) answer in this surface's format.
    fn render_answer(&self, answer: Answer, origin: &Origin) -> Vec<u8>;
    /// This surface's stream format for one response.
    fn stream_encoder(&self, include_usage: bool) -> Box<dyn StreamEncoder>;
    /// This surface's error envelope.
    fn render_error(&self, error: &GatewayError, request_id: Option<&str>) -> Vec<u8>;
    /// The HTTP status this surface answers an error with.
    fn status(&self, code: ErrorCode) -> u16 {
        code.status()
    }

    /// [`Self::render_answer`] for an API whose answers repeat request
    /// fields (`echo`: `ChatRequest::echo`, which its parser filled).
    fn render_answer_echoing(&self, answer: Answer, origin: &Origin, _echo: &Echo) -> Vec<u8> {
        self.render_answer(answer, origin)
    }

    /// [`Self::stream_encoder`] for an API whose stream repeats request fields.
    fn stream_encoder_echoing(&self, include_usage: bool, _echo: &Echo) -> Box<dyn StreamEncoder> {
        self.stream_encoder(include_usage)
    }
}

/// Request fields a surface's answers repeat (see `ChatRequest::echo`).
pub type Echo = serde_json::Map<String, serde_json::Value>;

/// The writer a dialect's stream decoder pushes events into, encoding for
/// the client's API; `native` when the vendor speaks it too (its events may
/// pass through).
pub fn stream_writer(
    api: Api,
    native: bool,
    origin: Origin,
    request_id: String,
    include_usage: bool,
) -> EventWriter {
    stream_writer_echoing(api, native, origin, request_id, include_usage, &Echo::new())
}

/// [`stream_writer`] for a request whose answer repeats fields of it (`echo`).
pub fn stream_writer_echoing(
    api: Api,
    native: bool,
    origin: Origin,
    request_id: String,
    include_usage: bool,
    echo: &Echo,
) -> EventWriter {
    let encoder = surface(api).stream_encoder_echoing(include_usage, echo);
    EventWriter::new(encoder, origin, request_id, include_usage, native).for_api(api)
}
