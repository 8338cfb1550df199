//! The response store: the Responses API's state, kept by the gateway for
//! the responses it translated (a vendor that keeps none), so that clients
//! continue conversations (`previous_response_id`, `item_reference`) and
//! read responses back (`GET /v1/responses/{id}` ...) on every group.
//!
//! Its entries live in a store of `crate::shared_state`: the proxy's own
//! (`shared_state::local`, bounded by `response_store`'s entries, bytes,
//! entry size and time to live). An entry is found by its id in its
//! caller's namespace (the gateway key's name): one key never reads,
//! continues or deletes another key's responses. Ids are `resp_gw` and 128
//! random bits, so the gateway's ids are told apart from a vendor's
//! (OpenAI's) by their prefix. Nothing of a vendor's request (its key, its
//! URL) is stored: the client's input items and the response as the client
//! got it.

use std::cell::Cell;
use std::hash::BuildHasher;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::shared_state::cas::SharedStore;
use crate::shared_state::local::{self, Store};
pub use crate::shared_state::local::{Put, Usage};
use crate::shared_state::{Key, Namespace};

pub mod resolve;
#[cfg(test)]
mod tests;

/// What starts every id the gateway gives a response it stores.
pub const ID_PREFIX: &str = "resp_gw";

/// The store's name: the prefix of its shared-data keys, and of its keys' hashes.
pub const STORE: &str = "llm_responses";

/// The store's bounds (configuration `response_store`).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Bounds {
    /// Off: nothing is stored, and a gateway response id is never found.
    pub enabled: bool,
    /// Responses kept at most (slots in the ring).
    pub max_entries: u32,
    /// Bytes kept at most, over every entry.
    pub max_bytes: u64,
    /// A larger entry (input items and response) is not stored.
    pub max_entry_bytes: u64,
    /// How long an entry is kept.
    pub ttl_seconds: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            enabled: true,
            max_entries: 4096,
            max_bytes: 64 << 20,
            max_entry_bytes: 4 << 20,
            ttl_seconds: 24 * 3600,
        }
    }
}

/// The most responses a store may keep (`shared_state::local`'s bound).
pub const MAX_ENTRIES: u32 = local::MAX_ENTRIES;

impl Bounds {
    /// The configuration's check (`response_store.*`).
    pub fn validate(&self) -> Result<(), String> {
        if self.max_entries == 0 || self.max_entries > MAX_ENTRIES {
            return Err(format!(
                "response_store.max_entries: must be 1 to {MAX_ENTRIES}"
            ));
        }
        for (field, value) in [
            ("max_bytes", self.max_bytes),
            ("max_entry_bytes", self.max_entry_bytes),
            ("ttl_seconds", self.ttl_seconds),
        ] {
            if value == 0 {
                return Err(format!("response_store.{field}: must be at least 1"));
            }
        }
        Ok(())
    }
}

/// A stored response: what the client sent as its input (references
/// resolved), what it got, and the response it continued.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub id: String,
    /// `previous_response_id` of its request.
    pub prev: Option<String>,
    /// Its request's input items, each with an id.
    pub input: Vec<Value>,
    /// The `response` object as the client got it.
    pub response: Value,
}

/// A new response id: the prefix and 128 bits no client can guess (std's
/// hasher keys come from the host's random source; the counter and `seed`
/// make every id of a VM different).
pub fn new_id(seed: u64) -> String {
    thread_local! {
        static COUNTER: Cell<u64> = const { Cell::new(0) };
    }
    let n = COUNTER.with(|c| {
        let n = c.get().wrapping_add(1);
        c.set(n);
        n
    });
    let a = std::collections::hash_map::RandomState::new().hash_one((seed, n, 1u8));
    let b = std::collections::hash_map::RandomState::new().hash_one((seed, n, 2u8));
    format!("{ID_PREFIX}{a:016x}{b:016x}")
}

/// An id of the gateway's store (else a vendor's).
pub fn is_gateway_id(id: &str) -> bool {
    id.len() == ID_PREFIX.len() + 32
        && id.starts_with(ID_PREFIX)
        && id
            .bytes()
            .skip(ID_PREFIX.len())
            .all(|b| b.is_ascii_hexdigit())
}

/// The response an output item of the gateway's belongs to: item ids are
/// `{kind}_{index}_{response id without resp_}` (`msg_0_gw…`).
pub fn response_of_item(item_id: &str) -> Option<String> {
    let mut parts = item_id.splitn(3, '_');
    let (_kind, index, base) = (parts.next()?, parts.next()?, parts.next()?);
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let id = format!("resp_{base}");
    is_gateway_id(&id).then_some(id)
}

impl Bounds {
    fn local(&self) -> local::Bounds {
        local::Bounds {
            max_entries: self.max_entries,
            max_bytes: self.max_bytes,
            max_entry_bytes: self.max_entry_bytes,
            ttl_seconds: self.ttl_seconds,
        }
    }
}

/// The namespace of the gateway key named `owner`.
pub fn namespace(owner: &str) -> Namespace {
    Namespace::of_key(owner)
}

/// Response `id` of `namespace`.
pub fn key(namespace: &Namespace, id: &str) -> Key {
    Key::new(STORE, namespace, id.as_bytes())
}

/// The in-process store, when it is on.
fn store<'s, S: SharedStore>(shared: &'s S, bounds: &Bounds) -> Option<Store<'s, S>> {
    bounds
        .enabled
        .then(|| Store::new(shared, STORE, bounds.local()))
}

/// An entry as a store keeps it.
pub fn encode(entry: &Entry) -> Vec<u8> {
    serde_json::to_vec(entry).unwrap_or_default()
}

/// A stored entry, if it is response `id`'s.
pub fn decode(bytes: &[u8], id: &str) -> Option<Entry> {
    serde_json::from_slice::<Entry>(bytes)
        .ok()
        .filter(|entry| entry.id == id)
}

/// Stores `owner`'s `entry` in the proxy's store (`mirrored`: the fleet's
/// store has it too), evicting the least recently used entries as the
/// bounds need.
pub fn put(
    shared: &impl SharedStore,
    bounds: &Bounds,
    owner: &Namespace,
    entry: &Entry,
    mirrored: bool,
    now: u64,
) -> Put {
    let Some(store) = store(shared, bounds) else {
        return Put::Failed;
    };
    store.put(&key(owner, &entry.id), &encode(entry), mirrored, now)
}

/// The entry `id` of `owner` in the proxy's store, unless it expired or is
/// not there, and whether the fleet's store has it too.
pub fn get(
    shared: &impl SharedStore,
    bounds: &Bounds,
    owner: &Namespace,
    id: &str,
    now: u64,
) -> Option<(Entry, bool)> {
    if !is_gateway_id(id) {
        return None;
    }
    let held = store(shared, bounds)?.get(&key(owner, id), now)?;
    decode(&held.value, id).map(|entry| (entry, held.mirrored))
}

/// Deletes `owner`'s `id` from the proxy's store: `None` when there was
/// none to delete.
pub fn delete(
    shared: &impl SharedStore,
    bounds: &Bounds,
    owner: &Namespace,
    id: &str,
    now: u64,
) -> Option<Usage> {
    if !is_gateway_id(id) {
        return None;
    }
    store(shared, bounds)?.delete(&key(owner, id), now)
}
