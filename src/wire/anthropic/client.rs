//! The Messages request as a client sends it (`POST /v1/messages`), read
//! borrowed in one pass: strings borrow the body unless they hold escapes,
//! tool schemas and tool-call inputs are read as the neutral model keeps
//! them (a JSON object).
//!
//! Read leniently ([`crate::wire::loose`]), so that the Messages surface,
//! not serde, words every refusal the way Anthropic does: each member
//! keeps its JSON type whatever the field takes, and an object's unknown
//! members are noted, not refused. What it does refuse, in the same pass,
//! is what [`Strict`] refuses, in its words: bad JSON and duplicate keys
//! at any depth, named by their path
//! (`messages[0].role: duplicate field at line 1 column 60`), what nothing
//! reads included ([`Checked`]: there is no pass before this one).

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, MapAccess};
use serde_json::Value;

use crate::model::json::Strict;
use crate::wire::loose::{members, Loose, Members};
use crate::wire::syntax::Checked;

/// A member as sent, whatever its JSON type: an object as `O`, an array's
/// elements as `E`, and what the surface does not read of it checked.
pub type Any<'a, O = Checked, E = Checked> = Loose<'a, O, E>;

/// An array of `T`, or whatever else the client sent instead.
pub type List<'a, T = Checked> = Any<'a, Checked, Any<'a, T>>;

/// A JSON object kept whole (a tool's `input_schema`, a call's `input`).
impl<'de> Members<'de> for Value {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        Strict::deserialize(MapAccessDeserializer::new(map)).map(|Strict(v)| v)
    }
}

/// A tagged object's `type`, taken out to dispatch on.
pub trait Tagged<'a> {
    fn take_type(&mut self) -> Option<Any<'a>>;
}

macro_rules! tagged {
    ($($name:ident),*) => {$(
        impl<'a> Tagged<'a> for $name<'a> {
            fn take_type(&mut self) -> Option<Any<'a>> {
                self.kind.take()
            }
        }
    )*};
}

tagged!(Block, Source, ToolChoice, Thinking, OutputFormat);

members! {
    /// The request body (members in key order: Anthropic checks them so).
    pub struct Request<'a> {
        cache_control "cache_control": Checked,
        container "container": Checked,
        context_management "context_management": Checked,
        diagnostics "diagnostics": Checked,
        inference_geo "inference_geo": Checked,
        max_tokens "max_tokens": Any<'a>,
        mcp_servers "mcp_servers": Checked,
        messages "messages": List<'a, Message<'a>>,
        metadata "metadata": Any<'a, Metadata<'a>>,
        model "model": Any<'a>,
        output_config "output_config": Any<'a, OutputConfig<'a>>,
        output_format "output_format": Any<'a, OutputFormat<'a>>,
        service_tier "service_tier": Checked,
        speed "speed": Checked,
        stop_sequences "stop_sequences": List<'a>,
        stream "stream": Any<'a>,
        system "system": Content<'a>,
        temperature "temperature": Any<'a>,
        thinking "thinking": Any<'a, Thinking<'a>>,
        tool_choice "tool_choice": Any<'a, ToolChoice<'a>>,
        tools "tools": List<'a, Tool<'a>>,
        top_k "top_k": Any<'a>,
        top_p "top_p": Any<'a>,
        user_profile_id "user_profile_id": Checked,
        workspace_id "workspace_id": Checked,
    }
}

members! {
    pub struct Message<'a> {
        role "role": Any<'a>,
        content "content": Content<'a>,
    }
}

/// A turn's (or the system prompt's, or a tool result's) content: a
/// string or blocks.
pub type Content<'a> = List<'a, Block<'a>>;

members! {
    /// A content block of any type: the members of every type the
    /// surface reads (which a type allows is the surface's to check).
    pub struct Block<'a> {
        kind "type": Any<'a>,
        text "text": Any<'a>,
        cache_control "cache_control": Any<'a, CacheControl<'a>>,
        citations "citations": Any<'a>,
        source "source": Any<'a, Source<'a>>,
        transformations "transformations": Any<'a>,
        title "title": Any<'a>,
        context "context": Any<'a>,
        tool_use_id "tool_use_id": Any<'a>,
        content "content": Content<'a>,
        is_error "is_error": Any<'a>,
        toolset_name "toolset_name": Any<'a>,
        id "id": Any<'a>,
        name "name": Any<'a>,
        input "input": Any<'a, Value>,
        caller "caller": Any<'a, Caller<'a>>,
        thinking "thinking": Any<'a>,
        signature "signature": Any<'a>,
        data "data": Any<'a>,
    }
}

members! {
    /// An image's or document's `source`.
    pub struct Source<'a> {
        kind "type": Any<'a>,
        media_type "media_type": Any<'a>,
        data "data": Any<'a>,
        url "url": Any<'a>,
    }
}

members! {
    pub struct CacheControl<'a> {
        kind "type": Any<'a>,
        ttl "ttl": Any<'a>,
    }
}

members! {
    /// A tool call's `caller`: the model itself (`direct`) or a server tool.
    pub struct Caller<'a> {
        kind "type": Any<'a>,
    }
}

members! {
    pub struct Metadata<'a> {
        user_id "user_id": Any<'a>,
    }
}

members! {
    /// A tool definition: custom (no `type`) or a server tool.
    pub struct Tool<'a> {
        kind "type": Any<'a>,
        name "name": Any<'a>,
        description "description": Any<'a>,
        input_schema "input_schema": Any<'a, Value>,
        cache_control "cache_control": Any<'a, CacheControl<'a>>,
        strict "strict": Any<'a>,
        input_examples "input_examples": Checked,
        defer_loading "defer_loading": Checked,
        allowed_callers "allowed_callers": List<'a>,
        eager_input_streaming "eager_input_streaming": Checked,
    }
}

members! {
    pub struct ToolChoice<'a> {
        kind "type": Any<'a>,
        name "name": Any<'a>,
        disable_parallel_tool_use "disable_parallel_tool_use": Any<'a>,
    }
}

members! {
    pub struct Thinking<'a> {
        kind "type": Any<'a>,
        budget_tokens "budget_tokens": Any<'a>,
        display "display": Checked,
    }
}

members! {
    pub struct OutputConfig<'a> {
        effort "effort": Any<'a>,
        format "format": Any<'a, OutputFormat<'a>>,
    }
}

members! {
    pub struct OutputFormat<'a> {
        kind "type": Any<'a>,
        schema "schema": Any<'a, Value>,
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
            match serde_json::from_slice::<Any<Request>>(body.as_bytes()) {
                Ok(_) => assert_eq!(error, "", "{body}"),
                Err(e) => assert!(
                    !error.is_empty() && e.to_string().starts_with(error),
                    "{body}: {e}"
                ),
            }
        }
    }
}
