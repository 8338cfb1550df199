//! An attempt paused for a Google access token (Vertex AI), woken on its
//! worker: the config's scheduler, the token callout, the filter's
//! scheduler, decoding resumed.

use super::*;
use crate::abi::{EnvoyBuffer, EnvoyHeader};
use crate::fake_envoy::{callouts, config_schedulers_alive};

/// Claude on Vertex AI, its tokens from the metadata server (no key).
const VERTEX: &str = r#"{
    "providers": {"vx": {"dialect": "vertex_anthropic", "project": "p", "location": "global",
        "credentials": "metadata_server", "token_cluster": "md", "token_wait_ms": 5000}},
    "model_groups": {"chat": {"candidates": [{"provider": "vx", "model": "claude-x@1", "cluster": "c"}]}},
    "auth": {"enabled": false}
}"#;

/// Envoy runs the config's scheduled event (the ticker's) on the main thread.
fn tick(config: &FakeConfig) {
    // SAFETY: the config is live.
    unsafe {
        crate::envoy_dynamic_module_on_http_filter_config_scheduled(config.envoy, config.module, 0)
    };
}

/// The callout `id` answered 200 with `body`.
fn answer_callout(config: &FakeConfig, id: u64, body: &[u8]) {
    let (name, status) = (b":status", b"200");
    let headers = [EnvoyHeader {
        key_ptr: name.as_ptr(),
        key_length: name.len(),
        value_ptr: status.as_ptr(),
        value_length: status.len(),
    }];
    let chunks = [EnvoyBuffer {
        ptr: body.as_ptr(),
        length: body.len(),
    }];
    // SAFETY: the config is live; the arrays hold what the counts say.
    unsafe {
        crate::envoy_dynamic_module_on_http_filter_config_http_callout_done(
            config.envoy,
            config.module,
            id,
            abi::CALLOUT_SUCCESS,
            headers.as_ptr(),
            headers.len(),
            chunks.as_ptr(),
            chunks.len(),
        )
    };
}

/// Envoy runs a filter's scheduled event on its worker.
fn run_scheduled(filter: &Filter, event: u64) {
    // SAFETY: the filter is live.
    unsafe {
        crate::wake::envoy_dynamic_module_on_http_filter_scheduled(
            filter.stream.0,
            filter.module,
            event,
        )
    };
}

#[test]
fn an_attempt_waiting_for_a_token_is_woken_on_its_worker_and_resumed() {
    let edge_config = FakeConfig::new(crate::EDGE_ROLE, VERTEX);
    let upstream_config = FakeConfig::new(crate::UPSTREAM_ROLE, VERTEX);
    assert_eq!(config_schedulers_alive(), 1, "the upstream config's ticker");
    let edge = routed_chat(&edge_config);
    let attempt = Filter::new(
        &upstream_config,
        Stream::attempt_of(edge.stream, &[("llm", "provider", "vx")]),
    );
    assert_eq!(attempt.request_headers(false), abi::STOP);
    // No token yet: paused (buffered), nothing sent, a scheduler to wake it.
    assert_eq!(attempt.request_body(&[CHAT.as_bytes()], true), abi::STOP);
    assert_eq!(attempt.stream.forwarded_body(0), b"");
    assert_eq!(attempt.stream.scheduled_events(), (vec![], 1));

    // The tick asks the metadata server and wakes the waiting attempt,
    // which still has no token.
    tick(&upstream_config);
    let asked = callouts();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0, b"md");
    let (events, alive) = attempt.stream.scheduled_events();
    assert_eq!((events.len(), alive), (1, 1));
    run_scheduled(&attempt, events[0]);
    assert_eq!(attempt.stream.decoding_continued(), 0);

    // The token arrives: the attempt is woken, translated, resumed.
    answer_callout(
        &upstream_config,
        1,
        br#"{"access_token":"ya29.native","expires_in":3600,"token_type":"Bearer"}"#,
    );
    let (events, _) = attempt.stream.scheduled_events();
    assert_eq!(events.len(), 1);
    run_scheduled(&attempt, events[0]);
    assert_eq!(attempt.stream.decoding_continued(), 1);
    assert_eq!(attempt.stream.scheduled_events(), (vec![], 0), "deleted");
    assert_eq!(
        request_header(&attempt, "authorization").as_deref(),
        Some("Bearer ya29.native")
    );
    let sent = json(&attempt.stream.forwarded_body(0));
    assert_eq!(sent["messages"][0]["content"][0]["text"], "hi");
    assert!(attempt.stream.replies().is_empty());

    attempt.destroy();
    edge.destroy();
    drop(upstream_config);
    assert_eq!(config_schedulers_alive(), 0, "the ticker stopped");
}

/// A reload (a new upstream config) whose provider has other credentials
/// drops the old credentials' token at once: an attempt still on the old
/// config (Envoy keeps it for streams in flight) waits rather than send it.
#[test]
fn a_config_with_other_credentials_drops_the_old_token() {
    // A provider of this test's own: the shared store is the process's.
    let vertex = |cluster: &str| {
        VERTEX
            .replace(r#""vx""#, r#""vr""#)
            .replace(r#""md""#, &format!(r#""{cluster}""#))
    };
    let edge_config = FakeConfig::new(crate::EDGE_ROLE, &vertex("md-old"));
    let old = FakeConfig::new(crate::UPSTREAM_ROLE, &vertex("md-old"));
    tick(&old);
    answer_callout(
        &old,
        1,
        br#"{"access_token":"ya29.old","expires_in":3600,"token_type":"Bearer"}"#,
    );
    let attempt = |edge: &Filter| {
        let attempt = Filter::new(
            &old,
            Stream::attempt_of(edge.stream, &[("llm", "provider", "vr")]),
        );
        assert_eq!(attempt.request_headers(false), abi::STOP);
        let flow = attempt.request_body(&[CHAT.as_bytes()], true);
        (attempt, flow)
    };
    let edge = routed_chat(&edge_config);
    let (sent, flow) = attempt(&edge);
    assert_eq!(flow, abi::CONTINUE);
    assert_eq!(
        request_header(&sent, "authorization").as_deref(),
        Some("Bearer ya29.old")
    );
    sent.destroy();
    edge.destroy();

    // The same credentials loaded again: the token stays.
    drop(FakeConfig::new(crate::UPSTREAM_ROLE, &vertex("md-old")));
    let edge = routed_chat(&edge_config);
    let (kept, flow) = attempt(&edge);
    assert_eq!(flow, abi::CONTINUE);
    kept.destroy();
    edge.destroy();

    // Another token cluster (the credentials' fingerprint changes): gone.
    let new = FakeConfig::new(crate::UPSTREAM_ROLE, &vertex("md-new"));
    let edge = routed_chat(&edge_config);
    let (waiting, flow) = attempt(&edge);
    assert_eq!(flow, abi::STOP, "no token to send: it waits");
    assert_eq!(waiting.stream.forwarded_body(0), b"");
    waiting.destroy();
    edge.destroy();
    drop(new);
    drop(old);
}
