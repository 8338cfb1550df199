//! The recent requests ring: one per proxy, in the store every worker
//! shares (proxy-wasm shared data; process memory on the native host).
//! Slot `n mod size` holds the trace numbered `n`; a worker claims numbers
//! eight at a time with one compare-and-swap on the ring's counter, so
//! recording a request is one write. Reading the ring reads every slot.
//!
//! What a worker holds is its own (a thread-local: each wasm VM and each
//! native worker thread has its own), so workers never share a number. A
//! worker whose claimed numbers are a whole lap behind (it recorded little
//! while others recorded a ring's worth) may overwrite a newer entry: the
//! ring loses one entry, never its bound.

use std::cell::Cell;

use super::trace::Trace;
use crate::shared_state::cas::{SetResult, SharedStore, MAX_CAS_ATTEMPTS};

/// The ring's counter: the next number no worker has claimed (u64, LE).
const COUNTER: &[u8] = b"llm_gateway.diag.ring";
/// Numbers a worker claims at once.
const CLAIM: u64 = 8;

thread_local! {
    /// This worker's claimed numbers: the next one, and the end of its claim.
    static CLAIMED: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

fn slot_key(slot: u64) -> String {
    format!("llm_gateway.diag.slot.{slot}")
}

/// Creates the counter when the configuration loads (shared data has no
/// create-if-absent: two workers creating it at once would claim the same
/// numbers).
pub fn prepare(store: &impl SharedStore) {
    if store.get(COUNTER) == Ok(None) {
        store.set(COUNTER, &0u64.to_le_bytes(), 0);
    }
}

/// Writes `trace` into the ring of `size` slots; `false` when the store
/// failed or stayed contended (the request goes unrecorded).
pub fn record(store: &impl SharedStore, size: usize, trace: &mut Trace) -> bool {
    let Some(seq) = next_number(store) else {
        return false;
    };
    trace.seq = seq;
    let bytes = trace.encode();
    if bytes.is_empty() {
        return false;
    }
    let slot = seq % (size.max(1) as u64);
    store.set(slot_key(slot).as_bytes(), &bytes, 0) == SetResult::Done
}

/// Every trace the ring of `size` slots holds, newest first.
pub fn read(store: &impl SharedStore, size: usize) -> Vec<Trace> {
    let mut traces: Vec<Trace> = (0..size as u64)
        .filter_map(|slot| store.get(slot_key(slot).as_bytes()).ok().flatten())
        .filter_map(|(bytes, _)| Trace::decode(&bytes))
        .collect();
    traces.sort_by_key(|t| std::cmp::Reverse((t.at_ms, t.seq)));
    traces
}

fn next_number(store: &impl SharedStore) -> Option<u64> {
    let (next, end) = CLAIMED.with(Cell::get);
    if next < end {
        CLAIMED.with(|c| c.set((next + 1, end)));
        return Some(next);
    }
    let start = claim(store, CLAIM)?;
    CLAIMED.with(|c| c.set((start + 1, start + CLAIM)));
    Some(start)
}

/// Claims `count` numbers of the counter `key` (u64, LE): the first one.
pub(super) fn claim_from(store: &impl SharedStore, key: &[u8], count: u64) -> Option<u64> {
    for _ in 0..MAX_CAS_ATTEMPTS {
        let (value, cas) = match store.get(key) {
            Ok(Some((bytes, cas))) => (decode_u64(&bytes), cas),
            Ok(None) => (0, 0),
            Err(_) => return None,
        };
        let next = value.checked_add(count)?;
        match store.set(key, &next.to_le_bytes(), cas) {
            SetResult::Done => return Some(value),
            SetResult::CasMismatch => continue,
            SetResult::Failed => return None,
        }
    }
    None
}

fn claim(store: &impl SharedStore, count: u64) -> Option<u64> {
    claim_from(store, COUNTER, count)
}

pub(super) fn decode_u64(bytes: &[u8]) -> u64 {
    bytes
        .get(..8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, u64::from_le_bytes)
}

/// Forgets this thread's claim (tests: each has a store of its own).
#[cfg(test)]
pub fn forget_claim() {
    CLAIMED.with(|c| c.set((0, 0)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared_state::cas::tests::MemoryStore;

    fn trace(at_ms: u64, id: &str) -> Trace {
        Trace {
            at_ms,
            request_id: id.into(),
            ..Trace::default()
        }
    }

    #[test]
    fn the_ring_keeps_the_newest_size_entries() {
        forget_claim();
        let store = MemoryStore::default();
        prepare(&store);
        for i in 0..20 {
            assert!(record(&store, 8, &mut trace(1000 + i, &format!("r{i}"))));
        }
        let ids: Vec<String> = read(&store, 8).into_iter().map(|t| t.request_id).collect();
        assert_eq!(
            ids,
            ["r19", "r18", "r17", "r16", "r15", "r14", "r13", "r12"]
        );
        // Eight numbers claimed per CAS: 20 traces took three claims.
        assert_eq!(decode_u64(&store.get(COUNTER).unwrap().unwrap().0), 24);
    }

    #[test]
    fn two_workers_never_share_a_slot() {
        forget_claim();
        let store = MemoryStore::default();
        prepare(&store);
        // This worker claims 0..8; "another worker" then claims 8..16.
        assert!(record(&store, 64, &mut trace(1, "mine-0")));
        assert_eq!(claim(&store, CLAIM), Some(8));
        assert!(record(&store, 64, &mut trace(2, "mine-1")));
        let seqs: Vec<u64> = read(&store, 64).iter().map(|t| t.seq).collect();
        assert_eq!(seqs, [1, 0]);
        // Its claim used up, the worker claims after the other's.
        for i in 2..8 {
            assert!(record(&store, 64, &mut trace(10 + i, "mine")));
        }
        let mut next = trace(100, "next");
        assert!(record(&store, 64, &mut next));
        assert_eq!(next.seq, 16);
    }

    #[test]
    fn a_failing_store_records_nothing_and_reads_empty() {
        forget_claim();
        let store = MemoryStore::default();
        store.unreadable.set(true);
        assert!(!record(&store, 8, &mut trace(1, "r")));
        assert!(read(&store, 8).is_empty());
    }
}
