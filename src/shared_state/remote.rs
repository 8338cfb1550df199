//! The fleet-wide store: the state service (`state/`, `llm-state`) over
//! Redis, reached through an Envoy cluster with HTTP callouts. This module
//! is what the gateway says and what it makes of the answers, apart from
//! how a session sends them (`session::edge`): every call is a [`Call`]
//! (method, path, headers, body) and every answer a [`Reply`].
//!
//! A store that is down or slow never fails a request: the callout's
//! timeout bounds the wait (`timeout_ms`), and anything but the service's
//! own answer (a refused connection, Envoy's 503 or 504, the service's 503
//! for a lost Redis, an answer that is not the protocol's) is
//! [`Reply::Unavailable`]: the caller goes on without the shared store.

use serde::Deserialize;

use super::protocol::{self, CHAIN_TYPE, MISSING, PARENT_HEADER, STATE_HEADER, TTL_HEADER};
use super::{Key, Namespace};
use crate::headers::Headers;

/// How to reach the state service (configuration `shared_state.service`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// The Envoy cluster of the state service.
    pub cluster: String,
    /// The `:authority` of its requests (the cluster's name by default).
    #[serde(default)]
    pub authority: Option<String>,
    /// How long a call may take before the request goes on without it.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u32,
    /// A failing service is logged at most once in this many seconds
    /// (every failure is counted: `llm_gateway.shared_state`).
    #[serde(default = "default_log_interval")]
    pub log_interval_seconds: u64,
}

fn default_timeout_ms() -> u32 {
    25
}

fn default_log_interval() -> u64 {
    60
}

impl Service {
    /// The configuration's check (`shared_state.service.*`).
    pub fn validate(&self) -> Result<(), String> {
        if self.cluster.is_empty() {
            return Err("shared_state.service.cluster: name the state service's cluster".into());
        }
        if self.timeout_ms == 0 || self.timeout_ms > 60_000 {
            return Err("shared_state.service.timeout_ms: 1 to 60000".into());
        }
        Ok(())
    }

    pub fn authority(&self) -> &str {
        self.authority.as_deref().unwrap_or(&self.cluster)
    }
}

/// What a call does, so its answer is read as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Get,
    /// An entry and up to this many of its parents, in all.
    Chain(usize),
    Put,
    Delete,
    /// A semantic cache's search of one partition for a close vector.
    Search,
    /// A semantic cache's vector stored.
    PutVector,
}

impl Op {
    /// Its name in metrics.
    pub fn name(self) -> &'static str {
        match self {
            Op::Get | Op::Chain(_) => "get",
            Op::Put => "put",
            Op::Delete => "delete",
            Op::Search => "search",
            Op::PutVector => "put_vector",
        }
    }
}

/// One call to the service.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub op: Op,
    pub method: &'static str,
    pub path: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Call {
    fn new(op: Op, method: &'static str, path: String) -> Self {
        Self {
            op,
            method,
            path,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Entry `key` of `namespace` in `store`.
    pub fn get(store: &str, namespace: &Namespace, key: &Key) -> Self {
        Self::new(Op::Get, "GET", protocol::entry_path(store, namespace, key))
    }

    /// Entry `key` and up to `max - 1` of its parents, newest first.
    pub fn chain(store: &str, namespace: &Namespace, key: &Key, max: usize) -> Self {
        let path = protocol::chain_path(store, namespace, key, max);
        Self::new(Op::Chain(max), "GET", path)
    }

    /// Stores `entry` as `key` for `ttl_seconds`, continuing `parent`.
    pub fn put(
        store: &str,
        namespace: &Namespace,
        key: &Key,
        parent: Option<&Key>,
        ttl_seconds: u64,
        entry: Vec<u8>,
    ) -> Self {
        let mut call = Self::new(Op::Put, "PUT", protocol::entry_path(store, namespace, key));
        call.headers.push((TTL_HEADER, ttl_seconds.to_string()));
        if let Some(parent) = parent {
            call.headers.push((PARENT_HEADER, parent.hex()));
        }
        call.headers
            .push(("content-type", "application/octet-stream".into()));
        call.body = entry;
        call
    }

    /// Stores `vector` (`Quantized::to_bytes`) in `partition` as `id`
    /// (the exact cache's key of its entry) for `ttl_seconds`.
    pub fn put_vector(
        store: &str,
        partition: &Key,
        id: &[u8; 32],
        ttl_seconds: u64,
        vector: Vec<u8>,
    ) -> Self {
        let path = protocol::vector_path(store, partition, id);
        let mut call = Self::new(Op::PutVector, "PUT", path);
        call.headers.push((TTL_HEADER, ttl_seconds.to_string()));
        call.headers
            .push(("content-type", "application/octet-stream".into()));
        call.body = vector;
        call
    }

    /// The id of `partition`'s vector closest to `vector`, if it is at
    /// least `threshold` close.
    pub fn search(store: &str, partition: &Key, threshold: f32, vector: Vec<u8>) -> Self {
        let path = protocol::search_path(store, partition, threshold);
        let mut call = Self::new(Op::Search, "POST", path);
        call.headers
            .push(("content-type", "application/octet-stream".into()));
        call.body = vector;
        call
    }

    pub fn delete(store: &str, namespace: &Namespace, key: &Key) -> Self {
        Self::new(
            Op::Delete,
            "DELETE",
            protocol::entry_path(store, namespace, key),
        )
    }
}

/// What the service said.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// An entry, or a chain's entries newest first (a search's: the id
    /// of the vector found, 32 bytes).
    Found(Vec<Vec<u8>>),
    /// No such entry (or none to delete).
    Missing,
    /// Stored, or deleted.
    Done,
    /// No answer of the service's: the request goes on without it.
    Unavailable,
}

/// Reads the answer to a call of `op` (`None`: the callout failed).
pub fn reply(op: Op, answer: Option<(u16, &Headers, Vec<u8>)>) -> Reply {
    let Some((status, headers, body)) = answer else {
        return Reply::Unavailable;
    };
    match (op, status) {
        (Op::Get, 200) => Reply::Found(vec![body]),
        (Op::Chain(max), 200) if headers.get("content-type") == Some(CHAIN_TYPE.as_bytes()) => {
            match protocol::read_frames(&body) {
                Some(frames) if !frames.is_empty() && frames.len() <= max => {
                    Reply::Found(frames.into_iter().map(<[u8]>::to_vec).collect())
                }
                _ => Reply::Unavailable,
            }
        }
        (Op::Search, 200) => match std::str::from_utf8(&body)
            .ok()
            .and_then(protocol::parse_hex_32)
        {
            Some(id) => Reply::Found(vec![id.to_vec()]),
            None => Reply::Unavailable,
        },
        // The service's own 404, not Envoy's or another server's.
        (Op::Get | Op::Chain(_) | Op::Delete | Op::Search, 404)
            if headers.get(STATE_HEADER) == Some(MISSING.as_bytes()) =>
        {
            Reply::Missing
        }
        (Op::Put | Op::PutVector | Op::Delete, 204) => Reply::Done,
        _ => Reply::Unavailable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> (Namespace, Key) {
        let ns = Namespace::of_key("team-a");
        (ns, Key::new("s", &ns, b"id"))
    }

    #[test]
    fn calls_speak_the_protocol() {
        let (ns, key) = key();
        let parent = Key::new("s", &ns, b"parent");
        let put = Call::put("s", &ns, &key, Some(&parent), 60, b"entry".to_vec());
        assert_eq!(put.method, "PUT");
        let read = protocol::parse_path(&put.path).unwrap();
        assert_eq!((&read.key, read.chain), (key.as_bytes(), None));
        assert!(put.headers.contains(&(TTL_HEADER, "60".into())));
        assert!(put.headers.contains(&(PARENT_HEADER, parent.hex())));
        let chain = Call::chain("s", &ns, &key, 1024);
        assert_eq!(protocol::parse_path(&chain.path).unwrap().chain, Some(1024));
        assert_eq!(Call::delete("s", &ns, &key).method, "DELETE");
    }

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        Headers(
            pairs
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
        )
    }

    #[test]
    fn only_the_services_own_answers_count() {
        let none = headers(&[]);
        let missing = headers(&[(STATE_HEADER, MISSING), ("content-type", "text/plain")]);
        let chain = headers(&[("content-type", CHAIN_TYPE)]);
        let mut frames = Vec::new();
        protocol::write_frame(&mut frames, b"two");
        protocol::write_frame(&mut frames, b"one");
        let found = |op, status, h, body: &[u8]| reply(op, Some((status, h, body.to_vec())));
        assert_eq!(
            found(Op::Get, 200, &none, b"e"),
            Reply::Found(vec![b"e".to_vec()])
        );
        assert_eq!(
            found(Op::Chain(2), 200, &chain, &frames),
            Reply::Found(vec![b"two".to_vec(), b"one".to_vec()])
        );
        // More than asked for, cut short, or not a chain: not the service's.
        assert_eq!(
            found(Op::Chain(1), 200, &chain, &frames),
            Reply::Unavailable
        );
        assert_eq!(
            found(Op::Chain(2), 200, &chain, &frames[..3]),
            Reply::Unavailable
        );
        assert_eq!(found(Op::Chain(2), 200, &none, &frames), Reply::Unavailable);
        assert_eq!(found(Op::Get, 404, &missing, b""), Reply::Missing);
        assert_eq!(found(Op::Delete, 404, &missing, b""), Reply::Missing);
        assert_eq!(found(Op::Put, 204, &none, b""), Reply::Done);
        // Envoy's own answers (no healthy host, timeout), another server's
        // 404, a failed call, a lost Redis: the service is not there.
        for status in [404, 503, 504] {
            assert_eq!(found(Op::Get, status, &none, b""), Reply::Unavailable);
        }
        assert_eq!(found(Op::Get, 503, &missing, b""), Reply::Unavailable);
        assert_eq!(reply(Op::Put, None), Reply::Unavailable);
        // A search's answer is an id, 64 hex digits, or not the service's.
        let id = "ab".repeat(32);
        assert_eq!(
            found(Op::Search, 200, &none, id.as_bytes()),
            Reply::Found(vec![vec![0xab; 32]])
        );
        assert_eq!(found(Op::Search, 200, &none, b"abab"), Reply::Unavailable);
        assert_eq!(found(Op::Search, 404, &missing, b""), Reply::Missing);
        assert_eq!(found(Op::Search, 404, &none, b""), Reply::Unavailable);
        assert_eq!(found(Op::PutVector, 204, &none, b""), Reply::Done);
        assert_eq!(found(Op::PutVector, 413, &none, b""), Reply::Unavailable);
    }

    #[test]
    fn vector_calls_speak_the_protocol() {
        let (_, partition) = key();
        let put = Call::put_vector("llm_semantic", &partition, &[1; 32], 60, vec![1, 2]);
        assert_eq!((put.method, put.op.name()), ("PUT", "put_vector"));
        assert!(put.headers.contains(&(TTL_HEADER, "60".into())));
        assert!(matches!(
            protocol::parse_vector_path(&put.path),
            Ok(protocol::VectorPath::Put { id, .. }) if id == [1; 32]
        ));
        let search = Call::search("llm_semantic", &partition, 0.9, vec![1, 2]);
        assert_eq!((search.method, search.op.name()), ("POST", "search"));
        assert!(matches!(
            protocol::parse_vector_path(&search.path),
            Ok(protocol::VectorPath::Search { threshold, .. }) if threshold == 0.9
        ));
    }

    #[test]
    fn the_service_is_configured_with_defaults_and_checked() {
        let service: Service = serde_json::from_str(r#"{"cluster":"llm_state"}"#).unwrap();
        assert_eq!(service.authority(), "llm_state");
        assert_eq!(service.timeout_ms, 25);
        assert!(service.validate().is_ok());
        let slow: Service = serde_json::from_str(r#"{"cluster":"x","timeout_ms":0}"#).unwrap();
        assert!(slow.validate().is_err());
        assert!(serde_json::from_str::<Service>(r#"{"cluster":"x","other":1}"#).is_err());
    }
}
