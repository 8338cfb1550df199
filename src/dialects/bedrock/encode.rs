//! What the bedrock dialect makes of the neutral request for Converse:
//! content blocks, cache points, tools, and each model family's reasoning
//! controls.

use super::*;

impl<'a> Block<'a> {
    pub(super) fn cache_point(cache: &'a CacheControl) -> Self {
        Block::CachePoint(CachePoint {
            kind: "default",
            ttl: cache.claude_ttl(),
        })
    }

    /// A history reasoning block Claude takes back: signed or redacted
    /// (unsigned text, e.g. another vendor's, is dropped).
    pub(super) fn reasoning(thinking: &'a Thinking) -> Option<Self> {
        match (&thinking.redacted, &thinking.signature) {
            (Some(data), _) => Some(Block::ReasoningContent(ReasoningBlock::RedactedContent(
                data,
            ))),
            (None, Some(signature)) if !signature.is_empty() => {
                Some(Block::ReasoningContent(ReasoningBlock::ReasoningText {
                    text: &thinking.text,
                    signature,
                }))
            }
            (None, _) => None,
        }
    }
}

/// What the endpoint's model can take of the request's reasoning and
/// caching controls.
#[derive(Clone, Copy)]
pub(super) struct Abilities {
    /// Prompt caching (`cachePoint`): Claude and Amazon Nova models.
    pub(super) cache: bool,
    /// Reasoning blocks in the history: Claude.
    pub(super) reasoning: bool,
}

/// Text parts as blocks, each followed by its cache point when it has one
/// and the model caches.
pub(super) fn text_blocks(content: &Content, can: Abilities) -> Vec<Block<'_>> {
    match content {
        Content::Text(t) if t.is_empty() => Vec::new(),
        Content::Text(t) => vec![Block::Text(Cow::Borrowed(t))],
        Content::Parts(parts) => {
            let mut blocks = Vec::with_capacity(parts.len());
            for part in parts {
                if let ContentPart::Text { text, .. } = part {
                    if !text.is_empty() {
                        blocks.push(Block::Text(Cow::Borrowed(text)));
                    }
                }
                push_cache_point(&mut blocks, part.cache_control(), can);
            }
            blocks
        }
    }
}

/// A cache point after the blocks so far, when asked for, the model caches
/// and there is something to cache.
pub(super) fn push_cache_point<'a>(
    blocks: &mut Vec<Block<'a>>,
    cache: Option<&'a CacheControl>,
    can: Abilities,
) {
    let after_content = blocks
        .last()
        .is_some_and(|b| !matches!(b, Block::CachePoint(_)));
    if let Some(cache) = cache.filter(|_| can.cache && after_content) {
        blocks.push(Block::cache_point(cache));
    }
}

/// Converse takes image bytes only (or S3 locations): no URLs.
pub(super) fn image_format(media_type: &str) -> Option<&'static str> {
    match media_type {
        "image/png" => Some("png"),
        "image/jpeg" | "image/jpg" => Some("jpeg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        _ => None,
    }
}

pub(super) fn user_blocks(
    content: &Content,
    i: usize,
    can: Abilities,
) -> Result<Vec<Block<'_>>, GatewayError> {
    let Content::Parts(parts) = content else {
        return Ok(text_blocks(content, can));
    };
    let mut blocks = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        match part {
            ContentPart::Text { text, .. } if text.is_empty() => {}
            ContentPart::Text { text, .. } => blocks.push(Block::Text(Cow::Borrowed(text))),
            ContentPart::ImageUrl { image_url, .. } => {
                let param = || format!("messages[{i}].content[{j}].image_url.url");
                let image = match image_url.parse() {
                    Ok(Image::Base64 { media_type, data }) => image_format(media_type)
                        .map(|format| Block::Image {
                            format,
                            source: ImageSource { bytes: data },
                        })
                        .ok_or_else(|| {
                            GatewayError::invalid(
                                param(),
                                format!("this provider does not accept {media_type} images"),
                            )
                        })?,
                    Ok(Image::Url(_)) => {
                        return Err(GatewayError::invalid(
                            param(),
                            "this provider accepts images only as base64 data URLs",
                        ))
                    }
                    Err(e) => return Err(GatewayError::invalid(param(), e)),
                };
                blocks.push(image);
            }
            ContentPart::Document(_) => return Err(crate::dialects::no_documents(i, j)),
        }
        push_cache_point(&mut blocks, part.cache_control(), can);
    }
    Ok(blocks)
}

/// Converse refuses toolUse/toolResult blocks without a `toolConfig` ("The
/// toolConfig field must be defined when using toolUse and toolResult content
/// blocks."), and a toolConfig needs at least one tool. When the client sent
/// no `tools` but its history holds tool calls, the tools are declared again
/// from the names the history used, each with the most permissive schema
/// Converse takes (`{"type":"object"}`); without tools the client did not
/// offer any, so no `toolChoice` is set.
pub(super) fn history_tools(req: &ChatRequest) -> Option<Value> {
    let mut names: Vec<&str> = Vec::new();
    for m in &req.messages {
        if let Message::Assistant { tool_calls, .. } = m {
            for call in tool_calls {
                if !names.contains(&call.function.name.as_str()) {
                    names.push(&call.function.name);
                }
            }
        }
    }
    if names.is_empty() {
        // Only results (their calls are not in the history): one placeholder.
        names.push("tool");
    }
    let tools: Vec<Value> = names
        .iter()
        .map(|n| json!({"toolSpec": {"name": n, "inputSchema": {"json": {"type": "object"}}}}))
        .collect();
    Some(json!({ "tools": tools }))
}

/// Claude refuses `temperature` and `top_p` together (Sonnet 4.5, Haiku 4.5,
/// Opus 4.1 and later); the gateway keeps `temperature` and drops `top_p`
/// for every Claude model.
pub fn is_claude(model: &str) -> bool {
    model.contains("claude") || model.starts_with("anthropic.")
}

pub(super) fn tool_config(
    req: &ChatRequest,
    history_has_tools: bool,
    can: Abilities,
) -> Option<Value> {
    if req.tools.is_empty() {
        return if history_has_tools {
            history_tools(req)
        } else {
            None
        };
    }
    // Converse has no "none": leave the tools out, unless the conversation
    // already holds tool blocks (Converse then requires the tool config).
    let choice = match &req.tool_choice {
        Some(ToolChoice::None) if !history_has_tools => return None,
        Some(ToolChoice::None) | Some(ToolChoice::Auto) | None => None,
        Some(ToolChoice::Required) => Some(json!({"any": {}})),
        Some(ToolChoice::Function(name)) => Some(json!({"tool": {"name": name}})),
    };
    let mut tools: Vec<Value> = Vec::with_capacity(req.tools.len());
    for t in &req.tools {
        let mut spec = json!({
            "name": t.function.name,
            "inputSchema": {"json": t.function.parameters.clone()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}))},
        });
        if let (Some(d), Some(obj)) = (&t.function.description, spec.as_object_mut()) {
            obj.insert("description".into(), Value::String(d.clone()));
        }
        tools.push(json!({ "toolSpec": spec }));
        if let Some(cache) = t.cache_control.as_ref().filter(|_| can.cache) {
            // `{"cachePoint": ...}` as a block serialises; it cannot fail.
            tools.extend(serde_json::to_value(Block::cache_point(cache)).ok());
        }
    }
    let mut config = json!({ "tools": tools });
    if let (Some(choice), Some(obj)) = (choice, config.as_object_mut()) {
        obj.insert("toolChoice".into(), choice);
    }
    Some(config)
}

/// Claude's extended thinking (`additionalModelRequestFields.thinking`,
/// docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-extended-thinking.html):
/// Claude's one rule wherever it runs ([`anthropic::claude_thinking`]), its
/// budget below `maxTokens` (an effort's lowered to fit) and the sampling
/// controls thinking refuses dropped ([`anthropic::claude_sampling`]).
/// Other Bedrock models (but Nova 2, see [`nova_reasoning`]) take no
/// reasoning controls through Converse's common fields: asking for
/// reasoning is a 400.
pub(super) fn thinking(
    req: &ChatRequest,
    model: &str,
) -> Result<Option<anthropic::ClaudeThinking>, GatewayError> {
    let Some(ask) = req.reasoning else {
        return Ok(None);
    };
    if is_claude(model) {
        return anthropic::claude_thinking(req, model, req.max_output_tokens());
    }
    if ask.claude_budget().is_none() {
        return Ok(None);
    }
    Err(GatewayError::invalid(
        if ask.budget_tokens.is_some() {
            "reasoning.max_tokens"
        } else {
            "reasoning_effort"
        },
        "this Bedrock model takes no reasoning controls",
    ))
}

/// Amazon Nova 2's extended thinking
/// (docs.aws.amazon.com/nova/latest/nova2-userguide/extended-thinking.html):
/// `additionalModelRequestFields.reasoningConfig {type: enabled,
/// maxReasoningEffort}`, low, medium or high (minimal is low, xhigh and max
/// are high; `none`: off,
/// Nova's default). Nova takes no token budget: a budget alone becomes the
/// effort it amounts to ([`Effort::for_budget`]).
pub(super) fn nova_reasoning(req: &ChatRequest) -> Result<Option<Value>, GatewayError> {
    let Some(ask) = req.reasoning else {
        return Ok(None);
    };
    let effort = match ask.effort_or_from_budget() {
        Some(Effort::None) => return Ok(None),
        Some(Effort::Minimal | Effort::Low) => "low",
        Some(Effort::Medium) | None => "medium",
        Some(Effort::High | Effort::XHigh | Effort::Max) => "high",
    };
    Ok(Some(
        json!({"reasoningConfig": {"type": "enabled", "maxReasoningEffort": effort}}),
    ))
}

/// Whether a Bedrock model id is Amazon Nova 2's (`amazon.nova-2-lite-v1:0`,
/// with or without a region prefix).
pub(super) fn is_nova_2(model: &str) -> bool {
    model.contains("amazon.nova-2-")
}

/// Claude's own request members that Converse has no field for, in
/// `additionalModelRequestFields`: `thinking` (and adaptive thinking's
/// `output_config.effort`), and `top_k` (AWS's Claude parameters page;
/// [`anthropic::claude_sampling`] leaves it out with thinking on, as Claude
/// requires).
pub(super) fn claude_fields(
    thinking: Option<anthropic::ClaudeThinking>,
    top_k: Option<u32>,
) -> Option<Value> {
    let mut fields = Map::new();
    if let Some(thinking) = thinking {
        fields.extend(serde_json::to_value(thinking.config()).map(|c| ("thinking".into(), c)));
        if let Some(effort) = thinking.effort() {
            fields.insert("output_config".into(), json!({ "effort": effort }));
        }
    }
    if let Some(k) = top_k {
        fields.insert("top_k".into(), k.into());
    }
    (!fields.is_empty()).then_some(Value::Object(fields))
}
