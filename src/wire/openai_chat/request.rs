//! Chat Completions, the request side: what the openai and azure dialects
//! send, written from the neutral request in OpenAI's member names and
//! order; also the tools, tool calls and output formats DashScope takes in
//! OpenAI's shape.

use serde::ser::SerializeSeq;

use super::*;

/// The Chat Completions request the openai and azure dialects send: the
/// neutral request in OpenAI's member names and order, then the stream's
/// usage switch and the client's members the neutral request does not
/// model (`extra`, chosen by the dialect, which knows what OpenAI takes).
pub struct Request<'a> {
    pub model: &'a str,
    pub request: &'a ChatRequest,
    pub stream_options: Option<StreamOptions>,
    pub extra: Vec<(&'a str, Cow<'a, Value>)>,
    /// The model takes `prompt_cache_breakpoint` on content parts (GPT-5.6
    /// and later): the request's cache breakpoints are written as such.
    pub breakpoints: bool,
}

#[derive(Serialize)]
pub struct StreamOptions {
    pub include_usage: bool,
}

impl Serialize for Request<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.request;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("model", self.model)?;
        map.serialize_entry("messages", &Messages(&r.messages, self.breakpoints))?;
        if !r.tools.is_empty() {
            map.serialize_entry("tools", &OutTools(&r.tools))?;
        }
        if let Some(choice) = &r.tool_choice {
            map.serialize_entry("tool_choice", &OutToolChoice(choice))?;
        }
        optional(&mut map, "parallel_tool_calls", &r.parallel_tool_calls)?;
        optional(
            &mut map,
            "response_format",
            &r.response_format.as_ref().map(OutResponseFormat),
        )?;
        optional(&mut map, "temperature", &r.temperature)?;
        optional(&mut map, "top_p", &r.top_p)?;
        optional(&mut map, "max_tokens", &r.max_tokens)?;
        optional(&mut map, "max_completion_tokens", &r.max_completion_tokens)?;
        if !r.stop.is_empty() {
            map.serialize_entry("stop", &r.stop)?;
        }
        optional(&mut map, "seed", &r.seed)?;
        optional(&mut map, "user", &r.user)?;
        optional(&mut map, "n", &r.n)?;
        if r.stream {
            map.serialize_entry("stream", &true)?;
        }
        optional(&mut map, "stream_options", &self.stream_options)?;
        for (key, value) in &self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

fn optional<M: SerializeMap, T: Serialize>(
    map: &mut M,
    key: &'static str,
    value: &Option<T>,
) -> Result<(), M::Error> {
    match value {
        Some(v) => map.serialize_entry(key, v),
        None => Ok(()),
    }
}

/// The messages, and whether breakpoints are written. OpenAI takes images
/// only in user messages ("Image URLs are only allowed for messages with
/// role 'user'"): a tool result's images follow the run of tool messages
/// they came in, in one user message, each tool call's named.
struct Messages<'a>(&'a [neutral::Message], bool);

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        let mut images: Vec<&neutral::Message> = Vec::new();
        for message in self.0 {
            let tool = matches!(message, neutral::Message::Tool { .. });
            if !tool && !images.is_empty() {
                seq.serialize_element(&ToolImages(&images))?;
                images.clear();
            }
            seq.serialize_element(&OutMessage(message, self.1))?;
            if let neutral::Message::Tool { content, .. } = message {
                if content.has_image() {
                    images.push(message);
                }
            }
        }
        if !images.is_empty() {
            seq.serialize_element(&ToolImages(&images))?;
        }
        seq.end()
    }
}

/// The user message carrying the images of tool results (tool messages).
struct ToolImages<'a>(&'a [&'a neutral::Message]);

impl Serialize for ToolImages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut parts: Vec<ContentPart> = Vec::new();
        for message in self.0 {
            if let neutral::Message::Tool {
                content: Content::Parts(result),
                tool_call_id,
                ..
            } = message
            {
                parts.push(ContentPart::text(format!(
                    "Images returned by tool call {tool_call_id}:"
                )));
                parts.extend(
                    result
                        .iter()
                        .filter(|p| matches!(p, ContentPart::ImageUrl { .. }))
                        .cloned(),
                );
            }
        }
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("role", "user")?;
        map.serialize_entry("content", &OutContent(&Content::Parts(parts), false))?;
        map.end()
    }
}

/// A message as OpenAI takes it: `role` first, then its members.
struct OutMessage<'a>(&'a neutral::Message, bool);

impl Serialize for OutMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match self.0 {
            neutral::Message::System { content, name }
            | neutral::Message::Developer { content, name }
            | neutral::Message::User { content, name } => {
                let role = match self.0 {
                    neutral::Message::System { .. } => "system",
                    neutral::Message::Developer { .. } => "developer",
                    _ => "user",
                };
                map.serialize_entry("role", role)?;
                map.serialize_entry("content", &OutContent(content, self.1))?;
                optional(&mut map, "name", name)?;
            }
            neutral::Message::Assistant {
                content,
                tool_calls,
                refusal,
                name,
                ..
            } => {
                map.serialize_entry("role", "assistant")?;
                // OpenAI takes no breakpoint on assistant output.
                map.serialize_entry("content", &content.as_ref().map(|c| OutContent(c, false)))?;
                if !tool_calls.is_empty() {
                    map.serialize_entry("tool_calls", &OutToolCalls(tool_calls))?;
                }
                optional(&mut map, "refusal", refusal)?;
                optional(&mut map, "name", name)?;
            }
            neutral::Message::Tool {
                content,
                tool_call_id,
                cache_control,
                ..
            } => {
                map.serialize_entry("role", "tool")?;
                match (content, cache_control) {
                    // A breakpoint after the whole result: on its text.
                    (Content::Text(text), Some(cache)) if self.1 => {
                        let part = ContentPart::Text {
                            text: text.clone(),
                            cache_control: Some(cache.clone()),
                        };
                        map.serialize_entry("content", &[OutPart(&part, true)])?;
                    }
                    // OpenAI takes text only here: the images follow the
                    // results in a user message ([`Messages`]).
                    (Content::Parts(parts), _) if content.has_image() => {
                        let texts: Vec<OutPart> = parts
                            .iter()
                            .filter(|p| matches!(p, ContentPart::Text { .. }))
                            .map(|p| OutPart(p, self.1))
                            .collect();
                        map.serialize_entry("content", &texts)?;
                    }
                    _ => map.serialize_entry("content", &OutContent(content, self.1))?,
                }
                map.serialize_entry("tool_call_id", tool_call_id)?;
            }
        }
        map.end()
    }
}

/// A string, or the parts as OpenAI's content parts (with their
/// breakpoints when the model takes them).
struct OutContent<'a>(&'a Content, bool);

impl Serialize for OutContent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Content::Text(text) => crate::formats::json_text::serialize(text, s),
            Content::Parts(parts) => s.collect_seq(parts.iter().map(|p| OutPart(p, self.1))),
        }
    }
}

struct OutPart<'a>(&'a ContentPart, bool);

impl Serialize for OutPart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match self.0 {
            ContentPart::Text { text, .. } => {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", &Escaped(text))?;
            }
            ContentPart::ImageUrl { image_url, .. } => {
                map.serialize_entry("type", "image_url")?;
                map.serialize_entry("image_url", &OutImageUrl(image_url))?;
            }
            // Refused before encoding (`dialects::refuse_documents`).
            ContentPart::Document(_) => {
                return Err(serde::ser::Error::custom(
                    "OpenAI's Chat Completions take no documents",
                ))
            }
        }
        if let Some(cache) = self.0.cache_control().filter(|_| self.1) {
            map.serialize_entry("prompt_cache_breakpoint", &OutBreakpoint(cache))?;
        }
        map.end()
    }
}

/// `{"mode": "explicit", "ttl"?}`: OpenAI's breakpoint.
struct OutBreakpoint<'a>(&'a neutral::CacheControl);

impl Serialize for OutBreakpoint<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("mode", "explicit")?;
        optional(&mut map, "ttl", &self.0.openai_ttl())?;
        map.end()
    }
}

/// Text written with the gateway's JSON string escaping.
struct Escaped<'a>(&'a str);

impl Serialize for Escaped<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::formats::json_text::serialize(self.0, s)
    }
}

/// `"none"`, `"auto"`, `"required"`, or the function named.
struct OutToolChoice<'a>(&'a ToolChoice);

impl Serialize for OutToolChoice<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Named<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            function: Name<'a>,
        }
        #[derive(Serialize)]
        struct Name<'a> {
            name: &'a str,
        }
        match self.0 {
            ToolChoice::None => s.serialize_str("none"),
            ToolChoice::Auto => s.serialize_str("auto"),
            ToolChoice::Required => s.serialize_str("required"),
            ToolChoice::Function(name) => Named {
                kind: "function",
                function: Name { name },
            }
            .serialize(s),
        }
    }
}

// OpenAI's shapes of the neutral request's tools, tool calls, output
// formats and image references (also DashScope's, which takes OpenAI's).

/// Tool definitions: `{"type": "function", "function": {name,
/// description, parameters, strict}}`.
pub struct OutTools<'a>(pub &'a [neutral::Tool]);

impl OutTools<'_> {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for OutTools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|tool| OutFunctionTool(&tool.function)))
    }
}

struct OutFunctionTool<'a>(&'a neutral::FunctionDef);

impl Serialize for OutFunctionTool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry("function", &OutFunctionDef(self.0))?;
        map.end()
    }
}

struct OutFunctionDef<'a>(&'a neutral::FunctionDef);

impl Serialize for OutFunctionDef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &f.name)?;
        optional(&mut map, "description", &f.description)?;
        optional(&mut map, "parameters", &f.parameters)?;
        optional(&mut map, "strict", &f.strict)?;
        map.end()
    }
}

/// Tool calls: `{"id", "type": "function", "function": {name, arguments}}`.
pub struct OutToolCalls<'a>(pub &'a [neutral::ToolCall]);

impl OutToolCalls<'_> {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for OutToolCalls<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(OutToolCall))
    }
}

struct OutToolCall<'a>(&'a neutral::ToolCall);

impl Serialize for OutToolCall<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        let call = self.0;
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("id", &call.id)?;
        map.serialize_entry("type", &call.kind)?;
        map.serialize_entry(
            "function",
            &Function {
                name: &call.function.name,
                arguments: &call.function.arguments,
            },
        )?;
        map.end()
    }
}

/// `response_format`: `{"type": "text" | "json_object"}`, or
/// `{"type": "json_schema", "json_schema": {name, description, schema, strict}}`.
pub struct OutResponseFormat<'a>(pub &'a neutral::ResponseFormat);

impl Serialize for OutResponseFormat<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match self.0 {
            neutral::ResponseFormat::Text => map.serialize_entry("type", "text")?,
            neutral::ResponseFormat::JsonObject => map.serialize_entry("type", "json_object")?,
            neutral::ResponseFormat::JsonSchema { json_schema } => {
                map.serialize_entry("type", "json_schema")?;
                map.serialize_entry("json_schema", &OutJsonSchema(json_schema))?;
            }
        }
        map.end()
    }
}

struct OutJsonSchema<'a>(&'a neutral::JsonSchema);

impl Serialize for OutJsonSchema<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let j = self.0;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &j.name)?;
        optional(&mut map, "description", &j.description)?;
        optional(&mut map, "schema", &j.schema)?;
        optional(&mut map, "strict", &j.strict)?;
        map.end()
    }
}

/// `image_url`: `{url, detail}`.
struct OutImageUrl<'a>(&'a neutral::ImageUrl);

impl Serialize for OutImageUrl<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("url", &self.0.url)?;
        optional(&mut map, "detail", &self.0.detail)?;
        map.end()
    }
}
