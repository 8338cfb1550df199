//! What an attempt says besides its body: the vendor's response headers
//! passed on (and its wait only where a wait means something), and the
//! attempt's GenAI attributes for its upstream span.

use super::Attempt;
use crate::error::{retry_delay_in, ErrorCode, GatewayError};
use crate::headers::client_may_receive;
use crate::provider::{DialectKind, Provider};
use crate::session::host::{ignore, Host, HostError, Map};

/// The OpenTelemetry GenAI names of the vendor a provider reaches:
/// `(gen_ai.provider.name, gen_ai.system)`, the current semantic
/// conventions' attribute and the one it replaced (they differ for Azure).
/// An OpenAI-compatible server is `openai` (the conventions name the API
/// spoken when the vendor is unknown); DashScope has no registered value.
pub fn gen_ai_names(provider: &Provider) -> (&'static str, &'static str) {
    match provider.dialect {
        DialectKind::Openai => ("openai", "openai"),
        DialectKind::Anthropic => ("anthropic", "anthropic"),
        DialectKind::Gemini
            if provider
                .host
                .as_deref()
                .is_some_and(|h| h.ends_with("aiplatform.googleapis.com")) =>
        {
            ("gcp.vertex_ai", "gcp.vertex_ai")
        }
        DialectKind::Gemini => ("gcp.gemini", "gcp.gemini"),
        DialectKind::VertexGemini | DialectKind::VertexAnthropic => {
            ("gcp.vertex_ai", "gcp.vertex_ai")
        }
        DialectKind::Azure => ("azure.ai.openai", "az.ai.openai"),
        DialectKind::Bedrock => ("aws.bedrock", "aws.bedrock"),
        DialectKind::Dashscope => ("alibaba_cloud.dashscope", "alibaba_cloud.dashscope"),
    }
}

/// Filter state for a span's GenAI provider tags: the conventional names
/// of `provider`'s vendor, and the configured name (`llm.provider`).
pub fn span_provider_properties<'a>(
    name: &'a str,
    provider: Option<&Provider>,
) -> [(&'static str, Option<&'a str>); 3] {
    let (conventional, system) = provider.map(gen_ai_names).unzip();
    [
        ("llm_provider", Some(name)),
        ("llm_gen_ai_provider", conventional),
        ("llm_gen_ai_system", system),
    ]
}

/// How vendors say when to come back.
pub const WAIT_HEADERS: [&str; 2] = ["retry-after", "retry-after-ms"];

impl<H: Host> Attempt<H> {
    /// Per-attempt GenAI attributes for this attempt's upstream span (Envoy
    /// tracing's `spawn_upstream_span`): the request span's custom tags read
    /// the same filter state, and Envoy closes an attempt's span while these
    /// are this attempt's values. The edge role writes the request's own when
    /// the response ends, after the last attempt's span closed. Tokens are
    /// there when the vendor reported them, the response model when it answered.
    pub(super) fn publish_span_attributes(&self, answered: bool) {
        if !self.config.span_attributes {
            return;
        }
        let input = self.record.prompt_tokens.map(|t| t.to_string());
        let output = self.record.completion_tokens.map(|t| t.to_string());
        let provider = self.provider().map(|(p, _)| p);
        let names = span_provider_properties(&self.upstream.provider_name, provider);
        for (name, value) in names.into_iter().chain([
            ("llm_request_model", Some(self.upstream.model.as_str())),
            (
                "llm_response_model",
                answered.then_some(self.upstream.model.as_str()),
            ),
            ("llm_input_tokens", input.as_deref()),
            ("llm_output_tokens", output.as_deref()),
        ]) {
            ignore(self.host.set_span_attribute(name, value.map(str::as_bytes)));
        }
    }

    /// `retry-after` in seconds for a 429 or 503, from whatever form the
    /// vendor gave the wait in: its error body (Gemini's RetryInfo), its
    /// `retry-after-ms`, or its message ("try again in 20s"). A vendor's
    /// own `retry-after` passes as it is. Any other answer loses the
    /// vendor's wait headers: the failover routes retry an answer that has
    /// a short `retry-after` (Envoy's `retriable_headers`), which must only
    /// ever be a 429 or 503.
    pub(super) fn set_retry_after(&self, error: &GatewayError) -> Result<(), HostError> {
        if !matches!(
            error.code,
            ErrorCode::UpstreamRateLimit | ErrorCode::UpstreamBusy
        ) {
            if self.vendor.wait_headers {
                for name in WAIT_HEADERS {
                    self.host.set_header(Map::Response, name.as_bytes(), None)?;
                }
            }
            return Ok(());
        }
        if self.vendor.retry_after {
            return Ok(());
        }
        let seconds = error
            .retry_after
            .or(self.vendor.retry_after_ms)
            .or_else(|| retry_delay_in(&error.message));
        if let Some(seconds) = seconds {
            let value = seconds.to_string();
            self.host
                .set_header(Map::Response, b"retry-after", Some(value.as_bytes()))?;
        }
        Ok(())
    }

    /// Drops the vendor's response headers clients have no use for (cookies,
    /// account ids, debug echoes, infrastructure) and masks the key in the
    /// ones passed on (`headers::client_may_receive`).
    /// A success keeps no wait (see `set_retry_after`).
    pub(super) fn pass_vendor_headers(
        &self,
        headers: &crate::headers::Headers,
        success: bool,
    ) -> Result<(), HostError> {
        let redactor = self.provider().map(|(p, _)| &p.redactor);
        for (name, value) in &headers.0 {
            let wait = WAIT_HEADERS
                .iter()
                .any(|w| name.eq_ignore_ascii_case(w.as_bytes()));
            if !client_may_receive(name) || (success && wait) {
                self.host.set_header(Map::Response, name, None)?;
            } else if let Some(clean) = redactor.and_then(|r| r.scrubbed(value)) {
                self.host.set_header(Map::Response, name, Some(&clean))?;
            }
        }
        Ok(())
    }
}
