//! Calls: a client API's requests that are not generations (embeddings,
//! `POST /v1/messages/count_tokens`, the Responses API's stored-response
//! calls). They are routed like a generation, and passed to a vendor that
//! has the call in its own API, count_tokens also to one that counts
//! tokens its own way (Gemini, Bedrock: `Dialect::counter`), and
//! embeddings to every vendor that embeds (`Dialect::embedder`, which
//! translates them); elsewhere the gateway answers them itself. Which
//! request line is which call is its surface's to say (`Surface::route`).

use super::embed::{Embeddings, Encoding};
use super::request::ChatRequest;
use super::Api;
use crate::error::GatewayError;

/// One native call: the operation it asks, and what every operation
/// carries. What a client API says beyond that (Gemini's one embedding or
/// a batch) is its surface's to read back from the path it routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub op: CallOp,
    /// The API it came in on: its surface parses the body and renders the
    /// answer, and its errors are in this API's envelope.
    pub api: Api,
    /// The model the path names (Gemini's `models/{model}:countTokens`),
    /// percent-decoded; `None` where the body names it.
    pub model: Option<String>,
    /// The client's path, as a vendor of the client's API takes the call
    /// below its API's root.
    pub path: String,
    /// The query passed on with it (without `?`): the client's where its
    /// surface passes it on, else empty.
    pub query: String,
}

/// The operation a native call asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOp {
    /// Embeddings of a batch of inputs.
    Embeddings,
    /// The input tokens of a generation's request.
    CountTokens,
    /// A call on a response the vendor stored.
    Stored {
        op: StoredOp,
        /// The response id (`[A-Za-z0-9_-]`, so it is one path segment as it is).
        id: String,
    },
}

/// A call's answer, neutral: what the vendor (or the gateway) answered,
/// which the surface that parsed the call writes in its API's shape
/// (`Surface::render_call`). A call passed on as it is (its vendor speaks
/// the client's API) has none: the vendor's answer is the client's.
#[derive(Debug, Clone, PartialEq)]
pub enum CallAnswer {
    /// Embeddings, one vector per input in input order.
    Embeddings(Embedded),
    /// A token count: the request's input tokens.
    Count(u64),
}

/// Embeddings answered: the vectors, who made them and what they cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedded {
    pub embeddings: Embeddings,
    /// The vendor model that embedded (as the vendor's answer names it).
    pub model: String,
    /// The input tokens: the vendor's count, else the gateway's estimate.
    pub tokens: u64,
    /// How the client asked for the vectors to be written.
    pub encoding: Encoding,
}

/// The Responses API's calls on a stored response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredOp {
    /// `GET /v1/responses/{id}`
    Retrieve,
    /// `DELETE /v1/responses/{id}`
    Delete,
    /// `POST /v1/responses/{id}/cancel`
    Cancel,
    /// `GET /v1/responses/{id}/input_items`
    InputItems,
}

impl StoredOp {
    const ALL: [StoredOp; 4] = [
        StoredOp::Retrieve,
        StoredOp::Delete,
        StoredOp::Cancel,
        StoredOp::InputItems,
    ];

    fn name(self) -> &'static str {
        match self {
            StoredOp::Retrieve => "retrieve",
            StoredOp::Delete => "delete",
            StoredOp::Cancel => "cancel",
            StoredOp::InputItems => "input_items",
        }
    }

    fn method(self) -> &'static str {
        match self {
            StoredOp::Retrieve | StoredOp::InputItems => "GET",
            StoredOp::Delete => "DELETE",
            StoredOp::Cancel => "POST",
        }
    }

    /// The call as its documentation names it, e.g. `GET /v1/responses/{id}`.
    pub fn describe(self) -> String {
        format!("{} /v1/responses/{{id}}{}", self.method(), self.suffix())
    }

    /// What follows `/v1/responses/{id}` in its path.
    fn suffix(self) -> &'static str {
        match self {
            StoredOp::Retrieve | StoredOp::Delete => "",
            StoredOp::Cancel => "/cancel",
            StoredOp::InputItems => "/input_items",
        }
    }
}

/// Response ids longer than this are refused (OpenAI's are ~50 characters).
pub const MAX_ID_LEN: usize = 256;

impl Call {
    /// A call at `path` (no model in it, no query passed on).
    pub fn new(op: CallOp, api: Api, path: &str) -> Call {
        Call {
            op,
            api,
            model: None,
            path: path.to_owned(),
            query: String::new(),
        }
    }

    /// Its name in metrics labels and the access log (OpenTelemetry's
    /// `gen_ai.operation.name` where it has one; generations are `chat`).
    pub fn operation_name(&self) -> &'static str {
        match self.op {
            CallOp::Embeddings => "embeddings",
            CallOp::CountTokens => "count_tokens",
            CallOp::Stored { .. } => "stored_response",
        }
    }

    /// Whether the call carries a request body.
    pub fn has_body(&self) -> bool {
        !matches!(self.op, CallOp::Stored { .. })
    }

    /// Whether its request is a batch the gateway may split into parts
    /// (embeddings' inputs), whose answers may carry the vendor's batch
    /// limit.
    pub fn splits_into_parts(&self) -> bool {
        self.op == CallOp::Embeddings
    }

    /// Whether it asks for a token count ([`CallAnswer::Count`]).
    pub fn is_count(&self) -> bool {
        self.op == CallOp::CountTokens
    }

    /// The stored response it is on, if it is a call on one: the call and
    /// the response id.
    pub fn stored_response(&self) -> Option<(StoredOp, &str)> {
        match &self.op {
            CallOp::Stored { op, id } => Some((*op, id)),
            _ => None,
        }
    }

    /// Its path with its query: the vendor's path below its API's root,
    /// for a vendor of the client's API.
    pub fn path_and_query(&self) -> String {
        let sep = if self.query.is_empty() { "" } else { "?" };
        format!("{}{sep}{}", self.path, self.query)
    }

    /// The gateway's own answer, where no vendor has the call: for
    /// count_tokens the estimate of `request`'s input tokens (to be
    /// flagged `x-llm-estimated`), for the stored-response calls on a
    /// vendor's id a 400 (the gateway answers its own ids, `resp_gw…`, from
    /// its store before routing), for embeddings a 400 (no vendor of
    /// the group embeds).
    pub fn local_answer(&self, request: Option<&ChatRequest>) -> Result<CallAnswer, GatewayError> {
        match &self.op {
            CallOp::CountTokens => Ok(CallAnswer::Count(
                request.map_or(0, super::estimate::prompt_tokens),
            )),
            CallOp::Embeddings => Err(super::embed::no_embeddings()),
            CallOp::Stored { op, .. } => Err(GatewayError::invalid(
                "response_id",
                format!(
                    "{} /v1/responses/{{id}}{}: this model group's providers keep no responses, \
                     and the responses the gateway stores for them have ids starting `resp_gw`; \
                     this id is a vendor's",
                    op.method(),
                    op.suffix()
                ),
            )),
        }
    }

    /// The call as the handoff carries it: `op:id:api:model:path:query`
    /// (`id` a stored response's, else empty; no `model`: empty), each
    /// part but the operation's name percent-encoded (they may hold the
    /// handoff's `;` and this `:`).
    pub fn encode(&self) -> String {
        use crate::formats::url::encode_segment;
        let (name, id) = match &self.op {
            CallOp::Embeddings => ("embeddings", ""),
            CallOp::CountTokens => ("count_tokens", ""),
            CallOp::Stored { op, id } => (op.name(), id.as_str()),
        };
        format!(
            "{name}:{id}:{}:{}:{}:{}",
            self.api.name(),
            encode_segment(self.model.as_deref().unwrap_or_default()),
            encode_segment(&self.path),
            encode_segment(&self.query)
        )
    }

    pub fn decode(text: &str) -> Option<Call> {
        use crate::formats::url::decode_segment;
        let mut parts = text.splitn(6, ':');
        let (name, id) = (parts.next()?, parts.next()?);
        let op = match name {
            "embeddings" => CallOp::Embeddings,
            "count_tokens" => CallOp::CountTokens,
            _ => CallOp::Stored {
                op: StoredOp::ALL.into_iter().find(|op| op.name() == name)?,
                id: Some(id).filter(|id| valid_id(id))?.to_owned(),
            },
        };
        let api = Api::for_name(parts.next()?)?;
        let model = Some(decode_segment(parts.next()?)).filter(|m| !m.is_empty());
        let path = decode_segment(parts.next()?);
        let query = decode_segment(parts.next()?);
        Some(Call {
            op,
            api,
            model,
            path,
            query,
        })
    }
}

/// A response id the gateway passes on: one path segment as it is.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendor_path_keeps_the_query_and_the_handoff_round_trips() {
        let mut call = Call::new(
            CallOp::Stored {
                op: StoredOp::InputItems,
                id: "resp_1".into(),
            },
            Api::OpenAiResponses,
            "/v1/responses/resp_1/input_items",
        );
        call.query = "limit=2;x&order=asc".into();
        assert_eq!(
            call.path_and_query(),
            "/v1/responses/resp_1/input_items?limit=2;x&order=asc"
        );
        assert!(!call.encode().contains(';'));
        assert_eq!(Call::decode(&call.encode()), Some(call));
        let count = Call::new(
            CallOp::CountTokens,
            Api::AnthropicMessages,
            "/v1/messages/count_tokens",
        );
        assert_eq!(count.path_and_query(), "/v1/messages/count_tokens");
        assert_eq!(Call::decode(&count.encode()), Some(count));
        assert_eq!(Call::decode("retrieve:a/b:openai_responses:::"), None);
        assert_eq!(Call::decode("retrieve::openai_responses:::"), None);
        assert_eq!(Call::decode("other:a:openai_responses:::"), None);
        assert_eq!(Call::decode("embeddings::other_api:::"), None);
        assert_eq!(Call::decode("embeddings::openai_chat::"), None);
        let mut embed = Call::new(
            CallOp::Embeddings,
            Api::Gemini,
            "/v1beta/models/text-embedding-004%3Ax%3By:batchEmbedContents",
        );
        embed.model = Some("text-embedding-004:x;y".into());
        assert!(!embed.encode().contains(';'));
        assert_eq!(Call::decode(&embed.encode()), Some(embed));
    }
}
