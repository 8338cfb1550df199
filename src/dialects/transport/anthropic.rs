//! Anthropic's API: `/v1/messages` (and its calls below `/v1`), headers
//! `anthropic-version` and `x-api-key`.

use super::{unsupported, Operation, Transport};
use crate::dialects::anthropic::API_VERSION;
use crate::dialects::Target;
use crate::error::GatewayError;

pub struct Anthropic;

impl Transport for Anthropic {
    fn lister(&self) -> Option<&'static dyn crate::dialects::list::Lister> {
        Some(&crate::dialects::list::Anthropic)
    }

    fn path(&self, op: Operation, _target: &Target) -> Result<String, GatewayError> {
        match op {
            Operation::Generate { .. } => Ok("/v1/messages".to_owned()),
            Operation::CountTokens => Ok("/v1/messages/count_tokens".to_owned()),
            _ => Err(unsupported(op)),
        }
    }

    fn headers(&self, _op: Operation, target: &Target, headers: &mut Vec<(&'static str, String)>) {
        headers.push(("anthropic-version", API_VERSION.to_owned()));
        if let Some(key) = &target.provider.resolved_key {
            headers.push(("x-api-key", key.expose().to_owned()));
        }
    }
}
