//! AWS Bedrock InvokeModel for Claude (`POST /model/{modelId}/invoke` and
//! `/invoke-with-response-stream`) with Anthropic's Messages body
//! (docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages-request-response.html):
//! Bedrock's SigV4 check, its envelope rules (`anthropic_version`
//! `bedrock-2023-05-31` required, no `model` and no `stream`: the path
//! says them, only the documented members), then Anthropic's own rules on
//! the rest (the Anthropic mock's), Anthropic's message as the answer, and
//! the stream as event-stream `chunk` events whose payload is
//! `{"bytes": <base64 of one Anthropic event>}` (API_runtime_PayloadPart);
//! errors and exceptions are Bedrock's (the Converse mock's).

use serde_json::{json, Map, Value};

use crate::answer::Answer;
use crate::anthropic::Anthropic;
use crate::bedrock::{claude_thinks, encode_message, path_model, Bedrock};
use crate::dialect::{to_json, Dialect, Failure, Meta, Prompt, Reply, SseEvent};
use crate::http::Request;

pub struct BedrockInvoke {
    /// Bedrock's headers, errors and exceptions.
    pub bedrock: Bedrock,
}

pub const ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// The body's members Bedrock documents for Claude's Messages API (the
/// user guide's request syntax, extended thinking's `thinking`, and the
/// `metadata` whose `user_id` Bedrock hands to Claude); others are refused.
const TOP_LEVEL: [&str; 13] = [
    "anthropic_version",
    "anthropic_beta",
    "max_tokens",
    "system",
    "messages",
    "temperature",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "stop_sequences",
    "thinking",
    "metadata",
];

fn malformed(what: String) -> Failure {
    Failure::Invalid(format!(
        "Malformed input request: {what}, please reformat your input and try again."
    ))
}

/// Bedrock's own checks of the body; the rest is Claude's.
fn check_envelope(obj: &Map<String, Value>, model: &str) -> Result<(), Failure> {
    if let Some(extra) = obj.keys().find(|k| !TOP_LEVEL.contains(&k.as_str())) {
        return Err(malformed(format!(
            "#: extraneous key [{extra}] is not permitted"
        )));
    }
    match obj.get("anthropic_version") {
        None => {
            return Err(malformed(
                "#: required key [anthropic_version] not found".into(),
            ))
        }
        Some(Value::String(v)) if v == ANTHROPIC_VERSION => {}
        Some(v) => {
            return Err(malformed(format!(
                "#/anthropic_version: {v} is not a valid enum value"
            )))
        }
    }
    if let Some(betas) = obj.get("anthropic_beta") {
        let strings = betas
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string));
        if !strings {
            return Err(malformed(
                "#/anthropic_beta: expected type: JSONArray of strings".into(),
            ));
        }
    }
    // The Converse mock's rule: Claude models before 3.7 do not think.
    if obj.get("thinking").is_some() && !claude_thinks(model) {
        return Err(Failure::Invalid(
            "thinking: Extra inputs are not permitted".into(),
        ));
    }
    Ok(())
}

/// `ConverseTokensRequest`'s members.
const CONVERSE_TOKENS: [&str; 4] = [
    "messages",
    "system",
    "toolConfig",
    "additionalModelRequestFields",
];

const NO_COUNT: &str = "The provided model doesn't support counting tokens.";

/// Standard base64 (a blob in AWS JSON); `None` for anything else.
pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let text = text.trim_end_matches('=');
    let (mut out, mut acc, mut bits) = (Vec::new(), 0u32, 0u32);
    for c in text.bytes() {
        let v = ALPHABET.iter().position(|&a| a == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

impl BedrockInvoke {
    /// `POST /model/{modelId}/count-tokens` (CountTokens): a foundation
    /// model that counts (Claude's, not an inference profile), `input` a
    /// union with exactly one member, `converse` (the Converse request's
    /// counted members, checked as Converse checks them) or `invokeModel`
    /// (`body`: base64 of an InvokeModel body, checked as InvokeModel
    /// checks it); the prompt's words, as a generation's usage says.
    fn count_tokens(&self, req: &Request) -> Result<u64, Failure> {
        self.check_headers(req)?;
        let model = path_model(req.path());
        if model.is_empty() || model.len() > 256 {
            return Err(Failure::Status(404));
        }
        let foundation = model.starts_with("anthropic.claude")
            || model.contains(":foundation-model/anthropic.claude");
        if !foundation {
            return Err(Failure::Invalid(NO_COUNT.into()));
        }
        let body: Value = serde_json::from_slice(&req.body)
            .map_err(|_| malformed("#: expected type: JSONObject".into()))?;
        let input = body
            .as_object()
            .filter(|o| o.keys().all(|k| k == "input"))
            .and_then(|o| o.get("input"))
            .and_then(Value::as_object)
            .ok_or_else(|| {
                Failure::Invalid(
                    "1 validation error detected: Value at 'input' failed to satisfy \
                     constraint: Member must not be null"
                        .into(),
                )
            })?;
        let (converse, invoke) = (input.get("converse"), input.get("invokeModel"));
        if input.len() != 1 || converse.is_some() == invoke.is_some() {
            return Err(Failure::Invalid(
                "1 validation error detected: Value at 'input' failed to satisfy constraint: \
                 exactly one of converse, invokeModel must be set"
                    .into(),
            ));
        }
        let p = match (converse, invoke) {
            (Some(converse), _) => {
                let obj = converse
                    .as_object()
                    .ok_or_else(|| malformed("#/converse: expected type: JSONObject".into()))?;
                if let Some(extra) = obj.keys().find(|k| !CONVERSE_TOKENS.contains(&k.as_str())) {
                    return Err(malformed(format!(
                        "#/converse: extraneous key [{extra}] is not permitted"
                    )));
                }
                self.bedrock.parse_request(req, converse)?
            }
            (None, invoke) => {
                let text = invoke
                    .and_then(|i| i.get("body"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        malformed("#/invokeModel: required key [body] not found".into())
                    })?;
                let body = base64_decode(text)
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                    .ok_or_else(|| {
                        malformed("#/invokeModel/body: expected base64 of JSON".into())
                    })?;
                self.parse_request(req, &body)?
            }
        };
        Ok(p.prompt_words.max(1))
    }
}

impl Dialect for BedrockInvoke {
    fn name(&self) -> &'static str {
        "bedrock"
    }

    fn handles(&self, path: &str) -> bool {
        path.starts_with("/model/")
            && (path.ends_with("/invoke") || path.ends_with("/invoke-with-response-stream"))
    }

    fn is_stream(&self, req: &Request, _body: &Value) -> bool {
        req.path().ends_with("/invoke-with-response-stream")
    }

    /// CountTokens, for both of Bedrock's request formats.
    fn has_call(&self, path: &str) -> bool {
        path.starts_with("/model/") && path.ends_with("/count-tokens")
    }

    fn call(&self, req: &Request, _path: &str) -> Reply {
        if req.method() != "POST" {
            return self.error(&Failure::Status(404));
        }
        match self.count_tokens(req) {
            Ok(tokens) => Reply {
                status: 200,
                body: to_json(&json!({ "inputTokens": tokens })),
                retry_after: None,
            },
            Err(f) => self.error(&f),
        }
    }

    fn stream_content_type(&self) -> &'static str {
        self.bedrock.stream_content_type()
    }

    /// Anthropic's events, each wrapped in a `chunk`; exceptions as the
    /// Converse stream has them.
    fn encode_event(&self, index: usize, e: &SseEvent, crlf: bool, out: &mut Vec<u8>) {
        if e.name.is_some_and(|n| n.ends_with("Exception")) {
            return self.bedrock.encode_event(index, e, crlf, out);
        }
        let payload = json!({"bytes": crate::server::base64(e.data.as_bytes()), "p": "abcdefghij"});
        encode_message(
            &[
                (":event-type", "chunk"),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            to_json(&payload).as_bytes(),
            out,
        );
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        self.bedrock.check_headers(req)
    }

    fn parse(&self, _body: &Value) -> Result<Prompt, Failure> {
        Err(malformed("#: the model is in the path".into()))
    }

    /// Bedrock's envelope checked, then the body as Anthropic would take it
    /// with the path's model.
    fn parse_request(&self, req: &Request, body: &Value) -> Result<Prompt, Failure> {
        let model = path_model(req.path());
        let obj = body
            .as_object()
            .ok_or_else(|| malformed("#: expected type: JSONObject".into()))?;
        check_envelope(obj, &model)?;
        let mut messages_body = obj.clone();
        messages_body.remove("anthropic_version");
        messages_body.remove("anthropic_beta");
        messages_body.insert("model".into(), Value::String(model.clone()));
        let mut p = Anthropic.parse(&Value::Object(messages_body))?;
        p.model = model;
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        self.bedrock.error(failure)
    }

    fn error_header(&self, failure: &Failure) -> Option<(&'static str, String)> {
        self.bedrock.error_header(failure)
    }

    fn tool_preface(&self) -> Option<&'static str> {
        Anthropic.tool_preface()
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        Anthropic.response(p, a, meta)
    }

    /// Anthropic's events; the last carries Bedrock's invocation metrics.
    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        let mut events = Anthropic.stream(p, a, meta);
        if let Some(stop) = events.iter_mut().find(|e| e.name == Some("message_stop")) {
            stop.data = to_json(&json!({"type": "message_stop",
                "amazon-bedrock-invocationMetrics": {"inputTokenCount": p.prompt_words,
                    "outputTokenCount": a.completion_tokens, "invocationLatency": 12, "firstByteLatency": 5}}));
        }
        events
    }

    fn stream_error(&self) -> SseEvent {
        self.bedrock.stream_error()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: Value, model: &str) -> Result<(), Failure> {
        check_envelope(body.as_object().unwrap(), model)
    }

    const SONNET: &str = "anthropic.claude-sonnet-4-20250514-v1:0";

    #[test]
    fn bedrocks_envelope_rules() {
        let ok = json!({"anthropic_version": ANTHROPIC_VERSION, "max_tokens": 5, "messages": []});
        assert!(check(ok.clone(), SONNET).is_ok());
        let mut with_model = ok.clone();
        with_model["model"] = json!("claude");
        let e = check(with_model, SONNET).unwrap_err();
        assert!(matches!(&e, Failure::Invalid(m) if m.contains("extraneous key [model]")));
        let mut with_stream = ok.clone();
        with_stream["stream"] = json!(true);
        assert!(check(with_stream, SONNET).is_err());
        let e = check(json!({"max_tokens": 5}), SONNET).unwrap_err();
        assert!(matches!(&e, Failure::Invalid(m) if m.contains("[anthropic_version] not found")));
        let e = check(json!({"anthropic_version": "2023-06-01"}), SONNET).unwrap_err();
        assert!(matches!(&e, Failure::Invalid(m) if m.contains("not a valid enum value")));
        let mut betas = ok.clone();
        betas["anthropic_beta"] = json!("a,b");
        assert!(check(betas.clone(), SONNET).is_err());
        betas["anthropic_beta"] = json!(["a", "b"]);
        assert!(check(betas, SONNET).is_ok());
        let mut thinking = ok;
        thinking["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
        assert!(check(thinking.clone(), SONNET).is_ok());
        assert!(check(thinking, "anthropic.claude-3-haiku-20240307-v1:0").is_err());
    }

    fn count(model: &str, body: &str) -> Reply {
        let raw = format!(
            "POST /model/{model}/count-tokens HTTP/1.1\r\nauthorization: AWS4-HMAC-SHA256 x\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        );
        let req = crate::http::parse(&raw);
        let d = BedrockInvoke {
            bedrock: Bedrock { credentials: None },
        };
        d.call(&req, req.path())
    }

    #[test]
    fn count_tokens_takes_one_input_for_a_model_that_counts() {
        let converse = r#"{"input":{"converse":{"messages":[{"role":"user","content":[{"text":"four words right here"}]}],
            "system":[{"text":"be brief"}]}}}"#;
        let counted = count(SONNET, converse);
        assert_eq!(counted.status, 200, "{}", counted.body);
        assert_eq!(counted.body, r#"{"inputTokens":6}"#);
        let invoke_body = json!({"anthropic_version": ANTHROPIC_VERSION, "max_tokens": 10,
            "messages": [{"role": "user", "content": "four words right here"}]});
        let invoke = json!({"input": {"invokeModel": {"body":
            crate::server::base64(to_json(&invoke_body).as_bytes())}}});
        assert_eq!(
            count(SONNET, &to_json(&invoke)).body,
            r#"{"inputTokens":4}"#
        );
        // The union takes exactly one member; Converse's other members are refused.
        let both = json!({"input": {"converse": {"messages": []}, "invokeModel": {"body": ""}}});
        assert_eq!(count(SONNET, &to_json(&both)).status, 400);
        assert_eq!(count(SONNET, r#"{"input":{}}"#).status, 400);
        let inference = r#"{"input":{"converse":{"messages":[{"role":"user","content":[{"text":"hi"}]}],
            "inferenceConfig":{"maxTokens":5}}}}"#;
        assert!(count(SONNET, inference)
            .body
            .contains("extraneous key [inferenceConfig]"));
        // An InvokeModel body is checked as InvokeModel checks it.
        let no_version = json!({"input": {"invokeModel": {"body": crate::server::base64(b"{}")}}});
        assert_eq!(count(SONNET, &to_json(&no_version)).status, 400);
        // Inference profiles and models that do not count are refused.
        for model in [format!("us.{SONNET}"), "amazon.nova-lite-v1:0".into()] {
            let refused = count(&model, converse);
            assert_eq!(refused.status, 400);
            assert!(refused.body.contains(NO_COUNT));
        }
    }

    #[test]
    fn chunks_carry_anthropics_events_in_base64() {
        let d = BedrockInvoke {
            bedrock: Bedrock { credentials: None },
        };
        let event = SseEvent {
            name: Some("message_stop"),
            data: r#"{"type":"message_stop"}"#.into(),
            delta: false,
        };
        let mut out = Vec::new();
        d.encode_event(0, &event, false, &mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains(":event-type") && text.contains("chunk"));
        assert!(text.contains(&crate::server::base64(event.data.as_bytes())));
        assert!(d.handles("/model/x/invoke") && d.handles("/model/x/invoke-with-response-stream"));
        assert!(!d.handles("/model/x/converse"));
    }
}
