//! Each vendor's list: the request (path, auth) and what its answer says.

use super::*;
use crate::config::Config;

fn config(provider: &str) -> Config {
    Config::parse(
        format!(
            r#"{{"providers":{{"p":{provider}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#
        )
        .as_bytes(),
        |_| None,
    )
    .unwrap()
}

/// The request for `query` at the provider, as (path, headers).
fn request_for(provider: &str, query: Query) -> (String, Vec<(&'static str, String)>) {
    let config = config(provider);
    let provider = &config.providers["p"];
    let target = Target {
        provider,
        model: "",
    };
    let up = request(of(provider.dialect).unwrap(), query, &target).unwrap();
    assert!(up.body.is_empty());
    (up.path, up.headers)
}

fn ids(page: &ListedPage) -> Vec<&str> {
    page.models.iter().map(|m| m.id.as_str()).collect()
}

#[test]
fn openai_and_its_kin_list_in_one_page() {
    let (path, headers) = request_for(
        r#"{"dialect":"openai","api_key":"sk","base_path":"/proxy"}"#,
        Query::Page(&Page::default()),
    );
    assert_eq!(path, "/proxy/v1/models");
    assert_eq!(headers, [("authorization", "Bearer sk".to_owned())]);
    let page = OpenAi { root: "/v1/models", one: true }
        .decode(
            &Page::default(),
            br#"{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1715367049,"owned_by":"system"},{"id":"bad\nid","object":"model"}]}"#,
            0,
        )
        .unwrap();
    assert_eq!(
        ids(&page),
        ["gpt-4o"],
        "an id no header could carry is left out"
    );
    assert_eq!(page.models[0].created, Some(1_715_367_049));
    assert!(page.next.is_none());
    let (path, _) = request_for(
        r#"{"dialect":"openai","api_key":"sk"}"#,
        Query::One("ft:gpt-4o:org/x"),
    );
    assert_eq!(path, "/v1/models/ft%3Agpt-4o%3Aorg%2Fx");
    let (path, headers) = request_for(
        r#"{"dialect":"dashscope","api_key":"sk"}"#,
        Query::Page(&Page::default()),
    );
    assert_eq!(path, "/compatible-mode/v1/models");
    assert_eq!(headers, [("authorization", "Bearer sk".to_owned())]);
    let config = config(r#"{"dialect":"dashscope","api_key":"sk"}"#);
    let target = Target {
        provider: &config.providers["p"],
        model: "",
    };
    assert!(request(
        of(config.providers["p"].dialect).unwrap(),
        Query::One("qwen-plus"),
        &target
    )
    .is_err());
}

#[test]
fn azure_lists_the_v1_models_or_the_classic_deployments() {
    let (path, headers) = request_for(
        r#"{"dialect":"azure","api_key":"az","api_version":"v1"}"#,
        Query::Page(&Page::default()),
    );
    assert_eq!(path, "/openai/v1/models");
    assert_eq!(headers, [("api-key", "az".to_owned())]);
    let (path, _) = request_for(
        r#"{"dialect":"azure","api_key":"az","api_version":"2024-10-21"}"#,
        Query::Page(&Page::default()),
    );
    assert_eq!(path, "/openai/deployments?api-version=2022-12-01");
    let (path, _) = request_for(
        r#"{"dialect":"azure","api_key":"az","api_version":"2024-10-21"}"#,
        Query::One("my deployment"),
    );
    assert_eq!(
        path,
        "/openai/deployments/my%20deployment?api-version=2022-12-01"
    );
    // Models: retired ones (inference deprecated) left out; capabilities kept.
    let models = br#"{"object":"list","data":[
        {"id":"gpt-4o","object":"model","created_at":1715367049,"status":"succeeded","capabilities":{"chat_completion":true,"embeddings":false,"inference":true},"lifecycle_status":"generally-available","deprecation":{"inference":4102444800}},
        {"id":"curie","object":"model","created_at":1646126127,"capabilities":{"completion":true},"deprecation":{"inference":1709284527}},
        {"id":"text-embedding-3-small","object":"model","capabilities":{"embeddings":true}}]}"#;
    let page = Azure
        .decode(&Page::default(), models, 1_800_000_000)
        .unwrap();
    assert_eq!(ids(&page), ["gpt-4o", "text-embedding-3-small"]);
    assert_eq!(page.models[0].created, Some(1_715_367_049));
    assert_eq!(page.models[0].capabilities.generate, Some(true));
    assert_eq!(page.models[1].capabilities.embed, Some(true));
    // Deployments: those that serve, with the model each runs.
    let deployments = br#"{"object":"list","data":[
        {"id":"chat-prod","model":"gpt-4o","owner":"organization-owner","status":"succeeded","created_at":1,"updated_at":2,"object":"deployment","scale_settings":{"scale_type":"standard"}},
        {"id":"pending","model":"gpt-4o","status":"running","object":"deployment"}]}"#;
    let page = Azure.decode(&Page::default(), deployments, 0).unwrap();
    assert_eq!(ids(&page), ["chat-prod"]);
    assert_eq!(page.models[0].base.as_deref(), Some("gpt-4o"));
    let one = Azure
        .decode_one(
            br#"{"id":"chat-prod","model":"gpt-4o","status":"succeeded","object":"deployment"}"#,
            0,
        )
        .unwrap()
        .unwrap();
    assert_eq!(
        (one.id.as_str(), one.base.as_deref()),
        ("chat-prod", Some("gpt-4o"))
    );
}

#[test]
fn anthropic_pages_after_the_last_id_and_skips_retired_models() {
    let (path, headers) = request_for(
        r#"{"dialect":"anthropic","api_key":"sk-ant"}"#,
        Query::Page(&Page::default()),
    );
    assert_eq!(path, "/v1/models?limit=1000");
    assert_eq!(
        headers,
        [
            ("anthropic-version", "2023-06-01".to_owned()),
            ("x-api-key", "sk-ant".to_owned())
        ]
    );
    let body = br#"{"data":[
        {"type":"model","id":"claude-sonnet-4-5-20250929","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z","max_input_tokens":200000,"max_tokens":64000,"lifecycle":"active","capabilities":{"image_input":{"supported":true},"batch":{"supported":true}}},
        {"type":"model","id":"claude-2.1","display_name":"Claude 2.1","created_at":"1970-01-01T00:00:00Z","lifecycle":"retired"}],
        "has_more":true,"first_id":"claude-sonnet-4-5-20250929","last_id":"claude-2.1"}"#;
    let page = Anthropic.decode(&Page::default(), body, 0).unwrap();
    assert_eq!(ids(&page), ["claude-sonnet-4-5-20250929"]);
    let m = &page.models[0];
    assert_eq!(
        (m.context_window, m.max_output_tokens),
        (Some(200_000), Some(64_000))
    );
    assert_eq!(m.capabilities.vision, Some(true));
    assert_eq!(m.created, Some(1_759_104_000));
    assert_eq!(m.display_name.as_deref(), Some("Claude Sonnet 4.5"));
    let next = page.next.unwrap();
    assert_eq!(next.token.as_deref(), Some("claude-2.1"));
    let (path, _) = request_for(
        r#"{"dialect":"anthropic","api_key":"sk-ant"}"#,
        Query::Page(&next),
    );
    assert_eq!(path, "/v1/models?limit=1000&after_id=claude-2.1");
    // The last page; and a vendor repeating the cursor ends the read.
    let last = Anthropic
        .decode(
            &next,
            br#"{"data":[],"has_more":true,"first_id":null,"last_id":"claude-2.1"}"#,
            0,
        )
        .unwrap();
    assert!(last.next.is_none());
}

#[test]
fn gemini_pages_with_tokens_and_says_limits_and_methods() {
    let (path, headers) = request_for(
        r#"{"dialect":"gemini","api_key":"g-key"}"#,
        Query::Page(&Page::default()),
    );
    assert_eq!(path, "/v1beta/models?pageSize=1000");
    assert_eq!(headers, [("x-goog-api-key", "g-key".to_owned())]);
    let body = br#"{"models":[
        {"name":"models/gemini-2.5-pro","version":"2.5","displayName":"Gemini 2.5 Pro","inputTokenLimit":1048576,"outputTokenLimit":65536,"supportedGenerationMethods":["generateContent","countTokens","createCachedContent"],"thinking":true},
        {"name":"models/gemini-embedding-001","inputTokenLimit":2048,"outputTokenLimit":1,"supportedGenerationMethods":["embedContent"]}],
        "nextPageToken":"Ch1tb2RlbHMv+/="}"#;
    let page = GoogleAi.decode(&Page::default(), body, 0).unwrap();
    assert_eq!(ids(&page), ["gemini-2.5-pro", "gemini-embedding-001"]);
    let pro = &page.models[0];
    assert_eq!(
        (pro.context_window, pro.max_output_tokens),
        (Some(1_048_576), Some(65_536))
    );
    assert_eq!(
        (
            pro.capabilities.generate,
            pro.capabilities.embed,
            pro.capabilities.count_tokens
        ),
        (Some(true), Some(false), Some(true))
    );
    assert_eq!(page.models[1].capabilities.embed, Some(true));
    let (path, _) = request_for(
        r#"{"dialect":"gemini","api_key":"g"}"#,
        Query::Page(page.next.as_ref().unwrap()),
    );
    assert_eq!(
        path,
        "/v1beta/models?pageSize=1000&pageToken=Ch1tb2RlbHMv%2B%2F%3D"
    );
    let (path, _) = request_for(
        r#"{"dialect":"gemini","api_key":"g"}"#,
        Query::One("models/gemini-2.5-pro"),
    );
    assert_eq!(path, "/v1beta/models/gemini-2.5-pro");
}

#[test]
fn vertex_lists_its_publishers_models() {
    let vertex =
        r#"{"dialect":"vertex_anthropic","api_key":"ya29.t","project":"p","location":"us-east5"}"#;
    let (path, headers) = request_for(vertex, Query::Page(&Page::default()));
    assert_eq!(path, "/v1beta1/publishers/anthropic/models?pageSize=1000");
    assert_eq!(headers, [("authorization", "Bearer ya29.t".to_owned())]);
    let (path, _) = request_for(vertex, Query::One("claude-sonnet-4-5@20250929"));
    assert_eq!(
        path,
        "/v1beta1/publishers/anthropic/models/claude-sonnet-4-5"
    );
    let body = br#"{"publisherModels":[
        {"name":"publishers/anthropic/models/claude-sonnet-4-5","versionId":"20250929","launchStage":"GA"},
        {"name":"publishers/anthropic/models/claude-2","launchStage":"DEPRECATED"},
        {"name":"publishers/google/models/elsewhere"}],"nextPageToken":""}"#;
    let page = Vertex {
        publisher: "anthropic",
    }
    .decode(&Page::default(), body, 0)
    .unwrap();
    assert_eq!(ids(&page), ["claude-sonnet-4-5"]);
    assert!(page.next.is_none(), "an empty token ends the list");
    let (path, _) = request_for(
        r#"{"dialect":"vertex_gemini","api_key":"ya29.t","project":"p","location":"global"}"#,
        Query::Page(&Page::default()),
    );
    assert_eq!(path, "/v1beta1/publishers/google/models?pageSize=1000");
}

#[test]
fn bedrock_lists_foundation_models_then_inference_profiles() {
    let bedrock = r#"{"dialect":"bedrock"}"#;
    let (path, headers) = request_for(bedrock, Query::Page(&Page::default()));
    assert_eq!(path, "/foundation-models");
    assert!(headers.is_empty(), "Envoy signs it");
    let body = br#"{"modelSummaries":[
        {"modelArn":"arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0","modelId":"anthropic.claude-3-haiku-20240307-v1:0","modelName":"Claude 3 Haiku","providerName":"Anthropic","inputModalities":["TEXT","IMAGE"],"outputModalities":["TEXT"],"responseStreamingSupported":true,"customizationsSupported":[],"inferenceTypesSupported":["ON_DEMAND"],"modelLifecycle":{"status":"ACTIVE"}},
        {"modelId":"amazon.titan-embed-text-v2:0","inputModalities":["TEXT"],"outputModalities":["EMBEDDING"]}]}"#;
    let page = Bedrock.decode(&Page::default(), body, 0).unwrap();
    assert_eq!(
        ids(&page),
        [
            "anthropic.claude-3-haiku-20240307-v1:0",
            "amazon.titan-embed-text-v2:0"
        ]
    );
    assert_eq!(page.models[0].capabilities.vision, Some(true));
    assert_eq!(page.models[1].capabilities.embed, Some(true));
    let profiles = page.next.unwrap();
    let (path, _) = request_for(bedrock, Query::Page(&profiles));
    assert_eq!(path, "/inference-profiles?maxResults=1000");
    let body = br#"{"inferenceProfileSummaries":[
        {"inferenceProfileName":"US Claude 3.5 Sonnet","inferenceProfileArn":"arn:x","inferenceProfileId":"us.anthropic.claude-3-5-sonnet-20240620-v1:0","models":[{"modelArn":"arn:y"}],"status":"ACTIVE","type":"SYSTEM_DEFINED","createdAt":"2024-08-27T00:00:00Z"}],
        "nextToken":"abc=="}"#;
    let page = Bedrock.decode(&profiles, body, 0).unwrap();
    assert_eq!(ids(&page), ["us.anthropic.claude-3-5-sonnet-20240620-v1:0"]);
    let next = page.next.unwrap();
    let (path, _) = request_for(bedrock, Query::Page(&next));
    assert_eq!(
        path,
        "/inference-profiles?maxResults=1000&nextToken=abc%3D%3D"
    );
    let (path, _) = request_for(
        bedrock,
        Query::One("us.anthropic.claude-3-5-sonnet-20240620-v1:0"),
    );
    assert_eq!(
        path,
        "/inference-profiles/us.anthropic.claude-3-5-sonnet-20240620-v1%3A0"
    );
    let (path, _) = request_for(
        bedrock,
        Query::One("anthropic.claude-3-haiku-20240307-v1:0"),
    );
    assert_eq!(
        path,
        "/foundation-models/anthropic.claude-3-haiku-20240307-v1%3A0"
    );
    let one = Bedrock
        .decode_one(br#"{"modelDetails":{"modelId":"anthropic.claude-3-haiku-20240307-v1:0","outputModalities":["TEXT"]}}"#, 0)
        .unwrap()
        .unwrap();
    assert_eq!(one.id, "anthropic.claude-3-haiku-20240307-v1:0");
    let (_, headers) = request_for(
        r#"{"dialect":"bedrock","api_key":"bedrock-api-key"}"#,
        Query::Page(&Page::default()),
    );
    assert_eq!(
        headers,
        [("authorization", "Bearer bedrock-api-key".to_owned())]
    );
}

#[test]
fn answers_that_are_not_lists_are_errors() {
    for lister in [
        of(crate::dialects::DialectKind::Openai).unwrap(),
        of(crate::dialects::DialectKind::Anthropic).unwrap(),
        of(crate::dialects::DialectKind::Gemini).unwrap(),
        of(crate::dialects::DialectKind::Bedrock).unwrap(),
        of(crate::dialects::DialectKind::VertexGemini).unwrap(),
        of(crate::dialects::DialectKind::Azure).unwrap(),
    ] {
        assert!(lister.decode(&Page::default(), b"<html>", 0).is_err());
        assert!(lister.decode(&Page::default(), b"[1,2]", 0).is_err());
    }
}
