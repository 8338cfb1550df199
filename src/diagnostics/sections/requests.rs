//! The recent requests: the ring's traces that pass the filters, newest
//! first, each with its attempts (their captured content only in a single
//! request's own answer, `/llm-gateway/api/requests/<id>`).

use serde::Serialize;
use serde_json::Value;

use super::{Section, View};
use crate::diagnostics::trace::Trace;

pub const SECTION: Section = Section {
    name: "requests",
    title: "Recent requests",
    data,
    script: include_str!("requests.js"),
};

#[derive(Serialize)]
struct Requests {
    ring_size: usize,
    /// Requests the ring holds, and how many of them pass the filters.
    recorded: usize,
    matching: usize,
    requests: Vec<Trace>,
}

fn data(view: &View<'_>) -> Value {
    let traces = view.traces();
    let matching: Vec<&Trace> = traces.iter().filter(|t| view.filter.matches(t)).collect();
    let requests = matching
        .iter()
        .take(view.filter.limit.unwrap_or(usize::MAX))
        .map(|t| Trace {
            prompt: None,
            answer: None,
            ..(*t).clone()
        })
        .collect();
    serde_json::to_value(Requests {
        ring_size: view.settings.recent_requests,
        recorded: traces.len(),
        matching: matching.len(),
        requests,
    })
    .unwrap_or_default()
}

/// One request by its id (the newest with it), content included.
pub fn one(view: &View<'_>, id: &str) -> Option<Value> {
    let trace = view.traces().iter().find(|t| t.request_id == id)?;
    serde_json::to_value(trace).ok()
}
