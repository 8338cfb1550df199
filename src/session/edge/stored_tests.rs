//! The edge session and the response store, natively: a stored answer,
//! its continuation, the calls on it, another key, and what a request that
//! uses no state costs (no shared-data call).

use std::rc::Rc;

use sha2::{Digest, Sha256};

use super::Edge;
use crate::config::Config;
use crate::session::exchange::Handoff;
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

/// The fleet's store (the state service), as the edge reaches it: the
/// service is a map of what was put, answering as `llm-state` does.
mod fleet {
    use std::collections::HashMap;

    use super::*;
    use crate::headers::Headers;
    use crate::session::host::CalloutAnswer;
    use crate::shared_state::protocol;

    fn fleet_config() -> Rc<Config> {
        let json = config_json(r#""an":{"dialect":"anthropic","api_key":"sk-ant"}"#, "an");
        let mut json: serde_json::Value = serde_json::from_str(&json).unwrap();
        json["shared_state"] =
            serde_json::json!({"service": {"cluster": "llm_state", "timeout_ms": 50}});
        Rc::new(Config::parse(json.to_string().as_bytes(), |_| None).unwrap())
    }

    fn fleet_edge(
        key: &str,
        method: &str,
        path: &str,
        body: &str,
        shared: &FakeHost,
    ) -> Edge<FakeHost> {
        let mut e = edge(key, method, path, body, shared);
        e.config = fleet_config();
        e
    }

    /// The state service: entries by path, with their parents.
    #[derive(Default)]
    struct Service(HashMap<String, (Vec<u8>, Option<String>)>);

    impl Service {
        /// Answers the edge's last callout as the service would.
        fn answer(&mut self, e: &mut Edge<FakeHost>) -> Flow {
            let (token, answer) = {
                let calls = e.host.http_calls.borrow();
                let (cluster, headers, body) = calls.last().expect("a callout");
                assert_eq!(cluster, "llm_state");
                let header = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
                let method = header(":method").unwrap();
                let path = header(":path").unwrap();
                let (entry, query) = path.split_once('?').unwrap_or((&path, ""));
                let (base, _) = entry.rsplit_once('/').unwrap();
                let answer = match method.as_str() {
                    "PUT" => {
                        let parent = header("x-llm-parent").map(|p| format!("{base}/{p}"));
                        assert!(header("x-llm-ttl").is_some());
                        self.0.insert(entry.to_owned(), (body.clone(), parent));
                        answered(204, &[], Vec::new())
                    }
                    "DELETE" => match self.0.remove(entry) {
                        Some(_) => answered(204, &[], Vec::new()),
                        None => missing(),
                    },
                    _ if query.starts_with("chain=") => {
                        let mut frames = Vec::new();
                        let mut at = Some(entry.to_owned());
                        while let Some((bytes, parent)) = at.and_then(|p| self.0.get(&p)) {
                            protocol::write_frame(&mut frames, bytes);
                            at = parent.clone();
                        }
                        if frames.is_empty() {
                            missing()
                        } else {
                            answered(200, &[("content-type", protocol::CHAIN_TYPE)], frames)
                        }
                    }
                    _ => match self.0.get(entry) {
                        Some((bytes, _)) => answered(200, &[], bytes.clone()),
                        None => missing(),
                    },
                };
                (calls.len() as u32, answer)
            };
            e.on_callout(token, answer)
        }
    }

    fn answered(status: u16, headers: &[(&str, &str)], body: Vec<u8>) -> CalloutAnswer {
        let headers = headers
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        CalloutAnswer::Answered {
            status,
            headers: Headers(headers),
            body,
        }
    }

    fn missing() -> CalloutAnswer {
        answered(
            404,
            &[(protocol::STATE_HEADER, protocol::MISSING)],
            Vec::new(),
        )
    }

    /// The whole answer in one chunk: held until the fleet's store has it.
    fn answer_held(e: &mut Edge<FakeHost>, body: &str) -> Flow {
        e.host.set(Map::Response, ":status", "200");
        e.host.set(Map::Response, "x-llm-provider", "an");
        assert_eq!(e.on_response_headers(false), Flow::Continue);
        *e.host.response_body.borrow_mut() = body.as_bytes().to_vec();
        e.on_response_body(body.len(), true)
    }

    fn vendor_texts(e: &Edge<FakeHost>) -> Vec<String> {
        let sent: serde_json::Value =
            serde_json::from_slice(&e.host.request_body.borrow()).unwrap();
        sent["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                i["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    /// A response stored through proxy A is continued and read on proxy B,
    /// which never held it: each from the fleet's store, in one call each.
    #[test]
    fn a_conversation_started_on_one_proxy_continues_on_another() {
        let mut service = Service::default();
        let a_store = FakeHost::new();
        let first = r#"{"model":"chat","input":"one"}"#;
        let mut a = fleet_edge(KEY, "POST", "/v1/responses", first, &a_store);
        assert_eq!(send(&mut a, true), Flow::Continue);
        let handoff = Handoff::decode(a.host.prop("llm_handoff").unwrap().as_bytes()).unwrap();
        let id = handoff.response_id.unwrap();
        // The answer's end waits for the fleet's store, then goes on.
        assert_eq!(answer_held(&mut a, &response(&id, "two")), Flow::Pause);
        assert_eq!(a.on_response_body(0, true), Flow::Pause, "still held");
        assert_eq!(service.answer(&mut a), Flow::Continue);
        assert!(a
            .host
            .take_record()
            .iter()
            .any(|c| c == "count llm_gateway.shared_state;op=put;outcome=done 1"));
        // A's own copy, marked as the fleet's too.
        let a_store = shared_of(&a);
        let (_, mirrored) = crate::responses_store::get(
            &crate::session::shared_data::HostStore::new(&a_store, ""),
            &a.config.response_store,
            &crate::responses_store::namespace("team-a"),
            &id,
            1_733_000_001,
        )
        .unwrap();
        assert!(mirrored);

        // Proxy B: nothing of its own.
        let b_store = FakeHost::new();
        let next = format!(r#"{{"model":"chat","input":"three","previous_response_id":"{id}"}}"#);
        let mut b = fleet_edge(KEY, "POST", "/v1/responses", &next, &b_store);
        assert_eq!(
            send(&mut b, true),
            Flow::Pause,
            "waits for the fleet's store"
        );
        assert_eq!(service.answer(&mut b), Flow::Continue);
        assert_eq!(vendor_texts(&b), ["one", "two", "three"]);
        let second = Handoff::decode(b.host.prop("llm_handoff").unwrap().as_bytes())
            .unwrap()
            .response_id
            .unwrap();
        assert_eq!(answer_held(&mut b, &response(&second, "four")), Flow::Pause);
        assert_eq!(service.answer(&mut b), Flow::Continue);

        // A third turn on a third proxy: the whole chain in one call.
        let third =
            format!(r#"{{"model":"chat","input":"five","previous_response_id":"{second}"}}"#);
        let mut c = fleet_edge(KEY, "POST", "/v1/responses", &third, &FakeHost::new());
        assert_eq!(send(&mut c, true), Flow::Pause);
        assert_eq!(service.answer(&mut c), Flow::Continue);
        assert_eq!(vendor_texts(&c), ["one", "two", "three", "four", "five"]);
        assert_eq!(c.host.http_calls.borrow().len(), 1);

        // Read back on B; another key finds nothing, without asking.
        let path = format!("/v1/responses/{id}");
        let mut b = fleet_edge(KEY, "GET", &path, "", &FakeHost::new());
        send(&mut b, false);
        assert!(
            b.host.reply.borrow().is_none(),
            "waits for the fleet's store"
        );
        service.answer(&mut b);
        assert_eq!(reply(&b).1["output"][0]["content"][0]["text"], "two");
        let mut other = fleet_edge(OTHER, "GET", &path, "", &FakeHost::new());
        send(&mut other, false);
        service.answer(&mut other);
        assert_eq!(reply(&other).0, 404);

        // Deleted on B: A's own copy (the fleet's too) is gone for A as well.
        let mut b = fleet_edge(KEY, "DELETE", &path, "", &FakeHost::new());
        send(&mut b, false);
        service.answer(&mut b);
        assert_eq!(reply(&b).1["deleted"], true);
        let mut a = fleet_edge(KEY, "GET", &path, "", &a_store);
        send(&mut a, false);
        service.answer(&mut a);
        assert_eq!(reply(&a).0, 404);
    }

    /// The fleet's store down: the answer still goes (stored here only),
    /// and a continuation on this proxy finds it here; on another it is
    /// the 400 of a response that is not there.
    #[test]
    fn without_the_fleets_store_the_proxys_own_answers() {
        let store = FakeHost::new();
        let mut e = fleet_edge(
            KEY,
            "POST",
            "/v1/responses",
            r#"{"model":"chat","input":"one"}"#,
            &store,
        );
        assert_eq!(send(&mut e, true), Flow::Continue);
        let id = Handoff::decode(e.host.prop("llm_handoff").unwrap().as_bytes())
            .unwrap()
            .response_id
            .unwrap();
        assert_eq!(answer_held(&mut e, &response(&id, "two")), Flow::Pause);
        assert_eq!(e.on_callout(1, CalloutAnswer::Failed), Flow::Continue);
        let record = e.host.take_record();
        assert!(record
            .iter()
            .any(|c| c == "count llm_gateway.shared_state;op=put;outcome=unavailable 1"));
        let store = shared_of(&e);

        let next = format!(r#"{{"model":"chat","input":"three","previous_response_id":"{id}"}}"#);
        let mut e = fleet_edge(KEY, "POST", "/v1/responses", &next, &store);
        assert_eq!(send(&mut e, true), Flow::Pause);
        // Envoy's own 503 (no healthy host): not the service's answer.
        assert_eq!(
            e.on_callout(1, answered(503, &[], Vec::new())),
            Flow::Continue
        );
        assert_eq!(vendor_texts(&e), ["one", "two", "three"]);

        // The fleet's store back, and never told of it: this proxy's copy
        // (stored while it was down) still counts.
        let mut e = fleet_edge(KEY, "POST", "/v1/responses", &next, &store);
        assert_eq!(send(&mut e, true), Flow::Pause);
        assert_eq!(e.on_callout(1, missing()), Flow::Continue);
        assert_eq!(vendor_texts(&e), ["one", "two", "three"]);

        // Another proxy, the fleet's store down: not there.
        let mut e = fleet_edge(KEY, "POST", "/v1/responses", &next, &FakeHost::new());
        assert_eq!(send(&mut e, true), Flow::Pause);
        assert_eq!(e.on_callout(1, CalloutAnswer::Failed), Flow::Pause);
        let (status, body) = reply(&e);
        assert_eq!(
            (status, body["error"]["param"].as_str()),
            (400, Some("previous_response_id"))
        );
    }
}
