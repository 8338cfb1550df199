//! Vendor dialects: one module each, behind one small interface.
//!
//! A dialect is a body format (encoding requests, decoding answers and
//! streams) and its own settings ([`settings`]: keys the provider's
//! configuration carries for it, read and validated by the dialect). How a
//! body reaches the vendor is apart, in [`transport`]: the URL path and
//! query, auth and version headers, each a [`transport::Transport`] (a
//! trait object per vendor API) that the encoders ask with an
//! [`transport::Operation`] ("a generation, streamed"), so one body format
//! goes over several transports (Gemini's to Google AI or Vertex AI).
//!
//! Adding a vendor is adding a file here and a line in [`DialectKind`],
//! [`dialect`] and [`transport::of`]; adding a transport for a body format
//! that exists is a module in `transport/` and those registry lines.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{ErrorCode, GatewayError};
use crate::formats::sse::SseParser;
use crate::model::call::{Call, CallOp};
use crate::model::request::{ChatRequest, ResponseFormat, ToolCall};
use crate::model::response::{Answer, Completion, FinishReason, Origin, Usage};
use crate::model::stream::EventWriter;
use crate::model::Api;
pub use crate::provider::DialectKind;
use crate::provider::Provider;

pub mod anthropic;
pub mod azure;
pub mod bedrock;
pub mod bedrock_invoke;
pub mod count;
pub mod dashscope;
pub mod embed;
pub mod gemini;
pub mod list;
pub mod openai;
pub mod settings;
#[cfg(test)]
mod shared_tests;
pub mod stream;
pub mod transport;
pub mod whole;

pub use stream::{incomplete_stream, Events, StreamDecoder};

/// The SSE plumbing the SSE dialects share.
pub type SseStream<H> = stream::FramedStream<SseParser, H>;

pub fn dialect(kind: DialectKind) -> &'static dyn Dialect {
    match kind {
        DialectKind::Openai => &openai::OpenAi,
        DialectKind::Anthropic => &anthropic::Anthropic,
        DialectKind::Gemini => &gemini::Gemini,
        DialectKind::Azure => &azure::Azure,
        DialectKind::Bedrock => &bedrock::Bedrock,
        DialectKind::Dashscope => &dashscope::DashScope,
        // Vertex AI: the body formats above over Vertex's transport.
        DialectKind::VertexGemini => &gemini::Gemini,
        DialectKind::VertexAnthropic => &anthropic::Anthropic,
    }
}

/// The client's request as a pass-through pair reads it, each part only
/// when asked: its body, and its headers (a vendor may want one in the
/// body: InvokeModel's `anthropic_beta`).
pub struct ClientRequest<'a> {
    pub body: &'a dyn Fn() -> Vec<u8>,
    pub header: &'a dyn Fn(&str) -> Option<Vec<u8>>,
}

/// Where one attempt goes: the provider the endpoint names and the vendor model.
pub struct Target<'a> {
    pub provider: &'a Provider,
    pub model: &'a str,
}

/// A request in the vendor's dialect.
#[derive(Debug)]
pub struct UpstreamRequest {
    /// `:path`, including any query string.
    pub path: String,
    /// Headers to set (auth, version); every vendor auth header is removed first.
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// A decoded non-stream response and the facts the session meters.
#[derive(Debug)]
pub struct DecodedResponse {
    pub answer: Answer,
    pub usage: Option<Usage>,
    pub finish_reason: Option<FinishReason>,
}

impl DecodedResponse {
    /// A vendor answer decoded into the neutral completion.
    pub fn decoded(completion: Completion) -> Self {
        Self {
            usage: completion.usage,
            finish_reason: completion.finish_reason,
            answer: Answer::Decoded(completion),
        }
    }
}

pub trait Dialect: Sync {
    /// Whether this vendor speaks client API `api` itself: a client
    /// speaking it is a pass-through pair, its answers edited, not rebuilt.
    fn speaks(&self, _api: Api) -> bool {
        false
    }

    /// Whether `provider` serves client API `api` itself, as its settings
    /// have it: by default wherever the dialect speaks it.
    fn serves(&self, api: Api, _provider: &Provider) -> bool {
        self.speaks(api)
    }

    /// The provider keys this dialect reads as its settings.
    fn settings_keys(&self) -> &'static [settings::Key] {
        &[]
    }

    /// Reads and validates this dialect's keys (`members`, only its own)
    /// of provider `field` (which errors name) into its typed settings.
    fn read_settings(
        &self,
        _members: Map<String, Value>,
        _field: &str,
    ) -> Result<Option<Box<dyn crate::provider::DialectSettings>>, String> {
        Ok(None)
    }

    /// Whether `encode_request` gives the vendor the request's web search
    /// (`ChatRequest::web_search`) as its own search tool; otherwise the
    /// search is left out and the answer says so (`x-llm-dropped-tools`).
    /// `model` is the vendor model (what a vendor takes can depend on it).
    fn web_search(&self, _req: &ChatRequest, _model: &str) -> bool {
        false
    }

    /// The vendor request for a client speaking `api`, one of this vendor's
    /// own APIs (see [`Self::speaks`]), made from the client's request
    /// (model mapped, bytes otherwise kept); `None` when the dialect
    /// encodes the neutral request instead.
    fn encode_native(
        &self,
        _api: Api,
        _client: &ClientRequest,
        _req: &ChatRequest,
        _target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        None
    }

    fn encode_request(
        &self,
        req: &ChatRequest,
        target: &Target,
    ) -> Result<UpstreamRequest, GatewayError>;

    /// The vendor request for a native call of `call.api`, one of this
    /// vendor's own APIs: its path and auth, and for a call with a body the
    /// client's (`raw` reads it), model mapped. The method is the client's.
    /// `None` when this vendor has no such call (the gateway answers it).
    fn encode_call(
        &self,
        _call: &Call,
        _raw: &dyn Fn() -> Vec<u8>,
        _target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>> {
        None
    }

    /// The embeddings operation, for a vendor that embeds.
    fn embedder(&self) -> Option<&dyn embed::Embedder> {
        None
    }

    /// The token count, for a vendor that counts tokens with a call of
    /// its own taking its generation body (Anthropic's
    /// `/v1/messages/count_tokens`, Gemini's `countTokens`, Bedrock's
    /// `CountTokens`): a count goes to it translated wherever its API is
    /// not the client's.
    fn counter(&self) -> Option<&dyn count::Counter> {
        None
    }

    /// A client header this vendor takes from a client speaking `api`
    /// although the gateway withholds it from vendors by default (the
    /// Anthropic dialect: `anthropic-beta` from a Messages client).
    fn takes_client_header(&self, _api: Api, _name: &[u8]) -> bool {
        false
    }

    /// Decodes a 2xx body into the neutral answer. `origin` comes filled
    /// with provider, requested model and time; the dialect sets the id and
    /// the model that answered.
    fn decode_response(
        &self,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError>;

    /// The same for a client speaking `api`, one of this vendor's own
    /// APIs: the vendor's answer edited ([`Answer::Native`]).
    fn decode_native(
        &self,
        _api: Api,
        body: &[u8],
        origin: &mut Origin,
    ) -> Result<DecodedResponse, GatewayError> {
        self.decode_response(body, origin)
    }

    /// A decoder for this vendor's stream, writing through `writer`.
    fn stream_decoder(&self, writer: EventWriter) -> Box<dyn StreamDecoder>;

    /// Whether a 2xx answer with this content type is the stream we asked for.
    fn is_stream_content_type(&self, content_type: &str) -> bool {
        content_type.starts_with("text/event-stream")
    }

    /// Maps a non-2xx vendor response to the unified error.
    fn decode_error(&self, status: u16, body: &[u8]) -> GatewayError;
}

/// Whether a client speaking `api` and this provider are a pass-through
/// pair: the vendor speaks the client's API and the provider serves it.
pub fn pass_through(provider: &Provider, dialect: &dyn Dialect, api: Api) -> bool {
    dialect.speaks(api) && dialect.serves(api, provider)
}

/// One attempt's vendor request, as [`encode_generation`] decided it.
#[derive(Debug)]
pub struct Encoded {
    pub request: UpstreamRequest,
    /// The client's bytes kept (a pass-through pair), not re-encoded.
    pub native: bool,
    /// The request's web search was left out (no search tool at this vendor).
    pub dropped_web_search: bool,
}

/// The one decision of what a generation request of client API `api`
/// becomes at `target`: the provider's request policy for the vendor
/// model, then the client's bytes (a pass-through pair whose dialect keeps
/// them), a refusal (what only the client API's own vendors serve), or the
/// dialect's encoding of the neutral request. The upstream role and the
/// golden tests both call it.
pub fn encode_generation(
    api: Api,
    client: &ClientRequest,
    request: &ChatRequest,
    target: &Target,
) -> Result<Encoded, GatewayError> {
    let dialect = dialect(target.provider.dialect);
    // What this vendor model accepts (e.g. OpenAI's reasoning models:
    // max_completion_tokens, no temperature): copied only when changed.
    let adapted = target.provider.apply_policy(target.model, request);
    let request = adapted.as_ref().unwrap_or(request);
    let native = pass_through(target.provider, dialect, api)
        .then(|| dialect.encode_native(api, client, request, target))
        .flatten();
    match native {
        Some(encoded) => Ok(Encoded {
            request: encoded?,
            native: true,
            dropped_web_search: false,
        }),
        None => translate(dialect, request, target),
    }
}

/// [`encode_generation`] translated even where the vendor speaks the
/// client's API: the response cache's misses, whose answers it reads
/// through the neutral model (src/cache).
pub fn encode_translated(request: &ChatRequest, target: &Target) -> Result<Encoded, GatewayError> {
    let adapted = target.provider.apply_policy(target.model, request);
    let request = adapted.as_ref().unwrap_or(request);
    translate(dialect(target.provider.dialect), request, target)
}

/// The dialect's encoding of the neutral request (after the request
/// policy), or the refusal of what only the client API's own vendors serve.
fn translate(
    dialect: &dyn Dialect,
    request: &ChatRequest,
    target: &Target,
) -> Result<Encoded, GatewayError> {
    if let Some(native_only) = &request.native_only {
        return Err(native_only.error());
    }
    Ok(Encoded {
        request: dialect.encode_request(request, target)?,
        native: false,
        dropped_web_search: request.web_search.is_some()
            && !dialect.web_search(request, target.model),
    })
}

/// The embeddings of `provider` (of dialect `dialect`): its transport's
/// own (Vertex AI's `:predict`), else its body format's.
pub fn embedder<'a>(
    dialect: &'a dyn Dialect,
    provider: &Provider,
) -> Option<&'a dyn embed::Embedder> {
    transport::of(provider.dialect)
        .embedder()
        .or_else(|| dialect.embedder())
}

/// Whether `provider` (of dialect `dialect`) answers call `call` itself:
/// embeddings where it embeds, others in the client's own API, or
/// (count_tokens) with its own count.
pub fn has_call(dialect: &dyn Dialect, provider: &Provider, call: &Call) -> bool {
    match call.op {
        CallOp::Embeddings => embedder(dialect, provider).is_some(),
        CallOp::CountTokens => {
            pass_through(provider, dialect, call.api) || dialect.counter().is_some()
        }
        CallOp::Stored { .. } => pass_through(provider, dialect, call.api),
    }
}

/// Whether a Claude model (on Anthropic's API or Bedrock) has extended
/// thinking: every one since 3.7 Sonnet; the older ones refuse the
/// `thinking` field, so a request asking them to think is answered
/// without thinking.
pub fn claude_thinks(model: &str) -> bool {
    const BEFORE_THINKING: [&str; 6] = [
        "claude-instant",
        "claude-2",
        "claude-3-haiku",
        "claude-3-sonnet",
        "claude-3-opus",
        "claude-3-5-",
    ];
    !BEFORE_THINKING.iter().any(|old| model.contains(old))
}

/// The 400 for a document part sent to a vendor that takes none.
pub fn no_documents(i: usize, j: usize) -> GatewayError {
    GatewayError::invalid(
        format!("messages[{i}].content[{j}]"),
        "this model group's provider does not accept document content",
    )
}

/// The first document part of a request, refused (for vendors that take none).
pub fn refuse_documents(req: &ChatRequest) -> Result<(), GatewayError> {
    for (i, message) in req.messages.iter().enumerate() {
        if let crate::model::request::Message::User {
            content: crate::model::request::Content::Parts(parts),
            ..
        } = message
        {
            if let Some(j) = parts
                .iter()
                .position(|p| matches!(p, crate::model::request::ContentPart::Document(_)))
            {
                return Err(no_documents(i, j));
            }
        }
    }
    Ok(())
}

/// A vendor's error message, or a generic one when the body says nothing useful.
pub fn fallback_message(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() || text.len() > 512 {
        format!("the provider answered HTTP {status}")
    } else {
        format!("the provider answered HTTP {status}: {text}")
    }
}

/// An assistant tool call's arguments as the JSON object vendors with typed
/// tool input want; `i`, `j` locate the call for the error.
pub fn tool_arguments(call: &ToolCall, i: usize, j: usize) -> Result<Value, GatewayError> {
    let args = call.function.arguments.trim();
    if args.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(GatewayError::invalid(
            format!("messages[{i}].tool_calls[{j}].function.arguments"),
            "tool call arguments must be a JSON object",
        )),
    }
}

/// What becomes of one top-level member of a JSON object ([`edit_members`]).
pub enum Member<'a> {
    Keep,
    Drop,
    /// Its value replaced by this JSON text.
    Replace(&'a str),
}

/// A client's JSON object with its top-level members edited in place
/// (`edit` is asked once per member, by key) and `first` (whole members as
/// JSON text, e.g. `"a":1`, or nothing) put first; every other byte is kept,
/// so a pass-through body reaches the vendor as the client wrote it.
pub fn edit_members<'m>(
    body: &[u8],
    first: &str,
    mut edit: impl FnMut(&str) -> Member<'m>,
) -> Result<Vec<u8>, GatewayError> {
    use serde::de::{MapAccess, Visitor};
    use serde_json::value::RawValue;
    use std::borrow::Cow;
    /// Each top-level member: its key and its value's bytes.
    struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);
    impl<'de> serde::Deserialize<'de> for Members<'de> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Members<'de>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                    let mut members = Vec::new();
                    while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                        members.push((key, map.next_value()?));
                    }
                    Ok(Members(members))
                }
            }
            d.deserialize_map(V)
        }
    }
    let invalid = |e: String| GatewayError::invalid("body", format!("invalid request body: {e}"));
    let text = std::str::from_utf8(body).map_err(|e| invalid(e.to_string()))?;
    let Members(members) = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let open = text
        .find('{')
        .ok_or_else(|| invalid("not an object".into()))?;
    let mut out = Vec::with_capacity(body.len() + first.len() + 1);
    out.extend_from_slice(body.get(..=open).unwrap_or_default());
    out.extend_from_slice(first.as_bytes());
    let mut wrote = !first.is_empty();
    // Where the previous member's value ended, and whether it was written.
    let (mut prev, mut prev_written) = (open + 1, true);
    for (index, (key, value)) in members.iter().enumerate() {
        let start = (value.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
        let end = start + value.get().len();
        let decision = edit(key);
        if !matches!(decision, Member::Drop) {
            let gap = body.get(prev..start).unwrap_or_default();
            if prev_written && (index > 0 || !wrote) {
                // Right after what was written: the separator as it came.
                out.extend_from_slice(gap);
            } else {
                // The member's own text, after the separator of a dropped
                // member (or of none, the first one).
                let own = match index {
                    0 => gap,
                    _ => gap
                        .iter()
                        .position(|&b| b == b',')
                        .and_then(|comma| gap.get(comma + 1..))
                        .unwrap_or(gap),
                };
                if wrote {
                    out.push(b',');
                }
                out.extend_from_slice(own);
            }
            match decision {
                Member::Replace(json) => out.extend_from_slice(json.as_bytes()),
                _ => out.extend_from_slice(value.get().as_bytes()),
            }
            wrote = true;
        }
        prev_written = !matches!(decision, Member::Drop);
        prev = end;
    }
    out.extend_from_slice(body.get(prev..).unwrap_or_default());
    Ok(out)
}

/// For vendors that answer with one choice only: `n` > 1 is refused before
/// any vendor is called.
pub fn single_choice(req: &ChatRequest) -> Result<(), GatewayError> {
    if req.n.is_some_and(|n| n > 1) {
        return Err(GatewayError::invalid(
            "n",
            "n > 1 is not supported by this provider",
        ));
    }
    Ok(())
}

/// A vendor's `count` choices, each put in its place by its index: an
/// index out of the answer's range, or twice, is the vendor's error.
/// `what` names them in the vendor's words (`choice`, `candidate`).
pub fn choices_in_place(
    count: usize,
    numbered: impl IntoIterator<Item = (usize, crate::model::response::Choice)>,
    what: &str,
) -> Result<Vec<crate::model::response::Choice>, GatewayError> {
    let mut slots: Vec<Option<crate::model::response::Choice>> = Vec::new();
    slots.resize_with(count, || None);
    for (index, choice) in numbered {
        match slots.get_mut(index) {
            Some(slot @ None) => *slot = Some(choice),
            _ => {
                return Err(unparseable(
                    "response",
                    format!("{what} index {index} of {count} {what}s"),
                ))
            }
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

/// A vendor request body as JSON, its buffer sized once from the unified
/// body's length (growing a 100 KB body by doubling copies it ten times).
pub fn encode_json(req: &ChatRequest, body: &impl Serialize) -> Result<Vec<u8>, GatewayError> {
    let mut out = Vec::with_capacity(req.source_len.saturating_add(512));
    serde_json::to_writer(&mut out, body).map_err(|e| {
        GatewayError::new(
            ErrorCode::InvalidRequest,
            format!("request could not be encoded: {e}"),
        )
    })?;
    Ok(out)
}

/// The dialects' name for it (`crate::error::unparseable`).
pub use crate::error::unparseable;

/// For vendors without a JSON mode: the system-prompt instruction that asks for JSON.
pub fn json_instruction(format: Option<&ResponseFormat>) -> Option<String> {
    const JSON_ONLY: &str = "Respond with a single valid JSON object and nothing else.";
    match format? {
        ResponseFormat::JsonObject => Some(JSON_ONLY.to_owned()),
        ResponseFormat::JsonSchema { json_schema } => {
            let schema = json_schema
                .schema
                .as_ref()
                .map(serde_json::Value::to_string)
                .unwrap_or_default();
            Some(format!(
                "{JSON_ONLY} It must conform to this JSON schema: {schema}"
            ))
        }
        ResponseFormat::Text => None,
    }
}

#[cfg(test)]
impl DecodedResponse {
    /// The answer as the chat surface renders it.
    pub(crate) fn chat_json(&self, origin: &Origin) -> serde_json::Value {
        let surface = crate::surfaces::surface(Api::OpenAiChat);
        serde_json::from_slice(&surface.render_answer(
            self.answer.clone(),
            origin,
            &crate::model::surface_state::SurfaceState::default(),
        ))
        .unwrap()
    }
}

/// Test helper shared by the dialects' tests: encodes a client request
/// for a provider with these settings (JSON) and vendor model; the vendor
/// request and its body as JSON, or the error the gateway answers instead.
#[cfg(test)]
pub(crate) fn encode_for(
    dialect: &dyn Dialect,
    provider: &str,
    model: &str,
    body: &str,
) -> Result<(UpstreamRequest, Value), GatewayError> {
    let config = crate::config::Config::parse(
        format!(
            r#"{{"providers":{{"p":{provider}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#
        )
        .as_bytes(),
        |_| None,
    )
    .unwrap();
    let request = ChatRequest::parse(body.as_bytes())?;
    let target = Target {
        provider: &config.providers["p"],
        model,
    };
    let up = dialect.encode_request(&request, &target)?;
    let v = serde_json::from_slice(&up.body).unwrap();
    Ok((up, v))
}

/// Test helper shared by the dialects' tests: runs a stream through a
/// dialect's decoder, chunk by chunk; returns the unified events and the raw text.
#[cfg(test)]
pub(crate) fn run_stream(
    dialect: &dyn Dialect,
    origin: Origin,
    chunks: &[&[u8]],
    include_usage: bool,
) -> (Vec<serde_json::Value>, String) {
    run_stream_choices(dialect, origin, chunks, include_usage, 1)
}

/// [`run_stream`] for a client that asked for `choices` choices.
#[cfg(test)]
pub(crate) fn run_stream_choices(
    dialect: &dyn Dialect,
    origin: Origin,
    chunks: &[&[u8]],
    include_usage: bool,
    choices: u32,
) -> (Vec<serde_json::Value>, String) {
    let writer = crate::surfaces::stream_writer(
        Api::OpenAiChat,
        dialect.speaks(Api::OpenAiChat),
        origin,
        "rid".into(),
        include_usage,
        &crate::model::surface_state::SurfaceState::default(),
    )
    .with_choices(choices);
    let mut d = dialect.stream_decoder(writer);
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c, &mut out);
    }
    d.finish(&mut out);
    let text = String::from_utf8(out).unwrap();
    let events = text
        .split("\n\n")
        .filter(|e| !e.is_empty() && *e != "data: [DONE]")
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    (events, text)
}

#[cfg(test)]
mod web_search_tests {
    use super::*;
    use crate::model::request::WebSearch;

    fn request(tools: &str, domains: &[&str]) -> ChatRequest {
        let body =
            format!(r#"{{"model":"m","messages":[{{"role":"user","content":"news?"}}]{tools}}}"#);
        ChatRequest {
            web_search: Some(WebSearch {
                allowed_domains: domains.iter().map(|d| (*d).to_owned()).collect(),
                user_location: None,
            }),
            ..ChatRequest::parse(body.as_bytes()).unwrap()
        }
    }

    /// OpenAI and Azure get a Chat Completions client's `web_search_options`
    /// as the client wrote them, also where a request policy rewrites the
    /// request (`o3`: `max_completion_tokens`), and nothing is reported dropped.
    #[test]
    fn web_search_options_reach_openai_and_azure_as_written() {
        let options = serde_json::json!({
            "user_location": {"type": "approximate", "approximate": {"country": "FR", "city": "Lyon"}},
            "search_context_size": "low",
        });
        let body = serde_json::json!({
            "model": "g", "max_tokens": 50, "web_search_options": options,
            "messages": [{"role": "user", "content": "news?"}],
        })
        .to_string();
        let config = crate::config::Config::parse(
            br#"{"providers":{"o":{"dialect":"openai","api_key":"k"},"a":{"dialect":"azure","api_key":"k","api_version":"2024-10-21"}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap();
        let client = ClientRequest {
            body: &|| body.clone().into_bytes(),
            header: &|_| None,
        };
        let request = ChatRequest::parse(body.as_bytes()).unwrap();
        for (provider, model) in [("o", "gpt-4o"), ("o", "o3"), ("a", "gpt-4o"), ("a", "o3")] {
            let target = Target {
                provider: &config.providers[provider],
                model,
            };
            let encoded = encode_generation(Api::OpenAiChat, &client, &request, &target).unwrap();
            assert!(!encoded.dropped_web_search, "{provider} {model}");
            let v: Value = serde_json::from_slice(&encoded.request.body).unwrap();
            assert_eq!(v["web_search_options"], options, "{provider} {model}");
            let tokens = if model == "o3" {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            assert_eq!(v[tokens], 50, "{provider} {model}: the policy applied");
        }
    }

    #[test]
    fn web_search_is_the_vendors_own_where_it_has_one() {
        let f = r#","tools":[{"type":"function","function":{"name":"f"}}]"#;
        let named = r#","tools":[{"type":"function","function":{"name":"web_search"}}]"#;
        let cases = [
            // dialect, (alone, beside a function tool, with a domain filter, beside a tool named web_search)
            (DialectKind::Anthropic, [true, true, true, false]),
            (DialectKind::Gemini, [true, false, false, false]),
            (DialectKind::Dashscope, [true, true, false, true]),
            (DialectKind::Bedrock, [false; 4]),
            (DialectKind::Openai, [false; 4]),
            (DialectKind::Azure, [false; 4]),
        ];
        for (kind, want) in cases {
            let d = dialect(kind);
            let got = [
                d.web_search(&request("", &[]), "m"),
                d.web_search(&request(f, &[]), "m"),
                d.web_search(&request("", &["example.com"]), "m"),
                d.web_search(&request(named, &[]), "m"),
            ];
            assert_eq!(got, want, "{kind:?}");
            let mut none = request("", &[]);
            none.web_search = None;
            assert!(!d.web_search(&none, "m"), "{kind:?}: no search asked");
        }
        // A Chat Completions client's `web_search_options` are OpenAI's and
        // Azure's own search, sent as written; a search from elsewhere is not.
        let chat = ChatRequest::parse(
            br#"{"model":"m","messages":[{"role":"user","content":"news?"}],"web_search_options":{}}"#,
        )
        .unwrap();
        for kind in [DialectKind::Openai, DialectKind::Azure] {
            assert!(dialect(kind).web_search(&chat, "m"), "{kind:?}");
            let mut dropped = chat.clone();
            dropped.extra.remove("web_search_options");
            assert!(
                !dialect(kind).web_search(&dropped, "m"),
                "{kind:?}: dropped by a policy"
            );
        }
        // Gemini 3 takes its search beside function tools; 2.x does not.
        let gemini = dialect(DialectKind::Gemini);
        assert!(gemini.web_search(&request(f, &[]), "gemini-3-pro-preview"));
        assert!(!gemini.web_search(&request(f, &[]), "gemini-2.5-flash"));
        assert!(!gemini.web_search(&request(f, &["example.com"]), "gemini-3-pro-preview"));
        // Anthropic sends its search tool only where it has the name to itself.
        let config = crate::config::Config::parse(
            br#"{"providers":{"p":{"dialect":"anthropic","api_key":"k"}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap();
        let target = Target {
            provider: &config.providers["p"],
            model: "claude",
        };
        for (tools, want) in [(f, vec!["f", "web_search"]), (named, vec!["web_search"])] {
            let up = anthropic::Anthropic
                .encode_request(&request(tools, &[]), &target)
                .unwrap();
            let v: Value = serde_json::from_slice(&up.body).unwrap();
            let names: Vec<&str> = v["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, want);
        }
    }
}
