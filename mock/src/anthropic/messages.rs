//! Anthropic messages: each content block checked like the API does, and
//! what a message contributes to the prompt.

use serde_json::Value;

use crate::answer::claude_signature;
use crate::dialect::Failure;

use super::request::{breakpoints, invalid, str_field};

/// Content block types we accept in messages (thinking blocks may be
/// echoed back in assistant turns when `thinking` is on).
const BLOCK_TYPES: [&str; 8] = [
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    // A server tool's call, sent back to continue a paused turn.
    "server_tool_use",
];

/// The keys of each content block type (docs.anthropic.com/en/api/messages,
/// "content" block schemas); others are refused "Extra inputs are not permitted".
fn block_keys(ty: &str) -> &'static [&'static str] {
    match ty {
        "text" => &["type", "text", "cache_control", "citations"],
        "image" => &["type", "source", "cache_control", "transformations"],
        "document" => &[
            "type",
            "source",
            "cache_control",
            "citations",
            "context",
            "title",
        ],
        "tool_use" => &[
            "type",
            "id",
            "name",
            "input",
            "cache_control",
            "caller",
            "toolset_name",
        ],
        "tool_result" => &[
            "type",
            "tool_use_id",
            "content",
            "is_error",
            "cache_control",
            "toolset_name",
        ],
        "thinking" => &["type", "thinking", "signature"],
        "redacted_thinking" => &["type", "data"],
        "server_tool_use" => &["type", "id", "name", "input", "cache_control"],
        _ => &[],
    }
}

const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// What one message contributes to the prompt.
#[derive(Default)]
pub(super) struct MessageInfo {
    pub(super) text: String,
    pub(super) tool_use_ids: Vec<String>,
    pub(super) tool_result_ids: Vec<String>,
    pub(super) tool_result_texts: Vec<String>,
    /// The type of its first content block.
    pub(super) first_block: String,
    /// Where each `cache_control` breakpoint falls: the words of the
    /// message's text before it (and after it, the whole message).
    pub(super) breakpoints: usize,
}

/// Text of a tool_result `content`: a string, or its text blocks.
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

fn check_image(block: &Value, at: &str) -> Result<(), Failure> {
    let source = block
        .get("source")
        .ok_or_else(|| invalid(format!("{at}.source: Field required")))?;
    let at = format!("{at}.source");
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media = str_field(source, "media_type", &at)?;
            if !IMAGE_TYPES.contains(&media) {
                return Err(invalid(format!(
                    "{at}.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
                )));
            }
            str_field(source, "data", &at).map(|_| ())
        }
        Some("url") => str_field(source, "url", &at).map(|_| ()),
        _ => Err(invalid(format!(
            "{at}: Input tag found using 'type' does not match any of the expected tags: 'base64', 'url'"
        ))),
    }
}

/// Validates one message like the API does and collects its text and ids.
pub(super) fn check_message(
    i: usize,
    m: &Value,
    thinking: bool,
) -> Result<(bool, MessageInfo), Failure> {
    let at = format!("messages.{i}");
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("{at}.role: Field required")))?;
    let user = match role {
        "user" => true,
        "assistant" => false,
        _ => {
            return Err(invalid(format!(
                "{at}.role: Input should be 'user', 'assistant' or 'system'"
            )))
        }
    };
    let mut info = MessageInfo::default();
    let blocks = match m.get("content") {
        None => return Err(invalid(format!("{at}.content: Field required"))),
        Some(Value::String(s)) => {
            if s.is_empty() {
                return Err(invalid(format!(
                    "{at}: all messages must have non-empty content except for the optional \
                     final assistant message"
                )));
            }
            info.text = s.clone();
            return Ok((user, info));
        }
        Some(Value::Array(b)) => b,
        Some(_) => {
            return Err(invalid(format!(
                "{at}.content: Input should be a valid string or a valid list"
            )))
        }
    };
    let mut texts = Vec::new();
    let mut seen_other = false;
    info.breakpoints = breakpoints(Some(&Value::Array(blocks.clone())));
    for (j, b) in blocks.iter().enumerate() {
        let at = format!("{at}.content.{j}");
        let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
        if j == 0 {
            ty.clone_into(&mut info.first_block);
        }
        if !BLOCK_TYPES.contains(&ty) {
            return Err(invalid(format!(
                "{at}: Input tag '{ty}' found using 'type' does not match any of the expected tags: {}",
                BLOCK_TYPES.map(|t| format!("'{t}'")).join(", ")
            )));
        }
        if let Some(extra) = b
            .as_object()
            .and_then(|o| o.keys().find(|k| !block_keys(ty).contains(&k.as_str())))
        {
            return Err(invalid(format!(
                "{at}.{ty}.{extra}: Extra inputs are not permitted"
            )));
        }
        match ty {
            "text" => {
                let text = str_field(b, "text", &at)?;
                if text.is_empty() {
                    return Err(invalid("messages: text content blocks must be non-empty"));
                }
                texts.push(text.to_owned());
            }
            "image" => check_image(b, &at)?,
            // Only the mock can verify its own signatures (thinking is
            // checked only when on: Anthropic ignores it otherwise).
            "thinking" if thinking => {
                let text = str_field(b, "thinking", &at)?;
                if str_field(b, "signature", &at)? != claude_signature(text) {
                    return Err(invalid(format!(
                        "{at}: Invalid `signature` in `thinking` block"
                    )));
                }
            }
            "tool_use" => {
                if user {
                    return Err(invalid(format!(
                        "{at}: `tool_use` blocks can only be in `assistant` messages"
                    )));
                }
                info.tool_use_ids.push(str_field(b, "id", &at)?.to_owned());
                str_field(b, "name", &at)?;
                if !b.get("input").is_some_and(Value::is_object) {
                    return Err(invalid(format!(
                        "{at}.input: Input should be a valid dictionary"
                    )));
                }
            }
            "tool_result" => {
                if !user {
                    return Err(invalid(format!(
                        "{at}: `tool_result` blocks can only be in `user` messages"
                    )));
                }
                if seen_other {
                    return Err(invalid(format!(
                        "{at}: `tool_result` blocks must come first in the user message, \
                         before any other content"
                    )));
                }
                info.tool_result_ids
                    .push(str_field(b, "tool_use_id", &at)?.to_owned());
                match b.get("content") {
                    None | Some(Value::String(_) | Value::Array(_)) => {}
                    Some(_) => {
                        return Err(invalid(format!(
                            "{at}.content: Input should be a valid string or a valid list"
                        )))
                    }
                }
                info.tool_result_texts.push(result_text(b.get("content")));
            }
            _ => {}
        }
        if ty != "tool_result" {
            seen_other = true;
        }
    }
    info.text = texts.join(" ");
    Ok((user, info))
}
