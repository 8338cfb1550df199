//! Claude on Bedrock through InvokeModel (`POST /model/{modelId}/invoke`
//! and `/invoke-with-response-stream`) with Anthropic's own Messages body:
//! what a Bedrock provider with `claude_invoke` sends its Claude models
//! (the Bedrock dialect decides, `bedrock.rs`).
//!
//! A thin layer over the Anthropic dialect (AWS, "Anthropic Claude Messages
//! API", request and response; `InvokeModelWithResponseStream`,
//! `ResponseStream`, `PayloadPart`):
//! - the body is Anthropic's (a Messages client's own, its bytes kept; the
//!   Anthropic encoder's for clients of other APIs) without `model` and
//!   `stream`, which the path says, and with `anthropic_version:
//!   bedrock-2023-05-31`;
//! - the answer is Anthropic's message object as it is;
//! - the stream is AWS event-stream `chunk` events whose payload is
//!   `{"bytes": <base64 of one Anthropic event's JSON>}`, unwrapped here and
//!   read by the Anthropic dialect's own stream handler (a Messages client
//!   gets them as Anthropic's SSE); exceptions are Bedrock's frames, and
//!   errors Bedrock's bodies, decoded by the Bedrock dialect.

use std::borrow::Cow;

use serde::Deserialize;

use super::anthropic::{Anthropic, AnthropicEvents, Unverifiable};
use super::{edit_members, unparseable, Dialect, Events, Member, Target};
use crate::error::GatewayError;
use crate::formats::sse::SseParser;
use crate::model::request::ChatRequest;
use crate::model::stream::EventWriter;

/// The Messages API version Bedrock takes, in the body.
pub const ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// The member every InvokeModel body starts with.
const VERSION_MEMBER: &str = r#""anthropic_version":"bedrock-2023-05-31""#;

/// A body in Anthropic's Messages format as InvokeModel takes it: every
/// byte kept but `model` and `stream` (and what Claude cannot verify,
/// [`Unverifiable`]), `anthropic_version` added.
pub fn invoke_body(
    messages_body: &[u8],
    beta: Option<Vec<u8>>,
    unverifiable: &Unverifiable,
) -> Result<Vec<u8>, GatewayError> {
    let mut first = VERSION_MEMBER.to_owned();
    if let Some(betas) = beta
        .as_deref()
        .map(anthropic_beta)
        .filter(|b| !b.is_empty())
    {
        let list = serde_json::to_string(&betas)
            .map_err(|e| GatewayError::invalid("anthropic-beta", e.to_string()))?;
        first.push_str(",\"anthropic_beta\":");
        first.push_str(&list);
    }
    edit_members(messages_body, &first, |key| match key {
        // The client's own `anthropic_beta` gives way to its header's.
        "model" | "stream" => Member::Drop,
        "anthropic_beta" if first.len() > VERSION_MEMBER.len() => Member::Drop,
        _ => unverifiable.edit(key).unwrap_or(Member::Keep),
    })
}

/// The betas of an `anthropic-beta` header (comma-separated names), as
/// InvokeModel takes them in the body; what is not text is left out.
fn anthropic_beta(header: &[u8]) -> Vec<&str> {
    std::str::from_utf8(header)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .collect()
}

/// The neutral request as the Anthropic dialect encodes it, for InvokeModel.
/// Bedrock runs no web search (Anthropic's server tool is Anthropic's):
/// the request goes without it (`Dialect::web_search` of Bedrock: false).
pub fn encode_body(req: &ChatRequest, target: &Target) -> Result<Vec<u8>, GatewayError> {
    let without_search;
    let req = match req.web_search {
        Some(_) => {
            without_search = ChatRequest {
                web_search: None,
                ..req.clone()
            };
            &without_search
        }
        None => req,
    };
    invoke_body(
        &Anthropic.encode_request(req, target)?.body,
        None,
        &Unverifiable::default(),
    )
}

/// Whether a Bedrock answer is Anthropic's message (InvokeModel), not a
/// Converse answer: its `type` says so.
pub fn is_message(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<Cow<'a, str>>,
    }
    serde_json::from_slice::<Kind>(body).is_ok_and(|k| k.kind.as_deref() == Some("message"))
}

/// The `chunk` events of an InvokeModel stream, each handed to the
/// Anthropic dialect's stream handler.
#[derive(Default)]
pub struct Chunks {
    events: AnthropicEvents,
    seen: bool,
}

/// A `chunk` event's payload (`PayloadPart`; Bedrock pads it with `p`).
#[derive(Deserialize)]
struct PayloadPart<'a> {
    #[serde(borrow)]
    bytes: Cow<'a, str>,
}

/// The Anthropic event's `type`, its SSE event name.
#[derive(Deserialize)]
struct EventType<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

impl Chunks {
    /// One `chunk` event: the Anthropic event it carries, as if it had come
    /// from Anthropic's own stream.
    pub fn on_chunk(
        &mut self,
        payload: &[u8],
        w: &mut EventWriter,
        out: &mut Vec<u8>,
    ) -> Result<(), GatewayError> {
        self.seen = true;
        let part: PayloadPart =
            serde_json::from_slice(payload).map_err(|e| unparseable("stream event", e))?;
        let bytes = crate::formats::base64::decode(&part.bytes)
            .ok_or_else(|| unparseable("stream event", "its bytes are not base64"))?;
        let data = std::str::from_utf8(&bytes).map_err(|e| unparseable("stream event", e))?;
        let event: EventType =
            serde_json::from_str(data).map_err(|e| unparseable("stream event", e))?;
        Events::<SseParser>::on_event(&mut self.events, (&event.kind, data), w, out)
    }

    /// Whether the stream was InvokeModel's: it ends with Anthropic's
    /// `message_stop`, not with Converse's stop reason.
    pub fn seen(&self) -> bool {
        self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invoke_body_keeps_every_byte_but_model_and_stream() {
        let body = br#"{ "model" : "claude-x",
  "max_tokens": 10, "stream":true ,"messages":[{"role":"user","content":"hi \"there\""}],
  "system": [{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}] }"#;
        let out =
            String::from_utf8(invoke_body(body, None, &Unverifiable::default()).unwrap()).unwrap();
        assert_eq!(
            out,
            r#"{"anthropic_version":"bedrock-2023-05-31",
  "max_tokens": 10,"messages":[{"role":"user","content":"hi \"there\""}],
  "system": [{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}] }"#
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["anthropic_version"], ANTHROPIC_VERSION);
        assert!(v.get("model").is_none() && v.get("stream").is_none());
        // Only the version when nothing else is left.
        assert_eq!(
            invoke_body(br#"{"model":"m"}"#, None, &Unverifiable::default()).unwrap(),
            br#"{"anthropic_version":"bedrock-2023-05-31"}"#
        );
        // Dropped side by side: the dropped members' separators go with them.
        assert_eq!(
            invoke_body(
                br#"{"a":1 , "model":"m","stream":false,  "b":[2,3] }"#,
                None,
                &Unverifiable::default()
            )
            .unwrap(),
            br#"{"anthropic_version":"bedrock-2023-05-31","a":1,  "b":[2,3] }"#
        );
        assert_eq!(
            invoke_body(
                br#"{"a":{"model":"inner"},"model":"m"}"#,
                None,
                &Unverifiable::default()
            )
            .unwrap(),
            br#"{"anthropic_version":"bedrock-2023-05-31","a":{"model":"inner"}}"#
        );
        assert!(invoke_body(b"[1]", None, &Unverifiable::default()).is_err());
        // The client's `anthropic-beta` header: the body's list, in its place.
        assert_eq!(
            invoke_body(
                br#"{"model":"m","anthropic_beta":["old"],"max_tokens":1}"#,
                Some(b" beta-a, beta-b ,".to_vec()),
                &Unverifiable::default()
            )
            .unwrap(),
            br#"{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["beta-a","beta-b"],"max_tokens":1}"#
        );
        assert!(invoke_body(b"{\"a\":", None, &Unverifiable::default()).is_err());
        // What Claude could not verify left out: `thinking` for another
        // vendor's tool turn, and unsigned thinking blocks.
        let body = r#"{"model":"m", "thinking":{"type":"enabled","budget_tokens":1024},"max_tokens":2000,"messages":[{"role":"user","content":"q"},
            {"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""}, {"type":"tool_use","id":"t1","name":"f","input":{}}]},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]}]}"#;
        let req = crate::surfaces::anthropic_messages::request::parse(body.as_bytes()).unwrap();
        let unverifiable = Unverifiable::of(&req, body.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(invoke_body(body.as_bytes(), None, &unverifiable).unwrap()).unwrap(),
            body.replace(
                r#""model":"m", "thinking":{"type":"enabled","budget_tokens":1024},"#,
                r#""anthropic_version":"bedrock-2023-05-31","#
            )
            .replace(r#"{"type":"thinking","thinking":"t","signature":""}, "#, "")
        );
    }

    #[test]
    fn tells_a_message_from_a_converse_answer() {
        assert!(is_message(
            br#"{"id":"msg_1","type":"message","content":[]}"#
        ));
        assert!(!is_message(
            br#"{"output":{"message":{}},"stopReason":"end_turn"}"#
        ));
        assert!(!is_message(b"not json"));
    }
}
