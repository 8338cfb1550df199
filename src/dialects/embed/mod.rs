//! The embeddings operation of each vendor that embeds: an encoder and a
//! decoder (an [`Embedder`]) over its wire types in `crate::wire`, one
//! module per vendor API; a dialect serves embeddings by returning its embedder
//! from `Dialect::embedder`. One request is one vendor call: a request over
//! the vendor's batch limit ([`Embedder::max_inputs`]) is a 400 naming it,
//! which the edge role splits a batch by (`session::edge::batch`).

pub mod bedrock;
pub mod dashscope;
pub mod gemini;
pub mod openai;
pub mod vertex;

use super::whole::{Finished, WholeAnswer, WholeRequest};
use super::{transport, unparseable, Dialect, Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::call::{CallAnswer, Embedded};
use crate::model::embed::{no_embeddings, wrong_count, EmbedRequest, Embeddings, Encoding};
use crate::model::response::Usage;
use crate::model::Request;
use crate::provider::Provider;

/// The embeddings operation of a dialect whose vendor embeds.
pub trait Embedder: Sync {
    /// The vendor's request for `req` at `target`, or a 400 for what the
    /// vendor cannot take (its batch limit, token arrays, a dimension).
    fn encode(&self, req: &EmbedRequest, target: &Target) -> Result<UpstreamRequest, GatewayError>;

    /// The vendor's 2xx answer, from vendor model `model`.
    fn decode(&self, body: &[u8], model: &str) -> Result<Embeddings, GatewayError>;

    /// The inputs one call of vendor model `model` takes (its documented
    /// batch limit).
    fn max_inputs(&self, model: &str) -> usize;

    /// [`Embedder::decode`], with the model the answer says embedded (Azure
    /// names the deployment's model, where the request named the
    /// deployment), read in the same pass; `None` for an answer that names
    /// none.
    fn decode_named(
        &self,
        body: &[u8],
        model: &str,
    ) -> Result<(Embeddings, Option<String>), GatewayError> {
        Ok((self.decode(body, model)?, None))
    }
}

/// The inputs one call of `model` at `provider` takes, when it embeds.
pub fn max_inputs(provider: &Provider, model: &str) -> Option<usize> {
    let dialect = super::dialect(provider.dialect);
    Some(super::embedder(dialect, provider)?.max_inputs(model))
}

/// The vendor's batch limit for `request`, when it is embeddings and
/// `target` embeds.
pub fn vendor_limit(
    request: &Request,
    dialect: &'static dyn Dialect,
    target: &Target,
) -> Option<usize> {
    request.embed()?;
    Some(super::embedder(dialect, target.provider)?.max_inputs(target.model))
}

/// The vendor's request for `req` through `dialect` (or its transport's
/// own embeddings, `dialects::embedder`), and what finishes its answer; a
/// provider without embeddings is refused.
pub(super) fn encode(
    req: &EmbedRequest,
    dialect: &'static dyn Dialect,
    target: &Target,
) -> Result<WholeRequest, GatewayError> {
    let embedder = super::embedder(dialect, target.provider).ok_or_else(no_embeddings)?;
    if !req.mixed.is_empty() {
        return Err(crate::model::embed::mixed_batch());
    }
    Ok(WholeRequest {
        request: embedder.encode(req, target)?,
        answer: Box::new(EmbedAnswer {
            embedder,
            inputs: req.input.len(),
            encoding: req.encoding,
            estimated_tokens: req.input.estimated_tokens(),
        }),
    })
}

/// What answering an embeddings request needs of it, once it was sent.
struct EmbedAnswer {
    embedder: &'static dyn Embedder,
    inputs: usize,
    encoding: Encoding,
    estimated_tokens: u64,
}

impl WholeAnswer for EmbedAnswer {
    /// The vendor's embeddings, one per input, with the vendor's token
    /// count, else the estimate.
    fn finish(&self, body: &[u8], model: &str) -> Result<Finished, GatewayError> {
        let (answer, named) = self.embedder.decode_named(body, model)?;
        if answer.vectors.len() != self.inputs {
            return Err(wrong_count(self.inputs, answer.vectors.len()));
        }
        let usage = answer.prompt_tokens.map(|prompt_tokens| Usage {
            prompt_tokens,
            ..Usage::default()
        });
        let tokens = answer.prompt_tokens.unwrap_or(self.estimated_tokens);
        Ok(Finished {
            answer: CallAnswer::Embeddings(Embedded {
                embeddings: answer,
                model: named.unwrap_or_else(|| model.to_owned()),
                tokens,
                encoding: self.encoding,
            }),
            usage,
        })
    }
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
