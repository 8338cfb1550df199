//! An answer recorded for the cache as it passes: the neutral events the
//! stream writer hands the client's encoder, seen on their way by a
//! [`Recording`] encoder around it (the client's stream is never held
//! back, and nothing is parsed again). A vendor event passed through as it
//! came (a pass-through pair) carries no neutral events: the attempt then
//! runs the vendor's bytes through the dialect's own decoder into a
//! recording that writes nothing (`session::attempt::cache`).
//!
//! Bounded: past its limit in bytes a capture keeps nothing more, and is
//! not stored.

use std::cell::RefCell;
use std::rc::Rc;

use super::entry::{Block, Entry};
use crate::error::GatewayError;
use crate::model::response::{FinishReason, Origin, Usage};
use crate::model::stream::{Passed, Reasoning, StreamEncoder};

/// The response cache's part of a request's exchange (the exchange module):
/// what the edge role asks of the attempts, and what the attempt whose
/// answer the client got captured.
#[derive(Debug, Default)]
pub struct Order {
    /// Capture the answer, up to this many bytes of it (`None`: the cache
    /// keeps nothing of this request).
    pub limit: Option<usize>,
    /// The entry captured, encoded and scrubbed of its provider's key.
    pub captured: Option<Vec<u8>>,
}

/// The answer so far.
#[derive(Debug)]
pub struct Capture {
    blocks: Vec<Block>,
    bytes: usize,
    limit: usize,
    /// Each tool call's block, by the writer's index of it.
    calls: Vec<usize>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    /// Who answered, as the stream said it at its end.
    origin: Option<Origin>,
    /// Not to be stored: an error, an event it could not read, or too large.
    spoiled: bool,
}

/// A capture its recording and the attempt share.
pub type Shared = Rc<RefCell<Capture>>;

impl Capture {
    /// A capture of answers up to `limit` bytes of text.
    pub fn new(limit: usize) -> Self {
        Self {
            blocks: Vec::new(),
            bytes: 0,
            limit,
            calls: Vec::new(),
            finish: None,
            usage: None,
            origin: None,
            spoiled: false,
        }
    }

    pub fn shared(limit: usize) -> Shared {
        Rc::new(RefCell::new(Self::new(limit)))
    }

    /// Counts `n` more bytes: past the limit, the capture is given up (and
    /// what it held let go).
    fn room(&mut self, n: usize) -> bool {
        if self.spoiled {
            return false;
        }
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.limit {
            self.spoil();
            return false;
        }
        true
    }

    /// Not to be stored.
    pub fn spoil(&mut self) {
        self.spoiled = true;
        self.blocks = Vec::new();
        self.calls = Vec::new();
    }

    pub fn text(&mut self, text: &str) {
        if !self.room(text.len()) {
            return;
        }
        match self.blocks.last_mut() {
            Some(Block::Text { text: open }) => open.push_str(text),
            _ => self.blocks.push(Block::Text {
                text: text.to_owned(),
            }),
        }
    }

    pub fn reasoning(&mut self, delta: Reasoning<'_>) {
        let (Reasoning::Text(piece) | Reasoning::Signature(piece) | Reasoning::Redacted(piece)) =
            delta;
        if !self.room(piece.len()) {
            return;
        }
        let open = match self.blocks.last_mut() {
            Some(Block::Thinking {
                text,
                signature: signature @ None,
            }) => Some((text, signature)),
            _ => None,
        };
        match (delta, open) {
            (Reasoning::Text(piece), Some((text, _))) => text.push_str(piece),
            (Reasoning::Signature(piece), Some((_, signature))) => {
                *signature = Some(piece.to_owned())
            }
            (Reasoning::Text(piece), None) => self.blocks.push(Block::Thinking {
                text: piece.to_owned(),
                signature: None,
            }),
            (Reasoning::Signature(piece), None) => self.blocks.push(Block::Thinking {
                text: String::new(),
                signature: Some(piece.to_owned()),
            }),
            (Reasoning::Redacted(data), _) => self.blocks.push(Block::Redacted {
                data: data.to_owned(),
            }),
        }
    }

    pub fn tool_call_start(&mut self, index: u32, id: &str, name: &str) {
        if !self.room(id.len() + name.len()) {
            return;
        }
        // The writer numbers calls in order from 0: a call out of order is
        // not one this capture can place.
        if index as usize != self.calls.len() {
            self.spoil();
            return;
        }
        self.calls.push(self.blocks.len());
        self.blocks.push(Block::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: String::new(),
        });
    }

    pub fn tool_call_arguments(&mut self, index: u32, fragment: &str) {
        if !self.room(fragment.len()) {
            return;
        }
        let block = (self.calls.get(index as usize)).and_then(|&at| self.blocks.get_mut(at));
        match block {
            Some(Block::ToolCall { arguments, .. }) => arguments.push_str(fragment),
            _ => self.spoil(),
        }
    }

    pub fn finish(&mut self, reason: FinishReason) {
        self.finish = Some(reason);
    }

    /// The stream's end, with the vendor's usage and who answered.
    pub fn done(&mut self, origin: &Origin, usage: Option<&Usage>) {
        self.usage = usage.copied();
        self.origin = Some(origin.clone());
    }

    /// The entry to store: only a capture that ended as the model meant
    /// it to (see [`Entry::new`]), whole and within its bound.
    pub fn entry(self) -> Option<Entry> {
        let origin = self.origin.filter(|_| !self.spoiled)?;
        let mut entry = Entry::new(self.blocks, self.finish?, self.usage)?;
        entry.provider = origin.provider;
        entry.model = origin.model;
        entry.stop_sequence = origin.stop_sequence;
        Some(entry)
    }
}

/// A stream encoder that records every neutral event into a capture on its
/// way to the client's encoder (`inner`), or, without one, only records.
pub struct Recording {
    inner: Option<Box<dyn StreamEncoder>>,
    capture: Shared,
}

impl Recording {
    /// Records what `inner` is given.
    pub fn around(inner: Box<dyn StreamEncoder>, capture: Shared) -> Self {
        Self {
            inner: Some(inner),
            capture,
        }
    }

    /// Records, and writes nothing.
    pub fn only(capture: Shared) -> Self {
        Self {
            inner: None,
            capture,
        }
    }
}

impl StreamEncoder for Recording {
    fn start(&mut self, origin: &Origin, out: &mut Vec<u8>) {
        if let Some(inner) = &mut self.inner {
            inner.start(origin, out);
        }
    }

    fn text(&mut self, origin: &Origin, out: &mut Vec<u8>, text: &str) {
        self.capture.borrow_mut().text(text);
        if let Some(inner) = &mut self.inner {
            inner.text(origin, out, text);
        }
    }

    fn reasoning(&mut self, origin: &Origin, out: &mut Vec<u8>, delta: Reasoning<'_>) {
        self.capture.borrow_mut().reasoning(delta);
        if let Some(inner) = &mut self.inner {
            inner.reasoning(origin, out, delta);
        }
    }

    fn tool_call_start(
        &mut self,
        origin: &Origin,
        out: &mut Vec<u8>,
        index: u32,
        id: &str,
        name: &str,
    ) {
        self.capture.borrow_mut().tool_call_start(index, id, name);
        if let Some(inner) = &mut self.inner {
            inner.tool_call_start(origin, out, index, id, name);
        }
    }

    fn tool_call_arguments(
        &mut self,
        origin: &Origin,
        out: &mut Vec<u8>,
        index: u32,
        fragment: &str,
    ) {
        self.capture
            .borrow_mut()
            .tool_call_arguments(index, fragment);
        if let Some(inner) = &mut self.inner {
            inner.tool_call_arguments(origin, out, index, fragment);
        }
    }

    fn finish(&mut self, origin: &Origin, out: &mut Vec<u8>, reason: FinishReason) {
        self.capture.borrow_mut().finish(reason);
        if let Some(inner) = &mut self.inner {
            inner.finish(origin, out, reason);
        }
    }

    /// An answer of several choices is not kept (the cache keys none:
    /// see `cache::cacheable`); the client's encoder follows them.
    fn choice(&mut self, origin: &Origin, out: &mut Vec<u8>, index: u32) {
        self.capture.borrow_mut().spoil();
        if let Some(inner) = &mut self.inner {
            inner.choice(origin, out, index);
        }
    }

    fn done(&mut self, origin: &Origin, out: &mut Vec<u8>, usage: Option<&Usage>) {
        self.capture.borrow_mut().done(origin, usage);
        if let Some(inner) = &mut self.inner {
            inner.done(origin, out, usage);
        }
    }

    fn error(&mut self, out: &mut Vec<u8>, error: &GatewayError, request_id: &str) {
        self.capture.borrow_mut().spoil();
        if let Some(inner) = &mut self.inner {
            inner.error(out, error, request_id);
        }
    }

    /// A vendor event passed as it came: nothing here to record from.
    fn passthrough(&mut self, out: &mut Vec<u8>, event: &Passed) {
        if let Some(inner) = &mut self.inner {
            self.capture.borrow_mut().spoil();
            inner.passthrough(out, event);
        }
    }
}

#[cfg(test)]
mod tests;
