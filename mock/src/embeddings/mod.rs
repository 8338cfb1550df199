//! Embeddings endpoints, each with its vendor's request rules and errors:
//! OpenAI `POST /v1/embeddings`, Azure OpenAI (deployment path and v1),
//! Gemini `:embedContent` / `:batchEmbedContents`, Bedrock InvokeModel for
//! Titan and Cohere embedding models, DashScope's native text embedding.
//!
//! Vectors are deterministic bags of words: each word (a run of letters or
//! digits, lowercased) seeds pseudo-random components in [-1, 1], and a
//! text's vector is its words' mean (component `i` depends only on the
//! words and `i`, so a shorter vector is a prefix of a longer one),
//! L2-normalised. Texts that share words are close (cosine about the
//! shared words' share), unrelated texts nearly orthogonal, so a semantic
//! cache's test can tell a paraphrase from another question. A text
//! without words is seeded by its whole bytes. Token
//! counts are the mock's words (`count_words`), at least 1 per input.
//!
//! The server asks [`Embeddings::route`] before any dialect (Bedrock's
//! `/model/{id}/invoke` is Claude's otherwise: embeddings are told apart by
//! the model id in the path).

mod bedrock;
mod dashscope;
mod gemini;
mod openai;
#[cfg(test)]
mod tests;

use serde_json::{Number, Value};

use crate::dialect::{count_words, Dialect, Failure, Reply};
use crate::http::Request;
use crate::scenario::Scenario;
use crate::sigv4::Verifier;

/// An embeddings endpoint the mock speaks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Endpoint {
    /// `POST /v1/embeddings`.
    OpenAi,
    /// `POST /openai/deployments/{deployment}/embeddings?api-version=...`.
    AzureDeployment,
    /// `POST /openai/v1/embeddings`.
    AzureV1,
    /// `POST /v1beta/models/{model}:embedContent`.
    GeminiOne,
    /// `POST /v1beta/models/{model}:batchEmbedContents`.
    GeminiBatch,
    /// `POST /model/{embedding model id}/invoke`.
    Bedrock,
    /// `POST /api/v1/services/embeddings/text-embedding/text-embedding`.
    DashScope,
}

/// A complete answer: status, JSON body and extra headers.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    pub headers: Vec<(&'static str, String)>,
}

impl From<Reply> for Answer {
    fn from(r: Reply) -> Answer {
        let headers = r
            .retry_after
            .map(|s| vec![("retry-after", s.to_owned())])
            .unwrap_or_default();
        Answer {
            status: r.status,
            body: r.body,
            headers,
        }
    }
}

/// The embeddings endpoints; `aws` as Bedrock's dialect checks signatures.
pub struct Embeddings {
    pub aws: Option<Verifier>,
}

impl Embeddings {
    /// Which embeddings endpoint `path` (scenario prefix removed) is.
    pub fn route(&self, path: &str) -> Option<Endpoint> {
        if path.ends_with(openai::AZURE_V1_PATH) {
            return Some(Endpoint::AzureV1);
        }
        if path.contains(openai::AZURE_DEPLOYMENTS) && path.ends_with("/embeddings") {
            return Some(Endpoint::AzureDeployment);
        }
        if path.ends_with(openai::OPENAI_PATH) {
            return Some(Endpoint::OpenAi);
        }
        if path.contains(gemini::PATH_PREFIX) {
            if path.ends_with(gemini::EMBED) {
                return Some(Endpoint::GeminiOne);
            }
            if path.ends_with(gemini::BATCH) {
                return Some(Endpoint::GeminiBatch);
            }
        }
        if path.ends_with(dashscope::PATH) {
            return Some(Endpoint::DashScope);
        }
        if path.starts_with("/model/")
            && path.ends_with("/invoke")
            && bedrock::Kind::of_path(path).is_some()
        {
            return Some(Endpoint::Bedrock);
        }
        None
    }

    /// The vendor's answer to a POST on `ep`.
    pub fn answer(&self, ep: Endpoint, req: &Request, path: &str, sc: &Scenario) -> Answer {
        match ep {
            Endpoint::OpenAi => openai::openai(req, sc),
            Endpoint::AzureDeployment => openai::azure_deployment(req, path, sc),
            Endpoint::AzureV1 => openai::azure_v1(req, sc),
            Endpoint::GeminiOne => gemini::embed(req, path, sc, false),
            Endpoint::GeminiBatch => gemini::embed(req, path, sc, true),
            Endpoint::Bedrock => bedrock::invoke(req, path, sc, self.aws.clone()),
            Endpoint::DashScope => dashscope::embed(req, sc),
        }
    }
}

/// The dialect's error answer, with its error-type header (Bedrock's).
pub(crate) fn fail(d: &dyn Dialect, f: &Failure) -> Answer {
    let mut a = Answer::from(d.error(f));
    if let Some(h) = d.error_header(f) {
        a.headers.push(h);
    }
    a
}

/// A 200 with a JSON body.
pub(crate) fn ok(body: &Value) -> Answer {
    Answer {
        status: 200,
        body: crate::dialect::to_json(body),
        headers: Vec::new(),
    }
}

/// The body as JSON, or the dialect's 400 (as the chat endpoints answer).
pub(crate) fn json_body(d: &dyn Dialect, req: &Request) -> Result<Value, Answer> {
    serde_json::from_slice(&req.body).map_err(|e| {
        fail(
            d,
            &Failure::Invalid(format!(
                "We could not parse the JSON body of your request: {e}"
            )),
        )
    })
}

/// The scenario's errors, answered to a request the vendor accepted:
/// `echo-key` as an auth error quoting the credential `req` carried,
/// `error-400-context` as `context`, `error-NNN` as that status,
/// `fail-input=WORD` as a 503 when WORD is in the body.
pub(crate) fn scenario(
    d: &dyn Dialect,
    sc: &Scenario,
    req: &Request,
    context: Failure,
) -> Result<(), Answer> {
    if sc.echo_key {
        let received = ["authorization", "x-api-key", "api-key", "x-goog-api-key"]
            .iter()
            .find_map(|h| req.header(h))
            .unwrap_or_default();
        let message = format!("Incorrect API key provided: {received}");
        return Err(fail(d, &Failure::Auth(message)));
    }
    if sc.context_error {
        return Err(fail(d, &context));
    }
    if let Some(status) = sc.error {
        return Err(fail(d, &Failure::Status(status)));
    }
    let has = |word: &str| req.body.windows(word.len()).any(|w| w == word.as_bytes());
    if sc.fail_input.as_deref().is_some_and(has) {
        return Err(fail(d, &Failure::Status(503)));
    }
    Ok(())
}

/// Tokens of one input as the mock counts them: words, at least 1.
pub(crate) fn tokens(text: &str) -> u64 {
    count_words(text).max(1)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `dims` components in [-1, 1] for `text`, not normalised: the mean of
/// its words' pseudo-random vectors (see the module's comment).
pub(crate) fn raw_vector(text: &str, dims: usize) -> Vec<f32> {
    let lower = text.to_lowercase();
    let mut seeds: Vec<u64> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| fnv1a(w.as_bytes()))
        .collect();
    if seeds.is_empty() {
        seeds.push(fnv1a(text.as_bytes()));
    }
    let count = seeds.len() as f64;
    (0..dims as u64)
        .map(|i| {
            let mix = splitmix(i);
            let sum: f64 = seeds
                .iter()
                .map(|seed| {
                    let x = splitmix(seed ^ mix);
                    (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
                })
                .sum();
            (sum / count) as f32
        })
        .collect()
}

/// `v` scaled to unit length.
pub(crate) fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    if norm > 0.0 {
        v.iter_mut()
            .for_each(|x| *x = (f64::from(*x) / norm) as f32);
    }
    v
}

/// The unit vector of `dims` components for `text`.
pub(crate) fn vector(text: &str, dims: usize) -> Vec<f32> {
    normalised(raw_vector(text, dims))
}

/// A float as JSON in its shortest f32 form (0.01234568, not 0.012345678359270096).
pub(crate) fn number(x: f32) -> Value {
    x.to_string()
        .parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

/// A vector as a JSON array of numbers.
pub(crate) fn floats(v: &[f32]) -> Value {
    Value::Array(v.iter().copied().map(number).collect())
}

/// The little-endian f32 bytes of `v`, base64 (OpenAI's `encoding_format: base64`).
pub(crate) fn base64_floats(v: &[f32]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    crate::server::base64(&bytes)
}

/// A request id from a running count and the clock (uuid-shaped).
pub(crate) fn request_id(salt: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(1);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let h = splitmix(fnv1a(salt.as_bytes()) ^ now ^ splitmix(seq));
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        seq & 0xfff,
        splitmix(h) & 0xffff_ffff_ffff
    )
}
