//! The Responses API's calls on a stored response, from their request
//! lines: `GET`/`DELETE /v1/responses/{id}`, `POST .../cancel`,
//! `GET .../input_items` (`crate::model::call::StoredOp`).

use crate::error::GatewayError;
use crate::model::call::{valid_id, Call, CallOp, StoredOp, MAX_ID_LEN};
use crate::model::Api;
use crate::surfaces::route::unknown_path;

/// The stored-response call of a request line below `/v1/responses/`
/// (`rest` follows that prefix): a 405 for a call's path with another
/// method, a 404 for a path that is no call, or a 400 for what the gateway
/// cannot pass on (a streamed retrieve, an id that is not one, a query
/// that is not printable ASCII).
pub fn stored(method: &str, path: &str, rest: &str, query: &str) -> Result<Call, GatewayError> {
    let (shape, allow, op) = match rest.split_once('/') {
        None if !rest.is_empty() => {
            let op = if method == "DELETE" {
                StoredOp::Delete
            } else {
                StoredOp::Retrieve
            };
            ("/v1/responses/{id}", "GET, DELETE", op)
        }
        Some((id, "cancel")) if !id.is_empty() => {
            ("/v1/responses/{id}/cancel", "POST", StoredOp::Cancel)
        }
        Some((id, "input_items")) if !id.is_empty() => (
            "/v1/responses/{id}/input_items",
            "GET",
            StoredOp::InputItems,
        ),
        _ => return Err(unknown_path(path)),
    };
    if !allow.split(", ").any(|m| m == method) {
        return Err(GatewayError::method_not_allowed(shape, method, allow));
    }
    let id = rest.split('/').next().unwrap_or_default();
    if !valid_id(id) {
        return Err(GatewayError::invalid(
            "response_id",
            format!("a response id is 1-{MAX_ID_LEN} characters of [A-Za-z0-9_-]"),
        ));
    }
    if !query.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(GatewayError::invalid(
            "query",
            "the query string must be printable ASCII (percent-encode the rest)",
        ));
    }
    // A streamed retrieve would be passed on as a stream of stored events,
    // which the gateway does not relay.
    let streamed = query
        .split('&')
        .any(|pair| pair == "stream=true" || pair == "stream=True");
    if streamed {
        return Err(GatewayError::invalid(
            "stream",
            "retrieving a stored response as a stream is not supported through the gateway; \
             retrieve it without stream=true",
        ));
    }
    let op = CallOp::Stored {
        op,
        id: id.to_owned(),
    };
    let mut call = Call::new(op, Api::OpenAiResponses, path);
    call.query = query.to_owned();
    Ok(call)
}

/// A stored-response call's body: none (cancel: at most an empty object,
/// which the SDKs send).
pub fn no_body(op: StoredOp, body: &[u8]) -> Result<(), GatewayError> {
    let text = body.trim_ascii();
    if text.is_empty() || (op == StoredOp::Cancel && is_empty_object(text)) {
        Ok(())
    } else {
        Err(GatewayError::invalid(
            "body",
            format!("{} takes no request body", op.describe()),
        ))
    }
}

/// `{}`, with any white space inside.
fn is_empty_object(text: &[u8]) -> bool {
    text.strip_prefix(b"{")
        .and_then(|rest| rest.strip_suffix(b"}"))
        .is_some_and(|inside| inside.trim_ascii().is_empty())
}
