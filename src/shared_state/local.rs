//! The in-process store: entries in the proxy's shared data, which every
//! worker of one proxy shares (proxy-wasm shared data on the wasm host,
//! process memory on the native host) and which outlives a reload of the
//! module's configuration or code (it is kept by `vm_id`).
//!
//! Bounded by construction:
//! - `max_entries` slots (`{name}:{n}`): the set of shared-data keys never
//!   grows;
//! - one index (`{name}:index`): the clock hand, the bytes stored, and per
//!   slot its size, a tag of its key, whether it was read since the hand
//!   last passed, and when it expires (12 bytes a slot). Every write goes
//!   through it with compare-and-swap, so workers never lose each other's
//!   accounting;
//! - a new entry takes the slot the clock hand finds first that is empty,
//!   expired, or not read since the hand last passed it (the hand clears
//!   the read mark of those it passes: the CLOCK approximation of
//!   least-recently-used); past `max_bytes`, the hand goes on evicting the
//!   same way until the entries fit;
//! - an entry larger than `max_entry_bytes` is not stored (a full store
//!   never refuses a request: it evicts, or stores nothing);
//! - every entry expires `ttl_seconds` after it was stored: not found
//!   after that, and its slot the first one taken.
//!
//! An entry is found by its [`Key`] (hashed from its namespace and id:
//! see [`super`]); its slot holds the whole key, checked on every read.

use super::cas::{SetResult, SharedStore, MAX_CAS_ATTEMPTS};
use super::Key;

/// An in-process store's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Entries kept at most (slots).
    pub max_entries: u32,
    /// Bytes kept at most, over every entry.
    pub max_bytes: u64,
    /// A larger entry is not stored.
    pub max_entry_bytes: u64,
    /// How long an entry is kept.
    pub ttl_seconds: u64,
}

/// The most slots a store may have (its index, 12 bytes a slot, is read on
/// every lookup: 12 MiB at this bound).
pub const MAX_ENTRIES: u32 = 1 << 20;

const INDEX_MAGIC: &[u8; 4] = b"SSI1";
const INDEX_HEAD: usize = 20;
const SLOT_META: usize = 12;
/// A slot's value: the entry's key, expiry and [`Held::mirrored`], then the entry.
const SLOT_HEAD: usize = Key::LEN + 8 + 1;
/// The read mark in a slot's tag word.
const READ: u32 = 1 << 31;

/// An entry as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub value: Vec<u8>,
    /// The fleet-wide store holds it too (it was stored there when this
    /// one was): where the fleet's store says it is gone, this copy is too.
    pub mirrored: bool,
}

/// What the store holds (for the gauges).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub bytes: u64,
    pub entries: u64,
}

/// What [`Store::put`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    Stored(Usage),
    /// Larger than `max_entry_bytes` (or the whole store): not stored.
    TooLarge,
    /// The proxy failed a read or write, or other workers kept winning.
    Failed,
}

/// One slot's line of the index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Meta {
    /// Bytes of its value (0: empty).
    size: u32,
    /// The key's tag, and [`READ`].
    tag: u32,
    /// Unix seconds after which it is gone.
    expires: u32,
}

impl Meta {
    fn live(&self, now: u64) -> bool {
        self.size > 0 && u64::from(self.expires) > now
    }

    fn holds(&self, tag: u32) -> bool {
        self.size > 0 && self.tag & !READ == tag
    }
}

/// The index: the clock hand, the bytes stored, each slot's line.
#[derive(Debug, Clone, PartialEq)]
struct Index {
    hand: u32,
    bytes: u64,
    slots: Vec<Meta>,
}

impl Index {
    fn empty(n: u32) -> Self {
        Self {
            hand: 0,
            bytes: 0,
            slots: vec![Meta::default(); n as usize],
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(INDEX_HEAD + self.slots.len() * SLOT_META);
        out.extend_from_slice(INDEX_MAGIC);
        out.extend_from_slice(&(self.slots.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.hand.to_le_bytes());
        out.extend_from_slice(&self.bytes.to_le_bytes());
        for meta in &self.slots {
            out.extend_from_slice(&meta.size.to_le_bytes());
            out.extend_from_slice(&meta.tag.to_le_bytes());
            out.extend_from_slice(&meta.expires.to_le_bytes());
        }
        out
    }

    /// `None`: not an index of ours.
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
        let n = usize::try_from(u32_at(4)?.min(MAX_ENTRIES)).ok()?;
        let hand = u32_at(8)?;
        let total = bytes
            .get(12..20)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)?;
        if bytes.len() != INDEX_HEAD + n * SLOT_META {
            return None;
        }
        let slots = (0..n)
            .map(|i| {
                let at = INDEX_HEAD + i * SLOT_META;
                Some(Meta {
                    size: u32_at(at)?,
                    tag: u32_at(at + 4)?,
                    expires: u32_at(at + 8)?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            hand,
            bytes: total,
            slots,
        })
    }

    fn usage(&self) -> Usage {
        Usage {
            bytes: self.bytes,
            entries: self.slots.iter().filter(|m| m.size > 0).count() as u64,
        }
    }

    /// Empties slot `n`, returning its bytes to the store.
    fn clear(&mut self, n: usize) {
        if let Some(meta) = self.slots.get_mut(n) {
            self.bytes = self.bytes.saturating_sub(u64::from(meta.size));
            *meta = Meta::default();
        }
    }

    /// The next slot the clock hand takes (not `keep`): empty, expired, or
    /// not read since the hand last passed (whose read marks it clears).
    /// Two turns at most: the second finds every mark cleared.
    fn sweep(&mut self, now: u64, keep: Option<usize>) -> Option<usize> {
        let n = self.slots.len();
        for _ in 0..2 * n {
            let at = self.hand as usize % n;
            self.hand = ((at + 1) % n) as u32;
            if Some(at) == keep {
                continue;
            }
            let meta = self.slots.get_mut(at)?;
            if meta.live(now) && meta.tag & READ != 0 {
                meta.tag &= !READ;
                continue;
            }
            return Some(at);
        }
        None
    }
}

/// One store in the proxy's shared data, named by the prefix of its keys.
pub struct Store<'s, S> {
    shared: &'s S,
    name: &'s str,
    bounds: Bounds,
}

impl<'s, S: SharedStore> Store<'s, S> {
    pub fn new(shared: &'s S, name: &'s str, bounds: Bounds) -> Self {
        Self {
            shared,
            name,
            bounds,
        }
    }

    fn index_key(&self) -> Vec<u8> {
        format!("{}:index", self.name).into_bytes()
    }

    fn slot_key(&self, n: usize) -> Vec<u8> {
        format!("{}:{n}", self.name).into_bytes()
    }

    /// The index as the bounds want it, with its CAS token: a missing
    /// index, or one of another size (the bounds changed), starts empty
    /// (`stale`: the slot count of the index it replaces, whose slots are
    /// then cleared).
    fn read_index(&self) -> Option<(Index, u32, Option<usize>)> {
        let n = self.bounds.max_entries;
        match self.shared.get(&self.index_key()).ok()? {
            None => Some((Index::empty(n), 0, None)),
            Some((bytes, cas)) => match Index::decode(&bytes) {
                Some(index) if index.slots.len() == n as usize => Some((index, cas, None)),
                Some(index) => Some((Index::empty(n), cas, Some(index.slots.len()))),
                None => Some((Index::empty(n), cas, None)),
            },
        }
    }

    /// What the store holds now (`None`: the proxy failed the read).
    pub fn usage(&self) -> Option<Usage> {
        self.read_index().map(|(index, _, _)| index.usage())
    }

    /// Stores `value` under `key` for the store's time to live from `now`
    /// (`mirrored`: the fleet's store has it too), evicting as the bounds
    /// need. A key stored twice is found once (the later one, while the
    /// earlier one waits for the hand).
    pub fn put(&self, key: &Key, value: &[u8], mirrored: bool, now: u64) -> Put {
        if self.bounds.max_entries == 0 {
            return Put::Failed;
        }
        let len = SLOT_HEAD + value.len();
        let fits = |bound: u64| len as u64 <= bound;
        if !fits(self.bounds.max_entry_bytes)
            || !fits(self.bounds.max_bytes)
            || !fits(u32::MAX.into())
        {
            return Put::TooLarge;
        }
        let expires = now.saturating_add(self.bounds.ttl_seconds);
        let meta = Meta {
            size: len as u32,
            tag: key.tag(),
            expires: u32::try_from(expires).unwrap_or(u32::MAX),
        };
        for _ in 0..MAX_CAS_ATTEMPTS {
            let Some((mut index, cas, stale)) = self.read_index() else {
                return Put::Failed;
            };
            let Some(slot) = index.sweep(now, None) else {
                return Put::Failed;
            };
            index.clear(slot);
            if let Some(taken) = index.slots.get_mut(slot) {
                *taken = meta;
            }
            index.bytes = index.bytes.saturating_add(len as u64);
            let mut evicted = Vec::new();
            // Every other slot at most (an index whose bytes say more than
            // its slots hold stops there).
            for _ in 1..index.slots.len() {
                if index.bytes <= self.bounds.max_bytes {
                    break;
                }
                let Some(old) = index.sweep(now, Some(slot)) else {
                    break;
                };
                if index.slots.get(old).is_some_and(|m| m.size > 0) {
                    index.clear(old);
                    evicted.push(old);
                }
            }
            match self.shared.set(&self.index_key(), &index.encode(), cas) {
                SetResult::Done => {}
                SetResult::CasMismatch => continue,
                SetResult::Failed => return Put::Failed,
            }
            if let Some(old) = stale {
                evicted.extend((0..old).filter(|&s| s != slot));
            }
            let mut stored = Vec::with_capacity(len);
            stored.extend_from_slice(key.as_bytes());
            stored.extend_from_slice(&expires.to_le_bytes());
            stored.push(u8::from(mirrored));
            stored.extend_from_slice(value);
            if self.shared.set(&self.slot_key(slot), &stored, 0) != SetResult::Done {
                return Put::Failed;
            }
            for old in evicted {
                self.shared.set(&self.slot_key(old), b"", 0);
            }
            return Put::Stored(index.usage());
        }
        Put::Failed
    }

    /// The entry `key`, unless it expired or is not there. A first read
    /// since the clock hand passed marks it read (one index write).
    pub fn get(&self, key: &Key, now: u64) -> Option<Held> {
        let (slot, held, (mut index, cas)) = self.find(key, now)?;
        if let Some(meta) = index.slots.get_mut(slot) {
            if meta.tag & READ == 0 {
                meta.tag |= READ;
                // Lost to another worker's write: the mark waits for the next read.
                self.shared.set(&self.index_key(), &index.encode(), cas);
            }
        }
        Some(held)
    }

    /// The slot holding `key`, its entry, and the index it was found in.
    fn find(&self, key: &Key, now: u64) -> Option<(usize, Held, (Index, u32))> {
        let (bytes, cas) = self.shared.get(&self.index_key()).ok()??;
        // An index of other bounds is a store that new bounds cleared.
        let index =
            Index::decode(&bytes).filter(|i| i.slots.len() == self.bounds.max_entries as usize)?;
        let tag = key.tag();
        let candidates: Vec<usize> = (index.slots.iter().enumerate())
            .filter(|(_, m)| m.holds(tag) && m.live(now))
            .map(|(n, _)| n)
            .collect();
        for slot in candidates {
            let Some((mut stored, _)) = self.shared.get(&self.slot_key(slot)).ok().flatten() else {
                continue;
            };
            let Some((held, rest)) = stored.split_first_chunk::<{ Key::LEN }>() else {
                continue;
            };
            let Some((expires, [mirrored, ..])) = rest.split_first_chunk::<8>() else {
                continue;
            };
            if held == key.as_bytes() && u64::from_le_bytes(*expires) > now {
                let mirrored = *mirrored == 1;
                let value = stored.split_off(SLOT_HEAD);
                return Some((slot, Held { value, mirrored }, (index, cas)));
            }
        }
        None
    }

    /// Deletes `key`: `None` when there was none to delete (or the proxy
    /// failed), else what the store holds after.
    pub fn delete(&self, key: &Key, now: u64) -> Option<Usage> {
        let (slot, _, (mut index, mut cas)) = self.find(key, now)?;
        for attempt in 0..MAX_CAS_ATTEMPTS {
            if attempt > 0 {
                let (bytes, token) = self.shared.get(&self.index_key()).ok()??;
                index = Index::decode(&bytes)?;
                cas = token;
            }
            // Taken by a newer entry meanwhile: ours is gone already.
            if !index.slots.get(slot)?.holds(key.tag()) {
                return Some(index.usage());
            }
            index.clear(slot);
            match self.shared.set(&self.index_key(), &index.encode(), cas) {
                SetResult::Done => {
                    self.shared.set(&self.slot_key(slot), b"", 0);
                    return Some(index.usage());
                }
                SetResult::CasMismatch => continue,
                SetResult::Failed => return None,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests;
