//! The attempt's answer: the vendor's headers, a buffered body (decoded
//! and rendered in the client's API, or the vendor's error in its
//! envelope) or a stream translated chunk by chunk.

use super::*;

impl<H: Host> Attempt<H> {
    /// A vendor error (its key is scrubbed from the rendered answer).
    fn vendor_error(&self, status: u16, body: &[u8]) -> GatewayError {
        let Some((_, dialect)) = self.provider() else {
            return no_provider(&self.upstream.provider_name);
        };
        if status == 401 && self.sent.google_token.get().is_some() {
            // Vertex AI refused the token the gateway obtained (revoked,
            // rotated), not a credential of the client's: a 503 Envoy's
            // retry policy (`5xx`) and SDKs retry; the next attempt waits
            // for the token fetched in its place.
            let mut e = GatewayError::new(
                ErrorCode::UpstreamBusy,
                "Vertex AI refused the gateway's Google access token (HTTP 401); the gateway is obtaining a new one: retry shortly",
            );
            e.retry_after = Some(1);
            return e.with_provider(&self.upstream.provider_name);
        }
        dialect
            .decode_error(status, body)
            .with_provider(&self.upstream.provider_name)
    }

    /// Masks this provider's key in bytes made from its answer: every
    /// body, chunk and error we pass on goes through here.
    pub(super) fn scrub(&self, bytes: &mut Vec<u8>) {
        if let Some((provider, _)) = self.provider() {
            provider.redactor.scrub(bytes);
        }
    }

    /// Turns the held response into a unified error answer (status included),
    /// replacing the `len` bytes waiting in Envoy's buffer.
    pub(super) fn answer_with_error(
        &mut self,
        error: &GatewayError,
        len: usize,
    ) -> Result<(), HostError> {
        let error = error.clone().with_provider(&self.upstream.provider_name);
        let status = error.status().to_string();
        self.host
            .set_header(Map::Response, b":status", Some(status.as_bytes()))?;
        self.set_retry_after(&error)?;
        let error = self.with_wait(error);
        self.host
            .set_header(Map::Response, b"content-type", Some(b"application/json"))?;
        self.host
            .set_header(Map::Response, b"cache-control", None)?;
        let mut body = surface(self.asked.api).render_error(&error, Some(&self.asked.request_id));
        self.scrub(&mut body);
        self.host.set_body(Buffer::Response, 0, len, &body)
    }

    /// The error with the wait its answer's `retry-after` says (whoever set
    /// it), for an envelope that carries it (Gemini's `RetryInfo`).
    fn with_wait(&self, mut error: GatewayError) -> GatewayError {
        if error.retry_after.is_none() {
            error.retry_after = self
                .host
                .header(Map::Response, "retry-after")
                .and_then(|v| std::str::from_utf8(&v).ok()?.trim().parse().ok());
        }
        error
    }

    /// A buffered answer of `size` bytes, as the client gets it.
    pub(super) fn finish_answer(&mut self, size: usize) -> Result<Vec<u8>, HostError> {
        let mut body = self.host.body(Buffer::Response, 0, size)?;
        match self.mode {
            Mode::Error(status) => self.finish_buffered(Some(status), &body),
            Mode::Native => {
                self.scrub(&mut body);
                Ok(body)
            }
            _ => self.finish_buffered(None, &body),
        }
    }

    fn finish_buffered(&mut self, status: Option<u16>, body: &[u8]) -> Result<Vec<u8>, HostError> {
        // An operation answered whole: decoded into its neutral answer,
        // which the call's surface writes; the usage the vendor counted is
        // recorded (without one the edge role bills its estimate).
        let whole = match &self.mode {
            Mode::Whole(answer) if status.is_none() => {
                Some(answer.finish(body, &self.upstream.model))
            }
            _ => None,
        };
        let result = match (status, self.provider(), whole) {
            (_, _, Some(finished)) => finished.and_then(|finished| {
                if let Some(usage) = &finished.usage {
                    self.record.set_usage(usage);
                }
                let call = self.asked.call.as_ref().ok_or_else(|| {
                    GatewayError::new(ErrorCode::UpstreamError, "an answer without its call")
                })?;
                Ok(surface(call.api).render_call(call, finished.answer))
            }),
            (None, Some((provider, dialect)), None) => {
                let mut origin = self.origin();
                let decoded = if self.passes_through(provider, dialect) {
                    dialect.decode_native(self.asked.api, body, &mut origin)
                } else {
                    dialect.decode_response(body, &mut origin)
                };
                let choices = usize::try_from(self.asked.shape.choices).unwrap_or(usize::MAX);
                let decoded = decoded.and_then(|d| match &d.answer {
                    crate::model::response::Answer::Decoded(c) if c.more.len() >= choices => {
                        Err(GatewayError::new(
                            ErrorCode::UpstreamError,
                            format!(
                                "the provider answered {} choices for {choices} asked for",
                                c.more.len() + 1
                            ),
                        ))
                    }
                    _ => Ok(d),
                });
                decoded.map(|d| {
                    if let crate::model::response::Answer::Decoded(completion) = &d.answer {
                        self.capture_whole(completion, &origin);
                    }
                    if let Some(usage) = &d.usage {
                        self.record.set_usage(usage);
                        self.record.delivered_tokens = usage.completion_tokens;
                    }
                    self.record.finish_reason = d.finish_reason.map(|f| f.as_str().to_owned());
                    surface(self.asked.api).render_answer(d.answer, &origin, &self.surface_state)
                })
            }
            (Some(status), _, _) => Err(self.vendor_error(status, body)),
            (None, None, _) => Err(no_provider(&self.upstream.provider_name)),
        };
        if result.is_err() || !self.vendor.json {
            self.host
                .set_header(Map::Response, b"content-type", Some(b"application/json"))?;
        }
        let mut body = match result {
            Ok(body) => body,
            Err(error) => {
                let error = error.with_provider(&self.upstream.provider_name);
                self.record.status = error.status();
                self.record.code = Some(error.code.as_str().to_owned());
                let status = error.status().to_string();
                self.host
                    .set_header(Map::Response, b":status", Some(status.as_bytes()))?;
                self.set_retry_after(&error)?;
                let error = self.with_wait(error);
                surface(self.asked.api).render_error(&error, Some(&self.asked.request_id))
            }
        };
        self.scrub(&mut body);
        Ok(body)
    }

    /// Translates one response chunk. While holding, Envoy's buffer is the
    /// held output followed by the new raw bytes, and is replaced whole:
    /// Envoy only lets a filter replace a buffer's prefix or append to it.
    pub(super) fn translate_chunk(
        &mut self,
        size: usize,
        end_of_stream: bool,
    ) -> Result<(), HostError> {
        let timer = self.timer();
        let buffer = self.host.body(Buffer::Response, 0, size)?;
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let (decoder, raw) = match &mut self.mode {
            Mode::Stream(decoder) => (decoder, buffer.as_slice()),
            Mode::Holding { decoder, held, .. } => {
                (decoder, buffer.get(held.len()..).unwrap_or_default())
            }
            _ => return Ok(()),
        };
        decoder.feed(raw, &mut out);
        if end_of_stream {
            decoder.finish(&mut out);
        }
        self.scrub(&mut out);
        let replacement = match &mut self.mode {
            Mode::Holding { held, .. } => {
                held.extend_from_slice(&out);
                held.as_slice()
            }
            _ => out.as_slice(),
        };
        let written = self.host.set_body(Buffer::Response, 0, size, replacement);
        self.out = out;
        timer.stop(&self.host, Phase::Chunk);
        written
    }

    /// The vendor's response headers: what passes, masked, and ours set;
    /// `Err`: a call on them failed (the answer is then withheld).
    pub(super) fn answer_headers(&mut self, end_of_stream: bool) -> Result<Flow, HostError> {
        let headers = self.host.headers(Map::Response)?;
        let status = headers
            .text(":status")
            .ok()
            .flatten()
            .and_then(|s| s.parse::<u16>().ok())
            .unwrap_or(0);
        self.record = AttemptRecord {
            provider: self.upstream.provider_name.clone(),
            model: self.upstream.model.clone(),
            status,
            stream: self.asked.stream,
            ..AttemptRecord::default()
        };
        // Not UTF-8: not a content type we know (the answer is then an error).
        let content_type = headers
            .text("content-type")
            .ok()
            .flatten()
            .unwrap_or_default();
        self.pass_vendor_headers(&headers, (200..300).contains(&status))?;
        self.vendor.retry_after = headers.has("retry-after");
        self.vendor.wait_headers = WAIT_HEADERS.iter().any(|name| headers.has(name));
        self.vendor.retry_after_ms = headers
            .text("retry-after-ms")
            .ok()
            .flatten()
            .and_then(|ms| ms.trim().parse::<f64>().ok())
            .filter(|ms| ms.is_finite() && *ms >= 0.0)
            .map(|ms| (ms / 1000.0).ceil() as u64);
        // Every header of the answer is part of it: one that fails, and
        // the answer is withheld (the edge role tells the attempt's answer
        // from Envoy's by `x-llm-provider`).
        self.host.set_header(
            Map::Response,
            b"x-llm-provider",
            Some(self.upstream.provider_name.as_bytes()),
        )?;
        self.host.set_header(
            Map::Response,
            b"x-llm-model",
            Some(self.upstream.model.as_bytes()),
        )?;
        let attempt = self.upstream.attempt.to_string();
        self.host
            .set_header(Map::Response, b"x-llm-attempts", Some(attempt.as_bytes()))?;
        if self.sent.dropped_web_search {
            self.host
                .set_header(Map::Response, b"x-llm-dropped-tools", Some(b"web_search"))?;
        }
        if let Some(context) = self.context_header() {
            self.host.set_header(
                Map::Response,
                crate::fitting::HEADER.as_bytes(),
                Some(context.as_bytes()),
            )?;
            self.record.context = Some(context);
        }
        if let Some(max) = self.sent.batch_limit.get() {
            self.host.set_header(
                Map::Response,
                BATCH_LIMIT_HEADER.as_bytes(),
                Some(max.to_string().as_bytes()),
            )?;
        }
        self.host
            .set_header(Map::Response, b"content-length", None)?;
        let entry = self.route_entry();
        self.channel
            .set_route(&self.host, self.upstream.attempt, &entry, None);
        self.save_record();
        if !(200..300).contains(&status) {
            if let (401, Some(generation), Some((provider, _))) =
                (status, self.sent.google_token.get(), self.provider())
            {
                crate::session::google_token::unauthorized(
                    &self.host,
                    &self.upstream.provider_name,
                    provider,
                    generation,
                );
            }
            self.mode = Mode::Error(status);
            return Ok(Flow::Pause);
        }
        // A vendor accepted the request: a stream need not keep it parsed.
        self.channel.release_request();
        if let Some(answer) = self.whole.take() {
            if !answer.uses_tokens() {
                // Nothing to bill or estimate.
                self.record.set_usage(&Usage::default());
            }
            self.mode = Mode::Whole(answer);
            return Ok(Flow::Pause);
        }
        if self.asked.call.is_some() {
            // A native call uses no tokens (nothing to bill or estimate).
            self.record.set_usage(&Usage::default());
            self.mode = Mode::Native;
            return Ok(Flow::Pause);
        }
        let Some((provider, dialect)) = self.provider() else {
            return Ok(self.fail(no_provider(&self.upstream.provider_name)));
        };
        let native = self.passes_through(provider, dialect);
        self.vendor.json = content_type.starts_with("application/json");
        if self.asked.stream && dialect.is_stream_content_type(content_type) {
            let writer = self.client_writer(native);
            let decoder = dialect.stream_decoder(writer);
            self.host
                .set_header(Map::Response, b"content-type", Some(b"text/event-stream"))?;
            self.host
                .set_header(Map::Response, b"cache-control", Some(b"no-cache"))?;
            if self.config.streaming.hold_until_first_content && !end_of_stream {
                self.mode = Mode::Holding {
                    decoder,
                    since: self.host.now(),
                    held: Vec::new(),
                };
                return Ok(Flow::Pause);
            }
            self.mode = Mode::Stream(decoder);
            return Ok(Flow::Continue);
        }
        // A 2xx that is not what we asked for (e.g. JSON to a stream request) is an error.
        self.mode = if self.asked.stream {
            Mode::Error(status)
        } else {
            Mode::Complete
        };
        Ok(Flow::Pause)
    }
}
