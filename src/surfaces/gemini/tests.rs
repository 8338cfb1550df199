use super::*;
use crate::model::request::{ChatRequest, Content as Text_, Effort, Message, ToolChoice};
use crate::model::response::{Completion, ToolCallOut};
use crate::model::stream::{Passed, Reasoning};
use serde_json::json;

fn route(m: &str, p: &str, q: &str) -> Option<(Api, bool, Result<Operation, u16>)> {
    let r = crate::surfaces::route(m, p, q)?;
    Some((r.api, r.metered, r.operation.map_err(|e| e.status())))
}

fn generate(model: &str, stream: bool, json_array: bool) -> Result<Operation, u16> {
    Ok(Operation::Generate(PathFacts {
        model: Some(model.into()),
        stream: Some(stream),
        state: SurfaceState::of(GeminiState { json_array }),
    }))
}

#[test]
fn routes_under_v1beta_and_v1() {
    let g = Api::Gemini;
    assert_eq!(
        route("POST", "/v1beta/models/fast:generateContent", ""),
        Some((g, true, generate("fast", false, false)))
    );
    assert_eq!(
        route(
            "POST",
            "/v1beta/models/fast:streamGenerateContent",
            "alt=sse"
        ),
        Some((g, true, generate("fast", true, false)))
    );
    assert_eq!(
        route("POST", "/v1/models/a%2Fb:streamGenerateContent", ""),
        Some((g, true, generate("a/b", true, true)))
    );
    assert_eq!(
        route("POST", "/v1beta/models/m:countTokens", "key=x"),
        Some((
            g,
            true,
            Ok(Operation::Call(Call {
                op: CallOp::CountTokens,
                api: Api::Gemini,
                model: Some("m".into()),
                path: "/v1beta/models/m:countTokens".into(),
                query: String::new(),
            }))
        ))
    );
    assert_eq!(
        route("GET", "/v1beta/models", "pageSize=50"),
        Some((g, false, Ok(Operation::ListModels)))
    );
    assert_eq!(
        route("GET", "/v1beta/models/m", ""),
        Some((g, false, Ok(Operation::Model("m".into()))))
    );
    // OpenAI's model list keeps /v1/models.
    assert_eq!(
        route("GET", "/v1/models", "").map(|r| r.0),
        Some(Api::OpenAiChat)
    );
    assert_eq!(
        route("GET", "/v1/models/m", "").map(|r| r.0),
        Some(Api::OpenAiChat)
    );
    // Refusals in Gemini's envelope.
    assert_eq!(
        route("GET", "/v1beta/models/m:generateContent", ""),
        Some((g, true, Err(405)))
    );
    assert_eq!(
        route("POST", "/v1beta/models/m:predict", ""),
        Some((g, false, Err(404)))
    );
    assert_eq!(
        route("GET", "/v1beta/files", ""),
        Some((g, false, Err(404)))
    );
    assert_eq!(route("GET", "/v1beta", ""), None);
}

/// One user turn.
fn hi() -> serde_json::Value {
    json!([{"parts": [{"text": "hi"}]}])
}

fn parse(body: serde_json::Value) -> ChatRequest {
    request::parse(body.to_string().as_bytes()).unwrap()
}

#[test]
fn reads_turns_tools_and_configuration() {
    let r = parse(json!({
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}, {"inlineData": {"mimeType": "image/png", "data": "QUJD"}}]},
            {"role": "model", "parts": [{"text": "t", "thought": true}, {"functionCall": {"name": "f", "args": {"a": 1}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": "42"}}}, {"text": "thanks"}]}],
        "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT", "properties": {"a": {"type": "INTEGER", "nullable": true}}}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}},
        "generationConfig": {"temperature": 0.2, "topK": 4, "maxOutputTokens": 99, "stopSequences": ["X"],
            "thinkingConfig": {"thinkingLevel": "HIGH"}},
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
    }));
    assert_eq!(r.messages.len(), 5, "{:?}", r.messages);
    assert!(matches!(&r.messages[0], Message::System { .. }));
    assert!(r.messages[1].clone() != r.messages[0]);
    let Message::Assistant {
        tool_calls,
        reasoning,
        ..
    } = &r.messages[2]
    else {
        panic!("{:?}", r.messages[2]);
    };
    assert_eq!(tool_calls[0].function.arguments, r#"{"a":1}"#);
    assert_eq!(reasoning[0].text, "t");
    let Message::Tool {
        tool_call_id,
        content,
        ..
    } = &r.messages[3]
    else {
        panic!()
    };
    assert_eq!(tool_call_id, &tool_calls[0].id);
    assert_eq!(content, &Text_::Text("42".into()));
    assert!(matches!(&r.messages[4], Message::User { .. }));
    assert_eq!(
        r.tools[0].function.parameters,
        Some(json!({"type": "object", "properties": {"a": {"type": ["integer", "null"]}}}))
    );
    assert_eq!(r.tool_choice, Some(ToolChoice::Function("f".into())));
    assert_eq!(
        (r.temperature, r.top_k, r.max_tokens),
        (Some(0.2), Some(4), Some(99))
    );
    assert_eq!(r.reasoning.unwrap().effort, Some(Effort::High));
    assert!(r.native_only.is_none() && r.include_usage);
}

#[test]
fn refuses_what_gemini_refuses_and_marks_what_only_gemini_takes() {
    let bad = |body: serde_json::Value| request::parse(body.to_string().as_bytes()).unwrap_err();
    assert!(bad(json!({"contents": [], "frobnicate": 1}))
        .message
        .contains("frobnicate"));
    assert!(bad(json!({"contents": [{"role": "system", "parts": []}]}))
        .message
        .contains("role"));
    let e = bad(
        json!({"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}]}),
    );
    assert_eq!(
        e.param.as_deref(),
        Some("contents[0].parts[0].functionResponse")
    );
    // Gemini's own refusals of a conversation, whatever vendor answers.
    assert!(bad(json!({"contents": []}))
        .message
        .contains("contents is not specified"));
    assert_eq!(
        bad(json!({"contents": [{"role": "user", "parts": [{"text": "a"}]}, {"role": "model", "parts": []}]}))
            .param
            .as_deref(),
        Some("contents[1].parts")
    );
    let only = |body: serde_json::Value| parse(body).native_only.map(|n| n.param);
    assert_eq!(
        only(json!({"contents": [{"parts": [{"fileData": {"fileUri": "gs://x"}}]}]})).as_deref(),
        Some("contents[0].parts[0].fileData")
    );
    assert_eq!(
        only(json!({"contents": hi(), "cachedContent": "cachedContents/1"})).as_deref(),
        Some("cachedContent")
    );
    assert_eq!(
        only(json!({"contents": hi(), "tools": [{"codeExecution": {}}]})).as_deref(),
        Some("tools[0].codeExecution")
    );
    assert!(
        parse(json!({"contents": hi(), "tools": [{"googleSearch": {}}]}))
            .web_search
            .is_some()
    );
    // Proto field names are Gemini's too.
    let snake = parse(
        json!({"contents": hi(), "generation_config": {"max_output_tokens": 5,
        "thinking_config": {"thinking_budget": 0}}}),
    );
    assert_eq!(snake.max_tokens, Some(5));
    assert_eq!(snake.reasoning.unwrap().effort, Some(Effort::None));
}

#[test]
fn the_path_decides_model_and_stream() {
    let facts = PathFacts {
        model: Some("g".into()),
        stream: Some(true),
        state: SurfaceState::of(GeminiState { json_array: true }),
    };
    let r = Gemini
        .parse_generation(&facts, br#"{"contents":[{"parts":[{"text":"x"}]}]}"#)
        .unwrap();
    assert_eq!((r.request.model.as_str(), r.request.stream), ("g", true));
    let framing = r.state.get::<GeminiState>();
    assert_eq!(framing, Some(&GeminiState { json_array: true }));
    let count = Gemini
        .parse_call(
            &crate::surfaces::routed_call("POST", "/v1beta/models/g:countTokens", ""),
            br#"{"contents":[]}"#,
        )
        .unwrap()
        .unwrap();
    assert_eq!(count.model(), "g");
}

fn origin() -> Origin {
    Origin {
        id: "msg_1".into(),
        model: "claude-x".into(),
        ..Origin::default()
    }
}

#[test]
fn renders_an_answer_with_thoughts_calls_and_usage() {
    let completion = Completion {
        more: Vec::new(),
        reasoning: vec![crate::model::request::Thinking {
            text: "hmm".into(),
            signature: Some("sig".into()),
            redacted: None,
        }],
        content: Some("Hi".into()),
        tool_calls: vec![ToolCallOut::new(
            "toolu_1".into(),
            "f".into(),
            r#"{"a":1}"#.into(),
        )],
        finish_reason: Some(FinishReason::ToolCalls),
        usage: Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 7,
            cached_tokens: Some(2),
            reasoning_tokens: Some(3),
            cache_write_tokens: None,
        }),
    };
    let v: Value = serde_json::from_slice(&Gemini.render_answer(
        Answer::Decoded(completion),
        &origin(),
        &SurfaceState::default(),
    ))
    .unwrap();
    let parts = &v["candidates"][0]["content"]["parts"];
    assert_eq!(parts[0]["thought"], true);
    let carried = parts[0]["thoughtSignature"].as_str().unwrap();
    assert_eq!(carried_signature(carried), Some(("sig".to_owned(), false)));
    assert_eq!(parts[1]["text"], "Hi");
    assert_eq!(
        parts[2]["functionCall"],
        json!({"id": "toolu_1", "name": "f", "args": {"a": 1}})
    );
    assert_eq!(v["candidates"][0]["finishReason"], "STOP");
    assert_eq!(
        v["usageMetadata"],
        json!({"promptTokenCount": 10, "candidatesTokenCount": 4, "totalTokenCount": 17,
               "cachedContentTokenCount": 2, "thoughtsTokenCount": 3})
    );
    assert_eq!(
        (v["modelVersion"].as_str(), v["responseId"].as_str()),
        (Some("claude-x"), Some("msg_1"))
    );
    // The carried signature comes back to its vendor in a later turn.
    let history = json!({"contents": [{"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [parts[0].clone(), parts[2].clone()]}]});
    let r = parse(history);
    let Message::Assistant { reasoning, .. } = &r.messages[1] else {
        panic!()
    };
    assert_eq!(
        (
            reasoning[0].text.as_str(),
            reasoning[0].signature.as_deref()
        ),
        ("hmm", Some("sig"))
    );
}

fn stream(
    json_array: bool,
    events: impl FnOnce(&mut dyn StreamEncoder, &Origin, &mut Vec<u8>),
) -> String {
    // Framed as the request's state says.
    let state = SurfaceState::of(GeminiState { json_array });
    let mut encoder = Gemini.stream_encoder(false, &state);
    let mut out = Vec::new();
    let o = origin();
    encoder.start(&o, &mut out);
    events(&mut *encoder, &o, &mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn streams_pieces_then_whole_calls_then_the_finish_with_usage() {
    let usage = Usage {
        prompt_tokens: 3,
        completion_tokens: 5,
        ..Usage::default()
    };
    let events = |e: &mut dyn StreamEncoder, o: &Origin, out: &mut Vec<u8>| {
        e.reasoning(o, out, Reasoning::Text("think"));
        e.text(o, out, "Hel");
        e.text(o, out, "lo");
        e.tool_call_start(o, out, 0, "toolu_1", "f");
        e.tool_call_arguments(o, out, 0, "{\"a\":");
        e.tool_call_arguments(o, out, 0, "1}");
        e.finish(o, out, FinishReason::ToolCalls);
        e.done(o, out, Some(&usage));
    };
    let sse = stream(false, events);
    let chunks: Vec<Value> = sse
        .split("\r\n\r\n")
        .filter(|c| !c.is_empty())
        .map(|c| serde_json::from_str(c.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    assert_eq!(chunks.len(), 5, "{sse}");
    assert_eq!(
        chunks[0]["candidates"][0]["content"]["parts"][0]["thought"],
        true
    );
    assert_eq!(
        chunks[2]["candidates"][0]["content"]["parts"][0]["text"],
        "lo"
    );
    assert_eq!(
        chunks[3]["candidates"][0]["content"]["parts"][0]["functionCall"]["args"],
        json!({"a": 1})
    );
    assert_eq!(chunks[4]["candidates"][0]["finishReason"], "STOP");
    assert_eq!(chunks[4]["usageMetadata"]["totalTokenCount"], 8);
    let array: Vec<Value> = serde_json::from_str(&stream(true, events)).unwrap();
    assert_eq!(array, chunks);
}

#[test]
fn a_stream_error_is_the_last_element_and_passed_through_events_keep_their_bytes() {
    let failed = stream(true, |e, o, out| {
        e.text(o, out, "x");
        e.error(
            out,
            &GatewayError::new(ErrorCode::UpstreamBusy, "busy"),
            "rid",
        );
    });
    let array: Vec<Value> = serde_json::from_str(&failed).unwrap();
    assert_eq!(array[1]["error"]["status"], "UNAVAILABLE");
    assert_eq!(array[1]["error"]["code"], 503);
    let event = b"data: {\"candidates\":[]}\r\n\r\n";
    let sse = stream(false, |e, o, out| {
        e.passthrough(out, &Passed::data(event));
        e.done(o, out, None);
    });
    assert_eq!(sse.as_bytes(), event);
    let array = stream(true, |e, o, out| {
        e.passthrough(out, &Passed::data(event));
        e.passthrough(out, &Passed::data(event));
        e.done(o, out, None);
    });
    assert_eq!(array, "[{\"candidates\":[]},\r\n{\"candidates\":[]}]");
}

#[test]
fn errors_are_google_rpc_status_with_the_gateways_code_and_the_wait() {
    let mut e = GatewayError::new(ErrorCode::UpstreamRateLimit, "slow down").with_provider("p");
    e.retry_after = Some(7);
    let v: Value = serde_json::from_slice(&Gemini.render_error(&e, Some("rid"))).unwrap();
    assert_eq!(v["error"]["code"], 429);
    assert_eq!(v["error"]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(v["error"]["details"][0]["reason"], "UPSTREAM_RATE_LIMIT");
    assert_eq!(v["error"]["details"][0]["metadata"]["provider"], "p");
    assert_eq!(v["error"]["details"][1]["retryDelay"], "7s");
    assert_eq!(Gemini.status(ErrorCode::UpstreamError), 500);
    assert_eq!(Gemini.status(ErrorCode::UpstreamBusy), 503);
    // A Gemini vendor's own details go on as they came, and alone.
    let vendors = [
        json!({"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "PerDay"}]}),
        json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "6.2s"}),
    ];
    e.details = Some(Box::new(crate::error::VendorDetails(vendors.to_vec())));
    let v: Value = serde_json::from_slice(&Gemini.render_error(&e, Some("rid"))).unwrap();
    assert_eq!(v["error"]["details"], json!(vendors));
}

#[test]
fn models_are_the_keys_groups() {
    use crate::model::listing::{Capabilities, Listed};
    let groups = [Listed::named("a"), Listed::named("b")];
    let v: Value = serde_json::from_slice(&Gemini.render_models(&groups, 0)).unwrap();
    assert_eq!(v["models"][1]["name"], "models/b");
    let one: Value = serde_json::from_slice(&Gemini.render_model(&groups[0], 0)).unwrap();
    assert!(one["supportedGenerationMethods"]
        .as_array()
        .unwrap()
        .contains(&json!("countTokens")));
    // A discovered embedding model: its vendor's limits, its methods.
    let embedder = Listed {
        owned_by: Some("p".into()),
        context_window: Some(2048),
        capabilities: Capabilities {
            embed: Some(true),
            ..Capabilities::default()
        },
        ..Listed::named("gemini-embedding-001")
    };
    let one: Value = serde_json::from_slice(&Gemini.render_model(&embedder, 0)).unwrap();
    assert_eq!(one["inputTokenLimit"], 2048);
    assert!(one.get("outputTokenLimit").is_none());
    assert_eq!(
        one["supportedGenerationMethods"],
        json!(["embedContent", "batchEmbedContents"])
    );
}

#[test]
fn refuses_unknown_members_at_any_depth_as_gemini_does() {
    let bad = |body: serde_json::Value| {
        let e = request::parse(body.to_string().as_bytes()).unwrap_err();
        (e.message, e.param.unwrap_or_default())
    };
    let part =
        |part: serde_json::Value| bad(json!({"contents": [{"role": "user", "parts": [part]}]}));
    assert_eq!(
        part(json!({"text": "hi", "x": 1})),
        (
            "Invalid JSON payload received. Unknown name \"x\" at 'contents[0].parts[0]': Cannot find field.".into(),
            "contents[0].parts[0].x".into()
        )
    );
    assert_eq!(
        bad(json!({"contents": [], "frobnicate": 1})).0,
        "Invalid JSON payload received. Unknown name \"frobnicate\": Cannot find field."
    );
    // Paths in proto names, as Google writes them; each nested message.
    for (body, at) in [
        (
            json!({"contents": [{"parts": [{"text": "a"}]}, {"role": "model", "parts": [{"functionCall": {"name": "f", "x": 1}}]}]}),
            "contents[1].parts[0].function_call",
        ),
        (
            json!({"contents": [{"parts": [{"functionResponse": {"name": "f", "response": {}, "x": 1}}]}]}),
            "contents[0].parts[0].function_response",
        ),
        (
            json!({"contents": [{"parts": [{"functionResponse": {"name": "f", "response": {}, "parts": [{"inlineData": {"mimeType": "image/png", "data": "", "x": 1}}]}}]}]}),
            "contents[0].parts[0].function_response.parts[0].inline_data",
        ),
        (
            json!({"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "", "x": 1}}]}]}),
            "contents[0].parts[0].inline_data",
        ),
        (
            json!({"contents": [{"parts": [{"file_data": {"fileUri": "gs://a", "x": 1}}]}]}),
            "contents[0].parts[0].file_data",
        ),
        (
            json!({"contents": [{"parts": [{"videoMetadata": {"fps": 1, "x": 1}}]}]}),
            "contents[0].parts[0].video_metadata",
        ),
        (json!({"contents": [{"x": 1, "parts": []}]}), "contents[0]"),
        (
            json!({"systemInstruction": {"parts": [{"text": "s", "x": 1}]}}),
            "system_instruction.parts[0]",
        ),
        (json!({"generationConfig": {"x": 1}}), "generation_config"),
        (
            json!({"generationConfig": {"thinkingConfig": {"thinkingBudget": 1, "x": 1}}}),
            "generation_config.thinking_config",
        ),
        (
            json!({"toolConfig": {"functionCallingConfig": {"mode": "ANY", "x": 1}}}),
            "tool_config.function_calling_config",
        ),
        (
            json!({"tools": [{"googleSearch": {}}, {"functionDeclarations": [{"name": "f", "x": 1}]}]}),
            "tools[1].function_declarations[0]",
        ),
        (json!({"tools": [{"x": {}}]}), "tools[0]"),
        (
            json!({"safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE", "x": 1}]}),
            "safety_settings[0]",
        ),
    ] {
        let (message, param) = bad(body);
        assert_eq!(
            message,
            format!(
                "Invalid JSON payload received. Unknown name \"x\" at '{at}': Cannot find field."
            )
        );
        assert_eq!(param, format!("{at}.x"));
    }
    // countTokens: its own members, then a generation's.
    let count = |body: serde_json::Value| {
        request::parse_count(body.to_string().as_bytes())
            .unwrap_err()
            .message
    };
    assert!(count(json!({"x": 1})).ends_with("Unknown name \"x\": Cannot find field."));
    assert!(count(json!({"contents": [{"parts": [{"txt": "a"}]}]}))
        .ends_with("Unknown name \"txt\" at 'contents[0].parts[0]': Cannot find field."));
    assert!(count(
        json!({"generateContentRequest": {"model": "models/g", "contents": [{"parts": [{"text": "a", "x": 1}]}]}})
    )
    .ends_with("at 'generate_content_request.contents[0].parts[0]': Cannot find field."));
    // Other faults are the typed parse's, said as before.
    let e = request::parse(br#"{"contents": [{"parts": [{"text": 1}]}]}"#).unwrap_err();
    assert!(
        e.message
            .starts_with("Invalid JSON payload received. invalid type"),
        "{}",
        e.message
    );
    let e = request::parse(br#"{"contents": [{"parts": [{"text": "a", "#).unwrap_err();
    assert!(e.message.contains("EOF"), "{}", e.message);
    // A member's name only: a free-form value's keys are the caller's.
    parse(
        json!({"contents": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"x": {"y": 1}}}}]},
        {"parts": [{"functionResponse": {"name": "f", "response": {"x": 1}}}]}],
        "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT", "x": 1}}]}],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {"x": 1}}}),
    );
}

#[test]
fn takes_every_member_the_sdks_and_gemini_cli_send() {
    // Every member of a part and of the messages under it, by JSON name
    // and by proto name (what google-genai, @google/genai and Gemini CLI
    // write for the Gemini API).
    let r = parse(json!({
        "contents": [
            {"role": "user", "parts": [
                {"text": "look", "partMetadata": {"k": "v"}},
                {"inlineData": {"mimeType": "image/png", "data": "QUJD"}, "mediaResolution": {"level": "MEDIA_RESOLUTION_HIGH"}},
                {"inline_data": {"mime_type": "application/pdf", "data": "QUJD"}, "media_resolution": {"level": "MEDIA_RESOLUTION_LOW"}},
            ]},
            {"role": "model", "parts": [
                {"text": "thinking", "thought": true, "thoughtSignature": "c2ln"},
                {"functionCall": {"id": "c1", "name": "f", "args": {}}, "thought_signature": "c2ln"},
                {"function_call": {"id": "c2", "name": "f", "args": {}}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "c1", "name": "f", "response": {"output": "1"}, "willContinue": false,
                    "scheduling": "WHEN_IDLE", "parts": [{"inlineData": {"mimeType": "image/png", "data": "QUJD", "displayName": "a.png"}}]}},
                {"function_response": {"id": "c2", "name": "f", "response": {"output": "2"}, "will_continue": false}}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": "s"}]},
        "tools": [{"functionDeclarations": [{"name": "f", "description": "d", "parametersJsonSchema": {"type": "object"},
            "responseJsonSchema": {"type": "object"}, "behavior": "BLOCKING"}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO", "allowedFunctionNames": ["f"]},
            "includeServerSideToolInvocations": true, "retrievalConfig": {"languageCode": "en"}},
        "generationConfig": {"temperature": 1, "topP": 0.9, "topK": 3, "maxOutputTokens": 9, "candidateCount": 1,
            "stopSequences": ["x"], "seed": 1, "presencePenalty": 0.1, "frequencyPenalty": 0.1,
            "responseMimeType": "text/plain", "responseModalities": ["TEXT"], "enableEnhancedCivicAnswers": true,
            "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 100, "thinkingLevel": null}},
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        "serviceTier": "flex", "store": false
    }));
    assert_eq!(r.messages.len(), 5, "{:?}", r.messages);
    assert!(r.native_only.is_none(), "{:?}", r.native_only);
    // Google's processing tier and logging choice: dropped for other vendors.
    assert!(
        !r.extra.contains_key("service_tier") && !r.extra.contains_key("store"),
        "{:?}",
        r.extra
    );
    // What google-genai 3.6 writes besides (by proto name too), Gemini's alone.
    let top = |member: serde_json::Value| {
        let mut body = json!({"contents": hi()});
        body.as_object_mut()
            .unwrap()
            .extend(member.as_object().unwrap().clone());
        parse(body).native_only.map(|n| n.param)
    };
    assert_eq!(
        top(json!({"continuationToken": "dG9r"})).as_deref(),
        Some("continuationToken")
    );
    assert_eq!(
        top(json!({"continuation_token": "dG9r"})).as_deref(),
        Some("continuationToken")
    );
    assert_eq!(
        top(json!({"tools": [{"mcpServers": [{"name": "m", "streamableHttpTransport": {"url": "https://m"}}]}]}))
            .as_deref(),
        Some("tools[0].mcpServers")
    );
    assert_eq!(
        top(json!({"generationConfig": {"audioTranscriptionConfig": {}}})).as_deref(),
        Some("generationConfig.audioTranscriptionConfig")
    );
    assert_eq!(top(json!({"service_tier": "priority"})), None);
    // Gemini's own data parts: taken, and marked Gemini's.
    let only = |part: serde_json::Value| {
        parse(json!({"contents": [{"role": "model", "parts": [part]}]}))
            .native_only
            .map(|n| n.param)
    };
    assert_eq!(
        only(json!({"executableCode": {"language": "PYTHON", "code": "1", "id": "e"}})).as_deref(),
        Some("contents[0].parts[0].executableCode")
    );
    assert_eq!(
        only(json!({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1", "id": "e"}}))
            .as_deref(),
        Some("contents[0].parts[0].codeExecutionResult")
    );
    assert!(only(json!({"toolCall": {"toolType": "GOOGLE_SEARCH_WEB", "id": "s", "args": {}}, "thoughtSignature": "c2ln"})).is_none());
    assert!(parse(
        json!({"contents": [{"parts": [{"fileData": {"fileUri": "gs://a", "mimeType": "video/mp4"},
        "videoMetadata": {"startOffset": "1s", "endOffset": "2s", "fps": 1}}]}]})
    )
    .native_only
    .is_some());
}

/// An OpenAI answer of two choices, as a Gemini client's candidates.
#[test]
fn openai_choices_are_candidates() {
    let openai = crate::dialects::dialect(crate::dialects::DialectKind::Openai);
    let body = br#"{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"gpt-4o",
        "choices":[{"index":1,"message":{"role":"assistant","content":"two"},"finish_reason":"length"},
                   {"index":0,"message":{"role":"assistant","content":"one"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":3,"completion_tokens":8,"total_tokens":11}}"#;
    let mut o = origin();
    let decoded = openai.decode_response(body, &mut o).unwrap();
    let v: Value =
        serde_json::from_slice(&Gemini.render_answer(decoded.answer, &o, &SurfaceState::default()))
            .unwrap();
    let candidates = v["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 2);
    for (i, (text, finish)) in [("one", "STOP"), ("two", "MAX_TOKENS")].iter().enumerate() {
        assert_eq!(candidates[i]["index"], i);
        assert_eq!(candidates[i]["content"]["parts"][0]["text"], *text);
        assert_eq!(candidates[i]["finishReason"], *finish);
    }
    assert_eq!(v["usageMetadata"]["candidatesTokenCount"], 8);
    // An index beyond the choices is the vendor's error.
    let bad = br#"{"id":"c","object":"chat.completion","created":1,"model":"m",
        "choices":[{"index":2,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}]}"#;
    assert_eq!(
        openai.decode_response(bad, &mut o).unwrap_err().status(),
        502
    );
}

/// OpenAI's interleaved chunks of two choices, as a Gemini client's stream.
#[test]
fn openai_streamed_choices_are_candidates() {
    let openai = crate::dialects::dialect(crate::dialects::DialectKind::Openai);
    let chunk = |choices: &str| {
        format!(
            r#"data: {{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":{choices}}}"#
        ) + "\n\n"
    };
    let events = [
        chunk(r#"[{"index":0,"delta":{"role":"assistant","content":""}}]"#),
        chunk(r#"[{"index":1,"delta":{"role":"assistant","content":""}}]"#),
        chunk(r#"[{"index":0,"delta":{"content":"A"}}]"#),
        chunk(r#"[{"index":1,"delta":{"content":"B"}}]"#),
        chunk(r#"[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}}]"#),
        chunk(r#"[{"index":0,"delta":{"content":"a"}}]"#),
        chunk(r#"[{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]"#),
        chunk(r#"[{"index":0,"delta":{},"finish_reason":"stop"}]"#),
        chunk(r#"[{"index":1,"delta":{},"finish_reason":"tool_calls"}]"#),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let writer = crate::surfaces::stream_writer(
        Api::Gemini,
        false,
        origin(),
        "rid".into(),
        false,
        &SurfaceState::default(),
    )
    .with_choices(2);
    let mut decoder = openai.stream_decoder(writer);
    let mut out = Vec::new();
    decoder.feed(events.as_bytes(), &mut out);
    decoder.finish(&mut out);
    let sse = String::from_utf8(out).unwrap();
    let chunks: Vec<Value> = sse
        .split("\r\n\r\n")
        .filter(|c| !c.is_empty())
        .map(|c| serde_json::from_str(c.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    let text_of = |index: u64| -> String {
        chunks
            .iter()
            .flat_map(|c| c["candidates"].as_array().unwrap())
            .filter(|c| c["index"] == index)
            .flat_map(|c| c["content"]["parts"].as_array().into_iter().flatten())
            .filter_map(|p| p["text"].as_str())
            .collect()
    };
    assert_eq!(
        (text_of(0).as_str(), text_of(1).as_str()),
        ("Aa", "B"),
        "{sse}"
    );
    let call = chunks
        .iter()
        .flat_map(|c| c["candidates"].as_array().unwrap())
        .find(|c| c["content"]["parts"][0]["functionCall"].is_object())
        .unwrap();
    assert_eq!(call["index"], 1);
    assert_eq!(
        call["content"]["parts"][0]["functionCall"]["args"],
        json!({"a": 1})
    );
    let last = chunks.last().unwrap();
    assert_eq!(
        last["candidates"],
        json!([{"finishReason":"STOP","index":0},{"finishReason":"STOP","index":1}])
    );
}
