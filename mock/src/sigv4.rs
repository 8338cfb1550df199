//! AWS Signature Version 4 verification, as Bedrock does it: the mock
//! recomputes the signature of what it RECEIVED (path, headers, body) with
//! known test credentials. SHA-256 and HMAC are written out here (std only).

use std::fmt::Write;

use crate::http::Request;

/// Test credentials the mock checks signatures against (`--aws-credentials ID:SECRET`).
#[derive(Debug, Clone, PartialEq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl Credentials {
    pub fn parse(arg: &str) -> Option<Credentials> {
        let (id, secret) = arg.split_once(':')?;
        (!id.is_empty() && !secret.is_empty()).then(|| Credentials {
            access_key_id: id.to_owned(),
            secret_access_key: secret.to_owned(),
        })
    }
}

/// What the mock's Bedrock checks signatures against: the credentials and
/// the regions it serves (`--aws-region`).
#[derive(Debug, Clone, PartialEq)]
pub struct Verifier {
    pub credentials: Credentials,
    pub regions: Vec<String>,
}

/// The service name Bedrock's SigV4 scope must carry (the signing name of
/// bedrock-runtime is `bedrock`: docs.aws.amazon.com/bedrock/latest/userguide/
/// inference-invoke.html; "Credential should be scoped to correct service").
pub const SERVICE: &str = "bedrock";
/// How far x-amz-date may be from now (SigV4: "within 5 minutes",
/// docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-troubleshooting.html).
const MAX_SKEW_SECS: u64 = 5 * 60;

/// Why a request's signature was refused (AWS's message says which).
#[derive(Debug, PartialEq)]
pub enum Refusal {
    Missing,
    UnknownKey,
    BadSignature(String),
    /// A scope, date or signed-header rule broken; AWS's own message.
    Rule(String),
}

impl Refusal {
    pub fn message(&self) -> String {
        match self {
            Refusal::Missing => "Missing Authentication Token".into(),
            Refusal::UnknownKey => "The security token included in the request is invalid.".into(),
            Refusal::Rule(m) => m.clone(),
            Refusal::BadSignature(why) => format!(
                "The request signature we calculated does not match the signature you provided. \
                 Check your AWS Secret Access Key and signing method. ({why})"
            ),
        }
    }
}

impl Verifier {
    /// Every SigV4 rule Bedrock applies, `now` in Unix seconds: scope
    /// service and region, date window, `host` and `x-amz-content-sha256`
    /// signed, the payload hash that of the body (no UNSIGNED-PAYLOAD),
    /// then the signature itself.
    pub fn check(&self, req: &Request, now: u64) -> Result<(), Refusal> {
        let fields = auth_fields(req)?;
        let field = |name: &str| auth_field(fields, name);
        let rule = |m: &str| Refusal::Rule(m.to_owned());
        let credential = field("Credential").unwrap_or("");
        let mut scope = credential.split('/').skip(1);
        let (date, region, service) = (
            scope.next().unwrap_or(""),
            scope.next().unwrap_or(""),
            scope.next().unwrap_or(""),
        );
        if service != SERVICE {
            return Err(rule(&format!(
                "Credential should be scoped to correct service: '{SERVICE}'. "
            )));
        }
        if !self.regions.iter().any(|r| r == region) {
            return Err(rule(&format!(
                "Credential should be scoped to a valid region, not '{region}'. "
            )));
        }
        let amz_date = req.header("x-amz-date").unwrap_or("");
        let Some(signed_at) = parse_amz_date(amz_date) else {
            return Err(rule("Missing or invalid x-amz-date header."));
        };
        if amz_date.get(..8) != Some(date) {
            return Err(rule(&format!(
                "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '{date}' != '{}'",
                amz_date.get(..8).unwrap_or("")
            )));
        }
        if signed_at + MAX_SKEW_SECS < now {
            return Err(rule(&format!(
                "Signature expired: {amz_date} is now earlier than {} ({} - 5 min.)",
                format_amz_date(now - MAX_SKEW_SECS),
                format_amz_date(now)
            )));
        }
        if signed_at > now + MAX_SKEW_SECS {
            return Err(rule(&format!(
                "Signature not yet current: {amz_date} is still later than {} ({} + 5 min.)",
                format_amz_date(now + MAX_SKEW_SECS),
                format_amz_date(now)
            )));
        }
        let signed: Vec<&str> = field("SignedHeaders").unwrap_or("").split(';').collect();
        for required in ["host", "x-amz-content-sha256"] {
            if !signed.contains(&required) {
                return Err(rule(&format!(
                    "'{required}' must be a 'SignedHeader' in the AWS Authorization."
                )));
            }
        }
        if req.header("x-amz-content-sha256") != Some(hex(&sha256(&req.body)).as_str()) {
            return Err(Refusal::BadSignature(
                "x-amz-content-sha256 must be the SHA-256 of the payload: Bedrock takes no \
                 UNSIGNED-PAYLOAD"
                    .into(),
            ));
        }
        verify(req, &self.credentials)
    }
}

/// `YYYYMMDDTHHMMSSZ` to Unix seconds.
pub fn parse_amz_date(s: &str) -> Option<u64> {
    if s.len() != 16 || s.get(8..9) != Some("T") || s.get(15..) != Some("Z") {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<u64>().ok();
    let (y, m, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (hh, mm, ss) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    Some(days_from_civil(y, m, d)? * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// Unix seconds to `YYYYMMDDTHHMMSSZ`.
pub fn format_amz_date(t: u64) -> String {
    let (days, secs) = (t / 86_400, t % 86_400);
    // Civil from days (H. Hinnant's algorithm), days since 1970-01-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

fn days_from_civil(y: u64, m: u64, d: u64) -> Option<u64> {
    let y = if m <= 2 { y.checked_sub(1)? } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).checked_sub(719_468)
}

/// The fields of an `AWS4-HMAC-SHA256` Authorization header.
fn auth_fields(req: &Request) -> Result<&str, Refusal> {
    req.header("authorization")
        .and_then(|auth| auth.strip_prefix("AWS4-HMAC-SHA256 "))
        .ok_or(Refusal::Missing)
}

/// One field (`Credential`, `SignedHeaders`, `Signature`) of those.
fn auth_field<'a>(fields: &'a str, name: &str) -> Option<&'a str> {
    fields
        .split(',')
        .map(str::trim)
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
}

/// Verifies an `AWS4-HMAC-SHA256` Authorization header against the request.
pub fn verify(req: &Request, creds: &Credentials) -> Result<(), Refusal> {
    let fields = auth_fields(req)?;
    let field = |name: &str| auth_field(fields, name);
    let bad = |why: &str| Refusal::BadSignature(why.to_owned());
    let credential = field("Credential").ok_or_else(|| bad("no Credential"))?;
    let signed_headers = field("SignedHeaders").ok_or_else(|| bad("no SignedHeaders"))?;
    let signature = field("Signature").ok_or_else(|| bad("no Signature"))?;
    let (key_id, scope) = credential
        .split_once('/')
        .ok_or_else(|| bad("bad Credential"))?;
    if key_id != creds.access_key_id {
        return Err(Refusal::UnknownKey);
    }
    let amz_date = req
        .header("x-amz-date")
        .ok_or_else(|| bad("no x-amz-date"))?;
    let body_hash = hex(&sha256(&req.body));
    if let Some(claimed) = req.header("x-amz-content-sha256") {
        if claimed != body_hash && claimed != "UNSIGNED-PAYLOAD" {
            return Err(bad(
                "x-amz-content-sha256 is not the hash of the body received",
            ));
        }
    }
    let payload_hash = req.header("x-amz-content-sha256").unwrap_or(&body_hash);
    let mut headers = String::new();
    for name in signed_headers.split(';') {
        let value = req
            .header(name)
            .ok_or_else(|| bad(&format!("signed header {name} is missing")))?;
        let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
        let _ = writeln!(headers, "{name}:{value}");
    }
    let canonical_request = format!(
        "{}\n{}\n{}\n{headers}\n{signed_headers}\n{payload_hash}",
        req.method(),
        canonical_uri(req.path()),
        canonical_query(req.query()),
    );
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex(&sha256(canonical_request.as_bytes()))
    );
    let want = sign(&creds.secret_access_key, scope, &string_to_sign)
        .ok_or_else(|| bad("bad credential scope"))?;
    if want == signature {
        Ok(())
    } else {
        Err(bad("signature mismatch"))
    }
}

/// The signature for a scope `date/region/service/aws4_request`.
fn sign(secret: &str, scope: &str, string_to_sign: &str) -> Option<String> {
    let mut parts = scope.split('/');
    let (date, region, service) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next() != Some("aws4_request") {
        return None;
    }
    let k_date = hmac_sha256(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac_sha256(&k_date, region.as_bytes());
    let k_service = hmac_sha256(&k_region, service.as_bytes());
    let k_signing = hmac_sha256(&k_service, b"aws4_request");
    Some(hex(&hmac_sha256(&k_signing, string_to_sign.as_bytes())))
}

/// Every service but S3 URI-encodes each path segment twice: the path as
/// sent (encoded once) is encoded again.
fn canonical_uri(path: &str) -> String {
    if path.is_empty() {
        return "/".into();
    }
    path.split('/')
        .map(uri_encode)
        .collect::<Vec<_>>()
        .join("/")
}

fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (uri_encode(k), uri_encode(v))
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn uri_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256 (FIPS 180-4).
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    // Padding: 0x80, zeros, then the bit length, to a multiple of 64 bytes.
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            if let (Some(slot), Ok(bytes)) = (w.get_mut(i), <[u8; 4]>::try_from(word)) {
                *slot = u32::from_be_bytes(bytes);
            }
        }
        for i in 16..64 {
            let (w15, w2, w16, w7) = (w[i - 15], w[i - 2], w[i - 16], w[i - 7]);
            let s0 = w15.rotate_right(7) ^ w15.rotate_right(18) ^ (w15 >> 3);
            let s1 = w2.rotate_right(17) ^ w2.rotate_right(19) ^ (w2 >> 10);
            w[i] = w16.wrapping_add(s0).wrapping_add(w7).wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for (k, wi) in K.iter().zip(w.iter()) {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(*k)
                .wrapping_add(*wi);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, v) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(v);
        }
    }
    let mut out = [0u8; 32];
    for (chunk, word) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&sha256(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = block.map(|b| b ^ 0x36).to_vec();
    inner.extend_from_slice(message);
    let mut outer = block.map(|b| b ^ 0x5c).to_vec();
    outer.extend_from_slice(&sha256(&inner));
    sha256(&outer)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::BufReader;

    #[test]
    fn sha256_vectors() {
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(&sha256(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(
            hex(&sha256(&[b'a'; 1000])),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        );
    }

    /// RFC 4231 test cases 1, 2 and 6 (a key longer than the block).
    #[test]
    fn hmac_vectors() {
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    fn request(raw: &str) -> Request {
        let mut req = Request::default();
        let mut sink = Vec::new();
        crate::http::read_request(&mut BufReader::new(raw.as_bytes()), &mut sink, &mut req)
            .unwrap();
        req
    }

    /// AWS's SigV4 test suite, `get-vanilla`.
    #[test]
    fn aws_get_vanilla_vector() {
        let creds =
            Credentials::parse("AKIDEXAMPLE:wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY").unwrap();
        let req = request(
            "GET / HTTP/1.1\r\nHost: example.amazonaws.com\r\nX-Amz-Date: 20150830T123600Z\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31\r\n\r\n",
        );
        assert_eq!(verify(&req, &creds), Ok(()));
        let tampered = request(
            "GET /x HTTP/1.1\r\nHost: example.amazonaws.com\r\nX-Amz-Date: 20150830T123600Z\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31\r\n\r\n",
        );
        assert!(matches!(
            verify(&tampered, &creds),
            Err(Refusal::BadSignature(_))
        ));
        let other = Credentials::parse("OTHER:x").unwrap();
        assert_eq!(verify(&req, &other), Err(Refusal::UnknownKey));
        assert_eq!(
            verify(&request("GET / HTTP/1.1\r\n\r\n"), &creds),
            Err(Refusal::Missing)
        );
    }

    #[test]
    fn amz_dates_round_trip() {
        let t = parse_amz_date("20150830T123600Z").unwrap();
        assert_eq!(t, 1_440_938_160);
        assert_eq!(format_amz_date(t), "20150830T123600Z");
        assert_eq!(parse_amz_date("20150830T123600"), None);
        assert_eq!(format_amz_date(0), "19700101T000000Z");
    }

    /// The scope, date and signed-header rules, each broken once.
    #[test]
    fn bedrock_rules() {
        let v = Verifier {
            credentials: Credentials::parse("AKID:secret").unwrap(),
            regions: vec!["us-east-1".into()],
        };
        let now = parse_amz_date("20150830T123600Z").unwrap();
        let req = |scope: &str, signed: &str, date: &str, sha: &str| {
            request(&format!(
                "POST /model/m/converse HTTP/1.1\r\nHost: h\r\nX-Amz-Date: {date}\r\nx-amz-content-sha256: {sha}\r\n\
                 Authorization: AWS4-HMAC-SHA256 Credential=AKID/{scope}/aws4_request, \
                 SignedHeaders={signed}, Signature=00\r\ncontent-length: 2\r\n\r\n{{}}"
            ))
        };
        let body_sha = hex(&sha256(b"{}"));
        let good = (
            "20150830/us-east-1/bedrock",
            "host;x-amz-content-sha256;x-amz-date",
        );
        let check = |r: Request| v.check(&r, now).unwrap_err().message();
        let m = check(req(
            "20150830/us-east-1/bedrock-runtime",
            good.1,
            "20150830T123600Z",
            &body_sha,
        ));
        assert!(m.contains("correct service: 'bedrock'"), "{m}");
        let m = check(req(
            "20150830/us-west-2/bedrock",
            good.1,
            "20150830T123600Z",
            &body_sha,
        ));
        assert!(m.contains("valid region"), "{m}");
        let m = check(req(good.0, good.1, "20150830T122000Z", &body_sha));
        assert!(
            m.starts_with(
                "Signature expired: 20150830T122000Z is now earlier than 20150830T123100Z"
            ),
            "{m}"
        );
        let m = check(req(
            good.0,
            "x-amz-date;x-amz-content-sha256",
            "20150830T123600Z",
            &body_sha,
        ));
        assert!(m.contains("'host' must be a 'SignedHeader'"), "{m}");
        let m = check(req(
            good.0,
            "host;x-amz-date",
            "20150830T123600Z",
            &body_sha,
        ));
        assert!(m.contains("'x-amz-content-sha256' must be"), "{m}");
        let m = check(req(good.0, good.1, "20150830T123600Z", "UNSIGNED-PAYLOAD"));
        assert!(m.contains("UNSIGNED-PAYLOAD"), "{m}");
        // All rules kept: only the (dummy) signature is wrong.
        let m = check(req(good.0, good.1, "20150830T123600Z", &body_sha));
        assert!(m.contains("signature mismatch"), "{m}");
    }

    #[test]
    fn paths_are_encoded_twice() {
        assert_eq!(
            canonical_uri("/model/anthropic.claude-v1%3A0/converse"),
            "/model/anthropic.claude-v1%253A0/converse"
        );
        assert_eq!(canonical_query("b=2&a=1 x"), "a=1%20x&b=2");
    }

    #[test]
    fn body_hash_must_match_the_body() {
        let creds = Credentials::parse("AKID:secret").unwrap();
        let req = request(
            "POST / HTTP/1.1\r\nHost: h\r\nX-Amz-Date: 20150830T123600Z\r\nx-amz-content-sha256: 00\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/bedrock/aws4_request, \
             SignedHeaders=host;x-amz-date, Signature=00\r\ncontent-length: 2\r\n\r\n{}",
        );
        assert!(
            matches!(verify(&req, &creds), Err(Refusal::BadSignature(m)) if m.contains("hash"))
        );
    }
}
