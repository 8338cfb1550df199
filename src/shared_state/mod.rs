//! State the gateway keeps beyond one request, shared by every worker of a
//! proxy and, with the state service, by a fleet of proxies: the Responses
//! API's stored responses (`responses_store`), and the response
//! cache to come.
//!
//! One store interface, two backends:
//! - in-process ([`local`], the default): the proxy's shared data, bounded
//!   in entries and bytes, with least-recently-used (CLOCK) and
//!   time-to-live eviction; it survives a reload, not a restart;
//! - fleet-wide ([`remote`]): the state service (`state/`, the `llm-state`
//!   binary) over Redis, reached through an Envoy cluster with HTTP
//!   callouts, durable across restarts (its protocol:
//!   `docs/src/architecture/state-service.md`).
//!
//! Every entry is found by a [`Key`]: a hash of its store, its
//! [`Namespace`] and its id. The namespace is the gateway's, derived from
//! who the caller is (its gateway key's name), never from what the client
//! sent: one key's entries are another key's misses. Entries hold no
//! vendor key, URL or request header: what a store keeps is its caller's
//! business (`responses_store::Entry`).
//!
//! - [`cas`]: the proxy's shared memory with compare-and-swap, what the
//!   in-process stores and the rate limit counters are made of.

use serde::Deserialize;
use sha2::{Digest, Sha256};

pub mod cas;
pub mod local;
pub mod protocol;
pub mod remote;

/// Where shared state lives (configuration `shared_state`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The state service a fleet shares; without it, every store is the
    /// proxy's own.
    #[serde(default)]
    pub service: Option<remote::Service>,
}

impl Settings {
    /// The configuration's check (`shared_state.*`).
    pub fn validate(&self) -> Result<(), String> {
        self.service
            .as_ref()
            .map_or(Ok(()), remote::Service::validate)
    }
}

/// Whose entries these are: a hash of the caller's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Namespace([u8; 16]);

impl Namespace {
    /// The entries of the gateway key named `name` (`auth.keys[].name`;
    /// "" when the gateway has no keys: every caller is the same caller).
    pub fn of_key(name: &str) -> Self {
        Self(digest(&[b"key", name.as_bytes()]))
    }

    /// The entries every caller of model group `group` shares (the
    /// response cache's `scope: group`).
    pub fn of_group(group: &str) -> Self {
        Self(digest(&[b"group", group.as_bytes()]))
    }

    /// Its hex form (the state service's paths).
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

/// An entry's name in a store: its store, namespace and id, hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key([u8; Key::LEN]);

impl Key {
    pub const LEN: usize = 16;

    /// Entry `id` of `namespace` in store `store`.
    pub fn new(store: &str, namespace: &Namespace, id: &[u8]) -> Self {
        Self(digest(&[store.as_bytes(), &namespace.0, id]))
    }

    pub fn as_bytes(&self) -> &[u8; Key::LEN] {
        &self.0
    }

    /// Its hex form (the state service's paths).
    pub fn hex(&self) -> String {
        hex(&self.0)
    }

    /// 31 of its bits, for an index to tell entries apart by.
    fn tag(&self) -> u32 {
        let [a, b, c, d, ..] = self.0;
        u32::from_le_bytes([a, b, c, d]) & 0x7fff_ffff
    }
}

/// SHA-256 of `parts` (each length-prefixed, so no two lists of parts
/// hash alike), cut to 128 bits.
fn digest(parts: &[&[u8]]) -> [u8; 16] {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    let full = hash.finalize();
    let mut out = [0; 16];
    out.copy_from_slice(full.get(..16).unwrap_or(&[0; 16]));
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
