//! How a request reaches a vendor, apart from what its body says: the URL
//! path and query, the auth and version headers, and for a streamed call
//! any switch the vendor wants in a header. A body format (a dialect's
//! encoder) names what it asks for ([`Operation`]); the provider's
//! transport ([`of`]) says where that goes and how it is authorized, so
//! one body can go over several transports (Gemini's on Google AI or
//! Vertex AI, Anthropic's on Anthropic or Vertex AI). One module per
//! transport; Bedrock's SigV4 signing is Envoy's, after the filter. A
//! transport may own provider settings of its own (Vertex AI's `project`
//! and `location`), read as a dialect's are (`dialects::settings`), and
//! may edit the body where its API moves what a header said elsewhere
//! (Claude on Vertex: `anthropic_version` in the body, the model in the
//! path).

use super::{DialectKind, Target, UpstreamRequest};
use crate::error::{ErrorCode, GatewayError};
use crate::model::call::Call;

mod anthropic;
mod azure;
mod bedrock;
mod dashscope;
mod google_ai;
mod openai;
pub mod vertex;

/// What a body is sent for, in its own API's words; a transport knows the
/// ones its vendor has.
#[derive(Clone, Copy, Debug)]
pub enum Operation<'a> {
    /// A generation (chat completion, message, generateContent,
    /// Converse...); `stream` asks for the streamed variant.
    Generate { stream: bool },
    /// A generation with images, where the vendor takes them at an
    /// endpoint of their own (DashScope's multimodal-generation).
    GenerateMultimodal { stream: bool },
    /// The model's own body format (Bedrock's InvokeModel).
    Invoke { stream: bool },
    /// OpenAI's Responses API.
    Responses,
    /// The vendor's token count for a generation's body.
    CountTokens,
    /// Embeddings of a batch of inputs (Bedrock's are `Invoke`).
    Embed,
    /// A native call of the client's API, by its path below the API's root
    /// (the stored-response calls).
    Call(&'a Call),
    /// A read of the vendor's model list (its path is the list's,
    /// `dialects::list`; the transport gives the auth).
    ListModels,
}

impl Operation<'_> {
    fn stream(self) -> bool {
        matches!(
            self,
            Operation::Generate { stream: true }
                | Operation::GenerateMultimodal { stream: true }
                | Operation::Invoke { stream: true }
        )
    }

    fn has_body(self) -> bool {
        match self {
            Operation::Call(call) => call.has_body(),
            Operation::ListModels => false,
            _ => true,
        }
    }
}

/// Where and how a vendor is reached.
pub trait Transport: Sync {
    /// The `:path` (query included) for `op` at `target`, below the
    /// provider's `base_path`.
    fn path(&self, op: Operation, target: &Target) -> Result<String, GatewayError>;

    /// The headers after the content type: versions, stream switches, and
    /// the auth the provider's key gives.
    fn headers(&self, op: Operation, target: &Target, headers: &mut Vec<(&'static str, String)>);

    /// The vendor API's embeddings when they are not the body format's
    /// (Vertex AI's Gemini embeds with `:predict` and a body of its own);
    /// `None`: the body format's, if it has any.
    fn embedder(&self) -> Option<&'static dyn super::embed::Embedder> {
        None
    }

    /// The vendor API's model list (`None`: it has none the gateway reads).
    fn lister(&self) -> Option<&'static dyn super::list::Lister> {
        None
    }

    /// The body as this transport's API takes it (by default as the body
    /// format made it).
    fn body(
        &self,
        _op: Operation,
        _target: &Target,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, GatewayError> {
        Ok(body)
    }

    /// The provider keys this transport reads as its settings (a provider
    /// has one settings section: its dialect's or its transport's).
    fn settings_keys(&self) -> &'static [super::settings::Key] {
        &[]
    }

    /// Reads and validates this transport's keys, as
    /// `Dialect::read_settings` does a dialect's.
    fn read_settings(
        &self,
        _members: serde_json::Map<String, serde_json::Value>,
        _field: &str,
    ) -> Result<Option<Box<dyn crate::provider::DialectSettings>>, String> {
        Ok(None)
    }
}

/// The transport of a provider of dialect `kind`.
pub fn of(kind: DialectKind) -> &'static dyn Transport {
    match kind {
        DialectKind::Openai => &openai::OpenAi,
        DialectKind::Anthropic => &anthropic::Anthropic,
        DialectKind::Gemini => &google_ai::GoogleAi,
        DialectKind::Azure => &azure::Azure,
        DialectKind::Bedrock => &bedrock::Bedrock,
        DialectKind::Dashscope => &dashscope::DashScope,
        DialectKind::VertexGemini => &vertex::Vertex(vertex::VertexGemini),
        DialectKind::VertexAnthropic => &vertex::Vertex(vertex::VertexAnthropic),
    }
}

/// The vendor request carrying `body` for `op` over `target`'s transport.
pub fn request(
    op: Operation,
    target: &Target,
    body: Vec<u8>,
) -> Result<UpstreamRequest, GatewayError> {
    let transport = of(target.provider.dialect);
    let mut headers = Vec::with_capacity(3);
    if op.has_body() {
        headers.push(("content-type", "application/json".to_owned()));
    }
    transport.headers(op, target, &mut headers);
    let path = transport.path(op, target)?;
    let body = transport.body(op, target, body)?;
    Ok(UpstreamRequest {
        path: format!("{}{path}", target.provider.base_path),
        headers,
        body,
    })
}

/// `authorization: Bearer` with the provider's key, when it has one.
fn bearer(target: &Target, headers: &mut Vec<(&'static str, String)>) {
    if let Some(key) = &target.provider.resolved_key {
        headers.push(("authorization", format!("Bearer {}", key.expose())));
    }
}

/// The error for an operation a transport's vendor does not have (a
/// dialect asking for it is a bug, answered, not a panic).
fn unsupported(op: Operation) -> GatewayError {
    GatewayError::new(
        ErrorCode::UpstreamError,
        format!("this provider's transport has no {op:?} operation"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every transport answers every operation, with a path or an error:
    /// a dialect asking for one its vendor lacks never panics the VM.
    #[test]
    fn every_transport_answers_every_operation() {
        let stored = crate::surfaces::routed_call("GET", "/v1/responses/resp_1", "");
        let count = crate::surfaces::routed_call("POST", "/v1/messages/count_tokens", "");
        for kind in DialectKind::ALL {
            let name = serde_json::to_string(kind).unwrap();
            let version = match kind {
                DialectKind::Azure => r#","api_version":"v1""#,
                DialectKind::VertexGemini | DialectKind::VertexAnthropic => {
                    r#","project":"p","location":"global""#
                }
                _ => "",
            };
            let config = crate::config::Config::parse(
                format!(
                    r#"{{"providers":{{"p":{{"dialect":{name},"api_key":"k"{version}}}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#
                )
                .as_bytes(),
                |_| None,
            )
            .unwrap();
            let target = Target {
                provider: &config.providers["p"],
                model: "m",
            };
            for op in [
                Operation::Generate { stream: true },
                Operation::GenerateMultimodal { stream: false },
                Operation::Invoke { stream: true },
                Operation::Responses,
                Operation::CountTokens,
                Operation::Embed,
                Operation::Call(&count),
                Operation::Call(&stored),
                Operation::ListModels,
            ] {
                if let Ok(up) = request(op, &target, b"{}".to_vec()) {
                    assert!(up.path.starts_with('/'), "{kind:?} {op:?}: {}", up.path);
                    assert!(
                        up.headers.iter().any(|(_, v)| v.contains('k')),
                        "{kind:?} {op:?}: auth"
                    );
                }
            }
        }
    }
}
