//! Anthropic Messages requests (`POST /v1/messages`), parsed strictly into
//! the neutral [`ChatRequest`], as Anthropic itself reads them: unknown
//! fields are refused ("Extra inputs are not permitted"), duplicate keys at
//! any depth too, and every error names its field the way Anthropic does
//! (`messages.2.content.0.text`).
//!
//! Two steps: one borrowed read into the client's wire types
//! ([`crate::wire::anthropic::client`], which refuse bad JSON and duplicate
//! keys but keep wrong JSON types and unknown members), then the checks
//! and the mapping here, in Anthropic's order (top-level members in key
//! order), so a body with two faults gets the error Anthropic gives.
//!
//! Fields Anthropic knows and the neutral model cannot carry (server tools,
//! `mcp_servers`, `container`, blocks such as `search_result`) are accepted
//! and marked in [`ChatRequest::native_only`]: only a vendor speaking this
//! API (which gets the client's bytes) can take them. `service_tier` and
//! `context_management` are hints other vendors do without (dropped).

use std::borrow::Cow;

use crate::error::GatewayError;
use crate::model::json::body_error;
use crate::model::request::*;
use crate::wire::anthropic::client::{self as wire, Any, List, Tagged};
use crate::wire::loose::{Loose, Members};

mod messages;
mod options;

use options::*;

/// Server tools' `type`s start with one of these (the SDK's `ToolUnionParam`:
/// web search and fetch, code execution, bash, text editor, computer and
/// browser toolsets, memory, tool search; and the beta MCP toolset); a
/// custom tool has no `type` or `"custom"`.
const SERVER_TOOL_PREFIXES: [&str; 10] = [
    "web_search_",
    "web_fetch_",
    "code_execution_",
    "bash_",
    "text_editor_",
    "computer_",
    "browser_toolset_",
    "memory_",
    "tool_search_tool_",
    "mcp_toolset",
];

/// Content blocks Anthropic takes that the neutral model has no form for.
const NATIVE_BLOCKS: [&str; 9] = [
    "search_result",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
    "tool_reference",
];

/// Parses and validates a Messages request body.
pub fn parse(body: &[u8]) -> Result<ChatRequest, GatewayError> {
    parse_body(body, true)
}

/// A `/v1/messages/count_tokens` body: a Messages request whose
/// `max_tokens` may be left out.
pub fn parse_count(body: &[u8]) -> Result<ChatRequest, GatewayError> {
    parse_body(body, false)
}

fn parse_body(body: &[u8], generate: bool) -> Result<ChatRequest, GatewayError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(GatewayError::invalid("body", "request body is empty"));
    }
    let Loose::Object(wire) =
        serde_json::from_slice::<Any<wire::Request>>(body).map_err(body_error)?
    else {
        return Err(GatewayError::invalid(
            "body",
            "Input should be a valid dictionary",
        ));
    };
    let mut request = Parser::default().request(wire, generate)?;
    request.source_len = body.len();
    Ok(request)
}

/// A field's error, Anthropic's way: `path: message`.
fn invalid(at: &str, message: impl std::fmt::Display) -> GatewayError {
    GatewayError::invalid(at, format!("{at}: {message}"))
}

fn extra(at: &str) -> GatewayError {
    invalid(at, "Extra inputs are not permitted")
}

fn required(at: &str) -> GatewayError {
    invalid(at, "Field required")
}

/// An object, refusing the first member (in key order) not in `allowed`.
fn object<'a, T: Members<'a>, E>(
    v: Loose<'a, T, E>,
    at: &str,
    allowed: &[&str],
) -> Result<T, GatewayError> {
    let Loose::Object(object) = v else {
        return Err(invalid(at, "Input should be a valid dictionary"));
    };
    only(object, at, allowed)
}

/// Refuses an object's first member (in key order) not in `allowed`.
fn only<'a, T: Members<'a>>(object: T, at: &str, allowed: &[&str]) -> Result<T, GatewayError> {
    if let Some(key) = object.first_unknown(allowed) {
        return Err(extra(&format!("{at}.{key}")));
    }
    Ok(object)
}

fn string(v: Option<Any>, key: &str, at: &str) -> Result<String, GatewayError> {
    match v {
        None => Err(required(&format!("{at}.{key}"))),
        Some(Loose::Str(s)) => Ok(s.into_owned()),
        Some(_) => Err(invalid(
            &format!("{at}.{key}"),
            "Input should be a valid string",
        )),
    }
}

fn optional_string(v: Option<Any>, key: &str, at: &str) -> Result<Option<String>, GatewayError> {
    match v {
        None | Some(Loose::Null) => Ok(None),
        v => string(v, key, at).map(Some),
    }
}

fn optional_bool(v: Option<Any>, key: &str, at: &str) -> Result<Option<bool>, GatewayError> {
    match v {
        None | Some(Loose::Null) => Ok(None),
        Some(Loose::Bool(b)) => Ok(Some(b)),
        Some(_) => Err(invalid(
            &format!("{at}.{key}"),
            "Input should be a valid boolean",
        )),
    }
}

/// Whether a member is there and not `null`.
fn is_set<O, E>(v: &Option<Loose<O, E>>) -> bool {
    v.as_ref().is_some_and(|v| !v.is_null())
}

fn integer(v: &Any, at: &str, min: u64) -> Result<u32, GatewayError> {
    let too_small = || {
        invalid(
            at,
            format!("Input should be greater than or equal to {min}"),
        )
    };
    let (unsigned, signed) = match v {
        Loose::Number(n) => (n.as_u64(), n.as_i64()),
        _ => (None, None),
    };
    let n = match (unsigned, signed) {
        (Some(n), _) => n,
        (None, Some(_)) => return Err(too_small()),
        (None, None) => return Err(invalid(at, "Input should be a valid integer")),
    };
    if n < min {
        return Err(too_small());
    }
    u32::try_from(n).map_err(|_| invalid(at, "Input is too large"))
}

/// `temperature`, `top_p`: a number from 0 to 1.
fn unit(v: &Any, at: &str) -> Result<f64, GatewayError> {
    let x = match v {
        Loose::Number(n) => n.as_f64(),
        _ => None,
    }
    .ok_or_else(|| invalid(at, "Input should be a valid number"))?;
    if x < 0.0 {
        return Err(invalid(at, "Input should be greater than or equal to 0"));
    }
    if x > 1.0 {
        return Err(invalid(at, "Input should be less than or equal to 1"));
    }
    Ok(x)
}

fn array<O, T>(v: Loose<O, T>, at: &str) -> Result<Vec<T>, GatewayError> {
    match v {
        Loose::Array(items) => Ok(items),
        _ => Err(invalid(at, "Input should be a valid list")),
    }
}

fn cache_control(
    v: Option<Any<wire::CacheControl>>,
    at: &str,
) -> Result<Option<CacheControl>, GatewayError> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let at = format!("{at}.cache_control");
    let mut cc = object(v, &at, &["type", "ttl"])?;
    if string(cc.kind.take(), "type", &at)? != "ephemeral" {
        return Err(invalid(
            &format!("{at}.type"),
            "Input should be 'ephemeral'",
        ));
    }
    let ttl = optional_string(cc.ttl, "ttl", &at)?;
    if let Some(ttl) = &ttl {
        if ttl != "5m" && ttl != "1h" {
            return Err(invalid(
                &format!("{at}.ttl"),
                "Input should be '5m' or '1h'",
            ));
        }
    }
    Ok(Some(CacheControl { ttl }))
}

/// A tagged object and its `type`.
fn block_type<'a, T: Tagged<'a>, E>(
    v: Loose<'a, T, E>,
    at: &str,
) -> Result<(Cow<'a, str>, T), GatewayError> {
    let Loose::Object(mut object) = v else {
        return Err(invalid(at, "Input should be a valid dictionary"));
    };
    match object.take_type() {
        Some(Loose::Str(kind)) => Ok((kind, object)),
        Some(_) => Err(invalid(
            &format!("{at}.type"),
            "Input should be a valid string",
        )),
        None => Err(required(&format!("{at}.type"))),
    }
}

/// Refuses the request's first unknown member once the check has passed
/// it in key order (Anthropic checks the members in that order).
fn reached(unknown: Option<&str>, key: &str) -> Result<(), GatewayError> {
    match unknown {
        Some(first) if first < key => Err(extra(first)),
        _ => Ok(()),
    }
}

#[derive(Default)]
struct Parser {
    native_only: Option<String>,
}

/// What one user turn holds: its tool results (which become tool
/// messages, first) and its other content.
#[derive(Default)]
struct UserTurn {
    results: Vec<Message>,
    parts: Vec<ContentPart>,
}

impl Parser {
    /// Notes a field only a vendor of this API can take (the first is named).
    fn native(&mut self, at: String) {
        self.native_only.get_or_insert(at);
    }

    /// The same for `key` of an object, when it is set (not null).
    fn native_if_set<O, E>(&mut self, v: &Option<Loose<O, E>>, key: &str, at: &str) {
        if is_set(v) {
            self.native(format!("{at}.{key}"));
        }
    }

    /// The request; `generate` when it asks for an answer (`max_tokens`
    /// required then). Members in key order, each refused where it fails.
    fn request(mut self, w: wire::Request, generate: bool) -> Result<ChatRequest, GatewayError> {
        let unknown = w.unknown.as_deref();
        let mut r = ChatRequest::default();
        // Hints and account selectors other vendors do without (the
        // top-level `cache_control` marks the last cacheable block: prompt
        // caching is the vendor's own): `cache_control`,
        // `context_management`, `diagnostics`, `inference_geo`,
        // `service_tier`, `speed`, `user_profile_id`, `workspace_id`.
        reached(unknown, "container")?;
        if w.container.is_some() {
            self.native("container".into());
        }
        reached(unknown, "max_tokens")?;
        if let Some(v) = &w.max_tokens {
            r.max_tokens = Some(integer(v, "max_tokens", 1)?);
        }
        reached(unknown, "mcp_servers")?;
        if w.mcp_servers.is_some() {
            self.native("mcp_servers".into());
        }
        reached(unknown, "metadata")?;
        if let Some(v) = w.metadata {
            let m = object(v, "metadata", &["user_id"])?;
            r.user = optional_string(m.user_id, "user_id", "metadata")?;
        }
        reached(unknown, "model")?;
        let model_given = w.model.is_some();
        if let Some(v) = w.model {
            r.model = match v {
                Loose::Str(m) => m.into_owned(),
                _ => return Err(invalid("model", "Input should be a valid string")),
            }
        }
        reached(unknown, "output_config")?;
        let mut effort = None;
        if let Some(v) = w.output_config {
            let oc = object(v, "output_config", &["effort", "format"])?;
            if let Some(name) = optional_string(oc.effort, "effort", "output_config")? {
                effort = Some(effort_level(&name)?);
            }
            if let Some(format) = oc.format.filter(|f| !f.is_null()) {
                r.response_format = Some(output_format(format, "output_config.format")?);
            }
        }
        reached(unknown, "output_format")?;
        if let Some(v) = w.output_format {
            r.response_format = Some(output_format(v, "output_format")?);
        }
        reached(unknown, "stop_sequences")?;
        if let Some(v) = w.stop_sequences {
            for (i, s) in array(v, "stop_sequences")?.into_iter().enumerate() {
                match s {
                    Loose::Str(s) => r.stop.push(s.into_owned()),
                    _ => {
                        return Err(invalid(
                            &format!("stop_sequences.{i}"),
                            "Input should be a valid string",
                        ))
                    }
                }
            }
        }
        reached(unknown, "stream")?;
        if let Some(v) = w.stream {
            r.stream = match v {
                Loose::Bool(b) => b,
                Loose::Null => false,
                _ => return Err(invalid("stream", "Input should be a valid boolean")),
            }
        }
        reached(unknown, "system")?;
        if let Some(v) = w.system {
            if let Some(system) = self.system(v)? {
                r.messages.push(system);
            }
        }
        reached(unknown, "temperature")?;
        if let Some(v) = &w.temperature {
            r.temperature = Some(unit(v, "temperature")?);
        }
        reached(unknown, "thinking")?;
        let thinking = match w.thinking {
            Some(v) => thinking_config(v)?,
            None => None,
        };
        reached(unknown, "tool_choice")?;
        if let Some(v) = w.tool_choice {
            let (choice, parallel) = tool_choice(v)?;
            r.tool_choice = choice;
            r.parallel_tool_calls = parallel;
        }
        reached(unknown, "tools")?;
        if let Some(v) = w.tools {
            for (i, tool) in array(v, "tools")?.into_iter().enumerate() {
                if let Some(tool) = self.tool(tool, &format!("tools.{i}"))? {
                    r.tools.push(tool);
                }
            }
        }
        reached(unknown, "top_k")?;
        if let Some(v) = &w.top_k {
            r.top_k = Some(integer(v, "top_k", 0)?);
        }
        reached(unknown, "top_p")?;
        if let Some(v) = &w.top_p {
            r.top_p = Some(unit(v, "top_p")?);
        }
        if let Some(first) = unknown {
            return Err(extra(first));
        }
        if r.model.is_empty() {
            return Err(if model_given {
                invalid("model", "String should have at least 1 character")
            } else {
                required("model")
            });
        }
        if r.model.len() > MAX_MODEL_NAME || r.model.chars().any(char::is_control) {
            return Err(invalid(
                "model",
                "model must be at most 256 characters without control characters",
            ));
        }
        let max_tokens = match r.max_tokens {
            Some(n) => n,
            None if generate => return Err(required("max_tokens")),
            None => u32::MAX,
        };
        let Some(messages) = w.messages else {
            return Err(required("messages"));
        };
        let messages = array(messages, "messages")?;
        if messages.is_empty() {
            return Err(invalid(
                "messages",
                "List should have at least 1 item after validation, not 0",
            ));
        }
        if messages.len() > MAX_MESSAGES {
            return Err(invalid(
                "messages",
                format!("at most {MAX_MESSAGES} messages are accepted"),
            ));
        }
        for (i, m) in messages.into_iter().enumerate() {
            self.message(m, i, &mut r.messages)?;
        }
        r.reasoning = match (thinking, effort) {
            (Some(t), _) if t.budget_tokens.is_some() => {
                if t.budget_tokens.is_some_and(|b| b >= max_tokens) {
                    return Err(invalid(
                        "thinking.budget_tokens",
                        "`max_tokens` must be greater than `thinking.budget_tokens`",
                    ));
                }
                Some(Reasoning { effort, ..t })
            }
            // Adaptive thinking: the effort asked for, else none named
            // (the model decides: each vendor's own amount).
            (Some(_), effort) => Some(Reasoning {
                effort,
                budget_tokens: None,
            }),
            (None, Some(effort)) => Some(Reasoning {
                effort: Some(effort),
                budget_tokens: None,
            }),
            (None, None) => None,
        };
        if let Some(ToolChoice::Function(name)) = &r.tool_choice {
            if !r.tools.iter().any(|t| &t.function.name == name) && self.native_only.is_none() {
                return Err(invalid(
                    "tool_choice.name",
                    format!("tool_choice names '{name}', which is not in tools"),
                ));
            }
        }
        r.native_only = self.native_only.map(|field| NativeOnly {
            message: format!(
                "{field}: only providers that speak the Anthropic Messages API take this; this model group's provider does not"
            ),
            param: field,
        });
        Ok(r)
    }

    /// `system`: a string or text blocks.
    fn system(&mut self, v: wire::Content) -> Result<Option<Message>, GatewayError> {
        let content = match v {
            Loose::Null => return Ok(None),
            Loose::Str(s) if s.is_empty() => return Ok(None),
            Loose::Str(s) => Content::Text(s.into_owned()),
            Loose::Array(blocks) => {
                let parts = self.text_blocks(blocks, "system")?;
                if parts.is_empty() {
                    return Ok(None);
                }
                Content::Parts(parts)
            }
            _ => {
                return Err(invalid(
                    "system",
                    "Input should be a valid string or a valid list",
                ))
            }
        };
        Ok(Some(Message::System {
            content,
            name: None,
        }))
    }

    /// Blocks that may only be text (the system prompt, a system turn).
    fn text_blocks(
        &mut self,
        blocks: Vec<Any<wire::Block>>,
        at: &str,
    ) -> Result<Vec<ContentPart>, GatewayError> {
        let mut parts = Vec::with_capacity(blocks.len());
        for (i, block) in blocks.into_iter().enumerate() {
            let at = format!("{at}.{i}");
            let (kind, block) = block_type(block, &at)?;
            if kind != "text" {
                return Err(invalid(&format!("{at}.type"), "Input should be 'text'"));
            }
            parts.push(self.text(block, &at)?);
        }
        Ok(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(body: &str) -> ChatRequest {
        parse(body.as_bytes()).unwrap()
    }

    fn err(body: &str) -> GatewayError {
        parse(body.as_bytes()).unwrap_err()
    }

    const BASE: &str = r#""model":"g","max_tokens":4096"#;

    fn with(fields: &str) -> String {
        format!(r#"{{{BASE},{fields}}}"#)
    }

    #[test]
    fn parses_every_field() {
        let r = ok(&with(
            r#""system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral","ttl":"1h"}}],
            "messages":[
              {"role":"user","content":[{"type":"text","text":"hi"},
                {"type":"image","source":{"type":"base64","media_type":"image/png","data":"QUJD"},"cache_control":{"type":"ephemeral"}},
                {"type":"image","source":{"type":"url","url":"https://x/y.png"}},
                {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"},"title":"t"}]},
              {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},
                {"type":"redacted_thinking","data":"enc"},
                {"type":"text","text":"checking"},
                {"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}]},
              {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"42"}],"is_error":true,"cache_control":{"type":"ephemeral"}},
                {"type":"text","text":"thanks"}]}],
            "tools":[{"name":"f","description":"d","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
            "tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true},
            "stop_sequences":["X","Y"],"temperature":0.5,"top_k":5,"metadata":{"user_id":"u1"},
            "thinking":{"type":"enabled","budget_tokens":2048},"stream":true,"service_tier":"auto""#,
        ));
        assert_eq!(r.model, "g");
        assert_eq!(r.max_tokens, Some(4096));
        assert_eq!(r.stop, ["X", "Y"]);
        assert_eq!((r.temperature, r.top_k), (Some(0.5), Some(5)));
        assert_eq!(r.user.as_deref(), Some("u1"));
        assert!(r.stream);
        assert_eq!(
            r.reasoning,
            Some(Reasoning {
                effort: None,
                budget_tokens: Some(2048)
            })
        );
        assert_eq!(r.tool_choice, Some(ToolChoice::Function("f".into())));
        assert_eq!(r.parallel_tool_calls, Some(false));
        assert_eq!(r.tools[0].cache_control, Some(CacheControl::default()));
        assert_eq!(r.native_only, None);
        assert_eq!(r.messages.len(), 5, "system, user, assistant, tool, user");
        let Message::System {
            content: Content::Parts(system),
            ..
        } = &r.messages[0]
        else {
            panic!("{:?}", r.messages[0])
        };
        assert_eq!(
            system[0].cache_control(),
            Some(&CacheControl {
                ttl: Some("1h".into())
            })
        );
        let Message::User {
            content: Content::Parts(parts),
            ..
        } = &r.messages[1]
        else {
            panic!()
        };
        assert_eq!(parts.len(), 4);
        let ContentPart::ImageUrl { image_url, .. } = &parts[1] else {
            panic!()
        };
        assert_eq!(image_url.url, "data:image/png;base64,QUJD");
        assert!(matches!(&parts[3], ContentPart::Document(d) if d.title.as_deref() == Some("t")));
        let Message::Assistant {
            content,
            reasoning,
            tool_calls,
            ..
        } = &r.messages[2]
        else {
            panic!()
        };
        assert_eq!(content, &Some(Content::Text("checking".into())));
        assert_eq!(reasoning[0].signature.as_deref(), Some("sig"));
        assert_eq!(reasoning[1].redacted.as_deref(), Some("enc"));
        assert_eq!(tool_calls[0].function.arguments, r#"{"a":1}"#);
        let Message::Tool {
            tool_call_id,
            is_error,
            cache_control,
            content,
        } = &r.messages[3]
        else {
            panic!()
        };
        assert_eq!((tool_call_id.as_str(), *is_error), ("toolu_1", true));
        assert!(cache_control.is_some());
        assert_eq!(content.text(), "42");
        assert!(matches!(&r.messages[4], Message::User { .. }));
    }

    #[test]
    fn refusals_name_the_field() {
        let msg = r#""messages":[{"role":"user","content":"hi"}]"#;
        for (body, param) in [
            (
                r#"{"max_tokens":1,"messages":[{"role":"user","content":"x"}]}"#.to_owned(),
                "model",
            ),
            (
                r#"{"model":"g","messages":[{"role":"user","content":"x"}]}"#.to_owned(),
                "max_tokens",
            ),
            (format!(r#"{{{BASE}}}"#), "messages"),
            (with(r#""messages":[]"#), "messages"),
            (with(&format!(r#"{msg},"foo":1"#)), "foo"),
            (with(&format!(r#"{msg},"temperature":1.5"#)), "temperature"),
            (with(&format!(r#"{msg},"top_p":-1"#)), "top_p"),
            (with(&format!(r#"{msg},"top_k":-1"#)), "top_k"),
            (
                with(&format!(r#"{msg},"metadata":{{"user_id":"u","x":1}}"#)),
                "metadata.x",
            ),
            (
                with(&format!(
                    r#"{msg},"thinking":{{"type":"enabled","budget_tokens":100}}"#
                )),
                "thinking.budget_tokens",
            ),
            (
                with(&format!(
                    r#"{msg},"thinking":{{"type":"enabled","budget_tokens":5000}}"#
                )),
                "thinking.budget_tokens",
            ),
            (
                with(&format!(r#"{msg},"thinking":{{"type":"on"}}"#)),
                "thinking",
            ),
            (
                with(&format!(
                    r#"{msg},"tool_choice":{{"type":"tool","name":"nope"}}"#
                )),
                "tool_choice.name",
            ),
            (
                with(&format!(
                    r#"{msg},"tool_choice":{{"type":"none","disable_parallel_tool_use":true}}"#
                )),
                "tool_choice.disable_parallel_tool_use",
            ),
            (
                with(&format!(r#"{msg},"tools":[{{"name":"f"}}]"#)),
                "tools.0.input_schema",
            ),
            (
                with(&format!(
                    r#"{msg},"tools":[{{"name":"f","input_schema":{{}},"x":1}}]"#
                )),
                "tools.0.x",
            ),
            (
                with(&format!(
                    r#"{msg},"tools":[{{"type":"weird_tool","name":"f"}}]"#
                )),
                "tools.0.type",
            ),
            (
                with(&format!(r#"{msg},"stop_sequences":[1]"#)),
                "stop_sequences.0",
            ),
            (
                with(&format!(r#"{msg},"output_config":{{"effort":"huge"}}"#)),
                "output_config.effort",
            ),
            (
                with(r#""messages":[{"role":"tool","content":"x"}]"#),
                "messages.0.role",
            ),
            (
                with(r#""messages":[{"role":"user"}]"#),
                "messages.0.content",
            ),
            (
                with(r#""messages":[{"role":"user","content":"x","name":"n"}]"#),
                "messages.0.name",
            ),
            (
                with(
                    r#""messages":[{"role":"user","content":[{"type":"text","text":"x","foo":1}]}]"#,
                ),
                "messages.0.content.0.foo",
            ),
            (
                with(r#""messages":[{"role":"user","content":[{"type":"video"}]}]"#),
                "messages.0.content.0",
            ),
            (
                with(
                    r#""messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]"#,
                ),
                "messages.0.content.0",
            ),
            (
                with(
                    r#""messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":[]}]}]"#,
                ),
                "messages.0.content.0.input",
            ),
            (
                with(
                    r#""messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t"}]}]"#,
                ),
                "messages.0.content.0.signature",
            ),
            (
                with(
                    r#""messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"x"}}]}]"#,
                ),
                "messages.0.content.0.source.media_type",
            ),
            (
                with(
                    r#""messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"forever"}}]}]"#,
                ),
                "messages.0.content.0.cache_control.type",
            ),
            (
                with(
                    r#""messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"2h"}}]}]"#,
                ),
                "messages.0.content.0.cache_control.ttl",
            ),
            (
                with(r#""system":[{"type":"image"}],"messages":[{"role":"user","content":"x"}]"#),
                "system.0.type",
            ),
        ] {
            let e = err(&body);
            assert_eq!(e.param.as_deref(), Some(param), "{body}: {}", e.message);
            assert!(e.message.starts_with(param), "{}", e.message);
        }
        assert!(err(&with(&format!(r#"{msg},"foo":1"#)))
            .message
            .contains("Extra inputs are not permitted"));
    }

    #[test]
    fn duplicate_keys_and_bad_json_are_refused() {
        for body in [
            r#"{"model":"g","model":"h","max_tokens":1,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"g","max_tokens":1,"messages":[{"role":"user","content":"x","role":"user"}]}"#,
            r#"{"model":"g","max_tokens":1,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":{"a":1,"a":2}}]}"#,
        ] {
            assert!(err(body).message.contains("duplicate field"), "{body}");
        }
        // In values the typed read skips (a member it only notes, an
        // unknown one): found all the same, named by their path.
        let skipped = |extra: &str| {
            err(&format!(
                r#"{{"model":"g","max_tokens":1,"messages":[{{"role":"user","content":"x"}}],{extra}}}"#
            ))
            .message
        };
        for (extra, path) in [
            (
                r#""container":{"a":1,"a":2}"#,
                "container.a: duplicate field",
            ),
            (
                r#""foo":[0,{"b":[{"c":1,"c":1}]}]"#,
                "foo[1].b[0].c: duplicate field",
            ),
        ] {
            let message = skipped(extra);
            assert!(message.contains(path), "{extra}: {message}");
        }
        assert_eq!(err("  ").param.as_deref(), Some("body"));
        assert_eq!(err("[1]").param.as_deref(), Some("body"));
        assert_eq!(err("{").param.as_deref(), Some("body"));
    }

    #[test]
    fn native_only_fields_are_marked_not_refused() {
        let msg = r#""messages":[{"role":"user","content":"hi"}]"#;
        for (fields, first) in [
            (format!(r#"{msg},"tools":[{{"type":"web_search_20250305","name":"web_search"}}]"#), "tools.0 (web_search_20250305)"),
            (format!(r#"{msg},"mcp_servers":[]"#), "mcp_servers"),
            (r#""messages":[{"role":"user","content":[{"type":"search_result","source":"s","title":"t","content":[]}]}]"#.to_owned(), "messages.0.content.0"),
            (r#""messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"},"citations":{"enabled":true}}]}]"#.to_owned(), "messages.0.content.0.citations"),
        ] {
            let r = ok(&with(&fields));
            assert_eq!(r.native_only.map(|n| n.param).as_deref(), Some(first));
        }
        assert!(ok(&with(&format!(r#"{msg},"context_management":{{}}"#)))
            .native_only
            .is_none());
    }

    #[test]
    fn thinking_modes_and_effort() {
        let msg = r#""messages":[{"role":"user","content":"hi"}]"#;
        let reasoning = |extra: &str| ok(&with(&format!("{msg},{extra}"))).reasoning;
        assert_eq!(reasoning(r#""thinking":{"type":"disabled"}"#), None);
        assert_eq!(
            reasoning(r#""thinking":{"type":"adaptive"}"#),
            Some(Reasoning {
                effort: None,
                budget_tokens: None
            })
        );
        assert_eq!(
            reasoning(r#""thinking":{"type":"adaptive"},"output_config":{"effort":"low"}"#),
            Some(Reasoning {
                effort: Some(Effort::Low),
                budget_tokens: None
            })
        );
        assert_eq!(
            reasoning(r#""output_config":{"effort":"medium"}"#).and_then(|r| r.effort),
            Some(Effort::Medium)
        );
        let r = ok(&with(&format!(
            r#"{msg},"output_config":{{"format":{{"type":"json_schema","schema":{{"type":"object"}}}}}}"#
        )));
        assert!(matches!(
            r.response_format,
            Some(ResponseFormat::JsonSchema { .. })
        ));
    }

    #[test]
    fn tool_results_come_before_the_turn_text() {
        let r = ok(&with(
            r#""messages":[{"role":"user","content":"q"},
              {"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}},{"type":"tool_use","id":"b","name":"f","input":{}}]},
              {"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"1"},{"type":"tool_result","tool_use_id":"b"}]}],
              "tools":[{"name":"f","input_schema":{"type":"object"}}]"#,
        ));
        assert_eq!(r.messages.len(), 4, "{:?}", r.messages);
        assert!(
            matches!(&r.messages[3], Message::Tool { tool_call_id, .. } if tool_call_id == "b")
        );
        let Message::Assistant { content, .. } = &r.messages[1] else {
            panic!()
        };
        assert_eq!(content, &None);
    }
}
