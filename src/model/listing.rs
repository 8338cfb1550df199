//! A model as a model list shows it, whoever's list it is: a vendor's
//! (what a dialect's lister reads, `dialects::list`) or the gateway's own
//! (what the surfaces render for `GET /v1/models`: the model groups and
//! the discovered models a caller may reach). No client API owns its
//! shape: each surface writes it in its own.

use serde::{Deserialize, Serialize};

/// One model of a list. What a list does not say is `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    /// The name requests use (a vendor's model id, or a model group).
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// When the model was made (Unix seconds), as its vendor says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<u64>,
    /// Who owns it (OpenAI's `owned_by`; the provider it was discovered at).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned_by: Option<String>,
    /// The model it runs, when its id names something else (an Azure
    /// deployment): what is known of that model holds for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The most input tokens it takes (its context window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The most output tokens one answer may ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Capabilities::unknown")]
    pub capabilities: Capabilities,
}

/// What a list says a model can do (`None`: it does not say).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Generates text (chat, messages, generateContent, Converse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate: Option<bool>,
    /// Embeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embed: Option<bool>,
    /// Takes image input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision: Option<bool>,
    /// Counts tokens with a call of its own (Gemini's `countTokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count_tokens: Option<bool>,
}

impl Capabilities {
    /// Nothing is said.
    pub fn unknown(&self) -> bool {
        *self == Self::default()
    }
}

impl Listed {
    /// A model known by its name only (a model group).
    pub fn named(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ..Self::default()
        }
    }
}

/// The longest model id a list may give (longer ones are left out): a
/// client's model name is at most this long too.
pub const MAX_ID_CHARS: usize = 256;

/// Whether `id` is one the gateway keeps: not empty, not over
/// [`MAX_ID_CHARS`], no control characters (it is written into headers,
/// logs and metric labels).
pub fn keepable(id: &str) -> bool {
    !id.is_empty() && id.chars().count() <= MAX_ID_CHARS && !id.chars().any(char::is_control)
}

/// A display name cut to a bounded length (it is stored and shown, never read).
pub fn bounded(text: &str) -> String {
    text.chars().take(MAX_ID_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_facts_are_left_out_of_the_stored_form() {
        let m = Listed::named("m");
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"id":"m"}"#);
        let full = Listed {
            context_window: Some(10),
            capabilities: Capabilities {
                generate: Some(true),
                ..Capabilities::default()
            },
            ..Listed::named("m")
        };
        let text = serde_json::to_string(&full).unwrap();
        assert_eq!(
            text,
            r#"{"id":"m","context_window":10,"capabilities":{"generate":true}}"#
        );
        assert_eq!(serde_json::from_str::<Listed>(&text).unwrap(), full);
    }

    #[test]
    fn ids_are_kept_only_when_sane() {
        assert!(keepable("gpt-4o"));
        assert!(!keepable(""));
        assert!(!keepable("a\nb"));
        assert!(!keepable(&"x".repeat(257)));
        assert_eq!(bounded(&"é".repeat(300)).chars().count(), 256);
    }
}
