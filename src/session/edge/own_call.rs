//! A vendor call the edge makes for its request, while it waits, through
//! one of the gateway's own groups (the semantic cache's embedding call,
//! `edge/semantic.rs`; context fitting's summaries, `edge/summarise.rs`):
//! a request sent to the gateway's own listener (`self_calls.cluster`)
//! with the caller's own credential and the client's other headers. It is
//! any request of that key's there: authenticated, admitted by the key's
//! limits, routed, metered and charged to it. It carries no self-call
//! secret (`session::self_call`): it is not a part of its request.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::session::host::unix_seconds;

/// The headers of a call `POST path` to `group`, for the request whose
/// headers were `client`, under request id `id`.
pub(super) fn headers(
    client: &Headers,
    path: &str,
    group: &str,
    id: String,
) -> Vec<(String, Vec<u8>)> {
    let mut headers = super::batch::part_headers(client);
    // The caller's own credential: the call is its request.
    for name in ["authorization", "x-api-key", "x-goog-api-key"] {
        if let Some(value) = client.get(name) {
            headers.push((name.to_owned(), value.to_vec()));
            break;
        }
    }
    headers.extend([
        (":method".to_owned(), b"POST".to_vec()),
        (":path".to_owned(), path.as_bytes().to_vec()),
        (
            ":authority".to_owned(),
            client.get(":authority").unwrap_or(b"llm-gateway").to_vec(),
        ),
        ("content-type".to_owned(), b"application/json".to_vec()),
        ("x-request-id".to_owned(), id.into_bytes()),
        ("x-model-group".to_owned(), group.as_bytes().to_vec()),
    ]);
    headers
}

/// `headers` as the host takes them.
pub(super) fn borrowed(headers: &[(String, Vec<u8>)]) -> Vec<(&str, &[u8])> {
    (headers.iter())
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect()
}

const LOG_INTERVAL_SECONDS: u64 = 60;

/// Whether a failure last logged at `last` (Unix seconds, per worker) is
/// to be logged now: at most once a minute.
pub(super) fn log_now(host: &impl Host, last: &AtomicU64) -> bool {
    let now = unix_seconds(host);
    let then = last.load(Ordering::Relaxed);
    now.saturating_sub(then) >= LOG_INTERVAL_SECONDS
        && last
            .compare_exchange(then, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}
