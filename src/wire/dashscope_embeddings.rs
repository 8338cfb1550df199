//! DashScope's native text-embedding API
//! (`/api/v1/services/embeddings/text-embedding/text-embedding`): `input
//! {texts}` and `parameters {dimension, text_type}`, answered `output
//! .embeddings[{text_index, embedding}]` and `usage.total_tokens`.

use serde::{Deserialize, Serialize};

#[derive(Serialize)]
pub struct Request<'a> {
    pub model: &'a str,
    pub input: Input<'a>,
    #[serde(skip_serializing_if = "Parameters::is_empty")]
    pub parameters: Parameters,
}

#[derive(Serialize)]
pub struct Input<'a> {
    pub texts: &'a [String],
}

#[derive(Serialize)]
pub struct Parameters {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dimension: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_type: Option<&'static str>,
}

impl Parameters {
    pub fn is_empty(&self) -> bool {
        self.dimension.is_none() && self.text_type.is_none()
    }
}

#[derive(Deserialize)]
pub struct Answer {
    pub output: Output,
    #[serde(default)]
    pub usage: Option<Usage>,
}

#[derive(Deserialize)]
pub struct Output {
    pub embeddings: Vec<Item>,
}

#[derive(Deserialize)]
pub struct Item {
    pub text_index: usize,
    pub embedding: Vec<f32>,
}

#[derive(Deserialize)]
pub struct Usage {
    pub total_tokens: u64,
}
