//! OpenAI's model list and those of the servers that speak its API:
//! OpenAI's `GET /v1/models` (one page; `GET /v1/models/{model}` for one),
//! DashScope's compatible mode (`GET /compatible-mode/v1/models`), and
//! Azure OpenAI's: the v1 API's models (`GET /openai/v1/models`), or, for
//! the classic API whose requests name deployments, its deployments
//! (`GET /openai/deployments?api-version=2022-12-01`, the data-plane list
//! that API version has), each with the model it runs.

use super::{kept, unreadable, ListedPage, Lister, Page};
use crate::dialects::azure::{Settings, V1};
use crate::dialects::Target;
use crate::error::GatewayError;
use crate::formats::url::encode_segment;
use crate::model::listing::{bounded, Capabilities, Listed};
use crate::wire::openai_models::{Deployment, Deployments, List, Model};

/// OpenAI's list at `root` (`/v1/models`), one model at `{root}/{model}`
/// where the server has that call.
pub struct OpenAi {
    pub root: &'static str,
    pub one: bool,
}

fn listed(m: Model, now: u64) -> Option<Listed> {
    // Azure: a model past its inference deprecation is listed, not served.
    if m.deprecation
        .and_then(|d| d.inference)
        .is_some_and(|t| t <= now)
    {
        return None;
    }
    let capabilities = m
        .capabilities
        .map_or_else(Capabilities::default, |c| Capabilities {
            generate: Some(c.chat_completion || c.completion),
            embed: Some(c.embeddings),
            ..Capabilities::default()
        });
    kept(Listed {
        id: m.id.into_owned(),
        created: m.created.or(m.created_at),
        owned_by: m.owned_by.map(|o| bounded(&o)),
        context_window: m.context_window,
        max_output_tokens: m.max_output_tokens,
        capabilities,
        ..Listed::default()
    })
}

fn decode_list(body: &[u8], now: u64) -> Result<ListedPage, String> {
    let list: List = serde_json::from_slice(body).map_err(|e| unreadable("model list", e))?;
    Ok(ListedPage {
        models: list
            .data
            .into_iter()
            .filter_map(|m| listed(m, now))
            .collect(),
        next: None,
    })
}

fn decode_model(body: &[u8], now: u64) -> Result<Option<Listed>, String> {
    let model: Model = serde_json::from_slice(body).map_err(|e| unreadable("model", e))?;
    Ok(listed(model, now))
}

impl Lister for OpenAi {
    fn path(&self, _page: &Page, _target: &Target) -> Result<String, GatewayError> {
        Ok(self.root.to_owned())
    }

    fn decode(&self, _page: &Page, body: &[u8], now: u64) -> Result<ListedPage, String> {
        decode_list(body, now)
    }

    fn one_path(&self, model: &str, _target: &Target) -> Option<String> {
        self.one
            .then(|| format!("{}/{}", self.root, encode_segment(model)))
    }

    fn decode_one(&self, body: &[u8], now: u64) -> Result<Option<Listed>, String> {
        decode_model(body, now)
    }
}

/// Azure OpenAI: the v1 API's models, or the classic API's deployments.
pub struct Azure;

/// The classic API's deployments list is this API version's.
const DEPLOYMENTS_VERSION: &str = "2022-12-01";

fn v1(target: &Target) -> bool {
    target
        .provider
        .settings::<Settings>()
        .is_some_and(|s| s.api_version == V1)
}

fn deployment(d: Deployment) -> Option<Listed> {
    // Only a deployment that serves (a failed or pending one does not).
    if d.status.as_deref().is_some_and(|s| s != "succeeded") {
        return None;
    }
    kept(Listed {
        id: d.id.into_owned(),
        created: d.created_at,
        base: d.model.as_deref().map(bounded),
        ..Listed::default()
    })
}

impl Lister for Azure {
    fn path(&self, _page: &Page, target: &Target) -> Result<String, GatewayError> {
        Ok(if v1(target) {
            "/openai/v1/models".to_owned()
        } else {
            format!("/openai/deployments?api-version={DEPLOYMENTS_VERSION}")
        })
    }

    fn decode(&self, _page: &Page, body: &[u8], now: u64) -> Result<ListedPage, String> {
        // A deployments list says `"object": "list"` too: its items say
        // `"object": "deployment"` and name their `model`.
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| unreadable("model list", e))?;
        let deployments = value
            .pointer("/data/0/object")
            .and_then(serde_json::Value::as_str)
            == Some("deployment");
        if !deployments {
            return decode_list(body, now);
        }
        let list: Deployments =
            serde_json::from_slice(body).map_err(|e| unreadable("deployments list", e))?;
        Ok(ListedPage {
            models: list.data.into_iter().filter_map(deployment).collect(),
            next: None,
        })
    }

    fn one_path(&self, model: &str, target: &Target) -> Option<String> {
        let model = encode_segment(model);
        Some(if v1(target) {
            format!("/openai/v1/models/{model}")
        } else {
            format!("/openai/deployments/{model}?api-version={DEPLOYMENTS_VERSION}")
        })
    }

    fn decode_one(&self, body: &[u8], now: u64) -> Result<Option<Listed>, String> {
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| unreadable("model", e))?;
        if value.get("object").and_then(serde_json::Value::as_str) == Some("deployment") {
            let d: Deployment =
                serde_json::from_slice(body).map_err(|e| unreadable("deployment", e))?;
            return Ok(deployment(d));
        }
        decode_model(body, now)
    }
}
