//! The HTTP callouts a session has out at once (see `host`, "Callouts"): a
//! bounded set of tokens, each with what the session needs to read its
//! answer. A session sends a [`Callout`] when there is room, and takes its
//! tag back when the answer comes (`Session::on_callout`).

use super::host::{Host, HostError};

/// One HTTP request to an Envoy cluster.
pub struct Callout<'a> {
    pub cluster: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub authority: &'a str,
    /// The other headers (no pseudo-headers).
    pub headers: &'a [(&'a str, &'a [u8])],
    pub body: &'a [u8],
    pub timeout_ms: u32,
}

/// The callouts out, with their tags, at most `limit` at once.
pub struct Callouts<T> {
    out: Vec<(u32, T)>,
    limit: usize,
}

impl<T> Callouts<T> {
    /// At most `limit` out at once (at least one).
    pub fn new(limit: usize) -> Self {
        Self {
            out: Vec::new(),
            limit: limit.max(1),
        }
    }

    /// Another may be sent now.
    pub fn has_room(&self) -> bool {
        self.out.len() < self.limit
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Callout `token` is one of these.
    pub fn waits_for(&self, token: u32) -> bool {
        self.out.iter().any(|(t, _)| *t == token)
    }

    /// Sends `call`, its answer to be told apart by `tag`. A call the host
    /// refuses (an unknown cluster) is not out.
    pub fn send(&mut self, host: &impl Host, call: &Callout, tag: T) -> Result<(), HostError> {
        let mut headers: Vec<(&str, &[u8])> = Vec::with_capacity(call.headers.len() + 3);
        headers.extend([
            (":method", call.method.as_bytes()),
            (":path", call.path.as_bytes()),
            (":authority", call.authority.as_bytes()),
        ]);
        headers.extend_from_slice(call.headers);
        let token = host.http_call(call.cluster, &headers, call.body, call.timeout_ms)?;
        self.out.push((token, tag));
        Ok(())
    }

    /// The tag of the callout `token` answers, no longer out (`None`: not
    /// one of these).
    pub fn answered(&mut self, token: u32) -> Option<T> {
        let at = self.out.iter().position(|(t, _)| *t == token)?;
        Some(self.out.swap_remove(at).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::fake::FakeHost;

    #[test]
    fn callouts_are_bounded_and_told_apart_by_token() {
        let host = FakeHost::new();
        let mut callouts = Callouts::new(2);
        let call = Callout {
            cluster: "self",
            method: "POST",
            path: "/v1/embeddings",
            authority: "gateway",
            headers: &[("content-type", b"application/json")],
            body: b"{}",
            timeout_ms: 1000,
        };
        assert!(callouts.has_room() && callouts.is_empty());
        callouts.send(&host, &call, "first").unwrap();
        callouts.send(&host, &call, "second").unwrap();
        assert!(!callouts.has_room());
        let sent = host.http_calls.borrow();
        assert_eq!(sent.len(), 2);
        let (cluster, headers, body) = &sent[0];
        assert_eq!(cluster, "self");
        assert_eq!(
            headers[..4],
            [
                (":method".to_owned(), "POST".to_owned()),
                (":path".to_owned(), "/v1/embeddings".to_owned()),
                (":authority".to_owned(), "gateway".to_owned()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ]
        );
        assert_eq!(body, b"{}");
        drop(sent);
        assert_eq!(callouts.answered(2), Some("second"));
        assert_eq!(callouts.answered(2), None, "answered once");
        assert!(callouts.has_room());
        assert_eq!(callouts.answered(1), Some("first"));
        assert!(callouts.is_empty());
    }

    #[test]
    fn a_refused_call_is_not_out() {
        let host = FakeHost::new();
        host.fail("http_call", None);
        let mut callouts = Callouts::new(1);
        let call = Callout {
            cluster: "nowhere",
            method: "GET",
            path: "/",
            authority: "x",
            headers: &[],
            body: b"",
            timeout_ms: 1,
        };
        assert!(callouts.send(&host, &call, ()).is_err());
        assert!(callouts.is_empty() && callouts.has_room());
    }
}
