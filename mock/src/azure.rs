//! Azure OpenAI (`POST /openai/deployments/{deployment}/chat/completions?api-version=...`,
//! key in `api-key`): OpenAI's bodies (the OpenAI mock renders them) with
//! Azure's content-filter annotations added, its prompt annotation chunk
//! with empty `choices` first in every stream, and Azure's error bodies,
//! including the prompt filter's 400.

use serde_json::{json, Value};

use crate::answer::{Answer, Finish};
use crate::dialect::{to_json, Dialect, Failure, Filtered, Meta, Prompt, Reply, SseEvent};
use crate::http::{query_param, Request};
use crate::keys;
use crate::openai::OpenAi;
use crate::scenario::Filter;

pub struct Azure;

const DEPLOYMENTS: &str = "/openai/deployments/";
/// The model behind every chat deployment of the mock: Azure's answers
/// name it (with its version), not the deployment.
pub(crate) const DEPLOYED_MODEL: &str = "gpt-4o-2024-08-06";
/// The v1 API (learn.microsoft.com/azure/ai-foundry/openai/api-version-lifecycle,
/// "API evolution"): no api-version, the deployment is the body's `model`.
const V1_PATH: &str = "/openai/v1/chat/completions";

/// Every category's verdict; `filtered` marks the one that struck.
fn filter_results(filtered: bool) -> Value {
    let verdict = |cut: bool| {
        if cut {
            json!({"filtered": true, "severity": "high"})
        } else {
            json!({"filtered": false, "severity": "safe"})
        }
    };
    json!({
        "hate": verdict(false),
        "self_harm": verdict(false),
        "sexual": verdict(false),
        "violence": verdict(filtered),
    })
}

fn prompt_filter_results() -> Value {
    json!([{"prompt_index": 0, "content_filter_results": filter_results(false)}])
}

/// Adds `content_filter_results` to every choice of an OpenAI body.
fn annotate_choices(body: &mut Value, filtered: bool) {
    if let Some(choices) = body.get_mut("choices").and_then(Value::as_array_mut) {
        for choice in choices {
            choice["content_filter_results"] = filter_results(filtered);
        }
    }
}

pub(crate) fn azure_error(status: u16, code: &str, message: &str) -> Reply {
    Reply {
        status,
        body: to_json(&json!({"error": {"code": code, "message": message}})),
        retry_after: (status == 429).then_some("7"),
    }
}

impl Dialect for Azure {
    fn name(&self) -> &'static str {
        "azure"
    }

    fn handles(&self, path: &str) -> bool {
        path.ends_with(V1_PATH)
            || (path.contains(DEPLOYMENTS) && path.ends_with("/chat/completions"))
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        // `Authorization: Bearer` is Microsoft Entra ID auth on Azure OpenAI
        // (learn.microsoft.com/azure/ai-foundry/openai/reference, "Authentication"):
        // a token that is not one is refused even next to a valid api-key.
        if req.header("authorization").is_some() {
            return Err(Failure::Auth(
                "Access token is missing, invalid, audience is incorrect \
                 (https://cognitiveservices.azure.com), or have expired."
                    .into(),
            ));
        }
        if req
            .header("api-key")
            .is_none_or(|k| !keys::matches("azure", k))
        {
            return Err(Failure::Auth(
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure \
                 to provide a valid key for an active subscription and use a correct regional API \
                 endpoint for your resource."
                    .into(),
            ));
        }
        // The classic path requires api-version; v1 takes none (or "preview").
        let version = query_param(req.query(), "api-version");
        // The v1 API: its chat completions and its Responses API.
        if req.path().contains("/openai/v1/") {
            if version
                .as_deref()
                .is_some_and(|v| v != "preview" && v != "latest")
            {
                return Err(Failure::Invalid(
                    "API version not supported. The v1 API accepts no api-version (or 'preview')."
                        .into(),
                ));
            }
        } else if version.is_none_or(|v| v.is_empty()) {
            return Err(Failure::Invalid(
                "Missing required query parameter 'api-version'.".into(),
            ));
        }
        Ok(())
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        OpenAi.parse(body)
    }

    fn error(&self, failure: &Failure) -> Reply {
        match failure {
            Failure::Auth(m) => azure_error(401, "401", m),
            // Validation and context-length errors come in OpenAI's shape.
            Failure::Invalid(_) | Failure::Param { .. } | Failure::ContextLength => {
                OpenAi.error(failure)
            }
            Failure::Status(s) => match s {
                400 => OpenAi.error(failure),
                401 => azure_error(
                    401,
                    "401",
                    "Access denied due to invalid subscription key or wrong API endpoint.",
                ),
                403 => azure_error(
                    403,
                    "403",
                    "Traffic is not from an approved private endpoint.",
                ),
                404 => azure_error(
                    404,
                    "DeploymentNotFound",
                    "The API deployment for this resource does not exist. If you created the \
                     deployment within the last 5 minutes, please wait a moment and try again.",
                ),
                413 => azure_error(413, "RequestEntityTooLarge", "Request too large."),
                429 => azure_error(
                    429,
                    "429",
                    "Requests to the ChatCompletions_Create Operation under Azure OpenAI API \
                     version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 \
                     pricing tier. Please retry after 7 seconds.",
                ),
                500 => azure_error(
                    500,
                    "InternalServerError",
                    "The server had an error while processing your request. Sorry about that!",
                ),
                _ => azure_error(
                    503,
                    "ServiceUnavailable",
                    "The service is temporarily unable to process your request. Please try again later.",
                ),
            },
        }
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        let mut body = OpenAi.response(p, a, meta);
        body["model"] = json!(DEPLOYED_MODEL);
        body["prompt_filter_results"] = prompt_filter_results();
        annotate_choices(&mut body, a.finish == Finish::ContentFilter);
        body
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        let annotation = json!({
            "choices": [], "created": 0, "id": "", "model": "", "object": "",
            "prompt_filter_results": prompt_filter_results(),
        });
        let mut events = vec![SseEvent {
            name: None,
            data: to_json(&annotation),
            delta: false,
        }];
        for mut e in OpenAi.stream(p, a, meta) {
            if let Ok(mut chunk) = serde_json::from_str::<Value>(&e.data) {
                let filtered =
                    chunk.pointer("/choices/0/finish_reason") == Some(&json!("content_filter"));
                annotate_choices(&mut chunk, filtered);
                chunk["model"] = json!(DEPLOYED_MODEL);
                e.data = to_json(&chunk);
            }
            events.push(e);
        }
        events
    }

    fn stream_error(&self) -> SseEvent {
        SseEvent {
            name: None,
            data: r#"{"error":{"code":"InternalServerError","message":"The server had an error while processing your request."}}"#.into(),
            delta: false,
        }
    }

    /// Azure refuses a filtered prompt with a 400, stream or not; its
    /// output filter is the usual answer's `content_filter` finish.
    fn filtered(&self, filter: Filter, _p: &Prompt, _meta: Meta) -> Option<Filtered> {
        if filter != Filter::BlockedPrompt {
            return None;
        }
        let body = json!({"error": {
            "message": "The response was filtered due to the prompt triggering Azure OpenAI's \
                        content management policy. Please modify your prompt and retry. To learn \
                        more about our content filtering policies please read our documentation: \
                        https://go.microsoft.com/fwlink/?linkid=2198766",
            "type": null, "param": "prompt", "code": "content_filter", "status": 400,
            "innererror": {
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": filter_results(true),
            },
        }});
        Some(Filtered::Reply(Reply {
            status: 400,
            body: to_json(&body),
            retry_after: None,
        }))
    }
}
