//! Bedrock's embedding models through InvokeModel, each family in its own
//! body: Amazon Titan Text Embeddings (`inputText`, one per call) and
//! Cohere Embed (`texts`, `input_type`), and their answers.

use serde::{Deserialize, Serialize};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TitanRequest<'a> {
    pub input_text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitanAnswer {
    pub embedding: Vec<f32>,
    #[serde(default)]
    pub input_text_token_count: Option<u64>,
}

#[derive(Serialize)]
pub struct CohereRequest<'a> {
    pub texts: &'a [String],
    pub input_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_dimension: Option<u32>,
}

#[derive(Deserialize)]
pub struct CohereAnswer {
    pub embeddings: CohereEmbeddings,
}

/// Floats as a list, or by type when `embedding_types` was asked for.
pub enum CohereEmbeddings {
    Floats(Vec<Vec<f32>>),
    ByType { float: Vec<Vec<f32>> },
}

/// Read by its first token, not as an untagged enum: serde buffers an
/// untagged enum's content (a tree node per number) before trying each
/// variant. By type, only `float` is read (the others are skipped).
impl<'de> Deserialize<'de> for CohereEmbeddings {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = CohereEmbeddings;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of vectors or vectors by type")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<CohereEmbeddings, A::Error> {
                let mut vectors = Vec::new();
                while let Some(vector) = seq.next_element::<Vec<f32>>()? {
                    vectors.push(vector);
                }
                Ok(CohereEmbeddings::Floats(vectors))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<CohereEmbeddings, A::Error> {
                let mut float = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "float" {
                        if float.is_some() {
                            return Err(serde::de::Error::duplicate_field("float"));
                        }
                        float = Some(map.next_value::<Vec<Vec<f32>>>()?);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                float
                    .map(|float| CohereEmbeddings::ByType { float })
                    .ok_or_else(|| serde::de::Error::missing_field("float"))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats(body: &str) -> Result<Vec<Vec<f32>>, serde_json::Error> {
        let answer: CohereAnswer = serde_json::from_str(body)?;
        Ok(match answer.embeddings {
            CohereEmbeddings::Floats(v) => v,
            CohereEmbeddings::ByType { float } => float,
        })
    }

    #[test]
    fn cohere_answers_as_a_list_or_by_type() {
        let listed = floats(r#"{"id":"x","embeddings":[[0.5,-1.0],[2.0]],"texts":["a","b"]}"#);
        assert_eq!(listed.unwrap(), vec![vec![0.5, -1.0], vec![2.0]]);
        // By type: the other types are skipped, whatever they hold.
        let typed = floats(r#"{"embeddings":{"int8":[[1,2]],"float":[[0.25]],"ubinary":{"a":1}}}"#);
        assert_eq!(typed.unwrap(), vec![vec![0.25]]);
        assert!(floats(r#"{"embeddings":{"int8":[[1,2]]}}"#).is_err());
        assert!(floats(r#"{"embeddings":{"float":[[1.0]],"float":[[2.0]]}}"#).is_err());
        assert!(floats(r#"{"embeddings":"x"}"#).is_err());
        assert!(floats(r#"{"embeddings":[[1.0,"2"]]}"#).is_err());
        assert!(floats(r#"{"embeddings":[1.0]}"#).is_err());
    }
}
