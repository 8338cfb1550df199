//! Compression: the long old blocks of a conversation (tool results,
//! long texts), summarised once per request by a group of the gateway's
//! own (the edge's summariser call, `session::edge::summarise`), and per
//! attempt replaced by their summaries, oldest first, as many as the
//! attempt's window needs ([`apply`]).
//!
//! A block is one text of a message older than the latest turn (a tool
//! result's, a user's, an assistant's answer without thinking), or of a
//! tool result in the latest turn that the model has answered since (a
//! coding agent's tool loop is one long turn, and its early results are
//! what fill the window): never system or developer instructions, never
//! the latest user message, never results the model has not answered yet,
//! never an assistant message with thinking (its signature covers it). A
//! summary names its block by place (message and part) and by a digest of
//! its text, so it replaces that text and no other. The tool call/result
//! pairing stays: a result's text changes, not its id.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::trim::latest_turn;
use crate::model::estimate::text_tokens;
use crate::model::request::{Content, ContentPart, Message};

/// What a summary replaces a block's text with, before the summary.
const MARK_TOOL: &str = "[summary of an earlier tool result by the gateway] ";
const MARK_MESSAGE: &str = "[summary of an earlier message by the gateway] ";

/// A summary longer than this (bytes) is cut.
pub const MAX_SUMMARY_BYTES: usize = 4096;

/// The instruction the summariser gets (its system message); the block's
/// text is the user message.
pub const INSTRUCTION: &str =
    "Summarise the following text for a later reader who will not see it. \
Keep identifiers, file paths, names, numbers, error messages and conclusions; drop repetition. \
Answer with the summary only.";

/// One text of an old message, to be summarised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block<'a> {
    /// The message's index in the request.
    pub message: usize,
    /// The text part's index in the message's content (0 for plain text).
    pub part: usize,
    pub text: &'a str,
}

/// A block's summary, as the edge hands it to the attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    #[serde(rename = "m")]
    pub message: usize,
    #[serde(rename = "p")]
    pub part: usize,
    /// The digest of the block's text ([`digest`]).
    #[serde(rename = "h")]
    pub hash: String,
    #[serde(rename = "s")]
    pub text: String,
}

impl Summary {
    /// The summary of `block`, `text` cut to [`MAX_SUMMARY_BYTES`].
    pub fn of(block: &Block, text: &str) -> Self {
        Summary {
            message: block.message,
            part: block.part,
            hash: digest(block.text),
            text: cut(text.trim(), MAX_SUMMARY_BYTES).to_owned(),
        }
    }
}

/// The digest a summary names its block's text by (16 bytes of its
/// SHA-256, hex).
pub fn digest(text: &str) -> String {
    let hash = Sha256::digest(text.as_bytes());
    hash.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

/// The content of `message` a block may be taken from, and what the
/// summary's mark calls it; `None` for instructions and a turn with
/// thinking.
fn summarisable(message: &Message) -> Option<(&Content, &'static str)> {
    match message {
        Message::Tool { content, .. } => Some((content, MARK_TOOL)),
        Message::User { content, .. } => Some((content, MARK_MESSAGE)),
        Message::Assistant {
            content: Some(content),
            reasoning,
            ..
        } if reasoning.is_empty() => Some((content, MARK_MESSAGE)),
        _ => None,
    }
}

fn summarisable_mut(message: &mut Message) -> Option<(&mut Content, &'static str)> {
    match message {
        Message::Tool { content, .. } => Some((content, MARK_TOOL)),
        Message::User { content, .. } => Some((content, MARK_MESSAGE)),
        Message::Assistant {
            content: Some(content),
            reasoning,
            ..
        } if reasoning.is_empty() => Some((content, MARK_MESSAGE)),
        _ => None,
    }
}

/// The texts of `content`, with their part index.
fn texts(content: &Content) -> Vec<(usize, &str)> {
    match content {
        Content::Text(text) => vec![(0, text.as_str())],
        Content::Parts(parts) => (parts.iter().enumerate())
            .filter_map(|(i, p)| match p {
                ContentPart::Text { text, .. } => Some((i, text.as_str())),
                _ => None,
            })
            .collect(),
    }
}

fn text_mut(content: &mut Content, part: usize) -> Option<&mut String> {
    match content {
        Content::Text(text) if part == 0 => Some(text),
        Content::Text(_) => None,
        Content::Parts(parts) => match parts.get_mut(part)? {
            ContentPart::Text { text, .. } => Some(text),
            _ => None,
        },
    }
}

/// Which messages of a conversation may give blocks: those before the
/// latest turn, and the latest turn's tool results that an assistant
/// message follows.
struct Eligible {
    latest: usize,
    /// The last assistant message's index (0: none).
    answered: usize,
}

impl Eligible {
    fn of(messages: &[Message]) -> Option<Self> {
        let latest = latest_turn(messages)?;
        let answered = (messages.iter())
            .rposition(|m| matches!(m, Message::Assistant { .. }))
            .unwrap_or(0);
        Some(Eligible { latest, answered })
    }

    fn allows(&self, index: usize, message: &Message) -> bool {
        index < self.latest
            || (index > self.latest
                && index < self.answered
                && matches!(message, Message::Tool { .. }))
    }
}

/// The blocks of `messages` to summarise: texts of at least `min_bytes`
/// in messages that may give them ([`Eligible`]), oldest first, at most
/// `max`.
pub fn blocks(messages: &[Message], min_bytes: usize, max: usize) -> Vec<Block<'_>> {
    let Some(eligible) = Eligible::of(messages) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        if !eligible.allows(i, message) {
            continue;
        }
        let Some((content, _)) = summarisable(message) else {
            continue;
        };
        for (part, text) in texts(content) {
            if out.len() == max {
                return out;
            }
            if text.len() >= min_bytes {
                out.push(Block {
                    message: i,
                    part,
                    text,
                });
            }
        }
    }
    out
}

/// A conversation with some old blocks replaced by their summaries.
#[derive(Debug)]
pub struct Compressed {
    pub messages: Vec<Message>,
    /// Blocks replaced.
    pub replaced: usize,
    /// The prompt estimate once they are.
    pub tokens: u64,
}

/// Replaces the blocks of `messages` (whose request is estimated at
/// `estimate` tokens) that `summaries` summarise, oldest first, until
/// `fits` the estimate. A summary whose block is not there (another
/// place, another text) is skipped. `None`: nothing was replaced.
pub fn apply(
    messages: &[Message],
    summaries: &[Summary],
    estimate: u64,
    fits: impl Fn(u64) -> bool,
) -> Option<Compressed> {
    let eligible = Eligible::of(messages)?;
    let mut order: Vec<&Summary> = summaries.iter().collect();
    order.sort_by_key(|s| (s.message, s.part));
    let mut out: Option<Vec<Message>> = None;
    let (mut tokens, mut replaced) = (estimate, 0);
    for summary in order {
        if fits(tokens) {
            break;
        }
        let allowed =
            (messages.get(summary.message)).is_some_and(|m| eligible.allows(summary.message, m));
        if !allowed {
            continue;
        }
        let copy = out.get_or_insert_with(|| messages.to_vec());
        let Some((content, mark)) = copy.get_mut(summary.message).and_then(summarisable_mut) else {
            continue;
        };
        let Some(text) = text_mut(content, summary.part) else {
            continue;
        };
        if digest(text) != summary.hash {
            continue;
        }
        let replacement = format!("{mark}{}", summary.text);
        let (before, after) = (text_tokens(text), text_tokens(&replacement));
        if after >= before {
            continue;
        }
        *text = replacement;
        tokens -= before - after;
        replaced += 1;
    }
    let messages = out.filter(|_| replaced > 0)?;
    Some(Compressed {
        messages,
        replaced,
        tokens,
    })
}

/// The summary text of a summariser's answer (a Chat Completions body).
/// Only an answer that finished (`stop`) or reached `max_summary_tokens`
/// (`length`, marked as cut) is one: a refusal, a filtered answer or an
/// empty one is no summary.
pub fn answer_text(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let choice = value.get("choices")?.get(0)?;
    let message = choice.get("message")?;
    if message.get("refusal").is_some_and(|r| !r.is_null()) {
        return None;
    }
    let text = message.get("content")?.as_str()?.trim();
    if text.is_empty() {
        return None;
    }
    match choice.get("finish_reason")?.as_str()? {
        "stop" => Some(text.to_owned()),
        "length" => Some(format!("{text} {CUT_MARK}")),
        _ => None,
    }
}

/// What ends a summary the summariser was cut short in.
const CUT_MARK: &str = "[the summary was cut short]";

/// What stands between the head and the tail of a block too long to send
/// whole.
const LEFT_OUT: &str = "\n[... the middle of this text is left out ...]\n";

/// What the summariser is sent of `text`: all of it within `max` bytes,
/// else its head and its tail (an error is often at a log's end), each
/// about half of `max`, on character boundaries.
pub fn head_and_tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let head = cut(text, max / 2);
    let mut start = text.len() - (max - head.len());
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let tail = text.get(start..).unwrap_or_default();
    format!("{head}{LEFT_OUT}{tail}")
}

/// Summaries as the edge hands them to the attempts (JSON).
pub fn encode(summaries: &[Summary]) -> Option<Vec<u8>> {
    serde_json::to_vec(summaries).ok()
}

pub fn decode(bytes: &[u8]) -> Vec<Summary> {
    serde_json::from_slice(bytes).unwrap_or_default()
}
