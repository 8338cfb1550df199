//! The attempt session (the upstream role): runs once per attempt in the
//! router's upstream filters, after Envoy chose the cluster and host.
//! Translates the ORIGINAL client request for the provider this attempt
//! reached (endpoint metadata `llm.provider`), and the provider's answer
//! back, chunk by chunk. It talks to the proxy only through [`Host`].
//!
//! Long on purpose (about 1000 lines): one attempt's state machine, from the
//! vendor request to the last chunk, reads in order in one place; its record
//! (`attempt/report.rs`) and tests (`attempt/tests.rs`) are files of their
//! own.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use super::channel::AttemptChannel;
use super::host::{
    ignore, log_once, unix_seconds, Buffer, Flow, Host, HostError, Map, Phase, PhaseTimer,
};
use super::{reply_or_reset, send_error_with, Session, HANDOFF_PROPERTY};
use crate::config::Config;
use crate::dialects::{
    dialect, encode_generation, pass_through, ClientRequest, Dialect, StreamDecoder, Target,
    UpstreamRequest,
};
use crate::error::{ErrorCode, GatewayError};
use crate::exchange::Handoff;
use crate::headers::vendor_may_receive;
use crate::metering::AttemptRecord;
use crate::model::call::{self, Call};
use crate::model::embed::{no_embeddings, wrong_count, Encoding};
use crate::model::response::{Origin, Usage};
use crate::model::shared::Shared;
use crate::model::{Api, Request};
use crate::provider::Provider;
use crate::surfaces::{parse_call_body, stream_writer_echoing, surface, Echo};
use report::WAIT_HEADERS;

pub mod report;
#[cfg(test)]
mod tests;

/// Client and vendor speak the same API (and this provider serves it).
const PROVIDER_METADATA: [&str; 5] = [
    "xds",
    "upstream_host_metadata",
    "filter_metadata",
    "llm",
    "provider",
];
/// The ladder rung an endpoint serves (clusters `scripts/ladder_config.py`
/// writes): the model group whose candidate gives the attempt its model.
const RUNG_METADATA: [&str; 5] = [
    "xds",
    "upstream_host_metadata",
    "filter_metadata",
    "llm",
    "model_group",
];

enum Mode {
    /// Not a request the edge role accepted: leave it alone.
    Passthrough,
    /// Waiting for the request body, then for the vendor's answer.
    Request,
    /// Buffering a 2xx JSON answer.
    Complete,
    /// Buffering a native call's 2xx answer (passed on as it is).
    Native,
    /// Buffering a vendor's own token count (`Dialect::encode_count`), to
    /// be answered as Anthropic's count.
    Counted,
    /// Buffering a vendor's embeddings, to be answered in OpenAI's shape.
    Embedded,
    /// Buffering an error answer.
    Error(u16),
    /// Translating an event stream as it flows.
    Stream(Box<dyn StreamDecoder>),
    /// Holding a stream's headers until its first content (first-event
    /// gating); `held` is the translated output waiting in Envoy's buffer.
    Holding {
        decoder: Box<dyn StreamDecoder>,
        since: SystemTime,
        held: Vec<u8>,
    },
    /// The stream was turned into an error answer: drop what still comes.
    Discard,
}

pub struct Attempt<H> {
    /// Seen by the sessions' tests (`replay_script`).
    pub(super) host: H,
    config: Rc<Config>,
    mode: Mode,
    /// The API the client speaks.
    api: Api,
    /// The native call, for a request that is not a generation.
    call: Option<Call>,
    /// The call went to the vendor's own token count (`Dialect::encode_count`).
    counted: bool,
    /// What answering an embeddings request needs of it.
    embed: Option<EmbedFacts>,
    request_id: String,
    group: String,
    candidate: Option<usize>,
    /// The ladder rung this attempt landed on (a group of the ladder's
    /// fallback), when its endpoint names one.
    rung: Option<String>,
    provider_name: String,
    /// Vendor model this attempt asked for.
    model: String,
    attempt: u64,
    stream: bool,
    include_usage: bool,
    /// The request's web search was left out for this vendor (it has no
    /// search tool for it): the answer's `x-llm-dropped-tools` says so.
    dropped_web_search: bool,
    /// The request fields the client's API repeats in its answer.
    echo: Shared<Echo>,
    /// Reused for every translated chunk.
    out: Vec<u8>,
    /// When this attempt started, for time to first token (streams only).
    started: SystemTime,
    /// The vendor answered with a JSON content type (kept as it is).
    vendor_json: bool,
    /// The vendor sent `retry-after` itself (it passes to the client as is).
    vendor_retry_after: bool,
    /// Its `retry-after-ms`, in whole seconds, for a `retry-after` of ours.
    vendor_retry_after_ms: Option<u64>,
    /// It sent `retry-after` or `retry-after-ms`.
    vendor_wait_headers: bool,
    first_content: Option<SystemTime>,
    chunks: u64,
    stream_ended: bool,
    /// What this attempt did; handed back to the edge role.
    record: AttemptRecord,
    /// How this attempt and the edge role share the request and records.
    channel: AttemptChannel,
}

/// What answering an embeddings request needs of it, once it was sent.
#[derive(Clone, Copy)]
struct EmbedFacts {
    inputs: usize,
    encoding: Encoding,
    estimated_tokens: u64,
}

/// Stream progress reaches filter state every this many chunks (and at the
/// first content and the end), so a client that leaves mid-stream still
/// leaves a record of what it was sent.
const PROGRESS_EVERY: u64 = 8;

impl<H: Host> Attempt<H> {
    pub fn new(host: H, config: Rc<Config>) -> Self {
        Self {
            host,
            config,
            mode: Mode::Passthrough,
            api: Api::OpenAiChat,
            call: None,
            counted: false,
            embed: None,
            request_id: String::new(),
            group: String::new(),
            candidate: None,
            rung: None,
            provider_name: String::new(),
            model: String::new(),
            attempt: 1,
            stream: false,
            include_usage: false,
            dropped_web_search: false,
            echo: Shared::default(),
            out: Vec::new(),
            started: SystemTime::UNIX_EPOCH,
            vendor_json: false,
            vendor_retry_after: false,
            vendor_retry_after_ms: None,
            vendor_wait_headers: false,
            first_content: None,
            chunks: 0,
            stream_ended: false,
            record: AttemptRecord::default(),
            channel: AttemptChannel::FilterState,
        }
    }

    /// Hands this attempt's record to the edge role.
    fn save_record(&self) {
        self.channel
            .save_record(&self.host, self.attempt, &self.record);
    }

    /// This attempt's entry in the request's route (`provider/model:outcome`).
    fn route_entry(&self) -> String {
        format!(
            "{}/{}:{}",
            self.provider_name,
            self.model,
            self.record.outcome()
        )
    }

    /// Envoy ended the attempt before its answer did (`on_done` without the
    /// answer's end: a per-try timeout, a refused or broken connection, the
    /// client leaving): its record and route entry say so. With `answered`
    /// the vendor's headers had come, and the entry they made is replaced.
    fn record_reset(&mut self, answered: bool) {
        let previous = answered.then(|| self.route_entry());
        if !answered {
            self.record = AttemptRecord {
                provider: self.provider_name.clone(),
                model: self.model.clone(),
                stream: self.stream,
                ..AttemptRecord::default()
            };
        }
        self.record.reset = true;
        self.save_record();
        let entry = self.route_entry();
        self.channel
            .set_route(&self.host, self.attempt, &entry, previous.as_deref());
    }

    /// After a stream chunk: time to first token, delivered tokens, and at
    /// the end the vendor's usage and finish.
    fn track_stream(&mut self, end_of_stream: bool) {
        let (content_started, delivered, usage, finish, failure, done) = match &self.mode {
            Mode::Stream(d) | Mode::Holding { decoder: d, .. } => {
                let w = d.writer();
                (
                    w.content_started(),
                    w.delivered_tokens(),
                    w.usage(),
                    w.finish_reason(),
                    w.failure().map(|e| e.code),
                    w.is_done(),
                )
            }
            _ => return,
        };
        self.chunks += 1;
        let first = content_started && self.first_content.is_none();
        if first {
            let now = self.host.now();
            self.first_content = Some(now);
            self.record.ttft_ms = Some(
                now.duration_since(self.started)
                    .unwrap_or_default()
                    .as_millis() as u64,
            );
        }
        self.record.delivered_tokens = delivered;
        // The end: the vendor's last event, or the body's end, whichever
        // comes first (once).
        let end = (end_of_stream || done) && !self.stream_ended;
        if end {
            self.stream_ended = true;
            if let Some(usage) = &usage {
                self.record.set_usage(usage);
            }
            self.record.finish_reason = finish.map(|f| f.as_str().to_owned());
            self.record.code = failure.map(|c| c.as_str().to_owned());
            self.record_time_per_output_token();
            self.publish_span_attributes(failure.is_none());
        }
        if first || end || self.chunks.is_multiple_of(PROGRESS_EVERY) {
            self.save_record();
        }
    }

    fn record_time_per_output_token(&self) {
        let (Some(first), Some(tokens)) = (self.first_content, self.record.completion_tokens)
        else {
            return;
        };
        if tokens > 1 {
            let micros = self
                .host
                .now()
                .duration_since(first)
                .unwrap_or_default()
                .as_micros() as u64;
            let labels = [
                ("provider", self.provider_name.as_str()),
                ("model", self.model.as_str()),
            ];
            ignore(self.host.record(
                "gen_ai.server.time_per_output_token_us",
                &labels,
                micros / (tokens - 1),
            ));
        }
    }

    fn timer(&self) -> PhaseTimer {
        PhaseTimer::start(&self.host, self.config.overhead_histograms)
    }

    fn provider(&self) -> Option<(&Provider, &'static dyn Dialect)> {
        let p = self.config.providers.get(&self.provider_name)?;
        Some((p, dialect(p.dialect)))
    }

    fn fail(&mut self, error: GatewayError) -> Flow {
        let error = error.with_provider(&self.provider_name);
        let attempts = [("x-llm-attempts", self.attempt.to_string())];
        send_error_with(&self.host, self.api, &error, &self.request_id, &attempts);
        self.mode = Mode::Passthrough;
        Flow::Pause
    }

    /// The answer cannot be made as it must (a host call on it failed):
    /// none of the `size` bytes in Envoy's buffer, the vendor's, may pass.
    /// Emptied if the proxy lets us; then, while the response headers have
    /// not gone, the client gets the gateway's 502 instead (a local reply),
    /// else (a stream under way) the stream is reset.
    #[cold]
    fn abort_answer(&mut self, e: HostError, size: usize) -> Flow {
        let headers_sent = matches!(self.mode, Mode::Stream(_) | Mode::Discard);
        log_once(
            &e,
            if headers_sent {
                "the stream is reset"
            } else {
                "the answer is replaced by a 502"
            },
        );
        ignore(self.host.set_body(Buffer::Response, 0, size, b""));
        let error = GatewayError::from(e).with_provider(&self.provider_name);
        // The record and route entry say what the client got.
        let previous = self.route_entry();
        if self.record.provider.is_empty() {
            self.record = AttemptRecord {
                provider: self.provider_name.clone(),
                model: self.model.clone(),
                stream: self.stream,
                ..AttemptRecord::default()
            };
        }
        self.record.status = error.status();
        self.record.code = Some(error.code.as_str().to_owned());
        self.save_record();
        let entry = self.route_entry();
        self.channel
            .set_route(&self.host, self.attempt, &entry, Some(&previous));
        if headers_sent {
            ignore(self.host.reset_stream());
        } else {
            let attempts = [("x-llm-attempts", self.attempt.to_string())];
            send_error_with(&self.host, self.api, &error, &self.request_id, &attempts);
        }
        // Whatever still comes is dropped, or the stream is cut.
        self.mode = Mode::Discard;
        Flow::Pause
    }

    fn origin(&self) -> Origin {
        Origin {
            id: format!("chatcmpl-{}", self.request_id),
            created: unix_seconds(&self.host),
            model: self.model.clone(),
            provider: self.provider_name.clone(),
            stop_sequence: None,
        }
    }

    /// The vendor model for this attempt: the candidate's model when the
    /// attempt reached that candidate's provider, else this provider's own
    /// mapping for the group (a failover to another vendor). The candidate
    /// is the one the edge role chose, or on a ladder rung that rung group's.
    fn vendor_model(&self, provider: &Provider, client_model: &str) -> String {
        let (group, candidate) = match &self.rung {
            Some(rung) => (rung.as_str(), Some(0)),
            None => (self.group.as_str(), self.candidate),
        };
        let candidate = self
            .config
            .model_groups
            .get(group)
            .and_then(|g| g.candidates.get(candidate?));
        match candidate {
            Some(c)
                if c.provider.as_deref() == Some(self.provider_name.as_str())
                    && c.model.is_some() =>
            {
                c.model.clone().unwrap_or_default()
            }
            _ => provider.vendor_model(group, client_model).to_owned(),
        }
    }

    /// Encodes the original body (`size` bytes in Envoy's buffer) for this
    /// attempt's provider and sets the vendor's path, authority and auth.
    fn translate_request(&mut self, size: usize) -> Result<(), GatewayError> {
        let parsed;
        let shared = self.channel.request();
        let request = match shared.as_deref().and_then(Request::chat) {
            Some(request) => request,
            None => {
                let body = self.host.body(Buffer::Request, 0, size)?;
                parsed = surface(self.api).parse_request(&body)?;
                &parsed
            }
        };
        let (provider, dialect) = self
            .provider()
            .ok_or_else(|| no_provider(&self.provider_name))?;
        let model = self.vendor_model(provider, &request.model);
        let target = Target {
            provider,
            model: &model,
        };
        // The same API on both sides: the client's bytes, where the dialect
        // keeps them.
        let unread = Cell::new(None);
        let body = || self.read_client_body(size, &unread);
        let client = ClientRequest {
            body: &body,
            header: &|name| self.host.header(Map::Request, name),
        };
        let encoded = encode_generation(self.api, &client, request, &target);
        // A client body the proxy could not give is the host's failure,
        // whatever the encoder made of the empty read.
        if let Some(e) = unread.get() {
            return Err(e.into());
        }
        let encoded = encoded?;
        let dropped_web_search = encoded.dropped_web_search;
        let encoded = encoded.request;
        let (stream, include_usage) = (request.stream, request.include_usage);
        self.send_upstream(provider, dialect, &encoded, Some(size))?;
        self.model = model;
        self.stream = stream;
        self.include_usage = include_usage;
        self.dropped_web_search = dropped_web_search;
        self.echo = request.echo.clone();
        self.publish_span_attributes(false);
        if stream {
            // For the time to first token (non-streams do not report one).
            self.started = self.host.now();
        }
        Ok(())
    }

    /// A native call, for this attempt's provider: the vendor's request
    /// when its dialect has the call (`Flow::Continue`), else the
    /// gateway's own answer (`Flow::Pause`).
    fn translate_call(&mut self, call: &Call, size: usize) -> Result<Flow, GatewayError> {
        let (provider, dialect) = self
            .provider()
            .ok_or_else(|| no_provider(&self.provider_name))?;
        let parsed;
        let shared = self.channel.request();
        let request = match shared.as_deref() {
            Some(request) => Some(request),
            None => {
                let body = self.host.body(Buffer::Request, 0, size)?;
                parsed = parse_call_body(call, &body)?;
                parsed.as_ref()
            }
        };
        if let Some(request) = request.and_then(Request::embed) {
            let embedder = dialect.embedder().ok_or_else(no_embeddings)?;
            let model = self.vendor_model(provider, &request.model);
            let target = Target {
                provider,
                model: &model,
            };
            let encoded = embedder.encode(request, &target)?;
            self.send_upstream(provider, dialect, &encoded, Some(size))?;
            self.embed = Some(EmbedFacts {
                inputs: request.input.len(),
                encoding: request.encoding,
                estimated_tokens: request.input.estimated_tokens(),
            });
            drop(shared);
            self.model = model;
            self.mode = Mode::Request;
            return Ok(Flow::Continue);
        }
        let request = request.and_then(Request::chat);
        let client_model = request.map_or(self.group.as_str(), |r| r.model.as_str());
        let model = self.vendor_model(provider, client_model);
        let target = Target {
            provider,
            model: &model,
        };
        let unread = Cell::new(None);
        let raw = || self.read_client_body(size, &unread);
        let native = pass_through(provider, dialect, call.api())
            .then(|| dialect.encode_call(call, &raw, &target))
            .flatten();
        if let Some(e) = unread.get() {
            return Err(e.into());
        }
        // Else the vendor's own count, from the request as its generation's.
        let (encoded, counted) = match (native, request) {
            (Some(encoded), _) => (Some(encoded), false),
            (None, Some(request)) if *call == Call::CountTokens => {
                (dialect.encode_count(request, &target), true)
            }
            (None, _) => (None, false),
        };
        let Some(encoded) = encoded else {
            // This vendor lacks the call (a failover onto another API's vendor).
            let body = call.local_answer(request)?;
            let attempt = self.attempt.to_string();
            reply_or_reset(
                &self.host,
                200,
                &[
                    ("content-type", b"application/json"),
                    ("x-request-id", self.request_id.as_bytes()),
                    ("x-llm-estimated", b"true"),
                    ("x-llm-attempts", attempt.as_bytes()),
                ],
                &body,
            );
            self.mode = Mode::Passthrough;
            return Ok(Flow::Pause);
        };
        let encoded = encoded?;
        self.send_upstream(provider, dialect, &encoded, call.has_body().then_some(size))?;
        drop(shared);
        self.model = model;
        self.mode = Mode::Request;
        self.counted = counted;
        Ok(Flow::Continue)
    }

    /// The client's body for a dialect that passes it on; a failed read
    /// is kept in `unread` (and the request then goes no further).
    fn read_client_body(&self, size: usize, unread: &Cell<Option<HostError>>) -> Vec<u8> {
        self.host
            .body(Buffer::Request, 0, size)
            .unwrap_or_else(|e| {
                unread.set(Some(e));
                Vec::new()
            })
    }

    /// Sets the vendor's request: path, authority, its headers and none
    /// of what it must not receive, and the body (replacing the `size`
    /// bytes in Envoy's buffer; `None`: a request without one). Any write
    /// that fails stops the request (the caller answers a 502): half of
    /// it would reach the vendor untranslated or with what it must not get.
    fn send_upstream(
        &self,
        provider: &Provider,
        dialect: &dyn Dialect,
        encoded: &UpstreamRequest,
        body: Option<usize>,
    ) -> Result<(), HostError> {
        // What the vendor must not receive (credentials, cookies, account
        // selectors, compression, the gateway's and Envoy's own headers,
        // which Envoy adds after the edge role ran), found with one call
        // listing the headers. Header changes persist into the next attempt,
        // so this also clears the previous attempt's vendor headers: every
        // dialect's auth and vendor headers are in the withheld set.
        for (name, _) in self.host.headers(Map::Request)?.0 {
            if !name.starts_with(b":")
                && !vendor_may_receive(&name, &provider.forward_headers)
                && !dialect.takes_client_header(self.api, &name)
            {
                self.host.set_header(Map::Request, &name, None)?;
            }
        }
        if let Some(host) = &provider.host {
            self.host
                .set_header(Map::Request, b":authority", Some(host.as_bytes()))?;
        }
        self.host
            .set_header(Map::Request, b":path", Some(encoded.path.as_bytes()))?;
        for (name, value) in &encoded.headers {
            self.host
                .set_header(Map::Request, name.as_bytes(), Some(value.as_bytes()))?;
        }
        if let Some(size) = body {
            let length = encoded.body.len().to_string();
            self.host
                .set_header(Map::Request, b"content-length", Some(length.as_bytes()))?;
            self.host
                .set_body(Buffer::Request, 0, size, &encoded.body)?;
        }
        Ok(())
    }

    /// A vendor error (its key is scrubbed from the rendered answer).
    fn vendor_error(&self, status: u16, body: &[u8]) -> GatewayError {
        let Some((_, dialect)) = self.provider() else {
            return no_provider(&self.provider_name);
        };
        dialect
            .decode_error(status, body)
            .with_provider(&self.provider_name)
    }

    /// Masks this provider's key in bytes made from its answer: every
    /// body, chunk and error we pass on goes through here.
    fn scrub(&self, bytes: &mut Vec<u8>) {
        if let Some((provider, _)) = self.provider() {
            provider.redactor.scrub(bytes);
        }
    }

    /// Turns the held response into a unified error answer (status included),
    /// replacing the `len` bytes waiting in Envoy's buffer.
    fn answer_with_error(&mut self, error: &GatewayError, len: usize) -> Result<(), HostError> {
        let error = error.clone().with_provider(&self.provider_name);
        let status = error.status().to_string();
        self.host
            .set_header(Map::Response, b":status", Some(status.as_bytes()))?;
        self.set_retry_after(&error)?;
        self.host
            .set_header(Map::Response, b"content-type", Some(b"application/json"))?;
        self.host
            .set_header(Map::Response, b"cache-control", None)?;
        let mut body = surface(self.api).render_error(&error, Some(&self.request_id));
        self.scrub(&mut body);
        self.host.set_body(Buffer::Response, 0, len, &body)
    }

    /// A buffered answer of `size` bytes, as the client gets it.
    fn finish_answer(&mut self, size: usize) -> Result<Vec<u8>, HostError> {
        let mut body = self.host.body(Buffer::Response, 0, size)?;
        match self.mode {
            Mode::Error(status) => self.finish_buffered(Some(status), &body),
            Mode::Native => {
                self.scrub(&mut body);
                Ok(body)
            }
            _ => self.finish_buffered(None, &body),
        }
    }

    fn finish_buffered(&mut self, status: Option<u16>, body: &[u8]) -> Result<Vec<u8>, HostError> {
        let result = match (status, self.provider()) {
            (None, Some((_, dialect))) if matches!(self.mode, Mode::Counted) => {
                dialect.decode_count(body).map(call::input_tokens)
            }
            (None, Some((_, dialect))) if matches!(self.mode, Mode::Embedded) => {
                self.finish_embeddings(dialect, body)
            }
            (None, Some((provider, dialect))) => {
                let mut origin = self.origin();
                let decoded = if pass_through(provider, dialect, self.api) {
                    dialect.decode_native(self.api, body, &mut origin)
                } else {
                    dialect.decode_response(body, &mut origin)
                };
                decoded.map(|d| {
                    if let Some(usage) = &d.usage {
                        self.record.set_usage(usage);
                        self.record.delivered_tokens = usage.completion_tokens;
                    }
                    self.record.finish_reason = d.finish_reason.map(|f| f.as_str().to_owned());
                    surface(self.api).render_answer_echoing(d.answer, &origin, &self.echo)
                })
            }
            (Some(status), _) => Err(self.vendor_error(status, body)),
            (None, None) => Err(no_provider(&self.provider_name)),
        };
        if result.is_err() || !self.vendor_json {
            self.host
                .set_header(Map::Response, b"content-type", Some(b"application/json"))?;
        }
        let mut body = match result {
            Ok(body) => body,
            Err(error) => {
                let error = error.with_provider(&self.provider_name);
                self.record.status = error.status();
                self.record.code = Some(error.code.as_str().to_owned());
                let status = error.status().to_string();
                self.host
                    .set_header(Map::Response, b":status", Some(status.as_bytes()))?;
                self.set_retry_after(&error)?;
                surface(self.api).render_error(&error, Some(&self.request_id))
            }
        };
        self.scrub(&mut body);
        Ok(body)
    }

    /// A vendor's embeddings, in OpenAI's shape; the vendor's token count
    /// is recorded (without one the edge role bills its estimate).
    fn finish_embeddings(
        &mut self,
        dialect: &dyn Dialect,
        body: &[u8],
    ) -> Result<Vec<u8>, GatewayError> {
        let (embedder, facts) = dialect
            .embedder()
            .zip(self.embed)
            .ok_or_else(no_embeddings)?;
        let answer = embedder.decode(body, &self.model)?;
        if answer.vectors.len() != facts.inputs {
            return Err(wrong_count(facts.inputs, answer.vectors.len()));
        }
        let tokens = match answer.prompt_tokens {
            Some(prompt_tokens) => {
                self.record.set_usage(&Usage {
                    prompt_tokens,
                    ..Usage::default()
                });
                prompt_tokens
            }
            None => facts.estimated_tokens,
        };
        Ok(crate::wire::openai_embeddings::render(
            &answer,
            &self.model,
            facts.encoding,
            tokens,
        ))
    }

    /// Translates one response chunk. While holding, Envoy's buffer is the
    /// held output followed by the new raw bytes, and is replaced whole:
    /// Envoy only lets a filter replace a buffer's prefix or append to it.
    fn translate_chunk(&mut self, size: usize, end_of_stream: bool) -> Result<(), HostError> {
        let timer = self.timer();
        let buffer = self.host.body(Buffer::Response, 0, size)?;
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let (decoder, raw) = match &mut self.mode {
            Mode::Stream(decoder) => (decoder, buffer.as_slice()),
            Mode::Holding { decoder, held, .. } => {
                (decoder, buffer.get(held.len()..).unwrap_or_default())
            }
            _ => return Ok(()),
        };
        decoder.feed(raw, &mut out);
        if end_of_stream {
            decoder.finish(&mut out);
        }
        self.scrub(&mut out);
        let replacement = match &mut self.mode {
            Mode::Holding { held, .. } => {
                held.extend_from_slice(&out);
                held.as_slice()
            }
            _ => out.as_slice(),
        };
        let written = self.host.set_body(Buffer::Response, 0, size, replacement);
        self.out = out;
        timer.stop(&self.host, Phase::Chunk);
        written
    }

    /// The vendor's response headers: what passes, masked, and ours set;
    /// `Err`: a call on them failed (the answer is then withheld).
    fn answer_headers(&mut self, end_of_stream: bool) -> Result<Flow, HostError> {
        let headers = self.host.headers(Map::Response)?;
        let status = headers
            .text(":status")
            .ok()
            .flatten()
            .and_then(|s| s.parse::<u16>().ok())
            .unwrap_or(0);
        self.record = AttemptRecord {
            provider: self.provider_name.clone(),
            model: self.model.clone(),
            status,
            stream: self.stream,
            ..AttemptRecord::default()
        };
        // Not UTF-8: not a content type we know (the answer is then an error).
        let content_type = headers
            .text("content-type")
            .ok()
            .flatten()
            .unwrap_or_default();
        self.pass_vendor_headers(&headers, (200..300).contains(&status))?;
        self.vendor_retry_after = headers.has("retry-after");
        self.vendor_wait_headers = WAIT_HEADERS.iter().any(|name| headers.has(name));
        self.vendor_retry_after_ms = headers
            .text("retry-after-ms")
            .ok()
            .flatten()
            .and_then(|ms| ms.trim().parse::<f64>().ok())
            .filter(|ms| ms.is_finite() && *ms >= 0.0)
            .map(|ms| (ms / 1000.0).ceil() as u64);
        // Every header of the answer is part of it: one that fails, and
        // the answer is withheld (the edge role tells the attempt's answer
        // from Envoy's by `x-llm-provider`).
        self.host.set_header(
            Map::Response,
            b"x-llm-provider",
            Some(self.provider_name.as_bytes()),
        )?;
        self.host
            .set_header(Map::Response, b"x-llm-model", Some(self.model.as_bytes()))?;
        let attempt = self.attempt.to_string();
        self.host
            .set_header(Map::Response, b"x-llm-attempts", Some(attempt.as_bytes()))?;
        if self.dropped_web_search {
            self.host
                .set_header(Map::Response, b"x-llm-dropped-tools", Some(b"web_search"))?;
        }
        self.host
            .set_header(Map::Response, b"content-length", None)?;
        let entry = self.route_entry();
        self.channel
            .set_route(&self.host, self.attempt, &entry, None);
        self.save_record();
        if !(200..300).contains(&status) {
            self.mode = Mode::Error(status);
            return Ok(Flow::Pause);
        }
        // A vendor accepted the request: a stream need not keep it parsed.
        self.channel.release_request();
        if self.embed.is_some() {
            self.mode = Mode::Embedded;
            return Ok(Flow::Pause);
        }
        if self.call.is_some() {
            // A native call uses no tokens (nothing to bill or estimate).
            self.record.set_usage(&Usage::default());
            self.mode = if self.counted {
                Mode::Counted
            } else {
                Mode::Native
            };
            return Ok(Flow::Pause);
        }
        let Some((provider, dialect)) = self.provider() else {
            return Ok(self.fail(no_provider(&self.provider_name)));
        };
        let native = pass_through(provider, dialect, self.api);
        self.vendor_json = content_type.starts_with("application/json");
        if self.stream && dialect.is_stream_content_type(content_type) {
            let writer = stream_writer_echoing(
                self.api,
                native,
                self.origin(),
                self.request_id.clone(),
                self.include_usage,
                &self.echo,
            );
            let decoder = dialect.stream_decoder(writer);
            self.host
                .set_header(Map::Response, b"content-type", Some(b"text/event-stream"))?;
            self.host
                .set_header(Map::Response, b"cache-control", Some(b"no-cache"))?;
            if self.config.streaming.hold_until_first_content && !end_of_stream {
                self.mode = Mode::Holding {
                    decoder,
                    since: self.host.now(),
                    held: Vec::new(),
                };
                return Ok(Flow::Pause);
            }
            self.mode = Mode::Stream(decoder);
            return Ok(Flow::Continue);
        }
        // A 2xx that is not what we asked for (e.g. JSON to a stream request) is an error.
        self.mode = if self.stream {
            Mode::Error(status)
        } else {
            Mode::Complete
        };
        Ok(Flow::Pause)
    }
}

fn no_provider(name: &str) -> GatewayError {
    GatewayError::new(
        ErrorCode::UpstreamError,
        format!(
            "the endpoint names provider '{}', which the gateway configuration does not define",
            name.escape_debug()
        ),
    )
}

impl<H: Host> Session for Attempt<H> {
    fn on_request_headers(&mut self, end_of_stream: bool) -> Flow {
        // Unread, it may be ours: passed on, the client's request would
        // reach the vendor untranslated.
        let handoff = match self.host.property(&[HANDOFF_PROPERTY]) {
            Ok(handoff) => handoff.and_then(|b| Handoff::decode(&b)),
            Err(e) => return self.fail(e.into()),
        };
        let Some(handoff) = handoff else {
            return Flow::Continue;
        };
        self.api = handoff.api;
        self.call = handoff.call;
        self.group = handoff.group;
        self.candidate = handoff.candidate;
        self.request_id = handoff.request_id;
        self.channel = AttemptChannel::find(handoff.token);
        self.attempt = self.channel.begin_attempt(&self.host);
        self.provider_name = self
            .host
            .property(&PROVIDER_METADATA)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        // Only a ladder's clusters name a rung: no host call for other groups.
        let on_ladder = self
            .config
            .model_groups
            .get(&self.group)
            .is_some_and(|g| !g.fallback.is_empty());
        if on_ladder {
            self.rung = self
                .host
                .property(&RUNG_METADATA)
                .ok()
                .flatten()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .filter(|rung| !rung.is_empty());
            if let Some(rung) = self
                .rung
                .as_deref()
                .filter(|r| !self.config.model_groups.contains_key(*r))
            {
                let error = GatewayError::new(
                    ErrorCode::UpstreamError,
                    format!(
                        "the endpoint names model group '{}' (filter_metadata.llm.model_group), which the gateway configuration does not define",
                        rung.escape_debug()
                    ),
                );
                return self.fail(error);
            }
        }
        if self.provider().is_none() {
            let error = if self.provider_name.is_empty() {
                GatewayError::new(
                    ErrorCode::UpstreamError,
                    "the endpoint has no filter_metadata.llm.provider",
                )
            } else {
                no_provider(&self.provider_name)
            };
            return self.fail(error);
        }
        // A call without a body goes now (its body, if any, passes as it is).
        if let Some(call) = self.call.clone().filter(|c| !c.has_body()) {
            return self
                .translate_call(&call, 0)
                .unwrap_or_else(|e| self.fail(e));
        }
        if end_of_stream {
            return self.fail(GatewayError::invalid("body", "request body is empty"));
        }
        self.mode = Mode::Request;
        Flow::Pause
    }

    fn on_request_body(&mut self, size: usize, end_of_stream: bool) -> Flow {
        let sent = self.call.as_ref().is_some_and(|c| !c.has_body());
        if !matches!(self.mode, Mode::Request) || sent {
            return Flow::Continue;
        }
        if !end_of_stream {
            return Flow::Pause;
        }
        let timer = self.timer();
        let result = match self.call.clone() {
            Some(call) => self.translate_call(&call, size),
            None => self.translate_request(size).map(|()| Flow::Continue),
        };
        timer.stop(&self.host, Phase::Request);
        result.unwrap_or_else(|e| self.fail(e))
    }

    fn on_response_headers(&mut self, end_of_stream: bool) -> Flow {
        if !matches!(self.mode, Mode::Request) {
            return Flow::Continue;
        }
        self.answer_headers(end_of_stream)
            .unwrap_or_else(|e| self.abort_answer(e, 0))
    }

    fn on_response_body(&mut self, size: usize, end_of_stream: bool) -> Flow {
        match self.mode {
            Mode::Stream(_) => {
                if let Err(e) = self.translate_chunk(size, end_of_stream) {
                    return self.abort_answer(e, size);
                }
                self.track_stream(end_of_stream);
                Flow::Continue
            }
            Mode::Holding { .. } => {
                if let Err(e) = self.translate_chunk(size, end_of_stream) {
                    return self.abort_answer(e, size);
                }
                self.track_stream(end_of_stream);
                let now = self.host.now();
                let limits = &self.config.streaming;
                let Mode::Holding {
                    decoder,
                    since,
                    held,
                } = &self.mode
                else {
                    return Flow::Continue;
                };
                let writer = decoder.writer();
                // The vendor failed before any content: answer with the error's
                // status, so Envoy can retry it on the next vendor.
                if let Some(error) = writer
                    .failure()
                    .filter(|_| !writer.content_started())
                    .cloned()
                {
                    let held_len = held.len();
                    if let Some(usage) = &writer.usage() {
                        self.record.set_usage(usage);
                    }
                    self.record.status = error.status();
                    self.record.code = Some(error.code.as_str().to_owned());
                    self.save_record();
                    if let Err(e) = self.answer_with_error(&error, held_len) {
                        return self.abort_answer(e, held_len);
                    }
                    self.mode = Mode::Discard;
                    return Flow::Continue;
                }
                let waited = now.duration_since(*since).unwrap_or_default();
                let release = writer.content_started()
                    || writer.is_done()
                    || end_of_stream
                    || held.len() >= limits.max_hold_bytes
                    || waited >= Duration::from_millis(limits.max_hold_ms);
                if !release {
                    return Flow::Pause;
                }
                if let Mode::Holding { decoder, .. } =
                    std::mem::replace(&mut self.mode, Mode::Discard)
                {
                    self.mode = Mode::Stream(decoder);
                }
                Flow::Continue
            }
            Mode::Discard => {
                if let Err(e) = self.host.set_body(Buffer::Response, 0, size, b"") {
                    return self.abort_answer(e, size);
                }
                Flow::Continue
            }
            Mode::Complete | Mode::Error(_) | Mode::Native | Mode::Counted | Mode::Embedded => {
                if !end_of_stream {
                    return Flow::Pause;
                }
                let timer = self.timer();
                let translated = self.finish_answer(size);
                let written = translated
                    .and_then(|body| self.host.set_body(Buffer::Response, 0, size, &body));
                timer.stop(&self.host, Phase::Response);
                if let Err(e) = written {
                    return self.abort_answer(e, size);
                }
                self.save_record();
                self.publish_span_attributes(self.record.code.is_none());
                self.mode = Mode::Passthrough;
                Flow::Continue
            }
            Mode::Passthrough | Mode::Request => Flow::Continue,
        }
    }

    fn on_done(&mut self) {
        let answered = match &self.mode {
            Mode::Request => false,
            Mode::Stream(_) if self.stream_ended => return,
            Mode::Stream(_) | Mode::Holding { .. } => true,
            Mode::Complete | Mode::Native | Mode::Counted | Mode::Embedded | Mode::Error(_) => true,
            Mode::Passthrough | Mode::Discard => return,
        };
        self.record_reset(answered);
        self.mode = Mode::Passthrough;
    }
}
