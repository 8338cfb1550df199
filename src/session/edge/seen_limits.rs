//! The vendors' batch limits the edge role learned from its self-calls'
//! answers. A candidate that leaves its provider to its cluster's endpoints
//! says nothing of its vendor's per-call limit until an attempt reached
//! one: the first batch of two or more inputs goes as one self-call, whose
//! answer carries the limit (`x-llm-batch-limit`, which attempts send with
//! self-calls on). Kept here, a later batch to that candidate is split by
//! it at once, or sent as any request when it fits: one self-call hop per
//! worker and candidate, not one per batch.
//!
//! Per worker (no host call), by model group, candidate and the client's
//! model (the vendor model follows from it), the smallest limit seen (an
//! aggregate cluster's vendors may differ). Bounded: at most [`MAX_SEEN`]
//! entries, all forgotten when full and when another configuration loads
//! (its candidates may be others).

use std::cell::RefCell;
use std::collections::HashMap;

/// Entries kept per worker.
const MAX_SEEN: usize = 1024;

#[derive(Default)]
struct Seen {
    /// The configuration they were learned under (its load time and address).
    config: (u64, usize),
    limits: HashMap<String, usize>,
}

thread_local! {
    static SEEN: RefCell<Seen> = RefCell::new(Seen::default());
}

/// Which configuration a limit was learned under.
pub(super) fn config_id(config: &std::rc::Rc<crate::config::Config>) -> (u64, usize) {
    (config.loaded_at, std::rc::Rc::as_ptr(config) as usize)
}

fn key(group: &str, candidate: usize, model: &str) -> String {
    format!("{group}\n{candidate}\n{model}")
}

/// The limit learned for candidate `candidate` of `group` and client model
/// `model`, under configuration `config`.
pub(super) fn learned(
    config: (u64, usize),
    group: &str,
    candidate: usize,
    model: &str,
) -> Option<usize> {
    SEEN.with(|seen| {
        let seen = seen.borrow();
        if seen.config != config {
            return None;
        }
        seen.limits.get(&key(group, candidate, model)).copied()
    })
}

/// Keeps `max` for that candidate and model, unless a smaller one was seen.
pub(super) fn learn(config: (u64, usize), group: &str, candidate: usize, model: &str, max: usize) {
    if max == 0 {
        return;
    }
    SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        if seen.config != config || seen.limits.len() >= MAX_SEEN {
            seen.limits.clear();
            seen.config = config;
        }
        let limit = seen
            .limits
            .entry(key(group, candidate, model))
            .or_insert(max);
        *limit = (*limit).min(max);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_limit_is_kept_per_candidate_and_model_under_one_configuration() {
        let (a, b) = ((1, 10), (1, 20));
        assert_eq!(learned(a, "g", 0, "m"), None);
        learn(a, "g", 0, "m", 96);
        learn(a, "g", 0, "m", 2048);
        assert_eq!(learned(a, "g", 0, "m"), Some(96), "the smaller one stays");
        learn(a, "g", 0, "m", 10);
        assert_eq!(learned(a, "g", 0, "m"), Some(10));
        assert_eq!(learned(a, "g", 1, "m"), None);
        assert_eq!(learned(a, "g", 0, "other"), None);
        assert_eq!(learned(a, "h", 0, "m"), None);
        // Another configuration: nothing learned under the first counts.
        assert_eq!(learned(b, "g", 0, "m"), None);
        learn(b, "g", 0, "m", 100);
        assert_eq!(learned(a, "g", 0, "m"), None);
        assert_eq!(learned(b, "g", 0, "m"), Some(100));
        // Bounded: full, it starts over.
        for i in 0..MAX_SEEN + 1 {
            learn(b, "g", i, "m", 5);
        }
        SEEN.with(|seen| assert!(seen.borrow().limits.len() <= MAX_SEEN));
    }
}
