//! What the two roles of one request hand each other.
//!
//! The edge role parses the unified request once; every attempt's upstream
//! role needs it again, and the edge role needs the attempts' records back
//! when the request ends. Both roles normally run in one wasm VM (same
//! `vm_config`), and a request's filters all run on one worker thread, so
//! they share these in memory: a per-VM table of [`Exchange`]s, keyed by a
//! [`Token`] that the edge role leaves in filter state with the model group
//! and candidate (a [`Handoff`]). Host calls are the gateway's main cost
//! inside Envoy; this saves a parse and several filter-state round trips per
//! attempt.
//!
//! When the roles run in different VMs, the upstream role finds no exchange
//! for the token and falls back to filter state: it parses the body itself
//! and writes its record where the edge role reads it. Same result, slower.
//!
//! Attempts translate the request as the edge role parsed it: a filter
//! placed between the two roles that rewrites the body is not seen (in
//! separate VMs it would be).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
use std::rc::Rc;

use crate::metering::AttemptRecord;
use crate::model::call::Call;
use crate::model::{Api, Request};

/// One request's shared state.
#[derive(Debug)]
pub struct Exchange {
    /// The unified request, parsed and validated by the edge role; dropped
    /// once a vendor accepted it (a long stream need not hold it), after
    /// which an attempt parses the body itself.
    pub request: Option<Request>,
    /// Attempts that found this exchange (so far): records come back here,
    /// not through filter state, once it is not 0.
    pub attempts: u64,
    /// Every attempt so far, as `provider/model:outcome`, by attempt number
    /// (index 0: attempt 1; empty: an attempt that has not answered yet).
    pub route: Vec<String>,
    /// Every attempt's record, by attempt number (index 0: attempt 1).
    pub records: Vec<AttemptRecord>,
    /// The response cache's order and what was captured for it.
    pub cache: crate::cache::capture::Order,
}

impl Exchange {
    /// Stores attempt number `attempt`'s record (1-based).
    pub fn set_record(&mut self, attempt: u64, record: &AttemptRecord) {
        let index = usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX);
        if index >= MAX_RECORDS {
            return;
        }
        if self.records.len() <= index {
            self.records.resize(index + 1, AttemptRecord::default());
        }
        if let Some(slot) = self.records.get_mut(index) {
            slot.clone_from(record);
        }
    }

    /// Sets attempt number `attempt`'s route entry (1-based).
    pub fn set_route(&mut self, attempt: u64, entry: String) {
        let index = usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX);
        if index >= MAX_RECORDS {
            return;
        }
        if self.route.len() <= index {
            self.route.resize(index + 1, String::new());
        }
        if let Some(slot) = self.route.get_mut(index) {
            *slot = entry;
        }
    }
}

/// Attempts whose records are kept (Envoy's retries are far fewer).
pub const MAX_RECORDS: usize = 16;

pub type Shared = Rc<RefCell<Exchange>>;

/// Names one exchange. The nonce tells VMs apart: a token from another VM
/// never finds an exchange here, even when its counter matches one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    nonce: u64,
    id: u64,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}.{:x}", self.nonce, self.id)
    }
}

impl Token {
    fn parse(text: &str) -> Option<Self> {
        let (nonce, id) = text.split_once('.')?;
        Some(Self {
            nonce: u64::from_str_radix(nonce, 16).ok()?,
            id: u64::from_str_radix(id, 16).ok()?,
        })
    }
}

/// Requests in flight on one worker that share an exchange; beyond it, new
/// requests use the filter-state fallback, so the table stays bounded.
const MAX_OPEN: usize = 16_384;

struct Table {
    nonce: u64,
    next_id: u64,
    open: HashMap<u64, Shared>,
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table {
        // Random per VM (std seeds RandomState from the host's random source).
        nonce: std::collections::hash_map::RandomState::new().hash_one(0u64),
        next_id: 0,
        open: HashMap::new(),
    });
}

/// Starts sharing `request` (none for a call without a body); `None` when
/// the table is full.
pub fn open(request: Option<Request>) -> Option<(Token, Shared)> {
    TABLE.with(|table| {
        let mut table = table.borrow_mut();
        if table.open.len() >= MAX_OPEN {
            return None;
        }
        table.next_id = table.next_id.wrapping_add(1);
        let token = Token {
            nonce: table.nonce,
            id: table.next_id,
        };
        let exchange = Rc::new(RefCell::new(Exchange {
            request,
            attempts: 0,
            route: Vec::new(),
            records: Vec::new(),
            cache: Default::default(),
        }));
        table.open.insert(token.id, Rc::clone(&exchange));
        Some((token, exchange))
    })
}

/// The exchange `token` names, if it lives in this VM.
pub fn find(token: Token) -> Option<Shared> {
    TABLE.with(|table| {
        let table = table.borrow();
        (table.nonce == token.nonce)
            .then(|| table.open.get(&token.id).cloned())
            .flatten()
    })
}

/// Ends sharing (the edge role's request is over).
pub fn close(token: Token) {
    TABLE.with(|table| {
        let mut table = table.borrow_mut();
        if table.nonce == token.nonce {
            table.open.remove(&token.id);
        }
    });
}

/// What the edge role leaves in filter state for every attempt: the one
/// value the upstream role reads before it knows the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// The API the client speaks.
    pub api: Api,
    /// The native call, for a request that is not a generation.
    pub call: Option<Call>,
    /// The exchange, when the edge role could open one.
    pub token: Option<Token>,
    /// The candidate the edge role chose (index in the group).
    pub candidate: Option<usize>,
    pub request_id: String,
    pub group: String,
    /// The id a translated Responses answer gets when the gateway stores
    /// it (`crate::responses_store`).
    pub response_id: Option<String>,
    /// The vendor model a request routed to a discovered model asks for
    /// (`crate::discovery`), at the provider that lists it.
    pub model: Option<String>,
}

impl Handoff {
    /// `api;call;token;candidate;request_id;group`. The group comes last:
    /// it is the only part that may contain `;` (request ids are
    /// `[A-Za-z0-9._:-]`, a call encodes its query).
    pub fn encode(&self) -> String {
        let call = self.call.as_ref().map(Call::encode).unwrap_or_default();
        let token = self.token.map(|t| t.to_string()).unwrap_or_default();
        let mut candidate = self.candidate.map(|c| c.to_string()).unwrap_or_default();
        // Only a response the gateway stores adds its id (`candidate/id`).
        if let Some(id) = &self.response_id {
            candidate.push('/');
            candidate.push_str(id);
        }
        // Only a discovered model's request adds it, escaped (`...!model`).
        if let Some(model) = &self.model {
            candidate.push('!');
            candidate.push_str(&crate::formats::url::encode_segment(model));
        }
        format!(
            "{};{call};{token};{candidate};{};{}",
            self.api.name(),
            self.request_id,
            self.group
        )
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut parts = text.splitn(6, ';');
        let api = Api::for_name(parts.next()?)?;
        let call = match parts.next()? {
            "" => None,
            call => Some(Call::decode(call)?),
        };
        let token = parts.next()?;
        let part = parts.next()?;
        let (part, model) = match part.split_once('!') {
            Some((part, model)) => (part, Some(crate::formats::url::decode_segment(model))),
            None => (part, None),
        };
        let (candidate, response_id) = match part.split_once('/') {
            Some((candidate, id)) if crate::model::call::valid_id(id) => {
                (candidate, Some(id.to_owned()))
            }
            Some(_) => return None,
            None => (part, None),
        };
        let request_id = parts.next()?;
        let group = parts.next()?;
        Some(Self {
            api,
            call,
            token: Token::parse(token),
            candidate: candidate.parse().ok(),
            request_id: request_id.to_owned(),
            group: group.to_owned(),
            response_id,
            model,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::request::ChatRequest;

    fn request() -> ChatRequest {
        ChatRequest::parse(br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#).unwrap()
    }

    fn open_request() -> Option<(Token, Shared)> {
        open(Some(crate::model::Request::Chat(Box::new(
            request().into(),
        ))))
    }

    #[test]
    fn an_open_exchange_is_found_until_closed() {
        let (token, exchange) = open_request().unwrap();
        exchange.borrow_mut().route.push("a/m:200".into());
        let found = find(token).unwrap();
        assert_eq!(found.borrow().route, ["a/m:200"]);
        assert_eq!(found.borrow().request.as_ref().unwrap().model(), "m");
        close(token);
        assert!(find(token).is_none());
    }

    #[test]
    fn a_token_from_another_vm_finds_nothing() {
        let (token, _exchange) = open_request().unwrap();
        let foreign = Token {
            nonce: token.nonce.wrapping_add(1),
            id: token.id,
        };
        assert!(find(foreign).is_none());
        close(foreign);
        assert!(
            find(token).is_some(),
            "closing a foreign token closes nothing"
        );
        close(token);
    }

    #[test]
    fn the_table_is_bounded() {
        let mut tokens = Vec::new();
        while let Some((token, _)) = open_request() {
            tokens.push(token);
        }
        assert_eq!(tokens.len(), MAX_OPEN);
        close(tokens[0]);
        let (again, _) = open_request().expect("room again after a close");
        for token in tokens.into_iter().chain([again]) {
            close(token);
        }
    }

    #[test]
    fn handoff_round_trips() {
        let (token, _exchange) = open_request().unwrap();
        for handoff in [
            Handoff {
                api: Api::OpenAiChat,
                call: None,
                token: Some(token),
                candidate: Some(2),
                request_id: "req-1".into(),
                group: "chat;with;semicolons".into(),
                response_id: Some("resp_gw0123".into()),
                model: Some("claude-x@1;a!b/c".into()),
            },
            Handoff {
                api: Api::OpenAiChat,
                call: None,
                token: None,
                candidate: None,
                request_id: "r".into(),
                group: String::new(),
                response_id: None,
                model: None,
            },
            Handoff {
                api: Api::OpenAiResponses,
                call: Some(crate::surfaces::routed_call(
                    "GET",
                    "/v1/responses/resp_1/input_items",
                    "a=1;b=2",
                )),
                token: None,
                candidate: Some(0),
                request_id: "r".into(),
                group: "g;h".into(),
                response_id: None,
                model: Some("gpt-4o".into()),
            },
        ] {
            assert_eq!(Handoff::decode(handoff.encode().as_bytes()), Some(handoff));
        }
        close(token);
        assert_eq!(Handoff::decode(b"no separators"), None);
        assert_eq!(Handoff::decode(&[0xff, b';', b';', b';']), None);
        assert_eq!(Handoff::decode(b"unknown_api;;;;r;g"), None);
        assert_eq!(Handoff::decode(b"openai_chat;unknown_call;;;r;g"), None);
    }
}
