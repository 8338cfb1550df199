//! Azure OpenAI: below `/openai`, the deployment in the path with an
//! `api-version` query, or with `api_version: "v1"` the v1 API's paths
//! (the deployment as the body's `model`); header `api-key`.

use super::{unsupported, Operation, Transport};
use crate::dialects::azure::{Settings, V1};
use crate::dialects::Target;
use crate::error::{ErrorCode, GatewayError};
use crate::formats::url::encode_segment;

pub struct Azure;

impl Transport for Azure {
    fn lister(&self) -> Option<&'static dyn crate::dialects::list::Lister> {
        Some(&crate::dialects::list::Azure)
    }

    fn path(&self, op: Operation, target: &Target) -> Result<String, GatewayError> {
        let operation = match op {
            Operation::Generate { .. } => "chat/completions",
            Operation::Embed => "embeddings",
            Operation::Responses => return Ok("/openai/v1/responses".to_owned()),
            Operation::Call(call) => return Ok(format!("/openai{}", call.path_and_query())),
            _ => return Err(unsupported(op)),
        };
        let api_version = target
            .provider
            .settings::<Settings>()
            .map(|s| s.api_version.as_str())
            .ok_or_else(|| {
                GatewayError::new(
                    ErrorCode::UpstreamError,
                    "the azure provider has no api_version configured",
                )
            })?;
        Ok(if api_version == V1 {
            format!("/openai/v1/{operation}")
        } else {
            format!(
                "/openai/deployments/{}/{operation}?api-version={api_version}",
                encode_segment(target.model)
            )
        })
    }

    fn headers(&self, _op: Operation, target: &Target, headers: &mut Vec<(&'static str, String)>) {
        if let Some(key) = &target.provider.resolved_key {
            headers.push(("api-key", key.expose().to_owned()));
        }
    }
}
