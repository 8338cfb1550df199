//! Amazon Bedrock's runtime: `/model/{modelId}/{operation}`, the model id
//! escaped; `authorization: Bearer` with a Bedrock API key, or no key and
//! SigV4 signing by Envoy after the filter. No `accept`: the operation
//! alone picks the answer's format (and an `accept` would stay on the
//! shared header map for a retry on another vendor).

use super::{bearer, unsupported, Operation, Transport};
use crate::dialects::Target;
use crate::error::GatewayError;
use crate::formats::url::encode_segment;

pub struct Bedrock;

impl Transport for Bedrock {
    /// The control plane's lists (a cluster of their own: the runtime's
    /// endpoint has none).
    fn lister(&self) -> Option<&'static dyn crate::dialects::list::Lister> {
        Some(&crate::dialects::list::Bedrock)
    }

    fn path(&self, op: Operation, target: &Target) -> Result<String, GatewayError> {
        let operation = match op {
            Operation::Generate { stream: true } => "converse-stream",
            Operation::Generate { stream: false } => "converse",
            Operation::Invoke { stream: true } => "invoke-with-response-stream",
            Operation::Invoke { stream: false } | Operation::Embed => "invoke",
            Operation::CountTokens => "count-tokens",
            _ => return Err(unsupported(op)),
        };
        Ok(format!(
            "/model/{}/{operation}",
            encode_segment(target.model)
        ))
    }

    fn headers(&self, _op: Operation, target: &Target, headers: &mut Vec<(&'static str, String)>) {
        bearer(target, headers);
    }
}
