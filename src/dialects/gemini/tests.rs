use super::*;
use crate::dialects::count::Counter;

fn encode_request(body: &str) -> Result<UpstreamRequest, GatewayError> {
    let provider = r#"{"dialect":"gemini","api_key":"g-key"}"#;
    crate::dialects::encode_for(&Gemini, provider, "gemini-2.5-flash", body).map(|(up, _)| up)
}

fn encode(body: &str) -> Value {
    let up = encode_request(body).unwrap();
    assert!(up.headers.contains(&("x-goog-api-key", "g-key".into())));
    serde_json::from_slice(&up.body).unwrap()
}

const COUNT: &str = r#"{"model":"any","system":"be brief","messages":[{"role":"user","content":"count me"}],
    "tools":[{"name":"lookup","input_schema":{"type":"object"}}]}"#;

#[test]
fn count_tokens_is_the_generation_inside_count_tokens() {
    let config = crate::config::Config::parse(
        br#"{"providers":{"p":{"dialect":"gemini","api_key":"g-key"}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
        |_| None,
    )
    .unwrap();
    let req = crate::surfaces::anthropic_messages::request::parse_count(COUNT.as_bytes()).unwrap();
    let target = Target {
        provider: &config.providers["p"],
        model: "gemini-2.5-flash",
    };
    assert!(Gemini.counter().is_some());
    let up = Gemini.encode_count(&req, &target).unwrap().unwrap();
    assert_eq!(up.path, "/v1beta/models/gemini-2.5-flash:countTokens");
    assert!(up.headers.contains(&("x-goog-api-key", "g-key".into())));
    let v: Value = serde_json::from_slice(&up.body).unwrap();
    let generation = Gemini.encode_request(&req, &target).unwrap();
    let mut expected: Value = serde_json::from_slice(&generation.body).unwrap();
    expected["model"] = "models/gemini-2.5-flash".into();
    assert_eq!(v, serde_json::json!({ "generateContentRequest": expected }));
    assert_eq!(
        v["generateContentRequest"]["systemInstruction"]["parts"][0]["text"],
        "be brief"
    );
    assert!(v["generateContentRequest"]["tools"][0]["functionDeclarations"].is_array());
    assert_eq!(
        Gemini
            .decode_count(br#"{"totalTokens": 7, "promptTokensDetails": []}"#)
            .unwrap(),
        7
    );
    assert_eq!(Gemini.decode_count(b"{}").unwrap(), 0);
    assert!(Gemini.decode_count(b"\"7\"").is_err());
}

/// Every key Gemini's GenerateContentRequest knows, at every level we write.
fn assert_only_gemini_fields(v: &Value) {
    const KNOWN: &[&str] = &[
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "generationConfig",
        "role",
        "parts",
        "text",
        "inlineData",
        "mimeType",
        "data",
        "functionCall",
        "functionResponse",
        "thoughtSignature",
        "name",
        "args",
        "response",
        "functionDeclarations",
        "description",
        "parametersJsonSchema",
        "functionCallingConfig",
        "mode",
        "allowedFunctionNames",
        "stopSequences",
        "temperature",
        "topP",
        "topK",
        "maxOutputTokens",
        "seed",
        "presencePenalty",
        "frequencyPenalty",
        "responseMimeType",
        "responseJsonSchema",
    ];
    // Inside these, the content is the client's own (schemas, arguments).
    const OPAQUE: &[&str] = &[
        "args",
        "response",
        "parametersJsonSchema",
        "responseJsonSchema",
    ];
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                assert!(
                    KNOWN.contains(&k.as_str()),
                    "{k} would be rejected by Gemini"
                );
                if !OPAQUE.contains(&k.as_str()) {
                    assert_only_gemini_fields(v);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(assert_only_gemini_fields),
        _ => {}
    }
}

#[test]
fn encodes_text_system_sampling_without_openai_fields() {
    let up = encode_request(
        r#"{"model":"g","messages":[{"role":"system","content":"be brief"},{"role":"developer","content":"really"},
            {"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"again"}],
            "temperature":0.5,"top_p":0.9,"max_tokens":20,"stop":["X"],"seed":3,"user":"u1",
            "logprobs":true,"presence_penalty":0.1,"request_id":"r","parallel_tool_calls":true,
            "stream":true,"stream_options":{"include_usage":true}}"#,
    )
    .unwrap();
    assert_eq!(
        up.path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    let v: Value = serde_json::from_slice(&up.body).unwrap();
    assert_only_gemini_fields(&v);
    assert_eq!(
        v,
        serde_json::json!({
            "contents":[
                {"role":"user","parts":[{"text":"hi"}]},
                {"role":"model","parts":[{"text":"hello"}]},
                {"role":"user","parts":[{"text":"again"}]}],
            "systemInstruction":{"parts":[{"text":"be brief"},{"text":"really"}]},
            "generationConfig":{"stopSequences":["X"],"temperature":0.5,"topP":0.9,
                                "maxOutputTokens":20,"seed":3,"presencePenalty":0.1}
        })
    );
    let up =
        encode_request(r#"{"model":"g","messages":[{"role":"user","content":"hi"}]}"#).unwrap();
    assert_eq!(up.path, "/v1beta/models/gemini-2.5-flash:generateContent");
}

#[test]
fn encodes_tools_images_json_mode_and_the_round_trip() {
    let signed = tool_call_id("resp-1", 0, 0, Some("CiQB+/x="));
    let unsigned = tool_call_id("resp-1", 0, 1, None);
    let body = format!(
        r#"{{"model":"g","messages":[
            {{"role":"user","content":[{{"type":"text","text":"weather?"}},{{"type":"image_url","image_url":{{"url":"data:image/png;base64,QUJD"}}}}]}},
            {{"role":"assistant","content":null,"tool_calls":[
                {{"id":"{signed}","type":"function","function":{{"name":"get_weather","arguments":"{{\"city\":\"Paris\"}}"}}}},
                {{"id":"{unsigned}","type":"function","function":{{"name":"get_time","arguments":""}}}}]}},
            {{"role":"tool","tool_call_id":"{unsigned}","content":"noon"}},
            {{"role":"tool","tool_call_id":"{signed}","content":"{{\"temp\":21}}"}},
            {{"role":"assistant","tool_calls":[{{"id":"call_abc","type":"function","function":{{"name":"get_time","arguments":"{{}}"}}}}]}},
            {{"role":"tool","tool_call_id":"call_abc","content":"1pm"}}],
          "tools":[{{"type":"function","function":{{"name":"get_weather","description":"w","parameters":{{"type":"object","properties":{{"city":{{"type":"string"}}}},"additionalProperties":false}}}}}},
                   {{"type":"function","function":{{"name":"get_time"}}}}],
          "tool_choice":{{"type":"function","function":{{"name":"get_weather"}}}},
          "response_format":{{"type":"json_schema","json_schema":{{"name":"w","schema":{{"type":"object"}}}}}}}}"#
    );
    let v = encode(&body);
    assert_only_gemini_fields(&v);
    let contents = v["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 5);
    assert_eq!(
        contents[0]["parts"][1],
        serde_json::json!({"inlineData":{"mimeType":"image/png","data":"QUJD"}})
    );
    assert_eq!(
        contents[1],
        serde_json::json!({"role":"model","parts":[
            {"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CiQB+/x="},
            {"functionCall":{"name":"get_time","args":{}}}]})
    );
    assert_eq!(
        contents[2],
        serde_json::json!({"role":"user","parts":[
            {"functionResponse":{"name":"get_time","response":{"result":"noon"}}},
            {"functionResponse":{"name":"get_weather","response":{"temp":21}}}]}),
        "tool results are named by the earlier call and share one turn"
    );
    assert_eq!(
        contents[3]["parts"][0]["thoughtSignature"], UNSIGNED,
        "a call Gemini did not sign gets Google's documented stand-in"
    );
    assert_eq!(
        v["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["additionalProperties"],
        false
    );
    assert!(v["tools"][0]["functionDeclarations"][1]
        .get("parametersJsonSchema")
        .is_none());
    assert_eq!(
        v["toolConfig"],
        serde_json::json!({"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_weather"]}})
    );
    assert_eq!(
        v["generationConfig"],
        serde_json::json!({"responseMimeType":"application/json","responseJsonSchema":{"type":"object"}})
    );
}

#[test]
fn tool_choice_modes() {
    let base = r#"{"model":"g","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":TC}"#;
    for (tc, mode) in [
        (r#""auto""#, "AUTO"),
        (r#""none""#, "NONE"),
        (r#""required""#, "ANY"),
    ] {
        let v = encode(&base.replace("TC", tc));
        assert_eq!(
            v["toolConfig"],
            serde_json::json!({"functionCallingConfig":{"mode":mode}})
        );
    }
    let v = encode(
        r#"{"model":"g","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}"#,
    );
    assert_eq!(
        v["generationConfig"],
        serde_json::json!({"responseMimeType":"application/json"})
    );
}

#[test]
fn search_beside_function_tools_on_gemini_3_only() {
    let config = crate::config::Config::parse(
        br#"{"providers":{"p":{"dialect":"gemini","api_key":"g-key"}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
        |_| None,
    )
    .unwrap();
    let body = r#"{"model":"g","messages":[{"role":"user","content":"news?"}],
        "tools":[{"type":"function","function":{"name":"f"}}]}"#;
    let req = ChatRequest {
        web_search: Some(crate::model::request::WebSearch {
            allowed_domains: Vec::new(),
            user_location: None,
        }),
        ..ChatRequest::parse(body.as_bytes()).unwrap()
    };
    let sent = |model: &str| -> Value {
        let target = Target {
            provider: &config.providers["p"],
            model,
        };
        let up = Gemini.encode_request(&req, &target).unwrap();
        serde_json::from_slice(&up.body).unwrap()
    };
    let v = sent("gemini-3-pro-preview");
    assert_eq!(
        v["tools"],
        serde_json::json!([{"functionDeclarations":[{"name":"f"}]},{"googleSearch":{}}])
    );
    assert_eq!(
        v["toolConfig"],
        serde_json::json!({"includeServerSideToolInvocations": true})
    );
    // Gemini 2.x refuses the mix, flag or not: the search is left out.
    let v = sent("gemini-2.5-flash");
    assert_eq!(
        v["tools"],
        serde_json::json!([{"functionDeclarations":[{"name":"f"}]}])
    );
    assert!(v.get("toolConfig").is_none());
    // Search alone needs no flag.
    let alone = ChatRequest {
        tools: Vec::new().into(),
        ..req.clone()
    };
    let target = Target {
        provider: &config.providers["p"],
        model: "gemini-3-pro-preview",
    };
    let v: Value =
        serde_json::from_slice(&Gemini.encode_request(&alone, &target).unwrap().body).unwrap();
    assert_eq!(v["tools"], serde_json::json!([{"googleSearch":{}}]));
    assert!(v.get("toolConfig").is_none());
}

#[test]
fn thinking_config_by_model_family() {
    let ask = |effort: Option<Effort>, budget_tokens: Option<u32>| ReasoningAsk {
        effort,
        budget_tokens,
    };
    let config = |include: bool, budget: Option<i64>, level: Option<&'static str>| ThinkingConfig {
        include_thoughts: include.then_some(true),
        thinking_budget: budget,
        thinking_level: level.map(Text::from),
    };
    for (model, asked, expected) in [
        (
            "gemini-2.5-flash",
            ask(Some(Effort::Low), None),
            config(true, Some(1024), None),
        ),
        (
            "gemini-2.5-flash",
            ask(Some(Effort::High), None),
            config(true, Some(24576), None),
        ),
        (
            "gemini-2.5-flash",
            ask(Some(Effort::Max), None),
            config(true, Some(24576), None),
        ),
        (
            "gemini-2.5-pro",
            ask(Some(Effort::Max), None),
            config(true, Some(32768), None),
        ),
        (
            "gemini-3-flash-preview",
            ask(Some(Effort::XHigh), None),
            config(true, None, Some("high")),
        ),
        (
            "gemini-2.5-flash",
            ask(Some(Effort::None), None),
            config(false, Some(0), None),
        ),
        (
            "gemini-2.5-pro",
            ask(Some(Effort::None), None),
            config(true, Some(128), None),
        ),
        (
            "gemini-2.5-flash-lite",
            ask(Some(Effort::Minimal), None),
            config(true, Some(512), None),
        ),
        (
            "gemini-2.5-flash",
            ask(None, Some(300)),
            config(true, Some(300), None),
        ),
        (
            "gemini-2.5-flash",
            ask(None, None),
            config(true, None, None),
        ),
        (
            "gemini-3-pro-preview",
            ask(Some(Effort::Medium), None),
            config(true, None, Some("high")),
        ),
        (
            "gemini-3-pro-preview",
            ask(Some(Effort::Minimal), None),
            config(true, None, Some("low")),
        ),
        (
            "gemini-3-flash-preview",
            ask(Some(Effort::Medium), None),
            config(true, None, Some("medium")),
        ),
        (
            "gemini-3-flash-preview",
            ask(Some(Effort::None), None),
            config(true, None, Some("minimal")),
        ),
        (
            "gemini-3-flash-preview",
            ask(Some(Effort::Low), Some(900)),
            config(true, Some(900), None),
        ),
    ] {
        assert_eq!(thinking_config(asked, model), expected, "{model} {asked:?}");
    }
}

#[test]
fn thought_parts_are_reasoning() {
    let v = decode(
        r#"{"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"text":"b","thought":true,"thoughtSignature":"s+/="},{"text":"c","thought":true},{"text":"ok"}],"role":"model"},"finishReason":"STOP"}],"responseId":"r"}"#,
    )
    .unwrap();
    let message = &v["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], "abc");
    assert_eq!(
        message["reasoning_details"],
        serde_json::json!([{"type":"reasoning.text","text":"ab","signature":"s+/=","index":0},
               {"type":"reasoning.text","text":"c","index":1}])
    );
    assert_eq!(message["content"], "ok");
}

#[test]
fn rejects_what_gemini_cannot_take() {
    for (body, param) in [
        (
            r#"{"model":"g","n":9,"messages":[{"role":"user","content":"x"}]}"#,
            "n",
        ),
        (
            r#"{"model":"g","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}"#,
            "messages[0].content[0].image_url.url",
        ),
        (
            r#"{"model":"g","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"r"}]}"#,
            "messages[1].tool_call_id",
        ),
        (
            r#"{"model":"g","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}"#,
            "messages[0].tool_calls[0].function.arguments",
        ),
    ] {
        let e = encode_request(body).unwrap_err();
        assert_eq!(e.param.as_deref(), Some(param), "{body}");
    }
}

#[test]
fn a_failed_tool_result_is_an_error_response() {
    let text = |t: &str| Content::Text(t.into());
    assert_eq!(
        function_response(&text("timeout"), true),
        serde_json::json!({"error": "timeout"})
    );
    assert_eq!(
        function_response(&text(r#"{"code":7}"#), true),
        serde_json::json!({"error": r#"{"code":7}"#}),
        "an error's details are never taken for output"
    );
    assert_eq!(
        function_response(&text("ok"), false),
        serde_json::json!({"result": "ok"})
    );
}

#[test]
fn tool_call_ids_carry_the_signature() {
    let id = tool_call_id("resp-1", 0, 2, Some("CiQB+/abcd=="));
    assert!(id.starts_with("call_"));
    assert!(id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
    assert_eq!(split_tool_call_id(&id).as_deref(), Some("CiQB+/abcd=="));
    assert_eq!(
        tool_call_id("resp-1", 0, 2, Some("CiQB+/abcd==")),
        id,
        "stable"
    );
    assert_ne!(
        tool_call_id("resp-2", 0, 2, None),
        tool_call_id("resp-1", 0, 2, None)
    );
    assert_eq!(split_tool_call_id(&tool_call_id("r", 0, 0, None)), None);
    for foreign in ["call_abc", "toolu_ts_x", "call_zzzzzzzzzzzzzzzz_1_ts_x", ""] {
        assert_eq!(split_tool_call_id(foreign), None, "{foreign}");
    }
}

fn origin() -> Origin {
    Origin {
        id: "chatcmpl-r".into(),
        provider: "gm".into(),
        model: "gemini-2.5-flash".into(),
        ..Origin::default()
    }
}

fn decode(body: &str) -> Result<Value, GatewayError> {
    let mut origin = origin();
    let d = Gemini.decode_response(body.as_bytes(), &mut origin)?;
    Ok(d.chat_json(&origin))
}

#[test]
fn decodes_text_and_usage() {
    let v = decode(
        r#"{"candidates":[{"content":{"parts":[{"text":"thinking...","thought":true},{"text":"Hello"},{"text":" there"}],"role":"model"},
            "finishReason":"STOP","index":0}],
          "usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":4,"totalTokenCount":20,"thoughtsTokenCount":6,"cachedContentTokenCount":3},
          "modelVersion":"gemini-2.5-flash-001","responseId":"abc123"}"#,
    )
    .unwrap();
    assert_eq!(v["id"], "abc123");
    assert_eq!(v["model"], "gemini-2.5-flash-001");
    assert_eq!(v["choices"][0]["message"]["content"], "Hello there");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        v["usage"],
        serde_json::json!({"prompt_tokens":10,"completion_tokens":10,"total_tokens":20,
            "prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":6}})
    );
}

#[test]
fn decodes_parallel_tool_calls_with_signature() {
    let v = decode(
        r#"{"candidates":[{"content":{"parts":[
            {"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CiQB+/x="},
            {"functionCall":{"name":"get_time"}}],"role":"model"},"finishReason":"STOP"}],
          "usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":7},"responseId":"r9"}"#,
    )
    .unwrap();
    let calls = &v["choices"][0]["message"]["tool_calls"];
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert!(v["choices"][0]["message"]["content"].is_null());
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(calls[0]["function"]["arguments"], "{\"city\":\"Paris\"}");
    assert_eq!(calls[1]["function"]["arguments"], "{}");
    assert_eq!(calls[0]["id"], tool_call_id("r9", 0, 0, Some("CiQB+/x=")));
    assert_eq!(calls[1]["id"], tool_call_id("r9", 0, 1, None));
}

/// Gemini 3's server-side invocations (its own search) are not the
/// client's: not tool calls, not text, and they do not shift call ids.
const INVOCATIONS: &str = r#"{"toolCall":{"toolType":"GOOGLE_SEARCH_WEB","id":"s1","args":{"queries":["q"]}},"thoughtSignature":"U2lnMQ=="},
    {"toolResponse":{"toolType":"GOOGLE_SEARCH_WEB","id":"s1","response":{"results":[]}}}"#;

#[test]
fn server_side_invocations_are_not_surfaced() {
    let v = decode(&format!(
        r#"{{"candidates":[{{"content":{{"parts":[{INVOCATIONS},
            {{"text":"Found it."}},
            {{"functionCall":{{"name":"get_weather","args":{{}}}},"thoughtSignature":"CiQB+/x="}}],"role":"model"}},"finishReason":"STOP"}}],
          "responseId":"r9"}}"#
    ))
    .unwrap();
    let message = &v["choices"][0]["message"];
    assert_eq!(message["content"], "Found it.");
    let calls = message["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["id"], tool_call_id("r9", 0, 0, Some("CiQB+/x=")));
    let stream = format!(
        "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{}],\"role\":\"model\"}}}}],\"responseId\":\"rs3\"}}\r\n\r\n\
         data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"Found it.\"}}],\"role\":\"model\"}},\"finishReason\":\"STOP\"}}],\"responseId\":\"rs3\"}}\r\n\r\n",
        INVOCATIONS.replace('\n', "")
    );
    let (ev, _) = run(&[stream.as_bytes()], false);
    let deltas: Vec<&Value> = ev.iter().map(|e| &e["choices"][0]["delta"]).collect();
    assert!(
        deltas.iter().all(|d| d.get("tool_calls").is_none()),
        "{ev:?}"
    );
    assert_eq!(deltas[1]["content"], "Found it.");
    assert_eq!(ev.last().unwrap()["choices"][0]["finish_reason"], "stop");
}

#[test]
fn finish_reasons_and_content_filter() {
    for (reason, tools, want) in [
        ("STOP", false, "stop"),
        ("STOP", true, "tool_calls"),
        ("MAX_TOKENS", false, "length"),
        ("SAFETY", false, "content_filter"),
        ("RECITATION", false, "content_filter"),
        ("BLOCKLIST", false, "content_filter"),
        ("PROHIBITED_CONTENT", false, "content_filter"),
        ("SPII", false, "content_filter"),
        ("IMAGE_SAFETY", false, "content_filter"),
        ("MALFORMED_FUNCTION_CALL", false, "stop"),
        ("OTHER", false, "stop"),
    ] {
        assert_eq!(finish_reason(reason, tools).as_str(), want, "{reason}");
    }
    let v = decode(
        r#"{"candidates":[{"finishReason":"SAFETY","safetyRatings":[{"category":"HARM_CATEGORY_HARASSMENT","probability":"HIGH","blocked":true}]}],"responseId":"x"}"#,
    )
    .unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "content_filter");
    assert!(v["choices"][0]["message"]["content"].is_null());
    let e = decode(
        r#"{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":12,"totalTokenCount":12},"modelVersion":"gemini-2.5-flash"}"#,
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::ContentFiltered);
    assert_eq!(e.status(), 400);
    assert!(e.message.contains("PROHIBITED_CONTENT"));
    assert_eq!(decode("{}").unwrap_err().code, ErrorCode::UpstreamError);
}

#[test]
fn maps_errors() {
    let err = |code: u16, status: &str, msg: &str, details: &str| {
        format!(
            r#"{{"error":{{"code":{code},"message":"{msg}","status":"{status}","details":[{details}]}}}}"#
        )
    };
    let key_invalid = r#"{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}"#;
    let cases = [
        (400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", key_invalid, ErrorCode::AuthFailed),
        (400, "INVALID_ARGUMENT", "Invalid JSON payload received.", "", ErrorCode::InvalidRequest),
        (400, "INVALID_ARGUMENT", "The input token count (250000) exceeds the maximum number of tokens allowed (1048576).", "", ErrorCode::ContextLengthExceeded),
        (400, "INVALID_ARGUMENT", "Request payload size exceeds the limit: 20971520 bytes.", "", ErrorCode::PayloadTooLarge),
        (400, "FAILED_PRECONDITION", "User location is not supported for the API use.", "", ErrorCode::InvalidRequest),
        (403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers.", "", ErrorCode::PermissionDenied),
        (404, "NOT_FOUND", "models/x is not found for API version v1beta.", "", ErrorCode::ModelNotFound),
        (429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.", "", ErrorCode::UpstreamRateLimit),
        (500, "INTERNAL", "An internal error has occurred.", "", ErrorCode::UpstreamError),
        (503, "UNAVAILABLE", "The model is overloaded. Please try again later.", "", ErrorCode::UpstreamBusy),
        (504, "DEADLINE_EXCEEDED", "Deadline expired.", "", ErrorCode::UpstreamTimeout),
    ];
    for (status, name, msg, details, code) in cases {
        let e = Gemini.decode_error(status, err(status, name, msg, details).as_bytes());
        assert_eq!(e.code, code, "{name}: {msg}");
        assert_eq!(e.message, msg);
    }
    let retry = r#"{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"6.2s"}"#;
    let e = Gemini.decode_error(
        429,
        err(429, "RESOURCE_EXHAUSTED", "quota", retry).as_bytes(),
    );
    assert_eq!(e.retry_after, Some(7), "RetryInfo, rounded up");
    let kept: Value = serde_json::from_str(retry).unwrap();
    assert_eq!(
        e.details.map(|d| d.0),
        Some(vec![kept]),
        "the details as they came"
    );
    assert_eq!(retry_seconds("0s"), Some(0));
    assert_eq!(retry_seconds("7"), None);
    assert_eq!(retry_seconds("-1s"), None);
    let array = format!("[{}]", err(429, "RESOURCE_EXHAUSTED", "quota", ""));
    assert_eq!(
        Gemini.decode_error(429, array.as_bytes()).code,
        ErrorCode::UpstreamRateLimit
    );
}

const TEXT_STREAM: &str = concat!(
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"H\u{e9}llo \u{1f30d}\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 4,\"totalTokenCount\": 4},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"rs1\"}\r\n\r\n",
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" there\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 4,\"candidatesTokenCount\": 3,\"totalTokenCount\": 9,\"thoughtsTokenCount\": 2},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"rs1\"}\r\n\r\n",
);

pub(crate) const TOOL_STREAM: &str = concat!(
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Checking.\"}],\"role\": \"model\"}}],\"responseId\": \"rs2\",\"modelVersion\": \"gemini-2.5-pro\"}\r\n\r\n",
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"get_weather\",\"args\": {\"city\": \"Paris\"}},\"thoughtSignature\": \"CiQB+/x=\"},{\"functionCall\": {\"name\": \"get_time\",\"args\": {}}}],\"role\": \"model\"},\"finishReason\": \"STOP\"}],\"usageMetadata\": {\"promptTokenCount\": 8,\"candidatesTokenCount\": 5,\"totalTokenCount\": 13},\"responseId\": \"rs2\",\"modelVersion\": \"gemini-2.5-pro\"}\r\n\r\n",
);

fn run(chunks: &[&[u8]], include_usage: bool) -> (Vec<Value>, String) {
    crate::dialects::run_stream(&Gemini, origin(), chunks, include_usage)
}

#[test]
fn stream_text_with_crlf_and_usage() {
    let (ev, text) = run(&[TEXT_STREAM.as_bytes()], true);
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert!(ev
        .iter()
        .all(|e| e["id"] == "rs1" && e["model"] == "gemini-2.5-flash"));
    assert_eq!(
        ev[1]["choices"][0]["delta"],
        serde_json::json!({"content":"H\u{e9}llo \u{1f30d}"})
    );
    assert_eq!(ev[2]["choices"][0]["delta"]["content"], " there");
    assert_eq!(ev[3]["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        ev[4]["usage"],
        serde_json::json!({"prompt_tokens":4,"completion_tokens":5,"total_tokens":9,
            "completion_tokens_details":{"reasoning_tokens":2}})
    );
    assert_eq!(ev.len(), 5);
}

#[test]
fn stream_events_are_read_borrowed_unless_escaped() {
    let event = r#"{"candidates":[{"content":{"parts":[{"text":"plain"},{"text":"esc\u00e9"},{"functionCall":{"name":"f"},"thoughtSignature":"c2ln"}]},"finishReason":"STOP"}],"modelVersion":"g","responseId":"r"}"#;
    let response: GenerateResponse = serde_json::from_str(event).unwrap();
    let borrowed = |t: &Option<Text>| matches!(t, Some(Text(Cow::Borrowed(_))));
    let candidate = &response.candidates[0];
    let parts = &candidate.content.as_ref().unwrap().parts;
    assert!(borrowed(&parts[0].text));
    assert!(!borrowed(&parts[1].text), "an escape forces a copy");
    assert_eq!(parts[1].text.as_deref(), Some("esc\u{e9}"));
    assert!(matches!(
        parts[2].function_call.as_ref().unwrap().name,
        Text(Cow::Borrowed("f"))
    ));
    assert!(borrowed(&parts[2].thought_signature));
    assert!(borrowed(&candidate.finish_reason));
    assert!(borrowed(&response.model_version) && borrowed(&response.response_id));
}

#[test]
fn stream_tool_calls() {
    let (ev, text) = run(&[TOOL_STREAM.as_bytes()], false);
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert_eq!(ev[1]["choices"][0]["delta"]["content"], "Checking.");
    let tc = |i: usize| ev[i]["choices"][0]["delta"]["tool_calls"][0].clone();
    assert_eq!(
        tc(2),
        serde_json::json!({"index":0,"id":tool_call_id("rs2", 0, 0, Some("CiQB+/x=")),"type":"function",
            "function":{"name":"get_weather","arguments":""}})
    );
    assert_eq!(
        tc(3),
        serde_json::json!({"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}})
    );
    assert_eq!(tc(4)["index"], 1);
    assert_eq!(tc(4)["id"], tool_call_id("rs2", 0, 1, None));
    assert_eq!(tc(5)["function"]["arguments"], "{}");
    assert_eq!(ev[6]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(ev.len(), 7);
}

#[test]
fn a_gemini_clients_blocked_prompt_is_geminis_verdict() {
    let verdict = br#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3}}"#;
    let decoded = Gemini
        .decode_native(Api::Gemini, verdict, &mut origin())
        .unwrap();
    assert_eq!(decoded.finish_reason, Some(FinishReason::ContentFilter));
    assert!(matches!(decoded.answer, Answer::Native(ref b) if b == verdict));
    // An answer's own finish is read as before.
    let answer = br#"{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}]}"#;
    let decoded = Gemini
        .decode_native(Api::Gemini, answer, &mut origin())
        .unwrap();
    assert_eq!(decoded.finish_reason, Some(FinishReason::Stop));
}

#[test]
fn stream_content_filter() {
    // A prompt blocked once the stream started: a unified stream error.
    let blocked = "data: {\"promptFeedback\": {\"blockReason\": \"SAFETY\"},\"usageMetadata\": {\"promptTokenCount\": 3},\"responseId\": \"b\"}\r\n\r\n";
    let (ev, text) = run(&[blocked.as_bytes()], false);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["error"]["code"], "CONTENT_FILTERED");
    assert_eq!(ev[0]["error"]["request_id"], "rid");
    assert!(!text.contains("[DONE]"));
    // The answer filtered mid-stream: finish_reason content_filter.
    let filtered = TEXT_STREAM.replace("\"STOP\"", "\"SAFETY\"");
    let (ev, text) = run(&[filtered.as_bytes()], false);
    assert_eq!(ev[3]["choices"][0]["finish_reason"], "content_filter");
    assert!(text.ends_with("data: [DONE]\n\n"));
}

#[test]
fn sampling_controls_gemini_has_are_sent_as_its_own() {
    let v = encode(
        r#"{"model":"g","messages":[{"role":"user","content":"x"}],"top_k":40,
            "presence_penalty":0.5,"frequency_penalty":-0.25,"temperature":0.3}"#,
    );
    assert_eq!(
        v["generationConfig"],
        serde_json::json!({"temperature":0.3,"topK":40,"presencePenalty":0.5,"frequencyPenalty":-0.25})
    );
    // topK is an int32 to Gemini: written without a fraction.
    assert!(String::from_utf8(
        encode_request(r#"{"model":"g","messages":[{"role":"user","content":"x"}],"top_k":40}"#)
            .unwrap()
            .body
    )
    .unwrap()
    .contains(r#""topK":40}"#));
    // A zero penalty is both APIs' default: left out.
    let v = encode(
        r#"{"model":"g","messages":[{"role":"user","content":"x"}],"presence_penalty":0,"frequency_penalty":0.0}"#,
    );
    assert!(v.get("generationConfig").is_none(), "{v}");
}

#[test]
fn a_tool_results_images_go_with_it() {
    let body = r#"{"model":"g","messages":[{"role":"user","content":"look"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"shot","arguments":"{}"}}]},
        {"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"one"},{"type":"image_url","image_url":{"url":"data:image/jpg;base64,QUJD"}},{"type":"text","text":"two"}]}]}"#;
    let provider = r#"{"dialect":"gemini","api_key":"g-key"}"#;
    let sent = |model: &str| {
        crate::dialects::encode_for(&Gemini, provider, model, body)
            .unwrap()
            .1
    };
    // Gemini 3: inside the function response (its multimodal responses);
    // the text parts one per line; `image/jpg` as JPEG's registered type.
    let v = sent("gemini-3-pro-preview");
    assert_eq!(
        v["contents"][2]["parts"],
        serde_json::json!([{"functionResponse":{"name":"shot","response":{"result":"one\ntwo"},
            "parts":[{"inlineData":{"mimeType":"image/jpeg","data":"QUJD"}}]}}])
    );
    // Before Gemini 3: beside it, in the same turn.
    let v = sent("gemini-2.5-flash");
    assert_eq!(
        v["contents"][2]["parts"],
        serde_json::json!([{"functionResponse":{"name":"shot","response":{"result":"one\ntwo"}}},
            {"inlineData":{"mimeType":"image/jpeg","data":"QUJD"}}])
    );
}

#[test]
fn several_choices_are_candidates() {
    let body = r#"{"model":"g","n":3,"messages":[{"role":"user","content":"x"}]}"#;
    assert_eq!(encode(body)["generationConfig"]["candidateCount"], 3);
    let one = r#"{"model":"g","n":1,"messages":[{"role":"user","content":"x"}]}"#;
    assert!(encode(one)["generationConfig"]
        .get("candidateCount")
        .is_none());
    let nine = r#"{"model":"g","n":9,"messages":[{"role":"user","content":"x"}]}"#;
    let e = encode_request(nine).unwrap_err();
    assert_eq!((e.status(), e.param.as_deref()), (400, Some("n")));
}

#[test]
fn decodes_each_candidate_in_its_place() {
    let v = decode(
        r#"{"candidates":[
            {"content":{"parts":[{"text":"second"}],"role":"model"},"finishReason":"MAX_TOKENS","index":1},
            {"content":{"parts":[{"text":"first"}],"role":"model"},"finishReason":"STOP","index":0}],
          "usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4},"responseId":"r2"}"#,
    )
    .unwrap();
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 2);
    assert_eq!(choices[0]["index"], 0);
    assert_eq!(choices[0]["message"]["content"], "first");
    assert_eq!(choices[0]["finish_reason"], "stop");
    assert_eq!(choices[1]["index"], 1);
    assert_eq!(choices[1]["message"]["content"], "second");
    assert_eq!(choices[1]["finish_reason"], "length");
    // Usage is the whole answer's, once.
    assert_eq!(v["usage"]["completion_tokens"], 4);
    // Without indexes, in order.
    let v = decode(
        r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP"},
            {"content":{"parts":[{"text":"b"}]},"finishReason":"STOP"}],"responseId":"r3"}"#,
    )
    .unwrap();
    assert_eq!(v["choices"][1]["message"]["content"], "b");
}

#[test]
fn a_candidate_index_out_of_range_is_the_vendors_error() {
    for body in [
        r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"index":2},{"content":{"parts":[{"text":"b"}]},"index":0}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"index":0},{"content":{"parts":[{"text":"b"}]},"index":0}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"index":4294967295}]}"#,
    ] {
        assert_eq!(decode(body).unwrap_err().status(), 502, "{body}");
    }
}

const TWO_CANDIDATES: &str = concat!(
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"A1\"}],\"role\":\"model\"},\"index\":0},{\"content\":{\"parts\":[{\"text\":\"B1\"}],\"role\":\"model\"},\"index\":1}],\"responseId\":\"rs9\"}\r\n\r\n",
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"B2\"}],\"role\":\"model\"},\"finishReason\":\"MAX_TOKENS\",\"index\":1}],\"responseId\":\"rs9\"}\r\n\r\n",
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"A2\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":2,\"candidatesTokenCount\":4},\"responseId\":\"rs9\"}\r\n\r\n",
);

#[test]
fn a_stream_of_several_candidates_is_a_stream_of_choices() {
    let (ev, text) = crate::dialects::run_stream_choices(
        &Gemini,
        origin(),
        &[TWO_CANDIDATES.as_bytes()],
        true,
        2,
    );
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let of = |index: u64| -> Vec<&Value> {
        ev.iter()
            .filter_map(|e| e["choices"].as_array()?.first())
            .filter(|c| c["index"] == index)
            .collect()
    };
    let text_of = |index: u64| -> String {
        of(index)
            .iter()
            .filter_map(|c| c["delta"]["content"].as_str())
            .collect()
    };
    assert_eq!(text_of(0), "A1A2");
    assert_eq!(text_of(1), "B1B2");
    // Each choice opens with its role and ends with its finish.
    for (index, finish) in [(0, "stop"), (1, "length")] {
        let choice = of(index);
        assert_eq!(choice[0]["delta"]["role"], "assistant");
        assert_eq!(choice.last().unwrap()["finish_reason"], finish);
    }
    let usage: Vec<_> = ev.iter().filter(|e| e["usage"].is_object()).collect();
    assert_eq!(usage.len(), 1);
    assert_eq!(usage[0]["usage"]["completion_tokens"], 4);
}

#[test]
fn a_streamed_candidate_beyond_those_asked_for_is_an_error() {
    let (ev, _) = crate::dialects::run_stream_choices(
        &Gemini,
        origin(),
        &[TWO_CANDIDATES.as_bytes()],
        false,
        1,
    );
    let error = ev.iter().find(|e| e.get("error").is_some()).unwrap();
    assert_eq!(error["error"]["code"], "UPSTREAM_ERROR", "{error}");
    // A one-choice stream is as it was.
    let (ev, _) = run(&[TEXT_STREAM.as_bytes()], false);
    assert!(ev.iter().all(|e| e["choices"][0]["index"] == 0));
}

/// Tool calls are numbered per candidate; their ids still differ across
/// candidates (a client continuing from either choice names its own
/// calls), and the first candidate's ids are as for a one-candidate answer.
#[test]
fn each_candidates_tool_calls_have_their_own_ids() {
    let call = r#"{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}],"role":"model"},"finishReason":"STOP","index":INDEX}"#;
    let body = format!(
        r#"{{"candidates":[{},{}],"responseId":"r5"}}"#,
        call.replace("INDEX", "0"),
        call.replace("INDEX", "1")
    );
    let v = decode(&body).unwrap();
    let id = |choice: usize| v["choices"][choice]["message"]["tool_calls"][0]["id"].clone();
    assert_eq!(id(0), tool_call_id("r5", 0, 0, None));
    assert_eq!(id(1), tool_call_id("r5", 1, 0, None));
    assert_ne!(id(0), id(1));

    let stream = format!("data: {body}\r\n\r\n");
    let (ev, _) =
        crate::dialects::run_stream_choices(&Gemini, origin(), &[stream.as_bytes()], false, 2);
    let streamed: Vec<(Value, Value)> = ev
        .iter()
        .filter_map(|e| e["choices"].as_array()?.first())
        .map(|c| {
            (
                c["index"].clone(),
                c["delta"]["tool_calls"][0]["id"].clone(),
            )
        })
        .filter(|(_, id)| id.is_string())
        .collect();
    assert_eq!(streamed.len(), 2, "{ev:?}");
    assert_ne!(streamed[0].1, streamed[1].1);
    // The stream's ids are the whole answer's.
    for (index, id) in &streamed {
        let candidate = u32::try_from(index.as_u64().unwrap()).unwrap();
        assert_eq!(id, &tool_call_id("r5", candidate, 0, None));
    }
}
