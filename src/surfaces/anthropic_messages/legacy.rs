//! The Messages request parser before the typed read (a walk over a
//! `serde_json::Value` tree), kept only to test the new one against.
#![allow(dead_code)]

use serde_json::{Map, Value};

use crate::error::GatewayError;
use crate::model::json::Strict;
use crate::model::request::*;

/// Server tools' `type`s start with one of these (the SDK's `ToolUnionParam`:
/// web search and fetch, code execution, bash, text editor, computer and
/// browser toolsets, memory, tool search; and the beta MCP toolset); a
/// custom tool has no `type` or `"custom"`.
mod messages;
mod options;

use options::*;

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
    let Strict(value) = serde_json::from_slice(body).map_err(|e| {
        let msg = e.to_string();
        let param = msg
            .split_once(": ")
            .map(|(p, _)| p)
            .filter(|p| !p.contains(' '))
            .unwrap_or("body");
        GatewayError::invalid(param, format!("invalid request body: {msg}"))
    })?;
    let Value::Object(map) = value else {
        return Err(GatewayError::invalid(
            "body",
            "Input should be a valid dictionary",
        ));
    };
    let mut request = Parser::default().request(map, generate)?;
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

/// An object's fields, refusing any not in `allowed`.
fn object<'a>(
    v: &'a Value,
    at: &str,
    allowed: &[&str],
) -> Result<&'a Map<String, Value>, GatewayError> {
    let Value::Object(map) = v else {
        return Err(invalid(at, "Input should be a valid dictionary"));
    };
    if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(extra(&format!("{at}.{key}")));
    }
    Ok(map)
}

fn string(map: &Map<String, Value>, key: &str, at: &str) -> Result<String, GatewayError> {
    match map.get(key) {
        None => Err(required(&format!("{at}.{key}"))),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(invalid(
            &format!("{at}.{key}"),
            "Input should be a valid string",
        )),
    }
}

fn optional_string(
    map: &Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<String>, GatewayError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => string(map, key, at).map(Some),
    }
}

fn optional_bool(
    map: &Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<bool>, GatewayError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(invalid(
            &format!("{at}.{key}"),
            "Input should be a valid boolean",
        )),
    }
}

fn integer(v: &Value, at: &str, min: u64) -> Result<u32, GatewayError> {
    let too_small = || {
        invalid(
            at,
            format!("Input should be greater than or equal to {min}"),
        )
    };
    let n = match (v.as_u64(), v.as_i64()) {
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
fn unit(v: &Value, at: &str) -> Result<f64, GatewayError> {
    let x = v
        .as_f64()
        .ok_or_else(|| invalid(at, "Input should be a valid number"))?;
    if x < 0.0 {
        return Err(invalid(at, "Input should be greater than or equal to 0"));
    }
    if x > 1.0 {
        return Err(invalid(at, "Input should be less than or equal to 1"));
    }
    Ok(x)
}

fn array<'a>(v: &'a Value, at: &str) -> Result<&'a Vec<Value>, GatewayError> {
    v.as_array()
        .ok_or_else(|| invalid(at, "Input should be a valid list"))
}

fn cache_control(map: &Map<String, Value>, at: &str) -> Result<Option<CacheControl>, GatewayError> {
    let Some(v) = map.get("cache_control").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let at = format!("{at}.cache_control");
    let cc = object(v, &at, &["type", "ttl"])?;
    if string(cc, "type", &at)? != "ephemeral" {
        return Err(invalid(
            &format!("{at}.type"),
            "Input should be 'ephemeral'",
        ));
    }
    let ttl = optional_string(cc, "ttl", &at)?;
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

/// The block's `type`.
fn block_type<'a>(block: &'a Value, at: &str) -> Result<&'a str, GatewayError> {
    match block.get("type") {
        Some(Value::String(t)) => Ok(t),
        Some(_) => Err(invalid(
            &format!("{at}.type"),
            "Input should be a valid string",
        )),
        None if block.is_object() => Err(required(&format!("{at}.type"))),
        None => Err(invalid(at, "Input should be a valid dictionary")),
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
    fn native_if_set(&mut self, map: &Map<String, Value>, key: &str, at: &str) {
        if map.get(key).is_some_and(|v| !v.is_null()) {
            self.native(format!("{at}.{key}"));
        }
    }

    /// The request; `generate` when it asks for an answer (`max_tokens`
    /// required then).
    fn request(
        mut self,
        map: Map<String, Value>,
        generate: bool,
    ) -> Result<ChatRequest, GatewayError> {
        let mut r = ChatRequest::default();
        let mut thinking: Option<Reasoning> = None;
        let mut effort: Option<Effort> = None;
        for (key, v) in &map {
            match key.as_str() {
                "model" => {
                    r.model = match v {
                        Value::String(m) => m.clone(),
                        _ => return Err(invalid("model", "Input should be a valid string")),
                    }
                }
                "max_tokens" => r.max_tokens = Some(integer(v, "max_tokens", 1)?),
                "messages" => {}
                "system" => {
                    if let Some(system) = self.system(v)? {
                        r.messages.push(system);
                    }
                }
                "stop_sequences" => {
                    for (i, s) in array(v, "stop_sequences")?.iter().enumerate() {
                        match s {
                            Value::String(s) => r.stop.push(s.clone()),
                            _ => {
                                return Err(invalid(
                                    &format!("stop_sequences.{i}"),
                                    "Input should be a valid string",
                                ))
                            }
                        }
                    }
                }
                "stream" => {
                    r.stream = match v {
                        Value::Bool(b) => *b,
                        Value::Null => false,
                        _ => return Err(invalid("stream", "Input should be a valid boolean")),
                    }
                }
                "temperature" => r.temperature = Some(unit(v, "temperature")?),
                "top_p" => r.top_p = Some(unit(v, "top_p")?),
                "top_k" => r.top_k = Some(integer(v, "top_k", 0)?),
                "metadata" => {
                    let m = object(v, "metadata", &["user_id"])?;
                    r.user = optional_string(m, "user_id", "metadata")?;
                }
                "tools" => {
                    for (i, tool) in array(v, "tools")?.iter().enumerate() {
                        if let Some(tool) = self.tool(tool, &format!("tools.{i}"))? {
                            r.tools.push(tool);
                        }
                    }
                }
                "tool_choice" => {
                    let (choice, parallel) = tool_choice(v)?;
                    r.tool_choice = choice;
                    r.parallel_tool_calls = parallel;
                }
                "thinking" => thinking = thinking_config(v)?,
                "output_config" => {
                    let oc = object(v, "output_config", &["effort", "format"])?;
                    if let Some(name) = optional_string(oc, "effort", "output_config")? {
                        effort = Some(effort_level(&name)?);
                    }
                    if let Some(format) = oc.get("format").filter(|f| !f.is_null()) {
                        r.response_format = Some(output_format(format, "output_config.format")?);
                    }
                }
                "output_format" => {
                    r.response_format = Some(output_format(v, "output_format")?);
                }
                // Hints and account selectors other vendors do without
                // (the top-level `cache_control` marks the last cacheable
                // block: prompt caching is the vendor's own).
                "service_tier" | "context_management" | "inference_geo" | "speed"
                | "diagnostics" | "cache_control" | "user_profile_id" | "workspace_id" => {}
                "container" | "mcp_servers" => self.native(key.clone()),
                _ => return Err(extra(key)),
            }
        }
        if r.model.is_empty() {
            return Err(match map.get("model") {
                None => required("model"),
                Some(_) => invalid("model", "String should have at least 1 character"),
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
        let Some(messages) = map.get("messages") else {
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
        for (i, m) in messages.iter().enumerate() {
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
            // Adaptive thinking: the effort asked for, else Anthropic's default (high).
            (Some(_), effort) => Some(Reasoning {
                effort: Some(effort.unwrap_or(Effort::High)),
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
    fn system(&mut self, v: &Value) -> Result<Option<Message>, GatewayError> {
        let content = match v {
            Value::Null => return Ok(None),
            Value::String(s) if s.is_empty() => return Ok(None),
            Value::String(s) => Content::Text(s.clone()),
            Value::Array(blocks) => {
                let mut parts = Vec::with_capacity(blocks.len());
                for (i, block) in blocks.iter().enumerate() {
                    let at = format!("system.{i}");
                    if block_type(block, &at)? != "text" {
                        return Err(invalid(&format!("{at}.type"), "Input should be 'text'"));
                    }
                    parts.push(self.text(block, &at)?);
                }
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
}

#[cfg(test)]
mod differential {
    //! The old and the new parser over generated and mutated bodies: the
    //! same `Ok` value, or the same error (text and param).
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use serde_json::{json, Value};

    const MARK: &str = "\u{1}DUP";

    fn seeds() -> Vec<Value> {
        let mut seeds: Vec<Value> = [
            include_str!(
                "../../../tests/golden/requests/anthropic_messages/adaptive_effort_stream.json"
            ),
            include_str!("../../../tests/golden/requests/anthropic_messages/basic.json"),
            include_str!("../../../tests/golden/requests/anthropic_messages/images_documents.json"),
            include_str!("../../../tests/golden/requests/anthropic_messages/server_tool.json"),
            include_str!(
                "../../../tests/golden/requests/anthropic_messages/system_cache_tools.json"
            ),
            include_str!(
                "../../../tests/golden/requests/anthropic_messages/thinking_tool_history.json"
            ),
        ]
        .iter()
        .map(|s| serde_json::from_str(s).unwrap())
        .collect();
        seeds.push(json!({"model":"g","max_tokens":4096,
            "system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral","ttl":"1h"}}],
            "messages":[
              {"role":"user","content":[{"type":"text","text":"hi"},
                {"type":"image","source":{"type":"base64","media_type":"image/png","data":"QUJD"},"cache_control":{"type":"ephemeral"}},
                {"type":"image","source":{"type":"url","url":"https://x/y.png"}},
                {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"},"title":"t","context":"c","citations":{"enabled":true}},
                {"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"}},
                {"type":"document","source":{"type":"url","url":"https://x/d.pdf"}},
                {"type":"search_result","source":"s","title":"t","content":[]}]},
              {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},
                {"type":"redacted_thinking","data":"enc"},
                {"type":"text","text":"checking"},
                {"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1,"b":[1.5,-2,"x"]},"caller":{"type":"direct"}}]},
              {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"42"},{"type":"image","source":{"type":"file","file_id":"f"}}],"is_error":true,"cache_control":{"type":"ephemeral"}},
                {"type":"text","text":"thanks"}]},
              {"role":"assistant","content":"ok"},
              {"role":"system","content":[{"type":"text","text":"mid"}]},
              {"role":"user","content":"again"}],
            "tools":[{"name":"f","description":"d","input_schema":{"type":"object","properties":{"a":{"type":"integer"}}},"cache_control":{"type":"ephemeral"},"strict":true,"allowed_callers":["direct"]},
                     {"type":"custom","name":"g","input_schema":{}},
                     {"type":"web_search_20250305","name":"web_search"}],
            "tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true},
            "stop_sequences":["X","Y"],"temperature":0.5,"top_p":1,"top_k":5,"metadata":{"user_id":"u1"},
            "thinking":{"type":"enabled","budget_tokens":2048},"stream":true,"service_tier":"auto",
            "output_config":{"effort":"low","format":{"type":"json_schema","schema":{"type":"object"}}}}));
        seeds.push(
            json!({"model":"g","max_tokens":100,"messages":[{"role":"user","content":"x"}],
            "thinking":{"type":"adaptive"},"output_format":{"type":"json_schema","schema":{}},
            "tool_choice":{"type":"auto"},"container":"c","mcp_servers":[],"system":"s"}),
        );
        // tests/fuzz.rs's Messages seeds.
        for body in [
            r#"{"model":"g","max_tokens":100,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QQ=="}},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"}}]}],"stream":true}"#,
            r#"{"model":"g","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":[{"type":"text","text":"r"}]}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}"#,
            r#"{"model":"g","max_tokens":10,"thinking":{"type":"adaptive"},"output_config":{"effort":"low"},"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}],"metadata":{"user_id":"u"},"top_k":3,"stop_sequences":["z"]}"#,
        ] {
            seeds.push(serde_json::from_str(body).unwrap());
        }
        // An object wide enough for the duplicate check's set.
        let wide: serde_json::Map<String, Value> = (0..24)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        seeds.push(
            json!({"model":"g","max_tokens":10,"messages":[{"role":"user","content":"x"}],
            "tools":[{"name":"f","input_schema":{"type":"object","properties":wide}}]}),
        );
        seeds
    }

    /// Values put in place of a member or element.
    fn replacements() -> Vec<Value> {
        [
            "null",
            "true",
            "false",
            "0",
            "1",
            "-1",
            "-0",
            "1.5",
            "1.0",
            "2048",
            "4096",
            "70000",
            "18446744073709551615",
            "-9223372036854775808",
            "4294967296",
            "1e3",
            "\"\"",
            "\"x\"",
            "\"text\"",
            "\"direct\"",
            "\"ephemeral\"",
            "\"user\"",
            "\"\\u00e9\\n\\\"\"",
            "\"é😀\"",
            "[]",
            "[1]",
            "[\"direct\"]",
            "[{\"type\":\"text\",\"text\":\"t\"}]",
            "{}",
            "{\"type\":\"text\"}",
            "{\"type\":\"ephemeral\",\"ttl\":\"5m\"}",
        ]
        .iter()
        .map(|s| serde_json::from_str(s).unwrap())
        .collect()
    }

    /// Keys added to objects.
    const ADDED: [&str; 14] = [
        "type",
        "text",
        "cache_control",
        "citations",
        "source",
        "content",
        "name",
        "input",
        "caller",
        "is_error",
        "zz",
        "a",
        "ttl",
        "display",
    ];

    /// Every path to a value in `v`.
    fn paths(v: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
        out.push(at.clone());
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    at.push(Value::String(k.clone()));
                    paths(child, at, out);
                    at.pop();
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    at.push(json!(i));
                    paths(child, at, out);
                    at.pop();
                }
            }
            _ => {}
        }
    }

    fn get_mut<'a>(v: &'a mut Value, path: &[Value]) -> &'a mut Value {
        path.iter().fold(v, |v, step| match step {
            Value::String(k) => v.get_mut(k.as_str()).unwrap(),
            _ => v.get_mut(step.as_u64().unwrap() as usize).unwrap(),
        })
    }

    fn mutants(seed: &Value) -> Vec<String> {
        let mut out = vec![seed.to_string()];
        let mut all = Vec::new();
        paths(seed, &mut Vec::new(), &mut all);
        let replacements = replacements();
        for path in &all {
            // The value itself replaced.
            for r in &replacements {
                let mut v = seed.clone();
                *get_mut(&mut v, path) = r.clone();
                out.push(v.to_string());
            }
            let Some((last, parent)) = path.split_last() else {
                continue;
            };
            // Dropped, duplicated, renamed.
            let edit = |f: &dyn Fn(&mut Value)| {
                let mut v = seed.clone();
                f(get_mut(&mut v, parent));
                v.to_string()
            };
            match last {
                Value::String(k) => {
                    out.push(edit(&|p| {
                        p.as_object_mut().unwrap().remove(k);
                    }));
                    out.push(edit(&|p| {
                        let m = p.as_object_mut().unwrap();
                        let value = m.remove(k).unwrap();
                        m.insert(format!("{k}_x"), value);
                    }));
                    let dup = edit(&|p| {
                        let m = p.as_object_mut().unwrap();
                        let value = m[k.as_str()].clone();
                        m.insert(MARK.into(), value);
                    });
                    out.push(dup.replace("\"\\u0001DUP\"", &format!("{k:?}")));
                }
                i => {
                    let i = i.as_u64().unwrap() as usize;
                    out.push(edit(&|p| {
                        p.as_array_mut().unwrap().remove(i);
                    }));
                    out.push(edit(&|p| {
                        let a = p.as_array_mut().unwrap();
                        let item = a[i].clone();
                        a.insert(i, item);
                    }));
                }
            }
        }
        // Members added to every object.
        for path in &all {
            if !get_mut(&mut seed.clone(), path).is_object() {
                continue;
            }
            for key in ADDED {
                for r in replacements.iter().step_by(4) {
                    let mut v = seed.clone();
                    if let Value::Object(m) = get_mut(&mut v, path) {
                        if m.contains_key(key) {
                            continue;
                        }
                        m.insert(key.into(), r.clone());
                    }
                    out.push(v.to_string());
                }
            }
        }
        // Text-level: keys and strings with escapes, cut bodies.
        let text = seed.to_string();
        for (from, to) in [
            ("\"type\"", "\"typ\\u0065\""),
            ("\"text\"", "\"t\\u0065xt\""),
            ("\"role\"", "\"rol\\u0065\""),
            ("\"user\"", "\"us\\u0065r\""),
            ("\"model\"", "\"mod\\u0065l\""),
            (":\"", ":\"\\\\\\/\\b\\f\\r\\t\\u00e9"),
            (",", " ,\n\t"),
        ] {
            out.push(text.replacen(from, to, 1));
            out.push(text.replace(from, to));
        }
        for cut in (0..text.len()).step_by(7) {
            if text.is_char_boundary(cut) {
                out.push(text[..cut].to_owned());
            }
        }
        out.push(format!("{text} x"));
        out.push(format!("[{text}]"));
        out
    }

    #[test]
    fn old_and_new_parsers_agree() {
        let mut bodies = 0;
        let mut oks = 0usize;
        let mut errors = std::collections::BTreeSet::new();
        for seed in seeds() {
            for body in mutants(&seed) {
                for (old, new) in [
                    (
                        super::parse(body.as_bytes()),
                        crate::surfaces::anthropic_messages::request::parse(body.as_bytes()),
                    ),
                    (
                        super::parse_count(body.as_bytes()),
                        crate::surfaces::anthropic_messages::request::parse_count(body.as_bytes()),
                    ),
                ] {
                    assert_eq!(format!("{old:?}"), format!("{new:?}"), "{body}");
                    match &new {
                        Ok(r) => {
                            oks += usize::from(r.native_only.is_none())
                                + 1000 * usize::from(r.native_only.is_some())
                        }
                        Err(e) => {
                            errors.insert(e.message.split(" at line ").next().unwrap().to_owned());
                        }
                    }
                }
                bodies += 1;
            }
        }
        for depth in [126, 127, 128, 129, 200] {
            let schema = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            let body = format!(
                r#"{{"model":"g","max_tokens":1,"messages":[{{"role":"user","content":"x"}}],"tools":[{{"name":"f","input_schema":{{"a":{schema}}}}}]}}"#
            );
            assert_eq!(
                format!("{:?}", super::parse(body.as_bytes())),
                format!(
                    "{:?}",
                    crate::surfaces::anthropic_messages::request::parse(body.as_bytes())
                ),
                "{body}"
            );
            bodies += 1;
        }
        eprintln!("differential: {bodies} bodies, each parsed as a request and as a count; ok (plain + 1000 x native-only) {oks}, {} distinct errors", errors.len());
        for e in &errors {
            eprintln!("  {e}");
        }
        assert!(bodies > 10_000, "{bodies}");
    }
}
