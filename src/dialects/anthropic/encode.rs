//! The neutral request as Claude takes it: content blocks, the history's
//! signed thinking, the thinking budget and sampling rules (shared with
//! Bedrock, where Claude also runs).

use super::*;

/// One conversation turn of content blocks.
pub(super) type Turn<'a> = crate::wire::Turn<Block<'a>>;

pub(super) fn cache(cc: Option<&CacheControl>) -> Option<Cache<'_>> {
    cc.map(|cc| Cache {
        kind: "ephemeral",
        ttl: cc.ttl.as_deref(),
    })
}

/// Anthropic's server-side web search: the answer's `server_tool_use` and
/// `web_search_tool_result` blocks are not carried back (the text that
/// cites them is).
pub(super) fn web_search_tool(search: &WebSearch) -> WebSearchTool<'_> {
    WebSearchTool {
        kind: "web_search_20250305",
        name: "web_search",
        allowed_domains: &search.allowed_domains,
        user_location: search.user_location.as_ref().map(|l| SearchLocation {
            kind: "approximate",
            city: l.city.as_deref(),
            region: l.region.as_deref(),
            country: l.country.as_deref(),
            timezone: l.timezone.as_deref(),
        }),
    }
}

/// The blocks of a message's content: text (with its cache breakpoints)
/// and, where `rich`, images and documents; `at` locates the message for
/// errors (`messages[i]`).
pub(super) fn blocks<'a>(
    content: &'a Content,
    at: &str,
    rich: bool,
) -> Result<Vec<Block<'a>>, GatewayError> {
    let parts = match content {
        Content::Text(t) if t.is_empty() => return Ok(Vec::new()),
        Content::Text(t) => {
            return Ok(vec![Block::Text {
                text: Cow::Borrowed(t),
                cache_control: None,
            }])
        }
        Content::Parts(parts) => parts,
    };
    let mut blocks = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        match part {
            ContentPart::Text { text, .. } if text.is_empty() => {}
            ContentPart::Text {
                text,
                cache_control,
            } => blocks.push(Block::Text {
                text: Cow::Borrowed(text),
                cache_control: cache(cache_control.as_ref()),
            }),
            ContentPart::ImageUrl { .. } | ContentPart::Document(_) if !rich => {}
            ContentPart::ImageUrl {
                image_url,
                cache_control,
            } => {
                let source = match image_url.parse() {
                    Ok(Image::Base64 { media_type, data }) => {
                        ImageSource::Base64 { media_type, data }
                    }
                    Ok(Image::Url(url)) => ImageSource::Url { url },
                    Err(e) => {
                        return Err(GatewayError::invalid(
                            format!("{at}.content[{j}].image_url.url"),
                            e,
                        ))
                    }
                };
                blocks.push(Block::Image {
                    source,
                    cache_control: cache(cache_control.as_ref()),
                });
            }
            ContentPart::Document(doc) => {
                let source = match &doc.source {
                    DocumentSource::Base64 { media_type, data } => {
                        DocSource::Base64 { media_type, data }
                    }
                    DocumentSource::Url(url) => DocSource::Url { url },
                    DocumentSource::Text(data) => DocSource::Text {
                        media_type: "text/plain",
                        data,
                    },
                };
                blocks.push(Block::Document {
                    source,
                    title: doc.title.as_deref(),
                    cache_control: cache(doc.cache_control.as_ref()),
                });
            }
        }
    }
    Ok(blocks)
}

/// A tool result's content: a string unless it holds images or documents.
pub(super) fn result_content<'a>(
    content: &'a Content,
    at: &str,
) -> Result<ResultContent<'a>, GatewayError> {
    let rich = matches!(content, Content::Parts(parts)
        if parts.iter().any(|p| !matches!(p, ContentPart::Text { cache_control: None, .. })));
    if rich {
        blocks(content, at, true).map(ResultContent::Blocks)
    } else {
        Ok(ResultContent::Text(content.text()))
    }
}

/// The history's reasoning as Anthropic takes it back: signed thinking and
/// redacted blocks; unsigned text (another vendor's) cannot be verified by
/// Anthropic and is left out.
pub(super) fn thinking_blocks(reasoning: &[Thinking]) -> impl Iterator<Item = Block<'_>> {
    reasoning
        .iter()
        .filter_map(|t| match (&t.redacted, &t.signature) {
            (Some(data), _) => Some(Block::RedactedThinking { data: data.into() }),
            (None, Some(signature)) if !signature.is_empty() => Some(Block::Thinking {
                thinking: t.text.as_str().into(),
                signature: signature.into(),
            }),
            (None, _) => None,
        })
}

/// Whether the history lets Claude think: a tool-use turn last among the
/// assistant turns must start with its signed thinking (Anthropic refuses
/// it otherwise, 400 "Expected `thinking` or `redacted_thinking`"), which a
/// turn another vendor answered never has. An empty signature is none (the
/// Messages surface gives unsigned reasoning one).
pub fn history_allows_thinking(req: &ChatRequest) -> bool {
    let last_assistant = req.messages.iter().rev().find_map(|m| match m {
        Message::Assistant {
            reasoning,
            tool_calls,
            ..
        } => Some((reasoning, tool_calls)),
        _ => None,
    });
    last_assistant.is_none_or(|(reasoning, calls)| {
        calls.is_empty()
            || reasoning.first().is_some_and(|t| {
                t.redacted.is_some() || t.signature.as_deref().is_some_and(|s| !s.is_empty())
            })
    })
}

/// Claude's extended thinking budget for the request's reasoning controls,
/// one rule wherever Claude runs (Anthropic, Bedrock's Converse and
/// InvokeModel). The budget stays below the output limit `max_tokens` as
/// Claude requires (an effort's budget is lowered to fit; a budget the
/// client named that does not fit, or a limit too small for any thinking,
/// is refused; no limit: the caller makes room on top of the budget).
/// Claude refuses thinking with a forced tool call (400 naming
/// `tool_choice`), and with a history it cannot verify
/// ([`history_allows_thinking`]): that one is answered without thinking,
/// as is a model from before extended thinking (`claude_thinks`). What
/// thinking refuses among the sampling controls is dropped
/// ([`claude_sampling`]).
pub fn claude_thinking(
    req: &ChatRequest,
    model: &str,
    max_tokens: Option<u32>,
) -> Result<Option<u32>, GatewayError> {
    let Some(reasoning) = req.reasoning.filter(|_| super::super::claude_thinks(model)) else {
        return Ok(None);
    };
    if !history_allows_thinking(req) {
        return Ok(None);
    }
    let on =
        reasoning.budget_tokens.is_some() || reasoning.effort.is_some_and(|e| e != Effort::None);
    if on
        && matches!(
            req.tool_choice,
            Some(ToolChoice::Required | ToolChoice::Function(_))
        )
    {
        return Err(GatewayError::invalid(
            "tool_choice",
            "this provider cannot think and be forced to call a tool: use tool_choice auto, or no reasoning",
        ));
    }
    let Some(budget) = reasoning.claude_budget() else {
        return Ok(None);
    };
    let limit_field = if req.max_completion_tokens.is_some() {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    if reasoning.budget_tokens.is_some() && budget < MIN_THINKING_BUDGET {
        return Err(GatewayError::invalid(
            "reasoning.max_tokens",
            format!("this provider thinks with at least {MIN_THINKING_BUDGET} tokens"),
        ));
    }
    // A budget the client named must fit; an effort's is lowered to fit.
    let budget = match (reasoning.budget_tokens, max_tokens) {
        (Some(_), Some(max)) if budget >= max => {
            return Err(GatewayError::invalid(
                limit_field,
                format!("{limit_field} must be greater than the thinking budget"),
            ))
        }
        (None, Some(max)) => budget.min(max.saturating_sub(1)),
        _ => budget,
    };
    if budget < MIN_THINKING_BUDGET {
        return Err(GatewayError::invalid(
            limit_field,
            format!(
                "this provider thinks with at least {MIN_THINKING_BUDGET} tokens: {limit_field} must be above that"
            ),
        ));
    }
    Ok(Some(budget))
}

/// Claude's sampling controls as it takes them, thinking or not. With
/// thinking on Claude refuses `temperature` and `top_k`, and `top_p` below
/// 0.95 ("Extended thinking": feature compatibility): they are dropped
/// then. Current Claude models refuse `temperature` and `top_p` together
/// ("cannot both be specified for this model"): temperature wins. OpenAI's
/// temperature goes up to 2, Claude's up to 1.
pub struct Sampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
}

pub fn claude_sampling(req: &ChatRequest, thinking: bool) -> Sampling {
    let sampling = !thinking;
    Sampling {
        temperature: req.temperature.map(|t| t.min(1.0)).filter(|_| sampling),
        top_p: req
            .top_p
            .filter(|_| req.temperature.is_none() || !sampling)
            .filter(|&p| sampling || p >= 0.95),
        top_k: req.top_k.filter(|_| sampling),
    }
}

pub(super) const EMPTY_SCHEMA: &str = r#"{"type":"object","properties":{}}"#;
