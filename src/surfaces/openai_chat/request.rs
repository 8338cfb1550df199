//! OpenAI Chat Completions requests: read strictly onto the client's wire
//! types (`wire::openai_chat::client`: parse errors name the field,
//! `messages[2].role: ...`, duplicate keys are refused at every depth),
//! mapped onto the neutral [`ChatRequest`], then checked for what typed
//! parsing cannot express. Fields we do not model are kept in `extra` so
//! OpenAI-compatible upstreams still receive them (`web_search_options`
//! too, besides its neutral `web_search`).

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::error::GatewayError;
use crate::model::json::{body_error, Strict};
use crate::model::request::*;
use crate::wire::openai_chat::client;

impl ChatRequest {
    /// Parses and validates a unified request body.
    pub fn parse(body: &[u8]) -> Result<Self, GatewayError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(GatewayError::invalid("body", "request body is empty"));
        }
        let wire = serde_json::from_slice::<client::Request>(body).map_err(body_error)?;
        let request = neutral(wire, body.len());
        request.validate()?;
        Ok(request)
    }

    /// Checks that typed parsing cannot express.
    fn validate(&self) -> Result<(), GatewayError> {
        if self.model.is_empty() {
            return Err(GatewayError::invalid("model", "model must not be empty"));
        }
        if self.model.len() > MAX_MODEL_NAME || self.model.chars().any(char::is_control) {
            return Err(GatewayError::invalid(
                "model",
                "model must be at most 256 characters without control characters",
            ));
        }
        if self.messages.is_empty() {
            return Err(GatewayError::invalid(
                "messages",
                "messages must not be empty",
            ));
        }
        if self.messages.len() > MAX_MESSAGES {
            return Err(GatewayError::invalid(
                "messages",
                format!("at most {MAX_MESSAGES} messages are accepted"),
            ));
        }
        if let Some(t) = self.temperature {
            if !(0.0..=2.0).contains(&t) {
                return Err(GatewayError::invalid(
                    "temperature",
                    "temperature must be between 0 and 2",
                ));
            }
        }
        if let Some(p) = self.top_p {
            if !(0.0..=1.0).contains(&p) {
                return Err(GatewayError::invalid(
                    "top_p",
                    "top_p must be between 0 and 1",
                ));
            }
        }
        if self.top_k.is_none() && self.extra.get("top_k").is_some_and(|k| !k.is_null()) {
            return Err(GatewayError::invalid(
                "top_k",
                "top_k must be a non-negative integer",
            ));
        }
        for (field, value) in [
            ("max_tokens", self.max_tokens),
            ("max_completion_tokens", self.max_completion_tokens),
            ("n", self.n),
            (
                "reasoning.max_tokens",
                self.reasoning.and_then(|r| r.budget_tokens),
            ),
        ] {
            if value == Some(0) {
                return Err(GatewayError::invalid(
                    field,
                    format!("{field} must be at least 1"),
                ));
            }
        }
        if self.n.is_some_and(|n| n > MAX_CHOICES) {
            return Err(GatewayError::invalid(
                "n",
                format!("n must be at most {MAX_CHOICES}"),
            ));
        }
        for (i, message) in self.messages.iter().enumerate() {
            match message {
                Message::Assistant { tool_calls, .. } => {
                    for (j, call) in tool_calls.iter().enumerate() {
                        let args = call.function.arguments.trim();
                        if args.is_empty() {
                            continue;
                        }
                        if let Err(e) = serde_json::from_str::<Strict>(args) {
                            return Err(GatewayError::invalid(
                                format!("messages[{i}].tool_calls[{j}].function.arguments"),
                                format!("tool call arguments must be a string of JSON: {e}"),
                            ));
                        }
                    }
                }
                Message::Tool { tool_call_id, .. } if tool_call_id.is_empty() => {
                    return Err(GatewayError::invalid(
                        format!("messages[{i}].tool_call_id"),
                        "tool messages need a tool_call_id",
                    ));
                }
                _ => {}
            }
            let content = match message {
                Message::System { content, .. }
                | Message::Developer { content, .. }
                | Message::User { content, .. }
                | Message::Tool { content, .. } => Some(content),
                Message::Assistant { content, .. } => content.as_ref(),
            };
            if let Some(Content::Parts(parts)) = content {
                for (j, part) in parts.iter().enumerate() {
                    if let ContentPart::ImageUrl { image_url, .. } = part {
                        image_url.parse().map_err(|e| {
                            GatewayError::invalid(
                                format!("messages[{i}].content[{j}].image_url.url"),
                                e,
                            )
                        })?;
                    }
                }
            }
        }
        if let Some(ToolChoice::Function(name)) = &self.tool_choice {
            if !self.tools.iter().any(|t| &t.function.name == name) {
                return Err(GatewayError::invalid(
                    "tool_choice",
                    format!("tool_choice names '{name}', which is not in tools"),
                ));
            }
        }
        Ok(())
    }
}

/// The request as the client wrote it, as the neutral request: the one
/// place `extra` is written.
fn neutral(r: client::Request, source_len: usize) -> ChatRequest {
    let mut extra: Map<String, Value> = r
        .extra
        .into_iter()
        .map(|(key, value)| (key.into_owned(), value))
        .collect();
    // Typed for the vendors with a search of their own, and kept as written
    // for OpenAI's.
    let web_search = r.web_search_options.and_then(|options| {
        let given = !options.json.is_null();
        extra.insert("web_search_options".to_owned(), options.json);
        given.then(|| WebSearch {
            allowed_domains: Vec::new(),
            user_location: options.user_location.map(|l| UserLocation {
                city: l.city,
                region: l.region,
                country: l.country,
                timezone: l.timezone,
            }),
        })
    });
    let reasoning = match (r.reasoning, r.reasoning_effort) {
        (Some(options), _) => Some(Reasoning {
            effort: match (options.effort(), options.enabled) {
                (Some(effort), _) => Some(effort),
                (None, Some(false)) => Some(Effort::None),
                (None, _) => None,
            },
            budget_tokens: options.max_tokens,
        }),
        (None, effort) => effort.map(|effort| Reasoning {
            effort: Some(effort),
            budget_tokens: None,
        }),
    };
    ChatRequest {
        model: r.model.into_owned(),
        messages: r
            .messages
            .into_iter()
            .map(message)
            .collect::<Vec<_>>()
            .into(),
        tools: r.tools.into_iter().map(tool).collect::<Vec<_>>().into(),
        tool_choice: r.tool_choice.map(|choice| match choice {
            client::ToolChoice::None => ToolChoice::None,
            client::ToolChoice::Auto => ToolChoice::Auto,
            client::ToolChoice::Required => ToolChoice::Required,
            client::ToolChoice::Function(name) => ToolChoice::Function(name),
        }),
        parallel_tool_calls: r.parallel_tool_calls,
        response_format: r.response_format.map(|format| match format {
            client::ResponseFormat::Text => ResponseFormat::Text,
            client::ResponseFormat::JsonObject => ResponseFormat::JsonObject,
            client::ResponseFormat::JsonSchema { json_schema: s } => ResponseFormat::JsonSchema {
                json_schema: JsonSchema {
                    name: s.name,
                    description: s.description,
                    schema: s.schema,
                    strict: s.strict,
                },
            },
        }),
        temperature: r.temperature,
        top_p: r.top_p,
        max_tokens: r.max_tokens,
        max_completion_tokens: r.max_completion_tokens,
        stop: r.stop,
        seed: r.seed,
        // Not OpenAI's (OpenAI-compatible servers take it, so it stays in
        // `extra` for them), but the other vendors' `top_k`.
        top_k: extra
            .get("top_k")
            .and_then(Value::as_u64)
            .and_then(|k| u32::try_from(k).ok()),
        reasoning,
        user: r.user.map(Cow::into_owned),
        n: r.n,
        stream: r.stream,
        include_usage: r
            .stream_options
            .and_then(|o| o.include_usage)
            .unwrap_or(false),
        request_id: r.request_id.map(Cow::into_owned),
        extra,
        source_len,
        native_only: None,
        web_search,
    }
}

fn tool(t: client::ChatTool) -> Tool {
    let client::ToolKind::Function = t.kind;
    Tool {
        kind: ToolKind::Function,
        function: FunctionDef {
            name: t.function.name.into_owned(),
            description: t.function.description,
            parameters: t.function.parameters,
            strict: t.function.strict,
        },
        cache_control: t.cache_control.map(cache_control),
    }
}

fn cache_control(c: client::CacheControlIn) -> CacheControl {
    CacheControl {
        ttl: c.ttl.map(|ttl| ttl.as_str().to_owned()),
    }
}

fn message(m: client::Message) -> Message {
    match m {
        client::Message::System { content: c, name } => Message::System {
            content: content(c),
            name: name.map(Cow::into_owned),
        },
        client::Message::Developer { content: c, name } => Message::Developer {
            content: content(c),
            name: name.map(Cow::into_owned),
        },
        client::Message::User { content: c, name } => Message::User {
            content: content(c),
            name: name.map(Cow::into_owned),
        },
        client::Message::Assistant {
            content: c,
            reasoning_content,
            reasoning_details,
            tool_calls,
            refusal,
            name,
        } => Message::Assistant {
            content: c.map(content),
            reasoning: thinking(reasoning_content, reasoning_details),
            tool_calls: tool_calls
                .into_iter()
                .map(|call| ToolCall {
                    id: call.id.into_owned(),
                    kind: call.kind.into_owned(),
                    function: FunctionCall {
                        name: call.function.name.into_owned(),
                        arguments: call.function.arguments.into_owned(),
                    },
                })
                .collect(),
            refusal: refusal.map(Cow::into_owned),
            name: name.map(Cow::into_owned),
        },
        client::Message::Tool {
            content: c,
            tool_call_id,
        } => {
            let content = content(c);
            // A breakpoint on any part of a result is one after the result.
            let cache_control = match &content {
                Content::Parts(parts) => {
                    parts.iter().rev().find_map(|p| p.cache_control().cloned())
                }
                Content::Text(_) => None,
            };
            Message::Tool {
                content,
                tool_call_id: tool_call_id.into_owned(),
                is_error: false,
                cache_control,
            }
        }
    }
}

/// An assistant message's reasoning: its `reasoning_details` blocks when
/// it has them (they carry the signatures), else `reasoning_content` as one
/// unsigned block.
fn thinking(
    content: Option<Cow<str>>,
    details: Option<Vec<client::ReasoningBlock>>,
) -> Vec<Thinking> {
    match details {
        Some(blocks) if !blocks.is_empty() => blocks
            .into_iter()
            .map(|b| Thinking {
                text: b.text.into_owned(),
                signature: b.signature.map(Cow::into_owned),
                redacted: b.redacted.map(Cow::into_owned),
            })
            .collect(),
        _ => content
            .filter(|t| !t.is_empty())
            .map(|text| Thinking {
                text: text.into_owned(),
                ..Thinking::default()
            })
            .into_iter()
            .collect(),
    }
}

fn content(c: client::Content) -> Content {
    match c {
        client::Content::Text(text) => Content::Text(text.into_owned()),
        client::Content::Parts(parts) => Content::Parts(
            parts
                .into_iter()
                .map(|part| match part {
                    client::ContentPart::Text {
                        text,
                        cache_control: c,
                    } => ContentPart::Text {
                        text: text.into_owned(),
                        cache_control: c.map(cache_control),
                    },
                    client::ContentPart::ImageUrl {
                        image_url,
                        cache_control: c,
                    } => ContentPart::ImageUrl {
                        image_url: ImageUrl {
                            url: image_url.url.into_owned(),
                            detail: image_url.detail.map(Cow::into_owned),
                        },
                        cache_control: c.map(cache_control),
                    },
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ChatRequest, GatewayError> {
        ChatRequest::parse(s.as_bytes())
    }

    #[test]
    fn duplicate_keys_are_refused_at_every_depth() {
        let m = r#""model":"m","messages":[{"role":"user","content":"hi"}]"#;
        let tool = |params: &str| {
            format!(
                r#"{{{m},"tools":[{{"type":"function","function":{{"name":"a"}}}},{{"type":"function","function":{{"name":"f","parameters":{params}}}}}]}}"#
            )
        };
        for (body, param) in [
            (
                tool(r#"{"type":"object","properties":{"x":{},"x":{}}}"#),
                "tools[1].function.parameters.properties.x",
            ),
            (
                format!(r#"{{{m},"metadata":{{"a":1,"a":2}}}}"#),
                "metadata.a",
            ),
            (
                format!(r#"{{{m},"logit_bias":[{{"k":1,"k":1}}]}}"#),
                "logit_bias[0].k",
            ),
            (
                format!(
                    r#"{{{m},"response_format":{{"type":"json_schema","json_schema":{{"name":"n","schema":{{"a":{{"b":1,"b":2}}}}}}}}}}"#
                ),
                "response_format.json_schema.schema.a.b",
            ),
            (
                format!(
                    r#"{{{m},"tools":[{{"type":"function","function":{{"name":"f"}}}}],"tool_choice":{{"type":"function","type":"function","function":{{"name":"f"}}}}}}"#
                ),
                "tool_choice.type",
            ),
        ] {
            let e = parse(&body).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}: {}", e.message);
            assert!(e.message.contains("duplicate field"), "{}", e.message);
        }
        let e = parse(
            r#"{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1,\"a\":2}"}}]}]}"#,
        )
        .unwrap_err();
        assert_eq!(
            e.param.as_deref(),
            Some("messages[0].tool_calls[0].function.arguments"),
            "{}",
            e.message
        );
        assert!(e.message.contains("duplicate field"), "{}", e.message);
    }

    #[test]
    fn tool_parameters_must_be_an_object() {
        for params in [r#""abc""#, "[]", "1", "true"] {
            let body = format!(
                r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"tools":[{{"type":"function","function":{{"name":"f","parameters":{params}}}}}]}}"#
            );
            let e = parse(&body).unwrap_err();
            assert_eq!(
                e.param.as_deref(),
                Some("tools[0].function.parameters"),
                "{}",
                e.message
            );
            assert!(
                e.message.contains("must be a JSON Schema object"),
                "{}",
                e.message
            );
        }
        let ok = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":null}}]}"#;
        assert_eq!(parse(ok).unwrap().tools[0].function.parameters, None);
    }

    #[test]
    fn parses_a_full_request() {
        let r = parse(
            r#"{"model":"m","messages":[
                {"role":"system","content":"be brief"},
                {"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
                {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
                {"role":"tool","tool_call_id":"c1","content":"42"}],
              "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
              "tool_choice":{"type":"function","function":{"name":"f"}},
              "temperature":0.5,"top_p":0.9,"max_tokens":10,"stop":"END","seed":7,"user":"u",
              "stream":true,"stream_options":{"include_usage":true},"presence_penalty":0.1}"#,
        )
        .unwrap();
        assert_eq!(r.messages.len(), 4);
        assert_eq!(r.tool_choice, Some(ToolChoice::Function("f".into())));
        assert_eq!(r.stop, vec!["END".to_string()]);
        assert!(r.stream && r.include_usage);
        assert!(r.has_images());
        assert_eq!(
            r.extra.get("presence_penalty"),
            Some(&serde_json::json!(0.1))
        );
    }

    #[test]
    fn top_k_is_the_other_vendors_and_kept_for_openai_compatible_servers() {
        let with = |k: &str| {
            parse(&format!(
                r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"top_k":{k}}}"#
            ))
        };
        let r = with("40").unwrap();
        assert_eq!(r.top_k, Some(40));
        assert_eq!(r.extra["top_k"], 40);
        assert_eq!(with("null").unwrap().top_k, None);
        for bad in ["-1", "1.5", r#""40""#] {
            assert_eq!(
                with(bad).unwrap_err().param.as_deref(),
                Some("top_k"),
                "{bad}"
            );
        }
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                r#"{"model":"m","messages":[{"role":"robot","content":"x"}]}"#,
                "messages[0].role",
            ),
            (
                r#"{"model":"m","messages":[{"content":"x"}]}"#,
                "messages[0].role",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","content":"x"}]}"#,
                "messages[1].tool_call_id",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":5}]}"#,
                "messages[0].content",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":null}]}"#,
                "messages[0].content",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user"}]}"#,
                "messages[0].content",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":"a","content":"b"}]}"#,
                "messages[0].content",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","role":"system","content":"a"}]}"#,
                "messages[0].role",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}"#,
                "messages[0].content[0].text",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":[{"text":"x"}]}]}"#,
                "messages[0].content[0].type",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"video"}]}]}"#,
                "messages[0].content[1].type",
            ),
            (r#"{"model":"m","messages":[]}"#, "messages"),
            (r#"{"model":"m"}"#, "messages"),
            (r#"{"messages":[{"role":"user","content":"x"}]}"#, "model"),
            (r#"{"model":3,"messages":[]}"#, "model"),
            (
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":"hot"}"#,
                "temperature",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":3}"#,
                "temperature",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"top_p":1.5}"#,
                "top_p",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":-1}"#,
                "max_tokens",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"sometimes"}"#,
                "tool_choice",
            ),
            (
                r#"{"model":"m","model":"n","messages":[{"role":"user","content":"x"}]}"#,
                "model",
            ),
            (
                r#"{"model":"m\nx","messages":[{"role":"user","content":"x"}]}"#,
                "model",
            ),
            (
                r#"{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{oops"}}]}]}"#,
                "messages[0].tool_calls[0].function.arguments",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]}"#,
                "messages[0].content[0].image_url.url",
            ),
        ];
        for (body, param) in cases {
            let err = parse(body).unwrap_err();
            assert_eq!(err.param.as_deref(), Some(param), "{body}: {}", err.message);
            assert_eq!(err.status(), 400);
        }
    }

    #[test]
    fn messages_in_any_field_order_and_with_fields_we_do_not_model() {
        let r = parse(
            r#"{"model":"m","messages":[
                {"content":"be brief","role":"system","name":"ops"},
                {"content":[{"text":"hi","type":"text","cache":1}],"role":"user"},
                {"role":"assistant","content":null,"refusal":null,"tool_calls":null,"annotations":[]},
                {"tool_call_id":"c1","role":"tool","content":"42"},
                {"role":"developer","content":"x","audio":null}]}"#,
        )
        .unwrap();
        assert_eq!(
            *r.messages,
            vec![
                Message::System {
                    content: Content::Text("be brief".into()),
                    name: Some("ops".into())
                },
                Message::User {
                    content: Content::Parts(vec![ContentPart::text("hi")]),
                    name: None
                },
                Message::Assistant {
                    content: None,
                    reasoning: vec![],
                    tool_calls: vec![],
                    refusal: None,
                    name: None
                },
                Message::Tool {
                    content: Content::Text("42".into()),
                    tool_call_id: "c1".into(),
                    is_error: false,
                    cache_control: None,
                },
                Message::Developer {
                    content: Content::Text("x".into()),
                    name: None
                },
            ]
        );
    }

    #[test]
    fn non_objects_and_bad_json_are_rejected() {
        for body in ["", "[]", "\"x\"", "{", "{\"model\":\"m\",}", "\u{0}"] {
            let err = parse(body).unwrap_err();
            assert_eq!(err.status(), 400, "{body}");
        }
        let err = ChatRequest::parse(b"{\"model\":\"\xff\"}").unwrap_err();
        assert_eq!(err.status(), 400);
    }

    #[test]
    fn round_trips_to_openai_json() {
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"logprobs":true}"#;
        let r = parse(body).unwrap();
        let wire = crate::wire::openai_chat::Request {
            breakpoints: false,
            model: "m",
            request: &r,
            stream_options: None,
            extra: Vec::new(),
        };
        let v = serde_json::to_value(&wire).unwrap();
        assert_eq!(v["messages"][0]["role"], "user");
        assert!(v.get("tools").is_none());
        // Unmodelled fields are kept aside; the OpenAI dialect sends them.
        assert_eq!(r.extra["logprobs"], true);
        assert!(v.get("logprobs").is_none());
    }

    #[test]
    fn reasoning_controls() {
        let with = |fields: &str| {
            parse(&format!(
                r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],{fields}}}"#
            ))
        };
        let r = with(r#""reasoning_effort":"minimal""#).unwrap();
        assert_eq!(
            r.reasoning,
            Some(Reasoning {
                effort: Some(Effort::Minimal),
                budget_tokens: None
            })
        );
        assert!(r.extra.is_empty(), "modelled, not kept aside");
        // OpenAI's newest values, which its SDK sends.
        for (name, effort) in [("xhigh", Effort::XHigh), ("max", Effort::Max)] {
            let r = with(&format!(r#""reasoning_effort":"{name}""#)).unwrap();
            assert_eq!(r.reasoning.and_then(|r| r.effort), Some(effort));
        }
        let r = with(r#""reasoning":{"max_tokens":2048}"#).unwrap();
        assert_eq!(r.reasoning.unwrap().budget_tokens, Some(2048));
        let r = with(r#""reasoning":{"enabled":false}"#).unwrap();
        assert_eq!(r.reasoning.unwrap().effort, Some(Effort::None));
        assert_eq!(with(r#""reasoning_effort":null"#).unwrap().reasoning, None);
        let r = with(r#""reasoning_effort":null,"reasoning":{"effort":"low"}"#).unwrap();
        assert_eq!(
            r.reasoning.unwrap().effort,
            Some(Effort::Low),
            "a null is no value"
        );
        for (fields, param) in [
            (r#""reasoning_effort":"ultra""#, "reasoning_effort"),
            (r#""reasoning_effort":3"#, "reasoning_effort"),
            (r#""reasoning":{"effort":"huge"}"#, "reasoning.effort"),
            (r#""reasoning":{"exclude":true}"#, "reasoning"),
            (r#""reasoning":{"max_tokens":0}"#, "reasoning.max_tokens"),
            (
                r#""reasoning":{"effort":"low"},"reasoning_effort":"low""#,
                "reasoning",
            ),
        ] {
            let e = with(fields).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{fields}: {}", e.message);
        }
    }

    #[test]
    fn reasoning_history_and_its_signatures() {
        let assistant = |fields: &str| -> Result<Vec<Thinking>, GatewayError> {
            let r = parse(&format!(
                r#"{{"model":"m","messages":[{{"role":"assistant","content":"a",{fields}}}]}}"#
            ))?;
            match r.messages.first() {
                Some(Message::Assistant { reasoning, .. }) => Ok(reasoning.clone()),
                other => panic!("{other:?}"),
            }
        };
        let thought = |text: &str, signature: Option<&str>| Thinking {
            text: text.into(),
            signature: signature.map(Into::into),
            redacted: None,
        };
        assert_eq!(
            assistant(r#""reasoning_content":"hmm""#).unwrap(),
            vec![thought("hmm", None)]
        );
        // Stream pieces appended as they came: one block per index.
        let details = r#""reasoning_content":"ab","reasoning_details":[
            {"type":"reasoning.text","text":"a","index":0},
            {"type":"reasoning.text","text":"b","index":0,"format":"anthropic-claude-v1"},
            {"type":"reasoning.text","signature":"s1","index":0},
            {"type":"reasoning.encrypted","data":"enc","index":1},
            {"type":"reasoning.summary","summary":"sum","index":2},
            {"type":"reasoning.text","text":"c","signature":"s2"}]"#;
        assert_eq!(
            assistant(details).unwrap(),
            vec![
                thought("ab", Some("s1")),
                Thinking {
                    redacted: Some("enc".into()),
                    ..Thinking::default()
                },
                thought("sum", None),
                thought("c", Some("s2")),
            ]
        );
        for (fields, param) in [
            (
                r#""reasoning_details":[{"type":"reasoning.other"}]"#,
                "messages[0].reasoning_details[0].type",
            ),
            (
                r#""reasoning_details":[{"type":"reasoning.encrypted"}]"#,
                "messages[0].reasoning_details[0].data",
            ),
            (
                r#""reasoning_details":[{"type":"reasoning.text","text":"a","text":"b"}]"#,
                "messages[0].reasoning_details[0]",
            ),
            (r#""reasoning_content":1"#, "messages[0].reasoning_content"),
        ] {
            let e = assistant(fields).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{fields}: {}", e.message);
        }
    }

    #[test]
    fn cache_control_on_parts_tools_and_tool_results() {
        let r = parse(
            r#"{"model":"m","messages":[
                {"role":"system","content":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]},
                {"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"},"cache_control":{"type":"ephemeral","ttl":"1h"}}]},
                {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"r","cache_control":{"type":"ephemeral"}}]}],
              "tools":[{"type":"function","function":{"name":"f"},"cache_control":{"type":"ephemeral","ttl":"5m"}}]}"#,
        )
        .unwrap();
        let ttl = |ttl: Option<&str>| {
            Some(CacheControl {
                ttl: ttl.map(Into::into),
            })
        };
        let part = |m: &Message| match m {
            Message::System { content, .. } | Message::User { content, .. } => match content {
                Content::Parts(p) => p[0].cache_control().cloned(),
                Content::Text(_) => None,
            },
            _ => None,
        };
        assert_eq!(part(&r.messages[0]), ttl(None));
        assert_eq!(part(&r.messages[1]), ttl(Some("1h")));
        assert!(
            matches!(&r.messages[3], Message::Tool { cache_control, .. } if *cache_control == ttl(None))
        );
        assert_eq!(r.tools[0].cache_control, ttl(Some("5m")));
        for (body, param) in [
            (
                r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"2h"}}]}]}"#,
                "messages[0].content[0].cache_control.ttl",
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","scope":"global"}}]}]}"#,
                "messages[0].content[0].cache_control",
            ),
        ] {
            let e = parse(body).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{}", e.message);
        }
        let e = parse(r#"{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"},"cache_control":{}}]}"#).unwrap_err();
        assert_eq!(
            e.param.as_deref(),
            Some("tools[0].cache_control"),
            "{}",
            e.message
        );
    }

    #[test]
    fn openais_prompt_cache_breakpoint_is_a_breakpoint() {
        let r = parse(
            r#"{"model":"m","messages":[
                {"role":"system","content":[{"type":"text","text":"s","prompt_cache_breakpoint":{"mode":"explicit"}}]},
                {"role":"user","content":[{"type":"text","text":"u","prompt_cache_breakpoint":{"mode":"explicit","ttl":"12h"}}]}]}"#,
        )
        .unwrap();
        let part = |m: &Message| match m {
            Message::System { content, .. } | Message::User { content, .. } => match content {
                Content::Parts(p) => p[0].cache_control().cloned(),
                Content::Text(_) => None,
            },
            _ => None,
        };
        assert_eq!(part(&r.messages[0]), Some(CacheControl { ttl: None }));
        assert_eq!(
            part(&r.messages[1]),
            Some(CacheControl {
                ttl: Some("12h".into())
            })
        );
        let refused = |breakpoint: &str| {
            let body = format!(
                r#"{{"model":"m","messages":[{{"role":"user","content":[{{"type":"text","text":"x","prompt_cache_breakpoint":{breakpoint}}}]}}]}}"#
            );
            parse(&body).unwrap_err().param
        };
        let at = "messages[0].content[0].prompt_cache_breakpoint";
        assert_eq!(
            refused(r#"{"mode":"implicit"}"#),
            Some(format!("{at}.mode"))
        );
        assert_eq!(
            refused(r#"{"mode":"explicit","ttl":"1h"}"#),
            Some(format!("{at}.ttl"))
        );
        assert_eq!(refused(r#"{"ttl":"30m"}"#), Some(at.to_owned()));
        assert_eq!(refused(r#"{"mode":"explicit","x":1}"#), Some(at.to_owned()));
    }

    #[test]
    fn web_search_options_are_the_vendors_search_and_kept_for_openai() {
        let body = |options: &str| {
            format!(
                r#"{{"model":"m","messages":[{{"role":"user","content":"x"}}],"web_search_options":{options}}}"#
            )
        };
        let r = parse(&body(
            r#"{"search_context_size":"high","user_location":{"type":"approximate","approximate":{"city":"Lyon","country":"FR","timezone":"Europe/Paris"}}}"#,
        ))
        .unwrap();
        assert_eq!(
            r.web_search,
            Some(WebSearch {
                allowed_domains: Vec::new(),
                user_location: Some(UserLocation {
                    city: Some("Lyon".into()),
                    region: None,
                    country: Some("FR".into()),
                    timezone: Some("Europe/Paris".into()),
                }),
            })
        );
        assert_eq!(
            r.extra["web_search_options"]["search_context_size"], "high",
            "kept as written for OpenAI's vendors"
        );
        assert_eq!(
            parse(&body("{}")).unwrap().web_search,
            Some(WebSearch::default())
        );
        assert_eq!(
            parse(&body(r#"{"user_location":{"type":"approximate"}}"#))
                .unwrap()
                .web_search,
            Some(WebSearch::default())
        );
        assert_eq!(parse(&body("null")).unwrap().web_search, None);
        let absent = parse(r#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#);
        assert_eq!(absent.unwrap().web_search, None);
        for (options, param) in [
            (r#"{"frobnicate":1}"#, "web_search_options.frobnicate"),
            (r#"[]"#, "web_search_options"),
            (
                r#"{"search_context_size":"huge"}"#,
                "web_search_options.search_context_size",
            ),
            (
                r#"{"search_context_size":3}"#,
                "web_search_options.search_context_size",
            ),
            (
                r#"{"user_location":{"type":"exact"}}"#,
                "web_search_options.user_location.type",
            ),
            (
                r#"{"user_location":{"city":"Lyon"}}"#,
                "web_search_options.user_location.city",
            ),
            (
                r#"{"user_location":{"approximate":{"street":"x"}}}"#,
                "web_search_options.user_location.approximate.street",
            ),
            (
                r#"{"user_location":{"approximate":{"country":1}}}"#,
                "web_search_options.user_location.approximate.country",
            ),
            (
                r#"{"user_location":{"approximate":{"city":"a","city":"b"}}}"#,
                "web_search_options.user_location.approximate.city",
            ),
        ] {
            let err = parse(&body(options)).unwrap_err();
            assert_eq!(
                err.param.as_deref(),
                Some(param),
                "{options}: {}",
                err.message
            );
        }
        let twice = r#"{"model":"m","messages":[{"role":"user","content":"x"}],"web_search_options":{},"web_search_options":{}}"#;
        assert_eq!(
            parse(twice).unwrap_err().param.as_deref(),
            Some("web_search_options")
        );
    }

    #[test]
    fn request_ids() {
        assert!(valid_request_id("0b0e6c1e-9f4c-4d7a-8d2b-1c2f3a4b5c6d"));
        assert!(!valid_request_id(""));
        assert!(!valid_request_id("a\r\nx-evil: 1"));
        assert!(!valid_request_id(&"a".repeat(129)));
    }

    #[test]
    fn image_urls() {
        let img = |u: &str| ImageUrl {
            url: u.into(),
            detail: None,
        };
        assert_eq!(
            img("data:image/png;base64,QUJD").parse().unwrap(),
            Image::Base64 {
                media_type: "image/png",
                data: "QUJD"
            }
        );
        assert_eq!(
            img("https://x/y.png").parse().unwrap(),
            Image::Url("https://x/y.png")
        );
        assert!(img("data:text/plain;base64,QQ==").parse().is_err());
    }
}
