//! OpenAI's (and Azure's) stream events, translated chunk by chunk.
//!
//! For a chat client (a pass-through pair) events are the vendor's, copied
//! as they came (serde_json `RawValue`), only what the writer needs read
//! ([`fast_event`]). Anything unusual, and every event for a client of
//! another API, is read typed (`crate::wire::openai_chat::Chunk`) into the
//! neutral events ([`typed_event`]), which the client's surface writes:
//! one reading, not a second serialisation of the vendor's chunk that must
//! agree with the first.
//!
//! Long on purpose (about 590 lines of code, then its tests): the fast path
//! of the hottest loop, OpenAI chat chunks, sits beside the typed path it
//! falls back to, so the two read together.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::answers::gateway_error;
use crate::dialects::{unparseable, Events};
use crate::error::GatewayError;
use crate::formats::sse::SseParser;
use crate::model::stream::{EventWriter, Passed, Reasoning};
use crate::wire::openai_chat::{content_filtered, Chunk, Text, Usage};

/// OpenAI's stream events: passed through nearly as they are to a chat
/// client ([`fast_event`], which copies the vendor's JSON verbatim), read
/// into the neutral events otherwise ([`typed_event`]).
#[derive(Default)]
pub(in crate::dialects) struct OpenAiEvents {
    scratch: Scratch,
}

impl Events<SseParser> for OpenAiEvents {
    fn on_event(
        &mut self,
        (_event, data): (&str, &str),
        w: &mut EventWriter,
        out: &mut Vec<u8>,
    ) -> Result<(), GatewayError> {
        if data.trim() == "[DONE]" {
            w.done(out);
            return Ok(());
        }
        if !w.native() {
            return typed_event(data, w, out);
        }
        match fast_event(data, w, out, &mut self.scratch) {
            Some(result) => result,
            None => typed_event(data, w, out),
        }
    }
}

/// One event read into the neutral events (the first choice's): for a
/// client of another API, and for the chat client the unusual events the
/// fast path leaves (an error, Azure's filter striking, repeated keys,
/// surrogate escapes, shapes it does not take), written by its surface.
fn typed_event(data: &str, w: &mut EventWriter, out: &mut Vec<u8>) -> Result<(), GatewayError> {
    let chunk: Chunk = serde_json::from_str(data).map_err(|e| unparseable("stream event", e))?;
    if let Some(vendor) = chunk.error {
        return Err(gateway_error(vendor, None));
    }
    w.set_id(&chunk.id);
    w.set_model(&chunk.model);
    w.set_created(chunk.created);
    if let Some(usage) = chunk.usage {
        w.set_usage(usage.as_ref().map(Into::into));
    }
    // Several choices (`n`): each carries its index.
    for choice in chunk.choices {
        w.choice(out, choice.index)?;
        typed_choice(choice, w, out);
    }
    Ok(())
}

/// One choice's piece of a chunk, for the writer's current choice.
fn typed_choice(
    choice: crate::wire::openai_chat::ChunkChoice,
    w: &mut EventWriter,
    out: &mut Vec<u8>,
) {
    let finish = choice.finish();
    if let Some(delta) = choice.delta {
        if let Some(text) = delta.reasoning_content.as_deref() {
            w.reasoning(out, Reasoning::Text(text));
        }
        for text in [&delta.content, &delta.refusal.flatten()]
            .into_iter()
            .flatten()
        {
            w.content(out, text);
        }
        for call in delta.tool_calls.iter().flat_map(|calls| calls.iter()) {
            let index = call.index.unwrap_or_default();
            let function = call.function.as_ref();
            if !w.has_tool_call(index) {
                let name = function.and_then(|f| f.name.as_deref()).unwrap_or_default();
                let id = call
                    .id
                    .as_deref()
                    .map_or_else(|| Cow::Owned(format!("call_{index}")), Cow::Borrowed);
                w.tool_call_start(out, index, &id, name);
            }
            if let Some(arguments) = function.and_then(|f| f.arguments.as_deref()) {
                w.tool_call_arguments(out, index, arguments);
            }
        }
    }
    if let Some(reason) = finish {
        w.finish(out, reason);
    }
}

/// One event the cheap way, or `None` (before touching `w` or `out`) when
/// it holds anything [`typed_event`] should judge: an `error`, Azure's
/// `content_filter_results` with a category filtered, a repeated key, a lone surrogate escape, or
/// JSON this reader does not take. The vendor's members are copied as
/// they came, never parsed into values; only what the writer needs is read.
fn fast_event(
    data: &str,
    w: &mut EventWriter,
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
) -> Option<Result<(), GatewayError>> {
    // The full parse rejects these; skipping over a value does not.
    if has_surrogate_escape(data) {
        return None;
    }
    // The members go to the outgoing chunk as they are read (but `usage`
    // and `provider`, which we write), their keys in the form serde_json
    // writes them, so that a repeated key shows whatever its spelling.
    let Scratch { buf, keys } = scratch;
    buf.clear();
    buf.push(b'{');
    keys.clear();
    let (mut id, mut model, mut created, mut usage, mut choices) = (None, None, None, None, None);
    let (mut usage_seen, mut provider_seen) = (false, false);
    let parsed = for_each_member(data, |key, value| {
        match &*key {
            "error" => return false,
            "usage" => {
                if std::mem::replace(&mut usage_seen, true) {
                    return false;
                }
                if !is_null(value) {
                    match serde_json::from_str::<Value>(value.get()) {
                        Ok(u) => usage = Some(Usage::read(&u)),
                        Err(_) => return false,
                    }
                }
                return true;
            }
            "provider" => return !std::mem::replace(&mut provider_seen, true),
            "id" => match raw_str(value) {
                Ok(text) => id = text,
                Err(_) => return false,
            },
            "model" => match raw_str(value) {
                Ok(text) => model = text,
                Err(_) => return false,
            },
            "created" => match serde_json::from_str::<Value>(value.get()) {
                Ok(n) => created = n.as_u64(),
                Err(_) => return false,
            },
            "choices" => choices = Some(value),
            _ => {}
        }
        let start = buf.len();
        if write_key(buf, key).is_err() || keys.len() >= MAX_FAST_MEMBERS {
            return false;
        }
        let this = (start, buf.len());
        let spelled = |(from, to): (usize, usize)| buf.get(from..to);
        if keys.iter().any(|&other| spelled(other) == spelled(this)) {
            return false;
        }
        keys.push(this);
        buf.push(b':');
        buf.extend_from_slice(value.get().as_bytes());
        buf.push(b',');
        true
    });
    if !parsed {
        return None;
    }
    let mut seen = Choices::default();
    // `Value::as_array`: what is no list counts as no choices.
    if let Some(list) = choices.filter(|c| c.get().starts_with('[')) {
        let mut de = serde_json::Deserializer::from_str(list.get());
        ChoiceList(&mut seen).deserialize(&mut de).ok()?;
        de.end().ok()?;
    }

    // Nothing below falls back.
    if let Some(id) = id {
        w.set_id(&id);
    }
    if let Some(model) = model {
        w.set_model(&model);
    }
    if let Some(created) = created {
        w.set_created(created);
    }
    if let Some(u) = usage {
        w.set_usage(u);
    }
    if seen.count == 0 {
        // The usage-only chunk, or Azure's prompt filter annotation.
        return Some(Ok(()));
    }
    for piece in seen.pieces() {
        w.count_delivered(piece);
    }
    // Azure's output filter annotations: an empty delta and no finish.
    if !seen.finishes && !seen.says_something {
        return Some(Ok(()));
    }
    if seen.finishes {
        w.mark_finished();
    }
    // Calls begun here are continued, should a later event need the typed reading.
    for &key in &seen.tool_keys {
        w.note_tool_call(key);
    }
    if w.include_usage() {
        buf.extend_from_slice(b"\"usage\":null,");
    }
    buf.extend_from_slice(b"\"provider\":");
    if let Err(e) = serde_json::to_writer(&mut *buf, &w.origin().provider) {
        return Some(Err(unparseable("stream event", e)));
    }
    buf.push(b'}');
    w.passthrough(out, &Passed::data(buf), seen.has_content || seen.finishes);
    Some(Ok(()))
}

/// What [`fast_event`] keeps from event to event, to spare allocations.
#[derive(Default)]
struct Scratch {
    /// The outgoing chunk.
    buf: Vec<u8>,
    /// Where each key written is in `buf`.
    keys: Vec<(usize, usize)>,
}

/// A key as serde_json writes it: as it came when it had no escapes (it then
/// has nothing serde_json escapes either), or escaped again.
fn write_key(buf: &mut Vec<u8>, key: Cow<str>) -> serde_json::Result<()> {
    match key {
        Cow::Borrowed(key) => {
            buf.push(b'"');
            buf.extend_from_slice(key.as_bytes());
            buf.push(b'"');
            Ok(())
        }
        Cow::Owned(key) => serde_json::to_writer(buf, &key),
    }
}

/// More top-level members than any chunk has: the typed reading takes it
/// (and the duplicate check stays cheap).
const MAX_FAST_MEMBERS: usize = 32;

/// What the fast path reads from a chunk's `choices`, in one pass over them
/// (below: one visitor per level). What it does not take (a choice, delta,
/// call or function that is no object, text that is no string, a key
/// twice) ends the pass with an error, which leaves the event to
/// [`typed_event`].
#[derive(Default)]
struct Choices<'a> {
    count: usize,
    finishes: bool,
    /// Some choice's delta is a non-empty object.
    says_something: bool,
    has_content: bool,
    /// Answer text and tool arguments to count as delivered; the first
    /// apart, as most chunks have just the one.
    first_piece: Option<Cow<'a, str>>,
    more_pieces: Vec<Cow<'a, str>>,
    /// The first choice's tool calls, by their `index`.
    tool_keys: Vec<u64>,
}

impl<'a> Choices<'a> {
    fn add_piece(&mut self, piece: Cow<'a, str>) {
        if piece.is_empty() {
            return;
        }
        if self.first_piece.is_none() {
            self.first_piece = Some(piece);
        } else {
            self.more_pieces.push(piece);
        }
    }

    fn pieces(&self) -> impl Iterator<Item = &str> {
        self.first_piece
            .iter()
            .chain(&self.more_pieces)
            .map(|p| p.as_ref())
    }
}

/// Marks a key seen; an error the second time (repeated keys are the
/// typed reading's to judge).
fn first_time<E: de::Error>(seen: &mut bool) -> Result<(), E> {
    if std::mem::replace(seen, true) {
        Err(E::custom(LEFT_TO_TYPED))
    } else {
        Ok(())
    }
}

/// `choices`: a list of choice objects.
struct ChoiceList<'s, 'a>(&'s mut Choices<'a>);

impl<'a> DeserializeSeed<'a> for ChoiceList<'_, 'a> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'a>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'a> Visitor<'a> for ChoiceList<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of choices")
    }
    fn visit_seq<A: SeqAccess<'a>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Choice(&mut *self.0))?.is_some() {}
        Ok(())
    }
}

/// One choice: `finish_reason` and `delta`; Azure's `content_filter_results`
/// when it filtered is left to the typed reading, which makes it the finish.
struct Choice<'s, 'a>(&'s mut Choices<'a>);

impl<'a> DeserializeSeed<'a> for Choice<'_, 'a> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'a>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'a> Visitor<'a> for Choice<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a choice object")
    }
    fn visit_map<A: MapAccess<'a>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.count += 1;
        let (mut finish, mut delta, mut filter) = (false, false, false);
        while let Some(Text(key)) = map.next_key()? {
            match &*key {
                // Azure annotates every choice; only a filtered one (which
                // changes the finish reason) needs the typed reading.
                "content_filter_results" => {
                    first_time(&mut filter)?;
                    if content_filtered(&map.next_value::<Value>()?) {
                        return Err(de::Error::custom(LEFT_TO_TYPED));
                    }
                }
                "finish_reason" => {
                    first_time(&mut finish)?;
                    let reason: Option<IgnoredAny> = map.next_value()?;
                    self.0.finishes |= reason.is_some();
                }
                "delta" => {
                    first_time(&mut delta)?;
                    map.next_value_seed(Delta(&mut *self.0))?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A choice's `delta`, or null.
struct Delta<'s, 'a>(&'s mut Choices<'a>);

impl<'a> DeserializeSeed<'a> for Delta<'_, 'a> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'a>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'a> Visitor<'a> for Delta<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a delta object")
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: serde::Deserializer<'a>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'a>>(self, mut map: A) -> Result<(), A::Error> {
        let (mut content, mut calls, mut refusal) = (false, false, false);
        while let Some(Text(key)) = map.next_key()? {
            // Any member, even one we do not know, makes it say something.
            self.0.says_something = true;
            match &*key {
                "content" => {
                    first_time(&mut content)?;
                    if let Some(Text(text)) = map.next_value()? {
                        // Part of the answer, unlike the opening role chunk.
                        self.0.has_content |= !text.is_empty();
                        self.0.add_piece(text);
                    }
                }
                "tool_calls" => {
                    first_time(&mut calls)?;
                    map.next_value_seed(ToolCalls(&mut *self.0))?;
                }
                "refusal" => {
                    first_time(&mut refusal)?;
                    let refusal: Option<IgnoredAny> = map.next_value()?;
                    self.0.has_content |= refusal.is_some();
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A delta's `tool_calls`: a list of calls, or null.
struct ToolCalls<'s, 'a>(&'s mut Choices<'a>);

impl<'a> DeserializeSeed<'a> for ToolCalls<'_, 'a> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'a>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'a> Visitor<'a> for ToolCalls<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of tool calls")
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: serde::Deserializer<'a>>(self, d: D) -> Result<(), D::Error> {
        self.0.has_content = true;
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'a>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(ToolCall(&mut *self.0))?.is_some() {}
        Ok(())
    }
}

/// One call: its `function.arguments`, when they are text.
struct ToolCall<'s, 'a>(&'s mut Choices<'a>);

impl<'a> DeserializeSeed<'a> for ToolCall<'_, 'a> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'a>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'a> Visitor<'a> for ToolCall<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a tool call object")
    }
    fn visit_map<A: MapAccess<'a>>(self, mut map: A) -> Result<(), A::Error> {
        let (mut function, mut index) = (false, false);
        while let Some(Text(key)) = map.next_key()? {
            match &*key {
                "function" => {
                    first_time(&mut function)?;
                    map.next_value_seed(Function(&mut *self.0))?;
                }
                "index" => {
                    first_time(&mut index)?;
                    let key: u64 = map.next_value()?;
                    if self.0.count == 1 {
                        self.0.tool_keys.push(key);
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A call's `function`, or null: only its `arguments` matter.
struct Function<'s, 'a>(&'s mut Choices<'a>);

impl<'a> DeserializeSeed<'a> for Function<'_, 'a> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'a>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'a> Visitor<'a> for Function<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a function object")
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: serde::Deserializer<'a>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'a>>(self, mut map: A) -> Result<(), A::Error> {
        let mut arguments = false;
        while let Some(Text(key)) = map.next_key()? {
            if key == "arguments" {
                first_time(&mut arguments)?;
                if let Some(Text(text)) = map.next_value()? {
                    self.0.add_piece(text);
                }
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// `Value::is_null` on unparsed JSON (a raw value has no spaces around it).
fn is_null(raw: &RawValue) -> bool {
    raw.get() == "null"
}

/// `Value::as_str` on unparsed JSON: the text when it is a string.
fn raw_str(raw: &RawValue) -> Result<Option<Cow<'_, str>>, serde_json::Error> {
    let json = raw.get();
    if !json.starts_with('"') {
        return Ok(None);
    }
    // Valid JSON: without a backslash, the text is what is between the quotes.
    match json.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(text) if !text.contains('\\') => Ok(Some(Cow::Borrowed(text))),
        _ => serde_json::from_str::<Text>(json).map(|t| Some(t.0)),
    }
}

/// A `\uD800`-`\uDFFF` escape. Paired, it is an ordinary character, but
/// alone it makes the full parse fail, which skipping over a value does
/// not notice; the typed reading judges both.
fn has_surrogate_escape(data: &str) -> bool {
    let bytes = data.as_bytes();
    data.match_indices('\\').any(|(i, _)| {
        matches!(
            bytes.get(i + 1..i + 4),
            Some([b'u', b'd' | b'D', b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F'])
        )
    })
}

/// Why a visitor stopped: its callback left the event to the typed reading.
const LEFT_TO_TYPED: &str = "left to the typed reading";

/// Calls `each` with every member of the JSON object `json`, in order, its
/// value unparsed; false when `json` is no object, is not valid, or `each`
/// returned false.
fn for_each_member<'a>(
    json: &'a str,
    each: impl FnMut(Cow<'a, str>, &'a RawValue) -> bool,
) -> bool {
    struct EachMember<F>(F);
    impl<'de, F: FnMut(Cow<'de, str>, &'de RawValue) -> bool> Visitor<'de> for EachMember<F> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
            while let Some(Text(key)) = map.next_key()? {
                let value: &'de RawValue = map.next_value()?;
                if !(self.0)(key, value) {
                    return Err(de::Error::custom(LEFT_TO_TYPED));
                }
            }
            Ok(())
        }
    }
    let mut de = serde_json::Deserializer::from_str(json);
    serde::Deserializer::deserialize_map(&mut de, EachMember(each)).is_ok() && de.end().is_ok()
}

#[cfg(test)]
mod tests {
    use super::super::answers::fold_content_filter;
    use super::*;
    use crate::error::ErrorCode;
    use crate::model::response::Origin;
    use crate::model::surface_state::SurfaceState;
    use serde::Deserialize;
    use serde_json::Map;

    fn fresh_writer(include_usage: bool) -> EventWriter {
        let origin = Origin {
            provider: "oa".into(),
            ..Origin::default()
        };
        crate::surfaces::stream_writer(
            crate::model::Api::OpenAiChat,
            true,
            origin,
            "rid".into(),
            include_usage,
            &SurfaceState::default(),
        )
    }

    #[test]
    fn a_client_of_another_api_gets_neutral_events() {
        let mut w = crate::surfaces::stream_writer(
            crate::model::Api::OpenAiChat,
            false,
            Origin::default(),
            "rid".into(),
            true,
            &SurfaceState::default(),
        );
        let mut events = OpenAiEvents::default();
        let mut out = Vec::new();
        for data in [
            r#"{"id":"c1","model":"r1","created":7,"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"arguments":"{}"}}]}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}"#,
            "[DONE]",
        ] {
            events.on_event(("", data), &mut w, &mut out).unwrap();
        }
        let v = written(&out[..out.len() - "data: [DONE]\n\n".len()]);
        assert_eq!(v[1]["choices"][0]["delta"]["reasoning_content"], "hm");
        assert_eq!(
            v[2]["choices"][0]["delta"]["tool_calls"][0]["index"], 0,
            "numbered for the client"
        );
        assert_eq!(v[2]["choices"][0]["delta"]["tool_calls"][0]["id"], "call_a");
        assert_eq!(
            v[3]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(v[4]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(v[5]["usage"]["completion_tokens"], 3);
        assert_eq!((w.origin().id.as_str(), w.origin().created), ("c1", 7));
        assert!(events
            .on_event(
                ("", r#"{"error":{"message":"boom"}}"#),
                &mut fresh_writer(false),
                &mut out
            )
            .is_err());
    }

    /// The JSON of each `data:` event written.
    fn written(out: &[u8]) -> Vec<Value> {
        std::str::from_utf8(out)
            .unwrap()
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
            .collect()
    }

    /// What the writer keeps from the events it was given.
    fn state(w: &EventWriter) -> String {
        format!(
            "{:?} {:?} {:?} {:?} tokens={} finished={} content={}",
            w.origin().id,
            w.origin().model,
            w.origin().created,
            w.usage(),
            w.delivered_tokens(),
            w.finished(),
            w.content_started()
        )
    }

    /// The reference the fast path is held to: the event parsed into a
    /// map, edited, written again (what the gateway did before the fast
    /// path; only the tests keep it).
    fn slow_event(data: &str, w: &mut EventWriter, out: &mut Vec<u8>) -> Result<(), GatewayError> {
        let mut chunk: Map<String, Value> =
            serde_json::from_str(data).map_err(|e| unparseable("stream event", e))?;
        if let Some(error) = chunk.remove("error") {
            let vendor = crate::wire::openai_chat::ErrorBody::deserialize(&error)
                .map_err(|e| unparseable("stream error", e))?;
            return Err(gateway_error(vendor, None));
        }
        // Keep the vendor's id and model so our own chunks (usage) match its
        // chunks; Azure's prompt annotation chunk has them empty.
        if let Some(id) = chunk.get("id").and_then(Value::as_str) {
            w.set_id(id);
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            w.set_model(model);
        }
        if let Some(created) = chunk.get("created").and_then(Value::as_u64) {
            w.set_created(created);
        }
        let usage = chunk.remove("usage");
        if let Some(u) = usage.as_ref().filter(|u| !u.is_null()) {
            w.set_usage(Usage::read(u));
        }
        let choices_empty = chunk
            .get("choices")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if choices_empty {
            // The usage-only chunk (`done` re-emits it in the unified shape if
            // the client asked), or Azure's prompt filter annotation.
            return Ok(());
        }
        let mut finishes = false;
        let mut says_something = false;
        let mut has_content = false;
        for choice in chunk
            .get_mut("choices")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            fold_content_filter(choice);
            finishes |= choice.get("finish_reason").is_some_and(|f| !f.is_null());
            let delta = choice.get("delta").and_then(Value::as_object);
            says_something |= delta.is_some_and(|d| !d.is_empty());
            // Part of the answer, unlike the opening role chunk.
            if let Some(d) = delta {
                let text = d.get("content").and_then(Value::as_str);
                let calls = d.get("tool_calls").and_then(Value::as_array);
                let args = calls
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.pointer("/function/arguments").and_then(Value::as_str));
                for piece in text.into_iter().chain(args) {
                    w.count_delivered(piece);
                }
            }
            has_content |= delta.is_some_and(|d| {
                d.get("content")
                    .and_then(Value::as_str)
                    .is_some_and(|c| !c.is_empty())
                    || d.get("tool_calls").is_some_and(|t| !t.is_null())
                    || d.get("refusal").is_some_and(|r| !r.is_null())
            });
        }
        // Azure's output filter annotations: an empty delta and no finish.
        if !finishes && !says_something {
            return Ok(());
        }
        if finishes {
            w.mark_finished();
        }
        if w.include_usage() {
            chunk.insert("usage".into(), Value::Null);
        }
        chunk.insert(
            "provider".into(),
            Value::String(w.origin().provider.clone()),
        );
        let json = serde_json::to_vec(&chunk).map_err(|e| unparseable("stream event", e))?;
        w.passthrough(out, &Passed::data(&json), has_content || finishes);
        Ok(())
    }

    /// Runs `events` through the fast path (which must take every one) and
    /// the slow path, each with its own writer, and compares what each
    /// event wrote, as JSON, and the writers after each event.
    fn assert_paths_agree(events: &[&str], include_usage: bool) {
        let (mut fast_w, mut slow_w) = (fresh_writer(include_usage), fresh_writer(include_usage));
        let mut scratch = Scratch::default();
        for data in events {
            let (mut fast_out, mut slow_out) = (Vec::new(), Vec::new());
            fast_event(data, &mut fast_w, &mut fast_out, &mut scratch)
                .unwrap_or_else(|| panic!("the fast path refused {data}"))
                .unwrap();
            slow_event(data, &mut slow_w, &mut slow_out).unwrap();
            assert_eq!(
                written(&fast_out),
                written(&slow_out),
                "{data}\nfast: {}\nslow: {}",
                String::from_utf8_lossy(&fast_out),
                String::from_utf8_lossy(&slow_out)
            );
            assert_eq!(state(&fast_w), state(&slow_w), "{data}");
        }
    }

    /// Chunks as OpenAI, vLLM, Ollama and friends send them, and some odd
    /// but valid ones.
    const CHUNKS: &[&str] = &[
        // Azure: its prompt annotation, and every choice annotated, unfiltered.
        r#"{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}"#,
        r#"{"choices":[{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"}},"delta":{"content":"Hi"},"finish_reason":null,"index":0}],"created":1,"id":"az","model":"gpt-4o","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"stop","index":0}],"created":1,"id":"az","model":"gpt-4o","object":"chat.completion.chunk"}"#,
        // The role chunk, with every field OpenAI adds nowadays.
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024","service_tier":"default","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"xYz"}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        // Unicode, raw and escaped, and escapes that re-encode differently.
        r#"{"id":"chatcmpl-1","created":1700000000,"model":"gpt-4o-2024","choices":[{"index":0,"delta":{"content":"h\u00e9llo 世界 🎉 \"q\" \\ \/ \n\t\u0001"},"finish_reason":null}]}"#,
        // Keys with escapes, a key that unescapes to one we read, numbers
        // the slow path writes differently, logprobs.
        r#"{"id":"chatcmpl-1","x\u0041y":1,"we\"ird\\key":"v","big":12345678901234567890,"f":1.0e2,"neg":-0.0,"mod\u0065l":"m-escaped","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.0001,"bytes":[72,105],"top_logprobs":[]}]},"finish_reason":null}]}"#,
        // Tool calls, OpenAI style: the opening then argument pieces.
        r#"{"id":"chatcmpl-1","model":"gpt-4o-2024","created":1700000000,"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-4o-2024","created":1700000000,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-4o-2024","created":1700000000,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}},{"index":1,"id":"call_2","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}"#,
        // Calls without a function or arguments, no calls, null calls.
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0},{"function":null},{"function":{"arguments":null}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
        r#"{"choices":[{"delta":{"content":null,"tool_calls":null,"refusal":null}}]}"#,
        // A refusal.
        r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"refusal":"I can't"},"finish_reason":null}]}"#,
        // Finishes: with an empty delta, with content, without a delta.
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"end"},"finish_reason":"tool_calls"}]}"#,
        r#"{"id":"chatcmpl-1","choices":[{"index":0,"finish_reason":"length"}]}"#,
        // Several choices (n > 1).
        r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null},{"index":1,"delta":{"content":"b"},"finish_reason":"stop"}]}"#,
        // Usage: the usage-only chunk, usage on a content chunk (vLLM's
        // continuous usage), usage that does not parse.
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":4}}}"#,
        r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}"#,
        r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"y"}}],"usage":"lots"}"#,
        // A provider of its own is replaced by ours.
        r#"{"id":"chatcmpl-1","provider":"someone-else","choices":[{"index":0,"delta":{"content":"z"}}]}"#,
        // Nothing to say: an empty delta and no finish, a null delta;
        // choices that are not a list; no choices.
        r#"{"id":"","model":"","created":0,"choices":[{"index":0,"delta":{}}]}"#,
        r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":null}]}"#,
        r#"{"id":"chatcmpl-1","choices":null}"#,
        r#"{"id":"chatcmpl-1","choices":{"index":0}}"#,
        r#"{"id":"chatcmpl-1"}"#,
        // id, model and created of other types, and changing values.
        r#"{"id":7,"model":null,"created":"now","choices":[{"delta":{"content":"w"}}]}"#,
        r#"{"id":"chatcmpl-2","model":"gpt-4o-mini","created":-1,"choices":[{"delta":{"content":"v"}}]}"#,
        r#"{"id":"chatcmpl-2","created":1.5,"choices":[{"delta":{"content":"v"}}]}"#,
        // Whitespace everywhere.
        " { \"id\" : \"chatcmpl-3\" ,\n \"choices\" : [ { \"delta\" : { \"content\" : \"sp\" } , \"finish_reason\" : null } ] , \"usage\" : null } ",
    ];

    #[test]
    fn fast_and_slow_paths_agree() {
        for include_usage in [false, true] {
            // One event at a time, and as one stream (origin updates carry over).
            for chunk in CHUNKS {
                assert_paths_agree(&[chunk], include_usage);
            }
            assert_paths_agree(CHUNKS, include_usage);
        }
    }

    /// Differential fuzzing: chunks mutated at random (deterministically),
    /// each through both paths. Where the fast path takes one, it must do
    /// what the slow path does: the same error or none, the same JSON, the
    /// same writer; where it does not, it must have touched nothing.
    #[test]
    fn fast_path_agrees_on_mutated_chunks() {
        const TOKENS: &[&str] = &[
            "{",
            "}",
            "[",
            "]",
            "\"",
            ",",
            ":",
            "\\",
            "\\u0041",
            "\\ud800",
            "null",
            "true",
            "-1",
            "0",
            "1.5",
            "\"\"",
            "{}",
            "[]",
            "é",
            " ",
            "\"error\"",
            "\"usage\"",
            "\"provider\"",
            "\"choices\"",
            "\"delta\"",
            "\"content\"",
            "\"tool_calls\"",
            "\"function\"",
            "\"arguments\"",
            "\"finish_reason\"",
            "\"refusal\"",
            "\"content_filter_results\"",
            "\"id\"",
            "\"model\"",
            "\"created\"",
        ];
        let mut state_rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut below = move |n: usize| {
            state_rng ^= state_rng >> 12;
            state_rng ^= state_rng << 25;
            state_rng ^= state_rng >> 27;
            (state_rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1) as u64) as usize
        };
        // Long numbers round differently through the slow path's floats.
        let bases: Vec<&str> = CHUNKS
            .iter()
            .copied()
            .filter(|c| !c.contains("big"))
            .collect();
        let (mut fast_taken, mut scratch) = (0, Scratch::default());
        for round in 0..20_000 {
            let mut chars: Vec<char> = bases[below(bases.len())].chars().collect();
            for _ in 0..1 + below(3) {
                let at = below(chars.len() + 1);
                match below(3) {
                    0 => {
                        let token = TOKENS[below(TOKENS.len())];
                        chars.splice(at..at, token.chars());
                    }
                    1 => {
                        let end = (at + 1 + below(8)).min(chars.len());
                        chars.drain(at.min(end)..end);
                    }
                    _ => {
                        let from = below(chars.len());
                        let to = (from + 1 + below(40)).min(chars.len());
                        let copied: Vec<char> = chars[from..to].to_vec();
                        chars.splice(at..at, copied);
                    }
                }
            }
            let data: String = chars.into_iter().collect();
            let include_usage = round % 2 == 0;
            let (mut fast_w, mut slow_w) =
                (fresh_writer(include_usage), fresh_writer(include_usage));
            let (mut fast_out, mut slow_out) = (Vec::new(), Vec::new());
            let slow = slow_event(&data, &mut slow_w, &mut slow_out);
            match fast_event(&data, &mut fast_w, &mut fast_out, &mut scratch) {
                None => {
                    assert!(fast_out.is_empty(), "{data}");
                    assert_eq!(
                        state(&fast_w),
                        state(&fresh_writer(include_usage)),
                        "{data}"
                    );
                }
                Some(fast) => {
                    fast_taken += 1;
                    assert_eq!(fast.is_ok(), slow.is_ok(), "{data}");
                    assert_eq!(written(&fast_out), written(&slow_out), "{data}");
                    assert_eq!(state(&fast_w), state(&slow_w), "{data}");
                }
            }
        }
        assert!(fast_taken > 1500, "the fast path took only {fast_taken}");
    }

    #[test]
    fn fast_path_copies_values_verbatim() {
        let mut w = fresh_writer(true);
        let (mut out, mut scratch) = (Vec::new(), Scratch::default());
        // The slow path writes these as 100.0, "é" and 1.2345678901234567e+23
        // (the last rounded through a float).
        let data = r#"{"id":"c","f":1.0e2,"s":"\u00e9","n":123456789012345678901234,"choices":[{"delta":{"content":"Hi"}}],"usage":null}"#;
        fast_event(data, &mut w, &mut out, &mut scratch)
            .unwrap()
            .unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "data: {\"id\":\"c\",\"f\":1.0e2,\"s\":\"\\u00e9\",\"n\":123456789012345678901234,\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null,\"provider\":\"oa\"}\n\n"
        );
    }

    #[test]
    fn unusual_chunks_take_the_typed_reading() {
        let unusual = [
            // Errors.
            r#"{"error":{"message":"boom","type":"server_error"}}"#,
            r#"{"id":"new","error":null,"choices":[{"delta":{"content":"x"}}]}"#,
            // Azure's content filter, when it filtered (or twice).
            r#"{"id":"new","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null,"content_filter_results":{"hate":{"filtered":true,"severity":"high"}}}]}"#,
            r#"{"id":"new","choices":[{"index":0,"delta":{},"content_filter_results":{},"content_filter_results":{}}]}"#,
            // Repeated keys, at the top, in a choice, in a delta, in a call.
            r#"{"id":"new","id":"other","choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"id":"new","choices":[{"delta":{"content":"x"}}],"ch\u006fices":[]}"#,
            r#"{"id":"new","choices":[{"delta":{"content":"x"},"delta":{}}]}"#,
            r#"{"id":"new","choices":[{"delta":{"content":"x","content":"y"}}]}"#,
            r#"{"id":"new","choices":[{"delta":{"tool_calls":[{"function":{"arguments":"a","arguments":"b"}}]}}]}"#,
            // Shapes a typed reading would read differently: choices,
            // deltas, calls or functions that are no objects, text that is
            // no string, calls that are no list.
            r#"{"id":"new","choices":[1,"two",null]}"#,
            r#"{"id":"new","choices":[{"delta":"not an object","finish_reason":null}]}"#,
            r#"{"id":"new","choices":[{"delta":{"content":["parts"]}}]}"#,
            r#"{"id":"new","choices":[{"delta":{"tool_calls":{"not":"a list"}}}]}"#,
            r#"{"id":"new","choices":[{"delta":{"tool_calls":[null]}}]}"#,
            r#"{"id":"new","choices":[{"delta":{"tool_calls":[{"function":["x"]}]}}]}"#,
            r#"{"id":"new","choices":[{"delta":{"tool_calls":[{"function":{"arguments":7}}]}}]}"#,
            // Surrogate escapes, alone or paired.
            r#"{"id":"new","choices":[{"delta":{"content":"\ud800"}}]}"#,
            r#"{"id":"new","choices":[{"delta":{"content":"\uD83D\uDE00"}}]}"#,
            // Not an object, not JSON, trailing garbage.
            r#"["id","new"]"#,
            r#"{"id":"new","choices":[{"delta":{"content":"x"}}]"#,
            r#"{"id":"new"} x"#,
            "not json",
        ];
        for data in unusual {
            let mut w = fresh_writer(true);
            let (mut out, mut scratch) = (Vec::new(), Scratch::default());
            assert!(
                fast_event(data, &mut w, &mut out, &mut scratch).is_none(),
                "{data}"
            );
            assert!(out.is_empty(), "{data}");
            assert_eq!(w.origin().id, "", "the writer is untouched: {data}");
            assert!(w.usage().is_none() && !w.finished(), "{data}");
        }
    }

    #[test]
    fn the_typed_reading_serves_unusual_chunks() {
        let mut events = OpenAiEvents::default();
        let mut w = fresh_writer(false);
        let mut out = Vec::new();
        let role =
            r#"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;
        let call = r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{"}}]}}]}"#;
        for data in [role, call] {
            events.on_event(("", data), &mut w, &mut out).unwrap();
        }
        out.clear();
        // Azure's filter strikes mid-call, in a chunk with the call's last
        // piece: the piece continues call 0, then the finish.
        let filtered = r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]},"finish_reason":null,"content_filter_results":{"hate":{"filtered":true}}}]}"#;
        events.on_event(("", filtered), &mut w, &mut out).unwrap();
        let chunks = written(&out);
        assert_eq!(chunks.len(), 2, "no second role chunk: {chunks:?}");
        let piece = &chunks[0]["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(
            (piece["index"].as_u64(), &piece["function"]["arguments"]),
            (Some(0), &Value::from("}"))
        );
        assert!(piece.get("id").is_none(), "the same call, not a new one");
        assert_eq!(chunks[1]["choices"][0]["finish_reason"], "content_filter");
        assert_eq!(chunks[1]["provider"], "oa");
        assert!(w.finished());
        let error = r#"{"error":{"message":"boom","type":"server_error"}}"#;
        let e = events.on_event(("", error), &mut w, &mut out).unwrap_err();
        assert_eq!(e.code, ErrorCode::UpstreamError);
        let lone = r#"{"id":"c","choices":[{"delta":{"content":"\ud800"}}]}"#;
        assert!(events.on_event(("", lone), &mut w, &mut out).is_err());
        let repeated = r#"{"id":"c","id":"d","choices":[{"delta":{"content":"x"}}]}"#;
        assert!(
            events.on_event(("", repeated), &mut w, &mut out).is_err(),
            "a vendor's repeated key is no answer"
        );
        let mut w = fresh_writer(false);
        events.on_event(("", role), &mut w, &mut out).unwrap();
        out.clear();
        let paired = r#"{"id":"c","choices":[{"delta":{"content":"\ud83d\ude00"}}]}"#;
        events.on_event(("", paired), &mut w, &mut out).unwrap();
        assert_eq!(written(&out)[0]["choices"][0]["delta"]["content"], "😀");
    }
}
