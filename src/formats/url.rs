//! One URL path segment, escaped and unescaped: vendor paths carry model
//! and deployment names (which may come from a client), `/v1/models/{id}`
//! carries a group name, and a key may reach a vendor echo percent-encoded.

/// `name` made safe as one path segment: everything but the unreserved
/// characters (`A-Za-z0-9-._~`) percent-encoded.
pub fn encode_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A path segment percent-decoded (invalid escapes kept as they are; bytes
/// that are not UTF-8 read lossily).
pub fn decode_segment(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_round_trip() {
        for name in [
            "mock-gemini",
            "arn:aws:bedrock:us-east-1:1:x/y",
            "a b%é",
            "../x?y",
        ] {
            assert_eq!(decode_segment(&encode_segment(name)), name);
        }
        assert_eq!(encode_segment("../x?y"), "..%2Fx%3Fy");
        assert_eq!(decode_segment("mock%2Dgemini"), "mock-gemini");
        assert_eq!(decode_segment("100%"), "100%", "an escape cut short stays");
        assert_eq!(decode_segment("%zz"), "%zz");
    }
}
