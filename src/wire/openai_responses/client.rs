//! OpenAI's Responses API, the request side: `POST /v1/responses` as a
//! client sends it (the OpenAI reference's `ResponseCreateParams`), read
//! by the surface's parser (`surfaces::openai_responses::request`).
//!
//! Borrowed and loose ([`crate::wire::loose`]): every member is taken
//! whatever its JSON type, so the parser refuses a body with OpenAI's own
//! words, in its own order. An object of several kinds (an input item, a
//! content part, a tool) is one type with every kind's members; the parser
//! picks the ones its `type` allows. What the request repeats in its answer
//! (`echo`), what the neutral request keeps as JSON (function `parameters`,
//! `metadata`) and what only a pass-through to OpenAI serves (server-side
//! state) stay raw.

use serde_json::value::RawValue;

use crate::wire::loose::{members, Loose, Skip};

/// An array of `T` objects, or whatever else the client sent instead.
pub type List<'a, T> = Loose<'a, Skip, Loose<'a, T>>;

/// A member whose value is checked as a whole, or skipped.
pub type Raw<'a> = &'a RawValue;

members! {
    /// The request body, plus our `request_id`.
    pub struct Request<'a> {
        background "background": Loose<'a>,
        client_metadata "client_metadata": Skip,
        context_management "context_management": Raw<'a>,
        conversation "conversation": Raw<'a>,
        include "include": List<'a, Skip>,
        input "input": List<'a, Item<'a>>,
        instructions "instructions": Raw<'a>,
        max_output_tokens "max_output_tokens": Raw<'a>,
        max_tool_calls "max_tool_calls": Skip,
        metadata "metadata": Raw<'a>,
        model "model": Loose<'a>,
        moderation "moderation": Raw<'a>,
        parallel_tool_calls "parallel_tool_calls": Raw<'a>,
        previous_response_id "previous_response_id": Raw<'a>,
        prompt "prompt": Raw<'a>,
        prompt_cache_key "prompt_cache_key": Loose<'a>,
        prompt_cache_options "prompt_cache_options": Skip,
        prompt_cache_retention "prompt_cache_retention": Loose<'a>,
        reasoning "reasoning": Raw<'a>,
        request_id "request_id": Loose<'a>,
        safety_identifier "safety_identifier": Loose<'a>,
        service_tier "service_tier": Loose<'a>,
        store "store": Loose<'a>,
        stream "stream": Loose<'a>,
        stream_options "stream_options": Skip,
        temperature "temperature": Raw<'a>,
        text "text": Raw<'a>,
        tool_choice "tool_choice": Raw<'a>,
        tools "tools": Raw<'a>,
        top_logprobs "top_logprobs": Skip,
        top_p "top_p": Raw<'a>,
        truncation "truncation": Raw<'a>,
        user "user": Raw<'a>,
    }
}

members! {
    /// An input item: a message, a function call or its output, reasoning,
    /// a built-in tool's item (whose members are not read).
    pub struct Item<'a> {
        kind "type": Loose<'a>,
        id "id": Skip,
        role "role": Loose<'a>,
        /// A message's content (a string or parts), reasoning's raw text parts.
        content "content": List<'a, Part<'a>>,
        status "status": Skip,
        phase "phase": Skip,
        call_id "call_id": Loose<'a>,
        name "name": Loose<'a>,
        arguments "arguments": Loose<'a>,
        namespace "namespace": Loose<'a>,
        caller "caller": Skip,
        output "output": List<'a, Part<'a>>,
        summary "summary": List<'a, Part<'a>>,
        encrypted_content "encrypted_content": Loose<'a>,
        action "action": Skip,
    }
}

members! {
    /// A content part: input text, image or file, an assistant's output
    /// text or refusal, a reasoning item's text.
    pub struct Part<'a> {
        kind "type": Loose<'a>,
        text "text": Loose<'a>,
        image_url "image_url": Loose<'a>,
        file_id "file_id": Loose<'a>,
        detail "detail": Loose<'a>,
        file_data "file_data": Loose<'a>,
        file_url "file_url": Loose<'a>,
        filename "filename": Loose<'a>,
        annotations "annotations": Skip,
        logprobs "logprobs": Skip,
        refusal "refusal": Loose<'a>,
        prompt_cache_breakpoint "prompt_cache_breakpoint": Loose<'a, Breakpoint<'a>>,
    }
}

members! {
    /// An input part's `prompt_cache_breakpoint` (GPT-5.6 and later).
    pub struct Breakpoint<'a> {
        mode "mode": Loose<'a>,
        ttl "ttl": Loose<'a>,
    }
}

members! {
    /// An entry of `tools`: a function tool, a `namespace` of them, the
    /// hosted web search, another built-in tool (whose members are not read).
    pub struct Tool<'a> {
        kind "type": Loose<'a>,
        name "name": Loose<'a>,
        description "description": Loose<'a>,
        parameters "parameters": Raw<'a>,
        strict "strict": Loose<'a>,
        defer_loading "defer_loading": Skip,
        /// A namespace's function tools.
        tools "tools": List<'a, Tool<'a>>,
        filters "filters": Loose<'a, Filters<'a>>,
        user_location "user_location": Loose<'a, Location<'a>>,
        search_context_size "search_context_size": Loose<'a>,
        external_web_access "external_web_access": Loose<'a>,
    }
}

members! {
    /// The web search's `filters`.
    pub struct Filters<'a> {
        allowed_domains "allowed_domains": Loose<'a, Skip, Loose<'a>>,
    }
}

members! {
    /// The web search's `user_location`.
    pub struct Location<'a> {
        kind "type": Loose<'a>,
        city "city": Loose<'a>,
        region "region": Loose<'a>,
        country "country": Loose<'a>,
        timezone "timezone": Loose<'a>,
    }
}

members! {
    /// `tool_choice` as an object.
    pub struct ToolChoice<'a> {
        kind "type": Loose<'a>,
        name "name": Loose<'a>,
    }
}

members! {
    /// `reasoning`.
    pub struct Reasoning<'a> {
        effort "effort": Loose<'a>,
        summary "summary": Loose<'a>,
        generate_summary "generate_summary": Loose<'a>,
    }
}

members! {
    /// `text`: the output format (raw: a JSON schema's is read as a whole)
    /// and the verbosity.
    pub struct Text<'a> {
        format "format": Raw<'a>,
        verbosity "verbosity": Loose<'a>,
    }
}

members! {
    /// `text.format`.
    pub struct Format<'a> {
        kind "type": Loose<'a>,
        name "name": Skip,
        schema "schema": Skip,
        strict "strict": Skip,
        description "description": Skip,
    }
}
