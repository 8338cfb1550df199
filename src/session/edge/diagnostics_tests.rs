//! The edge session and the diagnostics view, natively: what a request
//! records when it ends (and nothing while the view is off), its prompt
//! only when content is captured, the view's paths answered by the edge
//! and never routed, and what requests in flight reserve.

use std::rc::Rc;

use sha2::{Digest, Sha256};

use super::Edge;
use crate::config::Config;
use crate::diagnostics::{inflight, ring};
use crate::session::exchange::Handoff;
use crate::session::fake::FakeHost;
use crate::session::host::{Flow, Map};
use crate::session::Session;

const KEY: &str = "team-a-secret";
const ADMIN: &str = "oncall-secret";
const CHAT: &str = r#"{"model":"chat","messages":[{"role":"user","content":"hello there"}]}"#;

fn hash(key: &str) -> String {
    format!("{:x}", Sha256::digest(key.as_bytes()))
}

fn config(diagnostics: &str) -> Rc<Config> {
    let json = format!(
        r#"{{"providers":{{"an":{{"dialect":"anthropic","api_key":"sk-ant-vendor"}}}},
             "model_groups":{{"chat":{{"candidates":[{{"provider":"an","model":"claude-x","cluster":"anthropic_cluster"}}]}}}},
             "auth":{{"enabled":true,"keys":[{{"name":"team-a","sha256":"{}","groups":["*"]}}]}},
             "limits":{{"rate":[{{"key":"team-a","tokens_per_hour":100000}}],"reserve_output_tokens":100}}
             {diagnostics}}}"#,
        hash(KEY)
    );
    Rc::new(Config::parse(json.as_bytes(), |_| None).unwrap())
}

fn on(extra: &str) -> Rc<Config> {
    config(&format!(
        r#","diagnostics":{{"admin_keys":[{{"name":"oncall","sha256":"{}"}}]{extra}}}"#,
        hash(ADMIN)
    ))
}

fn edge(
    config: &Rc<Config>,
    method: &str,
    path: &str,
    key: &str,
    shared: Option<&FakeHost>,
) -> Edge<FakeHost> {
    let host = FakeHost::new();
    if let Some(other) = shared {
        // Another request on the same proxy (and worker).
        *host.shared.borrow_mut() = other.shared.borrow().clone();
    } else {
        // A proxy of its own: this worker has claimed nothing in it yet.
        ring::forget_claim();
        inflight::forget_worker();
        super::prepare(&host, config);
    }
    host.set(Map::Request, ":method", method);
    host.set(Map::Request, ":path", path);
    host.set(Map::Request, "authorization", &format!("Bearer {key}"));
    host.set(Map::Request, "content-type", "application/json");
    host.set(Map::Request, "x-request-id", "req-7");
    host.set(Map::Request, "x-secret-header", "do-not-record");
    *host.request_body.borrow_mut() = CHAT.as_bytes().to_vec();
    Edge::new(host, Rc::clone(config))
}

/// The request admitted, answered by one attempt that failed over (a 503
/// then a 200), and ended.
fn run(e: &mut Edge<FakeHost>) {
    assert_eq!(e.on_request_headers(false), Flow::Pause);
    let size = e.host.request_body.borrow().len();
    assert_eq!(e.on_request_body(size, true), Flow::Continue);
    let handoff = Handoff::decode(e.host.prop("llm_handoff").unwrap().as_bytes()).unwrap();
    let exchange = crate::session::exchange::find(handoff.token.unwrap()).unwrap();
    let record = |status: u16, started_ms: u64| crate::metering::AttemptRecord {
        provider: "an".into(),
        model: "claude-x".into(),
        status,
        prompt_tokens: (status == 200).then_some(5),
        completion_tokens: (status == 200).then_some(2),
        started_ms: Some(started_ms),
        latency_ms: Some(4),
        ..Default::default()
    };
    let start = 1_733_000_000_000;
    exchange.borrow_mut().attempts = 2;
    exchange.borrow_mut().set_record(1, &record(503, start + 1));
    exchange.borrow_mut().set_record(2, &record(200, start + 8));
    exchange
        .borrow_mut()
        .route
        .extend(["an/claude-x:503".to_owned(), "an/claude-x:200".to_owned()]);
    e.host.set(Map::Response, ":status", "200");
    e.host.set(Map::Response, "x-llm-provider", "an");
    e.host.set_prop(&["response", "flags"], &0u64.to_le_bytes());
    e.on_response_headers(false);
    *e.host.response_body.borrow_mut() = br#"{"answer":"hi"}"#.to_vec();
    e.on_response_body(15, true);
    e.on_log();
}

/// Every ring slot's bytes, as text.
fn ring_text(host: &FakeHost) -> String {
    host.shared
        .borrow()
        .iter()
        .filter(|(k, _)| String::from_utf8_lossy(k).contains(".diag.slot."))
        .map(|(_, (v, _))| String::from_utf8_lossy(v).into_owned())
        .collect()
}

#[test]
fn off_a_request_makes_no_call_of_the_views() {
    let mut e = edge(&config(""), "POST", "/v1/chat/completions", KEY, None);
    run(&mut e);
    let calls = e.host.take_record();
    assert!(!calls.iter().any(|c| c.contains("diag")), "{calls:?}");
    assert!(
        !calls.iter().any(|c| c.contains("response.flags")),
        "{calls:?}"
    );
}

#[test]
fn a_request_is_recorded_when_it_ends_with_its_attempts_and_no_secret() {
    let config = on("");
    let mut e = edge(&config, "POST", "/v1/chat/completions", KEY, None);
    run(&mut e);
    let text = ring_text(&e.host);
    let trace: crate::diagnostics::trace::Trace = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (
            trace.request_id.as_str(),
            trace.key.as_str(),
            trace.group.as_str()
        ),
        ("req-7", "team-a", "chat")
    );
    assert_eq!(
        (trace.cluster.as_str(), trace.status),
        ("anthropic_cluster", 200)
    );
    let outcomes: Vec<&str> = trace.attempts.iter().map(|a| a.outcome.as_str()).collect();
    assert_eq!(outcomes, ["503", "200"]);
    assert_eq!(trace.attempts[1].retry_on.as_deref(), Some("5xx"));
    assert_eq!(
        (trace.attempts[0].start_ms, trace.attempts[1].start_ms),
        (Some(1), Some(8))
    );
    assert_eq!((trace.input_tokens, trace.output_tokens), (5, 2));
    assert_eq!(
        (trace.prompt, trace.answer),
        (None, None),
        "content is off by default"
    );
    for secret in [
        KEY,
        "sk-ant-vendor",
        "do-not-record",
        "x-secret-header",
        ADMIN,
        "hello there",
    ] {
        assert!(!text.contains(secret), "{secret} recorded: {text}");
    }
}

#[test]
fn content_is_captured_only_when_configured_and_bounded() {
    let config = on(r#","capture_content":true,"capture_bytes":20"#);
    let mut e = edge(&config, "POST", "/v1/chat/completions", KEY, None);
    run(&mut e);
    let trace: crate::diagnostics::trace::Trace =
        serde_json::from_str(&ring_text(&e.host)).unwrap();
    assert_eq!(trace.prompt.as_deref(), Some(&CHAT[..20]));
    assert_eq!(trace.answer.as_deref(), Some(r#"{"answer":"hi"}"#));
}

#[test]
fn the_views_paths_are_answered_by_the_edge_and_never_routed() {
    let config = on("");
    let mut e = edge(&config, "POST", "/v1/chat/completions", KEY, None);
    run(&mut e);
    let mut view = edge(
        &config,
        "GET",
        "/llm-gateway/api/requests",
        ADMIN,
        Some(&e.host),
    );
    assert_eq!(view.on_request_headers(true), Flow::Pause);
    let (status, body) = view.host.reply.borrow().clone().unwrap();
    assert_eq!(status, 200);
    let data: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(data["requests"][0]["request_id"], "req-7");
    assert_eq!(view.host.get(Map::Request, "x-llm-cluster"), None);
    assert!(view.host.prop("llm_handoff").is_none());
    let calls = view.host.take_calls();
    assert!(
        calls
            .iter()
            .any(|c| c == "count llm_gateway.diagnostics_requests;outcome=api 1"),
        "{calls:?}"
    );
    // A gateway key is no admin key; the request is not metered either way.
    let mut refused = edge(&config, "GET", "/llm-gateway/api/view", KEY, Some(&e.host));
    refused.on_request_headers(true);
    assert_eq!(refused.host.reply.borrow().as_ref().map(|r| r.0), Some(401));
    refused.on_log();
    assert!(refused.host.prop("llm_log").is_none());
    // Off, the prefix is still the gateway's: a 404, not a route.
    let off = config_off();
    let mut e = edge(&off, "GET", "/llm-gateway/", ADMIN, None);
    e.on_request_headers(true);
    assert_eq!(e.host.reply.borrow().as_ref().map(|r| r.0), Some(404));
}

fn config_off() -> Rc<Config> {
    config("")
}

#[test]
fn the_limits_view_shows_what_requests_in_flight_reserve() {
    let config = on("");
    let mut e = edge(&config, "POST", "/v1/chat/completions", KEY, None);
    assert_eq!(e.on_request_headers(false), Flow::Pause);
    let size = e.host.request_body.borrow().len();
    assert_eq!(e.on_request_body(size, true), Flow::Continue);
    let limits = |host: &FakeHost| {
        let mut view = edge(&config, "GET", "/llm-gateway/api/limits", ADMIN, Some(host));
        view.on_request_headers(true);
        let (_, body) = view.host.reply.borrow().clone().unwrap();
        let data: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let row = &data["rows"][0];
        (
            row["used"].as_f64().unwrap(),
            row["reserved"].as_f64().unwrap(),
        )
    };
    let prompt = e.admission.chat.as_ref().unwrap().estimated_prompt_tokens as f64;
    assert_eq!(limits(&e.host), (0.0, prompt + 100.0));
    // The request ends (nothing answered it: its prompt is charged).
    e.on_log();
    assert_eq!(limits(&e.host), (prompt, 0.0));
}
