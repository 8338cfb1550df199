//! Anthropic's `/v1/models` answers: the model groups a caller may use, as
//! Anthropic lists its models (`created_at` in RFC 3339).

use crate::date::rfc3339;
use crate::wire::anthropic::{Model, ModelList};

/// One model group, named as its id.
fn model<'a>(id: &'a str, created_at: &'a str) -> Model<'a> {
    Model {
        created_at,
        display_name: id,
        id,
        kind: "model",
    }
}

/// `GET /v1/models`: `names`, created when the configuration was loaded
/// (Unix seconds), in one page.
pub fn render_list(names: &[&str], loaded_at: u64) -> Vec<u8> {
    let created_at = rfc3339(loaded_at);
    let list = ModelList {
        data: names.iter().map(|id| model(id, &created_at)).collect(),
        first_id: names.first().copied(),
        has_more: false,
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
                r#"{{"data":[{{"created_at":"{t}","display_name":"chat","id":"chat","type":"model"}},{{"created_at":"{t}","display_name":"fast","id":"fast","type":"model"}}],"first_id":"chat","has_more":false,"last_id":"fast"}}"#
            )
        );
        assert_eq!(
            String::from_utf8(render_list(&[], 7)).unwrap(),
            r#"{"data":[],"first_id":null,"has_more":false,"last_id":null}"#
        );
        assert_eq!(
            String::from_utf8(render_one("chat", 7)).unwrap(),
            format!(r#"{{"created_at":"{t}","display_name":"chat","id":"chat","type":"model"}}"#)
        );
    }
}
