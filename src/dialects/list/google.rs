//! Google's model lists. Google AI (the Gemini API): `GET
//! /v1beta/models?pageSize=1000`, paged with `pageToken` (the answer's
//! `nextPageToken`), each model with its `inputTokenLimit`,
//! `outputTokenLimit` and `supportedGenerationMethods`; `GET
//! /v1beta/models/{model}` for one. Vertex AI: the Model Garden's models
//! of the provider's publisher (`google` for Gemini, `anthropic` for
//! Claude), `GET /v1beta1/publishers/{publisher}/models`, paged alike;
//! they say no limits (the shipped table and the configuration do).

use super::{kept, token_query, unreadable, ListedPage, Lister, Page, PAGE_SIZE};
use crate::dialects::Target;
use crate::error::GatewayError;
use crate::formats::url::encode_segment;
use crate::model::listing::{bounded, Capabilities, Listed};
use crate::wire::gemini::{Model, ModelList, PublisherModel, PublisherModels};

pub struct GoogleAi;

fn next_page(page: &Page, token: Option<&str>) -> Option<Page> {
    token
        .filter(|t| !t.is_empty() && Some(*t) != page.token.as_deref())
        .map(|t| Page {
            list: page.list,
            token: Some(t.to_owned()),
        })
}

fn gemini(m: Model) -> Option<Listed> {
    let has = |method: &str| m.supported_generation_methods.iter().any(|x| x == method);
    let capabilities = Capabilities {
        generate: Some(has("generateContent")),
        embed: Some(has("embedContent") || has("batchEmbedContents")),
        count_tokens: Some(has("countTokens")),
        vision: None,
    };
    let id = m.name.strip_prefix("models/").unwrap_or(&m.name).to_owned();
    kept(Listed {
        id,
        display_name: (!m.display_name.is_empty()).then(|| bounded(&m.display_name)),
        context_window: (m.input_token_limit > 0).then_some(m.input_token_limit),
        max_output_tokens: (m.output_token_limit > 0).then_some(m.output_token_limit),
        capabilities,
        ..Listed::default()
    })
}

impl Lister for GoogleAi {
    fn path(&self, page: &Page, _target: &Target) -> Result<String, GatewayError> {
        Ok(format!(
            "/v1beta/models?pageSize={PAGE_SIZE}{}",
            token_query("pageToken", page.token.as_deref())
        ))
    }

    fn decode(&self, page: &Page, body: &[u8], _now: u64) -> Result<ListedPage, String> {
        let list: ModelList =
            serde_json::from_slice(body).map_err(|e| unreadable("model list", e))?;
        Ok(ListedPage {
            next: next_page(page, list.next_page_token.as_deref()),
            models: list.models.into_iter().filter_map(gemini).collect(),
        })
    }

    fn one_path(&self, model: &str, _target: &Target) -> Option<String> {
        let model = model.strip_prefix("models/").unwrap_or(model);
        Some(format!("/v1beta/models/{}", encode_segment(model)))
    }

    fn decode_one(&self, body: &[u8], _now: u64) -> Result<Option<Listed>, String> {
        let model: Model = serde_json::from_slice(body).map_err(|e| unreadable("model", e))?;
        Ok(gemini(model))
    }
}

/// Vertex AI's Model Garden, one publisher's models.
pub struct Vertex {
    pub publisher: &'static str,
}

impl Vertex {
    fn listed(&self, m: PublisherModel) -> Option<Listed> {
        if m.launch_stage.as_deref() == Some("DEPRECATED") {
            return None;
        }
        let prefix = format!("publishers/{}/models/", self.publisher);
        let id = m.name.strip_prefix(prefix.as_str())?.to_owned();
        // Claude on Vertex is asked for as `{model}@{version}`; both names serve.
        let capabilities = Capabilities {
            generate: (self.publisher == "anthropic").then_some(true),
            ..Capabilities::default()
        };
        kept(Listed {
            id,
            owned_by: Some(self.publisher.to_owned()),
            capabilities,
            ..Listed::default()
        })
    }
}

impl Lister for Vertex {
    fn path(&self, page: &Page, _target: &Target) -> Result<String, GatewayError> {
        Ok(format!(
            "/v1beta1/publishers/{}/models?pageSize={PAGE_SIZE}{}",
            self.publisher,
            token_query("pageToken", page.token.as_deref())
        ))
    }

    fn decode(&self, page: &Page, body: &[u8], _now: u64) -> Result<ListedPage, String> {
        let list: PublisherModels =
            serde_json::from_slice(body).map_err(|e| unreadable("publisher model list", e))?;
        Ok(ListedPage {
            next: next_page(page, list.next_page_token.as_deref()),
            models: list
                .publisher_models
                .into_iter()
                .filter_map(|m| self.listed(m))
                .collect(),
        })
    }

    fn one_path(&self, model: &str, _target: &Target) -> Option<String> {
        // `claude-sonnet-4-5@20250929`: the model is its part before the version.
        let model = model.split('@').next().unwrap_or(model);
        Some(format!(
            "/v1beta1/publishers/{}/models/{}",
            self.publisher,
            encode_segment(model)
        ))
    }

    fn decode_one(&self, body: &[u8], _now: u64) -> Result<Option<Listed>, String> {
        let model: PublisherModel =
            serde_json::from_slice(body).map_err(|e| unreadable("publisher model", e))?;
        Ok(self.listed(model))
    }
}
