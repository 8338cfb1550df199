//! OpenAI's `/v1/models` answers: the models a caller may use (its model
//! groups, then the discovered models its groups reach), as OpenAI lists
//! its models (shared by the Chat Completions and Responses surfaces: both
//! APIs' clients list models there).
//!
//! Members in OpenAI's order: `object` and `data` for the list; `id`,
//! `object`, `created`, `owned_by` for a model, then the gateway's
//! `context_window` and `max_output_tokens` where it knows them.

use std::borrow::Cow;

use crate::model::listing::Listed;
use crate::wire::openai_models::{List, Model};

fn model(listed: &Listed, loaded_at: u64) -> Model<'_> {
    Model {
        id: Cow::Borrowed(&listed.id),
        object: Cow::Borrowed("model"),
        created: Some(listed.created.unwrap_or(loaded_at)),
        owned_by: Some(Cow::Borrowed(
            listed.owned_by.as_deref().unwrap_or("llm-gateway"),
        )),
        context_window: listed.context_window,
        max_output_tokens: listed.max_output_tokens,
        ..Model::default()
    }
}

/// `GET /v1/models`: `models`, created (unless they say) when the
/// configuration was loaded.
pub fn render_list(models: &[Listed], loaded_at: u64) -> Vec<u8> {
    let list = List {
        object: Cow::Borrowed("list"),
        data: models.iter().map(|m| model(m, loaded_at)).collect(),
    };
    serde_json::to_vec(&list).unwrap_or_default()
}

/// `GET /v1/models/{model}`: one of them.
pub fn render_one(listed: &Listed, loaded_at: u64) -> Vec<u8> {
    serde_json::to_vec(&model(listed, loaded_at)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_listed_as_openai_lists_them() {
        let groups = [Listed::named("chat"), Listed::named("fast")];
        assert_eq!(
            String::from_utf8(render_list(&groups, 7)).unwrap(),
            r#"{"object":"list","data":[{"id":"chat","object":"model","created":7,"owned_by":"llm-gateway"},{"id":"fast","object":"model","created":7,"owned_by":"llm-gateway"}]}"#
        );
        assert_eq!(
            String::from_utf8(render_list(&[], 7)).unwrap(),
            r#"{"object":"list","data":[]}"#
        );
        assert_eq!(
            String::from_utf8(render_one(&groups[0], 7)).unwrap(),
            r#"{"id":"chat","object":"model","created":7,"owned_by":"llm-gateway"}"#
        );
        // A discovered model: its vendor's time and owner, and what is known of it.
        let discovered = Listed {
            created: Some(5),
            owned_by: Some("openai".into()),
            context_window: Some(128_000),
            max_output_tokens: Some(16_384),
            ..Listed::named("gpt-4o")
        };
        assert_eq!(
            String::from_utf8(render_one(&discovered, 7)).unwrap(),
            r#"{"id":"gpt-4o","object":"model","created":5,"owned_by":"openai","context_window":128000,"max_output_tokens":16384}"#
        );
    }
}
