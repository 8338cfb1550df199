//! Anthropic's `/v1/models` answers: the model groups a caller may use, as
//! Anthropic lists its models (`created_at` in RFC 3339).

use crate::date::rfc3339;
use crate::wire::anthropic::{Model, ModelList};

/// One model group, named as its id.
fn model<'a>(id: &'a str, created_at: &'a str) -> Model<'a> {
    Model {
        kind: "model",
        id,
        display_name: id,
        created_at,
    }
}

/// `GET /v1/models`: `names`, created when the configuration was loaded
/// (Unix seconds), in one page.
pub fn render_list(names: &[&str], loaded_at: u64) -> Vec<u8> {
    let created_at = rfc3339(loaded_at);
    let list = ModelList {
        data: names.iter().map(|id| model(id, &created_at)).collect(),
        has_more: false,
        first_id: names.first().copied(),
        last_id: names.last().copied(),
    };
    serde_json::to_vec(&list).unwrap_or_default()
}

/// `GET /v1/models/{model_id}`: one of them.
pub fn render_one(name: &str, loaded_at: u64) -> Vec<u8> {
    serde_json::to_vec(&model(name, &rfc3339(loaded_at))).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_listed_as_anthropic_lists_them() {
        let t = "1970-01-01T00:00:07Z";
        assert_eq!(
            String::from_utf8(render_list(&["chat", "fast"], 7)).unwrap(),
            format!(
                r#"{{"data":[{{"type":"model","id":"chat","display_name":"chat","created_at":"{t}"}},{{"type":"model","id":"fast","display_name":"fast","created_at":"{t}"}}],"has_more":false,"first_id":"chat","last_id":"fast"}}"#
            )
        );
        assert_eq!(
            String::from_utf8(render_list(&[], 7)).unwrap(),
            r#"{"data":[],"has_more":false,"first_id":null,"last_id":null}"#
        );
        assert_eq!(
            String::from_utf8(render_one("chat", 7)).unwrap(),
            format!(r#"{{"type":"model","id":"chat","display_name":"chat","created_at":"{t}"}}"#)
        );
    }
}
