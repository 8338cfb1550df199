//! A vendor as the configuration names it: its dialect, where and how to
//! reach it, its key, prices and request policy, and its dialect's own
//! settings (typed by the dialect, carried here unread by anyone else).
//! Dialects read it to encode requests; the configuration validates it.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::metering::Price;

/// The wire format a vendor speaks (one module each in `dialects`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DialectKind {
    Openai,
    Anthropic,
    Gemini,
    Azure,
    Bedrock,
    Dashscope,
    /// Gemini's body on Vertex AI (`dialects/transport/vertex.rs`).
    #[serde(rename = "vertex_gemini")]
    VertexGemini,
    /// Anthropic's Messages body on Vertex AI (`dialects/transport/vertex.rs`).
    #[serde(rename = "vertex_anthropic")]
    VertexAnthropic,
}

impl DialectKind {
    /// Every dialect, for tests and benchmarks that must cover them all.
    pub const ALL: &'static [DialectKind] = &[
        DialectKind::Openai,
        DialectKind::Anthropic,
        DialectKind::Gemini,
        DialectKind::Azure,
        DialectKind::Bedrock,
        DialectKind::Dashscope,
        DialectKind::VertexGemini,
        DialectKind::VertexAnthropic,
    ];
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    pub dialect: DialectKind,
    /// `:authority` sent upstream; Envoy's own host rewrite applies when absent.
    #[serde(default)]
    pub host: Option<String>,
    /// Prefix for the dialect's path, e.g. "/openai" for a proxy in front of the vendor.
    #[serde(default)]
    pub base_path: String,
    /// The vendor key, inline. Prefer `api_key_env`.
    #[serde(default)]
    pub api_key: Option<Secret>,
    /// Environment variable of the wasm VM (`vm_config.environment_variables`) holding the key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Model group or client model name → this vendor's model name; "*" catches the rest.
    #[serde(default)]
    pub models: BTreeMap<String, String>,
    /// `max_tokens` sent when the client gave none (vendors like Anthropic require one).
    #[serde(default = "default_max_tokens")]
    pub default_max_tokens: u32,
    /// The key after resolving `api_key_env`.
    #[serde(skip)]
    pub resolved_key: Option<Secret>,
    /// USD per million tokens by vendor model ("*" for the rest), for cost accounting.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// Client headers this provider may receive although the gateway
    /// withholds them by default (see `headers::vendor_may_receive`), e.g.
    /// `openai-organization`: lowercase names; never a credential.
    #[serde(default)]
    pub forward_headers: Vec<String>,
    /// Finds this provider's key in what it answers.
    #[serde(skip)]
    pub redactor: crate::redact::Redactor,
    /// Rules by vendor model that rename, drop, default or cap request
    /// fields (see `policy`); tried before the dialect's built-in ones.
    #[serde(default)]
    pub request_policy: Vec<crate::policy::Rule>,
    /// The dialect's built-in rules.
    #[serde(skip)]
    pub builtin_policy: Vec<crate::policy::Rule>,
    /// The dialect's own settings (`dialects::azure::Settings`, ...),
    /// written beside the keys above and read by the dialect.
    #[serde(skip)]
    pub settings: Settings,
}

impl Provider {
    /// The request as this provider's policy has it for `model`, or `None`
    /// when no rule changes it.
    pub fn apply_policy(
        &self,
        model: &str,
        req: &crate::model::request::ChatRequest,
    ) -> Option<crate::model::request::ChatRequest> {
        crate::policy::apply(&self.request_policy, &self.builtin_policy, model, req)
    }
}

/// A dialect's typed settings section; the dialect that reads it is the
/// only one that looks inside ([`Provider::settings`]).
pub trait DialectSettings: std::any::Any + std::fmt::Debug + Send + Sync {}

/// A provider's dialect settings, as far as they are read.
#[derive(Debug, Default)]
pub enum Settings {
    /// The dialect has none.
    #[default]
    None,
    /// The provider's dialect keys as written, until the configuration has
    /// the dialect read them.
    Unread(serde_json::Map<String, serde_json::Value>),
    Read(Box<dyn DialectSettings>),
}

impl Provider {
    /// This provider's settings as dialect settings type `T`: `None` for
    /// another dialect's, or none read.
    pub fn settings<T: DialectSettings>(&self) -> Option<&T> {
        match &self.settings {
            Settings::Read(settings) => {
                let any: &dyn std::any::Any = settings.as_ref();
                any.downcast_ref()
            }
            _ => None,
        }
    }

    /// The same, to complete at configuration load.
    pub fn settings_mut<T: DialectSettings>(&mut self) -> Option<&mut T> {
        match &mut self.settings {
            Settings::Read(settings) => {
                let any: &mut dyn std::any::Any = settings.as_mut();
                any.downcast_mut()
            }
            _ => None,
        }
    }
}

/// A credential: its `Debug` never shows it, so no log line can.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub(crate) fn new(secret: String) -> Self {
        Self(secret)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

fn default_max_tokens() -> u32 {
    4096
}

impl Provider {
    /// The vendor model for a request: the group's mapping, else the client's
    /// model's, else "*", else the client's model unchanged.
    pub fn vendor_model<'a>(&'a self, group: &str, client_model: &'a str) -> &'a str {
        self.models
            .get(group)
            .or_else(|| self.models.get(client_model))
            .or_else(|| self.models.get("*"))
            .map_or(client_model, String::as_str)
    }
}
