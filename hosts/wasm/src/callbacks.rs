//! The proxy-wasm callbacks of both roles: each is handed to the request's
//! session (`session::edge`, `session::attempt`), which holds every decision.
//!
//! A session paused for what the root context brings (an attempt waiting
//! for a Google access token: `Session::waiting`) is registered here by its
//! context id; the root context wakes the registered ones ([`wake`]) on its
//! tick and when a token arrives, acting on each one's stream as its
//! effective context, and resumes those that go on.
//!
//! A session's own HTTP callouts are answered to its context (the SDK's
//! dispatcher makes it the effective one): the answer is read here and
//! handed to the session (`Session::on_callout`), and what it paused
//! resumed when it goes on: the response once its headers came, else the
//! request.

use std::cell::RefCell;
use std::rc::Rc;

use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::Action;

use llm_gateway_core::session::host::{CalloutAnswer, Flow, MAX_CALLOUT_BODY};
use llm_gateway_core::session::Session;

use crate::abi;

/// One request's (or attempt's) proxy-wasm context around its session,
/// shared with the registry of waiting sessions while it waits.
pub struct SessionContext<S> {
    id: u32,
    session: Rc<RefCell<S>>,
    /// The response's headers came: a callout answered now resumes the
    /// response, not the request.
    responding: bool,
}

impl<S: Session + 'static> SessionContext<S> {
    pub fn new(id: u32, session: S) -> Self {
        Self {
            id,
            session: Rc::new(RefCell::new(session)),
            responding: false,
        }
    }

    /// Hands `f` the session; a session busy in a wake is impossible (the
    /// wake lets go of it before resuming the stream), and would be left
    /// alone (`Continue`) rather than panic.
    fn with(&self, f: impl FnOnce(&mut S) -> Flow) -> Action {
        match self.session.try_borrow_mut() {
            Ok(mut session) => action(f(&mut session)),
            Err(_) => Action::Continue,
        }
    }

    /// After a request callback: a session that now waits is registered.
    fn register_if_waiting(&self) {
        if self.session.try_borrow().is_ok_and(|s| s.waiting()) {
            let session: Rc<RefCell<dyn Session>> = self.session.clone();
            WAITING.with(|w| {
                let mut w = w.borrow_mut();
                if !w.iter().any(|(id, _)| *id == self.id) {
                    w.push((self.id, session));
                }
            });
        }
    }
}

type Waiting = Vec<(u32, Rc<RefCell<dyn Session>>)>;

thread_local! {
    /// The sessions of this VM paused until the root context wakes them.
    static WAITING: RefCell<Waiting> = const { RefCell::new(Vec::new()) };
}

/// Wakes every waiting session of this VM (from root context `root`, whose
/// calls these are): each acts on its own stream as the effective context;
/// those that no longer wait are dropped from the registry, and those that
/// go on are resumed. A context the proxy no longer knows is dropped.
pub fn wake(root: u32) {
    let waiting = WAITING.with(|w| std::mem::take(&mut *w.borrow_mut()));
    if waiting.is_empty() {
        return;
    }
    let mut still = Vec::new();
    for (id, session) in waiting {
        if abi::set_effective_context(id).is_err() {
            continue;
        }
        let (flow, waits) = match session.try_borrow_mut() {
            Ok(mut s) => (s.on_wake(), s.waiting()),
            Err(_) => (Flow::Pause, true),
        };
        if waits {
            still.push((id, session));
        } else if flow == Flow::Continue {
            // The session is let go of first: resuming may call it again.
            if let Err(status) = abi::resume_request() {
                log::warn!("llm gateway: a request paused for a Google access token not resumed (status {status})");
            }
        }
    }
    // Sessions registered meanwhile stay too.
    WAITING.with(|w| w.borrow_mut().extend(still));
    let _ = abi::set_effective_context(root);
}

/// The proxy is done with context `id`: it no longer waits.
fn forget(id: u32) {
    WAITING.with(|w| {
        if let Ok(mut w) = w.try_borrow_mut() {
            w.retain(|(waiting, _)| *waiting != id);
        }
    });
}

fn action(flow: Flow) -> Action {
    match flow {
        Flow::Continue => Action::Continue,
        Flow::Pause => Action::Pause,
    }
}

/// The answer of the callout being answered (in `on_http_call_response`):
/// Envoy gives no headers for a call that failed (reset, refused).
pub fn callout_answer(num_headers: usize, body_size: usize) -> CalloutAnswer {
    if num_headers == 0 || body_size > MAX_CALLOUT_BODY {
        return CalloutAnswer::Failed;
    }
    let Ok(headers) = abi::headers(abi::Map::HttpCallResponse) else {
        return CalloutAnswer::Failed;
    };
    let status = headers
        .text(":status")
        .ok()
        .flatten()
        .and_then(|s| s.parse::<u16>().ok());
    match abi::body(abi::Buffer::HttpCallResponse, 0, body_size) {
        Ok(body) => CalloutAnswer::answered(status, headers, body),
        Err(_) => CalloutAnswer::Failed,
    }
}

impl<S: Session + 'static> Context for SessionContext<S> {
    fn on_http_call_response(
        &mut self,
        token_id: u32,
        num_headers: usize,
        body_size: usize,
        _num_trailers: usize,
    ) {
        let answer = callout_answer(num_headers, body_size);
        let flow = match self.session.try_borrow_mut() {
            Ok(mut session) => session.on_callout(token_id, answer),
            Err(_) => Flow::Pause,
        };
        self.register_if_waiting();
        // Resumed once the session let go of it (Envoy runs it after this
        // call returns).
        if flow == Flow::Continue {
            let resumed = if self.responding {
                abi::resume_response()
            } else {
                abi::resume_request()
            };
            if let Err(status) = resumed {
                log::warn!(
                    "llm gateway: a stream paused for a callout not resumed (status {status})"
                );
            }
        }
    }

    fn on_done(&mut self) -> bool {
        forget(self.id);
        if let Ok(mut session) = self.session.try_borrow_mut() {
            session.on_done();
        }
        true
    }
}

impl<S: Session + 'static> HttpContext for SessionContext<S> {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        let action = self.with(|s| s.on_request_headers(end_of_stream));
        self.register_if_waiting();
        action
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        let action = self.with(|s| s.on_request_body(size, end_of_stream));
        self.register_if_waiting();
        action
    }

    fn on_http_response_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        self.responding = true;
        self.with(|s| s.on_response_headers(end_of_stream))
    }

    fn on_http_response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        self.with(|s| s.on_response_body(size, end_of_stream))
    }

    fn on_log(&mut self) {
        if let Ok(mut session) = self.session.try_borrow_mut() {
            session.on_log();
        }
    }
}
