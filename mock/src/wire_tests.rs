//! Wire-format tests: the exact shape of each dialect's streams, Anthropic
//! validation errors, and a few requests through a real socket.
//!
//! Long: tests only, a table of wire shapes per dialect.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::answer::plan;
use crate::anthropic::Anthropic;
use crate::bedrock::Bedrock;
use crate::dashscope::DashScope;
use crate::dialect::{Dialect, Failure, Filtered, Meta, Prompt};
use crate::openai::OpenAi;
use crate::scenario::{Filter, Scenario};
use crate::server::{serve, State};
use crate::sse::{dechunk, send};

/// Parses SSE text into (event name, data) pairs, accepting \n or \r\n.
fn parse_sse(text: &str) -> Vec<(Option<String>, String)> {
    let text = text.replace("\r\n", "\n");
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let mut name = None;
            let mut data = String::new();
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                } else {
                    panic!("unexpected SSE line {line:?}");
                }
            }
            (name, data)
        })
        .collect()
}

/// Runs a request body through a dialect's stream and back through an SSE parser.
fn stream(d: &dyn Dialect, body: Value, scenario: &str) -> Vec<(Option<String>, String)> {
    let sc = Scenario::parse(scenario);
    let p = d.parse(&body).unwrap();
    assert!(p.stream);
    let a = plan(&p, &sc, d.name(), d.tool_preface());
    let events = d.stream(&p, &a, Meta { seq: 7, created: 1 });
    let mut out = Vec::new();
    let encode = |i: usize, e: &crate::dialect::SseEvent, crlf: bool, out: &mut Vec<u8>| {
        d.encode_event(i, e, crlf, out)
    };
    send(&mut out, &events, &d.stream_error(), &sc, &encode).unwrap();
    let (body, _, terminated) = dechunk(&out);
    assert!(terminated);
    parse_sse(std::str::from_utf8(&body).unwrap())
}

fn data(e: &(Option<String>, String)) -> Value {
    serde_json::from_str(&e.1).unwrap()
}

#[test]
fn openai_text_stream_shape() {
    let body = json!({"model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": "hi there"}]});
    let ev = stream(&OpenAi, body, "crlf");
    let answer = "Hello from the mock openai provider. You said: hi there";
    // role + one chunk per word + finish + usage + [DONE]
    assert_eq!(ev.len(), 1 + 10 + 1 + 1 + 1);
    assert!(ev.iter().all(|e| e.0.is_none()));
    assert_eq!(ev.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = ev.iter().take(ev.len() - 1).map(data).collect();
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["id"], "chatcmpl-mock7");
        assert_eq!(c["model"], "gpt-4o");
        assert!(
            c.get("usage").is_some(),
            "include_usage: usage on every chunk"
        );
    }
    let first = &chunks[0]["choices"][0];
    assert_eq!(first["delta"], json!({"role": "assistant", "content": ""}));
    assert_eq!(first["finish_reason"], Value::Null);
    assert_eq!(chunks[0]["usage"], Value::Null);
    let text: String = chunks[1..11]
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, answer);
    assert_eq!(chunks[11]["choices"][0]["delta"], json!({}));
    assert_eq!(chunks[11]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[12]["choices"], json!([]));
    let u = &chunks[12]["usage"];
    assert_eq!(
        (u["prompt_tokens"].as_u64(), u["completion_tokens"].as_u64()),
        (Some(4), Some(10))
    );
    assert_eq!(u["total_tokens"], 14);
    assert_eq!(u["prompt_tokens_details"]["cached_tokens"], 0);
}

#[test]
fn openai_tool_stream_shape() {
    let body = json!({"model": "gpt-4o", "stream": true, "tool_choice": "required",
        "messages": [{"role": "user", "content": "weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city", "unit"]}}}]});
    let ev = stream(&OpenAi, body, "split");
    assert_eq!(ev.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = ev.iter().take(ev.len() - 1).map(data).collect();
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": null})
    );
    let start = &chunks[1]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(start["index"], 0);
    assert_eq!(start["id"], "call_1");
    assert_eq!(start["type"], "function");
    assert_eq!(
        start["function"],
        json!({"name": "get_weather", "arguments": ""})
    );
    let last = chunks.len() - 1;
    let args: String = chunks[2..last]
        .iter()
        .map(|c| {
            let tc = &c["choices"][0]["delta"]["tool_calls"][0];
            assert_eq!(tc["index"], 0);
            assert!(tc.get("id").is_none());
            tc["function"]["arguments"].as_str().unwrap().to_owned()
        })
        .collect();
    assert!(last - 2 >= 3, "arguments come in several fragments");
    assert_eq!(args, r#"{"city":"example","unit":"c"}"#);
    assert_eq!(chunks[last]["choices"][0]["finish_reason"], "tool_calls");
}

#[test]
fn anthropic_text_stream_shape() {
    let body = json!({"model": "claude-x", "max_tokens": 5, "stream": true, "system": "sys words",
                      "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]});
    let ev = stream(&Anthropic, body, "");
    let names: Vec<&str> = ev.iter().map(|e| e.0.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    for e in &ev {
        assert_eq!(
            data(e)["type"],
            e.0.as_deref().unwrap(),
            "type field matches event name"
        );
    }
    let start = data(&ev[0]);
    assert_eq!(start["message"]["id"], "msg_mock7");
    assert_eq!(start["message"]["content"], json!([]));
    assert_eq!(start["message"]["stop_reason"], Value::Null);
    assert_eq!(start["message"]["usage"]["input_tokens"], 3);
    assert_eq!(start["message"]["usage"]["output_tokens"], 1);
    assert_eq!(
        data(&ev[1])["content_block"],
        json!({"type": "text", "text": ""})
    );
    let text: String = ev[3..8]
        .iter()
        .map(|e| {
            let d = data(e);
            assert_eq!(d["index"], 0);
            assert_eq!(d["delta"]["type"], "text_delta");
            d["delta"]["text"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(text, "Hello from the mock anthropic");
    assert_eq!(
        data(&ev[9]),
        json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": null},
               "usage": {"output_tokens": 5}})
    );
}

#[test]
fn anthropic_tool_stream_uses_block_index_after_text() {
    let tools = json!([{"name": "a", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
                       {"name": "b", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}]);
    let body = json!({"model": "claude-x", "max_tokens": 100, "stream": true, "tools": tools,
                      "messages": [{"role": "user", "content": "go"}]});
    let ev = stream(&Anthropic, body, "two-tools");
    let starts: Vec<Value> = ev
        .iter()
        .filter(|e| e.0.as_deref() == Some("content_block_start"))
        .map(data)
        .collect();
    assert_eq!(starts.len(), 3);
    assert_eq!(starts[0]["content_block"]["type"], "text");
    assert_eq!(starts[1]["index"], 1);
    assert_eq!(
        starts[1]["content_block"],
        json!({"type": "tool_use", "id": "toolu_1", "name": "a", "input": {}})
    );
    assert_eq!(starts[2]["index"], 2);
    assert_eq!(starts[2]["content_block"]["id"], "toolu_2");
    let partial = |index: u64| -> String {
        ev.iter()
            .map(data)
            .filter(|d| d["type"] == "content_block_delta" && d["index"] == index)
            .map(|d| {
                assert_eq!(d["delta"]["type"], "input_json_delta");
                d["delta"]["partial_json"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    assert_eq!(partial(1), r#"{"q":"example"}"#);
    assert_eq!(partial(2), r#"{"n":1}"#);
    let delta = ev
        .iter()
        .map(data)
        .find(|d| d["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(ev.last().unwrap().0.as_deref(), Some("message_stop"));
}

#[test]
fn anthropic_validation_errors() {
    let ok_msgs = json!([{"role": "user", "content": "hi"}]);
    let cases = [
        (
            json!({"model": "m", "max_tokens": 1, "messages": ok_msgs, "n": 2}),
            "n: Extra inputs are not permitted",
        ),
        (
            json!({"max_tokens": 1, "messages": ok_msgs}),
            "model: Field required",
        ),
        (
            json!({"model": "m", "messages": ok_msgs}),
            "max_tokens: Field required",
        ),
        (
            json!({"model": "m", "max_tokens": 0, "messages": ok_msgs}),
            "greater than or equal to 1",
        ),
        (
            json!({"model": "m", "max_tokens": 1.5, "messages": ok_msgs}),
            "max_tokens: Input should be a valid integer",
        ),
        (
            json!({"model": "m", "max_tokens": 1, "messages": []}),
            "at least 1 item",
        ),
        (
            json!({"model": "m", "max_tokens": 1}),
            "messages: Field required",
        ),
        (
            // System messages between the turns (the SDK's SystemMessageParam) hold text only.
            json!({"model": "m", "max_tokens": 1, "messages": [{"role": "system", "content": [{"type": "image"}]}]}),
            "messages.0.content: Input should be a valid string or a list of text blocks",
        ),
        (
            json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "video"}]}]}),
            "messages.0.content.0: Input tag 'video'",
        ),
        (
            json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "AA"}}]}]}),
            "media_type",
        ),
        (
            json!({"model": "m", "max_tokens": 1, "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": "no result"}]}),
            "`tool_use` ids were found without `tool_result` blocks immediately after: t1",
        ),
        (
            json!({"model": "m", "max_tokens": 1, "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "tool_result", "tool_use_id": "t1", "content": "r"}]}]}),
            "`tool_result` blocks must come first",
        ),
        (
            json!({"model": "m", "max_tokens": 1, "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": "x"}]}]}),
            "input: Input should be a valid dictionary",
        ),
    ];
    for (body, want) in cases {
        match Anthropic.parse(&body) {
            Err(Failure::Invalid(msg)) => {
                assert!(msg.contains(want), "{msg:?} should contain {want:?}")
            }
            other => panic!("{body}: expected 400, got {other:?}"),
        }
    }
    let reply = Anthropic.error(&Failure::Invalid("x: bad".into()));
    assert_eq!(reply.status, 400);
    let v: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "x: bad"}})
    );
}

/// Anthropic's thinking rules, signed thinking out and verified back, and
/// the prompt cache's breakpoints and counts.
#[test]
fn anthropic_thinking_and_caching() {
    let thinking = json!({"type": "enabled", "budget_tokens": 1024});
    let refused = |body: Value, want: &str| match Anthropic.parse(&body) {
        Err(Failure::Invalid(msg)) => {
            assert!(msg.contains(want), "{msg:?} should contain {want:?}")
        }
        other => panic!("{body}: expected 400, got {other:?}"),
    };
    let base = |extra: Value| {
        let mut body = json!({"model": "m", "max_tokens": 2048, "messages": [{"role": "user", "content": "x"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    refused(
        base(json!({"thinking": {"type": "enabled", "budget_tokens": 1000}})),
        "greater than or equal to 1024",
    );
    refused(
        base(json!({"thinking": thinking, "max_tokens": 1024})),
        "`max_tokens` must be greater than",
    );
    refused(
        base(json!({"thinking": thinking, "temperature": 0.5})),
        "`temperature` may only be set to 1",
    );
    refused(
        base(json!({"thinking": thinking, "top_k": 3})),
        "`top_k` is not supported",
    );
    refused(
        base(json!({"thinking": thinking, "top_p": 0.5})),
        "`top_p` must be greater than or equal to 0.95",
    );
    refused(
        base(
            json!({"thinking": thinking, "tool_choice": {"type": "any"}, "tools": [{"name": "f", "input_schema": {}}]}),
        ),
        "Thinking may not be enabled when tool_choice forces tool use.",
    );
    // Thinking out: a signed block first, as JSON and as the stream's deltas.
    let body = base(json!({"thinking": thinking, "tools": [{"name": "f", "input_schema": {}}]}));
    let p = Anthropic.parse(&body).unwrap();
    let a = plan(
        &p,
        &Scenario::parse("tool"),
        "anthropic",
        Anthropic.tool_preface(),
    );
    let v = Anthropic.response(&p, &a, Meta { seq: 1, created: 1 });
    let block = v["content"][0].clone();
    assert_eq!(block["type"], "thinking");
    let text = block["thinking"].as_str().unwrap();
    assert_eq!(block["signature"], crate::answer::claude_signature(text));
    let events = stream(
        &Anthropic,
        json!({"stream": true, "model": "m", "max_tokens": 2048,
        "thinking": thinking, "messages": [{"role": "user", "content": "x"}]}),
        "",
    );
    let deltas: Vec<Value> = events
        .iter()
        .map(data)
        .filter(|d| d["type"] == "content_block_delta")
        .map(|d| d["delta"]["type"].clone())
        .collect();
    assert!(
        deltas.contains(&json!("thinking_delta")) && deltas.contains(&json!("signature_delta"))
    );
    // Back: the tool-use turn must start with it, its signature intact.
    let history = |first: Value| {
        let mut content =
            vec![json!({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}})];
        if !first.is_null() {
            content.insert(0, first);
        }
        base(
            json!({"thinking": thinking, "tools": [{"name": "f", "input_schema": {}}], "messages": [
            {"role": "user", "content": "x"}, {"role": "assistant", "content": content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}]}]}),
        )
    };
    assert!(Anthropic.parse(&history(block.clone())).is_ok());
    let mut forged = block.clone();
    forged["signature"] = json!("forged");
    refused(history(forged), "Invalid `signature` in `thinking` block");
    refused(
        history(Value::Null),
        "Expected `thinking` or `redacted_thinking`, but found `tool_use`",
    );
    // Caching: at most 4 breakpoints; a long prefix written once, then read.
    let cc = json!({"type": "ephemeral"});
    let many: Vec<Value> = (0..5)
        .map(|i| json!({"type": "text", "text": format!("p{i}"), "cache_control": cc}))
        .collect();
    refused(
        base(json!({"system": many})),
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    );
    let long = "word ".repeat(1100) + "unique-to-this-test";
    let body = base(json!({"system": [{"type": "text", "text": long, "cache_control": cc}]}));
    let usage = |body: &Value| {
        let p = Anthropic.parse(body).unwrap();
        let a = plan(&p, &Scenario::default(), "anthropic", None);
        Anthropic.response(&p, &a, Meta { seq: 1, created: 1 })["usage"].clone()
    };
    let first = usage(&body);
    assert_eq!(first["cache_creation_input_tokens"], 1101);
    assert_eq!(first["cache_read_input_tokens"], 0);
    let second = usage(&body);
    assert_eq!(
        (
            second["cache_read_input_tokens"].clone(),
            second["cache_creation_input_tokens"].clone()
        ),
        (json!(1101), json!(0))
    );
    // Too short to cache: no counts, no error.
    let short = base(json!({"system": [{"type": "text", "text": "brief", "cache_control": cc}]}));
    assert_eq!(usage(&short)["cache_creation_input_tokens"], 0);
}

/// `call=NAME:WORD`: the named tool, with `echo WORD` for a shell tool.
#[test]
fn directed_tool_call() {
    let bash = json!({"name": "Bash", "input_schema": {"type": "object", "required": ["command"],
        "properties": {"command": {"type": "string"}, "description": {"type": "string"}, "timeout": {"type": "number"}}}});
    let body = json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "x"}],
        "tools": [{"name": "Other", "input_schema": {}}, bash]});
    let p = Anthropic.parse(&body).unwrap();
    let a = plan(&p, &Scenario::parse("call=Bash:mark-1"), "anthropic", None);
    assert_eq!(a.tool_calls.len(), 1);
    assert_eq!(a.tool_calls[0].name, "Bash");
    assert_eq!(
        a.tool_calls[0].arguments,
        json!({"command": "echo mark-1", "description": "Print mark-1"})
    );
    // A tool not offered: no call.
    let a = plan(&p, &Scenario::parse("call=Nope"), "anthropic", None);
    assert!(a.tool_calls.is_empty());
    // Numbered by the conversation's calls, unless the ids must be unique.
    assert_eq!(
        plan(&p, &Scenario::parse("call=Bash:m"), "anthropic", None).tool_calls[0].n,
        1
    );
    let unique = Scenario::parse("call=Bash:m, unique-ids");
    let (first, second) = (
        plan(&p, &unique, "anthropic", None),
        plan(&p, &unique, "anthropic", None),
    );
    assert!(first.tool_calls[0].n > 1 && second.tool_calls[0].n > first.tool_calls[0].n);
}

#[test]
fn anthropic_tool_result_round_trip() {
    let body = json!({"model": "m", "max_tokens": 100, "tools": [{"name": "f", "input_schema": {}}],
        "tool_choice": {"type": "any"},
        "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "text", "text": "Let me check."},
                                              {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": [{"type": "text", "text": "42"}]}]}]});
    let p = Anthropic.parse(&body).unwrap();
    let a = plan(
        &p,
        &Scenario::default(),
        "anthropic",
        Anthropic.tool_preface(),
    );
    let v = Anthropic.response(&p, &a, Meta { seq: 1, created: 1 });
    assert_eq!(
        v["content"],
        json!([{"type": "text", "text": "Tool result received: 42"}])
    );
    assert_eq!(v["stop_reason"], "end_turn");
}

#[test]
fn error_bodies() {
    let r = OpenAi.error(&Failure::Status(429));
    assert_eq!((r.status, r.retry_after), (429, Some("7")));
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["error"]["type"], "requests");
    assert_eq!(v["error"]["code"], "rate_limit_exceeded");
    assert_eq!(OpenAi.error(&Failure::Status(529)).status, 503);
    let v: Value = serde_json::from_str(&OpenAi.error(&Failure::ContextLength).body).unwrap();
    assert_eq!(v["error"]["code"], "context_length_exceeded");
    for (status, kind) in [
        (403, "permission_error"),
        (413, "request_too_large"),
        (503, "api_error"),
        (529, "overloaded_error"),
    ] {
        let r = Anthropic.error(&Failure::Status(status));
        assert_eq!(r.status, status);
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["error"]["type"], kind);
    }
}

// ---- through a real socket ----

pub(crate) fn start() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let state = Arc::new(State::new(false, false, None));
    std::thread::spawn(move || serve(listener, state));
    addr
}

/// Minimal client: returns (status, lowercased head, body, terminated).
fn exchange(r: &mut BufReader<TcpStream>, raw: &str) -> (u16, String, String, bool) {
    r.get_mut().write_all(raw.as_bytes()).unwrap();
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line.to_ascii_lowercase());
    }
    let status = head[9..12].parse().unwrap();
    let mut body = Vec::new();
    let mut terminated = true;
    if head.contains("transfer-encoding: chunked") {
        r.read_to_end(&mut body).unwrap_or(0);
        let (b, _, t) = dechunk(&body);
        body = b;
        terminated = t;
    } else if let Some(l) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
    {
        body.resize(l.trim().parse().unwrap(), 0);
        r.read_exact(&mut body).unwrap();
    }
    (status, head, String::from_utf8(body).unwrap(), terminated)
}

fn connect(addr: &str) -> BufReader<TcpStream> {
    BufReader::new(TcpStream::connect(addr).unwrap())
}

#[test]
fn socket_keep_alive_chunked_body_and_recording() {
    let addr = start();
    let mut c = connect(&addr);
    let body = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"ping"}],"max_tokens":3}"#;
    let (a, b) = body.split_at(10);
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer sk-mock-openai\r\nX-Test-Id: T1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    let (status, _, resp, _) = exchange(&mut c, &req);
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&resp).unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["content"], "Hello from the");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"],
        0
    );

    // Same connection: missing key, then an anthropic scenario error.
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (status, _, resp, _) = exchange(&mut c, &req);
    assert_eq!(status, 401);
    assert!(resp.contains("invalid_api_key"));
    // Scenario errors answer only requests the vendor accepts: a valid body.
    let body = r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#;
    let req = format!("POST /v1/messages HTTP/1.1\r\nx-api-key: sk-mock-anthropic\r\nanthropic-version: 2023-06-01\r\nx-mock-scenario: error-429\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    let req = req.as_str();
    let (status, head, resp, _) = exchange(&mut c, req);
    assert_eq!(status, 429);
    assert!(head.contains("retry-after: 7"));
    assert!(resp.contains("rate_limit_error"));

    let (status, _, resp, _) = exchange(&mut c, "GET /_mock/requests?test_id=T1 HTTP/1.1\r\n\r\n");
    assert_eq!(status, 200);
    let list: Value = serde_json::from_str(&resp).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["headers"]["x-test-id"], "T1");
    assert_eq!(list[0]["body"]["model"], "gpt-4o");
    let (_, _, resp, _) = exchange(&mut c, "GET /_mock/requests HTTP/1.1\r\n\r\n");
    assert_eq!(
        serde_json::from_str::<Value>(&resp)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let (status, _, _, _) = exchange(&mut c, "DELETE /_mock/requests HTTP/1.1\r\n\r\n");
    assert_eq!(status, 200);
    let (_, _, resp, _) = exchange(
        &mut c,
        "GET /_mock/requests HTTP/1.1\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(resp, "[]");
}

#[test]
fn socket_fail_first_and_cut() {
    let addr = start();
    let body = r#"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"x"}]}"#;
    let req = |scenario: &str| {
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer sk-mock-openai\r\nx-request-id: r1\r\nx-mock-scenario: {scenario}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let (status, _, _, _) = exchange(&mut connect(&addr), &req("fail-first"));
    assert_eq!(status, 503);
    let (status, head, resp, terminated) = exchange(&mut connect(&addr), &req("fail-first"));
    assert_eq!(status, 200);
    assert!(head.contains("text/event-stream"));
    assert!(terminated && resp.ends_with("data: [DONE]\n\n"));
    let (status, _, resp, terminated) = exchange(&mut connect(&addr), &req("cut"));
    assert_eq!(status, 200);
    assert!(!terminated, "cut: no terminating chunk");
    assert!(!resp.ends_with("\n\n"), "cut mid-event");
    let (_, _, resp, _) = exchange(&mut connect(&addr), &req("empty-200"));
    assert_eq!(resp, "not json");
}

pub(crate) fn post(
    addr: &str,
    path: &str,
    headers: &str,
    body: &Value,
) -> (u16, String, String, bool) {
    let body = body.to_string();
    let req = format!(
        "POST {path} HTTP/1.1\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    exchange(&mut connect(addr), &req)
}

const GEMINI_STREAM: &str = "/v1beta/models/gemini-x:streamGenerateContent?alt=sse";
const GEMINI_KEY: &str = "x-goog-api-key: mock-gemini-key\r\n";

#[test]
fn gemini_validates_like_the_real_api() {
    let addr = start();
    let path = "/v1beta/models/gemini-x:generateContent";
    let ok = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let (status, _, resp, _) = post(&addr, path, "", &ok);
    assert_eq!(status, 403, "no key: {resp}");
    assert!(resp.contains("PERMISSION_DENIED"));
    for (body, needle) in [
        (
            json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "temperature": 1}),
            "Unknown name \"temperature\"",
        ),
        (
            json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"max_tokens": 1}}),
            "at 'generation_config'",
        ),
        (
            json!({"contents": [{"role": "assistant", "parts": [{"text": "hi"}]}]}),
            "valid role",
        ),
        (json!({"contents": []}), "contents is not specified"),
        (
            json!({"contents": [{"role": "user", "parts": [{"text": "hi", "tool_call_id": "x"}]}]}),
            "at 'contents[0].parts[0]'",
        ),
        (
            json!({"contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"result": "x"}}}]}]}),
            "missing a thought_signature",
        ),
        (
            json!({"contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "skip_thought_signature_validator"},
                                        {"functionCall": {"name": "g", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"result": "x"}}}]}]}),
            "number of function response parts",
        ),
    ] {
        let (status, _, resp, _) = post(&addr, path, GEMINI_KEY, &body);
        assert_eq!(status, 400, "{body}");
        let v: Value = serde_json::from_str(&resp).unwrap();
        assert_eq!(v["error"]["status"], "INVALID_ARGUMENT");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(needle),
            "{resp}"
        );
    }
    let (status, _, resp, _) = post(&addr, path, GEMINI_KEY, &ok);
    assert_eq!(status, 200, "{resp}");
    let v: Value = serde_json::from_str(&resp).unwrap();
    assert_eq!(v["modelVersion"], "gemini-x");
    assert_eq!(v["candidates"][0]["finishReason"], "STOP");
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0]["text"],
        "Hello from the mock gemini provider. You said: hi"
    );
    let (status, _, resp, _) = post(
        &addr,
        path,
        &format!("{GEMINI_KEY}x-mock-scenario: error-401\r\n"),
        &ok,
    );
    assert_eq!(status, 400, "a bad key is a 400 at Google");
    assert!(resp.contains("API_KEY_INVALID"));
}

#[test]
fn gemini_stream_is_crlf_with_signed_calls() {
    let addr = start();
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "weather?"}]}],
        "tools": [{"functionDeclarations": [{"name": "get_weather", "parametersJsonSchema": {
            "type": "object", "properties": {"city": {"type": "string"}}}}, {"name": "get_time"}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}}});
    let (status, head, resp, terminated) = post(
        &addr,
        GEMINI_STREAM,
        &format!("{GEMINI_KEY}x-mock-scenario: two-tools\r\n"),
        &body,
    );
    assert_eq!(status, 200);
    assert!(head.contains("text/event-stream") && terminated);
    assert!(resp.ends_with("\r\n\r\n") && !resp.replace("\r\n", "").contains('\n'));
    let ev = parse_sse(&resp);
    assert_eq!(ev.len(), 1, "function calls arrive whole in one event");
    let v = data(&ev[0]);
    let parts = &v["candidates"][0]["content"]["parts"];
    assert_eq!(
        parts[0]["functionCall"],
        json!({"name": "get_weather", "args": {"city": "example"}})
    );
    assert!(parts[0]["thoughtSignature"]
        .as_str()
        .unwrap()
        .starts_with("bW9ja3NpZy+/"));
    assert!(parts[1].get("thoughtSignature").is_none());
    assert_eq!(v["candidates"][0]["finishReason"], "STOP");
    let (status, _, _, _) = post(
        &addr,
        "/v1beta/models/gemini-x:streamGenerateContent",
        GEMINI_KEY,
        &body,
    );
    assert_eq!(status, 400, "the mock speaks only alt=sse");
}

#[test]
fn gemini_and_azure_content_filter_scenarios() {
    let addr = start();
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let blocked = format!("{GEMINI_KEY}x-mock-scenario: blocked-prompt\r\n");
    let (status, _, resp, _) = post(&addr, "/v1beta/models/g:generateContent", &blocked, &gemini);
    assert_eq!(status, 200, "Gemini blocks a prompt with a 200");
    let v: Value = serde_json::from_str(&resp).unwrap();
    assert_eq!(v["promptFeedback"]["blockReason"], "SAFETY");
    assert!(v.get("candidates").is_none());
    let (_, _, resp, _) = post(&addr, GEMINI_STREAM, &blocked, &gemini);
    assert_eq!(
        data(&parse_sse(&resp)[0])["promptFeedback"]["blockReason"],
        "SAFETY"
    );
    let filtered = format!("{GEMINI_KEY}x-mock-scenario: filtered-stream\r\n");
    let (_, _, resp, _) = post(&addr, GEMINI_STREAM, &filtered, &gemini);
    let ev = parse_sse(&resp);
    assert_eq!(ev.len(), 4, "three words, then the verdict");
    assert_eq!(data(&ev[3])["candidates"][0]["finishReason"], "SAFETY");

    let path = "/openai/deployments/dep/chat/completions?api-version=2024-10-21";
    let azure =
        json!({"model": "dep", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let (status, _, resp, _) = post(&addr, path, "", &azure);
    assert_eq!(status, 401, "{resp}");
    let (status, _, resp, _) = post(
        &addr,
        path,
        "api-key: mock-azure-key\r\nx-mock-scenario: blocked-prompt\r\n",
        &azure,
    );
    assert_eq!(status, 400);
    let v: Value = serde_json::from_str(&resp).unwrap();
    assert_eq!(
        v["error"]["innererror"]["code"],
        "ResponsibleAIPolicyViolation"
    );
    let (status, _, resp, _) = post(
        &addr,
        path,
        "api-key: mock-azure-key\r\nx-mock-scenario: filtered-stream\r\n",
        &azure,
    );
    assert_eq!(status, 200);
    let ev = parse_sse(&resp);
    let first = data(&ev[0]);
    assert_eq!(first["choices"], json!([]));
    assert!(first["prompt_filter_results"].is_array());
    let finish = data(&ev[ev.len() - 2]);
    assert_eq!(finish["choices"][0]["finish_reason"], "content_filter");
    assert_eq!(
        finish["choices"][0]["content_filter_results"]["violence"]["filtered"],
        true
    );
}

// --- Bedrock and DashScope ------------------------------------------------------

/// The raw stream bytes of a dialect whose stream mode comes from the
/// path or a header rather than the body.
fn raw_stream(d: &dyn Dialect, body: Value, scenario: &str) -> Vec<u8> {
    let sc = Scenario::parse(scenario);
    let mut p = d.parse(&body).unwrap();
    p.stream = true;
    let a = plan(&p, &sc, d.name(), d.tool_preface());
    let events = d.stream(&p, &a, Meta { seq: 7, created: 1 });
    let encode = |i: usize, e: &crate::dialect::SseEvent, crlf: bool, out: &mut Vec<u8>| {
        d.encode_event(i, e, crlf, out)
    };
    let mut out = Vec::new();
    send(&mut out, &events, &d.stream_error(), &sc, &encode).unwrap();
    let (body, _, terminated) = dechunk(&out);
    assert!(terminated);
    body
}

/// Splits an AWS event stream into (headers, payload), checking both CRCs.
fn frames(mut raw: &[u8]) -> Vec<(Vec<(String, String)>, Value)> {
    let be = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap()) as usize;
    let mut out = Vec::new();
    while !raw.is_empty() {
        let total = be(&raw[0..4]);
        let headers_len = be(&raw[4..8]);
        assert_eq!(crate::bedrock::crc32(&raw[..8]) as usize, be(&raw[8..12]));
        assert_eq!(
            crate::bedrock::crc32(&raw[..total - 4]) as usize,
            be(&raw[total - 4..total])
        );
        let mut h = &raw[12..12 + headers_len];
        let mut headers = Vec::new();
        while !h.is_empty() {
            let n = h[0] as usize;
            let name = String::from_utf8(h[1..1 + n].to_vec()).unwrap();
            assert_eq!(h[1 + n], 7, "string header");
            let len = u16::from_be_bytes([h[2 + n], h[3 + n]]) as usize;
            headers.push((
                name,
                String::from_utf8(h[4 + n..4 + n + len].to_vec()).unwrap(),
            ));
            h = &h[4 + n + len..];
        }
        out.push((
            headers,
            serde_json::from_slice(&raw[12 + headers_len..total - 4]).unwrap(),
        ));
        raw = &raw[total..];
    }
    out
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .unwrap()
}

#[test]
fn crc32_check_value() {
    assert_eq!(crate::bedrock::crc32(b"123456789"), 0xCBF4_3926);
}

#[test]
fn bedrock_tool_stream_frames() {
    let body = json!({"messages": [{"role": "user", "content": [{"text": "weather?"}]}],
        "toolConfig": {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": {
            "type": "object", "properties": {"city": {"type": "string"}}}}}}], "toolChoice": {"any": {}}}});
    let fr = frames(&raw_stream(&Bedrock { credentials: None }, body, "split"));
    let kinds: Vec<&str> = fr.iter().map(|(h, _)| header(h, ":event-type")).collect();
    assert_eq!(kinds.first(), Some(&"messageStart"));
    assert_eq!(kinds[1], "contentBlockStart");
    assert_eq!(
        fr[1].1["start"]["toolUse"],
        json!({"toolUseId": "tooluse_1", "name": "get_weather"})
    );
    let args: String = fr
        .iter()
        .filter(|(h, _)| header(h, ":event-type") == "contentBlockDelta")
        .map(|(_, p)| p["delta"]["toolUse"]["input"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(args, r#"{"city":"example"}"#);
    assert_eq!(&kinds[kinds.len() - 2..], ["messageStop", "metadata"]);
    assert_eq!(fr[fr.len() - 2].1["stopReason"], "tool_use");
    assert!(fr.iter().all(|(h, _)| header(h, ":message-type") == "event"
        && header(h, ":content-type") == "application/json"));
}

#[test]
fn bedrock_exception_and_filter_in_stream() {
    let body = json!({"messages": [{"role": "user", "content": [{"text": "a b c d e"}]}]});
    let d = Bedrock { credentials: None };
    let fr = frames(&raw_stream(&d, body.clone(), "stream-error"));
    let (h, p) = fr.last().unwrap();
    assert_eq!(header(h, ":message-type"), "exception");
    assert_eq!(header(h, ":exception-type"), "serviceUnavailableException");
    assert!(p["message"].is_string());
    let fr = frames(&raw_stream(&d, body, "filtered-stream"));
    assert_eq!(fr[fr.len() - 2].1["stopReason"], "guardrail_intervened");
}

#[test]
fn bedrock_validation() {
    let d = Bedrock { credentials: None };
    let bad = |body: Value| match d.parse(&body) {
        Err(Failure::Invalid(m)) => m,
        other => panic!("{other:?}"),
    };
    assert!(bad(json!({"messages": [], "stream": true})).contains("extraneous key [stream]"));
    assert!(
        bad(json!({"messages": [{"role": "assistant", "content": [{"text": "x"}]}]}))
            .contains("alternate")
    );
    let tool_use = json!({"messages": [
        {"role": "user", "content": [{"text": "x"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "ok"}]}}]}]});
    assert!(bad(tool_use.clone()).contains("toolConfig field must be defined"));
    let mut with_config = tool_use;
    with_config["toolConfig"] =
        json!({"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {}}}}]});
    let p = d.parse(&with_config).unwrap();
    assert_eq!(p.tool_results, Some(vec!["ok".to_owned()]));
    assert_eq!(p.prior_tool_calls, 1);
    assert!(
        bad(json!({"messages": [{"role": "user", "content": [{"text": "x", "image": {}}]}]}))
            .contains("exactly one")
    );
}

#[test]
fn dashscope_stream_lines() {
    let body = json!({"model": "qwen-plus", "input": {"messages": [{"role": "user", "content": "hi"}]},
                      "parameters": {"result_format": "message", "incremental_output": true}});
    let raw = String::from_utf8(raw_stream(&DashScope, body.clone(), "")).unwrap();
    let events: Vec<&str> = raw.split("\n\n").filter(|e| !e.is_empty()).collect();
    for (i, e) in events.iter().enumerate() {
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines[0], format!("id:{}", i + 1));
        assert_eq!(lines[1], "event:result");
        assert_eq!(lines[2], ":HTTP_STATUS/200");
        assert!(lines[3].starts_with("data:{"));
    }
    let last: Value =
        serde_json::from_str(events.last().unwrap().lines().nth(3).unwrap()[5..].trim()).unwrap();
    assert_eq!(last["output"]["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["usage"]["output_tokens"], 9);
    let raw = String::from_utf8(raw_stream(&DashScope, body, "filtered-stream")).unwrap();
    let last = raw.trim_end().rsplit("\n\n").next().unwrap();
    assert!(
        last.contains("event:error\n:HTTP_STATUS/400\ndata:{\"code\":\"DataInspectionFailed\""),
        "{last}"
    );
}

#[test]
fn dashscope_validation_and_filters() {
    let d = DashScope;
    let body = json!({"model": "qwen-plus", "input": {"messages": [{"role": "user", "content": "hi"}]},
                      "parameters": {"result_format": "text"}});
    assert!(matches!(d.parse(&body), Err(Failure::Invalid(m)) if m.contains("result_format")));
    let p = Prompt::default();
    let meta = Meta { seq: 1, created: 1 };
    let Some(Filtered::Reply(r)) = d.filtered(Filter::BlockedPrompt, &p, meta) else {
        panic!("DashScope refuses a blocked prompt with an error reply");
    };
    assert_eq!(r.status, 400);
    assert!(r.body.contains("DataInspectionFailed"));
    let r = d.error(&Failure::Status(429));
    assert_eq!(r.status, 429);
    assert!(r.body.contains("Throttling.RateQuota"));
}

/// The vendors' own web search tools, in their real shapes only: Anthropic's
/// server tool (never a tool the model calls here), Gemini's Google Search
/// (not beside function declarations), Qwen's `enable_search`.
#[test]
fn web_search_tools_as_each_vendor_takes_them() {
    let msgs = json!([{"role": "user", "content": "news?"}]);
    let anthropic = |tool: Value| {
        Anthropic.parse(&json!({"model": "m", "max_tokens": 9, "messages": msgs,
                                "tools": [{"name": "f", "input_schema": {"type": "object"}}, tool]}))
    };
    let p = anthropic(
        json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 3,
        "allowed_domains": ["example.com"],
        "user_location": {"type": "approximate", "city": "Lyon", "country": "FR"}}),
    )
    .unwrap();
    assert_eq!(
        p.tools.len(),
        1,
        "Anthropic runs the search, the model never calls it"
    );
    for (tool, want) in [
        (
            json!({"type": "web_search_20250305", "name": "search"}),
            "tools.1.web_search_20250305.name: Input should be 'web_search'",
        ),
        (
            json!({"type": "web_search_20250305", "name": "web_search", "filters": {}}),
            "tools.1.web_search_20250305.filters: Extra inputs are not permitted",
        ),
        (
            json!({"type": "web_search_20250305", "name": "web_search",
                   "allowed_domains": ["a.com"], "blocked_domains": ["b.com"]}),
            "cannot specify both allowed_domains and blocked_domains",
        ),
        (
            json!({"type": "web_search_20250305", "name": "web_search",
                   "user_location": {"type": "exact"}}),
            "user_location.type: Input should be 'approximate'",
        ),
    ] {
        match anthropic(tool.clone()) {
            Err(Failure::Invalid(msg)) => assert!(msg.contains(want), "{msg:?} vs {want:?}"),
            other => panic!("{tool}: expected 400, got {other:?}"),
        }
    }
    let gemini = |tools: Value| {
        crate::gemini::Gemini.parse(
            &json!({"contents": [{"role": "user", "parts": [{"text": "news?"}]}], "tools": tools}),
        )
    };
    assert!(gemini(json!([{"googleSearch": {}}])).is_ok());
    for (tools, want) in [(
        json!([{"googleSearch": {"allowedDomains": ["a.com"]}}]),
        "Unknown name \"allowedDomains\" at 'tools[0].google_search'",
    )] {
        match gemini(tools.clone()) {
            Err(Failure::Invalid(msg)) => assert!(msg.contains(want), "{msg:?} vs {want:?}"),
            other => panic!("{tools}: expected 400, got {other:?}"),
        }
    }
    let addr = start();
    // Search beside function declarations: Gemini 3 only, and only with
    // includeServerSideToolInvocations, whose invocation parts then come first.
    let mixed = |model: &str, config: Value, stream: bool| {
        let body = json!({"contents": [{"role": "user", "parts": [{"text": "news?"}]}],
            "tools": [{"functionDeclarations": [{"name": "f"}]}, {"googleSearch": {}}],
            "toolConfig": config});
        let method = if stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        post(
            &addr,
            &format!("/v1beta/models/{model}:{method}"),
            GEMINI_KEY,
            &body,
        )
    };
    let flag = json!({"includeServerSideToolInvocations": true});
    for (model, config, want) in [
        (
            "gemini-2.5-flash",
            json!({}),
            "Tool use with function calling is unsupported",
        ),
        (
            "gemini-2.5-flash",
            flag.clone(),
            "Tool use with function calling is unsupported",
        ),
        (
            "gemini-3-pro-preview",
            json!({}),
            "include_server_side_tool_invocations",
        ),
        (
            "gemini-3-pro-preview",
            json!({"includeServerSideToolInvocations": "yes"}),
            "TYPE_BOOL",
        ),
    ] {
        let (status, _, body, _) = mixed(model, config, false);
        assert_eq!(status, 400, "{model}: {body}");
        assert!(body.contains(want), "{body}");
    }
    let (status, _, body, _) = mixed("gemini-3-pro-preview", flag.clone(), false);
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let parts = &v["candidates"][0]["content"]["parts"];
    assert_eq!(parts[0]["toolCall"]["toolType"], "GOOGLE_SEARCH_WEB");
    assert!(parts[0]["thoughtSignature"].is_string());
    assert_eq!(parts[1]["toolResponse"]["id"], parts[0]["toolCall"]["id"]);
    assert!(parts[2]["text"].is_string());
    let (status, _, body, _) = mixed("gemini-3-pro-preview", flag, true);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"toolCall\"") && body.contains("\"toolResponse\""),
        "{body}"
    );
    let qwen = |search: Value| {
        let body = json!({"model": "qwen-plus", "input": {"messages": [{"role": "user", "content": "hi"}]},
                          "parameters": {"result_format": "message", "enable_search": search}});
        post(
            &addr,
            "/api/v1/services/aigc/text-generation/generation",
            "Authorization: Bearer sk-mock-dashscope\r\n",
            &body,
        )
    };
    assert_eq!(qwen(json!(true)).0, 200);
    let (status, _, body, _) = qwen(json!("yes"));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("enable_search must be a boolean"), "{body}");
}

#[test]
fn anthropic_pauses_a_server_tool_turn_and_answers_its_continuation() {
    let addr = start();
    let headers = "x-api-key: sk-mock-anthropic\r\nanthropic-version: 2023-06-01\r\n\
                   x-mock-scenario: pause-turn\r\n";
    let search = json!({"type": "web_search_20250305", "name": "web_search"});
    let ask = |messages: Value, tools: Value, stream: bool| {
        let body = json!({"model": "m", "max_tokens": 100, "messages": messages, "tools": tools,
                          "stream": stream});
        post(&addr, "/v1/messages", headers, &body)
    };
    let question = json!([{"role": "user", "content": "news?"}]);
    let (status, _, body, _) = ask(question.clone(), json!([search]), false);
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["stop_reason"], "pause_turn");
    let content = v["content"].as_array().unwrap();
    assert_eq!(content.last().unwrap()["type"], "server_tool_use");
    let (_, _, body, _) = ask(question.clone(), json!([search]), true);
    assert!(body.contains(r#""stop_reason":"pause_turn""#), "{body}");
    assert!(body.contains(r#""type":"server_tool_use""#), "{body}");
    // Sent back as it came, the turn goes on to its end.
    let mut continued = question.as_array().unwrap().clone();
    continued.push(json!({"role": "assistant", "content": content}));
    let (status, _, body, _) = ask(Value::Array(continued), json!([search]), false);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["stop_reason"],
        "end_turn"
    );
    // Without its server tool there is nothing to pause.
    let (_, _, body, _) = ask(question, json!([]), false);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["stop_reason"],
        "end_turn"
    );
}

#[test]
fn a_prompt_over_the_window_gets_each_vendors_own_error() {
    let prompt = |words, max_tokens| Prompt {
        prompt_words: words,
        max_tokens,
        ..Prompt::default()
    };
    let over = |vendor, p: &Prompt| crate::server::over_window(vendor, p, 4096);
    assert_eq!(over("openai", &prompt(4096, None)), None);
    // OpenAI counts the completion too; Anthropic and Gemini the input only.
    let openai = over("openai", &prompt(4000, Some(100))).unwrap();
    let r = OpenAi.error(&openai);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        (r.status, v["error"]["code"].as_str()),
        (400, Some("context_length_exceeded"))
    );
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("maximum context length is 4096 tokens"));
    assert_eq!(over("anthropic", &prompt(4000, Some(100))), None);
    let r = Anthropic.error(&over("anthropic", &prompt(5000, None)).unwrap());
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        v["error"]["message"],
        "prompt is too long: 5000 tokens > 4096 maximum"
    );
    let r = crate::gemini::Gemini.error(&over("gemini", &prompt(5000, None)).unwrap());
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["error"]["status"], "INVALID_ARGUMENT");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("The input token count (5000) exceeds"));
}

#[test]
fn gemini_answers_candidate_count_candidates_and_refuses_more_than_8() {
    let addr = start();
    let path = "/v1beta/models/gemini-x:generateContent";
    let ask = |n: i64| {
        json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
               "generationConfig": {"candidateCount": n}})
    };
    let (status, _, resp, _) = post(&addr, path, GEMINI_KEY, &ask(2));
    assert_eq!(status, 200, "{resp}");
    let v: Value = serde_json::from_str(&resp).unwrap();
    let candidates = v["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 2);
    for (i, c) in candidates.iter().enumerate() {
        assert_eq!(c["index"], i);
        assert_eq!(c["finishReason"], "STOP");
    }
    let one: Value = serde_json::from_str(&post(&addr, path, GEMINI_KEY, &ask(1)).2).unwrap();
    let per_candidate = one["usageMetadata"]["candidatesTokenCount"]
        .as_u64()
        .unwrap();
    assert_eq!(
        v["usageMetadata"]["candidatesTokenCount"],
        2 * per_candidate
    );
    for n in [0, 9] {
        let (status, _, resp, _) = post(&addr, path, GEMINI_KEY, &ask(n));
        assert_eq!(status, 400, "{n}: {resp}");
        assert!(resp.contains("candidateCount"), "{resp}");
    }
    // Streamed: every event carries each candidate under its index.
    let (status, _, resp, _) = post(&addr, GEMINI_STREAM, GEMINI_KEY, &ask(3));
    assert_eq!(status, 200, "{resp}");
    let events: Vec<Value> = resp
        .split("\r\n\r\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert!(events.len() > 1);
    for e in &events {
        let indexes: Vec<_> = e["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["index"].as_u64().unwrap())
            .collect();
        assert_eq!(indexes, [0, 1, 2]);
    }
}

#[test]
fn openai_answers_n_choices_and_refuses_more_than_128() {
    let body = |n: i64, stream: bool| {
        json!({"model": "gpt-4o", "n": n, "stream": stream,
               "messages": [{"role": "user", "content": "hi there"}]})
    };
    let p = OpenAi.parse(&body(2, false)).unwrap();
    let a = plan(&p, &Scenario::parse(""), "openai", None);
    let v = OpenAi.response(&p, &a, Meta { seq: 1, created: 1 });
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 2);
    assert_eq!(
        (choices[0]["index"].as_u64(), choices[1]["index"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(choices[0]["message"], choices[1]["message"]);
    assert_eq!(v["usage"]["completion_tokens"], 20, "every choice's tokens");
    for (n, needle) in [(0, ">= 1"), (129, "<= 128")] {
        match OpenAi.parse(&body(n, false)) {
            Err(Failure::Param { message, param, .. }) => {
                assert!(message.contains(needle), "{message}");
                assert_eq!(param, "n");
            }
            other => panic!("{n}: {other:?}"),
        }
    }
    let ev = stream(&OpenAi, body(2, true), "");
    let chunks: Vec<Value> = ev.iter().take(ev.len() - 1).map(data).collect();
    let text_of = |index: u64| -> String {
        chunks
            .iter()
            .map(|c| &c["choices"][0])
            .filter(|c| c["index"] == index)
            .filter_map(|c| c["delta"]["content"].as_str())
            .collect()
    };
    assert_eq!(text_of(0), text_of(1));
    assert!(text_of(1).ends_with("You said: hi there"));
    let finishes: Vec<_> = chunks
        .iter()
        .map(|c| &c["choices"][0])
        .filter(|c| c["finish_reason"] == "stop")
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    assert_eq!(finishes, [0, 1]);
}
