//! Embeddings, the second operation of the neutral model: the request
//! every surface that embeds decodes into ([`EmbedRequest`]) and the answer
//! every dialect that embeds decodes into ([`Embeddings`]). A dialect
//! serves the operation with an `Embedder` (the dialects' `embed` module).

use crate::error::{ErrorCode, GatewayError};

/// One embeddings request, as the client made it.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedRequest {
    pub model: String,
    pub input: EmbedInput,
    /// The vector size asked for (`dimensions`); the model's own otherwise.
    pub dimensions: Option<u32>,
    /// How the client wants the vectors written (floats, or their bytes
    /// in base64).
    pub encoding: Encoding,
    pub user: Option<String>,
    /// What the vectors are for (the gateway's `task_type`, Gemini's
    /// `taskType`), for vendors whose models embed differently by use
    /// (Gemini, Cohere, DashScope).
    pub task: Option<Task>,
    /// Each input's title, in input order (Gemini's, for
    /// `RETRIEVAL_DOCUMENT`), sent to the vendors that take one per input
    /// (Gemini, Vertex AI); empty when none has one.
    pub titles: Vec<Option<String>>,
    /// Each input's own task and size, in input order, when a batch's
    /// differ (Gemini's `batchEmbedContents` lets each request have its
    /// own); empty when every input has `task` and `dimensions`. One vendor
    /// call has one of each, so such a batch goes as a vendor call (or
    /// more) per group of inputs that agree ([`EmbedRequest::groups`],
    /// `session::edge::batch`), never whole.
    pub mixed: Vec<InputOptions>,
}

/// What one vendor call embeds its inputs for and at what size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InputOptions {
    pub task: Option<Task>,
    pub dimensions: Option<u32>,
}

impl EmbedRequest {
    /// Input `i`'s title.
    pub fn title(&self, i: usize) -> Option<&str> {
        self.titles.get(i)?.as_deref()
    }

    /// The inputs that share their task and size, group by group in the
    /// order each first appears, each group's inputs in input order.
    pub fn groups(&self) -> Vec<(InputOptions, Vec<usize>)> {
        let whole = InputOptions {
            task: self.task,
            dimensions: self.dimensions,
        };
        if self.mixed.is_empty() {
            return vec![(whole, (0..self.input.len()).collect())];
        }
        let mut groups: Vec<(InputOptions, Vec<usize>)> = Vec::new();
        for (i, options) in self.mixed.iter().enumerate() {
            match groups.iter_mut().find(|(o, _)| o == options) {
                Some((_, inputs)) => inputs.push(i),
                None => groups.push((*options, vec![i])),
            }
        }
        groups
    }

    /// The inputs `indices` (in that order) as a request of their own, all
    /// with `options`.
    pub fn part(&self, indices: &[usize], options: InputOptions) -> EmbedRequest {
        let input = match &self.input {
            EmbedInput::Texts(texts) => EmbedInput::Texts(
                indices
                    .iter()
                    .filter_map(|&i| texts.get(i).cloned())
                    .collect(),
            ),
            EmbedInput::Tokens(tokens) => EmbedInput::Tokens(
                indices
                    .iter()
                    .filter_map(|&i| tokens.get(i).cloned())
                    .collect(),
            ),
        };
        let titles = if self.titles.is_empty() {
            Vec::new()
        } else {
            indices
                .iter()
                .map(|&i| self.title(i).map(str::to_owned))
                .collect()
        };
        EmbedRequest {
            model: self.model.clone(),
            input,
            dimensions: options.dimensions,
            encoding: self.encoding,
            user: self.user.clone(),
            task: options.task,
            titles,
            mixed: Vec::new(),
        }
    }
}

/// The inputs, in order: texts, or token arrays (OpenAI's models take
/// their own tokens; no other vendor does).
#[derive(Debug, Clone, PartialEq)]
pub enum EmbedInput {
    Texts(Vec<String>),
    Tokens(Vec<Vec<u32>>),
}

impl EmbedInput {
    pub fn len(&self) -> usize {
        match self {
            EmbedInput::Texts(texts) => texts.len(),
            EmbedInput::Tokens(tokens) => tokens.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The texts, for a vendor that embeds text only (`vendor` names it in
    /// the refusal of token arrays).
    pub fn texts(&self, vendor: &str) -> Result<&[String], GatewayError> {
        match self {
            EmbedInput::Texts(texts) => Ok(texts),
            EmbedInput::Tokens(_) => Err(GatewayError::invalid(
                "input",
                format!(
                    "this model group's provider ({vendor}) embeds text only: send `input` as \
                     a string or an array of strings, not token arrays"
                ),
            )),
        }
    }

    /// The inputs' tokens, estimated (token arrays are counted exactly).
    pub fn estimated_tokens(&self) -> u64 {
        match self {
            EmbedInput::Texts(texts) => texts
                .iter()
                .map(|t| super::estimate::text_tokens(t).max(1))
                .sum(),
            EmbedInput::Tokens(tokens) => tokens.iter().map(|t| t.len() as u64).sum(),
        }
    }
}

/// How the answer writes the vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// Numbers.
    #[default]
    Float,
    /// The little-endian `f32` bytes of each vector, in standard base64.
    Base64,
}

/// What embeddings are for, in Gemini's vocabulary (the most detailed);
/// Cohere's `input_type` and DashScope's `text_type` are read from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    RetrievalQuery,
    RetrievalDocument,
    SemanticSimilarity,
    Classification,
    Clustering,
    QuestionAnswering,
    FactVerification,
    CodeRetrievalQuery,
}

impl Task {
    const ALL: [Task; 8] = [
        Task::RetrievalQuery,
        Task::RetrievalDocument,
        Task::SemanticSimilarity,
        Task::Classification,
        Task::Clustering,
        Task::QuestionAnswering,
        Task::FactVerification,
        Task::CodeRetrievalQuery,
    ];

    /// Its name on the gateway's surface (lowercase) and Gemini's (upper).
    pub fn name(self) -> &'static str {
        match self {
            Task::RetrievalQuery => "retrieval_query",
            Task::RetrievalDocument => "retrieval_document",
            Task::SemanticSimilarity => "semantic_similarity",
            Task::Classification => "classification",
            Task::Clustering => "clustering",
            Task::QuestionAnswering => "question_answering",
            Task::FactVerification => "fact_verification",
            Task::CodeRetrievalQuery => "code_retrieval_query",
        }
    }

    /// A task by name, in either case.
    pub fn parse(name: &str) -> Option<Task> {
        Task::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// The names the gateway takes, for an error message.
    pub fn names() -> String {
        Task::ALL.map(Task::name).join(", ")
    }

    /// Whether the vectors embed a query (rather than what is searched).
    pub fn is_query(self) -> bool {
        matches!(
            self,
            Task::RetrievalQuery | Task::QuestionAnswering | Task::CodeRetrievalQuery
        )
    }
}

/// A vendor's answer: one vector per input, in input order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Embeddings {
    pub vectors: Vec<Vec<f32>>,
    /// The input tokens, when the vendor reports them.
    pub prompt_tokens: Option<u64>,
}

/// The refusal of a request with more inputs than `vendor` embeds at once
/// (one request is one vendor call; the edge role splits a batch by this
/// limit when self-calls are on: `session::edge::batch`).
pub fn check_batch(req: &EmbedRequest, vendor: &str, max: usize) -> Result<(), GatewayError> {
    let n = req.input.len();
    if n <= max {
        return Ok(());
    }
    Err(GatewayError::invalid(
        "input",
        format!(
            "this model group's provider ({vendor}) embeds at most {max} input{} per request, \
             and this request has {n}: send them in batches of at most {max}",
            if max == 1 { "" } else { "s" }
        ),
    ))
}

/// The refusal of `dimensions` for a vendor model that has no such size
/// (`allowed`: the sizes it has, or `None`: it has one size only).
pub fn bad_dimensions(model: &str, allowed: Option<&str>) -> GatewayError {
    let message = match allowed {
        Some(sizes) => format!("model {model} embeds in {sizes} dimensions only"),
        None => format!(
            "model {model} embeds in a size of its own: send the request without `dimensions`"
        ),
    };
    GatewayError::invalid("dimensions", message)
}

/// The refusal of embeddings by a provider that has none.
pub fn no_embeddings() -> GatewayError {
    GatewayError::invalid(
        "model",
        "no provider of this model group embeds (Anthropic has no embeddings API): send \
         embeddings to a model group whose providers have one",
    )
}

/// The refusal of a batch whose inputs differ in task or size where it
/// cannot be sent as a vendor call per group (the gateway has no
/// `self_calls`).
pub fn mixed_batch() -> GatewayError {
    GatewayError::invalid(
        "requests",
        "the requests of this batch differ in taskType or outputDimensionality, and one vendor \
         call has one of each: this gateway sends such a batch only with self-calls on (its \
         `self_calls` configuration); send the requests of each taskType and \
         outputDimensionality as a batch of their own",
    )
}

/// An answer whose vectors do not match the request's inputs.
pub fn wrong_count(want: usize, got: usize) -> GatewayError {
    GatewayError::new(
        ErrorCode::UpstreamError,
        format!("the provider answered {got} embeddings for {want} inputs"),
    )
}
