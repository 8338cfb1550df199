//! The edge role and the response store (`crate::responses_store`): a
//! Responses request's references resolved before it is parsed, its
//! answer captured as it passes and stored when it ends, and the
//! stored-response calls on the gateway's ids answered here. Requests of
//! other APIs, and Responses requests with `store: false` that refer to
//! nothing stored, make no host call for it.
//!
//! Where the entries are: the proxy's own store always, and the fleet's
//! (the state service, `shared_state.service`) when it is configured,
//! reached with callouts (`edge/fleet.rs`). Then the fleet's store is the
//! one that answers, and the proxy's is what a request falls back on when
//! the fleet's does not answer (a copy the fleet's store says is gone is
//! gone: see [`Found`]).

use std::collections::HashMap;

use serde_json::Value;

use super::*;
use crate::model::call::StoredOp;
use crate::responses_store::resolve::{self, Capture, Resolved};
use crate::responses_store::{self as store, Entry, Put, Usage};
use crate::session::host::unix_seconds;
use crate::session::shared_data::HostStore;
use crate::shared_state::remote::Reply;
use crate::shared_state::Namespace;
use crate::surfaces::SurfaceState;
use fleet::{Fetch, Why};

/// The edge's part in the response store, for one request.
#[derive(Default)]
pub(super) struct Responses {
    /// A response to store once its answer has passed.
    pending: Option<Pending>,
    /// A call to the state service out (`edge/fleet.rs`).
    pub(super) waiting: Option<fleet::Waiting>,
    /// What the state service said of the entries this request refers to.
    fetched: Option<Fetched>,
}

impl Responses {
    /// There is a response to capture and store.
    pub(super) fn storing(&self) -> bool {
        self.pending.is_some()
    }

    /// Callout `token` is the state service's.
    pub(super) fn waits_for(&self, token: u32) -> bool {
        self.waiting.as_ref().is_some_and(|w| w.token() == token)
    }
}

/// A response to be stored once its answer has passed.
struct Pending {
    id: String,
    previous: Option<String>,
    input: Vec<Value>,
    capture: Option<Capture>,
}

/// Entries as the fleet's store gave them, by id.
pub(super) type Fetched = HashMap<String, Found>;

/// What the fleet's store said of one entry.
#[derive(Debug, Clone)]
pub(super) enum Found {
    Entry(Box<Entry>),
    /// Not there: the proxy's copy counts only if the fleet never had it
    /// (stored while the fleet's store was unreachable).
    Missing,
    /// No answer: the proxy's copy counts.
    Unavailable,
}

impl Found {
    /// What the fleet's store answered for an entry, read.
    pub(super) fn of(reply: Reply, id: &str) -> Self {
        match reply {
            Reply::Found(entries) => entries
                .first()
                .and_then(|bytes| store::decode(bytes, id))
                .map_or(Found::Unavailable, |e| Found::Entry(Box::new(e))),
            Reply::Missing => Found::Missing,
            Reply::Done | Reply::Unavailable => Found::Unavailable,
        }
    }
}

/// The store in the proxy's shared data.
fn shared<H: Host>(host: &H) -> HostStore<'_, H> {
    HostStore::new(host, "the response store is skipped")
}

impl<H: Host> Edge<H> {
    /// Whose entries this request's are.
    pub(super) fn namespace(&self) -> Namespace {
        store::namespace(self.config.auth.caller_name(self.client.caller))
    }

    /// Entry `id` as this request sees it: the fleet's answer (`found`),
    /// else the proxy's own copy as the rule of [`Found`] says.
    pub(super) fn entry(&self, id: &str, found: Option<&Found>) -> Option<Entry> {
        let local = || {
            let bounds = self.config.response_store;
            let now = unix_seconds(&self.host);
            store::get(&shared(&self.host), &bounds, &self.namespace(), id, now)
        };
        match found {
            Some(Found::Entry(entry)) => Some((**entry).clone()),
            Some(Found::Missing) => local().filter(|(_, mirrored)| !mirrored).map(|(e, _)| e),
            Some(Found::Unavailable) | None => local().map(|(e, _)| e),
        }
    }

    /// Fetches what a Responses body refers to from the fleet's store
    /// before the request is parsed: `Some`, how the request went on (it
    /// waits for a callout, or it was parsed and routed already); `None`
    /// when there is nothing to fetch.
    pub(super) fn fetch_state(&mut self, facts: &PathFacts, body: &[u8]) -> Option<Flow> {
        if self.client.api != Api::OpenAiResponses || !self.config.response_store.enabled {
            return None;
        }
        self.config.shared_state.service.as_ref()?;
        let references = resolve::references(body)?;
        let fetch = Fetch::new(facts.clone(), body.to_vec(), &references);
        Some(self.fetch_next(Box::new(fetch)).unwrap_or(Flow::Pause))
    }

    /// The fetch is done: the request goes on, resolved with what it found.
    pub(super) fn fetched(&mut self, fetch: Fetch) -> Flow {
        let (facts, body, found) = fetch.into_parts();
        self.responses.fetched = Some(found);
        self.generate(&facts, &body)
    }

    /// A Responses body's `previous_response_id` and `item_reference`s of
    /// the gateway's, resolved: the vendor gets (and an attempt parses)
    /// the whole conversation instead.
    pub(super) fn resolve_state(&mut self, body: &[u8]) -> Result<Option<Resolved>, GatewayError> {
        let bounds = self.config.response_store;
        if self.client.api != Api::OpenAiResponses
            || !bounds.enabled
            || !resolve::references_state(body)
        {
            return Ok(None);
        }
        let fetched = self.responses.fetched.take().unwrap_or_default();
        let resolved = resolve::resolve(body, |id| self.entry(id, fetched.get(id)))?;
        if let Some(r) = &resolved {
            self.host
                .set_body(Buffer::Request, 0, body.len(), &r.body)?;
            self.host
                .set_header(Map::Request, b"content-length", None)?;
        }
        Ok(resolved)
    }

    /// The id an answer is stored under (unless its client's API keeps
    /// none or the client opted out, `SurfaceState::stores_answer`); the
    /// request's surface state learns what it continued.
    pub(super) fn plan_store(
        &mut self,
        body: &[u8],
        state: &mut SurfaceState,
        resolved: Option<Resolved>,
    ) -> Option<String> {
        let bounds = self.config.response_store;
        let previous = resolved.as_ref().and_then(|r| r.previous.clone());
        if let Some(previous) = &previous {
            state.continues(previous);
        }
        if !bounds.enabled || !state.stores_answer() {
            return None;
        }
        let seed = self
            .outcome
            .started
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let id = store::new_id(seed);
        let input = match resolved {
            Some(r) => r.input,
            None => resolve::request_input(body),
        };
        self.responses.pending = Some(Pending {
            input: resolve::input_items(input, &id),
            id: id.clone(),
            previous,
            capture: None,
        });
        Some(id)
    }

    /// The answer's headers: a successful translated one is captured as it
    /// passes (a vendor that keeps its responses answered: nothing to read).
    pub(super) fn capture_answer(&mut self, status: u16) {
        let stream = self.admission.chat.as_ref().is_some_and(|c| c.stream);
        let limit = self.config.response_store.max_entry_bytes;
        let kept_by_vendor = status == 200 && self.answered_by_a_keeper();
        match &mut self.responses.pending {
            Some(pending) if status == 200 && !kept_by_vendor => {
                let limit = usize::try_from(limit).unwrap_or(usize::MAX);
                pending.capture = Some(Capture::new(stream, limit));
            }
            _ => self.responses.pending = None,
        }
    }

    /// The attempt that answered reached a vendor with the Responses API
    /// (OpenAI, Azure v1): it passed the answer through, and keeps it.
    fn answered_by_a_keeper(&self) -> bool {
        let Some(name) = self.host.header(Map::Response, "x-llm-provider") else {
            return false;
        };
        let name = String::from_utf8_lossy(&name);
        self.config.providers.get(name.as_ref()).is_some_and(|p| {
            crate::dialects::pass_through(p, dialect(p.dialect), Api::OpenAiResponses)
        })
    }

    /// A piece of the answer; at its end, the response is stored, before
    /// the end goes on to the client (`Flow::Pause`: held until the
    /// fleet's store has it).
    pub(super) fn capture_body(&mut self, size: usize, end_of_stream: bool) -> Flow {
        let pending = &mut self.responses.pending;
        let Some(capture) = pending.as_mut().and_then(|p| p.capture.as_mut()) else {
            return Flow::Continue;
        };
        match self.host.body(Buffer::Response, 0, size) {
            Ok(chunk) => capture.feed(&chunk),
            Err(e) => {
                log_once(&e, "the response is not stored");
                *pending = None;
                return Flow::Continue;
            }
        }
        if !end_of_stream && !capture.complete() {
            return Flow::Continue;
        }
        let Some(pending) = pending.take() else {
            return Flow::Continue;
        };
        let Some(response) = pending.capture.and_then(Capture::finish) else {
            return Flow::Continue;
        };
        // Not ours (a vendor that keeps its own responses answered).
        if response.get("id").and_then(Value::as_str) != Some(pending.id.as_str()) {
            return Flow::Continue;
        }
        let entry = Entry {
            id: pending.id,
            prev: pending.previous,
            input: pending.input,
            response,
        };
        if self.put_remote(&entry) {
            return Flow::Pause;
        }
        self.put_local(&entry, false);
        Flow::Continue
    }

    /// Stores `entry` in the proxy's store (`mirrored`: the fleet's has it).
    pub(super) fn put_local(&self, entry: &Entry, mirrored: bool) {
        let bounds = self.config.response_store;
        let now = unix_seconds(&self.host);
        let owner = self.namespace();
        let shared = shared(&self.host);
        if let Put::Stored(usage) = store::put(&shared, &bounds, &owner, entry, mirrored, now) {
            self.store_gauges(usage);
        }
    }

    fn store_gauges(&self, usage: Usage) {
        ignore(
            self.host
                .gauge("llm_gateway.response_store_bytes", &[], usage.bytes),
        );
        ignore(
            self.host
                .gauge("llm_gateway.response_store_entries", &[], usage.entries),
        );
    }

    /// A call on a response the gateway stored, answered from the store:
    /// the fleet's, when there is one (the answer then comes later, in
    /// [`Self::answer_stored_with`]).
    pub(super) fn answer_stored(
        &mut self,
        op: StoredOp,
        id: &str,
        query: &str,
    ) -> Result<Flow, GatewayError> {
        let why = Why::Call {
            op,
            id: id.to_owned(),
            query: query.to_owned(),
        };
        if self.call_remote(op, id, why) {
            return Ok(Flow::Pause);
        }
        self.answer_stored_with(op, id, query, Reply::Unavailable)
    }

    /// A call on a stored response answered, with what the fleet's store
    /// said (`Reply::Unavailable` when there is none).
    pub(super) fn answer_stored_with(
        &mut self,
        op: StoredOp,
        id: &str,
        query: &str,
        reply: Reply,
    ) -> Result<Flow, GatewayError> {
        if op == StoredOp::Delete {
            let bounds = self.config.response_store;
            let now = unix_seconds(&self.host);
            let found = Found::of(reply.clone(), id);
            // The proxy's copy counts as the lookup's rule says; it goes anyway.
            let here = self.entry(id, Some(&found)).is_some();
            let usage = store::delete(&shared(&self.host), &bounds, &self.namespace(), id, now);
            if let Some(usage) = usage {
                self.store_gauges(usage);
            }
            if reply != Reply::Done && !here {
                return Err(resolve::not_found(id));
            }
            return Ok(self.reply_json(&resolve::deleted(id), &[]));
        }
        let found = Found::of(reply, id);
        let entry = self
            .entry(id, Some(&found))
            .ok_or_else(|| resolve::not_found(id))?;
        let body = match op {
            StoredOp::Retrieve => serde_json::to_vec(&entry.response).unwrap_or_default(),
            StoredOp::InputItems => resolve::input_items_page(&entry, query)?,
            StoredOp::Cancel | StoredOp::Delete => return Err(resolve::not_cancellable()),
        };
        Ok(self.reply_json(&body, &[]))
    }
}
