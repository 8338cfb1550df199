//! Base64 both ways, without a dependency: the encoded forms of a key the
//! redactor masks, and the payloads of Bedrock's InvokeModel stream.

pub const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64 without padding: the padded form contains it.
pub fn encode(input: &[u8], alphabet: &[u8; 64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            let sextet = (n >> (18 - 6 * i)) & 63;
            out.push(alphabet.get(sextet as usize).copied().unwrap_or(b'='));
        }
    }
    out
}

/// Standard base64 with its padding (what vendors and clients expect).
pub fn encode_padded(input: &[u8]) -> String {
    let mut text = encode(input, STANDARD);
    text.resize(text.len().div_ceil(4) * 4, b'=');
    String::from_utf8(text).unwrap_or_default()
}

/// Standard base64 text as base64url without padding (`+/` as `-_`), for
/// values that must stay in `[A-Za-z0-9_-]` (ids, JWT parts).
pub fn standard_to_url_safe(text: &str) -> String {
    text.chars()
        .filter_map(|c| match c {
            '+' => Some('-'),
            '/' => Some('_'),
            '=' => None,
            c => Some(c),
        })
        .collect()
}

/// base64url (padding optional) back as padded standard base64 text.
pub fn url_safe_to_standard(text: &str) -> String {
    let mut standard: String = text
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while !standard.len().is_multiple_of(4) {
        standard.push('=');
    }
    standard
}

/// Standard base64 (padding optional); `None` for any other byte.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_without_padding_and_decodes_with_or_without() {
        assert_eq!(encode(b"Man", STANDARD), b"TWFu");
        assert_eq!(encode(b"Ma", STANDARD), b"TWE");
        assert_eq!(encode(b"\xfb\xff", URL_SAFE), b"-_8");
        assert_eq!(standard_to_url_safe("+/8="), "-_8");
        assert_eq!(url_safe_to_standard("-_8"), "+/8=");
        let standard = encode_padded(b"\xfb\xff\x00\x01");
        assert_eq!(
            url_safe_to_standard(&standard_to_url_safe(&standard)),
            standard
        );
        assert_eq!(decode("aGk=").unwrap(), b"hi");
        assert_eq!(decode("aGk").unwrap(), b"hi");
        assert_eq!(decode("eyJhIjoxfQ==").unwrap(), br#"{"a":1}"#);
        assert_eq!(decode("").unwrap(), b"");
        assert!(decode("a b").is_none());
        assert!(decode("-_8").is_none(), "the standard alphabet only");
    }
}
