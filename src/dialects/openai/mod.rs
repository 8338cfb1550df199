//! OpenAI Chat Completions, and every server that speaks it (vLLM, Ollama,
//! DeepSeek, Mistral...). Nearly a pass-through: we always ask for stream
//! usage (to meter) and drop the usage chunk when the client did not ask.
//!
//! Azure OpenAI speaks the same body with its content-filter annotations;
//! the decoding here serves both (see `azure.rs`).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::settings::{self, Key};
use super::transport::{self, Operation};
use super::{
    encode_json, unparseable, DecodedResponse, Dialect, SseStream, StreamDecoder, Target,
    UpstreamRequest,
};
use crate::error::GatewayError;
use crate::model::call::Call;
use crate::model::request::{ChatRequest, Effort, Thinking};
use crate::model::response::{Answer, Choice, Completion, FinishReason, Origin, ToolCallOut};
use crate::model::stream::EventWriter;
use crate::model::Api;
use crate::provider::Provider;
use crate::wire::openai_chat as chat;
pub(super) use answers::decode_error;
use answers::fold_content_filter;
use stream::OpenAiEvents;

mod answers;
mod responses;
pub(super) mod stream;

pub struct OpenAi;

/// The openai dialect's settings.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// A server without the Responses API (vLLM, Ollama, DeepSeek...):
    /// Responses clients are translated to Chat Completions.
    #[serde(default)]
    pub chat_only: bool,
}

impl crate::provider::DialectSettings for Settings {}

/// `chat_only`, an openai and azure setting.
pub(super) const CHAT_ONLY: Key = Key {
    name: "chat_only",
    elsewhere: "only the openai and azure dialects speak the Responses API",
};

/// A stored-response call (OpenAI's and Azure's v1 API alike): no body.
pub(super) fn stored_call(
    call: &Call,
    target: &Target,
) -> Option<Result<UpstreamRequest, GatewayError>> {
    (call.stored_response().is_some())
        .then(|| transport::request(Operation::Call(call), target, Vec::new()))
}

/// The client's members we do not model, as OpenAI takes them: without
/// what only the gateway reads (`metadata.task_type`), and `metadata` only
/// with `store: true` (OpenAI refuses it otherwise: "'metadata' is only
/// allowed when 'store' is enabled"). `reasoning_effort` goes in among
/// them, in key order, where it was when it rode in `extra`.
fn extra_members<'a>(
    fields: &'a Map<String, Value>,
    reasoning_effort: Option<&'static str>,
) -> Vec<(&'a str, Cow<'a, Value>)> {
    let stored = fields.get("store") == Some(&Value::Bool(true));
    let mut out = Vec::with_capacity(fields.len() + 1);
    let mut effort = reasoning_effort;
    for (key, value) in fields {
        if let Some(e) = effort.filter(|_| key.as_str() > REASONING_EFFORT) {
            out.push((REASONING_EFFORT, Cow::Owned(Value::from(e))));
            effort = None;
        }
        if key != "metadata" {
            out.push((key.as_str(), Cow::Borrowed(value)));
            continue;
        }
        let Some(metadata) = value.as_object().filter(|_| stored) else {
            continue;
        };
        let kept: Map<String, Value> = metadata
            .iter()
            .filter(|(k, _)| !GATEWAY_METADATA.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            out.push((key.as_str(), Cow::Owned(Value::Object(kept))));
        }
    }
    if let Some(e) = effort {
        out.push((REASONING_EFFORT, Cow::Owned(Value::from(e))));
    }
    out
}

const REASONING_EFFORT: &str = "reasoning_effort";

/// `metadata` keys the gateway consumes (routing rules) and vendors never see.
const GATEWAY_METADATA: &[&str] = &["task_type"];

/// The client's `web_search_options` (a Chat Completions client's, kept in
/// `extra` as written) go on as they came: OpenAI's and Azure's own web
/// search. A search from elsewhere (the Responses API's `web_search` tool,
/// translated for a `chat_only` server) has no such field: left out.
pub(super) fn sends_web_search(req: &ChatRequest) -> bool {
    req.web_search.is_some()
        && req
            .extra
            .get(WEB_SEARCH_OPTIONS)
            .is_some_and(|v| !v.is_null())
}

const WEB_SEARCH_OPTIONS: &str = "web_search_options";

impl Dialect for OpenAi {
    fn speaks(&self, api: Api) -> bool {
        matches!(api, Api::OpenAiChat | Api::OpenAiResponses)
    }

    /// Not the Responses API where the server has none (`chat_only`).
    fn serves(&self, api: Api, provider: &Provider) -> bool {
        let chat_only = provider.settings::<Settings>().is_some_and(|s| s.chat_only);
        self.speaks(api) && (api != Api::OpenAiResponses || !chat_only)
    }

    fn settings_keys(&self) -> &'static [Key] {
        &[CHAT_ONLY]
    }

    fn web_search(&self, req: &ChatRequest, _model: &str) -> bool {
        sends_web_search(req)
    }

    fn read_settings(
        &self,
        members: Map<String, Value>,
        field: &str,
    ) -> Result<Option<Box<dyn crate::provider::DialectSettings>>, String> {
        settings::typed::<Settings>(members, field).map(|s| Some(Box::new(s) as _))
    }

    fn encode_native(
        &self,
        api: Api,
        client: &crate::dialects::ClientRequest,
        _req: &ChatRequest,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        (api == Api::OpenAiResponses).then(|| encode_responses(&(client.body)(), target))
    }

    /// The stored-response calls: `/v1/responses/{id}...`.
    fn encode_call(
        &self,
        call: &Call,
        _raw: &dyn Fn() -> Vec<u8>,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        stored_call(call, target)
    }

    fn encode_request(
        &self,
        req: &ChatRequest,
        target: &Target,
    ) -> Result<UpstreamRequest, GatewayError> {
        let body = encode_body(req, target.model)?;
        transport::request(Operation::Generate { stream: req.stream }, target, body)
    }

    fn decode_response(
        &self,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        decode_typed(body, origin)
    }

    fn decode_native(
        &self,
        api: Api,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        decode_native(api, body, origin)
    }

    fn embedder(&self) -> Option<&dyn crate::dialects::embed::Embedder> {
        Some(&crate::dialects::embed::openai::OpenAi)
    }

    fn stream_decoder(&self, writer: EventWriter) -> Box<dyn StreamDecoder> {
        stream_decoder(writer)
    }

    fn decode_error(&self, status: u16, body: &[u8]) -> GatewayError {
        decode_error(status, body)
    }
}

/// A vendor answer for a client of one of OpenAI's APIs, edited (OpenAI and Azure).
pub(super) fn decode_native(
    api: Api,
    body: &[u8],
    origin: &mut Origin,
) -> Result<DecodedResponse, GatewayError> {
    match api {
        Api::OpenAiResponses => responses::decode(body, origin),
        _ => decode_completion(body, origin),
    }
}

/// The stream decoder for the writer's client: Responses events pass
/// through to a Responses client; chat chunks otherwise (OpenAI and Azure).
pub(super) fn stream_decoder(writer: EventWriter) -> Box<dyn StreamDecoder> {
    if writer.native() && writer.api() == Api::OpenAiResponses {
        return Box::new(SseStream::new(writer, responses::ResponsesStream));
    }
    Box::new(SseStream::new(writer, OpenAiEvents::default()))
}

/// The Responses request for OpenAI or Azure (path and auth header theirs).
pub(super) fn encode_responses(
    raw: &[u8],
    target: &Target,
) -> Result<UpstreamRequest, GatewayError> {
    let body = responses::encode(raw, target)?;
    transport::request(Operation::Responses, target, body)
}

/// The request body: the client's, with the vendor model (or Azure
/// deployment) and stream usage always requested.
pub(super) fn encode_body(req: &ChatRequest, model: &str) -> Result<Vec<u8>, GatewayError> {
    crate::dialects::refuse_documents(req)?;
    let outgoing = chat::Request {
        model,
        request: req,
        stream_options: req.stream.then_some(chat::StreamOptions {
            include_usage: true,
        }),
        extra: extra_members(&req.extra, reasoning_effort(req, model)),
        breakpoints: takes_breakpoints(model),
    };
    encode_json(req, &outgoing)
}

/// A GPT model's version from its name (`gpt-5.6-mini` → 5.6, `gpt-6`
/// → 6.0, a provider prefix `openai/` allowed).
fn gpt_version(model: &str) -> Option<(u32, u32)> {
    let name = model.rsplit('/').next().unwrap_or(model);
    let version = name.strip_prefix("gpt-")?;
    let number = |s: &str| -> Option<u32> {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let mut parts = version.splitn(2, '.');
    let major = parts.next().and_then(number)?;
    Some((major, parts.next().and_then(number).unwrap_or(0)))
}

/// Whether an OpenAI model takes `prompt_cache_breakpoint` on content
/// parts: GPT-5.6 and later (OpenAI's prompt caching guide; earlier models
/// refuse the member, and cache prefixes by themselves, so a breakpoint is
/// left out for them).
pub(super) fn takes_breakpoints(model: &str) -> bool {
    gpt_version(model).is_some_and(|v| v >= (5, 6))
}

/// Whether an OpenAI model refuses function tools beside a reasoning
/// effort on Chat Completions: GPT-5.2 and later ("Function tools with
/// reasoning_effort are not supported for gpt-5.4 in /v1/chat/completions.
/// To use function tools, use /v1/responses or set reasoning_effort to
/// 'none'"), their `-chat` models (which do not reason) apart.
fn refuses_reasoning_with_tools(model: &str) -> bool {
    gpt_version(model).is_some_and(|v| v >= (5, 2)) && !model.contains("-chat")
}

/// OpenAI takes an effort, never a token budget: a budget alone is sent as
/// the effort it amounts to (`Effort::for_budget`; with an effort too, the
/// effort is sent and the budget dropped). A request that named no effort
/// (no reasoning asked, or the model's own choice: a Messages client's
/// adaptive thinking) with function tools, to a model that refuses
/// reasoning beside them ([`refuses_reasoning_with_tools`]), gets `none`,
/// which those models take; a named effort is sent, OpenAI's to refuse.
fn reasoning_effort(req: &ChatRequest, model: &str) -> Option<&'static str> {
    match req.reasoning.and_then(|r| r.effort_or_from_budget()) {
        Some(effort) => Some(effort.as_str()),
        None if !req.tools.is_empty() && refuses_reasoning_with_tools(model) => {
            Some(Effort::None.as_str())
        }
        None => None,
    }
}

/// A `chat.completion` decoded into the neutral answer: each choice in
/// its place (`index`); an index out of the choices' range, or twice, is
/// the vendor's error.
pub(super) fn decode_typed(
    body: &[u8],
    origin: &mut Origin,
) -> Result<DecodedResponse, GatewayError> {
    let wire: chat::Completion =
        serde_json::from_slice(body).map_err(|e| unparseable("response", e))?;
    if wire.choices.is_empty() {
        return Err(unparseable("response", "no choices"));
    }
    if !wire.id.is_empty() {
        origin.id = wire.id.into_owned();
    }
    if !wire.model.is_empty() {
        origin.model = wire.model.into_owned();
    }
    let count = wire.choices.len();
    let numbered = wire.choices.into_iter().map(|choice| {
        let index = usize::try_from(choice.index).unwrap_or(usize::MAX);
        (index, decode_choice(choice))
    });
    let choices = super::choices_in_place(count, numbered, "choice")?;
    Ok(DecodedResponse::decoded(Completion::of_choices(
        choices,
        wire.usage.as_ref().map(Into::into),
    )))
}

/// One choice of a `chat.completion`.
fn decode_choice(choice: chat::Choice) -> Choice {
    let finish_reason = choice.finish();
    let message = choice.message.unwrap_or_default();
    let reasoning = message
        .reasoning_content
        .filter(|t| !t.is_empty())
        .map(|text| Thinking {
            text: text.into_owned(),
            ..Thinking::default()
        });
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| {
            let function = call.function.unwrap_or_default();
            ToolCallOut::new(
                call.id.unwrap_or_default().into_owned(),
                function.name.unwrap_or_default().into_owned(),
                function.arguments.unwrap_or_default().into_owned(),
            )
        })
        .collect();
    Choice {
        reasoning: reasoning.into_iter().collect(),
        content: message.content.or(message.refusal).map(Cow::into_owned),
        tool_calls,
        finish_reason,
    }
}

/// A `chat.completion` for the chat surface: the vendor's object, edited.
pub(super) fn decode_completion(
    body: &[u8],
    origin: &mut Origin,
) -> Result<DecodedResponse, GatewayError> {
    let mut completion: Map<String, Value> =
        serde_json::from_slice(body).map_err(|e| unparseable("response", e))?;
    let Some(choices) = completion.get_mut("choices").and_then(Value::as_array_mut) else {
        return Err(unparseable("response", "no choices"));
    };
    choices.iter_mut().for_each(fold_content_filter);
    // The first choice's finish, unless any choice (n > 1) was filtered:
    // then the answer counts as filtered (metering).
    let mut finish_reason = None;
    let reasons = choices
        .iter()
        .filter_map(|c| c.get("finish_reason").and_then(Value::as_str))
        .filter_map(FinishReason::parse);
    for reason in reasons {
        if reason == FinishReason::ContentFilter {
            finish_reason = Some(reason);
            break;
        }
        finish_reason.get_or_insert(reason);
    }
    if let Some(model) = completion.get("model").and_then(Value::as_str) {
        origin.model = model.to_owned();
    }
    let usage = completion.get("usage").and_then(chat::Usage::read);
    completion.insert("provider".into(), Value::String(origin.provider.clone()));
    let body = serde_json::to_vec(&completion).map_err(|e| unparseable("response", e))?;
    // The same API on both sides: the vendor's answer, edited, not rebuilt.
    Ok(DecodedResponse {
        answer: Answer::Native(body),
        usage,
        finish_reason,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::model::response::Usage;
    use serde_json::json;

    const PROVIDER: &str = r#"{"dialect":"openai","api_key":"sk-test","base_path":"/proxy"}"#;

    fn encoded(body: &str) -> Value {
        crate::dialects::encode_for(&OpenAi, PROVIDER, "gpt-4o", body)
            .unwrap()
            .1
    }

    #[test]
    fn reasoning_effort_goes_where_it_was_among_the_extra_fields() {
        let m = r#""model":"g","messages":[{"role":"user","content":"hi"}]"#;
        for extra in [
            "",
            r#","logprobs":true"#,
            r#","service_tier":"flex""#,
            r#","logprobs":true,"service_tier":"flex""#,
        ] {
            let body = format!(r#"{{{m}{extra},"reasoning_effort":"minimal"}}"#);
            let bytes = crate::dialects::encode_for(&OpenAi, PROVIDER, "o3", &body)
                .unwrap()
                .0
                .body;
            // Byte for byte what the body was when the effort rode in `extra`.
            let mut old = ChatRequest::parse(body.as_bytes()).unwrap();
            old.reasoning = None;
            old.extra.insert(REASONING_EFFORT.into(), "minimal".into());
            let want = encode_body(&old, "o3").unwrap();
            assert_eq!(
                String::from_utf8(bytes).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
        // A budget alone: the effort it amounts to.
        for (budget, effort) in [(100, "low"), (4096, "medium"), (32000, "high")] {
            let v = encoded(&format!(r#"{{{m},"reasoning":{{"max_tokens":{budget}}}}}"#));
            assert_eq!(v["reasoning_effort"], effort, "{budget}");
        }
        let v = encoded(&format!(
            r#"{{{m},"reasoning":{{"effort":"high","max_tokens":100}}}}"#
        ));
        assert_eq!(v["reasoning_effort"], "high");
        assert!(v.get("reasoning").is_none());
        // OpenAI's newest efforts reach it as they came.
        for name in ["xhigh", "max"] {
            let v = encoded(&format!(r#"{{{m},"reasoning_effort":"{name}"}}"#));
            assert_eq!(v["reasoning_effort"], name);
        }
    }

    #[test]
    fn recent_models_get_no_reasoning_beside_function_tools_unless_asked() {
        let sent = |model: &str, fields: &str| {
            let body = format!(
                r#"{{"model":"g","messages":[{{"role":"user","content":"x"}}],"tools":[{{"type":"function","function":{{"name":"f"}}}}]{fields}}}"#
            );
            crate::dialects::encode_for(&OpenAi, PROVIDER, model, &body)
                .unwrap()
                .1
                .get("reasoning_effort")
                .cloned()
        };
        assert_eq!(sent("gpt-5.4", ""), Some(json!("none")));
        assert_eq!(
            sent("gpt-5.6-mini", r#","reasoning":{"enabled":true}"#),
            Some(json!("none"))
        );
        assert_eq!(
            sent("gpt-5.4", r#","reasoning_effort":"high""#),
            Some(json!("high"))
        );
        for model in ["gpt-5.1", "gpt-5", "o3", "gpt-5.2-chat-latest", "gpt-4o"] {
            assert_eq!(sent(model, ""), None, "{model}");
        }
    }

    #[test]
    fn a_tool_results_images_follow_in_a_user_message() {
        let v = encoded(
            r#"{"model":"g","messages":[{"role":"user","content":"look"},
            {"role":"assistant","content":null,"tool_calls":[
                {"id":"c1","type":"function","function":{"name":"shot","arguments":"{}"}},
                {"id":"c2","type":"function","function":{"name":"shot","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"one"},{"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD"}}]},
            {"role":"tool","tool_call_id":"c2","content":"no image"},
            {"role":"user","content":"and?"}]}"#,
        );
        let m = v["messages"].as_array().unwrap();
        assert_eq!(
            m[2],
            json!({"role":"tool","content":[{"type":"text","text":"one"}],"tool_call_id":"c1"})
        );
        assert_eq!(
            m[3],
            json!({"role":"tool","content":"no image","tool_call_id":"c2"})
        );
        assert_eq!(
            m[4],
            json!({"role":"user","content":[
                {"type":"text","text":"Images returned by tool call c1:"},
                {"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD"}}]})
        );
        assert_eq!(m[5]["content"], "and?");
        assert_eq!(m.len(), 6);
    }

    #[test]
    fn cache_breakpoints_reach_the_models_that_take_them() {
        for (model, takes) in [
            ("gpt-5.6", true),
            ("gpt-5.6-mini", true),
            ("openai/gpt-5.10", true),
            ("gpt-6", true),
            ("gpt-5.5", false),
            ("gpt-5", false),
            ("gpt-5-mini", false),
            ("gpt-4o", false),
            ("o3", false),
            ("my-deployment", false),
        ] {
            assert_eq!(takes_breakpoints(model), takes, "{model}");
        }
        // Anthropic's breakpoints (a Messages client's `cache_control`) and
        // OpenAI's own, on the parts and on a whole tool result.
        let body = r#"{"model":"g","messages":[
            {"role":"system","content":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}]},
            {"role":"user","content":[{"type":"text","text":"u","prompt_cache_breakpoint":{"mode":"explicit","ttl":"30m"}},{"type":"text","text":"v"}]},
            {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"r","cache_control":{"type":"ephemeral"}}]}]}"#;
        let sent = |model: &str| {
            crate::dialects::encode_for(&OpenAi, PROVIDER, model, body)
                .unwrap()
                .1
        };
        let v = sent("gpt-5.6");
        let m = &v["messages"];
        assert_eq!(
            m[0]["content"][0],
            json!({"type":"text","text":"s","prompt_cache_breakpoint":{"mode":"explicit","ttl":"12h"}})
        );
        assert_eq!(
            m[1]["content"][0]["prompt_cache_breakpoint"],
            json!({"mode":"explicit","ttl":"30m"})
        );
        assert!(m[1]["content"][1].get("prompt_cache_breakpoint").is_none());
        assert_eq!(
            m[3]["content"][0]["prompt_cache_breakpoint"],
            json!({"mode":"explicit"})
        );
        // Earlier models refuse the member and cache by themselves.
        let v = sent("gpt-4o");
        assert!(!v.to_string().contains("prompt_cache_breakpoint"), "{v}");
    }

    #[test]
    fn metadata_only_with_store_and_never_the_gateways_keys() {
        let m = r#""model":"g","messages":[{"role":"user","content":"hi"}]"#;
        let v = encoded(&format!(
            r#"{{{m},"metadata":{{"task_type":"code","team":"x"}}}}"#
        ));
        assert!(v.get("metadata").is_none(), "{v}");
        let v = encoded(&format!(
            r#"{{{m},"store":true,"metadata":{{"task_type":"code","team":"x"}}}}"#
        ));
        assert_eq!(v["metadata"], serde_json::json!({"team": "x"}));
        assert_eq!(v["store"], true);
        let v = encoded(&format!(
            r#"{{{m},"store":true,"metadata":{{"task_type":"code"}},"logprobs":true}}"#
        ));
        assert!(v.get("metadata").is_none(), "nothing left to send");
        assert_eq!(v["logprobs"], true);
        assert!(v.get("request_id").is_none());
    }

    #[test]
    fn encodes_with_vendor_model_and_stream_usage() {
        let (up, _) = crate::dialects::encode_for(
            &OpenAi,
            PROVIDER,
            "gpt-4o",
            r#"{"model":"g","messages":[{"role":"user","content":"hi"}],"stream":true,"request_id":"r","logprobs":true}"#,
        )
        .unwrap();
        assert_eq!(up.path, "/proxy/v1/chat/completions");
        assert!(up
            .headers
            .contains(&("authorization", "Bearer sk-test".into())));
        let v: Value = serde_json::from_slice(&up.body).unwrap();
        assert_eq!(v["model"], "gpt-4o");
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["logprobs"], true);
        assert!(
            v.get("request_id").is_none(),
            "our extension must not reach OpenAI"
        );
    }

    #[test]
    fn decodes_response_and_usage() {
        let mut origin = Origin {
            provider: "oa".into(),
            model: "gpt-4o".into(),
            ..Origin::default()
        };
        let body = br#"{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-2024","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":3}}}"#;
        let d = OpenAi
            .decode_native(Api::OpenAiChat, body, &mut origin)
            .unwrap();
        assert_eq!(
            d.usage,
            Some(Usage {
                prompt_tokens: 5,
                completion_tokens: 2,
                cached_tokens: Some(3),
                reasoning_tokens: None,
                cache_write_tokens: None,
            })
        );
        assert_eq!(origin.model, "gpt-4o-2024");
        let v: Value = d.chat_json(&origin);
        assert_eq!(v["provider"], "oa");
        assert!(OpenAi
            .decode_native(Api::OpenAiChat, b"not json", &mut origin)
            .is_err());
        assert_eq!(d.finish_reason, Some(FinishReason::Stop));
    }

    #[test]
    fn any_filtered_choice_marks_the_answer_filtered() {
        let body = br#"{"id":"c","model":"m","choices":[
            {"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"stop"},
            {"index":1,"message":{"role":"assistant","content":null},"finish_reason":"content_filter"}]}"#;
        let d = OpenAi
            .decode_native(Api::OpenAiChat, body, &mut Origin::default())
            .unwrap();
        assert_eq!(d.finish_reason, Some(FinishReason::ContentFilter));
        let one = br#"{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"length"}]}"#;
        let d = OpenAi
            .decode_native(Api::OpenAiChat, one, &mut Origin::default())
            .unwrap();
        assert_eq!(d.finish_reason, Some(FinishReason::Length));
    }

    #[test]
    fn a_client_of_another_api_gets_the_answer_decoded() {
        let body = br#"{"id":"chatcmpl-9","model":"deepseek-r1","choices":[{"index":0,
            "message":{"role":"assistant","content":"42","reasoning_content":"think",
              "tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
            "finish_reason":"tool_calls"}],
            "usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#;
        let mut origin = Origin::default();
        let d = OpenAi.decode_response(body, &mut origin).unwrap();
        let Answer::Decoded(c) = d.answer else {
            panic!("decoded")
        };
        assert_eq!(
            (origin.id.as_str(), origin.model.as_str()),
            ("chatcmpl-9", "deepseek-r1")
        );
        assert_eq!(c.content.as_deref(), Some("42"));
        assert_eq!(c.reasoning[0].text, "think");
        assert_eq!(c.tool_calls[0].function.arguments, r#"{"a":1}"#);
        assert_eq!(c.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(c.usage.unwrap().completion_tokens, 7);
        let empty = br#"{"id":"c","choices":[]}"#;
        assert!(OpenAi.decode_response(empty, &mut origin).is_err());
    }

    fn run_stream(input: &str, include_usage: bool) -> String {
        let origin = Origin {
            provider: "oa".into(),
            ..Origin::default()
        };
        crate::dialects::run_stream(&OpenAi, origin, &[input.as_bytes()], include_usage).1
    }

    pub(crate) const STREAM: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n\
data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n\
data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\n\
data: [DONE]\n\n";

    #[test]
    fn stream_drops_usage_unless_asked() {
        // Passed through, the vendor's `"usage":null` goes too.
        let out = run_stream(STREAM, false);
        assert!(!out.contains("usage"), "{out}");
        let out = run_stream(STREAM, true);
        assert!(out.contains("\"total_tokens\":2"), "{out}");
    }

    #[test]
    fn maps_errors() {
        let e = OpenAi.decode_error(400, br#"{"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#);
        assert_eq!(e.code, ErrorCode::ContextLengthExceeded);
        assert_eq!(e.param.as_deref(), Some("messages"));
        // Embeddings: the words only.
        let e = OpenAi.decode_error(400, br#"{"error":{"message":"This model's maximum context length is 8192 tokens, however you requested 9000 tokens (9000 in your prompt; 0 for the completion). Please reduce your prompt; or completion length.","type":"invalid_request_error","param":null,"code":null}}"#);
        assert_eq!(e.code, ErrorCode::ContextLengthExceeded);
        let e = OpenAi.decode_error(
            429,
            br#"{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}"#,
        );
        assert_eq!(e.code, ErrorCode::UpstreamRateLimit);
        assert_eq!(OpenAi.decode_error(401, b"{}").code, ErrorCode::AuthFailed);
    }
}
