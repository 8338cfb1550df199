//! The proxy's shared data as the stores see it (`shared_state::cas`): one
//! adapter over the `Host` for every store a session uses (the rate limit
//! counters, the response store).

use super::host::{log_once, status, Host};
use crate::shared_state::cas::{SetResult, SharedStore, Unreadable};

/// Shared data of this `vm_id` (every worker of the proxy): a failed host
/// call is logged once, with what the store does without it (`outcome`).
pub struct HostStore<'h, H> {
    host: &'h H,
    outcome: &'static str,
}

impl<'h, H: Host> HostStore<'h, H> {
    pub fn new(host: &'h H, outcome: &'static str) -> Self {
        Self { host, outcome }
    }
}

impl<H: Host> SharedStore for HostStore<'_, H> {
    fn get(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, Unreadable> {
        self.host.shared_data(key).map_err(|e| {
            log_once(&e, self.outcome);
            Unreadable
        })
    }

    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> SetResult {
        match self.host.set_shared_data(key, value, cas) {
            Ok(()) => SetResult::Done,
            Err(e) if e.status == status::CAS_MISMATCH => SetResult::CasMismatch,
            Err(e) => {
                log_once(&e, self.outcome);
                SetResult::Failed
            }
        }
    }
}
