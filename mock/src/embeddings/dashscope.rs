//! DashScope's native text embedding
//! (`POST /api/v1/services/embeddings/text-embedding/text-embedding`,
//! alibabacloud.com/help/en/model-studio/text-embedding-synchronous-api):
//! the models' batch sizes, dimensions and per-line limits, DashScope's
//! error bodies (the DashScope dialect's).

use serde_json::{json, Map, Value};

use super::{fail, floats, json_body, number, ok, request_id, scenario, tokens, vector, Answer};
use crate::dashscope::DashScope;
use crate::dialect::{Dialect, Failure};
use crate::http::Request;
use crate::scenario::Scenario;

pub const PATH: &str = "/api/v1/services/embeddings/text-embedding/text-embedding";

const BODY_KEYS: [&str; 3] = ["model", "input", "parameters"];
const PARAMETERS: [&str; 3] = ["dimension", "text_type", "output_type"];

/// A text embedding model's limits.
struct Model {
    /// Accepted dimensions, the default first.
    dims: &'static [u64],
    /// Texts per request.
    batch: usize,
    /// Tokens per text.
    max_tokens: u64,
    /// Takes `output_type` sparse.
    sparse: bool,
}

fn model(name: &str) -> Option<Model> {
    match name {
        "text-embedding-v4" => Some(Model {
            dims: &[1024, 2048, 1536, 768, 512, 256, 128, 64],
            batch: 10,
            max_tokens: 8192,
            sparse: true,
        }),
        "text-embedding-v3" => Some(Model {
            dims: &[1024, 768, 512],
            batch: 10,
            max_tokens: 8192,
            sparse: true,
        }),
        "text-embedding-v2" | "text-embedding-v1" => Some(Model {
            dims: &[1536],
            batch: 25,
            max_tokens: 2048,
            sparse: false,
        }),
        _ => None,
    }
}

fn invalid(msg: impl Into<String>) -> Failure {
    Failure::Invalid(msg.into())
}

/// What a valid request asks for.
struct Plan {
    texts: Vec<String>,
    dims: usize,
    dense: bool,
    sparse: bool,
}

fn check(body: &Value) -> Result<Plan, Failure> {
    let empty = Map::new();
    let obj = body.as_object().unwrap_or(&empty);
    if let Some(extra) = obj.keys().find(|k| !BODY_KEYS.contains(&k.as_str())) {
        return Err(invalid(format!("Parameter {extra} is not supported.")));
    }
    let name = obj.get("model").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        return Err(invalid("Model not specified."));
    }
    let m = model(name).ok_or_else(|| invalid("Model not exist."))?;
    let texts: Vec<String> = match obj.get("input").and_then(|i| i.get("texts")) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => {
            return Err(invalid(
                "input.texts should be a string or an array of strings",
            ))
        }
    };
    if texts.is_empty() {
        return Err(invalid(
            "Value error, batch size is invalid, it should not be smaller than 1.: input.contents",
        ));
    }
    if texts.len() > m.batch {
        return Err(invalid(format!(
            "Value error, batch size is invalid, it should not be larger than {}.: input.contents",
            m.batch
        )));
    }
    let range = format!("Range of input length should be [1, {}]", m.max_tokens);
    if texts
        .iter()
        .any(|t| t.trim().is_empty() || tokens(t) > m.max_tokens)
    {
        return Err(invalid(range));
    }
    let params = obj
        .get("parameters")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if let Some(extra) = params.keys().find(|k| !PARAMETERS.contains(&k.as_str())) {
        return Err(invalid(format!(
            "parameters.{extra}: parameter {extra} is not supported."
        )));
    }
    let dims = match params.get("dimension") {
        None | Some(Value::Null) => m.dims.first().copied().unwrap_or(1024),
        Some(d) => match d.as_u64().filter(|n| m.dims.contains(n)) {
            Some(n) => n,
            None => {
                let mut allowed: Vec<u64> = m.dims.to_vec();
                allowed.sort_unstable_by(|a, b| b.cmp(a));
                return Err(invalid(format!(
                    "Value error, parameters.dimension should be one of {allowed:?}, got {d}."
                )));
            }
        },
    };
    if let Some(t) = params.get("text_type").filter(|t| !t.is_null()) {
        if !matches!(t.as_str(), Some("query" | "document")) {
            return Err(invalid(format!(
                "Value error, parameters.text_type should be 'query' or 'document', got {t}."
            )));
        }
    }
    let (dense, sparse) = match params.get("output_type").and_then(Value::as_str) {
        None | Some("dense") => (true, false),
        Some("sparse") if m.sparse => (false, true),
        Some("dense&sparse") if m.sparse => (true, true),
        Some(other) => {
            return Err(invalid(format!(
                "Value error, parameters.output_type {other} is not supported by {name}."
            )))
        }
    };
    Ok(Plan {
        texts,
        dims: dims as usize,
        dense,
        sparse,
    })
}

/// A sparse embedding: one weight per distinct word.
fn sparse(text: &str) -> Value {
    let mut seen: Vec<&str> = Vec::new();
    for w in text.split_whitespace() {
        if !seen.contains(&w) {
            seen.push(w);
        }
    }
    let weights = vector(text, seen.len());
    let entries: Vec<Value> = seen
        .iter()
        .zip(&weights)
        .enumerate()
        .map(|(i, (w, x))| json!({"index": i, "value": number(x.abs()), "token": w}))
        .collect();
    Value::Array(entries)
}

/// `POST /api/v1/services/embeddings/text-embedding/text-embedding`.
pub fn embed(req: &Request, sc: &Scenario) -> Answer {
    let d = &DashScope;
    if let Err(f) = d.check_headers(req) {
        return fail(d, &f);
    }
    let plan = match json_body(d, req).and_then(|b| check(&b).map_err(|f| fail(d, &f))) {
        Ok(p) => p,
        Err(a) => return a,
    };
    if let Err(a) = scenario(
        d,
        sc,
        req,
        invalid("Range of input length should be [1, 8192]"),
    ) {
        return a;
    }
    let embeddings: Vec<Value> = plan
        .texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut e = json!({ "text_index": i });
            if plan.dense {
                e["embedding"] = floats(&vector(t, plan.dims));
            }
            if plan.sparse {
                e["sparse_embedding"] = sparse(t);
            }
            e
        })
        .collect();
    let n: u64 = plan.texts.iter().map(|t| tokens(t)).sum();
    ok(&json!({
        "output": {"embeddings": embeddings},
        "usage": {"total_tokens": n},
        "request_id": request_id(&plan.texts.concat()),
    }))
}
