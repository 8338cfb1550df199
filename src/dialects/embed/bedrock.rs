//! Bedrock's embeddings, through InvokeModel in each model family's own
//! body: Amazon Titan Text Embeddings (one text per call; `dimensions` on
//! v2 only) and Cohere Embed (up to 96 texts; `output_dimension` on v4
//! only). Neither answer counts tokens in its body but Titan's.

use super::Embedder;
use crate::dialects::{Target, UpstreamRequest};
use crate::error::GatewayError;
use crate::model::embed::{bad_dimensions, check_batch, EmbedRequest, Embeddings, Task};
use crate::wire::bedrock_embeddings::{
    CohereAnswer, CohereEmbeddings, CohereRequest, TitanAnswer, TitanRequest,
};

/// Texts per Cohere Embed call on Bedrock.
pub const COHERE_MAX_BATCH: usize = 96;

pub struct Bedrock;

/// The model families Bedrock embeds with, by model id (cross-region
/// profiles such as `us.cohere.embed-v4:0` included).
#[derive(Debug, PartialEq)]
enum Family {
    Titan { v2: bool },
    Cohere { v4: bool },
}

fn family(model: &str) -> Result<Family, GatewayError> {
    if model.contains("amazon.titan-embed-text") || model.contains("amazon.titan-embed-g1-text") {
        Ok(Family::Titan {
            v2: model.contains("titan-embed-text-v2"),
        })
    } else if model.contains("cohere.embed") {
        Ok(Family::Cohere {
            v4: model.contains("cohere.embed-v4"),
        })
    } else {
        Err(GatewayError::invalid(
            "model",
            format!(
                "Bedrock model {} is not an embeddings model the gateway can call: map the \
                 group's model to Amazon Titan Text Embeddings (amazon.titan-embed-text-*) or \
                 Cohere Embed (cohere.embed-*)",
                model.escape_debug()
            ),
        ))
    }
}

/// Cohere's `input_type` (required): queries as queries, anything else
/// as documents (what a store indexes, the common case).
fn input_type(task: Option<Task>) -> &'static str {
    match task {
        Some(t) if t.is_query() => "search_query",
        Some(Task::Classification) => "classification",
        Some(Task::Clustering) => "clustering",
        _ => "search_document",
    }
}

/// The one size a model that takes no `dimensions` embeds in (Titan Text
/// Embeddings v1 1536, Cohere Embed v3 1024, its light models 384): a
/// request asking for it asks for what the model does anyway, so it is
/// sent without the member.
fn native_size(model: &str) -> Option<u32> {
    if model.contains("cohere.embed") && model.contains("light") {
        Some(384)
    } else if model.contains("cohere.embed") {
        Some(1024)
    } else {
        Some(1536).filter(|_| model.contains("titan-embed"))
    }
}

impl Embedder for Bedrock {
    fn encode(&self, req: &EmbedRequest, target: &Target) -> Result<UpstreamRequest, GatewayError> {
        let texts = req.input.texts("bedrock")?;
        let family = family(target.model)?;
        let fixed = matches!(
            family,
            Family::Titan { v2: false } | Family::Cohere { v4: false }
        );
        let dimensions = req
            .dimensions
            .filter(|&d| !fixed || Some(d) != native_size(target.model));
        match family {
            Family::Titan { v2 } => {
                check_batch(
                    req,
                    "bedrock, Titan Text Embeddings",
                    self.max_inputs(target.model),
                )?;
                match (dimensions, v2) {
                    (None, _) | (Some(256 | 512 | 1024), true) => {}
                    (Some(_), true) => {
                        return Err(bad_dimensions(target.model, Some("256, 512 or 1024")))
                    }
                    (Some(_), false) => return Err(bad_dimensions(target.model, None)),
                }
                let text = texts.first().map_or("", String::as_str);
                super::request(
                    target,
                    &TitanRequest {
                        input_text: text,
                        dimensions,
                    },
                )
            }
            Family::Cohere { v4 } => {
                check_batch(req, "bedrock, Cohere Embed", self.max_inputs(target.model))?;
                if dimensions.is_some() && !v4 {
                    return Err(bad_dimensions(target.model, None));
                }
                super::request(
                    target,
                    &CohereRequest {
                        texts,
                        input_type: input_type(req.task),
                        output_dimension: dimensions,
                    },
                )
            }
        }
    }

    fn decode(&self, body: &[u8], model: &str) -> Result<Embeddings, GatewayError> {
        match family(model)? {
            Family::Titan { .. } => {
                let answer: TitanAnswer = super::read(body)?;
                Ok(Embeddings {
                    vectors: vec![answer.embedding],
                    prompt_tokens: answer.input_text_token_count,
                })
            }
            Family::Cohere { .. } => {
                let answer: CohereAnswer = super::read(body)?;
                let vectors = match answer.embeddings {
                    CohereEmbeddings::Floats(v) | CohereEmbeddings::ByType { float: v } => v,
                };
                Ok(Embeddings {
                    vectors,
                    prompt_tokens: None,
                })
            }
        }
    }

    /// Titan takes one `inputText`; Cohere Embed up to 96 `texts`. A model
    /// Bedrock does not embed with takes none (its encoder refuses it).
    fn max_inputs(&self, model: &str) -> usize {
        match family(model) {
            Ok(Family::Titan { .. }) => 1,
            Ok(Family::Cohere { .. }) => COHERE_MAX_BATCH,
            Err(_) => usize::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_models_own_size_asked_for_is_sent_without_the_member() {
        let config = crate::config::Config::parse(
            br#"{"providers":{"b":{"dialect":"bedrock"}},"model_groups":{"x":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap();
        let encode = |model: &str, dimensions: u32| {
            let target = Target {
                provider: &config.providers["b"],
                model,
            };
            let body = format!(r#"{{"model":"m","input":["a"],"dimensions":{dimensions}}}"#);
            let req = crate::wire::openai_embeddings::parse(body.as_bytes()).unwrap();
            Bedrock
                .encode(&req, &target)
                .map(|up| serde_json::from_slice::<serde_json::Value>(&up.body).unwrap())
        };
        for (model, native) in [
            ("cohere.embed-english-v3", 1024),
            ("us.cohere.embed-multilingual-v3", 1024),
            ("amazon.titan-embed-text-v1", 1536),
        ] {
            let body = encode(model, native).unwrap();
            assert!(body.get("output_dimension").is_none(), "{model}: {body}");
            assert!(body.get("dimensions").is_none(), "{model}: {body}");
            let e = encode(model, 512).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("dimensions"), "{model}");
        }
        // A model that takes sizes gets the one asked for, its own too.
        assert_eq!(
            encode("cohere.embed-v4:0", 1536).unwrap()["output_dimension"],
            1536
        );
        assert_eq!(
            encode("amazon.titan-embed-text-v2:0", 1024).unwrap()["dimensions"],
            1024
        );
    }
}
