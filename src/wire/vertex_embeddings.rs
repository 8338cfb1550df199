//! Vertex AI's text embeddings (`publishers/google/models/{model}:predict`):
//! `instances[{content, task_type, title}]` and `parameters
//! {outputDimensionality}`, answered `predictions[].embeddings.{values,
//! statistics.token_count}`.

use serde::{Deserialize, Serialize};

#[derive(Serialize)]
pub struct Predict<'a> {
    pub instances: Vec<Instance<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Parameters>,
}

#[derive(Serialize)]
pub struct Instance<'a> {
    pub content: &'a str,
    /// Gemini's names of tasks are Vertex's too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_type: Option<&'static str>,
    /// The documents' title (for `RETRIEVAL_DOCUMENT`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Parameters {
    pub output_dimensionality: u32,
}

#[derive(Deserialize)]
pub struct Answer {
    pub predictions: Vec<Prediction>,
}

#[derive(Deserialize)]
pub struct Prediction {
    pub embeddings: Values,
}

#[derive(Deserialize)]
pub struct Values {
    pub values: Vec<f32>,
    #[serde(default)]
    pub statistics: Option<Statistics>,
}

#[derive(Deserialize)]
pub struct Statistics {
    /// A number in a `google.protobuf.Value` (JSON may write it `6.0`).
    #[serde(default)]
    pub token_count: Option<f64>,
}
