//! The interface each vendor dialect implements, and the vendor-neutral
//! types that flow between the server, the answer planner and the dialects.
//!
//! Flow of one request (see server.rs): `check_headers` -> scenario errors
//! (`error`) -> `parse_request` (by default `parse`) the body into a
//! [`Prompt`] (`is_stream` says whether it asks for a stream) -> `filtered`
//! if a content-filter directive is set -> `answer::plan` -> `response`
//! (JSON) or `stream` (events, written by `encode_event`). Adding a vendor
//! means one more file implementing [`Dialect`] and one line in
//! `server::dialects()`.

use serde_json::Value;

use crate::answer::Answer;
use crate::http::Request;
use crate::scenario::Filter;
use crate::sse;

/// What the answer planner needs from a request, whatever its dialect.
#[derive(Debug, Default)]
pub struct Prompt {
    pub model: String,
    pub stream: bool,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
    /// Choices asked for (OpenAI `n`, Gemini `candidateCount`); 0 is 1.
    /// Each is the same planned answer, under its own index.
    pub choices: u32,
    /// Text of the last user message (tool results excluded).
    pub last_user_text: String,
    /// Whitespace-separated words of all message text, system included.
    pub prompt_words: u64,
    pub max_tokens: Option<u64>,
    pub stop: Vec<String>,
    pub tools: Vec<Tool>,
    pub tool_choice: ToolChoice,
    /// Set when the last message carries tool results: their texts.
    pub tool_results: Option<Vec<String>>,
    /// Tool calls already made in the conversation, so new call ids
    /// (`call_<n>`, `toolu_<n>`) continue the numbering instead of repeating.
    pub prior_tool_calls: u64,
    /// Structured output asked for: `Some(None)` any JSON object,
    /// `Some(Some(schema))` JSON matching the schema.
    pub json: Option<Option<Value>>,
    /// The request asks the model to think and to show it (Gemini
    /// `includeThoughts`, Claude `thinking`, DashScope `enable_thinking`):
    /// the answer opens with [`crate::answer::reasoning_text`].
    pub reasoning: bool,
    /// Words of the prompt before its last cache breakpoint (Bedrock's
    /// `cachePoint`): reported as read from the cache, as if it were warm.
    pub cached_words: u64,
    // --- Anthropic's own (set by mock/src/anthropic.rs) ---------------------
    /// `thinking` is on: the answer starts with a signed thinking block.
    pub anthropic_thinking: bool,
    /// The prompt up to its last `cache_control` breakpoint, when it is long
    /// enough to cache: (its key, its words).
    pub anthropic_cache: Option<(String, u64)>,
    /// The web search server tool is offered and the last message is the
    /// user's (a new turn, not a paused one sent back): `pause-turn` pauses it.
    pub anthropic_server_loop: bool,
    // --- Gemini's own (set by mock/src/gemini.rs) ---------------------------
    /// Built-in tools offered (`googleSearch`, `codeExecution`, `urlContext`).
    pub gemini_builtin_tools: bool,
    /// `googleSearch` offered.
    pub gemini_search: bool,
    /// `toolConfig.includeServerSideToolInvocations: true`.
    pub gemini_server_invocations: bool,
    // --- Bedrock's own (set by mock/src/bedrock.rs) -------------------------
    /// Converse asked a Claude model for `/stop_sequence`
    /// (`additionalModelResponseFieldPaths`): the answer says which stop
    /// sequence matched, in `additionalModelResponseFields`.
    pub bedrock_stop_sequence_field: bool,
    /// Request fields the vendor's answer repeats (the Responses API's
    /// `instructions`, `tools`, `text`...).
    pub echo: serde_json::Map<String, Value>,
    /// The Responses API's input items, as its `input_items` lists them.
    pub input_items: Vec<Value>,
    /// The Responses request came to Azure's v1 API (whose stored
    /// responses are not OpenAI's).
    pub azure: bool,
}

impl Prompt {
    /// How many choices to answer (at least 1).
    pub fn choices(&self) -> u32 {
        self.choices.max(1)
    }
}

#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    /// JSON schema of the arguments.
    pub schema: Value,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub enum ToolChoice {
    #[default]
    Auto,
    None,
    /// OpenAI "required", Anthropic {"type":"any"}.
    Any,
    Named(String),
}

/// An error the dialect renders in its own format.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// A scenario `error-NNN` (or `fail-first`'s 503).
    Status(u16),
    /// `error-400-context`.
    ContextLength,
    /// Missing or bad credentials, with the vendor's message.
    Auth(String),
    /// A 400 for an invalid request, with a message naming the problem.
    Invalid(String),
    /// A 400 naming the parameter at fault (OpenAI's `param` and `code`);
    /// dialects without those fields render it as an `Invalid`.
    Param {
        message: String,
        param: String,
        code: Option<&'static str>,
    },
}

/// A complete non-stream answer (always JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    /// Seconds for a `retry-after` header (rate limits).
    pub retry_after: Option<&'static str>,
}

/// One server-sent event. `data` is JSON (or OpenAI's `[DONE]`).
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub name: Option<&'static str>,
    pub data: String,
    /// Content-carrying event (text or tool-argument delta): the `cut` and
    /// `stream-error` directives strike after a few of these.
    pub delta: bool,
}

/// Per-response identity: a sequence number for the response id and the
/// creation time.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    pub seq: u64,
    pub created: u64,
}

/// The vendor's own answer when its content filter strikes: an error or a
/// 200 verdict as JSON, or, to a stream request, a stream carrying the verdict.
#[derive(Debug)]
pub enum Filtered {
    Reply(Reply),
    Stream(Vec<SseEvent>),
}

pub trait Dialect: Sync + Send {
    /// "openai", "anthropic": used in the default answer text.
    fn name(&self) -> &'static str;
    /// Whether a POST to `path` is this dialect's completion endpoint.
    fn handles(&self, path: &str) -> bool;
    /// Whether `path` is another endpoint of this vendor's API (Anthropic's
    /// token count, the Responses API's stored responses), answered by [`Self::call`].
    fn has_call(&self, _path: &str) -> bool {
        false
    }
    /// The answer to a request on such an endpoint.
    fn call(&self, _req: &Request, _path: &str) -> Reply {
        self.error(&Failure::Status(404))
    }
    /// Credentials and protocol headers.
    fn check_headers(&self, req: &Request) -> Result<(), Failure>;
    /// Validates the JSON body like the vendor does; extracts the prompt.
    fn parse(&self, body: &Value) -> Result<Prompt, Failure>;
    /// `parse`, for vendors that put the model in the URL. The server sets
    /// `Prompt::stream` from `is_stream` afterwards.
    fn parse_request(&self, _req: &Request, body: &Value) -> Result<Prompt, Failure> {
        self.parse(body)
    }
    /// Whether the request asks for a stream (Gemini and Bedrock: the path;
    /// DashScope: a header).
    fn is_stream(&self, _req: &Request, body: &Value) -> bool {
        body.get("stream").and_then(Value::as_bool).unwrap_or(false)
    }
    /// Whether this vendor's stream lines always end with CRLF.
    fn crlf(&self) -> bool {
        false
    }
    /// The vendor's error response.
    fn error(&self, failure: &Failure) -> Reply;
    /// Text the model says before calling tools (Anthropic models narrate).
    fn tool_preface(&self) -> Option<&'static str> {
        None
    }
    /// Non-stream response body.
    fn response(&self, prompt: &Prompt, answer: &Answer, meta: Meta) -> Value;
    /// Stream events, in wire order.
    fn stream(&self, prompt: &Prompt, answer: &Answer, meta: Meta) -> Vec<SseEvent>;
    /// The vendor's mid-stream error event.
    fn stream_error(&self) -> SseEvent;
    /// The stream's content type (Bedrock: the binary AWS event stream).
    fn stream_content_type(&self) -> &'static str {
        "text/event-stream; charset=utf-8"
    }
    /// Appends event number `index` in the stream's wire format.
    fn encode_event(&self, _index: usize, e: &SseEvent, crlf: bool, out: &mut Vec<u8>) {
        sse::encode(e, crlf, out);
    }
    /// A header naming the error type (AWS: `x-amzn-errortype`).
    fn error_header(&self, _failure: &Failure) -> Option<(&'static str, String)> {
        None
    }
    /// The vendor's answer when its content filter strikes (`blocked-prompt`,
    /// `filtered-answer`, `filtered-stream`); `None`: the usual answer, with
    /// the content-filter finish the planner chose (a blocked prompt is then
    /// answered normally: the dialect has no input filter).
    fn filtered(&self, _filter: Filter, _p: &Prompt, _meta: Meta) -> Option<Filtered> {
        None
    }
}

/// serde_json::Value to text; serialising a Value cannot fail, but avoid
/// unwrap anyway.
pub fn to_json(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Words as the mock counts tokens: whitespace-separated pieces.
pub fn count_words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}
