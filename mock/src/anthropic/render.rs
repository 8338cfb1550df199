//! The parts of Anthropic answers and streams: stop reasons, the web
//! search a paused turn has under way, thinking, usage and stream events.

use serde_json::{json, Value};

use crate::answer::{Answer, Finish};
use crate::dialect::{to_json, Prompt, SseEvent};

use super::request::cache;

pub(super) fn stop_reason(f: &Finish) -> (&'static str, Value) {
    match f {
        Finish::Stop => ("end_turn", Value::Null),
        Finish::Length => ("max_tokens", Value::Null),
        Finish::StopSequence(s) => ("stop_sequence", json!(s)),
        Finish::ToolCalls => ("tool_use", Value::Null),
        Finish::ContentFilter => ("refusal", Value::Null),
        Finish::PauseTurn => ("pause_turn", Value::Null),
    }
}

/// The web search a paused turn has under way (docs.claude.com, "Server
/// tools": a `server_tool_use` block, `srvtoolu_` id, then `pause_turn`).
pub(super) fn search_under_way(p: &Prompt) -> Value {
    json!({"type": "server_tool_use", "id": "srvtoolu_mock1", "name": "web_search",
           "input": {"query": p.last_user_text}})
}

/// What the model thinks, when thinking is on.
pub(super) fn thinking_text(p: &Prompt) -> Option<String> {
    p.anthropic_thinking.then(|| match &p.tool_results {
        Some(_) => "The tool answered; now I can reply.".to_owned(),
        None => {
            let said: String = p.last_user_text.chars().take(80).collect();
            format!("The user said: {said}. Let me think about it.")
        }
    })
}

/// The usage object: the input not read from or written to the cache,
/// and the cache's counts (a prefix cached by an earlier request is read).
pub(super) fn usage(p: &Prompt, a: &Answer, output_tokens: u64) -> Value {
    let (mut read, mut created) = (a.cached_tokens, 0);
    if let Some((key, words)) = &p.anthropic_cache {
        let words = (*words).min(a.prompt_tokens);
        if cache().first_time(key) {
            created = words;
        } else {
            read = words;
        }
    }
    json!({
        "input_tokens": a.prompt_tokens.saturating_sub(read + created),
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": read,
    })
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
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": delta}),
    );
    e.delta = true;
    e
}
