//! Counters in a store shared by every worker of one proxy (proxy-wasm
//! shared data), updated with compare-and-swap so concurrent workers never
//! lose an update. A counter is one value: the start of the window it
//! counts and what was used in it. A new window resets it in place, so the
//! set of keys never grows with time.

use crate::shared_state::cas::{SetResult, SharedStore, Unreadable, MAX_CAS_ATTEMPTS};

/// A counter's value: the window it counts and what was used in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slot {
    pub window_start: u64,
    pub used: u64,
}

impl Slot {
    const LEN: usize = 16;

    fn encode(self) -> [u8; Self::LEN] {
        let mut out = [0; Self::LEN];
        let (start, used) = out.split_at_mut(8);
        start.copy_from_slice(&self.window_start.to_le_bytes());
        used.copy_from_slice(&self.used.to_le_bytes());
        out
    }

    /// A value of another shape (none is written by us) counts as empty.
    fn decode(bytes: &[u8]) -> Self {
        let word = |range: std::ops::Range<usize>| {
            bytes
                .get(range)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map_or(0, u64::from_le_bytes)
        };
        if bytes.len() != Self::LEN {
            return Self::default();
        }
        Self {
            window_start: word(0..8),
            used: word(8..16),
        }
    }

    /// What was used in the window starting at `window_start` (0 when this
    /// slot counts an older one).
    pub fn used_in(self, window_start: u64) -> u64 {
        if self.window_start == window_start {
            self.used
        } else {
            0
        }
    }
}

/// The outcome of [`add`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// Counted; what the window has used now.
    Counted(u64),
    /// Not counted: the cap refused it; what the window has used.
    OverLimit(u64),
    /// The store did not answer or stayed contended: nothing counted.
    Unavailable,
}

/// When [`add`] may count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// Always (charging what was used).
    None,
    /// Only if the window stays within the limit afterwards (a request, or
    /// a reservation that must fit).
    Within(u64),
    /// Only while something of the limit is left, whatever the amount (a
    /// reservation that may take the last of a budget: the overshoot is at
    /// most this one amount).
    WhileLeft(u64),
}

impl Cap {
    fn refuses(self, used: u64, after: u64) -> bool {
        match self {
            Self::None => false,
            Self::Within(limit) => after > limit,
            Self::WhileLeft(limit) => used >= limit,
        }
    }
}

/// Adds `amount` to the counter `key` in the window starting at
/// `window_start`, unless `cap` refuses it.
pub fn add(
    store: &impl SharedStore,
    key: &[u8],
    window_start: u64,
    amount: u64,
    cap: Cap,
) -> Added {
    update(store, key, |slot| {
        let used = slot.used_in(window_start);
        let after = used.saturating_add(amount);
        if cap.refuses(used, after) {
            return Err(used);
        }
        Ok(Slot {
            window_start,
            used: after,
        })
    })
}

/// Replaces what [`add`] reserved (`held` in the window starting at
/// `held_start`) by what was used (`used` in the window starting at
/// `now_start`), in one write: the reservation is gone with its window
/// when a new one has started.
pub fn settle(
    store: &impl SharedStore,
    key: &[u8],
    held_start: u64,
    held: u64,
    now_start: u64,
    used: u64,
) -> Added {
    update(store, key, |slot| {
        let mut base = slot.used_in(now_start);
        if slot.window_start == held_start && held_start == now_start {
            base = base.saturating_sub(held);
        }
        Ok(Slot {
            window_start: now_start,
            used: base.saturating_add(used),
        })
    })
}

/// Read, compute, compare-and-swap, again while another worker wrote in between.
fn update(store: &impl SharedStore, key: &[u8], next: impl Fn(Slot) -> Result<Slot, u64>) -> Added {
    for _ in 0..MAX_CAS_ATTEMPTS {
        let (slot, cas) = match store.get(key) {
            Ok(Some((bytes, cas))) => (Slot::decode(&bytes), cas),
            Ok(None) => (Slot::default(), 0),
            Err(Unreadable) => return Added::Unavailable,
        };
        let next = match next(slot) {
            Ok(next) => next,
            Err(used) => return Added::OverLimit(used),
        };
        match store.set(key, &next.encode(), cas) {
            SetResult::Done => return Added::Counted(next.used),
            SetResult::CasMismatch => continue,
            SetResult::Failed => return Added::Unavailable,
        }
    }
    Added::Unavailable
}

/// Takes back `amount` that [`add`] counted, if the window is still the same.
pub fn undo(store: &impl SharedStore, key: &[u8], window_start: u64, amount: u64) {
    for _ in 0..MAX_CAS_ATTEMPTS {
        let Ok(Some((bytes, cas))) = store.get(key) else {
            return;
        };
        let slot = Slot::decode(&bytes);
        if slot.window_start != window_start {
            return;
        }
        let next = Slot {
            used: slot.used.saturating_sub(amount),
            ..slot
        };
        if store.set(key, &next.encode(), cas) != SetResult::CasMismatch {
            return;
        }
    }
}

/// What the counter `key` used in the window starting at `window_start`.
pub fn used(store: &impl SharedStore, key: &[u8], window_start: u64) -> u64 {
    store
        .get(key)
        .ok()
        .flatten()
        .map_or(0, |(bytes, _)| Slot::decode(&bytes).used_in(window_start))
}

/// Creates the counter `key` if it does not exist. Shared data has no
/// create-if-absent (a write to a missing key ignores its CAS token), so
/// two workers creating one counter at once could lose a count: counters
/// are created when the configuration loads, before they are counted in.
pub fn ensure(store: &impl SharedStore, key: &[u8]) {
    if store.get(key) == Ok(None) {
        store.set(key, &Slot::default().encode(), 0);
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::shared_state::cas::tests::MemoryStore;

    fn slot(store: &MemoryStore, key: &[u8]) -> Slot {
        Slot::decode(&store.entries.borrow()[key].0)
    }

    #[test]
    fn counts_up_to_the_limit_and_no_further() {
        let store = MemoryStore::default();
        ensure(&store, b"k");
        for n in 1..=3 {
            assert_eq!(
                add(&store, b"k", 1000, 1, Cap::Within(3)),
                Added::Counted(n)
            );
        }
        assert_eq!(
            add(&store, b"k", 1000, 1, Cap::Within(3)),
            Added::OverLimit(3)
        );
        assert_eq!(used(&store, b"k", 1000), 3);
        // A new window starts from zero, in the same key.
        assert_eq!(
            add(&store, b"k", 2000, 1, Cap::Within(3)),
            Added::Counted(1)
        );
        assert_eq!(used(&store, b"k", 1000), 0);
        assert_eq!(store.entries.borrow().len(), 1);
        // Without a limit (charging tokens), it always adds.
        assert_eq!(add(&store, b"k", 2000, 500, Cap::None), Added::Counted(501));
    }

    #[test]
    fn a_concurrent_write_is_retried_not_lost() {
        let store = MemoryStore::default();
        ensure(&store, b"k");
        // Two other workers each count one in before our first two writes.
        for _ in 0..2 {
            store
                .interleave
                .borrow_mut()
                .push(Box::new(|s: &MemoryStore| {
                    let (bytes, _) = s.entries.borrow()[b"k".as_slice()].clone();
                    let mut slot = Slot::decode(&bytes);
                    slot.window_start = 1000;
                    slot.used += 1;
                    s.raw_set(b"k", &slot.encode());
                }));
        }
        assert_eq!(
            add(&store, b"k", 1000, 1, Cap::Within(10)),
            Added::Counted(3)
        );
        assert_eq!(slot(&store, b"k").used, 3);
        // The limit is checked against what the others counted.
        store
            .interleave
            .borrow_mut()
            .push(Box::new(|s: &MemoryStore| {
                s.raw_set(
                    b"k",
                    &Slot {
                        window_start: 1000,
                        used: 10,
                    }
                    .encode(),
                );
            }));
        assert_eq!(
            add(&store, b"k", 1000, 1, Cap::Within(10)),
            Added::OverLimit(10)
        );
    }

    #[test]
    fn a_failed_read_is_not_taken_for_an_absent_counter() {
        let store = MemoryStore::default();
        ensure(&store, b"k");
        assert_eq!(
            add(&store, b"k", 1000, 7, Cap::Within(10)),
            Added::Counted(7)
        );
        store.unreadable.set(true);
        ensure(&store, b"k");
        assert_eq!(
            add(&store, b"k", 1000, 1, Cap::Within(10)),
            Added::Unavailable
        );
        undo(&store, b"k", 1000, 7);
        store.unreadable.set(false);
        // Neither the failed add, `ensure` nor `undo` wrote over the counter.
        assert_eq!(slot(&store, b"k").used, 7);
    }

    #[test]
    fn endless_contention_gives_up_uncounted() {
        let store = MemoryStore::default();
        ensure(&store, b"k");
        for _ in 0..MAX_CAS_ATTEMPTS {
            store
                .interleave
                .borrow_mut()
                .push(Box::new(|s: &MemoryStore| {
                    s.raw_set(b"k", &Slot::default().encode())
                }));
        }
        store.calls.set(0);
        assert_eq!(
            add(&store, b"k", 1000, 1, Cap::Within(10)),
            Added::Unavailable
        );
        // A read and a write per attempt, and no more.
        assert_eq!(store.calls.get(), 2 * MAX_CAS_ATTEMPTS);
    }

    #[test]
    fn undo_takes_back_only_in_the_same_window() {
        let store = MemoryStore::default();
        ensure(&store, b"k");
        add(&store, b"k", 1000, 2, Cap::None);
        undo(&store, b"k", 1000, 1);
        assert_eq!(used(&store, b"k", 1000), 1);
        add(&store, b"k", 2000, 5, Cap::None);
        undo(&store, b"k", 1000, 5);
        assert_eq!(used(&store, b"k", 2000), 5);
    }

    #[test]
    fn ensure_keeps_an_existing_counter_and_odd_values_count_as_empty() {
        let store = MemoryStore::default();
        add(&store, b"k", 1000, 4, Cap::None);
        ensure(&store, b"k");
        assert_eq!(used(&store, b"k", 1000), 4);
        store.raw_set(b"odd", b"not a slot");
        assert_eq!(used(&store, b"odd", 0), 0);
        assert_eq!(
            add(&store, b"odd", 1000, 1, Cap::Within(1)),
            Added::Counted(1)
        );
    }

    #[test]
    fn while_left_takes_the_last_of_a_budget_then_refuses() {
        let store = MemoryStore::default();
        ensure(&store, b"k");
        assert_eq!(
            add(&store, b"k", 1000, 150, Cap::WhileLeft(200)),
            Added::Counted(150)
        );
        // More than what is left, but something is: counted, once.
        assert_eq!(
            add(&store, b"k", 1000, 150, Cap::WhileLeft(200)),
            Added::Counted(300)
        );
        assert_eq!(
            add(&store, b"k", 1000, 1, Cap::WhileLeft(200)),
            Added::OverLimit(300)
        );
        assert_eq!(
            add(&store, b"k", 1000, 150, Cap::Within(400)),
            Added::OverLimit(300)
        );
    }

    #[test]
    fn settle_replaces_the_reservation_in_its_window_only() {
        let store = MemoryStore::default();
        ensure(&store, b"k");
        add(&store, b"k", 1000, 100, Cap::None);
        add(&store, b"k", 1000, 40, Cap::None);
        // 100 reserved, 7 used: the other request's 40 stays.
        assert_eq!(settle(&store, b"k", 1000, 100, 1000, 7), Added::Counted(47));
        // A reservation of a window that ended: the new window gets the use alone.
        assert_eq!(settle(&store, b"k", 1000, 40, 2000, 9), Added::Counted(9));
        assert_eq!(used(&store, b"k", 2000), 9);
        // And a later settle of the old window leaves the new one's count.
        assert_eq!(settle(&store, b"k", 1000, 5, 2000, 1), Added::Counted(10));
    }
}
