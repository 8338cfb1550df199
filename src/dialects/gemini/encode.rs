//! The neutral request in Gemini's terms: thinking, turns and parts, tool
//! results.

use super::*;

/// Whether the model takes built-in tools (Google Search) beside function
/// declarations: Gemini 3 only (ai.google.dev/gemini-api/docs/tool-combination,
/// "supported for Gemini 3 models only"; Gemini 2.x refuses the mix with or
/// without the flag), so the flag is sent only there, only when mixing.
pub(super) fn combines_tools(model: &str) -> bool {
    model.contains("gemini-3")
}

/// The request's reasoning as Gemini's `thinkingConfig`
/// (ai.google.dev/gemini-api/docs/thinking). Gemini 3 takes a
/// `thinkingLevel` (Pro: low, high; Flash: minimal, low, medium, high; it
/// cannot stop thinking, so effort `none` is its lowest level, and an effort
/// a model lacks is the next one up); a token budget is sent as
/// `thinkingBudget`, which Gemini 3 still takes. Gemini 2.5 takes a
/// `thinkingBudget`: an effort becomes 0 (none; 2.5 Pro cannot stop, so its
/// minimum 128), 512 (minimal), 1024 (low), 8192 (medium), 24576 (high,
/// xhigh; max: the most the model takes, Pro 32768, Flash 24576).
/// `includeThoughts` is set whenever the model is to think, so the thought
/// summaries come back as reasoning.
pub(super) fn thinking_config(ask: ReasoningAsk, model: &str) -> ThinkingConfig<'static> {
    let gemini3 = model.contains("gemini-3");
    let pro = model.contains("-pro");
    let off = ask.effort == Some(Effort::None) && ask.budget_tokens.is_none();
    let (thinking_budget, thinking_level) = match (ask.budget_tokens, ask.effort) {
        (Some(budget), _) => (Some(budget), None),
        (None, None) => (None, None),
        (None, Some(effort)) if gemini3 => (None, Some(thinking_level(effort, pro))),
        (None, Some(effort)) => (Some(thinking_budget(effort, pro)), None),
    };
    ThinkingConfig {
        include_thoughts: (!off || (gemini3 || pro)).then_some(true),
        thinking_budget: thinking_budget.map(i64::from),
        thinking_level: thinking_level.map(Text::from),
    }
}

pub(super) fn thinking_level(effort: Effort, pro: bool) -> &'static str {
    match (effort, pro) {
        (Effort::None | Effort::Minimal | Effort::Low, true) => "low",
        (Effort::Medium | Effort::High | Effort::XHigh | Effort::Max, true)
        | (Effort::High | Effort::XHigh | Effort::Max, false) => "high",
        (Effort::None | Effort::Minimal, false) => "minimal",
        (Effort::Low, false) => "low",
        (Effort::Medium, false) => "medium",
    }
}

pub(super) fn thinking_budget(effort: Effort, pro: bool) -> u32 {
    match effort {
        Effort::None if pro => 128,
        Effort::None => 0,
        Effort::Minimal => 512,
        Effort::Low => 1024,
        Effort::Medium => 8192,
        Effort::Max if pro => 32768,
        Effort::High | Effort::XHigh | Effort::Max => 24576,
    }
}

pub(super) fn text_part(text: &str) -> Option<Part<'_>> {
    (!text.is_empty()).then_some(Part {
        text: Some(text.into()),
        ..Part::default()
    })
}

pub(super) fn text_parts(content: &Content) -> Vec<Part<'_>> {
    match content {
        Content::Text(t) => text_part(t).into_iter().collect(),
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text, .. } => text_part(text),
                ContentPart::ImageUrl { .. } | ContentPart::Document(_) => None,
            })
            .collect(),
    }
}

pub(super) fn user_parts(content: &Content, i: usize) -> Result<Vec<Part<'_>>, GatewayError> {
    let Content::Parts(parts) = content else {
        return Ok(text_parts(content));
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        match part {
            ContentPart::Text { text, .. } => out.extend(text_part(text)),
            ContentPart::ImageUrl { image_url, .. } => match image_url.parse() {
                Ok(Image::Base64 { media_type, data }) => out.push(Part {
                    inline_data: Some(Blob {
                        mime_type: media_type.into(),
                        data: data.into(),
                    }),
                    ..Part::default()
                }),
                Ok(Image::Url(_)) => {
                    return Err(GatewayError::invalid(
                        format!("messages[{i}].content[{j}].image_url.url"),
                        "this provider takes images only as base64 data URLs",
                    ))
                }
                Err(e) => {
                    return Err(GatewayError::invalid(
                        format!("messages[{i}].content[{j}].image_url.url"),
                        e,
                    ))
                }
            },
            ContentPart::Document(_) => return Err(crate::dialects::no_documents(i, j)),
        }
    }
    Ok(out)
}

/// The images of a tool result, as inline data (URLs refused as in user
/// turns).
pub(super) fn result_images(content: &Content, i: usize) -> Result<Vec<Blob<'_>>, GatewayError> {
    if !content.has_image() {
        return Ok(Vec::new());
    }
    // Read as a user turn's parts are (the same refusals, by position).
    let parts = user_parts(content, i)?;
    Ok(parts.into_iter().filter_map(|p| p.inline_data).collect())
}

/// Appends parts, merging consecutive turns of one role (Gemini wants all
/// function responses to one model turn in one user turn).
pub(super) fn push_turn<'a>(turns: &mut Vec<Turn<'a>>, role: &'static str, parts: Vec<Part<'a>>) {
    if parts.is_empty() {
        return;
    }
    match turns.last_mut() {
        Some(last) if last.role.as_deref() == Some(role) => last.parts.extend(parts),
        _ => turns.push(Turn {
            role: Some(role.into()),
            parts,
        }),
    }
}

/// `functionResponse.response` must be an object: a JSON object result as
/// is, anything else under `result`; a failed tool's output under `error`
/// (Gemini's key for "error details", FunctionResponse in the API reference).
pub(super) fn function_response(content: &Content, is_error: bool) -> Value {
    let text = content.text_lines();
    let key = match serde_json::from_str::<Value>(&text) {
        Ok(v @ Value::Object(_)) if !is_error => return v,
        _ if is_error => "error",
        _ => "result",
    };
    let mut wrapped = Map::new();
    wrapped.insert(key.into(), Value::String(text));
    Value::Object(wrapped)
}

/// A penalty the client set (OpenAI's `presence_penalty` and
/// `frequency_penalty`, carried in `extra`) as Gemini's `presencePenalty`
/// and `frequencyPenalty`; 0, the default of both APIs, is left out (some
/// Gemini models refuse any penalty: "Penalty is not enabled for models/…").
pub(super) fn penalty(req: &ChatRequest, name: &str) -> Option<f64> {
    req.extra
        .get(name)
        .and_then(Value::as_f64)
        .filter(|&p| p != 0.0)
}
