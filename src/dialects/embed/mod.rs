//! The embeddings operation of each vendor that embeds: its wire types, an
//! encoder and a decoder (an [`Embedder`]), one module
//! per vendor API; a dialect serves embeddings by returning its embedder
//! from `Dialect::embedder`. The vendor's batch limit is a 400 naming it
//! (the gateway does not split a request: one request is one vendor call).

pub mod bedrock;
pub mod dashscope;
pub mod gemini;
pub mod openai;
pub mod vertex;

use super::{transport, unparseable, Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::embed::{EmbedRequest, Embeddings};

/// The embeddings operation of a dialect whose vendor embeds.
pub trait Embedder: Sync {
    /// The vendor's request for `req` at `target`, or a 400 for what the
    /// vendor cannot take (its batch limit, token arrays, a dimension).
    fn encode(&self, req: &EmbedRequest, target: &Target) -> Result<UpstreamRequest, GatewayError>;

    /// The vendor's 2xx answer, from vendor model `model`.
    fn decode(&self, body: &[u8], model: &str) -> Result<Embeddings, GatewayError>;
}

/// The vendor request carrying `body`, serialised, to the vendor's
/// embeddings endpoint.
fn request(target: &Target, body: &impl serde::Serialize) -> Result<UpstreamRequest, GatewayError> {
    let body = serde_json::to_vec(body).map_err(|e| unparseable("embeddings request", e))?;
    transport::request(transport::Operation::Embed, target, body)
}

/// A vendor's answer read as `T`.
fn read<'a, T: serde::Deserialize<'a>>(body: &'a [u8]) -> Result<T, GatewayError> {
    serde_json::from_slice(body).map_err(|e| unparseable("embeddings", e))
}
