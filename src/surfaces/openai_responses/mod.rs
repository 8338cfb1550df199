//! OpenAI Responses, `POST /v1/responses` ([`request`]): the `response`
//! object, the semantic event stream (`response.created` …
//! `response.completed`, each event numbered by `sequence_number`) and
//! OpenAI's error envelope, as on the chat surface.
//!
//! A `response` repeats parts of its request (`tools`, `instructions`,
//! `text`…): the parser keeps them in `ChatRequest::echo` and the session
//! hands them back to the renderers (`Surface::render_answer_echoing`,
//! `Surface::stream_encoder_echoing`).
//!
//! Long on purpose (about 870 lines): the Responses API's answer and its
//! semantic event stream (sequence numbers, output indices, each item's
//! added, delta and done events) are one state machine, read in one place.

use serde_json::{json, Map, Value};

use super::Surface;
use crate::error::{GatewayError, Wording};
use crate::model::request::{ChatRequest, Thinking};
use crate::model::response::{Answer, Completion, FinishReason, Origin, Usage};
use crate::model::stream::{Reasoning, StreamEncoder};

pub mod request;

pub struct OpenAiResponses;

impl Surface for OpenAiResponses {
    fn parse_request(&self, body: &[u8]) -> Result<ChatRequest, GatewayError> {
        request::parse(body)
    }

    fn render_answer(&self, answer: Answer, origin: &Origin) -> Vec<u8> {
        self.render_answer_echoing(answer, origin, &Map::new())
    }

    fn render_answer_echoing(
        &self,
        answer: Answer,
        origin: &Origin,
        echo: &Map<String, Value>,
    ) -> Vec<u8> {
        match answer {
            Answer::Decoded(completion) => render_completion(&completion, origin, echo),
            Answer::Native(body) => body,
        }
    }

    fn stream_encoder(&self, include_usage: bool) -> Box<dyn StreamEncoder> {
        self.stream_encoder_echoing(include_usage, &Map::new())
    }

    fn stream_encoder_echoing(
        &self,
        _include_usage: bool,
        echo: &Map<String, Value>,
    ) -> Box<dyn StreamEncoder> {
        Box::new(ResponseEvents::new(echo.clone()))
    }

    fn render_error(&self, error: &GatewayError, request_id: Option<&str>) -> Vec<u8> {
        error.to_json(request_id)
    }
}

/// The response id: the vendor's when it is a Responses id, else made from it.
fn response_id(origin: &Origin) -> String {
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

/// Usage in the Responses API's shape (the details always there, as the
/// SDK's types want them).
fn usage_json(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens.unwrap_or(0)},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens.unwrap_or(0)},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    })
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
/// usage, and the request's echo.
fn response_json(
    origin: &Origin,
    id: &str,
    status: Status,
    output: Vec<Value>,
    usage: Option<&Usage>,
    error: Option<&GatewayError>,
    echo: &Map<String, Value>,
) -> Value {
    let mut body = Map::new();
    body.insert("id".into(), id.into());
    body.insert("object".into(), "response".into());
    body.insert("created_at".into(), origin.created.into());
    body.insert("status".into(), status.name().into());
    body.insert("background".into(), false.into());
    body.insert(
        "error".into(),
        error.map_or(
            Value::Null,
            |e| json!({"code": e.code.as_str(), "message": e.worded(Wording::OpenAi)}),
        ),
    );
    body.insert(
        "incomplete_details".into(),
        match status {
            Status::Incomplete(reason) => json!({ "reason": reason }),
            _ => Value::Null,
        },
    );
    body.insert("model".into(), origin.model.as_str().into());
    body.insert("provider".into(), origin.provider.as_str().into());
    body.insert("output".into(), Value::Array(output));
    for (key, value) in echo {
        body.insert(key.clone(), value.clone());
    }
    // Nothing is stored: the gateway is stateless.
    body.insert("store".into(), false.into());
    body.insert("usage".into(), usage.map_or(Value::Null, usage_json));
    Value::Object(body)
}

fn message_item(id: &str, status: &str, text: &str) -> Value {
    let content = if status == "in_progress" {
        json!([])
    } else {
        json!([{"type": "output_text", "text": text, "annotations": [], "logprobs": []}])
    };
    json!({"id": id, "type": "message", "status": status, "role": "assistant", "content": content})
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

fn function_call_item(
    id: &str,
    status: &str,
    call_id: &str,
    (namespace, name): (Option<&str>, &str),
    arguments: &str,
) -> Value {
    let mut item = json!({"id": id, "type": "function_call", "status": status,
                          "call_id": call_id, "name": name, "arguments": arguments});
    if let (Some(map), Some(namespace)) = (item.as_object_mut(), namespace) {
        map.insert("namespace".into(), namespace.into());
    }
    item
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

fn reasoning_item(id: &str, text: &str, encrypted: Option<&str>, done: bool) -> Value {
    let summary = if done && !text.is_empty() {
        json!([{"type": "summary_text", "text": text}])
    } else {
        json!([])
    };
    let mut item = json!({"id": id, "type": "reasoning", "summary": summary});
    if let (Some(object), Some(data)) = (item.as_object_mut(), encrypted) {
        object.insert("encrypted_content".into(), data.into());
    }
    item
}

/// A complete `response` object from the neutral answer: reasoning first,
/// then the message, then the function calls.
fn render_completion(
    completion: &Completion,
    origin: &Origin,
    echo: &Map<String, Value>,
) -> Vec<u8> {
    let id = response_id(origin);
    let status = Status::of(completion.finish_reason);
    let mut output = Vec::new();
    for thinking in &completion.reasoning {
        let item = item_id("rs", output.len(), &id);
        let encrypted = encrypted_content(thinking);
        output.push(reasoning_item(
            &item,
            &thinking.text,
            encrypted.as_deref(),
            true,
        ));
    }
    if let Some(text) = completion.content.as_deref() {
        let item = item_id("msg", output.len(), &id);
        output.push(message_item(&item, status.item(), text));
    }
    let namespaced = Namespaced::of(echo);
    for call in &completion.tool_calls {
        let item = item_id("fc", output.len(), &id);
        output.push(function_call_item(
            &item,
            "completed",
            &call.id,
            namespaced.split(&call.function.name),
            &call.function.arguments,
        ));
    }
    let body = response_json(
        origin,
        &id,
        status,
        output,
        completion.usage.as_ref(),
        None,
        echo,
    );
    serde_json::to_vec(&body).unwrap_or_default()
}

/// One output item of a streamed response, as far as it has come.
enum Item {
    Message {
        text: String,
    },
    /// Reasoning: its text as a summary, or (`redacted`) only the
    /// vendor's encrypted block; `encrypted` what goes in `encrypted_content`.
    Reasoning {
        text: String,
        encrypted: Option<String>,
        redacted: bool,
    },
    FunctionCall {
        call_id: String,
        name: String,
        arguments: String,
    },
}

/// The output a stream repeats at its end (`.done` events, the final
/// `response`) is bounded: past this, the stream fails rather than grow.
const MAX_OUTPUT_BYTES: usize = 8 << 20;

/// The Responses event stream for one response: output items numbered in
/// order of appearance whatever the vendor's blocks are, one
/// `sequence_number` per event.
struct ResponseEvents {
    echo: Map<String, Value>,
    namespaced: Namespaced,
    sequence: u64,
    /// Fixed at the start: every event names the same response.
    id: String,
    items: Vec<(String, Item, bool)>,
    /// The text or reasoning item being written (tool calls stay open
    /// until the end: their arguments may come interleaved).
    open: Option<usize>,
    /// Output index of each tool call, by the writer's call index.
    calls: Vec<usize>,
    finish: Option<FinishReason>,
    bytes: usize,
    /// A terminal event was written: nothing more.
    ended: bool,
    /// Who answered, as the stream's start said (for a later failure).
    origin: Origin,
    /// The vendor's own events are passed through: its terminal event ends
    /// the stream, `done` adds nothing.
    passed_through: bool,
}

impl ResponseEvents {
    fn new(echo: Map<String, Value>) -> Self {
        Self {
            namespaced: Namespaced::of(&echo),
            echo,
            sequence: 0,
            id: String::new(),
            items: Vec::new(),
            open: None,
            calls: Vec::new(),
            finish: None,
            bytes: 0,
            ended: false,
            origin: Origin::default(),
            passed_through: false,
        }
    }

    /// `event: <type>` and `data: <json>` with the event's sequence number.
    fn event(&mut self, out: &mut Vec<u8>, kind: &str, fields: Value) {
        let mut data = match fields {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        data.insert("type".into(), kind.into());
        data.insert("sequence_number".into(), self.sequence.into());
        self.sequence += 1;
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        if serde_json::to_writer(&mut *out, &data).is_err() {
            out.extend_from_slice(b"{}");
        }
        out.extend_from_slice(b"\n\n");
    }

    fn ensure_id(&mut self, origin: &Origin) {
        if self.id.is_empty() {
            self.id = response_id(origin);
        }
    }

    /// The response so far, for the lifecycle events.
    fn response(
        &self,
        origin: &Origin,
        status: Status,
        usage: Option<&Usage>,
        error: Option<&GatewayError>,
    ) -> Value {
        let output = if status == Status::InProgress {
            Vec::new()
        } else {
            self.items
                .iter()
                .map(|(id, item, _)| self.item_json(id, item, status.item()))
                .collect()
        };
        response_json(origin, &self.id, status, output, usage, error, &self.echo)
    }

    fn item_json(&self, id: &str, item: &Item, status: &str) -> Value {
        match item {
            Item::Message { text } => message_item(id, status, text),
            Item::Reasoning {
                text, encrypted, ..
            } => reasoning_item(id, text, encrypted.as_deref(), true),
            Item::FunctionCall {
                call_id,
                name,
                arguments,
            } => function_call_item(id, status, call_id, self.namespaced.split(name), arguments),
        }
    }

    /// Counts output the stream will repeat; false (after failing the
    /// stream) once past the bound.
    fn room(&mut self, origin: &Origin, out: &mut Vec<u8>, len: usize) -> bool {
        self.bytes = self.bytes.saturating_add(len);
        if self.bytes <= MAX_OUTPUT_BYTES {
            return true;
        }
        let error = GatewayError::new(
            crate::error::ErrorCode::UpstreamError,
            "the answer is longer than the gateway can repeat in a Responses stream",
        );
        self.fail(origin, out, &error);
        false
    }

    /// Opens an output item (closing the text or reasoning item before it).
    fn add_item(&mut self, out: &mut Vec<u8>, prefix: &str, item: Item) -> usize {
        self.close_open(out);
        let index = self.items.len();
        let id = item_id(prefix, index, &self.id);
        let json = match &item {
            Item::Message { .. } => message_item(&id, "in_progress", ""),
            Item::Reasoning { encrypted, .. } => {
                reasoning_item(&id, "", encrypted.as_deref(), false)
            }
            Item::FunctionCall { call_id, name, .. } => {
                function_call_item(&id, "in_progress", call_id, self.namespaced.split(name), "")
            }
        };
        self.event(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": json}),
        );
        match &item {
            Item::Message { .. } => self.event(
                out,
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
            ),
            Item::Reasoning {
                redacted: false, ..
            } => self.event(
                out,
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": index, "summary_index": 0,
                       "part": {"type": "summary_text", "text": ""}}),
            ),
            _ => {}
        }
        self.items.push((id, item, false));
        index
    }

    /// Closes output item `index`: its `.done` events.
    fn close(&mut self, out: &mut Vec<u8>, index: usize) {
        let status = Status::of(self.finish).item();
        let Some((id, item, closed)) = self.items.get_mut(index) else {
            return;
        };
        if *closed {
            return;
        }
        *closed = true;
        for (kind, fields) in done_events(&id.clone(), index, item, status, &self.namespaced) {
            self.event(out, kind, fields);
        }
    }

    fn close_open(&mut self, out: &mut Vec<u8>) {
        if let Some(index) = self.open.take() {
            self.close(out, index);
        }
    }

    /// The open item, when it is of the kind `is_kind` accepts.
    fn open_item(&mut self, is_kind: fn(&Item) -> bool) -> Option<(usize, &mut String)> {
        let index = self.open?;
        match self.items.get_mut(index) {
            Some((_, item, _)) if is_kind(item) => match item {
                Item::Message { text } | Item::Reasoning { text, .. } => Some((index, text)),
                Item::FunctionCall { .. } => None,
            },
            _ => None,
        }
    }

    fn fail(&mut self, origin: &Origin, out: &mut Vec<u8>, error: &GatewayError) {
        self.ensure_id(origin);
        self.event(
            out,
            "error",
            json!({"code": error.code.as_str(), "message": error.worded(Wording::OpenAi), "param": error.param}),
        );
        let response = self.response(origin, Status::Failed, None, Some(error));
        self.event(out, "response.failed", json!({ "response": response }));
        self.ended = true;
    }
}

/// A reasoning item still taking text: neither redacted nor signed.
fn is_open_thinking(item: &Item) -> bool {
    matches!(
        item,
        Item::Reasoning {
            encrypted: None,
            redacted: false,
            ..
        }
    )
}

/// An item's `.done` events, its final form last.
fn done_events(
    id: &str,
    index: usize,
    item: &Item,
    status: &str,
    namespaced: &Namespaced,
) -> Vec<(&'static str, Value)> {
    let mut events = Vec::new();
    match item {
        Item::Message { text } => {
            events.push((
                "response.output_text.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
            ));
            events.push((
                "response.content_part.done",
                json!({"item_id": id, "output_index": index, "content_index": 0,
                       "part": {"type": "output_text", "text": text, "annotations": [], "logprobs": []}}),
            ));
            events.push((
                "response.output_item.done",
                json!({"output_index": index, "item": message_item(id, status, text)}),
            ));
        }
        Item::Reasoning {
            text,
            encrypted,
            redacted,
        } => {
            if !redacted {
                events.push((
                    "response.reasoning_summary_text.done",
                    json!({"item_id": id, "output_index": index, "summary_index": 0, "text": text}),
                ));
                events.push((
                    "response.reasoning_summary_part.done",
                    json!({"item_id": id, "output_index": index, "summary_index": 0,
                           "part": {"type": "summary_text", "text": text}}),
                ));
            }
            events.push((
                "response.output_item.done",
                json!({"output_index": index, "item": reasoning_item(id, text, encrypted.as_deref(), true)}),
            ));
        }
        Item::FunctionCall {
            call_id,
            name,
            arguments,
        } => {
            let name = namespaced.split(name);
            events.push((
                "response.function_call_arguments.done",
                json!({"item_id": id, "output_index": index, "name": name.1, "arguments": arguments}),
            ));
            events.push((
                "response.output_item.done",
                json!({"output_index": index,
                       "item": function_call_item(id, "completed", call_id, name, arguments)}),
            ));
        }
    }
    events
}

impl StreamEncoder for ResponseEvents {
    fn start(&mut self, origin: &Origin, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        self.ensure_id(origin);
        self.origin = origin.clone();
        let response = self.response(origin, Status::InProgress, None, None);
        self.event(out, "response.created", json!({ "response": response }));
        self.event(out, "response.in_progress", json!({ "response": response }));
    }

    fn text(&mut self, origin: &Origin, out: &mut Vec<u8>, text: &str) {
        if self.ended || !self.room(origin, out, text.len()) {
            return;
        }
        let index = match self.open_item(|i| matches!(i, Item::Message { .. })) {
            Some((index, buffer)) => {
                buffer.push_str(text);
                index
            }
            None => {
                let index = self.add_item(
                    out,
                    "msg",
                    Item::Message {
                        text: text.to_owned(),
                    },
                );
                self.open = Some(index);
                index
            }
        };
        let id = self
            .items
            .get(index)
            .map(|i| i.0.clone())
            .unwrap_or_default();
        self.event(
            out,
            "response.output_text.delta",
            json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text, "logprobs": []}),
        );
    }

    fn reasoning(&mut self, origin: &Origin, out: &mut Vec<u8>, delta: Reasoning<'_>) {
        if self.ended {
            return;
        }
        match delta {
            Reasoning::Text(text) => {
                if !self.room(origin, out, text.len()) {
                    return;
                }
                let open = self.open_item(is_open_thinking);
                let index = match open {
                    Some((index, buffer)) => {
                        buffer.push_str(text);
                        index
                    }
                    None => {
                        let item = Item::Reasoning {
                            text: text.to_owned(),
                            encrypted: None,
                            redacted: false,
                        };
                        let index = self.add_item(out, "rs", item);
                        self.open = Some(index);
                        index
                    }
                };
                let id = self
                    .items
                    .get(index)
                    .map(|i| i.0.clone())
                    .unwrap_or_default();
                self.event(
                    out,
                    "response.reasoning_summary_text.delta",
                    json!({"item_id": id, "output_index": index, "summary_index": 0, "delta": text}),
                );
            }
            Reasoning::Redacted(data) => {
                if !self.room(origin, out, data.len()) {
                    return;
                }
                let item = Item::Reasoning {
                    text: String::new(),
                    encrypted: Some(data.to_owned()),
                    redacted: true,
                };
                let index = self.add_item(out, "rs", item);
                self.close(out, index);
            }
            // The signature closes the block of thinking it signs.
            Reasoning::Signature(signature) => {
                if !self.room(origin, out, signature.len()) {
                    return;
                }
                let Some(index) = self.open.filter(|&i| {
                    self.items
                        .get(i)
                        .is_some_and(|(_, item, _)| is_open_thinking(item))
                }) else {
                    return;
                };
                if let Some((_, Item::Reasoning { encrypted, .. }, _)) = self.items.get_mut(index) {
                    *encrypted = Some(format!("{SIGNATURE_PREFIX}{signature}"));
                }
                self.close_open(out);
            }
        }
    }

    fn tool_call_start(
        &mut self,
        origin: &Origin,
        out: &mut Vec<u8>,
        _index: u32,
        id: &str,
        name: &str,
    ) {
        if self.ended || !self.room(origin, out, id.len() + name.len()) {
            return;
        }
        let item = Item::FunctionCall {
            call_id: id.to_owned(),
            name: name.to_owned(),
            arguments: String::new(),
        };
        let index = self.add_item(out, "fc", item);
        self.calls.push(index);
    }

    fn tool_call_arguments(
        &mut self,
        origin: &Origin,
        out: &mut Vec<u8>,
        index: u32,
        fragment: &str,
    ) {
        if self.ended || !self.room(origin, out, fragment.len()) {
            return;
        }
        let Some(&output_index) = usize::try_from(index).ok().and_then(|i| self.calls.get(i))
        else {
            return;
        };
        let Some((id, Item::FunctionCall { arguments, .. }, _)) = self.items.get_mut(output_index)
        else {
            return;
        };
        arguments.push_str(fragment);
        let id = id.clone();
        self.event(
            out,
            "response.function_call_arguments.delta",
            json!({"item_id": id, "output_index": output_index, "delta": fragment}),
        );
    }

    fn finish(&mut self, _origin: &Origin, _out: &mut Vec<u8>, reason: FinishReason) {
        self.finish = Some(reason);
    }

    /// Every item closed in order, then `response.completed` (or
    /// `response.incomplete`) with the whole response and its usage.
    fn done(&mut self, origin: &Origin, out: &mut Vec<u8>, usage: Option<&Usage>) {
        if self.ended || self.passed_through {
            return;
        }
        self.ensure_id(origin);
        self.open = None;
        for index in 0..self.items.len() {
            self.close(out, index);
        }
        let status = Status::of(self.finish);
        let kind = match status {
            Status::Incomplete(_) => "response.incomplete",
            _ => "response.completed",
        };
        let response = self.response(origin, status, usage, None);
        self.event(out, kind, json!({ "response": response }));
        self.ended = true;
    }

    /// An `error` event, then `response.failed`.
    fn error(&mut self, out: &mut Vec<u8>, error: &GatewayError, _request_id: &str) {
        if self.ended {
            return;
        }
        let mut origin = std::mem::take(&mut self.origin);
        if let Some(provider) = &error.provider {
            provider.clone_into(&mut origin.provider);
        }
        if self.id.is_empty() {
            self.id = "resp_failed".into();
        }
        self.fail(&origin, out, error);
    }

    /// A vendor event already in the Responses format: its `type` names the
    /// SSE event; its numbering and response are followed, so an error of
    /// ours after it goes on from there.
    fn passthrough(&mut self, out: &mut Vec<u8>, event: &[u8]) {
        #[derive(serde::Deserialize)]
        struct Head {
            #[serde(default)]
            id: String,
            #[serde(default)]
            model: String,
            #[serde(default)]
            created_at: Option<f64>,
        }
        #[derive(serde::Deserialize)]
        struct Event<'a> {
            #[serde(rename = "type", borrow)]
            kind: Option<std::borrow::Cow<'a, str>>,
            #[serde(default)]
            sequence_number: Option<u64>,
            #[serde(default)]
            response: Option<Head>,
        }
        self.passed_through = true;
        let parsed = serde_json::from_slice::<Event>(event).ok();
        if let Some(parsed) = &parsed {
            if let Some(n) = parsed.sequence_number {
                self.sequence = n.saturating_add(1);
            }
            if let Some(head) = &parsed.response {
                head.id.clone_into(&mut self.id);
                head.model.clone_into(&mut self.origin.model);
                // Seconds, as a number (the SDK's type is a float).
                self.origin.created = head.created_at.map_or(0, |t| t as u64);
            }
        }
        let kind = parsed
            .and_then(|p| p.kind)
            .filter(|k| !k.contains(['\n', '\r']));
        if let Some(kind) = kind {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(kind.as_bytes());
            out.push(b'\n');
        }
        crate::sse::write_data(out, event);
    }
}

#[cfg(test)]
mod tests;
