//! Gemini's stream: each SSE event a whole `GenerateContentResponse`.

use super::*;
/// Each event is a whole `GenerateContentResponse` carrying the next piece;
/// function calls arrive whole. The stream has no end marker: the body ends.
pub(super) struct GeminiEvents;

impl Events<SseParser> for GeminiEvents {
    fn on_event(
        &mut self,
        (_event, data): (&str, &str),
        w: &mut EventWriter,
        out: &mut Vec<u8>,
    ) -> Result<(), GatewayError> {
        let response: GenerateResponse =
            serde_json::from_str(data).map_err(|e| unparseable("stream event", e))?;
        if let Some(error) = response.error {
            return Err(unified_error(error, 500));
        }
        if w.native() {
            return native_event(&response, data, w, out);
        }
        if let Some(id) = response.response_id.as_deref() {
            w.set_id(id);
        }
        if let Some(model) = response.model_version.as_deref() {
            w.set_model(model);
        }
        if let Some(u) = response.usage_metadata {
            w.set_usage(Some(unified_usage(u)));
        }
        if response.candidates.is_empty() {
            return match response.prompt_feedback.and_then(|f| f.block_reason) {
                Some(reason) => Err(prompt_blocked(&reason)),
                // A usage-only event.
                None => Ok(()),
            };
        }
        // Several candidates (`candidateCount`): each carries its index.
        for (position, candidate) in response.candidates.into_iter().enumerate() {
            let index = candidate
                .index
                .unwrap_or_else(|| u32::try_from(position).unwrap_or(u32::MAX));
            w.choice(out, index)?;
            candidate_event(candidate, w, out);
        }
        Ok(())
    }

    fn on_end(&mut self, w: &mut EventWriter, out: &mut Vec<u8>) {
        if w.finished() {
            w.done(out);
        }
    }
}

/// One candidate's piece of the answer, for the writer's current choice.
fn candidate_event(
    candidate: crate::wire::gemini::Candidate,
    w: &mut EventWriter,
    out: &mut Vec<u8>,
) {
    for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
        if part.is_thought() {
            for piece in thought_pieces(&part) {
                w.reasoning(out, piece);
            }
            continue;
        }
        if let Some(call) = part.function_call {
            // Calls arrive whole: each is a new one, keyed by its number.
            let number = w.tool_calls();
            let id = tool_call_id(
                &w.origin().id,
                w.current_choice(),
                number,
                part.thought_signature.as_deref(),
            );
            let args = call.args.unwrap_or_else(|| Value::Object(Map::new()));
            let key = u64::try_from(number).unwrap_or(u64::MAX);
            w.tool_call_start(out, key, &id, &call.name);
            w.tool_call_arguments(out, key, &args.to_string());
        } else if let Some(text) = part.text {
            w.content(out, &text);
        }
    }
    if let Some(reason) = candidate.finish_reason.as_deref() {
        w.finish(out, finish_reason(reason, w.tool_calls() > 0));
    }
}

/// A Gemini client's stream event: passed through as it came, read for
/// what the session meters (ids, usage, text delivered, the finish).
pub(super) fn native_event(
    response: &GenerateResponse,
    data: &str,
    w: &mut EventWriter,
    out: &mut Vec<u8>,
) -> Result<(), GatewayError> {
    if let Some(id) = response.response_id.as_deref() {
        w.set_id(id);
    }
    if let Some(model) = response.model_version.as_deref() {
        w.set_model(model);
    }
    if let Some(u) = response.usage_metadata {
        w.set_usage(Some(unified_usage(u)));
    }
    let Some(candidate) = response.candidates.first() else {
        // A blocked prompt: Gemini's verdict, the stream's one event, as it came.
        let blocked = response
            .prompt_feedback
            .as_ref()
            .is_some_and(|f| f.block_reason.is_some());
        passthrough(w, out, data, blocked);
        if blocked {
            w.mark_finished_as(FinishReason::ContentFilter);
        }
        return Ok(());
    };
    let mut has_content = candidate.finish_reason.is_some();
    for part in candidate.content.iter().flat_map(|c| &c.parts) {
        if let Some(text) = part.text.as_deref() {
            w.count_delivered(text);
            has_content = true;
        }
        if let Some(call) = &part.function_call {
            w.count_delivered(&call.name);
            let number = w.tool_calls();
            w.note_tool_call(u64::try_from(number).unwrap_or(u64::MAX));
            has_content = true;
        }
    }
    passthrough(w, out, data, has_content);
    if candidate.finish_reason.is_some() {
        w.mark_finished();
    }
    Ok(())
}

/// One vendor event, framed again as Gemini frames it.
pub(super) fn passthrough(w: &mut EventWriter, out: &mut Vec<u8>, data: &str, content: bool) {
    let mut frame = Vec::with_capacity(data.len() + 10);
    for line in data.split('\n') {
        frame.extend_from_slice(b"data: ");
        frame.extend_from_slice(line.as_bytes());
        frame.extend_from_slice(b"\r\n");
    }
    frame.extend_from_slice(b"\r\n");
    w.passthrough(out, &Passed::data(&frame), content);
}
