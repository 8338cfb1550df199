//! The edge role and the fleet's store: the state service
//! (`shared_state.service`), reached with HTTP callouts (`session::host`,
//! "Callouts") while the request or its answer waits. One call is out at
//! a time; each is bounded by the service's `timeout_ms`, counted in
//! `llm_gateway.shared_state` (`op`, `outcome`), and a service that does
//! not answer is logged at most once per `log_interval_seconds`: the
//! request then goes on with the proxy's own store (`edge/stored.rs`).
//!
//! - a Responses request that refers to stored responses waits for them
//!   before it is parsed: its chain in one call (`?chain=N`), continued
//!   from the first link the answer lacked, and each response whose items
//!   it references;
//! - a call on a stored response (retrieve, list its items, delete,
//!   cancel) waits for the entry;
//! - a stored response's answer is held at its end until the fleet's
//!   store has it, so a client that continues at once, on any proxy,
//!   finds it.

use std::sync::atomic::{AtomicU64, Ordering};

use super::stored::{Fetched, Found};
use super::*;
use crate::model::call::StoredOp;
use crate::responses_store::resolve::{References, MAX_CHAIN};
use crate::responses_store::{self as store, Entry, STORE};
use crate::session::host::{unix_seconds, CalloutAnswer};
use crate::shared_state::remote::{self, Call as StateCall, Op, Reply};

/// The call out, and what its answer is for.
pub(super) struct Waiting {
    token: u32,
    op: Op,
    why: Why,
}

impl Waiting {
    pub(super) fn token(&self) -> u32 {
        self.token
    }
}

pub(super) enum Why {
    /// The stored responses a Responses request refers to.
    Fetch(Box<Fetch>),
    /// A call on a stored response.
    Call {
        op: StoredOp,
        id: String,
        query: String,
    },
    /// The answer's end, held until its entry is stored.
    Store(Box<Entry>),
}

/// A Responses request's stored state being fetched: its body (parsed once
/// everything is known) and what the fleet's store said so far.
pub(super) struct Fetch {
    facts: PathFacts,
    body: Vec<u8>,
    found: Fetched,
    /// Responses still to ask for, and whether their chain is followed.
    todo: Vec<(String, bool)>,
    /// The one asked for now.
    asking: Option<(String, bool)>,
    /// Chain entries the fleet's store gave so far.
    entries: usize,
}

impl Fetch {
    pub(super) fn new(facts: PathFacts, body: Vec<u8>, references: &References) -> Self {
        let mut todo: Vec<(String, bool)> = references
            .items
            .iter()
            .map(|id| (id.clone(), false))
            .collect();
        // The chain first (a stack: the last is asked first).
        todo.extend(references.previous.clone().map(|id| (id, true)));
        Self {
            facts,
            body,
            found: Fetched::new(),
            todo,
            asking: None,
            entries: 0,
        }
    }

    pub(super) fn into_parts(self) -> (PathFacts, Vec<u8>, Fetched) {
        (self.facts, self.body, self.found)
    }

    /// The next call to make, if any is left.
    fn next_call(&mut self, namespace: &crate::shared_state::Namespace) -> Option<StateCall> {
        while let Some((id, chain)) = self.todo.pop() {
            if self.found.contains_key(&id) {
                continue;
            }
            let key = store::key(namespace, &id);
            let call = if chain {
                let left = MAX_CHAIN.saturating_sub(self.entries).max(1);
                StateCall::chain(STORE, namespace, &key, left)
            } else {
                StateCall::get(STORE, namespace, &key)
            };
            self.asking = Some((id, chain));
            return Some(call);
        }
        None
    }

    /// What the fleet's store answered for the one asked for. A chain's
    /// entries are each found; its last one's parent, when the answer
    /// stopped before it, is asked for next.
    fn answered(&mut self, reply: Reply) {
        let Some((id, chain)) = self.asking.take() else {
            return;
        };
        let Reply::Found(frames) = reply else {
            self.found.insert(id.clone(), Found::of(reply, &id));
            return;
        };
        let mut expected = Some(id.clone());
        let mut last = None;
        for frame in &frames {
            let Some(want) = expected.take() else { break };
            let Some(entry) = store::decode(frame, &want) else {
                // Not the entry the chain should hold next: not the service's.
                self.found.insert(want, Found::Unavailable);
                return;
            };
            self.entries += 1;
            expected = entry.prev.clone();
            last = entry.prev.clone();
            self.found.insert(want, Found::Entry(Box::new(entry)));
            if !chain {
                break;
            }
        }
        if let (true, Some(parent)) = (chain, last) {
            if self.entries < MAX_CHAIN {
                self.todo.push((parent, true));
            }
        }
    }
}

/// When the unreachable service was last logged (Unix seconds; every
/// worker's VM keeps its own).
static LOGGED: AtomicU64 = AtomicU64::new(0);

impl<H: Host> Edge<H> {
    /// The state service, when the fleet's store is configured.
    fn service(&self) -> Option<&remote::Service> {
        self.config.shared_state.service.as_ref()
    }

    /// Sends `call`, its answer to be read for `why`; `Err(why)` back
    /// when there is no service or the host refused the call (counted as
    /// unavailable).
    fn send(&mut self, call: StateCall, why: Why) -> Result<(), Why> {
        let Some(token) = self.send_state(&call) else {
            return Err(why);
        };
        self.responses.waiting = Some(Waiting {
            token,
            op: call.op,
            why,
        });
        Ok(())
    }

    /// Sends `call` to the state service: its callout's token, or `None`
    /// when there is no service or the host refused the call (counted as
    /// unavailable).
    pub(super) fn send_state(&self, call: &StateCall) -> Option<u32> {
        let service = self.service()?;
        let mut headers: Vec<(&str, &[u8])> = vec![
            (":method", call.method.as_bytes()),
            (":path", call.path.as_bytes()),
            (":authority", service.authority().as_bytes()),
        ];
        headers.extend(call.headers.iter().map(|(n, v)| (*n, v.as_bytes())));
        let sent = self
            .host
            .http_call(&service.cluster, &headers, &call.body, service.timeout_ms);
        match sent {
            Ok(token) => Some(token),
            Err(e) => {
                log_once(&e, "the state service is skipped");
                self.count_state(call.op, &Reply::Unavailable);
                None
            }
        }
    }

    /// Asks for what the fetch still lacks (`None`: a call is out, the
    /// request waits); with nothing left, the request goes on, resolved
    /// with what was found, and this is how it went on.
    pub(super) fn fetch_next(&mut self, mut fetch: Box<Fetch>) -> Option<Flow> {
        let namespace = self.namespace();
        while let Some(call) = fetch.next_call(&namespace) {
            match self.send(call, Why::Fetch(fetch)) {
                Ok(()) => return None,
                // The proxy's store answers for what could not be asked.
                Err(Why::Fetch(back)) => {
                    fetch = back;
                    fetch.answered(Reply::Unavailable);
                }
                Err(_) => return Some(Flow::Pause),
            }
        }
        Some(self.fetched(*fetch))
    }

    /// Stores `entry` in the fleet's store (`true`: the call is out, the
    /// answer's end waits for it).
    pub(super) fn put_remote(&mut self, entry: &Entry) -> bool {
        if self.service().is_none() {
            return false;
        }
        let namespace = self.namespace();
        let key = store::key(&namespace, &entry.id);
        let parent = entry.prev.as_deref().map(|p| store::key(&namespace, p));
        let ttl = self.config.response_store.ttl_seconds;
        let call = StateCall::put(
            STORE,
            &namespace,
            &key,
            parent.as_ref(),
            ttl,
            store::encode(entry),
        );
        self.send(call, Why::Store(Box::new(entry.clone()))).is_ok()
    }

    /// Asks the fleet's store for response `id` for a call on it (`true`:
    /// the call is out).
    pub(super) fn call_remote(&mut self, op: StoredOp, id: &str, why: Why) -> bool {
        if self.service().is_none() {
            return false;
        }
        let namespace = self.namespace();
        let key = store::key(&namespace, id);
        let call = match op {
            StoredOp::Delete => StateCall::delete(STORE, &namespace, &key),
            _ => StateCall::get(STORE, &namespace, &key),
        };
        self.send(call, why).is_ok()
    }

    /// The state service answered (or did not): what waited on it goes on.
    pub(super) fn on_state_answer(&mut self, token: u32, answer: CalloutAnswer) -> Flow {
        let Some(waiting) = self.responses.waiting.take_if(|w| w.token == token) else {
            return Flow::Pause;
        };
        let reply = match answer {
            CalloutAnswer::Answered {
                status,
                headers,
                body,
            } => remote::reply(waiting.op, Some((status, &headers, body))),
            CalloutAnswer::Failed => remote::reply(waiting.op, None),
        };
        self.count_state(waiting.op, &reply);
        match waiting.why {
            Why::Fetch(mut fetch) => {
                fetch.answered(reply);
                self.fetch_next(fetch).unwrap_or(Flow::Pause)
            }
            Why::Call { op, id, query } => {
                let answered = self.answer_stored_with(op, &id, &query, reply);
                answered.unwrap_or_else(|e| self.reject(e))
            }
            Why::Store(entry) => {
                self.put_local(&entry, reply == Reply::Done);
                Flow::Continue
            }
        }
    }

    /// Counts a call's outcome; a service that did not answer is logged
    /// at most once per interval.
    pub(super) fn count_state(&self, op: Op, reply: &Reply) {
        let outcome = match reply {
            Reply::Found(_) => "found",
            Reply::Missing => "missing",
            Reply::Done => "done",
            Reply::Unavailable => "unavailable",
        };
        ignore(self.host.count(
            "llm_gateway.shared_state",
            &[("op", op.name()), ("outcome", outcome)],
            1,
        ));
        if *reply != Reply::Unavailable {
            return;
        }
        let now = unix_seconds(&self.host);
        let interval = self.service().map_or(60, |s| s.log_interval_seconds);
        let last = LOGGED.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= interval
            && LOGGED
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            log::warn!(
                "llm gateway: the state service did not answer a {} (requests go on with this \
                 proxy's store; llm_gateway.shared_state counts each; logged once in {interval} s)",
                op.name()
            );
        }
    }
}
