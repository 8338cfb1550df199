//! OpenAI's Responses API, the answer side: the `response` object, its
//! output items and the stream's events, in OpenAI's field order (an item's
//! `id` before its `type`; an event's `type` and `sequence_number` first).
//! Borrowed: writing one costs no allocation beyond the bytes. And the
//! facts a reader takes from a vendor's answer and events to meter a
//! pass-through ([`ResponseFacts`], [`EventFacts`]). The request side, as
//! a client sends it, is [`client`].

use std::borrow::Cow;

use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::openai_chat::text;

pub mod client;

/// The `response` object (a non-stream answer, and the lifecycle events').
/// `provider` is the gateway's; the `Option<&Value>` fields are what the
/// request's echo holds (absent when it holds nothing for them).
#[derive(Serialize, Debug)]
pub struct Response<'a> {
    pub id: &'a str,
    /// `"response"`.
    pub object: &'static str,
    pub created_at: u64,
    pub status: &'static str,
    pub background: bool,
    pub error: Option<ResponseError<'a>>,
    pub incomplete_details: Option<IncompleteDetails>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<&'a Value>,
    pub model: &'a str,
    pub provider: &'a str,
    pub output: &'a [OutputItem<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<&'a Value>,
    pub store: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncation: Option<&'a Value>,
    pub usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<&'a Value>,
}

/// A failed response's `error`.
#[derive(Serialize, Debug)]
pub struct ResponseError<'a> {
    pub code: &'a str,
    pub message: &'a str,
}

#[derive(Serialize, Debug)]
pub struct IncompleteDetails {
    pub reason: &'static str,
}

/// Usage, the details always there (the SDKs' types want them).
#[derive(Serialize, Debug)]
pub struct Usage {
    pub input_tokens: u64,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: u64,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: u64,
}

/// Both members always (the SDK's type requires `cache_write_tokens`).
#[derive(Serialize, Debug)]
pub struct InputTokensDetails {
    pub cache_write_tokens: u64,
    pub cached_tokens: u64,
}

#[derive(Serialize, Debug)]
pub struct OutputTokensDetails {
    pub reasoning_tokens: u64,
}

/// An output item. Written by hand: OpenAI puts `id` before `type`, which
/// serde's tagged enums cannot.
#[derive(Debug, Clone, Copy)]
pub enum OutputItem<'a> {
    /// An assistant message; `text` its one `output_text` part (none yet
    /// while in progress).
    Message {
        id: &'a str,
        status: &'a str,
        text: Option<&'a str>,
    },
    /// Reasoning; `summary` its one `summary_text` part, if any.
    Reasoning {
        id: &'a str,
        encrypted_content: Option<&'a str>,
        summary: Option<&'a str>,
    },
    FunctionCall {
        id: &'a str,
        status: &'a str,
        arguments: &'a str,
        call_id: &'a str,
        name: &'a str,
        namespace: Option<&'a str>,
    },
}

impl Serialize for OutputItem<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match *self {
            Self::Message { id, status, text } => {
                map.serialize_entry("id", id)?;
                map.serialize_entry("type", "message")?;
                map.serialize_entry("status", status)?;
                let parts = text.map(Part::output_text);
                map.serialize_entry("content", parts.as_slice())?;
                map.serialize_entry("role", "assistant")?;
            }
            Self::Reasoning {
                id,
                encrypted_content,
                summary,
            } => {
                map.serialize_entry("id", id)?;
                map.serialize_entry("type", "reasoning")?;
                if let Some(data) = encrypted_content {
                    map.serialize_entry("encrypted_content", data)?;
                }
                let parts = summary.map(|text| Part::SummaryText { text });
                map.serialize_entry("summary", parts.as_slice())?;
            }
            Self::FunctionCall {
                id,
                status,
                arguments,
                call_id,
                name,
                namespace,
            } => {
                map.serialize_entry("id", id)?;
                map.serialize_entry("type", "function_call")?;
                map.serialize_entry("status", status)?;
                map.serialize_entry("arguments", arguments)?;
                map.serialize_entry("call_id", call_id)?;
                map.serialize_entry("name", name)?;
                if let Some(namespace) = namespace {
                    map.serialize_entry("namespace", namespace)?;
                }
            }
        }
        map.end()
    }
}

/// A message's content part, or a reasoning item's summary part. The
/// `[(); 0]` lists are always `[]`: the gateway has no annotations or
/// log probabilities to give, and OpenAI's SDKs expect the lists.
#[derive(Serialize, Debug, Clone, Copy)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part<'a> {
    OutputText {
        annotations: [(); 0],
        logprobs: [(); 0],
        text: &'a str,
    },
    SummaryText {
        text: &'a str,
    },
}

impl<'a> Part<'a> {
    pub fn output_text(text: &'a str) -> Self {
        Self::OutputText {
            annotations: [],
            logprobs: [],
            text,
        }
    }
}

/// One event of a Responses stream, without its number: [`Numbered`]
/// writes it. [`Event::name`] is its `type` and SSE `event:`.
#[derive(Serialize, Debug)]
#[serde(untagged)]
pub enum Event<'a> {
    /// `response.created`, `.in_progress`, `.completed`, `.incomplete`,
    /// `.failed`: the response as it stands.
    Lifecycle {
        #[serde(skip)]
        name: &'static str,
        response: &'a Response<'a>,
    },
    Error {
        code: &'a str,
        message: &'a str,
        param: Option<&'a str>,
    },
    /// `response.output_item.added` or `.done`.
    OutputItem {
        #[serde(skip)]
        done: bool,
        output_index: usize,
        item: OutputItem<'a>,
    },
    /// `response.content_part.added` or `.done`.
    ContentPart {
        #[serde(skip)]
        done: bool,
        item_id: &'a str,
        output_index: usize,
        content_index: u32,
        part: Part<'a>,
    },
    OutputTextDelta {
        item_id: &'a str,
        output_index: usize,
        content_index: u32,
        delta: &'a str,
        logprobs: [(); 0],
    },
    OutputTextDone {
        item_id: &'a str,
        output_index: usize,
        content_index: u32,
        text: &'a str,
        logprobs: [(); 0],
    },
    /// `response.reasoning_summary_part.added` or `.done`.
    ReasoningSummaryPart {
        #[serde(skip)]
        done: bool,
        item_id: &'a str,
        output_index: usize,
        summary_index: u32,
        part: Part<'a>,
    },
    ReasoningSummaryTextDelta {
        item_id: &'a str,
        output_index: usize,
        summary_index: u32,
        delta: &'a str,
    },
    ReasoningSummaryTextDone {
        item_id: &'a str,
        output_index: usize,
        summary_index: u32,
        text: &'a str,
    },
    FunctionCallArgumentsDelta {
        item_id: &'a str,
        output_index: usize,
        delta: &'a str,
    },
    FunctionCallArgumentsDone {
        item_id: &'a str,
        output_index: usize,
        name: &'a str,
        arguments: &'a str,
    },
}

impl Event<'_> {
    pub fn name(&self) -> &'static str {
        let added_or_done = |done: bool, added: &'static str, finished: &'static str| {
            if done {
                finished
            } else {
                added
            }
        };
        match *self {
            Self::Lifecycle { name, .. } => name,
            Self::Error { .. } => "error",
            Self::OutputItem { done, .. } => added_or_done(
                done,
                "response.output_item.added",
                "response.output_item.done",
            ),
            Self::ContentPart { done, .. } => added_or_done(
                done,
                "response.content_part.added",
                "response.content_part.done",
            ),
            Self::OutputTextDelta { .. } => "response.output_text.delta",
            Self::OutputTextDone { .. } => "response.output_text.done",
            Self::ReasoningSummaryPart { done, .. } => added_or_done(
                done,
                "response.reasoning_summary_part.added",
                "response.reasoning_summary_part.done",
            ),
            Self::ReasoningSummaryTextDelta { .. } => "response.reasoning_summary_text.delta",
            Self::ReasoningSummaryTextDone { .. } => "response.reasoning_summary_text.done",
            Self::FunctionCallArgumentsDelta { .. } => "response.function_call_arguments.delta",
            Self::FunctionCallArgumentsDone { .. } => "response.function_call_arguments.done",
        }
    }
}

/// An event as the stream writes it: `type` and `sequence_number`, then
/// the event's own fields.
#[derive(Serialize, Debug)]
pub struct Numbered<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    sequence_number: u64,
    #[serde(flatten)]
    event: &'a Event<'a>,
}

impl<'a> Numbered<'a> {
    pub fn new(sequence_number: u64, event: &'a Event<'a>) -> Self {
        Self {
            kind: event.name(),
            sequence_number,
            event,
        }
    }
}

/// A `response` object as a reader meters it: a pass-through's answer, or
/// a stream event's `response`. Every member optional; others ignored.
#[derive(Deserialize, Debug, Default)]
pub struct ResponseFacts<'a> {
    #[serde(default, borrow)]
    pub id: Cow<'a, str>,
    #[serde(default, borrow)]
    pub model: Cow<'a, str>,
    /// Seconds, as a number (the SDK's type is a float); anything else is none.
    #[serde(default, deserialize_with = "seconds")]
    pub created_at: Option<f64>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub status: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub incomplete_details: Option<IncompleteFacts<'a>>,
    #[serde(default)]
    pub usage: Option<UsageFacts>,
    #[serde(default, borrow)]
    pub error: Option<ErrorFacts<'a>>,
}

#[derive(Deserialize, Debug, Default)]
pub struct IncompleteFacts<'a> {
    #[serde(default, borrow, deserialize_with = "text")]
    pub reason: Option<Cow<'a, str>>,
}

/// A failed response's `error`.
#[derive(Deserialize, Debug, Default)]
pub struct ErrorFacts<'a> {
    #[serde(default, borrow, deserialize_with = "text")]
    pub code: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub message: Option<Cow<'a, str>>,
}

/// Usage as vendors send it, the details optional.
#[derive(Deserialize, Debug, Default)]
pub struct UsageFacts {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub input_tokens_details: Option<DetailsFacts>,
    #[serde(default)]
    pub output_tokens_details: Option<DetailsFacts>,
}

#[derive(Deserialize, Debug, Default)]
pub struct DetailsFacts {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    #[serde(default)]
    pub cache_write_tokens: Option<u64>,
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

/// A stream event as a reader meters and follows it: its `type` (the SSE
/// event's name) and number, its text `delta`, its `response`, and an
/// `error` event's `code` and `message`.
#[derive(Deserialize, Debug)]
pub struct EventFacts<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    /// A number that is no count is none (the event passes on all the same).
    #[serde(default, deserialize_with = "count")]
    pub sequence_number: Option<u64>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub delta: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub response: Option<ResponseFacts<'a>>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub code: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub message: Option<Cow<'a, str>>,
}

/// A count, or none for any other value.
fn count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Value::deserialize(d)?.as_u64())
}

/// A number, or none for any other value.
fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(Value::deserialize(d)?.as_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json<T: Serialize>(v: &T) -> String {
        serde_json::to_string(v).unwrap()
    }

    #[test]
    fn events_are_written_in_openais_order() {
        let delta = Event::OutputTextDelta {
            item_id: "msg_0_x",
            output_index: 1,
            content_index: 0,
            delta: "hi \"x\"",
            logprobs: [],
        };
        assert_eq!(
            json(&Numbered::new(4, &delta)),
            r#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_0_x","output_index":1,"content_index":0,"delta":"hi \"x\"","logprobs":[]}"#
        );
        let part = Event::ContentPart {
            done: false,
            item_id: "msg_0_x",
            output_index: 0,
            content_index: 0,
            part: Part::output_text(""),
        };
        assert_eq!(
            json(&Numbered::new(3, &part)),
            r#"{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_0_x","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}"#
        );
        let error = Event::Error {
            code: "UPSTREAM_ERROR",
            message: "m",
            param: None,
        };
        assert_eq!(
            json(&Numbered::new(9, &error)),
            r#"{"type":"error","sequence_number":9,"code":"UPSTREAM_ERROR","message":"m","param":null}"#
        );
    }

    #[test]
    fn items_are_written_id_first() {
        let added = Event::OutputItem {
            done: false,
            output_index: 0,
            item: OutputItem::Message {
                id: "msg_0_x",
                status: "in_progress",
                text: None,
            },
        };
        assert_eq!(
            json(&Numbered::new(2, &added)),
            r#"{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_0_x","type":"message","status":"in_progress","content":[],"role":"assistant"}}"#
        );
        let call = OutputItem::FunctionCall {
            id: "fc_1_x",
            status: "completed",
            arguments: "{}",
            call_id: "call_1",
            name: "f",
            namespace: Some("ns"),
        };
        assert_eq!(
            json(&call),
            r#"{"id":"fc_1_x","type":"function_call","status":"completed","arguments":"{}","call_id":"call_1","name":"f","namespace":"ns"}"#
        );
        let reasoning = |encrypted_content, summary| {
            json(&OutputItem::Reasoning {
                id: "rs_0_x",
                encrypted_content,
                summary,
            })
        };
        assert_eq!(
            reasoning(Some("e"), Some("t")),
            r#"{"id":"rs_0_x","type":"reasoning","encrypted_content":"e","summary":[{"type":"summary_text","text":"t"}]}"#
        );
        assert_eq!(
            reasoning(None, None),
            r#"{"id":"rs_0_x","type":"reasoning","summary":[]}"#
        );
    }
}
