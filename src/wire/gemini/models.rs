//! Gemini's model lists: Google AI's `GET /v1beta/models` (what the
//! Gemini surface lists and the gemini dialect's lister reads) and Vertex
//! AI's Model Garden (what the Vertex lister reads).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// One model of `GET /v1beta/models` (and `GET /v1beta/models/{model}`):
/// what the Gemini surface lists and the gemini dialect's lister reads
/// (Google leaves out what a model lacks).
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct Model<'a> {
    /// `models/{name}`.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(default)]
    pub version: Cow<'a, str>,
    #[serde(default)]
    pub display_name: Cow<'a, str>,
    #[serde(default)]
    pub description: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub input_token_limit: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub output_token_limit: u64,
    #[serde(default)]
    pub supported_generation_methods: Vec<Cow<'a, str>>,
    #[serde(default)]
    pub thinking: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct ModelList<'a> {
    #[serde(borrow, default)]
    pub models: Vec<Model<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<Cow<'a, str>>,
}

/// One model of Vertex AI's Model Garden (`GET
/// /v1beta1/publishers/{publisher}/models`): what the Vertex lister reads.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PublisherModel<'a> {
    /// `publishers/{publisher}/models/{model}`.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(default)]
    pub version_id: Option<Cow<'a, str>>,
    /// `GA`, `PUBLIC_PREVIEW`, `DEPRECATED`...
    #[serde(default)]
    pub launch_stage: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct PublisherModels<'a> {
    #[serde(borrow, default)]
    pub publisher_models: Vec<PublisherModel<'a>>,
    #[serde(default)]
    pub next_page_token: Option<Cow<'a, str>>,
}
