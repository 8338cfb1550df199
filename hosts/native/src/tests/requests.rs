//! Requests through both roles on one worker, as Envoy runs them: the edge
//! filter, then the router's attempts, the response back through both.

use super::*;
use crate::fake_envoy::{self, defined, log_lines, recorded};
use crate::metrics::{Kind, CATALOGUE};

#[test]
fn a_translated_request_goes_through_both_roles_on_one_worker() {
    let (edge_config, upstream_config) = configs();
    // Each config defined the whole catalogue while Envoy created it.
    assert_eq!(defined().len(), 2 * CATALOGUE.len());
    let lines = log_lines();
    for role in ["llm_edge", "llm_upstream"] {
        let configured = format!("llm gateway ({role}, native): configured 1 providers");
        assert!(
            lines.iter().any(|(_, line)| line.starts_with(&configured)),
            "{lines:?}"
        );
    }

    // The edge routes: the cluster header, the route chosen again, the
    // handoff; the client's body goes on as it came.
    let edge = routed_chat(&edge_config);
    assert_eq!(request_header(&edge, "x-llm-cluster").as_deref(), Some("c"));
    assert_eq!(edge.stream.route_cache_clears(), 1);
    assert!(edge.stream.filter_state("wasm.llm_handoff").is_some());
    assert_eq!(edge.stream.forwarded_body(0), CHAT.as_bytes());

    // The attempt sends Anthropic's request in place of the client's.
    let attempt = attempt_sent(&upstream_config, &edge);
    let sent = attempt.stream.forwarded_body(0);
    let vendor = json(&sent);
    assert_eq!(vendor["model"], "claude-x");
    assert_eq!(vendor["max_tokens"], 100);
    assert_eq!(vendor["messages"][0]["content"][0]["text"], "hi");
    assert_eq!(
        request_header(&attempt, ":path").as_deref(),
        Some("/v1/messages")
    );
    assert_eq!(
        request_header(&attempt, "x-api-key").as_deref(),
        Some("sk-ant-secret")
    );
    assert_eq!(
        request_header(&attempt, "content-length"),
        Some(sent.len().to_string())
    );
    assert_eq!(
        attempt.stream.route_cache_clears(),
        0,
        "only the edge routes"
    );

    // Anthropic answers; the client gets OpenAI's completion.
    vendor_answers_json(&attempt);
    assert_eq!(
        attempt.response_body(&[ANSWER.as_bytes()], true),
        abi::CONTINUE
    );
    let answer = json(&attempt.stream.forwarded_body(1));
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["choices"][0]["message"]["content"], "Hello");
    assert_eq!(answer["usage"]["total_tokens"], 7);
    relay_response(&attempt, &edge);
    assert_eq!(
        edge.stream.forwarded_body(1),
        attempt.stream.forwarded_body(1)
    );
    assert_eq!(
        edge.stream.header(RESPONSE, "x-request-id").as_deref(),
        Some("req-1")
    );
    assert_eq!(
        edge.stream.header(RESPONSE, "x-llm-provider").as_deref(),
        Some("an")
    );

    attempt.complete();
    attempt.destroy();
    edge.complete();
    // The attempt's record came back in memory, not through filter state.
    assert_eq!(edge.stream.filter_state("wasm.llm_attempt.1"), None);
    assert_eq!(edge.stream.filter_state("wasm.llm_route"), None);
    let log = log_line(&edge);
    assert_eq!(log["route"], serde_json::json!(["an/claude-x:200"]));
    assert_eq!(log["attempts"], 1);
    assert_eq!(log["status"], 200);
    assert_eq!(log["provider"], "an");
    assert_eq!(log["surface"], "openai_chat");
    let requests: Vec<_> = recorded()
        .into_iter()
        .filter(|r| r.name == "llm_gateway.requests")
        .collect();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].kind, Kind::Counter);
    let label = |name: &str| {
        requests[0]
            .labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(label("status").as_deref(), Some("200"));
    assert_eq!(label("provider").as_deref(), Some("an"));
    assert_eq!(label("code").as_deref(), Some("none"));
    // The request's span attributes, from the edge at the response's end.
    assert_eq!(
        edge.stream
            .dynamic_metadata("llm_gateway", "llm_route")
            .as_deref(),
        Some("an/claude-x:200")
    );
    edge.destroy();
}

#[test]
fn a_body_in_several_chunks_is_read_whole_and_replaced_whole() {
    let (edge_config, upstream_config) = configs();
    let edge = Filter::new(&edge_config, post("/v1/chat/completions", CHAT.len()));
    assert_eq!(edge.request_headers(false), abi::STOP);
    // Three body hooks, each chunk in two buffers: Envoy buffers the first
    // two, the last comes with the end of the stream.
    let body = CHAT.as_bytes();
    let (a, rest) = body.split_at(10);
    let (b, rest) = rest.split_at(7);
    let (c, rest) = rest.split_at(20);
    let (d, rest) = rest.split_at(5);
    let (e, f) = rest.split_at(3);
    assert_eq!(edge.request_body(&[a, b], false), abi::STOP);
    assert_eq!(edge.request_body(&[c, d], false), abi::STOP);
    assert_eq!(edge.stream.buffered_body(0).len(), 42);
    assert_eq!(edge.request_body(&[e, f], true), abi::CONTINUE);
    assert_eq!(edge.stream.forwarded_body(0), body, "read, not changed");
    assert_eq!(request_header(&edge, "x-llm-cluster").as_deref(), Some("c"));

    // The attempt reads the client's chunks whole and replaces them all.
    let attempt = Filter::new(&upstream_config, Stream::attempt_of(edge.stream, ENDPOINT));
    assert_eq!(attempt.request_headers(false), abi::STOP);
    assert_eq!(attempt.request_body(&[a, b, c], false), abi::STOP);
    assert_eq!(attempt.request_body(&[d, e, f], true), abi::CONTINUE);
    assert_eq!(attempt.stream.buffered_body(0), b"");
    let sent = attempt.stream.forwarded_body(0);
    assert_eq!(json(&sent)["messages"][0]["content"][0]["text"], "hi");
    assert_eq!(
        request_header(&attempt, "content-length"),
        Some(sent.len().to_string())
    );

    // The vendor's answer in chunks: buffered, then translated whole.
    vendor_answers_json(&attempt);
    let answer = ANSWER.as_bytes();
    let (a, rest) = answer.split_at(30);
    let (b, rest) = rest.split_at(50);
    let (c, d) = rest.split_at(40);
    assert_eq!(attempt.response_body(&[a], false), abi::STOP);
    assert_eq!(attempt.response_body(&[b, c], false), abi::STOP);
    assert_eq!(attempt.response_body(&[d], true), abi::CONTINUE);
    assert_eq!(attempt.stream.buffered_body(1), b"");
    let translated = json(&attempt.stream.forwarded_body(1));
    assert_eq!(translated["choices"][0]["message"]["content"], "Hello");
    attempt.destroy();
    edge.destroy();
}

/// A body hook asks Envoy for the body's size once: the size the session
/// is told, its read and its replacement share the answer (the fake Envoy
/// counts `get_body_size`; the body is one part in each hook here).
#[test]
fn a_body_hook_asks_envoy_for_the_body_size_once() {
    let (edge_config, upstream_config) = configs();
    let edge = routed_chat(&edge_config);
    assert_eq!(edge.stream.body_size_asks(), 1, "told, then read");
    let attempt = attempt_sent(&upstream_config, &edge);
    assert_eq!(attempt.stream.body_size_asks(), 1, "told, then replaced");
    // Replaced, the body is asked of Envoy again: the response's hook.
    vendor_answers_json(&attempt);
    assert_eq!(
        attempt.response_body(&[ANSWER.as_bytes()], true),
        abi::CONTINUE
    );
    assert_eq!(attempt.stream.body_size_asks(), 2, "its own hook, once");
    let translated = json(&attempt.stream.forwarded_body(1));
    assert_eq!(translated["choices"][0]["message"]["content"], "Hello");
    attempt.destroy();
    edge.destroy();
}

/// Envoy gave up on an attempt (a per-try timeout) and answers itself;
/// it destroys that attempt's filter only after the response went out.
#[test]
fn the_edge_ends_its_live_attempts_when_the_response_ends() {
    let (edge_config, upstream_config) = configs();
    let edge = routed_chat(&edge_config);
    let attempt = attempt_sent(&upstream_config, &edge);

    edge.stream.set_headers(
        RESPONSE,
        &[(":status", b"504"), ("content-type", b"text/plain")],
    );
    assert_eq!(edge.response_headers(false), abi::CONTINUE);
    assert_eq!(
        edge.response_body(&[b"upstream request timeout"], true),
        abi::CONTINUE
    );
    // Ended before the edge read its attempts at the response's end: the
    // route its span shows has the attempt, reset.
    assert_eq!(
        edge.stream
            .dynamic_metadata("llm_gateway", "llm_route")
            .as_deref(),
        Some("an/claude-x:reset")
    );
    let error = json(&edge.stream.forwarded_body(1));
    assert_eq!(error["error"]["code"], "UPSTREAM_TIMEOUT", "{error}");

    edge.complete();
    let log = log_line(&edge);
    assert_eq!(log["route"], serde_json::json!(["an/claude-x:reset"]));
    assert_eq!(log["attempts"], 1);
    // Destroyed late: its session ended already, nothing more is recorded.
    let before = recorded().len();
    attempt.destroy();
    assert_eq!(recorded().len(), before);
    let attempts: Vec<_> = recorded()
        .into_iter()
        .filter(|r| r.name == "llm_gateway.attempts")
        .collect();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert!(attempts[0]
        .labels
        .contains(&("status".to_owned(), "reset".to_owned())));
    edge.destroy();
    assert_eq!(
        fake_envoy::log_lines()
            .iter()
            .filter(|(l, _)| *l >= abi::LOG_ERROR)
            .count(),
        0
    );
}
