//! Self-calls: requests a session sends to the gateway's own listener as
//! HTTP callouts (`session::callouts`) through the configured cluster
//! (`self_calls.cluster`, an Envoy internal listener with the same filter
//! chain and routes), so that each gets Envoy's whole route: the edge role
//! again, retries, failover across vendors, an attempt translated for each
//! vendor it reaches. The batch embeddings split is the first user
//! (`edge/batch.rs`).
//!
//! A self-call is told apart from a client's request by [`HEADER`]: this
//! proxy's secret, 32 random bytes (from `Host::random`) in shared data, so
//! every worker (every wasm VM of the `vm_id`; natively, the process) knows
//! the same one. It is made when a configuration that has self-calls loads
//! ([`prepare`]) and read at each use, never kept per worker, so a secret
//! two workers made at once (shared data has no create-if-absent) differs
//! for at most the calls in flight at that moment. The edge role compares
//! what a request presents with it in constant time (their SHA-256
//! digests), and removes the header (and [`CANDIDATE_HEADER`]) from every
//! request, a client's or not, before anything else reads it: a client
//! that sends one gains nothing, and no vendor ever sees one.
//!
//! A verified self-call is the part of a request the edge already admitted:
//! it is not authenticated again (the parent's key was), not admitted nor
//! charged by the rate limits (the parent was, for the whole), not metered
//! (the parent meters what its parts used, from the [`PART_HEADER`] each
//! part's answer carries), routed to the candidate the parent chose
//! ([`CANDIDATE_HEADER`]: one vendor for every part), and never split or
//! called out again (no recursion).

use sha2::{Digest, Sha256};

use super::host::{log_once, Host};
use crate::metering::AttemptRecord;

/// The proxy's secret, in hex: this request is one of the gateway's own.
pub const HEADER: &str = "x-llm-self-call";
/// The candidate (index in the model group) a self-call is routed to.
pub const CANDIDATE_HEADER: &str = "x-llm-candidate";
/// The name of the gateway key its request was made with (on the global
/// rate limit path, `limits.descriptors`: its descriptors are its request's).
pub const KEY_HEADER: &str = "x-llm-key";
/// On the one self-call that admits its request by the global rate limits
/// (its descriptors go to Envoy's rate limit filter on arrival; the other
/// self-calls' only when they end, to be charged what they used).
pub const ADMITS_HEADER: &str = "x-llm-admits";
/// On a self-call's answer, to the session that made it: the part's
/// attempt records and route, JSON ([`PartReport`]).
pub const PART_HEADER: &str = "x-llm-part";

/// (Not a metric: the native host's catalogue test reads `"llm_gateway.…"` literals as metrics.)
const SECRET_KEY: &[u8] = b"llm_gateway/self_call_secret";
const SECRET_BYTES: usize = 32;

/// Makes the proxy's secret if there is none yet (as a configuration with
/// self-calls loads).
pub fn prepare(host: &impl Host) {
    let _ = secret(host);
}

/// The proxy's secret, in hex (made now when missing); `None` when the host
/// has neither shared data nor entropy to give.
pub fn secret(host: &impl Host) -> Option<String> {
    match host.shared_data(SECRET_KEY) {
        Ok(Some((secret, _))) if secret.len() == 2 * SECRET_BYTES => {
            return String::from_utf8(secret).ok()
        }
        Ok(_) => {}
        Err(e) => {
            log_once(&e, "no self-call is made or accepted");
            return None;
        }
    }
    let mut bytes = [0u8; SECRET_BYTES];
    if let Err(e) = host.random(&mut bytes) {
        log_once(&e, "no self-call secret is made");
        return None;
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    if let Err(e) = host.set_shared_data(SECRET_KEY, hex.as_bytes(), 0) {
        log_once(&e, "no self-call secret is kept");
        return None;
    }
    // Another worker's, should it have written one meanwhile.
    match host.shared_data(SECRET_KEY) {
        Ok(Some((secret, _))) => String::from_utf8(secret).ok(),
        _ => None,
    }
}

/// Whether `presented` (a request's [`HEADER`]) is this proxy's secret.
pub fn verify(host: &impl Host, presented: &[u8]) -> bool {
    let Ok(Some((secret, _))) = host.shared_data(SECRET_KEY) else {
        return false;
    };
    let digest = |bytes: &[u8]| -> [u8; 32] { Sha256::digest(bytes).into() };
    secret.len() == 2 * SECRET_BYTES
        && crate::auth::constant_time_eq(&digest(presented), &digest(&secret))
}

/// What a self-call's headers say of its request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Part {
    /// The candidate its request was routed to.
    pub candidate: usize,
    /// Its request's gateway key's name ([`KEY_HEADER`]; empty without).
    pub key: String,
    /// It admits its request by the global rate limits ([`ADMITS_HEADER`]).
    pub admits: bool,
}

/// What a request is when it is a self-call of this proxy's (its [`HEADER`]
/// verified); `None` for any other request (no host call when it has no
/// such header).
pub fn verified(host: &impl Host, headers: &crate::headers::Headers) -> Option<Part> {
    let presented = headers.get(HEADER)?;
    if !verify(host, presented) {
        return None;
    }
    let candidate = std::str::from_utf8(headers.get(CANDIDATE_HEADER)?)
        .ok()?
        .parse()
        .ok()?;
    Some(Part {
        candidate,
        key: String::from_utf8_lossy(headers.get(KEY_HEADER).unwrap_or_default()).into_owned(),
        admits: headers.has(ADMITS_HEADER),
    })
}

/// What a self-call's answer tells the session that made it about the
/// attempts that answered it (its records and route), for its metering.
#[derive(serde::Serialize, serde::Deserialize, Debug, Default, Clone, PartialEq)]
pub struct PartReport {
    pub records: Vec<AttemptRecord>,
    pub route: Vec<String>,
    /// The global rate limits refused it (its answer is Envoy's 429,
    /// rewritten in its client's API).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rate_limited: bool,
}

/// A report this long or longer is left out (a header of a few hundred
/// bytes per attempt; Envoy's default limit on a header map is 60 KiB).
const MAX_REPORT: usize = 16 << 10;

impl PartReport {
    /// The header value, unless it would be too long.
    pub fn encode(&self) -> Option<Vec<u8>> {
        serde_json::to_vec(self)
            .ok()
            .filter(|v| v.len() < MAX_REPORT)
    }

    pub fn decode(value: &[u8]) -> Option<Self> {
        serde_json::from_slice(value).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::fake::FakeHost;

    #[test]
    fn the_secret_is_made_once_shared_and_compared_whole() {
        let host = FakeHost::new();
        assert!(
            !verify(&host, b""),
            "nothing verifies before there is a secret"
        );
        prepare(&host);
        let secret = secret(&host).unwrap();
        assert_eq!(secret.len(), 64);
        assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()));
        // Read again, not made again.
        assert_eq!(super::secret(&host).unwrap(), secret);
        assert!(verify(&host, secret.as_bytes()));
        for forged in [&b""[..], b"00", &secret.as_bytes()[..63], b"x"] {
            assert!(!verify(&host, forged));
        }
        let mut other = secret.clone().into_bytes();
        other[10] = if other[10] == b'a' { b'b' } else { b'a' };
        assert!(!verify(&host, &other));
    }

    #[test]
    fn without_shared_data_or_entropy_there_is_no_self_call() {
        let host = FakeHost::new();
        host.fail("random", None);
        assert_eq!(secret(&host), None);
        let host = FakeHost::new();
        host.fail("shared_data", None);
        assert_eq!(secret(&host), None);
        assert!(!verify(&host, b"anything"));
    }

    #[test]
    fn a_part_report_round_trips_and_stays_short() {
        let report = PartReport {
            records: vec![AttemptRecord {
                provider: "p".into(),
                model: "m".into(),
                status: 200,
                prompt_tokens: Some(3),
                ..AttemptRecord::default()
            }],
            route: vec!["p/m:200".into()],
            rate_limited: false,
        };
        let encoded = report.encode().unwrap();
        assert_eq!(PartReport::decode(&encoded), Some(report));
        let long = PartReport {
            route: vec!["x".repeat(MAX_REPORT)],
            ..PartReport::default()
        };
        assert_eq!(long.encode(), None);
        assert_eq!(PartReport::decode(b"not json"), None);
    }
}
