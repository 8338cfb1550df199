#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

use super::*;
use crate::http::parse;

fn get(models: &Models, target: &str, headers: &str) -> (u16, Value) {
    let req = parse(&format!(
        "GET {target} HTTP/1.1\r\nhost: x\r\n{headers}\r\n"
    ));
    let route = models.route(&req, req.path()).expect("a list call");
    let reply = models.answer(&route, &req);
    (reply.status, serde_json::from_str(&reply.body).unwrap())
}

const OPENAI: &str = "authorization: Bearer sk-mock-openai\r\n";
const ANTHROPIC: &str = "x-api-key: sk-mock-anthropic\r\nanthropic-version: 2023-06-01\r\n";
const GEMINI: &str = "x-goog-api-key: mock-gemini-key\r\n";

#[test]
fn each_vendor_lists_in_its_shape_with_its_credentials() {
    let models = Models::new(None);
    let (status, v) = get(&models, "/v1/models", OPENAI);
    assert_eq!(status, 200);
    assert_eq!(v["object"], "list");
    assert!(v["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == "mock-gpt-4o" && m["owned_by"] == "system"));
    let (status, v) = get(&models, "/v1/models", "authorization: Bearer wrong\r\n");
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (401, Some("invalid_api_key"))
    );
    let (status, v) = get(&models, "/v1/models/gpt-4o-mini", OPENAI);
    assert_eq!((status, v["id"].as_str()), (200, Some("gpt-4o-mini")));
    let (status, _) = get(&models, "/v1/models/gpt-9", OPENAI);
    assert_eq!(status, 404);
    // Anthropic's: the same path, its headers, its paging, newest first.
    let (status, v) = get(&models, "/v1/models?limit=4", ANTHROPIC);
    assert_eq!(status, 200);
    assert_eq!(v["data"][0]["id"], "claude-haiku-4-5-20251001");
    assert_eq!(v["data"][0]["max_input_tokens"], 200_000);
    assert_eq!(
        (v["has_more"].as_bool(), v["last_id"].as_str()),
        (Some(false), Some("mock-claude-32k"))
    );
    let (_, first) = get(&models, "/v1/models?limit=1", ANTHROPIC);
    assert_eq!(
        (first["has_more"].as_bool(), first["last_id"].as_str()),
        (Some(true), Some("claude-haiku-4-5-20251001"))
    );
    let (_, next) = get(
        &models,
        "/v1/models?limit=1&after_id=claude-haiku-4-5-20251001",
        ANTHROPIC,
    );
    assert_eq!(next["data"][0]["id"], "mock-claude-sonnet");
    assert_eq!(next["has_more"], true);
    let (status, v) = get(&models, "/v1/models?limit=0", ANTHROPIC);
    assert_eq!(
        (status, v["error"]["type"].as_str()),
        (400, Some("invalid_request_error"))
    );
    let (status, _) = get(&models, "/v1/models", "x-api-key: sk-mock-anthropic\r\n");
    assert_eq!(status, 401, "an OpenAI call without a bearer key");
    // Gemini: pages by token.
    let (status, v) = get(&models, "/v1beta/models?pageSize=2", GEMINI);
    assert_eq!(status, 200);
    assert_eq!(v["models"].as_array().unwrap().len(), 2);
    let token = v["nextPageToken"].as_str().unwrap().to_owned();
    let (_, rest) = get(
        &models,
        &format!("/v1beta/models?pageSize=1000&pageToken={token}"),
        GEMINI,
    );
    assert_eq!(rest["models"].as_array().unwrap().len(), 4);
    assert!(rest.get("nextPageToken").is_none());
    assert!(rest["models"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "models/gemini-embedding-001"
            && m["supportedGenerationMethods"][0] == "embedContent"));
    let (status, _) = get(&models, "/v1beta/models?pageToken=nonsense", GEMINI);
    assert_eq!(status, 400);
    // Azure: the classic deployments in their one API version.
    let azure = "api-key: mock-azure-key\r\n";
    let (status, v) = get(&models, "/openai/deployments?api-version=2022-12-01", azure);
    assert_eq!(status, 200);
    assert_eq!(v["data"][0]["object"], "deployment");
    let (status, _) = get(&models, "/openai/deployments?api-version=2024-10-21", azure);
    assert_eq!(status, 404);
    let (status, v) = get(&models, "/openai/v1/models", azure);
    assert_eq!(
        (
            status,
            v["data"][0]["capabilities"]["chat_completion"].as_bool()
        ),
        (200, Some(true))
    );
    // DashScope and Bedrock (any authorization without a verifier).
    let (status, _) = get(
        &models,
        "/compatible-mode/v1/models",
        "authorization: Bearer sk-mock-dashscope\r\n",
    );
    assert_eq!(status, 200);
    let (status, v) = get(
        &models,
        "/foundation-models",
        "authorization: AWS4-HMAC-SHA256 x\r\n",
    );
    assert_eq!(
        (
            status,
            v["modelSummaries"][0]["modelLifecycle"]["status"].as_str()
        ),
        (200, Some("ACTIVE"))
    );
    let (status, v) = get(
        &models,
        "/inference-profiles?maxResults=1000",
        "authorization: AWS4-HMAC-SHA256 x\r\n",
    );
    assert_eq!(
        (status, v["inferenceProfileSummaries"][0]["status"].as_str()),
        (200, Some("ACTIVE"))
    );
}

#[test]
fn a_catalog_changes_at_run_time_and_fails_on_demand() {
    let models = Models::new(None);
    models
        .change(br#"{"vendor":"openai","remove":["gpt-4o-mini"],"add":["gpt-5",{"id":"tiny","context_window":4096}]}"#)
        .unwrap();
    let (_, v) = get(&models, "/v1/models", OPENAI);
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"gpt-5") && ids.contains(&"tiny") && !ids.contains(&"gpt-4o-mini"));
    assert!(models.removed("openai", "gpt-4o-mini"));
    assert_eq!(
        named("/v1/chat/completions", "gpt-4o"),
        Some(("openai", "gpt-4o".into()))
    );
    assert_eq!(
        named("/openai/deployments/my%20dep/chat/completions", ""),
        Some(("azure-deployments", "my dep".into()))
    );
    assert_eq!(
        named(
            "/v1/projects/p/locations/l/publishers/anthropic/models/claude-x@1:rawPredict",
            ""
        ),
        Some(("vertex-anthropic", "claude-x".into()))
    );
    models
        .change(br#"{"vendor":"openai","add":["gpt-4o-mini"]}"#)
        .unwrap();
    assert!(!models.removed("openai", "gpt-4o-mini"), "back");
    models
        .change(br#"{"vendor":"openai","fault":"error-429"}"#)
        .unwrap();
    let (status, v) = get(&models, "/v1/models", OPENAI);
    assert_eq!(
        (status, v["error"]["type"].as_str()),
        (429, Some("requests")),
        "OpenAI's 429"
    );
    models
        .change(br#"{"vendor":"openai","fault":null,"page_size":1}"#)
        .unwrap();
    assert_eq!(get(&models, "/v1/models", OPENAI).0, 200);
    models
        .change(br#"{"vendor":"anthropic","page_size":1}"#)
        .unwrap();
    let (_, v) = get(&models, "/v1/models?limit=1000", ANTHROPIC);
    assert_eq!(
        v["data"].as_array().unwrap().len(),
        1,
        "the mock's own page size"
    );
    let shown: Value = serde_json::from_str(&models.show()).unwrap();
    assert_eq!(shown["openai"]["calls"], 3);
    assert_eq!(shown["openai"]["removed"], serde_json::json!([]));
    for bad in [
        &br#"{"vendor":"nope"}"#[..],
        br#"{"vendor":"openai","fault":"boom"}"#,
        b"[",
    ] {
        assert!(models.change(bad).is_err());
    }
}
