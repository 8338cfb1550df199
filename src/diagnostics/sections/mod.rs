//! The view's sections: each a name, a title, what it serves as JSON and a
//! small script that renders it in the page. The page's core knows none of
//! them: it polls `/llm-gateway/api/view` and hands each section's data to
//! the renderer registered under its name.
//!
//! Adding a panel (context fitting, say):
//! a file here with its `SECTION`, its renderer beside it
//! (`LLMGW.section(name, render)`, see `assets/app.js`), and one line in
//! [`SECTIONS`].

use std::cell::OnceCell;

use serde_json::Value;

use super::ring;
use super::trace::Trace;
use crate::config::{Config, Diagnostics};
use crate::discovery::Discovered;
use crate::shared_state::cas::{SetResult, SharedStore, Unreadable};

mod cache;
mod discovery;
mod health;
mod limits;
mod requests;
mod routes;

pub use requests::one as requests_one;

/// One panel of the view.
pub struct Section {
    /// Its path under `/llm-gateway/api/` and its key in the page.
    pub name: &'static str,
    pub title: &'static str,
    /// What it shows, as JSON.
    pub data: fn(&View<'_>) -> Value,
    /// Its renderer (`LLMGW.section("<name>", function (data, el, ctx) {...})`).
    pub script: &'static str,
}

/// Every section, in the page's order.
pub const SECTIONS: &[Section] = &[
    health::SECTION,
    requests::SECTION,
    routes::SECTION,
    limits::SECTION,
    cache::SECTION,
    discovery::SECTION,
];

pub fn find(name: &str) -> Option<&'static Section> {
    SECTIONS.iter().find(|s| s.name == name)
}

/// What a section may read: the configuration, the shared store, the
/// clock, the request's filters, and the recorded requests (read once,
/// when a section first asks).
pub struct View<'a> {
    pub config: &'a Config,
    pub settings: &'a Diagnostics,
    pub now_ms: u64,
    pub filter: Filter,
    store: &'a dyn SharedStore,
    traces: OnceCell<Vec<Trace>>,
    discovered: OnceCell<Option<Discovered>>,
}

impl<'a> View<'a> {
    pub fn new(
        config: &'a Config,
        settings: &'a Diagnostics,
        store: &'a dyn SharedStore,
        now_ms: u64,
        filter: Filter,
    ) -> Self {
        Self {
            config,
            settings,
            now_ms,
            filter,
            store,
            traces: OnceCell::new(),
            discovered: OnceCell::new(),
        }
    }

    /// The store, for the functions over `impl SharedStore`.
    pub fn store(&self) -> Store<'_> {
        Store(self.store)
    }

    /// Every recorded request the ring holds, newest first.
    pub fn traces(&self) -> &[Trace] {
        self.traces
            .get_or_init(|| ring::read(&self.store(), self.settings.recent_requests))
    }

    /// What model discovery shares (read once, when a section first asks;
    /// `None`: the configuration discovers nothing).
    pub fn discovered(&self) -> Option<&Discovered> {
        self.discovered
            .get_or_init(|| discovery::read(self))
            .as_ref()
    }
}

/// A `&dyn SharedStore` as an `impl SharedStore`.
pub struct Store<'a>(&'a dyn SharedStore);

impl SharedStore for Store<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, Unreadable> {
        self.0.get(key)
    }
    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> SetResult {
        self.0.set(key, value, cas)
    }
}

/// The page's filters, from the query string (`group`, `key`, `status`, `limit`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Filter {
    pub group: Option<String>,
    pub key: Option<String>,
    pub status: Option<StatusFilter>,
    pub limit: Option<usize>,
}

/// Which answers: `ok` (below 400), `error` (400 and above), `4xx`,
/// `5xx`, or one status.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StatusFilter {
    Ok,
    Error,
    Class(u16),
    Exact(u16),
}

impl StatusFilter {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "ok" => Some(Self::Ok),
            "error" => Some(Self::Error),
            "4xx" => Some(Self::Class(4)),
            "5xx" => Some(Self::Class(5)),
            _ => text
                .parse::<u16>()
                .ok()
                .filter(|s| (100..600).contains(s))
                .map(Self::Exact),
        }
    }

    fn matches(self, status: u16) -> bool {
        match self {
            Self::Ok => status < 400,
            Self::Error => status >= 400,
            Self::Class(class) => status / 100 == class,
            Self::Exact(s) => status == s,
        }
    }
}

fn refusal(param: &str, what: &str) -> (String, String) {
    (param.to_owned(), format!("{param}: {what}"))
}

impl Filter {
    /// The filters of a query string; an unknown parameter or a bad value
    /// is refused: (the parameter, why).
    pub fn parse(query: &str) -> Result<Self, (String, String)> {
        let mut filter = Filter::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = crate::formats::url::decode_segment(&value.replace('+', " "));
            let value = Some(value).filter(|v| !v.is_empty());
            match name {
                "group" => filter.group = value,
                "key" => filter.key = value,
                "status" => {
                    filter.status = match value {
                        None => None,
                        Some(v) => Some(StatusFilter::parse(&v).ok_or_else(|| {
                            refusal("status", "ok, error, 4xx, 5xx or a status code")
                        })?),
                    }
                }
                "limit" => {
                    filter.limit = match value {
                        None => None,
                        Some(v) => Some(
                            v.parse::<usize>()
                                .ok()
                                .filter(|n| *n >= 1)
                                .ok_or_else(|| refusal("limit", "a whole number, at least 1"))?,
                        ),
                    }
                }
                other => {
                    return Err((
                        other.to_owned(),
                        format!(
                            "unknown parameter '{}': the filters are group, key, status and limit",
                            other.escape_debug()
                        ),
                    ))
                }
            }
        }
        Ok(filter)
    }

    pub fn matches(&self, trace: &Trace) -> bool {
        self.group.as_ref().is_none_or(|g| *g == trace.group)
            && self.key.as_ref().is_none_or(|k| *k == trace.key)
            && self.status.is_none_or(|s| s.matches(trace.status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_read_from_the_query_and_bad_ones_named() {
        assert_eq!(Filter::parse("").unwrap(), Filter::default());
        let f = Filter::parse("group=mock%2Dfailover&key=a+b&status=5xx&limit=3").unwrap();
        assert_eq!(f.group.as_deref(), Some("mock-failover"));
        assert_eq!(f.key.as_deref(), Some("a b"));
        assert_eq!((f.status, f.limit), (Some(StatusFilter::Class(5)), Some(3)));
        assert_eq!(Filter::parse("group=&status=").unwrap(), Filter::default());
        assert_eq!(Filter::parse("status=teapot").unwrap_err().0, "status");
        assert!(Filter::parse("status=999").is_err());
        assert_eq!(Filter::parse("limit=0").unwrap_err().0, "limit");
        let (param, message) = Filter::parse("colour=red").unwrap_err();
        assert_eq!(param, "colour");
        assert!(message.contains("'colour'"), "{message}");
    }

    #[test]
    fn status_filters() {
        let t = |status| Trace {
            status,
            ..Trace::default()
        };
        let only = |s: &str| Filter {
            status: StatusFilter::parse(s),
            ..Filter::default()
        };
        assert!(only("ok").matches(&t(200)) && !only("ok").matches(&t(503)));
        assert!(only("error").matches(&t(429)) && !only("error").matches(&t(200)));
        assert!(only("4xx").matches(&t(404)) && !only("4xx").matches(&t(503)));
        assert!(only("503").matches(&t(503)) && !only("503").matches(&t(502)));
    }

    #[test]
    fn sections_have_unique_names_and_renderers_that_register_them() {
        let mut names: Vec<&str> = SECTIONS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SECTIONS.len());
        for s in SECTIONS {
            assert!(
                s.script.contains(&format!("LLMGW.section(\"{}\"", s.name)),
                "{}'s script registers it",
                s.name
            );
        }
    }
}
