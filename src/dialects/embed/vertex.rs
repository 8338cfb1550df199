//! Vertex AI's text embeddings (`publishers/google/models/{model}:predict`,
//! the Text embeddings API of `text-embedding-005`, `gemini-embedding-001`
//! ...): `instances[{content, task_type, title}]` and `parameters
//! {outputDimensionality}`, answered `predictions[].embeddings.{values,
//! statistics.token_count}`. Texts only; at most 250 instances a call, and
//! one for `gemini-embedding-001` (Vertex: "supports one instance per
//! request").

use super::Embedder;
use crate::dialects::{Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::embed::{check_batch, EmbedRequest, Embeddings};
use crate::wire::gemini_embeddings::task_type;
use crate::wire::vertex_embeddings::{Answer, Instance, Parameters, Predict};

/// Instances per `:predict` call.
pub const MAX_BATCH: usize = 250;

pub struct Vertex;

/// The instances one call of `model` takes.
fn max_batch(model: &str) -> usize {
    if model.starts_with("gemini-embedding") {
        1
    } else {
        MAX_BATCH
    }
}

impl Embedder for Vertex {
    fn encode(&self, req: &EmbedRequest, target: &Target) -> Result<UpstreamRequest, GatewayError> {
        let texts = req.input.texts("vertex_gemini")?;
        check_batch(req, "vertex_gemini", self.max_inputs(target.model))?;
        let instances = texts
            .iter()
            .enumerate()
            .map(|(i, text)| Instance {
                content: text,
                task_type: req.task.map(task_type),
                title: req.title(i),
            })
            .collect();
        let parameters = req.dimensions.map(|output_dimensionality| Parameters {
            output_dimensionality,
        });
        super::request(
            target,
            &Predict {
                instances,
                parameters,
            },
        )
    }

    fn decode(&self, body: &[u8], _model: &str) -> Result<Embeddings, GatewayError> {
        let answer: Answer = super::read(body)?;
        let mut tokens = Some(0u64);
        let mut vectors = Vec::with_capacity(answer.predictions.len());
        for p in answer.predictions {
            let count = p.embeddings.statistics.and_then(|s| s.token_count);
            tokens = tokens
                .zip(count.filter(|c| c.is_finite() && *c >= 0.0))
                .map(|(sum, c)| sum + c as u64);
            vectors.push(p.embeddings.values);
        }
        Ok(Embeddings {
            vectors,
            prompt_tokens: tokens,
        })
    }

    fn max_inputs(&self, model: &str) -> usize {
        max_batch(model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> crate::config::Config {
        crate::config::Config::parse(
            br#"{"providers":{"v":{"dialect":"vertex_gemini","api_key":"ya29.t","project":"p","location":"us-central1"}},"model_groups":{"x":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap()
    }

    fn parse(body: &str) -> EmbedRequest {
        crate::wire::openai_embeddings::parse(body.as_bytes()).unwrap()
    }

    #[test]
    fn instances_and_parameters_to_predict_and_the_token_counts_back() {
        let config = config();
        let target = Target {
            provider: &config.providers["v"],
            model: "text-embedding-005",
        };
        let req = parse(
            r#"{"model":"m","input":["a","b"],"dimensions":256,"task_type":"retrieval_document"}"#,
        );
        let up = Vertex.encode(&req, &target).unwrap();
        assert_eq!(
            up.path,
            "/v1/projects/p/locations/us-central1/publishers/google/models/text-embedding-005:predict"
        );
        assert_eq!(
            String::from_utf8(up.body).unwrap(),
            r#"{"instances":[{"content":"a","task_type":"RETRIEVAL_DOCUMENT"},{"content":"b","task_type":"RETRIEVAL_DOCUMENT"}],"parameters":{"outputDimensionality":256}}"#
        );
        let plain = Vertex.encode(&parse(r#"{"model":"m","input":"a"}"#), &target);
        assert_eq!(
            String::from_utf8(plain.unwrap().body).unwrap(),
            r#"{"instances":[{"content":"a"}]}"#
        );
        // Token arrays, and more instances than the model takes: 400s.
        let tokens = parse(r#"{"model":"m","input":[1,2]}"#);
        assert_eq!(Vertex.encode(&tokens, &target).unwrap_err().status(), 400);
        let many = parse(&format!(
            r#"{{"model":"m","input":{:?}}}"#,
            vec!["a"; MAX_BATCH + 1]
        ));
        let e = Vertex.encode(&many, &target).unwrap_err();
        assert!(e.message.contains("at most 250"), "{}", e.message);
        let gemini = Target {
            provider: &config.providers["v"],
            model: "gemini-embedding-001",
        };
        let e = Vertex
            .encode(&parse(r#"{"model":"m","input":["a","b"]}"#), &gemini)
            .unwrap_err();
        assert!(e.message.contains("at most 1 input per"), "{}", e.message);
        // The answer: vectors in order, token counts summed.
        let answer = Vertex
            .decode(
                br#"{"predictions":[{"embeddings":{"statistics":{"truncated":false,"token_count":2},"values":[0.5]}},{"embeddings":{"statistics":{"truncated":false,"token_count":3.0},"values":[1.5]}}],"metadata":{"billableCharacterCount":4}}"#,
                "m",
            )
            .unwrap();
        assert_eq!(answer.vectors, vec![vec![0.5], vec![1.5]]);
        assert_eq!(answer.prompt_tokens, Some(5));
        // A count missing: none (the gateway's estimate is billed).
        let answer = Vertex
            .decode(br#"{"predictions":[{"embeddings":{"values":[0.5]}}]}"#, "m")
            .unwrap();
        assert_eq!(answer.prompt_tokens, None);
        assert!(Vertex.decode(b"{}", "m").is_err());
    }
}
