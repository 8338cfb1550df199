//! OpenAI's Chat Completions, the answer side (the request side is in
//! [`request`]): the `chat.completion`, the
//! `chat.completion.chunk` and the error envelope, in OpenAI's field order.
//! The chat surface writes them; the openai and azure dialects read them
//! (the error envelope: read, and the gateway's written, here).
//!
//! Reading is as tolerant as vendors need: what a reader does not use is
//! skipped (`skip_deserializing`: the key is ignored, whatever its value),
//! missing members default, usage that does not parse counts as none, an
//! unknown finish reason as no finish. Text is borrowed from the input
//! unless it had escapes ([`Text`]; serde's own `Cow` impl always copies
//! inside an `Option`).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::error::{ErrorType, GatewayError, Wording};
use crate::model::request::{self as neutral, ChatRequest, Content, ContentPart, ToolChoice};
use crate::model::response::{self, FinishReason};

pub mod client;
mod request;
pub use request::{OutResponseFormat, OutToolCalls, OutTools, Request, StreamOptions};

/// A `chat.completion`: every field OpenAI sends, null where there is no value.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Completion<'a> {
    #[serde(default, borrow)]
    pub id: Cow<'a, str>,
    /// `"chat.completion"`.
    #[serde(skip_deserializing)]
    pub object: &'a str,
    #[serde(skip_deserializing)]
    pub created: u64,
    #[serde(default, borrow)]
    pub model: Cow<'a, str>,
    /// The gateway's.
    #[serde(skip_deserializing)]
    pub provider: &'a str,
    #[serde(skip_deserializing)]
    pub system_fingerprint: Option<&'a str>,
    #[serde(default, borrow)]
    pub choices: Vec<Choice<'a>>,
    #[serde(
        default,
        deserialize_with = "lenient_usage",
        skip_serializing_if = "Option::is_none"
    )]
    pub usage: Option<Usage>,
}

/// A choice of a `chat.completion`.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Choice<'a> {
    /// Its place among several (`n`); 0 when it says none.
    #[serde(default, deserialize_with = "index")]
    pub index: u32,
    /// Some servers send a `delta` here too.
    #[serde(default, borrow, alias = "delta")]
    pub message: Option<Message<'a>>,
    #[serde(skip_deserializing)]
    pub logprobs: (),
    #[serde(
        default,
        deserialize_with = "finish_reason",
        serialize_with = "write_finish_reason"
    )]
    pub finish_reason: Option<FinishReason>,
    /// Azure's output filter annotations (read, never written).
    #[serde(default, skip_serializing)]
    pub content_filter_results: Option<Value>,
}

impl Choice<'_> {
    /// The finish, with Azure's filter annotations folded in.
    pub fn finish(&self) -> Option<FinishReason> {
        finish(self.finish_reason, self.content_filter_results.as_ref())
    }
}

/// A completion's message.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Message<'a> {
    /// `"assistant"`.
    #[serde(skip_deserializing)]
    pub role: &'static str,
    #[serde(default, borrow, deserialize_with = "text")]
    pub content: Option<Cow<'a, str>>,
    /// DeepSeek's, vLLM's and others' reasoning text (`reasoning` on some).
    #[serde(
        default,
        borrow,
        alias = "reasoning",
        deserialize_with = "text",
        skip_serializing_if = "Option::is_none"
    )]
    pub reasoning_content: Option<Cow<'a, str>>,
    /// The reasoning by block (OpenRouter's format; written, not read).
    #[serde(skip_deserializing, skip_serializing_if = "<[_]>::is_empty")]
    pub reasoning_details: Vec<ReasoningDetail<'a>>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub refusal: Option<Cow<'a, str>>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall<'a>>>,
}

/// A tool call of a message, or a piece of one in a delta.
#[derive(Serialize, Deserialize, Debug, Default, Clone)]
pub struct ToolCall<'a> {
    /// Stream deltas name their call by index (none in a message).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub index: Option<u64>,
    #[serde(
        default,
        borrow,
        deserialize_with = "text",
        skip_serializing_if = "Option::is_none"
    )]
    pub id: Option<Cow<'a, str>>,
    /// `"function"`, in a message and a call's first piece.
    #[serde(
        rename = "type",
        skip_deserializing,
        skip_serializing_if = "Option::is_none"
    )]
    pub kind: Option<&'static str>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub function: Option<Function<'a>>,
}

#[derive(Serialize, Deserialize, Debug, Default, Clone)]
pub struct Function<'a> {
    #[serde(
        default,
        borrow,
        deserialize_with = "text",
        skip_serializing_if = "Option::is_none"
    )]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub arguments: Option<Cow<'a, str>>,
}

/// One entry of `reasoning_details` (OpenRouter's format): a block of
/// reasoning text with the vendor's signature, or an encrypted block. In a
/// stream, entries of one `index` are pieces of one block.
#[derive(Serialize, Debug, Default, Clone, Copy)]
pub struct ReasoningDetail<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<&'a str>,
    pub index: u32,
}

pub const DETAIL_TEXT: &str = "reasoning.text";
pub const DETAIL_ENCRYPTED: &str = "reasoning.encrypted";

/// Usage; the details only when there are any.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(skip_deserializing)]
    pub total_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<TokensDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<TokensDetails>,
}

/// `prompt_tokens_details` (cached, written to the cache) or
/// `completion_tokens_details` (reasoning).
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct TokensDetails {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

impl From<&response::Usage> for Usage {
    fn from(u: &response::Usage) -> Self {
        // Writes only when there were some (most answers have none).
        let written = u.cache_write_tokens.filter(|&n| n > 0);
        let prompt = (u.cached_tokens.is_some() || written.is_some()).then(|| TokensDetails {
            cached_tokens: Some(u.cached_tokens.unwrap_or(0)),
            cache_write_tokens: written,
            reasoning_tokens: None,
        });
        Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.prompt_tokens + u.completion_tokens,
            prompt_tokens_details: prompt,
            completion_tokens_details: u.reasoning_tokens.map(|n| TokensDetails {
                reasoning_tokens: Some(n),
                ..TokensDetails::default()
            }),
        }
    }
}

impl From<&Usage> for response::Usage {
    fn from(u: &Usage) -> Self {
        response::Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cached_tokens: u
                .prompt_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens),
            reasoning_tokens: u
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens),
            cache_write_tokens: u
                .prompt_tokens_details
                .as_ref()
                .and_then(|d| d.cache_write_tokens),
        }
    }
}

impl Usage {
    /// Usage as a reader takes it from a parsed value: none when it does not
    /// parse (vLLM and others send odd shapes).
    pub fn read(value: &Value) -> Option<response::Usage> {
        Usage::deserialize(value).ok().map(|u| (&u).into())
    }
}

/// A `chat.completion.chunk`. The chat surface writes its head (the members
/// before `choices`) once per stream and the rest per event; see
/// `surfaces::openai_chat`.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Chunk<'a> {
    #[serde(default, borrow)]
    pub id: Cow<'a, str>,
    /// `"chat.completion.chunk"`.
    #[serde(skip_deserializing)]
    pub object: &'a str,
    #[serde(default)]
    pub created: u64,
    #[serde(default, borrow)]
    pub model: Cow<'a, str>,
    #[serde(skip_deserializing)]
    pub provider: &'a str,
    #[serde(skip_deserializing)]
    pub system_fingerprint: Option<&'a str>,
    #[serde(default, borrow)]
    pub choices: Vec<ChunkChoice<'a>>,
    /// Absent, `null` (`Some(None)`: on every chunk but the last when the
    /// client asked for usage), or the usage; read, usage that does not
    /// parse is `Some(None)`.
    #[serde(
        default,
        deserialize_with = "present_usage",
        skip_serializing_if = "Option::is_none"
    )]
    pub usage: Option<Option<Usage>>,
    /// A vendor's error mid-stream (read, never written).
    #[serde(default, borrow, skip_serializing)]
    pub error: Option<ErrorBody<'a>>,
}

/// A choice of a chunk.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct ChunkChoice<'a> {
    /// Its place among several (`n`); 0 when it says none.
    #[serde(default, deserialize_with = "index")]
    pub index: u32,
    #[serde(default, borrow, alias = "message")]
    pub delta: Option<Delta<'a>>,
    #[serde(skip_deserializing)]
    pub logprobs: (),
    #[serde(
        default,
        deserialize_with = "finish_reason",
        serialize_with = "write_finish_reason"
    )]
    pub finish_reason: Option<FinishReason>,
    #[serde(default, skip_serializing)]
    pub content_filter_results: Option<Value>,
}

impl ChunkChoice<'_> {
    /// The finish, with Azure's filter annotations folded in.
    pub fn finish(&self) -> Option<FinishReason> {
        finish(self.finish_reason, self.content_filter_results.as_ref())
    }
}

/// What one chunk's choice carries: a message's fields, in pieces.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Delta<'a> {
    /// `"assistant"`, in the first chunk.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(
        default,
        borrow,
        deserialize_with = "text",
        skip_serializing_if = "Option::is_none"
    )]
    pub content: Option<Cow<'a, str>>,
    /// Reasoning text, where DeepSeek, vLLM and OpenRouter clients read it.
    #[serde(
        default,
        borrow,
        alias = "reasoning",
        deserialize_with = "text",
        skip_serializing_if = "Option::is_none"
    )]
    pub reasoning_content: Option<Cow<'a, str>>,
    /// The same text, and the signatures and encrypted blocks, by block.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub reasoning_details: Option<&'a [ReasoningDetail<'a>]>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Cow<'a, [ToolCall<'a>]>>,
    /// Absent, `null` (`Some(None)`: in the role chunk, as OpenAI sends
    /// it), or text.
    #[serde(
        default,
        borrow,
        deserialize_with = "present_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub refusal: Option<Option<Cow<'a, str>>>,
}

/// The gateway's error in OpenAI's envelope, `{"error": {"message", "type",
/// "code", "param", "provider", "request_id"}}` (no trailing newline): what
/// the OpenAI surfaces answer and stream.
pub fn render_error(error: &GatewayError, request_id: Option<&str>) -> Vec<u8> {
    #[derive(Serialize)]
    struct Body<'a> {
        message: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
        code: &'static str,
        param: Option<&'a str>,
        provider: Option<&'a str>,
        request_id: Option<&'a str>,
    }
    #[derive(Serialize)]
    struct Envelope<'a> {
        error: Body<'a>,
    }
    let message = error.worded(Wording::OpenAi);
    let envelope = Envelope {
        error: Body {
            message: &message,
            kind: error
                .error_type
                .map_or(error.code.error_type(), ErrorType::as_str),
            code: error.code.as_str(),
            param: error.param.as_deref(),
            provider: error.provider.as_deref(),
            request_id,
        },
    };
    serde_json::to_vec(&envelope).unwrap_or_else(|_| b"{\"error\":{}}".to_vec())
}

/// OpenAI's error envelope, `{"error": {...}}`, as a vendor's answer or
/// stream event holds it ([`render_error`] writes the gateway's).
#[derive(Deserialize, Debug)]
pub struct ErrorEnvelope<'a> {
    #[serde(borrow)]
    pub error: ErrorBody<'a>,
}

#[derive(Deserialize, Debug, Default)]
pub struct ErrorBody<'a> {
    #[serde(default, borrow)]
    pub message: Cow<'a, str>,
    #[serde(rename = "type", default, borrow, deserialize_with = "text")]
    pub kind: Option<Cow<'a, str>>,
    /// Vendors send numbers too: only text is a code.
    #[serde(default, borrow, deserialize_with = "string_or_none")]
    pub code: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub param: Option<Cow<'a, str>>,
    /// Azure: `{"code": "ResponsibleAIPolicyViolation", "content_filter_result": ...}`.
    #[serde(default, borrow)]
    pub innererror: Option<InnerError<'a>>,
}

#[derive(Deserialize, Debug, Default)]
pub struct InnerError<'a> {
    #[serde(default, borrow, deserialize_with = "text")]
    pub code: Option<Cow<'a, str>>,
}

/// Whether Azure's `content_filter_results` says a category was filtered.
pub fn content_filtered(results: &Value) -> bool {
    results.as_object().is_some_and(|results| {
        results
            .values()
            .any(|r| r.get("filtered") == Some(&Value::Bool(true)))
    })
}

/// Azure's filter striking is the finish, whatever `finish_reason` says.
fn finish(reason: Option<FinishReason>, filter: Option<&Value>) -> Option<FinishReason> {
    if filter.is_some_and(content_filtered) {
        return Some(FinishReason::ContentFilter);
    }
    reason
}

/// A JSON string, borrowed from the input unless it had escapes.
pub struct Text<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// Text or null (for `deserialize_with`).
pub(super) fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    Ok(Option::<Text>::deserialize(d)?.map(|Text(t)| t))
}

/// Text or null, present (`Some`) either way; a missing member is `None`
/// by `default`.
fn present_text<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<Cow<'de, str>>>, D::Error> {
    text(d).map(Some)
}

/// A value that must be there when its key is (no null).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A finish reason; one this gateway does not know is none.
fn finish_reason<'de, D: Deserializer<'de>>(d: D) -> Result<Option<FinishReason>, D::Error> {
    Ok(text(d)?.and_then(|reason| FinishReason::parse(&reason)))
}

/// A finish reason as this API says it: OpenAI's five values only (typed
/// clients refuse others), so a paused turn is `length`, an answer cut
/// short.
fn write_finish_reason<S: serde::Serializer>(
    reason: &Option<FinishReason>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match reason {
        Some(FinishReason::Paused) => s.serialize_str(FinishReason::Length.as_str()),
        Some(reason) => s.serialize_str(reason.as_str()),
        None => s.serialize_none(),
    }
}

fn string_or_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(Cow::Owned(s)),
        _ => None,
    })
}

/// A choice's index: 0 for anything but a number (as one choice was read
/// before choices were counted); a number too large for any is kept too
/// large, for the reader to refuse.
fn index<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Index {
        Number(u64),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Index::deserialize(d)? {
        Index::Number(n) => u32::try_from(n).unwrap_or(u32::MAX),
        Index::Other(_) => 0,
    })
}

/// Usage, none when it does not parse.
fn lenient_usage<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Usage>, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(Usage::deserialize(&value).ok())
}

/// A chunk's usage: `None` when null, else whether it parsed.
fn present_usage<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<Usage>>, D::Error> {
    let value = Value::deserialize(d)?;
    Ok((!value.is_null()).then(|| Usage::deserialize(&value).ok()))
}

// --- the request side ---------------------------------------------------
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tolerantly_and_borrows() {
        let chunk: Chunk = serde_json::from_str(
            r#"{"id":"c","object":7,"choices":[{"index":"x","delta":{"content":"hi","refusal":null,"tool_calls":[{"index":2,"function":{"arguments":"{\"a\""}}]},"logprobs":{},"finish_reason":"eos"}],"usage":"lots","provider":1,"provider":2}"#,
        )
        .unwrap();
        assert!(matches!(chunk.id, Cow::Borrowed("c")));
        let choice = &chunk.choices[0];
        assert_eq!(choice.finish(), None, "unknown finish reasons are none");
        let delta = choice.delta.as_ref().unwrap();
        assert!(matches!(delta.content, Some(Cow::Borrowed("hi"))));
        assert_eq!(delta.refusal, Some(None));
        let call = &delta.tool_calls.as_ref().unwrap()[0];
        assert_eq!(call.index, Some(2));
        let arguments = call.function.as_ref().unwrap().arguments.as_ref().unwrap();
        assert!(matches!(arguments, Cow::Owned(a) if a == "{\"a\""));
        assert!(matches!(chunk.usage, Some(None)), "present, unreadable");
        let chunk: Chunk = serde_json::from_str(r#"{"usage":null}"#).unwrap();
        assert!(chunk.usage.is_none());
        assert!(serde_json::from_str::<Chunk>(r#"{"id":"a","id":"b"}"#).is_err());
        assert!(serde_json::from_str::<Chunk>(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":null}]}}]}"#
        )
        .is_err());
    }

    #[test]
    fn finish_reasons_are_written_in_openais_five_values() {
        let written = |finish: Option<FinishReason>| {
            let choice = ChunkChoice {
                finish_reason: finish,
                ..ChunkChoice::default()
            };
            serde_json::to_value(choice).unwrap()["finish_reason"].clone()
        };
        assert_eq!(written(Some(FinishReason::ToolCalls)), "tool_calls");
        assert_eq!(written(Some(FinishReason::ContentFilter)), "content_filter");
        // A paused turn is `length` to chat clients (OpenAI's values only).
        assert_eq!(written(Some(FinishReason::Paused)), "length");
        assert_eq!(written(None), Value::Null);
    }

    #[test]
    fn errors_take_codes_of_any_type() {
        let e: ErrorEnvelope = serde_json::from_str(
            r#"{"error":{"message":"m","code":429,"innererror":{"code":"X"}}}"#,
        )
        .unwrap();
        assert_eq!(e.error.code, None);
        assert_eq!(e.error.innererror.unwrap().code.as_deref(), Some("X"));
        assert!(serde_json::from_str::<ErrorEnvelope>(r#"{"error":{"message":null}}"#).is_err());
    }
}
