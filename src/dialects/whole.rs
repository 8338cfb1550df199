//! Native calls: what an attempt sends for one ([`encode_call`]: the
//! vendor's own call, an operation answered whole, or nothing), and the
//! operations answered whole, apart from generations: the vendor's request
//! and what decodes its 2xx answer into the operation's neutral answer,
//! which the client's surface then writes (`Surface::render_call`). The
//! attempt sends and finishes any of them the same way ([`encode_whole`],
//! the vendor's own count of `dialects::count`, [`WholeAnswer`]); adding
//! one is its arm in [`encode_whole`] and its answer type, with no edit to
//! the sessions.

use super::{count, embed, pass_through, Dialect, Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::call::{Call, CallAnswer};
use crate::model::request::ChatRequest;
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

/// What an attempt sends for a native call.
pub enum CallRequest {
    /// The vendor's request for a call of its own API, whose answer is
    /// passed on as it is.
    Native(UpstreamRequest),
    /// The vendor's request for an operation answered whole.
    Whole(WholeRequest),
    /// Nothing: this vendor lacks the call, and the gateway answers it.
    Local,
}

/// The one decision of what native call `call` becomes at `target`
/// through `dialect`: an operation answered whole where the vendor serves
/// it (embeddings), else the vendor's own call where it speaks the
/// client's API (`raw` reads the client's body; not for a request
/// `fitted` for this model), else the vendor's own count of the request
/// as its generation's (`fitted`, or the parsed request), else nothing.
pub fn encode_call(
    call: &Call,
    request: Option<&Request>,
    fitted: Option<&ChatRequest>,
    raw: &dyn Fn() -> Vec<u8>,
    dialect: &'static dyn Dialect,
    target: &Target,
) -> Result<CallRequest, GatewayError> {
    if let Some(whole) = request.and_then(|r| encode_whole(r, dialect, target)) {
        return whole.map(CallRequest::Whole);
    }
    let native = (fitted.is_none() && pass_through(target.provider, dialect, call.api))
        .then(|| dialect.encode_call(call, raw, target))
        .flatten();
    if let Some(native) = native {
        return native.map(CallRequest::Native);
    }
    let generation = fitted.or_else(|| request.and_then(Request::chat));
    let counted = generation
        .filter(|_| call.is_count())
        .and_then(|g| count::encode(g, dialect, target));
    match counted {
        Some(whole) => whole.map(CallRequest::Whole),
        None => Ok(CallRequest::Local),
    }
}
