//! Google's token endpoint and the GCE metadata server, as Vertex AI's
//! callers meet them:
//! - `POST /token` (oauth2.googleapis.com, the JWT bearer grant of RFC
//!   7523 as Google documents it for service accounts): a form with
//!   `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` and an
//!   `assertion`, a JWT whose RS256 signature the mock verifies with the
//!   test service account's public key (`tests/fixtures/TEST-ONLY-...pub.pem`),
//!   whose claims must have `iss`, the cloud-platform `scope`, `aud` the
//!   token endpoint, `iat` not in the future and `exp` at most an hour
//!   after it and not past; refusals are Google's `{"error":
//!   "invalid_grant", "error_description": ...}` 400s;
//! - `GET /computeMetadata/v1/instance/service-accounts/default/token`
//!   with `Metadata-Flavor: Google` (403 without, as the metadata server).
//!
//! Both answer `{"access_token","expires_in","token_type":"Bearer"}` with
//! a token Vertex then accepts until it expires (`--google-token-ttl`
//! seconds, default 3600). `POST /_mock/google/fail?n=N` makes the next N
//! token requests fail (503), `POST /_mock/google/slow?ms=N` makes the next
//! JWT grant (`POST /token`) answer N milliseconds late, `POST /_mock/google/revoke` revokes every
//! token issued so far (Vertex then answers them 401), and `GET
//! /_mock/google` counts what was issued and refused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use ring::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};
use serde_json::{json, Value};

use crate::dialect::{to_json, Reply};
use crate::google_auth;
use crate::http::{query_param, Request};

const TEST_PUBLIC_KEY: &str =
    include_str!("../../tests/fixtures/TEST-ONLY-vertex-service-account.pub.pem");
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
const AUDIENCE: &str = "https://oauth2.googleapis.com/token";
const GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
pub const METADATA_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";

static TTL: OnceLock<u64> = OnceLock::new();
/// The public keys whose signatures the token endpoint takes (PKCS#1
/// RSAPublicKey DER).
static KEYS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
static ISSUED: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);
static FAIL_NEXT: AtomicU64 = AtomicU64::new(0);
static SLOW_NEXT_MS: AtomicU64 = AtomicU64::new(0);

/// Sets the lifetime of the tokens issued and the service accounts' public
/// keys (PEM, SPKI) trusted besides the test one (once, at start-up).
pub fn configure(ttl: Option<u64>, public_keys: &[String]) -> Result<(), String> {
    let _ = TTL.set(ttl.unwrap_or(3600).max(1));
    let mut keys = Vec::new();
    for pem in std::iter::once(TEST_PUBLIC_KEY).chain(public_keys.iter().map(String::as_str)) {
        keys.push(rsa_public_key(pem).ok_or("not an RSA public key (PEM, SubjectPublicKeyInfo)")?);
    }
    let _ = KEYS.set(keys);
    Ok(())
}

/// Whether the mock answers `path` here.
pub fn handles(path: &str) -> bool {
    path == "/token" || path == METADATA_PATH || path.starts_with("/_mock/google")
}

fn reply(status: u16, body: Value) -> Reply {
    Reply {
        status,
        body: to_json(&body),
        retry_after: None,
    }
}

fn invalid_grant(description: &str) -> Reply {
    REFUSED.fetch_add(1, Ordering::Relaxed);
    reply(
        400,
        json!({"error": "invalid_grant", "error_description": description}),
    )
}

/// A token issued now: Vertex accepts it until it expires.
fn issue(kind: &str) -> Reply {
    let n = ISSUED.fetch_add(1, Ordering::Relaxed) + 1;
    let ttl = TTL.get().copied().unwrap_or(3600);
    let token = format!("ya29.mock-{kind}-{n}-{}", google_auth::now());
    google_auth::remember(token.clone(), google_auth::now() + ttl);
    reply(
        200,
        json!({"access_token": token, "expires_in": ttl, "token_type": "Bearer"}),
    )
}

/// One failure asked for with `/_mock/google/fail`, if any is left.
fn failing() -> bool {
    FAIL_NEXT
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

pub fn answer(req: &Request) -> Reply {
    match (req.method(), req.path()) {
        ("GET", "/_mock/google") => reply(
            200,
            json!({"issued": ISSUED.load(Ordering::Relaxed), "refused": REFUSED.load(Ordering::Relaxed),
                   "failing": FAIL_NEXT.load(Ordering::Relaxed)}),
        ),
        ("POST", "/_mock/google/fail") => {
            let n = query_param(req.query(), "n")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            FAIL_NEXT.store(n, Ordering::Relaxed);
            reply(200, json!({"failing": n}))
        }
        ("POST", "/_mock/google/slow") => {
            let ms = query_param(req.query(), "ms")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1000);
            SLOW_NEXT_MS.store(ms, Ordering::Relaxed);
            reply(200, json!({"slow_ms": ms}))
        }
        ("POST", "/_mock/google/revoke") => {
            google_auth::revoke_issued();
            reply(200, json!({"revoked": true}))
        }
        ("POST", "/token") => {
            slow_down();
            if failing() {
                return reply(503, json!({"error": "temporarily_unavailable"}));
            }
            match verify(req) {
                Ok(()) => issue("sa"),
                Err(description) => invalid_grant(&description),
            }
        }
        ("GET", METADATA_PATH) => {
            if req.header("metadata-flavor") != Some("Google") {
                REFUSED.fetch_add(1, Ordering::Relaxed);
                return reply(
                    403,
                    json!({"error": "Missing Metadata-Flavor:Google header."}),
                );
            }
            if failing() {
                return reply(503, json!({"error": "temporarily_unavailable"}));
            }
            issue("md")
        }
        _ => reply(404, json!({"error": "not_found"})),
    }
}

/// The one JWT grant asked to be slow waits (on its connection's thread).
fn slow_down() {
    let ms = SLOW_NEXT_MS.swap(0, Ordering::Relaxed);
    if ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(ms.min(60_000)));
    }
}

/// `%XX` and `+` decoded.
fn form_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn b64url(text: &str) -> Option<Vec<u8>> {
    let standard: String = text
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    crate::bedrock_invoke::base64_decode(&standard)
}

/// rsaEncryption (1.2.840.113549.1.1.1), the algorithm of an RSA key.
const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// The PKCS#1 RSAPublicKey inside a PEM SubjectPublicKeyInfo (RFC 5280:
/// `SEQUENCE { SEQUENCE { rsaEncryption, NULL }, BIT STRING { key } }`).
fn rsa_public_key(pem: &str) -> Option<Vec<u8>> {
    let body = pem.split("-----BEGIN PUBLIC KEY-----").nth(1)?;
    let body = body.split("-----END PUBLIC KEY-----").next()?;
    let der =
        crate::bedrock_invoke::base64_decode(&body.split_ascii_whitespace().collect::<String>())?;
    let (0x30, info, _) = der_element(&der)? else {
        return None;
    };
    let (0x30, algorithm, rest) = der_element(info)? else {
        return None;
    };
    let (0x06, RSA_ENCRYPTION, _) = der_element(algorithm)? else {
        return None;
    };
    let (0x03, bits, _) = der_element(rest)? else {
        return None;
    };
    let (0, key) = bits.split_first()? else {
        return None;
    };
    Some(key.to_vec())
}

/// The DER element at the start of `der`: its tag, its contents and what
/// follows it.
fn der_element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        0..=0x7f => (usize::from(first), rest),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let len = rest
                .get(..n)?
                .iter()
                .fold(0, |len, b| len << 8 | usize::from(*b));
            (len, rest.get(n..)?)
        }
        _ => return None,
    };
    Some((tag, rest.get(..len)?, rest.get(len..)?))
}

/// The JWT bearer grant checked as Google checks it.
fn verify(req: &Request) -> Result<(), String> {
    let form = std::str::from_utf8(&req.body).map_err(|_| "Invalid request.".to_owned())?;
    let field = |name: &str| {
        form.split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| form_decode(v))
    };
    if field("grant_type").as_deref() != Some(GRANT) {
        return Err("Invalid grant_type.".into());
    }
    let jwt = field("assertion").ok_or("Missing required parameter: assertion")?;
    let mut parts = jwt.split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("Invalid JWT: not three segments.".into());
    };
    let header: Value = b64url(header)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("Invalid JWT header.")?;
    if header["alg"] != "RS256" {
        return Err("Invalid JWT: alg must be RS256.".into());
    }
    let signature = b64url(signature).ok_or("Invalid JWT Signature.")?;
    let signed = jwt.get(..jwt.rfind('.').unwrap_or(0)).unwrap_or_default();
    let trusted = KEYS.get().map(Vec::as_slice).unwrap_or_default();
    let valid = trusted.iter().any(|key| {
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key)
            .verify(signed.as_bytes(), &signature)
            .is_ok()
    });
    if !valid {
        return Err("Invalid JWT Signature.".into());
    }
    let claims: Value = b64url(claims)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("Invalid JWT claims.")?;
    let now = google_auth::now();
    let (iat, exp) = (claims["iat"].as_u64(), claims["exp"].as_u64());
    match (iat, exp) {
        (Some(iat), Some(exp)) if iat <= now + 60 && exp > now && exp > iat && exp - iat <= 3600 => {}
        _ => return Err("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.".into()),
    }
    if !claims["iss"].as_str().is_some_and(|i| i.contains('@')) {
        return Err("Invalid JWT: iss is not a service account.".into());
    }
    if claims["aud"] != AUDIENCE {
        return Err("Invalid JWT: Failed audience check.".into());
    }
    if !claims["scope"]
        .as_str()
        .is_some_and(|s| s.split(' ').any(|s| s == SCOPE))
    {
        return Err("Invalid OAuth scope or ID token audience provided.".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{RsaKeyPair, RSA_PKCS1_SHA256};

    const KEY_FILE: &str =
        include_str!("../../tests/fixtures/TEST-ONLY-vertex-service-account.json");

    fn b64(bytes: &[u8]) -> String {
        crate::server::base64(bytes)
            .trim_end_matches('=')
            .replace('+', "-")
            .replace('/', "_")
    }

    fn jwt(claims: Value) -> String {
        let file: Value = serde_json::from_str(KEY_FILE).unwrap();
        let pem = file["private_key"].as_str().unwrap();
        let body: String = pem
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .collect();
        let der = crate::bedrock_invoke::base64_decode(&body).unwrap();
        let key = RsaKeyPair::from_pkcs8(&der).unwrap();
        let signed = format!(
            "{}.{}",
            b64(br#"{"alg":"RS256","typ":"JWT"}"#),
            b64(claims.to_string().as_bytes())
        );
        let mut signature = vec![0; key.public().modulus_len()];
        key.sign(
            &RSA_PKCS1_SHA256,
            &SystemRandom::new(),
            signed.as_bytes(),
            &mut signature,
        )
        .unwrap();
        format!("{signed}.{}", b64(&signature))
    }

    fn post(assertion: &str) -> Reply {
        let body = format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
        );
        answer(&crate::http::parse(&format!(
            "POST /token HTTP/1.1\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )))
    }

    #[test]
    fn issues_tokens_only_for_a_valid_signed_grant() {
        configure(Some(60), &[]).unwrap();
        google_auth::configure(None);
        let now = google_auth::now();
        let claims = json!({"iss": "a@b.iam.gserviceaccount.com", "scope": SCOPE, "aud": AUDIENCE,
                            "iat": now, "exp": now + 3600});
        let ok = post(&jwt(claims.clone()));
        assert_eq!(ok.status, 200, "{}", ok.body);
        let token: Value = serde_json::from_str(&ok.body).unwrap();
        assert_eq!(token["expires_in"], 60);
        assert!(google_auth::valid(token["access_token"].as_str().unwrap()));
        // A signature over other claims, another audience, scope or lifetime: refused.
        let good = jwt(claims.clone());
        let (head, sig) = good.rsplit_once('.').unwrap();
        let other = jwt(
            json!({"iss": "evil@b", "scope": SCOPE, "aud": AUDIENCE, "iat": now, "exp": now + 60}),
        );
        let forged = format!("{}.{sig}", other.rsplit_once('.').unwrap().0);
        assert_eq!(post(&forged).status, 400);
        assert!(post(&format!("{head}.AAAA"))
            .body
            .contains("Invalid JWT Signature"));
        for (name, value) in [
            ("aud", json!("https://example.com/token")),
            ("scope", json!("email")),
            ("exp", json!(now + 7200)),
            ("iat", json!(now + 600)),
            ("iss", json!("nobody")),
        ] {
            let mut bad = claims.clone();
            bad[name] = value;
            let r = post(&jwt(bad));
            assert_eq!(r.status, 400, "{name}");
            assert!(r.body.contains("invalid_grant"));
        }
        // The metadata server wants its header.
        let md = |header: &str| {
            answer(&crate::http::parse(&format!(
                "GET {METADATA_PATH} HTTP/1.1\r\n{header}\r\n"
            )))
        };
        assert_eq!(md("").status, 403);
        assert_eq!(md("metadata-flavor: Google\r\n").status, 200);
        // Revoked: Vertex refuses what was issued.
        google_auth::revoke_issued();
        assert!(!google_auth::valid(token["access_token"].as_str().unwrap()));
    }
}
