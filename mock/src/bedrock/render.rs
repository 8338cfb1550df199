//! The parts of Bedrock Converse answers (stop reasons, usage, response
//! fields) and of its event stream: events and their binary framing.

use serde_json::{json, Value};

use crate::answer::{Answer, Finish};
use crate::dialect::{to_json, Prompt, SseEvent};

/// `additionalModelResponseFields` of an answer: the stop sequence that
/// matched, when asked for.
pub(super) fn response_fields(p: &Prompt, a: &Answer) -> Option<Value> {
    match &a.finish {
        Finish::StopSequence(s) if p.bedrock_stop_sequence_field => {
            Some(json!({"stop_sequence": s}))
        }
        _ => None,
    }
}

pub(super) fn stop_reason(f: &Finish) -> &'static str {
    match f {
        Finish::Stop | Finish::PauseTurn => "end_turn",
        Finish::Length => "max_tokens",
        Finish::StopSequence(_) => "stop_sequence",
        Finish::ToolCalls => "tool_use",
        Finish::ContentFilter => "guardrail_intervened",
    }
}

pub(super) fn usage(p: &Prompt, a: &Answer) -> Value {
    // inputTokens excludes what was read from the cache; the total has all.
    // Claude's thinking counts as output.
    let cached = a.cached_tokens.max(p.cached_words).min(a.prompt_tokens);
    let written = a.cache_write_tokens.min(a.prompt_tokens - cached);
    let output = a.completion_tokens + if p.reasoning { a.reasoning_tokens } else { 0 };
    let mut u = json!({"inputTokens": a.prompt_tokens - cached - written,
                       "outputTokens": output,
                       "totalTokens": a.prompt_tokens + output});
    if cached + written > 0 {
        u["cacheReadInputTokens"] = json!(cached);
        u["cacheWriteInputTokens"] = json!(written);
    }
    u
}

pub(super) fn event(name: &'static str, data: Value) -> SseEvent {
    SseEvent {
        name: Some(name),
        data: to_json(&data),
        delta: false,
    }
}

pub(super) fn delta_event(index: usize, delta: Value) -> SseEvent {
    let mut e = event(
        "contentBlockDelta",
        json!({"contentBlockIndex": index, "delta": delta, "p": "abcdefgh"}),
    );
    e.delta = true;
    e
}

/// One event stream message with string headers: prelude, headers, payload, CRCs.
pub fn encode_message(headers: &[(&str, &str)], payload: &[u8], out: &mut Vec<u8>) {
    let mut block = Vec::new();
    for (name, value) in headers {
        block.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
        block.extend_from_slice(name.as_bytes());
        block.push(7); // string
        block.extend_from_slice(&u16::try_from(value.len()).unwrap_or(u16::MAX).to_be_bytes());
        block.extend_from_slice(value.as_bytes());
    }
    let total = 12 + block.len() + payload.len() + 4;
    let start = out.len();
    out.extend_from_slice(&u32::try_from(total).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&u32::try_from(block.len()).unwrap_or(u32::MAX).to_be_bytes());
    let prelude_crc = crc32(out.get(start..).unwrap_or_default());
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&block);
    out.extend_from_slice(payload);
    let crc = crc32(out.get(start..).unwrap_or_default());
    out.extend_from_slice(&crc.to_be_bytes());
}

/// CRC-32 (IEEE) of `bytes`, as the event-stream frames carry it.
pub fn crc32(bytes: &[u8]) -> u32 {
    crate::gzip::crc32_update(0, bytes)
}
