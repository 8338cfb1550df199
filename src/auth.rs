//! Gateway keys: who may call, and which model groups each caller may use.
//!
//! The configuration holds only SHA-256 hashes of the keys. A presented key
//! is hashed and compared with every configured hash in constant time, so
//! neither the keys nor the timing of a comparison give anything away.

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::{ErrorCode, GatewayError};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    /// `false` turns gateway keys off (a sidecar where the mesh authenticates).
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    #[serde(default)]
    pub keys: Vec<GatewayKey>,
}

fn enabled_by_default() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayKey {
    /// Who the key belongs to: shown in logs and metrics, never the key itself.
    pub name: String,
    /// Hex SHA-256 of the key (`make key-hash KEY=...`).
    pub sha256: String,
    /// Model groups this key may use; `"*"` for all.
    pub groups: Vec<String>,
    #[serde(skip)]
    digest: [u8; 32],
}

impl GatewayKey {
    /// The key's SHA-256, as configured.
    pub(crate) fn digest(&self) -> &[u8; 32] {
        &self.digest
    }

    pub fn allows(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == "*" || g == group)
    }
}

/// The caller, once authenticated: an index into `keys`, so request
/// contexts can keep it without borrowing the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// Auth is off: every group is allowed.
    Anyone,
    Key(usize),
}

impl Auth {
    /// Validates the section; `field` prefixes error messages.
    pub fn validate(&mut self) -> Result<(), String> {
        if self.enabled && self.keys.is_empty() {
            return Err(
                "auth.keys: at least one key is required while auth is enabled \
                        (set \"enabled\": false to turn gateway keys off)"
                    .into(),
            );
        }
        for (i, key) in self.keys.iter_mut().enumerate() {
            key.digest = parse_hex_digest(&key.sha256).ok_or_else(|| {
                format!("auth.keys[{i}].sha256: must be 64 hex characters (a SHA-256)")
            })?;
            if key.name.is_empty() {
                return Err(format!("auth.keys[{i}].name: must not be empty"));
            }
            if key.groups.is_empty() {
                return Err(format!(
                    "auth.keys[{i}].groups: list the model groups, or \"*\""
                ));
            }
        }
        Ok(())
    }

    pub fn allows(&self, caller: Caller, group: &str) -> bool {
        match caller {
            Caller::Anyone => true,
            Caller::Key(i) => self.keys.get(i).is_some_and(|k| k.allows(group)),
        }
    }

    /// The key's name for logs; "" when auth is off.
    pub fn caller_name(&self, caller: Caller) -> &str {
        match caller {
            Caller::Anyone => "",
            Caller::Key(i) => self.keys.get(i).map_or("", |k| &k.name),
        }
    }

    /// 403 unless this caller may use `group`.
    pub fn check_group(&self, caller: Caller, group: &str) -> Result<(), GatewayError> {
        if self.allows(caller, group) {
            Ok(())
        } else {
            Err(GatewayError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "this key may not use model group '{}'",
                    group.escape_debug()
                ),
            ))
        }
    }

    /// Authenticates the key a request presented (if any).
    pub fn authenticate(&self, presented: Option<&str>) -> Result<Caller, GatewayError> {
        if !self.enabled {
            return Ok(Caller::Anyone);
        }
        let Some(key) = presented.filter(|k| !k.is_empty()) else {
            return Err(GatewayError::new(
                ErrorCode::AuthFailed,
                "missing gateway key: send it as 'Authorization: Bearer <key>' or 'x-api-key'",
            ));
        };
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        // Look at every key, whatever matches, so timing says nothing.
        let mut found = None;
        for (i, k) in self.keys.iter().enumerate() {
            if constant_time_eq(&k.digest, &digest) {
                found = Some(i);
            }
        }
        found
            .map(Caller::Key)
            .ok_or_else(|| GatewayError::new(ErrorCode::AuthFailed, "invalid gateway key"))
    }
}

/// The key from `Authorization: Bearer <key>`, else from `x-api-key`.
pub fn presented_key<'a>(
    authorization: Option<&'a str>,
    x_api_key: Option<&'a str>,
) -> Option<&'a str> {
    authorization
        .and_then(|a| {
            let (scheme, rest) = a.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .or(x_api_key.map(str::trim))
}

/// Whether two digests are equal, in time that does not depend on where they differ.
pub(crate) fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

pub(crate) fn parse_hex_digest(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *slot = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // sha256("team-a-key")
    const TEAM_A: &str = "d6d4e83a5d5e1e3ad3a0b8d0c8d2e8b4e2f2a1b9e4c5d6f7a8b9c0d1e2f3a4b5";

    fn auth() -> Auth {
        let hash = format!("{:x}", Sha256::digest(b"team-a-key"));
        let mut a: Auth = serde_json::from_str(&format!(
            r#"{{"keys":[{{"name":"team-a","sha256":"{hash}","groups":["fast"]}},
                        {{"name":"admin","sha256":"{}","groups":["*"]}}]}}"#,
            format!("{:x}", Sha256::digest(b"admin-key")).to_uppercase()
        ))
        .unwrap();
        a.validate().unwrap();
        a
    }

    #[test]
    fn authenticates_by_hash() {
        let a = auth();
        let caller = a.authenticate(Some("team-a-key")).unwrap();
        assert_eq!(a.caller_name(caller), "team-a");
        assert!(a.allows(caller, "fast") && !a.allows(caller, "smart"));
        assert_eq!(a.check_group(caller, "smart").unwrap_err().status(), 403);
        let admin = a.authenticate(Some("admin-key")).unwrap();
        assert!(a.allows(admin, "smart"));
        assert_eq!(a.authenticate(Some("wrong")).unwrap_err().status(), 401);
        assert_eq!(a.authenticate(None).unwrap_err().status(), 401);
        assert_eq!(a.authenticate(Some("")).unwrap_err().status(), 401);
    }

    #[test]
    fn disabled_lets_anyone_in() {
        let mut a: Auth = serde_json::from_str(r#"{"enabled":false}"#).unwrap();
        a.validate().unwrap();
        let caller = a.authenticate(None).unwrap();
        assert!(a.allows(caller, "anything"));
        assert_eq!(a.caller_name(caller), "");
    }

    #[test]
    fn validation() {
        let mut a: Auth = serde_json::from_str(r#"{"keys":[]}"#).unwrap();
        assert!(a.validate().unwrap_err().contains("auth.keys"));
        let mut a: Auth =
            serde_json::from_str(r#"{"keys":[{"name":"x","sha256":"abc","groups":["*"]}]}"#)
                .unwrap();
        assert!(a.validate().unwrap_err().contains("auth.keys[0].sha256"));
        let mut a: Auth = serde_json::from_str(&format!(
            r#"{{"keys":[{{"name":"x","sha256":"{TEAM_A}","groups":[]}}]}}"#
        ))
        .unwrap();
        assert!(a.validate().unwrap_err().contains("auth.keys[0].groups"));
    }

    #[test]
    fn presented_keys() {
        assert_eq!(presented_key(Some("Bearer abc"), None), Some("abc"));
        assert_eq!(presented_key(Some("bearer  abc "), Some("x")), Some("abc"));
        assert_eq!(presented_key(None, Some("xyz")), Some("xyz"));
        assert_eq!(presented_key(Some("Basic Zm9v"), None), None);
    }
}
