use super::*;
use crate::dialects::{dialect, DialectKind};
use crate::model::stream::EventWriter;
use crate::model::surface_state::SurfaceState;
use crate::surfaces::surface;

fn origin() -> Origin {
    Origin {
        id: "chatcmpl-r".into(),
        created: 1,
        model: "requested".into(),
        provider: "p".into(),
        stop_sequence: None,
    }
}

/// A vendor's stream decoded by its dialect for a client of `api`, the
/// client's encoder recorded: what the client was sent, and the capture.
fn decode(kind: DialectKind, api: Api, vendor: &str, limit: usize) -> (String, Shared) {
    let capture = Capture::shared(limit);
    let encoder = Recording::around(
        surface(api).stream_encoder(true, &SurfaceState::default()),
        Rc::clone(&capture),
    );
    let writer =
        EventWriter::new(Box::new(encoder), origin(), "r".into(), true, false).for_api(api);
    let mut decoder = dialect(kind).stream_decoder(writer);
    let mut out = Vec::new();
    for piece in vendor.as_bytes().chunks(7) {
        decoder.feed(piece, &mut out);
    }
    decoder.finish(&mut out);
    (String::from_utf8(out).unwrap(), capture)
}

use crate::model::Api;

const ANTHROPIC_STREAM: &str = "event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"let me see\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"sig\"}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello, \"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"world\"}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get\",\"input\":{}}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":2}\n\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":12}}\n\n\
event: message_stop\n\
data: {\"type\":\"message_stop\"}\n\n";

#[test]
fn a_translated_stream_is_captured_as_it_passes() {
    let (sent, capture) = decode(
        DialectKind::Anthropic,
        Api::OpenAiChat,
        ANTHROPIC_STREAM,
        1 << 20,
    );
    // The client got its stream as without a recording.
    assert!(
        sent.contains("Hello, ") && sent.ends_with("data: [DONE]\n\n"),
        "{sent}"
    );
    let entry = Rc::try_unwrap(capture)
        .unwrap()
        .into_inner()
        .entry()
        .unwrap();
    assert_eq!(
        entry.blocks,
        [
            Block::Thinking {
                text: "let me see".into(),
                signature: Some("sig".into())
            },
            Block::Text {
                text: "Hello, world".into()
            },
            Block::ToolCall {
                id: "toolu_1".into(),
                name: "get".into(),
                arguments: "{\"a\":1}".into()
            },
        ]
    );
    assert_eq!(entry.finish, "tool_calls");
    assert_eq!(
        (entry.provider.as_str(), entry.model.as_str()),
        ("p", "claude-x")
    );
    let usage = entry.usage.unwrap();
    assert_eq!((usage.prompt, usage.completion), (9, 12));
}

#[test]
fn a_cut_or_oversized_stream_is_not_kept() {
    // Cut before its end: the writer's error event.
    let cut = &ANTHROPIC_STREAM[..ANTHROPIC_STREAM.find("event: message_delta").unwrap()];
    let (sent, capture) = decode(DialectKind::Anthropic, Api::OpenAiChat, cut, 1 << 20);
    assert!(sent.contains("error"), "{sent}");
    assert!(Rc::try_unwrap(capture)
        .unwrap()
        .into_inner()
        .entry()
        .is_none());
    // Over its bound: given up, and what it held let go.
    let (_, capture) = decode(
        DialectKind::Anthropic,
        Api::OpenAiChat,
        ANTHROPIC_STREAM,
        16,
    );
    let capture = Rc::try_unwrap(capture).unwrap().into_inner();
    assert!(capture.blocks.is_empty());
    assert!(capture.entry().is_none());
}

#[test]
fn a_content_filtered_or_unfinished_answer_is_not_kept() {
    let mut filtered = Capture::new(1 << 10);
    filtered.text("partial");
    filtered.finish(FinishReason::ContentFilter);
    filtered.done(&origin(), None);
    assert!(filtered.entry().is_none());
    let mut unfinished = Capture::new(1 << 10);
    unfinished.text("partial");
    unfinished.done(&origin(), None);
    assert!(unfinished.entry().is_none());
    let mut no_end = Capture::new(1 << 10);
    no_end.text("partial");
    no_end.finish(FinishReason::Stop);
    assert!(no_end.entry().is_none(), "no done: the stream did not end");
}

#[test]
fn a_passed_through_event_spoils_a_recording_around_the_clients_encoder() {
    let capture = Capture::shared(1 << 10);
    let mut around = Recording::around(
        surface(Api::OpenAiChat).stream_encoder(false, &SurfaceState::default()),
        Rc::clone(&capture),
    );
    let mut out = Vec::new();
    around.passthrough(&mut out, &Passed::data(b"{}"));
    assert!(capture.borrow().spoiled);
    // A recording that only records is never passed events through to.
    let capture = Capture::shared(1 << 10);
    let mut only = Recording::only(Rc::clone(&capture));
    only.passthrough(&mut out, &Passed::data(b"{}"));
    only.text(&origin(), &mut out, "x");
    assert!(!capture.borrow().spoiled);
    assert_eq!(out, b"data: {}\n\n");
}
