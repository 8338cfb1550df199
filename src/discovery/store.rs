//! What model discovery shares between workers, in the host's shared data
//! (proxy-wasm's, one per `vm_id`; process memory natively), one record of
//! each kind per provider:
//! - [`ListRecord`]: the provider's last good list (`…list.{provider}`);
//! - [`Schedule`]: when it is read next, who reads it now (a lease taken
//!   by CAS), how the last reads went (`…schedule.{provider}`);
//! - a generation, bumped by every write above (`…generation`): a worker
//!   whose copy is older reads the records again;
//! - the routes' last use (`…matched`): when a request was last routed to
//!   each configured (provider, model), for the targeted re-checks.
//!
//! Records say whose they are ([`identity`]): a reload that changes where
//! or with which key a provider's list is read starts afresh, one that
//! does not keeps the last good list.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::listing::Listed;
use crate::provider::Provider;
use crate::routing::{stable_hash, stable_hash_more};

use super::Source;

/// The shared-data key of provider `name`'s list.
pub fn list_key(name: &str) -> Vec<u8> {
    format!("llm_gateway.discovery.list.{name}").into_bytes()
}

/// The shared-data key of provider `name`'s schedule.
pub fn schedule_key(name: &str) -> Vec<u8> {
    format!("llm_gateway.discovery.schedule.{name}").into_bytes()
}

pub const GENERATION_KEY: &[u8] = b"llm_gateway.discovery.generation";

pub const MATCHED_KEY: &[u8] = b"llm_gateway.discovery.matched";

/// The most models kept of one provider's list (the rest left out, said in
/// the log).
pub const MAX_MODELS: usize = 5000;

/// The most pages one read of a provider's lists may take.
pub const MAX_PAGES: u32 = 50;

/// The largest answer a list call may give (a page; larger is a failure).
pub const MAX_ANSWER_BYTES: usize = 8 << 20;

/// The longest error kept in a schedule.
const MAX_ERROR_CHARS: usize = 300;

/// Whose records: the provider's dialect, where and how its lists are read
/// (its host, base path, list cluster and host) and with which key (a
/// digest, never the key).
pub fn identity(provider: &Provider, source: &Source) -> u64 {
    let mut h = stable_hash(format!("{:?}", provider.dialect).as_bytes());
    for part in [
        provider.host.as_deref().unwrap_or(""),
        &provider.base_path,
        &source.cluster,
        source.host.as_deref().unwrap_or(""),
    ] {
        h = stable_hash_more(h, part.as_bytes());
        h = stable_hash_more(h, b"\0");
    }
    if let Some(key) = &provider.resolved_key {
        h = stable_hash_more(h, &Sha256::digest(key.expose().as_bytes()));
    }
    h
}

/// A provider's last good list.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
pub struct ListRecord {
    pub identity: u64,
    /// When it was read (Unix milliseconds).
    pub fetched_at: u64,
    /// Sorted by id, each id once.
    pub models: Vec<Listed>,
    /// Configured models a targeted check confirmed since, and when (ms).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checked: BTreeMap<String, u64>,
    /// Models the list had beyond [`MAX_MODELS`] (left out).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left_out: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl ListRecord {
    /// A list as read: sorted, each id once (the first kept), bounded.
    pub fn new(identity: u64, fetched_at: u64, mut models: Vec<Listed>) -> Self {
        models.sort_by(|a, b| a.id.cmp(&b.id));
        models.dedup_by(|a, b| a.id == b.id);
        let left_out = models.len().saturating_sub(MAX_MODELS);
        models.truncate(MAX_MODELS);
        Self {
            identity,
            fetched_at,
            models,
            checked: BTreeMap::new(),
            left_out,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }

    /// The position of `id` in the sorted list.
    pub fn find(&self, id: &str) -> Option<usize> {
        self.models.binary_search_by(|m| m.id.as_str().cmp(id)).ok()
    }
}

/// When a provider's list is read, and how its reads went.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Schedule {
    pub identity: u64,
    /// A worker reads it now, until then (Unix milliseconds): no other starts.
    #[serde(default)]
    pub lease_until: u64,
    /// When the next read is due (ms); 0: at once.
    #[serde(default)]
    pub next_at: u64,
    /// Failed reads in a row.
    #[serde(default)]
    pub failures: u32,
    /// Why the last read failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the last read (or check) ended, and the last that succeeded (ms).
    #[serde(default)]
    pub last_attempt_at: u64,
    #[serde(default)]
    pub last_success_at: u64,
    /// List calls made so far (pages and checks).
    #[serde(default)]
    pub calls: u64,
}

impl Schedule {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }

    /// A read that failed at `now` (ms) for `why`: the next waits
    /// `retry` seconds, doubled for each failure before, at most `interval`.
    pub fn failed(&mut self, now: u64, why: &str, retry: u64, interval: u64) {
        let shift = self.failures.min(20);
        let wait = retry.saturating_mul(1 << shift).min(interval);
        self.failures = self.failures.saturating_add(1);
        self.next_at = now.saturating_add(wait.saturating_mul(1000));
        self.last_error = Some(why.chars().take(MAX_ERROR_CHARS).collect());
        self.last_attempt_at = now;
        self.lease_until = 0;
    }

    /// A read that succeeded at `now` (ms): the next in `interval` seconds.
    pub fn succeeded(&mut self, now: u64, interval: u64) {
        self.failures = 0;
        self.last_error = None;
        self.next_at = now.saturating_add(interval.saturating_mul(1000));
        self.last_attempt_at = now;
        self.last_success_at = now;
        self.lease_until = 0;
    }
}

/// When requests were last routed to each configured route (ms), by
/// `provider` and vendor model: [`route_key`].
pub type Matched = BTreeMap<String, u64>;

/// A route's key in [`Matched`].
pub fn route_key(provider: &str, model: &str) -> String {
    format!("{provider}\u{1f}{model}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_sorted_unique_and_bounded() {
        let models = ["b", "a", "b"].map(Listed::named).to_vec();
        let record = ListRecord::new(1, 2, models);
        let ids: Vec<&str> = record.models.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(record.find("b"), Some(1));
        assert_eq!(record.find("c"), None);
        assert_eq!(ListRecord::decode(&record.encode()), Some(record));
        let many = (0..MAX_MODELS + 3)
            .map(|i| Listed::named(format!("m{i:05}")))
            .collect();
        let record = ListRecord::new(1, 2, many);
        assert_eq!((record.models.len(), record.left_out), (MAX_MODELS, 3));
    }

    #[test]
    fn failures_back_off_to_the_interval_and_success_resets() {
        let mut s = Schedule::default();
        s.failed(1000, "HTTP 500", 10, 60);
        assert_eq!((s.failures, s.next_at), (1, 11_000));
        s.failed(11_000, "HTTP 500", 10, 60);
        assert_eq!(s.next_at, 31_000);
        s.failed(31_000, "HTTP 500", 10, 60);
        s.failed(71_000, "x".repeat(1000).as_str(), 10, 60);
        assert_eq!(s.next_at, 131_000, "at most the interval");
        assert_eq!(s.last_error.as_ref().map(|e| e.len()), Some(300));
        s.succeeded(200_000, 60);
        assert_eq!(
            (s.failures, s.next_at, s.last_error.clone()),
            (0, 260_000, None)
        );
        assert_eq!(Schedule::decode(&s.encode()), Some(s));
    }
}
