//! Alibaba Cloud DashScope: its text- or multimodal-generation service,
//! `x-dashscope-sse: enable` for a stream, `authorization: Bearer`.

use super::{bearer, unsupported, Operation, Transport};
use crate::dialects::dashscope::{EMBEDDINGS_PATH, MULTIMODAL_PATH, TEXT_PATH};
use crate::dialects::Target;
use crate::error::GatewayError;

pub struct DashScope;

impl Transport for DashScope {
    /// The compatible mode's OpenAI-shaped list (the native API has none).
    fn lister(&self) -> Option<&'static dyn crate::dialects::list::Lister> {
        Some(&crate::dialects::list::OpenAi {
            root: "/compatible-mode/v1/models",
            one: false,
        })
    }

    fn path(&self, op: Operation, _target: &Target) -> Result<String, GatewayError> {
        match op {
            Operation::Generate { .. } => Ok(TEXT_PATH.to_owned()),
            Operation::GenerateMultimodal { .. } => Ok(MULTIMODAL_PATH.to_owned()),
            Operation::Embed => Ok(EMBEDDINGS_PATH.to_owned()),
            _ => Err(unsupported(op)),
        }
    }

    fn headers(&self, op: Operation, target: &Target, headers: &mut Vec<(&'static str, String)>) {
        if op.stream() {
            headers.push(("x-dashscope-sse", "enable".to_owned()));
        }
        bearer(target, headers);
    }
}
