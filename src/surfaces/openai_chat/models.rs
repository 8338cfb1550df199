//! OpenAI's `/v1/models` answers: the model groups a caller may use, as
//! OpenAI lists its models (shared by the Chat Completions and Responses
//! surfaces: both APIs' clients list models there).
//!
//! Fields in OpenAI's order: `object` and `data` for the list; `id`,
//! `object`, `created`, `owned_by` for a model.

use serde::Serialize;

#[derive(Serialize)]
struct Model<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    owned_by: &'static str,
}

impl<'a> Model<'a> {
    fn new(id: &'a str, loaded_at: u64) -> Self {
        Self {
            id,
            object: "model",
            created: loaded_at,
            owned_by: "llm-gateway",
        }
    }
}

#[derive(Serialize)]
struct List<'a> {
    object: &'static str,
    data: Vec<Model<'a>>,
}

/// `GET /v1/models`: `names`, created when the configuration was loaded.
pub fn render_list(names: &[&str], loaded_at: u64) -> Vec<u8> {
    let list = List {
        object: "list",
        data: names.iter().map(|id| Model::new(id, loaded_at)).collect(),
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
            r#"{"object":"list","data":[{"id":"chat","object":"model","created":7,"owned_by":"llm-gateway"},{"id":"fast","object":"model","created":7,"owned_by":"llm-gateway"}]}"#
        );
        assert_eq!(
            String::from_utf8(render_list(&[], 7)).unwrap(),
            r#"{"object":"list","data":[]}"#
        );
        assert_eq!(
            String::from_utf8(render_one("chat", 7)).unwrap(),
            r#"{"id":"chat","object":"model","created":7,"owned_by":"llm-gateway"}"#
        );
    }
}
