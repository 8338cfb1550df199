//! Anthropic's Messages API: the request the gateway sends, the `message`
//! object and the stream's events (which the Messages surface writes and
//! the Anthropic dialect reads), the error envelope and the model list, in
//! Anthropic's field order (`type` first).
//!
//! One type per object, for both directions: written borrowed (no
//! allocation beyond the bytes) and read borrowed (`Cow` borrows what has
//! no escapes) and tolerantly, as Anthropic adds to its API: missing fields
//! default, unknown block and delta types read as `Other`, unknown fields
//! are ignored. What only the gateway writes (its requests' images,
//! documents and tool results; a message's `type` and `role`) is never
//! read; what it only reads (`Other`) is never written.
//!
//! The request as a client sends it, which the Messages surface reads
//! strictly, is [`client`]'s: read leniently there, refused in the surface.

pub mod client;

use std::borrow::Cow;

use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

// --- content ------------------------------------------------------------------

/// A content block: of a request's turn or system prompt, of a `message`,
/// or as a stream opens it. Long texts are written by `json_text` (the same
/// bytes, faster).
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock<'a> {
    Text {
        #[serde(
            borrow,
            default,
            serialize_with = "crate::formats::json_text::serialize"
        )]
        text: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none", skip_deserializing)]
        cache_control: Option<Cache<'a>>,
    },
    #[serde(skip_deserializing)]
    Image {
        source: ImageSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Cache<'a>>,
    },
    #[serde(skip_deserializing)]
    Document {
        source: DocSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Cache<'a>>,
    },
    Thinking {
        #[serde(borrow, default)]
        thinking: Cow<'a, str>,
        #[serde(borrow, default)]
        signature: Cow<'a, str>,
    },
    RedactedThinking {
        #[serde(borrow)]
        data: Cow<'a, str>,
    },
    ToolUse {
        #[serde(borrow)]
        id: Cow<'a, str>,
        #[serde(borrow)]
        name: Cow<'a, str>,
        #[serde(default)]
        input: ToolInput<'a>,
    },
    #[serde(skip_deserializing)]
    ToolResult {
        tool_use_id: &'a str,
        content: ResultContent<'a>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Cache<'a>>,
    },
    /// A block the gateway does not read (`server_tool_use`,
    /// `web_search_tool_result`, kinds added later).
    #[serde(other, skip_serializing)]
    Other,
}

/// A `tool_use` block's `input`, a JSON object.
#[derive(Debug, Clone, Default)]
pub enum ToolInput<'a> {
    /// `{}`: as a stream opens the block (and when a block has none).
    #[default]
    Empty,
    /// A call's arguments as a vendor wrote them.
    Object(&'a RawValue),
    /// Parsed: the gateway's own encoding of a call, and as one is read
    /// (within a tagged block serde cannot hand out the raw bytes).
    Value(Value),
}

impl Serialize for ToolInput<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Empty => s.serialize_map(Some(0))?.end(),
            Self::Object(raw) => raw.serialize(s),
            Self::Value(value) => value.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ToolInput<'_> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Self::Value)
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

    /// The input as JSON text (a parsed one written compactly).
    pub fn arguments(&self) -> String {
        match self {
            Self::Empty => "{}".to_owned(),
            Self::Object(raw) => raw.get().to_owned(),
            Self::Value(value) => value.to_string(),
        }
    }
}

/// Usage as Anthropic counts it: `input_tokens` without the tokens read
/// from or written to the cache. Absent counts are not written.
#[derive(Serialize, Deserialize, Debug, Default, Clone, Copy)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
}

// --- the message and its stream -------------------------------------------------

/// The `message` object (a non-stream answer, and `message_start`'s).
/// `C` is its content: the blocks, or `IgnoredAny` where only the other
/// members are read (a pass-through answer is left as it came).
#[derive(Serialize, Deserialize, Debug)]
pub struct Message<'a, C = &'a [ContentBlock<'a>]> {
    #[serde(borrow, default)]
    pub id: Cow<'a, str>,
    /// `"message"`.
    #[serde(rename = "type", skip_deserializing)]
    pub kind: &'static str,
    /// `"assistant"`.
    #[serde(skip_deserializing)]
    pub role: &'static str,
    #[serde(borrow, default)]
    pub model: Cow<'a, str>,
    #[serde(default)]
    pub content: C,
    #[serde(borrow, default)]
    pub stop_reason: Option<Cow<'a, str>>,
    /// The stop sequence matched (`stop_reason: stop_sequence`).
    #[serde(borrow, default)]
    pub stop_sequence: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A non-stream answer as it is read: a `message` with every member
/// Anthropic always sends (`stop_reason` may be null, not absent), so a
/// 2xx body that is not one (`{}`, another object) is no answer rather
/// than an empty one. `C` is its content, an array: the blocks, or
/// `Vec<IgnoredAny>` where it is left as it came (no allocation: the
/// elements have no size).
#[derive(Deserialize, Debug)]
pub struct Answer<'a, C> {
    #[serde(rename = "type")]
    pub kind: MessageType,
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    pub role: Role,
    #[serde(borrow)]
    pub model: Cow<'a, str>,
    pub content: C,
    #[serde(deserialize_with = "nullable")]
    pub stop_reason: Option<String>,
    #[serde(borrow, default)]
    pub stop_sequence: Option<Cow<'a, str>>,
    pub usage: Usage,
}

/// A message's `type`: only `"message"` is one.
#[derive(Deserialize, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    Message,
}

/// An answer's `role`: only `"assistant"` answers.
#[derive(Deserialize, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Assistant,
}

/// A member that must be there, though it may be null (an `Option` alone
/// would take a missing one for null).
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::deserialize(d)
}

/// What a block delta adds.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta<'a> {
    TextDelta {
        #[serde(borrow)]
        text: Cow<'a, str>,
    },
    ThinkingDelta {
        #[serde(borrow)]
        thinking: Cow<'a, str>,
    },
    SignatureDelta {
        #[serde(borrow)]
        signature: Cow<'a, str>,
    },
    InputJsonDelta {
        #[serde(borrow)]
        partial_json: Cow<'a, str>,
    },
    /// A delta the gateway does not read (`citations_delta`, kinds added
    /// later).
    #[serde(other, skip_serializing)]
    Other,
}

/// `message_start`.
#[derive(Serialize, Deserialize, Debug)]
#[serde(bound(deserialize = "C: Deserialize<'de> + Default"))]
pub struct MessageStart<'a, C = &'a [ContentBlock<'a>]> {
    #[serde(borrow)]
    pub message: Message<'a, C>,
}

/// `content_block_start`.
#[derive(Serialize, Deserialize, Debug)]
pub struct BlockStart<'a> {
    pub index: u64,
    #[serde(borrow)]
    pub content_block: ContentBlock<'a>,
}

/// `content_block_delta`.
#[derive(Serialize, Deserialize, Debug)]
pub struct BlockDelta<'a> {
    pub index: u64,
    #[serde(borrow)]
    pub delta: Delta<'a>,
}

/// `content_block_stop`.
#[derive(Serialize, Debug)]
pub struct BlockStop {
    pub index: u64,
}

/// `message_delta`: how the message ended, and the usage so far.
#[derive(Serialize, Deserialize, Debug)]
pub struct MessageDelta<'a> {
    #[serde(borrow)]
    pub delta: StopDelta<'a>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `message_delta`'s `delta`.
#[derive(Serialize, Deserialize, Debug)]
pub struct StopDelta<'a> {
    #[serde(borrow, default)]
    pub stop_reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub stop_sequence: Option<Cow<'a, str>>,
}

/// One event of a Messages stream as the gateway writes it; [`Event::name`]
/// is its SSE `event:`. A reader takes the event's own type by that name
/// (only the events it reads, each parsed straight into its type), so this
/// enum is not read.
#[derive(Serialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event<'a> {
    MessageStart(MessageStart<'a>),
    Ping,
    ContentBlockStart(BlockStart<'a>),
    ContentBlockDelta(BlockDelta<'a>),
    ContentBlockStop(BlockStop),
    MessageDelta(MessageDelta<'a>),
    MessageStop,
}

impl Event<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Self::MessageStart(_) => "message_start",
            Self::Ping => "ping",
            Self::ContentBlockStart(_) => "content_block_start",
            Self::ContentBlockDelta(_) => "content_block_delta",
            Self::ContentBlockStop(_) => "content_block_stop",
            Self::MessageDelta(_) => "message_delta",
            Self::MessageStop => "message_stop",
        }
    }
}

/// The error envelope (an error answer, and the stream's `error` event).
#[derive(Serialize, Deserialize, Debug)]
pub struct ErrorEnvelope<'a> {
    /// `"error"`.
    #[serde(rename = "type", skip_deserializing)]
    pub kind: &'static str,
    #[serde(borrow)]
    pub error: ErrorBody<'a>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<Cow<'a, str>>,
}

/// The error object inside the envelope.
#[derive(Serialize, Deserialize, Debug)]
pub struct ErrorBody<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: Cow<'a, str>,
    #[serde(borrow, default)]
    pub message: Cow<'a, str>,
    /// The gateway's own code (`UPSTREAM_BUSY`...), beside Anthropic's type.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub code: Option<Cow<'a, str>>,
    /// The gateway's: the request field at fault.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub param: Option<Cow<'a, str>>,
    /// The gateway's: the provider that failed.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Cow<'a, str>>,
}

// --- the request ----------------------------------------------------------------

/// A Messages request. `T` is a conversation turn, `{"role", "content":
/// [ContentBlock]}` (the dialects' `Turn`, which Bedrock's Converse shares).
#[derive(Serialize, Debug)]
pub struct Request<'a, T> {
    pub model: &'a str,
    pub max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<ContentBlock<'a>>,
    pub messages: Vec<T>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_config: Option<OutputConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
}

/// `thinking`: extended thinking on with its budget (`enabled`), or
/// `adaptive` (Claude 4.6 and later decide how much to think).
#[derive(Serialize, Debug)]
pub struct ThinkingConfig {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u32>,
}

/// `output_config`: how much effort Claude spends (`low` ... `max`).
#[derive(Serialize, Debug)]
pub struct OutputConfig {
    pub effort: &'static str,
}

/// `cache_control`.
#[derive(Serialize, Debug, Clone, Copy)]
pub struct Cache<'a> {
    /// `"ephemeral"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<&'a str>,
}

/// A tool result's content: its text, or blocks when it holds images or
/// documents.
#[derive(Serialize, Debug, Clone)]
#[serde(untagged)]
pub enum ResultContent<'a> {
    Text(#[serde(serialize_with = "crate::formats::json_text::serialize")] String),
    Blocks(Vec<ContentBlock<'a>>),
}

#[derive(Serialize, Debug, Clone, Copy)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSource<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url { url: &'a str },
}

#[derive(Serialize, Debug, Clone, Copy)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DocSource<'a> {
    Base64 {
        media_type: &'a str,
        data: &'a str,
    },
    Url {
        url: &'a str,
    },
    Text {
        /// `"text/plain"`.
        media_type: &'static str,
        data: &'a str,
    },
}

/// A client's function tool, or Anthropic's own web search.
#[derive(Serialize, Debug)]
#[serde(untagged)]
pub enum Tool<'a> {
    Function(ToolDef<'a>),
    WebSearch(WebSearchTool<'a>),
}

#[derive(Serialize, Debug)]
pub struct ToolDef<'a> {
    pub name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<&'a str>,
    pub input_schema: Cow<'a, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<Cache<'a>>,
}

/// Anthropic's server-side web search, `web_search_20250305`
/// (docs.anthropic.com, "Web search tool").
#[derive(Serialize, Debug)]
pub struct WebSearchTool<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: &'static str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub allowed_domains: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_location: Option<SearchLocation<'a>>,
}

#[derive(Serialize, Debug)]
pub struct SearchLocation<'a> {
    /// `"approximate"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub city: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<&'a str>,
}

/// `tool_choice`.
#[derive(Serialize, Debug)]
pub struct ToolChoice<'a> {
    /// `auto`, `any`, `tool` or `none`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_parallel_tool_use: Option<bool>,
}

#[derive(Serialize, Debug)]
pub struct Metadata<'a> {
    pub user_id: &'a str,
}

// --- models -----------------------------------------------------------------------

/// A model of `GET /v1/models` (and `GET /v1/models/{model_id}`), in
/// Anthropic's order (`type` first): what the Messages surface lists and
/// the anthropic dialect's lister reads (`max_input_tokens`, `max_tokens`
/// and `lifecycle` where Anthropic says them).
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Model<'a> {
    /// `"model"`.
    #[serde(rename = "type", default)]
    pub kind: Cow<'a, str>,
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(default)]
    pub display_name: Cow<'a, str>,
    /// RFC 3339.
    #[serde(default)]
    pub created_at: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// `active`, `deprecated` (still served) or `retired` (listed, never served).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Cow<'a, str>>,
    /// Only what the gateway reads of Anthropic's capability map.
    #[serde(default, skip_serializing)]
    pub capabilities: Option<ModelCapabilities>,
}

/// Of a model's `capabilities`, what the gateway reads.
#[derive(Deserialize, Debug, Default, Clone, Copy)]
pub struct ModelCapabilities {
    #[serde(default)]
    pub image_input: Option<Supported>,
}

/// `{"supported": bool}`.
#[derive(Deserialize, Debug, Default, Clone, Copy)]
pub struct Supported {
    #[serde(default)]
    pub supported: bool,
}

/// `GET /v1/models`: one page, in Anthropic's order.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct ModelList<'a> {
    #[serde(borrow, default)]
    pub data: Vec<Model<'a>>,
    #[serde(default)]
    pub has_more: bool,
    #[serde(default)]
    pub first_id: Option<Cow<'a, str>>,
    #[serde(default)]
    pub last_id: Option<Cow<'a, str>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json<T: Serialize>(v: &T) -> String {
        serde_json::to_string(v).unwrap()
    }

    #[test]
    fn events_are_written_in_anthropics_order() {
        let delta = Event::ContentBlockDelta(BlockDelta {
            index: 2,
            delta: Delta::TextDelta {
                text: "hi \"x\"".into(),
            },
        });
        assert_eq!(delta.name(), "content_block_delta");
        assert_eq!(
            json(&delta),
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"hi \"x\""}}"#
        );
        assert_eq!(json(&Event::Ping), r#"{"type":"ping"}"#);
    }

    #[test]
    fn tool_input_is_the_arguments_object_or_empty() {
        let block = |arguments| {
            json(&ContentBlock::ToolUse {
                id: "t".into(),
                name: "f".into(),
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

    #[test]
    fn what_is_read_borrows_and_tolerates_what_it_does_not_know() {
        let data =
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}"#;
        let delta: BlockDelta = serde_json::from_str(data).unwrap();
        assert!(matches!(
            delta.delta,
            Delta::TextDelta {
                text: Cow::Borrowed("hi")
            }
        ));
        let data = r#"{"index":0,"delta":{"type":"citations_delta","citation":{}}}"#;
        let delta: BlockDelta = serde_json::from_str(data).unwrap();
        assert!(matches!(delta.delta, Delta::Other));
        // Request-only kinds are not read.
        let message: Message<Vec<ContentBlock>> = serde_json::from_str(
            r#"{"id":"m","content":[{"type":"server_tool_use","id":"s"},{"type":"image","source":{}},
                {"type":"tool_use","id":"t","name":"f","input":{"b":1, "a":2}},{"type":"text"}],
                "stop_reason":"tool_use","usage":{"output_tokens":3}}"#,
        )
        .unwrap();
        assert!(matches!(
            &message.content[..],
            [
                ContentBlock::Other,
                ContentBlock::Other,
                ContentBlock::ToolUse { .. },
                ContentBlock::Text { .. }
            ]
        ));
        if let ContentBlock::ToolUse { input, .. } = &message.content[2] {
            assert_eq!(input.arguments(), r#"{"a":2,"b":1}"#);
        }
        assert_eq!(message.usage.unwrap().output_tokens, Some(3));
        assert_eq!(message.model, "");
        let start: MessageStart<serde::de::IgnoredAny> =
            serde_json::from_str(r#"{"message":{"id":"m","content":[{"x":1}]}}"#).unwrap();
        assert!(start.message.usage.is_none());
    }

    #[test]
    fn an_error_is_written_with_what_it_has_and_read_with_what_it_finds() {
        let envelope = ErrorEnvelope {
            kind: "error",
            error: ErrorBody {
                kind: "api_error".into(),
                message: "m".into(),
                code: Some("UPSTREAM_ERROR".into()),
                param: None,
                provider: None,
            },
            request_id: None,
        };
        assert_eq!(
            json(&envelope),
            r#"{"type":"error","error":{"type":"api_error","message":"m","code":"UPSTREAM_ERROR"}}"#
        );
        let read: ErrorEnvelope = serde_json::from_str(r#"{"error":{}}"#).unwrap();
        assert_eq!((&*read.error.kind, &*read.error.message), ("", ""));
    }
}
