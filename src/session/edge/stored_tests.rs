//! The edge session and the response store, natively: a stored answer,
//! its continuation, the calls on it, another key, and what a request that
//! uses no state costs (no shared-data call).

use std::rc::Rc;

use sha2::{Digest, Sha256};

use super::Edge;
use crate::config::Config;
use crate::exchange::Handoff;
use crate::session::fake::FakeHost;
use crate::session::host::{Flow, Map};
use crate::session::Session;

const KEY: &str = "team-a-secret";
const OTHER: &str = "team-b-secret";

/// One provider `name` as `provider` says, the groups `chat` and `g` on it.
fn config_json(provider: &str, name: &str) -> String {
    let hash = |k: &str| format!("{:x}", Sha256::digest(k.as_bytes()));
    format!(
        r#"{{"providers":{{{provider}}},
             "model_groups":{{"chat":{{"candidates":[{{"provider":"{name}","model":"m","cluster":"c"}}]}},
                              "g":{{"candidates":[{{"provider":"{name}","model":"m","cluster":"c"}}]}}}},
             "auth":{{"enabled":true,"keys":[{{"name":"team-a","sha256":"{}","groups":["*"]}},
                                             {{"name":"team-b","sha256":"{}","groups":["*"]}}]}}}}"#,
        hash(KEY),
        hash(OTHER)
    )
}

fn config() -> Rc<Config> {
    let json = config_json(r#""an":{"dialect":"anthropic","api_key":"sk-ant"}"#, "an");
    Rc::new(Config::parse(json.as_bytes(), |_| None).unwrap())
}

/// A request from `key`, on a host sharing `shared`'s data.
fn edge(key: &str, method: &str, path: &str, body: &str, shared: &FakeHost) -> Edge<FakeHost> {
    let host = FakeHost::new();
    *host.shared.borrow_mut() = shared.shared.borrow().clone();
    host.set(Map::Request, ":method", method);
    host.set(Map::Request, ":path", path);
    host.set(Map::Request, "authorization", &format!("Bearer {key}"));
    host.set(Map::Request, "content-type", "application/json");
    host.set(Map::Request, "x-request-id", "req-7");
    *host.request_body.borrow_mut() = body.as_bytes().to_vec();
    Edge::new(host, config())
}

/// A host holding what `e`'s host holds in shared data (another request's view).
fn shared_of(e: &Edge<FakeHost>) -> FakeHost {
    let host = FakeHost::new();
    *host.shared.borrow_mut() = e.host.shared.borrow().clone();
    host
}

fn send(e: &mut Edge<FakeHost>, with_body: bool) -> Flow {
    if e.on_request_headers(!with_body) == Flow::Pause && e.host.reply.borrow().is_none() {
        let size = e.host.request_body.borrow().len();
        return e.on_request_body(size, true);
    }
    Flow::Pause
}

/// The attempt's answer passing the edge, in two chunks.
fn answer(e: &mut Edge<FakeHost>, body: &str) {
    e.host.set(Map::Response, ":status", "200");
    e.host.set(Map::Response, "x-llm-provider", "an");
    assert_eq!(e.on_response_headers(false), Flow::Continue);
    let (one, two) = body.split_at(body.len() / 2);
    for (chunk, end) in [(one, false), (two, true)] {
        *e.host.response_body.borrow_mut() = chunk.as_bytes().to_vec();
        assert_eq!(e.on_response_body(chunk.len(), end), Flow::Continue);
    }
}

fn reply(e: &Edge<FakeHost>) -> (u16, serde_json::Value) {
    let (status, body) = e.host.reply.borrow().clone().expect("the gateway answered");
    (status, serde_json::from_slice(&body).unwrap())
}

fn response(id: &str, text: &str) -> String {
    let base = id.strip_prefix("resp_").unwrap();
    serde_json::json!({"id": id, "object": "response", "status": "completed", "store": true,
        "output": [{"type": "message", "id": format!("msg_0_{base}"), "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}]})
    .to_string()
}

#[test]
fn an_answer_is_stored_continued_read_back_and_deleted_by_its_key_only() {
    let store = FakeHost::new();
    let first = r#"{"model":"chat","input":"one","instructions":"be brief"}"#;
    let mut e = edge(KEY, "POST", "/v1/responses", first, &store);
    assert_eq!(send(&mut e, true), Flow::Continue);
    let handoff = Handoff::decode(e.host.prop("llm_handoff").unwrap().as_bytes()).unwrap();
    let id = handoff.response_id.expect("a gateway id for the attempt");
    assert!(crate::responses_store::is_gateway_id(&id));
    answer(&mut e, &response(&id, "two"));
    assert!(e
        .host
        .take_record()
        .iter()
        .any(|c| c.starts_with("gauge llm_gateway.response_store_entries") && c.ends_with(" 1")));
    let store = shared_of(&e);

    // Continued: the vendor gets the whole conversation, this request's instructions only.
    let next = format!(r#"{{"model":"chat","input":"three","previous_response_id":"{id}"}}"#);
    let mut e = edge(KEY, "POST", "/v1/responses", &next, &store);
    assert_eq!(send(&mut e, true), Flow::Continue);
    let sent: serde_json::Value = serde_json::from_slice(&e.host.request_body.borrow()).unwrap();
    assert!(sent.get("previous_response_id").is_none());
    let texts: Vec<&str> = sent["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["content"][0]["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
    assert!(sent.get("instructions").is_none());
    assert_eq!(e.host.get(Map::Request, "content-length"), None);

    // Read back by its key; another key gets OpenAI's 404.
    let path = format!("/v1/responses/{id}");
    let mut e = edge(KEY, "GET", &path, "", &store);
    send(&mut e, false);
    let (status, body) = reply(&e);
    assert_eq!(
        (status, body["output"][0]["content"][0]["text"].as_str()),
        (200, Some("two"))
    );
    let mut e = edge(KEY, "GET", &format!("{path}/input_items"), "", &store);
    send(&mut e, false);
    assert_eq!(reply(&e).1["data"][0]["content"][0]["text"], "one");
    for method in ["GET", "DELETE"] {
        let mut e = edge(OTHER, method, &path, "", &store);
        send(&mut e, false);
        let (status, body) = reply(&e);
        assert_eq!(status, 404);
        assert_eq!(
            body["error"]["message"],
            format!("Response with id '{id}' not found.")
        );
    }
    let mut e = edge(KEY, "DELETE", &path, "", &store);
    send(&mut e, false);
    assert_eq!(reply(&e).1["deleted"], true);
    let store = shared_of(&e);
    let mut e = edge(KEY, "GET", &path, "", &store);
    send(&mut e, false);
    assert_eq!(reply(&e).0, 404);
}

#[test]
fn an_answer_not_ours_or_not_wanted_is_not_stored() {
    let store = FakeHost::new();
    let mut e = edge(
        KEY,
        "POST",
        "/v1/responses",
        r#"{"model":"chat","input":"one"}"#,
        &store,
    );
    assert_eq!(send(&mut e, true), Flow::Continue);
    // A vendor's own id (a pass-through answer): the vendor keeps it.
    answer(&mut e, &response("resp_vendor1", "two"));
    assert!(e.host.shared.borrow().is_empty());
}

#[test]
fn a_vendor_that_keeps_its_responses_is_not_read() {
    let store = FakeHost::new();
    let mut e = edge(
        KEY,
        "POST",
        "/v1/responses",
        r#"{"model":"g","input":"one"}"#,
        &store,
    );
    e.config = Rc::new(
        Config::parse(
            config_json(r#""oa":{"dialect":"openai","api_key":"sk-oa"}"#, "oa").as_bytes(),
            |_| None,
        )
        .unwrap(),
    );
    assert_eq!(send(&mut e, true), Flow::Continue);
    e.host.set(Map::Response, ":status", "200");
    e.host.set(Map::Response, "x-llm-provider", "oa");
    e.on_response_headers(false);
    *e.host.response_body.borrow_mut() = response("resp_openai1", "two").into_bytes();
    let size = e.host.response_body.borrow().len();
    e.on_response_body(size, true);
    let calls = e.host.take_record();
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("body response") || c.contains("shared_data")),
        "{calls:?}"
    );
}

#[test]
fn a_request_that_uses_no_state_makes_no_shared_data_call() {
    let store = FakeHost::new();
    let body = r#"{"model":"chat","input":"one","store":false}"#;
    let mut e = edge(KEY, "POST", "/v1/responses", body, &store);
    assert_eq!(send(&mut e, true), Flow::Continue);
    let handoff = Handoff::decode(e.host.prop("llm_handoff").unwrap().as_bytes()).unwrap();
    assert_eq!(handoff.response_id, None);
    answer(&mut e, &response("resp_vendor1", "two"));
    let calls = e.host.take_record();
    assert!(
        !calls
            .iter()
            .any(|c| c.contains("shared_data") || c.starts_with("body response")),
        "{calls:?}"
    );
    let chat = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#;
    let mut e = edge(KEY, "POST", "/v1/chat/completions", chat, &store);
    assert_eq!(send(&mut e, true), Flow::Continue);
    answer(&mut e, r#"{"id":"x","choices":[]}"#);
    let calls = e.host.take_record();
    assert!(
        !calls.iter().any(|c| c.contains("shared_data")),
        "{calls:?}"
    );
}
