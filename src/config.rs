//! The filter's one JSON configuration document, shared by both roles.
//!
//! Parsed and validated in `on_configure`; any error names the field, and
//! Envoy keeps the previous configuration.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::dialects::DialectKind;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Vendors, by a name of our choosing. Endpoints name theirs in
    /// `filter_metadata.llm.provider`.
    pub providers: BTreeMap<String, Provider>,
    /// Model groups: what clients ask for (header `x-model-group` or body `model`).
    pub model_groups: BTreeMap<String, ModelGroup>,
    /// Group used when neither the header nor the body model names one.
    #[serde(default)]
    pub default_model_group: Option<String>,
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
    pub api_key: Option<String>,
    /// Environment variable of the wasm VM (`vm_config.environment_variables`) holding the key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Model group or client model name → this vendor's model name; "*" catches the rest.
    #[serde(default)]
    pub models: BTreeMap<String, String>,
    /// `max_tokens` sent when the client gave none (vendors like Anthropic require one).
    #[serde(default = "default_max_tokens")]
    pub default_max_tokens: u32,
    /// The key after resolving `api_key_env`; never printed.
    #[serde(skip)]
    pub resolved_key: Option<String>,
    /// Azure OpenAI's `api-version` query parameter; required by, and only
    /// accepted for, the azure dialect.
    #[serde(default)]
    pub api_version: Option<String>,
}

fn default_max_tokens() -> u32 {
    4096
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelGroup {
    /// Envoy cluster the route sends this group to (via header `x-llm-cluster`).
    pub cluster: String,
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

impl Config {
    /// Parses and validates; `env` looks up the VM's environment variables.
    pub fn parse(bytes: &[u8], env: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let mut config: Config =
            serde_json::from_slice(bytes).map_err(|e| format!("invalid configuration: {e}"))?;
        if config.providers.is_empty() {
            return Err("providers: at least one provider is required".into());
        }
        for (name, provider) in &mut config.providers {
            let field = format!("providers.{name}");
            if provider.api_key.is_some() && provider.api_key_env.is_some() {
                return Err(format!("{field}: set api_key or api_key_env, not both"));
            }
            if !provider.base_path.is_empty()
                && (!provider.base_path.starts_with('/') || provider.base_path.ends_with('/'))
            {
                return Err(format!(
                    "{field}.base_path: must start with '/' and not end with '/'"
                ));
            }
            if let Some(host) = &provider.host {
                if host.is_empty()
                    || host
                        .chars()
                        .any(|c| c.is_whitespace() || c.is_control() || c == '/')
                {
                    return Err(format!("{field}.host: must be a bare host[:port]"));
                }
            }
            match (&provider.api_version, provider.dialect) {
                (None, DialectKind::Azure) => {
                    return Err(format!(
                        "{field}.api_version: required for the azure dialect"
                    ))
                }
                (Some(_), kind) if kind != DialectKind::Azure => {
                    return Err(format!(
                        "{field}.api_version: only the azure dialect uses it"
                    ))
                }
                (Some(v), _)
                    if v.is_empty()
                        || !v
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') =>
                {
                    return Err(format!(
                        "{field}.api_version: must look like 2024-10-21 (letters, digits, '-', '.')"
                    ));
                }
                _ => {}
            }
            if provider.default_max_tokens == 0 {
                return Err(format!("{field}.default_max_tokens: must be at least 1"));
            }
            provider.resolved_key = match (&provider.api_key, &provider.api_key_env) {
                (Some(key), None) => Some(key.clone()),
                (None, Some(var)) => match env(var) {
                    Some(key) if !key.is_empty() => Some(key),
                    _ => {
                        return Err(format!(
                            "{field}.api_key_env: environment variable {var} is not set"
                        ))
                    }
                },
                _ => None,
            };
        }
        if config.model_groups.is_empty() {
            return Err("model_groups: at least one model group is required".into());
        }
        for (name, group) in &config.model_groups {
            if group.cluster.is_empty() {
                return Err(format!("model_groups.{name}.cluster: must not be empty"));
            }
        }
        if let Some(default) = &config.default_model_group {
            if !config.model_groups.contains_key(default) {
                return Err(format!(
                    "default_model_group: no model group named '{default}'"
                ));
            }
        }
        Ok(config)
    }

    /// The group a request belongs to: header `x-model-group`, else the body
    /// model when it names a group, else the default group.
    pub fn resolve_group<'a>(
        &'a self,
        header: Option<&'a str>,
        model: &'a str,
    ) -> Result<(&'a str, &'a ModelGroup), crate::error::GatewayError> {
        use crate::error::{ErrorCode, GatewayError};
        let name = match header {
            Some(h) => h,
            None if self.model_groups.contains_key(model) => model,
            None => self.default_model_group.as_deref().unwrap_or(model),
        };
        self.model_groups
            .get_key_value(name)
            .map(|(k, g)| (k.as_str(), g))
            .ok_or_else(|| {
                let mut e = GatewayError::new(
                    ErrorCode::ModelNotFound,
                    format!("unknown model group '{}'", name.escape_debug()),
                );
                e.param = Some(if header.is_some() {
                    "x-model-group".into()
                } else {
                    "model".into()
                });
                e
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{
        "providers": {
            "oa": {"dialect": "openai", "api_key_env": "OA_KEY", "models": {"fast": "gpt-4o-mini"}},
            "an": {"dialect": "anthropic", "host": "api.anthropic.com", "api_key": "k", "models": {"*": "claude"}}
        },
        "model_groups": {"fast": {"cluster": "c1"}, "smart": {"cluster": "c2"}},
        "default_model_group": "fast"
    }"#;

    fn env(name: &str) -> Option<String> {
        (name == "OA_KEY").then(|| "secret".to_string())
    }

    #[test]
    fn parses_and_resolves_keys() {
        let c = Config::parse(GOOD.as_bytes(), env).unwrap();
        assert_eq!(c.providers["oa"].resolved_key.as_deref(), Some("secret"));
        assert_eq!(c.providers["oa"].vendor_model("fast", "x"), "gpt-4o-mini");
        assert_eq!(c.providers["oa"].vendor_model("smart", "x"), "x");
        assert_eq!(c.providers["an"].vendor_model("smart", "x"), "claude");
    }

    #[test]
    fn resolves_groups() {
        let c = Config::parse(GOOD.as_bytes(), env).unwrap();
        assert_eq!(c.resolve_group(Some("smart"), "fast").unwrap().0, "smart");
        assert_eq!(c.resolve_group(None, "smart").unwrap().0, "smart");
        assert_eq!(c.resolve_group(None, "gpt-x").unwrap().0, "fast");
        let e = c.resolve_group(Some("nope"), "fast").unwrap_err();
        assert_eq!(e.status(), 404);
        assert_eq!(e.param.as_deref(), Some("x-model-group"));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (GOOD.replace("\"openai\"", "\"klingon\""), "unknown variant"),
            (
                GOOD.replace("\"api_key\": \"k\"", "\"api_key\": \"k\", \"colour\": 1"),
                "colour",
            ),
            (
                GOOD.replace("OA_KEY", "MISSING"),
                "providers.oa.api_key_env",
            ),
            (
                GOOD.replace("\"fast\"\n", "\"slow\"\n").replace(
                    "\"default_model_group\": \"fast\"",
                    "\"default_model_group\": \"zzz\"",
                ),
                "default_model_group",
            ),
            (
                GOOD.replace("\"cluster\": \"c1\"", "\"cluster\": \"\""),
                "model_groups.fast.cluster",
            ),
            (
                GOOD.replace("\"host\": \"api.anthropic.com\"", "\"host\": \"a/b\""),
                "providers.an.host",
            ),
            (
                GOOD.replace("\"dialect\": \"anthropic\"", "\"dialect\": \"azure\""),
                "providers.an.api_version: required",
            ),
            (
                GOOD.replace(
                    "\"api_key\": \"k\"",
                    "\"api_key\": \"k\", \"api_version\": \"1\"",
                ),
                "providers.an.api_version: only",
            ),
            (
                GOOD.replace(
                    "\"dialect\": \"anthropic\"",
                    "\"dialect\": \"azure\", \"api_version\": \"x&y=1\"",
                ),
                "providers.an.api_version: must",
            ),
            ("{}".to_string(), "providers"),
            ("[".to_string(), "invalid configuration"),
        ];
        for (doc, needle) in cases {
            let err = Config::parse(doc.as_bytes(), env).unwrap_err();
            assert!(err.contains(needle), "{err} should mention {needle}");
        }
    }

    #[test]
    fn errors_never_contain_the_key() {
        let doc = GOOD.replace(
            "\"api_key\": \"k\"",
            "\"api_key\": \"sk-verysecret\", \"api_key_env\": \"OA_KEY\"",
        );
        let err = Config::parse(doc.as_bytes(), env).unwrap_err();
        assert!(!err.contains("sk-verysecret"), "{err}");
    }
}
