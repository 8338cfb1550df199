//! Anthropic's stream events, decoded for metering and translation.

use super::*;

/// Anthropic's stream events (also Bedrock InvokeModel's, unwrapped).
#[derive(Default)]
pub(crate) struct AnthropicEvents {
    usage: wire::Usage,
    stop_reason: Option<FinishReason>,
}

pub(super) fn parse<'a, T: Deserialize<'a>>(data: &'a str) -> Result<T, GatewayError> {
    serde_json::from_str(data).map_err(|e| unparseable("stream event", e))
}

impl Events<SseParser> for AnthropicEvents {
    /// For a Messages client (`w.native()`) every event passes through as
    /// it came, read only for what the session meters; for others each is
    /// translated into the neutral events.
    fn on_event(
        &mut self,
        (event, data): (&str, &str),
        w: &mut EventWriter,
        out: &mut Vec<u8>,
    ) -> Result<(), GatewayError> {
        let native = w.native();
        let mut has_content = false;
        match event {
            "message_start" => {
                let start: MessageStart<IgnoredAny> = parse(data)?;
                w.set_id(&start.message.id);
                w.set_model(&start.message.model);
                if let Some(u) = start.message.usage {
                    self.usage = u;
                }
                if !native {
                    w.start(out);
                }
            }
            "content_block_start" => {
                let start: BlockStart = parse(data)?;
                // An empty text or thinking block says nothing yet: the
                // stream is still held (first-event gating) until it does.
                has_content = match &start.content_block {
                    Block::Text { text, .. } => !text.is_empty(),
                    Block::Thinking { thinking, .. } => !thinking.is_empty(),
                    _ => true,
                };
                match start.content_block {
                    _ if native => {}
                    Block::Text { text, .. } => w.content(out, &text),
                    Block::ToolUse { id, name, .. } => {
                        w.tool_call_start(out, start.index, &id, &name);
                    }
                    Block::Thinking { thinking, .. } => {
                        w.reasoning(out, Reasoning::Text(&thinking));
                    }
                    Block::RedactedThinking { data } => {
                        w.reasoning(out, Reasoning::Redacted(&data));
                    }
                    // Kinds the gateway does not read.
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta: BlockDelta = parse(data)?;
                has_content = true;
                match delta.delta {
                    Delta::TextDelta { text } if native => w.count_delivered(&text),
                    Delta::InputJsonDelta { partial_json } if native => {
                        w.count_delivered(&partial_json)
                    }
                    Delta::ThinkingDelta { thinking } if native => w.count_delivered(&thinking),
                    _ if native => {}
                    Delta::TextDelta { text } => w.content(out, &text),
                    Delta::InputJsonDelta { partial_json } => {
                        w.tool_call_arguments(out, delta.index, &partial_json);
                    }
                    Delta::ThinkingDelta { thinking } => {
                        w.reasoning(out, Reasoning::Text(&thinking));
                    }
                    Delta::SignatureDelta { signature } => {
                        w.reasoning(out, Reasoning::Signature(&signature));
                    }
                    Delta::Other => {}
                }
            }
            "message_delta" => {
                let delta: MessageDelta = parse(data)?;
                if let Some(sequence) = delta.delta.stop_sequence.as_deref() {
                    w.set_stop_sequence(sequence);
                }
                if let Some(reason) = delta.delta.stop_reason.as_deref() {
                    self.stop_reason = Some(finish_reason(reason));
                    has_content = true;
                    if native {
                        w.mark_finished();
                    }
                }
                if let Some(u) = delta.usage {
                    // message_delta usage is cumulative; keep input counts from message_start if absent here.
                    self.usage.output_tokens = u.output_tokens.or(self.usage.output_tokens);
                    self.usage.input_tokens = u.input_tokens.or(self.usage.input_tokens);
                    self.usage.cache_read_input_tokens = u
                        .cache_read_input_tokens
                        .or(self.usage.cache_read_input_tokens);
                    self.usage.cache_creation_input_tokens = u
                        .cache_creation_input_tokens
                        .or(self.usage.cache_creation_input_tokens);
                }
            }
            "message_stop" => {
                if native {
                    passthrough(w, out, event, data, false);
                } else {
                    w.finish(out, self.stop_reason.unwrap_or(FinishReason::Stop));
                }
                w.set_usage(Some(unified(self.usage)));
                w.done(out);
                return Ok(());
            }
            "error" => {
                let envelope: ErrorEnvelope = parse(data)?;
                // What the vendor reported before it failed (message_start) is billed.
                if self.usage.input_tokens.is_some() {
                    w.set_usage(Some(unified(self.usage)));
                }
                return Err(vendor_error(envelope.error, 500));
            }
            // ping, content_block_stop, and event types added later.
            _ => {}
        }
        if native {
            passthrough(w, out, event, data, has_content);
        }
        Ok(())
    }
}

/// One vendor event, framed again as it came (`event:` and its data lines).
pub(super) fn passthrough(
    w: &mut EventWriter,
    out: &mut Vec<u8>,
    event: &str,
    data: &str,
    content: bool,
) {
    let mut frame = Vec::with_capacity(event.len() + data.len() + 16);
    if !event.is_empty() {
        frame.extend_from_slice(b"event: ");
        frame.extend_from_slice(event.as_bytes());
        frame.push(b'\n');
    }
    for line in data.split('\n') {
        frame.extend_from_slice(b"data: ");
        frame.extend_from_slice(line.as_bytes());
        frame.push(b'\n');
    }
    frame.push(b'\n');
    w.passthrough(out, &Passed::data(&frame), content);
}
