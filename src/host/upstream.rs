//! Upstream role: runs once per attempt in the router's upstream filters,
//! after Envoy chose the cluster and host. Translates the ORIGINAL unified
//! body for the provider this attempt reached (endpoint metadata
//! `llm.provider`), and the provider's answer back, chunk by chunk.

use std::rc::Rc;
use std::time::{Duration, SystemTime};

use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::Action;

use super::metrics::{self, Phase, PhaseTimer};
use super::{
    send_error, unix_seconds, Headers, ATTEMPT_PROPERTY, HANDOFF_PROPERTY, ROUTE_PROPERTY,
};
use crate::config::{Config, Provider, Secret};
use crate::dialects::{dialect, Dialect, StreamDecoder, Target, AUTH_HEADERS};
use crate::error::{redact, ErrorCode, GatewayError};
use crate::exchange::{self, Handoff, Shared};
use crate::metering::AttemptRecord;
use crate::response::{ChunkWriter, Origin};
use crate::unified::ChatRequest;

const PROVIDER_METADATA: [&str; 5] = [
    "xds",
    "upstream_host_metadata",
    "filter_metadata",
    "llm",
    "provider",
];
const ATTEMPT_COUNT: [&str; 2] = ["upstream", "request_attempt_count"];

enum Mode {
    /// Not a request the edge role accepted: leave it alone.
    Passthrough,
    /// Waiting for the request body.
    Request,
    /// Buffering a 2xx JSON answer.
    Complete,
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

pub struct Upstream {
    config: Rc<Config>,
    mode: Mode,
    request_id: String,
    group: String,
    candidate: Option<usize>,
    provider_name: String,
    /// Vendor model this attempt asked for.
    model: String,
    attempt: u64,
    stream: bool,
    include_usage: bool,
    /// Reused for every translated chunk.
    out: Vec<u8>,
    /// When this attempt started, for time to first token (streams only).
    started: SystemTime,
    /// The vendor answered with a JSON content type (kept as it is).
    vendor_json: bool,
    first_content: Option<SystemTime>,
    chunks: u64,
    stream_ended: bool,
    /// What this attempt did; handed back to the edge role.
    record: AttemptRecord,
    /// The request's exchange with the edge role, when both share this VM.
    exchange: Option<Shared>,
}

/// Stream progress reaches filter state every this many chunks (and at the
/// first content and the end), so a client that leaves mid-stream still
/// leaves a record of what it was sent.
const PROGRESS_EVERY: u64 = 8;

impl Upstream {
    pub fn new(config: Rc<Config>) -> Self {
        Self {
            config,
            mode: Mode::Passthrough,
            request_id: String::new(),
            group: String::new(),
            candidate: None,
            provider_name: String::new(),
            model: String::new(),
            attempt: 1,
            stream: false,
            include_usage: false,
            out: Vec::new(),
            started: SystemTime::UNIX_EPOCH,
            vendor_json: false,
            first_content: None,
            chunks: 0,
            stream_ended: false,
            record: AttemptRecord::default(),
            exchange: None,
        }
    }

    /// Hands this attempt's record to the edge role: through the exchange,
    /// or filter state when there is none.
    fn save_record(&self) {
        if let Some(exchange) = &self.exchange {
            exchange.borrow_mut().record = Some(self.record.clone());
        } else if let Ok(json) = serde_json::to_vec(&self.record) {
            self.set_property(vec![ATTEMPT_PROPERTY], Some(&json));
        }
    }

    /// Appends this attempt to the request's route (`provider/model:status`).
    fn append_route(&self) {
        let entry = format!(
            "{}/{}:{}",
            self.provider_name, self.model, self.record.status
        );
        if let Some(exchange) = &self.exchange {
            exchange.borrow_mut().route.push(entry);
            return;
        }
        let mut route = self.get_property(vec![ROUTE_PROPERTY]).unwrap_or_default();
        if !route.is_empty() {
            route.push(b',');
        }
        route.extend_from_slice(entry.as_bytes());
        self.set_property(vec![ROUTE_PROPERTY], Some(&route));
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
                    w.usage,
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
            let now = self.get_current_time();
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
                .get_current_time()
                .duration_since(first)
                .unwrap_or_default()
                .as_micros() as u64;
            let labels = [
                ("provider", self.provider_name.as_str()),
                ("model", self.model.as_str()),
            ];
            metrics::record(
                "gen_ai.server.time_per_output_token_us",
                &labels,
                micros / (tokens - 1),
            );
        }
    }

    fn timer(&self) -> PhaseTimer {
        PhaseTimer::start(self, self.config.overhead_histograms)
    }

    fn provider(&self) -> Option<(&Provider, &'static dyn Dialect)> {
        let p = self.config.providers.get(&self.provider_name)?;
        Some((p, dialect(p.dialect)))
    }

    fn fail(&mut self, error: GatewayError) -> Action {
        let error = error.with_provider(&self.provider_name);
        send_error(self, &error, &self.request_id);
        self.mode = Mode::Passthrough;
        Action::Pause
    }

    fn origin(&self) -> Origin {
        Origin {
            id: format!("chatcmpl-{}", self.request_id),
            created: unix_seconds(self),
            model: self.model.clone(),
            provider: self.provider_name.clone(),
        }
    }

    /// The vendor model for this attempt: the chosen candidate's model when
    /// the attempt reached that candidate's provider, else this provider's
    /// own mapping (a failover to another vendor).
    fn vendor_model(&self, provider: &Provider, client_model: &str) -> String {
        let candidate = self
            .config
            .model_groups
            .get(&self.group)
            .and_then(|g| g.candidates.get(self.candidate?));
        match candidate {
            Some(c)
                if c.provider.as_deref() == Some(self.provider_name.as_str())
                    && c.model.is_some() =>
            {
                c.model.clone().unwrap_or_default()
            }
            _ => provider.vendor_model(&self.group, client_model).to_owned(),
        }
    }

    /// Encodes the original body (`size` bytes in Envoy's buffer) for this
    /// attempt's provider and sets the vendor's path, authority and auth.
    fn translate_request(&mut self, size: usize) -> Result<(), GatewayError> {
        let parsed;
        let shared = self.exchange.as_ref().map(|e| e.borrow());
        let request = match shared.as_ref().and_then(|e| e.request.as_ref()) {
            Some(request) => request,
            None => {
                let body = self.get_http_request_body(0, size).unwrap_or_default();
                parsed = ChatRequest::parse(&body)?;
                &parsed
            }
        };
        let (provider, dialect) = self
            .provider()
            .ok_or_else(|| no_provider(&self.provider_name))?;
        let model = self.vendor_model(provider, &request.model);
        let encoded = dialect.encode_request(
            request,
            &Target {
                provider,
                model: &model,
            },
        )?;
        let (stream, include_usage) = (request.stream, request.include_usage);

        // The edge role removed the client's credentials, so the first
        // attempt only drops compression (we must read what comes back).
        // Header changes persist into the next attempt: later ones clear
        // every vendor's auth again, found with one call listing the headers.
        if self.attempt <= 1 {
            self.set_http_request_header("accept-encoding", None);
        } else {
            for (name, _) in self.get_http_request_headers() {
                if AUTH_HEADERS.contains(&name.as_str()) || name == "accept-encoding" {
                    self.set_http_request_header(&name, None);
                }
            }
        }
        if let Some(host) = &provider.host {
            self.set_http_request_header(":authority", Some(host));
        }
        self.set_http_request_header(":path", Some(&encoded.path));
        for (name, value) in &encoded.headers {
            self.set_http_request_header(name, Some(value));
        }
        self.set_http_request_header("content-length", Some(&encoded.body.len().to_string()));
        self.set_http_request_body(0, size, &encoded.body);
        self.model = model;
        self.stream = stream;
        self.include_usage = include_usage;
        if stream {
            // For the time to first token (non-streams do not report one).
            self.started = self.get_current_time();
        }
        Ok(())
    }

    /// A vendor error, without ever echoing our key back.
    fn vendor_error(&self, status: u16, body: &[u8]) -> GatewayError {
        let Some((provider, dialect)) = self.provider() else {
            return no_provider(&self.provider_name);
        };
        let mut error = dialect.decode_error(status, body);
        error.message = redact(
            &error.message,
            provider.resolved_key.as_ref().map(Secret::expose),
        );
        error.with_provider(&self.provider_name)
    }

    /// Turns the held response into a unified error answer (status included),
    /// replacing the `len` bytes waiting in Envoy's buffer.
    fn answer_with_error(&mut self, error: &GatewayError, len: usize) {
        let error = error.clone().with_provider(&self.provider_name);
        self.set_http_response_header(":status", Some(&error.status().to_string()));
        self.set_http_response_header("content-type", Some("application/json"));
        self.set_http_response_header("cache-control", None);
        self.set_http_response_body(0, len, &error.to_json(Some(&self.request_id)));
    }

    fn finish_buffered(&mut self, status: Option<u16>, body: &[u8]) -> Vec<u8> {
        let result = match (status, self.provider()) {
            (None, Some((_, dialect))) => {
                let mut origin = self.origin();
                dialect.decode_response(body, &mut origin).map(|d| {
                    if let Some(usage) = &d.usage {
                        self.record.set_usage(usage);
                        self.record.delivered_tokens = usage.completion_tokens;
                    }
                    if contains(&d.body, b"\"finish_reason\":\"content_filter\"") {
                        self.record.finish_reason = Some("content_filter".into());
                    }
                    d.body
                })
            }
            (Some(status), _) => Err(self.vendor_error(status, body)),
            (None, None) => Err(no_provider(&self.provider_name)),
        };
        if result.is_err() || !self.vendor_json {
            self.set_http_response_header("content-type", Some("application/json"));
        }
        match result {
            Ok(body) => body,
            Err(error) => {
                let error = error.with_provider(&self.provider_name);
                self.record.status = error.status();
                self.record.code = Some(error.code.as_str().to_owned());
                self.set_http_response_header(":status", Some(&error.status().to_string()));
                error.to_json(Some(&self.request_id))
            }
        }
    }

    /// Translates one response chunk. While holding, Envoy's buffer is the
    /// held output followed by the new raw bytes, and is replaced whole:
    /// Envoy only lets a filter replace a buffer's prefix or append to it.
    fn translate_chunk(&mut self, size: usize, end_of_stream: bool) {
        let timer = self.timer();
        let buffer = self.get_http_response_body(0, size).unwrap_or_default();
        let mut out = std::mem::take(&mut self.out);
        let (decoder, raw, output) = match &mut self.mode {
            Mode::Stream(decoder) => {
                out.clear();
                (decoder, buffer.as_slice(), &mut out)
            }
            Mode::Holding { decoder, held, .. } => {
                let raw = buffer.get(held.len()..).unwrap_or_default();
                (decoder, raw, held)
            }
            _ => return,
        };
        decoder.feed(raw, output);
        if end_of_stream {
            decoder.finish(output);
        }
        let replacement = match &self.mode {
            Mode::Holding { held, .. } => held.as_slice(),
            _ => out.as_slice(),
        };
        self.set_http_response_body(0, size, replacement);
        self.out = out;
        timer.stop(self, Phase::Chunk);
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
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

impl Context for Upstream {}

impl HttpContext for Upstream {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        let Some(handoff) = self
            .get_property(vec![HANDOFF_PROPERTY])
            .and_then(|b| Handoff::decode(&b))
        else {
            return Action::Continue;
        };
        self.group = handoff.group;
        self.candidate = handoff.candidate;
        self.request_id = handoff.request_id;
        self.exchange = handoff.token.and_then(exchange::find);
        self.attempt = match &self.exchange {
            Some(exchange) => {
                let mut exchange = exchange.borrow_mut();
                exchange.attempts += 1;
                exchange.attempts
            }
            None => self
                .get_property(ATTEMPT_COUNT.to_vec())
                .and_then(|b| b.get(..8).and_then(|b| b.try_into().ok()))
                .map_or(1, u64::from_le_bytes),
        };
        self.provider_name = self
            .get_property(PROVIDER_METADATA.to_vec())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
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
        if end_of_stream {
            return self.fail(GatewayError::invalid("body", "request body is empty"));
        }
        self.mode = Mode::Request;
        Action::Pause
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        if !matches!(self.mode, Mode::Request) {
            return Action::Continue;
        }
        if !end_of_stream {
            return Action::Pause;
        }
        let timer = self.timer();
        let result = self.translate_request(size);
        timer.stop(self, Phase::Request);
        match result {
            Ok(()) => Action::Continue,
            Err(e) => self.fail(e),
        }
    }

    fn on_http_response_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        if !matches!(self.mode, Mode::Request) {
            return Action::Continue;
        }
        let headers = Headers(self.get_http_response_headers());
        let status = headers
            .get(":status")
            .and_then(|s| s.parse::<u16>().ok())
            .unwrap_or(0);
        let content_type = headers.get("content-type").unwrap_or_default();
        self.set_http_response_header("x-llm-provider", Some(&self.provider_name));
        self.set_http_response_header("x-llm-model", Some(&self.model));
        self.set_http_response_header("x-llm-attempts", Some(&self.attempt.to_string()));
        self.set_http_response_header("content-length", None);
        self.record = AttemptRecord {
            provider: self.provider_name.clone(),
            model: self.model.clone(),
            status,
            stream: self.stream,
            ..AttemptRecord::default()
        };
        self.append_route();
        self.save_record();
        if !(200..300).contains(&status) {
            self.mode = Mode::Error(status);
            return Action::Pause;
        }
        // A vendor accepted the request: a stream need not keep it parsed.
        if let Some(exchange) = &self.exchange {
            exchange.borrow_mut().request = None;
        }
        let Some((_, dialect)) = self.provider() else {
            return self.fail(no_provider(&self.provider_name));
        };
        self.vendor_json = content_type.starts_with("application/json");
        if self.stream && dialect.is_stream_content_type(content_type) {
            let writer =
                ChunkWriter::new(self.origin(), self.request_id.clone(), self.include_usage);
            let decoder = dialect.stream_decoder(writer);
            self.set_http_response_header("content-type", Some("text/event-stream"));
            self.set_http_response_header("cache-control", Some("no-cache"));
            if self.config.streaming.hold_until_first_content && !end_of_stream {
                self.mode = Mode::Holding {
                    decoder,
                    since: self.get_current_time(),
                    held: Vec::new(),
                };
                return Action::Pause;
            }
            self.mode = Mode::Stream(decoder);
            return Action::Continue;
        }
        // A 2xx that is not what we asked for (e.g. JSON to a stream request) is an error.
        self.mode = if self.stream {
            Mode::Error(status)
        } else {
            Mode::Complete
        };
        Action::Pause
    }

    fn on_http_response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        match self.mode {
            Mode::Stream(_) => {
                self.translate_chunk(size, end_of_stream);
                self.track_stream(end_of_stream);
                Action::Continue
            }
            Mode::Holding { .. } => {
                self.translate_chunk(size, end_of_stream);
                self.track_stream(end_of_stream);
                let now = self.get_current_time();
                let limits = &self.config.streaming;
                let Mode::Holding {
                    decoder,
                    since,
                    held,
                } = &self.mode
                else {
                    return Action::Continue;
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
                    self.record.status = error.status();
                    self.record.code = Some(error.code.as_str().to_owned());
                    self.save_record();
                    self.answer_with_error(&error, held_len);
                    self.mode = Mode::Discard;
                    return Action::Continue;
                }
                let waited = now.duration_since(*since).unwrap_or_default();
                let release = writer.content_started()
                    || writer.is_done()
                    || end_of_stream
                    || held.len() >= limits.max_hold_bytes
                    || waited >= Duration::from_millis(limits.max_hold_ms);
                if !release {
                    return Action::Pause;
                }
                if let Mode::Holding { decoder, .. } =
                    std::mem::replace(&mut self.mode, Mode::Discard)
                {
                    self.mode = Mode::Stream(decoder);
                }
                Action::Continue
            }
            Mode::Discard => {
                self.set_http_response_body(0, size, b"");
                Action::Continue
            }
            Mode::Complete | Mode::Error(_) => {
                if !end_of_stream {
                    return Action::Pause;
                }
                let status = match self.mode {
                    Mode::Error(s) => Some(s),
                    _ => None,
                };
                let timer = self.timer();
                let body = self.get_http_response_body(0, size).unwrap_or_default();
                let translated = self.finish_buffered(status, &body);
                self.set_http_response_body(0, size, &translated);
                timer.stop(self, Phase::Response);
                self.save_record();
                self.mode = Mode::Passthrough;
                Action::Continue
            }
            Mode::Passthrough | Mode::Request => Action::Continue,
        }
    }
}
