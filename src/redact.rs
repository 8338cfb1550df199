//! Keeps a provider's key out of everything the gateway passes on from that
//! provider. Vendors quote what they were sent back (in error messages,
//! `param`, debug fields, stream error events, echoing response headers), so
//! every byte we send a client from a vendor answer (bodies, stream chunks,
//! errors made from them, header values) goes through [`Redactor::scrub`].
//! The key is looked for as sent and in its obvious encodings: base64
//! (standard and URL-safe, of the key and of `Bearer <key>`) and
//! percent-encoding.

use crate::formats::base64;

const MASK: &[u8] = b"[REDACTED]";

/// Keys shorter than this are not looked for: too many false hits.
const MIN_SECRET: usize = 4;

#[derive(Default, Clone, PartialEq, Eq)]
pub struct Redactor {
    /// The forms of the key to find, longest first, so the longest form
    /// starting at a byte is the one masked.
    forms: Vec<Vec<u8>>,
    /// The bytes any form starts with, as a 256-bit set: one pass over a
    /// body looks only at these.
    starts: [u64; 4],
}

/// Never shows the key: a `Debug` of the configuration holds this.
impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redactor(..)")
    }
}

impl Redactor {
    pub fn new(secret: Option<&str>) -> Self {
        let Some(secret) = secret.filter(|s| s.len() >= MIN_SECRET) else {
            return Self::default();
        };
        let mut forms = vec![
            secret.as_bytes().to_vec(),
            crate::formats::url::encode_segment(secret).into_bytes(),
        ];
        for text in [secret.to_owned(), format!("Bearer {secret}")] {
            for alphabet in [base64::STANDARD, base64::URL_SAFE] {
                forms.push(base64::encode(text.as_bytes(), alphabet));
            }
        }
        forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        forms.dedup();
        let mut starts = [0u64; 4];
        for &first in forms.iter().filter_map(|f| f.first()) {
            if let Some(word) = starts.get_mut(usize::from(first >> 6)) {
                *word |= 1 << (first & 63);
            }
        }
        Self { forms, starts }
    }

    /// Replaces every form of the key in `bytes`, in one pass; returns
    /// whether it did. Copies nothing when the key is not there.
    pub fn scrub(&self, bytes: &mut Vec<u8>) -> bool {
        let Some(first) = self.next_match(bytes, 0) else {
            return false;
        };
        let mut out = Vec::with_capacity(bytes.len());
        let mut copied = 0;
        let mut next = Some(first);
        while let Some((at, len)) = next {
            out.extend_from_slice(bytes.get(copied..at).unwrap_or_default());
            out.extend_from_slice(MASK);
            copied = at + len;
            next = self.next_match(bytes, copied);
        }
        out.extend_from_slice(bytes.get(copied..).unwrap_or_default());
        *bytes = out;
        true
    }

    /// [`Redactor::scrub`] for a value we hold as bytes, copied only when it
    /// holds the key.
    pub fn scrubbed(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        self.next_match(bytes, 0)?;
        let mut out = bytes.to_vec();
        self.scrub(&mut out);
        Some(out)
    }

    fn starts_a_form(&self, byte: u8) -> bool {
        self.starts
            .get(usize::from(byte >> 6))
            .is_some_and(|word| word & (1 << (byte & 63)) != 0)
    }

    /// The first form found at or after `from`: where, and how long.
    fn next_match(&self, haystack: &[u8], from: usize) -> Option<(usize, usize)> {
        if self.forms.is_empty() {
            return None;
        }
        let mut at = from;
        loop {
            at += haystack
                .get(at..)?
                .iter()
                .position(|&b| self.starts_a_form(b))?;
            let rest = haystack.get(at..)?;
            if let Some(form) = self.forms.iter().find(|f| rest.starts_with(f)) {
                return Some((at, form.len()));
            }
            at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrub(r: &Redactor, s: &str) -> String {
        let mut b = s.as_bytes().to_vec();
        r.scrub(&mut b);
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn masks_the_key_everywhere_it_appears() {
        let r = Redactor::new(Some("sk-abc123"));
        assert_eq!(
            scrub(&r, r#"{"message":"bad key sk-abc123","param":"sk-abc123"}"#),
            r#"{"message":"bad key [REDACTED]","param":"[REDACTED]"}"#
        );
        assert_eq!(scrub(&r, "fine"), "fine");
        assert_eq!(scrub(&r, "sk-abc12"), "sk-abc12");
    }

    #[test]
    fn masks_obvious_encodings() {
        let key = "sk-mock/key+1";
        let r = Redactor::new(Some(key));
        for encoded in [
            "c2stbW9jay9rZXkrMQ",          // base64
            "QmVhcmVyIHNrLW1vY2sva2V5KzE", // base64 of "Bearer sk-mock/key+1"
            "sk-mock%2Fkey%2B1",           // percent-encoded
        ] {
            assert_eq!(
                scrub(&r, &format!("x{encoded}x")),
                "x[REDACTED]x",
                "{encoded}"
            );
        }
    }

    #[test]
    fn masks_adjacent_and_overlapping_forms_in_one_pass() {
        let key = "sk-abc123";
        let r = Redactor::new(Some(key));
        let b64 = "c2stYWJjMTIz";
        assert_eq!(scrub(&r, &format!("{key}{key}")), "[REDACTED][REDACTED]");
        assert_eq!(
            scrub(&r, &format!("a{key}b{b64}c{key}")),
            "a[REDACTED]b[REDACTED]c[REDACTED]"
        );
        // The key inside its own percent-encoded form: the longer form wins.
        let r = Redactor::new(Some("sk/x1"));
        assert_eq!(scrub(&r, "sk%2Fx1 sk/x1"), "[REDACTED] [REDACTED]");
        assert_eq!(scrub(&r, "sk/x"), "sk/x");
    }

    #[test]
    fn no_key_no_work() {
        let r = Redactor::new(None);
        assert_eq!(r.scrubbed(b"anything"), None);
        assert_eq!(Redactor::new(Some("abc")), Redactor::default());
        let r = Redactor::new(Some("secret-key"));
        assert_eq!(r.scrubbed(b"no"), None);
        assert_eq!(r.scrubbed(b"a secret-key"), Some(b"a [REDACTED]".to_vec()));
    }
}
