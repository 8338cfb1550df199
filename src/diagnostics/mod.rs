//! The diagnostics view: per proxy, the routing table, each backend's
//! health, the recent requests with their attempts, and the limits and
//! budgets, as JSON under `/llm-gateway/api/` and as a page at
//! `/llm-gateway/` (its HTML, CSS and scripts bundled here).
//!
//! - Recording ([`ring`], [`inflight`]): the edge role writes each request's
//!   [`trace::Trace`] into a ring every worker shares when the request ends
//!   (one store write), and what requests in flight reserve when they are
//!   admitted and end.
//! - Serving ([`serve`]): the edge role answers every path under the prefix
//!   itself, before routing, so none reaches a vendor (with the view off,
//!   404). The page and its assets are public and hold no data; the API
//!   wants an admin key (or a loopback peer, with `loopback_open`) and is
//!   rate-limited per proxy.
//! - Sections ([`sections`]): each panel is a name, a JSON provider and a
//!   renderer; the page's core knows none of them.
//!
//! Never shown: vendor keys, gateway keys, request headers; prompt and
//! answer content only with `capture_content`.

use serde::Serialize;
use serde_json::Value;

use crate::config::diagnostics::Admin;
use crate::config::{Config, Diagnostics};
use crate::error::{ErrorCode, GatewayError};
use crate::limits::store::{self, Added, Cap};
use crate::limits::Window;
use crate::model::Api;
use crate::shared_state::cas::SharedStore;
use crate::surfaces::surface;
use sections::{Filter, View, SECTIONS};

pub mod health;
pub mod inflight;
pub mod ring;
pub mod sections;
pub mod trace;

/// The reserved path prefix: the edge role answers everything under it.
pub const PREFIX: &str = "/llm-gateway";

/// The API's per-proxy rate counter (a `limits::store` slot, one-second windows).
const RATE_COUNTER: &[u8] = b"llm_gateway.diag.api_rate";

/// Whether `path` is the view's (the prefix, or anything under it).
pub fn owns(path: &str) -> bool {
    path.strip_prefix(PREFIX)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Whether a peer address (`source.address`: `127.0.0.1:5000`,
/// `[::1]:5000`) is on the proxy's own host: 127.0.0.0/8, `::1`, or an
/// IPv4-mapped loopback address.
pub fn is_loopback(address: &str) -> bool {
    let host = match address.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => address.rsplit_once(':').map_or(address, |(h, _)| h),
    };
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

/// Creates the shared counters when the configuration loads.
pub fn prepare(store: &impl SharedStore, config: &Config) {
    if config.diagnostics.is_some() {
        ring::prepare(store);
        inflight::prepare(store);
        store::ensure(store, RATE_COUNTER);
    }
}

/// A request for the view.
pub struct Ask<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    /// The key it presented (`Authorization: Bearer`, `x-api-key`).
    pub key: Option<&'a str>,
    pub request_id: &'a str,
}

/// The view's answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// For the view's own metric: `page`, `api`, `unauthorized`,
    /// `rate_limited`, `refused` (a bad method, path or parameter), `off`.
    pub outcome: &'static str,
}

/// What every answer of the view carries: nothing is cached, sniffed or
/// framed, and the page may load only its own scripts and styles and talk
/// only to its own API.
const SECURITY_HEADERS: [(&str, &str); 5] = [
    ("cache-control", "no-store"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
         img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
];

const PAGE: &str = include_str!("assets/index.html");
const STYLE: &str = include_str!("assets/app.css");
const CORE_SCRIPT: &str = include_str!("assets/app.js");

/// Answers a request under [`PREFIX`]. `loopback` says whether the peer is
/// on the proxy's own host (read only when it matters).
pub fn serve(
    config: &Config,
    store: &impl SharedStore,
    now_ms: u64,
    ask: &Ask<'_>,
    loopback: impl FnOnce() -> bool,
) -> Reply {
    let Some(settings) = &config.diagnostics else {
        let e = GatewayError::new(
            ErrorCode::ModelNotFound,
            "the diagnostics view is off (see \"diagnostics\" in the gateway configuration)",
        );
        return error(&e, ask, "off");
    };
    let rest = ask.path.strip_prefix(PREFIX).unwrap_or_default();
    if ask.method != "GET" {
        let e = GatewayError::method_not_allowed(ask.path, ask.method, "GET");
        return error(&e, ask, "refused");
    }
    match rest {
        // The page's links are relative: they need the slash.
        "" => {
            let mut reply = asset("text/plain; charset=utf-8", b"see /llm-gateway/\n".to_vec());
            reply.status = 308;
            reply.headers.push(("location", format!("{PREFIX}/")));
            return reply;
        }
        "/" => return asset("text/html; charset=utf-8", PAGE.as_bytes().to_vec()),
        "/app.css" => return asset("text/css; charset=utf-8", STYLE.as_bytes().to_vec()),
        "/app.js" => return asset("text/javascript; charset=utf-8", script()),
        _ => {}
    }
    let Some(api) = rest
        .strip_prefix("/api")
        .filter(|r| r.is_empty() || r.starts_with('/'))
    else {
        return error(&unknown(ask.path), ask, "refused");
    };
    let admin = match (settings.admin(ask.key), ask.key) {
        (Some(admin), _) => admin,
        (None, None) if settings.loopback_open && loopback() => Admin::Loopback,
        (None, presented) => {
            let message = match presented {
                None => "the diagnostics view wants an admin key: send it as 'Authorization: Bearer <key>'",
                Some(_) => "invalid admin key",
            };
            let mut reply = error(
                &GatewayError::new(ErrorCode::AuthFailed, message),
                ask,
                "unauthorized",
            );
            reply.headers.push((
                "www-authenticate",
                "Bearer realm=\"llm-gateway diagnostics\"".into(),
            ));
            return reply;
        }
    };
    if let Some(reply) = rate_limited(settings, store, now_ms, ask) {
        return reply;
    }
    let filter = match Filter::parse(ask.query) {
        Ok(filter) => filter,
        Err((param, message)) => {
            return error(&GatewayError::invalid(param, message), ask, "refused");
        }
    };
    let view = View::new(config, settings, store, now_ms, filter);
    let body = match api.trim_end_matches('/') {
        "" => index(),
        "/view" => everything(&view, &admin),
        name => {
            let name = name.trim_start_matches('/');
            if let Some(id) = name.strip_prefix("requests/") {
                let id = crate::formats::url::decode_segment(id);
                match sections::requests_one(&view, &id) {
                    Some(trace) => trace,
                    None => {
                        let mut e = GatewayError::new(
                            ErrorCode::ModelNotFound,
                            format!(
                                "no recent request '{}' (the ring keeps the last {})",
                                id.escape_debug(),
                                settings.recent_requests
                            ),
                        );
                        e.param = Some("request_id".into());
                        return error(&e, ask, "refused");
                    }
                }
            } else if let Some(section) = sections::find(name) {
                (section.data)(&view)
            } else {
                return error(&unknown(ask.path), ask, "refused");
            }
        }
    };
    let mut reply = json(200, &body);
    reply.outcome = "api";
    reply
}

fn rate_limited(
    settings: &Diagnostics,
    store: &impl SharedStore,
    now_ms: u64,
    ask: &Ask<'_>,
) -> Option<Reply> {
    let (start, _) = Window::Second.bounds(now_ms);
    let limit = settings.api_requests_per_second;
    // A store that does not answer lets the request through, as limits do.
    let Added::OverLimit(_) = store::add(store, RATE_COUNTER, start, 1, Cap::Within(limit)) else {
        return None;
    };
    let e = GatewayError {
        retry_after: Some(1),
        ..GatewayError::new(
            ErrorCode::RateLimited,
            format!(
                "the diagnostics API answers {limit} requests a second per proxy; retry shortly"
            ),
        )
    };
    Some(error(&e, ask, "rate_limited"))
}

/// The sections and endpoints, for scripts.
fn index() -> Value {
    #[derive(Serialize)]
    struct Entry {
        name: &'static str,
        title: &'static str,
        path: String,
    }
    #[derive(Serialize)]
    struct Index {
        sections: Vec<Entry>,
        view: String,
        request: String,
        filters: [&'static str; 4],
    }
    let index = Index {
        sections: SECTIONS
            .iter()
            .map(|s| Entry {
                name: s.name,
                title: s.title,
                path: format!("{PREFIX}/api/{}", s.name),
            })
            .collect(),
        view: format!("{PREFIX}/api/view"),
        request: format!("{PREFIX}/api/requests/{{request_id}}"),
        filters: ["group", "key", "status", "limit"],
    };
    serde_json::to_value(index).unwrap_or_default()
}

/// Every section at once (what the page polls).
fn everything(view: &View<'_>, admin: &Admin) -> Value {
    #[derive(Serialize)]
    struct Part {
        name: &'static str,
        title: &'static str,
        data: Value,
    }
    /// What the page's filters offer: the configured groups and keys, and
    /// the statuses the ring holds.
    #[derive(Serialize)]
    struct Facets<'a> {
        groups: Vec<&'a str>,
        keys: Vec<&'a str>,
        statuses: std::collections::BTreeSet<u16>,
    }
    #[derive(Serialize)]
    struct Everything<'a> {
        generated_at_ms: u64,
        /// The admin key's name ("" for a loopback peer without one).
        admin: &'a str,
        filters: Facets<'a>,
        sections: Vec<Part>,
    }
    let config = view.config;
    let everything = Everything {
        generated_at_ms: view.now_ms,
        admin: match admin {
            Admin::Key(name) => name,
            Admin::Loopback => "",
        },
        filters: Facets {
            groups: config.model_groups.keys().map(String::as_str).collect(),
            keys: config.auth.keys.iter().map(|k| k.name.as_str()).collect(),
            statuses: view.traces().iter().map(|t| t.status).collect(),
        },
        sections: SECTIONS
            .iter()
            .map(|s| Part {
                name: s.name,
                title: s.title,
                data: (s.data)(view),
            })
            .collect(),
    };
    serde_json::to_value(everything).unwrap_or_default()
}

/// The page's script: its core, then every section's renderer.
fn script() -> Vec<u8> {
    let mut out = CORE_SCRIPT.as_bytes().to_vec();
    for section in SECTIONS {
        out.push(b'\n');
        out.extend_from_slice(section.script.as_bytes());
    }
    out
}

fn asset(content_type: &str, body: Vec<u8>) -> Reply {
    let mut reply = with_headers(200, content_type, body);
    reply.outcome = "page";
    reply
}

fn json(status: u16, value: &Value) -> Reply {
    with_headers(
        status,
        "application/json",
        serde_json::to_vec(value).unwrap_or_default(),
    )
}

fn with_headers(status: u16, content_type: &str, body: Vec<u8>) -> Reply {
    let mut headers = vec![("content-type", content_type.to_owned())];
    headers.extend(SECURITY_HEADERS.iter().map(|(n, v)| (*n, (*v).to_owned())));
    Reply {
        status,
        headers,
        body,
        outcome: "refused",
    }
}

fn unknown(path: &str) -> GatewayError {
    let mut e = GatewayError::new(
        ErrorCode::ModelNotFound,
        format!(
            "unknown path {} (the view is at {PREFIX}/, its API at {PREFIX}/api)",
            path.escape_debug()
        ),
    );
    e.param = Some("path".into());
    e
}

/// An error in the gateway's own envelope (OpenAI's, as for unknown paths).
fn error(e: &GatewayError, ask: &Ask<'_>, outcome: &'static str) -> Reply {
    let api = surface(Api::OpenAiChat);
    let mut reply = with_headers(
        api.status(e.code),
        "application/json",
        api.render_error(e, Some(ask.request_id)),
    );
    if let Some(allow) = e.allow {
        reply.headers.push(("allow", allow.to_owned()));
    }
    if let Some(wait) = e.retry_after {
        reply.headers.push(("retry-after", wait.to_string()));
    }
    reply.outcome = outcome;
    reply
}

#[cfg(test)]
mod tests;
