//! A Messages client's body passed through: `model` replaced and what
//! Claude cannot verify left out, every other byte kept.

use super::*;

/// What a Messages client's body holds that Claude cannot verify, to be
/// left out of a pass-through (its only edits but `model`; the translated
/// path leaves the same out, [`claude_thinking`], [`thinking_blocks`]):
/// thinking blocks without a signature (the Messages surface's rendering
/// of another vendor's reasoning; Claude refuses them, "Invalid
/// `signature` in `thinking` block"), and `thinking` itself when the
/// history does not let Claude think ([`history_allows_thinking`]), e.g. a
/// tool call another vendor answered before a failover.
#[derive(Default)]
pub struct Unverifiable {
    thinking: bool,
    /// `messages` without the unsigned thinking blocks, when it had some.
    messages: Option<String>,
}

impl Unverifiable {
    pub fn of(req: &ChatRequest, body: &[u8]) -> Result<Self, GatewayError> {
        let unsigned = req.messages.iter().any(|m| {
            matches!(m, Message::Assistant { reasoning, .. }
                if reasoning.iter().any(|t| t.redacted.is_none() && t.signature.as_deref() == Some("")))
        });
        Ok(Self {
            thinking: req.reasoning.is_some() && !history_allows_thinking(req),
            messages: unsigned
                .then(|| without_unsigned_thinking(body))
                .transpose()?,
        })
    }

    /// The edit of one top-level member of the body, if it needs one.
    pub fn edit(&self, key: &str) -> Option<Member<'_>> {
        match key {
            "thinking" if self.thinking => Some(Member::Drop),
            "messages" => self.messages.as_deref().map(Member::Replace),
            _ => None,
        }
    }
}

/// A body's `messages` with every thinking block that has an empty
/// signature left out; the other messages and blocks as they came.
pub(super) fn without_unsigned_thinking(body: &[u8]) -> Result<String, GatewayError> {
    use serde_json::value::RawValue;
    #[derive(Deserialize)]
    struct Body<'a> {
        #[serde(borrow)]
        messages: &'a RawValue,
    }
    #[derive(Deserialize)]
    struct Turn<'a> {
        #[serde(borrow, default)]
        content: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Cow<'a, str>,
        #[serde(borrow, default)]
        signature: Option<Cow<'a, str>>,
    }
    let invalid =
        |e: String| GatewayError::invalid("messages", format!("invalid request body: {e}"));
    let unsigned = |block: &RawValue| {
        serde_json::from_str::<Kind>(block.get())
            .is_ok_and(|k| k.kind == "thinking" && k.signature.as_deref() == Some(""))
    };
    let text = std::str::from_utf8(body).map_err(|e| invalid(e.to_string()))?;
    let list = serde_json::from_str::<Body>(text)
        .map_err(|e| invalid(e.to_string()))?
        .messages
        .get();
    let messages: Vec<&RawValue> =
        serde_json::from_str(list).map_err(|e| invalid(e.to_string()))?;
    let mut out = String::with_capacity(list.len());
    // Where the previous message ended in `list`: the bytes between
    // messages are kept as they came.
    let mut prev = 0;
    for message in messages {
        let start = (message.get().as_ptr() as usize).saturating_sub(list.as_ptr() as usize);
        out.push_str(list.get(prev..start).unwrap_or_default());
        prev = start + message.get().len();
        let blocks = serde_json::from_str::<Turn>(message.get())
            .ok()
            .and_then(|t| t.content)
            .and_then(|c| serde_json::from_str::<Vec<&RawValue>>(c.get()).ok())
            .filter(|blocks| blocks.iter().any(|b| unsigned(b)));
        let Some(blocks) = blocks else {
            out.push_str(message.get());
            continue;
        };
        let kept: Vec<&str> = blocks
            .iter()
            .filter(|b| !unsigned(b))
            .map(|b| b.get())
            .collect();
        let content = format!("[{}]", kept.join(","));
        let edited = edit_members(message.get().as_bytes(), "", |key| match key {
            "content" => Member::Replace(&content),
            _ => Member::Keep,
        })?;
        out.push_str(&String::from_utf8(edited).map_err(|e| invalid(e.to_string()))?);
    }
    out.push_str(list.get(prev..).unwrap_or_default());
    Ok(out)
}

/// The client's body with its top-level `model` replaced by `model` and
/// what Claude cannot verify left out ([`Unverifiable`]), every other byte
/// kept.
pub(super) fn with_model(
    body: &[u8],
    model: &str,
    unverifiable: &Unverifiable,
) -> Result<Vec<u8>, GatewayError> {
    let replacement = serde_json::to_string(model)
        .map_err(|e| GatewayError::invalid("body", format!("invalid request body: {e}")))?;
    let mut found = false;
    let out = edit_members(body, "", |key| match key {
        "model" => {
            found = true;
            Member::Replace(&replacement)
        }
        _ => unverifiable.edit(key).unwrap_or(Member::Keep),
    })?;
    if !found {
        return Err(GatewayError::invalid(
            "body",
            "invalid request body: model: Field required",
        ));
    }
    Ok(out)
}
