//! OpenAI Responses, `POST /v1/responses` ([`request`]): the `response`
//! object, the semantic event stream (`response.created` …
//! `response.completed`, each event numbered by `sequence_number`) and
//! OpenAI's error envelope, as on the chat surface.
//!
//! A `response` repeats parts of its request (`tools`, `instructions`,
//! `text`…): the parser keeps them in its [`ResponsesState`], which the
//! sessions carry (`Generation::state`) and hand back to the renderers
//! (`Surface::render_answer`, `Surface::stream_encoder`).
//!
//! The stream's state machine (sequence numbers, output indices, each
//! item's added, delta and done events) is [`stream`]; the wire types both
//! write are `crate::wire::openai_responses`.

use serde_json::{Map, Value};

use super::route::{Operation, PathFacts, Route};
use super::{Surface, SurfaceState};
use crate::error::GatewayError;
use crate::model::call::Call;
use crate::model::listing::Listed;
use crate::model::request::Thinking;
use crate::model::response::{Answer, Completion, FinishReason, Origin, Usage};
use crate::model::stream::StreamEncoder;
use crate::model::{Api, Generation, Request};
use crate::wire::openai_responses::Usage as WireUsage;
use crate::wire::openai_responses::{
    IncompleteDetails, InputTokensDetails, OutputItem, OutputTokensDetails, Response, ResponseError,
};

mod calls;
pub mod request;
mod state;
mod stream;

pub use state::ResponsesState;

pub struct OpenAiResponses;

/// Where clients send generations; the stored-response calls are below it.
const PATH: &str = "/v1/responses";
const PREFIX: &str = "/v1/responses/";

impl Surface for OpenAiResponses {
    /// `POST /v1/responses`, and the calls on a stored response below
    /// `/v1/responses/` ([`calls::stored`]).
    fn route(&self, method: &str, path: &str, query: &str) -> Option<Route> {
        let api = Api::OpenAiResponses;
        if path == PATH {
            return Some(Route::generation(api, method, path));
        }
        let rest = path.strip_prefix(PREFIX)?;
        Some(Route {
            api,
            operation: calls::stored(method, path, rest, query).map(Operation::Call),
            metered: true,
        })
    }

    /// The stored-response calls take no body (cancel: at most `{}`).
    fn parse_call(&self, call: &Call, body: &[u8]) -> Result<Option<Request>, GatewayError> {
        match call.stored_response() {
            Some((op, _)) => calls::no_body(op, body).map(|()| None),
            None => Err(super::foreign_call()),
        }
    }

    /// OpenAI's model list, which its Responses clients call too.
    fn render_models(&self, models: &[Listed], loaded_at: u64) -> Vec<u8> {
        super::openai_chat::models::render_list(models, loaded_at)
    }

    fn render_model(&self, model: &Listed, loaded_at: u64) -> Vec<u8> {
        super::openai_chat::models::render_one(model, loaded_at)
    }

    fn parse_generation(&self, facts: &PathFacts, body: &[u8]) -> Result<Generation, GatewayError> {
        let mut generation = request::parse(body)?;
        facts.apply(&mut generation.request);
        Ok(generation)
    }

    fn render_answer(&self, answer: Answer, origin: &Origin, state: &SurfaceState) -> Vec<u8> {
        match answer {
            Answer::Decoded(completion) => {
                let none = ResponsesState::default();
                render_completion(&completion, origin, state.get().unwrap_or(&none))
            }
            Answer::Native(body) => body,
        }
    }

    fn stream_encoder(&self, _include_usage: bool, state: &SurfaceState) -> Box<dyn StreamEncoder> {
        let state = state.get::<ResponsesState>().cloned().unwrap_or_default();
        Box::new(stream::ResponseEvents::new(state))
    }

    fn render_error(&self, error: &GatewayError, request_id: Option<&str>) -> Vec<u8> {
        crate::wire::openai_chat::render_error(error, request_id)
    }
}

/// The response id: the gateway's when it stores the response (the
/// session sets it, [`ResponsesState::id`]), the vendor's when it is a
/// Responses id, else made from it.
fn response_id(origin: &Origin, state: &ResponsesState) -> String {
    if let Some(id) = &state.id {
        return id.clone();
    }
    if origin.id.starts_with("resp_") {
        origin.id.clone()
    } else {
        format!("resp_{}", origin.id)
    }
}

/// An output item's id: its kind's prefix, its place in the output and the
/// response it belongs to (`msg_0_…`, `fc_1_…`, `rs_0_…`).
fn item_id(prefix: &str, index: usize, response_id: &str) -> String {
    let base = response_id.strip_prefix("resp_").unwrap_or(response_id);
    format!("{prefix}_{index}_{base}")
}

/// Usage in the Responses API's shape.
fn wire_usage(usage: &Usage) -> WireUsage {
    WireUsage {
        input_tokens: usage.prompt_tokens,
        input_tokens_details: InputTokensDetails {
            cache_write_tokens: usage.cache_write_tokens.unwrap_or(0),
            cached_tokens: usage.cached_tokens.unwrap_or(0),
        },
        output_tokens: usage.completion_tokens,
        output_tokens_details: OutputTokensDetails {
            reasoning_tokens: usage.reasoning_tokens.unwrap_or(0),
        },
        total_tokens: usage.prompt_tokens + usage.completion_tokens,
    }
}

/// What the response's status says about how it ended.
#[derive(Clone, Copy, PartialEq)]
enum Status {
    InProgress,
    Completed,
    Incomplete(&'static str),
    Failed,
}

impl Status {
    fn of(finish: Option<FinishReason>) -> Status {
        match finish {
            Some(FinishReason::Length) => Status::Incomplete("max_output_tokens"),
            Some(FinishReason::ContentFilter) => Status::Incomplete("content_filter"),
            // Anthropic paused a server-tool turn: not done, and not for a
            // reason OpenAI names; the client may send the history again.
            Some(FinishReason::Paused) => Status::Incomplete("pause_turn"),
            _ => Status::Completed,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Incomplete(_) => "incomplete",
            Status::Failed => "failed",
        }
    }

    /// An output item's status in a response with this status.
    fn item(self) -> &'static str {
        match self {
            Status::Incomplete(_) => "incomplete",
            _ => "completed",
        }
    }
}

/// The `response` object: who answered, how it ended, its output and
/// usage, and the request's echo (written as it came: client values).
fn response<'a>(
    origin: &'a Origin,
    id: &'a str,
    status: Status,
    output: &'a [OutputItem<'a>],
    usage: Option<&Usage>,
    error: Option<ResponseError<'a>>,
    echo: &'a Map<String, Value>,
) -> Response<'a> {
    Response {
        id,
        object: "response",
        created_at: origin.created,
        status: status.name(),
        background: false,
        error,
        incomplete_details: match status {
            Status::Incomplete(reason) => Some(IncompleteDetails { reason }),
            _ => None,
        },
        instructions: echo.get("instructions"),
        max_output_tokens: echo.get("max_output_tokens"),
        model: &origin.model,
        provider: &origin.provider,
        output,
        parallel_tool_calls: echo.get("parallel_tool_calls"),
        previous_response_id: echo.get("previous_response_id"),
        reasoning: echo.get("reasoning"),
        // Stored by the gateway (`crate::responses_store`) under its own id.
        store: crate::responses_store::is_gateway_id(id),
        temperature: echo.get("temperature"),
        text: echo.get("text"),
        tool_choice: echo.get("tool_choice"),
        tools: echo.get("tools"),
        top_p: echo.get("top_p"),
        truncation: echo.get("truncation"),
        usage: usage.map(wire_usage),
        user: echo.get("user"),
        metadata: echo.get("metadata"),
    }
}

fn message_item<'a>(id: &'a str, status: &'a str, text: &'a str) -> OutputItem<'a> {
    OutputItem::Message {
        id,
        status,
        text: (status != "in_progress").then_some(text),
    }
}

/// How a tool of a `namespace` is named for a vendor without namespaces:
/// `<namespace>__<name>`, a name every vendor's tool names allow.
pub(crate) fn flat_name(namespace: &str, name: &str) -> String {
    format!("{namespace}__{name}")
}

/// The request's namespaced tools by their flat names (from the echoed
/// `tools`), so that a call comes back named as the client declared it:
/// `namespace` and `name` apart, as OpenAI answers.
#[derive(Default)]
struct Namespaced(Vec<(String, String, String)>);

impl Namespaced {
    fn of(echo: &Map<String, Value>) -> Self {
        let mut found = Vec::new();
        let tools = echo.get("tools").and_then(Value::as_array);
        for group in tools.into_iter().flatten() {
            if group.get("type").and_then(Value::as_str) != Some("namespace") {
                continue;
            }
            let Some(namespace) = group.get("name").and_then(Value::as_str) else {
                continue;
            };
            let inner = group.get("tools").and_then(Value::as_array);
            for tool in inner.into_iter().flatten() {
                if let Some(name) = tool.get("name").and_then(Value::as_str) {
                    found.push((
                        flat_name(namespace, name),
                        namespace.to_owned(),
                        name.to_owned(),
                    ));
                }
            }
        }
        Namespaced(found)
    }

    /// A vendor's tool name as the client declared it: (namespace, name).
    fn split<'a>(&'a self, flat: &'a str) -> (Option<&'a str>, &'a str) {
        match self.0.iter().find(|(f, _, _)| f == flat) {
            Some((_, namespace, name)) => (Some(namespace), name),
            None => (None, flat),
        }
    }
}

fn function_call_item<'a>(
    id: &'a str,
    status: &'a str,
    call_id: &'a str,
    (namespace, name): (Option<&'a str>, &'a str),
    arguments: &'a str,
) -> OutputItem<'a> {
    OutputItem::FunctionCall {
        id,
        status,
        arguments,
        call_id,
        name,
        namespace,
    }
}

/// How a vendor's signature over its reasoning travels in `encrypted_content`
/// (a Responses item has no field of its own for it), so that a client
/// sending the item back returns the signed thinking the vendor requires.
/// Anything else there is an encrypted block, kept as redacted thinking.
pub(crate) const SIGNATURE_PREFIX: &str = "gw-signature:";

/// A thinking block's `encrypted_content`: its signature or its redacted data.
fn encrypted_content(thinking: &Thinking) -> Option<String> {
    match (&thinking.signature, &thinking.redacted) {
        (_, Some(data)) => Some(data.clone()),
        (Some(signature), None) => Some(format!("{SIGNATURE_PREFIX}{signature}")),
        (None, None) => None,
    }
}

fn reasoning_item<'a>(
    id: &'a str,
    text: &'a str,
    encrypted: Option<&'a str>,
    done: bool,
) -> OutputItem<'a> {
    OutputItem::Reasoning {
        id,
        encrypted_content: encrypted,
        summary: (done && !text.is_empty()).then_some(text),
    }
}

/// A complete `response` object from the neutral answer: reasoning first,
/// then the message, then the function calls.
fn render_completion(completion: &Completion, origin: &Origin, state: &ResponsesState) -> Vec<u8> {
    let id = response_id(origin, state);
    let status = Status::of(completion.finish_reason);
    // The items borrow their ids and encrypted contents: made first.
    let ids = |prefix, from: usize, count: usize| -> Vec<String> {
        (from..from + count)
            .map(|index| item_id(prefix, index, &id))
            .collect()
    };
    let thinking = &completion.reasoning;
    let reasoning_ids = ids("rs", 0, thinking.len());
    let encrypted: Vec<Option<String>> = thinking.iter().map(encrypted_content).collect();
    let text = completion.content.as_deref();
    let message_id = text.map(|_| item_id("msg", thinking.len(), &id));
    let first_call = thinking.len() + usize::from(text.is_some());
    let call_ids = ids("fc", first_call, completion.tool_calls.len());

    let namespaced = Namespaced::of(&state.echo);
    let mut output = Vec::with_capacity(first_call + call_ids.len());
    for ((item, thinking), encrypted) in reasoning_ids.iter().zip(thinking).zip(&encrypted) {
        output.push(reasoning_item(
            item,
            &thinking.text,
            encrypted.as_deref(),
            true,
        ));
    }
    if let (Some(item), Some(text)) = (&message_id, text) {
        output.push(message_item(item, status.item(), text));
    }
    for (item, call) in call_ids.iter().zip(&completion.tool_calls) {
        output.push(function_call_item(
            item,
            "completed",
            &call.id,
            namespaced.split(&call.function.name),
            &call.function.arguments,
        ));
    }
    let body = response(
        origin,
        &id,
        status,
        &output,
        completion.usage.as_ref(),
        None,
        &state.echo,
    );
    serde_json::to_vec(&body).unwrap_or_default()
}

#[cfg(test)]
mod tests;
