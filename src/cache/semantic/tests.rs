use super::*;

fn request(json: serde_json::Value) -> ChatRequest {
    let body = serde_json::to_vec(&json).unwrap();
    crate::surfaces::surface(crate::model::Api::OpenAiChat)
        .parse_generation(&Default::default(), &body)
        .unwrap()
        .request
}

fn chat(messages: serde_json::Value) -> ChatRequest {
    request(serde_json::json!({"model": "m", "messages": messages}))
}

#[test]
fn the_system_and_the_last_user_turn_are_embedded() {
    let r = chat(serde_json::json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]},
    ]));
    let prompt = Prompt::of("g", &r).unwrap();
    assert_eq!(prompt.text, "Be brief.\nWhat is 2+2?");
}

#[test]
fn the_partition_holds_all_but_the_text() {
    let ns = Namespace::of_key("alice");
    let settings: Settings = serde_json::from_str(r#"{"embedding_group": "embed"}"#).unwrap();
    let of = |r: &ChatRequest| Prompt::of("g", r).unwrap().partition(&ns, &settings);
    let base =
        chat(serde_json::json!([{"role": "user", "content": "What is the capital of France?"}]));
    let paraphrase = chat(serde_json::json!([
        {"role": "system", "content": "You answer questions."},
        {"role": "user", "content": "Tell me the capital of France"}
    ]));
    assert_eq!(of(&base), of(&paraphrase));
    // Another model, tools, output format, sampling, earlier turns, group, key: another partition.
    let mut model = base.clone();
    model.model = "other".into();
    let tools = request(serde_json::json!({"model": "m",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "messages": [{"role": "user", "content": "What is the capital of France?"}]}));
    let format = request(
        serde_json::json!({"model": "m", "response_format": {"type": "json_object"},
        "messages": [{"role": "user", "content": "What is the capital of France?"}]}),
    );
    let mut warm = base.clone();
    warm.temperature = Some(0.9);
    let earlier = chat(serde_json::json!([
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "What is the capital of France?"}]));
    for other in [&model, &tools, &format, &warm, &earlier] {
        assert_ne!(of(&base), of(other), "{other:?}");
    }
    let group = Prompt::of("h", &base).unwrap().partition(&ns, &settings);
    assert_ne!(of(&base), group);
    let bob = Prompt::of("g", &base)
        .unwrap()
        .partition(&Namespace::of_key("bob"), &settings);
    assert_ne!(of(&base), bob);
    // Vectors of another embedding model or group: another partition.
    for other in [
        r#"{"embedding_group": "embed", "embedding_model": "text-embedding-3-large"}"#,
        r#"{"embedding_group": "embed-2"}"#,
    ] {
        let other: Settings = serde_json::from_str(other).unwrap();
        let prompt = Prompt::of("g", &base).unwrap();
        assert_ne!(of(&base), prompt.partition(&ns, &other), "{other:?}");
    }
}

#[test]
fn a_turn_that_is_not_text_alone_is_not_compared_by_meaning() {
    let tool = chat(serde_json::json!([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "sunny"}]));
    assert_eq!(Prompt::of("g", &tool), None);
    let image = chat(serde_json::json!([{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]));
    assert_eq!(Prompt::of("g", &image), None);
    assert_eq!(
        Prompt::of(
            "g",
            &chat(serde_json::json!([{"role": "user", "content": "  "}]))
        ),
        None
    );
}

#[test]
fn an_embeddings_answer_gives_its_first_vector() {
    let body = br#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-0.25]}],"model":"m"}"#;
    assert_eq!(vector_of(body), Some(vec![0.5, -0.25]));
    assert_eq!(vector_of(br#"{"data":[]}"#), None);
    assert_eq!(vector_of(br#"{"data":[{"embedding":"AAAA"}]}"#), None);
    assert_eq!(vector_of(b"not json"), None);
}

#[test]
fn settings_are_checked_with_clear_errors() {
    let parse = |json: serde_json::Value| serde_json::from_value::<Settings>(json);
    let ok = parse(serde_json::json!({"embedding_group": "embed"})).unwrap();
    assert_eq!(ok.threshold, DEFAULT_THRESHOLD);
    assert_eq!(ok.model(), "embed");
    assert_eq!(ok.validate("f"), Ok(()));
    assert!(
        parse(serde_json::json!({})).is_err(),
        "embedding_group is required"
    );
    assert!(parse(serde_json::json!({"embedding_group": "e", "treshold": 0.9})).is_err());
    for (json, field) in [
        (
            serde_json::json!({"embedding_group": ""}),
            "f.embedding_group",
        ),
        (
            serde_json::json!({"embedding_group": "e", "threshold": 0}),
            "f.threshold",
        ),
        (
            serde_json::json!({"embedding_group": "e", "threshold": 1.5}),
            "f.threshold",
        ),
        (
            serde_json::json!({"embedding_group": "e", "max_entries": 0}),
            "f.max_entries",
        ),
        (
            serde_json::json!({"embedding_group": "e", "max_entries": 100_001}),
            "f.max_entries",
        ),
        (
            serde_json::json!({"embedding_group": "e", "timeout_ms": 0}),
            "f.timeout_ms",
        ),
    ] {
        let err = parse(json).unwrap().validate("f").unwrap_err();
        assert!(err.starts_with(field), "{err}");
    }
    let groups = |g: &str| g == "embed" || g == "chat";
    assert_eq!(ok.check_in("model_groups.chat", groups, true), Ok(()));
    let missing = Settings {
        embedding_group: "nope".into(),
        ..ok.clone()
    };
    assert!(missing
        .check_in("model_groups.chat", groups, true)
        .unwrap_err()
        .contains("no model group is named 'nope'"));
    let own = Settings {
        embedding_group: "chat".into(),
        ..ok.clone()
    };
    assert!(own.check_in("model_groups.chat", groups, true).is_err());
    assert!(ok
        .check_in("model_groups.chat", groups, false)
        .unwrap_err()
        .contains("self_calls"));
}
