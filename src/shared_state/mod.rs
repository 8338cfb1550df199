//! State the gateway keeps beyond one request, shared by every worker of a
//! proxy and, with the state service, by a fleet of proxies.
//!
//! - [`cas`]: the proxy's shared memory with compare-and-swap, what the
//!   in-process stores and the rate limit counters are made of.

pub mod cas;
