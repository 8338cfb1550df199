//! Client surfaces: the APIs clients call the gateway with. Each decodes
//! its requests into the neutral model (`crate::model`) and renders the
//! neutral answer, stream events and errors in its own wire format.
//!
//! Adding a client API is adding a module here and a line in
//! [`SurfaceKind`] and [`surface`].

use crate::error::GatewayError;
use crate::model::response::{Answer, Origin};
use crate::model::stream::{EventWriter, StreamEncoder};

pub mod openai_chat;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceKind {
    /// `POST /v1/chat/completions`.
    OpenAiChat,
}

pub fn surface(kind: SurfaceKind) -> &'static dyn Surface {
    match kind {
        SurfaceKind::OpenAiChat => &openai_chat::OpenAiChat,
    }
}

pub trait Surface: Sync {
    /// A complete (non-stream) answer in this surface's format.
    fn render_answer(&self, answer: Answer, origin: &Origin) -> Vec<u8>;
    /// This surface's stream format for one response.
    fn stream_encoder(&self, include_usage: bool) -> Box<dyn StreamEncoder>;
    /// This surface's error envelope.
    fn render_error(&self, error: &GatewayError, request_id: Option<&str>) -> Vec<u8>;
}

impl SurfaceKind {
    /// The writer a dialect's stream decoder pushes events into.
    pub fn stream_writer(
        self,
        origin: Origin,
        request_id: String,
        include_usage: bool,
    ) -> EventWriter {
        let encoder = surface(self).stream_encoder(include_usage);
        EventWriter::new(encoder, origin, request_id, include_usage)
    }
}
