//! Model discovery natively, through the fake host: one worker reads the
//! lists (paged, leased, backed off), every worker sees them, and the edge
//! lists, routes and passes over what they say.

use std::rc::Rc;

use super::*;
use crate::session::edge::Edge;
use crate::session::fake::FakeHost;
use crate::session::host::{Flow, Map};
use crate::session::Session;

/// Anthropic (paged) and OpenAI discovered; group `chat` on both, `fast`
/// on OpenAI only.
fn config(discovery: &str) -> Rc<Config> {
    let json = format!(
        r#"{{"providers":{{"an":{{"dialect":"anthropic","api_key":"sk-ant"}},
                           "oa":{{"dialect":"openai","api_key":"sk-oa","models":{{"*":"gpt-4o"}}}}}},
             "model_groups":{{"chat":{{"candidates":[{{"provider":"an","model":"claude-old","cluster":"an_c","weight":100}},{{"cluster":"oa_c","weight":1}}]}},
                             "fast":{{"cluster":"oa_c"}}}},
             "auth":{{"enabled":true,"keys":[
                 {{"name":"all","sha256":"{}","groups":["*"]}},
                 {{"name":"fast-only","sha256":"{}","groups":["fast"]}}]}},
             "discovery":{{"providers":{{"an":{{"cluster":"an_c"}},"oa":{{"cluster":"oa_c","host":"api.openai.test"}}}},
                           "interval_seconds":60,"retry_seconds":5{discovery}}}}}"#,
        hash("key-all"),
        hash("key-fast"),
    );
    let mut config = Config::parse(json.as_bytes(), |_| None).unwrap();
    config.loaded_at = 1;
    Rc::new(config)
}

fn hash(key: &str) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(key.as_bytes()))
}

/// A page of Anthropic's list, newest first (as Anthropic lists them).
fn anthropic_page(ids: &[&str], more: bool) -> Vec<u8> {
    let data: Vec<String> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            format!(
                r#"{{"type":"model","id":"{id}","display_name":"{id}","created_at":"2025-0{}-01T00:00:00Z","max_input_tokens":200000,"max_tokens":64000}}"#,
                9 - i
            )
        })
        .collect();
    format!(
        r#"{{"data":[{}],"has_more":{more},"first_id":"{}","last_id":"{}"}}"#,
        data.join(","),
        ids.first().unwrap_or(&""),
        ids.last().unwrap_or(&"")
    )
    .into_bytes()
}

const OPENAI_LIST: &[u8] = br#"{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1715367049,"owned_by":"system"},{"id":"gpt-4.1-mini","object":"model","created":1744318173,"owned_by":"system"}]}"#;

/// The calls made since the last look (the fake's nth call's token is n:
/// none is forgotten).
fn calls(host: &FakeHost) -> Vec<String> {
    thread_local! {
        static SEEN: std::cell::RefCell<(usize, usize)> = const { std::cell::RefCell::new((0, 0)) };
    }
    let all = host.http_calls.borrow().clone();
    let id = std::ptr::from_ref(host) as usize;
    let from = SEEN.with(|s| {
        let mut s = s.borrow_mut();
        let from = if s.0 == id { s.1 } else { 0 };
        *s = (id, all.len());
        from
    });
    all.into_iter()
        .skip(from)
        .map(|(cluster, headers, _)| {
            let path = headers
                .iter()
                .find(|(n, _)| n == ":path")
                .unwrap()
                .1
                .clone();
            format!("{cluster} {path}")
        })
        .collect()
}

/// The callout token of the nth call ever made (the fake numbers them from 1).
struct Tokens(u32);

impl Tokens {
    fn next(&mut self) -> u32 {
        self.0 += 1;
        self.0
    }
}

#[test]
fn one_worker_reads_every_page_and_every_worker_sees_the_list() {
    let config = config("");
    let host = FakeHost::new();
    let (mut a, mut b) = (Fetcher::default(), Fetcher::default());
    let mut tokens = Tokens(0);
    a.tick(&host, &config);
    b.tick(&host, &config);
    let made = calls(&host);
    assert_eq!(
        made,
        ["an_c /v1/models?limit=1000", "oa_c /v1/models"],
        "one read of each provider for both workers"
    );
    let (an, oa) = (tokens.next(), tokens.next());
    // Anthropic's auth and version, OpenAI's bearer, the list host.
    let sent = host.http_calls.borrow().clone();
    let header = |i: usize, name: &str| {
        sent[i]
            .1
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(header(0, "x-api-key").as_deref(), Some("sk-ant"));
    assert_eq!(
        header(0, "anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(header(0, ":authority").as_deref(), Some("an_c"));
    assert_eq!(header(1, "authorization").as_deref(), Some("Bearer sk-oa"));
    assert_eq!(header(1, ":authority").as_deref(), Some("api.openai.test"));
    assert_eq!(header(1, ":method").as_deref(), Some("GET"));
    // The first page names the next.
    assert!(a.on_response(
        &host,
        &config,
        an,
        Some(200),
        &anthropic_page(&["claude-new", "claude-old"], true)
    ));
    assert!(
        !b.on_response(&host, &config, an, Some(200), b"{}"),
        "not b's"
    );
    assert_eq!(
        calls(&host),
        ["an_c /v1/models?limit=1000&after_id=claude-old"]
    );
    let page2 = tokens.next();
    assert!(a.on_response(
        &host,
        &config,
        page2,
        Some(200),
        &anthropic_page(&["claude-x"], false)
    ));
    assert!(a.on_response(&host, &config, oa, Some(200), OPENAI_LIST));
    // Every worker: the view is rebuilt from shared data.
    let seen = view(&host, &config).unwrap();
    let an_list = seen.providers["an"].list.as_ref().unwrap();
    let ids: Vec<&str> = an_list.models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["claude-new", "claude-old", "claude-x"]);
    assert!(seen.providers["an"].retired.is_empty());
    // What the vendor said of a model, then the table's.
    let f = facts(&host, &config, "an", "claude-x");
    assert_eq!(f.context_window, Some(200_000));
    assert_eq!(f.sources.context_window, Some(catalog::Source::Vendor));
    let f = facts(&host, &config, "oa", "gpt-4.1-mini");
    assert_eq!(
        (f.context_window, f.sources.context_window),
        (Some(1_047_576), Some(catalog::Source::Table))
    );
    // Nothing due until the interval: no call, and after one look no
    // schedule read per tick.
    a.tick(&host, &config);
    b.tick(&host, &config);
    assert!(calls(&host).is_empty());
    host.take_record();
    a.tick(&host, &config);
    b.tick(&host, &config);
    assert!(!host
        .take_record()
        .iter()
        .any(|c| c.contains("discovery.schedule")));
    host.advance(60.0);
    b.tick(&host, &config);
    a.tick(&host, &config);
    assert_eq!(calls(&host).len(), 2, "the interval's reads, by one worker");
}

#[test]
fn a_failed_read_keeps_the_last_good_list_and_backs_off() {
    let config = config("");
    let host = FakeHost::new();
    let mut a = Fetcher::default();
    a.tick(&host, &config);
    calls(&host);
    a.on_response(
        &host,
        &config,
        1,
        Some(200),
        &anthropic_page(&["claude-old"], false),
    );
    a.on_response(&host, &config, 2, Some(200), OPENAI_LIST);
    host.advance(60.0);
    a.tick(&host, &config);
    assert_eq!(calls(&host).len(), 2);
    // A 429 and a timeout: both lists kept, each read again after 5 s, then 10 s.
    a.on_response(&host, &config, 3, Some(429), br#"{"type":"error"}"#);
    a.on_response(&host, &config, 4, None, b"");
    let seen = view(&host, &config).unwrap();
    assert!(seen.lists("an", "claude-old").is_some());
    assert!(seen.lists("oa", "gpt-4o").is_some());
    let an = seen.providers["an"].schedule.clone().unwrap();
    assert_eq!(an.failures, 1);
    assert!(an.last_error.as_deref().unwrap().contains("HTTP 429"));
    let gauges: Vec<String> = host
        .take_record()
        .into_iter()
        .filter(|c| c.starts_with("gauge llm_gateway.discovery_failures"))
        .collect();
    assert!(
        gauges.contains(&"gauge llm_gateway.discovery_failures;provider=an 1".to_owned()),
        "{gauges:?}"
    );
    host.advance(4.0);
    a.tick(&host, &config);
    assert!(calls(&host).is_empty(), "waits its 5 s");
    host.advance(1.0);
    a.tick(&host, &config);
    assert_eq!(calls(&host).len(), 2);
    a.on_response(&host, &config, 5, Some(500), b"");
    a.on_response(&host, &config, 6, Some(200), OPENAI_LIST);
    host.advance(5.0);
    let mut b = Fetcher::default();
    b.tick(&host, &config);
    assert!(calls(&host).is_empty(), "the second failure waits 10 s");
    host.advance(5.0);
    b.tick(&host, &config);
    assert_eq!(calls(&host), ["an_c /v1/models?limit=1000"]);
    // An answer that is no list is a failure, not an empty list.
    b.on_response(&host, &config, 7, Some(200), b"<html>");
    let seen = view(&host, &config).unwrap();
    assert!(seen.lists("an", "claude-old").is_some());
    assert_eq!(seen.providers["an"].schedule.as_ref().unwrap().failures, 3);
}

#[test]
fn a_configured_model_the_vendor_drops_is_flagged_and_avoided() {
    let config = config(r#","avoid_retired":true"#);
    let host = FakeHost::new();
    let mut a = Fetcher::default();
    a.tick(&host, &config);
    a.on_response(
        &host,
        &config,
        1,
        Some(200),
        &anthropic_page(&["claude-new"], false),
    );
    a.on_response(&host, &config, 2, Some(200), OPENAI_LIST);
    let seen = view(&host, &config).unwrap();
    assert!(seen.retired("an", "claude-old"));
    assert!(!seen.retired("oa", "gpt-4o"));
    let record = host.take_record();
    assert!(
        record.contains(
            &"gauge llm_gateway.discovery_retired;provider=an;model=claude-old 1".to_owned()
        ),
        "{record:?}"
    );
    assert!(record
        .contains(&"gauge llm_gateway.discovery_retired;provider=oa;model=gpt-4o 0".to_owned()));
    // `chat`'s first candidate is retired: its small second serves them all.
    let chat = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#;
    let routed = |config: &Rc<Config>| -> Vec<String> {
        (0..20)
            .map(|_| {
                let mut e = edge(&host, config, "key-all", "/v1/chat/completions", chat);
                assert_eq!(send(&mut e), Flow::Continue);
                e.host.get(Map::Request, "x-llm-cluster").unwrap()
            })
            .collect()
    };
    assert!(routed(&config).iter().all(|c| c == "oa_c"));
    // Without avoidance it is only flagged.
    assert!(routed(&self::config("")).iter().any(|c| c == "an_c"));
}

#[test]
fn an_idle_configured_model_is_checked_on_its_own() {
    let config = config(r#","recheck_after_seconds":10"#);
    let host = FakeHost::new();
    let mut a = Fetcher::default();
    a.tick(&host, &config);
    a.on_response(
        &host,
        &config,
        1,
        Some(200),
        &anthropic_page(&["claude-old"], false),
    );
    a.on_response(&host, &config, 2, Some(200), OPENAI_LIST);
    calls(&host);
    host.advance(9.0);
    a.tick(&host, &config);
    assert!(calls(&host).is_empty());
    host.advance(2.0);
    a.tick(&host, &config);
    assert_eq!(
        calls(&host),
        ["an_c /v1/models/claude-old", "oa_c /v1/models/gpt-4o"]
    );
    // Gone at Anthropic; still there at OpenAI.
    a.on_response(
        &host,
        &config,
        3,
        Some(404),
        br#"{"type":"error","error":{"type":"not_found_error"}}"#,
    );
    a.on_response(
        &host,
        &config,
        4,
        Some(200),
        br#"{"id":"gpt-4o","object":"model","created":1,"owned_by":"system"}"#,
    );
    let seen = view(&host, &config).unwrap();
    assert!(seen.retired("an", "claude-old"));
    assert!(!seen.retired("oa", "gpt-4o"));
    // A route in use is not checked: requests routed to gpt-4o count.
    host.advance(8.0);
    let mut e = edge(
        &host,
        &config,
        "key-all",
        "/v1/chat/completions",
        r#"{"model":"fast","messages":[{"role":"user","content":"hi"}]}"#,
    );
    assert_eq!(send(&mut e), Flow::Continue);
    host.advance(2.5);
    a.tick(&host, &config);
    assert!(
        calls(&host).is_empty(),
        "routed 2.5 s ago; claude-old is flagged already"
    );
    host.advance(8.0);
    a.tick(&host, &config);
    assert_eq!(calls(&host), ["oa_c /v1/models/gpt-4o"], "idle for 10 s");
}

fn edge(host: &FakeHost, config: &Rc<Config>, key: &str, path: &str, body: &str) -> Edge<FakeHost> {
    let fresh = FakeHost::new();
    *fresh.shared.borrow_mut() = host.shared.borrow().clone();
    fresh.clock.set(host.clock.get());
    fresh.set(
        Map::Request,
        ":method",
        if body.is_empty() { "GET" } else { "POST" },
    );
    fresh.set(Map::Request, ":path", path);
    fresh.set(Map::Request, "authorization", &format!("Bearer {key}"));
    fresh.set(Map::Request, "content-type", "application/json");
    *fresh.request_body.borrow_mut() = body.as_bytes().to_vec();
    Edge::new(fresh, config.clone())
}

fn send(e: &mut Edge<FakeHost>) -> Flow {
    if e.on_request_headers(false) == Flow::Pause && e.host.reply.borrow().is_none() {
        let size = e.host.request_body.borrow().len();
        return e.on_request_body(size, true);
    }
    Flow::Pause
}

fn listed(e: &Edge<FakeHost>) -> serde_json::Value {
    let (status, body) = e.host.reply.borrow().clone().unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn discovered_models_are_listed_and_routed_as_far_as_a_key_reaches() {
    let config = config(r#","route":true,"aliases":{"claude-latest":"claude-*"}"#);
    let host = FakeHost::new();
    let mut a = Fetcher::default();
    a.tick(&host, &config);
    a.on_response(
        &host,
        &config,
        1,
        Some(200),
        &anthropic_page(&["claude-new", "claude-old"], false),
    );
    a.on_response(&host, &config, 2, Some(200), OPENAI_LIST);
    // Every model for the key of every group: groups first, then by provider.
    let mut e = edge(&host, &config, "key-all", "/v1/models", "");
    send(&mut e);
    let ids: Vec<String> = listed(&e)["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        ids,
        [
            "chat",
            "fast",
            "claude-new",
            "claude-old",
            "gpt-4.1-mini",
            "gpt-4o",
            "claude-latest"
        ]
    );
    let all = listed(&e);
    let gpt = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "gpt-4o")
        .unwrap();
    assert_eq!(gpt["owned_by"], "oa");
    assert_eq!(gpt["created"], 1715367049);
    assert_eq!(gpt["context_window"], 128_000, "the table's");
    // `fast` reaches OpenAI only.
    let mut e = edge(&host, &config, "key-fast", "/v1/models", "");
    send(&mut e);
    let ids: Vec<String> = listed(&e)["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["fast", "gpt-4.1-mini", "gpt-4o"]);
    let mut e = edge(&host, &config, "key-fast", "/v1/models/claude-new", "");
    send(&mut e);
    assert_eq!(
        e.host.reply.borrow().as_ref().unwrap().0,
        404,
        "not reachable, not revealed"
    );
    // A discovered model is routed to a group whose provider lists it,
    // asking that provider for exactly it.
    let body = r#"{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}"#;
    let mut e = edge(&host, &config, "key-fast", "/v1/chat/completions", body);
    assert_eq!(send(&mut e), Flow::Continue);
    let handoff =
        crate::session::exchange::Handoff::decode(e.host.prop("llm_handoff").unwrap().as_bytes())
            .unwrap();
    assert_eq!(
        (handoff.group.as_str(), handoff.model.as_deref()),
        ("fast", Some("gpt-4.1-mini"))
    );
    // `chat` holds both providers: a Claude model goes to its Anthropic candidate.
    let body = r#"{"model":"claude-latest","messages":[{"role":"user","content":"hi"}]}"#;
    let mut e = edge(&host, &config, "key-all", "/v1/chat/completions", body);
    assert_eq!(send(&mut e), Flow::Continue);
    let handoff =
        crate::session::exchange::Handoff::decode(e.host.prop("llm_handoff").unwrap().as_bytes())
            .unwrap();
    assert_eq!(handoff.group, "chat");
    assert_eq!(
        handoff.model.as_deref(),
        Some("claude-new"),
        "the newest match"
    );
    assert_eq!(
        e.host.get(Map::Request, "x-llm-cluster").as_deref(),
        Some("an_c")
    );
    // A key whose groups reach no provider that lists it: as if undiscovered.
    let body = r#"{"model":"claude-new","messages":[{"role":"user","content":"hi"}]}"#;
    let mut e = edge(&host, &config, "key-fast", "/v1/chat/completions", body);
    send(&mut e);
    assert_eq!(e.host.reply.borrow().as_ref().unwrap().0, 404);
}

#[test]
fn nothing_is_read_or_looked_at_without_discovery() {
    let json = r#"{"providers":{"oa":{"dialect":"openai","api_key":"k"}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#;
    let config = Config::parse(json.as_bytes(), |_| None).unwrap();
    let host = FakeHost::new();
    Fetcher::default().tick(&host, &config);
    assert!(view(&host, &config).is_none());
    assert!(host.take_record().is_empty(), "no host call");
    assert!(snapshot(&host, &config).is_none());
}

#[test]
fn the_snapshot_says_how_each_provider_goes() {
    let config = config("");
    let host = FakeHost::new();
    let mut a = Fetcher::default();
    a.tick(&host, &config);
    a.on_response(
        &host,
        &config,
        1,
        Some(200),
        &anthropic_page(&["claude-new"], false),
    );
    a.on_response(&host, &config, 2, Some(503), b"");
    let snap = snapshot(&host, &config).unwrap();
    let an = &snap.providers["an"];
    assert_eq!(
        (an.models, an.failures, an.retired.clone()),
        (Some(1), 0, vec!["claude-old".to_owned()])
    );
    let oa = &snap.providers["oa"];
    assert_eq!((oa.models, oa.failures), (None, 1));
    assert!(serde_json::to_string(&snap).unwrap().contains("HTTP 503"));
}
