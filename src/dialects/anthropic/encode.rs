//! The neutral request as Claude takes it: content blocks, the history's
//! signed thinking, the thinking budget and sampling rules (shared with
//! Bedrock, where Claude also runs).

use super::*;

/// One conversation turn of content blocks.
pub(super) type Turn<'a> = crate::wire::Turn<Block<'a>>;

pub(super) fn cache(cc: Option<&CacheControl>) -> Option<Cache<'_>> {
    cc.map(|cc| Cache {
        kind: "ephemeral",
        ttl: cc.claude_ttl(),
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

/// How Claude is to think: with a token budget (`thinking: {type:
/// enabled, budget_tokens}`), or adaptively (`thinking: {type: adaptive}`,
/// Claude 4.6 and later), at an effort (`output_config.effort`) or its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaudeThinking {
    Budget(u32),
    Adaptive(Option<Effort>),
}

impl ClaudeThinking {
    /// `thinking` as Claude takes it.
    pub fn config(self) -> ThinkingConfig {
        match self {
            ClaudeThinking::Budget(budget) => ThinkingConfig {
                kind: "enabled",
                budget_tokens: Some(budget),
            },
            ClaudeThinking::Adaptive(_) => ThinkingConfig {
                kind: "adaptive",
                budget_tokens: None,
            },
        }
    }

    /// `output_config.effort`: adaptive thinking's effort, as Claude names
    /// it (minimal is its `low`).
    pub fn effort(self) -> Option<&'static str> {
        match self {
            ClaudeThinking::Adaptive(Some(effort)) => Some(match effort {
                Effort::None | Effort::Minimal | Effort::Low => "low",
                Effort::Medium => "medium",
                Effort::High => "high",
                Effort::XHigh => "xhigh",
                Effort::Max => "max",
            }),
            _ => None,
        }
    }

    /// The output tokens thinking may take, which a request without an
    /// output limit gets on top of the answer's: the budget, or the
    /// effort's (medium's for Claude's own choice).
    pub fn tokens(self) -> u32 {
        match self {
            ClaudeThinking::Budget(budget) => budget,
            ClaudeThinking::Adaptive(effort) => effort
                .unwrap_or(Effort::Medium)
                .claude_budget()
                .unwrap_or(MIN_THINKING_BUDGET),
        }
    }
}

/// A Claude model's version (`claude-opus-4-6`, `claude-3-7-sonnet-…`,
/// `anthropic.claude-sonnet-4-20250514-v1:0`): the first two short numbers
/// after `claude-` (a date is no version number).
fn claude_version(model: &str) -> Option<(u32, u32)> {
    let rest = model.get(model.find("claude-")? + "claude-".len()..)?;
    let mut numbers = rest
        .split(['-', '.', ':', '@'])
        .filter(|t| !t.is_empty() && t.len() <= 2 && t.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|t| t.parse::<u32>().ok());
    let major = numbers.next()?;
    Some((major, numbers.next().unwrap_or(0)))
}

/// Claude thinks adaptively from 4.6 on ("Adaptive thinking"), and from
/// 4.7 only so (`enabled` is refused: "Use thinking.type.adaptive and
/// output_config.effort").
fn claude_adapts(model: &str) -> (bool, bool) {
    match claude_version(model) {
        Some(version) => (version >= (4, 6), version >= (4, 7)),
        None => (false, false),
    }
}

/// Claude's thinking for the request's reasoning controls, one rule
/// wherever Claude runs (Anthropic, Bedrock's Converse and InvokeModel).
/// From Claude 4.6 on, an effort, or none (a Messages client's adaptive
/// thinking, a chat client's `reasoning: {enabled: true}`), is adaptive
/// thinking at that effort, and a named budget too where the model takes
/// no other ([`claude_adapts`]). Otherwise a budget below the output limit
/// `max_tokens`, as Claude requires: an effort's lowered to fit, a named one
/// that does not fit refused; Claude's own choice (no effort, no budget)
/// thinks with what fits, or not at all when nothing does (only `enabled`
/// has a minimum); no limit: the caller makes room on top
/// ([`ClaudeThinking::tokens`]). Claude refuses thinking with a forced tool
/// call (400 naming `tool_choice`), and with a history it cannot verify
/// ([`history_allows_thinking`]): that one is answered without thinking,
/// as is a model from before extended thinking (`claude_thinks`). What
/// thinking refuses among the sampling controls is dropped
/// ([`claude_sampling`]).
pub fn claude_thinking(
    req: &ChatRequest,
    model: &str,
    max_tokens: Option<u32>,
) -> Result<Option<ClaudeThinking>, GatewayError> {
    let Some(reasoning) = req.reasoning.filter(|_| super::super::claude_thinks(model)) else {
        return Ok(None);
    };
    if !history_allows_thinking(req) {
        return Ok(None);
    }
    let named = reasoning.budget_tokens;
    if named.is_none() && reasoning.effort == Some(Effort::None) {
        return Ok(None);
    }
    if matches!(
        req.tool_choice,
        Some(ToolChoice::Required | ToolChoice::Function(_))
    ) {
        return Err(GatewayError::invalid(
            "tool_choice",
            "this provider cannot think and be forced to call a tool: use tool_choice auto, or no reasoning",
        ));
    }
    let (adapts, only_adapts) = claude_adapts(model);
    if adapts && (named.is_none() || only_adapts) {
        let effort = reasoning.effort.or(named.map(Effort::for_budget));
        return Ok(Some(ClaudeThinking::Adaptive(effort)));
    }
    let Some(budget) = reasoning.claude_budget() else {
        return Ok(None);
    };
    let limit_field = if req.max_completion_tokens.is_some() {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    if named.is_some() && budget < MIN_THINKING_BUDGET {
        return Err(GatewayError::invalid(
            "reasoning.max_tokens",
            format!("this provider thinks with at least {MIN_THINKING_BUDGET} tokens"),
        ));
    }
    // A budget the client named must fit; an effort's is lowered to fit.
    let budget = match (named, max_tokens) {
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
        // Claude's own choice may be not to think.
        if reasoning.effort.is_none() {
            return Ok(None);
        }
        return Err(GatewayError::invalid(
            limit_field,
            format!(
                "this provider thinks with at least {MIN_THINKING_BUDGET} tokens: {limit_field} must be above that"
            ),
        ));
    }
    Ok(Some(ClaudeThinking::Budget(budget)))
}

/// `max_tokens` for Claude, the same wherever it runs: the client's limit;
/// without one, the provider's `default_max_tokens` for the answer, on top
/// of what thinking may take ([`ClaudeThinking::tokens`]).
pub fn claude_max_tokens(
    client_max: Option<u32>,
    thinking: Option<ClaudeThinking>,
    target: &Target,
) -> u32 {
    let answer = target.provider.default_max_tokens;
    match (client_max, thinking) {
        (Some(max), _) => max,
        (None, Some(thinking)) => thinking.tokens().saturating_add(answer),
        (None, None) => answer,
    }
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
