//! Anthropic Messages (`POST /v1/messages`): header checks, body validation
//! with the real API's 400 messages, Messages objects, the event stream
//! (message_start ... message_stop) and error bodies.
//!
//! The dialect is here; its request checks are in `request` (fields,
//! sampling, thinking and prompt caching), `messages` (content blocks) and
//! `tools`, and the parts of its answers and streams in `render`.

mod messages;
mod render;
mod request;
mod tools;

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::answer::{claude_signature, fragments, Answer, Finish};
use crate::dialect::{count_words, to_json, Dialect, Failure, Meta, Prompt, Reply, SseEvent};
use crate::http::Request;
use crate::keys;
use messages::{check_message, MessageInfo};
use render::{delta_event, event, search_under_way, stop_reason, thinking_text, usage};
pub use request::json_instruction;
use request::{
    breakpoints, check_thinking, check_unit_range, invalid, system_text,
    takes_temperature_and_top_p, COUNT_FIELDS, MAX_BREAKPOINTS, MIN_CACHEABLE_WORDS, TOP_LEVEL,
};
use tools::{is_web_search, parse_tool_choice, parse_tools};

pub struct Anthropic;

pub const VERSION: &str = "2023-06-01";

impl Anthropic {
    /// `POST /v1/messages/count_tokens`: the input tokens the Messages
    /// request would use (what its answer's `usage.input_tokens` says),
    /// the request checked as a Messages request is.
    fn count_tokens(&self, req: &Request) -> Result<u64, Failure> {
        self.check_headers(req)?;
        let body: Value = serde_json::from_slice(&req.body).map_err(|e| {
            invalid(format!(
                "We could not parse the JSON body of your request: {e}"
            ))
        })?;
        self.count_body(&body)
    }

    /// A count_tokens body's input tokens (also Claude's on Vertex AI).
    pub(crate) fn count_body(&self, body: &Value) -> Result<u64, Failure> {
        let obj = body
            .as_object()
            .ok_or_else(|| invalid("Input should be a valid dictionary"))?;
        if let Some(extra) = obj.keys().find(|k| !COUNT_FIELDS.contains(&k.as_str())) {
            return Err(invalid(format!("{extra}: Extra inputs are not permitted")));
        }
        // The rest is checked as a Messages request's, with room for any
        // thinking budget.
        let mut message = obj.clone();
        message.insert("max_tokens".into(), json!(u32::MAX));
        let p = self.parse(&Value::Object(message))?;
        Ok(p.prompt_words.max(1))
    }
}

impl Dialect for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn handles(&self, path: &str) -> bool {
        path.ends_with("/v1/messages")
    }

    fn has_call(&self, path: &str) -> bool {
        path.ends_with("/v1/messages/count_tokens")
    }

    fn call(&self, req: &Request, _path: &str) -> Reply {
        if req.method() != "POST" {
            let body = json!({"type": "error", "error": {"type": "invalid_request_error",
                              "message": "Method Not Allowed"}});
            return Reply {
                status: 405,
                body: to_json(&body),
                retry_after: None,
            };
        }
        match self.count_tokens(req) {
            Ok(tokens) => Reply {
                status: 200,
                body: to_json(&json!({"input_tokens": tokens})),
                retry_after: None,
            },
            Err(f) => self.error(&f),
        }
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        // Exactly the account's key; other vendors' headers are ignored.
        if req
            .header("x-api-key")
            .is_none_or(|k| !keys::matches("anthropic", k))
        {
            return Err(Failure::Auth("invalid x-api-key".into()));
        }
        match req.header("anthropic-version") {
            Some(VERSION) => Ok(()),
            None => Err(invalid("anthropic-version: header is required")),
            Some(v) => Err(invalid(format!(
                "anthropic-version: invalid version '{v}'; expected '{VERSION}'"
            ))),
        }
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        let obj = body
            .as_object()
            .ok_or_else(|| invalid("Input should be a valid dictionary"))?;
        if let Some(extra) = obj.keys().find(|k| !TOP_LEVEL.contains(&k.as_str())) {
            return Err(invalid(format!("{extra}: Extra inputs are not permitted")));
        }
        let model = match obj.get("model") {
            None => return Err(invalid("model: Field required")),
            Some(Value::String(m)) => m.clone(),
            Some(_) => return Err(invalid("model: Input should be a valid string")),
        };
        let max_tokens = match obj.get("max_tokens") {
            None => return Err(invalid("max_tokens: Field required")),
            Some(v) => match v.as_i64() {
                Some(n) if n >= 1 => n as u64,
                Some(_) => {
                    return Err(invalid(
                        "max_tokens: Input should be greater than or equal to 1",
                    ))
                }
                None => return Err(invalid("max_tokens: Input should be a valid integer")),
            },
        };
        check_unit_range(obj, "temperature")?;
        check_unit_range(obj, "top_p")?;
        let set = |k: &str| obj.get(k).is_some_and(|v| !v.is_null());
        if set("temperature") && set("top_p") && !takes_temperature_and_top_p(&model) {
            return Err(invalid(
                "`temperature` and `top_p` cannot both be specified for this model. Please use only one.",
            ));
        }
        let messages = match obj.get("messages") {
            None => return Err(invalid("messages: Field required")),
            Some(Value::Array(m)) => m,
            Some(_) => return Err(invalid("messages: Input should be a valid list")),
        };
        if messages.is_empty() {
            return Err(invalid(
                "messages: List should have at least 1 item after validation, not 0",
            ));
        }

        let thinking = check_thinking(obj, max_tokens, &model)?;
        let found = breakpoints(obj.get("tools"))
            + breakpoints(obj.get("system"))
            + messages
                .iter()
                .map(|m| breakpoints(m.get("content")))
                .sum::<usize>();
        if found > MAX_BREAKPOINTS {
            return Err(invalid(format!(
                "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
            )));
        }

        let system = system_text(obj.get("system"))?;
        let mut p = Prompt {
            model,
            max_tokens: Some(max_tokens),
            prompt_words: count_words(&system),
            anthropic_thinking: thinking,
            ..Prompt::default()
        };
        // The cached prefix: tools, system, then messages, up to the last
        // breakpoint (at message granularity).
        let mut cached_upto = (breakpoints(obj.get("tools")) + breakpoints(obj.get("system")) > 0)
            .then_some((None, p.prompt_words));
        // The last assistant message: its position, first block and tool use.
        let mut last_assistant: Option<(usize, String, bool)> = None;
        // tool_use ids of the previous assistant message awaiting results.
        let mut pending: Vec<String> = Vec::new();
        let mut last: Option<(bool, MessageInfo)> = None;
        let mut tool_blocks = false;
        for (i, m) in messages.iter().enumerate() {
            // A system message between the turns (the SDK's
            // `SystemMessageParam`): text only, read as system text.
            if m.get("role").and_then(Value::as_str) == Some("system") {
                let text = system_text(m.get("content")).map_err(|_| {
                    invalid(format!(
                        "messages.{i}.content: Input should be a valid string or a list of text blocks"
                    ))
                })?;
                p.prompt_words += count_words(&text);
                if breakpoints(m.get("content")) > 0 {
                    cached_upto = Some((Some(i), p.prompt_words));
                }
                continue;
            }
            let (user, info) = check_message(i, m, thinking)?;
            if !user {
                last_assistant = Some((i, info.first_block.clone(), !info.tool_use_ids.is_empty()));
            }
            // Every tool_use needs its tool_result in the very next message,
            // and every tool_result needs a tool_use just before it.
            let answered: HashSet<&str> = info.tool_result_ids.iter().map(String::as_str).collect();
            let missing: Vec<&str> = pending
                .iter()
                .map(String::as_str)
                .filter(|id| !(user && answered.contains(id)))
                .collect();
            if !missing.is_empty() {
                return Err(invalid(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks \
                     immediately after: {}. Each `tool_use` block must have a corresponding \
                     `tool_result` block in the next message.",
                    missing.join(", ")
                )));
            }
            if let Some(stray) = info.tool_result_ids.iter().find(|id| !pending.contains(id)) {
                return Err(invalid(format!(
                    "messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` \
                     blocks: {stray}. Each `tool_result` block must have a corresponding \
                     `tool_use` block in the previous message."
                )));
            }
            pending.clone_from(&info.tool_use_ids);
            tool_blocks |= !info.tool_use_ids.is_empty() || !info.tool_result_ids.is_empty();
            p.prior_tool_calls += info.tool_use_ids.len() as u64;
            p.prompt_words += count_words(&info.text)
                + info
                    .tool_result_texts
                    .iter()
                    .map(|t| count_words(t))
                    .sum::<u64>();
            if user && !info.text.is_empty() {
                p.last_user_text.clone_from(&info.text);
            }
            if info.breakpoints > 0 {
                cached_upto = Some((Some(i), p.prompt_words));
            }
            last = Some((user, info));
        }
        let new_turn = matches!(last, Some((true, _)));
        if let Some((true, info)) = last {
            if !info.tool_result_ids.is_empty() {
                p.tool_results = Some(info.tool_result_texts);
            }
        }

        p.stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
        p.stop = match obj.get("stop_sequences") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(_) => return Err(invalid("stop_sequences: Input should be a valid list")),
        };
        p.tools = parse_tools(obj)?;
        p.anthropic_server_loop = new_turn
            && obj
                .get("tools")
                .and_then(Value::as_array)
                .is_some_and(|tools| tools.iter().any(is_web_search));
        // The API's answer to tool blocks without tool definitions
        // (github.com/anthropics/anthropic-sdk-python/issues/494).
        if tool_blocks && p.tools.is_empty() {
            return Err(invalid(
                "Requests which include `tool_use` or `tool_result` blocks must define tools.",
            ));
        }
        p.tool_choice = parse_tool_choice(obj.get("tool_choice"))?;
        // With thinking on, the assistant turn of the ongoing tool use must
        // start with its (signed) thinking (docs.claude.com, "Extended
        // thinking with tool use": preserving thinking blocks).
        if let Some((i, first, true)) = last_assistant.filter(|_| thinking) {
            if first != "thinking" && first != "redacted_thinking" {
                return Err(invalid(format!(
                    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. \
                     When `thinking` is enabled, a final `assistant` message must start with a thinking block \
                     (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you \
                     include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. \
                     Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
                )));
            }
        }
        if let Some((upto, words)) = cached_upto.filter(|(_, w)| *w >= MIN_CACHEABLE_WORDS) {
            let prefix = json!([
                obj.get("tools"),
                obj.get("system"),
                upto.map_or(&[][..], |i| messages.get(..=i).unwrap_or_default())
            ]);
            let key = crate::sigv4::hex(&crate::sigv4::sha256(to_json(&prefix).as_bytes()));
            p.anthropic_cache = Some((key, words));
        }
        p.json = json_instruction(&system);
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        let (status, kind, message): (u16, &str, String) = match failure {
            Failure::Auth(m) => (401, "authentication_error", m.clone()),
            Failure::Invalid(m) | Failure::Param { message: m, .. } => {
                (400, "invalid_request_error", m.clone())
            }
            Failure::ContextLength => (
                400,
                "invalid_request_error",
                "prompt is too long: 250000 tokens > 200000 maximum".into(),
            ),
            Failure::Status(s) => {
                let (kind, message) = match s {
                    400 => ("invalid_request_error", "Invalid request."),
                    401 => ("authentication_error", "invalid x-api-key"),
                    403 => (
                        "permission_error",
                        "Your API key does not have permission to use the specified resource.",
                    ),
                    404 => ("not_found_error", "Not found"),
                    413 => (
                        "request_too_large",
                        "Request exceeds the maximum allowed number of bytes.",
                    ),
                    429 => (
                        "rate_limit_error",
                        "Number of request tokens has exceeded your per-minute rate limit.",
                    ),
                    529 => ("overloaded_error", "Overloaded"),
                    503 => ("api_error", "Service unavailable"),
                    _ => ("api_error", "Internal server error"),
                };
                (*s, kind, message.to_owned())
            }
        };
        let body = json!({"type": "error", "error": {"type": kind, "message": message}});
        Reply {
            status,
            body: to_json(&body),
            retry_after: (status == 429).then_some("7"),
        }
    }

    fn tool_preface(&self) -> Option<&'static str> {
        Some("Let me check.")
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        let mut content = Vec::new();
        let thinking = thinking_text(p);
        if let Some(t) = &thinking {
            content
                .push(json!({"type": "thinking", "thinking": t, "signature": claude_signature(t)}));
        }
        let thought = thinking.as_deref().map_or(0, count_words);
        if !a.text.is_empty() || a.tool_calls.is_empty() {
            content.push(json!({"type": "text", "text": a.text}));
        }
        for c in &a.tool_calls {
            content.push(json!({"type": "tool_use", "id": format!("toolu_{}", c.n),
                                "name": c.name, "input": c.arguments}));
        }
        if a.finish == Finish::PauseTurn {
            content.push(search_under_way(p));
        }
        let (reason, sequence) = stop_reason(&a.finish);
        json!({
            "id": format!("msg_mock{}", meta.seq),
            "type": "message",
            "role": "assistant",
            "model": p.model,
            "content": content,
            "stop_reason": reason,
            "stop_sequence": sequence,
            // input_tokens counts the tokens not read from the cache.
            "usage": usage(p, a, a.completion_tokens + thought),
        })
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        let mut events = Vec::with_capacity(a.chunks.len() + 10);
        events.push(event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": format!("msg_mock{}", meta.seq), "type": "message", "role": "assistant",
                "model": p.model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": usage(p, a, 1)}}),
        ));
        let mut index = 0;
        let thinking = thinking_text(p);
        if let Some(t) = &thinking {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ));
            for c in crate::answer::word_chunks(t) {
                events.push(delta_event(
                    0,
                    json!({"type": "thinking_delta", "thinking": c}),
                ));
            }
            events.push(delta_event(
                0,
                json!({"type": "signature_delta", "signature": claude_signature(t)}),
            ));
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
            index = 1;
        }
        if !a.text.is_empty() || a.tool_calls.is_empty() {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}}),
            ));
            events.push(event("ping", json!({"type": "ping"})));
            for c in &a.chunks {
                events.push(delta_event(index, json!({"type": "text_delta", "text": c})));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        for c in &a.tool_calls {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": format!("toolu_{}", c.n), "name": c.name, "input": {}}}),
            ));
            // The real API opens every tool_use block with an empty fragment.
            let empty = std::iter::once("");
            for frag in empty.chain(fragments(&c.arguments_json)) {
                events.push(delta_event(
                    index,
                    json!({"type": "input_json_delta", "partial_json": frag}),
                ));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        if a.finish == Finish::PauseTurn {
            let mut block = search_under_way(p);
            let input = block.get("input").map(to_json).unwrap_or_default();
            block["input"] = json!({});
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": block}),
            ));
            events.push(delta_event(
                index,
                json!({"type": "input_json_delta", "partial_json": input}),
            ));
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        let (reason, sequence) = stop_reason(&a.finish);
        events.push(event(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": reason, "stop_sequence": sequence},
                   "usage": {"output_tokens": a.completion_tokens
                       + thinking.as_deref().map_or(0, count_words)}}),
        ));
        events.push(event("message_stop", json!({"type": "message_stop"})));
        events
    }

    fn stream_error(&self) -> SseEvent {
        SseEvent {
            name: Some("error"),
            data: r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
                .into(),
            delta: false,
        }
    }
}

#[cfg(test)]
mod count_tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn post(body: &str) -> Reply {
        let raw = format!(
            "POST /v1/messages/count_tokens HTTP/1.1\r\nx-api-key: sk-mock-anthropic\r\n\
             anthropic-version: {VERSION}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let req = crate::http::parse(&raw);
        Anthropic.call(&req, req.path())
    }

    #[test]
    fn counts_what_a_message_would_use_and_refuses_what_anthropic_refuses() {
        let counted = post(
            r#"{"model":"m","system":"be brief","messages":[{"role":"user","content":"four words right here"}]}"#,
        );
        assert_eq!(counted.status, 200);
        assert_eq!(
            serde_json::from_str::<Value>(&counted.body).unwrap(),
            json!({"input_tokens": 6})
        );
        for (body, message) in [
            (
                r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#,
                "max_tokens: Extra inputs are not permitted",
            ),
            (
                r#"{"messages":[{"role":"user","content":"hi"}]}"#,
                "model: Field required",
            ),
            (r#"{"model":"m"}"#, "messages: Field required"),
        ] {
            let refused = post(body);
            assert_eq!(refused.status, 400, "{body}");
            assert!(refused.body.contains(message), "{}", refused.body);
        }
    }

    #[test]
    fn thinking_signed_on_bedrock_verifies_and_a_foreign_signature_does_not() {
        let turn = |signature: String| {
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": signature},
                {"type": "text", "text": "calling"}]})
        };
        // Bedrock's mock signs Claude's thinking with the same scheme.
        let bedrock = crate::answer::claude_signature("t");
        assert!(check_message(1, &turn(bedrock), true).is_ok());
        for foreign in [crate::answer::gemini_signature("t"), "forged".to_owned()] {
            assert!(matches!(check_message(1, &turn(foreign), true),
                Err(Failure::Invalid(m)) if m.contains("Invalid `signature`")));
        }
    }
}
