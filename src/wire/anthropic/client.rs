//! The Messages request as a client sends it (`POST /v1/messages`), read
//! borrowed in one pass: strings borrow the body unless they hold escapes
//! (`Cow`), tool schemas and tool-call inputs are read as the neutral model
//! keeps them (a JSON object).
//!
//! Read leniently, so that the Messages surface, not serde, words every
//! refusal the way Anthropic does: each member keeps its JSON type when it
//! is not the one the field takes ([`Lax`]), and an object's unknown
//! members are noted ([`Members::first_extra`]), not refused. What it does
//! refuse, in the same pass, is what [`Strict`] refuses, in its words:
//! bad JSON and duplicate keys at any depth, named by their path
//! (`messages[0].role: duplicate field at line 1 column 60`), skipped
//! values included ([`Checked`]).

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

use crate::model::json::{at, Index, Strict};
use crate::wire::loose::Key;
use crate::wire::syntax::Checked;

/// A member's value: `null`, a JSON type the field does not take, or the
/// one it does.
#[derive(Debug)]
pub enum Lax<T> {
    Null,
    Other,
    Is(T),
}

impl<T> Lax<T> {
    pub fn is_null(&self) -> bool {
        matches!(self, Lax::Null)
    }

    fn of(value: Option<T>) -> Self {
        value.map_or(Lax::Other, Lax::Is)
    }
}

/// What a [`Lax`] member takes: the JSON types it accepts build it, the
/// others are skipped (`None`).
pub trait Shape<'de>: Sized {
    fn from_text(_: Cow<'de, str>) -> Option<Self> {
        None
    }

    fn from_bool(_: bool) -> Option<Self> {
        None
    }

    fn from_number(_: Number) -> Option<Self> {
        None
    }

    fn from_seq<A: SeqAccess<'de>>(seq: A) -> Result<Option<Self>, A::Error> {
        Checked::seq(seq).map(|_| None)
    }

    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
        Checked::map(map).map(|_| None)
    }
}

impl<'de, T: Shape<'de>> Deserialize<'de> for Lax<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LaxVisitor(PhantomData))
    }
}

struct LaxVisitor<T>(PhantomData<T>);

impl<'de, T: Shape<'de>> Visitor<'de> for LaxVisitor<T> {
    type Value = Lax<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Lax<T>, E> {
        Ok(Lax::Null)
    }

    fn visit_none<E>(self) -> Result<Lax<T>, E> {
        Ok(Lax::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Lax<T>, E> {
        Ok(Lax::of(T::from_bool(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Lax<T>, E> {
        Ok(Lax::of(T::from_number(v.into())))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Lax<T>, E> {
        Ok(Lax::of(T::from_number(v.into())))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Lax<T>, E> {
        // As `serde_json::Value` reads it (JSON has no non-finite numbers).
        Ok(Number::from_f64(v).map_or(Lax::Null, |n| Lax::of(T::from_number(n))))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Lax<T>, E> {
        Ok(Lax::of(T::from_text(Cow::Borrowed(v))))
    }

    fn visit_str<E>(self, v: &str) -> Result<Lax<T>, E> {
        Ok(Lax::of(T::from_text(Cow::Owned(v.to_owned()))))
    }

    fn visit_string<E>(self, v: String) -> Result<Lax<T>, E> {
        Ok(Lax::of(T::from_text(Cow::Owned(v))))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Lax<T>, A::Error> {
        T::from_seq(seq).map(Lax::of)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Lax<T>, A::Error> {
        T::from_map(map).map(Lax::of)
    }
}

impl<'de> Shape<'de> for Cow<'de, str> {
    fn from_text(s: Cow<'de, str>) -> Option<Self> {
        Some(s)
    }
}

impl Shape<'_> for bool {
    fn from_bool(b: bool) -> Option<Self> {
        Some(b)
    }
}

impl Shape<'_> for Number {
    fn from_number(n: Number) -> Option<Self> {
        Some(n)
    }
}

impl<'de, T: Deserialize<'de>> Shape<'de> for Vec<T> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Option<Self>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = at(Index(items.len()), seq.next_element())? {
            items.push(item);
        }
        Ok(Some(items))
    }
}

/// A JSON object kept whole (a tool's `input_schema`, a call's `input`).
impl<'de> Shape<'de> for Value {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
        Strict::deserialize(MapAccessDeserializer::new(map)).map(|Strict(v)| Some(v))
    }
}

/// Any value: for members whose only question is whether they are set.
#[derive(Debug)]
pub struct Set;

impl<'de> Shape<'de> for Set {
    fn from_text(_: Cow<'de, str>) -> Option<Self> {
        Some(Set)
    }

    fn from_bool(_: bool) -> Option<Self> {
        Some(Set)
    }

    fn from_number(_: Number) -> Option<Self> {
        Some(Set)
    }

    fn from_seq<A: SeqAccess<'de>>(seq: A) -> Result<Option<Self>, A::Error> {
        Checked::seq(seq).map(|_| Some(Set))
    }

    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
        Checked::map(map).map(|_| Some(Set))
    }
}

/// [`Strict`]'s words for a key given twice.
fn duplicate<E: de::Error>(key: &str) -> E {
    E::custom(format!("{key}: duplicate field"))
}

/// An object's keys so far: a list while short, a set beyond.
#[derive(Default)]
struct Keys<'de> {
    few: Vec<Cow<'de, str>>,
    many: HashSet<Cow<'de, str>>,
}

impl<'de> Keys<'de> {
    /// Longer objects than this look their keys up in a set.
    const LINEAR: usize = 16;

    /// Adds a key; `false` when the object already had it.
    fn insert(&mut self, key: Cow<'de, str>) -> bool {
        if self.few.len() < Self::LINEAR {
            if self.few.contains(&key) {
                return false;
            }
            self.few.push(key);
            return true;
        }
        if self.many.is_empty() {
            self.many.extend(self.few.iter().cloned());
        }
        self.many.insert(key)
    }
}

/// An object's members as read, for refusing the first one (in key order,
/// as Anthropic names it) that a use of the object does not allow.
pub trait Members {
    fn first_extra(&self, allowed: &[&str]) -> Option<&str>;
}

/// An object type: its known members (each `None` when absent) and the
/// first unknown one in key order.
macro_rules! object {
    ($(#[$doc:meta])* $name:ident { $($field:ident: $ty:ty = $key:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Default)]
        pub struct $name<'a> {
            $(pub $field: Option<$ty>,)*
            pub unknown: Option<Cow<'a, str>>,
        }

        impl Members for $name<'_> {
            fn first_extra(&self, allowed: &[&str]) -> Option<&str> {
                let mut first = self.unknown.as_deref();
                $(
                    if self.$field.is_some()
                        && !allowed.contains(&$key)
                        && first.is_none_or(|f| $key < f)
                    {
                        first = Some($key);
                    }
                )*
                first
            }
        }

        impl<'de> Shape<'de> for $name<'de> {
            fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
                let mut out = Self::default();
                let mut others = Keys::default();
                while let Some(Key(key)) = map.next_key()? {
                    match &*key {
                        $($key => {
                            if out.$field.is_some() {
                                return Err(duplicate(&key));
                            }
                            out.$field = Some(at(&key, map.next_value())?);
                        })*
                        _ => {
                            if !others.insert(key.clone()) {
                                return Err(duplicate(&key));
                            }
                            at(&key, map.next_value::<Checked>())?;
                            if out.unknown.as_ref().is_none_or(|first| key < *first) {
                                out.unknown = Some(key);
                            }
                        }
                    }
                }
                Ok(Some(out))
            }
        }
    };
}

/// A tagged object's `type`, taken out to dispatch on.
pub trait Tagged<'a> {
    fn take_type(&mut self) -> Option<Lax<Cow<'a, str>>>;
}

macro_rules! tagged {
    ($($name:ident),*) => {$(
        impl<'a> Tagged<'a> for $name<'a> {
            fn take_type(&mut self) -> Option<Lax<Cow<'a, str>>> {
                self.kind.take()
            }
        }
    )*};
}

tagged!(Block, Source, ToolChoice, Thinking, OutputFormat);

object! {
    /// The request body (members in key order: Anthropic checks them so).
    Request {
        cache_control: Checked = "cache_control",
        container: Checked = "container",
        context_management: Checked = "context_management",
        diagnostics: Checked = "diagnostics",
        inference_geo: Checked = "inference_geo",
        max_tokens: Lax<Number> = "max_tokens",
        mcp_servers: Checked = "mcp_servers",
        messages: Lax<Vec<Lax<Message<'a>>>> = "messages",
        metadata: Lax<Metadata<'a>> = "metadata",
        model: Lax<Cow<'a, str>> = "model",
        output_config: Lax<OutputConfig<'a>> = "output_config",
        output_format: Lax<OutputFormat<'a>> = "output_format",
        service_tier: Checked = "service_tier",
        speed: Checked = "speed",
        stop_sequences: Lax<Vec<Lax<Cow<'a, str>>>> = "stop_sequences",
        stream: Lax<bool> = "stream",
        system: Lax<Content<'a>> = "system",
        temperature: Lax<Number> = "temperature",
        thinking: Lax<Thinking<'a>> = "thinking",
        tool_choice: Lax<ToolChoice<'a>> = "tool_choice",
        tools: Lax<Vec<Lax<Tool<'a>>>> = "tools",
        top_k: Lax<Number> = "top_k",
        top_p: Lax<Number> = "top_p",
        user_profile_id: Checked = "user_profile_id",
        workspace_id: Checked = "workspace_id",
    }
}

object! {
    Message {
        role: Lax<Cow<'a, str>> = "role",
        content: Lax<Content<'a>> = "content",
    }
}

/// A turn's (or the system prompt's, or a tool result's) content: a
/// string or blocks.
#[derive(Debug)]
pub enum Content<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Lax<Block<'a>>>),
}

impl<'de> Shape<'de> for Content<'de> {
    fn from_text(s: Cow<'de, str>) -> Option<Self> {
        Some(Content::Text(s))
    }

    fn from_seq<A: SeqAccess<'de>>(seq: A) -> Result<Option<Self>, A::Error> {
        <Vec<Lax<Block<'de>>> as Shape<'de>>::from_seq(seq).map(|b| b.map(Content::Blocks))
    }
}

object! {
    /// A content block of any type: the members of every type the
    /// surface reads (which a type allows is the surface's to check).
    Block {
        kind: Lax<Cow<'a, str>> = "type",
        text: Lax<Cow<'a, str>> = "text",
        cache_control: Lax<CacheControl<'a>> = "cache_control",
        citations: Lax<Set> = "citations",
        source: Lax<Source<'a>> = "source",
        transformations: Lax<Set> = "transformations",
        title: Lax<Cow<'a, str>> = "title",
        context: Lax<Set> = "context",
        tool_use_id: Lax<Cow<'a, str>> = "tool_use_id",
        content: Lax<Content<'a>> = "content",
        is_error: Lax<bool> = "is_error",
        toolset_name: Lax<Set> = "toolset_name",
        id: Lax<Cow<'a, str>> = "id",
        name: Lax<Cow<'a, str>> = "name",
        input: Lax<Value> = "input",
        caller: Lax<Caller<'a>> = "caller",
        thinking: Lax<Cow<'a, str>> = "thinking",
        signature: Lax<Cow<'a, str>> = "signature",
        data: Lax<Cow<'a, str>> = "data",
    }
}

object! {
    /// An image's or document's `source`.
    Source {
        kind: Lax<Cow<'a, str>> = "type",
        media_type: Lax<Cow<'a, str>> = "media_type",
        data: Lax<Cow<'a, str>> = "data",
        url: Lax<Cow<'a, str>> = "url",
    }
}

object! {
    CacheControl {
        kind: Lax<Cow<'a, str>> = "type",
        ttl: Lax<Cow<'a, str>> = "ttl",
    }
}

object! {
    /// A tool call's `caller`: the model itself (`direct`) or a server tool.
    Caller {
        kind: Lax<Cow<'a, str>> = "type",
    }
}

object! {
    Metadata {
        user_id: Lax<Cow<'a, str>> = "user_id",
    }
}

object! {
    /// A tool definition: custom (no `type`) or a server tool.
    Tool {
        kind: Lax<Cow<'a, str>> = "type",
        name: Lax<Cow<'a, str>> = "name",
        description: Lax<Cow<'a, str>> = "description",
        input_schema: Lax<Value> = "input_schema",
        cache_control: Lax<CacheControl<'a>> = "cache_control",
        strict: Lax<bool> = "strict",
        input_examples: Checked = "input_examples",
        defer_loading: Checked = "defer_loading",
        allowed_callers: Lax<Vec<Lax<Cow<'a, str>>>> = "allowed_callers",
        eager_input_streaming: Checked = "eager_input_streaming",
    }
}

object! {
    ToolChoice {
        kind: Lax<Cow<'a, str>> = "type",
        name: Lax<Cow<'a, str>> = "name",
        disable_parallel_tool_use: Lax<bool> = "disable_parallel_tool_use",
    }
}

object! {
    Thinking {
        kind: Lax<Cow<'a, str>> = "type",
        budget_tokens: Lax<Number> = "budget_tokens",
        display: Checked = "display",
    }
}

object! {
    OutputConfig {
        effort: Lax<Cow<'a, str>> = "effort",
        format: Lax<OutputFormat<'a>> = "format",
    }
}

object! {
    OutputFormat {
        kind: Lax<Cow<'a, str>> = "type",
        schema: Lax<Value> = "schema",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn duplicates_are_found_in_wide_objects_and_named_by_path() {
        let keys: String = (0..20).map(|i| format!(r#""k{i}":[{i}],"#)).collect();
        for (body, error) in [
            (
                format!(r#"{{"a":{{{keys}"k3":0}}}}"#),
                "a.k3: duplicate field",
            ),
            (format!(r#"{{"a":{{{keys}"k20":0}}}}"#), ""),
            (
                r#"{"a":[{},{"b":1,"b":2}]}"#.to_owned(),
                "a[1].b: duplicate field",
            ),
            (
                format!(r#"{{"model":"m","x":{{{keys}"k19":0}}}}"#),
                "x.k19: duplicate field",
            ),
            (
                r#"{"model":"m","zz":1,"zz":2}"#.to_owned(),
                "zz: duplicate field",
            ),
        ] {
            match serde_json::from_slice::<Lax<Request>>(body.as_bytes()) {
                Ok(_) => assert_eq!(error, "", "{body}"),
                Err(e) => assert!(
                    !error.is_empty() && e.to_string().starts_with(error),
                    "{body}: {e}"
                ),
            }
        }
    }
}
