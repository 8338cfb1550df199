//! Embeddings batches split into self-calls, driven through the fake host:
//! which batches split and by what, what each part carries, the answer
//! put together, a part that fails, parts of different models, a part
//! split again by its vendor's limit, and the self-call's own edge.

use std::rc::Rc;

use sha2::{Digest, Sha256};

use super::{limiter, Edge};
use crate::config::Config;
use crate::headers::Headers;
use crate::metering::AttemptRecord;
use crate::model::embed::{Embeddings, Encoding};
use crate::session::fake::FakeHost;
use crate::session::host::{CalloutAnswer, Flow, Map};
use crate::session::self_call::{self, PartReport};
use crate::session::Session;

const KEY: &str = "team-a-secret";

/// Titan (one input a call) named by the `titan` group's candidate, and a
/// group `any` whose candidate leaves the provider to its endpoints.
fn config(self_calls: &str) -> Rc<Config> {
    let hash = format!("{:x}", Sha256::digest(KEY.as_bytes()));
    let json = format!(
        r#"{{"providers":{{"br":{{"dialect":"bedrock","models":{{"*":"amazon.titan-embed-text-v2:0"}},
               "prices":{{"amazon.titan-embed-text-v2:0":{{"input":1000000,"output":0}}}}}},
               "oa":{{"dialect":"openai","api_key":"sk-oa"}}}},
             "model_groups":{{"titan":{{"candidates":[{{"provider":"br","cluster":"bedrock"}}]}},
                              "openai":{{"candidates":[{{"provider":"oa","cluster":"openai"}}]}},
                              "any":{{"cluster":"somewhere"}}}},
             "auth":{{"enabled":true,"keys":[{{"name":"team-a","sha256":"{hash}","groups":["*"]}}]}},
             "limits":{{"rate":[{{"key":"team-a","requests_per_minute":5}}]}}
             {self_calls}}}"#
    );
    Rc::new(Config::parse(json.as_bytes(), |_| None).unwrap())
}

const SELF_CALLS: &str = r#","self_calls":{"cluster":"self","max_in_flight":2}"#;

fn edge(config: Rc<Config>, path: &str, body: &str) -> Edge<FakeHost> {
    let host = FakeHost::new();
    limiter::prepare(&host, &config);
    self_call::prepare(&host);
    host.set(Map::Request, ":method", "POST");
    host.set(Map::Request, ":path", path);
    host.set(Map::Request, ":authority", "gw.example");
    host.set(Map::Request, "authorization", &format!("Bearer {KEY}"));
    host.set(Map::Request, "content-type", "application/json");
    host.set(Map::Request, "content-length", &body.len().to_string());
    host.set(Map::Request, "x-request-id", "req-9");
    host.set(Map::Request, "x-mock-scenario", "slow");
    *host.request_body.borrow_mut() = body.as_bytes().to_vec();
    Edge::new(host, config)
}

fn send(e: &mut Edge<FakeHost>) -> Flow {
    assert_eq!(e.on_request_headers(false), Flow::Pause);
    let size = e.host.request_body.borrow().len();
    e.on_request_body(size, true)
}

fn embeddings(group: &str, inputs: usize) -> String {
    let input: Vec<String> = (0..inputs).map(|i| format!("text {i}")).collect();
    serde_json::json!({"model": group, "input": input}).to_string()
}

/// A self-call made: its path, headers and body (JSON).
type Sent = (String, Vec<(String, String)>, serde_json::Value);

/// The self-calls made so far.
fn calls(e: &Edge<FakeHost>) -> Vec<Sent> {
    e.host
        .http_calls
        .borrow()
        .iter()
        .map(|(cluster, headers, body)| {
            assert_eq!(cluster, "self");
            let path = headers
                .iter()
                .find(|(n, _)| n == ":path")
                .unwrap()
                .1
                .clone();
            (path, headers.clone(), serde_json::from_slice(body).unwrap())
        })
        .collect()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// A part's answer as its edge gives it: OpenAI's base64 vectors (one per
/// text, its first value the text's number), the model, the part's report.
fn openai_part(texts: &[String], model: &str, tokens: u64) -> CalloutAnswer {
    let vectors = texts
        .iter()
        .map(|t| vec![t.trim_start_matches("text ").parse::<f32>().unwrap(), 0.5])
        .collect();
    let answer = Embeddings {
        vectors,
        prompt_tokens: Some(tokens),
    };
    let body = crate::wire::openai_embeddings::render(&answer, model, Encoding::Base64, tokens);
    part_answer(200, model, tokens, body)
}

fn part_answer(status: u16, model: &str, tokens: u64, body: Vec<u8>) -> CalloutAnswer {
    let report = PartReport {
        records: vec![AttemptRecord {
            provider: "br".into(),
            model: model.into(),
            status,
            prompt_tokens: Some(tokens),
            completion_tokens: Some(0),
            ..AttemptRecord::default()
        }],
        route: vec![format!("br/{model}:{status}")],
        rate_limited: false,
    };
    CalloutAnswer::Answered {
        status,
        headers: Headers(vec![
            (b":status".to_vec(), status.to_string().into_bytes()),
            (b"content-type".to_vec(), b"application/json".to_vec()),
            (b"x-llm-model".to_vec(), model.as_bytes().to_vec()),
            (b"x-llm-provider".to_vec(), b"br".to_vec()),
            (b"x-llm-part".to_vec(), report.encode().unwrap()),
        ]),
        body,
    }
}

fn texts(body: &serde_json::Value) -> Vec<String> {
    match &body["input"] {
        serde_json::Value::Array(items) => items
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect(),
        other => panic!("{other}"),
    }
}

fn reply(e: &Edge<FakeHost>) -> (u16, serde_json::Value) {
    let (status, body) = e.host.reply.borrow().clone().expect("the gateway answered");
    (status, serde_json::from_slice(&body).unwrap())
}

const TITAN: &str = "amazon.titan-embed-text-v2:0";

#[test]
fn a_batch_over_its_vendors_limit_is_split_into_self_calls_and_answered_in_order() {
    let mut e = edge(
        config(SELF_CALLS),
        "/v1/embeddings",
        &embeddings("titan", 3),
    );
    assert_eq!(send(&mut e), Flow::Pause, "the request waits for its parts");
    assert!(e.host.reply.borrow().is_none());
    assert_eq!(e.host.prop("llm_handoff"), None, "never routed itself");
    // Two out at once (max_in_flight), one input each (Titan's limit).
    let sent = calls(&e);
    assert_eq!(sent.len(), 2);
    let secret = self_call::secret(&e.host).unwrap();
    for (i, (path, headers, body)) in sent.iter().enumerate() {
        assert_eq!(path, "/v1/embeddings");
        assert_eq!(texts(body), [format!("text {i}")]);
        assert_eq!(body["model"], "titan");
        assert_eq!(body["encoding_format"], "base64");
        assert_eq!(header(headers, "x-llm-self-call"), Some(secret.as_str()));
        assert_eq!(header(headers, "x-llm-candidate"), Some("0"));
        assert_eq!(header(headers, "x-model-group"), Some("titan"));
        assert_eq!(header(headers, "x-request-id"), Some("req-9"));
        assert_eq!(header(headers, ":authority"), Some("gw.example"));
        // The client's own headers go on; its key and length do not.
        assert_eq!(header(headers, "x-mock-scenario"), Some("slow"));
        assert_eq!(header(headers, "authorization"), None);
        assert_eq!(header(headers, "content-length"), None);
    }
    // The second answers first; the third part goes out in its place.
    let second = texts(&sent[1].2);
    assert_eq!(e.on_callout(2, openai_part(&second, TITAN, 4)), Flow::Pause);
    let sent = calls(&e);
    assert_eq!(
        (sent.len(), texts(&sent[2].2)),
        (3, vec!["text 2".to_owned()])
    );
    assert_eq!(
        e.on_callout(99, openai_part(&second, TITAN, 4)),
        Flow::Pause
    );
    assert_eq!(
        e.on_callout(1, openai_part(&texts(&sent[0].2), TITAN, 2)),
        Flow::Pause
    );
    assert!(e.host.reply.borrow().is_none(), "one part still out");
    assert_eq!(
        e.on_callout(3, openai_part(&texts(&sent[2].2), TITAN, 3)),
        Flow::Pause
    );
    let (status, body) = reply(&e);
    assert_eq!(status, 200);
    let first: Vec<f64> = (0..3)
        .map(|i| body["data"][i]["embedding"][0].as_f64().unwrap())
        .collect();
    assert_eq!(first, [0.0, 1.0, 2.0], "in the client's order, as floats");
    assert_eq!(body["data"][2]["index"], 2);
    assert_eq!(body["model"], TITAN);
    assert_eq!(body["usage"]["prompt_tokens"], 9, "the parts' usage summed");
    // Metered once, for the whole batch: every part's attempt, one request.
    e.on_log();
    let log: serde_json::Value = serde_json::from_str(&e.host.prop("llm_log").unwrap()).unwrap();
    assert_eq!(log["status"], 200);
    assert_eq!(log["operation"], "embeddings");
    assert_eq!(log["attempts"], 3);
    assert_eq!(log["prompt_tokens"], 9);
    assert_eq!(log["usage_estimated"], false);
    assert_eq!(log["cost_usd"], 9.0);
    let route: Vec<&str> = log["route"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(route.len(), 3);
}

#[test]
fn a_batch_its_vendor_takes_whole_and_a_batch_without_self_calls_go_as_any_request() {
    for (config, group, inputs) in [
        (config(SELF_CALLS), "openai", 3),
        (config(SELF_CALLS), "titan", 1),
        (config(""), "titan", 3),
    ] {
        let mut e = edge(config, "/v1/embeddings", &embeddings(group, inputs));
        assert_eq!(send(&mut e), Flow::Continue, "{group} {inputs}");
        assert!(e.host.http_calls.borrow().is_empty());
        assert!(e.host.prop("llm_handoff").is_some());
    }
}

#[test]
fn a_clients_400_never_carries_the_batch_limit() {
    for self_calls in ["", SELF_CALLS] {
        let mut e = edge(
            config(self_calls),
            "/v1/embeddings",
            &embeddings("openai", 3),
        );
        assert_eq!(send(&mut e), Flow::Continue);
        // Its attempt reached a vendor embedding 2 at once (a failover).
        e.host.set(Map::Response, ":status", "400");
        e.host.set(Map::Response, "x-llm-provider", "oa");
        e.host.set(Map::Response, "x-llm-batch-limit", "2");
        e.on_response_headers(false);
        assert_eq!(e.host.get(Map::Response, "x-llm-batch-limit"), None);
        assert_eq!(e.host.get(Map::Response, ":status").as_deref(), Some("400"));
    }
}

#[test]
fn a_candidate_without_a_named_provider_sends_the_batch_whole_then_splits_by_the_answer() {
    let mut e = edge(config(SELF_CALLS), "/v1/embeddings", &embeddings("any", 3));
    assert_eq!(send(&mut e), Flow::Pause);
    let sent = calls(&e);
    assert_eq!(sent.len(), 1);
    assert_eq!(texts(&sent[0].2).len(), 3);
    // The attempt reached a vendor that embeds 2 at once: split by it.
    let mut refusal = part_answer(
        400,
        TITAN,
        0,
        br#"{"error":{"message":"at most 2"}}"#.to_vec(),
    );
    if let CalloutAnswer::Answered { headers, .. } = &mut refusal {
        headers
            .0
            .push((b"x-llm-batch-limit".to_vec(), b"2".to_vec()));
    }
    assert_eq!(e.on_callout(1, refusal), Flow::Pause);
    let sent = calls(&e);
    assert_eq!(sent.len(), 3);
    assert_eq!(texts(&sent[1].2), ["text 0", "text 1"]);
    assert_eq!(texts(&sent[2].2), ["text 2"]);
    e.on_callout(3, openai_part(&texts(&sent[2].2), TITAN, 1));
    e.on_callout(2, openai_part(&texts(&sent[1].2), TITAN, 2));
    let (status, body) = reply(&e);
    assert_eq!(status, 200);
    assert_eq!(body["data"][1]["embedding"][0], 1.0);
    assert_eq!(body["usage"]["prompt_tokens"], 3);
    e.on_log();
    let log: serde_json::Value = serde_json::from_str(&e.host.prop("llm_log").unwrap()).unwrap();
    assert_eq!(log["attempts"], 2, "the refusal called no vendor");
}

#[test]
fn a_failing_part_fails_the_batch_with_its_own_answer() {
    let mut e = edge(
        config(SELF_CALLS),
        "/v1/embeddings",
        &embeddings("titan", 3),
    );
    send(&mut e);
    let sent = calls(&e);
    let error = br#"{"error":{"message":"busy","type":"server_error","code":"UPSTREAM_BUSY","param":null,"provider":"br","request_id":"req-9"}}"#;
    let mut busy = part_answer(503, TITAN, 0, error.to_vec());
    if let CalloutAnswer::Answered { headers, .. } = &mut busy {
        headers.0.push((b"retry-after".to_vec(), b"3".to_vec()));
    }
    assert_eq!(e.on_callout(2, busy), Flow::Pause);
    let (status, body) = e.host.reply.borrow().clone().unwrap();
    assert_eq!((status, body.as_slice()), (503, &error[..]));
    // The third part is never sent; an answer still out changes nothing.
    assert_eq!(calls(&e).len(), 2);
    e.on_callout(1, openai_part(&texts(&sent[0].2), TITAN, 2));
    assert_eq!(calls(&e).len(), 2);
    assert_eq!(e.host.reply.borrow().as_ref().unwrap().0, 503);
    e.on_log();
    let log: serde_json::Value = serde_json::from_str(&e.host.prop("llm_log").unwrap()).unwrap();
    assert_eq!(log["status"], 503);
    assert_eq!(log["attempts"], 1);
}

#[test]
fn parts_from_different_models_are_never_one_answer() {
    let mut e = edge(
        config(SELF_CALLS),
        "/v1/embeddings",
        &embeddings("titan", 2),
    );
    send(&mut e);
    let sent = calls(&e);
    e.on_callout(1, openai_part(&texts(&sent[0].2), TITAN, 1));
    e.on_callout(2, openai_part(&texts(&sent[1].2), "other-model", 1));
    let (status, body) = reply(&e);
    assert_eq!(status, 503);
    assert_eq!(body["error"]["code"], "UPSTREAM_BUSY");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("different models"));
}

#[test]
fn a_part_without_an_answer_fails_the_batch() {
    let mut e = edge(
        config(SELF_CALLS),
        "/v1/embeddings",
        &embeddings("titan", 2),
    );
    send(&mut e);
    assert_eq!(e.on_callout(1, CalloutAnswer::Failed), Flow::Pause);
    let (status, body) = reply(&e);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (502, Some("UPSTREAM_ERROR"))
    );
}

#[test]
fn a_gemini_batch_is_split_into_gemini_requests_and_answered_in_geminis_shape() {
    let body = serde_json::json!({"requests": (0..3).map(|i| serde_json::json!({
        "model": "models/titan", "content": {"parts": [{"text": format!("text {i}")}]},
        "taskType": "RETRIEVAL_DOCUMENT", "title": "doc"})).collect::<Vec<_>>()});
    let mut e = edge(
        config(SELF_CALLS),
        "/v1beta/models/titan:batchEmbedContents",
        &body.to_string(),
    );
    e.host.set(Map::Request, "authorization", "");
    e.host.set(Map::Request, "x-goog-api-key", KEY);
    assert_eq!(send(&mut e), Flow::Pause);
    let sent = calls(&e);
    assert_eq!(sent[0].0, "/v1beta/models/titan:batchEmbedContents");
    let request = &sent[1].2["requests"][0];
    assert_eq!(request["model"], "models/titan");
    assert_eq!(request["content"]["parts"][0]["text"], "text 1");
    assert_eq!(
        (&request["taskType"], &request["title"]),
        (&"RETRIEVAL_DOCUMENT".into(), &"doc".into())
    );
    assert_eq!(header(&sent[0].1, "x-goog-api-key"), None);
    let gemini = |n: f32| {
        let body = format!(r#"{{"embeddings":[{{"values":[{n},0.5]}}]}}"#).into_bytes();
        part_answer(200, TITAN, 1, body)
    };
    e.on_callout(1, gemini(0.0));
    e.on_callout(2, gemini(1.0));
    e.on_callout(3, gemini(2.0));
    let (status, body) = reply(&e);
    assert_eq!(status, 200);
    assert_eq!(
        body,
        serde_json::json!({"embeddings": [{"values": [0.0, 0.5]}, {"values": [1.0, 0.5]}, {"values": [2.0, 0.5]}]})
    );
}

#[test]
fn a_self_call_is_routed_to_its_candidate_unauthenticated_unadmitted_unmetered_and_never_split() {
    let config = config(SELF_CALLS);
    let mut e = edge(config.clone(), "/v1/embeddings", &embeddings("titan", 3));
    let secret = self_call::secret(&e.host).unwrap();
    e.host.set(Map::Request, "authorization", "");
    e.host.set(Map::Request, "x-llm-self-call", &secret);
    e.host.set(Map::Request, "x-llm-candidate", "0");
    e.host.set(Map::Request, "x-model-group", "titan");
    assert_eq!(send(&mut e), Flow::Continue, "handed off whole, as it came");
    assert!(e.host.http_calls.borrow().is_empty());
    assert_eq!(e.host.get(Map::Request, "x-llm-self-call"), None);
    assert_eq!(e.host.get(Map::Request, "x-llm-candidate"), None);
    assert_eq!(
        e.host.get(Map::Request, "x-llm-cluster").as_deref(),
        Some("bedrock")
    );
    assert!(!e
        .host
        .take_record()
        .iter()
        .any(|c| c.contains("rate_limit")));
    // Its answer reports its attempts; no log line or metric of its own.
    e.host.set(Map::Response, ":status", "400");
    e.host.set(Map::Response, "x-llm-provider", "br");
    e.host.set(Map::Response, "x-llm-batch-limit", "1");
    e.on_response_headers(false);
    assert_eq!(
        e.host.get(Map::Response, "x-llm-batch-limit").as_deref(),
        Some("1"),
        "for its request to split by"
    );
    let report = e.host.get(Map::Response, "x-llm-part").unwrap();
    assert!(PartReport::decode(report.as_bytes()).is_some());
    e.on_log();
    assert_eq!(e.host.prop("llm_log"), None);
    assert!(!e.host.take_record().iter().any(|c| c.starts_with("count")));

    // A client presenting anything else is a client: its key is asked for.
    for forged in ["", "00", &secret[1..]] {
        let mut e = edge(config.clone(), "/v1/embeddings", &embeddings("titan", 1));
        e.host.set(Map::Request, "authorization", "");
        e.host.set(Map::Request, "x-llm-self-call", forged);
        e.host.set(Map::Request, "x-llm-candidate", "0");
        e.on_request_headers(false);
        assert_eq!(reply(&e).0, 401, "{forged}");
        assert_eq!(e.host.get(Map::Request, "x-llm-self-call"), None);
    }
}

#[test]
fn a_gemini_batch_of_mixed_tasks_and_sizes_goes_as_a_part_per_group_answered_in_order() {
    let entry = |i: usize, task: &str, size: Option<u32>| {
        let mut e = serde_json::json!({"content": {"parts": [{"text": format!("text {i}")}]},
                                       "taskType": task, "title": format!("t{i}")});
        if let Some(size) = size {
            e["outputDimensionality"] = size.into();
        }
        e
    };
    let body = serde_json::json!({"requests": [
        entry(0, "RETRIEVAL_DOCUMENT", None), entry(1, "RETRIEVAL_QUERY", None),
        entry(2, "RETRIEVAL_DOCUMENT", None), entry(3, "RETRIEVAL_QUERY", Some(8))]});
    let path = "/v1beta/models/openai:batchEmbedContents";
    let gemini_edge = |self_calls| {
        let e = edge(config(self_calls), path, &body.to_string());
        e.host.set(Map::Request, "authorization", "");
        e.host.set(Map::Request, "x-goog-api-key", KEY);
        e
    };
    // Without self-calls: refused, naming why (OpenAI takes 2048 at once, one task a call).
    let mut e = gemini_edge("");
    send(&mut e);
    let (status, error) = reply(&e);
    assert_eq!(status, 400);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("self_calls"),
        "{error}"
    );
    // With them: a part per group (at most 2 out), each of one task and size.
    let mut e = gemini_edge(SELF_CALLS);
    assert_eq!(send(&mut e), Flow::Pause);
    let sent = calls(&e);
    assert_eq!(sent.len(), 2);
    let entries = |e: &Edge<FakeHost>, i: usize| {
        let sent = calls(e);
        let requests = sent[i].2["requests"].as_array().unwrap().clone();
        requests
            .iter()
            .map(|r| {
                let text = r["content"]["parts"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                (
                    text,
                    r["taskType"].clone(),
                    r["title"].clone(),
                    r["outputDimensionality"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    let doc = serde_json::Value::from("RETRIEVAL_DOCUMENT");
    let query = serde_json::Value::from("RETRIEVAL_QUERY");
    let none = serde_json::Value::Null;
    assert_eq!(
        entries(&e, 0),
        [
            ("text 0".into(), doc.clone(), "t0".into(), none.clone()),
            ("text 2".into(), doc.clone(), "t2".into(), none.clone())
        ]
    );
    assert_eq!(
        entries(&e, 1),
        [("text 1".into(), query.clone(), "t1".into(), none.clone())]
    );
    let gemini = |values: &[f32]| {
        let embeddings: Vec<_> = values
            .iter()
            .map(|v| serde_json::json!({"values": [v, 0.5]}))
            .collect();
        part_answer(
            200,
            "text-embedding-3-small",
            1,
            serde_json::json!({"embeddings": embeddings})
                .to_string()
                .into_bytes(),
        )
    };
    assert_eq!(e.on_callout(2, gemini(&[1.0])), Flow::Pause);
    assert_eq!(
        entries(&e, 2),
        [("text 3".into(), query, "t3".into(), 8.into())]
    );
    e.on_callout(3, gemini(&[3.0]));
    e.on_callout(1, gemini(&[0.0, 2.0]));
    let (status, body) = reply(&e);
    assert_eq!(status, 200);
    let firsts: Vec<f64> = (0..4)
        .map(|i| body["embeddings"][i]["values"][0].as_f64().unwrap())
        .collect();
    assert_eq!(firsts, [0.0, 1.0, 2.0, 3.0], "in the client's order");
}
