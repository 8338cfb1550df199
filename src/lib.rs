//! An LLM API gateway that runs inside Envoy as a proxy-wasm filter.
//!
//! Everything but [`host`] is pure Rust, tested natively; `host` is the thin
//! glue to proxy-wasm (the edge role and the upstream role).

pub mod config;
pub mod dialects;
pub mod error;
pub mod response;
pub mod sse;
pub mod unified;

pub mod host;
