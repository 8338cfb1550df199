//! The state service's protocol, both sides of it: the gateway writes its
//! requests with this module (`super::remote`), the service (`state/`,
//! `llm-state`) reads them with it. HTTP/1.1, plain bytes; the whole of it
//! is in `docs/src/architecture/state-service.md`:
//!
//! - `PUT /v1/entries/{store}/{namespace}/{key}`: the body is the entry,
//!   `x-llm-ttl` its time to live in seconds, `x-llm-parent` (optional) the
//!   key of the entry it continues. 204; 413 over the service's bound.
//! - `GET` of the same path: 200 and the entry (`age`: seconds since it
//!   was stored), or 404. With `?chain=N`: the entry and up to N-1 of its
//!   parents, newest first, as frames (`application/x-llm-state-chain`:
//!   each a 4-byte big-endian length and the entry); it stops at the
//!   first parent that is not there.
//! - `DELETE` of the same path: 204, or 404 when there was none.
//! - the service's own 404 says `x-llm-state: missing` (another server's,
//!   or a misrouted one's, is not taken for a missing entry).
//! - any: 503 when the service cannot reach its Redis.
//!
//! The semantic cache's vectors (`cache::semantic_index`, quantised: one
//! signed byte a component), one partition (`semantic::Prompt::partition`:
//! the namespace and everything but the prompt's text, hashed) at a time:
//!
//! - `PUT /v1/vectors/{store}/{partition}/{id}`: the body is the vector
//!   (1 to `MAX_DIMENSIONS` bytes), `x-llm-ttl` its time to live; `id` (64
//!   hex digits) is the exact cache's key of the entry it stands for. 204.
//! - `POST /v1/vectors/{store}/{partition}/search?threshold=T`: the body
//!   is the query vector. 200 and the `id` (64 hex digits) of the live
//!   vector of that partition most similar to it, when its cosine
//!   similarity is at least `T` (`x-llm-similarity`: how close); else the
//!   service's own 404.
//!
//! `store` is a short name (`[a-z0-9_]`, 1-32), `namespace` and `key` 32
//! hex digits each (`super::Namespace`, `super::Key`): the service never
//! sees an id, a key name or a client's text in a path.

use super::{Key, Namespace};

/// Where every entry's path starts.
pub const PREFIX: &str = "/v1/entries/";
/// A `PUT`'s time to live, in seconds.
pub const TTL_HEADER: &str = "x-llm-ttl";
/// A `PUT`'s parent: the key (hex) of the entry it continues.
pub const PARENT_HEADER: &str = "x-llm-parent";
/// On the service's own 404 (`missing`): told apart from another
/// server's, or Envoy's.
pub const STATE_HEADER: &str = "x-llm-state";
pub const MISSING: &str = "missing";
/// A chain's content type.
pub const CHAIN_TYPE: &str = "application/x-llm-state-chain";
/// The longest store name.
pub const MAX_STORE_NAME: usize = 32;

/// The longest vector (its dimensions, one byte each).
pub const MAX_DIMENSIONS: usize = 8192;

/// Where every vector's path starts.
pub const VECTORS: &str = "/v1/vectors/";
/// A search answer's similarity (the vector found's cosine, 0 to 1).
pub const SIMILARITY_HEADER: &str = "x-llm-similarity";

/// The path that stores vector `id` (the entry's exact key) in `partition`.
pub fn vector_path(store: &str, partition: &Key, id: &[u8; 32]) -> String {
    format!("{VECTORS}{store}/{}/{}", partition.hex(), id_hex(id))
}

/// A vector's id as paths and a search's answer carry it: 64 hex digits.
pub fn id_hex(id: &[u8; 32]) -> String {
    super::hex(id)
}

/// The path that searches `partition` for a vector at least `threshold` close.
pub fn search_path(store: &str, partition: &Key, threshold: f32) -> String {
    format!(
        "{VECTORS}{store}/{}/search?threshold={threshold}",
        partition.hex()
    )
}

/// A vector's path as the service reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum VectorPath<'p> {
    /// Store vector `id` (`PUT`).
    Put {
        store: &'p str,
        partition: [u8; 16],
        id: [u8; 32],
    },
    /// Search the partition (`POST`).
    Search {
        store: &'p str,
        partition: [u8; 16],
        threshold: f32,
    },
}

/// Reads a vector request's path and query; `Err`: why it is not one.
pub fn parse_vector_path(path_and_query: &str) -> Result<VectorPath<'_>, &'static str> {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let rest = path.strip_prefix(VECTORS).ok_or("not a vector path")?;
    let mut parts = rest.split('/');
    let (Some(store), Some(partition), Some(last), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("a vector path is /v1/vectors/{store}/{partition}/{id or search}");
    };
    let store = store_name(store)?;
    let partition = parse_hex(partition).ok_or("a partition is 32 hex digits")?;
    if last == "search" {
        let threshold = match query.split_once('=') {
            Some(("threshold", t)) => t.parse::<f32>().ok(),
            _ => None,
        };
        let threshold = threshold
            .filter(|t| *t > 0.0 && *t <= 1.0)
            .ok_or("a search's only query is threshold=T, above 0 and at most 1")?;
        return Ok(VectorPath::Search {
            store,
            partition,
            threshold,
        });
    }
    if !query.is_empty() {
        return Err("a vector's path has no query");
    }
    let id = parse_hex_32(last).ok_or("a vector's id is 64 hex digits")?;
    Ok(VectorPath::Put {
        store,
        partition,
        id,
    })
}

/// A vector's body: one signed byte a component, 1 to `MAX_DIMENSIONS`.
pub fn vector_body(components: &[i8]) -> Vec<u8> {
    components.iter().map(|&c| c as u8).collect()
}

/// Whether `body` is a vector's (its length is its dimensions).
pub fn is_vector(body: &[u8]) -> bool {
    !body.is_empty() && body.len() <= MAX_DIMENSIONS
}

/// The path of entry `key` of `namespace` in `store`.
pub fn entry_path(store: &str, namespace: &Namespace, key: &Key) -> String {
    format!("{PREFIX}{store}/{}/{}", namespace.hex(), key.hex())
}

/// The path that reads entry `key` and up to `max - 1` of its parents.
pub fn chain_path(store: &str, namespace: &Namespace, key: &Key, max: usize) -> String {
    format!("{}?chain={max}", entry_path(store, namespace, key))
}

/// An entry's path as the service reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPath<'p> {
    pub store: &'p str,
    pub namespace: [u8; 16],
    pub key: [u8; 16],
    /// `?chain=N`: the entry and up to N-1 of its parents.
    pub chain: Option<usize>,
}

/// Reads a request's path and query; `Err`: why it is not one of ours.
pub fn parse_path(path_and_query: &str) -> Result<EntryPath<'_>, &'static str> {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let rest = path.strip_prefix(PREFIX).ok_or("not an entry path")?;
    let mut parts = rest.split('/');
    let (Some(store), Some(namespace), Some(key), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("an entry path is /v1/entries/{store}/{namespace}/{key}");
    };
    let store = store_name(store)?;
    let namespace = parse_hex(namespace).ok_or("a namespace is 32 hex digits")?;
    let key = parse_hex(key).ok_or("a key is 32 hex digits")?;
    let mut chain = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("chain", n)) => {
                let n = n.parse::<usize>().ok().filter(|&n| n > 0);
                chain = Some(n.ok_or("chain is a count of entries, at least 1")?);
            }
            _ => return Err("the only query is chain=N"),
        }
    }
    Ok(EntryPath {
        store,
        namespace,
        key,
        chain,
    })
}

fn store_name(store: &str) -> Result<&str, &'static str> {
    let named = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_';
    if store.is_empty() || store.len() > MAX_STORE_NAME || !store.bytes().all(named) {
        return Err("a store is named by 1-32 of [a-z0-9_]");
    }
    Ok(store)
}

/// 32 hex digits.
pub fn parse_hex(text: &str) -> Option<[u8; 16]> {
    hex_bytes(text)
}

/// 64 hex digits (a vector's id).
pub fn parse_hex_32(text: &str) -> Option<[u8; 32]> {
    hex_bytes(text)
}

fn hex_bytes<const N: usize>(text: &str) -> Option<[u8; N]> {
    // Digits only: `from_str_radix` alone takes a sign (`+f`).
    if text.len() != 2 * N || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(text.as_bytes().chunks(2)) {
        let digits = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(digits, 16).ok()?;
    }
    Some(out)
}

/// Appends one entry to a chain's body.
pub fn write_frame(out: &mut Vec<u8>, entry: &[u8]) {
    let len = u32::try_from(entry.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(entry.get(..len as usize).unwrap_or(entry));
}

/// The entries of a chain's body, newest first; `None` for a body that is
/// not one (cut short).
pub fn read_frames(mut body: &[u8]) -> Option<Vec<&[u8]>> {
    let mut entries = Vec::new();
    while !body.is_empty() {
        let (len, rest) = body.split_first_chunk::<4>()?;
        let len = u32::from_be_bytes(*len) as usize;
        if rest.len() < len {
            return None;
        }
        let (entry, rest) = rest.split_at(len);
        entries.push(entry);
        body = rest;
    }
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_back_what_the_gateway_writes() {
        let ns = Namespace::of_key("team-a");
        let key = Key::new("llm_responses", &ns, b"resp_gw1");
        let path = chain_path("llm_responses", &ns, &key, 1024);
        let read = parse_path(&path).unwrap();
        assert_eq!(read.store, "llm_responses");
        assert_eq!(read.namespace.as_slice(), &ns.0);
        assert_eq!(&read.key, key.as_bytes());
        assert_eq!(read.chain, Some(1024));
        assert_eq!(parse_path(&entry_path("s", &ns, &key)).unwrap().chain, None);
        for bad in [
            "/v1/entries/s/00/11",
            "/v1/other/s/00000000000000000000000000000000/00000000000000000000000000000000",
            "/v1/entries/S/00000000000000000000000000000000/00000000000000000000000000000000",
            "/v1/entries/s/0000000000000000000000000000000g/00000000000000000000000000000000",
            "/v1/entries/s/+f+f+f+f+f+f+f+f+f+f+f+f+f+f+f+f/00000000000000000000000000000000",
            "/v1/entries/s/00000000000000000000000000000000/00000000000000000000000000000000/x",
            "/v1/entries/s/00000000000000000000000000000000/00000000000000000000000000000000?chain=0",
            "/v1/entries/s/00000000000000000000000000000000/00000000000000000000000000000000?x=1",
        ] {
            assert!(parse_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn vector_paths_read_back_what_the_gateway_writes() {
        let ns = Namespace::of_key("team-a");
        let partition = Key::new("llm_semantic", &ns, b"rest");
        let id = [7u8; 32];
        assert_eq!(
            parse_vector_path(&vector_path("llm_semantic", &partition, &id)),
            Ok(VectorPath::Put {
                store: "llm_semantic",
                partition: *partition.as_bytes(),
                id
            })
        );
        assert_eq!(
            parse_vector_path(&search_path("llm_semantic", &partition, 0.95)),
            Ok(VectorPath::Search {
                store: "llm_semantic",
                partition: *partition.as_bytes(),
                threshold: 0.95
            })
        );
        let p = partition.hex();
        for bad in [
            format!("/v1/vectors/s/{p}/search"),
            format!("/v1/vectors/s/{p}/search?threshold=0"),
            format!("/v1/vectors/s/{p}/search?threshold=1.5"),
            format!("/v1/vectors/s/{p}/search?other=0.5"),
            format!("/v1/vectors/s/{p}/{}", "0".repeat(32)),
            format!("/v1/vectors/s/{p}/{}?x=1", "0".repeat(64)),
            format!("/v1/vectors/S/{p}/{}", "0".repeat(64)),
            format!("/v1/vectors/s/{}/search?threshold=0.5", "0".repeat(31)),
            format!("/v1/entries/s/{p}/{p}"),
        ] {
            assert!(parse_vector_path(&bad).is_err(), "{bad}");
        }
        assert!(is_vector(&vector_body(&[1, -1, 127])));
        assert!(!is_vector(b""));
        assert!(!is_vector(&vec![0u8; MAX_DIMENSIONS + 1]));
    }

    #[test]
    fn frames_carry_entries_and_a_cut_body_is_none() {
        let mut body = Vec::new();
        for entry in [&b"first"[..], b"", b"third"] {
            write_frame(&mut body, entry);
        }
        assert_eq!(
            read_frames(&body).unwrap(),
            [&b"first"[..], &b""[..], &b"third"[..]]
        );
        assert_eq!(read_frames(&body[..body.len() - 1]), None);
        assert_eq!(read_frames(&body[..2]), None);
        assert_eq!(read_frames(b"").unwrap().len(), 0);
    }
}
