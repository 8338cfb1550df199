//! What is known of each vendor model: its context window, its output
//! limit and its list prices, from three sources, in this order:
//! 1. the configuration: a candidate's `capabilities` (for the provider
//!    and model it names), the `model_facts.models` section, the
//!    provider's `prices`;
//! 2. the vendor's own model list, as model discovery last read it
//!    (`discovery`; Gemini's and Anthropic's say windows and limits);
//! 3. the shipped table of well-known models (`data/models.json`, [`table`]).
//!
//! Each fact comes from the first source that has it, and says which
//! ([`Source`]). [`facts`] is the one lookup; `session::discovery::facts`
//! asks it with the discovered list at hand (what context fitting and
//! the edge's candidate filter read).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::model::listing::Listed;
use crate::provider::Provider;

pub mod table;

/// Where a fact comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Configuration,
    Vendor,
    Table,
}

/// What is known of one vendor model (`None`: nothing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ModelFacts {
    /// The most input tokens (prompt) it takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The most output tokens one answer may ask for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// USD per million prompt tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_usd_per_mtok: Option<f64>,
    /// USD per million completion tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_usd_per_mtok: Option<f64>,
    pub sources: Sources,
}

/// Which source each fact came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Sources {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<Source>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<Source>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prices: Option<Source>,
}

impl ModelFacts {
    /// Fills what is still unknown from `source`'s window and limit.
    fn fill(&mut self, window: Option<u64>, output: Option<u64>, source: Source) {
        if self.context_window.is_none() && window.is_some() {
            self.context_window = window;
            self.sources.context_window = Some(source);
        }
        if self.max_output_tokens.is_none() && output.is_some() {
            self.max_output_tokens = output;
            self.sources.max_output_tokens = Some(source);
        }
    }

    fn price(&mut self, input: Option<f64>, output: Option<f64>, source: Source) {
        if self.sources.prices.is_none() && (input.is_some() || output.is_some()) {
            self.input_usd_per_mtok = input;
            self.output_usd_per_mtok = output;
            self.sources.prices = Some(source);
        }
    }
}

/// A model's facts as the configuration writes them.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Configured {
    #[serde(default)]
    pub context_window: Option<u64>,
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
}

/// The configuration's `model_facts` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The edge's candidate filter checks a candidate that sets no
    /// `context_window` (or `max_output_tokens`) of its own against what
    /// is known of its vendor model (off: only what candidates set).
    #[serde(default)]
    pub check_limits: bool,
    /// Vendor model (or a glob with `*` and `?`) → its facts.
    #[serde(default)]
    pub models: BTreeMap<String, Configured>,
    /// What candidates' `capabilities` say, by (provider, vendor model):
    /// filled when the configuration is read.
    #[serde(skip)]
    pub candidates: HashMap<(String, String), Configured>,
}

impl Settings {
    pub fn validate(&self) -> Result<(), String> {
        for (model, facts) in &self.models {
            if facts.context_window == Some(0) || facts.max_output_tokens == Some(0) {
                return Err(format!(
                    "model_facts.models.{model}: limits must be at least 1"
                ));
            }
            if !crate::model::listing::keepable(model) {
                return Err(format!(
                    "model_facts.models: '{}' is no model name",
                    model.escape_debug()
                ));
            }
        }
        Ok(())
    }

    /// Remembers what a candidate on `provider` for `model` says of it
    /// (the first candidate that says a fact wins).
    pub fn note_candidate(&mut self, provider: &str, model: &str, said: Configured) {
        if said.context_window.is_none() && said.max_output_tokens.is_none() {
            return;
        }
        let entry = self
            .candidates
            .entry((provider.to_owned(), model.to_owned()))
            .or_default();
        entry.context_window = entry.context_window.or(said.context_window);
        entry.max_output_tokens = entry.max_output_tokens.or(said.max_output_tokens);
    }

    /// `models`' entry for `model`: its own, else the longest glob that matches.
    fn configured(&self, model: &str) -> Option<Configured> {
        if let Some(own) = self.models.get(model) {
            return Some(*own);
        }
        self.models
            .iter()
            .filter(|(glob, _)| glob.contains(['*', '?']) && crate::routing::glob(glob, model))
            .max_by_key(|(glob, _)| glob.len())
            .map(|(_, facts)| *facts)
    }
}

/// What is known of `model` at provider `name` (`provider` its settings,
/// `listed` its entry in that provider's discovered list, if any).
pub fn facts(
    settings: &Settings,
    name: &str,
    provider: Option<&Provider>,
    model: &str,
    listed: Option<&Listed>,
) -> ModelFacts {
    let mut facts = ModelFacts::default();
    if !settings.candidates.is_empty() {
        if let Some(c) = settings
            .candidates
            .get(&(name.to_owned(), model.to_owned()))
        {
            facts.fill(c.context_window, c.max_output_tokens, Source::Configuration);
        }
    }
    if let Some(c) = settings.configured(model) {
        facts.fill(c.context_window, c.max_output_tokens, Source::Configuration);
    }
    if let Some(price) = provider.and_then(|p| crate::metering::price_for(&p.prices, model)) {
        facts.price(Some(price.input), Some(price.output), Source::Configuration);
    }
    if let Some(listed) = listed {
        facts.fill(
            listed.context_window,
            listed.max_output_tokens,
            Source::Vendor,
        );
    }
    let base = listed.and_then(|l| l.base.as_deref());
    for id in [Some(model), base].into_iter().flatten() {
        if let Some(entry) = table::lookup(id) {
            facts.fill(entry.context_window, entry.max_output_tokens, Source::Table);
            facts.price(
                entry.input_usd_per_mtok,
                entry.output_usd_per_mtok,
                Source::Table,
            );
        }
    }
    facts
}

#[cfg(test)]
mod tests;
