//! Where a group's cache entries live, and what the cache adds up across
//! a proxy's workers.
//!
//! In-process (the default), each cached group has a store of its own in
//! the proxy's shared data (`shared_state::local`, named `llm_cache:<group>`),
//! bounded by the group's `max_entries`, `max_bytes` and `max_entry_bytes`,
//! evicting the least recently used and the expired. An entry is found by
//! a key hashed from its namespace (the caller's key, or the group's for a
//! shared scope) and the request's key, which holds the group: a hit never
//! crosses keys (unless shared) nor groups.

use super::key::RequestKey;
use super::{Scope, Settings};
use crate::shared_state::cas::{SetResult, SharedStore, MAX_CAS_ATTEMPTS};
use crate::shared_state::local::{Bounds, Put, Store, Usage};
use crate::shared_state::{Key, Namespace};

/// The name cache keys are hashed under.
pub const STORE: &str = "llm_cache";

/// Where one request's entry is (or goes).
#[derive(Debug, Clone)]
pub struct Place {
    /// The group's in-process store.
    name: String,
    pub key: Key,
    pub namespace: Namespace,
    bounds: Bounds,
}

impl Place {
    /// The entry of `request` on `group`, cached as `settings`, for the
    /// caller whose gateway key is named `caller` (its namespace, unless
    /// the group's scope is shared).
    pub fn new(group: &str, settings: &Settings, caller: &str, request: &RequestKey) -> Self {
        let namespace = match settings.scope {
            Scope::Key => Namespace::of_key(caller),
            Scope::Group => Namespace::of_group(group),
        };
        Self {
            name: store_name(group),
            key: Key::new(STORE, &namespace, request.as_bytes()),
            namespace,
            bounds: bounds(settings),
        }
    }

    /// The stored entry's bytes, unless it expired or is not there.
    pub fn get(&self, shared: &impl SharedStore, now: u64) -> Option<Vec<u8>> {
        Store::new(shared, &self.name, self.bounds)
            .get(&self.key, now)
            .map(|held| held.value)
    }

    /// How long its entry is given again after it was stored.
    pub fn ttl_seconds(&self) -> u64 {
        self.bounds.ttl_seconds
    }

    /// Stores an entry's bytes (evicting as the bounds need).
    pub fn put(&self, shared: &impl SharedStore, entry: &[u8], now: u64) -> Put {
        // Not mirrored: the cache is the proxy's own (no fleet store yet).
        Store::new(shared, &self.name, self.bounds).put(&self.key, entry, false, now)
    }
}

/// The in-process store of `group`'s entries.
fn store_name(group: &str) -> String {
    format!("{STORE}:{group}")
}

fn bounds(settings: &Settings) -> Bounds {
    Bounds {
        max_entries: settings.max_entries,
        max_bytes: settings.max_bytes,
        max_entry_bytes: settings.max_entry_bytes,
        ttl_seconds: settings.ttl_seconds,
    }
}

/// What `group`'s in-process store holds now (`None`: unreadable).
pub fn usage(shared: &impl SharedStore, group: &str, settings: &Settings) -> Option<Usage> {
    Store::new(shared, &store_name(group), bounds(settings)).usage()
}

/// A group's lookups, hits and what the hits saved since the proxy
/// started, every worker's: its hit ratio.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub lookups: u64,
    pub hits: u64,
    /// What the hits' answers cost when a vendor made them (micro-USD).
    pub saved_micro_usd: u64,
}

fn tally_key(group: &str) -> Vec<u8> {
    format!("{STORE}_tally:{group}").into_bytes()
}

fn word(bytes: &[u8], at: usize) -> u64 {
    bytes
        .get(at..at + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, u64::from_le_bytes)
}

impl Tally {
    /// Hits per thousand lookups.
    pub fn permille(&self) -> u64 {
        self.hits
            .saturating_mul(1000)
            .checked_div(self.lookups)
            .unwrap_or(0)
    }

    /// Counts one more lookup of `group`: a hit, with what it saved
    /// (micro-USD), or a miss (`None`). The tally after it, or `None` when
    /// the proxy failed or other workers kept winning.
    pub fn count(shared: &impl SharedStore, group: &str, hit: Option<u64>) -> Option<Tally> {
        let key = tally_key(group);
        for _ in 0..MAX_CAS_ATTEMPTS {
            let (bytes, cas) = shared.get(&key).ok()?.unwrap_or_default();
            let tally = Tally {
                lookups: word(&bytes, 0).saturating_add(1),
                hits: word(&bytes, 8).saturating_add(u64::from(hit.is_some())),
                saved_micro_usd: word(&bytes, 16).saturating_add(hit.unwrap_or(0)),
            };
            let mut value = tally.lookups.to_le_bytes().to_vec();
            value.extend_from_slice(&tally.hits.to_le_bytes());
            value.extend_from_slice(&tally.saved_micro_usd.to_le_bytes());
            match shared.set(&key, &value, cas) {
                SetResult::Done => return Some(tally),
                SetResult::CasMismatch => continue,
                SetResult::Failed => return None,
            }
        }
        None
    }

    /// `group`'s tally as it is now (none counted yet: zeros; `None`:
    /// unreadable).
    pub fn read(shared: &impl SharedStore, group: &str) -> Option<Tally> {
        let bytes = shared
            .get(&tally_key(group))
            .ok()?
            .map(|(b, _)| b)
            .unwrap_or_default();
        Some(Tally {
            lookups: word(&bytes, 0),
            hits: word(&bytes, 8),
            saved_micro_usd: word(&bytes, 16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::request::ChatRequest;
    use crate::shared_state::cas::tests::MemoryStore;

    fn place(group: &str, scope: Scope, caller: &str) -> Place {
        let settings = Settings {
            scope,
            ..Settings::default()
        };
        let request = RequestKey::of(group, &ChatRequest::default());
        Place::new(group, &settings, caller, &request)
    }

    #[test]
    fn an_entry_is_found_only_by_its_key_and_group() {
        let shared = MemoryStore::default();
        let mine = place("g", Scope::Key, "alice");
        assert!(matches!(mine.put(&shared, b"entry", 100), Put::Stored(_)));
        assert_eq!(mine.get(&shared, 101).as_deref(), Some(&b"entry"[..]));
        // Another key, another group, a shared scope: none of them find it.
        assert_eq!(place("g", Scope::Key, "bob").get(&shared, 101), None);
        assert_eq!(place("h", Scope::Key, "alice").get(&shared, 101), None);
        assert_eq!(place("g", Scope::Group, "alice").get(&shared, 101), None);
        // A shared scope: every key finds what any stored.
        let shared_by_alice = place("g", Scope::Group, "alice");
        shared_by_alice.put(&shared, b"ours", 100);
        assert_eq!(
            place("g", Scope::Group, "bob").get(&shared, 101).as_deref(),
            Some(&b"ours"[..])
        );
        // Expired after the group's time to live.
        let ttl = Settings::default().ttl_seconds;
        assert_eq!(mine.get(&shared, 100 + ttl), None);
        // What the group's store holds: alice's entry and the shared one.
        let held = usage(&shared, "g", &Settings::default()).unwrap();
        assert_eq!(held.entries, 2);
        assert!(held.bytes > 9, "{held:?}");
        assert_eq!(
            usage(&shared, "none", &Settings::default())
                .unwrap()
                .entries,
            0
        );
    }

    #[test]
    fn the_tally_adds_up_every_lookup() {
        let shared = MemoryStore::default();
        assert_eq!(Tally::default().permille(), 0);
        assert_eq!(Tally::read(&shared, "g"), Some(Tally::default()));
        Tally::count(&shared, "g", Some(5)).unwrap();
        Tally::count(&shared, "g", None).unwrap();
        let tally = Tally::count(&shared, "g", Some(7)).unwrap();
        assert_eq!((tally.lookups, tally.hits, tally.permille()), (3, 2, 666));
        assert_eq!(tally.saved_micro_usd, 12);
        assert_eq!(Tally::read(&shared, "g"), Some(tally));
        assert_eq!(Tally::count(&shared, "h", None).unwrap().lookups, 1);
    }
}
