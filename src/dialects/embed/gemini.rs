//! Gemini's embeddings (`models/{model}:batchEmbedContents`, for one input
//! or many): texts only, at most 100 per call, no token counts.

use super::Embedder;
use crate::dialects::{Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::embed::{check_batch, EmbedRequest, Embeddings};
use crate::wire::gemini_embeddings::{batch_request, decode_batch};

/// Requests per `batchEmbedContents` call.
pub use crate::wire::gemini_embeddings::MAX_BATCH;

pub struct Gemini;

impl Embedder for Gemini {
    fn encode(&self, req: &EmbedRequest, target: &Target) -> Result<UpstreamRequest, GatewayError> {
        let texts = req.input.texts("gemini")?;
        check_batch(req, "gemini", self.max_inputs(target.model))?;
        // Each request names the model of the URL, as `models/{model}`.
        let bare = target.model.strip_prefix("models/").unwrap_or(target.model);
        let model = format!("models/{bare}");
        super::request(target, &batch_request(req, texts, &model))
    }

    fn decode(&self, body: &[u8], _model: &str) -> Result<Embeddings, GatewayError> {
        decode_batch(body)
    }

    fn max_inputs(&self, _model: &str) -> usize {
        MAX_BATCH
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_is_one_request_of_the_batch_naming_the_urls_model() {
        let config = crate::config::Config::parse(
            br#"{"providers":{"g":{"dialect":"gemini","api_key":"k"}},"model_groups":{"x":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap();
        let target = Target {
            provider: &config.providers["g"],
            model: "gemini-embedding-001",
        };
        let req = crate::wire::openai_embeddings::parse(
            br#"{"model":"m","input":["a","b"],"dimensions":768,"task_type":"retrieval_document"}"#,
        )
        .unwrap();
        let up = Gemini.encode(&req, &target).unwrap();
        assert_eq!(
            up.path,
            "/v1beta/models/gemini-embedding-001:batchEmbedContents"
        );
        let body: serde_json::Value = serde_json::from_slice(&up.body).unwrap();
        assert_eq!(
            body["requests"][1],
            serde_json::json!({"model":"models/gemini-embedding-001","content":{"parts":[{"text":"b"}]},"taskType":"RETRIEVAL_DOCUMENT","outputDimensionality":768})
        );
        let tokens =
            crate::wire::openai_embeddings::parse(br#"{"model":"m","input":[1,2]}"#).unwrap();
        assert_eq!(Gemini.encode(&tokens, &target).unwrap_err().status(), 400);
        let many = format!(r#"{{"model":"m","input":{:?}}}"#, vec!["a"; MAX_BATCH + 1]);
        let many = crate::wire::openai_embeddings::parse(many.as_bytes()).unwrap();
        let e = Gemini.encode(&many, &target).unwrap_err();
        assert!(e.message.contains("at most 100"), "{}", e.message);
        let answer = Gemini
            .decode(
                br#"{"embeddings":[{"values":[0.5]},{"values":[1.5]}]}"#,
                "m",
            )
            .unwrap();
        assert_eq!(answer.vectors, vec![vec![0.5], vec![1.5]]);
        assert!(Gemini.decode(b"{}", "m").is_err());
    }
}
