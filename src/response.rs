//! The unified response side: finish reasons, usage, the `chat.completion`
//! object and the `chat.completion.chunk` stream writer every dialect shares.

use serde::Serialize;

use crate::error::GatewayError;
use crate::sse::write_data;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool_calls",
            Self::ContentFilter => "content_filter",
        }
    }
}

impl Serialize for FinishReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Token usage in OpenAI's shape; the details only when the vendor reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// The sum of two usages (a request's attempts).
    pub fn plus(&self, other: &Usage) -> Usage {
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        Usage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
            cached_tokens: sum(self.cached_tokens, other.cached_tokens),
            reasoning_tokens: sum(self.reasoning_tokens, other.reasoning_tokens),
        }
    }
}

impl Serialize for Usage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        #[derive(Serialize)]
        struct Cached {
            cached_tokens: u64,
        }
        #[derive(Serialize)]
        struct Reasoning {
            reasoning_tokens: u64,
        }
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("prompt_tokens", &self.prompt_tokens)?;
        m.serialize_entry("completion_tokens", &self.completion_tokens)?;
        m.serialize_entry(
            "total_tokens",
            &(self.prompt_tokens + self.completion_tokens),
        )?;
        if let Some(cached_tokens) = self.cached_tokens {
            m.serialize_entry("prompt_tokens_details", &Cached { cached_tokens })?;
        }
        if let Some(reasoning_tokens) = self.reasoning_tokens {
            m.serialize_entry("completion_tokens_details", &Reasoning { reasoning_tokens })?;
        }
        m.end()
    }
}

/// Who answered: stamped on every unified response and chunk.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Origin {
    /// Response id (`chatcmpl-...`), one per response.
    pub id: String,
    pub created: u64,
    /// The vendor model that answered.
    pub model: String,
    pub provider: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallOut {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionOut,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionOut {
    pub name: String,
    pub arguments: String,
}

impl ToolCallOut {
    pub fn new(id: String, name: String, arguments: String) -> Self {
        Self {
            id,
            kind: "function",
            function: FunctionOut { name, arguments },
        }
    }
}

/// A complete non-stream answer, as dialects decode it.
#[derive(Debug, Clone, Default)]
pub struct Completion {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCallOut>,
    pub finish_reason: Option<FinishReason>,
    pub usage: Option<Usage>,
}

impl Completion {
    /// Renders the OpenAI `chat.completion` object.
    pub fn to_json(&self, origin: &Origin) -> Vec<u8> {
        // Every field OpenAI sends, null where we have no value.
        #[derive(Serialize)]
        struct Msg<'a> {
            role: &'static str,
            content: Option<&'a str>,
            refusal: Option<&'a str>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            tool_calls: &'a [ToolCallOut],
        }
        #[derive(Serialize)]
        struct Choice<'a> {
            index: u32,
            message: Msg<'a>,
            logprobs: (),
            finish_reason: Option<FinishReason>,
        }
        #[derive(Serialize)]
        struct Body<'a> {
            id: &'a str,
            object: &'static str,
            created: u64,
            model: &'a str,
            provider: &'a str,
            system_fingerprint: Option<&'a str>,
            choices: [Choice<'a>; 1],
            #[serde(skip_serializing_if = "Option::is_none")]
            usage: Option<&'a Usage>,
        }
        let body = Body {
            id: &origin.id,
            object: "chat.completion",
            created: origin.created,
            model: &origin.model,
            provider: &origin.provider,
            system_fingerprint: None,
            choices: [Choice {
                index: 0,
                message: Msg {
                    role: "assistant",
                    content: self.content.as_deref(),
                    refusal: None,
                    tool_calls: &self.tool_calls,
                },
                logprobs: (),
                finish_reason: self.finish_reason,
            }],
            usage: self.usage.as_ref(),
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

/// What one chunk's `delta` carries.
#[derive(Serialize, Default)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[ToolCallDelta<'a>; 1]>,
    /// `"refusal": null`, in the role chunk as OpenAI sends it.
    #[serde(skip_serializing_if = "Option::is_none")]
    refusal: Option<()>,
}

#[derive(Serialize)]
struct ToolCallDelta<'a> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: FunctionDelta<'a>,
}

#[derive(Serialize)]
struct FunctionDelta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    arguments: &'a str,
}

/// Writes the unified stream: `chat.completion.chunk` events and `[DONE]`.
///
/// Dialect stream decoders call it as vendor events arrive; it keeps the
/// stream contract (one id, choice index 0, role first, usage chunk only if
/// the client asked, nothing after the end).
#[derive(Debug)]
pub struct ChunkWriter {
    pub origin: Origin,
    request_id: String,
    include_usage: bool,
    role_sent: bool,
    finished: bool,
    /// Text, a tool call or a finish reason has been written.
    content_started: bool,
    /// The error the stream ended with, if it did.
    failure: Option<GatewayError>,
    /// Answer text and tool arguments written so far: what the client was
    /// sent, for reconciling a cut stream.
    delivered: crate::estimate::TextCount,
    finish_reason: Option<FinishReason>,
    pub usage: Option<Usage>,
    done: bool,
    /// Every chunk's opening, up to its `choices`, for the origin it was made from.
    head: ChunkHead,
}

/// `data: {"id":…,"object":"chat.completion.chunk","created":…,"model":…,"provider":…,"choices":[`,
/// the same in every chunk of a stream: written once, copied per chunk.
#[derive(Debug, Default)]
struct ChunkHead {
    origin: Origin,
    bytes: Vec<u8>,
}

impl ChunkWriter {
    pub fn new(origin: Origin, request_id: String, include_usage: bool) -> Self {
        Self {
            origin,
            request_id,
            include_usage,
            role_sent: false,
            finished: false,
            content_started: false,
            failure: None,
            delivered: Default::default(),
            finish_reason: None,
            usage: None,
            done: false,
            head: ChunkHead::default(),
        }
    }

    /// Appends the chunk head for the current origin (dialects set the
    /// origin from the vendor's first events, so it is checked each time).
    fn write_head(&mut self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        #[derive(Serialize)]
        struct Head<'a> {
            id: &'a str,
            object: &'static str,
            created: u64,
            model: &'a str,
            provider: &'a str,
            system_fingerprint: Option<&'a str>,
        }
        if self.head.bytes.is_empty() || self.head.origin != self.origin {
            let origin = &self.origin;
            let mut bytes = b"data: ".to_vec();
            let head = Head {
                id: &origin.id,
                object: "chat.completion.chunk",
                created: origin.created,
                model: &origin.model,
                provider: &origin.provider,
                system_fingerprint: None,
            };
            serde_json::to_writer(&mut bytes, &head)?;
            bytes.pop(); // the object's closing brace: the chunk goes on
            bytes.extend_from_slice(b",\"choices\":[");
            self.head = ChunkHead {
                origin: origin.clone(),
                bytes,
            };
        }
        out.extend_from_slice(&self.head.bytes);
        Ok(())
    }

    /// One chunk event: the head, then `tail` writes the rest of the
    /// object after the opening of `choices`.
    fn write_chunk(
        &mut self,
        out: &mut Vec<u8>,
        tail: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
    ) {
        let start = out.len();
        match self.write_head(out).and_then(|()| tail(out)) {
            Ok(()) => out.extend_from_slice(b"}\n\n"),
            Err(_) => out.truncate(start),
        }
    }

    fn chunk(&mut self, out: &mut Vec<u8>, delta: Delta<'_>, finish_reason: Option<FinishReason>) {
        if self.done {
            return;
        }
        // OpenAI's first chunk carries only the role.
        if !self.role_sent {
            self.role_sent = true;
            let role = Delta {
                role: Some("assistant"),
                content: Some(""),
                refusal: Some(()),
                ..Delta::default()
            };
            self.write_choice(out, role, None);
            if delta.content == Some("") && finish_reason.is_none() {
                return;
            }
        }
        if delta.content.is_some_and(|c| !c.is_empty())
            || delta.tool_calls.is_some()
            || finish_reason.is_some()
        {
            self.content_started = true;
        }
        if let Some(text) = delta.content {
            self.count_delivered(text);
        }
        if let Some([call]) = &delta.tool_calls {
            self.count_delivered(call.function.arguments);
        }
        if finish_reason.is_some() {
            self.finish_reason = finish_reason;
        }
        self.write_choice(out, delta, finish_reason);
    }

    /// A chunk with one choice (and `"usage": null` when the client asked
    /// for usage: OpenAI sends the field on every chunk then).
    fn write_choice(&mut self, out: &mut Vec<u8>, delta: Delta<'_>, finish: Option<FinishReason>) {
        #[derive(Serialize)]
        struct Choice<'a> {
            index: u32,
            delta: Delta<'a>,
            logprobs: (),
            finish_reason: Option<FinishReason>,
        }
        let choice = Choice {
            index: 0,
            delta,
            logprobs: (),
            finish_reason: finish,
        };
        let usage_null = self.include_usage;
        self.write_chunk(out, |out| {
            serde_json::to_writer(&mut *out, &choice)?;
            out.push(b']');
            if usage_null {
                out.extend_from_slice(b",\"usage\":null");
            }
            Ok(())
        });
    }

    /// The opening chunk: `{"role":"assistant","content":""}`.
    pub fn start(&mut self, out: &mut Vec<u8>) {
        if !self.role_sent {
            self.chunk(
                out,
                Delta {
                    content: Some(""),
                    ..Delta::default()
                },
                None,
            );
        }
    }

    pub fn content(&mut self, out: &mut Vec<u8>, text: &str) {
        if !text.is_empty() {
            self.chunk(
                out,
                Delta {
                    content: Some(text),
                    ..Delta::default()
                },
                None,
            );
        }
    }

    /// The first delta of tool call number `index`: id and name.
    pub fn tool_call_start(&mut self, out: &mut Vec<u8>, index: u32, id: &str, name: &str) {
        let call = ToolCallDelta {
            index,
            id: Some(id),
            kind: Some("function"),
            function: FunctionDelta {
                name: Some(name),
                arguments: "",
            },
        };
        self.chunk(
            out,
            Delta {
                tool_calls: Some([call]),
                ..Delta::default()
            },
            None,
        );
    }

    pub fn tool_call_arguments(&mut self, out: &mut Vec<u8>, index: u32, fragment: &str) {
        if fragment.is_empty() {
            return;
        }
        let call = ToolCallDelta {
            index,
            id: None,
            kind: None,
            function: FunctionDelta {
                name: None,
                arguments: fragment,
            },
        };
        self.chunk(
            out,
            Delta {
                tool_calls: Some([call]),
                ..Delta::default()
            },
            None,
        );
    }

    pub fn finish(&mut self, out: &mut Vec<u8>, reason: FinishReason) {
        if !self.finished {
            self.finished = true;
            self.chunk(out, Delta::default(), Some(reason));
        }
    }

    /// Ends the stream: the usage chunk if the client asked, then `[DONE]`.
    pub fn done(&mut self, out: &mut Vec<u8>) {
        if self.done {
            return;
        }
        if self.include_usage {
            if let Some(usage) = self.usage {
                self.write_chunk(out, |out| {
                    out.extend_from_slice(b"],\"usage\":");
                    serde_json::to_writer(out, &usage)
                });
            }
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
        self.done = true;
    }

    /// An error after the stream started: one `data: {"error": ...}` event, then nothing.
    pub fn error(&mut self, out: &mut Vec<u8>, error: &GatewayError) {
        if self.done {
            return;
        }
        let mut error = error.clone();
        if error.provider.is_none() {
            error.provider = Some(self.origin.provider.clone());
        }
        write_data(out, &error.to_json(Some(&self.request_id)));
        self.failure = Some(error);
        self.done = true;
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

    /// Forwards a chunk that is already in the unified shape (OpenAI
    /// upstreams); `has_content` says whether it carries part of the answer.
    pub fn passthrough(&mut self, out: &mut Vec<u8>, chunk_json: &[u8], has_content: bool) {
        if !self.done {
            self.role_sent = true;
            self.content_started |= has_content;
            write_data(out, chunk_json);
        }
    }

    /// True once a finish reason has been sent.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// Adds answer text a passed-through chunk carried to what was delivered.
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

    pub fn mark_finished(&mut self) {
        self.finished = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn events(out: &[u8]) -> Vec<Value> {
        std::str::from_utf8(out)
            .unwrap()
            .split("\n\n")
            .filter(|e| !e.is_empty() && *e != "data: [DONE]")
            .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
            .collect()
    }

    fn origin() -> Origin {
        Origin {
            id: "chatcmpl-1".into(),
            created: 1,
            model: "m".into(),
            provider: "p".into(),
        }
    }

    #[test]
    fn stream_contract() {
        let mut w = ChunkWriter::new(origin(), "r".into(), true);
        let mut out = Vec::new();
        w.content(&mut out, "Hi");
        w.tool_call_start(&mut out, 0, "call_1", "f");
        w.tool_call_arguments(&mut out, 0, "{\"a\"");
        w.finish(&mut out, FinishReason::ToolCalls);
        w.usage = Some(Usage {
            prompt_tokens: 3,
            completion_tokens: 4,
            ..Usage::default()
        });
        w.done(&mut out);
        w.content(&mut out, "late");
        assert!(out.ends_with(b"data: [DONE]\n\n"));
        let ev = events(&out);
        assert_eq!(ev.len(), 6);
        // OpenAI's first chunk carries only the role.
        assert_eq!(
            ev[0]["choices"][0]["delta"],
            serde_json::json!({"role":"assistant","content":"","refusal":null})
        );
        assert_eq!(
            ev[1]["choices"][0]["delta"],
            serde_json::json!({"content":"Hi"})
        );
        assert_eq!(
            ev[2]["choices"][0]["delta"]["tool_calls"][0]["id"],
            "call_1"
        );
        assert_eq!(
            ev[3]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
            "{\"a\""
        );
        assert_eq!(ev[4]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(ev[5]["choices"], serde_json::json!([]));
        assert_eq!(ev[5]["usage"]["total_tokens"], 7);
        // Fields OpenAI sends on every chunk; usage null until the last.
        for e in &ev[..5] {
            assert!(e["usage"].is_null() && e.as_object().unwrap().contains_key("usage"));
            assert!(e["system_fingerprint"].is_null());
            assert!(e["choices"][0]["logprobs"].is_null());
        }
        assert!(ev.iter().all(|e| e["id"] == "chatcmpl-1"));
    }

    #[test]
    fn chunk_bytes_follow_the_origin() {
        let mut w = ChunkWriter::new(origin(), "r".into(), true);
        let mut out = Vec::new();
        w.content(&mut out, "a\"b");
        // A vendor event names the answer's id and model after the first chunk.
        w.origin.id = "msg_\"2".into();
        w.origin.model = "m2".into();
        w.finish(&mut out, FinishReason::Stop);
        w.usage = Some(Usage {
            prompt_tokens: 1,
            completion_tokens: 2,
            ..Usage::default()
        });
        w.done(&mut out);
        let expected = concat!(
            r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","provider":"p","system_fingerprint":null,"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#,
            "\n\n",
            r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","provider":"p","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"a\"b"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
            "\n\n",
            r#"data: {"id":"msg_\"2","object":"chat.completion.chunk","created":1,"model":"m2","provider":"p","system_fingerprint":null,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}"#,
            "\n\n",
            r#"data: {"id":"msg_\"2","object":"chat.completion.chunk","created":1,"model":"m2","provider":"p","system_fingerprint":null,"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}"#,
            "\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(String::from_utf8_lossy(&out), expected);
    }

    #[test]
    fn tracks_content_and_failure() {
        let mut w = ChunkWriter::new(origin(), "r".into(), false);
        let mut out = Vec::new();
        w.start(&mut out);
        assert!(!w.content_started(), "the role chunk is not content");
        let e = GatewayError::new(crate::error::ErrorCode::UpstreamBusy, "Overloaded");
        w.error(&mut out, &e);
        assert_eq!(w.failure(), Some(&e.clone().with_provider("p")));
        let event = events(&out).pop().unwrap();
        assert_eq!(
            event["error"]["provider"], "p",
            "stream errors name the provider"
        );
        let mut w = ChunkWriter::new(origin(), "r".into(), false);
        w.content(&mut out, "x");
        assert!(w.content_started());
    }

    #[test]
    fn no_usage_chunk_unless_asked() {
        let mut w = ChunkWriter::new(origin(), "r".into(), false);
        w.usage = Some(Usage::default());
        let mut out = Vec::new();
        w.start(&mut out);
        w.done(&mut out);
        assert_eq!(events(&out).len(), 1);
    }

    #[test]
    fn completion_json() {
        let c = Completion {
            content: Some("hello".into()),
            tool_calls: vec![ToolCallOut::new("t1".into(), "f".into(), "{}".into())],
            finish_reason: Some(FinishReason::ToolCalls),
            usage: Some(Usage {
                prompt_tokens: 1,
                completion_tokens: 2,
                cached_tokens: Some(1),
                reasoning_tokens: None,
            }),
        };
        let v: Value = serde_json::from_slice(&c.to_json(&origin())).unwrap();
        assert_eq!(v["object"], "chat.completion");
        // Every field OpenAI sends, null where there is nothing to say.
        let (choice, message) = (&v["choices"][0], &v["choices"][0]["message"]);
        assert!(v.as_object().unwrap()["system_fingerprint"].is_null());
        assert!(choice.as_object().unwrap()["logprobs"].is_null());
        assert!(message.as_object().unwrap()["refusal"].is_null());
        assert_eq!(v["provider"], "p");
        assert_eq!(
            v["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
            "f"
        );
        assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
        assert!(v["usage"].get("completion_tokens_details").is_none());
    }
}
