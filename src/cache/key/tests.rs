use super::*;
use crate::model::Api;
use crate::surfaces::route::PathFacts;
use crate::surfaces::surface;

fn parsed(api: Api, body: &str) -> ChatRequest {
    let facts = match api {
        Api::Gemini => PathFacts {
            model: Some("m".into()),
            stream: Some(false),
            ..PathFacts::default()
        },
        _ => PathFacts::default(),
    };
    surface(api)
        .parse_generation(&facts, body.as_bytes())
        .unwrap()
        .request
}

fn key(api: Api, body: &str) -> RequestKey {
    RequestKey::of("g", &parsed(api, body))
}

/// One prompt (a system prompt, a question, an output limit, a
/// temperature) as each client API writes it.
const SAME_PROMPT: [(Api, &str); 4] = [
    (
        Api::OpenAiChat,
        r#"{"model":"m","max_tokens":50,"temperature":0,"messages":[
            {"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}"#,
    ),
    (
        Api::AnthropicMessages,
        r#"{"model":"m","max_tokens":50,"temperature":0,"system":"be brief",
            "messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#,
    ),
    (
        Api::OpenAiResponses,
        r#"{"model":"m","max_output_tokens":50,"temperature":0,"instructions":"be brief",
            "input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}"#,
    ),
    (
        Api::Gemini,
        r#"{"systemInstruction":{"parts":[{"text":"be brief"}]},
            "contents":[{"role":"user","parts":[{"text":"hi"}]}],
            "generationConfig":{"maxOutputTokens":50,"temperature":0}}"#,
    ),
];

#[test]
fn the_same_prompt_through_every_client_api_has_one_key() {
    let keys: Vec<(Api, RequestKey)> = SAME_PROMPT
        .iter()
        .map(|(api, body)| (*api, key(*api, body)))
        .collect();
    for (api, k) in &keys {
        assert_eq!(*k, keys[0].1, "{api:?} differs from Chat Completions");
    }
}

#[test]
fn stream_user_metadata_ids_and_spacing_do_not_count() {
    let base = key(
        Api::OpenAiChat,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],
            "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"}}}}}]}"#,
    );
    let same = key(
        Api::OpenAiChat,
        r#"{"stream":true,"stream_options":{"include_usage":true},"user":"u-1",
            "metadata":{"task":"x"},"request_id":"r-1","store":true,
            "tools":[{"function":{"parameters":{"properties":{"b":{"type":"number"},"a":{"type":"string"}},"type":"object"},"name":"f"},"type":"function"}],
            "messages":[{"content":[{"type":"text","text":"hi"}],"role":"user"}],"model":"m",
            "tool_choice":"auto","parallel_tool_calls":true,"n":1,"response_format":{"type":"text"}}"#,
    );
    assert_eq!(base, same);
}

#[test]
fn what_decides_the_answer_changes_the_key() {
    let base = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let k = key(Api::OpenAiChat, base);
    for changed in [
        r#"{"model":"other","messages":[{"role":"user","content":"hi"}]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi!"}]}"#,
        r#"{"model":"m","messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}]}"#,
        r#"{"model":"m","messages":[{"role":"developer","content":"x"},{"role":"user","content":"hi"}]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi","name":"ann"}]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"top_p":0.5}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":1}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":["x"]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"low"}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"presence_penalty":1}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"required",
            "tools":[{"type":"function","function":{"name":"f"}}]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"parallel_tool_calls":false}"#,
    ] {
        assert_ne!(key(Api::OpenAiChat, changed), k, "{changed}");
    }
    // A group is part of the key: a hit never crosses groups.
    let request = parsed(Api::OpenAiChat, base);
    assert_ne!(RequestKey::of("g", &request), RequestKey::of("h", &request));
}

#[test]
fn stop_sequences_are_a_set_and_tool_arguments_are_json() {
    let a = key(
        Api::OpenAiChat,
        r#"{"model":"m","stop":["a","b"],"messages":[{"role":"user","content":"hi"},
            {"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\": 1, \"y\": 2}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"ok"}]}"#,
    );
    let b = key(
        Api::OpenAiChat,
        r#"{"model":"m","stop":["b","a","b"],"messages":[{"role":"user","content":"hi"},
            {"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"y\":2,\"x\":1}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"ok"}]}"#,
    );
    assert_eq!(a, b);
}

#[test]
fn values_are_length_prefixed_so_no_two_requests_write_alike() {
    let a = key(
        Api::OpenAiChat,
        r#"{"model":"m","messages":[{"role":"user","content":"ab"},{"role":"user","content":"c"}]}"#,
    );
    let b = key(
        Api::OpenAiChat,
        r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"bc"}]}"#,
    );
    assert_ne!(a, b);
}
