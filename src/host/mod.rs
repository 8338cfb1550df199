//! The only code that talks to proxy-wasm. One module, two roles, chosen by
//! the plugin's `root_id`:
//! - `llm_edge`: HCM filter before the router ([`edge`]);
//! - `llm_upstream`: router upstream filter, once per attempt ([`upstream`]).
//!
//! Both read the same configuration document.

use std::rc::Rc;
use std::time::{SystemTime, UNIX_EPOCH};

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::ContextType;

use crate::config::Config;
use crate::error::GatewayError;

mod abi;
mod edge;
mod limiter;
mod metrics;
mod upstream;

pub const EDGE_ROOT_ID: &str = "llm_edge";
pub const UPSTREAM_ROOT_ID: &str = "llm_upstream";

/// Filter state the edge role writes and every attempt reads: an
/// `exchange::Handoff` (model group, candidate, request id, exchange token).
const HANDOFF_PROPERTY: &str = "llm_handoff";
/// Filter state, when the roles share no VM (see `exchange`): attempt N's
/// `metering::AttemptRecord` (JSON) is `llm_attempt.N`.
fn attempt_property(attempt: u64) -> String {
    format!("llm_attempt.{attempt}")
}
/// Filter state: every attempt's `provider/model:status`, comma-separated
/// (from the upstream role when the roles share no VM; for tracing, from
/// the edge role).
const ROUTE_PROPERTY: &str = "llm_route";
/// Filter state: the request's access-log line (JSON), set when it ends.
const LOG_PROPERTY: &str = "llm_log";

proxy_wasm::main! {{
    abi::init_logging();
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::default()) });
}}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Edge,
    Upstream,
}

#[derive(Default)]
struct Root {
    role: Option<Role>,
    config: Option<Rc<Config>>,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let root_id = abi::property(&["plugin_root_id"])
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let role = match root_id.as_str() {
            EDGE_ROOT_ID => Role::Edge,
            UPSTREAM_ROOT_ID => Role::Upstream,
            other => {
                log::error!(
                    "llm gateway: root_id '{other}' is neither '{EDGE_ROOT_ID}' nor '{UPSTREAM_ROOT_ID}'; configuration rejected"
                );
                return false;
            }
        };
        let bytes = abi::body(abi::Buffer::PluginConfiguration, 0, usize::MAX);
        match Config::parse(&bytes, |name| std::env::var(name).ok()) {
            Ok(mut config) => {
                config.loaded_at = unix_seconds();
                log::info!(
                    "llm gateway ({root_id}): configured {} providers, {} model groups",
                    config.providers.len(),
                    config.model_groups.len()
                );
                if role == Role::Edge {
                    limiter::prepare(&config);
                }
                self.role = Some(role);
                self.config = Some(Rc::new(config));
                true
            }
            Err(e) => {
                log::error!("llm gateway ({root_id}): {e}; configuration rejected");
                false
            }
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        let config = self.config.clone()?;
        Some(match self.role? {
            Role::Edge => Box::new(edge::Edge::new(config)),
            Role::Upstream => Box::new(upstream::Upstream::new(config)),
        })
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

fn elapsed_micros(since: SystemTime) -> u64 {
    abi::now()
        .duration_since(since)
        .map(|d| d.as_micros() as u64)
        .unwrap_or_default()
}

fn unix_seconds() -> u64 {
    abi::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// Answers the request with a unified error, from either role.
fn send_error(error: &GatewayError, request_id: &str) {
    let body = error.to_json(Some(request_id));
    let mut headers: Vec<(&str, &[u8])> = vec![
        ("content-type", b"application/json"),
        ("x-request-id", request_id.as_bytes()),
    ];
    if let Some(allow) = &error.allow {
        headers.push(("allow", allow.as_bytes()));
    }
    if let Some(provider) = error.provider.as_deref() {
        headers.push(("x-llm-provider", provider.as_bytes()));
    }
    abi::send_response(error.status(), &headers, &body, "");
}
