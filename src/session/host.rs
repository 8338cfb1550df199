//! What a request session needs from the proxy it runs in, and nothing
//! more: headers as bytes, bodies, properties, the clock, stats and a local
//! reply. `host::WasmHost` implements it with proxy-wasm; tests implement it
//! with a recording fake, so every session runs natively.

use std::time::SystemTime;

use crate::headers::Headers;
use crate::limits::store::SetResult;

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

/// The proxy as a session sees it. Every method may be a host call: the
/// sessions call them sparingly, and never in a loop over bytes.
pub trait Host {
    /// Every header of a map, as bytes.
    fn headers(&self, map: Map) -> Headers;
    fn header(&self, map: Map, name: &str) -> Option<Vec<u8>>;
    /// Sets (replacing) or, with `None`, removes a header.
    fn set_header(&self, map: Map, name: &[u8], value: Option<&[u8]>);
    /// `size` bytes of a body buffer from `start`.
    fn body(&self, buffer: Buffer, start: usize, size: usize) -> Vec<u8>;
    /// Replaces `size` bytes of a body buffer from `start` with `data`.
    fn set_body(&self, buffer: Buffer, start: usize, size: usize, data: &[u8]);
    fn property(&self, path: &[&str]) -> Option<Vec<u8>>;
    fn set_property(&self, path: &[&str], value: Option<&[u8]>);
    fn now(&self) -> SystemTime;
    /// Answers the request itself; `details` is what Envoy logs as the
    /// response code details.
    fn send_response(&self, status: u16, headers: &[(&str, &[u8])], body: &[u8], details: &str);
    /// Adds to a counter named by its base and labels.
    fn count(&self, base: &str, labels: &[(&str, &str)], value: u64);
    /// Records a histogram value.
    fn record(&self, base: &str, labels: &[(&str, &str)], value: u64);
    /// Sets a gauge.
    fn gauge(&self, base: &str, labels: &[(&str, &str)], value: u64);
    /// A value every worker of the proxy shares, and its CAS token.
    fn shared_data(&self, key: &[u8]) -> Option<(Vec<u8>, u32)>;
    /// Writes a shared value if its CAS token is still `cas` (0: always).
    fn set_shared_data(&self, key: &[u8], value: &[u8], cas: u32) -> SetResult;
    /// Records the gateway's own time in a phase, in microseconds.
    fn overhead(&self, phase: Phase, micros: u64);
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
            host.overhead(phase, micros_since(host, started));
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
