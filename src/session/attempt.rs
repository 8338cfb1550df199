//! The attempt session (the upstream role): runs once per attempt in the
//! router's upstream filters, after Envoy chose the cluster and host.
//! Translates the ORIGINAL client request for the provider this attempt
//! reached (endpoint metadata `llm.provider`), and the provider's answer
//! back, chunk by chunk. It talks to the proxy only through [`Host`].
//!
//! This file is the state machine and its callbacks, in order; its state is
//! grouped by what it is for in `attempt/facts.rs` (what the client asked,
//! where the attempt landed, what was sent, what the vendor said, how the
//! stream went); the vendor request is made in `attempt/request.rs`, the
//! answer translated in `attempt/answer.rs`, the attempt's record in
//! `attempt/report.rs`.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use super::channel::AttemptChannel;
use super::host::{
    ignore, log_once, unix_seconds, Buffer, Flow, Host, HostError, Map, Phase, PhaseTimer,
};
use super::{reply_or_reset, send_error_with, Session, HANDOFF_PROPERTY};
use crate::config::Config;
use crate::dialects::whole::WholeAnswer;
use crate::dialects::{
    dialect, encode_generation, pass_through, ClientRequest, Dialect, StreamDecoder, Target,
    UpstreamRequest,
};
use crate::error::{ErrorCode, GatewayError};
use crate::headers::vendor_may_receive;
use crate::metering::AttemptRecord;
use crate::model::call::Call;
use crate::model::response::{Origin, Usage};
use crate::model::Request;
use crate::provider::Provider;
use crate::session::exchange::Handoff;
use crate::surfaces::{parse_call_body, stream_writer, surface, SurfaceState};
use report::WAIT_HEADERS;

mod answer;
mod cache;
mod facts;
mod fit;
pub mod report;
mod request;
#[cfg(test)]
mod tests;

/// On an embeddings answer, with self-calls on: the vendor's batch limit,
/// by which the edge role splits a batch (`edge/batch.rs`; a request over
/// it is a 400 calling no vendor). Internal: the edge role removes it from
/// a client's answer (only a self-call's request reads it).
pub const BATCH_LIMIT_HEADER: &str = "x-llm-batch-limit";

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
    /// The whole request (`size` body bytes) is in, paused until a Google
    /// access token is usable or `until` (`session::google_token::missing`).
    AwaitingToken { size: usize, until: SystemTime },
    /// Buffering a 2xx JSON answer.
    Complete,
    /// Buffering a native call's 2xx answer (passed on as it is).
    Native,
    /// Buffering the answer of an operation answered whole, which its
    /// decoder makes the neutral answer and the client's surface writes.
    Whole(Box<dyn WholeAnswer>),
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
    /// What the client asked for.
    asked: facts::Asked,
    /// Where this attempt landed.
    upstream: facts::Upstream,
    /// What translating the request did for this vendor.
    sent: facts::Sent,
    /// What the vendor's answer headers said.
    vendor: facts::VendorHeaders,
    /// How the answer's stream went.
    progress: facts::Progress,
    /// What finishes the answer of an operation answered whole, once sent.
    whole: Option<Box<dyn WholeAnswer>>,
    /// What the client's surface keeps for its answer.
    surface_state: SurfaceState,
    /// Reused for every translated chunk.
    out: Vec<u8>,
    /// What this attempt did; handed back to the edge role.
    record: AttemptRecord,
    /// When it started, with the diagnostics view on (its record's
    /// `started_ms` and `latency_ms`).
    timed: Option<SystemTime>,
    /// How this attempt and the edge role share the request and records.
    channel: AttemptChannel,
    /// The response cache keeps this request's answer, up to this many
    /// bytes: it is captured (`attempt/cache.rs`).
    cache_limit: Option<usize>,
    /// The stream's capture, while it flows.
    capture: Option<crate::cache::capture::Shared>,
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
            asked: facts::Asked::default(),
            upstream: facts::Upstream::default(),
            sent: facts::Sent::default(),
            vendor: facts::VendorHeaders::default(),
            progress: facts::Progress::default(),
            whole: None,
            surface_state: SurfaceState::default(),
            out: Vec::new(),
            record: AttemptRecord::default(),
            timed: None,
            channel: AttemptChannel::FilterState,
            cache_limit: None,
            capture: None,
        }
    }

    /// Hands this attempt's record to the edge role (timed so far, for
    /// the diagnostics view).
    fn save_record(&mut self) {
        if let Some(started) = self.timed {
            let ms = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
            let now = self.host.now();
            self.record.started_ms = Some(ms(started).as_millis() as u64);
            self.record.latency_ms =
                Some(now.duration_since(started).unwrap_or_default().as_millis() as u64);
        }
        self.channel
            .save_record(&self.host, self.upstream.attempt, &self.record);
    }

    /// This attempt's entry in the request's route (`provider/model:outcome`).
    fn route_entry(&self) -> String {
        format!(
            "{}/{}:{}",
            self.upstream.provider_name,
            self.upstream.model,
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
                provider: self.upstream.provider_name.clone(),
                model: self.upstream.model.clone(),
                stream: self.asked.stream,
                ..AttemptRecord::default()
            };
        }
        self.record.reset = true;
        self.save_record();
        let entry = self.route_entry();
        self.channel.set_route(
            &self.host,
            self.upstream.attempt,
            &entry,
            previous.as_deref(),
        );
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
        self.progress.chunks += 1;
        let first = content_started && self.progress.first_content.is_none();
        if first {
            let now = self.host.now();
            self.progress.first_content = Some(now);
            self.record.ttft_ms = Some(
                now.duration_since(self.progress.started)
                    .unwrap_or_default()
                    .as_millis() as u64,
            );
        }
        self.record.delivered_tokens = delivered;
        // The end: the vendor's last event, or the body's end, whichever
        // comes first (once).
        let end = (end_of_stream || done) && !self.progress.stream_ended;
        if end {
            self.progress.stream_ended = true;
            if let Some(usage) = &usage {
                self.record.set_usage(usage);
            }
            self.record.finish_reason = finish.map(|f| f.as_str().to_owned());
            self.record.code = failure.map(|c| c.as_str().to_owned());
            self.capture_stream_end();
            self.record_time_per_output_token();
            self.publish_span_attributes(failure.is_none());
        }
        if first || end || self.progress.chunks.is_multiple_of(PROGRESS_EVERY) {
            self.save_record();
        }
    }

    fn record_time_per_output_token(&self) {
        let (true, Some(first), Some(tokens)) = (
            self.config.request_metrics,
            self.progress.first_content,
            self.record.completion_tokens,
        ) else {
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
                ("provider", self.upstream.provider_name.as_str()),
                ("model", self.upstream.model.as_str()),
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
        let p = self.config.providers.get(&self.upstream.provider_name)?;
        Some((p, dialect(p.dialect)))
    }

    fn fail(&mut self, error: GatewayError) -> Flow {
        let error = error.with_provider(&self.upstream.provider_name);
        // A fitted attempt refused before it reached the vendor (a
        // `reject`): the access log says why.
        if let Some(context) = self
            .context_header()
            .filter(|_| self.record.provider.is_empty())
        {
            self.record = AttemptRecord {
                provider: self.upstream.provider_name.clone(),
                model: self.upstream.model.clone(),
                stream: self.asked.stream,
                status: error.status(),
                code: Some(error.code.as_str().to_owned()),
                context: Some(context),
                ..AttemptRecord::default()
            };
            self.save_record();
        }
        let mut headers = vec![("x-llm-attempts", self.upstream.attempt.to_string())];
        headers
            .extend((self.sent.batch_limit.get()).map(|max| (BATCH_LIMIT_HEADER, max.to_string())));
        headers.extend(self.context_header().map(|c| (crate::fitting::HEADER, c)));
        send_error_with(
            &self.host,
            self.asked.api,
            &error,
            &self.asked.request_id,
            &headers,
        );
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
        let error = GatewayError::from(e).with_provider(&self.upstream.provider_name);
        // The record and route entry say what the client got.
        let previous = self.route_entry();
        if self.record.provider.is_empty() {
            self.record = AttemptRecord {
                provider: self.upstream.provider_name.clone(),
                model: self.upstream.model.clone(),
                stream: self.asked.stream,
                ..AttemptRecord::default()
            };
        }
        self.record.status = error.status();
        self.record.code = Some(error.code.as_str().to_owned());
        self.save_record();
        let entry = self.route_entry();
        self.channel
            .set_route(&self.host, self.upstream.attempt, &entry, Some(&previous));
        if headers_sent {
            ignore(self.host.reset_stream());
        } else {
            let attempts = [("x-llm-attempts", self.upstream.attempt.to_string())];
            send_error_with(
                &self.host,
                self.asked.api,
                &error,
                &self.asked.request_id,
                &attempts,
            );
        }
        // Whatever still comes is dropped, or the stream is cut.
        self.mode = Mode::Discard;
        Flow::Pause
    }

    /// The whole request is in (`size` body bytes): translated for the
    /// vendor, or, for a provider whose Google access token the gateway
    /// obtains and has none usable yet, paused until it has one (the host
    /// wakes the session: [`Session::on_wake`]) for at most the provider's
    /// `token_wait_ms`.
    fn translate_or_wait(&mut self, size: usize) -> Flow {
        let wait = self.provider().and_then(|(p, _)| {
            crate::session::google_token::missing(&self.host, &self.upstream.provider_name, p)
        });
        match wait {
            Some(ms) if ms > 0 => {
                let until = self.host.now() + Duration::from_millis(ms);
                self.mode = Mode::AwaitingToken { size, until };
                Flow::Pause
            }
            _ => self.translate(size),
        }
    }

    /// The vendor's request made from the client's (`size` body bytes).
    fn translate(&mut self, size: usize) -> Flow {
        let timer = self.timer();
        let result = match self.asked.call.clone() {
            Some(call) => self.translate_call(&call, size),
            None => self.translate_request(size).map(|()| Flow::Continue),
        };
        timer.stop(&self.host, Phase::Request);
        result.unwrap_or_else(|e| self.fail(e))
    }

    fn origin(&self) -> Origin {
        Origin {
            id: format!("chatcmpl-{}", self.asked.request_id),
            created: unix_seconds(&self.host),
            model: self.upstream.model.clone(),
            provider: self.upstream.provider_name.clone(),
            stop_sequence: None,
        }
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
        self.asked.api = handoff.api;
        self.asked.call = handoff.call;
        self.asked.group = handoff.group;
        self.asked.candidate = handoff.candidate;
        self.asked.request_id = handoff.request_id;
        self.asked.response_id = handoff.response_id;
        self.asked.discovered_model = handoff.model;
        self.channel = AttemptChannel::find(handoff.token);
        self.upstream.attempt = self.channel.begin_attempt(&self.host);
        self.cache_limit = self.channel.cache_limit();
        if self.config.diagnostics.is_some() {
            self.timed = Some(self.host.now());
        }
        self.upstream.provider_name = self
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
            .get(&self.asked.group)
            .is_some_and(|g| !g.fallback.is_empty());
        if on_ladder {
            self.upstream.rung = self
                .host
                .property(&RUNG_METADATA)
                .ok()
                .flatten()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .filter(|rung| !rung.is_empty());
            if let Some(rung) = self
                .upstream
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
            let error = if self.upstream.provider_name.is_empty() {
                GatewayError::new(
                    ErrorCode::UpstreamError,
                    "the endpoint has no filter_metadata.llm.provider",
                )
            } else {
                no_provider(&self.upstream.provider_name)
            };
            return self.fail(error);
        }
        // A call without a body goes now (its body, if any, passes as it is).
        if self.asked.call.as_ref().is_some_and(|c| !c.has_body()) {
            return self.translate_or_wait(0);
        }
        if end_of_stream {
            return self.fail(GatewayError::invalid("body", "request body is empty"));
        }
        self.mode = Mode::Request;
        Flow::Pause
    }

    fn on_request_body(&mut self, size: usize, end_of_stream: bool) -> Flow {
        let sent = self.asked.call.as_ref().is_some_and(|c| !c.has_body());
        if !matches!(self.mode, Mode::Request) || sent {
            return Flow::Continue;
        }
        if !end_of_stream {
            return Flow::Pause;
        }
        self.translate_or_wait(size)
    }

    fn waiting(&self) -> bool {
        matches!(self.mode, Mode::AwaitingToken { .. })
    }

    fn on_wake(&mut self) -> Flow {
        let Mode::AwaitingToken { size, until } = self.mode else {
            return Flow::Pause;
        };
        let still_missing = self
            .provider()
            .and_then(|(p, _)| {
                crate::session::google_token::missing(&self.host, &self.upstream.provider_name, p)
            })
            .is_some();
        if still_missing && self.host.now() < until {
            return Flow::Pause;
        }
        // A token, or the wait is over: translated now (without a token,
        // answered 503 with no vendor call).
        self.mode = Mode::Request;
        self.translate(size)
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
            Mode::Complete | Mode::Error(_) | Mode::Native | Mode::Whole(_) => {
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
            Mode::Passthrough | Mode::Request | Mode::AwaitingToken { .. } => Flow::Continue,
        }
    }

    fn on_done(&mut self) {
        let answered = match &self.mode {
            Mode::Request | Mode::AwaitingToken { .. } => false,
            Mode::Stream(_) if self.progress.stream_ended => return,
            Mode::Stream(_) | Mode::Holding { .. } => true,
            Mode::Complete | Mode::Native | Mode::Whole(_) | Mode::Error(_) => true,
            Mode::Passthrough | Mode::Discard => return,
        };
        self.record_reset(answered);
        self.mode = Mode::Passthrough;
    }
}
