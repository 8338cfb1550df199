//! A cached answer given again, in the asking client's API: whole, by its
//! surface's renderer, or as a stream its surface writes from the neutral
//! events a vendor's stream would have given (its opening, the answer in
//! small pieces, the finish, the usage and the end each API expects).

use super::entry::{Block, Entry};
use crate::model::response::{Answer, Origin};
use crate::model::stream::Reasoning;
use crate::model::Api;
use crate::surfaces::{stream_writer, surface, SurfaceState};

/// The most bytes of text one replayed event carries: a cached answer
/// streams in pieces as a vendor's would, not as one event.
pub const PIECE: usize = 64;

/// Who a hit says answered: the vendor model and provider that made the
/// entry, under this request's own id and time.
pub fn origin(entry: &Entry, request_id: &str, now: u64) -> Origin {
    Origin {
        id: format!("chatcmpl-{request_id}"),
        created: now,
        model: entry.model.clone(),
        provider: entry.provider.clone(),
        stop_sequence: entry.stop_sequence.clone(),
    }
}

/// The whole answer's body in `api`'s format; `state`: what the asking
/// request's surface keeps for its answers (the Responses API repeats its
/// request's members).
pub fn whole(api: Api, entry: &Entry, origin: &Origin, state: &SurfaceState) -> Vec<u8> {
    surface(api).render_answer(Answer::Decoded(entry.completion()), origin, state)
}

/// The stream's body in `api`'s format; `include_usage`: the client asked
/// for a usage report (Chat Completions' `stream_options`); `state` as
/// for [`whole`].
pub fn stream(
    api: Api,
    entry: &Entry,
    origin: Origin,
    request_id: &str,
    include_usage: bool,
    state: &SurfaceState,
) -> Vec<u8> {
    let mut w = stream_writer(
        api,
        false,
        origin,
        request_id.to_owned(),
        include_usage,
        state,
    );
    let mut out = Vec::with_capacity(256 + 2 * entry_len(entry));
    w.set_usage(entry.usage.map(Into::into));
    w.start(&mut out);
    let mut calls = 0u64;
    for block in &entry.blocks {
        match block {
            Block::Text { text } => {
                for piece in pieces(text) {
                    w.content(&mut out, piece);
                }
            }
            Block::Thinking { text, signature } => {
                for piece in pieces(text) {
                    w.reasoning(&mut out, Reasoning::Text(piece));
                }
                if let Some(signature) = signature {
                    w.reasoning(&mut out, Reasoning::Signature(signature));
                }
            }
            Block::Redacted { data } => w.reasoning(&mut out, Reasoning::Redacted(data)),
            Block::ToolCall {
                id,
                name,
                arguments,
            } => {
                w.tool_call_start(&mut out, calls, id, name);
                for piece in pieces(arguments) {
                    w.tool_call_arguments(&mut out, calls, piece);
                }
                calls += 1;
            }
        }
    }
    if let Some(finish) = entry.finish_reason() {
        w.finish(&mut out, finish);
    }
    w.done(&mut out);
    out
}

fn entry_len(entry: &Entry) -> usize {
    entry.blocks.iter().map(Block::text_len).sum()
}

/// `text` in pieces of at most [`PIECE`] bytes, cut at character boundaries.
fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len().min(PIECE);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        // A character longer than a piece (never in UTF-8: at most 4 bytes).
        if end == 0 {
            end = rest.len();
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

#[cfg(test)]
mod tests;
