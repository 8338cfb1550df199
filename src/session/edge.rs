//! The edge session (the edge role): the HCM filter in front of the router.
//! Authenticates the caller, validates the client's request before any
//! upstream is touched, admits it by its rate limits, picks the model group
//! and its cluster, meters the request when it ends, and turns Envoy's own
//! local replies into unified errors. It talks to the proxy only through
//! [`Host`].
//!
//! This file is the state machine and its callbacks, in order; its state is
//! grouped by what it is for in `edge/facts.rs` (who is calling, what
//! admission decided, what the response came to); what they call has files
//! of its own: admission and routing once the body is read
//! (`edge/route.rs`), the rate limits (`edge/limiter.rs`, `edge/global.rs`),
//! metering when the request ends (`edge/meter.rs`), and the tests.

use std::rc::Rc;

use super::attempt::report::span_provider_properties;
use super::channel::AttemptChannel;
use super::host::{
    ignore, log_once, micros_since, unix_millis, Buffer, CalloutAnswer, Flow, Host, Map, Phase,
    PhaseTimer,
};
use super::self_call;
use super::{reply_or_reset, send_error, Session, HANDOFF_PROPERTY, LOG_PROPERTY, ROUTE_PROPERTY};
use crate::auth::presented_key;
use crate::config::Config;
use crate::config::ModelGroup;
use crate::dialects::{dialect, has_call};
use crate::error::{ErrorCode, GatewayError};
use crate::headers::{Headers, CREDENTIAL_HEADERS};
use crate::limits::{Reservation, Usage as LimitUsage};
use crate::metering::{price_for, AttemptRecord, Bill, RequestLog, TokenCounts};
use crate::model::call::Call;
use crate::model::request::{valid_request_id, ChatRequest};
use crate::model::response::Usage;
use crate::model::{Api, Generation, Request};
use crate::routing::{Candidate, Needs};
use crate::session::exchange::{self, Handoff, Token};
use crate::surfaces::route::PathFacts;
use crate::surfaces::{self, parse_call_body, surface, Operation, QueryKey, Surface};
pub use diagnostics::prepare;
use limiter::RequestLimits;
use replies::{error_message, is_unified_error, retry_overflowed, RETRY_OVERFLOW};
use route::check_counts;

mod batch;
#[cfg(test)]
mod batch_tests;
mod cache;
mod diagnostics;
#[cfg(test)]
mod diagnostics_tests;
mod discovered;
mod facts;
mod fleet;
pub mod global;
pub mod limiter;
mod meter;
mod models;
mod own_call;
mod replies;
mod route;
mod seen_limits;
mod semantic;
mod stored;
#[cfg(test)]
mod stored_tests;
mod summarise;
#[cfg(test)]
mod tests;

/// Header the route's `cluster_header` reads. Always ours, never the client's.
pub const CLUSTER_HEADER: &str = "x-llm-cluster";

/// A generation's operation name (OpenTelemetry's `gen_ai.operation.name`).
const GENERATION: &str = "chat";

/// Request headers only the gateway may set: dropped from every request
/// (a self-call's are read first, `session::self_call`).
const INTERNAL_HEADERS: &[&str] = &[
    CLUSTER_HEADER,
    "x-llm-provider",
    "x-llm-model",
    self_call::HEADER,
    self_call::CANDIDATE_HEADER,
    self_call::KEY_HEADER,
    self_call::ADMITS_HEADER,
];

enum State {
    /// Not an API path of ours: pass through untouched.
    Passthrough,
    /// Buffering a generation request's body (and what its path said).
    Generate(PathFacts),
    /// Buffering a native call's body (`/v1/messages/count_tokens`).
    Call(Call),
    /// An embeddings batch answered by its parts (`edge/batch.rs`).
    Splitting,
    /// The response is an Envoy local reply being rewritten into a unified error.
    RewriteLocalReply(ErrorCode),
    /// A vendor's error (from `provider`) that Envoy would have retried but
    /// for the circuit breaker's `max_retries`: its message names that.
    NameRetryOverflow { code: ErrorCode, provider: String },
    /// Forwarded; the upstream role translates the answer.
    Forwarded,
    /// We answered ourselves (an error, `/v1/models`): nothing to rewrite.
    Replied,
}

pub struct Edge<H: Host> {
    /// Seen by the sessions' tests (`replay_script`).
    pub(super) host: H,
    config: Rc<Config>,
    state: State,
    /// Who is calling and how.
    client: facts::Client,
    /// What admission and routing decided.
    admission: facts::Admission,
    /// What the response came to.
    outcome: facts::Outcome,
    /// The request's exchange (see `exchange`), closed when the request ends.
    exchange: Option<Token>,
    /// How this request and its attempts share the request and records.
    channel: AttemptChannel,
    /// The parts of an embeddings batch split by this request.
    batch: Option<Box<batch::Batch>>,
    /// The response cache's part, on a cached group (`edge/cache.rs`).
    cache: Option<cache::Caching>,
    /// The response store's part: a Responses answer to store once it has
    /// passed, a call to the state service out (`edge/stored.rs`).
    responses: stored::Responses,
    /// The prompt and answer, when the diagnostics view captures content.
    capture: Option<Box<diagnostics::Capture>>,
    /// Context fitting's summaries being made, the client's headers (`edge/summarise.rs`).
    summarising: Option<(Box<summarise::Summarising>, Headers)>,
}

/// Facts about a chat request, for metering at the end (filled in as far
/// as the request got).
#[derive(Default)]
struct ChatFacts {
    /// The operation's name in metrics and the log (`chat`, `embeddings`...).
    operation: &'static str,
    /// A batch the edge may split into parts (`Call::splits_into_parts`):
    /// its answer may carry the vendor's batch limit, withheld from clients.
    splits_into_parts: bool,
    group: String,
    request_model: String,
    stream: bool,
    estimated_prompt_tokens: u64,
}

impl<H: Host> Edge<H> {
    pub fn new(host: H, config: Rc<Config>) -> Self {
        Self {
            host,
            config,
            state: State::Passthrough,
            client: facts::Client::default(),
            admission: facts::Admission::default(),
            outcome: facts::Outcome::default(),
            exchange: None,
            channel: AttemptChannel::FilterState,
            batch: None,
            cache: None,
            responses: stored::Responses::default(),
            capture: None,
            summarising: None,
        }
    }

    fn reject(&mut self, error: GatewayError) -> Flow {
        self.outcome.status = surface(self.client.api).status(error.code);
        self.outcome.code = Some(error.code);
        match &self.admission.limits {
            Some(limits) => {
                limiter::send_error(
                    &self.host,
                    self.client.api,
                    &error,
                    &self.client.request_id,
                    limits,
                );
            }
            None => send_error(&self.host, self.client.api, &error, &self.client.request_id),
        }
        self.state = State::Replied;
        Flow::Pause
    }

    /// Authenticates the caller and removes its key (and any vendor
    /// credential) from the request, so it never reaches a vendor.
    fn authenticate(&mut self, query_key: Option<&str>) -> Result<(), GatewayError> {
        // A self-call is its request's, authenticated already.
        if self.client.part.is_some() {
            return Ok(());
        }
        let headers = &self.client.request_headers;
        let key = |name: &str| {
            headers.text(name).map_err(|_| {
                let mut e = GatewayError::new(
                    ErrorCode::AuthFailed,
                    format!("the {name} header is not valid UTF-8, so it holds no gateway key"),
                );
                e.param = Some(name.to_owned());
                e
            })
        };
        self.client.caller = self.config.auth.authenticate(
            presented_key(key("authorization")?, key("x-api-key")?)
                .or(key("x-goog-api-key")?.map(str::trim))
                .or(query_key),
        )?;
        // A key the proxy would not remove must not travel on: refused.
        for name in CREDENTIAL_HEADERS {
            if self.client.request_headers.has(name) {
                self.host.set_header(Map::Request, name.as_bytes(), None)?;
            }
        }
        Ok(())
    }

    fn reply_json(&mut self, body: &[u8], extra: &[(&str, &[u8])]) -> Flow {
        let mut headers: Vec<(&str, &[u8])> = vec![
            ("content-type", b"application/json"),
            ("x-request-id", self.client.request_id.as_bytes()),
        ];
        headers.extend_from_slice(extra);
        reply_or_reset(&self.host, 200, &headers, body);
        self.outcome.status = 200;
        self.state = State::Replied;
        Flow::Pause
    }

    /// Checks the headers of a request with a JSON body, before buffering it.
    fn check_body_headers(&self, end_of_stream: bool) -> Result<(), GatewayError> {
        if let Some(ct) = self.client.text("content-type") {
            if !ct.to_ascii_lowercase().starts_with("application/json") {
                return Err(GatewayError::invalid(
                    "content-type",
                    "content-type must be application/json",
                ));
            }
        }
        if end_of_stream {
            return Err(GatewayError::invalid("body", "request body is empty"));
        }
        self.check_body_length()
    }

    /// Refuses an oversized body before buffering a byte of it.
    fn check_body_length(&self) -> Result<(), GatewayError> {
        let max = self.config.limits.max_body_bytes;
        if let Some(length) = self.client.text("content-length") {
            if length.trim().parse::<u64>().map_or(true, |n| n > max) {
                return Err(GatewayError::new(
                    ErrorCode::PayloadTooLarge,
                    format!("request body is larger than {max} bytes"),
                ));
            }
        }
        Ok(())
    }

    /// A 429 of Envoy's own: the global rate limit service's refusal
    /// (answered as the gateway's limit), else a vendor's limit.
    fn global_refusal(&mut self) -> ErrorCode {
        let Some(refusal) = global::GlobalRefusal::read(&self.host) else {
            return ErrorCode::UpstreamRateLimit;
        };
        refusal.set_headers(&self.host);
        if let Some(limits) = &self.admission.limits {
            limits.refund(&self.host);
        }
        let group = self
            .admission
            .chat
            .as_ref()
            .map_or("", |c| c.group.as_str());
        refusal.count(&self.host, self.key_name(), group);
        self.admission.global_refusal = Some(refusal);
        ErrorCode::RateLimited
    }
}

impl<H: Host> Drop for Edge<H> {
    fn drop(&mut self) {
        if let Some(token) = self.exchange.take() {
            exchange::close(token);
        }
    }
}

impl<H: Host> Session for Edge<H> {
    fn on_request_headers(&mut self, end_of_stream: bool) -> Flow {
        self.outcome.started = self.host.now();
        // Unread headers, or a routing header of the client's the proxy
        // would not drop: the request goes no further.
        self.client.request_headers = match self.host.headers(Map::Request) {
            Ok(headers) => headers,
            Err(e) => return self.reject(e.into()),
        };
        self.client.part = self_call::verified(&self.host, &self.client.request_headers);
        for name in INTERNAL_HEADERS {
            if self.client.request_headers.has(name) {
                if let Err(e) = self.host.set_header(Map::Request, name.as_bytes(), None) {
                    return self.reject(e.into());
                }
            }
        }
        let client_id = self
            .client
            .request_headers
            .text("x-request-id")
            .ok()
            .flatten();
        self.client.request_id = match client_id {
            Some(id) if valid_request_id(id) => id.to_owned(),
            _ => {
                let nanos = self
                    .host
                    .now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default();
                let id = format!("llm-{nanos:x}");
                if let Err(e) =
                    self.host
                        .set_header(Map::Request, b"x-request-id", Some(id.as_bytes()))
                {
                    self.client.request_id.clone_from(&id);
                    return self.reject(e.into());
                }
                id
            }
        };
        // The path as bytes: over HTTP/2 it may hold any byte.
        let full_path = self.client.request_headers.get(":path").unwrap_or_default();
        let (raw_path, raw_query) = match full_path.iter().position(|&b| b == b'?') {
            Some(end) => (
                full_path.get(..end).unwrap_or_default(),
                full_path.get(end + 1..).unwrap_or_default(),
            ),
            None => (full_path, &[][..]),
        };
        let path = String::from_utf8_lossy(raw_path);
        let query = String::from_utf8_lossy(raw_query);
        // Read as text below (a method that is not UTF-8 is refused there).
        let method = self
            .client
            .request_headers
            .text(":method")
            .ok()
            .flatten()
            .unwrap_or_default();
        let Some(route) = surfaces::route(method, &path, &query) else {
            if crate::diagnostics::owns(&path) {
                let (method, path, query) =
                    (method.to_owned(), path.to_string(), query.to_string());
                return self.serve_diagnostics(&method, &path, &query);
            }
            self.client.request_headers = Headers::default();
            return Flow::Continue;
        };
        self.client.api = route.api;
        // A key in the query, where the API's clients may give it so: read,
        // then removed from the path (it never travels on, nor reaches a log).
        let query_key = surfaces::key_in_query(route.api, &path, &query);
        if route.metered {
            let (operation, splits_into_parts) = match &route.operation {
                Ok(Operation::Call(call)) => (call.operation_name(), call.splits_into_parts()),
                _ => (GENERATION, false),
            };
            self.admission.chat = Some(ChatFacts {
                operation,
                splits_into_parts,
                ..ChatFacts::default()
            });
        }
        if let Some(QueryKey { path, .. }) = &query_key {
            if let Err(e) = self
                .host
                .set_header(Map::Request, b":path", Some(path.as_bytes()))
            {
                return self.reject(e.into());
            }
        }
        if let Err(e) = self.authenticate(query_key.as_ref().map(|k| k.key.as_str())) {
            return self.reject(e);
        }
        if let Err(e) = self.client.check_text_headers() {
            return self.reject(e);
        }
        // Read only where pins are allowed (elsewhere the header is dropped unread).
        if self.config.allow_provider_pin {
            match self.client.request_headers.text("x-llm-provider") {
                Ok(pin) => self.client.provider_pin = pin.map(str::to_owned),
                Err(_) => {
                    return self.reject(GatewayError::invalid(
                        "x-llm-provider",
                        "the x-llm-provider header is not valid UTF-8",
                    ))
                }
            }
        }
        let operation = match route.operation {
            Ok(operation) => operation,
            Err(e) => return self.reject(e),
        };
        match operation {
            Operation::Generate(facts) => match self.check_body_headers(end_of_stream) {
                Ok(()) => {
                    self.state = State::Generate(facts);
                    Flow::Pause
                }
                Err(e) => self.reject(e),
            },
            Operation::Call(call) => match self.on_call_headers(call, end_of_stream) {
                Ok(flow) => flow,
                Err(e) => self.reject(e),
            },
            Operation::ListModels => {
                let body = self.models_list();
                self.reply_json(&body, &[])
            }
            Operation::Model(id) => match self.model_retrieve(&id) {
                Ok(body) => self.reply_json(&body, &[]),
                Err(e) => self.reject(e),
            },
        }
    }

    fn on_request_body(&mut self, size: usize, end_of_stream: bool) -> Flow {
        if !matches!(self.state, State::Generate(_) | State::Call(_)) {
            return Flow::Continue;
        }
        if !end_of_stream {
            // Without content-length, enforce the limit while buffering.
            if size as u64 > self.config.limits.max_body_bytes {
                let max = self.config.limits.max_body_bytes;
                return self.reject(GatewayError::new(
                    ErrorCode::PayloadTooLarge,
                    format!("request body is larger than {max} bytes"),
                ));
            }
            return Flow::Pause;
        }
        let timer = PhaseTimer::start(&self.host, self.config.overhead_histograms);
        let body = match self.host.body(Buffer::Request, 0, size) {
            Ok(body) => body,
            Err(e) => return self.reject(e.into()),
        };
        self.capture_prompt(&body);
        if let State::Call(call) = &self.state {
            let call = call.clone();
            let limits = &self.config.limits;
            let routed = parse_call_body(&call, &body)
                .and_then(|request| {
                    request
                        .as_ref()
                        .and_then(Request::chat)
                        .map_or(Ok(()), |r| check_counts(limits, r))
                        .map(|()| request)
                })
                .and_then(|request| self.route_call(call, request));
            timer.stop(&self.host, Phase::Admit);
            return routed.unwrap_or_else(|e| self.reject(e));
        }
        let facts = match &self.state {
            State::Generate(facts) => facts.clone(),
            _ => PathFacts::default(),
        };
        // The fleet's stored state it refers to, fetched first (it waits).
        let flow = match self.fetch_state(&facts, &body) {
            Some(flow) => flow,
            None => self.generate(&facts, &body),
        };
        timer.stop(&self.host, Phase::Admit);
        flow
    }

    fn on_response_headers(&mut self, end_of_stream: bool) -> Flow {
        if matches!(self.state, State::Passthrough | State::Replied) {
            return Flow::Continue;
        }
        if end_of_stream {
            self.on_response_end();
        }
        // The edge's own headers on an answer the attempt already made
        // (or on Envoy's reply): a failed one is logged and left out.
        ignore(self.host.set_header(
            Map::Response,
            b"x-request-id",
            Some(self.client.request_id.as_bytes()),
        ));
        if let Some(limits) = &self.admission.limits {
            limits.set_response_headers(&self.host);
        }
        self.cache_header();
        let status = self
            .host
            .header(Map::Response, ":status")
            .and_then(|s| std::str::from_utf8(&s).ok()?.parse::<u16>().ok())
            .unwrap_or(502);
        // Responses through the upstream role carry x-llm-provider; anything
        // else that failed is Envoy's own reply (no healthy upstream, timeout, 413...).
        // (Two single lookups: the second only for errors, and each is
        // cheaper than listing every header.)
        self.outcome.status = status;
        if self.responses.storing() {
            self.capture_answer(if end_of_stream { 0 } else { status });
        }
        if self.client.part.is_none() {
            self.withhold_batch_limit();
        }
        let provider = (status >= 400)
            .then(|| self.host.header(Map::Response, "x-llm-provider"))
            .flatten();
        if status >= 400 && provider.is_none() {
            let code = match status {
                429 => self.global_refusal(),
                _ => ErrorCode::from_status(status),
            };
            self.outcome.status = surface(self.client.api).status(code);
            self.outcome.code = Some(code);
            // Envoy's reply after its attempts (a refused connection, timeouts).
            let attempts = self.channel.attempt_count(&self.host).to_string();
            ignore(self.host.set_header(
                Map::Response,
                b"x-llm-attempts",
                Some(attempts.as_bytes()),
            ));
            if !end_of_stream {
                self.state = State::RewriteLocalReply(code);
            }
            let status = self.outcome.status.to_string();
            ignore(
                self.host
                    .set_header(Map::Response, b":status", Some(status.as_bytes())),
            );
            ignore(
                self.host
                    .set_header(Map::Response, b"content-type", Some(b"application/json")),
            );
            ignore(self.host.set_header(Map::Response, b"content-length", None));
        } else if status >= 400 {
            // An error the upstream role answered with the gateway's status
            // for its code: the client's API may answer it with another
            // (Anthropic's 529 for a busy vendor).
            let code = ErrorCode::from_status(status);
            let client = surface(self.client.api).status(code);
            if code.status() == status && client != status {
                self.outcome.status = client;
                ignore(self.host.set_header(
                    Map::Response,
                    b":status",
                    Some(client.to_string().as_bytes()),
                ));
            }
            if !end_of_stream && retry_overflowed(&self.host) {
                let provider = String::from_utf8_lossy(&provider.unwrap_or_default()).into_owned();
                self.state = State::NameRetryOverflow { code, provider };
                ignore(self.host.set_header(Map::Response, b"content-length", None));
            }
        }
        if self.client.part.is_some() {
            self.report_part();
        }
        Flow::Continue
    }

    fn on_response_body(&mut self, size: usize, end_of_stream: bool) -> Flow {
        // Held while the fleet's store takes the answer's entry.
        let mut held = self.responses.waiting.is_some();
        if !held && self.responses.storing() {
            held = self.capture_body(size, end_of_stream) == Flow::Pause;
        }
        if self.admission.chat.is_some() {
            self.capture_answer_chunk(size);
        }
        if end_of_stream && !self.outcome.response_complete {
            self.on_response_end();
            // The fleet's store taking the cache's entry holds it too.
            held |= self.cache.is_some() && self.store_answer();
        }
        if held {
            return Flow::Pause;
        }
        let code = match &self.state {
            State::RewriteLocalReply(code) | State::NameRetryOverflow { code, .. } => *code,
            _ => return Flow::Continue,
        };
        if !end_of_stream {
            return Flow::Pause;
        }
        // Unreadable, it is rewritten all the same (without what it said).
        let original = self
            .host
            .body(Buffer::Response, 0, size)
            .unwrap_or_default();
        let error = if let State::NameRetryOverflow { provider, .. } = &self.state {
            let said = error_message(&original);
            GatewayError::envoy_reply(code, RETRY_OVERFLOW, said.as_bytes()).with_provider(provider)
        } else if let Some(refusal) = &self.admission.global_refusal {
            refusal.error()
        } else {
            // Already in the unified envelope (the HCM's local_reply_config).
            if is_unified_error(&original) {
                return Flow::Continue;
            }
            let details = self
                .host
                .property(&["response", "code_details"])
                .ok()
                .flatten()
                .unwrap_or_default();
            GatewayError::envoy_reply(code, &details, &original)
        };
        let body = surface(self.client.api).render_error(&error, Some(&self.client.request_id));
        if let Err(e) = self.host.set_body(Buffer::Response, 0, size, &body) {
            // The headers went: the stream is cut rather than answered
            // with what the proxy said instead.
            log_once(&e, "the stream is reset");
            ignore(self.host.reset_stream());
            return Flow::Pause;
        }
        Flow::Continue
    }

    fn on_log(&mut self) {
        // A self-call is metered by its request.
        if self.client.part.is_some() {
            self.settle_part();
            return;
        }
        if let Some(chat) = &self.admission.chat {
            let timer = PhaseTimer::start(&self.host, self.config.overhead_histograms);
            self.meter(chat);
            timer.stop(&self.host, Phase::Log);
        }
    }

    /// The state service's (`edge/fleet.rs`, `edge/cache.rs`), a summariser's, else a part's answer.
    fn on_callout(&mut self, token: u32, answer: CalloutAnswer) -> Flow {
        if self.responses.waits_for(token) {
            self.on_state_answer(token, answer)
        } else if self.cache_waits_for(token) {
            self.on_cache_answer(answer)
        } else if self.summaries_wait_for(token) {
            self.on_summary(token, answer)
        } else {
            self.on_part(token, answer)
        }
    }
}
