//! OpenAI's embeddings API (`POST /v1/embeddings`), both directions: the
//! client's request read strictly (as OpenAI's validator reads it) into
//! the neutral [`EmbedRequest`], the vendor request the OpenAI and Azure
//! dialects send, the vendor's answer, and the answer clients get.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::GatewayError;
use crate::model::embed::{EmbedInput, EmbedRequest, Embeddings, Encoding, Task};
use crate::model::json::Strict;

/// OpenAI's limit on inputs per request.
pub const MAX_INPUTS: usize = 2048;

/// The request arguments OpenAI takes, and the gateway's `task_type`.
const ARGUMENTS: [&str; 6] = [
    "input",
    "model",
    "dimensions",
    "encoding_format",
    "user",
    "task_type",
];

fn invalid_input(why: &str) -> GatewayError {
    GatewayError::invalid(
        "input",
        format!(
            "'$.input' is invalid: {why}. Please check the API reference: \
             https://platform.openai.com/docs/api-reference."
        ),
    )
}

/// Reads a client's embeddings request, refusing what OpenAI refuses.
pub fn parse(body: &[u8]) -> Result<EmbedRequest, GatewayError> {
    let Strict(value) = serde_json::from_slice(body).map_err(|e| {
        GatewayError::invalid(
            "body",
            format!("We could not parse the JSON body of your request: {e}"),
        )
    })?;
    let Value::Object(mut fields) = value else {
        return Err(GatewayError::invalid(
            "body",
            "the request body must be a JSON object",
        ));
    };
    if let Some(unknown) = fields.keys().find(|k| !ARGUMENTS.contains(&k.as_str())) {
        return Err(GatewayError::invalid(
            unknown.as_str(),
            format!("Unrecognized request argument supplied: {unknown}"),
        ));
    }
    let model = match fields.remove("model") {
        Some(Value::String(model)) if !model.is_empty() => model,
        Some(_) => return Err(GatewayError::invalid("model", "`model` must be a string")),
        None => {
            return Err(GatewayError::invalid(
                "model",
                "you must provide a model parameter",
            ))
        }
    };
    let input = read_input(fields.remove("input"))?;
    let dimensions = match fields.remove("dimensions") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(d) if d > 0 => Some(d),
            _ => {
                return Err(GatewayError::invalid(
                    "dimensions",
                    "`dimensions` must be a positive integer",
                ))
            }
        },
        Some(_) => {
            return Err(GatewayError::invalid(
                "dimensions",
                "`dimensions` must be an integer",
            ))
        }
    };
    let encoding = match fields.remove("encoding_format") {
        None | Some(Value::Null) => Encoding::Float,
        Some(Value::String(s)) if s == "float" => Encoding::Float,
        Some(Value::String(s)) if s == "base64" => Encoding::Base64,
        Some(_) => {
            return Err(GatewayError::invalid(
                "encoding_format",
                "`encoding_format` must be 'float' or 'base64'",
            ))
        }
    };
    let user = match fields.remove("user") {
        None | Some(Value::Null) => None,
        Some(Value::String(user)) => Some(user),
        Some(_) => return Err(GatewayError::invalid("user", "`user` must be a string")),
    };
    let task = match fields.remove("task_type") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(Task::parse(&name).ok_or_else(|| {
            GatewayError::invalid(
                "task_type",
                format!(
                    "unknown task_type '{}': one of {}",
                    name.escape_debug(),
                    Task::names()
                ),
            )
        })?),
        Some(_) => {
            return Err(GatewayError::invalid(
                "task_type",
                "`task_type` must be a string",
            ))
        }
    };
    Ok(EmbedRequest {
        model,
        input,
        dimensions,
        encoding,
        user,
        task,
        titles: Vec::new(),
        mixed: Vec::new(),
    })
}

/// `input`: a string, strings, a token array or token arrays, none empty.
fn read_input(input: Option<Value>) -> Result<EmbedInput, GatewayError> {
    let items = match input {
        None => {
            return Err(GatewayError::invalid(
                "input",
                "Missing required parameter: 'input'.",
            ))
        }
        Some(Value::String(text)) if text.is_empty() => {
            return Err(invalid_input("an empty string embeds nothing"))
        }
        Some(Value::String(text)) => return Ok(EmbedInput::Texts(vec![text])),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(invalid_input("expected a string or an array")),
    };
    if items.is_empty() {
        return Err(invalid_input("an empty array embeds nothing"));
    }
    if items.len() > MAX_INPUTS {
        return Err(invalid_input(&format!(
            "at most {MAX_INPUTS} inputs are accepted, and it has {}",
            items.len()
        )));
    }
    match items.first() {
        Some(Value::String(_)) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(text) if !text.is_empty() => Ok(text),
                Value::String(_) => Err(invalid_input(&format!("input[{i}] is an empty string"))),
                _ => Err(invalid_input(&format!(
                    "input[{i}] is not a string (an array holds one kind of input)"
                ))),
            })
            .collect::<Result<_, _>>()
            .map(EmbedInput::Texts),
        Some(Value::Number(_)) => tokens(&items, None).map(|t| EmbedInput::Tokens(vec![t])),
        Some(Value::Array(_)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Array(inner) if !inner.is_empty() => tokens(inner, Some(i)),
                _ => Err(invalid_input(&format!(
                    "input[{i}] is not a non-empty array of tokens"
                ))),
            })
            .collect::<Result<_, _>>()
            .map(EmbedInput::Tokens),
        _ => Err(invalid_input("expected strings or token arrays")),
    }
}

fn tokens(items: &[Value], outer: Option<usize>) -> Result<Vec<u32>, GatewayError> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_u64()
                .and_then(|t| u32::try_from(t).ok())
                .ok_or_else(|| {
                    let at = outer.map_or(format!("input[{i}]"), |o| format!("input[{o}][{i}]"));
                    invalid_input(&format!("{at} is not a token (a non-negative integer)"))
                })
        })
        .collect()
}

/// The request the OpenAI and Azure dialects send (`model`: none on
/// Azure's deployment paths, where the path names it). The vectors are
/// asked for in base64: a quarter of the bytes of floats, exact.
#[derive(Serialize)]
pub struct VendorRequest<'a> {
    pub input: VendorInput<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
    pub encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(untagged)]
pub enum VendorInput<'a> {
    Texts(&'a [String]),
    Tokens(&'a [Vec<u32>]),
}

impl<'a> VendorRequest<'a> {
    pub fn of(req: &'a EmbedRequest, model: Option<&'a str>) -> Self {
        Self {
            input: match &req.input {
                EmbedInput::Texts(texts) => VendorInput::Texts(texts),
                EmbedInput::Tokens(tokens) => VendorInput::Tokens(tokens),
            },
            model,
            dimensions: req.dimensions,
            encoding_format: "base64",
            user: req.user.as_deref(),
        }
    }
}

/// A request of OpenAI's shape with the gateway's `task_type`: a part of a
/// batch the gateway split for an OpenAI client (`session::edge::batch`),
/// its vectors asked for in base64 whatever the client asked.
#[derive(Serialize)]
pub struct PartRequest<'a> {
    #[serde(flatten)]
    pub request: VendorRequest<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_type: Option<&'static str>,
}

impl<'a> PartRequest<'a> {
    pub fn of(req: &'a EmbedRequest) -> Self {
        Self {
            request: VendorRequest::of(req, Some(&req.model)),
            task_type: req.task.map(Task::name),
        }
    }
}

/// The vendor's answer (OpenAI's and Azure's).
struct VendorAnswer {
    data: Vec<VendorEmbedding>,
    usage: Option<VendorUsage>,
    /// The model it names. Only a name costs it: a `model` that is not a
    /// string, or given twice, is none, and the answer stands.
    model: Option<String>,
}

/// Read by hand for `model`'s sake (a derived reader refuses the whole
/// answer for a field given twice); `data` and `usage` as derived: each at
/// most once, `data` required, other members skipped.
impl<'de> Deserialize<'de> for VendorAnswer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = VendorAnswer;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an embeddings list")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<VendorAnswer, A::Error> {
                use serde::de::Error;
                let (mut data, mut usage, mut model) = (None, None, None);
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "data" if data.is_some() => return Err(A::Error::duplicate_field("data")),
                        "data" => data = Some(map.next_value()?),
                        "usage" if usage.is_some() => {
                            return Err(A::Error::duplicate_field("usage"))
                        }
                        "usage" => usage = Some(map.next_value::<Option<VendorUsage>>()?),
                        "model" => {
                            let name = match map.next_value::<serde_json::Value>()? {
                                serde_json::Value::String(name) => Some(name),
                                _ => None,
                            };
                            // Given twice: neither.
                            model = Some(if model.is_some() { None } else { name });
                        }
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(VendorAnswer {
                    data: data.ok_or_else(|| A::Error::missing_field("data"))?,
                    usage: usage.flatten(),
                    model: model.flatten(),
                })
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
struct VendorEmbedding {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vector,
}

/// A vector as the vendor wrote it: numbers, or base64 (`encoding_format`).
enum Vector {
    Floats(Vec<f32>),
    Base64(String),
}

/// Read by its first token, not as an untagged enum: serde buffers an
/// untagged enum's content (a tree node per number) before trying each
/// variant, which cost more than the numbers' own parse.
impl<'de> Deserialize<'de> for Vector {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Vector;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of numbers or a base64 string")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Vector, A::Error> {
                // The hint is the decoder's guess; bounded, as a hostile one could be anything.
                let mut floats = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 14));
                while let Some(f) = seq.next_element::<f32>()? {
                    floats.push(f);
                }
                Ok(Vector::Floats(floats))
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Vector, E> {
                Ok(Vector::Base64(text.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Vector, E> {
                Ok(Vector::Base64(text))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
struct VendorUsage {
    prompt_tokens: u64,
}

/// Decodes OpenAI's answer (vectors in floats or base64), in input order:
/// by `index`, or, from an OpenAI-compatible server that leaves it out, as
/// listed; with the `model` it names (Azure's: the deployment's model,
/// where the vendor model is the deployment), read in the same pass.
pub fn decode(body: &[u8]) -> Result<(Embeddings, Option<String>), GatewayError> {
    let answer: VendorAnswer =
        serde_json::from_slice(body).map_err(|e| crate::error::unparseable("embeddings", e))?;
    let model = answer.model.filter(|m| !m.is_empty());
    let mut data: Vec<(usize, VendorEmbedding)> = answer
        .data
        .into_iter()
        .enumerate()
        .map(|(at, d)| (d.index.unwrap_or(at), d))
        .collect();
    data.sort_by_key(|(index, _)| *index);
    let vectors = data
        .into_iter()
        .map(|(_, d)| match d.embedding {
            Vector::Floats(v) => Ok(v),
            Vector::Base64(text) => from_base64(&text)
                .ok_or_else(|| crate::error::unparseable("embeddings", "bad base64 vector")),
        })
        .collect::<Result<_, _>>()?;
    let embeddings = Embeddings {
        vectors,
        prompt_tokens: answer.usage.map(|u| u.prompt_tokens),
    };
    Ok((embeddings, model))
}

/// A base64 vector: little-endian `f32`s.
fn from_base64(text: &str) -> Option<Vec<f32>> {
    let bytes = crate::formats::base64::decode(text)?;
    if bytes.len() % 4 != 0 {
        return None;
    }
    bytes
        .chunks_exact(4)
        .map(|b| b.try_into().ok().map(f32::from_le_bytes))
        .collect()
}

/// The answer in OpenAI's shape (its field order), the vectors as the
/// client asked for them.
pub fn render(answer: &Embeddings, model: &str, encoding: Encoding, tokens: u64) -> Vec<u8> {
    #[derive(Serialize)]
    struct Answer<'a> {
        object: &'static str,
        data: Vec<Item<'a>>,
        model: &'a str,
        usage: Usage,
    }
    #[derive(Serialize)]
    struct Item<'a> {
        object: &'static str,
        index: usize,
        embedding: Rendered<'a>,
    }
    #[derive(Serialize)]
    #[serde(untagged)]
    enum Rendered<'a> {
        Floats(&'a [f32]),
        Base64(String),
    }
    #[derive(Serialize)]
    struct Usage {
        prompt_tokens: u64,
        total_tokens: u64,
    }
    let data = answer
        .vectors
        .iter()
        .enumerate()
        .map(|(index, vector)| Item {
            object: "embedding",
            index,
            embedding: match encoding {
                Encoding::Float => Rendered::Floats(vector),
                Encoding::Base64 => Rendered::Base64(to_base64(vector)),
            },
        })
        .collect();
    let answer = Answer {
        object: "list",
        data,
        model,
        usage: Usage {
            prompt_tokens: tokens,
            total_tokens: tokens,
        },
    };
    serde_json::to_vec(&answer).unwrap_or_default()
}

fn to_base64(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
    crate::formats::base64::encode_padded(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &str) -> (String, String) {
        let e = parse(body.as_bytes()).unwrap_err();
        (e.param.unwrap_or_default(), e.message)
    }

    #[test]
    fn every_input_shape_openai_takes_is_read() {
        let texts = parse(br#"{"model":"m","input":"hi"}"#).unwrap();
        assert_eq!(texts.input, EmbedInput::Texts(vec!["hi".into()]));
        assert_eq!(texts.encoding, Encoding::Float);
        let many = parse(br#"{"model":"m","input":["a","b"],"dimensions":256,"encoding_format":"base64","user":"u","task_type":"RETRIEVAL_QUERY"}"#).unwrap();
        assert_eq!(many.input.len(), 2);
        assert_eq!(many.dimensions, Some(256));
        assert_eq!(many.encoding, Encoding::Base64);
        assert_eq!(many.task, Some(Task::RetrievalQuery));
        let tokens = parse(br#"{"model":"m","input":[1,2,3]}"#).unwrap();
        assert_eq!(tokens.input, EmbedInput::Tokens(vec![vec![1, 2, 3]]));
        let batches = parse(br#"{"model":"m","input":[[1],[2,3]]}"#).unwrap();
        assert_eq!(batches.input.estimated_tokens(), 3);
    }

    #[test]
    fn what_openai_refuses_is_refused_naming_the_field() {
        for (body, param) in [
            (r#"{"model":"m"}"#, "input"),
            (r#"{"input":"x"}"#, "model"),
            (r#"{"model":"m","input":""}"#, "input"),
            (r#"{"model":"m","input":[]}"#, "input"),
            (r#"{"model":"m","input":["a",1]}"#, "input"),
            (r#"{"model":"m","input":["a",""]}"#, "input"),
            (r#"{"model":"m","input":[[1],[]]}"#, "input"),
            (r#"{"model":"m","input":[-1]}"#, "input"),
            (r#"{"model":"m","input":null}"#, "input"),
            (r#"{"model":"m","input":"x","dimensions":0}"#, "dimensions"),
            (
                r#"{"model":"m","input":"x","dimensions":1.5}"#,
                "dimensions",
            ),
            (
                r#"{"model":"m","input":"x","encoding_format":"int8"}"#,
                "encoding_format",
            ),
            (
                r#"{"model":"m","input":"x","task_type":"poetry"}"#,
                "task_type",
            ),
            (r#"{"model":"m","input":"x","stream":true}"#, "stream"),
            (r#"{"model":"m","input":"x","input":"y"}"#, "body"),
        ] {
            assert_eq!(refused(body).0, param, "{body}");
        }
        assert!(refused(r#"{"model":"m","input":"x","stream":true}"#)
            .1
            .contains("Unrecognized request argument supplied: stream"));
        let many = format!(r#"{{"model":"m","input":{:?}}}"#, vec!["a"; MAX_INPUTS + 1]);
        assert!(refused(&many).1.contains("at most 2048"));
    }

    #[test]
    fn the_vendor_is_asked_for_base64_and_both_encodings_decode() {
        let req = parse(br#"{"model":"m","input":["a"],"dimensions":8}"#).unwrap();
        let sent = serde_json::to_value(VendorRequest::of(&req, Some("v"))).unwrap();
        assert_eq!(
            sent,
            serde_json::json!({"input":["a"],"model":"v","dimensions":8,"encoding_format":"base64"})
        );
        let vector = [0.5f32, -1.25, 3.0];
        let b64 = to_base64(&vector);
        let body = format!(
            r#"{{"object":"list","data":[{{"object":"embedding","index":1,"embedding":[1.0]}},{{"object":"embedding","index":0,"embedding":"{b64}"}}],"model":"v","usage":{{"prompt_tokens":4,"total_tokens":4}}}}"#
        );
        let (decoded, model) = decode(body.as_bytes()).unwrap();
        assert_eq!(decoded.vectors, vec![vector.to_vec(), vec![1.0]]);
        assert_eq!(decoded.prompt_tokens, Some(4));
        assert_eq!(model.as_deref(), Some("v"));
        assert!(decode(br#"{"data":[{"index":0,"embedding":"QQ=="}]}"#).is_err());
        assert!(decode(b"{}").is_err());
        // Neither numbers nor a string; a number that is not one.
        assert!(decode(br#"{"data":[{"embedding":{"x":1}}]}"#).is_err());
        assert!(decode(br#"{"data":[{"embedding":[1.0,"2"]}]}"#).is_err());
        assert!(decode(br#"{"data":[{"embedding":null}]}"#).is_err());
        let named = |body: &[u8]| decode(body).unwrap().1;
        assert_eq!(
            named(br#"{"object":"list","data":[],"model":"text-embedding-3-small"}"#),
            Some("text-embedding-3-small".to_owned())
        );
        assert_eq!(named(br#"{"data":[]}"#), None);
        assert_eq!(named(br#"{"data":[],"model":""}"#), None);
        // A server's odd `model` loses its name, not the answer.
        assert_eq!(named(br#"{"data":[],"model":7}"#), None);
        assert_eq!(named(br#"{"data":[],"model":null}"#), None);
        assert_eq!(named(br#"{"data":[],"model":"a","model":"b"}"#), None);
        assert_eq!(named(br#"{"data":[],"model":"a","model":"a"}"#), None);
        // The rest as a derived reader has it.
        assert!(decode(br#"{"data":[],"data":[]}"#).is_err());
        assert!(decode(br#"{"data":[],"usage":{"prompt_tokens":1},"usage":null}"#).is_err());
        assert!(decode(br#"{"usage":{"prompt_tokens":1}}"#).is_err());
        assert!(decode(br#"[]"#).is_err());
        assert!(decode(br#"{"data":[],"x":{"y":[1]}}"#).is_ok());
        assert_eq!(
            decode(br#"{"data":[],"usage":null}"#)
                .unwrap()
                .0
                .prompt_tokens,
            None
        );
        // An OpenAI-compatible server that leaves `index` out: as listed.
        let unindexed = decode(br#"{"data":[{"embedding":[1.0]},{"embedding":[2.0]}]}"#)
            .unwrap()
            .0;
        assert_eq!(unindexed.vectors, vec![vec![1.0], vec![2.0]]);
    }

    #[test]
    fn the_answer_is_openais_shape_in_its_field_order() {
        let answer = Embeddings {
            vectors: vec![vec![0.5, -1.0], vec![0.25, 2.0]],
            prompt_tokens: Some(3),
        };
        let floats = render(&answer, "v", Encoding::Float, 3);
        assert_eq!(
            std::str::from_utf8(&floats).unwrap(),
            r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-1.0]},{"object":"embedding","index":1,"embedding":[0.25,2.0]}],"model":"v","usage":{"prompt_tokens":3,"total_tokens":3}}"#
        );
        assert_eq!(to_base64(&[1.0]), "AACAPw==", "padded, as OpenAI's");
        let b64: Value =
            serde_json::from_slice(&render(&answer, "v", Encoding::Base64, 3)).unwrap();
        let first = b64["data"][0]["embedding"].as_str().unwrap();
        assert_eq!(from_base64(first).unwrap(), vec![0.5, -1.0]);
    }
}
