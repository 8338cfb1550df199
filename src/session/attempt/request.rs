//! The attempt's request: the client's request made the vendor's (a
//! generation through `dialects::encode_generation`, a call, embeddings),
//! addressed, authorized and cleared of what the vendor must not receive.

use super::*;
use crate::dialects::whole::{encode_call, CallRequest};

impl<H: Host> Attempt<H> {
    /// The vendor model for this attempt: the discovered model a request
    /// was routed to, or the candidate's model, when the attempt reached
    /// that candidate's provider, else this provider's own mapping for the
    /// group (a failover to another vendor). The candidate is the one the
    /// edge role chose, or on a ladder rung that rung group's.
    fn vendor_model(&self, provider: &Provider, client_model: &str) -> String {
        let (group, candidate) = match &self.upstream.rung {
            Some(rung) => (rung.as_str(), Some(0)),
            None => (self.asked.group.as_str(), self.asked.candidate),
        };
        let candidate = self
            .config
            .model_groups
            .get(group)
            .and_then(|g| g.candidates.get(candidate?));
        if let (Some(model), Some(c)) = (&self.asked.discovered_model, candidate) {
            let discovery = self.config.discovery.as_ref();
            let on = discovery
                .and_then(|d| d.provider_of(c))
                .or(c.provider.as_deref());
            if on == Some(self.upstream.provider_name.as_str()) {
                return model.clone();
            }
        }
        match candidate {
            Some(c)
                if c.provider.as_deref() == Some(self.upstream.provider_name.as_str())
                    && c.model.is_some() =>
            {
                c.model.clone().unwrap_or_default()
            }
            _ => provider.vendor_model(group, client_model).to_owned(),
        }
    }

    /// Encodes the original body (`size` bytes in Envoy's buffer) for this
    /// attempt's provider and sets the vendor's path, authority and auth.
    pub(super) fn translate_request(&mut self, size: usize) -> Result<(), GatewayError> {
        let parsed;
        let shared = self.channel.request();
        let generation = match shared.as_deref().and_then(Request::generation) {
            Some(generation) => generation,
            None => {
                let body = self.host.body(Buffer::Request, 0, size)?;
                // The path is still the client's: what it says counts.
                let path = self.host.header(Map::Request, ":path").unwrap_or_default();
                let path = String::from_utf8_lossy(&path);
                let (path, query) = path.split_once('?').unwrap_or((&path, ""));
                let facts = match crate::surfaces::route("POST", path, query).map(|r| r.operation) {
                    Some(Ok(crate::surfaces::Operation::Generate(facts))) => facts,
                    _ => crate::surfaces::route::PathFacts::default(),
                };
                parsed = surface(self.asked.api).parse_generation(&facts, &body)?;
                &parsed
            }
        };
        let request = &generation.request;
        let (provider, dialect) = self
            .provider()
            .ok_or_else(|| no_provider(&self.upstream.provider_name))?;
        let model = self.vendor_model(provider, &request.model);
        let target = Target {
            provider,
            model: &model,
        };
        // The same API on both sides: the client's bytes, where the dialect
        // keeps them.
        let unread = Cell::new(None);
        let body = || self.read_client_body(size, &unread);
        let client = ClientRequest {
            body: &body,
            header: &|name| self.host.header(Map::Request, name),
        };
        // Fitted to this model's window (`attempt/fit.rs`): a changed
        // request is encoded from the neutral model.
        let fitted = self.fit(request, &model)?;
        let request = fitted.as_ref().unwrap_or(request);
        let encoded = match (self.cache_limit, &fitted) {
            (None, None) => encode_generation(self.asked.api, &client, request, &target),
            // The response cache reads the answer: translated (`attempt/cache.rs`).
            _ => crate::dialects::encode_translated(request, &target),
        };
        // A client body the proxy could not give is the host's failure,
        // whatever the encoder made of the empty read.
        if let Some(e) = unread.get() {
            return Err(e.into());
        }
        let encoded = encoded?;
        let dropped_web_search = encoded.dropped_web_search;
        let encoded = encoded.request;
        let stream = request.stream;
        let shape = Shape {
            include_usage: request.include_usage,
            choices: request.n.unwrap_or(1).max(1),
        };
        let refitted = fitted.is_some();
        self.send_upstream(provider, dialect, &encoded, Some(size))?;
        self.sent.refitted = refitted;
        self.upstream.model = model;
        self.asked.stream = stream;
        self.asked.shape = shape;
        self.sent.dropped_web_search = dropped_web_search;
        self.surface_state = generation.state.clone();
        // A response the gateway stores is answered under its id.
        if let Some(id) = &self.asked.response_id {
            self.surface_state.set_answer_id(id);
        }
        self.publish_span_attributes(false);
        if stream {
            // For the time to first token (non-streams do not report one).
            self.progress.started = self.host.now();
        }
        Ok(())
    }

    /// A native call, for this attempt's provider: the vendor's request
    /// when its dialect has the call (`Flow::Continue`), else the
    /// gateway's own answer (`Flow::Pause`).
    pub(super) fn translate_call(
        &mut self,
        call: &Call,
        size: usize,
    ) -> Result<Flow, GatewayError> {
        let (provider, dialect) = self
            .provider()
            .ok_or_else(|| no_provider(&self.upstream.provider_name))?;
        let parsed;
        let shared = self.channel.request();
        let request = match shared.as_deref() {
            Some(request) => Some(request),
            None => {
                let body = self.host.body(Buffer::Request, 0, size)?;
                parsed = parse_call_body(call, &body)?;
                parsed.as_ref()
            }
        };
        let client_model = request.map_or(self.asked.group.as_str(), Request::model);
        let model = self.vendor_model(provider, client_model);
        let target = Target {
            provider,
            model: &model,
        };
        // With self-calls on, every embeddings answer tells the edge role
        // its vendor's batch limit (it splits batches by it).
        self.sent.batch_limit.set(
            (self.config.self_calls.as_ref())
                .and(request)
                .and_then(|r| crate::dialects::embed::vendor_limit(r, dialect, &target)),
        );
        // A call that takes a generation's body (a count), as fitted for
        // this model when asked (`attempt/fit.rs`): from the neutral request.
        let generation = request.and_then(Request::chat);
        let fitted = match generation {
            Some(r) if self.asks_fitted_count() => self.fit(r, &model)?,
            _ => None,
        };
        let unread = Cell::new(None);
        let raw = || self.read_client_body(size, &unread);
        let encoded = encode_call(call, request, fitted.as_ref(), &raw, dialect, &target);
        if let Some(e) = unread.get() {
            return Err(e.into());
        }
        let (encoded, whole) = match encoded? {
            CallRequest::Native(encoded) => (encoded, None),
            CallRequest::Whole(whole) => (whole.request, Some(whole.answer)),
            CallRequest::Local => {
                // This vendor lacks the call (a failover onto another API's vendor).
                let answer = call.local_answer(fitted.as_ref().or(generation))?;
                let body = surface(call.api).render_call(call, answer);
                let attempt = self.upstream.attempt.to_string();
                let context = self.context_header();
                let mut headers: Vec<(&str, &[u8])> = vec![
                    ("content-type", b"application/json"),
                    ("x-request-id", self.asked.request_id.as_bytes()),
                    ("x-llm-estimated", b"true"),
                    ("x-llm-attempts", attempt.as_bytes()),
                ];
                headers.extend(
                    context
                        .as_deref()
                        .map(|c| (crate::fitting::HEADER, c.as_bytes())),
                );
                reply_or_reset(&self.host, 200, &headers, &body);
                self.mode = Mode::Passthrough;
                return Ok(Flow::Pause);
            }
        };
        self.send_upstream(provider, dialect, &encoded, call.has_body().then_some(size))?;
        drop(shared);
        self.upstream.model = model;
        self.mode = Mode::Request;
        self.whole = whole;
        Ok(Flow::Continue)
    }

    /// The client's body for a dialect that passes it on; a failed read
    /// is kept in `unread` (and the request then goes no further).
    fn read_client_body(&self, size: usize, unread: &Cell<Option<HostError>>) -> Vec<u8> {
        self.host
            .body(Buffer::Request, 0, size)
            .unwrap_or_else(|e| {
                unread.set(Some(e));
                Vec::new()
            })
    }

    /// Sets the vendor's request: path, authority, its headers and none
    /// of what it must not receive, and the body (replacing the `size`
    /// bytes in Envoy's buffer; `None`: a request without one). Any write
    /// that fails stops the request (the caller answers a 502): half of
    /// it would reach the vendor untranslated or with what it must not get.
    fn send_upstream(
        &self,
        provider: &Provider,
        dialect: &dyn Dialect,
        encoded: &UpstreamRequest,
        body: Option<usize>,
    ) -> Result<(), GatewayError> {
        // A Google access token the gateway obtains (Vertex AI with managed
        // credentials; no host call for other providers): none usable, and
        // the request goes no further.
        let google = crate::session::google_token::authorization(
            &self.host,
            &self.upstream.provider_name,
            provider,
        )?;
        // What the vendor must not receive (credentials, cookies, account
        // selectors, compression, the gateway's and Envoy's own headers,
        // which Envoy adds after the edge role ran), found with one call
        // listing the headers. Header changes persist into the next attempt,
        // so this also clears the previous attempt's vendor headers: every
        // dialect's auth and vendor headers are in the withheld set.
        for (name, _) in self.host.headers(Map::Request)?.0 {
            if !name.starts_with(b":")
                && !vendor_may_receive(&name, &provider.forward_headers)
                && !dialect.takes_client_header(self.asked.api, &name)
            {
                self.host.set_header(Map::Request, &name, None)?;
            }
        }
        if let Some(host) = &provider.host {
            self.host
                .set_header(Map::Request, b":authority", Some(host.as_bytes()))?;
        }
        self.host
            .set_header(Map::Request, b":path", Some(encoded.path.as_bytes()))?;
        for (name, value) in &encoded.headers {
            self.host
                .set_header(Map::Request, name.as_bytes(), Some(value.as_bytes()))?;
        }
        if let Some((authorization, generation)) = google {
            self.host.set_header(
                Map::Request,
                b"authorization",
                Some(authorization.as_bytes()),
            )?;
            self.sent.google_token.set(Some(generation));
        }
        if let Some(size) = body {
            let length = encoded.body.len().to_string();
            self.host
                .set_header(Map::Request, b"content-length", Some(length.as_bytes()))?;
            self.host
                .set_body(Buffer::Request, 0, size, &encoded.body)?;
        }
        Ok(())
    }
}

/// What the client asked of its answer's shape, as its stream writer and
/// the check of a whole answer need it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shape {
    /// A usage report at the end of a stream.
    pub include_usage: bool,
    /// How many choices (Chat's `n`, Gemini's `candidateCount`): a vendor
    /// answering more is in error.
    pub choices: u32,
}

impl Default for Shape {
    fn default() -> Self {
        Self {
            include_usage: false,
            choices: 1,
        }
    }
}
