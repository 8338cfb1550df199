//! Azure OpenAI (`POST /openai/deployments/{deployment}/chat/completions?api-version=...`,
//! or with `api_version: "v1"` the v1 API's `POST /openai/v1/chat/completions`
//! with the deployment as `model`; header `api-key`). The body and answers are OpenAI's, so the OpenAI code
//! serves both; Azure differs in where the model goes (the deployment, from the
//! provider's `models` mapping), the auth header, and its content-filter
//! signals, which that shared code folds into the unified ones:
//! - prompt filtered: HTTP 400, `code: content_filter`,
//!   `innererror.code: ResponsibleAIPolicyViolation` → 400 `CONTENT_FILTERED`;
//! - answer filtered: `finish_reason: content_filter`, or a choice whose
//!   `content_filter_results` has a category with `filtered: true`;
//! - stream annotation chunks (empty `choices` with `prompt_filter_results`,
//!   or empty deltas with `content_filter_results`) are dropped.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::settings::{self, Key};
use super::transport::{self, Operation};
use super::{openai, DecodedResponse, Dialect, StreamDecoder, Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::call::Call;
use crate::model::request::ChatRequest;
use crate::model::response::Origin;
use crate::model::stream::EventWriter;
use crate::model::Api;
use crate::provider::Provider;

pub struct Azure;

/// The `api_version` that selects Azure OpenAI's v1 API.
pub const V1: &str = "v1";

/// The azure dialect's settings.
#[derive(Debug)]
pub struct Settings {
    /// Azure OpenAI's `api-version` query parameter, or `v1` for the v1 API.
    pub api_version: String,
    /// As for openai: no Responses API (see `openai::Settings`).
    pub chat_only: bool,
}

impl crate::provider::DialectSettings for Settings {}

/// The keys as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    chat_only: bool,
}

const KEYS: [Key; 2] = [
    Key {
        name: "api_version",
        elsewhere: "only the azure dialect uses it",
    },
    openai::CHAT_ONLY,
];

impl Dialect for Azure {
    fn speaks(&self, api: Api) -> bool {
        matches!(api, Api::OpenAiChat | Api::OpenAiResponses)
    }

    /// The Responses API only on the v1 API, and not with `chat_only`.
    fn serves(&self, api: Api, provider: &Provider) -> bool {
        let settings = provider.settings::<Settings>();
        self.speaks(api)
            && (api != Api::OpenAiResponses
                || settings.is_some_and(|s| s.api_version == V1 && !s.chat_only))
    }

    /// A Chat Completions client's `web_search_options`, sent as written.
    fn web_search(&self, req: &ChatRequest, _model: &str) -> bool {
        openai::sends_web_search(req)
    }

    fn settings_keys(&self) -> &'static [Key] {
        &KEYS
    }

    /// `api_version` required, in the characters Azure's versions use.
    fn read_settings(
        &self,
        members: Map<String, Value>,
        field: &str,
    ) -> Result<Option<Box<dyn crate::provider::DialectSettings>>, String> {
        let written: Written = settings::typed(members, field)?;
        let Some(api_version) = written.api_version else {
            return Err(format!(
                "{field}.api_version: required for the azure dialect"
            ));
        };
        if api_version.is_empty()
            || !api_version
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        {
            return Err(format!(
                "{field}.api_version: must look like 2024-10-21 (letters, digits, '-', '.')"
            ));
        }
        Ok(Some(Box::new(Settings {
            api_version,
            chat_only: written.chat_only,
        })))
    }

    /// Responses clients: the v1 API's `/openai/v1/responses` (the
    /// deployment as `model`); other `api_version`s are not offered it
    /// ([`Dialect::serves`]).
    fn encode_native(
        &self,
        api: Api,
        client: &super::ClientRequest,
        _req: &ChatRequest,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        (api == Api::OpenAiResponses).then(|| openai::encode_responses(&(client.body)(), target))
    }

    /// The stored-response calls, on the v1 API ([`Dialect::serves`]):
    /// `/openai/v1/responses/{id}...`.
    fn encode_call(
        &self,
        call: &Call,
        _raw: &dyn Fn() -> Vec<u8>,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        openai::stored_call(call, target)
    }

    fn encode_request(
        &self,
        req: &ChatRequest,
        target: &Target,
    ) -> Result<UpstreamRequest, GatewayError> {
        // The deployment's path and `api-version` are the transport's
        // (`api_version: "v1"`: one path, the deployment as `model`).
        let body = openai::encode_body(req, target.model)?;
        transport::request(Operation::Generate { stream: req.stream }, target, body)
    }

    fn decode_response(
        &self,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        openai::decode_typed(body, origin)
    }

    fn decode_native(
        &self,
        api: Api,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        openai::decode_native(api, body, origin)
    }

    fn embedder(&self) -> Option<&dyn crate::dialects::embed::Embedder> {
        Some(&crate::dialects::embed::openai::OpenAi)
    }

    fn stream_decoder(&self, writer: EventWriter) -> Box<dyn StreamDecoder> {
        openai::stream_decoder(writer)
    }

    fn decode_error(&self, status: u16, body: &[u8]) -> GatewayError {
        openai::decode_error(status, body)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::config::Config;
    use crate::error::ErrorCode;
    use serde_json::Value;

    const PROVIDER: &str = r#"{"dialect":"azure","api_key":"az-key","api_version":"2024-10-21","models":{"g":"gpt4o-prod"}}"#;

    fn encode(body: &str, model: &str) -> (UpstreamRequest, Value) {
        crate::dialects::encode_for(&Azure, PROVIDER, model, body).unwrap()
    }

    #[test]
    fn encodes_deployment_path_api_version_and_key() {
        let (up, v) = encode(
            r#"{"model":"g","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],
                "stream":true,"stop":["X"],"max_tokens":5,"request_id":"r"}"#,
            "gpt4o-prod",
        );
        assert_eq!(
            up.path,
            "/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21"
        );
        assert!(up.headers.contains(&("api-key", "az-key".into())));
        assert!(!up.headers.iter().any(|(h, _)| *h == "authorization"));
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["messages"][0]["role"], "system");
        assert_eq!(v["stop"], serde_json::json!(["X"]));
        assert!(v.get("request_id").is_none());
        // A client's model that reaches the path cannot leave its segment.
        let (up, _) = encode(
            r#"{"model":"g","messages":[{"role":"user","content":"hi"}]}"#,
            "../x?y",
        );
        assert!(up
            .path
            .starts_with("/openai/deployments/..%2Fx%3Fy/chat/completions?"));
    }

    #[test]
    fn the_v1_api_names_the_deployment_in_the_body() {
        let config = Config::parse(
            br#"{"providers":{"az":{"dialect":"azure","api_key":"az-key","api_version":"v1",
                 "base_path":"/az"}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap();
        let req =
            ChatRequest::parse(br#"{"model":"g","messages":[{"role":"user","content":"hi"}]}"#)
                .unwrap();
        let target = Target {
            provider: &config.providers["az"],
            model: "gpt4o-prod",
        };
        let up = Azure.encode_request(&req, &target).unwrap();
        assert_eq!(up.path, "/az/openai/v1/chat/completions");
        assert!(up.headers.contains(&("api-key", "az-key".into())));
        let v: Value = serde_json::from_slice(&up.body).unwrap();
        assert_eq!(v["model"], "gpt4o-prod");
    }

    #[test]
    fn stored_response_calls_keep_the_id_and_query_below_each_vendors_root() {
        let config = Config::parse(
            br#"{"providers":{"az":{"dialect":"azure","api_key":"az-key","api_version":"v1","base_path":"/az"},
                 "oa":{"dialect":"openai","api_key":"oa-key"},
                 "local":{"dialect":"openai"}},
                 "model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap();
        let call =
            crate::surfaces::routed_call("GET", "/v1/responses/resp_1/input_items", "limit=2");
        let raw = || panic!("a stored-response call has no body to read");
        let target = |p: &str| Target {
            provider: &config.providers[p],
            model: "m",
        };
        let up = Azure
            .encode_call(&call, &raw, &target("az"))
            .unwrap()
            .unwrap();
        assert_eq!(
            up.path,
            "/az/openai/v1/responses/resp_1/input_items?limit=2"
        );
        assert_eq!(up.headers, [("api-key", "az-key".to_owned())]);
        assert!(up.body.is_empty());
        let up = openai::OpenAi
            .encode_call(&call, &raw, &target("oa"))
            .unwrap()
            .unwrap();
        assert_eq!(up.path, "/v1/responses/resp_1/input_items?limit=2");
        assert_eq!(up.headers, [("authorization", "Bearer oa-key".to_owned())]);
        // A provider without a key sends no auth header (not an empty one).
        let up = openai::OpenAi
            .encode_call(&call, &raw, &target("local"))
            .unwrap()
            .unwrap();
        assert!(up.headers.is_empty(), "{:?}", up.headers);
        // Neither has Anthropic's token count.
        assert!(Azure
            .encode_call(
                &crate::surfaces::routed_call("POST", "/v1/messages/count_tokens", ""),
                &raw,
                &target("az")
            )
            .is_none());
    }

    fn origin() -> Origin {
        Origin {
            provider: "az".into(),
            model: "gpt4o-prod".into(),
            ..Origin::default()
        }
    }

    const FILTER_OK: &str = r#"{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}"#;

    #[test]
    fn decodes_response_with_filter_annotations() {
        let body = format!(
            r#"{{"id":"chatcmpl-A1","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06",
            "prompt_filter_results":[{{"prompt_index":0,"content_filter_results":{FILTER_OK}}}],
            "choices":[{{"index":0,"finish_reason":"tool_calls","message":{{"role":"assistant","content":null,
              "tool_calls":[{{"id":"call_1","type":"function","function":{{"name":"f","arguments":"{{}}"}}}},
                            {{"id":"call_2","type":"function","function":{{"name":"g","arguments":"{{}}"}}}}]}},
              "content_filter_results":{{}}}}],
            "usage":{{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}}}"#
        );
        let mut origin = origin();
        let d = Azure
            .decode_native(Api::OpenAiChat, body.as_bytes(), &mut origin)
            .unwrap();
        assert_eq!(origin.model, "gpt-4o-2024-08-06");
        assert_eq!(d.usage.unwrap().prompt_tokens, 9);
        let v: Value = d.chat_json(&origin);
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            v["choices"][0]["message"]["tool_calls"][1]["id"], "call_2",
            "parallel tool calls pass through"
        );
        assert_eq!(v["provider"], "az");
    }

    #[test]
    fn filtered_answer_is_content_filter() {
        for (finish, results) in [
            ("content_filter", FILTER_OK.to_owned()),
            (
                "stop",
                FILTER_OK.replace(
                    r#""violence":{"filtered":false,"severity":"safe"}"#,
                    r#""violence":{"filtered":true,"severity":"high"}"#,
                ),
            ),
        ] {
            let body = format!(
                r#"{{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{{"index":0,
                "finish_reason":"{finish}","message":{{"role":"assistant","content":null}},"content_filter_results":{results}}}]}}"#
            );
            let d = Azure
                .decode_native(Api::OpenAiChat, body.as_bytes(), &mut origin())
                .unwrap();
            let typed = Azure.decode_response(body.as_bytes(), &mut origin());
            assert_eq!(typed.unwrap().finish_reason, d.finish_reason);
            let v: Value = d.chat_json(&origin());
            assert_eq!(
                v["choices"][0]["finish_reason"], "content_filter",
                "{finish}"
            );
        }
    }

    #[test]
    fn maps_errors_including_the_prompt_filter() {
        let blocked = br#"{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,
            "innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":true,"severity":"high"},"jailbreak":{"filtered":false,"detected":false}}}}}"#;
        let e = Azure.decode_error(400, blocked);
        assert_eq!(e.code, ErrorCode::ContentFiltered);
        assert_eq!(e.status(), 400);
        let inner_only = br#"{"error":{"message":"filtered","code":"BadRequest","innererror":{"code":"ResponsibleAIPolicyViolation"}}}"#;
        assert_eq!(
            Azure.decode_error(400, inner_only).code,
            ErrorCode::ContentFiltered
        );
        let cases: [(u16, &[u8], ErrorCode); 5] = [
            (429, br#"{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit. Please retry after 7 seconds."}}"#, ErrorCode::UpstreamRateLimit),
            (401, br#"{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint."}}"#, ErrorCode::AuthFailed),
            (404, br#"{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}"#, ErrorCode::ModelNotFound),
            (500, br#"{"error":{"code":"InternalServerError","message":"The server had an error."}}"#, ErrorCode::UpstreamError),
            (400, br#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#, ErrorCode::ContextLengthExceeded),
        ];
        for (status, body, code) in cases {
            assert_eq!(Azure.decode_error(status, body).code, code, "{status}");
        }
    }

    fn run(input: &str, include_usage: bool) -> (Vec<Value>, String) {
        crate::dialects::run_stream(&Azure, origin(), &[input.as_bytes()], include_usage)
    }

    fn chunk(choices: &str) -> String {
        format!(
            "data: {{\"id\":\"chatcmpl-A1\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"gpt-4o-2024-08-06\",\"choices\":{choices}}}\n\n"
        )
    }

    pub(crate) fn stream(finish_chunk: &str) -> String {
        [
            format!("data: {{\"choices\":[],\"created\":0,\"id\":\"\",\"model\":\"\",\"object\":\"\",\"prompt_filter_results\":[{{\"prompt_index\":0,\"content_filter_results\":{FILTER_OK}}}]}}\n\n"),
            chunk(r#"[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null,"content_filter_results":{}}]"#),
            chunk(&format!(r#"[{{"index":0,"delta":{{"content":"Hi"}},"finish_reason":null,"content_filter_results":{FILTER_OK}}}]"#)),
            chunk(&format!(r#"[{{"index":0,"delta":{{}},"finish_reason":null,"content_filter_results":{FILTER_OK},"content_filter_offsets":{{"check_offset":0,"start_offset":0,"end_offset":2}}}}]"#)),
            chunk(finish_chunk),
            "data: {\"id\":\"chatcmpl-A1\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1,\"total_tokens\":5}}\n\n".to_owned(),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat()
    }

    #[test]
    fn stream_drops_annotation_chunks() {
        let (ev, text) = run(
            &stream(r#"[{"index":0,"delta":{},"finish_reason":"stop"}]"#),
            true,
        );
        assert!(text.ends_with("data: [DONE]\n\n"));
        assert_eq!(ev.len(), 4, "{text}");
        assert!(ev.iter().all(|e| e["id"] == "chatcmpl-A1"
            && e["model"] == "gpt-4o-2024-08-06"
            && e["created"] == 5));
        assert!(
            ev[..3]
                .iter()
                .all(|e| e["choices"].as_array().unwrap().len() == 1),
            "only the usage chunk has empty choices"
        );
        assert_eq!(ev[1]["choices"][0]["delta"]["content"], "Hi");
        assert_eq!(ev[2]["choices"][0]["finish_reason"], "stop");
        assert_eq!(ev[3]["usage"]["total_tokens"], 5);
    }

    #[test]
    fn a_stream_error_named_by_a_status_maps_as_that_status_does() {
        let rate = "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded call rate limit of your current OpenAI S0 pricing tier. Please retry after 2 seconds.";
        for (code, status, unified) in [
            ("429", 429, ErrorCode::UpstreamRateLimit),
            ("500", 500, ErrorCode::UpstreamError),
            ("503", 503, ErrorCode::UpstreamBusy),
            ("408", 408, ErrorCode::UpstreamTimeout),
            ("InternalServerError", 500, ErrorCode::UpstreamError),
        ] {
            let error = format!(r#"{{"error":{{"code":"{code}","message":"{rate}"}}}}"#);
            assert_eq!(Azure.decode_error(status, error.as_bytes()).code, unified);
            let input = [
                chunk(r#"[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]"#),
                format!("data: {error}\n\n"),
            ]
            .concat();
            let (ev, text) = run(&input, false);
            let last = ev.last().unwrap();
            assert_eq!(last["error"]["code"], unified.as_str(), "{code}: {text}");
            assert!(
                last["error"]["message"].as_str().unwrap().ends_with(rate),
                "{text}"
            );
        }
    }

    #[test]
    fn stream_filtered_answer_finishes_with_content_filter() {
        let filtered = FILTER_OK.replace(
            r#""sexual":{"filtered":false,"severity":"safe"}"#,
            r#""sexual":{"filtered":true,"severity":"medium"}"#,
        );
        for finish in [
            r#"[{"index":0,"delta":{},"finish_reason":"content_filter"}]"#.to_owned(),
            format!(
                r#"[{{"index":0,"delta":{{}},"finish_reason":null,"content_filter_results":{filtered}}}]"#
            ),
        ] {
            let (ev, text) = run(&stream(&finish), false);
            let finishes: Vec<&Value> = ev
                .iter()
                .map(|e| &e["choices"][0]["finish_reason"])
                .filter(|f| !f.is_null())
                .collect();
            assert_eq!(finishes, ["content_filter"], "{text}");
            assert!(text.ends_with("data: [DONE]\n\n"));
        }
    }
}
