//! Gemini's embeddings API, `models/{model}:embedContent` (one content) and
//! `:batchEmbedContents` (many): the Gemini surface reads clients' requests
//! and writes answers with these types, the Gemini dialect writes vendor
//! requests and reads answers with the same. Texts only (Gemini's
//! embedding models take no images through this API).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::error::GatewayError;
use crate::model::embed::{EmbedInput, EmbedRequest, Embeddings, InputOptions, Task};

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
/// as the neutral request for `model` (the URL's). Each content's text
/// parts are one input, each request's title that input's; requests that
/// differ in task or size make a mixed request (`EmbedRequest::mixed`).
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
    if requests.is_empty() {
        return Err(invalid(
            "requests",
            "* BatchEmbedContentsRequest.requests: at least one request is required",
        ));
    }
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
    let mut titles = Vec::with_capacity(requests.len());
    let mut options = Vec::with_capacity(requests.len());
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
        titles.push(request.title.as_deref().map(str::to_owned));
        options.push(input_options(
            request,
            &at(i, "taskType"),
            &at(i, "outputDimensionality"),
        )?);
    }
    let first = options.first().copied().unwrap_or_default();
    let mixed = if options.iter().all(|o| *o == first) {
        Vec::new()
    } else {
        options
    };
    if titles.iter().all(Option::is_none) {
        titles.clear();
    }
    Ok(EmbedRequest {
        model: model.to_owned(),
        input: EmbedInput::Texts(texts),
        dimensions: first.dimensions,
        encoding: crate::model::embed::Encoding::Float,
        user: None,
        task: first.task,
        titles,
        mixed,
    })
}

/// One request's task and size (`task_at`, `size_at`: their names in an error).
fn input_options(
    request: &EmbedContentRequest,
    task_at: &str,
    size_at: &str,
) -> Result<InputOptions, GatewayError> {
    let task = match request.task_type.as_deref() {
        None | Some("TASK_TYPE_UNSPECIFIED") => None,
        Some(name) => Some(Task::parse(name).ok_or_else(|| {
            invalid(
                task_at,
                format!(
                    "Invalid value at 'taskType' (type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), \"{}\"",
                    name.escape_debug()
                ),
            )
        })?),
    };
    if request.output_dimensionality == Some(0) {
        return Err(invalid(size_at, "outputDimensionality must be positive"));
    }
    Ok(InputOptions {
        task,
        dimensions: request.output_dimensionality,
    })
}

/// `batchEmbedContents`' body: one request for each of `texts`, with
/// `req`'s task and size and each text's title, each naming `model`
/// (`models/{model}`). What the
/// Gemini dialect sends, and each part of a batch the gateway split for a
/// Gemini client (`session::edge::batch`).
pub fn batch_request<'a>(
    req: &'a EmbedRequest,
    texts: &'a [String],
    model: &'a str,
) -> BatchEmbedContentsRequest<'a> {
    let requests = texts
        .iter()
        .enumerate()
        .map(|(i, text)| EmbedContentRequest {
            model: Some(Cow::Borrowed(model)),
            content: Content {
                role: None,
                parts: vec![Part {
                    text: Cow::Borrowed(text),
                }],
            },
            task_type: req.task.map(|t| Cow::Borrowed(task_type(t))),
            title: req.title(i).map(Cow::Borrowed),
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
    use crate::model::embed::Encoding;

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
            (r.task, r.encoding),
            (Some(Task::Clustering), Encoding::Float)
        );
        assert!(r.mixed.is_empty() && r.titles.is_empty());
        let one = parse(br#"{"content":{"parts":[{"text":"a"}]}}"#, "m", false).unwrap();
        assert_eq!((one.task, one.input.len()), (None, 1));
        for (body, batch, param) in [
            (r#"{"requests":[]}"#, true, "requests"),
            (
                r#"{"requests":[{"model":"models/x","content":{"parts":[{"text":"a"}]}}]}"#,
                true,
                "requests[0].model",
            ),
            (
                r#"{"requests":[{"content":{"parts":[{"text":"a"}]}},{"content":{"parts":[{"text":"b"}]},"taskType":"NOPE"}]}"#,
                true,
                "requests[1].taskType",
            ),
            (
                r#"{"requests":[{"content":{"parts":[{"text":"a"}]}},{"content":{"parts":[{"text":"b"}]},"outputDimensionality":0}]}"#,
                true,
                "requests[1].outputDimensionality",
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
    fn titles_are_each_inputs_and_differing_tasks_or_sizes_make_a_mixed_batch() {
        let r = parse(
            br#"{"requests":[
                {"content":{"parts":[{"text":"a"}]},"taskType":"RETRIEVAL_DOCUMENT","title":"A"},
                {"content":{"parts":[{"text":"q"}]},"taskType":"RETRIEVAL_QUERY"},
                {"content":{"parts":[{"text":"b"}]},"taskType":"RETRIEVAL_DOCUMENT","title":"B"},
                {"content":{"parts":[{"text":"s"}]},"taskType":"RETRIEVAL_QUERY","outputDimensionality":8}]}"#,
            "m",
            true,
        )
        .unwrap();
        assert_eq!(r.titles, [Some("A".into()), None, Some("B".into()), None]);
        let document = InputOptions {
            task: Some(Task::RetrievalDocument),
            dimensions: None,
        };
        let query = InputOptions {
            task: Some(Task::RetrievalQuery),
            dimensions: None,
        };
        let small = InputOptions {
            dimensions: Some(8),
            ..query
        };
        assert_eq!(r.mixed, [document, query, document, small]);
        assert_eq!(
            r.groups(),
            [(document, vec![0, 2]), (query, vec![1]), (small, vec![3])]
        );
        // A group as a request of its own: its texts, titles and options.
        let part = r.part(&[0, 2], document);
        assert_eq!(part.input, EmbedInput::Texts(vec!["a".into(), "b".into()]));
        assert_eq!(part.titles, [Some("A".into()), Some("B".into())]);
        assert_eq!((part.task, part.dimensions), (document.task, None));
        assert!(part.mixed.is_empty() && part.groups().len() == 1);
        let body = serde_json::to_value(batch_request(
            &part,
            part.input.texts("gemini").unwrap(),
            "models/m",
        ))
        .unwrap();
        assert_eq!(body["requests"][1]["title"], "B");
        assert_eq!(body["requests"][1]["taskType"], "RETRIEVAL_DOCUMENT");
        // Titles alone never make a batch mixed: each input keeps its own.
        let titled = parse(
            br#"{"requests":[{"content":{"parts":[{"text":"a"}]},"title":"A"},{"content":{"parts":[{"text":"b"}]}}]}"#,
            "m",
            true,
        )
        .unwrap();
        assert!(titled.mixed.is_empty());
        assert_eq!((titled.title(0), titled.title(1)), (Some("A"), None));
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
