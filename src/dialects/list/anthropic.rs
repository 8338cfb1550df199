//! Anthropic's model list: `GET /v1/models?limit=1000`, paged with
//! `after_id` (the page's `last_id`) while `has_more`; `GET
//! /v1/models/{model_id}` for one. Each model says its window
//! (`max_input_tokens`), output limit (`max_tokens`), image input and
//! `lifecycle` (a `retired` model is listed and never served).

use super::{kept, token_query, unreadable, ListedPage, Lister, Page, PAGE_SIZE};
use crate::dialects::Target;
use crate::error::GatewayError;
use crate::formats::url::encode_segment;
use crate::model::listing::{bounded, Capabilities, Listed};
use crate::wire::anthropic::{Model, ModelList};

pub struct Anthropic;

fn listed(m: Model) -> Option<Listed> {
    if m.lifecycle.as_deref() == Some("retired") {
        return None;
    }
    let vision = m
        .capabilities
        .and_then(|c| c.image_input)
        .map(|s| s.supported);
    kept(Listed {
        display_name: (!m.display_name.is_empty()).then(|| bounded(&m.display_name)),
        // "May be set to an epoch value if the release date is unknown."
        created: crate::formats::date::parse_rfc3339(&m.created_at).filter(|&t| t > 0),
        context_window: m.max_input_tokens,
        max_output_tokens: m.max_tokens,
        capabilities: Capabilities {
            generate: Some(true),
            vision,
            count_tokens: Some(true),
            ..Capabilities::default()
        },
        id: m.id.into_owned(),
        ..Listed::default()
    })
}

impl Lister for Anthropic {
    fn path(&self, page: &Page, _target: &Target) -> Result<String, GatewayError> {
        Ok(format!(
            "/v1/models?limit={PAGE_SIZE}{}",
            token_query("after_id", page.token.as_deref())
        ))
    }

    fn decode(&self, page: &Page, body: &[u8], _now: u64) -> Result<ListedPage, String> {
        let list: ModelList =
            serde_json::from_slice(body).map_err(|e| unreadable("model list", e))?;
        let next = match (list.has_more, list.last_id) {
            (true, Some(last)) if Some(last.as_ref()) != page.token.as_deref() => Some(Page {
                list: page.list,
                token: Some(last.into_owned()),
            }),
            _ => None,
        };
        Ok(ListedPage {
            models: list.data.into_iter().filter_map(listed).collect(),
            next,
        })
    }

    fn one_path(&self, model: &str, _target: &Target) -> Option<String> {
        Some(format!("/v1/models/{}", encode_segment(model)))
    }

    fn decode_one(&self, body: &[u8], _now: u64) -> Result<Option<Listed>, String> {
        let model: Model = serde_json::from_slice(body).map_err(|e| unreadable("model", e))?;
        Ok(listed(model))
    }
}
