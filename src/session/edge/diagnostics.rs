//! The edge role's part of the diagnostics view (`crate::diagnostics`):
//! answering its paths, and recording each request when it ends, with its
//! prompt and answer when the view captures content.

use super::*;
use crate::config::Diagnostics;
use crate::diagnostics::trace::{captured, flag_names, retry_on, AttemptTrace, Trace};
use crate::diagnostics::{self, ring, Ask};
use crate::session::host::unix_millis;
use crate::session::shared_data::HostStore;

/// What a request said and was answered, kept for the view (`capture_content`).
#[derive(Default)]
pub(super) struct Capture {
    prompt: Vec<u8>,
    answer: Vec<u8>,
}

impl<H: Host> Edge<H> {
    /// Answers a request under the view's prefix (whether the view is on
    /// or not: nothing under it is ever routed).
    pub(super) fn serve_diagnostics(&mut self, method: &str, path: &str, query: &str) -> Flow {
        let headers = std::mem::take(&mut self.client.request_headers);
        let text = |name: &str| headers.text(name).ok().flatten();
        let ask = Ask {
            method,
            path,
            query,
            key: presented_key(text("authorization"), text("x-api-key")),
            request_id: &self.client.request_id,
        };
        let host = &self.host;
        let loopback = || {
            host.property(&["source", "address"])
                .ok()
                .flatten()
                .is_some_and(|a| diagnostics::is_loopback(&String::from_utf8_lossy(&a)))
        };
        let reply = diagnostics::serve(
            &self.config,
            &view_store(host),
            unix_millis(host),
            &ask,
            loopback,
        );
        ignore(host.count(
            "llm_gateway.diagnostics_requests",
            &[("outcome", reply.outcome)],
            1,
        ));
        let mut out: Vec<(&str, &[u8])> = reply
            .headers
            .iter()
            .map(|(n, v)| (*n, v.as_bytes()))
            .collect();
        out.push(("x-request-id", self.client.request_id.as_bytes()));
        reply_or_reset(host, reply.status, &out, &reply.body);
        self.outcome.status = reply.status;
        self.state = State::Replied;
        Flow::Pause
    }

    /// Keeps the first bytes of the prompt, when the view captures content.
    pub(super) fn capture_prompt(&mut self, body: &[u8]) {
        if let Some(settings) = self
            .config
            .diagnostics
            .as_ref()
            .filter(|d| d.capture_content)
        {
            let capture = self.capture.get_or_insert_with(Box::default);
            capture.prompt = body.get(..settings.capture_bytes).unwrap_or(body).to_vec();
        }
    }

    /// Keeps the first bytes of the answer as the client gets it.
    pub(super) fn capture_answer_chunk(&mut self, size: usize) {
        let Some(settings) = self
            .config
            .diagnostics
            .as_ref()
            .filter(|d| d.capture_content)
        else {
            return;
        };
        let capture = self.capture.get_or_insert_with(Box::default);
        let room = settings.capture_bytes.saturating_sub(capture.answer.len());
        if room == 0 || size == 0 {
            return;
        }
        if let Ok(chunk) = self.host.body(Buffer::Response, 0, size.min(room)) {
            capture.answer.extend_from_slice(&chunk);
        }
    }

    /// Records the request in the ring, from what its access-log line says
    /// and its attempts' own records.
    pub(super) fn record_trace(
        &self,
        settings: &Diagnostics,
        chat: &ChatFacts,
        records: &[AttemptRecord],
        log: &RequestLog<'_>,
    ) {
        let at_ms = self
            .outcome
            .started
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut attempts: Vec<AttemptTrace> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            if r.provider.is_empty() {
                continue;
            }
            let retried_on = attempts
                .last()
                .map(|previous| retry_on(previous).to_owned());
            attempts.push(AttemptTrace {
                n: i as u64 + 1,
                provider: r.provider.clone(),
                model: r.model.clone(),
                status: r.status,
                outcome: r.outcome(),
                code: r.code.clone(),
                start_ms: r.started_ms.map(|s| s.saturating_sub(at_ms)),
                latency_ms: r.latency_ms,
                ttft_ms: r.ttft_ms,
                input_tokens: r.prompt_tokens,
                output_tokens: r.completion_tokens,
                context: r.context.clone(),
                retry_on: retried_on,
            });
        }
        // Envoy's verdicts matter where it refused or retried (one read).
        let envoy_flags = if log.status >= 400 || log.attempts > 1 {
            let bits = self
                .host
                .property(&["response", "flags"])
                .ok()
                .flatten()
                .and_then(|b| b.get(..8).and_then(|b| b.try_into().ok()))
                .map_or(0, u64::from_le_bytes);
            flag_names(bits)
        } else {
            Vec::new()
        };
        let cluster = self
            .admission
            .sent_to
            .and_then(|i| self.config.model_groups.get(&chat.group)?.candidates.get(i))
            .map(|c| c.cluster.clone())
            .unwrap_or_default();
        let capture = self.capture.as_deref();
        let mut trace = Trace {
            seq: 0,
            at_ms,
            request_id: log.request_id.to_owned(),
            surface: log.surface.to_owned(),
            operation: log.operation.to_owned(),
            group: log.group.to_owned(),
            key: log.key.to_owned(),
            model: chat.request_model.clone(),
            cluster,
            stream: log.stream,
            status: log.status,
            code: log.code.map(str::to_owned),
            duration_ms: log.duration_ms,
            ttft_ms: log.ttft_ms,
            input_tokens: log.counts.prompt_tokens,
            output_tokens: log.counts.completion_tokens,
            cached_tokens: log.counts.cached_tokens,
            usage_estimated: log.counts.usage_estimated,
            cost_usd: log.counts.cost_usd,
            envoy_flags,
            rate_limit: log.rate_limit.map(str::to_owned),
            client_disconnected: log.client_disconnected,
            cache: log.cache.map(str::to_owned),
            fitting: None,
            attempts,
            attempts_dropped: 0,
            prompt: capture.map(|c| captured(&c.prompt, settings.capture_bytes)),
            answer: capture.map(|c| captured(&c.answer, settings.capture_bytes)),
        };
        ring::record(
            &view_store(&self.host),
            settings.recent_requests,
            &mut trace,
        );
    }
}

/// Creates what the edge role counts in shared data when a configuration
/// loads: the limits' counters and the diagnostics view's.
pub fn prepare(host: &impl Host, config: &Config) {
    limiter::prepare(host, config);
    diagnostics::prepare(&view_store(host), config);
}

/// Shared data for the view (its ring and counters).
fn view_store<H: Host>(host: &H) -> HostStore<'_, H> {
    HostStore::new(host, "the diagnostics view misses it")
}
