//! An LLM API gateway that runs inside Envoy as a proxy-wasm filter.
//!
//! Everything but [`host`] is pure Rust, tested natively; `host` is the thin
//! glue to proxy-wasm (the edge role and the upstream role).

pub mod auth;
pub mod base64;
pub mod cache;
pub mod catalog;
pub mod config;
pub mod date;
pub mod diagnostics;
pub mod dialects;
pub mod discovery;
pub mod error;
pub mod eventstream;
pub mod exchange;
pub mod fitting;
pub mod google_auth;
pub mod headers;
pub mod json_text;
pub mod limits;
pub mod metering;
pub mod model;
pub mod policy;
pub mod provider;
pub mod redact;
pub mod responses_store;
pub mod routing;
pub mod session;
pub mod shared_state;
pub mod sse;
pub mod surfaces;
pub mod swar;
pub mod url;
pub mod wire;
