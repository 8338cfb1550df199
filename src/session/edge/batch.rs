//! Embeddings batches larger than their vendor embeds at once, split by the
//! edge role into parts, each a self-call (`session::self_call`): a request
//! of the client's own API for that part of the inputs, through the
//! gateway's own listener, so each part is routed, retried and failed over
//! by Envoy and translated by its attempts like any request. The parent
//! holds the client's request (it never reaches the router), has at most
//! `self_calls.max_in_flight` parts out at once, and answers when the last
//! part has.
//!
//! - **Which parts.** When the chosen candidate names its provider, the
//!   edge knows the vendor's per-call limit (`Embedder::max_inputs`) and
//!   sends a batch within it as any request (no self-call), a larger one as
//!   parts of that size. When the candidate leaves the provider to the
//!   cluster's endpoints, a batch of two or more inputs goes as one part;
//!   the attempt that reaches a vendor with a smaller limit calls no one
//!   and answers the 400 naming it (`x-llm-batch-limit`), and the parent
//!   splits that part by it. So does a part that failed over to a vendor
//!   with a smaller limit. Parts never split themselves (no recursion).
//! - **One vendor.** Every part is routed to the parent's candidate
//!   (`x-llm-candidate`), so weights and stickiness pick once per batch.
//!   Envoy may still fail a part over inside the candidate's cluster (an
//!   aggregate): to the same vendor model elsewhere (another account or
//!   region) the batch is whole; to another model (`x-llm-model` of the
//!   parts differ) the vectors would not be comparable, so the batch fails
//!   with a 503 (`UPSTREAM_BUSY`, `retry-after: 1`), none returned.
//! - **Failures.** A part that fails fails the batch with its own answer
//!   (status, error body in the client's envelope, `retry-after`, as a
//!   request of that size would have failed): never a partial answer. The
//!   parts still out are cancelled with the request.
//! - **Metering.** The parent was admitted by the limits for the whole
//!   batch; the parts are not admitted, charged nor metered (their edge
//!   skips it), and each part's answer reports its attempts
//!   (`x-llm-part`): the parent's access-log line, metrics and settled
//!   budgets are the sum of its parts', the route every part's attempts.

use std::collections::VecDeque;

use super::*;
use crate::dialects::embed::{max_inputs, render};
use crate::metering::Price;
use crate::model::embed::{EmbedInput, EmbedRequest, Embeddings};
use crate::session::attempt::BATCH_LIMIT_HEADER;
use crate::session::callouts::{Callout, Callouts};
use crate::session::host::CalloutAnswer;
use crate::session::self_call::{self, PartReport, CANDIDATE_HEADER, PART_HEADER};
use crate::wire::{gemini_embeddings, openai_embeddings};

/// The inputs `from..to` of the batch.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Part {
    from: usize,
    to: usize,
}

impl Part {
    fn len(self) -> usize {
        self.to - self.from
    }

    /// This part cut into parts of at most `size` inputs.
    fn split(self, size: usize) -> impl DoubleEndedIterator<Item = Part> {
        let size = size.max(1);
        (self.from..self.to)
            .step_by(size)
            .map(move |from| Part {
                from,
                to: (from + size).min(self.to),
            })
            .collect::<Vec<_>>()
            .into_iter()
    }
}

/// A batch being answered by its parts.
pub(super) struct Batch {
    call: Call,
    request: EmbedRequest,
    /// What each part's request carries: the client's headers (not its
    /// credentials, not the gateway's own), and the self-call's.
    headers: Vec<(String, Vec<u8>)>,
    authority: String,
    waiting: VecDeque<Part>,
    out: Callouts<Part>,
    /// The vectors, by input (a part fills its own).
    vectors: Vec<Vec<f32>>,
    /// OpenAI's usage: the parts' (the vendor's count, else the estimate).
    tokens: u64,
    /// The vendor model of the first part answered; every part's must be it.
    model: Option<String>,
    /// The model the first part's answer names (Azure's: the deployment's
    /// model, where `model` is the deployment), for the whole answer.
    named: Option<String>,
    /// What each answered part's attempts were, with its estimated tokens.
    reports: Vec<(PartReport, u64)>,
    /// The parts whose vectors the answer is made of.
    parts: usize,
}

/// What the client's request becomes, once routed.
pub(super) enum Sent {
    /// Split: the parent waits for its parts.
    Split(Flow),
    /// Sent whole, as any request (given back).
    Whole(Option<Request>),
}

impl<H: Host> Edge<H> {
    /// Splits `request` (routed to candidate `index` of `group`) into parts
    /// when it is an embeddings batch that needs it and self-calls are on;
    /// else gives it back to be sent whole.
    pub(super) fn split_batch(
        &mut self,
        call: &Call,
        request: Option<Request>,
        group: &str,
        index: usize,
    ) -> Result<Sent, GatewayError> {
        let size = match (&request, &self.config.self_calls) {
            (Some(Request::Embed(embed)), Some(_)) if self.part.is_none() => {
                self.part_size(embed, group, index)
            }
            _ => None,
        };
        let Some(size) = size else {
            return Ok(Sent::Whole(request));
        };
        // No secret (no shared data or entropy): sent whole, as without self-calls.
        let Some(secret) = self_call::secret(&self.host) else {
            return Ok(Sent::Whole(request));
        };
        let Some(Request::Embed(embed)) = request else {
            return Ok(Sent::Whole(request));
        };
        let limit = self
            .config
            .self_calls
            .as_ref()
            .map_or(1, |s| s.max_in_flight);
        let whole = Part {
            from: 0,
            to: embed.input.len(),
        };
        let mut headers = part_headers(&self.request_headers);
        headers.extend([
            ("content-type".to_owned(), b"application/json".to_vec()),
            (
                "x-request-id".to_owned(),
                self.request_id.clone().into_bytes(),
            ),
            ("x-model-group".to_owned(), group.as_bytes().to_vec()),
            (self_call::HEADER.to_owned(), secret.into_bytes()),
            (CANDIDATE_HEADER.to_owned(), index.to_string().into_bytes()),
        ]);
        let authority = self
            .request_headers
            .get(":authority")
            .unwrap_or(b"llm-gateway");
        self.batch = Some(Box::new(Batch {
            call: call.clone(),
            authority: String::from_utf8_lossy(authority).into_owned(),
            headers,
            waiting: whole.split(size).collect(),
            out: Callouts::new(limit),
            vectors: vec![Vec::new(); embed.input.len()],
            tokens: 0,
            model: None,
            named: None,
            reports: Vec::new(),
            parts: 0,
            request: embed,
        }));
        self.state = State::Splitting;
        Ok(Sent::Split(self.send_parts()))
    }

    /// The parts' size for `request` on candidate `index` of `group`: its
    /// vendor's limit when the candidate names it and the batch exceeds it,
    /// the whole batch (to be split by the answer) when it names none;
    /// `None`: sent whole, as any request.
    fn part_size(&self, request: &EmbedRequest, group: &str, index: usize) -> Option<usize> {
        let inputs = request.input.len();
        if inputs < 2 || request.answer == crate::model::embed::AnswerShape::GeminiOne {
            return None;
        }
        let candidate = self.config.model_groups.get(group)?.candidates.get(index)?;
        let Some(name) = candidate.provider.as_deref() else {
            return Some(inputs);
        };
        let provider = self.config.providers.get(name)?;
        let model = candidate
            .model
            .as_deref()
            .unwrap_or_else(|| provider.vendor_model(group, &request.model));
        max_inputs(provider, model).filter(|max| inputs > *max)
    }

    /// Sends waiting parts while there is room; the batch's answer once
    /// every part answered.
    fn send_parts(&mut self) -> Flow {
        let Some(batch) = self.batch.as_deref_mut() else {
            return Flow::Pause;
        };
        let settings = self.config.self_calls.as_ref();
        let (cluster, timeout_ms) =
            settings.map_or(("", 1), |s| (s.cluster.as_str(), s.timeout_ms));
        let mut refused = None;
        while batch.out.has_room() {
            let Some(part) = batch.waiting.pop_front() else {
                break;
            };
            let (path, body) = batch.part_request(part);
            let headers: Vec<(&str, &[u8])> = (batch.headers.iter())
                .map(|(n, v)| (n.as_str(), v.as_slice()))
                .collect();
            let call = Callout {
                cluster,
                method: "POST",
                path: &path,
                authority: &batch.authority,
                headers: &headers,
                body: &body,
                timeout_ms,
            };
            if let Err(e) = batch.out.send(&self.host, &call, part) {
                refused = Some(GatewayError::new(
                    ErrorCode::UpstreamError,
                    format!(
                        "the gateway could not send a part of the batch to its own listener \
                         (self_calls.cluster '{cluster}'): {e}"
                    ),
                ));
                break;
            }
        }
        let done = batch.out.is_empty() && batch.waiting.is_empty();
        match refused {
            Some(error) => self.reject(error),
            None if done => self.answer_batch(),
            None => Flow::Pause,
        }
    }

    /// A part's answer: its vectors kept, or the batch's failure.
    pub(super) fn on_part(&mut self, token: u32, answer: CalloutAnswer) -> Flow {
        let Some(batch) = self.batch.as_deref_mut() else {
            return Flow::Pause;
        };
        let Some(part) = batch.out.answered(token) else {
            return Flow::Pause;
        };
        if !matches!(self.state, State::Splitting) {
            return Flow::Pause;
        }
        let CalloutAnswer::Answered {
            status,
            headers,
            body,
        } = answer
        else {
            return self.reject(GatewayError::new(
                ErrorCode::UpstreamError,
                format!(
                    "part {}-{} of the batch got no answer from the gateway's own listener",
                    part.from, part.to
                ),
            ));
        };
        let limit = headers
            .text(BATCH_LIMIT_HEADER)
            .ok()
            .flatten()
            .and_then(|v| v.parse::<usize>().ok());
        match limit {
            // Its vendor embeds fewer at once: sent again in parts of that size.
            Some(max) if status == 400 && max >= 1 && max < part.len() => {
                for smaller in part.split(max).rev() {
                    batch.waiting.push_front(smaller);
                }
                return self.send_parts();
            }
            _ => {}
        }
        let estimate = batch
            .request
            .input
            .slice(part.from, part.to)
            .estimated_tokens();
        let report = headers
            .get(PART_HEADER)
            .and_then(PartReport::decode)
            .unwrap_or_default();
        batch.reports.push((report, estimate));
        if !(200..300).contains(&status) {
            return self.fail_batch(status, &headers, &body);
        }
        let model = String::from_utf8_lossy(headers.get("x-llm-model").unwrap_or_default());
        match &batch.model {
            None => batch.model = Some(model.into_owned()),
            Some(first) if *first != model => {
                let mut e = GatewayError::new(
                    ErrorCode::UpstreamBusy,
                    format!(
                        "the batch's parts were embedded by different models ({first} and \
                         {model}) after a part failed over: vectors of different models \
                         cannot be compared, so none is returned; retry the request"
                    ),
                );
                e.retry_after = Some(1);
                return self.reject(e);
            }
            Some(_) => {}
        }
        if batch.named.is_none() {
            batch.named = crate::wire::openai_embeddings::answered_model(&body);
        }
        match batch.keep(part, &body) {
            Ok(()) => self.send_parts(),
            Err(e) => self.reject(e),
        }
    }

    /// The batch fails with a part's answer, as a request of that part
    /// would have: its status, body (the client's API's envelope) and the
    /// headers that say why.
    fn fail_batch(&mut self, status: u16, headers: &Headers, body: &[u8]) -> Flow {
        self.status = status;
        let mut reply: Vec<(&str, &[u8])> = vec![("x-request-id", self.request_id.as_bytes())];
        for name in [
            "content-type",
            "retry-after",
            "retry-after-ms",
            "x-llm-provider",
            "x-llm-attempts",
        ] {
            if let Some(value) = headers.get(name) {
                reply.push((name, value));
            }
        }
        let limits = self.limits.as_ref().map(RequestLimits::header_pairs);
        let limits = limits.unwrap_or_default();
        reply.extend(limits.iter().map(|(n, v)| (*n, v.as_bytes())));
        reply_or_reset(&self.host, status, &reply, body);
        self.state = State::Replied;
        Flow::Pause
    }

    /// Every part answered: the vectors in the client's order, in its API's
    /// shape, OpenAI's usage summed.
    fn answer_batch(&mut self) -> Flow {
        let Some(batch) = self.batch.as_deref_mut() else {
            return Flow::Pause;
        };
        let model = batch.model.clone().unwrap_or_default();
        let answer = Embeddings {
            vectors: std::mem::take(&mut batch.vectors),
            prompt_tokens: None,
        };
        let named = batch.named.as_deref().unwrap_or(&model);
        let body = render(batch.request.answer, &answer, named, batch.tokens);
        let (parts, attempts) = (
            batch.parts.to_string(),
            batch.attempts().0.len().to_string(),
        );
        let provider = batch
            .reports
            .last()
            .and_then(|(r, _)| r.records.last())
            .map(|r| r.provider.clone())
            .unwrap_or_default();
        let limits = self.limits.as_ref().map(RequestLimits::header_pairs);
        let limits = limits.unwrap_or_default();
        let mut headers: Vec<(&str, &[u8])> = vec![
            ("content-type", b"application/json"),
            ("x-request-id", self.request_id.as_bytes()),
            ("x-llm-provider", provider.as_bytes()),
            ("x-llm-model", model.as_bytes()),
            ("x-llm-attempts", attempts.as_bytes()),
            ("x-llm-parts", parts.as_bytes()),
        ];
        headers.extend(limits.iter().map(|(n, v)| (*n, v.as_bytes())));
        reply_or_reset(&self.host, 200, &headers, &body);
        self.status = 200;
        self.state = State::Replied;
        Flow::Pause
    }

    /// A self-call's edge: what its attempts were, for the request that
    /// made it (on its answer's headers).
    pub(super) fn report_part(&self) {
        let (records, route) = self.channel.attempts(&self.host);
        if let Some(value) = (PartReport { records, route }).encode() {
            ignore(
                self.host
                    .set_header(Map::Response, PART_HEADER.as_bytes(), Some(&value)),
            );
        }
    }
}

impl Batch {
    /// A part's request: the client's API's, for its inputs.
    fn part_request(&self, part: Part) -> (String, Vec<u8>) {
        let mut request = self.request.clone();
        request.input = self.request.input.slice(part.from, part.to);
        let body = match (&self.call, &request.input) {
            (Call::GeminiEmbed { model, .. }, EmbedInput::Texts(texts)) => {
                let named = format!("models/{model}");
                serde_json::to_vec(&gemini_embeddings::batch_request(&request, texts, &named))
            }
            _ => serde_json::to_vec(&openai_embeddings::PartRequest::of(&request)),
        };
        let path = match &self.call {
            Call::GeminiEmbed { model, .. } => Call::GeminiEmbed {
                model: model.clone(),
                batch: true,
            }
            .path(),
            _ => Call::Embed.path(),
        };
        (path, body.unwrap_or_default())
    }

    /// A part's 2xx answer: its vectors in their places, its usage counted.
    fn keep(&mut self, part: Part, body: &[u8]) -> Result<(), GatewayError> {
        let answer = match self.call {
            Call::GeminiEmbed { .. } => gemini_embeddings::decode_batch(body)?,
            _ => openai_embeddings::decode(body)?,
        };
        if answer.vectors.len() != part.len() {
            return Err(crate::model::embed::wrong_count(
                part.len(),
                answer.vectors.len(),
            ));
        }
        self.tokens += answer.prompt_tokens.unwrap_or_default();
        self.parts += 1;
        let slots = self.vectors.get_mut(part.from..part.to).unwrap_or_default();
        for (slot, vector) in slots.iter_mut().zip(answer.vectors) {
            *slot = vector;
        }
        Ok(())
    }

    /// Every part's attempts and route entries, in the order they answered.
    pub(super) fn attempts(&self) -> (Vec<AttemptRecord>, Vec<String>) {
        let records = self.reports.iter().flat_map(|(r, _)| r.records.clone());
        let route = self.reports.iter().flat_map(|(r, _)| r.route.clone());
        (records.collect(), route.collect())
    }

    /// What the parts' vendors billed: each part as a request of its own.
    pub(super) fn bill<'p>(&self, price: impl Fn(&AttemptRecord) -> Option<&'p Price>) -> Bill {
        let mut total = Bill::default();
        for (report, estimate) in &self.reports {
            let bill = Bill::of(&report.records, *estimate, &price);
            total.usage = total.usage.plus(&bill.usage);
            total.usage_estimated |= bill.usage_estimated;
            if let Some(cost) = bill.cost_usd {
                *total.cost_usd.get_or_insert(0.0) += cost;
            }
            total.attempts.extend(bill.attempts);
        }
        total
    }
}

/// The client's request headers a part carries: not the pseudo-headers, the
/// body's and connection's own, its credentials, Envoy's nor the gateway's.
fn part_headers(client: &Headers) -> Vec<(String, Vec<u8>)> {
    const LEFT_OUT: [&str; 12] = [
        "content-length",
        "content-type",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "upgrade",
        "expect",
        "accept-encoding",
        "x-request-id",
        "x-model-group",
    ];
    client
        .0
        .iter()
        .filter(|(name, _)| {
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            !(name.starts_with(':')
                || name.starts_with("x-llm-")
                || name.starts_with("x-envoy-")
                || LEFT_OUT.contains(&name.as_str())
                || CREDENTIAL_HEADERS.contains(&name.as_str()))
        })
        .map(|(n, v)| (String::from_utf8_lossy(n).into_owned(), v.clone()))
        .collect()
}
