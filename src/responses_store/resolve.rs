//! What the store means for a Responses request and its calls, apart from
//! where the entries live: `previous_response_id` and `item_reference`
//! resolved into the full input, a request's input items as stored, the
//! response captured from the answer as it passes (whole or streamed), and
//! the stored-response calls' answers (retrieve, delete, `input_items`).

use serde_json::{Map, Value};

use super::{is_gateway_id, response_of_item, Entry};
use crate::error::{ErrorCode, GatewayError};

/// Responses a `previous_response_id` chain is followed through at most.
pub const MAX_CHAIN: usize = 1024;

/// Whether a Responses body may refer to stored state (a byte search: a
/// request that does not is not parsed again).
pub fn references_state(body: &[u8]) -> bool {
    contains(body, b"previous_response_id") || contains(body, b"item_reference")
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    hay.iter().enumerate().any(|(i, &b)| {
        b == first
            && hay
                .get(i + 1..i + 1 + rest.len())
                .is_some_and(|tail| tail == rest)
    })
}

/// The stored responses a Responses body refers to: the one it continues
/// (`previous_response_id`, and so its chain) and those whose items it
/// references (`item_reference`), gateway ids only; read over the body
/// without building it (what is not read is skipped). `None` for a body
/// that refers to none, or that the parser will refuse.
pub fn references(body: &[u8]) -> Option<References> {
    #[derive(serde::Deserialize)]
    struct Body<'a> {
        #[serde(borrow, default)]
        previous_response_id: Option<std::borrow::Cow<'a, str>>,
        #[serde(default)]
        input: Option<Input>,
    }
    /// `input`: a string (no references) or items, of which only gateway
    /// item references are kept (their responses' ids).
    struct Input(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Input {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Input;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a string or an array of input items")
                }
                fn visit_str<E>(self, _: &str) -> Result<Input, E> {
                    Ok(Input(Vec::new()))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<Input, A::Error> {
                    let mut found = Vec::new();
                    while let Some(item) = seq.next_element::<Item>()? {
                        let response = (item.kind.as_deref() == Some("item_reference"))
                            .then(|| item.id.as_deref().and_then(response_of_item))
                            .flatten();
                        if let Some(id) = response.filter(|id| !found.contains(id)) {
                            found.push(id);
                        }
                    }
                    Ok(Input(found))
                }
            }
            d.deserialize_any(Visit)
        }
    }
    #[derive(serde::Deserialize)]
    struct Item<'a> {
        #[serde(borrow, default, rename = "type")]
        kind: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        id: Option<std::borrow::Cow<'a, str>>,
    }
    if !references_state(body) {
        return None;
    }
    let read: Body = serde_json::from_slice(body).ok()?;
    let previous = read
        .previous_response_id
        .filter(|id| is_gateway_id(id))
        .map(|id| id.into_owned());
    let items = read.input.map(|i| i.0).unwrap_or_default();
    (previous.is_some() || !items.is_empty()).then_some(References { previous, items })
}

/// What [`references`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct References {
    pub previous: Option<String>,
    /// The responses of referenced items, each once.
    pub items: Vec<String>,
}

/// OpenAI's 404 for a response that is not there (unknown, expired,
/// evicted, deleted, or another key's).
pub fn not_found(id: &str) -> GatewayError {
    GatewayError::new(
        ErrorCode::ModelNotFound,
        format!("Response with id '{}' not found.", id.escape_debug()),
    )
}

fn previous_not_found(id: &str) -> GatewayError {
    GatewayError::invalid(
        "previous_response_id",
        format!(
            "Previous response with id '{}' not found.",
            id.escape_debug()
        ),
    )
}

/// A request body with the gateway's state resolved: its `input` the
/// whole conversation, without `previous_response_id`.
#[derive(Debug)]
pub struct Resolved {
    pub body: Vec<u8>,
    /// The `previous_response_id` it continued (for the response's echo).
    pub previous: Option<String>,
    /// The request's own input items, references resolved (what is stored).
    pub input: Vec<Value>,
}

/// Resolves a body's `previous_response_id` (a gateway id: the chain of
/// stored responses, each one's input then output, before the request's
/// input; the earlier `instructions` are not carried over, as OpenAI
/// defines them) and its `item_reference`s to the gateway's items. `None`
/// when the body refers to none of the gateway's state (a vendor's ids are
/// left for the vendor). `lookup` finds the caller's own entries.
pub fn resolve(
    body: &[u8],
    mut lookup: impl FnMut(&str) -> Option<Entry>,
) -> Result<Option<Resolved>, GatewayError> {
    let Ok(Value::Object(mut map)) = serde_json::from_slice::<Value>(body) else {
        // Not an object: the parser says what is wrong with it.
        return Ok(None);
    };
    let previous = match map.get("previous_response_id") {
        Some(Value::String(id)) if is_gateway_id(id) => Some(id.clone()),
        _ => None,
    };
    let mut history = Vec::new();
    if let Some(first) = &previous {
        let mut next = Some(first.clone());
        let mut chain = Vec::new();
        while let Some(id) = next.take() {
            if chain.len() >= MAX_CHAIN {
                return Err(GatewayError::invalid(
                    "previous_response_id",
                    format!("a conversation is followed through at most {MAX_CHAIN} responses"),
                ));
            }
            let entry = lookup(&id).ok_or_else(|| previous_not_found(&id))?;
            next = entry.prev.clone();
            chain.push(entry);
        }
        for entry in chain.into_iter().rev() {
            history.extend(entry.input.into_iter().map(without_id));
            history.extend(output_items(&entry.response).cloned().map(without_id));
        }
    }
    let input = map.get_mut("input");
    let referenced = match &input {
        Some(Value::Array(items)) => items.iter().any(is_gateway_reference),
        _ => false,
    };
    if previous.is_none() && !referenced {
        return Ok(None);
    }
    let mut items = match map.remove("input") {
        Some(Value::Array(items)) => items,
        Some(Value::String(text)) => vec![user_message(text)],
        None | Some(Value::Null) => Vec::new(),
        // Of the wrong type: the parser refuses it.
        Some(other) => return Ok(Some(rewritten(map, other, previous, Vec::new()))),
    };
    let mut resolved_at = Vec::new();
    if referenced {
        let mut found: Vec<Entry> = Vec::new();
        for (i, item) in items.iter_mut().enumerate() {
            if !is_gateway_reference(item) {
                continue;
            }
            let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
            let missing = || {
                GatewayError::invalid(
                    format!("input[{i}]"),
                    format!("Item with id '{}' not found.", id.escape_debug()),
                )
            };
            let response = response_of_item(id).ok_or_else(missing)?;
            if !found.iter().any(|e| e.id == response) {
                found.push(lookup(&response).ok_or_else(missing)?);
            }
            let stored = found
                .iter()
                .filter(|e| e.id == response)
                .flat_map(|e| e.input.iter().chain(output_items(&e.response)))
                .find(|stored| stored.get("id").and_then(Value::as_str) == Some(id))
                .ok_or_else(missing)?;
            *item = stored.clone();
            resolved_at.push(i);
        }
    }
    let own = items.clone();
    // The vendor gets the stored items without the gateway's ids (a
    // vendor that keeps items, OpenAI, would look them up).
    history.extend(items.into_iter().enumerate().map(|(i, item)| {
        if resolved_at.contains(&i) {
            without_id(item)
        } else {
            item
        }
    }));
    Ok(Some(rewritten(map, Value::Array(history), previous, own)))
}

fn rewritten(
    mut map: Map<String, Value>,
    input: Value,
    previous: Option<String>,
    own: Vec<Value>,
) -> Resolved {
    if previous.is_some() {
        map.remove("previous_response_id");
    }
    map.insert("input".into(), input);
    Resolved {
        body: serde_json::to_vec(&Value::Object(map)).unwrap_or_default(),
        previous,
        input: own,
    }
}

fn without_id(mut item: Value) -> Value {
    if let Value::Object(map) = &mut item {
        map.remove("id");
    }
    item
}

fn is_gateway_reference(item: &Value) -> bool {
    item.get("type").and_then(Value::as_str) == Some("item_reference")
        && item
            .get("id")
            .and_then(Value::as_str)
            .is_some_and(|id| response_of_item(id).is_some())
}

fn output_items(response: &Value) -> impl Iterator<Item = &Value> {
    response
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn user_message(text: String) -> Value {
    serde_json::json!({
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
    })
}

/// A request body's `input` as items (a string is one user message).
pub fn request_input(body: &[u8]) -> Vec<Value> {
    #[derive(serde::Deserialize)]
    struct Input {
        input: Option<Value>,
    }
    match serde_json::from_slice::<Input>(body)
        .ok()
        .and_then(|b| b.input)
    {
        Some(Value::String(text)) => vec![user_message(text)],
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    }
}

/// A request's input items as stored and listed (`input_items`): every
/// item with an id (`in_{n}_{response}` where the client gave none) and a
/// type.
pub fn input_items(items: Vec<Value>, response_id: &str) -> Vec<Value> {
    let base = response_id.strip_prefix("resp_").unwrap_or(response_id);
    items
        .into_iter()
        .enumerate()
        .map(|(n, mut item)| {
            if let Value::Object(map) = &mut item {
                map.entry("type").or_insert_with(|| "message".into());
                if !map.get("id").is_some_and(Value::is_string) {
                    map.insert("id".into(), format!("in_{n}_{base}").into());
                }
                // A message given as a string: the content parts OpenAI lists.
                if let Some(Value::String(text)) = map.get("content") {
                    let kind = match map.get("role").and_then(Value::as_str) {
                        Some("assistant") => "output_text",
                        _ => "input_text",
                    };
                    let parts = serde_json::json!([{"type": kind, "text": text}]);
                    map.insert("content".into(), parts);
                }
            }
            item
        })
        .collect()
}

/// The `response` object of a whole answer, or of a stream's terminal
/// event (`response.completed` / `response.incomplete`), as the client got
/// it, collected as the answer passes within `limit` bytes.
#[derive(Debug)]
pub struct Capture {
    stream: bool,
    limit: usize,
    buffer: Vec<u8>,
    response: Option<Vec<u8>>,
    over: bool,
}

impl Capture {
    pub fn new(stream: bool, limit: usize) -> Self {
        Self {
            stream,
            limit,
            buffer: Vec::new(),
            response: None,
            over: false,
        }
    }

    /// One more piece of the answer.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.over {
            return;
        }
        self.buffer.extend_from_slice(chunk);
        if self.stream {
            // Whole events are looked at and dropped: only the terminal
            // one is kept, and only a partial event stays buffered.
            while let Some(end) = find_blank_line(&self.buffer) {
                let event: Vec<u8> = self.buffer.drain(..end + 2).collect();
                if let Some(data) = terminal_data(&event) {
                    self.response = Some(data);
                }
            }
        }
        let kept = self.response.as_ref().map_or(0, Vec::len);
        if self.buffer.len().saturating_add(kept) > self.limit {
            self.over = true;
            self.buffer = Vec::new();
            self.response = None;
        }
    }

    /// A stream's terminal event has passed: the response is complete
    /// (stored before the client, which may continue it at once, gets it).
    pub fn complete(&self) -> bool {
        self.response.is_some() && !self.over
    }

    /// The response object, when the answer held one within the bound.
    pub fn finish(self) -> Option<Value> {
        if self.over {
            return None;
        }
        let bytes = if self.stream {
            self.response?
        } else {
            self.buffer
        };
        let mut value: Value = serde_json::from_slice(&bytes).ok()?;
        // A stream's event carries the response in `response`.
        if self.stream {
            value = value.get_mut("response")?.take();
        }
        let status = value.get("status").and_then(Value::as_str);
        matches!(status, Some("completed" | "incomplete")).then_some(value)
    }
}

fn find_blank_line(buffer: &[u8]) -> Option<usize> {
    buffer.windows(2).position(|w| w == b"\n\n")
}

/// The data of a `response.completed` or `response.incomplete` event.
fn terminal_data(event: &[u8]) -> Option<Vec<u8>> {
    let mut terminal = false;
    let mut data = Vec::new();
    for line in event.split(|&b| b == b'\n') {
        if let Some(name) = line.strip_prefix(b"event:") {
            let name = name.trim_ascii();
            terminal = name == b"response.completed" || name == b"response.incomplete";
        } else if let Some(d) = line.strip_prefix(b"data:") {
            data.extend_from_slice(d.strip_prefix(b" ").unwrap_or(d));
        }
    }
    terminal.then_some(data)
}

/// `DELETE /v1/responses/{id}`'s answer.
pub fn deleted(id: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"id": id, "object": "response", "deleted": true}))
        .unwrap_or_default()
}

/// `POST /v1/responses/{id}/cancel` on a stored response: none of the
/// gateway's runs in the background, so OpenAI's refusal.
pub fn not_cancellable() -> GatewayError {
    GatewayError::invalid("response_id", "Cannot cancel a synchronous response.")
}

/// `GET /v1/responses/{id}/input_items`: a page of the entry's input items,
/// as OpenAI pages them (`limit` 1-100, default 20; `order` `desc` by
/// default; `after`/`before` an item id).
pub fn input_items_page(entry: &Entry, query: &str) -> Result<Vec<u8>, GatewayError> {
    let (mut limit, mut ascending) = (20usize, false);
    let (mut after, mut before) = (None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = crate::formats::url::decode_segment(value);
        match key {
            "limit" => {
                limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| {
                        GatewayError::invalid("limit", "limit must be an integer from 1 to 100")
                    })?;
            }
            "order" => {
                ascending = match value.as_str() {
                    "asc" => true,
                    "desc" => false,
                    other => {
                        return Err(GatewayError::invalid(
                            "order",
                            format!(
                                "Invalid value: '{}'. Supported values are: 'asc' and 'desc'.",
                                other.escape_debug()
                            ),
                        ))
                    }
                }
            }
            "after" => after = Some(value),
            "before" => before = Some(value),
            // `include[]` and the like: every field is there already.
            _ => {}
        }
    }
    let mut items: Vec<&Value> = entry.input.iter().collect();
    if !ascending {
        items.reverse();
    }
    let position = |id: &str| {
        items
            .iter()
            .position(|item| item.get("id").and_then(Value::as_str) == Some(id))
    };
    let start = match &after {
        Some(id) => position(id).map_or(items.len(), |p| p + 1),
        None => 0,
    };
    let end = match &before {
        Some(id) => position(id).unwrap_or(items.len()),
        None => items.len(),
    };
    let window = items.get(start..end.max(start)).unwrap_or_default();
    let page: Vec<&Value> = window.iter().take(limit).copied().collect();
    let id_of = |item: Option<&&Value>| {
        item.and_then(|i| i.get("id"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let body = serde_json::json!({
        "object": "list",
        "data": page,
        "first_id": id_of(page.first()),
        "last_id": id_of(page.last()),
        "has_more": window.len() > page.len(),
    });
    Ok(serde_json::to_vec(&body).unwrap_or_default())
}
