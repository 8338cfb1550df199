//! The edge session driven natively through the fake host: admission,
//! the handoff to the attempts, the gateway's own answers, rate limits,
//! Envoy's local replies rewritten, and the access-log line at the end.

use std::rc::Rc;

use sha2::{Digest, Sha256};

use super::{limiter, Edge};
use crate::config::Config;
use crate::session::exchange::Handoff;
use crate::session::fake::FakeHost;
use crate::session::host::{CalloutAnswer, Flow, Map};
use crate::session::Session;

const KEY: &str = "team-a-secret";

fn config(extra: &str) -> Rc<Config> {
    let hash = format!("{:x}", Sha256::digest(KEY.as_bytes()));
    let json = format!(
        r#"{{"providers":{{"an":{{"dialect":"anthropic","api_key":"sk-ant"}}}},
             "model_groups":{{"chat":{{"candidates":[{{"provider":"an","model":"claude-x","cluster":"anthropic_cluster"}}]}}}},
             "auth":{{"enabled":true,"keys":[{{"name":"team-a","sha256":"{hash}","groups":["*"]}}]}}{extra}}}"#
    );
    Rc::new(Config::parse(json.as_bytes(), |_| None).unwrap())
}

/// A request on `path` with the gateway key, as the client sent it.
fn edge(config: Rc<Config>, method: &str, path: &str, body: &str) -> Edge<FakeHost> {
    let host = FakeHost::new();
    limiter::prepare(&host, &config);
    host.set(Map::Request, ":method", method);
    host.set(Map::Request, ":path", path);
    host.set(Map::Request, "authorization", &format!("Bearer {KEY}"));
    host.set(Map::Request, "content-type", "application/json");
    host.set(Map::Request, "x-request-id", "req-7");
    host.set(Map::Request, "x-llm-cluster", "chosen_by_the_client");
    *host.request_body.borrow_mut() = body.as_bytes().to_vec();
    Edge::new(host, config)
}

const CHAT: &str = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#;

fn send(e: &mut Edge<FakeHost>) -> Flow {
    if e.on_request_headers(false) == Flow::Pause && e.host.reply.borrow().is_none() {
        let size = e.host.request_body.borrow().len();
        return e.on_request_body(size, true);
    }
    Flow::Pause
}

fn reply(e: &Edge<FakeHost>) -> (u16, serde_json::Value) {
    let (status, body) = e.host.reply.borrow().clone().expect("the gateway answered");
    (status, serde_json::from_slice(&body).unwrap())
}

#[test]
fn a_chat_request_is_admitted_routed_and_handed_off() {
    let mut e = edge(config(""), "POST", "/v1/chat/completions", CHAT);
    assert_eq!(send(&mut e), Flow::Continue);
    let host = &e.host;
    assert!(host.reply.borrow().is_none());
    // Routed by our header, never the client's; the gateway key never travels on.
    assert_eq!(
        host.get(Map::Request, "x-llm-cluster").as_deref(),
        Some("anthropic_cluster")
    );
    assert_eq!(host.get(Map::Request, "authorization"), None);
    let handoff = Handoff::decode(host.prop("llm_handoff").unwrap().as_bytes()).unwrap();
    assert_eq!(
        (handoff.group.as_str(), handoff.candidate),
        ("chat", Some(0))
    );
    assert_eq!(handoff.request_id, "req-7");
}

#[test]
fn a_missing_or_wrong_key_is_refused_before_anything_else() {
    let mut e = edge(config(""), "POST", "/v1/chat/completions", CHAT);
    e.host.set(Map::Request, "authorization", "Bearer wrong");
    assert_eq!(send(&mut e), Flow::Pause);
    let (status, body) = reply(&e);
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "AUTH_FAILED");
    assert!(e.host.prop("llm_handoff").is_none(), "nothing handed off");
}

#[test]
fn a_bad_body_is_answered_with_the_field() {
    let mut e = edge(
        config(""),
        "POST",
        "/v1/chat/completions",
        r#"{"model":"chat","messages":[]}"#,
    );
    assert_eq!(send(&mut e), Flow::Pause);
    let (status, body) = reply(&e);
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "messages");
}

#[test]
fn models_are_listed_by_the_gateway() {
    let mut e = edge(config(""), "GET", "/v1/models", "");
    assert_eq!(e.on_request_headers(true), Flow::Pause);
    let (status, body) = reply(&e);
    assert_eq!(status, 200);
    assert_eq!(body["object"], "list");
    assert_eq!(body["data"][0]["id"], "chat");
}

#[test]
fn paths_that_are_not_ours_pass_untouched() {
    let mut e = edge(config(""), "GET", "/healthz", "");
    assert_eq!(e.on_request_headers(true), Flow::Continue);
    assert!(e.host.reply.borrow().is_none());
}

#[test]
fn a_rate_limit_refuses_the_request_over_it_with_openais_headers() {
    let limits = r#","limits":{"rate":[{"key":"team-a","requests_per_minute":1}]}"#;
    let config = config(limits);
    let mut first = edge(config.clone(), "POST", "/v1/chat/completions", CHAT);
    assert_eq!(send(&mut first), Flow::Continue);
    // The second request of the minute, on the same shared counters.
    let mut second = edge(config, "POST", "/v1/chat/completions", CHAT);
    *second.host.shared.borrow_mut() = first.host.shared.borrow().clone();
    assert_eq!(send(&mut second), Flow::Pause);
    let (status, body) = reply(&second);
    assert_eq!(status, 429);
    assert_eq!(body["error"]["code"], "RATE_LIMITED");
    assert!(
        !body.to_string().contains("team-a"),
        "never a key's name: {body}"
    );
}

#[test]
fn envoys_own_reply_becomes_a_unified_error() {
    let mut e = edge(config(""), "POST", "/v1/chat/completions", CHAT);
    send(&mut e);
    // No healthy upstream: Envoy answers 503 itself (no x-llm-provider).
    e.host.set(Map::Response, ":status", "503");
    e.host
        .set_prop(&["response", "code_details"], b"no_healthy_upstream");
    assert_eq!(e.on_response_headers(false), Flow::Continue);
    let raw = b"no healthy upstream";
    *e.host.response_body.borrow_mut() = raw.to_vec();
    assert_eq!(e.on_response_body(raw.len(), true), Flow::Continue);
    let body: serde_json::Value = serde_json::from_slice(&e.host.response_body.borrow()).unwrap();
    assert_eq!(body["error"]["request_id"], "req-7");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("healthy"),
        "{body}"
    );
    assert_eq!(
        e.host.get(Map::Response, "content-type").as_deref(),
        Some("application/json")
    );
}

/// The vendor's answer (5 prompt tokens, 2 completion), as the upstream
/// role leaves its record in the exchange both roles share in one VM, and
/// the request's end.
fn answer_and_end(e: &mut Edge<FakeHost>) {
    let handoff = Handoff::decode(e.host.prop("llm_handoff").unwrap().as_bytes()).unwrap();
    let exchange = crate::session::exchange::find(handoff.token.unwrap()).unwrap();
    let record = crate::metering::AttemptRecord {
        provider: "an".into(),
        model: "claude-x".into(),
        status: 200,
        prompt_tokens: Some(5),
        completion_tokens: Some(2),
        ..Default::default()
    };
    exchange.borrow_mut().attempts = 1;
    exchange.borrow_mut().set_record(1, &record);
    exchange.borrow_mut().route.push("an/claude-x:200".into());
    e.host.set(Map::Response, ":status", "200");
    e.host.set(Map::Response, "x-llm-provider", "an");
    e.on_response_headers(false);
    e.on_response_body(0, true);
    e.on_log();
}

#[test]
fn the_access_log_line_is_written_when_the_request_ends() {
    let mut e = edge(config(""), "POST", "/v1/chat/completions", CHAT);
    send(&mut e);
    answer_and_end(&mut e);
    let line: serde_json::Value = serde_json::from_str(&e.host.prop("llm_log").unwrap()).unwrap();
    assert_eq!(line["request_id"], "req-7");
    assert_eq!(line["key"], "team-a");
    assert_eq!(line["prompt_tokens"], 5);
    assert_eq!(line["completion_tokens"], 2);
    assert_eq!(line["route"], serde_json::json!(["an/claude-x:200"]));
}

#[test]
fn request_metrics_off_leaves_the_series_out_and_the_log_line_in() {
    for (extra, series) in [("", true), (r#","request_metrics":false"#, false)] {
        let mut e = edge(config(extra), "POST", "/v1/chat/completions", CHAT);
        send(&mut e);
        answer_and_end(&mut e);
        let calls = e.host.take_calls();
        for metric in [
            "count llm_gateway.requests",
            "count llm_gateway.attempts",
            "count gen_ai.client.token.usage",
            "record gen_ai.server.request.duration_ms",
        ] {
            assert_eq!(
                calls.iter().any(|c| c.starts_with(metric)),
                series,
                "{extra}: {metric} in {calls:?}"
            );
        }
        let line: serde_json::Value =
            serde_json::from_str(&e.host.prop("llm_log").unwrap()).unwrap();
        assert_eq!(
            (
                line["prompt_tokens"].as_u64(),
                line["completion_tokens"].as_u64()
            ),
            (Some(5), Some(2))
        );
    }
}

const MESSAGES: &str =
    r#"{"model":"chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#;

#[test]
fn a_messages_request_is_handed_off_and_its_errors_are_anthropics() {
    let mut e = edge(config(""), "POST", "/v1/messages", MESSAGES);
    assert_eq!(send(&mut e), Flow::Continue);
    let handoff = Handoff::decode(e.host.prop("llm_handoff").unwrap().as_bytes()).unwrap();
    assert_eq!(handoff.api, crate::model::Api::AnthropicMessages);
    // The upstream role answered a busy vendor with the gateway's 503: the
    // client gets Anthropic's 529.
    e.host.set(Map::Response, ":status", "503");
    e.host.set(Map::Response, "x-llm-provider", "an");
    e.on_response_headers(false);
    assert_eq!(e.host.get(Map::Response, ":status").as_deref(), Some("529"));
    // The gateway's own refusals too, in Anthropic's envelope.
    let mut e = edge(config(""), "POST", "/v1/messages", r#"{"model":"chat"}"#);
    send(&mut e);
    let (status, body) = reply(&e);
    assert_eq!(status, 400);
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["message"], "max_tokens: Field required");
    assert_eq!(body["request_id"], "req-7");
}

/// Groups on Anthropic (`chat`), OpenAI (`gpt`) and on a vendor with
/// neither the Messages nor the Responses API (`flash`), for keys allowed
/// `groups`.
fn three_vendors(groups: &str) -> Rc<Config> {
    let hash = format!("{:x}", Sha256::digest(KEY.as_bytes()));
    let json = format!(
        r#"{{"providers":{{"an":{{"dialect":"anthropic","api_key":"sk-ant"}},
              "ge":{{"dialect":"gemini","api_key":"g"}},"oa":{{"dialect":"openai","api_key":"sk-oa"}}}},
             "model_groups":{{"chat":{{"candidates":[{{"provider":"an","model":"claude-x","cluster":"anthropic_cluster"}}]}},
               "flash":{{"candidates":[{{"provider":"ge","model":"gemini-x","cluster":"gemini_cluster"}}]}},
               "gpt":{{"candidates":[{{"provider":"oa","model":"gpt-x","cluster":"openai_cluster"}}]}}}},
             "auth":{{"enabled":true,"keys":[{{"name":"team-a","sha256":"{hash}","groups":{groups}}}]}}}}"#
    );
    Rc::new(Config::parse(json.as_bytes(), |_| None).unwrap())
}

fn handoff(e: &Edge<FakeHost>) -> Handoff {
    Handoff::decode(e.host.prop("llm_handoff").unwrap().as_bytes()).unwrap()
}

#[test]
fn count_tokens_goes_to_a_vendor_with_the_call_else_is_estimated() {
    let body =
        r#"{"model":"chat","messages":[{"role":"user","content":"count these four words"}]}"#;
    let mut e = edge(config(""), "POST", "/v1/messages/count_tokens", body);
    assert_eq!(send(&mut e), Flow::Continue);
    let handoff = handoff(&e);
    assert_eq!(
        handoff.call,
        Some(crate::surfaces::routed_call(
            "POST",
            "/v1/messages/count_tokens",
            ""
        ))
    );
    assert_eq!(handoff.api, crate::model::Api::AnthropicMessages);
    assert_eq!(handoff.group, "chat");
    assert_eq!(
        e.host.get(Map::Request, "x-llm-cluster").as_deref(),
        Some("anthropic_cluster")
    );
    // Gemini counts with a call of its own.
    let body =
        r#"{"model":"flash","messages":[{"role":"user","content":"count these four words"}]}"#;
    let mut e = edge(
        three_vendors(r#"["*"]"#),
        "POST",
        "/v1/messages/count_tokens",
        body,
    );
    assert_eq!(send(&mut e), Flow::Continue);
    assert!(e.host.prop("llm_handoff").is_some(), "handed off to Gemini");
    // A group whose vendors have no count: the gateway's estimate, flagged.
    let body = r#"{"model":"gpt","messages":[{"role":"user","content":"count these four words"}]}"#;
    let mut e = edge(
        three_vendors(r#"["*"]"#),
        "POST",
        "/v1/messages/count_tokens",
        body,
    );
    send(&mut e);
    let (status, body) = reply(&e);
    assert_eq!(status, 200);
    assert!(body["input_tokens"].as_u64().unwrap() >= 4, "{body}");
    assert!(e.host.prop("llm_handoff").is_none(), "nothing handed off");
    // A bad body or another method is refused.
    let mut e = edge(
        config(""),
        "POST",
        "/v1/messages/count_tokens",
        r#"{"model":"chat","messages":[]}"#,
    );
    send(&mut e);
    assert_eq!(reply(&e).0, 400);
    let mut e = edge(config(""), "GET", "/v1/messages/count_tokens", "");
    send(&mut e);
    assert_eq!(reply(&e).0, 405);
}

#[test]
fn stored_response_calls_need_a_group_with_the_responses_api() {
    let call = |method: &str, path: &str, group: Option<&str>| {
        let mut e = edge(three_vendors(r#"["*"]"#), method, path, "");
        if let Some(group) = group {
            e.host.set(Map::Request, "x-model-group", group);
        }
        let flow = e.on_request_headers(true);
        (flow, e)
    };
    let (flow, e) = call("GET", "/v1/responses/resp_1?include%5B%5D=x", Some("gpt"));
    assert_eq!(flow, Flow::Continue, "routed at the headers: no body");
    let handoff = handoff(&e);
    assert_eq!(handoff.api, crate::model::Api::OpenAiResponses);
    assert_eq!(
        handoff.call.map(|c| c.path_and_query()).as_deref(),
        Some("/v1/responses/resp_1?include%5B%5D=x")
    );
    // No group named, none by default: a 400 asking for the header.
    let (_, e) = call("DELETE", "/v1/responses/resp_1", None);
    let (status, body) = reply(&e);
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (400, Some("x-model-group"))
    );
    // A group without the Responses API: the gateway keeps no responses.
    let (_, e) = call("POST", "/v1/responses/resp_1/cancel", Some("flash"));
    let (status, body) = reply(&e);
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (400, Some("response_id"))
    );
    // A wrong method, an unknown path.
    assert_eq!(
        reply(&call("PUT", "/v1/responses/resp_1", Some("gpt")).1).0,
        405
    );
    assert_eq!(
        reply(&call("GET", "/v1/responses/resp_1/x", Some("gpt")).1).0,
        404
    );
}

#[test]
fn a_native_call_is_refused_for_a_key_without_the_group() {
    let mut e = edge(
        three_vendors(r#"["chat"]"#),
        "GET",
        "/v1/responses/resp_1",
        "",
    );
    e.host.set(Map::Request, "x-model-group", "gpt");
    e.on_request_headers(true);
    assert_eq!(reply(&e).0, 403);
}

#[test]
fn models_are_listed_in_anthropics_shape_for_its_clients() {
    let mut e = edge(config(""), "GET", "/v1/models", "");
    e.host.set(Map::Request, "anthropic-version", "2023-06-01");
    send(&mut e);
    let (status, body) = reply(&e);
    assert_eq!(status, 200);
    assert_eq!(body["data"][0]["type"], "model");
    assert_eq!(body["data"][0]["id"], "chat");
    assert_eq!(body["first_id"], "chat");
    assert_eq!(body["has_more"], false);
    assert!(body["data"][0]["created_at"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
}

#[test]
fn a_native_call_is_admitted_as_a_request() {
    let limits = r#","limits":{"rate":[{"key":"team-a","requests_per_minute":1}]}"#;
    let config = config(limits);
    let count = r#"{"model":"chat","messages":[{"role":"user","content":"count me"}]}"#;
    let mut first = edge(config.clone(), "POST", "/v1/messages/count_tokens", count);
    assert_eq!(send(&mut first), Flow::Continue);
    let mut second = edge(config, "POST", "/v1/messages/count_tokens", count);
    *second.host.shared.borrow_mut() = first.host.shared.borrow().clone();
    send(&mut second);
    let (status, body) = reply(&second);
    assert_eq!(
        (status, body["error"]["type"].as_str()),
        (429, Some("rate_limit_error"))
    );
}

/// What a token counter of `e`'s shared store holds in its window.
fn counter_used(e: &Edge<FakeHost>, metric: &str) -> u64 {
    let shared = e.host.shared.borrow();
    let (_, (value, _)) = shared
        .iter()
        .find(|(k, _)| String::from_utf8_lossy(k).contains(metric))
        .expect("the counter exists");
    u64::from_le_bytes(value[8..16].try_into().unwrap())
}

#[test]
fn a_budget_is_reserved_at_admission_and_settled_when_the_request_ends() {
    let limits = r#","limits":{"rate":[{"key":"team-a","tokens_per_hour":10000}],"reserve_output_tokens":100}"#;
    let mut e = edge(config(limits), "POST", "/v1/chat/completions", CHAT);
    assert_eq!(send(&mut e), Flow::Continue);
    let prompt = e.admission.chat.as_ref().unwrap().estimated_prompt_tokens;
    // Its prompt estimate and the default output reservation, held.
    assert_eq!(counter_used(&e, "tokens.total"), prompt + 100);
    answer_and_end(&mut e);
    // Settled: the reservation replaced by what was used.
    assert_eq!(counter_used(&e, "tokens.total"), 7);
}

#[test]
fn a_client_that_leaves_before_any_answer_is_charged_its_prompt() {
    let limits = r#","limits":{"rate":[{"key":"team-a","tokens_per_hour":10000}]}"#;
    let mut e = edge(config(limits), "POST", "/v1/chat/completions", CHAT);
    assert_eq!(send(&mut e), Flow::Continue);
    let prompt = e.admission.chat.as_ref().unwrap().estimated_prompt_tokens;
    assert!(prompt > 0);
    // No response: the client left, Envoy reset the attempt, the stream ends.
    e.on_log();
    assert_eq!(counter_used(&e, "tokens.total"), prompt);
    let line: serde_json::Value = serde_json::from_str(&e.host.prop("llm_log").unwrap()).unwrap();
    assert_eq!(line["prompt_tokens"], prompt);
    assert_eq!(line["usage_estimated"], true);
    assert_eq!(line["client_disconnected"], true);
    assert_eq!(
        line["attempt_usage"],
        serde_json::json!([{"provider": "an", "model": "claude-x", "status": 0, "prompt_tokens": prompt,
            "completion_tokens": 0, "cached_tokens": 0, "reasoning_tokens": 0, "usage_estimated": true,
            "cost_usd": null}])
    );
}

#[test]
fn a_request_refused_by_the_gateway_is_not_taken_for_one_the_client_left() {
    let mut e = edge(
        config(""),
        "POST",
        "/v1/chat/completions",
        r#"{"model":"chat"}"#,
    );
    send(&mut e);
    e.on_log();
    let line: serde_json::Value = serde_json::from_str(&e.host.prop("llm_log").unwrap()).unwrap();
    assert_eq!(line["status"], 400);
    assert_eq!(line["client_disconnected"], false);
    assert_eq!(line["attempt_usage"], serde_json::json!([]));
}

#[test]
fn an_error_answers_message_is_found_in_every_envelope() {
    use super::error_message;
    assert_eq!(
        error_message(br#"{"error":{"message":"Overloaded","code":"X"}}"#),
        "Overloaded"
    );
    assert_eq!(
        error_message(br#"{"type":"error","error":{"type":"overloaded_error","message":"Busy"}}"#),
        "Busy"
    );
    assert_eq!(
        error_message(br#"{"message":"Bedrock says"}"#),
        "Bedrock says"
    );
    assert_eq!(error_message(b"not json"), "");
}

// A proxy that fails a call: the client's key and routing never travel on,
// the request is not handed off half-made, and what only logs or counts is
// left out without changing the answer.

#[test]
fn a_request_whose_key_or_route_cannot_be_written_goes_no_further() {
    for call in [
        "headers request",
        "remove_header request authorization",
        "remove_header request x-llm-cluster",
        "set_header request x-llm-cluster",
        "set_property llm_handoff",
        "body request",
    ] {
        let mut e = edge(config(""), "POST", "/v1/chat/completions", CHAT);
        e.host.fail(call, None);
        assert_eq!(send(&mut e), Flow::Pause, "{call}");
        let (status, body) = reply(&e);
        assert_eq!(status, 502, "{call}");
        assert_eq!(body["error"]["code"], "UPSTREAM_ERROR", "{call}");
        assert!(!body.to_string().contains(KEY), "{call}: {body}");
        assert!(
            e.host.prop("llm_handoff").is_none(),
            "{call}: not handed off"
        );
    }
}

#[test]
fn a_refusal_the_proxy_cannot_send_resets_the_stream() {
    let mut e = edge(config(""), "POST", "/v1/chat/completions", CHAT);
    e.host.set(Map::Request, "authorization", "Bearer wrong");
    e.host.fail("send_response", None);
    assert_eq!(
        e.on_request_headers(false),
        Flow::Pause,
        "held, not passed on"
    );
    assert!(e.host.reply.borrow().is_none());
    assert!(e.host.reset.get());
    assert!(e.host.prop("llm_handoff").is_none());
}

#[test]
fn failed_metric_and_log_writes_leave_the_request_as_it_was() {
    let limits = r#","limits":{"rate":[{"key":"team-a","requests_per_minute":10}]}"#;
    let mut e = edge(config(limits), "POST", "/v1/chat/completions", CHAT);
    for call in ["count", "record", "gauge", "set_property llm_log"] {
        e.host.fail(call, None);
    }
    assert_eq!(send(&mut e), Flow::Continue);
    answer_and_end(&mut e);
    assert!(e.host.reply.borrow().is_none() && !e.host.reset.get());
    assert!(e.host.prop("llm_log").is_none());
    let calls = e.host.take_calls();
    for call in ["count llm_gateway.requests", "gauge", "record gen_ai"] {
        assert!(
            calls
                .iter()
                .any(|c| c.starts_with(call) && c.ends_with("!failed")),
            "{call}: {calls:?}"
        );
    }
}

#[test]
fn an_unreadable_rate_limit_counter_is_left_as_it_was() {
    let limits = r#","limits":{"rate":[{"key":"team-a","requests_per_minute":1}]}"#;
    let mut first = edge(config(limits), "POST", "/v1/chat/completions", CHAT);
    assert_eq!(send(&mut first), Flow::Continue);
    let counted = first.host.shared.borrow().clone();
    // A failed read is not an empty counter: nothing is written over it.
    let mut second = edge(config(limits), "POST", "/v1/chat/completions", CHAT);
    *second.host.shared.borrow_mut() = counted.clone();
    second.host.fail("shared_data", None);
    assert_eq!(send(&mut second), Flow::Continue, "admitted uncounted");
    assert_eq!(*second.host.shared.borrow(), counted);
}

#[test]
fn envoys_reply_that_cannot_be_rewritten_is_cut() {
    let mut e = edge(config(""), "POST", "/v1/chat/completions", CHAT);
    send(&mut e);
    e.host.set(Map::Response, ":status", "503");
    assert_eq!(e.on_response_headers(false), Flow::Continue);
    e.host.fail("set_body response", None);
    let raw = b"upstream connect error";
    *e.host.response_body.borrow_mut() = raw.to_vec();
    assert_eq!(e.on_response_body(raw.len(), true), Flow::Pause);
    assert!(e.host.reset.get());
}

/// Gemini's path names the group (no body model) and the key may be its
/// query's `key`, which is taken out of the path before anything reads it.
#[test]
fn a_gemini_request_is_routed_by_its_paths_model_and_keyed_by_its_query() {
    let body = r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#;
    let path = format!("/v1beta/models/chat:streamGenerateContent?alt=sse&key={KEY}");
    let mut e = edge(config(""), "POST", &path, body);
    e.host.set(Map::Request, "authorization", "");
    assert_eq!(send(&mut e), Flow::Continue);
    assert!(e.host.reply.borrow().is_none());
    assert_eq!(
        e.host.get(Map::Request, ":path").as_deref(),
        Some("/v1beta/models/chat:streamGenerateContent?alt=sse")
    );
    let handoff = handoff(&e);
    assert_eq!(
        (handoff.group.as_str(), handoff.api),
        ("chat", crate::model::Api::Gemini)
    );
    // A wrong key in the query: Gemini's 401.
    let mut e = edge(
        config(""),
        "POST",
        "/v1beta/models/chat:generateContent?key=wrong",
        body,
    );
    e.host.set(Map::Request, "authorization", "");
    send(&mut e);
    let (status, v) = reply(&e);
    assert_eq!(
        (status, v["error"]["status"].as_str()),
        (401, Some("UNAUTHENTICATED"))
    );
}

/// Group `chat` on a 4096-token window, compressing through group `sum`.
fn compressing_config() -> Rc<Config> {
    let hash = format!("{:x}", Sha256::digest(KEY.as_bytes()));
    let json = serde_json::json!({
        "providers": {"an": {"dialect": "anthropic", "api_key": "sk-ant"}},
        "model_groups": {
            "chat": {"candidates": [{"provider": "an", "model": "claude-x", "cluster": "anthropic_cluster",
                                     "capabilities": {"context_window": 4096}}],
                     "fitting": {"strategies": ["route", "compress", "trim"],
                                 "summariser": {"group": "sum", "max_block_bytes": 3000}}},
            "sum": {"candidates": [{"provider": "an", "model": "claude-s", "cluster": "anthropic_cluster"}]}
        },
        "self_calls": {"cluster": "llm_self", "max_in_flight": 1},
        "auth": {"enabled": true, "keys": [{"name": "team-a", "sha256": hash, "groups": ["*"]}]}
    });
    Rc::new(Config::parse(json.to_string().as_bytes(), |_| None).unwrap())
}

/// Group `big` (200K) falling back to `small` (4096), which compresses.
fn ladder_config() -> Rc<Config> {
    let hash = format!("{:x}", Sha256::digest(KEY.as_bytes()));
    let json = serde_json::json!({
        "providers": {"an": {"dialect": "anthropic", "api_key": "sk-ant"}},
        "model_groups": {
            "big": {"candidates": [{"provider": "an", "model": "claude-x", "cluster": "anthropic_cluster",
                                    "capabilities": {"context_window": 200_000}}],
                    "fallback": ["small"]},
            "small": {"candidates": [{"provider": "an", "model": "claude-small", "cluster": "anthropic_cluster",
                                      "capabilities": {"context_window": 4096}}],
                      "fitting": {"strategies": ["compress", "trim"],
                                  "summariser": {"group": "sum"}}},
            "sum": {"candidates": [{"provider": "an", "model": "claude-s", "cluster": "anthropic_cluster"}]}
        },
        "self_calls": {"cluster": "llm_self", "max_in_flight": 4},
        "auth": {"enabled": true, "keys": [{"name": "team-a", "sha256": hash, "groups": ["*"]}]}
    });
    Rc::new(Config::parse(json.to_string().as_bytes(), |_| None).unwrap())
}

#[test]
fn a_ladder_rung_that_compresses_gets_its_summaries_before_the_first_attempt() {
    // The top (200K) takes the request whole; its 4096-token fallback
    // compresses: the summaries are made before the first attempt, for it.
    let body = agent_history(20_000).replace(r#""model":"chat""#, r#""model":"big""#);
    let mut e = edge(ladder_config(), "POST", "/v1/chat/completions", &body);
    assert_eq!(send(&mut e), Flow::Pause, "waits for its summaries");
    assert_eq!(e.host.http_calls.borrow().len(), 2, "both old results");
    let (_, headers, _) = e.host.http_calls.borrow()[0].clone();
    assert!(
        headers.contains(&("x-model-group".into(), "sum".into())),
        "{headers:?}"
    );
    assert_eq!(e.on_callout(1, summary_answer("one")), Flow::Pause);
    assert_eq!(e.on_callout(2, summary_answer("two")), Flow::Continue);
    let summaries =
        crate::fitting::compress::decode(e.host.prop("llm_summaries").unwrap().as_bytes());
    assert_eq!(summaries.len(), 2);
}

/// A turn with two tool results of `size` bytes, then the latest question.
fn agent_history(size: usize) -> String {
    let result = "x".repeat(size);
    serde_json::json!({"model": "chat", "messages": [
        {"role": "user", "content": "read both"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": format!("one {result}")},
        {"role": "tool", "tool_call_id": "c2", "content": format!("two {result}")},
        {"role": "assistant", "content": "read"},
        {"role": "user", "content": "so?"}
    ]})
    .to_string()
}

fn summary_answer(text: &str) -> CalloutAnswer {
    let body = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]});
    CalloutAnswer::Answered {
        status: 200,
        headers: crate::headers::Headers::default(),
        body: body.to_string().into_bytes(),
    }
}

#[test]
fn old_blocks_are_summarised_once_before_the_first_attempt_when_a_window_needs_it() {
    let body = agent_history(20_000);
    let mut e = edge(compressing_config(), "POST", "/v1/chat/completions", &body);
    assert_eq!(send(&mut e), Flow::Pause, "waits for its summaries");
    assert!(e.host.prop("llm_handoff").is_some(), "routed first");
    // One call at a time (max_in_flight 1), the oldest block first, with
    // the caller's credential, to the summariser group through self_calls.
    let (cluster, headers, sent) = e.host.http_calls.borrow()[0].clone();
    assert_eq!(e.host.http_calls.borrow().len(), 1);
    assert_eq!(cluster, "llm_self");
    for (name, value) in [
        (":path", "/v1/chat/completions"),
        ("authorization", "Bearer team-a-secret"),
        ("x-model-group", "sum"),
    ] {
        assert!(
            headers.contains(&(name.into(), value.into())),
            "{headers:?}"
        );
    }
    let sent: serde_json::Value = serde_json::from_slice(&sent).unwrap();
    assert_eq!(sent["model"], "sum");
    assert_eq!(sent["max_tokens"], 256);
    let text = sent["messages"][1]["content"].as_str().unwrap();
    assert!(
        text.starts_with("one x") && text.ends_with("xxx") && text.contains("left out"),
        "its head and tail within max_block_bytes: {}",
        text.len()
    );
    assert!(text.len() <= 3000 + 60, "{}", text.len());
    assert_eq!(e.on_callout(1, summary_answer("the first")), Flow::Pause);
    assert_eq!(e.host.http_calls.borrow().len(), 2, "then the next");
    // The second fails: the request goes on with the first's summary.
    assert_eq!(e.on_callout(2, CalloutAnswer::Failed), Flow::Continue);
    let summaries =
        crate::fitting::compress::decode(e.host.prop("llm_summaries").unwrap().as_bytes());
    assert_eq!(summaries.len(), 1);
    let first = &summaries[0];
    assert_eq!(
        (first.message, first.part, first.text.as_str()),
        (2, 0, "the first")
    );
    let whole = format!("one {}", "x".repeat(20_000));
    assert_eq!(
        first.hash,
        crate::fitting::compress::digest(&whole),
        "the whole block's digest"
    );
    assert!(e
        .host
        .calls
        .borrow()
        .iter()
        .any(|c| c.contains("llm_gateway.context_fitting")
            && c.contains("outcome=summariser_failed")));

    // All calls end within timeout_ms of the first (2000 by default): a
    // later call gets what is left, none goes once it is spent.
    let mut e = edge(compressing_config(), "POST", "/v1/chat/completions", &body);
    assert_eq!(send(&mut e), Flow::Pause);
    e.host.advance(1.5);
    assert_eq!(e.on_callout(1, summary_answer("the first")), Flow::Pause);
    assert_eq!(*e.host.http_timeouts.borrow(), [2000, 500]);
    let mut e = edge(compressing_config(), "POST", "/v1/chat/completions", &body);
    assert_eq!(send(&mut e), Flow::Pause);
    e.host.advance(2.0);
    assert_eq!(e.on_callout(1, summary_answer("the first")), Flow::Continue);
    assert_eq!(
        e.host.http_calls.borrow().len(),
        1,
        "no time left for the second"
    );
    let summaries =
        crate::fitting::compress::decode(e.host.prop("llm_summaries").unwrap().as_bytes());
    assert_eq!(summaries.len(), 1, "the first's summary kept");

    // A request within every window: no call.
    let mut e = edge(
        compressing_config(),
        "POST",
        "/v1/chat/completions",
        &agent_history(3000),
    );
    assert_eq!(send(&mut e), Flow::Continue);
    assert!(e.host.http_calls.borrow().is_empty());
    assert!(e.host.prop("llm_summaries").is_none());
}
