//! Process-wide shared data with CAS tokens: proxy-wasm's shared data (one
//! store per `vm_id`, every worker's VM sees it) for the native host, where
//! one process holds every worker. Same semantics: a read returns the value
//! and its token; a write with token 0 always lands, with another token only
//! while it is still the entry's (else `CAS_MISMATCH`); every write gives
//! the entry a new token, never 0.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use llm_gateway_core::session::host::status::CAS_MISMATCH;

#[derive(Default)]
struct Store {
    entries: HashMap<Vec<u8>, (Vec<u8>, u32)>,
    last_cas: u32,
}

fn store() -> MutexGuard<'static, Store> {
    static STORE: OnceLock<Mutex<Store>> = OnceLock::new();
    // A panic while holding the lock cannot leave an entry half-written
    // (each write is one insert), so a poisoned lock is still consistent.
    STORE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn get(key: &[u8]) -> Option<(Vec<u8>, u32)> {
    store().entries.get(key).cloned()
}

pub fn set(key: &[u8], value: &[u8], cas: u32) -> Result<(), u32> {
    let mut store = store();
    if cas != 0 {
        if let Some((_, current)) = store.entries.get(key) {
            if *current != cas {
                return Err(CAS_MISMATCH);
            }
        }
    }
    store.last_cas = store.last_cas.wrapping_add(1).max(1);
    let token = store.last_cas;
    store.entries.insert(key.to_vec(), (value.to_vec(), token));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cas_tokens_guard_concurrent_writes() {
        let key = b"shared-test-key";
        assert_eq!(get(key), None);
        set(key, b"a", 0).unwrap();
        let (value, cas) = get(key).unwrap();
        assert_eq!(value, b"a");
        assert_ne!(cas, 0);
        set(key, b"b", cas).unwrap();
        assert_eq!(set(key, b"c", cas), Err(CAS_MISMATCH));
        let (value, newer) = get(key).unwrap();
        assert_eq!((value.as_slice(), newer != cas), (&b"b"[..], true));
        set(key, b"d", 0).unwrap();
        assert_eq!(get(key).unwrap().0, b"d");
    }

    #[test]
    fn workers_on_threads_see_one_store() {
        let key = b"shared-thread-key";
        set(key, b"0", 0).unwrap();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(move || loop {
                    let (value, cas) = get(key).unwrap_or_default();
                    let n = std::str::from_utf8(&value)
                        .ok()
                        .and_then(|s| s.parse::<u32>().ok())
                        .unwrap_or(0);
                    if set(key, (n + 1).to_string().as_bytes(), cas).is_ok() {
                        break;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(get(key).unwrap().0, b"8");
    }
}
