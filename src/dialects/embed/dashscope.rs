//! DashScope's embeddings (its native text-embedding API, as for its
//! generations): texts only, at most 10 per call (25 for text-embedding-v1
//! and v2), `dimension` and `text_type` as parameters.

use super::Embedder;
use crate::dialects::{Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::embed::{check_batch, EmbedRequest, Embeddings};
use crate::wire::dashscope_embeddings::{Answer, Input, Parameters, Request};

/// Texts per call (text-embedding-v3 and v4).
pub const MAX_BATCH: usize = 10;
/// Texts per call of text-embedding-v1 and v2.
const MAX_BATCH_V1: usize = 25;

pub struct DashScope;

impl Embedder for DashScope {
    fn encode(&self, req: &EmbedRequest, target: &Target) -> Result<UpstreamRequest, GatewayError> {
        let texts = req.input.texts("dashscope")?;
        check_batch(req, "dashscope", self.max_inputs(target.model))?;
        let text_type = req
            .task
            .map(|t| if t.is_query() { "query" } else { "document" });
        let body = Request {
            model: target.model,
            input: Input { texts },
            parameters: Parameters {
                dimension: req.dimensions,
                text_type,
            },
        };
        super::request(target, &body)
    }

    fn decode(&self, body: &[u8], _model: &str) -> Result<Embeddings, GatewayError> {
        let answer: Answer = super::read(body)?;
        let mut items = answer.output.embeddings;
        items.sort_by_key(|i| i.text_index);
        Ok(Embeddings {
            vectors: items.into_iter().map(|i| i.embedding).collect(),
            prompt_tokens: answer.usage.map(|u| u.total_tokens),
        })
    }

    /// "text-embedding-v3 and v4: up to 10 rows; v1 and v2: up to 25"
    /// (Model Studio's text embedding API reference).
    fn max_inputs(&self, model: &str) -> usize {
        match model {
            "text-embedding-v1" | "text-embedding-v2" => MAX_BATCH_V1,
            _ => MAX_BATCH,
        }
    }
}
