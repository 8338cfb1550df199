//! OpenAI's API (and every server that speaks it): `/v1/...`,
//! `authorization: Bearer`.

use super::{bearer, unsupported, Operation, Transport};
use crate::dialects::Target;
use crate::error::GatewayError;

pub struct OpenAi;

impl Transport for OpenAi {
    fn lister(&self) -> Option<&'static dyn crate::dialects::list::Lister> {
        Some(&crate::dialects::list::OpenAi {
            root: "/v1/models",
            one: true,
        })
    }

    fn path(&self, op: Operation, _target: &Target) -> Result<String, GatewayError> {
        match op {
            Operation::Generate { .. } => Ok("/v1/chat/completions".to_owned()),
            Operation::Responses => Ok("/v1/responses".to_owned()),
            Operation::Embed => Ok("/v1/embeddings".to_owned()),
            Operation::Call(call) => Ok(call.path_and_query()),
            _ => Err(unsupported(op)),
        }
    }

    fn headers(&self, _op: Operation, target: &Target, headers: &mut Vec<(&'static str, String)>) {
        bearer(target, headers);
    }
}
