//! What a failing session leaves Envoy with: a panic is caught and the
//! stream reset; a local reply goes once, after the session's hook.

use super::*;

/// Envoy reports more request headers than memory can hold: making room
/// for them panics inside the session's hook, in the native host.
#[test]
fn a_panic_in_a_session_resets_its_stream_and_the_worker_goes_on() {
    let (edge_config, upstream_config) = configs();
    let edge = Filter::new(&edge_config, post("/v1/chat/completions", CHAT.len()));
    edge.stream.report_absurd_header_count();
    assert_eq!(edge.request_headers(false), abi::STOP);
    assert_eq!(
        edge.stream.resets(),
        [(abi::RESET_LOCAL, b"llm_gateway_reset".to_vec())]
    );
    assert!(edge.stream.replies().is_empty());
    // Nothing more of that session runs.
    assert_eq!(edge.request_body(&[CHAT.as_bytes()], true), abi::CONTINUE);
    edge.complete();
    assert_eq!(edge.stream.resets().len(), 1);
    assert!(edge.stream.filter_state_writes("wasm.llm_log").is_empty());
    edge.destroy();

    // The next request on this worker goes through.
    let edge = routed_chat(&edge_config);
    let attempt = attempt_sent(&upstream_config, &edge);
    assert_eq!(json(&attempt.stream.forwarded_body(0))["model"], "claude-x");
    attempt.destroy();
    edge.complete();
    assert_eq!(
        log_line(&edge)["route"],
        serde_json::json!(["an/claude-x:reset"])
    );
    edge.destroy();
}

#[test]
fn a_local_reply_goes_once_after_the_sessions_hook_returned() {
    let (edge_config, upstream_config) = configs();
    // The edge answers the model list itself.
    let edge = Filter::new(
        &edge_config,
        Stream::request(&[(":method", b"GET"), (":path", b"/v1/models")]),
    );
    assert_eq!(edge.request_headers(true), abi::STOP);
    let replies = edge.stream.replies();
    assert_eq!(replies.len(), 1);
    let reply = &replies[0];
    assert!(!reply.sent_inside_session, "sent from inside the session");
    assert_eq!(reply.status, 200);
    assert_eq!(json(&reply.body)["data"][0]["id"], "chat");
    assert!(reply
        .headers
        .contains(&(b"content-type".to_vec(), b"application/json".to_vec())));
    // Envoy ran the reply through the filter's response hooks at once.
    assert_eq!(edge.stream.forwarded_body(1), reply.body);
    let stream = edge.stream;
    edge.complete();
    edge.destroy();
    assert_eq!(stream.replies().len(), 1, "once");

    // An attempt on an endpoint naming no provider of the configuration
    // answers the client's API's error.
    let edge = routed_chat(&edge_config);
    let attempt = Filter::new(
        &upstream_config,
        Stream::attempt_of(edge.stream, &[("llm", "provider", "nobody")]),
    );
    assert_eq!(attempt.request_headers(false), abi::STOP);
    let replies = attempt.stream.replies();
    assert_eq!(replies.len(), 1);
    assert!(!replies[0].sent_inside_session);
    assert_eq!(replies[0].status, 502);
    assert!(String::from_utf8_lossy(&replies[0].body).contains("nobody"));
    assert_eq!(
        attempt.request_body(&[CHAT.as_bytes()], true),
        abi::CONTINUE
    );
    let stream = attempt.stream;
    attempt.complete();
    attempt.destroy();
    assert_eq!(stream.replies().len(), 1, "once");
    edge.complete();
    edge.destroy();
}
