//! Header maps as bytes, and the rules for which headers cross the gateway.
//!
//! Envoy lets bytes 0x80-0xFF (and more over HTTP/2) through in header
//! values, so nothing here assumes UTF-8: a value is text only where the
//! gateway needs text, and there a non-UTF-8 value is the client's error.
//!
//! - Toward a vendor, a client header is forwarded unless it is a
//!   credential, a cookie, an account or billing selector, a forwarding
//!   header (client addresses), or internal to the gateway or Envoy
//!   ([`vendor_may_receive`]); a provider's `forward_headers` lets named
//!   ones through.
//! - Toward the client, a vendor header is passed on only if clients use it:
//!   the content headers, rate-limit headers, `retry-after` and request ids
//!   ([`client_may_receive`]); everything else the vendor sent is dropped.

/// A header map read with one host call: (name, value) pairs as bytes.
#[derive(Default, Debug, Clone, PartialEq)]
pub struct Headers(pub Vec<(Vec<u8>, Vec<u8>)>);

impl Headers {
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(n, _)| n.as_slice() == name.as_bytes())
            .map(|(_, v)| v.as_slice())
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// A header the gateway reads as text: `Err` names it when it is not UTF-8.
    pub fn text(&self, name: &str) -> Result<Option<&str>, NotText> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => std::str::from_utf8(v)
                .map(Some)
                .map_err(|_| NotText(name.to_owned())),
        }
    }

    /// Decodes the proxy-wasm header-map serialisation: a u32 count, then
    /// (name length, value length) u32 pairs, then each name and value
    /// followed by a NUL. A malformed map yields the pairs read so far.
    pub fn deserialize(bytes: &[u8]) -> Headers {
        let u32_at = |at: usize| -> Option<usize> {
            let b = bytes.get(at..at.checked_add(4)?)?;
            Some(u32::from_le_bytes(b.try_into().ok()?) as usize)
        };
        let mut pairs = Vec::new();
        let Some(count) = u32_at(0) else {
            return Headers(pairs);
        };
        let Some(mut data) = count.checked_mul(8).and_then(|n| n.checked_add(4)) else {
            return Headers(pairs);
        };
        let mut take = |len: usize| -> Option<Vec<u8>> {
            let end = data.checked_add(len)?;
            let item = bytes.get(data..end)?.to_vec();
            data = end.checked_add(1)?;
            Some(item)
        };
        for i in 0..count {
            let (Some(name_len), Some(value_len)) = (u32_at(4 + i * 8), u32_at(8 + i * 8)) else {
                break;
            };
            let (Some(name), Some(value)) = (take(name_len), take(value_len)) else {
                break;
            };
            pairs.push((name, value));
        }
        Headers(pairs)
    }

    /// The same serialisation, for headers we send.
    pub fn serialize(pairs: &[(&str, &[u8])]) -> Vec<u8> {
        let size = 4 + pairs
            .iter()
            .map(|(n, v)| n.len() + v.len() + 10)
            .sum::<usize>();
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
        for (name, value) in pairs {
            out.extend_from_slice(&(name.len() as u32).to_le_bytes());
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        }
        for (name, value) in pairs {
            out.extend_from_slice(name.as_bytes());
            out.push(0);
            out.extend_from_slice(value);
            out.push(0);
        }
        out
    }
}

/// A header the gateway needs as text was not valid UTF-8.
#[derive(Debug, Clone, PartialEq)]
pub struct NotText(pub String);

/// Client headers that are credentials of some vendor, never forwarded.
pub const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
];

/// Client headers never forwarded to a vendor (unless a provider's
/// `forward_headers` names them), beyond [`CREDENTIAL_HEADERS`].
const WITHHELD: &[&str] = &[
    // Sessions and client addresses.
    "cookie",
    "forwarded",
    "x-real-ip",
    "true-client-ip",
    "cf-connecting-ip",
    // We must read what comes back: no compression.
    "accept-encoding",
];

/// Prefixes of client headers never forwarded (unless named in
/// `forward_headers`): the gateway's and Envoy's own, client addresses, and
/// each vendor's account, project, workspace, beta and signing headers,
/// which would let a client choose what the gateway's key bills or enables.
const WITHHELD_PREFIXES: &[&str] = &[
    "x-llm-",
    "x-envoy-",
    "x-forwarded-",
    "openai-",      // openai-organization, openai-project, openai-beta
    "anthropic-",   // anthropic-beta, anthropic-version (set by the dialect)
    "x-goog-",      // x-goog-user-project, x-goog-api-client ...
    "x-amz-",       // x-amz-security-token, x-amz-date ... (Envoy signs after us)
    "x-dashscope-", // x-dashscope-workspace ... (the dialect sets its own)
    "x-ms-",        // Azure's x-ms-* selectors
];

/// Whether a client request header may reach a vendor. `forward` is the
/// provider's `forward_headers` (lowercase names), which overrides the
/// withheld lists but never lets a credential through.
pub fn vendor_may_receive(name: &[u8], forward: &[String]) -> bool {
    if CREDENTIAL_HEADERS.iter().any(|h| h.as_bytes() == name) {
        return false;
    }
    if forward.iter().any(|h| h.as_bytes() == name) {
        return true;
    }
    !(WITHHELD.iter().any(|h| h.as_bytes() == name)
        || WITHHELD_PREFIXES
            .iter()
            .any(|p| name.starts_with(p.as_bytes())))
}

/// Vendor response headers passed on to clients.
const PASSED: &[&str] = &[
    ":status",
    "content-type",
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "cache-control",
    "date",
    "retry-after",
    "retry-after-ms",
    // The vendor's own request ids, for support tickets.
    "request-id",
    "x-request-id",
    "apim-request-id",
    "x-amzn-requestid",
    "x-goog-request-id",
    "x-dashscope-request-id",
];

/// Prefixes of vendor headers passed on: rate-limit state clients back off by.
const PASSED_PREFIXES: &[&str] = &["x-ratelimit-", "anthropic-ratelimit-", "ratelimit"];

/// Whether a vendor response header may reach the client.
pub fn client_may_receive(name: &[u8]) -> bool {
    PASSED.iter().any(|h| h.as_bytes() == name)
        || PASSED_PREFIXES
            .iter()
            .any(|p| name.starts_with(p.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_round_trip_as_bytes() {
        let value: &[u8] = b"caf\xe9";
        let bytes = Headers::serialize(&[(":path", b"/v1/x"), ("x-note", value)]);
        let headers = Headers::deserialize(&bytes);
        assert_eq!(headers.get("x-note"), Some(value));
        assert_eq!(headers.text(":path"), Ok(Some("/v1/x")));
        assert_eq!(headers.text("x-note"), Err(NotText("x-note".into())));
        assert_eq!(headers.text("missing"), Ok(None));
    }

    #[test]
    fn malformed_maps_do_not_panic() {
        let good = Headers::serialize(&[("a", b"1"), ("b", b"2")]);
        for cut in 0..good.len() {
            let h = Headers::deserialize(&good[..cut]);
            assert!(h.0.len() <= 2);
        }
        assert!(Headers::deserialize(&[0xff, 0xff, 0xff, 0xff]).0.is_empty());
        let mut huge = good.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Headers::deserialize(&huge).0.is_empty());
    }

    #[test]
    fn vendors_get_no_credentials_selectors_or_internals() {
        let none: Vec<String> = Vec::new();
        for name in [
            "authorization",
            "x-api-key",
            "cookie",
            "openai-organization",
            "openai-project",
            "x-goog-user-project",
            "x-dashscope-workspace",
            "x-amz-security-token",
            "x-forwarded-for",
            "x-llm-cluster",
            "x-envoy-expected-rq-timeout-ms",
            "anthropic-beta",
            "accept-encoding",
        ] {
            assert!(!vendor_may_receive(name.as_bytes(), &none), "{name}");
        }
        for name in ["content-type", "user-agent", "x-request-id", "traceparent"] {
            assert!(vendor_may_receive(name.as_bytes(), &none), "{name}");
        }
        let forward = vec!["openai-organization".to_owned(), "authorization".to_owned()];
        assert!(vendor_may_receive(b"openai-organization", &forward));
        assert!(
            !vendor_may_receive(b"authorization", &forward),
            "credentials never"
        );
    }

    #[test]
    fn clients_get_rate_limits_and_ids_only() {
        for name in [
            "retry-after",
            "x-ratelimit-remaining-requests",
            "anthropic-ratelimit-tokens-reset",
            "request-id",
            "content-type",
        ] {
            assert!(client_may_receive(name.as_bytes()), "{name}");
        }
        for name in [
            "set-cookie",
            "openai-organization",
            "x-debug-received-auth",
            "server",
            "cf-ray",
        ] {
            assert!(!client_may_receive(name.as_bytes()), "{name}");
        }
    }
}
