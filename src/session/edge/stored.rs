//! The edge role and the response store (`crate::responses_store`): a
//! Responses request's references resolved before it is parsed, its
//! answer captured as it passes and stored when it ends, and the
//! stored-response calls on the gateway's ids answered here. Requests of
//! other APIs, and Responses requests with `store: false` that refer to
//! nothing stored, make no host call for it.

use serde_json::Value;

use super::*;
use crate::model::call::StoredOp;
use crate::model::shared::Shared;
use crate::model::Echo;
use crate::responses_store::resolve::{self, Capture, Resolved};
use crate::responses_store::{self as store, Entry, Put, Usage};
use crate::session::host::unix_seconds;
use crate::session::shared_data::HostStore;

/// A response to be stored once its answer has passed.
pub(super) struct Pending {
    id: String,
    previous: Option<String>,
    input: Vec<Value>,
    capture: Option<Capture>,
}

/// The store in the proxy's shared data.
fn shared<H: Host>(host: &H) -> HostStore<'_, H> {
    HostStore::new(host, "the response store is skipped")
}

impl<H: Host> Edge<H> {
    fn owner(&self) -> &str {
        self.config.auth.caller_name(self.caller)
    }

    /// A Responses body's `previous_response_id` and `item_reference`s of
    /// the gateway's, resolved: the vendor gets (and an attempt parses)
    /// the whole conversation instead.
    pub(super) fn resolve_state(&self, body: &[u8]) -> Result<Option<Resolved>, GatewayError> {
        let bounds = self.config.response_store;
        if self.api != Api::OpenAiResponses || !bounds.enabled || !resolve::references_state(body) {
            return Ok(None);
        }
        let now = unix_seconds(&self.host);
        let owner = self.owner().to_owned();
        let shared = shared(&self.host);
        let resolved = resolve::resolve(body, |id| store::get(&shared, &bounds, &owner, id, now))?;
        if let Some(r) = &resolved {
            self.host
                .set_body(Buffer::Request, 0, body.len(), &r.body)?;
            self.host
                .set_header(Map::Request, b"content-length", None)?;
        }
        Ok(resolved)
    }

    /// The id a Responses answer is stored under (unless the client said
    /// `store: false`); the request's echo names what it continued.
    pub(super) fn plan_store(
        &mut self,
        body: &[u8],
        echo: &mut Shared<Echo>,
        resolved: Option<Resolved>,
    ) -> Option<String> {
        let bounds = self.config.response_store;
        let previous = resolved.as_ref().and_then(|r| r.previous.clone());
        if let Some(previous) = &previous {
            echo.insert("previous_response_id".into(), previous.clone().into());
        }
        let unwanted = echo.get("store") == Some(&Value::Bool(false));
        if self.api != Api::OpenAiResponses || !bounds.enabled || unwanted {
            return None;
        }
        let seed = self
            .started
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let id = store::new_id(seed);
        let input = match resolved {
            Some(r) => r.input,
            None => resolve::request_input(body),
        };
        self.stored = Some(Pending {
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
        let stream = self.chat.as_ref().is_some_and(|c| c.stream);
        let limit = self.config.response_store.max_entry_bytes;
        let kept_by_vendor = status == 200 && self.answered_by_a_keeper();
        match &mut self.stored {
            Some(pending) if status == 200 && !kept_by_vendor => {
                let limit = usize::try_from(limit).unwrap_or(usize::MAX);
                pending.capture = Some(Capture::new(stream, limit));
            }
            _ => self.stored = None,
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

    /// A piece of the answer; at its end, the response is stored.
    pub(super) fn capture_body(&mut self, size: usize, end_of_stream: bool) {
        let Some(capture) = self.stored.as_mut().and_then(|p| p.capture.as_mut()) else {
            return;
        };
        match self.host.body(Buffer::Response, 0, size) {
            Ok(chunk) => capture.feed(&chunk),
            Err(e) => {
                log_once(&e, "the response is not stored");
                self.stored = None;
                return;
            }
        }
        if !end_of_stream && !capture.complete() {
            return;
        }
        let Some(pending) = self.stored.take() else {
            return;
        };
        let Some(response) = pending.capture.and_then(Capture::finish) else {
            return;
        };
        // Not ours (a vendor that keeps its own responses answered).
        if response.get("id").and_then(Value::as_str) != Some(pending.id.as_str()) {
            return;
        }
        let entry = Entry {
            id: pending.id,
            prev: pending.previous,
            input: pending.input,
            response,
        };
        let bounds = self.config.response_store;
        let now = unix_seconds(&self.host);
        let owner = self.owner();
        if let Put::Stored(usage) = store::put(&shared(&self.host), &bounds, owner, &entry, now) {
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

    /// A call on a response the gateway stored, answered from the store.
    pub(super) fn answer_stored(
        &mut self,
        op: StoredOp,
        id: &str,
        query: &str,
    ) -> Result<Flow, GatewayError> {
        let bounds = self.config.response_store;
        let now = unix_seconds(&self.host);
        let owner = self.owner().to_owned();
        let shared = shared(&self.host);
        if op == StoredOp::Delete {
            let usage = store::delete(&shared, &bounds, &owner, id, now)
                .ok_or_else(|| resolve::not_found(id))?;
            self.store_gauges(usage);
            return Ok(self.reply_json(&resolve::deleted(id), &[]));
        }
        let entry =
            store::get(&shared, &bounds, &owner, id, now).ok_or_else(|| resolve::not_found(id))?;
        let body = match op {
            StoredOp::Retrieve => serde_json::to_vec(&entry.response).unwrap_or_default(),
            StoredOp::InputItems => resolve::input_items_page(&entry, query)?,
            StoredOp::Cancel | StoredOp::Delete => return Err(resolve::not_cancellable()),
        };
        Ok(self.reply_json(&body, &[]))
    }
}
