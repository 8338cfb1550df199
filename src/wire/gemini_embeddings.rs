//! Gemini's embeddings API, `models/{model}:embedContent` (one content) and
//! `:batchEmbedContents` (many): the Gemini surface reads clients' requests
//! and writes answers with these types, the Gemini dialect writes vendor
//! requests and reads answers with the same. Texts only (Gemini's
//! embedding models take no images through this API).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::error::GatewayError;
use crate::model::embed::{EmbedInput, EmbedRequest, Embeddings, Task};

/// Requests in one `batchEmbedContents` call, at most: Gemini refuses more
/// ("at most 100 requests can be in one batch").
pub const MAX_BATCH: usize = 100;

/// One content to embed (`EmbedContentRequest`), on its own or in a batch.
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmbedContentRequest<'a> {
    /// `models/{model}`: required in a batch, where it must be the URL's.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub content: Content<'a>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub task_type: Option<Cow<'a, str>>,
    /// The document's title, for `RETRIEVAL_DOCUMENT`.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub title: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_dimensionality: Option<u32>,
}

/// `batchEmbedContents`' body.
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct BatchEmbedContentsRequest<'a> {
    #[serde(borrow)]
    pub requests: Vec<EmbedContentRequest<'a>>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct Content<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub parts: Vec<Part<'a>>,
}

/// A text part (the only kind embedded).
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct Part<'a> {
    #[serde(borrow)]
    pub text: Cow<'a, str>,
}

/// `embedContent`'s answer.
#[derive(Serialize, Deserialize, Debug)]
pub struct EmbedContentResponse<'a> {
    #[serde(borrow)]
    pub embedding: ContentEmbedding<'a>,
}

/// `batchEmbedContents`' answer: one embedding per request, in order.
#[derive(Serialize, Deserialize, Debug)]
pub struct BatchEmbedContentsResponse<'a> {
    #[serde(borrow)]
    pub embeddings: Vec<ContentEmbedding<'a>>,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct ContentEmbedding<'a> {
    pub values: Cow<'a, [f32]>,
}

/// Gemini's name of a task (`RETRIEVAL_QUERY`...).
pub fn task_type(task: Task) -> &'static str {
    match task {
        Task::RetrievalQuery => "RETRIEVAL_QUERY",
        Task::RetrievalDocument => "RETRIEVAL_DOCUMENT",
        Task::SemanticSimilarity => "SEMANTIC_SIMILARITY",
        Task::Classification => "CLASSIFICATION",
        Task::Clustering => "CLUSTERING",
        Task::QuestionAnswering => "QUESTION_ANSWERING",
        Task::FactVerification => "FACT_VERIFICATION",
        Task::CodeRetrievalQuery => "CODE_RETRIEVAL_QUERY",
    }
}

fn invalid(param: &str, message: impl Into<String>) -> GatewayError {
    GatewayError::invalid(param, message.into())
}

/// A client's `embedContent` (`batch` false) or `batchEmbedContents` body
/// as the neutral request for `model` (the URL's). The requests of a batch
/// must agree on their task, title and size (one vendor call has one of
/// each); each content's text parts are one input.
pub fn parse(body: &[u8], model: &str, batch: bool) -> Result<EmbedRequest, GatewayError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(invalid("body", "request body is empty"));
    }
    let read =
        |e: serde_json::Error| invalid("body", format!("Invalid JSON payload received. {e}"));
    let requests = if batch {
        serde_json::from_slice::<BatchEmbedContentsRequest>(body)
            .map_err(read)?
            .requests
    } else {
        vec![serde_json::from_slice::<EmbedContentRequest>(body).map_err(read)?]
    };
    let Some(first) = requests.first() else {
        return Err(invalid(
            "requests",
            "* BatchEmbedContentsRequest.requests: at least one request is required",
        ));
    };
    if requests.len() > MAX_BATCH {
        return Err(invalid(
            "requests",
            "* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch",
        ));
    }
    let at = |i: usize, field: &str| {
        if batch {
            format!("requests[{i}].{field}")
        } else {
            field.to_owned()
        }
    };
    let mut texts = Vec::with_capacity(requests.len());
    for (i, request) in requests.iter().enumerate() {
        if batch {
            let named = request
                .model
                .as_deref()
                .map(|m| m.strip_prefix("models/").unwrap_or(m));
            if named.is_some_and(|m| m != model) {
                return Err(invalid(
                    &at(i, "model"),
                    format!(
                        "Model in request ({}) does not match the model of the URL (models/{model})",
                        request.model.as_deref().unwrap_or_default()
                    ),
                ));
            }
        }
        if (
            request.task_type.as_deref(),
            request.title.as_deref(),
            request.output_dimensionality,
        ) != (
            first.task_type.as_deref(),
            first.title.as_deref(),
            first.output_dimensionality,
        ) {
            return Err(invalid(
                &at(i, "taskType"),
                "the gateway sends a batch as one vendor call: every request of a batch \
                 must have the same taskType, title and outputDimensionality",
            ));
        }
        let text: Vec<&str> = request
            .content
            .parts
            .iter()
            .map(|p| p.text.as_ref())
            .collect();
        if text.iter().all(|t| t.is_empty()) {
            return Err(invalid(
                &at(i, "content.parts"),
                "* EmbedContentRequest.content: contents must not be empty",
            ));
        }
        texts.push(text.join("\n"));
    }
    let task = match first.task_type.as_deref() {
        None | Some("TASK_TYPE_UNSPECIFIED") => None,
        Some(name) => Some(Task::parse(name).ok_or_else(|| {
            invalid(
                &at(0, "taskType"),
                format!(
                    "Invalid value at 'taskType' (type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), \"{}\"",
                    name.escape_debug()
                ),
            )
        })?),
    };
    if first.output_dimensionality == Some(0) {
        return Err(invalid(
            &at(0, "outputDimensionality"),
            "outputDimensionality must be positive",
        ));
    }
    Ok(EmbedRequest {
        model: model.to_owned(),
        input: EmbedInput::Texts(texts),
        dimensions: first.output_dimensionality,
        answer: if batch {
            crate::model::embed::AnswerShape::GeminiBatch
        } else {
            crate::model::embed::AnswerShape::GeminiOne
        },
        user: None,
        task,
        title: first.title.as_deref().map(str::to_owned),
    })
}

/// `batchEmbedContents`' body: one request for each of `texts`, with
/// `req`'s options, each naming `model` (`models/{model}`). What the
/// Gemini dialect sends, and each part of a batch the gateway split for a
/// Gemini client (`session::edge::batch`).
pub fn batch_request<'a>(
    req: &'a EmbedRequest,
    texts: &'a [String],
    model: &'a str,
) -> BatchEmbedContentsRequest<'a> {
    let requests = texts
        .iter()
        .map(|text| EmbedContentRequest {
            model: Some(Cow::Borrowed(model)),
            content: Content {
                role: None,
                parts: vec![Part {
                    text: Cow::Borrowed(text),
                }],
            },
            task_type: req.task.map(|t| Cow::Borrowed(task_type(t))),
            title: req.title.as_deref().map(Cow::Borrowed),
            output_dimensionality: req.dimensions,
        })
        .collect();
    BatchEmbedContentsRequest { requests }
}

/// `batchEmbedContents`' answer: its vectors, in order (no token count).
pub fn decode_batch(body: &[u8]) -> Result<Embeddings, GatewayError> {
    let answer: BatchEmbedContentsResponse =
        serde_json::from_slice(body).map_err(|e| crate::error::unparseable("embeddings", e))?;
    Ok(Embeddings {
        vectors: answer
            .embeddings
            .into_iter()
            .map(|e| e.values.into_owned())
            .collect(),
        prompt_tokens: None,
    })
}

fn embedding(values: &[f32]) -> ContentEmbedding<'_> {
    ContentEmbedding {
        values: Cow::Borrowed(values),
    }
}

/// The answer in Gemini's shape: `embedContent`'s one embedding, or
/// `batchEmbedContents`' list.
pub fn render(answer: &Embeddings, batch: bool) -> Vec<u8> {
    let rendered = if batch {
        serde_json::to_vec(&BatchEmbedContentsResponse {
            embeddings: answer.vectors.iter().map(|v| embedding(v)).collect(),
        })
    } else {
        serde_json::to_vec(&EmbedContentResponse {
            embedding: embedding(answer.vectors.first().map_or(&[][..], Vec::as_slice)),
        })
    };
    rendered.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::embed::AnswerShape;

    #[test]
    fn a_batch_is_one_request_of_its_texts_and_agreed_options() {
        let r = parse(
            br#"{"requests":[{"model":"models/m","content":{"parts":[{"text":"a"}]},"taskType":"CLUSTERING"},
                {"content":{"parts":[{"text":"b"},{"text":"c"}]},"taskType":"CLUSTERING"}]}"#,
            "m",
            true,
        )
        .unwrap();
        assert_eq!(r.input, EmbedInput::Texts(vec!["a".into(), "b\nc".into()]));
        assert_eq!(
            (r.task, r.answer),
            (Some(Task::Clustering), AnswerShape::GeminiBatch)
        );
        let one = parse(br#"{"content":{"parts":[{"text":"a"}]}}"#, "m", false).unwrap();
        assert_eq!((one.task, one.answer), (None, AnswerShape::GeminiOne));
        for (body, batch, param) in [
            (r#"{"requests":[]}"#, true, "requests"),
            (
                r#"{"requests":[{"model":"models/x","content":{"parts":[{"text":"a"}]}}]}"#,
                true,
                "requests[0].model",
            ),
            (
                r#"{"requests":[{"content":{"parts":[{"text":"a"}]}},{"content":{"parts":[{"text":"b"}]},"title":"t"}]}"#,
                true,
                "requests[1].taskType",
            ),
            (
                r#"{"content":{"parts":[{"text":""}]}}"#,
                false,
                "content.parts",
            ),
            (
                r#"{"content":{"parts":[{"text":"a"}]},"taskType":"NOPE"}"#,
                false,
                "taskType",
            ),
            (
                r#"{"content":{"parts":[{"text":"a"}]},"extra":1}"#,
                false,
                "body",
            ),
            ("  ", false, "body"),
        ] {
            let e = parse(body.as_bytes(), "m", batch).unwrap_err();
            assert_eq!(
                (e.status(), e.param.as_deref()),
                (400, Some(param)),
                "{body}"
            );
        }
    }

    #[test]
    fn answers_are_gemini_s_shapes() {
        let answer = Embeddings {
            vectors: vec![vec![0.5], vec![-1.0]],
            prompt_tokens: None,
        };
        assert_eq!(
            render(&answer, true),
            br#"{"embeddings":[{"values":[0.5]},{"values":[-1.0]}]}"#
        );
        assert_eq!(render(&answer, false), br#"{"embedding":{"values":[0.5]}}"#);
    }
}
