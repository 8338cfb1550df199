//! AWS Bedrock Converse (`POST /model/{modelId}/converse` and
//! `/converse-stream`).
//!
//! Requests are signed with SigV4 by Envoy's own `aws_request_signing` filter,
//! placed after ours on the Bedrock cluster; with an `api_key` (a Bedrock API
//! key) we send it as a bearer token instead. The stream is the binary AWS
//! event stream ([`crate::formats::eventstream`]), one JSON payload per event.
//!
//! With `claude_invoke` a provider sends Claude models InvokeModel
//! instead, with Anthropic's own Messages body ([`super::bedrock_invoke`]):
//! a Messages client is then a pass-through pair for them
//! ([`Dialect::speaks`], `Provider::serves`), and the answers of both APIs
//! are told apart by their shape (a `type: message` body, `chunk` events).
//!
//! Reasoning: Claude's extended thinking through
//! `additionalModelRequestFields` (`thinking`); its `reasoningContent`
//! blocks (signed text, redacted bytes) decoded as reasoning and given back,
//! signed, first in the assistant turn. Prompt caching: a `cachePoint`
//! block after each marked system, message and tool block, for the models
//! that cache (Claude, Amazon Nova).
//!
//! Long on purpose (about 1110 lines of code, then its tests): one vendor's
//! wire types, encoder, decoders and error mapping are read against each
//! other and against the vendor's reference, so they stay in one file, as for
//! every dialect.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::anthropic::{self, Anthropic};
use super::bedrock_invoke::{self, Chunks};
use super::settings::{self, Key};
use super::stream::FramedStream;
use super::transport::{self, Operation};
use super::{
    encode_json, fallback_message, json_instruction, unparseable, DecodedResponse, Dialect, Events,
    StreamDecoder, Target, UpstreamRequest,
};
use crate::error::{ErrorCode, GatewayError};
use crate::formats::eventstream::{EventStreamDecoder, Message as Frame};
use crate::model::request::{
    CacheControl, ChatRequest, Content, ContentPart, Effort, Image, Message, Thinking, ToolChoice,
};
use crate::model::response::{Completion, FinishReason, Origin, ToolCallOut, Usage};
use crate::model::stream::{EventWriter, Reasoning};
use crate::model::Api;
use crate::provider::Provider;
use crate::wire::bedrock::*;
use encode::*;
use stream::*;

mod encode;
mod stream;

pub struct Bedrock;

pub const EVENT_STREAM: &str = "application/vnd.amazon.eventstream";

/// The bedrock dialect's settings.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Claude models through InvokeModel with Anthropic's own Messages
    /// body instead of Converse (Messages clients pass through).
    #[serde(default)]
    pub claude_invoke: bool,
}

impl crate::provider::DialectSettings for Settings {}

/// Whether `provider` has `claude_invoke`.
fn claude_invoke(provider: &Provider) -> bool {
    provider
        .settings::<Settings>()
        .is_some_and(|s| s.claude_invoke)
}

/// Whether this request goes to InvokeModel: a Claude model of a provider
/// with `claude_invoke`.
fn invokes(target: &Target) -> bool {
    claude_invoke(target.provider) && is_claude(target.model)
}

/// An InvokeModel request with this body.
fn invoke(target: &Target, stream: bool, body: Vec<u8>) -> Result<UpstreamRequest, GatewayError> {
    transport::request(Operation::Invoke { stream }, target, body)
}

/// The members of a Converse request that CountTokens takes
/// (`ConverseTokensRequest`); the others it refuses.
const CONVERSE_TOKENS: [&str; 4] = [
    "messages",
    "system",
    "toolConfig",
    "additionalModelRequestFields",
];

/// The foundation model CountTokens counts for, which must be one that
/// counts (Claude's): a Claude model's id, a cross-region inference
/// profile's (`us.anthropic.claude-...`) without its geography, which
/// CountTokens refuses; `None` for the other models and for profile ARNs.
fn count_model(model: &str) -> Option<&str> {
    if model.starts_with("arn:") {
        return (model.contains(":foundation-model/anthropic.claude")).then_some(model);
    }
    model
        .find("anthropic.claude")
        .and_then(|at| model.get(at..))
}

/// CountTokens' `input`: the generation's body, InvokeModel's (base64) or
/// Converse's (the members it counts).
fn count_input(
    req: &ChatRequest,
    target: &Target,
    counted: &Target,
) -> Result<Value, GatewayError> {
    if invokes(target) {
        let body = bedrock_invoke::encode_body(req, counted)?;
        let text = crate::formats::base64::encode_padded(&body);
        return Ok(json!({"invokeModel": {"body": text}}));
    }
    let body = Bedrock.encode_request(req, counted)?.body;
    let mut converse: serde_json::Map<String, Value> =
        serde_json::from_slice(&body).map_err(|e| unparseable("request", e))?;
    converse.retain(|key, _| CONVERSE_TOKENS.contains(&key.as_str()));
    Ok(json!({"converse": converse}))
}

/// A Converse answer decoded.
fn decode_converse(body: &[u8], origin: &mut Origin) -> Result<DecodedResponse, GatewayError> {
    let response: ConverseResponse =
        serde_json::from_slice(body).map_err(|e| unparseable("response", e))?;
    let mut text: Option<String> = None;
    let mut tool_calls = Vec::new();
    let mut reasoning = Vec::new();
    for block in response.output.message.content {
        if let Some(r) = &block.reasoning_content {
            for piece in r.pieces() {
                piece.push_to(&mut reasoning);
            }
        }
        if let Some(t) = block.text {
            text.get_or_insert_with(String::new).push_str(&t);
        }
        if let Some(call) = block.tool_use {
            tool_calls.push(ToolCallOut::new(
                call.tool_use_id,
                call.name,
                call.input.to_string(),
            ));
        }
    }
    if response.stop_reason == "guardrail_intervened" && prompt_blocked(&response.trace) {
        return Err(GatewayError::new(
            ErrorCode::ContentFiltered,
            text.unwrap_or_else(|| "the provider's guardrail blocked the prompt".into()),
        ));
    }
    let usage = response.usage.map(BedrockUsage::unified);
    origin.stop_sequence = response.additional_model_response_fields.stop_sequence;
    let completion = Completion {
        reasoning,
        content: text,
        tool_calls,
        finish_reason: Some(finish_reason(&response.stop_reason)),
        usage,
        more: Vec::new(),
    };
    Ok(DecodedResponse::decoded(completion))
}

impl Dialect for Bedrock {
    /// Anthropic's Messages API, through InvokeModel: only where the
    /// provider has `claude_invoke` ([`Dialect::serves`]).
    fn speaks(&self, api: Api) -> bool {
        api == Api::AnthropicMessages
    }

    fn serves(&self, api: Api, provider: &Provider) -> bool {
        self.speaks(api) && claude_invoke(provider)
    }

    fn settings_keys(&self) -> &'static [Key] {
        &[Key {
            name: "claude_invoke",
            elsewhere: "only the bedrock dialect has InvokeModel",
        }]
    }

    fn read_settings(
        &self,
        members: serde_json::Map<String, Value>,
        field: &str,
    ) -> Result<Option<Box<dyn crate::provider::DialectSettings>>, String> {
        settings::typed::<Settings>(members, field).map(|s| Some(Box::new(s) as _))
    }

    /// A Messages client's body as it came, for InvokeModel; `None` (the
    /// neutral request, for Converse) for models that are not Claude.
    fn encode_native(
        &self,
        _api: Api,
        client: &super::ClientRequest,
        req: &ChatRequest,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        invokes(target).then(|| {
            let body = (client.body)();
            anthropic::Unverifiable::of(req, &body)
                .and_then(|unverifiable| {
                    bedrock_invoke::invoke_body(
                        &body,
                        (client.header)("anthropic-beta"),
                        &unverifiable,
                    )
                })
                .and_then(|body| invoke(target, req.stream, body))
        })
    }

    fn encode_request(
        &self,
        req: &ChatRequest,
        target: &Target,
    ) -> Result<UpstreamRequest, GatewayError> {
        if invokes(target) {
            return bedrock_invoke::encode_body(req, target)
                .and_then(|body| invoke(target, req.stream, body));
        }
        super::single_choice(req)?;
        let claude = is_claude(target.model);
        let can = Abilities {
            cache: claude || target.model.contains("amazon.nova"),
            reasoning: claude,
        };
        let (thinking, nova_reasoning) = if is_nova_2(target.model) {
            (None, nova_reasoning(req)?)
        } else {
            (thinking(req, target.model)?, None)
        };
        let mut system = Vec::new();
        let mut turns: Vec<Turn> = Vec::with_capacity(req.messages.len());
        let mut history_has_tools = false;
        for (i, message) in req.messages.iter().enumerate() {
            match message {
                Message::System { content, .. } | Message::Developer { content, .. } => {
                    system.extend(text_blocks(content, can));
                }
                Message::User { content, .. } => {
                    crate::wire::push_turn(&mut turns, "user", user_blocks(content, i, can)?)
                }
                Message::Tool {
                    content,
                    tool_call_id,
                    cache_control,
                    is_error,
                } => {
                    history_has_tools = true;
                    // Its text and images as blocks of their own (cache
                    // points go after the result, not inside it).
                    let no_cache = Abilities {
                        cache: false,
                        ..can
                    };
                    let mut result = user_blocks(content, i, no_cache)?;
                    if result.is_empty() {
                        result.push(Block::Text(Cow::Borrowed("")));
                    }
                    let mut blocks = vec![Block::ToolResult {
                        tool_use_id: tool_call_id,
                        content: result,
                        status: is_error.then_some("error"),
                    }];
                    push_cache_point(&mut blocks, cache_control.as_ref(), can);
                    crate::wire::push_turn(&mut turns, "user", blocks);
                }
                Message::Assistant {
                    content,
                    reasoning,
                    tool_calls,
                    ..
                } => {
                    // Claude wants its reasoning back first, as it came.
                    let mut blocks: Vec<Block> = reasoning
                        .iter()
                        .filter(|_| can.reasoning)
                        .filter_map(Block::reasoning)
                        .collect();
                    if let Some(content) = content {
                        blocks.extend(text_blocks(content, can));
                    }
                    for (j, call) in tool_calls.iter().enumerate() {
                        history_has_tools = true;
                        let args = call.function.arguments.trim();
                        let input = match serde_json::from_str::<Value>(args) {
                            _ if args.is_empty() => json!({}),
                            Ok(v @ Value::Object(_)) => v,
                            _ => {
                                return Err(GatewayError::invalid(
                                    format!("messages[{i}].tool_calls[{j}].function.arguments"),
                                    "tool call arguments must be a JSON object",
                                ))
                            }
                        };
                        blocks.push(Block::ToolUse {
                            tool_use_id: &call.id,
                            name: &call.function.name,
                            input,
                        });
                    }
                    crate::wire::push_turn(&mut turns, "assistant", blocks);
                }
            }
        }
        // Converse has no JSON mode: ask for JSON in the system prompt.
        if let Some(instruction) = json_instruction(req.response_format.as_ref()) {
            system.push(Block::Text(Cow::Owned(instruction)));
        }
        let sampling = if claude {
            anthropic::claude_sampling(req, thinking.is_some())
        } else {
            anthropic::Sampling {
                temperature: req.temperature.map(|t| t.min(1.0)),
                top_p: req.top_p,
                top_k: None,
            }
        };
        let request = Request {
            messages: turns,
            system,
            inference_config: InferenceConfig {
                // Thinking's tokens and the answer's, as for Claude anywhere.
                max_tokens: match thinking {
                    Some(_) => Some(anthropic::claude_max_tokens(
                        req.max_output_tokens(),
                        thinking,
                        target,
                    )),
                    None => req.max_output_tokens(),
                },
                temperature: sampling.temperature,
                top_p: sampling.top_p,
                stop_sequences: &req.stop,
            },
            tool_config: tool_config(req, history_has_tools, can),
            additional_model_request_fields: claude_fields(thinking, sampling.top_k)
                .or(nova_reasoning),
            additional_model_response_field_paths: if claude && !req.stop.is_empty() {
                &["/stop_sequence"]
            } else {
                &[]
            },
        };
        let body = encode_json(req, &request)?;
        transport::request(Operation::Generate { stream: req.stream }, target, body)
    }

    fn decode_response(
        &self,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        if bedrock_invoke::is_message(body) {
            return Anthropic.decode_response(body, origin);
        }
        decode_converse(body, origin)
    }

    /// InvokeModel's message as it came (read for metering); a Converse
    /// answer (a model that is not Claude) decoded.
    fn decode_native(
        &self,
        api: Api,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        if bedrock_invoke::is_message(body) {
            return Anthropic.decode_native(api, body, origin);
        }
        decode_converse(body, origin)
    }

    fn embedder(&self) -> Option<&dyn crate::dialects::embed::Embedder> {
        Some(&crate::dialects::embed::bedrock::Bedrock)
    }

    fn stream_decoder(&self, writer: EventWriter) -> Box<dyn StreamDecoder> {
        Box::new(FramedStream::<EventStreamDecoder, _>::new(
            writer,
            BedrockEvents::default(),
        ))
    }

    fn is_stream_content_type(&self, content_type: &str) -> bool {
        content_type.starts_with(EVENT_STREAM)
    }

    fn counter(&self) -> Option<&dyn super::count::Counter> {
        Some(self)
    }

    fn decode_error(&self, status: u16, body: &[u8]) -> GatewayError {
        match serde_json::from_slice::<AwsError>(body) {
            Ok(e) => {
                let message = e.message.unwrap_or_else(|| fallback_message(status, b""));
                let kind = e.kind.as_deref().map(short_type).unwrap_or_default();
                GatewayError::new(error_code(kind, status, &message), message)
            }
            Err(_) => GatewayError::new(error_code("", status, ""), fallback_message(status, body)),
        }
    }
}

impl super::count::Counter for Bedrock {
    /// `CountTokens` (`POST /model/{modelId}/count-tokens`) for a Claude
    /// model: `{"input": {"converse": ...}}`, or `{"input": {"invokeModel":
    /// {"body": ...}}}` where the provider has `claude_invoke`.
    fn encode_count(
        &self,
        req: &ChatRequest,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        let counted = Target {
            provider: target.provider,
            model: count_model(target.model)?,
        };
        Some(count_input(req, target, &counted).and_then(|input| {
            let body = serde_json::to_vec(&json!({ "input": input }))
                .map_err(|e| unparseable("request", e))?;
            transport::request(Operation::CountTokens, &counted, body)
        }))
    }

    /// `{"inputTokens": N}`.
    fn decode_count(&self, body: &[u8]) -> Result<u64, GatewayError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct CountTokensResponse {
            input_tokens: u64,
        }
        serde_json::from_slice::<CountTokensResponse>(body)
            .map(|r| r.input_tokens)
            .map_err(|e| unparseable("token count", e))
    }
}

pub fn finish_reason(stop_reason: &str) -> FinishReason {
    match stop_reason {
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "guardrail_intervened" | "content_filtered" => FinishReason::ContentFilter,
        // end_turn, stop_sequence and anything new.
        _ => FinishReason::Stop,
    }
}

/// True when a guardrail trace says the INPUT was blocked (not the answer).
fn prompt_blocked(trace: &Value) -> bool {
    fn blocked(v: &Value) -> bool {
        match v {
            Value::Object(m) => m
                .iter()
                .any(|(k, v)| (k == "action" && v == "BLOCKED") || blocked(v)),
            Value::Array(a) => a.iter().any(blocked),
            _ => false,
        }
    }
    trace
        .get("guardrail")
        .and_then(|g| g.get("inputAssessment"))
        .is_some_and(blocked)
}

/// `ThrottlingException:http://internal...` or `com.amazon...#ThrottlingException` → `ThrottlingException`.
fn short_type(kind: &str) -> &str {
    let kind = kind.split(':').next().unwrap_or(kind);
    kind.rsplit('#').next().unwrap_or(kind)
}

/// The unified code for an AWS error type (HTTP `x-amzn-errortype`, body
/// `__type`, or the stream's `:exception-type`, which starts lower case).
pub fn error_code(kind: &str, status: u16, message: &str) -> ErrorCode {
    let lower = message.to_ascii_lowercase();
    // Without a type (it travels in a header we do not see), the status says
    // which exception Bedrock documents for it.
    let kind = match (kind, status) {
        ("", 400) if lower.contains("quota") => "ServiceQuotaExceededException",
        ("", 400) => "ValidationException",
        ("", 424) => "ModelErrorException",
        _ => kind,
    };
    match kind.to_ascii_lowercase().as_str() {
        "throttlingexception" | "servicequotaexceededexception" => ErrorCode::UpstreamRateLimit,
        "validationexception"
            if [
                "too long",
                "too many input tokens",
                "context window",
                "input length",
            ]
            .iter()
            .any(|s| lower.contains(s)) =>
        {
            ErrorCode::ContextLengthExceeded
        }
        "validationexception" => ErrorCode::InvalidRequest,
        "accessdeniedexception" => ErrorCode::PermissionDenied,
        "unrecognizedclientexception"
        | "invalidsignatureexception"
        | "incompletesignatureexception"
        | "expiredtokenexception"
        | "missingauthenticationtokenexception" => ErrorCode::AuthFailed,
        "resourcenotfoundexception" => ErrorCode::ModelNotFound,
        "modeltimeoutexception" => ErrorCode::UpstreamTimeout,
        "serviceunavailableexception" | "modelnotreadyexception" => ErrorCode::UpstreamBusy,
        "internalserverexception" | "modelstreamerrorexception" | "modelerrorexception" => {
            ErrorCode::UpstreamError
        }
        // No type: AWS answers a bad key or signature with a bare 403.
        _ if status == 403
            && ["signature", "security token", "authentication token"]
                .iter()
                .any(|s| lower.contains(s)) =>
        {
            ErrorCode::AuthFailed
        }
        _ => ErrorCode::from_status(status),
    }
}

impl ReasoningOut {
    fn pieces(&self) -> impl Iterator<Item = Reasoning<'_>> {
        let text = self.reasoning_text.as_ref();
        text.map(|t| Reasoning::Text(&t.text))
            .into_iter()
            .chain(
                text.and_then(|t| t.signature.as_deref())
                    .map(Reasoning::Signature),
            )
            .chain(self.redacted_content.as_deref().map(Reasoning::Redacted))
    }
}

impl BedrockUsage {
    /// Bedrock counts cached input apart; OpenAI's prompt_tokens includes it.
    fn unified(self) -> Usage {
        let cached = self.cache_read_input_tokens;
        Usage {
            prompt_tokens: self.input_tokens
                + cached.unwrap_or(0)
                + self.cache_write_input_tokens.unwrap_or(0),
            completion_tokens: self.output_tokens,
            cached_tokens: cached,
            reasoning_tokens: None,
            cache_write_tokens: self.cache_write_input_tokens,
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::formats::eventstream::encode as frame;
    use crate::formats::url::encode_segment;
    use crate::model::surface_state::SurfaceState;

    fn encode_with(body: &str, extra: &str) -> (UpstreamRequest, Value) {
        encode_for(body, extra, "anthropic.claude-3-haiku-20240307-v1:0")
    }

    fn encode_for(body: &str, extra: &str, model: &str) -> (UpstreamRequest, Value) {
        let provider = format!(r#"{{"dialect":"bedrock"{extra}}}"#);
        crate::dialects::encode_for(&Bedrock, &provider, model, body).unwrap()
    }

    fn encode(body: &str) -> Value {
        encode_with(body, "").1
    }

    #[test]
    fn a_tool_results_text_and_images_are_blocks_of_their_own() {
        let v = encode(
            r#"{"model":"g","messages":[{"role":"user","content":"look"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"shot","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"one"},{"type":"image_url","image_url":{"url":"data:image/jpg;base64,QUJD"}},{"type":"text","text":"two"}]}]}"#,
        );
        assert_eq!(
            v["messages"][2]["content"][0]["toolResult"]["content"],
            json!([{"text": "one"}, {"image": {"format": "jpeg", "source": {"bytes": "QUJD"}}}, {"text": "two"}])
        );
    }

    #[test]
    fn encodes_path_headers_and_inference_config() {
        let (up, v) = encode_with(
            r#"{"model":"g","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},
                {"role":"assistant","content":"hello"},{"role":"user","content":"more"}],
                "temperature":1.5,"top_p":0.5,"stop":["X"],"max_tokens":20,"seed":3,"user":"u"}"#,
            "",
        );
        assert_eq!(
            up.path,
            "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
        );
        assert!(
            !up.headers.iter().any(|(n, _)| *n == "authorization"),
            "SigV4 is Envoy's job"
        );
        assert_eq!(
            v,
            json!({
                "messages":[
                    {"role":"user","content":[{"text":"hi"}]},
                    {"role":"assistant","content":[{"text":"hello"}]},
                    {"role":"user","content":[{"text":"more"}]}],
                "system":[{"text":"be brief"}],
                "inferenceConfig":{"maxTokens":20,"temperature":1.0,"stopSequences":["X"]},
                "additionalModelResponseFieldPaths":["/stop_sequence"]
            })
        );
    }

    #[test]
    fn claude_gets_temperature_or_top_p_never_both() {
        let v = encode(
            r#"{"model":"g","messages":[{"role":"user","content":"hi"}],"temperature":0.3,"top_p":0.5}"#,
        );
        assert_eq!(v["inferenceConfig"], json!({"temperature":0.3}));
        let v = encode(r#"{"model":"g","messages":[{"role":"user","content":"hi"}],"top_p":0.5}"#);
        assert_eq!(v["inferenceConfig"], json!({"topP":0.5}));
        let (_, v) = encode_for(
            r#"{"model":"g","messages":[{"role":"user","content":"hi"}],"temperature":0.3,"top_p":0.5}"#,
            "",
            "meta.llama3-70b-instruct-v1:0",
        );
        assert_eq!(
            v["inferenceConfig"],
            json!({"temperature":0.3,"topP":0.5}),
            "not Claude: both"
        );
    }

    #[test]
    fn tool_history_without_tools_still_gets_a_tool_config() {
        let v = encode(
            r#"{"model":"g","messages":[{"role":"user","content":"weather?"},
                {"role":"assistant","content":null,"tool_calls":[
                    {"id":"t1","type":"function","function":{"name":"get_weather","arguments":"{}"}},
                    {"id":"t2","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"t1","content":"sunny"},
                {"role":"tool","tool_call_id":"t2","content":"rain"},
                {"role":"user","content":"thanks"}]}"#,
        );
        assert_eq!(
            v["toolConfig"],
            json!({"tools":[{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object"}}}}]})
        );
        let v = encode(r#"{"model":"g","messages":[{"role":"user","content":"hi"}]}"#);
        assert!(v.get("toolConfig").is_none());
    }

    #[test]
    fn stream_path_and_bearer_api_key() {
        let (up, v) = encode_with(
            r#"{"model":"g","messages":[{"role":"user","content":"hi"}],"stream":true}"#,
            r#","api_key":"br-key","base_path":"/proxy""#,
        );
        assert_eq!(
            up.path,
            "/proxy/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"
        );
        assert!(up
            .headers
            .contains(&("authorization", "Bearer br-key".into())));
        assert!(v.get("inferenceConfig").is_none() && v.get("stream").is_none());
        assert_eq!(
            encode_segment("arn:aws:bedrock:us-east-1:1:inference-profile/x"),
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx"
        );
    }

    #[test]
    fn encodes_tools_images_and_results() {
        let v = encode(
            r#"{"model":"g","messages":[
                {"role":"user","content":[{"type":"text","text":"weather?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD"}}]},
                {"role":"assistant","content":null,"tool_calls":[
                    {"id":"t1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
                    {"id":"t2","type":"function","function":{"name":"get_time","arguments":""}}]},
                {"role":"tool","tool_call_id":"t1","content":"sunny"},
                {"role":"tool","tool_call_id":"t2","content":"noon"}],
              "tools":[{"type":"function","function":{"name":"get_weather","description":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
                       {"type":"function","function":{"name":"get_time"}}],
              "tool_choice":"required"}"#,
        );
        let msgs = v["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(
            msgs[0]["content"][1],
            json!({"image":{"format":"png","source":{"bytes":"QUJD"}}})
        );
        assert_eq!(
            msgs[1]["content"],
            json!([{"toolUse":{"toolUseId":"t1","name":"get_weather","input":{"city":"Paris"}}},
                   {"toolUse":{"toolUseId":"t2","name":"get_time","input":{}}}])
        );
        assert_eq!(
            msgs[2]["content"],
            json!([{"toolResult":{"toolUseId":"t1","content":[{"text":"sunny"}]}},
                   {"toolResult":{"toolUseId":"t2","content":[{"text":"noon"}]}}])
        );
        assert_eq!(
            v["toolConfig"]["tools"][0],
            json!({"toolSpec":{"name":"get_weather","description":"w",
                   "inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}}}}}})
        );
        assert_eq!(
            v["toolConfig"]["tools"][1]["toolSpec"]["inputSchema"]["json"],
            json!({"type":"object","properties":{}})
        );
        assert_eq!(v["toolConfig"]["toolChoice"], json!({"any":{}}));
    }

    #[test]
    fn tool_choice_variants_and_json_mode() {
        let base = r#"{"model":"g","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":TC}"#;
        let v = encode(&base.replace("TC", r#""auto""#));
        assert!(v["toolConfig"].get("toolChoice").is_none());
        let v = encode(&base.replace("TC", r#""none""#));
        assert!(v.get("toolConfig").is_none());
        let v = encode(&base.replace("TC", r#"{"type":"function","function":{"name":"f"}}"#));
        assert_eq!(v["toolConfig"]["toolChoice"], json!({"tool":{"name":"f"}}));
        let v = encode(
            r#"{"model":"g","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}"#,
        );
        assert!(v["system"][0]["text"].as_str().unwrap().contains("JSON"));
        assert!(v.get("response_format").is_none());
    }

    #[test]
    fn rejects_what_converse_cannot_take() {
        for (body, param) in [
            (
                r#"{"model":"g","n":2,"messages":[{"role":"user","content":"x"}]}"#,
                "n",
            ),
            (
                r#"{"model":"g","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}"#,
                "messages[0].content[0].image_url.url",
            ),
            (
                r#"{"model":"g","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,QQ=="}}]}]}"#,
                "messages[0].content[0].image_url.url",
            ),
        ] {
            let e = crate::dialects::encode_for(&Bedrock, r#"{"dialect":"bedrock"}"#, "m", body)
                .unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param));
        }
    }

    const CLAUDE_4: &str = "anthropic.claude-sonnet-4-20250514-v1:0";

    #[test]
    fn claude_thinking_budgets_and_refusals() {
        let user = r#""messages":[{"role":"user","content":"x"}]"#;
        let thinking = |fields: &str| {
            let body = format!(r#"{{"model":"g",{user},{fields}}}"#);
            crate::dialects::encode_for(&Bedrock, r#"{"dialect":"bedrock"}"#, CLAUDE_4, &body)
                .map(|(_, v)| v)
        };
        for (effort, budget) in [
            ("minimal", 1024),
            ("low", 2048),
            ("medium", 8192),
            ("high", 16384),
        ] {
            let v = thinking(&format!(r#""reasoning_effort":"{effort}""#)).unwrap();
            assert_eq!(
                v["additionalModelRequestFields"],
                json!({"thinking": {"type": "enabled", "budget_tokens": budget}})
            );
            assert_eq!(v["inferenceConfig"]["maxTokens"], budget + 4096);
        }
        let v = thinking(r#""reasoning_effort":"none","temperature":0.2"#).unwrap();
        assert!(v.get("additionalModelRequestFields").is_none());
        assert_eq!(v["inferenceConfig"]["temperature"], 0.2);
        // Claude 4.6 thinks adaptively, at the effort asked for.
        let body = format!(r#"{{"model":"g",{user},"reasoning_effort":"max"}}"#);
        let v = crate::dialects::encode_for(
            &Bedrock,
            r#"{"dialect":"bedrock"}"#,
            "anthropic.claude-opus-4-6-v1",
            &body,
        )
        .unwrap()
        .1;
        assert_eq!(
            v["additionalModelRequestFields"],
            json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}})
        );
        assert_eq!(v["inferenceConfig"]["maxTokens"], 32000 + 4096);
        // Claude's top_k has no Converse field: it goes beside thinking's
        // place, and not with thinking on (Claude refuses it then).
        let v = thinking(r#""top_k":20"#).unwrap();
        assert_eq!(v["additionalModelRequestFields"], json!({"top_k": 20}));
        let v = thinking(r#""top_k":20,"reasoning_effort":"low""#).unwrap();
        assert_eq!(
            v["additionalModelRequestFields"],
            json!({"thinking": {"type": "enabled", "budget_tokens": 2048}})
        );
        let v =
            thinking(r#""reasoning":{"max_tokens":2000},"max_tokens":3000,"top_p":0.97"#).unwrap();
        assert_eq!(
            v["additionalModelRequestFields"]["thinking"]["budget_tokens"],
            2000
        );
        assert_eq!(
            v["inferenceConfig"],
            json!({"maxTokens": 3000, "topP": 0.97})
        );
        // As on Anthropic's API: what thinking refuses is dropped, an
        // effort's budget lowered below the output limit.
        let v =
            thinking(r#""reasoning_effort":"high","max_tokens":16384,"temperature":1,"top_p":0.5"#)
                .unwrap();
        assert_eq!(
            v["additionalModelRequestFields"]["thinking"]["budget_tokens"],
            16383
        );
        assert_eq!(v["inferenceConfig"], json!({"maxTokens": 16384}));
        for (fields, param) in [
            (
                r#""reasoning_effort":"low","max_completion_tokens":1000"#,
                "max_completion_tokens",
            ),
            (
                r#""reasoning":{"max_tokens":2000},"max_tokens":2000"#,
                "max_tokens",
            ),
            (r#""reasoning":{"max_tokens":500}"#, "reasoning.max_tokens"),
            (
                r#""reasoning_effort":"low","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required""#,
                "tool_choice",
            ),
        ] {
            let e = thinking(fields).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{fields}: {}", e.message);
        }
        // Nova 2: an effort level.
        let body =
            format!(r#"{{"model":"g",{user},"reasoning_effort":"minimal","temperature":0.3}}"#);
        let (_, v) = encode_for(&body, "", "us.amazon.nova-2-lite-v1:0");
        assert_eq!(
            v["additionalModelRequestFields"],
            json!({"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "low"}})
        );
        assert_eq!(v["inferenceConfig"], json!({"temperature": 0.3}));
        // A budget alone: the effort it amounts to.
        let body = format!(r#"{{"model":"g",{user},"reasoning":{{"max_tokens":9000}}}}"#);
        let (_, v) = encode_for(&body, "", "amazon.nova-2-lite-v1:0");
        assert_eq!(
            v["additionalModelRequestFields"]["reasoningConfig"]["maxReasoningEffort"],
            "high"
        );
        // Models other than Claude and Nova 2 take no reasoning controls through Converse.
        let body = format!(r#"{{"model":"g",{user},"reasoning_effort":"low"}}"#);
        let e = crate::dialects::encode_for(
            &Bedrock,
            r#"{"dialect":"bedrock"}"#,
            "meta.llama3-70b-instruct-v1:0",
            &body,
        )
        .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("reasoning_effort"));
    }

    #[test]
    fn reasoning_history_and_cache_points_only_where_the_model_takes_them() {
        let body = r#"{"model":"g","messages":[
            {"role":"system","content":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]},
            {"role":"user","content":"q"},
            {"role":"assistant","content":"a","reasoning_details":[
                {"type":"reasoning.text","text":"unsigned"},
                {"type":"reasoning.text","text":"t","signature":"sig"},
                {"type":"reasoning.encrypted","data":"enc"}]}]}"#;
        let (_, claude) = encode_for(body, "", CLAUDE_4);
        assert_eq!(
            claude["messages"][1]["content"],
            json!([
                {"reasoningContent": {"reasoningText": {"text": "t", "signature": "sig"}}},
                {"reasoningContent": {"redactedContent": "enc"}},
                {"text": "a"}])
        );
        assert_eq!(
            claude["system"],
            json!([{"text": "s"}, {"cachePoint": {"type": "default"}}])
        );
        let (_, nova) = encode_for(body, "", "amazon.nova-pro-v1:0");
        assert_eq!(nova["messages"][1]["content"], json!([{"text": "a"}]));
        assert_eq!(
            nova["system"][1],
            json!({"cachePoint": {"type": "default"}})
        );
        let (_, llama) = encode_for(body, "", "meta.llama3-70b-instruct-v1:0");
        assert_eq!(llama["system"], json!([{"text": "s"}]));
    }

    #[test]
    fn decodes_reasoning() {
        let mut o = origin();
        let body = br#"{"output":{"message":{"role":"assistant","content":[
            {"reasoningContent":{"reasoningText":{"text":"hm","signature":"s"}}},
            {"reasoningContent":{"redactedContent":"enc"}},{"text":"ok"}]}},"stopReason":"end_turn"}"#;
        let DecodedResponse {
            answer: crate::model::response::Answer::Decoded(c),
            ..
        } = Bedrock.decode_response(body, &mut o).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            c.reasoning,
            vec![
                Thinking {
                    text: "hm".into(),
                    signature: Some("s".into()),
                    redacted: None
                },
                Thinking {
                    redacted: Some("enc".into()),
                    ..Thinking::default()
                }
            ]
        );
        assert_eq!(c.content.as_deref(), Some("ok"));
    }

    fn origin() -> Origin {
        Origin {
            id: "chatcmpl-r".into(),
            provider: "br".into(),
            model: "m".into(),
            ..Origin::default()
        }
    }

    #[test]
    fn decodes_response_with_parallel_tool_calls() {
        let body = br#"{"output":{"message":{"role":"assistant","content":[
            {"text":"Let me check."},
            {"toolUse":{"toolUseId":"tooluse_1","name":"get_weather","input":{"city":"Paris"}}},
            {"toolUse":{"toolUseId":"tooluse_2","name":"get_time","input":{}}}]}},
            "stopReason":"tool_use",
            "usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15,"cacheReadInputTokens":4,"cacheWriteInputTokens":1},
            "metrics":{"latencyMs":100}}"#;
        let mut origin = origin();
        let d = Bedrock.decode_response(body, &mut origin).unwrap();
        let v: Value = d.chat_json(&origin);
        assert_eq!(v["id"], "chatcmpl-r");
        assert_eq!(v["model"], "m");
        assert_eq!(v["choices"][0]["message"]["content"], "Let me check.");
        let calls = &v["choices"][0]["message"]["tool_calls"];
        assert_eq!(calls[0]["id"], "tooluse_1");
        assert_eq!(calls[0]["function"]["arguments"], "{\"city\":\"Paris\"}");
        assert_eq!(calls[1]["function"]["name"], "get_time");
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            v["usage"],
            json!({"prompt_tokens":15,"completion_tokens":5,"total_tokens":20,"prompt_tokens_details":{"cached_tokens":4,"cache_write_tokens":1}})
        );
    }

    #[test]
    fn finish_reasons_and_filters() {
        for (b, o) in [
            ("end_turn", "stop"),
            ("stop_sequence", "stop"),
            ("max_tokens", "length"),
            ("tool_use", "tool_calls"),
            ("guardrail_intervened", "content_filter"),
            ("content_filtered", "content_filter"),
        ] {
            assert_eq!(finish_reason(b).as_str(), o);
        }
        // A guardrail that blocked the answer: 200 with content_filter.
        let filtered = br#"{"output":{"message":{"role":"assistant","content":[{"text":"Sorry."}]}},"stopReason":"guardrail_intervened",
            "usage":{"inputTokens":3,"outputTokens":1},
            "trace":{"guardrail":{"outputAssessments":{"0":[{"contentPolicy":{"filters":[{"type":"VIOLENCE","action":"BLOCKED"}]}}]}}}}"#;
        let d = Bedrock.decode_response(filtered, &mut origin()).unwrap();
        let v: Value = d.chat_json(&origin());
        assert_eq!(v["choices"][0]["finish_reason"], "content_filter");
        // A guardrail that blocked the prompt: 400 CONTENT_FILTERED.
        let blocked = br#"{"output":{"message":{"role":"assistant","content":[{"text":"Sorry, I cannot help with that."}]}},"stopReason":"guardrail_intervened",
            "usage":{"inputTokens":3,"outputTokens":0},
            "trace":{"guardrail":{"inputAssessment":{"gr1":{"contentPolicy":{"filters":[{"type":"VIOLENCE","confidence":"HIGH","action":"BLOCKED"}]}}}}}}"#;
        let e = Bedrock.decode_response(blocked, &mut origin()).unwrap_err();
        assert_eq!(e.code, ErrorCode::ContentFiltered);
        assert_eq!(e.message, "Sorry, I cannot help with that.");
        assert!(Bedrock.decode_response(b"{}", &mut origin()).is_err());
    }

    #[test]
    fn maps_errors() {
        let cases = [
            (
                400,
                "ValidationException",
                "Malformed input request",
                ErrorCode::InvalidRequest,
            ),
            (
                400,
                "ValidationException",
                "Input is too long for requested model.",
                ErrorCode::ContextLengthExceeded,
            ),
            (
                403,
                "AccessDeniedException",
                "You don't have access to the model with the specified model ID.",
                ErrorCode::PermissionDenied,
            ),
            (
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
                ErrorCode::AuthFailed,
            ),
            (
                404,
                "ResourceNotFoundException",
                "Model not found",
                ErrorCode::ModelNotFound,
            ),
            (
                408,
                "ModelTimeoutException",
                "timeout",
                ErrorCode::UpstreamTimeout,
            ),
            (
                429,
                "ThrottlingException",
                "Too many requests, please wait before trying again.",
                ErrorCode::UpstreamRateLimit,
            ),
            (
                429,
                "ModelNotReadyException",
                "not ready",
                ErrorCode::UpstreamBusy,
            ),
            (
                500,
                "InternalServerException",
                "boom",
                ErrorCode::UpstreamError,
            ),
            (
                503,
                "ServiceUnavailableException",
                "unavailable",
                ErrorCode::UpstreamBusy,
            ),
        ];
        for (status, kind, message, code) in cases {
            let body = format!(r#"{{"__type":"com.amazon.bedrock#{kind}","message":"{message}"}}"#);
            let e = Bedrock.decode_error(status, body.as_bytes());
            assert_eq!((e.code, e.message.as_str()), (code, message), "{kind}");
        }
        // The usual body has only the message (the type is in x-amzn-errortype).
        let e = Bedrock.decode_error(
            400,
            br#"{"message":"Input is too long for requested model."}"#,
        );
        assert_eq!(e.code, ErrorCode::ContextLengthExceeded);
        let e = Bedrock.decode_error(403, br#"{"message":"The request signature we calculated does not match the signature you provided."}"#);
        assert_eq!(e.code, ErrorCode::AuthFailed);
        assert_eq!(
            Bedrock
                .decode_error(403, br#"{"Message":"User is not authorized"}"#)
                .code,
            ErrorCode::PermissionDenied
        );
        assert_eq!(
            Bedrock
                .decode_error(429, br#"{"message":"slow down"}"#)
                .code,
            ErrorCode::UpstreamRateLimit
        );
        for (status, message, code) in [
            (424, "model failed", ErrorCode::UpstreamError),
            (408, "Model has timed out", ErrorCode::UpstreamTimeout),
            (
                400,
                "Your request exceeds the service quota for your account.",
                ErrorCode::UpstreamRateLimit,
            ),
        ] {
            let body = format!(r#"{{"message":"{message}"}}"#);
            assert_eq!(
                Bedrock.decode_error(status, body.as_bytes()).code,
                code,
                "{status}"
            );
        }
        assert_eq!(
            short_type("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            "ThrottlingException"
        );
    }

    fn event(kind: &str, payload: Value) -> Vec<u8> {
        frame(
            &[
                (":event-type", kind),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload.to_string().as_bytes(),
        )
    }

    /// A tool-call stream as Bedrock sends it (payloads carry a `p` padding field).
    pub(crate) fn tool_stream() -> Vec<u8> {
        [
            event("messageStart", json!({"p":"abc","role":"assistant"})),
            event("contentBlockDelta", json!({"contentBlockIndex":0,"delta":{"text":"Let me \u{e9}\u{1f30d}"},"p":"ab"})),
            event("contentBlockStop", json!({"contentBlockIndex":0})),
            event("contentBlockStart", json!({"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather"}}})),
            event("contentBlockDelta", json!({"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"city\": "}}})),
            event("contentBlockDelta", json!({"contentBlockIndex":1,"delta":{"toolUse":{"input":"\"Paris\"}"}}})),
            event("contentBlockStop", json!({"contentBlockIndex":1})),
            event("contentBlockStart", json!({"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"tooluse_2","name":"get_time"}}})),
            event("contentBlockDelta", json!({"contentBlockIndex":2,"delta":{"toolUse":{"input":"{}"}}})),
            event("contentBlockStop", json!({"contentBlockIndex":2})),
            event("messageStop", json!({"stopReason":"tool_use"})),
            event("metadata", json!({"usage":{"inputTokens":12,"outputTokens":30,"totalTokens":42},"metrics":{"latencyMs":5}})),
        ]
        .concat()
    }

    fn run(chunks: &[&[u8]], include_usage: bool) -> (Vec<Value>, String) {
        crate::dialects::run_stream(&Bedrock, origin(), chunks, include_usage)
    }

    #[test]
    fn claude_says_which_stop_sequence_matched() {
        let body = r#"{"model":"g","messages":[{"role":"user","content":"x"}],"stop":["END"]}"#;
        let (_, v) = encode_for(body, "", CLAUDE_4);
        assert_eq!(
            v["additionalModelResponseFieldPaths"],
            json!(["/stop_sequence"])
        );
        // Only Claude's answer has it; no stop sequences, nothing to ask.
        let (_, v) = encode_for(body, "", "amazon.nova-pro-v1:0");
        assert!(v.get("additionalModelResponseFieldPaths").is_none());
        let (_, v) = encode_for(&body.replace(r#","stop":["END"]"#, ""), "", CLAUDE_4);
        assert!(v.get("additionalModelResponseFieldPaths").is_none());
        // The answer's `additionalModelResponseFields`, JSON and stream, as
        // a Messages client gets it (Anthropic's `stop_sequence`).
        let answer = br#"{"output":{"message":{"role":"assistant","content":[{"text":"Hi"}]}},"stopReason":"stop_sequence","additionalModelResponseFields":{"stop_sequence":"END"}}"#;
        let mut origin = origin();
        let d = Bedrock.decode_response(answer, &mut origin).unwrap();
        assert_eq!(origin.stop_sequence.as_deref(), Some("END"));
        let message: Value = serde_json::from_slice(
            &crate::surfaces::surface(Api::AnthropicMessages).render_answer(
                d.answer,
                &origin,
                &SurfaceState::default(),
            ),
        )
        .unwrap();
        assert_eq!(
            (&message["stop_reason"], &message["stop_sequence"]),
            (&json!("stop_sequence"), &json!("END"))
        );
        let stream = [
            event("messageStart", json!({"role":"assistant"})),
            event("contentBlockDelta", json!({"contentBlockIndex":0,"delta":{"text":"Hi"}})),
            event("contentBlockStop", json!({"contentBlockIndex":0})),
            event("messageStop", json!({"stopReason":"stop_sequence","additionalModelResponseFields":{"stop_sequence":"END"}})),
            event("metadata", json!({"usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}})),
        ]
        .concat();
        let writer = crate::surfaces::stream_writer(
            Api::AnthropicMessages,
            false,
            Origin::default(),
            "rid".into(),
            true,
            &SurfaceState::default(),
        );
        let mut d = Bedrock.stream_decoder(writer);
        let mut out = Vec::new();
        d.feed(&stream, &mut out);
        d.finish(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(r#""delta":{"stop_reason":"stop_sequence","stop_sequence":"END"}"#),
            "{text}"
        );
    }

    #[test]
    fn stream_translates_to_unified_chunks() {
        assert!(Bedrock.is_stream_content_type(EVENT_STREAM));
        assert!(!Bedrock.is_stream_content_type("text/event-stream"));
        let bytes = tool_stream();
        let (ev, text) = run(&[&bytes], true);
        assert!(text.ends_with("data: [DONE]\n\n"));
        assert!(ev
            .iter()
            .all(|e| e["id"] == "chatcmpl-r" && e["model"] == "m"));
        assert_eq!(
            ev[0]["choices"][0]["delta"],
            json!({"role":"assistant","content":"","refusal":null})
        );
        assert_eq!(
            ev[1]["choices"][0]["delta"]["content"],
            "Let me \u{e9}\u{1f30d}"
        );
        let tc = |i: usize| ev[i]["choices"][0]["delta"]["tool_calls"][0].clone();
        assert_eq!(
            tc(2),
            json!({"index":0,"id":"tooluse_1","type":"function","function":{"name":"get_weather","arguments":""}})
        );
        assert_eq!(
            tc(3),
            json!({"index":0,"function":{"arguments":"{\"city\": "}})
        );
        assert_eq!(tc(4)["function"]["arguments"], "\"Paris\"}");
        assert_eq!(
            (tc(5)["index"].clone(), tc(5)["id"].clone()),
            (json!(1), json!("tooluse_2"))
        );
        assert_eq!(tc(6), json!({"index":1,"function":{"arguments":"{}"}}));
        assert_eq!(ev[7]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(ev[8]["choices"], json!([]));
        assert_eq!(
            ev[8]["usage"],
            json!({"prompt_tokens":12,"completion_tokens":30,"total_tokens":42})
        );
        assert_eq!(ev.len(), 9);
    }

    #[test]
    fn stream_guardrails_and_bad_crcs() {
        let start = event("messageStart", json!({"role":"assistant"}));
        // A guardrail stopping the answer mid-stream: finish reason content_filter.
        let filtered = [
            start.clone(),
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex":0,"delta":{"text":"Sure"}}),
            ),
            event("messageStop", json!({"stopReason":"guardrail_intervened"})),
        ]
        .concat();
        let (ev, text) = run(&[&filtered], false);
        assert_eq!(ev[2]["choices"][0]["finish_reason"], "content_filter");
        assert!(
            text.ends_with("data: [DONE]\n\n"),
            "complete without metadata"
        );
        let bytes = tool_stream();
        let mut corrupt = bytes.clone();
        corrupt[start.len() + 40] ^= 1;
        let (ev, _) = run(&[&corrupt], false);
        let err = ev.last().unwrap()["error"].clone();
        assert_eq!(err["code"], "UPSTREAM_ERROR");
        assert!(err["message"].as_str().unwrap().contains("CRC"), "{err}");
    }
}

#[cfg(test)]
mod invoke_tests {
    use super::*;
    use crate::formats::eventstream::encode as frame;
    use crate::formats::url::encode_segment;
    use crate::model::response::Answer;
    use crate::model::surface_state::SurfaceState;
    use crate::surfaces::anthropic_messages::request::parse as parse_messages;

    const CLAUDE: &str = "anthropic.claude-sonnet-4-20250514-v1:0";
    const NOVA: &str = "amazon.nova-pro-v1:0";

    fn config(extra: &str) -> crate::config::Config {
        crate::config::Config::parse(
            format!(
                r#"{{"providers":{{"p":{{"dialect":"bedrock"{extra}}}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#
            )
            .as_bytes(),
            |_| None,
        )
        .unwrap()
    }

    fn chat(body: &str, extra: &str, model: &str) -> (UpstreamRequest, Value) {
        let provider = format!(r#"{{"dialect":"bedrock"{extra}}}"#);
        crate::dialects::encode_for(&Bedrock, &provider, model, body).unwrap()
    }

    #[test]
    fn the_option_sends_claude_to_invoke_model_with_anthropics_body() {
        let body = r#"{"model":"g","max_tokens":50,"stream":true,"user":"u1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}"#;
        let (up, v) = chat(body, r#","claude_invoke":true"#, CLAUDE);
        assert_eq!(
            up.path,
            "/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke-with-response-stream"
        );
        assert_eq!(v["anthropic_version"], bedrock_invoke::ANTHROPIC_VERSION);
        assert!(v.get("model").is_none() && v.get("stream").is_none(), "{v}");
        assert_eq!(v["max_tokens"], 50);
        assert_eq!(v["system"][0]["text"], "be brief");
        assert_eq!(v["messages"][0]["content"][0]["text"], "hi");
        assert_eq!(v["metadata"]["user_id"], "u1");
        assert!(!up.headers.iter().any(|(n, _)| *n == "x-api-key"));
        let no_stream = body.replace(r#""stream":true,"#, "");
        let (up, _) = chat(&no_stream, r#","claude_invoke":true"#, CLAUDE);
        assert!(up.path.ends_with("/invoke"), "{}", up.path);
        // Other models, and providers without the option: Converse.
        let (up, v) = chat(body, r#","claude_invoke":true"#, NOVA);
        assert!(up.path.ends_with("/converse-stream") && v.get("anthropic_version").is_none());
        let (up, _) = chat(body, "", CLAUDE);
        assert!(up.path.ends_with("/converse-stream"));
    }

    #[test]
    fn a_messages_client_passes_through_to_claude_only() {
        let with = config(r#","claude_invoke":true,"api_key":"br-key""#);
        let without = config("");
        let api = Api::AnthropicMessages;
        assert!(Bedrock.speaks(api) && !Bedrock.speaks(Api::OpenAiChat));
        assert!(
            crate::dialects::pass_through(&with.providers["p"], &Bedrock, api)
                && !crate::dialects::pass_through(&without.providers["p"], &Bedrock, api)
        );
        let body = "{\"model\": \"g\",\"max_tokens\":2048, \"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024},\n\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\",\"cache_control\":{\"type\":\"ephemeral\"}}]}],\"stream\":true}";
        let req = parse_messages(body.as_bytes()).unwrap();
        let raw = crate::dialects::ClientRequest {
            body: &|| body.as_bytes().to_vec(),
            header: &|_| None,
        };
        let target = Target {
            provider: &with.providers["p"],
            model: CLAUDE,
        };
        let up = Bedrock
            .encode_native(api, &raw, &req, &target)
            .unwrap()
            .unwrap();
        assert_eq!(
            String::from_utf8(up.body).unwrap(),
            "{\"anthropic_version\":\"bedrock-2023-05-31\",\"max_tokens\":2048, \"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024},\n\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\",\"cache_control\":{\"type\":\"ephemeral\"}}]}]}"
        );
        assert!(up.path.ends_with("/invoke-with-response-stream"));
        assert!(up
            .headers
            .contains(&("authorization", "Bearer br-key".into())));
        let nova = Target {
            provider: &with.providers["p"],
            model: NOVA,
        };
        assert!(Bedrock.encode_native(api, &raw, &req, &nova).is_none());
    }

    #[test]
    fn count_tokens_is_count_tokens_with_the_generations_input() {
        use crate::dialects::count::Counter;
        let count = r#"{"model":"any","system":"be brief","messages":[{"role":"user","content":"count me"}],
            "tools":[{"name":"lookup","input_schema":{"type":"object"}}]}"#;
        let req =
            crate::surfaces::anthropic_messages::request::parse_count(count.as_bytes()).unwrap();
        let converse = config(r#","api_key":"br-key""#);
        let invoke = config(r#","claude_invoke":true"#);
        let encode = |config: &crate::config::Config, model: &str| {
            let target = Target {
                provider: &config.providers["p"],
                model,
            };
            Bedrock.encode_count(&req, &target).map(|up| {
                up.map(|up| (up.path, serde_json::from_slice::<Value>(&up.body).unwrap()))
            })
        };
        // Converse's counted members; an inference profile counts as its model.
        let (path, v) = encode(&converse, &format!("us.{CLAUDE}")).unwrap().unwrap();
        assert_eq!(
            path,
            format!("/model/{}/count-tokens", encode_segment(CLAUDE))
        );
        let input = v["input"]["converse"].as_object().unwrap();
        let mut members: Vec<&str> = input.keys().map(String::as_str).collect();
        members.sort_unstable();
        assert_eq!(members, ["messages", "system", "toolConfig"]);
        assert_eq!(input["system"][0]["text"], "be brief");
        // claude_invoke: InvokeModel's body, in base64.
        let (_, v) = encode(&invoke, CLAUDE).unwrap().unwrap();
        let body = v["input"]["invokeModel"]["body"].as_str().unwrap();
        assert_eq!(body.len() % 4, 0, "padded");
        let body: Value =
            serde_json::from_slice(&crate::formats::base64::decode(body).unwrap()).unwrap();
        assert_eq!(body["anthropic_version"], bedrock_invoke::ANTHROPIC_VERSION);
        assert!(body["max_tokens"].as_u64().is_some() && body.get("model").is_none());
        assert_eq!(body["tools"][0]["name"], "lookup");
        // Models CountTokens does not count: the gateway estimates.
        assert!(encode(&converse, NOVA).is_none());
        assert!(encode(&converse, "arn:aws:bedrock:us-east-1:1:inference-profile/x").is_none());
        assert_eq!(Bedrock.decode_count(br#"{"inputTokens":12}"#).unwrap(), 12);
        assert!(Bedrock.decode_count(b"{}").is_err());
    }

    #[test]
    fn the_option_is_bedrocks_alone() {
        let e = crate::config::Config::parse(
            br#"{"providers":{"p":{"dialect":"anthropic","api_key":"k","claude_invoke":true}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap_err();
        assert!(e.contains("providers.p.claude_invoke"), "{e}");
    }

    const MESSAGE: &[u8] = br#"{"id":"msg_bdrk_1","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"thinking","thinking":"t","signature":"sig"},{"type":"text","text":"Hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":3}}"#;

    #[test]
    fn invoke_answers_are_anthropics_messages() {
        let mut origin = Origin::default();
        let d = Bedrock
            .decode_native(Api::AnthropicMessages, MESSAGE, &mut origin)
            .unwrap();
        assert!(matches!(&d.answer, Answer::Native(b) if b == MESSAGE));
        assert_eq!(d.usage.map(|u| u.completion_tokens), Some(3));
        assert_eq!(origin.id, "msg_bdrk_1");
        let d = Bedrock.decode_response(MESSAGE, &mut origin).unwrap();
        let Answer::Decoded(c) = d.answer else {
            panic!("decoded")
        };
        assert_eq!(c.content.as_deref(), Some("Hello"));
        assert_eq!(c.reasoning[0].signature.as_deref(), Some("sig"));
        assert_eq!(d.finish_reason, Some(FinishReason::Stop));
        // A Converse answer (a model that is not Claude) to a Messages client.
        let converse = br#"{"output":{"message":{"role":"assistant","content":[{"text":"Hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}"#;
        let d = Bedrock
            .decode_native(Api::AnthropicMessages, converse, &mut origin)
            .unwrap();
        assert!(matches!(d.answer, Answer::Decoded(_)));
    }

    /// Standard padded base64, as AWS sends the chunk payloads.
    fn base64(input: &[u8]) -> String {
        let encoded = crate::formats::base64::encode(input, crate::formats::base64::STANDARD);
        let mut out = String::from_utf8(encoded).unwrap();
        while !out.len().is_multiple_of(4) {
            out.push('=');
        }
        out
    }

    /// One InvokeModel stream `chunk` event carrying an Anthropic event.
    fn chunk(event: &str) -> Vec<u8> {
        let payload = json!({"bytes": base64(event.as_bytes()), "p": "abcdefgh"});
        frame(
            &[
                (":event-type", "chunk"),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload.to_string().as_bytes(),
        )
    }

    const EVENTS: [&str; 7] = [
        r#"{"type":"message_start","message":{"id":"msg_bdrk_2","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"usage":{"input_tokens":7,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi é"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}"#,
        r#"{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":7,"outputTokenCount":4,"invocationLatency":10,"firstByteLatency":5}}"#,
        "",
    ];

    fn stream() -> Vec<u8> {
        EVENTS
            .iter()
            .filter(|e| !e.is_empty())
            .flat_map(|e| chunk(e))
            .collect()
    }

    fn run(api: Api, native: bool, input: &[u8], step: usize) -> (String, Option<Usage>, bool) {
        let writer = crate::surfaces::stream_writer(
            api,
            native,
            Origin::default(),
            "rid".into(),
            true,
            &SurfaceState::default(),
        );
        let mut d = Bedrock.stream_decoder(writer);
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            d.feed(piece, &mut out);
        }
        d.finish(&mut out);
        let failed = d.writer().failure().is_some();
        (String::from_utf8(out).unwrap(), d.writer().usage(), failed)
    }

    #[test]
    fn a_messages_client_gets_the_chunks_as_anthropics_events() {
        let (text, usage, failed) = run(Api::AnthropicMessages, true, &stream(), 7);
        let expected: String = EVENTS
            .iter()
            .filter(|e| !e.is_empty())
            .map(|e| {
                let kind: Value = serde_json::from_str(e).unwrap();
                format!("event: {}\ndata: {e}\n\n", kind["type"].as_str().unwrap())
            })
            .collect();
        assert_eq!(text, expected);
        assert!(!failed);
        assert_eq!(
            usage.map(|u| (u.prompt_tokens, u.completion_tokens)),
            Some((7, 4))
        );
    }

    #[test]
    fn a_chat_client_gets_the_chunks_decoded() {
        let (text, usage, failed) = run(Api::OpenAiChat, false, &stream(), 1);
        assert!(!failed, "{text}");
        assert!(text.contains(r#""content":"Hi é""#), "{text}");
        assert!(text.contains(r#""finish_reason":"stop""#), "{text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        assert_eq!(usage.map(|u| u.completion_tokens), Some(4));
    }

    #[test]
    fn exceptions_bad_chunks_and_cuts_fail_the_stream() {
        let exception = frame(
            &[
                (":exception-type", "throttlingException"),
                (":content-type", "application/json"),
                (":message-type", "exception"),
            ],
            br#"{"message":"Too many requests"}"#,
        );
        let mut input = chunk(EVENTS[0]);
        input.extend(exception);
        let (text, _, failed) = run(Api::AnthropicMessages, true, &input, 5);
        assert!(failed && text.contains("Too many requests"), "{text}");
        let bad = frame(
            &[
                (":event-type", "chunk"),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            br#"{"bytes":"not base64!"}"#,
        );
        let (text, _, failed) = run(Api::OpenAiChat, false, &bad, 64);
        assert!(failed && text.contains("base64"), "{text}");
        // Cut before message_stop, though the stop reason came: incomplete.
        let cut: Vec<u8> = EVENTS[..5].iter().flat_map(|e| chunk(e)).collect();
        let (text, _, failed) = run(Api::AnthropicMessages, true, &cut, 64);
        assert!(failed && text.contains("ended before"), "{text}");
    }
}
