//! Bedrock's embedding models through InvokeModel, each family in its own
//! body: Amazon Titan Text Embeddings (`inputText`, one per call) and
//! Cohere Embed (`texts`, `input_type`), and their answers.

use serde::{Deserialize, Serialize};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TitanRequest<'a> {
    pub input_text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitanAnswer {
    pub embedding: Vec<f32>,
    #[serde(default)]
    pub input_text_token_count: Option<u64>,
}

#[derive(Serialize)]
pub struct CohereRequest<'a> {
    pub texts: &'a [String],
    pub input_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_dimension: Option<u32>,
}

#[derive(Deserialize)]
pub struct CohereAnswer {
    pub embeddings: CohereEmbeddings,
}

/// Floats as a list, or by type when `embedding_types` was asked for.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum CohereEmbeddings {
    Floats(Vec<Vec<f32>>),
    ByType { float: Vec<Vec<f32>> },
}
