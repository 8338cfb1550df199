//! Google's errors as the Gemini API writes them (`google.rpc.Status`):
//! read from the vendor with their details as they came, written by the
//! Gemini surface with typed details ([`Detail`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `{"error": {...}}`, or a one-element array of it from stream endpoints.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum ErrorBody {
    One(ErrorEnvelope),
    Many(Vec<ErrorEnvelope>),
}

#[derive(Serialize, Deserialize, Debug)]
pub struct ErrorEnvelope<D = Value> {
    pub error: Status<D>,
}

/// `google.rpc.Status` as the Gemini API writes it; `D`, its details.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Status<D = Value> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub status: String,
    #[serde(default = "Vec::new", skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<D>,
}

/// The details the gateway's own errors carry, by their `@type`.
#[derive(Serialize, Debug)]
#[serde(tag = "@type")]
pub enum Detail {
    /// Why, as a reason and its facts (`google.rpc.ErrorInfo`).
    #[serde(rename = "type.googleapis.com/google.rpc.ErrorInfo")]
    ErrorInfo {
        reason: &'static str,
        domain: &'static str,
        metadata: Map<String, Value>,
    },
    /// When to try again (`google.rpc.RetryInfo`), as a duration: `"30s"`.
    #[serde(rename = "type.googleapis.com/google.rpc.RetryInfo")]
    RetryInfo {
        #[serde(rename = "retryDelay")]
        retry_delay: String,
    },
}
