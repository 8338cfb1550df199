//! The shipped table of well-known models (`data/models.json`, built into
//! the module): windows, output limits and list prices, by a model id
//! without its date or version. Read once per VM (per process natively)
//! on first use; a lookup is a few hash lookups.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;

/// One model of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    #[serde(default)]
    pub context_window: Option<u64>,
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    #[serde(default)]
    pub input_usd_per_mtok: Option<f64>,
    #[serde(default)]
    pub output_usd_per_mtok: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// What the table is, for its readers.
    #[serde(rename = "about")]
    _about: serde::de::IgnoredAny,
    models: HashMap<String, Entry>,
}

/// The table's text, as shipped.
pub const SHIPPED: &str = include_str!("../../data/models.json");

fn table() -> &'static HashMap<String, Entry> {
    static TABLE: OnceLock<HashMap<String, Entry>> = OnceLock::new();
    TABLE.get_or_init(|| {
        serde_json::from_str::<File>(SHIPPED)
            .map(|f| f.models)
            .unwrap_or_default()
    })
}

/// What the table says of vendor model `model`: the longest key that is
/// the model's id or starts it up to a `-`, `@` or `:` (`gpt-4o` for
/// `gpt-4o-2024-08-06`, never for `gpt-4o-mini`'s own key), after a
/// platform's prefix (`models/`, `publishers/{p}/models/`, Bedrock's
/// geography and provider: `us.anthropic.`).
pub fn lookup(model: &str) -> Option<Entry> {
    let table = table();
    let mut name = model.strip_prefix("models/").unwrap_or(model);
    if let Some((_, rest)) = name
        .strip_prefix("publishers/")
        .and_then(|r| r.split_once("/models/"))
    {
        name = rest;
    }
    // At most a geography and a provider, each a dot-ended word without a dash.
    for _ in 0..3 {
        if let Some(found) = longest(table, name) {
            return Some(found);
        }
        match name.split_once('.') {
            Some((word, rest)) if !word.contains('-') && !word.is_empty() => name = rest,
            _ => return None,
        }
    }
    None
}

fn longest(table: &HashMap<String, Entry>, name: &str) -> Option<Entry> {
    if let Some(entry) = table.get(name) {
        return Some(*entry);
    }
    let ends = name
        .char_indices()
        .rev()
        .filter(|(_, c)| matches!(c, '-' | '@' | ':'))
        .map(|(i, _)| i);
    for end in ends {
        if let Some(entry) = name.get(..end).and_then(|prefix| table.get(prefix)) {
            return Some(*entry);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_reads() {
        let file: File = serde_json::from_str(SHIPPED).unwrap();
        assert!(file.models.len() > 40);
        for (id, entry) in &file.models {
            assert!(
                entry.context_window.is_some_and(|w| w > 0),
                "{id}: a window"
            );
            assert!(
                entry.max_output_tokens.is_none_or(
                    |o| o <= entry.context_window.unwrap_or(0) || id.starts_with("gemini")
                ),
                "{id}"
            );
            assert!(crate::model::listing::keepable(id));
        }
    }

    #[test]
    fn ids_match_their_key_and_dated_versions_of_it() {
        let window = |m: &str| lookup(m).and_then(|e| e.context_window);
        assert_eq!(window("gpt-4o"), Some(128_000));
        assert_eq!(window("gpt-4o-2024-08-06"), Some(128_000));
        assert_eq!(lookup("gpt-4o-mini"), lookup("gpt-4o-mini-2024-07-18"));
        assert_ne!(lookup("gpt-4o-mini"), lookup("gpt-4o"));
        assert_eq!(window("gpt-4.1-2025-04-14"), Some(1_047_576));
        assert_eq!(window("gpt-4"), Some(8192));
        assert_eq!(window("gpt-4-0613"), Some(8192));
        // No prefix that is not a whole word.
        assert_eq!(window("gpt-4x"), None);
        assert_eq!(window("o3-mini-2025-01-31"), Some(200_000));
        // Claude everywhere it runs.
        let sonnet = window("claude-sonnet-4-5");
        assert_eq!(sonnet, Some(200_000));
        assert_eq!(window("claude-sonnet-4-5-20250929"), sonnet);
        assert_eq!(window("claude-sonnet-4-5@20250929"), sonnet);
        assert_eq!(window("anthropic.claude-sonnet-4-5-20250929-v1:0"), sonnet);
        assert_eq!(
            window("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            sonnet
        );
        assert_eq!(
            lookup("claude-sonnet-4-20250514").and_then(|e| e.max_output_tokens),
            Some(64_000)
        );
        // Gemini's and Vertex AI's names.
        assert_eq!(window("models/gemini-2.5-pro"), Some(1_048_576));
        assert_eq!(
            window("publishers/google/models/gemini-2.5-flash"),
            Some(1_048_576)
        );
        assert_eq!(window("amazon.titan-embed-text-v2:0"), Some(8192));
        assert_eq!(window("mock-gpt-4o"), None);
        assert_eq!(window("qwen2.5-72b-instruct"), None);
        assert_eq!(window(""), None);
    }
}
