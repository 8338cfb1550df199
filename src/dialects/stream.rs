//! The stream plumbing every dialect shares: a vendor's framing (SSE or
//! AWS event-stream) cut into events, each handed to the dialect's handler,
//! errors turned into the client's error event, and the end checked.

use crate::error::{ErrorCode, GatewayError};
use crate::formats::eventstream::{EventStreamDecoder, FrameError, Message};
use crate::formats::sse::{SseError, SseParser};
use crate::model::stream::EventWriter;

/// Turns a vendor stream into client events, chunk by chunk.
pub trait StreamDecoder {
    /// Translates one network chunk; errors become an error event in `out`.
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>);
    /// The vendor stream ended: close the client's stream properly.
    fn finish(&mut self, out: &mut Vec<u8>);
    /// The writer: usage, whether content started, how the stream failed.
    fn writer(&self) -> &EventWriter;
}

/// How a vendor frames its stream.
pub trait Framing: Default {
    /// One whole event as the framing delivers it.
    type Event<'a>;
    /// Feeds one network chunk, calling `on_event` for each whole event.
    fn feed(
        &mut self,
        input: &[u8],
        on_event: &mut impl FnMut(Self::Event<'_>) -> Result<(), GatewayError>,
    ) -> Result<(), GatewayError>;
    /// Bytes of an unfinished event are held back.
    fn has_partial(&self) -> bool;
}

/// Server-sent events: `(event type, data)`.
impl Framing for SseParser {
    type Event<'a> = (&'a str, &'a str);

    fn feed(
        &mut self,
        input: &[u8],
        on_event: &mut impl FnMut(Self::Event<'_>) -> Result<(), GatewayError>,
    ) -> Result<(), GatewayError> {
        SseParser::feed(self, input, &mut |event: &str, data: &str| {
            on_event((event, data))
        })
    }

    fn has_partial(&self) -> bool {
        SseParser::has_partial(self)
    }
}

/// AWS event-stream (Bedrock): one verified binary message.
impl Framing for EventStreamDecoder {
    type Event<'a> = Message;

    fn feed(
        &mut self,
        input: &[u8],
        on_event: &mut impl FnMut(Self::Event<'_>) -> Result<(), GatewayError>,
    ) -> Result<(), GatewayError> {
        EventStreamDecoder::feed(self, input, on_event)
    }

    fn has_partial(&self) -> bool {
        EventStreamDecoder::has_partial(self)
    }
}

/// One dialect's handling of its vendor's events.
pub trait Events<F: Framing> {
    fn on_event(
        &mut self,
        event: F::Event<'_>,
        w: &mut EventWriter,
        out: &mut Vec<u8>,
    ) -> Result<(), GatewayError>;

    /// The vendor's body ended after a whole event. Vendors whose stream
    /// has no end marker of its own close the client's stream here.
    fn on_end(&mut self, _w: &mut EventWriter, _out: &mut Vec<u8>) {}
}

/// A vendor stream: its framing, the dialect's handler and the writer.
pub struct FramedStream<F, H> {
    framing: F,
    writer: EventWriter,
    handler: H,
}

impl<F: Framing, H> FramedStream<F, H> {
    pub fn new(writer: EventWriter, handler: H) -> Self {
        Self {
            framing: F::default(),
            writer,
            handler,
        }
    }
}

impl<F: Framing, H: Events<F>> StreamDecoder for FramedStream<F, H> {
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if self.writer.is_done() {
            return;
        }
        let Self {
            framing,
            writer,
            handler,
        } = self;
        let result = framing.feed(input, &mut |event| {
            if writer.is_done() {
                return Ok(());
            }
            handler.on_event(event, writer, out)
        });
        if let Err(e) = result {
            writer.error(out, &e);
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.writer.is_done() && !self.framing.has_partial() {
            self.handler.on_end(&mut self.writer, out);
        }
        if !self.writer.is_done() {
            self.writer.error(out, &incomplete_stream());
        }
    }

    fn writer(&self) -> &EventWriter {
        &self.writer
    }
}

/// A vendor stream that ended before its last event.
pub fn incomplete_stream() -> GatewayError {
    GatewayError::new(
        ErrorCode::UpstreamError,
        "the provider's stream ended before it was complete",
    )
}

impl From<SseError> for GatewayError {
    fn from(e: SseError) -> Self {
        let what = match e {
            SseError::TooLarge => "an event larger than the gateway accepts",
            SseError::InvalidUtf8 => "an event that is not valid UTF-8",
        };
        GatewayError::new(
            ErrorCode::UpstreamError,
            format!("the provider's stream contained {what}"),
        )
    }
}

impl From<FrameError> for GatewayError {
    fn from(e: FrameError) -> Self {
        GatewayError::new(
            ErrorCode::UpstreamError,
            format!("the provider's event stream contained {e}"),
        )
    }
}
