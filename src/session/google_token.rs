//! Google access tokens for Vertex AI providers whose credentials the
//! gateway manages (`credentials: "service_account"` or
//! `"metadata_server"`), shared by every worker:
//! - the upstream role's root context ticks ([`TokenFetcher::tick`]): a
//!   provider whose shared token is absent or due for refresh (a quarter of
//!   its life, at most 5 minutes, before it expires, or at once after a
//!   vendor 401) is fetched by the one worker that takes its lease (a CAS
//!   write in shared data), through an HTTP callout to the provider's
//!   `token_cluster`: Google's token endpoint with a freshly signed JWT, or
//!   the metadata server with `Metadata-Flavor: Google`;
//! - the answer ([`TokenFetcher::on_response`]) is written to shared data
//!   with its expiry, or, failed, the lease records the failure and the
//!   next try waits 1, 2, 4... 60 seconds;
//! - each attempt reads the shared token ([`authorization`]): one host call,
//!   for these providers only. An attempt that finds none usable
//!   ([`missing`]) is paused, up to the provider's `token_wait_ms`, and
//!   woken by the root context (each tick, and when this worker's fetch
//!   is answered); still none, a clear 503, never a vendor call without
//!   auth. A vendor 401 revokes the token it was sent with
//!   ([`unauthorized`], once per token): later attempts wait for the next
//!   one, which is fetched at the next tick.
//!
//! Neither a key nor a token is ever logged or put in an error.

use std::collections::BTreeMap;

use super::host::{log_once, unix_seconds, Host};
use crate::config::Config;
use crate::dialects::transport::vertex::{Credentials, Settings};
use crate::error::{ErrorCode, GatewayError};
use crate::google_auth::{self, Cached, Lease, ServiceAccount};
use crate::provider::Provider;

/// How long a worker holds the lease while its call is out (the call's
/// own timeout is shorter: a worker that died frees it by then).
const LEASE_SECONDS: u64 = 15;

/// The callout's timeout.
pub const CALL_TIMEOUT_MS: u32 = 5_000;

/// Calls out at once, per worker (one per provider at most).
const MAX_PENDING: usize = 64;

/// The shared-data key of the token of credentials `id` ([`id`]).
fn token_key(id: &str) -> Vec<u8> {
    format!("llm_gateway.google_token.{id}").into_bytes()
}

fn lease_key(id: &str) -> Vec<u8> {
    format!("llm_gateway.google_token_lease.{id}").into_bytes()
}

/// The shared-data key of the fingerprint of provider `name`'s managed
/// credentials in the configuration loaded last (empty: none managed).
fn current_key(name: &str) -> Vec<u8> {
    format!("llm_gateway.google_token_current.{name}").into_bytes()
}

/// The settings of a Vertex provider whose tokens the gateway manages.
fn managed(provider: &Provider) -> Option<&Settings> {
    provider
        .settings::<Settings>()
        .filter(|s| s.credentials.managed())
}

/// Whose tokens: provider `name` with these credentials (their
/// fingerprint), so a reload that changes them does not use the old
/// credentials' token, and one that does not keeps it.
fn id(name: &str, settings: &Settings) -> String {
    credentials_id(name, &settings.fingerprint)
}

fn credentials_id(name: &str, fingerprint: &str) -> String {
    format!("{name}.{fingerprint}")
}

/// The shared token of credentials `id` and its CAS token.
fn cached(host: &impl Host, id: &str) -> Option<(Cached, u32)> {
    match host.shared_data(&token_key(id)) {
        Ok(found) => found.and_then(|(bytes, cas)| Some((Cached::decode(&bytes)?, cas))),
        Err(e) => {
            log_once(&e, "no Google access token read");
            None
        }
    }
}

/// How long an attempt to `provider` (named `name`) may wait for a token
/// (its `token_wait_ms`), when the gateway manages its tokens and none is
/// usable now; `None` otherwise (no host call for other providers).
pub fn missing(host: &impl Host, name: &str, provider: &Provider) -> Option<u64> {
    let settings = managed(provider)?;
    let usable = cached(host, &id(name, settings))
        .is_some_and(|(token, _)| token.usable(unix_seconds(host)));
    (!usable).then_some(settings.token_wait_ms)
}

/// The `authorization` value for an attempt to `provider` (named `name`)
/// and the token's generation: `Ok(None)` for a provider whose tokens the
/// gateway does not manage (no host call), an error when none is usable.
pub fn authorization(
    host: &impl Host,
    name: &str,
    provider: &Provider,
) -> Result<Option<(String, u64)>, GatewayError> {
    let Some(settings) = managed(provider) else {
        return Ok(None);
    };
    match cached(host, &id(name, settings)) {
        Some((token, _)) if token.usable(unix_seconds(host)) => {
            Ok(Some((format!("Bearer {}", token.token), token.generation)))
        }
        _ => {
            let mut e = GatewayError::new(
                ErrorCode::UpstreamBusy,
                "the gateway has no Google access token for this provider yet (it is obtaining one); retry shortly",
            );
            e.retry_after = Some(1);
            Err(e)
        }
    }
}

/// A vendor 401 to an attempt sent with token `generation`: that token is
/// no longer sent (attempts wait for the next) and is refreshed at the next
/// tick (once: a later 401 for the same token, or one for an older token,
/// changes nothing).
pub fn unauthorized(host: &impl Host, name: &str, provider: &Provider, generation: u64) {
    let Some(settings) = managed(provider) else {
        return;
    };
    let id = id(name, settings);
    let now = unix_seconds(host);
    if let Some((mut token, cas)) = cached(host, &id) {
        if token.generation == generation && token.usable(now) {
            token.refresh_at = token.refresh_at.min(now);
            token.expires_at = now;
            // A stale CAS: another worker wrote first (a refresh or this mark).
            let _ = host.set_shared_data(&token_key(&id), &token.encode(), cas);
            log::warn!(
                "llm gateway: provider {name}: Vertex AI refused its access token (401); refreshing it"
            );
        }
    }
}

/// A configuration was loaded (the upstream role, once per load): a
/// Vertex AI provider whose managed credentials differ from those the
/// configuration before had (another key, token cluster or mode, or tokens
/// from outside now) has the old credentials' token and lease dropped from
/// shared data at once; unchanged credentials keep their token, and other
/// providers' tokens are never touched. Workers loading the same
/// configuration write the same. No host call for other dialects.
pub fn configured(host: &impl Host, config: &Config) {
    for (name, provider) in &config.providers {
        let Some(settings) = provider.settings::<Settings>() else {
            continue;
        };
        let now = if settings.credentials.managed() {
            settings.fingerprint.as_str()
        } else {
            ""
        };
        let key = current_key(name);
        let before = match host.shared_data(&key) {
            Ok(found) => found.map(|(bytes, _)| bytes).unwrap_or_default(),
            Err(e) => {
                log_once(&e, "no Google access token dropped");
                continue;
            }
        };
        if before == now.as_bytes() {
            continue;
        }
        let _ = host.set_shared_data(&key, now.as_bytes(), 0);
        let Some(old) = std::str::from_utf8(&before).ok().filter(|f| !f.is_empty()) else {
            continue;
        };
        let gone = credentials_id(name, old);
        let _ = host.set_shared_data(&token_key(&gone), b"", 0);
        let _ = host.set_shared_data(&lease_key(&gone), b"", 0);
        log::info!(
            "llm gateway: provider {name}: its credentials changed; the old credentials' Google access token is dropped"
        );
    }
}

/// `provider`'s lease and its CAS token. An absent one is written first
/// (a CAS of 0 writes unconditionally, so two workers could both take an
/// absent lease) and read back: the lease is then taken with a real CAS.
fn read_lease(host: &impl Host, id: &str) -> Option<(Lease, u32)> {
    for _ in 0..2 {
        match host.shared_data(&lease_key(id)) {
            Ok(Some((bytes, cas))) => {
                return Some((Lease::decode(&bytes).unwrap_or_default(), cas))
            }
            Ok(None) => {
                let _ = host.set_shared_data(&lease_key(id), &Lease::default().encode(), 0);
            }
            Err(e) => {
                log_once(&e, "no Google access token fetched");
                return None;
            }
        }
    }
    None
}

/// One token request: cluster, headers, body.
struct Call {
    cluster: String,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

/// The callout that gets `provider` a token at `now`.
fn token_call(provider: &Provider, credentials: &Credentials, now: u64) -> Result<Call, String> {
    match credentials {
        Credentials::AccessToken => Err("no token to fetch".into()),
        Credentials::ServiceAccount { cluster } => {
            let json = provider
                .resolved_key
                .as_ref()
                .ok_or("no service-account key")?;
            let account = ServiceAccount::parse(json.expose())?;
            let body = ServiceAccount::token_request(&account.assertion(now)?);
            let (authority, path) = account.token_endpoint();
            Ok(Call {
                cluster: cluster.clone(),
                headers: vec![
                    (":method", "POST".into()),
                    (":path", path.to_owned()),
                    (":authority", authority.to_owned()),
                    ("content-type", "application/x-www-form-urlencoded".into()),
                ],
                body,
            })
        }
        Credentials::MetadataServer { cluster } => Ok(Call {
            cluster: cluster.clone(),
            headers: vec![
                (":method", "GET".into()),
                (":path", google_auth::METADATA_PATH.to_owned()),
                (":authority", google_auth::METADATA_HOST.to_owned()),
                ("metadata-flavor", "Google".into()),
            ],
            body: Vec::new(),
        }),
    }
}

/// One worker's token fetches: the calls it has out, by callout token
/// (the provider's name and its credentials' [`id`]).
#[derive(Default)]
pub struct TokenFetcher {
    pending: BTreeMap<u32, (String, String)>,
}

impl TokenFetcher {
    /// Starts the fetches that are due and whose lease this worker takes.
    pub fn tick(&mut self, host: &impl Host, config: &Config) {
        let now = unix_seconds(host);
        for (name, provider) in &config.providers {
            let Some(settings) = managed(provider) else {
                continue;
            };
            let id = id(name, settings);
            if self.pending.len() >= MAX_PENDING || self.pending.values().any(|(_, p)| *p == id) {
                continue;
            }
            let due = cached(host, &id).is_none_or(|(token, _)| now >= token.refresh_at);
            if !due {
                continue;
            }
            let Some((lease, cas)) = read_lease(host, &id) else {
                continue;
            };
            if !lease.free(now) {
                continue;
            }
            let held = Lease {
                until: now + LEASE_SECONDS,
                ..lease
            };
            if host
                .set_shared_data(&lease_key(&id), &held.encode(), cas)
                .is_err()
            {
                continue; // another worker took it
            }
            let sent = token_call(provider, &settings.credentials, now).and_then(|call| {
                let headers: Vec<(&str, &[u8])> = call
                    .headers
                    .iter()
                    .map(|(n, v)| (*n, v.as_bytes()))
                    .collect();
                host.http_call(&call.cluster, &headers, &call.body, CALL_TIMEOUT_MS)
                    .map_err(|e| e.to_string())
            });
            match sent {
                Ok(token) => {
                    self.pending.insert(token, (name.clone(), id));
                }
                Err(e) => {
                    let failed = lease.failed(now);
                    let _ = host.set_shared_data(&lease_key(&id), &failed.encode(), 0);
                    log::warn!(
                        "llm gateway: provider {name}: no Google access token requested: {e}; retrying in {} s",
                        failed.not_before.saturating_sub(now)
                    );
                }
            }
        }
    }

    /// The answer to callout `token`: its HTTP status (`None`: no answer,
    /// e.g. the cluster had no healthy host or the call timed out) and body.
    pub fn on_response(&mut self, host: &impl Host, token: u32, status: Option<u16>, body: &[u8]) {
        let Some((name, id)) = self.pending.remove(&token) else {
            return;
        };
        let now = unix_seconds(host);
        let answer = match status {
            Some(200) => google_auth::parse_token_answer(body),
            Some(status) => Err(format!("the token endpoint answered HTTP {status}")),
            None => Err("the token endpoint did not answer".into()),
        };
        match answer {
            Ok((token, lifetime)) => {
                let generation = cached(host, &id).map_or(1, |(t, _)| t.generation + 1);
                let fresh = Cached::new(token, lifetime, now, generation);
                let stored = host.set_shared_data(&token_key(&id), &fresh.encode(), 0);
                let _ = host.set_shared_data(&lease_key(&id), &Lease::default().encode(), 0);
                match stored {
                    Ok(()) => log::info!(
                        "llm gateway: provider {name}: obtained a Google access token (valid {lifetime} s)"
                    ),
                    Err(e) => log_once(&e, "a Google access token not stored"),
                }
            }
            Err(e) => {
                let lease = host
                    .shared_data(&lease_key(&id))
                    .ok()
                    .flatten()
                    .and_then(|(bytes, _)| Lease::decode(&bytes))
                    .unwrap_or_default()
                    .failed(now);
                let _ = host.set_shared_data(&lease_key(&id), &lease.encode(), 0);
                log::warn!(
                    "llm gateway: provider {name}: no Google access token: {e}; retrying in {} s",
                    lease.not_before.saturating_sub(now)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::fake::FakeHost;

    fn config(credentials: &str) -> Config {
        let key = serde_json::to_string(google_auth::tests::KEY_FILE).unwrap();
        let secret = match credentials {
            "service_account" => format!(r#","api_key":{key}"#),
            _ => String::new(),
        };
        Config::parse(
            format!(
                r#"{{"providers":{{"vx":{{"dialect":"vertex_anthropic"{secret},"project":"p","location":"global","credentials":"{credentials}","token_cluster":"google_oauth"}},
                    "other":{{"dialect":"anthropic","api_key":"k"}}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#
            )
            .as_bytes(),
            |_| None,
        )
        .unwrap()
    }

    pub(super) fn answer(token: &str, lifetime: u64) -> Vec<u8> {
        format!(r#"{{"access_token":"{token}","expires_in":{lifetime},"token_type":"Bearer"}}"#)
            .into_bytes()
    }

    #[test]
    fn one_worker_fetches_shares_refreshes_and_backs_off() {
        let config = config("service_account");
        let host = FakeHost::new();
        let provider = &config.providers["vx"];
        // No token yet: a clear 503, and no call to Vertex.
        let e = authorization(&host, "vx", provider).unwrap_err();
        assert_eq!(e.code, ErrorCode::UpstreamBusy);
        // Others never read shared data for it.
        host.take_record();
        assert_eq!(
            authorization(&host, "other", &config.providers["other"]).unwrap(),
            None
        );
        assert!(host.take_record().is_empty());
        let (mut a, mut b) = (TokenFetcher::default(), TokenFetcher::default());
        a.tick(&host, &config);
        b.tick(&host, &config); // the lease is a's
        let calls = host.http_calls.borrow().clone();
        assert_eq!(calls.len(), 1, "one fetch for all workers");
        let (cluster, headers, body) = &calls[0];
        assert_eq!(cluster, "google_oauth");
        assert!(headers.contains(&(":path".into(), "/token".into())));
        assert!(headers.contains(&(":authority".into(), "oauth2.googleapis.com".into())));
        let body = String::from_utf8(body.clone()).unwrap();
        assert!(body.contains("jwt-bearer&assertion=ey"));
        assert!(!body.contains("PRIVATE KEY"), "the key never leaves");
        // Answered: every worker reads it.
        a.on_response(&host, 1, Some(200), &answer("ya29.first", 3600));
        let (value, generation) = authorization(&host, "vx", provider).unwrap().unwrap();
        assert_eq!((value.as_str(), generation), ("Bearer ya29.first", 1));
        a.tick(&host, &config);
        b.tick(&host, &config);
        assert_eq!(host.http_calls.borrow().len(), 1, "fresh: nothing to do");
        // Refreshed ahead of expiry: 5 minutes before.
        host.clock.set(host.clock.get() + 3300.0);
        b.tick(&host, &config);
        assert_eq!(host.http_calls.borrow().len(), 2);
        // Still usable while the refresh is out.
        assert!(authorization(&host, "vx", provider).is_ok());
        // The token endpoint fails: backoff, then a retry.
        b.on_response(&host, 2, Some(503), b"unavailable");
        b.tick(&host, &config);
        assert_eq!(host.http_calls.borrow().len(), 2, "waits a second");
        host.clock.set(host.clock.get() + 1.0);
        a.tick(&host, &config);
        assert_eq!(host.http_calls.borrow().len(), 3);
        a.on_response(&host, 3, None, b"");
        host.clock.set(host.clock.get() + 1.0);
        a.tick(&host, &config);
        assert_eq!(host.http_calls.borrow().len(), 3, "then two");
        host.clock.set(host.clock.get() + 1.0);
        a.tick(&host, &config);
        assert_eq!(host.http_calls.borrow().len(), 4);
        a.on_response(&host, 4, Some(200), &answer("ya29.second", 3600));
        let (value, generation) = authorization(&host, "vx", provider).unwrap().unwrap();
        assert_eq!((value.as_str(), generation), ("Bearer ya29.second", 2));
        // A 401 for an older token changes nothing; for this one, a refresh, once.
        unauthorized(&host, "vx", provider, 1);
        a.tick(&host, &config);
        assert_eq!(host.http_calls.borrow().len(), 4);
        unauthorized(&host, "vx", provider, 2);
        unauthorized(&host, "vx", provider, 2);
        a.tick(&host, &config);
        b.tick(&host, &config);
        assert_eq!(host.http_calls.borrow().len(), 5);
        // Expired with no new token: no more vendor calls.
        host.clock.set(host.clock.get() + 3600.0);
        assert!(authorization(&host, "vx", provider).is_err());
        // A callout the proxy refuses: backoff too.
        host.fail("http_call", None);
        host.clock.set(host.clock.get() + 100.0);
        let mut c = TokenFetcher::default();
        c.tick(&host, &config);
        let vx = id("vx", managed(provider).unwrap());
        let lease = Lease::decode(&host.shared.borrow()[&lease_key(&vx)].0).unwrap();
        assert_eq!(lease.failures, 1);
    }

    /// vx (a service-account key, its account `account`), md (`md`: its
    /// credentials) and another vendor's provider.
    fn two(account: &str, md: &str) -> Config {
        let key = google_auth::tests::KEY_FILE.replace("gateway-test@", &format!("{account}@"));
        let key = serde_json::to_string(&key).unwrap();
        let md = match md {
            "metadata_server" => r#""credentials":"metadata_server","token_cluster":"gce""#,
            _ => r#""credentials":"access_token","api_key":"ya29.outside""#,
        };
        Config::parse(
            format!(
                r#"{{"providers":{{"vx":{{"dialect":"vertex_anthropic","api_key":{key},"project":"p","location":"global","credentials":"service_account","token_cluster":"google_oauth"}},
                    "md":{{"dialect":"vertex_gemini","project":"p","location":"global",{md}}},
                    "other":{{"dialect":"anthropic","api_key":"k"}}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#
            )
            .as_bytes(),
            |_| None,
        )
        .unwrap()
    }

    #[test]
    fn a_reload_drops_the_tokens_of_changed_credentials_and_only_those() {
        let host = FakeHost::new();
        let first = two("gateway-test", "metadata_server");
        configured(&host, &first);
        let mut fetcher = TokenFetcher::default();
        fetcher.tick(&host, &first);
        fetcher.on_response(&host, 1, Some(200), &answer("ya29.md", 3600));
        fetcher.on_response(&host, 2, Some(200), &answer("ya29.vx-first", 3600));
        let token = |config: &Config, name: &str| {
            let id = id(name, managed(&config.providers[name])?);
            cached(&host, &id).map(|(t, _)| t.token)
        };
        assert_eq!(token(&first, "md").as_deref(), Some("ya29.md"));
        assert_eq!(token(&first, "vx").as_deref(), Some("ya29.vx-first"));
        // The same configuration loaded again (another worker, or a reload
        // that changed something else): a read per Vertex provider, no write.
        host.take_record();
        configured(&host, &two("gateway-test", "metadata_server"));
        assert_eq!(
            host.take_record(),
            [
                "shared_data llm_gateway.google_token_current.md",
                "shared_data llm_gateway.google_token_current.vx"
            ]
        );
        // vx's key changed: its old token is gone from shared data at once,
        // md's stays, and only the new key's is fetched.
        let second = two("gateway-other", "metadata_server");
        configured(&host, &second);
        assert_eq!(token(&first, "vx"), None, "dropped");
        assert_eq!(token(&first, "md").as_deref(), Some("ya29.md"), "kept");
        fetcher.tick(&host, &second);
        let calls = host.http_calls.borrow().clone();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[2].0, "google_oauth");
        fetcher.on_response(&host, 3, Some(200), &answer("ya29.vx-second", 3600));
        assert_eq!(token(&second, "vx").as_deref(), Some("ya29.vx-second"));
        // Back to the first key: its token was dropped, none is reused.
        configured(&host, &first);
        assert_eq!(token(&first, "vx"), None);
        assert_eq!(token(&second, "vx"), None);
        // md's tokens from outside now: the one the gateway fetched is dropped.
        configured(&host, &two("gateway-test", "access_token"));
        assert_eq!(token(&first, "md"), None);
        // No Vertex provider: no host call at all.
        let host = FakeHost::new();
        let none = Config::parse(
            br#"{"providers":{"other":{"dialect":"anthropic","api_key":"k"}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
            |_| None,
        )
        .unwrap();
        configured(&host, &none);
        assert!(host.take_record().is_empty());
    }

    #[test]
    fn the_metadata_server_is_asked_with_its_header() {
        let config = config("metadata_server");
        let host = FakeHost::new();
        let mut fetcher = TokenFetcher::default();
        fetcher.tick(&host, &config);
        let calls = host.http_calls.borrow().clone();
        let (_, headers, body) = &calls[0];
        assert!(headers.contains(&(":method".into(), "GET".into())));
        assert!(headers.contains(&(":path".into(), google_auth::METADATA_PATH.into())));
        assert!(headers.contains(&("metadata-flavor".into(), "Google".into())));
        assert!(body.is_empty());
        fetcher.on_response(&host, 1, Some(200), &answer("ya29.md", 1800));
        let (value, _) = authorization(&host, "vx", &config.providers["vx"])
            .unwrap()
            .unwrap();
        assert_eq!(value, "Bearer ya29.md");
        // An answer that is not a token is a failure, not a token.
        host.clock.set(host.clock.get() + 1800.0);
        fetcher.tick(&host, &config);
        fetcher.on_response(&host, 2, Some(200), b"<html>");
        assert!(authorization(&host, "vx", &config.providers["vx"]).is_err());
    }
}

#[cfg(test)]
mod attempt_tests {
    use std::rc::Rc;

    use super::*;
    use crate::session::attempt::Attempt;
    use crate::session::exchange::Handoff;
    use crate::session::fake::FakeHost;
    use crate::session::host::{Flow, Map};
    use crate::session::Session;

    /// The attempts' configuration, with this service-account key JSON.
    fn vertex_config(key: &str) -> Config {
        let key = serde_json::to_string(key).unwrap();
        Config::parse(
            format!(
                r#"{{"providers":{{"vx":{{"dialect":"vertex_anthropic","api_key":{key},"project":"p","location":"global","credentials":"service_account","token_cluster":"google_oauth"}}}},
                    "model_groups":{{"chat":{{"candidates":[{{"provider":"vx","model":"claude-x@1","cluster":"c"}}]}}}},"auth":{{"enabled":false}}}}"#
            )
            .as_bytes(),
            |_| None,
        )
        .unwrap()
    }

    /// The token's shared-data key for `config`'s provider.
    fn key_of(config: &Config) -> Vec<u8> {
        token_key(&id("vx", managed(&config.providers["vx"]).unwrap()))
    }

    fn attempt(host: FakeHost) -> Attempt<FakeHost> {
        attempt_with(host, vertex_config(google_auth::tests::KEY_FILE))
    }

    fn attempt_with(host: FakeHost, config: Config) -> Attempt<FakeHost> {
        let handoff = Handoff {
            api: crate::model::Api::OpenAiChat,
            call: None,
            token: None,
            candidate: Some(0),
            request_id: "req-1".into(),
            group: "chat".into(),
            response_id: None,
            model: None,
        };
        host.set_prop(&["llm_handoff"], handoff.encode().as_bytes());
        host.set_prop(
            &["xds.upstream_host_metadata.filter_metadata.llm.provider"],
            b"vx",
        );
        host.set(Map::Request, ":path", "/v1/chat/completions");
        host.set(Map::Request, "authorization", "Bearer client-key");
        *host.request_body.borrow_mut() =
            br#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#.to_vec();
        Attempt::new(host, Rc::new(config))
    }

    fn send(a: &mut Attempt<FakeHost>) -> Flow {
        a.on_request_headers(false);
        let size = a.host.request_body.borrow().len();
        a.on_request_body(size, true)
    }

    fn share(host: &FakeHost, token: &str, generation: u64) {
        let fresh = Cached::new(
            token.into(),
            3600,
            crate::session::host::unix_seconds(host),
            generation,
        );
        host.shared.borrow_mut().insert(
            key_of(&vertex_config(google_auth::tests::KEY_FILE)),
            (fresh.encode(), 1),
        );
    }

    #[test]
    fn an_attempt_without_a_token_waits_for_one_then_fails_clearly() {
        // No token yet: paused, never addressed to Vertex.
        let mut a = attempt(FakeHost::new());
        assert_eq!(send(&mut a), Flow::Pause);
        assert!(a.waiting());
        assert!(a.host.reply.borrow().is_none());
        assert_eq!(a.on_wake(), Flow::Pause, "still none: still waiting");
        assert!(a.waiting());
        // Another worker's fetch is answered: the next wake sends it.
        share(&a.host, "ya29.late", 1);
        assert_eq!(a.on_wake(), Flow::Continue);
        assert!(!a.waiting());
        assert_eq!(
            a.host.get(Map::Request, "authorization").as_deref(),
            Some("Bearer ya29.late")
        );
        assert!(a.host.reply.borrow().is_none());
        // None within the wait (5 s by default): a clear 503, no vendor call.
        let mut a = attempt(FakeHost::new());
        assert_eq!(send(&mut a), Flow::Pause);
        a.host.clock.set(a.host.clock.get() + 4.9);
        assert_eq!(a.on_wake(), Flow::Pause);
        a.host.clock.set(a.host.clock.get() + 0.2);
        assert_eq!(a.on_wake(), Flow::Pause);
        assert!(!a.waiting());
        let (status, body) = a.host.reply.borrow().clone().unwrap();
        assert_eq!(status, 503);
        assert!(String::from_utf8_lossy(&body).contains("no Google access token"));
        assert_eq!(
            a.host.get(Map::Request, ":path").as_deref(),
            Some("/v1/chat/completions")
        );
        assert_eq!(
            a.host.get(Map::Request, "authorization").as_deref(),
            Some("Bearer client-key")
        );
        // The client left while it waited: its record says so, once.
        let mut a = attempt(FakeHost::new());
        send(&mut a);
        a.on_done();
        assert!(!a.waiting());
        assert_eq!(a.on_wake(), Flow::Pause);
        assert!(a.host.reply.borrow().is_none());
    }

    #[test]
    fn a_reload_with_other_credentials_uses_a_token_of_its_own() {
        let host = FakeHost::new();
        share(&host, "ya29.of-the-first-key", 1);
        let first = vertex_config(google_auth::tests::KEY_FILE);
        // The same credentials reloaded: the same token.
        let again = vertex_config(google_auth::tests::KEY_FILE);
        assert_eq!(key_of(&first), key_of(&again));
        let mut a = attempt_with(host, again);
        assert_eq!(send(&mut a), Flow::Continue);
        // Another key (another account): its own token, fetched; never the
        // first key's, and the fingerprint is no part of the key.
        let other = google_auth::tests::KEY_FILE.replace("gateway-test@", "gateway-other@");
        let other = vertex_config(&other);
        assert_ne!(key_of(&first), key_of(&other));
        let fingerprint = &managed(&other.providers["vx"]).unwrap().fingerprint;
        assert_eq!(fingerprint.len(), 16);
        assert!(!google_auth::tests::KEY_FILE.contains(fingerprint.as_str()));
        let host = FakeHost::new();
        *host.shared.borrow_mut() = a.host.shared.borrow().clone();
        host.clock.set(a.host.clock.get());
        let mut b = attempt_with(host, other);
        assert_eq!(send(&mut b), Flow::Pause, "waits for a token of its own");
        let mut fetcher = TokenFetcher::default();
        let config =
            vertex_config(&google_auth::tests::KEY_FILE.replace("gateway-test@", "gateway-other@"));
        fetcher.tick(&b.host, &config);
        assert_eq!(b.host.http_calls.borrow().len(), 1);
        fetcher.on_response(
            &b.host,
            1,
            Some(200),
            &super::tests::answer("ya29.of-the-second-key", 3600),
        );
        assert_eq!(b.on_wake(), Flow::Continue);
        assert_eq!(
            b.host.get(Map::Request, "authorization").as_deref(),
            Some("Bearer ya29.of-the-second-key")
        );
    }

    #[test]
    fn attempts_carry_the_shared_token_and_a_401_refreshes_it() {
        // A token in shared data (another worker fetched it): sent, the
        // client's credential and the key never.
        let host = FakeHost::new();
        share(&host, "ya29.shared", 4);
        let mut a = attempt(host);
        assert_eq!(send(&mut a), Flow::Continue);
        assert_eq!(
            a.host.get(Map::Request, "authorization").as_deref(),
            Some("Bearer ya29.shared")
        );
        assert_eq!(
            a.host.get(Map::Request, ":path").as_deref(),
            Some(
                "/v1/projects/p/locations/global/publishers/anthropic/models/claude-x@1:rawPredict"
            )
        );
        let sent = String::from_utf8(a.host.request_body.borrow().clone()).unwrap();
        assert!(
            sent.starts_with(r#"{"anthropic_version":"vertex-2023-10-16""#),
            "{sent}"
        );
        assert!(!sent.contains("PRIVATE"));
        // Vertex answers 401: that token is due for refresh now.
        a.host.set(Map::Response, ":status", "401");
        a.host
            .set(Map::Response, "content-type", "application/json");
        a.on_response_headers(false);
        let config = vertex_config(google_auth::tests::KEY_FILE);
        let (token, _) = cached(
            &a.host,
            &id("vx", managed(&config.providers["vx"]).unwrap()),
        )
        .unwrap();
        assert_eq!(token.generation, 4);
        let now = crate::session::host::unix_seconds(&a.host);
        assert_eq!((token.refresh_at, token.expires_at), (now, now));
        // The client gets a retriable 503 (Envoy's `5xx` retry policy retries
        // it), not an AUTH_FAILED about a credential it never sent.
        let vertex = br#"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#;
        *a.host.response_body.borrow_mut() = vertex.to_vec();
        a.on_response_body(vertex.len(), true);
        assert_eq!(a.host.get(Map::Response, ":status").as_deref(), Some("503"));
        assert_eq!(
            a.host.get(Map::Response, "retry-after").as_deref(),
            Some("1")
        );
        let body = String::from_utf8(a.host.response_body.borrow().clone()).unwrap();
        assert!(
            body.contains("UPSTREAM_BUSY")
                && body.contains("refused the gateway's Google access token"),
            "{body}"
        );
        assert!(!body.contains("ya29"));
        // The next attempt waits for the next token rather than send the revoked one.
        let host = FakeHost::new();
        *host.shared.borrow_mut() = a.host.shared.borrow().clone();
        host.clock.set(a.host.clock.get());
        let mut b = attempt(host);
        assert_eq!(send(&mut b), Flow::Pause);
        assert!(b.waiting());
    }
}
