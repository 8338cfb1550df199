//! The edge role's admission and routing of a request once its body is
//! read: a generation (parse, check, group, limits, candidate) or a call
//! (embeddings, count_tokens, the stored-response calls), handed off to
//! the attempts.

use super::*;

impl<H: Host> Edge<H> {
    /// A generation's body, read (and its stored state fetched): parsed,
    /// admitted and routed, or refused.
    pub(super) fn generate(&mut self, facts: &PathFacts, body: &[u8]) -> Flow {
        match self.on_generate_body(facts, body) {
            // Answered from the response cache, or waiting for the fleet's
            // store or for context fitting's summaries.
            Ok(())
                if matches!(self.state, State::Replied)
                    || self.cache_waits()
                    || self.summaries_wait() =>
            {
                Flow::Pause
            }
            Ok(()) => {
                self.state = State::Forwarded;
                Flow::Continue
            }
            Err(e) => self.reject(e),
        }
    }

    fn on_generate_body(&mut self, facts: &PathFacts, body: &[u8]) -> Result<(), GatewayError> {
        let headers = std::mem::take(&mut self.client.request_headers);
        let max_body_bytes = self.config.limits.max_body_bytes;
        if body.len() as u64 > max_body_bytes {
            return Err(GatewayError::new(
                ErrorCode::PayloadTooLarge,
                format!("request body is larger than {max_body_bytes} bytes"),
            ));
        }
        // The gateway's stored state, resolved into the whole conversation.
        let mut resolved = self.resolve_state(body)?;
        let limits = &self.config.limits;
        let rewritten = resolved.as_mut().map(|r| std::mem::take(&mut r.body));
        let body = rewritten.as_deref().unwrap_or(body);
        let Generation { request, mut state } =
            surface(self.client.api).parse_generation(facts, body)?;
        check_counts(limits, &request)?;
        if let Some(id) = &request.request_id {
            if !valid_request_id(id) {
                return Err(GatewayError::invalid(
                    "request_id",
                    "request_id must be 1-128 characters of [A-Za-z0-9._:-]",
                ));
            }
            self.client.request_id.clone_from(id);
            self.host
                .set_header(Map::Request, b"x-request-id", Some(id.as_bytes()))?;
        }
        let task_type = request
            .extra
            .get("metadata")
            .and_then(|m| m.get("task_type"))
            .and_then(serde_json::Value::as_str);
        let config = Rc::clone(&self.config);
        let text = |name: &str| headers.text(name).ok().flatten();
        let request_header = |name: &str| text(name).map(str::to_owned);
        let (group, model_group, discovered) = self.resolve_group(
            &config,
            text("x-model-group"),
            &request.model,
            &request_header,
            task_type,
        )?;
        self.admission.discovered = discovered;
        config.auth.check_group(self.client.caller, group)?;
        // Sticky by user when the request names one; otherwise spread by request id.
        let user = text("x-user-id")
            .map(str::to_owned)
            .or_else(|| request.user.clone());
        let bucket_key = match &user {
            Some(u) => u.as_bytes().to_vec(),
            None => next_spread_key(&self.client.request_id),
        };
        let needs = Needs::of(&request);
        self.admission.chat = Some(ChatFacts {
            operation: GENERATION,
            group: group.to_owned(),
            request_model: request.model.clone(),
            stream: request.stream,
            estimated_prompt_tokens: needs.prompt_tokens,
            ..ChatFacts::default()
        });
        // The response cache: a hit is answered here (`edge/cache.rs`).
        if let Some(settings) = &model_group.cache {
            let control = crate::cache::Control::parse(text("cache-control"));
            // Run again once the fleet's store answered (unless its body
            // is the stored state's rewrite).
            let resume = resolved.is_none().then_some((facts, body));
            let asked = (&request, &state);
            match self.consult_cache(group, settings, asked, (control, &headers), resume)? {
                cache::Consulted::Go => {}
                cache::Consulted::Answered => return Ok(()),
                cache::Consulted::Waiting => {
                    self.client.request_headers = headers;
                    return Ok(());
                }
            }
        }
        self.admit(group, |config| {
            limiter::reservation(
                config,
                group,
                &request.model,
                needs.prompt_tokens,
                needs.output_tokens,
            )
        })?;
        if config.limits.descriptors {
            let key = config.auth.caller_name(self.client.caller);
            limiter::expose_descriptors(&self.host, key, group, &request.model);
        }
        // Context fitting: which window the candidates are routed by.
        let (first, then) = needs.fitted_by(model_group.fitting.as_ref());
        let choose = |needs: &Needs| {
            self.choose(
                &config,
                group,
                model_group,
                needs,
                &bucket_key,
                &request.model,
                |_| true,
            )
        };
        let index = match (choose(&first), then) {
            (Err(e), Some(then)) if e.code == ErrorCode::ContextLengthExceeded => choose(&then)?,
            (chosen, _) => chosen?,
        };
        // Context fitting's summaries, made before the first attempt.
        let summarising = self.plan_summaries((group, model_group), &request, &needs);
        let capture_limit = model_group.cache.as_ref().map(|c| c.max_entry_bytes);
        self.admission.sent_to = Some(index);
        let (group, cluster) = (group.to_owned(), cluster_of(model_group, index));
        let response_id = self.plan_store(body, &mut state, resolved);
        self.hand_off(
            group,
            cluster,
            index,
            None,
            Some(Request::Chat(Box::new(Generation { request, state }))),
            response_id,
        )?;
        if let Some(limit) = capture_limit {
            self.order_capture(limit);
        }
        if let Some(summarising) = summarising {
            self.start_summaries(summarising, &headers);
        }
        Ok(())
    }

    /// Admits the request by its rate limits (when there are any), with
    /// what `reserve` says it may use (computed only then).
    pub(super) fn admit(
        &mut self,
        group: &str,
        reserve: impl FnOnce(&Config) -> Reservation,
    ) -> Result<(), GatewayError> {
        let config = Rc::clone(&self.config);
        if config.limits.rate.is_empty() {
            return Ok(());
        }
        let reservation = reserve(&config);
        let key = matches!(self.client.caller, crate::auth::Caller::Key(_))
            .then(|| config.auth.caller_name(self.client.caller));
        let (limits, refused) = RequestLimits::admit(&self.host, &config, key, group, reservation);
        self.admission.limits = Some(limits);
        refused.map_or(Ok(()), Err)
    }

    /// Routes the request to candidate `index` of `group` and hands it
    /// off to the attempts (with the parsed request, when it has one). Both
    /// writes must take: without the handoff an attempt would pass the
    /// client's request on untranslated.
    fn hand_off(
        &mut self,
        group: String,
        cluster: String,
        index: usize,
        call: Option<Call>,
        request: Option<Request>,
        response_id: Option<String>,
    ) -> Result<(), GatewayError> {
        self.host.set_header(
            Map::Request,
            CLUSTER_HEADER.as_bytes(),
            Some(cluster.as_bytes()),
        )?;
        if let Some((token, shared)) = exchange::open(request) {
            self.exchange = Some(token);
            self.channel = AttemptChannel::InVm(shared);
        }
        let handoff = Handoff {
            api: self.client.api,
            call,
            token: self.exchange,
            candidate: Some(index),
            request_id: self.client.request_id.clone(),
            group,
            response_id,
            model: self
                .admission
                .discovered
                .as_ref()
                .map(|(_, model)| model.clone()),
        };
        self.host
            .set_property(&[HANDOFF_PROPERTY], Some(handoff.encode().as_bytes()))?;
        Ok(())
    }

    /// A native call's headers: it waits for its body, or is routed now. A
    /// call that takes no body waits too when one follows, to refuse it
    /// (no byte the gateway did not read reaches a vendor with its key).
    pub(super) fn on_call_headers(
        &mut self,
        call: Call,
        end_of_stream: bool,
    ) -> Result<Flow, GatewayError> {
        if call.has_body() {
            self.check_body_headers(end_of_stream)?;
            self.state = State::Call(call);
            return Ok(Flow::Pause);
        }
        if !end_of_stream {
            self.check_body_length()?;
            self.state = State::Call(call);
            return Ok(Flow::Pause);
        }
        self.route_call(call, None)
    }

    /// Routes a call like a generation (model group, key, rate limits as
    /// one request and, for embeddings, their input tokens, a candidate
    /// that has the call) to be passed to a vendor that has it; answered
    /// here when no provider of the group has it (`dialects::has_call`).
    pub(super) fn route_call(
        &mut self,
        call: Call,
        request: Option<Request>,
    ) -> Result<Flow, GatewayError> {
        // A response the gateway stored: answered from its store.
        if let Some((op, id)) = call.stored_response() {
            if crate::responses_store::is_gateway_id(id) {
                self.admission.chat = Some(ChatFacts {
                    operation: call.operation_name(),
                    ..ChatFacts::default()
                });
                return self.answer_stored(op, id, &call.query);
            }
        }
        let config = Rc::clone(&self.config);
        let header = self.client.text("x-model-group").map(str::to_owned);
        let header = header.as_deref();
        let text = |name: &str| self.client.text(name).map(str::to_owned);
        let (group, model_group, discovered) = match &request {
            Some(request) => self.resolve_group(&config, header, request.model(), &text, None)?,
            // Nothing names a model: the header does, or the default group.
            None => match header.or(config.default_model_group.as_deref()) {
                Some(name) => {
                    let (name, group) = config.resolve_group(Some(name), "", &|_| None, None)?;
                    (name, group, None)
                }
                None => {
                    return Err(GatewayError::invalid(
                        "x-model-group",
                        "name the model group whose vendor holds the response in the \
                         x-model-group header (the gateway has no default model group)",
                    ))
                }
            },
        };
        config.auth.check_group(self.client.caller, group)?;
        self.admission.discovered = discovered;
        // Embeddings are billed and limited by their input tokens.
        let input_tokens = request.as_ref().map_or(0, Request::call_input_tokens);
        let request_model = request.as_ref().map(|r| r.model().to_owned());
        let user = request
            .as_ref()
            .and_then(Request::call_user)
            .map(str::to_owned);
        self.admission.chat = Some(ChatFacts {
            operation: call.operation_name(),
            splits_into_parts: call.splits_into_parts(),
            group: group.to_owned(),
            request_model: request_model.clone().unwrap_or_default(),
            estimated_prompt_tokens: input_tokens,
            ..ChatFacts::default()
        });
        let speaks = |name: &str| {
            config
                .providers
                .get(name)
                .is_some_and(|p| has_call(dialect(p.dialect), p, &call))
        };
        // A candidate whose provider the configuration does not name may have it.
        let has_it = |c: &Candidate| c.provider.as_deref().is_none_or(speaks);
        if !model_group.candidates.iter().any(has_it) {
            let chat = request.as_ref().and_then(Request::chat);
            let answer = call.local_answer(chat)?;
            let body = crate::surfaces::surface(call.api).render_call(&call, answer);
            return Ok(self.reply_json(&body, &[("x-llm-estimated", b"true")]));
        }
        let model = request_model.unwrap_or_default();
        // A self-call's request was admitted for it (`session::self_call`).
        if self.client.part.is_none() {
            self.admit(group, |config| {
                limiter::reservation(config, group, &model, input_tokens, Some(0))
            })?;
        }
        if config.limits.descriptors && self.client.part.as_ref().is_none_or(|p| p.admits) {
            limiter::expose_descriptors(&self.host, self.key_name(), group, &model);
        }
        let bucket_key = match self.client.text("x-user-id").map(str::to_owned).or(user) {
            Some(user) => user.into_bytes(),
            None => next_spread_key(&self.client.request_id),
        };
        let needs = Needs {
            prompt_tokens: input_tokens,
            ..NO_NEEDS
        };
        let client_model = request.as_ref().map_or("", Request::model);
        let index = match self.client.part.as_ref().map(|p| p.candidate) {
            // A self-call goes to the candidate its request chose.
            Some(index) if index < model_group.candidates.len() => index,
            Some(_) => {
                return Err(GatewayError::invalid(
                    "x-llm-candidate",
                    "no such candidate",
                ))
            }
            None => self.choose(
                &config,
                group,
                model_group,
                &needs,
                &bucket_key,
                client_model,
                has_it,
            )?,
        };
        let (group, cluster) = (group.to_owned(), cluster_of(model_group, index));
        let request = match self.split_batch(&call, request, &group, index)? {
            batch::Sent::Split(flow) => return Ok(flow),
            batch::Sent::Whole(request) => request,
        };
        self.hand_off(group, cluster, index, Some(call), request, None)?;
        self.state = State::Forwarded;
        Ok(Flow::Continue)
    }
}

/// The configured message and tool limits (generations and count_tokens alike).
pub(super) fn check_counts(
    limits: &crate::config::Limits,
    request: &ChatRequest,
) -> Result<(), GatewayError> {
    if request.messages.len() > limits.max_messages {
        return Err(GatewayError::invalid(
            "messages",
            format!("at most {} messages are accepted", limits.max_messages),
        ));
    }
    if request.tools.len() > limits.max_tools {
        return Err(GatewayError::invalid(
            "tools",
            format!("at most {} tools are accepted", limits.max_tools),
        ));
    }
    Ok(())
}

fn cluster_of(model_group: &ModelGroup, index: usize) -> String {
    model_group
        .candidates
        .get(index)
        .map(|c| c.cluster.clone())
        .unwrap_or_default()
}

/// What a native call needs of a candidate: nothing a generation would.
const NO_NEEDS: Needs = Needs {
    tools: false,
    vision: false,
    json: false,
    prompt_tokens: 0,
    output_tokens: None,
};

/// A per-request key that spreads requests over candidates by weight: the
/// request id, plus a counter so repeated ids still spread.
fn next_spread_key(request_id: &str) -> Vec<u8> {
    thread_local! {
        static COUNTER: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    let n = COUNTER.with(|c| {
        let n = c.get().wrapping_add(1);
        c.set(n);
        n
    });
    let mut key = request_id.as_bytes().to_vec();
    key.extend_from_slice(&n.to_le_bytes());
    key
}
