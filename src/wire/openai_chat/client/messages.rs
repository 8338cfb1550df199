//! Chat Completions' `messages`: each message by its role, its content
//! (a string or parts), tool calls, and the reasoning a client sends back
//! (`reasoning_content`, `reasoning_details`).

use super::*;

/// A message, by its role.
pub enum Message<'a> {
    System {
        content: Content<'a>,
        name: Option<Cow<'a, str>>,
    },
    Developer {
        content: Content<'a>,
        name: Option<Cow<'a, str>>,
    },
    User {
        content: Content<'a>,
        name: Option<Cow<'a, str>>,
    },
    Assistant {
        content: Option<Content<'a>>,
        reasoning_content: Option<Cow<'a, str>>,
        reasoning_details: Option<Vec<ReasoningBlock<'a>>>,
        tool_calls: Vec<ToolCall<'a>>,
        refusal: Option<Cow<'a, str>>,
        name: Option<Cow<'a, str>>,
    },
    Tool {
        content: Content<'a>,
        tool_call_id: Cow<'a, str>,
    },
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

/// Text or null, as a member's value.
struct OptText<'a>(Option<Cow<'a, str>>);

impl<'de> Deserialize<'de> for OptText<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        text(d).map(OptText)
    }
}

impl<'de> Deserialize<'de> for Message<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Message<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a message object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message<'de>, A::Error> {
                let mut role = None;
                // `content: null` is an assistant message's way to say "none".
                let mut content: Option<Option<Content>> = None;
                let mut name: Option<OptText> = None;
                let mut tool_calls: Option<Option<Vec<ToolCall>>> = None;
                let mut refusal: Option<OptText> = None;
                let mut tool_call_id: Option<Text> = None;
                let mut reasoning_content: Option<OptText> = None;
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
                let name = name.and_then(|n| n.0);
                let required = |content: Option<Option<Content<'de>>>| match content {
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
                        reasoning_content: reasoning_content.and_then(|t| t.0),
                        reasoning_details: reasoning_details.flatten().map(|d| d.0),
                        tool_calls: tool_calls.flatten().unwrap_or_default(),
                        refusal: refusal.and_then(|t| t.0),
                        name,
                    },
                    Role::Tool => Message::Tool {
                        content: required(content)?,
                        tool_call_id: tool_call_id.ok_or_else(|| missing("tool_call_id"))?.0,
                    },
                })
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
pub struct ToolCall<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(rename = "type", default = "function_type", borrow)]
    pub kind: Cow<'a, str>,
    #[serde(borrow)]
    pub function: FunctionCall<'a>,
}

fn function_type() -> Cow<'static, str> {
    Cow::Borrowed("function")
}

#[derive(Deserialize)]
pub struct FunctionCall<'a> {
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(borrow)]
    pub arguments: Cow<'a, str>,
}

/// A block of reasoning a client sends back: its text and signature, or
/// the encrypted form.
#[derive(Default)]
pub struct ReasoningBlock<'a> {
    pub text: Cow<'a, str>,
    pub signature: Option<Cow<'a, str>>,
    pub redacted: Option<Cow<'a, str>>,
}

/// OpenRouter's `reasoning_details`: `{"type": "reasoning.text", "text",
/// "signature"}`, `{"type": "reasoning.encrypted", "data"}` and
/// `{"type": "reasoning.summary", "summary"}` blocks. Entries with the
/// `index` of the one before are pieces of one block (what a stream's
/// deltas give, appended as they came), joined here.
struct ReasoningDetails<'a>(Vec<ReasoningBlock<'a>>);

#[derive(Deserialize)]
struct ReasoningDetail<'a> {
    #[serde(rename = "type", deserialize_with = "type_field")]
    kind: DetailKind,
    #[serde(default, borrow, deserialize_with = "text")]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    summary: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    signature: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    data: Option<Cow<'a, str>>,
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

impl<'de> Deserialize<'de> for ReasoningDetails<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ReasoningDetails<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of reasoning details")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut blocks: Vec<ReasoningBlock> = Vec::new();
                let mut last: Option<(DetailKind, u64)> = None;
                let mut i = 0;
                while let Some(detail) = at(Index(i), seq.next_element::<ReasoningDetail>())? {
                    let text = detail.text.or(detail.summary).unwrap_or_default();
                    let key = detail.index.map(|n| (detail.kind, n));
                    let piece = match detail.kind {
                        DetailKind::Text | DetailKind::Summary => ReasoningBlock {
                            text,
                            signature: detail.signature,
                            redacted: None,
                        },
                        DetailKind::Encrypted => ReasoningBlock {
                            redacted: Some(detail.data.ok_or_else(|| {
                                de::Error::custom(format!("[{i}].data: missing field"))
                            })?),
                            ..ReasoningBlock::default()
                        },
                    };
                    let full = blocks.len() >= MAX_REASONING_BLOCKS;
                    match blocks.last_mut() {
                        Some(block) if key.is_some() && key == last => {
                            block.text.to_mut().push_str(&piece.text);
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

/// Message content: a string or a list of typed parts.
pub enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<ContentPart<'a>>),
}

pub enum ContentPart<'a> {
    Text {
        text: Cow<'a, str>,
        cache_control: Option<CacheControlIn>,
    },
    ImageUrl {
        image_url: ImageUrl<'a>,
        cache_control: Option<CacheControlIn>,
    },
}

#[derive(Deserialize)]
pub struct ImageUrl<'a> {
    #[serde(borrow)]
    pub url: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub detail: Option<Cow<'a, str>>,
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
    PromptCacheBreakpoint,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for ContentPart<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ContentPart<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a content part object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<ContentPart<'de>, A::Error> {
                let mut kind = None;
                let mut text: Option<Text> = None;
                let mut image_url: Option<ImageUrl> = None;
                let mut cache: Option<Option<CacheControlIn>> = None;
                let mut breakpoint: Option<Option<Breakpoint>> = None;
                while let Some(field) = map.next_key::<PartField>()? {
                    match field {
                        PartField::Type => once(&mut kind, "type", map.next_value::<PartKind>())?,
                        PartField::Text => once(&mut text, "text", map.next_value())?,
                        PartField::ImageUrl => once(&mut image_url, "image_url", map.next_value())?,
                        PartField::CacheControl => {
                            once(&mut cache, "cache_control", map.next_value())?
                        }
                        PartField::PromptCacheBreakpoint => {
                            once(&mut breakpoint, "prompt_cache_breakpoint", map.next_value())?
                        }
                        PartField::Other => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                // Anthropic's breakpoint or OpenAI's: one breakpoint either way.
                let cache_control = breakpoint
                    .flatten()
                    .map(CacheControlIn::from)
                    .or(cache.flatten());
                Ok(match kind.ok_or_else(|| missing("type"))? {
                    PartKind::Text => ContentPart::Text {
                        text: text.ok_or_else(|| missing("text"))?.0,
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

impl<'de> Deserialize<'de> for Content<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Content<'de>, E> {
                Ok(Content::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Content<'de>, E> {
                Ok(Content::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Content<'de>, E> {
                Ok(Content::Text(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content<'de>, A::Error> {
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
