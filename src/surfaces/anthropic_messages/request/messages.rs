//! The Messages request's `messages` and their content blocks (text,
//! images, documents, tool calls and results, thinking), read strictly
//! with the client's paths (`messages.0.content.2`).

use super::*;

/// A block type's members (Anthropic refuses any other).
const TEXT: &[&str] = &["type", "text", "cache_control", "citations"];
const IMAGE: &[&str] = &["type", "source", "cache_control", "transformations"];
const DOCUMENT: &[&str] = &[
    "type",
    "source",
    "title",
    "context",
    "citations",
    "cache_control",
];
const TOOL_RESULT: &[&str] = &[
    "type",
    "tool_use_id",
    "content",
    "is_error",
    "cache_control",
    "toolset_name",
];
const TOOL_USE: &[&str] = &[
    "type",
    "id",
    "name",
    "input",
    "cache_control",
    "caller",
    "toolset_name",
];

impl Parser {
    /// A text block (its citations, which only Anthropic reads, are
    /// checked as a list and otherwise left to it).
    pub(super) fn text(
        &mut self,
        block: wire::Block,
        at: &str,
    ) -> Result<ContentPart, GatewayError> {
        let block = only(block, at, TEXT)?;
        self.native_if_set(&block.citations, "citations", at);
        Ok(ContentPart::Text {
            text: string(block.text, "text", at)?,
            cache_control: cache_control(block.cache_control, at)?,
        })
    }

    pub(super) fn image(
        &mut self,
        block: wire::Block,
        at: &str,
    ) -> Result<ContentPart, GatewayError> {
        let block = only(block, at, IMAGE)?;
        self.native_if_set(&block.transformations, "transformations", at);
        let source_at = format!("{at}.source");
        let source = block.source.ok_or_else(|| required(&source_at))?;
        let (kind, source) = block_type(source, &source_at)?;
        let url =
            match &*kind {
                "base64" => {
                    let s = only(source, &source_at, &["type", "media_type", "data"])?;
                    let media_type = string(s.media_type, "media_type", &source_at)?;
                    if !["image/jpeg", "image/png", "image/gif", "image/webp"]
                        .contains(&media_type.as_str())
                    {
                        return Err(invalid(
                        &format!("{source_at}.media_type"),
                        "Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'",
                    ));
                    }
                    format!(
                        "data:{media_type};base64,{}",
                        string(s.data, "data", &source_at)?
                    )
                }
                "url" => {
                    let s = only(source, &source_at, &["type", "url"])?;
                    let url = string(s.url, "url", &source_at)?;
                    if !(url.starts_with("https://") || url.starts_with("http://")) {
                        return Err(invalid(
                            &format!("{source_at}.url"),
                            "must be an http(s) URL",
                        ));
                    }
                    url
                }
                "file" => {
                    self.native(source_at);
                    String::new()
                }
                _ => return Err(invalid(
                    &source_at,
                    "Input tag does not match any of the expected tags: 'base64', 'url', 'file'",
                )),
            };
        Ok(ContentPart::ImageUrl {
            image_url: ImageUrl { url, detail: None },
            cache_control: cache_control(block.cache_control, at)?,
        })
    }

    pub(super) fn document(
        &mut self,
        block: wire::Block,
        at: &str,
    ) -> Result<ContentPart, GatewayError> {
        let block = only(block, at, DOCUMENT)?;
        self.native_if_set(&block.context, "context", at);
        self.native_if_set(&block.citations, "citations", at);
        let source_at = format!("{at}.source");
        let source = block.source.ok_or_else(|| required(&source_at))?;
        let (kind, source) = block_type(source, &source_at)?;
        let source = match &*kind {
            "base64" => {
                let s = only(source, &source_at, &["type", "media_type", "data"])?;
                DocumentSource::Base64 {
                    media_type: string(s.media_type, "media_type", &source_at)?,
                    data: string(s.data, "data", &source_at)?,
                }
            }
            "url" => {
                let s = only(source, &source_at, &["type", "url"])?;
                DocumentSource::Url(string(s.url, "url", &source_at)?)
            }
            "text" => {
                let s = only(source, &source_at, &["type", "media_type", "data"])?;
                DocumentSource::Text(string(s.data, "data", &source_at)?)
            }
            "content" | "file" => {
                self.native(source_at);
                DocumentSource::Text(String::new())
            }
            _ => {
                return Err(invalid(
                    &source_at,
                    "Input tag does not match any of the expected tags: 'base64', 'content', 'file', 'text', 'url'",
                ))
            }
        };
        Ok(ContentPart::Document(Document {
            source,
            title: optional_string(block.title, "title", at)?,
            cache_control: cache_control(block.cache_control, at)?,
        }))
    }

    pub(super) fn tool_result(
        &mut self,
        block: wire::Block,
        at: &str,
    ) -> Result<Message, GatewayError> {
        let block = only(block, at, TOOL_RESULT)?;
        self.native_if_set(&block.toolset_name, "toolset_name", at);
        let content = match block.content {
            None | Some(Loose::Null) => Content::Text(String::new()),
            Some(Loose::Str(s)) => Content::Text(s.into_owned()),
            Some(Loose::Array(blocks)) => {
                let mut parts = Vec::with_capacity(blocks.len());
                for (j, b) in blocks.into_iter().enumerate() {
                    let at = format!("{at}.content.{j}");
                    let (kind, b) = block_type(b, &at)?;
                    match &*kind {
                        "text" => parts.push(self.text(b, &at)?),
                        "image" => parts.push(self.image(b, &at)?),
                        "document" => parts.push(self.document(b, &at)?),
                        "search_result" | "tool_reference" => self.native(at),
                        other => {
                            return Err(invalid(
                                &at,
                                format!("Input tag '{other}' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'search_result'"),
                            ))
                        }
                    }
                }
                Content::Parts(parts)
            }
            Some(_) => {
                return Err(invalid(
                    &format!("{at}.content"),
                    "Input should be a valid string or a valid list",
                ))
            }
        };
        Ok(Message::Tool {
            content,
            tool_call_id: string(block.tool_use_id, "tool_use_id", at)?,
            is_error: optional_bool(block.is_error, "is_error", at)?.unwrap_or(false),
            cache_control: cache_control(block.cache_control, at)?,
        })
    }

    /// An assistant's tool call.
    fn tool_use(&mut self, block: wire::Block, at: &str) -> Result<ToolCall, GatewayError> {
        let b = only(block, at, TOOL_USE)?;
        self.native_if_set(&b.toolset_name, "toolset_name", at);
        // Called by the model itself is every vendor's way;
        // by a server tool (programmatic calling) only Anthropic's.
        let direct = |c: &Any<wire::Caller>| matches!(c, Loose::Object(wire::Caller { kind: Some(Loose::Str(k)), .. }) if *k == "direct");
        if b.caller
            .as_ref()
            .is_some_and(|c| !c.is_null() && !direct(c))
        {
            self.native(format!("{at}.caller"));
        }
        let input = match b.input {
            Some(Loose::Object(v)) => v.to_string(),
            _ => {
                return Err(invalid(
                    &format!("{at}.input"),
                    "Input should be a valid dictionary",
                ))
            }
        };
        Ok(ToolCall {
            id: string(b.id, "id", at)?,
            kind: "function".into(),
            function: FunctionCall {
                name: string(b.name, "name", at)?,
                arguments: input,
            },
        })
    }

    pub(super) fn message(
        &mut self,
        m: Any<wire::Message>,
        i: usize,
        out: &mut Vec<Message>,
    ) -> Result<(), GatewayError> {
        let at = format!("messages.{i}");
        let m = object(m, &at, &["role", "content"])?;
        let role = string(m.role, "role", &at)?;
        let content = m
            .content
            .ok_or_else(|| required(&format!("{at}.content")))?;
        let blocks = match content {
            Loose::Str(s) => {
                let content = Content::Text(s.into_owned());
                out.push(match role.as_str() {
                    "user" => Message::User {
                        content,
                        name: None,
                    },
                    "assistant" => assistant(Some(content), Vec::new(), Vec::new()),
                    "system" => Message::System {
                        content,
                        name: None,
                    },
                    _ => return Err(bad_role(&at)),
                });
                return Ok(());
            }
            Loose::Array(blocks) => blocks,
            _ => {
                return Err(invalid(
                    &format!("{at}.content"),
                    "Input should be a valid string or a valid list",
                ))
            }
        };
        match role.as_str() {
            "user" => {
                let mut turn = UserTurn::default();
                for (j, block) in blocks.into_iter().enumerate() {
                    let at = format!("{at}.content.{j}");
                    let (kind, block) = block_type(block, &at)?;
                    match &*kind {
                        "text" => turn.parts.push(self.text(block, &at)?),
                        "image" => turn.parts.push(self.image(block, &at)?),
                        "document" => turn.parts.push(self.document(block, &at)?),
                        "tool_result" => turn.results.push(self.tool_result(block, &at)?),
                        "tool_use" | "thinking" | "redacted_thinking" => {
                            return Err(invalid(
                                &at,
                                "this block can only be in `assistant` messages",
                            ))
                        }
                        other if NATIVE_BLOCKS.contains(&other) => self.native(at),
                        other => return Err(unknown_block(&at, other)),
                    }
                }
                out.extend(turn.results);
                if !turn.parts.is_empty() {
                    out.push(Message::User {
                        content: Content::Parts(turn.parts),
                        name: None,
                    });
                }
            }
            "assistant" => {
                let mut parts = Vec::new();
                let mut reasoning = Vec::new();
                let mut calls = Vec::new();
                for (j, block) in blocks.into_iter().enumerate() {
                    let at = format!("{at}.content.{j}");
                    let (kind, block) = block_type(block, &at)?;
                    match &*kind {
                        "text" => parts.push(self.text(block, &at)?),
                        "tool_use" => calls.push(self.tool_use(block, &at)?),
                        "thinking" => {
                            let b = only(block, &at, &["type", "thinking", "signature"])?;
                            reasoning.push(Thinking {
                                text: string(b.thinking, "thinking", &at)?,
                                signature: Some(string(b.signature, "signature", &at)?),
                                redacted: None,
                            });
                        }
                        "redacted_thinking" => {
                            let b = only(block, &at, &["type", "data"])?;
                            reasoning.push(Thinking {
                                text: String::new(),
                                signature: None,
                                redacted: Some(string(b.data, "data", &at)?),
                            });
                        }
                        "image" | "document" | "tool_result" => {
                            return Err(invalid(&at, "this block can only be in `user` messages"))
                        }
                        other if NATIVE_BLOCKS.contains(&other) => self.native(at),
                        other => return Err(unknown_block(&at, other)),
                    }
                }
                let content = match parts.as_slice() {
                    [] => None,
                    [ContentPart::Text {
                        cache_control: None,
                        ..
                    }] => match parts.pop() {
                        Some(ContentPart::Text { text, .. }) => Some(Content::Text(text)),
                        part => part.map(|part| Content::Parts(vec![part])),
                    },
                    _ => Some(Content::Parts(parts)),
                };
                out.push(assistant(content, reasoning, calls));
            }
            "system" => {
                // A system message between the turns: text blocks only.
                let parts = self.text_blocks(blocks, &format!("{at}.content"))?;
                out.push(Message::System {
                    content: Content::Parts(parts),
                    name: None,
                });
            }
            _ => return Err(bad_role(&at)),
        }
        Ok(())
    }
}

fn assistant(content: Option<Content>, reasoning: Vec<Thinking>, calls: Vec<ToolCall>) -> Message {
    Message::Assistant {
        content,
        reasoning,
        tool_calls: calls,
        refusal: None,
        name: None,
    }
}

fn bad_role(at: &str) -> GatewayError {
    invalid(
        &format!("{at}.role"),
        "Input should be 'user', 'assistant' or 'system'",
    )
}

fn unknown_block(at: &str, kind: &str) -> GatewayError {
    invalid(
        at,
        format!("Input tag '{kind}' found using 'type' does not match any of the expected tags"),
    )
}
