//! Embeddings batches larger than their vendor embeds at once, split by the
//! edge role into parts, each a self-call (`session::self_call`): a request
//! of the client's own API for that part of the inputs (which the client's
//! surface writes and reads: `Surface::embeddings_part`), through the
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
//!   splits that part by it. Every part's answer says its vendor's limit,
//!   which the edge keeps (`edge/seen_limits.rs`): later batches to that
//!   candidate split at once, or go as any request when they fit. So does a part that failed over to a vendor
//!   with a smaller limit. Parts never split themselves (no recursion).
//! - **Mixed tasks or sizes.** A Gemini client's batch whose requests
//!   differ in `taskType` or `outputDimensionality` (Gemini takes that in
//!   one call; no other vendor does) goes as parts of one task and size
//!   each (`EmbedRequest::groups`), even within the vendor's limit, and is
//!   answered in its own order. Without self-calls it is refused.
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
use crate::dialects::embed::max_inputs;
use crate::metering::Price;
use crate::model::call::{CallAnswer, Embedded};
use crate::model::embed::{mixed_batch, EmbedRequest, Embeddings, InputOptions};
use crate::session::attempt::BATCH_LIMIT_HEADER;
use crate::session::callouts::{Callout, Callouts};
use crate::session::host::CalloutAnswer;
use crate::session::self_call::{self, PartReport, CANDIDATE_HEADER, PART_HEADER};

/// The inputs at `from..to` of the batch's order, all of group `group`
/// (one task and size).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Part {
    from: usize,
    to: usize,
    group: usize,
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
                to: from.saturating_add(size).min(self.to),
                group: self.group,
            })
            .collect::<Vec<_>>()
            .into_iter()
    }
}

/// A batch being answered by its parts.
pub(super) struct Batch {
    call: Call,
    /// The model group and candidate every part goes to.
    group: String,
    candidate: usize,
    request: EmbedRequest,
    /// What each part's request carries: the client's headers (not its
    /// credentials, not the gateway's own), and the self-call's.
    headers: Vec<(String, Vec<u8>)>,
    authority: String,
    /// The inputs, group by group (`EmbedRequest::groups`): a part's
    /// inputs are `order[part.from..part.to]`.
    order: Vec<usize>,
    /// Each group's task and size.
    groups: Vec<InputOptions>,
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
    /// The global rate limits admitted the request: its first part passed
    /// them (the others wait for it), or there are none to pass.
    admitted: bool,
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
        // A self-call's request is one part: never split again.
        let embed = match &request {
            Some(Request::Embed(embed)) if self.client.part.is_none() => embed,
            _ => return Ok(Sent::Whole(request)),
        };
        // Without self-calls (or a secret: no shared data or entropy), sent
        // whole; a batch of mixed tasks or sizes cannot be.
        let whole = |request| match request {
            Some(Request::Embed(e)) if !e.mixed.is_empty() => Err(mixed_batch()),
            request => Ok(Sent::Whole(request)),
        };
        if self.config.self_calls.is_none() {
            return whole(request);
        }
        let Some(size) = self.part_size(embed, group, index) else {
            return whole(request);
        };
        let Some(secret) = self_call::secret(&self.host) else {
            return whole(request);
        };
        let Some(Request::Embed(embed)) = request else {
            return Ok(Sent::Whole(request));
        };
        let limit = self
            .config
            .self_calls
            .as_ref()
            .map_or(1, |s| s.max_in_flight);
        // Each group's parts, in the order its inputs come.
        let (mut order, mut groups) = (Vec::with_capacity(embed.input.len()), Vec::new());
        let mut waiting = VecDeque::new();
        for (options, inputs) in embed.groups() {
            let group = Part {
                from: order.len(),
                to: order.len() + inputs.len(),
                group: groups.len(),
            };
            waiting.extend(group.split(size));
            order.extend(inputs);
            groups.push(options);
        }
        let mut headers = part_headers(&self.client.request_headers);
        headers.extend([
            ("content-type".to_owned(), b"application/json".to_vec()),
            (
                "x-request-id".to_owned(),
                self.client.request_id.clone().into_bytes(),
            ),
            ("x-model-group".to_owned(), group.as_bytes().to_vec()),
            (self_call::HEADER.to_owned(), secret.into_bytes()),
            (CANDIDATE_HEADER.to_owned(), index.to_string().into_bytes()),
        ]);
        let global = self.config.limits.descriptors;
        if global {
            let key = self.key_name().as_bytes().to_vec();
            headers.push((self_call::KEY_HEADER.to_owned(), key));
        }
        let authority = self
            .client
            .request_headers
            .get(":authority")
            .unwrap_or(b"llm-gateway");
        self.batch = Some(Box::new(Batch {
            call: call.clone(),
            group: group.to_owned(),
            candidate: index,
            authority: String::from_utf8_lossy(authority).into_owned(),
            headers,
            order,
            groups,
            waiting,
            out: Callouts::new(limit),
            vectors: vec![Vec::new(); embed.input.len()],
            tokens: 0,
            model: None,
            named: None,
            reports: Vec::new(),
            parts: 0,
            admitted: !global,
            request: embed,
        }));
        self.state = State::Splitting;
        Ok(Sent::Split(self.send_parts()))
    }

    /// The parts' size for `request` on candidate `index` of `group`: its
    /// vendor's limit when the candidate names it and the batch exceeds it
    /// (or mixes tasks or sizes), each group whole (to be split by the
    /// answer) when it names none; `None`: sent whole, as any request.
    fn part_size(&self, request: &EmbedRequest, group: &str, index: usize) -> Option<usize> {
        let inputs = request.input.len();
        let mixed = !request.mixed.is_empty();
        if !mixed && inputs < 2 {
            return None;
        }
        let candidate = self.config.model_groups.get(group)?.candidates.get(index)?;
        let Some(name) = candidate.provider.as_deref() else {
            // Its vendor's limit as an earlier batch's parts said it, if one did.
            let seen = seen_limits::config_id(&self.config);
            return match seen_limits::learned(seen, group, index, &request.model) {
                Some(max) if !mixed && inputs <= max => None,
                Some(max) => Some(max),
                None => Some(inputs),
            };
        };
        let provider = self.config.providers.get(name)?;
        let model = candidate
            .model
            .as_deref()
            .unwrap_or_else(|| provider.vendor_model(group, &request.model));
        match max_inputs(provider, model) {
            Some(max) if mixed || inputs > max => Some(max),
            // Within its limit, or no embeddings there (its attempt says so).
            _ => mixed.then_some(inputs),
        }
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
            // The part admitting the request is out: the others wait for it.
            if !batch.admitted && !batch.out.is_empty() {
                break;
            }
            let Some(part) = batch.waiting.pop_front() else {
                break;
            };
            let (path, body) = match batch.part_request(part) {
                Ok(request) => request,
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            };
            let mut headers: Vec<(&str, &[u8])> = (batch.headers.iter())
                .map(|(n, v)| (n.as_str(), v.as_slice()))
                .collect();
            if !batch.admitted {
                headers.push((self_call::ADMITS_HEADER, b"1"));
            }
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
        // It passed the global rate limits, or its answer fails the batch.
        batch.admitted = true;
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
        if let Some(max) = limit {
            let seen = seen_limits::config_id(&self.config);
            let model = &batch.request.model;
            seen_limits::learn(seen, &batch.group, batch.candidate, model, max);
        }
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
        let estimate = batch.part_of(part).input.estimated_tokens();
        let report = headers
            .get(PART_HEADER)
            .and_then(PartReport::decode)
            .unwrap_or_default();
        let rate_limited = report.rate_limited;
        batch.reports.push((report, estimate));
        if rate_limited {
            self.refused_globally(&headers);
            return self.fail_batch(status, &headers, &body);
        }
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
        match batch.keep(part, &body) {
            Ok(()) => self.send_parts(),
            Err(e) => self.reject(e),
        }
    }

    /// The batch fails with a part's answer, as a request of that part
    /// would have: its status, body (the client's API's envelope) and the
    /// headers that say why.
    fn fail_batch(&mut self, status: u16, headers: &Headers, body: &[u8]) -> Flow {
        self.outcome.status = status;
        let mut reply: Vec<(&str, &[u8])> =
            vec![("x-request-id", self.client.request_id.as_bytes())];
        for (name, value) in &headers.0 {
            let passed = matches!(
                name.as_slice(),
                b"content-type"
                    | b"retry-after"
                    | b"retry-after-ms"
                    | b"x-llm-provider"
                    | b"x-llm-attempts"
            ) || name.starts_with(b"x-ratelimit-")
                || name.starts_with(b"x-llm-ratelimit-");
            if let (true, Ok(name)) = (passed, std::str::from_utf8(name)) {
                reply.push((name, value));
            }
        }
        // The local limits' headers, but where a global limit's said it.
        let limits = self
            .admission
            .limits
            .as_ref()
            .map(RequestLimits::header_pairs);
        let limits = limits.unwrap_or_default();
        for (name, value) in &limits {
            if !reply.iter().any(|(n, _)| n == name) {
                reply.push((name, value.as_bytes()));
            }
        }
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
        let answer = CallAnswer::Embeddings(Embedded {
            embeddings: Embeddings {
                vectors: std::mem::take(&mut batch.vectors),
                prompt_tokens: None,
            },
            model: batch.named.clone().unwrap_or_else(|| model.clone()),
            tokens: batch.tokens,
            encoding: batch.request.encoding,
        });
        let body = crate::surfaces::surface(batch.call.api).render_call(&batch.call, answer);
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
        let limits = self
            .admission
            .limits
            .as_ref()
            .map(RequestLimits::header_pairs);
        let limits = limits.unwrap_or_default();
        let mut headers: Vec<(&str, &[u8])> = vec![
            ("content-type", b"application/json"),
            ("x-request-id", self.client.request_id.as_bytes()),
            ("x-llm-provider", provider.as_bytes()),
            ("x-llm-model", model.as_bytes()),
            ("x-llm-attempts", attempts.as_bytes()),
            ("x-llm-parts", parts.as_bytes()),
        ];
        headers.extend(limits.iter().map(|(n, v)| (*n, v.as_bytes())));
        reply_or_reset(&self.host, 200, &headers, &body);
        self.outcome.status = 200;
        self.state = State::Replied;
        Flow::Pause
    }

    /// The global rate limits refused the part admitting the request: so
    /// they refused the request (named in its log line; its local limits'
    /// admission taken back, as for a request they refuse).
    fn refused_globally(&mut self, headers: &Headers) {
        self.outcome.code = Some(ErrorCode::RateLimited);
        self.admission.global_refusal = Some(global::GlobalRefusal::of_answer(headers));
        if let Some(limits) = &self.admission.limits {
            limits.refund(&self.host);
        }
    }

    /// The gateway key's name: a self-call's is its request's.
    pub(super) fn key_name(&self) -> &str {
        match &self.client.part {
            Some(part) => &part.key,
            None => self.config.auth.caller_name(self.client.caller),
        }
    }

    /// A self-call's end, on the global path (`limits.descriptors`): what
    /// its attempts used, for Envoy's rate limit filter to charge when its
    /// stream is done, under its request's descriptors (set on arrival by
    /// the part that admitted the request, by the others only now, so their
    /// arrival counted nothing). A batch is charged the sum of its parts.
    pub(super) fn settle_part(&self) {
        let (Some(part), Some(chat)) = (&self.client.part, &self.admission.chat) else {
            return;
        };
        if !self.config.limits.descriptors {
            return;
        }
        if !part.admits {
            limiter::expose_descriptors(&self.host, &part.key, &chat.group, &chat.request_model);
        }
        let (records, _) = self.channel.attempts(&self.host);
        let bill = Bill::of(&records, chat.estimated_prompt_tokens, |r| self.price(r));
        limiter::expose_usage(&self.host, meter::budget_usage(&bill));
    }

    /// A self-call's edge: what its attempts were, for the request that
    /// made it (on its answer's headers).
    pub(super) fn report_part(&self) {
        let (records, route) = self.channel.attempts(&self.host);
        let rate_limited = self.admission.global_refusal.is_some();
        let report = PartReport {
            records,
            route,
            rate_limited,
        };
        if let Some(value) = report.encode() {
            ignore(
                self.host
                    .set_header(Map::Response, PART_HEADER.as_bytes(), Some(&value)),
            );
        }
    }

    /// A client's answer: the vendor's batch limit its attempt named is for
    /// a request splitting a batch, never for a client (an internal header;
    /// a 400 for a batch over it says the limit in its message).
    pub(super) fn withhold_batch_limit(&self) {
        if self
            .admission
            .chat
            .as_ref()
            .is_some_and(|c| c.splits_into_parts)
        {
            ignore(
                self.host
                    .set_header(Map::Response, BATCH_LIMIT_HEADER.as_bytes(), None),
            );
        }
    }
}

impl Batch {
    /// The client's request for a part's inputs alone.
    fn part_of(&self, part: Part) -> EmbedRequest {
        let inputs = self.order.get(part.from..part.to).unwrap_or_default();
        let options = self.groups.get(part.group).copied().unwrap_or_default();
        self.request.part(inputs, options)
    }

    /// A part's request: the client's API's, for its inputs (its surface
    /// writes it).
    fn part_request(&self, part: Part) -> Result<(String, Vec<u8>), GatewayError> {
        crate::surfaces::surface(self.call.api).embeddings_part(&self.call, &self.part_of(part))
    }

    /// A part's 2xx answer (as its surface reads it): its vectors in their
    /// places, its usage counted, the model it names kept if it is the first.
    fn keep(&mut self, part: Part, body: &[u8]) -> Result<(), GatewayError> {
        let (answer, named) = crate::surfaces::surface(self.call.api).read_embeddings_part(body)?;
        if self.named.is_none() {
            self.named = named;
        }
        if answer.vectors.len() != part.len() {
            return Err(crate::model::embed::wrong_count(
                part.len(),
                answer.vectors.len(),
            ));
        }
        self.tokens += answer.prompt_tokens.unwrap_or_default();
        self.parts += 1;
        let inputs = self.order.get(part.from..part.to).unwrap_or_default();
        for (&input, vector) in inputs.iter().zip(answer.vectors) {
            if let Some(slot) = self.vectors.get_mut(input) {
                *slot = vector;
            }
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
pub(super) fn part_headers(client: &Headers) -> Vec<(String, Vec<u8>)> {
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
