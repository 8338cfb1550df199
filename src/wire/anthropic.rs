//! Anthropic's Messages API, the answer side: the `message` object, its
//! content blocks and the stream's events, as Anthropic writes them (its
//! field order; `type` first). Borrowed: writing one costs no allocation
//! beyond the bytes.

use serde::Serialize;
use serde_json::value::RawValue;

/// A content block of a `message`, or as a stream opens it.
#[derive(Serialize, Debug, Clone, Copy)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock<'a> {
    Text {
        text: &'a str,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: ToolInput<'a>,
    },
}

/// The `message` object (a non-stream answer, and `message_start`'s).
#[derive(Serialize, Debug)]
pub struct Message<'a, U: Serialize> {
    pub id: &'a str,
    /// `"message"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `"assistant"`.
    pub role: &'static str,
    pub model: &'a str,
    pub content: &'a [ContentBlock<'a>],
    pub stop_reason: Option<&'a str>,
    pub stop_sequence: Option<&'a str>,
    pub usage: U,
}

/// What a block delta adds.
#[derive(Serialize, Debug, Clone, Copy)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta<'a> {
    TextDelta { text: &'a str },
    ThinkingDelta { thinking: &'a str },
    SignatureDelta { signature: &'a str },
    InputJsonDelta { partial_json: &'a str },
}

/// `message_delta`'s `delta`.
#[derive(Serialize, Debug)]
pub struct MessageDelta<'a> {
    pub stop_reason: &'a str,
    pub stop_sequence: Option<&'a str>,
}

/// One event of a Messages stream; [`Event::name`] is its SSE `event:`.
#[derive(Serialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event<'a, U: Serialize> {
    MessageStart {
        message: Message<'a, U>,
    },
    Ping,
    ContentBlockStart {
        index: u32,
        content_block: ContentBlock<'a>,
    },
    ContentBlockDelta {
        index: u32,
        delta: Delta<'a>,
    },
    ContentBlockStop {
        index: u32,
    },
    MessageDelta {
        delta: MessageDelta<'a>,
        usage: U,
    },
    MessageStop,
}

impl<U: Serialize> Event<'_, U> {
    pub fn name(&self) -> &'static str {
        match self {
            Self::MessageStart { .. } => "message_start",
            Self::Ping => "ping",
            Self::ContentBlockStart { .. } => "content_block_start",
            Self::ContentBlockDelta { .. } => "content_block_delta",
            Self::ContentBlockStop { .. } => "content_block_stop",
            Self::MessageDelta { .. } => "message_delta",
            Self::MessageStop => "message_stop",
        }
    }
}

/// A `tool_use` block's `input`: `{}` as a stream opens the block, or the
/// call's arguments, a JSON object, as the vendor's bytes.
#[derive(Debug, Clone, Copy)]
pub enum ToolInput<'a> {
    Empty,
    Object(&'a RawValue),
}

impl Serialize for ToolInput<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Empty => serde::ser::SerializeMap::end(s.serialize_map(Some(0))?),
            Self::Object(raw) => raw.serialize(s),
        }
    }
}

impl<'a> ToolInput<'a> {
    /// The arguments when they are a JSON object, else `{}` (Anthropic's
    /// `input` is always an object).
    pub fn of(arguments: &'a str) -> Self {
        match serde_json::from_str::<&RawValue>(arguments) {
            Ok(raw) if raw.get().starts_with('{') => Self::Object(raw),
            _ => Self::Empty,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json<T: Serialize>(v: &T) -> String {
        serde_json::to_string(v).unwrap()
    }

    #[test]
    fn events_are_written_in_anthropics_order() {
        let delta: Event<()> = Event::ContentBlockDelta {
            index: 2,
            delta: Delta::TextDelta { text: "hi \"x\"" },
        };
        assert_eq!(delta.name(), "content_block_delta");
        assert_eq!(
            json(&delta),
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"hi \"x\""}}"#
        );
        assert_eq!(json(&Event::<()>::Ping), r#"{"type":"ping"}"#);
    }

    #[test]
    fn tool_input_is_the_arguments_object_or_empty() {
        let block = |arguments| {
            json(&ContentBlock::ToolUse {
                id: "t",
                name: "f",
                input: ToolInput::of(arguments),
            })
        };
        assert_eq!(
            block(" {\"q\": 1} "),
            r#"{"type":"tool_use","id":"t","name":"f","input":{"q": 1}}"#
        );
        for not_an_object in ["[1]", "\"s\"", "{\"q\":", ""] {
            assert!(
                block(not_an_object).ends_with(r#""input":{}}"#),
                "{not_an_object}"
            );
        }
    }
}
