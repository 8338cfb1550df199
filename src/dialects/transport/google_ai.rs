//! Google AI's Gemini API: `/v1beta/models/{model}:{method}` (streams
//! with `?alt=sse`), header `x-goog-api-key`.

use super::{unsupported, Operation, Transport};
use crate::dialects::Target;
use crate::error::GatewayError;
use crate::formats::url::encode_segment;

pub struct GoogleAi;

impl Transport for GoogleAi {
    fn lister(&self) -> Option<&'static dyn crate::dialects::list::Lister> {
        Some(&crate::dialects::list::GoogleAi)
    }

    fn path(&self, op: Operation, target: &Target) -> Result<String, GatewayError> {
        let method = match op {
            Operation::Generate { stream: true } => "streamGenerateContent?alt=sse",
            Operation::Generate { stream: false } => "generateContent",
            Operation::CountTokens => "countTokens",
            // One input or many: the batch call takes both.
            Operation::Embed => "batchEmbedContents",
            _ => return Err(unsupported(op)),
        };
        // The model as the API names it (`models/...`) or bare.
        let model = target.model.strip_prefix("models/").unwrap_or(target.model);
        Ok(format!("/v1beta/models/{}:{method}", encode_segment(model)))
    }

    fn headers(&self, _op: Operation, target: &Target, headers: &mut Vec<(&'static str, String)>) {
        if let Some(key) = &target.provider.resolved_key {
            headers.push(("x-goog-api-key", key.expose().to_owned()));
        }
    }
}
