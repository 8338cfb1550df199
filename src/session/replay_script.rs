//! The host-call script `benches/wasm-floor` replays (its `replay` mode, the
//! benchmark's host-call floor): every host call the edge and attempt
//! sessions make for the benchmark's request to `mock-anthropic`, with the
//! configuration envoy/gateway.yaml ships, recorded here over the fake host.
//! The replay makes the same calls in the same callbacks with none of the
//! gateway's work, so the floor follows the sessions instead of a hand copy.
//!
//! The script is a golden file: this test fails when the sessions' calls
//! change, and `GOLDEN_UPDATE=1 cargo test` rewrites it (review the diff).
//!
//! Format, one line each:
//! - `[KIND ROLE CALLBACK] FLOW`: a callback's calls follow, then it
//!   answers FLOW (`continue`, `pause`; nothing for `log`). KIND is `json`,
//!   `stream`, or `both` when the two requests' calls are the same. A body
//!   callback is `.first` or `.next` (more to come) or `.end`.
//! - then the calls in `FakeHost`'s words. Two placeholders: `{length}` is
//!   the length of the body the role writes, `{token}` the part of the
//!   handoff that tells one request's attempts from another's.

use std::fmt::Write as _;
use std::rc::Rc;

use super::attempt::Attempt;
use super::edge::{limiter, Edge};
use super::fake::FakeHost;
use super::host::{Flow, Map};
use super::{Session, HANDOFF_PROPERTY};
use crate::config::Config;
use crate::session::exchange::Handoff;

const SCRIPT_PATH: &str = "benches/wasm-floor/src/replay.calls";
const SCRIPT: &str = include_str!("../../benches/wasm-floor/src/replay.calls");
const GATEWAY_YAML: &str = include_str!("../../envoy/gateway.yaml");
/// The model group `make bench` measures both floors with (`WASM_FLOOR_GROUP`).
const GROUP: &str = "mock-anthropic";
const PROVIDER_METADATA: &str = "xds.upstream_host_metadata.filter_metadata.llm.provider";
/// What Envoy's HCM generates for a request without one.
const REQUEST_ID: &str = "5d3a9e52-7c1b-4f0e-9a64-2b8f1c0d7e31";
/// What the vendor answers: a short text (`tests/golden`) and its stream.
const ANSWER: &str = include_str!("../../tests/golden/responses/anthropic/text.json");
const STREAM: [&str; 3] = [
    concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01Text\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"mock-claude-sonnet\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"The quick brown fox \"}}\n\n",
    ),
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"jumps over the lazy dog \"}}\n\n",
    concat!(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":12}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ),
];
/// The calls the replay knows how to make.
const REPLAYED: [&str; 12] = [
    "now",
    "headers",
    "header",
    "set_header",
    "remove_header",
    "body",
    "set_body",
    "property",
    "set_property",
    "count",
    "record",
    "gauge",
];

/// The gateway configuration envoy/gateway.yaml ships: the block scalar
/// under `value: &llm_config |`.
fn shipped_config() -> Rc<Config> {
    let mut lines = GATEWAY_YAML.lines();
    let anchor = lines
        .by_ref()
        .find(|line| line.trim_end().ends_with("&llm_config |"))
        .unwrap();
    let indent = anchor.len() - anchor.trim_start().len();
    let json: String = lines
        .take_while(|line| line.trim().is_empty() || line.len() - line.trim_start().len() > indent)
        .map(|line| format!("{line}\n"))
        .collect();
    // As the benchmark runs it (scripts/gateway.py's `build_bootstrap`):
    // without the mock groups' response caches, which `make run` keeps.
    let mut config: serde_json::Value = serde_json::from_str(&json).unwrap();
    for group in config["model_groups"].as_object_mut().unwrap().values_mut() {
        group.as_object_mut().unwrap().remove("cache");
    }
    Rc::new(Config::parse(config.to_string().as_bytes(), |_| None).unwrap())
}

/// The benchmark's request: scripts/bench.py's `unified_body(1024, stream)`.
fn client_body(stream: bool) -> Vec<u8> {
    let mut body = serde_json::json!({
        "model": "bench", "max_tokens": 256, "stream": stream,
        "messages": [{"role": "system", "content": "You are a benchmark."},
                     {"role": "user", "content": ""}],
    });
    if stream {
        body["stream_options"] = serde_json::json!({"include_usage": true});
    }
    let empty = serde_json::to_vec(&body).unwrap().len();
    let text: String = "lorem ipsum dolor sit amet "
        .chars()
        .cycle()
        .take(1024 - empty)
        .collect();
    body["messages"][1]["content"] = text.into();
    serde_json::to_vec(&body).unwrap()
}

/// One callback of one role: its calls and what it answered.
struct Section {
    name: String,
    flow: Option<Flow>,
    calls: Vec<String>,
}

/// What one request's callbacks record, in the order Envoy calls them.
#[derive(Default)]
struct Recording(Vec<Section>);

impl Recording {
    fn take(&mut self, name: &str, flow: Option<Flow>, host: &FakeHost) {
        self.0.push(Section {
            name: name.to_owned(),
            flow,
            calls: host.take_record(),
        });
    }
}

/// Body callbacks of a body cut in `parts`: `.first`, `.next`..., `.end`.
fn body_step(index: usize, parts: usize) -> &'static str {
    match index {
        i if i + 1 == parts => "end",
        0 => "first",
        _ => "next",
    }
}

/// Cuts a request body in three, as Envoy hands a paused body over: each
/// callback sees everything buffered so far.
fn thirds(len: usize) -> [(usize, bool); 3] {
    [(len / 3, false), (len * 2 / 3, false), (len, true)]
}

/// One request, JSON or stream, through both roles.
fn record(stream: bool) -> Recording {
    // A fresh worker's calls: none of another test's discovery.
    crate::session::discovery::forget_on_this_thread();
    let config = shipped_config();
    let mut out = Recording::default();
    let body = client_body(stream);

    // The edge role: the request as wrk and Envoy's HCM present it.
    let host = FakeHost::new();
    limiter::prepare(&host, &config);
    for (name, value) in [
        (":authority", "127.0.0.1:10000"),
        (":path", "/v1/chat/completions"),
        (":method", "POST"),
        (":scheme", "http"),
        ("content-type", "application/json"),
        ("x-model-group", GROUP),
        ("content-length", &body.len().to_string()),
        ("x-forwarded-proto", "http"),
        ("x-request-id", REQUEST_ID),
    ] {
        host.set(Map::Request, name, value);
    }
    host.request_body.replace(body.clone());
    host.take_record();
    let mut edge = Edge::new(host, Rc::clone(&config));
    let flow = edge.on_request_headers(false);
    out.take("edge request_headers", Some(flow), &edge.host);
    for (i, (size, end)) in thirds(body.len()).into_iter().enumerate() {
        edge.host.advance(0.000_1);
        let flow = edge.on_request_body(size, end);
        let name = format!("edge request_body.{}", body_step(i, 3));
        out.take(&name, Some(flow), &edge.host);
    }
    assert!(edge.host.reply.borrow().is_none(), "the gateway answered");

    // The attempt: what the edge role left, and what Envoy's router adds.
    let host = FakeHost::new();
    host.request_headers
        .replace(edge.host.request_headers.borrow().clone());
    host.set(Map::Request, "x-envoy-expected-rq-timeout-ms", "300000");
    host.request_body.replace(body.clone());
    let handoff = edge.host.prop(HANDOFF_PROPERTY).unwrap();
    host.set_prop(&[HANDOFF_PROPERTY], handoff.as_bytes());
    host.set_prop(&[PROVIDER_METADATA], GROUP.as_bytes());
    let mut attempt = Attempt::new(host, config);
    let flow = attempt.on_request_headers(false);
    out.take("upstream request_headers", Some(flow), &attempt.host);
    for (i, (size, end)) in thirds(body.len()).into_iter().enumerate() {
        let flow = attempt.on_request_body(size, end);
        let name = format!("upstream request_body.{}", body_step(i, 3));
        out.take(&name, Some(flow), &attempt.host);
    }
    // The replay tells a stream request by how its vendor body ends.
    let sent = attempt.host.request_body.borrow().clone();
    assert_eq!(sent.ends_with(b"\"stream\":true}"), stream);

    // The vendor's answer, as the mock sends it.
    let host = &attempt.host;
    host.set(Map::Response, ":status", "200");
    let chunks: Vec<&str> = if stream {
        host.set(Map::Response, "content-type", "text/event-stream");
        host.set(Map::Response, "cache-control", "no-cache");
        STREAM.to_vec()
    } else {
        host.set(Map::Response, "content-type", "application/json");
        host.set(Map::Response, "content-length", &ANSWER.len().to_string());
        let (a, rest) = ANSWER.split_at(ANSWER.len() / 3);
        let (b, c) = rest.split_at(rest.len() / 2);
        vec![a, b, c]
    };
    host.advance(0.2);
    let flow = attempt.on_response_headers(false);
    out.take("upstream response_headers", Some(flow), &attempt.host);
    // What the attempt lets through reaches the edge role.
    let mut delivered = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let end = i + 1 == chunks.len();
        let mut buffer = attempt.host.response_body.borrow_mut();
        if stream {
            buffer.clear();
        }
        buffer.extend_from_slice(chunk.as_bytes());
        let size = buffer.len();
        drop(buffer);
        attempt.host.advance(0.01);
        let flow = attempt.on_response_body(size, end);
        let name = format!("upstream response_body.{}", body_step(i, chunks.len()));
        out.take(&name, Some(flow), &attempt.host);
        if flow == Flow::Continue {
            delivered.push((attempt.host.response_body.borrow().clone(), end));
        }
    }

    // The edge role's answer and its end.
    edge.host
        .response_headers
        .replace(attempt.host.response_headers.borrow().clone());
    let flow = edge.on_response_headers(false);
    out.take("edge response_headers", Some(flow), &edge.host);
    if let [(answer, true)] = delivered.as_slice() {
        // The whole answer at once; Envoy may still hand it over in parts.
        let (a, b) = (answer.len() / 3, answer.len() * 2 / 3);
        let part = |range: std::ops::Range<usize>| answer.get(range).unwrap_or_default().to_vec();
        delivered = vec![
            (part(0..a), false),
            (part(a..b), false),
            (part(b..answer.len()), true),
        ];
    }
    let count = delivered.len();
    for (i, (chunk, end)) in delivered.into_iter().enumerate() {
        let size = chunk.len();
        edge.host.response_body.replace(chunk);
        let flow = edge.on_response_body(size, end);
        let name = format!("edge response_body.{}", body_step(i, count));
        out.take(&name, Some(flow), &edge.host);
    }
    edge.host.advance(0.001);
    attempt.on_log();
    out.take("upstream log", None, &attempt.host);
    edge.on_log();
    out.take("edge log", None, &edge.host);
    out
}

/// Marks what differs from one request to the next (see the module docs).
fn placeholders(recording: &mut Recording) {
    for section in &mut recording.0 {
        for call in &mut section.calls {
            if let Some(set) = call.strip_prefix("set_header request content-length=") {
                assert!(set.parse::<usize>().is_ok(), "{call}");
                *call = "set_header request content-length={length}".to_owned();
            }
            let handoff = format!("set_property {HANDOFF_PROPERTY}=");
            if let Some(value) = call.strip_prefix(&handoff) {
                let decoded = Handoff::decode(value.as_bytes()).unwrap();
                assert_eq!(decoded.encode(), value);
                let token = decoded.token.unwrap().to_string();
                let marked = value.replacen(&format!(";{token};"), ";{token};", 1);
                *call = format!("{handoff}{marked}");
            }
        }
    }
}

fn flow_name(flow: Option<Flow>) -> &'static str {
    match flow {
        Some(Flow::Continue) => " continue",
        Some(Flow::Pause) => " pause",
        None => "",
    }
}

fn render(json: &Recording, stream: &Recording) -> String {
    let mut out = String::from(
        "# The host calls the gateway's sessions make for the benchmark's request to\n\
         # mock-anthropic (envoy/gateway.yaml), recorded by src/session/replay_script.rs\n\
         # over the fake host; benches/wasm-floor replays them (`replay` mode).\n\
         # Generated: GOLDEN_UPDATE=1 cargo test rewrites it. Format: see that module.\n",
    );
    let names = |r: &Recording| r.0.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(json), names(stream));
    for (j, s) in json.0.iter().zip(&stream.0) {
        assert_eq!(j.name, s.name);
        let same = j.calls == s.calls && j.flow == s.flow;
        let kinds = if same {
            vec![("both", j)]
        } else {
            vec![("json", j), ("stream", s)]
        };
        for (kind, section) in kinds {
            let _ = writeln!(
                out,
                "\n[{kind} {}]{}",
                section.name,
                flow_name(section.flow)
            );
            for call in &section.calls {
                let _ = writeln!(out, "{call}");
            }
        }
    }
    out
}

fn section<'a>(recording: &'a Recording, name: &str) -> &'a Section {
    recording.0.iter().find(|s| s.name == name).unwrap()
}

#[test]
fn the_benchmark_replays_the_sessions_own_host_calls() {
    let (mut json, mut stream) = (record(false), record(true));
    placeholders(&mut json);
    placeholders(&mut stream);
    // What the replay can rely on: the calls before the body is read are
    // the same for both requests; the edge role reads the body first,
    // which tells the replay which request it is.
    for name in [
        "edge request_headers",
        "edge request_body.first",
        "edge request_body.next",
        "upstream request_headers",
        "upstream request_body.first",
        "upstream request_body.next",
    ] {
        let (j, s) = (section(&json, name), section(&stream, name));
        assert_eq!((&j.calls, j.flow), (&s.calls, s.flow), "{name}");
    }
    for recording in [&json, &stream] {
        let end = section(recording, "edge request_body.end");
        assert_eq!(end.calls.first().map(String::as_str), Some("body request"));
        for call in recording.0.iter().flat_map(|s| &s.calls) {
            let verb = call.split(' ').next().unwrap_or_default();
            assert!(REPLAYED.contains(&verb), "the replay cannot make `{call}`");
        }
    }
    let script = render(&json, &stream);
    if std::env::var_os("GOLDEN_UPDATE").is_some() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SCRIPT_PATH);
        std::fs::write(path, &script).unwrap();
        return;
    }
    let changed = script
        .lines()
        .zip(SCRIPT.lines())
        .position(|(new, old)| new != old);
    assert!(
        script == SCRIPT,
        "the sessions' host calls changed (first at line {}): review them and \
         run GOLDEN_UPDATE=1 cargo test to rewrite {SCRIPT_PATH}",
        changed.map_or(script.lines().count().min(SCRIPT.lines().count()), |i| i) + 1
    );
}
