//! The attempt's part of the response cache (`crate::cache`): when the
//! edge role ordered it (a miss it may store), the attempt captures its
//! answer from the neutral events as they pass to the client's encoder,
//! or from the whole answer it decoded, and hands the entry to the edge
//! role, which stores it once the answer has passed.
//!
//! A vendor that speaks the client's own API is then not passed through:
//! the request is translated, and the answer read once, into the neutral
//! events a hit replays; so a client gets the same shape whether it hit
//! or missed. Requests the neutral model cannot carry are never cached
//! (`cache::Plan`), so translating them loses nothing the vendor reads.

use super::*;
use crate::cache::capture::{Capture, Recording};
use crate::cache::entry::Entry;
use crate::model::response::Completion;
use crate::model::stream::EventWriter;

impl<H: Host> Attempt<H> {
    /// Whether the client's API and this provider's pass the vendor's
    /// request and answer through (never while capturing, nor for a
    /// request context fitting changed: both are translated).
    pub(super) fn passes_through(&self, provider: &Provider, dialect: &dyn Dialect) -> bool {
        self.cache_limit.is_none()
            && !self.sent.refitted
            && pass_through(provider, dialect, self.asked.api)
    }

    /// The stream writer for the client's encoder; while capturing, the
    /// encoder is recorded.
    pub(super) fn client_writer(&mut self, native: bool) -> EventWriter {
        let origin = self.origin();
        let request_id = self.asked.request_id.clone();
        match self.cache_limit.filter(|_| !native) {
            Some(limit) => {
                let capture = Capture::shared(limit);
                self.capture = Some(Rc::clone(&capture));
                let encoder = surface(self.asked.api)
                    .stream_encoder(self.asked.shape.include_usage, &self.surface_state);
                let encoder = Box::new(Recording::around(encoder, capture));
                EventWriter::new(
                    encoder,
                    origin,
                    request_id,
                    self.asked.shape.include_usage,
                    false,
                )
                .for_api(self.asked.api)
                .with_choices(self.asked.shape.choices)
            }
            None => stream_writer(
                self.asked.api,
                native,
                origin,
                request_id,
                self.asked.shape.include_usage,
                &self.surface_state,
            )
            .with_choices(self.asked.shape.choices),
        }
    }

    /// A whole answer decoded (as `origin` now says who answered): kept
    /// when it may be.
    pub(super) fn capture_whole(&self, completion: &Completion, origin: &Origin) {
        if self.cache_limit.is_none() {
            return;
        }
        if let Some(mut entry) = Entry::of_completion(completion) {
            entry.provider.clone_from(&origin.provider);
            entry.model.clone_from(&origin.model);
            entry.stop_sequence.clone_from(&origin.stop_sequence);
            self.keep(entry);
        }
    }

    /// The stream ended: its capture kept when it may be (a whole answer,
    /// finished as the model meant it to, within its bound).
    pub(super) fn capture_stream_end(&mut self) {
        let Some(capture) = self.capture.take() else {
            return;
        };
        let captured = std::mem::replace(&mut *capture.borrow_mut(), Capture::new(0));
        if let Some(entry) = captured.entry() {
            self.keep(entry);
        }
    }

    /// Hands an entry to the edge role: stamped, encoded, and masked of
    /// this provider's key as every byte of its answer is.
    fn keep(&self, mut entry: Entry) {
        let Some(limit) = self.cache_limit else {
            return;
        };
        entry.stored_at = unix_seconds(&self.host);
        let mut bytes = entry.encode();
        if bytes.is_empty() || bytes.len() > limit {
            return;
        }
        self.scrub(&mut bytes);
        self.channel.keep_captured(bytes);
    }
}
