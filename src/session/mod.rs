//! Request sessions: the state machines of one request, driving the proxy
//! through the narrow, fallible [`host::Host`] interface, so that they run
//! and are tested natively. The host crates (`hosts/wasm` for proxy-wasm,
//! `hosts/native` for Envoy's dynamic modules) implement it.
//!
//! - [`edge`]: the edge role, once per request (HCM filter before the router).
//! - [`attempt`]: the upstream role, once per attempt (router upstream filter).

use crate::error::GatewayError;
use crate::model::Api;
use crate::surfaces::surface;

pub mod attempt;
pub mod callouts;
mod channel;
pub mod discovery;
pub mod edge;
pub mod exchange;
pub mod google_token;
pub mod host;
pub mod self_call;
mod shared_data;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod replay_script;

use host::{log_once, CalloutAnswer, Flow, Host};

/// A request's state machine as the proxy drives it: its callbacks, in the
/// order they come. `host::callbacks` hands each proxy-wasm callback to one.
pub trait Session {
    fn on_request_headers(&mut self, end_of_stream: bool) -> Flow;
    fn on_request_body(&mut self, size: usize, end_of_stream: bool) -> Flow;
    fn on_response_headers(&mut self, end_of_stream: bool) -> Flow;
    fn on_response_body(&mut self, size: usize, end_of_stream: bool) -> Flow;
    /// The request is done and logged (access log, metrics).
    fn on_log(&mut self) {}
    /// The proxy is done with the context: the request (or attempt) ended,
    /// also when Envoy reset it (the upstream role gets no `on_log`).
    fn on_done(&mut self) {}
    /// The request is paused for something the host's root context brings
    /// (an attempt waiting for a Google access token): the host wakes it
    /// ([`Session::on_wake`]) until it no longer waits.
    fn waiting(&self) -> bool {
        false
    }
    /// Woken while [`Session::waiting`] (a tick, a token arrived): with
    /// `Flow::Continue` and no longer waiting, the host resumes the paused
    /// request; with `Flow::Pause` it stays paused (still waiting, or
    /// answered with a local reply).
    fn on_wake(&mut self) -> Flow {
        Flow::Pause
    }
    /// The answer to an HTTP callout this session made (`Host::http_call`
    /// returned `token`), while its request is paused (see `host`,
    /// "Callouts"): with `Flow::Continue` the host resumes the request once
    /// this returned; with `Flow::Pause` it stays paused (more answers to
    /// come, or answered with a local reply).
    fn on_callout(&mut self, token: u32, answer: CalloutAnswer) -> Flow {
        let _ = (token, answer);
        Flow::Pause
    }
}

/// Filter state the edge role writes and every attempt reads: an
/// `exchange::Handoff` (model group, candidate, request id, exchange token).
pub const HANDOFF_PROPERTY: &str = "llm_handoff";

/// Filter state, when the roles share no VM (see `exchange`): attempt N's
/// `metering::AttemptRecord` (JSON) is `llm_attempt.N`.
pub fn attempt_property(attempt: u64) -> String {
    format!("llm_attempt.{attempt}")
}

/// Filter state: every attempt's `provider/model:status`, comma-separated
/// (from the upstream role when the roles share no VM; for tracing, from
/// the edge role).
pub const ROUTE_PROPERTY: &str = "llm_route";

/// Filter state: the request's access-log line (JSON), set when it ends.
pub const LOG_PROPERTY: &str = "llm_log";
/// Filter state: the summaries the edge made of a request's old blocks
/// for its attempts' `compress` (`fitting::compress::encode`).
pub const SUMMARIES_PROPERTY: &str = "llm_summaries";

/// Answers the request with a unified error in the client's API, from either role.
pub fn send_error(host: &impl Host, api: Api, error: &GatewayError, request_id: &str) {
    send_error_with(host, api, error, request_id, &[]);
}

/// The same, with more response headers (a request's rate-limit headers).
pub fn send_error_with(
    host: &impl Host,
    api: Api,
    error: &GatewayError,
    request_id: &str,
    extra: &[(&str, String)],
) {
    let body = surface(api).render_error(error, Some(request_id));
    let mut headers: Vec<(&str, &[u8])> = vec![
        ("content-type", b"application/json"),
        ("x-request-id", request_id.as_bytes()),
    ];
    headers.extend(extra.iter().map(|(n, v)| (*n, v.as_bytes())));
    // The edge role's own answers: no attempt was made.
    if !extra.iter().any(|(n, _)| *n == "x-llm-attempts") {
        headers.push(("x-llm-attempts", b"0"));
    }
    if let Some(allow) = &error.allow {
        headers.push(("allow", allow.as_bytes()));
    }
    // The wait the error names, unless a header of the caller's says it.
    let wait = error
        .retry_after
        .filter(|_| {
            !extra
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("retry-after"))
        })
        .map(|s| s.to_string());
    if let Some(wait) = &wait {
        headers.push(("retry-after", wait.as_bytes()));
    }
    if let Some(provider) = error.provider.as_deref() {
        headers.push(("x-llm-provider", provider.as_bytes()));
    }
    reply_or_reset(host, surface(api).status(error.code), &headers, &body);
}

/// Answers the request with a local reply; when the proxy refuses it,
/// resets the stream: a request the gateway answers must go no further
/// (should even the reset fail, the callback's `Flow::Pause` holds it).
pub fn reply_or_reset(host: &impl Host, status: u16, headers: &[(&str, &[u8])], body: &[u8]) {
    if let Err(e) = host.send_response(status, headers, body, "") {
        log_once(&e, "the stream is reset");
        if let Err(e) = host.reset_stream() {
            log_once(&e, "the stream is held");
        }
    }
}
