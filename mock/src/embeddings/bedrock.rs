//! Bedrock InvokeModel (`POST /model/{modelId}/invoke`) for embedding
//! models: Titan Text Embeddings (docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-titan-embed-text.html)
//! and Cohere Embed v3 / v4 (model-parameters-embed-v3.html, -embed-v4.html).
//! SigV4 and errors are the Converse dialect's (`x-amzn-errortype`); body
//! violations are reported as Bedrock's JSON-schema check words them
//! ("Malformed input request: #: extraneous key [x] is not permitted, ...").
//! Answers carry `X-Amzn-Bedrock-Input-Token-Count`.

use serde_json::{json, Map, Value};

use super::{fail, floats, ok, raw_vector, request_id, scenario, tokens, vector, Answer};
use crate::bedrock::{path_model, Bedrock};
use crate::dialect::{Dialect, Failure};
use crate::http::Request;
use crate::scenario::Scenario;
use crate::sigv4::Verifier;

/// The embedding models, told apart by the path's model id.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// `amazon.titan-embed-text-v2:0`.
    TitanV2,
    /// `amazon.titan-embed-text-v1` (`inputText` only, 1536 dimensions).
    TitanV1,
    /// `cohere.embed-english-v3`, `cohere.embed-multilingual-v3`.
    CohereV3,
    /// `cohere.embed-v4:0`.
    CohereV4,
}

/// Cross-region inference profiles' prefixes (`us.cohere.embed-v4:0`).
const GEO_PREFIXES: [&str; 8] = ["us", "eu", "apac", "global", "us-gov", "jp", "au", "ca"];

impl Kind {
    /// The embedding model a `/model/{id}/invoke` path names, if any: a
    /// model id, an inference profile's, or an ARN ending in either.
    pub fn of_path(path: &str) -> Option<Kind> {
        let id = path_model(path);
        let id = id.rsplit_once('/').map_or(id.as_str(), |(_, last)| last);
        let id = match id.split_once('.') {
            Some((geo, rest)) if GEO_PREFIXES.contains(&geo) => rest,
            _ => id,
        };
        match id {
            "amazon.titan-embed-text-v2:0" => Some(Kind::TitanV2),
            "amazon.titan-embed-text-v1" => Some(Kind::TitanV1),
            "cohere.embed-english-v3" | "cohere.embed-multilingual-v3" => Some(Kind::CohereV3),
            "cohere.embed-v4:0" | "cohere.embed-v4" => Some(Kind::CohereV4),
            _ => None,
        }
    }
}

/// Schema violations, reported all at once as Bedrock does.
#[derive(Default)]
struct Violations(Vec<String>);

impl Violations {
    fn add(&mut self, v: String) {
        self.0.push(v);
    }

    /// Members of `obj` that `allowed` does not list.
    fn extraneous(&mut self, obj: &Map<String, Value>, allowed: &[&str]) {
        for k in obj.keys().filter(|k| !allowed.contains(&k.as_str())) {
            self.add(format!("#: extraneous key [{k}] is not permitted"));
        }
    }

    fn required(&mut self, key: &str) {
        self.add(format!("#: required key [{key}] not found"));
    }

    fn not_enum(&mut self, at: &str, v: &Value) {
        let shown = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        self.add(format!("#/{at}: {shown} is not a valid enum value"));
    }

    fn wrong_type(&mut self, at: &str, expected: &str, v: &Value) {
        let found = match v {
            Value::Null => "Null",
            Value::Bool(_) => "Boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "Integer",
            Value::Number(_) => "BigDecimal",
            Value::String(_) => "String",
            Value::Array(_) => "JSONArray",
            Value::Object(_) => "JSONObject",
        };
        self.add(format!("#/{at}: expected type: {expected}, found: {found}"));
    }

    /// An array of strings from `allowed`, at least one.
    fn enum_list(&mut self, at: &str, v: &Value, allowed: &[&str]) -> Vec<String> {
        let Some(items) = v.as_array() else {
            self.wrong_type(at, "JSONArray", v);
            return Vec::new();
        };
        if items.is_empty() {
            self.add(format!("#/{at}: expected minItems: 1, actual: 0"));
        }
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item.as_str().filter(|s| allowed.contains(s)) {
                Some(s) => out.push(s.to_owned()),
                None => self.not_enum(&format!("{at}/{i}"), item),
            }
        }
        out
    }

    fn into_result(self) -> Result<(), Failure> {
        if self.0.is_empty() {
            return Ok(());
        }
        Err(Failure::Invalid(format!(
            "Malformed input request: {}, please reformat your input and try again.",
            self.0.concat()
        )))
    }
}

/// What a valid request asks for.
struct Plan {
    /// Texts (or image data URIs) to embed, in order.
    inputs: Vec<String>,
    /// `texts` as sent (Cohere's answer repeats them).
    texts: Vec<String>,
    dims: usize,
    normalize: bool,
    /// `embeddingTypes` / `embedding_types` asked for, if any.
    types: Option<Vec<String>>,
}

const TITAN_KEYS: [&str; 4] = ["inputText", "dimensions", "normalize", "embeddingTypes"];
const TITAN_MAX_CHARS: usize = 50_000;

fn check_titan(obj: &Map<String, Value>, kind: Kind) -> Result<Plan, Failure> {
    let mut v = Violations::default();
    v.extraneous(
        obj,
        if kind == Kind::TitanV1 {
            &TITAN_KEYS[..1]
        } else {
            &TITAN_KEYS
        },
    );
    let text = match obj.get("inputText") {
        None => {
            v.required("inputText");
            String::new()
        }
        Some(Value::String(s)) => {
            let n = s.chars().count();
            if n == 0 {
                v.add("#/inputText: expected minLength: 1, actual: 0".into());
            } else if n > TITAN_MAX_CHARS {
                v.add(format!(
                    "#/inputText: expected maxLength: {TITAN_MAX_CHARS}, actual: {n}"
                ));
            }
            s.clone()
        }
        Some(other) => {
            v.wrong_type("inputText", "String", other);
            String::new()
        }
    };
    let dims = match obj.get("dimensions") {
        None => {
            if kind == Kind::TitanV1 {
                1536
            } else {
                1024
            }
        }
        Some(d) => match d.as_u64() {
            Some(n @ (1024 | 512 | 256)) => n as usize,
            _ => {
                v.not_enum("dimensions", d);
                1024
            }
        },
    };
    let normalize = match obj.get("normalize") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            v.wrong_type("normalize", "Boolean", other);
            true
        }
    };
    let types = obj
        .get("embeddingTypes")
        .map(|t| v.enum_list("embeddingTypes", t, &["float", "binary"]));
    v.into_result()?;
    Ok(Plan {
        inputs: vec![text],
        texts: Vec::new(),
        dims,
        normalize,
        types,
    })
}

const COHERE_V3_KEYS: [&str; 5] = [
    "input_type",
    "texts",
    "images",
    "truncate",
    "embedding_types",
];
const COHERE_V4_KEYS: [&str; 8] = [
    "input_type",
    "texts",
    "images",
    "inputs",
    "truncate",
    "embedding_types",
    "output_dimension",
    "max_tokens",
];
const INPUT_TYPES: [&str; 4] = [
    "search_document",
    "search_query",
    "classification",
    "clustering",
];
const EMBEDDING_TYPES: [&str; 5] = ["float", "int8", "uint8", "binary", "ubinary"];
/// Texts (and images) per call.
const COHERE_MAX_ITEMS: usize = 96;
/// Characters per text (Embed v3).
const COHERE_V3_MAX_CHARS: usize = 2048;

/// A list of strings at `key` (texts, images), at most `max`.
fn strings(
    v: &mut Violations,
    key: &str,
    value: &Value,
    max: usize,
    max_chars: Option<usize>,
) -> Vec<String> {
    let Some(items) = value.as_array() else {
        v.wrong_type(key, "JSONArray", value);
        return Vec::new();
    };
    if items.len() > max {
        v.add(format!(
            "#/{key}: expected maxItems: {max}, actual: {}",
            items.len()
        ));
    }
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(s) = item.as_str() else {
            v.wrong_type(&format!("{key}/{i}"), "String", item);
            continue;
        };
        let n = s.chars().count();
        if let Some(limit) = max_chars.filter(|l| n > *l) {
            v.add(format!(
                "#/{key}/{i}: expected maxLength: {limit}, actual: {n}"
            ));
        }
        out.push(s.to_owned());
    }
    out
}

fn check_cohere(obj: &Map<String, Value>, kind: Kind) -> Result<Plan, Failure> {
    let v4 = kind == Kind::CohereV4;
    let mut v = Violations::default();
    v.extraneous(obj, if v4 { &COHERE_V4_KEYS } else { &COHERE_V3_KEYS });
    match obj.get("input_type") {
        None => v.required("input_type"),
        Some(t) => {
            // Embed v3 takes `image` too, for `images`.
            let known = t
                .as_str()
                .is_some_and(|s| INPUT_TYPES.contains(&s) || (!v4 && s == "image"));
            if !known {
                v.not_enum("input_type", t);
            }
        }
    }
    let max_chars = (!v4).then_some(COHERE_V3_MAX_CHARS);
    let texts = obj
        .get("texts")
        .map(|t| strings(&mut v, "texts", t, COHERE_MAX_ITEMS, max_chars));
    let max_images = if v4 { COHERE_MAX_ITEMS } else { 1 };
    let images = obj
        .get("images")
        .map(|t| strings(&mut v, "images", t, max_images, None));
    let inputs = obj.get("inputs").map(|i| interleaved(&mut v, i));
    let given = [texts.is_some(), images.is_some(), inputs.is_some()];
    match given.iter().filter(|g| **g).count() {
        0 => v.required("texts"),
        1 => {}
        _ => v.add("#: only one of [texts, images, inputs] may be given".into()),
    }
    if let Some(t) = obj.get("truncate") {
        let allowed: &[&str] = if v4 {
            &["NONE", "LEFT", "RIGHT"]
        } else {
            &["NONE", "START", "END"]
        };
        if !t.as_str().is_some_and(|s| allowed.contains(&s)) {
            v.not_enum("truncate", t);
        }
    }
    let types = obj
        .get("embedding_types")
        .map(|t| v.enum_list("embedding_types", t, &EMBEDDING_TYPES));
    let mut dims = 1024;
    if v4 {
        dims = match obj.get("output_dimension") {
            None => 1536,
            Some(d) => match d.as_u64() {
                Some(n @ (256 | 512 | 1024 | 1536)) => n as usize,
                _ => {
                    v.not_enum("output_dimension", d);
                    1536
                }
            },
        };
        match obj.get("max_tokens").map(|m| (m, m.as_u64())) {
            None | Some((_, Some(1..))) => {}
            Some((_, Some(n))) => v.add(format!("#/max_tokens: {n} is not greater or equal to 1")),
            Some((m, None)) => v.wrong_type("max_tokens", "Integer", m),
        }
    }
    v.into_result()?;
    let texts = texts.unwrap_or_default();
    let inputs = if texts.is_empty() {
        images.or(inputs).unwrap_or_default()
    } else {
        texts.clone()
    };
    Ok(Plan {
        inputs,
        texts,
        dims,
        normalize: true,
        types,
    })
}

/// Embed v4's `inputs`: `[{content: [{type: text, text} | {type: image_url, image_url}]}]`,
/// each embedded from its parts joined.
fn interleaved(v: &mut Violations, value: &Value) -> Vec<String> {
    let Some(items) = value.as_array() else {
        v.wrong_type("inputs", "JSONArray", value);
        return Vec::new();
    };
    if items.len() > COHERE_MAX_ITEMS {
        v.add(format!(
            "#/inputs: expected maxItems: {COHERE_MAX_ITEMS}, actual: {}",
            items.len()
        ));
    }
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(parts) = item.get("content").and_then(Value::as_array) else {
            v.add(format!("#/inputs/{i}: required key [content] not found"));
            continue;
        };
        let mut text = Vec::new();
        for (j, p) in parts.iter().enumerate() {
            match p.get("type").and_then(Value::as_str) {
                Some("text") => text.push(p.get("text").and_then(Value::as_str).unwrap_or("")),
                Some("image_url") => {
                    text.push(p.get("image_url").and_then(Value::as_str).unwrap_or(""))
                }
                _ => v.not_enum(
                    &format!("inputs/{i}/content/{j}/type"),
                    p.get("type").unwrap_or(&Value::Null),
                ),
            }
        }
        out.push(text.join(" "));
    }
    out
}

/// Packs the signs of `v` 8 to a byte, most significant bit first.
fn packed_signs(v: &[f32]) -> Vec<u8> {
    v.chunks(8)
        .map(|c| {
            c.iter()
                .enumerate()
                .fold(0u8, |b, (i, x)| if *x > 0.0 { b | (0x80 >> i) } else { b })
        })
        .collect()
}

/// One vector in Cohere's `kind` (int8 and uint8 scaled to the largest component).
fn cohere_typed(v: &[f32], kind: &str) -> Value {
    let max = v
        .iter()
        .fold(0f32, |m, x| m.max(x.abs()))
        .max(f32::MIN_POSITIVE);
    let int8 = |x: &f32| (x / max * 127.0).round() as i64;
    match kind {
        "int8" => json!(v.iter().map(int8).collect::<Vec<_>>()),
        "uint8" => json!(v.iter().map(|x| int8(x) + 128).collect::<Vec<_>>()),
        "ubinary" => json!(packed_signs(v)),
        "binary" => json!(packed_signs(v)
            .iter()
            .map(|b| i64::from(*b) - 128)
            .collect::<Vec<_>>()),
        _ => floats(v),
    }
}

fn titan_answer(plan: &Plan, kind: Kind) -> (serde_json::Value, u64) {
    let text = plan.inputs.first().map_or("", String::as_str);
    let n = tokens(text);
    let v = if plan.normalize {
        vector(text, plan.dims)
    } else {
        raw_vector(text, plan.dims)
    };
    let mut body = json!({"embedding": floats(&v), "inputTextTokenCount": n});
    if kind == Kind::TitanV2 {
        // Always there: `float` unless embeddingTypes says otherwise.
        let types = plan.types.clone().unwrap_or_else(|| vec!["float".into()]);
        let mut by_type = Map::new();
        for t in types {
            let value = if t == "binary" {
                json!(v.iter().map(|x| u8::from(*x > 0.0)).collect::<Vec<_>>())
            } else {
                floats(&v)
            };
            by_type.insert(t, value);
        }
        body["embeddingsByType"] = Value::Object(by_type);
    }
    (body, n)
}

fn cohere_answer(plan: &Plan) -> (serde_json::Value, u64) {
    let vectors: Vec<Vec<f32>> = plan.inputs.iter().map(|t| vector(t, plan.dims)).collect();
    let n: u64 = plan.inputs.iter().map(|t| tokens(t)).sum();
    let id = request_id(&plan.inputs.concat());
    let body = match &plan.types {
        None => json!({
            "embeddings": vectors.iter().map(|v| floats(v)).collect::<Vec<_>>(),
            "id": id, "response_type": "embeddings_floats", "texts": plan.texts,
        }),
        Some(types) => {
            let mut by_type = Map::new();
            for t in types {
                let all: Vec<Value> = vectors.iter().map(|v| cohere_typed(v, t)).collect();
                by_type.insert(t.clone(), Value::Array(all));
            }
            json!({"embeddings": by_type, "id": id, "response_type": "embeddings_by_type",
                   "texts": plan.texts})
        }
    };
    (body, n)
}

/// `POST /model/{embedding model}/invoke`.
pub fn invoke(req: &Request, path: &str, sc: &Scenario, aws: Option<Verifier>) -> Answer {
    let d = &Bedrock { credentials: aws };
    if let Err(f) = d.check_headers(req) {
        return fail(d, &f);
    }
    let Some(kind) = Kind::of_path(path) else {
        return fail(d, &Failure::Status(404));
    };
    let body: Option<Value> = serde_json::from_slice(&req.body).ok();
    let Some(obj) = body.as_ref().and_then(Value::as_object) else {
        return fail(
            d,
            &Failure::Invalid(
                "Malformed input request: #: expected type: JSONObject, please reformat your \
                 input and try again."
                    .into(),
            ),
        );
    };
    let plan = match kind {
        Kind::TitanV2 | Kind::TitanV1 => check_titan(obj, kind),
        Kind::CohereV3 | Kind::CohereV4 => check_cohere(obj, kind),
    };
    let plan = match plan {
        Ok(p) => p,
        Err(f) => return fail(d, &f),
    };
    if let Err(a) = scenario(d, sc, req, Failure::ContextLength) {
        return a;
    }
    let (body, n) = match kind {
        Kind::TitanV2 | Kind::TitanV1 => titan_answer(&plan, kind),
        Kind::CohereV3 | Kind::CohereV4 => cohere_answer(&plan),
    };
    let mut a = ok(&body);
    a.headers
        .push(("X-Amzn-Bedrock-Input-Token-Count", n.to_string()));
    a
}
