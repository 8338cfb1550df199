//! OpenAI `POST /v1/embeddings` (platform.openai.com/docs/api-reference/embeddings/create)
//! and Azure OpenAI's embeddings: the deployment path (the deployment is the
//! model) and the v1 API (`model` in the body names the deployment).

use serde_json::{json, Value};

use super::{
    base64_floats, fail, floats, json_body, normalised, ok, raw_vector, scenario, tokens, Answer,
};
use crate::azure::{azure_error, Azure};
use crate::dialect::{to_json, Dialect, Failure, Reply};
use crate::http::Request;
use crate::openai::OpenAi;
use crate::scenario::Scenario;

pub const OPENAI_PATH: &str = "/v1/embeddings";
pub const AZURE_DEPLOYMENTS: &str = "/openai/deployments/";
pub const AZURE_V1_PATH: &str = "/openai/v1/embeddings";

/// The request body's arguments; anything else is refused.
const ARGUMENTS: [&str; 5] = ["input", "model", "dimensions", "encoding_format", "user"];
/// Tokens one input may have ("8192 tokens for all embedding models").
const MAX_INPUT_TOKENS: u64 = 8192;
/// Tokens summed over a request's inputs.
const MAX_REQUEST_TOKENS: u64 = 300_000;
/// Inputs in one array ("any array must be 2048 dimensions or less").
const MAX_INPUTS: usize = 2048;
const INPUT_INVALID: &str =
    "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.";

/// An embedding model: its name, default (and largest) dimension, and
/// whether it takes `dimensions`.
#[derive(Debug, Clone, Copy)]
struct Model {
    name: &'static str,
    dims: usize,
    shortens: bool,
}

const MODELS: [Model; 3] = [
    Model {
        name: "text-embedding-3-small",
        dims: 1536,
        shortens: true,
    },
    Model {
        name: "text-embedding-3-large",
        dims: 3072,
        shortens: true,
    },
    Model {
        name: "text-embedding-ada-002",
        dims: 1536,
        shortens: false,
    },
];

fn model(name: &str) -> Option<Model> {
    MODELS.iter().copied().find(|m| m.name == name)
}

/// The model behind an Azure deployment, guessed from its name.
fn deployment_model(deployment: &str) -> Model {
    let pick = if deployment.contains("3-large") {
        1
    } else if deployment.contains("ada") {
        2
    } else {
        0
    };
    MODELS[pick]
}

/// One input: text, or tokens (ids).
#[derive(Debug, PartialEq)]
enum Input {
    Text(String),
    Tokens(Vec<u64>),
}

impl Input {
    fn tokens(&self) -> u64 {
        match self {
            Input::Text(t) => tokens(t),
            Input::Tokens(ids) => ids.len() as u64,
        }
    }

    /// What the vector is derived from.
    fn seed(&self) -> String {
        match self {
            Input::Text(t) => t.clone(),
            Input::Tokens(ids) => ids.iter().map(u64::to_string).collect::<Vec<_>>().join(" "),
        }
    }
}

fn input_invalid() -> Failure {
    Failure::Param {
        message: INPUT_INVALID.into(),
        param: "input".into(),
        code: None,
    }
}

/// `input`: a non-empty string, 1..=2048 non-empty strings, one token
/// array, or 1..=2048 non-empty token arrays.
fn inputs(v: Option<&Value>) -> Result<Vec<Input>, Failure> {
    let ids = |items: &[Value]| -> Option<Vec<u64>> { items.iter().map(Value::as_u64).collect() };
    match v {
        Some(Value::String(s)) if !s.is_empty() => Ok(vec![Input::Text(s.clone())]),
        Some(Value::Array(items)) if !items.is_empty() && items.len() <= MAX_INPUTS => {
            if items
                .iter()
                .all(|i| i.as_str().is_some_and(|s| !s.is_empty()))
            {
                return Ok(items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| Input::Text(s.to_owned()))
                    .collect());
            }
            if let Some(one) = ids(items) {
                return Ok(vec![Input::Tokens(one)]);
            }
            items
                .iter()
                .map(|i| match i.as_array() {
                    Some(a) if !a.is_empty() => ids(a).map(Input::Tokens),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(input_invalid)
        }
        _ => Err(input_invalid()),
    }
}

/// OpenAI's answer for one input over the model's context.
fn too_long(n: u64) -> Failure {
    Failure::Invalid(format!(
        "This model's maximum context length is {MAX_INPUT_TOKENS} tokens, however you requested \
         {n} tokens ({n} in your prompt; 0 for the completion). Please reduce your prompt; or \
         completion length."
    ))
}

/// What a valid request asks for.
struct Plan {
    model: Model,
    inputs: Vec<Input>,
    dims: usize,
    base64: bool,
}

/// The body's rules, whoever serves them. `model`: the model the path
/// names (Azure's deployment), else the body's `model` is required and
/// looked up by `lookup` (`Err`: the vendor's answer for an unknown one).
fn check(
    d: &dyn Dialect,
    body: &Value,
    path_model: Option<Model>,
    lookup: &dyn Fn(&str) -> Result<Model, Answer>,
) -> Result<Plan, Answer> {
    let refuse = |f: Failure| fail(d, &f);
    let Some(obj) = body.as_object() else {
        return Err(refuse(Failure::Invalid(
            "The request body must be a JSON object.".into(),
        )));
    };
    if let Some(message) = crate::openai::unrecognized(obj, &ARGUMENTS) {
        return Err(refuse(Failure::Invalid(message)));
    }
    let model = match path_model {
        Some(m) => m,
        None => {
            let name = obj.get("model").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() {
                return Err(refuse(Failure::Invalid(
                    "you must provide a model parameter".into(),
                )));
            }
            lookup(name)?
        }
    };
    let inputs = inputs(obj.get("input")).map_err(refuse)?;
    let dims = match obj.get("dimensions").unwrap_or(&Value::Null) {
        Value::Null => model.dims,
        _ if !model.shortens => {
            return Err(refuse(Failure::Invalid(
                "This model does not support specifying dimensions.".into(),
            )))
        }
        v => match v.as_u64() {
            Some(n) if (1..=model.dims as u64).contains(&n) => n as usize,
            _ => {
                return Err(refuse(Failure::Param {
                    message: format!(
                    "Invalid value for 'dimensions': {v}. It must be an integer between 1 and {}.",
                    model.dims
                ),
                    param: "dimensions".into(),
                    code: Some("invalid_value"),
                }))
            }
        },
    };
    let base64 = match obj.get("encoding_format").unwrap_or(&Value::Null) {
        Value::Null => false,
        Value::String(s) if s == "float" => false,
        Value::String(s) if s == "base64" => true,
        v => {
            return Err(refuse(Failure::Param {
                message: format!("Invalid value: {v}. Supported values are: 'float' and 'base64'."),
                param: "encoding_format".into(),
                code: Some("invalid_value"),
            }))
        }
    };
    if let Some(n) = inputs
        .iter()
        .map(Input::tokens)
        .find(|n| *n > MAX_INPUT_TOKENS)
    {
        return Err(refuse(too_long(n)));
    }
    let total: u64 = inputs.iter().map(Input::tokens).sum();
    if total > MAX_REQUEST_TOKENS {
        let body = json!({"error": {
            "message": format!("Requested {total} tokens, max {MAX_REQUEST_TOKENS} tokens per request"),
            "type": "max_tokens_per_request", "param": null, "code": "max_tokens_per_request"}});
        return Err(Answer::from(Reply {
            status: 400,
            body: to_json(&body),
            retry_after: None,
        }));
    }
    Ok(Plan {
        model,
        inputs,
        dims,
        base64,
    })
}

/// The `list` of embeddings, in input order (`unindexed`: without their
/// `index`, as some OpenAI-compatible servers list them).
fn answer(plan: &Plan, unindexed: bool) -> Answer {
    let data: Vec<Value> = plan
        .inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            // Shortened text-embedding-3 vectors come back normalised.
            let v = normalised(raw_vector(&input.seed(), plan.dims));
            let embedding = if plan.base64 {
                Value::String(base64_floats(&v))
            } else {
                floats(&v)
            };
            let mut item = json!({"object": "embedding", "index": i, "embedding": embedding});
            if unindexed {
                item.as_object_mut().map(|o| o.remove("index"));
            }
            item
        })
        .collect();
    let n: u64 = plan.inputs.iter().map(Input::tokens).sum();
    ok(&json!({
        "object": "list",
        "data": data,
        "model": plan.model.name,
        "usage": {"prompt_tokens": n, "total_tokens": n},
    }))
}

/// Headers, the model (`path_name`: the one the path names, else the
/// body's), body rules, scenario, answer.
fn serve(
    d: &dyn Dialect,
    req: &Request,
    sc: &Scenario,
    path_name: Option<&str>,
    lookup: &dyn Fn(&str) -> Result<Model, Answer>,
) -> Answer {
    if let Err(f) = d.check_headers(req) {
        return fail(d, &f);
    }
    let path_model = match path_name.map(lookup).transpose() {
        Ok(m) => m,
        Err(a) => return a,
    };
    let plan = match json_body(d, req).and_then(|body| check(d, &body, path_model, lookup)) {
        Ok(p) => p,
        Err(a) => return a,
    };
    if let Err(a) = scenario(d, sc, req, too_long(10_000)) {
        return a;
    }
    answer(&plan, sc.unindexed)
}

/// `POST /v1/embeddings`.
pub fn openai(req: &Request, sc: &Scenario) -> Answer {
    let lookup = |name: &str| {
        model(name).ok_or_else(|| {
            let body = json!({"error": {
                "message": format!("The model `{name}` does not exist or you do not have access to it."),
                "type": "invalid_request_error", "param": null, "code": "model_not_found"}});
            Answer::from(Reply {
                status: 404,
                body: to_json(&body),
                retry_after: None,
            })
        })
    };
    serve(&OpenAi, req, sc, None, &lookup)
}

/// Azure's answer to a deployment whose model does not embed.
fn not_embedding(name: &str) -> Answer {
    Answer::from(azure_error(
        400,
        "OperationNotSupported",
        &format!(
            "The embeddings operation does not work with the specified model, {name}. Please \
             choose different model and try again. You can learn more about which models can be \
             used with each operation here: https://go.microsoft.com/fwlink/?linkid=2197993."
        ),
    ))
}

/// An Azure deployment: one whose name says `embedding` embeds.
fn deployment(name: &str) -> Result<Model, Answer> {
    if name.contains("embedding") {
        Ok(deployment_model(name))
    } else {
        Err(not_embedding(name))
    }
}

/// `POST /openai/deployments/{deployment}/embeddings?api-version=...`.
pub fn azure_deployment(req: &Request, path: &str, sc: &Scenario) -> Answer {
    let name = path
        .split(AZURE_DEPLOYMENTS)
        .nth(1)
        .and_then(|rest| rest.strip_suffix("/embeddings"))
        .unwrap_or("");
    serve(&Azure, req, sc, Some(name), &deployment)
}

/// `POST /openai/v1/embeddings`: `model` names the deployment.
pub fn azure_v1(req: &Request, sc: &Scenario) -> Answer {
    serve(&Azure, req, sc, None, &deployment)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn input_shapes() {
        assert_eq!(
            inputs(Some(&json!("a b"))).unwrap(),
            vec![Input::Text("a b".into())]
        );
        assert_eq!(
            inputs(Some(&json!([1, 2, 3]))).unwrap(),
            vec![Input::Tokens(vec![1, 2, 3])]
        );
        assert_eq!(inputs(Some(&json!([[1], [2, 3]]))).unwrap().len(), 2);
        for bad in [
            json!(""),
            json!([]),
            json!(["a", ""]),
            json!(["a", 1]),
            json!([[1], []]),
            json!([[1], "a"]),
            json!(null),
            json!({"text": "a"}),
        ] {
            assert_eq!(inputs(Some(&bad)), Err(input_invalid()), "{bad}");
        }
        assert!(inputs(None).is_err());
        let many: Vec<Value> = (0..2049).map(|_| json!("x")).collect();
        assert!(inputs(Some(&Value::Array(many))).is_err());
    }
}
