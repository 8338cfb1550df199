//! The parts of a `response` object (id, status, usage, output items) and
//! the semantic event stream, numbered by `sequence_number`.

use serde_json::{json, Value};

use crate::answer::{fragments, Answer, Finish};
use crate::dialect::{Meta, Prompt, SseEvent};
use crate::openai::reasoning_model;

pub(super) fn response_id(meta: Meta) -> String {
    format!("resp_mock{}", meta.seq)
}

pub(super) fn status(a: &Answer) -> (&'static str, Value) {
    match a.finish {
        Finish::Length => ("incomplete", json!({"reason": "max_output_tokens"})),
        Finish::ContentFilter => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

pub(super) fn usage(a: &Answer) -> Value {
    // Reasoning tokens are part of the output tokens; cached ones of the input.
    let output = a.completion_tokens + a.reasoning_tokens;
    json!({
        "input_tokens": a.prompt_tokens,
        "input_tokens_details": {"cache_write_tokens": a.cache_write_tokens,
                                 "cached_tokens": a.cached_tokens},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": a.reasoning_tokens},
        "total_tokens": a.prompt_tokens + output,
    })
}

/// A reasoning model thinks before it answers: its summary (when the
/// request asked for reasoning), then the message, then the calls.
pub(super) fn output(p: &Prompt, a: &Answer, meta: Meta, status: &str) -> Value {
    let mut items = Vec::new();
    if reasoning_model(&p.model) {
        items.push(
            json!({"id": format!("rs_mock{}", meta.seq), "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Thinking it over."}]}),
        );
    }
    if !a.text.is_empty() {
        items.push(json!({"id": format!("msg_mock{}", meta.seq), "type": "message", "status": status,
            "role": "assistant",
            "content": [{"type": "output_text", "text": a.text, "annotations": [], "logprobs": []}]}));
    }
    for (i, call) in a.tool_calls.iter().enumerate() {
        items.push(
            json!({"id": format!("fc_mock{}_{i}", meta.seq), "type": "function_call",
            "status": "completed", "call_id": format!("call_{}", call.n), "name": call.name,
            "arguments": call.arguments_json}),
        );
    }
    Value::Array(items)
}

/// Events numbered by `sequence_number` as they are pushed.
#[derive(Default)]
pub(super) struct Events {
    pub(super) events: Vec<SseEvent>,
}

impl Events {
    pub(super) fn push(&mut self, name: &'static str, mut data: Value, delta: bool) {
        data["type"] = name.into();
        data["sequence_number"] = self.events.len().into();
        self.events.push(SseEvent {
            name: Some(name),
            data: crate::dialect::to_json(&data),
            delta,
        });
    }
}

/// One output item's events: added, its content in deltas, done.
pub(super) fn stream_item(s: &mut Events, index: usize, item: &Value, a: &Answer) {
    let id = item["id"].clone();
    let mut opening = item.clone();
    match item["type"].as_str() {
        Some("message") => {
            opening["status"] = "in_progress".into();
            opening["content"] = json!([]);
            s.push(
                "response.output_item.added",
                json!({"output_index": index, "item": opening}),
                false,
            );
            let empty =
                json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
            s.push(
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": empty}),
                false,
            );
            for chunk in &a.chunks {
                s.push("response.output_text.delta",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "delta": chunk, "logprobs": []}), true);
            }
            let part = item["content"][0].clone();
            s.push("response.output_text.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "text": part["text"], "logprobs": []}), false);
            s.push(
                "response.content_part.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
                false,
            );
        }
        Some("function_call") => {
            opening["status"] = "in_progress".into();
            opening["arguments"] = "".into();
            s.push(
                "response.output_item.added",
                json!({"output_index": index, "item": opening}),
                true,
            );
            let arguments = item["arguments"].as_str().unwrap_or("");
            for fragment in fragments(arguments) {
                s.push(
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": index, "delta": fragment}),
                    true,
                );
            }
            s.push("response.function_call_arguments.done",
                json!({"item_id": id, "output_index": index, "name": item["name"], "arguments": arguments}), false);
        }
        Some("reasoning") => {
            opening["summary"] = json!([]);
            s.push(
                "response.output_item.added",
                json!({"output_index": index, "item": opening}),
                false,
            );
            let part = item["summary"][0].clone();
            s.push(
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": index, "summary_index": 0,
                       "part": {"type": "summary_text", "text": ""}}),
                false,
            );
            s.push("response.reasoning_summary_text.delta",
                json!({"item_id": id, "output_index": index, "summary_index": 0, "delta": part["text"]}), true);
            s.push("response.reasoning_summary_text.done",
                json!({"item_id": id, "output_index": index, "summary_index": 0, "text": part["text"]}), false);
            s.push(
                "response.reasoning_summary_part.done",
                json!({"item_id": id, "output_index": index, "summary_index": 0, "part": part}),
                false,
            );
        }
        _ => {}
    }
    s.push(
        "response.output_item.done",
        json!({"output_index": index, "item": item}),
        false,
    );
}
