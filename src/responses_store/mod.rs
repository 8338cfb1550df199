//! The response store: the Responses API's state, kept by the gateway for
//! the responses it translated (a vendor that keeps none), so that clients
//! continue conversations (`previous_response_id`, `item_reference`) and
//! read responses back (`GET /v1/responses/{id}` ...) on every group.
//!
//! It lives in proxy-wasm shared data, which every worker of one proxy
//! shares, with the compare-and-swap of the rate limits
//! (`crate::shared_state::cas::SharedStore`). Bounded by construction:
//! - `max_entries` slots (`llm_responses:{n}`), reused in a ring: a new
//!   response takes the oldest slot, so the set of keys never grows;
//! - one index (`llm_responses:index`): the ring's next slot, the bytes
//!   stored, and each slot's size and id tag. Every write goes through it
//!   with CAS, so workers never lose each other's accounting; past
//!   `max_bytes`, the oldest entries are evicted (their slots emptied);
//! - an entry larger than `max_entry_bytes` is not stored (a full store
//!   never refuses a request: it evicts, or stores nothing);
//! - every entry expires `ttl_seconds` after it was stored.
//!
//! Each entry names its owner (the gateway key's name) and its id, and a
//! lookup checks both: one key never reads, continues or deletes another
//! key's responses. Ids are `resp_gw` and 128 random bits, so the
//! gateway's ids are told apart from a vendor's (OpenAI's) by their prefix.
//! Nothing of a vendor's request (its key, its URL) is stored: the
//! client's input items and the response as the client got it.

use std::cell::Cell;
use std::hash::BuildHasher;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::shared_state::cas::{SetResult, SharedStore, MAX_CAS_ATTEMPTS};

pub mod resolve;
#[cfg(test)]
mod tests;

/// What starts every id the gateway gives a response it stores.
pub const ID_PREFIX: &str = "resp_gw";

const INDEX: &[u8] = b"llm_responses:index";
const INDEX_MAGIC: &[u8; 4] = b"RSI1";

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

/// The most slots a store may have (its index, 8 bytes a slot, is read on
/// every lookup: 8 MiB at this bound).
pub const MAX_ENTRIES: u32 = 1 << 20;

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

/// The shared-data key of slot `n`.
fn slot_key(n: u32) -> Vec<u8> {
    format!("llm_responses:{n}").into_bytes()
}

/// A stored response: what the client sent as its input (references
/// resolved), what it got, and the response it continued.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub id: String,
    /// The gateway key's name ("" without keys).
    pub owner: String,
    /// Unix seconds after which the entry is gone.
    pub expires: u64,
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

/// The index's tag of an id: 32 of its random bits (0 never tags an entry).
fn tag(id: &str) -> u32 {
    let bits = id.get(ID_PREFIX.len()..ID_PREFIX.len() + 8).unwrap_or("");
    u32::from_str_radix(bits, 16).unwrap_or(0).max(1)
}

/// The index: the ring's next slot, the bytes stored, each slot's size and tag.
#[derive(Debug, Clone, PartialEq)]
struct Index {
    next: u32,
    bytes: u64,
    slots: Vec<(u32, u32)>,
}

impl Index {
    fn empty(n: u32) -> Self {
        Self {
            next: 0,
            bytes: 0,
            slots: vec![(0, 0); n as usize],
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.slots.len() * 8);
        out.extend_from_slice(INDEX_MAGIC);
        out.extend_from_slice(&(self.slots.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.next.to_le_bytes());
        out.extend_from_slice(&self.bytes.to_le_bytes());
        for (size, tag) in &self.slots {
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&tag.to_le_bytes());
        }
        out
    }

    /// The index, and how many slots it has (`None`: not an index).
    fn decode(bytes: &[u8]) -> Option<Self> {
        let u32_at = |at: usize| {
            bytes
                .get(at..at + 4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_le_bytes)
        };
        if bytes.get(..4)? != INDEX_MAGIC {
            return None;
        }
        let n = u32_at(4)?;
        let next = u32_at(8)?;
        let total = bytes
            .get(12..20)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)?;
        let n = usize::try_from(n.min(MAX_ENTRIES)).ok()?;
        if Some(bytes.len()) != n.checked_mul(8).and_then(|b| b.checked_add(20)) {
            return None;
        }
        let slots = (0..n)
            .map(|i| Some((u32_at(20 + i * 8)?, u32_at(24 + i * 8)?)))
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            next,
            bytes: total,
            slots,
        })
    }

    fn entries(&self) -> u64 {
        self.slots.iter().filter(|(size, _)| *size > 0).count() as u64
    }

    fn usage(&self) -> Usage {
        Usage {
            bytes: self.bytes,
            entries: self.entries(),
        }
    }

    /// Slots that may hold `id`.
    fn candidates(&self, id: &str) -> impl Iterator<Item = u32> + '_ {
        let tag = tag(id);
        (0u32..)
            .zip(&self.slots)
            .filter(move |(_, (size, t))| *size > 0 && *t == tag)
            .map(|(n, _)| n)
    }
}

/// What the store holds (for the gauges).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub bytes: u64,
    pub entries: u64,
}

/// What [`put`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    Stored(Usage),
    /// Larger than `max_entry_bytes` (or the whole store): not stored.
    TooLarge,
    /// The proxy failed a read or write, or other workers kept winning.
    Failed,
}

/// The index as the bounds want it, with its CAS token: a missing index,
/// or one of another size (the bounds changed), starts empty (`stale`: the
/// slot count of the index it replaces, whose slots are then cleared).
fn read_index(store: &impl SharedStore, n: u32) -> Option<(Index, u32, Option<u32>)> {
    match store.get(INDEX).ok()? {
        None => Some((Index::empty(n), 0, None)),
        Some((bytes, cas)) => match Index::decode(&bytes) {
            Some(index) if index.slots.len() == n as usize => Some((index, cas, None)),
            Some(index) => Some((Index::empty(n), cas, Some(index.slots.len() as u32))),
            None => Some((Index::empty(n), cas, None)),
        },
    }
}

/// Stores `entry` (its `expires` set from `now`), evicting the oldest
/// entries as the bounds need.
pub fn put(store: &impl SharedStore, bounds: &Bounds, mut entry: Entry, now: u64) -> Put {
    let n = bounds.max_entries;
    if !bounds.enabled || n == 0 {
        return Put::Failed;
    }
    entry.expires = now.saturating_add(bounds.ttl_seconds);
    let Ok(value) = serde_json::to_vec(&entry) else {
        return Put::Failed;
    };
    let len = value.len() as u64;
    if len > bounds.max_entry_bytes || len > bounds.max_bytes || len > u64::from(u32::MAX) {
        return Put::TooLarge;
    }
    for _ in 0..MAX_CAS_ATTEMPTS {
        let Some((mut index, cas, stale)) = read_index(store, n) else {
            return Put::Failed;
        };
        let slot = index.next % n;
        let mut evicted = Vec::new();
        if let Some(taken) = index.slots.get_mut(slot as usize) {
            index.bytes = index.bytes.saturating_sub(u64::from(taken.0));
            *taken = (len as u32, tag(&entry.id));
        }
        index.bytes = index.bytes.saturating_add(len);
        index.next = (slot + 1) % n;
        // The oldest first: the ring from the slot after ours.
        let mut cursor = index.next;
        while index.bytes > bounds.max_bytes && cursor != slot {
            if let Some(old) = index.slots.get_mut(cursor as usize) {
                if old.0 > 0 {
                    index.bytes = index.bytes.saturating_sub(u64::from(old.0));
                    *old = (0, 0);
                    evicted.push(cursor);
                }
            }
            cursor = (cursor + 1) % n;
        }
        match store.set(INDEX, &index.encode(), cas) {
            SetResult::Done => {}
            SetResult::CasMismatch => continue,
            SetResult::Failed => return Put::Failed,
        }
        if let Some(old) = stale {
            evicted.extend((0..old).filter(|&s| s != slot));
        }
        if store.set(&slot_key(slot), &value, 0) != SetResult::Done {
            return Put::Failed;
        }
        for old in evicted {
            store.set(&slot_key(old), b"", 0);
        }
        return Put::Stored(index.usage());
    }
    Put::Failed
}

/// The entry `id` of `owner`, unless it expired or is not there.
pub fn get(
    store: &impl SharedStore,
    bounds: &Bounds,
    owner: &str,
    id: &str,
    now: u64,
) -> Option<Entry> {
    find(store, bounds, owner, id, now).map(|(_, entry, _)| entry)
}

/// The slot holding `owner`'s `id`, its entry, and the index it was found in.
fn find(
    store: &impl SharedStore,
    bounds: &Bounds,
    owner: &str,
    id: &str,
    now: u64,
) -> Option<(u32, Entry, (Index, u32))> {
    if !bounds.enabled || !is_gateway_id(id) {
        return None;
    }
    let (bytes, cas) = store.get(INDEX).ok()??;
    // An index of other bounds is a store that new bounds cleared.
    let index = Index::decode(&bytes).filter(|i| i.slots.len() == bounds.max_entries as usize)?;
    let slots: Vec<u32> = index.candidates(id).collect();
    for slot in slots {
        let Some((value, _)) = store.get(&slot_key(slot)).ok().flatten() else {
            continue;
        };
        let Ok(entry) = serde_json::from_slice::<Entry>(&value) else {
            continue;
        };
        if entry.id == id && entry.owner == owner && entry.expires > now {
            return Some((slot, entry, (index, cas)));
        }
    }
    None
}

/// Deletes `owner`'s `id`: false when there was none to delete.
pub fn delete(
    store: &impl SharedStore,
    bounds: &Bounds,
    owner: &str,
    id: &str,
    now: u64,
) -> Option<Usage> {
    let (slot, _, (mut index, mut cas)) = find(store, bounds, owner, id, now)?;
    for attempt in 0..MAX_CAS_ATTEMPTS {
        if attempt > 0 {
            let (bytes, token) = store.get(INDEX).ok()??;
            index = Index::decode(&bytes)?;
            cas = token;
        }
        let held = index.slots.get_mut(slot as usize)?;
        // Taken by a newer entry meanwhile: ours is gone already.
        if held.1 != tag(id) {
            return Some(index.usage());
        }
        index.bytes = index.bytes.saturating_sub(u64::from(held.0));
        *held = (0, 0);
        match store.set(INDEX, &index.encode(), cas) {
            SetResult::Done => {
                store.set(&slot_key(slot), b"", 0);
                return Some(index.usage());
            }
            SetResult::CasMismatch => continue,
            SetResult::Failed => return None,
        }
    }
    None
}
