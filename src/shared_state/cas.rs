//! The proxy's own shared memory as the stores see it: keys and values
//! every worker of one proxy shares (proxy-wasm shared data on the wasm
//! host, process memory on the native host), written with compare-and-swap
//! so that concurrent workers never lose each other's writes. The rate
//! limit counters (`limits::store`) and the in-process store
//! ([`super::local`]) are built on it; the sessions adapt the `Host` to it
//! (`session::shared_data::HostStore`).

/// Shared data, or a map in tests.
pub trait SharedStore {
    /// The value and its CAS token; `Ok(None)` when absent.
    fn get(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, Unreadable>;
    /// Writes `value` if the entry still has token `cas` (0: unconditionally).
    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> SetResult;
}

/// A read the store could not answer (the host failed). Not an absent
/// entry: a write after it would replace the real value with a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetResult {
    Done,
    /// Another worker wrote in between: read again and retry.
    CasMismatch,
    Failed,
}

/// How often one update is retried against other workers' writes before
/// giving up (a counter then admits the request uncounted:
/// docs/src/features/limits.md; a store stores nothing).
pub const MAX_CAS_ATTEMPTS: usize = 16;

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::collections::HashMap;

    /// Entries by key: the value and its CAS token.
    type Entries = HashMap<Vec<u8>, (Vec<u8>, u32)>;
    /// A write by "another worker", made just before one of ours.
    type OtherWrite = Box<dyn Fn(&MemoryStore)>;

    /// Envoy's shared data semantics: every write bumps the entry's CAS
    /// token; a write with a non-zero token that is not the entry's fails.
    #[derive(Default)]
    pub struct MemoryStore {
        pub entries: RefCell<Entries>,
        next_cas: Cell<u32>,
        /// Writes by "another worker" to make before each of our writes.
        pub interleave: RefCell<Vec<OtherWrite>>,
        pub calls: Cell<usize>,
        /// Every read fails, as a failing host's would.
        pub unreadable: Cell<bool>,
    }

    impl MemoryStore {
        pub fn raw_set(&self, key: &[u8], value: &[u8]) {
            self.next_cas.set(self.next_cas.get() + 1);
            self.entries
                .borrow_mut()
                .insert(key.to_vec(), (value.to_vec(), self.next_cas.get()));
        }
    }

    impl SharedStore for MemoryStore {
        fn get(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, Unreadable> {
            self.calls.set(self.calls.get() + 1);
            if self.unreadable.get() {
                return Err(Unreadable);
            }
            Ok(self.entries.borrow().get(key).cloned())
        }

        fn set(&self, key: &[u8], value: &[u8], cas: u32) -> SetResult {
            self.calls.set(self.calls.get() + 1);
            let other = self.interleave.borrow_mut().pop();
            if let Some(other) = other {
                other(self);
            }
            let current = self.entries.borrow().get(key).map(|(_, c)| *c);
            if cas != 0 && current.is_some_and(|c| c != cas) {
                return SetResult::CasMismatch;
            }
            self.raw_set(key, value);
            SetResult::Done
        }
    }
}
