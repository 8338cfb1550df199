//! Trimming: the oldest turns of a conversation dropped, whole, until the
//! request fits. A turn is a user message that opens one (not the text a
//! client sends beside tool results) and everything up to the next: the
//! assistant's answers, its tool calls with their results, its thinking
//! with their signatures. Dropping whole turns keeps what every vendor
//! requires:
//! - system and developer instructions stay (wherever they are);
//! - the latest turn stays whole (the latest user message and the tool
//!   loop it started);
//! - a tool call and its result go together (OpenAI's and Anthropic's
//!   pairing, Gemini's function call and response);
//! - what remains opens with a user message (Anthropic's and Gemini's
//!   first turn);
//! - no message is edited (thinking signatures stay valid).
//!
//! Messages before the first user message (an assistant greeting) are a
//! turn of their own, the first dropped.

use crate::model::estimate::message_tokens;
use crate::model::request::Message;

/// A conversation with its oldest turns dropped.
#[derive(Debug)]
pub struct Trimmed {
    pub messages: Vec<Message>,
    /// Messages dropped.
    pub dropped: usize,
    /// The prompt estimate once they are.
    pub tokens: u64,
}

fn pinned(m: &Message) -> bool {
    matches!(m, Message::System { .. } | Message::Developer { .. })
}

/// Where each turn opens: at index 0 if anything but instructions comes
/// first, and at every user message whose previous message (instructions
/// aside) is not a tool result.
fn turn_starts(messages: &[Message]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut previous: Option<&Message> = None;
    for (i, m) in messages.iter().enumerate() {
        if pinned(m) {
            continue;
        }
        let opens = match (m, previous) {
            (_, None) => true,
            (Message::User { .. }, Some(Message::Tool { .. })) => false,
            (Message::User { .. }, Some(_)) => true,
            _ => false,
        };
        if opens {
            starts.push(i);
        }
        previous = Some(m);
    }
    starts
}

/// Where the latest turn opens (kept whole by every strategy); `None`
/// when there is no turn.
pub fn latest_turn(messages: &[Message]) -> Option<usize> {
    turn_starts(messages).last().copied()
}

/// Drops the oldest turns of `messages` (whose request is estimated at
/// `estimate` tokens) until `fits` the estimate, never the latest turn.
/// `None`: nothing could be dropped (one turn, or none).
pub fn trim(messages: &[Message], estimate: u64, fits: impl Fn(u64) -> bool) -> Option<Trimmed> {
    let starts = turn_starts(messages);
    // The last start is the latest turn, kept; so is everything after it.
    let (&latest, older) = starts.split_last()?;
    let mut tokens = estimate;
    // Messages before `cut` are dropped unless pinned.
    let mut cut = 0;
    for (n, &start) in older.iter().enumerate() {
        if fits(tokens) {
            break;
        }
        let end = older.get(n + 1).copied().unwrap_or(latest);
        let turn = messages.get(start..end).unwrap_or_default();
        tokens -= turn
            .iter()
            .filter(|m| !pinned(m))
            .map(message_tokens)
            .sum::<u64>();
        cut = end;
    }
    if cut == 0 {
        return None;
    }
    let mut kept = Vec::with_capacity(messages.len());
    let mut dropped = 0;
    for (i, m) in messages.iter().enumerate() {
        if i >= cut || pinned(m) {
            kept.push(m.clone());
        } else {
            dropped += 1;
        }
    }
    Some(Trimmed {
        messages: kept,
        dropped,
        tokens,
    })
}
