//! Google access tokens for Vertex AI, the parts with no proxy in them:
//! a service-account key read and checked, the RS256-signed JWT it makes
//! for Google's token endpoint (OAuth 2.0 JWT bearer grant, RFC 7523:
//! `iss` the account, `scope` cloud-platform, `aud` the key's `token_uri`,
//! `iat`, `exp` an hour later), the token request and answer (the token
//! endpoint's and the metadata server's are the same JSON:
//! `{"access_token","expires_in","token_type":"Bearer"}`), and the records
//! the workers share in shared data: the token with its expiry, and the
//! lease that lets one worker fetch at a time.
//!
//! The signature is `ring`'s RSA PKCS#1 v1.5 with SHA-256: constant-time
//! private-key arithmetic (BoringSSL's), and deterministic padding, so no
//! random numbers are needed inside the VM. Neither the key nor a token is
//! ever in an error message.

use ring::rand::SystemRandom;
use ring::signature::{RsaKeyPair, RSA_PKCS1_SHA256};
use serde::Deserialize;

/// The scope Vertex AI needs.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Google's token endpoint, where a key names none.
pub const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The GCE/GKE metadata server's token path and its host.
pub const METADATA_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";
pub const METADATA_HOST: &str = "metadata.google.internal";

/// How long an assertion is valid (Google's maximum).
const ASSERTION_SECONDS: u64 = 3600;

/// The longest token the gateway keeps (Google's are about 200-2000 bytes).
pub const MAX_TOKEN_BYTES: usize = 4096;

/// The largest token answer the gateway reads.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024;

/// A service-account key as the gateway uses it (the JSON file Google's
/// console downloads).
pub struct ServiceAccount {
    pub client_email: String,
    pub private_key_id: Option<String>,
    pub token_uri: String,
    key: RsaKeyPair,
}

impl std::fmt::Debug for ServiceAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccount")
            .field("client_email", &self.client_email)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    client_email: Option<String>,
    #[serde(default)]
    private_key: Option<String>,
    #[serde(default)]
    private_key_id: Option<String>,
    #[serde(default)]
    token_uri: Option<String>,
}

impl ServiceAccount {
    /// Reads a key file's JSON; the error says what is wrong, never what
    /// the key holds.
    pub fn parse(json: &str) -> Result<Self, String> {
        let file: KeyFile = serde_json::from_str(json.trim()).map_err(|e| {
            format!(
                "not a service-account key file (JSON: line {}, column {})",
                e.line(),
                e.column()
            )
        })?;
        if let Some(kind) = file.kind.as_deref().filter(|k| *k != "service_account") {
            return Err(format!(
                "a key file of type '{}', not 'service_account'",
                kind.chars().take(40).collect::<String>()
            ));
        }
        let client_email = file
            .client_email
            .filter(|e| e.contains('@'))
            .ok_or("the key file has no client_email")?;
        let pem = file.private_key.ok_or("the key file has no private_key")?;
        // Escaped newlines, as the key is pasted into an environment variable.
        let pem = pem.replace("\\n", "\n");
        let key = private_key(&pem).ok_or(
            "the key file's private_key is not an RSA private key (2048 to 4096 bits) in PEM (PKCS#8 or PKCS#1)",
        )?;
        let token_uri = file
            .token_uri
            .unwrap_or_else(|| DEFAULT_TOKEN_URI.to_owned());
        if !token_uri.starts_with("https://") && !token_uri.starts_with("http://") {
            return Err("the key file's token_uri is not an http(s) URL".into());
        }
        Ok(Self {
            client_email,
            private_key_id: file.private_key_id,
            token_uri,
            key,
        })
    }

    /// The token endpoint's `:authority` and `:path` (from `token_uri`).
    pub fn token_endpoint(&self) -> (&str, &str) {
        let rest = self
            .token_uri
            .split_once("://")
            .map_or(self.token_uri.as_str(), |(_, r)| r);
        match rest.find('/') {
            Some(i) => (rest.get(..i).unwrap_or(rest), rest.get(i..).unwrap_or("/")),
            None => (rest, "/"),
        }
    }

    /// The signed JWT (`header.claims.signature`, base64url without padding)
    /// asking for a cloud-platform token at `now` (Unix seconds).
    pub fn assertion(&self, now: u64) -> Result<String, String> {
        #[derive(serde::Serialize)]
        struct Header<'a> {
            alg: &'static str,
            typ: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            kid: Option<&'a str>,
        }
        #[derive(serde::Serialize)]
        struct Claims<'a> {
            iss: &'a str,
            scope: &'static str,
            aud: &'a str,
            iat: u64,
            exp: u64,
        }
        let header = serde_json::to_vec(&Header {
            alg: "RS256",
            typ: "JWT",
            kid: self.private_key_id.as_deref(),
        })
        .map_err(|e| e.to_string())?;
        let claims = serde_json::to_vec(&Claims {
            iss: &self.client_email,
            scope: SCOPE,
            aud: &self.token_uri,
            iat: now,
            exp: now + ASSERTION_SECONDS,
        })
        .map_err(|e| e.to_string())?;
        let mut jwt = b64url(&header);
        jwt.push('.');
        jwt.push_str(&b64url(&claims));
        let mut signature = vec![0; self.key.public().modulus_len()];
        // PKCS#1 v1.5 padding never asks `rng` for a number.
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                jwt.as_bytes(),
                &mut signature,
            )
            .map_err(|_| "the service-account key could not sign".to_owned())?;
        jwt.push('.');
        jwt.push_str(&b64url(&signature));
        Ok(jwt)
    }

    /// The token request's form body for an assertion (a JWT is
    /// base64url and dots: nothing to escape).
    pub fn token_request(assertion: &str) -> Vec<u8> {
        format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
        )
        .into_bytes()
    }
}

/// An RSA key pair from a PEM private key: PKCS#8 (`BEGIN PRIVATE KEY`,
/// what Google's key files hold) or PKCS#1 (`BEGIN RSA PRIVATE KEY`).
fn private_key(pem: &str) -> Option<RsaKeyPair> {
    if let Some(der) = pem_block(pem, "PRIVATE KEY") {
        return RsaKeyPair::from_pkcs8(&der).ok();
    }
    RsaKeyPair::from_der(&pem_block(pem, "RSA PRIVATE KEY")?).ok()
}

/// The DER of the PEM block labelled `label` (RFC 7468: base64 between the
/// BEGIN and END lines, whitespace ignored).
fn pem_block(pem: &str, label: &str) -> Option<Vec<u8>> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = pem.find(&begin)? + begin.len();
    let body = pem.get(start..)?;
    let body = body.get(..body.find(&end)?)?;
    let base64: String = body.split_ascii_whitespace().collect();
    crate::formats::base64::decode(&base64)
}

fn b64url(bytes: &[u8]) -> String {
    String::from_utf8(crate::formats::base64::encode(
        bytes,
        crate::formats::base64::URL_SAFE,
    ))
    .unwrap_or_default()
}

/// A token endpoint's (or the metadata server's) answer: the token and
/// its lifetime in seconds.
pub fn parse_token_answer(body: &[u8]) -> Result<(String, u64), String> {
    #[derive(Deserialize)]
    struct Answer {
        access_token: String,
        #[serde(default)]
        expires_in: Option<u64>,
        #[serde(default)]
        token_type: Option<String>,
    }
    if body.len() > MAX_ANSWER_BYTES {
        return Err(format!("a token answer over {MAX_ANSWER_BYTES} bytes"));
    }
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|_| "the token answer is not {\"access_token\", \"expires_in\"}".to_owned())?;
    if answer
        .token_type
        .as_deref()
        .is_some_and(|t| !t.eq_ignore_ascii_case("bearer"))
    {
        return Err("the token answer's token_type is not Bearer".into());
    }
    let token = answer.access_token;
    if token.is_empty()
        || token.len() > MAX_TOKEN_BYTES
        || !token.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err("the token answer's access_token is empty, too long or not printable".into());
    }
    let lifetime = answer.expires_in.unwrap_or(3600).clamp(1, 24 * 3600);
    Ok((token, lifetime))
}

/// A token as the workers share it: when to refresh it, when it expires
/// (Unix seconds), which fetch made it (a 401 refreshes only the token it
/// was answered for), and the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cached {
    pub refresh_at: u64,
    pub expires_at: u64,
    pub generation: u64,
    pub token: String,
}

impl Cached {
    /// A fresh token of `lifetime` seconds at `now`, refreshed when a
    /// quarter of its life (at most 5 minutes) is left.
    pub fn new(token: String, lifetime: u64, now: u64, generation: u64) -> Self {
        let margin = (lifetime / 4).min(300);
        Self {
            refresh_at: now + lifetime - margin,
            expires_at: now + lifetime,
            generation,
            token,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        format!(
            "{} {} {}\n{}",
            self.refresh_at, self.expires_at, self.generation, self.token
        )
        .into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let (head, token) = text.split_once('\n')?;
        let mut numbers = head.split(' ').map(str::parse::<u64>);
        let (refresh_at, expires_at, generation) = (
            numbers.next()?.ok()?,
            numbers.next()?.ok()?,
            numbers.next()?.ok()?,
        );
        Some(Self {
            refresh_at,
            expires_at,
            generation,
            token: token.to_owned(),
        })
    }

    /// Whether it may still be sent at `now` (a second of slack for the trip).
    pub fn usable(&self, now: u64) -> bool {
        now + 1 < self.expires_at
    }
}

/// Who fetches: a worker holds the lease `until` (Unix seconds) while its
/// call is out; after `failures` failed fetches in a row the next waits
/// until `not_before` (1, 2, 4... 60 seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lease {
    pub until: u64,
    pub failures: u32,
    pub not_before: u64,
}

impl Lease {
    pub fn encode(&self) -> Vec<u8> {
        format!("{} {} {}", self.until, self.failures, self.not_before).into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut numbers = text.split(' ');
        Some(Self {
            until: numbers.next()?.parse().ok()?,
            failures: numbers.next()?.parse().ok()?,
            not_before: numbers.next()?.parse().ok()?,
        })
    }

    /// Whether a worker may start a fetch at `now`.
    pub fn free(&self, now: u64) -> bool {
        now >= self.until && now >= self.not_before
    }

    /// After a failed fetch at `now`: the wait doubles, up to a minute.
    pub fn failed(&self, now: u64) -> Self {
        let failures = self.failures.saturating_add(1);
        let wait = 1u64 << failures.saturating_sub(1).min(6);
        Self {
            until: 0,
            failures,
            not_before: now + wait.min(60),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};

    pub const KEY_FILE: &str =
        include_str!("../tests/fixtures/TEST-ONLY-vertex-service-account.json");
    const PUBLIC: &str = include_str!("../tests/fixtures/TEST-ONLY-vertex-service-account.pub.pem");

    /// This key's RS256 signature of `assertion(1_700_000_000)`'s header and
    /// claims, made by OpenSSL.
    const OPENSSL_SIGNATURE: &str = "ACSxqri6wBjXuchbdK8cx8H6pdrkWEZ0iU3Jx6Qfr7kpV9TwZpOmhiN9NQD4CQeCc-BRk0rYdec0wgxRYBYb6UrG-JT7yjr8LAIB1Z-ERDjAZ_3B98nvDdUw9SvmnSdjWHvIaSO0kj41yW4nAEIRV6NE9qeff3N2EXu02p_c6eqm5Dz2XFBLdP38CInIOlBYlYeDuWVo4ZGdoMkqBKxVWJciCw29xFf1uJY3tJrLzAJUl-82zTdnzdz5NCkX83DjQMqyf_do_eVthEOBYQj-gs_E7N8sarz9kmV3qJjghG1tux4W5RTZa0BrHqC-rr-4-5w4mLZXgz_U16Lq3uMHMA";

    /// DER prefixes of a 2048-bit RSA key: a SubjectPublicKeyInfo up to its
    /// RSAPublicKey, and a PKCS#8 PrivateKeyInfo up to its RSAPrivateKey.
    const SPKI_PREFIX: &[u8] = b"\x30\x82\x01\x22\x30\x0d\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x01\x05\x00\x03\x82\x01\x0f\x00";
    const PKCS8_PREFIX: &[u8] = b"\x30\x82\x04\xbc\x02\x01\x00\x30\x0d\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x01\x05\x00\x04\x82\x04\xa6";

    /// The PKCS#1 RSAPublicKey inside a PEM SubjectPublicKeyInfo.
    fn rsa_public_key(pem: &str) -> Vec<u8> {
        let der = pem_block(pem, "PUBLIC KEY").unwrap();
        der.strip_prefix(SPKI_PREFIX).unwrap().to_vec()
    }

    fn b64url_decode(text: &str) -> Vec<u8> {
        crate::formats::base64::decode(&crate::formats::base64::url_safe_to_standard(text)).unwrap()
    }

    #[test]
    fn signs_a_jwt_google_verifies() {
        let sa = ServiceAccount::parse(KEY_FILE).unwrap();
        assert_eq!(sa.token_endpoint(), ("oauth2.googleapis.com", "/token"));
        let jwt = sa.assertion(1_700_000_000).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: serde_json::Value = serde_json::from_slice(&b64url_decode(parts[0])).unwrap();
        assert_eq!(header["alg"], "RS256");
        assert_eq!(header["kid"], "0123456789abcdef0123456789abcdef01234567");
        let claims: serde_json::Value = serde_json::from_slice(&b64url_decode(parts[1])).unwrap();
        assert_eq!(
            claims["iss"],
            "gateway-test@mock-project.iam.gserviceaccount.com"
        );
        assert_eq!(claims["scope"], SCOPE);
        assert_eq!(claims["aud"], DEFAULT_TOKEN_URI);
        assert_eq!(
            (claims["iat"].as_u64(), claims["exp"].as_u64()),
            (Some(1_700_000_000), Some(1_700_003_600))
        );
        // The public half verifies it; a changed claim does not.
        let public = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, rsa_public_key(PUBLIC));
        let signature = b64url_decode(parts[2]);
        let signed = format!("{}.{}", parts[0], parts[1]);
        assert!(public.verify(signed.as_bytes(), &signature).is_ok());
        assert!(public
            .verify(format!("{signed}x").as_bytes(), &signature)
            .is_err());
        // Deterministic, and the very signature another implementation
        // makes (OpenSSL's, through Python's `cryptography`, over the same
        // header and claims with this key).
        assert_eq!(parts[2], OPENSSL_SIGNATURE);
        assert_eq!(sa.assertion(1_700_000_000).unwrap(), jwt);
        let body = String::from_utf8(ServiceAccount::token_request(&jwt)).unwrap();
        assert!(body.starts_with(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=ey"
        ));
    }

    #[test]
    fn key_errors_say_what_is_wrong_and_never_the_key() {
        let file: serde_json::Value = serde_json::from_str(KEY_FILE).unwrap();
        let pem = file["private_key"].as_str().unwrap();
        let secret_line = pem.lines().nth(1).unwrap();
        let with = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut f = file.clone();
            edit(&mut f);
            ServiceAccount::parse(&f.to_string()).unwrap_err()
        };
        let errors = [
            ServiceAccount::parse("{not json").unwrap_err(),
            with(&|f| f["type"] = "authorized_user".into()),
            with(&|f| {
                f.as_object_mut().unwrap().remove("client_email");
            }),
            with(&|f| {
                f.as_object_mut().unwrap().remove("private_key");
            }),
            with(&|f| f["private_key"] = pem.replace(secret_line, &secret_line[1..]).into()),
            with(&|f| f["token_uri"] = "ftp://x".into()),
        ];
        for e in &errors {
            assert!(
                !e.contains(secret_line) && !e.contains("PRIVATE KEY-----\n"),
                "{e}"
            );
        }
        assert!(
            errors[4].contains("not an RSA private key"),
            "{}",
            errors[4]
        );
        // Newlines escaped (a key pasted into an environment variable) do.
        let escaped = KEY_FILE.replace("\\n", "\\\\n");
        assert!(ServiceAccount::parse(&escaped).is_ok());
        // The same key as PKCS#1 (`BEGIN RSA PRIVATE KEY`) signs the same.
        let der = pem_block(pem, "PRIVATE KEY").unwrap();
        let pkcs1 = der.strip_prefix(PKCS8_PREFIX).unwrap();
        let body = String::from_utf8(crate::formats::base64::encode(
            pkcs1,
            crate::formats::base64::STANDARD,
        ))
        .unwrap();
        let mut f = file.clone();
        f["private_key"] =
            format!("-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\n")
                .into();
        let pkcs1 = ServiceAccount::parse(&f.to_string()).unwrap();
        let jwt = pkcs1.assertion(1_700_000_000).unwrap();
        assert!(jwt.ends_with(OPENSSL_SIGNATURE));
        // A key ring refuses (malformed, or outside 2048 to 4096 bits) says what it takes.
        let short = b"\x30\x0d\x02\x01\x00\x02\x01\x21\x02\x01\x03\x02\x01\x01";
        let body = String::from_utf8(crate::formats::base64::encode(
            short,
            crate::formats::base64::STANDARD,
        ))
        .unwrap();
        f["private_key"] =
            format!("-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\n")
                .into();
        let e = ServiceAccount::parse(&f.to_string()).unwrap_err();
        assert!(e.contains("2048 to 4096 bits"), "{e}");
    }

    #[test]
    fn token_answers_are_bounded_and_checked() {
        assert_eq!(
            parse_token_answer(
                br#"{"access_token":"ya29.abc","expires_in":3599,"token_type":"Bearer"}"#
            )
            .unwrap(),
            ("ya29.abc".into(), 3599)
        );
        for bad in [
            &br#"{"access_token":"","expires_in":1}"#[..],
            br#"{"access_token":"a b","expires_in":1}"#,
            br#"{"access_token":"a","token_type":"MAC"}"#,
            br#"{"error":"invalid_grant"}"#,
        ] {
            assert!(parse_token_answer(bad).is_err());
        }
        let long = format!(
            r#"{{"access_token":"{}"}}"#,
            "a".repeat(MAX_TOKEN_BYTES + 1)
        );
        assert!(parse_token_answer(long.as_bytes()).is_err());
    }

    #[test]
    fn records_round_trip() {
        let c = Cached::new("ya29.t".into(), 3600, 1000, 7);
        assert_eq!((c.refresh_at, c.expires_at), (1000 + 3300, 4600));
        assert_eq!(Cached::decode(&c.encode()), Some(c.clone()));
        assert!(c.usable(4598) && !c.usable(4599));
        // A short-lived token is refreshed at three quarters of its life.
        assert_eq!(Cached::new("t".into(), 20, 0, 1).refresh_at, 15);
        let l = Lease::default().failed(100);
        assert_eq!((l.failures, l.not_before), (1, 101));
        let l = l.failed(200).failed(300);
        assert_eq!((l.failures, l.not_before), (3, 304));
        assert_eq!(Lease::decode(&l.encode()), Some(l));
        assert!(!l.free(303) && l.free(304));
        let mut many = Lease::default();
        for _ in 0..20 {
            many = many.failed(0);
        }
        assert_eq!(many.not_before, 60);
    }
}
