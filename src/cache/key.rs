//! What a request is cached by: SHA-256 over the neutral request's
//! output-determining content, written in one canonical form.
//!
//! Included: the model group and the model the client asked for, the
//! messages (system prompts included), tools and tool choice, the output
//! format, the sampling parameters, the output limit, stop sequences, the
//! seed, reasoning settings, and any other parameter a client sent that
//! the vendor reads (`extra`: penalties, logprobs...). Left out: the stream
//! flag and usage option, the end user and metadata, request ids,
//! prompt-cache breakpoints, and every surface's own framing (the neutral
//! request has none). So the same prompt asked through Chat Completions,
//! Messages, Responses or the Gemini API has one key.
//!
//! Canonical: each value is written tagged and length-prefixed (no two
//! requests write alike), JSON values with their members sorted (member
//! order and whitespace never count), and a value that means its default
//! is written as if absent (`tool_choice: auto`, `parallel_tool_calls:
//! true`, `response_format: text`, `n: 1`, text content as one text part).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::model::request::{
    ChatRequest, Content, ContentPart, DocumentSource, Message, ResponseFormat, Thinking, Tool,
    ToolCall, ToolChoice,
};

/// Members of `extra` that decide nothing of the answer: who asked, how it
/// is kept or billed, the stream's options.
const NOT_OUTPUT: &[&str] = &[
    "metadata",
    "store",
    "service_tier",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "stream_options",
    "web_search_options",
];

/// A request's cache key: 32 bytes of SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestKey(pub [u8; 32]);

impl RequestKey {
    /// The key of `request` on model group `group`.
    pub fn of(group: &str, request: &ChatRequest) -> Self {
        let mut w = Canon(Sha256::new());
        w.tag(b'G');
        w.str(group);
        w.str(&request.model);
        w.messages(request);
        w.tools(&request.tools);
        w.tag(b'c');
        match &request.tool_choice {
            None | Some(ToolChoice::Auto) => w.tag(0),
            Some(ToolChoice::None) => w.tag(1),
            Some(ToolChoice::Required) => w.tag(2),
            Some(ToolChoice::Function(name)) => {
                w.tag(3);
                w.str(name);
            }
        }
        w.tag(b'p');
        w.opt_bool(request.parallel_tool_calls.filter(|&p| !p));
        w.format(request.response_format.as_ref());
        w.tag(b's');
        w.opt_f64(request.temperature);
        w.opt_f64(request.top_p);
        w.opt_u64(request.top_k.map(u64::from));
        w.opt_u64(request.max_output_tokens().map(u64::from));
        w.opt_i64(request.seed);
        w.opt_u64(request.n.filter(|&n| n != 1).map(u64::from));
        let mut stop: Vec<&str> = request.stop.iter().map(String::as_str).collect();
        stop.sort_unstable();
        stop.dedup();
        w.len(stop.len());
        for s in stop {
            w.str(s);
        }
        w.tag(b'r');
        match &request.reasoning {
            None => w.tag(0),
            Some(r) => {
                w.tag(1);
                w.opt_str(r.effort.map(|e| e.as_str()));
                w.opt_u64(r.budget_tokens.map(u64::from));
            }
        }
        w.tag(b'x');
        let extra: Vec<(&String, &Value)> = (request.extra.iter())
            .filter(|(k, _)| !NOT_OUTPUT.contains(&k.as_str()))
            .collect();
        w.members(extra);
        RequestKey(w.0.finalize().into())
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// The canonical writer: everything goes into the hash, tagged and
/// length-prefixed.
struct Canon(Sha256);

impl Canon {
    fn tag(&mut self, tag: u8) {
        self.0.update([tag]);
    }

    fn len(&mut self, n: usize) {
        self.0.update((n as u64).to_le_bytes());
    }

    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.update(s.as_bytes());
    }

    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.tag(0),
            Some(s) => {
                self.tag(1);
                self.str(s);
            }
        }
    }

    fn opt_u64(&mut self, n: Option<u64>) {
        match n {
            None => self.tag(0),
            Some(n) => {
                self.tag(1);
                self.0.update(n.to_le_bytes());
            }
        }
    }

    fn opt_i64(&mut self, n: Option<i64>) {
        self.opt_u64(n.map(|n| n as u64));
    }

    /// A float by its value: `1` and `1.0` alike, `-0.0` as `0.0`.
    fn opt_f64(&mut self, n: Option<f64>) {
        self.opt_u64(n.map(|n| if n == 0.0 { 0.0f64 } else { n }.to_bits()));
    }

    fn opt_bool(&mut self, b: Option<bool>) {
        self.tag(match b {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        });
    }

    fn messages(&mut self, request: &ChatRequest) {
        self.tag(b'M');
        self.len(request.messages.len());
        for message in &request.messages {
            match message {
                Message::System { content, name } => {
                    self.tag(b'S');
                    self.opt_str(name.as_deref());
                    self.content(Some(content));
                }
                Message::Developer { content, name } => {
                    self.tag(b'D');
                    self.opt_str(name.as_deref());
                    self.content(Some(content));
                }
                Message::User { content, name } => {
                    self.tag(b'U');
                    self.opt_str(name.as_deref());
                    self.content(Some(content));
                }
                Message::Assistant {
                    content,
                    reasoning,
                    tool_calls,
                    refusal,
                    name,
                } => {
                    self.tag(b'A');
                    self.opt_str(name.as_deref());
                    self.content(content.as_ref());
                    self.thinking(reasoning);
                    self.calls(tool_calls);
                    self.opt_str(refusal.as_deref());
                }
                Message::Tool {
                    content,
                    tool_call_id,
                    is_error,
                    cache_control: _,
                } => {
                    self.tag(b'T');
                    self.str(tool_call_id);
                    self.opt_bool(Some(*is_error));
                    self.content(Some(content));
                }
            }
        }
    }

    /// Content as a list of parts (a string is one text part); prompt-cache
    /// breakpoints left out.
    fn content(&mut self, content: Option<&Content>) {
        let parts = match content {
            None => {
                self.tag(0);
                return;
            }
            Some(Content::Text(text)) => {
                self.tag(1);
                self.len(1);
                self.tag(b't');
                self.str(text);
                return;
            }
            Some(Content::Parts(parts)) => parts,
        };
        self.tag(1);
        self.len(parts.len());
        for part in parts {
            match part {
                ContentPart::Text { text, .. } => {
                    self.tag(b't');
                    self.str(text);
                }
                ContentPart::ImageUrl { image_url, .. } => {
                    self.tag(b'i');
                    self.str(&image_url.url);
                    self.opt_str(image_url.detail.as_deref());
                }
                ContentPart::Document(document) => {
                    self.tag(b'd');
                    match &document.source {
                        DocumentSource::Base64 { media_type, data } => {
                            self.tag(0);
                            self.str(media_type);
                            self.str(data);
                        }
                        DocumentSource::Url(url) => {
                            self.tag(1);
                            self.str(url);
                        }
                        DocumentSource::Text(text) => {
                            self.tag(2);
                            self.str(text);
                        }
                    }
                    self.opt_str(document.title.as_deref());
                }
            }
        }
    }

    fn thinking(&mut self, blocks: &[Thinking]) {
        self.len(blocks.len());
        for block in blocks {
            self.str(&block.text);
            self.opt_str(block.signature.as_deref());
            self.opt_str(block.redacted.as_deref());
        }
    }

    fn calls(&mut self, calls: &[ToolCall]) {
        self.len(calls.len());
        for call in calls {
            self.str(&call.id);
            self.str(&call.kind);
            self.str(&call.function.name);
            self.json_text(&call.function.arguments);
        }
    }

    fn tools(&mut self, tools: &[Tool]) {
        self.tag(b'F');
        self.len(tools.len());
        for tool in tools {
            let f = &tool.function;
            self.str(&f.name);
            self.opt_str(f.description.as_deref());
            self.opt_json(f.parameters.as_ref());
            self.opt_bool(f.strict);
        }
    }

    fn format(&mut self, format: Option<&ResponseFormat>) {
        self.tag(b'o');
        match format {
            None | Some(ResponseFormat::Text) => self.tag(0),
            Some(ResponseFormat::JsonObject) => self.tag(1),
            Some(ResponseFormat::JsonSchema { json_schema: s }) => {
                self.tag(2);
                self.str(&s.name);
                self.opt_str(s.description.as_deref());
                self.opt_json(s.schema.as_ref());
                self.opt_bool(s.strict);
            }
        }
    }

    /// Tool-call arguments: JSON text, written canonically when it parses
    /// (vendors and clients space it differently), else as it is.
    fn json_text(&mut self, text: &str) {
        match serde_json::from_str::<Value>(text) {
            Ok(value) => {
                self.tag(b'j');
                self.json(&value);
            }
            Err(_) => {
                self.tag(b'r');
                self.str(text);
            }
        }
    }

    fn opt_json(&mut self, value: Option<&Value>) {
        match value {
            None => self.tag(0),
            Some(v) => {
                self.tag(1);
                self.json(v);
            }
        }
    }

    fn json(&mut self, value: &Value) {
        match value {
            Value::Null => self.tag(b'n'),
            Value::Bool(b) => self.opt_bool(Some(*b)),
            Value::Number(n) => {
                self.tag(b'#');
                self.str(&n.to_string());
            }
            Value::String(s) => {
                self.tag(b'"');
                self.str(s);
            }
            Value::Array(items) => {
                self.tag(b'[');
                self.len(items.len());
                for item in items {
                    self.json(item);
                }
            }
            Value::Object(map) => {
                self.tag(b'{');
                self.members(map.iter().collect());
            }
        }
    }

    /// An object's members, sorted by name.
    fn members(&mut self, mut members: Vec<(&String, &Value)>) {
        members.sort_unstable_by(|a, b| a.0.cmp(b.0));
        self.len(members.len());
        for (name, value) in members {
            self.str(name);
            self.json(value);
        }
    }
}

#[cfg(test)]
mod tests;
