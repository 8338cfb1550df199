//! OpenAI's model list (`GET /v1/models`, `GET /v1/models/{model}`), as
//! OpenAI writes it (`object`, `data`; a model's `id`, `object`,
//! `created`, `owned_by`) and as the servers that speak its API write it:
//! DashScope's compatible mode as is, Azure OpenAI with members of its own
//! (`created_at`, `capabilities`, `lifecycle_status`, `deprecation`), and
//! Azure's classic deployments list. The Chat Completions surface writes
//! it; the openai, azure and dashscope dialects' listers read it.
//!
//! The gateway's own list adds `context_window` and `max_output_tokens`
//! where it knows them (members OpenAI's SDKs keep as extras).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Model<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(default)]
    pub object: Cow<'a, str>,
    /// Unix seconds (Azure says `created_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned_by: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    // --- Azure OpenAI's own ------------------------------------------------
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<AzureCapabilities>,
    /// `generally-available`, `preview`...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle_status: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
}

/// What an Azure OpenAI model can do.
#[derive(Serialize, Deserialize, Debug, Default, Clone, Copy)]
pub struct AzureCapabilities {
    #[serde(default)]
    pub chat_completion: bool,
    #[serde(default)]
    pub completion: bool,
    #[serde(default)]
    pub embeddings: bool,
    #[serde(default)]
    pub inference: bool,
}

/// When an Azure OpenAI model stops serving (Unix seconds).
#[derive(Serialize, Deserialize, Debug, Default, Clone, Copy)]
pub struct Deprecation {
    #[serde(default)]
    pub inference: Option<u64>,
}

/// `GET /v1/models`.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct List<'a> {
    #[serde(default)]
    pub object: Cow<'a, str>,
    #[serde(borrow, default)]
    pub data: Vec<Model<'a>>,
}

/// One deployment of Azure OpenAI's classic deployments list
/// (`GET /openai/deployments?api-version=2022-12-01`): the name requests
/// use (`id`) and the model it runs.
#[derive(Deserialize, Debug)]
pub struct Deployment<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(default)]
    pub model: Option<Cow<'a, str>>,
    /// `succeeded` once it serves.
    #[serde(default)]
    pub status: Option<Cow<'a, str>>,
    #[serde(default)]
    pub created_at: Option<u64>,
}

#[derive(Deserialize, Debug)]
pub struct Deployments<'a> {
    #[serde(borrow, default)]
    pub data: Vec<Deployment<'a>>,
}
