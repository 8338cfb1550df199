use super::*;
use crate::dialects::count::Counter;
use serde_json::Value;

#[test]
fn another_apis_count_is_the_generation_less_what_count_tokens_refuses() {
    let config = crate::config::Config::parse(
        br#"{"providers":{"an":{"dialect":"anthropic","api_key":"k"}},
             "model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
        |_| None,
    )
    .unwrap();
    let target = Target {
        provider: &config.providers["an"],
        model: "claude-x",
    };
    let req = ChatRequest::parse(
        br#"{"model":"g","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],
            "temperature":0.5,"max_tokens":10,"stop":["X"],"stream":true}"#,
    )
    .unwrap();
    let up = Anthropic.encode_count(&req, &target).unwrap().unwrap();
    assert_eq!(up.path, "/v1/messages/count_tokens");
    let body: Value = serde_json::from_slice(&up.body).unwrap();
    assert_eq!(body["model"], "claude-x");
    assert!(body["system"].is_array() && body["messages"].is_array());
    for gone in ["max_tokens", "temperature", "stop_sequences", "stream"] {
        assert!(body.get(gone).is_none(), "{gone}: {body}");
    }
    assert_eq!(Anthropic.decode_count(br#"{"input_tokens":7}"#).unwrap(), 7);
    assert!(Anthropic.decode_count(b"{}").is_err());
}

#[test]
fn count_tokens_is_the_clients_body_with_the_vendor_model() {
    let config = crate::config::Config::parse(
        br#"{"providers":{"an":{"dialect":"anthropic","api_key":"k","base_path":"/anthropic"}},
             "model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
        |_| None,
    )
    .unwrap();
    let target = Target {
        provider: &config.providers["an"],
        model: "claude-x",
    };
    let body = br#"{"model":"g","messages":[{"role":"user","content":"hi"}]}"#;
    let raw = || body.to_vec();
    let up = Anthropic
        .encode_call(
            &crate::surfaces::routed_call("POST", "/v1/messages/count_tokens", ""),
            &raw,
            &target,
        )
        .unwrap()
        .unwrap();
    assert_eq!(up.path, "/anthropic/v1/messages/count_tokens");
    assert!(up.headers.contains(&("x-api-key", "k".into())));
    assert_eq!(
        up.body,
        br#"{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}"#
    );
    let stored = crate::surfaces::routed_call("GET", "/v1/responses/resp_1", "");
    assert!(Anthropic.encode_call(&stored, &raw, &target).is_none());
    // Another API's count is not Anthropic's to send (its body is Gemini's).
    let gemini = crate::surfaces::routed_call("POST", "/v1beta/models/g:countTokens", "");
    assert!(Anthropic.encode_call(&gemini, &raw, &target).is_none());
    assert!(crate::dialects::gemini::Gemini
        .encode_call(
            &crate::surfaces::routed_call("POST", "/v1/messages/count_tokens", ""),
            &raw,
            &target
        )
        .is_none());
}

const PROVIDER: &str = r#"{"dialect":"anthropic","api_key":"sk-ant","default_max_tokens":1000}"#;

fn encode(body: &str) -> Value {
    let (up, v) = crate::dialects::encode_for(&Anthropic, PROVIDER, "claude-x", body).unwrap();
    assert_eq!(up.path, "/v1/messages");
    assert!(up.headers.contains(&("x-api-key", "sk-ant".into())));
    assert!(up
        .headers
        .contains(&("anthropic-version", API_VERSION.into())));
    v
}

#[test]
fn a_named_budget_without_an_output_limit_gets_room_for_the_answer() {
    let ask = |limit: &str| {
        format!(
            r#"{{"model":"g","messages":[{{"role":"user","content":"hi"}}],"reasoning":{{"max_tokens":8192}}{limit}}}"#
        )
    };
    // No limit named: the answer's default tokens come on top of the budget.
    let v = encode(&ask(""));
    assert_eq!(v["thinking"]["budget_tokens"], 8192);
    assert_eq!(v["max_tokens"], 8192 + 1000);
    // A limit named must hold the budget, as Claude requires.
    let e = crate::dialects::encode_for(
        &Anthropic,
        PROVIDER,
        "claude-x",
        &ask(r#","max_tokens":4096"#),
    )
    .unwrap_err();
    assert_eq!(e.param.as_deref(), Some("max_tokens"));
}

#[test]
fn encodes_system_defaults_and_sampling() {
    let v = encode(
        r#"{"model":"g","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],
            "temperature":1.5,"top_p":0.5,"stop":["X"],"user":"u1","seed":3,"logprobs":true,"stream":true,
            "stream_options":{"include_usage":true}}"#,
    );
    assert_eq!(
        v,
        serde_json::json!({
            "model":"claude-x","max_tokens":1000,
            "system":[{"type":"text","text":"be brief"}],
            "messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],
            "stop_sequences":["X"],"temperature":1.0,
            "metadata":{"user_id":"u1"},"stream":true
        })
    );
}

#[test]
fn encodes_tools_round_trip() {
    let v = encode(
        r#"{"model":"g","max_completion_tokens":50,"messages":[
            {"role":"user","content":[{"type":"text","text":"weather?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD"}},{"type":"image_url","image_url":{"url":"https://x/y.jpg"}}]},
            {"role":"assistant","content":"checking","tool_calls":[
                {"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
                {"id":"toolu_2","type":"function","function":{"name":"get_time","arguments":""}}]},
            {"role":"tool","tool_call_id":"toolu_1","content":"sunny"},
            {"role":"tool","tool_call_id":"toolu_2","content":[{"type":"text","text":"noon"}]},
            {"role":"user","content":"thanks"}],
          "tools":[{"type":"function","function":{"name":"get_weather","description":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
                   {"type":"function","function":{"name":"get_time"}}],
          "tool_choice":"required","parallel_tool_calls":false}"#,
    );
    assert_eq!(v["max_tokens"], 50);
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(
        msgs.len(),
        3,
        "tool results and the next user text merge into one user turn"
    );
    assert_eq!(
        msgs[0]["content"][1],
        serde_json::json!({"type":"image","source":{"type":"base64","media_type":"image/png","data":"QUJD"}})
    );
    assert_eq!(
        msgs[0]["content"][2],
        serde_json::json!({"type":"image","source":{"type":"url","url":"https://x/y.jpg"}})
    );
    assert_eq!(
        msgs[1]["content"][0],
        serde_json::json!({"type":"text","text":"checking"})
    );
    assert_eq!(
        msgs[1]["content"][1],
        serde_json::json!({"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}})
    );
    assert_eq!(msgs[1]["content"][2]["input"], serde_json::json!({}));
    assert_eq!(msgs[2]["role"], "user");
    assert_eq!(
        msgs[2]["content"][0],
        serde_json::json!({"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"})
    );
    assert_eq!(msgs[2]["content"][1]["content"], "noon");
    assert_eq!(
        msgs[2]["content"][2],
        serde_json::json!({"type":"text","text":"thanks"})
    );
    assert_eq!(
        v["tools"][0]["input_schema"]["properties"]["city"]["type"],
        "string"
    );
    assert_eq!(
        v["tools"][1]["input_schema"],
        serde_json::json!({"type":"object","properties":{}})
    );
    assert_eq!(
        v["tool_choice"],
        serde_json::json!({"type":"any","disable_parallel_tool_use":true})
    );
}

#[test]
fn top_p_only_without_temperature() {
    let v = encode(r#"{"model":"g","messages":[{"role":"user","content":"hi"}],"top_p":0.5}"#);
    assert_eq!(
        (v["top_p"].clone(), v.get("temperature")),
        (serde_json::json!(0.5), None)
    );
}

#[test]
fn tool_history_without_tools_declares_them_with_choice_none() {
    let v = encode(
        r#"{"model":"g","messages":[{"role":"user","content":"weather?"},
            {"role":"assistant","content":null,"tool_calls":[
                {"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"toolu_1","content":"sunny"},
            {"role":"user","content":"thanks"}]}"#,
    );
    assert_eq!(
        v["tools"],
        serde_json::json!([{"name":"get_weather","input_schema":{"type":"object","properties":{}}}])
    );
    assert_eq!(v["tool_choice"], serde_json::json!({"type":"none"}));
    let v = encode(r#"{"model":"g","messages":[{"role":"user","content":"hi"}]}"#);
    assert!(v.get("tools").is_none() && v.get("tool_choice").is_none());
}

#[test]
fn tool_choice_variants() {
    let base = r#"{"model":"g","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":TC}"#;
    for (tc, want) in [
        (r#""auto""#, serde_json::json!({"type":"auto"})),
        (r#""none""#, serde_json::json!({"type":"none"})),
        (
            r#"{"type":"function","function":{"name":"f"}}"#,
            serde_json::json!({"type":"tool","name":"f"}),
        ),
    ] {
        assert_eq!(encode(&base.replace("TC", tc))["tool_choice"], want);
    }
}

#[test]
fn json_mode_goes_into_the_system_prompt() {
    let v = encode(
        r#"{"model":"g","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}"#,
    );
    assert!(v["system"][0]["text"].as_str().unwrap().contains("JSON"));
    assert!(v.get("response_format").is_none());
}

#[test]
fn rejects_n_and_non_object_arguments() {
    let param = |body: &str| {
        crate::dialects::encode_for(&Anthropic, PROVIDER, "m", body)
            .unwrap_err()
            .param
    };
    assert_eq!(
        param(r#"{"model":"g","n":2,"messages":[{"role":"user","content":"x"}]}"#).as_deref(),
        Some("n")
    );
    assert_eq!(
        param(r#"{"model":"g","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}"#).as_deref(),
        Some("messages[0].tool_calls[0].function.arguments")
    );
}

#[test]
fn decodes_response() {
    let body = br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x-1","content":[
        {"type":"thinking","thinking":"hmm","signature":"s"},
        {"type":"text","text":"Let me check."},
        {"type":"tool_use","id":"toolu_9","name":"get_weather","input":{"city":"Paris"}}],
        "stop_reason":"tool_use","stop_sequence":null,
        "usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":4,"cache_creation_input_tokens":1}}"#;
    let mut origin = Origin {
        provider: "an".into(),
        ..Origin::default()
    };
    let d = Anthropic.decode_response(body, &mut origin).unwrap();
    let v: Value = d.chat_json(&origin);
    assert_eq!(v["id"], "msg_1");
    assert_eq!(v["model"], "claude-x-1");
    assert_eq!(v["choices"][0]["message"]["content"], "Let me check.");
    assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["id"], "toolu_9");
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"city\":\"Paris\"}"
    );
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(v["usage"]["prompt_tokens"], 15);
    assert_eq!(v["usage"]["completion_tokens"], 5);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
}

#[test]
fn an_answer_without_a_messages_members_is_unparseable_not_empty() {
    let full = r#""type":"message","id":"msg_1","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}"#;
    // A paused or still-running answer has a null stop_reason.
    let body = format!("{{{full}}}");
    let d = Anthropic
        .decode_response(body.as_bytes(), &mut Origin::default())
        .unwrap();
    assert_eq!(d.finish_reason, None);
    let native = Anthropic
        .decode_native(
            Api::AnthropicMessages,
            body.as_bytes(),
            &mut Origin::default(),
        )
        .unwrap();
    assert_eq!(native.finish_reason, None);
    let mut broken = vec![
        "{}".to_owned(),
        r#"{"type":"error","error":{"type":"api_error","message":"m"}}"#.to_owned(),
        format!(
            "{{{}}}",
            full.replace(r#""type":"message""#, r#""type":"completion""#)
        ),
        format!(
            "{{{}}}",
            full.replace(r#""role":"assistant""#, r#""role":"user""#)
        ),
        format!(
            "{{{}}}",
            full.replace(r#""content":[]"#, r#""content":"hi""#)
        ),
    ];
    for member in [
        r#""type":"message","#,
        r#""id":"msg_1","#,
        r#""role":"assistant","#,
        r#""model":"claude-x","#,
        r#""content":[],"#,
        r#""stop_reason":null,"#,
        r#","usage":{"input_tokens":1,"output_tokens":0}"#,
    ] {
        assert!(full.contains(member), "{member}");
        broken.push(format!("{{{}}}", full.replace(member, "")));
    }
    for body in &broken {
        let e = Anthropic
            .decode_response(body.as_bytes(), &mut Origin::default())
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::UpstreamError, "{body}");
        assert!(
            e.message.contains("could not be parsed"),
            "{body}: {}",
            e.message
        );
        let e = Anthropic
            .decode_native(
                Api::AnthropicMessages,
                body.as_bytes(),
                &mut Origin::default(),
            )
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::UpstreamError, "{body}");
    }
}

#[test]
fn finish_reasons() {
    for (a, o) in [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ] {
        assert_eq!(finish_reason(a).as_str(), o);
    }
}

#[test]
fn maps_errors() {
    let cases = [
        (
            400,
            "invalid_request_error",
            "bad",
            ErrorCode::InvalidRequest,
        ),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 250000 tokens > 200000 maximum",
            ErrorCode::ContextLengthExceeded,
        ),
        (401, "authentication_error", "x", ErrorCode::AuthFailed),
        (403, "permission_error", "x", ErrorCode::PermissionDenied),
        (404, "not_found_error", "x", ErrorCode::ModelNotFound),
        (413, "request_too_large", "x", ErrorCode::PayloadTooLarge),
        (429, "rate_limit_error", "x", ErrorCode::UpstreamRateLimit),
        (500, "api_error", "x", ErrorCode::UpstreamError),
        (
            529,
            "overloaded_error",
            "Overloaded",
            ErrorCode::UpstreamBusy,
        ),
    ];
    for (status, kind, msg, code) in cases {
        let body = format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"{msg}"}}}}"#);
        let e = Anthropic.decode_error(status, body.as_bytes());
        assert_eq!(e.code, code, "{kind}");
        assert_eq!(e.message, msg);
    }
}

pub(crate) const TOOL_STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1,\"cache_read_input_tokens\":2}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me \u{e9}\u{1f30d}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"get_time\",\"input\":{}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":30}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

fn run(chunks: &[&[u8]], include_usage: bool) -> (Vec<Value>, String) {
    let origin = Origin {
        provider: "an".into(),
        model: "req-model".into(),
        ..Origin::default()
    };
    crate::dialects::run_stream(&Anthropic, origin, chunks, include_usage)
}

#[test]
fn stream_translates_to_unified_chunks() {
    let (ev, text) = run(&[TOOL_STREAM.as_bytes()], true);
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert!(ev.iter().all(|e| e["id"] == "msg_1"
        && e["model"] == "claude-x"
        && e["object"] == "chat.completion.chunk"));
    assert_eq!(
        ev[0]["choices"][0]["delta"],
        serde_json::json!({"role":"assistant","content":"","refusal":null})
    );
    assert_eq!(
        ev[1]["choices"][0]["delta"]["content"],
        "Let me \u{e9}\u{1f30d}"
    );
    let tc = |i: usize| ev[i]["choices"][0]["delta"]["tool_calls"][0].clone();
    assert_eq!(
        tc(2),
        serde_json::json!({"index":0,"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":""}})
    );
    assert_eq!(
        tc(3),
        serde_json::json!({"index":0,"function":{"arguments":"{\"city\": "}})
    );
    assert_eq!(tc(4)["function"]["arguments"], "\"Paris\"}");
    assert_eq!(tc(5)["index"], 1);
    assert_eq!(tc(5)["id"], "toolu_2");
    assert_eq!(
        tc(6),
        serde_json::json!({"index":1,"function":{"arguments":"{}"}})
    );
    assert_eq!(ev[7]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        ev[8]["usage"],
        serde_json::json!({"prompt_tokens":14,"completion_tokens":30,"total_tokens":44,"prompt_tokens_details":{"cached_tokens":2}})
    );
    assert_eq!(ev.len(), 9);
}

#[test]
fn jpg_images_are_sent_as_jpegs() {
    // `image/jpg` is no registered type (Claude refuses it); JPEG's is image/jpeg.
    let v = encode(
        r#"{"model":"g","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpg;base64,QUJD"}}]}]}"#,
    );
    assert_eq!(
        v["messages"][0]["content"][0]["source"],
        serde_json::json!({"type":"base64","media_type":"image/jpeg","data":"QUJD"})
    );
}
