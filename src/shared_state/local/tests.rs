use super::*;
use crate::shared_state::cas::tests::MemoryStore;
use crate::shared_state::Namespace;

const NOW: u64 = 1_700_000_000;

fn bounds(max_entries: u32, max_bytes: u64) -> Bounds {
    Bounds {
        max_entries,
        max_bytes,
        max_entry_bytes: 1 << 20,
        ttl_seconds: 3600,
    }
}

fn key(id: &str) -> Key {
    Key::new("test", &Namespace::of_key("team-a"), id.as_bytes())
}

fn stored(put: Put) -> Usage {
    match put {
        Put::Stored(usage) => usage,
        other => panic!("not stored: {other:?}"),
    }
}

#[test]
fn an_entry_is_found_by_its_key_until_it_expires_or_is_deleted() {
    let shared = MemoryStore::default();
    let store = Store::new(&shared, "test", bounds(8, 1 << 20));
    let usage = stored(store.put(&key("a"), b"hello", false, NOW));
    assert_eq!(usage.entries, 1);
    assert_eq!(usage.bytes, (SLOT_HEAD + 5) as u64);
    let held = store.get(&key("a"), NOW + 1).unwrap();
    assert_eq!(
        (held.value.as_slice(), held.mirrored),
        (&b"hello"[..], false)
    );
    // Another namespace's entry of the same id, another id, an expired entry.
    let other = Key::new("test", &Namespace::of_key("team-b"), b"a");
    assert_eq!(store.get(&other, NOW + 1), None);
    assert_eq!(store.get(&key("b"), NOW + 1), None);
    assert_eq!(store.get(&key("a"), NOW + 3600), None);
    assert_eq!(store.delete(&other, NOW + 1), None);
    assert_eq!(store.delete(&key("a"), NOW + 1), Some(Usage::default()));
    assert_eq!(store.get(&key("a"), NOW + 1), None);
    assert_eq!(store.delete(&key("a"), NOW + 1), None);
    stored(store.put(&key("m"), b"both", true, NOW));
    assert!(store.get(&key("m"), NOW).unwrap().mirrored);
    assert!(store.delete(&key("m"), NOW).is_some());
    // The shared-data keys: the index and the two slots used, no more.
    let keys = shared.entries.borrow().len();
    assert_eq!(keys, 3);
}

#[test]
fn an_entry_read_since_the_hand_passed_outlives_one_that_was_not() {
    let shared = MemoryStore::default();
    let store = Store::new(&shared, "test", bounds(3, 1 << 20));
    for id in ["a", "b", "c"] {
        stored(store.put(&key(id), id.as_bytes(), false, NOW));
    }
    // "a" read: "b" is the least recently used, and goes first.
    assert!(store.get(&key("a"), NOW).is_some());
    stored(store.put(&key("d"), b"d", false, NOW));
    assert!(store.get(&key("b"), NOW).is_none());
    for id in ["a", "c", "d"] {
        assert!(store.get(&key(id), NOW).is_some(), "{id}");
    }
    // Every one read since: the hand clears the marks, then takes the oldest
    // it passed ("c", after "a" whose mark it cleared on the way).
    stored(store.put(&key("e"), b"e", false, NOW));
    let left: Vec<&str> = ["a", "c", "d", "e"]
        .into_iter()
        .filter(|id| store.get(&key(id), NOW).is_some())
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(left.contains(&"e"));
}

#[test]
fn an_expired_entry_gives_its_slot_first() {
    let shared = MemoryStore::default();
    let mut b = bounds(2, 1 << 20);
    b.ttl_seconds = 10;
    let store = Store::new(&shared, "test", b);
    stored(store.put(&key("old"), b"x", false, NOW));
    stored(store.put(&key("young"), b"y", false, NOW + 8));
    // Both read (marked); the hand is back at "old", expired by now.
    assert!(store.get(&key("young"), NOW + 9).is_some());
    stored(store.put(&key("new"), b"z", false, NOW + 10));
    assert!(store.get(&key("young"), NOW + 10).is_some());
    assert!(store.get(&key("new"), NOW + 10).is_some());
}

#[test]
fn past_max_bytes_the_least_recently_used_go_until_it_fits() {
    let shared = MemoryStore::default();
    let entry = (SLOT_HEAD + 100) as u64;
    let store = Store::new(&shared, "test", bounds(16, 3 * entry));
    let value = [7u8; 100];
    for id in ["a", "b", "c"] {
        stored(store.put(&key(id), &value, false, NOW));
    }
    let big = [1u8; 200];
    let usage = stored(store.put(&key("big"), &big, false, NOW));
    assert!(usage.bytes <= 3 * entry, "{usage:?}");
    assert_eq!(usage.entries, 2);
    assert!(store.get(&key("a"), NOW).is_none());
    assert!(store.get(&key("b"), NOW).is_none());
    assert!(store.get(&key("c"), NOW).is_some());
    // One larger than an entry may be, or than the whole store: not stored.
    let mut small = bounds(16, 3 * entry);
    small.max_entry_bytes = entry;
    let store = Store::new(&shared, "test", small);
    assert_eq!(store.put(&key("x"), &big, false, NOW), Put::TooLarge);
    let store = Store::new(&shared, "test", bounds(16, entry));
    assert_eq!(store.put(&key("x"), &big, false, NOW), Put::TooLarge);
}

#[test]
fn new_bounds_start_an_empty_store_and_clear_the_old_slots() {
    let shared = MemoryStore::default();
    let store = Store::new(&shared, "test", bounds(4, 1 << 20));
    for id in ["a", "b", "c"] {
        stored(store.put(&key(id), b"v", false, NOW));
    }
    let bigger = Store::new(&shared, "test", bounds(8, 1 << 20));
    assert!(bigger.get(&key("a"), NOW).is_none());
    let usage = stored(bigger.put(&key("d"), b"v", false, NOW));
    assert_eq!(usage.entries, 1);
    let held = shared
        .entries
        .borrow()
        .iter()
        .filter(|(k, (v, _))| k.starts_with(b"test:") && *k != b"test:index" && !v.is_empty())
        .count();
    assert_eq!(held, 1);
}

#[test]
fn another_workers_write_is_retried_and_a_failed_read_stores_nothing() {
    let shared = MemoryStore::default();
    let store = Store::new(&shared, "test", bounds(4, 1 << 20));
    stored(store.put(&key("a"), b"1", false, NOW));
    // Another worker stores "b" between our read of the index and our write.
    shared
        .interleave
        .borrow_mut()
        .push(Box::new(|s: &MemoryStore| {
            let store = Store::new(s, "test", bounds(4, 1 << 20));
            // Its own write goes first (no interleave left for it).
            stored(store.put(&key("b"), b"2", false, NOW));
        }));
    let usage = stored(store.put(&key("c"), b"3", false, NOW));
    assert_eq!(usage.entries, 3);
    for id in ["a", "b", "c"] {
        assert!(store.get(&key(id), NOW).is_some(), "{id}");
    }
    shared.unreadable.set(true);
    assert_eq!(store.put(&key("d"), b"4", false, NOW), Put::Failed);
    assert_eq!(store.get(&key("a"), NOW), None);
    shared.unreadable.set(false);
    assert!(store.get(&key("d"), NOW).is_none());
}

#[test]
fn an_index_that_is_not_ours_is_a_store_that_starts_empty() {
    let shared = MemoryStore::default();
    shared.raw_set(b"test:index", b"RSI1 an older build's index");
    let store = Store::new(&shared, "test", bounds(4, 1 << 20));
    assert_eq!(store.get(&key("a"), NOW), None);
    stored(store.put(&key("a"), b"v", false, NOW));
    assert!(store.get(&key("a"), NOW).is_some());
    assert_eq!(Index::decode(b"SSI1"), None);
}
