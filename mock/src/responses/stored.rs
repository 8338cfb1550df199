//! The responses the mock made (their ids, so a `previous_response_id` is
//! checked) and the ones it keeps whole for the stored-response calls:
//! retrieve, delete, cancel and list input items.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde_json::{json, Value};

use crate::dialect::{Dialect, Failure, Reply};
use crate::http::Request;
use crate::openai::OpenAi;

use super::request::param;
use super::{Responses, PATH};

/// Responses this mock made (bounded: the oldest are forgotten).
static MADE: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
const REMEMBERED: usize = 100_000;

pub(super) fn remember(id: String) {
    if let Ok(mut made) = MADE.lock() {
        if made.len() >= REMEMBERED {
            made.pop_front();
        }
        made.push_back(id);
    }
}

pub(super) fn made(id: &str) -> bool {
    MADE.lock().is_ok_and(|made| made.iter().any(|m| m == id))
}

/// A response kept for the stored-response calls, with its input items.
pub(super) struct Stored {
    pub(super) azure: bool,
    pub(super) response: Value,
    pub(super) input_items: Vec<Value>,
}

/// Stored responses kept (the oldest are forgotten).
const STORED: usize = 1000;
static KEPT: Mutex<VecDeque<Stored>> = Mutex::new(VecDeque::new());

pub(super) fn keep(stored: Stored) {
    if let Ok(mut kept) = KEPT.lock() {
        if kept.len() >= STORED {
            kept.pop_front();
        }
        kept.push_back(stored);
    }
}

/// A stored-response path: (Azure's v1 API, the id, what follows it).
pub(super) fn stored_path(path: &str) -> Option<(bool, &str, &str)> {
    let (azure, rest) = match path.strip_prefix("/openai") {
        Some(rest) => (true, rest),
        None => (false, path),
    };
    let rest = rest.strip_prefix(PATH)?.strip_prefix('/')?;
    let (id, rest) = rest.find('/').map_or((rest, ""), |at| rest.split_at(at));
    Some((azure, id, rest))
}

/// A reply with a JSON body.
fn reply(status: u16, body: &Value) -> Reply {
    Reply {
        status,
        body: crate::dialect::to_json(body),
        retry_after: None,
    }
}

/// OpenAI's 404 for a response id it does not have.
pub(super) fn not_found(id: &str) -> Reply {
    reply(
        404,
        &json!({"error": {"message": format!("Response with id '{id}' not found."),
                          "type": "invalid_request_error", "param": null, "code": null}}),
    )
}

/// An input item as `input_items` lists it: a message's text content as
/// typed parts (`input_text`, the assistant's `output_text`), an id.
pub(super) fn listed_item(item: &Value, id: String) -> Value {
    let mut item = item.clone();
    if item.get("type").is_none() && item.get("role").is_some() {
        item["type"] = "message".into();
    }
    if let Some(text) = item
        .get("content")
        .and_then(Value::as_str)
        .map(str::to_owned)
    {
        let part = if item.get("role").and_then(Value::as_str) == Some("assistant") {
            "output_text"
        } else {
            "input_text"
        };
        item["content"] = json!([{"type": part, "text": text}]);
    }
    if item.get("id").is_none() {
        item["id"] = id.into();
    }
    item
}

/// `GET .../input_items`: a page of the items, newest first unless
/// `order=asc`, `limit` (1-100, default 20) of them after the item `after`.
pub(super) fn input_items(items: &[Value], query: &str) -> Reply {
    let limit = match crate::http::query_param(query, "limit") {
        None => 20,
        Some(n) => match n.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => {
                return OpenAi.error(&param(
                    format!(
                    "Invalid 'limit': expected an integer between 1 and 100, but got {n} instead."
                ),
                    "limit",
                    Some("invalid_value"),
                ))
            }
        },
    };
    let mut ordered: Vec<&Value> = items.iter().collect();
    match crate::http::query_param(query, "order").as_deref() {
        None | Some("desc") => ordered.reverse(),
        Some("asc") => {}
        Some(other) => {
            return OpenAi.error(&param(
                format!("Invalid value: '{other}'. Supported values are: 'asc' and 'desc'."),
                "order",
                Some("invalid_value"),
            ))
        }
    }
    if let Some(after) = crate::http::query_param(query, "after") {
        let at = ordered.iter().position(|i| i["id"] == after.as_str());
        ordered = at.map_or_else(Vec::new, |at| ordered.split_off(at + 1));
    }
    let has_more = ordered.len() > limit;
    ordered.truncate(limit);
    let (first, last) = (
        ordered.first().map(|i| &i["id"]),
        ordered.last().map(|i| &i["id"]),
    );
    reply(
        200,
        &json!({"object": "list", "data": ordered, "first_id": first, "last_id": last,
                "has_more": has_more}),
    )
}

impl Responses {
    /// A call on stored response `id` (`rest`: what follows the id).
    pub(super) fn stored_call(&self, req: &Request, azure: bool, id: &str, rest: &str) -> Reply {
        let Ok(mut kept) = KEPT.lock() else {
            return OpenAi.error(&Failure::Status(500));
        };
        let found = kept
            .iter()
            .position(|s| s.azure == azure && s.response["id"] == id);
        let method = req.method();
        let allowed = match rest {
            "" => ["GET", "DELETE"].contains(&method),
            "/cancel" => method == "POST",
            "/input_items" => method == "GET",
            _ => {
                return reply(
                    404,
                    &json!({"error": {"message": "Not found", "type": "invalid_request_error", "param": null, "code": null}}),
                )
            }
        };
        if !allowed {
            return reply(
                405,
                &json!({"error": {"message": format!("Method {method} not allowed."), "type": "invalid_request_error", "param": null, "code": null}}),
            );
        }
        let Some(at) = found else {
            return not_found(id);
        };
        let Some(stored) = kept.get(at) else {
            return not_found(id);
        };
        match (method, rest) {
            ("DELETE", _) => {
                kept.remove(at);
                reply(
                    200,
                    &json!({"id": id, "object": "response", "deleted": true}),
                )
            }
            ("GET", "/input_items") => input_items(&stored.input_items, req.query()),
            // Only a background response can be cancelled (and one that
            // finished stays as it is).
            ("POST", _) if stored.response["background"] != true => OpenAi.error(
                &Failure::Invalid("Cannot cancel a synchronous response.".into()),
            ),
            _ => reply(200, &stored.response),
        }
    }
}

#[cfg(test)]
mod stored_tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::dialect::Meta;

    fn call(method: &str, path: &str) -> (u16, Value) {
        let raw =
            format!("{method} {path} HTTP/1.1\r\nauthorization: Bearer sk-mock-openai\r\n\r\n");
        let req = crate::http::parse(&raw);
        assert!(Responses.has_call(req.path()));
        let reply = Responses.call(&req, req.path());
        (reply.status, serde_json::from_str(&reply.body).unwrap())
    }

    #[test]
    fn a_stored_response_is_retrieved_listed_and_deleted_as_openai_does() {
        let p = Responses
            .parse(&json!({"model": "m", "input": "keep this"}))
            .unwrap();
        let answer = crate::answer::plan(&p, &crate::scenario::Scenario::default(), "openai", None);
        let meta = Meta {
            seq: 987_654,
            created: 1,
        };
        let made = Responses.response(&p, &answer, meta);
        let id = made["id"].as_str().unwrap();
        let path = format!("/v1/responses/{id}");
        assert_eq!(call("GET", &path), (200, made.clone()));
        let (status, items) = call("GET", &format!("{path}/input_items"));
        assert_eq!(status, 200);
        assert_eq!(items["data"][0]["content"][0]["type"], "input_text");
        assert_eq!(items["first_id"], items["data"][0]["id"]);
        assert_eq!(call("POST", &format!("{path}/cancel")).0, 400);
        assert_eq!(call("DELETE", &path).1["deleted"], true);
        let (status, gone) = call("GET", &path);
        assert_eq!(status, 404);
        assert!(gone["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not found"));
        // A path that is no stored-response call.
        assert!(!Responses.has_call("/v1/responsesx"));
    }
}
