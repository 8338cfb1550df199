//! Gemini `POST /v1beta/models/{model}:embedContent` and
//! `:batchEmbedContents` (ai.google.dev/api/embeddings): Google's field
//! checks and error bodies (the Gemini dialect's), at most 100 requests a
//! batch, each naming the URL's model. Vectors are the model's full
//! dimension truncated to `outputDimensionality` ("excessive values in the
//! output embedding are truncated from the end"). No token usage is reported.

use serde_json::{json, Value};

use super::{fail, floats, json_body, ok, scenario, vector, Answer};
use crate::dialect::{to_json, Dialect, Failure, Reply};
use crate::gemini::{check_fields, Gemini};
use crate::http::Request;
use crate::scenario::Scenario;

pub const PATH_PREFIX: &str = "/v1beta/models/";
pub const EMBED: &str = ":embedContent";
pub const BATCH: &str = ":batchEmbedContents";

/// EmbedContentRequest's fields, camelCase and proto names both.
const REQUEST_FIELDS: &[&str] = &[
    "model",
    "content",
    "taskType",
    "task_type",
    "title",
    "outputDimensionality",
    "output_dimensionality",
];
const CONTENT_FIELDS: &[&str] = &["role", "parts"];
const PART_FIELDS: &[&str] = &["text", "inlineData", "inline_data", "fileData", "file_data"];
const TASK_TYPES: [&str; 9] = [
    "TASK_TYPE_UNSPECIFIED",
    "RETRIEVAL_QUERY",
    "RETRIEVAL_DOCUMENT",
    "SEMANTIC_SIMILARITY",
    "CLASSIFICATION",
    "CLUSTERING",
    "QUESTION_ANSWERING",
    "FACT_VERIFICATION",
    "CODE_RETRIEVAL_QUERY",
];
/// Requests in one batch.
const MAX_BATCH: usize = 100;

/// An embedding model: name, default dimension, smallest dimension asked.
struct Model {
    dims: usize,
    min_dims: u64,
}

fn model(name: &str) -> Option<Model> {
    match name {
        "gemini-embedding-001" => Some(Model {
            dims: 3072,
            min_dims: 128,
        }),
        "text-embedding-004" => Some(Model {
            dims: 768,
            min_dims: 1,
        }),
        _ => None,
    }
}

fn invalid(msg: impl Into<String>) -> Failure {
    Failure::Invalid(msg.into())
}

/// A field error in Google's list form (`* Field: message\n`).
fn field_error(at: &str, msg: &str) -> Failure {
    invalid(format!("* {at}: {msg}\n"))
}

/// Google's 404 for a model that does not embed.
fn not_found(name: &str, method: &str) -> Answer {
    let body = json!({"error": {"code": 404, "status": "NOT_FOUND", "message": format!(
        "models/{name} is not found for API version v1beta, or is not supported for {method}. \
         Call ListModels to see the list of available models and their supported methods.")}});
    Answer::from(Reply {
        status: 404,
        body: to_json(&body),
        retry_after: None,
    })
}

/// Either spelling of a field.
fn field<'a>(v: &'a Value, camel: &str, proto: &str) -> Option<&'a Value> {
    v.get(camel)
        .or_else(|| v.get(proto))
        .filter(|f| !f.is_null())
}

/// One EmbedContentRequest, checked: its text and dimension. `at` is the
/// field path of its body in errors (`''` for embedContent's own body,
/// `requests[0]` in a batch); `name` the proto path (`EmbedContentRequest`,
/// `BatchEmbedContentsRequest.requests[0]`).
fn check_request(
    r: &Value,
    m: &Model,
    at: &str,
    name: &str,
    url_model: &str,
    batch: bool,
) -> Result<(String, usize), Failure> {
    check_fields(r, REQUEST_FIELDS, at)?;
    let join = |f: &str| {
        if at.is_empty() {
            f.to_owned()
        } else {
            format!("{at}.{f}")
        }
    };
    match r.get("model").filter(|v| !v.is_null()) {
        None if batch => {
            return Err(field_error(
                &format!("{name}.model"),
                "model is not specified",
            ))
        }
        None => {}
        Some(v) => match v.as_str().and_then(|s| s.strip_prefix("models/")) {
            None => {
                return Err(field_error(
                    &format!("{name}.model"),
                    "unexpected model name format",
                ))
            }
            Some(named) if batch && named != url_model => {
                return Err(field_error(
                    &format!("{name}.model"),
                    &format!("the model of each request must be the batch's, models/{url_model}"),
                ))
            }
            Some(_) => {}
        },
    }
    let task = match field(r, "taskType", "task_type") {
        None => None,
        Some(t) => match t.as_str().filter(|t| TASK_TYPES.contains(t)) {
            Some(t) => Some(t),
            None => {
                return Err(invalid(format!(
                    "Invalid value at '{}' (type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), {t}",
                    join("task_type")
                )))
            }
        },
    };
    if field(r, "title", "title").is_some() && task != Some("RETRIEVAL_DOCUMENT") {
        return Err(field_error(
            &format!("{name}.title"),
            "title is only applicable when task_type is RETRIEVAL_DOCUMENT",
        ));
    }
    let dims = match field(r, "outputDimensionality", "output_dimensionality") {
        None => m.dims,
        Some(v) => match v.as_i64() {
            None => {
                return Err(invalid(format!(
                    "Invalid value at '{}' (TYPE_INT32), {v}",
                    join("output_dimensionality")
                )))
            }
            Some(n) if n >= m.min_dims as i64 && n <= m.dims as i64 => n as usize,
            Some(n) => {
                return Err(field_error(
                    &format!("{name}.output_dimensionality"),
                    &format!(
                        "output_dimensionality must be between {} and {}, got {n}",
                        m.min_dims, m.dims
                    ),
                ))
            }
        },
    };
    let content_at = join("content");
    let Some(content) = r.get("content").filter(|c| !c.is_null()) else {
        return Err(field_error(
            &format!("{name}.content"),
            "content is not specified",
        ));
    };
    check_fields(content, CONTENT_FIELDS, &content_at)?;
    let parts = content
        .get("parts")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if parts.is_empty() {
        return Err(field_error(
            &format!("{name}.content"),
            "contents.parts must not be empty.",
        ));
    }
    let mut texts = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        check_fields(part, PART_FIELDS, &format!("{content_at}.parts[{i}]"))?;
        if part.as_object().is_some_and(|p| p.is_empty()) {
            return Err(field_error(
                &format!("{name}.content.parts[{i}].data"),
                "required oneof field 'data' must have one initialized field",
            ));
        }
        if let Some(t) = part.get("text").and_then(Value::as_str) {
            texts.push(t);
        }
    }
    let text = texts.join(" ");
    if text.trim().is_empty() {
        return Err(invalid("Request contains an invalid argument."));
    }
    Ok((text, dims))
}

/// One `ContentEmbedding`.
fn values(text: &str, m: &Model, dims: usize) -> Value {
    let full = vector(text, m.dims);
    json!({"values": floats(full.get(..dims).unwrap_or(&full))})
}

/// `embedContent` (`batch` false) or `batchEmbedContents`.
pub fn embed(req: &Request, path: &str, sc: &Scenario, batch: bool) -> Answer {
    let d = &Gemini;
    if let Err(f) = d.check_headers(req) {
        return fail(d, &f);
    }
    let method = if batch {
        "batchEmbedContents"
    } else {
        "embedContent"
    };
    let name = path
        .split(PATH_PREFIX)
        .nth(1)
        .and_then(|rest| rest.split_once(':'))
        .map_or("", |(m, _)| m);
    let Some(m) = model(name) else {
        return not_found(name, method);
    };
    let body = match json_body(d, req) {
        Ok(b) => b,
        Err(a) => return a,
    };
    let checked = if batch {
        check_batch(&body, &m, name)
    } else {
        check_request(&body, &m, "", "EmbedContentRequest", name, false).map(|one| vec![one])
    };
    let items = match checked {
        Ok(items) => items,
        Err(f) => return fail(d, &f),
    };
    let context = invalid(
        "The input token count (10000) exceeds the maximum number of tokens allowed (2048).",
    );
    if let Err(a) = scenario(d, sc, req, context) {
        return a;
    }
    if batch {
        let embeddings: Vec<Value> = items.iter().map(|(t, n)| values(t, &m, *n)).collect();
        return ok(&json!({ "embeddings": embeddings }));
    }
    let embedding = items
        .first()
        .map_or(Value::Null, |(t, n)| values(t, &m, *n));
    ok(&json!({ "embedding": embedding }))
}

/// BatchEmbedContentsRequest: `requests`, 1..=100 of them.
fn check_batch(body: &Value, m: &Model, url_model: &str) -> Result<Vec<(String, usize)>, Failure> {
    check_fields(body, &["requests"], "")?;
    let requests = body
        .get("requests")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if requests.is_empty() {
        return Err(field_error(
            "BatchEmbedContentsRequest.requests",
            "requests must not be empty",
        ));
    }
    if requests.len() > MAX_BATCH {
        return Err(field_error(
            "BatchEmbedContentsRequest.requests",
            "at most 100 requests can be in one batch",
        ));
    }
    requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            check_request(
                r,
                m,
                &format!("requests[{i}]"),
                &format!("BatchEmbedContentsRequest.requests[{i}]"),
                url_model,
                true,
            )
        })
        .collect()
}
