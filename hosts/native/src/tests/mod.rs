//! The native host's own tests: the exported hooks driven as Envoy drives
//! them, against the fake Envoy (`fake_envoy`), checking what Envoy saw.
//! - `requests.rs`: requests through both roles (translation, bodies in
//!   chunks, the attempts the edge ends when the response ends);
//! - `host_calls.rs`: `NativeHost` over the ABI (headers as bytes, filter
//!   state written once, span attributes as dynamic metadata);
//! - `failures.rs`: a panic in a session, local replies;
//! - `tokens.rs`: an attempt paused for a Google access token, woken;
//! - `fleet.rs`: a response held for a callout, resumed.

mod failures;
mod fleet;
mod host_calls;
mod requests;
mod tokens;

use crate::abi::{self, FilterModule};
use crate::fake_envoy::{FakeConfig, Stream, REQUEST, RESPONSE};

/// The gateway's configuration: one Anthropic provider behind group `chat`.
const CONFIG: &str = r#"{
    "providers": {"an": {"dialect": "anthropic", "api_key": "sk-ant-secret", "default_max_tokens": 100}},
    "model_groups": {"chat": {"candidates": [{"provider": "an", "model": "claude-x", "cluster": "c"}]}},
    "auth": {"enabled": false},
    "span_attributes": true
}"#;

/// An OpenAI chat request for group `chat`.
const CHAT: &str = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#;

/// Anthropic's answer to it.
const ANSWER: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x-1","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}"#;

/// The endpoint metadata of the `an` provider's hosts.
const ENDPOINT: &[(&str, &str, &str)] = &[("llm", "provider", "an")];

/// The module's filter on one stream, its hooks called as Envoy calls them.
struct Filter {
    stream: Stream,
    module: FilterModule,
}

impl Filter {
    fn new(config: &FakeConfig, stream: Stream) -> Self {
        // SAFETY: the config is live (the test holds it).
        let module =
            unsafe { crate::envoy_dynamic_module_on_http_filter_new(config.module, stream.0) };
        assert!(!module.is_null(), "the module made no filter");
        stream.attach(module, config.envoy);
        Self { stream, module }
    }

    fn request_headers(&self, end_of_stream: bool) -> u32 {
        crate::envoy_dynamic_module_on_http_filter_request_headers(
            self.stream.0,
            self.module,
            end_of_stream,
        )
    }

    /// One request body hook, the received chunk made of `chunks`.
    fn request_body(&self, chunks: &[&[u8]], end_of_stream: bool) -> u32 {
        self.stream.body_hook(0, chunks, || {
            crate::envoy_dynamic_module_on_http_filter_request_body(
                self.stream.0,
                self.module,
                end_of_stream,
            )
        })
    }

    fn response_headers(&self, end_of_stream: bool) -> u32 {
        crate::envoy_dynamic_module_on_http_filter_response_headers(
            self.stream.0,
            self.module,
            end_of_stream,
        )
    }

    fn response_body(&self, chunks: &[&[u8]], end_of_stream: bool) -> u32 {
        self.stream.body_hook(1, chunks, || {
            crate::envoy_dynamic_module_on_http_filter_response_body(
                self.stream.0,
                self.module,
                end_of_stream,
            )
        })
    }

    fn complete(&self) {
        crate::envoy_dynamic_module_on_http_filter_stream_complete(self.stream.0, self.module);
    }

    fn destroy(self) {
        // SAFETY: made by `filter_new`, destroyed once (this consumes it).
        unsafe { crate::envoy_dynamic_module_on_http_filter_destroy(self.module) };
    }
}

/// A client's POST of `body_length` bytes to `path`.
fn post(path: &str, body_length: usize) -> Stream {
    let length = body_length.to_string();
    Stream::request(&[
        (":method", b"POST"),
        (":path", path.as_bytes()),
        (":authority", b"gateway"),
        ("content-type", b"application/json"),
        ("content-length", length.as_bytes()),
        ("x-request-id", b"req-1"),
    ])
}

/// Both roles' configs, as one Envoy has them.
fn configs() -> (FakeConfig, FakeConfig) {
    let edge = FakeConfig::new(crate::EDGE_ROLE, CONFIG);
    let upstream = FakeConfig::new(crate::UPSTREAM_ROLE, CONFIG);
    assert!(!edge.module.is_null() && !upstream.module.is_null());
    (edge, upstream)
}

/// The edge filter of a chat request whose whole body it has read.
fn routed_chat(edge_config: &FakeConfig) -> Filter {
    let edge = Filter::new(edge_config, post("/v1/chat/completions", CHAT.len()));
    assert_eq!(edge.request_headers(false), abi::STOP, "waits for the body");
    assert_eq!(edge.request_body(&[CHAT.as_bytes()], true), abi::CONTINUE);
    edge
}

/// The router's attempt of the edge's request, its request sent whole.
fn attempt_sent(upstream_config: &FakeConfig, edge: &Filter) -> Filter {
    let attempt = Filter::new(upstream_config, Stream::attempt_of(edge.stream, ENDPOINT));
    assert_eq!(attempt.request_headers(false), abi::STOP);
    let body = edge.stream.forwarded_body(0);
    assert_eq!(attempt.request_body(&[&body], true), abi::CONTINUE);
    attempt
}

/// The vendor answers the attempt 200 with JSON: its headers, held for
/// the body (which the attempt translates whole).
fn vendor_answers_json(attempt: &Filter) {
    attempt.stream.set_headers(
        RESPONSE,
        &[(":status", b"200"), ("content-type", b"application/json")],
    );
    assert_eq!(attempt.response_headers(false), abi::STOP);
}

/// The response the attempt passed on reaches the edge (headers, body).
fn relay_response(attempt: &Filter, edge: &Filter) {
    edge.stream
        .copy_headers(RESPONSE, attempt.stream.headers(RESPONSE));
    assert_eq!(edge.response_headers(false), abi::CONTINUE);
    let body = attempt.stream.forwarded_body(1);
    assert_eq!(edge.response_body(&[&body], true), abi::CONTINUE);
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(bytes)))
}

/// The one access-log line the edge wrote (`wasm.llm_log`).
fn log_line(edge: &Filter) -> serde_json::Value {
    let writes = edge.stream.filter_state_writes("wasm.llm_log");
    assert_eq!(writes.len(), 1, "one log line");
    let (line, stored) = &writes[0];
    assert!(stored);
    json(line)
}

/// A request header as text.
fn request_header(filter: &Filter, name: &str) -> Option<String> {
    filter.stream.header(REQUEST, name)
}
