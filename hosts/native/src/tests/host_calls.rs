//! `NativeHost` over the ABI: what the sessions read and write reaches
//! Envoy as they meant it.

use std::rc::Rc;

use llm_gateway_core::session::host::status::{BAD_ARGUMENT, INTERNAL_FAILURE};
use llm_gateway_core::session::host::{Host, HostCall, HostError};

use super::*;
use crate::host::NativeHost;

/// Headers are bytes both ways: one that is not UTF-8 passes as it came,
/// and the others with it, unchanged.
#[test]
fn headers_that_are_not_utf8_are_read_and_passed_as_bytes() {
    let (edge_config, _upstream) = configs();
    let length = CHAT.len().to_string();
    let client: &[(&str, &[u8])] = &[
        (":method", b"POST"),
        (":path", b"/v1/chat/completions"),
        ("content-type", b"application/json"),
        ("content-length", length.as_bytes()),
        ("x-request-id", b"req-1"),
        ("x-trace", b"\xff\xfe caf\xe9"),
        ("accept-language", "café, ñ".as_bytes()),
        ("x-trace", b"second \x80"),
    ];
    let edge = Filter::new(&edge_config, Stream::request(client));
    assert_eq!(edge.request_headers(false), abi::STOP);
    assert_eq!(edge.request_body(&[CHAT.as_bytes()], true), abi::CONTINUE);
    assert!(edge.stream.replies().is_empty() && edge.stream.resets().is_empty());
    let mut passed = edge.stream.headers(REQUEST);
    passed.retain(|(n, _)| n != b"x-llm-cluster");
    let sent: Vec<(Vec<u8>, Vec<u8>)> = client
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.to_vec()))
        .collect();
    assert_eq!(passed, sent);
    edge.destroy();

    // One the gateway reads as text is refused by name, not guessed at.
    let edge = Filter::new(&edge_config, post("/v1/chat/completions", CHAT.len()));
    edge.stream.copy_headers(
        REQUEST,
        with_header(edge.stream, "x-model-group", b"ch\xffat"),
    );
    assert_eq!(edge.request_headers(false), abi::STOP);
    let replies = edge.stream.replies();
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].status, 400);
    let error = json(&replies[0].body);
    assert_eq!(error["error"]["param"], "x-model-group", "{error}");
    edge.destroy();
}

fn with_header(stream: Stream, name: &str, value: &[u8]) -> crate::fake_envoy::HeaderList {
    let mut headers = stream.headers(REQUEST);
    headers.push((name.as_bytes().to_vec(), value.to_vec()));
    headers
}

/// The host of a filter on `stream`, as `filter_new` makes it.
fn host_of(config: &FakeConfig, stream: Stream) -> NativeHost {
    // SAFETY: the config is live (the test holds it).
    let config = unsafe { crate::filter_config(config.module) }
        .expect("a config")
        .clone();
    NativeHost {
        stream: Rc::new(crate::host::Stream::new(stream.0, true)),
        config,
    }
}

#[test]
fn filter_state_is_written_once_and_span_attributes_keep_the_last_value() {
    let (edge_config, _upstream) = configs();
    let stream = post("/v1/chat/completions", 0);
    let host = host_of(&edge_config, stream);
    assert_eq!(host.set_property(&["llm_x"], Some(b"first")), Ok(()));
    assert_eq!(host.property(&["llm_x"]), Ok(Some(b"first".to_vec())));
    // The same value again is no write; another is the session's error.
    assert_eq!(host.set_property(&["llm_x"], Some(b"first")), Ok(()));
    assert_eq!(
        host.set_property(&["llm_x"], Some(b"second")),
        Err(HostError::new(HostCall::SetProperty, BAD_ARGUMENT))
    );
    assert_eq!(stream.filter_state("wasm.llm_x"), Some(b"first".to_vec()));
    assert_eq!(
        stream.filter_state_writes("wasm.llm_x"),
        [(b"first".to_vec(), true)],
        "no write Envoy would refuse"
    );

    // Span attributes: dynamic metadata, the last write kept.
    for value in ["a/m:503", "a/m:503,b/m:200"] {
        assert_eq!(
            host.set_span_attribute("llm_route", Some(value.as_bytes())),
            Ok(())
        );
    }
    assert_eq!(
        stream
            .dynamic_metadata("llm_gateway", "llm_route")
            .as_deref(),
        Some("a/m:503,b/m:200")
    );
    assert_eq!(stream.filter_state("wasm.llm_route"), None);
}

/// The edge's handoff is already set (by another filter): its write is
/// refused, which the session answers (a 502), never a panic.
#[test]
fn a_refused_filter_state_write_is_the_sessions_error() {
    let (edge_config, _upstream) = configs();
    let edge = Filter::new(&edge_config, post("/v1/chat/completions", CHAT.len()));
    edge.stream
        .set_filter_state("wasm.llm_handoff", b"someone else's");
    assert_eq!(edge.request_headers(false), abi::STOP);
    assert_eq!(edge.request_body(&[CHAT.as_bytes()], true), abi::STOP);
    let replies = edge.stream.replies();
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].status, 502);
    assert!(edge.stream.resets().is_empty());
    assert_eq!(
        edge.stream.filter_state("wasm.llm_handoff"),
        Some(b"someone else's".to_vec())
    );
    edge.complete();
    assert_eq!(log_line(&edge)["status"], 502);
    edge.destroy();
}

/// A request's callout is the filter's own (answered to it, and cancelled
/// with it), with the pseudo-headers Envoy requires; one without them is
/// the session's error.
#[test]
fn a_sessions_callout_is_its_filters_own() {
    let (edge_config, _upstream) = configs();
    let stream = post("/v1/embeddings", 0);
    let host = host_of(&edge_config, stream);
    let headers: &[(&str, &[u8])] = &[
        (":method", b"POST"),
        (":path", b"/v1/embeddings"),
        (":authority", b"gateway"),
        ("x-part", b"\x01 2"),
    ];
    let first = host.http_call("self", headers, b"{}", 1500).unwrap();
    let second = host.http_call("self", headers, b"", 1500).unwrap();
    assert_ne!(first, second);
    let sent = stream.callouts();
    assert_eq!(sent.len(), 2);
    assert_eq!(u64::from(first), sent[0].id);
    assert_eq!(sent[0].cluster, b"self");
    assert_eq!(sent[0].headers[3], (b"x-part".to_vec(), b"\x01 2".to_vec()));
    assert_eq!(
        (sent[0].body.as_slice(), sent[0].timeout_ms),
        (&b"{}"[..], 1500)
    );
    assert_eq!(
        host.http_call("self", &headers[1..], b"", 1500),
        Err(HostError::new(HostCall::HttpCall, INTERNAL_FAILURE))
    );
    assert_eq!(stream.callouts().len(), 2);
}

#[test]
fn entropy_comes_from_the_os() {
    let (edge_config, _upstream) = configs();
    let host = host_of(&edge_config, post("/v1/embeddings", 0));
    let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
    host.random(&mut a).unwrap();
    host.random(&mut b).unwrap();
    assert_ne!(a, b);
    assert_ne!(a, [0u8; 32]);
}

/// A body read is any range of the chunks Envoy holds, each byte copied
/// once; a replacement of part of it is spliced in, of all of it written.
#[test]
fn body_ranges_are_read_across_chunks_and_replaced_in_place() {
    use llm_gateway_core::session::host::Buffer;
    let (edge_config, _upstream) = configs();
    let stream = post("/v1/chat/completions", 10);
    let chunks: &[&[u8]] = &[b"abc", b"", b"defgh", b"ij"];
    assert_eq!(stream.body_hook(REQUEST, chunks, || abi::STOP), abi::STOP);
    let host = host_of(&edge_config, stream);
    let read = |start, size| host.body(Buffer::Request, start, size).unwrap();
    assert_eq!(read(0, usize::MAX), b"abcdefghij");
    assert_eq!(read(2, 4), b"cdef");
    assert_eq!(read(3, 5), b"defgh");
    assert_eq!(read(5, 100), b"fghij");
    assert_eq!(read(9, usize::MAX), b"j");
    assert_eq!(read(10, 5), b"");
    assert_eq!(read(11, 1), b"");
    assert_eq!(read(4, 0), b"");
    host.set_body(Buffer::Request, 3, 2, b"XYZ").unwrap();
    assert_eq!(stream.buffered_body(REQUEST), b"abcXYZfghij");
    assert_eq!(crate::body::body_size_of(&host.stream, 0), 11);
    host.set_body(Buffer::Request, 0, usize::MAX, b"new")
        .unwrap();
    assert_eq!(stream.buffered_body(REQUEST), b"new");
    assert_eq!(read(1, usize::MAX), b"ew");
}
