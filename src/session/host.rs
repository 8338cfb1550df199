//! What a request session needs from the proxy it runs in, and nothing
//! more: headers as bytes, bodies, properties, the clock, stats, a local
//! reply, HTTP callouts and entropy. The wasm host (proxy-wasm) and the
//! native host (Envoy's dynamic modules) implement it; tests implement it
//! with a recording fake, so every session runs natively.
//!
//! # Callouts
//! A session may call an Envoy cluster while its request waits
//! ([`Host::http_call`]): the session pauses the request (returns
//! [`Flow::Pause`] from its request callback), and the answer comes back to
//! the same session, on the same worker, under the token the call returned
//! ([`CalloutAnswer`], `Session::on_callout`). From there the session
//! either lets the request go on (`Flow::Continue`: the host resumes it once
//! the session returned, never from inside it) or answers it itself (a
//! local reply, then `Flow::Pause`). Several callouts may be out at once;
//! the sessions bound how many (`session::callouts`). When the request ends
//! first, the proxy cancels what is still out: no answer comes.
//!
//! Both roles may call out: the edge role before its request is routed,
//! and an attempt before its vendor request goes (the upstream role's
//! request callbacks pause and resume the attempt as they do the request).
//! A root context's calls (the Google token fetches) are answered to the
//! root context, not to a session.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use crate::error::{ErrorCode, GatewayError};
use crate::headers::Headers;

/// The proxy-wasm statuses the sessions tell apart (the ABI's numbers).
pub mod status {
    pub const NOT_FOUND: u32 = 1;
    pub const BAD_ARGUMENT: u32 = 2;
    /// A buffer with nothing in it.
    pub const EMPTY: u32 = 7;
    /// A shared-data write whose CAS token is stale.
    pub const CAS_MISMATCH: u32 = 8;
    pub const INTERNAL_FAILURE: u32 = 10;
    /// A call this host does not make.
    pub const UNIMPLEMENTED: u32 = 12;
}

/// Which host call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostCall {
    Headers,
    SetHeader,
    Body,
    SetBody,
    Property,
    SetProperty,
    SendResponse,
    /// Defining or moving a counter, gauge or histogram.
    Metric,
    SharedData,
    SetSharedData,
    ResetStream,
    /// An HTTP callout to an Envoy cluster.
    HttpCall,
    /// Entropy from the host.
    Random,
}

impl HostCall {
    const ALL: usize = 13;

    pub fn name(self) -> &'static str {
        match self {
            Self::Headers => "headers",
            Self::SetHeader => "set_header",
            Self::Body => "body",
            Self::SetBody => "set_body",
            Self::Property => "property",
            Self::SetProperty => "set_property",
            Self::SendResponse => "send_response",
            Self::Metric => "metric",
            Self::SharedData => "shared_data",
            Self::SetSharedData => "set_shared_data",
            Self::ResetStream => "reset_stream",
            Self::HttpCall => "http_call",
            Self::Random => "random",
        }
    }
}

/// A host call that did not do what it was asked: which, and the status
/// the proxy answered. Two words, so a `Result` of it costs no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostError {
    pub call: HostCall,
    pub status: u32,
}

impl HostError {
    pub fn new(call: HostCall, status: u32) -> Self {
        Self { call, status }
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the proxy failed {} (status {})",
            self.call.name(),
            self.status
        )
    }
}

/// A write the request cannot go on without failed: the client gets the
/// gateway's 502 in its API's envelope instead of a half-made exchange.
impl From<HostError> for GatewayError {
    #[cold]
    fn from(e: HostError) -> Self {
        GatewayError::new(
            ErrorCode::UpstreamError,
            format!("the gateway could not complete the exchange: {e}"),
        )
    }
}

/// Logs a failed host call and what the session did about it, once per
/// kind of call and VM: a broken stats sink or buffer must not write a
/// line per request or chunk.
#[cold]
pub fn log_once(e: &HostError, outcome: &str) {
    static LOGGED: [AtomicBool; HostCall::ALL] = [const { AtomicBool::new(false) }; HostCall::ALL];
    let first = LOGGED
        .get(e.call as usize)
        .is_some_and(|logged| !logged.swap(true, Ordering::Relaxed));
    if first {
        log::warn!("llm gateway: {e}; {outcome} (later failures of this call are not logged)");
    }
}

/// A failed write the request goes on without (a metric, filter state for
/// logs and tracing): logged once, then ignored.
pub fn ignore(result: Result<(), HostError>) {
    if let Err(e) = result {
        log_once(&e, "ignored");
    }
}

/// Which header map a call is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Map {
    Request,
    Response,
}

/// Which body buffer a call is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    Request,
    Response,
}

/// Where the gateway spends its own time, per request and per chunk
/// (`llm_gateway.overhead_us;phase=...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Edge role: reading, parsing, validating and routing a request.
    Admit = 0,
    /// Upstream role: translating a request for the vendor.
    Request = 1,
    /// Upstream role: translating one chunk of a stream.
    Chunk = 2,
    /// Upstream role: translating a complete (non-stream) answer or error.
    Response = 3,
    /// Edge role: the request's metrics and access-log line, at its end.
    Log = 4,
}

/// What a session does next with the stream it is called for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Hold this part of the stream (buffer the body, delay headers).
    Pause,
}

/// The largest callout answer a session is given: a longer one is
/// [`CalloutAnswer::Failed`] (the host copies what it hands over).
pub const MAX_CALLOUT_BODY: usize = 64 << 20;

/// The answer to an HTTP callout ([`Host::http_call`]), as the session that
/// made it gets it.
#[derive(Debug, Clone, PartialEq)]
pub enum CalloutAnswer {
    /// The cluster answered, or Envoy for it: its timeout is a 504, no
    /// healthy upstream a 503 (Envoy's local replies).
    Answered {
        status: u16,
        headers: Headers,
        body: Vec<u8>,
    },
    /// No answer: the call was reset, or its answer was unreadable or
    /// larger than [`MAX_CALLOUT_BODY`].
    Failed,
}

impl CalloutAnswer {
    /// An answer of `status` with these headers and body (hosts build it
    /// from what the proxy gave); one larger than [`MAX_CALLOUT_BODY`] is
    /// [`CalloutAnswer::Failed`].
    pub fn answered(status: Option<u16>, headers: Headers, body: Vec<u8>) -> Self {
        match status {
            Some(status) if body.len() <= MAX_CALLOUT_BODY => Self::Answered {
                status,
                headers,
                body,
            },
            _ => Self::Failed,
        }
    }
}

/// The proxy as a session sees it. Every method may be a host call: the
/// sessions call them sparingly, and never in a loop over bytes.
///
/// Every write returns the proxy's status, and reads that can fail say so
/// apart from "absent" where the sessions act differently. What a failure
/// means is the sessions' decision, by one rule: **no untranslated or
/// unscrubbed vendor byte ever reaches the client, and no request reaches a
/// vendor untranslated or with the client's credentials.** So:
/// - a failed write of the vendor's request (a header withheld or set, its
///   path, its body) or a failed read of what it is made from: the request
///   goes no further; the client gets a unified 502 (a local reply);
/// - a failed write of the answer (a body replaced, a header passed,
///   masked or set) or a failed read of it, while the response headers
///   have not gone to the client: a unified 502 instead of the answer;
///   after they went (a stream): the buffer emptied if the proxy lets us,
///   and the stream reset, never the chunk passed;
/// - a failed local reply: the stream is reset (and held, should even that
///   fail);
/// - a failed metric or filter-state write for logs and tracing: logged
///   once ([`ignore`]) and the request goes on.
pub trait Host {
    /// Every header of a map, as bytes.
    fn headers(&self, map: Map) -> Result<Headers, HostError>;
    /// One header; `None` when absent or unreadable (the sessions read no
    /// header whose loss would let a vendor byte through).
    fn header(&self, map: Map, name: &str) -> Option<Vec<u8>>;
    /// Sets (replacing) or, with `None`, removes a header.
    fn set_header(&self, map: Map, name: &[u8], value: Option<&[u8]>) -> Result<(), HostError>;
    /// `size` bytes of a body buffer from `start` (empty when there is none).
    fn body(&self, buffer: Buffer, start: usize, size: usize) -> Result<Vec<u8>, HostError>;
    /// Replaces `size` bytes of a body buffer from `start` with `data`.
    fn set_body(
        &self,
        buffer: Buffer,
        start: usize,
        size: usize,
        data: &[u8],
    ) -> Result<(), HostError>;
    /// A property; `Ok(None)` when it is not set.
    fn property(&self, path: &[&str]) -> Result<Option<Vec<u8>>, HostError>;
    fn set_property(&self, path: &[&str], value: Option<&[u8]>) -> Result<(), HostError>;
    /// A value tracing's custom tags read (`span_attributes`): written again
    /// as the request goes on (by each attempt, then by the edge), the last
    /// write read when Envoy closes a span. A property where properties can
    /// be written more than once (the wasm host's filter state).
    fn set_span_attribute(&self, name: &str, value: Option<&[u8]>) -> Result<(), HostError> {
        self.set_property(&[name], value)
    }
    fn now(&self) -> SystemTime;
    /// Answers the request itself; `details` is what Envoy logs as the
    /// response code details.
    fn send_response(
        &self,
        status: u16,
        headers: &[(&str, &[u8])],
        body: &[u8],
        details: &str,
    ) -> Result<(), HostError>;
    /// Adds to a counter named by its base and labels.
    fn count(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError>;
    /// Records a histogram value.
    fn record(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError>;
    /// Sets a gauge.
    fn gauge(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError>;
    /// A value every worker of the proxy shares, and its CAS token;
    /// `Ok(None)` when absent.
    fn shared_data(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, HostError>;
    /// Writes a shared value if its CAS token is still `cas` (0: always);
    /// a stale token is the error [`status::CAS_MISMATCH`].
    fn set_shared_data(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), HostError>;
    /// Records the gateway's own time in a phase, in microseconds.
    fn overhead(&self, phase: Phase, micros: u64) -> Result<(), HostError>;
    /// Resets the request's stream (what is left when no answer can be
    /// written): the client sees it cut, and no more of it passes.
    fn reset_stream(&self) -> Result<(), HostError>;

    /// An HTTP call to Envoy cluster `cluster` (proxy-wasm's
    /// `dispatch_http_call`, the dynamic modules' HTTP callout; `headers`
    /// include `:method`, `:path` and `:authority`), whose answer comes back
    /// later under the token returned here to whoever made the call: a
    /// request's session (`Session::on_callout`, see "Callouts" above), or
    /// a root context (the upstream role's Google token fetches,
    /// `session::google_token`). It waits at most `timeout_ms` (then
    /// Envoy's 504). Fallible: the cluster may be unknown, or the host make
    /// no such calls (the default).
    fn http_call(
        &self,
        cluster: &str,
        headers: &[(&str, &[u8])],
        body: &[u8],
        timeout_ms: u32,
    ) -> Result<u32, HostError> {
        let _ = (cluster, headers, body, timeout_ms);
        Err(HostError::new(HostCall::HttpCall, status::UNIMPLEMENTED))
    }

    /// Fills `out` with random bytes from the host's entropy source (WASI
    /// `random_get` on wasm, the OS natively): the core has no RNG of its
    /// own. Fallible: the host may have none (the default).
    fn random(&self, out: &mut [u8]) -> Result<(), HostError> {
        let _ = out;
        Err(HostError::new(HostCall::Random, status::UNIMPLEMENTED))
    }
}

/// Times one phase when the configuration asks for it
/// (`overhead_histograms`); otherwise costs no host call.
pub struct PhaseTimer(Option<SystemTime>);

impl PhaseTimer {
    pub fn start(host: &impl Host, on: bool) -> Self {
        Self(on.then(|| host.now()))
    }

    pub fn stop(self, host: &impl Host, phase: Phase) {
        if let Some(started) = self.0 {
            ignore(host.overhead(phase, micros_since(host, started)));
        }
    }
}

/// Microseconds from `since` to the host's now.
pub fn micros_since(host: &impl Host, since: SystemTime) -> u64 {
    host.now()
        .duration_since(since)
        .map(|d| d.as_micros() as u64)
        .unwrap_or_default()
}

/// The host's clock in Unix milliseconds.
pub fn unix_millis(host: &impl Host) -> u64 {
    host.now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// The host's clock in Unix seconds.
pub fn unix_seconds(host: &impl Host) -> u64 {
    host.now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
