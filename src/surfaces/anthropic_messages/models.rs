//! Anthropic's `/v1/models` answers: the models a caller may use (its
//! model groups, then the discovered models its groups reach), as
//! Anthropic lists its models (`created_at` in RFC 3339; `max_input_tokens`
//! and `max_tokens` where the gateway knows them).

use std::borrow::Cow;

use crate::formats::date::rfc3339;
use crate::model::listing::Listed;
use crate::wire::anthropic::{Model, ModelList};

/// One model, created (unless it says) when the configuration was loaded.
fn model(listed: &Listed, loaded_at: u64) -> Model<'_> {
    Model {
        kind: Cow::Borrowed("model"),
        id: Cow::Borrowed(&listed.id),
        display_name: Cow::Borrowed(listed.display_name.as_deref().unwrap_or(&listed.id)),
        created_at: Cow::Owned(rfc3339(listed.created.unwrap_or(loaded_at))),
        max_input_tokens: listed.context_window,
        max_tokens: listed.max_output_tokens,
        ..Model::default()
    }
}

/// `GET /v1/models`: `models`, in one page.
pub fn render_list(models: &[Listed], loaded_at: u64) -> Vec<u8> {
    let list = ModelList {
        data: models.iter().map(|m| model(m, loaded_at)).collect(),
        has_more: false,
        first_id: models.first().map(|m| Cow::Borrowed(m.id.as_str())),
        last_id: models.last().map(|m| Cow::Borrowed(m.id.as_str())),
    };
    serde_json::to_vec(&list).unwrap_or_default()
}

/// `GET /v1/models/{model_id}`: one of them.
pub fn render_one(listed: &Listed, loaded_at: u64) -> Vec<u8> {
    serde_json::to_vec(&model(listed, loaded_at)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_listed_as_anthropic_lists_them() {
        let t = "1970-01-01T00:00:07Z";
        let groups = [Listed::named("chat"), Listed::named("fast")];
        assert_eq!(
            String::from_utf8(render_list(&groups, 7)).unwrap(),
            format!(
                r#"{{"data":[{{"type":"model","id":"chat","display_name":"chat","created_at":"{t}"}},{{"type":"model","id":"fast","display_name":"fast","created_at":"{t}"}}],"has_more":false,"first_id":"chat","last_id":"fast"}}"#
            )
        );
        assert_eq!(
            String::from_utf8(render_list(&[], 7)).unwrap(),
            r#"{"data":[],"has_more":false,"first_id":null,"last_id":null}"#
        );
        assert_eq!(
            String::from_utf8(render_one(&groups[0], 7)).unwrap(),
            format!(r#"{{"type":"model","id":"chat","display_name":"chat","created_at":"{t}"}}"#)
        );
        let discovered = Listed {
            display_name: Some("Claude Sonnet 4.5".into()),
            created: Some(0),
            context_window: Some(200_000),
            max_output_tokens: Some(64_000),
            ..Listed::named("claude-sonnet-4-5")
        };
        assert_eq!(
            String::from_utf8(render_one(&discovered, 7)).unwrap(),
            r#"{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5","created_at":"1970-01-01T00:00:00Z","max_input_tokens":200000,"max_tokens":64000}"#
        );
    }
}
