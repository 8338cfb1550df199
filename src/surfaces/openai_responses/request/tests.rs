use super::*;
use serde_json::json;

fn ok(body: Value) -> ChatRequest {
    parsed(body).request
}

fn parsed(body: Value) -> Generation {
    parse(body.to_string().as_bytes()).unwrap()
}

/// What the answer repeats of the request, as the parser kept it.
fn echo(g: &Generation) -> &Map<String, Value> {
    &g.state.get::<ResponsesState>().unwrap().echo
}

fn err(body: &str) -> GatewayError {
    parse(body.as_bytes()).unwrap_err()
}

#[test]
fn a_string_input_is_one_user_turn_after_the_instructions() {
    let g = parsed(
        json!({"model": "g", "input": "hi", "instructions": "be brief",
        "max_output_tokens": 50, "temperature": 0.5, "stream": true, "user": "u"}),
    );
    let r = &g.request;
    assert_eq!(r.model, "g");
    assert_eq!(
        *r.messages,
        vec![
            Message::System {
                content: Content::Text("be brief".into()),
                name: None
            },
            Message::User {
                content: Content::Text("hi".into()),
                name: None
            }
        ]
    );
    assert_eq!(r.max_completion_tokens, Some(50));
    assert!(r.stream && r.include_usage);
    assert_eq!(r.user.as_deref(), Some("u"));
    assert_eq!(echo(&g)["instructions"], "be brief");
    assert_eq!(echo(&g)["tools"], json!([]));
    assert_eq!(echo(&g)["temperature"], 0.5);
    assert!(r.native_only.is_none());
}

#[test]
fn items_become_turns_and_consecutive_calls_merge() {
    let r = ok(json!({"model": "g", "input": [
        {"role": "developer", "content": "dev"},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hmm"}],
         "encrypted_content": "enc"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_2", "name": "g", "arguments": "{\"a\":1}", "status": "completed"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "signed"}], "encrypted_content": "gw-signature:sig-1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "one"},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "two"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "done", "annotations": []}]}
    ]}));
    assert_eq!(r.messages.len(), 6, "{:?}", r.messages);
    assert!(matches!(&r.messages[0], Message::Developer { .. }));
    assert!(
        r.messages[1].clone()
            == Message::User {
                content: Content::Parts(vec![
                    ContentPart::text("look"),
                    ContentPart::ImageUrl {
                        image_url: ImageUrl {
                            url: "data:image/png;base64,AAAA".into(),
                            detail: Some("low".into())
                        },
                        cache_control: None
                    }
                ]),
                name: None
            }
    );
    let Message::Assistant {
        reasoning,
        tool_calls,
        content,
        ..
    } = &r.messages[2]
    else {
        panic!("assistant")
    };
    assert_eq!(
        reasoning,
        &vec![Thinking {
            text: "hmm".into(),
            signature: None,
            redacted: Some("enc".into())
        }]
    );
    assert_eq!(tool_calls.len(), 2);
    assert_eq!(tool_calls[1].function.arguments, "{\"a\":1}");
    assert!(content.is_none());
    assert!(
        matches!(&r.messages[3], Message::Tool { tool_call_id, .. } if tool_call_id == "call_1")
    );
    assert!(matches!(&r.messages[4], Message::Tool { content, .. } if content.text() == "two"));
    assert!(
        matches!(&r.messages[5], Message::Assistant { content: Some(c), .. } if c.text() == "done")
    );
    let Message::Assistant { reasoning, .. } = &r.messages[5] else {
        panic!("assistant")
    };
    assert_eq!(
        reasoning[0].signature.as_deref(),
        Some("sig-1"),
        "the gateway's signature back"
    );
    assert!(reasoning[0].redacted.is_none());
}

#[test]
fn tools_choice_format_and_reasoning() {
    let g = parsed(json!({"model": "g", "input": "x",
        "tools": [{"type": "function", "name": "f", "description": "d",
                   "parameters": {"type": "object", "properties": {}}, "strict": true}],
        "tool_choice": {"type": "function", "name": "f"},
        "parallel_tool_calls": false,
        "reasoning": {"effort": "low", "summary": "auto"},
        "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}, "strict": true}},
        "metadata": {"task_type": "code"}, "store": false, "include": ["reasoning.encrypted_content"],
        "truncation": "disabled", "service_tier": "auto"}));
    let r = &g.request;
    assert!(!g.state.stores_answer(), "store: false");
    assert!(parsed(json!({"model": "g", "input": "x"}))
        .state
        .stores_answer());
    assert_eq!(r.tools[0].function.name, "f");
    assert_eq!(r.tools[0].function.strict, Some(true));
    assert_eq!(r.tool_choice, Some(ToolChoice::Function("f".into())));
    assert_eq!(r.parallel_tool_calls, Some(false));
    assert_eq!(r.reasoning.and_then(|r| r.effort), Some(Effort::Low));
    assert!(
        matches!(&r.response_format, Some(ResponseFormat::JsonSchema { json_schema }) if json_schema.name == "s" && json_schema.strict == Some(true))
    );
    assert_eq!(r.extra["metadata"]["task_type"], "code");
    assert_eq!(r.extra.len(), 1, "nothing else reaches OpenAI-API vendors");
    assert_eq!(
        echo(&g)["tool_choice"],
        json!({"type": "function", "name": "f"})
    );
}

#[test]
fn openai_only_features_are_kept_for_a_pass_through() {
    let r = ok(json!({"model": "g", "input": "x", "previous_response_id": "resp_1"}));
    assert_eq!(
        r.native_only.as_ref().map(|n| n.param.as_str()),
        Some("previous_response_id")
    );
    assert!(r.native_only.unwrap().message.contains("resp_gw"));
    let r = ok(json!({"model": "g", "input": "x", "tools": [
        {"type": "function", "name": "f"}, {"type": "file_search", "vector_store_ids": ["vs_1"]}]}));
    let n = r.native_only.unwrap();
    assert_eq!(n.param, "tools[1]");
    assert!(n.message.contains("file_search"), "{}", n.message);
    let r = ok(json!({"model": "g", "input": [{"type": "item_reference", "id": "msg_1"}]}));
    assert_eq!(r.native_only.unwrap().param, "input[0]");
}

#[test]
fn namespaced_tools_become_function_tools_and_their_history_follows() {
    // Codex's sub-agents, as Codex 0.171 sends them.
    let g = parsed(json!({"model": "g", "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "namespace": "multi_agent_v1",
         "name": "wait_agent", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"}],
        "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
            {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
             "tools": [{"type": "function", "name": "spawn_agent", "description": "Spawn.",
                        "parameters": {"type": "object"}, "strict": false},
                       {"type": "function", "name": "wait_agent"}]}]}));
    let r = &g.request;
    let names: Vec<_> = r.tools.iter().map(|t| t.function.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "exec_command",
            "multi_agent_v1__spawn_agent",
            "multi_agent_v1__wait_agent"
        ]
    );
    assert_eq!(r.tools[1].function.description.as_deref(), Some("Spawn."));
    assert!(r.native_only.is_none(), "{:?}", r.native_only);
    let Message::Assistant { tool_calls, .. } = &r.messages[1] else {
        panic!("assistant")
    };
    assert_eq!(tool_calls[0].function.name, "multi_agent_v1__wait_agent");
    assert_eq!(echo(&g)["tools"][1]["type"], "namespace", "echoed as sent");
    // A custom tool in a namespace has no counterpart elsewhere.
    let r = ok(
        json!({"model": "g", "input": "x", "tools": [{"type": "namespace",
        "name": "n", "description": "d", "tools": [{"type": "custom", "name": "c"}]}]}),
    );
    assert_eq!(r.native_only.unwrap().param, "tools[0].tools[0]");
    for (tools, param) in [
        (
            json!([{"type": "namespace", "name": "n", "description": "d"}]),
            "tools[0].tools",
        ),
        (
            json!([{"type": "namespace", "description": "d", "tools": []}]),
            "tools[0].name",
        ),
        (
            json!([{"type": "namespace", "name": "n", "tools": []}]),
            "tools[0].description",
        ),
        (
            json!([{"type": "namespace", "name": "n", "description": "d", "tools": [], "x": 1}]),
            "tools[0].x",
        ),
        (
            json!([{"type": "namespace", "name": "n", "description": "d", "tools": [{"type": "mcp"}]}]),
            "tools[0].tools[0].type",
        ),
        (
            json!([{"type": "function", "name": "n__f"},
                   {"type": "namespace", "name": "n", "description": "d",
                    "tools": [{"type": "function", "name": "f"}]}]),
            "tools[1].tools[0].name",
        ),
    ] {
        let body = json!({"model": "g", "input": "x", "tools": tools}).to_string();
        assert_eq!(err(&body).param.as_deref(), Some(param), "{body}");
    }
}

#[test]
fn web_search_is_the_vendors_search_and_its_calls_in_history_are_dropped() {
    let r = ok(json!({"model": "g", "input": [
        {"role": "user", "content": "news?"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": "news"}},
        {"role": "assistant", "content": "Here."}],
        "tools": [{"type": "web_search", "external_web_access": true,
            "filters": {"allowed_domains": ["example.com"]}, "search_context_size": "low",
            "user_location": {"type": "approximate", "city": "Paris", "country": "FR"}}]}));
    assert!(r.native_only.is_none(), "{:?}", r.native_only);
    assert!(r.tools.is_empty());
    assert_eq!(r.messages.len(), 2, "the search call is not a turn");
    let search = r.web_search.unwrap();
    assert_eq!(search.allowed_domains, ["example.com"]);
    let location = search.user_location.unwrap();
    assert_eq!(
        (location.city.as_deref(), location.country.as_deref()),
        (Some("Paris"), Some("FR"))
    );
    assert!(
        ok(json!({"model": "g", "input": "x", "tools": [{"type": "web_search_preview"}]}))
            .web_search
            .is_some()
    );
    for (tool, param) in [
        (
            json!({"type": "web_search", "frobnicate": 1}),
            "tools[0].frobnicate",
        ),
        (
            json!({"type": "web_search", "filters": {"allowed_domains": [1]}}),
            "tools[0].filters.allowed_domains[0]",
        ),
        (
            json!({"type": "web_search", "user_location": {"type": "exact"}}),
            "tools[0].user_location.type",
        ),
        (
            json!({"type": "web_search", "search_context_size": "huge"}),
            "tools[0].search_context_size",
        ),
        (
            json!({"type": "web_search", "external_web_access": "yes"}),
            "tools[0].external_web_access",
        ),
    ] {
        let body = json!({"model": "g", "input": "x", "tools": [tool]}).to_string();
        assert_eq!(err(&body).param.as_deref(), Some(param), "{body}");
    }
}

#[test]
fn refuses_what_openai_refuses() {
    for (body, param) in [
        (r#"{"model":"g","input":"x","frobnicate":1}"#, "frobnicate"),
        (r#"{"model":"g","input":"x","input":"y"}"#, "input"),
        (r#"{"input":"x"}"#, "model"),
        (r#"{"model":"g"}"#, "input"),
        (r#"{"model":"g","input":5}"#, "input"),
        (
            r#"{"model":"g","input":[{"role":"user","content":"x","extra":1}]}"#,
            "input[0].extra",
        ),
        (
            r#"{"model":"g","input":[{"role":"tool","content":"x"}]}"#,
            "input[0].role",
        ),
        (
            r#"{"model":"g","input":[{"role":"user","content":[{"type":"text","text":"x"}]}]}"#,
            "input[0].content[0].type",
        ),
        (
            r#"{"model":"g","input":[{"type":"function_call","call_id":"c","name":"f"}]}"#,
            "input[0].arguments",
        ),
        (
            r#"{"model":"g","input":[{"type":"bogus"}]}"#,
            "input[0].type",
        ),
        (
            r#"{"model":"g","input":"x","tools":[{"type":"function","function":{"name":"f"}}]}"#,
            "tools[0].function",
        ),
        (
            r#"{"model":"g","input":"x","tools":[{"type":"weird"}]}"#,
            "tools[0].type",
        ),
        (
            r#"{"model":"g","input":"x","tool_choice":"sometimes"}"#,
            "tool_choice",
        ),
        (
            r#"{"model":"g","input":"x","temperature":3}"#,
            "temperature",
        ),
        (
            r#"{"model":"g","input":"x","max_output_tokens":0}"#,
            "max_output_tokens",
        ),
        (
            r#"{"model":"g","input":"x","reasoning":{"effort":"huge"}}"#,
            "reasoning.effort",
        ),
        (
            r#"{"model":"g","input":"x","text":{"format":{"type":"json_schema","name":"s"}}}"#,
            "text.format.schema",
        ),
        (
            r#"{"model":"g","input":"x","text":{"format":{"type":"json_schema","json_schema":{}}}}"#,
            "text.format.json_schema",
        ),
        (
            r#"{"model":"g","input":"x","metadata":{"a":1}}"#,
            "metadata.a",
        ),
        (
            r#"{"model":"g","input":"x","metadata":{"a":"1","a":"2"}}"#,
            "metadata.a",
        ),
    ] {
        let e = err(body);
        assert_eq!(e.param.as_deref(), Some(param), "{body}: {}", e.message);
        assert_eq!(e.status(), 400);
    }
    assert!(err(r#"{"model":"g","input":"x","x":1}"#)
        .message
        .contains("Unknown parameter: 'x'"));
    assert_eq!(err("  ").param.as_deref(), Some("body"));
}

#[test]
fn an_input_parts_cache_breakpoint_is_a_breakpoint() {
    let r = ok(json!({"model": "g", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "long", "prompt_cache_breakpoint": {"mode": "explicit", "ttl": "12h"}},
        {"type": "input_image", "image_url": "https://x/y.png", "prompt_cache_breakpoint": {"mode": "explicit"}},
        {"type": "input_text", "text": "q"}]}]}));
    let Message::User {
        content: Content::Parts(parts),
        ..
    } = &r.messages[0]
    else {
        panic!("{:?}", r.messages[0]);
    };
    let ttl = |t: Option<&str>| {
        Some(CacheControl {
            ttl: t.map(Into::into),
        })
    };
    assert_eq!(parts[0].cache_control().cloned(), ttl(Some("12h")));
    assert_eq!(parts[1].cache_control().cloned(), ttl(None));
    assert_eq!(parts[2].cache_control(), None);
    let at = "input[0].content[0].prompt_cache_breakpoint";
    for (breakpoint, param) in [
        (json!({"mode": "implicit"}), format!("{at}.mode")),
        (
            json!({"mode": "explicit", "ttl": "5m"}),
            format!("{at}.ttl"),
        ),
        (json!({"ttl": "30m"}), format!("{at}.mode")),
        (json!({"mode": "explicit", "x": 1}), format!("{at}.x")),
    ] {
        let body = json!({"model": "g", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "x", "prompt_cache_breakpoint": breakpoint}]}]});
        assert_eq!(err(&body.to_string()).param, Some(param));
    }
}
