//! Bedrock's streams: the binary AWS event stream of Converse (and of
//! InvokeModel, whose `chunk`s carry Anthropic's events), decoded into
//! the neutral stream events.

use super::*;

/// A Converse stream's events, or an InvokeModel stream's `chunk`s.
#[derive(Default)]
pub(super) struct BedrockEvents {
    chunks: Chunks,
}

pub(super) fn parse<'a, T: Deserialize<'a>>(payload: &'a [u8]) -> Result<T, GatewayError> {
    serde_json::from_slice(payload).map_err(|e| unparseable("stream event", e))
}

/// A frame that is no event: Bedrock's exceptions and errors, the same in
/// both APIs' streams.
pub(super) fn check_event(frame: &Frame) -> Result<(), GatewayError> {
    match frame.header_str(":message-type") {
        Some("event") => {}
        Some("exception") => {
            let kind = frame.header_str(":exception-type").unwrap_or_default();
            let body: ExceptionBody = parse(&frame.payload)?;
            return Err(GatewayError::new(
                error_code(kind, 500, &body.message),
                body.message,
            ));
        }
        Some("error") => {
            let code = frame.header_str(":error-code").unwrap_or_default();
            let message = frame.header_str(":error-message").unwrap_or(code);
            return Err(GatewayError::new(
                error_code(code, 500, message),
                message.to_owned(),
            ));
        }
        other => {
            return Err(unparseable(
                "stream",
                format!("unknown :message-type {other:?}"),
            ))
        }
    }
    Ok(())
}

pub(super) fn converse_event(
    frame: &Frame,
    w: &mut EventWriter,
    out: &mut Vec<u8>,
) -> Result<(), GatewayError> {
    match frame.header_str(":event-type").unwrap_or_default() {
        "messageStart" => w.start(out),
        "contentBlockStart" => {
            let start: BlockStart = parse(&frame.payload)?;
            if let Some(tool) = start.start.and_then(|s| s.tool_use) {
                let key = start.content_block_index;
                w.tool_call_start(out, key, &tool.tool_use_id, &tool.name);
            }
        }
        "contentBlockDelta" => {
            let delta: BlockDelta = parse(&frame.payload)?;
            if let Some(text) = delta.delta.text {
                w.content(out, &text);
            }
            if let Some(tool) = delta.delta.tool_use {
                w.tool_call_arguments(out, delta.content_block_index, &tool.input);
            }
            if let Some(r) = &delta.delta.reasoning_content {
                let pieces = [
                    r.text.as_deref().map(Reasoning::Text),
                    r.signature.as_deref().map(Reasoning::Signature),
                    r.redacted_content.as_deref().map(Reasoning::Redacted),
                ];
                for piece in pieces.into_iter().flatten() {
                    w.reasoning(out, piece);
                }
            }
        }
        "messageStop" => {
            let stop: MessageStop = parse(&frame.payload)?;
            if let Some(sequence) = &stop.additional_model_response_fields.stop_sequence {
                w.set_stop_sequence(sequence);
            }
            w.finish(out, finish_reason(&stop.stop_reason));
        }
        "metadata" => {
            let meta: Metadata = parse(&frame.payload)?;
            w.set_usage(meta.usage.map(BedrockUsage::unified));
            if w.finished() {
                w.done(out);
            }
        }
        // contentBlockStop, and event types added later.
        _ => {}
    }
    Ok(())
}

/// Bedrock's stream has no end event of its own: a stop reason (the
/// usage event may be missing) is what makes the answer complete.
impl Events<EventStreamDecoder> for BedrockEvents {
    fn on_event(
        &mut self,
        frame: Frame,
        w: &mut EventWriter,
        out: &mut Vec<u8>,
    ) -> Result<(), GatewayError> {
        check_event(&frame)?;
        if frame.header_str(":event-type") == Some("chunk") {
            return self.chunks.on_chunk(&frame.payload, w, out);
        }
        converse_event(&frame, w, out)
    }

    fn on_end(&mut self, w: &mut EventWriter, out: &mut Vec<u8>) {
        // InvokeModel's stream ends with Anthropic's own `message_stop`.
        if !self.chunks.seen() && w.finished() {
            w.done(out);
        }
    }
}
