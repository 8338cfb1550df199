//! Each vendor's embeddings endpoint: a valid request and its answer's
//! shape, and each request rule refusing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};

use super::{Embeddings, Endpoint};
use crate::http::{self, Request};
use crate::scenario::Scenario;
use crate::wire_tests::{post, start};

const OPENAI: &[(&str, &str)] = &[("authorization", "Bearer sk-mock-openai")];
const AZURE: &[(&str, &str)] = &[("api-key", "mock-azure-key")];
const GEMINI: &[(&str, &str)] = &[("x-goog-api-key", "mock-gemini-key")];
/// Without `--aws-credentials` any Authorization passes Bedrock's check.
const AWS: &[(&str, &str)] = &[("authorization", "AWS4-HMAC-SHA256 Credential=x")];
const DASHSCOPE: &[(&str, &str)] = &[("authorization", "Bearer sk-mock-dashscope")];

fn request(path: &str, headers: &[(&str, &str)], body: &str) -> Request {
    let mut raw = format!(
        "POST {path} HTTP/1.1\r\nhost: mock\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str("\r\n");
    raw.push_str(body);
    http::parse(&raw)
}

struct Got {
    status: u16,
    body: Value,
    headers: Vec<(&'static str, String)>,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The error message, wherever the vendor puts it.
    fn message(&self) -> String {
        ["/error/message", "/message"]
            .iter()
            .find_map(|p| self.body.pointer(p).and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned()
    }
}

fn call_raw(path: &str, headers: &[(&str, &str)], body: &str, scenario: &str) -> Got {
    let e = Embeddings { aws: None };
    let route_path = path.split('?').next().unwrap();
    let ep = e.route(route_path).expect("an embeddings path");
    let a = e.answer(
        ep,
        &request(path, headers, body),
        route_path,
        &Scenario::parse(scenario),
    );
    Got {
        status: a.status,
        body: serde_json::from_str(&a.body).unwrap(),
        headers: a.headers,
    }
}

fn call(path: &str, headers: &[(&str, &str)], body: Value) -> Got {
    call_raw(path, headers, &body.to_string(), "")
}

fn norm(v: &Value) -> f64 {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap().powi(2))
        .sum::<f64>()
        .sqrt()
}

fn len(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

#[test]
fn routes() {
    let e = Embeddings { aws: None };
    let cases = [
        ("/v1/embeddings", Some(Endpoint::OpenAi)),
        ("/openai/v1/embeddings", Some(Endpoint::AzureV1)),
        (
            "/openai/deployments/emb/embeddings",
            Some(Endpoint::AzureDeployment),
        ),
        (
            "/v1beta/models/gemini-embedding-001:embedContent",
            Some(Endpoint::GeminiOne),
        ),
        (
            "/v1beta/models/gemini-embedding-001:batchEmbedContents",
            Some(Endpoint::GeminiBatch),
        ),
        (
            "/model/amazon.titan-embed-text-v2:0/invoke",
            Some(Endpoint::Bedrock),
        ),
        (
            "/model/amazon.titan-embed-text-v2%3A0/invoke",
            Some(Endpoint::Bedrock),
        ),
        (
            "/model/us.cohere.embed-v4:0/invoke",
            Some(Endpoint::Bedrock),
        ),
        (
            "/model/cohere.embed-english-v3/invoke",
            Some(Endpoint::Bedrock),
        ),
        (
            "/api/v1/services/embeddings/text-embedding/text-embedding",
            Some(Endpoint::DashScope),
        ),
        // Claude's InvokeModel and the chat endpoints stay the dialects'.
        ("/model/anthropic.claude-3-haiku-20240307-v1:0/invoke", None),
        (
            "/model/amazon.titan-embed-text-v2:0/invoke-with-response-stream",
            None,
        ),
        ("/v1/chat/completions", None),
        ("/v1beta/models/gemini-embedding-001:generateContent", None),
    ];
    for (path, want) in cases {
        assert_eq!(e.route(path), want, "{path}");
    }
}

#[test]
fn vectors_are_deterministic_unit_and_prefix_stable() {
    let a = super::vector("hello world", 64);
    assert_eq!(a, super::vector("hello world", 64));
    assert_ne!(a, super::vector("hello there", 64));
    let n: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    assert!((n - 1.0).abs() < 1e-4);
    assert!(a.iter().all(|x| (-1.0..=1.0).contains(x)));
    assert_eq!(
        super::raw_vector("x", 8)[..4],
        super::raw_vector("x", 4)[..]
    );
}

#[test]
fn texts_that_share_words_are_close_and_others_far() {
    let cos = |a: &str, b: &str| -> f32 {
        let (a, b) = (super::vector(a, 1536), super::vector(b, 1536));
        a.iter().zip(&b).map(|(x, y)| x * y).sum()
    };
    // Case and punctuation do not count; word order neither.
    assert!(
        cos(
            "What is the capital of France?",
            "what is the capital of france"
        ) > 0.99
    );
    let paraphrase = cos(
        "What is the capital city of France?",
        "Tell me what the capital of France is",
    );
    assert!(paraphrase > 0.6, "{paraphrase}");
    let unrelated = cos(
        "What is the capital city of France?",
        "Write a haiku about autumn leaves",
    );
    assert!(unrelated.abs() < 0.15, "{unrelated}");
}

// ---- OpenAI ----

#[test]
fn openai_answers_a_list_in_input_order() {
    let g = call(
        "/v1/embeddings",
        OPENAI,
        json!({"model": "text-embedding-3-small", "input": ["one two", "three", "one two"]}),
    );
    assert_eq!(g.status, 200, "{}", g.body);
    assert_eq!(g.body["object"], "list");
    assert_eq!(g.body["model"], "text-embedding-3-small");
    assert_eq!(
        g.body["usage"],
        json!({"prompt_tokens": 5, "total_tokens": 5})
    );
    let data = g.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    for (i, d) in data.iter().enumerate() {
        assert_eq!(d["object"], "embedding");
        assert_eq!(d["index"], i);
        assert_eq!(len(&d["embedding"]), 1536);
        assert!((norm(&d["embedding"]) - 1.0).abs() < 1e-3);
    }
    assert_eq!(data[0]["embedding"], data[2]["embedding"]);
    assert_ne!(data[0]["embedding"], data[1]["embedding"]);

    // Tokens, shortened, base64 of little-endian f32s.
    let g = call(
        "/v1/embeddings",
        OPENAI,
        json!({"model": "text-embedding-3-large", "input": [[1, 2, 3], [4]], "dimensions": 8,
               "encoding_format": "base64", "user": "u1"}),
    );
    assert_eq!(g.status, 200, "{}", g.body);
    assert_eq!(g.body["usage"]["prompt_tokens"], 4);
    let b64 = g.body["data"][0]["embedding"].as_str().unwrap();
    assert_eq!(b64.len(), 44); // 32 bytes
    let floats = call(
        "/v1/embeddings",
        OPENAI,
        json!({"model": "text-embedding-3-large", "input": [[1, 2, 3]], "dimensions": 8}),
    );
    // The float answer's numbers are exact f32s: their bytes are the base64's.
    let same: Vec<f32> = floats.body["data"][0]["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(b64, super::base64_floats(&same));
}

#[test]
fn openai_refuses_what_the_api_refuses() {
    let refuse = |body: Value, status: u16, msg: &str| {
        let g = call("/v1/embeddings", OPENAI, body.clone());
        assert_eq!(g.status, status, "{body}: {}", g.body);
        assert!(g.message().contains(msg), "{body}: {}", g.body);
        g
    };
    let small = |extra: Value| {
        let mut b = json!({"model": "text-embedding-3-small", "input": "hi"});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    refuse(
        small(json!({"foo": 1})),
        400,
        "Unrecognized request argument supplied: foo",
    );
    refuse(
        json!({"input": "hi"}),
        400,
        "you must provide a model parameter",
    );
    for model in ["mock-gpt-4o", "text-embedding-4"] {
        let g = refuse(
            json!({"model": model, "input": "hi"}),
            404,
            &format!("The model `{model}` does not exist or you do not have access to it."),
        );
        assert_eq!(g.body["error"]["code"], "model_not_found");
    }
    for input in [
        json!(""),
        json!([]),
        json!(["a", 1]),
        json!(null),
        json!([[]]),
    ] {
        let g = refuse(small(json!({"input": input})), 400, "'$.input' is invalid.");
        assert_eq!(g.body["error"]["param"], "input");
    }
    let many: Vec<&str> = vec!["x"; 2049];
    refuse(small(json!({"input": many})), 400, "'$.input' is invalid.");
    refuse(
        json!({"model": "text-embedding-ada-002", "input": "hi", "dimensions": 256}),
        400,
        "This model does not support specifying dimensions.",
    );
    for bad in [json!(0), json!(1537), json!("256"), json!(1.5)] {
        let g = refuse(small(json!({"dimensions": bad})), 400, "dimensions");
        assert_eq!(g.body["error"]["param"], "dimensions");
    }
    refuse(
        small(json!({"encoding_format": "int8"})),
        400,
        "'float' and 'base64'",
    );
    let long = "w ".repeat(8193);
    refuse(
        small(json!({"input": long})),
        400,
        "This model's maximum context length is 8192 tokens, however you requested 8193 tokens \
         (8193 in your prompt; 0 for the completion).",
    );
    let chunk = "w ".repeat(8000);
    let g = refuse(
        small(json!({"input": vec![chunk; 38]})),
        400,
        "Requested 304000 tokens, max 300000 tokens per request",
    );
    assert_eq!(g.body["error"]["code"], "max_tokens_per_request");
    let g = call_raw(
        "/v1/embeddings",
        &[("authorization", "Bearer sk-x")],
        "{}",
        "",
    );
    assert_eq!(g.status, 401);
}

#[test]
fn openai_scenarios() {
    let body = json!({"model": "text-embedding-3-small", "input": "hi"}).to_string();
    let g = call_raw("/v1/embeddings", OPENAI, &body, "error-429");
    assert_eq!(g.status, 429);
    assert_eq!(g.header("retry-after"), Some("7"));
    let g = call_raw("/v1/embeddings", OPENAI, &body, "error-400-context");
    assert_eq!(g.status, 400);
    assert!(g
        .message()
        .contains("maximum context length is 8192 tokens"));
    // `fail-input=WORD`: only the request carrying the word fails.
    let g = call_raw("/v1/embeddings", OPENAI, &body, "fail-input=poison");
    assert_eq!(g.status, 200);
    let poisoned = json!({"model": "text-embedding-3-small", "input": ["a", "x poison y"]});
    let g = call_raw(
        "/v1/embeddings",
        OPENAI,
        &poisoned.to_string(),
        "fail-input=poison",
    );
    assert_eq!(g.status, 503);
}

// ---- Azure ----

#[test]
fn azure_deployments_and_v1() {
    let path = "/openai/deployments/my-text-embedding-3-large/embeddings?api-version=2024-10-21";
    let g = call(path, AZURE, json!({"input": "hi", "model": "ignored"}));
    assert_eq!(g.status, 200, "{}", g.body);
    assert_eq!(g.body["model"], "text-embedding-3-large");
    assert_eq!(len(&g.body["data"][0]["embedding"]), 3072);

    let g = call(
        "/openai/deployments/gpt-4o/embeddings?api-version=2024-10-21",
        AZURE,
        json!({"input": "hi"}),
    );
    assert_eq!(g.status, 400);
    assert_eq!(g.body["error"]["code"], "OperationNotSupported");
    assert!(g
        .message()
        .starts_with("The embeddings operation does not work with the specified model, gpt-4o."));

    let g = call(
        "/openai/deployments/emb-ada/embeddings",
        AZURE,
        json!({"input": "hi"}),
    );
    assert_eq!(g.status, 400);
    assert!(g.message().contains("api-version"));
    let g = call(path, &[("api-key", "nope")], json!({"input": "hi"}));
    assert_eq!(g.status, 401);
    let g = call(path, AZURE, json!({"input": "hi", "bogus": true}));
    assert_eq!(g.message(), "Unrecognized request argument supplied: bogus");

    let g = call(
        "/openai/v1/embeddings",
        AZURE,
        json!({"model": "text-embedding-3-small", "input": ["a", "b"], "dimensions": 16}),
    );
    assert_eq!(g.status, 200, "{}", g.body);
    assert_eq!(len(&g.body["data"][1]["embedding"]), 16);
    let g = call("/openai/v1/embeddings", AZURE, json!({"input": "hi"}));
    assert_eq!(g.status, 400);
    let g = call(
        "/openai/v1/embeddings",
        AZURE,
        json!({"model": "gpt-4o", "input": "a"}),
    );
    assert_eq!(g.body["error"]["code"], "OperationNotSupported");
}

// ---- Gemini ----

const EMBED: &str = "/v1beta/models/gemini-embedding-001:embedContent";
const BATCH: &str = "/v1beta/models/gemini-embedding-001:batchEmbedContents";

fn content(text: &str) -> Value {
    json!({"parts": [{"text": text}]})
}

#[test]
fn gemini_embeds_one_and_a_batch() {
    let g = call(EMBED, GEMINI, json!({"content": content("hello world")}));
    assert_eq!(g.status, 200, "{}", g.body);
    let full = g.body["embedding"]["values"].clone();
    assert_eq!(len(&full), 3072);
    assert_eq!(g.body.as_object().unwrap().len(), 1, "no usage: {}", g.body);

    let g = call(
        EMBED,
        GEMINI,
        json!({"model": "models/gemini-embedding-001", "content": content("hello world"),
               "taskType": "RETRIEVAL_DOCUMENT", "title": "t", "outputDimensionality": 768}),
    );
    assert_eq!(g.status, 200, "{}", g.body);
    // Truncated from the end.
    assert_eq!(
        g.body["embedding"]["values"].as_array().unwrap()[..],
        full.as_array().unwrap()[..768]
    );

    let r = |t: &str| json!({"model": "models/gemini-embedding-001", "content": content(t)});
    let g = call(BATCH, GEMINI, json!({"requests": [r("a"), r("b")]}));
    assert_eq!(g.status, 200, "{}", g.body);
    let e = g.body["embeddings"].as_array().unwrap();
    assert_eq!(e.len(), 2);
    assert_ne!(e[0]["values"], e[1]["values"]);

    let g = call(
        "/v1beta/models/text-embedding-004:embedContent",
        GEMINI,
        json!({"content": content("x")}),
    );
    assert_eq!(len(&g.body["embedding"]["values"]), 768);
}

#[test]
fn gemini_refuses_what_the_api_refuses() {
    let refuse = |path: &str, body: Value, status: u16, msg: &str| {
        let g = call(path, GEMINI, body.clone());
        assert_eq!(g.status, status, "{body}: {}", g.body);
        assert_eq!(g.message(), msg, "{body}");
        g
    };
    let r = |m: &str| json!({"model": m, "content": content("a")});
    let hundred_one: Vec<Value> = (0..101).map(|_| r("models/gemini-embedding-001")).collect();
    refuse(
        BATCH,
        json!({ "requests": hundred_one }),
        400,
        "* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch\n",
    );
    refuse(
        BATCH,
        json!({"requests": [{"content": content("a")}]}),
        400,
        "* BatchEmbedContentsRequest.requests[0].model: model is not specified\n",
    );
    let g = call(
        BATCH,
        GEMINI,
        json!({"requests": [r("models/text-embedding-004")]}),
    );
    assert_eq!(g.status, 400);
    let g = call(
        BATCH,
        GEMINI,
        json!({"requests": [r("gemini-embedding-001")]}),
    );
    assert!(g.message().contains("unexpected model name format"));
    refuse(
        EMBED,
        json!({"content": content("a"), "foo": 1}),
        400,
        "Invalid JSON payload received. Unknown name \"foo\": Cannot find field.",
    );
    refuse(
        BATCH,
        json!({"requests": [{"model": "models/gemini-embedding-001", "content": {"parts": [{"txt": "a"}]}}]}),
        400,
        "Invalid JSON payload received. Unknown name \"txt\" at 'requests[0].content.parts[0]': Cannot find field.",
    );
    for model in ["mock-gemini-flash", "gemini-2.5-pro"] {
        let g = refuse(
            &format!("/v1beta/models/{model}:embedContent"),
            json!({"content": content("a")}),
            404,
            &format!(
                "models/{model} is not found for API version v1beta, or is not supported for \
                 embedContent. Call ListModels to see the list of available models and their \
                 supported methods."
            ),
        );
        assert_eq!(g.body["error"]["status"], "NOT_FOUND");
    }
    for dims in [64, 3073] {
        let g = call(
            EMBED,
            GEMINI,
            json!({"content": content("a"), "outputDimensionality": dims}),
        );
        assert_eq!(g.status, 400, "{dims}");
    }
    let g = call(
        "/v1beta/models/text-embedding-004:embedContent",
        GEMINI,
        json!({"content": content("a"), "outputDimensionality": 1024}),
    );
    assert_eq!(g.status, 400);
    let g = call(
        EMBED,
        GEMINI,
        json!({"content": content("a"), "taskType": "SUMMARY"}),
    );
    assert!(g.message().starts_with("Invalid value at 'task_type'"));
    let g = call(
        EMBED,
        GEMINI,
        json!({"content": content("a"), "title": "t"}),
    );
    assert_eq!(g.status, 400);
    for empty in [
        json!({"parts": []}),
        json!({"parts": [{"text": ""}]}),
        json!({"parts": [{}]}),
    ] {
        let g = call(EMBED, GEMINI, json!({ "content": empty }));
        assert_eq!(g.status, 400, "{empty}");
    }
    let g = call(
        EMBED,
        &[("x-goog-api-key", "bad")],
        json!({"content": content("a")}),
    );
    assert_eq!(g.status, 400);
    assert_eq!(
        g.message(),
        "API key not valid. Please pass a valid API key."
    );
    let g = call_raw(
        EMBED,
        GEMINI,
        &json!({"content": content("a")}).to_string(),
        "error-503",
    );
    assert_eq!(g.status, 503);
}

// ---- Bedrock ----

const TITAN: &str = "/model/amazon.titan-embed-text-v2:0/invoke";
const COHERE_V3: &str = "/model/cohere.embed-english-v3/invoke";
const COHERE_V4: &str = "/model/cohere.embed-v4:0/invoke";

#[test]
fn bedrock_titan() {
    let g = call(TITAN, AWS, json!({"inputText": "hello big world"}));
    assert_eq!(g.status, 200, "{}", g.body);
    assert_eq!(len(&g.body["embedding"]), 1024);
    assert_eq!(g.body["inputTextTokenCount"], 3);
    assert_eq!(g.body["embeddingsByType"]["float"], g.body["embedding"]);
    assert_eq!(g.header("x-amzn-bedrock-input-token-count"), Some("3"));

    let g = call(
        TITAN,
        AWS,
        json!({"inputText": "a", "dimensions": 256, "normalize": false, "embeddingTypes": ["binary"]}),
    );
    assert_eq!(g.status, 200, "{}", g.body);
    assert_eq!(len(&g.body["embedding"]), 256);
    let bits = g.body["embeddingsByType"]["binary"].as_array().unwrap();
    assert_eq!(bits.len(), 256);
    assert!(bits.iter().all(|b| b == 0 || b == 1));
    assert!(g.body["embeddingsByType"].get("float").is_none());

    let refuse = |body: Value, msg: &str| {
        let g = call(TITAN, AWS, body.clone());
        assert_eq!(g.status, 400, "{body}");
        assert_eq!(g.message(), msg, "{body}");
        assert!(g
            .header("x-amzn-errortype")
            .unwrap()
            .starts_with("ValidationException"));
    };
    refuse(
        json!({"inputText": "a", "texts": ["a"]}),
        "Malformed input request: #: extraneous key [texts] is not permitted, please reformat \
         your input and try again.",
    );
    refuse(
        json!({"inputText": "a", "dimensions": 100}),
        "Malformed input request: #/dimensions: 100 is not a valid enum value, please reformat \
         your input and try again.",
    );
    refuse(
        json!({"inputText": "x".repeat(50_001)}),
        "Malformed input request: #/inputText: expected maxLength: 50000, actual: 50001, please \
         reformat your input and try again.",
    );
    refuse(
        json!({}),
        "Malformed input request: #: required key [inputText] not found, please reformat your \
         input and try again.",
    );
    refuse(
        json!({"inputText": "", "embeddingTypes": ["int8"]}),
        "Malformed input request: #/inputText: expected minLength: 1, actual: 0#/embeddingTypes/0: \
         int8 is not a valid enum value, please reformat your input and try again.",
    );
    let g = call(TITAN, &[], json!({"inputText": "a"}));
    assert_eq!(g.status, 403);
    let g = call_raw(TITAN, AWS, r#"{"inputText":"a"}"#, "error-400-context");
    assert_eq!(g.message(), "Input is too long for requested model.");
}

#[test]
fn bedrock_cohere() {
    let g = call(
        COHERE_V3,
        AWS,
        json!({"texts": ["one", "two words"], "input_type": "search_document", "truncate": "END"}),
    );
    assert_eq!(g.status, 200, "{}", g.body);
    assert_eq!(g.body["response_type"], "embeddings_floats");
    assert_eq!(g.body["texts"], json!(["one", "two words"]));
    assert!(g.body["id"].as_str().is_some_and(|s| s.len() == 36));
    let e = g.body["embeddings"].as_array().unwrap();
    assert_eq!((e.len(), len(&e[0])), (2, 1024));
    assert_eq!(g.header("X-Amzn-Bedrock-Input-Token-Count"), Some("3"));

    let g = call(
        COHERE_V3,
        AWS,
        json!({"texts": ["a"], "input_type": "search_query", "embedding_types": ["float", "int8", "ubinary"]}),
    );
    assert_eq!(g.body["response_type"], "embeddings_by_type");
    assert_eq!(len(&g.body["embeddings"]["float"][0]), 1024);
    assert_eq!(len(&g.body["embeddings"]["int8"][0]), 1024);
    assert_eq!(len(&g.body["embeddings"]["ubinary"][0]), 128);

    let g = call(
        COHERE_V4,
        AWS,
        json!({"texts": ["a"], "input_type": "clustering", "output_dimension": 512, "max_tokens": 1000,
               "truncate": "RIGHT"}),
    );
    assert_eq!(g.status, 200, "{}", g.body);
    assert_eq!(len(&g.body["embeddings"][0]), 512);
    let g = call(
        COHERE_V4,
        AWS,
        json!({"texts": ["a"], "input_type": "clustering"}),
    );
    assert_eq!(len(&g.body["embeddings"][0]), 1536);

    let refuse = |path: &str, body: Value, msg: &str| {
        let g = call(path, AWS, body.clone());
        assert_eq!(g.status, 400, "{body}");
        assert!(g.message().contains(msg), "{body}: {}", g.message());
    };
    refuse(
        COHERE_V3,
        json!({"texts": vec!["a"; 97], "input_type": "search_query"}),
        "#/texts: expected maxItems: 96, actual: 97",
    );
    refuse(
        COHERE_V3,
        json!({"texts": ["x".repeat(2049)], "input_type": "search_query"}),
        "#/texts/0: expected maxLength: 2048, actual: 2049",
    );
    refuse(
        COHERE_V3,
        json!({"texts": ["a"], "input_type": "search_query", "output_dimension": 512}),
        "#: extraneous key [output_dimension] is not permitted",
    );
    refuse(
        COHERE_V3,
        json!({"texts": ["a"]}),
        "#: required key [input_type] not found",
    );
    refuse(
        COHERE_V3,
        json!({"texts": ["a"], "input_type": "query"}),
        "#/input_type: query is not a valid enum value",
    );
    refuse(
        COHERE_V3,
        json!({"texts": ["a"], "input_type": "search_query", "truncate": "LEFT"}),
        "#/truncate: LEFT is not a valid enum value",
    );
    refuse(
        COHERE_V4,
        json!({"texts": ["a"], "input_type": "search_query", "output_dimension": 300}),
        "#/output_dimension: 300 is not a valid enum value",
    );
    refuse(
        COHERE_V4,
        json!({"texts": vec!["a"; 97], "input_type": "search_query"}),
        "expected maxItems: 96, actual: 97",
    );
    refuse(
        COHERE_V4,
        json!({"texts": ["a"], "input_type": "search_query", "embedding_types": ["double"]}),
        "#/embedding_types/0: double is not a valid enum value",
    );
}

// ---- DashScope ----

const DS: &str = "/api/v1/services/embeddings/text-embedding/text-embedding";

#[test]
fn dashscope_embeds_and_refuses() {
    let g = call(
        DS,
        DASHSCOPE,
        json!({"model": "text-embedding-v4", "input": {"texts": ["a b", "c"]},
               "parameters": {"dimension": 2048, "text_type": "query", "output_type": "dense"}}),
    );
    assert_eq!(g.status, 200, "{}", g.body);
    let e = g.body["output"]["embeddings"].as_array().unwrap();
    assert_eq!(e.len(), 2);
    assert_eq!(e[1]["text_index"], 1);
    assert_eq!(len(&e[0]["embedding"]), 2048);
    assert_eq!(g.body["usage"], json!({"total_tokens": 3}));
    assert!(g.body["request_id"].is_string());
    let g = call(
        DS,
        DASHSCOPE,
        json!({"model": "text-embedding-v3", "input": {"texts": ["a"]}}),
    );
    assert_eq!(len(&g.body["output"]["embeddings"][0]["embedding"]), 1024);

    let refuse = |body: Value, msg: &str| {
        let g = call(DS, DASHSCOPE, body.clone());
        assert_eq!(g.status, 400, "{body}");
        assert_eq!(g.body["code"], "InvalidParameter", "{body}");
        assert!(g.message().contains(msg), "{body}: {}", g.message());
    };
    refuse(
        json!({"model": "text-embedding-v4", "input": {"texts": vec!["a"; 11]}}),
        "batch size is invalid, it should not be larger than 10.",
    );
    refuse(
        json!({"model": "qwen-plus", "input": {"texts": ["a"]}}),
        "Model not exist.",
    );
    refuse(
        json!({"model": "text-embedding-v3", "input": {"texts": ["a"]}, "parameters": {"dimension": 2048}}),
        "dimension",
    );
    refuse(
        json!({"model": "text-embedding-v4", "input": {"texts": ["a"]}, "parameters": {"dimension": 100}}),
        "dimension",
    );
    refuse(
        json!({"model": "text-embedding-v4", "input": {"texts": ["a"]}, "parameters": {"top_p": 1}}),
        "parameter top_p is not supported",
    );
    refuse(
        json!({"model": "text-embedding-v4", "input": {"texts": ["a"]}, "parameters": {"text_type": "passage"}}),
        "text_type",
    );
    refuse(
        json!({"model": "text-embedding-v4", "input": {"texts": [""]}}),
        "Range of input length",
    );
    let g = call(DS, &[("authorization", "Bearer nope")], json!({}));
    assert_eq!(g.status, 401);
    assert_eq!(g.body["code"], "InvalidApiKey");
}

// ---- through the server ----

#[test]
fn server_routes_records_and_applies_path_scenarios() {
    let addr = start();
    let body = json!({"model": "text-embedding-3-small", "input": "hi"});
    let key = "Authorization: Bearer sk-mock-openai\r\n";
    let (status, _, resp, _) = post(&addr, "/v1/embeddings", key, &body);
    assert_eq!(status, 200, "{resp}");
    let (status, _, _, _) = post(&addr, "/scenario/error-500/v1/embeddings", key, &body);
    assert_eq!(status, 500);

    // A Titan model id is the embeddings', a Claude one still InvokeModel's.
    let aws = "Authorization: AWS4-HMAC-SHA256 Credential=x\r\n";
    let (status, head, resp, _) = post(
        &addr,
        "/model/amazon.titan-embed-text-v2:0/invoke",
        aws,
        &json!({"inputText": "hi"}),
    );
    assert_eq!(status, 200, "{resp}");
    assert!(
        head.contains("x-amzn-bedrock-input-token-count: 1"),
        "{head}"
    );
    let (status, _, resp, _) = post(
        &addr,
        "/model/anthropic.claude-3-haiku-20240307-v1:0/invoke",
        aws,
        &json!({"inputText": "hi"}),
    );
    assert_eq!(status, 400);
    assert!(
        resp.contains("anthropic_version") || resp.contains("inputText"),
        "{resp}"
    );

    let list = std::net::TcpStream::connect(&addr).map(|mut s| {
        use std::io::{Read, Write};
        s.write_all(b"GET /_mock/requests HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    });
    let list = list.unwrap();
    assert!(list.contains("/scenario/error-500/v1/embeddings"), "{list}");
    assert!(list.contains("amazon.titan-embed-text-v2:0"), "{list}");
}
