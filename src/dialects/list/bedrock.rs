//! Amazon Bedrock's model lists, on its control-plane endpoint
//! (`bedrock.{region}.amazonaws.com`, not the runtime's; SigV4-signed by
//! Envoy as the runtime calls are): the foundation models (`GET
//! /foundation-models`, one page: ListFoundationModels), then the
//! inference profiles (`GET /inference-profiles?maxResults=1000`, paged
//! with `nextToken`: ListInferenceProfiles), whose ids (`us.anthropic.
//! claude-...`) requests use too. One model: `GET /foundation-models/{id}`
//! or `GET /inference-profiles/{id}`.

use super::{kept, token_query, unreadable, ListedPage, Lister, Page, PAGE_SIZE};
use crate::dialects::Target;
use crate::error::GatewayError;
use crate::formats::url::encode_segment;
use crate::model::listing::{bounded, Capabilities, Listed};
use crate::wire::bedrock::{
    FoundationModel, FoundationModelDetails, FoundationModels, InferenceProfile, InferenceProfiles,
};

pub struct Bedrock;

const FOUNDATION_MODELS: u8 = 0;
const INFERENCE_PROFILES: u8 = 1;

fn foundation(m: FoundationModel) -> Option<Listed> {
    let has = |list: &[std::borrow::Cow<'_, str>], what: &str| list.iter().any(|x| x == what);
    let capabilities = Capabilities {
        generate: Some(has(&m.output_modalities, "TEXT")),
        embed: Some(has(&m.output_modalities, "EMBEDDING")),
        vision: Some(has(&m.input_modalities, "IMAGE")),
        count_tokens: None,
    };
    kept(Listed {
        id: m.model_id.into_owned(),
        display_name: m.model_name.as_deref().map(bounded),
        owned_by: m.provider_name.as_deref().map(bounded),
        capabilities,
        ..Listed::default()
    })
}

fn profile(p: InferenceProfile) -> Option<Listed> {
    if p.status.as_deref().is_some_and(|s| s != "ACTIVE") {
        return None;
    }
    kept(Listed {
        id: p.inference_profile_id.into_owned(),
        display_name: p.inference_profile_name.as_deref().map(bounded),
        created: p
            .created_at
            .as_deref()
            .and_then(crate::formats::date::parse_rfc3339),
        ..Listed::default()
    })
}

/// Whether `model` is an inference profile's id (a geography or `global`
/// before the provider: `us.anthropic.claude-...`) or ARN.
fn is_profile(model: &str) -> bool {
    model.contains(":inference-profile/")
        || model.contains(":application-inference-profile/")
        || model.split('.').next().is_some_and(|first| {
            ["us", "eu", "apac", "jp", "au", "ca", "us-gov", "global"].contains(&first)
        })
}

impl Lister for Bedrock {
    fn path(&self, page: &Page, _target: &Target) -> Result<String, GatewayError> {
        Ok(match page.list {
            FOUNDATION_MODELS => "/foundation-models".to_owned(),
            _ => format!(
                "/inference-profiles?maxResults={PAGE_SIZE}{}",
                token_query("nextToken", page.token.as_deref())
            ),
        })
    }

    fn decode(&self, page: &Page, body: &[u8], _now: u64) -> Result<ListedPage, String> {
        if page.list == FOUNDATION_MODELS {
            let list: FoundationModels =
                serde_json::from_slice(body).map_err(|e| unreadable("foundation model list", e))?;
            return Ok(ListedPage {
                models: list
                    .model_summaries
                    .into_iter()
                    .filter_map(foundation)
                    .collect(),
                next: Some(Page::first_of(INFERENCE_PROFILES)),
            });
        }
        let list: InferenceProfiles =
            serde_json::from_slice(body).map_err(|e| unreadable("inference profile list", e))?;
        let next = list
            .next_token
            .as_deref()
            .filter(|t| !t.is_empty() && Some(*t) != page.token.as_deref())
            .map(|t| Page {
                list: INFERENCE_PROFILES,
                token: Some(t.to_owned()),
            });
        Ok(ListedPage {
            models: list
                .inference_profile_summaries
                .into_iter()
                .filter_map(profile)
                .collect(),
            next,
        })
    }

    fn one_path(&self, model: &str, _target: &Target) -> Option<String> {
        let list = if is_profile(model) {
            "inference-profiles"
        } else {
            "foundation-models"
        };
        Some(format!("/{list}/{}", encode_segment(model)))
    }

    fn decode_one(&self, body: &[u8], _now: u64) -> Result<Option<Listed>, String> {
        if let Ok(details) = serde_json::from_slice::<FoundationModelDetails>(body) {
            return Ok(foundation(details.model_details));
        }
        let p: InferenceProfile =
            serde_json::from_slice(body).map_err(|e| unreadable("model", e))?;
        Ok(profile(p))
    }
}
