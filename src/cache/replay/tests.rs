use std::rc::Rc;

use super::*;
use crate::cache::capture::{Capture, Recording};
use crate::dialects::{dialect, DialectKind};
use crate::model::response::{FinishReason, Usage};
use crate::model::stream::EventWriter;

fn entry() -> Entry {
    let long = "a long answer, ".repeat(20) + "ü€𝄞 at the end";
    let mut entry = Entry::new(
        vec![
            Block::Thinking {
                text: "first I think".into(),
                signature: Some("sig-1".into()),
            },
            Block::Text { text: long },
            Block::ToolCall {
                id: "call_1".into(),
                name: "lookup".into(),
                arguments: format!(
                    r#"{{"q":"{}","units":"metric"}}"#,
                    "weather in Paris ".repeat(6)
                ),
            },
            Block::ToolCall {
                id: "call_2".into(),
                name: "other".into(),
                arguments: "{}".into(),
            },
        ],
        FinishReason::ToolCalls,
        Some(Usage {
            prompt_tokens: 11,
            completion_tokens: 22,
            cached_tokens: None,
            reasoning_tokens: Some(5),
            cache_write_tokens: None,
        }),
    )
    .unwrap();
    entry.provider = "p".into();
    entry.model = "vendor-model".into();
    entry
}

fn hit_origin(entry: &Entry) -> Origin {
    origin(entry, "req-1", 1_700_000_000)
}

/// A replayed stream read back by the dialect whose vendor speaks its API,
/// as that vendor's own stream: the entry it makes.
fn read_back(kind: DialectKind, stream: &[u8]) -> Entry {
    let capture = Capture::shared(1 << 20);
    let writer = EventWriter::new(
        Box::new(Recording::only(Rc::clone(&capture))),
        hit_origin(&entry()),
        "r".into(),
        true,
        false,
    );
    let mut decoder = dialect(kind).stream_decoder(writer);
    let mut out = Vec::new();
    decoder.feed(stream, &mut out);
    decoder.finish(&mut out);
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    drop(decoder);
    let capture = Rc::try_unwrap(capture).unwrap().into_inner();
    capture.entry().expect("a whole stream")
}

#[test]
fn a_replayed_stream_is_the_entry_again_in_pieces() {
    let want = entry();
    for (api, kind) in [
        (Api::OpenAiChat, DialectKind::Openai),
        (Api::AnthropicMessages, DialectKind::Anthropic),
        (Api::Gemini, DialectKind::Gemini),
    ] {
        let body = stream(
            api,
            &want,
            hit_origin(&want),
            "req-1",
            true,
            &SurfaceState::default(),
        );
        let text = String::from_utf8(body.clone()).unwrap();
        // Incremental: the text in several events, none over a piece.
        assert!(
            text.matches("a long answer").count() >= 3,
            "{api:?}: {text}"
        );
        let got = read_back(kind, &body);
        let texts = |e: &Entry| -> Vec<String> {
            e.blocks
                .iter()
                .filter_map(|b| match b {
                    Block::Text { text } => Some(text.clone()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(texts(&got), texts(&want), "{api:?}");
        // Gemini's calls have no ids: the gateway makes them.
        let calls = |e: &Entry| -> Vec<(String, String, String)> {
            e.blocks
                .iter()
                .filter_map(|b| match b {
                    Block::ToolCall {
                        id,
                        name,
                        arguments,
                    } => Some((
                        if api == Api::Gemini {
                            String::new()
                        } else {
                            id.clone()
                        },
                        name.clone(),
                        arguments.clone(),
                    )),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(calls(&got), calls(&want), "{api:?}");
        assert_eq!(got.finish, "tool_calls", "{api:?}");
        assert_eq!(got.model, "vendor-model", "{api:?}");
        let usage = got.usage.unwrap();
        assert_eq!((usage.prompt, usage.completion), (11, 22), "{api:?}");
    }
}

#[test]
fn each_api_ends_its_replayed_stream_as_it_should() {
    let e = entry();
    let ends = [
        (Api::OpenAiChat, "data: [DONE]\n\n"),
        (
            Api::AnthropicMessages,
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        ),
    ];
    for (api, end) in ends {
        let body = stream(
            api,
            &e,
            hit_origin(&e),
            "req-1",
            true,
            &SurfaceState::default(),
        );
        let text = String::from_utf8(body).unwrap();
        assert!(text.ends_with(end), "{api:?}: {text}");
    }
    let responses = stream(
        Api::OpenAiResponses,
        &e,
        hit_origin(&e),
        "req-1",
        true,
        &SurfaceState::default(),
    );
    let text = String::from_utf8(responses).unwrap();
    assert!(text.contains("event: response.completed"), "{text}");
    assert!(
        text.contains("\"call_1\"") && text.contains("lookup"),
        "{text}"
    );
}

#[test]
fn a_whole_replay_is_the_surface_rendering_the_entry() {
    let e = entry();
    let o = hit_origin(&e);
    for api in Api::ALL {
        let body = whole(api, &e, &o, &SurfaceState::default());
        let direct = surface(api).render_answer(
            Answer::Decoded(e.completion()),
            &o,
            &SurfaceState::default(),
        );
        assert_eq!(body, direct, "{api:?}");
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(value.to_string().contains("a long answer"), "{api:?}");
    }
}

#[test]
fn pieces_cut_at_character_boundaries() {
    let text = "é".repeat(100);
    let parts: Vec<&str> = pieces(&text).collect();
    assert!(parts.iter().all(|p| p.len() <= PIECE && !p.is_empty()));
    assert_eq!(parts.concat(), text);
    assert_eq!(pieces("").count(), 0);
}
