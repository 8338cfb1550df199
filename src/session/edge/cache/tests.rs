//! The response cache through both roles, natively: a miss whose answer
//! an attempt captures and the edge stores, then a hit answered by the
//! edge alone in each client's API; what a key, a group, `cache-control`,
//! an error or a time to live change; and the host calls a group without
//! a cache makes for it (none).

use std::rc::Rc;

use sha2::{Digest, Sha256};

use super::Edge;
use crate::config::Config;
use crate::headers::Headers;
use crate::session::attempt::Attempt;
use crate::session::fake::FakeHost;
use crate::session::host::{CalloutAnswer, Flow, Map};
use crate::session::Session;

const KEY: &str = "team-a-secret";
const OTHER: &str = "team-b-secret";
const PROVIDER: &str = "xds.upstream_host_metadata.filter_metadata.llm.provider";

/// Groups `cached` (on Anthropic), `native` (cached, on OpenAI: a
/// pass-through pair for chat clients), `shared` (cached, scope group) and
/// `plain` (no cache); keys team-a and team-b.
fn config() -> Rc<Config> {
    Rc::new(Config::parse(config_json().as_bytes(), |_| None).unwrap())
}

fn config_json() -> String {
    let hash = |k: &str| format!("{:x}", Sha256::digest(k.as_bytes()));
    format!(
        r#"{{"providers":{{"an":{{"dialect":"anthropic","api_key":"sk-ant-secret","default_max_tokens":100,
                                 "prices":{{"*":{{"input":1.0,"output":2.0}}}}}},
                           "oa":{{"dialect":"openai","api_key":"sk-oa-secret"}}}},
             "model_groups":{{
               "cached":{{"candidates":[{{"provider":"an","model":"claude-x","cluster":"c"}}],"cache":{{"ttl_seconds":60}}}},
               "native":{{"candidates":[{{"provider":"oa","model":"gpt-x","cluster":"c"}}],"cache":{{}}}},
               "shared":{{"candidates":[{{"provider":"an","model":"claude-x","cluster":"c"}}],"cache":{{"scope":"group"}}}},
               "plain":{{"candidates":[{{"provider":"an","model":"claude-x","cluster":"c"}}]}}}},
             "auth":{{"enabled":true,"keys":[{{"name":"team-a","sha256":"{}","groups":["*"]}},
                                             {{"name":"team-b","sha256":"{}","groups":["*"]}}]}}}}"#,
        hash(KEY),
        hash(OTHER)
    )
}

/// One request as the edge role sees it, on a proxy whose shared data is `proxy`'s.
struct Request<'a> {
    key: &'a str,
    path: &'a str,
    body: String,
    headers: Vec<(&'a str, &'a str)>,
}

fn chat(group: &str, stream: bool) -> Request<'static> {
    Request {
        key: KEY,
        path: "/v1/chat/completions",
        body: format!(
            r#"{{"model":"{group}","stream":{stream},"messages":[{{"role":"user","content":"hi"}}]}}"#
        ),
        headers: Vec::new(),
    }
}

fn edge(r: &Request, proxy: &FakeHost) -> Edge<FakeHost> {
    edge_with(r, proxy, config())
}

/// [`config`] with the fleet's store: the state service's cluster `llm_state`.
fn fleet_config() -> Rc<Config> {
    let mut json: serde_json::Value = serde_json::from_str(&config_json()).unwrap();
    json["shared_state"] = serde_json::json!({"service": {"cluster": "llm_state"}});
    Rc::new(Config::parse(json.to_string().as_bytes(), |_| None).unwrap())
}

fn edge_with(r: &Request, proxy: &FakeHost, config: Rc<Config>) -> Edge<FakeHost> {
    let host = FakeHost::new();
    host.clock.set(proxy.clock.get());
    *host.shared.borrow_mut() = proxy.shared.borrow().clone();
    host.set(Map::Request, ":method", "POST");
    host.set(Map::Request, ":path", r.path);
    host.set(Map::Request, "authorization", &format!("Bearer {}", r.key));
    host.set(Map::Request, "content-type", "application/json");
    for (name, value) in &r.headers {
        host.set(Map::Request, name, value);
    }
    *host.request_body.borrow_mut() = r.body.as_bytes().to_vec();
    Edge::new(host, config)
}

fn send(e: &mut Edge<FakeHost>) -> Flow {
    assert_eq!(e.on_request_headers(false), Flow::Pause);
    let size = e.host.request_body.borrow().len();
    e.on_request_body(size, true)
}

/// The vendor's answer to the attempt the edge handed `e`'s request to
/// (on provider `provider`), through the attempt and back through the
/// edge; then the request's log. The proxy's shared data is `e`'s after.
fn answer_through(e: &mut Edge<FakeHost>, provider: &str, status: &str, vendor: &str) {
    let host = FakeHost::new();
    host.set_prop(
        &["llm_handoff"],
        e.host.prop("llm_handoff").unwrap().as_bytes(),
    );
    host.set_prop(&[PROVIDER], provider.as_bytes());
    for (name, value) in e.host.request_headers.borrow().iter() {
        host.request_headers
            .borrow_mut()
            .push((name.clone(), value.clone()));
    }
    *host.request_body.borrow_mut() = e.host.request_body.borrow().clone();
    let mut a = Attempt::new(host, config());
    assert_eq!(a.on_request_headers(false), Flow::Pause);
    let size = a.host.request_body.borrow().len();
    assert_eq!(a.on_request_body(size, true), Flow::Continue);
    let stream = vendor.starts_with("event:") || vendor.starts_with("data:");
    let content_type = if stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    a.host.set(Map::Response, ":status", status);
    a.host.set(Map::Response, "content-type", content_type);
    a.on_response_headers(false);
    *a.host.response_body.borrow_mut() = vendor.as_bytes().to_vec();
    a.on_response_body(vendor.len(), true);
    // The client's answer passes the edge.
    for (name, value) in a.host.response_headers.borrow().iter() {
        e.host
            .response_headers
            .borrow_mut()
            .push((name.clone(), value.clone()));
    }
    let client = a.host.response_body.borrow().clone();
    a.on_done();
    e.on_response_headers(false);
    *e.host.response_body.borrow_mut() = client.clone();
    e.on_response_body(client.len(), true);
    e.on_log();
}

fn sent_header(e: &Edge<FakeHost>, name: &str) -> Option<String> {
    e.host.get(Map::Response, name)
}

fn reply_header(e: &Edge<FakeHost>, name: &str) -> Option<String> {
    (e.host.reply_headers.borrow().iter())
        .find(|(n, _)| n == name)
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
}

fn log(e: &Edge<FakeHost>) -> serde_json::Value {
    serde_json::from_str(&e.host.prop("llm_log").unwrap()).unwrap()
}

const ANTHROPIC: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x-1","content":[{"type":"text","text":"Hello from the vendor"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1000,"output_tokens":500}}"#;

/// A miss on `r`, answered by the vendor; the proxy that stored it.
fn miss(r: &Request, proxy: &FakeHost) -> Edge<FakeHost> {
    let mut e = edge(r, proxy);
    assert_eq!(send(&mut e), Flow::Continue);
    answer_through(&mut e, "an", "200", ANTHROPIC);
    assert_eq!(sent_header(&e, "x-llm-cache").as_deref(), Some("miss"));
    e
}

#[test]
fn a_repeated_request_is_answered_from_the_cache_in_each_clients_api() {
    let proxy = FakeHost::new();
    let first = miss(&chat("cached", false), &proxy);
    assert_eq!(log(&first)["cache"], "miss");
    assert_eq!(log(&first)["prompt_tokens"], 1000);

    // The same prompt, asked again: no attempt, the edge answers.
    let mut hit = edge(&chat("cached", false), &first.host);
    hit.host.advance(7.0);
    assert_eq!(send(&mut hit), Flow::Pause);
    let (status, body) = hit.host.reply.borrow().clone().unwrap();
    assert_eq!(status, 200);
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        "Hello from the vendor"
    );
    assert_eq!(answer["usage"]["prompt_tokens"], 1000);
    assert_eq!(reply_header(&hit, "x-llm-cache").as_deref(), Some("hit"));
    assert_eq!(reply_header(&hit, "age").as_deref(), Some("7"));
    assert_eq!(reply_header(&hit, "x-llm-attempts").as_deref(), Some("0"));
    assert!(
        hit.host.prop("llm_handoff").is_none(),
        "nothing handed to an attempt"
    );
    hit.on_log();
    let line = log(&hit);
    assert_eq!(line["cache"], "hit");
    assert_eq!(
        (line["prompt_tokens"].as_u64(), line["cost_usd"].as_f64()),
        (Some(0), None),
        "a hit is billed nothing"
    );
    // 1000 in at $1/M, 500 out at $2/M.
    assert_eq!(line["cache_saved_usd"], 0.002);
    let calls = hit.host.take_record();
    assert!(
        calls
            .iter()
            .any(|c| c == "count llm_gateway.cache_requests;group=cached;status=hit 1"),
        "{calls:?}"
    );
    assert!(
        calls
            .iter()
            .any(|c| c == "count llm_gateway.cache_saved_micro_usd;group=cached 2000"),
        "{calls:?}"
    );

    // The same prompt through Anthropic's Messages API, streamed.
    let messages = Request {
        key: KEY,
        path: "/v1/messages",
        body: r#"{"model":"cached","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#.into(),
        headers: Vec::new(),
    };
    // max_tokens is part of the key: Chat's request had the provider's default.
    let mut other = edge(&messages, &first.host);
    assert_eq!(
        send(&mut other),
        Flow::Continue,
        "another output limit, another key"
    );
    let chat_limited = Request {
        body: r#"{"model":"cached","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}"#
            .into(),
        ..chat("cached", false)
    };
    let stored = miss(&chat_limited, &first.host);
    let mut streamed = edge(&messages, &stored.host);
    assert_eq!(send(&mut streamed), Flow::Pause);
    let (_, body) = streamed.host.reply.borrow().clone().unwrap();
    let text = String::from_utf8(body).unwrap();
    assert!(text.starts_with("event: message_start\n"), "{text}");
    assert!(text.contains("Hello from the vendor"), "{text}");
    assert!(
        text.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
        "{text}"
    );
    assert_eq!(
        reply_header(&streamed, "content-type").as_deref(),
        Some("text/event-stream")
    );
}

#[test]
fn entries_are_the_keys_own_unless_the_group_shares_them_and_never_cross_groups() {
    let proxy = FakeHost::new();
    let stored = miss(&chat("cached", false), &proxy);
    let other_key = Request {
        key: OTHER,
        ..chat("cached", false)
    };
    let mut e = edge(&other_key, &stored.host);
    assert_eq!(
        send(&mut e),
        Flow::Continue,
        "team-b never gets team-a's entry"
    );
    let mut e = edge(&chat("shared", false), &stored.host);
    assert_eq!(send(&mut e), Flow::Continue, "another group, another entry");

    let stored = miss(&chat("shared", false), &proxy);
    let mut e = edge(
        &Request {
            key: OTHER,
            ..chat("shared", false)
        },
        &stored.host,
    );
    assert_eq!(send(&mut e), Flow::Pause, "scope group: every key's");
    assert_eq!(reply_header(&e, "x-llm-cache").as_deref(), Some("hit"));
}

#[test]
fn cache_control_skips_the_lookup_or_the_cache() {
    let proxy = FakeHost::new();
    let stored = miss(&chat("cached", false), &proxy);
    let with = |value| Request {
        headers: vec![("cache-control", value)],
        ..chat("cached", false)
    };
    // no-cache: not answered from the cache, its answer stored again.
    let mut e = edge(&with("no-cache"), &stored.host);
    assert_eq!(send(&mut e), Flow::Continue);
    answer_through(&mut e, "an", "200", ANTHROPIC);
    assert_eq!(sent_header(&e, "x-llm-cache").as_deref(), Some("miss"));
    // no-store: neither.
    let mut e = edge(&with("No-Store"), &stored.host);
    assert_eq!(send(&mut e), Flow::Continue);
    assert_eq!(
        e.host.prop("llm_handoff").map(|h| h.is_empty()),
        Some(false)
    );
    answer_through(&mut e, "an", "200", ANTHROPIC);
    assert_eq!(sent_header(&e, "x-llm-cache").as_deref(), Some("bypass"));
    assert_eq!(log(&e)["cache"], "bypass");
}

#[test]
fn only_a_normal_200_answer_is_stored() {
    let proxy = FakeHost::new();
    for (status, vendor) in [
        (
            "529",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#,
        ),
        ("200", &ANTHROPIC.replace("end_turn", "refusal")),
        ("200", &ANTHROPIC.replace("end_turn", "pause_turn")),
    ] {
        let mut e = edge(&chat("cached", false), &proxy);
        assert_eq!(send(&mut e), Flow::Continue);
        answer_through(&mut e, "an", status, vendor);
        let mut again = edge(&chat("cached", false), &e.host);
        assert_eq!(send(&mut again), Flow::Continue, "{status} {vendor}");
    }
}

#[test]
fn an_entry_expires_after_the_groups_time_to_live() {
    let proxy = FakeHost::new();
    let stored = miss(&chat("cached", false), &proxy);
    let mut e = edge(&chat("cached", false), &stored.host);
    e.host.advance(59.0);
    assert_eq!(send(&mut e), Flow::Pause);
    let mut e = edge(&chat("cached", false), &stored.host);
    e.host.advance(60.0);
    assert_eq!(send(&mut e), Flow::Continue);
}

#[test]
fn a_pass_through_pair_is_translated_while_its_answer_is_captured() {
    let openai = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-x-1","choices":[{"index":0,"message":{"role":"assistant","content":"From OpenAI"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#;
    let proxy = FakeHost::new();
    let mut e = edge(&chat("native", false), &proxy);
    assert_eq!(send(&mut e), Flow::Continue);
    answer_through(&mut e, "oa", "200", openai);
    let mut hit = edge(&chat("native", false), &e.host);
    assert_eq!(send(&mut hit), Flow::Pause);
    let (_, body) = hit.host.reply.borrow().clone().unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "From OpenAI");
    assert_eq!(answer["model"], "gpt-x-1");
}

#[test]
fn a_stream_is_captured_as_it_passes_and_replayed_as_a_stream() {
    let vendor = "event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x-1\",\"content\":[],\"usage\":{\"input_tokens\":4,\"output_tokens\":1}}}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Streamed \"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"answer\"}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n\
event: message_stop\n\
data: {\"type\":\"message_stop\"}\n\n";
    let proxy = FakeHost::new();
    let mut e = edge(&chat("cached", true), &proxy);
    assert_eq!(send(&mut e), Flow::Continue);
    answer_through(&mut e, "an", "200", vendor);
    assert_eq!(sent_header(&e, "x-llm-cache").as_deref(), Some("miss"));
    // Asked again, not streamed: the same answer, whole.
    let mut hit = edge(&chat("cached", false), &e.host);
    assert_eq!(send(&mut hit), Flow::Pause);
    let (_, body) = hit.host.reply.borrow().clone().unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        "Streamed answer"
    );
    // And streamed.
    let mut hit = edge(&chat("cached", true), &e.host);
    assert_eq!(send(&mut hit), Flow::Pause);
    let (_, body) = hit.host.reply.borrow().clone().unwrap();
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains("\"content\":\"Streamed answer\""), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
}

#[test]
fn a_group_without_a_cache_makes_no_call_for_it() {
    let proxy = FakeHost::new();
    let mut e = edge(&chat("plain", false), &proxy);
    assert_eq!(send(&mut e), Flow::Continue);
    answer_through(&mut e, "an", "200", ANTHROPIC);
    let calls = e.host.take_calls();
    assert!(
        !calls
            .iter()
            .any(|c| c.contains("cache") || c.contains("shared_data")),
        "{calls:?}"
    );
    assert_eq!(sent_header(&e, "x-llm-cache"), None);
    assert!(log(&e).get("cache").is_none());
}

/// The state service's answer: `status`, its own header on a 404.
fn service_answer(status: u16, body: &[u8]) -> CalloutAnswer {
    let mut headers = Vec::new();
    if status == 404 {
        headers.push((b"x-llm-state".to_vec(), b"missing".to_vec()));
    }
    CalloutAnswer::Answered {
        status,
        headers: Headers(headers),
        body: body.to_vec(),
    }
}

#[test]
fn with_the_fleets_store_an_answer_stored_through_one_proxy_is_a_hit_on_another() {
    let r = chat("cached", false);
    // Proxy A misses, asks the service (it has nothing), and goes on.
    let a = FakeHost::new();
    let mut e = edge_with(&r, &a, fleet_config());
    assert_eq!(send(&mut e), Flow::Pause);
    let (cluster, headers, _) = e.host.http_calls.borrow()[0].clone();
    assert_eq!(cluster, "llm_state");
    assert!(headers.contains(&(":method".into(), "GET".into())));
    assert_eq!(e.on_callout(1, service_answer(404, b"")), Flow::Continue);
    // Its answer is stored there too: the answer's end waits for it.
    answer_through(&mut e, "an", "200", ANTHROPIC);
    assert_eq!(sent_header(&e, "x-llm-cache").as_deref(), Some("miss"));
    let (_, headers, entry) = e.host.http_calls.borrow()[1].clone();
    assert!(headers.contains(&(":method".into(), "PUT".into())));
    assert!(
        headers.contains(&("x-llm-ttl".into(), "60".into())),
        "{headers:?}"
    );
    assert!(String::from_utf8_lossy(&entry).contains("Hello from the vendor"));
    assert_eq!(e.on_callout(2, service_answer(204, b"")), Flow::Continue);

    // Proxy B never saw it: the service's entry is its hit.
    let b = FakeHost::new();
    let mut e = edge_with(&r, &b, fleet_config());
    assert_eq!(send(&mut e), Flow::Pause);
    let asked = path(&e.host.http_calls.borrow()[0].1);
    assert_eq!(e.on_callout(1, service_answer(200, &entry)), Flow::Pause);
    let (status, body) = e.host.reply.borrow().clone().unwrap();
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("Hello from the vendor"));
    assert_eq!(reply_header(&e, "x-llm-cache").as_deref(), Some("hit"));
    e.on_log();
    assert_eq!(log(&e)["cache"], "hit");

    // Proxy C, the service down: a miss, counted, the request goes on.
    let c = FakeHost::new();
    let mut e = edge_with(&r, &c, fleet_config());
    assert_eq!(send(&mut e), Flow::Pause);
    assert_eq!(e.on_callout(1, CalloutAnswer::Failed), Flow::Continue);
    assert!(e
        .host
        .take_record()
        .iter()
        .any(|c| c.contains("llm_gateway.shared_state") && c.contains("unavailable")));
    answer_through(&mut e, "an", "200", ANTHROPIC);
    assert_eq!(sent_header(&e, "x-llm-cache").as_deref(), Some("miss"));

    // Another key on B: its own namespace, asked of the service again.
    let mut other = chat("cached", false);
    other.key = OTHER;
    let mut e = edge_with(&other, &b, fleet_config());
    assert_eq!(send(&mut e), Flow::Pause);
    assert_ne!(path(&e.host.http_calls.borrow()[0].1), asked);
}

fn path(headers: &[(String, String)]) -> String {
    let found = headers.iter().find(|(n, _)| n == ":path");
    found.map(|(_, v)| v.clone()).unwrap_or_default()
}

/// [`config`] with a semantic cache on group `cached`, embedding with
/// group `embed` through the self-call cluster `llm_self`.
fn semantic_config() -> Rc<Config> {
    let mut json: serde_json::Value = serde_json::from_str(&config_json()).unwrap();
    json["self_calls"] = serde_json::json!({"cluster": "llm_self"});
    json["model_groups"]["embed"] =
        serde_json::json!({"candidates": [{"provider": "oa", "model": "e", "cluster": "c"}]});
    json["model_groups"]["cached"]["cache"]["semantic"] = serde_json::json!({"embedding_group": "embed", "embedding_model": "e-small", "threshold": 0.9});
    Rc::new(Config::parse(json.to_string().as_bytes(), |_| None).unwrap())
}

fn asking(key: &'static str, text: &str) -> Request<'static> {
    Request {
        key,
        path: "/v1/chat/completions",
        body: format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{text}"}}]}}"#),
        headers: Vec::new(),
    }
}

fn embedding(vector: &[f32]) -> CalloutAnswer {
    let body = serde_json::json!({"object": "list", "model": "e",
        "data": [{"object": "embedding", "index": 0, "embedding": vector}]});
    CalloutAnswer::Answered {
        status: 200,
        headers: Headers::default(),
        body: body.to_string().into_bytes(),
    }
}

/// `r` on `proxy` (with group `cached`), its prompt embedded as `vector`:
/// the edge after the embedding's answer, and how it went on.
fn embedded(r: &Request, proxy: &FakeHost, vector: Option<&[f32]>) -> (Edge<FakeHost>, Flow) {
    let mut e = edge_with(r, proxy, semantic_config());
    e.host.set(Map::Request, "x-model-group", "cached");
    assert_eq!(send(&mut e), Flow::Pause, "waits for the embedding");
    let answer = vector.map_or(CalloutAnswer::Failed, embedding);
    let flow = e.on_callout(1, answer);
    (e, flow)
}

#[test]
fn a_prompt_close_in_meaning_is_a_semantic_hit_within_its_partition() {
    let proxy = FakeHost::new();
    let france = [1.0, 0.0, 0.0, 0.0];
    // A miss: the prompt embedded through the gateway's own listener, with
    // the caller's key, then answered by the vendor and stored.
    let r = asking(KEY, "What is the capital city of France?");
    let (mut e, flow) = embedded(&r, &proxy, Some(&france));
    let (cluster, headers, body) = e.host.http_calls.borrow()[0].clone();
    assert_eq!(cluster, "llm_self");
    for (name, value) in [
        (":path", "/v1/embeddings"),
        ("authorization", "Bearer team-a-secret"),
        ("x-model-group", "embed"),
    ] {
        assert!(
            headers.contains(&(name.into(), value.into())),
            "{headers:?}"
        );
    }
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["model"], "e-small");
    assert_eq!(body["input"], "What is the capital city of France?");
    assert_eq!(flow, Flow::Continue);
    answer_through(&mut e, "an", "200", ANTHROPIC);
    assert_eq!(sent_header(&e, "x-llm-cache").as_deref(), Some("miss"));
    let proxy = FakeHost::new();
    *proxy.shared.borrow_mut() = e.host.shared.borrow().clone();

    // A paraphrase (cosine 0.98): answered from the entry, no vendor call.
    let close = [0.98, 0.2, 0.0, 0.0];
    let (mut e, flow) = embedded(
        &asking(KEY, "Tell me the capital of France"),
        &proxy,
        Some(&close),
    );
    assert_eq!(flow, Flow::Pause);
    let (status, body) = e.host.reply.borrow().clone().unwrap();
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("Hello from the vendor"));
    assert_eq!(
        reply_header(&e, "x-llm-cache").as_deref(),
        Some("semantic-hit")
    );
    assert!(e.host.prop("llm_handoff").is_none(), "no attempt");
    e.on_log();
    assert_eq!(log(&e)["cache"], "semantic-hit");
    assert!(e
        .host
        .take_record()
        .iter()
        .any(|c| c.contains("llm_gateway.cache_semantic") && c.contains("outcome=hit")));

    // Too far (cosine 0.7), another key, or the embedding failed: a miss.
    let far = [0.7, 0.714, 0.0, 0.0];
    let (_, flow) = embedded(&asking(KEY, "Capital of Spain?"), &proxy, Some(&far));
    assert_eq!(flow, Flow::Continue);
    let (_, flow) = embedded(
        &asking(OTHER, "Tell me the capital of France"),
        &proxy,
        Some(&close),
    );
    assert_eq!(flow, Flow::Continue);
    let (e, flow) = embedded(&asking(KEY, "Tell me the capital of France"), &proxy, None);
    assert_eq!(flow, Flow::Continue);
    assert!(e
        .host
        .take_record()
        .iter()
        .any(|c| c.contains("llm_gateway.cache_semantic") && c.contains("outcome=unavailable")));
    // Other tools: another partition, though the text is close.
    let mut tools = asking(KEY, "Tell me the capital of France");
    tools.body = tools.body.replace(
        r#""model":"m","#,
        r#""model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"#,
    );
    let (_, flow) = embedded(&tools, &proxy, Some(&close));
    assert_eq!(flow, Flow::Continue);
    // The exact repeat is a plain hit, asked of no embedding group.
    let mut e = edge_with(&r, &proxy, semantic_config());
    e.host.set(Map::Request, "x-model-group", "cached");
    assert_eq!(send(&mut e), Flow::Pause);
    assert!(e.host.http_calls.borrow().is_empty());
    assert_eq!(reply_header(&e, "x-llm-cache").as_deref(), Some("hit"));
}

/// [`semantic_config`] with the fleet's store.
fn semantic_fleet_config() -> Rc<Config> {
    let mut json: serde_json::Value = serde_json::from_str(&config_json()).unwrap();
    json["self_calls"] = serde_json::json!({"cluster": "llm_self"});
    json["shared_state"] = serde_json::json!({"service": {"cluster": "llm_state"}});
    json["model_groups"]["embed"] =
        serde_json::json!({"candidates": [{"provider": "oa", "model": "e", "cluster": "c"}]});
    json["model_groups"]["cached"]["cache"]["semantic"] = serde_json::json!({"embedding_group": "embed", "embedding_model": "e-small", "threshold": 0.9});
    Rc::new(Config::parse(json.to_string().as_bytes(), |_| None).unwrap())
}

/// `r` on a fresh proxy with the fleet's store: the exact entry missing
/// there, the prompt embedded as `vector`; the edge waiting on the search.
fn searched(r: &Request, vector: &[f32]) -> Edge<FakeHost> {
    let mut e = edge_with(r, &FakeHost::new(), semantic_fleet_config());
    e.host.set(Map::Request, "x-model-group", "cached");
    assert_eq!(send(&mut e), Flow::Pause, "asks for the exact entry");
    assert_eq!(e.on_callout(1, service_answer(404, b"")), Flow::Pause);
    assert_eq!(e.on_callout(2, embedding(vector)), Flow::Pause);
    let (cluster, headers, body) = e.host.http_calls.borrow()[2].clone();
    assert_eq!(cluster, "llm_state");
    assert!(headers.contains(&(":method".into(), "POST".into())));
    let search = path(&headers);
    assert!(
        search.starts_with("/v1/vectors/llm_semantic/")
            && search.ends_with("/search?threshold=0.9"),
        "{search}"
    );
    assert_eq!(body.len(), vector.len());
    e
}

#[test]
fn with_the_fleets_store_a_paraphrase_stored_through_one_proxy_is_a_semantic_hit_on_another() {
    let france = [1.0, 0.0, 0.0, 0.0];
    // Proxy A: nothing anywhere; the answer's entry, then its vector, go
    // to the fleet's store, the answer's end waiting for both.
    let mut e = searched(&asking(KEY, "What is the capital city of France?"), &france);
    let search = path(&e.host.http_calls.borrow()[2].1);
    assert_eq!(e.on_callout(3, service_answer(404, b"")), Flow::Continue);
    answer_through(&mut e, "an", "200", ANTHROPIC);
    let (_, headers, entry) = e.host.http_calls.borrow()[3].clone();
    assert!(path(&headers).starts_with("/v1/entries/llm_cache/"));
    assert_eq!(e.on_callout(4, service_answer(204, b"")), Flow::Pause);
    let (_, headers, vector) = e.host.http_calls.borrow()[4].clone();
    let put = path(&headers);
    assert!(headers.contains(&(":method".into(), "PUT".into())));
    assert!(headers.contains(&("x-llm-ttl".into(), "60".into())));
    // The same partition the search asked for; its id, the entry's key.
    assert_eq!(
        put.rsplit_once('/').unwrap().0,
        search.rsplit_once('/').unwrap().0
    );
    assert_eq!(vector, [127, 0, 0, 0]);
    assert_eq!(e.on_callout(5, service_answer(204, b"")), Flow::Continue);
    let id = put.rsplit_once('/').unwrap().1.to_owned();

    // Proxy B, its own index empty: the fleet's names the entry, which
    // is fetched (in the caller's own namespace) and given.
    let close = [0.98, 0.2, 0.0, 0.0];
    let mut e = searched(&asking(KEY, "Tell me the capital of France"), &close);
    assert_eq!(
        e.on_callout(3, service_answer(200, id.as_bytes())),
        Flow::Pause
    );
    let (_, headers, _) = e.host.http_calls.borrow()[3].clone();
    assert!(headers.contains(&(":method".into(), "GET".into())));
    assert_eq!(e.on_callout(4, service_answer(200, &entry)), Flow::Pause);
    let (status, body) = e.host.reply.borrow().clone().unwrap();
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("Hello from the vendor"));
    assert_eq!(
        reply_header(&e, "x-llm-cache").as_deref(),
        Some("semantic-hit")
    );
    let records = e.host.take_record();
    assert!(records
        .iter()
        .any(|c| c.contains("op=search") && c.contains("outcome=found")));
    // Its vector went into B's own index: next time, no search.
    let proxy = FakeHost::new();
    *proxy.shared.borrow_mut() = e.host.shared.borrow().clone();
    let (e, flow) = embedded(
        &asking(KEY, "Tell me the capital of France"),
        &proxy,
        Some(&close),
    );
    assert_eq!(flow, Flow::Pause);
    assert_eq!(
        reply_header(&e, "x-llm-cache").as_deref(),
        Some("semantic-hit")
    );

    // The service down at the search: a miss, counted; the request goes on.
    let mut e = searched(&asking(KEY, "Tell me the capital of France"), &close);
    assert_eq!(e.on_callout(3, CalloutAnswer::Failed), Flow::Continue);
    assert!(e
        .host
        .take_record()
        .iter()
        .any(|c| c.contains("op=search") && c.contains("outcome=unavailable")));
}
