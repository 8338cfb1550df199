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

/// One native call, as the client made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `POST /v1/embeddings` (the body: OpenAI's embeddings request).
    Embed,
    /// `POST /v1/messages/count_tokens` (the body: a Messages request).
    CountTokens,
    /// Gemini's `POST /v1beta/models/{model}:embedContent` (`batch` false)
    /// or `:batchEmbedContents`; the model is the path's.
    GeminiEmbed { model: String, batch: bool },
    /// Gemini's `POST /v1beta/models/{model}:countTokens` (the body:
    /// `contents` or a `generateContentRequest`); the model is the path's.
    GeminiCountTokens { model: String },
    /// A call on a response the vendor stored (`/v1/responses/{id}...`).
    Stored {
        op: StoredOp,
        /// The response id (`[A-Za-z0-9_-]`, so it is one path segment as it is).
        id: String,
        /// The query string, as the client sent it (without `?`).
        query: String,
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
    /// The API the call belongs to (its errors are in this API's envelope).
    pub fn api(&self) -> Api {
        match self {
            Call::Embed => Api::OpenAiChat,
            Call::CountTokens => Api::AnthropicMessages,
            Call::GeminiCountTokens { .. } | Call::GeminiEmbed { .. } => Api::Gemini,
            Call::Stored { .. } => Api::OpenAiResponses,
        }
    }

    /// Its name in metrics labels and the access log (OpenTelemetry's
    /// `gen_ai.operation.name` where it has one; generations are `chat`).
    pub fn operation_name(&self) -> &'static str {
        match self {
            Call::Embed | Call::GeminiEmbed { .. } => "embeddings",
            Call::CountTokens | Call::GeminiCountTokens { .. } => "count_tokens",
            Call::Stored { .. } => "stored_response",
        }
    }

    /// Whether the call carries a request body.
    pub fn has_body(&self) -> bool {
        matches!(
            self,
            Call::CountTokens
                | Call::GeminiCountTokens { .. }
                | Call::Embed
                | Call::GeminiEmbed { .. }
        )
    }

    /// Whether it asks for a token count ([`CallAnswer::Count`]).
    pub fn is_count(&self) -> bool {
        matches!(self, Call::CountTokens | Call::GeminiCountTokens { .. })
    }

    /// Its path, `/v1/...` with the query string: the vendor's path below
    /// its API's root.
    pub fn path(&self) -> String {
        match self {
            Call::Embed => "/v1/embeddings".to_owned(),
            Call::CountTokens => "/v1/messages/count_tokens".to_owned(),
            Call::GeminiCountTokens { model } => format!(
                "/v1beta/models/{}:countTokens",
                crate::formats::url::encode_segment(model)
            ),
            Call::GeminiEmbed { model, batch } => format!(
                "/v1beta/models/{}:{}",
                crate::formats::url::encode_segment(model),
                if *batch {
                    "batchEmbedContents"
                } else {
                    "embedContent"
                }
            ),
            Call::Stored { op, id, query } => {
                let sep = if query.is_empty() { "" } else { "?" };
                format!("/v1/responses/{id}{}{sep}{query}", op.suffix())
            }
        }
    }

    /// The gateway's own answer, where no vendor has the call: for
    /// count_tokens the estimate of `request`'s input tokens (to be
    /// flagged `x-llm-estimated`), for the stored-response calls on a
    /// vendor's id a 400 (the gateway answers its own ids, `resp_gw…`, from
    /// its store before routing), for embeddings a 400 (no vendor of
    /// the group embeds).
    pub fn local_answer(&self, request: Option<&ChatRequest>) -> Result<CallAnswer, GatewayError> {
        match self {
            Call::CountTokens | Call::GeminiCountTokens { .. } => Ok(CallAnswer::Count(
                request.map_or(0, super::estimate::prompt_tokens),
            )),
            Call::Embed | Call::GeminiEmbed { .. } => Err(super::embed::no_embeddings()),
            Call::Stored { op, .. } => Err(GatewayError::invalid(
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

    /// The call as the handoff carries it: `name[:id:query]`, the query
    /// percent-encoded (it may hold the handoff's `;`).
    pub fn encode(&self) -> String {
        match self {
            Call::Embed => "embeddings".to_owned(),
            Call::CountTokens => "count_tokens".to_owned(),
            Call::GeminiCountTokens { model } => {
                format!(
                    "gemini_count_tokens:{}",
                    crate::formats::url::encode_segment(model)
                )
            }
            Call::GeminiEmbed { model, batch } => format!(
                "gemini_embed{}:{}",
                if *batch { "_batch" } else { "" },
                crate::formats::url::encode_segment(model)
            ),
            Call::Stored { op, id, query } => {
                format!(
                    "{}:{id}:{}",
                    op.name(),
                    crate::formats::url::encode_segment(query)
                )
            }
        }
    }

    pub fn decode(text: &str) -> Option<Call> {
        match text {
            "count_tokens" => return Some(Call::CountTokens),
            "embeddings" => return Some(Call::Embed),
            _ => {}
        }
        for (prefix, batch) in [("gemini_embed:", false), ("gemini_embed_batch:", true)] {
            if let Some(model) = text.strip_prefix(prefix) {
                let model = crate::formats::url::decode_segment(model);
                return Some(Call::GeminiEmbed { model, batch });
            }
        }
        if let Some(model) = text.strip_prefix("gemini_count_tokens:") {
            let model = crate::formats::url::decode_segment(model);
            return Some(Call::GeminiCountTokens { model });
        }
        let mut parts = text.splitn(3, ':');
        let name = parts.next()?;
        let op = StoredOp::ALL.into_iter().find(|op| op.name() == name)?;
        let id = parts.next().filter(|id| valid_id(id))?;
        let query = crate::formats::url::decode_segment(parts.next()?);
        Some(Call::Stored {
            op,
            id: id.to_owned(),
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
        let call = Call::Stored {
            op: StoredOp::InputItems,
            id: "resp_1".into(),
            query: "limit=2;x&order=asc".into(),
        };
        assert_eq!(
            call.path(),
            "/v1/responses/resp_1/input_items?limit=2;x&order=asc"
        );
        assert!(!call.encode().contains(';'));
        assert_eq!(Call::decode(&call.encode()), Some(call));
        assert_eq!(Call::decode("count_tokens"), Some(Call::CountTokens));
        assert_eq!(Call::decode("retrieve:a/b:"), None);
        assert_eq!(Call::decode("other:a:"), None);
        assert_eq!(Call::CountTokens.path(), "/v1/messages/count_tokens");
        assert_eq!(Call::decode(&Call::Embed.encode()), Some(Call::Embed));
        for batch in [false, true] {
            let call = Call::GeminiEmbed {
                model: "text-embedding-004:x;y".into(),
                batch,
            };
            assert_eq!(Call::decode(&call.encode()), Some(call));
        }
    }
}
