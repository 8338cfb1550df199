//! The attempt session driven natively through the fake host: what it
//! sends the vendor, what the client gets, what it records, and the host
//! calls a request makes.

use std::rc::Rc;

use super::Attempt;
use crate::config::Config;
use crate::model::call::Call;
use crate::session::exchange::Handoff;
use crate::session::fake::FakeHost;
use crate::session::host::{Flow, Map};
use crate::session::Session;
use crate::surfaces::routed_call;

const PROVIDER: &str = "xds.upstream_host_metadata.filter_metadata.llm.provider";

fn config(extra: &str) -> Rc<Config> {
    let json = format!(
        r#"{{"providers":{{"an":{{"dialect":"anthropic","api_key":"sk-ant-secret","default_max_tokens":100}}}},
             "model_groups":{{"chat":{{"candidates":[{{"provider":"an","model":"claude-x","cluster":"c"}}]}}}},
             "auth":{{"enabled":false}}{extra}}}"#
    );
    Rc::new(Config::parse(json.as_bytes(), |_| None).unwrap())
}

/// An attempt on the `an` endpoint for a request the edge role handed off.
fn attempt(extra: &str, body: &str) -> Attempt<FakeHost> {
    let host = FakeHost::new();
    let handoff = Handoff {
        api: crate::model::Api::OpenAiChat,
        call: None,
        token: None,
        candidate: Some(0),
        request_id: "req-1".into(),
        group: "chat".into(),
        response_id: None,
        model: None,
    };
    host.set_prop(&["llm_handoff"], handoff.encode().as_bytes());
    host.set_prop(&[PROVIDER], b"an");
    host.set(Map::Request, ":path", "/v1/chat/completions");
    host.set(Map::Request, "authorization", "Bearer client-key");
    host.set(Map::Request, "cookie", "session=1");
    host.set(Map::Request, "x-request-id", "req-1");
    *host.request_body.borrow_mut() = body.as_bytes().to_vec();
    Attempt::new(host, config(extra))
}

const CHAT: &str = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#;
const STREAM: &str =
    r#"{"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

fn send_request(a: &mut Attempt<FakeHost>) {
    assert_eq!(
        a.on_request_headers(false),
        Flow::Pause,
        "waits for the body"
    );
    let size = a.host.request_body.borrow().len();
    assert_eq!(a.on_request_body(size, true), Flow::Continue);
}

fn answer(a: &mut Attempt<FakeHost>, status: &str, content_type: &str) -> Flow {
    a.host.set(Map::Response, ":status", status);
    a.host.set(Map::Response, "content-type", content_type);
    a.host.set(Map::Response, "set-cookie", "vendor=1");
    a.on_response_headers(false)
}

fn body_json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn a_json_request_is_translated_and_its_answer_comes_back_unified() {
    let mut a = attempt("", CHAT);
    send_request(&mut a);
    let host = &a.host;
    // The vendor's request: its path, its auth, its body; nothing of the client's.
    assert_eq!(
        host.get(Map::Request, ":path").as_deref(),
        Some("/v1/messages")
    );
    assert_eq!(
        host.get(Map::Request, "x-api-key").as_deref(),
        Some("sk-ant-secret")
    );
    assert_eq!(host.get(Map::Request, "authorization"), None);
    assert_eq!(host.get(Map::Request, "cookie"), None);
    let sent = body_json(&host.request_body.borrow());
    assert_eq!(sent["model"], "claude-x");
    assert_eq!(sent["max_tokens"], 100);
    let length = host.get(Map::Request, "content-length").unwrap();
    assert_eq!(length, host.request_body.borrow().len().to_string());

    assert_eq!(answer(&mut a, "200", "application/json"), Flow::Pause);
    let vendor = br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x-1","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}"#;
    *a.host.response_body.borrow_mut() = vendor.to_vec();
    assert_eq!(a.on_response_body(vendor.len(), true), Flow::Continue);
    let host = &a.host;
    let got = body_json(&host.response_body.borrow());
    assert_eq!(got["object"], "chat.completion");
    assert_eq!(got["choices"][0]["message"]["content"], "Hello");
    assert_eq!(got["usage"]["total_tokens"], 7);
    assert_eq!(
        host.get(Map::Response, "x-llm-provider").as_deref(),
        Some("an")
    );
    assert_eq!(
        host.get(Map::Response, "x-llm-model").as_deref(),
        Some("claude-x")
    );
    assert_eq!(
        host.get(Map::Response, "set-cookie"),
        None,
        "vendor cookies never pass"
    );
    // The record the edge role bills from (filter state: no shared exchange here).
    let record = body_json(host.prop("llm_attempt.1").unwrap().as_bytes());
    assert_eq!(record["provider"], "an");
    assert_eq!(record["prompt_tokens"], 5);
    assert_eq!(record["completion_tokens"], 2);
    assert_eq!(host.prop("llm_route").as_deref(), Some("an/claude-x:200"));
}

/// The host calls one JSON attempt makes, in order: each is a crossing
/// into Envoy, so a new one shows up here as a reviewable change.
#[test]
fn the_host_calls_of_a_json_attempt() {
    let mut a = attempt("", CHAT);
    send_request(&mut a);
    answer(&mut a, "200", "application/json");
    let vendor = br#"{"id":"m","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#;
    *a.host.response_body.borrow_mut() = vendor.to_vec();
    a.on_response_body(vendor.len(), true);
    assert_eq!(
        a.host.take_calls(),
        [
            "remove_header request authorization",
            "remove_header request cookie",
            "set_header request :path=/v1/messages",
            "set_header request content-type=application/json",
            "set_header request anthropic-version=2023-06-01",
            "set_header request x-api-key=sk-ant-secret",
            "set_header request content-length=106",
            "set_body request 106 bytes",
            "remove_header response set-cookie",
            "set_header response x-llm-provider=an",
            "set_header response x-llm-model=claude-x",
            "set_header response x-llm-attempts=1",
            "remove_header response content-length",
            "set_property llm_route",
            "set_property llm_attempt.1",
            "set_body response 354 bytes",
            "set_property llm_attempt.1",
        ]
    );
}

#[test]
fn a_stream_is_held_until_its_first_content_then_flows() {
    let mut a = attempt("", STREAM);
    send_request(&mut a);
    assert_eq!(
        answer(&mut a, "200", "text/event-stream"),
        Flow::Pause,
        "headers held"
    );
    let start = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n";
    *a.host.response_body.borrow_mut() = start.to_vec();
    assert_eq!(
        a.on_response_body(start.len(), false),
        Flow::Pause,
        "no content yet"
    );
    let held = a.host.response_body.borrow().clone();
    assert!(
        held.starts_with(b"data: {\"id\":\"msg_1\""),
        "the role chunk waits in the buffer"
    );
    let text = b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n";
    a.host.response_body.borrow_mut().extend_from_slice(text);
    let size = a.host.response_body.borrow().len();
    assert_eq!(
        a.on_response_body(size, false),
        Flow::Continue,
        "content released the stream"
    );
    let out = String::from_utf8(a.host.response_body.borrow().clone()).unwrap();
    assert!(out.contains("\"content\":\"Hi\""), "{out}");
    assert_eq!(
        a.host.get(Map::Response, "content-type").as_deref(),
        Some("text/event-stream")
    );
}

#[test]
fn a_vendor_error_before_content_becomes_a_status_envoy_can_retry() {
    let mut a = attempt("", STREAM);
    send_request(&mut a);
    answer(&mut a, "200", "text/event-stream");
    let overloaded = b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    *a.host.response_body.borrow_mut() = overloaded.to_vec();
    assert_eq!(a.on_response_body(overloaded.len(), false), Flow::Continue);
    assert_eq!(a.host.get(Map::Response, ":status").as_deref(), Some("503"));
    let error = body_json(&a.host.response_body.borrow());
    assert_eq!(error["error"]["code"], "UPSTREAM_BUSY");
    assert_eq!(error["error"]["provider"], "an");
    // What the vendor still sends is dropped.
    *a.host.response_body.borrow_mut() = b"event: ping\n\n".to_vec();
    a.on_response_body(13, true);
    assert!(a.host.response_body.borrow().is_empty());
}

#[test]
fn the_vendor_key_never_reaches_the_client() {
    let mut a = attempt("", CHAT);
    send_request(&mut a);
    answer(&mut a, "401", "application/json");
    let echo = br#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-secret"}}"#;
    *a.host.response_body.borrow_mut() = echo.to_vec();
    a.on_response_body(echo.len(), true);
    let body = String::from_utf8(a.host.response_body.borrow().clone()).unwrap();
    assert!(!body.contains("sk-ant-secret"), "{body}");
    assert!(
        body.contains("[REDACTED]") && body.contains("AUTH_FAILED"),
        "{body}"
    );
}

#[test]
fn an_endpoint_without_a_known_provider_is_answered_by_the_gateway() {
    let mut a = attempt("", CHAT);
    a.host.set_prop(&[PROVIDER], b"nobody");
    assert_eq!(a.on_request_headers(false), Flow::Pause);
    let (status, body) = a.host.reply.borrow().clone().unwrap();
    assert_eq!(status, 502);
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains("names provider 'nobody'"), "{text}");
}

#[test]
fn a_request_the_edge_role_did_not_hand_off_is_left_alone() {
    let mut a = attempt("", CHAT);
    a.host.properties.borrow_mut().remove("llm_handoff");
    assert_eq!(a.on_request_headers(false), Flow::Continue);
    assert_eq!(a.on_request_body(CHAT.len(), true), Flow::Continue);
    assert!(
        a.host.take_calls().is_empty(),
        "no host call changed anything"
    );
}

#[test]
fn a_held_stream_is_released_after_max_hold_ms_without_content() {
    let mut a = attempt(r#","streaming":{"max_hold_ms":100}"#, STREAM);
    send_request(&mut a);
    answer(&mut a, "200", "text/event-stream");
    let start = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\"}}\n\n";
    *a.host.response_body.borrow_mut() = start.to_vec();
    assert_eq!(a.on_response_body(start.len(), false), Flow::Pause);
    a.host.advance(0.05);
    let ping = b"event: ping\ndata: {\"type\":\"ping\"}\n\n";
    a.host.response_body.borrow_mut().extend_from_slice(ping);
    let size = a.host.response_body.borrow().len();
    assert_eq!(
        a.on_response_body(size, false),
        Flow::Pause,
        "50 ms: still held"
    );
    a.host.advance(0.1);
    a.host.response_body.borrow_mut().extend_from_slice(ping);
    let size = a.host.response_body.borrow().len();
    assert_eq!(
        a.on_response_body(size, false),
        Flow::Continue,
        "150 ms: released"
    );
}

/// Endpoints of three vendors: Anthropic (`an`), OpenAI (`oa`), Azure's
/// v1 API (`az`), each its own group.
fn native_config() -> Rc<Config> {
    let json = r#"{"providers":{"an":{"dialect":"anthropic","api_key":"sk-ant-secret"},
          "oa":{"dialect":"openai","api_key":"sk-oa-secret"},
          "az":{"dialect":"azure","api_key":"az-secret","api_version":"v1","models":{"gpt":"gpt-deploy"}},
          "br":{"dialect":"bedrock","models":{"*":"cohere.embed-v4:0"}},
          "gm":{"dialect":"gemini","api_key":"g-secret"}},
         "model_groups":{"chat":{"candidates":[{"provider":"an","model":"claude-x","cluster":"c"}]},
           "gpt":{"candidates":[{"provider":"oa","model":"gpt-x","cluster":"c"}]}},
         "auth":{"enabled":false}}"#;
    Rc::new(Config::parse(json.as_bytes(), |_| None).unwrap())
}

/// An attempt on endpoint `provider` for native call `call` of group `group`.
fn call_attempt(provider: &str, group: &str, call: Call, body: &str) -> Attempt<FakeHost> {
    let host = FakeHost::new();
    let handoff = Handoff {
        api: call.api,
        call: Some(call),
        token: None,
        candidate: Some(0),
        request_id: "req-1".into(),
        group: group.into(),
        response_id: None,
        model: None,
    };
    host.set_prop(&["llm_handoff"], handoff.encode().as_bytes());
    host.set_prop(&[PROVIDER], provider.as_bytes());
    host.set(Map::Request, "authorization", "Bearer client-key");
    host.set(Map::Request, "cookie", "session=1");
    *host.request_body.borrow_mut() = body.as_bytes().to_vec();
    Attempt::new(host, native_config())
}

const COUNT: &str =
    r#"{"model":"chat","messages":[{"role":"user","content":"count these four words"}]}"#;

fn count_tokens() -> Call {
    routed_call("POST", "/v1/messages/count_tokens", "")
}

fn embeddings() -> Call {
    routed_call("POST", "/v1/embeddings", "")
}

fn retrieve() -> Call {
    routed_call("GET", "/v1/responses/resp_1", "include%5B%5D=x")
}

#[test]
fn count_tokens_goes_to_anthropic_and_its_answer_back_as_it_is() {
    let mut a = call_attempt("an", "chat", count_tokens(), COUNT);
    send_request(&mut a);
    let host = &a.host;
    assert_eq!(
        host.get(Map::Request, ":path").as_deref(),
        Some("/v1/messages/count_tokens")
    );
    assert_eq!(
        host.get(Map::Request, "x-api-key").as_deref(),
        Some("sk-ant-secret")
    );
    assert_eq!(host.get(Map::Request, "authorization"), None);
    assert_eq!(body_json(&host.request_body.borrow())["model"], "claude-x");
    assert_eq!(answer(&mut a, "200", "application/json"), Flow::Pause);
    let vendor = br#"{"input_tokens":17,"echo":"sk-ant-secret"}"#;
    *a.host.response_body.borrow_mut() = vendor.to_vec();
    a.on_response_body(vendor.len(), true);
    let got = body_json(&a.host.response_body.borrow());
    assert_eq!(got["input_tokens"], 17);
    assert_ne!(got["echo"], "sk-ant-secret", "the vendor key is scrubbed");
    let record = body_json(a.host.prop("llm_attempt.1").unwrap().as_bytes());
    assert_eq!(
        (&record["prompt_tokens"], &record["completion_tokens"]),
        (&serde_json::json!(0), &serde_json::json!(0)),
        "no tokens, not estimated"
    );
    assert_eq!(
        a.host.get(Map::Response, "x-llm-provider").as_deref(),
        Some("an")
    );
}

/// A count on a vendor of another API that counts: its count is decoded
/// and written by the client's surface, in its API's shape.
#[test]
fn a_vendors_own_count_is_answered_in_the_clients_shape() {
    let gemini_count = routed_call("POST", "/v1beta/models/chat:countTokens", "");
    let gemini_body = r#"{"contents":[{"parts":[{"text":"count these"}]}]}"#;
    for (provider, call, body, path, vendor, client) in [
        (
            "gm",
            count_tokens(),
            COUNT,
            "/v1beta/models/chat:countTokens",
            r#"{"totalTokens":9}"#,
            r#"{"input_tokens":9}"#,
        ),
        (
            "an",
            gemini_count,
            gemini_body,
            "/v1/messages/count_tokens",
            r#"{"input_tokens":5}"#,
            r#"{"totalTokens":5}"#,
        ),
    ] {
        let mut a = call_attempt(provider, "chat", call, body);
        send_request(&mut a);
        assert_eq!(a.host.get(Map::Request, ":path").as_deref(), Some(path));
        assert_eq!(answer(&mut a, "200", "application/json"), Flow::Pause);
        *a.host.response_body.borrow_mut() = vendor.as_bytes().to_vec();
        a.on_response_body(vendor.len(), true);
        assert_eq!(*a.host.response_body.borrow(), client.as_bytes());
        let record = body_json(a.host.prop("llm_attempt.1").unwrap().as_bytes());
        assert_eq!(record["prompt_tokens"], 0, "{provider}: no tokens");
    }
}

#[test]
fn a_vendor_error_to_a_native_call_is_in_the_clients_envelope() {
    let mut a = call_attempt("oa", "gpt", retrieve(), "");
    assert_eq!(
        a.on_request_headers(true),
        Flow::Continue,
        "no body to wait for"
    );
    assert_eq!(
        a.host.get(Map::Request, ":path").as_deref(),
        Some("/v1/responses/resp_1?include%5B%5D=x")
    );
    assert_eq!(
        a.host.get(Map::Request, "authorization").as_deref(),
        Some("Bearer sk-oa-secret")
    );
    assert_eq!(a.host.get(Map::Request, "content-length"), None);
    answer(&mut a, "404", "application/json");
    let vendor = br#"{"error":{"message":"Response with id 'resp_1' not found.","type":"invalid_request_error","param":null,"code":null}}"#;
    *a.host.response_body.borrow_mut() = vendor.to_vec();
    a.on_response_body(vendor.len(), true);
    let got = body_json(&a.host.response_body.borrow());
    assert_eq!(a.host.get(Map::Response, ":status").as_deref(), Some("404"));
    assert!(got["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not found"));
}

#[test]
fn azures_v1_api_has_the_stored_calls_under_openai() {
    let delete = routed_call("DELETE", "/v1/responses/resp_1", "");
    let mut a = call_attempt("az", "gpt", delete, "");
    a.on_request_headers(true);
    assert_eq!(
        a.host.get(Map::Request, ":path").as_deref(),
        Some("/openai/v1/responses/resp_1")
    );
    assert_eq!(
        a.host.get(Map::Request, "api-key").as_deref(),
        Some("az-secret")
    );
}

#[test]
fn a_vendor_without_the_call_is_answered_by_the_gateway() {
    // count_tokens failed over to OpenAI: the estimate.
    let mut a = call_attempt("oa", "chat", count_tokens(), COUNT);
    assert_eq!(a.on_request_headers(false), Flow::Pause);
    let size = a.host.request_body.borrow().len();
    assert_eq!(a.on_request_body(size, true), Flow::Pause);
    let (status, body) = a.host.reply.borrow().clone().unwrap();
    assert_eq!(status, 200);
    assert!(body_json(&body)["input_tokens"].as_u64().unwrap() >= 4);
    // A stored response asked of Anthropic: the gateway keeps none.
    let mut a = call_attempt("an", "chat", retrieve(), "");
    assert_eq!(a.on_request_headers(true), Flow::Pause);
    let (status, body) = a.host.reply.borrow().clone().unwrap();
    assert_eq!(status, 400);
    assert_eq!(body_json(&body)["error"]["param"], "response_id");
}

/// The attempt's route and record, as the edge role reads them.
fn route_and_record(a: &Attempt<FakeHost>) -> (String, serde_json::Value) {
    let record = a.host.prop("llm_attempt.1").unwrap_or_default();
    let record = serde_json::from_str(&record).unwrap_or_default();
    (a.host.prop("llm_route").unwrap_or_default(), record)
}

#[test]
fn an_attempt_envoy_resets_before_its_answer_is_recorded_as_reset() {
    // A per-try timeout or a refused connection: no vendor headers came.
    let mut a = attempt("", CHAT);
    send_request(&mut a);
    a.on_done();
    let (route, record) = route_and_record(&a);
    assert_eq!(route, "an/claude-x:reset");
    assert_eq!(
        (&record["status"], &record["reset"], &record["provider"]),
        (&0.into(), &true.into(), &"an".into())
    );
    // A held stream's headers came (200), then the per-try timeout.
    let mut a = attempt("", STREAM);
    send_request(&mut a);
    answer(&mut a, "200", "text/event-stream");
    assert_eq!(route_and_record(&a).0, "an/claude-x:200");
    a.on_done();
    let (route, record) = route_and_record(&a);
    assert_eq!(route, "an/claude-x:reset", "the 200 entry is replaced");
    assert_eq!(
        (&record["status"], &record["reset"]),
        (&200.into(), &true.into())
    );
}

#[test]
fn an_attempt_that_ended_is_left_as_it_ended() {
    let mut a = attempt("", CHAT);
    send_request(&mut a);
    answer(&mut a, "529", "application/json");
    let overloaded =
        br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    *a.host.response_body.borrow_mut() = overloaded.to_vec();
    a.on_response_body(overloaded.len(), true);
    a.on_done();
    let (route, record) = route_and_record(&a);
    assert_eq!(route, "an/claude-x:529");
    assert!(record.get("reset").is_none(), "{record}");
}

// A proxy that fails a call: no vendor byte reaches the client untranslated
// or unscrubbed, and no request reaches the vendor half-made.

const VENDOR_ANSWER: &[u8] = br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"sk-ant-secret Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}"#;
const MESSAGE_START: &[u8] = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n";
const TEXT_DELTA: &[u8] = b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"sk-ant-secret Hi\"}}\n\n";

/// The gateway's own 502 in the client's (OpenAI's) envelope, naming the call.
fn assert_replied_502(a: &Attempt<FakeHost>, call: &str) {
    let (status, body) = a.host.reply.borrow().clone().expect("a local reply");
    assert_eq!(status, 502);
    let body = body_json(&body);
    assert_eq!(body["error"]["code"], "UPSTREAM_ERROR");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(call), "{message}");
    assert!(!message.contains("sk-ant-secret"));
}

/// What the client would be sent of the vendor's answer: the buffer, or
/// nothing when the session held it (paused) or reset the stream.
fn passed(a: &Attempt<FakeHost>, flow: Flow) -> Vec<u8> {
    if flow == Flow::Pause || a.host.reset.get() || a.host.reply.borrow().is_some() {
        Vec::new()
    } else {
        a.host.response_body.borrow().clone()
    }
}

#[test]
fn a_failed_write_of_a_json_answer_becomes_the_gateways_502() {
    // Every write of the buffer fails (the emptying too), or only the answer's.
    for nth in [None, Some(1)] {
        let mut a = attempt("", CHAT);
        send_request(&mut a);
        assert_eq!(answer(&mut a, "200", "application/json"), Flow::Pause);
        a.host.fail("set_body response", nth);
        *a.host.response_body.borrow_mut() = VENDOR_ANSWER.to_vec();
        let flow = a.on_response_body(VENDOR_ANSWER.len(), true);
        assert_eq!(flow, Flow::Pause, "the vendor's bytes are held");
        assert_replied_502(&a, "set_body");
        assert!(passed(&a, flow).is_empty());
        if nth.is_some() {
            assert!(a.host.response_body.borrow().is_empty(), "and emptied");
        }
        let (route, record) = route_and_record(&a);
        assert_eq!(route, "an/claude-x:502", "replaces the answer's entry");
        assert_eq!(record["status"], 502);
        assert_eq!(record["code"], "UPSTREAM_ERROR");
    }
}

#[test]
fn an_unreadable_answer_is_not_passed_on() {
    let mut a = attempt("", CHAT);
    send_request(&mut a);
    answer(&mut a, "200", "application/json");
    a.host.fail("body response", None);
    *a.host.response_body.borrow_mut() = VENDOR_ANSWER.to_vec();
    let flow = a.on_response_body(VENDOR_ANSWER.len(), true);
    assert_eq!(flow, Flow::Pause);
    assert_replied_502(&a, "body");
    assert!(a.host.response_body.borrow().is_empty(), "emptied");
}

#[test]
fn a_failed_write_of_a_held_first_chunk_becomes_the_gateways_502() {
    let mut a = attempt("", STREAM);
    send_request(&mut a);
    assert_eq!(answer(&mut a, "200", "text/event-stream"), Flow::Pause);
    a.host.fail("set_body response", Some(1));
    let mut chunk = MESSAGE_START.to_vec();
    chunk.extend_from_slice(TEXT_DELTA);
    *a.host.response_body.borrow_mut() = chunk.clone();
    let flow = a.on_response_body(chunk.len(), false);
    assert_eq!(flow, Flow::Pause);
    assert_replied_502(&a, "set_body");
    assert!(
        !a.host.reset.get(),
        "the headers had not gone: an answer, not a cut"
    );
    assert!(a.host.response_body.borrow().is_empty());
    // What the vendor still sends is dropped.
    *a.host.response_body.borrow_mut() = TEXT_DELTA.to_vec();
    assert_eq!(a.on_response_body(TEXT_DELTA.len(), true), Flow::Continue);
    assert!(a.host.response_body.borrow().is_empty());
}

#[test]
fn a_failed_write_of_a_stream_chunk_resets_the_stream() {
    // The first chunk of a stream that is not held, and a later one.
    for nth in [1, 2] {
        let mut a = attempt(r#","streaming":{"hold_until_first_content":false}"#, STREAM);
        send_request(&mut a);
        assert_eq!(answer(&mut a, "200", "text/event-stream"), Flow::Continue);
        a.host.fail("set_body response", Some(nth));
        let mut flows = Vec::new();
        for (i, chunk) in [MESSAGE_START, TEXT_DELTA].iter().enumerate() {
            *a.host.response_body.borrow_mut() = chunk.to_vec();
            let flow = a.on_response_body(chunk.len(), false);
            let sent = passed(&a, flow);
            let text = String::from_utf8_lossy(&sent);
            assert!(!text.contains("sk-ant-secret"), "{text}");
            assert!(
                !text.contains("event: "),
                "never the vendor's events: {text}"
            );
            flows.push(flow);
            if i + 1 == nth {
                assert_eq!(flow, Flow::Pause, "the chunk is held");
                assert!(a.host.reset.get(), "the stream is cut");
                assert!(a.host.reply.borrow().is_none(), "too late for an answer");
                assert!(a.host.response_body.borrow().is_empty(), "and emptied");
            }
        }
        if nth == 2 {
            assert_eq!(flows[0], Flow::Continue, "the first chunk went translated");
        }
        let (_, record) = route_and_record(&a);
        assert_eq!(record["code"], "UPSTREAM_ERROR");
    }
}

#[test]
fn a_stream_whose_buffer_cannot_be_written_at_all_is_held_and_reset() {
    let mut a = attempt(r#","streaming":{"hold_until_first_content":false}"#, STREAM);
    send_request(&mut a);
    answer(&mut a, "200", "text/event-stream");
    a.host.fail("set_body response", None);
    *a.host.response_body.borrow_mut() = TEXT_DELTA.to_vec();
    assert_eq!(a.on_response_body(TEXT_DELTA.len(), false), Flow::Pause);
    assert!(a.host.reset.get());
    // Still the vendor's bytes in the buffer, but never passed on.
    assert_eq!(*a.host.response_body.borrow(), TEXT_DELTA);
    *a.host.response_body.borrow_mut() = TEXT_DELTA.to_vec();
    assert_eq!(a.on_response_body(TEXT_DELTA.len(), true), Flow::Pause);
}

#[test]
fn a_vendor_header_that_cannot_be_dropped_withholds_the_answer() {
    let mut a = attempt("", CHAT);
    send_request(&mut a);
    a.host.fail("remove_header response set-cookie", None);
    assert_eq!(answer(&mut a, "200", "application/json"), Flow::Pause);
    assert_replied_502(&a, "set_header");
    let (route, record) = route_and_record(&a);
    assert_eq!(route, "an/claude-x:502");
    assert_eq!(record["provider"], "an");
    // Whatever body follows is dropped.
    *a.host.response_body.borrow_mut() = VENDOR_ANSWER.to_vec();
    assert_eq!(
        a.on_response_body(VENDOR_ANSWER.len(), true),
        Flow::Continue
    );
    assert!(a.host.response_body.borrow().is_empty());
}

#[test]
fn a_failed_write_of_the_vendors_request_stops_it() {
    for call in [
        "remove_header request authorization",
        "remove_header request cookie",
        "set_header request :path",
        "set_header request x-api-key",
        "set_header request content-length",
        "set_body request",
        "headers request",
        "body request",
    ] {
        let mut a = attempt("", CHAT);
        a.host.fail(call, None);
        assert_eq!(a.on_request_headers(false), Flow::Pause);
        let size = a.host.request_body.borrow().len();
        assert_eq!(
            a.on_request_body(size, true),
            Flow::Pause,
            "{call}: the request goes no further"
        );
        let (status, _) = a.host.reply.borrow().clone().expect(call);
        assert_eq!(status, 502, "{call}");
        // Nothing more of the vendor's request was written after the failure.
        let calls = a.host.take_calls();
        let failed = calls.iter().position(|c| c.ends_with("!failed"));
        let after: Vec<_> = calls[failed.map_or(0, |i| i + 1)..]
            .iter()
            .filter(|c| c.contains(" request "))
            .collect();
        assert!(after.is_empty(), "{call}: {after:?}");
    }
}

#[test]
fn a_failed_local_reply_resets_the_stream() {
    let mut a = attempt("", CHAT);
    a.host.fail("set_header request :path", None);
    a.host.fail("send_response", None);
    assert_eq!(a.on_request_headers(false), Flow::Pause);
    let size = a.host.request_body.borrow().len();
    assert_eq!(a.on_request_body(size, true), Flow::Pause);
    assert!(a.host.reply.borrow().is_none());
    assert!(a.host.reset.get(), "the request is cut, not sent on");
}

#[test]
fn an_unreadable_handoff_is_not_taken_for_a_request_of_someone_elses() {
    let mut a = attempt("", CHAT);
    a.host.fail("property llm_handoff", None);
    assert_eq!(a.on_request_headers(false), Flow::Pause);
    assert_eq!(a.host.reply.borrow().as_ref().map(|r| r.0), Some(502));
}

#[test]
fn failed_metric_and_record_writes_change_nothing_the_client_sees() {
    let mut a = attempt(r#","overhead_histograms":true"#, STREAM);
    a.host.fail("overhead", None);
    a.host.fail("record", None);
    a.host.fail("set_property", None);
    send_request(&mut a);
    assert_eq!(answer(&mut a, "200", "text/event-stream"), Flow::Pause);
    let mut chunk = MESSAGE_START.to_vec();
    chunk.extend_from_slice(TEXT_DELTA);
    *a.host.response_body.borrow_mut() = chunk.clone();
    assert_eq!(a.on_response_body(chunk.len(), false), Flow::Continue);
    let out = String::from_utf8(a.host.response_body.borrow().clone()).unwrap();
    assert!(out.contains("[REDACTED] Hi"), "{out}");
    assert!(a.host.reply.borrow().is_none() && !a.host.reset.get());
    let failed = a.host.take_calls();
    assert!(
        failed
            .iter()
            .any(|c| c.starts_with("overhead") && c.ends_with("!failed")),
        "{failed:?}"
    );
}

const EMBED: &str = r#"{"model":"gpt","input":["one two","three"],"encoding_format":"float"}"#;

/// OpenAI's answer to [`EMBED`], its vectors in base64 as the gateway asks.
fn openai_embeddings(vectors: &[&[f32]]) -> Vec<u8> {
    let data: Vec<serde_json::Value> = vectors
        .iter()
        .enumerate()
        .map(|(index, v)| {
            let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
            serde_json::json!({"object": "embedding", "index": index,
                "embedding": crate::formats::base64::encode_padded(&bytes)})
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({"object": "list", "data": data,
        "model": "gpt-x", "usage": {"prompt_tokens": 3, "total_tokens": 3}}))
    .unwrap()
}

#[test]
fn embeddings_are_translated_and_answered_in_openais_shape_with_the_vendors_count() {
    let mut a = call_attempt("oa", "gpt", embeddings(), EMBED);
    send_request(&mut a);
    assert_eq!(
        a.host.get(Map::Request, ":path").as_deref(),
        Some("/v1/embeddings")
    );
    let sent = body_json(&a.host.request_body.borrow());
    assert_eq!(
        sent,
        serde_json::json!({"input": ["one two", "three"], "model": "gpt-x", "encoding_format": "base64"})
    );
    assert_eq!(answer(&mut a, "200", "application/json"), Flow::Pause);
    let vendor = openai_embeddings(&[&[0.5, -1.0], &[2.0, 0.25]]);
    *a.host.response_body.borrow_mut() = vendor.clone();
    assert_eq!(a.on_response_body(vendor.len(), true), Flow::Continue);
    let client = body_json(&a.host.response_body.borrow());
    assert_eq!(
        client["data"][1]["embedding"],
        serde_json::json!([2.0, 0.25])
    );
    assert_eq!(client["usage"]["prompt_tokens"], 3);
    let (_, record) = route_and_record(&a);
    assert_eq!(record["prompt_tokens"], 3, "the vendor's count is billed");
}

#[test]
fn embeddings_answered_with_the_wrong_count_or_unwritable_never_reach_the_client() {
    // One vector for two inputs: an upstream error, not a short list.
    let mut a = call_attempt("oa", "gpt", embeddings(), EMBED);
    send_request(&mut a);
    answer(&mut a, "200", "application/json");
    let short = openai_embeddings(&[&[0.5]]);
    *a.host.response_body.borrow_mut() = short.clone();
    a.on_response_body(short.len(), true);
    let client = body_json(&a.host.response_body.borrow());
    assert_eq!(client["error"]["code"], "UPSTREAM_ERROR");
    assert_eq!(a.host.get(Map::Response, ":status").as_deref(), Some("502"));
    // The answer cannot be written: the gateway's 502, the vendor's bytes held.
    let mut a = call_attempt("oa", "gpt", embeddings(), EMBED);
    send_request(&mut a);
    answer(&mut a, "200", "application/json");
    a.host.fail("set_body response", Some(1));
    let vendor = openai_embeddings(&[&[0.5], &[1.0]]);
    *a.host.response_body.borrow_mut() = vendor.clone();
    let flow = a.on_response_body(vendor.len(), true);
    assert_eq!(flow, Flow::Pause);
    assert!(passed(&a, flow).is_empty());
    let (status, _) = a.host.reply.borrow().clone().expect("a local reply");
    assert_eq!(status, 502);
}

#[test]
fn an_embeddings_attempt_on_a_vendor_that_does_not_embed_is_refused_before_sending() {
    let mut a = call_attempt("an", "chat", embeddings(), EMBED);
    assert_eq!(a.on_request_headers(false), Flow::Pause);
    let size = a.host.request_body.borrow().len();
    assert_eq!(a.on_request_body(size, true), Flow::Pause);
    let (status, body) = a.host.reply.borrow().clone().expect("a local reply");
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("embeds"));
    assert_ne!(
        a.host.get(Map::Request, ":path").as_deref(),
        Some("/v1/messages"),
        "nothing was addressed to the vendor"
    );
}

/// Cohere Embed on Bedrock takes 96 texts a call: a batch of 97 is
/// refused before any vendor call, naming the limit the edge splits by.
#[test]
fn an_embeddings_batch_over_the_vendors_limit_is_refused_with_the_limit() {
    // The limit's header is for the edge role's batches (self-calls on).
    for (inputs, refused, self_calls) in [(97, true, true), (96, false, true), (97, true, false)] {
        let texts: Vec<String> = (0..inputs).map(|i| format!("t{i}")).collect();
        let body = serde_json::json!({"model": "gpt", "input": texts}).to_string();
        let mut a = call_attempt("br", "gpt", embeddings(), &body);
        if self_calls {
            let config = Rc::get_mut(&mut a.config).expect("the attempt's own configuration");
            config.self_calls = Some(crate::config::SelfCalls {
                cluster: "self".into(),
                timeout_ms: 1000,
                max_in_flight: 2,
            });
        }
        a.on_request_headers(false);
        let size = a.host.request_body.borrow().len();
        let flow = a.on_request_body(size, true);
        assert_eq!(flow == Flow::Pause, refused, "{inputs}");
        if !refused {
            continue;
        }
        let (status, body) = a.host.reply.borrow().clone().expect("a local reply");
        assert_eq!(status, 400);
        assert!(String::from_utf8_lossy(&body).contains("at most 96"));
        let headers = a.host.reply_headers.borrow();
        let limit = headers.iter().find(|(n, _)| n == "x-llm-batch-limit");
        let want = self_calls.then_some(&b"96"[..]);
        assert_eq!(limit.map(|(_, v)| v.as_slice()), want);
    }
}

#[test]
fn time_per_output_token_is_a_request_metric() {
    let events = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    for (extra, recorded) in [("", true), (r#","request_metrics":false"#, false)] {
        let mut a = attempt(extra, STREAM);
        send_request(&mut a);
        answer(&mut a, "200", "text/event-stream");
        *a.host.response_body.borrow_mut() = events.as_bytes().to_vec();
        a.on_response_body(events.len(), true);
        let calls = a.host.take_calls();
        assert_eq!(
            calls
                .iter()
                .any(|c| c.starts_with("record gen_ai.server.time_per_output_token_us")),
            recorded,
            "{extra}: {calls:?}"
        );
    }
}
