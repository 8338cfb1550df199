//! The edge role's metering when a request ends: metrics, the access-log
//! line, budgets settled, tracing attributes.

use super::*;

impl<H: Host> Edge<H> {
    /// The request's metrics, access-log line and tracing attributes, from
    /// the last attempt's record (also when the client left mid-stream).
    pub(super) fn meter(&self, chat: &ChatFacts) {
        let fetched;
        let (records, route) = match &self.outcome.final_attempts {
            Some(attempts) => attempts,
            None => {
                fetched = self.attempts();
                &fetched
            }
        };
        let no_attempt = AttemptRecord::default();
        let record = records.last().unwrap_or(&no_attempt);
        let reached_vendor = !record.provider.is_empty();
        // Every attempt a vendor answered is billed, not only the last;
        // a split batch's, part by part.
        let price = |r: &AttemptRecord| self.price(r);
        let mut bill = match &self.batch {
            Some(batch) => batch.bill(price),
            None => Bill::of(records, chat.estimated_prompt_tokens, price),
        };
        let unanswered = bill.attempts.is_empty()
            && !self.outcome.response_complete
            && matches!(self.state, State::Forwarded);
        // The attempt Envoy reset names its provider; else the candidate does.
        let sent_to = match records.last().filter(|r| !r.provider.is_empty()) {
            Some(r) => Some((r.provider.clone(), r.model.clone())),
            None if unanswered => self.candidate_sent_to(chat),
            None => None,
        };
        if let (true, Some((provider, model))) = (unanswered, &sent_to) {
            let price = match self.config.providers.get(provider) {
                Some(p) => price_for(&p.prices, model),
                None => limiter::dearest_price(&self.config, &chat.group, &chat.request_model),
            };
            bill.charge_unanswered(provider, model, chat.estimated_prompt_tokens, price);
        }
        let used = budget_usage(&bill);
        let (usage, estimated, cost) = (bill.usage, bill.usage_estimated, bill.cost_usd);
        let budget_alerts = match &self.admission.limits {
            Some(limits) => limits.settle(&self.host, used),
            None => Vec::new(),
        };
        if self.config.limits.descriptors {
            limiter::expose_usage(&self.host, used);
        }
        // An answer that never ended: the client left, or the vendor's side broke.
        let cut_short = (reached_vendor || unanswered) && !self.outcome.response_complete;
        let client_disconnected = cut_short
            && !self
                .host
                .property(&["response", "code_details"])
                .ok()
                .flatten()
                .is_some_and(|d| d.starts_with(b"upstream"));
        let vendor_failed =
            (cut_short && !client_disconnected).then_some(ErrorCode::UpstreamError.as_str());
        let code = self
            .outcome
            .code
            .map(ErrorCode::as_str)
            .or(record.code.as_deref())
            .or(vendor_failed);
        let status = self.outcome.status.to_string();
        let key = self.config.auth.caller_name(self.client.caller);
        let duration_ms = micros_since(&self.host, self.outcome.started) / 1000;
        let (provider, model, group) = (
            record.provider.as_str(),
            record.model.as_str(),
            chat.group.as_str(),
        );

        let attempts = route.len() as u64;
        // The per-request series (off with `request_metrics: false`: the
        // access log below carries the same facts).
        if self.config.request_metrics {
            let who = [
                ("provider", provider),
                ("model", model),
                ("group", group),
                ("key", key),
            ];
            ignore(self.host.count(
                "llm_gateway.requests",
                &[
                    ("group", group),
                    ("provider", provider),
                    ("model", model),
                    ("status", &status),
                    ("code", code.unwrap_or("")),
                    ("key", key),
                    ("surface", self.client.api.name()),
                    ("operation", chat.operation),
                ],
                1,
            ));
            // Every attempt, under its provider and model and how it ended.
            for r in records.iter().filter(|r| !r.provider.is_empty()) {
                ignore(self.host.count(
                    "llm_gateway.attempts",
                    &[
                        ("group", group),
                        ("provider", &r.provider),
                        ("model", &r.model),
                        ("status", &r.outcome()),
                        ("code", r.code.as_deref().unwrap_or("")),
                    ],
                    1,
                ));
            }
            // Tokens and cost under the provider and model of the attempt that used them.
            for attempt in &bill.attempts {
                let who = [
                    ("provider", attempt.provider.as_str()),
                    ("model", attempt.model.as_str()),
                    ("group", group),
                    ("key", key),
                ];
                let c = &attempt.counts;
                for (token_type, n) in [
                    ("input", c.prompt_tokens),
                    ("output", c.completion_tokens),
                    ("cached", c.cached_tokens),
                    ("reasoning", c.reasoning_tokens),
                ] {
                    let [p, m, g, k] = who;
                    ignore(self.host.count(
                        "gen_ai.client.token.usage",
                        &[
                            ("token_type", token_type),
                            p,
                            m,
                            g,
                            k,
                            ("operation", chat.operation),
                        ],
                        n,
                    ));
                }
                if let Some(cost) = c.cost_usd {
                    ignore(self.host.count(
                        "llm_gateway.cost_micro_usd",
                        &who,
                        (cost * 1e6).round() as u64,
                    ));
                }
            }
            if reached_vendor {
                ignore(self.host.record(
                    "gen_ai.server.request.duration_ms",
                    &who[..3],
                    duration_ms,
                ));
            }
            if let Some(ttft) = record.ttft_ms {
                ignore(
                    self.host
                        .record("gen_ai.server.time_to_first_token_ms", &who[..2], ttft),
                );
            }
            let one = |name: &str, labels: &[(&str, &str)], yes: bool| {
                ignore(self.host.count(name, labels, u64::from(yes)));
            };
            ignore(self.host.count(
                "llm_gateway.failovers",
                &[("group", group)],
                attempts.saturating_sub(1),
            ));
            one(
                "llm_gateway.content_filtered",
                &who[..1],
                record.content_filtered(),
            );
            one("llm_gateway.usage_estimated", &who[..1], estimated);
            one(
                "llm_gateway.client_disconnects",
                &who[..1],
                client_disconnected,
            );
            if let Some(caching) = &self.cache {
                self.meter_cache(group, caching);
            }
        }

        let log = RequestLog {
            request_id: &self.client.request_id,
            surface: self.client.api.name(),
            operation: chat.operation,
            key,
            group,
            status: self.outcome.status,
            code,
            attempts,
            route: route.iter().map(String::as_str).collect(),
            provider,
            model,
            stream: chat.stream,
            counts: TokenCounts::new(&usage, estimated, cost),
            attempt_usage: &bill.attempts,
            ttft_ms: record.ttft_ms,
            duration_ms,
            delivered_tokens: record.delivered_tokens,
            client_disconnected,
            rate_limit: self
                .admission
                .limits
                .as_ref()
                .and_then(|l| l.refused.as_ref())
                .map(|(name, _)| name.as_str())
                .or(self
                    .admission
                    .global_refusal
                    .as_ref()
                    .map(|r| r.log_name.as_str())),
            budget_alerts: &budget_alerts,
            cache: self.cache.as_ref().map(|c| c.status.as_str()),
            cache_saved_usd: self.cache.as_ref().and_then(|c| c.saved_usd),
            context: record.context.as_deref(),
        };
        if let Ok(line) = serde_json::to_vec(&log) {
            ignore(self.host.set_property(&[LOG_PROPERTY], Some(&line)));
        }
        if let Some(settings) = &self.config.diagnostics {
            self.record_trace(settings, chat, records, &log);
        }
        // Published already when the response ended; not so for a client that left.
        if self.outcome.final_attempts.is_none() {
            self.publish_span_attributes(chat, record, route, &usage);
        }
    }
}

impl<H: Host> Edge<H> {
    /// The provider (empty when the cluster's endpoints name it) and the
    /// vendor model of the candidate a generation was handed to.
    /// What an attempt's vendor charges, from its provider's prices.
    pub(super) fn price(&self, record: &AttemptRecord) -> Option<&crate::metering::Price> {
        (self.config.providers.get(&record.provider))
            .and_then(|p| price_for(&p.prices, &record.model))
    }

    fn candidate_sent_to(&self, chat: &ChatFacts) -> Option<(String, String)> {
        let group = self.config.model_groups.get(&chat.group)?;
        let candidate = group.candidates.get(self.admission.sent_to?)?;
        let provider = candidate.provider.clone().unwrap_or_default();
        let model = candidate.model.clone().unwrap_or_else(|| {
            self.config.providers.get(&provider).map_or_else(
                || chat.request_model.clone(),
                |p| p.vendor_model(&chat.group, &chat.request_model).to_owned(),
            )
        });
        Some((provider, model))
    }

    /// Every attempt's record and route entry (a split batch's: its parts').
    fn attempts(&self) -> (Vec<AttemptRecord>, Vec<String>) {
        match &self.batch {
            Some(batch) => batch.attempts(),
            None => self.channel.attempts(&self.host),
        }
    }

    /// Filter state for tracing custom tags (envoy/tracing.yaml), when the
    /// configuration asks for it. Envoy reads the tags when it closes the
    /// span, before `on_log`, so this runs when the response ends (and again
    /// from `on_log` for a client that left).
    fn publish_span_attributes(
        &self,
        chat: &ChatFacts,
        record: &AttemptRecord,
        route: &[String],
        usage: &Usage,
    ) {
        if !self.config.span_attributes || record.provider.is_empty() {
            return;
        }
        let provider = self.config.providers.get(&record.provider);
        let names = span_provider_properties(&record.provider, provider);
        for (name, value) in names.into_iter().flat_map(|(n, v)| Some((n, v?))).chain([
            ("llm_request_model", chat.request_model.as_str()),
            ("llm_response_model", record.model.as_str()),
            ("llm_input_tokens", &usage.prompt_tokens.to_string()),
            ("llm_output_tokens", &usage.completion_tokens.to_string()),
            ("llm_group", chat.group.as_str()),
            (ROUTE_PROPERTY, &route.join(",")),
        ]) {
            ignore(self.host.set_span_attribute(name, Some(value.as_bytes())));
        }
    }

    /// The response is complete: what tracing needs must be in place now.
    pub(super) fn on_response_end(&mut self) {
        self.outcome.response_complete = true;
        if let Some(chat) = &self.admission.chat {
            let (records, route) = self.attempts();
            let no_attempt = AttemptRecord::default();
            let record = records.last().unwrap_or(&no_attempt);
            let (usage, _) = record.usage_or_estimate(chat.estimated_prompt_tokens);
            self.publish_span_attributes(chat, record, &route, &usage);
            self.outcome.final_attempts = Some((records, route));
        }
    }
}

/// What a bill uses of the rate limits' budgets.
pub(super) fn budget_usage(bill: &Bill) -> LimitUsage {
    LimitUsage {
        input: bill.usage.prompt_tokens,
        output: bill.usage.completion_tokens,
        micro_usd: bill.cost_usd.map_or(0, |c| (c * 1e6).round() as u64),
    }
}
