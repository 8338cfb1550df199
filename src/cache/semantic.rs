//! The semantic cache (docs/src/features/cache.md, "Semantic cache"): a
//! request the exact cache misses is answered with the entry of an earlier
//! request whose prompt means nearly the same, as its embedding says.
//!
//! - **What is embedded** ([`Prompt::of`]): the system (and developer)
//!   text and the last user turn's text, one after the other. Only when the
//!   conversation ends with a user turn of text alone: a turn with an
//!   image or a document, or a tool result, means more than its text says.
//! - **What must be equal** ([`Prompt::partition`]): everything else the
//!   exact key holds (the group and client model, tools and tool choice,
//!   output format, sampling, limits, stop sequences, seed, reasoning, the
//!   earlier turns), hashed with the entry's namespace (the caller's key,
//!   or the group's for a shared scope) into the entry's partition: a
//!   lookup compares only vectors of its own partition.
//! - **Close enough**: the cosine similarity of the two vectors at least
//!   the group's `threshold` (default [`DEFAULT_THRESHOLD`]).
//!
//! The index of vectors is `semantic_index`; the embedding call and the
//! lookup are the edge's (`session::edge::semantic`).

use serde::Deserialize;

use super::key::RequestKey;
use crate::model::request::{ChatRequest, Content, ContentPart, Message};
use crate::shared_state::{Key, Namespace};

pub use super::semantic_index::{Index, MAX_DIMENSIONS};

/// The threshold when the configuration names none. High on purpose: a
/// wrong answer given as a hit costs more than a vendor call, and with
/// general-purpose embedding models two questions that differ in one
/// name ("the capital of France", "... of Spain") score around 0.9.
pub const DEFAULT_THRESHOLD: f64 = 0.95;

/// The most entries a group's index may hold.
pub const MAX_ENTRIES: u32 = 100_000;

/// A model group's semantic cache (`model_groups.<name>.cache.semantic`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The gateway's own model group the prompt is embedded with (an
    /// embeddings request of the caller's key through `self_calls`).
    pub embedding_group: String,
    /// The `model` the embeddings request names (default: the group's
    /// name; the group's candidates map it to their vendor's model).
    #[serde(default)]
    pub embedding_model: Option<String>,
    /// The least cosine similarity that is a hit (0 to 1).
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// Vectors kept at most; past it, the expired and then the least
    /// recently used go first.
    #[serde(default = "default_max_entries")]
    pub max_entries: u32,
    /// The index's bytes at most (each vector takes its dimensions in
    /// bytes, plus 68): whichever of the two bounds is reached first.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// A longer prompt text is not embedded (the lookup is skipped).
    #[serde(default = "default_max_text_bytes")]
    pub max_text_bytes: u64,
    /// How long the embedding call may take; past it, a miss.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u32,
}

fn default_threshold() -> f64 {
    DEFAULT_THRESHOLD
}
fn default_max_entries() -> u32 {
    1024
}
fn default_max_bytes() -> u64 {
    16 << 20
}
fn default_max_text_bytes() -> u64 {
    16 << 10
}
fn default_timeout_ms() -> u32 {
    1000
}

impl Settings {
    /// The configuration's check (`field`: `model_groups.<name>.cache.semantic`).
    pub fn validate(&self, field: &str) -> Result<(), String> {
        if self.embedding_group.is_empty() {
            return Err(format!("{field}.embedding_group: must name a model group"));
        }
        if !(self.threshold > 0.0 && self.threshold <= 1.0) {
            return Err(format!(
                "{field}.threshold: a cosine similarity above 0 and at most 1"
            ));
        }
        if self.max_entries == 0 || self.max_entries > MAX_ENTRIES {
            return Err(format!("{field}.max_entries: must be 1 to {MAX_ENTRIES}"));
        }
        for (name, value) in [
            ("max_bytes", self.max_bytes),
            ("max_text_bytes", self.max_text_bytes),
            ("timeout_ms", u64::from(self.timeout_ms)),
        ] {
            if value == 0 {
                return Err(format!("{field}.{name}: must be at least 1"));
            }
        }
        Ok(())
    }

    /// The check against the rest of the configuration (`group_field`:
    /// `model_groups.<name>`): its embedding group is one of `groups`, not
    /// its own, and the gateway can call itself (`self_calls`).
    pub fn check_in(
        &self,
        group_field: &str,
        groups: impl Fn(&str) -> bool,
        self_calls: bool,
    ) -> Result<(), String> {
        let field = format!("{group_field}.cache.semantic.embedding_group");
        let name = &self.embedding_group;
        if !groups(name) {
            return Err(format!("{field}: no model group is named '{name}'"));
        }
        if group_field.strip_prefix("model_groups.") == Some(name.as_str()) {
            return Err(format!("{field}: must be another group, one that embeds"));
        }
        if !self_calls {
            return Err(format!(
                "{field}: the embedding call goes through the gateway's own listener: \
                 set self_calls"
            ));
        }
        Ok(())
    }

    /// The `model` the embeddings request names.
    pub fn model(&self) -> &str {
        self.embedding_model
            .as_deref()
            .unwrap_or(&self.embedding_group)
    }
}

/// What of a request is compared by meaning, and what must be equal.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// The text embedded.
    pub text: String,
    /// The request without that text: its exact key.
    rest: RequestKey,
}

impl Prompt {
    /// `request`'s prompt on `group`, or `None` when it is not compared by
    /// meaning (see the module's comment).
    pub fn of(group: &str, request: &ChatRequest) -> Option<Self> {
        let last = request.messages.len().checked_sub(1)?;
        let Some(Message::User { content, .. }) = request.messages.get(last) else {
            return None;
        };
        let user = text_only(content)?;
        let mut text = String::new();
        let mut rest = request.clone();
        let mut kept = Vec::with_capacity(last);
        for message in request.messages.iter().take(last) {
            match message {
                Message::System { content, .. } | Message::Developer { content, .. } => {
                    text.push_str(&text_only(content)?);
                    text.push('\n');
                }
                other => kept.push(other.clone()),
            }
        }
        text.push_str(&user);
        if text.trim().is_empty() {
            return None;
        }
        rest.messages = kept.into();
        Some(Self {
            text,
            rest: RequestKey::of(group, &rest),
        })
    }

    /// The partition of the entries this prompt may be given: its namespace,
    /// everything but the text, and the embedding group and model that
    /// made its vector (another model's vectors, even of the same size,
    /// are not comparable), hashed.
    pub fn partition(&self, namespace: &Namespace, settings: &Settings) -> Key {
        let mut what = format!("{}\0{}\0", settings.embedding_group, settings.model()).into_bytes();
        what.extend_from_slice(self.rest.as_bytes());
        Key::new(PARTITION, namespace, &what)
    }
}

/// What partitions are hashed under.
const PARTITION: &str = "llm_semantic";

/// A content's text, when it has nothing but text.
fn text_only(content: &Content) -> Option<String> {
    match content {
        Content::Parts(parts) if parts.iter().any(|p| !matches!(p, ContentPart::Text { .. })) => {
            None
        }
        content => Some(content.text()),
    }
}

/// The vector of an OpenAI embeddings answer's first item (`data[0].embedding`,
/// numbers), `None` when it has none.
pub fn vector_of(body: &[u8]) -> Option<Vec<f32>> {
    #[derive(Deserialize)]
    struct Answer {
        data: Vec<Item>,
    }
    #[derive(Deserialize)]
    struct Item {
        embedding: Vec<f32>,
    }
    let answer: Answer = serde_json::from_slice(body).ok()?;
    let vector = answer.data.into_iter().next()?.embedding;
    (!vector.is_empty() && vector.iter().all(|x| x.is_finite())).then_some(vector)
}

#[cfg(test)]
mod tests;
