//! The checks every dialect must pass, run over [`DialectKind::ALL`] from
//! one place: a new dialect is covered once it has fixtures in
//! [`fixtures`], whose `match` has no wildcard, so it does not compile
//! until it has them. Each dialect's own tests keep what only it does.

use serde_json::Value;

use super::{dialect, fallback_message, incomplete_stream, run_stream, DialectKind};
use crate::error::ErrorCode;
use crate::formats::eventstream::encode as frame;
use crate::model::response::Origin;

/// One dialect's vendor samples.
struct Fixtures {
    /// A whole stream with text, tool calls and usage, as its events.
    stream: Vec<Vec<u8>>,
    /// A stream the vendor fails, and the unified code the client gets.
    stream_error: (Vec<u8>, ErrorCode),
    /// A vendor error answer (a rate limit): its status, its body and its message.
    error: (u16, &'static [u8], &'static str),
}

fn fixtures(kind: DialectKind) -> Fixtures {
    match kind {
        DialectKind::Openai => Fixtures {
            stream: sse(super::openai::tests::STREAM),
            stream_error: (
                b"data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n".to_vec(),
                ErrorCode::UpstreamError,
            ),
            error: (
                429,
                br#"{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}"#,
                "slow down",
            ),
        },
        DialectKind::Azure => Fixtures {
            stream: sse(&super::azure::tests::stream(
                r#"[{"index":0,"delta":{},"finish_reason":"stop"}]"#,
            )),
            stream_error: (
                b"data: {\"error\":{\"code\":\"429\",\"message\":\"Rate limit is exceeded.\"}}\n\n"
                    .to_vec(),
                ErrorCode::UpstreamRateLimit,
            ),
            error: (
                429,
                br#"{"error":{"code":"429","message":"Requests have exceeded token rate limit. Please retry after 7 seconds."}}"#,
                "Requests have exceeded token rate limit. Please retry after 7 seconds.",
            ),
        },
        DialectKind::Anthropic | DialectKind::VertexAnthropic => Fixtures {
            stream: sse(super::anthropic::tests::TOOL_STREAM),
            stream_error: (
                b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":1}}}\n\n\
                  event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
                    .to_vec(),
                ErrorCode::UpstreamBusy,
            ),
            error: (
                429,
                br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
                "slow down",
            ),
        },
        DialectKind::Gemini | DialectKind::VertexGemini => Fixtures {
            stream: sse(super::gemini::tests::TOOL_STREAM),
            stream_error: (
                b"data: {\"error\": {\"code\": 503,\"message\": \"The model is overloaded.\",\"status\": \"UNAVAILABLE\"}}\r\n\r\n".to_vec(),
                ErrorCode::UpstreamBusy,
            ),
            error: (
                429,
                br#"{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED"}}"#,
                "You exceeded your current quota.",
            ),
        },
        DialectKind::Bedrock => Fixtures {
            stream: frames(&super::bedrock::tests::tool_stream()),
            stream_error: (
                frame(
                    &[
                        (":exception-type", "throttlingException"),
                        (":content-type", "application/json"),
                        (":message-type", "exception"),
                    ],
                    br#"{"message":"Too many tokens, please wait before trying again."}"#,
                ),
                ErrorCode::UpstreamRateLimit,
            ),
            error: (
                429,
                br#"{"__type":"com.amazon.bedrock#ThrottlingException","message":"Too many requests."}"#,
                "Too many requests.",
            ),
        },
        DialectKind::Dashscope => Fixtures {
            stream: sse(super::dashscope::tests::TOOL_STREAM),
            stream_error: (
                b"id:1\nevent:error\n:HTTP_STATUS/429\ndata:{\"code\":\"Throttling.RateQuota\",\"message\":\"slow\"}\n\n".to_vec(),
                ErrorCode::UpstreamRateLimit,
            ),
            error: (
                429,
                br#"{"code":"Throttling.RateQuota","message":"Requests rate limit exceeded.","request_id":"r"}"#,
                "Requests rate limit exceeded.",
            ),
        },
    }
}

/// An SSE stream as its events (`\n\n` or `\r\n\r\n` ends each).
fn sse(stream: &str) -> Vec<Vec<u8>> {
    let end = if stream.contains("\r\n\r\n") {
        "\r\n\r\n"
    } else {
        "\n\n"
    };
    stream
        .split_inclusive(end)
        .map(|e| e.as_bytes().to_vec())
        .collect()
}

/// An AWS event stream as its messages (each starts with its total length).
fn frames(mut stream: &[u8]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    while stream.len() >= 4 {
        let len = u32::from_be_bytes(stream[..4].try_into().unwrap()) as usize;
        let (one, rest) = stream.split_at(len);
        frames.push(one.to_vec());
        stream = rest;
    }
    assert!(stream.is_empty(), "a whole number of messages");
    frames
}

fn origin() -> Origin {
    Origin {
        id: "chatcmpl-r".into(),
        provider: "p".into(),
        model: "req-model".into(),
        ..Origin::default()
    }
}

/// The client's events and bytes for a vendor stream fed in these chunks.
fn run(kind: DialectKind, chunks: &[&[u8]], include_usage: bool) -> (Vec<Value>, String) {
    run_stream(dialect(kind), origin(), chunks, include_usage)
}

#[test]
fn a_whole_stream_ends_done_with_one_id_and_model() {
    for &kind in DialectKind::ALL {
        let stream = fixtures(kind).stream.concat();
        let (ev, text) = run(kind, &[&stream], true);
        assert!(text.ends_with("data: [DONE]\n\n"), "{kind:?}: {text}");
        assert!(ev.iter().all(|e| e.get("error").is_none()), "{kind:?}");
        assert!(
            ev.iter()
                .all(|e| e["id"] == ev[0]["id"] && e["model"] == ev[0]["model"]),
            "{kind:?}: {text}"
        );
    }
}

#[test]
fn any_split_gives_the_same_output() {
    for &kind in DialectKind::ALL {
        let stream = fixtures(kind).stream.concat();
        let (_, whole) = run(kind, &[&stream], true);
        for i in 0..stream.len() {
            let (a, b) = stream.split_at(i);
            assert_eq!(run(kind, &[a, b], true).1, whole, "{kind:?}: split at {i}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(run(kind, &bytes, true).1, whole, "{kind:?}: byte by byte");
    }
}

#[test]
fn usage_is_one_last_chunk_only_when_asked() {
    for &kind in DialectKind::ALL {
        let stream = fixtures(kind).stream.concat();
        let (with, _) = run(kind, &[&stream], true);
        let (without, text) = run(kind, &[&stream], false);
        assert_eq!(with.len(), without.len() + 1, "{kind:?}");
        let last = with.last().unwrap();
        assert_eq!(last["choices"], serde_json::json!([]), "{kind:?}");
        assert!(last["usage"]["total_tokens"].is_u64(), "{kind:?}: {last}");
        assert!(
            without.iter().all(|e| e["usage"].is_null()),
            "{kind:?}: {text}"
        );
    }
}

#[test]
fn a_stream_cut_short_ends_with_the_incomplete_stream_error() {
    let incomplete = incomplete_stream();
    for &kind in DialectKind::ALL {
        let events = fixtures(kind).stream;
        let stream = events.concat();
        let last = events.last().unwrap().len();
        // After its first event, and mid-way through its last (one byte
        // short can be whole: SSE ends a line at a lone `\r`).
        for cut in [events[0].len(), stream.len() - last / 2] {
            let (ev, text) = run(kind, &[&stream[..cut]], false);
            let error = &ev.last().unwrap()["error"];
            assert_eq!(error["code"], "UPSTREAM_ERROR", "{kind:?}: cut at {cut}");
            assert_eq!(
                error["message"], incomplete.message,
                "{kind:?}: cut at {cut}"
            );
            assert_eq!(error["request_id"], "rid", "{kind:?}");
            assert!(!text.contains("[DONE]"), "{kind:?}: cut at {cut}");
        }
    }
}

#[test]
fn a_failed_stream_ends_with_the_unified_error() {
    for &kind in DialectKind::ALL {
        let (stream, code) = fixtures(kind).stream_error;
        let (ev, text) = run(kind, &[&stream], false);
        let error = &ev.last().unwrap()["error"];
        assert_eq!(error["code"], code.as_str(), "{kind:?}: {text}");
        assert_eq!(error["request_id"], "rid", "{kind:?}");
        assert!(!text.contains("[DONE]"), "{kind:?}");
        // Nothing after the error, whatever else comes.
        let more = fixtures(kind).stream.concat();
        let (_, after) = run(kind, &[&stream, &more], false);
        assert_eq!(after, text, "{kind:?}");
    }
}

#[test]
fn an_error_answer_is_the_unified_error_with_the_vendors_status() {
    for &kind in DialectKind::ALL {
        let d = dialect(kind);
        let (status, body, message) = fixtures(kind).error;
        let e = d.decode_error(status, body);
        assert_eq!(e.code, ErrorCode::UpstreamRateLimit, "{kind:?}");
        assert_eq!(e.status(), status, "{kind:?}");
        assert_eq!(e.message, message, "{kind:?}");
        // A body the dialect cannot read: the status says what happened.
        for status in [400, 401, 403, 404, 408, 413, 429, 500, 502, 503, 504, 529] {
            for body in [&b""[..], b"<html>bad gateway</html>"] {
                let e = d.decode_error(status, body);
                assert_eq!(e.code, ErrorCode::from_status(status), "{kind:?}: {status}");
                assert_eq!(e.message, fallback_message(status, body), "{kind:?}");
            }
        }
    }
}

#[test]
fn an_unreadable_answer_is_an_upstream_error() {
    for &kind in DialectKind::ALL {
        for body in [&b"not json"[..], b"", b"{\"id\":"] {
            let e = dialect(kind)
                .decode_response(body, &mut origin())
                .unwrap_err();
            assert_eq!(e.code, ErrorCode::UpstreamError, "{kind:?}: {body:?}");
        }
    }
}
