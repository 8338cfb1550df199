//! AWS Bedrock Converse (`POST /model/{modelId}/converse` and
//! `/converse-stream`): SigV4 check (when the mock has credentials),
//! validation with Bedrock's ValidationException messages, Converse
//! responses, the binary event stream (`application/vnd.amazon.eventstream`,
//! CRC32s included), exceptions mid-stream, and `x-amzn-errortype` errors.
//!
//! The dialect is here; its request checks (inference configuration,
//! thinking, cache points, tools, response field paths) are in `request`,
//! and the parts of its answers and the event stream's framing in `render`.

mod render;
mod request;

use serde_json::{json, Map, Value};

use crate::answer::{claude_signature, fragments, reasoning_text, Answer};
use crate::dialect::{
    count_words, to_json, Dialect, Failure, Filtered, Meta, Prompt, Reply, SseEvent,
};
use crate::http::Request;
use crate::scenario::Filter;
use crate::sigv4::{self, Verifier};
pub use render::encode_message;
use render::{delta_event, event, response_fields, stop_reason, usage};
use request::{
    block_member, check_cache_point, check_inference, check_reasoning_block, check_response_paths,
    check_result_block, check_thinking, check_thinking_history, invalid, parse_tools, MODEL_ERRORS,
};
pub(crate) use request::{claude_thinks, path_model};

pub struct Bedrock {
    /// When set, every request must be SigV4-signed with these credentials,
    /// for one of these regions, under every rule AWS applies.
    pub credentials: Option<Verifier>,
}

const TOP_LEVEL: [&str; 10] = [
    "messages",
    "system",
    "inferenceConfig",
    "toolConfig",
    "guardrailConfig",
    "additionalModelRequestFields",
    "additionalModelResponseFieldPaths",
    "promptVariables",
    "requestMetadata",
    "performanceConfig",
];

/// Anthropic's limit on cache breakpoints, on Bedrock too
/// (docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html).
const MAX_CACHE_POINTS: usize = 4;

const IMAGE_FORMATS: [&str; 4] = ["png", "jpeg", "gif", "webp"];
const ERROR_NAMESPACE: &str = ":http://internal.amazon.com/coral/com.amazon.bedrock/";
const BLOCKED_MESSAGE: &str = "Sorry, the model cannot answer this question.";

impl Dialect for Bedrock {
    fn name(&self) -> &'static str {
        "bedrock"
    }

    fn handles(&self, path: &str) -> bool {
        path.starts_with("/model/")
            && (path.ends_with("/converse") || path.ends_with("/converse-stream"))
    }

    fn is_stream(&self, req: &Request, _body: &Value) -> bool {
        req.path().ends_with("/converse-stream")
    }

    fn stream_content_type(&self) -> &'static str {
        "application/vnd.amazon.eventstream"
    }

    /// Events ending in "Exception" are sent as `:message-type: exception`.
    fn encode_event(&self, _index: usize, e: &SseEvent, _crlf: bool, out: &mut Vec<u8>) {
        let name = e.name.unwrap_or_default();
        let headers: [(&str, &str); 3] = if name.ends_with("Exception") {
            [
                (":exception-type", name),
                (":content-type", "application/json"),
                (":message-type", "exception"),
            ]
        } else {
            [
                (":event-type", name),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ]
        };
        encode_message(&headers, e.data.as_bytes(), out);
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        match &self.credentials {
            Some(v) => v
                .check(req, unix_now())
                .map_err(|r| Failure::Auth(r.message())),
            None if req
                .header("authorization")
                .is_some_and(|a| !a.trim().is_empty()) =>
            {
                Ok(())
            }
            None => Err(Failure::Auth(sigv4::Refusal::Missing.message())),
        }
    }

    fn parse_request(&self, req: &Request, body: &Value) -> Result<Prompt, Failure> {
        let model = path_model(req.path());
        let empty = Map::new();
        let inference = body
            .get("inferenceConfig")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        check_inference(inference, &model)?;
        let mut p = self.parse(body)?;
        p.reasoning = check_thinking(body, &model, &p.tool_choice)?;
        p.bedrock_stop_sequence_field = check_response_paths(body, &model)?;
        if p.reasoning {
            let messages = body.get("messages").and_then(Value::as_array);
            check_thinking_history(messages.map_or(&[][..], Vec::as_slice))?;
        }
        p.model = model;
        Ok(p)
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        let obj = body
            .as_object()
            .ok_or_else(|| invalid("Malformed input request: expected a JSON object"))?;
        if let Some(extra) = obj.keys().find(|k| !TOP_LEVEL.contains(&k.as_str())) {
            return Err(invalid(format!(
                "Malformed input request: extraneous key [{extra}] is not permitted, please reformat your input and try again."
            )));
        }
        let messages = obj
            .get("messages")
            .and_then(Value::as_array)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| invalid("The model returned the following errors: messages: at least one message is required"))?;
        let mut p = Prompt::default();
        let mut cache_points = 0;
        let empty = Map::new();
        let inference = obj
            .get("inferenceConfig")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        p.max_tokens = inference.get("maxTokens").and_then(Value::as_u64);
        p.stop = inference
            .get("stopSequences")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(system) = obj.get("system") {
            let blocks = system
                .as_array()
                .ok_or_else(|| invalid("Malformed input request: system must be a list"))?;
            let mut text = Vec::new();
            for (j, b) in blocks.iter().enumerate() {
                if let Some(point) = b.get("cachePoint") {
                    check_cache_point(point, &format!("system.{j}"))?;
                    cache_points += 1;
                    p.cached_words = p.prompt_words;
                }
                let t = b.get("text").and_then(Value::as_str).unwrap_or("");
                p.prompt_words += count_words(t);
                text.push(t);
            }
            p.json = crate::anthropic::json_instruction(&text.join(" "));
        }
        cache_points += obj
            .get("toolConfig")
            .and_then(|c| c.get("tools"))
            .and_then(Value::as_array)
            .map_or(0, |t| {
                t.iter().filter(|t| t.get("cachePoint").is_some()).count()
            });
        for (j, t) in obj
            .get("toolConfig")
            .and_then(|c| c.get("tools"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(point) = t.get("cachePoint") {
                check_cache_point(point, &format!("toolConfig.tools.{j}"))?;
            }
        }
        let (tools, choice) = parse_tools(obj.get("toolConfig"))?;
        p.tools = tools;
        p.tool_choice = choice;
        let mut pending: Vec<String> = Vec::new();
        let mut uses_tools = false;
        for (i, m) in messages.iter().enumerate() {
            let role = m.get("role").and_then(Value::as_str).unwrap_or("");
            let expected = if i % 2 == 0 { "user" } else { "assistant" };
            if role != "user" && role != "assistant" {
                return Err(invalid(format!(
                    "Malformed input request: messages.{i}.role must be one of [user, assistant]"
                )));
            }
            if role != expected {
                return Err(invalid(
                    "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.",
                ));
            }
            let blocks = m
                .get("content")
                .and_then(Value::as_array)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| {
                    invalid(format!(
                        "Malformed input request: messages.{i}.content must be a non-empty list"
                    ))
                })?;
            let mut texts = Vec::new();
            let mut results = Vec::new();
            let mut answered = Vec::new();
            let mut uses = Vec::new();
            for (j, b) in blocks.iter().enumerate() {
                let at = format!("messages.{i}.content.{j}");
                let (kind, v) = block_member(b, &at)?;
                match kind.as_str() {
                    "text" => {
                        let t = v.as_str().unwrap_or("");
                        if t.trim().is_empty() {
                            return Err(invalid(format!("The text field in the ContentBlock object at {at} is blank. Add text to the text field, and try again.")));
                        }
                        texts.push(t.to_owned());
                    }
                    "image" => {
                        let format = v.get("format").and_then(Value::as_str).unwrap_or("");
                        if !IMAGE_FORMATS.contains(&format) {
                            return Err(invalid(format!("Malformed input request: {at}.image.format must be one of png, jpeg, gif, webp")));
                        }
                        if !v
                            .get("source")
                            .and_then(|s| s.get("bytes"))
                            .is_some_and(Value::is_string)
                        {
                            return Err(invalid(format!(
                                "Malformed input request: {at}.image.source.bytes is required"
                            )));
                        }
                    }
                    "toolUse" if role == "assistant" => {
                        uses_tools = true;
                        let id = v.get("toolUseId").and_then(Value::as_str).unwrap_or("");
                        if id.is_empty()
                            || v.get("name").and_then(Value::as_str).is_none()
                            || !v.get("input").is_some_and(Value::is_object)
                        {
                            return Err(invalid(format!("Malformed input request: {at}.toolUse needs toolUseId, name and an input object")));
                        }
                        uses.push(id.to_owned());
                    }
                    "toolResult" if role == "user" => {
                        uses_tools = true;
                        // ToolResultBlock.status: success | error.
                        if let Some(status) = v.get("status") {
                            if !matches!(status.as_str(), Some("success" | "error")) {
                                return Err(invalid(format!("Malformed input request: {at}.toolResult.status must be success or error")));
                            }
                        }
                        let id = v.get("toolUseId").and_then(Value::as_str).unwrap_or("");
                        answered.push(id.to_owned());
                        for (k, block) in v
                            .get("content")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .enumerate()
                        {
                            check_result_block(block, &format!("{at}.toolResult.content.{k}"))?;
                        }
                        let text: Vec<&str> = v
                            .get("content")
                            .and_then(Value::as_array)
                            .map(|c| {
                                c.iter()
                                    .filter_map(|x| x.get("text").and_then(Value::as_str))
                                    .collect()
                            })
                            .unwrap_or_default();
                        results.push(text.join(" "));
                    }
                    "reasoningContent" if role == "assistant" => check_reasoning_block(&v, &at)?,
                    "cachePoint" => {
                        check_cache_point(&v, &at)?;
                        cache_points += 1;
                        p.cached_words = p.prompt_words
                            + count_words(&texts.join(" "))
                            + results.iter().map(|r: &String| count_words(r)).sum::<u64>();
                    }
                    "toolUse" | "toolResult" | "reasoningContent" => {
                        return Err(invalid(format!("Malformed input request: {at}.{kind} is not allowed in a {role} message")));
                    }
                    _ => {}
                }
            }
            if pending.iter().any(|id| !answered.contains(id))
                || answered.iter().any(|id| !pending.contains(id))
            {
                return Err(invalid(
                    "The number of toolResult blocks at messages.".to_owned() + &i.to_string()
                        + ".content exceeds or does not match the number of toolUse blocks of previous turn.",
                ));
            }
            pending = uses;
            p.prior_tool_calls += pending.len() as u64;
            let text = texts.join(" ");
            p.prompt_words +=
                count_words(&text) + results.iter().map(|r| count_words(r)).sum::<u64>();
            if role == "user" && !text.is_empty() {
                p.last_user_text = text;
            }
            p.tool_results = (role == "user" && !results.is_empty()).then_some(results);
        }
        if !pending.is_empty() {
            return Err(invalid("Expected toolResult blocks at the last user message for the toolUse blocks of the previous turn."));
        }
        if cache_points > MAX_CACHE_POINTS {
            return Err(invalid(format!(
                "{MODEL_ERRORS}A maximum of {MAX_CACHE_POINTS} blocks with cache_control may be provided. Found {cache_points}."
            )));
        }
        if uses_tools && obj.get("toolConfig").is_none() {
            return Err(invalid(
                "The toolConfig field must be defined when using toolUse and toolResult content blocks.",
            ));
        }
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        let (status, message) = match failure {
            Failure::Auth(m) => (403, m.clone()),
            Failure::Invalid(m) | Failure::Param { message: m, .. } => (400, m.clone()),
            Failure::ContextLength => (400, "Input is too long for requested model.".into()),
            Failure::Status(s) => {
                let message = match s {
                    400 => "Malformed input request, please reformat your input and try again.",
                    401 => "The security token included in the request is invalid.",
                    403 => "You don't have access to the model with the specified model ID.",
                    404 => "The provided model identifier is invalid.",
                    429 => "Too many requests, please wait before trying again.",
                    500 => "The system encountered an unexpected error during processing. Try your request again.",
                    _ => "Bedrock is unable to process your request.",
                };
                (bedrock_status(*s), message.to_owned())
            }
        };
        // The AWS front door answers authentication failures in the Coral
        // JSON shape, `__type` and `message`; Bedrock's own errors carry
        // only `message` (the type is in x-amzn-errortype).
        let body = match failure {
            Failure::Auth(_) => json!({
                "__type": format!("com.amazon.coral.service#{}", auth_kind(failure)),
                "message": message,
            }),
            _ => json!({ "message": message }),
        };
        Reply {
            status,
            body: to_json(&body),
            retry_after: None,
        }
    }

    fn error_header(&self, failure: &Failure) -> Option<(&'static str, String)> {
        let kind = match failure {
            Failure::Auth(_) => auth_kind(failure),
            Failure::Invalid(_) | Failure::Param { .. } | Failure::ContextLength => {
                "ValidationException"
            }
            Failure::Status(s) => match s {
                400 | 413 => "ValidationException",
                401 => "UnrecognizedClientException",
                403 => "AccessDeniedException",
                404 => "ResourceNotFoundException",
                429 => "ThrottlingException",
                500 => "InternalServerException",
                _ => "ServiceUnavailableException",
            },
        };
        Some(("x-amzn-errortype", format!("{kind}{ERROR_NAMESPACE}")))
    }

    /// A guardrail that blocks the prompt answers 200 with its canned
    /// message, stop reason `guardrail_intervened`, and (trace enabled) the
    /// input assessment.
    fn filtered(&self, filter: Filter, p: &Prompt, _meta: Meta) -> Option<Filtered> {
        if filter != Filter::BlockedPrompt || p.stream {
            return None;
        }
        let body = json!({
            "output": {"message": {"role": "assistant", "content": [{"text": BLOCKED_MESSAGE}]}},
            "stopReason": "guardrail_intervened",
            "usage": {"inputTokens": p.prompt_words.max(1), "outputTokens": 0, "totalTokens": p.prompt_words.max(1)},
            "metrics": {"latencyMs": 12},
            "trace": {"guardrail": {"inputAssessment": {"mockguardrail": {"contentPolicy": {"filters": [
                {"type": "VIOLENCE", "confidence": "HIGH", "filterStrength": "HIGH", "action": "BLOCKED"}]}}}}},
        });
        Some(Filtered::Reply(Reply {
            status: 200,
            body: to_json(&body),
            retry_after: None,
        }))
    }

    fn response(&self, p: &Prompt, a: &Answer, _meta: Meta) -> Value {
        let mut content = Vec::new();
        if p.reasoning {
            let thought = reasoning_text(p);
            content.push(json!({"reasoningContent": {"reasoningText": {
                "text": thought, "signature": claude_signature(&thought)}}}));
        }
        if !a.text.is_empty() || a.tool_calls.is_empty() {
            content.push(json!({"text": a.text}));
        }
        for c in &a.tool_calls {
            content.push(json!({"toolUse": {"toolUseId": format!("tooluse_{}", c.n),
                                             "name": c.name, "input": c.arguments}}));
        }
        let mut answer = json!({
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop_reason(&a.finish),
            "usage": usage(p, a),
            "metrics": {"latencyMs": 12},
        });
        if let Some(fields) = response_fields(p, a) {
            answer["additionalModelResponseFields"] = fields;
        }
        answer
    }

    fn stream(&self, p: &Prompt, a: &Answer, _meta: Meta) -> Vec<SseEvent> {
        let mut events = vec![event(
            "messageStart",
            json!({"role": "assistant", "p": "abcd"}),
        )];
        let mut index = 0;
        if p.reasoning {
            // The thinking block: its text in pieces, then its signature.
            let thought = reasoning_text(p);
            for piece in crate::answer::word_chunks(&thought) {
                events.push(delta_event(
                    index,
                    json!({"reasoningContent": {"text": piece}}),
                ));
            }
            events.push(delta_event(
                index,
                json!({"reasoningContent": {"signature": claude_signature(&thought)}}),
            ));
            events.push(event(
                "contentBlockStop",
                json!({"contentBlockIndex": index}),
            ));
            index += 1;
        }
        if !a.text.is_empty() || a.tool_calls.is_empty() {
            for c in &a.chunks {
                events.push(delta_event(index, json!({"text": c})));
            }
            events.push(event(
                "contentBlockStop",
                json!({"contentBlockIndex": index}),
            ));
            index += 1;
        }
        for c in &a.tool_calls {
            events.push(event(
                "contentBlockStart",
                json!({"contentBlockIndex": index, "start": {"toolUse": {
                    "toolUseId": format!("tooluse_{}", c.n), "name": c.name}}}),
            ));
            for frag in fragments(&c.arguments_json) {
                events.push(delta_event(index, json!({"toolUse": {"input": frag}})));
            }
            events.push(event(
                "contentBlockStop",
                json!({"contentBlockIndex": index}),
            ));
            index += 1;
        }
        let mut stop = json!({"stopReason": stop_reason(&a.finish)});
        if let Some(fields) = response_fields(p, a) {
            stop["additionalModelResponseFields"] = fields;
        }
        events.push(event("messageStop", stop));
        events.push(event(
            "metadata",
            json!({"usage": usage(p, a), "metrics": {"latencyMs": 12}}),
        ));
        events
    }

    fn stream_error(&self) -> SseEvent {
        event(
            "serviceUnavailableException",
            json!({"message": "Bedrock is unable to process your request."}),
        )
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The exception an authentication failure is.
fn auth_kind(failure: &Failure) -> &'static str {
    match failure {
        Failure::Auth(m) if m.contains("Signature expired") => "InvalidSignatureException",
        Failure::Auth(m)
            if m.contains("signature") || m.contains("Credential should be scoped") =>
        {
            "InvalidSignatureException"
        }
        Failure::Auth(m) if m.contains("SignedHeader") => "IncompleteSignatureException",
        Failure::Auth(m) if m.contains("Missing") => "MissingAuthenticationTokenException",
        _ => "UnrecognizedClientException",
    }
}

/// Bedrock has no 401 (bad keys are 403) and no 529.
fn bedrock_status(s: u16) -> u16 {
    match s {
        401 => 403,
        529 => 503,
        other => other,
    }
}

// The frames' checksum, checked by the wire tests.
#[cfg(test)]
pub(crate) use render::crc32;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::ToolChoice;

    const SONNET_4: &str = "anthropic.claude-sonnet-4-20250514-v1:0";

    fn thinking(budget: u64, extra: Value) -> Value {
        let mut body = json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}],
            "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": budget}},
            "inferenceConfig": {"maxTokens": 4000}});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                body.insert(k.clone(), v.clone());
            }
        }
        body
    }

    fn refusal(body: &Value, model: &str, choice: &ToolChoice) -> String {
        match check_thinking(body, model, choice) {
            Err(Failure::Invalid(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn response_field_paths_are_json_pointers() {
        let paths = |v: Value, model: &str| {
            check_response_paths(&json!({ "additionalModelResponseFieldPaths": v }), model)
        };
        assert_eq!(paths(json!(["/stop_sequence"]), SONNET_4), Ok(true));
        assert_eq!(
            paths(json!(["/stop_sequence"]), "amazon.nova-pro-v1:0"),
            Ok(false)
        );
        assert_eq!(paths(json!(["/other", "/a~1b"]), SONNET_4), Ok(false));
        assert_eq!(check_response_paths(&json!({}), SONNET_4), Ok(false));
        for bad in [
            json!([""]),
            json!(["stop_sequence"]),
            json!(["/a~2"]),
            json!([1]),
            json!("/x"),
        ] {
            assert!(matches!(paths(bad, SONNET_4), Err(Failure::Invalid(_))));
        }
    }

    #[test]
    fn claude_thinking_rules() {
        assert_eq!(
            check_thinking(&thinking(1024, json!({})), SONNET_4, &ToolChoice::Auto),
            Ok(true)
        );
        assert_eq!(
            check_thinking(&json!({"messages": []}), SONNET_4, &ToolChoice::Auto),
            Ok(false)
        );
        for (body, model, choice, says) in [
            (
                thinking(1024, json!({})),
                "anthropic.claude-3-haiku-20240307-v1:0",
                ToolChoice::Auto,
                "Extra inputs",
            ),
            (
                thinking(1023, json!({})),
                SONNET_4,
                ToolChoice::Auto,
                "greater than or equal to 1024",
            ),
            (
                thinking(4000, json!({})),
                SONNET_4,
                ToolChoice::Auto,
                "`max_tokens` must be greater",
            ),
            (
                thinking(5000, json!({"inferenceConfig": {}})),
                SONNET_4,
                ToolChoice::Auto,
                "`max_tokens` must be greater",
            ),
            (
                thinking(
                    1024,
                    json!({"inferenceConfig": {"maxTokens": 4000, "temperature": 0.5}}),
                ),
                SONNET_4,
                ToolChoice::Auto,
                "`temperature`",
            ),
            (
                thinking(
                    1024,
                    json!({"inferenceConfig": {"maxTokens": 4000, "topP": 0.9}}),
                ),
                SONNET_4,
                ToolChoice::Auto,
                "`top_p`",
            ),
            (
                thinking(1024, json!({})),
                SONNET_4,
                ToolChoice::Any,
                "forces tool use",
            ),
        ] {
            let message = refusal(&body, model, &choice);
            assert!(message.contains(says), "{message}");
        }
    }

    #[test]
    fn signed_reasoning_is_required_back_and_verified() {
        let signed = json!({"reasoningText": {"text": "t", "signature": claude_signature("t")}});
        assert_eq!(check_reasoning_block(&signed, "m.1.content.0"), Ok(()));
        let forged = json!({"reasoningText": {"text": "t2", "signature": claude_signature("t")}});
        assert!(check_reasoning_block(&forged, "m").is_err());
        // Claude's one scheme: Anthropic's own block verifies here; Gemini's
        // signature over the same text does not.
        let foreign = json!({"reasoningText": {"text": "t",
            "signature": crate::answer::gemini_signature("t")}});
        assert!(check_reasoning_block(&foreign, "m").is_err());
        assert_eq!(
            check_reasoning_block(&json!({"redactedContent": "QQ=="}), "m"),
            Ok(())
        );
        let turn = |first: Value| {
            [
                json!({"role": "user", "content": [{"text": "q"}]}),
                json!({"role": "assistant", "content": [first, {"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}]}),
                json!({"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": []}}]}),
            ]
        };
        assert_eq!(
            check_thinking_history(&turn(json!({"reasoningContent": signed}))),
            Ok(())
        );
        assert!(check_thinking_history(&turn(json!({"text": "calling"}))).is_err());
    }

    #[test]
    fn cache_points() {
        assert_eq!(check_cache_point(&json!({"type": "default"}), "s"), Ok(()));
        assert_eq!(
            check_cache_point(&json!({"type": "default", "ttl": "1h"}), "s"),
            Ok(())
        );
        for bad in [
            json!({"type": "ephemeral"}),
            json!({"type": "default", "ttl": "2h"}),
            json!({}),
        ] {
            assert!(check_cache_point(&bad, "s").is_err(), "{bad}");
        }
        let point = json!({"cachePoint": {"type": "default"}});
        let body = json!({"messages": [{"role": "user", "content": [
            {"text": "a b"}, point, {"text": "c"}, point, point, point, point]}]});
        assert!(matches!(Bedrock { credentials: None }.parse(&body),
            Err(Failure::Invalid(m)) if m.contains("A maximum of 4")));
        let body = json!({"system": [{"text": "s t"}, point],
            "messages": [{"role": "user", "content": [{"text": "a b"}, point, {"text": "c"}]}]});
        let p = Bedrock { credentials: None }.parse(&body).unwrap();
        assert_eq!((p.cached_words, p.prompt_words), (4, 5));
    }
}
