//! Chat Completions' `messages`: each message by its role, its content
//! (a string or parts), tool calls, and the reasoning a client sends back
//! (`reasoning_content`, `reasoning_details`), read strictly.

use super::*;

/// `messages`, with the index of a bad element in the error.
pub(super) struct Messages(pub(super) Vec<Message>);

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Messages;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of messages")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Messages, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                loop {
                    if out.len() >= MAX_MESSAGES {
                        return Err(de::Error::custom(format!(
                            "at most {MAX_MESSAGES} messages are accepted"
                        )));
                    }
                    let i = out.len();
                    match at(Index(i), seq.next_element::<Message>())? {
                        Some(m) => out.push(m),
                        None => return Ok(Messages(out)),
                    }
                }
            }
        }
        d.deserialize_seq(V)
    }
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum MessageField {
    Role,
    Content,
    Name,
    ToolCalls,
    Refusal,
    ToolCallId,
    ReasoningContent,
    ReasoningDetails,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Message;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a message object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
                let mut role = None;
                // `content: null` is an assistant message's way to say "none".
                let mut content: Option<Option<Content>> = None;
                let mut name: Option<Option<String>> = None;
                let mut tool_calls: Option<Option<Vec<ToolCall>>> = None;
                let mut refusal: Option<Option<String>> = None;
                let mut tool_call_id: Option<String> = None;
                let mut reasoning_content: Option<Option<String>> = None;
                let mut reasoning_details: Option<Option<ReasoningDetails>> = None;
                while let Some(field) = map.next_key::<MessageField>()? {
                    match field {
                        MessageField::Role => once(&mut role, "role", map.next_value::<Role>())?,
                        MessageField::Content => once(&mut content, "content", map.next_value())?,
                        MessageField::Name => once(&mut name, "name", map.next_value())?,
                        MessageField::ToolCalls => {
                            once(&mut tool_calls, "tool_calls", map.next_value())?
                        }
                        MessageField::Refusal => once(&mut refusal, "refusal", map.next_value())?,
                        MessageField::ToolCallId => {
                            once(&mut tool_call_id, "tool_call_id", map.next_value())?
                        }
                        MessageField::ReasoningContent => once(
                            &mut reasoning_content,
                            "reasoning_content",
                            map.next_value(),
                        )?,
                        MessageField::ReasoningDetails => once(
                            &mut reasoning_details,
                            "reasoning_details",
                            map.next_value(),
                        )?,
                        // Fields we do not model (e.g. an echoed `annotations`).
                        MessageField::Other => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                let name = name.flatten();
                let required = |content: Option<Option<Content>>| match content {
                    Some(Some(content)) => Ok(content),
                    Some(None) => Err(de::Error::custom(
                        "content: must be a string or an array of content parts, not null",
                    )),
                    None => Err(missing("content")),
                };
                Ok(match role.ok_or_else(|| missing("role"))? {
                    Role::System => Message::System {
                        content: required(content)?,
                        name,
                    },
                    Role::Developer => Message::Developer {
                        content: required(content)?,
                        name,
                    },
                    Role::User => Message::User {
                        content: required(content)?,
                        name,
                    },
                    Role::Assistant => Message::Assistant {
                        content: content.flatten(),
                        reasoning: thinking(
                            reasoning_content.flatten(),
                            reasoning_details.flatten(),
                        ),
                        tool_calls: tool_calls.flatten().unwrap_or_default(),
                        refusal: refusal.flatten(),
                        name,
                    },
                    Role::Tool => {
                        let content = required(content)?;
                        // A breakpoint on any part of a result is one after the result.
                        let cache_control = match &content {
                            Content::Parts(parts) => {
                                parts.iter().rev().find_map(|p| p.cache_control().cloned())
                            }
                            Content::Text(_) => None,
                        };
                        Message::Tool {
                            content,
                            tool_call_id: tool_call_id.ok_or_else(|| missing("tool_call_id"))?,
                            is_error: false,
                            cache_control,
                        }
                    }
                })
            }
        }
        d.deserialize_map(V)
    }
}

/// An assistant message's reasoning: its `reasoning_details` blocks when
/// it has them (they carry the signatures), else `reasoning_content` as one
/// unsigned block.
fn thinking(content: Option<String>, details: Option<ReasoningDetails>) -> Vec<Thinking> {
    match details {
        Some(ReasoningDetails(blocks)) if !blocks.is_empty() => blocks,
        _ => content
            .filter(|t| !t.is_empty())
            .map(|text| Thinking {
                text,
                ..Thinking::default()
            })
            .into_iter()
            .collect(),
    }
}

/// OpenRouter's `reasoning_details`: `{"type": "reasoning.text", "text",
/// "signature"}`, `{"type": "reasoning.encrypted", "data"}` and
/// `{"type": "reasoning.summary", "summary"}` blocks. Entries with the
/// `index` of the one before are pieces of one block (what a stream's
/// deltas give, appended as they came), joined here.
struct ReasoningDetails(Vec<Thinking>);

#[derive(Deserialize)]
struct ReasoningDetail {
    #[serde(rename = "type", deserialize_with = "type_field")]
    kind: DetailKind,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    data: Option<String>,
    /// Which block a piece belongs to (OpenRouter's `id` and `format` are ignored).
    #[serde(default)]
    index: Option<u64>,
}

#[derive(Deserialize, Clone, Copy, PartialEq)]
enum DetailKind {
    #[serde(rename = "reasoning.text")]
    Text,
    #[serde(rename = "reasoning.summary")]
    Summary,
    #[serde(rename = "reasoning.encrypted")]
    Encrypted,
}

/// More reasoning blocks than an answer has.
const MAX_REASONING_BLOCKS: usize = 4096;

impl<'de> Deserialize<'de> for ReasoningDetails {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ReasoningDetails;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of reasoning details")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut blocks: Vec<Thinking> = Vec::new();
                let mut last: Option<(DetailKind, u64)> = None;
                let mut i = 0;
                while let Some(detail) = at(Index(i), seq.next_element::<ReasoningDetail>())? {
                    let text = detail.text.or(detail.summary).unwrap_or_default();
                    let key = detail.index.map(|n| (detail.kind, n));
                    let piece = match detail.kind {
                        DetailKind::Text | DetailKind::Summary => Thinking {
                            text,
                            signature: detail.signature,
                            redacted: None,
                        },
                        DetailKind::Encrypted => Thinking {
                            redacted: Some(detail.data.ok_or_else(|| {
                                de::Error::custom(format!("[{i}].data: missing field"))
                            })?),
                            ..Thinking::default()
                        },
                    };
                    let full = blocks.len() >= MAX_REASONING_BLOCKS;
                    match blocks.last_mut() {
                        Some(block) if key.is_some() && key == last => {
                            block.text.push_str(&piece.text);
                            if piece.signature.is_some() {
                                block.signature = piece.signature;
                            }
                            if piece.redacted.is_some() {
                                block.redacted = piece.redacted;
                            }
                        }
                        _ if full => {
                            return Err(de::Error::custom(format!(
                                "at most {MAX_REASONING_BLOCKS} reasoning blocks are accepted"
                            )))
                        }
                        _ => blocks.push(piece),
                    }
                    last = key;
                    i += 1;
                }
                Ok(ReasoningDetails(blocks))
            }
        }
        d.deserialize_seq(V)
    }
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum PartKind {
    Text,
    ImageUrl,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum PartField {
    Type,
    Text,
    ImageUrl,
    CacheControl,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for ContentPart {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ContentPart;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a content part object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ContentPart, A::Error> {
                let mut kind = None;
                let mut text: Option<String> = None;
                let mut image_url: Option<ImageUrl> = None;
                let mut cache: Option<Option<CacheControlIn>> = None;
                while let Some(field) = map.next_key::<PartField>()? {
                    match field {
                        PartField::Type => once(&mut kind, "type", map.next_value::<PartKind>())?,
                        PartField::Text => once(&mut text, "text", map.next_value())?,
                        PartField::ImageUrl => once(&mut image_url, "image_url", map.next_value())?,
                        PartField::CacheControl => {
                            once(&mut cache, "cache_control", map.next_value())?
                        }
                        PartField::Other => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                let cache_control = cache.flatten().map(CacheControlIn::into_model);
                Ok(match kind.ok_or_else(|| missing("type"))? {
                    PartKind::Text => ContentPart::Text {
                        text: text.ok_or_else(|| missing("text"))?,
                        cache_control,
                    },
                    PartKind::ImageUrl => ContentPart::ImageUrl {
                        image_url: image_url.ok_or_else(|| missing("image_url"))?,
                        cache_control,
                    },
                })
            }
        }
        d.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
                Ok(Content::Text(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Content, E> {
                Ok(Content::Text(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut parts = Vec::new();
                while let Some(part) = at(Index(parts.len()), seq.next_element())? {
                    parts.push(part);
                }
                Ok(Content::Parts(parts))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Named {
            #[serde(rename = "type")]
            kind: ToolKind,
            function: NamedFunction,
        }
        #[derive(Deserialize)]
        struct NamedFunction {
            name: String,
        }
        let Strict(value) = Strict::deserialize(d)?;
        match value {
            Value::String(s) => match s.as_str() {
                "none" => Ok(ToolChoice::None),
                "auto" => Ok(ToolChoice::Auto),
                "required" => Ok(ToolChoice::Required),
                other => Err(de::Error::custom(format!(
                    "unknown value '{other}', expected none, auto, required or a function object"
                ))),
            },
            obj @ Value::Object(_) => {
                let named: Named = serde_json::from_value(obj).map_err(de::Error::custom)?;
                let ToolKind::Function = named.kind;
                Ok(ToolChoice::Function(named.function.name))
            }
            _ => Err(de::Error::custom("expected a string or an object")),
        }
    }
}
