//! OpenAI's `/v1/models` answers: the model groups a caller may use, as
//! OpenAI lists its models (shared by the Chat Completions and Responses
//! surfaces: both APIs' clients list models there).
//!
//! Fields in alphabetical order, as the gateway has always sent them.

use serde::Serialize;

#[derive(Serialize)]
struct Model<'a> {
    created: u64,
    id: &'a str,
    object: &'static str,
    owned_by: &'static str,
}

impl<'a> Model<'a> {
    fn new(id: &'a str, loaded_at: u64) -> Self {
        Self {
            created: loaded_at,
            id,
            object: "model",
            owned_by: "llm-gateway",
        }
    }
}

#[derive(Serialize)]
struct List<'a> {
    data: Vec<Model<'a>>,
    object: &'static str,
}

/// `GET /v1/models`: `names`, created when the configuration was loaded.
pub fn render_list(names: &[&str], loaded_at: u64) -> Vec<u8> {
    let list = List {
        data: names.iter().map(|id| Model::new(id, loaded_at)).collect(),
        object: "list",
    };
    serde_json::to_vec(&list).unwrap_or_default()
}

/// `GET /v1/models/{model}`: one of them.
pub fn render_one(name: &str, loaded_at: u64) -> Vec<u8> {
    serde_json::to_vec(&Model::new(name, loaded_at)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_listed_as_openai_lists_them() {
        assert_eq!(
            String::from_utf8(render_list(&["chat", "fast"], 7)).unwrap(),
            r#"{"data":[{"created":7,"id":"chat","object":"model","owned_by":"llm-gateway"},{"created":7,"id":"fast","object":"model","owned_by":"llm-gateway"}],"object":"list"}"#
        );
        assert_eq!(
            String::from_utf8(render_list(&[], 7)).unwrap(),
            r#"{"data":[],"object":"list"}"#
        );
        assert_eq!(
            String::from_utf8(render_one("chat", 7)).unwrap(),
            r#"{"created":7,"id":"chat","object":"model","owned_by":"llm-gateway"}"#
        );
    }
}
