//! Vertex AI (cloud.google.com/vertex-ai/generative-ai/docs/reference/rest):
//! Gemini and Claude below `/v1/projects/{project}/locations/{location}/publishers/...`,
//! each with Vertex's rules, then the model's own (the Gemini and Anthropic
//! mocks'):
//! - auth: `authorization: Bearer <token>`, a token the mock knows and
//!   that has not expired (`google_auth.rs`); otherwise Google's 401
//!   `UNAUTHENTICATED` (an API key header does not do);
//! - Gemini (`publishers/google/models/{m}:generateContent`,
//!   `:streamGenerateContent?alt=sse`, `:countTokens`): Gemini's body, every
//!   content with its `role` (Vertex: "Please use a valid role: user,
//!   model."), and a count's body is `CountTokensRequest`'s (`contents`,
//!   `systemInstruction`, `tools`, `generationConfig`, `model`,
//!   `instances`: no `generateContentRequest`);
//! - Gemini's embeddings (`publishers/google/models/{m}:predict`, the Text
//!   embeddings API, `predict.rs` rules below: [`VertexGemini::predict`]);
//! - Claude (`publishers/anthropic/models/{m}:rawPredict`,
//!   `:streamRawPredict`; `publishers/anthropic/models/count-tokens:rawPredict`):
//!   Anthropic's Messages body with `anthropic_version: "vertex-2023-10-16"`
//!   and without `model` (the path says it; 400 otherwise), `stream: true`
//!   exactly on `streamRawPredict`; a count's body has `model` and may
//!   have `anthropic_version`. Claude's own refusals are Anthropic's
//!   bodies; Vertex's (auth, quota, an unknown model) are Google's.

use serde_json::{json, Value};

use crate::answer::Answer;
use crate::anthropic::Anthropic;
use crate::dialect::{to_json, Dialect, Failure, Filtered, Meta, Prompt, Reply, SseEvent};
use crate::gemini::{check_fields, invalid, Gemini};
use crate::google_auth;
use crate::http::{query_param, Request};
use crate::scenario::Filter;

pub const ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// `(project, location, publisher, model, method)` of a Vertex model path.
fn parts(path: &str) -> Option<(&str, &str, &str, &str, &str)> {
    let rest = path.strip_prefix("/v1/projects/")?;
    let (project, rest) = rest.split_once("/locations/")?;
    let (location, rest) = rest.split_once("/publishers/")?;
    let (publisher, rest) = rest.split_once("/models/")?;
    let (model, method) = rest.split_once(':')?;
    let plain = |s: &str| !s.is_empty() && !s.contains('/');
    (plain(project) && plain(location) && plain(model))
        .then_some((project, location, publisher, model, method))
}

/// Google's error body.
fn google(status: u16, name: &str, message: &str) -> Reply {
    Reply {
        status,
        body: to_json(&json!({"error": {"code": status, "message": message, "status": name}})),
        retry_after: None,
    }
}

/// Vertex's own refusals, whichever publisher: `None` for the model's.
fn vertex_error(failure: &Failure, model: &str) -> Option<Reply> {
    match failure {
        Failure::Auth(m) => Some(google(401, "UNAUTHENTICATED", m)),
        Failure::Status(401) => Some(google(401, "UNAUTHENTICATED", google_auth::UNAUTHENTICATED)),
        Failure::Status(403) => Some(google(
            403,
            "PERMISSION_DENIED",
            "Permission 'aiplatform.endpoints.predict' denied on resource (or it may not exist).",
        )),
        Failure::Status(404) => Some(google(
            404,
            "NOT_FOUND",
            &format!(
                "Publisher Model `{model}` was not found or your project does not have access to it."
            ),
        )),
        Failure::Status(429) => Some(Reply {
            retry_after: Some("7"),
            ..google(
                429,
                "RESOURCE_EXHAUSTED",
                "Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute_per_project_per_base_model. Please submit a quota increase request.",
            )
        }),
        _ => None,
    }
}

fn check_bearer(req: &Request) -> Result<(), Failure> {
    google_auth::check(req).map_err(Failure::Auth)
}

/// Gemini on Vertex AI.
pub struct VertexGemini;

/// Vertex's `GenerateContentRequest` at the top, as the Gemini API's
/// rules then read it: `labels` is Vertex's (the Gemini API refuses it),
/// `store` (Google AI's logging choice) is the Gemini API's only.
fn vertex_request(body: &Value) -> Result<std::borrow::Cow<'_, Value>, Failure> {
    if body.get("store").is_some() {
        return Err(invalid(
            "Invalid JSON payload received. Unknown name \"store\": Cannot find field.",
        ));
    }
    if body.get("labels").is_none() {
        return Ok(std::borrow::Cow::Borrowed(body));
    }
    let mut body = body.clone();
    if let Some(obj) = body.as_object_mut() {
        obj.remove("labels");
    }
    Ok(std::borrow::Cow::Owned(body))
}

const COUNT_FIELDS: &[&str] = &[
    "model",
    "instances",
    "contents",
    "systemInstruction",
    "tools",
    "generationConfig",
];

/// The Text embeddings API's models (cloud.google.com/vertex-ai/generative-ai/
/// docs/embeddings/get-text-embeddings): name, output dimensions (the most
/// `outputDimensionality` may ask), instances a request takes.
fn embedding_model(name: &str) -> Option<(usize, usize)> {
    match name {
        // "Note that gemini-embedding-001 supports one instance per request."
        "gemini-embedding-001" => Some((3072, 1)),
        // "Each request is limited to 250 input texts."
        "text-embedding-005" | "text-embedding-004" | "text-multilingual-embedding-002" => {
            Some((768, 250))
        }
        _ => None,
    }
}

/// `TextEmbeddingInstance`'s task types.
const TASK_TYPES: [&str; 8] = [
    "RETRIEVAL_QUERY",
    "RETRIEVAL_DOCUMENT",
    "SEMANTIC_SIMILARITY",
    "CLASSIFICATION",
    "CLUSTERING",
    "QUESTION_ANSWERING",
    "FACT_VERIFICATION",
    "CODE_RETRIEVAL_QUERY",
];

impl VertexGemini {
    /// `:predict` of a text embedding model (Text embeddings API):
    /// `{"instances": [{"content", "task_type"?, "title"?}], "parameters":
    /// {"autoTruncate"?, "outputDimensionality"?}}`, nothing else; at most
    /// the model's instances (250, or 1 for gemini-embedding-001); each
    /// `content` a string of at most 2048 words (its tokens here) unless
    /// `autoTruncate` is true (the default); `title` only with
    /// RETRIEVAL_DOCUMENT; `outputDimensionality` 1 to the model's size.
    /// Answered `predictions[].embeddings.{values, statistics.{truncated,
    /// token_count}}` and `metadata.billableCharacterCount`.
    fn predict(&self, req: &Request, model: &str) -> Result<Value, Failure> {
        check_bearer(req)?;
        let Some((dims, max_instances)) = embedding_model(model) else {
            return Err(Failure::Status(404));
        };
        let body: Value = serde_json::from_slice(&req.body)
            .map_err(|e| invalid(format!("Invalid JSON payload received. {e}")))?;
        check_fields(&body, &["instances", "parameters"], "")?;
        let parameters = body.get("parameters").cloned().unwrap_or(json!({}));
        check_fields(
            &parameters,
            &["autoTruncate", "outputDimensionality"],
            "parameters.",
        )?;
        let truncate = match parameters.get("autoTruncate") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(invalid("parameters.autoTruncate: a boolean")),
        };
        let size = match parameters.get("outputDimensionality") {
            None => dims,
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 && n as usize <= dims => n as usize,
                _ => {
                    return Err(invalid(format!(
                    "Value of outputDimensionality must be in the range [1, {dims}] for {model}."
                )))
                }
            },
        };
        let instances = body
            .get("instances")
            .and_then(Value::as_array)
            .filter(|i| !i.is_empty())
            .ok_or_else(|| invalid("instances: at least one instance is required"))?;
        if instances.len() > max_instances {
            return Err(invalid(format!(
                "Unable to submit request because {model} supports at most {max_instances} instance{} per request; {} were sent.",
                if max_instances == 1 { "" } else { "s" },
                instances.len()
            )));
        }
        let mut predictions = Vec::new();
        let mut characters = 0;
        for (i, instance) in instances.iter().enumerate() {
            let at = format!("instances[{i}].");
            check_fields(instance, &["content", "task_type", "title"], &at)?;
            let content = instance
                .get("content")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(format!("{at}content: a string is required")))?;
            let task = instance.get("task_type");
            if let Some(t) = task {
                if !t.as_str().is_some_and(|t| TASK_TYPES.contains(&t)) {
                    return Err(invalid(format!("{at}task_type: unknown task type {t}")));
                }
            }
            if instance.get("title").is_some() && task != Some(&json!("RETRIEVAL_DOCUMENT")) {
                return Err(invalid(format!(
                    "{at}title: only with task_type RETRIEVAL_DOCUMENT"
                )));
            }
            let tokens = crate::embeddings::tokens(content);
            if tokens > 2048 && !truncate {
                return Err(invalid(format!(
                    "{at}content: longer than the model's 2048 tokens and autoTruncate is false"
                )));
            }
            characters += content.chars().count();
            let values = crate::embeddings::vector(content, dims);
            predictions.push(json!({"embeddings": {
                "statistics": {"truncated": tokens > 2048, "token_count": tokens.min(2048)},
                "values": crate::embeddings::floats(values.get(..size).unwrap_or(&values)),
            }}));
        }
        Ok(json!({"predictions": predictions, "metadata": {"billableCharacterCount": characters}}))
    }

    fn count_tokens(&self, req: &Request, model: &str) -> Result<Value, Failure> {
        check_bearer(req)?;
        let body: Value = serde_json::from_slice(&req.body)
            .map_err(|e| invalid(format!("Invalid JSON payload received. {e}")))?;
        check_fields(&body, COUNT_FIELDS, "")?;
        check_roles(&body)?;
        let mut generation = body.clone();
        if let Some(obj) = generation.as_object_mut() {
            obj.remove("model");
            obj.remove("instances");
        }
        let tokens = Gemini.parse_for(model, &generation)?.prompt_words.max(1);
        Ok(
            json!({"totalTokens": tokens, "totalBillableCharacters": tokens * 5,
                  "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}]}),
        )
    }
}

/// Vertex requires every content's role.
fn check_roles(body: &Value) -> Result<(), Failure> {
    let contents = body.get("contents").and_then(Value::as_array);
    for c in contents.into_iter().flatten() {
        match c.get("role").and_then(Value::as_str) {
            Some("user" | "model") => {}
            _ => return Err(invalid("Please use a valid role: user, model.")),
        }
    }
    Ok(())
}

impl Dialect for VertexGemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn handles(&self, path: &str) -> bool {
        matches!(
            parts(path),
            Some((
                _,
                _,
                "google",
                _,
                "generateContent" | "streamGenerateContent"
            ))
        )
    }

    fn has_call(&self, path: &str) -> bool {
        matches!(
            parts(path),
            Some((_, _, "google", _, "countTokens" | "predict"))
        )
    }

    fn call(&self, req: &Request, path: &str) -> Reply {
        let (model, method) = parts(path).map_or(("", ""), |p| (p.3, p.4));
        if req.method() != "POST" {
            return self.error(&Failure::Status(404));
        }
        let answer = if method == "predict" {
            self.predict(req, model)
        } else {
            self.count_tokens(req, model)
        };
        match answer {
            Ok(body) => Reply {
                status: 200,
                body: to_json(&body),
                retry_after: None,
            },
            Err(f) => self.error(&f),
        }
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        check_bearer(req)
    }

    fn is_stream(&self, req: &Request, _body: &Value) -> bool {
        parts(req.path()).is_some_and(|p| p.4 == "streamGenerateContent")
    }

    fn crlf(&self) -> bool {
        Gemini.crlf()
    }

    fn parse_request(&self, req: &Request, body: &Value) -> Result<Prompt, Failure> {
        check_roles(body)?;
        let model = parts(req.path()).map_or("", |p| p.3);
        let p = Gemini.parse_for(model, &*vertex_request(body)?)?;
        if self.is_stream(req, body) && query_param(req.query(), "alt").as_deref() != Some("sse") {
            return Err(invalid(
                "the mock speaks only server-sent event streams: add ?alt=sse",
            ));
        }
        Ok(p)
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        Gemini.parse(&*vertex_request(body)?)
    }

    fn error(&self, failure: &Failure) -> Reply {
        vertex_error(failure, "publishers/google/models/mock")
            .unwrap_or_else(|| Gemini.error(failure))
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        Gemini.response(p, a, meta)
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        Gemini.stream(p, a, meta)
    }

    fn stream_error(&self) -> SseEvent {
        Gemini.stream_error()
    }

    fn filtered(&self, filter: Filter, p: &Prompt, meta: Meta) -> Option<Filtered> {
        Gemini.filtered(filter, p, meta)
    }
}

/// Claude on Vertex AI.
pub struct VertexAnthropic;

/// The body's version, checked: required on a generation, optional on a count.
fn check_version(body: &Value, required: bool) -> Result<(), Failure> {
    match body.get("anthropic_version") {
        None if !required => Ok(()),
        None => Err(invalid_claude("anthropic_version: Field required")),
        Some(Value::String(v)) if v == ANTHROPIC_VERSION => Ok(()),
        Some(v) => Err(invalid_claude(format!(
            "anthropic_version: Input should be '{ANTHROPIC_VERSION}', got {v}"
        ))),
    }
}

fn invalid_claude(message: impl Into<String>) -> Failure {
    Failure::Invalid(message.into())
}

impl Dialect for VertexAnthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn handles(&self, path: &str) -> bool {
        matches!(parts(path), Some((_, _, "anthropic", m, "rawPredict" | "streamRawPredict")) if m != "count-tokens")
    }

    fn has_call(&self, path: &str) -> bool {
        matches!(
            parts(path),
            Some((_, _, "anthropic", "count-tokens", "rawPredict"))
        )
    }

    fn call(&self, req: &Request, _path: &str) -> Reply {
        if req.method() != "POST" {
            return self.error(&Failure::Status(404));
        }
        let counted = check_bearer(req).and_then(|()| {
            let body: Value = serde_json::from_slice(&req.body).map_err(|e| {
                invalid_claude(format!(
                    "We could not parse the JSON body of your request: {e}"
                ))
            })?;
            check_version(&body, false)?;
            let mut body = body;
            if let Some(obj) = body.as_object_mut() {
                obj.remove("anthropic_version");
            }
            Anthropic.count_body(&body)
        });
        match counted {
            Ok(tokens) => Reply {
                status: 200,
                body: to_json(&json!({"input_tokens": tokens})),
                retry_after: None,
            },
            Err(f) => self.error(&f),
        }
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        check_bearer(req)
    }

    fn parse(&self, _body: &Value) -> Result<Prompt, Failure> {
        Err(invalid_claude("the model is in the path"))
    }

    fn parse_request(&self, req: &Request, body: &Value) -> Result<Prompt, Failure> {
        let Some((_, _, _, model, method)) = parts(req.path()) else {
            return Err(Failure::Status(404));
        };
        let obj = body
            .as_object()
            .ok_or_else(|| invalid_claude("Input should be a valid dictionary"))?;
        if obj.contains_key("model") {
            return Err(invalid_claude(
                "model: Extra inputs are not permitted (the model is in the URL on Vertex AI)",
            ));
        }
        check_version(body, true)?;
        let streamed = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
        if streamed != (method == "streamRawPredict") {
            return Err(invalid_claude(
                "stream: streamRawPredict takes stream: true, rawPredict does not",
            ));
        }
        let mut messages = obj.clone();
        messages.remove("anthropic_version");
        messages.insert("model".into(), Value::String(model.to_owned()));
        let mut p = Anthropic.parse(&Value::Object(messages))?;
        p.model = model.to_owned();
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        vertex_error(failure, "publishers/anthropic/models/mock")
            .unwrap_or_else(|| Anthropic.error(failure))
    }

    fn tool_preface(&self) -> Option<&'static str> {
        Anthropic.tool_preface()
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        Anthropic.response(p, a, meta)
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        Anthropic.stream(p, a, meta)
    }

    fn stream_error(&self) -> SseEvent {
        Anthropic.stream_error()
    }

    fn filtered(&self, filter: Filter, p: &Prompt, meta: Meta) -> Option<Filtered> {
        Anthropic.filtered(filter, p, meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(path: &str, auth: &str, body: &str) -> Request {
        crate::http::parse(&format!(
            "POST {path} HTTP/1.1\r\n{auth}content-length: {}\r\n\r\n{body}",
            body.len()
        ))
    }

    const BEARER: &str = "authorization: Bearer ya29.mock-vertex-token\r\n";
    const CLAUDE: &str = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict";
    const GEMINI: &str =
        "/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-flash:generateContent";

    fn parse(d: &dyn Dialect, req: &Request) -> Result<Prompt, Failure> {
        d.check_headers(req)?;
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        d.parse_request(req, &body)
    }

    #[test]
    fn predict_embeds_with_vertexs_rules() {
        google_auth::configure(None);
        let path = "/v1/projects/p/locations/us-central1/publishers/google/models/text-embedding-005:predict";
        assert!(VertexGemini.has_call(path));
        let call = |path: &str, body: &str| {
            let reply = VertexGemini.call(&post(path, BEARER, body), path);
            (
                reply.status,
                serde_json::from_str::<Value>(&reply.body).unwrap(),
            )
        };
        let (status, body) = call(
            path,
            r#"{"instances":[{"content":"one two","task_type":"RETRIEVAL_QUERY"},{"content":"three"}],"parameters":{"outputDimensionality":8,"autoTruncate":false}}"#,
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["predictions"][0]["embeddings"]["values"]
                .as_array()
                .unwrap()
                .len(),
            8
        );
        assert_eq!(
            body["predictions"][0]["embeddings"]["statistics"]["token_count"],
            2
        );
        assert_eq!(body["metadata"]["billableCharacterCount"], 12);
        // Unknown fields, sizes, task types, batch limits, unknown models.
        for (body, want) in [
            (r#"{"instances":[{"content":"a"}],"extra":1}"#, "extra"),
            (
                r#"{"instances":[{"content":"a","taskType":"CLUSTERING"}]}"#,
                "taskType",
            ),
            (
                r#"{"instances":[{"content":"a"}],"parameters":{"dimensions":8}}"#,
                "dimensions",
            ),
            (
                r#"{"instances":[{"content":"a"}],"parameters":{"outputDimensionality":769}}"#,
                "[1, 768]",
            ),
            (
                r#"{"instances":[{"content":"a","task_type":"SEARCH"}]}"#,
                "task type",
            ),
            (
                r#"{"instances":[{"content":"a","title":"t"}]}"#,
                "RETRIEVAL_DOCUMENT",
            ),
            (r#"{"instances":[]}"#, "at least one"),
        ] {
            let (status, answer) = call(path, body);
            assert_eq!(status, 400, "{body}");
            assert!(answer.to_string().contains(want), "{body}: {answer}");
        }
        let many = format!(
            r#"{{"instances":[{}]}}"#,
            vec![r#"{"content":"a"}"#; 251].join(",")
        );
        assert_eq!(call(path, &many).0, 400);
        let gemini = path.replace("text-embedding-005", "gemini-embedding-001");
        let (status, answer) = call(
            &gemini,
            r#"{"instances":[{"content":"a"},{"content":"b"}]}"#,
        );
        assert_eq!(status, 400);
        assert!(
            answer.to_string().contains("at most 1 instance"),
            "{answer}"
        );
        assert_eq!(call(&gemini, r#"{"instances":[{"content":"a"}]}"#).0, 200);
        let unknown = path.replace("text-embedding-005", "gemini-2.5-flash");
        assert_eq!(call(&unknown, r#"{"instances":[{"content":"a"}]}"#).0, 404);
        let reply = VertexGemini.call(&post(path, "", r#"{"instances":[{"content":"a"}]}"#), path);
        assert_eq!(reply.status, 401);
    }

    #[test]
    fn routes_by_publisher_and_method() {
        assert!(VertexAnthropic.handles(CLAUDE));
        assert!(!VertexAnthropic.handles(GEMINI));
        assert!(VertexGemini.handles(GEMINI));
        assert!(VertexGemini.handles(&GEMINI.replace("generateContent", "streamGenerateContent")));
        assert!(VertexGemini.has_call(&GEMINI.replace("generateContent", "countTokens")));
        let count =
            "/v1/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict";
        assert!(VertexAnthropic.has_call(count) && !VertexAnthropic.handles(count));
        assert!(!VertexGemini.handles("/v1beta/models/gemini-2.5-flash:generateContent"));
    }

    #[test]
    fn claude_rules() {
        google_auth::configure(None);
        let ok = r#"{"anthropic_version":"vertex-2023-10-16","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#;
        let p = parse(&VertexAnthropic, &post(CLAUDE, BEARER, ok)).unwrap();
        assert_eq!(p.model, "claude-sonnet-4-5@20250929");
        // No token, a wrong one, an API key: 401 in Google's shape.
        for auth in [
            "",
            "authorization: Bearer ya29.other\r\n",
            "x-api-key: sk-mock-anthropic\r\n",
        ] {
            let f = parse(&VertexAnthropic, &post(CLAUDE, auth, ok)).unwrap_err();
            let reply = VertexAnthropic.error(&f);
            assert_eq!(reply.status, 401, "{auth}");
            assert!(reply.body.contains("UNAUTHENTICATED"));
        }
        // `model` in the body: 400.
        let with_model = ok.replacen('{', r#"{"model":"c","#, 1);
        let f = parse(&VertexAnthropic, &post(CLAUDE, BEARER, &with_model)).unwrap_err();
        assert_eq!(VertexAnthropic.error(&f).status, 400);
        for version in [
            r#""anthropic_version":"vertex-2023-10-16","#,
            r#""anthropic_version":"2023-06-01","#,
        ] {
            let body = if version.contains("vertex") {
                ok.replace(version, "")
            } else {
                ok.replace(r#""anthropic_version":"vertex-2023-10-16","#, version)
            };
            let f = parse(&VertexAnthropic, &post(CLAUDE, BEARER, &body)).unwrap_err();
            assert_eq!(VertexAnthropic.error(&f).status, 400, "{body}");
        }
        // The stream flag matches the method.
        let streamed = ok.replacen('{', r#"{"stream":true,"#, 1);
        assert!(parse(&VertexAnthropic, &post(CLAUDE, BEARER, &streamed)).is_err());
        let stream_path = CLAUDE.replace(":rawPredict", ":streamRawPredict");
        assert!(parse(&VertexAnthropic, &post(&stream_path, BEARER, &streamed)).is_ok());
        // A count: model in the body.
        let count =
            "/v1/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict";
        let r = VertexAnthropic.call(
            &post(count, BEARER, r#"{"anthropic_version":"vertex-2023-10-16","model":"claude-x","messages":[{"role":"user","content":"a b c"}]}"#),
            count,
        );
        assert_eq!((r.status, r.body.as_str()), (200, r#"{"input_tokens":3}"#));
        let r = VertexAnthropic.call(
            &post(
                count,
                BEARER,
                r#"{"messages":[{"role":"user","content":"a"}]}"#,
            ),
            count,
        );
        assert_eq!(r.status, 400);
    }

    #[test]
    fn gemini_rules() {
        google_auth::configure(None);
        let ok = r#"{"contents":[{"role":"user","parts":[{"text":"hi there"}]}]}"#;
        let p = parse(&VertexGemini, &post(GEMINI, BEARER, ok)).unwrap();
        assert_eq!(p.model, "gemini-2.5-flash");
        let f = parse(
            &VertexGemini,
            &post(GEMINI, "x-goog-api-key: mock-gemini-key\r\n", ok),
        )
        .unwrap_err();
        assert_eq!(VertexGemini.error(&f).status, 401);
        let f = parse(
            &VertexGemini,
            &post(GEMINI, BEARER, r#"{"contents":[{"parts":[{"text":"x"}]}]}"#),
        )
        .unwrap_err();
        assert_eq!(VertexGemini.error(&f).status, 400);
        let count = GEMINI.replace("generateContent", "countTokens");
        let r = VertexGemini.call(&post(&count, BEARER, ok), &count);
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body.contains(r#""totalTokens":2"#));
        let wrapped = format!(r#"{{"generateContentRequest":{ok}}}"#);
        let r = VertexGemini.call(&post(&count, BEARER, &wrapped), &count);
        assert_eq!(r.status, 400, "{}", r.body);
    }
}
