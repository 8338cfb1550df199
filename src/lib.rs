//! The core of an LLM API gateway that runs inside Envoy: client surfaces,
//! vendor dialects, routing, limits and the request sessions. It knows no
//! proxy: the sessions drive Envoy through the fallible
//! [`session::host::Host`] trait, which the two host crates implement
//! (`hosts/wasm`, a proxy-wasm filter; `hosts/native`, a dynamic module), so
//! everything here is pure Rust, tested natively and under wasm32-wasip1.

#![forbid(unsafe_code)]

pub mod auth;
pub mod cache;
pub mod catalog;
pub mod config;
pub mod diagnostics;
pub mod dialects;
pub mod discovery;
pub mod error;
pub mod fitting;
pub mod formats;
pub mod google_auth;
pub mod headers;
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
pub mod surfaces;
pub mod wire;
