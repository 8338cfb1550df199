//! OpenAI's embeddings, and Azure OpenAI's (the same body; on Azure's
//! deployment paths the path names the model, so the body does not).

use super::Embedder;
use crate::dialects::azure::{Settings, V1};
use crate::dialects::{DialectKind, Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::embed::{EmbedRequest, Embeddings};
use crate::wire::openai_embeddings::{self as wire, VendorRequest};

pub struct OpenAi;

impl Embedder for OpenAi {
    fn encode(&self, req: &EmbedRequest, target: &Target) -> Result<UpstreamRequest, GatewayError> {
        let on_deployment = target.provider.dialect == DialectKind::Azure
            && target
                .provider
                .settings::<Settings>()
                .is_some_and(|s| s.api_version != V1);
        let model = (!on_deployment).then_some(target.model);
        super::request(target, &VendorRequest::of(req, model))
    }

    fn decode(&self, body: &[u8], _model: &str) -> Result<Embeddings, GatewayError> {
        Ok(wire::decode(body)?.0)
    }

    /// OpenAI's and Azure's answers name the model (Azure: the deployment's).
    fn decode_named(
        &self,
        body: &[u8],
        _model: &str,
    ) -> Result<(Embeddings, Option<String>), GatewayError> {
        wire::decode(body)
    }

    /// OpenAI's, and Azure OpenAI's for its current embedding models.
    fn max_inputs(&self, _model: &str) -> usize {
        wire::MAX_INPUTS
    }
}
