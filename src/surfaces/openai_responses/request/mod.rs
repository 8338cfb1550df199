//! OpenAI Responses requests (`POST /v1/responses`), parsed strictly into
//! the neutral [`ChatRequest`]: unknown fields are refused by name as
//! OpenAI refuses them, duplicate keys at every depth, and each error names
//! its field path (`input[2].content[0].text`).
//!
//! What only OpenAI's own Responses API can do (server-side state:
//! `previous_response_id`, `conversation`, `prompt`, `background`; built-in
//! tools; input items of those tools) is kept as [`NativeOnly`]: a
//! pass-through to OpenAI or Azure sends the client's body as it came, a
//! translated request is refused with a 400 naming the field. Two built-in
//! tools translate: a `namespace` of function tools (flat function tools
//! named `<namespace>__<name>`) and `web_search` (the vendor's own search,
//! [`WebSearch`]; its `web_search_call` items in history are dropped).
//!
//! The body is read in two passes: [`syntax`] checks its JSON and refuses
//! duplicate keys, building nothing; then it is read into the borrowed,
//! loose wire types (`wire::openai_responses::client`), which take every
//! member whatever its type, and checked here in OpenAI's order and words.
//! The top level and the shared checks are here; input items in
//! [`items`], tools and output formats in [`tools`].

use std::fmt;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::GatewayError;
use crate::model::json::body_error;
use crate::model::request::*;
use crate::model::surface_state::SurfaceState;
use crate::model::Generation;
use crate::wire::loose::Loose;
use crate::wire::openai_responses::client;

use super::ResponsesState;

mod items;
mod tools;

use items::input_item;
use tools::{any_tool, text_format, tool_choice};

/// Fields that need OpenAI's server-side state or features: sent on by a
/// pass-through, refused when translated.
const STATEFUL: &[(&str, &str)] = &[
    ("previous_response_id", "previous_response_id"),
    ("conversation", "conversation"),
    ("prompt", "a stored prompt (prompt)"),
    ("context_management", "context_management"),
    ("moderation", "moderation"),
];

/// The hosted web search tool's versions: the vendor's own search where it
/// has one (`ChatRequest::web_search`).
const WEB_SEARCH_TOOLS: &[&str] = &[
    "web_search",
    "web_search_preview",
    "web_search_2025_08_26",
    "web_search_preview_2025_03_11",
];

/// OpenAI's built-in tools: only its own Responses API runs them.
const BUILT_IN_TOOLS: &[&str] = &[
    "file_search",
    "computer_use_preview",
    "computer",
    "code_interpreter",
    "image_generation",
    "local_shell",
    "shell",
    "apply_patch",
    "custom",
    "mcp",
    "tool_search",
];

/// Input item types of the built-in tools (their calls and outputs in a
/// conversation's history), and references to stored items.
const BUILT_IN_ITEMS: &[&str] = &[
    "item_reference",
    "file_search_call",
    "computer_call",
    "computer_call_output",
    "image_generation_call",
    "code_interpreter_call",
    "local_shell_call",
    "local_shell_call_output",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "mcp_call",
    "custom_tool_call",
    "custom_tool_call_output",
    "compaction",
    "tool_search_call",
    "tool_search_output",
    "additional_tools",
];

const STATELESS: &str = "the gateway is stateless: this model group's provider does not keep \
     responses or conversations, so send the whole history in `input`";

/// A response id the gateway did not give (its own start `resp_gw` and
/// are resolved before parsing: `crate::responses_store`).
const NOT_STORED_HERE: &str = "the gateway stores the responses of this model group's provider \
     under ids starting `resp_gw`, and this one is not among them; a vendor's own response id \
     resolves only on a group that passes through to that vendor";

type Result<T> = std::result::Result<T, GatewayError>;

fn invalid(param: impl fmt::Display, message: impl Into<String>) -> GatewayError {
    GatewayError::invalid(param.to_string(), message.into())
}

fn wrong_type(param: impl fmt::Display, expected: &str) -> GatewayError {
    let param = param.to_string();
    let message = format!("Invalid type for '{param}': expected {expected}.");
    GatewayError::invalid(param, message)
}

fn unknown_field(param: impl fmt::Display) -> GatewayError {
    let param = param.to_string();
    let message = format!("Unknown parameter: '{param}'. Unrecognized request argument supplied.");
    GatewayError::invalid(param, message)
}

/// Where a member is (`input[2].content[0]`), written out only for an
/// error or a native-only feature: a long history names none of its items.
#[derive(Clone, Copy)]
enum Path<'p> {
    /// A top-level member, or (`""`) the body itself.
    Top(&'static str),
    Member(&'p Path<'p>, &'static str),
    Index(&'p Path<'p>, usize),
}

/// The body's own members are named without a prefix.
const BODY: Path = Path::Top("");

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Path::Top(name) => f.write_str(name),
            Path::Member(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// The object at `param`.
fn object<'v, O, E>(value: &'v Loose<'_, O, E>, param: &Path) -> Result<&'v O> {
    match value {
        Loose::Object(members) => Ok(members),
        _ => Err(wrong_type(param, "an object")),
    }
}

/// Refuses the first member its object's kind does not take (of
/// `first_unknown`), named by its path under `param`.
fn known(first_unknown: Option<&str>, param: &Path) -> Result<()> {
    match first_unknown {
        Some(key) => Err(unknown_field(format_args!("{param}.{key}"))),
        None => Ok(()),
    }
}

/// A field's path: `key` of the object at `param`.
fn field(param: &Path, key: &str) -> String {
    match param {
        Path::Top("") => key.to_owned(),
        _ => format!("{param}.{key}"),
    }
}

/// A string member (absent or null: `None`).
fn string<'v, O, E>(
    value: &'v Option<Loose<'_, O, E>>,
    param: &Path,
    key: &str,
) -> Result<Option<&'v str>> {
    match value {
        None | Some(Loose::Null) => Ok(None),
        Some(Loose::Str(s)) => Ok(Some(&**s)),
        Some(_) => Err(wrong_type(field(param, key), "a string")),
    }
}

fn required_string<'v, O, E>(
    value: &'v Option<Loose<'_, O, E>>,
    param: &Path,
    key: &str,
) -> Result<&'v str> {
    string(value, param, key)?.ok_or_else(|| {
        let path = field(param, key);
        invalid(&path, format!("Missing required parameter: '{path}'."))
    })
}

/// A top-level boolean member.
fn boolean(value: &Option<Loose<'_>>, key: &str) -> Result<Option<bool>> {
    match value {
        None | Some(Loose::Null) => Ok(None),
        Some(Loose::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(wrong_type(key, "a boolean")),
    }
}

fn number(
    value: &Option<Loose<'_>>,
    key: &str,
    range: std::ops::RangeInclusive<f64>,
) -> Result<Option<f64>> {
    match value {
        None | Some(Loose::Null) => Ok(None),
        Some(Loose::Number(n)) => {
            let v = n.as_f64().unwrap_or(f64::NAN);
            if range.contains(&v) {
                Ok(Some(v))
            } else {
                Err(invalid(
                    key,
                    format!(
                        "'{key}' must be between {} and {}",
                        range.start(),
                        range.end()
                    ),
                ))
            }
        }
        Some(_) => Err(wrong_type(key, "a number")),
    }
}

/// A raw member read as `T` (its syntax was checked with the body's).
fn view<'a, T: Deserialize<'a>>(raw: Option<&'a RawValue>) -> Result<Option<T>> {
    raw.map(|raw| serde_json::from_str(raw.get()).map_err(body_error))
        .transpose()
}

/// A raw member as the JSON value the neutral request keeps.
fn to_value(raw: &RawValue) -> Result<Value> {
    serde_json::from_str(raw.get()).map_err(body_error)
}

/// A raw member that holds one value (`number` and the others check which).
fn scalar(raw: Option<&RawValue>) -> Result<Option<Loose<'_>>> {
    view(raw)
}

fn not_null(raw: &&RawValue) -> bool {
    raw.get() != "null"
}

/// Whether a raw member is there and not null.
fn is_set(raw: Option<&RawValue>) -> bool {
    raw.as_ref().is_some_and(not_null)
}

/// The request being built, with the first field only a vendor of the
/// Responses API itself can serve.
struct Builder {
    request: ChatRequest,
    /// Reasoning items waiting for the assistant turn they precede.
    reasoning: Vec<Thinking>,
}

impl Builder {
    fn native_only(&mut self, param: impl fmt::Display, message: impl Into<String>) {
        self.request.native_only.get_or_insert(NativeOnly {
            param: param.to_string(),
            message: message.into(),
        });
    }

    /// The assistant turn to add a call or an answer to: the last one when
    /// it is still open (consecutive items of one turn merge), else a new one.
    fn assistant(&mut self, merge: bool) -> Option<&mut Message> {
        let open = merge
            && matches!(
                self.request.messages.last(),
                Some(Message::Assistant { .. })
            );
        if !open {
            self.request.messages.push(Message::Assistant {
                content: None,
                reasoning: Vec::new(),
                tool_calls: Vec::new(),
                refusal: None,
                name: None,
            });
        }
        let pending = std::mem::take(&mut self.reasoning);
        let last = self.request.messages.last_mut();
        if let Some(Message::Assistant { reasoning, .. }) = last {
            reasoning.extend(pending);
            return self.request.messages.last_mut();
        }
        None
    }
}

/// Parses and validates a Responses request body.
pub fn parse(body: &[u8]) -> Result<Generation> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(invalid("body", "request body is empty"));
    }
    let text = crate::wire::syntax::check(body).map_err(body_error)?;
    let map = match serde_json::from_str::<Loose<client::Request>>(text).map_err(body_error)? {
        Loose::Object(map) => map,
        _ => return Err(wrong_type("body", "an object")),
    };
    if let Some(key) = &map.unknown {
        // Named without the `body.` prefix (every leading `body.` trimmed,
        // as the parser before these types did).
        return Err(unknown_field(key.trim_start_matches("body.")));
    }
    let mut b = Builder {
        request: ChatRequest {
            source_len: body.len(),
            // Usage comes in `response.completed` whatever the client asks.
            include_usage: true,
            ..ChatRequest::default()
        },
        reasoning: Vec::new(),
    };
    b.request.model = match &map.model {
        Some(Loose::Str(m)) => m.clone().into_owned(),
        Some(_) => return Err(wrong_type("model", "a string")),
        None => return Err(invalid("model", "Missing required parameter: 'model'.")),
    };
    if b.request.model.is_empty()
        || b.request.model.len() > MAX_MODEL_NAME
        || b.request.model.chars().any(char::is_control)
    {
        return Err(invalid(
            "model",
            "model must be 1-256 characters without control characters",
        ));
    }
    let stateful = [
        map.previous_response_id,
        map.conversation,
        map.prompt,
        map.context_management,
        map.moderation,
    ];
    for ((field, what), raw) in STATEFUL.iter().zip(stateful) {
        if is_set(raw) {
            let why = if *field == "previous_response_id" {
                NOT_STORED_HERE
            } else {
                STATELESS
            };
            b.native_only(*field, format!("{what}: {why}"));
        }
    }
    if boolean(&map.background, "background")? == Some(true) {
        b.native_only("background", format!("background responses: {STATELESS}"));
    }
    let instructions = scalar(map.instructions)?;
    if let Some(instructions) = string(&instructions, &BODY, "instructions")? {
        b.request.messages.push(Message::System {
            content: Content::Text(instructions.to_owned()),
            name: None,
        });
    }
    match &map.input {
        Some(Loose::Str(text)) => b.request.messages.push(Message::User {
            content: Content::Text(text.clone().into_owned()),
            name: None,
        }),
        Some(Loose::Array(items)) => {
            if items.len() > MAX_MESSAGES {
                return Err(invalid(
                    "input",
                    format!("at most {MAX_MESSAGES} input items are accepted"),
                ));
            }
            for (i, item) in items.iter().enumerate() {
                input_item(&mut b, item, &Path::Index(&Path::Top("input"), i))?;
            }
        }
        None | Some(Loose::Null) => {}
        Some(_) => return Err(wrong_type("input", "a string or an array of input items")),
    }
    // Reasoning with nothing after it still goes back to the vendor.
    if !b.reasoning.is_empty() {
        b.assistant(false);
    }
    if b.request.messages.is_empty() && b.request.native_only.is_none() {
        return Err(invalid("input", "Missing required parameter: 'input'."));
    }
    let tools: Option<client::List<client::Tool>> = view(map.tools)?;
    match &tools {
        None | Some(Loose::Null) => {}
        Some(Loose::Array(list)) => {
            for (i, tool) in list.iter().enumerate() {
                any_tool(&mut b, tool, &Path::Index(&Path::Top("tools"), i))?;
            }
        }
        Some(_) => return Err(wrong_type("tools", "an array")),
    }
    let choice: Option<Loose<client::ToolChoice>> = view(map.tool_choice)?;
    if let Some(choice) = choice.filter(|c| !c.is_null()) {
        b.request.tool_choice = Some(tool_choice(&mut b, &choice)?);
    }
    b.request.parallel_tool_calls =
        boolean(&scalar(map.parallel_tool_calls)?, "parallel_tool_calls")?;
    b.request.temperature = number(&scalar(map.temperature)?, "temperature", 0.0..=2.0)?;
    b.request.top_p = number(&scalar(map.top_p)?, "top_p", 0.0..=1.0)?;
    b.request.max_completion_tokens = match scalar(map.max_output_tokens)? {
        None | Some(Loose::Null) => None,
        Some(v) => Some(
            match v {
                Loose::Number(n) => n.as_u64(),
                _ => None,
            }
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                invalid(
                    "max_output_tokens",
                    "max_output_tokens must be a positive integer",
                )
            })?,
        ),
    };
    let reasoning: Option<Loose<client::Reasoning>> = view(map.reasoning)?;
    if let Some(reasoning) = reasoning.filter(|r| !r.is_null()) {
        let at = Path::Top("reasoning");
        let r = object(&reasoning, &at)?;
        known(
            r.first_unknown(&["effort", "summary", "generate_summary"]),
            &at,
        )?;
        let effort = match string(&r.effort, &at, "effort")? {
            Some(name) => Some(Effort::parse(name).ok_or_else(|| {
                invalid(
                    "reasoning.effort",
                    format!("Invalid value: '{name}'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high', 'xhigh' and 'max'."),
                )
            })?),
            None => None,
        };
        for (key, value) in [
            ("summary", &r.summary),
            ("generate_summary", &r.generate_summary),
        ] {
            if let Some(s) = string(value, &at, key)? {
                if !["auto", "concise", "detailed"].contains(&s) {
                    return Err(invalid(
                        format!("reasoning.{key}"),
                        format!("Invalid value: '{s}'. Supported values are: 'auto', 'concise' and 'detailed'."),
                    ));
                }
            }
        }
        if effort.is_some() {
            b.request.reasoning = Some(Reasoning {
                effort,
                budget_tokens: None,
            });
        }
    }
    let text: Option<Loose<client::Text>> = view(map.text)?;
    if let Some(text) = text.filter(|t| !t.is_null()) {
        let at = Path::Top("text");
        let t = object(&text, &at)?;
        known(t.first_unknown(&["format", "verbosity"]), &at)?;
        if let Some(format) = t.format.filter(not_null) {
            b.request.response_format = Some(text_format(format)?);
        }
        if let Some(v) = string(&t.verbosity, &at, "verbosity")? {
            if !["low", "medium", "high"].contains(&v) {
                return Err(invalid("text.verbosity", format!("Invalid value: '{v}'.")));
            }
        }
    }
    if let Some(metadata) = map.metadata.filter(not_null) {
        let metadata = to_value(metadata)?;
        let m = metadata
            .as_object()
            .ok_or_else(|| wrong_type("metadata", "an object"))?;
        if let Some((k, _)) = m.iter().find(|(_, v)| !v.is_string()) {
            return Err(wrong_type(format!("metadata.{k}"), "a string"));
        }
        // Routing rules read `metadata.task_type`; OpenAI-API vendors get it back.
        b.request.extra.insert("metadata".into(), metadata);
    }
    let user = scalar(map.user)?;
    b.request.user = string(&user, &BODY, "user")?.map(str::to_owned);
    b.request.stream = boolean(&map.stream, "stream")?.unwrap_or(false);
    b.request.request_id = string(&map.request_id, &BODY, "request_id")?.map(str::to_owned);
    // Kept by OpenAI, or by the gateway for the vendors that keep nothing
    // (`crate::responses_store`), unless the client says not to.
    let store = boolean(&map.store, "store")?;
    let truncation = scalar(map.truncation)?;
    for (key, value) in [
        ("service_tier", &map.service_tier),
        ("truncation", &truncation),
        ("prompt_cache_key", &map.prompt_cache_key),
        ("safety_identifier", &map.safety_identifier),
        ("prompt_cache_retention", &map.prompt_cache_retention),
    ] {
        string(value, &BODY, key)?;
    }
    match &map.include {
        None | Some(Loose::Null) => {}
        Some(Loose::Array(names)) if names.iter().all(|n| n.as_str().is_some()) => {}
        Some(_) => return Err(wrong_type("include", "an array of strings")),
    }
    let state = ResponsesState {
        echo: echo(&map)?.into(),
        unstored: store == Some(false),
        id: None,
    };
    Ok(Generation {
        request: b.request,
        state: SurfaceState::of(state),
    })
}

/// What a `response` object repeats of its request, OpenAI's defaults where
/// the client sent nothing.
fn echo(map: &client::Request) -> Result<Map<String, Value>> {
    let defaults = [
        ("instructions", map.instructions, Value::Null),
        ("max_output_tokens", map.max_output_tokens, Value::Null),
        ("metadata", map.metadata, Value::Object(Map::new())),
        (
            "parallel_tool_calls",
            map.parallel_tool_calls,
            Value::Bool(true),
        ),
        (
            "previous_response_id",
            map.previous_response_id,
            Value::Null,
        ),
        (
            "reasoning",
            map.reasoning,
            json_object([("effort", Value::Null), ("summary", Value::Null)]),
        ),
        ("temperature", map.temperature, 1.0.into()),
        (
            "text",
            map.text,
            json_object([("format", json_object([("type", "text".into())]))]),
        ),
        ("tool_choice", map.tool_choice, "auto".into()),
        ("tools", map.tools, Value::Array(Vec::new())),
        ("top_p", map.top_p, 1.0.into()),
        ("truncation", map.truncation, "disabled".into()),
        ("user", map.user, Value::Null),
    ];
    defaults
        .into_iter()
        .map(|(key, raw, default)| {
            let sent = match raw.filter(not_null) {
                Some(raw) => to_value(raw)?,
                None => default,
            };
            Ok((key.to_owned(), sent))
        })
        .collect()
}

fn json_object<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(
        members
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

#[cfg(test)]
mod tests;
