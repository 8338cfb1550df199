//! The credentials each vendor mock accepts: exactly one key per vendor, as
//! a real account has. Defaults are the keys `envoy/gateway.yaml` (and every
//! shipped config pointed at the mock) sends; `--api-key VENDOR=KEY`
//! replaces one. Bedrock has no key: SigV4 (`--aws-credentials`).

use std::sync::OnceLock;

/// (vendor, default key).
const DEFAULTS: [(&str, &str); 5] = [
    ("openai", "sk-mock-openai"),
    ("azure", "mock-azure-key"),
    ("anthropic", "sk-mock-anthropic"),
    ("gemini", "mock-gemini-key"),
    ("dashscope", "sk-mock-dashscope"),
];

static CONFIGURED: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Parses `VENDOR=KEY`; `None` for an unknown vendor or an empty key.
pub fn parse(arg: &str) -> Option<(String, String)> {
    let (vendor, key) = arg.split_once('=')?;
    (DEFAULTS.iter().any(|(v, _)| *v == vendor) && !key.is_empty())
        .then(|| (vendor.to_owned(), key.to_owned()))
}

/// Sets the keys given on the command line (once, at start-up).
pub fn configure(keys: Vec<(String, String)>) {
    let _ = CONFIGURED.set(keys);
}

/// The one key `vendor` accepts.
pub fn expected(vendor: &str) -> &'static str {
    if let Some((_, k)) = CONFIGURED
        .get()
        .and_then(|c| c.iter().find(|(v, _)| v == vendor))
    {
        return k.as_str();
    }
    DEFAULTS
        .iter()
        .find(|(v, _)| *v == vendor)
        .map_or("", |(_, k)| k)
}

/// Whether `presented` is exactly the key `vendor` accepts.
pub fn matches(vendor: &str, presented: &str) -> bool {
    let want = expected(vendor);
    !want.is_empty() && presented == want
}

/// A key as OpenAI quotes it back: the first 3 and last 4 characters.
pub fn masked(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() <= 8 {
        return "*".repeat(chars.len());
    }
    let head: String = chars.iter().take(3).collect();
    let tail: String = chars.iter().skip(chars.len() - 4).collect();
    format!("{head}{}{tail}", "*".repeat(chars.len() - 7))
}
