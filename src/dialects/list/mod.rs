//! Model lists: each vendor API's list of the models a key may use, read
//! by model discovery (`session::discovery`) through the provider's
//! cluster and credentials. One module per list API; a transport names
//! its vendor's ([`super::transport::Transport::lister`]), so one body
//! format on two transports (Gemini's on Google AI and on Vertex AI) has
//! two lists.
//!
//! A list may come in pages, and a vendor may have several lists (Bedrock:
//! its foundation models, then its inference profiles): a [`Page`] says
//! which list and where in it. Each list decodes into the neutral
//! [`Listed`], keeping what its vendor says of a model's window, output
//! limit and capabilities, and leaving out what the vendor lists but no
//! longer serves (Anthropic's `retired`, an Azure model past its
//! inference deprecation).

use super::transport::{self, Operation};
use super::{Target, UpstreamRequest};
use crate::error::{ErrorCode, GatewayError};
use crate::model::listing::Listed;

mod anthropic;
mod bedrock;
mod google;
mod openai;

pub use anthropic::Anthropic;
pub use bedrock::Bedrock;
pub use google::{GoogleAi, Vertex};
pub use openai::{Azure, OpenAi};

/// The most models one page may ask for (the vendors' own maximum, 1000,
/// where they take a size).
pub const PAGE_SIZE: u32 = 1000;

/// Which of a vendor's lists, and the token of the page (`None`: its first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub list: u8,
    pub token: Option<String>,
}

impl Page {
    /// The first page of list `list`.
    pub fn first_of(list: u8) -> Self {
        Self { list, token: None }
    }
}

/// One page's models, and the page after it (of this list, or the first
/// of the vendor's next list), if any.
#[derive(Debug, Default)]
pub struct ListedPage {
    pub models: Vec<Listed>,
    pub next: Option<Page>,
}

/// What a list call reads: a page, or one model (a targeted check).
#[derive(Clone, Copy, Debug)]
pub enum Query<'a> {
    Page(&'a Page),
    One(&'a str),
}

/// A vendor API's model list.
pub trait Lister: Sync {
    /// The `:path` (query included) of `page`, below the provider's `base_path`.
    fn path(&self, page: &Page, target: &Target) -> Result<String, GatewayError>;

    /// A 2xx answer to `page`; `now` (Unix seconds) tells what has retired.
    fn decode(&self, page: &Page, body: &[u8], now: u64) -> Result<ListedPage, String>;

    /// The `:path` that asks for one model (`None`: the vendor has no such
    /// call; a check reads the whole list again).
    fn one_path(&self, _model: &str, _target: &Target) -> Option<String> {
        None
    }

    /// A 2xx answer to [`Self::one_path`]: the model, or `None` when the
    /// vendor says it but no longer serves it.
    fn decode_one(&self, _body: &[u8], _now: u64) -> Result<Option<Listed>, String> {
        Err("this vendor has no call for one model".into())
    }
}

/// The list of a provider of dialect `kind`: its transport's.
pub fn of(kind: super::DialectKind) -> Option<&'static dyn Lister> {
    transport::of(kind).lister()
}

/// The vendor request for `query` over `target`'s transport (a GET: its
/// path and the provider's auth and version headers; no body).
pub fn request(
    lister: &dyn Lister,
    query: Query,
    target: &Target,
) -> Result<UpstreamRequest, GatewayError> {
    let path = match query {
        Query::Page(page) => lister.path(page, target)?,
        Query::One(model) => lister.one_path(model, target).ok_or_else(|| {
            GatewayError::new(
                ErrorCode::UpstreamError,
                "this provider's list has no call for one model",
            )
        })?,
    };
    let mut headers = Vec::with_capacity(2);
    transport::of(target.provider.dialect).headers(Operation::ListModels, target, &mut headers);
    Ok(UpstreamRequest {
        path: format!("{}{path}", target.provider.base_path),
        headers,
        body: Vec::new(),
    })
}

/// A page token as a query value.
fn token_query(name: &str, token: Option<&str>) -> String {
    token.map_or_else(String::new, |t| {
        format!("&{name}={}", crate::formats::url::encode_segment(t))
    })
}

/// A JSON answer that is not what the list says it is.
fn unreadable(what: &str, e: impl std::fmt::Display) -> String {
    format!("the {what} is not readable: {e}")
}

/// `model` kept when its id is one the gateway keeps.
fn kept(model: Listed) -> Option<Listed> {
    crate::model::listing::keepable(&model.id).then_some(model)
}

#[cfg(test)]
mod tests;
