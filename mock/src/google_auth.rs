//! Google access tokens as Vertex AI checks them: `authorization: Bearer
//! <token>`, a token this mock knows and that has not expired. Known are
//! the one given with `--vertex-token` (default [`DEFAULT_TOKEN`], a token
//! "minted outside" the gateway) and those the mock's token endpoint and
//! metadata server issued (`oauth.rs`), each with its expiry. Anything else
//! is Google's 401 `UNAUTHENTICATED`.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::http::Request;

/// The token `--vertex-token` replaces.
pub const DEFAULT_TOKEN: &str = "ya29.mock-vertex-token";

/// Google's message for a missing, bad or expired token.
pub const UNAUTHENTICATED: &str = "Request had invalid authentication credentials. Expected \
    OAuth 2 access token, login cookie or other valid authentication credential. See \
    https://developers.google.com/identity/sign-in/web/devconsole-project.";

static STATIC_TOKEN: OnceLock<String> = OnceLock::new();

/// Issued tokens → their expiry (Unix seconds); at most [`MAX_ISSUED`].
static ISSUED: OnceLock<Mutex<HashMap<String, u64>>> = OnceLock::new();

const MAX_ISSUED: usize = 100_000;

/// Sets the outside token (once, at start-up).
pub fn configure(token: Option<String>) {
    let _ = STATIC_TOKEN.set(token.unwrap_or_else(|| DEFAULT_TOKEN.to_owned()));
}

fn issued() -> &'static Mutex<HashMap<String, u64>> {
    ISSUED.get_or_init(|| Mutex::new(HashMap::new()))
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Remembers an issued token valid until `expires` (Unix seconds).
pub fn remember(token: String, expires: u64) {
    if let Ok(mut map) = issued().lock() {
        if map.len() >= MAX_ISSUED {
            let t = now();
            map.retain(|_, e| *e > t);
        }
        if map.len() < MAX_ISSUED {
            map.insert(token, expires);
        }
    }
}

/// Whether `token` is one Vertex accepts now.
pub fn valid(token: &str) -> bool {
    let outside = STATIC_TOKEN.get().map_or(DEFAULT_TOKEN, String::as_str);
    if !token.is_empty() && token == outside {
        return true;
    }
    issued()
        .lock()
        .ok()
        .and_then(|map| map.get(token).copied())
        .is_some_and(|expires| expires > now())
}

/// The request's bearer token checked: `Err` with Google's message.
pub fn check(req: &Request) -> Result<(), String> {
    let token = req
        .header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if valid(token.trim()) {
        Ok(())
    } else {
        Err(UNAUTHENTICATED.to_owned())
    }
}

/// Forgets every issued token: Vertex refuses them from now on.
pub fn revoke_issued() {
    if let Ok(mut map) = issued().lock() {
        map.clear();
    }
}
