//! DashScope's embeddings (its native text-embedding API, as for its
//! generations): texts only, at most 10 per call, `dimension` and
//! `text_type` as parameters.

use serde::{Deserialize, Serialize};

use super::Embedder;
use crate::dialects::{Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::embed::{check_batch, EmbedRequest, Embeddings};

/// Texts per call (text-embedding-v3 and v4).
pub const MAX_BATCH: usize = 10;

pub struct DashScope;

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    input: Input<'a>,
    #[serde(skip_serializing_if = "Parameters::is_empty")]
    parameters: Parameters,
}

#[derive(Serialize)]
struct Input<'a> {
    texts: &'a [String],
}

#[derive(Serialize)]
struct Parameters {
    #[serde(skip_serializing_if = "Option::is_none")]
    dimension: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text_type: Option<&'static str>,
}

impl Parameters {
    fn is_empty(&self) -> bool {
        self.dimension.is_none() && self.text_type.is_none()
    }
}

#[derive(Deserialize)]
struct Answer {
    output: Output,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Output {
    embeddings: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    text_index: usize,
    embedding: Vec<f32>,
}

#[derive(Deserialize)]
struct Usage {
    total_tokens: u64,
}

impl Embedder for DashScope {
    fn encode(&self, req: &EmbedRequest, target: &Target) -> Result<UpstreamRequest, GatewayError> {
        let texts = req.input.texts("dashscope")?;
        check_batch(req, "dashscope", MAX_BATCH)?;
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
}
