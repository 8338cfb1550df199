//! The `diagnostics` section: the per-proxy diagnostics view (routing table,
//! backend health, recent requests, limits) under `/llm-gateway/`, and who
//! may read it. Off unless the section is present: recording costs host
//! calls on every request, and a view nobody may read is pure cost.

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::auth::{constant_time_eq, parse_hex_digest};

/// Requests the ring keeps by default: a few minutes of a quiet proxy, a
/// few seconds of a busy one (the health view's window is bounded by both).
pub const DEFAULT_RECENT_REQUESTS: usize = 256;
/// The most a ring may keep (each entry is at most [`MAX_ENTRY_BYTES`]).
pub const MAX_RECENT_REQUESTS: usize = 4096;
/// The most content captured per prompt or answer.
pub const MAX_CAPTURE_BYTES: usize = 16 << 10;
/// The largest entry a ring slot holds (captured content included); a
/// larger one loses its captured content, then its attempts past the
/// first and last.
pub const MAX_ENTRY_BYTES: usize = 2 * MAX_CAPTURE_BYTES + (8 << 10);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Diagnostics {
    /// `false` keeps the section written but the view off (and its path
    /// answered 404).
    pub enabled: bool,
    /// Who may read the view: separate from gateway keys.
    pub admin_keys: Vec<AdminKey>,
    /// Requests from a loopback peer (127.0.0.0/8, ::1) need no admin key:
    /// for `make run` and a proxy only its own host reaches.
    pub loopback_open: bool,
    /// The recent requests ring's size, for the whole proxy.
    pub recent_requests: usize,
    /// Keep the first `capture_bytes` of each prompt and answer in the
    /// ring. Off by default: content is the callers', not the operators'.
    pub capture_content: bool,
    pub capture_bytes: usize,
    /// Authenticated API requests (`/llm-gateway/api/...`) the proxy
    /// answers per second, all admins together; more get 429.
    pub api_requests_per_second: u64,
    /// Backend health counts the recorded attempts of this many seconds
    /// (bounded by what the ring still holds).
    pub health_window_s: u64,
}

impl Default for Diagnostics {
    fn default() -> Self {
        Self {
            enabled: true,
            admin_keys: Vec::new(),
            loopback_open: false,
            recent_requests: DEFAULT_RECENT_REQUESTS,
            capture_content: false,
            capture_bytes: 4096,
            api_requests_per_second: 20,
            health_window_s: 300,
        }
    }
}

/// An admin key: a name for the audit trail and the key's SHA-256.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminKey {
    pub name: String,
    pub sha256: String,
    #[serde(skip)]
    digest: [u8; 32],
}

/// Who the view let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admin {
    /// An admin key, by name.
    Key(String),
    /// No key, from a loopback peer (`loopback_open`).
    Loopback,
}

impl Diagnostics {
    /// Checks the section; `gateway_keys` are the gateway keys' digests (an
    /// admin key must not be one).
    pub fn validate(&mut self, gateway_keys: &[[u8; 32]]) -> Result<(), String> {
        if self.admin_keys.is_empty() && !self.loopback_open {
            return Err(
                "diagnostics.admin_keys: at least one admin key is required \
                 (or \"loopback_open\": true, for a proxy only its own host reaches)"
                    .into(),
            );
        }
        for (i, key) in self.admin_keys.iter_mut().enumerate() {
            let field = format!("diagnostics.admin_keys[{i}]");
            key.digest = parse_hex_digest(&key.sha256)
                .ok_or_else(|| format!("{field}.sha256: must be 64 hex characters (a SHA-256)"))?;
            if key.name.is_empty() {
                return Err(format!("{field}.name: must not be empty"));
            }
            if gateway_keys
                .iter()
                .any(|g| constant_time_eq(g, &key.digest))
            {
                return Err(format!(
                    "{field}.sha256: is a gateway key's; admin keys are separate keys"
                ));
            }
        }
        let bounded = [
            (
                "recent_requests",
                self.recent_requests as u64,
                8,
                MAX_RECENT_REQUESTS as u64,
            ),
            (
                "capture_bytes",
                self.capture_bytes as u64,
                1,
                MAX_CAPTURE_BYTES as u64,
            ),
            (
                "api_requests_per_second",
                self.api_requests_per_second,
                1,
                10_000,
            ),
            ("health_window_s", self.health_window_s, 10, 86_400),
        ];
        for (name, value, low, high) in bounded {
            if !(low..=high).contains(&value) {
                return Err(format!(
                    "diagnostics.{name}: must be between {low} and {high}"
                ));
            }
        }
        Ok(())
    }

    /// The admin a request's key names, compared with every admin key in
    /// constant time; `None` for a missing or unknown key.
    pub fn admin(&self, presented: Option<&str>) -> Option<Admin> {
        let key = presented.filter(|k| !k.is_empty())?;
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        let mut found = None;
        for k in &self.admin_keys {
            if constant_time_eq(&k.digest, &digest) {
                found = Some(Admin::Key(k.name.clone()));
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Diagnostics, String> {
        let mut d: Diagnostics = serde_json::from_str(json).map_err(|e| e.to_string())?;
        d.validate(&[[7; 32]]).map(|()| d)
    }

    const KEY_HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn someone_must_be_able_to_read_the_view() {
        let e = parse("{}").unwrap_err();
        assert!(e.starts_with("diagnostics.admin_keys:"), "{e}");
        assert!(parse(r#"{"loopback_open": true}"#).is_ok());
        let d = parse(&format!(
            r#"{{"admin_keys": [{{"name": "ops", "sha256": "{KEY_HASH}"}}]}}"#
        ))
        .unwrap();
        assert!(d.enabled && !d.capture_content);
        assert_eq!(d.recent_requests, DEFAULT_RECENT_REQUESTS);
    }

    #[test]
    fn admin_keys_are_hashed_and_compared_whole() {
        let d = parse(&format!(
            r#"{{"admin_keys": [{{"name": "ops", "sha256": "{KEY_HASH}"}}]}}"#
        ))
        .unwrap();
        // sha256("test") is KEY_HASH.
        assert_eq!(d.admin(Some("test")), Some(Admin::Key("ops".into())));
        assert_eq!(d.admin(Some("tes")), None);
        assert_eq!(d.admin(Some("")), None);
        assert_eq!(d.admin(None), None);
        let e = parse(r#"{"admin_keys": [{"name": "ops", "sha256": "abc"}]}"#).unwrap_err();
        assert!(e.contains("admin_keys[0].sha256"), "{e}");
        let e = parse(&format!(
            r#"{{"admin_keys": [{{"name": "", "sha256": "{KEY_HASH}"}}]}}"#
        ))
        .unwrap_err();
        assert!(e.contains("admin_keys[0].name"), "{e}");
    }

    #[test]
    fn an_admin_key_is_never_a_gateway_key() {
        let mut d: Diagnostics = serde_json::from_str(&format!(
            r#"{{"admin_keys": [{{"name": "ops", "sha256": "{KEY_HASH}"}}]}}"#
        ))
        .unwrap();
        let gateway = parse_hex_digest(KEY_HASH).unwrap();
        let e = d.validate(&[gateway]).unwrap_err();
        assert!(e.contains("gateway key"), "{e}");
    }

    #[test]
    fn sizes_are_bounded() {
        for (field, value) in [
            ("recent_requests", "0"),
            ("recent_requests", "100000"),
            ("capture_bytes", "0"),
            ("capture_bytes", "1000000"),
            ("api_requests_per_second", "0"),
            ("health_window_s", "1"),
        ] {
            let e =
                parse(&format!(r#"{{"loopback_open": true, "{field}": {value}}}"#)).unwrap_err();
            assert!(e.starts_with(&format!("diagnostics.{field}:")), "{e}");
        }
        let e = parse(r#"{"loopback_open": true, "colour": 1}"#).unwrap_err();
        assert!(e.contains("unknown field"), "{e}");
    }
}
