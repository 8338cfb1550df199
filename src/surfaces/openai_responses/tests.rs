use super::*;
use crate::model::request::Thinking;
use crate::model::response::ToolCallOut;
use crate::model::stream::{Passed, Reasoning};
use crate::model::Api;
use crate::surfaces::stream_writer;
use serde_json::json;

fn origin() -> Origin {
    Origin {
        id: "msg_1".into(),
        created: 7,
        model: "m".into(),
        provider: "p".into(),
        stop_sequence: None,
    }
}

/// A request's state, as this surface keeps it for its answers.
fn state_of(body: &[u8]) -> ResponsesState {
    let state = request::parse(body).unwrap().state;
    state.get::<ResponsesState>().unwrap().clone()
}

fn state() -> ResponsesState {
    state_of(br#"{"model":"g","input":"hi","instructions":"be brief","tools":[{"type":"function","name":"f"}]}"#)
}

/// The stream's events: (SSE event name, data).
fn events(out: &[u8]) -> Vec<(String, Value)> {
    std::str::from_utf8(out)
        .unwrap()
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (event, data) = e.split_once('\n').unwrap();
            let kind = event.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], kind.as_str(), "the event names its type");
            (kind, data)
        })
        .collect()
}

fn writer() -> crate::model::stream::EventWriter {
    stream_writer(
        Api::OpenAiResponses,
        false,
        origin(),
        "r".into(),
        true,
        &SurfaceState::of(state()),
    )
}

#[test]
fn response_object_has_what_the_sdk_reads() {
    let c = Completion {
        more: Vec::new(),
        reasoning: vec![Thinking {
            text: "why".into(),
            ..Thinking::default()
        }],
        content: Some("hello".into()),
        tool_calls: vec![ToolCallOut::new("call_1".into(), "f".into(), "{}".into())],
        finish_reason: Some(FinishReason::ToolCalls),
        usage: Some(Usage {
            prompt_tokens: 3,
            completion_tokens: 4,
            cached_tokens: Some(1),
            reasoning_tokens: None,
            cache_write_tokens: None,
        }),
    };
    let v: Value = serde_json::from_slice(&render_completion(&c, &origin(), &state())).unwrap();
    assert_eq!(v["id"], "resp_msg_1");
    assert_eq!(v["object"], "response");
    assert_eq!(v["created_at"], 7);
    assert_eq!(v["status"], "completed");
    assert!(v["error"].is_null() && v["incomplete_details"].is_null());
    assert_eq!(v["instructions"], "be brief");
    assert_eq!(v["tools"][0]["name"], "f");
    assert_eq!(v["tool_choice"], "auto");
    assert_eq!(v["parallel_tool_calls"], true);
    assert!(v.as_object().unwrap()["previous_response_id"].is_null());
    let output = v["output"].as_array().unwrap();
    assert_eq!(
        output
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["reasoning", "message", "function_call"]
    );
    assert_eq!(
        output[0]["summary"][0],
        json!({"type": "summary_text", "text": "why"})
    );
    assert_eq!(output[1]["content"][0]["text"], "hello");
    assert_eq!(output[1]["content"][0]["annotations"], json!([]));
    assert_eq!(output[2]["call_id"], "call_1");
    assert!(output[2]["id"].as_str().unwrap().starts_with("fc_"));
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 3, "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 1},
               "output_tokens": 4, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 7})
    );
    // Cut short: incomplete, with the reason.
    let cut = Completion {
        content: Some("hel".into()),
        finish_reason: Some(FinishReason::Length),
        ..Completion::default()
    };
    let v: Value = serde_json::from_slice(&render_completion(
        &cut,
        &origin(),
        &ResponsesState::default(),
    ))
    .unwrap();
    assert_eq!(v["status"], "incomplete");
    assert_eq!(v["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(v["output"][0]["status"], "incomplete");
}

#[test]
fn stream_numbers_events_and_items_whatever_the_vendor_blocks() {
    let mut w = writer();
    let mut out = Vec::new();
    w.reasoning(&mut out, Reasoning::Text("th"));
    w.reasoning(&mut out, Reasoning::Text("ink"));
    w.reasoning(&mut out, Reasoning::Signature("sig"));
    w.content(&mut out, "Hel");
    w.content(&mut out, "lo");
    // Vendor keys 5 and 2: output indices 2 and 3.
    w.tool_call_start(&mut out, 5, "call_a", "f");
    w.tool_call_start(&mut out, 2, "call_b", "g");
    w.tool_call_arguments(&mut out, 5, "{\"x\"");
    w.tool_call_arguments(&mut out, 2, "{}");
    w.tool_call_arguments(&mut out, 5, ":1}");
    w.finish(&mut out, FinishReason::ToolCalls);
    w.set_usage(Some(Usage {
        prompt_tokens: 2,
        completion_tokens: 5,
        ..Usage::default()
    }));
    w.done(&mut out);
    w.content(&mut out, "late");
    let ev = events(&out);
    let kinds: Vec<&str> = ev.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    for (i, (_, data)) in ev.iter().enumerate() {
        assert_eq!(data["sequence_number"], i, "{data}");
    }
    let created = &ev[0].1["response"];
    assert_eq!(
        (created["status"].clone(), created["output"].clone()),
        ("in_progress".into(), json!([]))
    );
    assert_eq!(created["id"], "resp_msg_1");
    assert_eq!(created["instructions"], "be brief");
    let (_, text_done) = &ev[13];
    assert_eq!(
        (text_done["text"].clone(), text_done["output_index"].clone()),
        ("Hello".into(), 1.into())
    );
    assert_eq!(ev[11].1["item_id"], ev[9].1["item"]["id"]);
    assert_eq!(ev[18].1["output_index"], 2);
    assert_eq!(ev[19].1["output_index"], 3);
    assert_eq!(ev[21].1["arguments"], "{\"x\":1}");
    let done = &ev[25].1["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["usage"]["total_tokens"], 7);
    let output = done["output"].as_array().unwrap();
    assert_eq!(output.len(), 4);
    assert_eq!(output[0]["summary"][0]["text"], "think");
    assert_eq!(
        output[0]["encrypted_content"], "gw-signature:sig",
        "the signature travels back"
    );
    assert_eq!(output[1]["content"][0]["text"], "Hello");
    assert_eq!(
        (output[2]["call_id"].clone(), output[2]["arguments"].clone()),
        ("call_a".into(), "{\"x\":1}".into())
    );
    assert_eq!(
        (output[3]["call_id"].clone(), output[3]["arguments"].clone()),
        ("call_b".into(), "{}".into())
    );
}

#[test]
fn every_terminal_event() {
    // Cut by the token limit: response.incomplete.
    let mut w = writer();
    let mut out = Vec::new();
    w.content(&mut out, "a");
    w.finish(&mut out, FinishReason::Length);
    w.done(&mut out);
    let last = events(&out).pop().unwrap();
    assert_eq!(last.0, "response.incomplete");
    assert_eq!(
        last.1["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
    // Filtered.
    let mut w = writer();
    let mut out = Vec::new();
    w.finish(&mut out, FinishReason::ContentFilter);
    w.done(&mut out);
    let last = events(&out).pop().unwrap();
    assert_eq!(
        last.1["response"]["incomplete_details"]["reason"],
        "content_filter"
    );
    // Failed mid-stream: an `error` event, then response.failed, then nothing.
    let mut w = writer();
    let mut out = Vec::new();
    w.content(&mut out, "a");
    let e = GatewayError::new(crate::error::ErrorCode::UpstreamBusy, "Overloaded");
    w.error(&mut out, &e);
    w.done(&mut out);
    let ev = events(&out);
    let n = ev.len();
    assert_eq!(ev[n - 2].0, "error");
    assert_eq!(ev[n - 2].1["code"], "UPSTREAM_BUSY");
    assert_eq!(ev[n - 1].0, "response.failed");
    let failed = &ev[n - 1].1["response"];
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["message"], "Overloaded");
    assert_eq!(failed["id"], "resp_msg_1");
    assert_eq!(failed["provider"], "p");
    assert_eq!(ev[n - 1].1["sequence_number"], n - 1);
    // Failed before anything: still a response to fail.
    let mut w = writer();
    let mut out = Vec::new();
    w.error(&mut out, &e);
    let ev = events(&out);
    assert_eq!(
        ev.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
        ["error", "response.failed"]
    );
}

#[test]
fn redacted_reasoning_is_its_own_item() {
    let mut w = writer();
    let mut out = Vec::new();
    w.reasoning(&mut out, Reasoning::Redacted("opaque"));
    w.content(&mut out, "x");
    w.done(&mut out);
    let ev = events(&out);
    assert_eq!(ev[2].0, "response.output_item.added");
    assert_eq!(ev[2].1["item"]["encrypted_content"], "opaque");
    assert_eq!(ev[3].0, "response.output_item.done");
    assert_eq!(ev[4].1["output_index"], 1);
}

#[test]
fn passthrough_names_the_event() {
    let mut w = stream_writer(
        Api::OpenAiResponses,
        true,
        origin(),
        "r".into(),
        true,
        &SurfaceState::default(),
    );
    let mut out = Vec::new();
    let data = br#"{"type":"response.output_text.delta","sequence_number":4,"delta":"x"}"#;
    let passed = Passed {
        name: Some("response.output_text.delta"),
        sequence: Some(4),
        ..Passed::data(data)
    };
    w.passthrough(&mut out, &passed, true);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"delta\":\"x\"}\n\n"
    );
    // An event of ours after it goes on from its number; a name that would
    // break the SSE framing is left out.
    let mut out = Vec::new();
    let passed = Passed {
        name: Some("bad\nname"),
        ..Passed::data(b"{}")
    };
    w.passthrough(&mut out, &passed, false);
    assert_eq!(out, b"data: {}\n\n");
    w.error(
        &mut out,
        &GatewayError::new(crate::error::ErrorCode::UpstreamBusy, "busy"),
    );
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("\"sequence_number\":5"), "{text}");
}

#[test]
fn errors_are_openai_envelopes() {
    let e = GatewayError::invalid("input", "bad");
    let v: Value = serde_json::from_slice(&OpenAiResponses.render_error(&e, Some("r"))).unwrap();
    assert_eq!(v["error"]["param"], "input");
    assert_eq!(v["error"]["type"], "invalid_request_error");
}

#[test]
fn a_namespaced_tool_call_comes_back_in_its_namespace() {
    let state = state_of(
        br#"{"model":"g","input":"hi","tools":[{"type":"function","name":"f"},
            {"type":"namespace","name":"multi_agent_v1","description":"d",
             "tools":[{"type":"function","name":"wait_agent"}]}]}"#,
    );
    let c = Completion {
        tool_calls: vec![
            ToolCallOut::new(
                "call_1".into(),
                "multi_agent_v1__wait_agent".into(),
                "{}".into(),
            ),
            ToolCallOut::new("call_2".into(), "f".into(), "{}".into()),
        ],
        finish_reason: Some(FinishReason::ToolCalls),
        ..Completion::default()
    };
    let v: Value = serde_json::from_slice(&render_completion(&c, &origin(), &state)).unwrap();
    let output = &v["output"];
    assert_eq!(
        (output[0]["namespace"].clone(), output[0]["name"].clone()),
        ("multi_agent_v1".into(), "wait_agent".into())
    );
    assert_eq!(output[1]["name"], "f");
    assert!(output[1].get("namespace").is_none(), "a flat tool has none");
    // Streamed: every event that names the call.
    let mut w = stream_writer(
        Api::OpenAiResponses,
        false,
        origin(),
        "r".into(),
        true,
        &SurfaceState::of(state),
    );
    let mut out = Vec::new();
    w.tool_call_start(&mut out, 0, "call_1", "multi_agent_v1__wait_agent");
    w.tool_call_arguments(&mut out, 0, "{}");
    w.finish(&mut out, FinishReason::ToolCalls);
    w.done(&mut out);
    let ev = events(&out);
    let named: Vec<&Value> = ev
        .iter()
        .filter_map(|(_, d)| d.get("item").or(d.get("name").map(|_| d)))
        .collect();
    assert_eq!(named.len(), 3, "added, arguments done, item done");
    for item in named {
        assert_eq!(item["name"], "wait_agent", "{item}");
    }
    let done = &ev.last().unwrap().1["response"]["output"][0];
    assert_eq!(done["namespace"], "multi_agent_v1");
}

#[test]
fn every_echoed_field_is_written_as_sent() {
    // The wire's `Response` names the echoed fields one by one: none of
    // what the parser keeps may be dropped.
    let sent = state_of(
        br#"{"model":"g","input":"hi","user":"u","metadata":{"k":"v"},"top_p":0.5,
            "reasoning":{"effort":"low"},"text":{"format":{"type":"json_object"}}}"#,
    );
    let answer = Completion {
        content: Some("ok".into()),
        ..Completion::default()
    };
    let v: Value = serde_json::from_slice(&render_completion(&answer, &origin(), &sent)).unwrap();
    for (key, value) in sent.echo.iter() {
        assert_eq!(&v[key], value, "{key}");
    }
    let mut w = writer();
    let mut out = Vec::new();
    w.content(&mut out, "ok");
    w.done(&mut out);
    let ev = events(&out);
    for (_, data) in [&ev[0], &ev[ev.len() - 1]] {
        for (key, value) in state().echo.iter() {
            assert_eq!(&data["response"][key], value, "{key}");
        }
    }
}

#[test]
fn a_stored_answer_goes_under_its_id_and_names_what_it_continued() {
    let mut state = SurfaceState::of(state());
    assert!(state.stores_answer());
    state.continues("resp_before");
    state.set_answer_id("resp_stored");
    let answer = Completion {
        content: Some("ok".into()),
        ..Completion::default()
    };
    let body = OpenAiResponses.render_answer(Answer::Decoded(answer), &origin(), &state);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["id"], "resp_stored");
    assert_eq!(v["previous_response_id"], "resp_before");
    assert_eq!(v["instructions"], "be brief", "the rest still as sent");
}
