//! The Responses surface's stream encoder: one state machine per response,
//! writing `crate::wire::openai_responses` events.

use super::{
    function_call_item, item_id, message_item, reasoning_item, response, response_id, Namespaced,
    ResponsesState, Status, SIGNATURE_PREFIX,
};
use crate::error::{GatewayError, Wording};
use crate::model::response::{FinishReason, Origin, Usage};
use crate::model::stream::{Passed, Reasoning, StreamEncoder};
use crate::wire::openai_responses::{Event, Numbered, OutputItem, Part, ResponseError};

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
pub(super) struct ResponseEvents {
    state: ResponsesState,
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
    pub(super) fn new(state: ResponsesState) -> Self {
        Self {
            namespaced: Namespaced::of(&state.echo),
            state,
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

    fn ensure_id(&mut self, origin: &Origin) {
        if self.id.is_empty() {
            self.id = response_id(origin, &self.state);
        }
    }

    /// Lifecycle events (`names`) carrying the response so far.
    fn lifecycle(
        &mut self,
        out: &mut Vec<u8>,
        names: &[&'static str],
        origin: &Origin,
        status: Status,
        usage: Option<&Usage>,
        error: Option<&GatewayError>,
    ) {
        let output: Vec<OutputItem> = if status == Status::InProgress {
            Vec::new()
        } else {
            self.items
                .iter()
                .map(|(id, item, _)| final_item(id, item, status.item(), &self.namespaced))
                .collect()
        };
        let message = error.map(|e| e.worded(Wording::OpenAi));
        let error = error
            .zip(message.as_deref())
            .map(|(e, message)| ResponseError {
                code: e.code.as_str(),
                message,
            });
        let echo = &self.state.echo;
        let response = response(origin, &self.id, status, &output, usage, error, echo);
        for &name in names {
            let event = Event::Lifecycle {
                name,
                response: &response,
            };
            write(out, &mut self.sequence, &event);
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
        let output_index = self.items.len();
        let id = item_id(prefix, output_index, &self.id);
        let added = match &item {
            Item::Message { .. } => message_item(&id, "in_progress", ""),
            Item::Reasoning { encrypted, .. } => {
                reasoning_item(&id, "", encrypted.as_deref(), false)
            }
            Item::FunctionCall { call_id, name, .. } => {
                function_call_item(&id, "in_progress", call_id, self.namespaced.split(name), "")
            }
        };
        let event = Event::OutputItem {
            done: false,
            output_index,
            item: added,
        };
        write(out, &mut self.sequence, &event);
        let part = match &item {
            Item::Message { .. } => Some(Event::ContentPart {
                done: false,
                item_id: &id,
                output_index,
                content_index: 0,
                part: Part::output_text(""),
            }),
            Item::Reasoning {
                redacted: false, ..
            } => Some(Event::ReasoningSummaryPart {
                done: false,
                item_id: &id,
                output_index,
                summary_index: 0,
                part: Part::SummaryText { text: "" },
            }),
            _ => None,
        };
        if let Some(part) = part {
            write(out, &mut self.sequence, &part);
        }
        self.items.push((id, item, false));
        output_index
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
        let item = Done {
            id,
            output_index: index,
            item,
            status,
        };
        item.write(out, &mut self.sequence, &self.namespaced);
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
        let event = Event::Error {
            code: error.code.as_str(),
            message: &error.worded(Wording::OpenAi),
            param: error.param.as_deref(),
        };
        write(out, &mut self.sequence, &event);
        let failed = ["response.failed"];
        self.lifecycle(out, &failed, origin, Status::Failed, None, Some(error));
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

/// `event: <type>` and `data: <json>` with the event's sequence number.
fn write(out: &mut Vec<u8>, sequence: &mut u64, event: &Event<'_>) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(event.name().as_bytes());
    out.extend_from_slice(b"\ndata: ");
    let start = out.len();
    if serde_json::to_writer(&mut *out, &Numbered::new(*sequence, event)).is_err() {
        out.truncate(start);
        out.extend_from_slice(b"{}");
    }
    out.extend_from_slice(b"\n\n");
    *sequence += 1;
}

/// A streamed item in its final form.
fn final_item<'a>(
    id: &'a str,
    item: &'a Item,
    status: &'a str,
    namespaced: &'a Namespaced,
) -> OutputItem<'a> {
    match item {
        Item::Message { text } => message_item(id, status, text),
        Item::Reasoning {
            text, encrypted, ..
        } => reasoning_item(id, text, encrypted.as_deref(), true),
        Item::FunctionCall {
            call_id,
            name,
            arguments,
        } => function_call_item(id, status, call_id, namespaced.split(name), arguments),
    }
}

/// An item being closed: output item `output_index` of a response whose
/// items end as `status`.
struct Done<'a> {
    id: &'a str,
    output_index: usize,
    item: &'a Item,
    status: &'a str,
}

impl Done<'_> {
    /// The item's `.done` events, its final form last.
    fn write(&self, out: &mut Vec<u8>, sequence: &mut u64, namespaced: &Namespaced) {
        let Done {
            id: item_id,
            output_index,
            item,
            status,
        } = *self;
        match item {
            Item::Message { text } => {
                let text_done = Event::OutputTextDone {
                    item_id,
                    output_index,
                    content_index: 0,
                    text,
                    logprobs: [],
                };
                write(out, sequence, &text_done);
                let part_done = Event::ContentPart {
                    done: true,
                    item_id,
                    output_index,
                    content_index: 0,
                    part: Part::output_text(text),
                };
                write(out, sequence, &part_done);
            }
            Item::Reasoning {
                text,
                redacted: false,
                ..
            } => {
                let text_done = Event::ReasoningSummaryTextDone {
                    item_id,
                    output_index,
                    summary_index: 0,
                    text,
                };
                write(out, sequence, &text_done);
                let part_done = Event::ReasoningSummaryPart {
                    done: true,
                    item_id,
                    output_index,
                    summary_index: 0,
                    part: Part::SummaryText { text },
                };
                write(out, sequence, &part_done);
            }
            Item::Reasoning { .. } => {}
            Item::FunctionCall {
                name, arguments, ..
            } => {
                let arguments_done = Event::FunctionCallArgumentsDone {
                    item_id,
                    output_index,
                    name: namespaced.split(name).1,
                    arguments,
                };
                write(out, sequence, &arguments_done);
            }
        }
        // A function call is done as completed, whatever the response.
        let status = match item {
            Item::FunctionCall { .. } => "completed",
            _ => status,
        };
        let item = final_item(item_id, item, status, namespaced);
        let done = Event::OutputItem {
            done: true,
            output_index,
            item,
        };
        write(out, sequence, &done);
    }
}

impl StreamEncoder for ResponseEvents {
    fn start(&mut self, origin: &Origin, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        self.ensure_id(origin);
        self.origin = origin.clone();
        let names = ["response.created", "response.in_progress"];
        self.lifecycle(out, &names, origin, Status::InProgress, None, None);
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
        let Some((item_id, _, _)) = self.items.get(index) else {
            return;
        };
        let event = Event::OutputTextDelta {
            item_id,
            output_index: index,
            content_index: 0,
            delta: text,
            logprobs: [],
        };
        write(out, &mut self.sequence, &event);
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
                let Some((item_id, _, _)) = self.items.get(index) else {
                    return;
                };
                let event = Event::ReasoningSummaryTextDelta {
                    item_id,
                    output_index: index,
                    summary_index: 0,
                    delta: text,
                };
                write(out, &mut self.sequence, &event);
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
        let event = Event::FunctionCallArgumentsDelta {
            item_id: id,
            output_index,
            delta: fragment,
        };
        write(out, &mut self.sequence, &event);
    }

    fn finish(&mut self, _origin: &Origin, _out: &mut Vec<u8>, reason: FinishReason) {
        self.finish = Some(reason);
    }

    /// Responses clients never ask for several choices: only
    /// choice 0 is ever written here.
    fn choice(&mut self, _origin: &Origin, _out: &mut Vec<u8>, _index: u32) {}

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
        let name = match status {
            Status::Incomplete(_) => "response.incomplete",
            _ => "response.completed",
        };
        self.lifecycle(out, &[name], origin, status, usage, None);
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
    fn passthrough(&mut self, out: &mut Vec<u8>, event: &Passed) {
        self.passed_through = true;
        if let Some(n) = event.sequence {
            self.sequence = n.saturating_add(1);
        }
        if let Some(response) = &event.response {
            response.id.clone_into(&mut self.id);
            response.model.clone_into(&mut self.origin.model);
            self.origin.created = response.created.unwrap_or(0);
        }
        if let Some(name) = event.name.filter(|k| !k.contains(['\n', '\r'])) {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(name.as_bytes());
            out.push(b'\n');
        }
        crate::formats::sse::write_data(out, event.data);
    }
}
