//! Keeps a provider's key out of everything the gateway passes on from that
//! provider. Vendors quote what they were sent back (in error messages,
//! `param`, debug fields, stream error events, echoing response headers), so
//! every byte we send a client from a vendor answer (bodies, stream chunks,
//! errors made from them, header values) goes through [`Redactor::scrub`].
//! The key is looked for as sent and in its obvious encodings: base64
//! (standard and URL-safe, of the key and of `Bearer <key>`) and
//! percent-encoding.

use crate::base64;

const MASK: &[u8] = b"[REDACTED]";

/// Keys shorter than this are not looked for: too many false hits.
const MIN_SECRET: usize = 4;

#[derive(Default, Clone, PartialEq, Eq)]
pub struct Redactor {
    /// The forms of the key to find, longest first.
    forms: Vec<Vec<u8>>,
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
            crate::url::encode_segment(secret).into_bytes(),
        ];
        for text in [secret.to_owned(), format!("Bearer {secret}")] {
            for alphabet in [base64::STANDARD, base64::URL_SAFE] {
                forms.push(base64::encode(text.as_bytes(), alphabet));
            }
        }
        forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        forms.dedup();
        Self { forms }
    }

    /// Replaces every form of the key in `bytes`; returns whether it did.
    pub fn scrub(&self, bytes: &mut Vec<u8>) -> bool {
        let mut changed = false;
        for form in &self.forms {
            if let Some(first) = find(bytes, form) {
                *bytes = replace_from(bytes, form, first);
                changed = true;
            }
        }
        changed
    }

    /// [`Redactor::scrub`] for a value we hold as bytes, copied only when it
    /// holds the key.
    pub fn scrubbed(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        self.forms
            .iter()
            .any(|f| find(bytes, f).is_some())
            .then(|| {
                let mut out = bytes.to_vec();
                self.scrub(&mut out);
                out
            })
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, _) = needle.split_first()?;
    let last_start = haystack.len().checked_sub(needle.len())?;
    let mut at = 0;
    while at <= last_start {
        let rest = haystack.get(at..=last_start)?;
        let offset = rest.iter().position(|&b| b == first)?;
        at += offset;
        if haystack.get(at..at + needle.len()) == Some(needle) {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// `bytes` with every occurrence of `needle` from `first` on masked.
fn replace_from(bytes: &[u8], needle: &[u8], first: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    let mut next = Some(first);
    while let Some(at) = next {
        out.extend_from_slice(rest.get(..at).unwrap_or_default());
        out.extend_from_slice(MASK);
        rest = rest.get(at + needle.len()..).unwrap_or_default();
        next = find(rest, needle);
    }
    out.extend_from_slice(rest);
    out
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
    fn no_key_no_work() {
        let r = Redactor::new(None);
        assert_eq!(r.scrubbed(b"anything"), None);
        assert_eq!(Redactor::new(Some("abc")), Redactor::default());
        let r = Redactor::new(Some("secret-key"));
        assert_eq!(r.scrubbed(b"no"), None);
        assert_eq!(r.scrubbed(b"a secret-key"), Some(b"a [REDACTED]".to_vec()));
    }
}
