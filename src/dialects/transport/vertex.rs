//! Vertex AI: Gemini's and Anthropic's body formats on Google Cloud.
//!
//! Every call goes below `/v1/projects/{project}/locations/{location}/`
//! (Vertex AI REST reference, `projects.locations.publishers.models`):
//! - Gemini (`publishers/google/models/{model}:generateContent`,
//!   `:streamGenerateContent?alt=sse`, `:countTokens`), the body Google AI
//!   takes; a token count is the generation's `contents`,
//!   `systemInstruction`, `tools` and `generationConfig` at the top level
//!   (Vertex's `CountTokensRequest` has no `generateContentRequest`);
//! - Claude (`publishers/anthropic/models/{model}:rawPredict`,
//!   `:streamRawPredict`, and `publishers/anthropic/models/count-tokens:rawPredict`
//!   for a token count), Anthropic's Messages body with
//!   `anthropic_version: "vertex-2023-10-16"` first and no `model` (the
//!   path says it; a count keeps it: the path does not), no
//!   `anthropic-version` header.
//!
//! Auth is `authorization: Bearer <Google access token>`: the provider's
//! `api_key` (or `api_key_env`) is that token when a team mints it itself.
//! The provider's `project` and `location` (a region such as
//! `us-central1`, or `global`) are this transport's settings; `host`
//! should be the location's (`{location}-aiplatform.googleapis.com`, or
//! `aiplatform.googleapis.com` for `global`: [`host_of`]).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{unsupported, Operation, Transport};
use crate::dialects::settings::{self, Key};
use crate::dialects::{edit_members, Member, Target};
use crate::error::{ErrorCode, GatewayError};
use crate::formats::url::encode_segment;
use crate::provider::DialectSettings;

/// The Messages API version Vertex AI takes, in the body.
pub const ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// The member every Claude body on Vertex starts with.
const VERSION_MEMBER: &str = r#""anthropic_version":"vertex-2023-10-16""#;

/// Vertex's `CountTokensRequest` members a generation's body carries.
const COUNT_MEMBERS: [&str; 4] = ["contents", "systemInstruction", "tools", "generationConfig"];

/// The Vertex AI transport of one publisher's models: what both share
/// (the settings, the auth) is here, what sets a publisher apart (its
/// methods, its body) is its [`Publisher`].
pub struct Vertex<P>(pub P);

/// Gemini on Vertex AI.
pub struct VertexGemini;

/// Claude on Vertex AI.
pub struct VertexAnthropic;

/// A publisher's part of its Vertex AI transport.
pub trait Publisher: Sync {
    /// As [`Transport::path`].
    fn path(&self, op: Operation, target: &Target) -> Result<String, GatewayError>;

    /// As [`Transport::body`].
    fn body(&self, op: Operation, target: &Target, body: Vec<u8>) -> Result<Vec<u8>, GatewayError>;

    /// As [`Transport::embedder`].
    fn embedder(&self) -> Option<&'static dyn crate::dialects::embed::Embedder> {
        None
    }

    /// The Model Garden publisher whose models this one lists.
    fn publisher(&self) -> &'static crate::dialects::list::Vertex;
}

impl<P: Publisher> Transport for Vertex<P> {
    fn path(&self, op: Operation, target: &Target) -> Result<String, GatewayError> {
        self.0.path(op, target)
    }

    /// `authorization: Bearer` with the provider's access token when it is
    /// one; a token the gateway obtains is set by the attempt
    /// (`session::google_token`), and a service-account key never goes.
    fn headers(&self, _op: Operation, target: &Target, headers: &mut Vec<(&'static str, String)>) {
        let outside = target
            .provider
            .settings::<Settings>()
            .is_some_and(|s| s.credentials == Credentials::AccessToken);
        if outside {
            super::bearer(target, headers);
        }
    }

    fn embedder(&self) -> Option<&'static dyn crate::dialects::embed::Embedder> {
        self.0.embedder()
    }

    fn lister(&self) -> Option<&'static dyn crate::dialects::list::Lister> {
        Some(self.0.publisher())
    }

    fn body(&self, op: Operation, target: &Target, body: Vec<u8>) -> Result<Vec<u8>, GatewayError> {
        self.0.body(op, target, body)
    }

    fn settings_keys(&self) -> &'static [Key] {
        &KEYS
    }

    fn read_settings(
        &self,
        members: Map<String, Value>,
        field: &str,
    ) -> Result<Option<Box<dyn DialectSettings>>, String> {
        Ok(Some(Box::new(read(members, field)?)))
    }
}

const VERTEX_ONLY: &str = "only for the vertex_gemini and vertex_anthropic dialects";

static KEYS: [Key; 5] = [
    Key {
        name: "project",
        elsewhere: VERTEX_ONLY,
    },
    Key {
        name: "location",
        elsewhere: VERTEX_ONLY,
    },
    Key {
        name: "credentials",
        elsewhere: VERTEX_ONLY,
    },
    Key {
        name: "token_cluster",
        elsewhere: VERTEX_ONLY,
    },
    Key {
        name: "token_wait_ms",
        elsewhere: VERTEX_ONLY,
    },
];

/// How long an attempt waits for a token the gateway obtains, by default.
pub const TOKEN_WAIT_MS: u64 = 5_000;

/// The longest wait a provider may configure (`token_wait_ms`).
const MAX_TOKEN_WAIT_MS: u64 = 60_000;

/// Where a Vertex AI provider's access tokens come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// The provider's `api_key` (or `api_key_env`) is the token, minted
    /// outside the gateway (or none: Envoy's credential injector sets it).
    AccessToken,
    /// The provider's `api_key` (or `api_key_env`) is a service-account
    /// key file's JSON: the gateway signs a JWT and exchanges it at the
    /// key's `token_uri` through Envoy cluster `cluster`.
    ServiceAccount { cluster: String },
    /// The GCE/GKE metadata server, through Envoy cluster `cluster`.
    MetadataServer { cluster: String },
}

impl Credentials {
    /// Whether the gateway obtains the tokens itself.
    pub fn managed(&self) -> bool {
        !matches!(self, Credentials::AccessToken)
    }

    /// The Envoy cluster the gateway asks for tokens.
    pub fn cluster(&self) -> Option<&str> {
        match self {
            Credentials::AccessToken => None,
            Credentials::ServiceAccount { cluster } | Credentials::MetadataServer { cluster } => {
                Some(cluster)
            }
        }
    }
}

/// A Vertex AI provider's settings.
#[derive(Debug)]
pub struct Settings {
    /// The Google Cloud project id.
    pub project: String,
    /// A region (`us-central1`, `europe-west4`...) or `global`.
    pub location: String,
    pub credentials: Credentials,
    /// Which credentials these are, for the tokens the gateway obtains
    /// with them (their shared-data key): a digest of the mode, the token
    /// cluster and the key, never the key (set at configuration load).
    pub fingerprint: String,
    /// How long an attempt that finds no token the gateway obtains waits
    /// for one (paused, resumed when it arrives), in milliseconds; then
    /// it is answered 503. 0: answered at once.
    pub token_wait_ms: u64,
}

impl DialectSettings for Settings {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    location: Option<String>,
    #[serde(default)]
    credentials: Option<String>,
    #[serde(default)]
    token_cluster: Option<String>,
    #[serde(default)]
    token_wait_ms: Option<u64>,
}

/// The host serving `location`: `aiplatform.googleapis.com` for `global`,
/// else the region's own.
pub fn host_of(location: &str) -> String {
    if location == "global" {
        "aiplatform.googleapis.com".to_owned()
    } else {
        format!("{location}-aiplatform.googleapis.com")
    }
}

/// `project` and `location`, both required, in the characters Google uses
/// (a project id: lowercase letters, digits, `-`, and for a domain-scoped
/// one `.` and `:`; a location: lowercase letters, digits, `-`).
fn read(members: Map<String, Value>, field: &str) -> Result<Settings, String> {
    let written: Written = settings::typed(members, field)?;
    let required = |value: Option<String>, name: &str| {
        value
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("{field}.{name}: required for a Vertex AI provider"))
    };
    let project = required(written.project, "project")?;
    let location = required(written.location, "location")?;
    let lower = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
    if project.len() > 128 || !project.bytes().all(|b| lower(b) || b == b'.' || b == b':') {
        return Err(format!(
            "{field}.project: a Google Cloud project id (lowercase letters, digits, '-')"
        ));
    }
    if location.len() > 64 || !location.bytes().all(lower) {
        return Err(format!(
            "{field}.location: a region such as us-central1, or global"
        ));
    }
    let cluster = |mode: &str| {
        match written.token_cluster.clone() {
        Some(c) if !c.is_empty() && c.len() <= 256 && !c.bytes().any(|b| b.is_ascii_control()) => Ok(c),
        _ => Err(format!(
            "{field}.token_cluster: required with credentials \"{mode}\" (the Envoy cluster the token requests go to)"
        )),
    }
    };
    let credentials = match written.credentials.as_deref() {
        None | Some("access_token") => {
            for (name, set) in [
                ("token_cluster", written.token_cluster.is_some()),
                ("token_wait_ms", written.token_wait_ms.is_some()),
            ] {
                if set {
                    return Err(format!(
                        "{field}.{name}: only with credentials \"service_account\" or \"metadata_server\""
                    ));
                }
            }
            Credentials::AccessToken
        }
        Some("service_account") => Credentials::ServiceAccount {
            cluster: cluster("service_account")?,
        },
        Some("metadata_server") => Credentials::MetadataServer {
            cluster: cluster("metadata_server")?,
        },
        Some(_) => {
            return Err(format!(
                "{field}.credentials: one of \"access_token\", \"service_account\", \"metadata_server\""
            ))
        }
    };
    let token_wait_ms = written.token_wait_ms.unwrap_or(TOKEN_WAIT_MS);
    if token_wait_ms > MAX_TOKEN_WAIT_MS {
        return Err(format!(
            "{field}.token_wait_ms: at most {MAX_TOKEN_WAIT_MS} (a paused request holds its connection)"
        ));
    }
    Ok(Settings {
        project,
        location,
        credentials,
        fingerprint: String::new(),
        token_wait_ms,
    })
}

/// A Vertex AI provider's credential as the configuration resolved it
/// (its `api_key` or `api_key_env`'s value), checked at load: a
/// service-account key must parse (the error names the field, never the
/// key), the metadata server takes none. The settings get the
/// credentials' fingerprint: a reload that changes them gets tokens of its
/// own at once, one that does not keeps the shared ones.
pub fn check_credentials(
    provider: &mut crate::provider::Provider,
    field: &str,
) -> Result<(), String> {
    let secret = provider
        .resolved_key
        .as_ref()
        .map(crate::provider::Secret::expose);
    let Some(settings) = provider.settings::<Settings>() else {
        return Ok(());
    };
    let key_field = if provider.api_key_env.is_some() {
        "api_key_env"
    } else {
        "api_key"
    };
    match (&settings.credentials, secret) {
        (Credentials::ServiceAccount { .. }, None) => {
            return Err(format!(
            "{field}.api_key_env: the service-account key file's JSON is required with credentials \"service_account\""
        ))
        }
        (Credentials::ServiceAccount { .. }, Some(json)) => {
            crate::google_auth::ServiceAccount::parse(json)
                .map(drop)
                .map_err(|e| format!("{field}.{key_field}: {e}"))?;
        }
        (Credentials::MetadataServer { .. }, Some(_)) => {
            return Err(format!(
                "{field}.{key_field}: no key with credentials \"metadata_server\""
            ))
        }
        _ => {}
    }
    let fingerprint = fingerprint(&settings.credentials, secret);
    if let Some(settings) = provider.settings_mut::<Settings>() {
        settings.fingerprint = fingerprint;
    }
    Ok(())
}

/// 16 hex digits of the SHA-256 of the credentials' mode, token cluster
/// and key: which credentials, not what they are.
fn fingerprint(credentials: &Credentials, secret: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    let mode = match credentials {
        Credentials::AccessToken => "access_token",
        Credentials::ServiceAccount { .. } => "service_account",
        Credentials::MetadataServer { .. } => "metadata_server",
    };
    let mut hash = Sha256::new();
    for part in [
        mode,
        credentials.cluster().unwrap_or(""),
        secret.unwrap_or(""),
    ] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hash.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether an error body is Google's (`google.rpc.Status` in an `error`
/// member, as Vertex AI answers for what fails before Claude: auth,
/// permissions, quota, an unknown model), not Anthropic's.
pub fn is_google_error(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Status {
        #[allow(dead_code)]
        code: u16,
        #[allow(dead_code)]
        status: String,
    }
    #[derive(Deserialize)]
    struct Envelope {
        #[allow(dead_code)]
        error: Status,
    }
    serde_json::from_slice::<Envelope>(body).is_ok()
        || serde_json::from_slice::<[Envelope; 1]>(body).is_ok()
}

/// The provider's settings (read at configuration load: a provider
/// without them is refused there, so this is a bug answered, not a panic).
fn settings<'a>(target: &'a Target) -> Result<&'a Settings, GatewayError> {
    target.provider.settings::<Settings>().ok_or_else(|| {
        GatewayError::new(
            ErrorCode::UpstreamError,
            "the Vertex AI provider has no project and location configured",
        )
    })
}

/// `/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}:{method}`.
fn model_path(
    target: &Target,
    publisher: &str,
    model: &str,
    method: &str,
) -> Result<String, GatewayError> {
    let s = settings(target)?;
    Ok(format!(
        "/v1/projects/{}/locations/{}/publishers/{publisher}/models/{}:{method}",
        encode_segment(&s.project),
        encode_segment(&s.location),
        // `@` is a path character (RFC 3986 `pchar`): Claude's versions
        // (`claude-sonnet-4-5@20250929`) go as Vertex documents them.
        encode_segment(model).replace("%40", "@")
    ))
}

impl Publisher for VertexGemini {
    fn publisher(&self) -> &'static crate::dialects::list::Vertex {
        &crate::dialects::list::Vertex {
            publisher: "google",
        }
    }

    fn path(&self, op: Operation, target: &Target) -> Result<String, GatewayError> {
        let method = match op {
            Operation::Generate { stream: true } => "streamGenerateContent?alt=sse",
            Operation::Generate { stream: false } => "generateContent",
            Operation::CountTokens => "countTokens",
            Operation::Embed => "predict",
            _ => return Err(unsupported(op)),
        };
        // The model as Vertex names it (`publishers/google/models/...`),
        // as Google AI does (`models/...`), or bare.
        let model = target.model;
        let model = model.strip_prefix("publishers/google/").unwrap_or(model);
        let model = model.strip_prefix("models/").unwrap_or(model);
        model_path(target, "google", model, method)
    }

    /// Vertex embeds with `:predict` and a body of its own.
    fn embedder(&self) -> Option<&'static dyn crate::dialects::embed::Embedder> {
        Some(&crate::dialects::embed::vertex::Vertex)
    }

    /// A token count's body: the generation's members Vertex counts, out
    /// of Google AI's `generateContentRequest` wrapper, or at the top level
    /// as a Gemini client's own count has them (`contents` alone).
    fn body(
        &self,
        op: Operation,
        _target: &Target,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, GatewayError> {
        if !matches!(op, Operation::CountTokens) {
            return Ok(body);
        }
        #[derive(Deserialize)]
        struct Wrapped<'a> {
            #[serde(rename = "generateContentRequest", borrow, default)]
            generate: Option<&'a serde_json::value::RawValue>,
        }
        let wrapped: Wrapped = serde_json::from_slice(&body)
            .map_err(|e| GatewayError::invalid("body", format!("invalid request body: {e}")))?;
        let counted = wrapped
            .generate
            .map_or(body.as_slice(), |g| g.get().as_bytes());
        edit_members(counted, "", |key| {
            if COUNT_MEMBERS.contains(&key) {
                Member::Keep
            } else {
                Member::Drop
            }
        })
    }
}

impl Publisher for VertexAnthropic {
    fn publisher(&self) -> &'static crate::dialects::list::Vertex {
        &crate::dialects::list::Vertex {
            publisher: "anthropic",
        }
    }

    fn path(&self, op: Operation, target: &Target) -> Result<String, GatewayError> {
        match op {
            Operation::Generate { stream: true } => {
                model_path(target, "anthropic", target.model, "streamRawPredict")
            }
            Operation::Generate { stream: false } => {
                model_path(target, "anthropic", target.model, "rawPredict")
            }
            Operation::CountTokens => model_path(target, "anthropic", "count-tokens", "rawPredict"),
            _ => Err(unsupported(op)),
        }
    }

    /// `anthropic_version` first (a client's own gives way), `model` out
    /// of a generation's body (the path says it) and, for a token count
    /// (whose path names no model), the vendor model second, whether the
    /// body had one (a Messages client's count) or not (a count made from
    /// the generation's body); every other byte kept.
    fn body(&self, op: Operation, target: &Target, body: Vec<u8>) -> Result<Vec<u8>, GatewayError> {
        let prefix = match op {
            Operation::CountTokens => {
                let model = serde_json::to_string(target.model)
                    .map_err(|e| GatewayError::invalid("model", e.to_string()))?;
                format!("{VERSION_MEMBER},\"model\":{model}")
            }
            _ => VERSION_MEMBER.to_owned(),
        };
        edit_members(&body, &prefix, |key| match key {
            "anthropic_version" | "model" => Member::Drop,
            _ => Member::Keep,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn config(dialect: &str, extra: &str) -> Result<Config, String> {
        Config::parse(
            format!(
                r#"{{"providers":{{"p":{{"dialect":"{dialect}","api_key":"ya29.token"{extra}}}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#
            )
            .as_bytes(),
            |_| None,
        )
    }

    fn config_of(dialect: &str, extra: &str) -> Config {
        config(dialect, extra).unwrap()
    }

    const AT: &str = r#","project":"my-proj","location":"us-east5""#;

    fn request(
        config: &Config,
        model: &str,
        op: Operation,
        body: &[u8],
    ) -> (String, Vec<(&'static str, String)>, String) {
        let target = Target {
            provider: &config.providers["p"],
            model,
        };
        let up = super::super::request(op, &target, body.to_vec()).unwrap();
        (up.path, up.headers, String::from_utf8(up.body).unwrap())
    }

    #[test]
    fn settings_are_required_and_checked_at_load() {
        for dialect in ["vertex_gemini", "vertex_anthropic"] {
            assert!(config(dialect, AT).is_ok());
            let e = config(dialect, r#","project":"p1""#).unwrap_err();
            assert!(e.contains("providers.p.location: required"), "{e}");
            let e = config(dialect, r#","location":"global""#).unwrap_err();
            assert!(e.contains("providers.p.project: required"), "{e}");
            let e = config(dialect, r#","project":"p/../x","location":"global""#).unwrap_err();
            assert!(e.contains("providers.p.project"), "{e}");
            let e = config(dialect, r#","project":"p","location":"us central""#).unwrap_err();
            assert!(e.contains("providers.p.location"), "{e}");
        }
        // Another dialect's provider is told whose keys they are.
        let e = config("gemini", AT).unwrap_err();
        assert!(e.contains("vertex_gemini and vertex_anthropic"), "{e}");
        assert_eq!(host_of("global"), "aiplatform.googleapis.com");
        assert_eq!(host_of("us-east5"), "us-east5-aiplatform.googleapis.com");
    }

    #[test]
    fn credentials_are_checked_at_load_and_a_key_is_never_sent() {
        let key = serde_json::to_string(crate::google_auth::tests::KEY_FILE).unwrap();
        let sa = |secret: &str| {
            Config::parse(
                format!(
                    r#"{{"providers":{{"p":{{"dialect":"vertex_gemini"{secret},"project":"p","location":"global","credentials":"service_account","token_cluster":"google_oauth"}}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#
                )
                .as_bytes(),
                |var| (var == "SA_KEY").then(|| crate::google_auth::tests::KEY_FILE.to_owned()),
            )
        };
        for secret in [
            format!(r#","api_key":{key}"#),
            r#","api_key_env":"SA_KEY""#.to_owned(),
        ] {
            let config = sa(&secret).unwrap();
            let (_, headers, _) =
                request(&config, "m", Operation::Generate { stream: false }, b"{}");
            assert!(
                !headers.iter().any(|(n, _)| *n == "authorization"),
                "the key is not a token"
            );
        }
        let e = sa(r#","api_key":"{\"type\":\"service_account\",\"client_email\":\"a@b\",\"private_key\":\"-----BEGIN PRIVATE KEY-----\\nAAAA\\n-----END PRIVATE KEY-----\\n\"}""#).unwrap_err();
        assert!(
            e.starts_with("providers.p.api_key: ") && e.contains("not an RSA private key"),
            "{e}"
        );
        assert!(sa("")
            .unwrap_err()
            .contains("service-account key file's JSON is required"));
        let e = config(
            "vertex_gemini",
            &format!("{AT},\"credentials\":\"service_account\""),
        )
        .unwrap_err();
        assert!(e.contains("providers.p.token_cluster: required"), "{e}");
        let e = config(
            "vertex_gemini",
            &format!("{AT},\"credentials\":\"metadata_server\",\"token_cluster\":\"md\""),
        )
        .unwrap_err();
        assert!(e.contains("providers.p.api_key: no key"), "{e}");
        let e = config("vertex_gemini", &format!("{AT},\"token_cluster\":\"md\"")).unwrap_err();
        assert!(e.contains("providers.p.token_cluster: only with"), "{e}");
        let e = config("vertex_gemini", &format!("{AT},\"credentials\":\"adc\"")).unwrap_err();
        assert!(e.contains("providers.p.credentials: one of"), "{e}");
    }

    #[test]
    fn gemini_paths_auth_and_count_body() {
        let config = config("vertex_gemini", AT).unwrap();
        let base =
            "/v1/projects/my-proj/locations/us-east5/publishers/google/models/gemini-2.5-flash";
        for model in [
            "gemini-2.5-flash",
            "models/gemini-2.5-flash",
            "publishers/google/models/gemini-2.5-flash",
        ] {
            let (path, headers, _) =
                request(&config, model, Operation::Generate { stream: false }, b"{}");
            assert_eq!(path, format!("{base}:generateContent"));
            assert!(headers.contains(&("authorization", "Bearer ya29.token".into())));
            assert!(!headers.iter().any(|(n, _)| *n == "x-goog-api-key"));
        }
        let (path, _, _) = request(
            &config,
            "gemini-2.5-flash",
            Operation::Generate { stream: true },
            b"{}",
        );
        assert_eq!(path, format!("{base}:streamGenerateContent?alt=sse"));
        let (path, _, body) = request(
            &config,
            "gemini-2.5-flash",
            Operation::CountTokens,
            br#"{"generateContentRequest":{"model":"models/gemini-2.5-flash","contents":[{"role":"user","parts":[{"text":"hi"}]}],"toolConfig":{},"systemInstruction":{"parts":[]},"safetySettings":[]}}"#,
        );
        assert_eq!(path, format!("{base}:countTokens"));
        assert_eq!(
            body,
            r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"systemInstruction":{"parts":[]}}"#
        );
        // A Gemini client's own count: `contents` at the top level.
        let (_, _, body) = request(
            &config,
            "gemini-2.5-flash",
            Operation::CountTokens,
            br#"{"contents":[{"parts":[{"text":"hi"}],"role":"user"}],"model":"models/x"}"#,
        );
        assert_eq!(
            body,
            r#"{"contents":[{"parts":[{"text":"hi"}],"role":"user"}]}"#
        );
        // Embeddings go to `:predict` with Vertex's own body (its embedder,
        // not Google AI's batchEmbedContents).
        let target = Target {
            provider: &config.providers["p"],
            model: "text-embedding-005",
        };
        let kind = crate::provider::DialectKind::VertexGemini;
        let embed = crate::surfaces::routed_call("POST", "/v1/embeddings", "");
        let req = crate::wire::openai_embeddings::parse(br#"{"model":"m","input":"hi"}"#).unwrap();
        let up = crate::dialects::embedder(crate::dialects::dialect(kind), target.provider)
            .unwrap()
            .encode(&req, &target)
            .unwrap();
        assert_eq!(
            up.path,
            "/v1/projects/my-proj/locations/us-east5/publishers/google/models/text-embedding-005:predict"
        );
        assert!(String::from_utf8(up.body)
            .unwrap()
            .starts_with(r#"{"instances":"#));
        assert!(crate::dialects::has_call(
            crate::dialects::dialect(kind),
            target.provider,
            &embed
        ));
        let google_ai = config_of("gemini", "");
        assert!(crate::dialects::has_call(
            crate::dialects::dialect(crate::provider::DialectKind::Gemini),
            &google_ai.providers["p"],
            &embed
        ));
    }

    #[test]
    fn anthropic_paths_and_body() {
        let config = config(
            "vertex_anthropic",
            r#","project":"my-proj","location":"global""#,
        )
        .unwrap();
        let base = "/v1/projects/my-proj/locations/global/publishers/anthropic/models";
        let body = br#"{"model":"claude-sonnet-4-5@20250929","max_tokens":5, "stream":true,"anthropic_version":"2023-06-01","messages":[{"role":"user","content":"model"}]}"#;
        let (path, headers, sent) = request(
            &config,
            "claude-sonnet-4-5@20250929",
            Operation::Generate { stream: true },
            body,
        );
        assert_eq!(
            path,
            format!("{base}/claude-sonnet-4-5@20250929:streamRawPredict")
        );
        assert_eq!(
            sent,
            r#"{"anthropic_version":"vertex-2023-10-16","max_tokens":5, "stream":true,"messages":[{"role":"user","content":"model"}]}"#
        );
        assert!(headers.contains(&("authorization", "Bearer ya29.token".into())));
        assert!(!headers
            .iter()
            .any(|(n, _)| *n == "anthropic-version" || *n == "x-api-key"));
        let (path, _, _) = request(
            &config,
            "claude-x",
            Operation::Generate { stream: false },
            b"{}",
        );
        assert_eq!(path, format!("{base}/claude-x:rawPredict"));
        let (path, _, sent) = request(
            &config,
            "claude-x",
            Operation::CountTokens,
            br#"{"model":"claude-x","messages":[]}"#,
        );
        assert_eq!(path, format!("{base}/count-tokens:rawPredict"));
        assert_eq!(
            sent,
            r#"{"anthropic_version":"vertex-2023-10-16","model":"claude-x","messages":[]}"#
        );
        // A count made from a generation's body (which has no `model` on
        // Vertex), e.g. a Gemini client's: the vendor model is put in.
        let (_, _, sent) = request(
            &config,
            "claude-x@1",
            Operation::CountTokens,
            br#"{"anthropic_version":"vertex-2023-10-16","messages":[],"system":"s"}"#,
        );
        assert_eq!(
            sent,
            r#"{"anthropic_version":"vertex-2023-10-16","model":"claude-x@1","messages":[],"system":"s"}"#
        );
    }
}
