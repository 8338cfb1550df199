//! What requests in flight hold against their token and spend budgets (and
//! their places in flight): the limits' counters hold what was used and
//! what is reserved as one number, and the view shows them apart. Each
//! worker keeps what its own requests hold and writes it whole to a slot
//! of its own when it changes (one write at admission, one at the end);
//! the view adds the slots up.
//!
//! A worker's slot is its number, claimed once (a thread-local: each wasm
//! VM and native worker thread has its own) modulo [`MAX_WORKERS`]. A VM
//! that died leaves its slot as it was: what it held stays in the counters
//! too until their windows end, and the view counts it in those windows only.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use super::ring::{claim_from, decode_u64};
use crate::shared_state::cas::SharedStore;

/// How many workers' slots there are: numbers past it share slots
/// (a proxy reloaded more often than this keeps the newest VMs' apart).
pub const MAX_WORKERS: u64 = 64;
/// The workers counter: the next worker number (u64, LE).
const WORKERS: &[u8] = b"llm_gateway.diag.workers";

/// Held amounts by counter id and window start.
type Held = BTreeMap<(Vec<u8>, u64), u64>;

thread_local! {
    static WORKER: Cell<Option<u64>> = const { Cell::new(None) };
    static HELD: RefCell<Held> = const { RefCell::new(Held::new()) };
}

fn slot_key(worker: u64) -> String {
    format!("llm_gateway.diag.inflight.{worker}")
}

/// Creates the workers counter when the configuration loads.
pub fn prepare(store: &impl SharedStore) {
    if store.get(WORKERS) == Ok(None) {
        store.set(WORKERS, &0u64.to_le_bytes(), 0);
    }
}

/// One amount a request holds: its counter, the window it was taken in, how much.
pub struct Holding<'a> {
    pub counter: &'a [u8],
    pub window_start: u64,
    pub amount: u64,
}

/// A request was admitted holding `held`.
pub fn hold(store: &impl SharedStore, held: &[Holding<'_>]) {
    change(store, held, true);
}

/// A request that held `held` ended.
pub fn release(store: &impl SharedStore, held: &[Holding<'_>]) {
    change(store, held, false);
}

fn change(store: &impl SharedStore, held: &[Holding<'_>], add: bool) {
    if held.is_empty() {
        return;
    }
    let Some(worker) = worker(store) else {
        return;
    };
    let bytes = HELD.with(|all| {
        let mut all = all.borrow_mut();
        for h in held {
            let key = (h.counter.to_vec(), h.window_start);
            let now = all.get(&key).copied().unwrap_or(0);
            let next = if add {
                now.saturating_add(h.amount)
            } else {
                now.saturating_sub(h.amount)
            };
            if next == 0 {
                all.remove(&key);
            } else {
                all.insert(key, next);
            }
        }
        encode(&all)
    });
    store.set(slot_key(worker).as_bytes(), &bytes, 0);
}

fn worker(store: &impl SharedStore) -> Option<u64> {
    if let Some(n) = WORKER.with(Cell::get) {
        return Some(n);
    }
    let n = claim_from(store, WORKERS, 1)? % MAX_WORKERS;
    WORKER.with(|w| w.set(Some(n)));
    Some(n)
}

/// What every worker's requests hold, by counter id and window start.
pub fn totals(store: &impl SharedStore) -> BTreeMap<(Vec<u8>, u64), u64> {
    let workers = store
        .get(WORKERS)
        .ok()
        .flatten()
        .map_or(0, |(b, _)| decode_u64(&b))
        .min(MAX_WORKERS);
    let mut totals = BTreeMap::new();
    for worker in 0..workers {
        let Some((bytes, _)) = store.get(slot_key(worker).as_bytes()).ok().flatten() else {
            continue;
        };
        for (key, amount) in decode(&bytes) {
            let total: &mut u64 = totals.entry(key).or_default();
            *total = total.saturating_add(amount);
        }
    }
    totals
}

/// Entries as `len(u32) id window_start(u64) amount(u64)`, little-endian.
fn encode(held: &Held) -> Vec<u8> {
    let mut out = Vec::new();
    for ((id, start), amount) in held {
        out.extend_from_slice(&(id.len() as u32).to_le_bytes());
        out.extend_from_slice(id);
        out.extend_from_slice(&start.to_le_bytes());
        out.extend_from_slice(&amount.to_le_bytes());
    }
    out
}

/// The entries of a slot; reading stops at the first malformed one.
fn decode(mut bytes: &[u8]) -> Vec<((Vec<u8>, u64), u64)> {
    let mut out = Vec::new();
    while let Some((len, rest)) = bytes.split_first_chunk::<4>() {
        let len = u32::from_le_bytes(*len) as usize;
        let (Some(id), Some(tail)) = (rest.get(..len), rest.get(len..)) else {
            break;
        };
        let (Some(start), Some(amount)) = (tail.get(..8), tail.get(8..16)) else {
            break;
        };
        out.push(((id.to_vec(), decode_u64(start)), decode_u64(amount)));
        bytes = tail.get(16..).unwrap_or_default();
    }
    out
}

/// Forgets this thread's worker number and holdings (tests).
#[cfg(test)]
pub fn forget_worker() {
    WORKER.with(|w| w.set(None));
    HELD.with(|h| h.borrow_mut().clear());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared_state::cas::tests::MemoryStore;

    fn h(counter: &[u8], amount: u64) -> Holding<'_> {
        Holding {
            counter,
            window_start: 60_000,
            amount,
        }
    }

    #[test]
    fn holdings_add_up_across_workers_and_are_released() {
        forget_worker();
        let store = MemoryStore::default();
        prepare(&store);
        hold(&store, &[h(b"tokens", 500), h(b"usd", 30)]);
        hold(&store, &[h(b"tokens", 200)]);
        // Another worker's slot (number 1), written as that worker would.
        store.raw_set(b"llm_gateway.diag.workers", &2u64.to_le_bytes());
        let mut other = Held::new();
        other.insert((b"tokens".to_vec(), 60_000), 1000);
        store.raw_set(slot_key(1).as_bytes(), &encode(&other));
        let all = totals(&store);
        assert_eq!(all.get(&(b"tokens".to_vec(), 60_000)), Some(&1700));
        assert_eq!(all.get(&(b"usd".to_vec(), 60_000)), Some(&30));
        release(&store, &[h(b"tokens", 500), h(b"usd", 30)]);
        let all = totals(&store);
        assert_eq!(all.get(&(b"tokens".to_vec(), 60_000)), Some(&1200));
        assert_eq!(all.get(&(b"usd".to_vec(), 60_000)), None);
    }

    #[test]
    fn a_malformed_slot_reads_as_far_as_it_is_whole() {
        let mut held = Held::new();
        held.insert((b"a".to_vec(), 1), 2);
        held.insert((b"b".to_vec(), 3), 4);
        let bytes = encode(&held);
        assert_eq!(decode(&bytes).len(), 2);
        assert_eq!(decode(&bytes[..bytes.len() - 1]).len(), 1);
        assert!(decode(&[0xff, 0xff, 0xff, 0xff, 1]).is_empty());
        assert!(decode(b"").is_empty());
    }
}
