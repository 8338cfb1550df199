//! Each vendor's list answer: its members, its order, its paging.

use serde_json::{json, Value};

use super::Model;
use crate::dialect::Reply;
use crate::http::query_param;

fn ok(body: Value) -> Reply {
    Reply {
        status: 200,
        body: body.to_string(),
        retry_after: None,
    }
}

fn rfc3339(secs: u64) -> String {
    // Days to a civil date (H. Hinnant), as the gateway's own `date` does.
    let z = secs / 86_400 + 719_468;
    let (era, doe) = (z / 146_097, z % 146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let rest = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

fn openai(m: &Model) -> Value {
    json!({"id": m.id, "object": "model", "created": m.created, "owned_by": "system"})
}

fn azure(m: &Model) -> Value {
    json!({
        "status": "succeeded",
        "capabilities": {"fine_tune": false, "inference": true, "completion": false,
                         "chat_completion": !m.embeds, "embeddings": m.embeds},
        "lifecycle_status": "generally-available",
        "deprecation": {"inference": m.created + 10 * 365 * 86_400},
        "id": m.id, "created_at": m.created, "object": "model",
    })
}

fn deployment(m: &Model) -> Value {
    json!({
        "id": m.id, "model": m.base.clone().unwrap_or_else(|| m.id.clone()),
        "owner": "organization-owner", "status": "succeeded",
        "created_at": m.created, "updated_at": m.created, "object": "deployment",
        "scale_settings": {"scale_type": "standard"},
    })
}

fn anthropic(m: &Model) -> Value {
    json!({
        "type": "model", "id": m.id, "display_name": m.id,
        "created_at": rfc3339(m.created),
        "max_input_tokens": m.context_window, "max_tokens": m.max_output_tokens,
        "lifecycle": "active",
    })
}

fn gemini(m: &Model) -> Value {
    let methods = if m.embeds {
        json!([
            "embedContent",
            "countTextTokens",
            "countTokens",
            "asyncBatchEmbedContent"
        ])
    } else {
        json!([
            "generateContent",
            "countTokens",
            "createCachedContent",
            "batchGenerateContent"
        ])
    };
    json!({
        "name": format!("models/{}", m.id), "version": "001", "displayName": m.id,
        "description": "a model of the mock",
        "inputTokenLimit": m.context_window.unwrap_or(0), "outputTokenLimit": m.max_output_tokens.unwrap_or(1),
        "supportedGenerationMethods": methods,
        "temperature": 1, "topP": 0.95, "topK": 64, "maxTemperature": 2, "thinking": !m.embeds,
    })
}

fn publisher(publisher: &str, m: &Model) -> Value {
    json!({
        "name": format!("publishers/{publisher}/models/{}", m.id),
        "versionId": "001", "openSourceCategory": "PROPRIETARY", "launchStage": "GA",
        "publisherModelTemplate": format!("projects/{{project}}/locations/{{location}}/publishers/{publisher}/models/{}", m.id),
    })
}

fn foundation(m: &Model) -> Value {
    let provider = m.id.split('.').next().unwrap_or_default();
    json!({
        "modelArn": format!("arn:aws:bedrock:us-east-1::foundation-model/{}", m.id),
        "modelId": m.id, "modelName": m.id, "providerName": provider,
        "inputModalities": ["TEXT"],
        "outputModalities": [if m.embeds { "EMBEDDING" } else { "TEXT" }],
        "responseStreamingSupported": !m.embeds, "customizationsSupported": [],
        "inferenceTypesSupported": ["ON_DEMAND"], "modelLifecycle": {"status": "ACTIVE"},
    })
}

fn profile(m: &Model) -> Value {
    json!({
        "inferenceProfileName": m.id, "description": "a profile of the mock",
        "createdAt": rfc3339(m.created), "updatedAt": rfc3339(m.created),
        "inferenceProfileArn": format!("arn:aws:bedrock:us-east-1:123456789012:inference-profile/{}", m.id),
        "models": [{"modelArn": "arn:aws:bedrock:us-east-1::foundation-model/x"}],
        "inferenceProfileId": m.id, "status": "ACTIVE", "type": "SYSTEM_DEFINED",
    })
}

/// One model, as `GET .../{model}` answers it.
pub fn one(vendor: &str, m: &Model) -> Reply {
    ok(match vendor {
        "anthropic" => anthropic(m),
        "azure" => azure(m),
        "azure-deployments" => deployment(m),
        "gemini" => gemini(m),
        "vertex-google" => publisher("google", m),
        "vertex-anthropic" => publisher("anthropic", m),
        "bedrock" => json!({"modelDetails": foundation(m)}),
        "bedrock-profiles" => profile(m),
        _ => openai(m),
    })
}

/// A page size asked in `query` (`name`), within `1..=max` (`default`
/// when absent); `cap` the mock's own limit.
fn size(query: &str, name: &str, default: usize, cap: Option<usize>) -> Result<usize, String> {
    let asked = match query_param(query, name) {
        None => default,
        Some(n) => match n.parse::<usize>() {
            Ok(n) if (1..=1000).contains(&n) => n,
            _ => {
                return Err(format!(
                    "{name}: must be an integer from 1 to 1000, not '{n}'"
                ))
            }
        },
    };
    Ok(cap.map_or(asked, |cap| asked.min(cap)))
}

/// A page of `models` from `start`: (the page, the next start if any).
fn page(models: &[Model], start: usize, size: usize) -> (&[Model], Option<usize>) {
    let end = (start + size).min(models.len());
    let next = (end < models.len()).then_some(end);
    (models.get(start..end).unwrap_or_default(), next)
}

/// A Google page token: the next start, opaque to callers.
fn token(start: usize) -> String {
    crate::server::base64(format!("page:{start}").as_bytes())
}

fn from_token(query: &str, name: &str) -> Result<usize, String> {
    match query_param(query, name) {
        None => Ok(0),
        Some(t) => (0..100_000)
            .find(|n| token(*n) == t)
            .ok_or_else(|| format!("{name} is invalid")),
    }
}

/// The list answer of `vendor` for `query`, `cap` the most a page gives.
pub fn list(vendor: &str, all: &[Model], query: &str, cap: Option<usize>) -> Result<Reply, String> {
    let mut models = all.to_vec();
    Ok(ok(match vendor {
        "anthropic" => {
            // Newest first.
            models.sort_by(|a, b| b.created.cmp(&a.created).then(a.id.cmp(&b.id)));
            let size = size(query, "limit", 20, cap)?;
            let start = match (
                query_param(query, "after_id"),
                query_param(query, "before_id"),
            ) {
                (Some(after), _) => {
                    models
                        .iter()
                        .position(|m| m.id == after)
                        .ok_or("after_id: no such model")?
                        + 1
                }
                (None, Some(before)) => {
                    let end = models
                        .iter()
                        .position(|m| m.id == before)
                        .ok_or("before_id: no such model")?;
                    end.saturating_sub(size)
                }
                (None, None) => 0,
            };
            let (data, next) = page(&models, start, size);
            json!({
                "data": data.iter().map(anthropic).collect::<Vec<_>>(),
                "has_more": next.is_some(),
                "first_id": data.first().map(|m| &m.id),
                "last_id": data.last().map(|m| &m.id),
            })
        }
        "gemini" | "vertex-google" | "vertex-anthropic" => {
            models.sort_by(|a, b| a.id.cmp(&b.id));
            let size = size(query, "pageSize", 50, cap)?;
            let (data, next) = page(&models, from_token(query, "pageToken")?, size);
            let (key, items): (&str, Vec<Value>) = match vendor {
                "gemini" => ("models", data.iter().map(gemini).collect()),
                "vertex-google" => (
                    "publisherModels",
                    data.iter().map(|m| publisher("google", m)).collect(),
                ),
                _ => (
                    "publisherModels",
                    data.iter().map(|m| publisher("anthropic", m)).collect(),
                ),
            };
            let mut body = json!({ key: items });
            if let Some(next) = next {
                body["nextPageToken"] = json!(token(next));
            }
            body
        }
        "bedrock" => json!({"modelSummaries": models.iter().map(foundation).collect::<Vec<_>>()}),
        "bedrock-profiles" => {
            let size = size(query, "maxResults", 1000, cap)?;
            let (data, next) = page(&models, from_token(query, "nextToken")?, size);
            let mut body =
                json!({"inferenceProfileSummaries": data.iter().map(profile).collect::<Vec<_>>()});
            if let Some(next) = next {
                body["nextToken"] = json!(token(next));
            }
            body
        }
        "azure" => json!({"data": models.iter().map(azure).collect::<Vec<_>>(), "object": "list"}),
        "azure-deployments" => {
            json!({"data": models.iter().map(deployment).collect::<Vec<_>>(), "object": "list"})
        }
        _ => json!({"object": "list", "data": models.iter().map(openai).collect::<Vec<_>>()}),
    }))
}
