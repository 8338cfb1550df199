//! The neutral stream: dialect decoders push events into an [`EventWriter`],
//! which keeps the stream contract and the facts the session meters, and
//! hands each event to the client surface's [`StreamEncoder`].

use crate::error::GatewayError;
use crate::model::estimate::TextCount;
use crate::model::request::Thinking;
use crate::model::response::{FinishReason, Origin, Usage};
use crate::model::Api;

/// A client surface's stream format: it writes each event's bytes. The
/// [`EventWriter`] calls it in contract order (start first, nothing after
/// `done` or `error`), so encoders keep only their own format's state.
pub trait StreamEncoder {
    /// The stream's opening (OpenAI: the role chunk).
    fn start(&mut self, origin: &Origin, out: &mut Vec<u8>);
    fn text(&mut self, origin: &Origin, out: &mut Vec<u8>, text: &str);
    /// A piece of the model's reasoning (before or between answer parts).
    fn reasoning(&mut self, origin: &Origin, out: &mut Vec<u8>, delta: Reasoning<'_>);
    /// The first event of tool call number `index`: its id and name.
    fn tool_call_start(
        &mut self,
        origin: &Origin,
        out: &mut Vec<u8>,
        index: u32,
        id: &str,
        name: &str,
    );
    fn tool_call_arguments(
        &mut self,
        origin: &Origin,
        out: &mut Vec<u8>,
        index: u32,
        fragment: &str,
    );
    fn finish(&mut self, origin: &Origin, out: &mut Vec<u8>, reason: FinishReason);
    /// The events that follow belong to choice `index` (an answer with
    /// several, which the client asked for), until the next call. A
    /// stream starts at choice 0, and a writer calls this only when the
    /// choice changes, after `start`: an answer of one choice never sees
    /// it. Formats that carry one choice (whose clients never ask for
    /// more) ignore it.
    fn choice(&mut self, origin: &Origin, out: &mut Vec<u8>, index: u32);
    /// The end; `usage` when the vendor reported it (formats that report
    /// usage only when asked check that themselves).
    fn done(&mut self, origin: &Origin, out: &mut Vec<u8>, usage: Option<&Usage>);
    /// The stream failed after it started.
    fn error(&mut self, out: &mut Vec<u8>, error: &GatewayError, request_id: &str);
    /// A vendor event already in this surface's format (a pass-through
    /// pair), written as it is.
    fn passthrough(&mut self, out: &mut Vec<u8>, event: &Passed);
}

/// A vendor event already in the client's format (a pass-through pair), and
/// what its dialect read of it for a surface that goes on from it: the
/// Responses API names and numbers its events in their data and says which
/// response they build, and an event of ours after them (an error) follows
/// on. The dialect reads each event once; the surface reads no JSON.
#[derive(Debug, Clone, Copy, Default)]
pub struct Passed<'a> {
    pub data: &'a [u8],
    /// The event's name, where its data names it.
    pub name: Option<&'a str>,
    /// Its number in the stream, where its data numbers it.
    pub sequence: Option<u64>,
    /// The response it carries, if any.
    pub response: Option<PassedResponse<'a>>,
}

impl<'a> Passed<'a> {
    /// An event whose data says nothing the surface follows.
    pub fn data(data: &'a [u8]) -> Self {
        Self {
            data,
            ..Self::default()
        }
    }
}

/// The response a passed-through event carries: its id, model and creation
/// (seconds).
#[derive(Debug, Clone, Copy)]
pub struct PassedResponse<'a> {
    pub id: &'a str,
    pub model: &'a str,
    pub created: Option<u64>,
}

/// A piece of reasoning: text, the signature that closes a block of it, or
/// a block the vendor sends encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reasoning<'a> {
    Text(&'a str),
    Signature(&'a str),
    Redacted(&'a str),
}

impl Reasoning<'_> {
    /// Adds this piece to a complete answer's reasoning blocks (what a
    /// non-stream decoder builds): text extends the open block, a signature
    /// closes it, a redacted block stands alone.
    pub fn push_to(self, blocks: &mut Vec<Thinking>) {
        let open = blocks
            .last_mut()
            .filter(|b| b.signature.is_none() && b.redacted.is_none());
        match (self, open) {
            (Reasoning::Text(text), Some(block)) => block.text.push_str(text),
            (Reasoning::Signature(signature), Some(block)) => {
                block.signature = Some(signature.to_owned())
            }
            (Reasoning::Text(text), None) => blocks.push(Thinking {
                text: text.to_owned(),
                ..Thinking::default()
            }),
            (Reasoning::Signature(signature), None) => blocks.push(Thinking {
                signature: Some(signature.to_owned()),
                ..Thinking::default()
            }),
            (Reasoning::Redacted(data), _) => blocks.push(Thinking {
                redacted: Some(data.to_owned()),
                ..Thinking::default()
            }),
        }
    }
}

/// Writes one response stream for a dialect's decoder.
///
/// Decoders push what the vendor said (text, tool calls, the finish, usage,
/// who answered); the writer keeps the contract (one start, nothing after
/// the end) and the facts the session reads for metering.
pub struct EventWriter {
    origin: Origin,
    request_id: String,
    /// The client asked for a usage report at the end.
    include_usage: bool,
    /// The client speaks the dialect's own API: vendor events may pass
    /// through as they are.
    native: bool,
    /// The client's API (which of a vendor's own APIs a native stream is in).
    api: Api,
    encoder: Box<dyn StreamEncoder>,
    started: bool,
    finished: bool,
    /// Text, a tool call or a finish reason has been written.
    content_started: bool,
    /// The error the stream ended with, if it did.
    failure: Option<GatewayError>,
    /// Answer text and tool arguments written so far: what the client was
    /// sent, for reconciling a cut stream.
    delivered: TextCount,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    done: bool,
    /// The vendor's key of each tool call of the current choice started
    /// (its content block, its own index): a call's position here is its
    /// index for the client.
    tool_keys: Vec<u64>,
    /// How many choices the client asked for (1 unless it asked for several).
    choices: u32,
    /// The choice the events belong to now.
    choice: u32,
    /// Every choice's own state, by its index, the current one's slot
    /// empty (its state is in the fields above): allocated at the first
    /// change of choice only.
    others: Vec<ChoiceState>,
}

/// What the writer keeps per choice, for the choices not current.
#[derive(Debug, Default)]
struct ChoiceState {
    tool_keys: Vec<u64>,
    finished: bool,
    /// Events of this choice were written.
    seen: bool,
}

/// More tool calls than any answer has: later ones are dropped rather
/// than growing the list without bound.
const MAX_TOOL_CALLS: usize = 4096;

impl std::fmt::Debug for EventWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventWriter")
            .field("origin", &self.origin)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl EventWriter {
    pub fn new(
        encoder: Box<dyn StreamEncoder>,
        origin: Origin,
        request_id: String,
        include_usage: bool,
        native: bool,
    ) -> Self {
        Self {
            origin,
            request_id,
            include_usage,
            native,
            api: Api::OpenAiChat,
            encoder,
            started: false,
            finished: false,
            content_started: false,
            failure: None,
            delivered: TextCount::default(),
            finish_reason: None,
            usage: None,
            done: false,
            tool_keys: Vec::new(),
            choices: 1,
            choice: 0,
            others: Vec::new(),
        }
    }

    /// The writer for an answer of `choices` choices (the client asked
    /// for several; at least 1).
    pub fn with_choices(mut self, choices: u32) -> Self {
        self.choices = choices.max(1);
        self
    }

    /// The choice the events belong to now (0 unless the client asked
    /// for several).
    pub fn current_choice(&self) -> u32 {
        self.choice
    }

    /// The events that follow belong to choice `index` (the vendor's
    /// number for it). A number outside the choices the client asked for
    /// is the vendor's error: nothing is written.
    pub fn choice(&mut self, out: &mut Vec<u8>, index: u32) -> Result<(), GatewayError> {
        if index >= self.choices {
            return Err(GatewayError::new(
                crate::error::ErrorCode::UpstreamError,
                format!(
                    "the provider answered choice {index} of {} asked for",
                    self.choices
                ),
            ));
        }
        if index == self.choice || self.done {
            return Ok(());
        }
        if self.others.is_empty() {
            self.others = (0..self.choices).map(|_| ChoiceState::default()).collect();
        }
        let current = ChoiceState {
            tool_keys: std::mem::take(&mut self.tool_keys),
            finished: self.finished,
            seen: true,
        };
        let slot = usize::try_from(self.choice).unwrap_or(usize::MAX);
        if let Some(state) = self.others.get_mut(slot) {
            *state = current;
        }
        let next = usize::try_from(index)
            .ok()
            .and_then(|i| self.others.get_mut(i))
            .map(std::mem::take)
            .unwrap_or_default();
        self.tool_keys = next.tool_keys;
        self.finished = next.finished;
        self.choice = index;
        self.begin(out);
        self.encoder.choice(&self.origin, out, index);
        Ok(())
    }

    /// The writer for a client of `api` (OpenAI chat unless said).
    pub fn for_api(mut self, api: Api) -> Self {
        self.api = api;
        self
    }

    /// The client's API: a dialect speaking several picks its stream's format by it.
    pub fn api(&self) -> Api {
        self.api
    }

    /// Who answered, as the stream says so far.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The vendor's response id (ignored when empty, as Azure's annotation
    /// chunks have it).
    pub fn set_id(&mut self, id: &str) {
        if !id.is_empty() && self.origin.id != id {
            id.clone_into(&mut self.origin.id);
        }
    }

    /// The stop sequence the answer ended on, as the vendor reported it.
    pub fn set_stop_sequence(&mut self, sequence: &str) {
        if self.origin.stop_sequence.as_deref() != Some(sequence) {
            self.origin.stop_sequence = Some(sequence.to_owned());
        }
    }

    /// The vendor model that answered (ignored when empty).
    pub fn set_model(&mut self, model: &str) {
        if !model.is_empty() && self.origin.model != model {
            model.clone_into(&mut self.origin.model);
        }
    }

    /// The vendor's creation time (ignored when zero).
    pub fn set_created(&mut self, created: u64) {
        if created != 0 {
            self.origin.created = created;
        }
    }

    /// The vendor's usage report (the latest wins: vendors repeat it).
    pub fn set_usage(&mut self, usage: Option<Usage>) {
        self.usage = usage;
    }

    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    fn begin(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            self.encoder.start(&self.origin, out);
        }
    }

    /// The stream's opening, before any content.
    pub fn start(&mut self, out: &mut Vec<u8>) {
        if !self.done {
            self.begin(out);
        }
    }

    pub fn content(&mut self, out: &mut Vec<u8>, text: &str) {
        if self.done || text.is_empty() {
            return;
        }
        self.begin(out);
        self.content_started = true;
        self.delivered.add(text);
        self.encoder.text(&self.origin, out, text);
    }

    /// A piece of the model's reasoning.
    pub fn reasoning(&mut self, out: &mut Vec<u8>, delta: Reasoning<'_>) {
        let (Reasoning::Text(piece) | Reasoning::Signature(piece) | Reasoning::Redacted(piece)) =
            delta;
        if self.done || piece.is_empty() {
            return;
        }
        self.begin(out);
        self.content_started = true;
        if let Reasoning::Text(text) = delta {
            self.delivered.add(text);
        }
        self.encoder.reasoning(&self.origin, out, delta);
    }

    /// A new tool call with its id and name. `key` is the vendor's own
    /// handle for it (a content block index, its call index) that its
    /// argument deltas name; calls are numbered for the client in order of
    /// appearance. A key already started is ignored.
    pub fn tool_call_start(&mut self, out: &mut Vec<u8>, key: u64, id: &str, name: &str) {
        if self.done || self.has_tool_call(key) || self.tool_keys.len() >= MAX_TOOL_CALLS {
            return;
        }
        let index = u32::try_from(self.tool_keys.len()).unwrap_or(u32::MAX);
        self.tool_keys.push(key);
        self.begin(out);
        self.content_started = true;
        self.encoder
            .tool_call_start(&self.origin, out, index, id, name);
    }

    /// A piece of the arguments of the tool call the vendor keys `key`
    /// (ignored for a key never started).
    pub fn tool_call_arguments(&mut self, out: &mut Vec<u8>, key: u64, fragment: &str) {
        if self.done || fragment.is_empty() {
            return;
        }
        let Some(position) = self.tool_keys.iter().position(|&k| k == key) else {
            return;
        };
        let index = u32::try_from(position).unwrap_or(u32::MAX);
        self.begin(out);
        self.content_started = true;
        self.delivered.add(fragment);
        self.encoder
            .tool_call_arguments(&self.origin, out, index, fragment);
    }

    pub fn finish(&mut self, out: &mut Vec<u8>, reason: FinishReason) {
        if self.finished {
            return;
        }
        self.finished = true;
        if self.done {
            return;
        }
        self.begin(out);
        self.content_started = true;
        if self.choice == 0 {
            self.finish_reason = Some(reason);
        }
        self.encoder.finish(&self.origin, out, reason);
    }

    /// Ends the stream (the encoder reports usage if its format does).
    pub fn done(&mut self, out: &mut Vec<u8>) {
        if self.done {
            return;
        }
        self.encoder.done(&self.origin, out, self.usage.as_ref());
        self.done = true;
    }

    /// An error after the stream started: the surface's error event, then nothing.
    pub fn error(&mut self, out: &mut Vec<u8>, error: &GatewayError) {
        if self.done {
            return;
        }
        let mut error = error.clone();
        if error.provider.is_none() {
            error.provider = Some(self.origin.provider.clone());
        }
        self.encoder.error(out, &error, &self.request_id);
        self.failure = Some(error);
        self.done = true;
    }

    /// Forwards a vendor event already in the client's format (a
    /// pass-through pair); `has_content` says whether it carries part of
    /// the answer.
    pub fn passthrough(&mut self, out: &mut Vec<u8>, event: &Passed, has_content: bool) {
        if !self.done {
            self.started = true;
            self.content_started |= has_content;
            self.encoder.passthrough(out, event);
        }
    }

    /// A passed-through event began tool call `key`: a later neutral event
    /// for it continues that call (numbered by position, which is the
    /// vendor's own numbering when it counts from 0 in order, as OpenAI does).
    pub fn note_tool_call(&mut self, key: u64) {
        if !self.has_tool_call(key) && self.tool_keys.len() < MAX_TOOL_CALLS {
            self.tool_keys.push(key);
        }
    }

    pub fn has_tool_call(&self, key: u64) -> bool {
        self.tool_keys.contains(&key)
    }

    /// How many tool calls have been started.
    pub fn tool_calls(&self) -> usize {
        self.tool_keys.len()
    }

    /// Whether the client has been sent anything an answer is made of.
    pub fn content_started(&self) -> bool {
        self.content_started
    }

    pub fn failure(&self) -> Option<&GatewayError> {
        self.failure.as_ref()
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    pub fn include_usage(&self) -> bool {
        self.include_usage
    }

    /// Whether vendor events may be passed through (see [`Self::passthrough`]).
    pub fn native(&self) -> bool {
        self.native
    }

    /// True once a finish reason has been sent (for every choice written,
    /// in an answer of several).
    pub fn finished(&self) -> bool {
        self.finished
            && self
                .others
                .iter()
                .zip(0..)
                .all(|(c, i)| i == self.choice || !c.seen || c.finished)
    }

    /// Adds answer text a passed-through event carried to what was delivered.
    pub fn count_delivered(&mut self, text: &str) {
        self.delivered.add(text);
    }

    /// Estimated tokens delivered so far.
    pub fn delivered_tokens(&self) -> u64 {
        self.delivered.tokens()
    }

    /// The finish reason written, when this writer wrote it.
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.finish_reason
    }

    /// A passed-through event carried the finish.
    pub fn mark_finished(&mut self) {
        self.finished = true;
    }

    /// A passed-through event carried the finish, of this reason (what the
    /// session meters: a vendor's verdict passed through as it came).
    pub fn mark_finished_as(&mut self, reason: FinishReason) {
        self.finished = true;
        self.finish_reason = Some(reason);
    }
}
