//! The response cache (docs/src/features/cache.md): a model group's
//! answers kept and given again to a repeated request, in the asking
//! client's own API, without a vendor call.
//!
//! - [`key`]: what a request is cached by: a hash of the neutral request's
//!   output-determining content, so every client API shares entries;
//! - [`entry`]: what is kept, the neutral answer (ordered blocks, finish,
//!   usage, who answered), never a rendered body;
//! - [`capture`]: the answer recorded from the neutral events as they pass
//!   to the client's stream encoder, or from a decoded whole answer;
//! - [`replay`]: an entry rendered by the asking surface, whole or as a
//!   stream;
//! - [`semantic`], [`semantic_index`]: the semantic cache, a prompt close
//!   in meaning to a cached one answered with its entry;
//! - [`store`]: where entries live (the proxy's shared data, or the fleet's
//!   state service: `crate::shared_state`).
//!
//! This module decides; the sessions act (`session::edge::cache`,
//! `session::attempt::cache`).

use serde::Deserialize;

use crate::model::request::ChatRequest;

pub mod capture;
pub mod entry;
pub mod key;
pub mod replay;
pub mod semantic;
pub mod semantic_index;
pub mod store;

/// A model group's cache (configuration `model_groups.<name>.cache`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// How long an entry is given again after it was stored.
    pub ttl_seconds: u64,
    /// The proxy's memory for the group's entries (the in-process store):
    /// past it, the least recently used go first.
    pub max_bytes: u64,
    /// Entries kept at most (the in-process store's slots).
    pub max_entries: u32,
    /// A larger answer is not stored.
    pub max_entry_bytes: u64,
    /// Whose entries a request may be given.
    pub scope: Scope,
    /// Which requests are cached.
    pub when: When,
    /// The semantic cache (`semantic.rs`): off unless set.
    pub semantic: Option<semantic::Settings>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            ttl_seconds: 3600,
            max_bytes: 64 << 20,
            max_entries: 4096,
            max_entry_bytes: 1 << 20,
            scope: Scope::Key,
            when: When::Always,
            semantic: None,
        }
    }
}

/// Whose entries a request may be given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Only its own gateway key's (the default).
    #[default]
    Key,
    /// Any caller's of the group: every key that may use the group shares them.
    Group,
}

/// Which requests are cached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// Every request that can be (the default).
    #[default]
    Always,
    /// Only a request that asks for the same answer each time: temperature
    /// 0, or a seed.
    Deterministic,
}

/// The most entries a group's in-process cache may keep.
pub const MAX_ENTRIES: u32 = crate::shared_state::local::MAX_ENTRIES;

impl Settings {
    /// The configuration's check (`model_groups.<name>.cache.*`: `field`).
    pub fn validate(&self, field: &str) -> Result<(), String> {
        if self.max_entries == 0 || self.max_entries > MAX_ENTRIES {
            return Err(format!("{field}.max_entries: must be 1 to {MAX_ENTRIES}"));
        }
        for (name, value) in [
            ("max_bytes", self.max_bytes),
            ("max_entry_bytes", self.max_entry_bytes),
            ("ttl_seconds", self.ttl_seconds),
        ] {
            if value == 0 {
                return Err(format!("{field}.{name}: must be at least 1"));
            }
        }
        if self.ttl_seconds > u64::from(u32::MAX) {
            return Err(format!("{field}.ttl_seconds: at most {}", u32::MAX));
        }
        if self.max_entry_bytes > self.max_bytes {
            return Err(format!(
                "{field}.max_entry_bytes: must not exceed max_bytes"
            ));
        }
        if let Some(semantic) = &self.semantic {
            semantic.validate(&format!("{field}.semantic"))?;
        }
        Ok(())
    }
}

/// What the cache did for one response (`x-llm-cache`, the access log's
/// `cache`, the `llm_gateway.cache` metric's `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Answered from the entry of an equal request.
    Hit,
    /// Answered from the entry of a request close enough in meaning.
    SemanticHit,
    /// A vendor answered; the answer is stored if it can be.
    Miss,
    /// The cache took no part: nothing looked up, nothing stored.
    Bypass,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Hit => "hit",
            Status::SemanticHit => "semantic-hit",
            Status::Miss => "miss",
            Status::Bypass => "bypass",
        }
    }

    pub fn is_hit(self) -> bool {
        matches!(self, Status::Hit | Status::SemanticHit)
    }
}

/// What a request asks of the cache (its `cache-control` header).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Control {
    /// `no-cache`: not answered from the cache (its answer is stored).
    pub no_cache: bool,
    /// `no-store`: neither answered from the cache nor stored.
    pub no_store: bool,
}

impl Control {
    /// A `cache-control` value's directives (RFC 9111: comma-separated,
    /// case-insensitive); others are ignored.
    pub fn parse(value: Option<&str>) -> Self {
        let mut control = Self::default();
        for directive in value.unwrap_or_default().split(',') {
            let name = directive.split('=').next().unwrap_or_default().trim();
            if name.eq_ignore_ascii_case("no-cache") {
                control.no_cache = true;
            } else if name.eq_ignore_ascii_case("no-store") {
                control.no_store = true;
            }
        }
        control
    }
}

/// What the cache does for one generation request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Look it up, and store a vendor's answer.
    LookUp,
    /// Store the vendor's answer only (`no-cache`).
    StoreOnly,
    /// Nothing (`no-store`, or a request the cache cannot or may not keep).
    Bypass,
}

impl Plan {
    /// The plan for `request` on a group cached as `settings`, asked as
    /// `control`.
    pub fn of(settings: &Settings, request: &ChatRequest, control: Control) -> Plan {
        if control.no_store || !cacheable(request) {
            return Plan::Bypass;
        }
        if settings.when == When::Deterministic && !deterministic(request) {
            return Plan::Bypass;
        }
        if control.no_cache {
            Plan::StoreOnly
        } else {
            Plan::LookUp
        }
    }

    /// The status a response gets when the cache did not answer it.
    pub fn status(self) -> Status {
        match self {
            Plan::LookUp | Plan::StoreOnly => Status::Miss,
            Plan::Bypass => Status::Bypass,
        }
    }
}

/// Whether the key can say all that decides the answer: not so for what
/// only the client API's own vendor carries (`native_only`: the Responses
/// API's `previous_response_id` or built-in tools, Anthropic's server
/// tools), a web search (its results change by the hour), several
/// choices (the neutral answer is one).
fn cacheable(request: &ChatRequest) -> bool {
    request.native_only.is_none() && request.web_search.is_none() && request.n.unwrap_or(1) == 1
}

/// A request for the same answer each time: temperature 0, or a seed.
fn deterministic(request: &ChatRequest) -> bool {
    request.temperature == Some(0.0) || request.seed.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_control_directives_are_read_case_insensitively() {
        assert_eq!(Control::parse(None), Control::default());
        let both = Control::parse(Some("No-Cache, max-age=0 ,NO-STORE"));
        assert!(both.no_cache && both.no_store);
        let one = Control::parse(Some("no-cache=\"x\""));
        assert!(one.no_cache && !one.no_store);
        assert_eq!(Control::parse(Some("private")), Control::default());
    }

    #[test]
    fn the_plan_follows_the_request_and_the_group() {
        let settings = Settings::default();
        let mut request = ChatRequest::default();
        let none = Control::default();
        assert_eq!(Plan::of(&settings, &request, none), Plan::LookUp);
        let no_cache = Control::parse(Some("no-cache"));
        assert_eq!(Plan::of(&settings, &request, no_cache), Plan::StoreOnly);
        let no_store = Control::parse(Some("no-store, no-cache"));
        assert_eq!(Plan::of(&settings, &request, no_store), Plan::Bypass);
        let deterministic = Settings {
            when: When::Deterministic,
            ..Settings::default()
        };
        assert_eq!(Plan::of(&deterministic, &request, none), Plan::Bypass);
        request.temperature = Some(0.0);
        assert_eq!(Plan::of(&deterministic, &request, none), Plan::LookUp);
        request.temperature = Some(0.7);
        request.seed = Some(7);
        assert_eq!(Plan::of(&deterministic, &request, none), Plan::LookUp);
        request.n = Some(2);
        assert_eq!(Plan::of(&settings, &request, none), Plan::Bypass);
        assert_eq!(Plan::Bypass.status(), Status::Bypass);
        assert_eq!(Plan::StoreOnly.status(), Status::Miss);
    }

    #[test]
    fn settings_are_checked() {
        let ok = Settings::default();
        assert_eq!(ok.validate("g"), Ok(()));
        let zero = Settings {
            ttl_seconds: 0,
            ..Settings::default()
        };
        assert!(zero.validate("g").unwrap_err().contains("g.ttl_seconds"));
        let big = Settings {
            max_entry_bytes: 2,
            max_bytes: 1,
            ..Settings::default()
        };
        assert!(big.validate("g").unwrap_err().contains("max_entry_bytes"));
        let none = Settings {
            max_entries: 0,
            ..Settings::default()
        };
        assert!(none.validate("g").is_err());
    }
}
