//! The gateway inside Envoy as a proxy-wasm filter: the thin host over the
//! core crate (`llm-gateway-core`, which knows no proxy), built for
//! `wasm32-wasip1` as `llm_gateway.wasm`; natively this crate is empty (the
//! core's tests run natively without it).
//!
//! The only code that talks to proxy-wasm. Two roles, chosen by
//! the plugin's `root_id`:
//! - `llm_edge`: HCM filter before the router ([`edge`]);
//! - `llm_upstream`: router upstream filter, once per attempt ([`upstream`]).
//!
//! Both read the same configuration document.

#![cfg(target_arch = "wasm32")]

use std::rc::Rc;
use std::time::{Duration, SystemTime};

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::ContextType;

use llm_gateway_core::config::Config;
use llm_gateway_core::headers::Headers;
use llm_gateway_core::session::attempt::Attempt;
use llm_gateway_core::session::discovery;
use llm_gateway_core::session::edge::{self, Edge};
use llm_gateway_core::session::google_token::{self, TokenFetcher};
use llm_gateway_core::session::host::{
    unix_seconds, Buffer, Host, HostCall, HostError, Map, Phase,
};
use llm_gateway_core::session::self_call;

mod abi;
mod callbacks;
mod metrics;

pub const EDGE_ROOT_ID: &str = "llm_edge";
pub const UPSTREAM_ROOT_ID: &str = "llm_upstream";

proxy_wasm::main! {{
    abi::init_logging();
    proxy_wasm::set_root_context(|id| -> Box<dyn RootContext> {
        Box::new(Root {
            id,
            ..Root::default()
        })
    });
}}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Edge,
    Upstream,
}

#[derive(Default)]
struct Root {
    /// The root context's id (the effective context again after a wake).
    id: u32,
    role: Option<Role>,
    config: Option<Rc<Config>>,
    /// The upstream role's Google access-token fetches (Vertex AI).
    tokens: TokenFetcher,
    /// The upstream role's model-list reads (model discovery).
    discovery: discovery::Fetcher,
}

/// How often the upstream role looks at the shared Google tokens and the
/// model lists due.
const TOKEN_TICK: Duration = Duration::from_millis(500);

impl Context for Root {
    fn on_http_call_response(
        &mut self,
        token_id: u32,
        _num_headers: usize,
        body_size: usize,
        _num_trailers: usize,
    ) {
        let status = abi::header(abi::Map::HttpCallResponse, ":status")
            .and_then(|s| std::str::from_utf8(&s).ok()?.parse::<u16>().ok());
        // Bounded: a token answer is small, a model list's page larger; a
        // longer one is refused as such.
        let limit = if self.discovery.owns(token_id) {
            discovery::MAX_ANSWER_BYTES
        } else {
            llm_gateway_core::google_auth::MAX_ANSWER_BYTES
        };
        let body = abi::body(abi::Buffer::HttpCallResponse, 0, body_size.min(limit + 1))
            .unwrap_or_default();
        if let Some(config) = &self.config {
            if self
                .discovery
                .on_response(&WasmHost, config, token_id, status, &body)
            {
                return;
            }
        }
        self.tokens.on_response(&WasmHost, token_id, status, &body);
        // A token arrived: the requests waiting for one go on at once (those
        // of other workers at their next tick).
        callbacks::wake(self.id);
    }
}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let root_id = abi::property(&["plugin_root_id"])
            .ok()
            .flatten()
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
        let bytes = abi::body(abi::Buffer::PluginConfiguration, 0, usize::MAX).unwrap_or_default();
        match Config::parse(&bytes, |name| std::env::var(name).ok()) {
            Ok(mut config) => {
                config.loaded_at = unix_seconds(&WasmHost);
                log::info!(
                    "llm gateway ({root_id}): configured {} providers, {} model groups",
                    config.providers.len(),
                    config.model_groups.len()
                );
                if role == Role::Edge {
                    edge::prepare(&WasmHost, &config);
                    if config.self_calls.is_some() {
                        self_call::prepare(&WasmHost);
                    }
                } else {
                    google_token::configured(&WasmHost, &config);
                }
                // Vertex AI providers whose tokens the gateway obtains: the
                // upstream role fetches them, on a tick.
                // And the model lists model discovery reads.
                let fetches = role == Role::Upstream
                    && (config.discovery.is_some()
                        || config.providers.values().any(|p| {
                            p.settings::<llm_gateway_core::dialects::transport::vertex::Settings>()
                                .is_some_and(|s| s.credentials.managed())
                        }));
                let period = if fetches { TOKEN_TICK } else { Duration::ZERO };
                if let Err(status) = abi::set_tick_period(period) {
                    log::error!("llm gateway ({root_id}): no tick (status {status}): Google access tokens and model lists will not be fetched");
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

    fn on_tick(&mut self) {
        if let Some(config) = &self.config {
            self.tokens.tick(&WasmHost, config);
            self.discovery.tick(&WasmHost, config);
        }
        // Last: it changes the effective context. Requests waiting for a
        // token go on when another worker's fetch was answered, or at the
        // end of their wait.
        callbacks::wake(self.id);
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        let config = self.config.clone()?;
        Some(match self.role? {
            Role::Edge => Box::new(callbacks::SessionContext::new(
                context_id,
                Edge::new(WasmHost, config),
            )),
            Role::Upstream => Box::new(callbacks::SessionContext::new(
                context_id,
                Attempt::new(WasmHost, config),
            )),
        })
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// The sessions' [`Host`] on proxy-wasm: every call one ABI call.
#[derive(Clone, Copy)]
pub struct WasmHost;

fn map(map: Map) -> abi::Map {
    match map {
        Map::Request => abi::Map::Request,
        Map::Response => abi::Map::Response,
    }
}

fn buffer(buffer: Buffer) -> abi::Buffer {
    match buffer {
        Buffer::Request => abi::Buffer::Request,
        Buffer::Response => abi::Buffer::Response,
    }
}

impl Host for WasmHost {
    fn headers(&self, m: Map) -> Result<Headers, HostError> {
        abi::headers(map(m)).map_err(|s| HostError::new(HostCall::Headers, s))
    }
    fn header(&self, m: Map, name: &str) -> Option<Vec<u8>> {
        abi::header(map(m), name)
    }
    fn set_header(&self, m: Map, name: &[u8], value: Option<&[u8]>) -> Result<(), HostError> {
        abi::set_header(map(m), name, value).map_err(|s| HostError::new(HostCall::SetHeader, s))
    }
    fn body(&self, b: Buffer, start: usize, size: usize) -> Result<Vec<u8>, HostError> {
        abi::body(buffer(b), start, size).map_err(|s| HostError::new(HostCall::Body, s))
    }
    fn set_body(&self, b: Buffer, start: usize, size: usize, data: &[u8]) -> Result<(), HostError> {
        abi::set_body(buffer(b), start, size, data)
            .map_err(|s| HostError::new(HostCall::SetBody, s))
    }
    fn property(&self, path: &[&str]) -> Result<Option<Vec<u8>>, HostError> {
        abi::property(path).map_err(|s| HostError::new(HostCall::Property, s))
    }
    fn set_property(&self, path: &[&str], value: Option<&[u8]>) -> Result<(), HostError> {
        abi::set_property(path, value).map_err(|s| HostError::new(HostCall::SetProperty, s))
    }
    fn now(&self) -> SystemTime {
        abi::now()
    }
    fn send_response(
        &self,
        status: u16,
        headers: &[(&str, &[u8])],
        body: &[u8],
        details: &str,
    ) -> Result<(), HostError> {
        abi::send_response(status, headers, body, details)
            .map_err(|s| HostError::new(HostCall::SendResponse, s))
    }
    fn count(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError> {
        metrics::count(base, labels, value).map_err(|s| HostError::new(HostCall::Metric, s))
    }
    fn record(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError> {
        metrics::record(base, labels, value).map_err(|s| HostError::new(HostCall::Metric, s))
    }
    fn gauge(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError> {
        metrics::gauge(base, labels, value).map_err(|s| HostError::new(HostCall::Metric, s))
    }
    fn shared_data(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, HostError> {
        abi::shared_data(key).map_err(|s| HostError::new(HostCall::SharedData, s))
    }
    fn set_shared_data(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), HostError> {
        abi::set_shared_data(key, value, cas)
            .map_err(|s| HostError::new(HostCall::SetSharedData, s))
    }
    fn overhead(&self, phase: Phase, micros: u64) -> Result<(), HostError> {
        metrics::overhead(phase, micros).map_err(|s| HostError::new(HostCall::Metric, s))
    }
    fn reset_stream(&self) -> Result<(), HostError> {
        abi::reset_stream().map_err(|s| HostError::new(HostCall::ResetStream, s))
    }
    fn http_call(
        &self,
        cluster: &str,
        headers: &[(&str, &[u8])],
        body: &[u8],
        timeout_ms: u32,
    ) -> Result<u32, HostError> {
        abi::http_call(
            cluster,
            headers,
            body,
            Duration::from_millis(u64::from(timeout_ms)),
        )
        .map_err(|s| HostError::new(HostCall::HttpCall, s))
    }
    fn random(&self, out: &mut [u8]) -> Result<(), HostError> {
        abi::random(out).map_err(|s| HostError::new(HostCall::Random, s))
    }
}
