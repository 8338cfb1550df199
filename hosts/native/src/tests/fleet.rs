//! A callout made while the response waits (the fleet's store taking a
//! stored response's entry): the edge holds the answer's end, and Envoy
//! resumes encoding, with what it buffered, once the callout is answered.

use super::*;
use crate::abi::{EnvoyBuffer, EnvoyHeader};

/// The gateway's configuration with the fleet's store.
const FLEET: &str = r#"{
    "providers": {"an": {"dialect": "anthropic", "api_key": "sk-ant-secret", "default_max_tokens": 100}},
    "model_groups": {"chat": {"candidates": [{"provider": "an", "model": "claude-x", "cluster": "c"}]}},
    "auth": {"enabled": false},
    "shared_state": {"service": {"cluster": "llm_state", "timeout_ms": 100}}
}"#;

const RESPONSES: &str = r#"{"model":"chat","input":"hi"}"#;

/// The filter's callout `id` answered with `status` and no body.
fn answer_callout(filter: &Filter, id: u64, status: &[u8]) {
    let name = b":status";
    let headers = [EnvoyHeader {
        key_ptr: name.as_ptr(),
        key_length: name.len(),
        value_ptr: status.as_ptr(),
        value_length: status.len(),
    }];
    let chunks: [EnvoyBuffer; 0] = [];
    // SAFETY: the filter is live; the arrays hold what the counts say.
    unsafe {
        crate::callouts::envoy_dynamic_module_on_http_filter_http_callout_done(
            filter.stream.0,
            filter.module,
            id,
            abi::CALLOUT_SUCCESS,
            headers.as_ptr(),
            headers.len(),
            chunks.as_ptr(),
            chunks.len(),
        )
    };
}

#[test]
fn a_stored_responses_end_waits_for_the_fleets_store_then_goes_on() {
    let edge_config = FakeConfig::new(crate::EDGE_ROLE, FLEET);
    let upstream_config = FakeConfig::new(crate::UPSTREAM_ROLE, FLEET);
    let edge = Filter::new(&edge_config, post("/v1/responses", RESPONSES.len()));
    assert_eq!(edge.request_headers(false), abi::STOP);
    assert_eq!(
        edge.request_body(&[RESPONSES.as_bytes()], true),
        abi::CONTINUE,
        "nothing stored to fetch: no callout"
    );
    assert!(edge.stream.callouts().is_empty());
    let attempt = attempt_sent(&upstream_config, &edge);
    vendor_answers_json(&attempt);
    assert_eq!(
        attempt.response_body(&[ANSWER.as_bytes()], true),
        abi::CONTINUE
    );
    let answer = attempt.stream.forwarded_body(1);
    assert!(json(&answer)["id"].as_str().unwrap().starts_with("resp_gw"));

    // The edge stores it in the fleet's store first: the end is held.
    edge.stream
        .copy_headers(RESPONSE, attempt.stream.headers(RESPONSE));
    assert_eq!(edge.response_headers(false), abi::CONTINUE);
    assert_eq!(edge.response_body(&[&answer], true), abi::STOP);
    let [put] = edge.stream.callouts().try_into().unwrap();
    assert_eq!(put.cluster, b"llm_state");
    assert!(put
        .headers
        .iter()
        .any(|(k, v)| k == b":method" && v == b"PUT"));
    assert!(edge.stream.forwarded_body(1).is_empty());

    // Stored: the response goes on, with what Envoy held.
    answer_callout(&edge, put.id, b"204");
    assert_eq!(edge.stream.encoding_continued(), 1);
    assert_eq!(edge.stream.decoding_continued(), 0);
    assert_eq!(edge.stream.forwarded_body(1), answer);
    edge.complete();
    attempt.destroy();
    edge.destroy();
}
