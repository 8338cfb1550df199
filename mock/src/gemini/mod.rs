//! Google Gemini API (`POST /v1beta/models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse`, key in `x-goog-api-key`): strict request
//! validation (unknown fields are rejected, as the real API does), thought
//! signatures issued on function calls and required back, responses and
//! CRLF streams of `GenerateContentResponse` objects, Google error bodies,
//! and the safety verdicts (`promptFeedback.blockReason`, `SAFETY`).
//!
//! The dialect is here; its request checks (field names, generation and
//! thinking configuration, parts, tools, function-call turns) are in
//! `request`, and the parts of its answers and streams in `render`.

mod render;
mod request;

use serde_json::{json, Value};

use crate::answer::{reasoning_text, word_chunks, Answer};
use crate::dialect::{
    count_words, to_json, Dialect, Failure, Filtered, Meta, Prompt, Reply, SseEvent, Tool,
    ToolChoice,
};
use crate::http::{query_param, Request};
use crate::keys;
use crate::scenario::Filter;
use render::{call_parts, candidates, safety_ratings, server_invocations, usage_of};
use request::{
    check_candidate_count, check_generation_types, check_part, check_response_media,
    check_thinking, check_tool_combination, json_names, response_text, CALLING_CONFIG_FIELDS,
    CONTENT_FIELDS, DECLARATION_FIELDS, GENERATION_FIELDS, GOOGLE_SEARCH_FIELDS, REQUEST_FIELDS,
    TOOL_CONFIG_FIELDS, TOOL_FIELDS,
};
pub(crate) use request::{check_fields, invalid};

pub struct Gemini;

const PATH_PREFIX: &str = "/v1beta/models/";
const GENERATE: &str = ":generateContent";
const STREAM: &str = ":streamGenerateContent";
const COUNT: &str = ":countTokens";

pub(crate) const OAUTH_REFUSED: &str =
    "Request had invalid authentication credentials. Expected OAuth 2 \
    access token, login cookie or other valid authentication credential. See \
    https://developers.google.com/identity/sign-in/web/devconsole-project.";

/// The model a `/models/<model>:<method>` path names.
fn path_model(path: &str) -> Option<&str> {
    let rest = path.get(path.find(PATH_PREFIX)? + PATH_PREFIX.len()..)?;
    Some(rest.split_once(':')?.0)
}

impl Gemini {
    /// A generation's body for `model` (the path's), checked as Gemini
    /// checks it wherever it runs (Google AI, Vertex AI).
    pub(crate) fn parse_for(&self, model: &str, body: &Value) -> Result<Prompt, Failure> {
        let mut p = self.parse(body)?;
        p.model = model.to_owned();
        check_tool_combination(&p)?;
        let named = json_names(body);
        if let Some(thinking) = named.pointer("/generationConfig/thinkingConfig") {
            p.reasoning = check_thinking(thinking, &p.model)?;
        }
        let contents = named.get("contents").and_then(Value::as_array);
        for (i, c) in contents.into_iter().flatten().enumerate() {
            let parts = c.get("parts").and_then(Value::as_array);
            for (j, part) in parts.into_iter().flatten().enumerate() {
                check_response_media(part, model, &format!("contents[{i}].parts[{j}]"))?;
            }
        }
        Ok(p)
    }

    /// `POST /v1beta/models/{model}:countTokens` (CountTokensRequest):
    /// `contents`, or `generateContentRequest` (a generation's body with
    /// the `model` it names, `models/...`), never both; the prompt's words,
    /// as a generation's `promptTokenCount` says (`{}` for neither: proto3
    /// JSON leaves a zero out).
    fn count_tokens(&self, req: &Request, path: &str) -> Result<Value, Failure> {
        self.check_headers(req)?;
        let body: Value = serde_json::from_slice(&req.body)
            .map_err(|e| invalid(format!("Invalid JSON payload received. {e}")))?;
        let body = json_names(&body);
        check_fields(&body, &["contents", "generateContentRequest"], "")?;
        let model = path_model(path).unwrap_or_default();
        let tokens = match (body.get("contents"), body.get("generateContentRequest")) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "* CountTokensRequest: contents and generate_content_request are mutually \
                     exclusive: send one of them, not both.",
                ))
            }
            (Some(contents), None) => self
                .parse(&json!({ "contents": contents }))?
                .prompt_words
                .max(1),
            (None, Some(generate)) => {
                let Some(obj) = generate.as_object() else {
                    return Err(invalid(
                        "Invalid value at 'generate_content_request', expected an object",
                    ));
                };
                match obj.get("model").and_then(Value::as_str) {
                    None => {
                        return Err(invalid(
                            "* GenerateContentRequest.model: model is required when counting \
                             the tokens of a generate_content_request.",
                        ))
                    }
                    Some(name) if !name.starts_with("models/") => {
                        return Err(invalid(format!(
                            "* GenerateContentRequest.model: unexpected model name format \
                             '{name}' (expected models/{{model}})"
                        )))
                    }
                    Some(_) => {}
                }
                let mut generation = obj.clone();
                generation.remove("model");
                let generation = Value::Object(generation);
                let p = self.parse(&generation)?;
                if let Some(thinking) = generation.pointer("/generationConfig/thinkingConfig") {
                    check_thinking(thinking, model)?;
                }
                p.prompt_words.max(1)
            }
            (None, None) => 0,
        };
        if tokens == 0 {
            return Ok(json!({}));
        }
        Ok(json!({"totalTokens": tokens,
                  "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}]}))
    }
}

impl Dialect for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn handles(&self, path: &str) -> bool {
        path.contains(PATH_PREFIX) && (path.ends_with(GENERATE) || path.ends_with(STREAM))
    }

    fn has_call(&self, path: &str) -> bool {
        path.contains(PATH_PREFIX) && path.ends_with(COUNT)
    }

    fn call(&self, req: &Request, path: &str) -> Reply {
        if req.method() != "POST" {
            return self.error(&Failure::Status(404));
        }
        match self.count_tokens(req, path) {
            Ok(body) => Reply {
                status: 200,
                body: to_json(&body),
                retry_after: None,
            },
            Err(f) => self.error(&f),
        }
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        // Google reads `Authorization` as an OAuth 2 token and refuses one
        // that is not, whatever API key comes with it.
        if req.header("authorization").is_some() {
            return Err(Failure::Auth(OAUTH_REFUSED.into()));
        }
        let key = req
            .header("x-goog-api-key")
            .map(str::to_owned)
            .or_else(|| query_param(req.query(), "key"));
        let keys = key.clone();
        if key.is_none_or(|k| k.trim().is_empty()) {
            return Err(Failure::Auth(
                "Method doesn't allow unregistered callers (callers without established \
                 identity). Please use API Key or other form of API consumer identity to call \
                 this API."
                    .into(),
            ));
        }
        if !keys.is_some_and(|k| keys::matches("gemini", &k)) {
            // "API key not valid. Please pass a valid API key." (400)
            return Err(Failure::Status(401));
        }
        Ok(())
    }

    fn is_stream(&self, req: &Request, _body: &Value) -> bool {
        req.path().ends_with(STREAM)
    }

    fn crlf(&self) -> bool {
        true
    }

    fn parse_request(&self, req: &Request, body: &Value) -> Result<Prompt, Failure> {
        let p = self.parse_for(path_model(req.path()).unwrap_or_default(), body)?;
        if self.is_stream(req, body) && query_param(req.query(), "alt").as_deref() != Some("sse") {
            return Err(invalid(
                "the mock speaks only server-sent event streams: add ?alt=sse",
            ));
        }
        Ok(p)
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        let body = &json_names(body);
        check_fields(body, REQUEST_FIELDS, "")?;
        let contents = match body.get("contents") {
            Some(Value::Array(c)) if !c.is_empty() => c,
            _ => {
                return Err(invalid(
                    "* GenerateContentRequest.contents: contents is not specified",
                ))
            }
        };
        let mut p = Prompt::default();
        if let Some(system) = body.get("systemInstruction") {
            check_fields(system, CONTENT_FIELDS, "system_instruction")?;
            for (j, part) in system
                .get("parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                check_part(part, &format!("system_instruction.parts[{j}]"))?;
                p.prompt_words +=
                    count_words(part.get("text").and_then(Value::as_str).unwrap_or(""));
            }
        }
        for (i, c) in contents.iter().enumerate() {
            let at = format!("contents[{i}]");
            check_fields(c, CONTENT_FIELDS, &at)?;
            let role = c.get("role").and_then(Value::as_str).unwrap_or("user");
            if role != "user" && role != "model" {
                return Err(invalid(format!(
                    "Please use a valid role: user, model. ({at}.role is '{role}')"
                )));
            }
            // A conversation opens with the user ("Please ensure that
            // multiturn requests alternate between user and model", and the
            // first turn is the user's).
            if i == 0 && role == "model" {
                return Err(invalid(
                    "Please ensure that multiturn requests alternate between user and model. \
                     First content should be with role 'user', got model.",
                ));
            }
            let parts = match c.get("parts") {
                Some(Value::Array(parts)) if !parts.is_empty() => parts,
                _ => {
                    return Err(invalid(format!(
                        "* GenerateContentRequest.{at}.parts: contents.parts must not be empty."
                    )))
                }
            };
            let mut texts = Vec::new();
            for (j, part) in parts.iter().enumerate() {
                check_part(part, &format!("{at}.parts[{j}]"))?;
                if let Some(t) = part.get("text").and_then(Value::as_str) {
                    texts.push(t);
                }
                if part.get("functionCall").is_some() {
                    p.prior_tool_calls += 1;
                }
                if let Some(r) = part.get("functionResponse") {
                    p.prompt_words += count_words(&response_text(r.get("response")));
                }
            }
            let text = texts.join(" ");
            p.prompt_words += count_words(&text);
            if role == "user" && !text.is_empty() {
                p.last_user_text = text;
            }
        }
        self.check_tool_turns(contents)?;
        if let Some(last) = contents.last() {
            let results: Vec<String> = last
                .get("parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|part| part.get("functionResponse"))
                .map(|r| response_text(r.get("response")))
                .collect();
            if !results.is_empty() {
                p.tool_results = Some(results);
            }
        }
        if let Some(config) = body.get("generationConfig") {
            check_fields(config, GENERATION_FIELDS, "generation_config")?;
            check_generation_types(config)?;
            p.choices = check_candidate_count(config)?;
            if config.get("responseMimeType").and_then(Value::as_str) == Some("application/json") {
                p.json = Some(
                    config
                        .get("responseJsonSchema")
                        .or_else(|| config.get("responseSchema"))
                        .cloned(),
                );
            }
            p.max_tokens = config.get("maxOutputTokens").and_then(Value::as_u64);
            p.stop = config
                .get("stopSequences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
        }
        for (i, t) in body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            check_fields(t, TOOL_FIELDS, &format!("tools[{i}]"))?;
            if let Some(search) = t.get("googleSearch") {
                check_fields(
                    search,
                    GOOGLE_SEARCH_FIELDS,
                    &format!("tools[{i}].google_search"),
                )?;
                p.gemini_search = true;
            }
            p.gemini_builtin_tools |= ["googleSearch", "codeExecution", "urlContext"]
                .iter()
                .any(|k| t.get(*k).is_some());
            for (j, f) in t
                .get("functionDeclarations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                check_fields(
                    f,
                    DECLARATION_FIELDS,
                    &format!("tools[{i}].function_declarations[{j}]"),
                )?;
                let name = f.get("name").and_then(Value::as_str).unwrap_or("");
                let schema = f
                    .get("parametersJsonSchema")
                    .or_else(|| f.get("parameters"));
                p.tools.push(Tool {
                    name: name.to_owned(),
                    schema: schema.cloned().unwrap_or(Value::Null),
                });
            }
        }
        if let Some(config) = body.get("toolConfig") {
            check_fields(config, TOOL_CONFIG_FIELDS, "tool_config")?;
            match config.get("includeServerSideToolInvocations") {
                None => {}
                Some(Value::Bool(on)) => p.gemini_server_invocations = *on,
                Some(v) => {
                    return Err(invalid(format!(
                        "Invalid value at 'tool_config.include_server_side_tool_invocations' (TYPE_BOOL), {v}"
                    )))
                }
            }
            if let Some(calling) = config.get("functionCallingConfig") {
                check_fields(
                    calling,
                    CALLING_CONFIG_FIELDS,
                    "tool_config.function_calling_config",
                )?;
                let allowed = calling
                    .pointer("/allowedFunctionNames/0")
                    .and_then(Value::as_str);
                p.tool_choice = match (calling.get("mode").and_then(Value::as_str), allowed) {
                    (Some("NONE"), _) => ToolChoice::None,
                    (Some("ANY"), Some(name)) => ToolChoice::Named(name.to_owned()),
                    (Some("ANY"), None) => ToolChoice::Any,
                    _ => ToolChoice::Auto,
                };
            }
        }
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        let key_invalid = json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID", "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"}
        }]);
        // (HTTP status, message, Google status, details) as the real API sends them.
        let (status, message, name, details): (u16, String, &str, Value) = match failure {
            Failure::Auth(m) if m == OAUTH_REFUSED => {
                (401, m.clone(), "UNAUTHENTICATED", json!([]))
            }
            Failure::Auth(m) => (403, m.clone(), "PERMISSION_DENIED", json!([])),
            Failure::Invalid(m) | Failure::Param { message: m, .. } => {
                (400, m.clone(), "INVALID_ARGUMENT", json!([]))
            }
            Failure::ContextLength => (
                400,
                "The input token count (250000) exceeds the maximum number of tokens allowed \
                 (1048576)."
                    .into(),
                "INVALID_ARGUMENT",
                json!([]),
            ),
            Failure::Status(s) => match s {
                400 => (
                    400,
                    "Request contains an invalid argument.".into(),
                    "INVALID_ARGUMENT",
                    json!([]),
                ),
                // Google answers a bad key with 400, never 401.
                401 => (
                    400,
                    "API key not valid. Please pass a valid API key.".into(),
                    "INVALID_ARGUMENT",
                    key_invalid,
                ),
                403 => (
                    403,
                    "Your API key was reported as leaked. Please use another API key.".into(),
                    "PERMISSION_DENIED",
                    json!([]),
                ),
                404 => (
                    404,
                    "models/mock is not found for API version v1beta, or is not supported for \
                     generateContent."
                        .into(),
                    "NOT_FOUND",
                    json!([]),
                ),
                413 => (
                    400,
                    "Request payload size exceeds the limit: 20971520 bytes.".into(),
                    "INVALID_ARGUMENT",
                    json!([]),
                ),
                429 => (
                    429,
                    "You exceeded your current quota, please check your plan and billing details."
                        .into(),
                    "RESOURCE_EXHAUSTED",
                    // As Gemini details a quota it ran out of: which one
                    // (clients tell a per-day from a per-minute quota by
                    // it), where to read about it, when to retry.
                    json!([
                        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                            "quotaDimensions": {"location": "global", "model": "mock-gemini-flash"},
                            "quotaValue": "15"}]},
                        {"@type": "type.googleapis.com/google.rpc.Help", "links": [{
                            "description": "Learn more about Gemini API quotas",
                            "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"},
                    ]),
                ),
                500 => (
                    500,
                    "An internal error has occurred. Please retry or report in \
                     https://developers.generativeai.google/guide/troubleshooting"
                        .into(),
                    "INTERNAL",
                    json!([]),
                ),
                // Gemini has no 529: overload is a 503.
                _ => (
                    503,
                    "The model is overloaded. Please try again later.".into(),
                    "UNAVAILABLE",
                    json!([]),
                ),
            },
        };
        let mut error = json!({"code": status, "message": message, "status": name});
        if details.as_array().is_some_and(|d| !d.is_empty()) {
            error["details"] = details;
        }
        Reply {
            status,
            body: to_json(&json!({ "error": error })),
            retry_after: None,
        }
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        let mut parts = Vec::new();
        if p.reasoning {
            parts.push(json!({"text": reasoning_text(p), "thought": true}));
        }
        parts.extend(server_invocations(p));
        if !a.text.is_empty() {
            parts.push(json!({"text": a.text}));
        }
        parts.extend(call_parts(a));
        self.envelope(
            p,
            meta,
            candidates(p, &parts, Some(&a.finish)),
            usage_of(p, a),
        )
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        let prompt_usage =
            json!({"promptTokenCount": a.prompt_tokens, "totalTokenCount": a.prompt_tokens});
        // Thought summaries first, then the answer's text.
        let thoughts = if p.reasoning {
            word_chunks(&reasoning_text(p))
        } else {
            Vec::new()
        };
        let pieces = thoughts
            .iter()
            .map(|t| json!({"text": t, "thought": true}))
            .chain(server_invocations(p))
            .chain(a.chunks.iter().map(|c| json!({"text": c})));
        let mut events: Vec<SseEvent> = pieces
            .map(|part| {
                let data =
                    self.envelope(p, meta, candidates(p, &[part], None), prompt_usage.clone());
                self.event(&data, true)
            })
            .collect();
        // Function calls arrive whole, with the finish reason and the usage.
        let last = self.envelope(
            p,
            meta,
            candidates(p, &call_parts(a), Some(&a.finish)),
            usage_of(p, a),
        );
        events.push(self.event(&last, !a.tool_calls.is_empty()));
        events
    }

    fn stream_error(&self) -> SseEvent {
        SseEvent {
            name: None,
            data: r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#.into(),
            delta: false,
        }
    }

    /// A blocked prompt is a 200 verdict (`promptFeedback`), the only event
    /// of a stream; the output filter is the usual answer's `SAFETY` finish.
    fn filtered(&self, filter: Filter, p: &Prompt, meta: Meta) -> Option<Filtered> {
        if filter != Filter::BlockedPrompt {
            return None;
        }
        let verdict = json!({
            "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": safety_ratings(true)},
            "usageMetadata": {"promptTokenCount": p.prompt_words.max(1), "totalTokenCount": p.prompt_words.max(1)},
            "modelVersion": p.model,
            "responseId": format!("mockGemini{}", meta.seq),
        });
        Some(if p.stream {
            Filtered::Stream(vec![self.event(&verdict, false)])
        } else {
            Filtered::Reply(Reply {
                status: 200,
                body: to_json(&verdict),
                retry_after: None,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::request::{call_signature, UNSIGNED};
    use super::*;

    fn count(body: &str) -> Reply {
        let raw = format!(
            "POST /v1beta/models/gemini-2.5-flash:countTokens HTTP/1.1\r\n\
             x-goog-api-key: mock-gemini-key\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let req = crate::http::parse(&raw);
        Gemini.call(&req, req.path())
    }

    #[test]
    fn count_tokens_takes_contents_or_a_generation_never_both() {
        let contents = r#"[{"role":"user","parts":[{"text":"four words right here"}]}]"#;
        let by_contents = count(&format!(r#"{{"contents":{contents}}}"#));
        assert_eq!(by_contents.status, 200, "{}", by_contents.body);
        assert!(by_contents.body.contains(r#""totalTokens":4"#));
        let generation = format!(
            r#"{{"generateContentRequest":{{"model":"models/gemini-2.5-flash","contents":{contents},
                "systemInstruction":{{"parts":[{{"text":"be brief"}}]}}}}}}"#
        );
        let by_generation = count(&generation);
        assert!(
            by_generation.body.contains(r#""totalTokens":6"#),
            "{}",
            by_generation.body
        );
        let both = count(&format!(
            r#"{{"contents":{contents},"generateContentRequest":{{"model":"models/m","contents":{contents}}}}}"#
        ));
        assert_eq!(both.status, 400);
        assert!(both.body.contains("mutually exclusive"));
        let no_model = count(&format!(
            r#"{{"generateContentRequest":{{"contents":{contents}}}}}"#
        ));
        assert_eq!(no_model.status, 400);
        let bad_model = count(&format!(
            r#"{{"generateContentRequest":{{"model":"gemini","contents":{contents}}}}}"#
        ));
        assert_eq!(bad_model.status, 400);
        assert_eq!(count(r#"{"contents":[],"extra":1}"#).status, 400);
        assert_eq!(count("{}").body, "{}");
    }

    #[test]
    fn fields_are_taken_by_json_or_proto_name_and_data_keeps_its_keys() {
        let body = json!({"contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "generation_config": {"thinking_config": {"include_thoughts": true}},
            "tools": [{"function_declarations": [{"name": "f",
                "parameters_json_schema": {"type": "object", "properties": {"snake_case": {}}}}]}]});
        let named = json_names(&body);
        assert_eq!(
            named["generationConfig"]["thinkingConfig"]["includeThoughts"],
            true
        );
        let declaration = &named["tools"][0]["functionDeclarations"][0];
        assert!(declaration["parametersJsonSchema"]["properties"]["snake_case"].is_object());
        assert!(Gemini.parse(&body).is_ok());
        // An unknown name is still refused, by either name.
        let unknown = json!({"contents": [{"parts": [{"text": "x"}]}], "no_such_field": 1});
        assert!(Gemini.parse(&unknown).is_err());
    }

    #[test]
    fn thinking_config_rules_by_model() {
        let ok = |config: Value, model: &str| check_thinking(&config, model);
        assert_eq!(
            ok(
                json!({"includeThoughts": true, "thinkingBudget": 1024}),
                "gemini-2.5-flash"
            ),
            Ok(true)
        );
        assert_eq!(
            ok(
                json!({"includeThoughts": true, "thinkingBudget": 0}),
                "gemini-2.5-flash"
            ),
            Ok(false)
        );
        assert_eq!(
            ok(json!({"thinkingBudget": -1}), "gemini-2.5-pro"),
            Ok(false)
        );
        assert_eq!(
            ok(
                json!({"includeThoughts": true, "thinkingLevel": "low"}),
                "gemini-3-pro-preview"
            ),
            Ok(true)
        );
        for (config, model) in [
            (json!({"thinkingBudget": 0}), "gemini-2.5-pro"),
            (json!({"thinkingBudget": 100}), "gemini-2.5-flash-lite"),
            (json!({"thinkingBudget": 30000}), "gemini-2.5-flash"),
            (json!({"thinkingLevel": "low"}), "gemini-2.5-flash"),
            (json!({"thinkingLevel": "medium"}), "gemini-3-pro-preview"),
            (
                json!({"thinkingLevel": "low", "thinkingBudget": 10}),
                "gemini-3-flash",
            ),
            (json!({"thinkingBudget": "many"}), "gemini-2.5-flash"),
            (json!({"budget": 1}), "gemini-2.5-flash"),
        ] {
            assert!(ok(config.clone(), model).is_err(), "{config} {model}");
        }
    }

    #[test]
    fn call_signatures_are_checked() {
        let args = json!({"city": "Paris"});
        let turn = |signature: &str| {
            [
                json!({"role": "user", "parts": [{"text": "q"}]}),
                json!({"role": "model", "parts": [{"functionCall": {"name": "f", "args": args},
                                                 "thoughtSignature": signature}]}),
            ]
        };
        assert_eq!(
            Gemini.check_tool_turns(&turn(&call_signature("f", &args))),
            Ok(())
        );
        assert_eq!(Gemini.check_tool_turns(&turn(UNSIGNED)), Ok(()));
        assert_eq!(
            Gemini.check_tool_turns(&turn(&call_signature("f", &json!({"city": "Rome"})))),
            Err(invalid("Corrupted thought signature."))
        );
    }
}
