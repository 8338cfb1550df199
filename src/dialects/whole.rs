//! Operations answered whole, apart from generations: the vendor's request
//! and what decodes its 2xx answer into the operation's neutral answer,
//! which the client's surface then writes (`Surface::render_call`). The
//! attempt sends and finishes any of them the same way ([`encode_whole`],
//! the vendor's own count of `dialects::count`, [`WholeAnswer`]); adding
//! one is its arm in [`encode_whole`] and its answer type, with no edit to
//! the sessions.

use super::{embed, Dialect, Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::call::CallAnswer;
use crate::model::response::Usage;
use crate::model::Request;

/// An operation's vendor request, and how its answer is finished.
pub struct WholeRequest {
    pub request: UpstreamRequest,
    pub answer: Box<dyn WholeAnswer>,
}

/// What finishes an operation's 2xx answer.
pub trait WholeAnswer {
    /// The neutral answer from the vendor's body (from vendor model
    /// `model`), and the usage the vendor counted (none: the edge role
    /// bills its estimate).
    fn finish(&self, body: &[u8], model: &str) -> Result<Finished, GatewayError>;

    /// Whether the operation uses tokens (billed by the vendor's count or
    /// the edge role's estimate); one that uses none (a token count) is
    /// recorded with no usage as soon as the vendor answers.
    fn uses_tokens(&self) -> bool {
        true
    }
}

/// A finished answer.
pub struct Finished {
    pub answer: CallAnswer,
    pub usage: Option<Usage>,
}

/// The vendor request of an operation answered whole, at `target` through
/// `dialect`; `None` for a generation or a call that takes one's body.
pub fn encode_whole(
    request: &Request,
    dialect: &'static dyn Dialect,
    target: &Target,
) -> Option<Result<WholeRequest, GatewayError>> {
    match request {
        Request::Embed(r) => Some(embed::encode(r, dialect, target)),
        Request::Chat(_) => None,
    }
}
