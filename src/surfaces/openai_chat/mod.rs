//! OpenAI Chat Completions, the first client surface: `POST
//! /v1/chat/completions` requests ([`request`]), the `chat.completion`
//! object, the `chat.completion.chunk` stream and OpenAI's error envelope,
//! written as `crate::wire::openai_chat`'s types. OpenAI's embeddings
//! (`POST /v1/embeddings`, `crate::wire::openai_embeddings`) are a call of
//! this surface: its clients are OpenAI's, its errors in OpenAI's envelope.

use std::borrow::Cow;

use super::route::{only, Operation, PathFacts, Route};
use super::{Surface, SurfaceState};
use crate::error::GatewayError;
use crate::formats::sse::write_data;
use crate::model::call::{Call, CallAnswer, CallOp};
use crate::model::embed::{EmbedRequest, Embeddings};
use crate::model::listing::Listed;
use crate::model::request::{ChatRequest, Thinking};
use crate::model::response::{
    Answer, ChoiceRef, Completion, FinishReason, Origin, ToolCallOut, Usage,
};
use crate::model::stream::{Passed, Reasoning, StreamEncoder};
use crate::model::{Api, Generation, Request};
use crate::wire::openai_chat::{
    self as wire, Delta, ReasoningDetail, DETAIL_ENCRYPTED, DETAIL_TEXT,
};
use crate::wire::openai_embeddings;

pub mod models;
pub mod request;

pub struct OpenAiChat;

/// Where clients send generations.
const PATH: &str = "/v1/chat/completions";
/// OpenAI's model list, which Anthropic's clients call too (see `crate::surfaces`).
const MODELS: &str = "/v1/models";
const MODEL_PREFIX: &str = "/v1/models/";
/// Where clients send embeddings.
const EMBEDDINGS: &str = "/v1/embeddings";

impl Surface for OpenAiChat {
    /// `POST /v1/chat/completions`, `POST /v1/embeddings`, and the model
    /// list: `GET /v1/models` and `GET /v1/models/{model}`.
    fn route(&self, method: &str, path: &str, _query: &str) -> Option<Route> {
        let api = Api::OpenAiChat;
        let operation = match path {
            PATH => return Some(Route::generation(api, method, path)),
            EMBEDDINGS => {
                return Some(Route {
                    api,
                    operation: only(method, EMBEDDINGS, "POST", || {
                        Operation::Call(Call::new(CallOp::Embeddings, api, EMBEDDINGS))
                    }),
                    metered: true,
                })
            }
            MODELS => only(method, MODELS, "GET", || Operation::ListModels),
            p if p.starts_with(MODEL_PREFIX) => only(method, "/v1/models/{model}", "GET", || {
                let id = p.trim_start_matches(MODEL_PREFIX);
                Operation::Model(crate::formats::url::decode_segment(id))
            }),
            _ => return None,
        };
        Some(Route {
            api,
            operation,
            metered: false,
        })
    }

    fn render_models(&self, models: &[Listed], loaded_at: u64) -> Vec<u8> {
        models::render_list(models, loaded_at)
    }

    fn render_model(&self, model: &Listed, loaded_at: u64) -> Vec<u8> {
        models::render_one(model, loaded_at)
    }

    fn parse_call(&self, call: &Call, body: &[u8]) -> Result<Option<Request>, GatewayError> {
        match call.op {
            CallOp::Embeddings => openai_embeddings::parse(body).map(|r| Some(Request::Embed(r))),
            _ => Err(super::foreign_call()),
        }
    }

    fn parse_generation(&self, facts: &PathFacts, body: &[u8]) -> Result<Generation, GatewayError> {
        Ok(facts.generation(ChatRequest::parse(body)?))
    }

    /// `POST /v1/embeddings` with OpenAI's body for the part's inputs (and
    /// the gateway's `task_type`), its vectors in base64.
    fn embeddings_part(
        &self,
        _call: &Call,
        part: &EmbedRequest,
    ) -> Result<(String, Vec<u8>), GatewayError> {
        let body = serde_json::to_vec(&openai_embeddings::PartRequest::of(part));
        Ok((EMBEDDINGS.to_owned(), body.unwrap_or_default()))
    }

    /// OpenAI's list, and the `model` it names (Azure's: the deployment's
    /// model, where the vendor model is the deployment).
    fn read_embeddings_part(
        &self,
        body: &[u8],
    ) -> Result<(Embeddings, Option<String>), GatewayError> {
        openai_embeddings::decode(body)
    }

    /// Embeddings: OpenAI's list, the vectors as the client asked for them.
    fn render_call(&self, _call: &Call, answer: CallAnswer) -> Vec<u8> {
        match answer {
            CallAnswer::Embeddings(e) => {
                openai_embeddings::render(&e.embeddings, &e.model, e.encoding, e.tokens)
            }
            CallAnswer::Count(_) => self.render_error(&super::foreign_call(), None),
        }
    }

    fn render_answer(&self, answer: Answer, origin: &Origin, _state: &SurfaceState) -> Vec<u8> {
        match answer {
            Answer::Decoded(completion) => render_completion(&completion, origin),
            Answer::Native(body) => body,
        }
    }

    fn stream_encoder(&self, include_usage: bool, _state: &SurfaceState) -> Box<dyn StreamEncoder> {
        Box::new(ChatChunks {
            include_usage,
            head: ChunkHead::default(),
            reasoning: ReasoningBlock::None,
            choice: 0,
            others: Vec::new(),
        })
    }

    fn render_error(&self, error: &GatewayError, request_id: Option<&str>) -> Vec<u8> {
        crate::wire::openai_chat::render_error(error, request_id)
    }
}

/// The `chat.completion` object: a choice each (`n`).
fn render_completion(completion: &Completion, origin: &Origin) -> Vec<u8> {
    let body = wire::Completion {
        id: Cow::Borrowed(&origin.id),
        object: "chat.completion",
        created: origin.created,
        model: Cow::Borrowed(&origin.model),
        provider: &origin.provider,
        system_fingerprint: None,
        choices: completion.choices().map(render_choice).collect(),
        usage: completion.usage.as_ref().map(Into::into),
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

/// One choice of a `chat.completion`.
fn render_choice(choice: ChoiceRef<'_>) -> wire::Choice<'_> {
    let details: Vec<_> = choice
        .reasoning
        .iter()
        .zip(0..)
        .map(|(block, index)| detail_block(block, index))
        .collect();
    let tool_calls = choice.tool_calls;
    wire::Choice {
        index: choice.index,
        // Every field OpenAI sends, null where we have no value.
        message: Some(wire::Message {
            role: "assistant",
            content: choice.content.map(Cow::Borrowed),
            reasoning_content: reasoning_text(choice.reasoning).map(Cow::Owned),
            reasoning_details: details,
            refusal: None,
            tool_calls: (!tool_calls.is_empty())
                .then(|| tool_calls.iter().map(tool_call).collect()),
        }),
        logprobs: (),
        finish_reason: choice.finish_reason,
        content_filter_results: None,
    }
}

/// A message's tool call.
fn tool_call(call: &ToolCallOut) -> wire::ToolCall<'_> {
    wire::ToolCall {
        index: None,
        id: Some(Cow::Borrowed(&call.id)),
        kind: Some(call.kind),
        function: Some(wire::Function {
            name: Some(Cow::Borrowed(&call.function.name)),
            arguments: Some(Cow::Borrowed(&call.function.arguments)),
        }),
    }
}

/// The reasoning's text, all blocks joined, when there is any.
fn reasoning_text(reasoning: &[Thinking]) -> Option<String> {
    let text: String = reasoning.iter().map(|t| t.text.as_str()).collect();
    (!text.is_empty()).then_some(text)
}

/// A block of reasoning as a `reasoning_details` entry.
fn detail_block(block: &Thinking, index: u32) -> ReasoningDetail<'_> {
    match &block.redacted {
        Some(data) => ReasoningDetail {
            kind: DETAIL_ENCRYPTED,
            data: Some(data),
            index,
            ..ReasoningDetail::default()
        },
        None => ReasoningDetail {
            kind: DETAIL_TEXT,
            text: Some(&block.text),
            signature: block.signature.as_deref(),
            index,
            ..ReasoningDetail::default()
        },
    }
}

/// Where a stream's reasoning is: which block, and whether that block has
/// been closed (by its signature, or being an encrypted block).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
enum ReasoningBlock {
    #[default]
    None,
    Open(u32),
    Closed(u32),
}

impl ReasoningBlock {
    /// The index of a piece of `delta`, moving on to a new block as needed.
    fn advance(&mut self, delta: Reasoning<'_>) -> u32 {
        let (index, next) = match (*self, delta) {
            (ReasoningBlock::None, Reasoning::Signature(_) | Reasoning::Redacted(_)) => {
                (0, ReasoningBlock::Closed(0))
            }
            (ReasoningBlock::None, Reasoning::Text(_)) => (0, ReasoningBlock::Open(0)),
            (ReasoningBlock::Open(n), Reasoning::Text(_)) => (n, ReasoningBlock::Open(n)),
            (ReasoningBlock::Open(n), Reasoning::Signature(_)) => (n, ReasoningBlock::Closed(n)),
            (ReasoningBlock::Closed(n), Reasoning::Text(_)) => (n + 1, ReasoningBlock::Open(n + 1)),
            (ReasoningBlock::Open(n) | ReasoningBlock::Closed(n), _) => {
                (n + 1, ReasoningBlock::Closed(n + 1))
            }
        };
        *self = next;
        index
    }
}

/// The `chat.completion.chunk` stream: one chunk per event, `[DONE]` at the end.
struct ChatChunks {
    /// The client asked for usage: `"usage": null` on every chunk (as
    /// OpenAI sends it then) and the usage chunk before `[DONE]`.
    include_usage: bool,
    /// Every chunk's opening, up to its `choices`, for the origin it was made from.
    head: ChunkHead,
    /// The reasoning block the next piece belongs to.
    reasoning: ReasoningBlock,
    /// The choice the events belong to (`n` > 1).
    choice: u32,
    /// Each choice's reasoning block, the current one's in `reasoning`
    /// (`None`: the choice has not been opened): allocated at the first
    /// change of choice only.
    others: Vec<Option<ReasoningBlock>>,
}

/// `data: {"id":…,"object":"chat.completion.chunk","created":…,"model":…,"provider":…,"choices":[`,
/// the same in every chunk of a stream: written once, copied per chunk.
#[derive(Debug, Default)]
struct ChunkHead {
    origin: Origin,
    bytes: Vec<u8>,
}

impl ChatChunks {
    /// Appends the chunk head for the current origin (dialects set the
    /// origin from the vendor's first events, so it is checked each time).
    fn write_head(&mut self, origin: &Origin, out: &mut Vec<u8>) -> serde_json::Result<()> {
        if self.head.bytes.is_empty() || self.head.origin != *origin {
            let head = wire::Chunk {
                id: Cow::Borrowed(&origin.id),
                object: "chat.completion.chunk",
                created: origin.created,
                model: Cow::Borrowed(&origin.model),
                provider: &origin.provider,
                ..wire::Chunk::default()
            };
            let mut bytes = b"data: ".to_vec();
            serde_json::to_writer(&mut bytes, &head)?;
            // The chunk without choices ends `"choices":[]}`: the chunk goes on.
            if !bytes.ends_with(b",\"choices\":[]}") {
                return Err(serde::ser::Error::custom(
                    "a chunk head ends with its choices",
                ));
            }
            bytes.truncate(bytes.len() - 2);
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
        origin: &Origin,
        out: &mut Vec<u8>,
        tail: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
    ) {
        let start = out.len();
        match self.write_head(origin, out).and_then(|()| tail(out)) {
            Ok(()) => out.extend_from_slice(b"}\n\n"),
            Err(_) => out.truncate(start),
        }
    }

    /// A chunk with one choice (and `"usage": null` when the client asked
    /// for usage: OpenAI sends the field on every chunk then).
    fn write_choice(
        &mut self,
        origin: &Origin,
        out: &mut Vec<u8>,
        delta: Delta<'_>,
        finish: Option<FinishReason>,
    ) {
        let choice = wire::ChunkChoice {
            index: self.choice,
            delta: Some(delta),
            logprobs: (),
            finish_reason: finish,
            content_filter_results: None,
        };
        let usage_null = self.include_usage;
        self.write_chunk(origin, out, |out| {
            serde_json::to_writer(&mut *out, &choice)?;
            out.push(b']');
            if usage_null {
                out.extend_from_slice(b",\"usage\":null");
            }
            Ok(())
        });
    }

    fn tool_call(&mut self, origin: &Origin, out: &mut Vec<u8>, call: wire::ToolCall<'_>) {
        let delta = Delta {
            tool_calls: Some(Cow::Borrowed(std::slice::from_ref(&call))),
            ..Delta::default()
        };
        self.write_choice(origin, out, delta, None);
    }
}

impl StreamEncoder for ChatChunks {
    /// OpenAI's first chunk carries only the role.
    fn start(&mut self, origin: &Origin, out: &mut Vec<u8>) {
        let role = Delta {
            role: Some("assistant"),
            content: Some(Cow::Borrowed("")),
            refusal: Some(None),
            ..Delta::default()
        };
        self.write_choice(origin, out, role, None);
    }

    fn text(&mut self, origin: &Origin, out: &mut Vec<u8>, text: &str) {
        let delta = Delta {
            content: Some(Cow::Borrowed(text)),
            ..Delta::default()
        };
        self.write_choice(origin, out, delta, None);
    }

    fn reasoning(&mut self, origin: &Origin, out: &mut Vec<u8>, delta: Reasoning<'_>) {
        let index = self.reasoning.advance(delta);
        let (reasoning_content, detail) = match delta {
            Reasoning::Text(text) => (
                Some(Cow::Borrowed(text)),
                ReasoningDetail {
                    kind: DETAIL_TEXT,
                    text: Some(text),
                    index,
                    ..ReasoningDetail::default()
                },
            ),
            Reasoning::Signature(signature) => (
                None,
                ReasoningDetail {
                    kind: DETAIL_TEXT,
                    signature: Some(signature),
                    index,
                    ..ReasoningDetail::default()
                },
            ),
            Reasoning::Redacted(data) => (
                None,
                ReasoningDetail {
                    kind: DETAIL_ENCRYPTED,
                    data: Some(data),
                    index,
                    ..ReasoningDetail::default()
                },
            ),
        };
        let delta = Delta {
            reasoning_content,
            reasoning_details: Some(std::slice::from_ref(&detail)),
            ..Delta::default()
        };
        self.write_choice(origin, out, delta, None);
    }

    fn tool_call_start(
        &mut self,
        origin: &Origin,
        out: &mut Vec<u8>,
        index: u32,
        id: &str,
        name: &str,
    ) {
        let call = wire::ToolCall {
            index: Some(index.into()),
            id: Some(Cow::Borrowed(id)),
            kind: Some("function"),
            function: Some(wire::Function {
                name: Some(Cow::Borrowed(name)),
                arguments: Some(Cow::Borrowed("")),
            }),
        };
        self.tool_call(origin, out, call);
    }

    fn tool_call_arguments(
        &mut self,
        origin: &Origin,
        out: &mut Vec<u8>,
        index: u32,
        fragment: &str,
    ) {
        let call = wire::ToolCall {
            index: Some(index.into()),
            function: Some(wire::Function {
                name: None,
                arguments: Some(Cow::Borrowed(fragment)),
            }),
            ..wire::ToolCall::default()
        };
        self.tool_call(origin, out, call);
    }

    fn finish(&mut self, origin: &Origin, out: &mut Vec<u8>, reason: FinishReason) {
        self.write_choice(origin, out, Delta::default(), Some(reason));
    }

    /// A choice's first chunk carries its role, as choice 0's does.
    fn choice(&mut self, origin: &Origin, out: &mut Vec<u8>, index: u32) {
        let (Ok(from), Ok(to)) = (usize::try_from(self.choice), usize::try_from(index)) else {
            return;
        };
        if self.others.len() <= from.max(to) {
            self.others.resize(from.max(to) + 1, None);
        }
        if let Some(slot) = self.others.get_mut(from) {
            *slot = Some(self.reasoning);
        }
        self.choice = index;
        match self.others.get_mut(to).and_then(Option::take) {
            Some(block) => self.reasoning = block,
            None => {
                self.reasoning = ReasoningBlock::None;
                self.start(origin, out);
            }
        }
    }

    /// The usage chunk if the client asked, then `[DONE]`.
    fn done(&mut self, origin: &Origin, out: &mut Vec<u8>, usage: Option<&Usage>) {
        if let Some(usage) = usage.filter(|_| self.include_usage) {
            self.write_chunk(origin, out, |out| {
                out.extend_from_slice(b"],\"usage\":");
                serde_json::to_writer(out, &wire::Usage::from(usage))
            });
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
    }

    /// One `data: {"error": ...}` event.
    fn error(&mut self, out: &mut Vec<u8>, error: &GatewayError, request_id: &str) {
        write_data(
            out,
            &crate::wire::openai_chat::render_error(error, Some(request_id)),
        );
    }

    fn passthrough(&mut self, out: &mut Vec<u8>, event: &Passed) {
        write_data(out, event.data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Api;
    use serde_json::Value;

    fn events(out: &[u8]) -> Vec<Value> {
        std::str::from_utf8(out)
            .unwrap()
            .split("\n\n")
            .filter(|e| !e.is_empty() && *e != "data: [DONE]")
            .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
            .collect()
    }

    /// A Chat Completions stream writer for [`origin`] (usage asked for or not).
    fn writer(include_usage: bool) -> crate::model::stream::EventWriter {
        crate::surfaces::stream_writer(
            Api::OpenAiChat,
            false,
            origin(),
            "r".into(),
            include_usage,
            &SurfaceState::default(),
        )
    }

    fn origin() -> Origin {
        Origin {
            id: "chatcmpl-1".into(),
            created: 1,
            model: "m".into(),
            provider: "p".into(),
            stop_sequence: None,
        }
    }

    #[test]
    fn stream_contract() {
        let mut w = writer(true);
        let mut out = Vec::new();
        w.content(&mut out, "Hi");
        w.tool_call_start(&mut out, 0, "call_1", "f");
        w.tool_call_arguments(&mut out, 0, "{\"a\"");
        w.finish(&mut out, FinishReason::ToolCalls);
        w.set_usage(Some(Usage {
            prompt_tokens: 3,
            completion_tokens: 4,
            ..Usage::default()
        }));
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
        let mut w = writer(true);
        let mut out = Vec::new();
        w.content(&mut out, "a\"b");
        // A vendor event names the answer's id and model after the first chunk.
        w.set_id("msg_\"2");
        w.set_model("m2");
        w.finish(&mut out, FinishReason::Stop);
        w.set_usage(Some(Usage {
            prompt_tokens: 1,
            completion_tokens: 2,
            ..Usage::default()
        }));
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
        let mut w = writer(false);
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
        let mut w = writer(false);
        w.content(&mut out, "x");
        assert!(w.content_started());
    }

    #[test]
    fn tool_calls_are_numbered_in_order_of_appearance() {
        let mut w = writer(false);
        let mut out = Vec::new();
        // Vendor keys (content block indices) 7 and 3: client indices 0 and 1.
        w.tool_call_start(&mut out, 7, "call_a", "f");
        w.tool_call_start(&mut out, 3, "call_b", "g");
        w.tool_call_start(&mut out, 7, "call_again", "f"); // a key started twice
        w.tool_call_arguments(&mut out, 3, "{}");
        w.tool_call_arguments(&mut out, 9, "{\"never\":1}"); // a key never started
        w.tool_call_arguments(&mut out, 7, "[]");
        let calls: Vec<Value> = events(&out)[1..]
            .iter()
            .map(|e| e["choices"][0]["delta"]["tool_calls"][0].clone())
            .collect();
        assert_eq!(calls.len(), 4);
        assert_eq!(
            (calls[0]["index"].clone(), calls[0]["id"].clone()),
            (0.into(), "call_a".into())
        );
        assert_eq!(
            (calls[1]["index"].clone(), calls[1]["id"].clone()),
            (1.into(), "call_b".into())
        );
        assert_eq!(
            calls[2],
            serde_json::json!({"index":1,"function":{"arguments":"{}"}})
        );
        assert_eq!(
            calls[3],
            serde_json::json!({"index":0,"function":{"arguments":"[]"}})
        );
        assert_eq!(w.tool_calls(), 2);
    }

    #[test]
    fn reasoning_deltas_carry_their_block() {
        let mut w = writer(false);
        let mut out = Vec::new();
        w.reasoning(&mut out, Reasoning::Text("a"));
        w.reasoning(&mut out, Reasoning::Text("b"));
        w.reasoning(&mut out, Reasoning::Signature("s1"));
        w.reasoning(&mut out, Reasoning::Redacted("enc"));
        w.reasoning(&mut out, Reasoning::Text("c"));
        w.reasoning(&mut out, Reasoning::Signature("s2"));
        let deltas: Vec<Value> = events(&out)[1..]
            .iter()
            .map(|e| e["choices"][0]["delta"].clone())
            .collect();
        assert_eq!(
            deltas,
            [
                serde_json::json!({"reasoning_content":"a","reasoning_details":[{"type":"reasoning.text","text":"a","index":0}]}),
                serde_json::json!({"reasoning_content":"b","reasoning_details":[{"type":"reasoning.text","text":"b","index":0}]}),
                serde_json::json!({"reasoning_details":[{"type":"reasoning.text","signature":"s1","index":0}]}),
                serde_json::json!({"reasoning_details":[{"type":"reasoning.encrypted","data":"enc","index":1}]}),
                serde_json::json!({"reasoning_content":"c","reasoning_details":[{"type":"reasoning.text","text":"c","index":2}]}),
                serde_json::json!({"reasoning_details":[{"type":"reasoning.text","signature":"s2","index":2}]}),
            ]
        );
        // What a client appends from these deltas parses back into the blocks.
        let details: Vec<Value> = deltas
            .iter()
            .flat_map(|d| d["reasoning_details"].as_array().unwrap().clone())
            .collect();
        let body = serde_json::json!({"model": "m", "messages": [
            {"role": "assistant", "content": "x", "reasoning_details": details}]});
        let request = ChatRequest::parse(body.to_string().as_bytes()).unwrap();
        let crate::model::request::Message::Assistant { reasoning, .. } = &request.messages[0]
        else {
            panic!("{:?}", request.messages[0]);
        };
        let mut expected = Vec::new();
        for piece in [
            Reasoning::Text("ab"),
            Reasoning::Signature("s1"),
            Reasoning::Redacted("enc"),
            Reasoning::Text("c"),
            Reasoning::Signature("s2"),
        ] {
            piece.push_to(&mut expected);
        }
        assert_eq!(reasoning, &expected);
    }

    #[test]
    fn completion_reasoning_round_trips() {
        let mut reasoning = Vec::new();
        for piece in [
            Reasoning::Text("think"),
            Reasoning::Signature("sig"),
            Reasoning::Redacted("enc"),
        ] {
            piece.push_to(&mut reasoning);
        }
        let c = Completion {
            reasoning: reasoning.clone(),
            content: Some("hello".into()),
            ..Completion::default()
        };
        let v: Value = serde_json::from_slice(&render_completion(&c, &origin())).unwrap();
        let message = &v["choices"][0]["message"];
        assert_eq!(message["reasoning_content"], "think");
        assert_eq!(
            message["reasoning_details"],
            serde_json::json!([
                {"type": "reasoning.text", "text": "think", "signature": "sig", "index": 0},
                {"type": "reasoning.encrypted", "data": "enc", "index": 1}])
        );
        // The message sent back as it came gives the same blocks.
        let body = serde_json::json!({"model": "m", "messages": [message]});
        let request = ChatRequest::parse(body.to_string().as_bytes()).unwrap();
        assert!(matches!(
            &request.messages[0],
            crate::model::request::Message::Assistant { reasoning: r, .. } if *r == reasoning
        ));
    }

    #[test]
    fn no_usage_chunk_unless_asked() {
        let mut w = writer(false);
        w.set_usage(Some(Usage::default()));
        let mut out = Vec::new();
        w.start(&mut out);
        w.done(&mut out);
        assert_eq!(events(&out).len(), 1);
    }

    #[test]
    fn completion_json() {
        let c = Completion {
            more: Vec::new(),
            reasoning: vec![],
            content: Some("hello".into()),
            tool_calls: vec![ToolCallOut::new("t1".into(), "f".into(), "{}".into())],
            finish_reason: Some(FinishReason::ToolCalls),
            usage: Some(Usage {
                prompt_tokens: 1,
                completion_tokens: 2,
                cached_tokens: Some(1),
                reasoning_tokens: None,
                cache_write_tokens: None,
            }),
        };
        let v: Value = serde_json::from_slice(&render_completion(&c, &origin())).unwrap();
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
