//! The count_tokens operation of each vendor that counts tokens with a
//! call of its own taking its generation body (Anthropic's
//! `count_tokens`, Gemini's `countTokens`, Bedrock's `CountTokens`): a
//! [`Counter`], which a dialect returns from `Dialect::counter`. A count
//! goes to it translated wherever the vendor's API is not the client's.

use super::whole::{Finished, WholeAnswer, WholeRequest};
use super::{Dialect, Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::call::CallAnswer;
use crate::model::request::ChatRequest;

/// The token count of a dialect whose vendor counts.
pub trait Counter: Sync {
    /// The vendor's token-count request for `req` (a count's body read as
    /// a generation), made as its generation would be; `None` when this
    /// model has no count (the gateway estimates).
    fn encode_count(
        &self,
        req: &ChatRequest,
        target: &Target,
    ) -> Option<Result<UpstreamRequest, GatewayError>>;

    /// The input tokens a 2xx answer to [`Self::encode_count`]'s request says.
    fn decode_count(&self, body: &[u8]) -> Result<u64, GatewayError>;
}

/// The vendor's own count of `req` at `target` through `dialect`, and what
/// finishes its answer; `None` where the vendor (or this model) counts none.
pub fn encode(
    req: &ChatRequest,
    dialect: &'static dyn Dialect,
    target: &Target,
) -> Option<Result<WholeRequest, GatewayError>> {
    let counter = dialect.counter()?;
    let request = counter.encode_count(req, target)?;
    Some(request.map(|request| WholeRequest {
        request,
        answer: Box::new(CountAnswer(counter)),
    }))
}

/// What answering a count needs: the counter that decodes it.
struct CountAnswer(&'static dyn Counter);

impl WholeAnswer for CountAnswer {
    fn finish(&self, body: &[u8], _model: &str) -> Result<Finished, GatewayError> {
        Ok(Finished {
            answer: CallAnswer::Count(self.0.decode_count(body)?),
            usage: None,
        })
    }

    fn uses_tokens(&self) -> bool {
        false
    }
}
